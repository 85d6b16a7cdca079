"""Attention Bias Calibration (paper §4, Algorithm 1, steps 3–5): averaged attention → line tables.

``calibrate`` turns an averaged attention tensor ``Ā [h m n]`` of any model into ``LineBias``
tables (direction × head × line → value; ``abcmini.biases``) that materialize at any length.
Line indices follow ``biases.line_ids``: they match the labels ``d_l`` of the paper's figure
"directions ABC explores". Every step is tensor code, with no loop over matrix cells. The rules
beyond the paper (support, padding, silent empty heads, the start cell) each fix a measured
failure: docs/recipe.md. ``calibrate_layers`` is the one procedure on every decoder layer's
averaged attention (``average_attention``). Loading a run, sampling its training inputs and saving
the bias are the run layer's (``pipeline.calibrate_run``). Plain PyTorch: nothing here knows the
tasks, the recipes or the run layer; task structure arrives as data (layout, padding masks).
"""

import functools

import torch
from einops import rearrange

from abcmini.biases import NEG_INF, Calibrated, Layout, LineBias, in_segment, line_ids

SELF_DIRECTIONS = (1, 0)  # diagonals and verticals; an anti-diagonal of a causal square is never extended
CROSS_DIRECTIONS = (-1, 0)  # anti-diagonals and verticals: the digit alignments of reversed outputs


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


def nearest_band(kept: torch.Tensor, first: int) -> torch.Tensor:
    """``kept [h lines]`` (line index ``first + column``) of a causal matrix's diagonals, cut per
    head to the band from the row's own token back (lines 0, −1, … up to the first dropped one)."""
    own = -first  # the column of line 0
    band = torch.zeros_like(kept, dtype=torch.bool)
    band[..., : own + 1] = (kept[..., : own + 1] > NEG_INF).flip(-1).cumprod(-1).flip(-1).bool()
    return kept.masked_fill(~band, NEG_INF)


def calibrate(attention: torch.Tensor, kappa: float, deltas, right: bool = True, min_support: float = 0.5,
              padding: torch.Tensor | None = None, no_vertical: torch.Tensor | None = None, causal: bool = False,
              transparent_empty: bool = True, skip_start: bool = False, layout: Layout | None = None,
              kappa_vertical: float | None = None, band: bool = False) -> LineBias:
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
    ``transparent_empty``: a head with no line reads everything (the paper) or nothing but column 0;
    ``kappa_vertical``: the dropoff factor of verticals (default ``kappa``);
    ``band``: a causal matrix's diagonals kept only as a band from the row's own token back.
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
        factor = kappa if delta != 0 or kappa_vertical is None else kappa_vertical
        for segment, part, kept in zip(segments, parts, dropoff(d, factor, supported).split([p[1].shape[-1] for p in parts], -1)):
            counts = functools.partial(line_counts, delta=delta, right=right, segment=segment)
            if min_support > 0:
                kept = kept.masked_fill(counts(last_row) == 0, NEG_INF)
            if min_support > 0 and causal:
                kept = kept.masked_fill(counts(torch.ones(m, n, dtype=torch.bool, device=attention.device).tril()) < min_support * m, NEG_INF)
            if padding is not None:
                kept = kept.masked_fill(counts((~padding).expand(m, -1)) < max(1.0, min_support * m), NEG_INF)
            if no_vertical is not None and delta == 0:
                kept = kept.masked_fill(counts(no_vertical.expand(m, -1)) > 0, NEG_INF)
            if band and delta == 1:
                kept = nearest_band(kept, part[3])
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


@torch.no_grad()
def average_attention(model, example, trusted_rows: int, batch_size: int = 500, layers=(-1,)):
    """``Ā``: decoder layers' attention probabilities (default the last, as in the paper),
    averaged over ``example``, first ``trusted_rows`` output rows only.

    Each input is decoded greedily; teacher forcing the decoded tokens reproduces the decoding
    attention exactly (same prefixes). Returns ``(self [layers h r r], cross [layers h r s])``.
    """
    model.eval()
    device = next(model.parameters()).device
    steps = example.tgt_out.shape[1]
    totals = {"self": 0.0, "cross": 0.0}
    for start in range(0, len(example.src), batch_size):
        src = example.src[start : start + batch_size].to(device)
        tokens = model.greedy(src, steps)
        tgt_in = torch.cat([example.tgt_in[start : start + batch_size, :1].to(device), tokens[:, :-1]], dim=1)
        _, attention = model(src, tgt_in, need_weights=True)
        for kind in totals:
            totals[kind] = totals[kind] + torch.stack([attention[layer][kind].sum(dim=0) for layer in layers])
    rows = min(trusted_rows, steps)
    return (totals["self"] / len(example.src))[..., :rows, :rows], (totals["cross"] / len(example.src))[..., :rows, :]


def calibrate_layers(self_avg: torch.Tensor, cross_avg: torch.Tensor, layout: Layout, src_padding: torch.Tensor,
                     out_padding: torch.Tensor, kappa_self: float, kappa_cross: float, min_support: float) -> Calibrated:
    """The one procedure (docs/recipe.md) on ``Ā`` of every decoder layer (``[layers h q k]``):
    each layer calibrated (cross lines anchored in ``layout``; verticals only on its one-token
    parts, kept wherever a head reads one more than its direction's average line; self-attention's
    diagonals a band from the row's own token back; no line on padding (``src_padding [n s]``,
    ``out_padding [n q]``: which cells of each calibration input are padding); SOS left out of
    diagonals; empty heads silent), and their lines united into one bias for every layer."""
    cross_rules = {"padding": src_padding.all(dim=0), "no_vertical": src_padding.any(dim=0) | ~marker_columns(layout, src_padding.shape[-1])}
    self_rules = {"no_vertical": out_padding.any(dim=0) | (torch.arange(out_padding.shape[-1]) > 0)}
    rules = {"min_support": min_support, "transparent_empty": False, "kappa_vertical": 0.0}
    layers = [Calibrated(calibrate(s, kappa_self, SELF_DIRECTIONS, right=False, causal=True, skip_start=True, band=True, **self_rules, **rules),
                         calibrate(c, kappa_cross, CROSS_DIRECTIONS, right=True, layout=layout, **cross_rules, **rules))
              for s, c in zip(self_avg, cross_avg)]
    return functools.reduce(Calibrated.union, layers)
