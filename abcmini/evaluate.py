"""Batched exact-match accuracy, and the seeded extrapolation test per length."""

import torch

from abcmini.errors import UserError
from abcmini.model import Transformer
from abcmini.tasks import POOL_DIGITS, Example, extrapolation_operands, format_task


class GeometryError(UserError):
    pass


def pad_width_for(length: int, fixed_pad_width: int | None, follows: bool = False, period: int = 0) -> int:
    """The pad width a test at ``length`` digits uses: the run's fixed width; the length itself
    (never below the training width) in the growing geometry; when the frame ``follows`` the
    test, the length plus the leading zeros every training number had (``pad width − 7``): a model
    that always saw its number start after zeros is not asked where a number with none ends.
    With a CPI ``period`` T the following frame is widened to the training width's residue mod T,
    so every token, the start marker included, keeps the phase it was trained at."""
    if length < 1:
        raise GeometryError(f"length must be at least 1, got {length}")
    if fixed_pad_width is None:
        return max(length, POOL_DIGITS)
    if follows:
        width = max(length + fixed_pad_width - POOL_DIGITS, fixed_pad_width)
        return width + (fixed_pad_width - width) % period if period else width
    if length > fixed_pad_width:
        raise GeometryError(f"length {length} does not fit the run's fixed pad width {fixed_pad_width}; pass --test-frame follows to test it in a frame as wide as the length, or train with a wider --pad-width")
    return fixed_pad_width


@torch.no_grad()
def exact_match(model: Transformer, example: Example, batch_size: int = 1000, on_batch=None) -> torch.Tensor:
    """``[n]`` booleans: whether greedy decoding reproduces each whole target (EOS included).

    One teacher-forced pass per batch, no sequential decoding: by induction on the steps, greedy
    decoding emits the target exactly when the model, fed the target's first ``t`` tokens,
    predicts token ``t + 1`` at every ``t``. ``on_batch()`` is called after each batch.
    """
    model.eval()
    device = next(model.parameters()).device
    hits = []
    for start in range(0, len(example.src), batch_size):
        batch = slice(start, start + batch_size)
        logits, _ = model(example.src[batch].to(device), example.tgt_in[batch].to(device))
        hits.append((logits.argmax(-1) == example.tgt_out[batch].to(device)).all(dim=1).cpu())
        if on_batch:
            on_batch()
    return torch.cat(hits)


def extrapolation_accuracy(model, task: str, length: int, pad_width: int, seed: int,
                           aligned: bool = False, batch_size: int = 1000, on_batch=None) -> float:
    """Accuracy on the seeded test set of numbers with exactly ``length`` digits, in a frame of
    ``pad_width`` (``pad_width_for``)."""
    a, b = extrapolation_operands(task, length, seed)
    example = format_task(task, a, b, pad_width, aligned)
    return exact_match(model, example, batch_size, on_batch).float().mean().item()
