"""The picture in docs/tracking.md: the cross-attention figures an ABC cell logged to wandb at the
training length and at 100 digits, for its source (top) and its retrained model (bottom), side by
side in one PNG.

``python lab/attention_png.py RUN_DIR OUT.png`` where RUN_DIR is an ABC cell trained with
tracking on (offline is enough), e.g. ``abcmini train --recipe quick --task successor --method abc
--seed 0 --out runs/quick-abc``.
"""

import os

from parse import call, parser  # lab/parse.py
from PIL import Image

from abcmini.errors import UserError
from abcmini.outputs.wandb_files import offline_runs

KEYS = ("attention/7-digits/cross", "attention/100-digits/cross")


def main(run_dir: str, out: str) -> None:
    runs = {
        run.job_type: run
        for run in offline_runs(run_dir)
        if run.job_type in ("source", "retraining")
    }
    if set(runs) != {"source", "retraining"}:
        raise UserError(f"{run_dir!r} holds no tracked ABC cell (source and retraining runs)")
    rows = [
        [Image.open(runs[job].media(key)[-1]) for key in KEYS] for job in ("source", "retraining")
    ]
    width, height = (
        sum(image.width for image in rows[0]),
        max(image.height for row in rows for image in row),
    )
    canvas = Image.new("RGB", (width, height * len(rows)), "white")
    for r, row in enumerate(rows):
        x = 0
        for image in row:
            canvas.paste(image, (x, r * height))
            x += image.width
    canvas.save(out, optimize=True)
    print(f"{out}: {canvas.width}x{canvas.height}, {os.path.getsize(out) // 1024} KiB")


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("run_dir")
    args.add_argument("out")
    call(main, **vars(args.parse_args()))
