"""Training loop, the CPU recipe, checkpoints that carry their full config, resume."""

import math
import os
import re
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from abcmini import __version__
from abcmini.biases import Window, materialize
from abcmini.calibrate import Calibrated, check_bias_matches, load_bias_file
from abcmini.evaluate import exact_match
from abcmini.model import PRESETS, ModelConfig, Transformer
from abcmini.positions import SCHEMES
from abcmini.tasks import POOL_DIGITS, Pool, check_task, format_task, is_binary, sample_operands

CHECKPOINT = "checkpoint.pt"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    pass


class DivergedError(ValueError):
    """The loss became NaN or infinite; training stops without overwriting the last checkpoint."""


def resolve_method(method: str, window: int | None, period: int) -> tuple[str, int | None, int]:
    """A method name → ``(positional scheme, ABS window, CPI period)``.

    Positional schemes (``vanilla``, ``nope``, ``rope``, ``alibi``, ``relative``) take
    ``--window``/``--period`` as given. The paper's ABS configurations: ``+w=W`` (sinusoidal +
    window W), ``+T=T`` (sinusoidal + window, default 1, + CPI period T), ``NoPE+w=W``.
    """
    match = re.fullmatch(r"(\+w|\+T|NoPE\+w)=(\d+)", method)
    if not match:
        if method not in SCHEMES:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(SCHEMES)}, +w=W, +T=T, NoPE+w=W")
        return method, window, period
    kind, value = match.group(1), int(match.group(2))
    if kind == "+T":
        return "vanilla", 1 if window is None else window, value
    return ("nope" if kind == "NoPE+w" else "vanilla"), value, period


@dataclass
class RunConfig:
    task: str = "successor"
    scheme: str = "vanilla"
    period: int = 0
    window: int | None = None  # ABS window w (None: no scaffold)
    bias_file: str | None = None  # ABC: calibrated bias added in every decoder layer
    preset: str = "cpu"
    pad_width: int | None = 20  # fixed geometry; None: growing geometry (pad width follows the length)
    seed: int = 0
    data_seed: int = 0
    steps: int = 3000
    batch_size: int = 128
    lr: float = 1e-3
    warmup: int = 100
    stop_at: float | None = None  # stop once validation exact match reaches this …
    train_on: float = 1.0  # … or, reached first at step s, at the first evaluation from step train_on·s on
    eval_every: int = 250
    valid_size: int = 1000
    model_overrides: dict = field(default_factory=dict)

    def __post_init__(self):
        check_task(self.task)
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.window is not None and self.bias_file is not None:
            raise ValueError("--bias (ABC) and --window (ABS) are alternatives; pass one")
        if self.window is not None and self.window < 0:
            raise ValueError(f"--window must be at least 0, got {self.window}")
        if self.period < 0:
            raise ValueError(f"--period must be at least 0 (0 turns CPI off), got {self.period}")
        if self.steps < 1:
            raise ValueError(f"--steps must be at least 1, got {self.steps}")
        if self.train_on < 1:
            raise ValueError(f"--train-on must be at least 1 (a multiple of the step that reached --stop-at), got {self.train_on}")
        if self.pad_width is not None and self.pad_width < POOL_DIGITS:
            raise ValueError(f"pad width must be at least {POOL_DIGITS} (the training numbers have up to {POOL_DIGITS} digits)")
        if self.model_overrides.get("enc_layers", 0) < 0:
            raise ValueError(f"--enc-layers must be at least 0, got {self.model_overrides['enc_layers']}")
        self.model_config()  # validates the positional scheme

    @property
    def train_pad_width(self) -> int:
        return self.pad_width if self.pad_width is not None else POOL_DIGITS

    @property
    def aligned(self) -> bool:
        """ABS input alignment: binary tasks with a window see interleaved operands."""
        return self.window is not None and is_binary(self.task)

    @property
    def label(self) -> str:
        """The method as the paper's tables name it, e.g. ``vanilla+w=1+T=3``, ``nope+w=1``, ``rope``."""
        window = f"+w={self.window}" if self.window is not None else ""
        abc = "+abc" if self.bias_file is not None else ""
        return f"{self.scheme}{window}{f'+T={self.period}' if self.period else ''}{abc}"

    def window_bias(self) -> Window | None:
        return Window(self.window, self.aligned) if self.window is not None else None

    def model_config(self) -> ModelConfig:
        return ModelConfig(**{**PRESETS[self.preset], **self.model_overrides, "scheme": self.scheme, "period": self.period})

    def to_dict(self) -> dict:
        return asdict(self)

    def tracking_config(self) -> dict:
        """The config as a dashboard groups runs: every field plus the method's table name."""
        return {**self.to_dict(), "method": self.label, "geometry": "fixed" if self.pad_width else "growing"}


def learning_rate(cfg: RunConfig, step: int) -> float:
    """Linear warmup, then cosine decay to 10% of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def save_checkpoint(path: str, state: dict) -> None:
    """Write to a temporary file, then rename: a kill never leaves a half-written checkpoint."""
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(run_dir: str) -> dict:
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isdir(run_dir):
        raise CheckpointError(f"run directory {run_dir!r} does not exist")
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint in {run_dir!r} (expected {CHECKPOINT})")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, corrupt or not a torch file at all
        raise CheckpointError(f"checkpoint {path!r} is unreadable ({type(error).__name__}); it may be truncated or corrupt") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION or "config" not in state:
        raise CheckpointError(f"{path!r} is not an abcmini checkpoint")
    return state


def run_bias(cfg: RunConfig, abc_bias: dict | None):
    """The scaffold a run trains and decodes with: its ABC bias (line tables), its ABS window,
    or None."""
    return Calibrated.from_state(abc_bias) if abc_bias else cfg.window_bias()


def load_model(state: dict, device="cpu"):
    """``(cfg, model, bias)`` from a checkpoint; an ABC bias is stored in the checkpoint itself."""
    cfg = RunConfig(**state["config"])
    model = Transformer(cfg.model_config())
    model.load_state_dict(state["model"])
    return cfg, model.to(device).eval(), run_bias(cfg, state.get("abc_bias"))


class Trainer:
    """Owns the model, optimizer, data and RNG of one run; ``step()`` is one optimizer update."""

    def __init__(self, cfg: RunConfig, device="cpu"):
        self.cfg, self.device = cfg, torch.device(device)
        torch.manual_seed(cfg.seed)
        self.model = Transformer(cfg.model_config()).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.pool = Pool.make(cfg.data_seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        a, b = sample_operands(cfg.task, self.pool.valid, cfg.valid_size, torch.Generator().manual_seed(cfg.data_seed + 1))
        self.valid = format_task(cfg.task, a, b, cfg.train_pad_width, cfg.aligned)
        self.abc_bias = None
        if cfg.bias_file is not None:
            payload = load_bias_file(cfg.bias_file)
            check_bias_matches(payload, cfg.task, cfg.pad_width, cfg.model_config().heads, cfg.bias_file)
            self.abc_bias = payload["bias"]
        self.bias = run_bias(cfg, self.abc_bias)
        # training batches always have the same shape: materialize the scaffold once
        self.train_biases = materialize(self.bias, self.valid.tgt_in.shape[1], self.valid.src.shape[1], self.device)
        self.step_count, self.history, self.elapsed = 0, [], 0.0

    def step(self) -> float:
        cfg = self.cfg
        self.model.train()
        a, b = sample_operands(cfg.task, self.pool.train, cfg.batch_size, self.generator)
        batch = format_task(cfg.task, a, b, cfg.train_pad_width, cfg.aligned)
        logits, _ = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device), *self.train_biases)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.to(self.device).flatten())
        value = loss.item()
        if not math.isfinite(value):
            kept = self.history[-1]["step"] if self.history else None
            raise DivergedError(f"loss became {value} at step {self.step_count + 1}; "
                                + (f"the last good checkpoint (step {kept}) is kept" if kept else "no checkpoint was written yet"))
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(cfg, self.step_count)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.step_count += 1
        return value

    def validate(self) -> float:
        return exact_match(self.model, self.valid, self.bias).float().mean().item()

    def state(self) -> dict:
        return {
            "format": FORMAT_VERSION,
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

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step_count, self.history, self.elapsed = state["step"], state["history"], state["elapsed"]
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])

    def resume(self, run_dir: str) -> None:
        """Continue from ``run_dir``'s checkpoint, if it has one; refuse one of another config.

        Only the training budget (``steps``, ``stop_at``, ``train_on``) may differ, so a finished
        run can be trained on (the cosine schedule then stretches to the new ``steps``)."""
        if not os.path.exists(os.path.join(run_dir, CHECKPOINT)):
            return
        state = load_checkpoint(run_dir)
        budget = ("steps", "stop_at", "train_on")
        theirs = {k: v for k, v in state["config"].items() if k not in budget}
        ours = {k: v for k, v in self.cfg.to_dict().items() if k not in budget}
        if theirs != ours:
            changed = ", ".join(f"{k}: {theirs.get(k)!r} there, {ours[k]!r} here" for k in ours if theirs.get(k) != ours[k])
            raise ValueError(f"--resume: {run_dir!r} was trained with a different configuration ({changed})")
        self.restore(state)

    @property
    def stopped(self) -> bool:
        """The stopping rule: ``steps`` done, or validation reached ``stop_at`` at some step ``s``
        and the last evaluation was at step ``train_on·s`` or later."""
        cfg = self.cfg
        if self.step_count >= cfg.steps:
            return True
        reached = [e["step"] for e in self.history if cfg.stop_at is not None and e["valid_acc"] >= cfg.stop_at]
        return bool(reached) and self.history[-1]["step"] >= cfg.train_on * reached[0]

    def run(self, run_dir: str, on_eval=None, on_step=None) -> dict:
        """Train until ``stopped``, evaluating and checkpointing every ``eval_every`` steps.
        Returns the last history entry."""
        cfg, path = self.cfg, os.path.join(run_dir, CHECKPOINT)
        os.makedirs(run_dir, exist_ok=True)
        start, losses = time.perf_counter() - self.elapsed, []
        while not self.stopped:
            losses.append(self.step())
            if on_step:
                on_step(self.step_count, losses[-1])
            if self.step_count % cfg.eval_every == 0 or self.step_count == cfg.steps:
                entry = {"step": self.step_count, "loss": sum(losses) / len(losses), "valid_acc": self.validate()}
                self.elapsed = time.perf_counter() - start
                entry["seconds"] = round(self.elapsed, 2)
                self.history.append(entry)
                losses = []
                save_checkpoint(path, self.state())
                if on_eval:
                    on_eval(entry)
        return self.history[-1] if self.history else {}
