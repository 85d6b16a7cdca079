"""Batched exact-match accuracy, and the seeded extrapolation test per length."""

import torch

from abcmini.errors import UserError
from abcmini.nn.model import Transformer
from abcmini.tasks import PLUS, POOL_DIGITS, Example, Form, extrapolation_operands, format_task


class GeometryError(UserError):
    pass


def pad_width_for(
    length: int,
    fixed_pad_width: int | None,
    follows: bool = False,
    period: int = 0,
    train_digits: int = POOL_DIGITS,
) -> int:
    """The pad width a test at ``length`` digits uses: the run's fixed width; the length itself
    (never below the training width) in the growing geometry; when the frame ``follows`` the
    test, the length plus the leading zeros every training number had (``pad width − train_digits``): a model
    that always saw its number start after zeros is not asked where a number with none ends.
    With a CPI ``period`` T the following frame is widened to the training width's residue mod T,
    so every token, the start marker included, keeps the phase it was trained at."""
    if length < 1:
        raise GeometryError(f"length must be at least 1, got {length}")
    if fixed_pad_width is None:
        return max(length, train_digits)
    if follows:
        width = max(length + fixed_pad_width - train_digits, fixed_pad_width)
        return width + (fixed_pad_width - width) % period if period else width
    if length > fixed_pad_width:
        raise GeometryError(
            f"length {length} does not fit the run's fixed pad width {fixed_pad_width}; pass --test-frame follows to test it in a frame as wide as the length, or train with a wider --pad-width"
        )
    return fixed_pad_width


@torch.no_grad()
def exact_match(
    model: Transformer,
    example: Example,
    batch_size: int = 1000,
    on_batch=None,
    screen_rows: int = 16,
) -> torch.Tensor:
    """``[n]`` booleans: whether greedy decoding reproduces each whole target (EOS included).

    One teacher-forced pass per batch, no sequential decoding: by induction on the steps, greedy
    decoding emits the target exactly when the model, fed the target's first ``t`` tokens,
    predicts token ``t + 1`` at every ``t``. A long answer is screened first: a pass over the
    prompt and the first ``screen_rows`` answer rows gives those rows exactly as the whole pass
    does (the model is causal), and only the examples still right there take the whole pass, so
    a model that fails early pays for little more than its prompt. Screening stops for the rest
    of the set once it lets half a batch through. ``on_batch()`` is called after each batch.
    """
    model.eval()
    device = next(model.parameters()).device
    screen = (
        screen_rows if model.batch_invariant and example.tgt_in.shape[1] > 4 * screen_rows else 0
    )
    hits = []
    for start in range(0, len(example.src), batch_size):
        src, tgt_in, tgt_out = (
            t[start : start + batch_size].to(device)
            for t in (example.src, example.tgt_in, example.tgt_out)
        )
        right = torch.ones(len(src), dtype=torch.bool, device=device)
        if screen:
            logits, _ = model(src, tgt_in, answer_rows=screen)
            right = (logits.argmax(-1) == tgt_out[:, :screen]).all(dim=1)
            screen = screen if right.float().mean() < 0.5 else 0
        if right.any():
            logits, _ = model(src[right], tgt_in[right])
            right[right.clone()] = (logits.argmax(-1) == tgt_out[right]).all(dim=1)
        hits.append(right.cpu())
        if on_batch:
            on_batch()
    return torch.cat(hits)


def extrapolation_hits(
    model,
    task: str,
    length: int,
    pad_width: int,
    seed: int,
    form: Form = Form(),
    batch_size: int = 1000,
    on_batch=None,
) -> tuple[Example, torch.Tensor]:
    """The seeded test set of numbers with exactly ``length`` digits, in a frame of ``pad_width``
    (``pad_width_for``), and which of its examples the model gets exactly right."""
    a, b = extrapolation_operands(task, length, seed)
    example = format_task(task, a, b, pad_width, form)
    return example, exact_match(model, example, batch_size, on_batch)


def extrapolation_accuracy(
    model,
    task: str,
    length: int,
    pad_width: int,
    seed: int,
    form: Form = Form(),
    batch_size: int = 1000,
    on_batch=None,
) -> float:
    """Exact match on the seeded test set at ``length`` (``extrapolation_hits``)."""
    return (
        extrapolation_hits(model, task, length, pad_width, seed, form, batch_size, on_batch)[1]
        .float()
        .mean()
        .item()
    )


@torch.no_grad()
def final_accuracy(model, example: Example, hits: torch.Tensor, batch_size: int = 1000) -> float:
    """Exact match of a scratchpad's final number alone (the tokens after the output's last
    separator that a digit follows, to the end): every exact answer, and each other example
    decoded greedily, its own scratchpad fed back, so a slip the model recovers from still counts."""
    target = example.tgt_out[0]
    start = int(((target[:-1] == PLUS) & (target[1:] < 10)).nonzero().max()) + 1
    right, misses = hits.clone(), (~hits).nonzero().flatten()
    device = next(model.parameters()).device
    for chunk in misses.split(batch_size) if len(misses) else ():  # all right: nothing to decode
        tokens = model.greedy(example.src[chunk].to(device), example.tgt_out.shape[1]).cpu()
        right[chunk] = (tokens[:, start:] == example.tgt_out[chunk, start:]).all(dim=1)
    return right.float().mean().item()
