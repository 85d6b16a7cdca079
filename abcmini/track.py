"""Weights & Biases tracking, offline first, never in the way of a run.

- No API key configured (``WANDB_API_KEY`` or a netrc entry) and no ``WANDB_MODE`` set: the
  run is logged offline (``WANDB_MODE=offline`` is put in the environment, the only way wandb
  makes no network call at all); ``wandb sync`` uploads it later. ``WANDB_MODE``, ``WANDB_DIR``
  and ``WANDB_PROJECT`` are respected; files go to ``RUN_DIR/wandb`` unless ``WANDB_DIR`` says
  otherwise.
- Every call is guarded: if wandb fails (not installed, disk full, a server error), the tracker
  warns once on stderr and turns itself off; the run goes on.
"""

import os
import sys
from contextlib import contextmanager
from urllib.parse import urlparse

DEFAULT_PROJECT = "abcmini"


def has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    netrc = os.environ.get("NETRC", os.path.expanduser("~/.netrc"))
    try:
        with open(netrc) as f:
            return host in f.read()
    except OSError:
        return False


class Tracker:
    """A wandb run, or nothing (``--no-wandb``, or after a wandb failure). Use it as a context
    manager so the run is finished however the command ends."""

    def __init__(self, run=None):
        self.run = run

    @classmethod
    def start(cls, enabled: bool, run_dir: str, job_type: str, config: dict, project: str | None = None,
              group: str | None = None) -> "Tracker":
        if not enabled:
            return cls()
        tracker = cls()
        with tracker.guard():
            if "WANDB_MODE" not in os.environ and not has_api_key():
                os.environ["WANDB_MODE"] = "offline"
            import wandb

            os.makedirs(run_dir, exist_ok=True)
            name = os.path.basename(os.path.normpath(run_dir))
            tracker.run = wandb.init(
                project=project or os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT),
                dir=os.environ.get("WANDB_DIR", run_dir), name=f"{name}-{job_type}", group=group or name, job_type=job_type,
                config=config, settings=wandb.Settings(console="off", x_disable_stats=True, disable_git=True, x_save_requirements=False),
            )
        return tracker

    @contextmanager
    def guard(self):
        """A wandb exception inside becomes one warning and a tracker that is off from then on."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 — tracking must never stop a run
            print(f"warning: wandb tracking failed and is off for the rest of this run: {error}", file=sys.stderr)
            run, self.run = self.run, None
            try:
                import wandb

                if run is not None:
                    run.finish(exit_code=1)
                wandb.teardown()
            except Exception:  # noqa: BLE001
                pass

    def log(self, metrics: dict, step: int | None = None) -> None:
        if self.run is not None:
            with self.guard():
                self.run.log(metrics, step=step)

    def images(self, figures: dict, step: int | None = None) -> None:
        """Log images: matplotlib figures (the caller closes them) or PNG paths."""
        if self.run is not None:
            with self.guard():
                import wandb

                self.run.log({key: wandb.Image(fig) for key, fig in figures.items()}, step=step)

    def extrapolation(self, accuracy: dict[int, float], title: str) -> None:
        """The accuracy-vs-length curve as a table and a line plot, and ``acc@L`` summaries."""
        if self.run is not None:
            with self.guard():
                import wandb

                table = wandb.Table(columns=["length", "accuracy"], data=[[n, acc] for n, acc in sorted(accuracy.items())])
                self.run.log({"extrapolation/table": table,
                              "extrapolation/curve": wandb.plot.line(table, "length", "accuracy", title=title)})
                for n, acc in accuracy.items():
                    self.run.summary[f"acc@{n}"] = acc

    def summary(self, values: dict) -> None:
        if self.run is not None:
            with self.guard():
                self.run.summary.update(values)

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, *exc) -> bool:
        self.finish()  # also when the command stops with an error: no run is left open
        return False

    def finish(self) -> None:
        """Close the run and wandb's session: one command, one self-contained wandb session."""
        if self.run is not None:
            with self.guard():
                import wandb

                self.run.finish()
                wandb.teardown()
            self.run = None
