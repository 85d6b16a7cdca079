"""What a reproduction root's records cost: ``python lab/cost.py ROOT [SEEDS]``.

Per task: the cells and records under ``ROOT/TASK/METHOD-sSEED/eval.json``, their training
seconds (ABC: its source's training, ``interpolation_seconds``, plus the retraining) and test
seconds as recorded, each one core's time, and the training cost of SEEDS (default 3) seeds of
every cell, a missing seed counted at its cell's median. docs/paper-gaps.md uses it to set the
paper's cost in one frame beside another.
"""

import glob
import json
import os
import statistics
from collections import defaultdict

from parse import call, parser  # lab/parse.py

from abcmini.errors import UserError
from abcmini.outputs.report import training_seconds


def main(root: str, seeds: int = 3) -> None:
    if not glob.glob(os.path.join(root, "*", "*", "eval.json")):
        raise UserError(f"{root!r} holds no result records (ROOT/TASK/CELL/eval.json)")
    cells = defaultdict(list)
    tests = defaultdict(float)
    for path in sorted(glob.glob(os.path.join(root, "*", "*", "eval.json"))):
        record = json.load(open(path))
        cells[record["task"], record["cell_method"]].append(training_seconds(record))
        tests[record["task"]] += sum((record.get("test_seconds") or {}).values())
    total = 0.0
    for task in sorted({task for task, _ in cells}):
        mine = {method: runs for (t, method), runs in cells.items() if t == task}
        measured = sum(sum(runs) for runs in mine.values())
        estimate = sum(seeds * statistics.median(runs) for runs in mine.values())
        total += estimate
        print(
            f"{task}: {len(mine)} cells, {sum(map(len, mine.values()))} records; training {measured / 3600:.2f} core-h measured,"
            f" {estimate / 3600:.2f} for {seeds} seeds of every cell; tests {tests[task] / 3600:.2f} core-h recorded"
        )
    print(
        f"all: training {total / 3600:.2f} core-h for {seeds} seeds of every cell ({total / 7200:.2f} h on two workers)"
    )


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("root")
    args.add_argument("seeds", type=int, nargs="?", default=3)
    call(main, **vars(args.parse_args()))
