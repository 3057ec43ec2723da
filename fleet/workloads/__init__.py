"""Workloads: a playbook run's workload resolved into the plain-JSON request plan of a shard.

Runs on the controller. Each kind's model and behaviour is in fleet.workloads.kinds (the
registry of kinds), the prompts and corpus are data (fleet.workloads.library, over
`fleet/workloads/data/`, see its README), dataset files are read by fleet.workloads.datasets.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from fleet.workloads.kinds import WorkloadModel


class PlaybookRun(Protocol):
    """What is read here of a run (fleet.playbook.Run, which is above this package): its workload
    and the workload's name in the playbook."""

    @property
    def workload_name(self) -> str: ...
    @property
    def workload(self) -> WorkloadModel: ...


def resolve_workload(run: PlaybookRun, time_scale: float = 1.0, engine_python: str = "python3") -> dict[str, Any]:
    """The run's workload as the shard carries it: plain JSON, everything the agent needs.
    `time_scale`: the host's wall seconds per engine second (sim_speed; 1 on real hardware);
    `engine_python`: the interpreter the host runs the engine with (a client tool's by default;
    python3 is a host file's default, fleet.inventory.EngineSpec.python)."""
    workload = run.workload
    base: dict[str, Any] = {"name": run.workload_name, "kind": workload.kind, "max_new_tokens": workload.max_new_tokens}
    client = workload.resolved_client(engine_python)
    return {**base, **workload.resolved(run.workload_name, time_scale), **({"client": client} if client is not None else {})}


def comparability_warnings(runs: Sequence[PlaybookRun], context_len: int, kv_tokens: int) -> list[str]:
    """What the memory prediction says will make a run `not_comparable` before it starts (each
    kind's `comparability_warning`: a long-context prompt that cannot fit the server's context or
    KV pool is cut on the host)."""
    return [warning for run in runs if (warning := run.workload.comparability_warning(run.workload_name, context_len, kv_tokens)) is not None]
