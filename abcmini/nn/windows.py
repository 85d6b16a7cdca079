"""ABS windows (paper appendix, "Windowed Attention Biasing"): decoder self- and cross-attention
biases open on a band of ``w`` positions either side of the digit a row works on, the same for
every head. A scaffold is asked for the size it must cover, ``scaffold(n_q, n_src, device,
layout) → (self_bias, cross_bias)``, so one scaffold serves training, every test length and
every step of cached decoding. 0 where attention is open, −inf where it is closed, and no row
without an open cell (the key nearest its window). Plain PyTorch.
"""

import torch
from einops import rearrange
from torch import nn

from abcmini.nn.lines import NEG_INF, Layout


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
