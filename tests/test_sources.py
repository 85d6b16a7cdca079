"""The checkpoints shipped in results/: the Vanilla sources (the recipes' own cells, calibrated in
seconds) and the ABC models behind the multi-operand records."""

import glob
import json
import os
import shutil

import pytest
import torch
from typer.testing import CliRunner

from abcmini.experiment import Cell, Experiment, RunConfig, resolve
from abcmini.recipes import PAPER, PAPER64
from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

SOURCES = sorted(glob.glob("results/sources/paper64/*/vanilla-s*"))


def test_the_sources_are_the_paper_recipes_cells():
    assert len(SOURCES) >= 6
    for path in SOURCES:
        state = torch.load(os.path.join(path, "checkpoint.pt"), weights_only=True)
        task, name = path.split(os.sep)[-2:]
        expected = resolve(PAPER64, Cell(task, "vanilla", int(name.rsplit("-s", 1)[1])))
        # a checkpoint written before a RunConfig field existed holds that field's default
        assert RunConfig(**state["config"]) == expected.run and state["weights_only"]
        recorded = json.loads(
            open(os.path.join(path, "experiment.json")).read()
        )  # its missing fields: their defaults
        assert Experiment.from_dict(recorded).to_dict() == expected.to_dict()
        assert state["history"][-1]["valid_acc"] >= PAPER.stop_at_plain  # it interpolated
        assert os.path.getsize(os.path.join(path, "checkpoint.pt")) < 1_000_000


@pytest.mark.parametrize("path", SOURCES[:1])
def test_a_shipped_source_calibrates_directly(path, tmp_path):
    result = CliRunner().invoke(
        app, ["calibrate", path, "--samples", 100, "--no-wandb", "--out", str(tmp_path / "bias.pt")]
    )
    assert result.exit_code == 0, result.output
    payload = torch.load(tmp_path / "bias.pt", weights_only=True)
    assert payload["calibration"]["layers"] == [0, 1]  # every decoder layer of the cpu preset
    assert "recipe paper64's calibration" in result.output
    # and an ABC cell may calibrate from it (no retraining of the source)
    result = CliRunner().invoke(
        app, ["train", "--task", payload["task"], "--method", "abc", "--source", path, "--dry-run"]
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["source"] == path


def test_a_shipped_source_cannot_be_trained_further(tmp_path):
    import shutil

    shutil.copytree(SOURCES[0], tmp_path / "source")
    task, name = SOURCES[0].split(os.sep)[-2:]
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--recipe",
            "paper64",
            "--task",
            task,
            "--seed",
            name.rsplit("-s", 1)[1],
            "--steps",
            "40000",
            "--stop-at",
            "1.0",
            "--train-on",
            "3",
            "--resume",
            "--no-wandb",
            "--out",
            str(tmp_path / "source"),
        ],
    )
    assert result.exit_code == 2 and "weights-only checkpoint" in result.stderr, result.output


MULTI = sorted(glob.glob("results/sources/multi/*/vanilla-s*"))


def test_the_multi_operand_sources_are_the_cells_their_records_name():
    """docs/multi-operand.md's Vanilla sources, weights only: each checkpoint is the run its
    experiment.json resolves to under the recipe multiadd."""
    assert len(MULTI) >= 3
    for path in MULTI:
        state = torch.load(os.path.join(path, "checkpoint.pt"), weights_only=True)
        recorded = Experiment.from_dict(
            json.loads(open(os.path.join(path, "experiment.json")).read())
        )
        assert (
            recorded.recipe == "multiadd"
            and recorded.cell.method == "vanilla"
            and state["weights_only"]
        )
        assert RunConfig(**state["config"]) == recorded.run and path.endswith(
            os.path.basename(recorded.identity)
        )
        assert os.path.getsize(os.path.join(path, "checkpoint.pt")) < 1_000_000


@pytest.mark.parametrize("path", MULTI)
def test_a_multi_operand_source_calibrates_directly(path, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            path,
            "--samples",
            100,
            "--min-accuracy",
            0.75,
            "--no-wandb",
            "--out",
            str(tmp_path / "bias.pt"),
        ],
    )
    assert result.exit_code == 0, result.output
    payload = torch.load(tmp_path / "bias.pt", weights_only=True)
    assert (
        payload["task"] == path.split(os.sep)[-2]
        and "recipe multiadd's calibration" in result.output
    )


TRAINED = sorted(glob.glob("results/checkpoints/*/abc-s*"))


@pytest.mark.parametrize("path", TRAINED)
def test_a_shipped_abc_checkpoint_scores_its_record_at_the_training_length(path, tmp_path):
    """results/checkpoints: the weights behind a multi-operand record (a run of another training
    draw: its stress record), tested again from a copy, give the record's exact match at the
    training length (the longer tests take up to an hour a seed on one thread)."""
    task, name = path.split(os.sep)[-2:]
    first = os.path.join("results", "multi" if task == "multiadd" else "multiply", task, name)
    folder = first if os.path.isdir(first) else os.path.join("results", "stress", task, name)
    record = json.load(open(os.path.join(folder, "eval.json")))
    state = torch.load(os.path.join(path, "checkpoint.pt"), weights_only=True)
    assert (
        state["weights_only"]
        and "optimizer" not in state
        and state["step"] == record["train_steps"]
    )
    shutil.copytree(path, tmp_path / name)
    length = str(record["train_digits"])
    result = CliRunner().invoke(
        app, ["eval", str(tmp_path / name), "--lengths", length, "--no-wandb"]
    )
    assert result.exit_code == 0, result.output
    assert (
        json.load(open(tmp_path / name / "eval.json"))["accuracy"][length]
        == record["accuracy"][length]
    )


PAPER_SIZE = sorted(glob.glob("results/sources/abc64-paper/*/vanilla-s*"))


@pytest.mark.parametrize("path", PAPER_SIZE)
def test_a_paper_size_source_is_the_abc64_cells_source_at_the_papers_model_size(path, tmp_path):
    """``sweeps/abc64-paper-size.yaml``'s sources, shipped weights-only: the Vanilla source the
    recipe ``abc64`` resolves for the cell with ``--preset paper`` (one encoder and six decoder
    layers, 8 heads, d 128), interpolated, and calibrated by Algorithm 1 without retraining."""
    from abcmini.recipes import ABC64

    state = torch.load(os.path.join(path, "checkpoint.pt"), weights_only=True)
    task, name = path.split(os.sep)[-2:]
    cell = Cell(task, "abc", int(name.rsplit("-s", 1)[1]))
    expected = resolve(ABC64, cell, {"preset": "paper", "algorithm": "paper"}).source_experiment()
    assert RunConfig(**state["config"]) == expected.run and state["weights_only"]
    recorded = json.loads(open(os.path.join(path, "experiment.json")).read())
    assert Experiment.from_dict(recorded).to_dict() == expected.to_dict()
    assert (expected.run.preset, expected.run.pad_width) == ("paper", 64)
    assert state["history"][-1]["valid_acc"] >= ABC64.stop_at_plain  # it interpolated
    out = tmp_path / "bias.pt"
    args = ["calibrate", path, "--recipe", "abc64", "--calibration", "paper", "--samples", "50"]
    result = CliRunner().invoke(app, [*args, "--no-wandb", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert torch.load(out, weights_only=True)["calibration"]["algorithm"] == "paper"
