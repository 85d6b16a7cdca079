"""Attention Bias Calibration (paper §4, Algorithm 1, steps 3–5): averaged attention → line tables.

``calibrate`` turns an averaged attention tensor ``Ā [h m n]`` of any model into ``LineBias``
tables (direction × head × line → value; ``abcmini.biases``) that materialize at any length.
Line indices follow ``biases.line_ids``: they match the labels ``d_l`` of the paper's figure
"directions ABC explores". Every step is tensor code, with no loop over matrix cells. The rules
beyond the paper (support, padding, silent empty heads, the start cell) each fix a measured
failure: docs/recipe.md. ABC steps 1–2 and 6 for an abcmini run (decoding training inputs,
averaging, saving the bias) are ``abcmini.calibration``'s. Plain PyTorch: nothing here knows the
tasks, the recipes or the run layer.
"""

import functools

import torch
from einops import rearrange

from abcmini.biases import NEG_INF, Layout, LineBias, in_segment, line_ids


def line_average(attention: torch.Tensor, delta: int, right: bool = True, skip_start: bool = False,
                 segment=None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``d_l``: the mean of ``attention [h m n]`` along every line of direction ``Δ``.

    Returns ``(d [h lines], cells [lines], first)``: column ``c`` holds line index ``first + c``,
    ``cells`` how many cells of ``attention`` that line crosses. ``skip_start``: a sloped line
    (Δ ≠ 0) leaves out its cell in column 0, the start token (see ``calibrate``); a line with no
    cell left has ``d = 0`` and ``cells = 0``. ``segment``: lines anchored in that segment of
    the columns (``biases.line_ids``), cells outside it left out.
    """
    heads, m, n = attention.shape
    ids = line_ids(m, n, delta, right, attention.device, segment)
    inside = in_segment(m, n, segment, attention.device)
    first = int(ids[inside].min())
    lines = int(ids[inside].max()) - first + 1
    counted = inside.clone()
    if skip_start and delta != 0:
        counted[:, 0] = False
    flat = rearrange((ids - first).clamp(0, lines - 1), "q k -> (q k)")
    weights = rearrange(attention * counted, "h q k -> h (q k)")
    sums = attention.new_zeros(heads, lines).index_add_(1, flat, weights)
    cells = torch.bincount(flat, weights=rearrange(counted, "q k -> (q k)").float(), minlength=lines).long()
    return sums / cells.clamp(min=1).to(attention.dtype), cells, first


def dropoff(d: torch.Tensor, kappa: float, supported: torch.Tensor | None = None) -> torch.Tensor:
    """Per head: ``d_l − d_max`` where ``d_l > μ + κσ``, −inf elsewhere.

    ``supported [lines]`` (default all): the lines long enough to be extended; ``μ``, ``σ`` and
    ``d_max`` are taken over them only, and every other line is −inf.
    """
    if supported is None:
        supported = torch.ones(d.shape[-1], dtype=torch.bool, device=d.device)
    if not supported.any():  # e.g. a steep direction in a few rows: nothing to extend
        return torch.full_like(d, NEG_INF)
    observed = d[..., supported]
    mu, sigma = observed.mean(dim=-1, keepdim=True), observed.std(dim=-1, correction=0, keepdim=True)
    d_max = observed.max(dim=-1, keepdim=True).values
    return torch.where((d > mu + kappa * sigma) & supported, d - d_max, torch.full_like(d, NEG_INF))


def line_counts(mask: torch.Tensor, delta: int, right: bool = True, segment=None) -> torch.Tensor:
    """``[lines]`` (indexed as by ``line_average``): how many true cells of ``mask [m n]`` each
    line of direction ``Δ`` crosses (of the last row, say, or of the columns that are not padding)."""
    inside = in_segment(*mask.shape, segment, mask.device)
    ids = line_ids(*mask.shape, delta, right, mask.device, segment)
    low, high = int(ids[inside].min()), int(ids[inside].max())
    return torch.bincount(ids[mask & inside] - low, minlength=high - low + 1)


def calibrate(attention: torch.Tensor, kappa: float, deltas, right: bool = True, min_support: float = 0.5,
              padding: torch.Tensor | None = None, no_vertical: torch.Tensor | None = None, causal: bool = False,
              transparent_empty: bool = True, skip_start: bool = False, layout: Layout | None = None) -> LineBias:
    """ABC steps 3–5 on an averaged attention tensor ``Ā [h m n]`` (trusted rows only).

    ``right``: cross-attention (True) or decoder self-attention (False), see ``line_ids``.
    ``layout`` (the keys' segments, ``biases.segments_of``): lines counted per segment, one table
    per direction and segment; the dropoff's statistics still pool every line of a direction.
    Rules beyond the paper's (docs/recipe.md gives the failure each fixes; min_support = 0 and the
    defaults of the others give the paper's Algorithm 1):
    ``min_support``: extend only lines crossing that fraction of the ``m`` rows, and the last row;
    ``padding [n]`` (key columns that are padding in every input): a kept line must read a real
    token on ``min_support`` of the rows; ``no_vertical [n]``: no vertical on such a column
    (padding in some input; with ``verticals: markers``, every column but a one-token part's);
    ``causal``: a kept line must cross ``min_support·m`` cells a row can attend to;
    ``skip_start``: sloped lines are averaged without their cell in column 0;
    ``transparent_empty``: a head with no line reads everything (the paper) or nothing but column 0.
    """
    _, m, n = attention.shape
    segments = list(layout) if layout else [None]
    last_row = torch.zeros(m, n, dtype=torch.bool, device=attention.device)
    last_row[-1] = True
    tables, kept_tables = [], []
    for delta in deltas:
        parts = [(segment, *line_average(attention, delta, right, skip_start, segment)) for segment in segments]
        d = torch.cat([part[1] for part in parts], dim=-1)
        supported = torch.cat([part[2] for part in parts]) >= min_support * m
        for segment, part, kept in zip(segments, parts, dropoff(d, kappa, supported).split([p[1].shape[-1] for p in parts], -1)):
            counts = functools.partial(line_counts, delta=delta, right=right, segment=segment)
            if min_support > 0:
                kept = kept.masked_fill(counts(last_row) == 0, NEG_INF)
            if min_support > 0 and causal:
                kept = kept.masked_fill(counts(torch.ones(m, n, dtype=torch.bool, device=attention.device).tril()) < min_support * m, NEG_INF)
            if padding is not None:
                kept = kept.masked_fill(counts((~padding).expand(m, -1)) < max(1.0, min_support * m), NEG_INF)
            if no_vertical is not None and delta == 0:
                kept = kept.masked_fill(counts(no_vertical.expand(m, -1)) > 0, NEG_INF)
            tables.append(part[3])
            kept_tables.append(kept)
    width = max(kept.shape[-1] for kept in kept_tables)
    values = torch.stack([torch.nn.functional.pad(kept, (0, width - kept.shape[-1]), value=NEG_INF) for kept in kept_tables])
    indices = tuple(range(len(segments))) if layout else ()
    return LineBias(tuple(d for d in deltas for _ in segments), tuple(tables), values, right, transparent_empty, bool(layout),
                    indices * len(deltas))


def marker_columns(layout: Layout, n: int) -> torch.Tensor:
    """``[n]``: the columns of the input's one-token parts (start marker, operator, N×1's
    multiplier), the only ones a vertical reads the same token on at every length."""
    columns = torch.zeros(n, dtype=torch.bool)
    for first, last in layout:
        columns[first] |= first == last
    return columns
