"""Weights & Biases tracking, offline first, never in the way of a run.

One set of conventions for every run any command makes: config = the resolved configuration
plus abcmini's version and git commit; tags = task, method, recipe; ``group`` = the cell's
identity (``recipe/task/name``); ``job_type`` = train or eval, for an ABC cell source, calibration
and retraining (all three in the cell's group), ``comparison`` for the run that sets a
reproduction's methods side by side; a training run's id is kept in its run directory
(``wandb-id``), so a resumed run continues its wandb run. Artifact files and tables are staged in
the run's own ``wandb`` folder (wandb's ``WANDB_DATA_DIR``), so a copied results root holds
everything ``wandb sync`` needs.

- No API key (``WANDB_API_KEY`` or a netrc entry) and no ``WANDB_MODE``: offline
  (``WANDB_MODE=offline`` is put in the environment, the only way wandb makes no network call);
  ``wandb sync`` uploads later. A server that does not answer within ``REACH_SECONDS`` is one
  warning and the run is logged offline.
- ``WANDB_MODE=disabled`` (wandb's own switch) is ``--no-wandb``: no run, and no picture drawn.
- Every call is guarded: if wandb fails, the tracker warns once and turns itself off.
- Under ``wandb agent`` (``WANDB_SWEEP_ID``, ``WANDB_RUN_ID`` and ``WANDB_SWEEP_PARAM_PATH`` in the
  environment) wandb ignores ``id=`` and ``project=`` and pushes the sweep's parameters into every
  run it starts. Only the run that reports a cell's results (``agent=True``) is the agent's; every
  other run (an ABC source, a calibration) starts with those three variables out of the
  environment wandb reads at setup, so it is a run of its own with its own config.
"""

import hashlib
import http.client
import os
import re
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager
from urllib.parse import urlparse

from abcmini import __version__, commit
from abcmini.errors import exit_code_of, signals_held
from abcmini.outputs.wandb_files import RunFileError, history, run_files
from abcmini.store import atomic_write, note_written

DEFAULT_PROJECT = "abcmini"
REACH_SECONDS = 3.0
ID_FILE = "wandb-id"
AGENT_VARIABLES = (
    "WANDB_SWEEP_ID",
    "WANDB_RUN_ID",
    "WANDB_SWEEP_PARAM_PATH",
)  # what wandb agent sets for each run
SETTINGS = dict(
    init_timeout=30
)  # else wandb's defaults: system metrics, console, git state, requirements (docs/tracking.md)


def base_url() -> str:
    return os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")


def has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = os.environ.get("NETRC", os.path.expanduser("~/.netrc"))
    try:
        with open(netrc) as f:
            return (urlparse(base_url()).hostname or "api.wandb.ai") in f.read()
    except OSError:
        return False


def reachable(url: str, seconds: float = REACH_SECONDS) -> bool:
    """Whether the server at ``url`` answers an HTTP request within ``seconds``, with any status:
    one that accepts the connection and stays silent would hold ``wandb.init`` for its timeout."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=seconds).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError, http.client.HTTPException):
        return False
    return True


def last_logged_step(wandb_dir: str, run_id: str, current: str) -> int:
    """The last step the earlier processes of run ``run_id`` logged, read from their offline
    files under ``wandb_dir`` (not the folder of the process now starting); -1 if none."""
    steps = [-1]
    for path in run_files(wandb_dir, run_id):
        if os.path.dirname(path) != os.path.dirname(os.path.abspath(current)):
            try:
                steps += [row["_step"] for row in history(path) if "_step" in row]
            except RunFileError:
                continue  # an unreadable file of a killed process: nothing to skip from it
    return int(max(steps))


def under_agent() -> bool:
    """Whether this process is a run of ``wandb agent`` (a sweep run)."""
    return bool(os.environ.get("WANDB_SWEEP_ID"))


@contextmanager
def outside_agent(active: bool):
    """With ``active``, the agent's variables are out of the environment while wandb sets up and
    starts a run (wandb reads them then, and only then), and back afterwards. wandb's settings
    cannot unset a variable (``sweep_id=""`` is refused, ``None`` means "not given"), and
    ``wandb.teardown()`` first makes the next ``init`` read the environment again."""
    saved = {
        name: os.environ.pop(name) for name in AGENT_VARIABLES if active and name in os.environ
    }
    try:
        if saved:
            import wandb

            wandb.teardown()
        yield
    finally:
        os.environ.update(saved)


def artifact_name(kind: str, identity: str) -> str:
    """A valid wandb artifact name: ``model-paper-addition-abc-s0``; one past wandb's 128
    characters (a cell with many overrides) keeps its first 119 and a hash of the whole."""
    name = f"{kind}-" + re.sub(r"[^A-Za-z0-9._-]+", "-", identity).strip("-")
    return (
        name
        if len(name) <= 128
        else f"{name[:119]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    )


def run_config(experiment: dict, label: str) -> dict:
    """The wandb config of a run: its run configuration's fields flat (so the runs table groups
    by task, method, pad width …), the method as the tables name it, and the rest of its cell."""
    run = experiment["run"]
    return {
        **run,
        "method": label,
        "label": label,
        "cell_method": experiment["cell"]["method"],
        "recipe": experiment["recipe"],
        "geometry": "fixed" if run["pad_width"] else "growing",
        "lengths": experiment["lengths"],
        "test_seed": experiment["test_seed"],
        "overrides": experiment["overrides"],
        "source": experiment["source"],
        "calibration": experiment["calibration"],
    }


class Tracker:
    """A wandb run, or nothing (tracking off, or after a wandb failure). Use it as a context
    manager: the run is finished however the command ends, with a non-zero exit code in wandb
    when it ends with an exception: 143 for SIGTERM, 130 for SIGINT, 1 for an error."""

    def __init__(self, run=None):
        self.run, self.uses, self.offline, self.data_dir = run, [], True, None
        self.logged_to = -1  # a resumed run: the last step its earlier processes logged

    @classmethod
    def start(
        cls,
        enabled: bool,
        run_dir: str,
        job_type: str,
        config: dict,
        group: str,
        tags=(),
        project: str | None = None,
        keep_id: bool = False,
        agent: bool = False,
    ) -> "Tracker":
        """``keep_id``: reuse the wandb run id kept in ``run_dir`` (a resumed training run).
        ``agent``: under ``wandb agent`` this is the agent's run (the one that reports the cell);
        the agent names its id, so none is kept for it."""
        tracker = cls()
        if not enabled:
            return tracker
        with tracker.guard():
            os.environ.setdefault(
                "WANDB_SILENT", "true"
            )  # no banner lines between ours (WANDB_SILENT=false brings them back)
            if "WANDB_MODE" not in os.environ and not has_api_key():
                os.environ["WANDB_MODE"] = "offline"
            mode = None
            if os.environ.get("WANDB_MODE", "online") == "online" and not reachable(base_url()):
                print(
                    f"warning: wandb server {base_url()} did not answer within {REACH_SECONDS:.0f} s; "
                    f"this run is logged offline (wandb sync uploads it later)",
                    file=sys.stderr,
                )
                mode = "offline"
            tracker.offline = (
                mode == "offline" or os.environ.get("WANDB_MODE", "online") != "online"
            )
            import wandb

            os.makedirs(run_dir, exist_ok=True)
            folder = os.path.join(os.path.abspath(os.environ.get("WANDB_DIR", run_dir)), "wandb")
            tracker.data_dir = (os.environ.get("WANDB_DATA_DIR"),)  # restored when the run ends
            os.environ["WANDB_DATA_DIR"] = (
                folder  # staging: FOLDER/artifacts/staging, read when a file is added
            )
            for name, place in (("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config")):
                os.environ.setdefault(name, os.path.join(folder, place))  # never under HOME
            id_path = os.path.join(run_dir, ID_FILE)
            agents = agent and under_agent()
            keep_id = keep_id and not agents
            run_id = None
            if keep_id and os.path.exists(id_path):
                with open(id_path) as f:
                    run_id = f.read().strip() or None
            sweep = os.environ.get(
                "ABCMINI_SWEEP"
            )  # a sweep run by abcmini sweep (wandb agent records its own)
            tags = [*tags, *([f"sweep:{sweep}"] if sweep else [])]
            if (
                under_agent() and not agents
            ):  # a stage of the agent's cell: which sweep run it serves
                config = {
                    **config,
                    "agent": {
                        "sweep_id": os.environ["WANDB_SWEEP_ID"],
                        "run_id": os.environ.get("WANDB_RUN_ID"),
                    },
                }
            with outside_agent(not agents):
                tracker.run = wandb.init(
                    project=None
                    if agents
                    else project or os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT),
                    dir=os.environ.get("WANDB_DIR", run_dir),
                    name=f"{group}:{job_type}",
                    group=group,
                    job_type=job_type,
                    tags=[str(t)[:64] for t in tags],
                    config={
                        **config,
                        "version": __version__,
                        "commit": commit(),
                        **({"sweep": sweep} if sweep else {}),
                    },
                    id=run_id,
                    resume="allow" if run_id else None,
                    mode=mode,
                    settings=wandb.Settings(**SETTINGS),
                )
            if tracker.run.disabled:  # WANDB_MODE=disabled: draw and log nothing, as --no-wandb
                tracker.finish()
                return tracker
            folder = os.path.relpath(
                os.path.dirname(os.path.abspath(tracker.run.dir)), os.path.abspath(run_dir)
            )
            if not folder.startswith(
                ".."
            ):  # wandb's folder of this run, its links to the latest one, the staged files
                parent = os.path.dirname(folder)
                note_written(
                    run_dir,
                    folder,
                    os.path.join(parent, "artifacts"),
                    *(
                        os.path.join(parent, link)
                        for link in ("latest-run", "debug.log", "debug-internal.log")
                        if os.path.islink(os.path.join(run_dir, parent, link))
                    ),
                    *(
                        os.path.join(parent, place)  # wandb's cache and config (never HOME)
                        for place in ("cache", "config")
                        if os.path.isdir(os.path.join(run_dir, parent, place))
                    ),
                )
            if run_id:  # resumed: steps between its checkpoint and the kill are logged already
                wandb_dir = os.path.join(os.environ.get("WANDB_DIR", run_dir), "wandb")
                tracker.logged_to = max(
                    last_logged_step(wandb_dir, run_id, tracker.run.dir),
                    (tracker.run.step or 0) - 1,  # online: the server's count
                )
            if keep_id:
                note_written(run_dir, ID_FILE)
                atomic_write(id_path, lambda f: f.write(tracker.run.id.encode()))
        return tracker

    @contextmanager
    def guard(self):
        """A wandb exception inside becomes one warning and a tracker that is off from then on. A
        stop signal waits until the wandb call is done (``signals_held``)."""
        with signals_held():
            try:
                yield
            except Exception as error:  # noqa: BLE001 — tracking must never stop a run
                reason = " ".join(str(error).split())[:160]  # one line, even for an HTML error page
                print(
                    f"warning: wandb tracking failed and is off for the rest of this run: {type(error).__name__}: {reason}",
                    file=sys.stderr,
                )
                run, self.run = self.run, None
                try:
                    import wandb

                    if run is not None:
                        run.finish(exit_code=1)
                    wandb.teardown()
                except Exception:  # noqa: BLE001
                    pass
                self.restore()

    def log(self, metrics: dict, step: int | None = None) -> None:
        if self.run is not None and (step is None or step > self.logged_to):
            with self.guard():
                self.run.log(metrics, step=step)

    def images(self, figures: dict, step: int | None = None) -> None:
        """Log images: matplotlib figures (the caller closes them) or PNG paths."""
        if self.run is not None and (step is None or step > self.logged_to):
            with self.guard():
                import wandb

                self.run.log({key: wandb.Image(fig) for key, fig in figures.items()}, step=step)

    def extrapolation(self, accuracy: dict[int, float], title: str) -> None:
        """Exact match against length, in % as the reports give it: a series over the step metric
        ``length`` (``extrapolation/exact_match``, one row per length), the same as a table and a
        line plot, and ``acc@L`` summaries. ``accuracy``: length → fraction."""
        if self.run is not None:
            with self.guard():
                import wandb

                percent = {n: 100 * acc for n, acc in sorted(accuracy.items())}
                self.run.define_metric("length", hidden=True)
                self.run.define_metric(
                    "extrapolation/exact_match", step_metric="length", summary="last"
                )
                for n, acc in percent.items():
                    self.run.log({"length": n, "extrapolation/exact_match": acc})
                table = wandb.Table(
                    columns=["length", "accuracy"], data=[[n, acc] for n, acc in percent.items()]
                )
                self.run.log(
                    {
                        "extrapolation/table": table,
                        "extrapolation/curve": wandb.plot.line(
                            table, "length", "accuracy", title=title
                        ),
                    }
                )
                for n, acc in percent.items():
                    self.run.summary[f"acc@{n}"] = acc

    def table(self, key: str, columns: list, rows: list) -> None:
        """Log ``rows`` as a ``wandb.Table`` under ``key``."""
        if self.run is not None:
            with self.guard():
                import wandb

                self.run.log(
                    {key: wandb.Table(columns=list(columns), data=[list(row) for row in rows])}
                )

    def summary(self, values: dict) -> None:
        if self.run is not None:
            with self.guard():
                self.run.summary.update(values)

    def artifact(self, name: str, kind: str, path: str, metadata: dict | None = None) -> None:
        """Log the file at ``path`` as an artifact (a checkpoint, an ABC bias)."""
        if self.run is not None:
            with self.guard():
                import wandb

                artifact = wandb.Artifact(name, type=kind, metadata=metadata or {})
                artifact.add_file(path)
                self.run.log_artifact(artifact)

    def use(self, name: str) -> None:
        """Record that this run consumes artifact ``name`` (lineage). With a server this is
        ``use_artifact``; offline wandb cannot, so the name goes to the config's ``uses``."""
        if self.run is not None:
            with self.guard():
                self.uses.append(name)
                self.run.config.update({"uses": self.uses}, allow_val_change=True)
                if not self.offline:
                    self.run.use_artifact(f"{name}:latest")

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, kind, error, trace) -> bool:
        self.finish(exit_code_of(error))
        return False

    def finish(self, exit_code: int = 0) -> None:
        """Close the run (``exit_code`` ≠ 0: failed) and wandb's session."""
        if self.run is not None:
            try:
                with self.guard():
                    import wandb

                    self.run.finish(exit_code=exit_code)
                    wandb.teardown()
            finally:  # a stop signal held during the finish is raised after it
                self.run = None
                self.restore()

    def restore(self) -> None:
        """``WANDB_DATA_DIR`` as it was before this run started."""
        if self.data_dir is not None:
            (before,), self.data_dir = self.data_dir, None
            if before is None:
                os.environ.pop("WANDB_DATA_DIR", None)
            else:
                os.environ["WANDB_DATA_DIR"] = before
