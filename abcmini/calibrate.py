"""Attention Bias Calibration (paper §4, Algorithm 1): averaged attention → line tables → bias.

A direction ``(1, Δ)`` moves one row down and ``Δ`` columns right. Every cell ``(i, j)`` of an
``m × n`` matrix lies on one line of each direction; its line index is ``j − Δ·i``, counted
from the top-left corner for Δ > 0 (diagonals) and from the top-right corner (minus ``n − 1``)
for Δ ≤ 0 (anti-diagonals, verticals), so that the least-significant-digit corners line up
when the matrix grows (the footnote of the paper's Algorithm 1). The indices match the
labels ``d_l`` of the paper's Figure "directions ABC explores".

A calibrated bias is therefore a table (direction × head × line → value), materialized for
any ``M × N``: a cell takes the value of its line in each direction (−inf for a line never
observed or dropped), and the directions merge by element-wise max.
"""

import functools
import os
from dataclasses import dataclass

import torch
from einops import rearrange

from abcmini.biases import materialize

NEG_INF = float("-inf")
DIRECTIONS = (1, -1, 0)  # diagonal, anti-diagonal, vertical
# A line seen on only a few cells of Ā (a corner of the trusted rows) has a mean set by those
# cells alone: an attention sink such as the `$` marker makes a 1–3-cell corner line pass the
# dropoff, and extension turns it into a full-length line the model never used. Lines must cross
# at least this fraction of the trusted rows to be extended (0 = the paper's rule, every line),
# and with a support rule (> 0) a line that passes the dropoff must also cross the last trusted
# row: one that leaves the matrix before it is absent from every longer row too and only marks the
# first rows (Addition: anti-diagonals into the `$` corner, open in rows 0–4 only; with them the
# retrained model erred 4–5% per row from row 7 on).
MIN_SUPPORT = 0.5


def line_ids(n_q: int, n_k: int, delta: int, right: bool = True, device=None) -> torch.Tensor:
    """``[q k]`` index of the line of direction ``(1, Δ)`` through each cell.

    ``right``: lines with Δ ≤ 0 are counted from the top-right corner (cross-attention, whose
    least significant input digit is the last column). Decoder self-attention has its least
    significant digit at the top-left for both axes, so there every direction counts from there.
    """
    i = rearrange(torch.arange(n_q, device=device), "q -> q 1")
    j = rearrange(torch.arange(n_k, device=device), "k -> 1 k")
    return j - delta * i - (n_k - 1 if right and delta <= 0 else 0)


def line_average(attention: torch.Tensor, delta: int, right: bool = True,
                 skip_start: bool = False) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``d_l``: the mean of ``attention [h m n]`` along every line of direction ``Δ``.

    Returns ``(d [h lines], cells [lines], first)``: column ``c`` holds line index ``first + c``,
    ``cells`` how many cells of ``attention`` that line crosses. ``skip_start``: a sloped line
    (Δ ≠ 0) leaves out its cell in column 0, the start token (see ``calibrate``); a line with no
    cell left has ``d = 0`` and ``cells = 0``.
    """
    heads, m, n = attention.shape
    ids = line_ids(m, n, delta, right, attention.device)
    first = int(ids.min())
    lines = int(ids.max()) - first + 1
    counted = torch.ones(m, n, dtype=torch.bool, device=attention.device)
    if skip_start and delta != 0:
        counted[:, 0] = False
    flat = rearrange(ids - first, "q k -> (q k)")
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


def line_counts(mask: torch.Tensor, delta: int, right: bool = True) -> torch.Tensor:
    """``[lines]`` (indexed as by ``line_average``): how many true cells of ``mask [m n]`` each
    line of direction ``Δ`` crosses (of the last row, say, or of the columns that are not padding)."""
    ids = line_ids(*mask.shape, delta, right, mask.device)
    return torch.bincount(ids[mask] - ids.min(), minlength=int(ids.max() - ids.min()) + 1)


@dataclass
class LineBias:
    """A calibrated bias: ``values [directions heads lines]`` (−inf padded) with line offsets."""

    deltas: tuple[int, ...]
    firsts: tuple[int, ...]  # line index of column 0 of ``values``, per direction
    values: torch.Tensor
    right: bool = True  # Δ ≤ 0 lines anchored at the top-right corner (see ``line_ids``)
    # An empty head: transparent (all-zero bias, the paper's rule) or silent (every cell closed, so the
    # no-NaN rule opens column 0 only: the input's start marker or SOS, the same token at any length).
    # Transparent, a cross-attention head averages the whole input, which changes with the operands'
    # length: N×1 seed 2 (head 1 empty) scored 99.3 at 20 digits and 74.9 at 60.
    transparent_empty: bool = True

    def union(self, other: "LineBias") -> "LineBias":
        """Both biases' lines at once (materialized, they merge by max like directions do): how
        the calibrations of several decoder layers combine into one bias."""
        if self.right != other.right:
            raise ValueError("cannot unite a cross-attention bias with a self-attention bias")
        width = max(self.values.shape[-1], other.values.shape[-1])
        pad = lambda v: torch.nn.functional.pad(v, (0, width - v.shape[-1]), value=NEG_INF)  # noqa: E731
        return LineBias(self.deltas + other.deltas, self.firsts + other.firsts,
                        torch.cat([pad(self.values), pad(other.values)]), self.right, self.transparent_empty)

    @property
    def transparent(self) -> torch.Tensor:
        """``[heads]``: heads where no line survived the dropoff (they get an all-zero bias)."""
        return ~torch.isfinite(self.values).any(dim=-1).any(dim=0)

    def __call__(self, n_q: int, n_k: int, device=None) -> torch.Tensor:
        """Materialize the ``[h q k]`` bias for an ``n_q × n_k`` attention matrix."""
        lines = self.values.shape[-1]
        values = torch.nn.functional.pad(self.values.to(device), (0, 1), value=NEG_INF)  # column `lines`: unknown
        merged = torch.full((values.shape[1], n_q, n_k), NEG_INF, device=device)
        for table, delta, first in zip(values, self.deltas, self.firsts):
            ids = line_ids(n_q, n_k, delta, self.right, device) - first
            ids = ids.masked_fill((ids < 0) | (ids >= lines), lines)
            cell = rearrange(table.index_select(1, rearrange(ids, "q k -> (q k)")), "h (q k) -> h q k", q=n_q)
            merged = torch.maximum(merged, cell)
        if self.transparent_empty:
            merged[self.transparent.to(device)] = 0.0
        empty = ~torch.isfinite(merged).any(dim=-1)  # no-NaN rule, as for ABS: open column 0
        merged[..., 0] = merged[..., 0].masked_fill(empty, 0.0)
        return merged


def calibrate(attention: torch.Tensor, kappa: float, deltas=DIRECTIONS, right: bool = True,
              min_support: float = MIN_SUPPORT, padding: torch.Tensor | None = None,
              padding_somewhere: torch.Tensor | None = None, causal: bool = False,
              transparent_empty: bool = True, skip_start: bool = False) -> LineBias:
    """ABC on an averaged attention tensor ``Ā [h m n]`` (already restricted to trusted rows).

    ``right=True`` for cross-attention, ``False`` for decoder self-attention (see ``line_ids``).
    ``min_support``: only lines crossing at least this fraction of the ``m`` rows are extended,
    and of those only the ones crossing the last row (see ``MIN_SUPPORT``).
    ``padding [n]``: key columns that hold a padding zero in every calibration input. A line that
    passes the dropoff must read a column that is not padding on at least ``min_support`` of the
    ``m`` rows (on one row at least, with ``min_support = 0``). Extended to longer operands, a line
    on padding reads digits the model never read there (Vanilla Addition's last layer keeps
    attention sinks on b's 36th digit and anti-diagonals through a's 13th–20th); and a line that
    leaves the padding for a marker only in the last trusted rows marks the training length, not a
    digit (Addition seed 2: anti-diagonals on padding in rows 0–5 and on `+` in rows 6–7; with
    them the retrained model scored 0.00% at 60 digits, without them 53.92%).
    ``padding_somewhere [n]``: key columns that hold padding in at least one calibration input;
    no vertical line may sit on one. A vertical gives every row the same position at every
    length; a digit that only the longer training numbers have tells the rows how long the
    number is, and on longer numbers it is always there (Addition seed 2: verticals on ``b_6``,
    ``b_7``, ``a_6``; 53.92 → 78.05% at 60 digits).
    ``causal``: ``attention`` is masked above its diagonal (decoder self-attention), and with a
    support rule (``min_support > 0``) a line must also cross that many cells a row can attend
    to. Only verticals change: the one on output column ``c`` is open to rows ``c`` onwards, so
    past ``(1 − min_support)·m`` it marks the last trusted rows (Addition seed 2: column 5 of 8;
    78.05 → 87.13% at 60 digits).
    ``transparent_empty``: what a head with no line left becomes (see ``LineBias``).
    ``skip_start``: sloped lines are averaged without their cell in column 0 (the start token,
    SOS or `$`). Heads park attention there when they have nothing to read, and that one cell can
    carry a line: Vanilla Addition's first layer put all of rows 3 and 4 on SOS, so self-attention
    diagonals −3 and −4 passed the dropoff on those cells alone, and the retrained model, reading
    four rows back, erred 2.5% per row from row 7 on. The start column keeps its own vertical line.
    """
    tables = [line_average(attention, delta, right, skip_start) for delta in deltas]
    width = max(d.shape[-1] for d, _, _ in tables)
    values = []
    _, m, n = attention.shape
    last_row = torch.zeros(m, n, dtype=torch.bool, device=attention.device)
    last_row[-1] = True
    for delta, (d, cells, _) in zip(deltas, tables):
        kept = dropoff(d, kappa, cells >= min_support * m)
        if min_support > 0:
            kept = kept.masked_fill(line_counts(last_row, delta, right) == 0, NEG_INF)
        if min_support > 0 and causal:
            attendable = torch.ones(m, n, dtype=torch.bool, device=attention.device).tril()
            kept = kept.masked_fill(line_counts(attendable, delta, right) < min_support * m, NEG_INF)
        if padding is not None:
            reads = line_counts((~padding).expand(m, -1), delta, right)
            kept = kept.masked_fill(reads < max(1.0, min_support * m), NEG_INF)
        if padding_somewhere is not None and delta == 0:
            kept = kept.masked_fill(line_counts(padding_somewhere.expand(m, -1), delta, right) > 0, NEG_INF)
        values.append(torch.nn.functional.pad(kept, (0, width - d.shape[-1]), value=NEG_INF))
    return LineBias(tuple(deltas), tuple(first for _, _, first in tables), torch.stack(values), right, transparent_empty)


def line_bias_state(bias: LineBias) -> dict:
    return {"deltas": list(bias.deltas), "firsts": list(bias.firsts), "values": bias.values, "right": bias.right,
            "transparent_empty": bias.transparent_empty}


def line_bias_from_state(state: dict) -> LineBias:
    return LineBias(tuple(state["deltas"]), tuple(state["firsts"]), state["values"], state["right"],
                    state.get("transparent_empty", True))


@dataclass
class Calibrated:
    """The ABC biases of one model: decoder self- and cross-attention line tables."""

    self_attention: LineBias
    cross_attention: LineBias

    def __call__(self, n_q: int, n_src: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(self_bias [h q q], cross_bias [h q s])``; the model adds the causal mask itself."""
        return self.self_attention(n_q, n_q, device), self.cross_attention(n_q, n_src, device)

    def state(self) -> dict:
        return {"self": line_bias_state(self.self_attention), "cross": line_bias_state(self.cross_attention)}

    def union(self, other: "Calibrated") -> "Calibrated":
        return Calibrated(self.self_attention.union(other.self_attention), self.cross_attention.union(other.cross_attention))

    @classmethod
    def from_state(cls, state: dict) -> "Calibrated":
        return cls(line_bias_from_state(state["self"]), line_bias_from_state(state["cross"]))


@torch.no_grad()
def average_attention(model, example, trusted_rows: int, bias=None, batch_size: int = 500, layers=(-1,)):
    """``Ā``: decoder layers' attention probabilities (default the last, as in the paper),
    averaged over ``example``.

    Each input is decoded greedily; teacher forcing the decoded tokens reproduces the decoding
    attention exactly (same prefixes). Only the first ``trusted_rows`` output rows are kept.
    Returns ``(self [layers h r r], cross [layers h r s])``.
    """
    model.eval()
    device = next(model.parameters()).device
    steps, n_src = example.tgt_out.shape[1], example.src.shape[1]
    self_bias, cross_bias = materialize(bias, steps, n_src, device)
    totals = {"self": 0.0, "cross": 0.0}
    for start in range(0, len(example.src), batch_size):
        src = example.src[start : start + batch_size].to(device)
        tokens = model.greedy(src, steps, self_bias, cross_bias)
        tgt_in = torch.cat([example.tgt_in[start : start + batch_size, :1].to(device), tokens[:, :-1]], dim=1)
        _, attention = model(src, tgt_in, self_bias, cross_bias, need_weights=True)
        for kind in totals:
            totals[kind] = totals[kind] + torch.stack([attention[layer][kind].sum(dim=0) for layer in layers])
    rows = min(trusted_rows, steps)
    return (totals["self"] / len(example.src))[..., :rows, :rows], (totals["cross"] / len(example.src))[..., :rows, :]


BIAS_FORMAT = "abcmini-abc-bias-1"


class BiasFileError(ValueError):
    pass


def load_bias_file(path: str) -> dict:
    """Read a bias file written by ``abcmini calibrate`` (safe ``weights_only`` load)."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise BiasFileError(f"bias file {path!r} does not exist") from None
    except Exception as error:
        raise BiasFileError(f"bias file {path!r} is unreadable ({type(error).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != BIAS_FORMAT:
        raise BiasFileError(f"{path!r} is not an abcmini bias file")
    return payload


def check_bias_matches(payload: dict, task: str, pad_width, heads: int, path: str) -> None:
    """Refuse a bias calibrated for another task, head count or geometry."""
    if payload["task"] != task:
        raise BiasFileError(f"bias file {path!r} was calibrated on {payload['task']}, not {task}")
    if payload["heads"] != heads:
        raise BiasFileError(f"bias file {path!r} has {payload['heads']} heads; this model has {heads}")
    if payload["pad_width"] != pad_width:
        geometry = lambda p: f"pad width {p}" if p is not None else "the growing geometry"  # noqa: E731
        raise BiasFileError(f"bias file {path!r} comes from {geometry(payload['pad_width'])}; this run uses {geometry(pad_width)}")


class NotInterpolatedError(ValueError):
    pass


def calibrate_run(run_dir: str, out: str, samples: int = 1000, kappa_cross: float = 4.5, kappa_self: float = 0.87,
                  deltas=DIRECTIONS, seed: int = 0, min_accuracy: float = 0.99, min_support: float = MIN_SUPPORT,
                  layers=(-1,), cross_deltas=None, drop_padding: bool = True, transparent_empty: bool = True,
                  skip_start: bool = False) -> dict:
    """ABC steps 1–5 for a trained run: refuse it unless it interpolated, decode ``samples``
    seeded training inputs, average the attention of the decoder ``layers`` (default the last, as
    in the paper), calibrate self-attention in the directions ``deltas`` and cross-attention in
    ``cross_deltas`` (default the same), and save the bias file at ``out``. Several layers are
    calibrated one by one and their lines united. ``drop_padding``: drop cross-attention lines that
    read mostly padding in the calibration inputs, and verticals on a column (of the input or of
    the output) that holds padding in any of them; ``transparent_empty``: empty heads
    transparent (the paper) or silent; ``skip_start``: self-attention diagonals leave out the SOS
    column (all three: see ``calibrate``). Returns the saved payload plus the ``example`` it was
    computed on (not saved)."""
    from abcmini.tasks import POOL_DIGITS, Pool, format_task, padding_cells, sample_operands
    from abcmini.train import load_checkpoint, load_model, save_checkpoint

    if samples < 1:
        raise ValueError(f"--samples must be at least 1, got {samples}")
    state = load_checkpoint(run_dir)
    cfg, model, bias = load_model(state)
    reached = state["history"][-1]["valid_acc"] if state["history"] else 0.0
    if reached < min_accuracy:
        raise NotInterpolatedError(f"{run_dir!r} has not interpolated: validation exact match {reached:.2%} < {min_accuracy:.2%}; "
                                   "train it longer (--stop-at)")
    a, b = sample_operands(cfg.task, Pool.make(cfg.data_seed).train, samples, torch.Generator().manual_seed(seed))
    example = format_task(cfg.task, a, b, cfg.train_pad_width, cfg.aligned)
    layers = tuple(layers)
    if not layers or not all(-model.cfg.dec_layers <= layer < model.cfg.dec_layers for layer in layers):
        raise ValueError(f"--layers {list(layers)}: the model has {model.cfg.dec_layers} decoder layers (0…{model.cfg.dec_layers - 1}, or -1 for the last)")
    self_avg, cross_avg = average_attention(model, example, POOL_DIGITS + 1, bias, layers=layers)
    cross_deltas = tuple(deltas if cross_deltas is None else cross_deltas)
    src_padding = padding_cells(example.src)
    out_padding = padding_cells(example.tgt_in.flip(1)).flip(1)[:, : self_avg.shape[-1]]
    cross_rules = {"padding": src_padding.all(dim=0), "padding_somewhere": src_padding.any(dim=0)} if drop_padding else {}
    self_rules = {"padding_somewhere": out_padding.any(dim=0)} if drop_padding else {}
    rules = {"min_support": min_support, "transparent_empty": transparent_empty}
    per_layer = [Calibrated(calibrate(s, kappa_self, deltas, right=False, causal=True, skip_start=skip_start, **self_rules, **rules),
                            calibrate(c, kappa_cross, cross_deltas, right=True, **cross_rules, **rules))
                 for s, c in zip(self_avg, cross_avg)]
    calibrated = functools.reduce(Calibrated.union, per_layer)
    payload = {
        "format": BIAS_FORMAT, "task": cfg.task, "pad_width": cfg.pad_width, "heads": model.cfg.heads,
        "aligned": cfg.aligned, "deltas": list(deltas), "cross_deltas": list(cross_deltas), "kappa_cross": kappa_cross, "kappa_self": kappa_self,
        "min_support": min_support, "layers": list(layers), "drop_padding": drop_padding,
        "transparent_empty": transparent_empty, "skip_start": skip_start, "samples": samples, "seed": seed,
        "source": os.path.abspath(run_dir), "bias": calibrated.state(),
        "attention": {"self": self_avg, "cross": cross_avg},
    }
    save_checkpoint(out, payload)
    return {**payload, "example": example, "config": cfg}
