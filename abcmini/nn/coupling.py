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
sum of ``multiadd``'s scratchpad and the operand it adds share one id, as equal significances do;
on ``multiply`` three levels (``multiply_ids``) point a running sum's digit at the three digits
it needs, as the paper's three do in its own scratchpad.
"""

import torch

from abcmini.nn.positions import significance

MAX_POSITION = 512


def coupled_ids(
    digit: torch.Tensor, lsd_first: bool, start: torch.Tensor, hint: torch.Tensor | None = None
) -> torch.Tensor:
    """``[b n]``: ``s + i`` for a digit of significance ``i``, ``s − 1`` for any other token;
    ``start [b]`` holds each example's ``s`` (at least 1); index hints (``hint``) do not end a
    number."""
    return significance(digit, lsd_first, hint) + start[:, None]


def number_ids(digit: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """``[b n]``: ``t + m`` for every token of the ``m``-th number of ``digit [b n]`` (1 for the
    first) and the separator after it, ``t`` before the first; ``start [b]`` holds each ``t``."""
    begins = digit & ~torch.nn.functional.pad(digit[..., :-1], (1, 0), value=False)
    return begins.long().cumsum(-1) + start[:, None]


def level_ids(
    digit: torch.Tensor,
    answer_from: int,
    starts: torch.Tensor,
    lsd_input: bool = False,
    hint: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """Each level's ids ``[b n]`` of a sequence whose answer starts at ``answer_from`` (prompt
    most significant digit first unless ``lsd_input``, answer reversed); ``starts [b levels]``:
    each level's start; ``hint``: index hints (one level only, ``config.HINT_TASKS``)."""
    prompt, answer = digit[:, :answer_from], digit[:, answer_from:]
    if starts.shape[1] == 3:
        return multiply_ids(prompt, answer, starts, lsd_input)
    hints = (None, None) if hint is None else (hint[:, :answer_from], hint[:, answer_from:])
    ids = [
        torch.cat(
            [
                coupled_ids(prompt, lsd_input, starts[:, 0], hints[0]),
                coupled_ids(answer, True, starts[:, 0], hints[1]),
            ],
            dim=1,
        )
    ]
    if starts.shape[1] == 2:
        ids.append(
            torch.cat([number_ids(prompt, starts[:, 1]), number_ids(answer, starts[:, 1])], dim=1)
        )
    return ids


def multiply_ids(
    prompt: torch.Tensor, answer: torch.Tensor, starts: torch.Tensor, lsd_input: bool = False
) -> list[torch.Tensor]:
    """``multiply``'s three levels for ``$a*b&`` → ``s_0+s_1+…``: digit ``k`` of the running sum
    ``s_j`` (which adds ``a_{k−j}·b_j`` to ``s_{j−1}``'s digit ``k``) gets ``s + k − j``, the id of
    ``a``'s digit ``k − j``; ``t + j``, the id of ``b``'s digit ``j`` (every token of block ``j``
    has it); ``u + k``, the id of ``s_{j−1}``'s digit ``k``. A token with no part in a level
    gets that level's start less one (the rows below ``a``'s lowest digit, which only copy, too)."""
    s, t, u = (starts[:, level, None] for level in range(3))
    place = significance(prompt, lsd_input)
    number = number_ids(prompt, torch.zeros_like(starts[:, 0]))
    in_a, in_b = (place >= 0) & (number == 1), (place >= 0) & (number == 2)
    prompt_ids = [
        torch.where(in_a, s + place, s - 1),
        torch.where(in_b, t + place, t - 1),
        (u - 1).expand_as(place),
    ]
    place, block = (
        significance(answer, True),
        number_ids(answer, torch.zeros_like(starts[:, 0])) - 1,
    )
    shifted = place - block
    answer_ids = [
        torch.where((place >= 0) & (shifted >= 0), s + shifted, s - 1),
        t + block,
        u + place,
    ]
    return [torch.cat(pair, dim=1) for pair in zip(prompt_ids, answer_ids)]
