"""The lab's scripts take their arguments as the product does: bad arguments, or a run that is
not there, end in one line on stderr and exit code 2, never a docstring or a traceback."""

import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "lab")
SCRIPTS = sorted(
    name[:-3] for name in os.listdir(LAB) if name.endswith(".py") and name != "parse.py"
)
pytestmark = pytest.mark.integration  # a subprocess per script: the second tier

MISSING = "/nonexistent/run"
BAD = {  # script → arguments that name something that is not there
    "first_errors": [MISSING, "6", "10"],
    "frames": [MISSING, "6", "10"],
    "carry_errors": [MISSING, "6"],
    "chain_errors": [MISSING, "6"],
    "block_errors": [MISSING, "7"],
    "block_lines": [MISSING],
    "attention_png": [MISSING, "out.png"],
    "cost": [MISSING],
    "line_focus": [MISSING, "7", "0-1"],
    "mix_bias": [MISSING, MISSING, "out.pt", "cross"],
    "set_lines": [MISSING, "out.pt", "--close", "0:0:0"],
}


def lab(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr[-800:])
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_lab_script_without_its_arguments_is_one_line(script, tmp_path):
    path = os.path.join(LAB, f"{script}.py")
    one_line(lab(path, "--no-such-option", "x", "y", "z", cwd=tmp_path))
    assert lab(path, "--help", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("script", sorted(BAD))
def test_a_lab_script_on_a_missing_run_is_one_line(script, tmp_path):
    line = one_line(lab(os.path.join(LAB, f"{script}.py"), *BAD[script], cwd=tmp_path))
    assert "nonexistent" in line or "invalid" in line, line


def test_chain_errors_groups_by_the_run_of_nines_a_number_ends_in(monkeypatch):
    """``lab/chain_errors.py``: a number's run is its trailing nines only (a 9 above a smaller
    digit does not count), and each run's share is over its own inputs."""
    monkeypatch.syspath_prepend(LAB)
    from chain_errors import by_nines

    a = torch.tensor([[1, 9, 9], [9, 8, 9], [9, 9, 9], [2, 9, 9], [1, 2, 3]])
    hits = torch.tensor([True, False, False, True, True])
    assert by_nines(a, hits) == {0: (1, 1.0), 1: (1, 0.0), 2: (2, 1.0), 3: (1, 0.0)}
