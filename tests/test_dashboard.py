"""The dashboard of a small real root, opened in a real browser (Debian's headless chromium)."""

import os
import re
import shutil
import time

import pytest
from typer.testing import CliRunner

from cli import app

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TINY = ["--preset", "tiny", "--pad-width", "7", "--lengths", "2,5", "--steps", "20", "--eval-every", "10", "--valid-size", "20",
        "--no-wandb"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Three real runs: Vanilla (two seeds), an ABS window, and a run with a calibrated bias."""
    root = tmp_path_factory.mktemp("root")
    invoke = lambda *args: CliRunner().invoke(app, [str(a) for a in args])  # noqa: E731
    for seed in (0, 1):
        assert invoke("train", *TINY, "--seed", seed, "--out", root / "successor" / f"vanilla-s{seed}").exit_code == 0
    assert invoke("train", *TINY, "--method", "+w=1", "--out", root / "successor" / "w1-s0").exit_code == 0
    bias = root / "successor" / "vanilla-s0" / "abc_bias.pt"
    assert invoke("calibrate", root / "successor" / "vanilla-s0", "--min-accuracy", 0, "--samples", 20, "--no-wandb").exit_code == 0
    assert invoke("train", *TINY, "--bias", bias, "--out", root / "successor" / "biased-s0").exit_code == 0
    return root


def test_the_dashboard_is_one_self_contained_page(root):
    result = CliRunner().invoke(app, ["dashboard", str(root)])
    assert result.exit_code == 0, result.output
    page = (root / "dashboard.html").read_text()
    assert page.count("<script") >= 3 and not re.findall(r"<(?:script|link)[^>]+(?:src|href)=", page)  # plotly.js inlined: nothing fetched
    for text in ("successor: exact match against length", "Main table", "ABS table", "vanilla+w=1", "ABS window w = 1", "ABC bias",
                 "Calibrated lines", "recipe paper, preset tiny, pad width 7"):
        assert text in page, text


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")
def test_the_dashboard_renders_in_a_real_browser_without_errors(root, tmp_path):
    from selenium import webdriver

    assert CliRunner().invoke(app, ["dashboard", str(root), "--out", str(tmp_path / "dash.html")]).exit_code == 0
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,4000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    try:
        driver.get((tmp_path / "dash.html").as_uri())
        deadline = time.time() + 30
        expected = (tmp_path / "dash.html").read_text().count('class="plotly-graph-div"')
        while time.time() < deadline:
            plots = driver.execute_script(
                "return Array.from(document.querySelectorAll('.js-plotly-plot')).map("
                "p => [p.querySelectorAll('.main-svg').length, p.getBoundingClientRect().width, p.querySelectorAll('.trace, .hm image').length])")
            if len(plots) == expected:
                break
            time.sleep(0.5)
        assert len(plots) == expected > 10, plots
        assert all(svgs > 0 and width > 300 and traces > 0 for svgs, width, traces in plots), plots
        problems = [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
        assert problems == []
        # a legend click switches a method (line, band and the paper's markers) off
        hidden = driver.execute_script(
            "const p = document.querySelector('.js-plotly-plot'); return Plotly.restyle(p, {visible: 'legendonly'}, [1])"
            ".then(() => p.data.filter(t => t.visible === 'legendonly').length)")
        assert hidden == 1
        driver.save_screenshot(str(tmp_path / "dashboard.png"))
        assert os.path.getsize(tmp_path / "dashboard.png") > 50_000
    finally:
        driver.quit()
