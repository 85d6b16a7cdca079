"""`abcmini reproduce` machinery and `abcmini report`, with real (tiny) training."""

import json
import os
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from abcmini.experiment import MAIN_TASKS, Cell, resolve
from abcmini.outputs.report import collect, costs, markdown, summarize, wall_time
from abcmini.recipes import LONG, PAPER, RECIPES, Recipe
from abcmini.reproduce import next_job, plan, read_invocations, run_all, table_cells
from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

TINY = Recipe(
    name="tiny",
    pad_width=7,
    lengths=(2, 5),
    preset="tiny",
    steps=20,
    step_caps=(),
    eval_every=10,
    valid_size=20,
    abc_pad_width=7,
    abc_valid_size=20,
    calibration=replace(PAPER.calibration, samples=20),
)


def run(task, method, recipe=PAPER):
    return resolve(recipe, Cell.of(task, method, 0)).run


def test_plan_adds_the_vanilla_source_of_abc_and_skips_parity_in_the_main_table(tmp_path):
    jobs = plan(PAPER, table_cells(["successor", "parity"], ["abc", "+w=1"], [0, 1]), str(tmp_path))
    cells = [job.cell for job in jobs]
    assert Cell("successor", "vanilla", 1) in cells and Cell("successor", "abc", 0) in cells
    assert not any(c.task == "parity" and c.method == "abc" for c in cells)
    assert Cell("parity", "vanilla+w=1", 1) in cells
    assert len(jobs) == len(set(jobs))
    abc = next(job for job in jobs if job.cell == Cell("successor", "abc", 0))
    assert (
        abc.source_dir
        == next(job for job in jobs if job.cell == Cell("successor", "vanilla", 0)).run_dir
    )


def test_recipe_caps_the_runs_expected_to_fail():
    steps = {
        (task, method): run(task, method).steps
        for task, method in [
            ("parity", "vanilla"),
            ("parity", "NoPE+w=1"),
            ("successor", "vanilla"),
            ("addition", "alibi"),
            ("addition", "vanilla"),
            ("addition", "+T=3"),
        ]
    }
    assert steps == {
        ("parity", "vanilla"): 4000,
        ("parity", "NoPE+w=1"): PAPER.steps,
        ("successor", "vanilla"): PAPER.steps,
        ("addition", "alibi"): 1500,
        ("addition", "vanilla"): 20000,
        ("addition", "+T=3"): PAPER.steps,
    }
    # recipe long: N×1 with a window gets its own cap, and today's methods under the same rule; ABC's N×1 retraining its own in every recipe
    caps = {
        (task, method): run(task, method, LONG).steps
        for task, method in [
            ("nx1", "+T=3"),
            ("nx1", "abc"),
            ("nx1", "vanilla"),
            ("addition", "+T=3"),
            ("nx1", "fire+varied"),
            ("nx1", "coupling"),
            ("addition", "abacus+varied"),
        ]
    }
    assert caps == {
        ("nx1", "+T=3"): 12000,
        ("nx1", "abc"): 12000,
        ("nx1", "vanilla"): LONG.steps,
        ("addition", "+T=3"): LONG.steps,
        ("nx1", "fire+varied"): 12000,
        ("nx1", "coupling"): 12000,
        ("addition", "abacus+varied"): LONG.steps,
    }
    assert LONG.steps == 4000 and run("nx1", "abc").steps == 12000
    assert run("nx1", "abc", RECIPES["abc64"]).steps == 4000  # a row of a derived recipe
    assert run("parity", "vanilla", RECIPES["paper64"]).steps == 300
    assert (
        run("nx1", "+T=3").steps == PAPER.steps and run("nx1", "+T=3", TINY).steps == TINY.steps
    )  # elsewhere: the recipe's cap


def test_recipe_gives_in_attention_schemes_an_encoder():
    layers = {
        method: run("successor", method).enc_layers
        for method in ("vanilla", "rope", "alibi", "NoPE+w=1")
    }
    assert layers == {
        "vanilla": PAPER.enc_layers,
        "rope": PAPER.enc_layers_in_attention,
        "alibi": PAPER.enc_layers_in_attention,
        "NoPE+w=1": PAPER.enc_layers,
    }
    assert PAPER.enc_layers_in_attention > 0


def test_every_recipe_resolves_one_abc_procedure_and_one_abc_training():
    """ABC is one thing: the same calibration (up to how many inputs it averages) and the same
    source and retraining in every shipped recipe, for every task; only the test differs."""
    from dataclasses import asdict

    from abcmini.recipes import RECIPES

    for task in (*MAIN_TASKS, "parity"):
        resolved = {name: resolve(recipe, Cell(task, "abc", 1)) for name, recipe in RECIPES.items()}
        procedures = {
            json.dumps(
                {
                    k: v
                    for k, v in asdict(e.calibration).items()
                    if k not in ("samples", "seed", "min_accuracy")
                }
            )
            for e in resolved.values()
        }
        assert len(procedures) == 1, procedures
        assert (
            resolved["paper"].run == resolved["long"].run
            and resolved["paper"].source == resolved["long"].source
        )
        assert (
            resolved["paper"].run.frame_spread == PAPER.abc_frame_spread
            and resolved["paper"].source.frame_spread == 0
        )
        assert (
            resolved["paper"].test_pad_width == PAPER.pad_width
            and resolved["long"].test_pad_width == LONG.pad_width
        )
        assert resolved["paper"].run.pad_width == PAPER.abc_pad_width != PAPER.pad_width


def test_recipe_trains_only_window_runs_past_the_stopping_rule():
    methods = ("vanilla", "rope", "+w=1", "NoPE+w=1", "abc", "random", "fire", "abacus", "coupling")
    rule = {
        method: (cfg.stop_at, cfg.train_on)
        for method in methods
        for cfg in [run("successor", method)]
    }
    window = (PAPER.stop_at, PAPER.train_on)  # ABS, and today's methods under the same budget rule
    assert rule == {
        "vanilla": (PAPER.stop_at_plain, 1.0),
        "rope": (PAPER.stop_at_plain, 1.0),
        "+w=1": window,
        "NoPE+w=1": window,
        "abc": (PAPER.stop_at, PAPER.abc_train_on),
        "random": window,
        "fire": window,
        "abacus": window,
        "coupling": window,
    }
    assert PAPER.train_on > 1


def test_abc_starts_as_soon_as_its_vanilla_source_is_done(tmp_path):
    jobs = plan(PAPER, table_cells(["successor", "addition"], ["+w=1", "abc"], [0]), str(tmp_path))
    waiting, order = list(jobs), []
    while waiting:  # one worker: each job finishes before the next starts
        order.append(next_job(waiting, set(waiting)))
        waiting.remove(order[-1])
    assert [(job.cell.task, job.cell.method) for job in order] == [
        ("successor", "vanilla"),
        ("successor", "abc"),
        ("addition", "vanilla"),
        ("addition", "abc"),
        ("successor", "vanilla+w=1"),
        ("addition", "vanilla+w=1"),
    ]
    abc = next(job for job in jobs if job.cell == Cell("successor", "abc", 0))
    assert next_job([abc], {abc, abc.source()}) is None  # its source is still running: wait for it


def test_reproduce_runs_resumes_and_reports(tmp_path):
    root = str(tmp_path)
    jobs = plan(TINY, table_cells(["successor"], ["vanilla", "NoPE+w=1", "abc"], [0]), root)
    heard = []  # on_wait: every job's start (a log file hears it at once, then once a minute)
    first = run_all(jobs, workers=1, on_wait=heard.append)
    assert len(heard) >= len(jobs) and all(len(running) == 1 for running in heard)
    assert {job for running in heard for job in running} == set(jobs)
    by_method = {r.get("method"): r for r in first}
    assert (
        set(by_method["vanilla"]["accuracy"]) == {"2", "5"}
        and by_method["vanilla"]["train_steps"] == 20
    )
    assert by_method["nope+w=1"]["window"] == 1
    # 20 steps do not interpolate: ABC refuses to calibrate and says why, the other cells stand
    assert "has not interpolated" in by_method["abc"]["error"]
    stamps = {
        job: os.path.getmtime(os.path.join(job.run_dir, "eval.json"))
        for job in jobs
        if job.cell.method != "abc"
    }
    again = run_all(jobs, workers=1)  # finished cells are skipped, not retrained
    assert {
        job: os.path.getmtime(os.path.join(job.run_dir, "eval.json")) for job in stamps
    } == stamps
    assert [r["accuracy"] for r in again if "accuracy" in r] == [
        r["accuracy"] for r in first if "accuracy" in r
    ]

    first_call, second_call = read_invocations(
        root
    )  # each invocation's wall time, for resumed reproductions
    assert (
        first_call["jobs"],
        first_call["to_do"],
        first_call["done"],
        first_call["finished"],
    ) == (3, 3, 2, True)
    assert (second_call["to_do"], second_call["done"]) == (
        1,
        0,
    )  # only ABC was left, and it failed again
    assert (
        first_call["seeds"] == [0]
        and first_call["methods"] == ["vanilla", "nope+w=1", "abc"]
        and first_call["workers"] == 1
    )
    assert first_call["seconds"] > second_call["seconds"] > 0
    total = round(first_call["seconds"] + second_call["seconds"])
    assert wall_time(read_invocations(root)).endswith(
        f"2 invocations, 0:{total // 60:02d}:{total % 60:02d} (h:mm:ss) of wall time in all.\n"
    )

    table = markdown(summarize(collect(root)))
    assert "| successor | vanilla | 1 |" in table and "| successor | nope+w=1 | 1 |" in table
    cost = costs(collect(root))
    assert (
        "| successor | vanilla | 0 | 20 |" in cost and "| successor | nope+w=1 | 0 | 20 |" in cost
    )


def write_eval(directory, task, method, seed, accuracy):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "eval.json"), "w") as f:
        json.dump(
            {
                "task": task,
                "method": method,
                "seed": seed,
                "accuracy": {str(k): v for k, v in accuracy.items()},
            },
            f,
        )


def test_report_gives_median_and_range_over_seeds_beside_the_paper(tmp_path):
    write_eval(tmp_path / "a", "addition", "nope+abc", 0, {6: 1.0, 60: 0.97})
    write_eval(tmp_path / "b", "addition", "nope+abc", 1, {6: 0.98, 60: 0.99})
    write_eval(tmp_path / "c", "addition", "nope+abc", 2, {6: 0.99, 60: 0.995})
    write_eval(tmp_path / "d" / "deeper", "successor", "rope", 0, {6: 0.5, 60: 0.0})
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "report.md").read_text()
    assert (
        "| addition | nope+abc | 3 | 99.00 [98.00–100.00] (100) | 99.00 [97.00–99.50] (99.8) |"
        in table
    )
    assert "| successor | rope | 1 | 50.00 (100) | 0.00 (0) |" in table
    assert table.index("| successor |") < table.index("| addition |")  # the paper's task order
    for task in ("addition", "successor"):
        assert (tmp_path / f"accuracy_{task}.png").stat().st_size > 10_000


def test_a_length_tested_in_fewer_seeds_says_how_many_it_pools():
    table = markdown({("multiadd", "nope+abc"): {7: [0.9, 0.8, 1.0], 35: [0.5, 0.25]}}, paper=False)
    assert (
        "| multiadd | nope+abc | 3 | 90.00 [80.00–100.00] | 37.50 [25.00–50.00] (2 of 3 seeds) |"
        in table
    )


def test_report_refuses_an_empty_directory(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no result records" in result.output


def test_report_checks_its_readme_before_writing_anything(tmp_path):
    notes, out = tmp_path / "notes.md", tmp_path / "out" / "report.md"
    notes.write_text("no generated block here\n")
    for readme, why, more in (
        (tmp_path / "missing.md", "is not a file", []),
        (notes, "no generated block to fill", []),
        (notes, "no generated block 'own-paper'", ["--block", "own-paper"]),
        (None, "--block fills a block of --readme", ["--block", "own-papers"]),
    ):
        given = ["--readme", str(readme)] if readme else []
        result = CliRunner().invoke(
            app, ["report", "results/decoder", "--out", str(out), *given, *more]
        )
        assert (
            result.exit_code == 2
            and why in result.output
            and len(result.output.strip().splitlines()) == 1
        ), result.output
    assert not out.parent.exists() and notes.read_text() == "no generated block here\n"


PARENT = """
import multiprocessing, os, sys, time
from abcmini.reproduce import exit_with_parent

def report_pid(path, parent):
    exit_with_parent(parent, 0.1)
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)

if __name__ == "__main__":
    worker = multiprocessing.get_context("spawn").Process(target=report_pid, args=(sys.argv[1], os.getpid()))
    worker.start()
    time.sleep(120)
"""


def test_workers_end_when_the_reproduce_process_is_killed(tmp_path):
    """SIGKILL the parent (no cleanup runs in it): its worker must not train on as an orphan."""
    import signal
    import subprocess
    import sys
    import time

    script, pid_file = tmp_path / "parent.py", tmp_path / "worker.pid"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file)], cwd=os.getcwd())
    deadline = time.time() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    worker = int(pid_file.read_text())
    os.kill(worker, 0)  # alive while its parent is
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the worker outlived its parent by 10 s")


def workers_of(pid: int) -> list[int]:
    """The worker processes (spawned Python) a process started, from /proc."""
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            children += map(int, f.read().split())

    def command(child):
        with open(f"/proc/{child}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()

    return [child for child in children if "spawn_main" in command(child)]


def test_a_killed_worker_costs_its_cell_only_and_the_same_command_finishes_the_rest(tmp_path):
    """SIGKILL one worker, as the OOM killer does: its cell is recorded as failed with the signal,
    the other cell finishes, the report of what finished is written, the exit code says not
    everything did, and the same command trains the killed cell."""
    import signal
    import subprocess
    import sys
    import time

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(
        "base: quick\npreset: tiny\npad_width: 7\nlengths: [3]\nsteps: 600\nstop_at: 1.0\nstop_at_plain: 1.0\n"
        "valid_size: 20\neval_every: 50\n"
    )
    command = [
        sys.executable,
        "-m",
        "cli",
        "reproduce",
        "--recipe",
        str(recipe),
        "--tasks",
        "successor",
        "--methods",
        "vanilla,nope",
        "--seeds",
        "0",
        "--workers",
        "2",
        "--no-wandb",
        "--out",
        str(tmp_path / "root"),
    ]
    env = {**os.environ, "PYTHONPATH": ROOT}
    first = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    cells = [tmp_path / "root" / "successor" / name for name in ("vanilla-s0", "nope-s0")]
    deadline = time.time() + 120
    while not all((cell / "checkpoint.pt").exists() for cell in cells) and time.time() < deadline:
        time.sleep(0.2)  # both cells have trained a little
    (victim, *_) = workers_of(first.pid)
    os.kill(victim, signal.SIGKILL)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 1 and "Traceback" not in err, out + err
    killed = [line for line in err.splitlines() if "killed by signal 9 (SIGKILL)" in line]
    assert len(killed) == 1 and "same command resumes it" in killed[0], err
    finished = [cell for cell in cells if (cell / "eval.json").exists()]
    assert len(finished) == 1 and (tmp_path / "root" / "report.md").exists(), out + err
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert all((cell / "eval.json").exists() for cell in cells)
