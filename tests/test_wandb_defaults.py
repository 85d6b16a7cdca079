"""What wandb records by default stays on (system metrics, the console, the installed
requirements), the run's config names the resolved model with its parameter count, and nothing
is written under the home directory: wandb's cache and config go inside the run's wandb folder,
matplotlib's font cache to the temporary folder. A real tiny training, offline, read back."""

import collections
import glob
import os
import subprocess
import sys

import pytest

from abcmini.outputs.wandb_files import read_offline_run, records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.integration  # trains and tracks: the second tier


def test_a_tracked_run_keeps_wandbs_defaults_and_leaves_home_untouched(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("WANDB_") and key != "MPLCONFIGDIR"
    }
    env |= {"HOME": str(home), "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    env |= {"PYTHONPATH": ROOT, "NETRC": str(tmp_path / "no-netrc")}
    done = subprocess.run(
        [sys.executable, "-c", "import cli; cli.main()", "train", "--recipe", "quick"]
        + ["--preset", "tiny", "--pad-width", "7", "--lengths", "3", "--steps", "40"]
        + ["--eval-every", "20", "--valid-size", "20", "--out", "run", "--threads", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(home.rglob("*")) == []  # nothing new under HOME
    (folder,) = glob.glob(str(tmp_path / "run" / "wandb" / "offline-run-*"))
    kinds = collections.Counter(
        record.WhichOneof("record_type")
        for record in records(glob.glob(os.path.join(folder, "run-*.wandb"))[0])
    )
    assert kinds["stats"] >= 1 and kinds["output_raw"] >= 1, kinds  # system metrics, console
    assert os.path.isfile(os.path.join(folder, "files", "requirements.txt"))
    logged = read_offline_run(folder)
    rates = [row["train/examples_per_second"] for row in logged.history if "train/loss" in row]
    assert rates and all(rate > 0 for rate in rates)  # throughput, logged with the loss
    assert "examples/s" in done.stdout  # and shown in each validation line of a log file
    pictured = [row["_step"] for row in logged.history if "attention/7-digits/cross" in row]
    assert pictured == [0, 20, 40], pictured  # attention before training and at each validation
    model = logged.config["model"]
    assert model["heads"] == 2 and model["d_model"] == 32 and model["parameters"] > 1000, model
    cache = tmp_path / "run" / "wandb" / "cache"
    assert any(cache.rglob("core-debug-*.log"))  # wandb-core's log: inside the run, not HOME


def steps_logged(run_dir) -> list[int]:
    """Every step at which a tracked training logged its loss, over all its processes' files."""
    from abcmini.outputs.wandb_files import history, run_files

    run_id = (run_dir / "wandb-id").read_text().strip()
    return [
        row["_step"]
        for path in run_files(str(run_dir / "wandb"), run_id)
        for row in history(path)
        if "train/loss" in row
    ]


def test_a_killed_and_resumed_tracked_run_logs_each_step_once(tmp_path):
    """SIGKILL after the first checkpoint and after the loss of later steps reached wandb's file,
    then ``--resume``: each step's loss is logged once over both processes, up to the last."""
    import signal
    import time

    import torch

    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline", "PYTHONPATH": ROOT}
    env.pop("WANDB_DIR", None)
    args = [sys.executable, "-c", "import cli; cli.main()", "train", "--recipe", "quick"]
    args += ["--task", "addition", "--preset", "tiny", "--pad-width", "7", "--lengths", "3"]
    args += ["--steps", "1200", "--eval-every", "200", "--valid-size", "20", "--stop-at", "1"]
    args += ["--out", "run", "--threads", "1"]
    process = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
    run = tmp_path / "run"
    deadline, killed_after = time.time() + 300, None
    while time.time() < deadline and process.poll() is None:
        if (run / "checkpoint.pt").exists() and (run / "wandb-id").exists():
            saved = torch.load(run / "checkpoint.pt", weights_only=True)["step"]
            if any(step > saved for step in steps_logged(run)):
                killed_after = saved
                break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert killed_after is not None and process.returncode == -signal.SIGKILL
    before = steps_logged(run)
    assert max(before) > killed_after  # steps the resumed run trains again were logged
    done = subprocess.run(args + ["--resume"], cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr[-1500:]
    after = steps_logged(run)
    assert sorted(after) == sorted(set(after)) and max(after) == 1200, after
