"""Attention bias scaffolds, added to the pre-softmax scores of every decoder layer: ABS
windows (paper appendix, "Windowed Attention Biasing") and ABC's calibrated line tables (paper
§4 and §6.1). A scaffold is asked for the size it must cover, ``scaffold(n_q, n_src, device) →
(self_bias, cross_bias)``, so one scaffold serves training, every test length and every step of
cached decoding.

Scaffolds are ``nn.Module``s: a calibrated bias's line values are a buffer, so they travel with
``.to()`` and ``state_dict()`` inside the model that holds them.

Both hold 0 where attention is open and −inf where it is closed, and follow one no-NaN rule:
every row keeps at least one open cell (ABS: the key nearest to its window; ABC: column 0, the
input's start marker or SOS).

ABC's line tables: a direction ``(1, Δ)`` moves one row down and ``Δ`` columns right. Every cell
``(i, j)`` of an ``m × n`` matrix lies on one line of each direction, with index ``j − Δ·i``,
counted from the top-left corner for Δ > 0 and from the top-right corner (minus ``n − 1``) for
Δ ≤ 0, so that the least-significant-digit corners line up when the matrix grows (the footnote
of the paper's Algorithm 1). A cell takes its line's value in each direction (−inf for a line
never observed or dropped) and the directions merge by element-wise max.

Anchored lines are counted per segment of the input instead (the start marker, each operand,
the operator), from the segment's last column: its least significant digit. A line that reads
operand ``a`` then reads ``a`` in a frame of any width, where a corner-anchored one moves with the
frame. The segments reach this module as data, a *layout* (``segments_of`` a digit mask), never
as a task name, so any tokenizer whose numbers are runs of digit tokens can use it.

Plain PyTorch: nothing here knows the tasks, the recipes or the run layer.
"""

import torch
from einops import rearrange
from torch import nn

NEG_INF = float("-inf")
Layout = tuple[tuple[int, int], ...]  # (first, last) columns of each input segment, in order


def segments_of(is_digit: torch.Tensor) -> Layout:
    """The layout of one input, ``is_digit [n]`` (True on digit tokens): each maximal run of
    digits is a segment (an operand), every other token one of its own (a marker, an operator)."""
    flags, segments = is_digit.tolist(), []
    for column, digit in enumerate(flags):
        if digit and segments and flags[column - 1]:
            segments[-1] = (segments[-1][0], column)
        else:
            segments.append((column, column))
    return tuple(segments)


def window_self_bias(n_q: int, n_k: int, w: int, device=None) -> torch.Tensor:
    """``[q k]``: open on the main diagonal and the ``w`` diagonals below it (0 ≤ i − j ≤ w)."""
    i = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    offset = i - j
    return torch.zeros(n_q, n_k, device=device).masked_fill((offset < 0) | (offset > w), NEG_INF)


def window_cross_bias(
    n_q: int, n_k: int, w: int, binary: bool = False, device=None, pairs: bool = False
) -> torch.Tensor:
    """``[q k]``: the anti-diagonal window, anchored at the least significant (right) end.

    Decoder row ``t`` reads output digit ``t`` (SOS for ``t = 0``) and emits digit ``t + 1``.

    - Unary input: the row is centred on input digit ``t`` (digit 1 in the last column; digit 0
      is just past it) and sees ``w`` digits on each side. With ``w ≥ 1`` the digit it must emit
      is the newest one in its window and every older one was read by an earlier row, which is
      what lets a model without positional encoding tell the digits of its window apart.
    - Aligned binary input (``⊕ a_n b_n … a_1 b_1``): the row sees the pair of digit ``t + 1``,
      columns ``(n_k − 2 − 2t, n_k − 1 − 2t)``, and ``w`` columns on each side: the window spans
      two columns and steps two per row.
    - ``pairs``: the unary window with each position a pair of columns, ``w`` counted in pairs:
      the row sees pairs ``t − w … t + w`` (pair ``p`` is ``a_p b_p``), so that, as in the unary
      case, the pair of the digit it emits is the newest for ``w = 1``. Without positional
      encoding, the column window cannot tell ``a_{t+1}`` from ``b_{t+2}`` (docs/paper-gaps.md).
    """
    t = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    if binary and pairs:
        low, high = n_k - 2 * (t + w), n_k - 2 * (t - w) + 1
    elif binary:
        low, high = n_k - 2 * (t + 1) - w, n_k - 1 - 2 * t + w
    else:
        low, high = n_k - t - w, n_k - t + w
    closed = (j < low) | (j > high)
    outside = (high < 0) | (low > n_k - 1)  # no-NaN rule: open the key nearest the window
    nearest = torch.where(high < 0, 0, n_k - 1)
    closed &= ~(outside & (j == nearest))
    return torch.zeros(n_q, n_k, device=device).masked_fill(closed, NEG_INF)


class Window(nn.Module):
    """The ABS scaffold with window ``w``: decoder self- and cross-attention biases."""

    def __init__(self, w: int, binary: bool = False, pairs: bool = False):
        super().__init__()
        self.w, self.binary, self.pairs = w, binary, pairs

    def forward(
        self, n_q: int, n_src: int, device=None, layout: Layout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(self_bias [1 q q], cross_bias [1 q s])``, the same for every head (any layout)."""
        return (
            rearrange(window_self_bias(n_q, n_q, self.w, device), "q k -> 1 q k"),
            rearrange(
                window_cross_bias(n_q, n_src, self.w, self.binary, device, self.pairs),
                "q k -> 1 q k",
            ),
        )


# ---------------------------------------------------------------- ABC line tables


def line_ids(
    n_q: int,
    n_k: int,
    delta: int,
    right: bool = True,
    device=None,
    segment=None,
    verticals_right: bool = True,
) -> torch.Tensor:
    """``[q k]`` index of the line of direction ``(1, Δ)`` through each cell.

    ``right``: lines with Δ < 0 are counted from the top-right corner (cross-attention, whose
    least significant input digit is the last column), and verticals too unless
    ``verticals_right`` is False (Algorithm 1 counts them from the top-left). Decoder
    self-attention has its least significant digit at the top-left for both axes, so there
    (``right`` False) every direction counts from there.
    ``segment (first, last)``: lines anchored at column ``last`` for every Δ; see ``in_segment``.
    """
    i = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    if segment is not None:
        return j - delta * i - segment[1]
    from_right = right and (delta < 0 or (delta == 0 and verticals_right))
    return j - delta * i - (n_k - 1 if from_right else 0)


def in_segment(n_q: int, n_k: int, segment, device=None) -> torch.Tensor:
    """``[q k]``: the cells whose column lies in ``segment (first, last)`` (all, for None)."""
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k").expand(n_q, n_k)
    return (
        torch.ones_like(j, dtype=torch.bool)
        if segment is None
        else (j >= segment[0]) & (j <= segment[1])
    )


class LineBias(nn.Module):
    """A calibrated bias: ``values [directions heads lines]`` (−inf padded, a buffer) with line
    offsets ``firsts`` (the line index of column 0 of ``values``, per direction ``deltas``).

    ``right``: Δ ≤ 0 lines anchored at the top-right corner (see ``line_ids``).
    ``transparent_empty``: a head with no line is transparent (all zeros, the paper's rule) or
    silent (all closed, so the no-NaN rule opens column 0 only: the start marker, the same token
    at every length). ``anchored``: lines counted in the input's segments, each direction's table
    in the segment of ``segments`` (an index into the layout; ``deltas`` may then repeat).
    ``verticals_right``: see ``line_ids``. ``closed``: the value of a closed cell (−inf; the
    authors' code uses −1e6, so a row with no open cell attends evenly); ``open_corner``: the
    top-right cell set to 0 (the authors' cross-attention bias).
    """

    def __init__(
        self,
        deltas: tuple,
        firsts: tuple,
        values: torch.Tensor,
        right: bool = True,
        transparent_empty: bool = True,
        anchored: bool = False,
        segments: tuple = (),
        verticals_right: bool = True,
        closed: float = NEG_INF,
        open_corner: bool = False,
    ):
        super().__init__()
        self.deltas, self.firsts, self.right = tuple(deltas), tuple(firsts), right
        self.transparent_empty, self.anchored, self.segments = (
            transparent_empty,
            anchored,
            tuple(segments),
        )
        self.verticals_right, self.closed, self.open_corner = verticals_right, closed, open_corner
        self.register_buffer("values", values)

    def segment(self, index: int, layout: Layout | None):
        """``(first, last)`` columns of table ``index``'s segment in ``layout``; None: corner-anchored."""
        if not self.anchored:
            return None
        if layout is None:
            raise ValueError("anchored lines need the input's layout (biases.segments_of)")
        return layout[self.segments[index]]

    def union(self, other: "LineBias") -> "LineBias":
        """Both biases' lines at once (materialized, they merge by max like directions do): how
        the calibrations of several decoder layers combine into one bias."""
        if (self.right, self.anchored, self.verticals_right, self.closed, self.open_corner) != (
            other.right,
            other.anchored,
            other.verticals_right,
            other.closed,
            other.open_corner,
        ):
            raise ValueError("cannot unite biases of different attentions or anchors")
        width = max(self.values.shape[-1], other.values.shape[-1])
        pad = lambda v: torch.nn.functional.pad(v, (0, width - v.shape[-1]), value=NEG_INF)  # noqa: E731
        return LineBias(
            self.deltas + other.deltas,
            self.firsts + other.firsts,
            torch.cat([pad(self.values), pad(other.values)]),
            self.right,
            self.transparent_empty,
            self.anchored,
            self.segments + other.segments,
            self.verticals_right,
            self.closed,
            self.open_corner,
        )

    @property
    def transparent(self) -> torch.Tensor:
        """``[heads]``: heads where no line survived the dropoff (they get an all-zero bias)."""
        return ~torch.isfinite(self.values).any(dim=-1).any(dim=0)

    def open_per_head(self) -> list[int]:
        return torch.isfinite(self.values).sum(dim=(0, 2)).tolist()

    def forward(
        self, n_q: int, n_k: int, device=None, layout: Layout | None = None
    ) -> torch.Tensor:
        """Materialize the ``[h q k]`` bias for an ``n_q × n_k`` attention matrix (anchored lines:
        over keys of that ``layout``)."""
        lines = self.values.shape[-1]
        values = torch.nn.functional.pad(
            self.values.to(device), (0, 1), value=NEG_INF
        )  # column `lines`: unknown
        merged = torch.full((values.shape[1], n_q, n_k), NEG_INF, device=device)
        for index, (table, delta, first) in enumerate(zip(values, self.deltas, self.firsts)):
            segment = self.segment(index, layout)
            ids = (
                line_ids(n_q, n_k, delta, self.right, device, segment, self.verticals_right) - first
            )
            ids = ids.masked_fill(
                (ids < 0) | (ids >= lines) | ~in_segment(n_q, n_k, segment, device), lines
            )
            cell = rearrange(
                table.index_select(1, rearrange(ids, "q k -> (q k)")), "h (q k) -> h q k", q=n_q
            )
            merged = torch.maximum(merged, cell)
        if self.open_corner:
            merged[:, 0, -1] = 0.0
        merged = merged.clamp(min=self.closed)
        if self.transparent_empty:
            merged[self.transparent.to(device)] = 0.0
        empty = ~torch.isfinite(merged).any(dim=-1)  # no-NaN rule, as for ABS: open column 0
        merged[..., 0] = merged[..., 0].masked_fill(empty, 0.0)
        return merged

    def state(self) -> dict:
        return {
            "deltas": list(self.deltas),
            "firsts": list(self.firsts),
            "values": self.values,
            "right": self.right,
            "transparent_empty": self.transparent_empty,
            "anchored": self.anchored,
            "segments": list(self.segments),
            "verticals_right": self.verticals_right,
            "closed": self.closed,
            "open_corner": self.open_corner,
        }

    @classmethod
    def from_state(cls, state: dict) -> "LineBias":
        return cls(
            tuple(state["deltas"]),
            tuple(state["firsts"]),
            state["values"],
            state["right"],
            state["transparent_empty"],
            bool(state.get("anchored", state.get("anchors"))),
            tuple(state.get("segments", ())),  # "anchors": a task name once
            state.get("verticals_right", True),
            state.get("closed", NEG_INF),
            state.get("open_corner", False),
        )

    def lines(self):
        """``(direction label, head, [(line, value)])`` for every head with an open line, each
        line once: tables of one direction (and segment), as a union of layers holds, merge by
        max, as they do when the bias is materialized."""
        merged = {}  # (label, head) → {line: value}, in table order
        for index, (values, delta, first) in enumerate(zip(self.values, self.deltas, self.firsts)):
            label = f"Δ = {delta}" + (f", segment {self.segments[index]}" if self.anchored else "")
            for head, row in enumerate(values.tolist()):
                kept = merged.setdefault((label, head), {})
                for i, v in enumerate(row):
                    if v != NEG_INF:
                        kept[first + i] = max(v, kept.get(first + i, NEG_INF))
        for (label, head), kept in merged.items():
            if kept:
                yield label, head, sorted(kept.items())


class Calibrated(nn.Module):
    """The ABC biases of one model: decoder self- and cross-attention line tables."""

    def __init__(self, self_attention: LineBias, cross_attention: LineBias):
        super().__init__()
        self.self_attention, self.cross_attention = self_attention, cross_attention

    def forward(
        self, n_q: int, n_src: int, device=None, layout: Layout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(self_bias [h q q], cross_bias [h q s])``; the model adds the causal mask itself."""
        return self.self_attention(n_q, n_q, device), self.cross_attention(
            n_q, n_src, device, layout
        )

    def state(self) -> dict:
        return {"self": self.self_attention.state(), "cross": self.cross_attention.state()}

    def union(self, other: "Calibrated") -> "Calibrated":
        return Calibrated(
            self.self_attention.union(other.self_attention),
            self.cross_attention.union(other.cross_attention),
        )

    def tables(self):
        """``(name, LineBias)`` of each attention."""
        yield "cross", self.cross_attention
        yield "self", self.self_attention

    @classmethod
    def from_state(cls, state: dict) -> "Calibrated":
        return cls(LineBias.from_state(state["self"]), LineBias.from_state(state["cross"]))


class PerLayer(nn.Module):
    """One ABC bias per decoder layer, each calibrated from that layer's own attention (the
    paper's "per-layer bias", end of §4): the model adds ``layers[l]`` in decoder layer ``l``."""

    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(
        self, n_q: int, n_src: int, device=None, layout: Layout | None = None
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [layer(n_q, n_src, device, layout) for layer in self.layers]

    def state(self) -> dict:
        return {"layers": [layer.state() for layer in self.layers]}

    def tables(self):
        for index, layer in enumerate(self.layers):
            for name, table in layer.tables():
                yield f"layer {index} {name}", table


# ---------------------------------------------------------------- ABC lines counted in blocks
#
# For a scratchpad whose output is one block per input number (multi-operand addition's running
# sums), a row must read "the same digit of this block's operand" and "the same digit of the
# previous block" at any width and any number of blocks. Those offsets grow with the block's
# width and index, so no corner- or segment-anchored line stays on them. A cell (i, j) has block
# coordinates instead: the row's block b_q and significance s_q (the digit it emits, counted from
# the least significant), the key's b_k and s_k; a *block line* is (d, ℓ) = (b_k − b_q, s_k − s_q),
# and a block's marker (the input's $ or + before each number, the output's separator) the line
# (d, marker). Layouts: the input is `blocks` parts [marker, digits …], most significant first,
# and an end marker (the marker of block `blocks`, so that the last block's next marker differs
# from every other); the decoder's input is [SOS], then per block its digits least significant
# first and a separator (SOS is the separator of block −1).


def input_coordinates(
    n: int, blocks: int, device=None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(block, significance, marker)`` of each of the ``n`` input columns: part ``j // w`` of
    width ``w = (n − 1) / blocks``, its marker first (significance ``w − 1``), its last digit 0;
    the last column is the end marker, the marker of block ``blocks``."""
    j, width = torch.arange(n, device=device), (n - 1) // blocks
    return j // width, width - 1 - j % width, j % width == 0


def output_coordinates(
    n: int, blocks: int, keys: bool, device=None, growing: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(block, significance, marker)`` of each of the ``n`` decoder rows (``keys`` False: the
    digit a row emits) or columns (``keys``: the token a column holds, one step behind).
    ``growing``: multiply's running sums, block ``j`` of ``blocks + j + 1`` digits and its
    separator (``blocks`` is its pad width), then the end row."""
    i = torch.arange(n, device=device) - int(keys)
    if not growing:
        width = n // blocks
        significance = torch.remainder(i, width)
        return torch.div(i, width, rounding_mode="floor"), significance, significance == width - 1
    j = torch.arange(blocks + 1, device=device)
    first = blocks + 2  # block j holds first + j tokens; the end row is block `blocks`
    starts = first * j + j * (j - 1) // 2
    block = torch.searchsorted(starts, i, right=True) - 1  # the SOS column (i = −1): block −1
    width = first + block
    significance = torch.where(block < 0, width - 1, i - starts[block.clamp(min=0)])
    return block, significance, significance == width - 1


def cell_offsets(rows, keys, products: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``[q k]`` line coordinates of every cell: ``(b_k − b_q, s_k − s_q)``. ``products``
    (multiply's cross-attention): the row reads a fixed input number, so ``d`` is the key's
    number (0: a, 1: b, 2: the end marker), at a significance its block sets: digit ``s_q − b_q``
    of a, digit ``b_q`` of b, so ``ℓ = s_k − (s_q − b_q)`` on a and ``s_k − b_q`` on b."""
    bq, sq = (rearrange(x, "q -> q 1") for x in rows[:2])
    bk, sk = (rearrange(x, "k -> 1 k") for x in keys[:2])
    if products:
        return bk.expand(len(bq), -1), sk - torch.where(bk == 0, sq - bq, bq)
    return bk - bq, sk - sq


def line_index(
    rows, keys, d_first: int, d_count: int, l_first: int, l_count: int, products: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``([q k] index into a flattened [d (ℓ + marker)] table, [q k] on a line of the table)``."""
    d, ell = cell_offsets(rows, keys, products)
    d, ell, marker = d - d_first, ell - l_first, rearrange(keys[2], "k -> 1 k")
    column = torch.where(marker, l_count, ell)
    inside = (d >= 0) & (d < d_count) & (marker | ((ell >= 0) & (ell < l_count)))
    return (d * (l_count + 1) + column).clamp(0, d_count * (l_count + 1) - 1), inside


class BlockLines(nn.Module):
    """A calibrated block-line table ``values [h d (ℓ + 1)]`` (the last column: the block's
    marker), ``d`` from ``d_first``, ``ℓ`` from ``l_first``; −inf where no line was kept.
    ``cross``: keys are input columns (else decoder columns); ``products``: multiply's input
    numbers a and b (``cell_offsets``)."""

    def __init__(
        self, values: torch.Tensor, d_first: int, l_first: int, cross: bool, products: bool = False
    ):
        super().__init__()
        self.d_first, self.l_first, self.cross, self.products = d_first, l_first, cross, products
        self.register_buffer("values", values)

    def forward(
        self, n_q: int, n_k: int, blocks: int, device=None, growing: bool = False
    ) -> torch.Tensor:
        """The ``[h q k]`` bias of an ``n_q × n_k`` attention over ``blocks`` output blocks
        (``growing``: each one token wider than the one before, ``output_coordinates``)."""
        heads, d_count, width = self.values.shape
        rows = output_coordinates(n_q, blocks, keys=False, device=device, growing=growing)
        keys = (
            input_coordinates(n_k, 2 if self.products else blocks, device)
            if self.cross
            else output_coordinates(n_k, blocks, keys=True, device=device, growing=growing)
        )
        index, inside = line_index(
            rows, keys, self.d_first, d_count, self.l_first, width - 1, self.products
        )
        flat = rearrange(self.values.to(device), "h d l -> h (d l)")
        bias = (
            flat[:, rearrange(index, "q k -> (q k)")]
            .view(heads, n_q, n_k)
            .masked_fill(~inside, NEG_INF)
        )
        bias[self.transparent.to(device)] = 0.0  # a head with no line: transparent
        empty = ~torch.isfinite(bias).any(dim=-1)  # no-NaN rule: open column 0
        bias[..., 0] = bias[..., 0].masked_fill(empty, 0.0)
        return bias

    @property
    def transparent(self) -> torch.Tensor:
        """``[heads]``: heads where no line survived the dropoff (they get an all-zero bias)."""
        return ~torch.isfinite(self.values).flatten(1).any(dim=1)

    def open_per_head(self) -> list[int]:
        return torch.isfinite(self.values).flatten(1).sum(dim=1).tolist()

    def union(self, other: "BlockLines") -> "BlockLines":
        """Both tables' lines (the same calibration frame, so the same index ranges)."""
        return BlockLines(
            torch.maximum(self.values, other.values),
            self.d_first,
            self.l_first,
            self.cross,
            self.products,
        )

    def lines(self):
        """``(direction label, head, [(line, value)])`` for every head with an open line."""
        heads, d_count, width = self.values.shape
        for d in range(d_count):
            for head in range(heads):
                row = self.values[head, d].tolist()
                kept = [
                    ("marker" if c == width - 1 else self.l_first + c, v)
                    for c, v in enumerate(row)
                    if v != NEG_INF
                ]
                if kept:
                    yield (
                        (
                            f"number {'ab&'[self.d_first + d]}"
                            if self.products
                            else f"block {self.d_first + d:+d}"
                        ),
                        head,
                        kept,
                    )

    def state(self) -> dict:
        return {
            "values": self.values,
            "d_first": self.d_first,
            "l_first": self.l_first,
            "cross": self.cross,
            "products": self.products,
        }

    @classmethod
    def from_state(cls, state: dict) -> "BlockLines":
        return cls(
            state["values"],
            state["d_first"],
            state["l_first"],
            state["cross"],
            state.get("products", False),
        )


def block_count(n_src: int, layout: Layout, products: bool) -> int:
    """The output blocks of an input: one per number of its layout (a marker and a number per
    block, and the end marker), or with ``products`` (multiply's ``$a*b&``) one per digit of b."""
    return (n_src - 3) // 2 if products else len(layout) // 2


class BlockCalibrated(nn.Module):
    """ABC's biases for a block output: decoder self- and cross-attention block-line tables, over
    the input's ``block_count`` blocks."""

    def __init__(self, self_attention: BlockLines, cross_attention: BlockLines):
        super().__init__()
        self.self_attention, self.cross_attention = self_attention, cross_attention

    def forward(
        self, n_q: int, n_src: int, device=None, layout: Layout | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if layout is None:
            raise ValueError("block lines need the input's layout (biases.segments_of)")
        products = self.cross_attention.products  # multiply: its blocks grow by one digit each
        blocks = block_count(n_src, layout, products)
        return (
            self.self_attention(n_q, n_q, blocks, device, products),
            self.cross_attention(n_q, n_src, blocks, device, products),
        )

    def union(self, other: "BlockCalibrated") -> "BlockCalibrated":
        return BlockCalibrated(
            self.self_attention.union(other.self_attention),
            self.cross_attention.union(other.cross_attention),
        )

    def tables(self):
        yield "cross", self.cross_attention
        yield "self", self.self_attention

    def state(self) -> dict:
        return {
            "blocks": {"self": self.self_attention.state(), "cross": self.cross_attention.state()}
        }

    @classmethod
    def from_state(cls, state: dict) -> "BlockCalibrated":
        return cls(
            BlockLines.from_state(state["blocks"]["self"]),
            BlockLines.from_state(state["blocks"]["cross"]),
        )


def scaffold_from_state(state: dict) -> Calibrated | PerLayer | BlockCalibrated:
    """The ABC scaffold a bias file or checkpoint stores: one bias for every layer, one per layer,
    or block lines."""
    if "blocks" in state:
        return BlockCalibrated.from_state(state)
    if "layers" in state:
        return PerLayer(tuple(Calibrated.from_state(layer) for layer in state["layers"]))
    return Calibrated.from_state(state)


def open_lines(scaffold: Calibrated | PerLayer | BlockCalibrated) -> list[str]:
    """Every open line of an ABC scaffold, one ``"layer 0 cross Δ = -1, segment 1 h2: 0,1"`` per
    attention, direction (and segment) and head: what a result record keeps of its bias."""
    return [
        f"{name} {label} h{head}: " + ",".join(str(line) for line, _ in lines)
        for name, table in scaffold.tables()
        for label, head, lines in table.lines()
    ]


def line_rows(scaffold: Calibrated | PerLayer | BlockCalibrated) -> list[tuple]:
    """``(layer, attention, direction, head, line, value)`` for every open line of an ABC
    scaffold (layer ``every`` where one bias serves all layers): the bias as a table. A line is
    text (``-1``, or a block's ``marker``), so that a column holds one type."""
    rows = []
    for name, table in scaffold.tables():
        layer, _, attention = name.rpartition(" ")  # "layer 0 cross" or "cross"
        for label, head, lines in table.lines():
            rows += [
                (layer.removeprefix("layer ") or "every", attention, label, head, str(line), value)
                for line, value in lines
            ]
    return rows


def per_layer(biases, depth: int) -> list[tuple]:
    """A scaffold's output as one ``(self_bias, cross_bias)`` pair per decoder layer."""
    if isinstance(biases, list):
        if len(biases) != depth:
            raise ValueError(
                f"a per-layer scaffold for {len(biases)} decoder layers on a model with {depth}"
            )
        return biases
    return [biases] * depth


def stacked(biases) -> tuple[torch.Tensor, torch.Tensor]:
    """A scaffold's output as one ``(self [(layers h) q k], cross)`` pair, layers one after another (figures)."""
    if not isinstance(biases, list):
        return biases
    return tuple(torch.cat([pair[kind] for pair in biases]) for kind in (0, 1))
