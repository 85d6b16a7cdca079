"""`abcmini reproduce`: the cells of the paper's tables over worker processes, resumable.

A loop over cells plus scheduling: each cell resolves through ``experiment.resolve`` and runs
through ``pipeline.run_cell``, exactly as ``abcmini train --recipe R`` runs it. A cell whose
``eval.json`` holds every length is done and skipped, so an interrupted reproduction continues
where it stopped. An ABC cell calibrates the Vanilla cell of its task and seed, so it starts once
that one is done; those two go first (``next_job``). Workers use one thread each (on two cores
two small models train faster side by side than one with two threads). Each invocation's wall
time is kept beside the runs (``Invocation``).
"""

import json
import multiprocessing
import os
import signal
import threading
import time
import traceback
from contextlib import ExitStack, redirect_stdout
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import connection

from abcmini import commit
from abcmini.config import Recipe
from abcmini.errors import Stopped, UserError
from abcmini.experiment import MAIN_TASKS, Cell, Experiment, cell_dir, resolve
from abcmini.pipeline import LogHooks, Tracking, run_cell, train_source, use_threads
from abcmini.store import StoreError, lock_run, note_written, read_eval, save_json

WORKER_THREADS = 1


@dataclass(frozen=True)
class Job:
    """A resolved cell and where it runs (ABC: and the run directory of its source).
    ``train_only``: an ABC source that is no cell of the table, trained but not tested."""

    experiment: Experiment
    root: str
    train_only: bool = field(default=False, compare=False)
    group: str | None = field(default=None, compare=False)  # a source's: the ABC cell it serves

    @property
    def run_dir(self) -> str:
        return cell_dir(self.root, self.experiment)

    @property
    def source_dir(self) -> str | None:
        return (
            cell_dir(self.root, self.experiment.source_experiment())
            if self.experiment.source
            else None
        )

    @property
    def cell(self) -> Cell:
        return self.experiment.cell

    def source(self) -> "Job":
        """The Vanilla cell an ABC job calibrates from."""
        return Job(
            self.experiment.source_experiment(),
            self.root,
            train_only=True,
            group=self.experiment.identity,
        )

    def done(self) -> bool:
        if self.train_only:  # resuming a finished training costs a checkpoint read
            return False
        record = read_eval(self.run_dir) if os.path.isdir(self.run_dir) else None
        return record is not None and not self.experiment.to_test(record.get("accuracy", {}))


def table_cells(tasks, methods, seeds) -> list[Cell]:
    """The cells of the paper's two tables among ``tasks × methods × seeds`` (the main table has
    no Parity row: Vanilla cannot interpolate it, so there is nothing to calibrate)."""
    cells = [Cell.of(task, method, seed) for task in tasks for method in methods for seed in seeds]
    return [
        cell
        for cell in cells
        if cell.task in MAIN_TASKS or cell.method not in ("abc", "alibi", "rope")
    ]


def plan(recipe: Recipe, cells, root: str, overrides: dict | None = None) -> list[Job]:
    """A job per cell, resolved (and so validated) before any training; an ABC cell brings the
    Vanilla run it calibrates from, tested only where it is a cell of the table too."""
    cells = [Job(resolve(recipe, cell, overrides), root) for cell in cells]
    jobs = [
        one for job in cells for one in ([job, job.source()] if job.experiment.source else [job])
    ]
    return [replace(job, train_only=job not in cells) for job in dict.fromkeys(jobs)]


CELL_LOG = "log.txt"  # a reproduce cell's progress lines, in its run directory


def run_job(job: Job, tracking: Tracking = Tracking()) -> dict:
    """One cell in a worker: train, (calibrate,) evaluate; returns its result record."""
    use_threads(WORKER_THREADS)
    with ExitStack() as locks:  # a directory another process writes: this cell is skipped
        for directory in (job.run_dir, None if job.train_only else job.source_dir):
            if directory:
                try:
                    locks.enter_context(lock_run(directory))
                except StoreError as error:
                    raise StoreError(f"skipped: {error}") from None
        note_written(job.run_dir, CELL_LOG)  # the cell's progress lines: its wandb console too
        log = locks.enter_context(open(os.path.join(job.run_dir, CELL_LOG), "a", buffering=1))
        locks.enter_context(redirect_stdout(log))
        hooks = LogHooks()
        if job.train_only:
            trainer = train_source(
                job.experiment, job.run_dir, hooks=hooks, tracking=tracking, group=job.group
            )
            last = trainer.history[-1] if trainer.history else {}
            return {
                "task": job.cell.task,
                "method": job.experiment.run.label,
                "seed": job.cell.seed,
                "train_steps": last.get("step"),
                "train_seconds": last.get("seconds"),
                "valid_acc": last.get("valid_acc"),
            }
        if job.done():
            return read_eval(job.run_dir)
        return run_cell(job.experiment, job.run_dir, job.source_dir, hooks=hooks, tracking=tracking)


def exit_with_parent(parent: int, every: float = 1.0, stop=None) -> None:
    """Worker initializer: end this worker when the ``reproduce`` process that started it is gone
    (killed) or sets ``stop`` (interrupted), instead of training on. Checkpoints are written
    atomically, so leaving mid-step loses at most the steps since the last one."""

    def watch():
        while os.getppid() == parent and not (stop is not None and stop.is_set()):
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


INVOCATIONS = "invocations.json"


@dataclass
class Invocation:
    """One ``run_all`` over a reproduction root, kept in ``ROOT/invocations.json`` and saved
    once a minute and after every job, so an interrupted invocation still counts its time. The wall
    time of a reproduction resumed over several invocations is the sum of theirs."""

    root: str
    started: str  # UTC, ISO 8601
    tasks: list
    methods: list
    seeds: list
    workers: int
    jobs: int
    to_do: int  # jobs without an eval.json when it started
    done: int = 0  # of those, finished by this invocation
    seconds: float = 0.0
    finished: bool = False

    @classmethod
    def begin(cls, jobs: list[Job], workers: int, to_do: int) -> "Invocation":
        unique = lambda values: list(dict.fromkeys(values))  # noqa: E731
        return cls(
            root=jobs[0].root,
            started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            tasks=unique(j.cell.task for j in jobs),
            methods=unique(j.cell.method for j in jobs),
            seeds=sorted({j.cell.seed for j in jobs}),
            workers=workers,
            jobs=len(jobs),
            to_do=to_do,
        )

    def save(self) -> None:
        entries = [e for e in read_invocations(self.root) if e["started"] != self.started]
        entry = {k: v for k, v in asdict(self).items() if k != "root"}
        os.makedirs(self.root, exist_ok=True)
        save_json(os.path.join(self.root, INVOCATIONS), entries + [entry])


INVOCATION_FIELDS = {
    "started": str,
    "tasks": list,
    "methods": list,
    "seeds": list,
    "jobs": int,
    "to_do": int,
    "done": int,
    "seconds": (int, float),
    "finished": bool,
}


def read_invocations(root: str) -> list[dict]:
    """``ROOT/invocations.json``, checked: a list of invocations, each with every field ``report`` reads."""
    path = os.path.join(root, INVOCATIONS)
    if not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError) as error:
        raise StoreError(
            f"invocations ledger {path!r} is unreadable or not valid JSON ({type(error).__name__}); move it away to start a new one"
        ) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StoreError(f"invocations ledger {path!r} must hold a list of invocations (objects)")
    for i, entry in enumerate(entries):
        for name, kind in INVOCATION_FIELDS.items():
            if not isinstance(entry.get(name), kind) or (
                kind is int and isinstance(entry.get(name), bool)
            ):
                raise StoreError(
                    f"invocations ledger {path!r}: invocation {i} lacks {name!r} or it is not {getattr(kind, '__name__', 'a number')}"
                )
    return entries


def next_job(waiting: list[Job], busy: set[Job]) -> Job | None:
    """The job to start next, so the main table comes first and ABC never waits on unrelated runs:
    an ABC job whose Vanilla source is done (not in ``busy``, the jobs waiting or running), else a
    Vanilla source an ABC job waits for, else the first waiting job; None while every waiting job
    is an ABC job whose source is still running."""
    abc = lambda job: job.experiment.source is not None  # noqa: E731
    sources = {job.source() for job in waiting if abc(job)}
    ready = [job for job in waiting if not abc(job) or job.source() not in busy]
    ranked = sorted(
        ready, key=lambda job: (not abc(job), job not in sources)
    )  # stable: plan order within a rank
    return ranked[0] if ranked else None


def run_all(
    jobs: list[Job], workers: int, on_done=None, tracking: Tracking = Tracking(), on_wait=None
) -> list[dict]:
    """Every job in a worker process of its own, ``workers`` at a time, in ``next_job``'s order
    (ABC after its Vanilla run). A worker that dies (the OOM killer's SIGKILL) costs its own cell
    only: the cell is recorded as failed with the signal, the others go on. The invocation's wall
    time and finished cells go to ``ROOT/invocations.json`` (``Invocation``), also when it is
    interrupted: then the workers stop within a second and it re-raises. ``on_wait(jobs)`` is
    called with the running jobs whenever a job starts and at least once a minute."""
    results = []
    start, to_do = time.perf_counter(), {job for job in jobs if not job.done()}
    invocation = Invocation.begin(jobs, workers, len(to_do))
    invocation.save()
    waiting, running = list(jobs), {}  # running: a worker's receiving end → (job, process)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    try:
        try:
            while waiting or running:
                while len(running) < workers and (
                    job := next_job(waiting, {*waiting, *(j for j, _ in running.values())})
                ):
                    waiting.remove(job)
                    receive, send = context.Pipe(duplex=False)
                    process = context.Process(
                        target=work, args=(job, tracking, send, os.getpid(), stop)
                    )
                    process.start()
                    send.close()  # the worker holds the only sending end: its death reads as end of file
                    running[receive] = (job, process)
                    if on_wait:
                        on_wait([j for j, _ in running.values()])
                ready = set(
                    connection.wait(
                        [*running, *(process.sentinel for _, process in running.values())],
                        timeout=60,
                    )
                )
                for receive, (job, process) in list(running.items()):
                    if receive in ready or process.sentinel in ready:
                        del running[receive]
                        result = collect(job, receive, process)
                        results.append(result)
                        invocation.done += job in to_do and "error" not in result
                        if on_done:
                            on_done(job, result)
                invocation.seconds = round(time.perf_counter() - start, 1)
                invocation.save()  # at least once a minute and after every job: a killed invocation still counts
                if on_wait and running and not ready:
                    on_wait([j for j, _ in running.values()])
        except (KeyboardInterrupt, Stopped):
            stop.set()  # the workers leave at once; their checkpoints stay
            for _, process in running.values():
                process.join()
            raise
        invocation.finished = True
    finally:
        invocation.seconds = round(time.perf_counter() - start, 1)
        invocation.save()
    return results


def work(job: Job, tracking: Tracking, send, parent: int, stop) -> None:
    """A worker process: one cell; its result record, or its error, goes back through ``send``."""
    exit_with_parent(parent, 1.0, stop)
    commit()  # as the cell starts, as the CLI does
    try:
        result = run_job(job, tracking)
    except Exception as error:  # noqa: BLE001 — one failed cell must not stop the others
        result = failure(job, error)
    send.send(result)
    send.close()


def collect(job: Job, receive, process) -> dict:
    """A finished worker's result, or, when it died before sending one, the cause."""
    try:
        result = receive.recv()
    except EOFError:  # the worker ended without sending
        result = None
    receive.close()
    process.join()
    if result is not None:
        return result
    code = process.exitcode
    cause = (
        f"killed by signal {-code} ({signal.Signals(-code).name})"
        if code < 0
        else f"ended with exit code {code}"
    )
    return {
        "task": job.cell.task,
        "method": job.cell.method,
        "seed": job.cell.seed,
        "error": f"its worker was {cause} before the cell finished; the cell keeps its last checkpoint and the same command resumes it",
    }


def failure(job: Job, error: Exception) -> dict:
    """A cell's error as its result (a bug's with its traceback)."""
    result = {
        "task": job.cell.task,
        "method": job.cell.method,
        "seed": job.cell.seed,
        "error": str(error),
    }
    if not isinstance(error, UserError):
        result["traceback"] = "".join(traceback.format_exception(error))
    return result
