"""The host lease (fleet.host.contract.lease): the freshness rule on a real lease file with a
controlled clock, boot id and process table; the program a controller sends with `python -S -`
(no fleet importable: it carries what it needs); and, on fake hosts, a provision or a sweep aimed
at a host another live sweep holds is refused naming it, before any stale server is cleared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleet.host.contract.lease import AGENT_TTL_S, CONTROLLER_TTL_S, EXIT_HELD, EXIT_TAKEN, LEASE_FILE, Claim, HostLease, Lease, command_args, parse_held, parse_taken, remote_program
from fleet.host.errors import LeaseHeld, LeaseLost
from fleet.playbook import load_playbook
from fleet.provision.lease import sweep_claim
from fleet.provision.provision import provision_host, provision_options
from fleet.sweep import controller
from fleet.sweep.channel import AgentChannel
from fleet.sweep.controller import start_sweep
from fleet.errors import SweepError
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import FakeAgent, FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
FIRST = Claim("demo-20261201-100000-aaaa", "alice@ws1", 1111)
SECOND = Claim("demo-20261201-100500-bbbb", "bob@ws2", 2222)


class LeaseHost:
    """A controlled clock, boot id and process table for one work dir."""

    def __init__(self, work_dir: Path) -> None:
        self.now, self.boot, self.pids = 1_000_000.0, "boot-1", {4242}
        self.work_dir = work_dir

    def lease(self) -> HostLease:
        return HostLease(self.work_dir, clock=lambda: self.now, boot_id=lambda: self.boot, alive=lambda pid: pid in self.pids)


def test_a_second_claim_is_refused_naming_the_first_its_owner_since_and_heartbeat_age(tmp_path: Path) -> None:
    host = LeaseHost(tmp_path)
    taken = host.lease().acquire(FIRST)
    assert taken.took_over is None and taken.lease.holder_pid is None and taken.lease.ttl_s == CONTROLLER_TTL_S
    host.now += 42
    with pytest.raises(LeaseHeld) as refused:
        host.lease().acquire(SECOND, host="ct200")
    message = str(refused.value)
    assert message.startswith("ct200: held by sweep demo-20261201-100000-aaaa of alice@ws1 (controller pid 1111; no agent yet)")
    assert "held since 1970-01-12 13:46:40Z" in message and "heartbeat 42 s ago" in message
    assert Lease.from_json((tmp_path / LEASE_FILE).read_text()) == taken.lease  # the refusal changed nothing


def test_its_own_sweep_retakes_it_and_a_controller_retake_keeps_the_running_agent_as_holder(tmp_path: Path) -> None:
    host = LeaseHost(tmp_path)
    first = host.lease().acquire(FIRST)
    host.now += 5
    by_agent = host.lease().acquire(Claim(FIRST.sweep_id, "agent@ct200", 0), agent_pid=4242)
    assert by_agent.lease.holder_pid == 4242 and by_agent.lease.ttl_s == AGENT_TTL_S
    assert (by_agent.lease.owner, by_agent.lease.controller_pid) == ("alice@ws1", 1111)  # the agent knows no controller
    host.now += 5
    resumed = host.lease().acquire(Claim(FIRST.sweep_id, "alice@ws1", 3333))  # `fleet sweep --resume`, a new controller
    assert resumed.took_over is None and resumed.lease.taken_at == first.lease.taken_at
    assert resumed.lease.holder_pid == 4242 and resumed.lease.controller_pid == 3333


def test_a_stale_heartbeat_is_taken_over_and_the_takeover_says_why(tmp_path: Path) -> None:
    host = LeaseHost(tmp_path)
    host.lease().acquire(FIRST)
    host.now += CONTROLLER_TTL_S - 1
    with pytest.raises(LeaseHeld):
        host.lease().acquire(SECOND)
    host.now += 2
    taken = host.lease().acquire(SECOND)
    assert taken.took_over is not None and taken.took_over.sweep_id == FIRST.sweep_id
    assert taken.reason == f"its heartbeat is {CONTROLLER_TTL_S + 1:.0f} s old (TTL {CONTROLLER_TTL_S:.0f} s)"
    assert taken.lease.sweep_id == SECOND.sweep_id and taken.lease.taken_at == host.now


def test_a_dead_agent_frees_the_host_at_once_on_its_boot_but_not_after_a_reboot(tmp_path: Path) -> None:
    host = LeaseHost(tmp_path)
    host.lease().acquire(FIRST, agent_pid=4242)
    host.boot = "boot-2"  # rebooted: pid 4242 means nothing now; the controller is re-staging
    host.pids = set()
    with pytest.raises(LeaseHeld):
        host.lease().acquire(SECOND)
    host.boot = "boot-1"  # (the same boot, the agent gone)
    taken = host.lease().acquire(SECOND)
    assert taken.reason == "its agent (pid 4242) is gone"


def test_heartbeat_hand_back_and_release_touch_only_their_own_lease(tmp_path: Path) -> None:
    host = LeaseHost(tmp_path)
    host.lease().acquire(FIRST, agent_pid=4242)
    host.now += 100
    assert host.lease().heartbeat(FIRST.key, 4242).heartbeat_at == host.now
    back = host.lease().hand_back(FIRST.key)
    assert back.holder_pid is None and back.ttl_s == AGENT_TTL_S
    assert host.lease().release(SECOND.key) is False and (tmp_path / LEASE_FILE).exists()
    host.now += AGENT_TTL_S
    host.lease().acquire(SECOND)  # handed back and not re-taken in time: dead
    with pytest.raises(LeaseLost, match=f"the lease of {FIRST.sweep_id} is lost: now held by sweep {SECOND.sweep_id}"):
        host.lease().heartbeat(FIRST.key, 4242)
    assert host.lease().release(FIRST.key) is False
    assert host.lease().release(SECOND.key) is True and not (tmp_path / LEASE_FILE).exists()


def test_a_provision_lease_is_its_own_process_and_an_unreadable_file_is_taken_over(tmp_path: Path) -> None:
    host = LeaseHost(tmp_path)
    mine = Claim("", "carol@ws3", 77)
    host.lease().acquire(mine)
    with pytest.raises(LeaseHeld, match="held by `fleet provision` of carol@ws3"):
        host.lease().acquire(Claim("", "carol@ws3", 78))
    (tmp_path / LEASE_FILE).write_text('{"schema": "fleet.host_lease/1", "sweep_id": ')
    taken = host.lease().acquire(FIRST)
    assert taken.took_over is None and taken.reason is not None and "lease.json is unreadable" in taken.reason


def _program(tmp_path: Path, action: str, claim: Claim) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages, so no fleet: the program must carry what it imports.
    return subprocess.run(
        [sys.executable, "-S", "-", *command_args(action, str(tmp_path / "work"), claim)],
        input=remote_program().decode(), capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip


def test_the_program_runs_with_no_fleet_on_the_host(tmp_path: Path) -> None:
    first = _program(tmp_path, "acquire", FIRST)
    assert first.returncode == EXIT_TAKEN, first.stderr
    assert parse_taken(first.stdout, "t").lease.sweep_id == FIRST.sweep_id
    second = _program(tmp_path, "acquire", SECOND)
    assert second.returncode == EXIT_HELD
    held = parse_held(second.stdout, "t", "ct200")
    assert held.lease.owner == "alice@ws1" and f"held by sweep {FIRST.sweep_id}" in second.stderr
    released = _program(tmp_path, "release", FIRST)
    assert released.returncode == EXIT_TAKEN and '"released": true' in released.stdout


# ------------------------------------------------------------------------------ on fake hosts


def test_provision_of_a_host_a_live_sweep_holds_is_refused_before_any_stale_server_is_cleared() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host, stale_pids=["4242"])  # the first sweep's server, marked as fleet's
    HostLease(shell.lease_dir).acquire(FIRST, agent_pid=None)
    refused = provision_host(host, playbook, provision_options(DEMO.parent, {}, lease=SECOND), transport=t)
    assert refused.status == "failed" and f"held by sweep {FIRST.sweep_id} of alice@ws1" in refused.reason
    assert shell.killed == [] and not [c for c in t.calls if c.command.startswith("for p in ")]
    standalone = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)  # `fleet provision`
    assert standalone.status == "failed" and f"held by sweep {FIRST.sweep_id}" in standalone.reason and shell.killed == []
    # Its own sweep (a re-provision after a reboot) goes on, and clears its own stale server.
    own = provision_host(host, playbook, provision_options(DEMO.parent, {}, lease=FIRST), transport=t)
    assert own.status == "changed", own.reason
    assert shell.killed == ["4242"]
    assert HostLease(shell.lease_dir).read().sweep_id == FIRST.sweep_id  # kept for its agent


def test_fleet_provision_takes_a_lease_of_its_own_and_gives_it_back() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    assert provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t).status == "changed"
    leases = [c for c in t.calls if " - acquire " in c.command or " - release " in c.command]
    assert [" - acquire " in c.command for c in leases] == [True, False]
    assert HostLease(shell.lease_dir).read() is None


def test_a_sweep_whose_only_host_is_held_fails_naming_the_first_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SECOND.sweep_id)
    host = make_host()
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    HostLease(shell.lease_dir).acquire(FIRST)
    with pytest.raises(SweepError, match=f"no host passed provisioning: ct200: ct200: held by sweep {FIRST.sweep_id}"):
        start_sweep(DEMO, [host], tmp_path / "results", connect=lambda h: t, poll_interval_s=0.0, sleep=lambda s: None)
    assert not [c for c in t.calls if c.kind in ("put", "put_bytes", "rsync_push")]  # nothing of the second sweep landed


def test_a_sweep_takes_the_lease_at_provision_and_ship_and_releases_it_at_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SECOND.sweep_id)
    host = make_host()
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    FakeAgent(t, host, SECOND.sweep_id)
    seen: list[str | None] = []
    t.on(lambda c: c.command.startswith("env PYTHONPATH="), lambda _t, _c: seen.append(getattr(HostLease(shell.lease_dir).read(), "sweep_id", None)))
    outcome = start_sweep(DEMO, [host], tmp_path / "results", connect=lambda h: t, poll_interval_s=0.0, sleep=lambda s: None)
    assert outcome.statuses["ct200"].phase == "finished"
    assert seen and set(seen) == {SECOND.sweep_id}  # held by this sweep whenever its agent was started or polled
    actions = [("acquire" if " - acquire " in c.command else "release") for c in t.calls if " - acquire " in c.command or " - release " in c.command]
    assert actions == ["acquire", "acquire", "release"]  # provision, ship, the sweep's end
    assert HostLease(shell.lease_dir).read() is None


def test_the_channel_ships_nothing_to_a_host_another_sweep_holds(tmp_path: Path) -> None:
    host = make_host()
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    HostLease(shell.lease_dir).acquire(FIRST)
    channel = AgentChannel(host, SECOND.sweep_id, t, sleep=lambda s: None)
    shard = None  # never reached: the lease comes first
    with pytest.raises(LeaseHeld, match=f"held by sweep {FIRST.sweep_id}"):
        channel.ship(tmp_path, shard, None)  # type: ignore[arg-type]
    assert [c.kind for c in t.calls] == ["run"]
    assert sweep_claim(SECOND.sweep_id).sweep_id == SECOND.sweep_id


def test_the_lease_programs_held_exit_is_the_agents() -> None:
    """The lease program cannot import contract/exits.py (it runs on hosts as a few carried
    modules), so its code for a held host is a copy: the two must stay one meaning."""
    from fleet.host.contract.exits import FINAL, AgentExit

    assert EXIT_HELD == AgentExit.HOST_HELD and AgentExit.HOST_HELD in FINAL


def test_a_host_provisioned_but_given_no_work_hands_its_lease_back_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Else it would block every other sweep on that host for CONTROLLER_TTL_S (15 minutes)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SECOND.sweep_id)
    busy, idle = make_host("ct200", gpus=8), make_host("ct201", gpus=8)
    transports = {h.name: FakeTransport(h.name) for h in (busy, idle)}
    shells = {h.name: FakeHostShell(transports[h.name], h) for h in (busy, idle)}
    for h in (busy, idle):
        FakeAgent(transports[h.name], h, SECOND.sweep_id)
    outcome = start_sweep(DEMO, [busy, idle], tmp_path / "results", connect=lambda h: transports[h.name], poll_interval_s=0.0, sleep=lambda s: None)
    unused = [name for name in transports if name not in outcome.statuses]
    assert unused, f"the demo's three TP1 servers were expected on one 8-GPU host: {sorted(outcome.statuses)}"
    for name in unused:
        actions = [("acquire" if " - acquire " in c.command else "release") for c in transports[name].calls if " - acquire " in c.command or " - release " in c.command]
        assert actions == ["acquire", "release"]  # provision, then at once: no shard for it
        assert HostLease(shells[name].lease_dir).read() is None
