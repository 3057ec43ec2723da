"""The sweep-backend seam: how a sweep is started, resumed, cancelled, watched and its logs
fetched, whatever runs it. SSH hosts (`fleet.sweep.backend`) and Slurm clusters
(`fleet.slurm.backend`) implement `SweepBackend` (fleet/sweep/interface.py); `fleet/cli.py`
chooses one here -- from the chosen hosts' inventory entries for a start, from the sweep's own
folder for everything after -- and calls it. No module below the backends imports one.

Adding a backend is adding its package, with a module that defines `BACKEND`, and one line in
BACKENDS (tests/unit/test_backend_seam.py drives a skeleton backend that way).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.sweep.interface import Connect, SweepBackend

if TYPE_CHECKING:
    from fleet.inventory import Host
    from fleet.sweep.hoststatus import FetchedLogs, HostStatus

# Asked in this order: the first whose `claims_hosts` / `claims_sweep` says yes runs the sweep.
# SSH comes last: it takes every host no other backend claims, and every sweep folder.
BACKENDS: dict[str, str] = {"slurm": "fleet.slurm.backend", "ssh": "fleet.sweep.backend"}


def backends() -> list[SweepBackend]:
    found: list[SweepBackend] = [importlib.import_module(module).BACKEND for module in BACKENDS.values()]
    return found


def backend_for_hosts(hosts: Sequence[Host]) -> SweepBackend:
    return next(b for b in backends() if b.claims_hosts(hosts))


def backend_for_sweep(directory: Path) -> SweepBackend:
    return next(b for b in backends() if b.claims_sweep(directory))


def sweep_folder(results_root: Path, sweep_id: str | None) -> Path:
    """The folder of `sweep_id`, else of the latest sweep (SweepError when none is recorded)."""
    from fleet.sweep.record import latest_sweep

    return results_root / (sweep_id or latest_sweep(results_root))


def sweep_status(results_root: Path, sweep_id: str | None, *, connect: Connect | None = None) -> dict[str, HostStatus]:
    """`fleet status`: per host of an SSH sweep, per array task of a Slurm sweep."""
    from fleet.connect import transport_for

    directory = sweep_folder(results_root, sweep_id)
    return backend_for_sweep(directory).status(directory, connect=connect or transport_for)


def fetch_logs(
    results_root: Path, sweep_id: str | None = None, host_names: Sequence[str] | None = None, *,
    connect: Connect | None = None, hosts_dir: Path | None = None,
) -> dict[str, FetchedLogs]:  # fmt: skip
    """`fleet fetch-logs`: every log of the sweep back under its folder."""
    from fleet.connect import transport_for

    directory = sweep_folder(results_root, sweep_id)
    return backend_for_sweep(directory).fetch_logs(directory, host_names, connect=connect or transport_for, hosts_dir=hosts_dir)
