"""The report's model: from loaded sweeps to rows, comparable cells, speed-ups, failures and
baseline deltas. Pure: no I/O, no rendering.

Rules, each enforced here and nowhere else:
- a figure is a measurement only when its run is `ok` (RunStatus.comparable): rows of partial,
  failed, skipped and not-comparable runs carry their status and reason, never a tok/s, a
  latency or an acceptance length;
- a cell is one comparable unit: host type (GPU model, simulated or not, SGLang release), TP
  size, method variant, workload and concurrency level. Its passes -- the repeats of a run, the
  same run in several sweeps given together -- are the measurements of one figure: n, mean, a
  95 % t-interval and the CV (fleet.measure.stats.summarize); one pass gives the value and says
  that no interval can be given, never a zero-width interval;
- a speed-up divides a cell by the autoregressive cell of the SAME host type, TP, workload and
  level, never across them; without such a baseline there is no speed-up. It is a ratio with its
  own 95 % interval: paired by pass where both cells have the same passes (the same sweeps and
  repeat numbers: the same prompts), Fieller's interval otherwise;
- a method is "faster" or "slower" only where that interval excludes 1.0 (fleet.measure.stats.
  verdict), and methods are ranked only where their throughput intervals separate (rank); the
  first screen (Headline) names a fastest method only where the paired ratio of it to every other
  method excludes 1.0, else lists the tie, and judges a crossover only at levels measured for both
  autoregressive and a speculative method;
- against `--baseline`, a cell's now/then ratio follows the same rule: a change is flagged only
  where its interval excludes 1.0;
- a TTFT percentile pools the cell's requests over its passes (percentile_estimate): withheld
  below fleet.host.agent.stats' sample-size rule, without an interval below MLPerf's floor.
  An ITL percentile is per pass (the results keep no per-token times) and summarized over passes;
- energy: tokens per joule as the agent measured them (the run's, or its level's, `energy`:
  fleet.host.agent.power), summarized over a cell's rows; $ per million output tokens only where
  the host file prices its GPUs (`usd_per_gpu_hour`), from the cell's mean throughput and TP;
- lossless (fleet.host.agent.lossless): a speculative run whose greedy outputs the agent could
  not compare on its host is compared here with the autoregressive results of the same host type,
  model and TP; one that diverged early on most prompts is a `not_lossless` failure, listed with
  its diverging positions, and never gives a figure or a speed-up.
"""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Sequence

from fleet.host.agent.lossless import CANDIDATE, REFERENCE, Check, Output, left_to_the_controller, outputs_of
from fleet.host.agent.lossless import compare as compare_outputs
from fleet.host.contract import RunResult, RunStatus
from fleet.host.contract.results import FLEET_CLIENT
from fleet.host.engines import engine as engine_named
from fleet.host.failures import FailureClass, root_cause
from fleet.measure.stats import (
    PercentileEstimate,
    Ratio,
    Summary,
    Verdict,
    fieller_ratio,
    paired_ratio,
    percentile_estimate,
    rank,
    summarize,
    verdict,
)
from fleet.measure.energy import dollars_per_million_tokens
from fleet.host.contract.reader import collector_paused
from fleet.report.load import HostRecord, Loaded, SweepData, TTFTs

AUTOREGRESSIVE = "autoregressive"

# A pass is named by its sweep and repeat number: two cells' passes with the same name sent the
# same prompts (a workload's prompts depend on the repeat number only) in the same sweep.
PassKey = tuple[str, int]


@dataclass(frozen=True, order=True)
class GroupKey:
    """What must be equal for two figures to be compared: the host type (its engine included), the
    TP size and the client that measured them (fleet's, or a tool a workload names: its figures are
    its own group, so that no speed-up or ratio divides one client's figure by another's)."""

    gpu: str
    simulated: bool
    engine: str  # fleet.host.engines.ENGINE_NAMES
    engine_release: str
    tp: int
    client: str = FLEET_CLIENT  # fleet.host.contract.results.CLIENTS

    @property
    def title(self) -> str:
        return f"{self.host_type} · TP{self.tp}"

    @property
    def host_type(self) -> str:
        """The GPU model, simulated or not, the engine and its release, and a client other than
        fleet's: the first screen's heading (its tables never hold two clients' figures)."""
        sim = " (simulated)" if self.simulated else ""
        measured = "" if self.client == FLEET_CLIENT else f" · measured by {self.client}"
        return f"{self.gpu}{sim} · {engine_named(self.engine).title} {self.engine_release}{measured}"


@dataclass(frozen=True, order=True)
class CellKey:
    group: GroupKey
    workload: str
    level: int  # 0 for a workload without concurrency levels
    variant: str


@dataclass(frozen=True, slots=True)
class Pass:
    """One measurement of a cell: a repeat of a run (at one level), with its own figures."""

    key: PassKey
    tok_s: float
    per_request_tok_s: float | None
    acceptance_length: float | None
    ttft_s: tuple[float, ...]  # each successful request's TTFT: percentiles pool these over passes
    itl_s: dict[str, Any] | None  # the pass's ITL summary (per-token times are not kept in results)


@dataclass(slots=True)  # one a result and level: 50,000 of them without a dict each (issue 28)
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
    passes: list[Pass] = field(default_factory=list)  # one per repeat of the run (at this level)
    tokens_per_joule: float | None = None  # the agent's energy figure (all the server's GPUs together)
    joules: float | None = None
    usd_per_gpu_hour: float | None = None  # the host file's price, where it has one
    lossless: str | None = None  # the lossless check's verdict: pass | fail | pending | error; None: not checked
    lossless_divergence: list[int | None] | None = None  # first diverging position per greedy prompt

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
            "sim_speed": self.sim_speed, "engine": self.group.engine, "engine_release": self.group.engine_release, "tp": self.group.tp, "client": self.group.client,
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
                   server_max_running_requests=self.server_max_running, tokens_per_joule=self.tokens_per_joule,
                   joules=self.joules, usd_per_gpu_hour=self.usd_per_gpu_hour, usd_per_million_tokens=self.usd_per_million_tokens,
                   lossless=self.lossless,
                   lossless_first_divergence=" ".join("-" if p is None else str(p) for p in self.lossless_divergence)
                   if self.lossless_divergence is not None else None,
                   result_path=self.path)  # fmt: skip
        return out

    @property
    def usd_per_million_tokens(self) -> float | None:
        return usd_per_million(self.usd_per_gpu_hour, self.group.tp, self.output_tok_s)


@dataclass(frozen=True)
class Standing:
    """A cell's place among the methods of its workload and level: tier 1 is the fastest; `shared`
    counts the methods in its tier, which are not separable from it. None where not ranked."""

    tier: int
    shared: int


@dataclass
class Cell:
    """A comparable unit and its rows. Its rows are final once it is made (make_cells), so its
    figures are computed once and kept: every table, ranking and headline reads the same objects
    (recomputing them per reader made a 10k-result report summarize each cell ~15 times)."""

    key: CellKey
    rows: list[Row]
    speedup: Ratio | None = None  # over the autoregressive cell of the same host type, TP, workload and level
    standing: Standing | None = None
    _percentiles: dict[tuple[str, float], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def speculative(self) -> bool:
        return any(r.speculative for r in self.rows)

    @cached_property
    def measured(self) -> list[Row]:
        return [r for r in self.rows if r.comparable]

    @cached_property
    def passes(self) -> list[Pass]:
        return [p for r in self.measured for p in r.passes]

    @cached_property
    def tok_s(self) -> Summary | None:
        return _summary([p.tok_s for p in self.passes])

    @cached_property
    def per_request_tok_s(self) -> Summary | None:
        return _summary([p.per_request_tok_s for p in self.passes if p.per_request_tok_s is not None])

    @cached_property
    def acceptance_length(self) -> Summary | None:
        return _summary([p.acceptance_length for p in self.passes if p.acceptance_length is not None])

    @property
    def verdict(self) -> Verdict | None:
        return verdict(self.speedup) if self.speedup is not None else None

    @cached_property
    def tokens_per_joule(self) -> Summary | None:
        return _summary([r.tokens_per_joule for r in self.measured if r.tokens_per_joule is not None])

    @property
    def usd_per_million_tokens(self) -> float | None:
        """At the host file's price, from the cell's mean throughput; None where a row is unpriced."""
        prices = {r.usd_per_gpu_hour for r in self.measured}
        tok_s = self.tok_s
        if len(prices) != 1 or tok_s is None:
            return None
        return usd_per_million(next(iter(prices)), self.key.group.tp, tok_s.mean)

    @property
    def lossless(self) -> str | None:
        """The cell's lossless verdicts, joined ("pass", "pending", ...); None where none was checked."""
        verdicts = sorted({r.lossless for r in self.rows if r.lossless is not None})
        return "/".join(verdicts) if verdicts else None

    def ttft(self, q: float) -> PercentileEstimate | None:
        """A TTFT percentile of the requests of every pass, pooled, with its order-statistic interval."""
        if ("ttft", q) not in self._percentiles:
            groups = [p.ttft_s for p in self.passes if p.ttft_s]
            self._percentiles["ttft", q] = percentile_estimate(groups, q) if groups else None
        found: PercentileEstimate | None = self._percentiles["ttft", q]
        return found

    def itl(self, q: int) -> Summary | None:
        """An ITL percentile over passes (each pass's own); None where a pass withholds it."""
        if ("itl", q) not in self._percentiles:
            values = [(p.itl_s or {}).get(f"p{q}") for p in self.passes]
            missing = not values or any(v is None for v in values)
            self._percentiles["itl", q] = None if missing else summarize([float(v) for v in values if v is not None])
        found: Summary | None = self._percentiles["itl", q]
        return found

    @property
    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for row in self.rows:
            counts[row.status] += 1
        return dict(counts)

    @property
    def requests(self) -> tuple[int, int]:
        return sum(r.requests_ok for r in self.rows), sum(r.requests_failed for r in self.rows)

    @property
    def queued(self) -> bool:
        return any(r.queued for r in self.measured)

    def flat(self) -> dict[str, Any]:
        """The cell's figures with their intervals, for each of its rows in CSV and JSONL."""
        tok_s, ratio, ttft = self.tok_s, self.speedup, self.ttft(50)
        return {
            "cell_passes": tok_s.n if tok_s else None,
            "cell_output_tok_s_mean": tok_s.mean if tok_s else None,
            "cell_output_tok_s_low": tok_s.interval.low if tok_s and tok_s.interval else None,
            "cell_output_tok_s_high": tok_s.interval.high if tok_s and tok_s.interval else None,
            "cell_output_tok_s_cv": tok_s.cv if tok_s else None,
            "cell_noisy": tok_s.noisy if tok_s else None,
            "cell_ttft_s_p50": ttft.value if ttft else None,
            "cell_ttft_s_p50_low": ttft.interval.low if ttft and ttft.interval else None,
            "cell_ttft_s_p50_high": ttft.interval.high if ttft and ttft.interval else None,
            "speedup": ratio.estimate if ratio else None,
            "speedup_low": ratio.interval.low if ratio and ratio.interval else None,
            "speedup_high": ratio.interval.high if ratio and ratio.interval else None,
            "speedup_method": ratio.method if ratio else None,
            "speedup_verdict": self.verdict,
            "tier": self.standing.tier if self.standing else None,
            "tier_shared": self.standing.shared if self.standing else None,
            "note": (tok_s.note if tok_s else None) or (ratio.note if ratio else None),
        }


def _summary(values: Sequence[float]) -> Summary | None:
    return summarize(values) if values else None


def usd_per_million(price: float | None, gpus: int, tok_s: float | None) -> float | None:
    """Dollars per million output tokens at `price` per GPU-hour for `gpus` GPUs serving `tok_s`."""
    if price is None or not tok_s or tok_s <= 0 or gpus <= 0:
        return None
    return dollars_per_million_tokens(1_000_000, 1_000_000 / tok_s, gpus, price)


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
    """A cell now against the same cell of the baseline sweeps: now/then as a ratio with its interval."""

    key: CellKey
    current: Summary
    baseline: Summary
    ratio: Ratio

    @property
    def verdict(self) -> Verdict:
        return verdict(self.ratio)


@dataclass
class Crossover:
    """Where speculative decoding stops paying in a concurrency workload, judged only at the levels
    measured for both sides (`levels`: autoregressive and at least one speculative method, so a
    speed-up exists there): the lowest of them at which no speculative method's speed-up interval
    lies wholly above 1.0 (`level`), or None: not reached up to `top` (`next_levels`: the ladder to
    try, the top level doubled), or not known where a level's speed-ups have no interval
    (`unknown_from`). `paid_up_to`: the level below `level` where some speculative speed-up interval
    still lay above 1.0 (None: it never did). `autoregressive_only`, `speculative_only`: levels only
    one side was measured at (the other's servers capped below them by the engine), never judged.
    `*_caps`: the max_running_requests the servers ran with."""

    level: int | None
    top: int
    levels: tuple[int, ...]
    unknown_from: int | None = None
    paid_up_to: int | None = None
    autoregressive_only: tuple[int, ...] = ()
    speculative_only: tuple[int, ...] = ()
    speculative_caps: tuple[int, ...] = ()
    autoregressive_caps: tuple[int, ...] = ()

    @property
    def next_levels(self) -> tuple[int, ...]:
        return (*self.levels, self.top * 2)


@dataclass
class Headline:
    """The first screen's answer for one host type, TP, workload and level (a workload without
    levels: 0; a concurrency workload: its lowest level measured for both sides, and its highest).

    `top`: the methods no other method here is separably faster than, by the paired ratio of the
    two (fleet.measure.stats.verdict of ratio_of: the same quantity as a speed-up, which is the
    ratio to autoregressive): the leader (highest estimate), every method the leader is not
    separably faster than, less any of those that another of them is separably faster than. So no
    two of `top` are separable from each other. One method: the fastest, separably faster than
    every other method here (autoregressive too); more: a tie, and no method is named fastest.
    Empty where some method has no interval (one pass): nothing is ranked, `first` is only the
    highest estimate. `second`: the runner-up (the next estimate in `top` in a tie, else of all),
    and `versus` the paired ratio first / second that decides it."""

    group: GroupKey
    workload: str
    level: int
    top: list[Cell]
    first: Cell | None
    second: Cell | None
    versus: Ratio | None
    crossover: Crossover | None  # None: the workload has no concurrency levels (or this is its second row)
    ranked: bool = True

    @property
    def fastest(self) -> Cell | None:
        """The one method separably faster than every other; None in a tie or where nothing is ranked."""
        return self.top[0] if len(self.top) == 1 else None

    @property
    def tied(self) -> list[Cell]:
        return self.top if len(self.top) > 1 else []


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

    @property
    def cells(self) -> list[Cell]:
        return [cell for group in self.groups for cell in group.cells]

    @property
    def one_pass(self) -> bool:
        """Some measured cell has a single pass: its figures and speed-ups carry no interval."""
        return self.passes_counts[0] > 0

    @property
    def passes_counts(self) -> tuple[int, int]:
        """(measured cells of one pass, measured cells)."""
        measured = [cell.tok_s.n for cell in self.cells if cell.tok_s is not None]
        return sum(1 for n in measured if n == 1), len(measured)

    @property
    def headlines(self) -> list[Headline]:
        return [h for group in self.groups for h in headlines(group)]


def curves(group: Group) -> dict[str, dict[str, list[tuple[int, Summary, Summary | None]]]]:
    """Concurrency curves of a group, measured cells only: workload -> variant -> [(level, tok/s, per-request tok/s)]."""
    out: dict[str, dict[str, list[tuple[int, Summary, Summary | None]]]] = defaultdict(lambda: defaultdict(list))
    for cell in group.cells:
        tok_s = cell.tok_s
        if cell.key.level and tok_s is not None:
            out[cell.key.workload][cell.key.variant].append((cell.key.level, tok_s, cell.per_request_tok_s))
    return {w: {v: sorted(points, key=lambda p: p[0]) for v, points in variants.items()} for w, variants in out.items()}


def variant_order(variant: str) -> tuple[Any, ...]:
    """Variants in natural order: numbers inside a name compare as numbers (ddtree-b8 before
    ddtree-b12 before ddtree-b64), not as text."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", variant) if part)


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


def _speculative(entry: dict[str, Any], engine: str) -> bool:
    argv = entry.get("argv")
    if isinstance(argv, list):
        return any(flag in argv for flag in engine_named(engine).speculative_flags)
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
    """The rows of one result: one per concurrency level and repeat, else one (its repeats are
    its passes). Figures only where the run is comparable -- this is the one place a row gets figures."""
    result = loaded.result
    entry = _identity(sweep, result)
    gpu, _ = gpu_of(sweep.hosts.get(result.host))
    simulated = result.sim_speed is not None or (sweep.hosts.get(result.host) and (sweep.hosts[result.host].inventory.get("engine") or {}).get("kind") == "sim")
    group = GroupKey(gpu, bool(simulated), result.engine, result.engine_release or str(entry.get("engine_release") or "unknown"), int(entry.get("tp") or 0), result.client)
    server = result.server or {}
    price = sweep.hosts[result.host].inventory.get("usd_per_gpu_hour") if result.host in sweep.hosts else None
    lossless = _mapping(result.extras.get("lossless"))
    check = _mapping(lossless.get("check"))
    divergence = check.get("first_divergence")
    base = dict(
        sweep_id=result.sweep_id, host=result.host, group=group, run_id=result.run_id, label=result.label,
        method=str(entry.get("method") or ""), variant=str(entry.get("variant") or result.server_label),
        speculative=_speculative(entry, result.engine), workload=str(result.workload.get("name") or entry.get("workload") or ""),
        workload_kind=str(result.workload.get("kind") or entry.get("workload_kind") or ""), status=result.status.value,
        reason=_reason(result), sim_speed=result.sim_speed, path=str(loaded.path),
        fix=str(result.provenance["fix"]) if result.provenance and result.provenance.get("fix") else None,
        server_max_running=server.get("max_running_requests") if isinstance(server.get("max_running_requests"), int) else None,
        usd_per_gpu_hour=float(price) if isinstance(price, (int, float)) and not isinstance(price, bool) and price > 0 else None,
        lossless=str(check["verdict"]) if isinstance(check.get("verdict"), str) else None,
        lossless_divergence=[p if isinstance(p, int) else None for p in divergence] if isinstance(divergence, list) else None,
    )  # fmt: skip
    levels = result.extras.get("levels")
    if result.workload.get("kind") == "concurrency" and isinstance(levels, list) and levels:
        rows = []
        for lv in levels:
            row = Row(**base, level=int(lv["level"]), repeat=int(lv.get("repeat", 0)))  # type: ignore[arg-type]
            rows.append(_with_figures(row, lv, [(lv, {"level": row.level, "repeat": row.repeat})], result, loaded.ttft_s))
        return rows
    repeats = result.extras.get("repeats")
    sections = [(r, {"repeat": int(r.get("repeat", i))}) for i, r in enumerate(repeats) if isinstance(r, dict)] if isinstance(repeats, list) else []
    return [_with_figures(Row(**base, level=None, repeat=None), result.figures, sections or [(result.figures, {})], result, loaded.ttft_s)]  # type: ignore[arg-type]


def _with_figures(row: Row, figures: dict[str, Any], sections: list[tuple[dict[str, Any], dict[str, Any]]], result: RunResult, ttft_s: TTFTs) -> Row:
    """`sections`: the passes' own figures, each with the request tags that select its requests;
    `ttft_s`: the result's TTFTs by those tags (fleet.report.load.ttfts)."""
    requests = figures.get("requests") or {}
    row.requests_sent, row.requests_ok, row.requests_failed = (int(requests.get(k) or 0) for k in ("sent", "ok", "failed"))
    if not result.status.comparable:
        return row
    row.output_tok_s = figures.get("output_tok_s")
    row.output_tok_s_per_request = figures.get("output_tok_s_per_request")
    row.request_throughput = figures.get("request_throughput")
    row.acceptance_length = figures.get("acceptance_length")
    row.ttft_s = figures.get("ttft_s")
    row.itl_s = figures.get("itl_s")
    energy = figures.get("energy")
    if isinstance(energy, dict):
        for name in ("tokens_per_joule", "joules"):
            value = energy.get(name)
            setattr(row, name, float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None)
    for number, (section, tags) in enumerate(sections):
        tok_s = section.get("output_tok_s")
        if not isinstance(tok_s, (int, float)) or tok_s <= 0:
            continue  # nothing measured: no pass (a ratio needs a positive figure)
        # Its successful requests' TTFTs: of the requests that carry its tags (all where it has none).
        ttft = tuple(
            value for (level, repeat), values in ttft_s.items()
            if tags.get("level", level) == level and tags.get("repeat", repeat) == repeat for value in values
        )  # fmt: skip
        per_request, accept = section.get("output_tok_s_per_request"), section.get("acceptance_length")
        row.passes.append(
            Pass(
                key=(row.sweep_id, int(tags.get("repeat", number))), tok_s=float(tok_s),
                per_request_tok_s=float(per_request) if isinstance(per_request, (int, float)) else None,
                acceptance_length=float(accept) if isinstance(accept, (int, float)) else None,
                ttft_s=ttft, itl_s=section.get("itl_s") if isinstance(section.get("itl_s"), dict) else None,
            )
        )  # fmt: skip
    return row


# ---------------------------------------------------------------------------------------------
# cells, speed-ups, rankings, comparisons


def ratio_of(numerator: Sequence[Pass], denominator: Sequence[Pass]) -> Ratio:
    """numerator / denominator throughput with its 95 % interval: paired by pass where both sides
    hold the same passes (same sweeps, same repeat numbers: the same prompts, each key once),
    Fieller's interval for independent samples otherwise."""
    top, bottom = {p.key: p.tok_s for p in numerator}, {p.key: p.tok_s for p in denominator}
    if len(top) == len(numerator) and len(bottom) == len(denominator) and top.keys() == bottom.keys():
        keys = sorted(top)
        return paired_ratio([top[k] for k in keys], [bottom[k] for k in keys])
    return fieller_ratio([p.tok_s for p in numerator], [p.tok_s for p in denominator])


def make_cells(rows: Sequence[Row]) -> list[Group]:
    by_cell: dict[CellKey, list[Row]] = defaultdict(list)
    for row in rows:
        if row.status == RunStatus.skipped.value:
            continue  # never launched: listed with the configurations that did not run
        by_cell[row.cell].append(row)
    cells = {key: Cell(key, members) for key, members in by_cell.items()}
    bases = _autoregressive_bases(cells.values())
    for cell in cells.values():
        basis = bases.get(_place(cell.key)) if cell.speculative else None
        if basis is not None and cell.passes:
            cell.speedup = ratio_of(cell.passes, basis.passes)
    _rank(cells.values())
    groups: dict[GroupKey, list[Cell]] = defaultdict(list)
    for key in sorted(cells, key=lambda k: (k.group, k.workload, k.level, cells[k].speculative, variant_order(k.variant))):
        groups[key.group].append(cells[key])
    return [Group(key, members) for key, members in sorted(groups.items())]


def _place(key: CellKey) -> tuple[GroupKey, str, int]:
    """Where methods are compared: host type and TP, workload and level."""
    return key.group, key.workload, key.level


def _autoregressive_bases(cells: Iterable[Cell]) -> dict[tuple[GroupKey, str, int], Cell]:
    """The autoregressive cell a speed-up divides by, per place (same host type, TP, workload and
    level): the first measured non-speculative cell of each, in one pass over the cells (a scan
    of every cell per speculative cell made a 10k-result report quadratic, issue 28)."""
    bases: dict[tuple[GroupKey, str, int], Cell] = {}
    for cell in cells:
        if not cell.speculative and cell.passes:
            bases.setdefault(_place(cell.key), cell)
    return bases


def _rank(cells: Iterable[Cell]) -> None:
    """Tiers of the measured methods of each host type, TP, workload and level, by their
    throughput intervals (fleet.measure.stats.rank: overlapping intervals share a tier)."""
    by_place: dict[tuple[GroupKey, str, int], dict[str, Cell]] = defaultdict(dict)
    for cell in cells:
        if cell.tok_s is not None:
            by_place[(cell.key.group, cell.key.workload, cell.key.level)][cell.key.variant] = cell
    for members in by_place.values():
        ranking = rank({variant: cell.tok_s for variant, cell in members.items() if cell.tok_s is not None})
        for number, tier in enumerate(ranking.tiers, start=1):
            for variant in tier:
                members[variant].standing = Standing(number, len(tier))


def headlines(group: Group) -> list[Headline]:
    """Per workload: who is fastest and by how much (Headline), at its lowest level measured for
    both autoregressive and a speculative method and, for a concurrency workload, again at the
    highest such level; and where speculative decoding stops paying (Crossover)."""
    by_workload: dict[str, list[Cell]] = defaultdict(list)  # one pass over the cells, not one per workload
    for cell in group.cells:
        if cell.tok_s is not None:
            by_workload[cell.key.workload].append(cell)
    out = []
    for workload in sorted(by_workload):
        measured = by_workload[workload]
        by_level: dict[int, list[Cell]] = defaultdict(list)
        for cell in measured:
            by_level[cell.key.level].append(cell)
        both = sorted(level for level, cells in by_level.items() if any(c.speedup is not None for c in cells))
        shown = [both[0], both[-1]] if len(both) > 1 else both[:1] or [min(by_level)]
        crossover = _crossover(measured, both) if any(by_level) else None
        for number, level in enumerate(shown):
            out.append(_headline(group.key, workload, level, by_level[level], crossover if number == 0 else None))
    return out


def _headline(group: GroupKey, workload: str, level: int, cells: list[Cell], crossover: Crossover | None) -> Headline:
    basis = next((c for c in cells if not c.speculative and c.passes), None)
    if basis is None:
        estimate = {id(c): c.tok_s.mean if c.tok_s else 0.0 for c in cells}
    else:
        estimate = {id(c): (c.speedup if c.speedup is not None else ratio_of(c.passes, basis.passes)).estimate for c in cells}
    ordered = sorted(cells, key=lambda c: (-estimate[id(c)], variant_order(c.key.variant)))
    first = ordered[0]
    if any(c.tok_s is None or c.tok_s.interval is None for c in cells):
        second = ordered[1] if len(ordered) > 1 else None
        return Headline(group, workload, level, [], first, second, None, crossover, ranked=False)
    ratios: dict[tuple[int, int], Ratio] = {}

    def beats(a: Cell, b: Cell) -> bool:
        """a is separably faster than b: the 95 % interval of a/b (paired by pass where they share
        passes; a/autoregressive is a's speed-up itself) lies above 1.0."""
        if (id(a), id(b)) not in ratios:
            ratios[id(a), id(b)] = a.speedup if b is basis and a.speedup is not None else ratio_of(a.passes, b.passes)
        return verdict(ratios[id(a), id(b)]) == "faster"

    near = [c for c in ordered if c is first or not beats(first, c)]
    top = [c for c in near if not any(beats(d, c) for d in near if d is not c)]
    if len(near) > 1 and len(top) < 2:  # not with ratios that order as the estimates do; never name a winner then
        top = near
    second = (top[1] if len(top) > 1 else ordered[1]) if len(ordered) > 1 else None
    versus = ratio_of(first.passes, second.passes) if second is not None else None
    if len(top) > 1:
        top = sorted(top, key=lambda c: (c.speculative, variant_order(c.key.variant)))  # a tie lists, it does not rank
    return Headline(group, workload, level, top, first, second, versus, crossover)


def _crossover(cells: Sequence[Cell], both: Sequence[int]) -> Crossover:
    """Judged at the levels in `both` only (a speed-up exists there: autoregressive and a
    speculative method measured), never at a level one side did not reach."""
    by_level: dict[int, list[Cell]] = defaultdict(list)
    for cell in cells:
        if cell.speedup is not None:
            by_level[cell.key.level].append(cell)
    caps = {kind: tuple(sorted({r.server_max_running for c in cells if c.speculative == kind for r in c.measured if r.server_max_running}))
            for kind in (True, False)}  # fmt: skip
    levels = tuple(both)
    alone = {kind: tuple(sorted({c.key.level for c in cells if c.speculative == kind} - set(levels))) for kind in (True, False)}

    def found(level: int | None, unknown_from: int | None = None, paid_up_to: int | None = None) -> Crossover:
        return Crossover(level, levels[-1] if levels else 0, levels, unknown_from, paid_up_to,
                         alone[False], alone[True], caps[True], caps[False])  # fmt: skip

    paid: int | None = None
    for level in levels:
        speculative = by_level[level]
        if any(c.speedup.interval is None for c in speculative if c.speedup is not None):
            return found(None, unknown_from=level, paid_up_to=paid)
        if not any(c.verdict == "faster" for c in speculative):
            return found(level, paid_up_to=paid)
        paid = level
    return found(None, paid_up_to=paid)


def compare(current: Sequence[Group], baseline: Sequence[Group]) -> list[Comparison]:
    base_cells = {cell.key: cell for group in baseline for cell in group.cells}
    out = []
    for group in current:
        for cell in group.cells:
            before = base_cells.get(cell.key)
            now, then = cell.tok_s, before.tok_s if before else None
            if now is None or then is None or before is None:
                continue
            out.append(Comparison(cell.key, now, then, ratio_of(cell.passes, before.passes)))
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
            sim = host.inventory.get("engine") or {}
            lines.append(
                HostLine(
                    sweep_id=sweep.sweep_id, name=name, gpu=gpu, gpu_count=count,
                    driver=(facts.get("driver") or {}).get("version"), cuda_toolkit=(facts.get("toolkit") or {}).get("version"),
                    engine_cuda=engine.get("torch_cuda"), engine_version=engine.get("sglang_version") or releases.get(name),
                    sim_speed=sim.get("sim_speed") if sim.get("kind") == "sim" else None, models=models,
                )
            )  # fmt: skip
    return lines


def lossless_checks(sweeps: Sequence[SweepData]) -> dict[str, tuple[Check, Loaded]]:
    """The lossless checks the agents could not make (no reference on the host when the
    speculative server answered): each candidate's greedy outputs against an autoregressive
    result's of the same host type (GPU model, simulated or not), model and TP size."""
    references: dict[tuple[str, bool, str], tuple[str, list[Output]]] = {}
    candidates: list[tuple[tuple[str, bool, str], list[Output], Loaded]] = []
    for sweep in sweeps:
        for loaded in sweep.results:
            result = loaded.result
            record = result.extras.get("lossless")
            outputs = outputs_of(record)
            if not outputs or not isinstance(record, dict):
                continue
            gpu, _ = gpu_of(sweep.hosts.get(result.host))
            place = (gpu, result.sim_speed is not None, str(record.get("key")))
            role = left_to_the_controller(record)
            if role == REFERENCE:
                references.setdefault(place, (result.server_label, outputs))
            elif role == CANDIDATE:
                candidates.append((place, outputs, loaded))
    out = {}
    for place, outputs, loaded in candidates:
        found = references.get(place)
        if found is not None:
            out[loaded.result.run_id] = (compare_outputs(outputs, found[1], found[0]), loaded)
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _lossless_verdicts(rows: list[Row], checks: dict[str, tuple[Check, Loaded]]) -> list[FailureRow]:
    """The report's own lossless checks into the rows; a failed one takes the row's figures away
    (never a speed-up) and is listed among the failures with its diverging positions."""
    failures: dict[str, FailureRow] = {}
    for row in rows:
        found = checks.get(row.run_id)
        if found is None:
            continue
        check, loaded = found
        row.lossless, row.lossless_divergence = check.verdict, list(check.positions)
        if not check.failed:
            continue
        row.status, row.reason = RunStatus.failed.value, f"{FailureClass.NOT_LOSSLESS.value}: {check.message}"
        row.output_tok_s = row.output_tok_s_per_request = row.request_throughput = row.acceptance_length = None
        row.ttft_s = row.itl_s = None
        row.tokens_per_joule = row.joules = None
        row.passes = []
        where = ", ".join(f"{o.prompt} {'-' if p is None else p}" for o, p in zip(outputs_of(loaded.result.extras.get("lossless")) or [], check.positions))
        failures[row.run_id] = FailureRow(
            row.label, row.host, row.sweep_id, RunStatus.failed.value, FailureClass.NOT_LOSSLESS.value,
            f"first diverging {check.unit} per greedy prompt: {where} (compared by the report with {check.reference})", None, None, row.path,
        )  # fmt: skip
    return list(failures.values())


def build_report(sweeps: Sequence[SweepData], baseline: Sequence[SweepData] = ()) -> Report:
    with collector_paused():  # rows and cells of every result: as the load, no cycles (issue 28)
        rows = [row for sweep in sweeps for loaded in sweep.results for row in rows_of(sweep, loaded)]
        unlossless = _lossless_verdicts(rows, lossless_checks(sweeps))
        groups = make_cells(rows)
        comparisons: list[Comparison] = []
        if baseline:
            base_rows = [row for sweep in baseline for loaded in sweep.results for row in rows_of(sweep, loaded)]
            comparisons = compare(groups, make_cells(base_rows))
    return Report(
        sweeps=list(sweeps), hosts=host_lines(sweeps), rows=rows, groups=groups,
        failures=sorted([*failures_of(sweeps), *unlossless], key=lambda f: (f.sweep_id, f.host, f.label)),
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
