"""`fleet report`: tables, curves and comparisons of sweep results, with no number that misleads.

load (fleet.report.load: sweep folders, results through fleet.host.contract.load_result only)
-> model (fleet.report.model: rows, cells of passes with their intervals (fleet.measure), speed-ups
   with theirs and their verdicts, rankings, the first screen's headlines, failures, baseline changes; pure)
-> render (sections for Markdown and HTML, flat rows for CSV and JSON lines).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterator, Sequence

from fleet.report.load import SweepData, load_sweep
from fleet.errors import ReportError
from fleet.layout import SweepFolder
from fleet.report.model import Report, build_report

FORMATS = ("md", "html", "csv", "json")


def report_of(directories: Sequence[Path | str], baseline: Sequence[Path | str] = ()) -> Report:
    """The report of one or more sweep folders (pooled: the same run in several is a repeat),
    against `baseline` folders when given: sweeps of the same playbook (ReportError otherwise: a
    comparison matches cells by configuration, which another playbook's may share by accident)."""
    sweeps, before = [load_sweep(d) for d in directories], [load_sweep(d) for d in baseline]
    names = sorted({sweep.playbook_name for sweep in sweeps})
    for sweep in before:
        if sweep.playbook_name not in names:
            raise ReportError(
                str(SweepFolder(sweep.directory).record), "playbook_name",
                f"a sweep of the playbook it is compared with ({', '.join(names)})", sweep.playbook_name,
            )  # fmt: skip
    return build_report(sweeps, before)


def render(report: Report, fmt: str, start: Path | None = None) -> str:
    """`fmt`: md, html, csv or json (JSON lines); `start`: where the output will live, so that
    links to result files resolve from there (None: the paths as given)."""
    if fmt == "md":
        from fleet.report.markdown import render_markdown

        return render_markdown(report, start)
    if fmt == "html":
        from fleet.report.html import render_html  # imports matplotlib, for the plots

        return render_html(report, start)
    if fmt == "csv":
        from fleet.report.flat import render_csv

        return render_csv(report)
    if fmt == "json":
        from fleet.report.flat import render_jsonl

        return render_jsonl(report)
    raise ValueError(f"report format {fmt!r}: expected one of {', '.join(FORMATS)}")


def stream(report: Report, fmt: str, start: Path | None = None) -> Iterator[str]:
    """`render`'s text in pieces, for a writer: JSON lines and CSV a row at a time, so that writing
    50,000 results' rows never holds them all as one text (nor twice, while it is joined); md
    and html, a page that is read whole, in one piece."""
    if fmt == "json":
        from fleet.report.flat import jsonl_lines

        return jsonl_lines(report)
    if fmt == "csv":
        from fleet.report.flat import csv_lines

        return csv_lines(report)
    return iter([render(report, fmt, start)])


__all__ = ["FORMATS", "Report", "ReportError", "SweepData", "build_report", "load_sweep", "render", "report_of", "stream"]
