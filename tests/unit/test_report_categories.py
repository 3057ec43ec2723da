"""The report's per-category table (fleet.report.categories) on a real sim sweep (tests/fixtures/
report) whose autoregressive and DFlash results of one host type, TP and workload carry a dataset's
per-category figures, as the agent writes them (fleet.host.agent.results.category_figures): each
category's acceptance length and per-request tok/s, pooled over results by their requests, and the
speculative method's per-request speed over the autoregressive one in the same category."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from fleet.report import render, report_of
from fleet.report.categories import HEADER, TITLE

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "sweep"
AUTOREGRESSIVE, DFLASH = "ct200/runs/d22ad807ca54.json", "ct200/runs/19b0dbb5d1a0.json"  # tp1-*/agentic, both ok


def figures(ok: int, per_request: float, accept: float | None) -> dict[str, Any]:
    return {"requests": {"sent": ok, "ok": ok, "failed": 0, "timed_out": 0}, "output_tok_s_per_request": per_request, "acceptance_length": accept}


def with_categories(folder: Path, name: str, categories: dict[str, Any]) -> None:
    path = folder / name
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "categories": categories}))


def rows_of(markdown: str) -> dict[tuple[str, str], list[str]]:
    body = markdown.split(f"## {TITLE}\n", 1)[1].split("\n## ", 1)[0]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    assert cells[0] == HEADER
    return {(row[2], row[3]): row for row in cells[1:]}


def test_each_category_has_its_acceptance_and_its_speed_up(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    shutil.copytree(SWEEP, folder)
    with_categories(folder, AUTOREGRESSIVE, {"coding": figures(4, 25.0, None), "translation": figures(2, 26.0, None)})
    with_categories(folder, DFLASH, {"coding": figures(4, 100.0, 6.0), "translation": figures(2, 52.0, 2.5)})
    rows = rows_of(render(report_of([folder]), "md"))
    assert rows[("coding", "dflash")][4:] == ["4", "6.00", "100.0", "4.00×"]
    assert rows[("translation", "dflash")][4:] == ["2", "2.50", "52.0", "2.00×"]  # code pays more than translation
    assert rows[("coding", "autoregressive")][5] == "—" and rows[("coding", "autoregressive")][7] == "—"


def test_figures_are_pooled_by_requests_and_a_category_without_a_baseline_has_no_ratio(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    shutil.copytree(SWEEP, folder)
    with_categories(folder, AUTOREGRESSIVE, {"coding": figures(3, 30.0, None)})
    with_categories(folder, DFLASH, {"coding": figures(1, 90.0, 5.0), "rag": figures(2, 40.0, 3.0)})
    # A second DFlash result of the same configuration: its coding requests weigh 3 to the first's 1.
    second = folder / "ct200" / "runs" / "19b0dbb5d1a1.json"
    data = json.loads((folder / DFLASH).read_text())
    data["run_id"] = second.stem
    second.write_text(json.dumps({**data, "categories": {"coding": figures(3, 50.0, 3.0)}}))
    rows = rows_of(render(report_of([folder]), "md"))
    coding = rows[("coding", "dflash")]
    assert coding[4:6] == ["4", "3.50"] and coding[6] == "60.0" and coding[7] == "2.00×"  # (90 + 3 x 50) / 4 = 60; 60 / 30
    assert rows[("rag", "dflash")][7] == "—"  # no autoregressive rag to divide by


def test_a_sweep_without_categories_has_no_such_section() -> None:
    assert f"## {TITLE}" not in render(report_of([SWEEP]), "md")
