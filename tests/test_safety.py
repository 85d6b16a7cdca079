"""Nothing lost, nothing overwritten: abcmini writes through unique temporary files, holds a lock on
the run directory it writes, deletes and replaces only what it wrote, and keeps every test of a
run; argument errors come before torch is imported. Real tiny runs through the real CLI."""

import json
import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = [
    "--preset",
    "tiny",
    "--pad-width",
    "7",
    "--test-frame",
    "fixed",
    "--lengths",
    "3",
    "--valid-size",
    "20",
    "--eval-every",
    "10",
    "--no-wandb",
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(result, needle):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
    return lines[0]


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    """A root holding one tiny trained run (2 steps) with its result record."""
    root = tmp_path_factory.mktemp("root")
    result = invoke("train", *TINY, "--steps", 2, "--out", root / "successor" / "vanilla-s0")
    assert result.exit_code == 0, result.output
    return root


@pytest.mark.integration
def test_atomic_writes_never_follow_a_planted_symlink(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("checkpoint.pt.tmp", "eval.json.tmp", "experiment.json.tmp"):
        (run / name).symlink_to(outside)
    result = invoke("train", *TINY, "--steps", 2, "--out", run)
    assert result.exit_code == 0, result.output
    assert outside.read_text() == "precious\n"
    assert (run / "checkpoint.pt").stat().st_size > 1000 and json.loads(
        (run / "eval.json").read_text()
    )["accuracy"]
    mask = os.umask(0)
    os.umask(mask)
    assert (
        run / "checkpoint.pt"
    ).stat().st_mode & 0o777 == 0o666 & ~mask  # an ordinary new file's mode


def start_endless_training(run) -> subprocess.Popen:
    """A real tiny training that runs until killed, once it has written its experiment record."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "train", *TINY, "--steps", "1000000", "--out", str(run)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while (
        not (run / "experiment.json").exists() and time.time() < deadline and process.poll() is None
    ):
        time.sleep(0.1)
    if process.poll() is not None or not (run / "experiment.json").exists():
        process.kill()
        pytest.fail(f"the first training did not start: {process.communicate()[1]}")
    return process


@pytest.mark.integration
def test_a_second_process_on_a_run_directory_is_refused_while_the_first_trains(tmp_path):
    """``--resume`` is refused at once; ``--continue`` (the sweeps') waits instead: tests/test_agent.py."""
    run = tmp_path / "run"
    first = start_endless_training(run)
    try:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli",
                "train",
                *TINY,
                "--steps",
                "4",
                "--resume",
                "--out",
                str(run),
            ],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(lines) == 1, second.stdout + second.stderr
        assert (
            "is in use by" in lines[0]
            and f"pid {first.pid}" in lines[0]
            and "abcmini train" in lines[0]
        ), lines[0]
        assert first.poll() is None  # the first training goes on
    finally:
        first.kill()
        first.wait()


@pytest.mark.integration
def test_reproduce_skips_a_cell_another_process_is_training(tmp_path):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(
        "base: quick\npreset: tiny\npad_width: 7\nlengths: [3]\nsteps: 2\nvalid_size: 20\neval_every: 2\n"
    )
    cell = tmp_path / "root" / "successor" / "vanilla-s0"
    first = start_endless_training(cell)
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli",
                "reproduce",
                "--recipe",
                str(recipe),
                "--tasks",
                "successor",
                "--methods",
                "vanilla",
                "--seeds",
                "0",
                "--workers",
                "1",
                "--no-wandb",
                "--out",
                str(tmp_path / "root"),
            ],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
        skipped = [line for line in result.stderr.splitlines() if "skipped:" in line]
        assert (
            len(skipped) == 1 and "is in use by" in skipped[0] and f"pid {first.pid}" in skipped[0]
        ), result.stdout + result.stderr
        assert "Traceback" not in result.stderr and first.poll() is None
    finally:
        first.kill()
        first.wait()


@pytest.mark.integration
def test_dry_run_never_refuses_an_existing_run(empty_cwd):
    cell = os.path.join("runs", "quick", "successor", "vanilla-s0")
    assert invoke("train", "--recipe", "quick", *TINY, "--steps", 2, "--out", cell).exit_code == 0
    result = invoke("train", "--recipe", "quick", "--dry-run")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["out"] == cell and os.path.isfile(
        os.path.join(cell, "checkpoint.pt")
    )


@pytest.mark.integration
def test_overwrite_deletes_only_what_abcmini_wrote_and_names_what_it_kept(tmp_path, monkeypatch):
    """wandb offline in the run directory: its run folder goes, a user's notes in wandb/ and a user's
    abc_*.png stay."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR")
    run = tmp_path / "run"
    args = [a for a in TINY if a != "--no-wandb"]
    assert invoke("train", *args, "--steps", 2, "--wandb", "--out", run).exit_code == 0
    (written,) = [p.name for p in (run / "wandb").iterdir() if p.name.startswith("offline-run-")]
    (run / "wandb" / "notes.txt").write_text("mine\n")
    (run / "abc_mine.png").write_bytes(b"\x89PNG mine")
    result = invoke("train", *TINY, "--steps", 2, "--overwrite", "--out", run)
    assert result.exit_code == 0, result.output
    assert (run / "wandb" / "notes.txt").read_text() == "mine\n" and (
        run / "abc_mine.png"
    ).read_bytes() == b"\x89PNG mine"
    assert not (run / "wandb" / written).exists() and not (run / "wandb-id").exists()
    assert "kept 2 files abcmini did not write" in result.stdout and "abc_mine.png" in result.stdout


def test_dashboard_and_report_refuse_to_replace_files_they_did_not_write(tiny_root, tmp_path):
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>\n")
    one_line(invoke("dashboard", tiny_root, "--out", notes), "was not written by abcmini dashboard")
    assert notes.read_text() == "<p>my notes</p>\n"
    figure = tmp_path / "accuracy_successor.png"
    figure.write_bytes(b"my figure")
    one_line(
        invoke("report", tiny_root, "--out", tmp_path / "report.md"),
        "accuracy_successor.png' was not written by abcmini report",
    )
    assert figure.read_bytes() == b"my figure" and not (tmp_path / "report.md").exists()
    # what abcmini wrote, it may replace
    other = tmp_path / "other"
    for _ in range(2):
        assert invoke("report", tiny_root, "--out", other / "report.md").exit_code == 0
        assert invoke("dashboard", tiny_root, "--out", other / "dashboard.html").exit_code == 0


def test_eval_in_another_frame_keeps_every_result_of_the_record(tiny_root, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_root / "successor" / "vanilla-s0", run)
    record = json.loads((run / "eval.json").read_text())
    record |= {
        "source": "/elsewhere/source",
        "calibration_seconds": 12.5,
        "accuracy": {"3": 0.5, "7": 0.25},
    }
    (run / "eval.json").write_text(json.dumps(record))
    result = invoke("eval", run, "--lengths", "6,30", "--test-frame", "follows", "--no-wandb")
    assert result.exit_code == 0, result.output
    after = json.loads((run / "eval.json").read_text())
    assert {
        k: v for k, v in after.items() if k != "other_tests"
    } == record  # nothing of the record changed or went
    beside = after["other_tests"]["follows, test seed 0"]
    assert (
        beside["test_frame"] == "follows"
        and set(beside["accuracy"]) == {"6", "30"}
        and set(beside["test_seconds"]) == {"6", "30"}
    )
    # the record's own frame again: merged into the record, the other test stays beside it
    assert invoke("eval", run, "--lengths", "5", "--no-wandb").exit_code == 0
    again = json.loads((run / "eval.json").read_text())
    assert (
        set(again["accuracy"]) == {"3", "5", "7"} and again["other_tests"] == after["other_tests"]
    )
    assert invoke("report", tmp_path, "--out", tmp_path / "r" / "report.md").exit_code == 0
    page = (tmp_path / "r" / "report.md").read_text()  # report reads the test beside the record too
    assert (
        f"`{run} (follows, test seed 0)`: recipe" in page
        and "each test in a frame of its length" in page
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["eval", "runs/nope"], "run directory 'runs/nope' does not exist"),
        (["eval", "."], "no checkpoint in '.'"),
        (["eval", "runs/nope", "--test-frame", "wide"], "does not exist"),
        (["train", "--task", "bogus"], "unknown task 'bogus'"),
        (["train", "--recipe", "nope.yaml"], "unknown recipe 'nope.yaml'"),
        (["train", "--method", "vanila"], "unknown method 'vanila'"),
        (["train", "--method", "+T=0"], "names a CPI period of at least 1"),
        (["recipe", "/dev/zero"], "is not a regular file"),
        (
            ["train", "--method", "abc", "--calibration", "paperr"],
            "--calibration is abc, paper, authors, not 'paperr'",
        ),
        (["train", "--method", "abc", "--rules", "all,-bnd"], "unknown calibration rule 'bnd'"),
        (["reproduce", "--methods", "vanilla,+w=x"], "unknown method '+w=x'"),
        (["reproduce", "--tasks", "addtion"], "unknown task 'addtion'"),
        (["reproduce", "--quick", "--tasks", "addition"], "--quick sets --tasks itself"),
        (["reproduce", "--quick", "--recipe", "long"], "--quick sets --recipe itself"),
    ],
)
def test_argument_errors_come_before_torch_is_imported(args, needle, empty_cwd):
    code = (
        "import sys; sys.argv = ['abcmini', *sys.argv[1:]]; from cli import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    print('torch' in sys.modules, exit.code)\n"
    )
    env = {**ENV, "PYTHONPATH": ROOT}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=empty_cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    seconds = time.perf_counter() - started
    assert result.stdout.split() == ["False", "2"], result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert seconds < 3, (
        seconds
    )  # torch alone takes longer to import; the goal is 0.5 s on an idle machine


def test_a_length_beyond_the_fixed_frame_names_the_option_that_tests_it(tiny_root):
    one_line(
        invoke("eval", tiny_root / "successor" / "vanilla-s0", "--lengths", "30"),
        "pass --test-frame follows",
    )


@pytest.mark.parametrize(
    "text, needle",
    [
        ("base: me.yaml\n", "its base: chain comes back to it"),
        ("steps: abc\n", "steps must be an integer, got 'abc'"),
        ("lengths: 5\n", "lengths must be a list of integers"),
        ("calibration: 3\n", "calibration must be a mapping"),
        ("calibration: {kappa_cross: [1]}\n", "calibration.kappa_cross must be a finite number"),
        ("calibration: {rules: 'all,-band,-nothing'}\n", "unknown calibration rule 'nothing'"),
        ("a: &a [6, 6]\nlengths: *a\n", "uses YAML aliases"),
        ("lengths: [" + ",".join(["6"] * 1001) + "]\n", "lengths has 1,001 entries; at most 1,000"),
        ("# " + "x" * 70_000 + "\n", "is over 64 KiB"),
        ("lengths: " + "[" * 30_000 + "]" * 30_000 + "\n", "nests lists or mappings over 4 deep"),
        ("steps: -5\n", "steps must be at least 1, got -5"),
        ("pad_width: 0\n", "pad_width must be at least 7"),
        ("lengths: []\n", "lengths must be one or more whole numbers"),
        ("stop_at: 2\n", "stop_at must lie in [0, 1]"),
        ("", "does not hold a mapping of fields"),
        ("# only a comment\n", "does not hold a mapping of fields"),
    ],
)
def test_a_recipe_file_of_the_wrong_shape_is_one_line(empty_cwd, text, needle):
    (empty_cwd / "me.yaml").write_text(text)
    for command in (
        ["train", "--recipe", "me.yaml", "--dry-run"],
        ["recipe", "me.yaml"],
    ):  # train and recipe read it alike
        started = time.perf_counter()
        line = one_line(invoke(*command), needle)
        assert (
            "'me.yaml'" in line and time.perf_counter() - started < 3
        )  # the bounds come before the parse


def broken(run, name, **fields):
    path = run / name
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.mark.parametrize(
    "name, fields, command, needle",
    [
        (
            "experiment.json",
            {"lengths": "abc"},
            ["eval", "{run}"],
            "experiment.json': field 'lengths' must be",
        ),
        (
            "eval.json",
            {"accuracy": [1, 2]},
            ["eval", "{run}", "--lengths", "2"],
            "eval.json': field 'accuracy' must be",
        ),
        (
            "eval.json",
            {"seed": "zero"},
            ["report", "{root}", "--out", "{root}/r/report.md"],
            "eval.json': field 'seed' must be an integer",
        ),
        (
            "eval.json",
            {"accuracy": {"3": 5}},
            ["dashboard", "{root}"],
            "eval.json': field 'accuracy' must be",
        ),
        (
            "eval.json",
            {"train_seconds_by_device": "H200"},
            ["dashboard", "{root}"],
            "eval.json': field 'train_seconds_by_device' must be devices mapped to seconds",
        ),
    ],
)
def test_a_record_of_the_wrong_shape_is_one_line_naming_file_and_field(
    tiny_root, tmp_path, name, fields, command, needle
):
    import shutil

    run = tmp_path / "root" / "successor" / "vanilla-s0"
    shutil.copytree(tiny_root / "successor" / "vanilla-s0", run)
    broken(run, name, **fields)
    args = [a.format(run=run, root=tmp_path / "root") for a in command] + (
        ["--no-wandb"] if command[0] == "eval" else []
    )
    one_line(invoke(*args), needle)


def test_an_invalid_invocations_ledger_is_refused_before_any_work(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "invocations.json").write_text("{")
    line = one_line(
        invoke("reproduce", "--quick", "--no-wandb", "--out", root),
        "invocations.json' is unreadable or not valid JSON",
    )
    assert sorted(p.name for p in root.iterdir()) == ["invocations.json"], line


def test_train_refuses_tests_that_cannot_fit_before_training(tmp_path):
    run = tmp_path / "run"
    result = invoke(
        "train",
        *TINY[:4],
        "--lengths",
        100000,
        "--test-frame",
        "follows",
        "--steps",
        2,
        "--no-wandb",
        "--out",
        run,
    )
    one_line(result, "evaluating at pad width")
    assert not run.exists()  # refused before anything was written, not after training


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--steps", 10**30), "--steps must be at most"),
        (("--seed", -1), "--seed must be at least 0"),
        (("--seed", 2**64), "--seed must be at most"),
        (("--lengths", "99999999999999999999"), "--lengths must be at most"),
        (("--data-seed", -5), "--data-seed must be at least 0"),
    ],
)
def test_integers_beyond_their_use_are_refused_before_work(tmp_path, args, needle):
    run = tmp_path / "run"
    one_line(invoke("train", *TINY, *args, "--out", run), needle)
    assert not run.exists()


def test_eval_and_calibrate_refuse_seeds_and_samples_beyond_their_use(tiny_root):
    run = tiny_root / "successor" / "vanilla-s0"
    one_line(invoke("eval", run, "--seed", 2**63, "--no-wandb"), "--seed must be at most")
    one_line(
        invoke("calibrate", run, "--samples", 10**12, "--no-wandb"), "--samples must be at most"
    )


@pytest.mark.integration
def test_a_start_that_failed_after_its_experiment_record_does_not_refuse_the_corrected_command(
    tmp_path, monkeypatch
):
    from abcmini import pipeline
    from abcmini.errors import UserError

    def fail(*args, **kwargs):
        raise UserError("the first start fails")

    run = tmp_path / "run"
    monkeypatch.setattr(pipeline, "Trainer", fail)
    one_line(invoke("train", *TINY, "--steps", 2, "--out", run), "the first start fails")
    assert (run / "experiment.json").exists() and not (run / "checkpoint.pt").exists()
    monkeypatch.undo()
    result = invoke("train", *TINY, "--steps", 2, "--out", run)
    assert result.exit_code == 0, result.output
    assert (run / "checkpoint.pt").exists() and json.loads((run / "eval.json").read_text())[
        "accuracy"
    ]
    one_line(
        invoke("train", *TINY, "--steps", 2, "--out", run), "already holds a run"
    )  # a real run is still refused


@pytest.fixture
def broken_checkpoint(tiny_root, tmp_path):
    import shutil

    import torch

    run = tmp_path / "run"
    shutil.copytree(tiny_root / "successor" / "vanilla-s0", run)
    state = torch.load(run / "checkpoint.pt", weights_only=True)

    def write(change):
        torch.save(change(dict(state)), run / "checkpoint.pt")
        return run

    return write


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda s: [1, 2], "is not an abcmini checkpoint"),
        (lambda s: {k: v for k, v in s.items() if k != "model"}, "lacks its 'model'"),
        (lambda s: {k: v for k, v in s.items() if k != "history"}, "lacks its 'history'"),
        (lambda s: {**s, "history": "long"}, "'history' must be"),
        (lambda s: {**s, "model": {"w": 1}}, "'model' must map"),
        (lambda s: {**s, "config": {**s["config"], "colour": "red"}}, "unknown field 'colour'"),
        (lambda s: {**s, "config": 7}, "'config' must be"),
        (lambda s: {**s, "model": {}}, "weights do not fit"),
        (lambda s: {**s, "step": "ten"}, "'step' must be a whole number"),
        (
            lambda s: {
                **s,
                "model": {k: v[:1] if k.endswith("bias") else v for k, v in s["model"].items()},
            },
            "weights do not fit",
        ),
    ],
)
@pytest.mark.parametrize("command", ["eval", "calibrate", "train"])
def test_checkpoints_of_the_wrong_shape_are_one_line(broken_checkpoint, change, needle, command):
    run = broken_checkpoint(change)
    before = (run / "eval.json").read_bytes()
    args = [*TINY, "--steps", 4, "--resume", "--out"] if command == "train" else ["--no-wandb"]
    one_line(invoke(command, *args, run), needle)
    assert (run / "eval.json").read_bytes() == before and not (run / "abc_bias.pt").exists()


def test_a_checkpoint_of_another_model_than_experiment_json_records_is_one_line(
    broken_checkpoint, tiny_root, tmp_path
):
    """A checkpoint copied in from another run (here one more encoder layer) loads, but it is not
    the model the run's experiment.json names: eval and calibrate say so instead of testing it."""
    import torch

    from abcmini.experiment import run_config_of
    from abcmini.nn.decoder import build_model

    run = broken_checkpoint(lambda s: s)
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    config = {**state["config"], "enc_layers": 1}
    model = build_model(run_config_of({"config": config}).model_config())
    torch.save({**state, "config": config, "model": model.state_dict()}, run / "checkpoint.pt")
    for command in (
        ["eval", run, "--lengths", "3"],
        ["calibrate", run, "--min-accuracy", "0", "--samples", "20"],
    ):
        one_line(
            invoke(*command, "--no-wandb"),
            "holds another model than its experiment.json records (enc_layers 1 there, 0 in",
        )


def test_report_and_dashboard_name_a_checkpoint_of_the_wrong_shape(broken_checkpoint, tmp_path):
    run = broken_checkpoint(lambda s: {**s, "config": {**s["config"], "colour": "red"}})
    for command in (
        ("report", run.parent, "--out", tmp_path / "rep" / "report.md"),
        ("dashboard", run.parent, "--out", tmp_path / "d.html"),
    ):
        result = invoke(*command)
        assert "Traceback" not in result.output and result.exit_code in (0, 2), result.output


def test_a_results_root_with_links_back_up_counts_each_record_once_and_ends(tmp_path):
    """Two symlinks to ``.`` made the walk branch forever; a FIFO named like a record made it wait."""
    import shutil
    import time

    from abcmini.outputs.report import collect

    root = tmp_path / "root"
    shutil.copytree(os.path.join(ROOT, "results", "long", "successor"), root / "successor")
    (root / "self").symlink_to(".")
    (root / "again").symlink_to(".")
    (root / "successor" / "up").symlink_to("..")
    started = time.perf_counter()
    records = [r for r in collect(str(root)) if "(" not in r["run"]]
    assert (
        len(records) == len(list((root / "successor").glob("*/eval.json")))
        and time.perf_counter() - started < 10
    )
    fifo = root / "successor" / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "eval.json")
    one_line(invoke("report", root, "--out", tmp_path / "r" / "report.md"), "is not a regular file")


@pytest.mark.parametrize("name", ["report.md", "dashboard.html", "accuracy_successor.png"])
def test_reproduce_refuses_a_users_file_in_its_root_before_training(tmp_path, name):
    root = tmp_path / "root"
    root.mkdir()
    (root / name).write_text("mine\n")
    one_line(
        invoke("reproduce", "--quick", "--no-wandb", "--out", root), "was not written by abcmini"
    )
    assert (
        sorted(p.name for p in root.iterdir()) == [name] and (root / name).read_text() == "mine\n"
    )


def test_calibrate_and_an_abc_train_refuse_to_take_a_users_heatmap(tmp_path):
    """A user's ``abc_bias_cross.png`` in the directory its heatmaps go to: one line before any
    work, the file untouched and never listed as abcmini's."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "abc_bias_cross.png").write_bytes(b"\x89PNG mine")
    source = os.path.join(ROOT, "results", "sources", "paper64", "successor", "vanilla-s0")
    one_line(
        invoke("calibrate", source, "--no-wandb", "--out", mine / "x.pt"),
        "abc_bias_cross.png' was not written by abcmini",
    )
    one_line(
        invoke("train", "--method", "abc", *TINY[:4], "--no-wandb", "--out", mine),
        "abc_bias_cross.png' was not written by abcmini",
    )
    assert (
        sorted(p.name for p in mine.iterdir()) == ["abc_bias_cross.png"]
        and (mine / "abc_bias_cross.png").read_bytes() == b"\x89PNG mine"
    )


@pytest.mark.integration
def test_a_report_killed_between_its_figures_and_its_page_is_finished_by_the_same_command(tmp_path):
    """What a kill leaves: a figure noted in the manifest and written, no page yet, the page's
    temporary file. The same command finishes, and the temporary file is gone."""
    from abcmini.store import note_written

    out = tmp_path / "r"
    out.mkdir()
    note_written(str(out), "accuracy_successor.png")
    (out / "accuracy_successor.png").write_bytes(b"\x89PNG half")
    (out / "report.md.abcmini-k1ll3d0x.tmp").write_text("half a page")
    (out / "report.md.backup01.tmp").write_text("the user's own")  # not of abcmini's shape: stays
    result = invoke("report", os.path.join(ROOT, "results", "long"), "--out", out / "report.md")
    assert result.exit_code == 0, result.output
    assert (out / "report.md").exists() and [p.name for p in out.glob("*.tmp")] == [
        "report.md.backup01.tmp"
    ]
    assert (out / "report.md.backup01.tmp").read_text() == "the user's own"
    assert (out / "accuracy_successor.png").read_bytes() != b"\x89PNG half"


@pytest.mark.integration
def test_a_write_the_disk_refuses_is_one_line_naming_the_path_and_leaves_nothing_half_written(
    tmp_path,
):
    """A file size limit (RLIMIT_FSIZE) fails every write past 20 kB as a full disk would."""
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "train",
            *TINY,
            "--steps",
            "4",
            "--eval-every",
            "2",
            "--out",
            "run",
        ],
        cwd=tmp_path,
        env={**ENV, "PYTHONPATH": ROOT},
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, (
        result.stderr
    )
    assert "cannot write 'run/checkpoint.pt'" in lines[0] and "full disk" in lines[0], lines[0]
    assert not [
        p
        for p in tmp_path.rglob("*")
        if p.name.endswith(".tmp") or p.name.startswith(".abcmini-write-test")
    ]
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


@pytest.mark.parametrize("name", ["experiment.json", "checkpoint.pt", "eval.json"])
@pytest.mark.parametrize("flag", [None, "--overwrite", "--resume"])
def test_train_never_takes_a_users_file_of_a_run_files_name_in_its_out_folder(tmp_path, name, flag):
    """A user's experiment.json, checkpoint.pt or eval.json (in no manifest, beside no experiment
    record) is theirs: train refuses in one line before any work, with --overwrite too, and the
    file stays as it was."""
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text('{"mine": 1}')
    needle = {
        None: "was not written by abcmini",
        "--overwrite": "holds no abcmini run",
        "--resume": "holds no run to continue",
    }[flag]
    one_line(invoke("train", *TINY, "--steps", 2, "--out", run, *filter(None, [flag])), needle)
    assert (
        sorted(p.name for p in run.iterdir()) == [name]
        and (run / name).read_text() == '{"mine": 1}'
    )


def test_calibrate_run_again_as_before_finishes_and_takes_no_other_bias(tiny_root, tmp_path):
    """A calibration killed after its bias file was written (before its wandb run ended) is
    finished by the same command; other settings, or a bias file abcmini did not write there,
    are refused. The bias file's name need not be UTF-8."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_root / "successor" / "vanilla-s0", run)
    out = tmp_path / "cal" / "b\udcff.pt"
    command = [
        "calibrate",
        run,
        "--min-accuracy",
        "0",
        "--samples",
        "20",
        "--no-wandb",
        "--out",
        out,
    ]
    assert invoke(*command).exit_code == 0
    first = out.read_bytes()
    result = invoke(*command)
    assert result.exit_code == 0 and out.read_bytes() == first, result.output
    one_line(
        invoke(*command[:4], "--samples", "21", "--no-wandb", "--out", out),
        "pass --overwrite to replace it",
    )
    theirs = tmp_path / "cal" / "theirs.pt"
    shutil.copy(out, theirs)  # the same content, but not abcmini's file
    one_line(invoke(*command[:-1], theirs), "pass --overwrite to replace it")


@pytest.mark.parametrize(
    "command", [["recipe", "quick"], ["train", "--task", "bogus"], ["report", "--help"]]
)
def test_standard_output_on_a_full_device_is_one_line(command, empty_cwd):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "cli", *command],
            cwd=ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            timeout=60,
        )
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [["recipe", "quick"], ["train", "--help"]])
def test_a_reader_that_left_ends_abcmini_silently(command):
    """``abcmini … | head -1``: once the reader is gone, the write fails (EPIPE); abcmini ends
    with exit code 1 and nothing on stderr, as rich's console does, never a traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader left before the first write
    result = subprocess.run(
        [sys.executable, "-m", "cli", *command],
        cwd=ROOT,
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=60,
    )
    os.close(write)
    assert result.returncode == 1 and result.stderr == "", result.stderr


def test_a_stop_signal_waits_for_the_wandb_call_it_would_cut_in_half():
    """Inside ``signals_held`` (every wandb call) SIGTERM is held and raised as ``Stopped`` once the
    block ends; outside, it is raised where the program is."""
    import signal

    from abcmini.errors import Stopped, raise_stopped, signals_held

    previous = signal.signal(signal.SIGTERM, raise_stopped)
    try:
        finished = []
        with pytest.raises(Stopped):
            with signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                finished.append(True)
        assert finished == [True] and signal.getsignal(signal.SIGTERM) is raise_stopped
        with pytest.raises(Stopped):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_source_that_means_nothing_is_one_line(tmp_path):
    """``--source ''`` is refused as ``--out ''`` is, and ``--source`` with a method that
    calibrates nothing is refused as ``--abc-pad-width`` is, before anything is written."""
    one_line(invoke("train", "--method", "abc", "--source", "", *TINY), "--source is empty")
    out = tmp_path / "vanilla"
    one_line(
        invoke("train", "--method", "vanilla", "--source", tmp_path / "s", "--out", out, *TINY),
        "--method vanilla calibrates none",
    )
    assert not out.exists()


def test_a_source_another_process_trains_is_refused_or_waited_for(tmp_path):
    """ABC's source is locked while it trains: a second cell on it is refused in one line (or,
    with ``--continue``, waits), and never trains the same checkpoint beside the first."""
    source = tmp_path / "source"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from abcmini.store import lock_run\n"
            f"with lock_run({str(source)!r}):\n print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=ENV,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        result = invoke(
            "train", "--method", "abc", "--source", source, "--out", tmp_path / "abc", *TINY
        )
        one_line(result, "is in use by pid")
        assert time.monotonic() - start < 60 and not (source / "checkpoint.pt").exists()
    finally:
        holder.communicate("")


def test_the_memory_check_sees_the_frame_spread():
    """A frame spread widens every training batch's frame: a spread no machine can hold is
    refused in one line before anything is built (the dry run checks as a training would)."""
    one_line(
        invoke("train", "--task", "addition", "--frame-spread", "3000", "--dry-run", "--no-wandb"),
        "(+3000 frame spread)",
    )
    assert invoke("train", "--task", "addition", "--dry-run", "--no-wandb").exit_code == 0


def test_a_process_that_cannot_load_torch_under_ulimit_v_says_so_in_one_line(tmp_path):
    """Under an address-space limit too small for torch's libraries, ``train`` ends in one line
    naming the limit, exit code 2, not an ImportError traceback."""
    import resource

    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (200 << 20, 200 << 20))  # noqa: E731
    done = subprocess.run(
        [sys.executable, "-c", "import cli; cli.main()", "train", "--recipe", "quick"]
        + ["--out", str(tmp_path / "r"), "--no-wandb", "--threads", "1"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "ulimit -v" in lines[0], done.stderr[-600:]


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--bias", ""],
        ["train", "--out="],
        ["calibrate", "RUN", "--out", ""],
        ["report", "RUNS", "--out", ""],
        ["dashboard", "RUNS", "--out", ""],
        ["reproduce", "--quick", "--out", ""],
        ["compare", "RUNS", "--name", ""],
        ["eval", "RUN", "--lengths", ""],
    ],
)
def test_an_empty_value_is_refused_alike_for_every_option(args, tmp_path, monkeypatch):
    """An option given an empty value means nothing (``--out ''`` is not the default place): one
    line naming it, exit code 2, and nothing written."""
    monkeypatch.chdir(tmp_path)
    option = next(
        a.split("=")[0] for a, b in zip(args, [*args[1:], None]) if a.endswith("=") or b == ""
    )
    one_line(invoke(*args), f"{option} is empty")
    assert list(tmp_path.iterdir()) == []


def test_cpi_from_without_a_period_is_refused():
    """``--cpi-from end`` places CPI's origin: with no period it means nothing, one line."""
    one_line(invoke("train", "--cpi-from", "end", "--dry-run", "--no-wandb"), "needs a period")
    assert invoke("train", "--method", "+T=3", "--cpi-from", "end", "--dry-run").exit_code == 0
