"""A saturation search's section of a run result: `saturation`, beside the figures, in a run of a
`dataset` or `random` workload with a `load.search` (fleet.host.agent.kinds.listed writes it).
Optional, as a kind's sections are: a result without it -- any other run, and every result written
before searches existed -- reads as None, and its schema stays fleet.run_result/2.

Rates are requests per second of the result's time (simulated seconds on a sim host), like every
rate of a result. Each probe carries the figures of its own requests (fleet.host.agent.results'
`request_figures`: TTFT, TPOT and E2E summaries with their p50 and p90, throughput, schedule delay)
and its `goodput`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet.host.contract.reader import Reader
from fleet.host.contract.results import RunResult

FOUND = "found"  # the capacity lies in a bracket no wider than the tolerance
ABOVE_RANGE = "above_range"  # the range's upper rate passed: the capacity is at least that
BELOW_RANGE = "below_range"  # the range's lower rate failed: the capacity is below it
NOT_CONVERGED = "not_converged"  # the probes ran out first: the bracket is what is known
VERDICTS = (FOUND, ABOVE_RANGE, BELOW_RANGE, NOT_CONVERGED)

SECTION = "saturation"  # the result's key


@dataclass(frozen=True)
class SaturationProbe:
    rate: float
    passed: bool
    slo_attainment: float | None  # good requests / requests sent; None: none was sent
    request_goodput: float | None  # good requests per second
    figures: dict[str, Any]  # the probe's own request figures (ttft_s, tpot_s, ... as a run's)

    def percentile(self, figure: str, name: str) -> float | None:
        """A latency percentile of the probe (`ttft_s`, `p90`), None where its sample has none."""
        summary = self.figures.get(figure)
        return summary.get(name) if isinstance(summary, dict) else None


@dataclass(frozen=True)
class SaturationSearch:
    repeat: int
    verdict: str  # one of VERDICTS
    capacity_rate: float | None  # the highest passing rate probed; None when none passed
    bracket: tuple[float | None, float | None]  # the highest passing and the lowest failing rate probed
    probes: tuple[SaturationProbe, ...]


@dataclass(frozen=True)
class Saturation:
    target: float
    rates: tuple[float, float]
    tolerance: float
    max_probes: int
    slo_s: dict[str, float]
    searches: tuple[SaturationSearch, ...]

    @classmethod
    def of(cls, result: RunResult) -> Saturation | None:
        """The result's search, checked (a `ContractError` naming the field), or None without one."""
        data = result.extras.get(SECTION)
        if data is None:
            return None
        r = Reader(data, f"run result {result.run_id}", SECTION)
        rates = r.get("rates", list, "[lowest, highest] requests per second")
        if len(rates) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in rates):
            raise r.fail("rates", "[lowest, highest] requests per second", rates)
        slo = r.child("slo_s")
        return cls(
            target=r.number("target"),
            rates=(float(rates[0]), float(rates[1])),
            tolerance=r.number("tolerance"),
            max_probes=r.get("max_probes", int),
            slo_s={name: slo.number(name) for name in slo.data},
            searches=tuple(_search(s) for s in r.children("searches")),
        )


def _search(r: Reader) -> SaturationSearch:
    bracket = r.get("bracket", list, "[highest passing, lowest failing] rates, each a number or null")
    if len(bracket) != 2 or not all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0) for x in bracket):
        raise r.fail("bracket", "[highest passing, lowest failing] rates, each a number or null", bracket)
    capacity = r.optional("capacity_rate", float)
    return SaturationSearch(
        repeat=r.get("repeat", int),
        verdict=r.choice("verdict", VERDICTS),
        capacity_rate=capacity,
        bracket=(bracket[0], bracket[1]),
        probes=tuple(_probe(p) for p in r.children("probes")),
    )


def _probe(r: Reader) -> SaturationProbe:
    good = r.child("goodput")
    return SaturationProbe(
        rate=r.number("rate"),
        passed=r.get("passed", bool),
        slo_attainment=good.optional("slo_attainment", float),
        request_goodput=good.optional("request_goodput", float),
        figures=dict(r.data),
    )
