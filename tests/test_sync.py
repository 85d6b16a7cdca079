"""abcmini sync's plan from offline runs, and its restoring of lineage edges, which adds an edge
once however often it runs. No wandb server exists here: the public API is stood in for by the
few calls sync makes (``run``, ``artifact``, ``used_artifacts``, ``use_artifact``)."""

from types import SimpleNamespace

from abcmini.outputs.sync import Edge, describe, edges, restore
from abcmini.outputs.wandb_files import OfflineRun


def cell_runs():
    source = OfflineRun(
        "root/successor/vanilla-s0/wandb/offline-run-1-src",
        id="src",
        project="abcmini",
        group="g",
        job_type="source",
        artifacts=[("model-src", "model"), ("run-src-table", "run_table")],
    )
    calibration = OfflineRun(
        "root/successor/abc-s0/wandb/offline-run-2-cal",
        id="cal",
        project="abcmini",
        group="g",
        job_type="calibration",
        config={"uses": ["model-src"]},
        artifacts=[("abc-bias-g", "abc-bias")],
    )
    retraining = OfflineRun(
        "root/successor/abc-s0/wandb/offline-run-3-re",
        id="re",
        project="abcmini",
        group="g",
        job_type="retraining",
        config={"uses": ["abc-bias-g", "abc-bias-g"]},
    )
    evaluation = OfflineRun(
        "root/successor/abc-s0/wandb/offline-run-4-ev",
        id="ev",
        project="abcmini",
        group="g",
        job_type="eval",
        config={"uses": ["model-elsewhere"]},
    )
    return [source, calibration, retraining, evaluation]


class StandIn:
    """The part of ``wandb.Api`` sync uses, over runs held in memory."""

    def __init__(self):
        self.used = {}

    def run(self, path):
        used = self.used.setdefault(path, [])
        return SimpleNamespace(used_artifacts=lambda: list(used), use_artifact=used.append)

    def artifact(self, path):
        return SimpleNamespace(name=path.rsplit("/", 1)[1])


def test_sync_finds_each_recorded_use_with_the_run_that_logged_it():
    assert edges(cell_runs()) == [
        Edge("cal", "model-src", "src"),
        Edge("re", "abc-bias-g", "cal"),
        Edge("ev", "model-elsewhere", None),
    ]
    lines = describe(cell_runs(), edges(cell_runs()), "root", "me", None)
    assert lines[0] == "4 offline runs under root:" and lines[5].startswith(
        "upload: wandb sync --entity me root/successor/vanilla-s0/"
    )
    assert (
        "  Api().run('me/abcmini/re').use_artifact('me/abcmini/abc-bias-g:latest')  (logged by cal)"
        in lines
    )
    assert lines[-1].endswith("(logged outside this root)")


def test_restoring_the_edges_twice_adds_each_once():
    runs, api = cell_runs(), StandIn()
    assert restore(runs, edges(runs), "me", None, api) == 3
    assert restore(runs, edges(runs), "me", None, api) == 0
    assert {path: [a.name for a in used] for path, used in api.used.items()} == {
        "me/abcmini/cal": ["model-src:latest"],
        "me/abcmini/re": ["abc-bias-g:latest"],
        "me/abcmini/ev": ["model-elsewhere:latest"],
    }
    restore(runs, edges(runs), "me", "elsewhere", api)  # --project: every run in that project
    assert "me/elsewhere/re" in api.used
