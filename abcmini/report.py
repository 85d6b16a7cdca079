"""`abcmini report`: the paper-style table and accuracy-vs-length figures from finished runs.

Every run directory under ``RUNS_DIR`` with an ``eval.json`` contributes one accuracy per length.
Runs of the same task and method (different seeds) are summarized by their median and range.
"""

import glob
import json
import os
import statistics

from abcmini.paper import paper_accuracy

TASK_ORDER = ("successor", "addition", "nx1", "parity", "parity_class")


def collect(runs_dir: str) -> list[dict]:
    """Every ``eval.json`` below ``runs_dir`` (with its run directory in ``run``)."""
    found = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "**", "eval.json"), recursive=True)):
        with open(path) as f:
            found.append({**json.load(f), "run": os.path.dirname(path)})
    return found


def summarize(results: list[dict]) -> dict:
    """``{(task, method): {length: [accuracy per seed]}}`` with lengths as ints."""
    cells: dict = {}
    for result in results:
        per_length = cells.setdefault((result["task"], result["method"]), {})
        for length, acc in result["accuracy"].items():
            per_length.setdefault(int(length), []).append(acc)
    return cells


def _order(key):
    task, method = key
    return (TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER), task, method)


def cell(values: list[float] | None) -> str:
    if not values:
        return "–"
    middle = 100 * statistics.median(values)
    if len(values) == 1:
        return f"{middle:.2f}"
    return f"{middle:.2f} [{100 * min(values):.2f}–{100 * max(values):.2f}]"


def markdown(cells: dict, lengths=None, rows=None) -> str:
    """One table: a row per task × method, a column per length; ``ours (paper)`` per cell.

    With several seeds a cell reads ``median [min–max]``. ``lengths`` and ``rows`` (task,
    method pairs) select a paper table's cells; by default every length and row is shown.
    """
    if rows is not None:
        cells = {key: cells[key] for key in rows if key in cells}
    lengths = sorted(lengths or {n for per_length in cells.values() for n in per_length})
    seeds = {key: max(len(v) for v in per_length.values()) for key, per_length in cells.items()}
    lines = ["| task | method | seeds | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|---|" + "---|" * len(lengths)]
    for key in sorted(cells, key=_order):
        task, method = key
        row = []
        for n in lengths:
            ours, paper = cell(cells[key].get(n)), paper_accuracy(task, method, n)
            row.append(ours if paper is None or ours == "–" else f"{ours} ({paper:g})")
        lines.append(f"| {task} | {method} | {seeds[key]} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n\nExact match (%), 10,000 test numbers per length (fewer where fewer exist); the paper's number in parentheses.\n"


def costs(results: list[dict]) -> str:
    """What each run cost: optimizer steps, training wall time (over every invocation), the wall
    time of the invocation that finished it (its remaining training, ABC's calibration, the
    evaluation), and the validation accuracy it stopped at."""
    lines = ["| task | method | seed | steps | training | last invocation | validation % |", "|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (*_order((r["task"], r["method"])), r.get("seed", 0))):
        if r.get("train_steps") is None:
            continue
        job = f"{r['job_seconds']:.0f} s" if r.get("job_seconds") is not None else "–"
        source = ""
        if r.get("interpolation_steps") is not None:  # ABC: its Vanilla source (and calibration, if this job ran it)
            calibration = f"; calibration {r['calibration_seconds']:.0f} s" if r.get("calibration_seconds") is not None else ""
            source = f" (+ source {r['interpolation_steps']} steps, {r['interpolation_seconds']:.0f} s{calibration})"
        lines.append(f"| {r['task']} | {r['method']} | {r.get('seed', 0)} | {r['train_steps']}{source} | "
                     f"{r['train_seconds']:.0f} s | {job} | {100 * r['valid_acc']:.1f} |")
    return "\n".join(lines) + "\n"


def wall_time(invocations: list[dict]) -> str:
    """The ``reproduce`` invocations of one root (``reproduce.Invocation``) and their total wall
    time: a reproduction interrupted and resumed took the sum of its invocations."""
    lines = ["| started (UTC) | tasks | methods | seeds | workers | jobs | to do | done | wall time | finished |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for e in invocations:
        lines.append(f"| {e['started']} | {','.join(e['tasks'])} | {','.join(e['methods'])} | {','.join(map(str, e['seeds']))} | "
                     f"{e.get('workers', '–')} | {e['jobs']} | {e['to_do']} | {e['done']} | {clock(e['seconds'])} | {'yes' if e['finished'] else 'no'} |")
    total, count = sum(e["seconds"] for e in invocations), len(invocations)
    return "\n".join(lines) + f"\n\n{count} invocation{'s' * (count != 1)}, {clock(total)} (h:mm:ss) of wall time in all.\n"


def clock(seconds: float) -> str:
    """``h:mm:ss``."""
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def figures(cells: dict, out_dir: str) -> list[str]:
    """One accuracy-vs-length PNG per task with every method on it (the paper's Figure 1)."""
    from abcmini.figures import accuracy_curves, close, save

    paths = []
    for task in sorted({task for task, _ in cells}, key=lambda t: _order((t, ""))):
        curves = {method: {n: statistics.median(v) for n, v in per_length.items()}
                  for (t, method), per_length in cells.items() if t == task}
        fig = accuracy_curves(curves, f"{task}: exact match vs length (median over seeds)")
        paths.append(save(fig, os.path.join(out_dir, f"accuracy_{task}.png")))
        close(fig)
    return paths
