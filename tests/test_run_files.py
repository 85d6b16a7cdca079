"""``sync`` (and every reader of wandb's offline ``.wandb`` files) on files it did not write: an
empty, foreign, special or oversized run file, a config whose ``uses`` is not a list of names, a
value that is not JSON, each end in one line naming the file, exit code 2, without hanging."""

import os
import struct

import pytest
from typer.testing import CliRunner
from wandb.proto import wandb_internal_pb2

from cli import app


def framed(*records) -> bytes:
    """A run file as wandb frames it: the 7-byte ``:W&B`` header, then one FULL record each."""
    data = b":W&B\x00\x00\x01"
    for record in records:
        payload = record.SerializeToString()
        data += struct.pack("<IHB", 0, len(payload), 1) + payload
    return data


def run_record(uses_json: str = '["model-x"]') -> wandb_internal_pb2.Record:
    record = wandb_internal_pb2.Record()
    record.run.run_id, record.run.project = "x", "abcmini"
    item = record.run.config.update.add()
    item.key, item.value_json = "uses", uses_json
    return record


def root_with(tmp_path, write) -> str:
    folder = tmp_path / "root" / "successor" / "abc-s0" / "wandb" / "offline-run-1-x"
    folder.mkdir(parents=True)
    write(folder / "run-x.wandb")
    return str(tmp_path / "root")


CASES = {
    "empty": (lambda p: p.write_bytes(b""), "is not a wandb run file"),
    "foreign": (lambda p: p.write_bytes(b"PK\x03\x04" + bytes(100)), "is not a wandb run file"),
    "a fifo": (lambda p: os.mkfifo(p), "is not a regular file"),
    "a device": (lambda p: p.symlink_to("/dev/zero"), "is not a regular file"),
    "oversized": (lambda p: open(p, "wb").truncate(3 << 30), "is over 2 GiB"),
    "uses a number": (lambda p: p.write_bytes(framed(run_record("5"))), "'uses' is a list"),
    "value not JSON": (lambda p: p.write_bytes(framed(run_record("{nope"))), "is not JSON"),
}


@pytest.mark.parametrize("name", CASES)
def test_sync_on_a_hostile_run_file_is_one_line(name, tmp_path):
    write, needle = CASES[name]
    result = CliRunner().invoke(app, ["sync", root_with(tmp_path, write), "--dry-run"])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output


def test_sync_reads_a_well_formed_run_file(tmp_path):
    root = root_with(tmp_path, lambda p: p.write_bytes(framed(run_record())))
    result = CliRunner().invoke(app, ["sync", root, "--dry-run"])
    assert result.exit_code == 0 and "1 offline runs" in result.output, result.output
    assert "use_artifact('ENTITY/abcmini/model-x:latest')" in result.output


@pytest.mark.integration  # waits out the 3 s reach timeout twice
@pytest.mark.parametrize("command", ["sync", "workspace"])
def test_sync_and_workspace_without_a_server_end_in_seconds_in_one_line(
    command, tmp_path, monkeypatch
):
    """Online, with a key, and a server that accepts connections but never answers: one line
    within seconds saying nothing was uploaded (or saved), never a wait without end."""
    import socket
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
    root = root_with(tmp_path, lambda p: p.write_bytes(framed(run_record())))
    shipped = os.path.join(os.path.dirname(os.path.dirname(__file__)), "results", "long")
    args = ["sync", root] if command == "sync" else ["workspace", shipped, "--entity", "me"]
    start = time.monotonic()
    try:
        result = CliRunner().invoke(app, args)
    finally:
        silent.close()
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "does not answer" in lines[0], (
        result.output
    )
    assert time.monotonic() - start < 30
