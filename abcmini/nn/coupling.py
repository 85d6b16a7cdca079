"""Position Coupling (Cho et al. 2024, "Position Coupling: Improving Length Generalization of
Arithmetic Transformers Using Task Structure", NeurIPS): digits of equal significance, in the
operands and in the answer, share one position id; the ids, learned absolute embeddings, start at
a random ``s`` in training (``s`` 1 at test), so that ids past the training length are trained
too. A digit of significance ``i`` gets ``s + i``; every other token (the start marker, the
operator, the answer's start) gets ``s − 1``, as the paper's "+" and "=" get the id next to the
least significant digit. The paper's maximum position id must exceed the longest test's: 512
here, for 500-digit tests (its 30 → 200-digit addition used 202).

Its multi-level form (Cho et al. 2025, "Arithmetic Transformers Can Length-Generalize in Both
Operand Length and Count", ICLR) adds a second id from a table of its own: each number's index
among the numbers of its part (prompt or answer), from a random start ``t``, so that a running
sum of ``multiadd``'s scratchpad and the operand it adds share one id, as equal significances do.
"""

import torch

from abcmini.nn.positions import significance

MAX_POSITION = 512


def coupled_ids(digit: torch.Tensor, lsd_first: bool, start: torch.Tensor) -> torch.Tensor:
    """``[b n]``: ``s + i`` for a digit of significance ``i``, ``s − 1`` for any other token;
    ``start [b]`` holds each example's ``s`` (at least 1)."""
    return significance(digit, lsd_first) + start[:, None]


def number_ids(digit: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """``[b n]``: ``t + m`` for every token of the ``m``-th number of ``digit [b n]`` (1 for the
    first) and the separator after it, ``t`` before the first; ``start [b]`` holds each ``t``."""
    begins = digit & ~torch.nn.functional.pad(digit[..., :-1], (1, 0), value=False)
    return begins.long().cumsum(-1) + start[:, None]
