"""A user's ``--bias FILE`` is checked field by field before anything is built from it: each
hostile file ends in one line naming the file and the field, exit code 2 (``train --dry-run``
reads the bias as a training would, and trains nothing). And no torch file is ever loaded with
``weights_only=False`` anywhere in the project: a pickle could run code."""

import copy
import os
import pathlib
import re

import pytest
import torch
from typer.testing import CliRunner

from cli import app

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "results" / "abc64" / "addition" / "abc-s0" / "abc_bias.pt"  # operand lines


def dry_run(bias) -> object:
    return CliRunner().invoke(
        app,
        ["train", "--recipe", "abc64", "--task", "addition", "--method", "nope"]
        + ["--bias", str(bias), "--dry-run", "--no-wandb"],
    )


def one_line(result, needle: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output


@pytest.fixture(scope="module")
def payload():
    return torch.load(SHIPPED, weights_only=True)


def edited(payload, change) -> dict:
    copied = copy.deepcopy(payload)
    change(copied)
    return copied


def cross(payload) -> dict:
    return payload["bias"]["cross"]


CASES = {  # name → (edit of a shipped bias file, what the one line names)
    "no task": (lambda p: p.pop("task"), "task is one of"),
    "no bias": (lambda p: p.pop("bias"), "bias: a table of fields, not NoneType"),
    "bias a string": (lambda p: p.update(bias="lines"), "bias: a table of fields, not str"),
    "bias empty": (lambda p: p.update(bias={}), "bias: no 'self' field"),
    "heads a string": (lambda p: p.update(heads="4"), "heads is a whole number"),
    "values a list": (
        lambda p: cross(p).update(values=cross(p)["values"].tolist()),
        "bias.cross.values: a Tensor, not list",
    ),
    "values of 3 heads": (
        lambda p: cross(p).update(values=cross(p)["values"][:, :3]),
        "3 heads",
    ),
    "values of rank 2": (lambda p: cross(p).update(values=cross(p)["values"][0]), "3 non-empty"),
    "complex values": (
        lambda p: cross(p).update(values=cross(p)["values"].to(torch.complex64)),
        "real floating point",
    ),
    "integer values": (
        lambda p: cross(p).update(values=cross(p)["values"].clamp(-9, 9).long()),
        "real floating point",
    ),
    "NaN values": (
        lambda p: cross(p)["values"].view(-1)[0].fill_(float("nan")),
        "NaN or +inf",
    ),
    "segment out of range": (
        lambda p: cross(p).update(segments=[9] * len(cross(p)["segments"])),
        "are not segments of this task's input",
    ),
    "four tables, two deltas": (
        lambda p: cross(p).update(
            values=torch.cat([cross(p)["values"]] * 4)[: 2 * len(cross(p)["deltas"])],
            deltas=cross(p)["deltas"][:2],
            firsts=cross(p)["firsts"][:2],
        ),
        "they must be as many",
    ),
    "a slope of 5": (lambda p: cross(p).update(deltas=[5] * len(cross(p)["deltas"])), "deltas"),
    "closed a string": (lambda p: cross(p).update(closed="-inf"), "closed"),
    "right a number": (lambda p: cross(p).update(right=1), "bias.cross.right: a bool"),
}


@pytest.mark.parametrize("name", CASES)
def test_a_hostile_bias_file_is_one_line_naming_its_field(name, payload, tmp_path):
    change, needle = CASES[name]
    path = tmp_path / "bias.pt"
    torch.save(edited(payload, change), path)
    one_line(dry_run(path), needle)


def test_the_shipped_bias_file_itself_is_accepted(payload, tmp_path):
    path = tmp_path / "bias.pt"
    torch.save(payload, path)
    assert dry_run(path).exit_code == 0


def test_an_oversized_or_special_bias_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.pt"
    with open(big, "wb") as f:
        f.truncate(65 << 20)  # sparse: nothing to write, and never read
    one_line(dry_run(big), "bytes; one is at most")
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    one_line(dry_run(fifo), "is not a regular file")


def test_every_shipped_bias_file_passes_its_check():
    from abcmini.bias_files import load_bias

    files = [p for p in (ROOT / "results").rglob("*.pt") if "bias" in p.name]
    assert len(files) >= 10
    for path in files:
        load_bias(str(path))


def test_no_torch_file_is_loaded_with_weights_only_false():
    """A pickle runs code when it is loaded: every ``torch.load`` in the project's Python says
    ``weights_only=True`` (this file's own pattern excepted)."""
    unsafe = re.compile(r"weights_only\s*=\s*False")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("abcmini", "lab", "tests", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "test_bias_files.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if unsafe.search(line)
    ] + [
        f"cli.py:{n}"
        for n, line in enumerate((ROOT / "cli.py").read_text().splitlines(), 1)
        if unsafe.search(line)
    ]
    assert not found, found


def test_a_checkpoint_whose_abc_bias_is_hostile_is_one_line(tmp_path):
    """The ABC bias a checkpoint carries is checked as a bias file's before the model is built:
    ``eval`` of a copy of a shipped Algorithm 1 checkpoint with a NaN line is one line."""
    run = tmp_path / "run"
    run.mkdir()
    shipped = ROOT / "results" / "abc64" / "successor" / "paper-s0"
    state = torch.load(shipped / "checkpoint.pt", weights_only=True)
    state["abc_bias"]["self"]["values"].view(-1)[0] = float("nan")
    torch.save(state, run / "checkpoint.pt")
    (run / "experiment.json").write_text((shipped / "experiment.json").read_text())
    result = CliRunner().invoke(app, ["eval", str(run), "--lengths", "6", "--no-wandb"])
    one_line(result, "abc_bias.self.values: NaN or +inf")


def test_a_bias_calibrated_on_other_operand_order_is_refused(tmp_path, payload):
    """A bias read from attention over most-significant-first inputs opens other lines than one
    over reversed inputs: training one with the other is one line, exit code 2."""
    one_line(
        CliRunner().invoke(
            app,
            ["train", "--recipe", "abc64", "--task", "addition", "--method", "nope"]
            + ["--bias", str(SHIPPED), "--operand-order", "reversed", "--dry-run"],
        ),
        "was calibrated on operands written msd; this run writes them reversed",
    )
    path = tmp_path / "reversed.pt"
    torch.save(edited(payload, lambda p: p.update(operand_order="reversed")), path)
    assert dry_run(path).exit_code == 2
    assert (
        CliRunner()
        .invoke(
            app,
            ["train", "--recipe", "abc64", "--task", "addition", "--method", "nope"]
            + ["--bias", str(path), "--operand-order", "reversed", "--dry-run", "--no-wandb"],
        )
        .exit_code
        == 0
    )
