"""The common protocol: its recipes' budget and frames (``recipes/common-protocol*.yaml``), the
tables and plot of ``lab/common_protocol.py``; and ``lab/mix_bias.py``, with which the sweep's
ABC cells at 15 digits were taken apart."""

import glob
import math
import os
import subprocess
import sys

import pytest
import torch

from abcmini.bias_files import load_bias, save_bias
from abcmini.config import POOL_DIGITS
from abcmini.experiment import Cell, resolve
from abcmini.nn.lines import NEG_INF, LineBias
from abcmini.recipes import RECIPES, load_recipe
from abcmini.store import load_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join("results", "experiments", "common-protocol")
pytestmark = pytest.mark.integration  # lab scripts: the second tier


def test_the_sweeps_plot_draws_each_methods_median_ratio_and_none_below_one(script):
    """A line per method through its median of (longest length held at 99%) / training length;
    a seed that holds only shorter lengths than its training length sits at that ratio below 1×,
    one that holds nothing at ``NONE``; methods without records draw nothing."""
    cp = script("common_protocol")

    def cell(method, digits, accuracy):
        return {"task": "addition", "method": method, "digits": digits, "accuracy": accuracy}

    found = [
        cell("abc", 7, {"7": 1.0, "100": 1.0, "500": 0.995}),
        *(
            cell("coupling+varied", 15, a)
            for a in ({"15": 1.0, "30": 0.995, "45": 0.5}, {"15": 1.0, "30": 0.98}, {"15": 0.9})
        ),
        cell("coupling+varied", 7, {"7": 1.0, "10": 0.2}),
        cell("fire+varied", 30, {"30": 0.98}),
        cell("abacus+varied", 15, {"6": 1.0, "10": 0.95, "15": 0.9}),
    ]
    figure = cp.sweep_plot(found)
    lines = {line.get_label(): list(line.get_ydata()) for line in figure.axes[0].get_lines()}
    assert lines == {
        "abc": [500 / 7],
        "coupling": [1.0, 1.0],
        "fire": [cp.NONE],
        "abacus": [6 / 15],
    }
    assert cp.NONE < 6 / 30  # below every ratio a held length can give


def test_the_sweep_table_names_the_seeds_trained_on_a_gpu(script, capsys):
    """Sweep cells ran on this project's CPU, some on a GPU: a row says which seeds ran there."""
    cp = script("common_protocol")

    def cell(seed, **device):
        return {
            "task": "addition",
            "method": "coupling+varied",
            "digits": 30,
            "seed": seed,
            "accuracy": {"30": 1.0, "60": 0.1},
            "train_examples": 1_024_000,
            **device,
        }

    cp.sweep_table([cell(0), cell(2, device="NVIDIA H200")])
    cp.sweep_table([cell(0), cell(1)])
    gpu_row, cpu_row = [line for line in capsys.readouterr().out.splitlines() if "1–30" in line]
    assert "| 2 (seed 2 on NVIDIA H200) |" in gpu_row
    assert "| 2 | 30 (1.0×) / 30 (1.0×) |" in cpu_row


def test_the_recipe_table_shows_every_cell_its_sweeps_plan_run_or_not(script, capsys, monkeypatch):
    """The third table lays out the cells of its sweeps (``GRIDS``): a cell with fewer records
    than its sweeps' seeds says "k of n", one with none "not run"; the grid comes from the sweep
    files themselves."""
    cp = script("common_protocol")
    monkeypatch.chdir(ROOT)
    grid = cp.planned()
    assert grid[("common-protocol-authors", "nx1", "abacus+varied")] == {0, 1, 2, 3, 4}
    assert grid[("common-protocol", "addition", "coupling+varied")] == {0, 1, 2, 3, 4}
    assert ("common-protocol-tables", "successor", "fire+varied") not in grid  # FIRE has no table

    def run(seed):
        return {
            "root": "common-protocol-tables",
            "task": "successor",
            "method": "coupling+varied",
            "seed": seed,
            "shape": "1 layer",
            "accuracy": {"7": 1.0, "10": 0.5},
            "train_steps": 3000,
            "train_examples": 384_000,
        }

    cp.recipe_table([run(0), run(1), run(2)], grid)
    rows = {
        tuple(cell.strip(" `") for cell in line.split("|")[1:4]): line
        for line in capsys.readouterr().out.splitlines()[2:]
    }
    header = 5 + len(cp.RECIPE_LENGTHS) + 3
    assert all(line.count("|") == header + 1 for line in rows.values())
    assert "| 3 of 5 |" in rows[("common-protocol-tables", "successor", "coupling+varied")]
    assert "| not run |" in rows[("common-protocol-authors", "nx1", "abacus+varied")]
    assert ("common-protocol-authors", "successor", "random+varied") not in rows  # not planned


@pytest.mark.parametrize("digits", [15, 30])
def test_abc_in_the_sweep_is_tested_with_the_leading_zeros_it_trained_with(digits):
    """ABC at 15 digits once ran with ``--pad-width 15``: tested in frames with no leading zeros,
    which its training frames (``--abc-pad-width 18`` and wider) always had, it scored 0.02% at 15
    digits after 100% validation. The recipe's frames keep the 7-digit recipe's margins."""
    decoder = RECIPES["decoder"]
    recipe = load_recipe(os.path.join(ROOT, f"recipes/common-protocol-train{digits}.yaml"))
    abc = resolve(recipe, Cell("addition", "abc", 0))
    assert abc.run.train_digits == abc.source.train_digits == digits
    assert abc.test_pad_width - digits == decoder.pad_width - POOL_DIGITS > 0
    assert abc.run.pad_width - digits == decoder.abc_pad_width - POOL_DIGITS > 0
    assert (abc.run.min_steps, abc.run.steps) == (0, decoder.steps)  # ABC's own budget
    other = resolve(recipe, Cell("addition", "fire+varied", 0))
    assert other.run.pad_width == other.test_pad_width == digits


@pytest.mark.parametrize(
    "recipe, records",
    [
        ("common-protocol", "results/decoder/{task}/abc-s*/eval.json"),
        ("common-protocol-train15", f"{OUT}/{{task}}-abc-train15-s*.json"),
        ("common-protocol-train30", f"{OUT}/{{task}}-abc-train30-s*.json"),
    ],
)
def test_the_budget_is_abcs_dearest_seed_and_the_cap_twice_it(recipe, records):
    """A method's floor is the steps of 128 examples ABC's dearest seed of the task spent (source
    and retraining), its cap twice that and at least 8,000: one schedule, never restarted."""
    recipe = load_recipe(os.path.join(ROOT, f"recipes/{recipe}.yaml"))
    for task in ("successor", "addition", "nx1"):
        found = [
            load_json(p, "record") for p in glob.glob(os.path.join(ROOT, records.format(task=task)))
        ]
        if not found:
            continue
        spent = [(r["train_examples"] + r["interpolation_examples"]) / 128 for r in found]
        run = resolve(recipe, Cell(task, "coupling+varied", 0)).run
        assert run.min_steps == math.ceil(max(spent)), task
        assert run.steps == max(8000, 2 * run.min_steps), task


def test_mix_bias_takes_the_named_attentions_and_heads_from_the_other_file(tmp_path):
    """``lab/mix_bias.py``: the bias it writes is the base's, with the named attention, or one
    head of it, materialized exactly as the other file's; files of different head counts, or an
    output that exists, are one line of error, exit 2, and leave the files as they were."""

    def bias(seed: int, heads: int = 3) -> dict:
        values = torch.randn(2, heads, 5, generator=torch.Generator().manual_seed(seed))
        values[values < 0] = NEG_INF  # about half the lines open
        table = LineBias((1, 0), (-3, 0), values, right=False).state()
        return {
            "task": "addition",
            "heads": heads,
            "pad_width": 20,
            "bias": {"self": table, "cross": {**table, "right": True}},
        }

    for name, payload in (("a.pt", bias(0)), ("b.pt", bias(1)), ("wide.pt", bias(2, heads=4))):
        save_bias(str(tmp_path / name), payload)
    script = [
        sys.executable,
        os.path.join(ROOT, "lab", "mix_bias.py"),
        *(str(tmp_path / f) for f in ("a.pt", "b.pt")),
    ]
    made = lambda path, kind: LineBias.from_state(load_bias(str(path))["bias"][kind])(9, 9)  # noqa: E731
    for out, parts in (("cross.pt", ["cross"]), ("head.pt", ["self:1"])):
        done = subprocess.run(
            script + [str(tmp_path / out), *parts], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    a, b = (
        {kind: made(tmp_path / f, kind) for kind in ("self", "cross")} for f in ("a.pt", "b.pt")
    )
    assert torch.equal(made(tmp_path / "cross.pt", "cross"), b["cross"])
    assert torch.equal(made(tmp_path / "cross.pt", "self"), a["self"])
    head = made(tmp_path / "head.pt", "self")
    assert torch.equal(head[1], b["self"][1]) and torch.equal(head[[0, 2]], a["self"][[0, 2]])
    assert not torch.equal(a["self"][1], b["self"][1])  # the test would see a head not taken
    other = [sys.executable, script[1], str(tmp_path / "a.pt"), str(tmp_path / "wide.pt")]
    for args, message in (
        (other + [str(tmp_path / "new.pt"), "cross"], "differ in heads"),
        (script + [str(tmp_path / "new.pt"), "cross:3"], "below 3"),
        (script + [str(tmp_path / "cross.pt"), "self"], "exists"),
    ):
        refused = subprocess.run(args, capture_output=True, text=True)
        assert refused.returncode == 2 and message in refused.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "new.pt").exists()
    assert torch.equal(made(tmp_path / "cross.pt", "self"), a["self"])  # not overwritten
