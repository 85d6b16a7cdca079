"""Every sweep in sweeps/ is valid for wandb's sweep engine and expands to valid CLI calls."""

import glob
import json
import os
import shlex

import pytest
from typer.testing import CliRunner

from abcmini.sweep import SweepFileError, command_line, expand, load_sweep
from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

runner = CliRunner()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEPS = sorted(os.path.join(ROOT, path) for path in glob.glob("sweeps/*.yaml", root_dir=ROOT))


def test_the_project_ships_the_promised_sweeps():
    names = {load_sweep(path)["name"] for path in SWEEPS}
    assert {"paper-grid", "abs-window-period", "abc-kappa"} <= names


@pytest.mark.usefixtures("empty_cwd")
@pytest.mark.parametrize("path", SWEEPS, ids=os.path.basename)
def test_every_expanded_run_is_a_valid_cli_call(path):
    config = load_sweep(path)
    assert config["program"] == "cli.py"
    runs = expand(config)
    assert len(runs) > 1
    for params in runs:
        if params["recipe"].endswith(".yaml"):  # a recipe file, by its path in the repository
            params = {**params, "recipe": os.path.join(ROOT, params["recipe"])}
        argv = command_line(config, params, interpreter="python")
        assert argv[:5] == [
            "python",
            "-m",
            "cli",
            "train",
            "--continue",
        ]  # works from any directory; a rerun trains nothing
        result = runner.invoke(app, [*argv[3:], "--dry-run"])
        assert result.exit_code == 0, f"{shlex.join(argv)}\n{result.output}"


def test_the_grid_covers_every_baseline_abs_and_abc_on_every_task_over_three_seeds():
    runs = expand(load_sweep("sweeps/paper-grid.yaml"))
    cells = {(r["task"], r["method"], r["seed"]) for r in runs}
    tasks, methods = (
        {"successor", "addition", "nx1", "parity"},
        {"vanilla", "nope", "rope", "alibi", "relative", "+w=1", "+T=3", "NoPE+w=1", "abc"},
    )
    assert cells == {(t, m, s) for t in tasks for m in methods for s in (0, 1, 2)}


@pytest.mark.parametrize(
    "text, needle",
    [
        ("program: cli.py\nmethod: grid\n", "`parameters` is required"),
        (
            "program: cli.py\nmethod: grid\nparameters:\n  lr: {min: 0.1, max: 1.0}\n",
            "disallowed type with grid search",
        ),
        (
            "program: cli.py\nmethod: bayes\nparameters:\n  lr: {min: 0.1, max: 1.0}\n",
            'requires "metric"',
        ),
        (
            'program: cli.py\nmethod: grid\nparameters:\n  seed: {values: [0]}\ncommand: ["${program}", "${args_json}"]\n',
            "unsupported command macro",
        ),
        ("method: grid\nparameters:\n  seed: {values: [0]}\n", "names no program"),
        ("a: [1,\n", "not valid YAML"),
        ("- just\n- a list\n", "not hold a sweep configuration"),
    ],
)
def test_an_invalid_sweep_file_is_one_line_and_exit_2(tmp_path, text, needle):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    with pytest.raises(SweepFileError, match=needle.replace("(", r"\(").replace("`", ".")):
        load_sweep(str(path))
    result = runner.invoke(app, ["sweep", str(path), "--dry-run"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output


def test_sweep_dry_run_prints_one_agent_command_per_run():
    result = runner.invoke(app, ["sweep", "sweeps/abc-kappa.yaml", "--dry-run"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert len(lines) == len(expand(load_sweep("sweeps/abc-kappa.yaml")))
    assert all(" -m cli train --continue --" in line and "--method=abc" in line for line in lines)


def test_a_sweep_runs_twice_and_the_second_pass_trains_nothing(tmp_path):
    """Two real runs from any directory; the rerun skips both and exits 0; booleans in the agent's
    ``--key=value`` form; each run's directory follows its swept values."""
    import os
    import subprocess
    import sys

    sweep = tmp_path / "two.yaml"
    sweep.write_text(
        "program: cli.py\nname: two\nmethod: grid\n"
        'command: ["${env}", "${interpreter}", "-m", "cli", "train", "--continue", "${args}"]\n'
        "parameters:\n  recipe: {value: quick}\n  preset: {value: tiny}\n  pad_width: {value: 7}\n  lengths: {value: '3'}\n"
        "  steps: {value: 4}\n  eval_every: {value: 2}\n  valid_size: {value: 8}\n  wandb: {value: false}\n"
        "  seed: {values: [0, 1]}\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run(
        [sys.executable, "-m", "cli", "sweep", str(sweep)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 runs finished, 0 failed" in first.stdout and first.stdout.count("done: step 4") == 2
    runs = sorted((tmp_path / "runs" / "quick" / "successor").iterdir())
    assert [run.name for run in runs] == [
        f"vanilla-s{seed}-eval_every=2,lengths=3,pad_width=7,preset=tiny,steps=4,valid_size=8"
        for seed in (0, 1)
    ]
    stamps = {run: (run / "checkpoint.pt").stat().st_mtime_ns for run in runs}
    again = subprocess.run(
        [sys.executable, "-m", "cli", "sweep", str(sweep)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "2 runs finished, 0 failed" in again.stdout and "step      2" not in again.stdout
    )  # no validation: no training
    assert {run: (run / "checkpoint.pt").stat().st_mtime_ns for run in runs} == stamps


@pytest.mark.parametrize(
    "parameter, needle",
    [
        ("learning_speed: {value: 3}", "'learning_speed' is not an option of abcmini train"),
        (
            "steps: {values: [20, twenty]}",
            "Invalid value for '--steps'",
        ),  # the second run's value: every run is parsed first
        ("threads: {value: 0}", "Invalid value for '--threads'"),
        (
            "eval_every: {values: [10, ten]}",
            "Invalid value for '--eval-every'",
        ),  # the agent's spelling, parsed as train parses it
    ],
)
def test_a_sweep_over_an_unknown_option_or_a_bad_value_is_refused_before_any_run(
    tmp_path, parameter, needle
):
    sweep = tmp_path / "bad.yaml"
    sweep.write_text(
        f"program: cli.py\nmethod: grid\nparameters:\n  seed: {{values: [0, 1]}}\n  {parameter}\n"
    )
    result = runner.invoke(app, ["sweep", str(sweep)])
    assert (
        result.exit_code == 2
        and needle in result.output
        and "sweep bad.yaml run" not in result.output
    ), result.output
    assert os.listdir(tmp_path) == ["bad.yaml"]


@pytest.mark.parametrize("path", SWEEPS, ids=os.path.basename)
def test_every_sweep_names_its_project_and_runs_the_interpreter_running_abcmini(path):
    """``wandb sweep FILE`` puts the runs in the file's project; ``${interpreter}`` is the Python
    running ``abcmini sweep`` (``wandb agent`` substitutes ``python`` from PATH: the environment's)."""
    import sys

    config = load_sweep(path)
    assert config["project"] == "abcmini"
    assert (
        config["command"][:2] == ["${env}", "${interpreter}"]
        and command_line(config, {"seed": 0})[0] == sys.executable
    )


def test_the_smoke_sweep_runs_whole_and_ends_in_a_comparison_run(tmp_path):
    """sweeps/smoke.yaml: two tiny real runs, tracked offline, then the comparison run naming both."""
    import subprocess
    import sys

    from abcmini.outputs.wandb_files import offline_runs

    (tmp_path / "wandb-dir").mkdir()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path / "wandb-dir"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "cli", "sweep", os.path.join(ROOT, "sweeps", "smoke.yaml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 runs finished, 0 failed" in done.stdout and "comparison: wandb run" in done.stdout
    runs = offline_runs(tmp_path / "wandb-dir")
    trained = [run for run in runs if run.job_type == "train"]
    assert sorted(run.config["label"] for run in trained) == ["vanilla", "vanilla+w=1"]
    assert all("sweep:smoke" in run.tags and run.exit_code == 0 for run in trained)
    (comparison,) = [run for run in runs if run.job_type == "comparison"]
    assert comparison.group == "sweep/smoke" and comparison.config["sweep"] == "smoke"
    assert {(run["method"], run["wandb_id"]) for run in comparison.config["runs"]} == {
        (run.config["label"], run.id) for run in trained
    }
    (series,) = comparison.media("comparison/successor_table")
    with open(series) as f:
        table = json.load(f)
    assert {row[1] for row in table["data"]} == {"vanilla", "vanilla+w=1"} and {
        row[0] for row in table["data"]
    } == {6, 12}


def test_a_sweep_file_that_is_a_fifo_junk_or_a_huge_grid_is_one_line_before_any_work(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")  # reading it would wait forever
    (tmp_path / "junk.yaml").write_bytes(bytes(range(256)) * 8)
    values = ", ".join(map(str, range(1000)))
    (tmp_path / "big.yaml").write_text(
        f"program: cli.py\nmethod: grid\nparameters:\n  seed: {{values: [{values}]}}\n"
        f"  data_seed: {{values: [{values}]}}\n"
    )
    (tmp_path / "huge.yaml").write_text("program: cli.py\n" + "#" * 70_000 + "\n")
    for name, needle in (
        ("fifo.yaml", "is not a regular file"),
        ("junk.yaml", "is unreadable (UnicodeDecodeError)"),
        ("big.yaml", "its grid has 1,000,000 runs, over 10,000"),
        ("huge.yaml", "is over 64 KiB"),
    ):
        result = runner.invoke(app, ["sweep", str(tmp_path / name)])
        assert (
            result.exit_code == 2 and needle in result.output and result.output.count("\n") == 1
        ), (name, result.output)
