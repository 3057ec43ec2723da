"""Goodput: the requests that met every SLO, as vllm bench serve's --goodput counts them (the
definition and its sources: fleet.host.agent.results). Standard library only. Below the workload
kinds, which judge probes by it (fleet.host.agent.kinds.listed), and the results, which report it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from fleet.host.agent.client import RequestOutcome


def goodput(outcomes: Sequence[RequestOutcome], slo_s: Mapping[str, float], wall_s: float) -> dict[str, Any]:
    """Requests that met every SLO (seconds, under vllm's names ttft, tpot, e2el), per second of
    `wall_s` (the definition and its sources: fleet.host.agent.results's docstring)."""
    met = dict.fromkeys(slo_s, 0)
    good = 0
    for outcome in outcomes:
        if not outcome.ok or outcome.ttft_s is None or outcome.e2e_s is None:
            continue
        observed = {"ttft": outcome.ttft_s, "tpot": outcome.tpot_s or 0.0, "e2el": outcome.e2e_s}
        passed = [name for name, limit in slo_s.items() if observed[name] <= limit]
        for name in passed:
            met[name] += 1
        if len(passed) == len(slo_s):
            good += 1
    sent = len(outcomes)
    return {
        "slo_s": dict(slo_s),
        "good_requests": good,
        "request_goodput": good / wall_s if wall_s > 0 else None,
        "slo_attainment": good / sent if sent else None,
        "attainment_by_metric": {name: count / sent for name, count in met.items()} if sent else None,
    }
