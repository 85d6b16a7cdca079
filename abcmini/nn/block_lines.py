"""ABC lines counted in blocks: a scaffold for outputs of one block per input number.

For a scratchpad whose output is one block per input number (multi-operand addition's running
sums), a row must read "the same digit of this block's operand" and "the same digit of the
previous block" at any width and any number of blocks. Those offsets grow with the block's
width and index, so no corner- or segment-anchored line stays on them. A cell (i, j) has block
coordinates instead: the row's block b_q and significance s_q (the digit it emits, counted from
the least significant), the key's b_k and s_k; a *block line* is (d, ℓ) = (b_k − b_q, s_k − s_q),
and a block's marker (the input's $ or + before each number, the output's separator) the line
(d, marker). Layouts: the input is `blocks` parts [marker, digits …], most significant first,
and an end marker (the marker of block `blocks`, so that the last block's next marker differs
from every other); the decoder's input is [SOS], then per block its digits least significant
first and a separator (SOS is the separator of block −1).
"""

import torch
from einops import rearrange
from torch import nn

from abcmini.nn.lines import NEG_INF, Layout, SelfCross, indices


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
    numbers a and b (``cell_offsets``); ``growing``: each output block one token wider than the
    one before (multiply's running sums, ``output_coordinates``): a table with ``products`` grows,
    and ``BlockCalibrated`` gives its self-attention table its cross table's."""

    def __init__(
        self, values: torch.Tensor, d_first: int, l_first: int, cross: bool, products: bool = False
    ):
        super().__init__()
        self.d_first, self.l_first, self.cross, self.products = d_first, l_first, cross, products
        self.growing = products
        self.register_buffer("values", values)

    def forward(self, q_pos, k_pos, layout: Layout | None = None) -> torch.Tensor:
        """The ``[h q k]`` bias of a decoder's rows over its keys (indices ``0 … n−1``, or counts:
        block coordinates are the whole matrix's) for an input of ``layout``."""
        if layout is None:
            raise ValueError("block lines need the input's layout (lines.segments_of)")
        device, growing = self.values.device, self.growing
        n_q, n_k = (len(indices(n)) for n in (q_pos, k_pos))
        blocks = block_count(layout[-1][1] + 1, layout, growing)  # multiply's: digits of b
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


class BlockCalibrated(SelfCross):
    """ABC's biases for a block output: decoder self- and cross-attention block-line tables, over
    the input's ``block_count`` blocks. Both read one output, so its blocks grow for both where
    the cross table's do."""

    def __init__(self, self_attention: BlockLines, cross_attention: BlockLines):
        super().__init__(self_attention, cross_attention)
        self_attention.growing = cross_attention.growing

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
