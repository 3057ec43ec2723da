"""The flat results, for pandas: CSV and JSON lines, one row per run and concurrency level
(and repeat), every row naming its result file. Figures are empty where the run is not a
measurement (`comparable` false) -- its `status` and `reason` say why."""

from __future__ import annotations

import csv
import io
import json

from fleet.report.model import Report


def flat_rows(report: Report) -> list[dict[str, object]]:
    return [row.flat() for row in report.rows]


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
    return "".join(json.dumps(row, sort_keys=False) + "\n" for row in flat_rows(report))
