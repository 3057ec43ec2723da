"""`fleet report`'s work grows with the results, not their square (issue 28): the Python lines it
executes to build and render a report, per cell, do not grow with the number of cells. Counted,
not timed (sys.settrace's line events), so load on the machine cannot make it flaky; a scan of
every cell per cell (the autoregressive basis found by a scan, the first screen's headlines
filtering every cell per workload) or a figure recomputed per reader shows as lines per cell that
grow with the sweep. bench_scale.py's report row measures the seconds."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from fleet.report import load_sweep, render
from fleet.report.model import Report, Row, make_cells, rows_of

NOISY = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "noisy"
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
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    fresh = [replace(row, passes=list(row.passes)) for row in rows]
    sys.settrace(tracer)
    try:
        report = Report(sweeps=[], hosts=[], rows=fresh, groups=make_cells(fresh), failures=[], not_run=[])
        render(report, "md")
        render(report, "json")
    finally:
        sys.settrace(None)
    return count


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
