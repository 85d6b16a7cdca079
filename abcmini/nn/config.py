"""The model's configuration and its size presets, without torch: the run layer and the command
line read them before torch is imported."""

from dataclasses import asdict, dataclass

from abcmini.nn import InputError
from abcmini.nn.schemes import SCHEMES

ARCHS = (
    "encoder-decoder",
    "decoder",
)  # the paper's encoder-decoder; a GPT-style decoder-only model (abcmini.nn.decoder)


BLOCK_CHOICES = {
    "norm": ("layer", "rms"),
    "norm_position": ("pre", "pre_post"),
    "ff": ("gelu", "gated-gelu"),
}


@dataclass(frozen=True)
class ModelConfig:
    arch: str = "encoder-decoder"
    enc_layers: int = 1
    dec_layers: int = 6
    heads: int = 8
    d_model: int = 128
    d_ff: int = 512
    dropout: float = 0.3
    scheme: str = "vanilla"  # positional scheme, see positions.SCHEMES
    period: int = 0  # Cyclic Position Indexing period T (0: off)
    cpi_from: str = "start"  # CPI on the input counted from its first token (the paper) or from its "end", the least significant digit
    cpi_unit: str = "token"  # CPI counts input tokens, or operand "pair"s of an interleaved input (from its end)
    max_distance: int = 16  # clipping distance of the relative PE
    max_position: int | None = (
        None  # randomized positions' range, Abacus's and Coupling's table (None: the module's default)
    )
    fire_positions: str = (
        "index"  # FIRE reads token indices, or "randomized" positions (Zhou et al.)
    )
    coupling_levels: int = (
        1  # Position Coupling's levels (Cho et al. 2025): 2 on multiadd, 3 on multiply
    )
    pe_scale: float = (
        1.0  # amplitude of the sinusoidal encoding (vanilla) next to N(0, 1) token embeddings
    )
    lsd_input: bool = False  # the prompt writes its numbers least significant digit first
    norm: str = "layer"  # LayerNorm, or "rms": RMSNorm
    norm_position: str = "pre"  # before each sublayer, or "pre_post": before and after it
    ff: str = "gelu"  # the feed-forward: GELU, or "gated-gelu" (T5 v1.1)
    vocab_size: int = 15  # tokens; abcmini's vocabulary is "0123456789+*$&@" (abcmini.tasks.VOCAB)
    sos: int = 12  # the token that starts every output (greedy decoding)
    pad: int = 14  # the token that pads a batch of mixed lengths (abcmini.tasks.mixed)
    digit_tokens: int = (
        10  # token ids below this are digits: an anchored bias finds the input's segments by them
    )
    hint_from: int = 15  # token ids from this one on are index hints (abcmini.tasks.HINT)

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise InputError(
                f"unknown positional scheme {self.scheme!r}; choose one of {', '.join(SCHEMES)}"
            )
        for name, allowed in BLOCK_CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} is one of {', '.join(allowed)}, not {getattr(self, name)!r}"
                )
        if self.arch not in ARCHS:
            raise ValueError(f"arch is one of {', '.join(ARCHS)}, not {self.arch!r}")
        if self.cpi_from not in ("start", "end"):
            raise ValueError(f"cpi_from is start or end, not {self.cpi_from!r}")
        if self.cpi_unit not in ("token", "pair") or (
            self.cpi_unit == "pair" and (self.cpi_from != "end" or self.arch != "encoder-decoder")
        ):
            raise ValueError(
                f"cpi_unit is token, or pair from the end of an encoder-decoder's input, not {self.cpi_unit!r}"
            )

    @property
    def sinusoidal_scale(self) -> float:
        """The sinusoidal encoding's amplitude on the token embeddings: ``pe_scale`` for vanilla,
        0 for every other scheme."""
        return self.pe_scale if self.scheme == "vanilla" else 0.0

    def to_dict(self) -> dict:
        return asdict(self)


PRESETS = {
    # the paper's model (§3.4)
    "paper": dict(enc_layers=1, dec_layers=6, heads=8, d_model=128, d_ff=512, dropout=0.3),
    # the CPU recipe's model, chosen by measurement (README, "Choosing the CPU preset")
    "cpu": dict(enc_layers=1, dec_layers=2, heads=4, d_model=64, d_ff=256, dropout=0.0),
    # for tests and smoke runs
    "tiny": dict(enc_layers=1, dec_layers=1, heads=2, d_model=32, d_ff=64, dropout=0.0),
}
