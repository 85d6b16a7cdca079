"""The training loop: one run of a ``RunConfig``, checkpointed with its config, resumable."""

import math
import os
import re
import time

import torch
import torch.nn.functional as F

from abcmini import __version__
from abcmini.bias_files import check_bias_matches, load_bias
from abcmini.errors import UserError
from abcmini.evaluate import exact_match
from abcmini.experiment import RunConfig, learning_rate, run_config_of, train_on_end
from abcmini.nn.decoder import build_model
from abcmini.nn.scaffold_state import ScaffoldStateError, check_scaffold_state
from abcmini.nn.scaffolds import scaffold_from_state
from abcmini.nn.windows import Window
from abcmini.store import CheckpointError, load_checkpoint, save_checkpoint
from abcmini.tasks import (
    PAD,
    Example,
    Pool,
    by_length,
    format_task,
    input_parts,
    mixed,
    operand_draw,
    top_heavy,
    training_operands,
    validation_counts,
)

BUDGET = ("steps", "stop_at", "train_on", "min_steps")  # what a resumed run may change


def device_name(device: torch.device) -> str:
    """A device as a record names it: the GPU's model (``NVIDIA H200``), else its kind (``CPU``)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type.upper()


def seconds_by_device(history: list[dict]) -> dict[str, float]:
    """Training seconds per device, from a run's history: each entry names the device of the
    steps since the entry before (a run resumed elsewhere spans several); entries from before
    they named one count as ``unrecorded``."""
    spent, before = {}, 0.0
    for entry in history:
        where = entry.get("device", "unrecorded")
        spent[where] = round(spent.get(where, 0.0) + entry.get("seconds", before) - before, 2)
        before = entry.get("seconds", before)
    return spent


class DivergedError(UserError):
    """The loss became NaN or infinite; training stops without overwriting the last checkpoint."""


def scaffold(cfg: RunConfig, abc_bias: dict | None):
    """The scaffold a run trains and decodes with: its ABC bias, its ABS window, or None."""
    if abc_bias:
        return scaffold_from_state(abc_bias)
    return (
        Window(cfg.window, cfg.aligned, cfg.window_unit == "pair")
        if cfg.window is not None
        else None
    )


def same_bias(a: dict | None, b: dict | None) -> bool:
    """Whether two stored ABC biases (a scaffold's ``state()``) are the same line tables."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_bias(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_bias(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def load_weights(model: torch.nn.Module, weights: dict) -> None:
    """A checkpoint's weights into ``model``, whose scaffold was built from the checkpoint's stored
    bias: the scaffold's buffers come from there (checkpoints from before scaffolds were modules
    have none in their weights). Checkpoints from before attention terms were one module name
    them ``attn.relative``/``attn.fire``; they load as ``attn.position_bias``."""
    scaffold = {
        key: value for key, value in model.state_dict().items() if key.startswith("scaffold.")
    }
    renamed = {
        re.sub(r"attn\.(relative|fire)\.", "attn.position_bias.", key): value
        for key, value in weights.items()
    }
    try:
        model.load_state_dict(
            {
                **scaffold,
                **{key: value for key, value in renamed.items() if not key.startswith("scaffold.")},
            }
        )
    except (
        RuntimeError
    ) as error:  # tensors of another model: missing, unexpected or of another shape
        raise CheckpointError(
            f"checkpoint's weights do not fit its config ({str(error).splitlines()[-1].strip()[:120]})"
        ) from None


def load_model(state: dict, device="cpu") -> tuple[RunConfig, torch.nn.Module]:
    """``(cfg, model)`` from a checkpoint; an ABC bias is stored in the checkpoint itself."""
    cfg = run_config_of(state)
    if state.get("abc_bias") is not None:  # checked as a bias file's, before it becomes a model
        try:
            heads, parts = cfg.model_config().heads, input_parts(cfg.task)
            check_scaffold_state(state["abc_bias"], heads, parts, "abc_bias")
        except ScaffoldStateError as problem:
            raise CheckpointError(f"checkpoint's {problem}") from None
    model = build_model(cfg.model_config(), scaffold(cfg, state.get("abc_bias")))
    load_weights(model, state["model"])
    return cfg, model.to(device).eval()


class Trainer:
    """Owns the model, optimizer, data and RNG of one run in ``run_dir``; ``step()`` is one
    optimizer update."""

    def __init__(self, cfg: RunConfig, run_dir: str, device="cpu"):
        self.cfg, self.run_dir, self.device = cfg, run_dir, torch.device(device)
        torch.manual_seed(cfg.seed)
        self.abc_bias = None
        if cfg.bias_file is not None:
            path = os.path.join(run_dir, cfg.bias_file)
            payload = load_bias(path)
            check_bias_matches(payload, cfg, path)
            self.abc_bias = payload["bias"]
        self.model = build_model(cfg.model_config(), scaffold(cfg, self.abc_bias)).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        pool = Pool.make(cfg.data_seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        valid_generator = torch.Generator().manual_seed(cfg.data_seed + 1)
        digits, counts = (
            cfg.train_digits,
            validation_counts(cfg.task, cfg.min_operands),
        )  # multiadd: a set per operand count
        # the pool's splits, or None: numbers drawn digit by digit (tasks.training_operands)
        train, valid = (pool.train, pool.valid) if cfg.from_pool else (None, None)
        if cfg.varied:  # one validation set per length, each in its own frame; lengths the split lacks are left out
            self.train_numbers = by_length(train) if cfg.from_pool else [None] * digits
            valid_numbers = by_length(valid) if cfg.from_pool else [None] * digits
            draws = [
                (length, numbers, count)
                for length, numbers in enumerate(valid_numbers, 1)
                for count in counts
            ]
            sizes = [len(part) for part in torch.arange(cfg.valid_size).tensor_split(len(draws))]
            unequal = cfg.operand_lengths == "unequal"
            self.valid_sets = [
                format_task(
                    cfg.task,
                    *training_operands(
                        cfg.task, numbers, size, valid_generator, digits, length, unequal, count
                    ),
                    length,
                    cfg.form,
                )
                for (length, numbers, count), size in zip(draws, sizes)
                if size and (numbers is None or len(numbers))
            ]
        else:
            self.train_numbers = train
            sizes = [len(part) for part in torch.arange(cfg.valid_size).tensor_split(len(counts))]
            self.valid_sets = [
                format_task(
                    cfg.task,
                    *training_operands(cfg.task, valid, size, valid_generator, digits, count=count),
                    cfg.train_pad_width,
                    cfg.form,
                )
                for count, size in zip(counts, sizes)
            ]
        self.valid = self.valid_sets[-1]  # the longest: what the attention figures draw
        self.step_count, self.history, self.elapsed = 0, [], 0.0

    def batch(self) -> Example:
        """The next training batch: in the training frame (widened by up to ``frame_spread``
        digits), or for a ``varied`` run numbers of one length, uniform over 1 … ``train_digits``,
        in a frame of exactly that length (``operand_lengths`` unequal: the longer operand's), or with
        ``batch_lengths`` mixed each example's own length, the frames padded together; index
        hints (``index_hints``) from an offset drawn per example."""
        cfg = self.cfg
        if cfg.varied and cfg.batch_lengths == "mixed":
            lengths = torch.randint(
                1, cfg.train_digits + 1, (cfg.batch_size,), generator=self.generator
            )
            return mixed(
                [self.of_length(int(n), int((lengths == n).sum())) for n in lengths.unique()]
            )
        if cfg.varied:
            length = int(torch.randint(1, cfg.train_digits + 1, (1,), generator=self.generator))
            return self.of_length(length, cfg.batch_size)
        a, b = training_operands(
            cfg.task,
            self.train_numbers,
            cfg.batch_size,
            self.generator,
            cfg.train_digits,
            count=self.operand_count(),
        )
        spread = (
            int(torch.randint(cfg.frame_spread + 1, (1,), generator=self.generator))
            if cfg.frame_spread
            else 0
        )
        return self.formatted((a, b), cfg.train_pad_width + spread)

    def of_length(self, length: int, n: int) -> Example:
        """``n`` training examples of numbers of ``length`` digits in a frame of that length."""
        cfg = self.cfg
        a, b = training_operands(
            cfg.task,
            self.train_numbers[length - 1],
            n,
            self.generator,
            cfg.train_digits,
            length,
            cfg.operand_lengths == "unequal",
            self.operand_count(),
        )
        return self.formatted((a, b), length)

    def formatted(self, operands: tuple, frame: int) -> Example:
        """Training operands in a frame, ``top_share`` of them redrawn top-heavy first."""
        cfg = self.cfg
        drawn = top_heavy(operands, cfg.top_share, self.generator)
        return format_task(cfg.task, *drawn, frame, cfg.form, self.generator)

    def operand_count(self) -> int | None:
        """A multiadd batch's operand count, ``min_operands`` … 5 (drawn where the draw of
        ``training_operands`` would draw it: the same batches as before the option)."""
        if self.cfg.task != "multiadd":
            return None
        return operand_draw(self.generator, self.cfg.min_operands)

    def step(self) -> float:
        cfg = self.cfg
        self.model.train()
        batch = self.batch()
        logits, _ = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device))
        loss = F.cross_entropy(
            logits.flatten(0, 1), batch.tgt_out.to(self.device).flatten(), ignore_index=PAD
        )
        value = loss.item()
        if not math.isfinite(value):
            kept = self.history[-1]["step"] if self.history else None
            raise DivergedError(
                f"loss became {value} at step {self.step_count + 1}; "
                + (
                    f"the last good checkpoint (step {kept}) is kept"
                    if kept
                    else "no checkpoint was written yet"
                )
            )
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(cfg, self.step_count, self.reached)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.step_count += 1
        return value

    def validate(self) -> float:
        return (
            torch.cat([exact_match(self.model, example) for example in self.valid_sets])
            .float()
            .mean()
            .item()
        )

    def state(self) -> dict:
        return {
            "code_version": __version__,
            "config": self.cfg.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step_count,
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "history": self.history,
            "elapsed": self.elapsed,
            **({"abc_bias": self.abc_bias} if self.abc_bias else {}),
        }

    def resume(self) -> bool:
        """Continue from the run directory's checkpoint, if it has one (True); refuse one of
        another configuration. Only the training budget (``BUDGET``) may differ, so a finished
        run can be trained on (the cosine schedule then stretches to the new ``steps``)."""
        if not os.path.exists(os.path.join(self.run_dir, "checkpoint.pt")):
            return False
        state = load_checkpoint(self.run_dir)
        if self.abc_bias is not None and not same_bias(state.get("abc_bias"), self.abc_bias):
            raise UserError(
                f"{self.run_dir!r} was trained with another bias than {self.cfg.bias_file!r} holds now; "
                "the bias file changed since the run started"
            )
        theirs = {
            k: v for k, v in run_config_of(state).to_dict().items() if k not in BUDGET
        }  # a later field: its default
        ours = {k: v for k, v in self.cfg.to_dict().items() if k not in BUDGET}
        if theirs != ours:
            changed = ", ".join(
                f"{k}: {theirs.get(k)!r} there, {ours[k]!r} here"
                for k in ours
                if theirs.get(k) != ours[k]
            )
            raise UserError(
                f"{self.run_dir!r} was trained with a different configuration ({changed})"
            )
        load_weights(self.model, state["model"])
        self.step_count, self.history, self.elapsed = (
            state["step"],
            state["history"],
            state["elapsed"],
        )
        if state.get(
            "weights_only"
        ):  # a shipped source: its model and history, no optimizer or RNG to go on with
            if not self.stopped:
                raise UserError(
                    f"{self.run_dir!r} holds a weights-only checkpoint, which cannot be trained further"
                )
            return True
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        return True

    @property
    def reached(self) -> int | None:
        """The step at which validation first reached ``stop_at``, or None."""
        stop_at = self.cfg.stop_at
        return next(
            (e["step"] for e in self.history if stop_at is not None and e["valid_acc"] >= stop_at),
            None,
        )

    @property
    def stopped(self) -> bool:
        """The stopping rule: ``steps`` done, or validation reached ``stop_at`` at some step ``s``
        and the last evaluation was at the train-on phase's end (``train_on_end``) or later."""
        if self.step_count >= self.cfg.steps:
            return True
        return self.reached is not None and self.history[-1]["step"] >= train_on_end(
            self.cfg, self.reached
        )

    def run(self, on_eval=None, on_step=None) -> dict:
        """Train until ``stopped``, evaluating and checkpointing every ``eval_every`` steps.
        Returns the last history entry."""
        cfg = self.cfg
        os.makedirs(self.run_dir, exist_ok=True)
        start, losses = time.perf_counter() - self.elapsed, []
        while not self.stopped:
            losses.append(self.step())
            if on_step:
                on_step(self.step_count, losses[-1])
            if self.step_count % cfg.eval_every == 0 or self.step_count == cfg.steps:
                entry = {
                    "step": self.step_count,
                    "loss": sum(losses) / len(losses),
                    "valid_acc": self.validate(),
                }
                self.elapsed = time.perf_counter() - start
                entry["seconds"] = round(self.elapsed, 2)
                entry["device"] = device_name(
                    self.device
                )  # where the steps since the last entry ran
                self.history.append(entry)
                losses = []
                save_checkpoint(self.run_dir, self.state())
                if on_eval:
                    on_eval(entry)
        return self.history[-1] if self.history else {}
