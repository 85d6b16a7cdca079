"""The results page and the README's headline table are generated from the result records in
results/, never edited by hand."""

import html
import os
import re
import shlex
import statistics

import pytest

from abcmini.config import OPTIONS
from abcmini.experiment import Cell, resolve
from abcmini.outputs.dashboard import build
from abcmini.outputs.published import ANCHORS
from abcmini.outputs.report import collect, with_blocks, write_report
from abcmini.recipes import load_recipe

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier


def test_the_committed_results_page_is_what_its_command_generates(tmp_path):
    text, pngs = write_report(
        "results/paper", str(tmp_path / "results.md"), beside=("results/paper64",)
    )
    with open("docs/results.md") as f:
        assert f.read() == text, (
            "docs/results.md differs from its records: run abcmini report results/paper --out docs/results.md --beside results/paper64"
        )
    assert [p.rsplit("/", 1)[1] for p in pngs] == [
        f"accuracy_{t}.png" for t in ("successor", "addition", "nx1", "parity")
    ]


def test_the_readme_headline_is_the_records_main_table():
    with open("README.md") as f:
        readme = f.read()
    assert with_blocks(readme, collect("results/paper")) == readme, (
        "README's headline table differs from results/paper"
    )
    assert "| addition | nope+abc | 3 |" in readme  # the block is not empty


def test_the_committed_beyond_the_frame_page_is_what_its_command_generates(tmp_path):
    text, _ = write_report("results/long", str(tmp_path / "long.md"))
    with open("docs/long/results.md") as f:
        assert f.read() == text, (
            "docs/long/results.md differs from its records: run abcmini report results/long --out docs/long/results.md"
        )
    for (
        anchor
    ) in ANCHORS:  # every published anchor sits beside our long lengths, with its own protocol
        assert (
            f"| {anchor.method} | {anchor.task} | 1–{anchor.trained_digits} | {anchor.tested_digits} |"
            in text
        )
    assert "| abcmini nope+abc | addition | 1–7 | 100 |" in text
    assert "frame of its length plus the training numbers' leading zeros" in text


def test_the_dashboard_of_the_long_records_sets_the_published_anchors_beside_ours():
    page = build("results/long")
    table = page[page.index("<table class='published'>") :]
    table = table[: table.index("</table>")]
    assert all(anchor.source in table for anchor in ANCHORS) and "abcmini nope+abc" in table


DECODER_PAGE = (
    "abcmini report results/decoder --out docs/decoder/results.md --beside results/long "
    "--readme docs/todays-methods.md --block methods-table"
)


def test_the_committed_decoder_only_page_is_what_its_command_generates(tmp_path):
    text, _ = write_report(
        "results/decoder", str(tmp_path / "decoder.md"), beside=("results/long",)
    )
    with open("docs/decoder/results.md") as f:
        assert f.read() == text, (
            f"docs/decoder/results.md differs from its records: run {DECODER_PAGE}"
        )
    records = collect("results/decoder")
    assert records and all(r["arch"] == "decoder" for r in records)
    methods = {r["method"] for r in records}
    for scheme in (
        "random",
        "fire",
        "abacus",
        "coupling",
    ):  # today's methods, as trained in the protocol's frame and +varied
        assert {scheme, f"{scheme}+varied"} <= methods, scheme
        assert f"| successor | {scheme} |" in text and f"| successor | {scheme}+varied |" in text
    lines = text.splitlines()
    for anchor in ANCHORS:  # each published figure, then ours of its scheme
        row = next(i for i, line in enumerate(lines) if line.startswith(f"| {anchor.method} |"))
        assert lines[row + 1].startswith(f"| abcmini {anchor.scheme} |"), lines[row + 1]


def test_the_methods_table_of_todays_methods_md_is_its_records():
    with open("docs/todays-methods.md") as f:
        text = f.read()
    table = with_blocks(
        text, collect("results/decoder"), collect("results/long"), ("methods-table",)
    )
    assert table == text, (
        f"docs/todays-methods.md's methods table differs from its records: run {DECODER_PAGE}"
    )
    assert "| `coupling+varied` | decoder-only |" in text


OWN_PAGE = (
    "abcmini report results/own-papers --beside results/own-papers-authors --beside "
    "results/papers-scale --out runs/own-papers.md --readme docs/todays-methods.md --block own-papers"
)


def test_the_own_papers_table_of_todays_methods_md_is_its_records():
    """Each run in its own paper's shape (recipes own-papers and papers-scale), one row a record."""
    with open("docs/todays-methods.md") as f:
        text = f.read()
    records = collect("results/own-papers")
    beside = collect("results/own-papers-authors") + collect("results/papers-scale")
    table = with_blocks(text, records, beside, ("own-papers",))
    assert table == text, f"docs/todays-methods.md's own-papers table differs: run {OWN_PAGE}"
    assert len(records) == 10 and "| `papers-scale/coupling+varied-s0` |" in text


@pytest.mark.parametrize("root", ["own-papers", "papers-scale"])
def test_a_shipped_run_is_what_its_recipe_file_and_name_say(root):
    """A record made by ``abcmini train --recipe decoder`` and the options of its ``command`` (or
    by the recipe file itself) resolves to the same run and test as the recipe file
    ``recipes/ROOT.yaml`` with the options its directory name spells: the recipe file reruns it."""
    recipe = load_recipe(f"recipes/{root}.yaml")
    for record in collect(f"results/{root}"):
        cell, given = command_options(record["command"])
        made_by = cell.pop("recipe")  # a named recipe and options, or the recipe file itself
        shipped = resolve(
            recipe if made_by == root else load_recipe(made_by), Cell.of(**cell), given
        )
        named = resolve(recipe, Cell.of(**cell), name_options(os.path.basename(record["run"])))
        assert (named.run, named.lengths) == (shipped.run, shipped.lengths), record["run"]
        assert named.name == os.path.basename(record["run"])


def test_a_run_of_the_authors_recipe_is_what_the_recipe_file_resolves_today():
    """``results/own-papers-authors``: made by the recipe file itself; its record's shape (the
    block included), numbers, operand order, budget and tested lengths are those the file
    resolves to now, so an edit of the file that would change the rerun fails here."""
    recipe = load_recipe("recipes/own-papers-authors.yaml")
    records = collect("results/own-papers-authors")
    assert records
    for record in records:
        cell, given = command_options(record["command"])
        assert cell.pop("recipe") == "own-papers-authors"
        experiment = resolve(recipe, Cell.of(**cell), given)
        run = experiment.run
        assert experiment.name == os.path.basename(record["run"])
        assert (record["shape"], record["train_digits"], record.get("operand_order", "msd")) == (
            run.shape,
            run.train_digits,
            run.operand_order,
        )
        assert record["train_steps"] <= run.steps
        assert sorted(map(int, record["accuracy"])) == list(
            resolve(recipe, Cell.of(**cell)).lengths
        )


def command_options(command: str) -> tuple[dict, dict]:
    """``abcmini train --recipe R --task T --method M --seed S --key=value …`` as the cell's
    fields and the fields of its options (``OPTIONS``' types)."""
    cell, given = {}, {}
    words = shlex.split(command)[2:]
    by_option = {o.replace("_", "-"): (f, kind) for f, (o, kind, _) in OPTIONS.items()}
    while words:
        key, _, value = words.pop(0)[2:].partition("=")
        value = value or words.pop(0)
        if key in ("recipe", "task", "method", "seed"):
            cell[key] = int(value) if key == "seed" else value
        else:
            field, kind = by_option[key]
            given[field] = tuple(map(int, value.split(","))) if field == "lengths" else kind(value)
    return cell, given


def name_options(name: str) -> dict:
    """The overrides a run directory's name spells (``coupling+varied-s0-steps=14000,train_on=9.0``)."""
    spelled = re.fullmatch(r".+?-s\d+-?(.*)", name).group(1)
    kinds = {f: kind for f, (_, kind, _) in OPTIONS.items()}
    found = dict(re.findall(r"([a-z_]+)=(.+?)(?=,[a-z_]+=|$)", spelled))
    return {key: kinds[key](value) for key, value in found.items()}


def todays_rows(text: str) -> dict:
    """``{(task, method): cells}`` of the page's section on today's methods."""
    section = text[text.index("## Today's methods beside ABC and ABS") :]
    section, rows, task = section[: section.index("\n## ")], {}, None
    for line in section.splitlines():
        if line.startswith("### "):
            task = line[4:]
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[(task, cells[0].strip("`"))] = cells[1:]
    return rows


def test_the_decoder_pages_todays_methods_are_their_records_beside_abc_and_abs():
    with open("docs/decoder/results.md") as f:
        rows = todays_rows(f.read())
    records = [
        r
        for r in collect("results/decoder")
        if r["method"].split("+")[0] in ("random", "fire", "abacus", "coupling")
    ]
    tasks = {r["task"] for r in records}
    assert tasks >= {"successor", "addition"}
    for task in tasks:  # ABC in the decoder-only model, ABS where only the encoder-decoder ran it
        assert rows[(task, "nope+abc")][0] == "decoder-only"
        assert rows[(task, "vanilla+w=1+T=3")][0] == "encoder-decoder"
    for task, method in {(r["task"], r["method"]) for r in records}:
        runs = [r for r in records if (r["task"], r["method"]) == (task, method)]
        model, seeds, *accuracy = rows[(task, method)][:9]
        assert (model, int(seeds)) == ("decoder-only", len(runs)), (task, method)
        for n, shown in zip((6, 10, 20, 60, 100, 200, 500), accuracy):
            median = 100 * statistics.median(r["accuracy"][str(n)] for r in runs)
            assert float(shown.split(" ")[0]) == round(median, 2), (task, method, n, shown)
        steps = statistics.median(r["train_steps"] for r in runs)
        examples = statistics.median(r["train_examples"] for r in runs)
        assert rows[(task, method)][9:11] == [f"{steps:,.0f}", f"{examples / 1e6:.2f}"]


def test_the_dashboard_sets_todays_methods_beside_abc_and_abs_as_the_page_does():
    page = build(["results/decoder", "results/long"])
    section = page[page.index("<h2 id='todays-") :]
    section = section[: section.index("<h2 id='protocol-")]
    with open("docs/decoder/results.md") as f:
        expected = todays_rows(f.read())
    shown = {}
    for task, body in re.findall(r"<h3>(\w+)</h3>(.*?)</table>", section, re.S):
        assert "js-plotly-plot" in body or "plotly-graph-div" in body, (
            task
        )  # one accuracy plot per task
        for row in re.findall(r"<tr>((?:<td>.*?</td>)+)</tr>", body):
            cells = [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
            shown[(task, cells[0])] = cells[1:]
    assert shown == expected and ("addition", "vanilla+w=1+T=3") in shown


@pytest.mark.parametrize("root, task", [("multi", "multiadd"), ("multiply", "multiply")])
def test_the_committed_multi_operand_pages_are_what_their_command_generates(tmp_path, root, task):
    text, _ = write_report(f"results/{root}", str(tmp_path / "page.md"))
    with open(f"docs/{root}/results.md") as f:
        assert f.read() == text, (
            f"docs/{root}/results.md differs from its records: run abcmini report results/{root} --out docs/{root}/results.md"
        )
    records = collect(f"results/{root}")
    assert records and all(
        r["task"] == task and "final_accuracy" in r and ("operands" in r) == (task == "multiadd")
        for r in records
    )
    assert (
        "## Beyond the paper's tasks" in text
        and "Final number alone" in text
        and "Runs left out" not in text
    )


def test_the_calibrations_table_of_recipe_md_is_its_records():
    with open("docs/recipe.md") as f:
        text = f.read()
    beside = collect("results/abc64-ablation") + collect("results/long")
    assert with_blocks(text, collect("results/abc64"), beside) == text, (
        "docs/recipe.md's calibrations or departures table differs from its records: run abcmini "
        "report results/abc64 --out runs/abc64.md --readme docs/recipe.md --beside "
        "results/abc64-ablation --beside results/long"
    )
    assert (
        "| addition | 60 | 99.8 |" in text and "| Algorithm 1 | " in text
    )  # the blocks are not empty


def test_the_stress_table_of_decoder_only_md_is_its_records():
    with open("docs/decoder-only.md") as f:
        text = f.read()
    assert with_blocks(text, collect("results/decoder"), only=("stress",)) == text, (
        "docs/decoder-only.md's stress table differs from its records: run abcmini report "
        "results/decoder --out runs/decoder.md --readme docs/decoder-only.md --block stress"
    )
    assert "| carry_chain | nope+abc |" in text  # the block is not empty


def test_the_stress_table_of_multi_operand_md_is_its_records():
    with open("docs/multi-operand.md") as f:
        text = f.read()
    assert with_blocks(text, collect("results/stress")) == text, (
        "docs/multi-operand.md's stress table differs from its records: run abcmini report "
        "results/stress --out runs/stress.md --readme docs/multi-operand.md"
    )
    assert "| one_operand | nope+abc |" in text  # the block is not empty
