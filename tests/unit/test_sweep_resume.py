"""Resumes that cannot collide or strand results (issue 29, items 5 and 6), on fake hosts: a second
controller of a sweep is refused before it contacts any host; a host given a new address in its
host file is re-validated and reached there (or refused, saying what to change); a host given up
on has its agent stopped, and what it finished of runs that ran nowhere else comes back later,
with `fleet fetch-logs` and with a later resume, never a run that went to another host."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fleet import cli
from fleet.errors import ConnectionLost
from fleet.host.contract import AgentState, Progress
from fleet.inventory import Host
from fleet.sweep import controller
from fleet.sweep.controller import resume_sweep
from fleet.sweep.hoststatus import Phase
from fleet.sweep.ledger import read_sweep_results
from fleet.sweep.lock import lock_sweep
from fleet.errors import SweepBusy
from fleet.sweep.logs import fetch_logs
from fleet.sweep.record import SweepRecord
from fleet.errors import SweepError
from fleet.transport.fake import Call, FakeTransport
from tests.unit.fake_hosts import make_host
from tests.unit.test_progress import DEMO, TimedFleet

SWEEP = "demo-20261201-000000-beef"


@pytest.fixture(autouse=True)
def fixed_sweep_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SWEEP)


def detached(tmp_path: Path, fleet: TimedFleet, polls: int = 3) -> None:
    """A sweep whose controller went away (Ctrl-C) after a few polls: its agents work on."""
    stop = threading.Event()
    first = fleet.hosts[0].name
    agent = fleet.agent[first]
    fleet.t[first].on(lambda c: c.command == agent.poll_command and agent.polls == polls, lambda t, c: stop.set(), times=1)
    outcome = fleet.start(tmp_path, stop=stop)
    assert outcome.interrupted


def resume(tmp_path: Path, fleet: TimedFleet, **options: Any) -> controller.SweepOutcome:
    options = {"connect": fleet.connect, "environ": {}, "poll_interval_s": 0.0, "sleep": lambda s: None, **options}
    return resume_sweep(SWEEP, tmp_path / "results", **options)


def calls(fleet: TimedFleet) -> int:
    return sum(len(t.calls) for t in fleet.t.values())


# ------------------------------------------------------------------------------ item 5: one controller


def test_a_second_resume_is_refused_before_it_contacts_any_host(tmp_path: Path) -> None:
    fleet = TimedFleet([make_host("ct200"), make_host("ct201")], sweep_id=SWEEP)
    detached(tmp_path, fleet)
    # The first resume, mid-sweep, held in a poll of each host: between the two counts of calls
    # below nothing of its own runs (a count taken while one of its hosts' loops went on grew by
    # that loop's calls, and read as the refused controller's).
    inside = {name: threading.Event() for name in ("ct200", "ct201")}
    go_on = threading.Event()
    for name, held in inside.items():

        def hold(_t: FakeTransport, _c: Call, held: threading.Event = held) -> None:
            held.set()
            assert go_on.wait(30)

        fleet.t[name].on(lambda c, name=name: c.command == fleet.agent[name].poll_command, hold, times=1)
    box: list[controller.SweepOutcome] = []
    first = threading.Thread(target=lambda: box.append(resume(tmp_path, fleet)))
    first.start()
    try:
        assert all(held.wait(30) for held in inside.values())
        before = calls(fleet)
        with pytest.raises(SweepBusy) as refused:
            resume(tmp_path, fleet, connect=lambda host: pytest.fail(f"the refused controller connected to {host.name}"))
        assert calls(fleet) == before  # not one call on any host, no lease touched
        assert "another controller drives this sweep: pid " in str(refused.value) and "--resume, since" in str(refused.value)
    finally:
        go_on.set()
        first.join(60)
    outcome = box[0]
    assert outcome.exit_code == 0 and all(s.phase is Phase.FINISHED for s in outcome.statuses.values())
    assert not outcome.lost and not outcome.not_run
    # Ended: the next resume takes the lock (nothing to take over: the first one let it go).
    assert resume(tmp_path, fleet).exit_code == 0


def test_the_command_refuses_a_second_controller_with_exit_1_and_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = TimedFleet([make_host("ct200")], sweep_id=SWEEP)
    detached(tmp_path, fleet)
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(controller, "resume_sweep", lambda *a, **k: pytest.fail("the refused controller went on"))
    before = calls(fleet)
    with lock_sweep(tmp_path / "results" / SWEEP, "--resume"):
        for args in (["--resume", SWEEP], ["--cancel", SWEEP]):
            result = CliRunner().invoke(cli.app, ["sweep", *args], catch_exceptions=False)
            assert result.exit_code == 1, result.output
            assert result.stderr.count("\n") == 1 and "another controller drives this sweep: pid " in result.stderr
    assert calls(fleet) == before


# ------------------------------------------------------------------------------ item 6: a moved host


def host_file(hosts_dir: Path, host: Host, **changes: Any) -> None:
    data = host.model_dump(mode="json", exclude_none=True)
    for key, value in changes.items():
        if key == "work_dir":
            data["paths"]["work_dir"] = value
        else:
            data[key] = value
    hosts_dir.mkdir(exist_ok=True)
    (hosts_dir / f"{host.name}.yaml").write_text(yaml.safe_dump(data))


def test_a_host_moved_to_another_address_is_revalidated_and_reached_there(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fleet = TimedFleet([make_host("ct200")], sweep_id=SWEEP)
    detached(tmp_path, fleet)
    hosts_dir = tmp_path / "hosts"
    host_file(hosts_dir, fleet.hosts[0], address="10.201.0.9", port=2222)
    reached: list[tuple[str | None, int]] = []

    def connect(host: Host) -> FakeTransport:
        reached.append((host.address, host.port))
        return fleet.t[host.name]

    outcome = resume(tmp_path, fleet, connect=connect, hosts_dir=hosts_dir)
    assert outcome.exit_code == 0 and outcome.statuses["ct200"].phase is Phase.FINISHED
    assert set(reached) == {("10.201.0.9", 2222)}  # never the recorded address
    assert "ct200: moved from 10.201.0.2:22 to 10.201.0.9:2222" in caplog.text
    recorded = json.loads((tmp_path / "results" / SWEEP / "hosts" / "ct200.json").read_text())
    assert (recorded["address"], recorded["port"]) == ("10.201.0.9", 2222)  # fetch-logs, status and later resumes follow


def test_a_moved_host_that_is_not_the_sweeps_machine_is_refused_before_anything_runs(tmp_path: Path) -> None:
    fleet = TimedFleet([make_host("ct200")], sweep_id=SWEEP)
    detached(tmp_path, fleet)
    hosts_dir = tmp_path / "hosts"
    host_file(hosts_dir, fleet.hosts[0], address="10.201.0.9", work_dir="/srv/other")
    before = calls(fleet)
    with pytest.raises(SweepError, match="paths.work_dir from /var/lib/fleet to /srv/other.*put paths.work_dir back.*put the address back"):
        resume(tmp_path, fleet, hosts_dir=hosts_dir)
    assert calls(fleet) == before
    host_file(hosts_dir, fleet.hosts[0], address="10.201.0.9")
    stranger = FakeTransport("ct200")  # answers, but holds no folder of this sweep
    with pytest.raises(SweepError, match="no folder of this sweep is there"):
        resume(tmp_path, fleet, hosts_dir=hosts_dir, connect=lambda host: stranger)
    assert calls(fleet) == before and [c.argv for c in stranger.calls] == [("test", "-f", f"/var/lib/fleet/sweeps/{SWEEP}/shard.json")]


def test_a_resume_says_the_recorded_copy_of_a_changed_or_gone_playbook_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    playbook = tmp_path / "mine.yaml"
    playbook.write_bytes(DEMO.read_bytes())
    fleet = TimedFleet([make_host("ct200")], sweep_id=SWEEP)
    stop = threading.Event()
    agent = fleet.agent["ct200"]
    fleet.t["ct200"].on(lambda c: c.command == agent.poll_command and agent.polls == 3, lambda t, c: stop.set(), times=1)
    controller.start_sweep(playbook, fleet.hosts, tmp_path / "results", connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None, stop=stop)
    playbook.write_text(DEMO.read_text() + "\n# edited\n")
    stop.set()  # a resume that detaches at once: what it says before it drives is what matters here
    resume(tmp_path, fleet, stop=stop)
    assert f"{playbook} changed since this sweep started: the sweep's copy runs" in caplog.text
    playbook.unlink()
    resume(tmp_path, fleet, stop=stop)
    assert f"{playbook}, the playbook this sweep started from, is gone: the sweep's copy runs" in caplog.text


# ------------------------------------------------------------------------------ item 6: given up


def failing_pulls(t: FakeTransport, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*a: Any, **k: Any) -> Any:
        raise ConnectionLost(t.host, "rsync: connection reset")

    monkeypatch.setattr(t, "rsync_pull", refused)


def test_a_host_given_up_has_its_agent_stopped_and_its_results_of_runs_run_nowhere_come_back_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = TimedFleet([make_host("ct200")], sweep_id=SWEEP)
    agent = fleet.agent["ct200"]
    agent.runs_per_poll = 1
    detached(tmp_path, fleet, polls=1)
    with monkeypatch.context() as m:
        failing_pulls(fleet.t["ct200"], m)  # the host answers, its results do not come back
        outcome = resume(tmp_path, fleet, host_lost_after_s=0.0)
    assert outcome.statuses["ct200"].phase is Phase.FAILED and outcome.exit_code == 1
    assert agent.stops == 1 and not agent.alive  # nothing of fleet's left running there
    progress = Progress.from_json(fleet.t["ct200"].read_text(agent.dir.progress), "progress")
    assert progress.state is AgentState.stopped
    finished_there = set(agent.results())
    assert 0 < len(finished_there) < len(fleet.plan.runs)  # it was given up while at work
    directory = tmp_path / "results" / SWEEP
    pulled = {r.run_id for r in read_sweep_results(directory).results}
    stranded = finished_there - pulled
    assert stranded and stranded <= set(SweepRecord.load(directory).not_run)  # ran nowhere, as far as the controller knows

    fetched = fetch_logs(tmp_path / "results", SWEEP, connect=fleet.connect)
    assert "given up on" in fetched["ct200"].note and not fetched["ct200"].note.startswith("failed")
    assert {r.run_id for r in read_sweep_results(directory).results} == finished_there  # fetch-logs brought them

    resume(tmp_path, fleet)  # a later resume: those runs are no longer named as run nowhere
    assert not stranded & set(SweepRecord.load(directory).not_run)
    assert agent.stops == 2 and agent.starts == 1  # stopped again (it is not running), never restarted


def test_results_of_runs_that_went_to_another_host_never_come_back_from_the_given_up_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = TimedFleet([make_host("ct200"), make_host("ct201")], sweep_id=SWEEP)
    failing_pulls(fleet.t["ct200"], monkeypatch)
    outcome = fleet.start(tmp_path, host_lost_after_s=0.0)
    assert outcome.statuses["ct200"].phase is Phase.FAILED and outcome.statuses["ct201"].phase is Phase.FINISHED
    assert not outcome.not_run  # every run of ct200 went to ct201
    ct200 = fleet.agent["ct200"]
    for server, run in ct200.shard().runs:  # late results there, after its runs had moved
        ct200._finish(server, run)
    monkeypatch.undo()
    fetch_logs(tmp_path / "results", SWEEP, connect=fleet.connect)
    resume(tmp_path, fleet)
    results = read_sweep_results(tmp_path / "results" / SWEEP)
    assert not results.rejected
    run_ids = [r.run_id for r in results.results]
    assert sorted(run_ids) == sorted({run.id for _, run in fleet.plan.runs})  # one result per run, none twice
