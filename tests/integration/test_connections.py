"""SSH logins per host per sweep, counted where they happen: each test host's own sshd log.

Design (fleet/transport/sharing.py): one paramiko connection per host for commands, shared by
provisioning and the sweep driver, and one OpenSSH ControlMaster per host that every rsync (the
bundle push, each result pull) goes through. So a sweep logs in at most twice per host, and a
reboot or a dropped link costs at most two logins more. The sweep runs as its own `python -m
fleet` process, so that the count covers everything one controller does, and what that process
leaves behind (SSH masters) can be checked after it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet.connect import ssh_target
from fleet.inventory import load_inventory
from fleet.transport.sharing import socket_name
from tests.integration.waiting import retry_line, wait_for

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
RETRIED = retry_line("ct201")


def logins(fleet, name: str) -> int:
    log = fleet[name].base / "log" / "sshd.log"
    return sum(1 for line in log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)


def masters_of(hosts_dir: Path) -> list[str]:
    """Command lines of live ssh masters ("ssh: <ControlPath> [mux]") for these hosts' targets."""
    names = {socket_name(ssh_target(host)) for host in load_inventory(hosts_dir)}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "[mux]" in cmdline and any(name in cmdline for name in names):
            found.append(cmdline)
    return found


def sweep(hosts_dir: Path, results: Path, hosts: str, during=None) -> list[dict]:
    """`fleet sweep --json` of the demo as its own process; its events. `during(events, said)`
    runs in a thread while the sweep goes, with the live lists of events and of stderr lines so far."""
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(results)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet", "sweep", "-p", str(DEMO), "--hosts", hosts, "--json", "--poll", "0.5"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    events: list[dict] = []
    said: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    worker = threading.Thread(target=during, args=(events, said), daemon=True) if during else None
    if worker:
        worker.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{"):
            events.append(json.loads(line))
    proc.wait(timeout=300)
    reader.join(timeout=30)
    stderr = "".join(said)
    if worker:
        worker.join(timeout=120)
    assert events and events[-1]["type"] == "summary", stderr[-3000:]
    assert proc.returncode == 0, (proc.returncode, events[-1], stderr[-3000:])
    return events


def test_a_sweep_on_two_hosts_logs_in_at_most_twice_per_host_and_leaves_no_master(test_fleet_factory, tmp_path: Path) -> None:
    # One GPU each: the demo's three servers need both hosts.
    fleet = test_fleet_factory(["ct200", "ct201"], gpu_profiles={"ct200": {"count": 1}, "ct201": {"count": 1}})
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02})
    before = {name: logins(fleet, name) for name in ("ct200", "ct201")}
    events = sweep(hosts_dir, tmp_path / "results", "ct200,ct201")
    opened = {name: logins(fleet, name) - before[name] for name in before}
    runs = [e for e in events if e["type"] == "run"]
    assert {e["host"] for e in runs} == {"ct200", "ct201"}, "both hosts ran their share"
    # One paramiko login (provisioning and driver), one for the OpenSSH master (every rsync).
    assert all(1 <= n <= 2 for n in opened.values()), opened
    assert masters_of(hosts_dir) == [], "the controller stopped the masters it started"


def test_a_reboot_and_a_dropped_link_cost_at_most_two_logins_each(test_fleet_factory, tmp_path: Path) -> None:
    # One GPU each: the demo's three servers need both hosts.
    fleet = test_fleet_factory(["ct200", "ct201"], gpu_profiles={"ct200": {"count": 1}, "ct201": {"count": 1}})
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.1})
    before = {name: logins(fleet, name) for name in ("ct200", "ct201")}
    injected: dict[str, bool] = {}

    def inject(events: list[dict], said: list[str]) -> None:
        deadline = time.monotonic() + 120
        # Once each host has a result: ct200 loses power, ct201's link goes silent until a call of
        # the controller's to it has failed (the poll's deadline, or rsync's ServerAlive window,
        # both 15 s: past them the connection is gone) and is being retried (fleet.retry's line
        # on stderr); then it comes back, and that call goes on through a fresh login.
        while time.monotonic() < deadline and not {"ct200", "ct201"} <= {e["host"] for e in events if e["type"] == "run"}:
            time.sleep(0.1)
        fleet.link_down("ct201")
        try:
            fleet.reboot("ct200")
            injected["reboot"] = True
            wait_for(lambda: any(RETRIED.match(line) for line in list(said)), 60, "a call to ct201 failed and retried")
        finally:
            fleet.link_up("ct201")
        injected["drop"] = True

    events = sweep(hosts_dir, tmp_path / "results", "ct200,ct201", during=inject)
    opened = {name: logins(fleet, name) - before[name] for name in before}
    assert injected == {"reboot": True, "drop": True}
    kinds = {(e["type"], e["host"]) for e in events}
    assert ("reboot", "ct200") in kinds, "the controller saw the reboot"
    assert ("link_drop", "ct201") in kinds, "the controller saw the dropped link"
    assert 1 <= opened["ct200"] <= 2 + 2, opened
    assert 1 <= opened["ct201"] <= 2 + 2, opened
    assert masters_of(hosts_dir) == []
