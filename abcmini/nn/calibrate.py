"""Attention Bias Calibration (paper §4 and Algorithm 1): averaged attention → line tables.

Three calibrations of one averaged attention ``Ā [h m n]`` (the trusted rows):

- ``algorithm1``: the paper's Algorithm 1 as printed, step by step.
- ``authors``: what the authors' code computes (shaoxiongduan/AttentionBiasCalibration at
  1d3a21d, ``src/calcBias.py``): sums for means, other statistics, raw values, one direction.
- ``procedure``: abcmini's, Algorithm 1 with the named ``RULES`` (``nn.rules``), some of which
  exist only because abcmini calibrates in one frame and tests in others.

``block_procedure`` is ABC for an output of one block per input number (``block_lines``, "ABC lines
counted in blocks"). Every step is tensor code, with no loop over matrix cells. Plain PyTorch:
task structure arrives as data (layout, padding masks); docs/recipe.md has the measurements.
"""

import functools

import torch
from einops import rearrange

from abcmini.nn.block_lines import (
    BlockCalibrated,
    BlockLines,
    cell_offsets,
    input_coordinates,
    line_index,
    output_coordinates,
)
from abcmini.nn.lines import NEG_INF, Calibrated, Layout, LineBias, in_segment, line_ids
from abcmini.nn.rules import DEFAULT, RULES

PAPER_DIRECTIONS = (1, -1, 0)  # "the diagonal, the anti-diagonal, and the vertical lines" (§4)
SELF_DIRECTIONS = (1, 0)  # rule "directions": an anti-diagonal of a causal square is never extended
CROSS_DIRECTIONS = (-1, 0)  # rule "directions": the digit alignments of reversed outputs
AUTHORS_CLOSED = -1e6  # calcBias.py:201 and 253: a closed cell of the authors' bias


def algorithm1(attention: torch.Tensor, kappa: float, deltas=PAPER_DIRECTIONS) -> LineBias:
    """The paper's Algorithm 1 on ``Ā [h m n]``, the last decoder layer's attention averaged over
    training inputs (step 1): the line tables ``Ã [h M N]`` is read from at any ``M × N``. Lines
    with Δ ≥ 0 are indexed from the top-left corner; for Δ < 0, ``Ā`` is first translated so
    that its top-right corner meets ``Ã``'s (the algorithm's footnote: its first column lands in
    column ``N − n + 1``, counted from 1). The caller puts the same bias in every layer (step 3).
    """
    tables, firsts = [], []
    for delta in deltas:  # for (1, Δ) ∈ D: iterate directions
        # 2.1, averaging across lines: d_l = (1/|l|) Σ_{(i,j) ∈ l} Ā_ij, per head
        d, _, first = line_average(attention, delta, right=True, verticals_right=False)
        # 2.2, eq. (3): d_l − d_max where d_l > μ + κσ (μ, σ over this direction's d_l), else −inf
        tables.append(dropoff(d, kappa))
        firsts.append(first)
    # 2.4, finalization: the directions merge by element-wise max, and a head left with only
    # −inf is transparent (all 0): ``LineBias`` does both when it materializes Ã at M × N.
    width = max(table.shape[-1] for table in tables)
    values = torch.stack(
        [torch.nn.functional.pad(t, (0, width - t.shape[-1]), value=NEG_INF) for t in tables]
    )
    return LineBias(tuple(deltas), tuple(firsts), values, right=True, verticals_right=False)


def authors(attention: torch.Tensor, kappa: float, delta: int, cross: bool) -> LineBias:
    """ABC as the authors' code computes it (``src/calcBias.py`` at 1d3a21d), one direction
    (cross Δ −1, self Δ 1: lines 510–511). Where it departs from ``algorithm1``:

    - a line's value is the sum of its cells, never divided by their count (lines 230–234);
    - μ and σ are taken over the set of distinct non-zero sums (lines 235–246);
    - a kept line keeps its raw sum: ``d_max`` is never subtracted (lines 250–253);
    - closed cells are −1e6, so a row with nothing open attends evenly (lines 201, 253);
    - cross-attention: no transparent head, and the top-right cell is set to 0 (line 333);
      self-attention: a head with nothing open is transparent (lines 500–501).
    """
    sums, cells, first = line_sums(attention, delta, right=True)
    kept = torch.full_like(sums, NEG_INF)
    for head, line in enumerate(sums):
        values = torch.unique(line[(line != 0) & (cells > 0)])  # valSet: distinct non-zero sums
        if len(values):  # an empty set closes every cell (mean 1e6)
            threshold = values.mean() + kappa * values.std(correction=0)
            kept[head] = torch.where((line >= threshold) & (cells > 0), line, kept[head])
    return LineBias(
        (delta,),
        (first,),
        rearrange(kept, "h l -> 1 h l"),
        right=True,
        transparent_empty=not cross,
        closed=AUTHORS_CLOSED,
        open_corner=cross,
    )


def line_sums(
    attention: torch.Tensor,
    delta: int,
    right: bool = True,
    skip_start: bool = False,
    segment=None,
    verticals_right: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``Σ_{(i,j) ∈ l} Ā_ij`` along every line of direction ``(1, Δ)``: ``(sums [h lines],
    cells [lines], first)``, column ``c`` holding line index ``first + c`` and ``cells`` how many
    cells of ``attention`` that line crosses. ``skip_start``: a sloped line (Δ ≠ 0) leaves out its
    cell in column 0, the start token (see ``calibrate``); a line with no cell left has sum 0 and
    ``cells = 0``. ``segment``: lines anchored in that segment of the columns
    (``lines.line_ids``), cells outside it left out."""
    heads, m, n = attention.shape
    ids = line_ids(m, n, delta, right, attention.device, segment, verticals_right)
    inside = in_segment(m, n, segment, attention.device)
    first = int(ids[inside].min())
    lines = int(ids[inside].max()) - first + 1
    counted = inside.clone()
    if skip_start and delta != 0:
        counted[:, 0] = False
    flat = rearrange((ids - first).clamp(0, lines - 1), "q k -> (q k)")
    weights = rearrange(attention * counted, "h q k -> h (q k)")
    sums = attention.new_zeros(heads, lines).index_add_(1, flat, weights)
    cells = torch.bincount(
        flat, weights=rearrange(counted, "q k -> (q k)").float(), minlength=lines
    ).long()
    return sums, cells, first


def line_average(
    attention: torch.Tensor,
    delta: int,
    right: bool = True,
    skip_start: bool = False,
    segment=None,
    verticals_right: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Step 2.1: ``d_l = (1/|l|) Σ_{(i,j) ∈ l} Ā_ij``: ``line_sums`` over the cells each line
    crosses (``d = 0`` for a line with none)."""
    sums, cells, first = line_sums(attention, delta, right, skip_start, segment, verticals_right)
    return sums / cells.clamp(min=1).to(attention.dtype), cells, first


def dropoff(d: torch.Tensor, kappa: float, supported: torch.Tensor | None = None) -> torch.Tensor:
    """Step 2.2, eq. (3), per head: ``dropoff(d_l − d_max)``, kept where ``d_l > μ + κσ``, −inf elsewhere.

    ``supported [lines]`` (default all): the lines long enough to be extended; ``μ``, ``σ`` and
    ``d_max`` are taken over them only, and every other line is −inf.
    """
    if supported is None:
        supported = torch.ones(d.shape[-1], dtype=torch.bool, device=d.device)
    if not supported.any():  # e.g. a steep direction in a few rows: nothing to extend
        return torch.full_like(d, NEG_INF)
    observed = d[..., supported]
    mu, sigma = (
        observed.mean(dim=-1, keepdim=True),
        observed.std(dim=-1, correction=0, keepdim=True),
    )
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


def pooled(parts: list) -> list:
    """Rule same_digit: ``line_average``'s ``(segment, d, cells, first)`` per segment, with the
    averages of the operands of one width (segments of more than one token) pooled over their
    cells, so that a line is kept on every operand of that width or on none."""
    groups = {}
    for index, (segment, *_) in enumerate(
        parts
    ):  # one width: the same lines, counted from its last digit
        if segment is not None and segment[1] > segment[0]:
            groups.setdefault(segment[1] - segment[0], []).append(index)
    parts = list(parts)
    for members in (members for members in groups.values() if len(members) > 1):
        cells = sum(parts[i][2] for i in members)
        d = sum(parts[i][1] * parts[i][2] for i in members) / cells.clamp(min=1)
        for i in members:
            parts[i] = (parts[i][0], d, parts[i][2], parts[i][3])
    return parts


def calibrate(
    attention: torch.Tensor,
    kappa: float,
    deltas=PAPER_DIRECTIONS,
    right: bool = True,
    *,
    layout: Layout | None = None,
    min_support: float = 0.0,
    padding: torch.Tensor | None = None,
    no_vertical: torch.Tensor | None = None,
    causal: float = 0.0,
    skip_start: bool = False,
    band: bool = False,
    transparent_empty: bool = True,
    kappa_vertical: float | None = None,
    same_digit: bool = False,
) -> LineBias:
    """Algorithm 1 on ``Ā [h m n]`` (the trusted rows): the line tables ``Ã`` is read from at any ``M × N``.

    ``right``: cross-attention (True: Δ ≤ 0 lines counted from the top-right corner, the
    algorithm's footnote) or decoder self-attention (False), see ``lines.line_ids``. With the
    other defaults this is the paper's algorithm; each keyword is one rule of ``RULES``:
    ``layout`` (operand_lines: one table per input part, the dropoff's statistics pooled);
    ``min_support`` (support: lines crossing that fraction of the ``m`` rows, and the last row);
    ``padding [n]`` (padding: a kept line reads a real token on ``min_support`` of the rows);
    ``no_vertical [n]`` (padding, marker_verticals: columns with no vertical); ``causal``
    (a kept line crosses that fraction of ``m`` cells the causal mask opens); ``skip_start``;
    ``band``; ``transparent_empty`` (False: silent_empty); ``kappa_vertical`` (vertical_kappa0);
    ``same_digit`` (with ``layout``).
    """
    _, m, n = attention.shape
    segments = list(layout) if layout else [None]
    every = torch.ones(m, n, dtype=torch.bool, device=attention.device)
    last_row = torch.zeros_like(every)
    last_row[-1] = True
    firsts, kept_tables = [], []
    for delta in deltas:  # for (1, Δ) ∈ D
        # Step 2.1, averaging across lines (in each segment when lines are anchored at operands)
        parts = [
            (segment, *line_average(attention, delta, right, skip_start, segment))
            for segment in segments
        ]
        if same_digit:
            parts = pooled(parts)
        d = torch.cat([part[1] for part in parts], dim=-1)
        supported = torch.cat([part[2] for part in parts]) >= min_support * m
        # Step 2.2, eq. (3): Ã on line l is dropoff(d_l − d_max), threshold μ + κσ; −inf off every line of Ā
        factor = kappa if delta != 0 or kappa_vertical is None else kappa_vertical
        kept_parts = dropoff(d, factor, supported).split([part[1].shape[-1] for part in parts], -1)
        for (segment, _, _, first), kept in zip(parts, kept_parts):
            counts = functools.partial(line_counts, delta=delta, right=right, segment=segment)
            if min_support > 0:  # support: a line must reach the last trusted row
                kept = kept.masked_fill(counts(last_row) == 0, NEG_INF)
            if causal > 0:  # causal: enough cells a row may attend to
                kept = kept.masked_fill(counts(every.tril()) < causal * m, NEG_INF)
            if padding is not None:  # padding: enough rows where the line reads a real token
                kept = kept.masked_fill(
                    counts((~padding).expand(m, -1)) < max(1.0, min_support * m), NEG_INF
                )
            if no_vertical is not None and delta == 0:  # padding, marker_verticals
                kept = kept.masked_fill(counts(no_vertical.expand(m, -1)) > 0, NEG_INF)
            if band and delta == 1:  # band
                kept = nearest_band(kept, first)
            firsts.append(first)
            kept_tables.append(kept)
    # Step 2.4, finalization: directions merge by element-wise max and a head left with nothing
    # open is transparent (all 0); ``LineBias`` does both when it materializes Ã at any M × N.
    width = max(kept.shape[-1] for kept in kept_tables)
    values = torch.stack(
        [
            torch.nn.functional.pad(kept, (0, width - kept.shape[-1]), value=NEG_INF)
            for kept in kept_tables
        ]
    )
    indices = tuple(range(len(segments))) if layout else ()
    return LineBias(
        tuple(d for d in deltas for _ in segments),
        tuple(firsts),
        values,
        right,
        transparent_empty,
        bool(layout),
        indices * len(deltas),
    )


def marker_columns(layout: Layout, n: int) -> torch.Tensor:
    """``[n]``: the columns of the input's one-token parts (start marker, operator, N×1's
    multiplier), the only ones a vertical reads the same token on at every length."""
    columns = torch.zeros(n, dtype=torch.bool)
    for first, last in layout:
        columns[first] |= first == last
    return columns


@torch.no_grad()
def average_attention(model, example, trusted_rows: int, batch_size: int = 500, layers=(-1,)):
    """Steps 1–2: ``Ā``, decoder layers' attention probabilities (default the last, as in the
    paper), averaged over ``example``, first ``trusted_rows`` output rows only.

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
        tgt_in = torch.cat(
            [example.tgt_in[start : start + batch_size, :1].to(device), tokens[:, :-1]], dim=1
        )
        _, attention = model(src, tgt_in, need_weights=True)
        for kind in totals:
            totals[kind] = totals[kind] + torch.stack(
                [attention[layer][kind].sum(dim=0) for layer in layers]
            )
    rows = min(trusted_rows, steps)
    return (totals["self"] / len(example.src))[..., :rows, :rows], (
        totals["cross"] / len(example.src)
    )[..., :rows, :]


def calibrated_layers(depth: int, rules) -> tuple[int, ...]:
    """The decoder layers whose attention is calibrated: the last (step 1), every one with unite_layers."""
    return tuple(range(depth)) if "unite_layers" in rules else (depth - 1,)


def procedure(
    self_avg: torch.Tensor,
    cross_avg: torch.Tensor,
    layout: Layout,
    src_padding: torch.Tensor,
    out_padding: torch.Tensor,
    kappa_self: float,
    kappa_cross: float,
    min_support: float,
    rules=DEFAULT,
) -> Calibrated:
    """ABC on ``Ā`` of every decoder layer (``[layers h q k]``): Algorithm 1 on the layers of
    ``calibrated_layers``, self- and cross-attention apart, with each rule named in ``rules``
    (``()``: the paper as written), their lines united into one bias for every layer (step 3).
    ``src_padding [n s]``, ``out_padding [n q]``: which cells of each calibration input are padding."""
    on = set(rules)
    if on - set(RULES):
        raise ValueError(
            f"unknown calibration rules {sorted(on - set(RULES))}; rules are {', '.join(RULES)}"
        )
    n_src, n_out = src_padding.shape[-1], out_padding.shape[-1]
    cross_vertical, self_vertical = (
        torch.zeros(n_src, dtype=torch.bool),
        torch.zeros(n_out, dtype=torch.bool),
    )
    if "padding" in on:
        cross_vertical, self_vertical = src_padding.any(dim=0), out_padding.any(dim=0)
    if "marker_verticals" in on:
        cross_vertical = cross_vertical | ~marker_columns(layout, n_src)
        self_vertical = self_vertical | (torch.arange(n_out) > 0)  # SOS, the decoder's one marker
    support = min_support if "support" in on else 0.0
    shared = {
        "min_support": support,
        "transparent_empty": "silent_empty" not in on,
        "kappa_vertical": 0.0 if "vertical_kappa0" in on else None,
    }
    cross = {
        "layout": layout if "operand_lines" in on else None,
        "no_vertical": cross_vertical,
        "padding": src_padding.all(dim=0) if "padding" in on else None,
        "same_digit": "same_digit" in on,
    }
    self_ = {
        "no_vertical": self_vertical,
        "causal": min_support if "causal" in on else 0.0,
        "skip_start": "skip_start" in on,
        "band": "band" in on,
    }
    self_deltas, cross_deltas = (
        (SELF_DIRECTIONS, CROSS_DIRECTIONS) if "directions" in on else (PAPER_DIRECTIONS,) * 2
    )
    biases = [
        Calibrated(
            calibrate(self_avg[layer], kappa_self, self_deltas, right=False, **self_, **shared),
            calibrate(cross_avg[layer], kappa_cross, cross_deltas, right=True, **cross, **shared),
        )
        for layer in calibrated_layers(len(self_avg), on)
    ]
    return functools.reduce(Calibrated.union, biases)


BLOCK_REACH = 1  # block lines reach the neighbouring blocks only (calibrate_blocks)


def block_band(kept: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """``kept [h d ℓ]`` cut, per head and block offset, to the run of kept lines through column
    ``anchors[d]`` (the digit a row reads first): a lone lag line, apart from that run, is cut."""
    closed = torch.nn.functional.pad(
        (~torch.isfinite(kept)).long().cumsum(-1), (1, 0)
    )  # closed lines in columns < c
    column = torch.arange(kept.shape[-1], device=kept.device)
    anchor = rearrange(anchors, "d -> d 1")
    low, high = torch.minimum(column, anchor), torch.maximum(column, anchor)
    between = closed[..., 1:].gather(-1, high.expand_as(kept)) - closed[..., :-1].gather(
        -1, low.expand_as(kept)
    )
    return kept.masked_fill(between > 0, NEG_INF)


def calibrate_blocks(
    attention: torch.Tensor,
    blocks: int,
    kappa: float,
    cross: bool,
    min_support: float = 0.0,
    kappa_markers: float | None = None,
    band: bool = False,
    products: bool = False,
    growing: bool = False,
) -> BlockLines:
    """Algorithm 1's steps 2.1–2.2 over block lines on ``Ā [h m n]`` (a whole block output):
    ``d_l`` the mean attention on each line's cells, kept where ``d_l > μ + κσ`` per head and
    direction (the digit lines; the markers' lines) with value ``d_l − d_max`` (``dropoff``).
    Every line enters the statistics, but only those within ``BLOCK_REACH`` blocks are extended:
    a running sum reads its own block and its neighbours, and a line two blocks away lets a model
    count blocks from the start (docs/multi-operand.md). ``min_support``: a line must cross that fraction of the ``m`` rows
    (rule ``support``), as a causal row never sees later blocks; ``kappa_markers``: the markers'
    own κ (rule ``vertical_kappa0``: 0); ``band``: each block offset's digit lines cut to the run
    through the digit a row reads first (rule ``band``). ``products``: multiply's cross-attention,
    lines on the input numbers a and b (``block_lines.cell_offsets``); a row reads a only where its
    block's digit product lands, so support counts against the number's best-covered line, and
    reads two digits of a, its product's and its carry's (ℓ 0 and −1), so no band: a head may
    read either alone;
    ``growing``: each output block one token wider than the one before (multiply's)."""
    heads, m, n = attention.shape
    rows = output_coordinates(m, blocks, keys=False, device=attention.device, growing=growing)
    keys = (
        input_coordinates(n, 2 if products else blocks, attention.device)
        if cross
        else output_coordinates(n, blocks, keys=True, device=attention.device, growing=growing)
    )
    d_all, l_all = cell_offsets(rows, keys, products)
    visible = torch.ones(m, n, dtype=torch.bool, device=attention.device)
    visible = visible if cross else visible.tril()
    d_first, d_count = (
        int(d_all[visible].min()),
        int(d_all[visible].max() - d_all[visible].min()) + 1,
    )
    l_first, l_count = (
        int(l_all[visible].min()),
        int(l_all[visible].max() - l_all[visible].min()) + 1,
    )
    index, inside = line_index(rows, keys, d_first, d_count, l_first, l_count, products)
    counted = rearrange(inside & visible, "q k -> (q k)")
    flat = rearrange(index, "q k -> (q k)")[counted]
    size = d_count * (l_count + 1)
    sums = attention.new_zeros(heads, size).index_add_(
        1, flat, rearrange(attention, "h q k -> h (q k)")[:, counted]
    )
    cells = rearrange(torch.bincount(flat, minlength=size), "(d l) -> d l", d=d_count)
    d_l = sums.view(heads, d_count, -1) / cells.clamp(min=1)
    reach = (
        cells[:, :-1].amax(dim=1, keepdim=True) if products else torch.full_like(cells[:, :1], m)
    )  # rows a line could cross
    supported = cells >= (min_support * reach).clamp(min=1)
    # two directions, each with its own dropoff statistics as in Algorithm 1: digit lines, and
    # the markers' lines (verticals: a marker sits at the same place of its block at every width)
    digits = dropoff(
        rearrange(d_l[..., :-1], "h d l -> h (d l)"),
        kappa,
        rearrange(supported[:, :-1], "d l -> (d l)"),
    )
    markers = dropoff(
        d_l[..., -1], kappa if kappa_markers is None else kappa_markers, supported[:, -1]
    )
    digits = rearrange(digits, "h (d l) -> h d l", d=d_count)
    if (
        band and not products
    ):  # a row reads first the same digit (its own block: the digit before it, the row's own token)
        anchors = -l_first - (
            torch.arange(d_count, device=attention.device) + d_first == 0
        ).long() * (not cross)
        digits = block_band(digits, anchors)
    kept = torch.cat([digits, rearrange(markers, "h d -> h d 1")], dim=-1)
    far = rearrange(
        (torch.arange(d_count, device=attention.device) + d_first).abs() > BLOCK_REACH, "d -> 1 d 1"
    )
    return BlockLines(
        kept if products else kept.masked_fill(far, NEG_INF), d_first, l_first, cross, products
    )


def rank_own(lines: BlockLines) -> BlockLines:
    """Rule ``rank_own`` on a self-attention table: a head with the previous sum's digit
    ``(−1, 0)`` loses the row's own digit lines ``(0, ℓ < 0)``, and every other head's are ranked
    by distance, ``(0, ℓ)`` at ``ℓ + 1`` (0, −1, −2, …). In rows whose training sums were all 0,
    every line a head reads holds a 0 and content cannot teach a choice among them; the bias
    makes it (docs/multi-operand.md, "Why seeds 1 and 2 needed rule `rank_own`")."""
    values = lines.values.clone()
    own, zero = -lines.d_first, -lines.l_first  # the table's indices of block offset 0 and ℓ 0
    ell = torch.arange(values.shape[-1] - 1, device=values.device) + lines.l_first
    below = rearrange(ell < 0, "l -> 1 l")
    row = values[:, own, :-1]
    previous = (
        torch.isfinite(values[:, own - 1, zero])
        if own >= 1 and zero >= 0
        else torch.zeros(values.shape[0], dtype=torch.bool, device=values.device)
    )  # no (−1, 0) in the table
    reads_previous = rearrange(previous, "h -> h 1")
    ranked = torch.where(torch.isfinite(row), (ell + 1).to(row.dtype), row)
    values[:, own, :-1] = torch.where(below, torch.where(reads_previous, NEG_INF, ranked), row)
    return BlockLines(values, lines.d_first, lines.l_first, lines.cross, lines.products)


def block_rules(min_support: float, rules=DEFAULT) -> dict:
    """``calibrate_blocks``' settings from the ``rules`` that concern block lines: ``support``,
    ``vertical_kappa0`` and ``band``."""
    return {
        "min_support": min_support if "support" in rules else 0.0,
        "kappa_markers": 0.0 if "vertical_kappa0" in rules else None,
        "band": "band" in rules,
    }


def block_procedure(
    self_avg: torch.Tensor,
    cross_avg: torch.Tensor,
    blocks: int,
    kappa_self: float,
    kappa_cross: float,
    min_support: float,
    rules=DEFAULT,
    products: bool = False,
) -> BlockCalibrated:
    """ABC on ``Ā`` of every decoder layer (``[layers h q k]``) of a block output: block lines
    per layer, self- and cross-attention apart, united into one bias for every layer; of the
    ``rules``, those that concern block lines: ``support``, ``vertical_kappa0``, ``band`` and,
    on the united self-attention table, ``rank_own`` (``products``: multiply's cross lines and
    growing blocks, ``calibrate_blocks``)."""
    rule = {**block_rules(min_support, rules), "growing": products}
    tables = [
        BlockCalibrated(
            calibrate_blocks(s, blocks, kappa_self, False, **rule),
            calibrate_blocks(c, blocks, kappa_cross, True, **rule, products=products),
        )
        for s, c in zip(self_avg, cross_avg)
    ]
    united = functools.reduce(BlockCalibrated.union, tables)
    if "rank_own" in rules:  # running sums of either task: the previous sum's digit, a carry below
        return BlockCalibrated(rank_own(united.self_attention), united.cross_attention)
    return united
