"""The one configuration schema: every field a run, ABC's calibration, a recipe and a cell's
test have, each declared once with its type, default, checks and help (and a recipe's reason
for its value). ``abcmini.recipes`` names recipes over it, ``abcmini.experiment`` resolves a cell
to it, and the command line builds its options from it (``OPTIONS``), before torch is imported.
"""

import math
from dataclasses import asdict, dataclass, field, fields, replace

from abcmini.names import (
    METHOD_KINDS,
    TASKS,
    ConfigError,
    Method,
    check_int,
    check_selector,
    check_task,
    is_binary,
    selects,
)
from abcmini.nn.config import ARCHS, BLOCK_CHOICES, PRESETS, ModelConfig
from abcmini.nn.rules import DEFAULT, RULES, applying
from abcmini.nn.schemes import SCHEMES

POOL_DIGITS = len(str(2**20))  # L_int: the longest operand in the pool has 7 digits
TEST_FRAMES = ("fixed", "follows")
HINT_TASKS = ("successor", "addition", "nx1")  # what index hints are defined for
UNEQUAL_TASKS = (
    "addition",
    "multiadd",
    "multiply",
)  # --operand-lengths unequal: tasks of two or more operands


def check_test_frame(value: str) -> None:
    if value not in TEST_FRAMES:
        raise ConfigError(f"--test-frame is fixed or follows, not {value!r}")


def check_arch(value: str) -> None:
    if value not in ARCHS:
        raise ConfigError(f"--arch is one of {', '.join(ARCHS)}, not {value!r}")


def check_window_unit(value: str) -> None:
    if value not in ("column", "pair"):
        raise ConfigError(f"--window-unit is column or pair, not {value!r}")


@dataclass(frozen=True)
class Form:
    """How an input is written: ``aligned`` interleaves a binary task's operands (ABS input
    alignment); ``reversed`` writes each operand least significant digit first, as Abacus and
    Zhou et al. do (the answer is written so in every form); ``hints``: index hint symbols
    (Zhou et al.; ``tasks.format_task``), 0 for none."""

    aligned: bool = False
    reversed: bool = False
    hints: int = 0


def why(default, reason: str, help: str = ""):
    """A recipe field: its value and the one-line reason for it (and, where the command line
    sets it, its help)."""
    return field(default=default, metadata={"why": reason, "help": help})


ABC_ONLY = ("min_support", "rules")  # settings only abcmini's procedure reads


@dataclass(frozen=True)
class Calibration:
    """ABC's calibration settings (paper §4): which calibration (``CALIBRATIONS``) and its
    settings; the fixed parts live in ``abcmini.nn.calibrate``, the rules in docs/recipe.md."""

    algorithm: str = why(
        "abc",
        "abcmini's procedure: Algorithm 1 with the rules that carry its lines across frames",
        "ABC: abc | paper (Algorithm 1) | authors.",
    )

    kappa_self: float = why(
        0.87, "the paper's dropoff factor for self-attention", "ABC: self-attention dropoff factor."
    )
    kappa_cross: float = why(
        2.5,
        "a pad-10 frame has few cross lines; none stands the paper's 4.5 sigma out",
        "ABC: cross-attention dropoff factor.",
    )
    min_support: float = why(
        0.5,
        "extend only lines crossing half of the trusted rows, and the last one",
        "ABC: support a line needs (rule support).",
    )
    samples: int = why(
        1000,
        "training inputs decoded to average the attention over",
        "ABC: inputs averaged over.",
    )
    seed: int = why(0, "seed of that subset of training inputs", "ABC: seed of those inputs.")
    min_accuracy: float = why(
        0.99,
        "refuse a source below this validation exact match: it has not interpolated",
        "ABC: least validation of a source.",
    )
    rules: str = why(
        "all",
        "every rule beyond Algorithm 1 (abcmini recipe RECIPE lists them); none: the paper as written",
        "ABC: rules: all | none | a,b | all,-a.",
    )

    def __post_init__(self):
        if self.algorithm not in CALIBRATIONS:
            raise ConfigError(f"--calibration is {', '.join(CALIBRATIONS)}, not {self.algorithm!r}")
        for name in ("kappa_self", "kappa_cross", "min_support", "min_accuracy"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(f"{name} must be a finite number, got {getattr(self, name)}")
        if not 0 <= self.min_support <= 1:
            raise ConfigError(f"min_support must lie in [0, 1], got {self.min_support}")
        if self.samples < 1:
            raise ConfigError(f"--samples must be at least 1, got {self.samples}")
        self.rule_names()

    def rule_names(self) -> tuple[str, ...]:
        """The rules on: abcmini's procedure only has rules."""
        return rule_names(self.rules) if self.algorithm == "abc" else ()

    def used(self) -> dict:
        """The settings this calibration reads: ``ABC_ONLY`` are abcmini's procedure's alone."""
        return {
            k: v for k, v in asdict(self).items() if self.algorithm == "abc" or k not in ABC_ONLY
        }

    def title(self, block: bool = False) -> str:
        """The calibration's name, with the rules that apply to lines (or to ``block`` lines)."""
        rules = applying(self.rule_names(), block)
        return {
            "paper": "Algorithm 1 (paper)",
            "authors": "authors' code (calcBias.py at 1d3a21d)",
        }.get(self.algorithm, f"abcmini procedure: rules {', '.join(rules) or 'none'}")


def rule_names(spec: str) -> tuple[str, ...]:
    """Calibration rules spelled out: ``all`` (``DEFAULT``: every rule), ``none``,
    names, or ``all,-band`` (all but band), in ``RULES``' order."""
    chosen = set()
    for word in filter(None, (w.strip() for w in spec.split(","))):
        name = word.removeprefix("-")
        if word in ("all", "none"):
            chosen = set(DEFAULT) if word == "all" else set()
        elif name not in RULES:
            raise ConfigError(
                f"unknown calibration rule {name!r}; rules are all, none or {', '.join(RULES)}"
            )
        elif word.startswith("-"):
            chosen.discard(name)
        else:
            chosen.add(name)
    return tuple(name for name in RULES if name in chosen)


CALIBRATIONS = {  # --calibration NAME → the settings it implies (below any given on the command line)
    "abc": {},
    "paper": {"rules": "none", "kappa_cross": 4.5},  # Algorithm 1 with the paper's κ
    "authors": {
        "rules": "none",
        "kappa_cross": 4.5,
    },  # the authors' dropoffCondition, calcBias.py:164–165
}


@dataclass(frozen=True)
class Recipe:
    """How every cell of the paper's tables is trained on 2 CPU cores."""

    name: str = why("paper", "what produced the README's tables")
    pad_width: int = why(
        12, "a pad-12 frame: steps 5x cheaper than the paper's 64 (docs/paper-gaps.md)"
    )
    lengths: tuple = why((6, 10, 15, 20, 60), "the paper's test lengths")
    test_seed: int = why(0, "every method is tested on the same numbers")
    test_frame: str = why(
        "follows", "each length in a frame of the length plus the training numbers' leading zeros"
    )
    arch: str = why(
        "encoder-decoder",
        "the paper's model; decoder: GPT-style, prompt and answer in one causal sequence",
    )
    preset: str = why("cpu", "2 decoder layers, 4 heads, d 64: converges in minutes on a CPU")
    enc_layers: int = why(
        0, "the authors' identity encoder: cross-attention reads the embedded input"
    )
    enc_layers_in_attention: int = why(
        1, "RoPE, ALiBi, relative act inside self-attention, so their input needs an encoder"
    )
    lr: float = why(
        1e-3, "Adam with warmup and cosine decay, for minutes instead of the paper's days at 1e-5"
    )
    warmup: int = why(100, "linear warmup steps")
    batch_size: int = why(128, "examples per optimizer step")
    eval_every: int = why(250, "validate and checkpoint every this many steps")
    valid_size: int = why(1000, "validation examples from the held-out eighth of the pool")
    stop_at: float = why(0.999, "scaffolded runs (ABS, ABC retraining) stop at 99.9% validation")
    stop_at_plain: float = why(
        0.995, "unscaffolded runs stop at interpolation, enough for ABC's 99%"
    )
    train_on: float = why(
        1.5, "ABS windows train on to 1.5x the step that reached stop_at: long carries need it"
    )
    abc_train_on: float = why(
        3.0, "ABC retraining trains on to 3x the step that reached stop_at: rarer long carry errors"
    )
    abc_pad_width: int = why(
        10,
        "ABC's source trains at pad 10, its retraining from there: 4 trailing zeros, as 60 digits at pad 64",
    )
    abc_frame_spread: int = why(
        10, "ABC retrains in frames of 10 to 20 digits: every test frame's margins were seen"
    )
    abc_valid_size: int = why(
        500, "…and validates on 500 numbers: one ABC training serves every recipe's protocol"
    )
    steps: int = why(4000, "step cap of runs expected to interpolate")
    step_caps: tuple = why(
        (
            ("alibi", 1500, "ALiBi does not interpolate (paper §3); capped short"),
            (
                "addition vanilla",
                20000,
                "Vanilla Addition sits on a loss plateau for thousands of steps",
            ),
            ("addition rope", 20000, "so does RoPE Addition"),
            (
                "parity plain",
                4000,
                "Parity without a window: at pad 12 Vanilla interpolates by step 750",
            ),
            ("parity_class plain", 4000, "as parity"),
            (
                "nx1 abc",
                12000,
                "ABC on N×1 reaches 99.9% late in frames of 10–20: 4,000 cut its 3x short",
            ),
        ),
        "(selector, steps, reason): the last row naming a cell caps it, else steps",
    )
    scaffold_pe_scale: float = why(
        1 / 16, "+w=W: the uncycled sinusoidal encoding at 1/16 amplitude beside the window"
    )
    cpi_from: str = why(
        "end", "CPI counted from the least significant digit keeps each digit's phase in any frame"
    )
    window_unit: str = why(
        "pair",
        "on Addition and N×1 the ABS window and CPI count operand pairs (docs/paper-gaps.md)",
    )
    calibration: Calibration = why(Calibration(), "ABC's calibration settings")
    cells: tuple = why(
        (),
        "a cell's own settings by task, method or 'TASK METHOD': ((selector, ((field, value), …)), …)",
    )
    test_until: float = why(0.0, "the tests stop after the first length below this (0: test all)")
    changes: tuple = why(
        (), "the reasons for the values that differ from the recipe this one is based on"
    )

    def __post_init__(self):
        check_test_frame(self.test_frame)
        check_window_unit(self.window_unit)
        check_arch(self.arch)
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        for f in fields(
            self
        ):  # every integer against its bounds (names.BOUNDS), as the command line checks it
            check_int(getattr(self, f.name), f.name, f.name)
        at_least = {
            "train_on": 1,
            "abc_train_on": 1,
            "scaffold_pe_scale": 0,
            "pad_width": POOL_DIGITS,
            "abc_pad_width": POOL_DIGITS,
        }  # the training numbers have up to 7 digits
        for name, low in at_least.items():
            value = getattr(self, name)
            if value is not None and not value >= low:
                raise ConfigError(f"{name} must be at least {low}, got {value}")
        for name in ("stop_at", "stop_at_plain", "test_until"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be a positive number, got {self.lr}")
        if not self.lengths:
            raise ConfigError("lengths must be one or more whole numbers of at least 1, got []")
        for selector, steps, _ in self.step_caps:
            check_selector(selector, METHOD_KINDS)
            check_int(steps, "steps", f"step_caps: {selector}")

    def cap(self, task: str, method: str) -> int:
        """A cell's step cap: the last row of ``step_caps`` that names it (a task, a method or
        its kind: abc, abs, todays, plain), else ``steps``."""
        rows = [steps for selector, steps, _ in self.step_caps if selects(selector, task, method)]
        return rows[-1] if rows else self.steps

    def capped(self, *rows) -> tuple:
        """``step_caps`` with ``rows`` in: a selector it has keeps its place, a new one goes last."""
        table = {selector: (steps, reason) for selector, steps, reason in self.step_caps}
        table |= {selector: (steps, reason) for selector, steps, reason in rows}
        return tuple((selector, *row) for selector, row in table.items())

    def settings(self, task: str, method: str) -> dict:
        """The ``cells`` settings of one cell: those of every cell (``*``), of its task, of its
        method, then of the pair (``TASK METHOD``), each over the one before."""
        by_selector, chosen = dict(self.cells), {}
        for selector in ("*", task, method, f"{task} {method}"):
            chosen |= dict(by_selector.get(selector, ()))
        return chosen

    def derive(self, **changes) -> "Recipe":
        """A recipe based on this one: each change is ``field=(value, reason)``; calibration
        fields are spelled ``calibration_FIELD``."""
        values, calibration, reasons = {}, {}, dict(self.changes)
        for name, (value, reason) in changes.items():
            if name.startswith("calibration_"):
                calibration[name.removeprefix("calibration_")] = value
                reasons[f"calibration.{name.removeprefix('calibration_')}"] = reason
            else:
                values[name] = value
                reasons[name] = reason
        return replace(
            self,
            **values,
            calibration=replace(self.calibration, **calibration),
            changes=tuple(reasons.items()),
        )

    def reasons(self) -> list[tuple[str, object, str]]:
        """``(field, value, reason)`` for every value, calibration's as ``calibration.FIELD``."""
        rows = []
        for f in fields(self):
            if f.name == "calibration":
                rows += [
                    (f"calibration.{c.name}", getattr(self.calibration, c.name), c.metadata["why"])
                    for c in fields(Calibration)
                ]
                on = self.calibration.rule_names()
                rows += [
                    (f"calibration rule {name}", "on" if name in on else "off", reason)
                    for name, reason in RULES.items()
                ]
            elif f.name == "step_caps":
                rows += [(f"step cap {sel}", steps, why) for sel, steps, why in self.step_caps]
            elif f.name != "changes":
                rows.append((f.name, getattr(self, f.name), f.metadata["why"]))
        changed = dict(self.changes)
        return [(name, value, changed.get(name, reason)) for name, value, reason in rows]


_PAPER = Recipe()  # a run's defaults are the paper recipe's


def setting(default, role: str, help: str = ""):
    """A run configuration field, where its value comes from: ``cell`` (the task, method and
    seed), ``run`` (the recipe, overridable for the cell's own run) or ``shared`` (the recipe,
    overridable, and ABC's source takes it too); and, if overridable, its command-line help."""
    return field(default=default, metadata={"role": role, "help": help})


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run depends on; a checkpoint carries it. Defaults are the ``paper``
    recipe's."""

    task: str = setting("successor", "cell", " | ".join(TASKS))
    arch: str = setting(
        _PAPER.arch,
        "shared",
        "encoder-decoder (the paper's) | decoder (GPT).",
    )
    scheme: str = setting("vanilla", "cell")  # the positional scheme: --method names it
    period: int = setting(0, "cell", "CPI period T (0: off).")
    cpi_from: str = setting(
        "start",
        "run",
        "CPI counts positions from: start | end.",
    )
    window: int | None = setting(None, "cell", "ABS window w.")
    window_unit: str = setting(
        "column",
        "run",
        "ABS window counts: column | pair.",
    )
    bias_file: str | None = setting(None, "run", "Train with a bias file (abcmini calibrate).")
    preset: str = setting(_PAPER.preset, "shared", "Model size: paper | cpu | tiny.")
    layers: int | None = setting(
        None,
        "shared",
        "Decoder layers [default: the preset's].",
    )
    heads: int | None = setting(None, "shared", "Attention heads [default: the preset's].")
    d_model: int | None = setting(None, "shared", "Model width [default: the preset's].")
    max_position: int | None = setting(
        None,
        "shared",
        "Position ids of random, abacus, coupling.",
    )
    coupling_levels: int = setting(1, "run", "Coupling's levels (multiadd 2, multiply 3).")
    norm: str = setting("layer", "shared", "Normalization: layer | rms.")
    norm_position: str = setting("pre", "shared", "Norms: pre (each sublayer) | pre_post.")
    ff: str = setting("gelu", "shared", "Feed-forward: gelu | gated-gelu.")
    enc_layers: int | None = setting(None, "run", "Encoder depth (0: no encoder).")
    pe_scale: float = setting(1.0, "run", "Amplitude of the sinusoidal encoding.")
    pad_width: int | None = setting(
        _PAPER.pad_width, "shared", "Frame: operands padded to this many digits."
    )
    frame_spread: int = setting(0, "run", "Batches in frames of pad width + 0 … this.")
    operand_lengths: str = setting(
        "equal",
        "run",
        "+varied operands: equal | unequal lengths.",
    )
    min_operands: int = setting(2, "run", "multiadd: fewest operands a training input adds.")
    top_share: float = setting(0.0, "run", "Share of a batch with top-heavy digits (f…9).")
    index_hints: int = setting(0, "shared", "Index hint symbols (Zhou et al.; 0: none).")
    batch_lengths: str = setting("one", "shared", "+varied batches: one | mixed lengths.")
    fire_positions: str = setting(
        "index", "shared", "FIRE reads: index | randomized (Zhou et al.)."
    )
    operand_order: str = setting(
        "msd",
        "shared",
        "Operands: msd (most significant first) | reversed.",
    )
    varied: bool = setting(
        False, "cell"
    )  # each batch one length of 1…train_digits in a frame of that length; tests in a frame of theirs
    seed: int = setting(0, "cell", "Seed of initialisation and batches.")
    data_seed: int = setting(0, "shared", "Seed of the pool and its validation split.")
    # 7: the paper's pool of [0, 2^20] (train_numbers pool); past it numbers of uniformly random length, digit by digit
    train_digits: int = setting(POOL_DIGITS, "shared", "Longest training number.")
    # the pool's 7-digit numbers are 1,000,000-1,048,576: their top two digits never vary
    train_numbers: str = setting(
        "pool",
        "shared",
        "pool (the paper's, 7 digits) | uniform.",
    )
    steps: int = setting(_PAPER.steps, "run", "Step cap.")
    batch_size: int = setting(_PAPER.batch_size, "shared", "Examples per optimizer step.")
    lr: float = setting(_PAPER.lr, "shared", "Peak learning rate (warmup, cosine decay).")
    warmup: int = setting(_PAPER.warmup, "shared", "Warmup steps.")
    stop_at: float | None = setting(None, "run", "Stop once validation reaches this.")
    train_on: float = setting(1.0, "run", "…then train on to this multiple of it.")
    min_steps: int = setting(0, "run", "…and to at least this step (a floor).")
    eval_every: int = setting(_PAPER.eval_every, "shared", "Validate and checkpoint every N steps.")
    valid_size: int = setting(_PAPER.valid_size, "shared", "Validation examples.")

    def __post_init__(self):
        check_task(self.task)
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.window is not None and self.bias_file is not None:
            raise ConfigError("--bias (ABC) and --window (ABS) are alternatives; pass one")
        for f in fields(
            self
        ):  # every integer against its bounds (names.BOUNDS), as the command line checks it
            check_int(getattr(self, f.name), f.name)
        checks = [
            ("lr", math.isfinite(self.lr) and self.lr > 0, "a positive number"),
            ("pe-scale", math.isfinite(self.pe_scale) and self.pe_scale >= 0, "a number ≥ 0"),
            ("top-share", 0 <= self.top_share <= 1, "in [0, 1]"),
            ("stop-at", self.stop_at is None or 0 <= self.stop_at <= 1, "in [0, 1]"),
            (
                "train-on",
                math.isfinite(self.train_on) and self.train_on >= 1,
                "at least 1 (a multiple of the step that reached --stop-at)",
            ),
        ]
        for option, ok, rule in checks:
            if not ok:
                raise ConfigError(
                    f"--{option} must be {rule}, got {getattr(self, option.replace('-', '_'))}"
                )
        check_window_unit(self.window_unit)
        if self.window_unit == "pair" and not self.aligned:
            raise ConfigError(
                "--window-unit pair counts the window in operand pairs; it needs a window on Addition or N×1"
            )
        if (
            self.window_unit == "pair"
            and self.period
            and (self.cpi_from != "end" or self.arch != "encoder-decoder")
        ):
            raise ConfigError(
                "CPI in operand pairs (--window-unit pair with +T) counts from the input's end (--cpi-from end) in the encoder-decoder"
            )
        if self.cpi_from not in ("start", "end"):
            raise ConfigError(f"--cpi-from is start or end, not {self.cpi_from!r}")
        if self.cpi_from == "end" and not self.period:
            raise ConfigError(
                "--cpi-from end counts CPI positions from the input's end; it needs a period "
                "(+T=3 in --method, or --period)"
            )
        check_arch(self.arch)
        if self.arch == "decoder" and self.enc_layers:
            raise ConfigError(
                "a decoder-only model (--arch decoder) has no encoder; drop --enc-layers"
            )
        if self.varied and (self.frame_spread or self.bias_file is not None):
            raise ConfigError(
                "+varied trains every batch in a frame of its numbers' length; it takes no --frame-spread and no ABC bias"
            )
        if self.operand_lengths not in ("equal", "unequal"):
            raise ConfigError(
                f"--operand-lengths is equal or unequal, not {self.operand_lengths!r}"
            )
        for name, allowed in BLOCK_CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"--{name.replace('_', '-')} is {' or '.join(allowed)}, not {getattr(self, name)!r}"
                )
        if self.min_operands != 2 and not (self.task == "multiadd" and 1 <= self.min_operands <= 5):
            raise ConfigError(
                f"--min-operands is multiadd's (1 to 5 operands), not {self.min_operands} on {self.task}"
            )
        if self.operand_order not in ("msd", "reversed"):
            raise ConfigError(f"--operand-order is msd or reversed, not {self.operand_order!r}")
        if self.operand_order == "reversed" and self.window is not None:
            raise ConfigError(
                "an ABS window (--window, +w=W) is laid out for operands written most significant "
                "digit first; --operand-order reversed takes a method without one"
            )
        if self.operand_order == "reversed" and self.period and self.cpi_from == "end":
            raise ConfigError(
                "--cpi-from end counts CPI from the least significant digit, which reversed "
                "operands write first: pass --cpi-from start"
            )
        if self.train_numbers not in ("pool", "uniform"):
            raise ConfigError(f"--train-numbers is pool or uniform, not {self.train_numbers!r}")
        self._check_formats()
        if self.operand_lengths == "unequal" and not (
            self.varied and self.task in UNEQUAL_TASKS and not self.from_pool
        ):
            raise ConfigError(
                "--operand-lengths unequal draws +varied numbers of every length up to --train-digits for "
                f"{', '.join(UNEQUAL_TASKS)} "
                f"(not from the pool: --train-numbers uniform or --train-digits other than {POOL_DIGITS}); it needs all three"
            )
        if self.frame_spread and self.pad_width is None:
            raise ConfigError("--frame-spread widens a fixed frame; the growing geometry has none")
        randomized = self.fire_positions == "randomized"
        if self.max_position is not None and not (
            self.scheme in ("random", "abacus", "coupling") or randomized
        ):
            raise ConfigError(
                "--max-position sizes the positions of random, abacus, coupling and randomized "
                f"FIRE; {self.scheme} has none"
            )
        if self.coupling_levels != 1 and (
            self.scheme != "coupling"
            or (self.coupling_levels, self.task) not in ((2, "multiadd"), (3, "multiply"))
        ):
            raise ConfigError(
                "--coupling-levels is 1, or with coupling 2 on multiadd and 3 on multiply; "
                f"not {self.coupling_levels} with {self.scheme} on {self.task}"
            )
        if self.pad_width is not None and self.pad_width < self.train_digits:
            raise ConfigError(
                f"pad width must be at least {self.train_digits} (the training numbers have up to {self.train_digits} digits)"
            )
        if self.min_steps > self.steps:
            raise ConfigError(
                f"--min-steps ({self.min_steps}) is a floor under the step cap; it cannot exceed --steps ({self.steps})"
            )
        model = self.model_config()  # validates the positional scheme
        if model.d_model % model.heads:
            raise ConfigError(
                f"the model's width ({model.d_model}) must be a multiple of its heads ({model.heads}); set --d-model or --heads"
            )

    def _check_formats(self) -> None:
        """Mixed lengths, index hints and FIRE over randomized positions (Zhou et al.): hints take a
        method without a scaffold (ABS windows and ABC lines sit at token offsets in a layout of
        digit runs, which hints break up; Abacus's and Coupling's ids count digits through
        them); randomized FIRE, the decoder-only model."""
        if self.batch_lengths not in ("one", "mixed"):
            raise ConfigError(f"--batch-lengths is one or mixed, not {self.batch_lengths!r}")
        if self.batch_lengths == "mixed" and not (
            self.varied
            and self.arch == "decoder"
            and self.scheme not in ("rope", "relative")
            and self.window is None
            and not self.bias_file
            and not self.period
        ):
            raise ConfigError(
                "--batch-lengths mixed pads +varied prompts of many lengths in one batch of the "
                "decoder-only model (--arch decoder), for a method without a scaffold, a period, "
                "RoPE or the relative PE"
            )
        if self.fire_positions not in ("index", "randomized"):
            raise ConfigError(
                f"--fire-positions is index or randomized, not {self.fire_positions!r}"
            )
        if self.fire_positions == "randomized" and (self.scheme, self.arch) != ("fire", "decoder"):
            raise ConfigError("--fire-positions randomized is FIRE's in the decoder-only model")
        if not self.index_hints:
            return
        if self.task not in HINT_TASKS:
            raise ConfigError(f"--index-hints writes {', '.join(HINT_TASKS)}, not {self.task}")
        if self.window is not None or self.bias_file:
            raise ConfigError(
                "--index-hints put a token between digits, where ABS windows and ABC lines sit "
                "at token offsets of digit runs; use a method without a scaffold"
            )

    @property
    def shape(self) -> str | None:
        """The model's size and block where options changed the preset's (``1 layer, 4 heads, d
        128, RMSNorm``); None otherwise."""
        parts = [
            (self.layers, "layer"),
            (self.heads, "head"),
            (self.d_model, "d"),
            (self.max_position, "position"),
            (self.coupling_levels if self.coupling_levels > 1 else None, "coupling level"),
        ]
        words = [
            f"d {n}" if unit == "d" else f"{n} {unit}{'s' * (n != 1)}"
            for n, unit in parts
            if n is not None
        ]
        words += [
            word
            for word, on in (
                ("RMSNorm", self.norm == "rms"),
                ("norms before and after", self.norm_position == "pre_post"),
                ("gated GELU", self.ff == "gated-gelu"),
            )
            if on
        ]
        return ", ".join(words) or None

    @property
    def from_pool(self) -> bool:
        """Training numbers come from the paper's pool (only it has them at 7 digits), else drawn digit by digit."""
        return self.train_digits == POOL_DIGITS and self.train_numbers == "pool"

    @property
    def train_pad_width(self) -> int:
        return self.pad_width if self.pad_width is not None else self.train_digits

    @property
    def aligned(self) -> bool:
        """ABS input alignment: binary tasks with a window see interleaved operands."""
        return self.window is not None and is_binary(self.task)

    @property
    def form(self) -> "Form":
        return Form(self.aligned, self.operand_order == "reversed", self.index_hints)

    @property
    def label(self) -> str:
        return self.method.label

    @property
    def method(self) -> Method:
        """The run's method (``names.Method``), its ABC bias included."""
        return Method(
            self.scheme, self.window, self.period, self.varied, self.bias_file is not None
        )

    def model_config(self) -> ModelConfig:
        """The preset's model; a decoder-only one has two causal layers per decoder layer, as many
        attention sublayers as the encoder-decoder's decoder (docs/decoder-only.md)."""
        decoder_only = {
            "enc_layers": 0,
            "dec_layers": self.layers or 2 * PRESETS[self.preset]["dec_layers"],
        }
        depth = (
            decoder_only
            if self.arch == "decoder"
            else {}
            if self.enc_layers is None
            else {"enc_layers": self.enc_layers}
        )
        shape = {
            "heads": self.heads,
            "d_model": self.d_model,
            "d_ff": self.d_model and 4 * self.d_model,
            "max_position": self.max_position,
            "coupling_levels": self.coupling_levels,
            "dec_layers": self.layers if self.arch != "decoder" else None,
        }
        return ModelConfig(
            **{
                **PRESETS[self.preset],
                **{k: v for k, v in shape.items() if v is not None},
                **depth,
                "arch": self.arch,
                "scheme": self.scheme,
                "period": self.period,
                "pe_scale": self.pe_scale,
                "cpi_from": self.cpi_from,
                "cpi_unit": "pair" if self.window_unit == "pair" and self.period else "token",
                "lsd_input": self.operand_order == "reversed",
                "norm": self.norm,
                "norm_position": self.norm_position,
                "ff": self.ff,
                "vocab_size": ModelConfig.vocab_size + self.index_hints,
                "fire_positions": self.fire_positions,
            }
        )

    def to_dict(self) -> dict:
        return asdict(self)


def from_fields(cls, data: dict, what: str):
    """``cls(**data)``, or one line saying ``data`` is not a ``what`` of this version."""
    unknown = sorted(str(k) for k in set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise ConfigError(
            f"{what} has unknown field {unknown[0]!r}; it comes from another version or program"
        )
    try:
        return cls(**data)
    except (
        TypeError,
        ValueError,
        KeyError,
    ) as error:  # a missing field, or a value of the wrong kind
        raise ConfigError(
            f"{what} does not hold this version's fields ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        ) from None


RUN_FIELDS = tuple(
    f.name for f in fields(RunConfig) if f.metadata["role"] != "cell"
)  # a recipe's, overridable
SHARED_FIELDS = tuple(
    f.name for f in fields(RunConfig) if f.metadata["role"] == "shared"
)  # ABC's source and retraining
CALIBRATION_FIELDS = tuple(f.name for f in fields(Calibration))
EXPERIMENT_FIELDS = {  # a cell's fields beyond its run and calibration: (type, help)
    "abc_pad_width": (
        int,
        "ABC: frame of its source and retraining.",
    ),
    "lengths": (tuple, "Test lengths in digits, comma-separated."),
    "test_frame": (
        str,
        "Test frame: fixed | follows (grows).",
    ),
    "test_seed": (int, "Seed of the test numbers."),
}
OVERRIDABLE = (
    RUN_FIELDS + CALIBRATION_FIELDS + tuple(EXPERIMENT_FIELDS)
)  # each one an option of ``abcmini train``


def option_name(field: str) -> str:
    """The ``abcmini train`` parameter that overrides ``field`` (``--bias FILE``, ``--calibration-seed``)."""
    return {"bias_file": "bias", "seed": "calibration_seed", "algorithm": "calibration"}.get(
        field, field
    )


def _help(name: str) -> str:
    return next(f.metadata["help"] for f in fields(RunConfig) if f.name == name)


def _kind(annotation) -> type:
    """A field's type as one command-line value: ``int | None`` is ``int``, a list is a comma-separated ``str``."""
    kind = {"int | None": int, "float | None": float, "str | None": str}.get(
        str(annotation), annotation
    )
    return str if kind is tuple else kind


METHOD_HELP = (
    " | ".join((*SCHEMES, "abc"))
    + "; ABS: +w=W, +T=T (nope+w=1); +varied: lengths 1–7 (abacus+varied)."
)
CELL_OPTIONS = {  # a cell's identity: ``abcmini train``'s options beside OPTIONS, option → (default, help)
    "task": (RunConfig.task, _help("task")),
    "method": (
        "vanilla",
        METHOD_HELP,
    ),  # scheme, window, period and varied in one name (names.Method)
    "seed": (RunConfig.seed, _help("seed")),
    "window": (None, _help("window")),  # None: as the method says
    "period": (None, _help("period")),
}

OPTIONS = {  # field → (command-line option name, type, help): ``abcmini train`` has one option per entry
    **{
        f.name: (option_name(f.name), _kind(f.type), f.metadata["help"])
        for f in fields(RunConfig)
        if f.metadata["role"] != "cell"
    },
    **{
        f.name: (option_name(f.name), _kind(f.type), f.metadata["help"])
        for f in fields(Calibration)
    },
    **{name: (name, _kind(kind), help) for name, (kind, help) in EXPERIMENT_FIELDS.items()},
}
