"""The tail of a sweep moves to a host that ran dry: on two test hosts where one runs five times
slower than planned, the fast one takes servers still queued on the slow one, through the
hand-over (asked in handover.json, released by the slow host's agent before it starts them), and
every planned run still has exactly one result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleet.inventory import load_inventory
from fleet.sweep.controller import start_sweep

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "playbooks" / "qwen36-specdec.yaml"


def test_the_tail_moves_to_the_idle_host_and_every_run_has_one_result(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200", "ct201"])
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.01})
    slow = hosts_dir / "ct200.yaml"
    entry = yaml.safe_load(slow.read_text())
    entry["engine"]["sim_speed"] = 0.05  # ct200 is five times slower than the plan thinks
    slow.write_text(yaml.safe_dump(entry))
    hosts = list(load_inventory(hosts_dir))
    # The seed's methods on TP1 and TP4 with two workloads: enough servers queued behind others.
    playbook = yaml.safe_load(SEED.read_text())
    playbook["tp"] = [1, 4]
    playbook["workloads"] = {name: playbook["workloads"][name] for name in ("short", "concurrency")}
    path = tmp_path / "seed-tail.yaml"
    path.write_text(yaml.safe_dump(playbook))
    events = []
    outcome = start_sweep(path, hosts, tmp_path / "results", poll_interval_s=0.5, on_event=lambda e: events.append(e.to_json()))
    directory = outcome.directory

    plan = json.loads((directory / "plan.json").read_text())
    planned_on = {run["id"]: run["host"] for run in plan["runs"]}
    by_run: dict[str, list[str]] = {}
    for path in directory.glob("*/runs/*.json"):
        by_run.setdefault(json.loads(path.read_text())["run_id"], []).append(path.parent.parent.name)
    assert set(planned_on) <= set(by_run), f"missing {sorted(set(planned_on) - set(by_run))[:5]}"
    assert not {r: h for r, h in by_run.items() if len(h) > 1}, "a run counted twice"

    moved = [e for e in events if e["type"] == "moved"]
    assert moved and all(e["host"] == "ct200" and e["to"] == "ct201" and e["why"] == "tail" for e in moved), moved
    ran_elsewhere = [r for r, hosts in by_run.items() if planned_on.get(r) == "ct200" and hosts == ["ct201"]]
    assert ran_elsewhere, "no run planned for ct200 ran on ct201"
    # The slow host's agent answered: what it released it never started (no log, no result there).
    answer = json.loads((directory / "ct200" / "released.json").read_text())
    assert answer["released"]
    shard = json.loads((directory / "ct200" / "shard.json").read_text())
    assert not set(answer["released"]) & {s["server_id"] for s in shard["servers"] if s["runs"] and not all(r["run_id"] in by_run for r in s["runs"])}
    for run_id in ran_elsewhere:
        assert not (directory / "ct200" / "runs" / f"{run_id}.json").exists()
    assert {s.phase for s in outcome.statuses.values()} == {"finished"}
    record = json.loads((directory / "sweep.json").read_text())
    assert record["state"] == "finished" and record["moves"] and not record["not_run"]
