"""Checks made before any work starts, so an hour of training never ends in a crash: the memory
a step needs (from batch size, pad width, samples) and the places results will be written.

The memory estimate is a deliberate over-count of the float32 tensors of one step: every
attention's scores, probabilities and their gradients (4 copies of ``[b h q k]``) and ten
activations of ``[b n d]`` per layer. A run it refuses could not have fit.
"""

import os
import resource
import tempfile
from dataclasses import replace

import torch

from abcmini.errors import UserError
from abcmini.experiment import RunConfig
from abcmini.nn import fire
from abcmini.tasks import OPERANDS, hinted_lengths, sequence_lengths

GIB = 2**30


def step_bytes(
    cfg: RunConfig, batch: int, grad: bool = True, operands: int = OPERANDS, rows: int | None = None
) -> int:
    """Bytes one forward (and backward, with ``grad``) pass of ``batch`` sequences may need
    (multiadd: of ``operands`` operands, which a test's length sets); ``rows``: decoder rows
    per pass (greedy decoding: 1 a step, against cached keys), default every output row."""
    model = cfg.model_config()
    src, tgt = (
        hinted_lengths(cfg.task, cfg.train_pad_width)
        if cfg.index_hints
        else sequence_lengths(cfg.task, cfg.train_pad_width, cfg.aligned, operands)
    )
    rows = tgt if rows is None else rows
    # FIRE over randomized positions runs its MLP over every row's own [q k] cells
    per_cell = model.heads + (fire.HIDDEN if model.fire_positions == "randomized" else 0)
    cells = (
        model.dec_layers * (src + tgt) * (src + rows)
        if model.arch == "decoder"
        else model.enc_layers * src * src + model.dec_layers * rows * (tgt + src)
    )
    copies = 4 if grad else 2
    activations = 10 * (src + tgt) * model.d_model * (model.enc_layers + model.dec_layers)
    return 4 * batch * (copies * per_cell * cells + activations)


def available_bytes(device) -> int:
    """Memory the device can give: a GPU's free memory, or the host's physical memory, at most
    what this process's limits (``ulimit -v``, ``-d``) leave."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    page = os.sysconf("SC_PAGE_SIZE")
    have = page * os.sysconf("SC_PHYS_PAGES")
    with open("/proc/self/statm") as f:  # pages: whole address space, …, data and stack
        fields = [int(n) * page for n in f.read().split()]
    for limit, used in ((resource.RLIMIT_AS, fields[0]), (resource.RLIMIT_DATA, fields[5])):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY:
            have = min(have, soft - used)  # torch and Python already hold part of it
    return max(have, 0)


def check_memory(cfg: RunConfig, device, samples: int = 0, what: str = "training") -> None:
    """Refuse a run whose steps (training batches, validation and evaluation in batches of 1,000,
    a calibration of ``samples`` inputs in batches of 500) cannot fit in memory."""
    src, tgt = sequence_lengths(cfg.task, cfg.train_pad_width, cfg.aligned)
    examples = lambda n: 24 * n * (src + 2 * tgt)  # noqa: E731 — building n int64 examples peaks at about 2.1× what they keep (measured)
    widest = replace(cfg, pad_width=cfg.train_pad_width + cfg.frame_spread)  # a batch's frame
    needs = max(
        step_bytes(widest, cfg.batch_size) + examples(cfg.valid_size),
        step_bytes(cfg, min(cfg.valid_size, 1000), grad=False) + examples(cfg.valid_size),
        step_bytes(cfg, min(samples, 500), grad=False) + examples(samples),
    )
    have = available_bytes(device)
    if needs > have:
        raise UserError(
            f"{what} with batch size {cfg.batch_size}, pad width {cfg.train_pad_width}"
            f"{f' (+{cfg.frame_spread} frame spread)' if cfg.frame_spread else ''}"
            f"{f' and {samples} samples' if samples else ''}, {cfg.valid_size:,} validation examples needs about {needs / GIB:,.1f} GiB of memory; "
            f"this process may use {have / GIB:,.1f} GiB (lower --batch-size, --pad-width, --frame-spread, --valid-size or --samples)"
        )


EVAL_BUDGET = 2 * GIB  # what one evaluation batch may hold: long tests run in smaller batches


def batch_for(
    cfg: RunConfig,
    pad_width: int,
    batch_size: int,
    operands: int = OPERANDS,
    rows: int | None = None,
) -> int:
    """The evaluation batch at ``pad_width``: ``batch_size``, halved until a batch needs at most
    ``EVAL_BUDGET`` (at least 1): a 500-digit test runs in batches of tens, not thousands.
    ``rows``: as ``step_bytes`` (1: greedy decoding, whose batches can be far larger)."""
    wide = replace(
        cfg, pad_width=max(pad_width, cfg.train_digits)
    )  # a +varied run's frames below its longest: bounded by it
    while (
        batch_size > 1
        and step_bytes(wide, batch_size, grad=False, operands=operands, rows=rows) > EVAL_BUDGET
    ):
        batch_size //= 2
    return batch_size


def example_bytes(cfg: RunConfig, pad_width: int, operands: int = OPERANDS) -> int:
    """Bytes a forward pass of one example may need at ``pad_width`` (multiadd: of ``operands``)."""
    return step_bytes(
        replace(cfg, pad_width=max(pad_width, cfg.train_digits)), 1, grad=False, operands=operands
    )


def check_evaluation(cfg: RunConfig, widest: int, device, operands: int = OPERANDS) -> None:
    """Refuse an evaluation whose smallest batch cannot fit in memory at the widest test frame
    (multiadd: with the most ``operands``)."""
    needs = example_bytes(cfg, widest, operands)
    have = available_bytes(device)
    if needs > have:
        raise UserError(
            f"evaluating at pad width {widest} needs about {needs / GIB:,.1f} GiB of memory for one example; "
            f"this machine has {have / GIB:,.1f} GiB (test shorter --lengths)"
        )


def check_writable(directory: str, option: str = "--out") -> None:
    """Create ``directory`` if needed and prove a file can be written in it (then remove it)."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UserError(f"{option} {directory!r} is a file, not a directory")
    probe = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, probe = tempfile.mkstemp(
            prefix=".abcmini-write-test-", dir=directory
        )  # O_EXCL: never a planted file
        with os.fdopen(fd, "wb") as f:
            f.write(b"x")
            f.flush()  # a full disk fails here, not after the probe is gone
    except OSError as error:
        raise UserError(
            f"{option} {directory!r} is not writable: {error.strerror or error}"
        ) from None
    finally:
        if probe and os.path.lexists(probe):
            os.remove(probe)
