"""A multiadd or multiply bias file with some of one head's block lines closed or ranked
(docs/multi-operand.md, "Why seeds 1 and 2 needed rule `rank_own`").

``python lab/set_lines.py BIAS_FILE OUT self|cross HEAD LINE [LINE ...]``: LINE is ``d:ℓ``
(block offset and digit offset, as ``lab/block_lines.py`` prints them) or ``d:m`` (the
block's marker), which closes that open line, or ``d:ℓ=VALUE``, which gives it the bias VALUE
(a logit added before the softmax: lines a head should prefer get more). OUT is a new bias file;
saved as ``abc_bias.pt`` in a fresh run directory, an ABC run there (``abcmini train --method abc
--source SOURCE --out DIR --resume``) retrains with it instead of calibrating.
"""

import argparse
import copy
import math
import os

from parse import call  # lab/parse.py
from parse import parser as lab_parser

from abcmini.bias_files import load_bias, save_bias
from abcmini.errors import InputError


def line(text: str) -> tuple[int, int | str, float]:
    """``d:ℓ`` or ``d:m``, with ``=VALUE`` to set the line's bias instead of closing it."""
    place, _, value = text.partition("=")
    d, _, ell = place.partition(":")
    try:
        return int(d), ell if ell == "m" else int(ell), float(value) if value else -math.inf
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a line reads d:ℓ, d:m or d:ℓ=VALUE, got {text!r}"
        ) from None


def main() -> None:
    parser = lab_parser(__doc__)
    parser.add_argument("bias_file")
    parser.add_argument("out")
    parser.add_argument("attention", choices=("self", "cross"))
    parser.add_argument("head", type=int)
    parser.add_argument("lines", nargs=argparse.REMAINDER)  # "-1:m" is a line, not an option
    args = parser.parse_args()
    if not args.lines:
        parser.error("name at least one line")
    try:
        args.lines = [line(text) for text in args.lines]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    if os.path.exists(args.out):
        parser.error(f"{args.out} exists; name a new file")
    try:
        payload = copy.deepcopy(load_bias(args.bias_file))
    except InputError as error:
        parser.error(str(error))
    table = payload["bias"].get("blocks", {}).get(args.attention)
    if table is None:
        parser.error(
            f"{args.bias_file} holds no block lines (a multiadd or multiply bias has them)"
        )
    values = table["values"]  # [h d (ℓ + marker)]
    heads, d_count, width = values.shape
    for d, ell, value in args.lines:
        column = width - 1 if ell == "m" else ell - table["l_first"]
        row = d - table["d_first"]
        if not (
            0 <= args.head < heads and 0 <= row < d_count and 0 <= column < width - (ell != "m")
        ):
            parser.error(f"head {args.head}, line {d}:{ell} is outside the table")
        if not math.isfinite(values[args.head, row, column]):
            parser.error(f"head {args.head} has no open line {d}:{ell}")
        values[args.head, row, column] = value
    save_bias(args.out, payload)
    print(
        f"{args.out}: {args.attention}-attention head {args.head}: "
        + ", ".join(
            f"({d}, {ell}) {'closed' if value == -math.inf else value}"
            for d, ell, value in args.lines
        )
    )


if __name__ == "__main__":
    call(main)
