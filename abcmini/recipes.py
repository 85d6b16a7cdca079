"""Named recipes: how every cell is trained, as data a user reads in one place, copies and
edits. Every value carries a one-line reason (``abcmini recipe NAME`` prints them); the
measurements behind the reasons are in docs/recipe.md. A recipe of one's own is a YAML file of
fields over a named one (``base: paper``).
"""

import math
import os
from dataclasses import dataclass, field, fields, replace

import yaml

from abcmini.nn.rules import RULES
from abcmini.names import ConfigError, check_int


TEST_FRAMES = ("fixed", "follows")
MAX_RECIPE_BYTES = 64 * 1024  # checked before the file is parsed
MAX_LIST = 1000  # entries of any list in a recipe (lengths)


def check_test_frame(value: str) -> None:
    if value not in TEST_FRAMES:
        raise ConfigError(f"--test-frame is fixed or follows, not {value!r}")


def check_window_unit(value: str) -> None:
    if value not in ("column", "pair"):
        raise ConfigError(f"--window-unit is column or pair, not {value!r}")


def why(default, reason: str):
    """A recipe field: its value and the one-line reason for it."""
    return field(default=default, metadata={"why": reason})


@dataclass(frozen=True)
class Calibration:
    """ABC's calibration settings: one procedure for every recipe and task (paper §4, Algorithm 1,
    with the rules docs/recipe.md explains; their fixed parts live in ``abcmini.nn.calibrate``)."""

    kappa_self: float = why(0.87, "the paper's dropoff factor for self-attention")
    kappa_cross: float = why(2.5, "a pad-10 frame has few cross lines; none stands the paper's 4.5 sigma out")
    min_support: float = why(0.5, "extend only lines crossing half of the trusted rows, and the last one")
    samples: int = why(1000, "training inputs decoded to average the attention over")
    seed: int = why(0, "seed of that subset of training inputs")
    min_accuracy: float = why(0.99, "refuse a source below this validation exact match: it has not interpolated")
    rules: str = why("all", "every rule beyond Algorithm 1 (abcmini recipe RECIPE lists them); none: the paper as written")

    def __post_init__(self):
        for name in ("kappa_self", "kappa_cross", "min_support", "min_accuracy"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(f"{name} must be a finite number, got {getattr(self, name)}")
        if not 0 <= self.min_support <= 1:
            raise ConfigError(f"min_support must lie in [0, 1], got {self.min_support}")
        if self.samples < 1:
            raise ConfigError(f"--samples must be at least 1, got {self.samples}")
        self.rule_names()

    def rule_names(self) -> tuple[str, ...]:
        return rule_names(self.rules)


def rule_names(spec: str) -> tuple[str, ...]:
    """Calibration rules spelled out: ``all``, ``none``, names, or ``all,-band`` (all but band), in ``RULES``' order."""
    chosen = set()
    for word in filter(None, (w.strip() for w in spec.split(","))):
        name = word.removeprefix("-")
        if word in ("all", "none"):
            chosen = set(RULES) if word == "all" else set()
        elif name not in RULES:
            raise ConfigError(f"unknown calibration rule {name!r}; rules are all, none or {', '.join(RULES)}")
        elif word.startswith("-"):
            chosen.discard(name)
        else:
            chosen.add(name)
    return tuple(name for name in RULES if name in chosen)


PAPER_CALIBRATION = {"rules": "none", "kappa_cross": 4.5}  # --calibration paper: Algorithm 1 with the paper's κ


@dataclass(frozen=True)
class Recipe:
    """How every cell of the paper's tables is trained on 2 CPU cores."""

    name: str = why("paper", "what produced the README's tables")
    pad_width: int = why(12, "a pad-12 frame: steps 5x cheaper than the paper's 64 (docs/paper-gaps.md)")
    lengths: tuple = why((6, 10, 15, 20, 60), "the paper's test lengths")
    test_seed: int = why(0, "every method is tested on the same numbers")
    test_frame: str = why("follows", "each length in a frame of the length plus the training numbers' leading zeros")
    arch: str = why("encoder-decoder", "the paper's model; decoder: GPT-style, prompt and answer in one causal sequence")
    preset: str = why("cpu", "2 decoder layers, 4 heads, d 64: converges in minutes on a CPU")
    enc_layers: int = why(0, "the authors' identity encoder: cross-attention reads the embedded input")
    enc_layers_in_attention: int = why(1, "RoPE, ALiBi, relative act inside self-attention, so their input needs an encoder")
    lr: float = why(1e-3, "Adam with warmup and cosine decay, for minutes instead of the paper's days at 1e-5")
    warmup: int = why(100, "linear warmup steps")
    batch_size: int = why(128, "examples per optimizer step")
    eval_every: int = why(250, "validate and checkpoint every this many steps")
    valid_size: int = why(1000, "validation examples from the held-out eighth of the pool")
    stop_at: float = why(0.999, "scaffolded runs (ABS, ABC retraining) stop at 99.9% validation")
    stop_at_plain: float = why(0.995, "unscaffolded runs stop at interpolation, enough for ABC's 99%")
    train_on: float = why(1.5, "ABS windows train on to 1.5x the step that reached stop_at: long carries need it")
    abc_train_on: float = why(3.0, "ABC retraining trains on to 3x the step that reached stop_at: rarer long carry errors")
    abc_pad_width: int = why(10, "ABC's source trains at pad 10, its retraining from there: 4 trailing zeros, as 60 digits at pad 64")
    abc_frame_spread: int = why(10, "ABC retrains in frames of 10 to 20 digits: every test frame's margins were seen")
    abc_valid_size: int = why(500, "…and validates on 500 numbers: one ABC training serves every recipe's protocol")
    steps: int = why(4000, "step cap of runs expected to interpolate")
    steps_addition_plain: int = why(20000, "Vanilla and RoPE Addition sit on a loss plateau for thousands of steps")
    steps_alibi: int = why(1500, "ALiBi does not interpolate (paper §3); capped short")
    steps_parity_plain: int = why(4000, "Parity without a window: in a pad-12 frame Vanilla interpolates by step 750")
    steps_nx1_window: int | None = why(None, "N×1 with an ABS window (and today's methods): its own step cap (none: steps)")
    steps_nx1_abc: int = why(12000, "ABC on N×1 reaches 99.9% late in frames of 10–20; a 4,000 cap cut its 3x short")
    scaffold_pe_scale: float = why(1 / 16, "+w=W: the uncycled sinusoidal encoding at 1/16 amplitude beside the window")
    cpi_from: str = why("end", "CPI counted from the least significant digit keeps each digit's phase in any frame")
    window_unit: str = why("pair", "on Addition and N×1 the ABS window and CPI count operand pairs (docs/paper-gaps.md)")
    abc_scheme: str = why("nope", "ABC retrains without positional encoding: the bias is its only position signal")
    calibration: Calibration = why(Calibration(), "ABC's calibration settings")
    changes: tuple = why((), "the reasons for the values that differ from the recipe this one is based on")

    def __post_init__(self):
        check_test_frame(self.test_frame)
        check_window_unit(self.window_unit)
        if self.arch not in ("encoder-decoder", "decoder"):
            raise ConfigError(f"arch is encoder-decoder or decoder, not {self.arch!r}")

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
        return replace(self, **values, calibration=replace(self.calibration, **calibration), changes=tuple(reasons.items()))

    def reasons(self) -> list[tuple[str, object, str]]:
        """``(field, value, reason)`` for every value, calibration's as ``calibration.FIELD``."""
        rows = []
        for f in fields(self):
            if f.name == "calibration":
                rows += [(f"calibration.{c.name}", getattr(self.calibration, c.name), c.metadata["why"]) for c in fields(Calibration)]
                on = self.calibration.rule_names()
                rows += [(f"calibration rule {name}", "on" if name in on else "off", reason) for name, reason in RULES.items()]
            elif f.name != "changes":
                rows.append((f.name, getattr(self, f.name), f.metadata["why"]))
        changed = dict(self.changes)
        return [(name, value, changed.get(name, reason)) for name, value, reason in rows]


PAPER = Recipe()
PAPER64 = PAPER.derive(
    name=("paper64", "the paper's own frame: the shipped sources and the records docs/paper-gaps.md compares"),
    pad_width=(64, "the paper's fixed frame, wide enough for the 60-digit column"),
    test_frame=("fixed", "test every length in the training frame (the paper)"),
    cpi_from=("start", "CPI (+T=3) counts input positions from the first token (the paper)"),
    window_unit=("column", "the window counted in input columns either side of the operand pair"),
    steps_parity_plain=(300, "at pad 64 a Parity step costs 3.6 s and Vanilla stays at 0%: capped short"),
)
QUICK = PAPER.derive(
    name=("quick", "minutes, not hours: Successor, Vanilla against ABC (reproduce --quick)"),
    pad_width=(24, "the smallest frame that holds the 20-digit column"),
    test_frame=("fixed", "every test length fits the training frame"),
    lengths=((6, 10, 15, 20), "what fits in the frame"),
    steps=(1500, "a pad-24 run converges in a few hundred steps"),
    valid_size=(500, "half the validation set: minutes, not hours"),
    calibration_samples=(500, "half the calibration inputs"),
)
LONG = PAPER.derive(
    name=("long", "beyond the training frame: train in a pad-12 frame, test up to 500 digits in frames that follow the length"),
    pad_width=(12, "a small frame: cheap steps; the scaffolds do not depend on its width"),
    lengths=((6, 10, 20, 60, 100, 200, 500), "from inside the training frame to 70 times the longest training number"),
    test_frame=("follows", "each length in a frame of the length plus the training numbers' leading zeros"),
    cpi_from=("end", "CPI counted from the least significant digit keeps each digit's phase in any frame"),
    train_on=(3.0, "ABS windows train on to 3x the step that reached stop_at: carries over hundreds of digits need it"),
    valid_size=(500, "half the validation set: minutes, not hours"),
    steps_nx1_window=(12000, "N×1 +T=3 reaches 99.9% late: 3x it passed 4,000 steps; today's methods share the ABS rule"),
    window_unit=("column", "the window counted in input columns, as results/long's ABS records were trained"),
)
DECODER = LONG.derive(
    name=("decoder", "the long protocol in a decoder-only model: prompt and answer in one causal sequence"),
    arch=("decoder", "GPT-style, as most models researchers use; ABC calibrates its answer rows"),
)
RECIPES = {recipe.name: recipe for recipe in (PAPER, PAPER64, QUICK, LONG, DECODER)}


def _tuples(value):
    """YAML lists as the tuples a frozen recipe holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _checked(name: str, value, kind, where: str):
    """``value`` if it has the field's type (an int is a float too; a list of integers is a tuple), else one line."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {int: isinstance(value, int) and not isinstance(value, bool), float: number and math.isfinite(value), str: isinstance(value, str),
          tuple: isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
          int | None: value is None or (isinstance(value, int) and not isinstance(value, bool))}.get(kind, True)
    if not ok:
        expected = {int: "an integer", float: "a finite number", str: "a string", tuple: "a list of integers",
                    int | None: "an integer or null"}[kind]
        raise ConfigError(f"{where}: {name} must be {expected}, got {value!r}")
    if kind is tuple and len(value) > MAX_LIST:
        raise ConfigError(f"{where}: {name} has {len(value):,} entries; at most {MAX_LIST:,}")
    if kind in (int, tuple, int | None):
        check_int(value, "steps" if name.startswith("steps") else name, f"{where}: {name}")
    return float(value) if kind is float else value


def _from_dict(cls, data: dict, where: str):
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; fields are {', '.join(known)}")
    values = {}
    for name, value in data.items():
        if name == "calibration":
            if value is not None and not isinstance(value, dict):
                raise ConfigError(f"{where}: calibration must be a mapping of calibration fields, got {value!r}")
            value = _from_dict(Calibration, value or {}, where)
        elif name != "changes":
            kind = int | None if name == "pad_width" else known[name].type  # pad_width: null is the growing geometry
            value = _checked(name if cls is Recipe else f"calibration.{name}", value, kind, where)
        values[name] = _tuples(value)
    return values


def load_recipe(name_or_path: str, _chain: tuple = ()) -> Recipe:
    """A named recipe (``paper``, ``quick``) or a YAML file of fields over one (``base: paper``)."""
    if name_or_path in RECIPES:
        return RECIPES[name_or_path]
    if os.path.realpath(name_or_path) in _chain:
        raise ConfigError(f"recipe file {name_or_path!r}: its base: chain comes back to it; base it on a named recipe")
    if not os.path.isfile(name_or_path):
        raise ConfigError(f"unknown recipe {name_or_path!r}; choose one of {', '.join(RECIPES)} or give a recipe YAML file")
    if os.path.getsize(name_or_path) > MAX_RECIPE_BYTES:
        raise ConfigError(f"recipe file {name_or_path!r} is over {MAX_RECIPE_BYTES // 1024} KiB; a recipe is a few fields over a named one")
    try:
        with open(name_or_path) as f:
            text = f.read()
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise ConfigError(f"recipe file {name_or_path!r} uses YAML aliases (*name); write each value out")
        data = yaml.safe_load(text) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"recipe file {name_or_path!r} is unreadable ({type(error).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"recipe file {name_or_path!r} does not hold a mapping of fields")
    base = load_recipe(str(data.pop("base", "paper")), (*_chain, os.path.realpath(name_or_path)))
    reasons = data.pop("why", {}) or {}  # field → the reason for its new value
    if not isinstance(reasons, dict):
        raise ConfigError(f"recipe file {name_or_path!r}: why: maps a field to the reason for its value")
    data["changes"] = [[str(k), str(v)] for k, v in {**dict(base.changes), **reasons}.items()]
    data.setdefault("name", os.path.splitext(os.path.basename(name_or_path))[0])
    values = _from_dict(Recipe, data, f"recipe file {name_or_path!r}")
    if "calibration" in values:
        try:
            values["calibration"] = replace(base.calibration, **values["calibration"])
        except ConfigError as error:
            raise ConfigError(f"recipe file {name_or_path!r}: {error}") from None
    try:
        return replace(base, **values)
    except TypeError as error:
        raise ConfigError(f"recipe file {name_or_path!r}: {error}") from None
