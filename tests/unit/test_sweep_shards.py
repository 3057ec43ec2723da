"""The shards the controller writes: each server carries the SGLang release its plan was made for,
which the agent copies into every result."""

from __future__ import annotations

from pathlib import Path

from fleet.host.contract import Shard
from fleet.inventory import load_inventory
from fleet.plan import PlanOptions, hardware_of, make_plan
from fleet.playbook import Isolation, load_playbook
from fleet.sweep.shards import build_shards
from tests.shipped import shipped_hosts
from tests.unit.fake_hosts import make_host

REPO = Path(__file__).resolve().parents[2]


def test_every_server_of_a_shard_names_its_planned_release(tmp_path: Path) -> None:
    hosts = [h for h in load_inventory(shipped_hosts(tmp_path)) if h.name == "local"]
    plan = make_plan(load_playbook(REPO / "playbooks" / "demo.yaml"), hosts, PlanOptions(memory_check=False, hardware={h.name: hardware_of(h) for h in hosts}))
    shard = build_shards(plan, {h.name: h for h in hosts}, "s1", {})["local"]
    planned = {s.config.id: s.engine_release for s in plan.servers}
    assert shard.servers and all(server.engine_release == planned[server.server_id] is not None for server in shard.servers)
    assert Shard.from_json(shard.to_json()) == shard  # and it survives the trip to the host


def test_a_shard_asks_for_gpu_counts_on_the_hosts_pool_with_estimates_and_a_port_each(tmp_path: Path) -> None:
    """The agent places servers as GPUs free up (fleet.host.agent.dispatch): the shard gives it the
    host's GPUs as the pool, each server's count (its plan's GPUs only as a hint) and estimate, and
    ports that let any two servers run side by side."""
    ct200 = make_host("ct200", gpus=8)
    playbook = load_playbook(REPO / "playbooks" / "qwen36-specdec.yaml")
    plan = make_plan(playbook, [ct200], PlanOptions(memory_check=False, hardware={ct200.name: hardware_of(ct200)}))
    shard = build_shards(plan, {ct200.name: ct200}, "s1", {})[ct200.name]
    assert shard.pool == tuple(range(8)) and not shard.exclusive
    planned = {s.config.id: s for s in plan.servers}
    for server in shard.servers:
        assert server.gpu_count == planned[server.server_id].config.tp
        assert server.estimate_s == round(planned[server.server_id].end_s - planned[server.server_id].start_s, 3) > 0
    ports = [server.port for server in shard.servers]
    assert len(set(ports)) == len(ports), ports
    # The controller's order is the plan's: earliest planned start first.
    starts = [planned[s.server_id].start_s for s in shard.servers]
    assert starts == sorted(starts)
    exclusive = make_plan(playbook.model_copy(update={"isolation": Isolation.exclusive}), [ct200], PlanOptions(memory_check=False))
    assert build_shards(exclusive, {ct200.name: ct200}, "s1", {})[ct200.name].exclusive


def test_dataset_and_random_workloads_plan_and_reach_the_agent_in_a_shard_it_reads(tmp_path: Path) -> None:
    """The field's workloads go the whole way: planned with an estimate, and written into a shard
    the agent's reader accepts (it refused their kinds, exit 2, and the planner raised TypeError)."""
    import json

    import yaml

    questions = tmp_path / "question.jsonl"
    questions.write_text("".join(json.dumps({"question_id": i, "category": "coding", "turns": [f"q{i}"]}) + "\n" for i in range(4)))
    book = yaml.safe_load((REPO / "playbooks" / "demo.yaml").read_text())
    book["workloads"] = {
        "specbench": {"kind": "dataset", "file": str(questions), "format": "spec_bench", "max_new_tokens": 32},
        "rate": {"kind": "random", "input_tokens": 64, "max_new_tokens": 16, "requests": 8, "load": {"rate": 4}},
    }
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump(book))
    hosts = [h for h in load_inventory(shipped_hosts(tmp_path)) if h.name == "local"]
    plan = make_plan(load_playbook(path), hosts, PlanOptions(memory_check=False, hardware={h.name: hardware_of(h) for h in hosts}))
    assert plan.runs and all(plan.run_estimates[plan.ids(run)].seconds > 0 for _, run in plan.runs)
    shard = build_shards(plan, {h.name: h for h in hosts}, "s1", {})["local"]
    kinds = {run.workload["kind"] for _, run in Shard.from_json(shard.to_json()).runs}
    assert kinds == {"dataset", "random"}
