"""The flat results, for pandas: CSV and JSON lines, one row per run and concurrency level
(and repeat), every row naming its result file. Figures are empty where the run is not a
measurement (`comparable` false) -- its `status` and `reason` say why. Each measured row also
carries its cell's figures (fleet.report.model.Cell.flat): passes, mean, the 95 % interval's
bounds and CV, the speed-up with its bounds, how it was computed and its verdict, the tier."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from fleet.report.load import collector_paused
from fleet.report.model import Cell, CellKey, Report


def flat_rows(report: Report) -> list[dict[str, object]]:
    return list(each_flat_row(report))


def each_flat_row(report: Report) -> Iterator[dict[str, object]]:
    """The flat rows one at a time: a writer that needs one at a time holds one, not 50,000 (issue 28)."""
    cells = {cell.key: cell for cell in report.cells}
    blank = dict.fromkeys(Cell(next(iter(cells)), []).flat()) if cells else {}
    figures: dict[CellKey, dict[str, object]] = {}  # a cell's figures once, however many rows it has
    for row in report.rows:
        cell = cells.get(row.cell)
        if cell is not None and row.comparable and cell.key not in figures:
            figures[cell.key] = cell.flat()
        yield {**row.flat(), **(figures[cell.key] if cell is not None and row.comparable else blank)}


def render_csv(report: Report) -> str:
    rows = flat_rows(report)
    buffer = io.StringIO()
    if not rows:
        return ""
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def render_jsonl(report: Report) -> str:
    with collector_paused():  # a line a row, 50,000 of them (fleet.report.load.collector_paused)
        return "".join(json.dumps(row, sort_keys=False) + "\n" for row in each_flat_row(report))
