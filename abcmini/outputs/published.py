"""Published length generalization on variable-length multi-digit addition: the anchors that
``report`` and ``dashboard`` set beside the ``long`` recipe's results. Each holds its number as
the authors state it, its source and its own protocol (training length, test length), which is
not ours: these train on longer numbers and test without a fixed frame. Randomized positions
(Ruoss et al. 2023) have none: that paper tests formal-language and binary tasks, not decimal
addition.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Anchor:
    method: str
    scheme: str  # abcmini's ``--method`` scheme for it, whose rows the report sets beside it
    source: str
    task: str
    trained_digits: int
    tested_digits: int
    accuracy: str  # as the authors state it
    family: str | None = None  # the stress family (abcmini.stress) whose test this is, if one is

    @property
    def ratio(self) -> float:
        return self.tested_digits / self.trained_digits


ANCHORS = (
    Anchor(
        "Abacus embeddings",
        "abacus",
        "McLeish et al. 2024, arXiv:2405.17399",
        "addition",
        20,
        100,
        "up to 99%",
    ),
    Anchor(
        "Position Coupling",
        "coupling",
        "Cho et al. 2024, arXiv:2405.20671",
        "addition",
        30,
        200,
        "> 95%",
    ),
    Anchor(
        "FIRE + randomized positions + index hints",
        "fire",
        "Zhou et al. 2024, arXiv:2402.09371",
        "addition",
        40,
        100,
        "> 98%",
    ),
)


STRESS_ANCHORS = (  # published N×M figures, each beside the stress family that is its test
    Anchor(
        "multi-level Position Coupling",
        "coupling",
        'Cho et al. 2025, ICLR ("Arithmetic Transformers Can Length-Generalize in Both Operand '
        'Length and Count")',
        "multiply",
        10,
        14,
        "a median 97.65% over their seeds",
        family="both_long",
    ),
)


def comparisons(task: str, lengths) -> list[str]:
    """What a published figure measures beside a stress family of ``task`` tested at one of
    ``lengths``, so a table that shows the family can say how the two compare."""
    return [
        f"{a.family} at {a.tested_digits} digits is the test of a published figure: {a.source} "
        f"report {a.accuracy} on {a.tested_digits}×{a.tested_digits}-digit products, training on "
        f"factors of 1–{a.trained_digits} digits, on a test set of their own"
        for a in STRESS_ANCHORS
        if a.task == task and a.tested_digits in lengths
    ]
