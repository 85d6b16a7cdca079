"""``abcmini`` from this checkout in a one-thread subprocess: what the experiment scripts run."""

import os
import subprocess
import sys

from abcmini.errors import UserError

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": os.getcwd()}


def abcmini(*args: str) -> str:
    """Run ``abcmini ARGS`` from this checkout (one thread) and return its standard output."""
    done = subprocess.run(
        [sys.executable, "-c", "import cli; cli.main()", *args],
        env=ENV,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"abcmini {' '.join(args)} failed ({done.returncode}): {last}")
    return done.stdout
