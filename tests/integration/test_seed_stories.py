"""The seed campaign's three failures, end to end on a real SSH test host with the sim engine:
fleet predicts, repairs, quarantines and shrinks where the hand-run scripts lost days."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.fixes.quarantine import QuarantineStore
from fleet.inventory import load_inventory
from fleet.plan import PlanOptions, hardware_of, make_plan
from fleet.playbook import load_playbook
from fleet.sweep.controller import start_sweep

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((REPO / "playbooks" / "qwen36-specdec.yaml").read_text())


def playbook(tmp_path: Path, name: str, **changes: Any) -> Path:
    data = {**SEED, "name": name, "tp": [1], **changes}
    data["limits"] = {"server_start_timeout_s": 120, "request_timeout_s": 60, "no_token_timeout_s": 20}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def results(directory: Path) -> dict[str, dict]:
    found = {}
    for path in directory.glob("*/runs/*.json"):
        result = json.loads(path.read_text())
        assert result["run_id"] not in found, "one result per run"
        found[result["run_id"]] = result
    return found


def by_label(found: dict[str, dict]) -> dict[str, list[dict]]:
    labels: dict[str, list[dict]] = {}
    for result in found.values():
        labels.setdefault(result["label"], []).append(result)
    return labels


@pytest.fixture
def host(test_fleet_factory, tmp_path: Path):
    fleet = test_fleet_factory(["ct200"])
    # The seed campaign ran SGLang 0.5.12: its hosts pin the release the simulator plays (engine.release).
    return list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02, "release": "0.5.12"})))


def seed_000(tmp_path: Path) -> Path:
    """DFlash at TP1 on a 96 GB GPU, mem 0.75, the seed's mamba settings, 8 requests instead of 4."""
    server = {**SEED["server"], "max_running_requests": 8, "mamba_scheduler_strategy": "extra_buffer", "flags": {"mamba-full-memory-ratio": 0.5}}
    return playbook(
        tmp_path,
        "seed-000",
        methods={"dflash": SEED["methods"]["dflash"]},
        server=server,
        workloads={"short": {"kind": "short", "prompts": ["fib"], "max_new_tokens": 64}},
    )


def test_max_running_requests_8_is_predicted_and_fixed_before_launch(host, tmp_path: Path) -> None:
    path = seed_000(tmp_path)
    hardware = {h.name: hardware_of(h) for h in host}
    plan = make_plan(load_playbook(path), host, PlanOptions(hardware=hardware))
    original, variant = plan.servers
    assert original.skip_reason and "max_running_request is zero" in original.skip_reason
    assert variant.provenance and variant.provenance["fix"] == "max_running_requests 8 -> 4"
    assert variant.config.id != original.config.id

    outcome = start_sweep(path, host, tmp_path / "results", poll_interval_s=0.5, quarantine=QuarantineStore(tmp_path / "q.json"))
    found = results(outcome.directory)
    statuses = sorted(r["status"] for r in found.values())
    assert statuses == ["ok", "skipped"], statuses
    skipped = next(r for r in found.values() if r["status"] == "skipped")
    assert "predicted to fail" in skipped["failure"]["message"]
    fixed = next(r for r in found.values() if r["status"] == "ok")
    assert fixed["provenance"]["original_config_id"] == original.config.id
    assert fixed["server"]["max_running_requests"] == 4


def test_max_running_requests_8_is_repaired_after_one_failure_when_the_planner_stays_out(host, tmp_path: Path) -> None:
    path = seed_000(tmp_path)
    outcome = start_sweep(path, host, tmp_path / "results", poll_interval_s=0.5, memory_check=False, quarantine=QuarantineStore(tmp_path / "q.json"))
    found = results(outcome.directory)
    failed = [r for r in found.values() if r["status"] == "failed"]
    fixed = [r for r in found.values() if r["status"] == "ok"]
    assert len(failed) == 1 and len(fixed) == 1, sorted(r["status"] for r in found.values())
    diagnosis = failed[0]["failure"]["diagnosis"]
    assert diagnosis["failure_class"] == "max_running_requests_zero"
    assert any("max_running_request is zero" in e["text"] for e in diagnosis["evidence"])
    provenance = fixed[0]["provenance"]
    assert provenance["failure_class"] == "max_running_requests_zero" and provenance["attempt"] == 1
    assert provenance["failed_run_id"] == failed[0]["run_id"]
    assert [f.action for f in outcome.fixes] == ["applied"]


def test_ddtree_b8_and_b12_are_quarantined_while_b15_and_above_complete(host, tmp_path: Path) -> None:
    path = playbook(
        tmp_path,
        "seed-002",
        methods={"ddtree": {**SEED["methods"]["ddtree"], "budgets": [8, 12, 15, 16]}},
        workloads={"short": {"kind": "short", "prompts": ["fib", "qsort"], "max_new_tokens": 256}},
    )
    store = QuarantineStore(tmp_path / "quarantine.json")
    first = start_sweep(path, host, tmp_path / "results", poll_interval_s=0.5, quarantine=store)
    labels = by_label(results(first.directory))
    for budget in (8, 12):
        (result,) = labels[f"tp1-ddtree-b{budget}/short"]
        assert result["status"] == "failed"
        assert result["failure"]["diagnosis"]["failure_class"] == "cuda_illegal_instruction"
    for budget in (15, 16):
        (result,) = labels[f"tp1-ddtree-b{budget}/short"]
        assert result["status"] == "ok" and result["figures"]["acceptance_length"] > 1
    keys = sorted(str(entry.key) for entry in store.list())
    assert len(keys) == 2 and all(k.startswith("sm_120/sim@0.5.12/DDTREE/") for k in keys), keys
    assert {k.rsplit("/", 1)[1] for k in keys} == {"b8", "b12"}

    # A later sweep skips them at planning time, with the reason; the others run again.
    second = start_sweep(path, host, tmp_path / "results", poll_interval_s=0.5, quarantine=store)
    labels = by_label(results(second.directory))
    for budget in (8, 12):
        (result,) = labels[f"tp1-ddtree-b{budget}/short"]
        assert result["status"] == "skipped" and "quarantined" in result["failure"]["message"]
    assert labels["tp1-ddtree-b15/short"][0]["status"] == "ok"

    # Lifted, they are planned again.
    for entry in store.list():
        store.lift(str(entry.key))
    plan = make_plan(load_playbook(path), host, PlanOptions(quarantine=store, hardware={h.name: hardware_of(h) for h in host}))
    assert not any(s.skip_reason for s in plan.servers)


def test_a_long_context_prompt_is_sized_to_fit_the_context(host, tmp_path: Path) -> None:
    """The seed built a ~32.7k-token prompt for a 32768 context and got HTTP 400s; fleet sizes the
    prompt by the server's own token count so prompt + new tokens + margin fit."""
    path = playbook(
        tmp_path,
        "seed-004",
        methods={"autoregressive": {}},
        workloads={"long_context": {"kind": "long_context", "prompt_tokens": 32700, "max_new_tokens": 256}},
    )
    outcome = start_sweep(path, host, tmp_path / "results", poll_interval_s=0.5, quarantine=QuarantineStore(tmp_path / "q.json"))
    (result,) = results(outcome.directory).values()
    # Cut to fit, the prompt is not the workload's 32700 tokens: the run says so (not_comparable), never plain ok.
    assert result["status"] == "not_comparable", result["failure"]
    assert [d["kind"] for d in result["deviations"]] == ["prompt_cut"]
    prompt_tokens = max(request["prompt_tokens"] for request in result["requests"])
    assert prompt_tokens + 256 <= 32768 - 64 < 32700 + 256
    assert result["calibration"]["chosen_prompt_tokens"] < 32700
