"""The dashboard of two small real roots, opened in a real browser (Debian's headless chromium)."""

import glob
import os
import re
import shutil
import time

import pytest
from typer.testing import CliRunner

from abcmini.nn.schemes import TODAYS_SCHEMES
from abcmini.outputs.method_views import run_groups
from abcmini.outputs.published import ANCHORS
from abcmini.outputs.report import TASK_ORDER, collect
from cli import app

pytestmark = pytest.mark.integration  # trains, reproduces or renders: the second tier

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TINY = [
    "--preset",
    "tiny",
    "--pad-width",
    "7",
    "--test-frame",
    "fixed",
    "--lengths",
    "2,5",
    "--steps",
    "20",
    "--eval-every",
    "10",
    "--valid-size",
    "20",
    "--no-wandb",
]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Three real runs: Vanilla (two seeds), an ABS window, and a run with a calibrated bias."""
    root = tmp_path_factory.mktemp("root")
    invoke = lambda *args: CliRunner().invoke(app, [str(a) for a in args])  # noqa: E731
    for seed in (0, 1):
        assert (
            invoke(
                "train", *TINY, "--seed", seed, "--out", root / "successor" / f"vanilla-s{seed}"
            ).exit_code
            == 0
        )
    assert (
        invoke("train", *TINY, "--method", "+w=1", "--out", root / "successor" / "w1-s0").exit_code
        == 0
    )
    bias = root / "successor" / "vanilla-s0" / "abc_bias.pt"
    assert (
        invoke(
            "calibrate",
            root / "successor" / "vanilla-s0",
            "--min-accuracy",
            0,
            "--samples",
            20,
            "--no-wandb",
        ).exit_code
        == 0
    )
    assert (
        invoke("train", *TINY, "--bias", bias, "--out", root / "successor" / "biased-s0").exit_code
        == 0
    )
    return root


@pytest.fixture(scope="module")
def long_root(tmp_path_factory):
    """A second root of another protocol, tested to 100 digits in frames that follow the length."""
    root = tmp_path_factory.mktemp("long")
    args = [*TINY, "--lengths", "2,100", "--test-frame", "follows", "--threads", "1"]
    for method in ("vanilla", "+w=1"):
        result = CliRunner().invoke(
            app,
            ["train", *args, "--method", method, "--out", str(root / "successor" / f"{method}-s0")],
        )
        assert result.exit_code == 0, result.output
    with (
        pytest.MonkeyPatch.context() as patch
    ):  # one run tracked offline into its own directory: its logged loss is a curve
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        patch.delenv("WANDB_DIR", raising=False)
        for name in (
            "WANDB_CACHE_DIR",
            "WANDB_DATA_DIR",
            "WANDB_CONFIG_DIR",
        ):  # nothing under the home directory
            patch.setenv(name, str(tmp_path_factory.mktemp(name.lower())))
        result = CliRunner().invoke(
            app,
            [
                "train",
                *[a for a in args if a != "--no-wandb"],
                "--method",
                "rope",
                "--out",
                str(root / "successor" / "rope-s0"),
            ],
        )
        assert result.exit_code == 0, result.output
    return root


def test_the_dashboard_is_one_self_contained_page(root):
    result = CliRunner().invoke(app, ["dashboard", str(root)])
    assert result.exit_code == 0, result.output
    page = (root / "dashboard.html").read_text()
    assert page.count("<script") >= 3 and not re.findall(
        r"<(?:script|link)[^>]+(?:src|href)=", page
    )  # plotly.js inlined: nothing fetched
    for text in (
        "successor: exact match against length",
        "ABS table",
        "vanilla+w=1",
        "ABS window w = 1",
        "ABC bias",
        "Calibrated lines",
        "recipe paper, encoder-decoder model, preset tiny, pad width 7",
    ):
        assert text in page, text


def test_the_dashboard_takes_several_roots_and_a_missing_one_is_one_line(root, long_root, tmp_path):
    result = CliRunner().invoke(
        app, ["dashboard", str(root), str(long_root), "--out", str(tmp_path / "both.html")]
    )
    assert result.exit_code == 0, result.output
    page = (tmp_path / "both.html").read_text()
    assert page.count("<h2 id='protocol-") == 2 and "each test in a frame of its length" in page
    assert (
        page.count("<details class='cell'>") == 7
        and "<details open" not in page
        and "version –" not in page
    )
    assert (
        page.count("training loss (logged every few steps)") == 1
        and "loss logged at 2 steps" in page
    )  # rope: steps 10 and 20
    missing = CliRunner().invoke(app, ["dashboard", str(root), str(tmp_path / "nowhere")])
    assert (
        missing.exit_code == 2
        and len(missing.output.strip().splitlines()) == 1
        and "does not exist" in missing.output
    )


def chrome():
    """Debian's headless chromium under selenium, its console log kept."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,4000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=DRIVER)
    )


@pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)
def test_the_dashboard_of_two_roots_renders_in_a_real_browser(root, long_root, tmp_path):
    """Every plot draws; a method has one colour in every plot; the long root's length axis is
    logarithmic; cells are folded and their plots draw when opened."""
    assert (
        CliRunner()
        .invoke(app, ["dashboard", str(root), str(long_root), "--out", str(tmp_path / "dash.html")])
        .exit_code
        == 0
    )
    driver = chrome()
    plots_js = (
        "return Array.from(document.querySelectorAll('.js-plotly-plot')).map("
        "p => [p.querySelectorAll('.main-svg').length, p.getBoundingClientRect().width, p.querySelectorAll('.trace, .hm image').length])"
    )
    try:
        driver.get((tmp_path / "dash.html").as_uri())
        deadline = time.time() + 30
        expected = (tmp_path / "dash.html").read_text().count('class="plotly-graph-div"')
        while time.time() < deadline:
            plots = driver.execute_script(plots_js)
            if len(plots) == expected:
                break
            time.sleep(0.5)
        assert len(plots) == expected > 10, plots
        assert all(svgs > 0 and traces > 0 for svgs, _, traces in plots), plots
        # the accuracy plots, one per task and protocol: outside the folded cells, drawn full width
        curves = driver.execute_script(
            "return Array.from(document.querySelectorAll('.js-plotly-plot')).filter(p => !p.closest('details')).map(p => ["
            "p.getBoundingClientRect().width, p.layout.xaxis.type, "
            "p.data.filter(t => t.mode === 'lines+markers').map(t => [t.name, t.line.color, t.marker.symbol])])"
        )
        assert len(curves) == 2 and all(width > 300 for width, _, _ in curves), curves
        assert [axis for _, axis, _ in curves] == [
            "linear",
            "log",
        ]  # the second root reaches 100 digits
        style = {}
        for _, _, traces in curves:
            for name, color, symbol in traces:
                assert style.setdefault(name, (color, symbol)) == (color, symbol), (
                    name
                )  # one colour and marker per method everywhere
        assert len({color for color, _ in style.values()}) == len(style) >= 3, style
        assert style["vanilla"][0] == "#1f77b4" and style["vanilla+w=1"][0] == "#ff7f0e"
        # cells are folded; opened, their plots draw at full width
        assert (
            driver.execute_script(
                "return Array.from(document.querySelectorAll('details.cell')).filter(d => d.open).length"
            )
            == 0
        )
        driver.execute_script(
            "document.querySelectorAll('details.cell').forEach(d => d.open = true)"
        )
        time.sleep(1)
        assert all(width > 300 for _, width, _ in driver.execute_script(plots_js))
        problems = [
            entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")
        ]
        assert problems == []
        # a legend click switches a method (line, band and the paper's markers) off
        hidden = driver.execute_script(
            "const p = document.querySelector('.js-plotly-plot'); return Plotly.restyle(p, {visible: 'legendonly'}, [2])"
            ".then(() => p.data.filter(t => t.visible === 'legendonly').length)"
        )
        assert hidden == 1
        driver.save_screenshot(str(tmp_path / "dashboard.png"))
        assert os.path.getsize(tmp_path / "dashboard.png") > 50_000
    finally:
        driver.quit()


@pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
)
def test_the_shipped_dashboard_draws_todays_methods_beside_abc_and_abs(tmp_path):
    """One plot per task of the decoder-only records: ABC, ABS from the encoder-decoder (in its
    own colour) and today's methods, every trace drawn; before them, per method, its paper's
    figure as a star beside a line and a table row for every group of its runs, record files
    (the scaled runs and the common protocol) among them."""
    out = tmp_path / "shipped.html"
    files = sorted(glob.glob("results/experiments/common-protocol/*.json"))
    roots = ["results/decoder", "results/long", "results/own-papers", "results/papers-scale"]
    result = CliRunner().invoke(app, ["dashboard", *roots, *files, "--out", str(out)])
    assert result.exit_code == 0, result.output
    # Abacus at 15, seed 1: trained on this project's CPU, then on an H200 (its record's split)
    assert (
        "36000 training steps, training seconds 6,848 (6,539 on CPU, 309 on NVIDIA H200)"
        in out.read_text()
    )
    every = [r for root in (*roots, *files) for r in collect(root)]
    driver = chrome()
    views = (
        "return Array.from(document.querySelectorAll('section.method')).map(s => [s.querySelector('h2').id, "
        "s.querySelector('.js-plotly-plot').querySelectorAll('.trace').length, s.querySelector('.js-plotly-plot').data.map("
        "t => t.mode), s.querySelectorAll('table.method tr').length - 1])"
    )
    script = (
        "return Array.from(document.querySelectorAll('section.todays .js-plotly-plot')).map(p => [p.querySelectorAll('.trace').length, "
        "p.data.filter(t => t.mode === 'lines+markers').map(t => [t.name, t.line.color, t.marker.symbol])])"
    )
    try:
        driver.get(out.as_uri())
        deadline, plots = time.time() + 60, []
        while time.time() < deadline and not plots:
            plots = driver.execute_script(script)
            time.sleep(0.5)
        records = collect("results/decoder")
        tasks = [
            t
            for t in TASK_ORDER
            if any(r["task"] == t and r["method"].split("+")[0] in TODAYS_SCHEMES for r in records)
        ]
        assert len(plots) == len(tasks) >= 2, plots
        for task, (drawn, traces) in zip(tasks, plots):
            names = {name: color for name, color, _ in traces}
            ours = {
                r["method"]
                for r in records
                if r["task"] == task
                and (r["method"] == "nope+abc" or r["method"].split("+")[0] in TODAYS_SCHEMES)
            }
            assert set(names) == ours | {"vanilla+w=1+T=3 (encoder-decoder)"}, task
            assert names["vanilla+w=1+T=3 (encoder-decoder)"] == "#17becf" and drawn >= len(traces)
            assert len({(color, symbol) for _, color, symbol in traces}) == len(
                traces
            )  # each method its own style
        drawn_views = driver.execute_script(views)
        assert [view[0] for view in drawn_views] == [
            f"method-{scheme}" for scheme in TODAYS_SCHEMES
        ]
        for view, drawn, modes, rows in drawn_views:
            scheme = view.removeprefix("method-")
            groups = run_groups(every, scheme)
            assert (modes.count("lines+markers"), rows, drawn) == (
                len(groups),
                len(groups),
                len(modes),
            ) and len(groups) > 1, scheme
            assert modes.count("markers") == sum(
                a.scheme == scheme for a in ANCHORS
            )  # its paper's figure: a star
        assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    finally:
        driver.quit()
