"""`abcmini reproduce`: the paper's experiments end to end on a CPU, resumable.

Every (task, method, seed) is one job with its own run directory. A job trains (resuming from
its checkpoint if one exists), evaluates at the paper's lengths and writes ``eval.json``; a job
whose ``eval.json`` exists is done and skipped, so an interrupted reproduction continues where
it stopped. An ABC job starts once the Vanilla run of its task and seed is done, calibrates it
and retrains with the calibrated bias; those Vanilla runs and ABC go first (``next_job``). Jobs
run in parallel worker processes, one thread each (on two cores two small models train faster
side by side than one with two threads). Each invocation's wall time is kept beside the runs.
"""

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, replace

from abcmini.positions import IN_ATTENTION
from abcmini.train import RunConfig, Trainer, resolve_method

MAIN_TASKS = ("successor", "addition", "nx1")
ABS_TASKS = ("successor", "addition", "nx1", "parity")
MAIN_METHODS = ("vanilla", "alibi", "rope", "abc")
ABS_METHODS = ("vanilla", "+w=1", "+T=3", "NoPE+w=1")


@dataclass(frozen=True)
class Recipe:
    """How every cell is trained on 2 CPU cores (README, "The CPU recipe").

    Fixed geometry wide enough for the 60-digit column (the paper's protocol), the authors'
    identity encoder, Adam at 1e-3 with warmup and cosine decay, and a stopping rule: stop once
    validation exact match reaches ``stop_at`` (ABS windows: train on to ``train_on`` times the
    step that reached it), or at the method's step cap.
    """

    pad_width: int = 64
    lengths: tuple = (6, 10, 15, 20, 60)
    preset: str = "cpu"
    enc_layers: int = 0
    enc_layers_in_attention: int = 1  # RoPE, ALiBi: positions act inside self-attention only, so with the
    # identity encoder the input tokens carry none (Successor RoPE: 0.4% validation after 3,500 steps)
    lr: float = 1e-3
    batch_size: int = 128
    eval_every: int = 250
    valid_size: int = 1000
    stop_at: float = 0.999  # scaffolded runs (ABS windows, ABC retraining): cheap to push to 99.9%
    stop_at_plain: float = 0.995  # unscaffolded runs: interpolation, enough for ABC (which needs 99%)
    train_on: float = 1.5  # ABS windows: 99.9% on ≤ 7 digits comes before long carries are reliable
    # (N×1 +T=3: 98.9 at 60 digits when stopped at 99.9% validation, 99.8 trained on). Not ABC:
    # trained on, an ABC model loses extrapolation (Successor: 98.7 → 94.5 at 20 digits, 1000 → 2000 steps)
    steps: int = 4000  # cap for runs expected to interpolate
    steps_addition_plain: int = 20000  # Vanilla Addition at pad 64 sits on a loss plateau (0.21) for
    # ~2000 steps and at 0.035 (validation ~10%) from 12,000 to 13,750; it interpolated at 14,250
    steps_alibi: int = 1500  # ALiBi does not interpolate (paper §3); capped short
    steps_parity_plain: int = 300  # Parity's scratchpad without a window fails (paper: 29% at 6 digits) and
    # its 214-token sequences cost ~10× a Successor step (3.6 s on one core); capped short
    scaffold_pe_scale: float = 1 / 16  # `+w=1` (uncycled sinusoidal + window): positions at 1/16 amplitude
    abc_scheme: str = "nope"  # ABC retrains without positional encoding: the bias is its only position signal
    calibration_samples: int = 1000
    # ABC calibrates cross-attention along anti-diagonals and verticals only, and the decoder layers
    # that hold the task's algorithm (README, "ABC"). Successor at 60 digits, seeds 0 / 1, went 95.9
    # (last layer, every direction) → 98.4 / 98.0 (first layer) → 100.0 / 100.0 (first layer, no
    # Δ = +1 cross lines); N×1's first layer has no line to digit t + 1 (9% validation), its last does;
    # Addition's last layer reads digits t + 1 only, so the carry is out of reach (14.7% validation after
    # 1,250 steps); united with the first layer (digit t of a, self-attention to row t − 1) it learns
    calibration_layers: tuple = (("successor", (0,)), ("addition", (0, 1)), ("nx1", (-1,)))
    # Decoder self-attention along diagonals and verticals only: an anti-diagonal of the causal square
    # (row i reads output c − i) touches only rows c/2 … c, so it is never extended, only a bump near the
    # training length (N×1 seed 1 kept lines c = 6 and 11: 84.3% at 60 digits, its errors at rows 7–10)
    self_directions: tuple = (1, 0)
    cross_directions: tuple = (-1, 0)
    kappa_cross: float = 4.5  # the paper's dropoff factor for cross-attention
    skip_start: bool = True  # self-attention diagonals are averaged without their SOS cell (``calibrate``): heads park
    # attention on SOS, and one such cell carried diagonals −3 / −4 (Addition: 2.5% error per row from row 7 on)
    transparent_empty: bool = False  # empty heads silent, not transparent (``calibrate.LineBias``): a transparent
    # cross head reads the whole input, whose content grows with length (N×1 seed 2: 99.3 at 20 digits, 74.9 at 60)


# Pad width 24 leaves 32 anti-diagonals in the 8 trusted rows; a head with two equally strong ones
# (digits t and t + 1) is then at most sqrt((32 − 2) / 2) = 3.9 σ above the mean, so κ = 4.5
# could never keep them (at pad 64, 72 lines: 5.9 σ). Measured: κ 4.5 left every cross head empty.
QUICK = Recipe(pad_width=24, lengths=(6, 10, 15, 20), steps=1500, valid_size=500, calibration_samples=500,
               kappa_cross=3.0)



@dataclass(frozen=True)
class Job:
    task: str
    method: str  # a table name: vanilla, alibi, rope, abc, +w=1, +T=3, NoPE+w=1, …
    seed: int
    root: str

    @property
    def run_dir(self) -> str:
        safe = self.method.replace("+", "_").replace("=", "")
        return os.path.join(self.root, self.task, f"{safe}-s{self.seed}")

    def source(self) -> "Job":
        """The Vanilla run an ABC job calibrates from."""
        return replace(self, method="vanilla")


def plan(tasks, methods, seeds, root: str) -> list[Job]:
    """Jobs for every requested cell of the paper's tables (ABC needs its Vanilla source)."""
    jobs = []
    for task in tasks:
        for method in methods:
            if method in ("abc", "alibi", "rope") and task not in MAIN_TASKS:
                continue  # the paper's main table has no Parity row (Vanilla cannot interpolate it)
            for seed in seeds:
                jobs.append(Job(task, method, seed, root))
                if method == "abc" and "vanilla" not in methods:
                    jobs.append(Job(task, "vanilla", seed, root))
    return list(dict.fromkeys(jobs))


def run_config(job: Job, recipe: Recipe, bias_file: str | None = None) -> RunConfig:
    scheme, window, period = resolve_method(recipe.abc_scheme if job.method == "abc" else job.method, None, 0)
    scaffolded = window is not None or bias_file is not None
    overrides = {"enc_layers": recipe.enc_layers_in_attention if scheme in IN_ATTENTION else recipe.enc_layers}
    if scaffolded and scheme == "vanilla" and period == 0:  # uncycled sinusoidal positions beside a scaffold
        overrides["pe_scale"] = recipe.scaffold_pe_scale
    steps = recipe.steps_alibi if scheme == "alibi" else recipe.steps
    if job.task == "addition" and job.method == "vanilla":
        steps = recipe.steps_addition_plain
    if job.task == "parity" and not scaffolded:
        steps = recipe.steps_parity_plain
    return RunConfig(
        task=job.task, scheme=scheme, period=period, window=window, bias_file=bias_file, preset=recipe.preset,
        pad_width=recipe.pad_width, seed=job.seed, steps=steps,
        batch_size=recipe.batch_size, lr=recipe.lr, stop_at=recipe.stop_at if scaffolded else recipe.stop_at_plain,
        train_on=recipe.train_on if window is not None else 1.0, eval_every=recipe.eval_every,
        valid_size=recipe.valid_size, model_overrides=overrides,
    )


def train(cfg: RunConfig, run_dir: str) -> Trainer:
    """Train (or finish training) one run; a run that already stopped returns at once."""
    trainer = Trainer(cfg)
    trainer.resume(run_dir)
    if not trainer.stopped:
        trainer.run(run_dir)
    return trainer


def run_job(job: Job, recipe: Recipe) -> dict:
    """Train, (calibrate,) evaluate one cell; writes and returns its ``eval.json`` content."""
    import torch

    from abcmini.calibrate import Calibrated, calibrate_run
    from abcmini.evaluate import EVAL_FILE, extrapolation_accuracy, write_eval_report
    from abcmini.figures import calibration_figures

    torch.set_num_threads(1)
    path = os.path.join(job.run_dir, EVAL_FILE)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    start = time.perf_counter()
    extra = {}
    bias_file = None
    if job.method == "abc":
        source = job.source()
        source_trainer = train(run_config(source, recipe), source.run_dir)
        bias_file = os.path.join(job.run_dir, "abc_bias.pt")
        os.makedirs(job.run_dir, exist_ok=True)
        if not os.path.exists(bias_file):
            began = time.perf_counter()
            result = calibrate_run(source.run_dir, bias_file, recipe.calibration_samples, recipe.kappa_cross,
                                   layers=dict(recipe.calibration_layers)[job.task], deltas=recipe.self_directions,
                                   cross_deltas=recipe.cross_directions, transparent_empty=recipe.transparent_empty,
                                   skip_start=recipe.skip_start)
            extra["calibration_seconds"] = round(time.perf_counter() - began, 2)
            calibration_figures(job.run_dir, job.task, result["attention"]["self"], result["attention"]["cross"],
                                Calibrated.from_state(result["bias"]), result["example"], result["layers"])
        extra["interpolation_steps"] = source_trainer.history[-1]["step"]
        extra["interpolation_seconds"] = source_trainer.history[-1]["seconds"]
    cfg = run_config(job, recipe, bias_file)
    trainer = train(cfg, job.run_dir)
    accuracy = {n: extrapolation_accuracy(trainer.model, cfg.task, n, cfg.pad_width, 0, trainer.bias, cfg.aligned)
                for n in recipe.lengths}
    return write_eval_report(job.run_dir, cfg, accuracy, 0, trainer.history[-1], **extra,
                             job_seconds=round(time.perf_counter() - start, 2), recipe=asdict(recipe))


def exit_with_parent(parent: int, every: float = 1.0) -> None:
    """Worker initializer: end this worker when the ``reproduce`` process that started it is gone
    (killed or interrupted), instead of training on as an orphan. Checkpoints are written
    atomically, so leaving mid-step loses at most the steps since the last one."""

    def watch():
        while os.getppid() == parent:
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
        return cls(root=jobs[0].root, started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   tasks=unique(j.task for j in jobs), methods=unique(j.method for j in jobs),
                   seeds=sorted({j.seed for j in jobs}), workers=workers, jobs=len(jobs), to_do=to_do)

    def save(self) -> None:
        entries = [e for e in read_invocations(self.root) if e["started"] != self.started]
        entry = {k: v for k, v in asdict(self).items() if k != "root"}
        os.makedirs(self.root, exist_ok=True)
        path = os.path.join(self.root, INVOCATIONS)
        with open(path + ".tmp", "w") as f:
            json.dump(entries + [entry], f, indent=1)
        os.replace(path + ".tmp", path)


def read_invocations(root: str) -> list[dict]:
    path = os.path.join(root, INVOCATIONS)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def next_job(waiting: list[Job], busy: set[Job]) -> Job | None:
    """The job to start next, so the main table comes first and ABC never waits on unrelated runs:
    an ABC job whose Vanilla source is done (not in ``busy``, the jobs waiting or running), else a
    Vanilla source an ABC job waits for, else the first waiting job; None while every waiting job
    is an ABC job whose source is still running."""
    sources = {job.source() for job in waiting if job.method == "abc"}
    ready = [job for job in waiting if job.method != "abc" or job.source() not in busy]
    ranked = sorted(ready, key=lambda job: (job.method != "abc", job not in sources))  # stable: plan order within a rank
    return ranked[0] if ranked else None


def run_all(jobs: list[Job], recipe: Recipe, workers: int, on_done=None) -> list[dict]:
    """Every job on ``workers`` processes, in ``next_job``'s order (ABC after its Vanilla run).
    The invocation's wall time goes to ``ROOT/invocations.json`` (``Invocation``)."""
    results = []
    start, to_do = time.perf_counter(), {j for j in jobs if not os.path.exists(os.path.join(j.run_dir, "eval.json"))}
    invocation = Invocation.begin(jobs, workers, len(to_do))
    invocation.save()
    waiting, running = list(jobs), {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=exit_with_parent,
                             initargs=(os.getpid(),)) as pool:
        while waiting or running:
            while len(running) < workers and (job := next_job(waiting, {*waiting, *running.values()})):
                waiting.remove(job)
                running[pool.submit(run_job, job, recipe)] = job
            finished, _ = wait(running, timeout=60, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                try:
                    result = future.result()
                except Exception as error:  # noqa: BLE001 — one failed cell must not stop the others
                    result = {"task": job.task, "method": job.method, "seed": job.seed, "error": str(error)}
                results.append(result)
                invocation.done += job in to_do and "error" not in result
                if on_done:
                    on_done(job, result)
            invocation.seconds = round(time.perf_counter() - start, 1)
            invocation.save()  # at least once a minute and after every job: a killed invocation still counts
    invocation.seconds, invocation.finished = round(time.perf_counter() - start, 1), True
    invocation.save()
    return results
