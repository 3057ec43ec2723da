"""The SSH backend: a sweep on hosts fleet reaches over SSH (and `local`), each running its own
agent (fleet.sweep.controller, .driver, .channel); `fleet.backend` chooses it for every host and
sweep folder no other backend claims."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.inventory import Host
from fleet.sweep.interface import Connect, SweepBackend, SweepRequest
from fleet.errors import UsageError

# Each method loads what it runs: `fleet status` and `fetch-logs` never load the controller and
# the planner behind it (tests/unit/test_cli_imports.py).
if TYPE_CHECKING:
    from fleet.sweep.controller import SweepOutcome
    from fleet.sweep.hoststatus import FetchedLogs, HostStatus


class SSHBackend:
    name = "ssh"
    live_table = True

    def claims_hosts(self, hosts: Sequence[Host]) -> bool:
        return True

    def claims_sweep(self, directory: Path) -> bool:
        return True

    def start(self, playbook: Path, hosts: Sequence[Host], request: SweepRequest) -> SweepOutcome:
        from fleet.sweep import controller

        return controller.start_sweep(
            playbook, hosts, request.results_root, on_provisioned=request.on_provisioned, watch=request.watch,
            poll_interval_s=request.poll_interval_s, memory_check=request.memory_check, quarantine=request.quarantine,
            environ=request.environ, on_event=request.on_event, host_lost_after_s=request.host_lost_after_s,
            allow_unplaceable=request.allow_unplaceable,
        )  # fmt: skip

    def resume(self, directory: Path, request: SweepRequest) -> SweepOutcome:
        from fleet.sweep import controller

        return controller.resume_sweep(
            directory.name, directory.parent, watch=request.watch, poll_interval_s=request.poll_interval_s, environ=request.environ,
            on_event=request.on_event, host_lost_after_s=request.host_lost_after_s, hosts_dir=request.hosts_dir, lock=request.lock,
        )  # fmt: skip

    def cancel(self, directory: Path) -> str:
        raise UsageError(f"--cancel: {directory} is not a Slurm sweep (SSH sweeps stop with their agents' STOP file)")

    def status(self, directory: Path, *, connect: Connect) -> dict[str, HostStatus]:
        from fleet.sweep import status

        return status.sweep_status(directory.parent, directory.name, connect=connect)

    def fetch_logs(self, directory: Path, host_names: Sequence[str] | None, *, connect: Connect, hosts_dir: Path | None) -> dict[str, FetchedLogs]:
        from fleet.sweep import logs

        return logs.fetch_logs(directory.parent, directory.name, host_names, connect=connect, hosts_dir=hosts_dir)


BACKEND: SweepBackend = SSHBackend()
