"""A decoder-only (GPT-style) Transformer: the prompt (the input) and the answer (SOS and the
output digits) in one causal sequence, one attention per layer, the loss on the answer only.

Its interface is ``abcmini.nn.model.Transformer``'s (``forward``, ``greedy``, ``layout``,
``scaffold``), so training, testing and ABC calibration run on either. Scaffolds are the same
objects: their ``(self_bias [h q q], cross_bias [h q s])`` become the answer rows of the one
``[(s+q) (s+q)]`` attention matrix (``joint_bias``): answer→prompt takes the cross-attention
bias, answer→answer the self-attention bias. A scaffolded model's prompt rows read their own
token only, the decoder-only form of the paper's identity encoder: a prompt token's state is
then the same at every length. ``need_weights`` returns the answer rows split the same way
(``"cross"``, ``"self"``), which is what ABC averages and calibrates.

Positions run over the whole sequence (prompt ``0 … s−1``, answer ``s …``); with CPI from the
``end`` they are counted from the prompt's last token (its least significant digit), so each
digit keeps its phase in a frame of any width.
"""

import torch
from einops import rearrange
from torch import nn

from abcmini.nn import InputError
from abcmini.nn.config import ModelConfig
from abcmini.nn.lines import NEG_INF, Layout
from abcmini.nn.model import Block, KVCache, Scaffolded, Transformer, causal_bias, norm, rows
from abcmini.nn.positions import joint_positions
from abcmini.nn.randomized import MAX_LENGTH, eval_generator, randomized_positions
from abcmini.nn.size_cache import cached


def joint_bias(self_bias, cross_bias, n_src: int, n_q: int, device=None) -> torch.Tensor:
    """The ``[h (s+q) (s+q)]`` bias of one causal attention over prompt and answer: causal
    everywhere; with a scaffold, its answer rows take ``cross_bias`` over the prompt and
    ``self_bias`` over the answer, and the prompt rows read only their own token."""
    causal = causal_bias(n_src + n_q, n_src + n_q, device=device)
    if self_bias is None and cross_bias is None:
        return rearrange(causal, "q k -> 1 q k")
    heads = max(len(b) for b in (self_bias, cross_bias) if b is not None)
    own = torch.full((n_src, n_src + n_q), NEG_INF, device=device)
    own[:, :n_src].fill_diagonal_(0.0)
    answer_rows = [
        b if b is not None else torch.zeros(1, n_q, n, device=device)
        for b, n in ((cross_bias, n_src), (self_bias, n_q))
    ]
    answer = torch.cat([b.expand(heads, -1, -1) for b in answer_rows], dim=-1) + causal[n_src:]
    return torch.cat([own.expand(heads, -1, -1), answer], dim=1)


class DecoderOnly(Scaffolded):
    """``cfg.dec_layers`` blocks of causal self-attention over prompt and answer."""

    def __init__(self, cfg: ModelConfig, scaffold: nn.Module | None = None):
        super().__init__(cfg, scaffold)
        self.layers = nn.ModuleList(Block(cfg, causal=True) for _ in range(cfg.dec_layers))
        self.norm = norm(cfg)
        self.to_logits = nn.Linear(cfg.d_model, cfg.vocab_size)
        self._draws = {}  # a test's randomized FIRE positions by (batch, length): every step reads them

    def biases(
        self, n_q: int, n_src: int, device, layout: Layout | None = None
    ) -> list[tuple[torch.Tensor, bool]]:
        """The ``joint_bias`` of each layer for an ``n_src``-token prompt and ``n_q``-token answer,
        and whether its prompt rows read only their own token (the layer has a scaffold's biases)."""

        def build():
            pairs = self.scaffold_pairs(n_q, n_src, device, layout, len(self.layers))
            joint = {
                id(pair): joint_bias(*pair, n_src, n_q, device) for pair in pairs
            }  # a pair shared by every layer: once
            return [(joint[id(pair)], any(b is not None for b in pair)) for pair in pairs]

        return self.cached((n_q, n_src, layout, str(device)), build)

    def positions(self, n_src: int, n: int, device=None, batch: int = 1, total=None):
        """``[n_src + n]`` positions of prompt and answer; with FIRE over randomized positions
        (Zhou et al.), ``[batch n_src + n]``: each sequence ``n_src + n`` of ``max_position``
        positions, sorted, drawn afresh in training, at test the seeded draw of a sequence of
        ``total`` tokens (the length decoding reaches), kept for every step."""
        if self.cfg.fire_positions != "randomized":
            return joint_positions(n_src, n, self.cfg.period, self.cfg.cpi_from, device)
        total, length = total or n_src + n, self.cfg.max_position or MAX_LENGTH
        if total > length:
            raise InputError(f"a sequence of {total} tokens exceeds FIRE's {length} positions")
        if self.training:
            return randomized_positions(batch, total, length, device=device)[:, : n_src + n]
        return cached(
            self._draws,
            (batch, total, str(device)),
            lambda: randomized_positions(batch, total, length, eval_generator(total), device),
        )[:, : n_src + n]

    def forward(
        self,
        src,
        tgt_in,
        need_weights=False,
        shift=None,
        total: int | None = None,
        answer_rows: int | None = None,
    ):
        """Logits ``[b q vocab]`` of the answer rows, and per layer the answer rows' attention
        split into ``cross`` (→ prompt ``[b h q s]``) and ``self`` (→ answer ``[b h q q]``).
        ``shift``, ``total``: the token positions' draw and final length when decoding.
        ``answer_rows``: only the first rows of the answer, as the whole pass computes them (the
        attention is causal), at the cost of a pass over the prompt and those rows."""
        n_src, n_q = src.shape[1], tgt_in.shape[1]
        pos = self.positions(n_src, n_q, src.device, src.shape[0], total)
        pos, padding = self.unpadded(src, n_q, pos)
        sequence = torch.cat([src, tgt_in], dim=1)
        shift = self.shift(src, n_q) if shift is None else shift
        x, attention = (
            self.place(self.embed_tokens(sequence, pos), sequence, n_src, shift, total),
            [],
        )
        keep = n_src + min(answer_rows or n_q, n_q)
        x, pos = x[:, :keep], pos[..., :keep]
        for layer, (bias, reads_itself) in zip(
            self.layers, self.biases(n_q, n_src, src.device, self.layout(src))
        ):
            own = (
                n_src if reads_itself and not self.training else 0
            )  # testing: the prompt rows are their values
            bias = bias[..., own:keep, :keep] + (
                0 if padding is None else padding[..., own:keep, :keep]
            )
            x, probs = layer(x, pos, pos, bias, need_weights=need_weights, own_rows=own)
            probs = probs[..., n_src - own :, :] if need_weights else None  # the answer rows
            attention.append(
                {"self": probs[..., n_src:], "cross": probs[..., :n_src]}
                if need_weights
                else {"self": None, "cross": None}
            )
        return self.to_logits(self.norm(x[:, n_src:])), attention

    def unpadded(self, src, n_q: int, pos):
        """A batch of mixed lengths (``tasks.mixed``): each row's positions counted from its first
        token (randomized ones are a draw already), and ``[b 1 n n]`` masking every query's view
        of the prompt's ``PAD`` (but its own: a ``PAD`` row reads itself). ``(pos, None)`` without."""
        padding = src == self.cfg.pad
        if not padding.any():
            return pos, None
        if self.cfg.fire_positions != "randomized":
            pos = (pos - padding.sum(1, keepdim=True)).clamp(min=0)
        keys = torch.nn.functional.pad(padding, (0, n_q))
        n = keys.shape[1]
        hidden = rearrange(keys, "b k -> b 1 1 k") & ~torch.eye(
            n, dtype=torch.bool, device=src.device
        )
        return pos, torch.where(hidden, NEG_INF, 0.0)

    @torch.no_grad()
    def greedy(self, src, steps: int, use_cache: bool = True) -> torch.Tensor:
        """Greedy decoding of ``steps`` tokens after SOS: ``[b steps]``. With the cache, the
        prompt and SOS run once, then one token a step reads the cached keys/values."""
        tokens = torch.full(
            (src.shape[0], steps + 1), self.cfg.sos, dtype=torch.long, device=src.device
        )
        shift, total = (
            self.shift(src, steps + 1),
            src.shape[1] + steps,
        )  # the teacher-forced sequence's length
        if not use_cache:
            for t in range(steps):
                logits, _ = self(src, tokens[:, : t + 1], shift=shift, total=total)
                tokens[:, t + 1] = logits[:, -1].argmax(-1)
            return tokens[:, 1:]
        n_src, device = src.shape[1], src.device
        biases, pos = (
            [bias for bias, _ in self.biases(steps, n_src, device, self.layout(src))],
            self.positions(n_src, steps, device, src.shape[0]),
        )
        caches = [KVCache() for _ in self.layers]
        for t in range(steps):
            start, stop = (0, n_src + 1) if t == 0 else (n_src + t, n_src + t + 1)
            x = self.embed_tokens(
                torch.cat([src, tokens[:, :1]], dim=1) if t == 0 else tokens[:, t : t + 1],
                pos[..., start:stop],
            )
            x = self.place(
                x,
                torch.cat([src, tokens[:, : t + 1]], dim=1),
                n_src,
                shift,
                total,
                last=stop - start,
            )
            for layer, cache, bias in zip(self.layers, caches, biases):
                x, _ = layer(
                    x,
                    pos[..., start:stop],
                    pos[..., :stop],
                    rows(bias, start, stop, stop),
                    cache,
                    n_src + steps,
                )
            tokens[:, t + 1] = self.to_logits(self.norm(x[:, -1])).argmax(-1)
        return tokens[:, 1:]


def build_model(cfg: ModelConfig, scaffold=None) -> nn.Module:
    """The model ``cfg.arch`` names: the encoder-decoder (``Transformer``) or ``DecoderOnly``."""
    return DecoderOnly(cfg, scaffold) if cfg.arch == "decoder" else Transformer(cfg, scaffold)
