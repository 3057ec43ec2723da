"""The agent's main loop: work through a shard, one server launch per server configuration,
side by side on the host's GPU pool. It reads and writes the files of `fleet.host.contract`.

Dispatch: whenever GPUs free up (and at the start), the next server is chosen among those not
started nor released to another host, and placed on free GPUs (fleet.host.agent.dispatch); the
shard asks for a number of GPUs per server, not for particular ones. A start that finds its GPUs
held by a process fleet did not start never touches it: the server goes back to waiting and those
GPUs are left out for a while (STRANGER_RECHECK_S); only when nothing else could ever free do its
runs fail, naming the holder. Each result names the GPUs its server ran on.

Per server: clear what an earlier agent or run left on its port and GPUs; start it; wait until
`/health` answers, failing fast on a fatal log line or an exited process; read its context length
and effective max_running_requests; warm it up (two 16-token requests, not measured); drive each
pending run's workload, checking liveness between sections; write one result per run; stop it and
make sure its port and GPUs are free.

Growth: the controller may append servers to `shard.json` while the agent runs (a failed
server's fixed variant, `fleet.host.contract.shard.grown_servers`); the loop notices a changed
file by its inode, size and mtime, takes the new servers into its waiting set, and refuses any
other change (logged; it works on with the shard it has).

Pauses: a run during which the agent itself did not run (its process stopped, its machine
suspended: fleet.host.agent.pause) measured that pause, not the server. Its result is kept aside
(`runs/<run-id>.attempt-<n>.disturbed`, not a `.json` the controller reads as a result) and the
run is done again, once; disturbed again, it is written `not_comparable` with an `agent_paused`
deviation. Every pause is named in the log and as the progress file's last error.

Lossless check and energy: after its warm-up every server answers a fixed set of greedy prompts
(fleet.host.agent.lossless); an autoregressive server's answers are the reference of its model and
TP size on this host, a speculative server's are compared with it where it is known here (an
autoregressive server of the same model and TP that ran earlier, or runs now and answers within
`reference_wait_s`), else left for the controller and the report to compare. A server that
diverges early on most prompts serves no run: each fails `not_lossless` with the diverging
positions. The record is in each of the server's results (`lossless`). While a server is up its
GPUs' power is sampled (fleet.host.agent.power), and each result's figures carry its `energy`.

Resume: a run is done when `<sweep_dir>/runs/<run_id>.json` exists. A run interrupted by a stop
or a crash has no result file, so a restarted agent redoes exactly that one (with `attempt`
one higher). Stop: SIGTERM or a `STOP` file in the sweep directory; requests in flight are cut,
servers are stopped, the progress file says "stopped", the interrupted run writes nothing.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import http.client
import json
import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleet.host.agent.client import Client, Endpoint, get_body, get_json, health_ok
from fleet.host.agent.dispatch import Placement, Running, Waiting, choose, stuck
from fleet.host.agent.drive import drive
from fleet.host.agent.driver import Driver, Gate, ServerFacts
from fleet.host.agent.handover import release_handed_over
from fleet.host.agent.logwatch import LogWatcher
from fleet.host.agent.lossless import ERROR as CHECK_ERROR
from fleet.host.agent.lossless import CANDIDATE, PENDING, REFERENCE, Check, Output, compare, outputs_of, record, reference_key, send_greedy_set
from fleet.host.agent.pause import PauseWatch, threshold_from_env
from fleet.host.agent.power import PowerSampler, window_of
from fleet.host.agent.progress import UNWRITABLE_ERRNOS, ProgressFile
from fleet.host.agent.results import RunIdentity, build_result, paused_deviation, sim_speed_of, skipped_result
from fleet.host.agent.outcome import AGENT_PAUSED, WorkloadOutcome
from fleet.host.agent.services import SIGKILL_HINT, Holder, Services, ServiceSpec, boot_id, clear_stale, exit_description, gpu_names, make_services, wait_free
from fleet.host.errors import ServiceError
from fleet.host.atomic import TEMP_PREFIX, TEMP_SUFFIX, atomic_file, write_json_atomic
from fleet.host.contract import AgentState, ContractError, Failure, HostQuarantine, RunResult, RunStatus, ServerPhase, SweepDir, load_result
from fleet.host.contract.exits import AgentExit
from fleet.host.contract.lease import AGENT_HEARTBEAT_S, Claim, HostLease
from fleet.host.errors import LeaseHeld, LeaseLost
from fleet.host.contract.progress import Halt
from fleet.host.contract.shard import RunSpec, ServerSpec, Shard, grown_servers
from fleet.host.diagnose.classify import DiagnosisHint, diagnose_file
from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import LaunchFacts, SpecCounters
from fleet.host.failures import FailureClass
from fleet.host.nvidia_smi import DECLARED_GPU_ENV, plays_declared
from fleet.host.errors import AgentBusy, HostLeased

log = logging.getLogger("fleet.host.agent")

WARMUP_PROMPT = "Write one sentence about the sea."
WARMUP_REQUESTS = 2
WARMUP_TOKENS = 16
STOP_GRACE_S = 30.0
FREE_TIMEOUT_S = 30.0
DEATH_GRACE_S = 5.0  # after a fatal line: time for the process to finish logging and exit
READY_POLL_S = 0.2
HEALTH_TIMEOUT_CAP_S = 20.0
FACTS_TIMEOUT_S = 10.0
GPU_HOLD = "GPU "  # how fleet.host.agent.services.find_holders names a hold on GPUs ("GPU 0,1")
STRANGER_RECHECK_S = 60.0  # a GPU found held by a process fleet did not start is left out this long

# Failure classes of servers (requests have theirs in fleet.host.agent.client).
SERVER_START_FAILED = FailureClass.SERVER_START_FAILED.value
SERVER_START_TIMEOUT = FailureClass.SERVER_START_TIMEOUT.value
SERVER_DIED = FailureClass.SERVER_DIED.value
SERVER_HUNG = FailureClass.SERVER_HUNG.value
WARMUP_FAILED = FailureClass.WARMUP_FAILED.value
SERVICE_ERROR = FailureClass.SERVICE_ERROR.value
PORT_OR_GPU_BUSY = FailureClass.PORT_OR_GPU_BUSY.value
AGENT_ERROR = FailureClass.AGENT_ERROR.value
RESULTS_UNWRITABLE = FailureClass.RESULTS_UNWRITABLE.value
NOT_LOSSLESS = FailureClass.NOT_LOSSLESS.value
REFERENCE_WAIT_MARGIN_S = 60.0  # beyond the start time-out: how long a speculative server waits for a reference starting beside it

# A write that fails so (UNWRITABLE_ERRNOS) is no run's failure: every later write fails alike, so
# the agent stops launching servers and says why (`halt`), instead of burning through the shard
# without results, exiting AgentExit.HALTED.


def unwritable(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in UNWRITABLE_ERRNOS


def launch_facts(spec: ServerSpec) -> LaunchFacts:
    """What the server's own flags say (its engine reads them: fleet.host.engines.base.LaunchFacts)."""
    return _read_launch(spec.engine, tuple(spec.argv[3:]))


@functools.lru_cache(maxsize=256)
def _read_launch(engine: str, flags: tuple[str, ...]) -> LaunchFacts:
    return engine_named(engine).read_launch(flags)  # vLLM's reading runs its release's parser: once a server


def speculative(spec: ServerSpec) -> bool:
    return launch_facts(spec).speculative


def lossless_key(spec: ServerSpec) -> str:
    """The reference a server's greedy outputs are compared with (or are): its model and TP size,
    and its engine when it is not SGLang (two engines' kernels need not agree on a near-tie)."""
    key = reference_key(launch_facts(spec).model, spec.gpu_count)
    return key if spec.engine == DEFAULT_ENGINE else f"{key}|{spec.engine}"


class _Stopped(Exception):
    """The agent was told to stop while a server was starting (or it must not start: `strangers`)."""


def held_gpus(holders: list[Holder]) -> frozenset[int] | None:
    """The GPUs these holders hold; None when one holds something else (the port)."""
    gpus: set[int] = set()
    for holder in holders:
        if not holder.holds.startswith(GPU_HOLD):
            return None
        gpus.update(int(index) for index in holder.holds.removeprefix(GPU_HOLD).split(","))
    return frozenset(gpus)


class Agent:
    def __init__(self, sweep_dir: Path, services: Services | None = None) -> None:
        self.sweep_dir = Path(sweep_dir)
        self.files = SweepDir(str(self.sweep_dir))
        self._shard_seen = self._shard_stat()  # before the read: a change in between is seen next loop
        self.shard = Shard.from_json(Path(self.files.shard).read_text(), source=self.files.shard)
        self.services = services or make_services(self.shard.service_manager, Path(self.files.services))
        self.boot_id = boot_id()
        self.stopping = threading.Event()
        self.logs_dir = Path(self.files.logs)
        self.stop_file = Path(self.files.stop_file)
        self._sessions: dict[str, ServerSession] = {}
        self._lock = threading.Lock()
        self.progress: ProgressFile | None = None
        self.errors = 0
        self.host_facts = self._read_host_facts()
        # No work dir (a sweep dir outside `<work_dir>/sweeps/`): no host to lease.
        self.lease = HostLease(self.files.work_dir) if self.files.work_dir else None
        self._lease_beat = 0.0
        self.halted: str | None = None  # why the agent stopped itself: it cannot write
        self._strangers: dict[int, float] = {}  # GPU -> when a start found a foreign process on it
        self.pauses = PauseWatch(threshold_from_env())  # ticks while the agent works (run)
        # The lossless check's references on this host: key -> (server label, outputs); a key's
        # event is set once its autoregressive server answered the greedy set or ended without.
        self._references: dict[str, tuple[str, list[Output]]] = {}
        self._reference_coming: dict[str, threading.Event] = {}
        self._references_read: set[str] = set()

    def skip_reason(self, spec: ServerSpec, quarantined: dict[str, str] | None = None) -> str | None:
        """Why not to launch this server: the shard says so, or the controller quarantined its
        configuration while the sweep runs (`quarantine.json`: server id -> reason, read afresh
        unless given)."""
        if spec.skip_reason:
            return spec.skip_reason
        return (self.quarantined() if quarantined is None else quarantined).get(spec.server_id)

    def quarantined(self) -> dict[str, str]:
        try:
            return dict(HostQuarantine.load(self.files.quarantine).reasons)
        except ContractError as exc:
            # Written atomically by the controller: only a hand edit or an older fleet gets here.
            log.error("%s; launching as if nothing were quarantined", exc)
            return {}

    def _shard_stat(self) -> tuple[int, int, int] | None:
        """Cheap enough for every loop: the controller writes by rename, so a new file is a new inode."""
        try:
            stat = os.stat(self.files.shard)
        except OSError:
            return None
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns)

    def take_growth(self, released: frozenset[str]) -> list[tuple[ServerSpec, bool]]:
        """Servers the controller appended to `shard.json` since the last look, each with whether
        all its runs have a result already (an earlier agent's); they join this agent's shard, its
        run total and counts. Any other change is refused: said in the log, and the agent goes on
        with the shard it has (the controller ships its whole shard before the next agent)."""
        stat = self._shard_stat()
        if stat is None or stat == self._shard_seen:
            return []
        self._shard_seen = stat
        try:
            new = Shard.from_json(Path(self.files.shard).read_text(), source=self.files.shard)
            appended = grown_servers(self.shard, new, released, self.files.shard)
        except (OSError, ContractError) as exc:
            log.error("shard change refused (%s); working on with the shard as it was", exc)
            return []
        if not appended:
            return []
        self.shard = replace(self.shard, servers=[*self.shard.servers, *appended])
        counts: dict[str, int] = {}
        out = []
        for spec in appended:
            statuses = [self.existing_status(run.run_id) for run in spec.runs]
            for status in statuses:
                if status is not None:
                    counts[status.value] = counts.get(status.value, 0) + 1
            out.append((spec, all(status is not None for status in statuses)))
        assert self.progress is not None
        self.progress.add_runs(sum(len(spec.runs) for spec in appended), counts)
        for spec in appended:
            log.info("shard grew: server %s (%s) appended, %d runs", spec.label, spec.server_id, len(spec.runs))
        return out

    def _read_host_facts(self) -> dict[str, Any] | None:
        """What the controller knows of this host (GPUs, driver, CUDA, engine versions), for every result."""
        try:
            return json.loads(Path(self.files.host_facts).read_text())
        except (OSError, ValueError):
            return None

    # -- results ----------------------------------------------------------------------------

    def existing_status(self, run_id: str) -> RunStatus | None:
        path = Path(self.files.result(run_id))
        if not path.exists():
            return None
        try:
            return load_result(path).status
        except ContractError as exc:
            # Cannot happen with atomic writes, short of a hand edit or another fleet's schema:
            # keep it aside, say so, and redo the run.
            log.error("%s; kept as %s and the run is done again", exc, path.with_suffix(".unreadable").name)
            path.rename(path.with_suffix(".unreadable"))
            return None

    def keep_disturbed(self, result: RunResult) -> dict[str, Any]:
        """Keep aside, for the record, a run's result that the agent's own pause disturbed (beside
        the results, never read as one); returns what the redone run's result says of it."""
        path = Path(self.files.result(result.run_id)).with_name(f"{result.run_id}.attempt-{result.attempt}.disturbed")
        try:
            write_json_atomic(path, result.to_json())
        except OSError as exc:
            if unwritable(exc):
                exc.filename = exc.filename or str(path)
                self.halt(exc)
            raise
        log.warning("run %s: disturbed by the agent's pause, kept aside as %s; running it again", result.label, path.name)
        why = next(d.message for d in result.deviations if d.kind == AGENT_PAUSED)
        return {"attempt": result.attempt, "kept_as": path.name, "why": why}

    def next_attempt(self, run_id: str) -> int:
        path = Path(self.files.attempt(run_id))
        try:
            attempt = int(json.loads(path.read_text())["attempt"]) + 1
        except (OSError, ValueError, KeyError, TypeError):
            attempt = 1
        write_json_atomic(path, {"attempt": attempt, "boot_id": self.boot_id, "at": time.time()})
        return attempt

    def write_result(self, result: RunResult) -> None:
        path = self.files.result(result.run_id)
        try:
            write_json_atomic(Path(path), result.to_json())
        except OSError as exc:
            if unwritable(exc):
                exc.filename = exc.filename or path  # a failed write() names no file
                self.halt(exc)  # before the server's stop writes anything: this is the reason to name
            raise
        assert self.progress is not None
        self.progress.run_done(result.status)
        log.info("run %s: %s", result.label, result.status.value)

    # -- the lossless check's references --------------------------------------------------

    def expect_reference(self, key: str) -> None:
        """An autoregressive server of `key` is being started: speculative ones may wait for it."""
        with self._lock:
            self._reference_coming.setdefault(key, threading.Event())

    def publish_reference(self, key: str, label: str | None, outputs: list[Output] | None) -> None:
        """Its greedy outputs (None: it ended without any); wakes the servers waiting for them."""
        with self._lock:
            if outputs is not None:
                self._references.setdefault(key, (label or "?", outputs))
            event = self._reference_coming.get(key)
        if event is not None and (outputs is not None or key in self._references):
            event.set()

    def reference_ended(self, key: str) -> None:
        with self._lock:
            event = self._reference_coming.get(key)
        if event is not None:
            event.set()

    def reference(self, key: str, wait_s: float, aborted: threading.Event) -> tuple[str, list[Output]] | None:
        """The reference outputs of `key` on this host: from this agent's servers, or from the
        results of the shard's autoregressive servers (an earlier agent's); waiting up to `wait_s`
        for one that is starting now."""
        self._read_references(key)
        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:
                found = self._references.get(key)
                event = self._reference_coming.get(key)
            if found is not None or event is None or event.is_set() or aborted.is_set() or time.monotonic() > deadline:
                return found
            event.wait(0.5)

    def _read_references(self, key: str) -> None:
        with self._lock:
            if key in self._references_read:
                return
            self._references_read.add(key)
        for spec in self.shard.servers:
            if speculative(spec) or lossless_key(spec) != key:
                continue
            for run in spec.runs:
                path = Path(self.files.result(run.run_id))
                try:
                    result = load_result(path) if path.exists() else None
                except ContractError:
                    continue
                outputs = outputs_of(result.extras.get("lossless")) if result is not None else None
                if outputs:
                    self.publish_reference(key, spec.label, outputs)
                    return

    # -- control ----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Safe in a signal handler: only sets a flag; the main loop does the rest."""
        self.stopping.set()

    def halt(self, exc: OSError) -> None:
        """A write failed for want of space or of a writable disk: stop launching, stop the servers,
        and end as `halted` with the reason (the first one: the others follow from it)."""
        with self._lock:
            if self.halted is None:
                code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
                self.halted = f"cannot write {exc.filename or 'its files'}: {exc.strerror or exc} ({code}); stopped launching servers"
                log.error("%s", self.halted)
        self.stopping.set()

    def _record_halt(self) -> None:
        """Where the controller can read it: progress.json; else the pre-allocated halt.json,
        overwritten in place; else only the agent's stderr (a read-only disk takes nothing)."""
        assert self.halted is not None
        try:
            if self.progress is None:
                raise OSError(errno.ENOSPC, "no progress file")
            self.progress.halt(RESULTS_UNWRITABLE, self.halted)
            return
        except OSError as exc:
            log.error("progress.json: %s", exc)
        try:
            fd = os.open(self.files.halt, os.O_WRONLY)  # no O_TRUNC: its blocks stay allocated
            try:
                os.pwrite(fd, Halt(self.halted, time.time()).to_bytes(), 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            log.error("%s: %s; the agent's exit status (%d) and this log are all that tell", self.files.halt, exc, int(AgentExit.HALTED))

    def _prepare_halt_file(self) -> None:
        with atomic_file(Path(self.files.halt)) as handle:
            handle.write(Halt(None).to_bytes())

    def _stop_requested(self) -> bool:
        if self.stop_file.exists() and not self.stopping.is_set():
            log.info("stop file %s found: stopping", self.stop_file)
            self.stopping.set()
        if self.stopping.is_set():
            with self._lock:
                sessions = list(self._sessions.values())
            for session in sessions:
                session.abort()
        return self.stopping.is_set()

    def run(self) -> int:
        """Work through the shard. Exit code: 0 when every run has a result (whatever its status)
        or when told to stop (progress.json says "stopped": a requested stop is no failure, so a
        systemd unit with Restart=on-failure stays down); 1 when an agent error left runs
        without a result; AgentExit.HALTED (5) when it stopped itself, unable to write (`halt`)."""
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        lock_handle = open(self.files.agent_lock, "a+")
        try:
            fcntl.flock(lock_handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_handle.seek(0)
            raise AgentBusy(f"{self.sweep_dir}: another agent (pid {lock_handle.read().strip() or '?'}) works on this sweep") from None
        lock_handle.seek(0)
        lock_handle.truncate()
        lock_handle.write(str(os.getpid()))
        lock_handle.flush()
        try:
            self._take_lease()
            self.pauses.start()
            try:
                return self._run_locked()
            finally:
                self.pauses.stop()
                self._hand_back_lease()
        finally:
            fcntl.flock(lock_handle, fcntl.LOCK_UN)
            lock_handle.close()

    # -- the host's lease -------------------------------------------------------------------

    @property
    def _lease_key(self) -> str:
        return self.shard.sweep_id

    def _take_lease(self) -> None:
        """The controller took the lease before it started us; taking it again makes this process
        its holder, so that the lease dies with it. Another live sweep's lease: not a server of ours to clear."""
        if self.lease is None:
            return
        try:
            self.lease.acquire(Claim(self.shard.sweep_id, f"agent@{os.uname().nodename}", 0), agent_pid=os.getpid(), host=self.shard.host)
        except LeaseHeld as exc:
            raise HostLeased(str(exc)) from None
        self._lease_beat = time.monotonic()

    def _heartbeat_lease(self) -> None:
        if self.lease is None or time.monotonic() - self._lease_beat < AGENT_HEARTBEAT_S:
            return
        self._lease_beat = time.monotonic()
        try:
            self.lease.heartbeat(self._lease_key, os.getpid())
        except LeaseLost as exc:
            # Taken over (this agent looked dead: stopped for longer than the TTL) or released by
            # the controller that gave up on this host: another sweep may use these GPUs now.
            log.error("%s; stopping", exc)
            assert self.progress is not None
            self.progress.error("agent", AGENT_ERROR, str(exc))
            with self._lock:
                self.errors += 1
            self.request_stop()
        except OSError as exc:
            # A full or read-only work dir: the lease stays live for its TTL; the results' writes say the rest.
            log.warning("lease heartbeat: %s", exc)

    def _hand_back_lease(self) -> None:
        if self.lease is None:
            return
        try:
            self.lease.hand_back(self._lease_key)
        except (LeaseLost, OSError) as exc:
            log.warning("lease hand-back: %s", exc)

    def _dispatch(self, waiting: list[ServerSpec], placed: dict[str, Running], order: dict[str, int], launch: Callable[[ServerSpec, Placement | None], None]) -> None:
        """Start what fits the free GPUs now (fleet.host.agent.dispatch), one choice at a time; a
        skipped server (quarantined, or the shard says so) at once, on no GPUs."""
        quarantined = self.quarantined()
        for spec in [s for s in waiting if self.skip_reason(s, quarantined)]:
            waiting.remove(spec)
            launch(spec, None)  # never launched: it writes its skipped results
        now = time.monotonic()
        # GPUs a start found held by a process fleet did not start: not handed out for a while.
        unusable = {gpu for gpu, at in self._strangers.items() if now - at < STRANGER_RECHECK_S}
        while waiting:
            candidates = [Waiting(s.server_id, s.gpu_count, s.estimate_s or 0.0, order[s.server_id], s.port) for s in waiting]
            running = list(placed.values())
            choice = choose(self.shard.pool, running, candidates, now, unusable, exclusive=self.shard.exclusive)
            if choice is None and not running:
                # Nothing of ours runs, so nothing frees: the start fails, naming the holders.
                choice = stuck(self.shard.pool, candidates, unusable)
            if choice is None:
                return
            spec = next(s for s in waiting if s.server_id == choice.server_id)
            waiting.remove(spec)
            launch(spec, choice)

    def _remove_stale_temps(self) -> None:
        """A result's temporary file (`.<name>.<random>.tmp`, fleet.host.atomic) that an agent killed
        mid-write left in runs/: no writer is left for it (this agent holds the sweep's lock), and a
        pull leaves it out; it would stay for good."""
        for entry in Path(self.files.runs).glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
            try:
                entry.unlink()
                log.info("removed %s, left by an agent killed while writing it", entry.name)
            except OSError:
                pass  # gone meanwhile, or a folder the agent cannot write: the run's own writes will say

    def _run_locked(self) -> int:
        self._remove_stale_temps()
        try:
            self._prepare_halt_file()
        except OSError as exc:
            if not unwritable(exc):
                raise
            self.halt(exc)
            self._record_halt()
            return AgentExit.HALTED
        counts: dict[str, int] = {}
        for _, run in self.shard.runs:
            status = self.existing_status(run.run_id)
            if status:
                counts[status.value] = counts.get(status.value, 0) + 1
        self.progress = ProgressFile(
            Path(self.files.progress), sweep_id=self.shard.sweep_id, boot_id=self.boot_id, total_runs=len(self.shard.runs), counts=counts,
            on_unwritable=self.halt,
        )  # fmt: skip
        log.info("sweep %s: %d runs, %d already done", self.shard.sweep_id, len(self.shard.runs), sum(counts.values()))
        finished: set[str] = set()
        threads: dict[str, threading.Thread] = {}
        placed: dict[str, Running] = {}  # servers started on GPUs, while their session lasts
        changed = threading.Condition()
        order = {spec.server_id: index for index, spec in enumerate(self.shard.servers)}
        # Known now, for the rest of the agent's life: only this agent writes them.
        done = {spec.server_id for spec in self.shard.servers if all(self.existing_status(r.run_id) is not None for r in spec.runs)}

        def serve(spec: ServerSpec, placement: Placement | None) -> None:
            session: ServerSession | None = None
            try:
                session = ServerSession(self, spec, placement.gpus if placement else (), last_chance=placement is not None and placement.last_chance)
                with self._lock:
                    self._sessions[spec.server_id] = session
                if self.stopping.is_set():
                    session.abort()
                session.execute()
            except Exception as exc:  # a bug must not take the other servers down with it
                if unwritable(exc):
                    assert isinstance(exc, OSError)
                    self.halt(exc)
                    return
                with self._lock:
                    self.errors += 1
                log.error("server %s: %s", spec.label, traceback.format_exc())
                assert self.progress is not None
                self.progress.error(spec.label, AGENT_ERROR, f"{type(exc).__name__}: {exc}")
            finally:
                with self._lock:
                    self._sessions.pop(spec.server_id, None)
                with changed:
                    placed.pop(spec.server_id, None)  # its GPUs are free again (the session waited for them)
                    if session is not None and session.strangers:
                        # Not started: back to waiting, for GPUs no stranger holds.
                        threads.pop(spec.server_id, None)
                        self._strangers.update({gpu: time.monotonic() for gpu in session.strangers})
                    else:
                        finished.add(spec.server_id)
                    changed.notify_all()

        def launch(spec: ServerSpec, placement: Placement | None) -> None:
            threads[spec.server_id] = threading.Thread(target=serve, args=(spec, placement), name=spec.label, daemon=True)
            if placement is not None:
                placed[spec.server_id] = Running(spec.server_id, placement.gpus, time.monotonic() + (spec.estimate_s or 0.0), spec.port)
            threads[spec.server_id].start()

        released: frozenset[str] = frozenset()  # handed back to the controller: never started here
        pauses_told = 0  # the agent's pauses named in the progress file so far
        while True:
            stopping = self._stop_requested()
            with changed:
                if not stopping:
                    # Answered here, before any start: a server is started or released, never both.
                    released = release_handed_over(self.files, started=threads.keys())
                    for spec, all_done in self.take_growth(released):
                        order[spec.server_id] = len(order)
                        if all_done:
                            done.add(spec.server_id)
                    waiting = [spec for spec in self.shard.servers if spec.server_id not in threads and spec.server_id not in released]
                    for spec in waiting:
                        if spec.server_id in done:
                            launch(spec, None)  # no GPUs: it only makes sure no server of it is left running
                    self._dispatch([spec for spec in waiting if spec.server_id not in done], placed, order, launch)
                running = [sid for sid in threads if sid not in finished]
                remaining = [s for s in self.shard.servers if s.server_id not in threads and s.server_id not in released]
                if not running and (stopping or not remaining):
                    break
                changed.wait(0.5)
            self.progress.heartbeat()
            self._heartbeat_lease()
            for gap in self.pauses.since(pauses_told):
                # The live display's line for this host: the pause would otherwise pass unseen.
                self.progress.error("agent", AGENT_PAUSED, f"{gap.describe()}; a run in flight across it is done again")
                pauses_told += 1
        if self.halted is not None:
            self._record_halt()
            return AgentExit.HALTED
        if stopping:
            self.progress.end(AgentState.stopped)
            self.stop_file.unlink(missing_ok=True)
            return 0
        self.progress.end(AgentState.finished if not self.errors else AgentState.finished_with_errors)
        return 1 if self.errors else 0


class ServerSession:
    """One server of the shard, from start to stop, and the runs it serves."""

    def __init__(self, agent: Agent, spec: ServerSpec, gpus: tuple[int, ...], last_chance: bool = False) -> None:
        """`gpus`: where the agent placed it (fleet.host.agent.dispatch); none for a server that
        is not launched (all its runs done, or skipped). `last_chance`: no GPUs but those found
        held by strangers are left for it, so a stranger's hold fails its runs instead of sending
        it back to wait (`strangers`)."""
        self.agent = agent
        self.spec = spec
        self.gpus = gpus
        self.last_chance = last_chance
        self.strangers: frozenset[int] = frozenset()  # GPUs of its placement held by foreign processes: not started
        self.limits = agent.shard.limits
        self.endpoint = Endpoint("127.0.0.1", spec.port)
        self.log_path = agent.logs_dir / spec.log_name
        self.watcher: LogWatcher | None = None
        self.client: Client | None = None
        self.facts = ServerFacts(engine=spec.engine)
        self._aborted = threading.Event()
        # The machine's GPUs this server uses: none for a sim server that plays its host file's
        # GPUs on a machine of others (fleet.host.nvidia_smi.plays_declared) -- whatever holds the
        # machine's GPUs is not in its way, and it holds none of them.
        declared = spec.env.get(DECLARED_GPU_ENV)
        self.machine_gpus = [] if declared and plays_declared(declared, gpu_names()) else list(gpus)
        self.lossless_key = lossless_key(spec)
        self.lossless: dict[str, Any] | None = None  # the greedy set's record, for every result of this server
        self.power: PowerSampler | None = None

    @property
    def progress(self) -> ProgressFile:
        assert self.agent.progress is not None
        return self.agent.progress

    def abort(self) -> None:
        self._aborted.set()
        if self.client is not None:
            self.client.abort_all()

    def execute(self) -> None:
        pending = [run for run in self.spec.runs if self.agent.existing_status(run.run_id) is None]
        if not pending:
            # All done, but an agent killed while stopping this server may have left it running.
            self.agent.services.stop(self.spec.unit_name, STOP_GRACE_S)
            return
        reason = self.agent.skip_reason(self.spec)
        if reason:
            for run in pending:
                identity = self._identity(run, self.agent.next_attempt(run.run_id))
                self.agent.write_result(skipped_result(identity=identity, workload=run.workload, reason=reason, at=time.time()))
            return
        reference = not speculative(self.spec)
        if reference:
            self.agent.expect_reference(self.lossless_key)
        try:
            failure = self._bring_up()
            if failure is None:
                self.power = PowerSampler(self.machine_gpus)
                self.power.start()
                failure = self._warm_up()
            if failure is None:
                failure = self._lossless_check()
            if failure is not None:
                self.progress.error(self.spec.label, failure.error_class, failure.message)
                self._fail_runs(pending, failure)
            else:
                self._serve(pending)
        except _Stopped:
            pass
        finally:
            if reference:
                self.agent.reference_ended(self.lossless_key)
            if self.power is not None:
                self.power.stop()
            self._bring_down()

    # -- start ------------------------------------------------------------------------------

    def _bring_up(self) -> Failure | None:
        spec = self.spec
        self.progress.phase(spec.server_id, spec.label, ServerPhase.starting, gpus=self.gpus)
        services = self.agent.services
        try:
            # Left running by an agent that was killed or crashed: a fresh start, never adoption
            # (see fleet.host.agent.services).
            services.stop(spec.unit_name, STOP_GRACE_S)
        except ServiceError as exc:
            return Failure(SERVICE_ERROR, str(exc), log_path=str(self.log_path))
        killed, blockers = clear_stale(spec.port, self.machine_gpus, STOP_GRACE_S)
        for holder in killed:
            log.warning("server %s: killed stale server pid %d holding %s: %s", spec.label, holder.pid, holder.holds, holder.command)
        held = held_gpus(blockers)
        if blockers and held is not None and not self.last_chance:
            # Only GPUs in the way, and the pool may have others: never touched, and left out.
            self.strangers = held
            log.warning("server %s: GPUs %s are held by processes fleet did not start (%s): waiting for others", spec.label, sorted(held), "; ".join(f"pid {h.pid}: {h.command}" for h in blockers))
            raise _Stopped()
        if blockers:
            return Failure(
                PORT_OR_GPU_BUSY,
                f"port {spec.port} / GPUs {list(self.gpus)} are held by processes that are not fleet's servers",
                evidence=tuple(f"pid {h.pid} holds {h.holds}: {h.command}" for h in blockers),
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        visible = ",".join(map(str, self.gpus))
        # A systemd unit reads its GPUs from this file; the process manager takes them from the env.
        with atomic_file(Path(self.agent.files.placement_env(spec.unit_name))) as handle:
            handle.write(f"CUDA_VISIBLE_DEVICES={visible}\n".encode())
        log.info("server %s (%s): launching on GPUs %s", spec.label, spec.server_id, visible)
        began = time.monotonic()
        try:
            services.start(ServiceSpec(spec.unit_name, spec.argv, {**spec.env, "CUDA_VISIBLE_DEVICES": visible}, str(self.log_path), spec.cwd))
        except ServiceError as exc:
            return Failure(SERVICE_ERROR, str(exc), log_path=str(self.log_path))
        self.watcher = LogWatcher(self.log_path, offset, self.spec.engine)
        failure = self._wait_ready(began)
        if failure is None:
            log.info("server %s: ready in %.1f s", spec.label, time.monotonic() - began)
            self.facts = self._read_facts()
        return failure

    def _wait_ready(self, began: float) -> Failure | None:
        assert self.watcher is not None
        deadline = began + self.limits.server_start_timeout_s
        while True:
            if self._aborted.is_set():
                raise _Stopped()
            self.watcher.sync()
            if self.watcher.fatal_marker is not None or not self.agent.services.status(self.spec.unit_name).running:
                return self._death(SERVER_START_FAILED, "failed during start-up")
            if health_ok(self.endpoint, 2.0):
                return None
            if time.monotonic() > deadline:
                return Failure(
                    SERVER_START_TIMEOUT,
                    f"the server was not ready after {self.limits.server_start_timeout_s:.0f} s",
                    evidence=tuple(self.watcher.evidence()),
                    log_path=str(self.log_path),
                    diagnosis=self._diagnosis(DiagnosisHint(True, self.limits.server_start_timeout_s)),
                )
            time.sleep(READY_POLL_S)

    def _death(self, error_class: str, when: str) -> Failure:
        """The server is dying or dead: let it finish logging and exiting, then collect the evidence."""
        assert self.watcher is not None
        services, unit = self.agent.services, self.spec.unit_name
        deadline = time.monotonic() + DEATH_GRACE_S
        # Until it is gone and how it ended is known (its wrapper records the exit a moment after).
        while ((status := services.status(unit)).running or status.exit_code is None) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # the last lines written between the exit and now
        self.watcher.sync()
        status = services.status(unit)
        evidence = self.watcher.evidence()
        parts = [f"the server {when}"]
        if self.watcher.fatal_line is not None:
            parts.append(f"fatal log line ({self.watcher.fatal_marker}): {self.watcher.fatal_line.strip()}")
        elif self.watcher.suspect_line is not None:
            parts.append(f"first traceback line: {self.watcher.suspect_line.strip()}")
        parts.append("its process is still running" if status.running else f"its process {exit_description(status.exit_code)}")
        if status.exit_code == -signal.SIGKILL and self.watcher.fatal_line is None:
            parts.append(SIGKILL_HINT)
        return Failure(error_class, "; ".join(parts), tuple(evidence), str(self.log_path), status.exit_code, self._diagnosis())

    def _diagnosis(self, hint: DiagnosisHint | None = None) -> dict[str, Any] | None:
        """The root cause from the whole server log (not a truncated tail), for the result and
        auto-fix; its advice spells flags as the SGLang release the server runs does."""
        hint = hint or DiagnosisHint()
        if self.spec.engine == DEFAULT_ENGINE and self.spec.engine_release and hint.sglang_version is None:
            hint = replace(hint, sglang_version=self.spec.engine_release)
        try:
            diagnosis = diagnose_file(self.log_path, hint)
            return {**diagnosis.to_json(), "figures": diagnosis.figures}
        except (OSError, ValueError) as exc:
            log.warning("server %s: could not diagnose %s: %s", self.spec.label, self.log_path, exc)
            return None

    def _read_facts(self) -> ServerFacts:
        assert self.watcher is not None
        context_len = max_running = served = None
        sources: dict[str, str] = {}
        try:
            models = get_json(self.endpoint, "/v1/models", FACTS_TIMEOUT_S)
            first = models["data"][0]
            served = first.get("id")
            if first.get("max_model_len"):
                context_len, sources["context_len"] = int(first["max_model_len"]), "/v1/models max_model_len"
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("server %s: /v1/models: %s", self.spec.label, exc)
        info: dict[str, Any] = {}
        info_path = engine_named(self.spec.engine).info_path
        try:
            if info_path is not None:
                info = get_json(self.endpoint, info_path, FACTS_TIMEOUT_S)
                state = (info.get("internal_states") or [{}])[0]
                per_dp = state.get("effective_max_running_requests_per_dp")
                if per_dp:
                    max_running = int(per_dp) * int(info.get("dp_size") or 1)
                    sources["max_running_requests"] = f"{info_path} internal_states[0].effective_max_running_requests_per_dp"
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            log.warning("server %s: %s: %s", self.spec.label, info_path, exc)
        scheduler = self.watcher.scheduler
        if scheduler is not None:
            if max_running is None and scheduler.max_running_requests is not None:
                max_running, sources["max_running_requests"] = scheduler.max_running_requests, "log: scheduler line"
            if context_len is None:
                context_len, sources["context_len"] = scheduler.context_len, "log: scheduler line"
        if max_running is None and info.get("max_running_requests"):
            max_running, sources["max_running_requests"] = int(info["max_running_requests"]), "/server_info max_running_requests"
        if max_running is None:
            declared = launch_facts(self.spec).max_running_requests
            if declared is not None:
                max_running, sources["max_running_requests"] = declared, "launch flags (the engine does not report it)"
        if context_len is None and info.get("context_length"):
            context_len, sources["context_len"] = int(info["context_length"]), "/server_info context_length"
        max_input = int(info["max_req_input_len"]) if info.get("max_req_input_len") else None
        version = str(info["version"]) if info.get("version") else None
        return ServerFacts(context_len, max_running, served, sources, max_input, version, self.spec.engine, self.watcher.start_lines())

    def _new_client(self) -> Client:
        self.client = Client(self.endpoint, api=self.spec.api, model=self.facts.served_model, pauses=self.agent.pauses)
        if self._aborted.is_set():
            self.client.abort_all()
        return self.client

    def _warm_up(self) -> Failure | None:
        self.progress.phase(self.spec.server_id, self.spec.label, ServerPhase.warmup, gpus=self.gpus)
        client = self._new_client()
        for _ in range(WARMUP_REQUESTS):
            outcome = client.generate(WARMUP_PROMPT, WARMUP_TOKENS, deadline_s=self.limits.request_timeout_s, no_token_timeout_s=self.limits.no_token_timeout_s)
            if self._aborted.is_set():
                raise _Stopped()
            if not outcome.ok:
                dead = self.liveness("during the warm-up")
                if dead is not None:
                    return dead
                assert self.watcher is not None
                return Failure(
                    WARMUP_FAILED,
                    f"a warm-up request failed: {outcome.error_class}: {outcome.error_message}",
                    tuple(self.watcher.evidence()),
                    str(self.log_path),
                )
        return None

    # -- the lossless check ----------------------------------------------------------------

    def _lossless_check(self) -> Failure | None:
        """The greedy set (fleet.host.agent.lossless), recorded for every result of this server;
        a `not_lossless` failure for a speculative server that diverges early on most prompts.
        A set that could not be sent is recorded so, and costs the runs nothing."""
        key, is_reference = self.lossless_key, not speculative(self.spec)
        role = REFERENCE if is_reference else CANDIDATE
        self.progress.phase(self.spec.server_id, self.spec.label, ServerPhase.warmup, gpus=self.gpus)
        try:
            outputs = send_greedy_set(self.endpoint.host, self.endpoint.port, min(self.limits.request_timeout_s, 120.0), api=self.spec.api, model=self.facts.served_model)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if self._aborted.is_set():
                raise _Stopped() from None
            dead = self.liveness("during the lossless check")
            if dead is not None:
                return dead
            log.warning("server %s: the lossless check's greedy set failed: %s", self.spec.label, exc)
            self.lossless = record(role, key, None, Check(CHECK_ERROR, message=f"the greedy set could not be sent: {exc}"), str(exc))
            return None
        if is_reference:
            self.agent.publish_reference(key, self.spec.label, outputs)
            self.lossless = record(role, key, outputs, None)
            return None
        found = self.agent.reference(key, self.limits.server_start_timeout_s + REFERENCE_WAIT_MARGIN_S, self._aborted)
        if self._aborted.is_set():
            raise _Stopped()
        if found is None:
            check = Check(PENDING, message="no autoregressive server of this model and TP size answered on this host first: the controller and the report compare the two results")
        else:
            check = compare(outputs, found[1], found[0])
        self.lossless = record(role, key, outputs, check)
        log.info("server %s: lossless check %s: %s", self.spec.label, check.verdict, check.message)
        if not check.failed:
            return None
        where = ", ".join(f"{o.prompt} {'-' if p is None else p}" for o, p in zip(outputs, check.positions))
        return Failure(NOT_LOSSLESS, check.message, evidence=(f"first diverging {check.unit} per greedy prompt: {where}",))

    def _spec_counters(self) -> SpecCounters | None:
        """The server's speculative-decoding totals now, for an engine that reports acceptance in
        /metrics only (vLLM); None for others, or when /metrics does not answer."""
        if not speculative(self.spec):
            return None
        served = engine_named(self.spec.engine)
        if served.client_api == "generate":
            return None  # SGLang: the client reads acceptance per request
        try:
            return served.spec_counters(get_body(self.endpoint, "/metrics", FACTS_TIMEOUT_S).decode("utf-8", errors="replace"))
        except (OSError, ValueError, http.client.HTTPException) as exc:
            log.warning("server %s: /metrics: %s", self.spec.label, exc)
            return None

    def _annotated(self, result: RunResult, outcome: WorkloadOutcome | None = None, counted: SpecCounters | None = None) -> RunResult:
        """The result with its server's lossless record and, for a run that ran, its energy and,
        where the engine states acceptance in /metrics only, its acceptance length over the run
        (`counted`: the counters at its start)."""
        extras, figures = dict(result.extras), dict(result.figures)
        # Not over a run measured in levels: its figures are per level only (each level's acceptance is its own section's).
        if counted is not None and "levels" not in extras and figures.get("acceptance_length") is None and (now := self._spec_counters()) is not None:
            figures["acceptance_length"] = now.acceptance_length_since(counted)
            figures["spec_verify_ct"] = int(now.drafts - counted.drafts)
        if self.lossless is not None:
            extras["lossless"] = self.lossless
        if self.power is not None and outcome is not None:
            # Over the measured sections (each the span of its successful requests), as tok/s counts
            # them: the flushes and pauses between passes are neither tokens nor the server's work.
            windows = [window_of((s.outcome.started_at, s.outcome.e2e_s) for s in outcome.sent if s.outcome.ok and section.holds(s)) for section in outcome.sections]
            measured = [w for w in windows if w is not None]
            figures["energy"] = self.power.energy(measured, figures.get("output_tokens"), result.sim_speed, (result.started_at, result.ended_at))
            for name in ("levels", "repeats"):
                entries = extras.get(name)
                if isinstance(entries, list) and len(entries) == len(windows):
                    extras[name] = [
                        {**entry, "energy": self.power.energy([window], entry.get("output_tokens"), result.sim_speed)}
                        if isinstance(entry, dict) and window is not None else entry
                        for entry, window in zip(entries, windows)
                    ]  # fmt: skip
        return replace(result, figures=figures, extras=extras)

    # -- serve ------------------------------------------------------------------------------

    def liveness(self, when: str = "while serving") -> Failure | None:
        """None when the server still serves; else why not, with its evidence."""
        assert self.watcher is not None
        services, unit = self.agent.services, self.spec.unit_name
        self.watcher.sync()
        if self.watcher.fatal_marker is not None or not services.status(unit).running:
            return self._death(SERVER_DIED, f"died {when}")
        timeout = min(HEALTH_TIMEOUT_CAP_S, self.limits.no_token_timeout_s)
        asked = time.monotonic()
        if health_ok(self.endpoint, timeout):
            return None
        waited = time.monotonic() - asked
        # A refusal sooner than the timeout is no hang: the process is dying (its port closed
        # first); give it the death grace to be seen gone before calling it anything.
        deadline = time.monotonic() + (DEATH_GRACE_S if waited < timeout else 0.0)
        while services.status(unit).running and time.monotonic() < deadline:
            time.sleep(0.1)
        self.watcher.sync()
        if self.watcher.fatal_marker is not None or not services.status(unit).running:
            return self._death(SERVER_DIED, f"died {when}")
        return Failure(
            SERVER_HUNG,
            f"the server process is alive but /health did not answer (gave up after {waited:.1f} s of {timeout:.0f} s)",
            tuple(self.watcher.evidence()),
            str(self.log_path),
        )

    def _identity(self, run: RunSpec, attempt: int) -> RunIdentity:
        return RunIdentity(
            run_id=run.run_id,
            label=run.label,
            server_id=self.spec.server_id,
            server_label=self.spec.label,
            sweep_id=self.agent.shard.sweep_id,
            host=self.agent.shard.host,
            boot_id=self.agent.boot_id,
            attempt=attempt,
            agent_pid=os.getpid(),
            gpus=self.gpus,  # where it ran: the agent placed it
            server=self.facts.to_json(),
            log_path=str(self.log_path),
            host_facts=self.agent.host_facts,
            provenance=dict(run.provenance) if run.provenance else None,
            engine=self.spec.engine,
            engine_release=self.spec.engine_release or self.facts.engine_release,
            sim_speed=sim_speed_of(self.spec.env),
        )

    def _interrupted(self) -> bool:
        """A stop has begun: a run in flight gets no result, so a resumed agent redoes it. The
        agent's own flag counts at once, before it aborts this session: where a scheduler stops a
        job (Slurm's cancel, preemption, time limit) every process gets its SIGTERM together, and a
        server that dies first would otherwise be written down as the run's failure."""
        return self._aborted.is_set() or self.agent.stopping.is_set()

    def _serve(self, pending: list[RunSpec]) -> None:
        client = self._new_client()
        for index, run in enumerate(pending):
            redone: list[dict[str, Any]] = []  # its attempts the agent's pause disturbed, kept aside
            while True:
                if self._interrupted():
                    return
                self.progress.phase(self.spec.server_id, self.spec.label, ServerPhase.running, run.label, self.gpus)
                attempt = self.agent.next_attempt(run.run_id)
                started = time.time()
                mark = self.agent.pauses.mark()
                gate = Gate(self.liveness, self._aborted)
                gate.checkpoint()
                if self.power is not None:
                    self.power.sample()  # a reading of the run's own at its start (and at its end)
                counted = self._spec_counters() if gate.open else None
                outcome = drive(Driver(client, self.limits, self.facts, gate, run, self._spec_counters)) if gate.open else WorkloadOutcome(failure=gate.failure)
                if self.power is not None:
                    self.power.sample()
                if self._interrupted():
                    return  # interrupted: no result, so a resumed agent redoes this run
                gaps = self.agent.pauses.since(mark)
                if gaps:
                    outcome.deviations.append(paused_deviation(gaps))
                result = build_result(identity=self._identity(run, attempt), workload=run.workload, outcome=outcome, started_at=started, ended_at=time.time())
                result = self._annotated(result, outcome, counted)
                if redone:
                    result = replace(result, extras={**result.extras, "redone": redone})
                if not gaps or redone:
                    break  # undisturbed, or disturbed twice: written as it is (not_comparable, agent_paused)
                redone.append(self.agent.keep_disturbed(result))
            self.agent.write_result(result)
            # A failure seen across the agent's pause proves nothing: the next run checks the server afresh.
            if gate.failure is not None and not gaps:
                self.progress.error(self.spec.label, gate.failure.error_class, gate.failure.message)
                self._fail_runs(pending[index + 1 :], gate.failure)
                return

    def _fail_runs(self, runs: list[RunSpec], failure: Failure) -> None:
        for run in runs:
            if self._interrupted():
                return
            now = time.time()
            self.agent.write_result(
                self._annotated(
                    build_result(
                        identity=self._identity(run, self.agent.next_attempt(run.run_id)),
                        workload=run.workload,
                        outcome=WorkloadOutcome(failure=failure),
                        started_at=now,
                        ended_at=now,
                    )
                )
            )

    # -- stop -------------------------------------------------------------------------------

    def _bring_down(self) -> None:
        spec = self.spec
        self.progress.phase(spec.server_id, spec.label, ServerPhase.stopping, gpus=self.gpus)
        try:
            self.agent.services.stop(spec.unit_name, STOP_GRACE_S)
        except ServiceError as exc:
            self.progress.error(spec.label, SERVICE_ERROR, str(exc))
        if self.watcher is not None:
            # It was started: make sure it let go of its port and GPUs. (Never started: nothing of
            # ours holds them, and a stranger's hold is already reported.)
            self.watcher.close()
            holders = wait_free(spec.port, self.machine_gpus, FREE_TIMEOUT_S)
            if holders:
                held = "; ".join(f"pid {h.pid} holds {h.holds}: {h.command}" for h in holders)
                self.progress.error(spec.label, PORT_OR_GPU_BUSY, f"still held after the stop: {held}")
            log.info("server %s (%s): stopped, GPUs %s handed back", spec.label, spec.server_id, ",".join(map(str, self.gpus)))
        self.progress.finished_server(spec.server_id)
