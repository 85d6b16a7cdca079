"""Attention biases: ABS windows (paper appendix, "Windowed Attention Biasing").

A bias is 0 where attention is open and −inf where it is closed, added to the pre-softmax
scores of every decoder layer. It is built for any query/key size, so the same scaffold serves
training, every test length and every step of cached decoding (which slices rows).

No-NaN rule: a row whose window falls entirely outside the keys (the rows after the last input
digit: the final carry and EOS) gets the key nearest to its window opened instead. Windows
move towards column 0 as rows go down, so that key is column 0 (the most significant input
digit, or the operator of an aligned binary input). Every row therefore has an open cell.
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
    """``[q k]``: output digit ``t`` (least significant first) looks at input digit ``t`` counted
    from the least significant (right) end, and ``w`` positions on each side.

    For an aligned binary input (``⊕ a_n b_n … a_1 b_1``) digit ``t`` is the pair of columns
    ``(n_k − 2 − 2t, n_k − 1 − 2t)``: the window spans two columns and steps two per row.
    """
    span = 2 if binary else 1
    t = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    low = n_k - span * (t + 1) - w
    high = n_k - 1 - span * t + w
    closed = (j < low) | (j > high)
    closed[:, 0] &= ~(high[:, 0] < 0)  # no-NaN rule: a window left of column 0 opens column 0
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
