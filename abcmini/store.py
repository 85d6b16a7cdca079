"""The files abcmini writes, each with one reader and one (atomic) writer: checkpoints, ABC bias
files, result records (``eval.json``) and experiment records (``experiment.json``).

Every write goes to a temporary file beside the target and is renamed over it, so a kill, a full
disk or a read-only directory never leaves a half-written file; torch files are read with
``weights_only=True``, so a file from elsewhere cannot run code.
"""

import glob
import json
import os
import shutil

import torch

from abcmini.errors import UserError

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 2
BIAS_FORMAT = "abcmini-abc-bias-1"
EVAL_FILE = "eval.json"
EXPERIMENT_FILE = "experiment.json"


class StoreError(UserError):
    """A file abcmini cannot read or write; the message names it."""


class CheckpointError(StoreError):
    pass


class BiasFileError(StoreError):
    pass


def atomic_write(path: str, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then rename it over ``path``."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as error:  # torch.save reports a full disk as a RuntimeError
        if os.path.exists(tmp):
            os.remove(tmp)
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error).splitlines()[0]
        raise StoreError(f"cannot write {path!r}: {reason}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save_torch(path: str, obj) -> None:
    atomic_write(path, lambda f: torch.save(obj, f))


def save_json(path: str, obj) -> None:
    atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2) + "\n").encode()))


def load_torch(path: str, what: str, error=StoreError) -> dict:
    """A torch file of ours, safely: a missing, truncated, foreign or hostile file is ``error``."""
    if not os.path.isfile(path):
        raise error(f"{what} {path!r} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated, corrupt, not a torch file, or a pickle that wants to run code
        raise error(f"{what} {path!r} is unreadable ({type(exc).__name__}); it may be truncated or corrupt") from None
    if not isinstance(state, dict):
        raise error(f"{path!r} is not an abcmini {what}")
    return state


def load_json(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as error:
        raise StoreError(f"cannot read {what} {path!r}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise StoreError(f"{what} {path!r} is not valid JSON (line {error.lineno})") from None
    if not isinstance(data, dict):
        raise StoreError(f"{what} {path!r} does not hold a JSON object")
    return data


# ---------------------------------------------------------------- checkpoints


def save_checkpoint(run_dir: str, state: dict) -> None:
    save_torch(os.path.join(run_dir, CHECKPOINT), {"format": CHECKPOINT_FORMAT, **state})


def load_checkpoint(run_dir: str) -> dict:
    if not os.path.isdir(run_dir):
        raise CheckpointError(f"run directory {run_dir!r} does not exist")
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint in {run_dir!r} (expected {CHECKPOINT})")
    state = load_torch(path, "checkpoint", CheckpointError)
    if state.get("format") != CHECKPOINT_FORMAT or "config" not in state:
        raise CheckpointError(f"{path!r} is not an abcmini checkpoint (format {CHECKPOINT_FORMAT})")
    return state


def has_run(run_dir: str) -> bool:
    """Whether ``run_dir`` holds an abcmini run (a checkpoint or an experiment record)."""
    return any(os.path.isfile(os.path.join(run_dir, name)) for name in (CHECKPOINT, EXPERIMENT_FILE))


def check_run_dir(run_dir: str, resume: bool, overwrite: bool) -> bool:
    """The rules of a run directory about to be trained into; returns whether it holds a run."""
    if resume and overwrite:
        raise StoreError("--resume and --overwrite contradict each other; pass one")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise StoreError(f"--out {run_dir!r} is a file, not a directory")
    exists = has_run(run_dir)
    if exists and not (resume or overwrite):
        raise StoreError(f"{run_dir!r} already holds a run; pass --resume to continue it or --overwrite to replace it")
    if resume and not exists:
        raise StoreError(f"--resume: {run_dir!r} holds no run to continue")
    if overwrite and os.path.isdir(run_dir) and not exists:
        raise StoreError(f"--overwrite: {run_dir!r} holds no abcmini run; refusing to delete it")
    return exists


RUN_FILES = (CHECKPOINT, f"{CHECKPOINT}.tmp", EXPERIMENT_FILE, EVAL_FILE, "abc_bias.pt", "abc_*.png", "wandb-id", "wandb")


def clear_run(run_dir: str) -> None:
    """Delete what abcmini wrote in ``run_dir`` (and in an ABC source inside it), nothing else;
    the directory itself goes only if nothing else is left in it."""
    source = os.path.join(run_dir, "source")
    if os.path.isdir(source) and has_run(source):
        clear_run(source)
    for pattern in RUN_FILES:
        for path in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    if not os.listdir(run_dir):
        os.rmdir(run_dir)


# ---------------------------------------------------------------- ABC bias files


def save_bias(path: str, payload: dict) -> None:
    save_torch(path, {"format": BIAS_FORMAT, **payload})


def load_bias(path: str) -> dict:
    payload = load_torch(path, "bias file", BiasFileError)
    if payload.get("format") != BIAS_FORMAT:
        raise BiasFileError(f"{path!r} is not an abcmini bias file")
    return payload


def check_bias_matches(payload: dict, task: str, pad_width, heads: int, path: str) -> None:
    """Refuse a bias calibrated for another task, head count or geometry."""
    if payload["task"] != task:
        raise BiasFileError(f"bias file {path!r} was calibrated on {payload['task']}, not {task}")
    if payload["heads"] != heads:
        raise BiasFileError(f"bias file {path!r} has {payload['heads']} heads; this model has {heads}")
    if payload["pad_width"] != pad_width:
        geometry = lambda p: f"pad width {p}" if p is not None else "the growing geometry"  # noqa: E731
        raise BiasFileError(f"bias file {path!r} comes from {geometry(payload['pad_width'])}; this run uses {geometry(pad_width)}")


# ---------------------------------------------------------------- result and experiment records


def read_eval(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, EVAL_FILE)
    return load_json(path, "result record") if os.path.exists(path) else None


def read_eval_of(run_dir: str, train_steps, test_seed, test_frame: str = "fixed") -> dict:
    """``RUN_DIR/eval.json`` if it records this training state, test seed and test frame, else
    ``{}``: accuracies of another state or another test set must not mix with new ones."""
    old = read_eval(run_dir) or {}
    same = (old.get("train_steps"), old.get("test_seed"), old.get("test_frame", "fixed")) == (train_steps, test_seed, test_frame)
    return old if same else {}


def write_eval(run_dir: str, record: dict) -> dict:
    """Merge ``record`` into ``RUN_DIR/eval.json``: new fields and lengths are added or replace
    theirs, nothing else is dropped (a record of another training state or test seed is replaced whole)."""
    old = read_eval_of(run_dir, record.get("train_steps"), record.get("test_seed"), record.get("test_frame", "fixed"))
    merged = {**old, **record, "accuracy": {**old.get("accuracy", {}), **record.get("accuracy", {})}}
    merged["accuracy"] = dict(sorted(merged["accuracy"].items(), key=lambda item: int(item[0])))
    save_json(os.path.join(run_dir, EVAL_FILE), merged)
    return merged


def write_experiment(run_dir: str, record: dict) -> None:
    save_json(os.path.join(run_dir, EXPERIMENT_FILE), record)


def read_experiment(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, EXPERIMENT_FILE)
    return load_json(path, "experiment record") if os.path.exists(path) else None
