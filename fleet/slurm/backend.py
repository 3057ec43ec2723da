"""The Slurm backend: `--hosts <kind: slurm entry>` starts a sweep as job arrays on the cluster;
a sweep folder holding a Slurm record is resumed, cancelled, watched and its logs fetched by job
id through the cluster's login host. `fleet.backend` chooses it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.inventory import Host, HostKind
from fleet.slurm.record import is_slurm_sweep
from fleet.sweep.interface import Connect, SweepBackend, SweepRequest
from fleet.errors import UsageError

# `fleet.backend` imports every backend to ask which claims a sweep: what runs or watches a Slurm
# sweep loads in the method that uses it, so that `fleet fetch-logs` and `status` of an SSH sweep
# never load the Slurm planner (a third of a second; tests/unit/test_cli_imports.py).
if TYPE_CHECKING:
    from fleet.slurm.sweep import SlurmSweepOutcome
    from fleet.sweep.hoststatus import FetchedLogs, HostStatus


class SlurmBackend:
    name = "slurm"
    live_table = False  # no table of hosts for a cluster: its events are lines

    def claims_hosts(self, hosts: Sequence[Host]) -> bool:
        return any(h.kind is HostKind.slurm for h in hosts)

    def claims_sweep(self, directory: Path) -> bool:
        return is_slurm_sweep(directory)

    def start(self, playbook: Path, hosts: Sequence[Host], request: SweepRequest) -> SlurmSweepOutcome:
        from fleet.slurm.sweep import start_slurm_sweep

        cluster = next(h for h in hosts if h.kind is HostKind.slurm)
        if len(hosts) != 1:
            others = ", ".join(h.name for h in hosts if h is not cluster)
            raise UsageError(f"--hosts: a Slurm entry ({cluster.name}) runs a sweep alone, not beside {others}")
        return _watched(
            lambda stop: start_slurm_sweep(
                playbook,
                cluster,
                request.results_root,
                poll_interval_s=request.poll_interval_s,
                stop=stop,
                memory_check=request.memory_check,
                say=request.say,
                on_event=request.on_event,
                quarantine=request.quarantine,
            )  # fmt: skip
        )

    def resume(self, directory: Path, request: SweepRequest) -> SlurmSweepOutcome:
        from fleet.slurm.sweep import resume_slurm_sweep

        return _watched(
            lambda stop: resume_slurm_sweep(
                directory,
                poll_interval_s=request.poll_interval_s,
                stop=stop,
                say=request.say,
                on_event=request.on_event,
                quarantine=request.quarantine,
            )  # fmt: skip
        )

    def cancel(self, directory: Path) -> str:
        from fleet.slurm.sweep import cancel_slurm_sweep

        return f"scancel {' '.join(cancel_slurm_sweep(directory))}"

    def status(self, directory: Path, *, connect: Connect) -> dict[str, HostStatus]:
        from fleet.slurm.observe import slurm_status

        return slurm_status(directory, connect=connect)

    def fetch_logs(self, directory: Path, host_names: Sequence[str] | None, *, connect: Connect, hosts_dir: Path | None) -> dict[str, FetchedLogs]:
        from fleet.slurm.observe import fetch_slurm_logs

        return fetch_slurm_logs(directory, host_names, connect=connect)


def _watched(run: Callable[[threading.Event], SlurmSweepOutcome]) -> SlurmSweepOutcome:
    """`run` in a thread of its own, so that Ctrl-C only stops the watching: the jobs are Slurm's,
    and go on (the outcome says `interrupted`)."""
    stop = threading.Event()
    box: list[SlurmSweepOutcome] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(run(stop))
        except BaseException as exc:  # handed to the main thread, which raises it
            errors.append(exc)

    worker = threading.Thread(target=target, name="fleet-slurm-sweep", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.5)
    except KeyboardInterrupt:
        stop.set()
        worker.join()
    if errors:
        raise errors[0]
    return box[0]


BACKEND: SweepBackend = SlurmBackend()
