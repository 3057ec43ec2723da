"""Energy of a run from GPU power samples: the one home of this math, used by the agent (which
writes joules and tokens per joule into each result: fleet.host.agent.power) and by the controller
(fleet.measure.energy adds the cost). Pure; standard library only (shipped with the agent).

Samples are (time in seconds, watts) of one GPU, as a sampler records nvidia-smi's `power.draw`
(`fleet.host.nvidia_smi.parse_power`) during a run; `power.draw` is the driver's one-second
average, so samples every 0.5-1 s follow the load closely (the H200 capture rises from 78 W to
690 W within one second of a matmul loop starting).
"""

from __future__ import annotations

import math
from typing import Sequence


def energy_joules(samples: Sequence[tuple[float, float]], start: float, end: float, *, within: tuple[float, float] | None = None) -> float | None:
    """The energy one GPU drew over [start, end]: power interpolated linearly between samples
    (the trapezoid rule), held at the first and last sample's value beyond them. None without a
    sample in [start, end] (or in `within`, a span holding [start, end]: a run whose readings
    frame its measured stretches): a run shorter than the sampling interval has no reading of its
    own, and the power of a neighbouring moment would be a guess presented as a measurement."""
    if end < start:
        raise ValueError(f"a run ends before it starts: {start} .. {end}")
    points = sorted((t, w) for t, w in samples if math.isfinite(t) and math.isfinite(w))
    low, high = within if within is not None else (start, end)
    if not any(low <= t <= high for t, _ in points):
        return None

    def power(at: float) -> float:
        if at <= points[0][0]:
            return points[0][1]
        for (t0, w0), (t1, w1) in zip(points, points[1:]):
            if at <= t1:
                return w0 + (w1 - w0) * (at - t0) / (t1 - t0) if t1 > t0 else w1
        return points[-1][1]

    edges = [start, *(t for t, _ in points if start < t < end), end]
    return sum((b - a) * (power(a) + power(b)) / 2.0 for a, b in zip(edges, edges[1:]))


def tokens_per_joule(tokens: int, joules_per_gpu: Sequence[float]) -> float | None:
    """Output tokens per joule drawn by all the server's GPUs together (a TP4 server's tokens over
    four GPUs' energy); None where no energy was measured."""
    total = sum(joules_per_gpu)
    return tokens / total if total > 0 else None
