import pytest
import torch

from abcmini.nn.calibrate import (
    algorithm1,
    calibrate,
    dropoff,
    line_average,
    marker_columns,
    procedure,
)
from abcmini.nn.lines import line_ids
from abcmini.nn.rules import RULES

X = float("-inf")
A = torch.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])  # one head, 2 x 3


def test_line_indices_follow_the_papers_figure():
    assert line_ids(3, 3, 1).tolist() == [
        [0, 1, 2],
        [-1, 0, 1],
        [-2, -1, 0],
    ]  # d_0 main diagonal, d_1 right
    assert line_ids(3, 3, -1).tolist() == [
        [-2, -1, 0],
        [-1, 0, 1],
        [0, 1, 2],
    ]  # d_0 from the top-right corner
    assert line_ids(2, 3, 0).tolist() == [
        [-2, -1, 0],
        [-2, -1, 0],
    ]  # verticals, rightmost column is 0
    assert line_ids(2, 3, 0, right=False).tolist() == [
        [0, 1, 2],
        [0, 1, 2],
    ]  # self-attention: from the left
    assert line_ids(2, 2, -1, right=False).tolist() == [[0, 1], [1, 2]]


def test_line_averages_by_hand():
    d, cells, first = line_average(A, 1)  # lines: {4} {1,5} {2,6} {3}
    assert first == -1 and d.tolist() == [[4.0, 3.0, 4.0, 3.0]] and cells.tolist() == [1, 2, 2, 1]
    d, cells, first = line_average(A, -1)  # lines: {1} {2,4} {3,5} {6}
    assert first == -2 and d.tolist() == [[1.0, 3.0, 4.0, 6.0]] and cells.tolist() == [1, 2, 2, 1]
    d, cells, first = line_average(A, 0)  # columns
    assert first == -2 and d.tolist() == [[2.5, 3.5, 4.5]] and cells.tolist() == [2, 2, 2]
    d, cells, first = line_average(A, 2)  # (1, 2): j - 2i; lines {4} {5} {1,6} {2} {3}
    assert (
        first == -2
        and d.tolist() == [[4.0, 5.0, 3.5, 2.0, 3.0]]
        and cells.tolist() == [1, 1, 2, 1, 1]
    )


def test_dropoff_keeps_lines_above_mean_plus_kappa_sigma():
    d = torch.tensor([[4.0, 3.0, 4.0, 3.0]])  # mu 3.5, sigma 0.5
    assert dropoff(d, 0.5).tolist() == [[0.0, X, 0.0, X]]  # threshold 3.75
    assert dropoff(d, 1.0).tolist() == [[X, X, X, X]]  # threshold 4.0: nothing strictly above
    d = torch.tensor([[1.0, 3.0, 4.0, 6.0]])  # mu 3.5
    assert dropoff(d, 0.0).tolist() == [[X, X, -2.0, 0.0]]  # d_l - d_max where kept


def test_short_corner_lines_are_not_extended():
    """4 × 4, one head: main diagonal 0.5, a sink in the bottom-left corner (3, 0) at 0.75,
    0.125 elsewhere. Diagonal lines -3..3 cross 1, 2, 3, 4, 3, 2, 1 rows."""
    attention = torch.full((1, 4, 4), 0.125)
    attention[0].diagonal().fill_(0.5)
    attention[0, 3, 0] = 0.75
    # Every line (the paper's rule): d = [.75, .125 ×5, .5], μ = .268, σ = .236, κ = .5 → threshold .386:
    # the one-cell corner line passes and becomes the maximum; the main diagonal gets .5 − .75.
    every = calibrate(attention, kappa=0.5, deltas=(1,), min_support=0.0)
    assert every.values[0, 0].tolist() == [0.0, X, X, -0.25, X, X, X]
    assert every(6, 6)[0, 5, 2] == 0.0  # extended: row 5 attends three positions back
    # Lines crossing ≥ 2 of the 4 rows: d = [.125, .125, .5, .125, .125], μ = .2, σ = .15 → threshold .275
    supported = calibrate(attention, kappa=0.5, deltas=(1,), min_support=0.5)
    assert supported.values[0, 0].tolist() == [X, X, X, 0.0, X, X, X]
    assert torch.equal(supported(6, 6)[0], torch.zeros(6, 6).fill_diagonal_(1).log())
    steep = calibrate(
        attention, kappa=0.5, deltas=(3,), min_support=1.0
    )  # no (1, 3) line crosses all 4 rows
    assert steep.transparent.all()


def test_lines_that_leave_before_the_last_trusted_row_are_not_extended():
    """4 × 6 cross-attention, one head. Anti-diagonals (right-anchored, j + i − 5) −5 … 3:
    −5 = {(0,0)}, −4 = {(0,1), (1,0)}, −3 = {(0,2), (1,1), (2,0)}, −2 = {(0,3), (1,2), (2,1), (3,0)},
    … Every row puts 0.9 on column 0 (the `$`), rows 0 and 1 also on line −3, every row on line 0
    (the least significant digits), 0.02 elsewhere: d−5 = d−3 = d0 = .9, d−4 = .46,
    d−2 = (3·.02 + .9) / 4 = .24, the other lines .02."""
    attention = torch.full((1, 4, 6), 0.02)
    attention[0, :, 0] = 0.9
    attention[0, 0, 2] = attention[0, 1, 1] = 0.9
    attention[0, [0, 1, 2, 3], [5, 4, 3, 2]] = 0.9
    d, cells, first = line_average(attention, -1)
    assert first == -5 and cells.tolist() == [1, 2, 3, 4, 4, 4, 3, 2, 1]
    # The paper's rule: all 9 lines, μ = .387, σ = .388, κ = .5 → .581: −5, −3 and 0 pass.
    paper = calibrate(attention, kappa=0.5, deltas=(-1,), min_support=0.0)
    assert torch.isfinite(paper.values[0, 0]).nonzero().flatten().add(first).tolist() == [-5, -3, 0]
    # Lines crossing ≥ 2 rows (−4 … 2): μ = .366, σ = .369 → .550: −3 and 0 pass, but −3 leaves the
    # matrix after row 2 (at any length it is open in rows 0–2 only, marking the first rows): only 0.
    bias = calibrate(attention, kappa=0.5, deltas=(-1,), min_support=0.5)
    assert torch.isfinite(bias.values[0, 0]).nonzero().flatten().add(first).tolist() == [0]


def test_skip_start_leaves_the_sos_sink_out_of_the_diagonals():
    """4 × 4 decoder self-attention, one head: rows 0–1 read themselves, rows 2–3 park all their
    attention on SOS (column 0). Diagonals j − i, −3 … 3."""
    attention = torch.tensor([[[1.0, 0, 0, 0], [0.2, 0.8, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 0]]])
    # Every cell: d = [1, .5, .067, .45, 0, 0, 0]; lines with ≥ 2 cells (−2 … 2): μ = .203, σ = .224,
    # κ = .87 → .398: line −2 passes on its one SOS cell (2, 0), next to the main diagonal.
    plain = calibrate(attention, kappa=0.87, deltas=(1,), right=False, min_support=0.5)
    assert torch.isfinite(plain.values[0, 0]).nonzero().flatten().add(-3).tolist() == [-2, 0]
    # Without column 0: −2 = {(3, 1)}, −1 = {(2, 1), (3, 2)}, 0 = {(1, 1), (2, 2), (3, 3)}: d0 = .267;
    # lines with ≥ 2 cells (−1 … 2): μ = .067, σ = .115 → .167: only the main diagonal.
    d, cells, first = line_average(attention, 1, right=False, skip_start=True)
    assert first == -3 and cells.tolist() == [0, 1, 2, 3, 3, 2, 1]
    assert torch.allclose(d[0], torch.tensor([0, 0, 0, 0.8 / 3, 0, 0, 0]))
    skipped = calibrate(
        attention, kappa=0.87, deltas=(1,), right=False, skip_start=True, min_support=0.5
    )
    assert torch.isfinite(skipped.values[0, 0]).nonzero().flatten().add(-3).tolist() == [0]
    vertical, _, _ = line_average(
        attention, 0, right=False, skip_start=True
    )  # verticals keep column 0
    assert vertical[0, 0] == pytest.approx(0.8)


def test_extension_to_a_larger_matrix_by_hand():
    diagonal = calibrate(A, kappa=0.5, deltas=(1,), min_support=0.0)
    assert diagonal(2, 3).tolist() == [[[X, 0.0, X], [0.0, X, 0.0]]]
    assert diagonal(3, 4).tolist() == [[[X, 0.0, X, X], [0.0, X, 0.0, X], [X, 0.0, X, 0.0]]]
    anti = calibrate(A, kappa=0.0, deltas=(-1,), min_support=0.0)
    assert anti(2, 3).tolist() == [[[X, X, -2.0], [X, -2.0, 0.0]]]
    assert anti(3, 5).tolist() == [[[X, X, X, X, -2.0], [X, X, X, -2.0, 0.0], [X, X, -2.0, 0.0, X]]]


def test_directions_merge_by_max():
    merged = calibrate(
        A, kappa=0.0, deltas=(1, -1), min_support=0.0
    )  # diagonal keeps lines -1 and 1, anti as above
    assert merged(2, 3).tolist() == [[[X, 0.0, -2.0], [0.0, -2.0, 0.0]]]


def test_a_line_that_leaves_the_padding_only_in_its_last_rows_is_dropped():
    """4 × 6 cross-attention, columns ``$ 0 0 0 + 7`` (1–3 padding in every input). Anti-diagonal
    −2 reads padding in rows 0–2 and the ``$`` in row 3: it marks the last trusted row, as Addition
    seed 2's ``+``-corner lines marked rows 6–7. Anti-diagonal 0 reads the 7 and the ``+`` in rows
    0–1 and padding after, as seed 0's ``a_t`` line does beyond the operands."""
    attention = torch.zeros(1, 4, 6)
    for i in range(4):
        attention[0, i, 3 - i] = attention[0, i, 5 - i] = 0.5
    padding = torch.tensor([False, True, True, True, False, False])
    lines = lambda bias: [
        bias.firsts[0] + c for c, v in enumerate(bias.values[0, 0].tolist()) if v > X
    ]  # noqa: E731
    assert lines(calibrate(attention, kappa=0.0, deltas=(-1,), min_support=0.5)) == [-2, 0]
    assert lines(
        calibrate(attention, kappa=0.0, deltas=(-1,), min_support=0.0, padding=padding)
    ) == [-2, 0]  # 1 row read
    assert lines(
        calibrate(attention, kappa=0.0, deltas=(-1,), min_support=0.5, padding=padding)
    ) == [0]  # 1 < 2 ≤ 2


def test_no_vertical_on_a_column_that_holds_padding_in_some_input():
    """Verticals d = [.4, .1, .1, .4]; column 3 is a digit only the longer numbers have. Sloped
    lines through it stay."""
    attention = torch.tensor([[[0.4, 0.1, 0.1, 0.4], [0.4, 0.1, 0.1, 0.4]]])
    somewhere = torch.tensor([False, False, False, True])
    assert calibrate(attention, kappa=0.0, deltas=(0,), min_support=0.0).values[0, 0].tolist() == [
        0.0,
        X,
        X,
        0.0,
    ]
    steady = calibrate(attention, kappa=0.0, deltas=(0,), min_support=0.0, no_vertical=somewhere)
    assert steady.values[0, 0].tolist() == [0.0, X, X, X]
    anti = lambda **rule: (
        calibrate(attention, kappa=-1.0, deltas=(-1,), min_support=0.0, **rule).values
    )  # noqa: E731
    assert torch.equal(anti(no_vertical=somewhere), anti()) and torch.isfinite(
        anti()[0, 0]
    ).tolist() == [True, True, False, True, True]


def test_verticals_on_markers_keep_the_operator_and_drop_a_digit():
    """``$ a + b`` at pad 3 (columns 0 | 1–3 | 4 | 5–7): verticals with d = .3 on ``+`` and on
    ``a``'s last digit, both far above the rest. ``verticals: markers`` keeps only the one on
    the operator, a token that is there at every length; the digit's column moves with it."""
    attention = torch.full((1, 4, 8), 0.05)
    attention[..., 4] = attention[..., 3] = 0.3
    markers = marker_columns(((0, 0), (1, 3), (4, 4), (5, 7)), 8)  # $ a + b
    assert markers.tolist() == [True, False, False, False, True, False, False, False]
    assert marker_columns(((0, 0), (1, 3), (4, 4), (5, 5)), 6).tolist() == [
        True,
        False,
        False,
        False,
        True,
        True,
    ]  # $ a * b
    kept = lambda **rule: (
        torch.isfinite(
            calibrate(attention, kappa=1.0, deltas=(0,), **rule, min_support=0.5).values[0, 0]
        )
        .nonzero()
        .flatten()
        .tolist()
    )  # noqa: E731
    assert kept() == [3, 4]
    assert kept(no_vertical=~markers) == [4]


def test_a_marker_vertical_read_above_the_average_line_is_kept_below_kappa_sigma():
    """``$ a * m`` at pad 3 (columns 0 | 1–3 | 4 | 5): verticals d = [.2, .1, .1, .1, .2, .4].
    At κ 2 only the multiplier's column stands out (threshold .1833 + 2 × .1067); with
    ``kappa_vertical`` 0 the ``$`` and ``*`` columns, above the mean, stay open too, while the
    anti-diagonals keep κ."""
    attention = torch.tensor([[0.2, 0.1, 0.1, 0.1, 0.2, 0.4]]).expand(1, 4, 6)
    no_vertical = ~marker_columns(((0, 0), (1, 3), (4, 4), (5, 5)), 6)
    kept = lambda bias: torch.isfinite(bias.values[0, 0]).nonzero().flatten().tolist()  # noqa: E731
    assert kept(
        calibrate(attention, kappa=2.0, deltas=(0,), no_vertical=no_vertical, min_support=0.5)
    ) == [5]
    assert kept(
        calibrate(
            attention,
            kappa=2.0,
            deltas=(0,),
            no_vertical=no_vertical,
            kappa_vertical=0.0,
            min_support=0.5,
        )
    ) == [0, 4, 5]
    anti = lambda **rule: (
        calibrate(attention, kappa=2.0, deltas=(-1,), **rule, min_support=0.5).values
    )  # noqa: E731
    assert torch.equal(anti(kappa_vertical=0.0), anti())


def test_self_diagonals_keep_a_band_from_the_rows_own_token_back():
    """Causal 8 × 8, two heads. Head 0 reads its own token (line 0) and the one three back (line
    −3), head 1 lines 0 and −1. Without the band both heads keep both lines; with it head 0 loses
    line −3, which skips lines −1 and −2, and head 1 keeps its band."""
    i, j = torch.arange(8).view(8, 1), torch.arange(8).view(1, 8)
    reads = lambda *lags: (
        sum(((j == i + lag) | ((j == 0) & (i + lag < 0))).float() for lag in lags) / len(lags)
    )  # noqa: E731
    attention = torch.stack([reads(0, -3), reads(0, -1)])
    kept = lambda bias, h: [
        bias.firsts[0] + c for c in torch.isfinite(bias.values[0, h]).nonzero().flatten().tolist()
    ]  # noqa: E731
    free = calibrate(attention, kappa=0.87, deltas=(1,), right=False, causal=0.5, min_support=0.5)
    assert [kept(free, 0), kept(free, 1)] == [[-3, 0], [-1, 0]]
    banded = calibrate(
        attention, kappa=0.87, deltas=(1,), right=False, causal=0.5, band=True, min_support=0.5
    )
    assert [kept(banded, 0), kept(banded, 1)] == [[0], [-1, 0]]


def test_a_self_attention_vertical_open_to_the_last_rows_only_is_dropped():
    """Causal 4 × 4: column 3 can be attended from row 3 only, one cell (< 0.5 · 4 rows); it
    passes the dropoff on that cell, and it would mark the last row."""
    attention = torch.tensor(
        [[[1.0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]]]
    )  # d = [.75, 0, 0, .25]
    assert calibrate(attention, kappa=-0.5, deltas=(0,), right=False, min_support=0.5).values[
        0, 0
    ].tolist() == [0.0, X, X, -0.5]
    causal = calibrate(attention, kappa=-0.5, deltas=(0,), right=False, causal=0.5, min_support=0.5)
    assert causal.values[0, 0].tolist() == [0.0, X, X, X]
    alone = calibrate(
        attention, kappa=-0.5, deltas=(0,), right=False, causal=0.5
    )  # the rule without support's
    assert alone.values[0, 0].tolist() == [0.0, X, X, X]


def test_a_head_with_nothing_open_is_transparent_and_no_row_is_all_closed():
    flat = torch.stack([A[0], torch.full((2, 3), 0.5)])  # head 1: every line equal, nothing passes
    bias = calibrate(flat, kappa=0.5, deltas=(1,), min_support=0.5)
    assert bias.transparent.tolist() == [False, True]
    assert (bias(4, 6)[1] == 0).all()
    single = bias(1, 1)  # head 0: line 0 was dropped, so the only cell is closed → column 0 opens
    assert single[0].tolist() == [[0.0]]
    big = bias(9, 2)
    assert torch.isfinite(big).any(dim=-1).all()


def test_lines_that_read_only_padding_are_dropped():
    """2 × 4 cross-attention, one head, columns ``$ 0 0 7`` where columns 1 and 2 hold a padding
    zero in every calibration input. Anti-diagonals (right-anchored) j + i − 3: line −3 {(0,0)},
    −2 {(0,1), (1,0)}, −1 {(0,2), (1,1)}, 0 {(0,3), (1,2)}, 1 {(1,3)}."""
    attention = torch.tensor([[[0.0, 0.1, 0.9, 0.0], [0.0, 0.9, 0.1, 0.0]]])
    padding = torch.tensor([False, True, True, False])
    kept = calibrate(
        attention, kappa=0.0, deltas=(-1,), min_support=0.0
    )  # d = [0, .05, .5, .05, 0], μ .12
    assert kept.values[0, 0].tolist() == [X, X, 0.0, X, X]
    # line −1 lies on columns 1 and 2 only: dropped; line −2 crosses the `$` (column 0), line 0 the 7
    dropped = calibrate(attention, kappa=0.0, deltas=(-1,), min_support=0.0, padding=padding)
    assert dropped.transparent.tolist() == [True]
    verticals = calibrate(
        attention, kappa=-1.5, deltas=(0,), min_support=0.0, padding=padding
    )  # keeps every line
    assert verticals.values[0, 0].tolist() == [-0.5, X, X, -0.5]  # d = [0, .5, .5, 0]


def test_union_of_layers_opens_the_lines_of_either():
    first = calibrate(
        A, kappa=0.5, deltas=(1,), min_support=0.0
    )  # lines -1 and 1 (see test_extension_to_a_larger_matrix_by_hand)
    second = calibrate(
        A, kappa=0.0, deltas=(-1,), min_support=0.0
    )  # anti-diagonals 0 (-2.0) and 1 (0.0)
    united = first.union(second)
    assert united.deltas == (1, -1)
    assert torch.equal(united(3, 5), torch.maximum(first(3, 5), second(3, 5)))
    assert torch.equal(
        united(2, 3), calibrate(A, kappa=0.0, deltas=(1, -1), min_support=0.0)(2, 3)
    )  # = test_directions_merge_by_max
    with pytest.raises(ValueError, match="different attentions or anchors"):
        first.union(calibrate(A, kappa=0.5, deltas=(1,), min_support=0.0, right=False))


def test_a_silent_empty_head_reads_only_the_first_column():
    flat = torch.stack([A[0], torch.full((2, 3), 0.5)])  # head 1 empty, as above
    bias = calibrate(flat, kappa=0.5, deltas=(1,), transparent_empty=False, min_support=0.5)
    assert bias.transparent.tolist() == [False, True]
    assert bias(3, 4)[1].tolist() == [[0.0, X, X, X]] * 3
    assert torch.equal(
        bias(3, 4)[0], calibrate(flat, kappa=0.5, deltas=(1,), min_support=0.5)(3, 4)[0]
    )  # other heads unchanged


@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("delta", [1, 2, -1, -2, 0])
def test_materialized_sizes_agree_on_their_common_cells(delta, right):
    torch.manual_seed(delta + 5)
    bias = calibrate(torch.rand(3, 5, 7), kappa=0.0, deltas=(delta,), right=right, min_support=0.5)
    small, large = bias(5, 7), bias(9, 13)
    if delta > 0 or not right:  # anchored at the top-left corner
        common = large[:, :5, :7]
    else:  # anchored at the top-right corner (least significant digits)
        common = large[:, :5, -7:]
    rows_with_open_cells = torch.isfinite(small).sum(-1) > 1  # the no-NaN fallback may differ
    assert torch.equal(small[rows_with_open_cells], common[rows_with_open_cells])


def test_the_procedure_without_rules_departs_from_algorithm_1_only_in_its_anchors():
    """``procedure(…, rules=())`` takes the last decoder layer, directions 1, −1 and 0, every line,
    empty heads transparent, as Algorithm 1 does; it counts cross-attention verticals from the
    top-right corner (Algorithm 1: top-left) and self-attention anti-diagonals from the top-left
    (Algorithm 1: top-right). So its cross bias is Algorithm 1's in the calibration's own width
    and its self bias is Algorithm 1's without anti-diagonals."""
    torch.manual_seed(0)
    self_avg, cross_avg = (
        torch.rand(2, 4, 5, 5).softmax(-1),
        torch.rand(2, 4, 5, 12).softmax(-1),
    )  # [layers h q k]
    layout = ((0, 0), (1, 5), (6, 6), (7, 11))  # $, a, +, b
    src_padding, out_padding = (
        torch.zeros(3, 12, dtype=torch.bool),
        torch.zeros(3, 5, dtype=torch.bool),
    )
    args = (self_avg, cross_avg, layout, src_padding, out_padding, 0.87, 0.5, 0.5)
    paper = procedure(*args, rules=())
    cross = algorithm1(cross_avg[-1], 0.5)
    assert torch.equal(paper.cross_attention(9, 12), cross(9, 12))  # the calibration's width
    assert not torch.equal(paper.cross_attention(9, 20), cross(9, 20))  # wider: verticals move
    ours = calibrate(self_avg[-1], 0.87, (1, 0), right=False)(9, 9)  # self: no anti-diagonals
    assert torch.equal(ours, algorithm1(self_avg[-1], 0.87, (1, 0))(9, 9))
    assert not torch.equal(paper.self_attention(9, 9), algorithm1(self_avg[-1], 0.87)(9, 9))
    assert paper.cross_attention.transparent_empty and not paper.cross_attention.anchored
    args = (self_avg, cross_avg, layout, src_padding, out_padding, 0.87, 4.5, 0.5)
    every = procedure(
        *args
    )  # abcmini's procedure: both layers united, lines anchored at the operands
    assert (
        len(every.cross_attention.deltas) == 2 * 2 * len(layout) and every.cross_attention.anchored
    )
    for rule in RULES:  # each rule is one switch of the procedure
        procedure(*args, rules=tuple(r for r in RULES if r != rule))
    with pytest.raises(ValueError, match="unknown calibration rules"):
        procedure(*args, rules=("bogus",))


def test_same_digit_opens_a_line_on_every_operand_where_one_operand_has_it():
    """Rule same_digit: a head reading operand a's aligned digit at 0.8 and b's at 0.2 keeps the
    line on a alone under the dropoff pooled over the segments (Addition's seed 1 at 15 digits
    had such a head: 0.81 and 0.19); with the rule the two averages are pooled, and the line is
    open on both operands with one value. A one-token part (N×1's multiplier) is never pooled."""
    m, n = 4, 12
    rows = torch.arange(m)
    attention = torch.full((1, m, n), 0.01)
    attention[0, rows, 5 - rows], attention[0, rows, 11 - rows] = (
        0.8,
        0.2,
    )  # row i: a's and b's digit i
    attention = attention / attention.sum(-1, keepdim=True)

    def line_zero(layout, kappa=2.5, **rule):  # the value of line 0 on parts 1 and 3 (−inf: closed)
        bias = calibrate(attention, kappa, (-1,), layout=layout, **rule)
        return [bias.values[index, 0, -bias.firsts[index]].item() for index in (1, 3)]

    operands = ((0, 0), (1, 5), (6, 6), (7, 11))  # $, a, +, b
    assert line_zero(operands)[1] == float("-inf") and line_zero(operands)[0] > float("-inf")
    pooled = line_zero(operands, same_digit=True)
    assert pooled[0] == pooled[1] > float("-inf")
    one_digit = ((0, 0), (1, 5), (6, 6), (11, 11))  # $, a, *, a one-digit multiplier (N×1)
    assert line_zero(one_digit, 0.5)[1] > float("-inf")  # the multiplier's line, read at 0.2
    assert line_zero(one_digit, 0.5, same_digit=True) == line_zero(
        one_digit, 0.5
    )  # not pooled with $ or *


def test_a_union_of_layers_lists_each_line_once_at_the_value_it_materializes_to():
    """Two layers' tables of one direction, united, hold line 0 twice (−0.112 and 0.0): the bias
    as a table lists it once, at the larger value, the one every cell on it gets."""
    from abcmini.nn.lines import NEG_INF, Calibrated, LineBias
    from abcmini.nn.scaffolds import line_rows

    def layer(value):
        values = torch.full((1, 2, 3), NEG_INF)
        values[0, 1, 1] = value  # head 1, line 0 (first −1)
        table = LineBias((0,), (-1,), values)
        return Calibrated(table, table)

    united = layer(-0.112).union(layer(0.0))
    rows = [row for row in line_rows(united) if row[1] == "cross"]
    assert rows == [("every", "cross", "Δ = 0", 1, "0", 0.0)]
    assert united.cross_attention(3, 3)[1].max() == 0.0
