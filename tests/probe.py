"""Robustness probe of the abcmini command line: a hostile but ordinary user, case by case.

Every case runs in a fresh temporary directory (the working directory of the command) with
nothing reaching the network or the real home: wandb offline (except where a case says
otherwise) with its folders inside the case, a nonexistent netrc, HOME inside the case. Each
command runs under a timeout. For every case the probe checks that

  (a) no Python traceback appears on stdout or stderr;
  (b) no command hangs (runs past its timeout);
  (c) the user's files (every file there before the command that abcmini did not list as its
      own in a ``.abcmini-files``) are neither changed nor deleted, nor listed afterwards in a
      ``.abcmini-files`` as abcmini's;
  (d) bad input ends with exit code 2 and exactly one non-empty line on stderr;
  (e) nothing of abcmini's is left behind (``*.tmp``, ``.abcmini-write-test-*``);
  (f) a command interrupted by SIGKILL, SIGTERM or SIGINT finishes when the same command is run
      again (train: with ``--continue``, as the stop message says): exit code 0 and its outputs
      present.

Families of cases: 1 interruption and resume, 2 disk full (RLIMIT_FSIZE through prlimit, and a
small tmpfs), 3 user files where abcmini writes, 4 results roots with symlink loops, FIFOs,
devices and unreadable files, 5 hostile recipe and sweep files, 6 bad arguments and corrupt run
files, 7 environment (HOME, wandb settings, closed or full stdout).

Every command runs with at most 6 GiB of data (RLIMIT_DATA), so a case that allocates without
bound fails instead of starving the machine.

Run it (as root: tmpfs mounts, capability dropping for unreadable files) from the repository:

    python tests/probe.py                 # every family
    python tests/probe.py --family 5 6    # some of them
    python tests/probe.py --keep          # keep the directories of failing cases
    python tests/probe.py --resume --reuse-fixtures   # go on with a run that was stopped

It prints one markdown table row per family and writes the table to probe.md and every case's
commands, outputs and findings to probe.json (``--md``, ``--json``: elsewhere). Only one command runs at a
time, with one torch thread.
"""

import argparse
import atexit
import glob
import hashlib
import json
import os
import random
import re
import resource
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

REPO = os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))
)  # the source tree probed (--repo)
PYTHON = os.path.join(REPO, ".venv", "bin", "python")
TIMEOUT = 120
MEMORY = 6 << 30
ENV_DIR = ".probe-env"  # the case's home and wandb folders: the environment, not the user's files
DROP_CAPS = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
    "--",
]

FAMILIES = {
    1: "interruption and resume",
    2: "disk full",
    3: "user files where abcmini writes",
    4: "results roots: links, FIFOs, devices, unreadable",
    5: "recipe and sweep files",
    6: "bad arguments and corrupt run files",
    7: "environment",
    8: "bias files, .wandb files, sizes, network, sources in training",
}

TINY = [
    "--recipe",
    "quick",
    "--preset",
    "tiny",
    "--pad-width",
    "7",
    "--lengths",
    "3",
    "--steps",
    "40",
    "--eval-every",
    "10",
    "--valid-size",
    "8",
    "--threads",
    "1",
]
LONGER = [
    "--recipe",
    "quick",
    "--preset",
    "tiny",
    "--pad-width",
    "7",
    "--lengths",
    "3",
    "--steps",
    "160",
    "--eval-every",
    "10",
    "--valid-size",
    "8",
    "--threads",
    "1",
]
SMALL_RECIPE = (
    "base: quick\npreset: tiny\npad_width: 7\nlengths: [3]\nsteps: 40\nvalid_size: 8\neval_every: 10\n"
    "calibration: {samples: 20, min_accuracy: 0}\n"
)
REPRODUCE = [
    "reproduce",
    "--recipe",
    "small.yaml",
    "--tasks",
    "successor",
    "--seeds",
    "0",
    "--workers",
    "1",
    "--no-wandb",
    "--out",
    "root",
]
SWEEP = """program: cli.py
project: abcmini
name: probe
method: grid
metric:
  name: acc@3
  goal: maximize
command: ["${env}", "${interpreter}", "-m", "cli", "train", "--continue", "${args}"]
parameters:
  recipe: {value: quick}
  task: {value: successor}
  method: {values: [vanilla, "+w=1"]}
  preset: {value: tiny}
  steps: {value: 20}
  eval_every: {value: 10}
  valid_size: {value: 8}
  pad_width: {value: 7}
  lengths: {value: "3"}
  threads: {value: 1}
  seed: {value: 0}
  wandb: {value: false}
"""


@dataclass
class Case:
    family: int
    name: str
    args: list  # abcmini's arguments (str or bytes)
    expect: str = (
        "bad"  # bad: exit 2 and one line | ok: exit 0 | any: exit 0, or exit 2 and one line
    )
    #                                     pipe: exit 0, or 1 and nothing on stderr (stdout closed: the reader left, as rich ends)
    # | cells: exit 0, 1 or 2, a line on stderr per failure
    setup: Callable | None = None  # setup(directory) -> a sentence saying what was there
    env: dict = field(default_factory=dict)  # changes to the environment; None removes a variable
    prefix: list = field(default_factory=list)  # e.g. prlimit, setpriv
    kill: tuple | None = (
        None  # (signal, moment): moment(directory, seconds) -> True when to send it
    )
    moment: str = ""  # the moment in words
    rerun: list | None = None  # the command run again after the kill (default: the same)
    outputs: list = field(default_factory=list)  # globs that must match after success
    check: Callable | None = None  # check(directory, results) -> list of problems
    fast: float | None = None  # must end within this many seconds
    tmpfs: tuple | None = None  # (relative folder, size) mounted before setup
    timeout: int = TIMEOUT
    stdout: str = "pipe"  # pipe | full (/dev/full) | close (closed after the first line)
    recover: list | None = (
        None  # after a failure, this command (no limits) must finish: exit 0, outputs
    )


# ---------------------------------------------------------------- running commands


def shown(arg) -> str:
    """An argument as a shell would take it back."""
    raw = arg if isinstance(arg, bytes) else str(arg).encode("utf-8", "surrogateescape")
    try:
        return shlex.quote(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return (
            "$'"
            + "".join(chr(b) if 32 <= b < 127 and b not in b"'\\" else f"\\x{b:02x}" for b in raw)
            + "'"
        )


def command_line(case: Case, args) -> str:
    env = " ".join(f"{k}={shown(v)}" if v is not None else f"-u {k}" for k, v in case.env.items())
    env = f"env {env} " if env else ""
    prefix = " ".join(shown(a) for a in case.prefix) + " " if case.prefix else ""
    tail = {"full": " >/dev/full", "close": " | head -1"}.get(case.stdout, "")
    return f"{env}{prefix}abcmini {' '.join(shown(a) for a in args)}{tail}"


def environment(directory: str, changes: dict) -> dict:
    home = os.path.join(directory, ENV_DIR, "home")
    wandb = os.path.join(directory, ENV_DIR, "wandb")
    os.makedirs(home, exist_ok=True)
    os.makedirs(wandb, exist_ok=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": REPO,
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": os.path.join(WORK, "mplconfig"),
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": wandb,
        "WANDB_CACHE_DIR": wandb,
        "WANDB_DATA_DIR": wandb,
        "WANDB_CONFIG_DIR": wandb,
        "NETRC": os.path.join(directory, ENV_DIR, "no-netrc"),
    }
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value.replace("{dir}", directory)
    return env


def head_tail(text: str, head: int = 25, tail: int = 15) -> list[str]:
    lines = text.splitlines()
    if len(lines) <= head + tail:
        return lines
    return lines[:head] + [f"... ({len(lines) - head - tail} lines) ..."] + lines[-tail:]


def limit_memory() -> None:
    """At most MEMORY bytes of data per process, so that a case that allocates without bound
    fails instead of starving the machine."""
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY, MEMORY))


def run(case: Case, args, directory: str, groups: list, kill=None, limits=True) -> dict:
    """One command in ``directory``; ``kill`` = (signal, moment) sends the signal to the process
    (not its group) at that moment."""
    env = environment(directory, case.env)
    argv = [*(case.prefix if limits else []), PYTHON, "-m", "cli", *args]
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    stdout = {"full": open("/dev/full", "wb"), "close": subprocess.PIPE}.get(
        case.stdout if limits else "pipe", out
    )
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=directory,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=err,
        start_new_session=True,
        preexec_fn=limit_memory,
    )
    groups.append(proc.pid)
    sent = None
    if stdout is subprocess.PIPE:  # read up to the first line, then close the pipe like `| head -1`
        while time.monotonic() - start < case.timeout:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
            out.write(chunk)
            if b"\n" in chunk or (ready and not chunk):
                break
        proc.stdout.close()
    if kill:
        signum, moment = kill
        while proc.poll() is None and time.monotonic() - start < case.timeout:
            if moment(directory, time.monotonic() - start):
                os.kill(proc.pid, signum)
                sent = round(time.monotonic() - start, 2)
                break
            time.sleep(0.05)
    hang = False
    try:
        proc.wait(timeout=max(1, case.timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        hang = True
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    seconds = round(time.monotonic() - start, 2)
    if stdout not in (out, subprocess.PIPE):
        stdout.close()
    out.seek(0)
    err.seek(0)
    stdout_text = out.read().decode("utf-8", "replace")
    stderr_text = err.read().decode("utf-8", "replace")
    return {
        "command": command_line(case, args)
        if limits
        else command_line(Case(0, "", args, env=case.env), args),
        "rc": None if hang else proc.returncode,
        "seconds": seconds,
        "hang": hang,
        "signal": signal.Signals(kill[0]).name if kill else None,
        "sent_at": sent,
        "stdout": head_tail(stdout_text),
        "stderr": head_tail(stderr_text),
        "traceback": "Traceback" in stdout_text or "Traceback" in stderr_text,
        "stderr_lines": [line for line in stderr_text.splitlines() if line.strip()],
    }


# ---------------------------------------------------------------- files of the case


def walk(directory: str):
    """Every path below ``directory`` (links not followed), the environment folder left out."""
    for folder, dirs, files in os.walk(directory):
        if folder == directory and ENV_DIR in dirs:
            dirs.remove(ENV_DIR)
        for name in dirs + files:
            yield os.path.join(folder, name)


def manifested(directory: str) -> set:
    """The paths some ``.abcmini-files`` lists as abcmini's."""
    listed = set()
    for path in walk(directory):
        if os.path.basename(path) == ".abcmini-files" and stat.S_ISREG(os.lstat(path).st_mode):
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                for line in f:
                    if line.strip():
                        listed.add(
                            os.path.normpath(os.path.join(os.path.dirname(path), line.rstrip("\n")))
                        )
    return listed


def is_abcmini(path: str, listed: set) -> bool:
    if os.path.basename(path) in (".abcmini-files", ".abcmini.lock"):
        return True
    return any(path == p or path.startswith(p + os.sep) for p in listed)


def fingerprint(path: str):
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return ("file", digest.hexdigest(), stat.S_IMODE(info.st_mode))
    if stat.S_ISDIR(info.st_mode):
        return ("dir", stat.S_IMODE(info.st_mode))
    return ("special", stat.S_IFMT(info.st_mode))


def user_files(directory: str) -> dict:
    listed = manifested(directory)
    return {path: fingerprint(path) for path in walk(directory) if not is_abcmini(path, listed)}


def leftovers(directory: str) -> set:
    return {
        path
        for path in walk(directory)
        if os.path.basename(path).endswith(".tmp")
        or os.path.basename(path).startswith(".abcmini-write-test-")
    }


def rel(directory: str, paths) -> list[str]:
    return sorted(os.fsdecode(os.path.relpath(p, directory)) for p in paths)


# ---------------------------------------------------------------- one case


def one_line_exit_2(result: dict) -> str | None:
    if result["rc"] != 2:
        return f"exit code {result['rc']}, not 2"
    if len(result["stderr_lines"]) != 1:
        return f"{len(result['stderr_lines'])} non-empty lines on stderr, not 1"
    return None


def alive_groups(groups: list) -> list:
    """The process groups (of this case's commands) with a process still running, zombies aside."""
    alive = []
    for pgid in groups:
        listing = subprocess.run(
            ["ps", "-o", "stat=", "--sid", str(pgid)], capture_output=True, text=True
        ).stdout.split()
        if any(not state.startswith("Z") for state in listing):
            alive.append(pgid)
    return alive


def missing_outputs(directory: str, outputs: list) -> list[str]:
    return [
        pattern
        for pattern in outputs
        if not glob.glob(os.path.join(glob.escape(directory), pattern))
    ]


def execute(case: Case, keep: bool) -> dict:
    directory = tempfile.mkdtemp(prefix="case-", dir=os.path.join(WORK, "cases"))
    groups, results, mounted = [], [], None
    record = {"family": case.family, "name": case.name, "setup": "", "moment": case.moment or None}
    try:
        if case.tmpfs:
            mounted = os.path.join(directory, case.tmpfs[0])
            os.makedirs(mounted)
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={case.tmpfs[1]}", "tmpfs", mounted],
                check=True,
            )
        environment(directory, case.env)
        record["setup"] = (case.setup(directory) if case.setup else "an empty directory") + (
            f"; a tmpfs of {case.tmpfs[1]} mounted at {case.tmpfs[0]}/" if case.tmpfs else ""
        )
        before = user_files(directory)
        stale = leftovers(directory)

        results.append(run(case, case.args, directory, groups, kill=case.kill))
        if case.kill:
            again = case.rerun if case.rerun is not None else case.args
            record["still_running_at_rerun"] = alive_groups(
                groups[:1]
            )  # the killed command's children, if any
            results.append(run(case, again, directory, groups))
        elif case.recover is not None and results[0]["rc"] != 0:
            results.append(run(case, case.recover, directory, groups, limits=False))
        alive = []
        for _ in range(30):  # processes of this case still running 3 s after its commands ended
            alive = alive_groups(groups)
            if not alive:
                break
            time.sleep(0.1)

        after = user_files(directory)
        listed = manifested(directory)
        problems = {
            "traceback": [r["command"] for r in results if r["traceback"]],
            "hang": [r["command"] for r in results if r["hang"]],
            "user_changed": [
                f"{os.path.relpath(p, directory)} ({'deleted' if p not in after else 'changed'})"
                for p in before
                if after.get(p) != before[p]
            ],
            "user_claimed": [
                os.path.relpath(p, directory)
                for p in before
                if is_abcmini(p, listed)
                and os.path.basename(p) not in (".abcmini-files", ".abcmini.lock")
            ],
            "bad_input": None,
            "leftovers": rel(directory, leftovers(directory) - stale),
            "not_finished": None,
            "other": [],
        }
        first, last = results[0], results[-1]
        if case.kill:
            if (
                first["sent_at"] is None
            ):  # a timing of the probe's, not a finding: the rerun is still checked
                record["note"] = "the command ended before the signal was sent (not interrupted)"
            if last["rc"] != 0 or missing_outputs(directory, case.outputs):
                missing = missing_outputs(directory, case.outputs)
                problems["not_finished"] = f"rerun exit code {last['rc']}" + (
                    f", missing {missing}" if missing else ""
                )
            if first["signal"] == "SIGTERM" and first["sent_at"] is not None:
                stop = first["stderr_lines"]
                record["stop_message"] = stop[-1] if stop else None
                if first["rc"] not in (143, -15) or (first["rc"] == 143 and len(stop) != 1):
                    problems["other"].append(
                        f"SIGTERM: exit code {first['rc']} with {len(stop)} lines on stderr"
                    )
        elif case.expect == "bad":
            problems["bad_input"] = one_line_exit_2(first)
        elif case.expect == "any" and first["rc"] != 0:
            problems["bad_input"] = one_line_exit_2(first)
        elif case.expect == "pipe" and (
            first["rc"] not in (0, 1) or first["stderr_lines"]
        ):  # the reader left: a silent exit 1
            problems["other"].append(
                f"stdout closed: exit code {first['rc']} with {len(first['stderr_lines'])} lines on stderr"
            )
        elif case.expect == "cells":
            if first["rc"] not in (0, 1, 2) or (first["rc"] != 0 and not first["stderr_lines"]):
                problems["bad_input"] = (
                    f"exit code {first['rc']} with {len(first['stderr_lines'])} lines on stderr"
                )
        elif case.expect == "ok" and (first["rc"] != 0 or missing_outputs(directory, case.outputs)):
            problems["other"].append(
                f"expected success: exit code {first['rc']}, missing {missing_outputs(directory, case.outputs)}"
            )
        if (
            case.expect in ("any",)
            and first["rc"] == 0
            and missing_outputs(directory, case.outputs)
        ):
            problems["other"].append(
                f"exit code 0 but missing {missing_outputs(directory, case.outputs)}"
            )
        if case.recover is not None and len(results) > 1:
            if last["rc"] != 0 or missing_outputs(directory, case.outputs):
                problems["other"].append(
                    f"after the failure, {last['command']} did not finish (exit code {last['rc']}, "
                    f"missing {missing_outputs(directory, case.outputs)})"
                )
        if case.fast and first["seconds"] > case.fast:
            problems["other"].append(f"took {first['seconds']} s, over {case.fast} s")
        if case.check:
            problems["other"] += case.check(directory, results)
        if alive:
            record["orphans"] = (
                f"{len(alive)} process group(s) of this case still running after its commands"
            )
        record["results"] = results
        record["problems"] = problems
        record["failed"] = any(problems[k] for k in problems)
    finally:
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if mounted:
            if subprocess.run(["umount", mounted]).returncode:
                time.sleep(1)
                subprocess.run(["umount", "-l", mounted])
        if keep and record.get("failed"):
            record["kept"] = directory
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return record


# ---------------------------------------------------------------- fixtures

WORK = os.path.join(tempfile.gettempdir(), "abcmini-probe")
FIXTURES = os.path.join(WORK, "fixtures")
TIMES = {}  # baseline seconds of each interrupted command


def baseline(name: str, args: list, cwd: str) -> None:
    env = environment(cwd, {})
    start = time.monotonic()
    done = subprocess.run(
        [PYTHON, "-m", "cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    TIMES[name] = round(time.monotonic() - start, 2)
    if done.returncode != 0:
        sys.exit(f"fixture {name} failed ({done.returncode}): {done.stderr[-2000:]}")
    print(f"  baseline {name}: {TIMES[name]} s", flush=True)


def build_fixtures() -> None:
    """A trained tiny run, a results root holding it, and the baseline time of each command the
    interruption cases stop."""
    shutil.rmtree(FIXTURES, ignore_errors=True)
    os.makedirs(FIXTURES)
    os.makedirs(os.path.join(WORK, "mplconfig"), exist_ok=True)
    os.makedirs(os.path.join(WORK, "cases"), exist_ok=True)
    baseline("train", ["train", *TINY, "--no-wandb", "--out", "run"], FIXTURES)
    os.makedirs(os.path.join(FIXTURES, "root", "successor"))
    shutil.copytree(
        os.path.join(FIXTURES, "run"),
        os.path.join(FIXTURES, "root", "successor", "vanilla-s0"),
        symlinks=True,
    )
    baseline("train-longer", ["train", *LONGER, "--no-wandb", "--out", "run-longer"], FIXTURES)
    baseline(
        "calibrate",
        [
            "calibrate",
            "run",
            "--min-accuracy",
            "0",
            "--samples",
            "20",
            "--no-wandb",
            "--out",
            "cal/bias.pt",
        ],
        FIXTURES,
    )
    shutil.copytree(
        os.path.join(FIXTURES, "run"), os.path.join(FIXTURES, "run-eval"), symlinks=True
    )
    baseline("eval", ["eval", "run-eval", "--lengths", "3,5", "--no-wandb"], FIXTURES)
    shutil.copytree(os.path.join(FIXTURES, "root"), os.path.join(FIXTURES, "root-b"), symlinks=True)
    baseline("report", ["report", "root-b"], FIXTURES)
    baseline("dashboard", ["dashboard", "root-b"], FIXTURES)
    os.makedirs(os.path.join(FIXTURES, "repro"))
    with open(os.path.join(FIXTURES, "repro", "small.yaml"), "w") as f:
        f.write(SMALL_RECIPE)
    baseline("reproduce", [*REPRODUCE, "--methods", "vanilla"], os.path.join(FIXTURES, "repro"))
    os.makedirs(os.path.join(FIXTURES, "sweep"))
    with open(os.path.join(FIXTURES, "sweep", "sweep.yaml"), "w") as f:
        f.write(SWEEP)
    baseline("sweep", ["sweep", "sweep.yaml"], os.path.join(FIXTURES, "sweep"))
    # a checkpoint of another model: the same run trained with one more encoder layer
    baseline(
        "train-other",
        ["train", *TINY, "--enc-layers", "1", "--no-wandb", "--out", "run-other"],
        FIXTURES,
    )
    # damaged checkpoints, written with the project's torch
    damage = """
import sys, torch
good = torch.load("run/checkpoint.pt", weights_only=True)
def save(name, change):
    c = dict(good, model=dict(good["model"]))
    change(c)
    torch.save(c, name)
save("ckpt-shape.pt", lambda c: c["model"].update({"embed.weight": torch.zeros(3, 5)}))
save("ckpt-no-model.pt", lambda c: c.pop("model"))
save("ckpt-step-string.pt", lambda c: c.update(step="forty"))
save("ckpt-config-list.pt", lambda c: c.update(config=[1, 2]))
save("ckpt-format-9.pt", lambda c: c.update(format=9))
"""
    subprocess.run([PYTHON, "-c", damage], cwd=FIXTURES, env=environment(FIXTURES, {}), check=True)


# ---------------------------------------------------------------- setup helpers


def write(directory: str, name, content, mode: int | None = None) -> None:
    path = os.path.join(os.fsencode(directory), os.fsencode(name))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content.encode() if isinstance(content, str) else content)
    if mode is not None:
        os.chmod(path, mode)


def copy_run(directory: str, name="run", source="run") -> None:
    shutil.copytree(
        os.fsencode(os.path.join(FIXTURES, source)),
        os.path.join(os.fsencode(directory), os.fsencode(name)),
        symlinks=True,
    )


def copy_root(directory: str, name="root") -> None:
    shutil.copytree(os.path.join(FIXTURES, "root"), os.path.join(directory, name), symlinks=True)


def setup(description: str, *steps):
    """A setup function: each step is a callable of the directory; the description says what it made."""

    def make(directory: str) -> str:
        for step in steps:
            step(directory)
        return description

    return make


def run_copy(name="run", source="run"):
    return lambda d: copy_run(d, name, source)


def root_copy(name="root"):
    return lambda d: copy_root(d, name)


def file(name, content, mode=None):
    return lambda d: write(d, name, content, mode)


def link(target, name):
    def make(d):
        path = os.path.join(d, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)

    return make


def fifo(name):
    def make(d):
        os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
        os.mkfifo(os.path.join(d, name))

    return make


def folder(name, mode=None):
    def make(d):
        os.makedirs(os.path.join(d, name), exist_ok=True)
        if mode is not None:
            os.chmod(os.path.join(d, name), mode)

    return make


def chmod(name, mode):
    return lambda d: os.chmod(os.path.join(d, name), mode)


def edit_json(name, change):
    def make(d):
        path = os.path.join(d, name)
        with open(path) as f:
            data = json.load(f)
        change(data)
        with open(path, "w") as f:
            json.dump(data, f)

    return make


def truncate(name, keep=0.5):
    def make(d):
        path = os.path.join(d, name)
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(int(size * keep))

    return make


def fixture_file(name, target):
    return lambda d: shutil.copy(os.path.join(FIXTURES, name), os.path.join(d, target))


def after(seconds: float):
    return lambda d, elapsed: elapsed >= seconds


def when(pattern: str, delay: float = 0.0):
    """The moment a file matching ``pattern`` (a glob below the case directory) appears, plus ``delay``."""
    seen = {}

    def moment(d, elapsed):
        if "t" not in seen and glob.glob(os.path.join(glob.escape(d), pattern), recursive=True):
            seen["t"] = elapsed
        return "t" in seen and elapsed >= seen["t"] + delay

    return moment


# ---------------------------------------------------------------- checks


def counted_once(page: str):
    """The report or dashboard at ``page`` shows the root's one run once."""

    def check(d, results):
        if results[0]["rc"] != 0:
            return []
        path = os.path.join(d, page)
        if not os.path.isfile(path):
            return [f"{page} missing after exit code 0"]
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        problems = []
        if "a second test or run" in text:
            problems.append(f"{page}: a record counted twice ('a second test or run' left out)")
        seeds_column = False  # markdown tables whose third column counts seeds
        for line in text.splitlines():
            if line.startswith("| task | method | seeds |"):
                seeds_column = True
            elif not line.startswith("|"):
                seeds_column = False
            elif (
                seeds_column
                and line.startswith("| successor | vanilla |")
                and line.split("|")[3].strip() != "1"
            ):
                problems.append(
                    f"{page}: successor vanilla counted over {line.split('|')[3].strip()} seeds, not 1"
                )
        return problems

    return check


def valid_json(name):
    def check(d, results):
        path = os.path.join(d, name)
        try:
            with open(path) as f:
                json.load(f)
            return []
        except (OSError, ValueError) as error:
            return [f"{name} is not valid JSON after the failure: {error}"]

    return check


def evaluated(name, lengths=("3", "5")):
    def check(d, results):
        if results[-1]["rc"] != 0:
            return []
        try:
            with open(os.path.join(d, name)) as f:
                accuracy = json.load(f).get("accuracy", {})
        except (OSError, ValueError) as error:
            return [f"{name}: {error}"]
        return [f"{name} lacks length {n}" for n in lengths if n not in accuracy]

    return check


def names_a_path(d, results):
    """A disk-full failure's line names the file it could not write."""
    first = results[0]
    if first["rc"] == 0 or not first["stderr_lines"]:
        return []
    line = first["stderr_lines"][0]
    if "'" in line or "/" in line or re.search(r"\.(pt|json|md|html|png|yaml)\b", line):
        return []
    return [f"the error line names no path: {line!r}"]


def nothing_created(name):
    return lambda d, results: (
        [f"{name} was created"] if os.path.lexists(os.path.join(d, name)) else []
    )


# ---------------------------------------------------------------- the cases


def family_1() -> list[Case]:
    cases = []
    signals = [signal.SIGKILL, signal.SIGTERM]
    train = ["train", *LONGER, "--no-wandb", "--out", "run"]
    t = TIMES["train-longer"]
    for sig in signals:
        for moment, words in [
            (after(0.15 * t), f"at {0.15 * t:.1f} s (15% of a full run: starting up)"),
            (when("run/.abcmini.lock"), "when run/.abcmini.lock appears"),
            (when("run/checkpoint.pt"), "when the first checkpoint.pt appears"),
            (after(0.7 * t), f"at {0.7 * t:.1f} s (70%)"),
        ]:
            cases.append(
                Case(
                    1,
                    f"train {sig.name} {words}",
                    train,
                    kill=(sig, moment),
                    moment=words,
                    rerun=train + ["--continue"],
                    outputs=["run/eval.json"],
                )
            )
    cases.append(
        Case(
            1,
            "train SIGINT at 55%",
            train,
            kill=(signal.SIGINT, after(0.55 * t)),
            moment=f"at {0.55 * t:.1f} s",
            rerun=train + ["--continue"],
            outputs=["run/eval.json"],
        )
    )
    wandb_train = ["train", *LONGER, "--wandb", "--out", "run"]
    for sig in signals:
        cases.append(
            Case(
                1,
                f"train --wandb (offline) {sig.name} when wandb-id appears",
                wandb_train,
                kill=(sig, when("run/wandb-id", 0.5)),
                moment="0.5 s after run/wandb-id appears",
                rerun=wandb_train + ["--continue"],
                outputs=["run/eval.json"],
            )
        )
    abc = [
        "train",
        *TINY,
        "--method",
        "abc",
        "--samples",
        "20",
        "--min-accuracy",
        "0",
        "--no-wandb",
        "--out",
        "abc",
    ]
    cases.append(
        Case(
            1,
            "train --method abc SIGKILL while its source trains",
            abc,
            kill=(signal.SIGKILL, when("**/checkpoint.pt")),
            moment="when the source's first checkpoint.pt appears",
            rerun=abc + ["--continue"],
            outputs=["abc/eval.json"],
            timeout=240,
        )
    )
    cases.append(
        Case(
            1,
            "train --method abc SIGTERM after calibration",
            abc,
            kill=(signal.SIGTERM, when("**/abc_bias.pt", 0.3)),
            moment="0.3 s after abc_bias.pt appears",
            rerun=abc + ["--continue"],
            outputs=["abc/eval.json"],
            timeout=240,
        )
    )
    calibrate = [
        "calibrate",
        "run",
        "--min-accuracy",
        "0",
        "--samples",
        "20",
        "--no-wandb",
        "--out",
        "cal/bias.pt",
    ]
    heatmaps = [
        "cal/bias.pt",
        "cal/abc_attention_cross.png",
        "cal/abc_attention_self.png",
        "cal/abc_bias_cross.png",
        "cal/abc_bias_self.png",
    ]
    for sig, pattern in (
        (signal.SIGKILL, "cal/bias.pt"),
        (signal.SIGTERM, "cal/abc_attention_cross.png"),
    ):
        cases.append(
            Case(
                1,
                f"calibrate {sig.name} when {pattern} appears",
                calibrate,
                kill=(sig, when(pattern)),
                moment=f"when {pattern} appears",
                outputs=heatmaps,
                setup=setup("a trained tiny run in run/", run_copy()),
            )
        )
    simple = [
        ("calibrate", calibrate, heatmaps, None, [0.3, 0.9]),
        (
            "eval",
            ["eval", "run", "--lengths", "3,5", "--no-wandb"],
            ["run/eval.json"],
            evaluated("run/eval.json"),
            [0.3, 0.8],
        ),
        (
            "report",
            ["report", "root"],
            ["root/report.md"],
            counted_once("root/report.md"),
            [0.5, 0.85],
        ),
        (
            "dashboard",
            ["dashboard", "root"],
            ["root/dashboard.html"],
            counted_once("root/dashboard.html"),
            [0.5, 0.85],
        ),
    ]
    for name, args, outputs, check, fractions in simple:
        make = (
            setup("a trained tiny run in run/", run_copy())
            if name in ("calibrate", "eval")
            else setup("a results root root/ holding one trained run", root_copy())
        )
        for sig in signals:
            for fraction in fractions:
                seconds = fraction * TIMES[name]
                cases.append(
                    Case(
                        1,
                        f"{name} {sig.name} at {int(fraction * 100)}%",
                        args,
                        setup=make,
                        kill=(sig, after(seconds)),
                        moment=f"at {seconds:.1f} s ({int(fraction * 100)}% of a full run)",
                        outputs=outputs,
                        check=check,
                    )
                )
    recipe = setup("small.yaml: a tiny recipe", file("small.yaml", SMALL_RECIPE))
    vanilla = [*REPRODUCE, "--methods", "vanilla"]
    for sig in signals:
        for fraction in (0.5,):
            seconds = fraction * TIMES["reproduce"]
            cases.append(
                Case(
                    1,
                    f"reproduce (vanilla) {sig.name} at {int(fraction * 100)}%",
                    vanilla,
                    setup=recipe,
                    kill=(sig, after(seconds)),
                    moment=f"at {seconds:.1f} s",
                    timeout=240,
                    outputs=[
                        "root/report.md",
                        "root/dashboard.html",
                        "root/successor/vanilla-s0/eval.json",
                    ],
                )
            )
    both = [*REPRODUCE, "--methods", "vanilla,abc"]
    cases.append(
        Case(
            1,
            "reproduce (vanilla,abc) SIGKILL while the ABC source trains",
            both,
            setup=recipe,
            kill=(signal.SIGKILL, when("root/successor/vanilla-s0-*/checkpoint.pt")),
            timeout=300,
            moment="when the ABC source's first checkpoint.pt appears",
            outputs=[
                "root/report.md",
                "root/successor/vanilla-s0/eval.json",
                "root/successor/abc-s0/eval.json",
            ],
        )
    )
    cases.append(
        Case(
            1,
            "reproduce (vanilla,abc) SIGTERM after calibration",
            both,
            setup=recipe,
            kill=(signal.SIGTERM, when("root/successor/abc-s0/abc_bias.pt", 0.3)),
            timeout=300,
            moment="0.3 s after abc-s0/abc_bias.pt appears",
            outputs=[
                "root/report.md",
                "root/successor/vanilla-s0/eval.json",
                "root/successor/abc-s0/eval.json",
            ],
        )
    )
    sweep = setup("sweep.yaml: a two-run grid of tiny trainings", file("sweep.yaml", SWEEP))
    for sig in signals:
        for fraction in (0.4,):
            seconds = fraction * TIMES["sweep"]
            cases.append(
                Case(
                    1,
                    f"sweep {sig.name} at {int(fraction * 100)}%",
                    ["sweep", "sweep.yaml"],
                    setup=sweep,
                    kill=(sig, after(seconds)),
                    moment=f"at {seconds:.1f} s",
                    timeout=240,
                    outputs=[
                        "runs/quick/successor/vanilla-s0-*/eval.json",
                        "runs/quick/successor/vanilla+w=1-s0-*/eval.json",
                    ],
                )
            )
    return cases


def fsize(n):
    return ["prlimit", f"--fsize={n}", "--"]


def family_2() -> list[Case]:
    cases = []
    train = ["train", *TINY, "--no-wandb", "--out", "run"]
    for n in (1024, 4096, 65536, 150000):
        cases.append(
            Case(
                2,
                f"train, file size limit {n} bytes",
                train,
                prefix=fsize(n),
                check=names_a_path,
                recover=train + ["--continue"] if n in (4096, 150000) else None,
                outputs=["run/eval.json"],
            )
        )
    cases.append(
        Case(
            2,
            "train --wandb (offline), file size limit 64 KiB",
            ["train", *TINY, "--wandb", "--out", "run"],
            prefix=fsize(65536),
            check=names_a_path,
        )
    )
    cases.append(
        Case(
            2,
            "train --continue of a finished run to more steps, file size limit 100 KB",
            ["train", *LONGER, "--no-wandb", "--out", "run", "--continue"],
            prefix=fsize(100000),
            setup=setup("a trained tiny run (40 steps) in run/", run_copy()),
            check=lambda d, r: names_a_path(d, r) + valid_json("run/eval.json")(d, r),
        )
    )
    cases.append(
        Case(
            2,
            "train into a full tmpfs (2 MiB, 1.9 MiB of it the user's file)",
            ["train", *TINY, "--no-wandb", "--out", "disk/run"],
            tmpfs=("disk", "2m"),
            setup=setup(
                "disk/user-data.bin: 1.9 MiB of the user's",
                file("disk/user-data.bin", b"u" * 1990000),
            ),
            check=names_a_path,
        )
    )
    cases.append(
        Case(
            2,
            "train into a 300 KiB tmpfs (room for one checkpoint, not two)",
            ["train", *TINY, "--no-wandb", "--out", "disk/run"],
            tmpfs=("disk", "300k"),
            check=names_a_path,
        )
    )
    calibrate = [
        "calibrate",
        "run",
        "--min-accuracy",
        "0",
        "--samples",
        "20",
        "--no-wandb",
        "--out",
        "cal/bias.pt",
    ]
    have_run = setup("a trained tiny run in run/", run_copy())
    for n in (2048, 20000):
        cases.append(
            Case(
                2,
                f"calibrate, file size limit {n} bytes",
                calibrate,
                prefix=fsize(n),
                setup=have_run,
                check=names_a_path,
            )
        )
    cases.append(
        Case(
            2,
            "calibrate into a 64 KiB tmpfs",
            [*calibrate[:-1], "disk/bias.pt"],
            tmpfs=("disk", "64k"),
            setup=have_run,
            check=names_a_path,
        )
    )
    cases.append(
        Case(
            2,
            "eval, file size limit 512 bytes",
            ["eval", "run", "--lengths", "3,5", "--no-wandb"],
            prefix=fsize(512),
            setup=have_run,
            check=lambda d, r: names_a_path(d, r) + valid_json("run/eval.json")(d, r),
        )
    )
    have_root = setup("a results root root/ holding one trained run", root_copy())
    cases.append(
        Case(
            2,
            "report, file size limit 2 KiB",
            ["report", "root"],
            prefix=fsize(2048),
            setup=have_root,
            check=names_a_path,
        )
    )
    cases.append(
        Case(
            2,
            "report into a 16 KiB tmpfs",
            ["report", "root", "--out", "disk/report.md"],
            tmpfs=("disk", "16k"),
            setup=have_root,
            check=names_a_path,
        )
    )
    cases.append(
        Case(
            2,
            "dashboard, file size limit 100 KB",
            ["dashboard", "root"],
            prefix=fsize(100000),
            setup=have_root,
            check=names_a_path,
        )
    )
    cases.append(
        Case(
            2,
            "dashboard into a 512 KiB tmpfs",
            ["dashboard", "root", "--out", "disk/dashboard.html"],
            tmpfs=("disk", "512k"),
            setup=have_root,
            check=names_a_path,
        )
    )
    recipe = setup("small.yaml: a tiny recipe", file("small.yaml", SMALL_RECIPE))
    cases.append(
        Case(
            2,
            "reproduce (vanilla), file size limit 100 KB",
            [*REPRODUCE, "--methods", "vanilla"],
            expect="cells",
            prefix=fsize(100000),
            setup=recipe,
            timeout=240,
        )
    )
    cases.append(
        Case(
            2,
            "reproduce (vanilla) into a 300 KiB tmpfs",
            [*REPRODUCE[:-1], "disk/root", "--methods", "vanilla"],
            expect="cells",
            tmpfs=("disk", "300k"),
            setup=recipe,
            timeout=240,
        )
    )
    cases.append(
        Case(
            2,
            "sweep, file size limit 100 KB",
            ["sweep", "sweep.yaml"],
            expect="cells",
            prefix=fsize(100000),
            setup=setup("sweep.yaml: a two-run grid of tiny trainings", file("sweep.yaml", SWEEP)),
            timeout=240,
        )
    )
    return cases


def family_3() -> list[Case]:
    cases = []
    mine = b"the user's own file\n"
    calibrate = ["calibrate", "run", "--min-accuracy", "0", "--samples", "20", "--no-wandb"]
    cases.append(
        Case(
            3,
            "calibrate --out cal/bias.pt beside the user's cal/abc_bias_cross.png",
            [*calibrate, "--out", "cal/bias.pt"],
            expect="any",
            setup=setup(
                "a trained run in run/; cal/abc_bias_cross.png is the user's",
                run_copy(),
                file("cal/abc_bias_cross.png", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "calibrate into the run, the user's run/abc_attention_self.png there",
            calibrate,
            expect="any",
            setup=setup(
                "a trained run in run/ and the user's run/abc_attention_self.png",
                run_copy(),
                file("run/abc_attention_self.png", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "calibrate --out the user's existing bias.pt",
            [*calibrate, "--out", "bias.pt"],
            expect="bad",
            setup=setup(
                "a trained run in run/ and the user's bias.pt", run_copy(), file("bias.pt", mine)
            ),
        )
    )
    cases.append(
        Case(
            3,
            "calibrate --out an existing directory",
            [*calibrate, "--out", "somedir"],
            expect="bad",
            setup=setup(
                "a trained run in run/ and a directory somedir/ with the user's notes",
                run_copy(),
                file("somedir/notes.txt", mine),
            ),
        )
    )
    have_root = root_copy()
    cases.append(
        Case(
            3,
            "report over a root holding the user's report.md",
            ["report", "root"],
            expect="any",
            setup=setup(
                "a results root; root/report.md is the user's",
                have_root,
                file("root/report.md", "# my notes\n"),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "report --out the user's existing notes.md",
            ["report", "root", "--out", "notes.md"],
            expect="any",
            setup=setup(
                "a results root; notes.md is the user's",
                have_root,
                file("notes.md", "# my notes\n"),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "report over a root holding the user's accuracy_successor.png",
            ["report", "root"],
            expect="any",
            setup=setup(
                "a results root; root/accuracy_successor.png is the user's",
                have_root,
                file("root/accuracy_successor.png", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "report where root/report.md is the user's link to notes.md",
            ["report", "root"],
            expect="any",
            setup=setup(
                "a results root; root/report.md -> ../notes.md (the user's link and file)",
                have_root,
                file("notes.md", "# my notes\n"),
                link("../notes.md", "root/report.md"),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "report over a root holding the user's report.md.backup01.tmp",
            ["report", "root"],
            expect="ok",
            outputs=["root/report.md"],
            setup=setup(
                "a results root; root/report.md.backup01.tmp is the user's",
                have_root,
                file("root/report.md.backup01.tmp", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "report --readme the user's notes.md (no generated blocks)",
            ["report", "root", "--readme", "notes.md"],
            expect="any",
            setup=setup(
                "a results root; notes.md is the user's",
                have_root,
                file("notes.md", "# my notes\n"),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "report --out an existing directory",
            ["report", "root", "--out", "somedir"],
            expect="bad",
            setup=setup(
                "a results root; somedir/ holds the user's notes",
                have_root,
                file("somedir/notes.txt", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "dashboard over a root holding the user's dashboard.html",
            ["dashboard", "root"],
            expect="any",
            setup=setup(
                "a results root; root/dashboard.html is the user's",
                have_root,
                file("root/dashboard.html", "<p>mine</p>\n"),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "dashboard --out the user's page.html",
            ["dashboard", "root", "--out", "page.html"],
            expect="any",
            setup=setup(
                "a results root; page.html is the user's",
                have_root,
                file("page.html", "<p>mine</p>\n"),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "dashboard --out an existing directory",
            ["dashboard", "root", "--out", "somedir"],
            expect="bad",
            setup=setup(
                "a results root; somedir/ holds the user's notes",
                have_root,
                file("somedir/notes.txt", mine),
            ),
        )
    )
    train = ["train", *TINY, "--no-wandb", "--out", "run"]
    cases.append(
        Case(
            3,
            "train --out a folder holding the user's eval.json",
            train,
            expect="any",
            setup=setup(
                "run/eval.json is the user's (no run there)", file("run/eval.json", '{"mine": 1}\n')
            ),
        )
    )
    cases.append(
        Case(
            3,
            "train --out a folder holding the user's checkpoint.pt",
            train,
            expect="any",
            setup=setup(
                "run/checkpoint.pt is the user's (no run there)", file("run/checkpoint.pt", mine)
            ),
        )
    )
    cases.append(
        Case(
            3,
            "train --out a folder holding the user's experiment.json",
            train,
            expect="any",
            setup=setup(
                "run/experiment.json is the user's (no run there)",
                file("run/experiment.json", '{"mine": 1}\n'),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "train --out a folder holding the user's notes",
            train,
            expect="ok",
            outputs=["run/eval.json"],
            setup=setup("run/notes.txt is the user's", file("run/notes.txt", mine)),
        )
    )
    cases.append(
        Case(
            3,
            "train --overwrite a run holding the user's notes and plots",
            [*train, "--overwrite"],
            expect="ok",
            outputs=["run/eval.json"],
            setup=setup(
                "a trained run in run/ plus the user's run/notes.txt and run/plots/a.png",
                run_copy(),
                file("run/notes.txt", mine),
                file("run/plots/a.png", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "train --out an existing regular file",
            ["train", *TINY, "--no-wandb", "--out", "notes.txt"],
            expect="bad",
            setup=setup("notes.txt is the user's file", file("notes.txt", mine)),
        )
    )
    cases.append(
        Case(
            3,
            "train --continue a run holding the user's checkpoint.pt.mybackup.tmp",
            ["train", *LONGER, "--no-wandb", "--out", "run", "--continue"],
            expect="ok",
            outputs=["run/eval.json"],
            setup=setup(
                "a trained run in run/ plus the user's run/checkpoint.pt.mybackup.tmp",
                run_copy(),
                file("run/checkpoint.pt.mybackup.tmp", mine),
            ),
        )
    )
    cases.append(
        Case(
            3,
            "reproduce into a root holding the user's report.md",
            [*REPRODUCE, "--methods", "vanilla"],
            expect="any",
            timeout=240,
            setup=setup(
                "small.yaml; root/report.md is the user's",
                file("small.yaml", SMALL_RECIPE),
                file("root/report.md", "# my notes\n"),
            ),
        )
    )
    return cases


def family_4() -> list[Case]:
    layouts = [
        ("`ln -s . self` in the root", [link(".", "root/self")]),
        ("two links to `.` in the root", [link(".", "root/a"), link(".", "root/b")]),
        (
            "a link back up to the root inside the run",
            [link("../..", "root/successor/vanilla-s0/up")],
        ),
        ("a second link to the run", [link("successor/vanilla-s0", "root/dup")]),
        (
            "`ln -s . self` in the run and `ln -s .. parent` in successor/",
            [link(".", "root/successor/vanilla-s0/self"), link("..", "root/successor/parent")],
        ),
        ("a dangling link loop a -> b -> a", [link("b", "root/a"), link("a", "root/b")]),
        ("x/eval.json a dangling link", [link("nowhere.json", "root/x/eval.json")]),
        ("x/eval.json a FIFO", [fifo("root/x/eval.json")]),
        ("a FIFO named pipe in the root", [fifo("root/pipe")]),
        ("x/eval.json a link to /dev/zero", [link("/dev/zero", "root/x/eval.json")]),
        ("x/eval.json a link to /dev/urandom", [link("/dev/urandom", "root/x/eval.json")]),
        (
            "x/eval.json a character device (null)",
            [
                lambda d: (
                    os.makedirs(os.path.join(d, "root/x")),
                    os.mknod(
                        os.path.join(d, "root/x/eval.json"), 0o666 | stat.S_IFCHR, os.makedev(1, 3)
                    ),
                )
            ],
        ),
        (
            "x/eval.json unreadable (mode 000, run without CAP_DAC_OVERRIDE)",
            [file("root/x/eval.json", "{}", 0o000)],
        ),
        (
            "a folder x/ unreadable (mode 000, run without CAP_DAC_OVERRIDE)",
            [file("root/x/notes.txt", "mine"), chmod("root/x", 0o000)],
        ),
        ("x/eval.json a directory", [folder("root/x/eval.json")]),
    ]
    cases = []
    for command, page in (("report", "root/report.md"), ("dashboard", "root/dashboard.html")):
        for words, steps in layouts:
            drop = DROP_CAPS if "unreadable" in words else []
            cases.append(
                Case(
                    4,
                    f"{command}: {words}",
                    [command, "root"],
                    expect="any",
                    prefix=drop,
                    setup=setup(
                        f"a results root root/ holding one trained run; {words}",
                        root_copy(),
                        *steps,
                    ),
                    check=counted_once(page),
                    outputs=[page],
                )
            )
        cases.append(
            Case(
                4,
                f"{command} of a root that is a link to itself",
                [command, "loop"],
                expect="bad",
                setup=setup("loop -> loop", link("loop", "loop")),
            )
        )
        cases.append(
            Case(
                4,
                f"{command} of a FIFO",
                [command, "pipe"],
                expect="bad",
                setup=setup("pipe: a FIFO", fifo("pipe")),
            )
        )
        cases.append(Case(4, f"{command} of /dev/zero", [command, "/dev/zero"], expect="bad"))
    return cases


def alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\nsteps: 40\n"


def family_5() -> list[Case]:
    rng = random.Random(0)
    recipes = [
        (
            "25 MB of comments",
            lambda: "base: quick\nsteps: 40\n" + ("# " + "x" * 98 + "\n") * 250000,
        ),
        ("25 MB of lengths", lambda: "base: quick\nlengths: [" + "3, " * 8000000 + "3]\n"),
        ("YAML alias bomb (billion laughs)", alias_bomb),
        ("a small alias", lambda: "base: quick\nsteps: &s 40\neval_every: *s\n"),
        (
            "lengths: a million items (flow list)",
            lambda: "base: quick\nlengths: [" + ", ".join(["3"] * 1000000) + "]\n",
        ),
        (
            "lengths: a million items (block list)",
            lambda: "base: quick\nlengths:\n" + "- 3\n" * 1000000,
        ),
        (
            "lengths: 1001 items",
            lambda: "base: quick\nlengths: [" + ", ".join(["3"] * 1001) + "]\n",
        ),
        ("steps: a string", lambda: "base: quick\nsteps: forty\n"),
        ("steps: a list", lambda: "base: quick\nsteps: [40]\n"),
        ("steps: true", lambda: "base: quick\nsteps: true\n"),
        ("steps: -5", lambda: "base: quick\nsteps: -5\n"),
        ("steps: 10**30", lambda: "base: quick\nsteps: 1000000000000000000000000000000\n"),
        ("lr: .nan", lambda: "base: quick\nlr: .nan\n"),
        ("lr: -.inf", lambda: "base: quick\nlr: -.inf\n"),
        ("pad_width: 0", lambda: "base: quick\npad_width: 0\n"),
        ("lengths: a number", lambda: "base: quick\nlengths: 5\n"),
        ("lengths: [3, x]", lambda: "base: quick\nlengths: [3, x]\n"),
        ("lengths: [-3]", lambda: "base: quick\nlengths: [-3]\n"),
        ("lengths: []", lambda: "base: quick\nlengths: []\n"),
        ("calibration: a number", lambda: "base: quick\ncalibration: 5\n"),
        ("calibration: samples a string", lambda: "base: quick\ncalibration: {samples: many}\n"),
        ("calibration: an unknown key", lambda: "base: quick\ncalibration: {sampels: 20}\n"),
        ("an unknown key", lambda: "base: quick\nstepz: 40\n"),
        ("base: a number", lambda: "base: 5\n"),
        ("base: a list", lambda: "base: [quick]\n"),
        ("base: a missing file", lambda: "base: missing.yaml\n"),
        ("base: the file itself", lambda: "base: recipe.yaml\n"),
        ("why: a list", lambda: "base: quick\nwhy: [x]\n"),
        ("name: a mapping", lambda: "base: quick\nname: {a: 1}\n"),
        ("an empty file", lambda: ""),
        ("only a comment", lambda: "# nothing\n"),
        ("a top-level list", lambda: "- base\n- quick\n"),
        ("a top-level string", lambda: "quick\n"),
        ("unclosed flow list", lambda: "base: quick\nlengths: [3, 5\n"),
        ("tabs for indentation", lambda: "base: quick\ncalibration:\n\tsamples: 20\n"),
        ("nesting 30000 deep", lambda: "base: quick\nlengths: " + "[" * 30000 + "]" * 30000 + "\n"),
        (
            "a python tag",
            lambda: "base: quick\nsteps: !!python/object/apply:os.system ['touch pwned']\n",
        ),
        ("binary junk", lambda: bytes(rng.getrandbits(8) for _ in range(4096))),
        ("non-UTF-8 bytes", lambda: b"base: quick\nsteps: \xff\xfe\n"),
        ("a NUL byte", lambda: b"base: quick\x00\nsteps: 40\n"),
    ]
    cases = []
    for words, content in recipes:
        text = content()
        make = setup(f"recipe.yaml: {words}", file("recipe.yaml", text))
        cases.append(
            Case(
                5,
                f"recipe: {words}",
                ["recipe", "recipe.yaml"],
                setup=make,
                fast=5.0,
                timeout=120 if "nesting" in words else 30,
                check=nothing_created("pwned") if "python" in words else None,
                expect="any" if words == "a small alias" else "bad",
            )
        )
    for words in ("steps: -5", "pad_width: 0", "lengths: [-3]", "lengths: []", "an empty file"):
        text = dict(recipes)[words]()
        cases.append(
            Case(
                5,
                f"train --recipe ({words}) --dry-run",
                ["train", "--recipe", "recipe.yaml", "--no-wandb", "--dry-run"],
                setup=setup(f"recipe.yaml: {words}", file("recipe.yaml", text)),
                fast=5.0,
                timeout=30,
            )
        )
    cases.append(
        Case(
            5,
            "recipe: a base: cycle a.yaml <-> b.yaml",
            ["recipe", "a.yaml"],
            fast=5.0,
            setup=setup(
                "a.yaml: base: b.yaml; b.yaml: base: a.yaml",
                file("a.yaml", "base: b.yaml\n"),
                file("b.yaml", "base: a.yaml\n"),
            ),
        )
    )
    cases.append(
        Case(
            5,
            "recipe: a directory",
            ["recipe", "dir.yaml"],
            fast=5.0,
            setup=setup("dir.yaml/: a directory", folder("dir.yaml")),
        )
    )
    cases.append(
        Case(
            5,
            "recipe: a FIFO",
            ["recipe", "pipe.yaml"],
            fast=5.0,
            setup=setup("pipe.yaml: a FIFO", fifo("pipe.yaml")),
        )
    )
    cases.append(Case(5, "recipe: /dev/zero", ["recipe", "/dev/zero"], fast=5.0))
    cases.append(
        Case(
            5,
            "recipe: a link to /dev/zero named .yaml",
            ["recipe", "zero.yaml"],
            fast=5.0,
            setup=setup("zero.yaml -> /dev/zero", link("/dev/zero", "zero.yaml")),
        )
    )
    cases.append(Case(5, "recipe: a missing file", ["recipe", "missing.yaml"], fast=5.0))
    cases.append(
        Case(
            5,
            "recipe: unreadable (mode 000, no CAP_DAC_OVERRIDE)",
            ["recipe", "recipe.yaml"],
            fast=5.0,
            prefix=DROP_CAPS,
            setup=setup("recipe.yaml: mode 000", file("recipe.yaml", "base: quick\n", 0o000)),
        )
    )
    big = setup(
        "recipe.yaml: 25 MB of comments",
        file("recipe.yaml", "base: quick\nsteps: 40\n" + ("# " + "x" * 98 + "\n") * 250000),
    )
    bomb = setup("recipe.yaml: a YAML alias bomb", file("recipe.yaml", alias_bomb()))
    junk = setup("recipe.yaml: an unknown key", file("recipe.yaml", "base: quick\nstepz: 40\n"))
    for words, make in (("25 MB", big), ("alias bomb", bomb), ("unknown key", junk)):
        cases.append(
            Case(
                5,
                f"train --recipe ({words}) --dry-run",
                ["train", "--recipe", "recipe.yaml", "--no-wandb", "--dry-run"],
                setup=make,
                fast=5.0,
            )
        )
        cases.append(
            Case(
                5,
                f"reproduce --recipe ({words}) --dry-run",
                ["reproduce", "--recipe", "recipe.yaml", "--no-wandb", "--dry-run"],
                setup=make,
                fast=5.0,
            )
        )
        cases.append(
            Case(
                5,
                f"calibrate --recipe ({words})",
                ["calibrate", "run", "--recipe", "recipe.yaml", "--no-wandb"],
                setup=lambda d, make=make: (copy_run(d), make(d))[1] + "; a trained run in run/",
                fast=5.0,
            )
        )
    sweeps = [
        ("a YAML alias bomb", alias_bomb().replace("steps: 40", "program: cli.py\nmethod: grid")),
        ("25 MB of comments", SWEEP + ("# " + "x" * 98 + "\n") * 250000),
        ("an empty file", ""),
        ("binary junk", bytes(rng.getrandbits(8) for _ in range(4096))),
        (
            "a grid of a million values",
            SWEEP.replace(
                "seed: {value: 0}", "seed: {values: [" + ", ".join(map(str, range(1000000))) + "]}"
            ),
        ),
        ("program: another script", SWEEP.replace("program: cli.py", "program: evil.py")),
        ("method: random without --count", SWEEP.replace("method: grid", "method: random")),
        (
            "a parameter abcmini does not take",
            SWEEP.replace("seed: {value: 0}", "seed: {value: 0}\n  colour: {value: red}"),
        ),
        ("steps: a string", SWEEP.replace("steps: {value: 20}", "steps: {value: twenty}")),
        ("a top-level list", "- program\n- cli.py\n"),
    ]
    valid = ("25 MB of comments", "program: another script")  # valid sweeps: they may run
    for words, text in sweeps:
        cases.append(
            Case(
                5,
                f"sweep: {words}",
                ["sweep", "sweep.yaml"],
                setup=setup(f"sweep.yaml: {words}", file("sweep.yaml", text)),
                expect="any" if words in valid else "bad",
                timeout=120 if words in valid else 30,
                fast=None
                if words in valid
                else 5.0
                if words not in ("a parameter abcmini does not take", "steps: a string")
                else 30.0,
            )
        )
    cases.append(
        Case(
            5,
            "sweep: a directory",
            ["sweep", "sweep.yaml"],
            fast=5.0,
            setup=setup("sweep.yaml/: a directory", folder("sweep.yaml")),
        )
    )
    cases.append(
        Case(
            5,
            "sweep: a FIFO",
            ["sweep", "sweep.yaml"],
            fast=5.0,
            timeout=30,
            setup=setup("sweep.yaml: a FIFO", fifo("sweep.yaml")),
        )
    )
    cases.append(Case(5, "sweep: /dev/zero", ["sweep", "/dev/zero"], fast=5.0))
    return cases


def corrupt_run_files(run: str) -> list:
    """Ways a run's files get damaged: (words, setup step), for the run folder ``run``."""

    def replace_by_folder(d):
        os.remove(os.path.join(d, run, "checkpoint.pt"))
        os.mkdir(os.path.join(d, run, "checkpoint.pt"))

    return [
        ("checkpoint.pt truncated to half", truncate(f"{run}/checkpoint.pt", 0.5)),
        ("checkpoint.pt empty", truncate(f"{run}/checkpoint.pt", 0)),
        ("checkpoint.pt text", file(f"{run}/checkpoint.pt", "not a checkpoint\n")),
        (
            "checkpoint.pt random bytes",
            file(
                f"{run}/checkpoint.pt", bytes(random.Random(1).getrandbits(8) for _ in range(50000))
            ),
        ),
        ("checkpoint.pt a directory", replace_by_folder),
        (
            "checkpoint.pt of another model (one more encoder layer) than experiment.json describes",
            fixture_file("run-other/checkpoint.pt", f"{run}/checkpoint.pt"),
        ),
        (
            "checkpoint.pt with a weight of the wrong shape",
            fixture_file("ckpt-shape.pt", f"{run}/checkpoint.pt"),
        ),
        (
            "checkpoint.pt without its model",
            fixture_file("ckpt-no-model.pt", f"{run}/checkpoint.pt"),
        ),
        (
            "checkpoint.pt step a string",
            fixture_file("ckpt-step-string.pt", f"{run}/checkpoint.pt"),
        ),
        (
            "checkpoint.pt config a list",
            fixture_file("ckpt-config-list.pt", f"{run}/checkpoint.pt"),
        ),
        (
            "checkpoint.pt of a future format (9)",
            fixture_file("ckpt-format-9.pt", f"{run}/checkpoint.pt"),
        ),
        ("eval.json truncated", truncate(f"{run}/eval.json", 0.5)),
        ("eval.json not JSON", file(f"{run}/eval.json", "not json\n")),
        ("eval.json a list", file(f"{run}/eval.json", "[]\n")),
        (
            "eval.json accuracy a list",
            edit_json(f"{run}/eval.json", lambda j: j.update(accuracy=[1, 2])),
        ),
        ("eval.json seed a string", edit_json(f"{run}/eval.json", lambda j: j.update(seed="zero"))),
        ("experiment.json truncated", truncate(f"{run}/experiment.json", 0.5)),
        ("experiment.json not JSON", file(f"{run}/experiment.json", "not json\n")),
        ("experiment.json a list", file(f"{run}/experiment.json", "[]\n")),
        (
            "experiment.json run a string",
            edit_json(f"{run}/experiment.json", lambda j: j.update(run="x")),
        ),
        (
            "experiment.json without run",
            edit_json(f"{run}/experiment.json", lambda j: j.pop("run")),
        ),
        (
            "experiment.json pad_width a string",
            edit_json(f"{run}/experiment.json", lambda j: j["run"].update(pad_width="x")),
        ),
        (
            "experiment.json lengths [-1]",
            edit_json(f"{run}/experiment.json", lambda j: j.update(lengths=[-1])),
        ),
        ("experiment.json missing", lambda d: os.remove(os.path.join(d, run, "experiment.json"))),
    ]


def family_6() -> list[Case]:
    cases = []
    base = ["train", *TINY, "--no-wandb", "--out", "run"]
    bad_train = [
        ["--task", "bogus"],
        ["--method", "bogus"],
        ["--method", "+w=-1"],
        ["--method", "+T=0"],
        ["--steps", "-5"],
        ["--steps", "99999999999999999999999"],
        ["--steps", "abc"],
        ["--lengths", "6,,x"],
        ["--lengths", ""],
        ["--lengths", "-3"],
        ["--lengths", "3,100000000000"],
        ["--pad-width", "-1"],
        ["--pad-width", "0"],
        ["--pad-width", "1000000000"],
        ["--batch-size", "0"],
        ["--batch-size", "-4"],
        ["--lr", "nan"],
        ["--lr", "-1"],
        ["--threads", "0"],
        ["--valid-size", "-1"],
        ["--eval-every", "0"],
        ["--window", "-1", "--method", "+w=1"],
        ["--period", "-2"],
        ["--stop-at", "5"],
        ["--device", "tpu"],
        ["--device", "cuda"],
        ["--recipe", "nonexistent"],
        ["--preset", "huge"],
        ["--arch", "bogus"],
        ["--test-frame", "bogus"],
        ["--calibration", "bogus", "--method", "abc"],
        ["--rules", "bogus", "--method", "abc"],
        ["--kappa-cross", "nan", "--method", "abc"],
        ["--samples", "-1", "--method", "abc"],
        ["--source", "notes.txt", "--method", "abc"],
        ["--bias", "missing.pt"],
        ["--resume"],
        ["--resume", "--overwrite"],
        ["--out", ""],
        ["--foo"],
        ["--seed", "1.5"],
        ["--warmup", "-10"],
        ["--frame-spread", "-1"],
        ["--enc-layers", "-1"],
        ["--test-seed", "x"],
    ]
    for extra in bad_train:
        make = (
            setup("notes.txt: the user's file", file("notes.txt", "mine\n"))
            if "notes.txt" in extra
            else None
        )
        cases.append(
            Case(6, "train " + " ".join(shown(a) for a in extra), [*base, *extra], setup=make)
        )
    cases.append(
        Case(
            6,
            "train --bias a text file",
            [*base, "--bias", "bias.pt"],
            setup=setup("bias.pt: text", file("bias.pt", "not a bias\n")),
        )
    )
    cases.append(Case(6, "abcmini bogus-command", ["bogus-command"]))
    repro = ["reproduce", "--no-wandb", "--out", "root"]
    for extra in (
        ["--quick", "--tasks", "addition"],
        ["--quick", "--methods", "abc"],
        ["--quick", "--seeds", "1"],
        ["--tasks", "bogus", "--dry-run"],
        ["--methods", "bogus", "--dry-run"],
        ["--seeds", "a,b", "--dry-run"],
        ["--seeds", "", "--dry-run"],
        ["--workers", "0", "--dry-run"],
        ["--recipe", "missing.yaml", "--dry-run"],
        ["--tasks", "successor,,addition", "--dry-run"],
    ):
        cases.append(Case(6, "reproduce " + " ".join(shown(a) for a in extra), [*repro, *extra]))
    have_run = run_copy()
    evaluate = ["eval", "run", "--lengths", "3,5", "--no-wandb"]
    calibrate = [
        "calibrate",
        "run",
        "--min-accuracy",
        "0",
        "--samples",
        "20",
        "--no-wandb",
        "--out",
        "cal/bias.pt",
    ]
    for words, step in corrupt_run_files("run"):
        make = setup(f"a trained run in run/ with {words}", have_run, step)
        # experiment.json is a record of the run; a run may do without it (its checkpoint holds the config)
        expect = "any" if words == "experiment.json missing" else "bad"
        cases.append(Case(6, f"eval, {words}", evaluate, setup=make, expect=expect))
        if words.startswith(
            (
                "checkpoint.pt truncated",
                "checkpoint.pt text",
                "checkpoint.pt with a weight",
                "checkpoint.pt of another",
                "checkpoint.pt without",
                "experiment.json not",
                "experiment.json run a string",
                "experiment.json missing",
            )
        ):
            cases.append(Case(6, f"calibrate, {words}", calibrate, setup=make, expect=expect))
        if words.startswith("checkpoint.pt truncated") or words.startswith(
            "checkpoint.pt with a weight"
        ):
            cases.append(
                Case(
                    6,
                    f"train --resume, {words}",
                    [*base[:-2], "--out", "run", "--resume"],
                    setup=make,
                )
            )
        if words.startswith("experiment.json not"):
            cases.append(
                Case(
                    6,
                    f"train --resume, {words}",
                    [*base[:-2], "--out", "run", "--resume"],
                    setup=make,
                    expect="any",
                )
            )
    for words, step in corrupt_run_files("root/successor/vanilla-s0"):
        if words.startswith("eval.json"):
            for command in ("report", "dashboard"):
                cases.append(
                    Case(
                        6,
                        f"{command}, {words}",
                        [command, "root"],
                        setup=setup(
                            f"a results root holding one run, its {words}", root_copy(), step
                        ),
                    )
                )
    for command in ("eval", "calibrate"):
        args = evaluate if command == "eval" else calibrate
        cases.append(Case(6, f"{command} of a missing run", args))
        cases.append(
            Case(
                6,
                f"{command} of a regular file",
                args,
                setup=setup("run: a regular file", file("run", "mine\n")),
            )
        )
        cases.append(
            Case(
                6, f"{command} of an empty folder", args, setup=setup("run/: empty", folder("run"))
            )
        )
    for extra in (
        ["--lengths", "0"],
        ["--lengths", "6,,x"],
        ["--batch-size", "0"],
        ["--seed", "abc"],
        ["--test-frame", "bogus"],
    ):
        cases.append(
            Case(
                6,
                "eval " + " ".join(extra),
                [*evaluate, *extra],
                setup=setup("a trained run in run/", have_run),
            )
        )
    for extra in (
        ["--samples", "0"],
        ["--samples", "-5"],
        ["--min-accuracy", "2"],
        ["--kappa-cross", "nan"],
        ["--rules", "bogus"],
        ["--recipe", "bogus"],
    ):
        cases.append(
            Case(
                6,
                "calibrate " + " ".join(extra),
                [*calibrate, *extra],
                setup=setup("a trained run in run/", have_run),
            )
        )
    for command in ("report", "dashboard"):
        cases.append(Case(6, f"{command} of a missing root", [command, "missing"]))
        cases.append(
            Case(
                6,
                f"{command} of a regular file",
                [command, "notes.txt"],
                setup=setup("notes.txt", file("notes.txt", "mine\n")),
            )
        )
        cases.append(
            Case(
                6,
                f"{command} of an empty folder",
                [command, "empty"],
                setup=setup("empty/", folder("empty")),
            )
        )
    cases.append(
        Case(
            6,
            "report --beside a missing root",
            ["report", "root", "--beside", "missing"],
            setup=setup("a results root", root_copy()),
        )
    )
    cases.append(
        Case(
            6,
            "dashboard of a root and a missing one",
            ["dashboard", "root", "missing"],
            setup=setup("a results root", root_copy()),
        )
    )
    cases.append(Case(6, "sweep of a missing file", ["sweep", "missing.yaml"]))
    cases.append(
        Case(
            6,
            "sweep --count 0",
            ["sweep", "sweep.yaml", "--count", "0"],
            setup=setup("sweep.yaml", file("sweep.yaml", SWEEP)),
        )
    )
    cases.append(Case(6, "sync --dry-run of a missing root", ["sync", "missing", "--dry-run"]))
    cases.append(
        Case(6, "workspace --dry-run of a missing root", ["workspace", "missing", "--dry-run"])
    )
    # paths that are not UTF-8: ordinary on Linux, so they must work or be refused in one line
    odd = b"r\xff\xfe"
    cases.append(
        Case(
            6,
            "train --out a non-UTF-8 path",
            ["train", *TINY, "--no-wandb", "--out", odd],
            expect="any",
            outputs=["r*/eval.json"],
        )
    )
    cases.append(
        Case(
            6,
            "eval of a run at a non-UTF-8 path",
            ["eval", odd, "--lengths", "3,5", "--no-wandb"],
            expect="any",
            setup=setup("a trained run at r\\xff\\xfe/", run_copy(odd)),
        )
    )
    cases.append(
        Case(
            6,
            "calibrate --out a non-UTF-8 path",
            [
                "calibrate",
                "run",
                "--min-accuracy",
                "0",
                "--samples",
                "20",
                "--no-wandb",
                "--out",
                b"b\xff.pt",
            ],
            expect="any",
            setup=setup("a trained run in run/", have_run),
        )
    )
    cases.append(
        Case(
            6,
            "report of a root holding a non-UTF-8 folder",
            ["report", "root"],
            expect="any",
            outputs=["root/report.md"],
            setup=setup(
                "a results root whose run folder is named r\\xff\\xfe",
                lambda d: copy_run(d, b"root/" + odd),
            ),
        )
    )
    cases.append(
        Case(
            6,
            "dashboard of a non-UTF-8 root",
            ["dashboard", odd],
            expect="any",
            setup=setup(
                "a results root named r\\xff\\xfe",
                lambda d: copy_run(d, odd + b"/successor/vanilla-s0"),
            ),
        )
    )
    cases.append(
        Case(
            6,
            "recipe of a non-UTF-8 file name",
            ["recipe", b"\xff.yaml"],
            expect="any",
            setup=setup(
                "\\xff.yaml: a valid recipe", file(b"\xff.yaml", "base: quick\nsteps: 40\n")
            ),
        )
    )
    return cases


def family_7() -> list[Case]:
    cases = []
    train = ["train", *TINY, "--wandb", "--out", "run"]
    out = ["run/eval.json"]
    cases.append(
        Case(
            7, "train --wandb with HOME unset", train, expect="ok", outputs=out, env={"HOME": None}
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with HOME a missing folder",
            train,
            expect="ok",
            outputs=out,
            env={"HOME": "{dir}/no-such-home"},
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with HOME read-only and wandb's folders unset",
            train,
            expect="ok",
            outputs=out,
            env={
                "HOME": "{dir}/home",
                "WANDB_CONFIG_DIR": None,
                "WANDB_CACHE_DIR": None,
                "WANDB_DATA_DIR": None,
            },
            prefix=DROP_CAPS,
            setup=setup("home/: mode 555 (run without CAP_DAC_OVERRIDE)", folder("home", 0o555)),
        )
    )
    cases.append(
        Case(
            7,
            "report with HOME unset",
            ["report", "root"],
            expect="ok",
            outputs=["root/report.md"],
            env={"HOME": None},
            setup=setup("a results root", root_copy()),
        )
    )
    online = {"WANDB_MODE": "online", "WANDB_API_KEY": None}
    cases.append(
        Case(
            7,
            "train --wandb, WANDB_MODE=online, no key, no network",
            train,
            expect="any",
            outputs=out,
            env=online,
            fast=60,
        )
    )
    cases.append(
        Case(
            7,
            "calibrate --wandb, WANDB_MODE=online, no key",
            [
                "calibrate",
                "run",
                "--min-accuracy",
                "0",
                "--samples",
                "20",
                "--wandb",
                "--out",
                "cal/bias.pt",
            ],
            expect="any",
            outputs=["cal/bias.pt"],
            env=online,
            fast=60,
            setup=setup("a trained run in run/", run_copy()),
        )
    )
    cases.append(
        Case(
            7,
            "eval --wandb, WANDB_MODE=online, no key",
            ["eval", "run", "--lengths", "3,5", "--wandb"],
            expect="any",
            env=online,
            fast=60,
            setup=setup("a trained run in run/", run_copy()),
        )
    )
    cases.append(
        Case(
            7,
            "sync of a root, WANDB_MODE=online, no key",
            ["sync", "root"],
            expect="any",
            env=online,
            fast=60,
            setup=setup("a results root", root_copy()),
        )
    )
    cases.append(
        Case(
            7,
            "workspace of a root, no key",
            ["workspace", "root", "--entity", "someone"],
            expect="any",
            env=online,
            fast=60,
            setup=setup("a results root", root_copy()),
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with WANDB_DIR a regular file",
            train,
            expect="any",
            outputs=out,
            env={"WANDB_DIR": "{dir}/wandb-file"},
            setup=setup("wandb-file: the user's regular file", file("wandb-file", "mine\n")),
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with WANDB_DIR a missing folder",
            train,
            expect="any",
            outputs=out,
            env={"WANDB_DIR": "{dir}/no-such-dir"},
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with WANDB_DIR read-only",
            train,
            expect="any",
            outputs=out,
            env={"WANDB_DIR": "{dir}/ro"},
            prefix=DROP_CAPS,
            setup=setup("ro/: mode 555 (run without CAP_DAC_OVERRIDE)", folder("ro", 0o555)),
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with WANDB_MODE=bogus",
            train,
            expect="any",
            outputs=out,
            env={"WANDB_MODE": "bogus"},
        )
    )
    cases.append(
        Case(
            7,
            "train --wandb with WANDB_MODE=disabled",
            train,
            expect="ok",
            outputs=out,
            env={"WANDB_MODE": "disabled"},
        )
    )
    cases.append(
        Case(
            7,
            "train with TMPDIR a regular file",
            ["train", *TINY, "--no-wandb", "--out", "run"],
            expect="any",
            outputs=out,
            env={"TMPDIR": "{dir}/tmpfile"},
            setup=setup("tmpfile: the user's regular file", file("tmpfile", "mine\n")),
        )
    )
    cases.append(
        Case(
            7,
            "recipe quick | head -1 (stdout closed early)",
            ["recipe", "quick"],
            expect="pipe",
            stdout="close",
        )
    )
    cases.append(
        Case(
            7,
            "report | head -1 (stdout closed early)",
            ["report", "root"],
            expect="pipe",
            stdout="close",
            setup=setup("a results root", root_copy()),
        )
    )
    cases.append(
        Case(7, "recipe quick > /dev/full", ["recipe", "quick"], expect="any", stdout="full")
    )
    cases.append(
        Case(
            7,
            "train > /dev/full",
            ["train", *TINY, "--no-wandb", "--out", "run"],
            expect="any",
            stdout="full",
        )
    )
    cases.append(
        Case(
            7,
            "train with COLUMNS=5",
            ["train", *TINY, "--no-wandb", "--out", "run"],
            expect="ok",
            outputs=out,
            env={"COLUMNS": "5"},
        )
    )
    cases.append(
        Case(
            7,
            "recipe with LC_ALL=C and a non-ASCII file name",
            ["recipe", "récipe.yaml"],
            expect="any",
            env={"LC_ALL": "C", "LANG": "C"},
            setup=setup("récipe.yaml: a valid recipe", file("récipe.yaml", "base: quick\n")),
        )
    )
    return cases


# ---------------------------------------------------------------- the table

COLUMNS = [
    ("cases", None),
    ("tracebacks", "traceback"),
    ("hangs", "hang"),
    ("user files changed/claimed", "user"),
    ("bad input not one line/exit 2", "bad_input"),
    ("leftovers", "leftovers"),
    ("interrupted, not finished by the same command", "not_finished"),
    ("other failures", "other"),
]


def table(records: list[dict]) -> str:
    lines = [
        "| family | " + " | ".join(c for c, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    totals = [0] * len(COLUMNS)
    for number, title in FAMILIES.items():
        mine = [r for r in records if r["family"] == number]
        if not mine:
            continue
        row = []
        for i, (_, key) in enumerate(COLUMNS):
            if key is None:
                n = len(mine)
            elif key == "user":
                n = sum(
                    1
                    for r in mine
                    if r["problems"]["user_changed"] or r["problems"]["user_claimed"]
                )
            else:
                n = sum(1 for r in mine if r["problems"][key])
            totals[i] += n
            row.append(str(n))
        lines.append(f"| {number}. {title} | " + " | ".join(row) + " |")
    lines.append("| **all** | " + " | ".join(f"**{n}**" for n in totals) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- family 8

SILENT = []  # listening sockets nobody answers (a server that hangs), open while the probe runs
HOLDERS = []  # processes holding a source's lock, ended when the probe ends


def edited_bias(name: str, change):
    """A copy of a shipped bias file (Addition, operand lines) as ``name``, edited by ``change``."""

    def make(d):
        import torch

        shipped = os.path.join(REPO, "results", "abc64", "addition", "abc-s0", "abc_bias.pt")
        payload = torch.load(shipped, weights_only=True)
        change(payload)
        torch.save(payload, os.path.join(d, name))

    return make


def run_file(content: bytes | None, how: str = "file"):
    """``root/…/offline-run-1-x/run-x.wandb``: ``content``, or a FIFO, a device, a sparse 3 GiB file."""

    def make(d):
        folder = os.path.join(d, "root", "successor", "abc-s0", "wandb", "offline-run-1-x")
        os.makedirs(folder)
        path = os.path.join(folder, "run-x.wandb")
        if how == "fifo":
            os.mkfifo(path)
        elif how == "device":
            os.symlink("/dev/zero", path)
        elif how == "sparse":
            with open(path, "wb") as f:
                f.truncate(3 << 30)
        else:
            with open(path, "wb") as f:
                f.write(content)

    return make


def framed_run(uses_json: str) -> bytes:
    """A run file as wandb frames it, one run record whose config's ``uses`` is ``uses_json``."""
    from wandb.proto import wandb_internal_pb2

    record = wandb_internal_pb2.Record()
    record.run.run_id, record.run.project = "x", "abcmini"
    item = record.run.config.update.add()
    item.key, item.value_json = "uses", uses_json
    payload = record.SerializeToString()
    import struct

    return b":W&B\x00\x00\x01" + struct.pack("<IHB", 0, len(payload), 1) + payload


def held_source(name: str):
    """``name``, a source directory whose lock another process holds (a training in progress)."""

    def make(d):
        path = os.path.join(d, name)
        code = (
            "import sys; from abcmini.store import lock_run\n"
            f"with lock_run({path!r}):\n print('held', flush=True); sys.stdin.read()"
        )
        holder = subprocess.Popen(
            [PYTHON, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment(d, {}),
            cwd=d,
        )
        holder.stdout.readline()
        HOLDERS.append(holder)
        atexit.register(holder.kill)

    return make


def family_8() -> list[Case]:
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    SILENT.append(silent)
    online = {
        "WANDB_MODE": "online",
        "WANDB_API_KEY": "x" * 40,
        "WANDB_BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}",
    }
    cases = []
    bias_train = ["train", "--recipe", "abc64", "--task", "addition", "--method", "nope"]
    bias_train += [
        "--bias",
        "bias.pt",
        "--out",
        "run",
        "--steps",
        "2",
        "--threads",
        "1",
        "--no-wandb",
    ]
    cross = lambda p: p["bias"]["cross"]  # noqa: E731
    edits = {
        "no task": lambda p: p.pop("task"),
        "no bias": lambda p: p.pop("bias"),
        "bias a string": lambda p: p.update(bias="lines"),
        "bias empty": lambda p: p.update(bias={}),
        "values a list": lambda p: cross(p).update(values=cross(p)["values"].tolist()),
        "values of 3 heads": lambda p: cross(p).update(values=cross(p)["values"][:, :3]),
        "values of rank 2": lambda p: cross(p).update(values=cross(p)["values"][0]),
        "complex values": lambda p: cross(p).update(values=cross(p)["values"].to(torch_complex())),
        "NaN values": lambda p: cross(p)["values"].view(-1)[0].fill_(float("nan")),
        "segments out of range": lambda p: cross(p).update(
            segments=[9] * len(cross(p)["segments"])
        ),
        "four tables, two deltas": lambda p: cross(p).update(deltas=cross(p)["deltas"][:2]),
        "heads a string": lambda p: p.update(heads="4"),
    }
    for name, change in edits.items():
        cases.append(
            Case(
                8,
                f"train --bias: {name}",
                bias_train,
                setup=setup(
                    f"bias.pt: a shipped bias file, {name}", edited_bias("bias.pt", change)
                ),
            )
        )
    cases.append(
        Case(
            8,
            "train --bias: 300 MB file",
            bias_train,
            fast=30,
            setup=setup("bias.pt: a sparse 300 MB file", sparse("bias.pt", 300 << 20)),
        )
    )
    cases.append(
        Case(
            8,
            "train --bias: a FIFO",
            bias_train,
            fast=30,
            setup=setup("bias.pt: a FIFO", fifo("bias.pt")),
        )
    )
    runs = {
        "empty": run_file(b""),
        "garbage header": run_file(b"PK\x03\x04" + bytes(64)),
        "uses a number": run_file(framed_run("5")),
        "config value not JSON": run_file(framed_run("{nope")),
        "a FIFO": run_file(None, "fifo"),
        "/dev/zero": run_file(None, "device"),
        "a sparse 3 GiB file": run_file(None, "sparse"),
    }
    for name, make in runs.items():
        cases.append(
            Case(
                8,
                f"sync --dry-run: .wandb {name}",
                ["sync", "root", "--dry-run"],
                setup=setup(f"root: a run file, {name}", make),
                fast=30,
            )
        )
    cases.append(
        Case(
            8,
            "sync: a server that never answers",
            ["sync", "root"],
            env=online,
            setup=setup("root: one run file", run_file(framed_run('["m"]'))),
            fast=30,
        )
    )
    shipped = os.path.join(REPO, "results", "long")
    cases.append(
        Case(
            8,
            "workspace: a server that never answers",
            ["workspace", shipped, "--entity", "me"],
            env=online,
            fast=30,
        )
    )
    sizes = [
        ["--task", "multiadd", "--recipe", "multiadd", "--method", "abc", "--frame-spread", "3000"],
        ["--method", "abc", "--samples", "10000000"],
        ["--batch-size", "100000000"],
        ["--valid-size", "100000000"],
    ]
    for extra in sizes:
        cases.append(
            Case(
                8,
                f"train {' '.join(extra)}",
                ["train", "--no-wandb", "--out", "run", *extra],
                fast=60,
            )
        )
    cases.append(
        Case(
            8,
            "train under ulimit -v 200 MB",
            ["train", *TINY, "--no-wandb", "--out", "run"],
            prefix=["prlimit", "--as=209715200"],
            fast=30,
        )
    )
    cases.append(
        Case(
            8,
            "train --source '' ",
            ["train", "--method", "abc", "--source", "", *TINY, "--no-wandb"],
        )
    )
    cases.append(
        Case(
            8,
            "train --source with Vanilla",
            ["train", "--source", "src", *TINY, "--no-wandb", "--out", "run"],
        )
    )
    cases.append(
        Case(
            8,
            "train --source while another process trains it",
            ["train", "--method", "abc", "--source", "src", *TINY, "--no-wandb", "--out", "run"],
            setup=setup("src: a source whose lock another process holds", held_source("src")),
            fast=60,
        )
    )
    return cases


def torch_complex():
    import torch

    return torch.complex64


def sparse(name: str, size: int):
    def make(d):
        with open(os.path.join(d, name), "wb") as f:
            f.truncate(size)

    return make


def main() -> None:
    global REPO
    parser = argparse.ArgumentParser(description="Robustness probe of the abcmini command line.")
    parser.add_argument(
        "--family",
        type=int,
        nargs="*",
        default=list(FAMILIES),
        help="families to run (default: all)",
    )
    parser.add_argument("--match", default="", help="only cases whose name contains this")
    parser.add_argument(
        "--repo",
        default=REPO,
        help="the abcmini source tree to probe, e.g. an unpacked `git archive` "
        "of a commit (default: this script's repository; its .venv runs it either way)",
    )
    parser.add_argument(
        "--reuse-fixtures", action="store_true", help="reuse the fixtures of the last run"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the cases --json already records for this --repo "
        "(a run that was stopped) and run the others",
    )
    parser.add_argument(
        "--failed-in", metavar="JSON", help="run only the cases that failed in this earlier --json"
    )
    parser.add_argument("--keep", action="store_true", help="keep the directories of failing cases")
    parser.add_argument("--json", default="probe.json")
    parser.add_argument("--md", default="probe.md")
    options = parser.parse_args()
    REPO = os.path.abspath(options.repo)
    if os.geteuid() != 0:
        sys.exit("run as root: cases mount tmpfs and drop CAP_DAC_OVERRIDE")
    start = time.monotonic()
    times = os.path.join(FIXTURES, "times.json")
    if options.reuse_fixtures and os.path.isfile(times):
        with open(times) as f:
            TIMES.update(json.load(f))
    else:
        print("fixtures", flush=True)
        build_fixtures()
        with open(times, "w") as f:
            json.dump(TIMES, f)
    builders = {
        1: family_1,
        2: family_2,
        3: family_3,
        4: family_4,
        5: family_5,
        6: family_6,
        7: family_7,
        8: family_8,
    }
    cases = [case for n in options.family for case in builders[n]() if options.match in case.name]
    if options.failed_in:  # only the cases that failed in an earlier run: has a change fixed them?
        with open(options.failed_in) as f:
            failed_before = {(r["family"], r["name"]) for r in json.load(f)["cases"] if r["failed"]}
        cases = [case for case in cases if (case.family, case.name) in failed_before]
    print(f"{len(cases)} cases", flush=True)
    done = {}
    if options.resume and os.path.isfile(options.json):
        with open(options.json) as f:
            earlier = json.load(f)
        if earlier.get("repo") == REPO:
            done = {(r["family"], r["name"]): r for r in earlier["cases"]}
    records = []
    for i, case in enumerate(cases, 1):
        if (case.family, case.name) in done:  # --resume: recorded by the run that stopped
            records.append(done[(case.family, case.name)])
            continue
        record = execute(case, options.keep)
        records.append(record)
        found = [k for k, v in record["problems"].items() if v]
        rcs = ",".join(str(r["rc"]) for r in record["results"])
        print(
            f"[{i}/{len(cases)}] {'FAIL' if record['failed'] else 'ok  '} {case.family} {case.name} "
            f"(exit {rcs}, {sum(r['seconds'] for r in record['results']):.1f} s){' ' + str(found) if found else ''}",
            flush=True,
        )
        with open(options.json, "w") as f:
            json.dump({"repo": REPO, "baselines": TIMES, "cases": records}, f, indent=1)
    text = table(records)
    failed = sum(r["failed"] for r in records)
    summary = (
        f"{len(records)} cases, {failed} failing, {time.monotonic() - start:.0f} s of wall time, source tree {REPO} "
        f"(baselines: {', '.join(f'{k} {v} s' for k, v in TIMES.items())})"
    )
    with open(options.md, "w") as f:
        f.write(f"# abcmini robustness probe\n\n{summary}\n\n{text}\n")
    print(f"\n{summary}\n\n{text}")


if __name__ == "__main__":
    main()
