"""`abcmini dashboard`: one self-contained HTML page (plotly, inlined once; no server, no CDN)
that compares the methods of any number of results roots (or a parent of them). Records are
grouped by protocol (recipe, preset, frame): per protocol, exact match against length per task
(median over seeds, the seed range as a band, the paper's numbers as markers, the training lengths
shaded, a log length axis once lengths reach the hundreds), both of the paper's tables beside the
paper's, and per cell a folded block: its accuracy per length, training steps and, where the run
directory holds its checkpoint, its training curve, attention and scaffold per head and its
calibrated lines. First, where records hold today's methods (randomized positions, FIRE,
Abacus, Position Coupling), each method's paper figure beside every group of its runs
(``method_views``), then those methods beside ABC and ABS per task. A method has one colour and one
marker in every plot. Built from the same records as ``report``.
"""

import hashlib
import html
import os
import statistics
from collections import Counter

import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.subplots import make_subplots

from abcmini.bias_files import load_bias
from abcmini.nn.calibrate import average_attention
from abcmini.nn.scaffolds import scaffold_from_state, stacked
from abcmini.nn.schemes import TODAYS_SCHEMES
from abcmini.nn.windows import Window
from abcmini.outputs.method_views import COLUMNS, method_views, seconds_on
from abcmini.outputs.paper import paper_accuracy
from abcmini.outputs.published import comparisons
from abcmini.outputs.report import (
    ABS_ROWS,
    LONG_LENGTH,
    MAIN_LENGTHS,
    MAIN_ROWS,
    METHODS_NOTE,
    PUBLISHED_COLUMNS,
    PUBLISHED_NOTE,
    TASK_ORDER,
    cell,
    collect,
    describe_protocol,
    family,
    methods_beside,
    methods_rows,
    model_name,
    pool,
    protocol,
    published_rows,
    summarize,
    tested_here,
)
from abcmini.outputs.wandb_files import logged_history
from abcmini.store import CHECKPOINT, StoreError, atomic_write, load_checkpoint
from abcmini.tasks import POOL_DIGITS, Example, Pool, detokenize, format_task, training_operands
from abcmini.train import load_model

METHOD_STYLE = {  # one colour and marker per method, the same in every plot of every page
    "vanilla": ("#1f77b4", "circle"),
    "nope+abc": ("#d62728", "diamond"),
    "alibi": ("#2ca02c", "square"),
    "rope": ("#9467bd", "triangle-up"),
    "relative": ("#8c564b", "triangle-down"),
    "nope": ("#7f7f7f", "cross"),
    "vanilla+w=1": ("#ff7f0e", "star"),
    "vanilla+w=1+T=3": ("#17becf", "hexagon"),
    "nope+w=1": ("#e377c2", "pentagon"),
    # today's methods: a colour per scheme, an open marker on the protocol's input and a filled one on +varied
    "random": ("#bcbd22", "circle-open"),
    "random+varied": ("#bcbd22", "circle"),
    "fire": ("#8c6d31", "square-open"),
    "fire+varied": ("#8c6d31", "square"),
    "abacus": ("#393b79", "diamond-open"),
    "abacus+varied": ("#393b79", "diamond"),
    "coupling": ("#843c39", "triangle-up-open"),
    "coupling+varied": ("#843c39", "triangle-up"),
}
OTHER_STYLES = (
    ("#637939", "star-open"),
    ("#7b4173", "hexagon-open"),
    ("#5254a3", "cross-open"),
    ("#ad494a", "pentagon-open"),
    ("#6b6ecf", "star-square-open"),
    ("#b5cf6b", "diamond-wide-open"),
)
LOG_FROM = 100  # lengths this long get a log length axis
CLOSED = (
    "#c8c8c8"  # −inf (closed) cells: the plot background shows through, outside the colour scale
)
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
.paper { color: #888; } details { margin: 0.5em 0; } summary { cursor: pointer; font-weight: 600; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


def figure_html(fig: go.Figure, first: bool) -> str:
    """A plotly figure as a ``<div>``; the first one carries plotly.js itself."""
    return pio.to_html(fig, include_plotlyjs=first, full_html=False, config={"displaylogo": False})


def method_style(method: str) -> tuple[str, str]:
    """``(colour, marker symbol)`` of a method: fixed for the known ones, from a hash of the name otherwise."""
    method = method.split(" ")[0]  # "vanilla+w=1+T=3 (encoder-decoder)": the method's own style
    return (
        METHOD_STYLE.get(method)
        or OTHER_STYLES[int(hashlib.sha256(method.encode()).hexdigest(), 16) % len(OTHER_STYLES)]
    )


def accuracy_figure(task: str, cells: dict, train_digits: int = POOL_DIGITS) -> go.Figure:
    """Exact match against length for every method of ``task``: median line, seed-range band,
    the paper's numbers as markers; a method's traces switch on and off together. Methods are
    nudged apart along the length axis (hover shows the true length), so equal lines stay visible."""
    fig = go.Figure()
    methods = sorted(method for t, method in cells if t == task)
    longest = max(
        (n for (t, _), per_length in cells.items() if t == task for n in per_length),
        default=train_digits,  # only stress families tested: an empty curve
    )
    log = longest >= LOG_FROM
    fig.add_trace(
        go.Scatter(
            x=[1, train_digits, train_digits, 1],
            y=[-3, -3, 103, 103],
            fill="toself",
            fillcolor="rgba(0,0,0,0.06)",
            line={"width": 0},
            mode="lines",
            name=f"training lengths (1–{train_digits})",
            hoverinfo="skip",
        )
    )
    for k, method in enumerate(methods):
        color, symbol = method_style(method)
        nudge = k - (len(methods) - 1) / 2
        shift = (lambda n: n * 1.03**nudge) if log else (lambda n: n + 0.008 * longest * nudge)  # noqa: E731
        per_length = cells[task, method]
        lengths = sorted(per_length)
        xs = [shift(n) for n in lengths]
        low = [100 * min(per_length[n]) for n in lengths]
        high = [100 * max(per_length[n]) for n in lengths]
        median = [100 * statistics.median(per_length[n]) for n in lengths]
        seeds = [len(per_length[n]) for n in lengths]
        fig.add_trace(
            go.Scatter(
                x=xs + xs[::-1],
                y=high + low[::-1],
                fill="toself",
                fillcolor=color,
                opacity=0.15,
                line={"width": 0},
                hoverinfo="skip",
                legendgroup=method,
                showlegend=False,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=median,
                mode="lines+markers",
                name=method,
                legendgroup=method,
                line={"color": color, "width": 2},
                marker={"symbol": symbol, "size": 8, "color": color},
                customdata=list(zip(lengths, low, high, seeds)),
                hovertemplate=f"{method}<br>%{{customdata[0]}} digits: %{{y:.2f}}% (median)<br>range %{{customdata[1]:.2f}}–"
                "%{customdata[2]:.2f}, %{customdata[3]} seeds<extra></extra>",
            )
        )
        paper = [(n, paper_accuracy(task, method, n)) for n in lengths]
        paper = [(n, value) for n, value in paper if value is not None]
        if paper:
            fig.add_trace(
                go.Scatter(
                    x=[shift(n) for n, _ in paper],
                    y=[v for _, v in paper],
                    mode="markers",
                    name=f"{method} (paper)",
                    legendgroup=method,
                    showlegend=False,
                    marker={"symbol": "x-thin-open", "size": 11, "color": color},
                    customdata=[n for n, _ in paper],
                    hovertemplate=f"{method}, the paper<br>%{{customdata}} digits: %{{y}}%<extra></extra>",
                )
            )
    fig.update_layout(
        title=f"{task}: exact match against length (median over seeds, band: range; ×: the paper)",
        xaxis_title="operand length (digits)" + (", log scale" if log else ""),
        yaxis_title="exact match (%)",
        yaxis_range=[-3, 103],
        height=420,
        margin={"t": 50, "b": 40},
        legend={"groupclick": "togglegroup"},
    )
    if log:
        fig.update_xaxes(type="log", tickvals=[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])
    return fig


def table_html(cells: dict, lengths, rows) -> str:
    """A paper table: ours (``median [range]``) beside the paper's number in every cell."""
    head = "".join(f"<th>{n}</th>" for n in lengths)
    body = []
    for task, method in rows:
        if (task, method) not in cells:
            continue
        seeds = max(len(v) for v in cells[task, method].values())
        tds = []
        for n in lengths:
            paper = paper_accuracy(task, method, n)
            tds.append(
                f"<td>{cell(cells[task, method].get(n))}{f' <span class=paper>({paper:g})</span>' if paper is not None else ''}</td>"
            )
        body.append(f"<tr><td>{task}</td><td>{method}</td><td>{seeds}</td>{''.join(tds)}</tr>")
    return (
        f"<table><tr><th>task</th><th>method</th><th>seeds</th>{head}</tr>{''.join(body)}</table>"
    )


def training_figure(history: list, logged: list) -> go.Figure:
    """Training loss and validation exact match at every evaluation the checkpoint recorded
    (markers, so a run that stopped after one or two evaluations still shows them), and the
    training loss wandb logged every few steps where the run directory holds its run file."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    steps = [entry["step"] for entry in history]
    losses = [
        (row["_step"], row["train/loss"])
        for row in logged
        if "train/loss" in row and "_step" in row
    ]
    if losses:
        fig.add_trace(
            go.Scatter(
                x=[s for s, _ in losses],
                y=[v for _, v in losses],
                mode="lines",
                line={"width": 1, "color": "#9ab"},
                name="training loss (logged every few steps)",
            ),
            secondary_y=False,
        )
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=[entry["loss"] for entry in history],
            name="training loss (mean since the last evaluation)",
            mode="lines+markers",
            line={"color": "#1f77b4"},
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=[100 * entry["valid_acc"] for entry in history],
            name="validation exact match (%)",
            mode="lines+markers",
            line={"color": "#d62728"},
        ),
        secondary_y=True,
    )
    fig.update_layout(
        title=f"training: {len(history)} evaluations to step {steps[-1]}"
        + (f", loss logged at {len(losses)} steps" if losses else ""),
        height=300,
        margin={"t": 40, "b": 30},
        xaxis_title="step",
    )
    fig.update_yaxes(title_text="loss", type="log", secondary_y=False)
    fig.update_yaxes(title_text="validation (%)", range=[-3, 103], secondary_y=True)
    return fig


def heads_figure(maps: torch.Tensor, title: str, colorbar: str, x_labels=None) -> go.Figure:
    """One heatmap per head in a grid of at most four columns; −inf cells are left empty, so the
    grey background marks them, distinct from any value of the colour scale."""
    maps = maps.detach().float().cpu()
    heads = maps.shape[0]
    cols = min(heads, 4)
    rows = -(-heads // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"head {h}" for h in range(heads)],
        horizontal_spacing=0.04,
        vertical_spacing=0.12,
    )
    finite = maps[torch.isfinite(maps)]
    low, high = (finite.min().item(), finite.max().item()) if finite.numel() else (0.0, 1.0)
    if low == high:
        low = high - 1.0
    for h in range(heads):
        shown = torch.where(torch.isfinite(maps[h]), maps[h], torch.nan).tolist()
        fig.add_trace(
            go.Heatmap(
                z=shown,
                x=x_labels,
                zmin=low,
                zmax=high,
                colorscale="Viridis",
                showscale=h == 0,
                colorbar={"title": colorbar},
                hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>",
            ),
            row=h // cols + 1,
            col=h % cols + 1,
        )
    fig.update_yaxes(autorange="reversed")
    if x_labels is not None:
        fig.update_xaxes(type="category")
    fig.update_layout(
        title=title + ("  (grey: −inf, closed)" if not torch.isfinite(maps).all() else ""),
        plot_bgcolor=CLOSED,
        height=260 * rows + 60,
        margin={"t": 70, "b": 30},
    )
    return fig


def lines_html(bias) -> str:
    """The calibrated lines: per attention, direction and head, the open line indices and values."""
    items = []
    for kind, table in bias.tables():
        for direction, head, open_lines in table.lines():
            listed = ", ".join(f"{line} ({value:.2f})" for line, value in open_lines)
            items.append(f"<li>{kind}-attention, {direction}, head {head}: lines {listed}</li>")
    return f"<ul>{''.join(items) or '<li>no line open</li>'}</ul>"


def accuracy_row(record: dict) -> str:
    """A cell's exact match per length as a one-row table."""
    accuracy = sorted((int(n), acc) for n, acc in record["accuracy"].items())
    head = "".join(f"<th>{n}</th>" for n, _ in accuracy)
    row = "".join(f"<td>{100 * acc:.2f}</td>" for _, acc in accuracy)
    return f"<table><tr><th>length</th>{head}</tr><tr><td>exact match (%)</td>{row}</tr></table>"


def cell_summary(record: dict) -> str:
    """The line a folded cell shows: what it is, how long it trained, how it did."""
    accuracy = sorted((int(n), acc) for n, acc in record["accuracy"].items())
    shown = " · ".join(f"{n}: {100 * acc:.1f}%" for n, acc in accuracy[:8]) + (
        " …" if len(accuracy) > 8 else ""
    )
    steps = (
        f"{record['train_steps']} steps"
        if record.get("train_steps") is not None
        else "steps not recorded"
    )
    return f"{record['task']} · {record['method']} · seed {record['seed']} — {steps} — {shown}"


def cell_html(record: dict, first: bool) -> tuple[str, bool]:
    """One run: accuracy per length, training cost and protocol; where the run directory holds its
    checkpoint, its training curve, attention and scaffold per head and its calibrated lines."""
    run = record["run"]
    made = [
        f"version {record['version']}" if record.get("version") else "",
        f"commit <code>{html.escape(str(record['commit'])[:12])}</code>"
        if record.get("commit")
        else "",
    ]
    parts = [
        accuracy_row(record),
        f"<p>{record.get('train_steps')} training steps, training seconds {html.escape(seconds_on(record))}; validation "
        f"{100 * (record.get('valid_acc') or 0):.1f}%; test seed {record.get('test_seed')}, test frame {record.get('test_frame', 'fixed')}"
        f"{''.join('; ' + m for m in made if m)}; <code>{html.escape(run)}</code></p>",
    ]
    if record.get("stress"):  # abcmini eval --stress: a row per family, a column per length
        lengths = sorted({int(n) for by in record["stress"].values() for n in by})
        rows = [
            [name, *(f"{100 * by[str(n)]:.2f}" if str(n) in by else "–" for n in lengths)]
            for name, by in record["stress"].items()
        ]
        parts.append(
            f"<p>Stress families, exact match (%) of {record.get('stress_size', '')} inputs each:</p>"
            + rows_html("stress", ["family", *map(str, lengths)], rows)
            + "".join(
                f"<p>{html.escape(note)}. {html.escape(tested_here([record]))}</p>"
                for note in comparisons(record["task"], lengths)
            )
        )
    if not os.path.exists(os.path.join(run, CHECKPOINT)):
        parts.append(
            "<p>(only the result record is stored for this run: no training curve or heatmaps)</p>"
        )
        return "".join(parts), first
    state = load_checkpoint(run)
    cfg, model = load_model(state)
    if state["history"]:
        parts.append(figure_html(training_figure(state["history"], logged_history(run)), first))
        first = False
    numbers = (
        Pool.make(cfg.data_seed).valid if cfg.from_pool else None
    )  # None: drawn digit by digit
    a, b = training_operands(
        cfg.task, numbers, 1, torch.Generator().manual_seed(0), cfg.train_digits
    )
    example = format_task(cfg.task, a, b, cfg.train_pad_width, cfg.form)
    one = Example(example.src[:1], example.tgt_in[:1], example.tgt_out[:1])
    (self_map,), (cross_map,) = average_attention(model, one, one.tgt_out.shape[1])
    tokens = list(detokenize(one.src[0]))
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
    parts.append(
        figure_html(
            heads_figure(
                cross_map, f"last decoder layer, cross-attention on {''.join(tokens)}", "p", labels
            ),
            first,
        )
    )
    parts.append(
        figure_html(heads_figure(self_map, "last decoder layer, self-attention", "p"), False)
    )
    first = False
    if model.scaffold is not None:
        self_bias, cross_bias = stacked(
            model.scaffold, one.tgt_out.shape[1], len(tokens), model.layout(one.src)
        )
        kind = (
            "ABC bias" if not isinstance(model.scaffold, Window) else f"ABS window w = {cfg.window}"
        )
        parts.append(
            figure_html(
                heads_figure(
                    cross_bias.expand(max(len(cross_bias), model.cfg.heads), -1, -1),
                    f"{kind}, cross-attention",
                    "bias",
                    labels,
                ),
                False,
            )
        )
        parts.append(
            figure_html(
                heads_figure(
                    self_bias.expand(max(len(self_bias), model.cfg.heads), -1, -1),
                    f"{kind}, self-attention",
                    "bias",
                ),
                False,
            )
        )
    bias_path = os.path.join(run, "abc_bias.pt")
    if os.path.exists(bias_path):
        parts.append(
            f"<p>Calibrated lines (line index, value):</p>{lines_html(scaffold_from_state(load_bias(bias_path)['bias']))}"
        )
    return "".join(parts), first


def by_protocol(records: list[dict]) -> list[tuple[tuple, list[dict]]]:
    """The records grouped by protocol (recipe, preset, pad width, test frame), the largest group first."""
    counts = Counter(protocol(r) for r in records)
    return [(key, [r for r in records if protocol(r) == key]) for key, _ in counts.most_common()]


def section_html(key: tuple, records: list[dict], number: int, first: bool) -> tuple[str, bool]:
    """One protocol: accuracy against length per task, the paper's tables, the runs left out and the folded cells."""
    kept, left_out = pool(records)
    cells = summarize(kept)
    lengths = sorted({n for per_length in cells.values() for n in per_length})
    tasks = sorted(
        {task for task, _ in cells},
        key=lambda t: TASK_ORDER.index(t) if t in TASK_ORDER else len(TASK_ORDER),
    )
    body = [
        f"<h2 id='protocol-{number}'>{html.escape(describe_protocol(key))}</h2>",
        f"<p>{len(kept)} runs; exact match on 10,000 numbers per length (fewer where fewer exist).</p>",
    ]
    for task in tasks:
        body.append(
            f"<h3>{task}</h3>{figure_html(accuracy_figure(task, cells, key.train_digits), first)}"
        )
        first = False
    main = [n for n in MAIN_LENGTHS if n in lengths]
    if main and any(row in cells for row in MAIN_ROWS):
        body.append(
            f"<h3>Main table, ours beside the paper's (grey)</h3>{table_html(cells, main, MAIN_ROWS)}"
        )
    if any(row in cells for row in ABS_ROWS):
        body.append(f"<h3>ABS table</h3>{table_html(cells, lengths, ABS_ROWS)}")
    if any(n >= LONG_LENGTH for n in lengths):
        body.append(
            f"<h3>Beside published length generalization</h3>{rows_html('published', PUBLISHED_COLUMNS, published_rows(cells, kept))}"
            f"<p>{html.escape(PUBLISHED_NOTE)}</p>"
        )
    if left_out:
        body.append(
            "<details><summary>Runs left out</summary><ul>"
            + "".join(
                f"<li><code>{html.escape(r)}</code>: {html.escape(why)}</li>" for r, why in left_out
            )
            + "</ul></details>"
        )
    body.append(f"<h3>Cells ({len(kept)}, folded: click one to open it)</h3>")
    for record in sorted(
        kept,
        key=lambda r: (
            TASK_ORDER.index(r["task"]) if r["task"] in TASK_ORDER else 9,
            r["method"],
            r["seed"],
        ),
    ):
        content, first = cell_html(record, first)
        body.append(
            f"<details class='cell'><summary>{html.escape(cell_summary(record))}</summary>{content}</details>"
        )
    return "".join(body), first


def rows_html(kind: str, columns, rows) -> str:
    """A table of text ``rows`` under ``columns``, escaped."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table class='{kind}'><tr>{head}</tr>{body}</table>"


def tested(records: list[dict]) -> set:
    """The lengths ``records`` were tested at."""
    return {n for r in records for n in r["accuracy"]}


def todays_section(
    groups: list[tuple[tuple, list[dict]]], first: bool
) -> tuple[str, bool, list[int]]:
    """Today's methods beside ABC and ABS, for each protocol that ran today's methods and has ABC
    or ABS to set beside them: accuracy against length per task and the table of
    ``report.methods_rows``. ABC and ABS cells the protocol lacks come from another protocol tested
    at the same lengths (another model), the model named beside the method. (A protocol of
    today's methods alone is in their own views, ``method_views``.) Also: the protocols shown."""
    body, shown = [], []
    for i, (key, group) in enumerate(groups):
        kept = pool(group)[0]
        if not any(family(r["method"]) in TODAYS_SCHEMES for r in kept):
            continue
        beside = [
            r
            for other, g in groups
            if other != key and tested(g) == tested(kept)
            for r in pool(g)[0]
        ]
        arch = kept[0].get("arch", "encoder-decoder")
        groups_beside = methods_beside(kept, beside)
        if not any(family(method) in ("ABC", "ABS") for _, method, _ in groups_beside):
            continue
        shown.append(i)
        labelled = [
            {
                **r,
                "method": r["method"] if model == arch else f"{r['method']} ({model_name(model)})",
            }
            for (_, _, model), runs in groups_beside.items()
            for r in runs
        ]
        cells = summarize(labelled)
        lengths, tables = methods_rows(groups_beside)
        body.append(
            f"<section class='todays'><h2 id='todays-{i}'>Today's methods beside ABC and ABS: {html.escape(describe_protocol(key))}</h2>"
        )
        columns = (
            "method",
            "model",
            "seeds",
            *lengths,
            "steps",
            "examples (M)",
            "training s",
            "published",
        )
        for task, rows in tables.items():
            body.append(
                f"<h3>{task}</h3>{figure_html(accuracy_figure(task, cells, key.train_digits), first)}{rows_html('methods', columns, rows)}"
            )
            first = False
        body.append(f"<p>{html.escape(METHODS_NOTE)}</p></section>")
    return "".join(body), first, shown


RESIZE = (
    "<script>document.querySelectorAll('details').forEach(d => d.addEventListener('toggle', () => "
    "d.querySelectorAll('.js-plotly-plot').forEach(p => Plotly.Plots.resize(p))));</script>"
)  # plots drawn while folded


def build(roots) -> str:
    """The dashboard of the runs under ``roots`` (one directory or several) as one HTML document."""
    roots = [roots] if isinstance(roots, str) else list(roots)
    records, seen = [], set()
    for root in roots:
        for record in collect(root):
            if record["run"] not in seen:  # a root given twice, or inside another
                seen.add(record["run"])
                records.append(record)
    if not records:
        raise StoreError(f"no result records (eval.json) under {', '.join(repr(r) for r in roots)}")
    groups, body, first = by_protocol(records), [], True
    views = method_views(records)
    for scheme, paper, figure, rows in views:
        body.append(
            f"<section class='method'><h2 id='method-{scheme}'>{scheme}: its paper's figure and every run of it</h2>"
            f"<p>Its paper: {html.escape(paper)}.</p>{figure_html(figure, first)}{rows_html('method', COLUMNS, rows)}</section>"
        )
        first = False
    section, first, shown = todays_section(groups, first)
    body.append(section)
    for i, (key, group) in enumerate(groups):
        protocol_section, first = section_html(key, group, i, first)
        body.append(protocol_section)
    contents = "".join(
        f"<li><a href='#method-{scheme}'>{scheme}: its paper's figure and every run of it</a></li>"
        for scheme, *_ in views
    )
    contents += "".join(
        f"<li><a href='#todays-{i}'>Today's methods beside ABC and ABS: {html.escape(describe_protocol(key))}</a></li>"
        for i, (key, _) in enumerate(groups)
        if i in shown
    )
    contents += "".join(
        f"<li><a href='#protocol-{i}'>{html.escape(describe_protocol(key))}</a>: {len(group)} records</li>"
        for i, (key, group) in enumerate(groups)
    )
    head = [
        f"<h1>abcmini: {html.escape(', '.join(roots))}</h1>",
        f"<p>{len(records)} result records in {len(groups)} protocol{'s' * (len(groups) != 1)}. A method has one colour and "
        "one marker in every plot; methods are nudged apart along the length axis so equal lines stay visible (hover shows "
        "the length); the grey band marks the training lengths. Click a legend entry to switch a method off, "
        f"double-click to show it alone.</p><ul>{contents}</ul>",
    ]
    body = head + body
    return f"{HEAD}<style>{STYLE}</style></head><body>{''.join(body)}{RESIZE}</body></html>"


HEAD = "<!DOCTYPE html><html><head><meta charset='utf-8'><title>abcmini dashboard</title>"  # how a page of ours begins


def check_dashboard_target(out: str) -> None:
    """Refuse, in one line, to write the dashboard at ``out`` over a file abcmini did not write."""
    if os.path.isdir(out):
        raise StoreError(f"--out {out!r} is a directory; name the HTML file to write")
    if os.path.lexists(out):
        try:
            with open(out, "rb") as f:
                ours = f.read(len(HEAD)) == HEAD.encode()
        except OSError:
            ours = False
        if not ours:
            raise StoreError(
                f"{out!r} was not written by abcmini dashboard; refusing to replace it (choose another --out)"
            )


def write_dashboard(roots, out: str) -> str:
    """Build the dashboard of ``roots`` (a directory or several) and write it (atomically) to ``out``."""
    check_dashboard_target(out)
    text = build(roots)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    atomic_write(out, lambda f: f.write(text.encode(errors="backslashreplace")))
    return out
