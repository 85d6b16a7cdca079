"""A model trained in a small frame, tested in wider ones: the scaffolds must land on the same
tokens at every frame width (anchored ABC lines, the windows) and the test frame must follow the
length when the recipe says so."""

import pytest
import torch
from typer.testing import CliRunner

from abcmini.evaluate import pad_width_for
from abcmini.nn.calibrate import calibrate
from abcmini.nn.lines import Calibrated, LineBias, PerLayer, segments_of
from abcmini.nn.scaffolds import layer_biases, scaffold_from_state
from abcmini.store import load_checkpoint, read_eval
from abcmini.tasks import PLUS, SOS, detokenize, digit_mask, format_task, int_to_digits
from cli import app


def addition_input(pad_width: int) -> torch.Tensor:
    """One Addition input whose digits say where they are: ``a`` = 1 2 … 9 1 2 …, ``b`` = its
    reverse pattern, so each column's token is known."""
    a = torch.tensor([[(i % 9) + 1 for i in range(pad_width)]])
    b = torch.tensor([[9 - (i % 9) for i in range(pad_width)]])
    return format_task("addition", a, b, pad_width).src[0]


def a_reader(rows: int, pad_width: int) -> torch.Tensor:
    """Averaged cross-attention ``[1 rows n]`` of a head where row ``t`` reads ``a``'s digit
    ``t + 1`` (counted from the least significant end), and nothing else stands out."""
    n = 2 * pad_width + 2
    attention = torch.full((1, rows, n), 0.01)
    for t in range(rows):
        attention[0, t, pad_width - t] = (
            0.9  # a's digit t + 1 sits t columns left of a's last digit
        )
    return attention


def layout(src: torch.Tensor):
    return segments_of(digit_mask(src))


def test_input_segments_name_the_same_parts_at_every_width():
    for pad_width in (7, 12, 40):
        src = addition_input(pad_width)
        (start, _), (a_first, a_last), (plus, _), (b_first, b_last) = layout(src)
        assert src[start] == SOS and src[plus] == PLUS
        assert (a_last - a_first + 1, b_last - b_first + 1) == (pad_width, pad_width)
        assert b_last == len(src) - 1


def test_an_anchored_line_on_the_first_operand_reads_its_digits_at_every_frame_width():
    rows, trained = 8, 12
    attention = a_reader(rows, trained)
    anchored = calibrate(
        attention, kappa=2.5, deltas=(-1, 0), layout=layout(addition_input(trained))
    )
    corner = calibrate(attention, kappa=2.5, deltas=(-1, 0))
    for pad_width in (12, 13, 30, 200):
        src = addition_input(pad_width)
        a_last = layout(src)[1][1]
        steps = pad_width + 2
        open_cells = torch.isfinite(anchored(steps, len(src), layout=layout(src)))[0]
        for t in range(
            pad_width
        ):  # row t reads a's digit t + 1 (the column t left of a's last) and only it
            assert open_cells[t].nonzero().flatten().tolist() == [a_last - t], (pad_width, t)
            assert detokenize(src[a_last - t : a_last - t + 1]) == str(
                ((pad_width - 1 - t) % 9) + 1
            )
        corner_cells = torch.isfinite(corner(steps, len(src)))[0]
        lands_on_a = all(corner_cells[t, a_last - t] for t in range(rows))
        assert lands_on_a == (pad_width == trained), (
            pad_width
        )  # the corner-anchored line moves with the frame


def test_a_per_layer_scaffold_gives_each_layer_its_own_bias_and_survives_its_state():
    attention = a_reader(8, 12)
    trained = layout(addition_input(12))
    first = Calibrated(
        calibrate(attention[:, :, :8], 0.5, (1, 0), right=False),
        calibrate(attention, 2.5, (-1,), layout=trained),
    )
    second = Calibrated(
        calibrate(attention[:, :, :8], 0.5, (1, 0), right=False),
        calibrate(attention, 2.5, (0,), layout=trained),
    )
    scaffold = PerLayer((first, second))
    biases = layer_biases(scaffold, 14, 26, trained)
    assert len(biases) == 2 and not torch.equal(biases[0][1], biases[1][1])
    restored = scaffold_from_state(scaffold.state())
    assert all(
        torch.equal(x, y)
        for pair, again in zip(biases, layer_biases(restored, 14, 26, trained))
        for x, y in zip(pair, again)
    )
    assert isinstance(scaffold_from_state(first.state()), Calibrated)
    assert isinstance(LineBias.from_state(first.cross_attention.state()), LineBias)


def test_the_test_frame_follows_the_length_only_when_asked():
    assert pad_width_for(6, 12, follows=True) == 12  # inside the training frame: the training frame
    assert (
        pad_width_for(100, 12, follows=True) == 105
    )  # as many leading zeros as every training number had
    assert pad_width_for(100, 7, follows=True) == 100
    assert pad_width_for(6, 64) == 64


def test_a_following_frame_keeps_the_training_width_residue_of_the_cpi_period():
    """CPI with period T sees a frame only mod T: the width is rounded up to the training width's
    residue, so the start marker keeps its trained phase (unrounded, 60 digits at pad 12 would be
    tested at width 65, a residue no +T=3 model trained at 12 has seen)."""
    widths = [
        pad_width_for(length, 12, follows=True, period=3)
        for length in (6, 10, 20, 60, 100, 200, 500)
    ]
    assert widths == [12, 15, 27, 66, 105, 207, 507]
    assert all(width % 3 == 12 % 3 for width in widths)
    assert [
        pad_width_for(length, 12, follows=True, period=3) - pad_width_for(length, 12, follows=True)
        for length in (20, 60)
    ] == [2, 1]
    assert pad_width_for(60, 64, period=3) == 64  # the fixed frame is never moved


@pytest.mark.integration
def test_a_model_trained_in_a_small_frame_is_tested_in_frames_as_wide_as_each_length(tmp_path):
    """A real ABC run of recipe ``long`` (shortened: pad width 8), tested at 6, 20 and 45 digits
    in frames of 8, 21 and 46; its bias, materialized in each frame, opens the same cells on the
    start marker and next to the operand's last digit as in the training frame."""
    recipe = tmp_path / "small.yaml"
    recipe.write_text(
        "base: long\npad_width: 8\nlengths: [6, 20, 45]\neval_every: 100\nvalid_size: 300\nsteps: 600\n"
        "abc_train_on: 1.0\ncalibration: {samples: 200}\n"
    )  # no train-on phase: this test is about frames
    out = tmp_path / "abc"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--recipe",
            str(recipe),
            "--task",
            "successor",
            "--method",
            "abc",
            "--no-wandb",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    record = read_eval(str(out))
    assert record["test_frame"] == "follows" and sorted(record["accuracy"], key=int) == [
        "6",
        "20",
        "45",
    ]
    assert set(record["test_seconds"]) == {"6", "20", "45"}
    scaffold = scaffold_from_state(load_checkpoint(str(out))["abc_bias"])
    assert isinstance(scaffold, Calibrated)  # one bias, united over the decoder layers
    reference = None
    for pad_width in (8, 20, 45):
        src = format_task(
            "successor", int_to_digits(torch.tensor([1234567]), 7), None, pad_width
        ).src[0]
        a_last = layout(src)[1][1]
        assert a_last == len(src) - 1
        # the first 8 output rows, on `$` and on the operand's last 7 digits
        _, cross = layer_biases(scaffold, 8, len(src), layout(src))[0]
        cells = torch.isfinite(cross[:, :, [0, *range(a_last - 6, a_last + 1)]])
        if reference is None:
            reference = cells
            assert cells[:, :, 1:].any()  # a line reads the operand
        assert torch.equal(cells, reference), pad_width


@pytest.mark.integration
def test_a_frame_spread_trains_each_batch_in_a_frame_of_its_own_and_validates_in_the_first(
    tmp_path,
):
    """``frame_spread`` 3 at pad 8: the batches' inputs come in frames of 8 … 11 digits (the
    windowed model's biases are kept per size), the validation set stays at pad 8."""
    from abcmini.experiment import RunConfig
    from abcmini.train import Trainer

    trainer = Trainer(
        RunConfig(
            task="successor",
            window=1,
            preset="tiny",
            pad_width=8,
            frame_spread=3,
            steps=20,
            batch_size=8,
            valid_size=10,
        ),
        str(tmp_path),
    )
    for _ in range(20):
        trainer.step()
    widths = {n_src - 1 for _, n_src, *_ in trainer.model._biases}  # "$" and the padded number
    assert widths == {8, 9, 10, 11}
    assert trainer.valid.src.shape[1] == 9


@pytest.mark.integration
def test_a_varied_run_trains_every_length_without_leading_zeros_and_is_tested_in_frames_of_the_length(
    tmp_path,
):
    """``+varied`` (the input today's methods' papers train on): each batch holds numbers of one
    length of 1 … 7 digits, in a frame of exactly that length, so no operand starts with a 0
    unless it is the number 0; validation covers every length the held-out split has; each test
    length is its own frame."""
    from abcmini.experiment import Cell, RunConfig, resolve
    from abcmini.pipeline import test_frames
    from abcmini.recipes import DECODER
    from abcmini.train import Trainer

    experiment = resolve(DECODER, Cell.of("addition", "abacus+varied", 0))
    assert (
        experiment.run.varied
        and experiment.run.label == "abacus+varied"
        and experiment.name == "abacus+varied-s0"
    )
    assert test_frames(experiment, experiment.run, (6, 10, 500)) == [6, 10, 500]
    fixed = resolve(DECODER, Cell.of("addition", "abacus", 0))
    assert test_frames(fixed, fixed.run, (6, 10)) == [
        12,
        15,
    ]  # without +varied: the protocol's frames
    trainer = Trainer(
        RunConfig(
            task="addition",
            scheme="abacus",
            varied=True,
            preset="tiny",
            pad_width=12,
            batch_size=16,
            valid_size=70,
        ),
        str(tmp_path),
    )
    widths = set()
    for _ in range(60):
        batch = trainer.batch()
        width = (batch.src.shape[1] - 2) // 2  # "$" a "+" b
        widths.add(width)
        a, b = batch.src[:, 1], batch.src[:, width + 2]  # each operand's leading digit
        assert ((a != 0) | (width == 1)).all() and ((b != 0) | (width == 1)).all(), width
    assert widths == set(range(1, 8))
    assert [example.src.shape[1] for example in trainer.valid_sets] == [
        2 * width + 2 for width in range(2, 8)
    ]  # no 1-digit number held out
    assert (
        sum(len(example.src) for example in trainer.valid_sets) == 60
    )  # 70 split over 7 lengths, the 10 for 1 digit not held out
    assert trainer.validate() >= 0 and trainer.step() > 0
