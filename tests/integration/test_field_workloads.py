"""The seed campaign's model and methods on the field's workloads (playbooks/qwen36-workloads.yaml,
issue 22) on a real SSH test host: a Spec-Bench-format dataset, a ShareGPT-format one and a
saturation search within an SLO, all through `fleet sweep`; the report answers by category
(acceptance length and per-request speed against autoregressive) and on the SLO frontier."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.inventory import load_inventory
from fleet.plan import make_plan
from fleet.playbook import load_playbook
from fleet.sweep.controller import start_sweep

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "playbooks" / "qwen36-workloads.yaml"
SPEC_BENCH_CATEGORIES = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities", "translation", "summarization", "qa", "math_reasoning", "rag"}


def section(report: str, title: str) -> list[list[str]]:
    """The table rows (cells) of the report's section `title`."""
    body = report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]


def test_the_field_workloads_answer_by_category_and_on_the_slo_frontier(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.05})))
    plan = make_plan(load_playbook(PLAYBOOK), hosts)
    outcome = start_sweep(PLAYBOOK, hosts, tmp_path / "results", poll_interval_s=0.5)
    report = subprocess.run(
        [sys.executable, "-m", "fleet", "report", str(outcome.directory), "--format", "md"], cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    text = report.stdout
    (tmp_path / "report.md").write_text(text)

    by_category = section(text, "By category")
    # header: host type and TP | workload | category | method | requests | accept len | per-request tok/s | vs autoregressive
    spec = [row for row in by_category if row[1] == "specbench"]
    assert {row[2] for row in spec} == SPEC_BENCH_CATEGORIES, by_category
    methods = {row[3] for row in spec}
    assert methods == {"autoregressive", "dflash", "ddtree-b15"}, methods
    for row in spec:
        if row[3] == "autoregressive":
            assert row[5] == "—" and row[7] == "—", row
        else:
            assert float(row[5]) > 1.0 and row[7].endswith("×"), row  # acceptance and speed-up per category
    # ShareGPT has no categories: it is in the per-configuration tables, not here.
    assert not any(row[1] == "sharegpt" for row in by_category)

    frontier = section(text, "SLO frontier")
    assert {row[1] for row in frontier} == {"autoregressive", "dflash", "ddtree-b15"}, frontier
    for row in frontier:
        assert row[2] == "slo" and "ttft ≤ 1500 ms" in row[3] and "tpot ≤ 150 ms" in row[3], row
        assert row[5] != "—" and int(row[6]) <= 8, row  # a capacity (or its bound) in at most 8 probes
    runs = {run.id for _, run in plan.runs}
    assert len(runs) == 9
