"""Where a block output goes wrong (docs/multi-operand.md, "What broke first").

``python scripts/block_errors.py RUN_DIR LENGTHS [EXAMPLES]``: for a trained multiadd run, the
first EXAMPLES (default 200) of each length's test set in the frame the run is tested in, one
teacher-forced pass: exact match, and per block the accuracy of its least accurate row (a
separator row at 0% is an output that ends, or goes on, in the wrong place).
"""

import sys

import torch

from abcmini import pipeline
from abcmini.store import load_checkpoint
from abcmini.tasks import extrapolation_operands, format_task
from abcmini.train import load_model


def main(run_dir: str, lengths: str, examples: int = 200) -> None:
    torch.set_num_threads(1)
    cfg, model = load_model(load_checkpoint(run_dir))
    lengths = [int(n) for n in lengths.split(",")]
    for length, frame in zip(lengths, pipeline.test_frames(pipeline.experiment_of(run_dir), cfg, lengths)):
        a, _ = extrapolation_operands(cfg.task, length, 0)
        example = format_task(cfg.task, a[:examples], None, frame)
        with torch.no_grad():
            logits, _ = model(example.src, example.tgt_in)
        right = logits.argmax(-1) == example.tgt_out
        hits = right.all(dim=1)
        worst = right.float().mean(dim=0).view(a.shape[1], -1).min(dim=1).values
        print(f"{length} digits, {a.shape[1]} operands: exact {hits.float().mean():.2%}; worst row per block "
              + " ".join(f"{w:.2f}" for w in worst.tolist()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(x) for x in sys.argv[3:]))
