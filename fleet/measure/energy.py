"""Energy and cost of a run. The energy math lives with the agent, which computes each run's
joules from its power samples (fleet.host.energy, re-exported here: one home); the cost of a
million tokens at a host file's `usd_per_gpu_hour` is the controller's (the report's). Pure."""

from __future__ import annotations

import math

from fleet.host.energy import energy_joules, tokens_per_joule

__all__ = ["dollars_per_million_tokens", "energy_joules", "tokens_per_joule"]


def dollars_per_million_tokens(tokens: int, seconds: float, gpus: int, dollars_per_gpu_hour: float) -> float | None:
    """What a million output tokens cost at `dollars_per_gpu_hour` for each of `gpus` GPUs held for
    `seconds`; None where no token was produced."""
    if dollars_per_gpu_hour <= 0 or not math.isfinite(dollars_per_gpu_hour):
        raise ValueError(f"a price must be a positive number of dollars per GPU-hour, got {dollars_per_gpu_hour!r}")
    if tokens <= 0:
        return None
    return gpus * seconds / 3600.0 * dollars_per_gpu_hour / tokens * 1e6
