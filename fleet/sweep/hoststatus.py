"""Where one host of a sweep stands (`Phase`, `HostStatus`): what the sweep loop keeps, the live
display draws and `fleet status` prints; and what `fleet fetch-logs` brought back from it
(`FetchedLogs`). Apart from the loop so that `fleet status` and `fetch-logs` read them without
importing the planner, provisioning and the fixes, and shared by the SSH and Slurm paths of both
commands (fleet.sweep.status, fleet.sweep.logs, fleet.slurm.observe)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from fleet.host.contract import AgentState, Progress
from fleet.host.contract.progress import DONE_STATUSES
from fleet.sweep.channel import Poll


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
    LOST = "lost"  # unreachable past the sweep's deadline: given up for good, its runs moved
    DETACHED = "detached"  # the controller left (Ctrl-C); the agent works on
    # Seen by a single poll (`fleet status`), with no controller to act on it:
    AGENT_DOWN = "agent down"  # progress says running, but the agent is gone (a resume restarts it)
    NOT_STARTED = "not started"  # no progress file yet

    def __str__(self) -> str:
        return self.value


# The agent's end states and the phase each ends in (the counts tell finished with errors apart).
AGENT_END_STATES = {
    AgentState.finished: Phase.FINISHED,
    AgentState.finished_with_errors: Phase.FINISHED,
    AgentState.stopped: Phase.STOPPED,
    AgentState.halted: Phase.FAILED,  # it cannot write its results: `last_error` says why
}


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
    return AGENT_END_STATES.get(poll.progress.state, Phase.AGENT_DOWN)


@dataclass(frozen=True)
class FetchedLogs:
    """What `fleet fetch-logs` brought back from one host (or one Slurm cluster)."""

    host: str
    directory: Path
    files: int
    journal_units: int
    note: str = ""
