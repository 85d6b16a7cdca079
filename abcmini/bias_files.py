"""ABC bias files (``abcmini calibrate``'s output, ``train --bias``'s input): written through
``store``'s safe writes, and read back checked field by field (task, heads, geometry, and every
table of the scaffold, ``nn.scaffold_state``) before anything is built from them.
"""

import os

from abcmini.names import TASKS
from abcmini.nn.scaffold_state import ScaffoldStateError, check_scaffold_state
from abcmini.store import StoreError, load_torch, note_written, owned, save_torch
from abcmini.tasks import input_parts

BIAS_FORMAT = "abcmini-abc-bias-1"
BIAS_BYTES = 64 << 20  # a bias file is a few kilobytes; this bounds what is read before a check


class BiasFileError(StoreError):
    pass


def save_bias(path: str, payload: dict) -> None:
    note_written(os.path.dirname(os.path.abspath(path)), os.path.basename(path))
    save_torch(path, {"format": BIAS_FORMAT, **payload})


def load_bias(path: str) -> dict:
    """A bias file, its fields checked (task, heads, geometry and the scaffold's every table)
    before anything is built from it; one line naming the file and the field otherwise."""
    payload = load_torch(path, "bias file", BiasFileError, max_bytes=BIAS_BYTES)
    if payload.get("format") != BIAS_FORMAT:
        raise BiasFileError(f"{path!r} is not an abcmini bias file")
    task, heads, pad_width = (payload.get(key) for key in ("task", "heads", "pad_width"))
    if task not in TASKS:
        raise BiasFileError(f"bias file {path!r}: task is one of {', '.join(TASKS)}, not {task!r}")
    if type(heads) is not int or not 1 <= heads <= 1024:
        raise BiasFileError(
            f"bias file {path!r}: heads is a whole number of 1 … 1024, not {heads!r}"
        )
    if pad_width is not None and (type(pad_width) is not int or pad_width < 1):
        raise BiasFileError(f"bias file {path!r}: pad_width is a whole number, not {pad_width!r}")
    try:
        check_scaffold_state(payload.get("bias"), heads, input_parts(task))
    except ScaffoldStateError as problem:
        raise BiasFileError(f"bias file {path!r}: {problem}") from None
    return payload


def is_same_calibration(path: str, source: str, settings: dict) -> bool:
    """Whether the bias file ``path`` is abcmini's own calibration of ``source`` with ``settings``:
    the same command run again (after a kill between the bias and its wandb run), which may
    finish it by calibrating again."""
    directory, name = os.path.split(os.path.abspath(path))
    if name not in owned(directory) or not os.path.isfile(path):
        return False
    try:
        payload = load_bias(path)
    except BiasFileError:
        return False
    calibration = {
        "algorithm": "abc",
        **{k: v for k, v in payload.get("calibration", {}).items() if k != "layers"},
    }
    return payload.get("source") == os.path.abspath(source) and calibration == settings


def check_bias_matches(payload: dict, cfg, path: str) -> None:
    """Refuse a bias calibrated for another task, head count, geometry or operand order than the
    run ``cfg`` (a ``RunConfig``) trains."""
    task, pad_width, heads = cfg.task, cfg.pad_width, cfg.model_config().heads
    if payload.get("operand_order", "msd") != cfg.operand_order:
        raise BiasFileError(
            f"bias file {path!r} was calibrated on operands written {payload.get('operand_order', 'msd')}; "
            f"this run writes them {cfg.operand_order} (--operand-order)"
        )
    if payload["task"] != task:
        raise BiasFileError(f"bias file {path!r} was calibrated on {payload['task']}, not {task}")
    if payload["heads"] != heads:
        raise BiasFileError(
            f"bias file {path!r} has {payload['heads']} heads; this model has {heads}"
        )
    if payload["pad_width"] != pad_width:
        geometry = lambda p: f"pad width {p}" if p is not None else "the growing geometry"  # noqa: E731
        raise BiasFileError(
            f"bias file {path!r} comes from {geometry(payload['pad_width'])}; this run uses {geometry(pad_width)}"
        )
