"""The report's model: from loaded sweeps to rows, comparable cells, speed-ups, failures and
baseline deltas. Pure: no I/O, no rendering.

Rules, each enforced here and nowhere else:
- a figure is a measurement only when its run is `ok` (RunStatus.comparable): rows of partial,
  failed, skipped and not-comparable runs carry their status and reason, never a tok/s, a
  latency or an acceptance length;
- a cell is one comparable unit: host type (GPU model, simulated or not, SGLang release), TP
  size, method variant, workload and concurrency level. Runs of the same cell -- repeats within
  a run, the same run in several sweeps given together -- pool into one figure with its spread;
- a speed-up divides a cell by the autoregressive cell of the SAME host type, TP, workload and
  level, never across them; without such a baseline there is no speed-up;
- against `--baseline`, a delta is flagged when it exceeds the noise, the largest of: NOISE_FLOOR;
  the relative spread (max - min) / mean of repeated measurements on either side; and twice the
  combined relative standard error of the two sides' means, estimated from their requests'
  own rates (tokens / e2e) -- what one measurement's own scatter says about its mean;
- latency percentiles follow fleet.host.agent.stats' sample-size rule (null below it: shown
  as the max and n); with several runs in a cell, a percentile is the mean of theirs and n their sum.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from fleet.host.contract import RunResult, RunStatus
from fleet.host.failures import root_cause
from fleet.report.load import HostRecord, Loaded, SweepData

# The least a delta must exceed to be flagged: a few percent is what clocks, thermals and
# scheduling move a single real-GPU measurement by. It is a floor, not an estimate: repeats and
# the requests' own scatter raise the noise where they measure more (the simulator, time-scaled
# on a shared CPU, scatters far more: its two fixture sweeps differ by ~20 % on a median cell).
NOISE_FLOOR = 0.05
AUTOREGRESSIVE = "autoregressive"


@dataclass(frozen=True, order=True)
class GroupKey:
    """What must be equal for two figures to be compared: the host type and the TP size."""

    gpu: str
    simulated: bool
    engine_release: str
    tp: int

    @property
    def title(self) -> str:
        sim = " (simulated)" if self.simulated else ""
        return f"{self.gpu}{sim} · SGLang {self.engine_release} · TP{self.tp}"


@dataclass(frozen=True, order=True)
class CellKey:
    group: GroupKey
    workload: str
    level: int  # 0 for a workload without concurrency levels
    variant: str


@dataclass
class Row:
    """One run at one concurrency level (and repeat): the flat results, for CSV/JSONL and cells."""

    sweep_id: str
    host: str
    group: GroupKey
    run_id: str
    label: str
    method: str
    variant: str
    speculative: bool
    workload: str
    workload_kind: str
    level: int | None
    repeat: int | None
    status: str
    reason: str | None  # why it is not a measurement (failure, deviation, skip), else None
    sim_speed: float | None
    path: str
    fix: str | None = None  # a fixed variant: what it fixes
    server_max_running: int | None = None
    # Figures: set only for a comparable (ok) run.
    output_tok_s: float | None = None
    output_tok_s_per_request: float | None = None
    request_throughput: float | None = None
    acceptance_length: float | None = None
    ttft_s: dict[str, Any] | None = None
    itl_s: dict[str, Any] | None = None
    requests_sent: int = 0
    requests_ok: int = 0
    requests_failed: int = 0
    samples: list[float] = field(default_factory=list)  # tok/s per repeat (one entry without repeats)
    request_rates: list[float] = field(default_factory=list)  # each ok request's tokens / e2e, for the noise

    @property
    def comparable(self) -> bool:
        return self.status == RunStatus.ok.value

    @property
    def cell(self) -> CellKey:
        return CellKey(self.group, self.workload, self.level or 0, self.variant)

    @property
    def queued(self) -> bool:
        """Driven at more requests in flight than the server runs at once (it queued the rest)."""
        return self.level is not None and self.server_max_running is not None and self.level > self.server_max_running

    def flat(self) -> dict[str, Any]:
        """The row for CSV and JSONL: plain values, percentiles split out with their n."""
        out: dict[str, Any] = {
            "sweep_id": self.sweep_id, "host": self.host, "gpu": self.group.gpu, "simulated": self.group.simulated,
            "sim_speed": self.sim_speed, "engine_release": self.group.engine_release, "tp": self.group.tp,
            "method": self.method, "variant": self.variant, "workload": self.workload, "workload_kind": self.workload_kind,
            "level": self.level, "repeat": self.repeat, "run_id": self.run_id, "label": self.label, "status": self.status,
            "comparable": self.comparable, "reason": self.reason, "fix": self.fix,
            "output_tok_s": self.output_tok_s, "output_tok_s_per_request": self.output_tok_s_per_request,
            "request_throughput": self.request_throughput, "acceptance_length": self.acceptance_length,
        }  # fmt: skip
        for name, figure in (("ttft_s", self.ttft_s), ("itl_s", self.itl_s)):
            for stat in ("n", "p50", "p90", "p99", "max"):
                out[f"{name}_{stat}"] = figure.get(stat) if figure else None
        out.update(requests_sent=self.requests_sent, requests_ok=self.requests_ok, requests_failed=self.requests_failed,
                   server_max_running_requests=self.server_max_running, result_path=self.path)  # fmt: skip
        return out


@dataclass
class Spread:
    mean: float
    low: float
    high: float
    n: int

    @property
    def relative(self) -> float:
        """(max - min) / mean: 0 for a single sample."""
        return (self.high - self.low) / self.mean if self.n > 1 and self.mean else 0.0


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    return Spread(sum(values) / len(values), min(values), max(values), len(values))


@dataclass
class Cell:
    key: CellKey
    rows: list[Row]
    speedup: float | None = None
    speedup_basis: Spread | None = None  # the autoregressive cell it divides by

    @property
    def measured(self) -> list[Row]:
        return [r for r in self.rows if r.comparable]

    @property
    def tok_s(self) -> Spread | None:
        return spread([s for r in self.measured for s in r.samples])

    @property
    def relative_error(self) -> float:
        """The relative standard error of the cell's mean from its requests' own rates (0 with fewer than 2)."""
        rates = [q for r in self.measured for q in r.request_rates]
        if len(rates) < 2:
            return 0.0
        mean = sum(rates) / len(rates)
        variance = sum((q - mean) ** 2 for q in rates) / (len(rates) - 1)
        return math.sqrt(variance) / mean / math.sqrt(len(rates)) if mean > 0 else 0.0

    @property
    def per_request_tok_s(self) -> float | None:
        return _mean([r.output_tok_s_per_request for r in self.measured])

    @property
    def acceptance_length(self) -> float | None:
        return _mean([r.acceptance_length for r in self.measured])

    def latency(self, name: str) -> dict[str, Any] | None:
        """TTFT or ITL of the cell: one run's summary, or the mean of several runs' percentiles."""
        figures = [getattr(r, name) for r in self.measured if getattr(r, name)]
        if not figures:
            return None
        pooled: dict[str, Any] = {"n": sum(f["n"] for f in figures), "max": max(f["max"] for f in figures)}
        for stat in ("p50", "p90", "p99"):
            values = [f.get(stat) for f in figures]
            present = [float(v) for v in values if v is not None]
            pooled[stat] = sum(present) / len(present) if len(present) == len(values) else None
        return pooled

    @property
    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for row in self.rows:
            counts[row.status] += 1
        return dict(counts)

    @property
    def reasons(self) -> list[str]:
        return sorted({r.reason for r in self.rows if r.reason})

    @property
    def requests(self) -> tuple[int, int]:
        return sum(r.requests_ok for r in self.rows), sum(r.requests_failed for r in self.rows)

    @property
    def queued(self) -> bool:
        return any(r.queued for r in self.measured)


@dataclass
class Group:
    key: GroupKey
    cells: list[Cell]


@dataclass
class FailureRow:
    label: str
    host: str
    sweep_id: str
    status: str
    failure_class: str
    evidence: str
    fix: str | None
    outcome: str | None  # the fixed variant's status, "pending" while it has no result
    path: str


@dataclass
class NotRun:
    label: str
    host: str
    kind: str  # skipped | quarantined | not_comparable | unplaceable | pending | unreadable
    reason: str
    path: str | None


@dataclass
class Comparison:
    key: CellKey
    current: Spread
    baseline: Spread
    noise: float

    @property
    def delta(self) -> float:
        return self.current.mean / self.baseline.mean - 1

    @property
    def beyond_noise(self) -> bool:
        return abs(self.delta) > self.noise


@dataclass
class HostLine:
    """The header's line for one host: what it is, so a reader can judge the figures."""

    sweep_id: str
    name: str
    gpu: str
    gpu_count: int | None
    driver: str | None
    cuda_toolkit: str | None
    engine_cuda: str | None
    engine_version: str | None
    sim_speed: float | None
    models: dict[str, str]  # repo -> revision


@dataclass
class Report:
    sweeps: list[SweepData]
    hosts: list[HostLine]
    rows: list[Row]
    groups: list[Group]
    failures: list[FailureRow]
    not_run: list[NotRun]
    baseline: list[SweepData] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    generated_at: float = field(default_factory=time.time)

    @property
    def simulated(self) -> bool:
        return any(r.group.simulated for r in self.rows)


def curves(group: Group) -> dict[str, dict[str, list[tuple[int, float, float | None]]]]:
    """Concurrency curves of a group, comparable cells only: workload -> variant -> [(level, tok/s, per-request tok/s)]."""
    out: dict[str, dict[str, list[tuple[int, float, float | None]]]] = defaultdict(lambda: defaultdict(list))
    for cell in group.cells:
        tok_s = cell.tok_s
        if cell.key.level and tok_s is not None:
            out[cell.key.workload][cell.key.variant].append((cell.key.level, tok_s.mean, cell.per_request_tok_s))
    return {w: {v: sorted(points) for v, points in variants.items()} for w, variants in out.items()}


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


# ---------------------------------------------------------------------------------------------
# rows


def gpu_of(host: HostRecord | None) -> tuple[str, int | None]:
    """The host's GPU model and count: its facts where gathered, else its inventory entry."""
    if host is None:
        return "unknown GPU", None
    gpus = (host.facts or {}).get("gpus") or []
    if gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        return str(gpus[0]["name"]), len(gpus)
    inventory = host.inventory.get("gpus") or {}
    return str(inventory.get("model") or "unknown GPU"), inventory.get("count")


def _identity(sweep: SweepData, result: RunResult) -> dict[str, Any]:
    """The plan's entry of a run; a fixed variant made during the sweep is not in the plan, so it
    takes its original configuration's entry for the same workload (same TP, method, variant)."""
    entry = sweep.plan_runs.get(result.run_id)
    if entry is None and result.provenance:
        original = result.provenance.get("original_config_id")
        workload = result.workload.get("name")
        entry = next((e for e in sweep.plan_runs.values() if e.get("server_id") == original and e.get("workload") == workload), None)
    if entry is not None:
        return entry
    # Neither: the server label is "tp<N>-<variant>" by construction (fleet.playbook.ServerConfig.label).
    tp_part, _, variant = result.server_label.partition("-")
    tp = int(tp_part[2:]) if tp_part.startswith("tp") and tp_part[2:].isdigit() else 0
    return {"tp": tp, "method": variant.split("-b")[0], "variant": variant, "argv": None}


def _speculative(entry: dict[str, Any]) -> bool:
    argv = entry.get("argv")
    if isinstance(argv, list):
        return "--speculative-algorithm" in argv
    return entry.get("method") != AUTOREGRESSIVE


def _reason(result: RunResult) -> str | None:
    if result.status is RunStatus.ok:
        return None
    if result.status is RunStatus.not_comparable:
        return "; ".join(d.message for d in result.deviations) or "not comparable"
    if result.failure is not None:
        return f"{root_cause(result.failure.error_class, result.failure.diagnosis)}: {result.failure.message}"
    return result.status.value


def rows_of(sweep: SweepData, loaded: Loaded) -> list[Row]:
    """The rows of one result: one per concurrency level and repeat, else one. Figures only
    where the run is comparable -- this is the one place a row gets figures."""
    result = loaded.result
    entry = _identity(sweep, result)
    gpu, _ = gpu_of(sweep.hosts.get(result.host))
    simulated = result.sim_speed is not None or (sweep.hosts.get(result.host) and (sweep.hosts[result.host].inventory.get("engine") or {}).get("kind") == "sim")
    group = GroupKey(gpu, bool(simulated), result.engine_release or str(entry.get("engine_release") or "unknown"), int(entry.get("tp") or 0))
    server = result.server or {}
    base = dict(
        sweep_id=result.sweep_id, host=result.host, group=group, run_id=result.run_id, label=result.label,
        method=str(entry.get("method") or ""), variant=str(entry.get("variant") or result.server_label),
        speculative=_speculative(entry), workload=str(result.workload.get("name") or entry.get("workload") or ""),
        workload_kind=str(result.workload.get("kind") or entry.get("workload_kind") or ""), status=result.status.value,
        reason=_reason(result), sim_speed=result.sim_speed, path=str(loaded.path),
        fix=str(result.provenance["fix"]) if result.provenance and result.provenance.get("fix") else None,
        server_max_running=server.get("max_running_requests") if isinstance(server.get("max_running_requests"), int) else None,
    )  # fmt: skip
    levels = result.extras.get("levels")
    if result.workload.get("kind") == "concurrency" and isinstance(levels, list) and levels:
        rows = []
        for lv in levels:
            row = _with_figures(Row(**base, level=int(lv["level"]), repeat=int(lv.get("repeat", 0))), lv, None, result.status)  # type: ignore[arg-type]
            rows.append(_with_rates(row, result, {"level": row.level, "repeat": row.repeat}))
        return rows
    repeats = result.extras.get("repeats")
    per_repeat = [r.get("output_tok_s") for r in repeats] if isinstance(repeats, list) else None
    return [_with_rates(_with_figures(Row(**base, level=None, repeat=None), result.figures, per_repeat, result.status), result, {})]  # type: ignore[arg-type]


def _with_rates(row: Row, result: RunResult, tags: dict[str, Any]) -> Row:
    if row.comparable:
        row.request_rates = [
            float(q["output_tokens"]) / float(q["e2e_s"])
            for q in result.requests
            if q.get("ok") and q.get("e2e_s") and q.get("output_tokens") and all(q.get(k) == v for k, v in tags.items())
        ]
    return row


def _with_figures(row: Row, figures: dict[str, Any], per_repeat: list[Any] | None, status: RunStatus) -> Row:
    requests = figures.get("requests") or {}
    row.requests_sent, row.requests_ok, row.requests_failed = (int(requests.get(k) or 0) for k in ("sent", "ok", "failed"))
    if not status.comparable:
        return row
    row.output_tok_s = figures.get("output_tok_s")
    row.output_tok_s_per_request = figures.get("output_tok_s_per_request")
    row.request_throughput = figures.get("request_throughput")
    row.acceptance_length = figures.get("acceptance_length")
    row.ttft_s = figures.get("ttft_s")
    row.itl_s = figures.get("itl_s")
    samples = [float(s) for s in per_repeat or [] if isinstance(s, (int, float))]
    row.samples = samples or ([row.output_tok_s] if row.output_tok_s is not None else [])
    return row


# ---------------------------------------------------------------------------------------------
# cells, speed-ups, comparisons


def make_cells(rows: Sequence[Row]) -> list[Group]:
    by_cell: dict[CellKey, list[Row]] = defaultdict(list)
    for row in rows:
        if row.status == RunStatus.skipped.value:
            continue  # never launched: listed with the configurations that did not run
        by_cell[row.cell].append(row)
    cells = {key: Cell(key, members) for key, members in by_cell.items()}
    for cell in cells.values():
        if not any(r.speculative for r in cell.rows):
            continue
        tok_s = cell.tok_s
        basis = _autoregressive_basis(cells, cell.key)
        if tok_s is not None and basis is not None:
            cell.speedup, cell.speedup_basis = tok_s.mean / basis.mean, basis
    groups: dict[GroupKey, list[Cell]] = defaultdict(list)
    for key in sorted(cells, key=lambda k: (k.group, k.workload, k.level, _variant_order(cells[k]), k.variant)):
        groups[key.group].append(cells[key])
    return [Group(key, members) for key, members in sorted(groups.items())]


def _variant_order(cell: Cell) -> int:
    return 1 if any(r.speculative for r in cell.rows) else 0


def _autoregressive_basis(cells: dict[CellKey, Cell], key: CellKey) -> Spread | None:
    """The autoregressive figure a speed-up divides by: same host type, TP, workload and level."""
    for other in cells.values():
        k = other.key
        if (k.group, k.workload, k.level) == (key.group, key.workload, key.level) and not any(r.speculative for r in other.rows):
            basis = other.tok_s
            if basis is not None:
                return basis
    return None


def compare(current: Sequence[Group], baseline: Sequence[Group]) -> list[Comparison]:
    base_cells = {cell.key: cell for group in baseline for cell in group.cells}
    out = []
    for group in current:
        for cell in group.cells:
            before = base_cells.get(cell.key)
            now, then = cell.tok_s, before.tok_s if before else None
            if now is None or then is None or before is None:
                continue
            scatter = 2 * math.hypot(cell.relative_error, before.relative_error)
            out.append(Comparison(cell.key, now, then, max(NOISE_FLOOR, now.relative, then.relative, scatter)))
    return out


# ---------------------------------------------------------------------------------------------
# failures and what did not run


def _evidence(result: RunResult) -> tuple[str, str]:
    """The failure's class (the diagnosis' root cause where there is one) and its evidence line."""
    failure = result.failure
    assert failure is not None
    diagnosis = dict(failure.diagnosis or {})
    cls = root_cause(failure.error_class, diagnosis)
    lines = [_evidence_text(e) for e in (diagnosis.get("evidence") or [])] or list(failure.evidence)
    line = next((ln for ln in lines if ln.strip()), failure.message)
    return cls, line.strip()


def _evidence_text(entry: object) -> str:
    """A diagnosis' evidence entry: {"line": N, "text": ...} (fleet.host.diagnose), or a bare line."""
    if isinstance(entry, dict):
        return f"log line {entry.get('line')}: {entry.get('text')}" if entry.get("line") is not None else str(entry.get("text") or "")
    return str(entry)


def failures_of(sweeps: Sequence[SweepData]) -> list[FailureRow]:
    status_by_id = {loaded.result.run_id: loaded.result.status.value for s in sweeps for loaded in s.results}
    out = []
    for sweep in sweeps:
        fixes: dict[str, tuple[str, str | None]] = {}
        for loaded in sweep.results:  # the fixed variants' own provenance: known while the sweep runs
            p = loaded.result.provenance or {}
            if p.get("failed_run_id") and p.get("fix"):
                fixes[str(p["failed_run_id"])] = (f"applied: {p['fix']}", loaded.result.run_id)
        for record in sweep.fixes:
            fixes[str(record.get("run_id"))] = (f"{record.get('action')}: {record.get('description')}", record.get("variant_id"))
        for loaded in sweep.results:
            result = loaded.result
            if result.status not in (RunStatus.failed, RunStatus.partial) or result.failure is None:
                continue
            cls, evidence = _evidence(result)
            fix, variant = fixes.get(result.run_id, (None, None))
            outcome = status_by_id.get(variant, "pending") if variant else None
            out.append(FailureRow(result.label, result.host, result.sweep_id, result.status.value, cls, evidence, fix, outcome, str(loaded.path)))
    return sorted(out, key=lambda f: (f.sweep_id, f.host, f.label))


def not_run_of(sweeps: Sequence[SweepData]) -> list[NotRun]:
    out: list[NotRun] = []
    for sweep in sweeps:
        for loaded in sweep.results:
            result = loaded.result
            if result.status is RunStatus.skipped:
                reason = result.failure.message if result.failure else "skipped"
                # The plan's own words (fleet.plan): "quarantined (...)", "predicted to fail (...); replaced by ...".
                kind = "quarantined" if reason.startswith("quarantined") else "infeasible" if reason.startswith("predicted to fail") else "skipped"
                out.append(NotRun(result.label, result.host, kind, reason, str(loaded.path)))
            elif result.status is RunStatus.not_comparable:
                out.append(NotRun(result.label, result.host, "not_comparable", _reason(result) or "", str(loaded.path)))
        for fix in sweep.fixes:
            if fix.get("action") == "quarantined":
                out.append(NotRun(str(fix.get("label")), str(fix.get("host")), "quarantined",
                                  f"{fix.get('failure_class')}: quarantined {fix.get('description')} for later runs and sweeps", None))  # fmt: skip
        for entry in sweep.unplaceable:
            out.append(NotRun(str(entry.get("server")), "-", "unplaceable", str(entry.get("reason")), None))
        done = {loaded.result.run_id for loaded in sweep.results} | {path.stem for path, _ in sweep.unreadable}  # unreadable: listed below
        for run_id, entry in sweep.plan_runs.items():
            if run_id not in done:
                out.append(NotRun(str(entry.get("label")), str(entry.get("host")), "pending", "no result yet", None))
        for path, error in sweep.unreadable:
            out.append(NotRun(path.stem, path.parent.parent.name, "unreadable", error, str(path)))
    return out


# ---------------------------------------------------------------------------------------------


def host_lines(sweeps: Sequence[SweepData]) -> list[HostLine]:
    lines = []
    for sweep in sweeps:
        releases: dict[str, str] = {}
        for loaded in sweep.results:
            if loaded.result.engine_release:
                releases.setdefault(loaded.result.host, loaded.result.engine_release)
        for name, host in sweep.hosts.items():
            facts = host.facts or {}
            gpu, count = gpu_of(host)
            engine = facts.get("engine") or {}
            models = {repo: str(m.get("revision")) for repo, m in (facts.get("models") or {}).items() if isinstance(m, dict)}
            sim = (host.inventory.get("engine") or {})
            lines.append(
                HostLine(
                    sweep_id=sweep.sweep_id, name=name, gpu=gpu, gpu_count=count,
                    driver=(facts.get("driver") or {}).get("version"), cuda_toolkit=(facts.get("toolkit") or {}).get("version"),
                    engine_cuda=engine.get("torch_cuda"), engine_version=engine.get("sglang_version") or releases.get(name),
                    sim_speed=sim.get("sim_speed") if sim.get("kind") == "sim" else None, models=models,
                )
            )  # fmt: skip
    return lines


def build_report(sweeps: Sequence[SweepData], baseline: Sequence[SweepData] = ()) -> Report:
    rows = [row for sweep in sweeps for loaded in sweep.results for row in rows_of(sweep, loaded)]
    groups = make_cells(rows)
    comparisons: list[Comparison] = []
    if baseline:
        base_rows = [row for sweep in baseline for loaded in sweep.results for row in rows_of(sweep, loaded)]
        comparisons = compare(groups, make_cells(base_rows))
    return Report(
        sweeps=list(sweeps), hosts=host_lines(sweeps), rows=rows, groups=groups, failures=failures_of(sweeps),
        not_run=not_run_of(sweeps), baseline=list(baseline), comparisons=comparisons,
    )  # fmt: skip


def relative_path(path: str, start: Path | None) -> str:
    """A result's path as a link from the report's own location (absolute when printed)."""
    if start is None:
        return path
    try:
        return os.path.relpath(path, start)
    except ValueError:
        return path
