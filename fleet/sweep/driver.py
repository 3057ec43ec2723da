"""One host of a sweep, seen from the controller: ship, start, watch, recover, bring results back.

The agent does the work on the host, detached from SSH; this driver only makes short, bounded
calls. A dropped link is retried under the transport's policies while the agent works on. A new
boot id means the host rebooted: the driver re-stages the model from the cache and restarts the
agent, which skips the runs already finished and redoes only the one that was interrupted.
"""

from __future__ import annotations

import json
import logging
import posixpath
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.errors import FleetError, TransportError
from fleet.host.agent import AGENT_MODULE
from fleet.host.agent.results import write_json_atomic
from fleet.host.agent.shard import Shard
from fleet.inventory import Host, ServiceManager
from fleet.layout import agent_dir, sweep_dir
from fleet.playbook import Playbook
from fleet.provision.provision import ProvisionOptions, provision_host
from fleet.provision.units import render_server_unit, server_unit_name
from fleet.retry import CONNECT, TRANSFER, WAIT_FOR_REBOOT, at_most_once, retrying
from fleet.sweep.fixing import SweepFixer
from fleet.transport.base import BOOT_ID_PATH, Transport

log = logging.getLogger("fleet.sweep")

SEPARATOR = "--fleet--"
QUICK_S = 15.0
MAX_AGENT_RESTARTS = 5
# Host-side bookkeeping that means nothing on the controller, and the agent's atomic-write temp
# files (`.<name>.<random>.tmp`), which vanish under rsync's feet (its exit 24).
PULL_EXCLUDES = ("attempts/", "services/", "*.lock", "STOP", ".*.tmp")
# rsync's "some source files vanished": a log rotated or a temp file renamed mid-pull; the next pull gets them.
RSYNC_VANISHED = 24


@dataclass
class HostStatus:
    """What the live display and `fleet status` show for one host."""

    host: str
    phase: str = "waiting"  # waiting | shipping | running | recovering | finished | failed | detached
    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    servers: dict[str, Any] = field(default_factory=dict)
    boot_id: str = ""
    reboots: int = 0
    link_drops: int = 0
    agent_restarts: int = 0
    last_error: str = ""
    pulled: int = 0
    updated: float = field(default_factory=time.time)

    @property
    def done(self) -> int:
        return sum(self.counts.get(k, 0) for k in ("ok", "partial", "failed", "skipped"))


@dataclass(frozen=True)
class Poll:
    progress: dict[str, Any]
    boot_id: str
    agent_alive: bool
    result_files: int


def agent_service_name(sweep_id: str) -> str:
    return f"fleet-agent-{sweep_id}"


def parse_poll(stdout: str) -> Poll:
    """The agent's service status first, then the boot id, the progress file and the result files.

    Status comes first on purpose: an agent that exits between the two reads is seen as exited
    with its final progress, never as "running" in its progress yet gone.
    """
    parts = stdout.split(SEPARATOR + "\n")
    parts += [""] * (4 - len(parts))
    status_text, boot_id, progress_text, listing = parts[:4]
    try:
        alive = json.loads(status_text).get("state") == "running" if status_text.strip() else False
    except ValueError:
        alive = False
    try:
        progress = json.loads(progress_text) if progress_text.strip() else {}
    except ValueError:
        progress = {}  # written by atomic rename, so only a hand edit gets here
    return Poll(progress if isinstance(progress, dict) else {}, boot_id.strip(), alive, len(listing.split()))


class HostDriver:
    def __init__(
        self,
        host: Host,
        shard: Shard,
        playbook: Playbook,
        results_dir: Path,
        bundle_dir: Path,
        transport: Transport,
        *,
        poll_interval_s: float = 2.0,
        provision_options: ProvisionOptions | None = None,
        stop: threading.Event | None = None,
        fixer: SweepFixer | None = None,
    ) -> None:
        self.host = host
        self.shard = shard
        self.playbook = playbook
        self.results_dir = results_dir
        self.bundle_dir = bundle_dir
        self.t = transport
        self.poll_interval_s = poll_interval_s
        self.provision_options = provision_options or ProvisionOptions()
        self.stop = stop or threading.Event()
        self.remote_dir = sweep_dir(host, shard.sweep_id)
        self.status = HostStatus(host.name, total=len(shard.runs))
        self.fixer = fixer
        self._considered: set[str] = set()
        self._pushed_quarantine: dict[str, str] = {}

    # ------------------------------------------------------------------------------ helpers

    def _retry(self, fn: Callable[[], Any], policy=CONNECT) -> Any:
        """An idempotent call under a retry policy; a call that needed retries counts as a link drop."""
        hiccups = 0

        def attempt() -> Any:
            nonlocal hiccups
            try:
                return fn()
            except TransportError as exc:
                hiccups += exc.transient
                raise

        try:
            return retrying(policy, self.host.name, attempt, idempotent=True)
        finally:
            if hiccups:
                self.status.link_drops += 1

    def _agent_cli(self, *args: str) -> list[str]:
        return ["env", f"PYTHONPATH={agent_dir(self.host)}", self.host.engine.python, "-m", AGENT_MODULE, *args]

    def _service_args(self) -> list[str]:
        name = agent_service_name(self.shard.sweep_id)
        if self.host.service_manager is ServiceManager.systemd:
            return [f"fleet-agent@{self.shard.sweep_id}", "--manager", "systemd"]
        return [name, "--manager", "process", "--state-dir", posixpath.join(self.remote_dir, "services")]

    # ------------------------------------------------------------------------------ steps

    def ship(self) -> None:
        """Agent code, shard and (under systemd) the server units. Idempotent: safe after a drop."""
        self.status.phase = "shipping"
        self._retry(lambda: self.t.run(["mkdir", "-p", posixpath.join(self.remote_dir, "runs")], timeout=QUICK_S, check=True))
        self._retry(lambda: self.t.rsync_push(self.bundle_dir, agent_dir(self.host) + "/", timeout=300, delete=True).check(), TRANSFER)
        self._retry(lambda: self.t.put_bytes(self.shard.to_json().encode(), posixpath.join(self.remote_dir, "shard.json"), timeout=60))
        facts = self.results_dir / "hosts" / f"{self.host.name}.facts.json"
        if facts.exists():
            self._retry(lambda: self.t.put(facts, posixpath.join(self.remote_dir, "host_facts.json"), timeout=60))
        if self.host.service_manager is ServiceManager.systemd:
            self._install_server_units()

    def _install_server_units(self) -> None:
        for server in self.shard.servers:
            unit = render_server_unit(
                sweep_id=self.shard.sweep_id,
                server_id=server.server_id,
                label=server.label,
                argv=server.argv,
                # FLEET_SERVICE marks the processes as fleet's own: a later agent may clear them as stale.
                env={**{k: v for k, v in server.env.items() if k != "CUDA_VISIBLE_DEVICES"}, "FLEET_SERVICE": server.unit_name},
                gpus=server.gpus,
                working_dir=self.remote_dir,
                log_file=posixpath.join(self.remote_dir, "logs", f"{server.label}.log"),
                start_timeout_s=self.shard.limits.server_start_timeout_s,
            )
            assert unit.name == server_unit_name(self.shard.sweep_id, server.server_id)
            self._retry(lambda unit=unit: self.t.put_bytes(unit.text.encode(), unit.path, timeout=60))
        self._retry(lambda: self.t.run(["systemctl", "daemon-reload"], timeout=60, check=True))

    def poll(self) -> Poll:
        progress = shlex.quote(posixpath.join(self.remote_dir, "progress.json"))
        status = shlex.join(self._agent_cli("service", "status", *self._service_args()))
        runs = shlex.quote(posixpath.join(self.remote_dir, "runs"))
        command = (
            f"{status} 2>/dev/null; echo; echo {SEPARATOR}; cat {BOOT_ID_PATH}; echo {SEPARATOR}; "
            f"cat {progress} 2>/dev/null; echo; echo {SEPARATOR}; ls {runs} 2>/dev/null | grep '[.]json$' || true"
        )
        return parse_poll(self._retry(lambda: self.t.run(command, timeout=QUICK_S)).stdout)

    def start_agent(self) -> None:
        """Start the agent unless it already runs (checked first: a start is not blindly repeated)."""
        log_file = posixpath.join(self.remote_dir, "agent.log")
        argv = [self.host.engine.python, "-m", AGENT_MODULE, "run", "--sweep-dir", self.remote_dir]
        if self.host.service_manager is ServiceManager.systemd:
            start = self._agent_cli("service", "start", *self._service_args())
        else:
            start = self._agent_cli(
                "service", "start", *self._service_args(), "--log", log_file, "--cwd", self.remote_dir,
                "--env", f"PYTHONPATH={agent_dir(self.host)}", "--", *argv,
            )  # fmt: skip

        def running() -> bool | None:
            return True if self.poll().agent_alive else None

        def action() -> bool:
            self.t.run(start, timeout=60, check=True)
            return True

        at_most_once(CONNECT, self.host.name, action, running)

    def pull(self) -> None:
        """Results, logs and progress of this host's share into results/<sweep>/<host>/ (incremental)."""
        local = self.results_dir / self.host.name
        local.mkdir(parents=True, exist_ok=True)
        def pull_once() -> None:
            result = self.t.rsync_pull(self.remote_dir + "/", local, timeout=600, excludes=PULL_EXCLUDES)
            if result.exit_code != RSYNC_VANISHED:
                result.check()

        self._retry(pull_once, TRANSFER)
        self.status.pulled = len(list((local / "runs").glob("*.json")))
        if self.fixer is not None:
            fresh = []
            for path in sorted((local / "runs").glob("*.json")):
                if path.stem not in self._considered:
                    self._considered.add(path.stem)
                    try:
                        fresh.append(json.loads(path.read_text()))
                    except (OSError, ValueError):
                        self._considered.discard(path.stem)  # mid-rsync: read it next time
            self.fixer.consider(self.host.name, fresh)

    def push_quarantine(self) -> None:
        """Servers of this host that a quarantine found elsewhere now covers: the agent skips them."""
        if self.fixer is None:
            return
        wanted = self.fixer.quarantine_for(self.host.name)
        if wanted != self._pushed_quarantine:
            data = json.dumps(wanted, indent=1, sort_keys=True).encode()
            self._retry(lambda: self.t.put_bytes(data, posixpath.join(self.remote_dir, "quarantine.json"), timeout=60))
            self._pushed_quarantine = wanted

    def next_round(self) -> bool:
        """Variants that fix this host's failed runs: extend the shard and start the agent again."""
        if self.fixer is None:
            return False
        extended = self.fixer.next_round(self.host.name, self.shard)
        if extended is None:
            return False
        self.shard = extended
        self.status.total = len(extended.runs)
        write_json_atomic(self.results_dir / self.host.name / "shard.json", json.loads(extended.to_json()))
        self.ship()
        self.start_agent()
        self.status.phase = "running"
        return True

    def recover_from_reboot(self) -> None:
        """The host rebooted: its fast dir is empty and the agent is gone. Stage again, restart."""
        self.status.phase = "recovering"
        self.status.reboots += 1
        log.warning("%s: rebooted (boot id %s); re-staging and restarting the agent", self.host.name, self.status.boot_id)
        report = retrying(
            WAIT_FOR_REBOOT,
            self.host.name,
            lambda: provision_host(self.host, self.playbook, self.provision_options, transport=self.t),
            idempotent=True,
        )
        if report.status == "failed":
            raise FleetError(f"{self.host.name}: after a reboot: {report.reason}")

    # ------------------------------------------------------------------------------ main loop

    def drive(self) -> HostStatus:
        try:
            self.ship()
            state = self.poll()
            self.status.boot_id = state.boot_id
            agent_boot = state.progress.get("boot_id")
            if agent_boot and agent_boot != state.boot_id and not state.agent_alive:
                # The host rebooted while no controller watched (a resume): stage before restarting.
                self.recover_from_reboot()
            self.start_agent()
            self.status.phase = "running"
            self._watch()
        except FleetError as exc:
            self.status.phase = "failed"
            self.status.last_error = str(exc)
            log.error("%s: %s", self.host.name, exc)
        return self.status

    def _watch(self) -> None:
        pulled_files = -1
        while True:
            if self.stop.is_set():
                self.status.phase = "detached"
                return
            try:
                state = self.poll()
            except TransportError as exc:
                self.status.last_error = f"unreachable: {exc}"
                time.sleep(self.poll_interval_s)
                continue
            if self.status.boot_id and state.boot_id and state.boot_id != self.status.boot_id:
                self.status.boot_id = state.boot_id
                self.recover_from_reboot()
                self.ship()
                self.start_agent()
                self.status.phase = "running"
                continue
            self.status.boot_id = state.boot_id or self.status.boot_id
            self.absorb(state.progress)
            if state.result_files != pulled_files:
                self.pull()
                pulled_files = state.result_files
            self.push_quarantine()
            agent_state = state.progress.get("state")
            if agent_state in ("finished", "finished_with_errors") and not state.agent_alive:
                self.pull()
                if self.next_round():
                    pulled_files = -1
                    continue
                self.status.phase = "finished"
                return
            if agent_state == "stopped" and not state.agent_alive:
                # Someone stopped it on purpose (a STOP file, SIGTERM): not a crash to undo.
                self.pull()
                self.status.phase = "stopped"
                return
            if not state.agent_alive and state.progress:
                self._restart_agent(agent_state)
            time.sleep(self.poll_interval_s)

    def absorb(self, progress: dict[str, Any]) -> None:
        if not progress:
            return
        self.status.counts = dict(progress.get("counts", {}))
        self.status.total = int(progress.get("total", self.status.total))
        self.status.servers = dict(progress.get("servers", {}))
        error = progress.get("last_error")
        if error:
            self.status.last_error = f"{error.get('server')}: {error.get('class')}: {str(error.get('message'))[:200]}"
        self.status.updated = time.time()

    def _restart_agent(self, agent_state: str | None) -> None:
        if self.status.agent_restarts >= MAX_AGENT_RESTARTS:
            raise FleetError(f"{self.host.name}: the agent stopped ({agent_state}) {self.status.agent_restarts} times; giving up")
        self.status.agent_restarts += 1
        log.warning("%s: agent not running (state %s); restarting it", self.host.name, agent_state)
        self.start_agent()


def drive_all(drivers: Sequence[HostDriver]) -> list[threading.Thread]:
    threads = [threading.Thread(target=d.drive, name=f"fleet-sweep-{d.host.name}", daemon=True) for d in drivers]
    for thread in threads:
        thread.start()
    return threads

