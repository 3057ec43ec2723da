"""The sweep loop's state machine on the fake transport (no root, no SSH): reboots, agent deaths,
repair rounds, a resume after an unwatched reboot, detaching, and link drops."""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.errors import ConnectionLost, PermanentTransportError
from fleet.fixes.quarantine import QuarantineStore
from fleet.host.contract import Failure, Progress, RunStatus, SweepDir
from fleet.host.contract.progress import AgentError
from fleet.host.contract.shard import Shard
from fleet.plan import Plan, PlanOptions, hardware_of, make_plan
from fleet.playbook import load_playbook
from fleet.provision.lease import sweep_claim
from fleet.provision.provision import provision_host, provision_options
from fleet.sweep.bundle import write_bundle
from fleet.sweep.channel import parse_poll
from fleet.sweep.context import FOLDER_PULL_EVERY_S, SweepContext
from fleet.sweep.driver import MAX_AGENT_RESTARTS, HostDriver
from fleet.sweep.fixing import SweepFixer
from fleet.sweep.hoststatus import HostStatus, Phase, phase_of
from fleet.sweep.shards import build_shards
from fleet.transport.fake import Call, FakeTransport
from tests.unit.fake_hosts import FakeAgent, FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
SWEEP = "demo-20261201-000000-abcd"
MAX_POLLS = 400  # a loop that never ends fails the test instead of hanging it


@pytest.fixture(autouse=True)
def facts_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bundle") / ".bundle"
    write_bundle(directory)
    return directory


@dataclass
class Rig:
    t: FakeTransport
    shell: FakeHostShell
    agent: FakeAgent
    driver: HostDriver
    plan: Plan
    phases: list[Phase]

    def drive(self) -> HostStatus:
        return self.driver.drive()


def rig(tmp_path: Path, bundle: Path, *, fixer: bool = False, provisioned: bool = True, folder_pull_every_s: float = FOLDER_PULL_EVERY_S, **agent: object) -> Rig:
    host = make_host()
    playbook = load_playbook(DEMO)
    hardware = {host.name: hardware_of(host)}
    plan = make_plan(playbook, [host], PlanOptions(memory_check=False, hardware=hardware))
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    options = provision_options(DEMO.parent, {}, lease=sweep_claim(SWEEP))  # as `fleet sweep` makes them: its claim on the host lease
    if provisioned:  # the host as `fleet sweep` leaves it before the loop starts: model cached and staged
        assert provision_host(host, playbook, options, transport=t).status == "changed"
    shard = build_shards(plan, {host.name: host}, SWEEP, {host.name: t.boot_id})[host.name]
    directory = tmp_path / "results" / SWEEP
    sweep_fixer = None
    if fixer:
        sweep_fixer = SweepFixer(playbook, {host.name: host}, hardware, QuarantineStore(tmp_path / "q.json"), SWEEP, {s.config.id: s for s in plan.servers})
    ctx = SweepContext(directory, playbook, options, bundle, poll_interval_s=0.0, fixer=sweep_fixer, sleep=lambda s: None, folder_pull_every_s=folder_pull_every_s)
    fake_agent = FakeAgent(t, host, SWEEP, **agent)  # type: ignore[arg-type]
    driver = HostDriver(ctx, host, shard, t)
    phases: list[Phase] = []

    def observe(_t: FakeTransport, call: Call) -> None:
        if not phases or phases[-1] != driver.status.phase:
            phases.append(driver.status.phase)
        if fake_agent.polls > MAX_POLLS:
            raise AssertionError(f"the loop polled {fake_agent.polls} times without ending")

    t.on(lambda c: True, observe, name="observe phases")  # answers nothing, sees every run call
    return Rig(t, shell, fake_agent, driver, plan, phases)


def local_results(r: Rig) -> set[str]:
    return {p.stem for p in (r.driver.local_dir / SweepDir.RUNS).glob("*.json")}


def test_a_share_runs_to_the_end_and_every_result_comes_back(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle)
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert local_results(r) == {run.id for _, run in r.plan.runs}
    assert status.counts.get("ok") == status.total == len(r.plan.runs)
    assert r.agent.starts == 1 and status.reboots == status.agent_restarts == status.link_drops == 0
    assert r.phases[0] is Phase.SHIPPING and Phase.RUNNING in r.phases
    shipped = Shard.from_json(r.t.read_text(r.agent.dir.shard))
    assert [s.server_id for s in shipped.servers] == [s.server_id for s in r.driver.shard.servers]
    assert r.t.is_file("/var/lib/fleet/agent/fleet/host/agent/runner.py")  # the bundle, whole


@pytest.mark.parametrize("every_s", [math.inf, 0.0], ids=["never-between", "every-pull"])
def test_a_poll_that_sees_new_results_pulls_them_alone_between_pulls_of_the_whole_folder(tmp_path: Path, bundle: Path, every_s: float) -> None:
    """Each poll that sees new results pulls them; the rest of the folder (logs) comes with the
    first pull, at most every `folder_pull_every_s` after it, and with the host's last pull."""
    r = rig(tmp_path, bundle, folder_pull_every_s=every_s, runs_per_poll=1)
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert local_results(r) == {run.id for _, run in r.plan.runs}
    pulled = [call.path for call in r.t.calls if call.kind == "rsync_pull"]
    results, folders = pulled.count(r.agent.dir.runs + "/"), pulled.count(r.agent.dir.root + "/")
    assert results >= len(r.plan.runs) >= 3 and results + folders == len(pulled)  # a pull at each poll that saw a new result
    assert folders == (2 if every_s == math.inf else results)  # the first and the last; or every one


def test_a_reboot_is_seen_by_its_boot_id_then_restage_ship_and_restart(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle)
    staged = r.t.tree("/dev/shm/fleet")
    assert staged and r.shell.jobs == ["fleet-stage", "fleet-stage"]  # the target and the draft, staged at provisioning
    boot_before = r.t.boot_id
    # Mid-share (two polls before the start, two that each finished two runs), the host loses
    # power: tmpfs gone, the agent gone, a new boot id.
    r.t.on(lambda c: c.command == r.agent.poll_command and r.agent.polls == 4, lambda t, c: (t.reboot(), None)[1], times=1)
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert status.reboots == 1 and status.boot_id == r.t.boot_id != boot_before
    assert r.agent.starts == 2
    assert r.shell.jobs[2:] == ["fleet-stage", "fleet-stage"]  # re-staged from the cache, nothing fetched
    assert r.t.tree("/dev/shm/fleet") == staged
    assert Phase.RECOVERING in r.phases and r.phases.index(Phase.RECOVERING) < len(r.phases) - 1
    assert local_results(r) == {run.id for _, run in r.plan.runs}
    boots = {json.loads(p.read_text())["boot_id"] for p in (r.driver.local_dir / "runs").glob("*.json")}
    assert boots == {boot_before, r.t.boot_id}  # results span both boots, none redone


def test_an_agent_that_died_is_restarted_and_the_share_finishes(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle, die_after=3)
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert status.agent_restarts == 1 and r.agent.starts == 2
    assert local_results(r) == {run.id for _, run in r.plan.runs}


def test_an_agent_that_keeps_dying_is_given_up_after_max_restarts(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle, runs_per_poll=0)

    def start_then_die(_t: FakeTransport, _c: Call) -> None:
        r.agent.alive = False  # it crashes right after each start, before any run

    r.t.on(lambda c: c.command == r.agent.poll_command and r.agent.starts > 0, start_then_die)
    status = r.drive()
    assert status.phase is Phase.FAILED
    assert status.agent_restarts == MAX_AGENT_RESTARTS and r.agent.starts == MAX_AGENT_RESTARTS + 1
    assert f"{MAX_AGENT_RESTARTS} times; giving up" in status.last_error


def port_in_use(server_port: int) -> Failure:
    diagnosis = {"failure_class": "port_in_use", "figures": {"port": str(server_port)}}
    return Failure("server_start_failed", "the server exited", diagnosis=diagnosis)


@pytest.mark.parametrize("live", [True, False], ids=["to-the-running-agent", "repair-round-after-it-ended"])
def test_a_fixed_variant_extends_the_shard_and_ships_it(tmp_path: Path, bundle: Path, live: bool) -> None:
    """While the agent runs, the grown shard goes to it (no new agent); one that has ended by the
    time the failure is pulled (all its runs in one poll) gets a repair round: shipped, started again."""
    first: list[str] = []

    def outcome(server, run):  # the first server's port is taken; its fixed variant (another port) serves
        first.append(first[0] if first else server.server_id)
        return port_in_use(server.port) if server.server_id == first[0] else RunStatus.ok

    r = rig(tmp_path, bundle, fixer=True, outcome=outcome, runs_per_poll=2 if live else 1000)
    original = {run.id for _, run in r.plan.runs}
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert (Phase.REPAIRING in r.phases) is not live
    assert r.agent.starts == (1 if live else 2)
    added = {run.run_id for _, run in r.driver.shard.runs} - original
    assert added and status.total == len(original) + len(added)
    assert local_results(r) == original | added
    shipped = Shard.from_json(r.t.read_text(r.agent.dir.shard))
    on_disk = Shard.from_json((r.driver.local_dir / SweepDir.SHARD).read_text())
    assert shipped == on_disk == r.driver.shard
    fixer = r.driver.ctx.fixer
    assert fixer is not None and {f.action for f in fixer.records} == {"applied"}
    failed = [json.loads((r.driver.local_dir / "runs" / f"{f.run_id}.json").read_text()) for f in fixer.records]
    assert all(result["status"] == "failed" for result in failed)  # the originals keep their failure


def test_resume_after_an_unwatched_reboot_restages_before_starting(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle)
    # An earlier controller started the agent, which finished two runs; then the host rebooted
    # while nobody watched.
    r.driver.channel.ship(bundle, r.driver.shard, None)
    r.agent._start()
    r.agent.runs_per_poll = 2
    r.agent._poll(r.t, Call("run", r.agent.poll_command))
    r.t.reboot()
    assert not r.t.tree("/dev/shm/fleet")
    old = Progress.from_json(r.t.read_text(r.agent.dir.progress))
    assert old.boot_id != r.t.boot_id and old.state.value == "running"

    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert status.reboots == 1 and r.agent.starts == 2
    stage_calls = [i for i, c in enumerate(r.t.calls) if "fleet-stage" in c.command and "setsid" in c.command]
    start_calls = [i for i, c in enumerate(r.t.calls) if c.argv and "start" in c.argv and "service" in c.argv]
    assert stage_calls[-1] < start_calls[-1]  # staged before the agent came back
    assert r.t.tree("/dev/shm/fleet")


def test_the_stop_event_detaches_and_leaves_the_agent_working(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle, runs_per_poll=1)
    stop: threading.Event = r.driver.ctx.stop
    r.t.on(lambda c: c.command == r.agent.poll_command and r.agent.polls == 3, lambda t, c: stop.set())
    status = r.drive()
    assert status.phase is Phase.DETACHED
    assert r.agent.alive and 0 < len(r.agent.results()) < len(r.plan.runs)
    assert not any(c.argv and "stop" in c.argv for c in r.t.calls)  # nothing told the agent to stop


def test_an_agent_stopped_on_purpose_is_not_restarted(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle)
    r.agent.stopped_on_purpose = True
    status = r.drive()
    assert status.phase is Phase.STOPPED and r.agent.starts == 1 and status.agent_restarts == 0


def test_dropped_links_are_ridden_out_and_counted_per_call_that_needed_retries(tmp_path: Path, bundle: Path) -> None:
    r = rig(tmp_path, bundle)
    polls = 0

    def second_and_fifth_poll(call: Call) -> bool:
        nonlocal polls
        if call.command != r.agent.poll_command:
            return False
        polls += 1
        return polls in (2, 3, 6)

    r.t.drop_link(3, when=second_and_fifth_poll)  # two drops on one poll, one on a later poll
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    assert status.link_drops == 2
    assert local_results(r) == {run.id for _, run in r.plan.runs}


def test_one_poll_read_by_fleet_status_names_each_phase() -> None:
    progress = {
        "schema": "fleet.agent_progress/1", "sweep_id": "s", "agent_pid": 1, "boot_id": "b", "started_at": 0.0,
        "updated_at": 0.0, "total": 2, "counts": {"ok": 2}, "servers": {}, "last_error": None,
    }  # fmt: skip

    def poll(alive: bool, state: str | None) -> str:
        text = json.dumps({**progress, "state": state}) if state else ""
        return f'{{"state": "{"running" if alive else "exited"}"}}\n--fleet--\nb\n--fleet--\n{text}\n--fleet--\n'

    assert phase_of(parse_poll(poll(True, "running"))) is Phase.RUNNING
    assert phase_of(parse_poll(poll(False, "running"))) is Phase.AGENT_DOWN
    assert phase_of(parse_poll(poll(False, "finished_with_errors"))) is Phase.FINISHED
    assert phase_of(parse_poll(poll(False, "stopped"))) is Phase.STOPPED
    assert phase_of(parse_poll(poll(False, None))) is Phase.NOT_STARTED
    assert str(Phase.AGENT_DOWN) == "agent down" and Phase.FINISHED == "finished"


@pytest.mark.parametrize("permanent", [True, False], ids=["permanent", "transient"])
def test_a_pull_an_operator_must_fix_fails_the_host_at_once_and_a_hiccup_is_tried_again(tmp_path: Path, bundle: Path, permanent: bool) -> None:
    """A shell that garbles even the relay's rsync stream ('protocol version mismatch') was tried
    again at every poll until host_lost_after_s (600 s) before its runs could move on."""
    r = rig(tmp_path, bundle)
    pull, calls = r.driver.channel.pull, []

    def failing_once(*args: object, **kwargs: object) -> int:
        calls.append(1)
        if len(calls) == 1:
            error = PermanentTransportError if permanent else ConnectionLost
            raise error("ct200", "rsync: protocol version mismatch -- is your shell clean?")
        return pull(*args, **kwargs)  # type: ignore[arg-type]

    r.driver.channel.pull = failing_once  # type: ignore[method-assign]
    if permanent:
        status = r.drive()
        assert status.phase is Phase.FAILED and "protocol version mismatch" in status.last_error
        assert len(calls) == 1  # not tried again: the host's runs can go to others now
    else:
        status = r.drive()
        assert status.phase is Phase.FINISHED and len(calls) > 1 and local_results(r) == {run.id for _, run in r.plan.runs}


def test_an_agent_that_was_paused_is_said_once_per_pause(tmp_path: Path, bundle: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The agent notices a pause of its own (SIGSTOP, a frozen VM) and redoes the run in flight;
    the controller said nothing of it (the round-two fault table's "not reported")."""
    r = rig(tmp_path, bundle)
    r.agent.last_error = AgentError("agent", "agent_paused", "fleet's agent did not run for 20.0 s; a run in flight across it is done again", 1.8e9)
    with caplog.at_level(logging.WARNING, logger="fleet.sweep"):
        status = r.drive()
    said = [rec.getMessage() for rec in caplog.records if "was paused" in rec.getMessage()]
    assert status.phase is Phase.FINISHED and said == ["ct200: fleet's agent was paused (fleet's agent did not run for 20.0 s; a run in flight across it is done again)"]
