"""Names a user types (tasks, methods) and the bounds of integers, in a module without torch: the
command line checks them before it imports torch."""

import re
from dataclasses import dataclass

from abcmini.errors import UserError
from abcmini.nn.schemes import SCHEMES, TODAYS_SCHEMES


class ConfigError(UserError):
    pass


TASKS = ("successor", "addition", "nx1", "parity", "parity_class", "multiadd", "multiply")


def check_task(task: str) -> None:
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


def is_binary(task: str) -> bool:
    return task in ("addition", "nx1")


SEED_MAX = (
    2**31 - 1
)  # a test set's generator is seeded with seed * 1,000,003 + length: well inside torch's 64 bits
BOUNDS = {  # the lowest and highest value of each integer a user sets, checked once for the command line, recipes and runs
    "seed": (0, SEED_MAX),
    "data_seed": (0, SEED_MAX),
    "test_seed": (0, SEED_MAX),
    "calibration.seed": (0, SEED_MAX),
    "seeds": (0, SEED_MAX),
    "steps": (1, 10**9),
    "min_steps": (0, 10**9),
    "warmup": (0, 10**9),
    "eval_every": (1, 10**9),
    "batch_size": (1, 10**7),
    "valid_size": (1, 10**7),
    "samples": (None, 10**7),
    "calibration.samples": (None, 10**7),
    "lengths": (1, 10**6),
    "pad_width": (None, 10**6),
    "frame_spread": (0, 10**6),
    "window": (0, 10**6),
    "period": (0, 10**6),
    "enc_layers": (0, 1000),
    "layers": (1, 1000),
    "heads": (1, 1024),
    "d_model": (1, 1 << 16),
    "max_position": (2, 10**6),
    "coupling_levels": (1, 3),
    "index_hints": (0, 512),
    "train_digits": (1, 10**4),
    "threads": (None, 4096),
    "workers": (None, 4096),
}


def bound_name(field: str) -> str:
    """The ``BOUNDS`` entry of a field: a recipe's ``steps`` is a step count, its
    ``abc_valid_size`` a validation size, ``enc_layers_in_attention`` an encoder depth."""
    name = field.removeprefix("abc_").removesuffix("_in_attention")
    return "steps" if name.startswith("steps") else name


def check_int(value, name: str, option: str | None = None) -> None:
    """Refuse an integer outside what its use allows (``BOUNDS[name]``): a seed torch cannot take,
    a step count or length no run could reach."""
    low, high = BOUNDS.get(
        name if name in BOUNDS else bound_name(name.split(".")[-1]), (None, None)
    )
    label = option or "--" + name.replace("_", "-")
    for v in value if isinstance(value, (tuple, list)) else (value,):
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        if low is not None and v < low:
            raise UserError(f"{label} must be at least {low}, got {v}")
        if high is not None and v > high:
            raise UserError(
                f"{label} must be at most {high:,}, got {v}"
                if len(str(v)) < 40
                else f"{label} must be at most {high:,}, got a {len(str(v))}-digit number"
            )


@dataclass(frozen=True)
class Method:
    """A method as its name says it: a positional scheme, an ABS window (None: none), a CPI
    period (0: off), ``varied`` training lengths, and (a run's, not a name's) an ABC bias."""

    scheme: str
    window: int | None = None
    period: int = 0
    varied: bool = False
    biased: bool = False

    @property
    def label(self) -> str:
        """As the tables name it: ``vanilla+w=1+T=3``, ``nope+w=1``, ``abacus+varied``, ``nope+abc``."""
        window = f"+w={self.window}" if self.window is not None else ""
        period = f"+T={self.period}" if self.period else ""
        return f"{self.scheme}{window}{period}{'+varied' * self.varied}{'+abc' * self.biased}"


def parse_method(method: str, window: int | None = None, period: int | None = None) -> Method:
    """A method name → its ``Method`` (scheme, ABS window, CPI period, varied lengths).

    Names: a scheme (``vanilla``, ``nope``, ``rope``, ``alibi``, ``relative``), optionally
    followed by ``+w=W`` and ``+T=T`` (``vanilla+w=1+T=3``); the paper's table names ``+w=1``,
    ``+T=3`` (window 1 and period 3) and ``NoPE+w=1``; ``abc`` (ABC's retraining, ``nope``).
    ``window`` and ``period`` (the ``--window``/``--period`` options) add to a name that has none.
    A final ``+varied`` trains on every length without leading zeros (``RunConfig.varied``).
    """
    match = re.fullmatch(
        r"(vanilla|nope|NoPE|rope|alibi|relative|random|fire|abacus|coupling)?(?:\+w=(\d+))?(?:\+T=(\d+))?(\+varied)?",
        method,
    )
    if method == "abc":
        scheme, named_window, named_period, varied = "nope", None, None, False
    elif not method or not match:
        raise ConfigError(
            f"unknown method {method!r}; choose one of {', '.join(SCHEMES)}, abc, +w=W, +T=T, NoPE+w=W "
            "(or a scheme with +w=W and/or +T=T, e.g. vanilla+w=1+T=3), each optionally +varied"
        )
    else:
        scheme, varied = (match.group(1) or "vanilla").lower(), bool(match.group(4))
        named_window = int(match.group(2)) if match.group(2) else None
        named_period = int(match.group(3)) if match.group(3) else None
        if named_period == 0:
            raise ConfigError(
                f"method {method!r}: +T=T names a CPI period of at least 1 (a method without CPI has no +T)"
            )
        if named_period is not None and named_window is None:
            named_window = 1  # the paper's "+T=3" is w = 1 with CPI period 3
    for option, named, given in (
        ("--window", named_window, window),
        ("--period", named_period, period),
    ):
        if named is not None and given is not None and named != given:
            raise ConfigError(
                f"method {method!r} sets {option[2:]} {named}; {option} {given} contradicts it"
            )
    window = named_window if named_window is not None else window
    period = named_period if named_period is not None else (period or 0)
    if window is not None and window < 0:
        raise ConfigError(f"--window must be at least 0, got {window}")
    if period < 0:
        raise ConfigError(f"--period must be at least 0 (0 turns CPI off), got {period}")
    return Method(scheme, window, period, varied)


METHOD_KINDS = ("abc", "abs", "todays", "plain")  # what a step cap names beside a method


def method_kind(method: str) -> str:
    """``abc``, ``abs`` (a window), ``todays`` (random, FIRE, Abacus, Coupling) or ``plain``."""
    parts = parse_method(method)
    if method == "abc":
        return "abc"
    if parts.window is not None:
        return "abs"
    return "todays" if parts.scheme in TODAYS_SCHEMES else "plain"


def check_selector(selector: str, kinds: tuple = ()) -> None:
    """``*``, a task, a method (as a cell spells it, or one of ``kinds``) or ``TASK METHOD``."""
    parts = selector.split(" ")
    if selector == "*" or selector in TASKS:
        return
    if len(parts) > 2:
        raise ConfigError(f"{selector!r} is not '*', a task, a method or 'TASK METHOD'")
    if len(parts) == 2 and parts[0] not in TASKS:
        raise ConfigError(f"{selector!r}: {parts[0]!r} is not a task")
    if parts[-1] in kinds:
        return
    try:
        spelled = canonical_method(parts[-1])
    except UserError as error:
        raise ConfigError(f"{selector!r}: {error}") from None
    if spelled != parts[-1]:
        raise ConfigError(f"{selector!r}: a cell spells the method {spelled!r}")


def canonical_method(method: str, window: int | None = None, period: int | None = None) -> str:
    """One name per method: ``+T=3`` and ``vanilla --window 1 --period 3`` are both ``vanilla+w=1+T=3``."""
    if method == "abc":
        parse_method(method, window, period)
        if window is not None or period:
            raise ConfigError("abc calibrates its own bias; --window and --period do not apply")
        return "abc"
    return parse_method(method, window, period).label


def selects(selector: str, task: str, method: str) -> bool:
    """Whether ``selector`` (``check_selector``'s, kinds included) names the cell ``task method``."""
    names = (method, method_kind(method))
    return selector in ("*", task, *names, *(f"{task} {name}" for name in names))
