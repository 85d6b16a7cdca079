"""Encoder-decoder Transformer in einops, whose every attention takes an additive per-head bias.

- ``Attention`` adds any bias broadcastable to ``[b h q k]`` to the pre-softmax scores and,
  when asked, returns the attention probabilities (no hooks, no patching).
- Pre-LayerNorm blocks (``norm``, ``norm_position``, ``ff``: RMSNorm, a norm after each
  sublayer too, a gated-GELU feed-forward, as Cho et al.'s script); 0 encoder layers means
  cross-attention reads the embedded input directly (what the authors' code does).
- The model owns its scaffold (an ABS window or ABC's line tables, ``abcmini.nn.lines``, ``abcmini.nn.windows``) and asks
  it for the size each pass needs.
- ``greedy`` decodes a batch with a key/value cache: step ``t`` runs the decoder on one token
  and reads the cached keys/values of tokens ``< t``.
"""

import functools

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from abcmini.nn.config import ModelConfig
from abcmini.nn.lines import Layout, segments_of
from abcmini.nn.positions import (
    attention_terms,
    cyclic_positions,
    input_positions,
    significance,
    sinusoidal,
)
from abcmini.nn.scaffolds import layer_biases
from abcmini.nn.size_cache import cached
from abcmini.nn.token_positions import token_positions


def causal_bias(n_q: int, n_k: int, offset: int = 0, device=None) -> torch.Tensor:
    """``[q k]``: 0 where key ``j <= offset + i``, −inf after."""
    i = rearrange(torch.arange(n_q, device=device) + offset, "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    return torch.zeros(n_q, n_k, device=device).masked_fill(j > i, float("-inf"))


class KVCache:
    """Keys/values ``[b h n d]`` of one attention during decoding.

    Self-attention: preallocated and filled one step at a time (``extend``). Cross-attention
    (``static``): the encoder memory's keys/values, projected once at the first step.
    """

    def __init__(self, static: bool = False):
        self.k = self.v = None
        self.length, self.static = 0, static

    def extend(self, k: torch.Tensor, v: torch.Tensor, capacity: int):
        if self.k is None:
            self.k = k.new_empty(*k.shape[:2], capacity, k.shape[-1])
            self.v = v.new_empty(*v.shape[:2], capacity, v.shape[-1])
        end = self.length + k.shape[2]
        self.k[:, :, self.length : end], self.v[:, :, self.length : end] = k, v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]


class Attention(nn.Module):
    """Multi-head attention: ``softmax(q kᵀ / sqrt(d) + bias) v``.

    ``bias`` is what the caller hands in (a scaffold, the causal mask); a scheme acting inside the
    attention comes as modules that ``terms()`` builds (``positions.attention_terms``, after the
    projections, so a seed initializes the same weights): ``rotary`` turns queries and keys,
    ``position_bias(q_pos, k_pos, queries=q)`` adds its ``[... h q k]`` term to ``bias``.
    """

    def __init__(self, cfg: ModelConfig, terms=None):
        super().__init__()
        self.heads, self.dropout = cfg.heads, cfg.dropout
        self.to_q = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.to_kv = nn.Linear(cfg.d_model, 2 * cfg.d_model, bias=False)
        self.to_out = nn.Linear(cfg.d_model, cfg.d_model)
        self.rotary, self.position_bias = terms() if terms else (None, None)

    def forward(
        self, x, context, q_pos, k_pos, bias=None, cache=None, capacity=0, need_weights=False
    ):
        """``x`` ``[b q d]`` attends to ``context`` ``[b k d]``; ``q_pos``/``k_pos`` index them.

        With a ``cache`` (decoder self-attention), ``context`` holds only the new tokens and
        the keys/values of earlier ones come from the cache.
        """
        q = rearrange(self.to_q(x), "b n (h d) -> b h n d", h=self.heads)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v
        else:
            k, v = rearrange(
                self.to_kv(context), "b n (two h d) -> two b h n d", two=2, h=self.heads
            )
        if self.rotary is not None:
            q, k = self.rotary(q, k, q_pos, k_pos[-k.shape[2] :])
        if cache is not None and cache.static:
            cache.k, cache.v = k.contiguous(), v.contiguous()
        elif cache is not None:
            k, v = cache.extend(k, v, capacity)
        if self.position_bias is not None:
            bias = _add(bias, self.position_bias(q_pos, k_pos, queries=q))
        dropout = self.dropout if self.training else 0.0
        if (
            need_weights or q.shape[2] == 1
        ):  # explicit path: weights asked for, or one decoding step
            scores = torch.einsum("b h q d, b h k d -> b h q k", q * q.shape[-1] ** -0.5, k)
            probs = (scores if bias is None else scores + bias).softmax(dim=-1)
            out = torch.einsum(
                "b h q k, b h k d -> b h q d", F.dropout(probs, dropout, self.training), v
            )
            probs = probs if need_weights else None
        else:
            probs = None
            # a [q k] or [b h q k] mask keeps PyTorch's fused CPU kernel; a [h q k] one would not (docs/benchmarks.md)
            mask = None if bias is None else bias.to(q.dtype)[(None,) * (4 - bias.dim())]
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)")), probs

    def own_token(self, x):
        """The attention of rows that read only their own token: softmax over one key is 1, so
        each row's output is its own value (``attention([x], bias 0 on the diagonal only)``)."""
        v = rearrange(self.to_kv(x), "b n (two h d) -> two b h n d", two=2, h=self.heads)[1]
        return self.to_out(rearrange(v, "b h n d -> b n (h d)"))


def in_attention(cfg: ModelConfig, causal: bool):
    """What builds the terms ``cfg``'s scheme adds inside one self-attention (``attention_terms``:
    none for a scheme that acts elsewhere)."""
    return functools.partial(
        attention_terms, cfg.scheme, cfg.heads, cfg.d_model // cfg.heads, cfg.max_distance, causal
    )


def _add(bias, extra):
    return extra if bias is None else bias + extra


class FeedForward(nn.Sequential):
    def __init__(self, cfg: ModelConfig):
        super().__init__(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.GELU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )


class GatedFeedForward(nn.Module):
    """The gated-GELU feed-forward of T5 v1.1, Cho et al.'s: ``W_o (gelu(W_g x) ⊙ W_i x)``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate, self.inner = (nn.Linear(cfg.d_model, cfg.d_ff, bias=False) for _ in range(2))
        self.drop, self.out = nn.Dropout(cfg.dropout), nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x):
        return self.out(self.drop(F.gelu(self.gate(x)) * self.inner(x)))


def feed_forward(cfg: ModelConfig) -> nn.Module:
    return GatedFeedForward(cfg) if cfg.ff == "gated-gelu" else FeedForward(cfg)


def norm(cfg: ModelConfig) -> nn.Module:
    """The model's normalization: LayerNorm, or RMSNorm (``cfg.norm`` ``rms``)."""
    return nn.RMSNorm(cfg.d_model) if cfg.norm == "rms" else nn.LayerNorm(cfg.d_model)


def post_norm(cfg: ModelConfig) -> nn.Module:
    """A norm on a sublayer's output before the residual sum (``norm_position`` ``pre_post``, Cho
    et al.'s), else nothing."""
    return norm(cfg) if cfg.norm_position == "pre_post" else nn.Identity()


class Block(nn.Module):
    """Pre-LayerNorm self-attention and feed-forward: an encoder layer, and a decoder-only
    model's layer (with a key/value ``cache`` when decoding). Returns ``(x, probs)``."""

    def __init__(self, cfg: ModelConfig, causal: bool):
        super().__init__()
        self.norm_attn, self.norm_ff = norm(cfg), norm(cfg)
        self.post_attn, self.post_ff = post_norm(cfg), post_norm(cfg)
        self.attn = Attention(cfg, in_attention(cfg, causal))
        self.ff, self.drop = feed_forward(cfg), nn.Dropout(cfg.dropout)

    def forward(
        self, x, q_pos, k_pos, bias=None, cache=None, capacity=0, need_weights=False, own_rows=0
    ):
        """``own_rows``: the first rows read only their own token (a scaffolded decoder-only
        model's prompt): their attention is their value, so only the later rows (and their
        ``probs``) are computed. ``bias`` then holds the later rows only."""
        h = self.norm_attn(x)
        out, probs = self.attn(
            h[:, own_rows:], h, q_pos[..., own_rows:], k_pos, bias, cache, capacity, need_weights
        )
        if own_rows:
            out = torch.cat([self.attn.own_token(h[:, :own_rows]), out], dim=1)
        x = x + self.drop(self.post_attn(out))
        return x + self.drop(self.post_ff(self.ff(self.norm_ff(x)))), probs


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm_self, self.norm_cross, self.norm_ff = (norm(cfg) for _ in range(3))
        self.post_self, self.post_cross, self.post_ff = (post_norm(cfg) for _ in range(3))
        self.self_attn = Attention(cfg, in_attention(cfg, causal=True))
        self.cross_attn = Attention(cfg)
        self.ff, self.drop = feed_forward(cfg), nn.Dropout(cfg.dropout)

    def forward(
        self,
        x,
        memory,
        q_pos,
        k_pos,
        mem_pos,
        self_bias,
        cross_bias,
        caches=(None, None),
        capacity=0,
        need_weights=False,
    ):
        h = self.norm_self(x)
        out, self_probs = self.self_attn(
            h, h, q_pos, k_pos, self_bias, caches[0], capacity, need_weights
        )
        x = x + self.drop(self.post_self(out))
        out, cross_probs = self.cross_attn(
            self.norm_cross(x),
            memory,
            q_pos,
            mem_pos,
            cross_bias,
            caches[1],
            need_weights=need_weights,
        )
        x = x + self.drop(self.post_cross(out))
        x = x + self.drop(self.post_ff(self.ff(self.norm_ff(x))))
        return x, {"self": self_probs, "cross": cross_probs}


class Scaffolded(nn.Module):
    """A model that adds a scaffold's biases to its attention (and, with a scheme of
    ``token_positions``, each token's position to its embedding): a ``lines.SelfCross`` of
    self- and cross-attention biases, each ``bias(q_pos, k_pos, layout) → [h q k]``
    (``abcmini.nn.lines``, ``block_lines``, ``windows``), or None. The biases are kept per size, since training batches share one
    shape; the scaffold's buffers are part of the model's ``state_dict``."""

    def __init__(self, cfg: ModelConfig, scaffold: nn.Module | None = None):
        super().__init__()
        self.cfg, self.scaffold, self._biases = cfg, scaffold, {}
        self.token_positions = token_positions(cfg)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)

    def embed_tokens(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Token embedding (``N(0, 1)`` entries), plus the sinusoidal encoding at the config's
        ``sinusoidal_scale`` (``pe_scale < 1`` makes positions a weak signal next to the tokens)."""
        x, scale = self.embed(tokens), self.cfg.sinusoidal_scale
        return x + scale * sinusoidal(pos, self.cfg.d_model) if scale else x

    def shift(self, src: torch.Tensor, n_q: int):
        """One draw of the token positions' shifts for a batch (``token_positions.TokenPositions.draw``):
        its numbers are at most the prompt's longest or the ``n_q`` answer tokens long (measured in
        training only: a test's shift is fixed), and a part has at most as many numbers as tokens."""
        if self.token_positions is None:
            return None
        if not self.training:
            longest = n_q
        else:  # the prompt's longest number, counted through its index hints
            place = significance(src < self.cfg.digit_tokens, False, src >= self.cfg.hint_from)
            longest = max(int(place.max()) + 1, n_q)
        return self.token_positions.draw(
            src.shape[0], longest, src.device, count=max(src.shape[1], n_q)
        )

    def place(
        self,
        x: torch.Tensor,
        tokens: torch.Tensor,
        answer_from: int,
        shift,
        total: int | None = None,
        last: int | None = None,
    ):
        """``x`` plus the token positions of ``tokens`` (their ``last`` rows only, when decoding a step)."""
        if self.token_positions is None:
            return x
        extra = self.token_positions(tokens, answer_from, shift, total, decoding=last is not None)
        return x + (extra[:, -last:] if last else extra)

    @property
    def batch_invariant(self) -> bool:
        """Whether an example's logits do not depend on the batch around it: not so for randomized
        positions, whose test draw gives each row of a batch its own positions."""
        return self.cfg.fire_positions != "randomized" and (
            self.token_positions is None or self.token_positions.batch_invariant
        )

    def set_scaffold(self, scaffold: nn.Module | None) -> None:
        """Another scaffold (or None): biases of the old one are never served."""
        self.scaffold, self._biases = scaffold, {}

    def layout(self, src: torch.Tensor) -> Layout | None:
        """The input's segments (``lines.segments_of``), the same for every row of a batch in a
        fixed frame; what an anchored scaffold needs (None without a scaffold)."""
        return segments_of(src[0] < self.cfg.digit_tokens) if self.scaffold is not None else None

    def scaffold_pairs(
        self, n_q: int, n_src: int, device, layout: Layout | None, depth: int
    ) -> list[tuple]:
        """The scaffold's ``(self_bias, cross_bias)`` for each of ``depth`` layers (``(None, None)`` without one)."""
        if self.scaffold is None:
            return [(None, None)] * depth
        return layer_biases(self.scaffold, n_q, n_src, layout, depth, device)

    def cached(self, key: tuple, build):
        """``build()``'s biases for a size ``key`` (shapes, layout, device), built once."""
        return cached(self._biases, key, build)


class Transformer(Scaffolded):
    """The paper's encoder-decoder: the scaffold's biases are added in the decoder layers."""

    def __init__(self, cfg: ModelConfig, scaffold: nn.Module | None = None):
        super().__init__(cfg, scaffold)
        self.encoder = nn.ModuleList(Block(cfg, causal=False) for _ in range(cfg.enc_layers))
        self.enc_norm = norm(cfg) if cfg.enc_layers else nn.Identity()
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        self.dec_norm = norm(cfg)
        self.to_logits = nn.Linear(cfg.d_model, cfg.vocab_size)

    def biases(self, n_q: int, n_src: int, device, layout: Layout | None = None) -> list[tuple]:
        """``(self_bias, cross_bias)`` per decoder layer for an ``n_q``-token output and
        ``n_src``-token input: the scaffold's (one pair serves every layer unless it is per layer),
        the causal mask already in the self-attention bias (row ``t`` of it, cut to keys ``≤ t``,
        is the scaffold's row alone, so cached decoding uses the same tensors)."""

        def build():
            pairs = self.scaffold_pairs(n_q, n_src, device, layout, len(self.decoder))
            causal = causal_bias(n_q, n_q, device=device)
            masked = {
                id(s): _add(s, causal) for s, _ in pairs
            }  # a pair shared by every layer is masked once
            return [(masked[id(s)], c) for s, c in pairs]

        return self.cached((n_q, n_src, layout, str(device)), build)

    def positions(self, n: int, offset: int = 0, device=None) -> torch.Tensor:
        return cyclic_positions(n, self.cfg.period, offset, device)

    def input_positions(self, n: int, device=None) -> torch.Tensor:
        return input_positions(n, self.cfg.period, self.cfg.cpi_from, self.cfg.cpi_unit, device)

    def encode(self, src: torch.Tensor, shift=None) -> torch.Tensor:
        pos = self.input_positions(src.shape[1], device=src.device)
        x = self.place(self.embed_tokens(src, pos), src, src.shape[1], shift)
        for layer in self.encoder:
            x, _ = layer(x, pos, pos)
        return self.enc_norm(x)

    def decode(
        self,
        tgt_in,
        memory,
        need_weights=False,
        layout: Layout | None = None,
        shift=None,
        total: int | None = None,
        answer_rows: int | None = None,
    ):
        """Teacher-forced decoder pass with the scaffold's biases and the causal mask.
        Returns logits ``[b T vocab]`` and per-layer attention; ``answer_rows``: only the first
        ``T`` rows, as the whole pass computes them (the decoder is causal)."""
        n, device = tgt_in.shape[1], tgt_in.device
        pos, mem_pos = (
            self.positions(n, device=device),
            self.input_positions(memory.shape[1], device=device),
        )
        x, attention = self.place(self.embed_tokens(tgt_in, pos), tgt_in, 0, shift, total), []
        keep = min(answer_rows or n, n)
        x, pos = x[:, :keep], pos[:keep]
        for layer, (self_bias, cross_bias) in zip(
            self.decoder, self.biases(n, memory.shape[1], device, layout)
        ):
            x, probs = layer(
                x,
                memory,
                pos,
                pos,
                mem_pos,
                rows(self_bias, 0, keep, keep),
                rows(cross_bias, 0, keep),
                need_weights=need_weights,
            )
            attention.append(probs)
        return self.to_logits(self.dec_norm(x)), attention

    def forward(self, src, tgt_in, need_weights=False, answer_rows: int | None = None):
        shift = self.shift(src, tgt_in.shape[1])
        return self.decode(
            tgt_in,
            self.encode(src, shift),
            need_weights,
            self.layout(src),
            shift,
            answer_rows=answer_rows,
        )

    @torch.no_grad()
    def greedy(self, src, steps: int, use_cache: bool = True) -> torch.Tensor:
        """Greedy decoding of ``steps`` tokens after SOS: ``[b steps]``; step ``t`` uses row ``t``
        of the scaffold's biases for the full output."""
        shift = self.shift(src, steps + 1)
        memory, layout = self.encode(src, shift), self.layout(src)
        tokens = torch.full(
            (src.shape[0], steps + 1), self.cfg.sos, dtype=torch.long, device=src.device
        )
        if not use_cache:
            for t in range(steps):
                logits, _ = self.decode(
                    tokens[:, : t + 1], memory, layout=layout, shift=shift, total=steps
                )
                tokens[:, t + 1] = logits[:, -1].argmax(-1)
            return tokens[:, 1:]
        biases = self.biases(steps, memory.shape[1], src.device, layout)
        caches = [(KVCache(), KVCache(static=True)) for _ in self.decoder]
        mem_pos = self.input_positions(memory.shape[1], device=src.device)
        k_pos_all = self.positions(steps, device=src.device)
        for t in range(steps):
            q_pos, k_pos = k_pos_all[t : t + 1], k_pos_all[: t + 1]
            x = self.place(
                self.embed_tokens(tokens[:, t : t + 1], q_pos),
                tokens[:, : t + 1],
                0,
                shift,
                steps,
                last=1,
            )
            for layer, cache, (self_bias, cross_bias) in zip(self.decoder, caches, biases):
                x, _ = layer(
                    x,
                    memory,
                    q_pos,
                    k_pos,
                    mem_pos,
                    rows(self_bias, t, t + 1, t + 1),
                    rows(cross_bias, t, t + 1),
                    cache,
                    steps,
                )
            tokens[:, t + 1] = self.to_logits(self.dec_norm(x))[:, -1].argmax(-1)
        return tokens[:, 1:]


def rows(bias, start, stop, keys=None):
    """Rows ``start:stop`` (and the first ``keys`` columns) of a ``[... q k]`` bias."""
    if bias is None:
        return None
    return bias[..., start:stop, :keys] if keys is not None else bias[..., start:stop, :]
