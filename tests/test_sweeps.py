"""Every sweep in sweeps/ is valid for wandb's sweep engine and expands to valid CLI calls."""

import glob
import shlex

import pytest
from typer.testing import CliRunner

from abcmini.sweep import SweepFileError, command_line, expand, load_sweep
from cli import app

runner = CliRunner()
SWEEPS = sorted(glob.glob("sweeps/*.yaml"))


def test_the_project_ships_the_promised_sweeps():
    names = {load_sweep(path)["name"] for path in SWEEPS}
    assert {"paper-grid", "abs-window-period", "abc-kappa"} <= names


@pytest.mark.parametrize("path", SWEEPS)
def test_every_expanded_run_is_a_valid_cli_call(path):
    config = load_sweep(path)
    assert config["program"] == "cli.py"
    runs = expand(config)
    assert len(runs) > 1
    for params in runs:
        argv = command_line(config, params, interpreter="python")
        assert argv[:2] == ["python", "cli.py"]
        result = runner.invoke(app, [*argv[2:], "--dry-run"])
        assert result.exit_code == 0, f"{shlex.join(argv)}\n{result.output}"


def test_the_grid_covers_every_baseline_abs_and_abc_on_every_task_over_three_seeds():
    runs = expand(load_sweep("sweeps/paper-grid.yaml"))
    cells = {(r["task"], r["method"], r["seed"]) for r in runs}
    tasks, methods = {"successor", "addition", "nx1", "parity"}, {"vanilla", "nope", "rope", "alibi", "relative", "+w=1", "+T=3", "NoPE+w=1", "abc"}
    assert cells == {(t, m, s) for t in tasks for m in methods for s in (0, 1, 2)}


@pytest.mark.parametrize("text, needle", [
    ("program: cli.py\nmethod: grid\n", "`parameters` is required"),
    ("program: cli.py\nmethod: grid\nparameters:\n  lr: {min: 0.1, max: 1.0}\n", "disallowed type with grid search"),
    ("program: cli.py\nmethod: bayes\nparameters:\n  lr: {min: 0.1, max: 1.0}\n", "requires \"metric\""),
    ("program: cli.py\nmethod: grid\nparameters:\n  seed: {values: [0]}\ncommand: [\"${program}\", \"${args_json}\"]\n", "unsupported command macro"),
    ("method: grid\nparameters:\n  seed: {values: [0]}\n", "names no program"),
    ("a: [1,\n", "not valid YAML"),
    ("- just\n- a list\n", "not hold a sweep configuration"),
])
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
    assert all(" cli.py train --" in line and "--method=abc" in line for line in lines)
