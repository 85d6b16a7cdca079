"""ABS end to end: a small windowed NoPE model extrapolates on Successor."""

import pytest
import torch

from abcmini.biases import materialize
from abcmini.evaluate import exact_match, extrapolation_accuracy
from abcmini.tasks import POOL_DIGITS, extrapolation_operands, format_task
from abcmini.train import RunConfig, Trainer


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    """NoPE + w=1 on Successor, trained on the paper's pool (at most 7 digits), padded to 24."""
    torch.set_num_threads(2)
    cfg = RunConfig(task="successor", scheme="nope", window=1, pad_width=24, steps=400, stop_at=0.99, eval_every=100,
                    valid_size=300, model_overrides={"enc_layers": 0})
    trainer = Trainer(cfg)
    last = trainer.run(str(tmp_path_factory.mktemp("windowed")))
    assert last["valid_acc"] >= 0.99, trainer.history
    return trainer


def test_windowed_nope_successor_extrapolates_to_three_times_its_training_length(windowed):
    length = 3 * POOL_DIGITS
    accuracy = extrapolation_accuracy(windowed.model, "successor", length, 24, seed=0, bias=windowed.bias)
    assert accuracy >= 0.95, f"{accuracy:.2%} at {length} digits"
    # the same scaffold with nothing to see: without the window the model stays in its training range
    assert extrapolation_accuracy(windowed.model, "successor", length, 24, seed=0, bias=None) < 0.5


def test_exact_match_in_one_pass_is_greedy_decodings_exact_match(windowed):
    hits = []
    for length in (7, 14, 21):
        a, _ = extrapolation_operands("successor", length, 0)
        example = format_task("successor", a[:500], None, 24)
        for bias in (windowed.bias, None):
            steps = example.tgt_out.shape[1]
            self_bias, cross_bias = materialize(bias, steps, example.src.shape[1], "cpu")
            decoded = windowed.model.greedy(example.src, steps, self_bias, cross_bias)
            greedy_hits = (decoded == example.tgt_out).all(dim=1)
            assert torch.equal(exact_match(windowed.model, example, bias, batch_size=128), greedy_hits), (length, bias)
            hits.append(greedy_hits)
    hits = torch.cat(hits)
    assert hits.any() and not hits.all()  # both outcomes occur, so the comparison is not vacuous
