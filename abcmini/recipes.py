"""Named recipes: how every cell is trained, as data a user reads in one place, copies and
edits. Every value carries a one-line reason (``abcmini recipe NAME`` prints them); the
measurements behind the reasons are in docs/recipe.md. A recipe of one's own is a YAML file of
fields over a named one (``base: paper``).
"""

import math
import os
from dataclasses import fields, replace

from abcmini.config import EXPERIMENT_FIELDS, Calibration, Recipe, RunConfig
from abcmini.errors import UserError
from abcmini.names import METHOD_KINDS, ConfigError, check_int, check_selector
from abcmini.yaml_file import read_yaml

MAX_RECIPE_BYTES = 64 * 1024  # checked before the file is parsed
MAX_LIST = 1000  # entries of any list in a recipe (lengths)
MAX_DEPTH = 4  # a recipe's deepest value is calibration: {rules: ...} or lengths: [...]


PAPER = Recipe()
PAPER64 = PAPER.derive(
    name=(
        "paper64",
        "the paper's own frame: the shipped sources and the records docs/paper-gaps.md compares",
    ),
    pad_width=(64, "the paper's fixed frame, wide enough for the 60-digit column"),
    test_frame=("fixed", "test every length in the training frame (the paper)"),
    cpi_from=("start", "CPI (+T=3) counts input positions from the first token (the paper)"),
    window_unit=("column", "the window counted in input columns either side of the operand pair"),
    step_caps=(
        PAPER.capped(
            ("parity plain", 300, "at pad 64 a Parity step costs 3.6 s and Vanilla stays at 0%"),
            ("parity_class plain", 300, "as parity"),
        ),
        "Parity without a window capped short",
    ),
)
ABC64 = PAPER64.derive(
    name=(
        "abc64",
        "the paper's protocol for ABC: source, calibration, retraining and tests in one pad-64 frame",
    ),
    abc_pad_width=(64, "the source trains, and ABC calibrates and retrains, in the paper's frame"),
    abc_frame_spread=(
        0,
        "one fixed frame, as the paper: no frames of other widths to carry lines into",
    ),
    abc_train_on=(
        1.0,
        "the paper names no train-on phase: the retraining stops at 99.9% validation",
    ),
    abc_valid_size=(1000, "as the shipped pad-64 sources (results/sources/paper64) were validated"),
    step_caps=(
        PAPER64.capped(
            ("nx1 abc", 4000, "one frame, no frames of 10-20 to learn: every other ABC cell's cap"),
        ),
        "ABC on N×1 capped as every other ABC cell",
    ),
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
    name=(
        "long",
        "beyond the training frame: train in a pad-12 frame, test up to 500 digits in frames that follow the length",
    ),
    pad_width=(12, "a small frame: cheap steps; the scaffolds do not depend on its width"),
    lengths=(
        (6, 10, 20, 60, 100, 200, 500),
        "from inside the training frame to 70 times the longest training number",
    ),
    test_frame=(
        "follows",
        "each length in a frame of the length plus the training numbers' leading zeros",
    ),
    cpi_from=(
        "end",
        "CPI counted from the least significant digit keeps each digit's phase in any frame",
    ),
    train_on=(
        3.0,
        "ABS windows train on to 3x the step that reached stop_at: carries over hundreds of digits need it",
    ),
    valid_size=(500, "half the validation set: minutes, not hours"),
    step_caps=(
        PAPER.capped(
            ("nx1 abs", 12000, "N×1 +T=3 reaches 99.9% late: 3x it passed 4,000 steps"),
            ("nx1 todays", 12000, "today's methods share the ABS rule"),
        ),
        "N×1 with an ABS window, and today's methods, get ABC's N×1 cap",
    ),
    window_unit=(
        "column",
        "the window counted in input columns, as results/long's ABS records were trained",
    ),
)
DECODER = LONG.derive(
    name=(
        "decoder",
        "the long protocol in a decoder-only model: prompt and answer in one causal sequence",
    ),
    arch=("decoder", "GPT-style, as most models researchers use; ABC calibrates its answer rows"),
)
MULTIADD = LONG.derive(
    name=(
        "multiadd",
        "the long protocol for tasks beyond the paper's (docs/multi-operand.md): more steps for the source",
    ),
    steps=(
        16000,
        "seed 0's multiadd source learns 2-4 operands by 16,000 steps (75%), 5 not yet: 4,000 cuts it short",
    ),
    lengths=(
        (7, 14, 35),
        "1x, 2x and 5x the pool's 7 digits: at 500 digits one multiadd input (357 operands) needs about 3,900 GiB",
    ),
)
RECIPES = {
    recipe.name: recipe for recipe in (PAPER, PAPER64, ABC64, QUICK, LONG, DECODER, MULTIADD)
}


def _tuples(value):
    """YAML lists as the tuples a frozen recipe holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _checked(name: str, value, kind, where: str):
    """``value`` if it has the field's type (an int is a float too; a list of integers is a tuple), else one line."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {
        int: isinstance(value, int) and not isinstance(value, bool),
        float: number and math.isfinite(value),
        str: isinstance(value, str),
        tuple: isinstance(value, list)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
        int | None: value is None or (isinstance(value, int) and not isinstance(value, bool)),
    }.get(kind, True)
    if not ok:
        expected = {
            int: "an integer",
            float: "a finite number",
            str: "a string",
            tuple: "a list of integers",
            int | None: "an integer or null",
        }[kind]
        raise ConfigError(f"{where}: {name} must be {expected}, got {value!r}")
    if kind is tuple and len(value) > MAX_LIST:
        raise ConfigError(f"{where}: {name} has {len(value):,} entries; at most {MAX_LIST:,}")
    if kind in (int, tuple, int | None):
        check_int(value, name, f"{where}: {name}")
    return float(value) if kind is float else value


SETTABLE = {  # what a recipe file's cells: may set, and its type
    **{f.name: f.type for f in fields(RunConfig) if f.metadata["role"] != "cell"},
    **{f.name: f.type for f in fields(Calibration)},
    **{name: kind for name, (kind, _) in EXPERIMENT_FIELDS.items()},
}


def _selector(selector: str, where: str) -> None:
    try:
        check_selector(selector)
    except UserError as error:
        raise ConfigError(f"{where}: cells: {error}") from None


def _cells(value, where: str) -> tuple:
    """A recipe file's ``cells:`` (selector → {field: value}) as the tuple a recipe holds."""
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: cells maps '*', a task, a method or 'TASK METHOD' to fields, got {value!r}"
        )
    found = []
    for selector, settings in value.items():
        _selector(str(selector), where)
        if not isinstance(settings, dict) or not settings:
            raise ConfigError(
                f"{where}: cells: {selector}: maps fields to values, got {settings!r}"
            )
        for name in settings:
            if name not in SETTABLE:
                raise ConfigError(
                    f"{where}: cells: {selector}: {name!r} is not a field a run can set; "
                    f"fields are {', '.join(SETTABLE)}"
                )
        checked = tuple(
            (name, _tuples(_checked(name, v, SETTABLE[name], where)))
            for name, v in settings.items()
        )
        found.append((str(selector), checked))
    return tuple(found)


def _step_caps(value, where: str) -> tuple:
    """A recipe file's ``step_caps:`` (selector → steps) as rows of a recipe's table."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: step_caps maps a selector to a step cap, got {value!r}")
    rows = []
    for selector, steps in value.items():
        try:
            check_selector(str(selector), METHOD_KINDS)
        except UserError as error:
            raise ConfigError(f"{where}: step_caps: {error}") from None
        rows.append((str(selector), _checked("steps", steps, int, where), f"set by {where}"))
    return tuple(rows)


def _from_dict(cls, data: dict, where: str):
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; fields are {', '.join(known)}")
    values = {}
    for name, value in data.items():
        if name == "calibration":
            if value is not None and not isinstance(value, dict):
                raise ConfigError(
                    f"{where}: calibration must be a mapping of calibration fields, got {value!r}"
                )
            value = _from_dict(Calibration, value or {}, where)
        elif name == "cells":
            value = _cells(value, where)
        elif name == "step_caps":
            value = _step_caps(value, where)
        elif name != "changes":
            kind = (
                int | None if name == "pad_width" else known[name].type
            )  # pad_width: null is the growing geometry
            value = _checked(name if cls is Recipe else f"calibration.{name}", value, kind, where)
        values[name] = _tuples(value)
    return values


def load_recipe(name_or_path: str, _chain: tuple = ()) -> Recipe:
    """A named recipe (``paper``, ``quick``) or a YAML file of fields over one (``base: paper``)."""
    if name_or_path in RECIPES:
        return RECIPES[name_or_path]
    if os.path.realpath(name_or_path) in _chain:
        raise ConfigError(
            f"recipe file {name_or_path!r}: its base: chain comes back to it; base it on a named recipe"
        )
    if not os.path.exists(name_or_path):
        raise ConfigError(
            f"unknown recipe {name_or_path!r}; choose one of {', '.join(RECIPES)} or give a recipe YAML file"
        )
    data = read_yaml(name_or_path, "recipe file", MAX_RECIPE_BYTES, MAX_DEPTH, ConfigError)
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            f"recipe file {name_or_path!r} does not hold a mapping of fields (base: paper, then the fields it changes)"
        )
    base = str(data.pop("base", "paper"))  # a named recipe, or a file beside this one
    if base not in RECIPES and not os.path.isabs(base):
        base = os.path.join(os.path.dirname(name_or_path), base)
    base = load_recipe(base, (*_chain, os.path.realpath(name_or_path)))
    reasons = data.pop("why", {}) or {}  # field → the reason for its new value
    if not isinstance(reasons, dict):
        raise ConfigError(
            f"recipe file {name_or_path!r}: why: maps a field to the reason for its value"
        )
    data["changes"] = [[str(k), str(v)] for k, v in {**dict(base.changes), **reasons}.items()]
    data.setdefault("name", os.path.splitext(os.path.basename(name_or_path))[0])
    values = _from_dict(Recipe, data, f"recipe file {name_or_path!r}")
    if "calibration" in values:
        try:
            values["calibration"] = replace(base.calibration, **values["calibration"])
        except ConfigError as error:
            raise ConfigError(f"recipe file {name_or_path!r}: {error}") from None
    if "step_caps" in values:
        values["step_caps"] = base.capped(*values["step_caps"])
    if "cells" in values:  # merged over the base's, field by field within a selector
        cells = {selector: dict(fields) for selector, fields in base.cells}
        for selector, fields in values["cells"]:
            cells[selector] = {**cells.get(selector, {}), **dict(fields)}
        values["cells"] = tuple((k, tuple(v.items())) for k, v in cells.items())
    try:
        return replace(base, **values)
    except (TypeError, UserError) as error:
        raise ConfigError(f"recipe file {name_or_path!r}: {error}") from None
