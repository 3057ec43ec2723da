"""The report's content as titled tables, once, for every human-readable format: Markdown and
HTML render the same sections. A cell is text, or text with links to result files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from fleet.report import categories, saturation, text
from fleet.report.engines import engine_pairs, pair_titles
from fleet.report.model import Cell, Group, Headline, Report, curves


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
    wide: frozenset[int] = frozenset()  # columns of running text (reasons, evidence): given room in HTML
    # Columns from this one on are detail: HTML folds them into one <details> cell per row, so the
    # main columns read at 1,400 px; Markdown keeps them as columns.
    fold_from: int | None = None
    # Column widths for HTML (CSS lengths, "" for the rest of the row): a fixed layout as wide as the
    # page, so that a table of running text wraps where the reader expects at 1,400 px.
    widths: tuple[str, ...] = ()


@dataclass
class Section:
    title: str
    level: int = 2
    notes: list[str] = field(default_factory=list)
    table: Table | None = None
    group: Group | None = None  # a host-type-and-TP section: its concurrency curves are drawn after it
    curves: list[tuple[str, Table]] = field(default_factory=list)  # (workload, table of levels)


def _result_links(cell: Cell) -> Links:
    """Each result file once (a concurrency run is a row per level and repeat)."""
    return Links(tuple(Link(run_id, path) for run_id, path in dict((r.run_id, r.path) for r in cell.rows).items()))


def _one(label: str, path: str | None) -> Value:
    return Links((Link(label, path),)) if path else text.DASH


def _glance(report: Report) -> list[Section]:
    """The first screen: per host type (a heading each) a row per TP, workload and level: the
    fastest method and by how much, or the tie, the ratio of the top two, and where speculative
    decoding stops paying."""
    one, measured = report.passes_counts
    notes = [text.one_pass_note(one, measured)] if one else []
    out = [Section("At a glance", notes=notes + [text.GLANCE_NOTE])]
    by_type: dict[str, list[Headline]] = {}
    for h in report.headlines:
        by_type.setdefault(h.group.host_type, []).append(h)
    for host_type, found in by_type.items():
        out.append(
            Section(
                host_type,
                level=3,
                table=Table(
                    ["TP", "workload", "level", "fastest: speed-up vs autoregressive [95 %]", "1st ÷ 2nd [95 %]", "speculative decoding stops paying"],
                    [[str(h.group.tp), h.workload, text.level(h.level), text.headline_fastest(h), text.headline_versus(h),
                      text.crossover(h.crossover) if h.crossover is not None or not h.level else ""] for h in found],
                    frozenset({0, 2}),
                    widths=("2.6em", "7.2em", "3.6em", "", "16em", "24em"),
                ),
            )
        )  # fmt: skip
    return out


def _group_table(group: Group) -> Table:
    """The measured cells of one host type and TP; what did not measure is in Failures and below.
    Energy (tokens per joule) and, where the host file prices its GPUs, $ per million tokens stand
    beside the throughput when some cell has them; the lossless check's verdict in the detail."""
    cells = [c for c in group.cells if c.tok_s is not None]
    energy = any(c.tokens_per_joule is not None for c in cells)
    priced = any(c.usd_per_million_tokens is not None for c in cells)
    extra = (["tok/J [95 %]"] if energy else []) + (["$/M tok"] if priced else [])
    shift = len(extra)
    checked = any(c.lossless is not None for c in cells)
    header = ["method", "workload", "level", "passes", f"output tok/s{' (simulated)' if group.key.simulated else ''} [95 %]", *extra, "CV",
              "speed-up vs AR [95 %]", "verdict", "rank", "accept len [95 %]", "TTFT p50 [95 %]", "TTFT p99", "ITL p50 [95 %]",
              "ITL p99", "per-request tok/s", "requests ok/failed", "max_running_requests", *(["lossless"] if checked else []), "status", "results"]  # fmt: skip

    def energy_cells(c: Cell) -> list[Value]:
        out: list[Value] = [text.energy(c.tokens_per_joule)] if energy else []
        return out + ([text.dollars(c.usd_per_million_tokens)] if priced else [])

    return Table(
        header,
        [
            [c.key.variant, c.key.workload, text.level(c.key.level), str(len(c.passes)), text.summary(c.tok_s), *energy_cells(c), text.cv(c.tok_s),
             text.ratio(c.speedup), text.verdict(c.verdict), text.standing(c.standing), text.summary(c.acceptance_length, 2),
             text.ttft(c.ttft(50)), text.ttft(c.ttft(99)), text.summary(c.itl(50), 1, 1000, " ms"), text.summary(c.itl(99), 1, 1000, " ms"),
             text.summary(c.per_request_tok_s), "{}/{}".format(*c.requests), text.caps_of(c), *([c.lossless or text.DASH] if checked else []),
             text.status(c), _result_links(c)]
            for c in cells
        ],
        frozenset({2, 3, 4, *range(5, 5 + shift), *(i + shift for i in (5, 6, 8, 9, 10, 11, 12))}),
        fold_from=10 + shift,  # TTFT on: a long-context TTFT with its interval is ~250 px, past 1,400 with tok/J beside it
    )  # fmt: skip


def _curve_tables(group: Group) -> list[tuple[str, Table]]:
    """Per concurrency workload, each method's output tok/s by level, beside the max_running_requests
    its servers ran with: a method measured at fewer levels was capped lower by its engine."""
    out = []
    caps = {(c.key.workload, c.key.variant): text.caps_of(c) for c in group.cells if c.key.level and c.tok_s is not None}
    for workload, variants in curves(group).items():
        levels = sorted({lv for points in variants.values() for lv, _, _ in points})
        out.append(
            (
                workload,
                Table(
                    ["method", "max_running_requests", *(f"level {lv}" for lv in levels)],
                    [[variant, caps.get((workload, variant), text.DASH),
                      *(next((text.summary(t) for lv, t, _ in points if lv == level), text.DASH) for level in levels)]
                     for variant, points in variants.items()],
                    frozenset(range(1, len(levels) + 2)),
                ),
            )
        )  # fmt: skip
    return out


def _how_to_read(report: Report) -> Section:
    ratios = [c.speedup for c in report.cells if c.speedup is not None] + [c.ratio for c in report.comparisons]
    paired = sum(1 for r in ratios if r.method == "paired")
    return Section(
        "How to read it",
        notes=[text.INTERVAL_NOTE,
               f"Speed-ups and baseline changes here: {paired} paired by pass, {len(ratios) - paired} by Fieller's interval. " + text.RATIO_NOTE,
               text.VERDICT_NOTE, text.PERCENTILE_RULE, text.ACCEPTANCE_NOTE, text.ENERGY_NOTE,
               "A speed-up divides by the autoregressive figure of the same host type, TP, workload and level; none is shown without one.",
               "Only runs whose status is ok give figures; failed, partial, skipped and not-comparable runs are listed in their own sections, with why."],
    )  # fmt: skip


def sections(report: Report) -> list[Section]:
    out = _glance(report)
    if report.simulated:
        out.append(Section("Simulated", notes=[text.SIM_NOTE]))
    for group in report.groups:
        out.append(Section(group.key.title, table=_group_table(group), group=group, curves=_curve_tables(group)))
    if by_category := categories.category_cells(report.sweeps, report.rows):
        out.append(Section(categories.TITLE, notes=[categories.NOTE], table=Table(categories.HEADER, [list[Value](row) for row in categories.table_rows(by_category)], categories.NUMERIC)))
    if found := saturation.frontiers(report.sweeps, report.rows):
        out.append(Section(saturation.TITLE, notes=[saturation.NOTE], table=Table(saturation.HEADER, [list[Value](row) for row in saturation.table_rows(found)], saturation.NUMERIC)))
    pairs, left_out = engine_pairs(report.cells)
    if pairs or left_out:
        first, second = pair_titles()
        out.append(
            Section(
                "Engines side by side",
                notes=[f"The same method, workload and level on the same host type and TP under {first} and {second}: {second} ÷ {first} with its 95 % interval "
                       f"(Fieller's for the two engines' independent servers); 'faster': that interval lies wholly above 1.0, {second} is faster; 'slower': wholly below, {first} is."]
                + ([f"Not compared, a fix changed one side's settings: {', '.join(left_out)}."] if left_out else []),
                table=Table(
                    ["host type", "TP", "method", "workload", "level", f"{first} tok/s [95 %]", f"{second} tok/s [95 %]", f"{second} ÷ {first} [95 %]", "verdict",
                     f"{first} accept len", f"{second} accept len"],
                    [[p.host_type, str(p.tp), p.variant, p.workload, text.level(p.level), text.summary(p.first.tok_s), text.summary(p.second.tok_s), text.ratio(p.ratio),
                      text.verdict(p.verdict), text.summary(p.first.acceptance_length, 2), text.summary(p.second.acceptance_length, 2)] for p in pairs],
                    frozenset({1, 4, 5, 6, 7}),
                ),
            )
        )  # fmt: skip
    if report.baseline:
        out.append(
            Section(
                "Against the baseline",
                notes=["Baseline: " + ", ".join(s.sweep_id for s in report.baseline) + ". " + text.BASELINE_NOTE],
                table=Table(
                    ["host type and TP", "method", "workload", "level", "now tok/s [95 %]", "baseline tok/s [95 %]", "change [95 %]", "interval", "verdict"],
                    [[c.key.group.title, c.key.variant, c.key.workload, text.level(c.key.level), text.summary(c.current),
                      text.summary(c.baseline), text.delta(c), c.ratio.method, text.verdict(c.verdict)] for c in report.comparisons],
                    frozenset({3, 4, 5, 6}),
                ),
            )
        )  # fmt: skip
    out.append(
        Section(
            "Failures",
            table=Table(
                ["run", "host", "status", "class", "outcome", "evidence", "fix", "result"],
                [[f.label, f.host, f.status, f.failure_class, f.outcome or text.DASH, text.short(f.evidence), f.fix or text.DASH,
                  _one(Path(f.path).stem, f.path)] for f in report.failures],
                wide=frozenset({5, 6}),
                fold_from=5,
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
    out.append(_how_to_read(report))
    return out
