"""From a plan to each host's shard: what its agent must run, in which order, with which command;
and where servers handed over from another host go on their new host. Pure."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import replace

from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
from fleet.inventory import EngineKind, Host, ServiceManager
from fleet.layout import agent_dir, server_port, sweep_dir
from fleet.plan import Hardware, Plan, PlannedServer, launch_on
from fleet.planning.schedule import HostSlots, Job, schedule
from fleet.playbook import Playbook
from fleet.workloads import resolve_workload

SIM_FAULTS_FILE = "sim-faults.json"  # a host's own fault profile for the sim engine, in its work dir


def server_name(sweep_id: str, server_id: str) -> str:
    """The service name of a server (systemd unit `<name>.service`, or the process manager's pid files)."""
    return f"fleet-srv-{sweep_id}-{server_id}"


def server_env(server: PlannedServer, host: Host) -> dict[str, str]:
    env = dict(server.launch.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, server.gpus))
    if host.engine.kind is EngineKind.sim:
        env["PYTHONPATH"] = agent_dir(host)
        env["FLEET_SIM_SPEED"] = repr(host.engine.sim_speed)
        env["FLEET_SIM_FAULTS"] = posixpath.join(host.paths.work_dir, SIM_FAULTS_FILE)
    return env


def _after(server: PlannedServer, mine: list[PlannedServer]) -> list[str]:
    """Servers planned earlier on any of the same GPUs: this one starts when they have finished."""
    return [
        other.config.id
        for other in mine
        if other is not server and set(other.gpus) & set(server.gpus) and (other.start_s, other.gpus) < (server.start_s, server.gpus)
    ]


def server_spec(planned: PlannedServer, host: Host, sweep_id: str, after: list[str]) -> ServerSpec:
    provenance = dict(planned.provenance) if planned.provenance else None
    return ServerSpec(
        server_id=planned.config.id,
        label=planned.config.label,
        gpus=list(planned.gpus),
        port=planned.port,
        argv=list(planned.launch.argv),
        env=server_env(planned, host),
        unit_name=server_name(sweep_id, planned.config.id),
        after=after,
        runs=[RunSpec(run.id, run.label, resolve_workload(run), run.repeats, provenance) for run in planned.runs],
        cwd=sweep_dir(host, sweep_id),
        skip_reason=planned.skip_reason,
        engine_release=planned.engine_release,
    )


def agent_limits(playbook: Playbook) -> AgentLimits:
    return AgentLimits(
        server_start_timeout_s=playbook.limits.server_start_timeout_s,
        request_timeout_s=playbook.limits.request_timeout_s,
        no_token_timeout_s=playbook.limits.no_token_timeout_s,
    )


def build_shards(plan: Plan, hosts: Mapping[str, Host], sweep_id: str, boot_ids: Mapping[str, str]) -> dict[str, Shard]:
    shards = {}
    for name, host in hosts.items():
        mine = [s for s in plan.servers if s.host == name]
        if not mine:
            continue
        shards[name] = Shard(
            sweep_id=sweep_id,
            host=name,
            boot_id=boot_ids.get(name, ""),
            service_manager="systemd" if host.service_manager is ServiceManager.systemd else "process",
            limits=agent_limits(plan.playbook),
            servers=[server_spec(s, host, sweep_id, _after(s, mine)) for s in mine],
        )
    return shards


def place_moved(
    moved: Sequence[PlannedServer], target: Host, hardware: Hardware | None, sweep_id: str, seconds: Mapping[str, float], *, exclusive: bool = False
) -> list[ServerSpec]:
    """Servers handed over to `target`, whose agent has finished its own share (all its GPUs are
    free): packed onto its aligned GPU blocks as a plan packs them, each with the launch command
    of `target` (its model copies, its Python, a port of its first GPU unless the configuration
    pins one) and `after` on the moved servers planned earlier on the same GPUs. `seconds`: the
    estimated work of each server, for the packing."""
    by_id = {server.config.id: server for server in moved}
    jobs = [Job(key, server.config.tp, seconds.get(key, 1.0), server.config.label) for key, server in by_id.items()]
    timetable = schedule(jobs, [HostSlots(target.name, target.gpus.count)], exclusive=exclusive)
    if timetable.unplaceable:
        raise ValueError(f"{target.name}: cannot take {[u.job.label for u in timetable.unplaceable]}: {timetable.unplaceable[0].reason}")
    placed: list[PlannedServer] = []
    for placement in timetable.placements:
        server = by_id[placement.job.key]
        port = server.config.port or server_port(placement.gpus[0])
        placed.append(
            replace(
                server, host=target.name, gpus=placement.gpus, port=port, launch=launch_on(target, server.config, port, hardware),
                start_s=placement.start_s, end_s=placement.end_s,
            )
        )  # fmt: skip
    placed.sort(key=lambda s: (s.start_s, s.gpus))
    return [server_spec(s, target, sweep_id, _after(s, placed)) for s in placed]
