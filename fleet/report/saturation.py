"""The report's SLO frontier: per host type, TP, method and workload, the highest request rate a
saturation search found within the workload's SLO (a result's `saturation`,
fleet.host.contract.saturation), and beside a speculative method's, the ratio to the
autoregressive capacity of the same host type, TP, workload and repeat: where it is below 1,
speculative decoding no longer pays within the SLO. Pure: reports from what the report loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from fleet.host.contract.saturation import ABOVE_RANGE, BELOW_RANGE, FOUND, Saturation, SaturationProbe, SaturationSearch
from fleet.report import text
from fleet.report.load import SweepData
from fleet.report.model import GroupKey, Row

TITLE = "SLO frontier"
NOTE = (
    "Capacity: the highest request rate (requests per second, in the engine's time) at which a saturation search's probe "
    "met the target share of requests within every SLO, with the bracket it lies in: [highest passing, lowest failing). "
    "'≥': even the search's highest rate passed; '<': even its lowest failed; 'not converged': the probes ran out first. "
    "TPOT and TTFT p90 are the capacity's probe's. 'vs autoregressive': the capacity over the autoregressive one of the same "
    "host type, TP, workload and repeat ('≤' where the autoregressive capacity is only a lower bound, '≥' where this one is); below 1, speculative decoding does not pay within the SLO."
)
HEADER = ["host type and TP", "method", "workload", "SLO", "target", "capacity req/s [bracket]", "probes", "TPOT p90 ms", "TTFT p90 ms", "vs autoregressive"]
NUMERIC = frozenset({4, 6, 7, 8, 9})


@dataclass(frozen=True)
class Frontier:
    """One search: a configuration's capacity on one workload (one repeat of its run)."""

    group: GroupKey
    variant: str
    speculative: bool
    workload: str
    repeat: int
    repeats: int  # searches of its run
    slo_s: dict[str, float]
    target: float
    rates: tuple[float, float]  # the range searched
    search: SaturationSearch
    versus_autoregressive: float | None = None
    baseline: SaturationSearch | None = None  # the autoregressive search it is compared with

    @property
    def at_capacity(self) -> SaturationProbe | None:
        return next((p for p in self.search.probes if p.rate == self.search.capacity_rate), None)


def frontiers(sweeps: Sequence[SweepData], rows: Sequence[Row]) -> list[Frontier]:
    """Every search of the loaded results, each with its run's row identity (host type, TP, method)."""
    identity = {(row.sweep_id, row.run_id): row for row in rows}
    found: list[Frontier] = []
    for sweep in sweeps:
        for loaded in sweep.results:
            row = identity.get((loaded.result.sweep_id, loaded.result.run_id))
            saturation = Saturation.of(loaded.result)
            if row is None or saturation is None:
                continue
            for search in saturation.searches:
                found.append(Frontier(row.group, row.variant, row.speculative, row.workload, search.repeat, len(saturation.searches), saturation.slo_s, saturation.target, saturation.rates, search))
    baselines = {(f.group, f.workload, f.repeat): f.search for f in found if not f.speculative}
    return sorted(
        (
            Frontier(**{**vars(f), "versus_autoregressive": _ratio(f.search.capacity_rate, baselines.get((f.group, f.workload, f.repeat))), "baseline": baselines.get((f.group, f.workload, f.repeat))})
            if f.speculative
            else f
            for f in found
        ),
        key=lambda f: (f.group.title, f.workload, f.repeat, f.speculative, f.variant),
    )


def _ratio(capacity: float | None, baseline: SaturationSearch | None) -> float | None:
    return capacity / baseline.capacity_rate if capacity is not None and baseline is not None and baseline.capacity_rate else None


def versus(f: Frontier) -> str:
    """The ratio to autoregressive, with the side a bound lies on: a capacity above its search's
    range is only a lower bound (the ratio then an upper one, or a lower one for the numerator)."""
    if f.versus_autoregressive is None:
        return text.DASH
    mine_above = f.search.verdict == ABOVE_RANGE
    base_above = f.baseline is not None and f.baseline.verdict == ABOVE_RANGE
    bound = "≥ " if mine_above and not base_above else "≤ " if base_above and not mine_above else "~ " if mine_above and base_above else ""
    return bound + (text.number(f.versus_autoregressive, 2) or text.DASH)


def capacity(search: SaturationSearch, rates: tuple[float, float]) -> str:
    low, high = search.bracket
    if search.verdict == ABOVE_RANGE:
        return f"≥ {rates[1]:,.2f}"
    if search.verdict == BELOW_RANGE:
        return f"< {rates[0]:,.2f}"
    bracket = f"[{text.number(low, 2)}, {text.number(high, 2)})"
    return f"{text.number(search.capacity_rate, 2)} {bracket}" + ("" if search.verdict == FOUND else " not converged")


def slo(slo_s: dict[str, float]) -> str:
    return ", ".join(f"{name} ≤ {seconds * 1000:g} ms" for name, seconds in slo_s.items())


def table_rows(found: Sequence[Frontier]) -> list[list[str]]:
    rows = []
    for f in found:
        probe = f.at_capacity
        workload = f"{f.workload} (repeat {f.repeat})" if f.repeats > 1 else f.workload
        tpot, ttft = (probe.percentile("tpot_s", "p90"), probe.percentile("ttft_s", "p90")) if probe else (None, None)
        rows.append([
            f.group.title, f.variant, workload, slo(f.slo_s), f"{f.target:g}", capacity(f.search, f.rates), str(len(f.search.probes)),
            text.number(tpot * 1000 if tpot is not None else None), text.number(ttft * 1000 if ttft is not None else None),
            versus(f) if f.speculative else text.DASH,
        ])  # fmt: skip
    return rows
