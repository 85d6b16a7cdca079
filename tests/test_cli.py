import json
import os
import subprocess
import sys
from dataclasses import asdict

import pytest
import torch
from typer.testing import CliRunner

from abcmini.recipes import PAPER
from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A real (small) Successor model trained through the CLI, pad width 7."""
    out = tmp_path_factory.mktemp("runs") / "successor"
    result = invoke(
        "train",
        "--task",
        "successor",
        "--method",
        "vanilla",
        "--preset",
        "cpu",
        "--pad-width",
        7,
        "--lengths",
        3,
        "--steps",
        300,
        "--eval-every",
        100,
        "--valid-size",
        300,
        "--stop-at",
        0.99,
        "--test-frame",
        "fixed",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    return out


def test_training_through_the_cli_learns_successor(trained_run):
    result = invoke("eval", trained_run, "--lengths", "1,2,3")
    assert result.exit_code == 0, result.output
    report = json.loads((trained_run / "eval.json").read_text())
    accuracy = report["accuracy"]
    assert set(accuracy) == {"1", "2", "3"}
    # chance of an exact 9-token match is ~1e-9; a model that learned the task gets most right
    assert accuracy["3"] >= 0.9, accuracy
    assert "exact match" in result.output and "length" in result.output


def test_checkpoint_carries_its_config(trained_run):
    state = torch.load(trained_run / "checkpoint.pt", weights_only=True)
    assert state["config"]["task"] == "successor" and state["config"]["pad_width"] == 7
    assert state["config"]["scheme"] == "vanilla" and state["step"] >= 100


def test_existing_run_needs_resume_or_overwrite(trained_run):
    result = invoke("train", "--pad-width", 7, "--lengths", 3, "--steps", 1, "--out", trained_run)
    assert (
        result.exit_code == 2 and "--resume" in result.output and "Traceback" not in result.output
    )


@pytest.mark.integration
def test_sweep_style_option_spelling_is_accepted(tmp_path):
    result = invoke(
        "train",
        "--preset=tiny",
        "--pad_width=7",
        "--lengths=3",
        "--steps=2",
        "--eval_every=2",
        "--valid_size=8",
        "--batch_size=4",
        "--enc_layers=1",
        f"--out={tmp_path / 'r'}",
    )
    assert result.exit_code == 0, result.output
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["config"]["enc_layers"] == 1 and state["config"]["batch_size"] == 4
    assert any(
        key.startswith("encoder.") for key in state["model"]
    )  # the recipe's identity encoder was overridden
    recorded = json.loads((tmp_path / "r" / "experiment.json").read_text())["overrides"]
    assert recorded == {
        "preset": "tiny",
        "pad_width": 7,
        "lengths": [3],
        "steps": 2,
        "eval_every": 2,
        "valid_size": 8,
        "batch_size": 4,
        "enc_layers": 1,
    }


def one_line_error(result, *needles):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    "args, needles",
    [
        (["train", "--task", "division"], ["unknown task", "division"]),
        (["train", "--method", "xpos"], ["unknown method", "xpos", "NoPE+w=W"]),
        (["train", "--method", "+w=x"], ["unknown method"]),
        (["train", "--method", "abc+varied"], ["unknown method", "+varied"]),
        (
            ["train", "--method", "NoPE+w=1", "--window-unit", "pair"],
            ["--window-unit pair", "Addition or N×1"],
        ),
        (
            ["train", "--task", "addition", "--method", "+w=1", "--window-unit", "row"],
            ["--window-unit is column or pair"],
        ),
        (
            ["train", "--method", "abacus+varied", "--frame-spread", "2"],
            ["+varied", "no --frame-spread"],
        ),
        (["train", "--operand-lengths", "mixed"], ["--operand-lengths is equal or unequal"]),
        (
            ["train", "--task", "addition", "--method", "coupling", "--operand-lengths", "unequal"],
            ["it needs all three"],
        ),
        (["train", "--window", "-1"], ["--window must be at least 0"]),
        (["train", "--period", "-3"], ["--period must be at least 0"]),
        (["train", "--steps", "0"], ["--steps must be at least 1"]),
        (["train", "--enc-layers", "-1"], ["--enc-layers must be at least 0"]),
        (["train", "--preset", "huge"], ["unknown preset"]),
        (
            ["train", "--growing", "--pad-width", "30"],
            ["--growing and --pad-width are alternatives"],
        ),
        (["train", "--pad-width", "5"], ["pad width must be at least 7"]),
        # errors raised by typer itself while parsing, reported the same way
        (["train", "--steps", "abc"], ["Invalid value for '--steps'"]),
        (["train", "--lr", "fast"], ["Invalid value for '--lr'"]),
        (["train", "--stop-at", "1.5"], ["--stop-at must be in [0, 1], got 1.5"]),
        (["train", "--batch-size", "0"], ["--batch-size must be at least 1, got 0"]),
        (["train", "--bogus", "3"], ["No such option: --bogus"]),
        (["train", "--resume=maybe"], ["--resume"]),
        (["trian"], ["No such command 'trian'"]),
        (["train", "--method", "abc", "--bias", "x.pt"], ["--method abc calibrates its own bias"]),
        (
            ["train", "--pad-width", "7", "--lengths", "9", "--test-frame", "fixed"],
            ["length 9 does not fit", "pad width 7"],
        ),
        (["reproduce", "--tasks", "foo"], ["unknown task 'foo'"]),
        (["reproduce", "--seeds", "x"], ["--seeds takes comma-separated integers"]),
    ],
)
def test_bad_training_input_is_one_line(args, needles, tmp_path):
    one_line_error(invoke(*args, "--out", tmp_path / "x"), *needles)


def test_bad_eval_input_is_one_line(trained_run, tmp_path):
    one_line_error(invoke("eval", trained_run, "--lengths", "0,3"), "at least 1")
    one_line_error(invoke("eval", trained_run, "--lengths", "3,x"), "comma-separated")
    one_line_error(invoke("eval", trained_run, "--lengths", "10"), "does not fit", "pad width 7")
    one_line_error(invoke("eval", tmp_path / "nowhere"), "does not exist")
    one_line_error(invoke("eval"), "Missing argument")
    one_line_error(invoke("eval", trained_run, "--seed", "1.5"), "Invalid value for '--seed'")
    (tmp_path / "empty").mkdir()
    one_line_error(invoke("eval", tmp_path / "empty"), "no checkpoint")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    data = (trained_run / "checkpoint.pt").read_bytes()
    (corrupt / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    one_line_error(invoke("eval", corrupt), "unreadable")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    torch.save({"weights": torch.zeros(3)}, foreign / "checkpoint.pt")
    one_line_error(invoke("eval", foreign), "not an abcmini checkpoint")


def test_every_command_explains_every_option():
    for command in ("train", "eval"):
        result = invoke(command, "--help")
        assert result.exit_code == 0
        assert result.output.count("--") >= 3


@pytest.mark.parametrize("command", ["train", "reproduce", "recipe", "calibrate"])
def test_recipe_help_names_every_shipped_recipe(command):
    from abcmini.recipes import RECIPES

    text = " ".join(invoke(command, "--help").output.split())
    assert all(name in text for name in RECIPES), text


def test_abc_end_to_end_calibrate_retrain_eval(trained_run, tmp_path):
    """The one procedure: every decoder layer calibrated and united into one bias, verticals only
    on markers, empty heads silent; then a retraining with it and its evaluation."""
    from abcmini.nn.calibrate import CROSS_DIRECTIONS, SELF_DIRECTIONS
    from abcmini.nn.lines import Calibrated

    bias_file = tmp_path / "bias.pt"
    result = invoke(
        "calibrate", trained_run, "--samples", 200, "--min-accuracy", 0.8, "--out", bias_file
    )
    assert result.exit_code == 0, result.output
    payload = torch.load(bias_file, weights_only=True)
    assert payload["task"] == "successor" and payload["pad_width"] == 7 and payload["heads"] == 4
    assert payload["calibration"] == {
        **asdict(PAPER.calibration),
        "samples": 200,
        "min_accuracy": 0.8,
        "layers": [0, 1],
    }
    assert payload["attention"]["cross"].shape[0] == 2  # both decoder layers' attention
    bias = Calibrated.from_state(payload["bias"])
    assert (
        bias.cross_attention.deltas == tuple(d for d in CROSS_DIRECTIONS for _ in range(2)) * 2
    )  # layers × directions × segments ($, digits)
    assert bias.self_attention.deltas == SELF_DIRECTIONS * 2
    cross = bias.cross_attention
    layout = ((0, 0), (1, 7))  # "$" and the 7 digits of a pad-7 Successor input
    silent = cross(8, 8, layout=layout)[
        cross.transparent
    ]  # a head with no line in either layer reads only the start marker
    assert torch.isfinite(silent[..., 0]).all() and not torch.isfinite(silent[..., 1:]).any()

    # κ = −10 passes every line through the dropoff: the rules alone decide where verticals stand
    loose = tmp_path / "loose.pt"
    assert (
        invoke(
            "calibrate",
            trained_run,
            "--samples",
            200,
            "--min-accuracy",
            0.8,
            "--kappa-cross",
            -10,
            "--kappa-self",
            -10,
            "--out",
            loose,
        ).exit_code
        == 0
    )
    loose = Calibrated.from_state(torch.load(loose, weights_only=True)["bias"])
    verticals = {"cross": set(), "self": set()}
    for kind, lines in (("cross", loose.cross_attention), ("self", loose.self_attention)):
        for index, delta in enumerate(lines.deltas):
            opened = [
                lines.firsts[index] + int(c)
                for c in torch.isfinite(lines.values[index]).any(dim=0).nonzero().flatten()
            ]
            if (
                delta == 0
            ):  # a vertical's index is its column, counted from its segment's last column (self: from SOS)
                verticals[kind] |= {
                    (lines.segment(index, layout) if kind == "cross" else (0, 0), line)
                    for line in opened
                }
    assert verticals["self"] == {((0, 0), 0)}  # SOS only
    assert verticals["cross"] and all(
        segment[0] == segment[1] for segment, _ in verticals["cross"]
    )  # one-token parts only
    assert len(loose.cross_attention.values.isfinite().nonzero()) > len(
        verticals["cross"]
    )  # digit lines open too

    out = tmp_path / "abc"
    result = invoke(
        "train",
        "--task",
        "successor",
        "--pad-width",
        7,
        "--lengths",
        3,
        "--steps",
        60,
        "--eval-every",
        30,
        "--valid-size",
        100,
        "--bias",
        bias_file,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "abc_bias" in torch.load(out / "checkpoint.pt", weights_only=True)
    result = invoke("eval", out, "--lengths", "2,5")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "eval.json").read_text())["method"] == "vanilla+abc"

    one_line_error(
        invoke(
            "train",
            "--task",
            "addition",
            "--pad-width",
            7,
            "--lengths",
            3,
            "--bias",
            bias_file,
            "--out",
            tmp_path / "x",
        ),
        "calibrated on successor",
    )
    one_line_error(
        invoke(
            "train", "--pad-width", 8, "--lengths", 3, "--bias", bias_file, "--out", tmp_path / "y"
        ),
        "pad width 7",
    )
    one_line_error(
        invoke(
            "train",
            "--pad-width",
            7,
            "--lengths",
            3,
            "--preset",
            "tiny",
            "--bias",
            bias_file,
            "--out",
            tmp_path / "z",
        ),
        "4 heads",
    )
    one_line_error(
        invoke(
            "train",
            "--pad-width",
            7,
            "--lengths",
            3,
            "--bias",
            tmp_path / "missing.pt",
            "--out",
            tmp_path / "w",
        ),
        "does not exist",
    )


@pytest.mark.integration
def test_calibrate_refuses_a_model_that_has_not_interpolated(tmp_path):
    out = tmp_path / "young"
    assert (
        invoke(
            "train",
            "--preset",
            "tiny",
            "--pad-width",
            7,
            "--lengths",
            3,
            "--steps",
            2,
            "--eval-every",
            2,
            "--valid-size",
            20,
            "--out",
            out,
        ).exit_code
        == 0
    )
    one_line_error(invoke("calibrate", out), "has not interpolated")
    one_line_error(
        invoke("calibrate", out, "--min-accuracy", 0, "--samples", 0),
        "--samples must be at least 1",
    )
    one_line_error(
        invoke("calibrate", out, "--min-accuracy", 0, "--min-support", 2),
        "min_support must lie in [0, 1]",
    )


def test_eval_merges_lengths_but_never_mixes_test_sets(trained_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    read = lambda: json.loads((run / "eval.json").read_text())  # noqa: E731
    assert invoke("eval", run, "--lengths", "1,2", "--no-wandb").exit_code == 0
    assert invoke("eval", run, "--lengths", "3", "--no-wandb").exit_code == 0
    assert set(read()["accuracy"]) == {"1", "2", "3"}  # merged, nothing dropped
    assert invoke("eval", run, "--lengths", "3", "--seed", "1", "--no-wandb").exit_code == 0
    record = read()  # another test set goes beside the record, never in it, and removes nothing
    assert set(record["accuracy"]) == {"1", "2", "3"} and record["test_seed"] == 0
    assert set(record["other_tests"]["fixed, test seed 1"]["accuracy"]) == {"3"}


def test_a_record_keeps_the_commit_that_first_tested_it_and_names_later_ones_per_length(tmp_path):
    from abcmini.store import write_eval

    state = {"train_steps": 500, "test_seed": 0, "test_frame": "fixed"}
    write_eval(str(tmp_path), {**state, "commit": "trained", "accuracy": {"6": 1.0, "60": 0.9}})
    merged = write_eval(
        str(tmp_path), {**state, "commit": "later", "accuracy": {"60": 0.8, "100": 0.7}}
    )
    assert merged["commit"] == "trained" and merged["test_commits"] == {
        "60": "later",
        "100": "later",
    }
    again = write_eval(str(tmp_path), {**state, "commit": "trained", "accuracy": {"60": 0.9}})
    assert again["test_commits"] == {"100": "later"}  # 60 retested by the record's own commit
    retrained = write_eval(
        str(tmp_path), {**state, "train_steps": 750, "commit": "later", "accuracy": {"6": 1.0}}
    )
    assert retrained["commit"] == "later" and "test_commits" not in retrained


def test_the_commit_a_record_names_is_the_one_its_process_started_with(tmp_path):
    """``abcmini.commit`` is read once per process: a record written as a long run ends names the
    commit the run started from, not one made in the checkout meanwhile (real git, a new commit
    between the two reads)."""
    package = tmp_path / "abcmini"
    package.mkdir()
    package.joinpath("__init__.py").write_text(
        open(os.path.join(ROOT, "abcmini", "__init__.py")).read()
    )
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    first = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    script = (
        "import subprocess, sys; import abcmini; before = abcmini.commit(); "
        "open(sys.argv[1] + '/abcmini/__init__.py', 'a').write('# changed\\n'); "
        "subprocess.run(sys.argv[2:] + ['commit', '-qam', 'second'], check=True); print(before, abcmini.commit())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), *git],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [first, first]


def test_a_test_past_the_position_table_is_refused_before_training_and_one_that_fits_is_not(
    tmp_path,
):
    """Coupling's ids of a 20-digit Addition reach 21 (its answer's digits): a table of 16 ids
    cannot test it, which a dry run says in one line; 14 digits (ids to 15) fit."""
    cell = ["train", "--recipe", "decoder", "--task", "addition", "--method", "coupling+varied"]
    small = [*cell, "--max-position", "16", "--out", tmp_path / "run", "--dry-run"]
    refused = invoke(*small, "--lengths", "20")
    assert refused.exit_code == 2, refused.output
    assert "a test at 20 digits: position id 21 exceeds the coupling table's 16" in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "run").exists()
    assert invoke(*small, "--lengths", "14").exit_code == 0


@pytest.mark.parametrize(
    "options, message",
    [
        (["--index-hints", "16"], "18-digit answers need 18 index hints; the run has 16"),
        (["--fire-positions", "randomized", "--max-position", "40"], "exceeds FIRE's 40 positions"),
    ],
)
def test_a_test_past_the_hints_or_randomized_positions_is_refused_before_training(
    tmp_path, options, message
):
    cell = ["train", "--recipe", "decoder", "--task", "addition", "--method", "fire+varied"]
    run = [*cell, *options, "--out", tmp_path / "run", "--dry-run"]
    refused = invoke(*run, "--lengths", "17")
    assert refused.exit_code == 2 and message in refused.output, refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "run").exists()
    assert invoke(*run, "--lengths", "10").exit_code == 0
