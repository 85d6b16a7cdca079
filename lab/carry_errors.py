"""A multiply run's errors by the carry each row adds (docs/multi-operand.md, "Where the three seeds break").

``python lab/carry_errors.py RUN_DIR LENGTH [EXAMPLES]``: the first EXAMPLES (default 1,000)
of the test set at LENGTH, one teacher-forced pass; per carry value, how many digit rows add it
and how many of those the model gets wrong, and over the wrong rows, how far the digit is off
(predicted − true, mod 10); beside it, each carry's share of the digit rows of 10,000 training
examples (drawn as the run's training draws them, in its training frame, without its frame
spread). Row ``i`` of block ``j`` writes digit ``i`` of ``s_j = s_{j−1} + a·b_j·10^j``, adding
``a_{i−j}·b_j`` and a carry of 0 … 9 from the digits below.
"""

from collections import Counter

import torch
from block_errors import test_examples  # lab/block_errors.py
from parse import call, parser  # lab/parse.py

from abcmini.errors import UserError
from abcmini.nn.block_lines import output_coordinates
from abcmini.tasks import (
    Pool,
    extrapolation_operands,
    pad_digits,
    top_heavy,
    training_operands,
)


def row_carries(a: torch.Tensor, b: torch.Tensor, frame: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(carries, digits)``, each ``[n, rows]`` in the decoder's digit-row order (block ``j``:
    significance 0 … ``frame + j``): the carry into the row's digit and the digit it writes."""
    width = 2 * frame
    a_digits, b_digits = (
        pad_digits(a, width).flip(1),
        pad_digits(b, frame).flip(1),
    )  # digit k: significance k
    previous = torch.zeros_like(a_digits)
    carries, digits = [], []
    for j in range(frame):
        shifted = torch.nn.functional.pad(a_digits, (j, 0))[:, :width] * b_digits[:, j : j + 1]
        carry, block = torch.zeros_like(a_digits[:, 0]), []
        for i in range(frame + j + 1):
            total = previous[:, i] + shifted[:, i] + carry
            carries.append(carry)
            block.append(total % 10)
            carry = total // 10
        previous = torch.nn.functional.pad(torch.stack(block, 1), (0, width - len(block)))
        digits += block
    return torch.stack(carries, 1), torch.stack(digits, 1)


def main(run_dir: str, length: int, examples: int = 1000) -> None:
    torch.set_num_threads(1)
    cfg, model, [(_, frame, a, example)] = test_examples(run_dir, [length], examples)
    if cfg.task != "multiply":
        raise UserError(f"{run_dir} is a {cfg.task} run; carry_errors.py reads multiply runs")
    with torch.no_grad():
        logits, _ = model(example.src, example.tgt_in)
    block, _, marker = output_coordinates(example.tgt_out.shape[1], frame, keys=False, growing=True)
    digit_rows = (block < frame) & ~marker
    output = logits.argmax(-1)
    predicted, target = output[:, digit_rows], example.tgt_out[:, digit_rows]
    carries, _ = row_carries(
        a[:examples], extrapolation_operands("multiply", length, 0)[1][:examples], frame
    )
    wrong = predicted != target
    numbers = Pool.make(cfg.data_seed).train if cfg.from_pool else None
    generator = torch.Generator().manual_seed(cfg.seed)
    drawn = training_operands("multiply", numbers, 10_000, generator, cfg.train_digits)
    trained, _ = row_carries(*top_heavy(drawn, cfg.top_share, generator), cfg.train_pad_width)
    print(
        f"{run_dir}, {length} digits: exact {(output == example.tgt_out).all(1).float().mean():.2%}"
    )
    for carry in range(10):
        rows = carries == carry
        print(
            f"carry {carry}: {int(rows.sum()):8d} rows, {int((wrong & rows).sum()):5d} wrong "
            f"({(wrong & rows).sum() / rows.sum().clamp(min=1):.3%}); "
            f"{rows.float().mean():.3%} of test rows, {(trained == carry).float().mean():.3%} of training rows"
        )
    off = Counter(((predicted - target) % 10)[wrong].tolist())
    print(
        "wrong digits, predicted − true (mod 10): "
        + ", ".join(f"{k}: {off[k]}" for k in sorted(off))
    )


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("run_dir")
    args.add_argument("length", type=int)
    args.add_argument("examples", type=int, nargs="?", default=1000)
    call(main, **vars(args.parse_args()))
