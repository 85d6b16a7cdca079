"""Randomized positional encoding (Ruoss et al. 2023, "Randomized Positional Encodings Boost
Length Generalization of Transformers", ACL): a sequence of ``n`` tokens is given ``n`` positions
drawn without replacement from ``0 … L−1`` and sorted, ``L`` (``max_length``) far above every
training length (2048, the value of the authors' example script), and the sinusoidal encoding of
those positions is added to the token embeddings. Training and test draw alike, so a test
sequence of up to ``L`` tokens is made only of positions training has seen; only the order of
positions, not their distance, carries over from one draw to the next.
"""

import torch

MAX_LENGTH = 2048


def randomized_positions(
    batch: int,
    n: int,
    max_length: int = MAX_LENGTH,
    generator: torch.Generator | None = None,
    device=None,
) -> torch.Tensor:
    """``[batch n]``: for each sequence, ``n`` distinct positions of ``0 … max_length−1``, sorted.
    ``generator`` (a CPU one) makes a draw reproducible, as a test's must be."""
    if n > max_length:
        raise ValueError(
            f"{n} tokens do not fit {max_length} randomized positions; raise max_length"
        )
    scores = torch.rand(batch, max_length, generator=generator)
    return scores.topk(n, dim=-1).indices.sort(dim=-1).values.to(device)


def eval_generator(n: int) -> torch.Generator:
    """The draw a test makes for an ``n``-token sequence: the same at every call, so that a test's
    accuracy and cached decoding are reproducible."""
    return torch.Generator().manual_seed(n)
