"""Attention Bias Calibration (paper §4, Algorithm 1): averaged attention → line tables → bias.

Work in progress: the algorithm on an averaged attention tensor (line averages, dropoff,
merge, materialization at any size). Capturing the attention from a trained model and the
``abcmini calibrate`` command come next.

A direction ``(1, Δ)`` moves one row down and ``Δ`` columns right. Every cell ``(i, j)`` of an
``m × n`` matrix lies on one line of each direction; its line index is ``j − Δ·i``, counted
from the top-left corner for Δ > 0 (diagonals) and from the top-right corner (minus ``n − 1``)
for Δ ≤ 0 (anti-diagonals, verticals), so that the least-significant-digit corners line up
when the matrix grows (the footnote of the paper's Algorithm 1). The indices match the
labels ``d_l`` of the paper's Figure "directions ABC explores".

A calibrated bias is therefore a table (direction × head × line → value), materialized for
any ``M × N``: a cell takes the value of its line in each direction (−inf for a line never
observed or dropped), and the directions merge by element-wise max.
"""

from dataclasses import dataclass

import torch
from einops import rearrange

NEG_INF = float("-inf")
DIRECTIONS = (1, -1, 0)  # diagonal, anti-diagonal, vertical


def line_ids(n_q: int, n_k: int, delta: int, device=None) -> torch.Tensor:
    """``[q k]`` index of the line of direction ``(1, Δ)`` through each cell."""
    i = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    return j - delta * i - (0 if delta > 0 else n_k - 1)


def line_average(attention: torch.Tensor, delta: int) -> tuple[torch.Tensor, int]:
    """``d_l``: the mean of ``attention [h m n]`` along every line of direction ``Δ``.

    Returns ``([h lines], first)``: column ``c`` holds line index ``first + c``.
    """
    heads, m, n = attention.shape
    ids = line_ids(m, n, delta, attention.device)
    first = int(ids.min())
    flat = rearrange(ids - first, "q k -> (q k)")
    lines = int(flat.max()) + 1
    sums = attention.new_zeros(heads, lines).index_add_(1, flat, rearrange(attention, "h q k -> h (q k)"))
    counts = torch.bincount(flat, minlength=lines).to(attention.dtype)
    return sums / counts, first


def dropoff(d: torch.Tensor, kappa: float) -> torch.Tensor:
    """Per head: ``d_l − d_max`` where ``d_l > μ + κσ`` (over that head's lines), −inf elsewhere."""
    mu, sigma = d.mean(dim=-1, keepdim=True), d.std(dim=-1, correction=0, keepdim=True)
    d_max = d.max(dim=-1, keepdim=True).values
    return torch.where(d > mu + kappa * sigma, d - d_max, torch.full_like(d, NEG_INF))


@dataclass
class LineBias:
    """A calibrated bias: ``values [directions heads lines]`` (−inf padded) with line offsets."""

    deltas: tuple[int, ...]
    firsts: tuple[int, ...]  # line index of column 0 of ``values``, per direction
    values: torch.Tensor

    @property
    def transparent(self) -> torch.Tensor:
        """``[heads]``: heads where no line survived the dropoff (they get an all-zero bias)."""
        return ~torch.isfinite(self.values).any(dim=-1).any(dim=0)

    def __call__(self, n_q: int, n_k: int, device=None) -> torch.Tensor:
        """Materialize the ``[h q k]`` bias for an ``n_q × n_k`` attention matrix."""
        values = self.values.to(device)
        heads, lines = values.shape[1:]
        merged = torch.full((heads, n_q, n_k), NEG_INF, device=device)
        for index, (delta, first) in enumerate(zip(self.deltas, self.firsts)):
            ids = line_ids(n_q, n_k, delta, device) - first
            known = (ids >= 0) & (ids < lines)
            cell = values[index][:, ids.clamp(0, lines - 1)]
            merged = torch.maximum(merged, cell.masked_fill(~known, NEG_INF))
        merged[self.transparent.to(device)] = 0.0
        empty = ~torch.isfinite(merged).any(dim=-1)  # no-NaN rule, as for ABS: open column 0
        merged[..., 0] = merged[..., 0].masked_fill(empty, 0.0)
        return merged


def calibrate(attention: torch.Tensor, kappa: float, deltas=DIRECTIONS) -> LineBias:
    """ABC on an averaged attention tensor ``Ā [h m n]`` (already restricted to trusted rows)."""
    tables = [line_average(attention, delta) for delta in deltas]
    width = max(d.shape[-1] for d, _ in tables)
    values = torch.stack([
        torch.nn.functional.pad(dropoff(d, kappa), (0, width - d.shape[-1]), value=NEG_INF) for d, _ in tables
    ])
    return LineBias(tuple(deltas), tuple(first for _, first in tables), values)

