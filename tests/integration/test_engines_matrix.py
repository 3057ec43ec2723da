"""The seed matrix with `engine: [sglang, vllm]` on two real SSH test hosts (issue 23, Must-show 4):
the simulator plays SGLang for one half and `vllm serve` for the other (its command line through
vLLM 0.33's parser as fleet rebuilds it, vLLM's log lines, /health, /v1/models, /v1/completions and
`vllm:` metrics); every run comes back once, each engine's failures are fixed or quarantined by
the same machinery, and the report sets the engines side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.inventory import load_inventory
from fleet.plan import make_plan
from fleet.playbook import load_playbook
from fleet.sweep.controller import start_sweep

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((REPO / "playbooks" / "qwen36-specdec.yaml").read_text())


def both_engines_seed(tmp_path: Path) -> Path:
    """The seed playbook under both engines: DDTree is the SGLang fork's method (vLLM has none), the
    rest runs under each. TP1 and TP4 and two budgets keep the sweep to minutes on a 2-core machine."""
    data: dict[str, Any] = {**SEED, "name": "seed-both-engines", "engine": ["sglang", "vllm"], "tp": [1, 4]}
    data["methods"] = {**SEED["methods"], "ddtree": {**SEED["methods"]["ddtree"], "budgets": [8, 16], "engines": ["sglang"]}}
    data["workloads"] = {
        "short": {"kind": "short", "prompts": ["fib", "qsort"], "max_new_tokens": 64},
        "concurrency": {"kind": "concurrency", "levels": "auto", "prompt": "qsort", "max_new_tokens": 64},
    }
    # A vLLM start that fails as vLLM fails (the KV cache of one 256k request does not fit in 0.75 of
    # the GPU beside the weights): the same repair machinery must fix it from vLLM's own error.
    data["overrides"] = [{"engine": "vllm", "tp": 1, "method": "dflash", "server": {"context_length": 262144}}]
    data["limits"] = {"server_start_timeout_s": 120, "request_timeout_s": 60, "no_token_timeout_s": 20}
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_seed_matrix_under_both_engines(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200", "ct201"])
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.01})
    hosts = list(load_inventory(hosts_dir))
    path = both_engines_seed(tmp_path)
    plan = make_plan(load_playbook(path), hosts)
    outcome = start_sweep(path, hosts, tmp_path / "results", poll_interval_s=0.5)

    results: dict[str, list[dict]] = {}
    for file in outcome.directory.glob("*/runs/*.json"):
        result = json.loads(file.read_text())
        results.setdefault(result["run_id"], []).append(result)
    expected = {run.id for _, run in plan.runs}
    assert expected <= set(results), f"missing: {sorted(expected - set(results))[:5]}"
    assert all(len(found) == 1 for found in results.values()), "one result per run"
    by_engine: dict[str, list[dict]] = {}
    for (result,) in results.values():
        by_engine.setdefault(result.get("engine", "sglang"), []).append(result)
    assert set(by_engine) == {"sglang", "vllm"}
    vllm = by_engine["vllm"]
    assert not any("ddtree" in r["label"] for r in vllm), "DDTree runs under SGLang only"
    # Every vLLM run served, or failed and was fixed (a variant that served) or quarantined, as SGLang's are.
    for result in vllm:
        if result["status"] != "ok":
            assert result["failure"]["class"] and (result["failure"]["evidence"] or result["failure"]["message"]), result["label"]
    # The 256k TP1 DFlash start fails as vLLM fails (its KV check), and the fix is the length vLLM
    # said fits: one variant, which serves.
    failed = [r for r in vllm if r["status"] == "failed" and "tp1-dflash" in r["label"]]
    assert failed and all(r["failure"]["diagnosis"]["failure_class"] == "kv_pool_too_small" for r in failed), [r["failure"] for r in failed]
    fixed = [r for r in vllm if (r.get("provenance") or {}).get("failure_class") == "kv_pool_too_small"]
    assert fixed and all(r["status"] == "ok" and r["provenance"]["fix"].startswith("context_length 262144 -> ") for r in fixed), [(r["label"], r["status"], r.get("provenance")) for r in fixed]
    ok = [r for r in vllm if r["status"] == "ok"]
    assert any("autoregressive" in r["label"] for r in ok) and any("dflash" in r["label"] for r in ok), [(r["label"], r["status"]) for r in vllm]
    for result in ok:
        assert result["engine_release"] == "0.33.0" and result["server"]["served_model"], result["label"]
        if "dflash/short" in result["label"]:
            # vLLM's acceptance, from its /metrics counters over the run: 1 + accepted / drafts.
            assert result["figures"]["acceptance_length"] and result["figures"]["acceptance_length"] > 1.0, result["figures"]
        if "concurrency" in result["label"]:
            # max_running_requests 4 reaches vLLM as --max-num-seqs 4; `auto` levels go up to it.
            assert result["server"]["max_running_requests"] == 4 and [level["level"] for level in result["levels"]] == [1, 2, 4], result["label"]
            if "dflash" in result["label"]:
                # Each level's own acceptance, from the counters around it; none run-wide (it would blend levels).
                assert all(level["acceptance_length"] and level["acceptance_length"] > 1.0 for level in result["levels"]), result["levels"]
                assert result["figures"].get("acceptance_length") is None

    report = subprocess.run(
        [sys.executable, "-m", "fleet", "report", str(outcome.directory), "--format", "md"], cwd=REPO, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "200"},
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    text = report.stdout
    side_by_side = text.split("## Engines side by side", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in side_by_side.splitlines() if line.startswith("| NVIDIA")]
    # Every method both engines ran, at every workload and level both measured (TP4: 2 methods x (short + 3 levels)).
    assert any("| 4 | dflash | short |" in row for row in rows) and any("| 4 | autoregressive | concurrency | 4 |" in row for row in rows), side_by_side
    assert "vLLM ÷ SGLang" in side_by_side
    # Only where everything else is equal: vLLM's TP1 DFlash ran with the fixed context, SGLang's did not.
    assert not any("| 1 | dflash |" in row for row in rows) and "TP1 dflash short (vLLM: context_length 262144 -> " in side_by_side, side_by_side
