import pytest
import torch

from abcmini.nn.config import PRESETS, ModelConfig
from abcmini.nn.decoder import DecoderOnly
from abcmini.nn.lines import SelfCross
from abcmini.nn.model import Transformer, causal_bias
from abcmini.nn.positions import alibi_bias, alibi_slopes, cyclic_positions
from abcmini.nn.schemes import SCHEMES
from abcmini.tasks import SOS, exact_length_numbers, format_task


def random_model(scheme="vanilla", period=0, scaffold=None, **overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(
        ModelConfig(**{**PRESETS["tiny"], "heads": 4, **overrides}, scheme=scheme, period=period),
        scaffold,
    ).eval()


class Corner(torch.nn.Module):
    """A bias that serves the top-left corner of a given one, whatever rows and keys are asked."""

    def __init__(self, bias):
        super().__init__()
        self.bias = bias

    def forward(self, q_pos, k_pos, layout=None):
        return self.bias[:, : len(q_pos), : len(k_pos)]


def Fixed(self_bias, cross_bias):
    """A scaffold of two given biases."""
    return SelfCross(Corner(self_bias), Corner(cross_bias))


def batch(length=9, pad=12, n=48, task="successor"):
    return format_task(task, exact_length_numbers(length, 0)[:n], None, pad)


def random_bias(heads, q, k, seed):
    """A bias with real values and −inf holes; every row keeps its first column open."""
    g = torch.Generator().manual_seed(seed)
    bias = torch.randn(heads, q, k, generator=g)
    bias[torch.rand(heads, q, k, generator=g) < 0.3] = float("-inf")
    bias[..., 0] = 0.0
    return bias


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("period", [0, 3])
def test_cached_decoding_gives_the_same_tokens_as_uncached(scheme, period):
    model = random_model(scheme, period)
    ex = batch()
    steps = ex.tgt_out.shape[1]
    cached = model.greedy(ex.src, steps, use_cache=True)
    uncached = model.greedy(ex.src, steps, use_cache=False)
    assert cached.shape == (48, steps)
    assert torch.equal(cached, uncached)
    assert len(cached.unique()) > 1  # a constant output would make the comparison vacuous


@pytest.mark.parametrize("enc_layers", [0, 1])
def test_cached_decoding_with_biases_matches_uncached(enc_layers):
    ex = batch()
    steps, src_len = ex.tgt_out.shape[1], ex.src.shape[1]
    model = random_model(
        "nope",
        scaffold=Fixed(random_bias(4, steps, steps, 1), random_bias(4, steps, src_len, 2)),
        enc_layers=enc_layers,
    )
    cached = model.greedy(ex.src, steps, use_cache=True)
    uncached = model.greedy(ex.src, steps, use_cache=False)
    assert torch.equal(cached, uncached)
    model.set_scaffold(None)
    assert not torch.equal(cached, model.greedy(ex.src, steps, use_cache=True))  # the biases matter


@pytest.mark.parametrize("scheme", SCHEMES)
def test_teacher_forcing_agrees_with_greedy_and_both_attention_paths_agree(scheme):
    model = random_model(scheme, dec_layers=2)
    ex = batch()
    tokens = model.greedy(ex.src, ex.tgt_out.shape[1])
    tgt_in = torch.cat([torch.full((48, 1), SOS), tokens[:, :-1]], dim=1)
    fast, no_probs = model(ex.src, tgt_in)
    explicit, attention = model(ex.src, tgt_in, need_weights=True)
    assert torch.equal(fast.argmax(-1), tokens)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    assert no_probs[0]["self"] is None
    last = attention[-1]
    assert last["self"].shape == (48, 4, tgt_in.shape[1], tgt_in.shape[1])
    assert last["cross"].shape == (48, 4, tgt_in.shape[1], ex.src.shape[1])
    torch.testing.assert_close(last["cross"].sum(-1), torch.ones(48, 4, tgt_in.shape[1]))
    assert (last["self"].triu(1) == 0).all()  # causal


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
def test_cho_et_als_block_is_rmsnorm_before_and_after_each_sublayer_and_a_gated_gelu(arch):
    """``norm rms``, ``norm_position pre_post``, ``ff gated-gelu``: the modules are what the names
    say, every one of them moves the output, and greedy decoding agrees with teacher forcing."""
    block = {"norm": "rms", "norm_position": "pre_post", "ff": "gated-gelu"}
    cfg = ModelConfig(**{**PRESETS["tiny"], "heads": 4, "dec_layers": 2, **block}, arch=arch)
    torch.manual_seed(0)
    model = (DecoderOnly if arch == "decoder" else Transformer)(cfg).eval()
    kinds = [type(m).__name__ for m in model.modules()]
    sublayers = 2 * 2 if arch == "decoder" else 2 * 3 + 2 * PRESETS["tiny"]["enc_layers"]
    finals = 1 if arch == "decoder" else 2
    assert kinds.count("RMSNorm") == 2 * sublayers + finals and "LayerNorm" not in kinds
    layers = cfg.dec_layers + (cfg.enc_layers if arch == "encoder-decoder" else 0)
    assert kinds.count("GatedFeedForward") == layers and "FeedForward" not in kinds
    ex = batch()
    tokens = model.greedy(ex.src, ex.tgt_out.shape[1])
    tgt_in = torch.cat([torch.full((48, 1), SOS), tokens[:, :-1]], dim=1)
    assert torch.equal(model(ex.src, tgt_in)[0].argmax(-1), tokens)
    for name in block:  # each choice alone changes the function the same weights compute
        torch.manual_seed(0)
        plain = (DecoderOnly if arch == "decoder" else Transformer)(
            ModelConfig(**{**cfg.to_dict(), name: ModelConfig.__dataclass_fields__[name].default})
        ).eval()
        assert not torch.allclose(plain(ex.src, tgt_in)[0], model(ex.src, tgt_in)[0])


def test_fused_attention_reads_a_per_head_bias_like_the_explicit_path():
    ex = batch()
    q, k = ex.tgt_in.shape[1], ex.src.shape[1]
    self_bias, cross_bias = (
        random_bias(4, q, q, 3),
        random_bias(4, q, k, 4),
    )  # [h q k]: a head per slice
    model = random_model("nope", scaffold=Fixed(self_bias, cross_bias), dec_layers=2)
    fast, _ = model(ex.src, ex.tgt_in)
    explicit, _ = model(ex.src, ex.tgt_in, need_weights=True)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    model.scaffold, model._biases = Fixed(self_bias, cross_bias.flip(0)), {}
    swapped, _ = model(ex.src, ex.tgt_in)
    assert not torch.allclose(
        fast, swapped, atol=1e-3
    )  # the heads' biases differ, so their order matters


def test_bias_steers_attention_per_head():
    ex = batch(n=4)
    q, k = ex.tgt_in.shape[1], ex.src.shape[1]
    cross = torch.full((4, q, k), float("-inf"))
    for head in range(4):
        cross[head, :, head] = 0.0  # head h may only look at input position h
    model = random_model("vanilla", scaffold=Fixed(torch.zeros(4, q, q), cross))
    _, attention = model(ex.src, ex.tgt_in, need_weights=True)
    probs = attention[0]["cross"]
    for head in range(4):
        assert torch.allclose(probs[:, head, :, head], torch.ones(4, q))


def test_causal_bias_and_cpi_and_alibi():
    assert causal_bias(3, 3).isinf().tolist() == [
        [False, True, True],
        [False, False, True],
        [False, False, False],
    ]
    assert cyclic_positions(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert cyclic_positions(4).tolist() == [0, 1, 2, 3]
    bias = alibi_bias(alibi_slopes(2), torch.arange(3), torch.arange(3))
    assert bias.shape == (2, 3, 3)
    assert (
        bias[0, 2, 0] == -2 * 2**-4
        and bias[1, 0, 1] == -(2**-8)
        and (bias.diagonal(dim1=1, dim2=2) == 0).all()
    )


def test_cyclic_positions_change_the_model():
    ex = batch()
    steps = ex.tgt_out.shape[1]
    assert not torch.equal(
        random_model("vanilla", 0)(ex.src, ex.tgt_in)[0],
        random_model("vanilla", 3)(ex.src, ex.tgt_in)[0],
    )
    assert steps > 3


def test_pe_scale_sets_the_amplitude_of_the_sinusoidal_encoding():
    ex = batch()
    logits = {
        scale: random_model("vanilla", pe_scale=scale)(ex.src, ex.tgt_in)[0]
        for scale in (0.0, 1 / 16, 1.0)
    }
    nope = random_model("nope")(ex.src, ex.tgt_in)[
        0
    ]  # same weights (same seed), no positions at all
    assert torch.allclose(logits[0.0], nope, atol=1e-6)
    assert not torch.allclose(logits[1 / 16], nope, atol=1e-3) and not torch.allclose(
        logits[1 / 16], logits[1.0], atol=1e-3
    )
