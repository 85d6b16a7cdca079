"""``abcmini compare``: a comparison run from runs that already exist (here the shipped `long`
and `decoder` roots, as a sweep's runs gathered from two machines would be), read back from
wandb's offline files; and its refusals."""

import json
import os

import pytest
from typer.testing import CliRunner

from abcmini.outputs.report import collect, pool
from abcmini.outputs.wandb_files import offline_runs
from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONG, DECODER = (os.path.join(ROOT, "results", name) for name in ("long", "decoder"))


@pytest.mark.integration  # a tracked comparison run: the second tier
def test_compare_builds_one_comparison_run_from_existing_roots(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "w"))
    result = CliRunner().invoke(app, ["compare", LONG, "--out", str(tmp_path), "--name", "mine"])
    assert result.exit_code == 0, result.output
    (run,) = offline_runs(str(tmp_path))
    assert run.job_type == "comparison" and run.group == "mine"
    kept = {(r["task"], r["method"], r["seed"]) for r in collect(LONG)}
    assert {(r["task"], r["method"], r["seed"]) for r in run.config["runs"]} <= kept
    assert len(run.config["runs"]) == len(pool(collect(LONG))[0]) and run.config["compared"] == [
        LONG
    ]
    assert all(os.path.isabs(r["run"]) for r in run.config["runs"])  # the runs lie outside --out
    (table,) = run.media("tables/addition")
    data = json.loads(open(table).read())
    assert data["columns"][:3] == ["method", "length", "median"] and len(data["data"]) > 10


def test_compare_refuses_what_holds_nothing_in_one_line(tmp_path):
    for args, needle in (
        ([str(tmp_path / "missing")], "does not exist"),
        ([str(tmp_path)], "no result records"),
    ):
        result = CliRunner().invoke(app, ["compare", *args])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
