"""Algorithm 1 and the authors' code against plain per-cell loops written from their texts: the
paper's pseudocode (appendix, Algorithm 1 and its footnote) and ``src/calcBias.py`` of
shaoxiongduan/AttentionBiasCalibration at 1d3a21d (lines 178–334, 343–502)."""

import math

import pytest
import torch

from abcmini.nn.calibrate import AUTHORS_CLOSED, PAPER_DIRECTIONS, algorithm1, authors

INF = float("inf")


def cells_of_line(i, j, delta, m, n, shift):
    """The cells of ``Ā [m n]`` on the line of direction ``(1, Δ)`` through cell ``(i, j)`` of
    ``Ã``, ``Ā`` translated ``shift`` columns right: ``(i + k, j + kΔ)`` for every k ∈ Z inside."""
    return [
        (i + k, j + k * delta - shift) for k in range(-i, m - i) if 0 <= j + k * delta - shift < n
    ]


def paper_loop(attention, M, N, kappa, deltas=PAPER_DIRECTIONS):
    """Algorithm 1, cell by cell: for each head and direction, each cell of ``Ã`` averages its
    line in ``Ā`` (Δ < 0: ``Ā`` translated so that the top-right corners meet); ``μ``, ``σ`` and
    ``d_max`` over the lines of ``Ā``; dropoff; directions merged by max; an empty head all 0."""
    H, m, n = attention.shape
    out = [[[-INF] * N for _ in range(M)] for _ in range(H)]
    for h in range(H):
        for delta in deltas:
            shift = N - n if delta < 0 else 0
            lines = {}  # the lines of Ā: each by its first cell
            for i in range(m):
                for j in range(n):
                    cells = cells_of_line(i, j + shift, delta, m, n, shift)
                    lines[cells[0]] = sum(attention[h, a, b].item() for a, b in cells) / len(cells)
            d = list(lines.values())
            mu = sum(d) / len(d)
            sigma = math.sqrt(sum((x - mu) ** 2 for x in d) / len(d))
            for i in range(M):
                for j in range(N):
                    cells = cells_of_line(i, j, delta, m, n, shift)
                    if not cells:
                        continue  # not on a line of Ā: −inf
                    d_l = sum(attention[h, a, b].item() for a, b in cells) / len(cells)
                    if d_l > mu + kappa * sigma:
                        out[h][i][j] = max(out[h][i][j], d_l - max(d))
        if all(x == -INF for row in out[h] for x in row):
            out[h] = [[0.0] * N for _ in range(M)]  # step 2.4: transparent
    for h in range(H):  # abcmini's one addition: a row with nothing open reads column 0 (no NaN)
        for row in out[h]:
            if all(x == -INF for x in row):
                row[0] = 0.0
    return torch.tensor(out, dtype=torch.float64)


def authors_loop(attention, M, N, kappa, delta, cross):
    """calcBias.py, one direction: each cell of ``Ã`` walks back to its line's start in ``Ã`` and
    sums ``Ā`` along it; μ and σ over the distinct non-zero sums; a cell below μ + κσ is −1e6,
    the others keep their sum; cross: top-right cell 0; self: an all-closed head is all 0."""
    H, m, n = attention.shape
    out = torch.full((H, M, N), AUTHORS_CLOSED, dtype=torch.float64)
    for h in range(H):
        tmp = torch.zeros(M, N, dtype=torch.float64)
        values = set()
        for i in range(M):
            for j in range(N):
                a, b = i, j
                while a - 1 >= 0 and 0 <= b - delta < N:
                    a, b = a - 1, b - delta
                shift = N - n if delta < 0 else 0
                size = 0
                while 0 <= a < m and 0 <= b - shift < n:
                    tmp[i, j] += attention[h, a, b - shift]
                    size, a, b = size + 1, a + 1, b + delta
                if size and tmp[i, j] != 0:
                    values.add(tmp[i, j].item())
        if values:
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        else:
            mean, std = 1e6, 0.0
        tmp[tmp < mean + kappa * std] = AUTHORS_CLOSED
        out[h] = torch.maximum(out[h], tmp)
        if cross:
            out[h, 0, -1] = 0.0
        elif out[h].max() <= AUTHORS_CLOSED + 1:
            out[h] = 0.0
    return out


def random_attention(heads, m, n, seed, causal=False):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(heads, m, n, generator=generator, dtype=torch.float64) * 2
    if causal:
        scores = scores.masked_fill(torch.ones(m, n, dtype=torch.bool).triu(1), -INF)
    return scores.softmax(-1)


SHAPES = [(1, 3, 3, 3, 3), (2, 4, 6, 9, 6), (3, 5, 7, 12, 20), (4, 8, 8, 20, 20), (2, 6, 10, 6, 10)]


@pytest.mark.parametrize("heads, m, n, M, N", SHAPES)
@pytest.mark.parametrize("kappa", [0.0, 0.87, 2.5])
def test_algorithm1_is_the_papers_pseudocode_cell_by_cell(heads, m, n, M, N, kappa):
    attention = random_attention(heads, m, n, seed=m * n + heads)
    ours = algorithm1(attention, kappa)(M, N).double()
    assert torch.allclose(ours, paper_loop(attention, M, N, kappa), atol=1e-12)


def test_algorithm1_on_a_causal_square_and_one_direction():
    attention = random_attention(2, 6, 6, seed=3, causal=True)
    for deltas in ((1,), (-1,), (0,), (1, 0)):
        ours = algorithm1(attention, 0.5, deltas)(15, 15).double()
        assert torch.allclose(ours, paper_loop(attention, 15, 15, 0.5, deltas), atol=1e-12)


def test_algorithm1_counts_verticals_from_the_left_and_anti_diagonals_from_the_right():
    attention = torch.zeros(1, 2, 3, dtype=torch.float64)
    attention[0, :, 0] = 1.0  # column 0: the only vertical kept
    bias = algorithm1(attention, 1.0, deltas=(0,))(2, 5)
    assert bias[0, 0].tolist() == [
        0.0,
        -INF,
        -INF,
        -INF,
        -INF,
    ]  # column 0 stays column 0 in a wider matrix
    attention = torch.zeros(1, 2, 3, dtype=torch.float64)
    attention[0, 0, 2], attention[0, 1, 1] = (
        1.0,
        1.0,
    )  # the anti-diagonal through the top-right corner
    bias = algorithm1(attention, 1.0, deltas=(-1,))(3, 5)
    assert [row.index(0.0) for row in bias[0].tolist()] == [
        4,
        3,
        2,
    ]  # still through the top-right corner


@pytest.mark.parametrize("heads, m, n, M, N", SHAPES)
@pytest.mark.parametrize(
    "delta, cross, kappa", [(-1, True, 4.5), (-1, True, 0.5), (1, False, 0.87), (1, False, 3.0)]
)
def test_authors_is_their_code_cell_by_cell(heads, m, n, M, N, delta, cross, kappa):
    attention = random_attention(heads, m, n, seed=7 * m + n, causal=not cross and m == n)
    ours = authors(attention, kappa, delta, cross)(M, N).double()
    assert torch.allclose(ours, authors_loop(attention, M, N, kappa, delta, cross), atol=1e-9)


def test_authors_keep_raw_sums_where_the_paper_keeps_differences():
    attention = torch.zeros(1, 3, 3, dtype=torch.float64)
    attention[0].diagonal().fill_(0.9)
    attention[0, :, 0] += 0.1
    sums = authors(attention, 0.87, 1, cross=False)(3, 3)
    means = algorithm1(attention, 0.87, deltas=(1,))(3, 3)
    assert sums[0, 2, 2].item() == pytest.approx(2.8)  # the main diagonal's sum, 1.0 + 0.9 + 0.9
    assert means[0, 2, 2].item() == 0.0  # its mean minus d_max (it is the maximum)
    assert sums[0, 2, 0].item() == AUTHORS_CLOSED  # a closed cell: −1e6, not −inf
