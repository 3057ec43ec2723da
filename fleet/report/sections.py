"""The report's content as titled tables, once, for every human-readable format: Markdown and
HTML render the same sections. A cell is text, or text with links to result files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from fleet.report import text
from fleet.report.model import Cell, Group, Report, curves


@dataclass(frozen=True)
class Link:
    label: str
    path: str  # a result file, absolute or relative to the report


@dataclass(frozen=True)
class Links:
    links: tuple[Link, ...]


Value = Union[str, Links]


@dataclass
class Table:
    header: list[str]
    rows: list[list[Value]]
    numeric: frozenset[int] = frozenset()  # columns that sort as numbers in HTML
    measured_column: int | None = None  # where a "—" marks a row that is not a measurement
    wide: frozenset[int] = frozenset()  # columns of running text (reasons, evidence): given room in HTML


@dataclass
class Section:
    title: str
    level: int = 2
    notes: list[str] = field(default_factory=list)
    table: Table | None = None
    group: Group | None = None  # a host-type-and-TP section: its concurrency curves are drawn after it
    curves: list[tuple[str, Table]] = field(default_factory=list)  # (workload, table of levels)


def _result_links(cell: Cell) -> Links:
    return Links(tuple(Link(r.run_id, r.path) for r in cell.rows))


def _one(label: str, path: str | None) -> Value:
    return Links((Link(label, path),)) if path else text.DASH


def sections(report: Report) -> list[Section]:
    out = []
    if report.simulated:
        out.append(Section("Simulated", notes=[text.SIM_NOTE]))
    pending = [n for n in report.not_run if n.kind == "pending"]
    out.append(
        Section(
            "Sweeps",
            notes=[f"{len(pending)} planned runs have no result yet: the sweep is still running."] if pending else [],
            table=Table(
                ["sweep", "role", "playbook", "created", "runs from", "runs to", "state", "results", "unreadable"],
                [[s.sweep_id, role, f"{s.playbook_name}: {s.playbook_description}" if s.playbook_description else s.playbook_name,
                  text.when(s.created_at), text.when(s.span[0]), text.when(s.span[1]), s.state or "running", str(len(s.results)), str(len(s.unreadable))]
                 for role, group in (("reported", report.sweeps), ("baseline", report.baseline)) for s in group],
                frozenset({7, 8}),
            ),
        )
    )  # fmt: skip
    out.append(
        Section(
            "Hosts",
            table=Table(
                ["sweep", "host", "GPU", "count", "driver", "CUDA toolkit", "engine CUDA", "SGLang", "sim speed", "model revisions"],
                [
                    [h.sweep_id, h.name, h.gpu, str(h.gpu_count or text.DASH), h.driver or text.DASH, h.cuda_toolkit or text.DASH,
                     h.engine_cuda or text.DASH, h.engine_version or text.DASH, text.number(h.sim_speed, 3) if h.sim_speed else "real GPU",
                     ", ".join(f"{repo}@{rev}" for repo, rev in h.models.items()) or text.DASH]
                    for h in report.hosts
                ],
            ),
        )
    )  # fmt: skip
    for group in report.groups:
        unit = "tok/s (simulated)" if group.key.simulated else "tok/s"
        table = Table(
            ["method", "workload", "level", "status", f"output {unit}", "spread", "speed-up vs AR", "accept len",
             "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "requests ok/failed", "not a measurement because", "results"],
            [
                [c.key.variant, c.key.workload, text.level(c.key.level), text.status(c), text.tok_s(c.tok_s), text.spread(c.tok_s),
                 text.speedup(c), text.number(c.acceptance_length, 2), text.percentile(c.latency("ttft_s"), 50),
                 text.percentile(c.latency("ttft_s"), 99), text.percentile(c.latency("itl_s"), 50), text.percentile(c.latency("itl_s"), 99),
                 "{}/{}".format(*c.requests), text.short(text.reason(c), 140), _result_links(c)]
                for c in group.cells
            ],
            frozenset({2, 4, 6, 7, 8, 9, 10, 11}),
            measured_column=4,
            wide=frozenset({13}),
        )  # fmt: skip
        curve_tables = []
        for workload, variants in curves(group).items():
            levels = sorted({lv for points in variants.values() for lv, _, _ in points})
            curve_tables.append(
                (
                    workload,
                    Table(
                        ["method", *(f"level {lv}" for lv in levels)],
                        [[variant, *(next((f"{t:,.1f} ({text.number(p)}/req)" for lv, t, p in points if lv == level), text.DASH)
                                     for level in levels)] for variant, points in variants.items()],
                        frozenset(range(1, len(levels) + 1)),
                    ),
                )
            )  # fmt: skip
        out.append(Section(group.key.title, table=table, group=group, curves=curve_tables))
    if report.baseline:
        out.append(
            Section(
                "Against the baseline",
                notes=["Baseline: " + ", ".join(s.sweep_id for s in report.baseline) + ". A delta is flagged where it exceeds the "
                       "noise: the largest of 5%, the spread of repeated measurements on either side, and twice the combined "
                       "standard error of the two means from their requests' own scatter."],
                table=Table(
                    ["host type and TP", "method", "workload", "level", "now tok/s", "baseline tok/s", "delta", "noise", "verdict"],
                    [[c.key.group.title, c.key.variant, c.key.workload, text.level(c.key.level), text.number(c.current.mean),
                      text.number(c.baseline.mean), text.delta(c), f"±{c.noise * 100:.1f}%", text.flag(c)] for c in report.comparisons],
                    frozenset({3, 4, 5, 6, 7}),
                ),
            )
        )  # fmt: skip
    out.append(
        Section(
            "Failures",
            table=Table(
                ["run", "host", "status", "class", "evidence", "fix", "outcome", "result"],
                [[f.label, f.host, f.status, f.failure_class, text.short(f.evidence), f.fix or text.DASH, f.outcome or text.DASH,
                  _one(Path(f.path).stem, f.path)] for f in report.failures],
                wide=frozenset({4, 5}),
            ),
        )
    )  # fmt: skip
    out.append(
        Section(
            "Skipped, quarantined, infeasible, not comparable, pending",
            table=Table(
                ["run", "host", "kind", "reason", "result"],
                [[n.label, n.host, n.kind, text.short(n.reason), _one(Path(n.path).stem, n.path) if n.path else text.DASH] for n in report.not_run],
                wide=frozenset({3}),
            ),
        )
    )  # fmt: skip
    out.append(
        Section(
            "How to read it",
            notes=[text.PERCENTILE_RULE, text.ACCEPTANCE_NOTE,
                   "A speed-up divides by the autoregressive figure of the same host type, TP, workload and level; none is shown without one.",
                   "Only runs whose status is ok show figures; partial, failed and not-comparable runs show why instead.",
                   "The spread is min–max over the cell's measurements (repeats, and the same run in several sweeps) with ± half its range."],
        )
    )  # fmt: skip
    return out
