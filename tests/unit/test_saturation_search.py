"""The saturation search's pure logic (fleet.host.agent.kinds.saturation) on synthetic goodput
curves: a monotone one and noisy ones, each with a known capacity. The search must bracket it to
its tolerance in at most 8 probes, the same rates for the same outcomes, and say so when the
capacity lies outside its range."""

from __future__ import annotations

import random
from typing import Callable

import pytest

from fleet.host.agent.kinds.saturation import Conclusion, Probe, SearchSpec, conclusion, next_rate, probes_needed
from fleet.host.contract.saturation import ABOVE_RANGE, BELOW_RANGE, FOUND, NOT_CONVERGED

Curve = Callable[[float], float]  # a probe's rate -> the share of its requests that met the SLO


def run_search(spec: SearchSpec, curve: Curve) -> tuple[Conclusion, list[Probe]]:
    probes: list[Probe] = []
    while (rate := next_rate(spec, probes)) is not None:
        probes.append(Probe(rate, curve(rate)))
    return conclusion(spec, probes), probes


def smooth(capacity: float, target: float, width: float) -> Curve:
    """Attainment falling linearly through `target` at `capacity`, over a relative `width`."""
    return lambda rate: min(1.0, max(0.0, target - (rate / capacity - 1) / width))


def noisy(capacity: float, target: float, seed: int, band: float) -> Curve:
    """A probe of 40 requests: each met the SLO with a probability that falls from 1 to 0 within
    `band` of the capacity (a binomial draw: a probe near the capacity may pass or fail)."""
    rng = random.Random(seed)

    def attainment(rate: float) -> float:
        chance = min(1.0, max(0.0, 0.5 - (rate / capacity - 1) / (2 * band)))
        return sum(rng.random() < chance for _ in range(40)) / 40

    return attainment


SPEC = SearchSpec(target=0.9, low=1.0, high=32.0, tolerance=0.05, max_probes=8, start=4.0)


@pytest.mark.parametrize("capacity", [1.3, 2.0, 4.0, 7.7, 12.5, 25.0, 31.0])
def test_a_monotone_curve_is_bracketed_to_the_tolerance_in_8_probes(capacity: float) -> None:
    found, probes = run_search(SPEC, smooth(capacity, SPEC.target, 0.2))
    assert found.verdict == FOUND and len(probes) <= 8, probes
    assert found.low is not None and found.high is not None and found.low <= capacity <= found.high <= found.low * 1.05
    assert abs(found.capacity - capacity) / capacity <= 0.05  # type: ignore[operator]
    assert probes[0].rate == SPEC.start


@pytest.mark.parametrize("seed", range(12))
def test_a_noisy_curve_is_found_within_its_noise_and_the_tolerance(seed: int) -> None:
    capacity = random.Random(seed).uniform(2.0, 20.0)
    spec = SearchSpec(target=0.9, low=1.0, high=32.0, tolerance=0.03, max_probes=8, start=8.0)
    found, probes = run_search(spec, noisy(capacity, spec.target, seed, band=0.02))
    assert len(probes) <= 8 and found.capacity is not None, probes
    # A probe within the noise band may pass or fail either way; beyond it the verdict is sure.
    assert abs(found.capacity - capacity) / capacity <= 0.02 + 0.03, (capacity, probes)


def test_the_same_outcomes_give_the_same_rates() -> None:
    first = run_search(SPEC, noisy(6.0, 0.9, 3, 0.05))[1]
    assert first == run_search(SPEC, noisy(6.0, 0.9, 3, 0.05))[1]


def test_a_capacity_outside_the_range_is_measured_at_its_end() -> None:
    above, probes = run_search(SPEC, lambda rate: 1.0)
    assert above.verdict == ABOVE_RANGE and above.capacity == SPEC.high and probes[-1].rate == SPEC.high and len(probes) <= 8
    below, probes = run_search(SPEC, lambda rate: 0.0)
    assert below.verdict == BELOW_RANGE and below.capacity is None and below.high == SPEC.low and probes[-1].rate == SPEC.low and len(probes) <= 8


def test_probes_running_out_leave_the_bracket_known() -> None:
    spec = SearchSpec(target=0.9, low=1.0, high=32.0, tolerance=0.05, max_probes=3, start=4.0)
    found, probes = run_search(spec, smooth(5.0, 0.9, 0.1))
    assert found.verdict == NOT_CONVERGED and len(probes) == 3 and found.low is not None and found.high is not None and found.low <= 5.0 <= found.high


def test_a_probe_with_no_request_sent_fails() -> None:
    assert not Probe(2.0, None).passed(0.5) and conclusion(SPEC, [Probe(2.0, None)]).high == 2.0


@pytest.mark.parametrize(("low", "high", "tolerance"), [(1.0, 32.0, 0.05), (4.0, 16.0, 0.03), (0.5, 200.0, 0.1), (1.0, 1.02, 0.05)])
def test_probes_needed_bounds_every_search(low: float, high: float, tolerance: float) -> None:
    needed = probes_needed(low, high, tolerance)
    spec = SearchSpec(target=0.5, low=low, high=high, tolerance=tolerance, max_probes=needed, start=low)
    for capacity in [low * (high / low) ** (i / 20) for i in range(21)]:
        for start in (low, (low * high) ** 0.5, high):
            found, probes = run_search(SearchSpec(**{**vars(spec), "start": start}), smooth(capacity * 1.0001, 0.5, 0.01))
            assert found.verdict != NOT_CONVERGED and len(probes) <= needed, (capacity, start, probes)


def test_the_plan_estimates_a_search_as_its_probes_not_as_one_run() -> None:
    """fleet plan's prior for a search: up to probes_needed probes of the requests each; before, a
    search was estimated as one run at its first rate (8 times too short here)."""
    from fleet.planning.estimate import run_seconds
    from fleet.playbook import Playbook, expand_runs

    def seconds(load: dict) -> float:
        workload = {"kind": "random", "input_tokens": 256, "max_new_tokens": 16, "requests": 40, "load": load, "slo": {"tpot": "50ms"}}
        book = Playbook.model_validate({"name": "e", "model": {"repo": "m/x", "card": "llama-3.1-8b-instruct"}, "methods": {"ar": {}}, "tp": [1], "workloads": {"w": workload}})
        return run_seconds(expand_runs(book)[0])

    one = seconds({"rate": 4, "burstiness": 100})
    searched = seconds({"rate": 4, "burstiness": 100, "search": {"target": 0.9, "rates": [1, 16], "tolerance": 0.05, "max_probes": 8}})
    probes = probes_needed(1, 16, 0.05)
    assert probes == 8
    # 8 probes of 40 requests at the range's geometric middle (4 req/s, the one run's rate): about
    # 8 times it, less the server warm-up both count once.
    assert probes - 1.5 < searched / one <= probes, (one, searched)
