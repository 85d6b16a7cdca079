"""wandb sweeps without a server: validate and expand a sweep YAML with wandb's own sweep engine
(the ``sweeps`` package) and build each run's command line exactly as ``wandb agent`` would
(``--key=value`` for ``${args}``).
"""

import json
import subprocess
import sys
import warnings

from abcmini.errors import UserError
from abcmini.yaml_file import read_yaml

MACROS = ("${env}", "${interpreter}", "${program}", "${args}")
MAX_SWEEP_BYTES = 64 * 1024  # checked before the file is parsed
MAX_DEPTH = 6  # parameters: NAME: {values: [...]}, command: [...]
MAX_RUNS = 10_000  # runs of one sweep, checked before the engine expands it
DEFAULT_COMMAND = ["${env}", "${interpreter}", "${program}", "${args}"]


class SweepFileError(UserError):
    pass


def _engine():
    with (
        warnings.catch_warnings()
    ):  # the sweeps package emits a pydantic deprecation warning on import
        warnings.simplefilter("ignore")
        import sweeps
    return sweeps


def load_sweep(path: str) -> dict:
    """Read and validate a sweep file; every problem is a one-line ``SweepFileError``."""
    config = read_yaml(path, "sweep file", MAX_SWEEP_BYTES, MAX_DEPTH, SweepFileError)
    if not isinstance(config, dict):
        raise SweepFileError(f"sweep file {path!r} does not hold a sweep configuration (a mapping)")
    if "program" not in config:
        raise SweepFileError(
            f"sweep file {path!r} names no program (abcmini sweeps use program: cli.py)"
        )
    if grid_size(config) > MAX_RUNS:  # before the engine, which takes minutes over a million values
        raise SweepFileError(
            f"sweep file {path!r}: its grid has {grid_size(config):,} runs, over {MAX_RUNS:,}"
        )
    sweeps = _engine()
    problems = sweeps.schema_violations_from_proposed_config(config)
    if problems:
        raise SweepFileError(
            f"sweep file {path!r} is not a valid sweep: {problems[0].splitlines()[0]}"
        )
    for macro in (part for part in config.get("command", DEFAULT_COMMAND) if "${" in str(part)):
        if macro not in MACROS:
            raise SweepFileError(
                f"sweep file {path!r}: unsupported command macro {macro}; use {', '.join(MACROS)}"
            )
    try:
        expand(
            config, 1
        )  # some errors (a grid over a range, bayes without a metric) only show here
    except Exception as error:  # noqa: BLE001 — the engine raises several types
        raise SweepFileError(
            f"sweep file {path!r} is not a valid sweep: {str(error).splitlines()[0]}"
        ) from None
    return config


def grid_size(config: dict) -> int:
    """The number of runs of a grid over the sweep's parameters: the product of their numbers of values."""
    size = 1
    parameters = config.get("parameters")
    for spec in parameters.values() if isinstance(parameters, dict) else ():
        values = spec.get("values") if isinstance(spec, dict) else None
        size *= len(values) if isinstance(values, list) else 1
    return size


def expand(config: dict, count: int | None = None) -> list[dict]:
    """The runs' parameter values, as the sweep engine proposes them: every grid point (or the
    first ``count``), or ``count`` draws for random / bayes searches."""
    sweeps = _engine()
    if config.get("method") != "grid" and count is None:
        raise SweepFileError(f"a {config.get('method')} sweep has no end; pass --count")
    runs = []
    while count is None or len(runs) < count:
        run = sweeps.next_run(config, runs, validate=not runs)  # the file's schema, checked once
        if run is None:
            break
        run.state = sweeps.RunState.finished
        runs.append(run)
    return [{key: item["value"] for key, item in run.config.items()} for run in runs]


def command_line(config: dict, params: dict, interpreter: str = sys.executable) -> list[str]:
    """The argv ``wandb agent`` would run for these parameter values."""
    args = [f"--{key}={value}" for key, value in params.items()]
    argv = []
    for part in config.get("command", DEFAULT_COMMAND):
        if part == "${env}":
            continue  # the agent's /usr/bin/env prefix
        argv += {
            "${interpreter}": [interpreter],
            "${program}": [config["program"]],
            "${args}": args,
        }.get(part, [str(part)])
    return argv


def run_dirs(commands: list[list[str]], env: dict) -> list[str]:
    """The run directory of each sweep run (``abcmini train … --dry-run`` names it), where one
    resolves; a run whose command cannot resolve is left out."""
    dirs = []
    for argv in commands:
        done = subprocess.run([*argv, "--dry-run"], env=env, capture_output=True, text=True)
        try:
            dirs.append(json.loads(done.stdout)["out"])
        except (ValueError, KeyError, TypeError):
            continue
    return dirs
