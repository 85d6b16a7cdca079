"""The wandb objects abcmini builds for comparing methods, checked offline from shipped records:
the comparison run's series, the workspace views and the report (wandb-workspaces)."""

import os

from typer.testing import CliRunner

from abcmini.outputs.compare import TABLE_COLUMNS, series, table_rows
from abcmini.outputs.report import collect, pool
from abcmini.outputs.workspace import build, describe
from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_comparison_is_one_median_line_per_method_and_a_table_of_numbers():
    """One line per method (its median over seeds), on a log axis past 100 digits; the table
    beside it holds numbers (median, lowest, highest, seed count), so it sorts and plots."""
    per_method = {
        "abc": {6: [1.0, 0.98, 0.99], 500: [0.97, 1.0, 0.99]},
        "vanilla": {6: [1.0], 60: [0.0]},
    }
    xs, ys, keys, log = series(per_method)
    assert log and keys == ["abc", "vanilla"]
    assert [round(x, 3) for x in xs[0]] == [0.778, 2.699] and ys[0] == [99.0, 99.0]
    _, ys, keys, log = series({"vanilla": {6: [1.0], 60: [0.5]}})
    assert not log and keys == ["vanilla"] and ys == [[100.0, 50.0]]
    rows = table_rows(per_method)
    assert TABLE_COLUMNS == ["method", "length", "median", "lowest", "highest", "seeds", "cell"]
    assert rows[1] == ["abc", 500, 99.0, 97.0, 100.0, 3, "99.00 [97.00–100.00]"]
    assert all(isinstance(v, (int, float)) for row in rows for v in row[1:6])


def test_the_workspace_and_report_of_a_root_group_by_method_per_task_with_a_log_axis_for_long_tests():
    records = collect(os.path.join(ROOT, "results", "long"))
    kept, _ = pool(records)
    tasks = {r["task"] for r in kept}
    views, report = build(records, "someone", "abcmini")
    assert sorted(view.name.split(" · ")[1] for view in views) == sorted(tasks)
    for view in views:
        task = view.name.split(" · ")[1]
        model = view._to_model().model_dump()  # what save() would send, built without a server
        (section,) = model["spec"]["section"]["panel_bank_config"]["sections"]
        curve, valid, loss, media = section["panels"]
        assert (
            curve["config"]["metrics"] == ["extrapolation/exact_match"]
            and curve["config"]["x_axis"] == "length"
        )
        assert (
            curve["config"]["group_by"] == "label.value"
            and curve["config"]["group_agg"] == "median"
        )
        assert (
            curve["config"]["group_area"] == "minmax" and curve["config"]["x_log_scale"] is True
        )  # tests reach 500 digits
        assert valid["config"]["metrics"] == ["valid/exact_match"] and loss["config"][
            "metrics"
        ] == ["train/loss"]
        assert "attention/100-digits/cross" in media["config"]["media_keys"]
        assert [f.name for f in view.runset_settings.groupby] == ["label"]
        assert f"Config(\"task\") == '{task}'" in str(view.runset_settings.filters)
        assert "Config(\"recipe\") == 'long'" in str(view.runset_settings.filters)
        assert "JobType\") in ['train', 'retraining']" in str(view.runset_settings.filters)
    grids = [block for block in report.blocks if type(block).__name__ == "PanelGrid"]
    assert sorted(grid.runsets[0].name for grid in grids) == sorted(tasks) and all(
        grid.runsets[0].groupby == ["label"] for grid in grids
    )
    lines = describe(views, report)
    assert lines[0].startswith("workspace someone/abcmini 'abcmini long · ") and lines[
        -1
    ].startswith("report someone/abcmini")


def test_the_workspace_command_prints_its_plan_and_refuses_to_save_without_entity_or_key():
    runner = CliRunner()
    root = os.path.join(ROOT, "results", "long")
    plan = runner.invoke(app, ["workspace", root, "--dry-run"])
    assert (
        plan.exit_code == 0 and "workspace ENTITY/abcmini 'abcmini long · addition'" in plan.output
    )
    no_entity = runner.invoke(app, ["workspace", root])
    assert (
        no_entity.exit_code == 2
        and "needs --entity" in no_entity.output
        and no_entity.output.count("\n") == 1
    )
    no_key = runner.invoke(app, ["workspace", root, "--entity", "someone"])
    assert no_key.exit_code == 2 and "no wandb API key" in no_key.output
    empty = runner.invoke(app, ["workspace", os.path.join(ROOT, "docs")])
    assert empty.exit_code == 2 and "holds no result records" in empty.output
