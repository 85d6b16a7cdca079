"""Sweep runs under the environment ``wandb agent`` gives each run (``WANDB_SWEEP_ID``,
``WANDB_RUN_ID``, ``WANDB_SWEEP_PARAM_PATH``), tracked by the real wandb library offline and read
back from its run files; and a run ended by SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml
from typer.testing import CliRunner

from abcmini.outputs.wandb_files import read_offline_runs
from abcmini.sweep import command_line
from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = "agent-sweep"


def agent_env(wandb_dir, run_id: str, params: dict) -> dict:
    """What ``wandb agent`` puts in a run's environment: the sweep, the run it created on the
    server for these parameters, and the parameters as a config file (``{key: {value: v}}``)."""
    path = wandb_dir / "wandb" / f"sweep-{SWEEP}" / f"config-{run_id}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({key: {"value": value} for key, value in params.items()}))
    return {
        "WANDB_SWEEP_ID": SWEEP,
        "WANDB_RUN_ID": run_id,
        "WANDB_SWEEP_PARAM_PATH": str(path),
        "WANDB_PROJECT": "abcmini-sweep",
    }


def agent_argv(params: dict) -> list[str]:
    """The command line the agent runs for ``params`` from the shipped sweeps' command."""
    config = yaml.safe_load(open(os.path.join(ROOT, "sweeps", "paper-grid.yaml")))
    return command_line(config, params, interpreter=sys.executable)


@pytest.fixture
def offline(tmp_path, monkeypatch):
    wandb_dir = tmp_path / "wandb-dir"
    wandb_dir.mkdir()
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return wandb_dir


SMALL = (
    "base: quick\nname: small\npreset: tiny\npad_width: 12\nabc_pad_width: 11\nlengths: [6, 60]\ntest_frame: follows\nsteps: 40\neval_every: 20\n"
    "valid_size: 50\nabc_valid_size: 50\ncalibration: {samples: 50, min_accuracy: 0}\n"
)  # small and real, not converged


def test_an_abc_cell_under_the_agent_is_three_runs_and_the_agents_run_reports_it(
    offline, empty_cwd, monkeypatch
):
    """Source training and calibration are runs of their own; the agent's run is the retrained
    cell, holds acc@60, and reports it again from the record when the cell is already done."""
    (empty_cwd / "small.yaml").write_text(SMALL)
    params = {
        "recipe": "small.yaml",
        "task": "successor",
        "method": "abc",
        "kappa_cross": 2.0,
        "seed": 0,
        "threads": 1,
    }
    argv = agent_argv(params)
    assert argv[:5] == [sys.executable, "-m", "cli", "train", "--continue"]
    for name, value in agent_env(offline, "agentrun1", params).items():
        monkeypatch.setenv(name, value)
    first = CliRunner().invoke(app, argv[3:])
    assert first.exit_code == 0, first.output
    runs = {run.job_type: run for run in read_offline_runs(offline)}
    assert set(runs) == {"source", "calibration", "retraining"}, [
        (r.id, r.group, r.job_type) for r in runs.values()
    ]
    source, calibration, cell = runs["source"], runs["calibration"], runs["retraining"]
    assert len({source.id, calibration.id, cell.id}) == 3 and cell.id == "agentrun1"
    assert cell.sweep_id == SWEEP and source.sweep_id == calibration.sweep_id == ""
    assert {run.project for run in runs.values()} == {"abcmini-sweep"}
    # the source is a Vanilla run with its own config; the sweep's parameters are none of it
    assert (
        source.config["method"] == "vanilla"
        and source.config["cell_method"] == "vanilla"
        and "kappa_cross" not in source.config
    )
    assert (
        source.config["agent"] == {"sweep_id": SWEEP, "run_id": "agentrun1"}
        and source.id
        == (empty_cwd / "runs/small/successor/vanilla-s0-pad_width=11/wandb-id").read_text()
    )
    assert (
        calibration.config["calibration"]["kappa_cross"] == 2.0
        and "kappa_cross" not in calibration.config
    )
    assert (
        source.group == calibration.group == cell.group == "small/successor/abc-s0-kappa_cross=2.0"
    )  # one cell, one group
    # the agent's run: the cell, its overrides, its source's run, its results
    assert cell.config["overrides"] == {"kappa_cross": 2.0} and cell.config["label"] == "nope+abc"
    assert cell.config["kappa_cross"] == 2.0 and cell.config["source_run"] == source.id
    record = json.loads(
        (empty_cwd / "runs/small/successor/abc-s0-kappa_cross=2.0/eval.json").read_text()
    )
    assert cell.summary["acc@60"] == pytest.approx(100 * record["accuracy"]["60"], abs=1e-3)
    series = [
        (row["length"], row["extrapolation/exact_match"])
        for row in cell.history
        if "extrapolation/exact_match" in row
    ]
    assert series == [
        (6, pytest.approx(100 * record["accuracy"]["6"], abs=1e-3)),
        (60, pytest.approx(cell.summary["acc@60"])),
    ]
    assert all(run.exit_code == 0 for run in runs.values())
    # the next agent run of the same cell: no training, one run (the agent's) reporting the record
    checkpoint = empty_cwd / "runs/small/successor/abc-s0-kappa_cross=2.0/checkpoint.pt"
    stamp = checkpoint.stat().st_mtime_ns
    for name, value in agent_env(offline, "agentrun2", params).items():
        monkeypatch.setenv(name, value)
    again = CliRunner().invoke(app, argv[3:])
    assert again.exit_code == 0, again.output
    (reported,) = [
        run
        for run in read_offline_runs(offline)
        if run.id not in {source.id, calibration.id, cell.id}
    ]
    assert (
        reported.id == "agentrun2"
        and reported.summary["acc@60"] == cell.summary["acc@60"]
        and reported.exit_code == 0
    )
    assert (
        not any("train/loss" in row for row in reported.history)
        and checkpoint.stat().st_mtime_ns == stamp
    )


TINY = {
    "recipe": "paper",
    "task": "successor",
    "method": "vanilla",
    "seed": 0,
    "preset": "tiny",
    "pad_width": 7,
    "lengths": "3",
    "steps": 400,
    "eval_every": 50,
    "valid_size": 8,
    "stop_at": 1.0,
    "train_on": 100,
}


def test_two_agents_on_one_cell_train_it_once_and_both_report_it(offline, empty_cwd):
    """The second waits for the first's lock with one line, then reports the finished cell."""
    argv = agent_argv(TINY)
    env = lambda run_id: {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": ROOT,
        **agent_env(offline, run_id, TINY),
    }  # noqa: E731
    first = subprocess.Popen(
        argv,
        cwd=empty_cwd,
        env=env("agentA"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while (
        not (checkpoints := list(empty_cwd.glob("runs/paper/successor/*/checkpoint.pt")))
        and time.time() < deadline
    ):
        time.sleep(0.1)
    (checkpoint,) = checkpoints
    assert first.poll() is None, "the first finished before the second could start"
    second = subprocess.Popen(
        argv,
        cwd=empty_cwd,
        env=env("agentB"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out_a, err_a = first.communicate(timeout=120)
    out_b, err_b = second.communicate(timeout=120)
    assert first.returncode == second.returncode == 0, err_a + err_b
    assert (
        err_a == ""
        and err_b.count("\n") == 1
        and "is in use by pid" in err_b
        and "waiting for it to end" in err_b
    ), err_b
    assert (
        "step    400 · loss" in out_a and "· loss" not in out_b
    )  # only the first trained (a validation line per 50 steps)
    history = torch.load(checkpoint, weights_only=True)["history"]
    assert [entry["step"] for entry in history] == list(range(50, 401, 50))
    runs = {run.id: run for run in read_offline_runs(offline)}
    assert set(runs) == {"agentA", "agentB"}
    assert runs["agentA"].summary["acc@3"] == runs["agentB"].summary["acc@3"]
    assert any("train/loss" in row for row in runs["agentA"].history) and not any(
        "train/loss" in row for row in runs["agentB"].history
    )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_a_run_as_failed_with_its_exit_code_and_keeps_its_checkpoint(
    offline, tmp_path, stop
):
    """SIGTERM: exit code 143 in wandb and for the process, as SIGINT's 130. The child gets SIGINT's
    default handling even where the test runs as a background job, which ignores it."""
    out = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "train",
            "--preset",
            "tiny",
            "--pad-width",
            "7",
            "--lengths",
            "3",
            "--steps",
            "100000",
            "--stop-at",
            "1.0",
            "--train-on",
            "1000",
            "--eval-every",
            "20",
            "--valid-size",
            "8",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.1)
    assert process.poll() is None and (out / "checkpoint.pt").exists(), (
        "the run never wrote its first checkpoint"
    )
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    code = 128 + stop
    assert process.returncode == code
    assert stderr.count("\n") == 1 and stderr.startswith(
        f"stopped by {stop.name} (exit code {code})"
    ), stderr
    (run,) = read_offline_runs(offline)
    assert run.exit_code == code and run.id == (out / "wandb-id").read_text()
    steps = torch.load(out / "checkpoint.pt", weights_only=True)["step"]
    assert steps >= 20 and steps % 20 == 0
    resumed = CliRunner().invoke(
        app,
        [
            "train",
            "--preset",
            "tiny",
            "--pad-width",
            "7",
            "--lengths",
            "3",
            "--steps",
            str(steps + 20),
            "--stop-at",
            "1.0",
            "--train-on",
            "1000",
            "--eval-every",
            "20",
            "--valid-size",
            "8",
            "--out",
            str(out),
            "--resume",
            "--threads",
            "1",
        ],
    )
    assert resumed.exit_code == 0, resumed.output
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == steps + 20
