"""The report's intervals, verdicts, rankings and first screen (issue 21), on real sim sweeps:
tests/fixtures/report/noisy (the sim's noise on, 3 passes, a concurrency ladder past the point
where speculative decoding stops paying: generate_noisy.py) and tests/fixtures/report/sweep (one
pass). Every check reads what the renderers print, not only the model: a renderer that called a
method faster from its point estimate, or ranked overlapping methods apart, fails here."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.host.contract import RunStatus
from fleet.measure.stats import NO_INTERVAL_ONE_PASS
from fleet.report import load_sweep, render, report_of
from fleet.report.model import Report, build_report, make_cells, variant_order
from fleet.report.text import DASH, ONE_PASS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
NOISY, ONE_PASS_SWEEP = FIXTURES / "noisy", FIXTURES / "sweep"
BOUNDS = re.compile(r"([0-9.,]+)× \[([0-9.,]+)–([0-9.,]+)\]")
FIRST = re.compile(r"^([0-9.,]+)")
VERDICT_WORDS = ("faster", "slower")


@pytest.fixture(scope="module")
def noisy() -> Report:
    return report_of([NOISY])


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _printed_verdict(low: float, high: float) -> str:
    return "faster" if low > 1.0 else "slower" if high < 1.0 else "not separable"


def _md_rows(markdown: str, columns: int) -> list[list[str]]:
    rows = [[c.strip() for c in line.split("|")][1:-1] for line in markdown.splitlines() if line.startswith("| ")]
    return [row for row in rows if len(row) == columns and row[0] not in ("method", "host type · TP", "host type and TP")]


def _html_rows(html: str, table: int) -> list[list[str]]:
    """The cells' text of one table of the HTML report (its detail fold left out)."""
    body = re.findall(r"<tbody>(.*?)</tbody>", html, re.S)[table]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", re.sub(r'<td class="details">.*?</td>', "", row, flags=re.S), re.S)
        rows.append([re.sub(r"<[^>]+>", "", c).replace("&#x27;", "'").strip() for c in cells])
    return rows


def _check_speedup_rows(rows: list[list[str]], speedup: int, verdict: int) -> dict[str, int]:
    """Each row's printed verdict against its printed interval; returns how many of each it saw."""
    seen = {"faster": 0, "slower": 0, "not separable": 0, "none": 0}
    for row in rows:
        found = BOUNDS.search(row[speedup])
        words = [cell for i, cell in enumerate(row) if i != verdict and any(w in cell.split() for w in VERDICT_WORDS)]
        assert not words, f"a verdict word outside the verdict column: {row}"
        if found is None:  # no speed-up, or no interval: never a direction
            assert row[verdict] in (DASH, "not separable"), row
            seen["none"] += 1
            continue
        low, high = _number(found.group(2)), _number(found.group(3))
        assert row[verdict] == _printed_verdict(low, high), row
        seen[row[verdict]] += 1
    return seen


def test_no_speed_up_whose_interval_holds_one_is_printed_faster_or_slower(noisy: Report) -> None:
    cells = [c for c in noisy.cells if c.speedup is not None]
    assert cells and all(c.speedup is not None and c.speedup.interval is not None for c in cells)
    for cell in cells:
        assert cell.speedup is not None and cell.speedup.interval is not None
        if cell.speedup.interval.contains(1.0):
            assert cell.verdict == "not separable", cell.key
    # Markdown (also what `fleet report` prints on a terminal): the host type's table.
    seen = _check_speedup_rows(_md_rows(render(noisy, "md"), 18), speedup=6, verdict=7)
    assert seen["faster"] > 5 and seen["not separable"] >= 4 and seen["slower"] >= 2 and seen["none"] >= 5
    # HTML: the same table (table 0 is the first screen).
    html = render(noisy, "html")
    assert _check_speedup_rows(_html_rows(html, 1), speedup=6, verdict=7) == seen
    # The first screen names a direction only beside an interval that excludes 1.0.
    for rendered in (render(noisy, "md"), html):
        glance = rendered.split("At a glance")[1].split("Simulated")[0]
        for match in re.finditer(r"([0-9.]+)× \[([0-9.]+)–([0-9.]+)\] over autoregressive \((faster|slower|not separable), (paired|fieller)\)", glance):
            assert match.group(4) == _printed_verdict(float(match.group(2)), float(match.group(3)))
        assert glance.count("(faster, paired)") == 2
    # CSV and JSON lines carry the bounds and the verdict, and they agree.
    flat = list(csv.DictReader(io.StringIO(render(noisy, "csv"))))
    lines = [json.loads(line) for line in render(noisy, "json").splitlines()]
    assert len(flat) == len(lines) == len(noisy.rows)
    checked = 0
    for row, line in zip(flat, lines):
        assert (row["speedup_verdict"] or None) == line["speedup_verdict"]
        if line["speedup"] is None:
            assert line["speedup_verdict"] is None
            continue
        assert line["speedup_verdict"] == _printed_verdict(line["speedup_low"], line["speedup_high"])
        assert float(row["speedup_low"]) == pytest.approx(line["speedup_low"]) and line["speedup_method"] == "paired"
        checked += 1
    assert checked > 30


def test_methods_whose_intervals_overlap_are_never_ranked_apart(noisy: Report) -> None:
    by_place: dict[tuple[str, int], list[list[str]]] = {}
    for row in _md_rows(render(noisy, "md"), 18):
        by_place.setdefault((row[1], int(row[2]) if row[2] != DASH else 0), []).append(row)
    assert len(by_place) == 6
    tied_apart_checked = 0
    for rows in by_place.values():
        printed = {}
        for row in rows:
            low, high = (_number(x) for x in re.search(r"\[([0-9.,]+)–([0-9.,]+)\]", row[4]).groups())  # type: ignore[union-attr]
            printed[row[0]] = (low, high, int(FIRST.match(row[8]).group(1)))  # type: ignore[union-attr]
        for a, (low_a, high_a, tier_a) in printed.items():
            for b, (low_b, high_b, tier_b) in printed.items():
                if a != b and low_a <= high_b and low_b <= high_a:
                    assert tier_a == tier_b, f"{a} and {b} overlap but are ranked {tier_a} and {tier_b}"
                if tier_a < tier_b:
                    assert low_a > high_b, f"{a} ranked above {b} without separating"
                    tied_apart_checked += 1
    assert tied_apart_checked >= 5
    # The first screen's "not separable from it" lists exactly the fastest's tier-mates.
    for headline in noisy.headlines:
        assert headline.fastest is not None and headline.fastest.standing is not None
        tier = [c for c in noisy.cells if c.key.workload == headline.workload and c.key.level == headline.level and c.standing == headline.fastest.standing]
        assert {c.key.variant for c in headline.tied} | {headline.fastest.key.variant} == {c.key.variant for c in tier}
        assert len(tier) == headline.fastest.standing.shared > 1  # the fixture's lowest levels hold ties


def test_a_sweep_of_one_pass_says_plainly_that_no_interval_can_be_given() -> None:
    report = report_of([ONE_PASS_SWEEP])
    assert report.one_pass and all(c.tok_s is None or (c.tok_s.n == 1 and c.tok_s.interval is None) for c in report.cells)
    markdown, html = render(report, "md"), render(report, "html")
    for rendered in (markdown, html):
        assert "One pass per configuration: no interval can be given" in rendered.split("Simulated")[0]  # the first screen
    glance = _md_rows(markdown.split("## At a glance")[1].split("## Simulated")[0], 5) + _html_rows(html, 0)
    assert len(glance) == 24 and not any(w in cell.split() for row in glance for cell in row for w in VERDICT_WORDS)
    rows = _md_rows(markdown, 18)
    assert len(rows) > 50
    for row in rows:
        assert row[4].endswith(f"({ONE_PASS})") and row[5] == DASH and row[7] in (DASH, "not separable") and row[8] == DASH, row
        assert row[6] == DASH or row[6].endswith(f"({ONE_PASS})"), row
    assert all(h.fastest is None and "not ranked" in h_text for h, h_text in zip(report.headlines, _glance_fastest(markdown)))
    flat = [json.loads(line) for line in render(report, "json").splitlines()]
    measured = [r for r in flat if r["comparable"]]
    assert measured and all(r["cell_output_tok_s_low"] is None and r["speedup_low"] is None and r["note"] == NO_INTERVAL_ONE_PASS for r in measured)


def _glance_fastest(markdown: str) -> list[str]:
    return [row[2] for row in _md_rows(markdown.split("## At a glance")[1].split("## Simulated")[0], 5)]


def test_the_first_screen_answers_fastest_by_how_much_and_where_spec_stops_paying(noisy: Report) -> None:
    markdown = render(noisy, "md")
    assert markdown.index("## At a glance") < min(markdown.index(f"## {g.key.title}") for g in noisy.groups)
    glance = {row[1]: row for row in _md_rows(markdown.split("## At a glance")[1].split("## Simulated")[0], 5)}
    assert set(glance) == {"concurrency", "short"}
    concurrency = glance["concurrency"]
    # Fastest, by how much (an interval), what it cannot be told apart from, and the crossover.
    assert re.fullmatch(r"ddtree-b16 at concurrency 1: [0-9.]+× \[[0-9.]+–[0-9.]+\] over autoregressive \(faster, paired\)", concurrency[2]), concurrency
    assert "ddtree-b15" in concurrency[3] and "dflash" in concurrency[3]
    assert concurrency[4].startswith("at concurrency 8:")
    assert glance["short"][4] == "— (no concurrency levels)"
    # The crossover is where no speculative interval lies above 1.0, and below it one does.
    speculative = [c for c in noisy.cells if c.key.workload == "concurrency" and c.speedup is not None]
    assert all(c.verdict != "faster" for c in speculative if c.key.level == 8)
    assert all(any(c.verdict == "faster" for c in speculative if c.key.level == level) for level in (1, 2, 4))
    # Cut the ladder at 4: not reached, and the ladder to try next doubles the top level.
    short_ladder = build_report(noisy.sweeps)
    short_ladder.groups = make_cells([r for r in short_ladder.rows if r.level is None or r.level <= 4])
    (cut,) = [h for h in short_ladder.headlines if h.workload == "concurrency"]
    assert cut.crossover is not None and cut.crossover.level is None
    assert "not reached up to 4: try levels [1, 2, 4, 8]" in render(short_ladder, "md")


def test_failures_have_their_own_section_and_budgets_sort_as_numbers(noisy: Report) -> None:
    markdown = render(noisy, "md")
    measured_tables = markdown.split("## Failures")[0]
    for budget in ("ddtree-b8", "ddtree-b12", "ddtree-b32", "ddtree-b64"):  # crashed, quarantined or failed to start
        assert budget not in measured_tables.split("## Simulated")[1]
        assert f"tp1-{budget}/" in markdown.split("## Failures")[1]
    assert sorted(["ddtree-b64", "ddtree-b8", "ddtree-b16", "ddtree-b12", "ddtree-b32", "ddtree-b15"], key=variant_order) == [
        "ddtree-b8", "ddtree-b12", "ddtree-b15", "ddtree-b16", "ddtree-b32", "ddtree-b64"]  # fmt: skip
    # The table's order: b15's passes renamed b8 come before b15 and b16 (as text, b8 sorts last).
    rows = [replace(r, variant="ddtree-b8") if r.variant == "ddtree-b15" else r for r in noisy.rows]
    for group in make_cells(rows):
        order = [c.key.variant for c in group.cells if c.key.workload == "concurrency" and c.key.level == 1]
        assert order == ["autoregressive", "ddtree-b8", "ddtree-b16", "dflash"]


def test_a_baseline_change_is_flagged_only_where_its_interval_excludes_no_change() -> None:
    same = report_of([NOISY], [NOISY])
    assert len(same.comparisons) == 24 and all(c.verdict == "not separable" and c.ratio.method == "paired" for c in same.comparisons)
    # The baseline's autoregressive concurrency run made about half as fast in every pass.
    base = load_sweep(NOISY)
    index, slow = next((i, lo) for i, lo in enumerate(base.results) if lo.result.status is RunStatus.ok and lo.result.label == "tp1-autoregressive/concurrency")
    factors = {0: 0.5, 1: 0.55, 2: 0.45}
    levels = [{**lv, "output_tok_s": lv["output_tok_s"] * factors[lv["repeat"]]} for lv in slow.result.extras["levels"]]
    base.results[index] = replace(slow, result=replace(slow.result, extras={**slow.result.extras, "levels": levels}))
    doctored = build_report([load_sweep(NOISY)], [base])
    flagged = {(c.key.variant, c.key.level): c for c in doctored.comparisons if c.verdict != "not separable"}
    assert set(flagged) == {("autoregressive", level) for level in (1, 2, 4, 8, 16)}
    assert all(c.verdict == "faster" and c.ratio.interval is not None and c.ratio.interval.low > 1.0 for c in flagged.values())
    rows = _md_rows(render(doctored, "md").split("## Against the baseline")[1].split("## Failures")[0], 9)
    assert len(rows) == 24
    for row in rows:
        low, high = (float(x) for x in re.search(r"\[([+-][0-9.]+)%, ([+-][0-9.]+)%\]", row[6]).groups())  # type: ignore[union-attr]
        assert row[8] == _printed_verdict(1 + low / 100, 1 + high / 100), row
    assert sum(row[8] == "faster" for row in rows) == 5
