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
