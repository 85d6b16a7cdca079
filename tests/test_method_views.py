"""The dashboard's view of each of today's methods: its paper's figure beside every group of its
runs, a group being the seeds of one task, shape, training length and budget."""

import glob
import json
import os

from typer.testing import CliRunner

from abcmini.outputs.method_views import group_row, method_views, run_groups, seconds_on
from abcmini.outputs.report import collect, held_to, reach
from cli import app

OWN = "results/own-papers/addition/coupling+varied-s0"


def test_held_to_is_the_longest_length_up_to_which_every_tested_length_holds():
    accuracy = {"20": 0.995, "6": 0.999, "10": 0.95, "60": 0.2}
    assert (
        held_to(accuracy, 0.99),
        held_to(accuracy, 0.90),
        held_to(accuracy, 0.1),
        held_to({"6": 0.5}, 0.9),
    ) == (6, 20, 60, 0)


def test_a_reach_is_shown_with_its_multiple_of_the_training_length_or_as_none():
    accuracy = {"6": 0.999, "10": 0.95, "20": 0.2}
    assert (reach(accuracy, 0.90, 5), reach(accuracy, 0.99), reach(accuracy, 0.9999, 5)) == (
        "10 (2.0×)",
        "6",
        "none",
    )


def test_runs_of_one_shape_with_other_budgets_or_operands_are_groups_of_their_own():
    records = [
        r
        for suffix in ("", "-steps=14000,train_on=9.0", "-operand_lengths=unequal")
        for r in collect(f"{OWN}{suffix}/eval.json")
    ]
    groups = run_groups(records, "coupling")
    assert len(groups) == 3 and all(len(runs) == 1 for runs in groups.values())
    budget = next(runs for runs in groups.values() if runs[0]["overrides"].get("train_on") == 9.0)
    row = group_row(next(k for k, v in groups.items() if v is budget), budget)
    held = [held_to(budget[0]["accuracy"], at) for at in (0.99, 0.90)]
    assert (
        row[1] == "1–15"
        and row[4:6] == [f"{h} ({h / 15:.1f}×)" for h in held]
        and "steps 14000, train on 9.0" in row[0]
    )
    assert run_groups(records, "abacus") == {}


def test_a_groups_row_names_the_seeds_that_ran_on_a_gpu(tmp_path):
    """The sweep's Coupling at 15 digits (seeds 0–2, this project's CPU), seed 2's record marked as
    made on a GPU: one group, whose row says which seed ran there."""
    files = sorted(
        glob.glob("results/experiments/common-protocol/addition-coupling+varied-train15-s*.json")
    )
    for path in files:
        record = json.load(open(path))
        if record["seed"] == 2:
            record["device"] = "NVIDIA H200"
        (tmp_path / os.path.basename(path)).write_text(json.dumps(record))
    ((key, runs),) = run_groups(
        [r for path in sorted(tmp_path.iterdir()) for r in collect(str(path))], "coupling"
    ).items()
    assert [r["seed"] for r in runs] == [0, 1, 2] and group_row(key, runs)[
        2
    ] == "3 (seed 2 on NVIDIA H200)"
    assert group_row(key, runs[:2])[2] == "2"
    # trained partly on the card, tested on a CPU (its record names no test device)
    partly = {
        **runs[0],
        "train_seconds": 500.0,
        "train_seconds_by_device": {"NVIDIA H200": 400.0, "CPU": 100.0},
    }
    row = group_row(key, [partly])
    assert (
        row[2] == "1 (seed 0 on NVIDIA H200)" and row[-1] == "500 (400 on NVIDIA H200, 100 on CPU)"
    )
    assert (
        seconds_on({**partly, "train_seconds_by_device": {"CPU": 500.0}, "device": "NVIDIA H200"})
        == "500"
    )


def test_each_view_names_its_papers_figure_and_randomized_positions_have_none():
    records = collect("results/decoder")
    views = {scheme: (paper, rows) for scheme, paper, _, rows in method_views(records)}
    assert set(views) == {"random", "fire", "abacus", "coupling"}
    assert (
        "200 digits from 1–30 (6.67×)" in views["coupling"][0]
        and "no exact-match figure" in views["random"][0]
    )
    assert all(len(rows) == len(run_groups(records, scheme)) for scheme, (_, rows) in views.items())


def test_the_dashboard_reads_record_files_and_refuses_a_file_that_is_no_record(tmp_path):
    out = tmp_path / "methods.html"
    result = CliRunner().invoke(app, ["dashboard", f"{OWN}/eval.json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "<h2 id='method-coupling'>" in out.read_text()
    (tmp_path / "other.json").write_text(json.dumps({"not": "a record"}))
    bad = CliRunner().invoke(
        app, ["dashboard", str(tmp_path / "other.json"), "--out", str(tmp_path / "x.html")]
    )
    assert (
        bad.exit_code == 2
        and len(bad.output.strip().splitlines()) == 1
        and "other.json" in bad.output
    )
    assert not (tmp_path / "x.html").exists()
