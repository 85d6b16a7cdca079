import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from abcmini.experiment import RunConfig, learning_rate
from abcmini.outputs.method_views import seconds_on
from abcmini.store import load_checkpoint, save_checkpoint
from abcmini.train import Trainer, seconds_by_device
from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = [
    "train",
    "--preset",
    "tiny",
    "--pad-width",
    "7",
    "--lengths",
    "3",
    "--steps",
    "200",
    "--eval-every",
    "20",
    "--valid-size",
    "50",
    "--batch-size",
    "32",
    "--seed",
    "3",
]


def metrics(run_dir):
    state = torch.load(os.path.join(run_dir, "checkpoint.pt"), weights_only=True)
    return [(entry["step"], entry["loss"], entry["valid_acc"]) for entry in state["history"]], state


def test_same_seed_gives_bit_identical_metrics(tmp_path):
    runner = CliRunner()
    short = ARGS[: ARGS.index("--steps")] + ["--steps", "60"] + ARGS[ARGS.index("--steps") + 2 :]
    for name in ("a", "b"):
        assert runner.invoke(app, short + ["--out", str(tmp_path / name)]).exit_code == 0
    (first, state_a), (second, state_b) = metrics(tmp_path / "a"), metrics(tmp_path / "b")
    assert first == second and len(first) == 3
    for key in state_a["model"]:
        assert torch.equal(state_a["model"][key], state_b["model"][key])


def test_sigkill_then_resume_ends_like_an_uninterrupted_run(tmp_path):
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "cli.py", *ARGS, "--out", str(killed)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    checkpoint = killed / "checkpoint.pt"
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    interrupted_at = metrics(killed)[0][-1][0]
    assert interrupted_at < 200

    # same thread count as the killed run: float reductions depend on it
    for extra in (["--out", str(killed), "--resume"], ["--out", str(whole)]):
        subprocess.run(
            [sys.executable, "cli.py", *ARGS, *extra],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
    assert metrics(killed)[0] == metrics(whole)[0]
    assert metrics(whole)[0][-1][0] == 200


def test_resume_refuses_another_configuration(tmp_path):
    runner = CliRunner()
    short = [
        "train",
        "--preset",
        "tiny",
        "--pad-width",
        "7",
        "--lengths",
        "3",
        "--steps",
        "4",
        "--eval-every",
        "2",
        "--valid-size",
        "8",
    ]
    assert runner.invoke(app, short + ["--out", str(tmp_path / "r")]).exit_code == 0
    result = runner.invoke(app, short + ["--lr", "0.5", "--out", str(tmp_path / "r"), "--resume"])
    assert (
        result.exit_code == 2
        and "different configuration (lr: 0.001 there, 0.5 here)" in result.output
    )
    # a checkpoint of another task
    result = runner.invoke(
        app, short + ["--task", "addition", "--out", str(tmp_path / "r"), "--resume"]
    )
    assert result.exit_code == 2 and "task: 'successor' there, 'addition' here" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_resume_may_extend_the_training_budget(tmp_path):
    """A finished run trains on with more --steps (or another --stop-at); nothing else may change."""
    runner = CliRunner()
    short = [
        "train",
        "--preset",
        "tiny",
        "--pad-width",
        "7",
        "--lengths",
        "3",
        "--eval-every",
        "2",
        "--valid-size",
        "8",
        "--out",
        str(tmp_path / "r"),
    ]
    assert runner.invoke(app, short + ["--steps", "4"]).exit_code == 0
    first = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    result = runner.invoke(app, short + ["--steps", "8", "--stop-at", "1.0", "--resume"])
    assert result.exit_code == 0, result.output
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 8 and [h["step"] for h in state["history"]] == [2, 4, 6, 8]
    assert state["history"][:2] == first["history"] and state["config"]["steps"] == 8


def test_the_record_splits_training_seconds_by_the_device_each_part_ran_on(tmp_path):
    """Each history entry names the device of its steps; a run resumed from a checkpoint whose
    entries name none (one written before they did) counts those seconds as ``unrecorded``."""
    runner, run = CliRunner(), tmp_path / "r"
    short = [
        "train",
        "--preset",
        "tiny",
        "--pad-width",
        "7",
        "--lengths",
        "3",
        "--eval-every",
        "2",
        "--valid-size",
        "8",
        "--device",
        "cpu",
        "--out",
        str(run),
    ]
    assert runner.invoke(app, short + ["--steps", "4"]).exit_code == 0
    first = json.loads((run / "eval.json").read_text())
    assert first["train_seconds_by_device"] == {"CPU": first["train_seconds"]}
    state = load_checkpoint(str(run))
    assert [entry["device"] for entry in state["history"]] == ["CPU", "CPU"]
    for entry in state["history"]:
        del entry["device"]
    save_checkpoint(str(run), {k: v for k, v in state.items() if k != "format"})
    assert runner.invoke(app, short + ["--steps", "8", "--resume"]).exit_code == 0
    record = json.loads((run / "eval.json").read_text())
    spent = record["train_seconds_by_device"]
    assert (
        list(spent) == ["unrecorded", "CPU"]
        and spent["unrecorded"] == state["history"][-1]["seconds"]
    )
    assert sum(spent.values()) == pytest.approx(record["train_seconds"], abs=0.02)
    parts = f"{spent['unrecorded']:,.0f} unrecorded, {spent['CPU']:,.0f} on CPU"
    assert seconds_on(record) == f"{record['train_seconds']:,.0f} ({parts})"
    # an entry of a checkpoint older still, without seconds, adds none (and raises nothing)
    assert seconds_by_device([{"step": 2}, {"step": 4, "seconds": 3.0, "device": "CPU"}]) == {
        "unrecorded": 0.0,
        "CPU": 3.0,
    }


def test_a_diverging_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--preset",
            "tiny",
            "--pad-width",
            "7",
            "--lengths",
            "3",
            "--lr",
            "1e30",
            "--steps",
            "50",
            "--eval-every",
            "1",
            "--valid-size",
            "10",
            "--out",
            str(tmp_path / "nan"),
        ],
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (
        "loss became nan at step 2" in result.output
        and "checkpoint (step 1) is kept" in result.output
    )
    state = torch.load(tmp_path / "nan" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 1 and all(torch.isfinite(t).all() for t in state["model"].values())
    assert state["code_version"]


def test_train_on_continues_past_the_step_that_reached_stop_at(tmp_path):
    """--stop-at 0 is reached at the first evaluation (step 2); --train-on 2.5 trains on to the
    first evaluation from step 5 on, and a resumed run that already got there trains no more."""
    runner = CliRunner()
    args = [
        "train",
        "--preset",
        "tiny",
        "--pad-width",
        "7",
        "--lengths",
        "3",
        "--eval-every",
        "2",
        "--valid-size",
        "8",
        "--steps",
        "20",
        "--stop-at",
        "0",
        "--out",
        str(tmp_path / "r"),
    ]
    assert runner.invoke(app, args + ["--train-on", "2.5"]).exit_code == 0
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert [h["step"] for h in state["history"]] == [2, 4, 6]
    assert runner.invoke(app, args + ["--train-on", "3", "--resume"]).exit_code == 0
    assert torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)["step"] == 6
    assert (
        runner.invoke(app, args + ["--train-on", "1", "--out", str(tmp_path / "once")]).exit_code
        == 0
    )
    assert torch.load(tmp_path / "once" / "checkpoint.pt", weights_only=True)["step"] == 2


def test_min_steps_is_a_floor_under_the_train_on_phase(tmp_path):
    """Reached at step 2 with --train-on 2: without a floor the run stops at step 4; with
    --min-steps 9 it trains to the first evaluation from step 9 on, annealing to zero there."""
    cfg = RunConfig(
        preset="tiny",
        pad_width=7,
        steps=100,
        warmup=1,
        eval_every=2,
        valid_size=8,
        stop_at=0.0,
        train_on=2.0,
    )
    assert Trainer(cfg, str(tmp_path / "bare")).run()["step"] == 4
    floored = replace(cfg, min_steps=9)
    trainer, rates = Trainer(floored, str(tmp_path / "floor")), []
    trainer.run(on_step=lambda step, loss: rates.append(trainer.optimizer.param_groups[0]["lr"]))
    assert trainer.reached == 2 and trainer.step_count == 10 and rates[8] == 0.0 < rates[7]
    assert all(b < a for a, b in zip(rates[2:9], rates[3:9]))
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--preset",
            "tiny",
            "--steps",
            "5",
            "--min-steps",
            "6",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert (
        result.exit_code == 2
        and "--min-steps (6)" in result.output
        and not (tmp_path / "x").exists()
    )


def test_the_train_on_phase_anneals_the_learning_rate_to_zero(tmp_path):
    """Reached at step 4 with --train-on 3: the rate falls from its value there, without a jump,
    to zero by step 12, where the run stops; a run that never reaches stop_at keeps the cosine."""
    cfg = RunConfig(
        preset="tiny",
        pad_width=7,
        steps=100,
        warmup=2,
        eval_every=4,
        valid_size=8,
        stop_at=0.0,
        train_on=3.0,
    )
    trainer = Trainer(cfg, str(tmp_path / "r"))
    rates = []
    trainer.run(on_step=lambda step, loss: rates.append(trainer.optimizer.param_groups[0]["lr"]))
    assert trainer.reached == 4 and trainer.step_count == 12 and len(rates) == 12
    assert (
        rates[3] == learning_rate(cfg, 3) and abs(rates[4] - rates[3]) < 0.05 * rates[3]
    )  # no jump at the step that reached it
    assert all(b < a for a, b in zip(rates[4:], rates[5:])) and rates[-1] == 0.0
    unreached = [learning_rate(cfg, step) for step in range(2, 100)]
    assert (
        all(b < a for a, b in zip(unreached, unreached[1:]))
        and abs(unreached[-1] - 0.1 * cfg.lr) < 1e-6
    )


def test_a_recipes_tests_stop_after_the_first_length_below_test_until_and_stay_stopped(tmp_path):
    """``test_until``: the lengths go in order and none after one below it is tested, neither
    when the run ends nor when its command runs again (the cell counts as done)."""
    recipe = tmp_path / "until.yaml"
    recipe.write_text("base: quick\ntest_frame: follows\ntest_until: 0.5\n")
    out = tmp_path / "run"
    args = [*ARGS, "--steps", "40", "--lengths", "3,40,41", "--recipe", str(recipe)]
    args += ["--out", str(out), "--continue"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    accuracy = json.loads((out / "eval.json").read_text())["accuracy"]
    assert "41" not in accuracy and min(accuracy.values()) < 0.5  # 40 steps: 0% at 40 digits
    assert all(a >= 0.5 for n, a in accuracy.items() if int(n) < max(map(int, accuracy)))
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads((out / "eval.json").read_text())["accuracy"] == accuracy
    assert "length  41" not in again.output
