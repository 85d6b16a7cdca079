"""One experiment definition: a cell (task, method, seed) under a recipe (``abcmini.recipes``)
resolves to one configuration. ``train``, ``calibrate``, ``eval``, ``reproduce`` and the sweeps
all go through ``resolve``, so a cell is the same run however it is started.
"""

import json
import math
import os
import re
from dataclasses import asdict, dataclass, replace

from abcmini.config import (
    CALIBRATION_FIELDS,
    OVERRIDABLE,
    RUN_FIELDS,
    SHARED_FIELDS,
    Calibration,
    Recipe,
    RunConfig,
    check_test_frame,
    from_fields,
    option_name,
)
from abcmini.names import ConfigError, canonical_method, check_task, is_binary, parse_method
from abcmini.nn.schemes import IN_ATTENTION, TODAYS_SCHEMES

MAIN_TASKS = ("successor", "addition", "nx1")
ABS_TASKS = ("successor", "addition", "nx1", "parity")
MAIN_METHODS = ("vanilla", "alibi", "rope", "abc")
ABS_METHODS = ("vanilla", "+w=1", "+T=3", "NoPE+w=1")


# ---------------------------------------------------------------- one run's configuration


def run_config_of(state: dict) -> RunConfig:
    """The run configuration a checkpoint carries, or one line saying it is not one of this version's."""
    return from_fields(RunConfig, state["config"], "checkpoint config")


def learning_rate(cfg: RunConfig, step: int, reached: int | None = None) -> float:
    """Linear warmup, then cosine decay to 10% of the peak at ``steps``. Once validation reached
    ``stop_at`` at step ``reached``, the train-on phase anneals from there to zero at its end
    (``train_on_end``): the rare errors left at interpolation are trained out at a small step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if reached is None or step < reached:
        return cfg.lr * (
            0.1 + 0.9 * half_cosine((step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
        )
    span = max((cfg.train_on - 1) * reached, cfg.min_steps - reached)
    return learning_rate(cfg, reached - 1) * half_cosine((step - reached + 1) / max(1, span))


def train_on_end(cfg: RunConfig, reached: int) -> float:
    """The step a run that reached ``stop_at`` at step ``reached`` trains to: ``train_on·reached``,
    at least ``min_steps`` (a budget floor), at most the cap."""
    return min(cfg.steps, max(cfg.train_on * reached, cfg.min_steps))


def half_cosine(progress: float) -> float:
    """1 at progress 0, falling as a half cosine to 0 at progress 1 and after."""
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


# ---------------------------------------------------------------- cells and their resolution

ABC_BIAS = "abc_bias.pt"  # an ABC run's bias file, inside its run directory


@dataclass(frozen=True)
class Cell:
    """One cell of a table: a task, a method (``canonical_method``) and a seed."""

    task: str
    method: str
    seed: int

    def __post_init__(self):
        check_task(self.task)
        if self.method != canonical_method(self.method):
            raise ConfigError(
                f"method {self.method!r} is spelled {canonical_method(self.method)!r} in a cell"
            )

    @classmethod
    def of(
        cls, task: str, method: str, seed: int, window: int | None = None, period: int | None = None
    ) -> "Cell":
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
    test_pad_width: int | None = (
        None  # the protocol's frame (None: growing); ABC may train in another
    )
    test_until: float = 0.0  # the tests stop after the first length below this

    def to_test(self, accuracy: dict) -> tuple:
        """The lengths still to test, given the ``accuracy`` a record holds: in order, none after
        one below ``test_until`` (a method that fails at 20 digits is not tested at 500)."""
        left = []
        for n in self.lengths:
            if str(n) in accuracy and accuracy[str(n)] < self.test_until:
                break
            if str(n) not in accuracy:
                left.append(n)
        return tuple(left)

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
        options = [
            "--growing"
            if key == "pad_width" and value is None
            else f"--{option_name(key).replace('_', '-')}={_slug(value)}"
            for key, value in self.overrides
        ]
        return " ".join(
            [
                "abcmini train --recipe",
                self.recipe,
                "--task",
                self.cell.task,
                "--method",
                self.cell.method,
                "--seed",
                str(self.cell.seed),
                *options,
            ]
        )

    def source_experiment(self) -> "Experiment":
        """ABC's source as a cell of its own (Vanilla, the same seed and shared overrides)."""
        shared = {
            key: value
            for key, value in self.overrides
            if key in SHARED_FIELDS and key != "pad_width"
        }
        if (
            self.source.pad_width != self.test_pad_width
        ):  # trained in ABC's frame, not the protocol's: another cell
            shared["pad_width"] = self.source.pad_width
        return Experiment(
            self.recipe,
            Cell(self.cell.task, "vanilla", self.cell.seed),
            run=self.source,
            source=None,
            calibration=None,
            lengths=self.lengths,
            test_seed=self.test_seed,
            overrides=tuple(sorted(shared.items())),
            test_frame=self.test_frame,
            test_pad_width=self.source.pad_width,
            test_until=self.test_until,
        )

    def to_dict(self) -> dict:
        """As JSON holds it (tuples as lists): what ``experiment.json`` and ``--dry-run`` show."""
        return json.loads(json.dumps(self._fields()))

    @classmethod
    def from_dict(cls, data: dict) -> "Experiment":
        """The experiment an ``experiment.json`` holds (``to_dict``'s inverse), or one line saying it is not one."""
        what = "experiment record"
        try:
            run = from_fields(RunConfig, data["run"], f"{what}'s run")
            return cls(
                data["recipe"],
                from_fields(Cell, data["cell"], f"{what}'s cell"),
                run,
                data["source"] and from_fields(RunConfig, data["source"], f"{what}'s source"),
                data["calibration"]
                and from_fields(Calibration, data["calibration"], f"{what}'s calibration"),
                tuple(data["lengths"]),
                data["test_seed"],
                tuple(
                    sorted(
                        (k, tuple(v) if isinstance(v, list) else v)
                        for k, v in data["overrides"].items()
                    )
                ),
                data.get("test_frame", "fixed"),
                data.get("test_pad_width", run.pad_width),
                data.get("test_until", 0.0),
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise ConfigError(
                f"{what} does not hold this version's fields ({type(error).__name__}: {error})"
            ) from None

    def _fields(self) -> dict:
        return {
            "recipe": self.recipe,
            "identity": self.identity,
            "cell": asdict(self.cell),
            "run": self.run.to_dict(),
            "source": self.source.to_dict() if self.source else None,
            "calibration": asdict(self.calibration) if self.calibration else None,
            "lengths": list(self.lengths),
            "test_seed": self.test_seed,
            "test_frame": self.test_frame,
            "test_pad_width": self.test_pad_width,
            "test_until": self.test_until,
            "overrides": dict(self.overrides),
            "command": self.command,
        }


def _slug(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def _run_config(recipe: Recipe, task: str, method: str, seed: int, abc: bool = False) -> RunConfig:
    """The run of a cell, or with ``abc`` of ABC's source or retraining: those train in ABC's own
    frame and validation set, the same in every recipe, so one training serves every protocol."""
    parts = parse_method(method)
    scheme, window, period, varied = parts.scheme, parts.window, parts.period, parts.varied
    scaffolded = method == "abc" or window is not None
    generalizing = (
        window is not None or scheme in TODAYS_SCHEMES
    )  # ABS and today's methods: one budget rule
    return RunConfig(
        task=task,
        arch=recipe.arch,
        scheme=scheme,
        period=period,
        varied=varied,
        cpi_from=recipe.cpi_from if period else "start",
        window=window,
        window_unit=recipe.window_unit if window is not None and is_binary(task) else "column",
        bias_file=ABC_BIAS if method == "abc" else None,
        preset=recipe.preset,
        enc_layers=0
        if recipe.arch == "decoder"
        else recipe.enc_layers_in_attention
        if scheme in IN_ATTENTION
        else recipe.enc_layers,
        pe_scale=recipe.scaffold_pe_scale
        if scaffolded and scheme == "vanilla" and period == 0
        else 1.0,
        pad_width=recipe.abc_pad_width if abc else recipe.pad_width,
        frame_spread=recipe.abc_frame_spread if abc and method == "abc" else 0,
        seed=seed,
        steps=recipe.cap(task, method),
        batch_size=recipe.batch_size,
        lr=recipe.lr,
        warmup=recipe.warmup,
        stop_at=recipe.stop_at if scaffolded or generalizing else recipe.stop_at_plain,
        train_on=recipe.train_on
        if generalizing
        else recipe.abc_train_on
        if method == "abc"
        else 1.0,
        eval_every=recipe.eval_every,
        valid_size=recipe.abc_valid_size if abc else recipe.valid_size,
    )


def resolve(recipe: Recipe, cell: Cell, overrides: dict | None = None) -> Experiment:
    """The one configuration of ``cell`` under ``recipe``, with ``overrides`` (field → value,
    each given on the command line) on top. Shared fields (geometry, model, data, optimizer)
    apply to ABC's source too; the others to the cell's own run only."""
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    unknown = sorted(set(given) - set(OVERRIDABLE))
    if unknown:
        raise ConfigError(
            f"{unknown[0]!r} is not a field a run can override; fields are {', '.join(OVERRIDABLE)}"
        )
    own = recipe.settings(cell.task, cell.method)  # the recipe's cells: values, not overrides
    overrides = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in {**own, **given}.items()
    }
    abc = cell.method == "abc"
    if not abc and any(key in CALIBRATION_FIELDS or key == "abc_pad_width" for key in overrides):
        raise ConfigError(
            f"{next(k for k in overrides if k in CALIBRATION_FIELDS or k == 'abc_pad_width')} is an ABC setting; it applies to --method abc only"
        )
    if abc and "bias_file" in overrides:
        raise ConfigError(
            "--method abc calibrates its own bias; drop --bias (or use --method vanilla --bias FILE)"
        )
    frame = overrides.get("pad_width", recipe.pad_width)  # the protocol's frame
    train_width = overrides.get("abc_pad_width", recipe.abc_pad_width) if abc else frame
    base = _run_config(recipe, cell.task, cell.method, cell.seed, abc)
    base_values = {
        **base.to_dict(),
        "pad_width": recipe.pad_width,
        "abc_pad_width": recipe.abc_pad_width,
        **asdict(recipe.calibration),
        "lengths": recipe.lengths,
        "test_seed": recipe.test_seed,
        "test_frame": recipe.test_frame,
        **own,
    }
    named = {
        key: value for key, value in overrides.items() if base_values.get(key, ...) != value
    }  # the recipe's own value is no override
    run_fields = {
        key: value for key, value in overrides.items() if key in RUN_FIELDS and key != "pad_width"
    }
    try:
        run = replace(base, **run_fields, pad_width=train_width)
        source = calibration = None
        if abc:
            source = replace(
                _run_config(recipe, cell.task, "vanilla", cell.seed, abc=True),
                **{k: v for k, v in run_fields.items() if k in SHARED_FIELDS},
                pad_width=train_width,
            )
            calibration = replace(
                recipe.calibration,
                **{k: v for k, v in overrides.items() if k in CALIBRATION_FIELDS},
            )
    except TypeError as error:  # a value of the wrong type in a recipe file or an override
        raise ConfigError(str(error)) from None
    lengths = tuple(overrides.get("lengths", recipe.lengths))
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ConfigError(f"lengths must be whole numbers of at least 1, got {list(lengths)}")
    test_frame = overrides.get("test_frame", recipe.test_frame)
    check_test_frame(test_frame)
    if test_frame == "fixed" and frame is not None and max(lengths) > frame:
        raise ConfigError(
            f"length {max(lengths)} does not fit the pad width {frame}; pass a wider --pad-width, "
            "shorter --lengths or --test-frame follows"
        )
    return Experiment(
        recipe.name,
        cell,
        run,
        source,
        calibration,
        lengths,
        overrides.get("test_seed", recipe.test_seed),
        tuple(sorted(named.items())),
        test_frame,
        frame,
        recipe.test_until,
    )


def cell_dir(root: str, experiment: Experiment) -> str:
    """Where a cell's run lives under a root: ``ROOT/TASK/NAME``."""
    return os.path.join(root, experiment.cell.task, experiment.name)
