"""The report's per-category table: where a dataset workload has categories (Spec-Bench's,
SPEED-Bench's, MT-Bench's), each method's acceptance length and per-request output tok/s in each
category, and beside a speculative method its per-request tok/s over the autoregressive one of the
same host type, TP, workload and category: how much speculative decoding pays depends on what is
asked (code is not translation), which a run-wide figure averages away.

The figures are the agent's per category (a result's `categories`, fleet.host.agent.results
`category_figures`): means over the category's requests, pooled over a configuration's results
weighted by their requests. The categories share one run's time, so there is no per-category
throughput, only per-request speed; and no interval here (the run-wide intervals above carry the
verdicts). vLLM states acceptance in its counters only, over a whole run: its per-category
acceptance is '—'. Pure: reports from what the report loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fleet.report import text
from fleet.report.load import SweepData
from fleet.report.model import GroupKey, Row

TITLE = "By category"
NOTE = (
    "Per category of a dataset workload: the mean over its requests of the acceptance length and of each request's own output tok/s, "
    "pooled over a configuration's results; 'vs autoregressive': that per-request tok/s over the autoregressive one of the same host "
    "type, TP, workload and category. Estimates without intervals: the categories share one run's time, and verdicts are the run-wide ones above."
)
HEADER = ["host type and TP", "workload", "category", "method", "requests", "accept len", "per-request tok/s", "vs autoregressive"]
NUMERIC = frozenset({4, 5, 6, 7})


@dataclass
class _Pool:
    """Request-weighted sums of one configuration's figures in one category."""

    requests: int = 0
    tok_s: float = 0.0
    tok_s_n: int = 0
    accept: float = 0.0
    accept_n: int = 0

    def add(self, figures: dict[str, object]) -> None:
        counts = figures.get("requests")
        ok = int(counts.get("ok") or 0) if isinstance(counts, dict) else 0
        self.requests += ok
        per_request = figures.get("output_tok_s_per_request")
        if isinstance(per_request, (int, float)) and ok:
            self.tok_s, self.tok_s_n = self.tok_s + per_request * ok, self.tok_s_n + ok
        accept = figures.get("acceptance_length")
        if isinstance(accept, (int, float)) and ok:
            self.accept, self.accept_n = self.accept + accept * ok, self.accept_n + ok

    @property
    def per_request_tok_s(self) -> float | None:
        return self.tok_s / self.tok_s_n if self.tok_s_n else None

    @property
    def acceptance_length(self) -> float | None:
        return self.accept / self.accept_n if self.accept_n else None


@dataclass(frozen=True)
class CategoryCell:
    group: GroupKey
    workload: str
    category: str
    variant: str
    speculative: bool
    pool: _Pool = field(compare=False)
    versus_autoregressive: float | None = None


def category_cells(sweeps: Sequence[SweepData], rows: Sequence[Row]) -> list[CategoryCell]:
    """Every (configuration, category) of the loaded results' dataset categories, in one pass."""
    identity = {(row.sweep_id, row.run_id): row for row in rows}
    pools: dict[tuple[GroupKey, str, str, str, bool], _Pool] = {}
    for sweep in sweeps:
        for loaded in sweep.results:
            categories = loaded.result.extras.get("categories")
            row = identity.get((loaded.result.sweep_id, loaded.result.run_id))
            if row is None or not row.comparable or not isinstance(categories, dict):
                continue
            for name, figures in categories.items():
                if isinstance(name, str) and isinstance(figures, dict):
                    pools.setdefault((row.group, row.workload, name, row.variant, row.speculative), _Pool()).add(figures)
    baselines = {(g, w, c): pool.per_request_tok_s for (g, w, c, _, speculative), pool in pools.items() if not speculative}
    cells = []
    for (group, workload, category, variant, speculative), pool in pools.items():
        base = baselines.get((group, workload, category))
        mine = pool.per_request_tok_s
        ratio = mine / base if speculative and mine is not None and base else None
        cells.append(CategoryCell(group, workload, category, variant, speculative, pool, ratio))
    return sorted(cells, key=lambda c: (c.group.title, c.workload, c.category, c.speculative, c.variant))


def table_rows(cells: Sequence[CategoryCell]) -> list[list[str]]:
    return [
        [c.group.title, c.workload, c.category, c.variant, str(c.pool.requests), text.number(c.pool.acceptance_length, 2), text.number(c.pool.per_request_tok_s),
         f"{c.versus_autoregressive:.2f}×" if c.versus_autoregressive is not None else text.DASH]
        for c in cells
    ]  # fmt: skip
