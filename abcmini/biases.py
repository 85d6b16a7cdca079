"""Attention biases: ABS windows (paper appendix, "Windowed Attention Biasing").

A bias is 0 where attention is open and −inf where it is closed, added to the pre-softmax
scores of every decoder layer. It is built for any query/key size, so the same scaffold serves
training, every test length and every step of cached decoding (which slices rows).

No-NaN rule: a row whose window falls entirely outside the keys gets the key nearest to its
window opened instead: column 0 (the ``$`` or operator that starts the input) for the rows past
the most significant digit, the last column for a ``w = 0`` unary window that starts past the
end. Every row therefore has an open cell.
"""

from dataclasses import dataclass

import torch
from einops import rearrange

NEG_INF = float("-inf")


def window_self_bias(n_q: int, n_k: int, w: int, device=None) -> torch.Tensor:
    """``[q k]``: open on the main diagonal and the ``w`` diagonals below it (0 ≤ i − j ≤ w)."""
    i = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    offset = i - j
    return torch.zeros(n_q, n_k, device=device).masked_fill((offset < 0) | (offset > w), NEG_INF)


def window_cross_bias(n_q: int, n_k: int, w: int, binary: bool = False, device=None) -> torch.Tensor:
    """``[q k]``: the anti-diagonal window, anchored at the least significant (right) end.

    Decoder row ``t`` reads output digit ``t`` (SOS for ``t = 0``) and emits digit ``t + 1``.

    - Unary input: the row is centred on input digit ``t`` (digit 1 in the last column; digit 0
      is just past it) and sees ``w`` digits on each side. With ``w ≥ 1`` the digit it must emit
      is the newest one in its window and every older one was read by an earlier row, which is
      what lets a model without positional encoding tell the digits of its window apart.
    - Aligned binary input (``⊕ a_n b_n … a_1 b_1``): the row sees the pair of digit ``t + 1``,
      columns ``(n_k − 2 − 2t, n_k − 1 − 2t)``, and ``w`` columns on each side: the window spans
      two columns and steps two per row.
    """
    t = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    if binary:
        low, high = n_k - 2 * (t + 1) - w, n_k - 1 - 2 * t + w
    else:
        low, high = n_k - t - w, n_k - t + w
    closed = (j < low) | (j > high)
    outside = (high < 0) | (low > n_k - 1)  # no-NaN rule: open the key nearest the window
    nearest = torch.where(high < 0, 0, n_k - 1)
    closed &= ~(outside & (j == nearest))
    return torch.zeros(n_q, n_k, device=device).masked_fill(closed, NEG_INF)


def materialize(bias, n_q: int, n_src: int, device=None):
    """``(self_bias, cross_bias)`` of a scaffold (ABS ``Window`` or ABC ``Calibrated``) for an
    ``n_q``-token output and ``n_src``-token input; ``(None, None)`` without one."""
    return bias(n_q, n_src, device) if bias is not None else (None, None)


@dataclass(frozen=True)
class Window:
    """The ABS scaffold with window ``w``: decoder self- and cross-attention biases."""

    w: int
    binary: bool = False

    def __call__(self, n_q: int, n_src: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(self_bias [1 q q], cross_bias [1 q s])``, the same for every head."""
        return (
            rearrange(window_self_bias(n_q, n_q, self.w, device), "q k -> 1 q k"),
            rearrange(window_cross_bias(n_q, n_src, self.w, self.binary, device), "q k -> 1 q k"),
        )
