"""The report's SLO frontier (fleet.report.saturation) on a real sim sweep (tests/fixtures/report)
whose autoregressive and DFlash results of one host type, TP and workload carry a search's
`saturation` section: each configuration's capacity with its bracket, the capacity probe's TPOT
and TTFT p90, and DFlash's capacity over the autoregressive one, below 1 where speculative decoding
no longer pays within the SLO. A sweep without a search has no such section."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from fleet.report import render, report_of
from fleet.report.saturation import HEADER, TITLE

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "sweep"
AUTOREGRESSIVE, DFLASH = "ct200/runs/d22ad807ca54.json", "ct200/runs/19b0dbb5d1a0.json"  # tp1-*/agentic, both ok


def probe(rate: float, attainment: float, tpot_p90: float) -> dict[str, Any]:
    summary = {"n": 20, "mean": tpot_p90, "p50": tpot_p90, "p90": tpot_p90, "p99": None, "max": tpot_p90}
    return {"repeat": 0, "probe": 0, "rate": rate, "passed": attainment >= 0.9, "tpot_s": summary, "ttft_s": {**summary, "p90": 0.25},
            "goodput": {"slo_s": {"tpot": 0.05}, "good_requests": int(20 * attainment), "request_goodput": rate * attainment, "slo_attainment": attainment}}  # fmt: skip


def section(probes: list[dict[str, Any]], verdict: str, low: float | None, high: float | None) -> dict[str, Any]:
    return {"target": 0.9, "rates": [1.0, 16.0], "tolerance": 0.05, "max_probes": 8, "slo_s": {"tpot": 0.05},
            "searches": [{"repeat": 0, "verdict": verdict, "capacity_rate": low, "bracket": [low, high], "probes": probes}]}  # fmt: skip


def with_search(folder: Path, name: str, saturation: dict[str, Any]) -> None:
    path = folder / name
    path.write_text(json.dumps({**json.loads(path.read_text()), "saturation": saturation}))


def test_the_frontier_shows_each_capacity_and_where_speculative_decoding_stops_paying(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    shutil.copytree(SWEEP, folder)
    with_search(folder, AUTOREGRESSIVE, section([probe(4.0, 1.0, 0.040), probe(8.0, 0.2, 0.070), probe(5.6, 0.95, 0.048), probe(6.0, 0.5, 0.052)], "found", 5.6, 6.0))
    with_search(folder, DFLASH, section([probe(4.0, 1.0, 0.030), probe(8.0, 0.0, 0.090), probe(4.2, 0.92, 0.049), probe(4.4, 0.3, 0.055)], "found", 4.2, 4.4))
    markdown = render(report_of([folder]), "md")
    assert f"## {TITLE}" in markdown and "| " + " | ".join(HEADER) + " |" in markdown
    rows = {line.split(" | ")[1]: line for line in markdown.splitlines() if line.startswith("| ") and "tpot ≤ 50 ms" in line}
    assert set(rows) == {"autoregressive", "dflash"}, rows
    assert "5.60 [5.60, 6.00)" in rows["autoregressive"] and "| 48.0 | 250.0 | — |" in rows["autoregressive"]
    # DFlash takes 4.2 requests per second within the SLO, the autoregressive server 5.6: 0.75.
    assert "4.20 [4.20, 4.40)" in rows["dflash"] and rows["dflash"].endswith("| 0.75 |")


def test_a_sweep_without_a_search_has_no_frontier() -> None:
    assert TITLE not in render(report_of([SWEEP]), "md")


def test_a_ratio_against_an_autoregressive_capacity_above_the_range_is_an_upper_bound(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    shutil.copytree(SWEEP, folder)
    with_search(folder, AUTOREGRESSIVE, section([probe(16.0, 1.0, 0.040)], "above_range", 16.0, None))
    with_search(folder, DFLASH, section([probe(4.0, 1.0, 0.030), probe(4.4, 0.3, 0.055)], "found", 4.2, 4.4))
    rows = {line.split(" | ")[1]: line for line in render(report_of([folder]), "md").splitlines() if line.startswith("| ") and "tpot ≤ 50 ms" in line}
    assert rows["autoregressive"].count("≥ 16.00") == 1
    # 4.2 over at least 16: at most 0.26, said so.
    assert rows["dflash"].endswith("| ≤ 0.26 |"), rows["dflash"]
