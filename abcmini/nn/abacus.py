"""Abacus embeddings (McLeish et al. 2024, "Transformers Can Do Arithmetic with the Right
Embeddings", NeurIPS): every digit's position is counted within its own number, from its least
significant digit (1, 2, …), and looked up in a learned table that is added to the token
embeddings; every other token gets index 0. In training all counts of an example are shifted by
one random offset ``k ∈ [0, K]``, so that the table's rows past the training length are trained
too: ``K`` must let the counts of the longest test reach a trained row (the paper: ``K`` 100 for
tests to 100 digits from 20; here the table has ``max_position`` rows, 512 for 500 digits).
Task structure arrives as a digit mask (``positions.significance``), never as a task name.
"""

import torch

from abcmini.nn.positions import significance

MAX_POSITION = 512


def abacus_ids(
    digit: torch.Tensor, lsd_first: bool, offset: torch.Tensor, hint: torch.Tensor | None = None
) -> torch.Tensor:
    """``[b n]``: ``1 + k +`` a digit's place in its own number, 0 for any other token; ``offset
    [b]`` holds each example's ``k``; index hints (``hint``) get 0 and do not end a number."""
    place = significance(digit, lsd_first, hint)
    return torch.where(place >= 0, place + 1 + offset[:, None], torch.zeros_like(place))
