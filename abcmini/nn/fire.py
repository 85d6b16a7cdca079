"""FIRE, Functional Interpolation for Relative Positions (Li et al. 2024, "Functional
Interpolation for Relative Positions Improves Long Context Transformers", ICLR): a learned
attention bias ``b(i, j) = f(ψ(i − j) / ψ(max(L, i)))`` with ``ψ(x) = log(c·x + 1)``, ``f`` a small
MLP (1 → 32 → heads, ReLU) and ``c``, ``L`` learned. Dividing by the query position maps every
distance of every sequence into ``[0, 1]``: a longer test interpolates between the distances
training saw instead of extrapolating past them. Zhou et al. (2024) use it, with index hints and
over randomized positions (positions ``[b n]``, a draw per sequence), for 40 → 100-digit
addition. FIRE is defined for causal attention; in a bidirectional one (the encoder) ``i − j`` is
taken as ``|i − j|`` and normalized by the sequence's length instead.
"""

import torch
from einops import rearrange
from torch import nn

from abcmini.nn.size_cache import cached

HIDDEN = 32  # the MLP's width


class FIRE(nn.Module):
    def __init__(
        self,
        heads: int,
        causal: bool = True,
        hidden: int = HIDDEN,
        c: float = 1.0,
        threshold: float = 1.0,
    ):
        super().__init__()
        self.causal = causal
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, heads))
        self.c = nn.Parameter(torch.tensor(float(c)))
        self.threshold = nn.Parameter(torch.tensor(float(threshold)))
        self._biases = {}  # eval-mode biases by positions: a long test's batches share one

    def train(self, mode: bool = True):
        """Switching mode (``eval()`` included) forgets the biases: the parameters may have moved."""
        self._biases.clear()
        return super().train(mode)

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.c.abs() * x + 1)

    def forward(self, q_pos, k_pos, layout=None, queries=None) -> torch.Tensor:
        """``[... h q k]``: the bias of queries at ``q_pos [... q]`` over keys at ``k_pos [... k]``
        (causal: a key after its query is masked, and gets the bias of distance 0). In eval mode
        without gradients the bias is built once per positions: a 500-digit test in batches of
        tens otherwise rebuilds a ``[h q k]`` MLP output for every batch."""
        if self.training or torch.is_grad_enabled():
            return self.bias(q_pos, k_pos)
        key = tuple((str(p.device), p.shape, p.cpu().numpy().tobytes()) for p in (q_pos, k_pos))
        return cached(self._biases, key, lambda: self.bias(q_pos, k_pos))

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        distance = (
            rearrange(q_pos, "... q -> ... q 1") - rearrange(k_pos, "... k -> ... 1 k")
        ).float()
        distance = distance.clamp(min=0) if self.causal else distance.abs()
        span = k_pos.amax(-1, keepdim=True) - k_pos.amin(-1, keepdim=True)
        reach = (q_pos if self.causal else span.expand_as(q_pos)).float() + 1  # i counted from 1
        scale = self.psi(torch.maximum(self.threshold.abs(), reach))
        normalized = self.psi(distance) / rearrange(scale, "... q -> ... q 1")
        return rearrange(self.mlp(normalized[..., None]), "... q k h -> ... h q k")
