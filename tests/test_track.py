"""Tracking with the real wandb library in offline mode, checked from the files it wrote."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
from PIL import Image
from typer.testing import CliRunner

from abcmini.outputs.wandb_files import offline_runs, read_offline_runs
from abcmini.recipes import PAPER
from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

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
    result = invoke(
        "train",
        "--preset",
        "tiny",
        "--method",
        "+w=1",
        "--pad-width",
        7,
        "--lengths",
        3,
        "--steps",
        30,
        "--eval-every",
        10,
        "--valid-size",
        20,
        "--lengths",
        "2,5",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert os.environ["WANDB_MODE"] == "offline"
    (run,) = read_offline_runs(offline)
    assert run.config["task"] == "successor" and run.config["method"] == "vanilla+w=1"
    assert (
        run.config["window"] == 1
        and run.config["geometry"] == "fixed"
        and run.config["preset"] == "tiny"
    )
    steps_with_loss = [row["_step"] for row in run.history if "train/loss" in row]
    assert steps_with_loss == [10, 20, 30] and all(
        "train/lr" in row for row in run.history if "train/loss" in row
    )
    assert [row["_step"] for row in run.history if "valid/exact_match" in row] == [10, 20, 30]
    for key in (
        "attention/7-digits/cross",
        "attention/20-digits/self",
        "attention/100-digits/cross",
        "bias/cross",
        "bias/self",
    ):
        *_, png = run.media(key)  # the last of them: at the end of training
        width, height = image_size(png)
        assert width > 200 and height > 200, key
    steps = [row["_step"] for row in run.history if "attention/7-digits/cross" in row]
    assert steps == [0, 10, 20, 30]  # before training, then at every validation: a step slider
    assert len(run.media("attention/100-digits/cross")) == 1  # the long test length: at the end
    (table_file,) = run.media("extrapolation/table")
    table = json.loads(open(table_file).read())
    assert table["columns"] == ["length", "accuracy"] and [row[0] for row in table["data"]] == [
        2,
        5,
    ]
    saved = json.loads((out / "eval.json").read_text())["accuracy"]
    assert run.summary["acc@2"] == pytest.approx(100 * saved["2"]) and run.summary[
        "acc@5"
    ] == pytest.approx(100 * saved["5"])  # in %
    # accuracy against length as a series: the step metric `length`, one row per length, in %
    assert [
        (row["length"], row["extrapolation/exact_match"]) for row in run.history if "length" in row
    ] == [(2, run.summary["acc@2"]), (5, run.summary["acc@5"])]
    assert run.metrics["extrapolation/exact_match"] == "length"
    assert "extrapolation/curve" in json.dumps(run.config.get("_wandb", {})) or any(
        "extrapolation/curve" in key for key in run.summary
    )


def test_eval_logs_the_curve_and_acc_summaries(offline, tmp_path):
    out = tmp_path / "run"
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
            5,
            "--eval-every",
            5,
            "--valid-size",
            10,
            "--no-wandb",
            "--out",
            out,
        ).exit_code
        == 0
    )
    assert read_offline_runs(offline) == []  # --no-wandb wrote nothing
    result = invoke("eval", out, "--lengths", "1,3,7")
    assert result.exit_code == 0, result.output
    (run,) = read_offline_runs(offline)
    assert {key for key in run.summary if key.startswith("acc@")} == {"acc@1", "acc@3", "acc@7"}
    assert run.config["method"] == "vanilla" and len(run.media("extrapolation/table")) == 1
    assert all(
        len(run.media(f"attention/{n}-digits/cross")) == 1 for n in (7, 20, 100)
    )  # where the tested model attends
    # which model it evaluated: the checkpoint's path (relative to the run: no path of this machine), content hash and
    # step, and its artifact's name
    digest = hashlib.sha256((out / "checkpoint.pt").read_bytes()).hexdigest()
    assert run.config["weights"] == {"checkpoint": "checkpoint.pt", "sha256": digest, "step": 5}
    assert run.config["uses"] == [
        "model-paper-successor-vanilla-s0-eval_every-5-lengths-3-pad_width-7-preset-tiny-steps-5-valid_size-10"
    ]
    record = (out / "eval.json").read_text()
    assert json.loads(record)["weights"]["sha256"] == digest and str(tmp_path) not in record


def test_an_unreachable_server_costs_seconds_and_the_run_is_logged_offline(tmp_path, monkeypatch):
    """A bogus key and a closed port: one warning, the run goes on, tracked offline."""
    import time

    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    out = tmp_path / "run"
    start = time.perf_counter()
    result = invoke(
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
        8,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 60
    assert result.output.count("did not answer") == 1 and "tracking failed" not in result.output
    (run,) = read_offline_runs(tmp_path)
    assert run.summary["acc@3"] == pytest.approx(
        100 * json.loads((out / "eval.json").read_text())["accuracy"]["3"]
    )


def test_a_silent_server_leaves_the_run_offline_within_seconds(tmp_path, monkeypatch):
    """A server that accepts the connection and never answers: the run is logged offline after the
    reach check's seconds, not dropped after wandb.init's own timeout."""
    import socket
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes every handshake; nobody ever answers
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    out = tmp_path / "run"
    start = time.perf_counter()
    try:
        result = invoke(
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
            8,
            "--out",
            out,
        )
    finally:
        silent.close()
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 60
    assert result.output.count("did not answer") == 1 and "tracking failed" not in result.output
    (run,) = read_offline_runs(tmp_path)
    assert run.summary["acc@3"] == pytest.approx(
        100 * json.loads((out / "eval.json").read_text())["accuracy"]["3"]
    )


def test_a_wandb_failure_warns_once_and_training_goes_on(tmp_path, monkeypatch):
    """A server that answers every request with an error: wandb.init raises; the run must not care."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    out = tmp_path / "run"
    try:
        result = invoke(
            "train",
            "--preset",
            "tiny",
            "--pad-width",
            7,
            "--lengths",
            3,
            "--steps",
            6,
            "--eval-every",
            3,
            "--valid-size",
            10,
            "--out",
            out,
        )
    finally:
        server.shutdown()
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if "wandb tracking failed" in line]
    assert len(warnings) == 1 and len(warnings[0]) < 300
    assert (out / "checkpoint.pt").exists() and (out / "eval.json").exists()


def test_calibration_logs_attention_and_bias_heatmaps(offline, tmp_path):
    out = tmp_path / "run"
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
            10,
            "--eval-every",
            10,
            "--valid-size",
            10,
            "--no-wandb",
            "--out",
            out,
        ).exit_code
        == 0
    )
    result = invoke("calibrate", out, "--samples", 20, "--min-accuracy", 0)
    assert result.exit_code == 0, result.output
    (run,) = read_offline_runs(offline)
    assert (
        run.config["method"] == "vanilla"
        and run.config["calibration"]["kappa_cross"] == PAPER.calibration.kappa_cross
    )
    for name in ("attention_cross", "attention_self", "bias_cross", "bias_self"):
        (png,) = run.media(f"calibration/{name}")
        assert image_size(png)[0] > 200
        assert (out / f"abc_{name}.png").exists()  # the same heatmaps beside the bias file
    assert run.summary["calibration/seconds"] > 0


def test_calibrating_block_lines_logs_them_as_one_table_markers_included(offline, tmp_path):
    out = tmp_path / "run"
    trained = invoke(
        "train",
        "--recipe",
        "multiadd",
        "--task",
        "multiadd",
        "--preset",
        "tiny",
        "--train-digits",
        2,
        "--pad-width",
        3,
        "--lengths",
        3,
        "--steps",
        4,
        "--eval-every",
        4,
        "--valid-size",
        8,
        "--no-wandb",
        "--out",
        out,
    )
    assert trained.exit_code == 0, trained.output
    result = invoke("calibrate", out, "--samples", 20, "--min-accuracy", 0)
    assert result.exit_code == 0 and "wandb tracking failed" not in result.output, result.output
    (run,) = read_offline_runs(offline)
    (lines,) = run.media("calibration/lines")
    table = json.loads(open(lines).read())
    assert table["columns"] == ["layer", "attention", "direction", "head", "line", "value"]
    assert {row[4] for row in table["data"]} >= {"marker"} and all(
        isinstance(row[4], str) for row in table["data"]
    )


SMALL = "base: quick\npad_width: 12\nabc_pad_width: 11\nlengths: [6, 12]\neval_every: 100\nvalid_size: 300\nabc_train_on: 1.0\ncalibration: {samples: 200, kappa_cross: 2.5}\n"


def leet(path) -> list[dict]:
    """Every record of an offline run, read with wandb's own reader (``wandb leet inspect --json``)."""
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_reproduce_tracks_every_stage_of_an_abc_cell_compares_the_methods_and_records_a_failure(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("WANDB_DIR")  # every run in its own run directory, as a user's runs are
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    recipe, doomed = tmp_path / "small.yaml", tmp_path / "doomed.yaml"
    recipe.write_text(SMALL)
    doomed.write_text(
        SMALL + "steps: 20\nname: doomed\n"
    )  # a source that cannot interpolate in 20 steps
    ok = invoke(
        "reproduce",
        "--recipe",
        recipe,
        "--tasks",
        "successor",
        "--methods",
        "vanilla,abc",
        "--seeds",
        0,
        "--workers",
        1,
        "--out",
        tmp_path / "ok",
    )
    assert ok.exit_code == 0, ok.output
    again = invoke(
        "reproduce",
        "--recipe",
        recipe,
        "--tasks",
        "successor",
        "--methods",
        "vanilla,abc",
        "--seeds",
        0,
        "--workers",
        1,
        "--out",
        tmp_path / "ok",
        "--no-wandb",
    )
    assert (
        "3/3 cells" in again.output
    )  # a finished run is counted once, not again when the resume passes it
    failed = invoke(
        "reproduce",
        "--recipe",
        doomed,
        "--tasks",
        "successor",
        "--methods",
        "abc",
        "--seeds",
        0,
        "--workers",
        1,
        "--out",
        tmp_path / "failed",
    )
    assert failed.exit_code == 1 and "has not interpolated" in failed.output
    found = offline_runs(tmp_path)
    runs = {(run.config.get("recipe"), run.group, run.job_type): run for run in found}
    assert len(runs) == len(found)
    # an ABC cell is three runs in the cell's group: source, calibration, retraining
    source = runs["small", "small/successor/abc-s0", "source"]
    calibration = runs["small", "small/successor/abc-s0", "calibration"]
    retrained = runs["small", "small/successor/abc-s0", "retraining"]
    assert source.directory.startswith(
        str(tmp_path / "ok" / "successor" / "vanilla-s0-pad_width=11")
    )
    # the source's training curve, the calibration heatmaps, the retrained run's extrapolation curve
    assert [row["_step"] for row in source.history if "valid/exact_match" in row][:2] == [100, 200]
    assert all(
        len(calibration.media(f"calibration/{name}")) == 1
        for name in ("attention_cross", "bias_cross", "bias_self")
    )
    assert len(retrained.media("extrapolation/table")) == 1 and {"acc@6", "acc@12"} <= set(
        retrained.summary
    )
    # attention of every layer and head at the training length and two test lengths; the bias as a table of its lines
    for run in (source, retrained):
        validations = sum("valid/exact_match" in row for row in run.history)
        assert all(
            len(run.media(f"attention/{n}-digits/{kind}")) == (1 if n == 100 else 1 + validations)
            for n in (7, 20, 100)
            for kind in ("cross", "self")
        )  # the training length and 20 digits also before training and at every validation
    (lines,) = retrained.media("bias/lines")
    table = json.loads(open(lines).read())
    assert (
        table["columns"] == ["layer", "attention", "direction", "head", "line", "value"]
        and table["data"]
    )
    assert len(table["data"]) == sum(
        len(line.split(": ")[1].split(","))
        for line in json.loads(
            (tmp_path / "ok" / "successor" / "abc-s0" / "eval.json").read_text()
        )["lines"]
    )  # every open line of the record
    # tied by artifacts: source model → bias → retrained model; their files staged inside the results root
    logged = lambda run: [a for a in run.artifacts if a[1] != "run_table"]  # noqa: E731 — wandb stores tables as artifacts too
    assert logged(source) == [("model-small-successor-vanilla-s0-pad_width-11", "model")]
    assert calibration.config["uses"] == ["model-small-successor-vanilla-s0-pad_width-11"]
    assert logged(calibration) == [("abc-bias-small-successor-abc-s0", "abc-bias")]
    assert retrained.config["uses"] == ["abc-bias-small-successor-abc-s0"]
    assert logged(retrained) == [("model-small-successor-abc-s0", "model")]
    staged = [path for run in found for path in run.staged]
    assert staged and all(
        path.startswith(str(tmp_path)) and os.path.exists(path) for path in staged
    )
    for run in (source, calibration, retrained):
        assert (
            run.exit_code == 0 and {"successor", "small"} <= set(run.tags) and run.config["version"]
        )
        assert run.config["commit"] is None or len(run.config["commit"]) >= 40
    assert retrained.config["method"] == "nope+abc" and "abc" in retrained.tags
    # the comparison run, read back with wandb's own reader: a line series per task holding every method
    (comparison,) = [
        run for run in found if run.job_type == "comparison" and run.group == "small/comparison"
    ]
    records = leet(comparison.directory)
    updates = [
        r["run"]["config"] if r["type"] == "run" else r["config"]
        for r in records
        if r["type"] in ("run", "config")
    ]
    config = {key: value for update in updates for key, value in update["update"].items()}
    assert (
        config["_wandb.visualize.comparison/successor"]["panel_config"]["panelDefId"]
        == "wandb/lineseries/v0"
    )
    assert {(run["method"], run["run"]) for run in config["runs"]} == {
        ("vanilla", "successor/vanilla-s0"),
        ("nope+abc", "successor/abc-s0"),
    }
    (series,) = comparison.media("comparison/successor_table")
    data = json.loads(open(series).read())
    assert {row[data["columns"].index("lineKey")] for row in data["data"]} == {
        "vanilla",
        "nope+abc",
    }
    (report_table,) = comparison.media("tables/successor")
    table = json.loads(open(report_table).read())
    assert table["columns"] == ["method", "length", "median", "lowest", "highest", "seeds", "cell"]
    assert {tuple(row[:2]) for row in table["data"]} == {
        (m, n) for m in ("vanilla", "nope+abc") for n in (6, 12)
    } and all(isinstance(row[2], (int, float)) for row in table["data"])
    # the sync command over that root: every run (sources and the comparison included) and the edges it would restore
    plan = invoke("sync", tmp_path / "ok", "--dry-run")
    assert plan.exit_code == 0, plan.output
    for run in (source, calibration, retrained, comparison):
        assert f"  {run.id}  " in plan.output
    assert (
        f"Api().run('ENTITY/abcmini/{retrained.id}').use_artifact('ENTITY/abcmini/abc-bias-small-successor-abc-s0:latest')"
        in plan.output
    )
    assert f"(logged by {calibration.id})" in plan.output and "2 lineage edges" in plan.output
    refused = invoke("sync", tmp_path / "ok")  # without a key: one line, nothing uploaded
    assert (
        refused.exit_code == 2
        and refused.output.count("\n") == 1
        and "no wandb API key" in refused.output
    )
    # the failing cell: its source trained, its calibration failed, and wandb knows it
    assert runs["doomed", "doomed/successor/abc-s0", "source"].exit_code == 0
    assert runs["doomed", "doomed/successor/abc-s0", "calibration"].exit_code == 1
    assert ("doomed", "doomed/successor/abc-s0", "retraining") not in runs


def test_a_resumed_run_continues_its_wandb_run(offline, tmp_path):
    args = [
        "train",
        "--preset",
        "tiny",
        "--pad-width",
        7,
        "--lengths",
        3,
        "--eval-every",
        2,
        "--valid-size",
        8,
        "--out",
        tmp_path / "r",
    ]
    assert invoke(*args, "--steps", 4).exit_code == 0
    assert invoke(*args, "--steps", 6, "--resume").exit_code == 0
    first, second = read_offline_runs(offline)
    assert first.id == second.id == (tmp_path / "r" / "wandb-id").read_text()
    assert [row["_step"] for row in second.history if "valid/exact_match" in row] == [6]


def test_wandb_mode_disabled_is_no_run_and_draws_nothing(tmp_path, monkeypatch):
    """wandb's own switch turns tracking off as ``--no-wandb`` does: no run, so no picture is
    drawn for a no-op run to drop, and no run id kept for a resume."""
    from abcmini.outputs.track import Tracker

    monkeypatch.setenv("WANDB_MODE", "disabled")
    before = os.environ.get("WANDB_DATA_DIR")
    tracker = Tracker.start(True, str(tmp_path / "run"), "train", {}, "g", keep_id=True)
    assert tracker.run is None and os.environ.get("WANDB_DATA_DIR") == before
    assert not (tmp_path / "run" / "wandb-id").exists()
