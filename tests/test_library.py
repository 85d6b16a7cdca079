"""The library (``abcmini.nn``: positions, lines, calibrate, model, decoder, …) is plain PyTorch that
imports nothing of the run layer, and the example of ABC in another model (docs/library.md) runs as it stands there."""

import glob
import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = tuple(
    sorted(
        "abcmini.nn." + os.path.basename(p)[:-3]
        for p in glob.glob(os.path.join(ROOT, "abcmini", "nn", "[!_]*.py"))
    )
)
RUN_LAYER = (
    "wandb",
    "typer",
    "matplotlib",
    "plotly",
    "yaml",
    "abcmini.errors",
    "abcmini.names",
    "abcmini.config",
    "abcmini.tasks",
    "abcmini.recipes",
    "abcmini.store",
    "abcmini.train",
    "abcmini.pipeline",
    "abcmini.experiment",
    "abcmini.outputs",
)


def test_no_core_module_imports_anything_of_the_run_layer():
    """Each core module imported in turn in one fresh interpreter: none loads a run-layer module
    (the first that does is named, with what it loaded)."""
    code = (
        "import importlib, sys\n"
        f"for module in {CORE!r}:\n"
        "    importlib.import_module(module)\n"
        f"    loaded = [m for m in {RUN_LAYER!r} if m in sys.modules]\n"
        "    if loaded:\n"
        "        print(module, 'imports', ', '.join(loaded))\n"
        "        break\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def library_example() -> str:
    with open(os.path.join(ROOT, "docs", "library.md")) as f:
        section = f.read()
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```\n", start)]


def test_the_library_example_runs_and_its_bias_reads_the_operand_at_100_digits():
    namespace = {}
    exec(compile(library_example(), "docs/library.md", "exec"), namespace)
    mask, out, test = namespace["mask"], namespace["out"], namespace["test"]
    a_last = 105  # "$" then the first operand's 105 digits
    for t in range(100):  # head 0, row t: the first operand's digit t + 1 and nothing else
        assert torch.isfinite(mask[0, t]).nonzero().flatten().tolist() == [a_last - t], t
    assert (test[a_last - 99 : a_last + 1] == 9).all()  # the digits it reads are the operand's
    silent = torch.isfinite(mask[1:])  # heads without a line read the first token only
    assert silent[..., 0].all() and not silent[..., 1:].any()
    assert out.shape == (1, 4, 106, 16) and torch.isfinite(out).all()
