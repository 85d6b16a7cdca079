"""Today's methods on one protocol, fair to all: docs/todays-methods.md, "One protocol".

Each method runs in its own paper's shape (``SHAPES``, scaled as in ``scripts/own_papers.py``)
on the input its paper trains on (``+varied``: numbers of every length 1–7 from the paper's
pool) in the decoder-only model, on Successor, Addition and N×1. Its budget:

- the budget rule of every run (stop at 99.9% validation, then train on to 3× that step), but
  never fewer examples than ABC's dearest seed of the task spent (source plus retraining, from
  the ``decoder`` records): ``--min-steps``;
- a step cap of twice that floor (at least ``CAP``); a run still below 90% validation at its cap
  resumes with the cap doubled, up to ``DOUBLINGS`` times.

Tests follow the ``long`` protocol's lengths (6 … 500 digits, 10,000 numbers each), in order, and
stop after the first length below 1%: a method that fails at 20 digits is not tested at 500
(the table says so). That keeps a failing cell's test to minutes instead of an hour.

``python scripts/common_protocol.py run TASK METHOD SEED``: train and test one cell (one thread),
write ``results/experiments/common-protocol/TASK-METHOD-sSEED.json``; it resumes where it stopped.
``python scripts/common_protocol.py table``: the page's table from those records.
"""

import glob
import json
import math
import os
import shutil
import statistics
import sys

from one_thread import abcmini  # scripts/one_thread.py

OUT = os.path.join("results", "experiments", "common-protocol")
LENGTHS = (6, 10, 20, 60, 100, 200, 500)  # the long protocol's
HELD = 0.01  # a length below this ends the cell's tests
PLATEAU = 0.90  # validation a run must reach before its cap counts as its budget
CAP, DOUBLINGS, BATCH = 8000, 2, 128


def shape(layers: int, heads: int, d_model: int) -> list[str]:
    return ["--layers", str(layers), "--heads", str(heads), "--d-model", str(d_model)]


SHAPES = {  # method → (task → its shape); "*" for every task. Position ranges: the defaults (512 ids, 2,048 random).
    "random+varied": {"*": shape(5, 8, 64)},  # Ruoss et al.: 5 layers, 8 heads, d 64
    "fire+varied": {"*": shape(4, 4, 128)},  # Zhou et al.: a decoder of 25M parameters; scaled as own_papers.py
    "abacus+varied": {"*": shape(4, 4, 128)},  # McLeish et al.: 16 layers, d 1024; scaled as own_papers.py
    "coupling+varied": {"*": shape(1, 4, 128), "nx1": shape(2, 8, 128)},  # Cho et al.: 1 layer (Addition), 2 layers 8 heads (N×1)
}
TASKS = ("successor", "addition", "nx1")


def floor_steps(task: str) -> int:
    """Steps of ``BATCH`` examples that ABC's dearest seed of ``task`` spent, source included."""
    records = [json.load(open(p)) for p in glob.glob(os.path.join("results", "decoder", task, "abc-s*", "eval.json"))]
    if not records:
        raise SystemExit(f"no ABC records in results/decoder/{task}: the floor comes from them")
    return max(math.ceil((r["train_examples"] + r["interpolation_examples"]) / BATCH) for r in records)


def run(task: str, method: str, seed: str) -> None:
    out = os.path.join("runs", "common-protocol", f"{task}-{method}-s{seed}")
    floor = floor_steps(task)
    cap = max(CAP, 2 * floor)
    cell = ["--recipe", "decoder", "--task", task, "--method", method, "--seed", seed,
            *SHAPES[method].get(task, SHAPES[method]["*"]), "--min-steps", str(floor), "--no-wandb"]
    for doubling in range(DOUBLINGS + 1):
        abcmini("train", *cell, "--steps", str(cap << doubling), "--lengths", str(LENGTHS[0]), "--out", out,
                "--threads", "1", "--continue")
        if json.load(open(os.path.join(out, "eval.json")))["valid_acc"] >= PLATEAU:
            break
    for shorter, length in zip(LENGTHS, LENGTHS[1:]):
        if json.load(open(os.path.join(out, "eval.json")))["accuracy"][str(shorter)] < HELD:
            break
        abcmini("eval", out, "--lengths", str(length), "--no-wandb")
    os.makedirs(OUT, exist_ok=True)
    shutil.copyfile(os.path.join(out, "eval.json"), os.path.join(OUT, f"{task}-{method}-s{seed}.json"))


def cell(values: list[float]) -> str:
    """Median [range] in %, over the seeds that were tested at a length."""
    median = 100 * statistics.median(values)
    return f"{median:.2f}" if len(values) == 1 else f"{median:.2f} [{100 * min(values):.2f}–{100 * max(values):.2f}]"


def table() -> None:
    records = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(OUT, "*.json")))]
    print("| task | method | shape | seeds | " + " | ".join(map(str, LENGTHS)) + " | steps | examples (M) | training s | validation |")
    print("|---|---|---|---|" + "---|" * len(LENGTHS) + "---|---|---|---|")
    for task in TASKS:
        for method in SHAPES:
            runs = [r for r in records if r["task"] == task and r["method"] == method]
            if not runs:
                continue
            tested = [[r["accuracy"][str(n)] for r in runs if str(n) in r["accuracy"]] for n in LENGTHS]
            by_length = [cell(values) if values else "not tested" for values in tested]
            middle = sorted(runs, key=lambda r: r["train_steps"])[len(runs) // 2]
            print(f"| {task} | `{method}` | {runs[0]['shape']} | {len(runs)} | " + " | ".join(by_length) +
                  f" | {middle['train_steps']:,} | {middle['train_examples'] / 1e6:.2f} | {middle['train_seconds']:,.0f} | "
                  f"{cell([r['valid_acc'] for r in runs])} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["table"]:
        table()
    elif sys.argv[1:2] == ["run"] and len(sys.argv) == 5 and sys.argv[2] in TASKS and sys.argv[3] in SHAPES:
        run(*sys.argv[2:])
    else:
        raise SystemExit(__doc__)
