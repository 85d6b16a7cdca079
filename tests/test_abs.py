"""ABS end to end: a small windowed NoPE model extrapolates on Successor."""

import torch

from abcmini.evaluate import extrapolation_accuracy
from abcmini.tasks import POOL_DIGITS
from abcmini.train import RunConfig, Trainer


def test_windowed_nope_successor_extrapolates_to_three_times_its_training_length(tmp_path):
    torch.set_num_threads(2)
    # trained on the paper's pool (numbers of at most 7 digits), padded to 24; tested at 21 digits
    cfg = RunConfig(task="successor", scheme="nope", window=1, pad_width=24, steps=400, stop_at=0.99, eval_every=100,
                    valid_size=300, model_overrides={"enc_layers": 0})
    trainer = Trainer(cfg)
    last = trainer.run(str(tmp_path))
    assert last["valid_acc"] >= 0.99, trainer.history
    length = 3 * POOL_DIGITS
    accuracy = extrapolation_accuracy(trainer.model, "successor", length, cfg.pad_width, seed=0, bias=trainer.bias)
    assert accuracy >= 0.95, f"{accuracy:.2%} at {length} digits"
    # the same scaffold with nothing to see: without the window the model stays in its training range
    assert extrapolation_accuracy(trainer.model, "successor", length, cfg.pad_width, seed=0, bias=None) < 0.5
