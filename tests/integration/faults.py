"""Fault injection on real SSH test hosts: the `fleet sweep` CLI as a user runs it, real signals
for when to strike (the agent's progress file, the host's processes, fleet's own events), and
the accounting every fault test ends with (runs lost, duplicated, processes left on the hosts,
time to notice), one row each in the fault table (`benchmarks/fault_table.py` prints it).

Timing is never a bare sleep: an injection "mid-workload" waits for the agent's progress file to
show a server running a run, "during a pull" for the rsync sender on the host, and so on. The
progress file is read on the machine through the host's persistent directory (no SSH, no
`nsenter`), so the wait costs nothing to the host under test.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.host.agent.services import SERVICE_ENV_MARKER
from fleet.host.contract import ContractError, SweepDir, load_result
from fleet.inventory import load_inventory
from fleet.layout import model_cache_dir, model_serve_dir
from fleet.playbook import load_playbook
from fleet.provision.models import ModelState, staging_job
from tests.integration.waiting import kill_group, wait_for
from tests.testfleet.hosts import TestFleet

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
TABLE_ENV = "FLEET_FAULT_TABLE"
DEFAULT_TABLE = REPO / "results" / "faults" / "faults.jsonl"
HOST_WORK_DIR = "/var/lib/fleet"
# Command-line marks of what fleet starts on a host without its service marker in the environment
# (the marker is how fleet itself knows its servers; these cover the agent's own helpers too).
FLEET_COMMANDS = ("fleet.host.agent", "fleet.host.engines.sim", "rsync --server")


def fault_playbook(directory: Path, *, name: str = "faults", **changes: Any) -> Path:
    """demo.yaml with limits short enough that a hung or never-healthy server is given up in
    seconds (the sim's wall clock runs at `sim_speed`; the agent's limits do not scale)."""
    data = yaml.safe_load(DEMO.read_text())
    data["name"] = name
    data["limits"] = {"server_start_timeout_s": 10, "request_timeout_s": 10, "no_token_timeout_s": 3}
    for key, value in changes.items():
        if key in ("server", "limits") and isinstance(value, dict):  # settings: changed one by one
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = Path(directory) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ---------------------------------------------------------------------------------------------
# the controller, as a user runs it


@dataclass(frozen=True)
class Line:
    at: float  # time.time() when this process read it
    stream: str  # "stdout" (JSON events) or "stderr"
    text: str
    event: dict[str, Any] | None  # the parsed --json event of a stdout line

    def mentions(self, *words: str) -> bool:
        text = self.text.lower()
        return all(w.lower() in text for w in words)


class Controller:
    """`python -m fleet sweep --json ...` as a subprocess (its own process group), every line of
    its stdout and stderr kept with the time it arrived."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.args = args
        self.started = time.time()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fleet", "sweep", "--json", *args],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        self.lines: list[Line] = []
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(name,), daemon=True) for name in ("stdout", "stderr")]
        for reader in self._readers:
            reader.start()

    def _read(self, name: str) -> None:
        stream = getattr(self.process, name)
        for raw in iter(stream.readline, b""):
            text = raw.decode(errors="replace").rstrip("\n")
            event = None
            if name == "stdout":
                try:
                    event = json.loads(text)
                except ValueError:
                    event = None
            with self._changed:
                self.lines.append(Line(time.time(), name, text, event))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def events(self, type: str | None = None, host: str | None = None) -> list[dict[str, Any]]:
        with self._changed:
            found = [line.event for line in self.lines if line.event is not None]
        return [e for e in found if (type is None or e.get("type") == type) and (host is None or e.get("host") == host)]

    def first(self, predicate: Callable[[Line], bool], after: float = 0.0) -> Line | None:
        with self._changed:
            return next((line for line in self.lines if line.at >= after and predicate(line)), None)

    def wait_for(self, predicate: Callable[[Line], bool], timeout: float, what: str, after: float = 0.0) -> Line:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                line = next((line for line in self.lines if line.at >= after and predicate(line)), None)
                if line is not None:
                    return line
                if self.process.poll() is not None and not any(r.is_alive() for r in self._readers):
                    raise AssertionError(f"the controller exited ({self.process.returncode}) before {what}:\n{self.transcript()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out ({timeout:g}s) waiting for {what}:\n{self.transcript()}")
                self._changed.wait(0.2)

    def wait_event(self, type: str, timeout: float, host: str | None = None, **fields: Any) -> dict[str, Any]:
        def matches(line: Line) -> bool:
            e = line.event
            return e is not None and e.get("type") == type and (host is None or e.get("host") == host) and all(e.get(k) == v for k, v in fields.items())

        line = self.wait_for(matches, timeout, f"a {type} event {fields or ''} of {host or 'the sweep'}")
        assert line.event is not None
        return line.event

    def sweep_id(self, timeout: float = 120) -> str:
        return str(self.wait_event("started", timeout)["sweep_id"])

    def kill(self) -> None:
        """SIGKILL of the whole controller (its rsync and ssh children too): no cleanup at all."""
        kill_group(self.process.pid)  # every child gone too: one between fork and exec holds the sweep's lock
        self.process.wait(timeout=30)
        for reader in self._readers:
            reader.join(timeout=10)

    def wait(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the controller did not end within {timeout:g}s:\n{self.transcript()}") from None
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def summary(self) -> dict[str, Any] | None:
        found = self.events("summary")
        return found[-1] if found else None

    def stderr(self) -> str:
        with self._changed:
            return "\n".join(line.text for line in self.lines if line.stream == "stderr")

    def transcript(self, last: int = 60) -> str:
        with self._changed:
            return "\n".join(f"{line.at - self.started:7.2f} {line.stream}: {line.text}" for line in self.lines[-last:])


# ---------------------------------------------------------------------------------------------
# the scenario: hosts, inventory, results, and the signals to strike on


@dataclass
class Scenario:
    fleet: TestFleet
    root: Path  # the test's tmp_path
    sim_speed: float = 0.02
    inventory: dict[str, Any] = field(default_factory=dict)  # extra host-file fields
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.hosts_dir = self.fleet.write_inventory(self.root / "hosts", engine={"sim_speed": self.sim_speed}, **self.inventory)
        self.results = self.root / "results"
        self.results.mkdir(exist_ok=True)
        self.controllers: list[Controller] = []

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "FLEET_HOSTS_DIR": str(self.hosts_dir), "FLEET_RESULTS_DIR": str(self.results), "COLUMNS": "200", **self.extra_env}

    def sweep(self, playbook: Path, hosts: str, *extra: str, poll: float = 0.3) -> Controller:
        controller = Controller(["-p", str(playbook), "--hosts", hosts, "--poll", str(poll), *extra], self.env)
        self.controllers.append(controller)
        return controller

    def resume(self, sweep_id: str, poll: float = 0.3) -> Controller:
        controller = Controller(["--resume", sweep_id, "--poll", str(poll)], self.env)
        self.controllers.append(controller)
        return controller

    def close(self) -> None:
        for controller in self.controllers:
            if controller.process.poll() is None:
                controller.kill()

    # ------------------------------------------------------------------ what the hosts show

    def host_sweep_dir(self, host: str, sweep_id: str) -> Path:
        """The host's sweep directory, as the machine sees it (survives reboots)."""
        return self.fleet[host].persistent_path(f"{HOST_WORK_DIR}/sweeps/{sweep_id}")

    def progress(self, host: str, sweep_id: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.host_sweep_dir(host, sweep_id) / SweepDir.PROGRESS).read_text())
        except (OSError, ValueError):
            return None  # not written yet (or mid-rename: the next look sees it)

    def host_results(self, host: str, sweep_id: str) -> list[Path]:
        return sorted((self.host_sweep_dir(host, sweep_id) / SweepDir.RUNS).glob("*.json"))

    def wait_host(self, predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
        return wait_for(predicate, timeout, what, interval, detail=lambda: "\n".join(c.transcript(20) for c in self.controllers))

    def server_in(self, host: str, sweep_id: str, phase: str, *, with_run: bool = False) -> str | None:
        """The id of a server the agent reports in `phase` (running: with a run under way)."""
        progress = self.progress(host, sweep_id) or {}
        for server_id, server in (progress.get("servers") or {}).items():
            if server.get("phase") == phase and (not with_run or server.get("run")):
                return server_id
        return None

    def wait_server(self, host: str, sweep_id: str, phase: str, timeout: float = 60, *, with_run: bool = False) -> str:
        return self.wait_host(lambda: self.server_in(host, sweep_id, phase, with_run=with_run), timeout, f"{host}: a server {phase}")

    def server_pids(self, host: str, server_id: str) -> list[int]:
        """Machine pids of one server's engine process (the sim, not the agent's service wrapper)."""
        return [pid for pid, command in self.fleet.processes(host).items() if "fleet.host.engines.sim" in command and server_id in _environ(pid).get(SERVICE_ENV_MARKER, "")]

    def rsync_sender(self, host: str) -> bool:
        """A controller's pull is under way: rsync's sender runs on the host."""
        return bool(self.rsync_senders(host))

    def rsync_senders(self, host: str) -> list[int]:
        """Machine pids of rsync's senders on the host (a controller's pull under way)."""
        return [pid for pid, command in self.fleet.processes(host).items() if "rsync --server --sender" in command]

    def stop_a_pull(self, host: str) -> list[int]:
        """SIGSTOP rsync's senders on the host, and return those still senders once stopped: a
        pull held under way (empty: none ran, or each ended before the signal; look again)."""
        held = []
        for pid in self.rsync_senders(host):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                if pid in self.rsync_senders(host):  # stopped, so still the same process now
                    held.append(pid)
        return held

    @contextlib.contextmanager
    def stage_held(self, host: str, playbook: Path) -> Iterator[StageGate]:
        """Hold the playbook's target model's stage on `host` under way until the block ends.

        Fleet's stage job runs under `flock` of the model's lock in the fast dir, so that a second
        stage of the same model waits for the first (fleet.provision.models.DetachedJob): the test
        takes that lock first, as such a stage would, and fleet's stage job waits on it, polled,
        until the block ends or the host loses power (the lock lives in the host's /dev/shm). Call
        before the sweep starts; `StageGate.waiting` is the moment to strike."""
        target = next(h for h in load_inventory(self.hosts_dir) if h.name == host)
        model = load_playbook(playbook).model
        job = staging_job(ModelState(model_cache_dir(model, target), model_serve_dir(model, target), None, None), 0)
        root = Path(f"/proc/{self.fleet._record_of(self.fleet[host]).init_pid}/root")
        lock_path = root / job.lock.lstrip("/")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield StageGate(self, host, job.lock, root / job.log.lstrip("/"))


@dataclass(frozen=True)
class StageGate:
    scenario: Scenario
    host: str
    lock: str  # the lock's path on the host
    log: Path  # the stage job's log, as the machine sees it in that boot

    def waiting(self) -> bool:
        """Fleet's stage job was started (its log exists: the starting shell made it) and its
        `flock` waits on the held lock: the stage is under way, and cannot end before the test
        lets it. (Fleet's SSH call that started it may still be open.)"""
        return self.log.exists() and any(command.startswith(f"flock {self.lock} ") for command in self.scenario.fleet.processes(self.host).values())


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def fleet_processes(fleet: TestFleet, host: str) -> dict[int, str]:
    """What fleet started that still runs on a host: marked servers and services, the agent, the
    sim, a pull's rsync. Read inside the host's PID namespace (from the machine's /proc)."""
    if not fleet.is_up(host):
        return {}
    return {pid: command for pid, command in fleet.processes(host).items() if SERVICE_ENV_MARKER in _environ(pid) or any(mark in command for mark in FLEET_COMMANDS)}


def leftovers(fleet: TestFleet, hosts: Iterable[str], settle_s: float = 5.0) -> dict[str, dict[int, str]]:
    """Fleet's processes still on the hosts once the sweep ended. A process killed by the agent's
    last stop may take a moment to be reaped: looked at until `settle_s`, then counted."""
    deadline = time.monotonic() + settle_s
    while True:
        found = {host: procs for host in hosts if (procs := fleet_processes(fleet, host))}
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# accounting


@dataclass
class Accounting:
    planned: set[str]
    results: dict[str, list[str]]  # run id -> hosts whose folder holds a readable result of it
    unreadable: dict[str, str]  # file (relative to the sweep folder) -> why, as the summary names it
    not_run: dict[str, str]  # run id -> reason, as the summary reports runs that did not run
    extra: dict[str, dict[str, Any]]  # results beyond the plan (fixed variants), by run id
    statuses: dict[str, str]  # run id -> status
    bad_files: dict[str, str] = field(default_factory=dict)  # files on the controller that do not load, with why

    @property
    def lost(self) -> set[str]:
        """Planned runs with no result, not reported as not run, and not named as unreadable."""
        named = {Path(path).stem for path in self.unreadable}
        return self.planned - set(self.results) - set(self.not_run) - named

    @property
    def duplicated(self) -> dict[str, list[str]]:
        return {run_id: hosts for run_id, hosts in self.results.items() if len(hosts) > 1}

    def unknown_origin(self) -> list[str]:
        """Results beyond the plan that are not a fixed variant of a planned (or fixed) run that failed."""
        bad = []
        for run_id, result in self.extra.items():
            failed = (result.get("provenance") or {}).get("failed_run_id")
            if failed not in self.results:
                bad.append(run_id)
        return bad


def account(sweep_dir: Path, summary: dict[str, Any] | None) -> Accounting:
    """What a sweep brought back, against its plan (plan.json), from the files on the controller."""
    plan = json.loads((sweep_dir / "plan.json").read_text())
    planned = {run["id"] for run in plan["runs"]}
    results: dict[str, list[str]] = {}
    extra: dict[str, dict[str, Any]] = {}
    statuses: dict[str, str] = {}
    unreadable_files: dict[str, str] = {}
    named = dict((summary or {}).get("unreadable") or {})
    for path in sorted(sweep_dir.glob(f"*/{SweepDir.RUNS}/*.json")):
        host = path.parent.parent.name
        if str(path.relative_to(sweep_dir)) in named:
            continue  # set aside by fleet, and named: not a result (a host's forgery may well parse)
        try:
            result = load_result(path)
        except ContractError as exc:
            unreadable_files[str(path.relative_to(sweep_dir))] = str(exc)
            continue
        assert result.run_id == path.stem, f"{path}: holds run {result.run_id}"
        results.setdefault(result.run_id, []).append(host)
        statuses[result.run_id] = result.status.value
        if result.run_id not in planned:
            extra[result.run_id] = json.loads(path.read_text())
    summary = summary or {}
    unreadable = dict(summary.get("unreadable") or {})
    not_run = {str(k): str(v) for k, v in (summary.get("not_run") or {}).items()}
    # A file the controller cannot read counts as reported only where the summary names it
    # (`lost` leaves those out); one it cannot read and does not name is lost.
    return Accounting(planned, results, unreadable, not_run, extra, statuses, unreadable_files)


# ---------------------------------------------------------------------------------------------
# the table


@dataclass
class Row:
    fault: str
    phase: str
    injected: int
    lost: int
    duplicated: int
    leftover: int
    notice_s: float | None  # injection -> the first event or log line where fleet reports it
    noticed_by: str = ""  # that line, shortened
    test: str = ""
    outcome: str = ""  # how the sweep ended: its state and exit code
    at: float = field(default_factory=time.time)


def table_path() -> Path:
    return Path(os.environ.get(TABLE_ENV) or DEFAULT_TABLE)


def record(row: Row) -> Row:
    """Append the row to the fault table (JSON lines; appends of one line do not interleave)."""
    path = table_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(asdict(row), sort_keys=True) + "\n")
    return row


def notice(controller: Controller, injected_at: float, predicate: Callable[[Line], bool]) -> tuple[float | None, str]:
    line = controller.first(predicate, after=injected_at)
    if line is None:
        return None, ""
    return round(line.at - injected_at, 2), line.text[:160]


def stderr_mentions(*words: str) -> Callable[[Line], bool]:
    return lambda line: line.stream == "stderr" and line.mentions(*words)


def any_of(*predicates: Callable[[Line], bool]) -> Callable[[Line], bool]:
    return lambda line: any(p(line) for p in predicates)
