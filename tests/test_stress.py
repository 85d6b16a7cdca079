"""The stress families (``abcmini.stress``): each family's inputs are what its name says, read as
Python integers, and the answers ``format_task`` writes for them are right by Python integers;
``eval --stress`` scores a shipped checkpoint on its task's families and records them."""

import json
import math
import os
import shutil

import pytest
from typer.testing import CliRunner

from abcmini.outputs.dashboard import cell_html
from abcmini.outputs.report import stress_table
from abcmini.stress import FAMILIES, SIZE, families, stress_operands
from abcmini.tasks import EOS, PLUS, format_task, operand_count
from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENGTHS = (2, 3, 7, 12, 30)


def number(digits) -> int:
    return int("".join(map(str, digits.tolist())))


def numbers(task: str, a, b) -> list[tuple]:
    """Each input as Python integers: ``(a, b)``, ``(a,)`` or multiadd's operands."""
    if task == "multiadd":
        return [tuple(number(row) for row in operands) for operands in a]
    if b is None:
        return [(number(row),) for row in a]
    if b.dim() == 1:
        return [(number(row), int(m)) for row, m in zip(a, b)]
    return [(number(x), number(y)) for x, y in zip(a, b)]


def answer(target) -> int:
    """The final number of a formatted target (after the last separator), its digits reversed."""
    tokens = target.tolist()
    tokens = tokens[: tokens.index(EOS)]
    while tokens and tokens[-1] == PLUS:  # multiply's last block ends with its separator
        tokens = tokens[:-1]
    if PLUS in tokens:
        tokens = tokens[len(tokens) - tokens[::-1].index(PLUS) :]
    return int("".join(map(str, reversed(tokens))))


def carries_from_units(x: int, y: int) -> int:
    """How many columns in a row, from the units up, carry out when ``x + y`` is added."""
    run, carry = 0, 0
    while x or y:
        carry = (x % 10 + y % 10 + carry) // 10
        if not carry:
            break
        run, x, y = run + 1, x // 10, y // 10
    return run


def columns_sum_to_nine_over_a_carry(length: int, operands: tuple[int, ...]) -> bool:
    """Every column above the units sums to 9, the units to 10 … 19: a carry through them all."""
    column = [sum(x // 10**c % 10 for x in operands) for c in range(length)]
    return 10 <= column[0] <= 19 and column[1:] == [9] * (length - 1) and max(operands) < 10**length


def width(x: int) -> int:
    return len(str(x))


def half_zeros(x: int, length: int) -> bool:
    return width(x) == length and "0" * math.ceil(length / 2) in str(x)


RIGHT = {  # the result of each task by Python integers
    "successor": lambda a: a + 1,
    "addition": lambda a, b: a + b,
    "nx1": lambda a, b: a * b,
    "multiply": lambda a, b: a * b,
    "multiadd": lambda *operands: sum(operands),
}
NAMED = {  # (task, family) → what the family's name says of one input at length L
    ("successor", "carry_chain"): lambda L, a: str(a).endswith("9" * (L - L // 2)),
    ("successor", "top_digits"): lambda L, a: width(a) == L and set(str(a)) <= set("89"),
    ("successor", "zero_runs"): lambda L, a: half_zeros(a, L),
    ("addition", "carry_chain"): lambda L, a, b: carries_from_units(a, b) >= L - L // 2,
    ("addition", "top_digits"): lambda L, a, b: all(
        width(x) == L and set(str(x)) <= set("89") for x in (a, b)
    ),
    ("addition", "zero_runs"): lambda L, a, b: half_zeros(a, L) and half_zeros(b, L),
    ("addition", "very_unequal"): lambda L, a, b: (
        max(width(a), width(b)) == L and min(width(a), width(b)) <= math.ceil(L / 4)
    ),
    ("addition", "identity"): lambda L, a, b: width(a) == L and b == 0,
    ("nx1", "top_digits"): lambda L, a, b: set(str(a)) <= set("89") and b in (8, 9),
    ("nx1", "multiplier_9"): lambda L, a, b: width(a) == L and b == 9,
    ("nx1", "zero_runs"): lambda L, a, b: half_zeros(a, L) and b > 0,
    ("nx1", "identity"): lambda L, a, b: width(a) == L and b == 1,
    ("nx1", "absorbing"): lambda L, a, b: width(a) == L and b == 0,
    ("multiply", "both_long"): lambda L, a, b: width(a) == L and width(b) == L,
    ("multiply", "top_digits"): lambda L, a, b: all(
        width(x) == L and set(str(x)) <= set("89") for x in (a, b)
    ),
    ("multiply", "nines_multiplier"): lambda L, a, b: width(a) == L and b == 10**L - 1,
    ("multiply", "zero_runs"): lambda L, a, b: half_zeros(a, L) and half_zeros(b, L),
    ("multiply", "very_unequal"): lambda L, a, b: (
        max(width(a), width(b)) == L and min(width(a), width(b)) <= math.ceil(L / 4)
    ),
    ("multiply", "identity"): lambda L, a, b: width(a) == L and b == 1,
    ("multiply", "absorbing"): lambda L, a, b: width(a) == L and b == 0,
    ("multiadd", "all_nines"): lambda L, *x: (
        len(x) == operand_count(L) and all(v == 10**L - 1 for v in x)
    ),
    ("multiadd", "carry_chain"): lambda L, *x: (
        len(x) == operand_count(L) and columns_sum_to_nine_over_a_carry(L, x)
    ),
    ("multiadd", "top_digits"): lambda L, *x: (
        len(x) == operand_count(L) and all(width(v) == L and set(str(v)) <= set("89") for v in x)
    ),
    ("multiadd", "zero_runs"): lambda L, *x: (
        len(x) == operand_count(L) and all(half_zeros(v, L) for v in x)
    ),
    ("multiadd", "very_unequal"): lambda L, *x: (
        len(x) == operand_count(L)
        and sorted(width(v) == L for v in x) == [False] * (len(x) - 1) + [True]
        and all(v < 10 for v in x if width(v) < L)
    ),
    ("multiadd", "one_operand"): lambda L, *x: len(x) == 1 and width(x[0]) == L,
    ("multiadd", "many_operands"): lambda L, *x: (
        len(x) == 2 * operand_count(L) and all(width(v) == L for v in x)
    ),
}
CASES = [(task, family.name) for task in FAMILIES for family in FAMILIES[task]]


def test_every_family_has_its_check():
    assert sorted(CASES) == sorted(NAMED)


@pytest.mark.parametrize("task,name", CASES)
def test_a_familys_inputs_are_what_its_name_says_and_its_answers_are_right(task, name):
    family = next(f for f in families(task) if f.name == name)
    for length in LENGTHS:
        a, b = stress_operands(task, family, length, seed=0, n=200)
        inputs = numbers(task, a, b)
        wrong = [x for x in inputs if not NAMED[task, name](length, *x)]
        assert not wrong, (length, wrong[:3])
        example = format_task(task, a, b, length + 3)
        answers = [answer(target) for target in example.tgt_out]
        assert answers == [RIGHT[task](*x) for x in inputs], length
        again = stress_operands(task, family, length, seed=0, n=200)
        assert all((x == y).all() for x, y in zip(again, (a, b)) if x is not None)  # seeded


def test_a_family_is_not_the_random_test():
    """Most random 7-digit additions carry through no more than a few columns; every input of
    ``carry_chain`` carries through four or more."""
    from abcmini.tasks import extrapolation_operands

    a, b = extrapolation_operands("addition", 7, 0)
    random = [carries_from_units(x, y) for x, y in numbers("addition", a[:1000], b[:1000])]
    assert sum(run >= 4 for run in random) < 100


@pytest.mark.integration  # scores a shipped checkpoint: the second tier
def test_eval_stress_scores_a_shipped_multiply_checkpoint(tmp_path, monkeypatch):
    """The record holds every family at the length; the report, the dashboard and the wandb run
    (offline) show them."""
    from abcmini.outputs.wandb_files import offline_runs

    monkeypatch.setenv("WANDB_MODE", "offline")  # the tests' default is disabled
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    run = tmp_path / "root" / "multiply" / "abc-s0"
    shutil.copytree(os.path.join(ROOT, "results", "checkpoints", "multiply", "abc-s0"), run)
    result = CliRunner().invoke(app, ["eval", str(run), "--stress", "--lengths", "4"])
    assert result.exit_code == 0, result.output
    record = json.loads((run / "eval.json").read_text())
    assert set(record["stress"]) == {f.name for f in families("multiply")}
    assert record["stress_size"] == SIZE and all(
        0 <= by_length["4"] <= 1 for by_length in record["stress"].values()
    )
    assert "nines_multiplier" in result.output
    tables = [
        row["stress"] for r in offline_runs(str(tmp_path)) for row in r.history if "stress" in row
    ]
    assert len(tables) == 1 and tables[0]["_type"] == "table-file", tables
    root = str(tmp_path / "root")
    for command in (["report", root], ["dashboard", root, "--out", str(tmp_path / "d.html")]):
        assert CliRunner().invoke(app, command).exit_code == 0
    page = (tmp_path / "root" / "report.md").read_text()
    assert "## Stress families" in page and "| nines_multiplier | nope+abc | 0 |" in page
    assert "nines_multiplier" in (tmp_path / "d.html").read_text()


def test_the_stress_table_keeps_runs_of_another_training_draw_apart_from_the_seeds():
    """A run trained with single operands too (``--min-operands 1``) is its own row, never a
    seed of the protocol's: pooled, the median would hide which draw made which figure."""

    def run(seed, fewest, score):
        by = {"one_operand": {"7": score}}
        return {"task": "multiadd", "method": "nope+abc", "seed": seed, "stress": by} | (
            {"min_operands": fewest} if fewest != 2 else {}
        )

    table = stress_table([run(0, 2, 0.0), run(1, 2, 0.0), run(0, 1, 1.0)])
    assert "| one_operand | nope+abc | 0, 1 | 0.00 [0.00–0.00] |" in table
    assert "| one_operand | nope+abc, 1+ operands in training | 0 | 100.00 |" in table


@pytest.mark.parametrize(
    "draw, words",
    [
        ({"top_share": 0.25}, "25% top-heavy draw"),
        ({"min_operands": 1}, "1+ operands in training"),
        ({"operand_order": "reversed"}, "reversed operands"),
        ({"index_hints": 64}, "index hints"),
        ({"batch_lengths": "mixed"}, "lengths mixed in a batch"),
        ({"fire_positions": "randomized"}, "FIRE over randomized positions"),
    ],
)
def test_a_run_of_another_draw_is_never_pooled_as_a_seed_of_the_recipes_run(draw, words):
    """Seed 2 retrained with another training draw or input format (``--top-share 0.25``,
    ``--index-hints``, ...) is another protocol: the report's pooled tables keep the recipe's seed
    2 and name the other run as left out, with its draw, whichever comes first."""
    from abcmini.outputs.report import pool

    def run(seed, other):
        name = f"abc-s{seed}" + ("-other" if other else "")
        record = {"task": "successor", "method": "nope+abc", "seed": seed, "run": name}
        return record | (draw if other else {})

    records = [run(2, False), run(2, True), run(1, False)]
    for order in (records, records[::-1]):
        kept, left_out = pool(order)
        assert sorted(r["run"] for r in kept) == ["abc-s1", "abc-s2"]
        assert [name for name, _ in left_out] == ["abc-s2-other"]
        assert f"{words}, not recipe" in left_out[0][1]


def test_a_family_that_is_a_published_test_says_how_the_two_compare():
    """``both_long`` at 14 digits is the published 14×14 test: the table names the published
    figure and how ours was made (training lengths, inputs per seed, seeds); at other lengths it
    says nothing."""

    def run(seed, lengths):
        by = {"both_long": {str(n): 0.97 for n in lengths}}
        return {"task": "multiply", "method": "nope+abc", "seed": seed, "stress": by} | {
            "train_digits": 4,
            "stress_size": SIZE,
        }

    table = stress_table([run(0, (4, 14)), run(1, (4, 14))])
    assert "both_long at 14 digits is the test of a published figure: Cho et al. 2025" in table
    assert "97.65%" in table and "training on factors of 1–10 digits" in table
    assert "Here: trained on numbers of 1–4 digits, 1,000 inputs per seed" in table
    assert "over the seeds a row names (0, 1)." in table
    assert "published" not in stress_table([run(0, (4, 8))])
    record = run(0, (4, 14)) | {"run": "nowhere", "accuracy": {"4": 1.0}, "train_steps": 1}
    shown, _ = cell_html(record, True)  # the dashboard's cell of the run
    assert (
        "Cho et al. 2025" in shown
        and "1–4 digits, 1,000 inputs per seed and length, seed 0." in shown
    )
