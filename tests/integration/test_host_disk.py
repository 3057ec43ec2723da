"""A host's results folder that is full (a small tmpfs over it) or read-only (the same, remounted
read-only), on a real SSH test host: the agent stops launching servers at the first result it
cannot write, stops the one it runs, and says why; the controller reports the host failed with
that reason (exit 1 by the command line's rule), and nothing is left running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.inventory import load_inventory
from fleet.sweep import controller
from fleet.sweep.controller import start_sweep
from fleet.sweep.hoststatus import Phase

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"


def exclusive_demo(tmp_path: Path) -> Path:
    """The demo with one server at a time on the host: what the agent launches after the failure shows."""
    playbook = tmp_path / "demo-exclusive.yaml"
    playbook.write_text(DEMO.read_text() + "\nisolation: exclusive\n")
    return playbook


@pytest.mark.parametrize(
    ("kind", "said"),
    [("full", "No space left on device (ENOSPC)"), ("read-only", "Read-only file system (EROFS)")],
)
def test_an_unwritable_results_folder_stops_the_agent_and_fails_the_host_with_the_reason(test_fleet_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, said: str) -> None:
    sweep_id = f"demo-disk-{kind}"
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: sweep_id)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fleet = test_fleet_factory(["ct200"])
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02})))
    sweep_dir = f"/var/lib/fleet/sweeps/{sweep_id}"
    runs = f"{sweep_dir}/runs"
    # Room for one result at most (a result is several KiB), or none at all.
    fleet.mount_tmpfs("ct200", runs, "8k")
    if kind == "read-only":
        remount = fleet.exec("ct200", ["mount", "-o", "remount,ro", runs])
        assert remount.returncode == 0, remount.stderr
    try:
        outcome = start_sweep(exclusive_demo(tmp_path), hosts, tmp_path / "results", poll_interval_s=0.5)
        status = outcome.statuses["ct200"]
        progress = json.loads(fleet.exec("ct200", ["cat", f"{sweep_dir}/progress.json"]).stdout)
        server_logs = fleet.exec("ct200", ["ls", f"{sweep_dir}/logs"]).stdout.split()
        left = {pid: cmd for pid, cmd in fleet.processes("ct200").items() if "fleet.host" in cmd}
    finally:
        fleet.umount("ct200", runs)

    assert status.phase is Phase.FAILED, status
    assert "results_unwritable" in status.last_error and said in status.last_error and runs in status.last_error, status.last_error
    assert progress["state"] == "halted" and progress["last_error"]["class"] == "results_unwritable"
    assert len(server_logs) == 1, f"servers launched after the agent could not write: {server_logs}"
    assert left == {}, left
    record = json.loads((outcome.directory / "sweep.json").read_text())
    assert record["state"] != "finished"
    assert len(list((outcome.directory / "ct200" / "runs").glob("*.json"))) < status.total
