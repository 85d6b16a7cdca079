"""The comparison run: one wandb run (job type ``comparison``) per ``reproduce`` invocation and
per sweep that sets the methods side by side, as the report does. Per task: exact match against
length for every method (its median over seeds, one line each) as a ``wandb.plot.line_series``
(against log10 of the length once tests reach ``LOG_FROM`` digits: the chart has no log axis),
and a ``wandb.Table`` of numbers per method and length (median, lowest, highest, seeds). Its config names the run
of every cell it compares (directory, wandb id, group).
"""

import math
import os
import statistics

from abcmini.outputs.report import cell, cell_order, pool, summarize
from abcmini.outputs.track import ID_FILE, Tracker

LOG_FROM = 100  # lengths this long get a log length axis, as in the dashboard


def where(run_dir: str, root: str) -> str:
    """``run_dir`` relative to ``root`` when it lies below it, else absolute."""
    path, root = os.path.abspath(run_dir), os.path.abspath(root)
    return os.path.relpath(path, root) if os.path.commonpath([path, root]) == root else path


def cell_runs(records: list[dict], root: str) -> list[dict]:
    """The run behind each record: task, method, seed, directory (``where``), wandb id."""
    runs = []
    for r in records:
        run_dir = r["run"].split(" (")[0]  # "DIR (other test)" is a second test of DIR
        try:
            with open(os.path.join(run_dir, ID_FILE)) as f:
                wandb_id = f.read().strip()
        except OSError:
            wandb_id = None
        runs.append(
            {
                "task": r["task"],
                "method": r["method"],
                "seed": r["seed"],
                "run": where(run_dir, root),
                "wandb_id": wandb_id,
            }
        )
    return runs


def series(per_method: dict) -> tuple[list, list, list, bool]:
    """``xs``, ``ys``, ``keys`` of one task's line series: one line per method, its median over
    seeds in % (the seeds' range is in the table beside it); and whether x is log10(length)."""
    log = max(n for per_length in per_method.values() for n in per_length) >= LOG_FROM
    xs, ys, keys = [], [], []
    for method, per_length in per_method.items():
        lengths = sorted(per_length)
        xs.append([math.log10(n) if log else n for n in lengths])
        ys.append([100 * statistics.median(per_length[n]) for n in lengths])
        keys.append(method)
    return xs, ys, keys, log


TABLE_COLUMNS = ["method", "length", "median", "lowest", "highest", "seeds", "cell"]


def table_rows(per_method: dict) -> list[list]:
    """One row per method and length, numbers as numbers (exact match in %, the seed count) so
    the table sorts and plots; ``cell`` is the report's ``median [lowest–highest]`` text."""
    return [
        [
            method,
            n,
            100 * statistics.median(per_length[n]),
            100 * min(per_length[n]),
            100 * max(per_length[n]),
            len(per_length[n]),
            cell(per_length[n]),
        ]
        for method, per_length in per_method.items()
        for n in sorted(per_length)
    ]


def log_comparison(tracker: Tracker, records: list[dict], root: str) -> None:
    """Log the comparison of ``records`` (a root's result records, pooled as the report pools them)."""
    if tracker.run is None:
        return
    import wandb

    kept, _ = pool(records)
    cells = summarize(kept)
    tracker.run.config.update({"runs": cell_runs(kept, root)}, allow_val_change=True)
    for task in dict.fromkeys(task for task, _ in sorted(cells, key=cell_order)):
        per_method = {
            method: per_length
            for (t, method), per_length in sorted(cells.items(), key=lambda kv: cell_order(kv[0]))
            if t == task
        }
        xs, ys, keys, log = series(per_method)
        xname = "log10 length (digits)" if log else "length (digits)"
        with tracker.guard():
            tracker.run.log(
                {
                    f"comparison/{task}": wandb.plot.line_series(
                        xs, ys, keys, f"{task}: exact match (%) against length", xname
                    )
                }
            )
        tracker.table(f"tables/{task}", TABLE_COLUMNS, table_rows(per_method))
    tracker.summary(
        {
            "cells": len(kept),
            "tasks": sorted({t for t, _ in cells}),
            "methods": sorted({m for _, m in cells}),
        }
    )


def comparison_run(
    enabled: bool, project: str | None, root: str, records: list[dict], name: str, **config
) -> str | None:
    """Start, fill and finish the comparison run of ``records`` (wandb group ``name``), written
    into ``root`` like every other run; returns its wandb id (None: tracking off or failed)."""
    if not records:
        return None
    with Tracker.start(
        enabled,
        root,
        "comparison",
        {"root": os.path.abspath(root), **config},
        name,
        ["comparison"],
        project,
    ) as tracker:
        log_comparison(tracker, records, root)
        return tracker.run.id if tracker.run is not None else None
