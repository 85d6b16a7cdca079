"""ABS windows (paper appendix, "Windowed Attention Biasing"): decoder self- and cross-attention
biases open on a band of ``w`` positions either side of the digit a row works on, the same for
every head. Each is asked for the rows and keys it must cover, ``bias(q_pos, k_pos, layout) →
[1 q k]``, so one scaffold serves training, every test length and every step of cached
decoding. 0 where attention is open, −inf where it is closed, and no row without an open cell
(the key nearest its window). Plain PyTorch.
"""

import torch
from einops import rearrange
from torch import nn

from abcmini.nn.lines import NEG_INF, Layout, SelfCross, indices


def window_self_bias(rows, keys, w: int, device=None) -> torch.Tensor:
    """``[q k]``: open on the main diagonal and the ``w`` diagonals below it (0 ≤ i − j ≤ w);
    ``rows``, ``keys`` indices or counts (``lines.indices``)."""
    rows, keys = indices(rows, device), indices(keys, device)
    offset = rearrange(rows, "q -> q 1") - rearrange(keys, "k -> 1 k")
    return torch.zeros(offset.shape, device=rows.device).masked_fill(
        (offset < 0) | (offset > w), NEG_INF
    )


def window_cross_bias(
    rows, keys, w: int, binary: bool = False, device=None, pairs: bool = False
) -> torch.Tensor:
    """``[q k]``: the anti-diagonal window, anchored at the least significant (right) end;
    ``rows``, ``keys`` indices or counts (``lines.indices``; the keys are every input column).

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
    rows, keys = indices(rows, device), indices(keys, device)
    t, j, n_k = rearrange(rows, "q -> q 1"), rearrange(keys, "k -> 1 k"), len(keys)
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
    return torch.zeros(closed.shape, device=rows.device).masked_fill(closed, NEG_INF)


class WindowSelf(nn.Module):
    """ABS's decoder self-attention bias with window ``w``."""

    def __init__(self, w: int):
        super().__init__()
        self.w = w

    def forward(self, q_pos, k_pos, layout: Layout | None = None) -> torch.Tensor:
        """``[1 q k]``, the same for every head (any layout)."""
        return rearrange(window_self_bias(q_pos, k_pos, self.w), "q k -> 1 q k")


class WindowCross(nn.Module):
    """ABS's cross-attention bias with window ``w`` (``window_cross_bias``)."""

    def __init__(self, w: int, binary: bool = False, pairs: bool = False):
        super().__init__()
        self.w, self.binary, self.pairs = w, binary, pairs

    def forward(self, q_pos, k_pos, layout: Layout | None = None) -> torch.Tensor:
        """``[1 q k]``, the same for every head (any layout)."""
        bias = window_cross_bias(q_pos, k_pos, self.w, self.binary, pairs=self.pairs)
        return rearrange(bias, "q k -> 1 q k")


class Window(SelfCross):
    """The ABS scaffold with window ``w``: decoder self- and cross-attention biases."""

    def __init__(self, w: int, binary: bool = False, pairs: bool = False):
        super().__init__(WindowSelf(w), WindowCross(w, binary, pairs))
