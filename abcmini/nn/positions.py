"""Positional schemes: sinusoidal ("vanilla"), none (NoPE), RoPE, ALiBi, Shaw-style relative,
and Cyclic Position Indexing (CPI), which any of them can use; the schemes of 2023–2024 have a
module each (``randomized``, ``fire``, ``abacus``, ``coupling``; ``token_positions``).

Absolute schemes act on the token embeddings; RoPE, ALiBi, the relative PE and FIRE act inside
self-attention (encoder and decoder) as modules ``attention_terms`` builds. Cross-attention gets
no positional term from them: its positional signal comes from the embeddings and from explicit
attention biases (ABS / ABC). Every position id a model uses, CPI included, comes from here
(``cyclic_positions``, ``input_positions``, ``joint_positions``).
"""

import math

import torch
from einops import rearrange
from torch import nn

from abcmini.nn.fire import FIRE


def cyclic_positions(n: int, period: int = 0, offset: int = 0, device=None) -> torch.Tensor:
    """Position indices ``offset … offset+n-1``, taken ``mod period`` when CPI is on (period > 0)."""
    positions = torch.arange(offset, offset + n, device=device)
    return positions % period if period > 0 else positions


def sinusoidal(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Vaswani et al. (2017): ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(…)``."""
    inv_freq = torch.exp(
        torch.arange(0, dim, 2, device=positions.device) * (-math.log(10000.0) / dim)
    )
    angles = positions.float()[..., None] * inv_freq
    return rearrange(
        torch.stack([angles.sin(), angles.cos()], dim=-1), "... half two -> ... (half two)"
    )


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE (Su et al.): rotate channel pairs ``(x_i, x_{i+d/2})`` of ``[b h n d]`` by ``p θ_i``."""
    dim = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, dim, 2, device=x.device).float() / dim)
    angles = rearrange(positions.float(), "n -> n 1") * inv_freq
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., : dim // 2], x[..., dim // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


class Rotary(nn.Module):
    """RoPE (Su et al.): queries and keys rotated by their positions inside the attention."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor):
        return rotate(q, q_pos), rotate(k, k_pos)


def alibi_slopes(heads: int) -> torch.Tensor:
    """Press et al.: the geometric sequence ``2^(-8/h), 2^(-16/h), …``."""
    return 2.0 ** (-8.0 * torch.arange(1, heads + 1) / heads)


def alibi_bias(slopes: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """``[... h q k]`` linear penalty ``-m_h |i - j|`` (positions ``[... q]``, ``[... k]``)."""
    distance = (rearrange(q_pos, "... q -> ... q 1") - rearrange(k_pos, "... k -> ... 1 k")).abs()
    return -rearrange(slopes, "h -> h 1 1") * distance.unsqueeze(-3)


class ALiBi(nn.Module):
    """Press et al. (2022) as an attention bias: ``[h q k]`` for queries at ``q_pos`` over keys at ``k_pos``."""

    def __init__(self, heads: int):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(heads), persistent=False)

    def forward(self, q_pos, k_pos, layout=None, queries=None) -> torch.Tensor:
        return alibi_bias(self.slopes, q_pos, k_pos)


class RelativePosition(nn.Module):
    """Shaw et al. (2018): a learned key embedding per clipped relative distance ``j - i``.

    Adds ``q_i · a_{clip(j - i, ±K)} / sqrt(d)`` to the logits (the key half of Shaw et al.).
    """

    def __init__(self, dim_head: int, max_distance: int):
        super().__init__()
        self.max_distance = max_distance
        self.table = nn.Embedding(2 * max_distance + 1, dim_head)
        nn.init.normal_(self.table.weight, std=dim_head**-0.5)

    def forward(self, q_pos, k_pos, layout=None, queries=None) -> torch.Tensor:
        """The ``[b h q k]`` logit term of ``queries [b h q d]``: unlike every other bias, Shaw's
        reads the queries."""
        q = queries
        distance = rearrange(k_pos, "k -> 1 k") - rearrange(q_pos, "q -> q 1")
        index = distance.clamp(-self.max_distance, self.max_distance) + self.max_distance
        per_distance = (
            torch.einsum("b h q d, r d -> b h q r", q, self.table.weight) * q.shape[-1] ** -0.5
        )
        index = index.expand(*per_distance.shape[:2], *index.shape)
        return per_distance.gather(-1, index)


def significance(
    digit: torch.Tensor, lsd_first: bool, through: torch.Tensor | None = None
) -> torch.Tensor:
    """``[b n]``: each digit's place in its own number (0 for the least significant digit), −1
    for every other token. A number is a run of digits in ``digit [b n]``, running on through the
    tokens ``through`` marks (index hints, one before each digit) without counting them;
    ``lsd_first`` says which way its digits are written (abcmini writes inputs most significant
    first, answers reversed)."""
    if not lsd_first:
        flip = None if through is None else through.flip(-1)
        return significance(digit.flip(-1), True, flip).flip(-1)
    member = digit if through is None else digit | through
    index = torch.arange(digit.shape[-1], device=digit.device).expand_as(digit)
    starts = member & ~torch.nn.functional.pad(member[..., :-1], (1, 0), value=False)
    run_start = torch.where(starts, index, torch.zeros_like(index)).cummax(dim=-1).values
    before = digit.long().cumsum(-1) - digit.long()  # digits left of each token
    place = before - before.gather(-1, run_start)
    return torch.where(digit, place, torch.full_like(index, -1))


def attention_terms(scheme: str | None, heads: int, dim_head: int, max_distance: int, causal: bool):
    """``(rotary, position_bias)`` of a scheme that acts inside self-attention (RoPE; ALiBi, Shaw
    relative, FIRE), each None where it has none: the attention calls them and knows no names.
    A bias is called as every attention bias is, ``bias(q_pos, k_pos, layout, queries)`` →
    ``[... h q k]`` (only Shaw's reads the queries)."""
    biases = {
        "alibi": lambda: ALiBi(heads),
        "relative": lambda: RelativePosition(dim_head, max_distance),
        "fire": lambda: FIRE(heads, causal),
    }
    return (Rotary() if scheme == "rope" else None), (
        biases[scheme]() if scheme in biases else None
    )


def input_positions(
    n: int, period: int, cpi_from: str = "start", cpi_unit: str = "token", device=None
) -> torch.Tensor:
    """The encoder-decoder's input positions ``[n]``. CPI from the ``end`` counts from the last
    token (the least significant digit), so each digit keeps its phase in a frame of any width;
    in operand ``pair``s both digits of a pair share their pair's phase."""
    if period and cpi_unit == "pair":
        return torch.arange(n - 1, -1, -1, device=device) // 2 % period
    pos = cyclic_positions(n, period, device=device)
    return pos.flip(0) if period and cpi_from == "end" else pos


def joint_positions(
    n_src: int, n: int, period: int, cpi_from: str = "start", device=None
) -> torch.Tensor:
    """A decoder-only model's ``[n_src + n]`` positions of prompt and answer (CPI: mod ``period``,
    from the prompt's last token with ``cpi_from`` ``end``)."""
    pos = torch.arange(n_src + n, device=device)
    return (pos - (n_src - 1 if cpi_from == "end" else 0)) % period if period else pos
