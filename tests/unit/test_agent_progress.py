"""progress.json: counts that add up, phases per server, a heartbeat for long runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.agent import progress as progress_module
from fleet.host.agent.progress import ProgressFile
from fleet.host.contract import AgentState, Progress, RunStatus, ServerPhase


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_counts_phases_and_end(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    progress = ProgressFile(path, sweep_id="sw1", boot_id="b", total_runs=5, counts={"ok": 1})
    assert read(path)["counts"] == {"ok": 1, "done": 1, "remaining": 4}
    progress.phase("s1", "tp1-dflash", ServerPhase.running, "tp1-dflash/short")
    progress.run_done(RunStatus.failed)
    progress.error("tp1-dflash", "server_died", "the server died while serving")
    state = read(path)
    assert state["servers"]["s1"]["phase"] == "running" and state["servers"]["s1"]["run"] == "tp1-dflash/short"
    assert state["counts"] == {"ok": 1, "failed": 1, "done": 2, "remaining": 3}
    assert state["last_error"]["class"] == "server_died" and state["state"] == "running"
    progress.finished_server("s1")
    progress.end(AgentState.stopped)
    assert read(path)["servers"] == {} and read(path)["state"] == "stopped"
    # What the controller reads back is what the agent wrote.
    back = Progress.from_json(path.read_text(), str(path))
    assert back == progress.state and back.done == 2 and back.state is AgentState.stopped


def test_heartbeat_rewrites_only_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "progress.json"
    progress = ProgressFile(path, sweep_id="sw1", boot_id="b", total_runs=1, counts={})
    first = read(path)["updated_at"]
    progress.heartbeat()
    assert read(path)["updated_at"] == first
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.0)
    progress.heartbeat()
    assert read(path)["updated_at"] > first
