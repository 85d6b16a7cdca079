"""The task names, in a module without torch: the command line checks them before importing it."""

from abcmini.errors import UserError

TASKS = ("successor", "addition", "nx1", "parity", "parity_class")


def check_task(task: str) -> None:
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


SEED_MAX = 2**31 - 1  # a test set's generator is seeded with seed * 1,000,003 + length: well inside torch's 64 bits
BIGGEST = {"seed": (0, SEED_MAX), "data_seed": (0, SEED_MAX), "test_seed": (0, SEED_MAX), "calibration.seed": (0, SEED_MAX), "seeds": (0, SEED_MAX),
           "steps": (None, 10**9), "warmup": (None, 10**9), "eval_every": (None, 10**9), "batch_size": (None, 10**7),
           "valid_size": (None, 10**7), "samples": (None, 10**7), "calibration.samples": (None, 10**7), "lengths": (None, 10**6),
           "pad_width": (None, 10**6), "abc_pad_width": (None, 10**6), "frame_spread": (0, 10**6), "window": (None, 10**6), "period": (None, 10**6),
           "enc_layers": (None, 1000), "threads": (None, 4096), "workers": (None, 4096)}


def check_int(value, name: str, option: str | None = None) -> None:
    """Refuse an integer outside what its use allows (``BIGGEST[name]``): a seed torch cannot take,
    a step count or length no run could reach."""
    low, high = BIGGEST.get(name.split(".")[-1] if name not in BIGGEST else name, (None, None))
    label = option or "--" + name.replace("_", "-")
    for v in value if isinstance(value, (tuple, list)) else (value,):
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        if low is not None and v < low:
            raise UserError(f"{label} must be at least {low}, got {v}")
        if high is not None and v > high:
            raise UserError(f"{label} must be at most {high:,}, got {v}" if len(str(v)) < 40 else f"{label} must be at most {high:,}, got a {len(str(v))}-digit number")
