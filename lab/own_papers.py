"""Today's methods in their own papers' shape, scaled to a 2-core CPU: docs/todays-methods.md,
"What each method's own paper ran". Each run is Addition in the decoder-only model with the
input the papers train on (``+varied``: numbers of every length up to ``--train-digits``), the
method's own depth, heads, width and position range, tested at multiples of its training length.

``python lab/own_papers.py run NAME [SEED]``: train and test one run of ``RUNS`` (one
thread) and write ``results/experiments/own-papers/addition-NAME-sSEED.json``.
``python lab/own_papers.py table``: the page's table from those records and from the GPU
runs of ``lab/papers_scale.py`` (``OUT/gpu``), each beside its paper's figure
(``abcmini.outputs.published``).
"""

import glob
import json
import os
import shutil

from one_thread import abcmini  # lab/one_thread.py
from parse import call, parser  # lab/parse.py

from abcmini.outputs.published import ANCHORS

OUT = os.path.join("results", "experiments", "own-papers")


def shape(
    layers: int, heads: int, d_model: int, positions: int | None, digits: int, lengths: str
) -> list[str]:
    """A run's model (``positions``: the range of a method's position ids; FIRE has none) and lengths."""
    sized = ["--max-position", str(positions)] if positions else []
    return [
        "--layers",
        str(layers),
        "--heads",
        str(heads),
        "--d-model",
        str(d_model),
        *sized,
        "--train-digits",
        str(digits),
        "--pad-width",
        str(digits),
        "--lengths",
        lengths,
    ]


RUNS = {  # NAME → the method (with +varied) and its options; the record is named after NAME
    # Cho et al.: 1 layer, 4 heads (d 512, 202 ids, 1–30 digits); here d 128, 64 ids, 1–15 digits
    "coupling+varied-1layer-d128-train15": [
        "--method",
        "coupling+varied",
        *shape(1, 4, 128, 64, 15, "15,20,30,45"),
        "--steps",
        "6000",
    ],
    "coupling+varied-1layer-d128-train15-3x-budget": [
        "--method",
        "coupling+varied",
        *shape(1, 4, 128, 64, 15, "15,20,30,45"),
        "--steps",
        "14000",
        "--train-on",
        "9",
    ],
    "coupling+varied-1layer-d128-train15-unequal": [
        "--method",
        "coupling+varied",
        *shape(1, 4, 128, 64, 15, "15,20,30,45"),
        "--steps",
        "6000",
        "--operand-lengths",
        "unequal",
    ],
    "coupling+varied-1layer-d256-train15": [
        "--method",
        "coupling+varied",
        *shape(1, 4, 256, 64, 15, "15,20,30,45"),
        "--steps",
        "6000",
    ],
    # McLeish et al.: a deep NoPE decoder (16 layers, d 1024, every pair of lengths 1–20, offsets to 100); here 4 layers,
    # d 128, 1–10
    "abacus+varied-4layer-d128-train10-unequal": [
        "--method",
        "abacus+varied",
        *shape(4, 4, 128, 64, 10, "10,20,30,50"),
        "--steps",
        "12000",
        "--operand-lengths",
        "unequal",
    ],
    # Zhou et al.: FIRE in a decoder of about 25M parameters, 1–40 digits; here 4 layers, d 128, 1–10
    "fire+varied-4layer-d128-train10": [
        "--method",
        "fire+varied",
        *shape(4, 4, 128, None, 10, "10,20,25"),
        "--steps",
        "12000",
    ],
    # Ruoss et al.: an encoder of 5 layers, 8 heads, d 64, positions drawn from 0 … 2047 (binary tasks, per-token accuracy)
    "random+varied-5layer-d64-train10": [
        "--method",
        "random+varied",
        *shape(5, 8, 64, None, 10, "10,20,30,50"),
        "--steps",
        "12000",
    ],
}


def run(name: str, seed: str) -> None:
    cell = ["--recipe", "decoder", "--task", "addition", "--seed", seed, *RUNS[name], "--no-wandb"]
    out = os.path.join("runs", "own-papers", f"{name}-s{seed}")
    abcmini("train", *cell, "--out", out, "--threads", "1", "--continue")
    os.makedirs(OUT, exist_ok=True)
    shutil.copyfile(
        os.path.join(out, "eval.json"), os.path.join(OUT, f"addition-{name}-s{seed}.json")
    )


def longest(record: dict, at_least: float) -> str:
    """The longest tested length up to which every tested length holds ``at_least``, and its
    multiple of the training length."""
    from abcmini.outputs.method_views import (
        reach,
    )  # plotly's module: a GPU machine runs this file's shape() without it

    return reach(record["accuracy"], at_least, record["train_digits"])


def table() -> None:
    anchors = {anchor.scheme: anchor for anchor in ANCHORS}
    print(
        "| run | shape | trained on | examples (M) | training s | machine | exact match (%) by length | ≥ 99% to | ≥ 90% to | its paper |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(OUT, "*.json"))) + sorted(
        glob.glob(os.path.join(OUT, "gpu", "*.json"))
    ):
        r = json.load(open(path))
        by_length = " · ".join(
            f"{n}: {100 * a:.2f}" for n, a in sorted((int(n), a) for n, a in r["accuracy"].items())
        )
        anchor = anchors.get(r["scheme"])
        paper = (
            f"1–{anchor.trained_digits} → {anchor.tested_digits} ({anchor.ratio:.2f}×), {anchor.accuracy}"
            if anchor
            else "—"
        )
        print(
            f"| `{os.path.basename(path)[:-5]}` | {r['shape']} | 1–{r['train_digits']} | {r['train_examples'] / 1e6:.2f} | "
            f"{r['train_seconds']:,.0f} | {r.get('device', 'CPU, 1 thread')} | {by_length} | {longest(r, 0.99)} | {longest(r, 0.90)} | {paper} |"
        )


if __name__ == "__main__":
    args = parser(__doc__)
    commands = args.add_subparsers(dest="command", required=True)
    commands.add_parser("table", help="the page's table from the records")
    one = commands.add_parser("run", help="train and test one run")
    one.add_argument("name", choices=RUNS)
    one.add_argument("seed", nargs="?", default="0")
    given = args.parse_args()
    call(table) if given.command == "table" else call(run, given.name, given.seed)
