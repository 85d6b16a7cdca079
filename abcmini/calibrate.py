"""Attention Bias Calibration (paper §4, Algorithm 1): averaged attention → line tables.

``calibrate`` turns an averaged attention tensor ``Ā`` into ``LineBias`` tables (direction ×
head × line → value; ``abcmini.biases``), and ``calibrate_run`` does ABC steps 1–5 for a trained
run under a recipe's ``Calibration`` settings. Line indices follow ``biases.line_ids``: they match
the labels ``d_l`` of the paper's figure "directions ABC explores". Every step is tensor code,
with no loop over matrix cells. The rules beyond the paper (support, padding, silent empty heads,
the start cell) each fix a measured failure: docs/recipe.md.
"""

import functools
import os
from dataclasses import asdict

import torch
from einops import rearrange

from abcmini.biases import NEG_INF, Calibrated, LineBias, in_segment, line_ids
from abcmini.errors import UserError
from abcmini.recipes import Calibration
from abcmini.store import load_checkpoint, save_bias
from abcmini.tasks import POOL_DIGITS, Pool, format_task, input_segments, padding_cells, sample_operands
from abcmini.train import load_model


class NotInterpolatedError(UserError):
    pass


def line_average(attention: torch.Tensor, delta: int, right: bool = True, skip_start: bool = False,
                 segment=None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``d_l``: the mean of ``attention [h m n]`` along every line of direction ``Δ``.

    Returns ``(d [h lines], cells [lines], first)``: column ``c`` holds line index ``first + c``,
    ``cells`` how many cells of ``attention`` that line crosses. ``skip_start``: a sloped line
    (Δ ≠ 0) leaves out its cell in column 0, the start token (see ``calibrate``); a line with no
    cell left has ``d = 0`` and ``cells = 0``. ``segment``: lines anchored in that segment of
    the columns (``biases.line_ids``), cells outside it left out.
    """
    heads, m, n = attention.shape
    ids = line_ids(m, n, delta, right, attention.device, segment)
    inside = in_segment(m, n, segment, attention.device)
    first = int(ids[inside].min())
    lines = int(ids[inside].max()) - first + 1
    counted = inside.clone()
    if skip_start and delta != 0:
        counted[:, 0] = False
    flat = rearrange((ids - first).clamp(0, lines - 1), "q k -> (q k)")
    weights = rearrange(attention * counted, "h q k -> h (q k)")
    sums = attention.new_zeros(heads, lines).index_add_(1, flat, weights)
    cells = torch.bincount(flat, weights=rearrange(counted, "q k -> (q k)").float(), minlength=lines).long()
    return sums / cells.clamp(min=1).to(attention.dtype), cells, first


def dropoff(d: torch.Tensor, kappa: float, supported: torch.Tensor | None = None) -> torch.Tensor:
    """Per head: ``d_l − d_max`` where ``d_l > μ + κσ``, −inf elsewhere.

    ``supported [lines]`` (default all): the lines long enough to be extended; ``μ``, ``σ`` and
    ``d_max`` are taken over them only, and every other line is −inf.
    """
    if supported is None:
        supported = torch.ones(d.shape[-1], dtype=torch.bool, device=d.device)
    if not supported.any():  # e.g. a steep direction in a few rows: nothing to extend
        return torch.full_like(d, NEG_INF)
    observed = d[..., supported]
    mu, sigma = observed.mean(dim=-1, keepdim=True), observed.std(dim=-1, correction=0, keepdim=True)
    d_max = observed.max(dim=-1, keepdim=True).values
    return torch.where((d > mu + kappa * sigma) & supported, d - d_max, torch.full_like(d, NEG_INF))


def line_counts(mask: torch.Tensor, delta: int, right: bool = True, segment=None) -> torch.Tensor:
    """``[lines]`` (indexed as by ``line_average``): how many true cells of ``mask [m n]`` each
    line of direction ``Δ`` crosses (of the last row, say, or of the columns that are not padding)."""
    inside = in_segment(*mask.shape, segment, mask.device)
    ids = line_ids(*mask.shape, delta, right, mask.device, segment)
    low, high = int(ids[inside].min()), int(ids[inside].max())
    return torch.bincount(ids[mask & inside] - low, minlength=high - low + 1)


def calibrate(attention: torch.Tensor, kappa: float, deltas, right: bool = True, min_support: float = 0.5,
              padding: torch.Tensor | None = None, no_vertical: torch.Tensor | None = None, causal: bool = False,
              transparent_empty: bool = True, skip_start: bool = False, anchors: str | None = None) -> LineBias:
    """ABC steps 3–5 on an averaged attention tensor ``Ā [h m n]`` (trusted rows only).

    ``right``: cross-attention (True) or decoder self-attention (False), see ``line_ids``.
    ``anchors`` (a task): lines counted per input segment (``biases``), one table per direction
    and segment; the dropoff's statistics still pool every line of a direction.
    Rules beyond the paper's (docs/recipe.md gives the failure each fixes; min_support = 0 and the
    defaults of the others give the paper's Algorithm 1):
    ``min_support``: extend only lines crossing that fraction of the ``m`` rows, and the last row;
    ``padding [n]`` (key columns that are padding in every input): a kept line must read a real
    token on ``min_support`` of the rows; ``no_vertical [n]``: no vertical on such a column
    (padding in some input; with ``verticals: markers``, every column but a one-token part's);
    ``causal``: a kept line must cross ``min_support·m`` cells a row can attend to;
    ``skip_start``: sloped lines are averaged without their cell in column 0;
    ``transparent_empty``: a head with no line reads everything (the paper) or nothing but column 0.
    """
    _, m, n = attention.shape
    segments = input_segments(anchors, n) if anchors else [None]
    last_row = torch.zeros(m, n, dtype=torch.bool, device=attention.device)
    last_row[-1] = True
    tables, kept_tables = [], []
    for delta in deltas:
        parts = [(segment, *line_average(attention, delta, right, skip_start, segment)) for segment in segments]
        d = torch.cat([part[1] for part in parts], dim=-1)
        supported = torch.cat([part[2] for part in parts]) >= min_support * m
        for segment, part, kept in zip(segments, parts, dropoff(d, kappa, supported).split([p[1].shape[-1] for p in parts], -1)):
            counts = functools.partial(line_counts, delta=delta, right=right, segment=segment)
            if min_support > 0:
                kept = kept.masked_fill(counts(last_row) == 0, NEG_INF)
            if min_support > 0 and causal:
                kept = kept.masked_fill(counts(torch.ones(m, n, dtype=torch.bool, device=attention.device).tril()) < min_support * m, NEG_INF)
            if padding is not None:
                kept = kept.masked_fill(counts((~padding).expand(m, -1)) < max(1.0, min_support * m), NEG_INF)
            if no_vertical is not None and delta == 0:
                kept = kept.masked_fill(counts(no_vertical.expand(m, -1)) > 0, NEG_INF)
            tables.append(part[3])
            kept_tables.append(kept)
    width = max(kept.shape[-1] for kept in kept_tables)
    values = torch.stack([torch.nn.functional.pad(kept, (0, width - kept.shape[-1]), value=NEG_INF) for kept in kept_tables])
    indices = tuple(range(len(segments))) if anchors else ()
    return LineBias(tuple(d for d in deltas for _ in segments), tuple(tables), values, right, transparent_empty, anchors,
                    indices * len(deltas))


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


def marker_columns(task: str, n_src: int) -> torch.Tensor:
    """``[n_src]``: the columns of the input's one-token parts (start marker, operator, N×1's
    multiplier), the only ones a vertical reads the same token on at every length."""
    columns = torch.zeros(n_src, dtype=torch.bool)
    for first, last in input_segments(task, n_src):
        columns[first] |= first == last
    return columns


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
    cross_rules = {"padding": src_padding.all(dim=0), "no_vertical": src_padding.any(dim=0) | ~marker_columns(cfg.task, src_padding.shape[-1])}
    self_rules = {"no_vertical": out_padding.any(dim=0) | (torch.arange(out_padding.shape[-1]) > 0)}
    rules = {"min_support": settings.min_support, "transparent_empty": False}
    per_layer = [Calibrated(calibrate(s, settings.kappa_self, SELF_DIRECTIONS, right=False, causal=True, skip_start=True, **self_rules, **rules),
                            calibrate(c, settings.kappa_cross, CROSS_DIRECTIONS, right=True, anchors=cfg.task, **cross_rules, **rules))
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
