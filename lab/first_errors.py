"""Where a run's answers first go wrong: ``python lab/first_errors.py RUN_DIR LENGTH PAD_WIDTH [N]``.

Decodes N (default 3,000) test numbers of LENGTH digits (test seed 0) in a frame of PAD_WIDTH and
counts, over the wrong answers, how many first go wrong right after two output zeros and how many
with a digit one too high (a carry added), and at which answer digit (1: the least significant)
each first goes wrong. docs/decoder-only.md and docs/todays-methods.md use it.
"""

import torch
from parse import call, parser  # lab/parse.py

from abcmini.store import load_checkpoint
from abcmini.tasks import extrapolation_operands, format_task
from abcmini.train import load_model


def test_example(run_dir: str, length: int, pad_width: int, samples: int):
    """``(model, example)``: the run's model and the first ``samples`` of its test set at
    ``length``, in the run's own input (operands interleaved where it has a window)."""
    cfg, model = load_model(load_checkpoint(run_dir))
    a, b = extrapolation_operands(cfg.task, length, 0)
    return model, format_task(
        cfg.task, a[:samples], None if b is None else b[:samples], pad_width, cfg.form
    )


def main(run_dir: str, length: int, pad_width: int, samples: int = 3000) -> None:
    model, example = test_example(run_dir, length, pad_width, samples)
    steps = example.tgt_out.shape[1]
    out = torch.cat(
        [model.greedy(example.src[i : i + 250], steps) for i in range(0, len(example.src), 250)]
    )
    wrong = out != example.tgt_out
    rows = wrong.any(dim=1).nonzero().flatten()
    first = wrong[rows].float().argmax(dim=1)
    target = example.tgt_out[rows]
    before = torch.stack(
        [target.gather(1, (first - k).clamp(min=0)[:, None]).flatten() for k in (1, 2)]
    )
    after_zeros = ((first >= 2) & (before == 0).all(dim=0)).sum()
    one_high = (
        out[rows].gather(1, first[:, None]).flatten()
        == (target.gather(1, first[:, None]).flatten() + 1) % 10
    ).sum()
    print(
        f"{len(rows)} wrong of {len(example.src)}; first wrong right after two output zeros: {int(after_zeros)}; "
        f"first wrong digit one too high: {int(one_high)}"
    )
    where = torch.bincount(first, minlength=steps)
    print(
        "first wrong at answer digit: "
        + ", ".join(f"{i + 1}: {int(n)}" for i, n in enumerate(where) if n)
    )


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("run_dir")
    args.add_argument("length", type=int)
    args.add_argument("pad_width", type=int)
    args.add_argument("samples", type=int, nargs="?", default=3000)
    call(main, **vars(args.parse_args()))
