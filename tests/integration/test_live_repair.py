"""A fixed variant starts in the running agent (issue 12): on a real test host, a server that
fails (the seed's TP1 DDTree b32: "max_running_requests is zero" at 4) is fixed while
another, long server of the same host still runs; the variant is appended to the running agent's
shard and launched by that same agent -- no second agent, no repair round -- and every run has
exactly one result."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from fleet.inventory import load_inventory
from fleet.plan import PlanOptions, make_plan
from fleet.playbook import load_playbook
from fleet.sweep.controller import start_sweep

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "playbooks" / "qwen36-specdec.yaml"

# The agent's log lines (fleet.host.agent.runner; asctime as fleet.host.agent.__main__ formats it).
LAUNCH = re.compile(r"^(\S+ \S+) fleet-agent INFO server (\S+) \((\S+)\): launching on GPUs ([0-9,]+)$")
STOPPED = re.compile(r"^(\S+ \S+) fleet-agent INFO server (\S+) \((\S+)\): stopped, GPUs [0-9,]* handed back$")
GREW = re.compile(r"^\S+ \S+ fleet-agent INFO shard grew: server (\S+) \((\S+)\) appended, (\d+) runs$")
AGENT_START = re.compile(r"fleet-agent INFO sweep \S+: \d+ runs")


def at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_a_fixed_variant_starts_in_the_running_agent_beside_a_long_server(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02})))
    # TP1 only: the autoregressive server with every workload, twice over (the long one, ~25 s),
    # and DDTree b32, which fails in seconds at max_running_requests 4 and is fixed twice (-> 2 -> 1).
    # The planner knows no single change fixes b32 (it would plan it infeasible, and veto those
    # repairs): the sweep runs with memory_check=False, every configuration tried for real.
    playbook = yaml.safe_load(SEED.read_text())
    playbook.update(tp=[1], repeats=2)
    playbook["methods"] = {"autoregressive": {}, "ddtree": {**playbook["methods"]["ddtree"], "budgets": [32]}}
    path = tmp_path / "live-repair.yaml"
    path.write_text(yaml.safe_dump(playbook))

    events: list[dict] = []
    outcome = start_sweep(path, hosts, tmp_path / "results", poll_interval_s=0.5, memory_check=False, on_event=lambda e: events.append(e.to_json()))
    host_dir = outcome.directory / "ct200"
    assert outcome.statuses["ct200"].phase == "finished", outcome.statuses["ct200"].last_error

    # Every run exactly one result: the plan's, and the variants', each of a run that failed.
    planned = {run.id for _, run in make_plan(load_playbook(path), hosts, PlanOptions(memory_check=False)).runs}
    results = {p.stem: json.loads(p.read_text()) for p in (host_dir / "runs").glob("*.json")}
    assert planned <= set(results), f"missing {sorted(planned - set(results))}"
    variants = {run_id: r for run_id, r in results.items() if run_id not in planned}
    assert variants, "no fixed variant ran"
    for result in variants.values():
        failed = (result.get("provenance") or {}).get("failed_run_id")
        assert failed in results and results[failed]["status"] in ("failed", "partial"), result["label"]
    # Two fixes in a row (4 -> 2, then 2 -> 1; on these test GPUs b32 fits at none of them), each
    # a variant of the one before, each appended to the running agent in its turn.
    assert sorted({r["provenance"]["attempt"] for r in variants.values()}) == [1, 2]
    # One file per run id, so a run done twice would leave one result: its attempt says so.
    assert {run_id: r["attempt"] for run_id, r in results.items() if r["attempt"] != 1} == {}

    # One agent did it all: started once, and it took the variants in while it ran.
    log = (host_dir / "agent.log").read_text().splitlines()
    assert sum(bool(AGENT_START.search(line)) for line in log) == 1, "the agent was started again (a repair round)"
    assert not [e for e in events if e["type"] == "agent_restart"]
    grew = {m.group(2) for line in log if (m := GREW.match(line))}
    variant_servers = {r["server_id"] for r in variants.values()}
    assert variant_servers <= grew, f"variants not appended to the running agent: {variant_servers - grew}"

    launched = {m.group(3): at(m.group(1)) for line in log if (m := LAUNCH.match(line))}
    stopped = {m.group(3): at(m.group(1)) for line in log if (m := STOPPED.match(line))}
    long_server = next(r["server_id"] for r in results.values() if r["run_id"] in planned and "autoregressive" in r["label"])
    for server_id in variant_servers:
        # Launched while the long server of the same host still ran.
        assert launched[long_server] < launched[server_id] < stopped[long_server], (server_id, launched, stopped)
    # And the results say so too: a variant's runs ended before the long server's last run did.
    long_end = max(r["ended_at"] for r in results.values() if r["server_id"] == long_server)
    assert all(r["ended_at"] < long_end for r in variants.values())
