"""Figures as text, one way for every format: numbers, percentiles with their n, spreads,
statuses. A value that is not a measurement prints as "—", never as 0."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from fleet.host.agent.stats import min_samples
from fleet.report.model import Cell, Comparison, Spread

DASH = "—"
PERCENTILE_RULE = (
    f"A percentile is stated only where the sample supports it: p50 needs {min_samples(50)} values, "
    f"p90 {min_samples(90)}, p99 {min_samples(99)} (at least one value at or above it). Below that the "
    "table shows the maximum and n instead."
)
SIM_NOTE = (
    "Simulated runs (the `sim` engine) report durations and rates in simulated time: wall seconds "
    "divided by the host's sim_speed. They are marked simulated wherever they appear and only "
    "compare with other simulated figures."
)
ACCEPTANCE_NOTE = (
    "Acceptance length: accepted tokens per verify step, as SGLang counts it for the server "
    "(the prefill token is not counted): sum(completion_tokens - 1) / sum(spec_verify_ct) over the run's requests."
)


def number(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def when(epoch: float | None) -> str:
    if epoch is None:
        return DASH
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def percentile(figure: dict[str, Any] | None, q: int) -> str:
    """A latency percentile in ms with its n, or the max and n where the sample is too small."""
    if not figure:
        return DASH
    value = figure.get(f"p{q}")
    if value is not None:
        return f"{value * 1000:,.1f} ms (n={figure['n']})"
    return f"max {figure['max'] * 1000:,.1f} ms (n={figure['n']} < {min_samples(q)})"


def tok_s(spread_: Spread | None) -> str:
    return DASH if spread_ is None else number(spread_.mean)


def spread(spread_: Spread | None) -> str:
    if spread_ is None:
        return DASH
    if spread_.n < 2:
        return "n=1"
    return f"{spread_.low:,.1f}–{spread_.high:,.1f} (n={spread_.n}, ±{spread_.relative * 50:.1f}%)"


def speedup(cell: Cell) -> str:
    if cell.speedup is None:
        return DASH
    return f"{cell.speedup:.2f}×"


def status(cell: Cell) -> str:
    parts = [f"{name} ×{count}" if count > 1 else name for name, count in sorted(cell.statuses.items())]
    text = ", ".join(parts)
    fixes = sorted({r.fix for r in cell.measured if r.fix})
    if fixes:
        # A fixed variant runs other settings than the playbook's: say which, next to its figures.
        text += f" (fixed variant: {'; '.join(fixes)})"
    if cell.queued:
        text += " (level above the server's max_running_requests: queued)"
    return text


def reason(cell: Cell) -> str:
    if cell.measured:
        return ""
    reasons = cell.reasons
    return reasons[0] if len(reasons) == 1 else "; ".join(reasons[:2]) + (f" (+{len(reasons) - 2} more)" if len(reasons) > 2 else "")


def level(value: int) -> str:
    return str(value) if value else DASH


def delta(comparison: Comparison) -> str:
    return f"{comparison.delta * 100:+.1f}%"


def flag(comparison: Comparison) -> str:
    if not comparison.beyond_noise:
        return "within noise"
    return "FASTER" if comparison.delta > 0 else "SLOWER"


def short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
