"""Today's methods at their papers' own scale, on a GPU: docs/todays-methods.md, "At the papers'
scale". Position Coupling as Cho et al. train it (1 layer, 4 heads, d 512, 202 ids, 1–30 digits,
batch 1,000, unequal operands) tested to 200 digits; Abacus on 1–20 digits with every pair of
operand lengths, tested to 100, in a model a few minutes of one GPU can train (8 layers, d 512,
where McLeish et al. train 16 layers of d 1024 for a day).

``python lab/papers_scale.py NAME SECONDS [--device DEVICE]``: time ``PROBE`` steps, set the step cap
so that training fills about SECONDS, train (the budget rule of every run: 99.9% validation,
then 3× that step, or the cap), test, and write
``results/experiments/own-papers/gpu/addition-NAME-s0.json`` with the device's name in it.
``python lab/papers_scale.py NAME --steps STEPS``: the same with the cap given (no probe),
as for a paper's own step count.
"""

import json
import os
import shutil

from one_thread import abcmini  # lab/one_thread.py
from own_papers import shape  # lab/own_papers.py
from parse import call  # lab/parse.py
from parse import parser as lab_parser

OUT = os.path.join("results", "experiments", "own-papers", "gpu")
PROBE, EVERY = 100, 250  # steps timed to size the cap; validation and checkpoint interval

COUPLING = [
    "--method",
    "coupling+varied",
    *shape(1, 4, 512, 202, 30, "30,60,100,200"),
    "--operand-lengths",
    "unequal",
    "--batch-size",
    "1000",
]
WHOLE_CAP = [*COUPLING, "--train-on", "100"]  # no early stop: the whole cap
RUNS = {  # NAME → the method and its options (Addition, decoder-only)
    "coupling+varied-1layer-d512-train30": COUPLING,
    "coupling+varied-1layer-d512-train30-whole-cap": WHOLE_CAP,
    "abacus+varied-8layer-d512-train20": [
        "--method",
        "abacus+varied",
        *shape(8, 8, 512, 128, 20, "20,40,60,100"),
        "--operand-lengths",
        "unequal",
        "--batch-size",
        "256",
    ],
    # after the draw trains every id of the table (TokenPositions.draw): the 200-digit test, and
    # Abacus at four times the batch (McLeish et al. ramp theirs to 8,192)
    "coupling+varied-1layer-d512-train30-whole-cap-all-ids": WHOLE_CAP,
    "abacus+varied-8layer-d512-train20-batch1024": [
        "--method",
        "abacus+varied",
        *shape(8, 8, 512, 128, 20, "20,40,60,100"),
        "--operand-lengths",
        "unequal",
        "--batch-size",
        "1024",
    ],
    # Cho et al.'s budget: 50,000 steps of 1,000 (``--steps 50000``)
    "coupling+varied-1layer-d512-train30-papers-budget": WHOLE_CAP,
}


def train(name: str, out: str, device: str, *options: str) -> dict:
    cell = ["--recipe", "decoder", "--task", "addition", "--seed", "0", *RUNS[name], *options]
    again = (
        ["--overwrite"] if os.path.exists(out) else []
    )  # abcmini refuses to replace what is not its run
    abcmini(
        "train", *cell, "--device", device, "--threads", "4", "--no-wandb", "--out", out, *again
    )
    with open(os.path.join(out, "eval.json")) as file:
        return json.load(file)


def cap(name: str, root: str, seconds: float, device: str) -> int:
    """The step cap that fills about ``seconds`` of training, timed over ``PROBE`` steps."""
    probe = train(
        name,
        os.path.join(root, f"{name}-probe"),
        device,
        "--steps",
        str(PROBE),
        "--eval-every",
        str(PROBE),
        "--lengths",
        "1",
    )
    per_step = probe["train_seconds"] / PROBE
    steps = max(EVERY, int(seconds / per_step) // EVERY * EVERY)
    print(f"{name}: {per_step:.3f} s a step over {PROBE} steps → cap {steps:,}", flush=True)
    return steps


def run(name: str, seconds: float | None, steps: int | None, device: str) -> None:
    """Train and test ``name`` to ``steps``, or to the cap that fills about ``seconds``."""
    root = os.path.join("runs", "papers-scale")
    os.makedirs(root, exist_ok=True)
    steps = steps or cap(name, root, seconds, device)
    record = train(
        name, os.path.join(root, name), device, "--steps", str(steps), "--eval-every", str(EVERY)
    )
    os.makedirs(OUT, exist_ok=True)
    shutil.copyfile(
        os.path.join(root, name, "eval.json"), os.path.join(OUT, f"addition-{name}-s0.json")
    )
    print(name, record["train_steps"], record["train_seconds"], record["accuracy"], flush=True)


if __name__ == "__main__":
    parser = lab_parser(__doc__)
    parser.add_argument("name", choices=RUNS)
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument(
        "seconds",
        nargs="?",
        type=float,
        help="training time that sets the cap, timed over PROBE steps",
    )
    budget.add_argument("--steps", type=int, help="the cap itself (no probe)")
    parser.add_argument("--device", default="cuda")
    arguments = parser.parse_args()
    call(run, arguments.name, arguments.seconds, arguments.steps, arguments.device)
