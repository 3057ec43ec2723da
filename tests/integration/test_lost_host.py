"""A host gone for good mid-sweep (powered off, never back): after `limits.host_lost_after_s` the
controller declares it lost, keeps what it had brought back, moves every other run of its share
to the live host, ends with a true state, a summary and exit code 1, and never counts a run twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from fleet.sweep.record import latest_sweep
from tests.integration.waiting import results_by_run, wait_for

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "playbooks" / "qwen36-specdec.yaml"
LOST_AFTER_S = 6


def test_a_host_powered_off_for_good_is_declared_lost_and_its_runs_move(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200", "ct201"])
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.01})
    results_root = tmp_path / "results"
    # The deadline comes from the playbook (validated with the other limits).
    playbook = yaml.safe_load(SEED.read_text())
    playbook.setdefault("limits", {})["host_lost_after_s"] = LOST_AFTER_S
    # The seed's methods on TP1 and TP4 with one workload: a share long enough to lose mid-way
    # (eight servers a host), short enough for CI.
    playbook["tp"] = [1, 4]
    playbook["workloads"] = {"short": playbook["workloads"]["short"]}
    path = tmp_path / "seed-lost.yaml"
    path.write_text(yaml.safe_dump(playbook))
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(results_root), "COLUMNS": "200"}
    controller = subprocess.Popen(
        [sys.executable, "-m", "fleet", "sweep", "-p", str(path), "--hosts", "ct200,ct201", "--poll", "0.5", "--json"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: (results_root / "LATEST").exists(), 60, "the sweep to be recorded")
        sweep_id = latest_sweep(results_root)
        directory = results_root / sweep_id
        # ct201 has brought some results back, and has more to do: then its power goes, for good.
        wait_for(lambda: len(list((directory / "ct201" / "runs").glob("*.json"))) >= 3, 240, "ct201's first results pulled")
        fleet.power_off("ct201")
        off_at = time.time()
        stdout, stderr = controller.communicate(timeout=400)
    finally:
        if controller.poll() is None:
            controller.kill()
    assert controller.returncode == 1, stderr[-3000:]  # the work ran, a host was lost: 1, not 0, not a hang

    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    summary = events[-1]
    assert summary["type"] == "summary", events[-3:]
    lost_phase = [e for e in events if e["type"] == "phase" and e["host"] == "ct201" and e["phase"] == "lost"]
    assert lost_phase, [e for e in events if e["host"] == "ct201"][-5:]
    moved = [e for e in events if e["type"] == "moved"]
    assert moved and all(e["host"] == "ct201" and e["to"] == "ct200" and e["why"].startswith("lost") for e in moved)

    record = json.loads((directory / "sweep.json").read_text())
    assert record["state"] == "finished", record  # every run has its result, on the host that was left
    assert "ct201" in record["lost"] and "host_lost_after_s" in record["lost"]["ct201"]
    assert summary["lost"] == record["lost"] and summary["not_run"] == {}
    assert summary["hosts"]["ct201"]["phase"] == "lost" and summary["hosts"]["ct200"]["phase"] == "finished"

    plan = json.loads((directory / "plan.json").read_text())
    expected = {run["id"] for run in plan["runs"]}
    by_run = results_by_run(directory)
    assert expected <= set(by_run), f"missing {sorted(expected - set(by_run))[:5]}"
    assert not {r: h for r, h in by_run.items() if len(h) > 1}, "a run counted twice"
    # Beyond the plan only the fixes' variants (of runs that failed), as in any sweep.
    for run_id in set(by_run) - expected:
        failed = (json.loads(next(directory.glob(f"*/runs/{run_id}.json")).read_text()).get("provenance") or {}).get("failed_run_id")
        assert failed in by_run, run_id
    # What ct201 had brought back before it went is kept and reported as its own.
    assert any(hosts == ["ct201"] for hosts in by_run.values())
    # Noticed within the deadline and a retry's back-off, not after the transport's two-minute retries.
    noticed = datetime.strptime(lost_phase[0]["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    print(f"time to notice: {noticed - off_at:.1f} s (limits.host_lost_after_s {LOST_AFTER_S})")
    assert noticed - off_at < LOST_AFTER_S + 30

    # The host comes back, with a late result of a run that moved: a resume does not ask it again,
    # and the run still has one result.
    moved_run = next(run for run, hosts in by_run.items() if hosts == ["ct200"] and planned_on(plan, run) == "ct201")
    fleet.power_on("ct201")
    late = fleet["ct201"].persistent_path(f"/var/lib/fleet/sweeps/{sweep_id}/runs/{moved_run}.json")
    late.parent.mkdir(parents=True, exist_ok=True)
    late.write_text((directory / "ct200" / "runs" / f"{moved_run}.json").read_text())
    resumed = subprocess.run(
        [sys.executable, "-m", "fleet", "sweep", "--resume", sweep_id, "--poll", "0.5", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert resumed.returncode == 1, resumed.stderr[-2000:]  # still a sweep with a lost host
    assert results_by_run(directory)[moved_run] == ["ct200"]
    assert not (directory / "ct201" / "runs" / f"{moved_run}.json").exists()


def planned_on(plan: dict, run_id: str) -> str:
    return next(run["host"] for run in plan["runs"] if run["id"] == run_id)
