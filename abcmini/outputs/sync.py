"""``abcmini sync ROOT``: upload every offline wandb run under a results root (cells, ABC sources,
comparison runs), then restore the lineage that offline runs could only record as names.

Offline, wandb refuses ``use_artifact``, so a run that consumed an artifact (a calibration its
source's model, a retraining its bias) names it in its config's ``uses``. Once the runs are on the
server, each of those names becomes a real edge through wandb's public API
(``Api().run(PATH).use_artifact(ARTIFACT)``), skipped where the run already uses it: running the
command twice adds nothing.
"""

import os
import subprocess
import sys
from dataclasses import dataclass

from abcmini.errors import UserError
from abcmini.outputs.track import REACH_SECONDS, base_url, has_api_key, reachable
from abcmini.outputs.wandb_files import OfflineRun, offline_runs


@dataclass(frozen=True)
class Edge:
    """``run`` (a wandb run id) used the artifact ``artifact``, logged by the run ``producer``
    (None: by no run under this root)."""

    run: str
    artifact: str
    producer: str | None


def edges(runs: list[OfflineRun]) -> list[Edge]:
    """The lineage the runs recorded: every name in a config's ``uses``, with the run that logged it."""
    producers = {name: run.id for run in runs for name, _ in run.artifacts}
    for run in runs:
        uses = run.config.get("uses") or []
        if not isinstance(uses, list) or not all(isinstance(name, str) for name in uses):
            raise UserError(
                f"run {run.directory!r}: its config's 'uses' is a list of artifact names, not {uses!r}"
            )
    return [
        Edge(run.id, name, producers.get(name))
        for run in runs
        for name in dict.fromkeys(run.config.get("uses") or [])
    ]


def missing_files(runs: list[OfflineRun]) -> list[str]:
    """Staged artifact files a run records that are not on disk (its root was moved or cleaned)."""
    return [path for run in runs for path in run.staged if not os.path.exists(path)]


def sync_command(runs: list[OfflineRun], entity: str | None, project: str | None) -> list[str]:
    """The ``wandb sync`` command (the one wandb ships) that uploads every run folder; runs it
    uploaded before are skipped by it."""
    scope = [
        *(["--entity", entity] if entity else []),
        *(["--project", project] if project else []),
    ]
    return [sys.executable, "-m", "wandb", "sync", *scope, *(run.directory for run in runs)]


def describe(
    runs: list[OfflineRun], found: list[Edge], root: str, entity: str | None, project: str | None
) -> list[str]:
    """The plan as lines: each run (id, project, group, job type, folder), the upload command,
    then each edge as the API call that restores it."""
    lines = [f"{len(runs)} offline runs under {root}:"]
    lines += [
        f"  {run.id}  {run.project}  {run.group}  {run.job_type}  {os.path.relpath(run.directory, root)}"
        for run in runs
    ]
    lines.append("upload: wandb " + " ".join(sync_command(runs, entity, project)[3:]))
    lines.append(f"{len(found)} lineage edges to restore:")
    projects = {run.id: project or run.project for run in runs}
    for edge in found:
        where = f"{entity or 'ENTITY'}/{projects[edge.run]}"
        by = f"logged by {edge.producer}" if edge.producer else "logged outside this root"
        lines.append(
            f"  Api().run('{where}/{edge.run}').use_artifact('{where}/{edge.artifact}:latest')  ({by})"
        )
    gone = missing_files(runs)
    if gone:
        lines.append(
            f"{len(gone)} staged artifact files are missing (first: {gone[0]}); wandb sync cannot upload those artifacts"
        )
    return lines


def upload(runs: list[OfflineRun], entity: str | None, project: str | None) -> None:
    """``wandb sync`` of every run folder, one process for all."""
    done = subprocess.run(sync_command(runs, entity, project))
    if done.returncode:
        raise UserError(
            f"wandb sync failed (exit code {done.returncode}); the runs stay offline, run the same command again"
        )


def restore(
    runs: list[OfflineRun], found: list[Edge], entity: str | None, project: str | None, api=None
) -> int:
    """Each edge as ``use_artifact`` through the public API (``api``, default ``wandb.Api()``),
    where the run does not already use the artifact; returns how many were added."""
    if api is None:
        import wandb

        api = wandb.Api()
    entity = entity or api.default_entity
    projects = {run.id: project or run.project for run in runs}
    added = 0
    for edge in found:
        where = f"{entity}/{projects[edge.run]}"
        run = api.run(f"{where}/{edge.run}")
        if edge.artifact in {artifact.name.split(":")[0] for artifact in run.used_artifacts()}:
            continue
        run.use_artifact(api.artifact(f"{where}/{edge.artifact}:latest"))
        added += 1
    return added


def sync(root: str, entity: str | None, project: str | None, dry_run: bool, say=print) -> None:
    """Find the runs and their edges under ``root``; print the plan (``dry_run``) or carry it out."""
    if not os.path.isdir(root):
        raise UserError(f"results root {root!r} is not a directory")
    if not dry_run and not has_api_key():
        raise UserError(
            "no wandb API key (WANDB_API_KEY or wandb login): nothing was uploaded; --dry-run shows the plan"
        )
    if not dry_run and not reachable(base_url()):
        raise UserError(
            f"the wandb server {base_url()} does not answer within {REACH_SECONDS} s: nothing was "
            "uploaded; check the network (or WANDB_BASE_URL) and run it again"
        )
    runs = offline_runs(root)
    found = edges(runs)
    for line in describe(runs, found, root, entity, project):
        say(line)
    if dry_run or not runs:
        return
    upload(runs, entity, project)
    say(
        f"restored {restore(runs, found, entity, project)} lineage edges ({len(found)} recorded; the others were there already)"
    )
