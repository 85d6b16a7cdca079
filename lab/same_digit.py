"""Rule ``same_digit`` on the recipes' Addition cells: docs/recipe.md, "`same_digit` on the
recipes' Addition cells".

``results/experiments/same-digit`` holds, per recipe and seed, ``RECIPE-addition-abc-sSEED.json``
(the cell with the rule: ``abcmini train --recipe RECIPE --task addition --method abc --seed
SEED --rules all,same_digit``) and, where it ran, ``…-without-rule.json`` (the same source,
copied into a run directory of its own, calibrated without the rule and retrained: the cell's
command with ``--out DIR``). ``python lab/same_digit.py table`` prints the page's table: the
cross lines the rule opens and closes (from the records' ``lines``), the steps, and exact match
with the rule, without it on the same source, and in the recipe's own record (trained at an
earlier commit, before the rule).
"""

import glob
import json
import os
import re

from parse import call, parser  # lab/parse.py

OUT = os.path.join("results", "experiments", "same-digit")
PARTS = {"1": "a", "3": "b"}  # Addition's input segments: $ a + b


def open_lines(record: dict) -> set:
    """``(head, operand, line)`` of every open cross anti-diagonal: the union the bias applies."""
    found = set()
    for entry in record["lines"]:
        match = re.fullmatch(r"cross Δ = -1, segment (\d+) h(\d+): (.+)", entry)
        if match:
            found |= {(int(match[2]), PARTS[match[1]], int(line)) for line in match[3].split(",")}
    return found


def named(lines: set) -> str:
    return ", ".join(f"h{head} {operand}{line}" for head, operand, line in sorted(lines)) or "none"


def at(record: dict | None, length: str) -> str:
    value = (record or {}).get("accuracy", {}).get(length)
    return "–" if value is None else f"{100 * value:.2f}"


def lowest(record: dict | None) -> str:
    """The lowest exact match up to 200 digits: where a record is below 100 inside 500."""
    values = [v for n, v in (record or {}).get("accuracy", {}).items() if int(n) <= 200]
    return f"{100 * min(values):.2f}" if values else "–"


def table() -> None:
    print(
        "| recipe | seed | lines the rule opens | closes | source steps | retraining steps, with / without "
        "| lowest at 6–200, with / without | 500, with | 500, without | 500, the record |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(OUT, "*-addition-abc-s[0-9].json"))):
        rule = json.load(open(path))
        without_path = path.replace(".json", "-without-rule.json")
        without = json.load(open(without_path)) if os.path.exists(without_path) else None
        cell = os.path.join(
            "results", rule["recipe"], "addition", f"abc-s{rule['seed']}", "eval.json"
        )
        record = json.load(open(cell))
        opens, closes = (
            ("–", "–")
            if without is None
            else (
                named(open_lines(rule) - open_lines(without)),
                named(open_lines(without) - open_lines(rule)),
            )
        )
        steps = f"{rule['train_steps']:,} / " + (f"{without['train_steps']:,}" if without else "–")
        print(
            f"| `{rule['recipe']}` | {rule['seed']} | {opens} | {closes} | {rule['interpolation_steps']:,} | {steps} "
            f"| {lowest(rule)} / {lowest(without)} | {at(rule, '500')} | {at(without, '500')} | {at(record, '500')} |"
        )


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_subparsers(dest="command", required=True).add_parser("table", help="the table")
    args.parse_args()
    call(table)
