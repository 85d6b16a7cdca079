"""The results page and the README's headline table are generated from the result records in
results/, never edited by hand."""

from abcmini.dashboard import build
from abcmini.published import ANCHORS
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


def test_the_committed_beyond_the_frame_page_is_what_its_command_generates(tmp_path):
    text, _ = write_report("results/long", str(tmp_path / "long.md"))
    with open("docs/long/results.md") as f:
        assert f.read() == text, "docs/long/results.md differs from its records: run abcmini report results/long --out docs/long/results.md"
    for anchor in ANCHORS:  # every published anchor sits beside our long lengths, with its own protocol
        assert f"| {anchor.method} | {anchor.task} | 1–{anchor.trained_digits} | {anchor.tested_digits} |" in text
    assert "| abcmini nope+abc | addition | 1–7 | 100 |" in text
    assert "frame of its length plus the training numbers' leading zeros" in text


def test_the_dashboard_of_the_long_records_sets_the_published_anchors_beside_ours():
    page = build("results/long")
    table = page[page.index("<table class='published'>"):]
    table = table[: table.index("</table>")]
    assert all(anchor.source in table for anchor in ANCHORS) and "abcmini nope+abc" in table


def test_the_committed_decoder_only_page_is_what_its_command_generates(tmp_path):
    text, _ = write_report("results/decoder", str(tmp_path / "decoder.md"))
    with open("docs/decoder/results.md") as f:
        assert f.read() == text, "docs/decoder/results.md differs from its records: run abcmini report results/decoder --out docs/decoder/results.md"
    records = collect("results/decoder")
    assert records and all(r["arch"] == "decoder" for r in records)
    methods = {r["method"] for r in records}
    for scheme in ("random", "fire", "abacus", "coupling"):  # today's methods, as trained in the protocol's frame and +varied
        assert {scheme, f"{scheme}+varied"} <= methods, scheme
        assert f"| successor | {scheme} |" in text and f"| successor | {scheme}+varied |" in text
    lines = text.splitlines()
    for anchor in ANCHORS:  # each published figure, then ours of its scheme
        row = next(i for i, line in enumerate(lines) if line.startswith(f"| {anchor.method} |"))
        assert lines[row + 1].startswith(f"| abcmini {anchor.scheme} |"), lines[row + 1]
