"""`fleet fetch-logs`: every log of a sweep back on the controller, for offline diagnosis.

Server logs, the agent's log and results come with rsync (incremental: safe to repeat, and fine
while the sweep still runs). On systemd hosts the complete journal of every fleet unit of the
sweep is first written to a file on the host (never truncated, however long), then pulled too.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.connect import transport_for
from fleet.inventory import Host, ServiceManager
from fleet.layout import sweep_dir
from fleet.sweep.controller import load_sweep
from fleet.sweep.driver import HostDriver
from fleet.transport.fanout import fan_out

JOURNAL_DIR = "logs/journal"


@dataclass(frozen=True)
class FetchedLogs:
    host: str
    directory: Path
    files: int
    journal_units: int
    note: str = ""


def journal_command(host: Host, sweep_id: str) -> str:
    """Dump the journal of each fleet unit of the sweep into <sweep>/logs/journal/<unit>.log on the host."""
    target = posixpath.join(sweep_dir(host, sweep_id), JOURNAL_DIR)
    pattern = shlex.quote(f"fleet-*{sweep_id}*")
    return (
        f"mkdir -p {shlex.quote(target)} && "
        f"for unit in $(systemctl list-units --all --plain --no-legend {pattern} | awk '{{print $1}}'); do "
        f'journalctl -u "$unit" --no-pager -o short-iso > {shlex.quote(target)}/"$unit".log.tmp && '
        f'mv {shlex.quote(target)}/"$unit".log.tmp {shlex.quote(target)}/"$unit".log; done; '
        f"ls {shlex.quote(target)} | wc -l"
    )


def fetch_logs(results_root: Path, sweep_id: str | None = None, host_names: Sequence[str] | None = None) -> dict[str, FetchedLogs]:
    sweep = load_sweep(results_root, sweep_id)
    names = [n for n in sweep.shards if host_names is None or n in host_names]

    def fetch(name: str) -> FetchedLogs:
        host = sweep.hosts[name]
        transport = transport_for(host)
        try:
            units, note = 0, ""
            if host.service_manager is ServiceManager.systemd:
                units = int(transport.run(journal_command(host, sweep.directory.name), timeout=600, check=True).stdout.split()[-1])
            else:
                note = "process service manager: no journald; the server and agent logs are the files"
            driver = HostDriver(host, sweep.shards[name], sweep.playbook, sweep.directory, sweep.directory / ".bundle", transport)
            driver.pull()
            local = sweep.directory / name
            return FetchedLogs(name, local, sum(1 for p in local.rglob("*.log") if p.is_file()), units, note)
        finally:
            transport.close()

    outcomes = fan_out({n: n for n in names}, fetch, deadline_s=3600)
    return {
        name: (o.value if o.ok and o.value is not None else FetchedLogs(name, sweep.directory / name, 0, 0, f"failed: {o.error}"))
        for name, o in outcomes.items()
    }
