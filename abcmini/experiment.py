"""One experiment definition: a cell (task, method, seed) under a recipe (``abcmini.recipes``)
resolves to one configuration. ``train``, ``calibrate``, ``eval``, ``reproduce`` and the sweeps
all go through ``resolve``, so a cell is the same run however it is started.
"""

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace

from abcmini.nn.model import ARCHS, PRESETS, ModelConfig
from abcmini.names import ConfigError, canonical_method, method_label, parse_method
from abcmini.nn.positions import IN_ATTENTION, TODAYS_SCHEMES
from abcmini.recipes import PAPER, Calibration, Recipe, check_test_frame, check_window_unit
from abcmini.tasks import POOL_DIGITS, check_task, is_binary

MAIN_TASKS = ("successor", "addition", "nx1")
ABS_TASKS = ("successor", "addition", "nx1", "parity")
MAIN_METHODS = ("vanilla", "alibi", "rope", "abc")
ABS_METHODS = ("vanilla", "+w=1", "+T=3", "NoPE+w=1")


# ---------------------------------------------------------------- one run's configuration


def setting(default, role: str):
    """A run configuration field and where its value comes from: ``cell`` (the task, method and
    seed), ``run`` (the recipe, overridable for the cell's own run) or ``shared`` (the recipe,
    overridable, and ABC's source takes it too)."""
    return field(default=default, metadata={"role": role})


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run depends on; a checkpoint carries it. Defaults are the ``paper``
    recipe's."""

    task: str = setting("successor", "cell")
    arch: str = setting(PAPER.arch, "shared")  # the paper's encoder-decoder, or a GPT-style "decoder" (abcmini.nn.decoder)
    scheme: str = setting("vanilla", "cell")
    period: int = setting(0, "cell")  # CPI period T (0: off)
    cpi_from: str = setting("start", "run")  # CPI positions of the input counted from its first token or its "end"
    window: int | None = setting(None, "cell")  # ABS window w (None: no window)
    window_unit: str = setting("column", "run")  # on an aligned binary input, w (and CPI) count columns or operand pairs (biases.window_cross_bias)
    bias_file: str | None = setting(None, "run")  # ABC bias, relative to the run directory (or absolute)
    preset: str = setting(PAPER.preset, "shared")
    enc_layers: int | None = setting(None, "run")  # None: the preset's
    pe_scale: float = setting(1.0, "run")  # amplitude of the sinusoidal encoding
    pad_width: int | None = setting(PAPER.pad_width, "shared")  # fixed frame; None: growing geometry (pad width follows the length)
    frame_spread: int = setting(0, "run")  # each training batch in a frame of pad_width … pad_width + frame_spread digits (validation: pad_width)
    varied: bool = setting(False, "cell")  # each training batch one length of 1…7 digits in a frame of that length; tests in a frame of theirs
    seed: int = setting(0, "cell")
    data_seed: int = setting(0, "shared")
    steps: int = setting(PAPER.steps, "run")
    batch_size: int = setting(PAPER.batch_size, "shared")
    lr: float = setting(PAPER.lr, "shared")
    warmup: int = setting(PAPER.warmup, "shared")
    stop_at: float | None = setting(None, "run")  # stop once validation exact match reaches this …
    train_on: float = setting(1.0, "run")  # … or, reached first at step s, at the first evaluation from step train_on·s on
    eval_every: int = setting(PAPER.eval_every, "shared")
    valid_size: int = setting(PAPER.valid_size, "shared")

    def __post_init__(self):
        check_task(self.task)
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.window is not None and self.bias_file is not None:
            raise ConfigError("--bias (ABC) and --window (ABS) are alternatives; pass one")
        checks = [("window", self.window is None or self.window >= 0, "at least 0"), ("period", self.period >= 0, "at least 0 (0 turns CPI off)"),
                  ("steps", self.steps >= 1, "at least 1"), ("frame-spread", self.frame_spread >= 0, "at least 0"), ("batch-size", self.batch_size >= 1, "at least 1"),
                  ("eval-every", self.eval_every >= 1, "at least 1"), ("valid-size", self.valid_size >= 1, "at least 1"),
                  ("warmup", self.warmup >= 0, "at least 0"), ("enc-layers", self.enc_layers is None or self.enc_layers >= 0, "at least 0"),
                  ("lr", math.isfinite(self.lr) and self.lr > 0, "a positive number"),
                  ("pe-scale", math.isfinite(self.pe_scale) and self.pe_scale >= 0, "a number ≥ 0"),
                  ("stop-at", self.stop_at is None or 0 <= self.stop_at <= 1, "in [0, 1]"),
                  ("train-on", math.isfinite(self.train_on) and self.train_on >= 1, "at least 1 (a multiple of the step that reached --stop-at)")]
        for option, ok, rule in checks:
            if not ok:
                raise ConfigError(f"--{option} must be {rule}, got {getattr(self, option.replace('-', '_'))}")
        check_window_unit(self.window_unit)
        if self.window_unit == "pair" and not self.aligned:
            raise ConfigError("--window-unit pair counts the window in operand pairs; it needs a window on Addition or N×1")
        if self.window_unit == "pair" and self.period and (self.cpi_from != "end" or self.arch != "encoder-decoder"):
            raise ConfigError("CPI in operand pairs (--window-unit pair with +T) counts from the input's end (--cpi-from end) in the encoder-decoder")
        if self.cpi_from not in ("start", "end"):
            raise ConfigError(f"--cpi-from is start or end, not {self.cpi_from!r}")
        if self.arch not in ARCHS:
            raise ConfigError(f"--arch is one of {', '.join(ARCHS)}, not {self.arch!r}")
        if self.arch == "decoder" and self.enc_layers:
            raise ConfigError("a decoder-only model (--arch decoder) has no encoder; drop --enc-layers")
        if self.varied and (self.frame_spread or self.bias_file is not None):
            raise ConfigError("+varied trains every batch in a frame of its numbers' length; it takes no --frame-spread and no ABC bias")
        if self.frame_spread and self.pad_width is None:
            raise ConfigError("--frame-spread widens a fixed frame; the growing geometry has none")
        if self.pad_width is not None and self.pad_width < POOL_DIGITS:
            raise ConfigError(f"pad width must be at least {POOL_DIGITS} (the training numbers have up to {POOL_DIGITS} digits)")
        self.model_config()  # validates the positional scheme

    @property
    def train_pad_width(self) -> int:
        return self.pad_width if self.pad_width is not None else POOL_DIGITS

    @property
    def aligned(self) -> bool:
        """ABS input alignment: binary tasks with a window see interleaved operands."""
        return self.window is not None and is_binary(self.task)

    @property
    def label(self) -> str:
        return method_label(self.scheme, self.window, self.period, self.varied, biased=self.bias_file is not None)

    def model_config(self) -> ModelConfig:
        """The preset's model; a decoder-only one has two causal layers per decoder layer, as many
        attention sublayers as the encoder-decoder's decoder (docs/decoder-only.md)."""
        decoder_only = {"enc_layers": 0, "dec_layers": 2 * PRESETS[self.preset]["dec_layers"]}
        depth = decoder_only if self.arch == "decoder" else {} if self.enc_layers is None else {"enc_layers": self.enc_layers}
        return ModelConfig(**{**PRESETS[self.preset], **depth, "arch": self.arch, "scheme": self.scheme, "period": self.period, "pe_scale": self.pe_scale,
                              "cpi_from": self.cpi_from, "cpi_unit": "pair" if self.window_unit == "pair" and self.period else "token"})

    def to_dict(self) -> dict:
        return asdict(self)


def from_fields(cls, data: dict, what: str):
    """``cls(**data)``, or one line saying ``data`` is not a ``what`` of this version."""
    unknown = sorted(str(k) for k in set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise ConfigError(f"{what} has unknown field {unknown[0]!r}; it comes from another version or program")
    try:
        return cls(**data)
    except (TypeError, ValueError, KeyError) as error:  # a missing field, or a value of the wrong kind
        raise ConfigError(f"{what} does not hold this version's fields ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None


def run_config_of(state: dict) -> RunConfig:
    """The run configuration a checkpoint carries, or one line saying it is not one of this version's."""
    return from_fields(RunConfig, state["config"], "checkpoint config")


def learning_rate(cfg: RunConfig, step: int, reached: int | None = None) -> float:
    """Linear warmup, then cosine decay to 10% of the peak at ``steps``. Once validation reached
    ``stop_at`` at step ``reached``, the train-on phase anneals from there to zero at
    ``train_on·reached``: the rare errors left at interpolation are trained out at a small step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if reached is None or step < reached:
        return cfg.lr * (0.1 + 0.9 * half_cosine((step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)))
    return learning_rate(cfg, reached - 1) * half_cosine((step - reached + 1) / max(1, (cfg.train_on - 1) * reached))


def half_cosine(progress: float) -> float:
    """1 at progress 0, falling as a half cosine to 0 at progress 1 and after."""
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


# ---------------------------------------------------------------- cells and their resolution

ABC_BIAS = "abc_bias.pt"  # an ABC run's bias file, inside its run directory
RUN_FIELDS = tuple(f.name for f in fields(RunConfig) if f.metadata["role"] != "cell")  # a recipe's, overridable
SHARED_FIELDS = tuple(f.name for f in fields(RunConfig) if f.metadata["role"] == "shared")  # ABC's source and retraining
CALIBRATION_FIELDS = tuple(f.name for f in fields(Calibration))
TEST_FIELDS = ("lengths", "test_seed", "test_frame")
OVERRIDABLE = RUN_FIELDS + ("abc_pad_width",) + CALIBRATION_FIELDS + TEST_FIELDS  # each one an option of ``abcmini train``


def option_name(field: str) -> str:
    """The ``abcmini train`` parameter that overrides ``field`` (``--bias FILE``, ``--calibration-seed``)."""
    return {"bias_file": "bias", "seed": "calibration_seed"}.get(field, field)


@dataclass(frozen=True)
class Cell:
    """One cell of a table: a task, a method (``canonical_method``) and a seed."""

    task: str
    method: str
    seed: int

    def __post_init__(self):
        check_task(self.task)
        if self.method != canonical_method(self.method):
            raise ConfigError(f"method {self.method!r} is spelled {canonical_method(self.method)!r} in a cell")

    @classmethod
    def of(cls, task: str, method: str, seed: int, window: int | None = None, period: int | None = None) -> "Cell":
        return cls(task, canonical_method(method, window, period), seed)


@dataclass(frozen=True)
class Experiment:
    """A resolved cell: the run it trains, ABC's source and calibration, and its test."""

    recipe: str
    cell: Cell
    run: RunConfig
    source: RunConfig | None  # ABC: the Vanilla run calibrated from
    calibration: Calibration | None  # ABC only
    lengths: tuple
    test_seed: int
    overrides: tuple = ()  # ((field, value), …) given on top of the recipe, sorted
    test_frame: str = "fixed"  # fixed: every length in the protocol's frame; follows: in a frame that grows with the length
    test_pad_width: int | None = 64  # the protocol's frame (None: growing geometry); ABC may train in another one

    @property
    def name(self) -> str:
        """The run directory's name: ``vanilla+w=1-s0``, ``abc-s2``, plus its overrides."""
        name = f"{self.cell.method}-s{self.cell.seed}"
        if self.overrides:
            name += "-" + ",".join(f"{key}={_slug(value)}" for key, value in self.overrides)
        return re.sub(r"[^A-Za-z0-9.,=+_-]", "_", name)

    @property
    def identity(self) -> str:
        """What groups this cell's runs (wandb ``group``): recipe, task and run name."""
        return f"{self.recipe}/{self.cell.task}/{self.name}"

    @property
    def command(self) -> str:
        """The ``abcmini train`` command that runs this cell (a recipe file by its name)."""
        options = ["--growing" if key == "pad_width" and value is None else f"--{option_name(key).replace('_', '-')}={_slug(value)}"
                   for key, value in self.overrides]
        return " ".join(["abcmini train --recipe", self.recipe, "--task", self.cell.task, "--method", self.cell.method,
                         "--seed", str(self.cell.seed), *options])

    def source_experiment(self) -> "Experiment":
        """ABC's source as a cell of its own (Vanilla, the same seed and shared overrides)."""
        shared = {key: value for key, value in self.overrides if key in SHARED_FIELDS and key != "pad_width"}
        if self.source.pad_width != self.test_pad_width:  # trained in ABC's frame, not the protocol's: another cell
            shared["pad_width"] = self.source.pad_width
        return Experiment(self.recipe, Cell(self.cell.task, "vanilla", self.cell.seed), run=self.source, source=None,
                          calibration=None, lengths=self.lengths, test_seed=self.test_seed, overrides=tuple(sorted(shared.items())),
                          test_frame=self.test_frame, test_pad_width=self.source.pad_width)

    def to_dict(self) -> dict:
        """As JSON holds it (tuples as lists): what ``experiment.json`` and ``--dry-run`` show."""
        return json.loads(json.dumps(self._fields()))

    @classmethod
    def from_dict(cls, data: dict) -> "Experiment":
        """The experiment an ``experiment.json`` holds (``to_dict``'s inverse), or one line saying it is not one."""
        what = "experiment record"
        try:
            run = from_fields(RunConfig, data["run"], f"{what}'s run")
            return cls(data["recipe"], from_fields(Cell, data["cell"], f"{what}'s cell"), run,
                       data["source"] and from_fields(RunConfig, data["source"], f"{what}'s source"),
                       data["calibration"] and from_fields(Calibration, data["calibration"], f"{what}'s calibration"),
                       tuple(data["lengths"]), data["test_seed"], tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in data["overrides"].items())),
                       data.get("test_frame", "fixed"), data.get("test_pad_width", run.pad_width))
        except (KeyError, TypeError, AttributeError) as error:
            raise ConfigError(f"{what} does not hold this version's fields ({type(error).__name__}: {error})") from None

    def _fields(self) -> dict:
        return {"recipe": self.recipe, "identity": self.identity, "cell": asdict(self.cell), "run": self.run.to_dict(),
                "source": self.source.to_dict() if self.source else None,
                "calibration": asdict(self.calibration) if self.calibration else None,
                "lengths": list(self.lengths), "test_seed": self.test_seed, "test_frame": self.test_frame,
                "test_pad_width": self.test_pad_width, "overrides": dict(self.overrides), "command": self.command}


def _slug(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def _run_config(recipe: Recipe, task: str, method: str, seed: int, abc: bool = False) -> RunConfig:
    """The run of a cell, or with ``abc`` of ABC's source or retraining: those train in ABC's own
    frame and validation set, the same in every recipe, so one training serves every protocol."""
    scheme, window, period, varied = parse_method(method)
    scaffolded = method == "abc" or window is not None
    generalizing = window is not None or scheme in TODAYS_SCHEMES  # ABS and today's methods: one budget rule
    steps = recipe.steps_alibi if scheme == "alibi" else recipe.steps
    if task == "addition" and method in ("vanilla", "rope"):
        steps = recipe.steps_addition_plain
    if task in ("parity", "parity_class") and not scaffolded:
        steps = recipe.steps_parity_plain
    if task == "nx1" and generalizing and recipe.steps_nx1_window is not None:  # N×1 under the ABS rule: ABS's cap
        steps = recipe.steps_nx1_window
    if task == "nx1" and method == "abc":
        steps = recipe.steps_nx1_abc
    return RunConfig(
        task=task, arch=recipe.arch, scheme=scheme, period=period, varied=varied, cpi_from=recipe.cpi_from if period else "start", window=window,
        window_unit=recipe.window_unit if window is not None and is_binary(task) else "column", bias_file=ABC_BIAS if method == "abc" else None, preset=recipe.preset,
        enc_layers=0 if recipe.arch == "decoder" else recipe.enc_layers_in_attention if scheme in IN_ATTENTION else recipe.enc_layers,
        pe_scale=recipe.scaffold_pe_scale if scaffolded and scheme == "vanilla" and period == 0 else 1.0,
        pad_width=recipe.abc_pad_width if abc else recipe.pad_width, frame_spread=recipe.abc_frame_spread if abc and method == "abc" else 0, seed=seed, steps=steps, batch_size=recipe.batch_size, lr=recipe.lr,
        warmup=recipe.warmup, stop_at=recipe.stop_at if scaffolded or generalizing else recipe.stop_at_plain,
        train_on=recipe.train_on if generalizing else recipe.abc_train_on if method == "abc" else 1.0, eval_every=recipe.eval_every,
        valid_size=recipe.abc_valid_size if abc else recipe.valid_size)


def resolve(recipe: Recipe, cell: Cell, overrides: dict | None = None) -> Experiment:
    """The one configuration of ``cell`` under ``recipe``, with ``overrides`` (field → value,
    each given on the command line) on top. Shared fields (geometry, model, data, optimizer)
    apply to ABC's source too; the others to the cell's own run only."""
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ConfigError(f"{unknown[0]!r} is not a field a run can override; fields are {', '.join(OVERRIDABLE)}")
    overrides = {key: tuple(value) if isinstance(value, list) else value for key, value in overrides.items()}
    abc = cell.method == "abc"
    if not abc and any(key in CALIBRATION_FIELDS or key == "abc_pad_width" for key in overrides):
        raise ConfigError(f"{next(k for k in overrides if k in CALIBRATION_FIELDS or k == 'abc_pad_width')} is an ABC setting; it applies to --method abc only")
    if abc and "bias_file" in overrides:
        raise ConfigError("--method abc calibrates its own bias; drop --bias (or use --method vanilla --bias FILE)")
    frame = overrides.get("pad_width", recipe.pad_width)  # the protocol's frame
    train_width = overrides.get("abc_pad_width", recipe.abc_pad_width) if abc else frame
    base = _run_config(recipe, cell.task, cell.method, cell.seed, abc)
    base_values = {**base.to_dict(), "pad_width": recipe.pad_width, "abc_pad_width": recipe.abc_pad_width, **asdict(recipe.calibration),
                   "lengths": recipe.lengths, "test_seed": recipe.test_seed, "test_frame": recipe.test_frame}
    overrides = {key: value for key, value in overrides.items() if base_values.get(key, ...) != value}  # the recipe's own value is no override
    run_fields = {key: value for key, value in overrides.items() if key in RUN_FIELDS and key != "pad_width"}
    try:
        run = replace(base, **run_fields, pad_width=train_width)
        source = calibration = None
        if abc:
            source = replace(_run_config(recipe, cell.task, "vanilla", cell.seed, abc=True),
                             **{k: v for k, v in run_fields.items() if k in SHARED_FIELDS}, pad_width=train_width)
            calibration = replace(recipe.calibration, **{k: v for k, v in overrides.items() if k in CALIBRATION_FIELDS})
    except TypeError as error:  # a value of the wrong type in a recipe file or an override
        raise ConfigError(str(error)) from None
    lengths = tuple(overrides.get("lengths", recipe.lengths))
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ConfigError(f"lengths must be whole numbers of at least 1, got {list(lengths)}")
    test_frame = overrides.get("test_frame", recipe.test_frame)
    check_test_frame(test_frame)
    if test_frame == "fixed" and frame is not None and max(lengths) > frame:
        raise ConfigError(f"length {max(lengths)} does not fit the pad width {frame}; pass a wider --pad-width, "
                          "shorter --lengths or --test-frame follows")
    return Experiment(recipe.name, cell, run, source, calibration, lengths, overrides.get("test_seed", recipe.test_seed),
                      tuple(sorted(overrides.items())), test_frame, frame)


def cell_dir(root: str, experiment: Experiment) -> str:
    """Where a cell's run lives under a root: ``ROOT/TASK/NAME``."""
    return os.path.join(root, experiment.cell.task, experiment.name)
