"""``abcmini workspace ROOT``: the comparison in the wandb UI, defined in code with
``wandb-workspaces``: a saved workspace view per task of a results root (its runs filtered to the
task, the root's recipe and the runs that train and test a cell (job types ``CELL_JOBS``: an ABC
cell's Vanilla source is not Vanilla's), grouped by the method as the tables name it) and one report with a
section per task. Each holds exact match against length (median over seeds, min–max band, a log
length axis once tests reach 100 digits), the training curves, and the attention and bias images.
Only saving needs a server; the objects are built and checked offline.
"""

from abcmini.outputs.compare import LOG_FROM
from abcmini.outputs.report import cell_order, pool

MEDIA = (
    *(
        f"attention/{n}-digits/{kind}" for n in (7, 20, 100) for kind in ("cross", "self")
    ),  # pipeline.PICTURE_LENGTHS
    "bias/cross",
    "bias/self",
    "calibration/attention_cross",
    "calibration/bias_cross",
)


CELL_JOBS = ("train", "retraining")  # the run that trains and tests each cell (pipeline.run_cell)


def panels(longest: int, reports) -> list:
    """The panels of one task: accuracy against length, training curves, images."""
    by_method = dict(
        groupby=reports.Config("label"), groupby_aggfunc="median", groupby_rangefunc="minmax"
    )
    return [
        reports.LinePlot(
            title="exact match (%) against length, median and range over seeds",
            x="length",
            y=["extrapolation/exact_match"],
            log_x=longest >= LOG_FROM,
            range_y=(0, 100),
            **by_method,
        ),
        reports.LinePlot(
            title="validation exact match during training",
            x="Step",
            y=["valid/exact_match"],
            **by_method,
        ),
        reports.LinePlot(
            title="training loss", x="Step", y=["train/loss"], log_y=True, **by_method
        ),
        reports.MediaBrowser(
            title="attention and biases (every layer and head)", media_keys=list(MEDIA)
        ),
    ]


def build(records: list[dict], entity: str, project: str) -> tuple[list, object]:
    """The workspace views (one per task) and the report for ``records`` (a root's result records)."""
    import wandb_workspaces.reports.v2 as reports
    import wandb_workspaces.workspaces as ws

    kept, _ = pool(records)
    recipes = sorted({r["recipe"] for r in kept if r.get("recipe")})
    tasks = list(
        dict.fromkeys(task for task, _ in sorted({(r["task"], "") for r in kept}, key=cell_order))
    )
    longest = {
        task: max(int(n) for r in kept if r["task"] == task for n in r["accuracy"])
        for task in tasks
    }
    scope = [ws.Config("recipe") == recipes[0]] if len(recipes) == 1 else []
    cell = ws.Metric("JobType").isin(list(CELL_JOBS))  # an ABC cell's source is not its method
    of = lambda task: ws.And(*scope, cell, ws.Config("task") == task)  # noqa: E731 — one task's cells
    views = [
        ws.Workspace(
            entity=entity,
            project=project,
            name=f"abcmini {' '.join(recipes)} · {task}",
            sections=[
                ws.Section(
                    name=f"{task}: methods compared",
                    panels=panels(longest[task], reports),
                    is_open=True,
                )
            ],
            runset_settings=ws.RunsetSettings(filters=of(task), groupby=[ws.Config("label")]),
        )
        for task in tasks
    ]
    blocks = [
        reports.P(
            f"Result records of recipe {', '.join(recipes) or '(none)'}: {len(kept)} runs. Each section: the runs of one "
            "task grouped by method (config label)."
        )
    ]
    for task in tasks:
        runset = reports.Runset(
            entity=entity, project=project, name=task, filters=of(task), groupby=["label"]
        )
        blocks += [
            reports.H2(task),
            reports.PanelGrid(runsets=[runset], panels=panels(longest[task], reports)),
        ]
    report = reports.Report(
        project=project,
        entity=entity,
        title=f"abcmini: {', '.join(recipes) or 'results'} compared",
        blocks=blocks,
    )
    return views, report


def describe(views: list, report) -> list[str]:
    """What would be saved, one line per view, section and panel, then the report's sections."""
    lines = []
    for view in views:
        lines.append(
            f"workspace {view.entity}/{view.project} {view.name!r}: filters {view.runset_settings.filters}, "
            f"grouped by {[str(g.name) for g in view.runset_settings.groupby]}"
        )
        for section in view.sections:
            lines += [
                f"  {section.name}: {type(p).__name__} {p.title!r}"
                + (f" y={p.y} x={p.x} log_x={p.log_x}" if hasattr(p, "y") else "")
                for p in section.panels
            ]
    grids = [b for b in report.blocks if type(b).__name__ == "PanelGrid"]
    lines.append(
        f"report {report.entity}/{report.project} {report.title!r}: {len(grids)} sections "
        f"({', '.join(grid.runsets[0].name for grid in grids)})"
    )
    return lines


def save(views: list, report) -> list[str]:
    """Save the views and the report on the server; returns their URLs."""
    urls = []
    for view in views:
        view.save()
        urls.append(view.url)
    report.save()
    return [*urls, report.url]
