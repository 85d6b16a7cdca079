"""An ABC bias file made of two: one file's lines with some attention's heads taken from another
(docs/todays-methods.md, "One protocol, fair to all": which lines of a calibration make it fail).

``python lab/mix_bias.py BASE OTHER OUT PART [PART ...]``: OUT holds BASE's lines except in
each PART, which holds OTHER's: ``self`` or ``cross`` (a whole attention) or ``cross:H`` (head H
of it). Both files are calibrations of the paper's tasks for the same task, heads and frame.
Saved as ``abc_bias.pt`` in a run directory that holds a source (``source/``), an ABC run there
with ``--continue`` retrains with it instead of calibrating.
"""

import os

from parse import call  # lab/parse.py
from parse import parser as lab_parser

from abcmini.bias_files import load_bias, save_bias
from abcmini.errors import InputError
from abcmini.nn.lines import LineBias


def tables(path: str) -> dict:
    """The bias file's payload, if it holds one self and one cross table (not per layer, not blocks)."""
    payload = load_bias(path)
    if set(payload["bias"]) != {"self", "cross"}:
        raise InputError(f"{path} is not one self and one cross table (a per-layer or block bias?)")
    return payload


def part(text: str, heads: int) -> tuple[str, list[int]]:
    """``self``, ``cross`` or ``ATTENTION:H`` → the attention and the heads it names."""
    attention, _, head = text.partition(":")
    if attention not in ("self", "cross") or (head and not (head.isdigit() and int(head) < heads)):
        raise InputError(
            f"a part is self, cross, self:H or cross:H with H below {heads}, got {text!r}"
        )
    return attention, [int(head)] if head else list(range(heads))


def only(state: dict, heads: list[int], keep: bool) -> LineBias:
    """The table of ``state`` with the lines of ``heads`` alone (``keep``) or all but theirs."""
    values = state["values"].clone()
    closed = [h for h in range(values.shape[1]) if (h in heads) != keep]
    values[:, closed] = float("-inf")
    return LineBias.from_state({**state, "values": values})


def main() -> None:
    parser = lab_parser(__doc__)
    parser.add_argument("base")
    parser.add_argument("other")
    parser.add_argument("out")
    parser.add_argument("parts", nargs="+")
    args = parser.parse_args()
    if os.path.exists(args.out):
        parser.error(f"{args.out} exists; name a new file")
    try:
        base, other = tables(args.base), tables(args.other)
        for key in ("task", "heads", "pad_width"):
            if base.get(key) != other.get(key):
                raise InputError(
                    f"the files differ in {key}: {base.get(key)!r} and {other.get(key)!r}"
                )
        parts = [part(text, base["heads"]) for text in args.parts]
    except InputError as error:
        parser.error(str(error))
    bias = dict(base["bias"])
    for attention, heads in parts:
        mixed = only(bias[attention], heads, keep=False).union(
            only(other["bias"][attention], heads, keep=True)
        )
        bias[attention] = mixed.state()
    taken = {"from": args.other, "parts": args.parts}
    save_bias(
        args.out, {**{k: v for k, v in base.items() if k != "format"}, "bias": bias, "mixed": taken}
    )


if __name__ == "__main__":
    call(main)
