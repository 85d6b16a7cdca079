"""The rules abcmini's ABC adds to the paper's Algorithm 1, each with the reason for it in one
line (docs/recipe.md has the measurements). Plain data, no torch: the command line checks a
rule's name before it loads anything.
"""

RULES = {  # each rule beyond Algorithm 1, on in abcmini's procedure: name → why
    "unite_layers": "every decoder layer calibrated, their lines united: a small model splits the algorithm between layers",
    "directions": "cross (−1, 0), self (1, 0): cross Δ = +1 reads leading zeros, a self anti-diagonal marks the length",
    "operand_lines": "cross lines counted from each input part's last digit, not the corner: on their operand in any frame",
    "support": "extend only lines crossing min_support of the trusted rows and the last row: a corner cell is noise",
    "padding": "no line on padding, no vertical on a column padded in any input: both mark the training length",
    "marker_verticals": "verticals only on one-token parts ($, operator, multiplier, SOS): the same token at every length",
    "causal": "a self line must cross min_support of the cells the causal mask lets a row attend to",
    "skip_start": "sloped self lines averaged without their SOS cell: heads park on SOS, lifting lines past the dropoff",
    "band": "self diagonals kept as a band from the row's own token back: a lone lag line learns where zeros end",
    "silent_empty": "a head with no line reads the start token only, not the whole input, which grows with the length",
    "rank_own": "running sums: a head reading the previous sum's digit gets no own-row lines, the others' ranked by distance",
    "vertical_kappa0": "a marker's vertical kept wherever it beats its direction's average line (κ 0): few columns, small σ",
    "same_digit": "operands of one width share their cross lines, averages pooled: a head that adds reads both alike",
}
DEFAULT = tuple(RULES)  # "all": abcmini's procedure
BLOCK_ONLY = (
    "rank_own",
)  # rules on block lines alone: no meaning on the paper's tasks, not in their ablation
BLOCK_RULES = (
    "unite_layers",
    "support",
    "vertical_kappa0",
    "band",
    "rank_own",
)  # what block lines read (block_procedure)


def applying(rules, block: bool) -> tuple[str, ...]:
    """Of ``rules``, those that change a calibration of block lines (``block``) or of lines."""
    return tuple(
        rule for rule in rules if (rule in BLOCK_RULES if block else rule not in BLOCK_ONLY)
    )
