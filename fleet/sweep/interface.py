"""What a sweep backend is: the interface SSH hosts (`fleet.sweep.backend`) and Slurm clusters
(`fleet.slurm.backend`) implement, and the types that cross it. `fleet.backend` chooses one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from fleet.fixes.quarantine import QuarantineStore
    from fleet.inventory import Host
    from fleet.provision.provision import HostReport
    from fleet.sweep.events import EventSink
    from fleet.sweep.hoststatus import FetchedLogs, HostStatus
    from fleet.sweep.lock import SweepLock
    from fleet.transport.base import Transport


# What a sweep's end tells its user, line by line: `result` lines are where the data is and what
# to do next (stdout, or stderr under --json), `fix` lines what fleet changed, `problem` lines what
# went wrong (both stderr, coloured), `said` lines plain on stderr, beside what the backend said
# while it worked (Slurm's submissions).
LineKind = Literal["result", "fix", "problem", "said"]


@dataclass(frozen=True)
class ClosingLine:
    kind: LineKind
    text: str


class SweepOutcome(Protocol):
    @property
    def sweep_id(self) -> str: ...
    @property
    def directory(self) -> Path: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def exit_code(self) -> int:
        """0 only for a sweep whose every planned run has a readable result and none failed;
        130 for a sweep left running after Ctrl-C; else 1."""
        ...

    def closing_lines(self) -> list[ClosingLine]: ...


Connect = Callable[["Host"], "Transport"]


@dataclass(frozen=True)
class SweepRequest:
    """How the command was asked to run the sweep: everything but the playbook and hosts."""

    results_root: Path
    poll_interval_s: float = 2.0
    memory_check: bool = True
    quarantine: QuarantineStore | None = None
    environ: Mapping[str, str] = field(default_factory=dict)  # secrets for the hosts' model fetch
    on_event: EventSink | None = None  # the sweep's progress events, in order
    say: Callable[[str], None] = lambda line: None  # one line for the user, as it happens
    watch: Callable[[dict[str, HostStatus]], None] | None = None  # a live table, where the backend draws one
    on_provisioned: Callable[[list[HostReport]], None] | None = None
    host_lost_after_s: float | None = None
    allow_unplaceable: bool = False
    hosts_dir: Path | None = None  # the inventory, for hosts given another address since the start
    lock: SweepLock | None = None  # the sweep folder's lock, held by the command


class SweepBackend(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def live_table(self) -> bool:
        """Whether its progress is drawn as a table of hosts (else as event lines)."""
        ...

    def claims_hosts(self, hosts: Sequence[Host]) -> bool: ...
    def claims_sweep(self, directory: Path) -> bool: ...

    def start(self, playbook: Path, hosts: Sequence[Host], request: SweepRequest) -> SweepOutcome:
        """Raises ConfigError or UsageError (exit 2) before anything starts, FleetError after."""
        ...

    def resume(self, directory: Path, request: SweepRequest) -> SweepOutcome: ...
    def cancel(self, directory: Path) -> str:
        """Stops the sweep where it runs; returns one line saying what was stopped."""
        ...

    def status(self, directory: Path, *, connect: Connect) -> dict[str, HostStatus]: ...
    def fetch_logs(self, directory: Path, host_names: Sequence[str] | None, *, connect: Connect, hosts_dir: Path | None) -> dict[str, FetchedLogs]: ...
