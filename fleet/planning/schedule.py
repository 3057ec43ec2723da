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

import math
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


SHUFFLES = 200  # extra orders tried where the problem is small enough (SEARCH_BUDGET)
# GPU free times looked at by the search, summed over the orders tried: one order places every job
# and looks at every GPU of every host for each, so it costs jobs x GPUs. The three classic orders
# are always tried; shuffles only as far as this budget holds: all 200 up to ~600 jobs on 16 GPUs,
# ~150 on 64 GPUs; none from ~10,000 jobs on 64 GPUs, where the classic orders alone are within
# 0.3 % of the lower bound (a shuffle helps a few dozen jobs, not thousands). About 0.5 s of CPU.
SEARCH_BUDGET = 2_000_000


@dataclass
class SearchStats:
    """What one schedule() call did, for tests and benchmarks that count work, not seconds."""

    orders: int = 0  # orders tried (placed in whole, or given up once they could no longer win)
    gpu_visits: int = 0  # GPU free times looked at, over every order
    placements: int = 0  # jobs placed, over every order


def orders_tried(jobs: int, total_gpus: int, shuffles: int = SHUFFLES, budget: int = SEARCH_BUDGET) -> int:
    """How many orders schedule() tries: the three classic ones, and as many of the seeded shuffles
    as the budget holds (none for a single job)."""
    if jobs <= 1:
        return 3
    per_order = max(1, jobs * max(1, total_gpus))
    return 3 + max(0, min(shuffles, budget // per_order - 3))


def schedule(
    jobs: Sequence[Job],
    hosts: Sequence[HostSlots],
    exclusive: bool = False,
    shuffles: int = SHUFFLES,
    budget: int = SEARCH_BUDGET,
    stats: SearchStats | None = None,
) -> Schedule:
    stats = stats if stats is not None else SearchStats()
    area_first = sorted(jobs, key=lambda j: (-j.seconds * j.gpus, -j.gpus, j.key))  # GPU-time first
    classic = [
        area_first,
        sorted(jobs, key=lambda j: (-j.seconds, -j.gpus, j.key)),  # wall time first
        sorted(jobs, key=lambda j: (-j.gpus, -j.seconds, j.key)),  # widest first
    ]
    total_gpus = sum(h.gpu_count for h in hosts)
    count = orders_tried(len(jobs), total_gpus, shuffles, budget)
    best: Schedule | None = None
    rng = random.Random(0)
    for n in range(count):
        if n < len(classic):
            order = classic[n]
        else:  # the same seeded shuffles, in the same sequence, as when all were tried
            order = list(area_first)
            rng.shuffle(order)
        # The first order with the shortest makespan wins (every order leaves out the same
        # unplaceable jobs): one that reaches the best makespan so far can stop there.
        found = _place(order, hosts, exclusive, stats, stop_at=best.makespan_s if best is not None else math.inf)
        if found is not None and (best is None or found.makespan_s < best.makespan_s):
            best = found
    assert best is not None
    return best


def _place(order: Sequence[Job], hosts: Sequence[HostSlots], exclusive: bool, stats: SearchStats, stop_at: float = math.inf) -> Schedule | None:
    """Each job in turn to the aligned block where it can start earliest (ties: the earlier host,
    then the lower block). None as soon as the makespan reaches `stop_at`."""
    stats.orders += 1
    free_at: list[list[float]] = [[0.0] * h.gpu_count for h in hosts]
    placements: list[Placement] = []
    unplaceable: list[Unplaceable] = []
    largest = max((h.gpu_count for h in hosts), default=0)
    visits = 0
    for job in order:
        size = job.gpus
        if size > largest:
            unplaceable.append(Unplaceable(job, f"needs {size} GPUs; the largest host has {largest}"))
            continue
        best_start = math.inf
        best_host = -1
        best_first = 0
        for index, gpu_free in enumerate(free_at):
            count = len(gpu_free)
            if count < size:
                continue
            visits += count
            if exclusive:
                # The whole host waits for its previous server; the job still only uses what it needs.
                start, first = max(gpu_free), 0
            elif size == 1:
                start = min(gpu_free)
                first = gpu_free.index(start)
            else:
                starts = [max(gpu_free[b : b + size]) for b in range(0, count - size + 1, size)]
                start = min(starts)
                first = starts.index(start) * size
            if start < best_start:
                best_start, best_host, best_first = start, index, first
        end = best_start + job.seconds
        gpu_free = free_at[best_host]
        if exclusive:
            gpu_free[:] = [end] * len(gpu_free)
        else:
            gpu_free[best_first : best_first + size] = [end] * size
        placements.append(Placement(job, hosts[best_host].name, tuple(range(best_first, best_first + size)), best_start, end))
        if end >= stop_at:
            stats.gpu_visits += visits
            stats.placements += len(placements)
            return None
    stats.gpu_visits += visits
    stats.placements += len(placements)
    return Schedule(tuple(placements), tuple(unplaceable), sum(h.gpu_count for h in hosts))
