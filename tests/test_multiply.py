"""N×M multiplication: the scratchpad of partial sums against Python integers, its test sets
(equal and unequal operand lengths, seeded), ABC's lines on the input numbers (on the right
digits at any width, recovered by calibration), and cells through the command line."""

import json
import os
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from abcmini.bias_files import save_bias
from abcmini.experiment import Cell, resolve
from abcmini.nn.block_lines import BlockCalibrated, BlockLines, output_coordinates
from abcmini.nn.calibrate import calibrate_blocks
from abcmini.nn.lines import NEG_INF, segments_of
from abcmini.nn.scaffolds import layer_biases
from abcmini.pipeline import picture_examples
from abcmini.recipes import MULTIADD
from abcmini.store import load_checkpoint
from abcmini.tasks import (
    Pool,
    detokenize,
    digit_mask,
    extrapolation_operands,
    format_task,
    sequence_lengths,
    training_operands,
)
from abcmini.train import load_model
from cli import app


def value(digit_row) -> int:
    return int("".join(map(str, digit_row.tolist())))


def test_the_worked_example_and_random_products_are_partial_sums():
    ex = format_task("multiply", torch.tensor([[1, 2]]), torch.tensor([[3, 4]]), 2)
    assert detokenize(ex.src[0]) == "$12*34&" and detokenize(ex.tgt_out[0]) == "840+8040+&"
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randint(10, (40, 6), generator=generator) for _ in range(2))
    ex = format_task("multiply", a, b, 9)
    assert (ex.src.shape[1], ex.tgt_in.shape[1]) == sequence_lengths("multiply", 9)
    for row in range(40):
        x, y = value(a[row]), value(b[row])
        blocks = detokenize(ex.tgt_out[row])[:-2].split("+")
        assert len(blocks) == 9 and [len(block) for block in blocks] == list(range(10, 19))
        assert [int(block[::-1]) for block in blocks] == [x * (y % 10 ** (j + 1)) for j in range(9)]
        assert int(blocks[-1][::-1]) == x * y


@pytest.mark.integration  # a lab script: the second tier
def test_row_carries_write_the_scratchpads_digits_and_add_the_carry_of_the_digits_below(script):
    """``lab/carry_errors.py``: its digits are the formatted target's digit rows, in order,
    and the carry into digit ``i`` of ``s_j`` is ``(s_{j−1} mod 10^i + (a mod 10^(i−j))·b_j·10^j) // 10^i``."""
    carry_errors = script("carry_errors")
    a, b = extrapolation_operands("multiply", 6, 0)
    a, b, frame = a[:30], b[:30], 8
    carries, digits = carry_errors.row_carries(a, b, frame)
    ex = format_task("multiply", a, b, frame)
    block, _, marker = output_coordinates(ex.tgt_out.shape[1], frame, keys=False, growing=True)
    rows = (block < frame) & ~marker
    assert torch.equal(digits, ex.tgt_out[:, rows])
    for n in range(30):
        x, y, previous, expected = value(a[n]), value(b[n]), 0, []
        for j in range(frame):
            b_j = y // 10**j % 10
            expected += [
                (previous % 10**i + x % 10 ** max(i - j, 0) * b_j * 10**j) // 10**i
                for i in range(frame + j + 1)
            ]
            previous += x * b_j * 10**j
        assert carries[n].tolist() == expected
    assert carries.max() >= 5


def test_training_draws_both_operands_from_the_pool_or_up_to_the_training_length():
    pool = Pool.make(0)
    a, b = training_operands("multiply", pool.train, 64, torch.Generator().manual_seed(1))
    train = set(pool.train.tolist())
    assert a.shape == b.shape == (64, 7) and {value(x) for x in torch.cat([a, b])} <= train
    a, b = training_operands("multiply", None, 64, torch.Generator().manual_seed(1), digits=4)
    assert a.shape == b.shape == (64, 4) and len({value(x) for x in b}) > 20


def test_unequal_training_pairs_hold_one_operand_of_the_batch_length_either_way():
    a, b = training_operands(
        "multiply", None, 400, torch.Generator().manual_seed(1), digits=4, length=3, unequal=True
    )
    la, lb = ((4 - (x.cumsum(-1) == 0).sum(-1)) for x in (a, b))
    assert (torch.maximum(la, lb) == 3).all() and (la < 3).any() and (lb < 3).any()


def test_a_test_set_holds_l_by_l_products_and_products_of_unequal_lengths_either_way():
    a, b = extrapolation_operands("multiply", 14, seed=2)
    assert a.shape == b.shape == (10_000, 14)
    length = lambda x: len(str(value(x)))  # noqa: E731
    la, lb = torch.tensor([length(x) for x in a]), torch.tensor([length(x) for x in b])
    assert ((la == 14) & (lb == 14))[:5000].all()
    unequal = (la != lb)[5000:]
    assert unequal.all() and ((la < 14)[5000:].sum() > 2000) and ((lb < 14)[5000:].sum() > 2000)
    assert set(torch.minimum(la, lb)[5000:].tolist()) == set(range(1, 14))
    again, _ = extrapolation_operands("multiply", 14, seed=2)
    assert torch.equal(a, again) and not torch.equal(
        a, extrapolation_operands("multiply", 14, seed=3)[0]
    )


def reads(width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[q]`` the input column of ``a_{i−j}`` (−1 where block ``j``'s row ``i`` has none) and of
    ``b_j`` (−1 in the end row), for every decoder row of ``$a*b&`` at pad ``width``, counted from
    the format itself."""
    a_col, b_col = [], []
    for j in range(width):  # block j: width + j + 1 digits, then its separator
        for i in range(width + j + 2):
            a_col.append(1 + width - 1 - (i - j) if 0 <= i - j < width else -1)
            b_col.append(width + 2 + width - 1 - j)
    a_col.append(-1)  # the end: block `width`, where b has no digit left
    b_col.append(-1)
    return torch.tensor(a_col), torch.tensor(b_col)


def product_lines(l_first: int = -2) -> torch.Tensor:
    """Head 0: the line to a at ℓ 0; head 1: the line to b at ℓ 0; head 2: the end marker."""
    values = torch.full((3, 3, 5), NEG_INF)
    values[0, 0, -l_first] = values[1, 1, -l_first] = values[2, 2, -1] = 0.0
    return values


@pytest.mark.parametrize("width", [1, 3, 6])
def test_product_lines_read_a_at_the_blocks_shift_and_the_digit_of_b_the_block_names(width):
    n_src, n_q = sequence_lengths("multiply", width)
    lines = BlockCalibrated(
        BlockLines(torch.full((3, 1, 2), NEG_INF), 0, 0, cross=False),
        BlockLines(product_lines(), 0, -2, cross=True, products=True),
    )
    src = format_task("multiply", torch.tensor([[2]]), torch.tensor([[4]]), width).src[0]
    _, bias = layer_biases(lines, n_q, n_src, segments_of(digit_mask(src)))[0]
    a_col, b_col = reads(width)
    opened = torch.isfinite(bias)
    has_a = a_col >= 0
    assert (opened[0].sum(-1)[has_a] == 1).all() and torch.equal(
        opened[0].float().argmax(-1)[has_a], a_col[has_a]
    )
    assert (opened[0, ~has_a].sum(-1) == 1).all() and (
        opened[0, ~has_a, 0]
    ).all()  # no a digit: the no-NaN column
    has_b = b_col >= 0  # the end row: b has no digit left, only the no-NaN column
    assert (opened[1].sum(-1) == 1).all() and torch.equal(
        opened[1].float().argmax(-1)[has_b], b_col[has_b]
    )
    assert opened[1, ~has_b, 0].all() and has_b[:-1].all()
    assert (opened[2].sum(-1) == 1).all() and (opened[2, :, -1]).all()


@pytest.mark.parametrize("width", [3, 6])
def test_every_separator_row_sees_a_set_of_lines_no_other_row_of_its_block_sees(width):
    """A row learns where its block ends from the lines that fall off there: with the lines to
    ``a_{i−j}``, ``a_{i−j−1}`` and to the previous block's digits ``i`` and ``i − 1``, the
    separator row of every block, block 0 too, has a pattern of empty lines of its own, and with
    the line to ``b_j`` the end row, after the last block, one no other row has."""
    n_src, n_q = sequence_lengths("multiply", width)
    own = torch.full((2, 2, 3), NEG_INF)  # self: head 0 the line (−1, 0), head 1 (−1, −1)
    own[0, 0, 1] = own[1, 0, 0] = 0.0
    cross = torch.full(
        (3, 3, 3), NEG_INF
    )  # cross: head 0 the line (a, 0), head 1 (a, −1), head 2 (b, 0)
    cross[0, 0, 1] = cross[1, 0, 0] = cross[2, 1, 1] = 0.0
    lines = BlockCalibrated(
        BlockLines(own, -1, -1, cross=False), BlockLines(cross, 0, -1, cross=True, products=True)
    )
    src = format_task("multiply", torch.tensor([[1, 2]]), torch.tensor([[3, 4]]), width).src[0]
    self_bias, cross_bias = layer_biases(lines, n_q, n_src, segments_of(digit_mask(src)))[0]
    empty = torch.cat(
        [torch.isfinite(self_bias[:, :, 0]), torch.isfinite(cross_bias[:, :, 0])]
    )  # the no-NaN column
    start = 0
    for j in range(width):
        rows = empty[
            :, start : start + width + j + 2
        ].T.tolist()  # block j: width + j + 1 digits, separator
        assert rows[-1] not in rows[:-1], f"block {j}"
        start += width + j + 2
    assert start == n_q - 1 and empty[:, -1].tolist() not in empty[:, :-1].T.tolist()  # the end row


def test_calibration_recovers_the_product_lines_the_attention_follows():
    width = 5
    n_src, n_q = sequence_lengths("multiply", width)
    a_col, b_col = reads(width)
    attention = torch.full((2, n_q, n_src), 0.1 / n_src)
    rows = torch.arange(n_q)
    attention[0, rows[a_col >= 0], a_col[a_col >= 0]] += 0.9
    attention[0, rows[a_col < 0], n_src - 1] += 0.9  # rows without a digit product park on the end
    attention[1, rows, b_col] += 0.9
    table = calibrate_blocks(
        attention,
        width,
        kappa=2.5,
        cross=True,
        min_support=0.5,
        kappa_markers=0.0,
        products=True,
        growing=True,
    )
    open_lines = {(label, head, line) for label, head, kept in table.lines() for line, _ in kept}
    assert {("number a", 0, 0), ("number b", 1, 0)} <= open_lines
    assert not {(label, head) for label, head, line in open_lines if line != "marker"} - {
        ("number a", 0),
        ("number b", 1),
    }


def block_lines_cells(
    tmp_path, task: str, width: int, cross: torch.Tensor, rules: str, label: str
) -> dict[str, str]:
    """``lab/block_lines.py`` on a one-layer bias file holding ``cross`` as ``Ā``: head 0's
    row ``label`` of the cross-attention, each cell (value and mark) by its ``ℓ``."""
    path = tmp_path / f"{task}-{rules}.pt"
    n_q = cross.shape[-2]
    calibration = {
        "kappa_self": 0.87,
        "kappa_cross": 2.5,
        "min_support": 0.5,
        "rules": rules,
        "layers": [0],
    }
    save_bias(
        str(path),
        {
            "task": task,
            "pad_width": width,
            "heads": cross.shape[0],
            "bias": {  # nothing open: the script reads the attention and calibrates it itself
                "blocks": {
                    kind: {
                        "values": torch.full((cross.shape[0], 1, 1), NEG_INF),
                        "d_first": 0,
                        "l_first": 0,
                        "cross": kind == "cross",
                    }
                    for kind in ("self", "cross")
                }
            },
            "calibration": calibration,
            "attention": {
                "self": torch.full((1, cross.shape[0], n_q, n_q), 1.0 / n_q).tril(),
                "cross": cross[None],
            },
        },
    )
    printed = subprocess.run(
        [sys.executable, os.path.join("lab", "block_lines.py"), str(path), "cross"],
        cwd=os.path.dirname(os.path.dirname(__file__)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = printed.splitlines()
    ells = next(line for line in lines if line.strip().startswith("ℓ:")).split(":")[1].split()[:-1]
    row = next(line for line in lines if line.startswith(f"  h0 {label:>2}:"))
    return {ell: row[9 + 7 * k : 16 + 7 * k] for k, ell in enumerate(ells)}


@pytest.mark.integration  # a lab script: the second tier
def test_the_carrys_line_on_a_is_kept_alone_and_a_lone_lag_line_of_multiadd_is_not(tmp_path):
    """A head reading a only at the carry's digit ``a_{i−j−1}`` (ℓ −1) keeps that line under every
    rule (multiply reads two digits of a, rule band does not cut its product lines), where a
    multiadd head reading only the operand digit below its own loses it to rule band (``b`` in
    lab/block_lines.py: the dropoff keeps it, the band cuts it)."""
    width = 5
    n_src, n_q = sequence_lengths("multiply", width)
    a_col, b_col = reads(width)
    rows = torch.arange(n_q)
    carry = (a_col >= 0) & (a_col < width)  # a_{i−j−1} is a digit of a (columns 1 … width)
    cross = torch.full((2, n_q, n_src), 0.1 / n_src)
    cross[0, rows[carry], a_col[carry] + 1] += 0.9
    cross[0, rows[~carry], n_src - 1] += 0.9
    cross[1, rows, b_col] += 0.9
    cells = block_lines_cells(tmp_path, "multiply", width, cross, "all", "a")
    assert cells["-1"].endswith("*") and not cells["0"].endswith(("*", "b"))

    width, blocks = 10, 5  # enough lines that one alone stands κ σ above their mean
    n_src, n_q = sequence_lengths("multiadd", width, operands=blocks)
    lines = torch.full((1, 3, 4), NEG_INF)  # d from −1, ℓ from −2, marker last
    lines[0, 1, 1] = 0.0  # (0, −1): the operand's digit below the row's own
    zeros = torch.zeros(1, blocks, width, dtype=torch.long)
    layout = segments_of(digit_mask(format_task("multiadd", zeros, None, width).src[0]))
    attention = torch.softmax(BlockLines(lines, -1, -2, cross=True)(n_q, n_src, layout), dim=-1)
    cells = block_lines_cells(tmp_path, "multiadd", width, attention, "all", "+0")
    assert cells["-1"].endswith("b") and not cells["0"].endswith(("*", "b"))
    assert block_lines_cells(tmp_path, "multiadd", width, attention, "all,-band", "+0")[
        "-1"
    ].endswith("*")


def test_a_picture_leaves_out_a_length_whose_one_pass_would_not_fit_a_test_batch():
    """The attention pictures a tracked run logs: multiply's 100-digit scratchpad (15,150 rows,
    about 15 GiB for one pass with weights) is left out; its 7 and 20 digits, and Successor's
    100, are drawn."""
    experiment = resolve(MULTIADD, Cell.of("multiply", "vanilla", 0))
    assert sorted(picture_examples(experiment, experiment.run, "cpu")) == [7, 20]
    successor = resolve(MULTIADD, Cell.of("successor", "vanilla", 0))
    assert sorted(picture_examples(successor, successor.run, "cpu")) == [7, 20, 100]


@pytest.mark.integration
def test_an_abc_cell_on_multiply_trains_calibrates_product_lines_and_scores_the_product(empty_cwd):
    (empty_cwd / "small.yaml").write_text(
        "base: long\nname: small\npreset: tiny\npad_width: 7\nabc_pad_width: 7\n"
        "abc_frame_spread: 1\nsteps: 10\neval_every: 5\nvalid_size: 20\nabc_valid_size: 20\n"
        "calibration: {samples: 20, min_accuracy: 0}\n"
    )
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--recipe",
            "small.yaml",
            "--task",
            "multiply",
            "--method",
            "abc",
            "--lengths",
            "2,4",
            "--no-wandb",
            "--out",
            "cell",
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads((empty_cwd / "cell" / "eval.json").read_text())
    assert set(record["final_accuracy"]) == {"2", "4"} and "operands" not in record
    _, model = load_model(load_checkpoint(str(empty_cwd / "cell")))
    assert isinstance(model.scaffold, BlockCalibrated) and model.scaffold.cross_attention.products
    assert any(" number " in line for line in record["lines"])


@pytest.mark.integration
def test_a_vanilla_cell_on_multiply_trains_and_scores_the_product_alone(empty_cwd):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--recipe",
            "quick",
            "--task",
            "multiply",
            "--method",
            "vanilla",
            "--preset",
            "tiny",
            "--pad-width",
            "4",
            "--train-digits",
            "3",
            "--steps",
            "3",
            "--lengths",
            "2,4",
            "--no-wandb",
            "--out",
            "cell",
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads((empty_cwd / "cell" / "eval.json").read_text())
    assert set(record["final_accuracy"]) == {"2", "4"} and "operands" not in record
    assert all(record["final_accuracy"][n] >= record["accuracy"][n] for n in ("2", "4"))
