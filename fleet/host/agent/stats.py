"""Pure statistics for run figures. Standard library only."""

from __future__ import annotations

import math
from typing import Sequence


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


def summary(values: Sequence[float]) -> dict[str, float | int] | None:
    """mean, p50, p90, p99, min, max and count; None for no values (never a row of zeros)."""
    if not values:
        return None
    return {
        "mean": sum(values) / len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "min": min(values),
        "max": max(values),
        "count": len(values),
    }


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
