"""Repairs the planner already knows are hopeless (issue 25): a configuration the memory planner
judges unfixable by one change is planned infeasible, not run; a repair never proposes a variant
the planner predicts to fail the same way."""

from __future__ import annotations

from pathlib import Path

import yaml

from fleet.fixes.feasibility import check_config, hopeless, predicted_failure
from fleet.plan import Hardware, PlanOptions, make_plan
from fleet.playbook import Playbook
from tests.unit.fake_hosts import make_host
from tests.unit.test_autofix import RTX_PRO_6000_MIB, propose, seed_run

ROOT = Path(__file__).resolve().parents[2]


def b32(requests: int = 4):
    return seed_run("ddtree-b32", max_running_requests=requests)


def test_the_planner_judges_tp1_ddtree_b32_unfixable_on_0_5_23() -> None:
    verdict = check_config(b32().server, engine="sim", gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.23", fork="ddtree")
    assert hopeless(verdict) and "no single change" in verdict.reason


def test_a_repair_never_proposes_a_variant_predicted_to_fail_the_same_way() -> None:
    run = b32(4)
    # 4 -> 2 is what the blind ladder proposed; the planner says 2 fails the same way.
    assert predicted_failure(
        b32(2).server,
        "kv_pool_too_small",
        engine="sim",
        gpu_memory_mib=RTX_PRO_6000_MIB,
        engine_version="0.5.23",
        fork="ddtree",
    )
    fix = propose(run, "kv_pool_too_small", engine_version="0.5.23", engine_fork="ddtree")
    assert fix is None, fix.description if fix else None


def test_a_variant_the_planner_expects_to_start_is_still_proposed() -> None:
    # 0.5.12: the planner has a fix (max_running_requests 4 -> 1); it is proposed.
    fix = propose(b32(4), "kv_pool_too_small", engine_version="0.5.12", engine_fork="ddtree")
    assert fix is not None and fix.new_config is not None


def _playbook(requests: int) -> Playbook:
    data = yaml.safe_load((ROOT / "playbooks" / "qwen36-specdec.yaml").read_text())
    data["tp"] = [1]
    data["server"].update(max_running_requests=requests, mamba_scheduler_strategy="extra_buffer", flags={"mamba-full-memory-ratio": 0.5})
    return Playbook.model_validate(data)


def test_an_unfixable_configuration_is_planned_infeasible_and_not_run() -> None:
    host = make_host("ct200", kind="sim", gpus=8)
    book = _playbook(4)
    hardware = {"ct200": Hardware(RTX_PRO_6000_MIB, "sm_120", "0.5.23")}
    plan = make_plan(book, [host], PlanOptions(hardware=hardware))
    by_label = {s.config.label: s for s in plan.servers}
    b32_server = by_label["tp1-ddtree-b32"]
    assert b32_server.skip_reason and b32_server.skip_reason.startswith("infeasible: ") and "no single change" in b32_server.skip_reason
    # Asked to try anyway (--no-memory-check): launched as written.
    unchecked = make_plan(book, [host], PlanOptions(memory_check=False, hardware=hardware))
    assert not {s.config.label: s for s in unchecked.servers}["tp1-ddtree-b32"].skip_reason
