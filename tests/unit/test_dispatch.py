"""The agent's choice of the next server and its GPUs (fleet.host.agent.dispatch): pure, so each
rule is shown on a small pool; and, by an event-driven replay of the choice against fixed real
durations, that dispatching on free GPUs beats the fixed per-GPU order it replaces."""

from __future__ import annotations

import heapq

from fleet.host.agent.dispatch import Placement, Running, Waiting, blocks, choose, place, rank, stuck

POOL = tuple(range(8))


def waiting(server_id: str, gpus: int, seconds: float, order: int = 0, port: int | None = None) -> Waiting:
    return Waiting(server_id, gpus, seconds, order, port if port is not None else 31000 + 10 * order)


def test_aligned_blocks_come_first_then_any_consecutive_run() -> None:
    assert blocks(POOL, 4) == [(0, 1, 2, 3), (4, 5, 6, 7), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)]
    assert blocks((2, 3, 6, 7), 2) == [(2, 3), (6, 7), (3, 6)]  # a Slurm grant: consecutive in the pool
    assert place(POOL, {1, 2, 3, 4, 5}, 4) == (1, 2, 3, 4)  # no aligned block is free: a consecutive one
    assert place(POOL, {0, 2, 4, 6}, 2) is None  # never a TP group on scattered GPUs


def test_a_narrow_server_takes_the_broken_up_region_and_leaves_wide_blocks_whole() -> None:
    assert place(POOL, {0, 1, 2, 3, 5}, 1) == (5,)
    assert place(POOL, {0, 1, 2, 3, 4, 5, 6, 7}, 1) == (0,)
    assert place(POOL, {0, 1, 4, 5, 6, 7}, 2) == (0, 1)  # 4-7 stays whole for a TP4


def test_longest_estimate_first_the_controllers_order_among_equals() -> None:
    ranked = rank([waiting("a", 1, 5, 0), waiting("b", 1, 9, 1), waiting("c", 1, 9, 2), waiting("d", 1, 1, 3)])
    assert [w.server_id for w in ranked] == ["b", "c", "a", "d"]


def test_a_server_starts_on_gpus_freed_early_ahead_of_the_order() -> None:
    # GPU 2 freed early; the next in the plan's order (a TP4) waits for 4-7, a TP1 later in the order fits now.
    running = [Running("x", (0, 1), 100.0, 30000), Running("y", (3,), 100.0, 30010), Running("z", (4, 5, 6, 7), 100.0, 30020)]
    choice = choose(POOL, running, [waiting("tp4", 4, 50, 0), waiting("tp1", 1, 10, 1)], now=10.0)
    assert choice == Placement("tp1", (2,))


def test_a_narrow_server_fills_gpus_a_wider_higher_ranked_one_cannot_use_yet() -> None:
    running = [Running("x", (0, 1, 2, 3), 60.0, 30000)]
    assert choose(POOL, running, [waiting("tp8", 8, 100, 0), waiting("tp1", 1, 80, 1)], now=10.0) == Placement("tp1", (4,))


def test_with_a_reservation_the_first_ranked_server_that_does_not_fit_holds_its_block() -> None:
    # (Off in the agent: measured worse; the benchmark replays it for the comparison.) The TP8
    # is the longest: it waits for the whole host; a TP1 that would end after the running
    # servers do must not start on the GPUs it waits for...
    running = [Running("x", (0, 1, 2, 3), 60.0, 30000)]
    assert choose(POOL, running, [waiting("tp8", 8, 100, 0), waiting("tp1", 1, 80, 1)], now=10.0, reserve=True) is None
    # ...one that ends before them may,
    assert choose(POOL, running, [waiting("tp8", 8, 100, 0), waiting("tp1", 1, 30, 1)], now=10.0, reserve=True) == Placement("tp1", (4,))
    # and where the reservation is a block of its own, the rest of the host is free to use.
    running = [Running("x", (0, 1, 2, 3), 20.0, 30000), Running("y", (4, 5), 60.0, 30010)]
    assert choose(POOL, running, [waiting("tp4", 4, 100, 0), waiting("tp1", 1, 80, 1)], now=10.0, reserve=True) == Placement("tp1", (6,))
    running = [Running("x", (0, 1, 2, 3), 60.0, 30000), Running("y", (4, 5), 20.0, 30010)]  # now it waits for 4-7
    assert choose(POOL, running, [waiting("tp4", 4, 100, 0), waiting("tp1", 1, 80, 1)], now=10.0, reserve=True) is None
    # A server past its estimate counts as ending now.
    running = [Running("x", (0, 1, 2, 3), 5.0, 30000)]
    assert choose(POOL, running, [waiting("tp8", 8, 100, 0), waiting("tp1", 1, 1, 1)], now=10.0, reserve=True) is None


def test_by_the_controllers_order_alone() -> None:
    assert choose(POOL, [], [waiting("late-long", 1, 99, 5), waiting("first", 1, 1, 0)], now=0.0, by_estimate=False) == Placement("first", (0,))


def test_gpus_a_foreign_process_holds_are_never_handed_out() -> None:
    assert choose(POOL, [], [waiting("a", 1, 5)], now=0.0, unusable={0, 1}) == Placement("a", (2,))
    assert choose(POOL, [], [waiting("a", 4, 5)], now=0.0, unusable={1}) == Placement("a", (4, 5, 6, 7))
    # Nothing of ours runs and nothing fits: the first-ranked goes on the block it would take, to
    # fail there with the holder as evidence, rather than wait for a stranger forever.
    assert choose((7,), [], [waiting("a", 1, 5)], now=0.0, unusable={7}) is None
    assert stuck((7,), [waiting("a", 1, 5)], {7}) == Placement("a", (7,), last_chance=True)
    assert stuck(POOL, [waiting("a", 4, 5)], {1}) == Placement("a", (0, 1, 2, 3), last_chance=True)


def test_two_servers_of_one_port_never_run_together() -> None:
    running = [Running("x", (0,), 50.0, 30000)]
    assert choose(POOL, running, [waiting("same-port", 1, 99, 0, port=30000), waiting("other", 1, 1, 1)], now=0.0) == Placement("other", (1,))


def test_exclusive_runs_one_server_at_a_time() -> None:
    assert choose(POOL, [Running("x", (0,), 50.0, 30000)], [waiting("a", 1, 5)], now=0.0, exclusive=True) is None
    assert choose(POOL, [], [waiting("a", 2, 5), waiting("b", 4, 9, 1)], now=0.0, exclusive=True) == Placement("b", (0, 1, 2, 3))


def test_a_slurm_grant_is_the_whole_pool() -> None:
    assert choose((2, 5), [], [waiting("a", 2, 5)], now=0.0) == Placement("a", (2, 5))


# ------------------------------------------------------------------------- a replay of the choice


def replay(pool: tuple[int, ...], servers: list[tuple[str, int, float, float]]) -> tuple[float, dict[str, tuple[int, ...]]]:
    """Makespan of the agent's dispatch when each server (id, GPUs, estimate, real seconds) takes
    its real seconds: an event at every end, the choice made again as the agent does."""
    pending = [waiting(sid, gpus, estimate, index) for index, (sid, gpus, estimate, _) in enumerate(servers)]
    real = {sid: seconds for sid, _, _, seconds in servers}
    running: dict[str, Running] = {}
    ends: list[tuple[float, str]] = []
    now, where = 0.0, {}
    while pending or running:
        while (choice := choose(pool, list(running.values()), pending, now)) is not None:
            server = next(w for w in pending if w.server_id == choice.server_id)
            pending.remove(server)
            running[server.server_id] = Running(server.server_id, choice.gpus, now + server.estimate_s, server.port)
            where[server.server_id] = choice.gpus
            heapq.heappush(ends, (now + real[server.server_id], server.server_id))
        now, ended = heapq.heappop(ends)
        running.pop(ended)
    return now, where


def fixed_order(servers: list[tuple[str, int, tuple[int, ...], float]]) -> float:
    """The agent before: each server on its planned GPUs, after the servers planned before it there."""
    free_at: dict[int, float] = {}
    for _, _, gpus, seconds in servers:
        start = max(free_at.get(g, 0.0) for g in gpus)
        for g in gpus:
            free_at[g] = start + seconds
    return max(free_at.values())


def test_dispatch_on_free_gpus_beats_the_fixed_order_when_estimates_are_wrong() -> None:
    # Planned by estimates: two TP1 queues of equal estimated length. Really, GPU 0's first
    # server ends early and GPU 1's runs long: the fixed order leaves GPU 0 idle.
    planned = [("a", 1, (0,), 10.0, 2.0), ("b", 1, (1,), 10.0, 18.0), ("c", 1, (0,), 10.0, 10.0), ("d", 1, (1,), 10.0, 10.0)]
    before = fixed_order([(sid, n, gpus, real) for sid, n, gpus, _, real in planned])
    after, where = replay((0, 1), [(sid, n, estimate, real) for sid, n, _, estimate, real in planned])
    assert before == 28.0 and after == 22.0
    assert where["d"] == (0,)  # started on the GPU "a" freed, ahead of its planned place after "b"
