"""Can a request ever run on this cluster? Checked against `sinfo` before a job is submitted, so
that a request larger than any node never waits in the queue; and a pending job's reason read
as "waiting" or "never". Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleet.slurm.jobs import NEVER_REASONS, JobState, NodeInfo, SlurmJob


@dataclass(frozen=True)
class Request:
    gpus: int
    gres_name: str
    partition: str | None  # None: the cluster's default partition
    constraint: str | None = None  # a single feature name, or `a&b` (all of them)
    time_limit_s: int | None = None


def _features(constraint: str | None) -> set[str]:
    return {f for f in (constraint or "").split("&") if f}


def infeasible(request: Request, nodes: Sequence[NodeInfo]) -> str | None:
    """Why no node of the partition can ever take the request (None: some node can, now or later)."""
    if request.partition is None:
        in_partition = [n for n in nodes if n.default_partition]
        where = "the default partition"
    else:
        in_partition = [n for n in nodes if n.partition == request.partition]
        where = f"partition {request.partition!r}"
    if not in_partition:
        known = sorted({n.partition for n in nodes})
        return f"{where} has no nodes (partitions: {', '.join(known) or 'none'})"
    wanted = _features(request.constraint)
    shaped = [n for n in in_partition if wanted <= set(n.features)]
    if not shaped:
        return f"no node of {where} has the features {sorted(wanted)} (constraint {request.constraint!r})"
    largest = max(n.gres.get(request.gres_name, 0) for n in shaped)
    if request.gpus > largest:
        return f"{request.gpus} {request.gres_name} GRES per node asked for; the largest node of {where}{' with ' + request.constraint if request.constraint else ''} has {largest}"
    return None


def fitting(request: Request, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
    """The nodes that can hold the request: of its partition, with its features and enough GRES."""
    return [
        n
        for n in nodes
        if (request.partition is None and n.default_partition or n.partition == request.partition)
        and _features(request.constraint) <= set(n.features)
        and n.gres.get(request.gres_name, 0) >= request.gpus
    ]


def unusable_now(request: Request, nodes: Sequence[NodeInfo]) -> str | None:
    """A feasible request whose every fitting node is down or drained: it would pend
    (ReqNodeNotAvail) until someone repairs the nodes. Worth saying; not a reason to refuse."""
    fitting_nodes = fitting(request, nodes)
    if fitting_nodes and not any(n.usable for n in fitting_nodes):
        return "every node that fits is unavailable: " + ", ".join(f"{n.name} ({n.state})" for n in fitting_nodes)
    return None


def never_runs(job: SlurmJob) -> str | None:
    """A pending job whose reason says it cannot ever start (the request is wrong here)."""
    if job.state is JobState.PENDING and job.reason in NEVER_REASONS:
        return f"job {job.job_id} pends for {job.reason}: it cannot start on this cluster as asked"
    return None
