"""`fleet fetch-logs` over fake hosts: what it asks of each host's transport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.layout import SweepFolder
from fleet.sweep import controller
from fleet.sweep.logs import fetch_logs, journal_command
from tests.unit.fake_hosts import make_host
from tests.unit.test_progress import SWEEP, TimedFleet


@pytest.mark.parametrize("service_manager", ["process", "systemd"])
def test_every_call_to_a_host_is_made_inside_one_shared_login(service_manager: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A systemd host's journal dump and both pulls (the tree, and runs/), a process host's two
    pulls: all inside the transport's shared_login block, which over SSH makes them one login
    (tests/integration/test_shared_login.py counts the logins on a real host)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SWEEP)
    fleet = TimedFleet([make_host("ct200")])
    outcome = fleet.start(tmp_path)
    assert outcome.statuses["ct200"].pulled > 0
    # The fake hosts run no systemd: a systemd host's sweep is this one, recorded as such.
    recorded = SweepFolder(outcome.directory).host_file("ct200")
    recorded.write_text(json.dumps({**json.loads(recorded.read_text()), "service_manager": service_manager}))
    host = make_host("ct200", service_manager=service_manager)
    transport = fleet.t["ct200"]
    transport.script(journal_command(host, SWEEP), "3\n")
    before = len(transport.calls)

    fetched = fetch_logs(tmp_path / "results", SWEEP, connect=fleet.connect)["ct200"]

    assert not fetched.note.startswith("failed"), fetched.note
    assert fetched.journal_units == (3 if service_manager == "systemd" else 0)
    calls = transport.calls[before:]
    kinds = [call.kind for call in calls]
    assert kinds.count("rsync_pull") == 2 and kinds.count("run") == (1 if service_manager == "systemd" else 0), kinds
    assert all(call.shared_login for call in calls), [(call.kind, call.command) for call in calls if not call.shared_login]
