"""The files abcmini writes, each with one reader and one (atomic) writer: checkpoints, ABC bias
files, result records (``eval.json``) and experiment records (``experiment.json``).

Every write goes to a new temporary file of a unique name beside the target (created with
``O_EXCL``, so a planted symlink is never followed) and is renamed over it, so a kill, a full
disk or a read-only directory never leaves a half-written file; torch files are read with
``weights_only=True``, so a file from elsewhere cannot run code.

A run directory lists what abcmini wrote in it in ``.abcmini-files`` (one relative path a line:
checkpoint, records, bias, heatmaps, wandb's run folders); ``--overwrite`` deletes those and
nothing else. A process writing a run directory holds ``.abcmini.lock`` in it (``lock_run``),
so a second one is refused instead of training the same run twice. This module imports torch
only to read or write a torch file.
"""

import fcntl
import glob
import json
import os
import shutil
import socket
import sys
import tempfile
from contextlib import contextmanager

from abcmini.errors import UserError

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 2
EVAL_FILE = "eval.json"
EXPERIMENT_FILE = "experiment.json"
MANIFEST = ".abcmini-files"
LOCK = ".abcmini.lock"


class StoreError(UserError):
    """A file abcmini cannot read or write; the message names it."""


class CheckpointError(StoreError):
    pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _umask()


TMP_MARK = "abcmini-"  # in the name of every temporary file atomic_write makes


def atomic_write(path: str, write) -> None:
    """``write(file)`` into a new temporary file of a unique name beside ``path`` (``O_EXCL``:
    never a file or symlink that was there), ``NAME.abcmini-XXXXXXXX.tmp``, then rename it over
    ``path``; temporary files of that shape that a killed write left behind go first (a user's
    ``NAME.backup01.tmp`` is not of that shape and stays)."""
    tmp = None
    directory, name = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    for stale in glob.glob(
        os.path.join(glob.escape(directory), f"{glob.escape(name)}.{TMP_MARK}{'[a-z0-9_]' * 8}.tmp")
    ):
        os.remove(stale)  # what an earlier write to this path left when it was killed
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{name}.{TMP_MARK}", suffix=".tmp", dir=directory)
        os.fchmod(fd, 0o666 & ~UMASK)  # the mode an ordinary new file gets, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as error:  # torch.save reports a full disk as a RuntimeError
        if tmp and os.path.lexists(tmp):
            os.remove(tmp)
        reason = (
            (error.strerror or str(error))
            if isinstance(error, OSError)
            else "the write stopped short (a full disk or a file size limit)"
        )
        raise StoreError(f"cannot write {path!r}: {reason}") from None
    except BaseException:
        if tmp and os.path.lexists(tmp):
            os.remove(tmp)
        raise


def save_torch(path: str, obj) -> None:
    import torch

    atomic_write(path, lambda f: torch.save(obj, f))


def save_json(path: str, obj) -> None:
    atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2) + "\n").encode()))


def load_torch(path: str, what: str, error=StoreError, max_bytes: int = 8 << 30) -> dict:
    """A torch file of ours, safely: a missing, special, oversized, truncated, foreign or hostile
    file is ``error``, refused before it is read where its size or type says so."""
    if not os.path.exists(path):
        raise error(f"{what} {path!r} does not exist")
    if not os.path.isfile(path):  # a FIFO or a device would block the read
        raise error(f"{what} {path!r} is not a regular file")
    if os.path.getsize(path) > max_bytes:
        raise error(
            f"{what} {path!r} holds {os.path.getsize(path):,} bytes; one is at most {max_bytes:,}"
        )
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (
        Exception
    ) as exc:  # truncated, corrupt, not a torch file, or a pickle that wants to run code
        raise error(
            f"{what} {path!r} is unreadable ({type(exc).__name__}); it may be truncated or corrupt"
        ) from None
    if not isinstance(state, dict):
        raise error(f"{path!r} is not an abcmini {what}")
    return state


JSON_BYTES = 64 << 20  # a record is kilobytes; this bounds what is read before it is parsed


def load_json(path: str, what: str) -> dict:
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO or a device would block the read
        raise StoreError(f"{what} {path!r} is not a regular file")
    if os.path.isfile(path) and os.path.getsize(path) > JSON_BYTES:
        raise StoreError(
            f"{what} {path!r} holds {os.path.getsize(path):,} bytes; one is at most {JSON_BYTES:,}"
        )
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
    note_written(run_dir, CHECKPOINT)
    save_torch(os.path.join(run_dir, CHECKPOINT), {"format": CHECKPOINT_FORMAT, **state})


def require_checkpoint(run_dir: str) -> str:
    """The path of ``run_dir``'s checkpoint, or the one-line reason there is none (without torch)."""
    if not os.path.isdir(run_dir):
        raise CheckpointError(f"run directory {run_dir!r} does not exist")
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint in {run_dir!r} (expected {CHECKPOINT})")
    return path


def checkpoint_identity(run_dir: str) -> dict:
    """Which model a run directory holds now: its checkpoint's path, relative to the run directory
    (a record travels with its root, as its ``source`` does), and SHA-256 (what ``eval`` records,
    so a result names the exact weights it came from)."""
    import hashlib

    digest = hashlib.sha256()
    with open(os.path.join(run_dir, CHECKPOINT), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"checkpoint": CHECKPOINT, "sha256": digest.hexdigest()}


def load_checkpoint(run_dir: str) -> dict:
    path = require_checkpoint(run_dir)
    state = load_torch(path, "checkpoint", CheckpointError)
    if state.get("format") != CHECKPOINT_FORMAT or "config" not in state:
        raise CheckpointError(f"{path!r} is not an abcmini checkpoint (format {CHECKPOINT_FORMAT})")
    return check_checkpoint(path, state)


def check_checkpoint(path: str, state: dict) -> dict:
    """``state`` if it has a checkpoint's parts (a config mapping, the model's tensors, a
    history of entries), else one line naming the file and what is wrong."""
    import torch

    parts = {
        "config": (dict, "a mapping of run fields"),
        "model": (dict, "a mapping of tensors"),
        "history": (list, "a list of entries"),
    }
    for name, (kind, expected) in parts.items():
        if name not in state:
            raise CheckpointError(
                f"checkpoint {path!r} lacks its {name!r}; it is not a complete abcmini checkpoint"
            )
        if not isinstance(state[name], kind):
            raise CheckpointError(
                f"checkpoint {path!r}: {name!r} must be {expected}, got {type(state[name]).__name__}"
            )
    if not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state["model"].items()
    ):
        raise CheckpointError(f"checkpoint {path!r}: 'model' must map parameter names to tensors")
    if (
        not isinstance(state.get("step", 0), int)
        or isinstance(state.get("step"), bool)
        or state.get("step", 0) < 0
    ):
        raise CheckpointError(
            f"checkpoint {path!r}: 'step' must be a whole number, got {state.get('step')!r}"
        )
    if not all(
        isinstance(entry, dict) and isinstance(entry.get("step"), int) for entry in state["history"]
    ):
        raise CheckpointError(
            f"checkpoint {path!r}: 'history' entries must be mappings with a 'step'"
        )
    return state  # its config is checked where it becomes a run's (experiment.run_config_of)


def has_run(run_dir: str) -> bool:
    """Whether ``run_dir`` holds an abcmini run: a checkpoint, a result record or an ABC bias that
    abcmini wrote there (its manifest; from before the manifest, beside an experiment record), or
    a source run inside it; a user's own ``checkpoint.pt`` is no run of ours. An experiment
    record alone is a start that failed before training wrote anything (``has_start``): the
    corrected command may start there again."""
    listed = written(run_dir)
    ours = (
        listed
        if listed is not None
        else (CHECKPOINT, EVAL_FILE, "abc_bias.pt")
        if is_experiment_record(os.path.join(run_dir, EXPERIMENT_FILE))
        else ()
    )  # from before the manifest: by name, beside its experiment record
    if any(
        os.path.isfile(os.path.join(run_dir, name))
        for name in (CHECKPOINT, EVAL_FILE, "abc_bias.pt")
        if name in ours
    ):
        return True
    source = os.path.join(run_dir, "source")
    return os.path.isdir(source) and has_run(source)


def has_start(run_dir: str) -> bool:
    """Whether abcmini started a run in ``run_dir``: a run, or at least its experiment record
    (listed in the manifest, or for a run from before it, an experiment record by its fields:
    a user's own ``experiment.json`` is no start of ours)."""
    if has_run(run_dir):
        return True
    listed = written(run_dir)
    return (
        EXPERIMENT_FILE in listed
        if listed is not None
        else is_experiment_record(os.path.join(run_dir, EXPERIMENT_FILE))
    )


def is_experiment_record(path: str) -> bool:
    """Whether ``path`` is a regular file holding an experiment record (its identity and cell)."""
    if not os.path.isfile(path) or os.path.getsize(path) > 1_000_000:
        return False
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"identity", "cell"} <= data.keys()


def check_run_dir(run_dir: str, resume: bool, overwrite: bool, dry_run: bool = False) -> bool:
    """The rules of a run directory about to be trained into; returns whether it holds a run.
    A dry run writes nothing, so what the directory holds is no reason to refuse it."""
    if resume and overwrite:
        raise StoreError("--resume and --overwrite contradict each other; pass one")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise StoreError(f"--out {run_dir!r} is a file, not a directory")
    exists, started = has_run(run_dir), has_start(run_dir)
    if dry_run:
        return started
    if exists and not (resume or overwrite):
        raise StoreError(
            f"{run_dir!r} already holds a run; pass --resume to continue it or --overwrite to replace it"
        )
    if resume and not started:
        raise StoreError(f"--resume: {run_dir!r} holds no run to continue")
    if overwrite and os.path.isdir(run_dir) and not started:
        raise StoreError(f"--overwrite: {run_dir!r} holds no abcmini run; refusing to delete it")
    if os.path.isdir(run_dir):
        check_ours(
            run_dir, (EXPERIMENT_FILE, CHECKPOINT, EVAL_FILE), "--out"
        )  # a user's files of these names stay theirs
    return started


CALIBRATION_FIGURES = tuple(
    f"abc_{name}.png" for name in ("attention_cross", "attention_self", "bias_cross", "bias_self")
)
LEGACY_FILES = (
    CHECKPOINT,
    EXPERIMENT_FILE,
    EVAL_FILE,
    "abc_bias.pt",
    "wandb-id",
    *CALIBRATION_FIGURES,
)  # a run from before the manifest


def check_ours(directory: str, names, option: str = "--out") -> None:
    """Refuse, in one line and before any work, to write ``names`` into ``directory`` over files
    abcmini did not write there (its manifest; a run from before it by name)."""
    listed = owned(directory)
    for name in names:
        path = os.path.join(directory, name)
        if os.path.lexists(path) and name not in listed:
            raise StoreError(
                f"{path!r} was not written by abcmini; refusing to replace it (move it or choose another {option})"
            )


def owned(directory: str) -> list[str]:
    """What abcmini wrote in ``directory``: its manifest, or for a run from before the manifest
    the files it wrote by name; nothing in a directory that holds no run."""
    listed = written(directory)
    return list(LEGACY_FILES if has_start(directory) else ()) if listed is None else listed


def written(directory: str) -> list[str]:
    """The paths (relative to ``directory``) its manifest says abcmini wrote; ``None`` without one.
    Entries that would leave the directory are ignored."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        names = [line.strip() for line in f if line.strip()]
    return [
        n
        for n in dict.fromkeys(names)
        if not os.path.isabs(n) and ".." not in n.split("/") and n not in (MANIFEST, LOCK)
    ]


def note_written(directory: str, *names: str) -> None:
    """Add ``names`` (paths relative to ``directory``) to its manifest of what abcmini wrote."""
    listed = written(directory)
    if listed is None and has_start(
        directory
    ):  # a run from before the manifest: what it wrote is known by name
        listed, names = (
            [],
            (*(n for n in LEGACY_FILES if os.path.isfile(os.path.join(directory, n))), *names),
        )
    new = list(dict.fromkeys(n for n in names if n not in (listed or [])))
    if not new:
        return
    try:
        fd = os.open(
            os.path.join(directory, MANIFEST),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
            0o666,
        )
        with os.fdopen(fd, "a", encoding="utf-8", errors="surrogateescape") as f:
            f.write("".join(f"{n}\n" for n in new))
    except OSError as error:
        raise StoreError(
            f"cannot write {os.path.join(directory, MANIFEST)!r}: {error.strerror or error}"
        ) from None


def _remove(path: str) -> None:
    shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def clear_run(run_dir: str) -> list[str]:
    """Delete what abcmini wrote in ``run_dir`` (its manifest, and an ABC source inside it) and
    nothing else; returns what was kept (paths), and the directory goes only if nothing is left."""
    kept = []
    source = os.path.join(run_dir, "source")
    if os.path.isdir(source) and has_start(source):
        kept += clear_run(source)
    for name in owned(run_dir):
        path = os.path.join(run_dir, name)
        if os.path.lexists(path):
            _remove(path)
        parent = os.path.dirname(path)
        while (
            os.path.abspath(parent) != os.path.abspath(run_dir)
            and os.path.isdir(parent)
            and not os.listdir(parent)
        ):
            os.rmdir(parent)
            parent = os.path.dirname(parent)
    if os.path.lexists(os.path.join(run_dir, MANIFEST)):
        os.remove(os.path.join(run_dir, MANIFEST))
    for folder, _, files in os.walk(run_dir):
        kept += [
            os.path.join(folder, name)
            for name in files
            if os.path.join(folder, name) != os.path.join(run_dir, LOCK)
        ]
    if not os.listdir(run_dir):
        os.rmdir(run_dir)
    return sorted(set(kept))


# ---------------------------------------------------------------- the lock of a run directory

_held: dict[str, int] = {}  # real path of a locked directory → how many holders in this process


@contextmanager
def lock_run(run_dir: str, create: bool = True, waiting=None):
    """Hold ``RUN_DIR/.abcmini.lock`` while writing ``run_dir``: a second process is refused with
    one line naming the holder, or, with ``waiting`` (a callable given that line), waits for it
    after calling ``waiting`` once. Reentrant within a process; a missing directory is made
    (``create``) or left to the caller's own error."""
    if not os.path.isdir(run_dir):
        if not create:
            yield
            return
        try:
            os.makedirs(run_dir, exist_ok=True)
        except OSError as error:
            raise StoreError(f"{run_dir!r} is not writable: {error.strerror or error}") from None
    key = os.path.realpath(run_dir)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    path = os.path.join(run_dir, LOCK)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as error:
        raise StoreError(
            f"{run_dir!r} is not writable: {error.strerror or error} (cannot take its lock {LOCK})"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 500, 0).decode(errors="replace").strip() or "another process"
            if waiting is None:
                raise StoreError(
                    f"{run_dir!r} is in use by {holder}; wait for it to end or choose another directory"
                ) from None
            waiting(f"{run_dir!r} is in use by {holder}; waiting for it to end")
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(
                fd,
                f"pid {os.getpid()} on {socket.gethostname()} (abcmini {' '.join(sys.argv[1:2])})\n".encode(),
                0,
            )
        except OSError as error:  # a full disk
            raise StoreError(f"cannot write {path!r}: {error.strerror or error}") from None
        _held[key] = 1
        try:
            yield
        finally:
            del _held[key]
    finally:
        os.close(fd)


# ---------------------------------------------------------------- result and experiment records


def read_eval(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, EVAL_FILE)
    return (
        check_fields(path, "result record", load_json(path, "result record"), RECORD_SCHEMA)
        if os.path.exists(path)
        else None
    )


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _length_map(v, values) -> bool:
    return isinstance(v, dict) and all(
        k.isdigit() and int(k) >= 1 and values(x) for k, x in v.items()
    )


_NUMBER = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
_OPTIONAL_INT = (lambda v: v is None or _int(v), "an integer or null")
TEST_FIELDS = {
    "accuracy": (
        lambda v: _length_map(v, lambda x: _NUMBER(x) and 0 <= x <= 1),
        "lengths mapped to accuracies in [0, 1]",
    ),
    "test_seconds": (lambda v: _length_map(v, _NUMBER), "lengths mapped to seconds"),
    "train_steps": _OPTIONAL_INT,
    "test_seed": _OPTIONAL_INT,
    "test_frame": (lambda v: v in ("fixed", "follows"), "fixed or follows"),
}
RECORD_SCHEMA = {
    **TEST_FIELDS,
    "task": (lambda v: isinstance(v, str), "a task name"),
    "method": (lambda v: isinstance(v, str), "a method name"),
    "seed": (_int, "an integer"),
    "pad_width": _OPTIONAL_INT,
    "train_seconds_by_device": (
        lambda v: isinstance(v, dict) and all(map(_NUMBER, v.values())),
        "devices mapped to seconds",
    ),
    "other_tests": (
        lambda v: isinstance(v, dict) and all(isinstance(t, dict) for t in v.values()),
        "a mapping of tests",
    ),
}
EXPERIMENT_SCHEMA = {
    "lengths": (
        lambda v: isinstance(v, list) and all(_int(n) and n >= 1 for n in v),
        "a list of lengths (integers ≥ 1)",
    ),
    "test_seed": (_int, "an integer"),
    "test_frame": TEST_FIELDS["test_frame"],
    "test_pad_width": _OPTIONAL_INT,
    "recipe": (lambda v: v is None or isinstance(v, str), "a recipe name"),
    "identity": (lambda v: isinstance(v, str), "a string"),
    "cell": (lambda v: isinstance(v, dict), "a mapping"),
    "calibration": (lambda v: v is None or isinstance(v, dict), "a mapping"),
}


def check_fields(path: str, what: str, data: dict, schema: dict) -> dict:
    """``data`` if each field of ``schema`` it holds has the expected shape, else one line naming the file and the field."""
    for name, (ok, expected) in schema.items():
        if name in data and not ok(data[name]):
            raise StoreError(
                f"{what} {path!r}: field {name!r} must be {expected}, got {json.dumps(data[name])[:60]}"
            )
    for test in (data.get("other_tests") or {}).values() if schema is RECORD_SCHEMA else ():
        check_fields(path, what, test, TEST_FIELDS)
    return data


OTHER_TESTS = (
    "other_tests"  # eval.json: tests of the same training state in another frame or test seed
)
KEPT_BESIDE = (
    "test_frame",
    "test_seed",
    "train_steps",
    "accuracy",
    "test_seconds",
    "version",
    "commit",
    "test_commits",
)


def test_key(test_frame: str, test_seed) -> str:
    return f"{test_frame}, test seed {test_seed}"


def read_eval_of(run_dir: str, train_steps, test_seed, test_frame: str = "fixed") -> dict:
    """The part of ``RUN_DIR/eval.json`` that records this training state, test seed and test
    frame (the record, or one of its ``other_tests``), else ``{}``: accuracies of another state
    or another test set must not mix with new ones."""
    old = read_eval(run_dir) or {}
    others = old.get(OTHER_TESTS) if isinstance(old.get(OTHER_TESTS), dict) else {}
    for candidate in (old, others.get(test_key(test_frame, test_seed))):
        if isinstance(candidate, dict) and (
            candidate.get("train_steps"),
            candidate.get("test_seed"),
            candidate.get("test_frame", "fixed"),
        ) == (train_steps, test_seed, test_frame):
            return candidate
    return {}


def _merge(old: dict, new: dict) -> dict:
    """``new`` over ``old``, their accuracies merged. ``commit`` stays the one that first tested
    this training state; lengths tested by another commit name it in ``test_commits``."""
    merged = {**old, **new, "accuracy": {**old.get("accuracy", {}), **new.get("accuracy", {})}}
    merged["accuracy"] = dict(sorted(merged["accuracy"].items(), key=lambda item: int(item[0])))
    if old.get("accuracy") and "commit" in old and "commit" in new:
        tested = {
            **old.get("test_commits", {}),
            **{n: new["commit"] for n in new.get("accuracy", {})},
        }
        merged["commit"] = old["commit"]
        merged["test_commits"] = {n: c for n, c in tested.items() if c != old["commit"]}
        if not merged["test_commits"]:
            del merged["test_commits"]
    return merged


def write_eval(run_dir: str, record: dict) -> dict:
    """Merge ``record`` into ``RUN_DIR/eval.json`` and return it merged: new fields and lengths are
    added or replace theirs, nothing else is dropped. The record is the test of the run's protocol
    (its experiment's test frame and seed); a test of the same training state in another frame or
    with another test seed is kept beside it, under ``other_tests``. Only a record of another
    training state is replaced whole."""
    old = read_eval(run_dir) or {}
    if old.get("train_steps") != record.get("train_steps"):
        old = {}
    key = lambda r: test_key(r.get("test_frame", "fixed"), r.get("test_seed"))  # noqa: E731
    others = dict(old.get(OTHER_TESTS) or {}) if isinstance(old.get(OTHER_TESTS), dict) else {}
    experiment = read_experiment(run_dir) or {}
    if not old or key(old) == key(record):
        merged = result = _merge(old, record)
    elif key(record) == key(
        experiment
    ):  # the protocol's test takes the record's place; the one there goes beside
        others[key(old)] = {k: old[k] for k in KEPT_BESIDE if k in old}
        run = {k: v for k, v in old.items() if k not in KEPT_BESIDE and k != OTHER_TESTS}
        merged = result = _merge({**run, **others.pop(key(record), {})}, record)
        if others:
            merged[OTHER_TESTS] = others
    else:
        others[key(record)] = _merge(
            others.get(key(record), {}), {k: record[k] for k in KEPT_BESIDE if k in record}
        )
        merged, result = {**old, OTHER_TESTS: others}, {**record, **others[key(record)]}
    note_written(run_dir, EVAL_FILE)
    save_json(os.path.join(run_dir, EVAL_FILE), merged)
    return result


def write_experiment(run_dir: str, record: dict) -> None:
    note_written(run_dir, EXPERIMENT_FILE)
    save_json(os.path.join(run_dir, EXPERIMENT_FILE), record)


def read_experiment(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, EXPERIMENT_FILE)
    return (
        check_fields(
            path, "experiment record", load_json(path, "experiment record"), EXPERIMENT_SCHEMA
        )
        if os.path.exists(path)
        else None
    )
