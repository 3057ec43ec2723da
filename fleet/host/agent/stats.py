"""Pure statistics for run figures. Standard library only.

The one rule for percentiles (the report and every result follow it): a percentile q is stated
only when the sample has at least `min_samples(q)` values -- ceil(100 / (100 - q)), the smallest
sample in which at least one value lies at or above the q-th percentile: p50 needs 2, p90 needs
10, p99 needs 100. Below that the percentile is null, and the figure still carries its `n` and
its `max` (what a p99 of 4 requests would have been: the slowest one, named as such).
"""

from __future__ import annotations

import math
from typing import Sequence

PERCENTILES = (50, 90, 99)


def min_samples(q: float) -> int:
    """How many values a q-th percentile needs before it says more than the maximum does."""
    if not 0 <= q < 100:
        raise ValueError(f"percentile q must be within 0..100 (exclusive of 100), got {q}")
    return math.ceil(100 / (100 - q) - 1e-9)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks -- the
    definition numpy uses by default, so figures compare with other tools'. `values` non-empty."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None] | None:
    """n, mean, min, max and p50/p90/p99 where the sample supports them (see the module's rule;
    null otherwise); None for no values (never a row of zeros)."""
    if not values:
        return None
    figures: dict[str, float | int | None] = {"n": len(values), "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
    for q in PERCENTILES:
        figures[f"p{q}"] = percentile(values, q) if len(values) >= min_samples(q) else None
    return figures


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator; None when there is nothing to divide (no zero stands for "unknown")."""
    if denominator <= 0 or numerator <= 0:
        return None
    return numerator / denominator


def histogram(values: Sequence[int]) -> dict[str, int]:
    """Counts per value, keys as strings (JSON object keys), in ascending value order."""
    counts: dict[int, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return {str(key): counts[key] for key in sorted(counts)}
