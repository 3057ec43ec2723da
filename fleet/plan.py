"""A sweep's plan: every run, which host and GPUs it gets, the exact launch command, and an ETA.

Pure: the playbook and the chosen hosts in, a Plan out. `fleet plan` prints it; the sweep executes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.engines import launch_spec
from fleet.engines.sglang.argv import LaunchSpec
from fleet.inventory import EngineKind, Host
from fleet.layout import model_serve_dir, server_port
from fleet.planning.estimate import run_seconds, server_start_seconds
from fleet.planning.schedule import HostSlots, Job, Schedule, schedule
from fleet.playbook import Playbook, Run, ServerConfig, expand_runs


@dataclass(frozen=True)
class PlannedServer:
    config: ServerConfig
    runs: tuple[Run, ...]
    host: str
    gpus: tuple[int, ...]
    port: int
    launch: LaunchSpec
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Plan:
    playbook: Playbook
    servers: tuple[PlannedServer, ...]
    schedule: Schedule
    unplaceable: tuple[tuple[ServerConfig, str], ...] = field(default=())

    @property
    def runs(self) -> list[tuple[PlannedServer, Run]]:
        return [(server, run) for server in self.servers for run in server.runs]

    def to_json(self) -> dict[str, Any]:
        return {
            "playbook": self.playbook.name,
            "runs": [_run_json(server, run) for server, run in self.runs],
            "unplaceable": [
                {"server": config.label, "server_id": config.id, "reason": reason} for config, reason in self.unplaceable
            ],
            "makespan_s": round(self.schedule.makespan_s, 1),
            "lower_bound_s": round(self.schedule.lower_bound_s, 1),
        }


def _run_json(server: PlannedServer, run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "label": run.label,
        "server_id": server.config.id,
        "host": server.host,
        "gpus": list(server.gpus),
        "tp": server.config.tp,
        "method": server.config.method,
        "variant": server.config.variant,
        "workload": run.workload_name,
        "workload_kind": run.workload.kind,
        "port": server.port,
        "argv": server.launch.argv,
        "env": server.launch.env,
        "upstream_flags": server.launch.upstream,
        "notes": server.launch.notes,
        "server_start_s": round(server.start_s, 1),
        "server_end_s": round(server.end_s, 1),
    }


def _time_scale(hosts: Sequence[Host]) -> float:
    """Sim hosts run faster than real time by their sim_speed; the estimates follow when all agree."""
    scales = {h.engine.sim_speed if h.engine.kind is EngineKind.sim else 1.0 for h in hosts}
    return scales.pop() if len(scales) == 1 else 1.0


def make_plan(playbook: Playbook, hosts: Sequence[Host]) -> Plan:
    by_server: dict[str, list[Run]] = defaultdict(list)
    configs: dict[str, ServerConfig] = {}
    for run in expand_runs(playbook):
        by_server[run.server.id].append(run)
        configs[run.server.id] = run.server
    scale = _time_scale(hosts)
    jobs = [
        Job(
            key=key,
            gpus=config.tp,
            seconds=scale * (server_start_seconds(config) + sum(run_seconds(r) for r in by_server[key])),
            label=config.label,
        )
        for key, config in configs.items()
    ]
    slots = [HostSlots(h.name, h.gpus.count) for h in hosts]
    timetable = schedule(jobs, slots, exclusive=playbook.isolation.value == "exclusive")
    hosts_by_name = {h.name: h for h in hosts}
    servers = []
    for placement in timetable.placements:
        config = configs[placement.job.key]
        host = hosts_by_name[placement.host]
        port = server_port(placement.gpus[0])
        launch = launch_spec(
            host.engine.kind,
            config,
            python=host.engine.python,
            model_path=model_serve_dir(config.model, host),
            draft_path=model_serve_dir(config.draft, host) if config.draft else None,
            port=port,
        )
        servers.append(
            PlannedServer(
                config=config,
                runs=tuple(by_server[config.id]),
                host=host.name,
                gpus=placement.gpus,
                port=port,
                launch=launch,
                start_s=placement.start_s,
                end_s=placement.end_s,
            )
        )
    servers.sort(key=lambda s: (s.host, s.start_s, s.gpus))
    unplaceable = tuple((configs[u.job.key], u.reason) for u in timetable.unplaceable)
    return Plan(playbook, tuple(servers), timetable, unplaceable)
