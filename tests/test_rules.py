"""Each rule of abcmini's procedure, switched on alone over the procedure without rules, changes
the bias only where its reason (``abcmini.nn.rules.RULES``) says it does."""

import pytest
import torch

from abcmini.nn.calibrate import marker_columns, procedure
from abcmini.nn.lines import line_ids
from abcmini.nn.rules import BLOCK_ONLY, RULES

LAYOUT = ((0, 0), (1, 5), (6, 6), (7, 11))  # $, a, +, b: 5-digit operands
WIDE = ((0, 0), (1, 9), (10, 10), (11, 19))  # the same parts with 9 digits: a wider frame
ROWS, SRC = 5, 12


def averages(seed: int):
    """Random averaged attention of two decoder layers, causal within the output."""
    generator = torch.Generator().manual_seed(seed)
    causal = torch.ones(ROWS, ROWS, dtype=torch.bool).triu(1)
    scores = torch.randn(2, 4, ROWS, ROWS, generator=generator) * 3
    self_avg = scores.masked_fill(causal, float("-inf")).softmax(-1)
    cross_avg = (torch.randn(2, 4, ROWS, SRC, generator=generator) * 3).softmax(-1)
    return self_avg, cross_avg


def padding():
    """Column 1 (a's leading digit) and 7 (b's) are padding in one of three inputs; output rows
    3 and 4 in another."""
    src, out = torch.zeros(3, SRC, dtype=torch.bool), torch.zeros(3, ROWS, dtype=torch.bool)
    src[0, [1, 7]] = True
    out[1, 3:] = True
    return src, out


def bias(rules, seed, layout=LAYOUT, rows=ROWS, src=SRC, kappa=0.3):
    calibrated = procedure(*averages(seed), LAYOUT, *padding(), kappa, kappa, 0.5, rules)
    return calibrated.self_attention(rows, rows), calibrated.cross_attention(
        rows, src, layout=layout
    )


def opened(tensor):
    return torch.isfinite(tensor)


SEEDS = range(6)


def test_every_rule_of_the_papers_tasks_is_tested_here():
    names = [
        name for name in globals() if name.startswith("test_") and not name.startswith("test_every")
    ]
    tested = {name.removeprefix("test_").split("_rule_")[0] for name in names}
    assert tested == set(RULES) - set(BLOCK_ONLY)


@pytest.mark.parametrize("seed", SEEDS)
def test_unite_layers_rule_only_adds_the_first_layers_lines(seed):
    for base, united in zip(bias((), seed), bias(("unite_layers",), seed)):
        assert (opened(base) <= opened(united)).all() and (united >= base).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_directions_rule_only_drops_cross_plus_one_and_self_minus_one_lines(seed):
    (self_base, cross_base), (self_on, cross_on) = bias((), seed), bias(("directions",), seed)
    assert (opened(self_on) <= opened(self_base)).all() and (
        opened(cross_on) <= opened(cross_base)
    ).all()
    calibrated = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ("directions",))
    assert set(calibrated.self_attention.deltas) == {1, 0} and set(
        calibrated.cross_attention.deltas
    ) == {-1, 0}


@pytest.mark.parametrize("seed", SEEDS)
def test_operand_lines_rule_keeps_each_line_on_its_operand_in_a_wider_frame(seed):
    _, small = bias(("operand_lines",), seed)
    _, wide = bias(("operand_lines",), seed, WIDE, src=20)
    for (first, last), (wide_first, wide_last) in zip(LAYOUT, WIDE):  # each part's last digits
        width = last - first + 1
        assert torch.equal(
            small[..., first : last + 1], wide[..., wide_last - width + 1 : wide_last + 1]
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_support_rule_keeps_only_lines_that_cross_half_the_rows_and_the_last(seed):
    calibrated = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ("support",))
    for table, right in ((calibrated.cross_attention, True), (calibrated.self_attention, False)):
        n = SRC if right else ROWS
        for values, delta, first in zip(table.values, table.deltas, table.firsts):
            ids = line_ids(ROWS, n, delta, right)
            for line in (torch.isfinite(values).any(0).nonzero().flatten() + first).tolist():
                rows = (ids == line).any(-1)
                assert rows.sum() >= 0.5 * ROWS and rows[-1], (delta, line)


@pytest.mark.parametrize("seed", SEEDS)
def test_padding_rule_only_closes_lines_and_no_vertical_stands_on_a_padded_column(seed):
    (self_base, cross_base), (self_on, cross_on) = bias((), seed), bias(("padding",), seed)
    assert (opened(self_on) <= opened(self_base)).all() and (
        opened(cross_on) <= opened(cross_base)
    ).all()
    calibrated = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ("padding",))
    for table, columns in (
        (calibrated.cross_attention, (1, 7)),
        (calibrated.self_attention, (3, 4)),
    ):
        n = SRC if table.right else ROWS
        for values, delta, first in zip(table.values, table.deltas, table.firsts):
            if delta == 0:
                ids = line_ids(1, n, 0, table.right)[0]
                assert all(not torch.isfinite(values[:, ids[c] - first]).any() for c in columns)


@pytest.mark.parametrize("seed", SEEDS)
def test_marker_verticals_rule_only_closes_verticals_off_the_one_token_parts(seed):
    calibrated = procedure(
        *averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ("marker_verticals",)
    )
    base = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ())
    markers = marker_columns(LAYOUT, SRC)
    for values, delta, first in zip(
        calibrated.cross_attention.values,
        calibrated.cross_attention.deltas,
        calibrated.cross_attention.firsts,
    ):
        ids = line_ids(1, SRC, delta, True)[0]
        kept = torch.isfinite(values).any(0)
        if delta == 0:
            assert all(markers[c] for c in range(SRC) if kept[ids[c] - first])
    for on, off in zip(calibrated.cross_attention.values, base.cross_attention.values):
        assert (torch.isfinite(on) <= torch.isfinite(off)).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_causal_rule_only_closes_self_lines(seed):
    (self_base, cross_base), (self_on, cross_on) = bias((), seed), bias(("causal",), seed)
    assert torch.equal(cross_on, cross_base) and (opened(self_on) <= opened(self_base)).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_skip_start_rule_leaves_cross_attention_and_self_verticals_alone(seed):
    (_, cross_base), (_, cross_on) = bias((), seed), bias(("skip_start",), seed)
    assert torch.equal(cross_on, cross_base)
    verticals = []
    for rules in ((), ("skip_start",)):
        table = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, rules).self_attention
        verticals.append(table.values[list(table.deltas).index(0)])
    assert torch.equal(*verticals)


@pytest.mark.parametrize("seed", SEEDS)
def test_band_rule_only_closes_self_diagonals_off_the_band(seed):
    (self_base, cross_base), (self_on, cross_on) = bias((), seed), bias(("band",), seed)
    assert torch.equal(cross_on, cross_base) and (opened(self_on) <= opened(self_base)).all()
    calibrated = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ("band",))
    table = calibrated.self_attention
    diagonal = list(table.deltas).index(1)
    kept = torch.isfinite(table.values[diagonal])  # [h lines], line first + column
    own = -table.firsts[diagonal]
    for head in kept:  # a band: the kept lines at or below line 0 run unbroken back from line 0
        band = head[: own + 1].flip(0).int().tolist()
        assert band == sorted(band, reverse=True) and not head[own + 1 :].any()


@pytest.mark.parametrize("seed", SEEDS)
def test_silent_empty_rule_changes_only_heads_with_no_line(seed):
    for base, on in zip(bias((), seed, kappa=2.0), bias(("silent_empty",), seed, kappa=2.0)):
        for head_base, head_on in zip(base, on):
            if torch.isfinite(head_base).all() and (head_base == 0).all():  # transparent
                assert (head_on[:, 0] == 0).all() and not torch.isfinite(head_on[:, 1:]).any()
            else:
                assert torch.equal(head_base, head_on)


@pytest.mark.parametrize("seed", SEEDS)
def test_vertical_kappa0_rule_changes_only_verticals(seed):
    base = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 2.0, 0.5, ())
    on = procedure(*averages(seed), LAYOUT, *padding(), 0.3, 2.0, 0.5, ("vertical_kappa0",))
    for table_base, table_on in (
        (base.cross_attention, on.cross_attention),
        (base.self_attention, on.self_attention),
    ):
        for delta, values_base, values_on in zip(
            table_base.deltas, table_base.values, table_on.values
        ):
            if delta != 0:
                assert torch.equal(values_base, values_on)


@pytest.mark.parametrize("seed", SEEDS)
def test_same_digit_rule_keeps_a_line_on_both_operands_or_neither(seed):
    calibrated = procedure(
        *averages(seed), LAYOUT, *padding(), 0.3, 0.3, 0.5, ("operand_lines", "same_digit")
    )
    table = calibrated.cross_attention
    for delta in set(table.deltas):
        a, b = (
            table.values[i]
            for i, d in enumerate(table.deltas)
            if d == delta and table.segments[i] in (1, 3)
        )
        assert torch.equal(torch.isfinite(a), torch.isfinite(b))
    assert torch.equal(
        bias(("same_digit",), seed)[1], bias((), seed)[1]
    )  # without operand lines: nothing to pool
