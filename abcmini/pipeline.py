"""One cell end to end, the same for ``abcmini train`` and ``abcmini reproduce``: train (for
ABC: train the Vanilla source to interpolation, calibrate it, retrain with the bias), evaluate
at the experiment's lengths, and write the result record ``RUN_DIR/eval.json``.
"""

import os
import time
from contextlib import contextmanager

import torch

from abcmini import __version__
from abcmini.biases import Calibrated
from abcmini.calibrate import calibrate_run
from abcmini.evaluate import extrapolation_accuracy
from abcmini.experiment import ABC_BIAS, Experiment, RunConfig
from abcmini.figures import calibration_figures
from abcmini.store import read_eval, write_eval, write_experiment
from abcmini.train import Trainer


class Hooks:
    """What a caller sees of a cell while it runs (the CLI prints and tracks; ``reproduce``'s
    workers stay quiet). Every hook does nothing by default."""

    @contextmanager
    def training(self, role: str, trainer: Trainer):
        """Around the training of ``role`` (``source`` or ``run``)."""
        yield

    def step(self, step: int, loss: float) -> None: ...

    def validated(self, entry: dict) -> None: ...

    def calibrated(self, result: dict, seconds: float, pngs: dict) -> None: ...

    def trained(self, trainer: Trainer) -> None:
        """The cell's own run is trained (its model, about to be evaluated)."""

    def evaluated(self, length: int, accuracy: float, seconds: float) -> None: ...


def fit(trainer: Trainer, role: str, hooks: Hooks) -> dict:
    """Train ``trainer`` from where its run directory stopped; returns the last history entry."""
    trainer.resume()
    with hooks.training(role, trainer):
        if not trainer.stopped:
            trainer.run(on_eval=hooks.validated, on_step=hooks.step)
    return trainer.history[-1] if trainer.history else {}


def record(experiment: dict | None, cfg: RunConfig, history: list, test_seed: int, accuracy: dict, **extra) -> dict:
    """The result record of a run: its identity (``experiment``, the run's ``experiment.json``),
    protocol, training cost and accuracy per length."""
    experiment, last = experiment or {}, history[-1] if history else {}
    return {"task": cfg.task, "method": cfg.label, "cell_method": experiment.get("cell", {}).get("method"), "scheme": cfg.scheme,
            "window": cfg.window, "period": cfg.period, "preset": cfg.preset, "pad_width": cfg.pad_width, "seed": cfg.seed,
            "recipe": experiment.get("recipe"), "overrides": experiment.get("overrides", {}), "test_seed": test_seed,
            "train_steps": last.get("step"), "train_seconds": last.get("seconds"), "valid_acc": last.get("valid_acc"),
            "version": __version__, **extra, "accuracy": {str(n): acc for n, acc in accuracy.items()}}


def evaluate(run_dir: str, experiment: dict | None, cfg: RunConfig, model, history: list, lengths, test_seed: int,
             hooks: Hooks, redo: bool = True, batch_size: int = 1000, started: float | None = None, **extra) -> dict:
    """Accuracy at ``lengths`` merged into ``RUN_DIR/eval.json`` (``redo=False``: lengths the
    record already holds for this training state and test seed are not evaluated again).
    ``started``: when the job began (``perf_counter``), to record its wall time."""
    old = read_eval(run_dir) or {}
    same = old.get("train_steps") == (history[-1]["step"] if history else None) and old.get("test_seed") == test_seed
    done = old.get("accuracy", {}) if same and not redo else {}
    accuracy = {}
    for length in lengths:
        if str(length) in done:
            continue
        began = time.perf_counter()
        accuracy[length] = extrapolation_accuracy(model, cfg.task, length, cfg.pad_width, test_seed, cfg.aligned, batch_size)
        hooks.evaluated(length, accuracy[length], time.perf_counter() - began)
    if started is not None:
        extra["job_seconds"] = round(time.perf_counter() - started, 2)
    return write_eval(run_dir, record(experiment, cfg, history, test_seed, accuracy, **extra))


def run_cell(experiment: Experiment, run_dir: str, source_dir: str | None = None, device="cpu",
             hooks: Hooks | None = None, lengths=None) -> dict:
    """Train (resuming), calibrate (ABC), evaluate at ``lengths`` (default the experiment's);
    returns the merged result record."""
    hooks, start, extra = hooks or Hooks(), time.perf_counter(), {}
    os.makedirs(run_dir, exist_ok=True)
    write_experiment(run_dir, experiment.to_dict())
    if experiment.calibration is not None:
        source = Trainer(experiment.source, source_dir, device)
        trained = fit(source, "source", hooks)
        bias_path = os.path.join(run_dir, ABC_BIAS)
        if not os.path.exists(bias_path):
            began = time.perf_counter()
            result = calibrate_run(source_dir, bias_path, experiment.calibration)
            extra["calibration_seconds"] = round(time.perf_counter() - began, 2)
            pngs = calibration_figures(run_dir, experiment.cell.task, result["attention"]["self"], result["attention"]["cross"],
                                       Calibrated.from_state(result["bias"]), result["example"], result["calibration"]["layers"])
            hooks.calibrated(result, extra["calibration_seconds"], pngs)
        extra |= {"source": os.path.abspath(source_dir), "interpolation_steps": trained.get("step"),
                  "interpolation_seconds": trained.get("seconds")}
    trainer = Trainer(experiment.run, run_dir, device)
    fit(trainer, "run", hooks)
    hooks.trained(trainer)
    return evaluate(run_dir, experiment.to_dict(), trainer.cfg, trainer.model, trainer.history, lengths or experiment.lengths,
                    experiment.test_seed, hooks, redo=False, started=start, **extra)


def use_threads(threads: int | None) -> None:
    """Torch's intra-op threads (``None``: its default). Results are bit-identical only at
    the same thread count: float reductions split differently."""
    if threads is not None:
        torch.set_num_threads(threads)
