"""``abcmini`` from this checkout in a one-thread subprocess: what the experiment scripts run."""

import os
import subprocess
import sys

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
        raise SystemExit(
            f"abcmini {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    return done.stdout
