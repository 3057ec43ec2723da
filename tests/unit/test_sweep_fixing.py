"""The sweep's automatic fixes, from pulled results to the next round's shard (no hosts needed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fleet.fixes.quarantine import QuarantineStore
from fleet.host.contract import Failure, RunResult, RunStatus
from fleet.inventory import load_inventory
from fleet.plan import PlanOptions, hardware_of, make_plan
from fleet.playbook import load_playbook, server_configs
from fleet.sweep.fixing import NEW_PORT_STEP, SweepFixer, classify_result
from fleet.sweep.shards import build_shards
from tests.shipped import shipped_hosts

REPO = Path(__file__).resolve().parents[2]


def setup(tmp_path: Path):
    hosts = list(load_inventory(shipped_hosts(tmp_path)))
    playbook = load_playbook(REPO / "playbooks" / "demo.yaml")
    hardware = {h.name: hardware_of(h) for h in hosts}
    plan = make_plan(playbook, hosts, PlanOptions(memory_check=False, hardware=hardware))
    fixer = SweepFixer(playbook, {h.name: h for h in hosts}, hardware, QuarantineStore(tmp_path / "q.json"), "s1", {s.config.id: s for s in plan.servers})
    shard = build_shards(plan, {h.name: h for h in hosts}, "s1", {})["local"]
    return plan, fixer, shard


def result(run_id: str, status: RunStatus, failure: Failure | None = None, figures: dict | None = None) -> RunResult:
    return RunResult(
        run_id=run_id, label="l", server_id="s", server_label="s", sweep_id="s1", host="local", status=status, failure=failure, figures=figures or {}, workload={}, started_at=0.0, ended_at=1.0
    )


def failed(run_id: str, failure_class: str, figures: dict) -> RunResult:
    diagnosis = {"failure_class": failure_class, "figures": figures}
    return result(run_id, RunStatus.failed, Failure("server_start_failed", "the server exited", diagnosis=diagnosis))


def test_port_in_use_becomes_a_variant_on_another_port_with_its_own_id(tmp_path: Path) -> None:
    plan, fixer, shard = setup(tmp_path)
    server = plan.servers[0]
    runs = server.runs
    fixer.consider("local", [failed(r.id, "port_in_use", {"port": str(server.port)}) for r in runs])
    extended = fixer.next_round("local", shard)
    assert extended is not None
    (variant,) = [s for s in extended.servers if s.server_id not in {x.server_id for x in shard.servers}]
    assert variant.port == server.port + NEW_PORT_STEP
    assert f"--port {server.port + NEW_PORT_STEP}" in " ".join(variant.argv)
    assert {r.run_id for r in variant.runs}.isdisjoint({r.id for r in runs})  # never an overwrite of the failure
    assert all(r.provenance and r.provenance["failure_class"] == "port_in_use" for r in variant.runs)
    assert variant.engine_release == server.engine_release is not None  # the variant's results name their release too
    assert [f.action for f in fixer.records] == ["applied"] * len(runs)
    assert fixer.next_round("local", extended) is None  # nothing more pending


def test_results_already_seen_or_ok_are_not_fixed_twice(tmp_path: Path) -> None:
    plan, fixer, shard = setup(tmp_path)
    run = plan.servers[0].runs[0]
    fixer.consider("local", [result(run.id, RunStatus.ok)])
    assert fixer.next_round("local", shard) is None
    once = failed(run.id, "port_in_use", {})
    fixer.consider("local", [once])
    fixer.consider("local", [once])
    extended = fixer.next_round("local", shard)
    assert extended is not None and len(extended.servers) == len(shard.servers) + 1
    assert len(extended.servers[-1].runs) == 1


def test_request_errors_are_classified_with_the_catalogue() -> None:
    message = (
        "Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of "
        "33012 tokens: 32756 tokens from the input messages and 256 tokens for the completion. Please reduce the "
        "number of tokens in the input messages or the completion to fit within the limit."
    )
    errors = {"errors": {"http_400_context": {"count": 1, "sample": message}}}
    failure_class, figures = classify_result(result("r", RunStatus.failed, Failure("requests_failed", "1 of 1 requests failed"), errors))
    assert failure_class == "context_length_exceeded"
    assert figures["context_len"] == "32768" and figures["input_tokens"] == "32756"


def test_an_unpinned_configuration_keeps_its_id() -> None:
    first = server_configs(load_playbook(REPO / "playbooks" / "demo.yaml"))[0]
    assert "port" not in first.defining()
    assert replace(first, port=30050).id != first.id
