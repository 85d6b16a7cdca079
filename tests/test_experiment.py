"""One experiment definition behind every command: the CLI, the sweeps and `reproduce` resolve a
cell to the same configuration, and train the same model from it."""

import ast
import glob
import json
import os
import shlex
from dataclasses import fields

import pytest
import torch
from typer.testing import CliRunner

from abcmini.config import CALIBRATIONS, Calibration, RunConfig
from abcmini.experiment import (
    ABS_METHODS,
    ABS_TASKS,
    MAIN_METHODS,
    MAIN_TASKS,
    OVERRIDABLE,
    Cell,
    Experiment,
    option_name,
    resolve,
)
from abcmini.recipes import PAPER, PAPER64, QUICK, RECIPES, ConfigError, load_recipe
from abcmini.reproduce import plan, table_cells
from abcmini.sweep import command_line, expand, load_sweep
from cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

runner = CliRunner()
STUDIED = (
    "kappa_cross",
    "kappa_self",
    "calibration",
    "rules",
    "preset",
)  # what a sweep may vary beyond the cell; every other value is the recipe's
CELL = (
    "recipe",
    "task",
    "method",
    "seed",
    "window",
    "period",
    "threads",
)  # a cell's identity, and what changes no result
SHRUNK = {
    "smoke"
}  # sweeps that shrink the recipe (tiny runs): every value they set beyond the cell is an override


def dry_run(*args) -> dict:
    result = runner.invoke(app, ["train", *map(str, args), "--dry-run"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def reproduce_experiment(
    recipe, task, method, seed, overrides=None, window=None, period=None
) -> dict:
    """What `reproduce` resolves for a cell: the job of that cell in its plan."""
    cell = Cell.of(task, method, seed, window, period)
    (job,) = [job for job in plan(recipe, [cell], "root", overrides) if job.cell == cell]
    return job.experiment.to_dict()


def first_tier(values, kept) -> list:
    """``values`` as parameters: those in ``kept`` run in the first tier, every other one in the
    second (each takes a second or two of command lines; the first tier holds one of a kind)."""
    return [
        value if value in kept else pytest.param(value, marks=pytest.mark.integration)
        for value in values
    ]


@pytest.mark.usefixtures("empty_cwd")
@pytest.mark.parametrize(
    "path",
    first_tier(
        sorted(glob.glob("sweeps/*.yaml", root_dir=ROOT)),
        ("sweeps/abc64.yaml", "sweeps/own-papers.yaml"),
    ),
)
def test_every_sweep_run_resolves_to_what_reproduce_runs_for_its_cell(path):
    config = load_sweep(os.path.join(ROOT, path))
    runs = expand(config)
    assert len(runs) > 1
    for params in runs:
        if params["recipe"].endswith(".yaml"):  # a recipe file of the repository, by its path
            params = {**params, "recipe": os.path.join(ROOT, params["recipe"])}
        argv = command_line(config, params, interpreter="python")
        assert argv[:5] == ["python", "-m", "cli", "train", "--continue"]
        resolved = dry_run(*argv[5:])["experiment"]
        shrunk = config["name"] in SHRUNK
        overrides = {
            key: value
            for key, value in params.items()
            if (key not in CELL if shrunk else key in STUDIED)
        }
        if (
            "calibration" in overrides
        ):  # --calibration NAME: the field algorithm and the settings it implies
            name = overrides.pop("calibration")
            overrides |= {"algorithm": name, **CALIBRATIONS[name]}
        if isinstance(overrides.get("lengths"), str):  # the command line's comma-separated form
            overrides["lengths"] = [int(n) for n in overrides["lengths"].split(",")]
        expected = reproduce_experiment(
            load_recipe(params["recipe"]),
            params["task"],
            params["method"],
            params.get("seed", 0),
            overrides,
            params.get("window"),
            params.get("period"),
        )
        if expected["calibration"]:  # the dry run prints what the calibration reads
            expected["calibration"] = Calibration(**expected["calibration"]).used()
        assert resolved == expected, (argv, resolved, expected)


@pytest.mark.parametrize("recipe", first_tier(sorted(RECIPES), ("paper",)))
@pytest.mark.usefixtures("empty_cwd")
def test_train_resolves_every_cell_of_both_tables_as_reproduce_does(recipe):
    cells = table_cells(MAIN_TASKS, MAIN_METHODS, (0, 1, 2)) + table_cells(
        ABS_TASKS, ABS_METHODS, (0, 1, 2)
    )
    assert len(set(cells)) == 3 * (3 * 4 + 4 * 4 - 3)  # both tables, Vanilla once per task
    jobs = {
        job.cell: job.experiment.to_dict()
        for job in plan(RECIPES[recipe], cells, "root")
        if not job.train_only
    }
    for cell in cells:
        resolved = dry_run(
            "--recipe", recipe, "--task", cell.task, "--method", cell.method, "--seed", cell.seed
        )
        assert resolved["experiment"] == jobs[cell], cell
        assert resolved["experiment"]["overrides"] == {}


@pytest.mark.usefixtures("empty_cwd")
def test_an_option_overrides_one_field_and_is_recorded():
    plain = dry_run("--task", "addition", "--method", "abc")
    assert plain["out"] == os.path.join("runs", "paper", "addition", "abc-s0")
    assert plain["source"] == os.path.join(
        "runs", "paper", "addition", "vanilla-s0-pad_width=10"
    )  # ABC's own frame
    changed = dry_run(
        "--task", "addition", "--method", "abc", "--steps", 99, "--kappa-cross", 3, "--lr", 0.002
    )
    assert changed["experiment"]["overrides"] == {"steps": 99, "kappa_cross": 3.0, "lr": 0.002}
    assert changed["experiment"]["run"]["steps"] == 99 and changed["experiment"]["source"][
        "steps"
    ] == PAPER.cap("addition", "vanilla")
    assert (
        changed["experiment"]["source"]["lr"] == 0.002
    )  # the optimizer is shared by source and retraining
    assert changed["experiment"]["calibration"]["kappa_cross"] == 3.0
    assert changed["out"] != plain["out"] and changed["source"] != plain["source"]
    for key in ("run", "calibration"):
        differing = {
            k
            for k in plain["experiment"][key]
            if plain["experiment"][key][k] != changed["experiment"][key][k]
        }
        assert differing == {"run": {"steps", "lr"}, "calibration": {"kappa_cross"}}[key]
    # the recipe's own value is no override
    assert (
        dry_run(
            "--task", "addition", "--method", "abc", "--kappa-cross", PAPER.calibration.kappa_cross
        )
        == plain
    )
    # options that only name the cell are no override either
    assert (
        dry_run("--method", "vanilla", "--window", 1, "--period", 3)["experiment"]
        == dry_run("--method", "+T=3")["experiment"]
    )


@pytest.mark.usefixtures("empty_cwd")
def test_every_field_a_recipe_sets_is_one_train_option_and_round_trips():
    """The schema is written once: each overridable field reaches its run through its own option,
    and the command an experiment records resolves to the same experiment."""
    changed = {
        "arch": "decoder",
        "preset": "tiny",
        "pe_scale": 0.5,
        "pad_width": 30,
        "frame_spread": 2,
        "data_seed": 4,
        "steps": 77,
        "min_steps": 33,
        "batch_size": 16,
        "lr": 0.002,
        "warmup": 7,
        "stop_at": 0.9,
        "train_on": 2.0,
        "eval_every": 11,
        "valid_size": 33,
        "abc_pad_width": 12,
        "kappa_self": 0.5,
        "kappa_cross": 3.0,
        "min_support": 0.25,
        "samples": 40,
        "seed": 5,
        "min_accuracy": 0.5,
        "rules": "all,-band",
        "lengths": (6, 9),
        "test_seed": 3,
        "test_frame": "fixed",
        "layers": 3,
        "heads": 2,
        "d_model": 32,
        "train_digits": 8,
        "train_numbers": "uniform",
        "operand_order": "reversed",
        "top_share": 0.25,
        "norm": "rms",
        "norm_position": "pre_post",
        "ff": "gated-gelu",
    }
    # --bias: test_an_option_…; a decoder has no encoder; ABC's model has no position table (test_a_model_shape_…)
    # … and unequal operands are +varied Addition's (below); Coupling's levels are coupling's
    # (test_schemes.py::test_coupling_second_level_…); --calibration has no rules but abcmini's (below, and
    # test_the_dry_run_names_the_calibration_…)
    assert set(changed) == set(OVERRIDABLE) - {
        "bias_file",
        "enc_layers",
        "window_unit",
        "max_position",
        "operand_lengths",
        "min_operands",  # multiadd's (test_multiadd.py::test_min_operands_1_…)
        "coupling_levels",
        "algorithm",
        "cpi_from",  # CPI's origin: a method with a period (below)
        "index_hints",  # Zhou et al.'s, not ABC's (test_schemes.py::test_hints_and_randomized_…)
        "fire_positions",
        "batch_lengths",  # +varied in the decoder-only model (test_schemes.py::test_a_row_of_…)
    }
    cpi = dry_run("--method", "+T=3", "--cpi-from", "start")["experiment"]  # the recipe's: end
    assert cpi["overrides"] == {"cpi_from": "start"} and cpi["run"]["cpi_from"] == "start"
    named = dry_run(
        "--task", "addition", "--method", "abc", "--calibration", "authors", "--seed", 2
    )
    assert dry_run(*shlex.split(named["experiment"]["command"])[2:]) == named
    unequal = dry_run(
        "--task",
        "addition",
        "--method",
        "coupling+varied",
        "--train-digits",
        9,
        "--operand-lengths",
        "unequal",
    )
    assert (
        unequal["experiment"]["run"]["operand_lengths"] == "unequal"
        and "operand_lengths=unequal" in unequal["out"]
    )
    assert dry_run("--enc-layers", 2)["experiment"]["overrides"] == {"enc_layers": 2}
    paired = dry_run("--task", "addition", "--method", "+w=1", "--window-unit", "column")[
        "experiment"
    ]  # a window on a binary task
    assert (
        paired["overrides"] == {"window_unit": "column"}
        and paired["run"]["window_unit"] == "column"
    )
    args = [
        f"--{option_name(field).replace('_', '-')}={','.join(map(str, v)) if isinstance(v, tuple) else v}"
        for field, v in changed.items()
    ]
    resolved = dry_run("--task", "addition", "--method", "abc", *args)["experiment"]
    assert {
        k: tuple(v) if isinstance(v, list) else v for k, v in resolved["overrides"].items()
    } == changed
    experiment = Experiment.from_dict(resolved)
    assert experiment.to_dict() == resolved and experiment.calibration.seed == 5
    assert experiment.source.lr == 0.002 and experiment.source.steps == PAPER.cap(
        "addition", "vanilla"
    )  # shared and own fields
    again = dry_run(*shlex.split(experiment.command)[2:])["experiment"]
    assert again == resolved


def test_a_model_shape_set_by_options_is_the_runs_and_a_protocol_of_its_own():
    """--layers, --heads, --d-model and --max-position change the preset's model (a method in its
    own paper's shape); the record names the shape, and the report pools it apart."""
    from abcmini.nn.decoder import build_model
    from abcmini.outputs.report import describe_protocol, protocol

    options = ("--layers", 1, "--heads", 4, "--d-model", 128, "--max-position", 64)
    run = dry_run(
        "--recipe",
        "decoder",
        "--task",
        "addition",
        "--method",
        "coupling",
        *map(str, options),
        "--lengths",
        "6,10,20",  # what 64 ids hold
    )["experiment"]["run"]
    cfg = RunConfig(**run)
    model = build_model(cfg.model_config())
    assert (len(model.layers), model.cfg.heads, model.cfg.d_model, model.cfg.d_ff) == (
        1,
        4,
        128,
        512,
    )
    assert (
        model.token_positions.table.num_embeddings == 65
        and cfg.shape == "1 layer, 4 heads, d 128, 64 positions"
    )
    preset = {
        "recipe": "decoder",
        "arch": "decoder",
        "preset": "cpu",
        "pad_width": 12,
        "test_frame": "follows",
    }
    assert (
        protocol({**preset, "shape": cfg.shape})
        != protocol(preset)
        == protocol({**preset, "shape": None})
    )
    assert "preset cpu (1 layer, 4 heads, d 128, 64 positions)" in describe_protocol(
        protocol({**preset, "shape": cfg.shape})
    )
    assert (
        RunConfig(task="addition", arch="decoder").model_config().dec_layers == 4
    )  # the preset's two layers, doubled
    for bad, needle in [
        (("--heads", 3), "must be a multiple of its heads (3)"),
        (("--max-position", 64), "vanilla has none"),
        (("--layers", 0), "--layers must be at least 1"),
    ]:
        result = runner.invoke(app, ["train", *map(str, bad), "--dry-run"])
        assert result.exit_code == 2 and needle in result.output, result.output


ACTIONS = {  # per command, the options that are no setting of a run: what the command does with one
    "train": {
        "recipe",
        "growing",
        "out",
        "source",
        "resume",
        "proceed",
        "overwrite",
        "threads",
        "device",
        "wandb",
        "wandb_project",
        "dry_run",
    },
    "eval": {"run_dir", "batch_size", "stress", "wandb", "wandb_project", "device"},
    "calibrate": {"run_dir", "recipe", "out", "overwrite", "wandb", "wandb_project"},
    "recipe": {"name"},
    "report": {"runs_dir", "out", "readme", "beside", "block"},
    "compare": {"runs_dirs", "name", "out", "wandb_project"},
    "dashboard": {"runs_dirs", "out"},
    "reproduce": {
        "recipe",
        "tasks",
        "methods",
        "seeds",
        "quick",
        "out",
        "workers",
        "wandb",
        "wandb_project",
        "dry_run",
    },
    "sweep": {"file", "count", "dry_run"},
    "sync": {"root", "entity", "project", "dry_run"},
    "workspace": {"root", "entity", "project", "dry_run"},
}


def test_every_train_option_is_one_schema_field_and_every_field_one_option():
    """A setting is declared once (``abcmini.config``): the command line has no option of its own
    for it, no two fields share an option, and every field the command line may set has one."""
    import typer

    from abcmini.config import CELL_OPTIONS, EXPERIMENT_FIELDS, OPTIONS, Calibration, RunConfig

    run = {f.name for f in fields(RunConfig) if f.metadata["role"] != "cell"}
    declared = [*run, *(f.name for f in fields(Calibration)), *EXPERIMENT_FIELDS]
    assert len(declared) == len(set(declared)) and set(OPTIONS) == set(declared) == set(OVERRIDABLE)
    options = [param.name for param in typer.main.get_command(app).commands["train"].params]
    fielded = [option for option, _, _ in OPTIONS.values()]
    assert len(options) == len(set(options)) and len(fielded) == len(set(fielded))
    assert set(fielded) <= set(options) and set(options) - set(fielded) == ACTIONS["train"] | set(
        CELL_OPTIONS
    )
    assert all(OPTIONS[name][2] for name in OPTIONS), (
        "every field the command line sets has its help"
    )


def test_no_command_declares_a_setting_by_hand():
    """Every option of every command is a command's own action (``ACTIONS``) or a setting whose
    help, and so whose declaration, is the schema's: a field (``OPTIONS``) or a cell's identity
    (``CELL_OPTIONS``, defaults too)."""
    import typer

    from abcmini.config import CELL_OPTIONS, OPTIONS

    declared = {help for _, _, help in OPTIONS.values()}
    commands = typer.main.get_command(app).commands
    assert set(commands) == set(ACTIONS)
    for name, command in commands.items():
        for param in command.params:
            if param.name in ACTIONS[name]:
                continue
            if name == "train" and param.name in CELL_OPTIONS:
                assert (param.default, param.help) == CELL_OPTIONS[param.name], param.name
            else:
                assert param.help in declared, (
                    f"{name} --{param.name} is declared in cli.py, not in abcmini.config"
                )


@pytest.mark.usefixtures("empty_cwd")
def test_a_recipe_file_is_a_copy_with_edits(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "base: quick\npad_width: 30\nabc_pad_width: 16\ncalibration:\n  kappa_cross: 3.5\n"
    )
    mine = load_recipe(str(path))
    assert mine.name == "mine" and mine.pad_width == 30 and mine.steps == QUICK.steps
    assert mine.abc_pad_width == 16 and mine.calibration.kappa_cross == 3.5
    assert mine.calibration.samples == QUICK.calibration.samples
    resolved = dry_run("--recipe", path, "--method", "abc")
    assert resolved["out"] == os.path.join("runs", "mine", "successor", "abc-s0")
    assert (
        resolved["experiment"]["run"]["pad_width"] == 16
        and resolved["experiment"]["test_pad_width"] == 30
    )
    path.write_text("base: paper\nsteps_per_day: 3\n")
    result = runner.invoke(app, ["train", "--recipe", str(path), "--dry-run"])
    assert (
        result.exit_code == 2
        and "unknown field 'steps_per_day'" in result.output
        and "Traceback" not in result.output
    )


def test_on_an_interleaved_input_the_operand_pair_is_the_unit_of_window_and_cpi():
    from abcmini.experiment import resolve
    from abcmini.nn.model import Transformer

    paired, columns = (
        resolve(recipe, Cell("addition", "vanilla+w=1+T=3", 0)).run for recipe in (PAPER, PAPER64)
    )
    assert (paired.window_unit, paired.model_config().cpi_unit) == ("pair", "pair")
    assert (columns.window_unit, columns.model_config().cpi_unit) == ("column", "token")
    assert (
        resolve(PAPER, Cell("successor", "vanilla+w=1+T=3", 0)).run.window_unit == "column"
    )  # a unary input has no pairs
    # "+ a_3 b_3 a_2 b_2 a_1 b_1": both digits of a pair share its phase, counted from the least significant pair
    assert Transformer(paired.model_config()).input_positions(7).tolist() == [0, 2, 2, 1, 1, 0, 0]
    assert Transformer(columns.model_config()).input_positions(7).tolist() == [0, 1, 2, 0, 1, 2, 0]
    with pytest.raises(ConfigError, match="CPI in operand pairs"):
        resolve(
            PAPER.derive(arch=("decoder", "a decoder-only model")),
            Cell("addition", "vanilla+w=1+T=3", 0),
        )


def test_every_recipe_value_carries_a_reason():
    for recipe in RECIPES.values():
        for name, _, reason in recipe.reasons():
            assert reason and len(reason) < 110, name
    quick, paper = ({name: reason for name, _, reason in r.reasons()} for r in (QUICK, PAPER))
    assert {name for name in quick if quick[name] != paper[name]} == {
        "name",
        "pad_width",
        "lengths",
        "steps",
        "valid_size",
        "test_frame",
        "calibration.samples",
    }
    result = runner.invoke(app, ["recipe", "quick"])
    assert result.exit_code == 0 and "kappa_cross" in result.output and "3.0" in result.output


def test_train_help_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["train", "--help"], terminal_width=80)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) < 80 and max(map(len, lines)) <= 80, len(lines)
    options = [line.split() for line in lines if line.startswith("  --")]
    assert len(options) > 50 and all(len(words) > 2 for words in options), options  # each has help
    assert "…" not in "".join(line.split()[0] for line in lines if line.strip().startswith("--"))
    assert "`" not in result.output and "_" not in "".join(
        line.split()[0] for line in lines if line.strip().startswith("--")
    )


def imports_of(path: str) -> list[tuple[str, bool]]:
    """``(abcmini module, imported at top level)`` for every import of an abcmini module in ``path``
    (``nn.model``, ``store``; a package's ``__init__`` by the package's name)."""
    tree, found = ast.parse(open(path).read()), []
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("abcmini."):
            found.append((node.module.removeprefix("abcmini."), id(node) in top))
    return found


def test_the_package_imports_one_way_down():
    """No import cycle, no import hidden in a function, and the library (``abcmini.nn``) imports
    nothing of abcmini outside it."""
    paths = glob.glob("abcmini/**/*.py", recursive=True)
    modules = {
        p[len("abcmini/") : -3].replace("/", ".").removesuffix(".__init__"): p
        for p in paths
        if p != "abcmini/__init__.py"
    }
    graph = {name: {module for module, _ in imports_of(path)} for name, path in modules.items()}
    assert all(top for path in modules.values() for _, top in imports_of(path)), (
        "an abcmini import hides inside a function"
    )
    for name, imported in graph.items():
        if name.startswith("nn"):
            assert all(module == "nn" or module.startswith("nn.") for module in imported), (
                f"abcmini.{name} imports {imported}"
            )
    done, visiting = set(), []

    def visit(name):
        assert name not in visiting, f"import cycle: {' → '.join(visiting + [name])}"
        if name not in done:
            visiting.append(name)
            for other in graph[name]:
                visit(other)
            visiting.pop()
            done.add(name)

    for name in graph:
        visit(name)


def accuracies(run_dir) -> dict:
    return json.loads((run_dir / "eval.json").read_text())["accuracy"]


def abc_twice(recipe: str, root) -> tuple[dict, dict]:
    """The ABC cell of ``recipe`` on Successor, seed 0, from `reproduce` (a worker, one thread)
    and from `train --threads 1`."""
    result = runner.invoke(
        app,
        [
            "reproduce",
            "--recipe",
            recipe,
            "--tasks",
            "successor",
            "--methods",
            "abc",
            "--seeds",
            "0",
            "--workers",
            "1",
            "--out",
            str(root / "reproduce"),
        ],
    )
    assert result.exit_code == 0, result.output
    threads = torch.get_num_threads()
    try:
        result = runner.invoke(
            app,
            [
                "train",
                "--recipe",
                recipe,
                "--task",
                "successor",
                "--method",
                "abc",
                "--threads",
                "1",
                "--no-wandb",
                "--out",
                str(root / "train"),
            ],
        )
    finally:
        torch.set_num_threads(threads)
    assert result.exit_code == 0, result.output
    first, weights = (
        torch.load(root / run / "checkpoint.pt", weights_only=True)["model"]
        for run in ("reproduce/successor/abc-s0", "train")
    )  # the same weights, bit for bit
    assert weights.keys() == first.keys()
    assert all(torch.equal(weights[name], first[name]) for name in first)
    return accuracies(root / "reproduce" / "successor" / "abc-s0"), accuracies(root / "train")


@pytest.mark.integration
def test_train_gives_reproduces_abc_cell_bit_for_bit(tmp_path):
    """A small recipe file (quick, in a pad-12 frame) so the default test run stays short."""
    recipe = tmp_path / "small.yaml"
    recipe.write_text(
        "base: quick\npad_width: 12\nlengths: [6, 12]\neval_every: 100\nvalid_size: 300\nabc_train_on: 1.0\n"
        "calibration: {samples: 200}\n"
    )
    from_reproduce, from_train = abc_twice(str(recipe), tmp_path)
    assert set(from_train) == {"6", "12"} and from_train == from_reproduce
    assert from_train["12"] > 0.5  # an ABC model that extrapolates
    record = json.loads(
        (tmp_path / "train" / "eval.json").read_text()
    )  # the budget: retraining and source, in examples seen
    batch = QUICK.batch_size
    assert record["train_examples"] == record["train_steps"] * batch > 0
    assert record["interpolation_examples"] == record["interpolation_steps"] * batch > 0
    # a cell stopped before its first test, tested by abcmini eval: its source's cost is in the record too
    written = {
        k: record[k]
        for k in (
            "source",
            "interpolation_steps",
            "interpolation_examples",
            "interpolation_seconds",
        )
    }
    (tmp_path / "train" / "eval.json").unlink()
    result = runner.invoke(app, ["eval", str(tmp_path / "train"), "--lengths", "6", "--no-wandb"])
    assert result.exit_code == 0, result.output
    tested = json.loads((tmp_path / "train" / "eval.json").read_text())
    assert {k: tested.get(k) for k in written} == written and written["source"] == "source"


@pytest.mark.slow
def test_train_recipe_quick_gives_reproduce_quicks_abc_cell_bit_for_bit(tmp_path):
    from_reproduce, from_train = abc_twice("quick", tmp_path)
    assert set(from_train) == {"6", "10", "15", "20"} and from_train == from_reproduce


@pytest.mark.usefixtures("empty_cwd")
def test_the_dry_run_names_the_calibration_and_prints_what_it_reads():
    from abcmini.nn.rules import BLOCK_ONLY, DEFAULT, RULES

    paper = dry_run("--task", "addition", "--method", "abc", "--calibration", "paper")
    assert paper["calibration"] == "Algorithm 1 (paper)"
    assert paper["experiment"]["calibration"] == {
        "algorithm": "paper",
        "kappa_self": 0.87,
        "kappa_cross": 4.5,
        "samples": 1000,
        "seed": 0,
        "min_accuracy": 0.99,
    }  # no min_support, no rules
    authors = dry_run("--task", "successor", "--method", "abc", "--calibration", "authors")
    assert (
        authors["calibration"].startswith("authors' code")
        and authors["experiment"]["calibration"]["kappa_cross"] == 4.5
    )
    ours = dry_run("--task", "addition", "--method", "abc")
    assert list(DEFAULT) == list(RULES)  # "all": every rule
    assert ours["calibration"] == "abcmini procedure: rules " + ", ".join(
        r for r in DEFAULT if r not in BLOCK_ONLY
    )
    assert (
        ours["experiment"]["calibration"]["rules"] == "all"
        and ours["experiment"]["calibration"]["min_support"] == 0.5
    )
    blocks = dry_run("--recipe", "multiadd", "--task", "multiadd", "--method", "abc")["calibration"]
    assert (
        blocks == "abcmini procedure: rules unite_layers, support, band, rank_own, vertical_kappa0"
    )  # what block lines read
    without = dry_run("--task", "addition", "--method", "abc", "--rules", "all,-same_digit")[
        "calibration"
    ]
    assert without == "abcmini procedure: rules " + ", ".join(
        r for r in DEFAULT if r not in ("same_digit", *BLOCK_ONLY)
    )
    mixed = dry_run(
        "--task", "addition", "--method", "abc", "--calibration", "paper", "--kappa-cross", "2.5"
    )
    assert (
        mixed["experiment"]["calibration"]["kappa_cross"] == 2.5
        and mixed["experiment"]["overrides"]["algorithm"] == "paper"
    )
    for option in ("--rules=band", "--min-support=0.3"):
        refused = runner.invoke(
            app,
            [
                "train",
                "--task",
                "successor",
                "--method",
                "abc",
                "--calibration",
                "paper",
                option,
                "--dry-run",
            ],
        )
        assert refused.exit_code == 2 and "does not read it" in refused.output


def test_a_recipe_files_cells_set_each_cells_own_run_most_specific_last(tmp_path):
    """``cells:`` settings by ``*``, task, method and ``TASK METHOD``: each over the one before,
    values of the recipe (no override in the run's name), the command line over them all."""
    path = tmp_path / "shapes.yaml"
    path.write_text(
        "base: decoder\ncells:\n  '*': {train_numbers: uniform}\n"
        "  coupling+varied: {layers: 1, heads: 4}\n  nx1: {steps: 9000, layers: 3}\n"
        "  nx1 coupling+varied: {layers: 2}\n"
    )
    recipe = load_recipe(str(path))
    runs = {
        (task, method): resolve(recipe, Cell(task, method, 0))
        for task in ("addition", "nx1")
        for method in ("coupling+varied", "fire+varied")
    }
    shapes = {key: (e.run.layers, e.run.heads, e.run.steps) for key, e in runs.items()}
    assert shapes == {
        ("addition", "coupling+varied"): (1, 4, RECIPES["decoder"].steps),
        ("addition", "fire+varied"): (None, None, RECIPES["decoder"].steps),
        ("nx1", "coupling+varied"): (2, 4, 9000),
        ("nx1", "fire+varied"): (3, None, 9000),
    }
    assert all(e.run.train_numbers == "uniform" and not e.overrides for e in runs.values())
    given = resolve(recipe, Cell("nx1", "coupling+varied", 0), {"layers": 5})
    assert given.run.layers == 5 and given.name == "coupling+varied-s0-layers=5"
    child = tmp_path / "child.yaml"  # its cells merge over its base's, field by field
    child.write_text("base: shapes.yaml\ncells:\n  nx1: {steps: 7000}\n  '*': {train_digits: 9}\n")
    run = resolve(load_recipe(str(child)), Cell("nx1", "coupling+varied", 0)).run
    assert (run.layers, run.heads, run.steps, run.train_digits) == (2, 4, 7000, 9)
    assert run.train_numbers == "uniform"


@pytest.mark.parametrize(
    "cells, complaint",
    [
        ("'*': {layerz: 1}", "'layerz' is not a field a run can set"),
        ("sucessor: {layers: 1}", "sucessor"),
        ("'nx1 coupling+varied+varied': {layers: 1}", "nx1 coupling+varied+varied"),
        ("'*': {layers: one}", "layers must be an integer"),
        ("'*': {task: nx1}", "'task' is not a field a run can set"),
        ("'*': [layers]", "maps fields to values"),
        ("[1, 2]", "cells maps"),
        ("'nx1 vanilla extra': {layers: 1}", "is not '*', a task, a method or 'TASK METHOD'"),
    ],
)
def test_a_recipe_files_cells_are_checked_before_anything_runs(tmp_path, cells, complaint):
    path = tmp_path / "bad.yaml"
    body = f" {cells}" if cells.startswith("[") else f"\n  {cells}"
    path.write_text(f"base: decoder\ncells:{body}\n")
    result = runner.invoke(app, ["train", "--recipe", str(path), "--dry-run"])
    assert result.exit_code == 2 and complaint in result.output, result.output
    assert "Traceback" not in result.output


def test_a_recipe_files_step_caps_join_its_bases_table_and_are_checked(tmp_path):
    """A row a file names replaces the base's in place (its precedence kept); a new row goes last
    and wins over the rows before it; a kind (abc, abs, todays, plain) names every method of it."""
    path = tmp_path / "caps.yaml"
    path.write_text("base: long\nstep_caps: {nx1 abs: 100, addition plain: 50, alibi: 7}\n")
    recipe = load_recipe(str(path))
    selectors = [row[0] for row in recipe.step_caps]
    assert selectors[-1] == "addition plain" and selectors.index("alibi") == 0
    cap = {m: resolve(recipe, Cell.of("addition", m, 0)).run.steps for m in ("alibi", "nope")}
    assert cap == {"alibi": 50, "nope": 50}  # the later row wins
    assert resolve(recipe, Cell.of("nx1", "+T=3", 0)).run.steps == 100
    assert resolve(recipe, Cell.of("nx1", "fire", 0)).run.steps == 12000  # nx1 todays: long's
    assert resolve(recipe, Cell.of("successor", "alibi", 0)).run.steps == 7
    for caps, complaint in [
        ("{nx1 sometimes: 5}", "unknown method 'sometimes'"),
        ("{nx1 abc: 0}", "at least 1"),
        ("[nx1 abc]", "step_caps maps a selector to a step cap"),
    ]:
        path.write_text(f"base: long\nstep_caps: {caps}\n")
        result = runner.invoke(app, ["train", "--recipe", str(path), "--dry-run"])
        assert result.exit_code == 2 and complaint in result.output, result.output


@pytest.mark.usefixtures("empty_cwd")
def test_operand_order_is_a_data_option_that_abcs_source_shares():
    reversed_ = dry_run("--task", "addition", "--method", "abc", "--operand-order", "reversed")
    experiment = reversed_["experiment"]
    assert experiment["run"]["operand_order"] == experiment["source"]["operand_order"] == "reversed"
    assert experiment["overrides"] == {"operand_order": "reversed"}
    assert reversed_["out"].endswith("abc-s0-operand_order=reversed")
    assert dry_run("--task", "addition")["experiment"]["run"]["operand_order"] == "msd"
    result = runner.invoke(app, ["train", "--operand-order", "backwards", "--dry-run"])
    assert result.exit_code == 2 and "--operand-order is msd or reversed" in result.output
    with pytest.raises(ConfigError, match="pass --cpi-from start"):  # CPI with no window
        RunConfig(period=3, cpi_from="end", operand_order="reversed")
    shape = RunConfig(layers=1, norm="rms", norm_position="pre_post", ff="gated-gelu").shape
    assert shape == "1 layer, RMSNorm, norms before and after, gated GELU"  # pooled apart
    block = runner.invoke(app, ["train", "--ff", "relu", "--dry-run"])
    assert block.exit_code == 2 and "--ff is gelu or gated-gelu, not 'relu'" in block.output
    assert RunConfig(period=3, cpi_from="start", operand_order="reversed").form.reversed
    window = runner.invoke(
        app, ["train", "--method", "+w=1", "--operand-order", "reversed", "--dry-run"]
    )
    assert window.exit_code == 2 and "takes a method without one" in window.output


def test_tests_stop_after_the_first_length_below_test_until():
    experiment = resolve(
        load_recipe("decoder").derive(test_until=(0.01, "stop early")), Cell("nx1", "vanilla", 0)
    )
    assert experiment.lengths == (6, 10, 20, 60, 100, 200, 500)
    assert experiment.to_test({}) == experiment.lengths
    assert experiment.to_test({"6": 1.0, "10": 0.5}) == (20, 60, 100, 200, 500)
    assert experiment.to_test({"6": 1.0, "10": 0.005}) == ()  # 10 below 1%: nothing after it
    assert experiment.to_test({"6": 0.0}) == ()
    assert Experiment.from_dict(experiment.to_dict()).test_until == 0.01
    never = resolve(load_recipe("decoder"), Cell("nx1", "vanilla", 0))
    assert never.to_test({"6": 0.0, "10": 0.0}) == (20, 60, 100, 200, 500)
