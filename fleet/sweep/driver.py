"""The sweep loop of one host: ship, start, watch, recover, repair, until its share is done.

The agent does the work on the host, detached from SSH; the loop talks to it only through the
`AgentChannel` (short, bounded calls) and decides what to do about what it sees:
- a new boot id means the host rebooted: re-provision (the model is re-staged from the cache),
  ship again and restart the agent, which skips the runs already finished;
- an agent that died is restarted, up to `MAX_AGENT_RESTARTS` times;
- results pulled back are reviewed by the sweep's fixer (`review`); when the agent has finished,
  a repair round (`repair_round`) extends the shard with fixed variants and starts it again;
- the stop event detaches the loop, leaving the agent working.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.errors import FleetError, TransportError
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import AgentState, ContractError, Progress, SweepDir, load_result
from fleet.host.contract.progress import DONE_STATUSES
from fleet.host.contract.shard import Shard
from fleet.inventory import Host
from fleet.playbook import Playbook
from fleet.provision.provision import ProvisionOptions, provision_host
from fleet.retry import WAIT_FOR_REBOOT, retrying
from fleet.sweep.channel import AgentChannel, Poll
from fleet.sweep.fixing import SweepFixer
from fleet.transport.base import Transport

if TYPE_CHECKING:  # events.py builds on this module's HostStatus
    from fleet.sweep.events import SweepProgress

log = logging.getLogger("fleet.sweep")

MAX_AGENT_RESTARTS = 5


class Phase(str, Enum):
    """Where one host of a sweep stands, as the live display and `fleet status` show it."""

    WAITING = "waiting"  # not started by this controller yet
    SHIPPING = "shipping"  # agent code, shard and units going to the host
    RUNNING = "running"  # the agent works
    UNREACHABLE = "unreachable"  # the last poll failed; the agent may well work on
    RECOVERING = "recovering"  # the host rebooted: re-provisioning and restarting the agent
    REPAIRING = "repairing"  # a repair round: fixed variants shipped, the agent started again
    FINISHED = "finished"  # every run of the share has a result (ok or not)
    STOPPED = "stopped"  # someone stopped the agent on purpose (a STOP file, SIGTERM)
    FAILED = "failed"  # the controller gave up on this host; `last_error` says why
    DETACHED = "detached"  # the controller left (Ctrl-C); the agent works on
    # Seen by a single poll (`fleet status`), with no controller to act on it:
    AGENT_DOWN = "agent down"  # progress says running, but the agent is gone (a resume restarts it)
    NOT_STARTED = "not started"  # no progress file yet

    def __str__(self) -> str:
        return self.value


# The agent's end states and the phase each ends in (the counts tell finished with errors apart).
_AGENT_END_STATES = {AgentState.finished: Phase.FINISHED, AgentState.finished_with_errors: Phase.FINISHED, AgentState.stopped: Phase.STOPPED}


@dataclass
class HostStatus:
    """What the live display and `fleet status` show for one host."""

    host: str
    phase: Phase = Phase.WAITING
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
        return sum(self.counts.get(k, 0) for k in DONE_STATUSES)  # not_comparable too: it has its result

    def absorb(self, progress: Progress | None) -> None:
        """The agent's progress file into this status."""
        if progress is None:
            return
        self.counts = dict(progress.counts)
        self.total = progress.total
        self.servers = {server_id: server.to_json() for server_id, server in progress.servers.items()}
        error = progress.last_error
        if error is not None:
            self.last_error = f"{error.server}: {error.error_class}: {error.message[:200]}"
        self.updated = time.time()


def phase_of(poll: Poll) -> Phase:
    """What one poll says of a host, with nobody acting on it (`fleet status`)."""
    if poll.agent_alive:
        return Phase.RUNNING
    if poll.progress is None:
        return Phase.NOT_STARTED
    return _AGENT_END_STATES.get(poll.progress.state, Phase.AGENT_DOWN)


@dataclass(frozen=True)
class SweepContext:
    """What the loops of every host of one sweep share (one per `fleet sweep` or resume)."""

    directory: Path  # results/<sweep-id>/ on the controller
    playbook: Playbook
    provision_options: ProvisionOptions  # for re-provisioning after a reboot
    bundle_dir: Path  # the agent bundle shipped to every host
    poll_interval_s: float = 2.0
    stop: threading.Event = field(default_factory=threading.Event)
    fixer: SweepFixer | None = None
    sleep: Callable[[float], None] = time.sleep  # retry back-off; tests pass a no-op
    progress: SweepProgress | None = None  # events with elapsed time and ETA, for the display

    @property
    def sweep_id(self) -> str:
        return self.directory.name


class HostDriver:
    """The loop of one host. `drive()` returns when the share is done, failed or detached."""

    def __init__(self, ctx: SweepContext, host: Host, shard: Shard, transport: Transport) -> None:
        self.ctx = ctx
        self.host = host
        self.shard = shard
        self.status = HostStatus(host.name, total=len(shard.runs))
        self.channel = AgentChannel(host, ctx.sweep_id, transport, sleep=ctx.sleep, on_link_drop=self._link_dropped)
        self.local_dir = ctx.directory / host.name
        self._reviewed: set[str] = set()
        self._pushed_quarantine: dict[str, str] = {}

    def _link_dropped(self) -> None:
        self.status.link_drops += 1

    def _observe(self) -> None:
        """Let the progress display see this host's status after a step (it emits what changed)."""
        if self.ctx.progress is not None:
            self.ctx.progress.observe(self.status, self.shard, self.local_dir)

    # ------------------------------------------------------------------------------ the loop

    def drive(self) -> HostStatus:
        try:
            self.start()
            self.watch()
        except FleetError as exc:
            self.status.phase = Phase.FAILED
            self.status.last_error = str(exc)
            log.error("%s: %s", self.host.name, exc)
        self._observe()
        return self.status

    def start(self) -> None:
        """Ship, recover first if the host rebooted while no controller watched, start the agent."""
        self.status.phase = Phase.SHIPPING
        self._observe()
        self.ship()
        state = self.channel.poll()
        self.status.boot_id = state.boot_id
        agent_boot = state.progress.boot_id if state.progress is not None else ""
        if agent_boot and agent_boot != state.boot_id and not state.agent_alive:
            self.recover_from_reboot()
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        self._observe()

    def watch(self) -> None:
        pulled_files = -1
        while not self.ctx.stop.is_set():
            try:
                state = self.channel.poll()
            except TransportError as exc:
                self.status.phase = Phase.UNREACHABLE
                self.status.last_error = f"unreachable: {exc}"
                self._observe()
                self.ctx.stop.wait(self.ctx.poll_interval_s)
                continue
            self.status.phase = Phase.RUNNING
            if self.status.boot_id and state.boot_id and state.boot_id != self.status.boot_id:
                self.status.boot_id = state.boot_id
                self.recover_from_reboot()
                self.ship()
                self.channel.start_agent()
                self.status.phase = Phase.RUNNING
                self._observe()
                continue
            self.status.boot_id = state.boot_id or self.status.boot_id
            self.status.absorb(state.progress)
            if state.result_files != pulled_files:
                self.pull()
                pulled_files = state.result_files
            self.review()
            agent_state = state.progress.state if state.progress is not None else None
            ended = _AGENT_END_STATES.get(agent_state) if agent_state is not None else None
            if ended is not None and not state.agent_alive:
                self.pull()
                self.review()
                if ended is Phase.FINISHED and self.repair_round():
                    pulled_files = -1
                    self._observe()
                    continue
                # STOPPED: someone stopped it on purpose (a STOP file, SIGTERM): not a crash to undo.
                self.status.phase = ended
                self._observe()
                return
            if not state.agent_alive and state.progress is not None:
                self.restart_agent(agent_state)
            self._observe()
            self.ctx.stop.wait(self.ctx.poll_interval_s)
        self.status.phase = Phase.DETACHED
        self._observe()

    # ------------------------------------------------------------------------------ steps

    def ship(self) -> None:
        """Idempotent; the phase stays what the step that ships says (shipping, recovering, repairing)."""
        facts = self.ctx.directory / "hosts" / f"{self.host.name}.facts.json"
        self.channel.ship(self.ctx.bundle_dir, self.shard, facts)

    def pull(self) -> None:
        self.status.pulled = self.channel.pull(self.local_dir)

    def review(self) -> None:
        """Hand the results pulled since the last review to the fixer; push a changed quarantine."""
        fixer = self.ctx.fixer
        if fixer is None:
            return
        fresh = []
        for path in sorted((self.local_dir / SweepDir.RUNS).glob("*.json")):
            if path.stem in self._reviewed:
                continue
            self._reviewed.add(path.stem)  # rsync renames complete files into place: read once
            try:
                fresh.append(load_result(path))
            except ContractError as exc:
                # Not repaired, and said so: a result this controller cannot read is never guessed at.
                self.status.last_error = str(exc)
                log.error("%s: %s", self.host.name, exc)
        fixer.consider(self.host.name, fresh)
        wanted = fixer.quarantine_for(self.host.name)
        if wanted != self._pushed_quarantine:
            self.channel.push_quarantine(wanted)
            self._pushed_quarantine = wanted

    def repair_round(self) -> bool:
        """Fixed variants of this host's failed runs: extend the shard, ship it, start the agent.
        False when there is nothing to repair (the share is finished)."""
        fixer = self.ctx.fixer
        if fixer is None:
            return False
        extended = fixer.next_round(self.host.name, self.shard)
        if extended is None:
            return False
        self.status.phase = Phase.REPAIRING
        log.info("%s: repair round: %d runs added", self.host.name, len(extended.runs) - len(self.shard.runs))
        self.shard = extended
        self.status.total = len(extended.runs)
        write_json_atomic(self.local_dir / SweepDir.SHARD, json.loads(extended.to_json()))
        self.ship()
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        return True

    def recover_from_reboot(self) -> None:
        """The host rebooted: its fast dir is empty and the agent is gone. Stage again."""
        self.status.phase = Phase.RECOVERING
        self.status.reboots += 1
        log.warning("%s: rebooted (boot id %s); re-staging and restarting the agent", self.host.name, self.status.boot_id)
        report = retrying(
            WAIT_FOR_REBOOT,
            self.host.name,
            lambda: provision_host(self.host, self.ctx.playbook, self.ctx.provision_options, transport=self.channel.transport),
            idempotent=True,
            sleep=self.ctx.sleep,
        )
        if report.status == "failed":
            raise FleetError(f"{self.host.name}: after a reboot: {report.reason}")

    def restart_agent(self, agent_state: object) -> None:
        if self.status.agent_restarts >= MAX_AGENT_RESTARTS:
            raise FleetError(f"{self.host.name}: the agent stopped ({agent_state}) {self.status.agent_restarts} times; giving up")
        self.status.agent_restarts += 1
        log.warning("%s: agent not running (state %s); restarting it", self.host.name, agent_state)
        self.channel.start_agent()


def drive_all(drivers: Sequence[HostDriver]) -> list[threading.Thread]:
    threads = [threading.Thread(target=d.drive, name=f"fleet-sweep-{d.host.name}", daemon=True) for d in drivers]
    for thread in threads:
        thread.start()
    return threads
