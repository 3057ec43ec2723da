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
from fleet.measure.stats import NO_INTERVAL_ONE_PASS, summarize, verdict
from fleet.report import load_sweep, render, report_of, text
from fleet.report.model import Report, Row, build_report, make_cells, ratio_of, variant_order
from fleet.report.text import DASH, ONE_PASS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
NOISY, ONE_PASS_SWEEP = FIXTURES / "noisy", FIXTURES / "sweep"
BOUNDS = re.compile(r"([0-9.,]+)× \[([0-9.,]+)–([0-9.,]+)\]")
FIRST = re.compile(r"^([0-9.,]+)")
VERDICT_WORDS = ("faster", "slower")
DETAIL = 19  # columns of a host type's table in Markdown


@pytest.fixture(scope="module")
def noisy() -> Report:
    return report_of([NOISY])


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _printed_verdict(low: float, high: float) -> str:
    return "faster" if low > 1.0 else "slower" if high < 1.0 else "not separable"


def _md_rows(markdown: str, columns: int) -> list[list[str]]:
    rows = [[c.strip() for c in line.split("|")][1:-1] for line in markdown.splitlines() if line.startswith("| ")]
    return [row for row in rows if len(row) == columns and row[0] not in ("method", "TP", "host type and TP")]


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
    seen = _check_speedup_rows(_md_rows(render(noisy, "md"), DETAIL), speedup=6, verdict=7)
    assert seen["faster"] > 5 and seen["not separable"] >= 4 and seen["slower"] >= 2 and seen["none"] >= 5
    # HTML: the same table (table 0 is the first screen's, one per host type).
    html = render(noisy, "html")
    assert _check_speedup_rows(_html_rows(html, 1), speedup=6, verdict=7) == seen
    # The first screen calls nothing faster or slower in words; it names one fastest method only
    # where its printed speed-up and its printed ratio to the runner-up both lie above 1.0.
    for rendered in (render(noisy, "md"), html):
        glance = _glance_rows(rendered)
        assert len(glance) == 3
        for row in glance:
            assert not any(w in cell.split() for cell in row for w in VERDICT_WORDS), row
            _check_glance_row(row)
    # CSV and JSON lines carry the bounds and the verdict, and they agree.
    flat = list(csv.DictReader(io.StringIO(render(noisy, "csv"))))
    lines = [json.loads(line) for line in render(noisy, "json").splitlines()]
    assert len(flat) == len(lines) == len(noisy.rows)
    checked = 0
    for flat_row, line in zip(flat, lines):
        assert (flat_row["speedup_verdict"] or None) == line["speedup_verdict"]
        if line["speedup"] is None:
            assert line["speedup_verdict"] is None
            continue
        assert line["speedup_verdict"] == _printed_verdict(line["speedup_low"], line["speedup_high"])
        assert float(flat_row["speedup_low"]) == pytest.approx(line["speedup_low"]) and line["speedup_method"] == "paired"
        checked += 1
    assert checked > 30


def test_methods_whose_intervals_overlap_are_never_ranked_apart(noisy: Report) -> None:
    by_place: dict[tuple[str, int], list[list[str]]] = {}
    for row in _md_rows(render(noisy, "md"), DETAIL):
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
    # The first screen ranks on the paired ratio of two methods (the quantity it prints): a tie's
    # methods are never separable from each other, a fastest method is separable from every other.
    for headline in noisy.headlines:
        place = [c for c in noisy.cells if c.key.workload == headline.workload and c.key.level == headline.level and c.tok_s is not None]
        assert headline.ranked and headline.first is not None and headline.top
        for one in headline.top:
            for other in headline.top:
                if one is not other:
                    assert verdict(ratio_of(one.passes, other.passes)) == "not separable", (headline.workload, headline.level, one.key, other.key)
        if headline.fastest is not None:
            assert all(verdict(ratio_of(headline.fastest.passes, c.passes)) == "faster" for c in place if c is not headline.fastest)
    assert sum(len(h.tied) > 1 for h in noisy.headlines) >= 2  # the fixture holds ties


def test_a_sweep_of_one_pass_says_plainly_that_no_interval_can_be_given() -> None:
    report = report_of([ONE_PASS_SWEEP])
    assert report.one_pass and all(c.tok_s is None or (c.tok_s.n == 1 and c.tok_s.interval is None) for c in report.cells)
    markdown, html = render(report, "md"), render(report, "html")
    for rendered in (markdown, html):
        top = rendered.split("Simulated")[0]  # the first screen
        assert "One pass per configuration: no interval can be given" in top and "Set `repeats: 3`" in top
        assert top.index("One pass per configuration") < top.index("NVIDIA")  # said before any table
    glance = _glance_rows(markdown) + _glance_rows(html)
    assert len(glance) == 28 and not any(w in cell.split() for row in glance for cell in row for w in VERDICT_WORDS)
    assert all(not h.ranked and h.fastest is None and "not ranked" in row[3] for h, row in zip(report.headlines, _glance_rows(markdown)))
    rows = _md_rows(markdown, DETAIL)
    assert len(rows) > 50
    for row in rows:
        assert row[4].endswith(f"({ONE_PASS})") and row[5] == DASH and row[7] in (DASH, "not separable") and row[8] == DASH, row
        assert row[6] == DASH or row[6].endswith(f"({ONE_PASS})"), row
    flat = [json.loads(line) for line in render(report, "json").splitlines()]
    measured = [r for r in flat if r["comparable"]]
    assert measured and all(r["cell_output_tok_s_low"] is None and r["speedup_low"] is None and r["note"] == NO_INTERVAL_ONE_PASS for r in measured)


def test_the_first_screen_answers_fastest_by_how_much_and_where_spec_stops_paying(noisy: Report) -> None:
    markdown = render(noisy, "md")
    assert markdown.index("## At a glance") < min(markdown.index(f"## {g.key.title}") for g in noisy.groups)
    # One heading per host type, and a short TP column: not the host type again in every row.
    assert "### NVIDIA RTX PRO 6000 Blackwell Server Edition (simulated) · SGLang 0.5.23\n" in markdown.split("## Simulated")[0]
    glance = {(row[1], row[2]): row for row in _glance_rows(markdown)}
    assert set(glance) == {("concurrency", "1"), ("concurrency", "16"), ("short", DASH)}  # the level of each answer is said
    assert all(row[0] == "1" for row in glance.values())
    # The crossover: the lowest level measured for both where no speculative interval lies above
    # 1.0, and below it one does; with the servers' caps, which differ.
    concurrency = glance["concurrency", "1"]
    assert concurrency[5].startswith("at concurrency 8, pays up to 4"), concurrency
    assert "max_running_requests: speculative 1, autoregressive 12" in concurrency[5]
    assert glance["short", DASH][5] == f"{DASH} (no levels)"
    speculative = [c for c in noisy.cells if c.key.workload == "concurrency" and c.speedup is not None]
    assert all(c.verdict != "faster" for c in speculative if c.key.level == 8)
    assert all(any(c.verdict == "faster" for c in speculative if c.key.level == level) for level in (1, 2, 4))
    # Cut the ladder at 4: not reached, and the ladder to try next doubles the top level.
    short_ladder = build_report(noisy.sweeps)
    short_ladder.groups = make_cells([r for r in short_ladder.rows if r.level is None or r.level <= 4])
    cut = next(h for h in short_ladder.headlines if h.workload == "concurrency")
    assert cut.crossover is not None and cut.crossover.level is None
    assert "not reached up to 4: try levels [1, 2, 4, 8]" in render(short_ladder, "md")


def _passes(row: Row, values: list[float]) -> Row:
    """The row with its passes' throughput replaced, pass keys (so the pairing) kept."""
    assert len(row.passes) == len(values)
    return replace(row, passes=[replace(p, tok_s=v) for p, v in zip(row.passes, values)])


def _short_rows(noisy: Report, tok_s: dict[str, list[float]]) -> Report:
    """The noisy fixture's `short` workload with the given methods' passes (the others left out)."""
    rows = [_passes(r, tok_s[r.variant]) for r in noisy.rows if r.workload == "short" and r.comparable and r.variant in tok_s]
    assert {r.variant for r in rows} == set(tok_s)
    return Report(sweeps=noisy.sweeps, hosts=[], rows=rows, groups=make_cells(rows), failures=[], not_run=[])


def test_a_tie_lists_its_methods_and_names_no_winner(noisy: Report) -> None:
    """Issue 21, report problem 2: the noisy fixture's `short` workload has three methods none of
    which the paired ratios separate: the first screen lists all three with their speed-ups vs
    autoregressive, names none fastest, and shows the top two's ratio, whose interval holds 1.0."""
    (short,) = [h for h in noisy.headlines if h.workload == "short"]
    assert short.fastest is None and {c.key.variant for c in short.tied} == {"ddtree-b15", "ddtree-b16", "dflash"}
    for rendered in (render(noisy, "md"), render(noisy, "html")):
        assert "fastest: speed-up vs autoregressive [95 %]" in rendered
        (row,) = [row for row in _glance_rows(rendered) if row[1] == "short"]
        assert row[3].startswith("tie: ") and all(f"{v} " in row[3] for v in ("ddtree-b15", "ddtree-b16", "dflash")), row
        assert len(BOUNDS.findall(row[3])) == 3  # each tied method with its own interval
        low, high = (_number(x) for x in BOUNDS.search(row[4]).groups()[1:])  # type: ignore[union-attr]
        assert low <= 1.0 <= high and row[4].startswith("ddtree-b16 ÷ "), row
        assert "faster" not in row[3] and "over autoregressive" not in row[3]


def test_separable_is_decided_on_the_paired_ratio_the_screen_shows(noisy: Report) -> None:
    """Issue 21, report problem 3. Two methods whose throughput intervals overlap widely (the passes
    vary together) but whose pass-by-pass ratio is steady are separable: one is named fastest, with
    the ratio that separates it. And autoregressive is never listed in a tie beside a method whose
    printed speed-up lies above 1.0: here the leader's own speed-up holds 1.0 (a noisy method), a
    steady one's does not, and the leader is not separable from the steady one."""
    steady = _short_rows(noisy, {"autoregressive": [20.0, 30.0, 40.0], "ddtree-b16": [100.0, 151.0, 199.0], "dflash": [90.0, 136.0, 179.0]})
    b16, dflash = (next(c for c in steady.cells if c.key.variant == v) for v in ("ddtree-b16", "dflash"))
    assert b16.tok_s is not None and dflash.tok_s is not None and b16.tok_s.interval and dflash.tok_s.interval
    assert b16.tok_s.interval.low < dflash.tok_s.interval.high  # throughput intervals overlap: the old rule tied them
    (headline,) = steady.headlines
    assert headline.fastest is b16 and headline.second is dflash
    for rendered in (render(steady, "md"), render(steady, "html")):
        (row,) = _glance_rows(rendered)
        assert not row[3].startswith("tie") and row[3].startswith("ddtree-b16 "), row
        low, _ = (_number(x) for x in BOUNDS.search(row[4]).groups()[1:])  # type: ignore[union-attr]
        assert low > 1.0 and row[4].startswith("ddtree-b16 ÷ dflash: "), row
    chained = _short_rows(noisy, {"autoregressive": [50.0, 52.0, 48.0], "ddtree-b16": [40.0, 90.0, 70.0], "dflash": [60.0, 63.0, 57.0]})
    (headline,) = chained.headlines
    ar, b16, dflash = (next(c for c in chained.cells if c.key.variant == v) for v in ("autoregressive", "ddtree-b16", "dflash"))
    assert b16.verdict == "not separable" and dflash.verdict == "faster" and headline.first is b16
    assert headline.tied == [b16, dflash] and ar not in headline.top
    for rendered in (render(chained, "md"), render(chained, "html")):
        (row,) = _glance_rows(rendered)
        assert "autoregressive" not in row[3], row
        _check_glance_row(row)


def test_a_crossover_is_never_reported_where_a_side_was_not_measured(noisy: Report) -> None:
    """Issue 21, report problem 4: speculative servers capped at 1 request and measured at
    concurrency 1 only (the `auto` ladder stops at a server's cap), autoregressive at 1..16: no
    crossover at 2, where no speculative figure exists. The first screen says where one side
    alone was measured and the caps the servers ran with, in Markdown and HTML."""
    rows = [r for r in noisy.rows if r.workload == "concurrency" and (not r.speculative or r.level == 1)]
    capped = Report(sweeps=noisy.sweeps, hosts=[], rows=rows, groups=make_cells(rows), failures=[], not_run=[])
    (headline,) = capped.headlines  # one level measured for both: one row
    crossover = headline.crossover
    assert crossover is not None and crossover.level is None and crossover.levels == (1,) and crossover.top == 1
    assert crossover.autoregressive_only == (2, 4, 8, 16) and crossover.speculative_caps == (1,) and crossover.autoregressive_caps == (12,)
    for rendered in (render(capped, "md"), render(capped, "html")):
        (row,) = _glance_rows(rendered)
        assert row[2] == "1" and not row[5].startswith("at concurrency"), row
        assert row[5].startswith("not reached up to 1: try levels [1, 2]"), row
        assert "Autoregressive alone at 2, 4, 8, 16" in row[5] and "max_running_requests: speculative 1, autoregressive 12" in row[5]
        # The caps beside the curves and in each cell's detail, not only in the CSV.
        assert "| max_running_requests |" in rendered or "<th>max_running_requests</th>" in rendered


def test_energy_of_one_reading_says_so_briefly() -> None:
    """Issue 21, report problem 6: energy is read once per run, not per pass: a cell of 3 passes
    and one reading says '1 reading', not 'one pass'."""
    assert text.energy(summarize([0.114])) == "0.114 (1 reading)"
    assert text.energy(summarize([0.1, 0.12])).startswith("0.110 [")
    assert text.energy(None) == DASH


def _glance_rows(rendered: str) -> list[list[str]]:
    """The first screen's rows (TP, workload, level, fastest, 1st ÷ 2nd, crossover), every host type's."""
    if rendered.startswith("<!DOCTYPE"):
        top = rendered.split("<h2>Simulated</h2>")[0]
        return [row for table in range(top.count("<tbody>")) for row in _html_rows(top, table)]
    return _md_rows(rendered.split("## At a glance")[1].split("## Simulated")[0], 6)


def _check_glance_row(row: list[str]) -> None:
    """A row names one fastest method only beside a speed-up and a ratio to the runner-up whose
    printed intervals lie above 1.0; a tie's top two ratio holds 1.0; a tie that lists
    autoregressive lists no speed-up above 1.0."""
    speedups = [(_number(lo), _number(hi)) for _, lo, hi in BOUNDS.findall(row[3])]
    versus = BOUNDS.search(row[4])
    if row[3].startswith("tie: "):
        assert versus is not None and _number(versus.group(2)) <= 1.0 <= _number(versus.group(3)), row
        if re.search(r"(^tie: |, )autoregressive(,|$)", row[3]):
            assert all(lo <= 1.0 for lo, _ in speedups), row
    elif not row[3].startswith(("not ranked", "autoregressive")):
        assert len(speedups) == 1 and speedups[0][0] > 1.0, row
        assert versus is None or _number(versus.group(2)) > 1.0, row


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
