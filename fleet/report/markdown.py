"""The report as Markdown, for terminals and pull requests."""

from __future__ import annotations

from pathlib import Path

from fleet.report import text
from fleet.report.model import Report, relative_path
from fleet.report.sections import Links, Table, Value, sections


def _value(value: Value, start: Path | None) -> str:
    if isinstance(value, Links):
        return " ".join(f"[{link.label}]({relative_path(link.path, start)})" for link in value.links)
    return value.replace("|", "\\|").replace("\n", " ")


def _table(table: Table, start: Path | None) -> list[str]:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "|".join("---" for _ in table.header) + "|"]
    lines += ["| " + " | ".join(_value(v, start) for v in row) + " |" for row in table.rows]
    return lines + [""]


def render_markdown(report: Report, start: Path | None = None) -> str:
    """`start`: the folder the file will live in, so that result links resolve from there."""
    names = ", ".join(sorted({s.playbook_name for s in report.sweeps}))
    out = [f"# fleet report: {names}", "", f"Generated {text.when(report.generated_at)}.", ""]
    for section in sections(report):
        out += [f"{'#' * section.level} {section.title}", ""]
        out += [f"> {note}" if section.title == "Simulated" else f"- {note}" for note in section.notes]
        if section.notes:
            out.append("")
        if section.table is not None:
            out += _table(section.table, start) if section.table.rows else ["(none)", ""]
        for workload, curve in section.curves:
            out += [f"Concurrency curve, {workload}: output tok/s [95 % interval] by level", ""]
            out += _table(curve, start)
    return "\n".join(out)
