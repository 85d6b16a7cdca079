"""The table of the calibration ablation of docs/recipe.md (Algorithm 1 as written, then
abcmini's procedure with each rule beyond it taken out in turn), from its records.

The runs are the product's: ``abcmini sweep sweeps/ablation.yaml`` trains every row of a cell
(TASK, abc, seed 0) under the recipe ``paper64`` (ABC trains the same runs in every recipe;
``paper64`` tests in the paper's pad-64 frame), and ``abcmini eval RUN --lengths 500
--test-frame follows`` adds the 500-digit test in a frame of 505. The records,
``results/experiments/ablation/TASK-ROW-sSEED.json``, were made by an earlier driver that
retrained a bias once however many rows gave it (a row whose bias equals an earlier row's names
that row, ``same_bias_as``: the retraining is deterministic, so its model would be the same).

``python lab/ablation.py table`` prints the table from those records: a cell holds one value
per seed, in the order of the seeds column.
"""

import glob
import json
import os

from parse import call, parser  # lab/parse.py

from abcmini.nn.rules import BLOCK_ONLY, DEFAULT

OUT = os.path.join("results", "experiments", "ablation")
LATER = ("same_digit",)  # joined the procedure after these records: measured apart (docs/recipe.md)
ROWS = {
    "algorithm-1": ["--calibration", "paper"],
    "algorithm-1-kappa-2.5": ["--rules", "none"],
    "all-rules": [],
    **{
        f"without-{rule}": ["--rules", f"all,-{rule}"]
        for rule in DEFAULT
        if rule not in BLOCK_ONLY + LATER
    },
}


def table() -> None:
    records = {}
    for path in sorted(glob.glob(os.path.join(OUT, "*.json"))):
        record = json.load(open(path))
        records[record["task"], record["row"], record["seed"]] = record
    print(
        "| row | "
        + " | ".join(f"{t} 60 | {t} 500" for t in ("successor", "addition", "nx1"))
        + " | seeds | bias of an earlier row |"
    )
    print("|---|" + "---|" * 8)
    for row in ROWS:
        cells = []
        twin_of = {}  # (task, earlier row) → the seeds whose bias is that row's
        for (task, name, seed), r in sorted(records.items()):
            if name == row and "same_bias_as" in r:
                twin_of.setdefault((task, r["same_bias_as"]), []).append(str(seed))
        twins = ", ".join(
            f"{task} (seed {','.join(seeds)}): {earlier}"
            for (task, earlier), seeds in twin_of.items()
        )
        for task in ("successor", "addition", "nx1"):
            found = [r for (t, name, _), r in sorted(records.items()) if t == task and name == row]
            for length in ("60", "500"):
                values = []
                for record in found:
                    while "same_bias_as" in record:
                        record = records[task, record["same_bias_as"], record["seed"]]
                    tests = [record.get("accuracy", {})] + [
                        t["accuracy"] for t in record.get("other_tests", {}).values()
                    ]
                    values.append(next((t[length] for t in tests if length in t), None))
                cells.append(" / ".join(f"{100 * v:.2f}" for v in values if v is not None) or "—")
        seeds = "; ".join(
            f"{task} "
            + ",".join(str(seed) for t, name, seed in sorted(records) if t == task and name == row)
            for task in ("successor", "addition", "nx1")
        )
        print(f"| {row} | " + " | ".join(cells) + f" | {seeds} | {twins} |")


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_subparsers(dest="command", required=True).add_parser("table", help="the table")
    args.parse_args()
    call(table)
