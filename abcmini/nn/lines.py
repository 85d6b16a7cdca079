"""ABC's calibrated line tables (paper §4 and §6.1), a scaffold added to the pre-softmax scores
of every decoder layer. A direction ``(1, Δ)`` moves one row down and ``Δ`` columns right. Every
cell ``(i, j)`` of an ``m × n`` matrix lies on one line of each direction, with index ``j − Δ·i``,
counted from the top-left corner for Δ > 0 and from the top-right corner (minus ``n − 1``) for
Δ ≤ 0, so that the least-significant-digit corners line up when the matrix grows (the footnote
of the paper's Algorithm 1). A cell takes its line's value in each direction (−inf for a line
never observed or dropped) and the directions merge by element-wise max; a row with no open
cell opens column 0 (the start marker or SOS), so no row is all −inf.

Anchored lines are counted per segment of the input instead (the start marker, each operand,
the operator), from the segment's last column: its least significant digit. A line that reads
operand ``a`` then reads ``a`` in a frame of any width, where a corner-anchored one moves with the
frame. The segments reach this module as data, a *layout* (``segments_of`` a digit mask), never
as a task name, so any tokenizer whose numbers are runs of digit tokens can use it.

Line values are a buffer, so they travel with ``.to()`` and ``state_dict()`` inside the model.
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


def indices(x, device=None) -> torch.Tensor:
    """Rows or keys of an attention matrix as indices: a count ``n`` is ``0 … n−1``."""
    return torch.arange(x, device=device) if isinstance(x, int) else x


def line_ids(
    rows,
    keys,
    delta: int,
    right: bool = True,
    device=None,
    segment=None,
    verticals_right: bool = True,
) -> torch.Tensor:
    """``[q k]`` index of the line of direction ``(1, Δ)`` through each cell of ``rows`` and
    ``keys`` (indices, or counts: ``n`` is ``0 … n−1``; the keys are every column).

    ``right``: lines with Δ < 0 are counted from the top-right corner (cross-attention, whose
    least significant input digit is the last column), and verticals too unless
    ``verticals_right`` is False (Algorithm 1 counts them from the top-left). Decoder
    self-attention has its least significant digit at the top-left for both axes, so there
    (``right`` False) every direction counts from there.
    ``segment (first, last)``: lines anchored at column ``last`` for every Δ; see ``in_segment``.
    """
    rows, keys = indices(rows, device), indices(keys, device)
    i, j = rearrange(rows, "q -> q 1"), rearrange(keys, "k -> 1 k")
    if segment is not None:
        return j - delta * i - segment[1]
    from_right = right and (delta < 0 or (delta == 0 and verticals_right))
    return j - delta * i - (len(keys) - 1 if from_right else 0)


def in_segment(rows, keys, segment, device=None) -> torch.Tensor:
    """``[q k]``: the cells whose column lies in ``segment (first, last)`` (all, for None)."""
    rows, keys = indices(rows, device), indices(keys, device)
    j = rearrange(keys, "k -> 1 k").expand(len(rows), len(keys))
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
            raise ValueError("anchored lines need the input's layout (lines.segments_of)")
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

    def forward(self, q_pos, k_pos, layout: Layout | None = None) -> torch.Tensor:
        """The ``[h q k]`` bias of rows ``q_pos`` over keys ``k_pos`` (indices of the attention
        matrix, or counts, ``indices``; the keys are every column; anchored lines: over keys of
        that ``layout``)."""
        device, lines = self.values.device, self.values.shape[-1]
        q_pos, k_pos = indices(q_pos, device), indices(k_pos, device)
        values = torch.nn.functional.pad(
            self.values.to(device), (0, 1), value=NEG_INF
        )  # column `lines`: unknown
        merged = torch.full((values.shape[1], len(q_pos), len(k_pos)), NEG_INF, device=device)
        for index, (table, delta, first) in enumerate(zip(values, self.deltas, self.firsts)):
            segment = self.segment(index, layout)
            ids = line_ids(q_pos, k_pos, delta, self.right, None, segment, self.verticals_right)
            ids = (ids - first).masked_fill(
                (ids < first) | (ids >= first + lines) | ~in_segment(q_pos, k_pos, segment), lines
            )
            cell = rearrange(
                table.index_select(1, rearrange(ids, "q k -> (q k)")),
                "h (q k) -> h q k",
                q=len(q_pos),
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


class SelfCross(nn.Module):
    """A scaffold: a decoder's self- and cross-attention biases, each a module called as every
    attention bias is, ``bias(q_pos, k_pos, layout) → [h q k]`` (ABS windows, ABC's line and
    block-line tables), and ``per_layer`` the pair each decoder layer adds."""

    def __init__(self, self_attention: nn.Module, cross_attention: nn.Module):
        super().__init__()
        self.self_attention, self.cross_attention = self_attention, cross_attention

    def union(self, other: "SelfCross") -> "SelfCross":
        return type(self)(
            self.self_attention.union(other.self_attention),
            self.cross_attention.union(other.cross_attention),
        )

    def per_layer(self, depth: int | None = None) -> list["SelfCross"]:
        """The pair each of ``depth`` decoder layers adds (one pair for every layer)."""
        return [self] * (depth or 1)

    def tables(self):
        """``(name, table)`` of each attention."""
        yield "cross", self.cross_attention
        yield "self", self.self_attention


class Calibrated(SelfCross):
    """The ABC biases of one model: decoder self- and cross-attention line tables."""

    def state(self) -> dict:
        return {"self": self.self_attention.state(), "cross": self.cross_attention.state()}

    @classmethod
    def from_state(cls, state: dict) -> "Calibrated":
        return cls(LineBias.from_state(state["self"]), LineBias.from_state(state["cross"]))


class PerLayer(nn.Module):
    """One ABC bias per decoder layer, each calibrated from that layer's own attention (the
    paper's "per-layer bias", end of §4): the model adds ``layers[l]`` in decoder layer ``l``."""

    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def per_layer(self, depth: int | None = None) -> list[Calibrated]:
        """Layer ``l``'s pair for each of the model's ``depth`` decoder layers."""
        if depth is not None and depth != len(self.layers):
            raise ValueError(
                f"a per-layer scaffold for {len(self.layers)} decoder layers on a model with {depth}"
            )
        return list(self.layers)

    def state(self) -> dict:
        return {"layers": [layer.state() for layer in self.layers]}

    def tables(self):
        for index, layer in enumerate(self.layers):
            for name, table in layer.tables():
                yield f"layer {index} {name}", table
