"""Exact match: the screened teacher-forced pass gives greedy decoding's verdict on every
example, whether it goes wrong early (screened out), late (past the screen) or never; and the
analysis scripts read a run's test numbers as its evaluation does."""

import pytest
import torch
from test_model import Fixed, random_bias

from abcmini.evaluate import exact_match, extrapolation_hits
from abcmini.experiment import RunConfig
from abcmini.nn.config import PRESETS, ModelConfig
from abcmini.nn.decoder import build_model
from abcmini.nn.schemes import SCHEMES
from abcmini.nn.windows import Window
from abcmini.store import save_checkpoint
from abcmini.tasks import Example, exact_length_numbers, format_task
from abcmini.train import Trainer


def targets_of_its_own(
    model, src: torch.Tensor, steps: int, screen: int
) -> tuple[Example, torch.Tensor]:
    """The model's own greedy answers as targets, one token changed in two thirds of them: in
    the screened rows for a third, after them for another; and which targets greedy reproduces."""
    decoded = model.greedy(src, steps)
    wrong_at = torch.tensor([[-1, screen // 2, steps - 2][i % 3] for i in range(len(src))])
    target = decoded.clone()
    rows = torch.nonzero(wrong_at >= 0).flatten()
    target[rows, wrong_at[rows]] = (target[rows, wrong_at[rows]] + 1) % 10
    sos = torch.full((len(src), 1), model.cfg.sos, dtype=torch.long)
    return Example(src, torch.cat([sos, target[:, :-1]], dim=1), target), wrong_at < 0


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
@pytest.mark.parametrize(
    "scheme,scaffold",
    [(scheme, "none") for scheme in SCHEMES] + [("nope", "window"), ("nope", "bias")],
)
def test_a_screened_pass_gives_greedy_decodings_verdict(arch, scheme, scaffold):
    torch.manual_seed(0)
    ex = format_task(
        "addition", exact_length_numbers(12, 0)[:18], exact_length_numbers(12, 1)[:18], 14
    )
    steps, n_src = ex.tgt_out.shape[1], ex.src.shape[1]
    chosen = {
        "none": None,
        "window": Window(1),
        "bias": Fixed(random_bias(4, steps, steps, 1), random_bias(4, steps, n_src, 2)),
    }[scaffold]
    cfg = ModelConfig(
        **{**PRESETS["tiny"], "heads": 4, "enc_layers": 1}, arch=arch, scheme=scheme, cpi_from="end"
    )
    model = build_model(cfg, chosen).eval()
    example, greedy_hits = targets_of_its_own(model, ex.src, steps, screen=3)
    batch = (
        len(ex.src) if scheme == "random" else 6
    )  # randomized positions: each row of a batch its own test draw
    assert torch.equal(exact_match(model, example, batch, screen_rows=3), greedy_hits)
    assert torch.equal(exact_match(model, example, batch, screen_rows=0), greedy_hits)


@pytest.mark.integration  # a lab script: the second tier
def test_the_error_scripts_format_an_aligned_run_as_its_evaluation_does(tmp_path, script):
    """``lab/first_errors.py`` and ``lab/block_errors.py`` read a run's test numbers in
    the run's own input: an Addition run with a window sees its operands interleaved."""
    cfg = RunConfig(
        task="addition",
        window=1,
        window_unit="pair",
        preset="tiny",
        pad_width=8,
        steps=1,
        batch_size=8,
        valid_size=10,
    )
    trainer = Trainer(cfg, str(tmp_path))
    save_checkpoint(str(tmp_path), trainer.state())
    expected, _ = extrapolation_hits(trainer.model, "addition", 6, 8, 0, cfg.form)
    _, first = script("first_errors").test_example(str(tmp_path), 6, 8, 5)
    _, _, [(_, frame, _, block)] = script("block_errors").test_examples(str(tmp_path), [6], 5)
    assert cfg.aligned and frame == 8
    for example in (first, block):
        assert torch.equal(example.src, expected.src[:5]) and torch.equal(
            example.tgt_out, expected.tgt_out[:5]
        )
