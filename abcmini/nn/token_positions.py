"""The positional schemes that give every token a position of its own, computed from the
sequence and added to the token embeddings: randomized positions (``abcmini.nn.randomized``, with
the sinusoidal encoding), Abacus (``abcmini.nn.abacus``) and Position Coupling
(``abcmini.nn.coupling``), both into a learned table (Coupling's further levels, a table each,
summed). Prompts write their numbers most significant digit first (``lsd_input``: least first),
answers least significant first; ``answer_from`` says where the answer starts.
"""

import torch
from torch import nn

from abcmini.nn import InputError, abacus, coupling
from abcmini.nn.positions import sinusoidal
from abcmini.nn.randomized import MAX_LENGTH, eval_generator, randomized_positions
from abcmini.nn.size_cache import cached

TOKEN_SCHEMES = ("random", "abacus", "coupling")


def token_positions(cfg) -> "TokenPositions | None":
    """The token positions of a ``ModelConfig``'s scheme (None: its tokens get none)."""
    if cfg.scheme not in TOKEN_SCHEMES:
        return None
    return TokenPositions(
        cfg.scheme,
        cfg.d_model,
        cfg.digit_tokens,
        cfg.pe_scale,
        cfg.max_position,
        cfg.coupling_levels,
        cfg.lsd_input,
        cfg.hint_from,
    )


class TokenPositions(nn.Module):
    def __init__(
        self,
        scheme: str,
        dim: int,
        digit_tokens: int,
        pe_scale: float = 1.0,
        max_position: int | None = None,
        levels: int = 1,
        lsd_input: bool = False,
        hint_from: int | None = None,
    ):
        super().__init__()
        self.lsd_input, self.hint_from = lsd_input, hint_from
        self.scheme, self.dim, self.digit_tokens, self.pe_scale, self.levels = (
            scheme,
            dim,
            digit_tokens,
            pe_scale,
            levels,
        )
        self.max_position = max_position or {
            "abacus": abacus.MAX_POSITION,
            "coupling": coupling.MAX_POSITION,
        }.get(scheme, MAX_LENGTH)
        if scheme != "random":
            self.table = nn.Embedding(self.max_position + 1, dim)
        self.numbers = (
            nn.Embedding(self.max_position + 1, dim) if levels >= 2 else None
        )  # Coupling's second level
        self.sums = (
            nn.Embedding(self.max_position + 1, dim) if levels == 3 else None
        )  # … and multiply's third
        self._test_draws = {}  # a test's randomized positions, drawn once per (batch, length): every decoding step reads them

    @property
    def batch_invariant(self) -> bool:
        """Whether an example's positions do not depend on its batch: randomized positions' test
        draw gives each row of a batch its own."""
        return self.scheme != "random"

    def draw(self, batch: int, longest: int, device, count: int = 0) -> torch.Tensor | None:
        """``[batch]``: each example's shift of its ids, Abacus's offset ``k`` or Coupling's start
        ``s``, drawn at random in training so that ids up to ``max_position`` are trained, fixed at
        test (``k`` 0, ``s`` 1); ``longest`` bounds the length of the sequence's numbers in digits:
        its longest number's top id, ``1 + k + longest − 1`` or ``s + longest − 1``, reaches
        ``max_position`` and no further. With Coupling's levels, ``[batch levels]``: the second's
        start ``t`` drawn so that ``t`` plus ``count`` (a bound on a part's numbers) fits, the third's
        (``multiply``'s running sums) as ``s``."""
        if self.scheme == "random":
            return None
        low = 0 if self.scheme == "abacus" else 1
        bounds = [longest, count, longest][: self.levels]
        if not self.training:
            starts = [torch.full((batch,), low, device=device) for _ in bounds]
        else:
            starts = [
                torch.randint(low, max(low, self.max_position - n + low) + 1, (batch,)).to(device)
                for n in bounds
            ]
        return starts[0] if self.levels == 1 else torch.stack(starts, dim=-1)

    def forward(
        self,
        tokens: torch.Tensor,
        answer_from: int,
        shift: torch.Tensor | None,
        total: int | None = None,
        decoding: bool = False,
    ) -> torch.Tensor:
        """``[b n d]`` for ``tokens [b n]``; ``total``: the length the sequence will reach when
        it is decoded a token at a time (randomized positions are drawn for all of it at once).
        ``decoding``: the answer is the model's own, whose ids past the table are held at its top
        (an answer that runs past its format is wrong whatever ids it gets); a prompt's never are."""
        batch, n = tokens.shape
        if self.scheme == "random":
            total = total or n
            if total > self.max_position:
                raise InputError(
                    f"a sequence of {total} tokens exceeds the {self.max_position} randomized positions"
                )
            return self.pe_scale * sinusoidal(
                self.randomized(batch, total, tokens.device)[:, :n], self.dim
            )
        digit, starts = tokens < self.digit_tokens, shift.reshape(batch, -1)
        hint = None if self.hint_from is None else tokens >= self.hint_from
        if self.scheme == "abacus":
            parts = [(slice(None, answer_from), self.lsd_input), (slice(answer_from, None), True)]
            levels = [
                torch.cat(
                    [
                        abacus.abacus_ids(
                            digit[:, part], lsd, shift, None if hint is None else hint[:, part]
                        )
                        for part, lsd in parts
                    ],
                    dim=1,
                )
            ]
        else:
            levels = coupling.level_ids(digit, answer_from, starts, self.lsd_input, hint)
        checked = [ids[:, :answer_from] for ids in levels] if decoding else levels
        top = max((int(ids.max()) for ids in checked if ids.numel()), default=0)
        if top > self.max_position:
            raise InputError(
                f"position id {top} exceeds the {self.scheme} table's {self.max_position}"
            )
        levels = [ids.clamp(max=self.max_position) for ids in levels] if decoding else levels
        return sum(table(ids) for table, ids in zip((self.table, self.numbers, self.sums), levels))

    def randomized(self, batch: int, total: int, device) -> torch.Tensor:
        """``[batch total]`` randomized positions: a fresh draw in training; at test the seeded
        draw of ``eval_generator``, kept, since cached decoding asks for it at every step."""
        if self.training:
            return randomized_positions(batch, total, self.max_position, device=device)
        return cached(
            self._test_draws,
            (batch, total, str(device)),
            lambda: randomized_positions(
                batch, total, self.max_position, eval_generator(total), device
            ),
        )
