"""One run's exact match at one length in frames of several widths:
``python lab/frames.py RUN_DIR LENGTH PAD_WIDTH [PAD_WIDTH …]``.

Tells a method limited by the frame (the sequence grew past the training one) from one limited by
the length (digits that were always leading zeros in training): the same numbers, tested in the
training frame and in wider ones. Test seed 0, 10,000 numbers. docs/todays-methods.md uses it.
"""

from parse import call, parser  # lab/parse.py

from abcmini.evaluate import extrapolation_accuracy
from abcmini.store import load_checkpoint
from abcmini.train import load_model


def main(run_dir: str, length: int, widths: list[int]) -> None:
    cfg, model = load_model(load_checkpoint(run_dir))
    for width in widths:
        accuracy = extrapolation_accuracy(model, cfg.task, length, width, 0, cfg.form)
        print(
            f"{cfg.task} {cfg.label}: {length} digits in a frame of {width}: {100 * accuracy:.2f}%",
            flush=True,
        )


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("run_dir")
    args.add_argument("length", type=int)
    args.add_argument("widths", type=int, nargs="+", metavar="PAD_WIDTH")
    call(main, **vars(args.parse_args()))
