"""A Successor run's exact match on the stress family ``carry_chain`` by the run of nines the
number ends in (docs/decoder-only.md, "On inputs random sampling never draws").

``python lab/chain_errors.py RUN_DIR LENGTH``: the family's 1,000 inputs at LENGTH (the test
seed 0, as ``abcmini eval RUN --stress`` draws them), in the run's test frame; one line per
run length: how many inputs end in that many nines and the share the model answers exactly. A
run of LENGTH nines is the number whose successor is one digit longer.
"""

import torch
from einops import reduce
from parse import call, parser  # lab/parse.py

from abcmini.evaluate import exact_match
from abcmini.pipeline import experiment_of, test_frames
from abcmini.store import load_checkpoint
from abcmini.stress import families, stress_operands
from abcmini.tasks import format_task
from abcmini.train import load_model


def by_nines(a: torch.Tensor, hits: torch.Tensor) -> dict[int, tuple[int, float]]:
    """Run of nines the number ends in → (inputs, share right), over ``[n w]`` digits ``a``."""
    nines = reduce((a.flip(1) == 9).long().cumprod(1), "n w -> n", "sum")
    return {
        run: (int((nines == run).sum()), hits[nines == run].float().mean().item())
        for run in sorted(set(nines.tolist()))
    }


def main(run_dir: str, length: int) -> None:
    cfg, model = load_model(load_checkpoint(run_dir))
    family = next(f for f in families("successor") if f.name == "carry_chain")
    a, _ = stress_operands("successor", family, length, 0)
    (frame,) = test_frames(experiment_of(run_dir), cfg, [length])
    hits = exact_match(model, format_task("successor", a, None, frame, cfg.form), 250)
    print(f"{run_dir} at {length} digits: {hits.float().mean().item():.2%} exact")
    for run, (count, share) in by_nines(a, hits).items():
        print(f"  ends in {run:>3} nines: {count:>4} inputs, {share:.2%}")


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("run_dir")
    args.add_argument("length", type=int)
    given = args.parse_args()
    call(main, given.run_dir, given.length)
