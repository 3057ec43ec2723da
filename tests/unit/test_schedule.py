"""Packing server configurations onto GPU slots."""

from __future__ import annotations

import itertools

from fleet.planning.schedule import HostSlots, Job, aligned_blocks, schedule


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
