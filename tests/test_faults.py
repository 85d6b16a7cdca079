"""Bad input and faults: one line naming the problem, exit code 2, no traceback, nothing lost.

Every row of ``CASES`` is a command run through the real CLI against a small world of files (a
trained run, a user's folder, a hand-written report …); after it, every file of that world must
be byte for byte what it was. A new command adds its rows here.
"""

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from typer.testing import CliRunner

from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = [
    "--preset",
    "tiny",
    "--pad-width",
    "7",
    "--test-frame",
    "fixed",
    "--lengths",
    "3",
    "--valid-size",
    "20",
    "--eval-every",
    "10",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A trained run (interpolating Successor at pad 7), its bias, a user's folder, a plain file,
    result records good and bad, a hand-written report, a sweep folder."""
    w = tmp_path_factory.mktemp("world")
    run = w / "run"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--preset",
            "cpu",
            "--pad-width",
            "7",
            "--lengths",
            "3",
            "--steps",
            "300",
            "--eval-every",
            "100",
            "--valid-size",
            "300",
            "--stop-at",
            "0.99",
            "--test-frame",
            "fixed",
            "--no-wandb",
            "--out",
            str(run),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        CliRunner()
        .invoke(
            app, ["calibrate", str(run), "--min-accuracy", "0.9", "--samples", "100", "--no-wandb"]
        )
        .exit_code
        == 0
    )
    (w / "thesis").mkdir()
    (w / "thesis" / "thesis.tex").write_text("\\chapter{Mine}\n")
    (w / "thesis" / "sub").mkdir()
    (w / "thesis" / "sub" / "data.csv").write_text("a,b\n1,2\n")
    (w / "plain.txt").write_text("not a directory\n")
    for name, content in (
        ("list", "[1, 2]"),
        ("nokeys", '{"task": "successor"}'),
        ("corrupt", '{"task": "succ'),
    ):
        (w / "records" / name / "r").mkdir(parents=True)
        (w / "records" / name / "r" / "eval.json").write_text(content)
    (w / "mine").mkdir()
    (w / "mine" / "report.md").write_text("# My own notes on these runs\n")
    shutil.copytree(run, w / "mine" / "run")
    (w / "sweeps").mkdir()
    (w / "layers.yaml").write_text("base: long\ncalibration: {per_layer: true}\n")
    (w / "unknown.yaml").write_text(
        "program: cli.py\nmethod: grid\nparameters:\n  seed: {values: [0, 1]}\n  learning_speed: {value: 3}\n"
    )
    return w


def snapshot(directory) -> dict:
    """Every file under ``directory`` with its size and content hash."""
    found = {}
    for folder, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return found


CASES = [
    # (command, needle of the one line on stderr); {w} is the world folder
    (["train", "--pad-width", "100000"], "GiB of memory"),
    (["train", "--batch-size", "10000000"], "GiB of memory"),
    (
        ["train", "--valid-size", "10000000", "--pad-width", "300"],
        "10,000,000 validation examples needs about",
    ),
    (["train", "--batch-size", "1000000000"], "--batch-size must be at most 10,000,000"),
    (["calibrate", "{w}/run", "--samples", "1000000000"], "--samples must be at most 10,000,000"),
    (
        ["train", "--method", "abc", "--calibration-seed", "-1", "--dry-run"],
        "--calibration-seed must be at least 0",
    ),
    (["train", "--test-seed", "99999999999", "--dry-run"], "--test-seed must be at most"),
    (["train", *TINY, "--out", "{w}/plain.txt"], "is a file, not a directory"),
    (["train", *TINY, "--out", "/proc/x"], "is not writable"),
    (["calibrate", "{w}/run", "--out", "{w}/thesis"], "is a directory"),
    (["calibrate", "{w}/run"], "pass --overwrite to replace it"),
    (["report", "{w}/records/list"], "does not hold a JSON object"),
    (["report", "{w}/records/nokeys"], "lacks method, seed, accuracy"),
    (["report", "{w}/records/corrupt"], "records/corrupt/r/eval.json' is not valid JSON"),
    (["report", "{w}/mine"], "was not written by abcmini report"),
    (["report", "{w}/mine", "--out", "{w}/thesis"], "is a directory"),
    (["report", "{w}/records/list", "--beside", "{w}/nowhere"], "--beside directory"),
    (
        ["calibrate", "{w}/run", "--min-support", "-1", "--out", "{w}/v.pt"],
        "min_support must lie in [0, 1]",
    ),
    (
        ["train", "--recipe", "{w}/layers.yaml", "--method", "abc", "--dry-run"],
        "unknown field 'per_layer'",
    ),
    (["reproduce", "--out", "{w}/plain.txt", "--quick"], "is a file, not a directory"),
    (["sweep", "{w}/sweeps"], "is a directory"),
    (["sweep", "{w}/unknown.yaml"], "'learning_speed' is not an option of abcmini train"),
    (["train", *TINY, "--device", "tpu", "--out", "{w}/new"], "unknown device 'tpu'"),
    (["train", *TINY, "--out", ""], "--out is empty"),
    (
        ["train", "--pad-width", "12", "--lengths", "6,,10"],
        "--lengths takes comma-separated integers",
    ),
    (["train", *TINY, "--resume", "--out", "{w}/missing"], "holds no run to continue"),
    (
        ["train", *TINY, "--resume", "--overwrite", "--out", "{w}/run"],
        "--resume and --overwrite contradict",
    ),
    (["train", "--method", "abc", "--kappa-cross", "nan"], "kappa_cross must be a finite number"),
    (
        ["train", "--method", "+w=1", "--window", "2"],
        "method '+w=1' sets window 1; --window 2 contradicts it",
    ),
    (
        [
            "train",
            "--pad-width",
            "8",
            "--lengths",
            "3",
            "--bias",
            "{w}/run/abc_bias.pt",
            "--dry-run",
        ],
        "comes from pad width 7",
    ),
    (
        ["train", *TINY, "--overwrite", "--out", "{w}/thesis"],
        "holds no abcmini run; refusing to delete it",
    ),
    (["train", *TINY, "--overwrite", "--out", "."], "holds no abcmini run; refusing to delete it"),
    (
        [
            "train",
            "--preset",
            "cpu",
            "--pad-width",
            "7",
            "--lengths",
            "3",
            "--overwrite",
            "--bias",
            "{w}/run/abc_bias.pt",
            "--out",
            "{w}/run",
        ],
        "--overwrite would delete",
    ),
    (["eval", "{w}/run", "--lengths", "9"], "does not fit the run's fixed pad width 7"),
    (
        ["eval", "{w}/run", "--lengths", "1000000", "--test-frame", "follows"],
        "GiB of memory for one example",
    ),
    (
        ["eval", "{w}/run", "--lengths", "10000000", "--test-frame", "follows"],
        "--lengths must be at most 1,000,000",
    ),
    (["eval", "{w}/run", "--test-frame", "wide"], "--test-frame is fixed or follows, not 'wide'"),
    (
        ["train", "--test-frame", "wide", "--dry-run"],
        "--test-frame is fixed or follows, not 'wide'",
    ),
    (["eval", "{w}/thesis"], "no checkpoint in"),
]


@pytest.mark.parametrize("args, needle", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_is_one_line_and_changes_nothing(world, args, needle, monkeypatch):
    monkeypatch.chdir(world / "thesis")  # "--out ." names the user's folder
    before = snapshot(world)
    result = CliRunner().invoke(app, [a.format(w=world) for a in args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output
    assert "Traceback" not in result.output
    assert snapshot(world) == before


def cli(*args, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        **kwargs,
    )


def limit_file_size(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_full_disk_is_one_line_and_leaves_no_half_written_file(tmp_path):
    """A file-size limit stands in for a full disk: the checkpoint cannot be written."""
    result = cli(
        "train",
        *TINY,
        "--steps",
        10,
        "--no-wandb",
        "--out",
        tmp_path / "run",
        preexec_fn=limit_file_size(50_000),
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "cannot write" in result.stderr
        and "checkpoint.pt" in result.stderr
        and "Traceback" not in result.stderr
    )
    assert not list((tmp_path / "run").glob("*.tmp"))


def test_eval_never_leaves_a_result_record_half_written(world, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(world / "run", run)
    record = (run / "eval.json").read_bytes()
    result = cli(
        "eval",
        run,
        "--lengths",
        "1,2,3,4,5,6,7",
        "--no-wandb",
        preexec_fn=limit_file_size(len(record) + 10),
    )
    assert (
        result.returncode == 2 and "cannot write" in result.stderr and "eval.json" in result.stderr
    ), result.stderr
    assert (run / "eval.json").read_bytes() == record and not list(run.glob("*.tmp"))


@pytest.fixture
def read_only(tmp_path):
    """A read-only file system holding a copy of a run (needs root and mount; skipped without)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "tmpfs", str(mount)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip(
            "mounting a tmpfs needs root and mount permission, which this machine does not give"
        )
    yield mount
    subprocess.run(["umount", "-l", str(mount)])


def test_eval_on_a_read_only_file_system_stops_before_any_work(world, read_only):
    shutil.copytree(world / "run", read_only / "run")
    assert subprocess.run(["mount", "-o", "remount,ro", str(read_only)]).returncode == 0
    before = snapshot(read_only)
    start = time.perf_counter()
    result = CliRunner().invoke(
        app, ["eval", str(read_only / "run"), "--lengths", "3,5,7", "--no-wandb"]
    )
    assert (
        result.exit_code == 2
        and "is not writable" in result.stderr
        and "Read-only file system" in result.stderr
    ), result.output
    assert (
        "length" not in result.stdout and time.perf_counter() - start < 10
    )  # refused before evaluating
    assert snapshot(read_only) == before


def test_overwrite_deletes_only_what_abcmini_wrote(world, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(world / "run", run)
    (run / "notes.txt").write_text("mine\n")
    result = CliRunner().invoke(
        app, ["train", *TINY, "--steps", "2", "--no-wandb", "--overwrite", "--out", str(run)]
    )
    assert result.exit_code == 0, result.output
    assert (run / "notes.txt").read_text() == "mine\n"
    assert (
        not (run / "abc_bias.pt").exists()
        and json.loads((run / "experiment.json").read_text())["run"]["steps"] == 2
    )


def test_a_resumed_run_refuses_a_changed_bias(world, tmp_path):
    bias = tmp_path / "bias.pt"
    shutil.copy(world / "run" / "abc_bias.pt", bias)
    args = [
        "train",
        "--preset",
        "cpu",
        "--pad-width",
        "7",
        "--lengths",
        "3",
        "--eval-every",
        "5",
        "--valid-size",
        "20",
        "--bias",
        str(bias),
        "--no-wandb",
        "--out",
        str(tmp_path / "abc"),
    ]
    assert CliRunner().invoke(app, [*args, "--steps", "5"]).exit_code == 0
    assert (
        CliRunner()
        .invoke(
            app,
            [
                "calibrate",
                str(world / "run"),
                "--min-accuracy",
                "0.9",
                "--samples",
                "50",
                "--kappa-cross",
                "1",
                "--out",
                str(bias),
                "--overwrite",
                "--no-wandb",
            ],
        )
        .exit_code
        == 0
    )
    result = CliRunner().invoke(app, [*args, "--steps", "10", "--resume"])
    assert (
        result.exit_code == 2 and "the bias file changed since the run started" in result.stderr
    ), result.output


def test_sigint_stops_reproduce_promptly_and_the_ledger_counts_what_ran(tmp_path):
    """An endless job (Vanilla Addition asked for 100% validation) interrupted after its first checkpoint.
    The child gets SIGINT's default handling even where the test runs as a background job, which ignores it."""
    root, recipe = tmp_path / "root", tmp_path / "endless.yaml"
    recipe.write_text(
        "base: quick\npad_width: 12\nlengths: [6]\nstep_caps: {addition vanilla: 1000000}\nstop_at_plain: 1.0\n"
        "eval_every: 20\nvalid_size: 500\n"
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "reproduce",
            "--recipe",
            str(recipe),
            "--tasks",
            "addition",
            "--methods",
            "vanilla",
            "--seeds",
            "0",
            "--workers",
            "1",
            "--no-wandb",
            "--out",
            str(root),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    checkpoint = root / "addition" / "vanilla-s0" / "checkpoint.pt"
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert process.poll() is None and checkpoint.exists(), (
        "the run never wrote its first checkpoint"
    )
    process.send_signal(signal.SIGINT)
    start = time.perf_counter()
    _, stderr = process.communicate(timeout=60)
    assert time.perf_counter() - start < 30, (
        "SIGINT waited for the job"
    )  # the job never ends: waiting for it would time out
    assert (
        process.returncode == 130
        and "interrupted after" in stderr
        and "rerun the same command to resume" in stderr
    ), stderr
    (ledger,) = json.loads((root / "invocations.json").read_text())
    assert ledger["done"] == 0 and ledger["seconds"] > 1 and not ledger["finished"]
    state = torch.load(checkpoint, weights_only=True)
    assert state["step"] >= 20  # the checkpoint it kept
