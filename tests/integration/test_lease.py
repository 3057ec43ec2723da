"""Two sweeps aimed at one real SSH test host: the second (`fleet sweep`, and `fleet provision`) is
refused with a message naming the first -- its id, owner, since when, heartbeat age -- and exit 1,
before it touches anything; the first brings back every run exactly once, all ok, from one agent
that nobody restarted and whose servers nobody killed; its lease is gone at its end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.host.contract.lease import Lease
from fleet.inventory import load_inventory
from fleet.plan import make_plan
from fleet.playbook import load_playbook
from fleet.sweep.controller import start_sweep
from fleet.sweep.record import latest_sweep
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
LEASE = "/var/lib/fleet/lease.json"


def held_demo(directory: Path) -> Path:
    """demo.yaml with limits no hold by the test can reach: a server the test stops (SIGSTOP) in its
    start-up, or even in a run, is waited for, not failed, however long the second sweep takes."""
    data = yaml.safe_load(DEMO.read_text())
    data["limits"] = {**data["limits"], "server_start_timeout_s": 900, "request_timeout_s": 900, "no_token_timeout_s": 900}
    path = directory / "demo-held.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def engine_pids(fleet, host: str) -> set[int]:
    return {pid for pid, command in fleet.processes(host).items() if "fleet.host.engines.sim" in command}


def test_a_second_sweep_is_refused_naming_the_first_which_loses_nothing(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    # The first sweep is held running while the second one tries, however long that takes (a
    # loaded CI machine takes half a minute to start the second's CLI and gather facts): its
    # servers' engine processes are stopped (SIGSTOP) as they start, so its agent waits for them
    # (the limits of held_demo), and continued (SIGCONT) once both attempts have ended. Not a
    # slow sim racing the attempts (sim_speed 0.3 made the sweep last some 40 s for that alone).
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02})
    hosts = list(load_inventory(hosts_dir))
    playbook = held_demo(tmp_path)
    first_root = tmp_path / "first"
    first: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: first.update(outcome=start_sweep(playbook, hosts, first_root, poll_interval_s=0.5)))
    runner.start()
    stopped: set[int] = set()
    try:
        wait_for(lambda: (first_root / "LATEST").exists(), 60, "the first sweep's id")
        first_id = latest_sweep(first_root)
        progress = f"/var/lib/fleet/sweeps/{first_id}/progress.json"

        # The first engine process of the first sweep's servers, stopped at once; then, for a
        # moment, every other one as it appears (the servers start side by side). One held server
        # is enough: the agent cannot end its share without it.
        wait_for(lambda: engine_pids(fleet, "ct200"), 120, "a server of the first sweep starting", interval=0.005)
        for _ in range(100):
            for pid in engine_pids(fleet, "ct200") - stopped:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                stopped.add(pid)
            time.sleep(0.01)
        assert stopped
        agent_pid = json.loads(fleet.exec("ct200", ["cat", progress]).stdout)["agent_pid"]

        env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(tmp_path / "second"), "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "300"}
        # Both at once: `fleet sweep` and `fleet provision`, each aimed at the held host.
        attempts = [
            subprocess.Popen([sys.executable, "-m", "fleet", *argv, "-p", str(DEMO)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for argv in (["sweep", "--hosts", "ct200", "--poll", "0.5"], ["provision", "ct200"])
        ]
        (second_out, second_err), (provision_out, provision_err) = (a.communicate(timeout=240) for a in attempts)
        assert runner.is_alive(), "the first sweep ended before the second tried: the test proves nothing"
        lease = Lease.from_json(fleet.exec("ct200", ["cat", LEASE]).stdout)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        runner.join(timeout=400)
    assert not runner.is_alive()

    for attempt, out, err in zip(attempts, (second_out, provision_out), (second_err, provision_err)):
        said = " ".join((out + err).split())  # rich wraps long lines
        assert attempt.returncode == 1, said
        assert f"held by sweep {first_id} of {lease.owner} (controller pid {os.getpid()}; agent pid" in said, said
        assert "held since " in said and "s ago" in said, said
    assert lease.sweep_id == first_id and lease.holder_pid is not None
    second_sweep = next((tmp_path / "second").iterdir())
    assert not (second_sweep / "ct200").exists()  # no shard, nothing shipped: refused at provisioning
    assert fleet.exec("ct200", ["ls", "/var/lib/fleet/sweeps"]).stdout.split() == [first_id]

    # The first sweep: every planned run exactly once, all ok, from the one agent it started.
    outcome = first["outcome"]
    assert outcome.statuses["ct200"].phase == "finished", outcome.statuses["ct200"].last_error
    expected = {r.id for _, r in make_plan(load_playbook(playbook), hosts).runs}
    results = [json.loads(p.read_text()) for p in (outcome.directory / "ct200" / "runs").glob("*.json")]
    assert sorted(r["run_id"] for r in results) == sorted(expected)
    assert {r["status"] for r in results} == {"ok"}
    assert {r["agent_pid"] for r in results} == {agent_pid} and {r["attempt"] for r in results} == {1}
    assert outcome.statuses["ct200"].agent_restarts == 0
    assert "stale" not in (outcome.directory / "ct200" / "agent.log").read_text()
    # Released at its end: the host is free for the next sweep.
    assert fleet.exec("ct200", ["test", "-e", LEASE]).returncode == 1
