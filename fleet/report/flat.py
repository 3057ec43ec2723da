"""The flat results, for pandas: CSV and JSON lines, one row per run and concurrency level
(and repeat), every row naming its result file. Figures are empty where the run is not a
measurement (`comparable` false) -- its `status` and `reason` say why. Each measured row also
carries its cell's figures (fleet.report.model.Cell.flat): passes, mean, the 95 % interval's
bounds and CV, the speed-up with its bounds, how it was computed and its verdict, the tier."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Iterator

from fleet.host.contract.reader import collector_paused
from fleet.report.model import Cell, CellKey, Report


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


def csv_lines(report: Report) -> Iterator[str]:
    """The CSV a row at a time (with the header before the first), nothing where no run is."""
    rows = each_flat_row(report)
    first = next(rows, None)
    if first is None:
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(first), lineterminator="\n")
    writer.writeheader()
    for row in itertools.chain([first], rows):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()


def jsonl_lines(report: Report) -> Iterator[str]:
    """The JSON lines one at a time: 50,000 results' lines are about 85 MiB as one text."""
    with collector_paused():  # a line a row, 50,000 of them (fleet.host.contract.reader.collector_paused)
        for row in each_flat_row(report):
            yield json.dumps(row, sort_keys=False) + "\n"


def render_csv(report: Report) -> str:
    return "".join(csv_lines(report))


def render_jsonl(report: Report) -> str:
    return "".join(jsonl_lines(report))
