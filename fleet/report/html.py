"""The report as one self-contained HTML file: no network at all (inline CSS, a small inline
script that sorts tables by a click on a header, concurrency plots as inline SVG), and every
figure linked to its result file."""

from __future__ import annotations

import re
from collections import defaultdict
from html import escape
from pathlib import Path

from fleet.measure.stats import Estimated
from fleet.report import text
from fleet.report.model import Report, curves, relative_path
from fleet.report.plots import curve_svg
from fleet.report.sections import Links, Section, Table, Value, sections

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 12.5px; }
th, td { border: 1px solid #d6d6d6; padding: 3px 6px; vertical-align: top; text-align: left; }
th { background: #f2f2f5; cursor: pointer; user-select: none; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
td.num { text-align: right; white-space: nowrap; } td.wide { min-width: 26em; }
td.details { max-width: 28em; } .nw { white-space: nowrap; } td.details dt { font-weight: 600; } td.details dd { margin: 0 0 .3em .8em; }
.sim { background: #fff4d6; border: 1px solid #e8c66a; padding: .5em .8em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plots svg { max-width: 640px; height: auto; }
"""

# Sorting: text in natural order (ddtree-b8 before ddtree-b12), numbers by their leading value ("1,234.5 ms (n=10)" sorts as 1234.5); a cell with no
# number ("—": not a measurement) sorts last in either direction.
_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var numeric = (table.dataset.numeric || "").split(",").filter(Boolean).map(Number);
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var ascending = !th.classList.contains("sorted-asc");
      table.querySelectorAll("th").forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
      th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
      var key = function (row) {
        var value = row.cells[column].textContent.trim();
        if (numeric.indexOf(column) < 0) return value;
        var match = value.replace(/,/g, "").match(/-?[0-9]+(\\.[0-9]+)?/);
        return match ? parseFloat(match[0]) : null;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) return (x === null) - (y === null);
        var order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


# A figure and its interval, with the method before a speed-up ("ddtree-b15 2.23× [1.92–2.58]",
# "0.114 [0.10–0.12]"), wrap as one word: never at a dash or inside a name.
_FIGURE = re.compile(r"(?:[\w.-]+ )?(?:[0-9][0-9.,]*× )?\[[^\]\s]+\]")


def _value(value: Value, start: Path | None) -> str:
    if isinstance(value, Links):
        return " ".join(f'<a href="{escape(relative_path(link.path, start))}">{escape(link.label)}</a>' for link in value.links)
    return _FIGURE.sub(lambda m: f'<span class="nw">{m.group(0)}</span>', escape(value))


def _table(table: Table, start: Path | None) -> str:
    numeric = ",".join(str(i) for i in sorted(table.numeric))
    shown = len(table.header) if table.fold_from is None else table.fold_from
    head = "".join(f"<th>{escape(h)}</th>" for h in table.header[:shown]) + ("<th>details</th>" if shown < len(table.header) else "")
    rows = []
    for row in table.rows:
        cells = "".join(f"<td{_cell_class(table, i)}>{_value(v, start)}</td>" for i, v in enumerate(row[:shown]))
        if shown < len(table.header):
            folded = "".join(f"<dt>{escape(h)}</dt><dd>{_value(v, start)}</dd>" for h, v in zip(table.header[shown:], row[shown:]))
            cells += f'<td class="details"><details><summary>more</summary><dl>{folded}</dl></details></td>'
        rows.append(f"<tr>{cells}</tr>")
    fixed = "".join(f'<col style="width:{w}">' if w else "<col>" for w in table.widths)
    style, cols = (' style="table-layout: fixed; width: 100%"', f"<colgroup>{fixed}</colgroup>") if table.widths else ("", "")
    return f'<table class="sortable"{style} data-numeric="{numeric}">{cols}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _cell_class(table: Table, column: int) -> str:
    if column in table.numeric:
        return ' class="num"'
    return ' class="wide"' if column in table.wide else ""


def _plots(section: Section) -> str:
    """Output tok/s, per-request tok/s and the speed-up against concurrency, a line per method,
    each point with its 95 % interval."""
    group = section.group
    if group is None:
        return ""
    sim = " (simulated)" if group.key.simulated else ""
    svgs = []
    for workload, variants in curves(group).items():
        title = f"TP{group.key.tp} · {workload}" + (" · simulated" if group.key.simulated else "")
        svgs.append(curve_svg(title, f"output tok/s{sim}", {v: [(lv, t) for lv, t, _ in pts] for v, pts in variants.items()}))
        svgs.append(curve_svg(title, f"per-request tok/s{sim}", {v: [(lv, q) for lv, _, q in pts if q is not None] for v, pts in variants.items()}))
        speedups: dict[str, list[tuple[int, Estimated]]] = defaultdict(list)
        for cell in group.cells:
            if cell.key.workload == workload and cell.key.level and cell.speedup is not None:
                speedups[cell.key.variant].append((cell.key.level, cell.speedup))
        if speedups:
            svgs.append(curve_svg(title, "speed-up over autoregressive", speedups, reference=1.0))
    return '<div class="plots">' + "".join(svgs) + "</div>" if svgs else ""


def render_html(report: Report, start: Path | None = None) -> str:
    """`start`: the folder the file will live in, so that result links resolve from there."""
    names = ", ".join(sorted({s.playbook_name for s in report.sweeps}))
    parts = [f"<h1>fleet report: {escape(names)}</h1>", f"<p>Generated {escape(text.when(report.generated_at))}.</p>"]
    for section in sections(report):
        parts.append(f"<h{section.level}>{escape(section.title)}</h{section.level}>")
        for note in section.notes:
            parts.append(f'<p class="sim">{escape(note)}</p>' if section.title == "Simulated" else f"<p>{escape(note)}</p>")
        if section.table is not None:
            parts.append(_table(section.table, start) if section.table.rows else "<p>(none)</p>")
        for workload, curve in section.curves:
            parts.append(f"<p>Concurrency curve, {escape(workload)}: output tok/s [95 % interval] by level</p>")
            parts.append(_table(curve, start))
        parts.append(_plots(section))
    body = "\n".join(p for p in parts if p)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>fleet report: {escape(names)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{body}\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )
