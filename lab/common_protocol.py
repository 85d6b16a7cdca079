"""Today's methods on one protocol, fair to all: docs/todays-methods.md, "One protocol".

Each method runs in its own paper's shape (``SHAPES``, scaled as in ``lab/own_papers.py``)
on the input its paper trains on (``+varied``: numbers of every length up to the training
length, drawn digit by digit as the papers draw them: ``--train-numbers uniform``; the first
cells drew them from the paper's pool, whose 7-digit numbers all begin 10, and their records
say ``pool``) in the decoder-only model. Its budget:

- the budget rule of every run (stop at 99.9% validation, then train on to 3× that step), but
  never fewer examples than ABC's dearest seed of the task spent (source plus retraining):
  ``--min-steps``;
- a step cap of twice that floor (at least ``CAP``); a run still below 90% validation at its cap,
  ending more than ``SPIKE`` below its best validation (a loss spike in its last steps), or below
  90% on the test at its longest training length (validation draws the lengths evenly and can
  hide a failing long end), resumes with the cap doubled, up to ``DOUBLINGS`` times.

Tests run at ``lengths(digits)`` in order and stop after the first length below 1%: a method
that fails at 20 digits is not tested at 500 (the table says so). That keeps a failing cell's
test to minutes instead of an hour.

``python lab/common_protocol.py run TASK METHOD SEED [DIGITS]``: train and test one cell (one
thread) and write ``results/experiments/common-protocol/TASK-METHOD-uniform-sSEED.json`` (with
``-trainDIGITS`` instead of ``-uniform`` when the training length is not 7, where every draw is
digit by digit); it resumes where it stopped. METHOD ``abc`` is ABC's cell of the ``decoder``
recipe: the floor of the others at a training length other than 7 (at 7 the ``decoder``
records give it, trained on the paper's pool).
``python lab/common_protocol.py table``: the page's tables from those records;
``python lab/common_protocol.py plot PNG``: the sweep as a figure (``sweep_plot``).
"""

import glob
import itertools
import json
import math
import os
import re
import shutil
import statistics

from matplotlib.figure import Figure  # no pyplot: no backend, no global figure state
from one_thread import abcmini  # lab/one_thread.py
from parse import call, parser  # lab/parse.py

from abcmini.config import (
    POOL_DIGITS as POOL,
)  # the pool's longest number: the recipes' training length
from abcmini.errors import UserError
from abcmini.outputs.method_views import held_to, on_a_gpu, reach
from abcmini.recipes import RECIPES
from abcmini.store import CHECKPOINT, EVAL_FILE, load_checkpoint, load_json

OUT = os.path.join("results", "experiments", "common-protocol")
LENGTHS = (6, 10, 20, 60, 100, 200, 500)  # the long protocol's
HELD = 0.01  # a length below this ends the cell's tests
PLATEAU = 0.90  # validation a run must reach before its cap counts as its budget
SPIKE = 0.02  # a run's last validation this far below its best: it ended on a spike and goes on
CAP, DOUBLINGS, BATCH = 8000, 2, 128
NONE = 0.1  # where the sweep's plot puts a seed that holds no tested length at 99%


def shape(layers: int, heads: int, d_model: int) -> list[str]:
    return ["--layers", str(layers), "--heads", str(heads), "--d-model", str(d_model)]


SHAPES = {  # method → (task → its shape); "*" for every task. Position ranges: the defaults (512 ids, 2,048 random).
    "random+varied": {"*": shape(5, 8, 64)},  # Ruoss et al.: 5 layers, 8 heads, d 64
    "fire+varied": {
        "*": shape(4, 4, 128)
    },  # Zhou et al.: a decoder of 25M parameters; scaled as own_papers.py
    "abacus+varied": {
        "*": shape(4, 4, 128)
    },  # McLeish et al.: 16 layers, d 1024; scaled as own_papers.py
    "coupling+varied": {
        "*": shape(1, 4, 128),
        "nx1": shape(2, 8, 128),
    },  # Cho et al.: 1 layer (Addition), 2 layers 8 heads (N×1)
}
TASKS = ("successor", "addition", "nx1")
SWEEP = (7, 15, 30)  # the training lengths of the sweep (Addition)


def lengths(digits: int) -> list[int]:
    """The long protocol's lengths and 1, 2, 3 and 5 times the training length, to 500."""
    return sorted({*LENGTHS, *(k * digits for k in (1, 2, 3, 5) if k * digits <= LENGTHS[-1])})


def name(task: str, method: str, seed: int | str, digits: int) -> str:
    """A cell's name: ``-uniform`` for today's methods at 7 digits (the first cells, from the pool, had none)."""
    drawn = f"-train{digits}" if digits != POOL else "" if method == "abc" else "-uniform"
    return f"{task}-{method}{drawn}-s{seed}"


def floor_steps(task: str, digits: int) -> int:
    """Steps of ``BATCH`` examples that ABC's dearest seed of ``task`` at ``digits`` spent, source included."""
    pattern = (
        os.path.join("results", "decoder", task, "abc-s*", "eval.json")
        if digits == POOL
        else os.path.join(OUT, name(task, "abc", "*", digits) + ".json")
    )
    records = [json.load(open(p)) for p in glob.glob(pattern)]
    if not records:
        raise UserError(
            f"no ABC records match {pattern}: the floor comes from them (run METHOD abc first)"
        )
    return max(
        math.ceil((r["train_examples"] + r["interpolation_examples"]) / BATCH) for r in records
    )


def reached(out: str, cap: int) -> int:
    """The doublings of ``cap`` the run in ``out`` was given (0 if none): a run stopped under a
    doubled cap goes on under that cap, not the first one it has already passed."""
    if not os.path.exists(os.path.join(out, CHECKPOINT)):
        return 0
    return max(0, (load_checkpoint(out)["config"]["steps"] // cap).bit_length() - 1)


def converged(out: str, digits: int) -> bool:
    """Whether the run in ``out`` ended at ``PLATEAU`` or above and within ``SPIKE`` of its best
    validation, and holds ``PLATEAU`` on its test at ``digits``, its longest training length."""
    validation = [entry["valid_acc"] for entry in load_checkpoint(out)["history"]]
    longest = load_json(os.path.join(out, EVAL_FILE), "a run's test")["accuracy"][str(digits)]
    return validation[-1] >= max(PLATEAU, max(validation) - SPIKE) and longest >= PLATEAU


def sized(method: str, digits: int) -> list[str]:
    """A cell's training numbers and frames at ``digits``. ABC at 7 is the paper's pool; elsewhere
    every draw is digit by digit. ABC's frames (its training frame and the protocol's test frame)
    keep the leading zeros the ``decoder`` recipe gives 7-digit numbers: its model never saw a
    number without them. ``+varied`` runs train and test in frames of exactly the length."""
    if digits == POOL:
        return [] if method == "abc" else ["--train-numbers", "uniform"]
    if method != "abc":
        return ["--train-digits", str(digits), "--pad-width", str(digits)]
    recipe = RECIPES["decoder"]
    return [
        "--train-digits",
        str(digits),
        "--pad-width",
        str(digits + recipe.pad_width - POOL),
        "--abc-pad-width",
        str(digits + recipe.abc_pad_width - POOL),
    ]


def run(task: str, method: str, seed: str, digits: int) -> None:
    out = os.path.join("runs", "common-protocol", name(task, method, seed, digits))
    args = [
        "--recipe",
        "decoder",
        "--task",
        task,
        "--method",
        method,
        "--seed",
        seed,
        *sized(method, digits),
        "--no-wandb",
    ]
    if (
        method == "abc"
    ):  # at 7 digits its cell is the decoder recipe's record: run at the other lengths only
        abcmini(
            "train", *args, "--lengths", str(digits), "--out", out, "--threads", "1", "--continue"
        )
    else:
        floor = floor_steps(task, digits)
        args += [*SHAPES[method].get(task, SHAPES[method]["*"]), "--min-steps", str(floor)]
        cap = max(CAP, 2 * floor)
        for doubling in range(reached(out, cap), DOUBLINGS + 1):
            abcmini(
                "train",
                *args,
                "--steps",
                str(cap << doubling),
                "--lengths",
                str(digits),
                "--out",
                out,
                "--threads",
                "1",
                "--continue",
            )
            if converged(out, digits):
                break
    for length in lengths(digits):
        accuracy = json.load(open(os.path.join(out, "eval.json")))["accuracy"]
        if any(a < HELD for n, a in accuracy.items() if int(n) < length):
            break
        if str(length) not in accuracy:
            abcmini("eval", out, "--lengths", str(length), "--no-wandb")
    os.makedirs(OUT, exist_ok=True)
    shutil.copyfile(
        os.path.join(out, "eval.json"),
        os.path.join(OUT, name(task, method, seed, digits) + ".json"),
    )


def cell(values: list[float]) -> str:
    """Median [range] in %, over the seeds that were tested at a length."""
    median = 100 * statistics.median(values)
    return (
        f"{median:.2f}"
        if len(values) == 1
        else f"{median:.2f} [{100 * min(values):.2f}–{100 * max(values):.2f}]"
    )


def records() -> list[dict]:
    """The records in ``OUT``, each with its cell from the file name (``method``, ``digits``,
    ``numbers``, ``seed``)."""
    found = []
    for path in sorted(glob.glob(os.path.join(OUT, "*.json"))):
        task, method, uniform, digits, seed = re.fullmatch(
            r"([a-z0-9]+)-(.+?)(-uniform)?(?:-train(\d+))?-s(\d+)\.json", os.path.basename(path)
        ).groups()
        numbers = "pool" if digits is None and uniform is None and method != "abc" else "uniform"
        found.append(
            {
                **json.load(open(path)),
                "method": method,
                "digits": int(digits or POOL),
                "numbers": numbers,
                "seed": int(seed),
            }
        )
    return found


def abc_at_pool() -> list[dict]:
    """ABC's ``decoder`` records of Addition: the sweep's row at 7 digits."""
    return [
        {**json.load(open(p)), "method": "abc", "digits": POOL}
        for p in sorted(
            glob.glob(os.path.join("results", "decoder", "addition", "abc-s*", "eval.json"))
        )
    ]


def grid_table(found: list[dict]) -> None:
    print(
        "| task | method | numbers | shape | seeds | "
        + " | ".join(map(str, LENGTHS))
        + " | ≥ 90% to, per seed | steps | examples (M) | training s | validation |"
    )
    print("|---|---|---|---|---|" + "---|" * len(LENGTHS) + "---|---|---|---|---|")
    for task, method, numbers in itertools.product(TASKS, SHAPES, ("pool", "uniform")):
        runs = [
            r
            for r in found
            if (r["task"], r["method"], r["numbers"], r["digits"]) == (task, method, numbers, POOL)
        ]
        if not runs:
            continue
        tested = [[r["accuracy"][str(n)] for r in runs if str(n) in r["accuracy"]] for n in LENGTHS]
        by_length = [cell(values) if values else "–" for values in tested]
        middle = sorted(runs, key=lambda r: r["train_steps"])[len(runs) // 2]
        print(
            f"| {task} | `{method}` | {numbers} | {runs[0]['shape']} | {len(runs)} | "
            + " | ".join(by_length)
            + f" | {' / '.join(reach(r['accuracy'], 0.90) for r in runs)} | {middle['train_steps']:,} | {middle['train_examples'] / 1e6:.2f} | {middle['train_seconds']:,.0f} | "
            f"{cell([r['valid_acc'] for r in runs])} |"
        )


def sweep_runs(found: list[dict], method: str, digits: int) -> list[dict]:
    """The sweep's seeds of ``method`` trained on Addition up to ``digits`` (today's methods'
    first cells, from the pool, are the grid's only)."""
    return [
        r
        for r in found
        if r["task"] == "addition"
        and r["method"] == method
        and r["digits"] == digits
        and r.get("numbers") != "pool"
    ]


def sweep_table(found: list[dict]) -> None:
    print(
        "| method | trained on | seeds | ≥ 99% to, per seed (× training length) | ≥ 90% to | examples (M) |"
    )
    print("|---|---|---|---|---|---|")
    for method in ("abc", *SHAPES):
        for digits in SWEEP:
            runs = sweep_runs(found, method, digits)
            if not runs:
                continue
            spans = [
                " / ".join(reach(r["accuracy"], at, digits) for r in runs) for at in (0.99, 0.90)
            ]
            print(
                f"| `{method}` | 1–{digits} | {len(runs)}{on_a_gpu(runs)} | {spans[0]} | {spans[1]} | "
                f"{statistics.median(r['train_examples'] + (r.get('interpolation_examples') or 0) for r in runs) / 1e6:.2f} |"
            )


def sweep_plot(found: list[dict]) -> Figure:
    """Extrapolation ratio (the longest length held at 99%, over the training length) against
    the training length: a line through each method's medians, its seeds as dots. A seed that
    holds only lengths below its training length sits below 1×; one that holds none, on the
    "none" row."""
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for i, method in enumerate(("abc", *SHAPES)):
        runs = {d: sweep_runs(found, method, d) for d in SWEEP}
        trained = [d for d in SWEEP if runs[d]]
        if not trained:
            continue
        ratios = [[held_to(r["accuracy"], 0.99) / d or NONE for r in runs[d]] for d in trained]
        shifted = [
            d * 1.04 ** (i - len(SHAPES) / 2) for d in trained
        ]  # side by side where methods tie
        (line,) = ax.plot(
            shifted,
            [statistics.median(r) for r in ratios],
            marker="o",
            label=method.removesuffix("+varied"),
        )
        for x, seeds in zip(shifted, ratios):
            ax.scatter([x] * len(seeds), seeds, color=line.get_color(), alpha=0.35, s=14)
    ticks = [NONE, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100]
    ax.set(
        xscale="log",
        yscale="log",
        xticks=SWEEP,
        yticks=ticks,
        xlim=(5.5, 38),
        ylim=(NONE / 1.5, 150),
        xlabel="trained on numbers of up to … digits (Addition)",
        ylabel="≥ 99% to, × the training length",
        title="How far each method extrapolates from how little",
    )
    ax.set_xticklabels(map(str, SWEEP))
    ax.set_yticklabels(["none", *(f"{t:g}×" for t in ticks[1:])])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    args = parser(__doc__)
    commands = args.add_subparsers(dest="command", required=True)
    commands.add_parser("table", help="the page's tables from the records")
    commands.add_parser("plot", help="the sweep as a figure").add_argument("png")
    one = commands.add_parser("run", help="train and test one cell")
    one.add_argument("task", choices=TASKS)
    one.add_argument("method", choices=("abc", *SHAPES))
    one.add_argument("seed")
    one.add_argument("digits", type=int, nargs="?", default=POOL)
    given = args.parse_args()
    if given.command == "table":
        call(grid_table, records())
        print()
        call(sweep_table, abc_at_pool() + records())
    elif given.command == "plot":
        call(lambda: sweep_plot(abc_at_pool() + records()).savefig(given.png, dpi=120))
    else:
        call(run, given.task, given.method, given.seed, given.digits)
