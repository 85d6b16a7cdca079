"""Today's methods one by one (the dashboard's first view): for each scheme, its paper's own
figure, then every group of its runs (a task, a model shape, a training length and a budget), so
a reader sees how close each run comes to its paper before seeing the method beside ABC. Lengths
are read as multiples of the group's longest training number, the unit the papers report in.
"""

import html
import re
import statistics

import plotly.graph_objects as go

from abcmini.config import POOL_DIGITS
from abcmini.nn.schemes import TODAYS_SCHEMES
from abcmini.outputs.published import ANCHORS
from abcmini.outputs.report import describe_protocol, draw_notes, family, protocol, reach

BUDGET_KEYS = ("steps", "train_on", "min_steps")  # the overrides that set a run's budget


def run_groups(records: list[dict], scheme: str) -> dict[tuple, list[dict]]:
    """``scheme``'s records grouped by task, protocol and budget: the seeds of one setting."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        if family(record["method"]) == scheme:
            budget = tuple((k, str(record.get("overrides", {}).get(k))) for k in BUDGET_KEYS)
            groups.setdefault(
                (record["task"], record["method"], protocol(record), budget), []
            ).append(record)
    return groups


def budget_text(key: tuple) -> str:
    """The budget a group's command set (``steps 14000, train on 9.0``), or ''."""
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in key[3] if v != "None")


def group_label(key: tuple) -> str:
    task, method, proto, _ = key
    return f"{task} · {method} · {describe_protocol(proto)}" + (
        f" · {budget_text(key)}" if budget_text(key) else ""
    )


def legend_name(key: tuple, run: dict) -> str:
    """A group in a few words: task, method, shape, training lengths, operands, budget."""
    unequal = "unequal operands" if run.get("operand_lengths") == "unequal" else ""
    digits = run.get("train_digits", POOL_DIGITS)
    drawn = (
        " digit by digit" if digits == POOL_DIGITS and run.get("train_numbers") == "uniform" else ""
    )
    return ", ".join(
        filter(
            None,
            (
                key[0],
                key[1],
                run.get("shape") or run.get("preset"),
                f"1–{digits}{drawn}",
                unequal,
                *draw_notes(run),
                budget_text(key),
                gpu_of(run),
            ),
        )
    )


def medians(runs: list[dict]) -> dict[int, float]:
    """Median exact match over the runs at each length any of them was tested at."""
    lengths = sorted({int(n) for r in runs for n in r["accuracy"]})
    return {
        n: statistics.median(r["accuracy"][str(n)] for r in runs if str(n) in r["accuracy"])
        for n in lengths
    }


def anchor_percent(text: str) -> float:
    """The number in a published figure as its authors state it ("up to 99%", "> 95%")."""
    return float(re.search(r"\d+(\.\d+)?", text).group())


def ratio_figure(scheme: str, groups: dict[tuple, list[dict]]) -> go.Figure:
    """Exact match (median over seeds) against length ÷ the longest training length, one line per
    group, and the paper's figure as a star at its own ratio."""
    fig = go.Figure()
    for key, runs in groups.items():
        digits = runs[0].get("train_digits", POOL_DIGITS)
        per_length = medians(runs)
        fig.add_trace(
            go.Scatter(
                x=[n / digits for n in per_length],
                y=[100 * a for a in per_length.values()],
                mode="lines+markers",
                name=legend_name(key, runs[0]),
                customdata=list(per_length),
                hovertext=[group_label(key)] * len(per_length),
                hovertemplate="%{hovertext}<br>%{customdata} digits: %{y:.2f}%<extra></extra>",
            )
        )
    for anchor in (a for a in ANCHORS if a.scheme == scheme):
        fig.add_trace(
            go.Scatter(
                x=[anchor.ratio],
                y=[anchor_percent(anchor.accuracy)],
                mode="markers",
                marker={"symbol": "star", "size": 14, "color": "black"},
                name=f"its paper: {anchor.source}",
                hovertemplate=f"{html.escape(anchor.method)}: {anchor.accuracy} at {anchor.tested_digits} digits "
                f"from 1–{anchor.trained_digits}<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"{scheme}: exact match against length ÷ longest training length (★: its paper)",
        xaxis_title="length ÷ longest training length (log scale)",
        yaxis_title="exact match (%)",
        yaxis_range=[-3, 103],
        height=380,
        margin={"t": 50, "b": 40},
    )
    fig.update_xaxes(type="log")
    return fig


def group_row(key: tuple, runs: list[dict]) -> list[str]:
    digits = runs[0].get("train_digits", POOL_DIGITS)
    spans = [" / ".join(reach(r["accuracy"], at, digits) for r in runs) for at in (0.99, 0.90)]
    middle = sorted(runs, key=lambda r: r.get("train_examples") or 0)[len(runs) // 2]
    shown = " · ".join(f"{n}: {100 * a:.2f}" for n, a in medians(runs).items())
    return [
        group_label(key),
        f"1–{digits}",
        f"{len(runs)}{on_a_gpu(runs)}",
        shown,
        *spans,
        f"{(middle.get('train_examples') or 0) / 1e6:.2f}",
        seconds_on(middle),
    ]


def gpu_of(run: dict) -> str | None:
    """The GPU a run trained on, else the one it was tested on (``device``; a record made on a CPU
    names none, and one from before training named its devices names only the test's)."""
    trained = [d for d in run.get("train_seconds_by_device", {}) if d not in ("CPU", "unrecorded")]
    return trained[0] if trained else run.get("device")


def on_a_gpu(runs: list[dict]) -> str:
    """Which of a group's seeds ran on a GPU (`` (seed 2 on NVIDIA H200)``), or '' where none did."""
    gpu = [r for r in runs if gpu_of(r)]
    return f" (seed {', '.join(str(r['seed']) for r in gpu)} on {gpu_of(gpu[0])})" if gpu else ""


def seconds_on(run: dict) -> str:
    """A run's training seconds and the GPU they ran on (``6,848 on NVIDIA H200``), or per device
    for a run trained on several (``6,848 (6,539 on CPU, 309 on NVIDIA H200)``)."""
    total, spent = f"{run.get('train_seconds') or 0:,.0f}", run.get("train_seconds_by_device", {})
    if len(spent) > 1:
        parts = (
            f"{s:,.0f} " + ("unrecorded" if d == "unrecorded" else f"on {d}")
            for d, s in spent.items()
        )
        return f"{total} ({', '.join(parts)})"
    where = next(iter(spent), None) or run.get(
        "device"
    )  # a record from before the split: the test's GPU
    return total + (f" on {where}" if where and where != "CPU" else "")


COLUMNS = (
    "runs",
    "trained on",
    "seeds",
    "exact match (%) by length, median",
    "≥ 99% to, per seed (×)",
    "≥ 90% to, per seed (×)",
    "examples (M), median run",
    "training s",
)


def method_views(records: list[dict]) -> list[tuple[str, str, go.Figure, list[list[str]]]]:
    """``(scheme, its paper's figure, plot, table rows)`` for each of today's schemes with records."""
    views = []
    for scheme in TODAYS_SCHEMES:
        groups = run_groups(records, scheme)
        if not groups:
            continue
        paper = (
            "; ".join(
                f"{a.method} ({a.source}): {a.accuracy} at {a.tested_digits} digits from 1–{a.trained_digits} "
                f"({a.ratio:.2f}×)"
                for a in ANCHORS
                if a.scheme == scheme
            )
            or "no exact-match figure on decimal arithmetic"
        )
        rows = [
            group_row(key, runs)
            for key, runs in sorted(groups.items(), key=lambda kv: group_label(kv[0]))
        ]
        views.append((scheme, paper, ratio_figure(scheme, groups), rows))
    return views
