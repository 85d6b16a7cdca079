"""Read what wandb wrote: config, summary, history, exit code … of the offline runs under a
wandb directory, from their ``run-<id>.wandb`` files (``abcmini.outputs.wandb_files.records``)."""

import glob
import json
import os
from dataclasses import dataclass, field

from abcmini.outputs.wandb_files import records


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


@dataclass
class OfflineRun:
    """The config, summary and history rows of one offline run, and its files directory."""

    directory: str
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    id: str = ""
    group: str = ""
    job_type: str = ""
    sweep_id: str = ""
    project: str = ""
    tags: list = field(default_factory=list)
    exit_code: int | None = None
    artifacts: list = field(default_factory=list)  # (name, type) of every artifact the run logged
    metrics: dict = field(default_factory=dict)  # define_metric: a metric's name → its step metric

    def media(self, key: str) -> list[str]:
        """Paths (on disk) of every image / table logged under ``key``."""
        return [os.path.join(self.directory, "files", row[key]["path"]) for row in self.history if key in row]


def read_offline_runs(wandb_dir: str) -> list[OfflineRun]:
    runs = []
    for directory in sorted(glob.glob(os.path.join(wandb_dir, "wandb", "offline-run-*"))):
        run = OfflineRun(directory)
        (path,) = glob.glob(os.path.join(directory, "run-*.wandb"))
        for record in records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run.id, run.group, run.job_type, run.tags = record.run.run_id, record.run.run_group, record.run.job_type, list(record.run.tags)
                run.sweep_id, run.project = record.run.sweep_id, record.run.project
                run.config.update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
            elif kind == "exit":
                run.exit_code = record.exit.exit_code
            elif kind == "metric":
                run.metrics[record.metric.name or record.metric.glob_name] = record.metric.step_metric
            elif kind == "artifact":
                run.artifacts.append((record.artifact.name, record.artifact.type))
            elif kind == "config":
                run.config.update({_key(i): json.loads(i.value_json) for i in record.config.update})
            elif kind == "summary":
                run.summary.update({_key(i): json.loads(i.value_json) for i in record.summary.update})
            elif kind == "history":
                row = {}
                for item in record.history.item:
                    key = _key(item)
                    for prefix in ("/path", "/_type"):  # image/table fields arrive flattened
                        if key.endswith(prefix):
                            row.setdefault(key[: -len(prefix)], {})[prefix[1:]] = json.loads(item.value_json)
                            break
                    else:
                        row[key] = json.loads(item.value_json)
                run.history.append(row)
        runs.append(run)
    return runs
