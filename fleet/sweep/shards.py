"""From a plan to each host's shard: what its agent must run, in which order, with which command;
and where servers handed over from another host go on their new host. Pure.

The plan's GPUs of a server reach the shard as its count and a hint: the agent places servers on
GPUs as they free up (fleet.host.agent.dispatch), in the plan's order and by its estimates."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import replace

from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
from fleet.host.engines import engine as engine_named
from fleet.inventory import EngineKind, Host, ServiceManager, Target
from fleet.layout import agent_dir, server_port, sweep_dir
from fleet.plan import Hardware, Plan, PlannedServer, launch_on, time_scale_of
from fleet.planning.schedule import HostSlots, Job, schedule
from fleet.playbook import Playbook
from fleet.workloads import resolve_workload

SIM_FAULTS_FILE = "sim-faults.json"  # a host's own fault profile for the sim engine, in its work dir


def server_name(sweep_id: str, server_id: str) -> str:
    """The service name of a server (systemd unit `<name>.service`, or the process manager's pid files)."""
    return f"fleet-srv-{sweep_id}-{server_id}"


def server_env(server: PlannedServer, host: Target) -> dict[str, str]:
    env = dict(server.launch.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, server.gpus))
    if host.engine.kind is EngineKind.sim:
        env["PYTHONPATH"] = agent_dir(host)
        env["FLEET_SIM_SPEED"] = repr(host.engine.sim_speed)
        if host.engine.sim_start_speed is not None:
            env["FLEET_SIM_START_SPEED"] = repr(host.engine.sim_start_speed)
        env["FLEET_SIM_FAULTS"] = posixpath.join(host.paths.work_dir, SIM_FAULTS_FILE)
    return env


def server_spec(planned: PlannedServer, host: Target, sweep_id: str) -> ServerSpec:
    provenance = dict(planned.provenance) if planned.provenance else None
    return ServerSpec(
        server_id=planned.config.id,
        label=planned.config.label,
        gpus=list(planned.gpus),
        port=planned.port,
        argv=list(planned.launch.argv),
        env=server_env(planned, host),
        unit_name=server_name(sweep_id, planned.config.id),
        runs=[RunSpec(run.id, run.label, resolve_workload(run, time_scale_of(host), host.engine.python_for(planned.config.engine_name)), run.repeats, provenance) for run in planned.runs],
        cwd=sweep_dir(host, sweep_id),
        skip_reason=planned.skip_reason,
        engine=planned.config.engine_name,
        api=engine_named(planned.config.engine_name).client_api,  # type: ignore[arg-type]
        engine_release=planned.engine_release,
        # The plan's slot is as long as its estimate of the server's start-up and runs.
        estimate_s=round(planned.end_s - planned.start_s, 3),
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
            servers=[server_spec(s, host, sweep_id) for s in mine],
            gpus=list(range(host.gpus.count)),
            exclusive=plan.playbook.isolation.value == "exclusive",
        )
    return shards


def place_moved(moved: Sequence[PlannedServer], target: Host, hardware: Hardware | None, sweep_id: str, seconds: Mapping[str, float], *, exclusive: bool = False) -> list[ServerSpec]:
    """Servers handed over to `target`, whose agent has finished its own share (all its GPUs are
    free): packed onto its aligned GPU blocks as a plan packs them (for their order and their GPU
    hints; the agent places them), each with the launch command of `target` (its model copies, its
    Python, a port of its own unless the configuration pins one). `seconds`: the estimated work of
    each server."""
    by_id = {server.config.id: server for server in moved}
    jobs = [Job(key, server.config.tp, seconds.get(key, 1.0), server.config.label) for key, server in by_id.items()]
    timetable = schedule(jobs, [HostSlots(target.name, target.gpus.count)], exclusive=exclusive)
    if timetable.unplaceable:
        raise ValueError(f"{target.name}: cannot take {[u.job.label for u in timetable.unplaceable]}: {timetable.unplaceable[0].reason}")
    placed: list[PlannedServer] = []
    for index, placement in enumerate(sorted(timetable.placements, key=lambda p: (p.start_s, p.gpus))):
        server = by_id[placement.job.key]
        # Placed anywhere by the agent, so side by side with any other: a port of its own.
        port = server.config.port or server_port(index)
        placed.append(
            replace(
                server, host=target.name, gpus=placement.gpus, port=port, launch=launch_on(target, server.config, port, hardware),
                start_s=placement.start_s, end_s=placement.end_s,
            )
        )  # fmt: skip
    return [server_spec(s, target, sweep_id) for s in placed]
