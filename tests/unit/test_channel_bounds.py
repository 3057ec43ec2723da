"""No call of the sweep loop retries past the time after which it calls a host lost: a host that
went away mid-call is noticed by that deadline, whatever the call's own policy (a bundle push's
TRANSFER policy alone would retry for 30 minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import ConnectionLost
from fleet.host.contract.shard import HandoverRequest
from fleet.retry import CONNECT
from fleet.sweep.channel import AgentChannel
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import make_host

pytestmark = pytest.mark.timeout(60)  # unbounded, the calls below would retry for minutes


def channel(max_retry_s: float | None) -> tuple[AgentChannel, FakeTransport]:
    host = make_host()
    transport = FakeTransport(host.name)
    transport.drop_link(10_000)  # the host is gone: every call fails as a dropped link
    return AgentChannel(host, "sweep-1", transport, max_retry_s=max_retry_s), transport


def test_a_call_gives_up_by_the_lost_host_deadline_not_by_its_own_policy() -> None:
    ch, transport = channel(max_retry_s=2.0)
    with pytest.raises(ConnectionLost):
        ch.push_quarantine({"srv": "quarantined"})  # CONNECT: 120 s on its own
    assert 1 <= len(transport.calls) <= 3  # waits of ~1-2 s each: tried for about 2 s, then gave up
    assert ch.link_drops == 1


def test_the_hand_over_request_is_bounded_too_and_the_answer_is_read_once() -> None:
    ch, transport = channel(max_retry_s=2.0)
    with pytest.raises(ConnectionLost):
        ch.ask_handover(HandoverRequest(("srv",)))
    asked = len(transport.calls)
    assert 1 <= asked <= 3
    with pytest.raises(ConnectionLost):
        ch.handover_answer()  # one try: the loop asks again at its next poll
    assert len(transport.calls) == asked + 1


def test_a_policy_shorter_than_the_bound_is_left_as_it_is() -> None:
    ch, _ = channel(max_retry_s=600.0)
    assert ch._bounded(CONNECT) is CONNECT
    assert channel(max_retry_s=None)[0]._bounded(CONNECT) is CONNECT


def test_a_pull_that_leaves_some_files_out_still_brings_the_results_and_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """rsync exit 23 (a host folder turned into a file: 'could not make way for new regular file')
    failed every pull the same way until the host was given up, its results never brought back.
    Now the rest comes (results are their own transfer) and the cause is said once."""
    from fleet.transport.base import CommandResult

    host = make_host("ct200")
    t = FakeTransport("ct200")
    channel = AgentChannel(host, "s1", t)
    runs = channel.dir.runs
    t.write(f"{runs}/r1.json", b"{}")
    pulled = []
    real = t.rsync_pull

    def partial(remote: str, local: Path, **kwargs: object) -> CommandResult:
        done = real(remote, local, **kwargs)  # type: ignore[arg-type]
        pulled.append(remote)
        if remote.rstrip("/") == channel.dir.root:
            return CommandResult("ct200", "rsync", 23, "", "rsync: could not make way for new regular file: logs (code 23)", 0.0)
        return done

    t.rsync_pull = partial  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="fleet.sweep"):
        for _ in range(3):
            channel.pull(tmp_path / "ct200")
    assert (tmp_path / "ct200" / "runs" / "r1.json").exists()
    said = [r.getMessage() for r in caplog.records if "left files out" in r.getMessage()]
    assert len(said) == 1 and "could not make way" in said[0], caplog.text


def test_a_pulls_two_transfers_run_at_once(tmp_path: Path) -> None:
    """The sweep's tree and its results are two rsyncs into disjoint local folders: at once, a pull
    (every poll of a sweep, a nothing-changed fetch-logs) takes one login's time, not two. Each
    transfer here waits for the other to have started: in a row, the first would wait alone and
    the barrier break."""
    import threading

    from fleet.transport.base import CommandResult

    host = make_host("ct200")
    t = FakeTransport("ct200")
    channel = AgentChannel(host, "s1", t)
    t.write(f"{channel.dir.runs}/r1.json", b"{}")
    t.write(f"{channel.dir.root}/logs/agent.log", b"started\n")
    both_started = threading.Barrier(2, timeout=30)  # only a pull in a row ever waits this long
    real = t.rsync_pull
    remotes: list[str] = []

    def meeting(remote: str, local: Path, **kwargs: object) -> CommandResult:
        remotes.append(remote)
        if len(remotes) <= 2:  # the pull's two transfers (a third re-pulls results the ledger refused)
            both_started.wait()
        return real(remote, local, **kwargs)  # type: ignore[arg-type]

    t.rsync_pull = meeting  # type: ignore[method-assign]
    channel.pull(tmp_path / "ct200")
    assert sorted(remotes[:2]) == sorted([channel.dir.root + "/", channel.dir.runs + "/"])
    assert (tmp_path / "ct200" / "logs" / "agent.log").read_bytes() == b"started\n"
    assert (tmp_path / "ct200" / "runs" / "r1.json").exists()


def test_the_poll_counts_the_hosts_results_in_a_shell_and_its_answer_does_not_grow_with_them(tmp_path: Path) -> None:
    """The poll ran `ls runs | grep '[.]json$'` and the controller counted the names: an answer
    of 40 bytes a result, read and split at every poll of every host (2 s), so a sweep's polling
    grew with the square of its runs. The host counts now; the answer's size is the same at 3
    results as at 3,000. Run by a real shell, as on a host."""
    import subprocess

    from fleet.errors import ContractError
    from fleet.sweep.channel import parse_poll

    host = make_host(work_dir=str(tmp_path / "work"))
    ch = AgentChannel(host, "sweep-1", FakeTransport(host.name))
    runs = Path(ch.dir.runs)
    runs.mkdir(parents=True)
    (runs / ".r0.json.tmp").write_text("{}")  # the atomic writer's temporary: not a result
    (runs / "r0.unreadable").write_text("x")  # a bad copy set aside: not a result either

    def answer(results: int) -> str:
        for k in range(results):
            (runs / f"r{k}.json").touch()
        return subprocess.run(["sh", "-c", ch.poll_command()], capture_output=True, text=True, check=True, timeout=60).stdout

    small, large = answer(3), answer(3000)
    assert parse_poll(small).result_files == 3 and parse_poll(large).result_files == 3000
    assert len(large) - len(small) == 3  # "3000" against "3"
    assert parse_poll(answer(0).replace("3000", "", 1)).result_files == 0  # no runs folder yet: grep -c says 0; a cut answer too
    # What a host answers is untrusted: anything but a count is an error naming where, never a guess.
    with pytest.raises(ContractError, match=r"ct200:.*runs: the poll.s count of result files: expected a whole number, got .a.json."):
        parse_poll(large.replace("\n3000\n", "\na.json\n", 1), f"ct200:{ch.dir.progress}")


@pytest.mark.parametrize("active_state, alive", [("active", True), ("activating", True), ("reloading", True), ("deactivating", True), ("inactive", False), ("failed", False), ("", False)])
def test_a_systemd_hosts_poll_asks_systemd_whether_the_agent_runs(tmp_path: Path, active_state: str, alive: bool) -> None:
    """Under systemd the poll asks `systemctl show` for the unit's ActiveState (no Python start on
    the host in every poll) and reads it as the agent's own `service status` does: the poll's whole
    command run by sh, with a `systemctl` first on PATH that answers for the unit it is asked about."""
    import os
    import subprocess

    from fleet.host.agent.services import systemd_status
    from fleet.sweep.channel import parse_poll

    ch = AgentChannel(make_host(service_manager="systemd"), "sweep-1", FakeTransport("ct200"))
    fake = tmp_path / "bin" / "systemctl"
    fake.parent.mkdir()
    # Prints the state only for exactly the call the poll must make (else nothing: read as exited).
    fake.write_text(f'#!/bin/sh\n[ "$*" = "show --property=ActiveState --value fleet-agent@sweep-1.service" ] && printf "%s\\n" {active_state!r}\n')
    fake.chmod(0o755)
    done = subprocess.run(["sh", "-c", ch.poll_command()], capture_output=True, text=True, env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}, timeout=30)
    assert parse_poll(done.stdout).agent_alive is alive
    assert systemd_status("fleet-agent@sweep-1", {"LoadState": "loaded", "ActiveState": active_state}).running is alive  # the agent's own reading
