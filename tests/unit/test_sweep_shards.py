"""The shards the controller writes: each server carries the SGLang release its plan was made for,
which the agent copies into every result."""

from __future__ import annotations

from pathlib import Path

from fleet.host.contract import Shard
from fleet.inventory import load_inventory
from fleet.plan import PlanOptions, hardware_of, make_plan
from fleet.playbook import load_playbook
from fleet.sweep.shards import build_shards
from tests.shipped import shipped_hosts

REPO = Path(__file__).resolve().parents[2]


def test_every_server_of_a_shard_names_its_planned_release(tmp_path: Path) -> None:
    hosts = [h for h in load_inventory(shipped_hosts(tmp_path)) if h.name == "local"]
    plan = make_plan(load_playbook(REPO / "playbooks" / "demo.yaml"), hosts, PlanOptions(memory_check=False, hardware={h.name: hardware_of(h) for h in hosts}))
    shard = build_shards(plan, {h.name: h for h in hosts}, "s1", {})["local"]
    planned = {s.config.id: s.engine_release for s in plan.servers}
    assert shard.servers and all(server.engine_release == planned[server.server_id] is not None for server in shard.servers)
    assert Shard.from_json(shard.to_json()) == shard  # and it survives the trip to the host
