"""Engines side by side: where a sweep ran the same method, workload and level under two engines
on the same host type and TP size (a playbook's `engine: [sglang, vllm]`), each engine's output
tok/s with its interval and the ratio of the two with its own, in one table.

The ratio divides the later engine of fleet's list by the first (ENGINE_NAMES: vLLM ÷ SGLang). Its
interval is Fieller's for independent samples (the two engines' passes are different servers),
or paired where both sides hold the same passes; the verdict is the interval's (`stats.verdict`):
"faster" means the numerator engine is, and one pass gives an estimate and no verdict. Pure: the
report's cells in, rows out, one pass over the cells.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleet.host.engines import ENGINE_NAMES
from fleet.host.contract.results import FLEET_CLIENT
from fleet.host.engines import engine as engine_named
from fleet.measure.stats import Ratio, Verdict, verdict
from fleet.report.model import Cell, ratio_of


@dataclass(frozen=True)
class EnginePair:
    """One cell under two engines: `first` (SGLang) and `second` (vLLM), and second ÷ first."""

    host_type: str  # the GPU, simulated or not, and a client other than fleet's (the engines differ, so not the group's title)
    tp: int
    variant: str
    workload: str
    level: int
    first: Cell
    second: Cell
    ratio: Ratio

    @property
    def verdict(self) -> Verdict | None:
        return verdict(self.ratio) if self.ratio.interval is not None else None


def pair_titles() -> tuple[str, str]:
    """The two engines a pair compares, as people write them: ("SGLang", "vLLM")."""
    first, second = ENGINE_NAMES[:2]
    return engine_named(first).title, engine_named(second).title


def fixed(cell: Cell) -> str | None:
    """What a fix changed in the configuration a cell measured (a variant fleet made after a
    failure, `Row.fix`), None for the playbook's own configuration."""
    return next((row.fix for row in cell.measured if row.fix), None)


def engine_pairs(cells: Iterable[Cell]) -> tuple[list[EnginePair], list[str]]:
    """Every cell measured under both of the first two engines fleet knows (SGLang and vLLM), by
    host type, TP, method, workload and level, where both ran the playbook's configuration; and,
    for each pair left out because a fix changed one side's settings, why (the engines are
    compared only where everything else is equal)."""
    by_place: dict[tuple[str, bool, int, str, str, str, int], dict[str, Cell]] = {}
    for cell in cells:
        if not cell.passes:
            continue
        group = cell.key.group
        by_place.setdefault((group.gpu, group.simulated, group.tp, group.client, cell.key.variant, cell.key.workload, cell.key.level), {})[group.engine] = cell
    pairs, left_out = [], []
    for (gpu, simulated, tp, client, variant, workload, level), engines in sorted(by_place.items()):
        if not all(name in engines for name in ENGINE_NAMES[:2]):
            continue
        first, second = (engines[name] for name in ENGINE_NAMES[:2])
        host_type = (f"{gpu} (simulated)" if simulated else gpu) + ("" if client == FLEET_CLIENT else f" · measured by {client}")
        changed = [f"{engine_named(name).title}: {fix}" for name, cell in zip(ENGINE_NAMES, (first, second)) if (fix := fixed(cell))]
        if changed:
            left_out.append(f"TP{tp} {variant} {workload}" + (f" level {level}" if level else "") + f" ({'; '.join(changed)})")
            continue
        pairs.append(EnginePair(host_type, tp, variant, workload, level, first, second, ratio_of(second.passes, first.passes)))
    return pairs, left_out
