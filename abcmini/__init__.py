"""abcmini: Attention Bias Scaffolding and Calibration, small and readable."""

import functools
import os
import subprocess

__version__ = "0.1.0"


@functools.cache
def commit() -> str | None:
    """The git commit of this checkout (with ``+dirty`` if it has local changes), or None. Read
    once per process (the CLI and each ``reproduce`` worker read it as they start), so a record
    names the code that ran, not a checkout changed under a long run."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
