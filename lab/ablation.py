"""The calibration ablation of docs/recipe.md: Algorithm 1 as written, then abcmini's procedure
with each rule beyond it taken out in turn.

``python lab/ablation.py run TASK SEED [ROW ...]``: the cell (TASK, abc, SEED) under the recipe
``paper64`` (ABC trains the same runs in every recipe; ``paper64`` tests in the paper's pad-64
frame). It trains the Vanilla source once, calibrates it once per row, retrains each distinct
bias (a row whose bias equals an earlier row's would retrain the same model, so it names that
row instead), tests at 60 digits in the pad-64 frame and at 500 in a frame of 505 (``eval
--test-frame follows``), and writes one record per row to
``results/experiments/ablation/TASK-ROW-sSEED.json``.
``python lab/ablation.py table`` prints the table from those records: a cell holds one value
per seed, in the order of the seeds column.
"""

import glob
import json
import os

import torch
from one_thread import abcmini  # lab/one_thread.py
from parse import call, parser  # lab/parse.py

from abcmini.bias_files import load_bias
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


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return a == b


def run(task: str, seed: str, only: list[str]) -> None:
    """Calibrate every row (cheap), then retrain and test the rows in ``only`` (all when empty).

    Twins are found over all rows in ``ROWS`` order, so two processes given disjoint ``only``
    lists agree on which row retrains a shared bias."""
    cell = [
        "--recipe",
        "paper64",
        "--task",
        task,
        "--method",
        "abc",
        "--seed",
        seed,
        "--lengths",
        "60",
        "--no-wandb",
    ]
    resolved = json.loads(abcmini("train", *cell, "--dry-run"))
    source = resolved["source"]
    os.makedirs(OUT, exist_ok=True)
    if not os.path.exists(
        os.path.join(resolved["out"], "eval.json")
    ):  # the default row, which trains the source first
        abcmini("train", *cell, "--threads", "1", "--continue")  # (an interrupted one goes on)
    biases, twins = {}, {}
    for row, options in ROWS.items():
        bias_file = os.path.join("runs", "ablation", task, f"{row}-s{seed}", "abc_bias.pt")
        os.makedirs(os.path.dirname(bias_file), exist_ok=True)
        if not os.path.exists(bias_file):
            abcmini("calibrate", source, *options, "--no-wandb", "--out", bias_file)
        biases[row] = load_bias(bias_file)["bias"]  # checked, and never a pickle that runs code
        twins[row] = next(
            (other for other in biases if other != row and same(biases[other], biases[row])), None
        )
    for row, options in ROWS.items():
        record = os.path.join(OUT, f"{task}-{row}-s{seed}.json")
        if os.path.exists(record) or (only and row not in only):
            continue
        if twins[row]:
            result = {
                "task": task,
                "seed": int(seed),
                "row": row,
                "same_bias_as": twins[row],
                "command": f"abcmini calibrate {os.path.relpath(source)} {' '.join(options)} --out BIAS.pt",
            }
        else:
            run_dir = json.loads(abcmini("train", *cell, *options, "--dry-run"))["out"]
            if not os.path.exists(
                os.path.join(run_dir, "eval.json")
            ):  # --source: no lock on it, rows train side by side
                abcmini(
                    "train", *cell, *options, "--source", source, "--threads", "1", "--continue"
                )
            abcmini("eval", run_dir, "--lengths", "500", "--test-frame", "follows", "--no-wandb")
            result = {**json.load(open(os.path.join(run_dir, "eval.json"))), "row": row}
        with open(record + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(record + ".tmp", record)
        print(row, result.get("same_bias_as") or result["accuracy"], flush=True)


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
    commands = args.add_subparsers(dest="command", required=True)
    commands.add_parser("table", help="the table from the records")
    one = commands.add_parser("run", help="train and test the rows of one cell")
    one.add_argument("task", choices=("successor", "addition", "nx1"))
    one.add_argument("seed", type=int)
    one.add_argument("rows", nargs="*", metavar="ROW", help=", ".join(ROWS))
    given = args.parse_args()
    if given.command == "run" and set(given.rows) - set(ROWS):
        args.error(
            f"unknown rows {sorted(set(given.rows) - set(ROWS))}; rows are {', '.join(ROWS)}"
        )
    if given.command == "table":
        call(table)
    else:
        call(run, given.task, str(given.seed), given.rows)
