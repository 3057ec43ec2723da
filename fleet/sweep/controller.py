"""`fleet sweep`: provision, plan, ship shards, start agents, watch them, bring results back.

The controller can be stopped at any time (Ctrl-C, a crash, a closed laptop): the agents work on,
and `fleet sweep --resume ID` or `fleet status ID` reattach. Everything needed to resume is in
`results/<sweep-id>/`: the playbook as it was, the hosts, the plan, each host's shard, and the
folder that relative mirrors resolve against (secrets are read from the environment again).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fleet.connect import transport_for
from fleet.errors import FleetError
from fleet.facts import HostFacts
from fleet.fixes.quarantine import QuarantineStore
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import ContractError, RunStatus, Shard, SweepDir
from fleet.inventory import Host
from fleet.layout import ResultsRoot, SweepFolder, sweep_dir
from fleet.plan import Plan, PlannedServer, PlanOptions, check_placeable, hardware_of, make_plan, start_scale_of, started_servers, time_scale_of
from fleet.planning.starts import record_sweep_starts, starts_for_plan
from fleet.planning.estimate import DurationHistory
from fleet.playbook import Playbook, expand_runs, load_playbook
from fleet.provision.lease import release_lease, sweep_claim
from fleet.retry import TRANSFER
from fleet.provision.provision import HostReport, ProvisionOptions, provision, provision_options
from fleet.sweep.balancer import Balancer
from fleet.sweep.bundle import write_bundle
from fleet.sweep.channel import QUICK_S, AgentChannel
from fleet.sweep.context import SweepContext
from fleet.sweep.driver import HostDriver, drive_all
from fleet.sweep.ledger import SweepResults, host_ledger, read_sweep_results
from fleet.sweep.events import EventSink, EventStream, SweepProgress, record_durations
from fleet.sweep.fixing import FixRecord, SweepFixer
from fleet.sweep.hoststatus import HostStatus, Phase
from fleet.sweep.interface import ClosingLine
from fleet.sweep.lock import SweepLock, lock_sweep
from fleet.sweep.record import PROVISIONING, Connect, LoadedSweep, SweepRecord, file_sha256, load_sweep, moved_hosts, new_sweep_id
from fleet.errors import SweepError
from fleet.sweep.resultsfolder import DISK_ERRNOS, folder_error
from fleet.sweep.shards import build_shards
from fleet.transport.base import Transport

log = logging.getLogger("fleet.sweep")


@dataclass
class SweepOutcome:
    sweep_id: str
    directory: Path
    statuses: dict[str, HostStatus]
    excluded: dict[str, str]
    plan: Plan | None
    interrupted: bool = False
    fixes: list[FixRecord] = field(default_factory=list)
    lost: dict[str, str] = field(default_factory=dict)  # host -> why it was given up on
    not_run: dict[str, str] = field(default_factory=dict)  # run id -> why no host ran it
    state: str = ""  # sweep.json's state at the end ("" where the sweep was stopped before one was set)
    # Runs a live host's shard holds with no readable result (lost to an agent error, or whose
    # result was rejected): the record's, named on stderr whatever else happened.
    missing: tuple[str, ...] = ()
    failed_runs: int = 0  # results that are failed or partial
    # Files in the hosts' results folders that are not results fleet accepts (corrupt, forged,
    # misplaced), relative to the sweep folder: a sweep that holds them is no clean success.
    unreadable: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """A function of the record: 0 only when the sweep is `finished` (every planned run has a
        readable result), no run failed, no host was left out, lost or given up on, and no file
        a host sent back was rejected; 130 for a sweep left running on its hosts after Ctrl-C;
        else 1."""
        if self.interrupted:
            return 130
        clean = self.state == "finished" and not (self.failed_runs or self.excluded or self.lost or self.not_run or self.missing or self.unreadable)
        return 0 if clean and all(s.phase == Phase.FINISHED for s in self.statuses.values()) else 1

    def closing_lines(self) -> list[ClosingLine]:
        """What `fleet sweep` tells at the end: the fixes made, hosts left out, where the results
        are, and every way the sweep fell short of a clean finish."""
        lines = [ClosingLine("fix", f"{fix.host}: {fix.label}: {fix.failure_class} -> {fix.action}: {fix.description}") for fix in self.fixes]
        lines += [ClosingLine("problem", f"{host} takes no part: {reason}") for host, reason in self.excluded.items()]
        runs = ", ".join(f"{self.directory}/{host}/runs/" for host in sorted(self.statuses)) or f"{self.directory}/"
        lines.append(ClosingLine("result", f"results: {runs} (summary: {self.directory}/summary.json; tables and plots: fleet report {self.directory})"))
        if self.interrupted:
            return [*lines, ClosingLine("result", f"the agents work on: `fleet status {self.sweep_id}`, `fleet sweep --resume {self.sweep_id}`")]
        lines += [
            ClosingLine("problem", f"{host} was given up on ({reason}); its runs without a result went to the other hosts, or are counted below as run nowhere")
            for host, reason in self.lost.items()
        ]  # fmt: skip
        if self.not_run:
            reasons = sorted(set(self.not_run.values()))
            lines.append(ClosingLine("problem", f"{len(self.not_run)} runs ran nowhere: " + "; ".join(reasons[:5])))
        if self.missing:
            shown = ", ".join(self.missing[:10]) + (", ..." if len(self.missing) > 10 else "")
            lines.append(ClosingLine("problem", f"{len(self.missing)} runs have no result fleet can read ({shown}): see `missing` and `unreadable` in summary.json"))
        if self.unreadable:
            shown = ", ".join(self.unreadable[:5]) + (", ..." if len(self.unreadable) > 5 else "")
            lines.append(ClosingLine(
                "problem", f"{len(self.unreadable)} files the hosts sent back are not results fleet accepts, set aside ({shown}): why in summary.json's `unreadable`",
            ))  # fmt: skip
        return lines


# Called about twice a second with every host's status, for a live display.
Watcher = Callable[[dict[str, HostStatus]], None]


def _wait(threads: Sequence[threading.Thread], statuses: dict[str, HostStatus], watch: Watcher | None, every_s: float = 0.5) -> None:
    """Until every host's thread has ended, the display refreshed every `every_s`; returns as soon as
    the last one ends (joined, not slept past: a sweep ended up to half a second late before)."""
    while any(thread.is_alive() for thread in threads):
        if watch is not None:
            watch(statuses)
        deadline = time.monotonic() + every_s
        for thread in threads:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            thread.join(left)
    if watch is not None:
        watch(statuses)


def start_sweep(
    playbook_path: Path,
    hosts: Sequence[Host],
    results_root: Path,
    *,
    on_provisioned: Callable[[list[HostReport]], None] | None = None,
    watch: Watcher | None = None,
    poll_interval_s: float = 2.0,
    stop: threading.Event | None = None,
    memory_check: bool = True,
    quarantine: QuarantineStore | None = None,
    environ: Mapping[str, str] | None = None,
    connect: Connect = transport_for,
    sleep: Callable[[float], None] = time.sleep,
    on_event: EventSink | None = None,
    host_lost_after_s: float | None = None,
    allow_unplaceable: bool = False,
) -> SweepOutcome:
    """Provision, plan (memory checks and quarantine before anything launches), ship, watch.
    `on_event` receives the sweep's progress events (fleet.sweep.events), in order.

    A server configuration no chosen host can hold (its TP size over the largest host's GPUs)
    raises ConfigError before anything starts, unless `allow_unplaceable`: then the rest runs and
    those runs are reported not run, with why (the sweep ends incomplete).

    `memory_check=False` launches configurations the memory planner predicts to fail, so that
    they fail for real and the sweep's automatic fixes repair them. Secrets for the hosts'
    model fetch come from `environ` (default: this process's environment)."""
    stream = EventStream(on_event)
    playbook = load_playbook(playbook_path)
    if not allow_unplaceable:
        check_placeable(playbook, hosts)  # before anything is written or any host contacted
    sweep_id = new_sweep_id(playbook)
    directory = results_root / sweep_id
    options = provision_options(playbook_path.parent, os.environ if environ is None else environ, lease=sweep_claim(sweep_id))
    record = SweepRecord(
        sweep_id, playbook.name, file_sha256(playbook_path), [h.name for h in hosts], state=PROVISIONING,
        mirror_root=str(options.mirror_root), memory_check=memory_check, playbook_path=str(playbook_path.resolve()),
    )  # fmt: skip
    with _writing(results_root):
        directory.mkdir(parents=True)
        # Held from before LATEST names the sweep: a resume of it started meanwhile is refused.
        lock = lock_sweep(directory, "start")
    with lock:
        with _writing(results_root):
            # The playbook as it was: a resume runs exactly this, whatever happens to the file later.
            folder = SweepFolder(directory)
            shutil.copyfile(playbook_path, folder.playbook)
            for host in hosts:
                folder.write_host(host)
            # Saved before any host is contacted: a controller killed while provisioning leaves a
            # sweep `--resume` can go on with (it provisions again, then plans, as this start would).
            record.save(directory)
            folder.root.point_latest_at(sweep_id)
        ctx = _context(directory, playbook, options, poll_interval_s, stop, None, sleep, host_lost_after_s)
        return _provision_plan_drive(ctx, record, list(hosts), quarantine, connect, stream, on_provisioned, watch)


def _provision_plan_drive(
    ctx: SweepContext,
    record: SweepRecord,
    hosts: list[Host],
    quarantine: QuarantineStore | None,
    connect: Connect,
    stream: EventStream,
    on_provisioned: Callable[[list[HostReport]], None] | None,
    watch: Watcher | None,
) -> SweepOutcome:
    """A sweep from its provisioning on: what a first start does, and a resume of a sweep whose
    controller stopped before its plan was made."""
    directory, playbook, sweep_id = ctx.directory, ctx.playbook, record.sweep_id
    results_root = directory.parent
    store = quarantine or QuarantineStore(ResultsRoot(results_root).quarantine)
    durations = _durations(results_root)
    reports = provision(hosts, playbook, ctx.provision_options, connect=connect)
    if on_provisioned:
        on_provisioned(reports)
    for report in reports:
        stream.emit("provisioned", report.host, status=report.status, reason=report.reason or "")
    usable = [h for h in hosts if any(r.host == h.name and r.status != "failed" for r in reports)]
    excluded = {r.host: r.reason for r in reports if r.status == "failed"}
    record.hosts, record.excluded, record.state = [h.name for h in usable], excluded, "running"
    record.save(directory)
    if not usable:
        record.state = "failed"
        record.save(directory)
        error = "no host passed provisioning: " + "; ".join(f"{h}: {why}" for h, why in excluded.items())
        # The event stream still ends with a summary (summary.json's keys; nothing ran), and says why.
        stream.emit(
            "summary", state=record.state, directory=str(directory), interrupted=False, sweep_id=sweep_id, results=0, by_status={},
            unreadable={}, hosts={}, fixes=[], error=error,
        )  # fmt: skip
        raise SweepError(error)

    # Hosts that failed are left out of the plan: their share goes to the others.
    hardware = {r.host: hardware_of(h, r.facts) for h in usable for r in reports if r.host == h.name}
    starts = starts_for_plan(ResultsRoot(results_root).starts)
    plan = make_plan(playbook, usable, PlanOptions(memory_check=record.memory_check, quarantine=store, hardware=hardware, durations=durations, starts=starts))
    unplaced = {config.id: reason for config, reason in plan.unplaceable}
    record.not_run.update({run.id: f"unplaceable: {unplaced[run.server.id]}" for run in expand_runs(playbook) if run.server.id in unplaced})
    with _writing(results_root):
        SweepFolder(directory).write_plan(plan.to_json())
        record.save(directory)
    stream.emit(
        "planned", eta_s=plan.schedule.makespan_s, runs=len(plan.runs), servers=len(plan.servers),
        hosts=sorted({s.host for s in plan.servers}), measured_runs=plan.measured_runs,
    )  # fmt: skip
    boot_ids = {r.host: (r.facts.boot_id or "") for r in reports if r.facts}
    for report in reports:
        if report.facts is not None and report.host in record.hosts:
            # Goes into every result of the host: a figure is only worth something with its hardware and software.
            facts = {**report.facts.model_dump(mode="json"), "models": report.models}
            write_json_atomic(SweepFolder(directory).facts_file(report.host), facts)
    shards = build_shards(plan, {h.name: h for h in usable}, sweep_id, boot_ids)
    for name, shard in shards.items():
        (directory / name).mkdir(exist_ok=True)
        write_json_atomic(directory / name / SweepDir.SHARD, json.loads(shard.to_json()))
    placed = {h.name: h for h in usable if h.name in shards}
    for host in usable:
        if host.name not in placed:
            _release_unused(host, sweep_id, connect)
    fixer = SweepFixer(playbook, placed, hardware, store, sweep_id, {s.config.id: s for s in plan.servers}, record.memory_check)
    ctx = replace(ctx, fixer=fixer)
    return _drive(ctx, placed, shards, watch=watch, plan=plan, excluded=excluded, connect=connect, stream=stream, estimates=plan)


def _release_unused(host: Host, sweep_id: str, connect: Callable[[Host], Transport]) -> None:
    """A host that passed provisioning but was given no work hands its lease back now, rather than
    block other sweeps until the controller's TTL runs out. Best effort: a lease left behind expires."""
    transport = connect(host)
    try:
        release_lease(transport, host, sweep_claim(sweep_id))
    except FleetError as exc:
        log.warning("%s: the lease was not released (it expires by itself): %s", host.name, exc)
    finally:
        transport.close()


def resume_sweep(
    sweep_id: str,
    results_root: Path,
    *,
    watch: Watcher | None = None,
    poll_interval_s: float = 2.0,
    stop: threading.Event | None = None,
    environ: Mapping[str, str] | None = None,
    connect: Connect = transport_for,
    sleep: Callable[[float], None] = time.sleep,
    quarantine: QuarantineStore | None = None,
    on_event: EventSink | None = None,
    host_lost_after_s: float | None = None,
    hosts_dir: Path | None = None,
    lock: SweepLock | None = None,
) -> SweepOutcome:
    """Reattach to a sweep's hosts, with the repairs a first start has: the plan is made again as
    it was (same playbook copy, facts and options, so the same server ids), and the fixer learns
    from the shards which failures were already fixed, so none is fixed twice. Fixes of fixed
    variants are not repaired again after a resume (their configurations live in the first
    controller's memory only).

    One controller per sweep: the sweep folder's lock is taken first (`lock`: the caller's, held
    already), and where another controller holds it, SweepBusy is raised before anything else
    is read or any host contacted. `hosts_dir`: the inventory, where a host given another address
    since the sweep started is reached at it (re-validated first: its folder of this sweep must be
    there); None: every host is reached as the sweep recorded it. Hosts given up on are not driven;
    their results of runs that ran nowhere else are brought back and their agents stopped."""
    directory = results_root / sweep_id
    if not directory.is_dir():
        raise SweepError(f"no sweep {sweep_id} in {results_root}")
    with contextlib.nullcontext(lock) if lock is not None else lock_sweep(directory, "--resume"):
        record = SweepRecord.load(directory)
        for note in record.playbook_notes(directory):
            log.warning("%s", note)
        if hosts_dir is not None:
            _reach_moved_hosts(directory, record, hosts_dir, connect)
        if record.state == PROVISIONING:
            # Its controller stopped before the plan was made: go on as its start would have.
            stream = EventStream(on_event, started_at=record.created_at)
            folder = SweepFolder(directory)
            playbook = load_playbook(folder.playbook)
            hosts = [Host.model_validate(json.loads(folder.host_file(name).read_text())) for name in record.hosts]
            options = provision_options(Path(record.mirror_root), os.environ if environ is None else environ, lease=sweep_claim(sweep_id))
            ctx = _context(directory, playbook, options, poll_interval_s, stop, None, sleep, host_lost_after_s)
            return _provision_plan_drive(ctx, record, hosts, quarantine, connect, stream, None, watch)
        sweep = load_sweep(results_root, sweep_id)
        _bring_back_given_up(sweep, connect)
        stream = EventStream(on_event, started_at=sweep.record.created_at)  # elapsed counts from the first start
        mirror_root = Path(sweep.record.mirror_root) if sweep.record.mirror_root else sweep.directory
        options = provision_options(mirror_root, os.environ if environ is None else environ, lease=sweep_claim(sweep.record.sweep_id))
        store = quarantine or QuarantineStore(ResultsRoot(results_root).quarantine)
        hardware = {name: hardware_of(host, _recorded_facts(sweep.directory, name)) for name, host in sweep.hosts.items()}
        plan_options = PlanOptions(
            memory_check=sweep.record.memory_check, quarantine=store, hardware=hardware, durations=_durations(results_root), starts=starts_for_plan(ResultsRoot(results_root).starts)
        )
        plan = make_plan(sweep.playbook, list(sweep.hosts.values()), plan_options)
        fixer = SweepFixer(sweep.playbook, sweep.hosts, hardware, store, sweep.record.sweep_id, {s.config.id: s for s in plan.servers}, sweep.record.memory_check)
        fixer.already_fixed(sweep.shards.values())
        ctx = _context(sweep.directory, sweep.playbook, options, poll_interval_s, stop, fixer, sleep, host_lost_after_s)
        return _drive(
            ctx, sweep.hosts, sweep.shards, watch=watch, plan=None, excluded=sweep.record.excluded, connect=connect, stream=stream, estimates=plan, resumed=True,
        )  # fmt: skip


def _reach_moved_hosts(directory: Path, record: SweepRecord, hosts_dir: Path, connect: Connect) -> None:
    """Hosts whose file gives them another address (port, user, alias, key) than the sweep
    recorded: each re-validated there (its folder of this sweep, with its shard, must be there:
    else it may be another machine) and recorded as reached there, for this resume and every later
    command. A host that fails is a SweepError that names both choices, before any host is driven."""
    from fleet.inventory import load_host_record

    folder = SweepFolder(directory)
    recorded = {name: load_host_record(folder.host_file(name)) for name in record.hosts}
    for move in moved_hosts(hosts_dir, recorded):
        host = move.current
        shard = SweepDir(sweep_dir(host, record.sweep_id)).shard
        try:
            transport = connect(host)
            try:
                there = transport.run(["test", "-f", shard], timeout=QUICK_S).exit_code == 0
            finally:
                transport.close()
        except FleetError as exc:
            raise SweepError(f"{move.describe()}, and cannot be reached there ({exc}); nothing was done: resume once it can be, or put its old address back") from None
        if not there:
            raise SweepError(f"{move.describe()}, but no folder of this sweep is there ({shard}): another machine? nothing was done: give {move.source} the address of the machine the sweep ran on")
        folder.write_host(host)
        log.warning("%s; re-validated and reached there", move.describe())


def _bring_back_given_up(sweep: LoadedSweep, connect: Connect) -> None:
    """Hosts an earlier controller gave up on are not driven again, but where one can be reached
    now its agent is stopped (giving up leaves nothing of fleet's running) and what it finished
    of runs that ran nowhere else comes back (never a run that went to another host): those runs
    leave `not_run`. One try each: one still out of reach is said, and tried again next time."""
    record = sweep.record
    brought: set[str] = set()
    for name, given_up in sweep.given_up.items():
        channel = AgentChannel(given_up.host, record.sweep_id, connect(given_up.host))
        try:
            channel.stop_agent()
            channel.pull(sweep.directory / name, replace(TRANSFER, max_delay_s=QUICK_S), skip=given_up.excludes)
        except FleetError as exc:
            log.warning("%s: given up on earlier, and not stopped and pulled now (%s): its results stay on it for a later resume or `fleet fetch-logs`", name, exc)
            continue
        finally:
            channel.close()
        ledger = host_ledger(sweep.directory, name, [run.run_id for _, run in given_up.shard.runs])
        ledger.refresh()
        late = set(ledger.results) & set(record.not_run)
        if late:
            log.warning("%s: given up on earlier; %d results of runs that ran nowhere else brought back", name, len(late))
        brought |= late
    if brought:
        for run_id in brought:
            del record.not_run[run_id]
        record.save(sweep.directory)


def _durations(results_root: Path) -> DurationHistory | None:
    """The measured durations of earlier sweeps; None (priors only) where the file is unreadable:
    a broken history must not stop a sweep, but it is said, with the file and the field."""
    try:
        return DurationHistory.load(ResultsRoot(results_root).durations)
    except ContractError as exc:
        log.error("%s; estimating from priors", exc)
        return None


def _recorded_facts(directory: Path, host: str) -> HostFacts | None:
    """The facts a sweep recorded of a host at its start (None where it recorded none)."""
    path = SweepFolder(directory).facts_file(host)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    data.pop("models", None)  # model revisions ride along in the file; they are not facts of the host
    return HostFacts.model_validate(data)


def _context(
    directory: Path,
    playbook: Playbook,
    options: ProvisionOptions,
    poll_interval_s: float,
    stop: threading.Event | None,
    fixer: SweepFixer | None,
    sleep: Callable[[float], None],
    host_lost_after_s: float | None = None,
) -> SweepContext:
    """`host_lost_after_s`: the command line's; else the playbook's `limits.host_lost_after_s`."""
    bundle = directory / ".bundle"
    write_bundle(bundle)
    lost_after = host_lost_after_s if host_lost_after_s is not None else playbook.limits.host_lost_after_s
    return SweepContext(
        directory, playbook, options, bundle, poll_interval_s, stop or threading.Event(), fixer, sleep, host_lost_after_s=lost_after,
    )  # fmt: skip


def _drive(
    ctx: SweepContext,
    hosts: Mapping[str, Host],
    shards: Mapping[str, Shard],
    *,
    watch: Watcher | None,
    plan: Plan | None,
    excluded: dict[str, str],
    connect: Connect,
    stream: EventStream,
    estimates: Plan,
    resumed: bool = False,
) -> SweepOutcome:
    """Drive every host to its end; `estimates` is the plan whose estimates make the ETA (on a
    resume, the plan made again), `plan` the one the outcome reports (None on a resume)."""
    scales = {name: time_scale_of(host) for name, host in hosts.items()}
    ledgers = {name: host_ledger(ctx.directory, name, (run.run_id for _, run in shards[name].runs)) for name in hosts}
    progress = SweepProgress(stream, estimates, shards, {name: start_scale_of(host) for name, host in hosts.items()}, ledgers)
    balancer = make_balancer(ctx, hosts, estimates, progress)
    ctx = replace(ctx, progress=progress, balancer=balancer)
    progress.started(ctx.sweep_id, resumed)
    drivers = [HostDriver(ctx, host, shards[name], connect(host), ledgers[name]) for name, host in hosts.items()]
    statuses = {d.host.name: d.status for d in drivers}
    if resumed:
        for driver in drivers:
            balancer.register(driver)
        have = set().union(*(ledger.present for ledger in ledgers.values()))
        for server_id, run_ids in _in_no_shard(ctx.directory, estimates, shards, have).items():
            # On their way from one host to another when the last controller stopped: sent on again.
            balancer.adopt(server_id, run_ids, "resume: handed over when the last controller stopped")
    threads = drive_all(drivers)
    interrupted = False
    try:
        _wait(threads, statuses, watch)
    except KeyboardInterrupt:
        # The agents work on; `fleet sweep --resume` or `fleet status` reattach.
        interrupted = True
        ctx.stop.set()
        for thread in threads:
            thread.join(timeout=20)
    finally:
        for driver in drivers:
            if not interrupted and not ctx.stop.is_set():
                driver.channel.release_lease()  # the sweep's end (detached: its agents keep the leases)
            driver.channel.close()
    if not ctx.folder_errors:  # else a host's loop found the folder unwritable already
        try:
            return _finish(ctx, statuses, drivers, balancer, progress, scales, stream, plan, excluded, interrupted)
        except OSError as exc:
            if exc.errno not in DISK_ERRNOS:
                raise
            ctx.folder_errors.append(str(folder_error(ctx.directory, exc)))
    # The results folder is full or read-only: say so, with a summary of what is here, and stop.
    # sweep.json keeps `running` (or what could be written): the agents work on, a resume goes on.
    error = ctx.folder_errors[0]
    summary = summarize(ctx.directory, read_sweep_results(ctx.directory, ledgers), statuses)
    stream.emit("summary", state="stopped", directory=str(ctx.directory), interrupted=True, error=error, **summary)
    raise SweepError(error)


def _finish(
    ctx: SweepContext,
    statuses: dict[str, HostStatus],
    drivers: Sequence[HostDriver],
    balancer: Balancer,
    progress: SweepProgress,
    scales: Mapping[str, float],
    stream: EventStream,
    plan: Plan | None,
    excluded: dict[str, str],
    interrupted: bool,
) -> SweepOutcome:
    """sweep.json's final state, summary.json, the measured durations, the summary event."""
    record = SweepRecord.load(ctx.directory)
    given_up = {name: st.last_error for name, st in statuses.items() if st.phase in (Phase.LOST, Phase.FAILED)}
    record.lost.update(given_up)
    record.not_run.update(balancer.not_run)
    record.moves += [move.__dict__ for move in balancer.moves]
    swept = read_sweep_results(ctx.directory, {d.host.name: d.ledger for d in drivers})
    missing = _without_result(swept, drivers)
    if not interrupted and not ctx.stop.is_set():
        # Finished: every run has its result, though a host given up on may have left it to others.
        others_done = all(st.phase is Phase.FINISHED for name, st in statuses.items() if name not in given_up)
        record.state = "finished" if others_done and not record.not_run and not missing else "incomplete"
    fixes = ctx.fixer.records if ctx.fixer is not None else []
    # The record is the history: what earlier controllers of this sweep saw (before a resume) adds up.
    earlier = record.add_history({name: host_counts(st) for name, st in statuses.items()}, [fix.__dict__ for fix in fixes])
    record.save(ctx.directory)
    summary = summarize(ctx.directory, swept, statuses, earlier)
    summary.update(lost=record.lost, not_run=record.not_run, moved=len(record.moves), missing=missing)
    if ctx.fixer is not None or record.fixes:
        summary["fixes"] = list(record.fixes)
    SweepFolder(ctx.directory).write_summary(summary)
    results = swept.results
    try:
        record_durations(ctx.directory.parent, ctx.sweep_id, results, progress.server_samples, scales)
    except (ContractError, OSError) as exc:
        log.error("measured durations not recorded: %s", exc)  # the results stand; only the next ETA learns less
    if ctx.fixer is not None:  # it knows every launch of the sweep (its variants too) and each host's GPU
        record_sweep_starts(ResultsRoot(ctx.directory.parent).starts, results, started_servers(ctx.fixer.planned.values(), ctx.fixer.hardware))
    interrupted = interrupted or ctx.stop.is_set()
    stream.emit("summary", eta_s=0.0 if record.state == "finished" else None, state=record.state, directory=str(ctx.directory), interrupted=interrupted, **summary)
    failed_runs = sum(1 for r in results if r.status in (RunStatus.failed, RunStatus.partial))
    return SweepOutcome(
        ctx.sweep_id, ctx.directory, statuses, excluded, plan, interrupted, fixes, dict(record.lost), dict(record.not_run),
        state=record.state, missing=tuple(missing), failed_runs=failed_runs, unreadable=tuple(sorted(swept.rejected)),
    )  # fmt: skip


@contextlib.contextmanager
def _writing(results_root: Path) -> Iterator[None]:
    """Writes into the results folder: a full or read-only one is a SweepError naming it, not a traceback."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        raise SweepError(f"{results_root}: the results folder cannot be written ({exc.strerror or exc}); no agent was started") from None


def make_balancer(ctx: SweepContext, hosts: Mapping[str, Host], estimates: Plan, progress: SweepProgress | None) -> Balancer:
    """Moves work between this sweep's hosts: the plan's servers (and the fixer's variants) are
    what can move, placed anew on the host that takes them; their estimates decide how much."""
    planned = {server.config.id: server for server in estimates.servers}
    fixer = ctx.fixer

    def lookup(server_id: str) -> PlannedServer | None:
        return (fixer.planned.get(server_id) if fixer is not None else None) or planned.get(server_id)

    def seconds(server_id: str, run_ids: Sequence[str]) -> float:
        start = estimates.server_estimates.get(server_id)
        runs = [estimates.run_estimates.get(r) for r in run_ids]
        return (start.seconds if start else 0.0) + sum(e.seconds for e in runs if e is not None) or 1.0

    hardware = fixer.hardware if fixer is not None else {}
    return Balancer(
        ctx.sweep_id, hosts, hardware, lookup, seconds, exclusive=ctx.playbook.isolation.value == "exclusive", progress=progress,
        take_pending=fixer.take_pending if fixer is not None else None,
    )  # fmt: skip


def _in_no_shard(directory: Path, plan: Plan, shards: Mapping[str, Shard], have: set[str]) -> dict[str, list[str]]:
    """Planned runs with no result (`have`: the runs with a result file in some host's folder)
    that no live host's shard holds (server id -> run ids): runs a stopped controller was moving
    between hosts (released by one, not yet shipped to the other)."""
    record = SweepRecord.load(directory)
    held = {run.run_id for name, shard in shards.items() if name not in record.lost for _, run in shard.runs}
    orphans: dict[str, list[str]] = {}
    for server in plan.servers:
        for run in server.runs:
            if run.id not in have and run.id not in held and run.id not in record.not_run:
                orphans.setdefault(server.config.id, []).append(run.id)
    return orphans


def _without_result(swept: SweepResults, drivers: Sequence[HostDriver]) -> list[str]:
    """Every run of every shard that is still some host's (a lost host's moved ones are not) with
    no result fleet can read (an unreadable one is named in the summary, never counted)."""
    have = {(r.host, r.run_id) for r in swept.results}
    given_up = {d.host.name for d in drivers if d.status.phase in (Phase.LOST, Phase.FAILED)}
    return sorted({run.run_id for d in drivers if d.host.name not in given_up for _, run in d.shard.runs if (d.host.name, run.run_id) not in have})


COUNTERS = ("reboots", "agent_restarts", "link_drops")


def host_counts(status: HostStatus) -> dict[str, int]:
    return {name: int(getattr(status, name)) for name in COUNTERS}


def summarize(directory: Path, swept: SweepResults, statuses: dict[str, HostStatus], earlier: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Any]:
    """`earlier`: what the sweep's earlier controllers counted per host (sweep.json's `counts`
    before this one's were added): a resumed sweep's summary holds its whole history."""
    by_status: dict[str, int] = {}
    for result in swept.results:
        by_status[result.status.value] = by_status.get(result.status.value, 0) + 1
    return {
        "sweep_id": directory.name,
        "results": len(swept.results),
        "by_status": by_status,
        "unreadable": swept.rejected,
        "hosts": {name: {"phase": s.phase.value, **{k: n + (earlier or {}).get(name, {}).get(k, 0) for k, n in host_counts(s).items()}, "last_error": s.last_error} for name, s in statuses.items()},
    }
