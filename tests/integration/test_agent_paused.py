"""An agent stopped mid-run (SIGSTOP, as a debugger or a frozen VM does), then continued: the run
it was driving measured fleet's own pause, not the server. The real agent against the real
simulator (as tests/integration/test_agent_local.py runs it), with a test-only pause threshold
(FLEET_AGENT_PAUSE_THRESHOLD_S) well below the pause and well above a loaded machine's hiccups:

- paused once: the disturbed run is kept aside (`runs/<run>.attempt-1.disturbed`) and redone,
  its final result `ok` with figures that do not hold the pause; the log and progress name it;
- paused again during the redo: the run ends `not_comparable` with an `agent_paused` deviation,
  never `partial` with a request timeout blamed on the server.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.host.agent.pause import THRESHOLD_ENV
from fleet.playbook import Run
from fleet.workloads.kinds import ConcurrencyWorkload
from tests.integration.test_agent_local import (  # noqa: F401 (fixtures)
    AUTOREGRESSIVE,
    agents,
    host_env,
    kill_leftover_servers,
    progress,
    results,
    running_runs,
    seed_runs,
    server,
    start_agent,
    write_shard,
)
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

THRESHOLD_S = 1.5  # a tick late by this much is no scheduling hiccup, even on a loaded CI machine
PAUSE_S = 6.0  # four times the threshold; the test's no-token watchdog (2 s) fires across it
SPEED = 0.02  # a run of a second or two: the pause dwarfs it


def disturbed_records(sweep: Path) -> dict[str, dict[str, Any]]:
    return {path.name: json.loads(path.read_text()) for path in (sweep / "runs").glob("*.disturbed")}


def attempts(sweep: Path, run_id: str) -> int:
    try:
        return int(json.loads((sweep / "attempts" / f"{run_id}.json").read_text())["attempt"])
    except (OSError, ValueError, KeyError):
        return 0


def requests_begun(sweep: Path, server_id: str) -> int:
    """The streamed requests the server answered so far (its access log), fleet's warm-up included."""
    try:
        return (sweep / "logs" / f"{server_id}.log").read_text().count('"POST /generate ')
    except OSError:
        return 0


def wait_for_a_request(sweep: Path, server_id: str, what: str) -> None:
    """Until the server answers a request after now: with a run shown in progress (after its
    warm-up), one of the run's; they follow each other closely, so one is most likely in flight."""
    begun = requests_begun(sweep, server_id)
    wait_for(lambda: requests_begun(sweep, server_id) > begun, 30, what)


def pause(pid: int) -> None:
    """The whole agent process (all its threads) frozen for PAUSE_S; its servers serve on."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(PAUSE_S)
    finally:
        os.kill(pid, signal.SIGCONT)


def wide_run(seed_runs: dict[str, Run]) -> Run:
    """A run of a second or two at SPEED, requests one after another and then two at a time."""
    short = seed_runs["short"]
    return Run(short.server, "concurrency", ConcurrencyWorkload(kind="concurrency", levels=[1, 2], requests_per_level=6), 1)


def test_a_run_the_agent_was_paused_in_is_redone_and_the_pause_named(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    target = server("a", 0, AUTOREGRESSIVE, [wide_run(seed_runs), seed_runs["short"]], speed=SPEED)
    sweep = tmp_path / "sweep-paused"
    write_shard(sweep, [target])
    agents.append(start_agent(sweep, {**host_env, THRESHOLD_ENV: str(THRESHOLD_S)}))
    try:
        wait_for(lambda: "a/concurrency" in running_runs(sweep), 60, "the first run in progress")
        wait_for_a_request(sweep, "a", "the first run's requests")
        pause(agents[-1].pid)
        assert agents[-1].wait(timeout=90) == 0, (sweep / "agent.log").read_text()
    finally:
        kill_leftover_servers(sweep)
    log = (sweep / "agent.log").read_text()
    by_run = results(sweep)
    assert {r["status"] for r in by_run.values()} == {"ok"}, {r["label"]: (r["status"], r["failure"]) for r in by_run.values()}
    # The pause landed in the concurrency run (it lasts seconds; the stop came as it began).
    kept = disturbed_records(sweep)
    assert len(kept) == 1, (sorted(kept), log)
    ((name, disturbed),) = kept.items()
    redone = by_run[disturbed["run_id"]]
    assert name == f"{redone['run_id']}.attempt-1.disturbed" and disturbed["attempt"] == 1 and redone["attempt"] == 2
    assert disturbed["status"] == "not_comparable"
    (deviation,) = [d for d in disturbed["deviations"] if d["kind"] == "agent_paused"]
    assert "did not run for" in deviation["message"]
    paused_for = float(deviation["message"].split("did not run for ")[1].split(" s")[0])
    assert PAUSE_S - 0.5 < paused_for < PAUSE_S + 5, deviation
    # The redo's figures hold no pause: its wall time and every request's are well under it.
    assert redone["ended_at"] - redone["started_at"] < PAUSE_S - 1, redone
    assert all(q["ok"] and q["e2e_s"] * SPEED < 1.0 and "agent_paused_s" not in q for q in redone["requests"]), redone["requests"]
    assert redone["redone"] == [{"attempt": 1, "kept_as": name, "why": deviation["message"]}]
    # Named where people look: the agent's log, and progress.json's last error (the live display's).
    assert "did not run for" in log and f"run {redone['label']}: disturbed by the agent's pause, kept aside as {name}; running it again" in log
    state = progress(sweep)
    assert state["state"] == "finished" and state["last_error"]["class"] == "agent_paused", state
    assert "did not run for" in state["last_error"]["message"]


def test_a_run_paused_again_when_redone_is_not_comparable_naming_the_pause(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    wide = wide_run(seed_runs)
    target = server("b", 0, AUTOREGRESSIVE, [wide], speed=SPEED)
    (run,) = target.runs
    sweep = tmp_path / "sweep-paused-twice"
    write_shard(sweep, [target])
    agents.append(start_agent(sweep, {**host_env, THRESHOLD_ENV: str(THRESHOLD_S)}))
    try:
        wait_for(lambda: running_runs(sweep), 60, "the run in progress")
        wait_for_a_request(sweep, "b", "the run's requests")
        pause(agents[-1].pid)
        wait_for(lambda: attempts(sweep, run.run_id) == 2, 30, "the run redone")
        wait_for_a_request(sweep, "b", "the redone run's requests")
        pause(agents[-1].pid)
        assert agents[-1].wait(timeout=90) == 0, (sweep / "agent.log").read_text()
    finally:
        kill_leftover_servers(sweep)
    (result,) = results(sweep).values()
    assert result["status"] == "not_comparable" and result["failure"] is None and result["attempt"] == 2, result
    (deviation,) = result["deviations"]
    assert deviation["kind"] == "agent_paused" and "not the server's" in deviation["message"], deviation
    assert sorted(disturbed_records(sweep)) == [f"{run.run_id}.attempt-1.disturbed"]
    assert progress(sweep)["counts"]["not_comparable"] == 1
