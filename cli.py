"""abcmini command line: train, eval, calibrate, recipe, report, reproduce, sweep.

Parses, calls and prints. Every command resolves its cell through ``abcmini.experiment``; an
option given on the command line overrides one field of the recipe and is recorded as such.
Options also take the underscore spelling a wandb sweep agent passes (``--pad_width=64``).
"""

import os
import shutil
import sys
import time
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from typer._click.exceptions import ClickException, NoArgsIsHelpError  # typer vendors Click (≥ 0.26)
from typer.core import TyperGroup

from abcmini.errors import UserError
from abcmini.track import Tracker

console = Console()
errors = Console(stderr=True)


class OneLineErrors(TyperGroup):
    """Typer's own parse errors (``--steps abc``, an unknown option) as one line and exit code 2,
    like the errors our commands raise, instead of a usage panel."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except NoArgsIsHelpError as error:
            console.print(error.format_message(), highlight=False)
            sys.exit(0)
        except ClickException as error:
            errors.print(f"[bold red]error:[/] {error.format_message()}", highlight=False, soft_wrap=True)
            sys.exit(error.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    help="Attention Bias Scaffolding and Calibration for arithmetic length generalization.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"token_normalize_func": lambda name: name.replace("_", "-")},  # --pad_width → --pad-width
)
LOG_EVERY = 10  # training loss and learning rate go to wandb every this many steps


@contextmanager
def user_errors():
    """A user's error (``abcmini.errors.UserError``) as one line and exit code 2; a bug keeps its traceback."""
    try:
        yield
    except UserError as error:
        errors.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def parse_integers(text: str, option: str, minimum: int | None = None) -> tuple[int, ...]:
    parts = [part.strip() for part in text.split(",")]
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        raise UserError(f"{option} takes comma-separated integers, got {text!r}") from None
    bad = [n for n in values if minimum is not None and n < minimum]
    if bad:
        raise UserError(f"{option} must be at least {minimum}, got {bad[0]}")
    return values


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but CUDA is not available")
    if device != "cpu" and not device.startswith("cuda"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu or cuda")
    return device


def tracking_config(experiment: dict, label: str) -> dict:
    """The wandb config of a run: its run configuration's fields flat (so the runs table groups
    by task, method, pad width …), the method as the tables name it, and the rest of its cell."""
    from abcmini import __version__

    run = experiment["run"]
    return {**run, "method": label, "cell_method": experiment["cell"]["method"], "recipe": experiment["recipe"],
            "geometry": "fixed" if run["pad_width"] else "growing", "lengths": experiment["lengths"],
            "test_seed": experiment["test_seed"], "overrides": experiment["overrides"], "source": experiment["source"],
            "calibration": experiment["calibration"], "version": __version__}


class ConsoleHooks:
    """A cell's progress on the console (a bar with an ETA on a terminal, a line per evaluation
    otherwise) and in wandb (the cell's own run)."""

    def __init__(self, tracker: Tracker):
        self.tracker, self.progress, self.bar, self.role, self.cfg = tracker, None, None, None, None

    @contextmanager
    def training(self, role, trainer):
        self.role, self.cfg = role, trainer.cfg
        console.print(f"[bold]{'train' if role == 'run' else 'ABC source'}[/] {trainer.cfg.task} · {trainer.cfg.label} · "
                      f"{'pad width ' + str(trainer.cfg.pad_width) if trainer.cfg.pad_width else 'growing geometry'} · "
                      f"seed {trainer.cfg.seed} → {trainer.run_dir}", soft_wrap=True, highlight=False)
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("loss {task.fields[loss]:.4f} · valid {task.fields[valid]}"), TimeElapsedColumn(), TimeRemainingColumn()]
        with Progress(*columns, console=console) as self.progress:
            self.bar = self.progress.add_task("training", total=trainer.cfg.steps, completed=trainer.step_count, loss=float("nan"), valid="–")
            yield
        last = trainer.history[-1] if trainer.history else {}
        console.print(f"done: step {last.get('step')} · valid exact match {last.get('valid_acc', 0):.2%} · {last.get('seconds', 0):.0f}s")

    def step(self, step, loss):
        from abcmini.experiment import learning_rate

        self.progress.update(self.bar, completed=step, loss=loss)
        if self.role == "run" and step % LOG_EVERY == 0:
            self.tracker.log({"train/loss": loss, "train/lr": learning_rate(self.cfg, step - 1)}, step=step)

    def validated(self, entry):
        self.progress.update(self.bar, valid=f"{entry['valid_acc']:.2%}")
        if self.role == "run":
            self.tracker.log({"valid/exact_match": entry["valid_acc"], "train/loss_mean": entry["loss"], "train/seconds": entry["seconds"]},
                             step=entry["step"])
        if not console.is_terminal:  # a log file gets one plain line per evaluation
            console.print(f"step {entry['step']:>6} · loss {entry['loss']:.4f} · valid {entry['valid_acc']:.2%} · {entry['seconds']:.0f}s")
            sys.stdout.flush()

    def calibrated(self, result, seconds, pngs):
        print_calibration(result, seconds)
        self.tracker.images({f"calibration/{name}": png for name, png in pngs.items()})

    def trained(self, trainer):
        last = trainer.history[-1] if trainer.history else {}
        self.tracker.summary({"valid/exact_match": last.get("valid_acc", 0.0), "steps": last.get("step", 0), "train/seconds": last.get("seconds", 0.0)})
        log_model_figures(self.tracker, trainer.cfg, trainer.model, trainer.valid, trainer.step_count)

    def evaluated(self, length, accuracy, seconds):
        console.print(f"length {length:>3}: {accuracy:.2%} ({seconds:.1f}s)", highlight=False)
        sys.stdout.flush()


def print_calibration(result: dict, seconds: float) -> None:
    import torch

    from abcmini.biases import Calibrated

    calibrated = Calibrated.from_state(result["bias"])
    for kind, table in (("cross", calibrated.cross_attention), ("self", calibrated.self_attention)):
        open_lines = torch.isfinite(table.values).sum(dim=(0, 2)).tolist()
        console.print(f"{kind:>5}-attention: open lines per head {open_lines}; empty heads "
                      f"{table.transparent.nonzero().flatten().tolist() or 'none'}", highlight=False)
    console.print(f"calibrated {result['source']} on {result['calibration']['samples']} training inputs in {seconds:.1f}s", soft_wrap=True, highlight=False)


def print_accuracy(record: dict) -> None:
    title = f"{record['task']} · {record['method']} · {'pad ' + str(record['pad_width']) if record['pad_width'] else 'growing'} · seed {record['seed']}"
    table = Table(title=title)
    table.add_column("length", justify="right")
    table.add_column("exact match", justify="right")
    for length, acc in record["accuracy"].items():
        table.add_row(length, f"{100 * acc:.2f}%")
    console.print(table)


def log_model_figures(tracker, cfg, model, example, step=None):
    """Attention heatmaps for a fixed input and the run's scaffold (ABS window / ABC bias), per head."""
    if tracker.run is None:
        return
    from abcmini.figures import attention_figures, bias_figures, close
    from abcmini.tasks import detokenize

    figures = attention_figures(model, example, cfg.label)
    if model.scaffold is not None:
        figures |= bias_figures(model.scaffold, example.tgt_out.shape[1], detokenize(example.src[0]), cfg.label)
    tracker.images(figures, step=step)
    for fig in figures.values():
        close(fig)


@app.command()
def train(
    task: str = typer.Option("successor", help="successor | addition | nx1 | parity | parity_class"),
    method: str = typer.Option("vanilla", help="vanilla | nope | rope | alibi | relative | abc, or ABS: +w=1 | +T=3 | NoPE+w=1 | vanilla+w=2+T=4 …"),
    seed: int = typer.Option(0, help="Seed of the initialisation and batch order."),
    recipe: str = typer.Option("paper", help="paper | quick | a recipe YAML file; every value below defaults to it."),
    window: int = typer.Option(None, help="ABS window w (with a scheme as --method)."),
    period: int = typer.Option(None, help="CPI period T: positions i mod T."),
    preset: str = typer.Option(None, help="Model size: paper | cpu | tiny."),
    enc_layers: int = typer.Option(None, help="Encoder depth (0: cross-attention reads the embedded input)."),
    pe_scale: float = typer.Option(None, help="Amplitude of the sinusoidal encoding."),
    pad_width: int = typer.Option(None, help="The fixed frame: operands padded to this many digits."),
    growing: bool = typer.Option(False, "--growing", help="Growing geometry: the pad width follows the length."),
    data_seed: int = typer.Option(None, help="Seed of the number pool and its train/validation split."),
    steps: int = typer.Option(None, help="Step cap."),
    stop_at: float = typer.Option(None, help="Stop once validation exact match reaches this."),
    train_on: float = typer.Option(None, help="…then train on to this multiple of that step."),
    batch_size: int = typer.Option(None, help="Examples per optimizer step."),
    lr: float = typer.Option(None, help="Peak learning rate (warmup, cosine decay)."),
    warmup: int = typer.Option(None, help="Warmup steps."),
    eval_every: int = typer.Option(None, help="Validate and checkpoint every this many steps."),
    valid_size: int = typer.Option(None, help="Validation examples."),
    bias: str = typer.Option(None, help="Train with a bias file from abcmini calibrate."),
    kappa_cross: float = typer.Option(None, help="ABC: cross-attention dropoff factor."),
    kappa_self: float = typer.Option(None, help="ABC: self-attention dropoff factor."),
    lengths: str = typer.Option(None, help="Test lengths after training, comma-separated."),
    out: str = typer.Option(None, help="Run directory [default: runs/RECIPE/TASK/NAME]."),
    source: str = typer.Option(None, help="ABC: the Vanilla run to calibrate (trained first if unfinished)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run in --out."),
    threads: int = typer.Option(None, min=1, help="Torch threads [default: torch's]."),
    device: str = typer.Option("auto", help="auto | cpu | cuda"),
    wandb: bool = typer.Option(True, "--wandb/--no-wandb", help="Track with Weights & Biases (offline without an API key)."),
    wandb_project: str = typer.Option(None, help="wandb project [default: $WANDB_PROJECT or abcmini]."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved configuration and exit."),
):
    """Train one cell of a recipe, evaluate it and write RUN_DIR/eval.json.

    With --method abc: train Vanilla to interpolation (the source), calibrate its attention, retrain a fresh model with the bias; exactly what abcmini reproduce runs for the cell.
    """
    from abcmini import experiment as ex
    from abcmini.pipeline import run_cell, use_threads
    from abcmini.store import has_run

    with user_errors():
        chosen = ex.load_recipe(recipe)
        cell = ex.Cell.of(task, method, seed, window, period)
        overrides = {"preset": preset, "enc_layers": enc_layers, "pe_scale": pe_scale, "pad_width": pad_width, "data_seed": data_seed,
                     "steps": steps, "stop_at": stop_at, "train_on": train_on, "batch_size": batch_size, "lr": lr, "warmup": warmup,
                     "eval_every": eval_every, "valid_size": valid_size, "bias_file": bias and os.path.abspath(bias),
                     "kappa_cross": kappa_cross, "kappa_self": kappa_self,
                     "lengths": lengths and parse_integers(lengths, "--lengths", minimum=1)}
        overrides = {key: value for key, value in overrides.items() if value is not None}
        if growing:
            if pad_width is not None:
                raise UserError("--growing and --pad-width are alternatives; pass one")
            overrides["pad_width"] = None
        experiment = ex.resolve(chosen, cell, overrides)
        root = os.path.join("runs", chosen.name)
        if out == "":
            raise UserError("--out is empty; name a run directory")
        run_dir = out or ex.cell_dir(root, experiment)
        source_dir = None
        if experiment.source is not None:
            source_dir = source or (ex.cell_dir(root, experiment.source_experiment()) if out is None else os.path.join(run_dir, "source"))
        if resume and overwrite:
            raise UserError("--resume and --overwrite contradict each other; pass one")
        if os.path.exists(run_dir) and not os.path.isdir(run_dir):
            raise UserError(f"--out {run_dir!r} is a file, not a directory")
        exists = has_run(run_dir)
        if exists and not (resume or overwrite):
            raise UserError(f"{run_dir!r} already holds a run; pass --resume to continue it or --overwrite to replace it")
        if resume and not exists:
            raise UserError(f"--resume: {run_dir!r} holds no run to continue")
        if overwrite and os.path.isdir(run_dir) and not exists:
            raise UserError(f"--overwrite: {run_dir!r} holds no abcmini run; refusing to delete it")
        device = pick_device(device)
    if dry_run:
        console.print_json(data={"out": run_dir, "source": source_dir, "experiment": experiment.to_dict()})
        return
    if overwrite and exists:
        shutil.rmtree(run_dir)
    use_threads(threads)
    with Tracker.start(wandb, run_dir, "train", tracking_config(experiment.to_dict(), experiment.run.label), wandb_project, group=experiment.identity) as tracker:
        with user_errors():
            record = run_cell(experiment, run_dir, source_dir, device, ConsoleHooks(tracker))
        tracker.extrapolation({int(n): acc for n, acc in record["accuracy"].items()}, record["method"])
    print_accuracy(record)


@app.command("eval")
def evaluate(
    run_dir: str = typer.Argument(..., help="A run directory written by abcmini train."),
    lengths: str = typer.Option(None, help="Comma-separated lengths in digits [default: the run's recipe's]."),
    seed: int = typer.Option(None, help="Seed of the test sets [default: the run's recipe's]."),
    batch_size: int = typer.Option(1000, min=1, help="Sequences decoded at once."),
    wandb: bool = typer.Option(True, "--wandb/--no-wandb", help="Track with Weights & Biases (offline without an API key)."),
    wandb_project: str = typer.Option(None, help="wandb project [default: $WANDB_PROJECT or abcmini]."),
    device: str = typer.Option("auto", help="auto | cpu | cuda"),
):
    """Exact match by length on the seeded test sets; merges into RUN_DIR/eval.json."""
    from abcmini.evaluate import pad_width_for
    from abcmini.experiment import PAPER
    from abcmini.pipeline import evaluate as evaluate_run
    from abcmini.store import load_checkpoint, read_experiment
    from abcmini.train import load_model

    with user_errors():
        experiment = read_experiment(run_dir) if os.path.isdir(run_dir) else None
        wanted = parse_integers(lengths, "--lengths", minimum=1) if lengths else tuple((experiment or {}).get("lengths", PAPER.lengths))
        test_seed = seed if seed is not None else (experiment or {}).get("test_seed", PAPER.test_seed)
        state = load_checkpoint(run_dir)
        cfg, model = load_model(state, pick_device(device))
        for length in wanted:
            pad_width_for(length, cfg.pad_width)
    config = {**tracking_config(experiment, cfg.label), "lengths": list(wanted), "test_seed": test_seed} if experiment else {**cfg.to_dict(), "method": cfg.label}
    group = f"{experiment['recipe']}/{experiment['cell']['task']}/{os.path.basename(os.path.normpath(run_dir))}" if experiment else None
    with Tracker.start(wandb, run_dir, "eval", config, wandb_project, group=group) as tracker:
        with user_errors():
            record = evaluate_run(run_dir, experiment, cfg, model, state["history"], wanted, test_seed, ConsoleHooks(tracker), batch_size=batch_size)
        tracker.extrapolation({n: record["accuracy"][str(n)] for n in wanted}, record["method"])
    print_accuracy(record)


@app.command("calibrate")
def calibrate_command(
    run_dir: str = typer.Argument(..., help="A run that has interpolated (trained without scaffolding)."),
    recipe: str = typer.Option(None, help="Recipe whose calibration settings apply [default: the run's, else paper]."),
    layers: str = typer.Option(None, help="Decoder layers to calibrate, comma-separated (-1: the last)."),
    directions: str = typer.Option(None, help="Self-attention directions Δ: 1 diagonal, -1 anti-diagonal, 0 vertical."),
    cross_directions: str = typer.Option(None, help="Cross-attention directions Δ."),
    kappa_cross: float = typer.Option(None, help="Cross-attention dropoff factor: keep d_l > μ + κσ."),
    kappa_self: float = typer.Option(None, help="Self-attention dropoff factor."),
    min_support: float = typer.Option(None, help="Extend only lines crossing this fraction of the trusted rows (0: all)."),
    drop_padding: bool = typer.Option(None, "--drop-padding/--keep-padding", help="Drop lines that read padding."),
    empty: str = typer.Option(None, help="A head with no line: silent (reads the start marker) | transparent."),
    skip_start: bool = typer.Option(None, "--skip-start/--count-start", help="Average diagonals without their SOS cell."),
    samples: int = typer.Option(None, help="Training inputs decoded to average the attention over."),
    seed: int = typer.Option(None, help="Seed of that subset."),
    min_accuracy: float = typer.Option(None, help="Refuse a run below this validation exact match."),
    out: str = typer.Option(None, help="Bias file to write [default: RUN_DIR/abc_bias.pt]; heatmaps go beside it."),
    wandb: bool = typer.Option(True, "--wandb/--no-wandb", help="Track with Weights & Biases (offline without an API key)."),
    wandb_project: str = typer.Option(None, help="wandb project [default: $WANDB_PROJECT or abcmini]."),
):
    """ABC: average an interpolating model's attention and turn it into line-table biases usable at any length (train --bias FILE)."""
    from dataclasses import asdict, replace

    from abcmini import experiment as ex
    from abcmini.biases import Calibrated
    from abcmini.calibrate import calibrate_run
    from abcmini.figures import calibration_figures
    from abcmini.store import load_checkpoint, read_experiment

    with user_errors():
        recorded = read_experiment(run_dir) if os.path.isdir(run_dir) else None
        name = recipe or (recorded or {}).get("recipe") or "paper"
        chosen = ex.load_recipe(name if name in ex.RECIPES or recipe else "paper")
        task = load_checkpoint(run_dir)["config"]["task"]
        given = {"layers": layers and parse_integers(layers, "--layers"), "self_directions": directions and parse_integers(directions, "--directions"),
                 "cross_directions": cross_directions and parse_integers(cross_directions, "--cross-directions"),
                 "kappa_cross": kappa_cross, "kappa_self": kappa_self, "min_support": min_support, "drop_padding": drop_padding,
                 "empty": empty, "skip_start": skip_start, "samples": samples, "seed": seed, "min_accuracy": min_accuracy}
        settings = replace(chosen.calibration_for(task), **{k: v for k, v in given.items() if v is not None})
        path = out or os.path.join(run_dir, "abc_bias.pt")
        start = time.perf_counter()
        result = calibrate_run(run_dir, path, settings)
    seconds = time.perf_counter() - start
    console.print(f"recipe {chosen.name}'s calibration for {task}: {asdict(settings)}", soft_wrap=True, highlight=False)
    print_calibration(result, seconds)
    pngs = calibration_figures(os.path.dirname(os.path.abspath(path)), task, result["attention"]["self"], result["attention"]["cross"],
                               Calibrated.from_state(result["bias"]), result["example"], settings.layers)
    console.print(f"→ {path}; heatmaps: {', '.join(os.path.basename(p) for p in pngs.values())}", soft_wrap=True, highlight=False)
    config = {**result["config"].to_dict(), "method": result["config"].label, "recipe": chosen.name,
              "source": os.path.abspath(run_dir), "calibration": result["calibration"]}
    with Tracker.start(wandb, run_dir, "calibrate", config, wandb_project) as tracker:
        tracker.images({f"calibration/{name}": png for name, png in pngs.items()})
        tracker.summary({"calibration/seconds": seconds})


@app.command("recipe")
def recipe_command(name: str = typer.Argument("paper", help="paper | quick | a recipe YAML file.")):
    """Print a recipe: every value and the reason for it."""
    from abcmini.experiment import load_recipe

    with user_errors():
        chosen = load_recipe(name)
    table = Table(title=f"recipe {chosen.name}")
    for column in ("field", "value", "why"):
        table.add_column(column, overflow="fold")
    for field, value, reason in chosen.reasons():
        table.add_row(field, str(value), reason)
    console.print(table)


@app.command("report")
def report_command(
    runs_dir: str = typer.Argument("runs", help="Directory searched (recursively) for result records (eval.json)."),
    out: str = typer.Option(None, help="Markdown page to write, figures beside it [default: RUNS_DIR/report.md]."),
    readme: str = typer.Option(None, help="Also fill this file's headline block (README.md) from the same records."),
):
    """Both of the paper's tables (ours beside the paper's), training cost and one accuracy-vs-length figure per task."""
    from abcmini.report import collect, with_headline, write_report
    from abcmini.store import atomic_write

    with user_errors():
        if not os.path.isdir(runs_dir):
            raise UserError(f"runs directory {runs_dir!r} does not exist")
        out = out or os.path.join(runs_dir, "report.md")
        text, pngs = write_report(runs_dir, out)
        if readme:
            with open(readme) as f:
                filled = with_headline(f.read(), collect(runs_dir))
            atomic_write(readme, lambda f: f.write(filled.encode()))
    console.print(text, highlight=False, soft_wrap=True)
    console.print(f"→ {out}, {', '.join(os.path.basename(p) for p in pngs)}{', ' + readme if readme else ''}", highlight=False, soft_wrap=True)


@app.command("reproduce")
def reproduce_command(
    recipe: str = typer.Option("paper", help="paper | quick | a recipe YAML file."),
    tasks: str = typer.Option("successor,addition,nx1,parity", help="Comma-separated tasks."),
    methods: str = typer.Option("vanilla,alibi,rope,abc,+w=1,+T=3,NoPE+w=1", help="Comma-separated methods of the paper's two tables."),
    seeds: str = typer.Option("0,1,2", help="Comma-separated seeds; tables report the median and range."),
    quick: bool = typer.Option(False, help="Small but real: recipe quick, Successor, Vanilla and ABC, seed 0."),
    out: str = typer.Option(None, help="Root of the runs, report.md and figures [default: runs/RECIPE]."),
    workers: int = typer.Option(2, min=1, help="Cells trained side by side (one thread each)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print every cell's resolved configuration and exit."),
):
    """The paper end to end: every cell of both tables through the same path as abcmini train, then the tables and figures. Resumes where it stopped."""
    from abcmini.experiment import load_recipe
    from abcmini.report import write_report
    from abcmini.reproduce import plan, read_invocations, run_all, table_cells

    with user_errors():
        if quick:
            recipe, tasks, methods, seeds = "quick", "successor", "vanilla,abc", "0"
        chosen = load_recipe(recipe)
        out = out or os.path.join("runs", chosen.name)
        seed_list = parse_integers(seeds, "--seeds", minimum=0)
        jobs = plan(chosen, table_cells(tasks.split(","), methods.split(","), seed_list), out)
    if dry_run:
        console.print_json(data=[{"out": job.run_dir, "source": job.source_dir, "experiment": job.experiment.to_dict()} for job in jobs])
        return
    console.print(f"[bold]reproduce[/] {len(jobs)} runs · recipe {chosen.name} · {tasks} · {methods} · seeds {list(seed_list)} "
                  f"· {workers} workers → {out}", soft_wrap=True)
    start = time.perf_counter()

    def on_done(job, result):
        if "error" in result:
            errors.print(f"[red]{job.cell.task} {job.cell.method} seed {job.cell.seed}: {result['error']}[/]", soft_wrap=True, highlight=False)
            if "traceback" in result:
                errors.print(result["traceback"], soft_wrap=True, highlight=False, markup=False)
        else:
            accs = " ".join(f"{n}:{100 * a:.1f}" for n, a in result["accuracy"].items())
            console.print(f"{time.perf_counter() - start:7.0f}s  {job.cell.task:<9} {result['method']:<16} s{job.cell.seed}  "
                          f"{result['train_steps']} steps {result['train_seconds']:.0f}s  {accs}", highlight=False, soft_wrap=True)
        sys.stdout.flush()

    results = run_all(jobs, workers, on_done)
    with user_errors():
        text, pngs = write_report(out, os.path.join(out, "report.md"), read_invocations(out))
    console.print(text, highlight=False, soft_wrap=True)
    failed = sum("error" in r for r in results)
    console.print(f"reproduce: {len(results) - failed} runs done, {failed} failed, {time.perf_counter() - start:.0f}s → "
                  f"{os.path.join(out, 'report.md')}, {', '.join(os.path.basename(p) for p in pngs)}", soft_wrap=True, highlight=False)
    if failed:
        raise typer.Exit(1)


@app.command("sweep")
def sweep_command(
    file: str = typer.Argument(..., help="A wandb sweep YAML (program: cli.py), e.g. sweeps/paper-grid.yaml."),
    count: int = typer.Option(None, min=1, help="Run at most this many (required for random and bayes searches)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the command of every run and exit."),
):
    """Run a sweep with no wandb server: wandb's sweep engine expands it locally and the runs go one after another, each exactly the command wandb agent would run."""
    import subprocess

    from abcmini.sweep import command_line, expand, load_sweep

    with user_errors():
        config = load_sweep(file)
        runs = expand(config, count)
    commands = [command_line(config, params) for params in runs]
    if dry_run:
        for argv in commands:
            console.print(" ".join(argv), highlight=False, soft_wrap=True)
        return
    failed = 0
    for i, argv in enumerate(commands, 1):
        console.print(f"[bold]sweep {config.get('name', file)}[/] run {i}/{len(commands)}: {' '.join(argv[1:])}", soft_wrap=True, highlight=False)
        sys.stdout.flush()
        if subprocess.run(argv).returncode != 0:
            failed += 1
    console.print(f"sweep: {len(commands) - failed} runs finished, {failed} failed", highlight=False)
    if failed:
        raise typer.Exit(1)


def main():
    app()


if __name__ == "__main__":
    sys.exit(main())
