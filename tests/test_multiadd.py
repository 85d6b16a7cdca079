"""Multi-operand addition: the running-sum scratchpad, its training and test operands, and ABC's
lines counted in blocks (materialized at any width and block count, recovered by calibration)."""

import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from abcmini import pipeline
from abcmini.bias_files import load_bias, save_bias
from abcmini.config import RunConfig
from abcmini.evaluate import extrapolation_hits, final_accuracy
from abcmini.limits import EVAL_BUDGET, batch_for, step_bytes
from abcmini.nn.block_lines import (
    BlockCalibrated,
    BlockLines,
    input_coordinates,
    output_coordinates,
)
from abcmini.nn.calibrate import block_band, block_procedure, calibrate_blocks, rank_own
from abcmini.nn.lines import NEG_INF, segments_of
from abcmini.store import load_checkpoint
from abcmini.tasks import (
    OPERANDS,
    PLUS,
    SUM_EXTRA,
    Pool,
    detokenize,
    digit_mask,
    extrapolation_operands,
    format_task,
    operand_count,
    sequence_lengths,
    training_operands,
)
from abcmini.train import Trainer, load_model
from cli import app


def value(digit_row) -> int:
    return int("".join(map(str, digit_row.tolist())))


def blocks_of(example, row=0) -> list[int]:
    """The running sums a target holds, as numbers."""
    return [int(block[::-1]) for block in detokenize(example.tgt_out[row])[:-1].split("+")]


def test_the_worked_example_and_random_sums_are_running_sums():
    ex = format_task("multiadd", torch.tensor([[[1, 2], [3, 4], [0, 5]]]), None, 4)
    assert detokenize(ex.src[0]) == "$0012+0034+0005&"
    assert (
        detokenize(ex.tgt_out[0]) == "210000+640000+150000&"
        and detokenize(ex.tgt_in[0]) == "$210000+640000+150000"
    )
    a = torch.randint(10, (50, 7, 9), generator=torch.Generator().manual_seed(0))
    ex = format_task("multiadd", a, None, 11)
    assert (ex.src.shape[1], ex.tgt_in.shape[1]) == sequence_lengths("multiadd", 11, operands=7)
    for row in range(50):
        numbers = [value(x) for x in a[row]]
        assert blocks_of(ex, row) == [sum(numbers[: m + 1]) for m in range(7)]
        assert len(detokenize(ex.tgt_out[row]).split("+")[0]) == 11 + SUM_EXTRA


def test_training_batches_add_two_to_five_pool_numbers_the_count_varying_between_batches():
    pool = Pool.make(0)
    generator, counts = torch.Generator().manual_seed(1), set()
    train = set(pool.train.tolist())
    for _ in range(40):
        a, b = training_operands("multiadd", pool.train, 16, generator)
        assert b is None and a.shape[0] == 16 and a.shape[2] == 7
        counts.add(a.shape[1])
        assert {value(x) for x in a.flatten(0, 1)} <= train
    assert counts == set(range(2, OPERANDS + 1))
    assert training_operands("multiadd", pool.train, 4, generator, count=OPERANDS)[0].shape == (
        4,
        OPERANDS,
        7,
    )  # calibration's
    a, _ = training_operands("multiadd", None, 16, generator, digits=12)
    assert a.shape[2] == 12 and 2 <= a.shape[1] <= OPERANDS


def test_unequal_operands_hold_one_of_the_batch_length_and_shorter_ones_beside_it():
    """``--operand-lengths unequal``: in each sum one operand, anywhere, has the batch's length
    and the others 1 … that many digits, zero-padded, as Coupling's multi-operand data."""
    generator = torch.Generator().manual_seed(3)
    a, _ = training_operands(
        "multiadd", None, 400, generator, digits=7, length=5, unequal=True, count=4
    )
    lengths = 7 - (a.cumsum(-1) == 0).sum(-1)  # a number's digits after its leading zeros
    assert (
        a.shape == (400, 4, 7) and (lengths <= 5).all() and (lengths.max(dim=1).values == 5).all()
    )
    assert (lengths < 5).float().mean() > 0.6 and set(lengths.argmax(dim=1).tolist()) == {
        0,
        1,
        2,
        3,
    }
    equal, _ = training_operands("multiadd", None, 400, generator, digits=7, length=5, count=4)
    assert ((7 - (equal.cumsum(-1) == 0).sum(-1)) == 5).all()


def test_validation_holds_every_operand_count_a_training_batch_can_draw(tmp_path):
    """A batch shares one count, so one validation draw would score one count only: a run could
    stop at 99.9% on three operands while five fail."""
    cfg = RunConfig(task="multiadd", scheme="nope", preset="tiny", pad_width=8, valid_size=41)
    sets = Trainer(cfg, str(tmp_path)).valid_sets
    assert [s.src.shape[0] for s in sets] == [11, 10, 10, 10]
    assert [len(detokenize(s.tgt_out[0]).split("+")) for s in sets] == list(range(2, OPERANDS + 1))
    assert len(Trainer(replace(cfg, task="addition"), str(tmp_path)).valid_sets) == 1


def test_min_operands_1_trains_and_validates_single_operands_and_2_keeps_the_batches(tmp_path):
    """``--min-operands 1``: batches of one operand too (fewer than any the paper's protocol
    draws); the default draws exactly the batches drawn before the option existed."""
    cfg = RunConfig(
        task="multiadd", scheme="nope", preset="tiny", pad_width=8, valid_size=50, batch_size=8
    )
    one = Trainer(replace(cfg, min_operands=1), str(tmp_path))
    assert [len(detokenize(s.tgt_out[0]).split("+")) for s in one.valid_sets] == [1, 2, 3, 4, 5]
    assert {one.batch().src.shape[1] // 9 for _ in range(60)} == {1, 2, 3, 4, 5}  # $a_1+…&
    single = next(b for b in iter(one.batch, None) if b.src.shape[1] == 10)
    assert "+" not in detokenize(single.src[0]) + detokenize(single.tgt_out[0])
    drawn = pipeline.record(None, replace(cfg, min_operands=1), [], 0, {})
    assert drawn["min_operands"] == 1 and drawn["operand_order"] == "msd"  # the report's key
    refused = CliRunner().invoke(
        app, ["train", "--task", "addition", "--min-operands", "1", "--dry-run"]
    )
    assert refused.exit_code == 2 and "--min-operands is multiadd's" in refused.output
    plain, generator = Trainer(cfg, str(tmp_path)), torch.Generator().manual_seed(cfg.seed)
    for _ in range(5):
        a, _ = training_operands("multiadd", plain.train_numbers, cfg.batch_size, generator)
        assert torch.equal(plain.batch().src, format_task("multiadd", a, None, 8).src)


def test_test_operands_grow_with_the_length_at_the_training_ratio():
    assert [operand_count(n) for n in (7, 14, 35, 70)] == [5, 10, 25, 50]
    a, b = extrapolation_operands("multiadd", 14, seed=3)
    assert b is None and a.shape == (10_000, 10, 14)
    assert ((a[:, :, 0] > 0).sum(dim=1) >= 1).all()  # at least one operand of exactly 14 digits
    lengths = 14 - (a.cumsum(dim=2) == 0).sum(dim=2)
    assert len(lengths.unique()) > 10  # unequal operands
    assert torch.equal(a, extrapolation_operands("multiadd", 14, seed=3)[0])
    assert not torch.equal(a, extrapolation_operands("multiadd", 14, seed=4)[0])


def test_block_coordinates_of_the_input_and_the_decoder():
    block, significance, marker = input_coordinates(9, 2)  # $ 1 2 3 + 4 5 6 &
    assert block.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2] and significance.tolist() == [
        3,
        2,
        1,
        0,
    ] * 2 + [3]
    assert marker.tolist() == [True, False, False, False] * 2 + [True]
    block, significance, marker = output_coordinates(6, 2, keys=False)  # rows emit d d + d d &
    assert block.tolist() == [0, 0, 0, 1, 1, 1] and significance.tolist() == [0, 1, 2] * 2
    block, significance, marker = output_coordinates(6, 2, keys=True)  # columns hold $ d d + d d
    assert block.tolist() == [-1, 0, 0, 0, 1, 1] and significance.tolist() == [2, 0, 1, 2, 0, 1]
    assert marker.tolist() == [True, False, False, True, False, False]


def block_layout(width: int, blocks: int):
    """The layout of a multiadd input of ``blocks`` operands of ``width`` digits."""
    ex = format_task("multiadd", torch.zeros(1, blocks, width, dtype=torch.long), None, width)
    return segments_of(digit_mask(ex.src[0]))


def one_line(d: int, ell, cross: bool) -> BlockLines:
    """A one-head table with the single line ``(d, ℓ)`` open (``ell`` "marker": the block's marker)."""
    values = torch.full((1, 5, 8), NEG_INF)  # d from −2, ℓ from −3, marker last
    values[0, d + 2, 7 if ell == "marker" else ell + 3] = 0.0
    return BlockLines(values, -2, -3, cross)


def test_a_block_line_stays_on_its_digit_at_any_width_and_block_count():
    for width, blocks in ((7, 5), (14, 10), (30, 3)):
        n_src, n_q = blocks * (width + 1) + 1, blocks * (width + SUM_EXTRA + 1)
        a = torch.randint(10, (1, blocks, width), generator=torch.Generator().manual_seed(width))
        ex = format_task("multiadd", a, None, width)
        assert ex.src.shape[1] == n_src and ex.tgt_in.shape[1] == n_q
        same = one_line(0, 0, cross=True)(n_q, n_src, block_layout(width, blocks))[0]
        for i in range(n_q):
            block, digit = divmod(i, width + SUM_EXTRA + 1)
            opened = (same[i] == 0).nonzero().flatten().tolist()
            if (
                digit < width
            ):  # the row emitting digit `digit` of block `block` reads that digit of operand `block`
                assert opened == [block * (width + 1) + width - digit]
            else:  # beyond the operand's digits (and the separator row): nothing, so the start marker
                assert opened == [0]
        previous = one_line(-1, 0, cross=False)(n_q, n_q, block_layout(width, blocks))[0]
        row = (
            2 * (width + SUM_EXTRA + 1) + 3
        )  # block 2, digit 3: reads digit 3 of block 1 (column one step behind)
        assert (previous[row] == 0).nonzero().flatten().tolist() == [
            (width + SUM_EXTRA + 1) + 3 + 1
        ]
        marker = one_line(1, "marker", cross=True)(n_q, n_src, block_layout(width, blocks))[0]
        assert (marker[0] == 0).nonzero().flatten().tolist() == [
            width + 1
        ]  # the + before operand 1
        assert (marker[-1] == 0).nonzero().flatten().tolist() == [
            n_src - 1
        ]  # the last block's next: the end marker


def test_calibration_recovers_the_lines_the_attention_follows_in_any_frame():
    for width, blocks in ((7, 5), (10, 4)):
        n_src, n_q = blocks * (width + 1) + 1, blocks * (width + SUM_EXTRA + 1)
        truth = one_line(0, 0, cross=True)(
            n_q, n_src, block_layout(width, blocks)
        )  # [1 q k]: rows on their digit, the rest on column 0
        attention = torch.softmax(truth, dim=-1)
        table = calibrate_blocks(attention, blocks, kappa=2.5, cross=True, min_support=0.5)
        assert list(table.lines()) == [("block +0", 0, [(0, 0.0)])]
        assert torch.equal(table(n_q, n_src, block_layout(width, blocks))[0], truth[0])


SMALL = (
    "base: long\nname: small\npreset: tiny\npad_width: 8\nabc_pad_width: 8\nabc_frame_spread: 2\nsteps: 40\neval_every: 20\n"
    "valid_size: 50\nabc_valid_size: 50\ncalibration: {samples: 50, min_accuracy: 0}\n"
)  # small and real, not converged


@pytest.mark.integration
def test_an_abc_cell_on_multiadd_trains_calibrates_block_lines_and_scores_the_final_number(
    empty_cwd,
):
    """Source, calibration, retraining and test through the command line; the record's final-number
    accuracy is what greedy decoding of its test set gives."""
    (empty_cwd / "small.yaml").write_text(SMALL)
    out = empty_cwd / "cell"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--recipe",
            "small.yaml",
            "--task",
            "multiadd",
            "--method",
            "abc",
            "--seed",
            "0",
            "--lengths",
            "3,7",
            "--no-wandb",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "eval.json").read_text())
    assert set(record["accuracy"]) == set(record["final_accuracy"]) == {"3", "7"}
    assert record["operands"] == {"3": 3, "7": 5}
    assert all(record["final_accuracy"][n] >= record["accuracy"][n] for n in ("3", "7"))
    assert record["lines"] and all(" block " in line for line in record["lines"])
    cfg, model = load_model(load_checkpoint(str(out)))
    assert isinstance(model.scaffold, BlockCalibrated)
    per_head = re.search(
        r"cross-attention: open lines per head \[([\d, ]*)\]", result.output
    ).group(1)
    assert len(per_head.split(",")) == model.cfg.heads
    (frame,) = pipeline.test_frames(pipeline.experiment_of(str(out)), cfg, [3])
    example, hits = extrapolation_hits(model, "multiadd", 3, frame, record["test_seed"])
    decoded = model.greedy(example.src, example.tgt_out.shape[1])
    start = int((example.tgt_out[0] == PLUS).nonzero().max()) + 1
    final = (decoded[:, start:] == example.tgt_out[:, start:]).all(dim=1)
    assert torch.equal(hits, (decoded == example.tgt_out).all(dim=1))
    assert final.float().mean().item() == pytest.approx(record["final_accuracy"]["3"])
    assert (
        final_accuracy(model, example, torch.ones_like(hits)) == 1.0
    )  # every answer right: nothing left to decode


def test_a_blocks_marker_does_not_raise_the_digit_lines_dropoff():
    """Digit lines and markers' lines are two directions with their own statistics (Algorithm 1's
    dropoff is per direction): a head that parks on the previous separator keeps its previous-digit line."""
    width, blocks = 9, 5
    n = blocks * (width + 1)
    lines = torch.full((1, 3, 12), NEG_INF)  # d from −2, ℓ from −5, marker last
    lines[0, 2, 4], lines[0, 1, 11] = (
        torch.tensor(0.3).log(),
        torch.tensor(0.6).log(),
    )  # (0, −1) and (−1, marker)
    parked = torch.softmax(
        BlockLines(lines, -2, -5, cross=False)(n, n, block_layout(width, blocks))[0].masked_fill(
            ~torch.ones(n, n, dtype=torch.bool).tril(), NEG_INF
        ),
        -1,
    )
    uniform = torch.softmax(
        torch.zeros(n, n).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), NEG_INF), -1
    )
    table = calibrate_blocks(
        (0.9 * parked + 0.1 * uniform)[None],
        blocks,
        kappa=2.5,
        cross=False,
        min_support=0.5,
        kappa_markers=0.0,
    )
    kept = {(label, line) for label, _, found in table.lines() for line, _ in found}
    assert ("block +0", -1) in kept and ("block -1", "marker") in kept


def test_rule_band_cuts_block_lines_apart_from_the_run_through_the_first_digit_read():
    X = NEG_INF
    kept = torch.tensor(
        [[[X, 1.0, X, 1.0, 1.0, X, 1.0], [1.0, 1.0, 1.0, X, X, X, X], [1.0, X, X, X, X, X, 1.0]]]
    )
    banded = block_band(kept, torch.tensor([4, 1, 3]))
    assert torch.isfinite(banded).tolist() == [
        [
            [False, False, False, True, True, False, False],
            [True, True, True, False, False, False, False],
            [False] * 7,
        ]
    ]


def test_rule_rank_own_leaves_the_previous_sums_reader_one_digit_and_ranks_the_carry_heads_lines():
    """Head 0 reads the previous sum's digit (−1, 0): its own-row lines close; head 1's are
    ranked 0, −1, −2 by distance; markers, the row's own token (0, 0) and other blocks keep
    their calibrated values."""
    X = NEG_INF
    values = torch.full((2, 2, 5), X)  # d from −1, ℓ from −3, marker last
    values[0, 1, :3] = values[1, 1, :3] = -0.01  # (0, −3), (0, −2), (0, −1)
    values[0, 0, 3] = values[:, 0, 4] = values[
        1, 1, 3
    ] = -0.02  # head 0: (−1, 0); markers; head 1: (0, 0)
    ranked = rank_own(BlockLines(values, -1, -3, cross=False)).values
    expected = values.clone()
    expected[0, 1, :3] = X
    expected[1, 1, :3] = torch.tensor([-2.0, -1.0, 0.0])
    assert torch.equal(ranked, expected)


def test_rule_rank_own_on_a_table_without_the_previous_block_only_ranks():
    """A table whose block offsets start at 0 has no (−1, 0) line: no head loses its lines (an
    index of −1 would have read the table's last row)."""
    values = torch.full((1, 2, 4), NEG_INF)  # d from 0, ℓ from −2, marker last
    values[0, 0, :2] = values[0, 1, 2] = -0.01  # (0, −2), (0, −1); (1, 0) in the last row
    ranked = rank_own(BlockLines(values, 0, -2, cross=False)).values
    expected = values.clone()
    expected[0, 0, :2] = torch.tensor([-1.0, 0.0])
    assert torch.equal(ranked, expected)


@pytest.mark.parametrize("products", [False, True], ids=["multiadd", "multiply"])
def test_block_procedure_applies_rank_own_to_self_attention_only(products):
    """The rule is one switch on either task's running sums: off, the united tables; on,
    ``rank_own`` of their self-attention, the cross-attention untouched."""
    torch.manual_seed(0)
    blocks, width = 3, 6
    n = blocks * (width + 1)
    self_avg = (
        torch.rand(2, 4, n, n)
        .masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), 0)
        .softmax(-1)
    )
    cross_avg = torch.rand(2, 4, n, blocks * (width + 1) + 1).softmax(-1)
    off = block_procedure(
        self_avg, cross_avg, blocks, 0.0, 0.0, 0.5, rules=("support", "band"), products=products
    )
    on = block_procedure(
        self_avg,
        cross_avg,
        blocks,
        0.0,
        0.0,
        0.5,
        rules=("support", "band", "rank_own"),
        products=products,
    )
    assert torch.equal(on.self_attention.values, rank_own(off.self_attention).values)
    assert not torch.equal(on.self_attention.values, off.self_attention.values)
    assert torch.equal(on.cross_attention.values, off.cross_attention.values)


def test_block_lines_reach_the_neighbouring_blocks_only():
    """A line two blocks away would let the model count blocks from the start (BLOCK_REACH)."""
    width, blocks = 9, 5
    n = blocks * (width + 1)
    lines = torch.full((1, 5, 12), NEG_INF)  # d from −4, ℓ from −5, marker last
    lines[0, 2, 11] = lines[0, 3, 11] = 0.0  # (−2, marker) and (−1, marker)
    causal = ~torch.ones(n, n, dtype=torch.bool).tril()
    attention = torch.softmax(
        BlockLines(lines, -4, -5, cross=False)(n, n, block_layout(width, blocks))[0].masked_fill(
            causal, NEG_INF
        ),
        -1,
    )
    table = calibrate_blocks(attention[None], blocks, kappa=2.5, cross=False, kappa_markers=0.0)
    assert {label for label, _, _ in table.lines()} == {"block -1"}


def test_a_long_tests_batch_is_sized_for_its_operands():
    """A 35-digit test adds 25 operands: its batch fits the evaluation budget with their
    sequences, not with the five a training frame holds."""
    cfg = RunConfig(task="multiadd", pad_width=10)
    batch = batch_for(cfg, 40, 1000, operand_count(35))
    assert step_bytes(replace(cfg, pad_width=40), batch, grad=False, operands=25) <= EVAL_BUDGET
    assert batch < batch_for(cfg, 40, 1000)
    # greedy decoding (the final number's score) passes one row a step: batches four times larger here
    greedy = batch_for(cfg, 40, 1000, operand_count(35), rows=1)
    assert (
        greedy >= 4 * batch
        and step_bytes(replace(cfg, pad_width=40), greedy, grad=False, operands=25, rows=1)
        <= EVAL_BUDGET
    )


@pytest.mark.usefixtures("empty_cwd")
@pytest.mark.parametrize("task", ["multiadd", "multiply"])
def test_the_recipes_own_test_lengths_fit_this_machine(task):
    """The multiadd recipe as typed, no --lengths: a dry run passes the memory check of every
    test length (the long protocol's 500 digits would be 357 operands)."""
    result = CliRunner().invoke(
        app, ["train", "--recipe", "multiadd", "--task", task, "--method", "abc", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["experiment"]["lengths"] == [7, 14, 35]


SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab")


@pytest.mark.integration  # a lab script: the second tier
def test_line_focus_puts_each_rows_attention_on_the_lines_it_reads(script):
    """``lab/line_focus.py``: an attention that follows two lines, (0, −1) and the previous
    separator, weighs 1 in all on those lines in the rows that have both, and nothing elsewhere."""
    line_focus = script("line_focus")
    width, blocks = 9, 5
    n = blocks * (width + 1)
    lines = torch.full((1, 3, 12), NEG_INF)  # d from −2, ℓ from −5, marker last
    lines[0, 2, 4], lines[0, 1, 11] = torch.tensor(0.25).log(), torch.tensor(0.75).log()
    causal = ~torch.ones(n, n, dtype=torch.bool).tril()
    attention = torch.softmax(
        BlockLines(lines, -2, -5, cross=False)(n, n, block_layout(width, blocks))[0].masked_fill(
            causal, NEG_INF
        ),
        -1,
    )
    rows, keys = output_coordinates(n, blocks, keys=False), output_coordinates(n, blocks, keys=True)
    chosen = (rows[0] >= 1) & (rows[1] >= 1) & ~rows[2]
    mass = {
        line: weight.item()
        for line, weight in line_focus.line_mass(attention[None], rows, keys, chosen).items()
    }
    assert mass[(0, -1)] == pytest.approx(0.25) and mass[(-1, "m")] == pytest.approx(0.75)
    assert sum(mass.values()) == pytest.approx(1.0)


@pytest.mark.integration  # a lab script: the second tier
def test_set_lines_closes_or_ranks_the_named_lines_of_one_head_and_nothing_else(tmp_path):
    """``lab/set_lines.py``: the bias file it writes differs from its input in the named
    cells alone (closed, or given the named value); a line the head does not have is one line
    of error, exit 2, and no file."""
    values = torch.full((2, 2, 4), NEG_INF)  # d from −1, ℓ from −2, marker last
    values[:, 1, 1] = values[:, 0, 2] = values[:, 0, 3] = -0.01  # (0, −1), (−1, 0), (−1, marker)
    table = {"values": values, "d_first": -1, "l_first": -2, "cross": False, "products": False}
    save_bias(
        str(tmp_path / "in.pt"),
        {
            "task": "multiadd",
            "heads": 2,
            "pad_width": 4,
            "bias": {"blocks": {"self": table, "cross": {**table, "values": values.clone()}}},
        },
    )
    script = [sys.executable, os.path.join(SCRIPTS, "set_lines.py"), str(tmp_path / "in.pt")]
    done = subprocess.run(
        script + [str(tmp_path / "out.pt"), "self", "1", "0:-1", "-1:m", "-1:0=-2.5"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    cut = load_bias(str(tmp_path / "out.pt"))["bias"]["blocks"]
    expected = values.clone()
    expected[1, 1, 1] = expected[1, 0, 3] = NEG_INF
    expected[1, 0, 2] = -2.5
    assert torch.equal(cut["self"]["values"], expected) and torch.equal(
        cut["cross"]["values"], values
    )
    missing = subprocess.run(
        script + [str(tmp_path / "again.pt"), "self", "1", "0:-2"], capture_output=True, text=True
    )
    assert (
        missing.returncode == 2 and "no open line 0:-2" in missing.stderr.strip().splitlines()[-1]
    )
    assert not (tmp_path / "again.pt").exists()
