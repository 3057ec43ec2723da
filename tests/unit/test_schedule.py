"""Packing server configurations onto GPU slots."""

from __future__ import annotations

import itertools

from fleet.planning.schedule import SEARCH_BUDGET, SHUFFLES, HostSlots, Job, SearchStats, aligned_blocks, orders_tried, schedule


def overlaps(a, b) -> bool:
    return a.host == b.host and set(a.gpus) & set(b.gpus) and a.start_s < b.end_s and b.start_s < a.end_s


def test_aligned_blocks() -> None:
    assert aligned_blocks(8, 4) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert aligned_blocks(8, 8) == [tuple(range(8))]
    assert len(aligned_blocks(8, 1)) == 8
    assert aligned_blocks(2, 4) == []


def test_eight_tp1_servers_run_side_by_side_on_an_8_gpu_host() -> None:
    jobs = [Job(f"j{i}", 1, 100.0) for i in range(8)]
    result = schedule(jobs, [HostSlots("ct200", 8)])
    assert result.makespan_s == 100.0
    assert sorted(p.gpus for p in result.placements) == [(i,) for i in range(8)]


def test_no_gpu_is_ever_shared_and_every_job_is_placed_once() -> None:
    jobs = [Job(f"tp{tp}-{i}", tp, 50.0 + 17 * i + tp) for tp in (1, 4, 8) for i in range(8)]
    result = schedule(jobs, [HostSlots("ct200", 8), HostSlots("ct201", 8)])
    assert sorted(p.job.key for p in result.placements) == sorted(j.key for j in jobs)
    for a, b in itertools.combinations(result.placements, 2):
        assert not overlaps(a, b), (a, b)
    for p in result.placements:
        assert len(p.gpus) == p.job.gpus and p.gpus[0] % p.job.gpus == 0
    assert result.makespan_s >= result.lower_bound_s
    assert result.makespan_s <= 1.3 * result.lower_bound_s


def test_exclusive_isolation_runs_one_server_per_host_at_a_time() -> None:
    jobs = [Job(f"j{i}", 1, 10.0) for i in range(4)]
    result = schedule(jobs, [HostSlots("a", 8), HostSlots("b", 8)], exclusive=True)
    assert result.makespan_s == 20.0
    for host in ("a", "b"):
        spans = [(p.start_s, p.end_s) for p in result.on_host(host)]
        assert spans == [(0.0, 10.0), (10.0, 20.0)]


def test_a_server_too_wide_for_every_host_is_reported_not_dropped() -> None:
    result = schedule([Job("tp8", 8, 10.0), Job("tp1", 1, 5.0)], [HostSlots("small", 4)])
    assert [u.job.key for u in result.unplaceable] == ["tp8"]
    assert "needs 8 GPUs; the largest host has 4" in result.unplaceable[0].reason
    assert [p.job.key for p in result.placements] == ["tp1"]


def test_trying_several_orders_beats_any_single_heuristic() -> None:
    # Long narrow servers and short wide ones: GPU-time-first puts the long TP1s last.
    jobs = [Job(f"tp8-{i}", 8, 40.0) for i in range(4)] + [Job(f"tp1-{i}", 1, 100.0) for i in range(4)]
    hosts = [HostSlots("a", 8), HostSlots("b", 8)]
    best = schedule(jobs, hosts)
    only_area_first = schedule(jobs, hosts, shuffles=0)
    assert best.makespan_s <= only_area_first.makespan_s
    assert best.makespan_s == 100.0 + 40.0  # the four TP1s run beside each other while the TP8s queue
    assert best == schedule(jobs, hosts)  # deterministic


def _mix(count: int) -> list[Job]:
    """A sweep's mix of server widths and lengths, `count` servers."""
    return [Job(f"s{i}", (1, 2, 4, 8)[i % 4], 60.0 + (i * 37) % 900) for i in range(count)]


EIGHT_HOSTS = [HostSlots(f"h{i}", 8) for i in range(8)]


def test_the_search_does_not_grow_faster_than_its_jobs() -> None:
    # Counted, not timed (issue 28: 203 orders of every plan, 24 ms per server): the GPU free times
    # the search looks at, per job, at 500 and at 5,000 servers on 8 hosts of 8 GPUs.
    small, large = SearchStats(), SearchStats()
    schedule(_mix(500), EIGHT_HOSTS, stats=small)
    schedule(_mix(5000), EIGHT_HOSTS, stats=large)
    assert large.gpu_visits / 5000 <= small.gpu_visits / 500
    assert large.gpu_visits <= max(SEARCH_BUDGET, 3 * 5000 * 64)  # the budget, or the three classic orders
    assert small.orders == orders_tried(500, 64) and large.orders == orders_tried(5000, 64) < small.orders
    assert orders_tried(50_000, 64) == 3  # beyond the budget: the classic orders alone, linear


def test_a_small_plan_still_tries_every_order() -> None:
    # The seed matrix on two 8-GPU hosts: every shuffle fits in the budget, as before the bound.
    assert orders_tried(24, 16) == 3 + SHUFFLES
    assert orders_tried(100, 64) == 3 + SHUFFLES
    assert orders_tried(1, 64) == 3


def test_bounded_search_keeps_the_plan_near_its_lower_bound() -> None:
    for count in (40, 400, 4000):
        result = schedule(_mix(count), EIGHT_HOSTS)
        assert len(result.placements) == count
        assert result.makespan_s <= 1.15 * result.lower_bound_s, (count, result.makespan_s / result.lower_bound_s)


def test_an_order_given_up_early_does_not_change_the_winner() -> None:
    # Orders stop once they reach the best makespan so far; the winner is the first shortest, as
    # when every order was placed in full.
    jobs = _mix(60)
    hosts = EIGHT_HOSTS[:2]
    stats = SearchStats()
    best = schedule(jobs, hosts, stats=stats)
    assert stats.placements < stats.orders * len(jobs)  # some orders were given up
    full = min(
        (schedule(jobs, hosts, shuffles=n, budget=10**12) for n in range(0, SHUFFLES + 1, 50)),
        key=lambda s: s.makespan_s,
    )
    assert best.makespan_s <= full.makespan_s
