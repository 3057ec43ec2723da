"""`fleet report`'s work grows with the results, not their square (issue 28): the Python lines it
executes to build and render a report, per cell, do not grow with the number of cells. Counted,
not timed (sys.settrace's line events), so load on the machine cannot make it flaky; a scan of
every cell per cell (the autoregressive basis found by a scan, the first screen's headlines
filtering every cell per workload) or a figure recomputed per reader shows as lines per cell that
grow with the sweep. bench_scale.py's report row measures the seconds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fleet.host.contract import SweepDir
from fleet.report import build_report, load_sweep, render
from fleet.report.load import Loaded
from fleet.sweep.resultcache import FIGURE_FIELDS, PASS_FIELDS, SECTIONS, ttfts
from fleet.report.model import Report, Row, make_cells, rows_of
from fleet.sweep.ledger import read_sweep_results
from tests.unit.line_count import lines_executed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
NOISY = FIXTURES / "noisy"
METHODS = 10  # autoregressive and DDTree b1..b9 per workload, as in bench_scale's report row


def _rows(workloads: int, templates: dict[str, Row]) -> list[Row]:
    """`workloads` x 10 cells, copies of the noisy fixture's real rows (3 passes each), every
    speculative cell with a speed-up over its workload's autoregressive one."""
    rows = []
    for w in range(workloads):
        for m in range(METHODS):
            template = templates["autoregressive" if m == 0 else "ddtree"]
            variant = "autoregressive" if m == 0 else f"ddtree-b{m}"
            rows.append(replace(template, run_id=f"{w:04d}{m:02d}", label=f"tp1-{variant}/w{w}", variant=variant, workload=f"w{w}",
                                passes=list(template.passes)))  # fmt: skip
    return rows


def _lines(rows: list[Row]) -> int:
    """Python lines executed to make the cells and render the report as Markdown and JSON lines."""
    fresh = [replace(row, passes=list(row.passes)) for row in rows]

    def work() -> None:
        report = Report(sweeps=[], hosts=[], rows=fresh, groups=make_cells(fresh), failures=[], not_run=[])
        render(report, "md")
        render(report, "json")

    return lines_executed(work)


def test_report_work_per_cell_does_not_grow_with_the_number_of_cells() -> None:
    sweep = load_sweep(NOISY)
    found = [row for loaded in sweep.results for row in rows_of(sweep, loaded) if row.comparable and row.workload_kind == "short"]
    templates = {"autoregressive": next(r for r in found if r.variant == "autoregressive"),
                 "ddtree": next(r for r in found if r.variant == "ddtree-b16")}  # fmt: skip
    _lines(_rows(2, templates))  # warm caches that fill once (imports, the binomial ranks of a cell's size)
    small, large = 10, 40
    per_cell_small = _lines(_rows(small, templates)) / (small * METHODS)
    per_cell_large = _lines(_rows(large, templates)) / (large * METHODS)
    assert per_cell_large <= 1.05 * per_cell_small, (per_cell_small, per_cell_large)


@pytest.mark.parametrize("fixture", ["noisy", "sweep", "baseline"])
def test_the_report_of_the_part_load_keeps_is_the_report_of_whole_results(fixture: str) -> None:
    """load_sweep keeps of each result only what the report reads (fleet.sweep.resultcache.reported:
    ~1/4 of its memory); the report of those is the report of the whole results, every line of it
    in Markdown and JSON lines. A field the model reads that `reported` drops shows here."""
    kept = load_sweep(FIXTURES / fixture)
    whole = replace(kept, results=[Loaded(FIXTURES / fixture / r.host / SweepDir.RUNS, r, ttfts(r.requests))
                                   for r in read_sweep_results(FIXTURES / fixture, sweep_id=kept.sweep_id).results])  # fmt: skip
    assert [loaded.result.host_facts for loaded in whole.results] != [None] * len(whole.results)  # whole: the host's facts and all
    for fmt in ("md", "json"):
        assert _body(render(build_report([kept]), fmt)) == _body(render(build_report([whole]), fmt))


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("Generated ")]  # the clock's line


class Asked(dict[str, Any]):
    """A result's figures or one of their sections that notes each key the report asks it for
    ("*" where it is read whole: iterated, copied, dumped)."""

    def __init__(self, data: dict[str, Any], asked: set[str]) -> None:
        super().__init__(data)
        self.asked = asked

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self.asked.add("*")
        return super().__iter__()

    def keys(self) -> Any:
        self.asked.add("*")
        return super().keys()

    def items(self) -> Any:
        self.asked.add("*")
        return super().items()

    def values(self) -> Any:
        self.asked.add("*")
        return super().values()


@pytest.mark.parametrize("fixture", ["noisy", "sweep", "baseline"])
def test_what_reported_drops_of_figures_and_sections_is_never_read_by_the_report(fixture: str) -> None:
    """Of whole results, every key the report (Markdown, HTML, JSON lines) asks of a result's
    figures, its levels and its repeats is one `reported` keeps (FIGURE_FIELDS, PASS_FIELDS):
    the part it drops is never read, whatever the fixtures' figures happen to be."""
    kept = load_sweep(FIXTURES / fixture)
    asked: dict[str, set[str]] = {"figures": set(), **{key: set() for key in SECTIONS}}
    whole = []
    for r in read_sweep_results(FIXTURES / fixture, sweep_id=kept.sweep_id).results:
        extras = dict(r.extras)
        for key in SECTIONS:
            if isinstance(extras.get(key), list):
                extras[key] = [Asked(section, asked[key]) if isinstance(section, dict) else section for section in extras[key]]
        asked_of = replace(r, figures=Asked(r.figures, asked["figures"]), extras=extras)
        whole.append(Loaded(FIXTURES / fixture / r.host / SweepDir.RUNS, asked_of, ttfts(r.requests)))
    report = build_report([replace(kept, results=whole)])
    for fmt in ("md", "html", "json"):
        render(report, fmt)
    assert asked["figures"] and asked["figures"] <= set(FIGURE_FIELDS), asked["figures"]
    assert asked["levels"] <= set(SECTIONS["levels"]), asked["levels"]
    assert asked["repeats"] <= set(PASS_FIELDS), asked["repeats"]
    if fixture == "noisy":  # the one fixture with repeats: what the test above would miss shows here
        assert asked["repeats"], asked
