"""Stress families: inputs that random sampling almost never draws, each aimed at one way a task's
arithmetic is hard — a carry that runs the whole number, digits from the top of the range (a
carry at every column), runs of zeros, operands of very unequal length, identity and absorbing
operands, operand counts outside the trained range. ``abcmini eval RUN --stress`` scores a run
on its task's families at its test lengths: ``SIZE`` inputs each, seeded by the test seed, in
the run's test frame, scored by exact match as the random test is.

A family builds operands in the form ``tasks.format_task`` takes (digits most significant first;
N×1's multiplier one digit; multiadd's ``[n k w]``). Parity has no family: its hard inputs are
bit patterns that its digits do not choose.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from einops import rearrange

from abcmini.tasks import operand_count, random_numbers

SIZE = 1000  # inputs per family and length


@dataclass(frozen=True)
class Family:
    name: str
    targets: str  # the way the task is hard that it aims at, in a few words
    build: Callable  # build(length, n, generator) -> operands for format_task


def exact(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``[n length]`` random numbers of exactly ``length`` digits."""
    return random_numbers(n, length, generator, length)


def top_digits(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``[n length]`` numbers whose every digit is 8 or 9: a carry out of every column."""
    return 8 + torch.randint(2, (n, length), generator=generator)


def nines(n: int, length: int) -> torch.Tensor:
    return torch.full((n, length), 9, dtype=torch.long)


def zero_runs(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Numbers of exactly ``length`` digits with a run of ``⌈length/2⌉`` zeros after the lead
    (at a random place): a digit that reads the same token for many columns."""
    a = exact(n, length, generator)
    run = -(-length // 2)
    if length < 2:
        return a
    start = torch.randint(1, max(2, length - run + 1), (n, 1), generator=generator)
    column = rearrange(torch.arange(length), "w -> 1 w")
    return torch.where((column >= start) & (column < start + run), 0, a)


def chain_start(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``[n 1]``: the column a carry chain runs up to, in the number's upper half (0 … ⌊L/2⌋)."""
    return torch.randint(0, length // 2 + 1, (n, 1), generator=generator)


def successor_chain(length: int, n: int, generator: torch.Generator):
    """``a`` ending in a run of nines from a column of the upper half on (all nines at times):
    ``a + 1`` carries through half the number or more."""
    a, start = exact(n, length, generator), chain_start(n, length, generator)
    column = rearrange(torch.arange(length), "w -> 1 w")
    a = torch.where(column >= start, 9, a)
    before = (column == start - 1) & (a == 9)  # the digit before the run stops the carry
    return torch.where(before, 8, a), None


def addition_chain(length: int, n: int, generator: torch.Generator):
    """``a + b`` whose digits sum to 9 from a column of the upper half to the units, where they
    sum to 10 or more: one carry runs from the units through every one of those columns."""
    a, start = exact(n, length, generator), chain_start(n, length, generator)
    a[:, -1] = torch.randint(1, 10, (n,), generator=generator)
    b = exact(n, length, generator)
    column = rearrange(torch.arange(length), "w -> 1 w")
    b = torch.where(column >= start, 9 - a, b)
    b[:, -1] = 10 - a[:, -1] + torch.randint(0, 10, (n,), generator=generator) % a[:, -1]
    return a, b


def very_unequal(length: int, n: int, generator: torch.Generator):
    """One operand of ``length`` digits, the other of 1 … ⌈L/4⌉, either side."""
    long, short = exact(n, length, generator), random_numbers(n, -(-length // 4), generator)
    short = torch.nn.functional.pad(short, (length - short.shape[1], 0))
    swap = rearrange(torch.rand(n, generator=generator) < 0.5, "n -> n 1")
    return torch.where(swap, short, long), torch.where(swap, long, short)


def digit(n: int, value: int | None, generator: torch.Generator, low: int = 0) -> torch.Tensor:
    """``[n]`` multipliers of N×1: ``value``, or drawn from ``low`` … 9."""
    if value is None:
        return torch.randint(low, 10, (n,), generator=generator)
    return torch.full((n,), value, dtype=torch.long)


def constant(n: int, length: int, value: int) -> torch.Tensor:
    """``[n length]``: the number ``value`` (0 or 1) in ``length`` digits."""
    out = torch.zeros(n, length, dtype=torch.long)
    out[:, -1] = value
    return out


def operands(count: int, length: int, n: int, make) -> torch.Tensor:
    """``[n count length]``: ``count`` operands each made by ``make(rows)``."""
    return rearrange(make(n * count), "(n k) w -> n k w", k=count)


def one_long(length: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """Multiadd: one operand of ``length`` digits (at a random place), the others of one digit."""
    count = operand_count(length)
    a = operands(count, length, n, lambda rows: constant(rows, length, 0))
    a[..., -1] = torch.randint(10, (n, count), generator=generator)
    place = torch.randint(count, (n,), generator=generator)
    a[torch.arange(n), place] = exact(n, length, generator)
    return a


def column_chain(length: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """Multiadd: ``operand_count(length)`` operands whose digits, drawn from the whole range, sum
    to 9 in every column above the units, where two of them sum to 10 or more: one carry runs
    from the units through every column, though no column holds the 8s and 9s of ``top_digits``
    (or of the top-heavy training draw)."""
    count = operand_count(length)
    balls = torch.randint(count, (n, length, 9), generator=generator)  # 9 split among operands
    a = rearrange(torch.nn.functional.one_hot(balls, count).sum(2), "n w k -> n k w")
    a[..., -1] = 0
    first = torch.randint(1, 10, (n,), generator=generator)
    a[:, 0, -1] = first
    a[:, 1, -1] = 10 - first + torch.randint(0, 10, (n,), generator=generator) % first
    return a


FAMILIES = {
    "successor": (
        Family("carry_chain", "a carry through half the number or more", successor_chain),
        Family("top_digits", "digits 8 and 9 only", lambda L, n, g: (top_digits(n, L, g), None)),
        Family("zero_runs", "a run of L/2 zeros", lambda L, n, g: (zero_runs(n, L, g), None)),
    ),
    "addition": (
        Family("carry_chain", "one carry through half the columns or more", addition_chain),
        Family(
            "top_digits",
            "both operands of 8s and 9s: a carry out of every column",
            lambda L, n, g: (top_digits(n, L, g), top_digits(n, L, g)),
        ),
        Family(
            "zero_runs",
            "both operands with a run of L/2 zeros",
            lambda L, n, g: (zero_runs(n, L, g), zero_runs(n, L, g)),
        ),
        Family("very_unequal", "one operand of at most L/4 digits", very_unequal),
        Family("identity", "b = 0", lambda L, n, g: (exact(n, L, g), constant(n, L, 0))),
    ),
    "nx1": (
        Family(
            "top_digits",
            "a of 8s and 9s times 8 or 9: a carry of 7 or 8 at every digit",
            lambda L, n, g: (top_digits(n, L, g), digit(n, None, g, low=8)),
        ),
        Family("multiplier_9", "b = 9", lambda L, n, g: (exact(n, L, g), digit(n, 9, g))),
        Family(
            "zero_runs",
            "a with a run of L/2 zeros",
            lambda L, n, g: (zero_runs(n, L, g), digit(n, None, g, low=1)),
        ),
        Family("identity", "b = 1", lambda L, n, g: (exact(n, L, g), digit(n, 1, g))),
        Family(
            "absorbing", "b = 0: the answer is 0", lambda L, n, g: (exact(n, L, g), digit(n, 0, g))
        ),
    ),
    "multiply": (
        Family(
            "both_long",
            "both factors of L digits: the most rows, each of the most digits",
            lambda L, n, g: (exact(n, L, g), exact(n, L, g)),
        ),
        Family(
            "top_digits",
            "both of 8s and 9s: carries of up to 8 in every row",
            lambda L, n, g: (top_digits(n, L, g), top_digits(n, L, g)),
        ),
        Family(
            "nines_multiplier",
            "b = 99…9: every row adds a full carry",
            lambda L, n, g: (exact(n, L, g), nines(n, L)),
        ),
        Family(
            "zero_runs",
            "both with a run of L/2 zeros",
            lambda L, n, g: (zero_runs(n, L, g), zero_runs(n, L, g)),
        ),
        Family("very_unequal", "one factor of at most L/4 digits", very_unequal),
        Family("identity", "b = 1", lambda L, n, g: (exact(n, L, g), constant(n, L, 1))),
        Family(
            "absorbing",
            "b = 0: every row is 0",
            lambda L, n, g: (exact(n, L, g), constant(n, L, 0)),
        ),
    ),
    "multiadd": (
        Family(
            "all_nines",
            "every operand 99…9: the running sum grows by its width's carry each block",
            lambda L, n, g: (operands(operand_count(L), L, n, lambda r: nines(r, L)), None),
        ),
        Family(
            "carry_chain",
            "one carry through every column, each column's digits summing to 9",
            lambda L, n, g: (column_chain(L, n, g), None),
        ),
        Family(
            "top_digits",
            "every operand of 8s and 9s",
            lambda L, n, g: (operands(operand_count(L), L, n, lambda r: top_digits(r, L, g)), None),
        ),
        Family(
            "zero_runs",
            "every operand with a run of L/2 zeros",
            lambda L, n, g: (operands(operand_count(L), L, n, lambda r: zero_runs(r, L, g)), None),
        ),
        Family(
            "very_unequal",
            "one operand of L digits, the others of one",
            lambda L, n, g: (one_long(L, n, g), None),
        ),
        Family(
            "one_operand",
            "a single operand: fewer than any training input",
            lambda L, n, g: (operands(1, L, n, lambda r: exact(r, L, g)), None),
        ),
        Family(
            "many_operands",
            "twice the operands of the length's test",
            lambda L, n, g: (operands(2 * operand_count(L), L, n, lambda r: exact(r, L, g)), None),
        ),
    ),
}


def families(task: str) -> tuple[Family, ...]:
    """The stress families of ``task`` (none for parity)."""
    return FAMILIES.get(task, ())


def stress_operands(task: str, family: Family, length: int, seed: int, n: int = SIZE):
    """``family``'s ``n`` operands at ``length``, seeded by ``seed``, the family and the length."""
    salt = sum(map(ord, family.name)) * 7919
    generator = torch.Generator().manual_seed(seed * 1_000_003 + length * 101 + salt)
    return family.build(length, n, generator)
