"""Automatic fixes during a sweep: what the controller does with the failed runs it brings back.

Each failed result is classified (the root cause the agent read from the server log, or the
class of the request errors), and `fleet.fixes.autofix` proposes the fix:
- an illegal instruction, or tokens that are not lossless (`not_lossless`: the agent's check
  against the autoregressive server's greedy outputs), quarantines the configuration for that GPU
  architecture and engine release: its servers not yet started on any host are skipped (each host's `quarantine.json`),
  and later sweeps skip it at planning time, until `fleet quarantine lift`;
- a fixable failure (memory, context, CUDA graph, port) becomes a variant with its own id, run
  on the same GPUs once the host has finished its current round; the original keeps its failure.
Bounded by the playbook's `limits.max_fix_attempts`; under `auto_fix: suggest` fixes are only
reported, under `off` nothing is proposed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fleet.fixes.autofix import Fix, decide, propose_fix
from fleet.fixes.quarantine import QuarantineEntry, QuarantineKey, QuarantineStore
from fleet.host.contract import RunResult, RunStatus
from fleet.host.contract.shard import Shard
from fleet.host.diagnose.classify import DiagnosisHint, diagnose_text
from fleet.host.failures import ROOT_CAUSES, FailureClass
from fleet.inventory import Target
from fleet.plan import Hardware, PlannedServer, launch_on, quarantine_engine
from fleet.playbook import AutoFix, Playbook, Run
from fleet.sweep.shards import server_spec

log = logging.getLogger("fleet.sweep")

NEW_PORT_STEP = 50  # a fixed server that needs another port moves this far per attempt


@dataclass
class FixRecord:
    """One decision, for the summary: what failed, what fleet did about it."""

    host: str
    run_id: str
    label: str
    failure_class: str
    action: str  # applied | suggested | quarantined
    description: str
    variant_id: str | None = None


@dataclass
class SweepFixer:
    playbook: Playbook
    hosts: Mapping[str, Target]
    hardware: Mapping[str, Hardware]
    store: QuarantineStore
    sweep_id: str
    planned: dict[str, PlannedServer]  # server id -> what the plan placed (variants added as made)
    # The sweep's --memory-check: without it, the planner vetoes no repair either (fleet.fixes.autofix).
    memory_check: bool = True
    records: list[FixRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seen: set[str] = field(default_factory=set)
    _attempts: dict[str, int] = field(default_factory=dict)  # original run id -> fixes made
    _origin: dict[str, str] = field(default_factory=dict)  # run id -> the original run it descends from
    _pending: dict[str, list[PlannedServer]] = field(default_factory=dict)  # host -> variants for its next round
    _quarantined: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> server id -> reason
    _shipped: set[str] = field(default_factory=set)  # run ids in an earlier controller's shards (`already_fixed`)

    def __post_init__(self) -> None:
        self.planned = dict(self.planned)
        self._runs: dict[str, tuple[PlannedServer, Run]] = {run.id: (server, run) for server in self.planned.values() for run in server.runs}

    def already_fixed(self, shards: Iterable[Shard]) -> None:
        """What an earlier controller of this sweep fixed (read from the variants in its shards):
        those failures are not fixed again, and their attempts count towards the limit."""
        with self._lock:
            for shard in shards:
                for _, run in shard.runs:
                    self._shipped.add(run.run_id)
                    provenance = run.provenance or {}
                    failed = provenance.get("failed_run_id")
                    if failed:
                        self._seen.add(str(failed))
                        origin = self._origin.get(str(failed), str(failed))
                        self._attempts[origin] = max(self._attempts.get(origin, 0), int(provenance.get("attempt", 1)))

    # ----------------------------------------------------------------------------- results in

    def consider(self, host: str, results: Sequence[RunResult]) -> bool:
        """Look at newly pulled results of `host`. True when the quarantine changed (push it)."""
        changed = False
        with self._lock:
            for result in results:
                run_id = result.run_id
                if result.status not in (RunStatus.failed, RunStatus.partial) or run_id in self._seen or run_id not in self._runs:
                    continue
                self._seen.add(run_id)
                changed |= self._consider_one(host, run_id, result)
        return changed

    def _consider_one(self, host: str, run_id: str, result: RunResult) -> bool:
        failure_class, figures = classify_result(result)
        if failure_class is None or self.playbook.auto_fix is AutoFix.off:
            return False
        server, run = self._runs[run_id]
        hardware = self.hardware.get(host) or Hardware()
        origin = self._origin.get(run_id, run_id)
        attempt = self._attempts.get(origin, 0) + 1
        fix = propose_fix(
            server.config,
            run,
            failure_class,
            figures,
            attempt,
            gpu_memory_mib=hardware.gpu_memory_mib or 0,
            engine_version=hardware.version_of(server.config.engine_name),
            limits=self.playbook.limits,
            # The host's kind for SGLang (sim or a real one), the engine's name for the others
            # (sim-<name> on a sim host): a quarantine key's engine (fleet.plan.quarantine_engine).
            engine=quarantine_engine(self.hosts[host], server.config.engine_name),
            engine_fork=self.hosts[host].engine.fork_for(server.config.engine_name),
            gpu_arch=hardware.arch,
            original_config_id=(server.provenance or {}).get("original_config_id"),
            trust_planner=self.memory_check,
        )
        if fix is None:
            return False
        action = decide(self.playbook.auto_fix, fix)
        if action == "suggest":
            self.records.append(FixRecord(host, run_id, run.label, failure_class, "suggested", fix.description))
            return False
        if fix.quarantine is not None:
            return self._quarantine(host, run_id, run.label, fix, failure_class, result)
        if fix.needs_new_port:
            # Another process holds the port: the variant pins a new one, which gives it its own id.
            variant_run: Run | None = replace(run, server=replace(server.config, port=server.port + NEW_PORT_STEP * attempt))
        else:
            variant_run = fix.new_run(run)
        if variant_run is None:
            return False
        self._attempts[origin] = attempt
        self._add_variant(host, server, variant_run, fix, origin)
        return False

    def _quarantine(self, host: str, run_id: str, label: str, fix: Fix, failure_class: str, result: RunResult) -> bool:
        assert fix.quarantine is not None
        evidence = _first_evidence(result)
        added = self.store.add(QuarantineEntry(fix.quarantine, f"{failure_class}: {fix.description}", evidence, self.sweep_id, host, run_id))
        if added:
            self.records.append(FixRecord(host, run_id, label, failure_class, "quarantined", str(fix.quarantine)))
            log.warning("%s: quarantined %s after %s", host, fix.quarantine, label)
        changed = False
        for name, other in self.hosts.items():
            hardware = self.hardware.get(name) or Hardware()
            for server in self.planned.values():
                if server.host != name or server.skip_reason:
                    continue
                engine = server.config.engine_name
                key = QuarantineKey.for_config(server.config, arch=hardware.arch or "?", engine=quarantine_engine(other, engine), engine_version=hardware.version_of(engine))
                if key == fix.quarantine and server.config.id not in self._quarantined.setdefault(name, {}):
                    self._quarantined[name][server.config.id] = f"quarantined ({key}) after {label} failed with {failure_class}"
                    changed = True
        return changed

    def _add_variant(self, host: str, server: PlannedServer, run: Run, fix: Fix, origin: str) -> None:
        config = run.server
        port = config.port or server.port
        target = self.hosts[host]
        # Made by an earlier controller of this sweep and in a shard already (a variant's provenance
        # names the one run that caused it, so `already_fixed` cannot see every failure it fixes):
        # known, so that its own failure is fixed in turn, but never pending again (it would run twice).
        shipped = run.id in self._shipped
        pending = [] if shipped else self._pending.setdefault(host, [])
        index = next((i for i, p in enumerate(pending) if p.config.id == config.id and p.port == port), None)
        if index is None:
            launch = launch_on(target, config, port, self.hardware.get(host))
            pending.append(
                PlannedServer(
                    config,
                    (run,),
                    host,
                    server.gpus,
                    port,
                    launch,
                    server.start_s,
                    server.end_s,
                    provenance=dict(fix.provenance),
                    engine_release=server.engine_release,
                    engine_release_note=server.engine_release_note,
                )
            )
            index = len(pending) - 1
        else:
            pending[index] = replace(pending[index], runs=pending[index].runs + (run,))
        self._runs[run.id] = (pending[index], run)
        self._origin[run.id] = origin
        if shipped:
            return
        failed = self._runs.get(str(fix.provenance.get("failed_run_id")), (server, run))[1]
        self.records.append(FixRecord(host, failed.id, failed.label, str(fix.provenance.get("failure_class")), "applied", fix.description, run.id))
        log.warning("%s: %s -> variant run %s (%s)", host, failed.label, run.id, fix.description)

    # ----------------------------------------------------------------------------- to hosts

    def quarantine_for(self, host: str) -> dict[str, str]:
        with self._lock:
            return dict(self._quarantined.get(host, {}))

    def take_pending(self, host: str, max_gpus: int) -> list[PlannedServer]:
        """The variants waiting for `host`'s next round that fit in `max_gpus`, taken for another
        host whose agent ran dry first (fleet.sweep.balancer.Balancer): never shipped, so nothing races."""
        with self._lock:
            pending = self._pending.get(host, [])
            taken = [server for server in pending if server.config.tp <= max_gpus]
            self._pending[host] = [server for server in pending if server.config.tp > max_gpus]
            for server in taken:
                self.planned[server.config.id] = server
        return taken

    def next_round(self, host: str, shard: Shard) -> Shard | None:
        """The shard extended with the variants waiting for this host, or None when there are none."""
        with self._lock:
            pending = self._pending.pop(host, [])
            for server in pending:
                self.planned[server.config.id] = server
        return self._extended(host, shard, pending)

    def grow(self, host: str, shard: Shard, asked: Collection[str] = (), done: Collection[str] | None = None) -> Shard | None:
        """For a running agent (fleet.host.contract.shard.grown_servers): the shard with the waiting
        variants appended, only those under server ids new to it and not `asked` back by the
        hand-over; the others (more runs for a server it has) wait for the host's next round.
        `done`: runs with a result pulled; a variant waits until every run of the server whose
        failure made it has one (a server failing at start fails them all within a moment, and a
        pull may bring only some: the variant would go out with some of its runs, the rest to a
        later round)."""
        have = {s.server_id for s in shard.servers} | set(asked)
        servers = {s.server_id: s for s in shard.servers}

        def settled(planned: PlannedServer) -> bool:
            failed = servers.get(str((planned.provenance or {}).get("failed_config_id")))
            return done is None or failed is None or all(run.run_id in done for run in failed.runs)

        with self._lock:
            pending = self._pending.get(host, [])
            # Its server id is its config's (fleet.sweep.shards.server_spec).
            fresh = [p for p in pending if p.config.id not in have and settled(p)]
            self._pending[host] = [p for p in pending if all(p is not f for f in fresh)]
            for server in fresh:
                self.planned[server.config.id] = server
        return self._extended(host, shard, fresh)

    def _extended(self, host: str, shard: Shard, pending: list[PlannedServer]) -> Shard | None:
        if not pending:
            return None
        servers = {s.server_id: s for s in shard.servers}
        for server in pending:
            spec = server_spec(server, self.hosts[host], self.sweep_id)
            existing = servers.get(spec.server_id)
            if existing is not None:
                # The same variant again (a later round of fixes): one server, its runs together.
                have = {r.run_id for r in existing.runs}
                spec = replace(existing, runs=[*existing.runs, *(r for r in spec.runs if r.run_id not in have)])
            servers[spec.server_id] = spec
        return replace(shard, servers=list(servers.values()))


def classify_result(result: RunResult) -> tuple[str | None, dict[str, Any]]:
    """The root-cause class of a failed run, and the figures a fix needs: the agent's diagnosis of
    the server log when it made one (read, not redone), else the run's own class when it is a root
    cause (an over-context 400 is), else what the catalogue makes of the request errors."""
    failure = result.failure
    if failure is None:
        return None, {}
    diagnosis = failure.diagnosis or {}
    if failure.error_class == FailureClass.NOT_LOSSLESS.value:
        return failure.error_class, {}  # proved by the run record (the check), not by a log line
    if diagnosis.get("failure_class"):
        return str(diagnosis["failure_class"]), dict(diagnosis.get("figures") or {})
    samples = [str(e.get("sample", "")) for e in (result.figures.get("errors") or {}).values()]
    found = diagnose_text([line for line in [*samples, failure.message] if line], "request errors", DiagnosisHint())
    if found.failure_class:
        return found.failure_class, dict(found.figures)
    if failure.error_class in _ROOT_CAUSE_VALUES:
        return failure.error_class, {}
    return None, {}


_ROOT_CAUSE_VALUES = frozenset(cls.value for cls in ROOT_CAUSES)


def _first_evidence(result: RunResult) -> str:
    failure = result.failure
    if failure is None:
        return ""
    for item in (failure.diagnosis or {}).get("evidence") or []:
        return str(item.get("text", ""))
    return failure.evidence[0] if failure.evidence else failure.message
