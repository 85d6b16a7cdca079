"""The decoder-only model: one causal attention over prompt and answer, with every positional
scheme, CPI, ABS windows and ABC's biases; and one ABC cell trained in it through the CLI."""

import json

import pytest
import torch
from test_model import Fixed, random_bias
from typer.testing import CliRunner

from abcmini.experiment import RunConfig
from abcmini.nn.config import PRESETS, ModelConfig
from abcmini.nn.decoder import DecoderOnly, build_model, joint_bias
from abcmini.nn.schemes import SCHEMES
from abcmini.nn.windows import Window
from abcmini.tasks import exact_length_numbers, format_task
from cli import app


def model(scheme="nope", period=0, scaffold=None, layers=1) -> DecoderOnly:
    torch.manual_seed(0)
    cfg = ModelConfig(
        **{**PRESETS["tiny"], "heads": 4, "dec_layers": layers},
        arch="decoder",
        scheme=scheme,
        period=period,
        cpi_from="end",
    )
    return DecoderOnly(cfg, scaffold).eval()


def addition(n=32, digits=5, pad=9):
    return format_task(
        "addition", exact_length_numbers(digits, 0)[:n], exact_length_numbers(digits, 1)[:n], pad
    )


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("period", [0, 3])
@pytest.mark.parametrize("scaffold", ["none", "window", "bias"])
def test_cached_decoding_gives_the_tokens_of_full_passes(scheme, period, scaffold):
    ex = addition()
    steps, n_src = ex.tgt_out.shape[1], ex.src.shape[1]
    chosen = {
        "none": None,
        "window": Window(1),
        "bias": Fixed(random_bias(4, steps, steps, 1), random_bias(4, steps, n_src, 2)),
    }[scaffold]
    m = model(scheme, period, chosen)
    cached, uncached = m.greedy(ex.src, steps), m.greedy(ex.src, steps, use_cache=False)
    assert torch.equal(cached, uncached) and len(cached.unique()) > 1


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("scaffold", ["window", "bias"])
def test_a_test_pass_skips_the_prompt_rows_attention_and_gives_the_full_passs_outputs(
    scheme, scaffold
):
    """In eval mode a scaffolded model's prompt rows are their own values, not a softmax over
    the whole sequence (a 500-digit test's prompt is two thirds of it); training (dropout 0 in
    this preset) computes every row: the two agree."""
    ex = addition()
    steps, n_src = ex.tgt_out.shape[1], ex.src.shape[1]
    chosen = {
        "window": Window(1),
        "bias": Fixed(random_bias(4, steps, steps, 1), random_bias(4, steps, n_src, 2)),
    }[scaffold]
    m = model(
        scheme, 3, chosen, layers=2
    )  # the second layer's answer rows read the first's prompt rows
    shift = m.shift(ex.src, steps)  # a test's draw of the token positions, in both passes
    with torch.no_grad():
        fast, fast_attention = m(ex.src, ex.tgt_in, need_weights=True, shift=shift)
        fast_screen, _ = m(ex.src, ex.tgt_in, answer_rows=4, shift=shift)
        m.train()
        if m.token_positions is not None:
            m.token_positions.eval()  # a test's positions (randomized ones are drawn afresh in training)
        full, full_attention = m(ex.src, ex.tgt_in, need_weights=True, shift=shift)
        full_screen, _ = m(ex.src, ex.tgt_in, answer_rows=4, shift=shift)
    assert torch.allclose(fast, full, atol=1e-5) and torch.allclose(
        fast_screen, full_screen, atol=1e-5
    )
    for ours, theirs in zip(fast_attention, full_attention):
        assert all(
            torch.allclose(ours[part], theirs[part], atol=1e-6) for part in ("self", "cross")
        )


def test_the_joint_bias_puts_the_scaffold_in_the_answer_rows():
    self_bias, cross_bias = random_bias(4, 5, 5, 1), random_bias(4, 5, 7, 2)
    joint = joint_bias(self_bias, cross_bias, 7, 5)
    assert joint.shape == (4, 12, 12)
    assert torch.equal(joint[:, 7:, :7], cross_bias)  # answer → prompt: the cross-attention bias
    assert torch.equal(
        joint[:, 7:, 7:].isfinite(),
        self_bias.isfinite() & torch.ones(5, 5, dtype=torch.bool).tril(),
    )
    assert torch.equal(
        joint[:, :7].isfinite(), torch.eye(7, 12, dtype=torch.bool).expand(4, -1, -1)
    )  # prompt: its own token
    assert torch.equal(
        joint_bias(None, None, 7, 5)[0].isfinite(), torch.ones(12, 12, dtype=torch.bool).tril()
    )


def test_attention_weights_are_the_answer_rows_of_one_softmax():
    ex = addition(n=8)
    _, attention = model("vanilla", scaffold=Window(1))(ex.src, ex.tgt_in, need_weights=True)
    rows = attention[0]["cross"].sum(-1) + attention[0]["self"].sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows))
    assert attention[0]["cross"].shape[-2:] == (ex.tgt_in.shape[1], ex.src.shape[1])


def test_a_scaffolded_prompt_token_reads_only_itself():
    """With a scaffold, the answer depends on the prompt's tokens, never on their neighbours'
    states: changing a padding zero's neighbours changes nothing for a window that cannot see them."""
    ex = addition(n=4)
    m = model("nope", scaffold=Window(0))
    base, _ = m(ex.src, ex.tgt_in)
    changed = ex.src.clone()
    changed[:, 1] = (
        9  # the first operand's most significant (padding) digit: outside every w = 0 window of the first rows
    )
    other, _ = m(changed, ex.tgt_in)
    assert torch.equal(base[:, :3], other[:, :3])
    unscaffolded = model("nope")
    assert not torch.equal(
        unscaffolded(ex.src, ex.tgt_in)[0][:, :3], unscaffolded(changed, ex.tgt_in)[0][:, :3]
    )


@pytest.mark.slow
def test_an_abc_cell_trains_in_the_decoder_only_model(tmp_path):
    """Source, calibration of its answer rows, retraining: one ABC cell with ``--arch decoder``."""
    out = tmp_path / "abc"
    result = CliRunner().invoke(
        app,
        [
            str(a)
            for a in (
                "train",
                "--task",
                "successor",
                "--method",
                "abc",
                "--arch",
                "decoder",
                "--pad-width",
                8,
                "--abc-pad-width",
                8,
                "--lengths",
                "3,9",
                "--test-frame",
                "follows",
                "--steps",
                300,
                "--eval-every",
                100,
                "--valid-size",
                200,
                "--out",
                out,
                "--source",
                tmp_path / "source",
                "--no-wandb",
            )
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "eval.json").read_text())
    assert record["arch"] == "decoder" and record["method"] == "nope+abc"
    assert (
        torch.load(tmp_path / "source" / "checkpoint.pt", weights_only=True)["config"]["arch"]
        == "decoder"
    )
    assert any("cross" in line for line in record["lines"]) and record["valid_acc"] > 0.5


@pytest.mark.parametrize("preset", PRESETS)
def test_a_decoder_only_run_has_as_many_attention_sublayers_as_the_encoder_decoders_decoder(preset):
    """Two causal layers per decoder layer of the preset (self and cross attention each), no encoder."""
    ours, theirs = (
        RunConfig(arch=arch, preset=preset, pad_width=10).model_config()
        for arch in ("decoder", "encoder-decoder")
    )
    assert (ours.dec_layers, ours.enc_layers) == (2 * theirs.dec_layers, 0)
    assert len(build_model(ours).layers) == ours.dec_layers
