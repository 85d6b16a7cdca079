"""Where a trained multiadd model's attention goes, line by line, in chosen rows
(docs/multi-operand.md, "Why seeds 1 and 2 needed rule `rank_own`").

``python lab/line_focus.py RUN_DIR LENGTH ROWS [ROWS ...] [--examples N] [--from-block B]
[--lines K]``: the first N (default 100) examples of the test set at LENGTH, one teacher-forced
pass; per decoder layer, attention (self, cross) and head, the mean weight each block line
``(d, ℓ)`` gets (``(d, m)``: the block's marker) in the digit rows of significance ROWS (``A-B``,
both included) of blocks B and later (default 3), the K strongest lines (default 6) first. A head
whose lines carry the same bias chooses among them by content alone: rows with the same lines
but other digits show whether that choice carries over.
"""

import argparse

import torch
from block_errors import test_examples  # lab/block_errors.py
from einops import rearrange
from parse import call  # lab/parse.py
from parse import parser as lab_parser

from abcmini.errors import InputError
from abcmini.nn.block_lines import cell_offsets, input_coordinates, output_coordinates

MARKER = 10**6  # the line index a block's marker gets (no digit offset reaches it)


def line_mass(probs: torch.Tensor, rows, keys, chosen: torch.Tensor) -> dict[tuple, torch.Tensor]:
    """``{(d, ℓ or "m"): [h] mean weight}`` of attention ``probs [h q k]`` over the ``chosen`` rows."""
    d, offset = (x[chosen] for x in cell_offsets(rows, keys))
    marker = rearrange(keys[2], "k -> 1 k").expand_as(d)
    line = torch.where(marker, MARKER, offset)
    weights = probs[:, chosen]  # [h q' k]
    found = sorted(set(zip(d.flatten().tolist(), line.flatten().tolist())))
    return {
        (a, "m" if b == MARKER else b): weights[:, (d == a) & (line == b)].sum(dim=-1)
        / int(chosen.sum())
        for a, b in found
    }


def significance_range(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    if not (first.isdigit() and (last or first).isdigit()):
        raise argparse.ArgumentTypeError(
            f"rows must read A-B or A (digit significances), got {text!r}"
        )
    return int(first), int(last or first)


def main() -> None:
    parser = lab_parser(__doc__)
    parser.add_argument("run_dir")
    parser.add_argument("length", type=int)
    parser.add_argument("rows", type=significance_range, nargs="+")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--from-block", type=int, default=3)
    parser.add_argument("--lines", type=int, default=6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        cfg, model, [(_, frame, operands, example)] = test_examples(
            args.run_dir, [args.length], args.examples
        )
    except InputError as error:
        parser.error(str(error))
    if cfg.task != "multiadd":
        parser.error(f"{args.run_dir} is a {cfg.task} run; this reads multiadd's block lines")
    with torch.no_grad():
        _, attention = model(example.src, example.tgt_in, need_weights=True)
    blocks, n = operands.shape[1], example.tgt_out.shape[1]
    rows = output_coordinates(n, blocks, keys=False)
    keys = {
        "self": output_coordinates(n, blocks, keys=True),
        "cross": input_coordinates(example.src.shape[1], blocks),
    }
    print(
        f"{args.length} digits, {blocks} operands, frame {frame}; rows of blocks {args.from_block} on"
    )
    for kind, columns in keys.items():
        for layer, probs in enumerate(attention):
            for first, last in args.rows:
                chosen = (
                    (rows[1] >= first) & (rows[1] <= last) & (rows[0] >= args.from_block) & ~rows[2]
                )
                mass = line_mass(probs[kind].mean(dim=0), rows, columns, chosen)
                for head in range(probs[kind].shape[1]):
                    top = sorted(mass, key=lambda line: -mass[line][head])[: args.lines]
                    print(
                        f"{kind} layer {layer} rows {first}-{last} head {head}: "
                        + " ".join(f"({d},{ell}) {mass[(d, ell)][head]:.2f}" for d, ell in top)
                    )


if __name__ == "__main__":
    call(main)
