"""abcmini command line: train, eval, calibrate, recipe, report, reproduce, sweep.

Parses, calls and prints. Every command resolves its cell through ``abcmini.experiment``; an
option given on the command line overrides one field of the recipe and is recorded as such.
Options also take the underscore spelling a wandb sweep agent passes (``--pad_width=64``).
"""

import errno
import glob
import inspect
import io
import os
import re
import signal
import sys
import threading
import time
from contextlib import ExitStack, contextmanager

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from typer._click.core import ParameterSource
from typer._click.exceptions import (
    ClickException,
    NoArgsIsHelpError,
)  # typer vendors Click (≥ 0.26)
from typer.core import TyperGroup

from abcmini import commit
from abcmini.config import CALIBRATION_FIELDS, CELL_OPTIONS, OPTIONS, option_name
from abcmini.errors import Stopped, UserError, exit_code_of, raise_stopped
from abcmini.names import check_int
from abcmini.nn import InputError
from abcmini.recipes import RECIPES

console = Console()
errors = Console(stderr=True)
HEARTBEAT = 60  # seconds: output that is not a terminal gets a progress line at least this often
RECIPE_HELP = " | ".join(RECIPES) + " | FILE.yaml."
WANDB = typer.Option(True, "--wandb/--no-wandb", help="Track with wandb (offline without a key).")
WANDB_PROJECT = typer.Option(None, help="wandb project [default: $WANDB_PROJECT].")
DEVICE = typer.Option("auto", help="auto | cpu | cuda")


TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
OUTPUT_ERRNOS = (errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG)


def boolean_values(command, args: list[str]) -> list[str]:
    """A sweep agent's ``--flag=True`` / ``--flag=False`` as Click's ``--flag`` / ``--no-flag``."""
    flags = {}
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) and param.opts:
            off = param.secondary_opts[0] if param.secondary_opts else None
            flags.update({name.replace("_", "-"): (param.opts[0], off) for name in param.opts})
    out = []
    for arg in args:
        name, equals, value = arg.partition("=")
        name = name.replace("_", "-")
        if equals and name in flags and value.lower() in TRUE + FALSE:
            on, off = flags[name]
            chosen = on if value.lower() in TRUE else off
            out += [chosen] if chosen else []
        else:
            out.append(arg)
    return out


@contextmanager
def stop_on_signals():
    """SIGTERM (wandb agent, SLURM, timeout) and SIGINT (Ctrl-C) raise ``Stopped`` where the program
    is: every ``with`` unwinds, so a run ends with its checkpoint kept and its wandb run finished
    as failed. A signal the process was started ignoring (a background job's SIGINT) stays ignored;
    signal handlers belong to the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    for number, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(number, raise_stopped)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def empty_option(command, args: list[str]) -> str | None:
    """The first option of ``command`` given an empty value in ``args`` (``--out ''``,
    ``--bias=``): it means nothing, for every option alike (``--out ''`` is not the default)."""
    valued = {
        name
        for param in command.params
        if getattr(param, "is_flag", True) is False and param.param_type_name == "option"
        for name in param.opts
    }
    for i, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in valued and (
            (equals and value == "") or (not equals and args[i + 1 : i + 2] == [""])
        ):
            return name
    return None


class OneLineErrors(TyperGroup):
    """Typer's own parse errors (``--steps abc``, an unknown option) as one line and exit code 2,
    like the errors our commands raise, instead of a usage panel; boolean options also take a
    sweep agent's ``--flag=value``."""

    def main(self, args=None, *rest, standalone_mode: bool = True, **kwargs):
        args = [str(arg) for arg in (sys.argv[1:] if args is None else args)]
        if args and args[0] in self.commands:
            args = args[:1] + boolean_values(self.commands[args[0]], args[1:])
            empty = empty_option(self.commands[args[0]], args[1:])
            if empty and standalone_mode:
                errors.print(
                    f"[bold red]error:[/] {empty} is empty; give it a value or leave it out",
                    highlight=False,
                    soft_wrap=True,
                )
                sys.exit(2)
        for stream in (
            sys.stdout,
            sys.stderr,
        ):  # a path that is not UTF-8 (b'\xff') is printed, not a crash
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        if not standalone_mode:
            return super().main(args, *rest, standalone_mode=False, **kwargs)
        try:
            with stop_on_signals():
                code = super().main(args, *rest, standalone_mode=False, **kwargs)
        except Stopped as stop:
            errors.print(
                f"stopped by {stop} (exit code {stop.exit_code}): a run keeps its last checkpoint and its wandb run ended as failed; "
                "the same command goes on from there (train: with --continue)",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(stop.exit_code)
        except NoArgsIsHelpError as error:
            console.print(error.format_message(), highlight=False)
            sys.exit(0)
        except ClickException as error:
            errors.print(
                f"[bold red]error:[/] {error.format_message()}", highlight=False, soft_wrap=True
            )
            sys.exit(error.exit_code)
        except (
            OSError
        ) as error:  # standard output closed (| head) or on a full device (> /dev/full)
            if error.filename is not None or error.errno not in OUTPUT_ERRNOS:
                raise
            os.dup2(
                os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
            )  # nothing more to flush at exit
            if isinstance(error, BrokenPipeError):
                sys.exit(1)  # the reader left (| head): silently, as rich's console does
            errors.print(
                f"[bold red]error:[/] cannot write standard output ({error.strerror})",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    help="Attention Bias Scaffolding and Calibration for arithmetic length generalization.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={
        "token_normalize_func": lambda name: name.replace("_", "-")
    },  # --pad_width → --pad-width
)


def field_options(names=tuple(OPTIONS), rename: dict | None = None):
    """The command takes one option per schema field in ``names`` (``abcmini.config.OPTIONS``: its
    name, type and help, declared there once), passed in its ``**fields``; ``rename`` gives a
    field another option name in this command."""

    def add(command):
        signature = inspect.signature(command)
        params = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        for name in names:
            option, kind, help = OPTIONS[name]
            option = (rename or {}).get(name, option)
            params.append(
                inspect.Parameter(
                    option,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=typer.Option(None, help=help),
                    annotation=kind,
                )
            )
        command.__signature__ = signature.replace(parameters=params)
        command.__annotations__ = {
            **command.__annotations__,
            **{p.name: p.annotation for p in params},
        }
        return command

    return add


def cell_option(name: str):
    """The option of a cell's identity (task, method, seed, window, period), declared in ``abcmini.config.CELL_OPTIONS``."""
    default, help = CELL_OPTIONS[name]
    return typer.Option(default, help=help)


@contextmanager
def user_errors():
    """A user's error (``abcmini.errors.UserError``, or the library's ``InputError``) as one line
    and exit code 2; a bug keeps its traceback."""
    try:
        yield
    except InputError as error:
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
    check_int(values, option.strip("-").replace("-", "_"), option)
    return values


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but CUDA is not available")
    if device != "cpu" and not device.startswith("cuda"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu or cuda")
    if device.startswith("cuda"):
        torch.set_float32_matmul_precision(
            "high"
        )  # TF32 matrix products on a GPU; the CPU path is untouched
    return device


class ConsoleHooks:
    """A cell's progress on the console: a bar with an ETA for training and for each test length
    on a terminal, a plain line per validation and per length otherwise."""

    waiting = None  # pipeline.Hooks.waiting
    pace = (0.0, 0, 0)
    spoke = 0.0

    def __init__(self):
        self.progress = self.bar = None

    def _progress(self, *fields):
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            *fields,
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )

    @contextmanager
    def training(self, role, trainer):
        cfg = trainer.cfg
        self.pace = (time.monotonic(), trainer.step_count, cfg.batch_size)  # throughput's start
        self.spoke = time.monotonic()  # the last plain line (output not a terminal)
        console.print(
            f"[bold]{'train' if role == 'run' else 'ABC source'}[/] {cfg.task} · {cfg.label} · "
            f"{'pad width ' + str(cfg.pad_width) if cfg.pad_width else 'growing geometry'} · "
            f"seed {cfg.seed} → {trainer.run_dir}",
            soft_wrap=True,
            highlight=False,
        )
        with self._progress(
            TextColumn("loss {task.fields[loss]:.4f} · valid {task.fields[valid]}")
        ) as self.progress:
            self.bar = self.progress.add_task(
                "training",
                total=cfg.steps,
                completed=trainer.step_count,
                loss=float("nan"),
                valid="–",
            )
            yield
        last = trainer.history[-1] if trainer.history else {}
        console.print(
            f"done: step {last.get('step')} · valid exact match {last.get('valid_acc', 0):.2%} · {last.get('seconds', 0):.0f}s"
        )

    def step(self, step, loss):
        self.progress.update(self.bar, completed=step, loss=loss)
        if not console.is_terminal and time.monotonic() - self.spoke >= HEARTBEAT:
            console.print(f"step {step:>6} · loss {loss:.4f} · {self.throughput(step)}")
            sys.stdout.flush()
            self.spoke = time.monotonic()

    def throughput(self, step) -> str:
        """Examples per second since this training (re)started."""
        began, first, batch = self.pace
        return f"{(step - first) * batch / max(time.monotonic() - began, 1e-9):,.0f} examples/s"

    def validated(self, entry):
        self.progress.update(self.bar, valid=f"{entry['valid_acc']:.2%}")
        if not console.is_terminal:  # a log file gets one plain line per evaluation
            console.print(
                f"step {entry['step']:>6} · loss {entry['loss']:.4f} · valid {entry['valid_acc']:.2%} · "
                f"{entry['seconds']:.0f}s · {self.throughput(entry['step'])}"
            )
            sys.stdout.flush()
            self.spoke = time.monotonic()

    def calibrated(self, result, seconds):
        print_calibration(result, seconds)

    @contextmanager
    def evaluating(self, length, batches):
        with self._progress() as progress:
            bar = progress.add_task(named(length), total=batches)
            yield lambda: progress.advance(bar)

    def evaluated(self, length, accuracy, seconds):
        if not console.is_terminal:
            console.print(f"{named(length)}: {accuracy:.2%} ({seconds:.1f}s)", highlight=False)
            sys.stdout.flush()


def named(length) -> str:
    """A test's name on the console: ``length  60``, or a stress family's ``zero_runs at 60``."""
    return length if isinstance(length, str) else f"length {length:>3}"


def waiting_line(text: str) -> None:
    errors.print(text, highlight=False, soft_wrap=True, markup=False)
    sys.stderr.flush()


def print_calibration(result: dict, seconds: float) -> None:
    from abcmini.nn.scaffolds import scaffold_from_state

    for kind, table in scaffold_from_state(result["bias"]).tables():
        console.print(
            f"{kind:>5}-attention: open lines per head {table.open_per_head()}; empty heads "
            f"{table.transparent.nonzero().flatten().tolist() or 'none'}",
            highlight=False,
        )
    console.print(
        f"calibrated {result['source']} on {result['calibration']['samples']} training inputs in {seconds:.1f}s",
        soft_wrap=True,
        highlight=False,
    )


def print_stress(record: dict) -> None:
    """The stress families' exact match, one row per family, a column per length."""
    stress = record.get("stress") or {}
    lengths = sorted({int(n) for by_length in stress.values() for n in by_length})
    table = Table(title=f"{record['task']} · {record['method']} · stress")
    for column in ("family", *map(str, lengths)):
        table.add_column(column, justify="left" if column == "family" else "right")
    for name, by_length in stress.items():
        table.add_row(
            name,
            *(f"{100 * by_length[str(n)]:.2f}%" if str(n) in by_length else "–" for n in lengths),
        )
    console.print(table)


def print_accuracy(record: dict) -> None:
    title = f"{record['task']} · {record['method']} · {'pad ' + str(record['pad_width']) if record['pad_width'] else 'growing'} · seed {record['seed']}"
    table = Table(title=title)
    table.add_column("length", justify="right")
    table.add_column("exact match", justify="right")
    for length, acc in record["accuracy"].items():
        table.add_row(length, f"{100 * acc:.2f}%")
    console.print(table)


@app.command()
@field_options()
def train(
    ctx: typer.Context,
    task: str = cell_option("task"),
    method: str = cell_option("method"),
    seed: int = cell_option("seed"),
    recipe: str = typer.Option("paper", help=RECIPE_HELP),
    window: int = cell_option("window"),
    period: int = cell_option("period"),
    growing: bool = typer.Option(
        False, "--growing", help="Growing geometry: pad width follows length."
    ),
    out: str = typer.Option(None, help="Run directory [default: runs/RECIPE/TASK/NAME]."),
    source: str = typer.Option(None, help="ABC: the Vanilla run to calibrate."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out."),
    proceed: bool = typer.Option(
        False, "--continue", help="Continue the run if any, else start it."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run in --out."),
    threads: int = typer.Option(None, min=1, help="Torch threads [default: torch's]."),
    device: str = DEVICE,
    wandb: bool = WANDB,
    wandb_project: str = WANDB_PROJECT,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the resolved configuration and exit."
    ),
    **fields,
):
    """Train one cell of a recipe, evaluate it and write RUN_DIR/eval.json.

    ABC trains Vanilla (the source), calibrates it and retrains with the bias.
    """
    from abcmini.config import rule_names
    from abcmini.names import canonical_method, check_task
    from abcmini.recipes import load_recipe

    with user_errors():  # before torch is imported
        check_task(task)
        canonical_method(method, window, period)
        chosen = load_recipe(recipe)
        preset = calibration_preset(fields["calibration"])
        check_calibration_options(fields["calibration"], fields)
        rule_names(fields["rules"] or "")
        for (
            name,
            value,
        ) in ctx.params.items():  # every integer option against its bounds (names.BOUNDS)
            check_int(
                value,
                "calibration.seed" if name == "calibration_seed" else name,
                "--" + name.replace("_", "-"),
            )
        lengths = fields["lengths"] and parse_integers(fields["lengths"], "--lengths", minimum=1)
        bias = fields["bias"]
    from abcmini import experiment as ex
    from abcmini.bias_files import check_bias_matches, load_bias
    from abcmini.limits import check_memory, check_writable
    from abcmini.pipeline import Tracking, check_cell_evaluation, run_cell, use_threads
    from abcmini.store import (
        CALIBRATION_FIGURES,
        check_ours,
        check_run_dir,
        clear_run,
        has_run,
        lock_run,
    )

    with user_errors():
        cell = ex.Cell.of(task, method, seed, window, period)
        overrides = {
            field: fields[option] for field, (option, _, _) in OPTIONS.items()
        }  # every field a recipe sets has its option
        overrides |= {"bias_file": bias and os.path.abspath(bias), "lengths": lengths}
        overrides = {key: value for key, value in overrides.items() if value is not None}
        overrides = {**preset, **overrides}
        if growing:
            if fields["pad_width"] is not None:
                raise UserError("--growing and --pad-width are alternatives; pass one")
            overrides["pad_width"] = None
        experiment = ex.resolve(chosen, cell, overrides)
        root = os.path.join("runs", chosen.name)
        if source is not None and experiment.source is None:
            raise UserError(
                f"--source names ABC's Vanilla source; --method {method} calibrates none"
            )
        run_dir = out or ex.cell_dir(root, experiment)
        source_dir = None
        if experiment.source is not None:
            source_dir = source or (
                ex.cell_dir(root, experiment.source_experiment())
                if out is None
                else os.path.join(run_dir, "source")
            )
        exists = check_run_dir(
            run_dir, resume or (proceed and has_run(run_dir)), overwrite, dry_run
        )
        if experiment.calibration is not None and not dry_run:
            check_ours(run_dir, CALIBRATION_FIGURES)  # ABC writes its heatmaps there
        if bias:
            check_bias_matches(load_bias(bias), experiment.run, bias)
            if overwrite and os.path.abspath(os.path.dirname(bias)) == os.path.abspath(run_dir):
                raise UserError(
                    f"--overwrite would delete {bias!r}, the bias this run trains with; move it out of {run_dir!r} first"
                )
        device = pick_device(device)
        check_memory(experiment.run, device)
        if experiment.source is not None:
            check_memory(experiment.source, device, experiment.calibration.samples, "calibration")
        check_cell_evaluation(
            experiment, device
        )  # the tests after training fit too: refused now, not after it
    if dry_run:
        console.print_json(
            data={"out": run_dir, "source": source_dir, **dry_calibration(experiment)}
        )
        return
    with user_errors(), ExitStack() as locks:
        for directory, option in ((run_dir, "--out"), (source_dir, "--source")):
            if directory:
                check_writable(directory, option)
        waiting = (
            waiting_line if proceed else None
        )  # --continue (the sweeps) waits for another process on the cell
        locks.enter_context(lock_run(run_dir, waiting=waiting))
        if source_dir and not source:  # a source named by --source may be a shipped, read-only run
            locks.enter_context(lock_run(source_dir, waiting=waiting))
        exists = check_run_dir(
            run_dir, resume or (proceed and has_run(run_dir)), overwrite
        )  # again, now that it is ours
        if overwrite and exists:
            kept = clear_run(run_dir)
            if kept:
                console.print(
                    f"--overwrite kept {len(kept)} file{'s' * (len(kept) != 1)} abcmini did not write: "
                    f"{', '.join(repr(p) for p in kept[:5])}{' …' if len(kept) > 5 else ''}",
                    soft_wrap=True,
                    highlight=False,
                )
        use_threads(threads)
        hooks = ConsoleHooks()
        hooks.waiting = waiting  # --continue waits for a source another process trains
        record = run_cell(
            experiment, run_dir, source_dir, device, hooks, Tracking(wandb, wandb_project)
        )
    print_accuracy(record)


def dry_calibration(experiment) -> dict:
    """The experiment as the dry run prints it: the calibration named, with only the settings it
    reads, and only the rules that apply to the task."""
    from abcmini.tasks import BLOCK_TASKS

    shown = experiment.to_dict()
    if experiment.calibration is None:
        return {"experiment": shown}
    settings = experiment.calibration
    name = settings.title(experiment.run.task in BLOCK_TASKS)
    return {"calibration": name, "experiment": {**shown, "calibration": settings.used()}}


def check_calibration_options(name: str | None, given: dict) -> None:
    """Refuse a setting the named calibration does not read (``Calibration.used``)."""
    from abcmini.config import ABC_ONLY

    unread = [
        key for key in ABC_ONLY if given.get(key) not in (None, "none") and (name or "abc") != "abc"
    ]
    if unread:
        raise UserError(
            f"--{unread[0].replace('_', '-')} is a setting of abcmini's procedure; --calibration {name} does not read it"
        )


def calibration_preset(name: str | None) -> dict:
    """The calibration fields ``--calibration NAME`` implies (``abcmini.config.CALIBRATIONS``)."""
    from abcmini.config import CALIBRATIONS

    if name is not None and name not in CALIBRATIONS:
        raise UserError(f"--calibration is {', '.join(CALIBRATIONS)}, not {name!r}")
    return dict(CALIBRATIONS[name or "abc"])


@app.command("eval")
@field_options(("lengths", "test_seed", "test_frame"), rename={"test_seed": "seed"})
def evaluate(
    run_dir: str = typer.Argument(..., help="A run directory written by abcmini train."),
    batch_size: int = typer.Option(
        1000, min=1, help="Sequences decoded at once (fewer where a batch would need over 2 GiB)."
    ),
    stress: bool = typer.Option(
        False, "--stress", help="Score the task's stress families (abcmini.stress) instead."
    ),
    wandb: bool = WANDB,
    wandb_project: str = WANDB_PROJECT,
    device: str = DEVICE,
    **fields,
):
    """Exact match by length on the seeded test sets; merges into RUN_DIR/eval.json.

    --stress scores hard inputs random tests rarely draw (long carries, 8s and 9s, zero runs,
    unequal operands, identity and absorbing operands, operand counts outside training)."""
    from abcmini.config import check_test_frame
    from abcmini.store import require_checkpoint

    with user_errors():  # the arguments first: an error is answered before torch is imported
        require_checkpoint(run_dir)
        lengths, seed, test_frame = fields["lengths"], fields["seed"], fields["test_frame"]
        check_int(seed, "test_seed", "--seed")
        wanted = parse_integers(lengths, "--lengths", minimum=1) if lengths else None
        if test_frame is not None:
            check_test_frame(test_frame)
    from abcmini.pipeline import Tracking, evaluate_run

    with user_errors():
        record = evaluate_run(
            run_dir,
            wanted,
            seed,
            pick_device(device),
            ConsoleHooks(),
            Tracking(wandb, wandb_project),
            batch_size,
            test_frame,
            stress,
        )
    print_stress(record) if stress else print_accuracy(record)


@app.command("calibrate")
@field_options(CALIBRATION_FIELDS, rename={"seed": "seed"})
def calibrate_command(
    ctx: typer.Context,
    run_dir: str = typer.Argument(
        ..., help="A run that has interpolated (trained without scaffolding)."
    ),
    recipe: str = typer.Option(
        None, help=RECIPE_HELP + " Its calibration settings apply [default: the run's, else paper]."
    ),
    out: str = typer.Option(
        None, help="Bias file to write [default: RUN_DIR/abc_bias.pt]; heatmaps go beside it."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing bias file."),
    wandb: bool = WANDB,
    wandb_project: str = WANDB_PROJECT,
    **fields,
):
    """ABC: average an interpolating model's attention and turn it into line-table biases usable at any length (train --bias FILE)."""
    from abcmini.recipes import load_recipe

    with user_errors():  # before torch is imported
        check_int(fields["samples"], "samples")
        check_int(fields["seed"], "seed")
        given_recipe = recipe and load_recipe(recipe)
    from dataclasses import asdict, replace

    from abcmini.bias_files import is_same_calibration
    from abcmini.experiment import run_config_of
    from abcmini.limits import check_memory, check_writable
    from abcmini.pipeline import Tracking, calibrate_stage, experiment_of
    from abcmini.store import CALIBRATION_FIGURES, check_ours, load_checkpoint, lock_run

    with user_errors():
        recorded = experiment_of(run_dir)
        name = (recorded.recipe if recorded else None) or "paper"
        chosen = given_recipe or RECIPES.get(name, RECIPES["paper"])
        state = load_checkpoint(run_dir)
        cfg = run_config_of(state)
        task = cfg.task
        given = {
            name: fields[option_name(name) if name != "seed" else name]
            for name in CALIBRATION_FIELDS
        }  # one option each
        check_calibration_options(given["algorithm"], given)
        given = {
            **calibration_preset(given["algorithm"]),
            **{k: v for k, v in given.items() if v is not None},
        }
        settings = replace(chosen.calibration, **given)
        check_memory(cfg, "cpu", settings.samples, "calibration")
        path = out or os.path.join(run_dir, "abc_bias.pt")
        if os.path.isdir(path):
            raise UserError(f"--out {path!r} is a directory; name the bias file to write")
        if (
            os.path.lexists(path)
            and not overwrite
            and not is_same_calibration(path, run_dir, asdict(settings))
        ):
            raise UserError(
                f"{path!r} exists (a run may train with it); pass --overwrite to replace it, or another --out"
            )
        check_writable(os.path.dirname(os.path.abspath(path)), "--out")
        check_ours(
            os.path.dirname(os.path.abspath(path)), CALIBRATION_FIGURES
        )  # its heatmaps go beside it
        identity = recorded.identity if recorded else os.path.basename(os.path.normpath(run_dir))
        with lock_run(os.path.dirname(os.path.abspath(path))):
            result = calibrate_stage(
                run_dir,
                path,
                settings,
                recorded,
                cfg,
                ConsoleHooks(),
                Tracking(wandb, wandb_project),
                identity,
                identity,
            )
    console.print(
        f"recipe {chosen.name}'s calibration for {task}: {asdict(settings)}",
        soft_wrap=True,
        highlight=False,
    )
    console.print(
        f"→ {path}; heatmaps: {', '.join(os.path.basename(p) for p in result['pngs'].values())}",
        soft_wrap=True,
        highlight=False,
    )


@app.command("recipe")
def recipe_command(name: str = typer.Argument("paper", help=RECIPE_HELP)):
    """Print a recipe: every value and the reason for it."""
    from abcmini.recipes import load_recipe

    with user_errors():
        chosen = load_recipe(name)
    table = Table(title=f"recipe {chosen.name}")
    for column in ("field", "value", "why"):
        table.add_column(column, overflow="fold")
    for field, value, reason in chosen.reasons():
        table.add_row(field, str(value), reason)
    console.print(table)


@app.command("compare")
def compare_command(
    runs_dirs: list[str] = typer.Argument(
        ..., help="Results roots or run directories whose result records (eval.json) to compare."
    ),
    name: str = typer.Option(None, help="The comparison's wandb group [default: compare/NAME]."),
    out: str = typer.Option(
        None, help="Where its wandb run is written [default: the folder above every directory]."
    ),
    wandb_project: str = WANDB_PROJECT,
):
    """A comparison run (job type comparison: the methods side by side per task, as reproduce and
    sweep end with) built from runs that already exist: a results root, a sweep's runs gathered
    from several machines, or a list of run directories."""
    with user_errors():
        for run_dir in runs_dirs:
            if not os.path.exists(run_dir):
                raise UserError(f"{run_dir!r} does not exist")
    from abcmini.outputs.compare import comparison_run
    from abcmini.outputs.report import collect

    with user_errors():
        records = [record for run_dir in runs_dirs for record in collect(run_dir)]
        if not records:
            raise UserError(
                f"no result records (eval.json) under {', '.join(map(repr, runs_dirs))}"
            )
        root = out or os.path.commonpath([os.path.abspath(d) for d in runs_dirs])
        if os.path.isfile(root):
            root = os.path.dirname(root)
        group = name or f"compare/{os.path.basename(os.path.normpath(root)) or 'runs'}"
        compared = comparison_run(True, wandb_project, root, records, group, compared=runs_dirs)
    if not compared:
        raise typer.Exit(1)  # tracking failed: its warning said why
    console.print(
        f"comparison: wandb run {compared} (group {group}) of {len(records)} records in {root}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("report")
def report_command(
    runs_dir: str = typer.Argument(
        "runs", help="Directory searched (recursively) for result records (eval.json)."
    ),
    out: str = typer.Option(
        None, help="Markdown page to write, figures beside it [default: RUNS_DIR/report.md]."
    ),
    readme: str = typer.Option(
        None,
        help="Also fill this file's generated blocks from the same records: README.md's headline, docs/todays-methods.md's methods table.",
    ),
    beside: list[str] = typer.Option(
        None,
        help="Another directory of records (another recipe), each seed beside its own (repeatable).",
    ),
    block: list[str] = typer.Option(
        None, help="With --readme: fill only this generated block (repeatable) [default: all]."
    ),
):
    """Both of the paper's tables (ours beside the paper's), training cost and one accuracy-vs-length figure per task."""
    from abcmini.outputs.report import collect, with_blocks, write_report
    from abcmini.store import atomic_write

    with user_errors():
        if not os.path.isdir(runs_dir):
            raise UserError(f"runs directory {runs_dir!r} does not exist")
        out = out or os.path.join(runs_dir, "report.md")
        beside = tuple(beside or ())
        for other in beside:
            if not os.path.isdir(other):
                raise UserError(f"--beside directory {other!r} does not exist")
        if block and not readme:
            raise UserError("--block fills a block of --readme FILE; give the file")
        filled = None
        if readme:  # checked, and filled, before anything is written
            if not os.path.isfile(readme):
                raise UserError(f"--readme {readme!r} is not a file")
            with open(readme, errors="replace") as f:
                filled = with_blocks(
                    f.read(),
                    collect(runs_dir),
                    [record for other in beside for record in collect(other)],
                    tuple(block or ()),
                )
        text, pngs = write_report(runs_dir, out, beside=beside)
        if filled is not None:
            atomic_write(readme, lambda f: f.write(filled.encode(errors="backslashreplace")))
    console.print(text, highlight=False, soft_wrap=True, markup=False)
    console.print(
        f"→ {out}, {', '.join(os.path.basename(p) for p in pngs)}{', ' + readme if readme else ''}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("dashboard")
def dashboard_command(
    runs_dirs: list[str] = typer.Argument(
        None,
        help="Directories searched (recursively) for result records (eval.json), "
        "or record files [default: runs].",
    ),
    out: str = typer.Option(
        None,
        help="HTML file to write [default: RUNS_DIR/dashboard.html for one directory, ./dashboard.html for several].",
    ),
):
    """One self-contained HTML page comparing the methods of any number of results roots: accuracy against length, both tables, each cell's training, attention and scaffold."""
    from abcmini.outputs.dashboard import write_dashboard

    runs_dirs = runs_dirs or ["runs"]
    with user_errors():
        for runs_dir in runs_dirs:
            if not os.path.exists(runs_dir):
                raise UserError(f"runs directory {runs_dir!r} does not exist")
        one_dir = len(runs_dirs) == 1 and os.path.isdir(runs_dirs[0])
        path = write_dashboard(
            runs_dirs,
            out or (os.path.join(runs_dirs[0], "dashboard.html") if one_dir else "dashboard.html"),
        )
    console.print(
        f"→ {path} (open it in a browser; it works offline)", highlight=False, soft_wrap=True
    )


@app.command("reproduce")
def reproduce_command(
    ctx: typer.Context,
    recipe: str = typer.Option("paper", help=RECIPE_HELP),
    tasks: str = typer.Option("successor,addition,nx1,parity", help="Comma-separated tasks."),
    methods: str = typer.Option(
        "vanilla,alibi,rope,abc,+w=1,+T=3,NoPE+w=1",
        help="Comma-separated methods of the paper's two tables.",
    ),
    seeds: str = typer.Option(
        "0,1,2", help="Comma-separated seeds; tables report the median and range."
    ),
    quick: bool = typer.Option(
        False, "--quick", help="Small but real: recipe quick, Successor, Vanilla and ABC, seed 0."
    ),
    out: str = typer.Option(
        None, help="Root of the runs, report.md and figures [default: runs/RECIPE]."
    ),
    workers: int = typer.Option(2, min=1, help="Cells trained side by side (one thread each)."),
    wandb: bool = WANDB,
    wandb_project: str = WANDB_PROJECT,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print every cell's resolved configuration and exit."
    ),
):
    """The paper end to end: every cell of both tables through the same path as abcmini train, then the tables and figures. Resumes where it stopped."""
    from abcmini.names import canonical_method, check_task
    from abcmini.recipes import load_recipe

    with user_errors():  # before torch is imported
        overridden = [
            name
            for name in ("recipe", "tasks", "methods", "seeds")
            if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT
        ]
        if quick and overridden:
            raise UserError(
                f"--quick sets --{overridden[0]} itself; drop one of them (--quick is --recipe quick --tasks successor "
                "--methods vanilla,abc --seeds 0)"
            )
        if quick:
            recipe, tasks, methods, seeds = "quick", "successor", "vanilla,abc", "0"
        for task in tasks.split(","):
            check_task(task)
        for method in methods.split(","):
            canonical_method(method)
        chosen = load_recipe(recipe)
    from abcmini.limits import check_memory, check_writable
    from abcmini.outputs.compare import comparison_run
    from abcmini.outputs.dashboard import check_dashboard_target, write_dashboard
    from abcmini.outputs.report import check_report_target, collect, write_report
    from abcmini.pipeline import Tracking
    from abcmini.reproduce import plan, read_invocations, run_all, table_cells

    with user_errors():
        out = out or os.path.join("runs", chosen.name)
        seed_list = parse_integers(seeds, "--seeds", minimum=0)
        jobs = plan(chosen, table_cells(tasks.split(","), methods.split(","), seed_list), out)
        for job in jobs:
            check_memory(job.experiment.run, "cpu")
        if not dry_run:
            check_writable(out)
            read_invocations(out)  # a ledger of the wrong shape is refused before any work
            check_report_target(
                os.path.join(out, "report.md"), sorted({job.cell.task for job in jobs})
            )  # …and a user's file there
            check_dashboard_target(os.path.join(out, "dashboard.html"))
    if dry_run:
        console.print_json(
            data=[
                {
                    "out": job.run_dir,
                    "source": job.source_dir,
                    "experiment": job.experiment.to_dict(),
                }
                for job in jobs
            ]
        )
        return
    to_do = {
        job for job in jobs if not job.done()
    }  # the bar counts these on top of the finished ones
    console.print(
        f"[bold]reproduce[/] {len(jobs)} runs ({len(to_do)} to do) · recipe {chosen.name} · {tasks} · {methods} · "
        f"seeds {list(seed_list)} · {workers} workers → {out}",
        soft_wrap=True,
    )
    start = time.perf_counter()
    progress = Progress(
        TextColumn("reproduce"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )

    def on_done(job, result):
        if "error" in result:
            errors.print(
                f"[red]{job.cell.task} {job.cell.method} seed {job.cell.seed}: {result['error']}[/]",
                soft_wrap=True,
                highlight=False,
            )
            if "traceback" in result:
                errors.print(result["traceback"], soft_wrap=True, highlight=False, markup=False)
        else:
            accs = (
                " ".join(f"{n}:{100 * a:.1f}" for n, a in result["accuracy"].items())
                if "accuracy" in result
                else "(ABC source, not tested)"
            )
            console.print(
                f"{time.perf_counter() - start:7.0f}s  {job.cell.task:<9} {result['method']:<16} s{job.cell.seed}  "
                f"{result['train_steps']} steps {result['train_seconds']:.0f}s  {accs}",
                highlight=False,
                soft_wrap=True,
            )
        progress.advance(bar, int(job in to_do))
        sys.stdout.flush()

    def on_wait(running):
        if not console.is_terminal:  # a log file hears at least once a minute what is running
            cells = ", ".join(f"{j.cell.task}/{j.experiment.name}" for j in running)
            console.print(f"{time.perf_counter() - start:7.0f}s  running: {cells}", highlight=False)
            sys.stdout.flush()

    try:
        with progress, user_errors():  # a full disk under the ledger: one line
            bar = progress.add_task("cells", total=len(jobs), completed=len(jobs) - len(to_do))
            results = run_all(jobs, workers, on_done, Tracking(wandb, wandb_project), on_wait)
    except (KeyboardInterrupt, Stopped) as stop:
        done = read_invocations(out)[-1]["done"]
        errors.print(
            f"interrupted after {time.perf_counter() - start:.0f}s: {done} cell{'s' * (done != 1)} finished in this invocation; "
            f"every unfinished run keeps its last checkpoint; rerun the same command to resume",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(exit_code_of(stop)) from None
    failed = sum("error" in r for r in results)
    if failed and not glob.glob(os.path.join(out, "**", "eval.json"), recursive=True):
        errors.print(
            f"reproduce: {failed} failed and no cell has a result record to report",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(1)
    with user_errors():
        text, pngs = write_report(out, os.path.join(out, "report.md"), read_invocations(out))
        dashboard = write_dashboard(out, os.path.join(out, "dashboard.html"))
        compared = comparison_run(
            wandb,
            wandb_project,
            out,
            collect(out),
            f"{chosen.name}/comparison",
            recipe=chosen.name,
            tasks=tasks.split(","),
            methods=methods.split(","),
            seeds=list(seed_list),
        )
    console.print(text, highlight=False, soft_wrap=True, markup=False)
    if compared:
        console.print(
            f"comparison: wandb run {compared} (group {chosen.name}/comparison)",
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        f"reproduce: {len(results) - failed} runs done, {failed} failed, {time.perf_counter() - start:.0f}s → "
        f"{os.path.join(out, 'report.md')}, {dashboard}, {', '.join(os.path.basename(p) for p in pngs)}",
        soft_wrap=True,
        highlight=False,
    )
    if failed:
        raise typer.Exit(1)


@app.command("sweep")
def sweep_command(
    file: str = typer.Argument(
        ..., help="A wandb sweep YAML (program: cli.py), e.g. sweeps/paper-grid.yaml."
    ),
    count: int = typer.Option(
        None,
        min=1,
        max=10_000,
        help="Run at most this many (required for random and bayes searches).",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the command of every run and exit."
    ),
):
    """Run a sweep with no wandb server: wandb's sweep engine expands it locally and the runs go one after another, each exactly the command wandb agent would run."""
    import subprocess

    from abcmini.sweep import command_line, expand, load_sweep, run_dirs

    with user_errors():
        if os.path.isdir(file):
            raise UserError(f"{file!r} is a directory; name a sweep YAML file")
        config = load_sweep(file)
        runs = expand(config, count)
        train = typer.main.get_command(app).commands["train"]
        options = {name.replace("_", "-") for param in train.params for name in param.opts}
        unknown = sorted(
            {
                key
                for params in runs
                for key in params
                if f"--{key.replace('_', '-')}" not in options
            }
        )
        if unknown:
            raise UserError(
                f"sweep file {file!r}: {unknown[0]!r} is not an option of abcmini train"
            )
        for (
            params
        ) in runs:  # each run's options parsed as train parses them (types, bounds), before any run
            try:
                spelled = [
                    f"--{key.replace('_', '-')}={value}" for key, value in params.items()
                ]  # the app's token_normalize_func
                train.make_context("train", boolean_values(train, spelled))
            except ClickException as error:
                raise UserError(f"sweep file {file!r}: {error.format_message()}") from None
    commands = [command_line(config, params) for params in runs]
    if dry_run:
        for argv in commands:
            console.print(" ".join(argv), highlight=False, soft_wrap=True)
        return
    failed, name = 0, config.get("name", os.path.basename(file))
    project = (
        {"WANDB_PROJECT": str(config["project"])} if config.get("project") else {}
    )  # the file's project, as wandb sweep takes it
    env = {**os.environ, "ABCMINI_SWEEP": name, **project}
    for i, argv in enumerate(commands, 1):
        console.print(
            f"[bold]sweep {name}[/] run {i}/{len(commands)}: {' '.join(argv[1:])}",
            soft_wrap=True,
            highlight=False,
        )
        sys.stdout.flush()
        if subprocess.run(argv, env=env).returncode != 0:
            failed += 1
    console.print(
        f"sweep: {len(commands) - failed} runs finished, {failed} failed", highlight=False
    )
    tracked = not any("--no-wandb" in boolean_values(train, argv) for argv in commands)
    dirs = run_dirs(commands, env) if tracked else []
    from abcmini.outputs.report import collect  # matplotlib and torch: after the runs

    records = [record for run_dir in dirs if os.path.isdir(run_dir) for record in collect(run_dir)]
    if records:
        from abcmini.outputs.compare import comparison_run

        root = os.path.commonpath(
            [os.path.dirname(os.path.abspath(d)) for d in dirs]
        )  # above every run directory
        with user_errors():
            compared = comparison_run(
                True,
                project.get("WANDB_PROJECT"),
                root,
                records,
                f"sweep/{name}",
                sweep=name,
                file=file,
            )
        if compared:
            console.print(
                f"comparison: wandb run {compared} (group sweep/{name}) in {root}",
                highlight=False,
                soft_wrap=True,
            )
    if failed:
        raise typer.Exit(1)


@app.command("sync")
def sync_command(
    root: str = typer.Argument(
        ..., help="A results root (e.g. runs/paper): every offline wandb run below it is synced."
    ),
    entity: str = typer.Option(None, help="wandb entity [default: the API key's]."),
    project: str = typer.Option(
        None, help="Put every run in this project [default: the project each run was logged to]."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="List the runs, the upload command and the lineage calls, and exit.",
    ),
):
    """Upload every offline wandb run under ROOT (ABC sources and comparison runs included) with wandb sync, then restore the lineage edges the offline runs recorded (config uses) through wandb's API. Safe to run again."""
    from abcmini.outputs.sync import sync

    with user_errors():
        sync(
            root,
            entity,
            project,
            dry_run,
            say=lambda line: console.print(line, highlight=False, soft_wrap=True, markup=False),
        )


@app.command("workspace")
def workspace_command(
    root: str = typer.Argument(
        ..., help="A results root whose result records name the tasks, methods and recipe."
    ),
    entity: str = typer.Option(None, help="wandb entity (required to save)."),
    project: str = typer.Option("abcmini", help="wandb project the runs were logged to."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be saved and exit."),
):
    """Save a wandb workspace view per task and one report comparing the methods of ROOT's runs (wandb-workspaces; needs a server and an API key)."""
    from abcmini.outputs.report import collect
    from abcmini.outputs.track import REACH_SECONDS, base_url, has_api_key, reachable
    from abcmini.outputs.workspace import build, describe, save

    with user_errors():
        if not os.path.isdir(root):
            raise UserError(f"results root {root!r} is not a directory")
        records = collect(root)
        if not records:
            raise UserError(f"results root {root!r} holds no result records (eval.json)")
        if not dry_run and not entity:
            raise UserError(
                "saving needs --entity (your wandb user or team); --dry-run shows what would be saved"
            )
        if not dry_run and not has_api_key():
            raise UserError(
                "no wandb API key (WANDB_API_KEY or wandb login): nothing was saved; --dry-run shows what would be saved"
            )
        if not dry_run and not reachable(base_url()):
            raise UserError(
                f"the wandb server {base_url()} does not answer within {REACH_SECONDS} s: nothing "
                "was saved; check the network (or WANDB_BASE_URL) and run it again"
            )
        views, report = build(records, entity or "ENTITY", project)
    for line in describe(views, report):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    if not dry_run:
        with user_errors():
            for url in save(views, report):
                console.print(f"saved → {url}", highlight=False, soft_wrap=True)


def main():
    commit()  # the code this process runs: a record written hours later names it
    try:
        app()
    except (ImportError, OSError, RuntimeError, MemoryError) as error:  # e.g. under ulimit -v
        if not isinstance(error, MemoryError) and not re.search(
            "allocate memory|out of memory|map segment", str(error)
        ):
            raise
        errors.print(
            f"error: out of memory ({str(error).splitlines()[-1][:120] if str(error) else 'MemoryError'}); "
            "a limit such as ulimit -v leaves too little: raise it, or lower --batch-size or --lengths",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)


if __name__ == "__main__":
    sys.exit(main())
