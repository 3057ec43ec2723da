"""The HTML report opened in a real headless Chromium (Debian's `chromium`): its tables and plots
render, tables sort by a click, nothing logs to the console, nothing is fetched from a network;
the noisy sim sweep's first screen (1,400 x 900 px) holds the answer and no table is wider than
the window. Skips where chromium is not installed (the README's CI line installs it).
REPORT_SCREENSHOT=path.png keeps the first screen's screenshot there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.report import render, report_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install -y chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]

# Sorting, driven from a page that frames the report (file:// frames need --allow-file-access-from-files):
# click the output tok/s header of the first host-type table (after the first screen's) twice
# (descending), read the column.
WRAPPER = """<html><body><pre id="result">pending</pre><iframe id="f" src="report.html" width="1400" height="900"></iframe>
<script>document.getElementById("f").addEventListener("load", function () {
  var table = document.getElementById("f").contentDocument.querySelectorAll("table.sortable")[1];
  var header = table.querySelectorAll("th")[4]; header.click(); header.click();
  document.getElementById("result").textContent = JSON.stringify(
    Array.prototype.map.call(table.tBodies[0].rows, function (row) { return row.cells[4].textContent; }));
});</script></body></html>"""


def chromium(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, *extra, url], capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    path = folder / "report.html"
    path.write_text(render(report_of([FIXTURES / "sweep"], [FIXTURES / "baseline"]), "html", folder))
    (folder / "wrapper.html").write_text(WRAPPER)
    return path


def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    """The control: a page that logs an error and throws is caught by the same check."""
    control = tmp_path / "control.html"
    control.write_text('<html><body><script>console.error("control-error"); notDefined();</script></body></html>')
    lines = console_lines(chromium(control.as_uri(), "--dump-dom").stderr)
    assert any("control-error" in line for line in lines) and any("notDefined" in line for line in lines)


def test_the_report_renders_its_tables_and_plots_with_no_console_message(page: Path) -> None:
    html = page.read_text()
    # Self-contained: nothing to fetch (no external script, style, image or font).
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html) and "<link" not in html and "@import" not in html
    done = chromium(page.as_uri(), "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_lines(done.stderr) == []
    dom = done.stdout
    assert dom.count("<table") >= 10 and dom.count('class="sortable"') == dom.count("<table")
    assert dom.count("<svg") >= 4 and "<path" in dom  # the concurrency curves, drawn
    assert "concurrency (requests in flight)" in dom and "output tok/s (simulated)" in dom
    assert "Against the baseline" in dom and "Failures" in dom and "not_comparable" in dom
    links = re.findall(r'href="([^"]+\.json)"', dom)
    assert links and all((page.parent / link).resolve().exists() for link in links)  # every figure links to its result file


def test_tables_sort_by_a_click(page: Path) -> None:
    done = chromium((page.parent / "wrapper.html").as_uri(), "--dump-dom", "--allow-file-access-from-files")
    assert console_lines(done.stderr) == []
    values = json.loads(re.search(r'<pre id="result">([^<]*)</pre>', done.stdout).group(1))  # type: ignore[union-attr]
    numbers = [float(re.match(r"[0-9,.]+", v).group(0).replace(",", "")) for v in values]  # type: ignore[union-attr]
    assert len(numbers) > 5 and numbers == sorted(numbers, reverse=True)


def test_a_screenshot_shows_the_page(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    done = chromium(page.as_uri(), f"--screenshot={shot}", "--window-size=1400,2400", "--hide-scrollbars")
    assert done.returncode == 0 and shot.stat().st_size > 50_000, done.stderr[-2000:]


# The first screen of the noisy sim sweep in a 1,400 x 900 window: where the first-screen table
# ends, the widest table, and the first screen's text.
LAYOUT = """<html><body style="margin:0"><pre id="result">pending</pre>
<iframe id="f" src="noisy.html" width="1400" height="900" style="border:0"></iframe>
<script>document.getElementById("f").addEventListener("load", function () {
  var doc = document.getElementById("f").contentDocument, tables = doc.querySelectorAll("table");
  document.getElementById("result").textContent = JSON.stringify({
    glance_bottom: tables[0].getBoundingClientRect().bottom, glance: tables[0].innerText,
    widest: Math.max.apply(null, Array.prototype.map.call(tables, function (t) { return t.getBoundingClientRect().right; })),
    window: doc.documentElement.clientWidth});
});</script></body></html>"""


def test_the_first_screen_answers_the_question_at_1400_px(tmp_path: Path) -> None:
    page = tmp_path / "noisy.html"
    page.write_text(render(report_of([FIXTURES / "noisy"]), "html", tmp_path))
    (tmp_path / "layout.html").write_text(LAYOUT)
    done = chromium((tmp_path / "layout.html").as_uri(), "--dump-dom", "--allow-file-access-from-files", "--window-size=1400,1000")
    assert console_lines(done.stderr) == []
    layout = json.loads(re.search(r'<pre id="result">([^<]*)</pre>', done.stdout).group(1).replace("&amp;", "&"))  # type: ignore[union-attr]
    assert layout["glance_bottom"] <= 900, layout  # the answer is on the first screen
    assert layout["widest"] <= layout["window"], layout  # every table reads without scrolling sideways
    glance = layout["glance"]
    # A tie lists its methods, each with its speed-up and interval, and names no winner.
    assert re.search(r"\t1\ttie: ddtree-b15 [0-9.]+× \[[0-9.]+–[0-9.]+\], ddtree-b16 [0-9.]+× \[[0-9.]+–[0-9.]+\], dflash", glance), glance
    assert "fastest: speed-up vs autoregressive [95 %]" in glance and "at concurrency 8, pays up to 4" in glance
    shot = Path(os.environ.get("REPORT_SCREENSHOT") or tmp_path / "first-screen.png")
    done = chromium(page.as_uri(), f"--screenshot={shot}", "--window-size=1400,900", "--hide-scrollbars")
    assert done.returncode == 0 and shot.stat().st_size > 50_000, done.stderr[-2000:]
