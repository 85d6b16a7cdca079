"""A docs page's table that a script prints from committed records is that script's output."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.integration  # lab scripts: the second tier


@pytest.mark.parametrize(
    "script, page, marker",
    [
        ("ablation.py", "recipe.md", "ablation"),  # Algorithm 1 and each calibration rule taken out
        (
            "same_digit.py",
            "recipe.md",
            "same-digit",
        ),  # rule same_digit on the recipes' Addition cells
        (
            "common_protocol.py",
            "todays-methods.md",
            "common-protocol",
        ),  # today's methods with ABC's budget, the length sweep
    ],
)
def test_a_scripted_table_is_its_records(script, page, marker):
    printed = subprocess.run(
        [sys.executable, os.path.join("lab", script), "table"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    assert printed.returncode == 0, printed.stderr
    with open(os.path.join(ROOT, "docs", page)) as f:
        text = f.read()
    start = text.index(f"<!-- {marker} -->\n") + len(f"<!-- {marker} -->\n")
    assert text[start : text.index(f"<!-- /{marker} -->")] == printed.stdout
