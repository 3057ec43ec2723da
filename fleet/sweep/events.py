"""A sweep's progress as events, each stamped with the elapsed time and an ETA learned from
measured durations; and the duration history (`results/durations.json`) the next plan learns from.

`fleet sweep` shows the events as the live table (a terminal), one line each (stdout not a
terminal: `fleet.views.event_line`) or JSON lines (`--json`: `Event.to_json`). The shape of an
event, stable for tools that read `--json`:

    {"type": ..., "time": "2026-12-01T10:37:05Z", "elapsed_s": 12.3, "eta_s": 40.0 | null, "host": "ct200" | null, ...}

and per type (EVENT_TYPES):
- `provisioned`: status (ok, changed, failed), reason
- `planned`: runs, servers, hosts, measured_runs (estimated from measurements; the rest from priors)
- `started`: sweep_id, resumed, hosts {name: {done, total}}
- `phase`: phase, previous, done, total, host_eta_s, error (the host's last error, "" if none)
- `run`: run_id, label, status, duration_s (wall), failure (its class, or null), fix (for a fixed
  variant, the fix it runs with, else null), done, total, host_eta_s
- `reboot`: boot_id; `link_drop`: count; `agent_restart`: count; `repair_round`: added, total
- `moved`: to, runs, server_id, label, why ("tail", or why the host was given up on): runs handed
  from `host` to another (fleet.sweep.balancer.Balancer)
- `summary` (always the last): sweep_id, state, directory, interrupted, results, by_status,
  unreadable, hosts, fixes -- what `summary.json` holds; `error` too where no host passed provisioning.

The ETA of a host is its remaining work (runs without a result, starts of servers not begun) by
the plan's estimates (measurements of earlier sweeps where there are any, priors otherwise),
corrected by how measured runs of this sweep compare with their estimates, divided by the
parallelism the plan gives the host. The sweep's ETA is its slowest host's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.host.contract import RunResult, RunStatus
from fleet.host.contract.progress import ServerPhase
from fleet.host.contract.shard import Shard
from fleet.layout import ResultsRoot
from fleet.planning.estimate import DurationHistory, Sample
from fleet.sweep.hoststatus import HostStatus, Phase
from fleet.sweep.ledger import ResultLedger

if TYPE_CHECKING:  # the planner is the controller's: `fleet status` draws its table without it
    from fleet.plan import Plan

log = logging.getLogger("fleet.sweep")

EVENT_TYPES = ("provisioned", "planned", "started", "phase", "run", "reboot", "link_drop", "agent_restart", "repair_round", "moved", "summary")
# Runs whose duration measures their workload (a failed one fails fast; a partial one lost requests).
MEASURED_STATUSES = (RunStatus.ok, RunStatus.not_comparable)
# Phases in which a host has nothing left to do in this controller: its ETA is 0.
_ENDED = {Phase.FINISHED.value, Phase.FAILED.value, Phase.LOST.value, Phase.STOPPED.value, Phase.DETACHED.value}


@dataclass(frozen=True)
class Event:
    type: str  # one of EVENT_TYPES
    at: float  # epoch seconds
    elapsed_s: float  # since the sweep started (a resume counts from the first start)
    eta_s: float | None  # None until there is a plan
    host: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        stamp = datetime.fromtimestamp(self.at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        eta = round(self.eta_s, 1) if self.eta_s is not None else None
        return {"type": self.type, "time": stamp, "elapsed_s": round(self.elapsed_s, 1), "eta_s": eta, "host": self.host, **self.data}


EventSink = Callable[[Event], None]


class EventStream:
    """Stamps events and hands them to the sink one at a time, in order (the hosts' loops emit
    from their own threads)."""

    def __init__(self, sink: EventSink | None, started_at: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self.sink = sink
        self.clock = clock
        self.started_at = clock() if started_at is None else started_at
        self._lock = threading.Lock()

    def emit(self, type: str, host: str | None = None, eta_s: float | None = None, **data: Any) -> Event:
        assert type in EVENT_TYPES, type
        with self._lock:
            now = self.clock()
            event = Event(type, now, max(0.0, now - self.started_at), eta_s, host, data)
            if self.sink is not None:
                try:
                    self.sink(event)
                except Exception:  # a display that fails must not take the sweep down with it
                    log.exception("progress display failed on a %s event", type)
            return event


@dataclass
class _Host:
    """What the progress tracker knows of one host, with the sums behind its ETA kept as runs end
    and servers start: an event costs the same at the 10,000th run as at the first (recounted
    only when the host's shard changes: a repair round, a hand-over)."""

    name: str
    start_scale: float  # wall seconds per engine second of a server's start (fleet.plan start_scale_of)
    parallel: float  # servers the plan runs side by side on it, on average
    run_estimates: Mapping[str, float] = field(default_factory=dict)  # the plan's, by run id
    server_estimates: Mapping[str, float] = field(default_factory=dict)  # the plan's server starts, by server id
    runs: dict[str, str] = field(default_factory=dict)  # run id -> server id, from the shard
    skipped: set[str] = field(default_factory=set)  # servers not launched: their runs take no time
    done: dict[str, str] = field(default_factory=dict)  # run id -> status, every result pulled
    phase: str = ""
    reboots: int = 0
    link_drops: int = 0
    agent_restarts: int = 0
    starting: dict[str, float] = field(default_factory=dict)  # server id -> when it began starting
    started: set[str] = field(default_factory=set)  # servers seen past their start
    moved_in: set[str] = field(default_factory=set)  # runs handed over from another host (not a repair round)
    seen: tuple[int, int] = (0, 0)  # the ledger's results and rejections taken in so far (its cursors)
    # The ETA's sums: estimated seconds of the runs still to do, and of the starts of servers
    # with runs to do that have not started; runs to do by server; runs of the shard done.
    pending_s: float = 0.0
    starts_s: float = 0.0
    pending: dict[str, int] = field(default_factory=dict)
    done_count: int = 0
    fallback_s: float = 0.0  # a fixed variant's estimate: the mean of the host's planned runs
    shard: Shard | None = None  # the shard last followed

    def follow(self, shard: Shard) -> int:
        """Take the shard's runs (a repair round adds some, a hand-over adds or takes some);
        returns how many a repair round added."""
        if shard is self.shard:
            return 0  # the loop hands the same object until the shard changes
        self.shard = shard
        before = set(self.runs)
        current = {run.run_id: server.server_id for server, run in shard.runs}
        self.runs = {**{r: s for r, s in self.runs.items() if r in current or r in self.done}, **current}
        for server, _ in shard.runs:
            if server.skip_reason:
                self.skipped.add(server.server_id)
        self._recount()
        return len(set(self.runs) - before - self.moved_in)

    def _recount(self) -> None:
        known = [self.run_estimates[r] for r in self.runs if r in self.run_estimates]
        self.fallback_s = sum(known) / len(known) if known else 0.0
        self.pending_s, self.pending, self.done_count = 0.0, {}, 0
        for run_id, server_id in self.runs.items():
            if run_id in self.done:
                self.done_count += 1
            elif server_id not in self.skipped:
                self.pending_s += self.estimate(run_id)
                self.pending[server_id] = self.pending.get(server_id, 0) + 1
        self.starts_s = sum(self.server_estimates.get(s, 0.0) for s, n in self.pending.items() if n and s not in self.started)

    def estimate(self, run_id: str) -> float:
        return self.run_estimates.get(run_id, self.fallback_s)

    def finish(self, run_id: str, status: str) -> None:
        """A run's result (or a rejected file of it) came in."""
        first = run_id not in self.done
        self.done[run_id] = status
        server_id = self.runs.get(run_id)
        if not first or server_id is None:
            return
        self.done_count += 1
        if server_id in self.skipped:
            return
        self.pending_s = max(0.0, self.pending_s - self.estimate(run_id))
        self.pending[server_id] = self.pending.get(server_id, 1) - 1
        if self.pending[server_id] <= 0 and server_id not in self.started:
            self.starts_s = max(0.0, self.starts_s - self.server_estimates.get(server_id, 0.0))

    def start(self, server_id: str) -> None:
        """A server was seen past its start: its start is no longer part of the ETA."""
        if server_id in self.started:
            return
        self.started.add(server_id)
        if self.pending.get(server_id, 0) > 0 and server_id not in self.skipped:
            self.starts_s = max(0.0, self.starts_s - self.server_estimates.get(server_id, 0.0))

    def remaining_s(self, correction: float) -> float:
        """Wall seconds of work left by the estimates, runs corrected by what this sweep measured."""
        return 0.0 if self.phase in _ENDED else (self.pending_s * correction + self.starts_s) / self.parallel


class SweepProgress:
    """Turns what the hosts' loops see into events with an ETA; collects server start durations.

    `observe` is called by each host's loop (fleet.sweep.driver.HostDriver) after every step with
    the host's status, its shard and the ledger of its pulled results; it diffs them with what it
    saw (the ledger hands out only what came in since: no result is read twice)."""

    def __init__(self, stream: EventStream, plan: Plan | None, shards: Mapping[str, Shard], start_scales: Mapping[str, float], ledgers: Mapping[str, ResultLedger]) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self.run_estimates: dict[str, float] = {k: e.seconds for k, e in plan.run_estimates.items()} if plan else {}
        self.server_estimates: dict[str, float] = {k: e.seconds for k, e in plan.server_estimates.items()} if plan else {}
        parallel = _parallelism(plan) if plan else {}
        self.hosts: dict[str, _Host] = {}
        for name, shard in shards.items():
            host = _Host(name, start_scales.get(name, 1.0), parallel.get(name, 1.0), self.run_estimates, self.server_estimates)
            host.follow(shard)
            # Results pulled before (a resume): done, not news, and not measured by this controller.
            ledgers[name].refresh()
            for result in self._take(host, ledgers[name]):
                host.finish(result.run_id, result.status.value)
            self.hosts[name] = host
        # Measured and estimated wall seconds of the runs this sweep measured, summed as they come.
        self._measured_s, self._estimated_s = 0.0, 0.0
        self.server_samples: dict[str, tuple[str, float]] = {}  # server id -> (host, engine seconds of its start)

    # ------------------------------------------------------------------------------ the ETA

    def correction(self) -> float:
        """Measured over estimated time of the runs this sweep measured so far (1 before any)."""
        return self._measured_s / self._estimated_s if self._estimated_s > 0 else 1.0

    def measure(self, measured_s: float, estimated_s: float) -> None:
        """A run of this sweep took `measured_s` wall seconds where its estimate said `estimated_s`."""
        self._measured_s += measured_s
        self._estimated_s += estimated_s

    def host_eta(self, host: _Host) -> float:
        return host.remaining_s(self.correction())

    def eta(self) -> float:
        correction = self.correction()
        return max((h.remaining_s(correction) for h in self.hosts.values()), default=0.0)

    # ------------------------------------------------------------------------------ events

    def emit(self, type: str, host: str | None = None, **data: Any) -> Event:
        return self.stream.emit(type, host, self.eta(), **data)

    def moved(self, source: str, target: str, run_ids: tuple[str, ...], **data: Any) -> None:
        """Runs handed from one host to another (the tail, or a lost host's): an event, and the
        target counts them as its own from now on, not as a repair round's."""
        with self._lock:
            if target in self.hosts:
                self.hosts[target].moved_in.update(run_ids)
            self.emit("moved", source, to=target, runs=len(run_ids), **data)

    def started(self, sweep_id: str, resumed: bool) -> None:
        with self._lock:
            hosts = {h.name: {"done": h.done_count, "total": len(h.runs)} for h in self.hosts.values()}
            self.emit("started", sweep_id=sweep_id, resumed=resumed, hosts=hosts)

    def observe(self, status: HostStatus, shard: Shard, ledger: ResultLedger) -> None:
        """Emit what changed on one host since its last observation. Never raises: a fault here
        must not stop the sweep."""
        try:
            with self._lock:
                self._observe(status, shard, ledger)
        except Exception:
            log.exception("%s: progress tracking failed", status.host)

    def _observe(self, status: HostStatus, shard: Shard, ledger: ResultLedger) -> None:
        host = self.hosts[status.host]
        name = host.name
        added = host.follow(shard)
        if status.reboots > host.reboots:
            host.reboots = status.reboots
            self.emit("reboot", name, boot_id=status.boot_id)
        if status.link_drops > host.link_drops:
            host.link_drops = status.link_drops
            self.emit("link_drop", name, count=status.link_drops)
        if status.agent_restarts > host.agent_restarts:
            host.agent_restarts = status.agent_restarts
            self.emit("agent_restart", name, count=status.agent_restarts)
        if added:  # the first shard was taken in __init__: what comes later is a repair round's
            self.emit("repair_round", name, added=added, total=len(host.runs))
        self._server_starts(host, status.servers)
        for result in self._take(host, ledger):
            estimate = host.estimate(result.run_id)
            host.finish(result.run_id, result.status.value)  # one at a time: each event counts the runs done up to it
            duration = max(0.0, result.ended_at - result.started_at)
            if result.status in MEASURED_STATUSES and estimate > 0:
                self.measure(duration, estimate)
            host.start(host.runs.get(result.run_id, result.server_id))
            self.emit(
                "run", name, run_id=result.run_id, label=result.label, status=result.status.value, duration_s=round(duration, 2),
                failure=result.failure.error_class if result.failure else None, fix=(result.provenance or {}).get("fix"),
                done=host.done_count, total=len(host.runs),
                host_eta_s=round(self.host_eta(host), 1),
            )  # fmt: skip
        phase = str(status.phase)
        if phase != host.phase:
            previous, host.phase = host.phase, phase
            self.emit(
                "phase", name, phase=phase, previous=previous or None, done=host.done_count, total=len(host.runs),
                host_eta_s=round(self.host_eta(host), 1), error=status.last_error if phase == Phase.FAILED.value else "",
            )  # fmt: skip

    @staticmethod
    def _take(host: _Host, ledger: ResultLedger) -> list[RunResult]:
        """The results the ledger accepted since the last look (each once, in the order they
        came); a rejected file of a run of the host counts it done, as `unreadable` (the agent
        redoes it; its new result is news)."""
        fresh, results_seen = ledger.accepted(host.seen[0])
        rejections, rejections_seen = ledger.rejections(host.seen[1])
        host.seen = (results_seen, rejections_seen)
        for name, _ in rejections:
            run_id = name.removesuffix(".json")
            if run_id in host.runs and run_id not in ledger.results:
                host.finish(run_id, "unreadable")
        return sorted(fresh, key=lambda r: r.ended_at)

    def _server_starts(self, host: _Host, servers: Mapping[str, Any]) -> None:
        """A server's start, measured from the agent's phase timestamps: seen `starting` since t0,
        then in a later phase since t1, it took t1 - t0 (the host's clock on both ends)."""
        for server_id, server in servers.items():
            phase, since = server.get("phase"), server.get("since")
            if not isinstance(since, (int, float)):
                continue
            if phase == ServerPhase.starting.value:
                host.starting.setdefault(server_id, float(since))
                continue
            host.start(server_id)
            began = host.starting.pop(server_id, None)
            if began is not None and since >= began and server_id not in self.server_samples:
                self.server_samples[server_id] = (host.name, (since - began) / host.start_scale)


def _parallelism(plan: Plan) -> dict[str, float]:
    """Per host: the plan's work on it over its span, i.e. how many servers run side by side."""
    work: dict[str, float] = {}
    span: dict[str, float] = {}
    for server in plan.servers:
        if server.skip_reason:
            continue
        work[server.host] = work.get(server.host, 0.0) + server.end_s - server.start_s
        span[server.host] = max(span.get(server.host, 0.0), server.end_s)
    return {host: max(1.0, work[host] / span[host]) if span[host] > 0 else 1.0 for host in work}


# ------------------------------------------------------------------------------ the history


def record_durations(
    results_root: Path,
    sweep_id: str,
    results: list[RunResult],
    server_samples: Mapping[str, tuple[str, float]],
    scales: Mapping[str, float],
) -> Path:
    """Add a sweep's measured durations to `results/durations.json` (atomically): each run that
    ran its workload (ok, not_comparable) in engine seconds, and each server start measured. A
    run's time scale is the one its result records, else its host's (`scales`)."""
    path = ResultsRoot(results_root).durations
    history = DurationHistory.load(path)
    for result in results:
        if result.status not in MEASURED_STATUSES or result.ended_at < result.started_at:
            continue
        scale = result.sim_speed or scales.get(result.host, 1.0)
        history.record_run(result.run_id, Sample((result.ended_at - result.started_at) / scale, result.sweep_id, result.host))
    for server_id, (host, seconds) in server_samples.items():
        history.record_server(server_id, Sample(seconds, sweep_id, host))
    history.save(path)
    return path
