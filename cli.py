"""abcmini command line: train, eval, calibrate, report, reproduce, sweep (also ``python cli.py …``).

Every option also accepts the underscore spelling (``--batch_size=64``), which is what a wandb
sweep agent passes.
"""

import os
import shutil
import sys
import time
from contextlib import contextmanager

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError  # typer vendors Click (≥ 0.26)
from typer.core import TyperGroup
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

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
    help="Attention Bias Scaffolding / Calibration for arithmetic length generalization.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
LOG_EVERY = 10  # training loss and learning rate go to wandb every this many steps
PAPER_LENGTHS = "6,10,15,20,60"


class UserError(Exception):
    """Bad input: reported as one line, exit code 2."""


@contextmanager
def user_errors():
    """Turn the library's validation errors into one clear line and exit code 2."""
    try:
        yield
    except (UserError, ValueError) as error:
        errors.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def parse_lengths(text: str, option: str = "--lengths", minimum: int = 1) -> list[int]:
    try:
        lengths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{option} takes comma-separated whole numbers, got {text!r}") from None
    if not lengths:
        raise UserError(f"{option} is empty")
    bad = [n for n in lengths if n < minimum]
    if bad:
        what = "length" if option == "--lengths" else option
        raise UserError(f"{what} must be at least {minimum}, got {bad[0]}")
    return lengths


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but CUDA is not available")
    return device


@app.command()
def train(
    task: str = typer.Option("successor", help="successor | addition | nx1 | parity (running-xor scratchpad) | parity_class (one output token)."),
    method: str = typer.Option("vanilla", help="Positional scheme: vanilla (sinusoidal) | nope | rope | alibi | relative (Shaw et al., clipped); an ABS configuration of the paper: '+w=1' | '+T=3' | 'NoPE+w=1'; or abc (train to interpolation, calibrate, retrain)."),
    window: int = typer.Option(None, help="ABS window w: decoder self-attention sees its diagonal and w below, cross-attention the aligned input digit ±w (binary tasks get interleaved operands)."),
    period: int = typer.Option(0, help="Cyclic Position Indexing period T: positions become i mod T (0 = off). Applies to any method."),
    preset: str = typer.Option("cpu", help="Model size: paper (1 enc / 6 dec layers, 8 heads, d 128, FFN 512, dropout 0.3) | cpu | tiny."),
    enc_layers: int = typer.Option(None, "--enc-layers", "--enc_layers", help="Override the preset's encoder depth (0: cross-attention reads the embedded input directly, as in the authors' code)."),
    pe_scale: float = typer.Option(None, "--pe-scale", "--pe_scale", min=0.0, help="Amplitude of the sinusoidal encoding next to N(0, 1) token embeddings (default 1; the recipe's +w=1 uses 1/16)."),
    geometry: str = typer.Option("fixed", help="fixed: every operand padded to --pad-width in training and test (the paper's protocol); growing: pad width follows the test length."),
    pad_width: int = typer.Option(20, "--pad-width", "--pad_width", min=1, help="Fixed geometry's pad width in digits; the longest length you can evaluate."),
    seed: int = typer.Option(0, help="Seed of the model's initialisation and of the batch order."),
    data_seed: int = typer.Option(0, "--data-seed", "--data_seed", help="Seed of the [0, 2^20] permutation and its 7:1 train/validation split."),
    steps: int = typer.Option(3000, help="Maximum number of optimizer steps."),
    stop_at: float = typer.Option(None, "--stop-at", "--stop_at", min=0.0, max=1.0, help="Stop once validation exact match reaches this (e.g. 0.995: train to interpolation)."),
    train_on: float = typer.Option(1.0, "--train-on", "--train_on", min=1.0, help="With --stop-at: validation first reached it at step s; stop at the first evaluation from step train_on·s on (1.5: half as long again)."),
    batch_size: int = typer.Option(128, "--batch-size", "--batch_size", min=1, help="Examples per optimizer step."),
    lr: float = typer.Option(1e-3, min=0.0, help="Peak learning rate (linear warmup, cosine decay to 10%)."),
    warmup: int = typer.Option(100, min=0, help="Warmup steps."),
    eval_every: int = typer.Option(250, "--eval-every", "--eval_every", min=1, help="Validate and checkpoint every this many steps."),
    valid_size: int = typer.Option(1000, "--valid-size", "--valid_size", min=1, help="Validation examples (from the held-out 1/8 of the pool)."),
    bias: str = typer.Option(None, help="ABC: a bias file from `abcmini calibrate`, added per head to every decoder layer's self- and cross-attention."),
    out: str = typer.Option(None, help="Run directory (default runs/<task>-<method>-s<seed>)."),
    resume: bool = typer.Option(False, help="Continue the run in --out from its last checkpoint."),
    overwrite: bool = typer.Option(False, help="Delete an existing run in --out and start afresh."),
    eval_lengths: str = typer.Option("", "--eval-lengths", "--eval_lengths", help="After training, evaluate at these comma-separated lengths (as `abcmini eval`); empty: skip."),
    wandb: bool = typer.Option(True, "--wandb/--no-wandb", help="Track with Weights & Biases (offline unless an API key is configured)."),
    wandb_project: str = typer.Option(None, "--wandb-project", "--wandb_project", help="wandb project (default $WANDB_PROJECT or abcmini)."),
    kappa_cross: float = typer.Option(4.5, "--kappa-cross", "--kappa_cross", help="--method abc: cross-attention dropoff factor κ."),
    kappa_self: float = typer.Option(0.87, "--kappa-self", "--kappa_self", help="--method abc: self-attention dropoff factor κ."),
    dry_run: bool = typer.Option(False, "--dry-run", "--dry_run", help="Validate every option, print the run's config and exit without training."),
    device: str = typer.Option("auto", help="auto | cpu | cuda."),
):
    """Train a model; checkpoints (with their full config) go to the run directory.

    ``--method abc`` runs the whole ABC recipe: train Vanilla to interpolation in
    RUN_DIR/interpolation, calibrate it, and retrain a fresh model with the bias and no
    positional encoding in RUN_DIR (``--method vanilla --bias FILE`` keeps the sinusoidal one)."""
    with user_errors():
        from abcmini.evaluate import pad_width_for
        from abcmini.train import CHECKPOINT, RunConfig, Trainer, resolve_method

        if geometry not in ("fixed", "growing"):
            raise UserError(f"unknown geometry {geometry!r}; choose fixed or growing")
        abc = method.lower() == "abc"
        if abc and bias:
            raise UserError("--method abc calibrates its own bias; drop --bias (or use --method vanilla --bias FILE)")
        scheme, window, period = resolve_method("nope" if abc else method, window, period)  # ABC retrains without PE
        label = RunConfig(task=task, scheme=scheme, period=period, window=window, bias_file="abc" if abc else bias).label
        out = out or os.path.join("runs", f"{task}-{label.replace('+', '_').replace('=', '')}-s{seed}")
        bias = os.path.join(out, "abc_bias.pt") if abc else bias
        cfg = RunConfig(
            task=task, scheme=scheme, period=period, window=window, bias_file=bias, preset=preset, pad_width=pad_width if geometry == "fixed" else None,
            seed=seed, data_seed=data_seed, steps=steps, batch_size=batch_size, lr=lr, warmup=warmup,
            stop_at=stop_at, train_on=train_on, eval_every=eval_every, valid_size=valid_size,
            model_overrides={key: value for key, value in (("enc_layers", enc_layers), ("pe_scale", pe_scale)) if value is not None},
        )
        wanted = parse_lengths(eval_lengths) if eval_lengths.strip() else []
        for length in wanted:
            pad_width_for(length, cfg.pad_width)
        exists = os.path.exists(os.path.join(out, CHECKPOINT))
        if exists and not (resume or overwrite):
            raise UserError(f"{out!r} already holds a run; pass --resume to continue it or --overwrite to replace it")
        device = pick_device(device)
        cfg.model_config()
        if dry_run:
            console.print_json(data={"out": out, "config": cfg.tracking_config(), **({"abc": {"kappa_cross": kappa_cross, "kappa_self": kappa_self}} if abc else {})})
            return
        trainer = None if abc else Trainer(cfg, device)  # validates everything before a run is replaced
        if overwrite and os.path.isdir(out):
            shutil.rmtree(out)
    with Tracker.start(wandb, out, "train", {**cfg.tracking_config(), **({"kappa_cross": kappa_cross, "kappa_self": kappa_self} if abc else {})}, wandb_project) as tracker:
        if abc:
            from abcmini.calibrate import calibrate_run

            source = os.path.join(out, "interpolation")
            source_cfg = RunConfig(**{**cfg.to_dict(), "scheme": "vanilla", "bias_file": None, "stop_at": cfg.stop_at or 0.995, "train_on": 1.0,
                                      "model_overrides": {k: v for k, v in cfg.model_overrides.items() if k != "pe_scale"}})
            fit(Trainer(source_cfg, device), source, resume, None)
            if not (resume and os.path.exists(bias)):
                with user_errors():
                    calibrate_run(source, bias, kappa_cross=kappa_cross, kappa_self=kappa_self)
                console.print(f"calibrated {source} → {bias}", soft_wrap=True, highlight=False)
            trainer = Trainer(cfg, device)
        last = fit(trainer, out, resume, tracker)
        tracker.summary({"valid/exact_match": last.get("valid_acc", 0.0), "steps": last.get("step", 0), "train/seconds": last.get("seconds", 0.0)})
        log_model_figures(tracker, cfg, trainer.model, trainer.bias, trainer.valid, step=trainer.step_count)
        if wanted:
            run_evaluation(out, cfg, trainer.model, trainer.bias, wanted, 0, 1000, tracker, last)


def fit(trainer, out: str, resume: bool, tracker) -> dict:
    """Train ``trainer`` into ``out`` (continuing its checkpoint with ``resume``) with a progress
    bar, plain log lines when not on a terminal, and tracking. Returns the last history entry."""
    from abcmini.train import learning_rate

    cfg = trainer.cfg
    if resume:
        with user_errors():
            trainer.resume(out)
    tracker = tracker or Tracker()
    console.print(f"[bold]train[/] {cfg.task} · {cfg.label} · preset {cfg.preset} · "
                  f"{'pad width ' + str(cfg.pad_width) if cfg.pad_width else 'growing geometry'} · seed {cfg.seed} → {out}", soft_wrap=True)
    columns = [TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:.4f} · valid {task.fields[valid]}"), TimeElapsedColumn()]
    with user_errors(), Progress(*columns, console=console) as progress:
        bar = progress.add_task("training", total=cfg.steps, completed=trainer.step_count, loss=float("nan"), valid="–")

        def on_step(step, loss):
            progress.update(bar, completed=step, loss=loss)
            if step % LOG_EVERY == 0:
                tracker.log({"train/loss": loss, "train/lr": learning_rate(cfg, step - 1)}, step=step)

        def on_eval(entry):
            progress.update(bar, valid=f"{entry['valid_acc']:.2%}")
            tracker.log({"valid/exact_match": entry["valid_acc"], "train/loss_mean": entry["loss"], "train/seconds": entry["seconds"]}, step=entry["step"])
            if not console.is_terminal:  # a log file gets one plain line per evaluation
                console.print(f"step {entry['step']:>6} · loss {entry['loss']:.4f} · valid {entry['valid_acc']:.2%} · {entry['seconds']:.0f}s")
                sys.stdout.flush()

        last = trainer.run(out, on_eval=on_eval, on_step=on_step)
    console.print(f"done: step {last.get('step')} · valid exact match {last.get('valid_acc', 0):.2%} · {last.get('seconds', 0):.0f}s")
    return last


@app.command("eval")
def evaluate(
    run_dir: str = typer.Argument(..., help="A run directory written by `abcmini train`."),
    lengths: str = typer.Option(PAPER_LENGTHS, help="Comma-separated operand lengths in digits."),
    seed: int = typer.Option(0, help="Seed of the extrapolation sets (the same seed gives every method the same numbers)."),
    batch_size: int = typer.Option(1000, "--batch-size", "--batch_size", min=1, help="Sequences decoded at once."),
    wandb: bool = typer.Option(True, "--wandb/--no-wandb", help="Track with Weights & Biases (offline unless an API key is configured)."),
    wandb_project: str = typer.Option(None, "--wandb-project", "--wandb_project", help="wandb project (default $WANDB_PROJECT or abcmini)."),
    device: str = typer.Option("auto", help="auto | cpu | cuda."),
):
    """Exact-match accuracy by length on the seeded extrapolation sets; writes eval.json."""
    with user_errors():
        from abcmini.evaluate import pad_width_for
        from abcmini.train import load_checkpoint, load_model

        wanted = parse_lengths(lengths)
        state = load_checkpoint(run_dir)
        cfg, model, bias = load_model(state, pick_device(device))
        for length in wanted:
            pad_width_for(length, cfg.pad_width)
    with Tracker.start(wandb, run_dir, "eval", cfg.tracking_config(), wandb_project) as tracker:
        run_evaluation(run_dir, cfg, model, bias, wanted, seed, batch_size, tracker, state["history"][-1] if state["history"] else {})


def run_evaluation(run_dir, cfg, model, bias, lengths, seed, batch_size, tracker, trained: dict):
    """Accuracy at each length: printed, written to ``RUN_DIR/eval.json`` and tracked."""
    from abcmini.evaluate import extrapolation_accuracy, write_eval_report

    results = {}
    for length in lengths:
        start = time.perf_counter()
        results[length] = extrapolation_accuracy(model, cfg.task, length, cfg.pad_width, seed, bias, cfg.aligned, batch_size)
        console.print(f"length {length:>3}: {results[length]:.2%} ({time.perf_counter() - start:.1f}s)", highlight=False)
        sys.stdout.flush()
    title = f"{cfg.task} · {cfg.label} · {'pad ' + str(cfg.pad_width) if cfg.pad_width else 'growing'} · seed {cfg.seed}"
    table = Table(title=title)
    table.add_column("length", justify="right")
    table.add_column("exact match", justify="right")
    for length, acc in results.items():
        table.add_row(str(length), f"{100 * acc:.2f}%")
    console.print(table)
    tracker.extrapolation(results, title)
    write_eval_report(run_dir, cfg, results, seed, trained)


def log_model_figures(tracker, cfg, model, bias, example, step=None):
    """Attention heatmaps for a fixed input and the run's scaffold (ABS window / ABC bias), per head."""
    if tracker.run is None:
        return
    from abcmini.figures import attention_figures, bias_figures, close
    from abcmini.tasks import detokenize

    figures = attention_figures(model, example, bias, cfg.label)
    if bias is not None:
        figures |= bias_figures(bias, example.tgt_out.shape[1], detokenize(example.src[0]), cfg.label)
    tracker.images(figures, step=step)
    for fig in figures.values():
        close(fig)


def parse_integers(text: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"{option} takes comma-separated integers, got {text!r}") from None


@app.command("calibrate")
def calibrate_command(
    run_dir: str = typer.Argument(..., help="A run that has interpolated (trained without scaffolding)."),
    samples: int = typer.Option(1000, help="Training inputs decoded to average the attention over."),
    kappa_cross: float = typer.Option(4.5, "--kappa-cross", "--kappa_cross", help="Dropoff factor κ for cross-attention: keep lines with d_l > μ + κσ."),
    kappa_self: float = typer.Option(0.87, "--kappa-self", "--kappa_self", help="Dropoff factor κ for decoder self-attention."),
    directions: str = typer.Option("1,-1,0", help="Line directions Δ (one row down, Δ columns right): 1 diagonal, -1 anti-diagonal, 0 vertical; any integers."),
    cross_directions: str = typer.Option(None, "--cross-directions", "--cross_directions", help="Directions for cross-attention only (default: --directions); the reproduce recipe uses -1,0."),
    min_accuracy: float = typer.Option(0.99, "--min-accuracy", "--min_accuracy", help="Refuse a run whose last validation exact match is below this."),
    min_support: float = typer.Option(0.5, "--min-support", "--min_support", min=0.0, max=1.0, help="Extend only lines that cross at least this fraction of the trusted rows (0: every line, as in the paper's Algorithm 1)."),
    layers: str = typer.Option("-1", help="Decoder layers whose attention is calibrated, comma-separated (-1: the last, as in the paper); several layers' lines are united."),
    silent_empty: bool = typer.Option(False, "--silent-empty-heads/--transparent-empty-heads", "--silent_empty_heads/--transparent_empty_heads", help="A head where no line survives reads only the input's first token (silent) instead of everything (transparent, the paper's rule)."),
    skip_start: bool = typer.Option(False, "--skip-start/--count-start", "--skip_start/--count_start", help="Average self-attention diagonals without their cell on the start token (SOS), where heads park attention; the start column keeps its vertical line."),
    keep_padding: bool = typer.Option(False, "--keep-padding/--drop-padding", "--keep_padding/--drop_padding", help="Keep the lines that read padding (the zeros in front of a number), as the paper does: cross-attention lines that read a real token on fewer than --min-support of the trusted rows, and verticals on a column that is padding in some calibration input."),
    seed: int = typer.Option(0, help="Seed of the subset of training inputs."),
    out: str = typer.Option(None, help="Bias file to write (default RUN_DIR/abc_bias.pt); heatmap PNGs go beside it."),
    wandb: bool = typer.Option(True, "--wandb/--no-wandb", help="Track with Weights & Biases (offline unless an API key is configured)."),
    wandb_project: str = typer.Option(None, "--wandb-project", "--wandb_project", help="wandb project (default $WANDB_PROJECT or abcmini)."),
):
    """ABC: average the last decoder layer's attention of an interpolating model and turn it into
    line-table biases usable at any length (`abcmini train --bias FILE`)."""
    with user_errors():
        import torch

        from abcmini.calibrate import Calibrated, calibrate_run
        from abcmini.figures import calibration_figures

        deltas, cross_deltas = parse_integers(directions, "--directions"), parse_integers(cross_directions or directions, "--cross-directions")
        path = out or os.path.join(run_dir, "abc_bias.pt")
        start = time.perf_counter()
        result = calibrate_run(run_dir, path, samples, kappa_cross, kappa_self, deltas, seed, min_accuracy, min_support,
                               parse_integers(layers, "--layers"), cross_deltas, not keep_padding, not silent_empty, skip_start)
    cfg, example = result["config"], result["example"]
    self_avg, cross_avg = result["attention"]["self"], result["attention"]["cross"]
    calibrated = Calibrated.from_state(result["bias"])
    seconds = time.perf_counter() - start
    for kind, table in (("cross", calibrated.cross_attention), ("self", calibrated.self_attention)):
        open_lines = torch.isfinite(table.values).sum(dim=(0, 2)).tolist()
        console.print(f"{kind:>5}-attention: open lines per head {open_lines}; transparent heads "
                      f"{table.transparent.nonzero().flatten().tolist() or 'none'}", highlight=False)
    console.print(f"calibrated on {samples} training inputs in {seconds:.1f}s → {path}", soft_wrap=True)
    pngs = calibration_figures(os.path.dirname(os.path.abspath(path)), cfg.task, self_avg, cross_avg, calibrated, example, result["layers"])
    console.print(f"heatmaps: {', '.join(os.path.basename(p) for p in pngs.values())}", soft_wrap=True, highlight=False)
    settings = {**cfg.tracking_config(), "kappa_cross": kappa_cross, "kappa_self": kappa_self, "directions": list(deltas), "cross_directions": list(cross_deltas), "min_support": min_support, "layers": result["layers"], "drop_padding": not keep_padding, "transparent_empty": not silent_empty, "skip_start": skip_start, "samples": samples}
    with Tracker.start(wandb, run_dir, "calibrate", settings, wandb_project) as tracker:
        tracker.images({f"calibration/{name}": png for name, png in pngs.items()})
        tracker.summary({"calibration/seconds": seconds})


@app.command("report")
def report_command(
    runs_dir: str = typer.Argument("runs", help="Directory searched (recursively) for evaluated runs (eval.json)."),
    out: str = typer.Option(None, help="Where report.md and accuracy_<task>.png go (default RUNS_DIR)."),
):
    """The paper-style table (task × method × length, the paper's numbers beside ours) and one
    accuracy-vs-length figure per task, from finished runs."""
    from abcmini.report import collect, costs, figures, markdown, summarize

    with user_errors():
        if not os.path.isdir(runs_dir):
            raise UserError(f"runs directory {runs_dir!r} does not exist")
        results = collect(runs_dir)
        if not results:
            raise UserError(f"no evaluated runs (eval.json) under {runs_dir!r}; run `abcmini eval RUN_DIR` first")
    out = out or runs_dir
    os.makedirs(out, exist_ok=True)
    cells = summarize(results)
    text = f"{markdown(cells)}\n## Training cost\n\n{costs(results)}"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    pngs = figures(cells, out)
    console.print(text, highlight=False, soft_wrap=True)
    console.print(f"{len(results)} runs → {os.path.join(out, 'report.md')}, {', '.join(os.path.basename(p) for p in pngs)}", highlight=False, soft_wrap=True)


@app.command("reproduce")
def reproduce_command(
    tasks: str = typer.Option("successor,addition,nx1,parity", help="Comma-separated tasks."),
    methods: str = typer.Option("vanilla,alibi,rope,abc,+w=1,+T=3,NoPE+w=1", help="Comma-separated methods of the paper's two tables."),
    seeds: str = typer.Option("0,1,2", help="Comma-separated seeds; tables report the median and range."),
    quick: bool = typer.Option(False, help="Small but real: Successor, Vanilla vs ABC, pad width 24, lengths to 20, one seed."),
    out: str = typer.Option("runs/reproduce", help="Root of the run directories, report.md and figures."),
    workers: int = typer.Option(2, min=1, help="Jobs trained side by side (one thread each)."),
):
    """The paper end to end: baselines, ABS, train to interpolation → calibrate → retrain (ABC),
    evaluation at the paper's lengths, both tables and Figure 1. Resumes where it stopped."""
    from abcmini.reproduce import ABS_TASKS, MAIN_TASKS, QUICK, Recipe, plan, read_invocations, run_all, run_config
    from abcmini.report import collect, costs, figures, markdown, summarize, wall_time

    with user_errors():
        if quick:
            task_list, method_list, seed_list, recipe = ["successor"], ["vanilla", "abc"], [0], QUICK
            out = out if out != "runs/reproduce" else "runs/quick"
        else:
            task_list, method_list, seed_list, recipe = tasks.split(","), methods.split(","), parse_lengths(seeds, "--seeds", 0), Recipe()
        jobs = plan(task_list, method_list, seed_list, out)
        for job in jobs:  # validate every cell before hours of training
            run_config(job, recipe)
    console.print(f"[bold]reproduce[/] {len(jobs)} runs · {', '.join(task_list)} · {', '.join(method_list)} · seeds {seed_list} "
                  f"· pad width {recipe.pad_width} · {workers} workers → {out}", soft_wrap=True)
    start = time.perf_counter()

    def on_done(job, result):
        if "error" in result:
            errors.print(f"[red]{job.task} {job.method} seed {job.seed}: {result['error']}[/]", soft_wrap=True)
        else:
            accs = " ".join(f"{n}:{100 * a:.1f}" for n, a in result["accuracy"].items())
            console.print(f"{time.perf_counter() - start:7.0f}s  {job.task:<9} {result['method']:<16} s{job.seed}  "
                          f"{result['train_steps']} steps {result['train_seconds']:.0f}s  {accs}", highlight=False, soft_wrap=True)
        sys.stdout.flush()

    results = run_all(jobs, recipe, workers, on_done)
    finished = collect(out)
    cells = summarize(finished)
    main_rows = [(t, m) for t in MAIN_TASKS for m in ("vanilla", "alibi", "rope", "nope+abc")]
    abs_rows = [(t, m) for t in ABS_TASKS for m in ("vanilla", "vanilla+w=1", "vanilla+w=1+T=3", "nope+w=1")]
    text = (f"## Main table (paper: results-table)\n\n{markdown(cells, [n for n in (6, 10, 20, 60) if n in recipe.lengths], main_rows)}\n"
            f"## ABS table (paper: tab.abs)\n\n{markdown(cells, recipe.lengths, abs_rows)}\n"
            f"## Training cost\n\n{costs(finished)}\n"
            f"## Wall time\n\n{wall_time(read_invocations(out))}")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    pngs = figures(cells, out)
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
    dry_run: bool = typer.Option(False, "--dry-run", "--dry_run", help="Print the command of every run and exit."),
):
    """Run a sweep with no wandb server: wandb's sweep engine expands it locally and the runs go
    one after another, each exactly the command `wandb agent` would run."""
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
