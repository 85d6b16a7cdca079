"""Wall time of one training run with and without wandb tracking (offline), side by side.

    python benchmarks/tracking_overhead.py [--repeats 2] [--steps 500]

Runs ``abcmini train`` (Successor, pad width 20, the ``cpu`` preset) alternately with
``--no-wandb`` and with tracking, in fresh processes (one thread each), and prints the median
wall time of each and their ratio. Tracking logs loss and learning rate every 10 steps,
validation at every evaluation, and the attention pictures before training, at every
evaluation and at the end.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed_run(out: str, tracked: bool, steps: int, env: dict) -> float:
    argv = [
        sys.executable,
        "cli.py",
        "train",
        "--task",
        "successor",
        "--pad-width",
        "20",
        "--lengths",
        "6,20",
        "--steps",
        str(steps),
        "--eval-every",
        "250",
        "--out",
        out,
        "--overwrite",
        *([] if tracked else ["--no-wandb"]),
    ]
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            **{
                name: os.path.join(tmp, name.lower())
                for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR")
            },
        }
        for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
            os.makedirs(env[name], exist_ok=True)
        times = {False: [], True: []}
        for _ in range(args.repeats):
            for tracked in (False, True):
                times[tracked].append(timed_run(os.path.join(tmp, "run"), tracked, args.steps, env))
    plain, tracked = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"train {args.steps} steps and evaluate at 6 and 20 digits, Successor pad 20, cpu preset, 1 thread, median of {args.repeats}: "
        f"--no-wandb {plain:.1f}s, wandb offline {tracked:.1f}s, overhead {100 * (tracked / plain - 1):+.1f}%"
    )


if __name__ == "__main__":
    main()
