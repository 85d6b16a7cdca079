"""ABS end to end: a small windowed NoPE model extrapolates on Successor."""

import pytest
import torch

from abcmini.evaluate import exact_match, extrapolation_accuracy
from abcmini.experiment import RunConfig
from abcmini.tasks import POOL_DIGITS, extrapolation_operands, format_task
from abcmini.train import Trainer

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    """NoPE + w=1 on Successor, trained on the paper's pool (at most 7 digits), padded to 24."""
    cfg = RunConfig(
        task="successor",
        scheme="nope",
        window=1,
        pad_width=24,
        steps=400,
        stop_at=0.99,
        eval_every=100,
        valid_size=300,
        enc_layers=0,
    )
    trainer = Trainer(cfg, str(tmp_path_factory.mktemp("windowed")))
    last = trainer.run()
    assert last["valid_acc"] >= 0.99, trainer.history
    return trainer


def test_windowed_nope_successor_extrapolates_to_three_times_its_training_length(windowed):
    length = 3 * POOL_DIGITS
    accuracy = extrapolation_accuracy(windowed.model, "successor", length, 24, seed=0)
    assert accuracy >= 0.95, f"{accuracy:.2%} at {length} digits"
    # the same model without its window stays in its training range
    window = windowed.model.scaffold
    windowed.model.set_scaffold(None)
    assert extrapolation_accuracy(windowed.model, "successor", length, 24, seed=0) < 0.5
    windowed.model.set_scaffold(window)


def test_exact_match_in_one_pass_is_greedy_decodings_exact_match(windowed):
    hits = []
    for length in (7, 14, 21):
        a, _ = extrapolation_operands("successor", length, 0)
        example = format_task("successor", a[:500], None, 24)
        window = windowed.model.scaffold
        for scaffold in (window, None):
            windowed.model.scaffold, windowed.model._biases = scaffold, {}
            decoded = windowed.model.greedy(example.src, example.tgt_out.shape[1])
            greedy_hits = (decoded == example.tgt_out).all(dim=1)
            assert torch.equal(exact_match(windowed.model, example, batch_size=128), greedy_hits), (
                length,
                scaffold,
            )
            hits.append(greedy_hits)
        windowed.model.scaffold, windowed.model._biases = window, {}
    hits = torch.cat(hits)
    assert hits.any() and not hits.all()  # both outcomes occur, so the comparison is not vacuous
