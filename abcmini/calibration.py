"""ABC steps 1–2 and 6 for an abcmini run (paper §4): refuse a source that has not interpolated,
decode training inputs, average every decoder layer's attention, calibrate it with
``abcmini.calibrate`` under the one procedure of docs/recipe.md, and save the bias file."""

import functools
import os
from dataclasses import asdict

import torch

from abcmini.biases import Calibrated, segments_of
from abcmini.calibrate import calibrate, marker_columns
from abcmini.errors import UserError
from abcmini.recipes import Calibration
from abcmini.store import load_checkpoint, save_bias
from abcmini.tasks import POOL_DIGITS, Pool, digit_mask, format_task, padding_cells, sample_operands
from abcmini.train import load_model


class NotInterpolatedError(UserError):
    pass


@torch.no_grad()
def average_attention(model, example, trusted_rows: int, batch_size: int = 500, layers=(-1,)):
    """``Ā``: decoder layers' attention probabilities (default the last, as in the paper),
    averaged over ``example``, first ``trusted_rows`` output rows only.

    Each input is decoded greedily; teacher forcing the decoded tokens reproduces the decoding
    attention exactly (same prefixes). Returns ``(self [layers h r r], cross [layers h r s])``.
    """
    model.eval()
    device = next(model.parameters()).device
    steps = example.tgt_out.shape[1]
    totals = {"self": 0.0, "cross": 0.0}
    for start in range(0, len(example.src), batch_size):
        src = example.src[start : start + batch_size].to(device)
        tokens = model.greedy(src, steps)
        tgt_in = torch.cat([example.tgt_in[start : start + batch_size, :1].to(device), tokens[:, :-1]], dim=1)
        _, attention = model(src, tgt_in, need_weights=True)
        for kind in totals:
            totals[kind] = totals[kind] + torch.stack([attention[layer][kind].sum(dim=0) for layer in layers])
    rows = min(trusted_rows, steps)
    return (totals["self"] / len(example.src))[..., :rows, :rows], (totals["cross"] / len(example.src))[..., :rows, :]


SELF_DIRECTIONS = (1, 0)  # diagonals and verticals; an anti-diagonal of a causal square is never extended
CROSS_DIRECTIONS = (-1, 0)  # anti-diagonals and verticals: the digit alignments of reversed outputs


def calibrate_run(run_dir: str, out: str, settings: Calibration) -> dict:
    """ABC steps 1–5 for a trained run, the one procedure of docs/recipe.md: refuse it unless it
    interpolated, decode ``settings.samples`` seeded training inputs, average every decoder
    layer's attention, calibrate each layer (cross lines anchored at the input's parts, verticals
    only on markers, no line on padding, SOS left out of diagonals, empty heads silent), unite
    their lines into one bias for every layer, and save the bias file at ``out``. Returns the
    saved payload plus the ``example`` it was computed on and the run's ``config``."""
    state = load_checkpoint(run_dir)
    cfg, model = load_model(state)
    reached = state["history"][-1]["valid_acc"] if state["history"] else 0.0
    if reached < settings.min_accuracy:
        raise NotInterpolatedError(f"{run_dir!r} has not interpolated: validation exact match {reached:.2%} < "
                                   f"{settings.min_accuracy:.2%}; train it longer (--stop-at)")
    layers = tuple(range(model.cfg.dec_layers))
    a, b = sample_operands(cfg.task, Pool.make(cfg.data_seed).train, settings.samples, torch.Generator().manual_seed(settings.seed))
    example = format_task(cfg.task, a, b, cfg.train_pad_width, cfg.aligned)
    self_avg, cross_avg = average_attention(model, example, POOL_DIGITS + 1, layers=layers)
    src_padding = padding_cells(example.src)
    out_padding = padding_cells(example.tgt_in.flip(1)).flip(1)[:, : self_avg.shape[-1]]
    layout = segments_of(digit_mask(example.src[0]))
    cross_rules = {"padding": src_padding.all(dim=0), "no_vertical": src_padding.any(dim=0) | ~marker_columns(layout, src_padding.shape[-1])}
    self_rules = {"no_vertical": out_padding.any(dim=0) | (torch.arange(out_padding.shape[-1]) > 0)}
    rules = {"min_support": settings.min_support, "transparent_empty": False}
    per_layer = [Calibrated(calibrate(s, settings.kappa_self, SELF_DIRECTIONS, right=False, causal=True, skip_start=True, **self_rules, **rules),
                            calibrate(c, settings.kappa_cross, CROSS_DIRECTIONS, right=True, layout=layout, **cross_rules, **rules))
                 for s, c in zip(self_avg, cross_avg)]
    scaffold = functools.reduce(Calibrated.union, per_layer)
    payload = {
        "task": cfg.task, "pad_width": cfg.pad_width, "heads": model.cfg.heads, "aligned": cfg.aligned,
        "calibration": {**asdict(settings), "layers": list(layers)},
        "source": os.path.abspath(run_dir), "bias": scaffold.state(),
        "attention": {"self": self_avg, "cross": cross_avg},
    }
    save_bias(out, payload)
    return {**payload, "example": example, "config": cfg}
