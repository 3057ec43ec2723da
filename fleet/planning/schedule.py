"""Packing server configurations onto GPU slots across hosts. Pure: durations in, a timetable out.

A job is one server configuration with all its runs; it needs `gpus` GPUs of one host. A slot is an
aligned block of GPUs (TP4 takes GPUs 0-3 or 4-7, TP2 takes 0-1, 2-3, ...), which keeps a server on
GPUs that are close in the PCIe/NVLink topology and stops small servers from fragmenting a host so
that a TP8 server never fits. Jobs are placed in order, each to the slot where it can start
earliest; `exclusive` isolation gives each job the whole host.

Which order is best depends on the mix: GPU-time first (LPT by area) suits many wide servers, wall
time first suits long narrow ones that otherwise end last. So several orders are tried -- the
classic ones and a fixed set of seeded shuffles -- and the shortest makespan wins. Deterministic:
the same jobs give the same timetable.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    key: str
    gpus: int
    seconds: float
    label: str = ""


@dataclass(frozen=True)
class HostSlots:
    name: str
    gpu_count: int


@dataclass(frozen=True)
class Placement:
    job: Job
    host: str
    gpus: tuple[int, ...]
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Unplaceable:
    job: Job
    reason: str


@dataclass(frozen=True)
class Schedule:
    placements: tuple[Placement, ...]
    unplaceable: tuple[Unplaceable, ...]
    total_gpus: int

    @property
    def makespan_s(self) -> float:
        return max((p.end_s for p in self.placements), default=0.0)

    @property
    def lower_bound_s(self) -> float:
        """No schedule beats total GPU-busy time spread over every GPU, nor its longest job."""
        if not self.placements or not self.total_gpus:
            return 0.0
        busy = sum(p.job.seconds * p.job.gpus for p in self.placements)
        return max(busy / self.total_gpus, max(p.job.seconds for p in self.placements))

    def on_host(self, host: str) -> list[Placement]:
        return sorted((p for p in self.placements if p.host == host), key=lambda p: (p.start_s, p.gpus))


def aligned_blocks(gpu_count: int, size: int) -> list[tuple[int, ...]]:
    return [tuple(range(start, start + size)) for start in range(0, gpu_count - size + 1, size)]


SHUFFLES = 200  # extra orders tried; placing 100 jobs 200 times takes well under a second


def schedule(jobs: Sequence[Job], hosts: Sequence[HostSlots], exclusive: bool = False, shuffles: int = SHUFFLES) -> Schedule:
    orders = [
        sorted(jobs, key=lambda j: (-j.seconds * j.gpus, -j.gpus, j.key)),  # GPU-time first
        sorted(jobs, key=lambda j: (-j.seconds, -j.gpus, j.key)),  # wall time first
        sorted(jobs, key=lambda j: (-j.gpus, -j.seconds, j.key)),  # widest first
    ]
    rng = random.Random(0)
    for _ in range(shuffles if len(jobs) > 1 else 0):
        order = list(orders[0])
        rng.shuffle(order)
        orders.append(order)
    candidates = [_place(order, hosts, exclusive) for order in orders]
    return min(candidates, key=lambda s: (len(s.unplaceable), s.makespan_s))


def _place(order: Sequence[Job], hosts: Sequence[HostSlots], exclusive: bool) -> Schedule:
    free_at: dict[str, list[float]] = {h.name: [0.0] * h.gpu_count for h in hosts}
    placements: list[Placement] = []
    unplaceable: list[Unplaceable] = []
    largest = max((h.gpu_count for h in hosts), default=0)
    for job in order:
        if job.gpus > largest:
            unplaceable.append(Unplaceable(job, f"needs {job.gpus} GPUs; the largest host has {largest}"))
            continue
        best: tuple[float, int, str, tuple[int, ...]] | None = None
        for index, host in enumerate(hosts):
            if host.gpu_count < job.gpus:
                continue
            gpu_free = free_at[host.name]
            if exclusive:
                # The whole host waits for its previous server; the job still only uses what it needs.
                candidates = [(max(gpu_free), tuple(range(job.gpus)))]
            else:
                candidates = [(max(gpu_free[g] for g in block), block) for block in aligned_blocks(host.gpu_count, job.gpus)]
            for start, block in candidates:
                key = (start, index, host.name, block)
                if best is None or key < best:
                    best = key
        assert best is not None
        start, _, host_name, block = best
        end = start + job.seconds
        placements.append(Placement(job, host_name, block, start, end))
        claimed = range(len(free_at[host_name])) if exclusive else block
        for g in claimed:
            free_at[host_name][g] = end
    return Schedule(tuple(placements), tuple(unplaceable), sum(h.gpu_count for h in hosts))
