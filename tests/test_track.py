"""Tracking with the real wandb library in offline mode, checked from the files it wrote."""

import json
import os

import pytest
from PIL import Image
from typer.testing import CliRunner

from cli import app
from wandb_records import read_offline_runs

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def offline(tmp_path, monkeypatch):
    wandb_dir = tmp_path / "wandb-dir"
    wandb_dir.mkdir()
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.delenv("WANDB_MODE")  # no key, no mode: abcmini must choose offline itself
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return wandb_dir


def image_size(path):
    with Image.open(path) as image:
        return image.size


def test_training_logs_config_curves_heatmaps_and_extrapolation(offline, tmp_path):
    out = tmp_path / "run"
    result = invoke("train", "--preset", "tiny", "--method", "+w=1", "--pad-width", 7, "--lengths", 3, "--steps", 30, "--eval-every", 10,
                    "--valid-size", 20, "--lengths", "2,5", "--out", out)
    assert result.exit_code == 0, result.output
    assert os.environ["WANDB_MODE"] == "offline"
    (run,) = read_offline_runs(offline)
    assert run.config["task"] == "successor" and run.config["method"] == "vanilla+w=1"
    assert run.config["window"] == 1 and run.config["geometry"] == "fixed" and run.config["preset"] == "tiny"
    steps_with_loss = [row["_step"] for row in run.history if "train/loss" in row]
    assert steps_with_loss == [10, 20, 30] and all("train/lr" in row for row in run.history if "train/loss" in row)
    assert [row["_step"] for row in run.history if "valid/exact_match" in row] == [10, 20, 30]
    for key in ("attention/cross", "attention/self", "bias/cross", "bias/self"):
        (png,) = run.media(key)
        width, height = image_size(png)
        assert width > 200 and height > 200, key
    (table_file,) = run.media("extrapolation/table")
    table = json.loads(open(table_file).read())
    assert table["columns"] == ["length", "accuracy"] and [row[0] for row in table["data"]] == [2, 5]
    saved = json.loads((out / "eval.json").read_text())["accuracy"]
    assert run.summary["acc@2"] == saved["2"] and run.summary["acc@5"] == saved["5"]
    assert "extrapolation/curve" in json.dumps(run.config.get("_wandb", {})) or any(
        "extrapolation/curve" in key for key in run.summary)


def test_eval_logs_the_curve_and_acc_summaries(offline, tmp_path):
    out = tmp_path / "run"
    assert invoke("train", "--preset", "tiny", "--pad-width", 7, "--lengths", 3, "--steps", 5, "--eval-every", 5, "--valid-size", 10,
                  "--no-wandb", "--out", out).exit_code == 0
    assert read_offline_runs(offline) == []  # --no-wandb wrote nothing
    result = invoke("eval", out, "--lengths", "1,3,7")
    assert result.exit_code == 0, result.output
    (run,) = read_offline_runs(offline)
    assert {key for key in run.summary if key.startswith("acc@")} == {"acc@1", "acc@3", "acc@7"}
    assert run.config["method"] == "vanilla" and len(run.media("extrapolation/table")) == 1


def test_a_wandb_failure_warns_once_and_training_goes_on(tmp_path, monkeypatch):
    # online mode asked for, but no API key anywhere: wandb.init raises; the run must not care
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    out = tmp_path / "run"
    result = invoke("train", "--preset", "tiny", "--pad-width", 7, "--lengths", 3, "--steps", 6, "--eval-every", 3, "--valid-size", 10,
                    "--lengths", "3", "--out", out)
    assert result.exit_code == 0, result.output
    assert result.output.count("wandb tracking failed") == 1
    assert (out / "checkpoint.pt").exists() and (out / "eval.json").exists()


def test_calibration_logs_attention_and_bias_heatmaps(offline, tmp_path):
    out = tmp_path / "run"
    assert invoke("train", "--preset", "tiny", "--pad-width", 7, "--lengths", 3, "--steps", 10, "--eval-every", 10, "--valid-size", 10,
                  "--no-wandb", "--out", out).exit_code == 0
    result = invoke("calibrate", out, "--samples", 20, "--min-accuracy", 0)
    assert result.exit_code == 0, result.output
    (run,) = read_offline_runs(offline)
    assert run.config["method"] == "vanilla" and run.config["calibration"]["kappa_cross"] == 4.5
    for name in ("attention_cross", "attention_self", "bias_cross", "bias_self"):
        (png,) = run.media(f"calibration/{name}")
        assert image_size(png)[0] > 200
        assert (out / f"abc_{name}.png").exists()  # the same heatmaps beside the bias file
    assert run.summary["calibration/seconds"] > 0
