"""`fleet status`: one short poll of each host of a sweep, read from its agent's progress file."""

from __future__ import annotations

from pathlib import Path

from fleet.connect import transport_for
from fleet.errors import TransportError
from fleet.sweep.controller import load_sweep
from fleet.sweep.driver import HostDriver, HostStatus
from fleet.transport.fanout import fan_out


def sweep_status(results_root: Path, sweep_id: str | None) -> dict[str, HostStatus]:
    sweep = load_sweep(results_root, sweep_id)

    def probe(name: str) -> HostStatus:
        transport = transport_for(sweep.hosts[name])
        try:
            driver = HostDriver(sweep.hosts[name], sweep.shards[name], sweep.playbook, sweep.directory, sweep.directory / ".bundle", transport)
            try:
                state = driver.poll()
            except TransportError as exc:
                driver.status.phase, driver.status.last_error = "unreachable", str(exc)
                return driver.status
            driver.absorb(state.progress)
            agent_state = state.progress.get("state") or "not started"
            driver.status.phase = "running" if state.agent_alive else agent_state
            driver.status.boot_id = state.boot_id
            return driver.status
        finally:
            transport.close()

    outcomes = fan_out({name: name for name in sweep.shards}, probe, deadline_s=60)
    return {
        name: (o.value if o.ok and o.value is not None else HostStatus(name, phase="unreachable", last_error=str(o.error)))
        for name, o in outcomes.items()
    }
