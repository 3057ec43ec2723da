"""The saturation search, pure: from the probes measured so far to the next request rate, and from
all of them to the capacity found. Standard library only; no I/O (the probes are sent by
fleet.host.agent.kinds.listed, through the driver).

A probe is a short open-loop run at one rate; it passes when the share of its requests that met
every SLO (`slo_attainment`, as vllm bench serve's --goodput counts good requests) reaches the
target. The capacity is the highest rate that passes. The search keeps a bracket: the highest
passing rate probed (`low`) and the lowest failing one (`high`); every probe lies inside it, so a
noisy probe can move the bracket but never contradict it. The first probe is at the workload's
`rate` (a guess, e.g. what an earlier sweep found); then bisection in log space, since a rate's
error is relative. The ends of the search's range are probed only when the bracket reaches them, so
that "above the range" and "below the range" are measured, not assumed. Deterministic: the same
outcomes give the same rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from fleet.host.contract.saturation import ABOVE_RANGE, BELOW_RANGE, FOUND, NOT_CONVERGED


@dataclass(frozen=True)
class SearchSpec:
    """What the playbook asks (fleet.workloads.kinds.Search): rates in requests per engine second."""

    target: float  # share of a probe's requests that must meet every SLO
    low: float
    high: float
    tolerance: float  # the bracket's relative width at which the search stops
    max_probes: int
    start: float  # the first probe's rate

    @classmethod
    def from_load(cls, load: Mapping[str, Any]) -> SearchSpec:
        """The spec from a shard's resolved `load` (its `search` and its `rate`)."""
        search = load["search"]
        low, high = search["rates"]
        return cls(float(search["target"]), float(low), float(high), float(search["tolerance"]), int(search["max_probes"]), float(load["rate"]))


@dataclass(frozen=True)
class Probe:
    rate: float
    attainment: float | None  # good requests / requests sent; None: nothing was sent

    def passed(self, target: float) -> bool:
        return self.attainment is not None and self.attainment >= target


@dataclass(frozen=True)
class Conclusion:
    verdict: str  # one of fleet.host.contract.saturation.VERDICTS
    capacity: float | None  # the highest passing rate probed; None when none passed
    low: float | None  # the bracket: the highest passing rate and the lowest failing one probed
    high: float | None


def probes_needed(low: float, high: float, tolerance: float) -> int:
    """The most probes a search of [low, high] to `tolerance` takes: the first (anywhere in the
    range), the bisections of what is left in log space, and one at an end of the range."""
    halvings = math.ceil(math.log2(math.log(high / low) / math.log1p(tolerance))) if high / low > 1 + tolerance else 0
    return 2 + max(halvings, 0)


def _bracket(spec: SearchSpec, probes: Sequence[Probe]) -> tuple[float | None, float | None]:
    passing = [p.rate for p in probes if p.passed(spec.target)]
    failing = [p.rate for p in probes if not p.passed(spec.target)]
    return (max(passing) if passing else None), (min(failing) if failing else None)


def conclusion(spec: SearchSpec, probes: Sequence[Probe]) -> Conclusion:
    """What the probes so far establish."""
    low, high = _bracket(spec, probes)
    if low is not None and low >= spec.high:
        verdict = ABOVE_RANGE
    elif high is not None and high <= spec.low:
        verdict = BELOW_RANGE
    elif low is not None and high is not None and high <= low * (1 + spec.tolerance):
        verdict = FOUND
    else:
        verdict = NOT_CONVERGED
    return Conclusion(verdict, low, low, high)


def next_rate(spec: SearchSpec, probes: Sequence[Probe]) -> float | None:
    """The rate of the next probe; None when the search is over (converged, outside its range, or
    out of probes)."""
    if not probes:
        return min(max(spec.start, spec.low), spec.high)
    if len(probes) >= spec.max_probes or conclusion(spec, probes).verdict != NOT_CONVERGED:
        return None
    low, high = _bracket(spec, probes)
    if high is None and low is not None and spec.high <= low * (1 + spec.tolerance):
        return spec.high  # all passed up to within the tolerance of the range's end: is the end itself met?
    if low is None and high is not None and high <= spec.low * (1 + spec.tolerance):
        return spec.low
    return math.sqrt((low or spec.low) * (high or spec.high))
