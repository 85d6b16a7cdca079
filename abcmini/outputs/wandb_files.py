"""What wandb logged offline, read back from a run's ``run-<id>.wandb`` file. wandb 0.31 ships a
reader only as a command (``wandb leet inspect``, about 2 s a file: too slow for a dashboard of
many runs), so this module reads the file itself. The file is a 7-byte ``:W&B`` header, then leveldb-log framing: 32 KiB blocks of records
``crc32 (4) · length (2) · type (1) · payload``, a record split FIRST/MIDDLE/LAST across blocks
where it does not fit; each reassembled payload is a ``Record`` protobuf. A file cut short (a run
still going, or killed) yields the records before the cut.
"""

import glob
import json
import os
import struct
from dataclasses import dataclass, field

from abcmini.errors import UserError

BLOCK, HEADER = 32 * 1024, 7
FULL, LAST = 1, 4
MAX_BYTES = 2 << 30  # a run file holds scalars and media paths: far below this


class RunFileError(UserError, ValueError):
    """A ``.wandb`` file that is not one wandb wrote, or cannot be read; the message names it."""


def records(path: str) -> list:
    """Every record of the wandb run file at ``path`` (``wandb_internal_pb2.Record``); a special,
    oversized, unreadable or foreign file is ``RunFileError`` before anything is decoded."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    if not os.path.isfile(path):  # a FIFO or a device would block or never end
        raise RunFileError(f"wandb run file {path!r} is not a regular file")
    if os.path.getsize(path) > MAX_BYTES:
        raise RunFileError(f"wandb run file {path!r} is over {MAX_BYTES >> 30} GiB")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as error:
        raise RunFileError(
            f"cannot read wandb run file {path!r}: {error.strerror or error}"
        ) from None
    if data[:4] != b":W&B":
        raise RunFileError(f"{path!r} is not a wandb run file (no :W&B header)")
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


def value(item, path: str):
    """A logged item's value (wandb stores each as JSON), or ``RunFileError`` naming its key."""
    try:
        return json.loads(item.value_json)
    except ValueError:
        raise RunFileError(f"{path!r}: the value of {_key(item)!r} is not JSON") from None


def history(path: str) -> list[dict]:
    """The history rows of a run file: ``{key: value}`` with ``_step``, scalars only."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            row = {}
            for item in record.history.item:
                number = value(item, path)
                if isinstance(number, (int, float)) and not isinstance(number, bool):
                    row[_key(item)] = number
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
    for path in run_files(os.path.join(run_dir, "wandb"), run_id):
        try:
            rows += history(path)
        except RunFileError:
            continue
    return rows


def run_files(wandb_dir: str, run_id: str) -> list[str]:
    """The offline files of run ``run_id`` under ``wandb_dir`` (a folder per process that logged
    to it, a resumed run's in order)."""
    return sorted(
        glob.glob(os.path.join(glob.escape(wandb_dir), f"*-{run_id}", f"run-{run_id}.wandb"))
    )


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


@dataclass
class OfflineRun:
    """The config, summary and history rows of one offline run, and its files directory."""

    directory: str
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    id: str = ""
    group: str = ""
    job_type: str = ""
    sweep_id: str = ""
    project: str = ""
    tags: list = field(default_factory=list)
    exit_code: int | None = None
    artifacts: list = field(default_factory=list)  # (name, type) of every artifact the run logged
    staged: list = field(
        default_factory=list
    )  # the files wandb sync uploads for them (staged copies)
    metrics: dict = field(default_factory=dict)  # define_metric: a metric's name → its step metric

    def media(self, key: str) -> list[str]:
        """Paths (on disk) of every image / table logged under ``key``."""
        return [
            os.path.join(self.directory, "files", row[key]["path"])
            for row in self.history
            if key in row
        ]


def read_offline_run(directory: str) -> OfflineRun:
    """The offline run in ``directory`` (an ``offline-run-*`` folder)."""
    run = OfflineRun(directory)
    for path in glob.glob(os.path.join(glob.escape(directory), "run-*.wandb"))[:1]:
        for record in records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run.id, run.group, run.job_type, run.tags = (
                    record.run.run_id,
                    record.run.run_group,
                    record.run.job_type,
                    list(record.run.tags),
                )
                run.sweep_id, run.project = record.run.sweep_id, record.run.project
                run.config.update({_key(i): value(i, path) for i in record.run.config.update})
            elif kind == "exit":
                run.exit_code = record.exit.exit_code
            elif kind == "metric":
                run.metrics[record.metric.name or record.metric.glob_name] = (
                    record.metric.step_metric
                )
            elif kind == "artifact":
                run.artifacts.append((record.artifact.name, record.artifact.type))
                run.staged += [
                    item.local_path for item in record.artifact.manifest.contents if item.local_path
                ]
            elif kind == "config":
                run.config.update({_key(i): value(i, path) for i in record.config.update})
            elif kind == "summary":
                run.summary.update({_key(i): value(i, path) for i in record.summary.update})
            elif kind == "history":
                row = {}
                for item in record.history.item:
                    key = _key(item)
                    for prefix in ("/path", "/_type"):  # image/table fields arrive flattened
                        if key.endswith(prefix):
                            row.setdefault(key[: -len(prefix)], {})[prefix[1:]] = value(item, path)
                            break
                    else:
                        row[key] = value(item, path)
                run.history.append(row)
    return run


def read_offline_runs(wandb_dir: str) -> list[OfflineRun]:
    """The offline runs wandb wrote under ``wandb_dir`` (its ``wandb`` folder)."""
    return [
        read_offline_run(d)
        for d in sorted(glob.glob(os.path.join(glob.escape(wandb_dir), "wandb", "offline-run-*")))
    ]


def offline_runs(root: str) -> list[OfflineRun]:
    """Every offline run below ``root`` (a results root: cells, ABC sources, comparison runs),
    walked without entering symlinked folders, each folder once."""
    found = {}
    for folder, subfolders, files in os.walk(root):
        if os.path.basename(folder).startswith("offline-run-") and any(
            f.endswith(".wandb") for f in files
        ):
            found.setdefault(os.path.realpath(folder), folder)
            subfolders.clear()
    return [read_offline_run(d) for d in sorted(found.values())]
