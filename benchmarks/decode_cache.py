"""Cached vs uncached greedy decoding, side by side in one run.

    python benchmarks/decode_cache.py [--preset paper] [--task successor] [--length 60] [--samples 1000]

Speed does not depend on the weights, so the model is freshly initialised. Both decoders
see the same inputs; the script also checks that they produce the same tokens.
"""

import argparse
import time

import torch

from abcmini.model import PRESETS, ModelConfig, Transformer
from abcmini.tasks import extrapolation_operands, format_task


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="paper", choices=sorted(PRESETS))
    parser.add_argument("--task", default="successor")
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Transformer(ModelConfig(**PRESETS[args.preset])).eval()
    a, b = extrapolation_operands(args.task, args.length, seed=0)
    n = args.samples
    example = format_task(args.task, a[:n], None if b is None else b[:n], args.length)
    steps = example.tgt_out.shape[1]
    cached_s, cached = best_of(args.repeats, lambda: model.greedy(example.src, steps, use_cache=True))
    uncached_s, uncached = best_of(args.repeats, lambda: model.greedy(example.src, steps, use_cache=False))
    assert torch.equal(cached, uncached), "cached and uncached decoding disagree"
    print(f"{args.task}, {n} samples at {args.length} digits ({steps} decode steps, src {example.src.shape[1]} tokens), "
          f"preset {args.preset}, {torch.get_num_threads()} threads")
    print(f"uncached: {uncached_s:.2f} s   cached: {cached_s:.2f} s   speed-up: {uncached_s / cached_s:.1f}x")


if __name__ == "__main__":
    main()
