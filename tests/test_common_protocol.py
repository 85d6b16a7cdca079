"""``lab/common_protocol.py``: its budget (which runs have converged and which go on with the
cap doubled, read from the validation history in a run's checkpoint and its test at its longest
training length), the sweep's frames and plot; and ``lab/mix_bias.py``, with which the
sweep's ABC cells at 15 digits were taken apart."""

import os
import subprocess
import sys

import pytest
import torch

from abcmini.bias_files import load_bias, save_bias
from abcmini.nn.biases import NEG_INF, LineBias
from abcmini.store import save_checkpoint, save_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.integration  # lab scripts: the second tier


@pytest.mark.parametrize(
    "validation, longest, done",
    [
        ([0.5, 0.95, 1.0, 1.0], 0.99, True),  # a plateau at the top
        ([0.5, 0.95, 1.0, 0.99], 0.99, True),  # a dip within SPIKE of the best
        (
            [0.5, 0.9, 1.0, 0.908],
            0.99,
            False,
        ),  # nx1-abacus+varied-uniform-s2 at 11,500 steps: a spike in its last steps
        (
            [0.3, 0.58, 0.59, 0.74],
            0.5,
            False,
        ),  # still on its loss plateau: below PLATEAU at the cap
        (
            [0.5, 0.9, 0.964, 0.964],
            0.538,
            False,
        ),  # addition-fire+varied-train15-s0 at 18,000: 53.8% at 15 digits
    ],
)
def test_a_run_goes_on_below_the_plateau_after_a_spike_or_below_it_at_its_longest_length(
    script, tmp_path, validation, longest, done
):
    history = [{"step": 250 * (i + 1), "valid_acc": v} for i, v in enumerate(validation)]
    save_checkpoint(
        str(tmp_path), {"config": {}, "model": {"weight": torch.zeros(1)}, "history": history}
    )
    save_json(str(tmp_path / "eval.json"), {"accuracy": {"6": 1.0, "15": longest}})
    assert script("common_protocol").converged(str(tmp_path), 15) is done


@pytest.mark.parametrize("steps, doublings", [(None, 0), (19500, 0), (39000, 1), (78000, 2)])
def test_a_run_stopped_under_a_doubled_cap_goes_on_under_that_cap(
    script, tmp_path, steps, doublings
):
    """addition-fire+varied-uniform-s2 stopped at step 26,000 of its doubled cap of 39,000: resumed
    from the first cap (19,500) it ended there, 13,000 steps short of its budget."""
    if steps is not None:
        history = [{"step": 26000, "valid_acc": 1.0}]
        state = {
            "config": {"steps": steps},
            "model": {"weight": torch.zeros(1)},
            "history": history,
        }
        save_checkpoint(str(tmp_path), state)
    assert script("common_protocol").reached(str(tmp_path), 19500) == doublings


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


@pytest.mark.parametrize("digits", [15, 30])
def test_abc_in_the_sweep_is_tested_with_the_leading_zeros_it_trained_with(script, digits):
    """ABC at 15 digits once ran with ``--pad-width 15``: tested in frames with no leading zeros,
    which its training frames (``--abc-pad-width 18`` and wider) always had, it scored 0.02% at 15
    digits after 100% validation. The frames keep the 7-digit recipe's margins at every length."""
    cp = script("common_protocol")
    recipe = cp.RECIPES["decoder"]
    args = cp.sized("abc", digits)
    value = {
        key: int(args[args.index(key) + 1])
        for key in ("--train-digits", "--pad-width", "--abc-pad-width")
    }
    assert value["--train-digits"] == digits
    assert value["--pad-width"] - digits == recipe.pad_width - cp.POOL > 0
    assert value["--abc-pad-width"] - digits == recipe.abc_pad_width - cp.POOL > 0
    assert cp.sized("abc", cp.POOL) == []  # at 7: the decoder recipe's own cell


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
