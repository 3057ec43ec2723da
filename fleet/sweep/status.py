"""`fleet status`: one short poll of each host of a sweep, read from its agent's progress file."""

from __future__ import annotations

from pathlib import Path

from fleet.connect import transport_for
from fleet.errors import FleetError
from fleet.sweep.channel import AgentChannel
from fleet.sweep.hoststatus import HostStatus, Phase, phase_of
from fleet.sweep.record import Connect, load_sweep
from fleet.transport.fanout import fan_out
from fleet.transport.sharing import one_shot


@one_shot()  # one poll per host, then exit: no paramiko, no master of its own (fleet.transport.sharing)
def sweep_status(results_root: Path, sweep_id: str | None, *, connect: Connect = transport_for) -> dict[str, HostStatus]:
    """Per host of an SSH sweep (a Slurm sweep's: fleet.slurm.observe; `fleet.backend` chooses)."""
    sweep = load_sweep(results_root, sweep_id)

    def probe(name: str) -> HostStatus:
        status = HostStatus(name, total=len(sweep.shards[name].runs))
        channel = AgentChannel(sweep.hosts[name], sweep.directory.name, connect(sweep.hosts[name]))
        try:
            state = channel.poll()
        except FleetError as exc:  # the link, or a progress file this controller cannot read
            status.phase, status.last_error = Phase.UNREACHABLE, str(exc)
            return status
        finally:
            channel.close()
        status.absorb(state.progress)
        status.phase = phase_of(state)
        status.boot_id = state.boot_id
        status.link_drops = channel.link_drops
        return status

    outcomes = fan_out({name: name for name in sweep.shards}, probe, deadline_s=60)
    statuses = {name: (o.value if o.ok and o.value is not None else HostStatus(name, phase=Phase.UNREACHABLE, last_error=str(o.error))) for name, o in outcomes.items()}
    # A host given up on is not asked again (its late results do not count): shown as it ended.
    for name, why in sweep.record.lost.items():
        statuses[name] = HostStatus(name, phase=Phase.LOST, last_error=why)
    return statuses
