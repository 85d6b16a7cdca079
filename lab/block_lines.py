"""What a block task's averaged attention reads, line by line, and what the calibration keeps:
``python lab/block_lines.py BIAS_FILE [self|cross]`` (docs/multi-operand.md).

For a bias file of ``multiadd`` or ``multiply`` (``abcmini calibrate`` or a cell's
``abc_bias.pt``: it holds the source's averaged attention ``Ā``), per decoder layer, head and
block offset (multiply's cross-attention: the numbers a, b and the end marker ``&``), every
line's mean attention ``d_l`` as ``d_l − d_max`` of its head (Algorithm 1, step 2.1). A mark
after a value: ``*`` the line is kept under the file's rules, ``b`` the dropoff keeps it and rule
``band`` cuts it. Lines a row never crosses (support) print as ``·``.
"""

import math

import torch
from parse import call, parser  # lab/parse.py

from abcmini.bias_files import load_bias
from abcmini.config import rule_names
from abcmini.nn.calibrate import block_rules, calibrate_blocks

LOOSE = -1e9  # a dropoff factor every supported line passes


def tables(
    attention: torch.Tensor,
    blocks: int,
    kappa: float,
    min_support: float,
    cross: bool,
    products: bool,
    rules: set[str],
):
    """``(every line's d_l − d_max, kept without band, kept)`` as ``[h d (ℓ + 1)]`` tables, as
    ``calibrate.block_procedure`` calibrates them."""
    rule, shared = (
        block_rules(min_support, rules),
        {"products": products and cross, "growing": products},
    )
    every = calibrate_blocks(
        attention, blocks, LOOSE, cross, **{**rule, "kappa_markers": LOOSE, "band": False}, **shared
    )
    unbanded = calibrate_blocks(
        attention, blocks, kappa, cross, **{**rule, "band": False}, **shared
    )
    kept = calibrate_blocks(attention, blocks, kappa, cross, **rule, **shared)
    return every, unbanded.values, kept.values


def main(path: str, kinds=("self", "cross")) -> None:
    payload = load_bias(path)
    products = payload["task"] == "multiply"
    settings = payload["calibration"]
    rules = set(rule_names(settings["rules"]))
    n_src = payload["attention"]["cross"].shape[-1]
    blocks = (n_src - 3) // 2 if products else (n_src - 1) // (payload["pad_width"] + 1)
    print(
        f"{path}: {payload['task']}, {blocks} blocks, rules {settings['rules']}, layers {settings['layers']}"
    )
    for kind in kinds:
        kappa = settings[f"kappa_{kind}"]
        for layer, attention in zip(settings["layers"], payload["attention"][kind]):
            every, unbanded, kept = tables(
                attention, blocks, kappa, settings["min_support"], kind == "cross", products, rules
            )
            ells = range(every.l_first, every.l_first + every.values.shape[-1] - 1)
            print(f"\n{kind}-attention, layer {layer}, κ {kappa}")
            print(f"{'ℓ':>7}: " + "".join(f"{ell:>6} " for ell in ells) + "marker")
            for head in range(every.values.shape[0]):
                for d in range(every.values.shape[1]):
                    label = "ab&"[d] if products and kind == "cross" else f"{d + every.d_first:+d}"
                    cells = []
                    for value, loose, final in zip(
                        *(t[head, d].tolist() for t in (every.values, unbanded, kept))
                    ):
                        mark = "*" if math.isfinite(final) else "b" if math.isfinite(loose) else " "
                        cells.append(f"{value:6.3f}{mark}" if math.isfinite(value) else "     · ")
                    if any(cell.strip() != "·" for cell in cells):
                        print(f"  h{head} {label:>2}: " + "".join(cells))


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("path", metavar="BIAS_FILE")
    args.add_argument("kind", nargs="?", choices=("self", "cross"))
    given = args.parse_args()
    call(main, given.path, (given.kind,) if given.kind else ("self", "cross"))
