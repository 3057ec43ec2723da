"""Which server the agent starts next, and on which GPUs. Pure: the host's GPU pool, the servers
running (with where they run and when they are expected to end) and the servers waiting in, one
placement (or none) out. The agent (`fleet.host.agent.runner`) calls it whenever GPUs free up,
and at its start.

The controller asks for a number of GPUs per server and gives an estimate of its work; it no
longer fixes which GPUs. So a GPU that frees early is used at once instead of waiting while the
next server in the plan's order waits for its own GPUs (a fixed order packed the seed matrix
1.35-1.63x its lower bound).

Choice (list scheduling): the waiting servers are ranked by their estimate, longest first (the
controller's order breaks ties); the first that fits a free block starts, so a narrow server fills
GPUs a wider one higher in the ranking cannot use yet (backfilling).

Measured, not assumed: benchmarks/bench_sweep.py replays this choice with the real busy times of
the servers of a sweep of the seed matrix (first round, no hand-over cost; 4 sweeps, ratios to
the lower bound): longest first 1.115-1.175, the controller's order 1.127-1.223; with a
reservation for the first-ranked server that does not fit (EASY backfilling: others start before
it only outside its block, or if they end before it frees) 1.172-1.265 and 1.318-1.419, as the
controller's estimates are off by 0.4-2.5x per server, and with perfect estimates no better
(1.125-1.171). So no reservation (`reserve`, kept for that comparison).

Placement, for a TP group on a host whose topology the shard does not describe: consecutive GPUs
of the pool (indexes close in the PCIe/NVLink tree), aligned to the group size (TP4 on 0-3 or
4-7) where one is free, and among those the block in the most broken-up region of the pool
(buddy best fit: a TP1 server takes GPU 5 of free {0,1,2,3,5}, leaving 0-3 whole for a TP4).
Never GPUs the agent knows a foreign process holds (`unusable`), never two servers on one port.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Waiting:
    """A server not yet started (nor released to another host)."""

    server_id: str
    gpu_count: int
    estimate_s: float  # the controller's estimate of its whole work; 0 when it gave none
    order: int  # its place in the controller's order (the shard's)
    port: int


@dataclass(frozen=True)
class Running:
    server_id: str
    gpus: tuple[int, ...]
    ends_at: float  # estimated: its start plus its estimate
    port: int


@dataclass(frozen=True)
class Placement:
    server_id: str
    gpus: tuple[int, ...]
    last_chance: bool = False  # from `stuck`: GPUs a foreign process was found holding


def rank(waiting: Sequence[Waiting], by_estimate: bool = True) -> list[Waiting]:
    """Longest estimated work first, the controller's order among equals; or (`by_estimate`
    False) the controller's order alone."""
    if not by_estimate:
        return sorted(waiting, key=lambda w: (w.order, w.server_id))
    return sorted(waiting, key=lambda w: (-w.estimate_s, w.order, w.server_id))


def _windows(pool: Sequence[int], size: int) -> list[tuple[bool, int, tuple[int, ...]]]:
    """(aligned, position, GPUs) of every run of `size` consecutive GPUs of the pool."""
    ordered = sorted(pool)
    if size <= 0:
        return []
    return [(i % size == 0, i, tuple(ordered[i : i + size])) for i in range(len(ordered) - size + 1)]


def blocks(pool: Sequence[int], size: int) -> list[tuple[int, ...]]:
    """Every run of `size` consecutive GPUs of the pool: the aligned ones first, each by position."""
    return [block for _, _, block in sorted(_windows(pool, size), key=lambda w: (not w[0], w[1]))]


def _spoils(position: int, size: int, pool: Sequence[int], free: Collection[int]) -> int:
    """The size of the largest wholly free aligned region of the pool that a block of `size` GPUs
    at `position` would break into (its own size when none): smaller is better, it leaves wide
    blocks whole."""
    ordered = sorted(pool)
    spoiled, region_size = size, size * 2
    while region_size <= len(ordered):
        start = position // region_size * region_size
        region = ordered[start : start + region_size]
        if position + size > start + region_size or not all(g in free for g in region):
            break
        spoiled, region_size = region_size, region_size * 2
    return spoiled


def place(pool: Sequence[int], free: Collection[int], size: int) -> tuple[int, ...] | None:
    """The block a server of `size` GPUs takes among the free GPUs of the pool; None: none fits."""
    fitting = [w for w in _windows(pool, size) if all(g in free for g in w[2])]
    if not fitting:
        return None
    return min(fitting, key=lambda w: (not w[0], _spoils(w[1], size, pool, free), w[1]))[2]


def reservation(pool: Sequence[int], running: Sequence[Running], unusable: Collection[int], size: int, now: float) -> tuple[float, tuple[int, ...]] | None:
    """When and where a server of `size` GPUs could start soonest by the running servers'
    estimated ends; None: no block of the pool avoids the unusable GPUs."""
    ends = {gpu: max(now, r.ends_at) for r in running for gpu in r.gpus}
    best: tuple[float, int, tuple[int, ...]] | None = None
    for index, block in enumerate(blocks(pool, size)):
        if any(g in unusable for g in block):
            continue
        key = (max((ends.get(g, now) for g in block), default=now), index, block)
        if best is None or key < best:
            best = key
    return (best[0], best[2]) if best is not None else None


def choose(
    pool: Sequence[int],
    running: Sequence[Running],
    waiting: Sequence[Waiting],
    now: float,
    unusable: Collection[int] = (),
    exclusive: bool = False,
    by_estimate: bool = True,
    reserve: bool = False,
) -> Placement | None:
    """The next server to start and its GPUs, or None: wait until something ends. `by_estimate`
    False ranks by the controller's order alone; `reserve` holds the first-ranked server's block
    (see above: both for the benchmark's comparison). A running server past its estimate counts
    as ending now."""
    if exclusive and running:
        return None
    busy = {gpu for r in running for gpu in r.gpus}
    free = [g for g in pool if g not in busy and g not in unusable]
    ports = {r.port for r in running}
    held: tuple[float, tuple[int, ...]] | None = None  # the first-ranked server's reservation
    for server in rank(waiting, by_estimate):
        if server.port in ports:
            continue  # another server of ours listens there: this one starts after it
        block = place(pool, free, server.gpu_count)
        if held is None:
            if block is not None:
                return Placement(server.server_id, block)
            held = reservation(pool, running, unusable, server.gpu_count, now) if reserve else None
            if held is None:
                held = (float("inf"), ())  # it can never fit: it delays nobody
            continue
        if block is not None and (now + server.estimate_s <= held[0] or not set(block) & set(held[1])):
            return Placement(server.server_id, block)
    return None


def stuck(pool: Sequence[int], waiting: Sequence[Waiting], unusable: Collection[int]) -> Placement | None:
    """Nothing of ours runs and nothing waiting fits the pool without the GPUs foreign processes
    hold: the first-ranked server that fits the pool at all, on the block it would take were they
    free. Its start then fails with those holders as evidence (fleet never touches them), instead
    of the agent waiting for a stranger forever."""
    for server in rank(waiting):
        block = place(pool, pool, server.gpu_count)
        if block is not None and set(block) & set(unusable):
            return Placement(server.server_id, block, last_chance=True)
    return None
