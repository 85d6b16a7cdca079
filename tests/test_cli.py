import json

import pytest
import torch
from typer.testing import CliRunner

from cli import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A real (small) Successor model trained through the CLI, pad width 7."""
    out = tmp_path_factory.mktemp("runs") / "successor"
    result = invoke("train", "--task", "successor", "--method", "vanilla", "--preset", "cpu", "--pad-width", 7, "--lengths", 3,
                    "--steps", 300, "--eval-every", 100, "--valid-size", 300, "--stop-at", 0.99, "--out", out)
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
    assert result.exit_code == 2 and "--resume" in result.output and "Traceback" not in result.output


def test_sweep_style_option_spelling_is_accepted(tmp_path):
    result = invoke("train", "--preset=tiny", "--pad_width=7", "--lengths=3", "--steps=2", "--eval_every=2", "--valid_size=8",
                    "--batch_size=4", "--enc_layers=1", f"--out={tmp_path / 'r'}")
    assert result.exit_code == 0, result.output
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["config"]["enc_layers"] == 1 and state["config"]["batch_size"] == 4
    assert any(key.startswith("encoder.") for key in state["model"])  # the recipe's identity encoder was overridden
    recorded = json.loads((tmp_path / "r" / "experiment.json").read_text())["overrides"]
    assert recorded == {"preset": "tiny", "pad_width": 7, "lengths": [3], "steps": 2, "eval_every": 2, "valid_size": 8,
                        "batch_size": 4, "enc_layers": 1}


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
        (["train", "--window", "-1"], ["--window must be at least 0"]),
        (["train", "--period", "-3"], ["--period must be at least 0"]),
        (["train", "--steps", "0"], ["--steps must be at least 1"]),
        (["train", "--enc-layers", "-1"], ["--enc-layers must be at least 0"]),
        (["train", "--preset", "huge"], ["unknown preset"]),
        (["train", "--growing", "--pad-width", "30"], ["--growing and --pad-width are alternatives"]),
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
        (["train", "--pad-width", "7", "--lengths", "9"], ["length 9 does not fit", "pad width 7"]),
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


def test_abc_end_to_end_calibrate_retrain_eval(trained_run, tmp_path):
    bias_file = tmp_path / "bias.pt"
    paper_rule = ["--layers", -1, "--directions", "1,-1,0", "--cross-directions", "1,-1,0", "--empty", "transparent", "--count-start"]
    result = invoke("calibrate", trained_run, "--samples", 200, "--min-accuracy", 0.8, *paper_rule, "--out", bias_file)
    assert result.exit_code == 0, result.output
    payload = torch.load(bias_file, weights_only=True)
    assert payload["task"] == "successor" and payload["pad_width"] == 7 and payload["heads"] == 4
    from abcmini.biases import Calibrated

    _, cross = Calibrated.from_state(payload["bias"])(8, 7)
    anti_diagonal = torch.stack([cross[:, t, 6 - t] for t in range(7)], dim=1)  # [h t]
    assert (anti_diagonal == 0).all(dim=1).any(), "no head calibrated onto the anti-diagonal"
    first_layer = tmp_path / "bias0.pt"
    assert invoke("calibrate", trained_run, "--samples", 200, "--min-accuracy", 0.8, *paper_rule[:4], "--layers", 0,
                  "--cross-directions=-1,0", "--empty", "transparent", "--out", first_layer).exit_code == 0
    other = torch.load(first_layer, weights_only=True)
    assert other["calibration"]["layers"] == [0] and payload["calibration"]["layers"] == [-1]
    assert other["bias"]["cross"]["deltas"] == [-1, 0] and other["bias"]["self"]["deltas"] == [1, -1, 0]
    assert not torch.allclose(other["attention"]["cross"], payload["attention"]["cross"])  # another layer's attention
    both = tmp_path / "bias01.pt"
    assert invoke("calibrate", trained_run, "--samples", 200, "--min-accuracy", 0.8, "--layers", "0,1", "--directions", "1,-1,0",
                  "--cross-directions=-1,0", "--empty", "silent", "--skip-start", "--out", both).exit_code == 0
    united = torch.load(both, weights_only=True)
    settings = united["calibration"]
    assert settings["layers"] == [0, 1] and united["attention"]["cross"].shape[0] == 2 and settings["empty"] == "silent" and settings["skip_start"]
    assert torch.equal(united["attention"]["cross"][0], other["attention"]["cross"][0])
    every_path = tmp_path / "bias-all.pt"  # the recipe auto's spelling: every decoder layer of this 2-layer model
    assert invoke("calibrate", trained_run, "--samples", 200, "--min-accuracy", 0.8, "--layers", "all", "--directions", "1,-1,0",
                  "--cross-directions=-1,0", "--empty", "silent", "--skip-start", "--out", every_path).exit_code == 0
    every = torch.load(every_path, weights_only=True)
    assert every["calibration"]["layers"] == [0, 1]
    assert all(torch.equal(x, y) for x, y in zip(Calibrated.from_state(every["bias"])(8, 7), Calibrated.from_state(united["bias"])(8, 7)))
    # the recipe auto: a bias per decoder layer, each exactly that layer's own calibration
    from abcmini.biases import PerLayer, scaffold_from_state

    own = {}
    for name, layer in (("auto", []), ("auto0", ["--layers", 0, "--united"]), ("auto1", ["--layers", 1, "--united"])):
        assert invoke("calibrate", trained_run, "--recipe", "auto", "--samples", 200, "--min-accuracy", 0.8, *layer,
                      "--out", tmp_path / f"{name}.pt").exit_code == 0
        own[name] = scaffold_from_state(torch.load(tmp_path / f"{name}.pt", weights_only=True)["bias"])
    assert isinstance(own["auto"], PerLayer) and len(own["auto"].layers) == 2
    for layer in (0, 1):
        assert all(torch.equal(x, y) for x, y in zip(own["auto"].layers[layer](8, 7), own[f"auto{layer}"](8, 7))), layer
    assert not all(torch.equal(x, y) for x, y in zip(own["auto0"](8, 7), own["auto1"](8, 7)))
    # every cross line open in layer 0's calibration is open in the united bias (heads that have lines;
    # --skip-start changes self-attention only)
    first_cross = Calibrated.from_state(other["bias"]).cross_attention
    lined = ~first_cross.transparent
    united_cross = Calibrated.from_state(united["bias"]).cross_attention
    assert (~torch.isfinite(first_cross(8, 7)[lined]) | torch.isfinite(united_cross(8, 7)[lined])).all()
    silent = united_cross(8, 7)[united_cross.transparent]  # empty in both layers: only column 0 open
    assert torch.isfinite(silent[..., 0]).all() and not torch.isfinite(silent[..., 1:]).any()

    def vertical_columns(path, verticals):  # every line passes a dropoff at κ = −10: the rules alone decide
        assert invoke("calibrate", trained_run, "--samples", 200, "--min-accuracy", 0.8, "--kappa-cross", -10, "--kappa-self", -10,
                      "--verticals", verticals, "--out", path).exit_code == 0
        bias = Calibrated.from_state(torch.load(path, weights_only=True)["bias"])
        corner = {"cross": 7, "self": 0}  # cross-attention verticals count from the last of 8 input columns
        return {kind: sorted({first + int(line) + corner[kind] for delta, first, values in zip(lines.deltas, lines.firsts, lines.values)
                              if delta == 0 for line in torch.isfinite(values).any(dim=0).nonzero().flatten()})
                for kind, lines in (("cross", bias.cross_attention), ("self", bias.self_attention))}

    anywhere = vertical_columns(tmp_path / "any.pt", "any")
    assert anywhere["cross"][0] == 0 and len(anywhere["cross"]) > 1 and len(anywhere["self"]) > 1  # and on digits
    assert vertical_columns(tmp_path / "markers.pt", "markers") == {"cross": [0], "self": [0]}  # $ and SOS only

    out = tmp_path / "abc"
    result = invoke("train", "--task", "successor", "--pad-width", 7, "--lengths", 3, "--steps", 60, "--eval-every", 30,
                    "--valid-size", 100, "--bias", bias_file, "--out", out)
    assert result.exit_code == 0, result.output
    assert "abc_bias" in torch.load(out / "checkpoint.pt", weights_only=True)
    result = invoke("eval", out, "--lengths", "2,5")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "eval.json").read_text())["method"] == "vanilla+abc"

    one_line_error(invoke("train", "--task", "addition", "--pad-width", 7, "--lengths", 3, "--bias", bias_file, "--out", tmp_path / "x"),
                   "calibrated on successor")
    one_line_error(invoke("train", "--pad-width", 8, "--lengths", 3, "--bias", bias_file, "--out", tmp_path / "y"), "pad width 7")
    one_line_error(invoke("train", "--pad-width", 7, "--lengths", 3, "--preset", "tiny", "--bias", bias_file, "--out", tmp_path / "z"),
                   "4 heads")
    one_line_error(invoke("train", "--pad-width", 7, "--lengths", 3, "--bias", tmp_path / "missing.pt", "--out", tmp_path / "w"),
                   "does not exist")


def test_calibrate_refuses_a_model_that_has_not_interpolated(tmp_path):
    out = tmp_path / "young"
    assert invoke("train", "--preset", "tiny", "--pad-width", 7, "--lengths", 3, "--steps", 2, "--eval-every", 2,
                  "--valid-size", 20, "--out", out).exit_code == 0
    one_line_error(invoke("calibrate", out), "has not interpolated")
    one_line_error(invoke("calibrate", out, "--directions", "1,x"), "comma-separated integers")
    one_line_error(invoke("calibrate", out, "--cross-directions", "y"), "--cross-directions takes comma-separated integers")
    one_line_error(invoke("calibrate", out, "--min-accuracy", 0, "--samples", 0), "--samples must be at least 1")
    one_line_error(invoke("calibrate", out, "--min-accuracy", 0, "--layers", "0,1"), "the model has 1 decoder layers")
    one_line_error(invoke("calibrate", out, "--min-accuracy", 0, "--layers", "last"), "--layers takes comma-separated integers")


def test_eval_merges_lengths_but_never_mixes_test_sets(trained_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    read = lambda: json.loads((run / "eval.json").read_text())  # noqa: E731
    assert invoke("eval", run, "--lengths", "1,2", "--no-wandb").exit_code == 0
    assert invoke("eval", run, "--lengths", "3", "--no-wandb").exit_code == 0
    assert set(read()["accuracy"]) == {"1", "2", "3"}  # merged, nothing dropped
    assert invoke("eval", run, "--lengths", "3", "--seed", "1", "--no-wandb").exit_code == 0
    assert set(read()["accuracy"]) == {"3"} and read()["test_seed"] == 1  # another test set replaces the record
