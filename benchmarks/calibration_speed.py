"""Time ABC calibration on paper-size attention tensors (8 heads, 62×125 cross, 62×62 self).

    python benchmarks/calibration_speed.py [--repeats 20]
"""

import argparse
import time

import torch

from abcmini.calibrate import calibrate


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    cross = torch.rand(8, 62, 125).softmax(-1)
    self_attention = torch.rand(8, 62, 62).tril().softmax(-1)
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        biases = calibrate(cross, 4.5), calibrate(self_attention, 0.87, right=False)
        biases[0](62, 125), biases[1](62, 62)
        timings.append(time.perf_counter() - start)
    timings.sort()
    print(f"calibrate + materialize, cross [8, 62, 125] and self [8, 62, 62], {torch.get_num_threads()} threads: "
          f"median {1000 * timings[len(timings) // 2]:.2f} ms, best {1000 * timings[0]:.2f} ms over {args.repeats} runs")


if __name__ == "__main__":
    main()
