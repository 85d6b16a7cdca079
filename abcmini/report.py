"""`abcmini report`: the paper's two tables, training cost and accuracy-vs-length figures from
result records (the ``eval.json`` of every run under a root).

A cell pools the runs of one protocol (recipe, preset, pad width), one per seed, and reads
``median [min–max]`` over them; the runs left out are listed with the reason.
"""

import glob
import json
import os
import re
import statistics
from collections import Counter

from abcmini.figures import accuracy_curves, close, save
from abcmini.paper import paper_accuracy
from abcmini.store import EVAL_FILE, StoreError, atomic_write, load_json

TASK_ORDER = ("successor", "addition", "nx1", "parity", "parity_class")
MAIN_ROWS = tuple((t, m) for t in ("successor", "addition", "nx1") for m in ("vanilla", "alibi", "rope", "nope+abc"))
ABS_ROWS = tuple((t, m) for t in ("successor", "addition", "nx1", "parity") for m in ("vanilla", "vanilla+w=1", "vanilla+w=1+T=3", "nope+w=1"))
MAIN_LENGTHS = (6, 10, 20, 60)
RECORD_FIELDS = ("task", "method", "seed", "accuracy")


def collect(runs_dir: str) -> list[dict]:
    """Every result record (``eval.json``) below ``runs_dir``, with its run directory in ``run``."""
    found = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "**", EVAL_FILE), recursive=True)):
        record = load_json(path, "result record")
        missing = [key for key in RECORD_FIELDS if key not in record]
        if missing:
            raise StoreError(f"result record {path!r} lacks {', '.join(missing)}")
        found.append({**record, "run": os.path.dirname(path)})
    return found


def protocol(record: dict) -> tuple:
    """What must be equal for two runs to share a cell: recipe, preset, pad width."""
    return record.get("recipe"), record.get("preset"), record.get("pad_width")


def describe_protocol(key: tuple) -> str:
    recipe, preset, pad_width = key
    return f"recipe {recipe}, preset {preset}, {'pad width ' + str(pad_width) if pad_width else 'growing geometry'}"


def pool(records: list[dict]) -> tuple[list[dict], list[tuple[str, str]]]:
    """The records of the root's most common protocol, one per (task, method, seed); and the
    runs left out, each with the reason."""
    if not records:
        return [], []
    main = Counter(protocol(r) for r in records).most_common(1)[0][0]
    kept, left_out, seen = [], [], set()
    for record in records:
        key = (record["task"], record["method"], record["seed"])
        if protocol(record) != main:
            left_out.append((record["run"], f"{describe_protocol(protocol(record))}, not {describe_protocol(main)}"))
        elif key in seen:
            left_out.append((record["run"], f"a second run of {record['task']} {record['method']} seed {record['seed']}"))
        else:
            seen.add(key)
            kept.append(record)
    return kept, left_out


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
    paths = []
    for task in sorted({task for task, _ in cells}, key=lambda t: _order((t, ""))):
        curves = {method: {n: statistics.median(v) for n, v in per_length.items()}
                  for (t, method), per_length in cells.items() if t == task}
        fig = accuracy_curves(curves, f"{task}: exact match vs length (median over seeds)")
        paths.append(save(fig, os.path.join(out_dir, f"accuracy_{task}.png")))
        close(fig)
    return paths


def page(records: list[dict], figure_names: list[str] = (), invocations: list[dict] | None = None) -> str:
    """The whole report: protocol, both of the paper's tables, training cost, the runs left out,
    figures and (for a ``reproduce`` root) its wall time."""
    kept, left_out = pool(records)
    cells = summarize(kept)
    lengths = sorted({n for per_length in cells.values() for n in per_length})
    main = protocol(kept[0]) if kept else (None, None, None)
    seeds = sorted({r["seed"] for r in kept})
    parts = [f"Protocol: {describe_protocol(main)}; test seed {sorted({r.get('test_seed') for r in kept})[0] if kept else '–'}; "
             f"seeds {', '.join(map(str, seeds))}; 10,000 numbers per length (fewer where fewer exist); exact match in %.\n",
             f"## Main table (the paper's results-table)\n\n{headline(kept)}",
             f"## ABS table (the paper's tab.abs)\n\n{markdown(cells, lengths, ABS_ROWS)}",
             f"## Training cost\n\n{costs(kept)}"]
    if left_out:
        parts.append("## Runs left out\n\n" + "\n".join(f"- `{run}`: {why}" for run, why in left_out) + "\n")
    if figure_names:
        parts.append("## Figures\n\n" + "\n".join(f"![{name}]({name})" for name in figure_names) + "\n")
    if invocations:
        parts.append(f"## Wall time\n\n{wall_time(invocations)}")
    return "\n".join(parts)


def headline(records: list[dict]) -> str:
    """The main table (ABC and the baselines at 6 / 10 / 20 / 60 digits, the paper beside them)."""
    cells = summarize(records)
    available = {n for per_length in cells.values() for n in per_length}
    return markdown(cells, [n for n in MAIN_LENGTHS if n in available], MAIN_ROWS)


def write_report(root: str, out: str, invocations: list[dict] | None = None) -> tuple[str, list[str]]:
    """``out`` (markdown) and one figure per task beside it, from the records under ``root``."""
    records = collect(root)
    if not records:
        raise StoreError(f"no result records ({EVAL_FILE}) under {root!r}")
    kept, _ = pool(records)
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    pngs = figures(summarize(kept), directory)
    text = page(records, [os.path.basename(p) for p in pngs], invocations)
    atomic_write(out, lambda f: f.write(text.encode()))
    return text, pngs


HEADLINE = re.compile(r"(<!-- headline -->\n)(.*?)(<!-- /headline -->)", re.S)


def with_headline(text: str, records: list[dict]) -> str:
    """``text`` (the README) with its headline block replaced by the main table of ``records``."""
    if not HEADLINE.search(text):
        raise StoreError("no <!-- headline --> … <!-- /headline --> block to fill")
    return HEADLINE.sub(lambda m: m.group(1) + headline(pool(records)[0]) + m.group(3), text)
