"""Lines of code by layer at a commit: ``python benchmarks/lines.py [COMMIT]`` (default HEAD).

The library is ``abcmini/nn/`` (before it was a folder: the modules the library test named),
the harness every other module of ``abcmini/``, then ``cli.py``, ``tests/``, and outside the
package ``scripts/`` (where it still exists), ``benchmarks/`` and ``lab/``; every line of each ``.py`` file counts, as
``wc -l`` counts it.
"""

import subprocess
import sys

CORE = {
    "positions",
    "biases",
    "calibrate",
    "model",
    "decoder",
    "fire",
    "abacus",
    "coupling",
    "randomized",
    "token_positions",
    "size_cache",
    "rules",
    "schemes",
    "config",
}


def layer(path: str) -> str | None:
    if path == "cli.py":
        return "cli.py"
    for folder in ("tests", "scripts", "benchmarks", "lab"):
        if path.startswith(folder + "/"):
            return folder
    if path.startswith("abcmini/nn/") or (
        path.count("/") == 1
        and path.startswith("abcmini/")
        and path[8:-3] in CORE
        and path != "abcmini/config.py"
    ):
        return "library"
    return "harness" if path.startswith("abcmini/") else None


def main(commit: str = "HEAD") -> None:
    paths = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit], capture_output=True, text=True, check=True
    ).stdout.split()
    totals = dict.fromkeys(
        ("library", "harness", "cli.py", "tests", "scripts", "benchmarks", "lab"), 0
    )
    for path in paths:
        if path.endswith(".py") and layer(path):
            text = subprocess.run(
                ["git", "show", f"{commit}:{path}"], capture_output=True, text=True, check=True
            ).stdout
            totals[layer(path)] += text.count("\n")
    print(commit, " ".join(f"{name} {lines}" for name, lines in totals.items()))


if __name__ == "__main__":
    main(*sys.argv[1:])
