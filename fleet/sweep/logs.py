"""`fleet fetch-logs`: every log of a sweep back on the controller, for offline diagnosis.

Server logs, the agent's log and results come with rsync (incremental: safe to repeat, and fine
while the sweep still runs). On systemd hosts the complete journal of every fleet unit of the
sweep is first written to a file on the host (never truncated, however long), then pulled too.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
from collections.abc import Sequence
from pathlib import Path

from fleet.connect import transport_for
from fleet.host.contract import SweepDir
from fleet.inventory import Host, ServiceManager
from fleet.layout import sweep_dir
from fleet.provision.units import agent_unit_name, server_unit_name
from fleet.sweep.channel import AgentChannel
from fleet.sweep.hoststatus import FetchedLogs
from fleet.sweep.record import Connect, load_sweep, moved_hosts
from fleet.transport.fanout import fan_out
from fleet.transport.sharing import one_shot

log = logging.getLogger("fleet.sweep")

JOURNAL_DIR = posixpath.join(SweepDir.LOGS, "journal")
GIVEN_UP_RETRY_S = 60.0


def journal_command(host: Host, sweep_id: str) -> str:
    """Dump the journal of each fleet unit of the sweep into <sweep>/logs/journal/<unit>.log on the host.

    The units are found in the journal itself (`-F` lists a field's values), not with `systemctl
    list-units`: once a sweep is over its units are inactive and systemd unloads them, so
    list-units no longer shows them, while their journal is all there is to read. `_SYSTEMD_UNIT`
    names the units whose processes logged, `UNIT` those systemd itself logged about (a server
    that failed before printing anything still has its "Failed with result" lines). `-a` prints
    every entry whole (no "[blob data]" for a line with control characters); nothing is cut.
    """
    target = shlex.quote(SweepDir(sweep_dir(host, sweep_id)).path(JOURNAL_DIR))
    servers, agent = shlex.quote(server_unit_name(sweep_id, "")[: -len(".service")]), shlex.quote(agent_unit_name(sweep_id))
    select = f"awk -v s={servers} -v a={agent} '(index($0, s) == 1 && $0 ~ /[.]service$/) || $0 == a' | sort -u"
    return (
        f"mkdir -p {target} && "
        f"for unit in $({{ journalctl -F _SYSTEMD_UNIT; journalctl -F UNIT; }} 2>/dev/null | {select}); do "
        f'journalctl -a -u "$unit" --no-pager -o short-iso > {target}/"$unit".log.tmp && '
        f'mv {target}/"$unit".log.tmp {target}/"$unit".log || exit 1; done; '
        f"ls {target} | grep -c '[.]log$' || true"
    )


@one_shot()  # a command and two pulls per host, one login (`shared_login`): no shared master, no paramiko (fleet.transport.sharing)
def fetch_logs(
    results_root: Path,
    sweep_id: str | None = None,
    host_names: Sequence[str] | None = None,
    *,
    connect: Connect = transport_for,
    hosts_dir: Path | None = None,
) -> dict[str, FetchedLogs]:
    """Every host of the sweep, those it gave up on too (their results of runs that went to
    another host stay there: a second result of a run is never brought back). `hosts_dir`: the
    inventory, where a host given another address since the sweep started is reached at it.
    (A Slurm sweep's: fleet.slurm.observe; `fleet.backend` chooses.)"""
    sweep = load_sweep(results_root, sweep_id)
    hosts = {**sweep.hosts, **{name: given_up.host for name, given_up in sweep.given_up.items()}}
    skips = {name: given_up.excludes for name, given_up in sweep.given_up.items()}
    for move in moved_hosts(hosts_dir, hosts) if hosts_dir is not None else []:
        log.warning("%s; fetched from there", move.describe())
        hosts[move.recorded.name] = move.current
    names = [n for n in hosts if host_names is None or n in host_names]

    def fetch(name: str) -> FetchedLogs:
        host = hosts[name]
        # A host given up on may well be gone still: a few tries, not TRANSFER's half hour.
        channel = AgentChannel(host, sweep.directory.name, connect(host), max_retry_s=GIVEN_UP_RETRY_S if name in skips else None)
        try:
            units, note = 0, ""
            # The journal's dump and the two pulls (the tree, and runs/) through one login, not three.
            with channel.transport.shared_login():
                if host.service_manager is ServiceManager.systemd:
                    dumped = channel.transport.run(journal_command(host, sweep.directory.name), timeout=600, check=True)
                    units = int(dumped.stdout.split()[-1])
                else:
                    note = "process service manager: no journald; the server and agent logs are the files"
                local = sweep.directory / name
                channel.pull(local, skip=skips.get(name, ()))
            if name in skips:
                note = "; ".join(filter(None, [note, "given up on in the sweep: only results of runs that ran nowhere else are brought back"]))
            return FetchedLogs(name, local, sum(1 for p in local.rglob("*.log") if p.is_file()), units, note)
        finally:
            channel.close()

    outcomes = fan_out({n: n for n in names}, fetch, deadline_s=3600)
    return {name: (o.value if o.ok and o.value is not None else FetchedLogs(name, sweep.directory / name, 0, 0, f"failed: {o.error}")) for name, o in outcomes.items()}
