"""The results page and the README's headline table are generated from the result records in
results/, never edited by hand."""

from abcmini.report import collect, with_headline, write_report


def test_the_committed_results_page_is_what_its_command_generates(tmp_path):
    text, pngs = write_report("results/paper", str(tmp_path / "results.md"))
    with open("docs/results.md") as f:
        assert f.read() == text, "docs/results.md differs from its records: run abcmini report results/paper --out docs/results.md"
    assert [p.rsplit("/", 1)[1] for p in pngs] == [f"accuracy_{t}.png" for t in ("successor", "addition", "nx1", "parity")]


def test_the_readme_headline_is_the_records_main_table():
    with open("README.md") as f:
        readme = f.read()
    assert with_headline(readme, collect("results/paper")) == readme, "README's headline table differs from results/paper"
    assert "| addition | nope+abc | 3 |" in readme  # the block is not empty
