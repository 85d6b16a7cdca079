"""One cell end to end, the same for ``abcmini train`` and ``abcmini reproduce``: train (for
ABC: train the Vanilla source to interpolation, calibrate it, retrain with the bias), evaluate
at the experiment's lengths, write the result record ``RUN_DIR/eval.json``, and track every
stage as a wandb run of the cell (``abcmini.outputs.track``): the source's training, the calibration
and the retraining, tied by group and by artifacts (source model → bias → retrained model).
"""

import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, replace

import torch

from abcmini import __version__, commit
from abcmini.bias_files import load_bias, save_bias
from abcmini.config import Calibration, check_test_frame
from abcmini.errors import UserError
from abcmini.evaluate import (
    GeometryError,
    exact_match,
    extrapolation_hits,
    final_accuracy,
    pad_width_for,
)
from abcmini.experiment import ABC_BIAS, Experiment, RunConfig
from abcmini.limits import EVAL_BUDGET, batch_for, check_evaluation, check_writable, example_bytes
from abcmini.nn import InputError
from abcmini.nn.block_lines import BlockCalibrated, block_count
from abcmini.nn.calibrate import (
    algorithm1,
    authors,
    average_attention,
    block_procedure,
    calibrated_layers,
    procedure,
)
from abcmini.nn.decoder import build_model
from abcmini.nn.lines import Calibrated, PerLayer, segments_of
from abcmini.nn.scaffolds import line_rows, open_lines, scaffold_from_state
from abcmini.outputs.figures import attention_figures, bias_figures, calibration_figures, close
from abcmini.outputs.track import ID_FILE, Tracker, artifact_name, run_config, under_agent
from abcmini.store import (
    CHECKPOINT,
    checkpoint_identity,
    load_checkpoint,
    lock_run,
    read_eval,
    read_eval_of,
    read_experiment,
    write_eval,
    write_experiment,
)
from abcmini.stress import SIZE as STRESS_SIZE
from abcmini.stress import families, stress_operands
from abcmini.tasks import (
    BLOCK_TASKS,
    OPERANDS,
    POOL_DIGITS,
    Example,
    Pool,
    detokenize,
    digit_mask,
    extrapolation_operands,
    extrapolation_set_size,
    format_task,
    operand_count,
    padding_cells,
    training_operands,
)
from abcmini.train import Trainer, device_name, load_model, seconds_by_device

LOG_EVERY = 10  # training loss and learning rate go to wandb every this many steps


@dataclass(frozen=True)
class Tracking:
    """Whether (and into which wandb project) a cell's stages are tracked."""

    enabled: bool = False
    project: str | None = None


class Hooks:
    """What a caller sees of a cell while it runs (the CLI prints; ``reproduce``'s workers stay
    quiet). Every hook does nothing by default. ``waiting``: called with one line when a
    directory the cell needs is in use and the cell waits for it (None: refuse instead)."""

    waiting = None

    @contextmanager
    def training(self, role: str, trainer: Trainer):
        """Around the training of ``role`` (``source`` or ``run``)."""
        yield

    def step(self, step: int, loss: float) -> None: ...

    def validated(self, entry: dict) -> None: ...

    def calibrated(self, result: dict, seconds: float) -> None: ...

    @contextmanager
    def evaluating(self, length: int, batches: int):
        """Around the evaluation at ``length``; yields a callable to report each finished batch."""
        yield lambda: None

    def evaluated(self, length: int, accuracy: float, seconds: float) -> None: ...


class LogHooks(Hooks):
    """A cell's progress as plain lines on standard output (a worker's: its log file, and so
    its wandb run's console): one per validation, calibration and test length."""

    def validated(self, entry: dict) -> None:
        print(
            f"step {entry['step']:>6} · loss {entry['loss']:.4f} · valid {entry['valid_acc']:.2%} · "
            f"{entry['seconds']:.0f}s",
            flush=True,
        )

    def calibrated(self, result: dict, seconds: float) -> None:
        print(f"calibrated on {result.get('samples', '')} inputs in {seconds:.1f}s", flush=True)

    def evaluated(self, length, accuracy: float, seconds: float) -> None:
        print(f"length {length}: {accuracy:.2%} ({seconds:.1f}s)", flush=True)


def model_fields(cfg: RunConfig, model=None) -> dict:
    """The model a run resolves to (its preset and options applied): layers, heads, widths and,
    given the model, its parameter count; the same in the result record and the wandb config."""
    size = cfg.model_config()
    fields = {
        "arch": size.arch,
        "enc_layers": size.enc_layers,
        "dec_layers": size.dec_layers,
        "heads": size.heads,
        "d_model": size.d_model,
        "d_ff": size.d_ff,
    }
    if model is not None:
        fields["parameters"] = sum(p.numel() for p in model.parameters())
    return fields


def tracker_for(
    experiment: Experiment | None,
    cfg: RunConfig,
    run_dir: str,
    job_type: str,
    tracking: Tracking,
    group: str | None = None,
    keep_id: bool = False,
    agent: bool = False,
    model=None,
    **config,
) -> Tracker:
    """A wandb run of a cell's stage (a run without an experiment record is its own group);
    ``agent``: the stage that reports the cell, the sweep agent's run under ``wandb agent``.
    Its config holds the resolved model (``model_fields``: with ``model``, its parameters)."""
    config = {
        **(
            run_config(experiment.to_dict(), cfg.label)
            if experiment
            else {**cfg.to_dict(), "method": cfg.label}
        ),
        "model": model_fields(cfg, model),
        **config,
    }
    cell = [experiment.cell.method, experiment.recipe] if experiment else []
    tags = list(dict.fromkeys([cfg.task, cfg.label, *cell]))
    group = group or (
        experiment.identity if experiment else os.path.basename(os.path.normpath(run_dir))
    )
    return Tracker.start(
        tracking.enabled, run_dir, job_type, config, group, tags, tracking.project, keep_id, agent
    )


def log_validation(tracker: Tracker, entry: dict) -> None:
    """One validation of the history (``Trainer.history``) as wandb logs it, at its step."""
    tracker.log(
        {
            "valid/exact_match": entry["valid_acc"],
            "train/loss_mean": entry["loss"],
            "train/seconds": entry["seconds"],
        },
        step=entry["step"],
    )


def training_summary(trainer: Trainer) -> dict:
    """A training run's wandb summary: its last validation, steps and seconds."""
    last = trainer.history[-1] if trainer.history else {}
    return {
        "valid/exact_match": last.get("valid_acc", 0.0),
        "steps": last.get("step", 0),
        "train/seconds": last.get("seconds", 0.0),
    }


def fit(
    trainer: Trainer,
    role: str,
    hooks: Hooks,
    tracker: Tracker,
    experiment: Experiment | None = None,
) -> dict:
    """Train ``trainer`` from where it stopped, printed by ``hooks`` and logged by ``tracker``,
    with the attention (and scaffold) pictures at every validation, so wandb shows how attention
    forms step by step; returns the last history entry."""

    last = [time.perf_counter(), trainer.step_count]  # throughput since the last log

    def on_step(step, loss):
        hooks.step(step, loss)
        if step % LOG_EVERY == 0:
            now, examples = time.perf_counter(), (step - last[1]) * trainer.cfg.batch_size
            rate = examples / max(now - last[0], 1e-9)
            last[:] = now, step
            tracker.log(
                {
                    "train/loss": loss,
                    "train/lr": trainer.optimizer.param_groups[0]["lr"],
                    "train/examples_per_second": rate,
                },
                step=step,
            )

    def pictures(step):
        args = (experiment, trainer.cfg, step, trainer.valid, TRAINING_PICTURES)
        log_pictures(tracker, trainer.model, *args, table=False)

    def on_eval(entry):
        hooks.validated(entry)
        log_validation(tracker, entry)
        pictures(entry["step"])

    with hooks.training(role, trainer):
        if not trainer.stopped:
            if trainer.step_count == 0:  # the untrained model's attention: where it starts from
                pictures(0)
            trainer.run(on_eval=on_eval, on_step=on_step)
    tracker.summary(training_summary(trainer))
    return trainer.history[-1] if trainer.history else {}


PICTURE_LENGTHS = (
    POOL_DIGITS,
    20,
    100,
)  # the attention pictures: the longest training length and two test lengths
TRAINING_PICTURES = PICTURE_LENGTHS[:2]  # at each validation: the training length and one test
LINE_COLUMNS = (
    "layer",
    "attention",
    "direction",
    "head",
    "line",
    "value",
)  # an ABC bias as a table


def picture_examples(
    experiment: Experiment | None, cfg: RunConfig, device, lengths=PICTURE_LENGTHS
) -> dict[int, Example]:
    """The first input of each length's test set, in the frame the run is tested in (one that
    follows the length where the protocol's fixed frame is too narrow); a length the model
    cannot take (its position range) is left out, and so is one whose single pass needs more
    than a test batch may hold (``EVAL_BUDGET``: multiply's 100-digit scratchpad has 15,150 rows)."""
    examples = {}
    for length in lengths:
        try:
            try:
                (frame,) = test_frames(experiment, cfg, [length])
            except GeometryError:
                (frame,) = test_frames(experiment, cfg, [length], "follows")
        except UserError:
            continue
        if example_bytes(cfg, frame, operand_count(length)) > EVAL_BUDGET:
            continue
        a, b = extrapolation_operands(cfg.task, length, 0)
        examples[length] = format_task(
            cfg.task, a[:1], None if b is None else b[:1], frame, cfg.form
        )
    return examples


def log_pictures(
    tracker: Tracker,
    model,
    experiment: Experiment | None,
    cfg: RunConfig,
    step: int,
    example: Example | None = None,
    lengths=PICTURE_LENGTHS,
    table: bool = True,
) -> None:
    """Attention of every layer and head at ``lengths``; the scaffold (ABS window, ABC bias) per
    head at ``example``'s geometry, an ABC bias also as a table of its open lines (``table``)."""
    if tracker.run is None or step <= tracker.logged_to:
        return
    figures = {}
    with tracker.guard():  # a picture that cannot be drawn turns tracking off, never ends the run
        device = next(model.parameters()).device
        examples = picture_examples(experiment, cfg, device, lengths)
        figures = attention_figures(model, examples, cfg.label)
        if model.scaffold is not None and example is not None:
            figures |= bias_figures(
                model.scaffold, example.tgt_out.shape[1], detokenize(example.src[0]), cfg.label
            )
    tracker.images(figures, step=step)
    for fig in figures.values():
        close(fig)
    if table and isinstance(model.scaffold, (Calibrated, PerLayer, BlockCalibrated)):
        tracker.table("bias/lines", LINE_COLUMNS, line_rows(model.scaffold))


def log_model(tracker: Tracker, trainer: Trainer, experiment: Experiment) -> None:
    """The trained model's pictures (``log_pictures``) and its checkpoint as an artifact."""
    if tracker.run is None:
        return
    log_pictures(tracker, trainer.model, experiment, trainer.cfg, trainer.step_count, trainer.valid)
    tracker.artifact(
        artifact_name("model", experiment.identity),
        "model",
        os.path.join(trainer.run_dir, CHECKPOINT),
        {"step": trainer.step_count},
    )


def report_done(tracker: Tracker, trainer: Trainer, record: dict) -> None:
    """A finished cell's stored results in a wandb run (the sweep agent's): its training history
    from the checkpoint, its summary and its extrapolation curve from the result record."""
    for entry in trainer.history:
        log_validation(tracker, entry)
    tracker.summary(
        {
            **training_summary(trainer),
            "reported_from": os.path.join(os.path.abspath(trainer.run_dir), "eval.json"),
        }
    )
    tracker.extrapolation(
        {int(n): acc for n, acc in record.get("accuracy", {}).items()},
        f"{trainer.cfg.task} · {trainer.cfg.label}",
    )


def train_stage(
    experiment: Experiment,
    run_dir: str,
    role: str,
    device,
    hooks: Hooks,
    tracking: Tracking,
    uses: str | None = None,
    after=None,
    done=lambda trainer: True,
    agent: bool = False,
    job_type: str = "train",
    group: str | None = None,
    **config,
):
    """Train ``experiment``'s run in ``run_dir`` (resuming), as one tracked wandb run of
    ``group`` (default: the experiment's cell) and ``job_type``; ``after``
    (the trainer, the tracker) runs inside that wandb run, e.g. the evaluation. A run that
    stopped training, and is ``done(trainer)`` when there is an ``after``, opens no wandb run,
    except the sweep agent's (``agent`` under ``wandb agent``): that one reports the stored results."""
    trainer = Trainer(experiment.run, run_dir, device)
    trainer.resume()
    if trainer.stopped and (after is None or done(trainer)):
        with hooks.training(role, trainer):
            pass
        record = read_eval(run_dir) if after else None
        if agent and under_agent() and record is not None:
            with tracker_for(
                experiment,
                experiment.run,
                run_dir,
                job_type,
                tracking,
                group,
                agent=True,
                model=trainer.model,
                **config,
            ) as tracker:
                report_done(
                    tracker,
                    trainer,
                    read_eval_of(
                        run_dir, trainer.step_count, experiment.test_seed, experiment.test_frame
                    ),
                )
        return trainer, record
    with tracker_for(
        experiment,
        experiment.run,
        run_dir,
        job_type,
        tracking,
        group,
        keep_id=True,
        agent=agent,
        model=trainer.model,
        **config,
    ) as tracker:
        if uses:
            tracker.use(uses)
        trained = not trainer.stopped
        fit(trainer, role, hooks, tracker, experiment)
        if trained:
            log_model(tracker, trainer, experiment)
        return trainer, after(trainer, tracker) if after else None


class NotInterpolatedError(UserError):
    pass


def line_calibration(
    settings: Calibration, self_avg, cross_avg, layout, example: Example
) -> Calibrated:
    """The named calibration of lines on ``Ā`` (``[layers h q k]``): Algorithm 1 or the authors'
    code on the last layer, the same bias for every layer (steps 1 and 3), or abcmini's procedure."""
    if settings.algorithm == "paper":
        return Calibrated(
            algorithm1(self_avg[-1], settings.kappa_self),
            algorithm1(cross_avg[-1], settings.kappa_cross),
        )
    if settings.algorithm == "authors":  # calcBias.py:510–511: self Δ 1, cross Δ −1
        return Calibrated(
            authors(self_avg[-1], settings.kappa_self, 1, cross=False),
            authors(cross_avg[-1], settings.kappa_cross, -1, cross=True),
        )
    out_padding = padding_cells(example.tgt_in.flip(1)).flip(1)[:, : self_avg.shape[-1]]
    return procedure(
        self_avg,
        cross_avg,
        layout,
        padding_cells(example.src),
        out_padding,
        settings.kappa_self,
        settings.kappa_cross,
        settings.min_support,
        settings.rule_names(),
    )


def calibrate_run(run_dir: str, settings: Calibration) -> tuple[dict, Example, RunConfig]:
    """ABC steps 1–2 for a trained run: refuse it unless it interpolated, decode
    ``settings.samples`` seeded training inputs, average the decoder layers' attention, run the
    calibration ``procedure`` with the settings' rules. Returns the bias file's payload, the
    ``example`` it was computed on and the run's ``config``."""
    state = load_checkpoint(run_dir)
    cfg, model = load_model(state)
    check_recorded_model(run_dir, experiment_of(run_dir), cfg)
    reached = state["history"][-1]["valid_acc"] if state["history"] else 0.0
    if reached < settings.min_accuracy:
        raise NotInterpolatedError(
            f"{run_dir!r} has not interpolated: validation exact match {reached:.2%} < "
            f"{settings.min_accuracy:.2%}; train it longer (--stop-at)"
        )
    rules = settings.rule_names()
    if settings.algorithm != "abc" and cfg.task in BLOCK_TASKS:
        raise UserError(
            f"--calibration {settings.algorithm} calibrates lines, not the blocks of {cfg.task}; use abc"
        )
    layers = calibrated_layers(model.cfg.dec_layers, rules)
    numbers = (
        Pool.make(cfg.data_seed).train if cfg.from_pool else None
    )  # None: drawn digit by digit
    a, b = training_operands(
        cfg.task,
        numbers,
        settings.samples,
        torch.Generator().manual_seed(settings.seed),
        cfg.train_digits,
        count=OPERANDS,
    )  # multiadd: the most blocks, the most rows for each block line
    example = format_task(cfg.task, a, b, cfg.train_pad_width, cfg.form)
    layout = segments_of(digit_mask(example.src[0]))
    if cfg.task in BLOCK_TASKS:  # a block output: every row is trusted, lines counted in blocks
        self_avg, cross_avg = average_attention(
            model, example, example.tgt_out.shape[1], layers=layers
        )
        products = cfg.task == "multiply"  # lines on its input numbers a and b
        scaffold = block_procedure(
            self_avg,
            cross_avg,
            block_count(example.src.shape[1], layout, products),
            settings.kappa_self,
            settings.kappa_cross,
            settings.min_support,
            rules,
            products,
        )
    else:
        self_avg, cross_avg = average_attention(model, example, cfg.train_digits + 1, layers=layers)
        scaffold = line_calibration(settings, self_avg, cross_avg, layout, example)
    payload = {
        "task": cfg.task,
        "pad_width": cfg.pad_width,
        "heads": model.cfg.heads,
        "aligned": cfg.aligned,
        "operand_order": cfg.operand_order,
        "calibration": {**asdict(settings), "layers": list(layers)},
        "source": os.path.abspath(run_dir),
        "bias": scaffold.state(),
        "attention": {"self": self_avg, "cross": cross_avg},
    }
    return payload, example, cfg


def calibrate_stage(
    source_dir: str,
    out: str,
    settings: Calibration,
    experiment: Experiment | None,
    cfg: RunConfig,
    hooks: Hooks,
    tracking: Tracking,
    group: str,
    source_identity: str,
) -> dict:
    """Calibrate ``source_dir`` into the bias file ``out`` with its heatmaps beside it, as one
    tracked wandb run that uses the source's model and logs the bias."""
    with tracker_for(
        experiment,
        cfg,
        os.path.dirname(os.path.abspath(out)),
        "calibration",
        tracking,
        group,
        calibration=asdict(settings),
    ) as tracker:
        tracker.use(artifact_name("model", source_identity))
        began = time.perf_counter()
        payload, example, config = calibrate_run(source_dir, settings)
        seconds = round(time.perf_counter() - began, 2)
        pngs = calibration_figures(
            os.path.dirname(os.path.abspath(out)),
            config.task,
            payload["attention"]["self"],
            payload["attention"]["cross"],
            scaffold_from_state(payload["bias"]),
            example,
            payload["calibration"]["layers"],
        )
        save_bias(
            out, payload
        )  # last: a bias file is a finished calibration, so a killed one is redone
        result = {**payload, "example": example, "config": config}
        hooks.calibrated(result, seconds)
        tracker.images({f"calibration/{name}": png for name, png in pngs.items()})
        tracker.table(
            "calibration/lines", LINE_COLUMNS, line_rows(scaffold_from_state(payload["bias"]))
        )
        tracker.summary({"calibration/seconds": seconds})
        tracker.artifact(artifact_name("abc-bias", group), "abc-bias", out, result["calibration"])
    return {**result, "seconds": seconds, "pngs": pngs}


def protocol_width(experiment: Experiment | None, cfg: RunConfig) -> int | None:
    """The protocol's frame: the experiment's ``test_pad_width`` (ABC trains in a frame of its
    own), else the run's training frame (a run without an experiment record)."""
    return experiment.test_pad_width if experiment else cfg.pad_width


def examples_at(last: dict, cfg: RunConfig) -> int | None:
    """Training examples a run has seen at its last logged step: the budget methods are compared at."""
    return last["step"] * cfg.batch_size if last.get("step") is not None else None


def record(
    experiment: Experiment | None,
    cfg: RunConfig,
    history: list,
    test_seed: int,
    accuracy: dict,
    **extra,
) -> dict:
    """The result record of a run: its identity (``experiment``, the run's ``experiment.json``),
    protocol, training cost (also per device, where its history names them) and accuracy per length."""
    saved, last = experiment.to_dict() if experiment else {}, history[-1] if history else {}
    calibration = {"calibration": saved["calibration"]} if saved.get("calibration") else {}
    if any(
        "device" in entry for entry in history
    ):  # where its training ran, for a run resumed elsewhere too
        extra = {"train_seconds_by_device": seconds_by_device(history), **extra}
    return {
        **cfg.to_dict(),  # the run's configuration, then what the tables read beside it
        "method": cfg.label,
        "cell_method": saved.get("cell", {}).get("method"),
        "shape": cfg.shape,
        "pad_width": protocol_width(experiment, cfg),
        "train_pad_width": cfg.pad_width,
        "recipe": saved.get("recipe"),
        "overrides": saved.get("overrides", {}),
        **calibration,
        "test_seed": test_seed,
        "train_steps": last.get("step"),
        "train_examples": examples_at(last, cfg),
        "train_seconds": last.get("seconds"),
        "valid_acc": last.get("valid_acc"),
        "version": __version__,
        "commit": commit(),
        "command": saved.get("command"),
        **extra,
        "accuracy": {str(n): acc for n, acc in accuracy.items()},
    }


def evaluate(
    run_dir: str,
    experiment: Experiment | None,
    cfg: RunConfig,
    model,
    history: list,
    lengths,
    test_seed: int,
    hooks: Hooks,
    tracker: Tracker,
    redo: bool = True,
    batch_size: int = 1000,
    started: float | None = None,
    test_frame: str | None = None,
    until: float = 0.0,
    **extra,
) -> dict:
    """Accuracy at ``lengths`` merged into ``RUN_DIR/eval.json`` and logged as the extrapolation
    curve (``redo=False``: lengths the record already holds for this training state and test
    seed are not evaluated again). ``started``: when the job began, to record its wall time;
    ``test_frame``: another than the experiment's; ``until``: no length is tested after one
    below it."""
    follows = frame_of(experiment, test_frame) == "follows"
    state = (
        run_dir,
        history[-1]["step"] if history else None,
        test_seed,
        "follows" if follows else "fixed",
    )
    previous = read_eval_of(*state)
    done = {} if redo else previous.get("accuracy", {})
    accuracy, seconds, final, operands = {}, {}, {}, {}
    for length, frame in zip(lengths, test_frames(experiment, cfg, lengths, test_frame)):
        if str(length) in done:
            if done[str(length)] < until:
                break
            continue
        began = time.perf_counter()
        batch = batch_for(cfg, frame, batch_size, operand_count(length))
        with hooks.evaluating(
            length, batches=-(-extrapolation_set_size(length) // batch)
        ) as advance:
            example, hits = extrapolation_hits(
                model, cfg.task, length, frame, test_seed, cfg.form, batch, advance
            )
        accuracy[length] = hits.float().mean().item()
        if cfg.task in BLOCK_TASKS:  # the scratchpad's answer alone, beside the whole output
            final[str(length)] = final_accuracy(
                model,
                example,
                hits,
                batch_for(cfg, frame, batch_size, operand_count(length), rows=1),
            )
        if cfg.task == "multiadd":
            operands[str(length)] = operand_count(length)
        seconds[str(length)] = round(time.perf_counter() - began, 2)
        hooks.evaluated(length, accuracy[length], seconds[str(length)])
        if accuracy[length] < until:
            break
    extra["test_frame"] = "follows" if follows else "fixed"
    extra["model"] = model_fields(cfg, model)
    if isinstance(model.scaffold, (Calibrated, PerLayer, BlockCalibrated)):
        extra["lines"] = open_lines(model.scaffold)
    if final:
        extra["final_accuracy"] = {**previous.get("final_accuracy", {}), **final}
    if operands:
        extra["operands"] = {**previous.get("operands", {}), **operands}
    if seconds:
        extra["test_seconds"] = {**previous.get("test_seconds", {}), **seconds}
    if started is not None:
        extra["job_seconds"] = round(time.perf_counter() - started, 2)
    where = next(model.parameters()).device
    if where.type == "cuda":  # a record made on a CPU names no device (the dashboard reads it so)
        extra["device"] = device_name(where)
    merged = write_eval(run_dir, record(experiment, cfg, history, test_seed, accuracy, **extra))
    tracker.extrapolation(
        {int(n): acc for n, acc in merged["accuracy"].items()}, f"{cfg.task} · {cfg.label}"
    )
    return merged


def stress_test(
    run_dir: str,
    experiment: Experiment | None,
    cfg: RunConfig,
    model,
    history: list,
    lengths,
    test_seed: int,
    hooks: Hooks,
    tracker: Tracker,
    batch_size: int = 1000,
    test_frame: str | None = None,
) -> dict:
    """The stress families of the run's task (``abcmini.stress``) at ``lengths`` in the run's
    test frames, merged into ``RUN_DIR/eval.json`` under ``stress`` (family → length → exact
    match) and logged as the wandb table ``stress``."""
    found = {}
    frames = test_frames(experiment, cfg, lengths, test_frame)
    for family in families(cfg.task):
        for length, frame in zip(lengths, frames):
            began = time.perf_counter()
            a, b = stress_operands(cfg.task, family, length, test_seed)
            example = format_task(cfg.task, a, b, frame, cfg.form)
            count = a.shape[1] if a.dim() == 3 else operand_count(length)
            batch = batch_for(cfg, frame, batch_size, count)
            name = f"{family.name} at {length}"
            with hooks.evaluating(name, batches=-(-len(a) // batch)) as advance:
                hits = exact_match(model, example, batch, advance)
            found.setdefault(family.name, {})[str(length)] = hits.float().mean().item()
            hooks.evaluated(name, hits.float().mean().item(), time.perf_counter() - began)
    follows = frame_of(experiment, test_frame) == "follows"
    state = (run_dir, history[-1]["step"] if history else None, test_seed)
    previous = read_eval_of(*state, "follows" if follows else "fixed").get("stress", {})
    stress = {name: {**previous.get(name, {}), **by_length} for name, by_length in found.items()}
    stress = {**previous, **stress}
    merged = write_eval(
        run_dir,
        record(
            experiment,
            cfg,
            history,
            test_seed,
            {},
            stress=stress,
            stress_size=STRESS_SIZE,
            test_frame="follows" if follows else "fixed",
        ),
    )
    targets = {family.name: family.targets for family in families(cfg.task)}
    tracker.table(
        "stress",
        ["family", "targets", "length", "exact match"],
        [
            [name, targets.get(name, ""), int(n), acc]
            for name, by_length in stress.items()
            for n, acc in by_length.items()
        ],
    )
    return merged


def source_lock(source_dir: str, waiting=None):
    """The lock of ABC's source while it trains (``store.lock_run``); none on a source this user
    cannot write (a shipped one in a read-only tree), which is only read."""
    if os.path.isdir(source_dir) and not os.access(source_dir, os.W_OK):
        return nullcontext()
    return lock_run(source_dir, waiting=waiting)


def train_source(
    experiment: Experiment,
    run_dir: str,
    device="cpu",
    hooks: Hooks | None = None,
    tracking: Tracking = Tracking(),
    group: str | None = None,
) -> Trainer:
    """ABC's Vanilla source: trained (resuming) to interpolation, not tested, as the ``source``
    run of ``group`` (the ABC cell it serves); returns its trainer."""
    os.makedirs(run_dir, exist_ok=True)
    if read_experiment(run_dir) is None:
        write_experiment(run_dir, experiment.to_dict())
    trainer, _ = train_stage(
        experiment,
        run_dir,
        "source",
        device,
        hooks or Hooks(),
        tracking,
        job_type="source",
        group=group,
    )
    return trainer


def source_fields(run_dir: str, source_dir: str, history: list, cfg: RunConfig) -> dict:
    """An ABC cell's Vanilla source in its record: where it lies (relative to the run, so it
    travels with the root) and what it cost to interpolate (steps, examples, seconds)."""
    last = history[-1] if history else {}
    return {
        "source": os.path.relpath(source_dir, run_dir),
        "interpolation_steps": last.get("step"),
        "interpolation_examples": examples_at(last, cfg),
        "interpolation_seconds": last.get("seconds"),
    }


def recorded_source(run_dir: str, experiment: Experiment | None) -> dict:
    """``source_fields`` of an ABC run tested by ``abcmini eval``, from the source its bias file
    names (a cell stopped before its first test has none in its record); {} where it is gone."""
    bias = os.path.join(run_dir, ABC_BIAS)
    if experiment is None or experiment.calibration is None or not os.path.isfile(bias):
        return {}
    source = load_bias(bias).get("source")
    if not source or not os.path.isfile(os.path.join(source, CHECKPOINT)):
        return {}
    return source_fields(
        run_dir, source, load_checkpoint(source)["history"], experiment.source_experiment().run
    )


def run_cell(
    experiment: Experiment,
    run_dir: str,
    source_dir: str | None = None,
    device="cpu",
    hooks: Hooks | None = None,
    tracking: Tracking = Tracking(),
) -> dict:
    """Train (resuming), calibrate (ABC), evaluate at the experiment's lengths; returns the
    merged result record."""
    hooks, start, extra = hooks or Hooks(), time.perf_counter(), {}
    os.makedirs(run_dir, exist_ok=True)
    write_experiment(run_dir, experiment.to_dict())
    uses = None
    if experiment.calibration is not None:
        source_experiment = experiment.source_experiment()
        with source_lock(source_dir, hooks.waiting):  # no second process trains it meanwhile
            source = train_source(
                source_experiment, source_dir, device, hooks, tracking, experiment.identity
            )
        bias_path = os.path.join(run_dir, ABC_BIAS)
        if not os.path.exists(bias_path):
            result = calibrate_stage(
                source_dir,
                bias_path,
                experiment.calibration,
                experiment,
                experiment.run,
                hooks,
                tracking,
                experiment.identity,
                source_experiment.identity,
            )
            extra["calibration_seconds"] = result["seconds"]
        extra |= source_fields(run_dir, source_dir, source.history, source_experiment.run)
        uses = artifact_name("abc-bias", experiment.identity)

    def evaluation(trainer, tracker):
        return evaluate(
            run_dir,
            experiment,
            trainer.cfg,
            trainer.model,
            trainer.history,
            experiment.lengths,
            experiment.test_seed,
            hooks,
            tracker,
            redo=False,
            started=start,
            until=experiment.test_until,
            **extra,
        )

    def evaluated(trainer):  # a finished cell whose record holds every length: nothing to do
        done = read_eval_of(
            run_dir, trainer.step_count, experiment.test_seed, experiment.test_frame
        ).get("accuracy", {})
        return not experiment.to_test(done)

    links = {}
    if source_dir and os.path.exists(
        os.path.join(source_dir, ID_FILE)
    ):  # the source's wandb run, beside the artifact names
        with open(os.path.join(source_dir, ID_FILE)) as f:
            links["source_run"] = f.read().strip()
    _, result = train_stage(
        experiment,
        run_dir,
        "run",
        device,
        hooks,
        tracking,
        uses,
        after=evaluation,
        done=evaluated,
        agent=True,
        job_type="retraining" if uses else "train",
        **links,
    )
    return result


def frame_of(experiment: Experiment | None, test_frame: str | None = None) -> str:
    """``test_frame``, else the experiment's test frame, else the fixed one (a run without an experiment record)."""
    return test_frame or (experiment.test_frame if experiment else "fixed")


def test_frames(
    experiment: Experiment | None, cfg: RunConfig, lengths, test_frame: str | None = None
) -> list[int]:
    """The pad width of each test at ``lengths`` in the experiment's test frame (or ``test_frame``):
    the protocol's frame, or one that follows the length from it (ABC, trained in frames of its
    own, is tested in the frames of every other method). A ``+varied`` run, trained without
    leading zeros, is tested in a frame of exactly the length."""
    if cfg.varied:
        return list(lengths)
    follows = frame_of(experiment, test_frame) == "follows"
    return [
        pad_width_for(
            length, protocol_width(experiment, cfg), follows, cfg.period, cfg.train_digits
        )
        for length in lengths
    ]


def check_cell_evaluation(experiment: Experiment, device) -> None:
    """Refuse, before training, a cell whose tests cannot fit in memory at its widest frame, or
    whose longest test needs positions its model lacks."""
    widest = max(test_frames(experiment, experiment.run, experiment.lengths))
    check_evaluation(experiment.run, widest, device, operand_count(max(experiment.lengths)))
    check_positions(experiment.run, max(experiment.lengths), widest)


def check_positions(cfg: RunConfig, length: int, frame: int) -> None:
    """Refuse a test at ``length`` digits whose example needs more positions than the model's
    table or range holds (Abacus's and Coupling's ids, randomized positions, index hints): one
    example of it through the model's own positions, in the model without layers."""
    shell = build_model(replace(cfg.model_config(), enc_layers=0, dec_layers=0))
    randomized = cfg.fire_positions == "randomized"
    if shell.token_positions is None and not cfg.index_hints and not randomized:
        return  # nothing bounded: building a long test's numbers would be all it did
    a, b = extrapolation_operands(cfg.task, length, 0)
    example = format_task(cfg.task, a[:1], None if b is None else b[:1], frame, cfg.form)
    try:
        with torch.no_grad():
            shell.eval()(example.src, example.tgt_in)
    except InputError as error:
        raise UserError(
            f"a test at {length} digits: {error}; raise --max-position or test shorter --lengths"
        ) from None


def evaluate_run(
    run_dir: str,
    lengths,
    test_seed: int | None,
    device,
    hooks: Hooks,
    tracking: Tracking,
    batch_size: int = 1000,
    test_frame: str | None = None,
    stress: bool = False,
) -> dict:
    """``abcmini eval``: a trained run at ``lengths`` (default its experiment's) in its test frame
    (or ``test_frame``), as a tracked wandb run of its cell; merges into its ``eval.json``.
    ``stress``: its task's stress families at those lengths instead of the random test."""
    experiment = experiment_of(run_dir)
    if test_frame is not None:
        check_test_frame(test_frame)
    state = load_checkpoint(run_dir)
    cfg, model = load_model(state, device)
    check_recorded_model(run_dir, experiment, cfg)
    lengths = tuple(lengths or (experiment.lengths if experiment else ()))
    if not lengths:
        raise UserError(
            f"{run_dir!r} has no experiment record to take test lengths from; pass --lengths"
        )
    frames = test_frames(experiment, cfg, lengths, test_frame)  # every length fits, the batches
    if stress and not families(cfg.task):
        raise UserError(f"{cfg.task} has no stress families (abcmini.stress)")
    most = 2 * operand_count(max(lengths)) if stress else operand_count(max(lengths))
    check_evaluation(cfg, max(frames), device, most)  # fits, and the record can be written
    check_positions(cfg, max(lengths), max(frames))
    check_writable(run_dir, "RUN_DIR")
    read_eval(run_dir)  # a record of the wrong shape is refused before any work
    test_seed = test_seed if test_seed is not None else experiment.test_seed if experiment else 0
    with lock_run(run_dir):
        weights = {
            **checkpoint_identity(run_dir),
            "step": state["step"],
        }  # the model tested: checkpoint path, hash, step
        with tracker_for(
            experiment,
            cfg,
            run_dir,
            "eval",
            tracking,
            model=model,
            lengths=list(lengths),
            test_seed=test_seed,
            weights=weights,
        ) as tracker:
            if experiment:
                tracker.use(artifact_name("model", experiment.identity))
            if stress:
                return stress_test(
                    run_dir,
                    experiment,
                    cfg,
                    model,
                    state["history"],
                    lengths,
                    test_seed,
                    hooks,
                    tracker,
                    batch_size,
                    test_frame,
                )
            result = evaluate(
                run_dir,
                experiment,
                cfg,
                model,
                state["history"],
                lengths,
                test_seed,
                hooks,
                tracker,
                batch_size=batch_size,
                test_frame=test_frame,
                weights=weights,
                **recorded_source(run_dir, experiment),
            )
            log_pictures(tracker, model, experiment, cfg, state["step"])
            return result


def experiment_of(run_dir: str) -> Experiment | None:
    """The experiment a run directory's ``experiment.json`` records (None: it has none)."""
    data = read_experiment(run_dir) if os.path.isdir(run_dir) else None
    return Experiment.from_dict(data) if data is not None else None


def check_recorded_model(run_dir: str, experiment: Experiment | None, cfg: RunConfig) -> None:
    """Refuse a checkpoint whose task or model is not the one ``experiment.json`` records: a
    checkpoint copied in from another run would be tested or calibrated under this run's name."""
    if experiment is None:
        return
    recorded = experiment.run
    if (recorded.task, recorded.model_config()) != (cfg.task, cfg.model_config()):
        theirs, ours = (
            asdict(cfg.model_config()) | {"task": cfg.task},
            asdict(recorded.model_config()) | {"task": recorded.task},
        )
        changed = ", ".join(
            f"{k} {theirs[k]!r} there, {ours[k]!r} in experiment.json"
            for k in ours
            if theirs[k] != ours[k]
        )
        raise UserError(
            f"{os.path.join(run_dir, 'checkpoint.pt')!r} holds another model than its experiment.json records ({changed})"
        )


def use_threads(threads: int | None) -> None:
    """Torch's intra-op threads (``None``: its default). Results are bit-identical only at
    the same thread count: float reductions split differently."""
    if threads is not None:
        torch.set_num_threads(threads)
