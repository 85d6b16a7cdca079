"""Today's methods on one protocol, fair to all: the tables and the figure of
docs/todays-methods.md, "One protocol", from its records.

The runs are the product's: ``abcmini sweep sweeps/common-protocol.yaml`` (each method in its
own paper's shape with at least ABC's budget, ``recipes/common-protocol.yaml``) and
``sweeps/common-protocol-lengths.yaml`` (trained on up to 15 and 30 digits). The records under
``results/experiments/common-protocol`` (``TASK-METHOD[-uniform|-trainDIGITS]-sSEED.json``) were
made before the recipe, by a driver that doubled a step cap and restarted the schedule for runs
that had not converged; each record's ``command`` and ``train_steps`` say how it ran.

``python lab/common_protocol.py table``: the page's tables from those records, and a third from
the cells the recipes ran themselves (``results/common-protocol``, ``-tables``, ``-authors``);
``python lab/common_protocol.py plot PNG``: the length sweep as a figure (``sweep_plot``).
"""

import glob
import itertools
import json
import os
import re
import statistics

from matplotlib.figure import Figure  # no pyplot: no backend, no global figure state
from parse import call, parser  # lab/parse.py

from abcmini.config import (
    POOL_DIGITS as POOL,
)  # the pool's longest number: the recipes' training length
from abcmini.experiment import Cell, resolve
from abcmini.outputs.method_views import on_a_gpu
from abcmini.outputs.report import draw_notes, held_to, reach
from abcmini.recipes import load_recipe
from abcmini.sweep import expand, load_sweep

OUT = os.path.join("results", "experiments", "common-protocol")
LENGTHS = (6, 10, 20, 60, 100, 200, 500)  # the long protocol's
METHODS = ("random+varied", "fire+varied", "abacus+varied", "coupling+varied")
TASKS = ("successor", "addition", "nx1")
SWEEP = (7, 15, 30)  # the training lengths of the sweep (Addition)
RECIPES = ("common-protocol", "common-protocol-tables", "common-protocol-authors")
GRIDS = (  # the sweeps whose cells the third table shows, run or not
    "common-protocol-seeds",
    "common-protocol-tables",
    "common-protocol-authors",
)
RECIPE_LENGTHS = (7, 10, 14, 20, 35, 60)  # to the longest a 64-id table holds
NONE = 0.1  # where the sweep's plot puts a seed that holds no tested length at 99%


def cell(values: list[float]) -> str:
    """Median [range] in %, over the seeds that were tested at a length."""
    median = 100 * statistics.median(values)
    return (
        f"{median:.2f}"
        if len(values) == 1
        else f"{median:.2f} [{100 * min(values):.2f}–{100 * max(values):.2f}]"
    )


def by_length(runs: list[dict], lengths) -> list[str]:
    """Each length's median [range] over the runs tested there ("–": none was)."""
    tested = [[r["accuracy"][str(n)] for r in runs if str(n) in r["accuracy"]] for n in lengths]
    return [cell(values) if values else "–" for values in tested]


def rerun(record: dict) -> dict | None:
    """The recipe's own run of a 7-digit cell the driver restarted past its cap (its record
    trained more steps than ``recipes/common-protocol.yaml`` allows), where it has one: one
    schedule, never restarted."""
    cell = Cell(record["task"], record["method"], record["seed"])
    cap = resolve(load_recipe(os.path.join("recipes", "common-protocol.yaml")), cell).run.steps
    path = os.path.join("results", "common-protocol", record["task"], f"{cell.method}-s{cell.seed}")
    redone = os.path.join(path, "eval.json")
    if record["train_steps"] <= cap or not os.path.exists(redone):
        return None
    return {**json.load(open(redone)), **{k: record[k] for k in ("method", "digits", "numbers")}}


def records() -> list[dict]:
    """The records in ``OUT``, each with its cell from the file name (``method``, ``digits``,
    ``numbers``, ``seed``); a 7-digit cell the driver restarted, by its ``rerun`` if it has one."""
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
    return [(r["numbers"] == "uniform" and r["digits"] == POOL and rerun(r)) or r for r in found]


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
    for task, method, numbers in itertools.product(TASKS, METHODS, ("pool", "uniform")):
        runs = [
            r
            for r in found
            if (r["task"], r["method"], r["numbers"], r["digits"]) == (task, method, numbers, POOL)
        ]
        if not runs:
            continue
        middle = sorted(runs, key=lambda r: r["train_steps"])[len(runs) // 2]
        print(
            f"| {task} | `{method}` | {numbers} | {runs[0]['shape']} | {len(runs)} | "
            + " | ".join(by_length(runs, LENGTHS))
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


def procedure(runs: list[dict]) -> str:
    """Which procedure made an ABC row: rule same_digit on or off. The 7-digit records predate
    recorded rules and the rule (commit 9f4d0a4); every record naming ``all`` postdates it."""
    rules = {(r.get("calibration") or {}).get("rules") for r in runs}
    on = {rule is not None and ("same_digit" in rule or rule == "all") for rule in rules}
    return f" (same_digit {'on' if on == {True} else 'off' if on == {False} else 'mixed'})"


def sweep_table(found: list[dict]) -> None:
    print(
        "| method | trained on | seeds | ≥ 99% to, per seed (× training length) | ≥ 90% to | examples (M) |"
    )
    print("|---|---|---|---|---|---|")
    for method in ("abc", *METHODS):
        for digits in SWEEP:
            runs = sweep_runs(found, method, digits)
            if not runs:
                continue
            spans = [
                " / ".join(reach(r["accuracy"], at, digits) for r in runs) for at in (0.99, 0.90)
            ]
            named = f"`{method}`" + (procedure(runs) if method == "abc" else "")
            print(
                f"| {named} | 1–{digits} | {len(runs)}{on_a_gpu(runs)} | {spans[0]} | {spans[1]} | "
                f"{statistics.median(r['train_examples'] + (r.get('interpolation_examples') or 0) for r in runs) / 1e6:.2f} |"
            )


def recipe_records(first: list[dict]) -> list[dict]:
    """The cells the recipes ran: ``results/RECIPE/TASK/METHOD-sSEED/eval.json``, but the reruns
    the first table (``first``) already holds."""
    shown = {r["commit"] + r["command"] for r in first}
    found = [
        {**json.load(open(path)), "root": path.split(os.sep)[1]}
        for recipe in RECIPES
        for path in sorted(glob.glob(os.path.join("results", recipe, "*", "*", "eval.json")))
    ]
    return [r for r in found if r["commit"] + r["command"] not in shown]


def planned() -> dict[tuple, set[int]]:
    """The third table's cells as its sweeps (``GRIDS``) lay them out: (recipe, task, method) →
    the seeds they run."""
    grid = {}
    for name in GRIDS:
        for run in expand(load_sweep(os.path.join("sweeps", f"{name}.yaml"))):
            recipe = os.path.basename(run["recipe"]).removesuffix(".yaml")
            grid.setdefault((recipe, run["task"], run["method"]), set()).add(run["seed"])
    return grid


def recipe_table(found: list[dict], grid: dict[tuple, set[int]]) -> None:
    """One row a recipe, task and method: exact match by length, median [range] over seeds; "k
    of n" seeds where the sweeps (``grid``) plan more than ran, "not run" where none did."""
    print(
        "| recipe | task | method | shape | seeds | "
        + " | ".join(map(str, RECIPE_LENGTHS))
        + " | ≥ 90% to, per seed | steps | examples (M) |"
    )
    print("|---|---|---|---|---|" + "---|" * len(RECIPE_LENGTHS) + "---|---|---|")
    for key in itertools.product(RECIPES, TASKS, METHODS):
        runs = [r for r in found if (r["root"], r["task"], r["method"]) == key]
        seeds = len(grid.get(key, set()) | {r["seed"] for r in runs})
        count = f"{len(runs)} of {seeds}" if len(runs) < seeds else f"{len(runs)}"
        recipe, task, method = key
        if not runs:
            if seeds:
                print(
                    f"| `{recipe}` | {task} | `{method}` | | not run |"
                    + " |" * (len(RECIPE_LENGTHS) + 3)
                )
            continue
        middle = sorted(runs, key=lambda r: r["train_steps"])[len(runs) // 2]
        shape = ", ".join(filter(None, (runs[0]["shape"], *draw_notes(runs[0]))))
        print(
            f"| `{recipe}` | {task} | `{method}` | {shape} | {count} | "
            + " | ".join(by_length(runs, RECIPE_LENGTHS))
            + f" | {' / '.join(reach(r['accuracy'], 0.90) for r in runs)} | "
            f"{middle['train_steps']:,} | {middle['train_examples'] / 1e6:.2f} |"
        )


def sweep_plot(found: list[dict]) -> Figure:
    """Extrapolation ratio (the longest length held at 99%, over the training length) against
    the training length: a line through each method's medians, its seeds as dots. A seed that
    holds only lengths below its training length sits below 1×; one that holds none, on the
    "none" row."""
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for i, method in enumerate(("abc", *METHODS)):
        runs = {d: sweep_runs(found, method, d) for d in SWEEP}
        trained = [d for d in SWEEP if runs[d]]
        if not trained:
            continue
        ratios = [[held_to(r["accuracy"], 0.99) / d or NONE for r in runs[d]] for d in trained]
        shifted = [
            d * 1.04 ** (i - len(METHODS) / 2) for d in trained
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
    given = args.parse_args()
    if given.command == "table":
        call(grid_table, records())
        print()
        call(sweep_table, abc_at_pool() + records())
        print()
        call(recipe_table, recipe_records(records()), planned())
    else:
        call(lambda: sweep_plot(abc_at_pool() + records()).savefig(given.png, dpi=120))
