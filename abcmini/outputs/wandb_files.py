"""What wandb logged offline, read back from a run's ``run-<id>.wandb`` file (wandb 0.31 ships no
reader). The file is a 7-byte ``:W&B`` header, then leveldb-log framing: 32 KiB blocks of records
``crc32 (4) · length (2) · type (1) · payload``, a record split FIRST/MIDDLE/LAST across blocks
where it does not fit; each reassembled payload is a ``Record`` protobuf. A file cut short (a run
still going, or killed) yields the records before the cut.
"""

import glob
import json
import os
import struct

BLOCK, HEADER = 32 * 1024, 7
FULL, LAST = 1, 4


def records(path: str) -> list:
    """Every record of the wandb run file at ``path`` (``wandb_internal_pb2.Record``)."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b":W&B":
        raise ValueError(f"{path!r} is not a wandb run file")
    out, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0:  # zero fill to the end of the block
            pos += left
            continue
        pending += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(pending)
            except DecodeError:  # the end of a file cut short
                break
            out.append(record)
            pending = b""
    return out


def history(path: str) -> list[dict]:
    """The history rows of a run file: ``{key: value}`` with ``_step``, scalars only."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            row = {}
            for item in record.history.item:
                value = json.loads(item.value_json)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    row[item.key or "/".join(item.nested_key)] = value
            rows.append(row)
    return rows


def logged_history(run_dir: str) -> list[dict]:
    """The history of a run directory's training run (the wandb run id kept in ``wandb-id``) from
    the offline run files under ``RUN_DIR/wandb``, a resumed run's files in order; ``[]`` when
    there are none (tracking off, or logged elsewhere)."""
    try:
        with open(os.path.join(run_dir, "wandb-id")) as f:
            run_id = f.read().strip()
    except OSError:
        return []
    rows = []
    for path in sorted(glob.glob(os.path.join(glob.escape(run_dir), "wandb", f"*-{run_id}", f"run-{run_id}.wandb"))):
        try:
            rows += history(path)
        except (OSError, ValueError):
            continue
    return rows
