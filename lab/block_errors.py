"""Where a block output goes wrong (docs/multi-operand.md, "What the formats and the lines had to get right").

``python lab/block_errors.py RUN_DIR LENGTHS [EXAMPLES] [--rows]``: for a trained multiadd or
multiply run, the first EXAMPLES (default 200) of each length's test set in the frame the run is
tested in, one teacher-forced pass: exact match, and per block the accuracy of its least accurate
row (a separator row at 0% is an output that ends, or goes on, in the wrong place); ``--rows``
prints every row's accuracy, a line per block.
"""

import torch
from parse import call, parser  # lab/parse.py

from abcmini import pipeline
from abcmini.nn.block_lines import output_coordinates
from abcmini.store import load_checkpoint
from abcmini.tasks import extrapolation_operands, format_task
from abcmini.train import load_model


def test_examples(run_dir: str, lengths: list[int], examples: int):
    """``(cfg, model, [(length, frame, operands a, example)])``: the first ``examples`` of each
    length's test set (test seed 0), formatted in the frame the run is tested in."""
    cfg, model = load_model(load_checkpoint(run_dir))
    found = []
    for length, frame in zip(
        lengths, pipeline.test_frames(pipeline.experiment_of(run_dir), cfg, lengths)
    ):
        a, b = extrapolation_operands(cfg.task, length, 0)
        found.append(
            (
                length,
                frame,
                a,
                format_task(
                    cfg.task, a[:examples], None if b is None else b[:examples], frame, cfg.form
                ),
            )
        )
    return cfg, model, found


def main(run_dir: str, lengths: str, examples: int = 200, rows: bool = False) -> None:
    torch.set_num_threads(1)
    cfg, model, found = test_examples(run_dir, [int(n) for n in lengths.split(",")], examples)
    for length, frame, a, example in found:
        blocks = frame if cfg.task == "multiply" else a.shape[1]
        with torch.no_grad():
            logits, _ = model(example.src, example.tgt_in)
        right = logits.argmax(-1) == example.tgt_out
        block_of = output_coordinates(
            right.shape[1], blocks, keys=False, growing=cfg.task == "multiply"
        )[0]
        per_row = [right[:, block_of == b].float().mean(dim=0) for b in range(blocks)]
        print(
            f"{length} digits, {blocks} blocks: exact {right.all(dim=1).float().mean():.2%}; worst row per block "
            + " ".join(f"{block.min():.2f}" for block in per_row)
        )
        for block in per_row if rows else ():
            print("  " + " ".join(f"{x:.2f}" for x in block.tolist()))


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("run_dir")
    args.add_argument("lengths", help="comma-separated test lengths")
    args.add_argument("examples", type=int, nargs="?", default=200)
    args.add_argument("--rows", action="store_true", help="errors per output row")
    call(main, **vars(args.parse_args()))
