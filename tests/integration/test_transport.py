"""The transport layer against real SSH test hosts (tests/testfleet) and the local machine.

The behavioural tests run twice, once over SSH to a test host and once through LocalTransport:
both implementations must keep the same contract. SSH-only tests cover what only a network can
do: silent link drops, reboots, host keys, ProxyJump, a dead host in a fan-out.
"""

from __future__ import annotations

import contextlib
import linecache
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import paramiko
import pytest

from fleet.errors import CommandFailed, CommandTimeout, ConnectTimeout, HostKeyError, PermanentTransportError, TransportError
from fleet.retry import CONNECT, retrying
from fleet.transport import LocalTransport, SSHTarget, SSHTransport, Transport, fan_out, read_boot_id, wait_for_reboot
from fleet.transport import sshlink
from fleet.transport.sharing import is_one_shot, one_shot
from tests.testfleet import TestFleet, TestHost

pytestmark = pytest.mark.testfleet

# How late a bounded call may return: thread hand-off, closing a dead connection (bounded at 1 s).
MARGIN_S = 1.5


def ssh_target(host: TestHost, **changes: object) -> SSHTarget:
    settings: dict[str, object] = dict(
        address=host.address,
        port=host.port,
        user=host.user,
        identity_file=host.identity_file,
        known_hosts=host.known_hosts,
        connect_timeout=2,
    )
    settings.update(changes)
    return SSHTarget(**settings)  # type: ignore[arg-type]


@pytest.fixture(params=["ssh", "ssh-one-shot", "local"])
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    """`ssh-one-shot`: the test runs inside `one_shot()`, where commands go through the `ssh`
    client instead of paramiko (`fleet facts`, `status`, `fetch-logs`): the same contract."""
    if request.param.startswith("ssh"):
        host = request.getfixturevalue("two_hosts").hosts[0]
        made: Transport = SSHTransport(host.name, ssh_target(host))
    else:
        made = LocalTransport("local")
    with one_shot() if request.param == "ssh-one-shot" else contextlib.nullcontext():
        yield made
    made.close()


@pytest.fixture
def remote_dir(transport: Transport, tmp_path: Path) -> Iterator[str]:
    """A scratch directory on the transport's host (the host's own tmpfs for SSH)."""
    path = str(tmp_path / "remote") if isinstance(transport, LocalTransport) else f"/tmp/fleet-test-{secrets.token_hex(4)}"
    transport.run(["mkdir", "-p", path], timeout=10, check=True)
    yield path
    transport.run(["rm", "-rf", path], timeout=10)


# Commands over paramiko (a sweep), and over the `ssh` client inside `one_shot()`.
COMMAND_PATHS = pytest.mark.parametrize("commands", [contextlib.nullcontext, one_shot], ids=["paramiko", "openssh"])


# ------------------------------------------------------------------------ shared behaviour


def test_run_returns_output_exit_code_and_quotes_sequences(transport: Transport) -> None:
    result = transport.run(["printf", "%s|", "a b", "$HOME", "it's"], timeout=10)
    assert (result.ok, result.stdout, result.host) == (True, "a b|$HOME|it's|", transport.host)
    failed = transport.run("echo out; echo err >&2; exit 3", timeout=10)
    assert (failed.exit_code, failed.stdout, failed.stderr) == (3, "out\n", "err\n")
    assert transport.run("tr a-z A-Z", stdin=b"piped\n", timeout=10).stdout == "PIPED\n"
    with pytest.raises(CommandFailed, match="exited 3"):
        transport.run("exit 3", timeout=10, check=True)


def test_query_answers_like_run_and_over_paramiko_through_one_shell(transport: Transport) -> None:
    """A query (the sweep's poll) answers what `run` would, less stderr; over paramiko every
    query goes into one shell that the transport keeps on the host, and one that timed out
    leaves the next to a fresh one."""
    for script in ("printf '%s|' 'a b' \"$HOME\"; printf '\\n\\n'", "echo out; echo err >&2; exit 3", "printf 'no newline'", "echo 'unclosed"):
        ran, asked = transport.run(script, timeout=10), transport.query(script, timeout=10)
        assert (asked.stdout, asked.exit_code, asked.stderr, asked.host) == (ran.stdout, ran.exit_code, "", transport.host)
    # The process that runs a query's script is the child of a `$(...)` subshell; that subshell's
    # parent is the shell that read the query: the same one each time over paramiko.
    reader = "read -r _ _ _ ppid _ < /proc/$PPID/stat; echo $ppid"
    readers = {transport.query(reader, timeout=10).stdout for _ in range(3)}
    kept = isinstance(transport, SSHTransport) and not is_one_shot()
    if kept:
        (shell,) = readers
        assert int(shell) > 1
    with pytest.raises(CommandTimeout, match="did not finish within 1s"):
        transport.query("sleep 5", timeout=1)
    assert transport.query("echo again", timeout=10).stdout == "again\n"
    if kept:
        assert transport.query(reader, timeout=10).stdout != shell, "a new shell after the timeout"
        # A host cannot make the controller hold an endless answer; the next query is clean.
        with pytest.raises(PermanentTransportError, match="answered more than"):
            transport.query("head -c 5000000 /dev/zero | tr '\\0' a", timeout=30)
        assert transport.query("echo clean", timeout=10).stdout == "clean\n"


def test_put_replaces_the_file_atomically(transport: Transport, remote_dir: str, tmp_path: Path) -> None:
    target = f"{remote_dir}/sub/agent.py"
    transport.put_bytes(b"old\n", target, timeout=10)
    inode_before = transport.run(["stat", "-c", "%i", target], timeout=10, check=True).stdout
    local = tmp_path / "agent.py"
    local.write_bytes(os.urandom(3_000_000))
    local.chmod(0o750)
    transport.put(local, target, timeout=20)
    stat = transport.run(["stat", "-c", "%i %a %s", target], timeout=10, check=True).stdout.split()
    assert stat[0] != inode_before.strip(), "a new inode: renamed into place, never written in place"
    assert stat[1:] == ["750", "3000000"]
    assert transport.run(["ls", "-A", f"{remote_dir}/sub"], timeout=10).stdout.split() == ["agent.py"]
    transport.put_bytes(b"secret", target, mode=0o600, timeout=10)
    assert transport.run(["stat", "-c", "%a", target], timeout=10).stdout.strip() == "600"


def test_get_copies_atomically_and_keeps_the_old_file_on_failure(transport: Transport, remote_dir: str, tmp_path: Path) -> None:
    payload = os.urandom(1_000_000)
    transport.put_bytes(payload, f"{remote_dir}/results.bin", timeout=10)
    local = tmp_path / "fetched" / "results.bin"
    transport.get(f"{remote_dir}/results.bin", local, timeout=10)
    assert local.read_bytes() == payload
    with pytest.raises(CommandFailed, match="No such file"):
        transport.get(f"{remote_dir}/missing.bin", local, timeout=10)
    assert local.read_bytes() == payload
    assert sorted(p.name for p in local.parent.iterdir()) == ["results.bin"]


def test_rsync_pull_and_push(transport: Transport, remote_dir: str, tmp_path: Path) -> None:
    transport.run(
        f"cd {remote_dir} && mkdir -p logs/run1 && echo a > logs/run1/server.log && echo b > logs/top.json && echo c > logs/skip.tmp",
        timeout=10,
        check=True,
    )
    pulled = tmp_path / "pulled" / "logs"
    result = transport.rsync_pull(f"{remote_dir}/logs/", pulled, timeout=30, excludes=["*.tmp"])
    assert result.ok, result.stderr
    assert sorted(str(p.relative_to(pulled)) for p in pulled.rglob("*")) == ["run1", "run1/server.log", "top.json"]
    assert (pulled / "run1" / "server.log").read_text() == "a\n"

    # A pull that names what it wrote names what came since, and only that (the ledger's input).
    transport.run(f"cd {remote_dir} && echo d > logs/run1/new.json", timeout=10, check=True)
    again = transport.rsync_pull(f"{remote_dir}/logs/", pulled, timeout=30, excludes=["*.tmp"], ignore_existing=True, list_written=True)
    assert again.ok and [line for line in again.stdout.splitlines() if not line.endswith("/")] == ["run1/new.json"], again.stdout

    (pulled / "top.json").write_text("changed\n")
    (pulled / "run1" / "server.log").unlink()
    (pulled / "run1" / "new.json").unlink()
    pushed = f"{remote_dir}/mirror/logs"
    assert transport.rsync_push(pulled, pushed, timeout=30, delete=True).ok
    listing = transport.run(f"cd {pushed} && find . -type f | sort && cat top.json", timeout=10).stdout.split()
    assert listing == ["./top.json", "changed"]


def test_secret_env_never_appears_in_any_command_line(transport: Transport, remote_dir: str, caplog: pytest.LogCaptureFixture) -> None:
    secret = f"hf_{secrets.token_hex(16)}"
    marker = f"fleet-secret-probe-{secrets.token_hex(4)}"
    outcome: dict[str, object] = {}

    def run_with_secret() -> None:
        outcome["result"] = transport.run(f'sleep 1.5 # {marker}\nprintf %s "$HF_TOKEN"', env={"HF_TOKEN": secret}, timeout=15)

    with caplog.at_level(logging.DEBUG):
        worker = threading.Thread(target=run_with_secret)
        worker.start()
        seen_marker, seen_secret = False, False
        while worker.is_alive():
            # Every process on the machine, the test hosts' included (root sees all namespaces).
            for entry in os.listdir("/proc"):
                try:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes() if entry.isdigit() else b""
                except OSError:
                    continue
                seen_marker |= marker.encode() in cmdline
                seen_secret |= secret.encode() in cmdline
            time.sleep(0.05)
        worker.join()
    assert seen_marker, "the command must have been seen running, else the scan proves nothing"
    assert not seen_secret, "the secret was visible in a process's argv"
    result = outcome["result"]
    assert result.stdout == secret  # type: ignore[attr-defined]
    assert secret not in result.command and secret not in caplog.text  # type: ignore[attr-defined]
    leftovers = transport.run("ls -A /dev/shm /tmp | grep -c fleet-env || true", timeout=10).stdout.strip()
    assert leftovers == "0", "no env file may be left"


def test_a_slow_command_times_out_within_its_bound(transport: Transport) -> None:
    marker = f"{secrets.randbelow(10**6) + 31}"
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="did not finish within 1.5s") as caught:
        transport.run(f"sleep {marker}", timeout=1.5)
    assert time.monotonic() - started < 1.5 + MARGIN_S
    assert caught.value.transient
    # "[s]leep": the pattern must not match the command line of the shell that runs pgrep.
    still_running = transport.run(["pgrep", "-f", f"[s]leep {marker}"], timeout=10).ok
    if isinstance(transport, LocalTransport):
        assert not still_running, "the local transport kills the command's process group"
    else:
        assert still_running and "may still be running" in str(caught.value)
        transport.run(["pkill", "-f", f"sleep {marker}"], timeout=10)


def test_local_copy_that_misses_its_deadline_leaves_nothing_behind(tmp_path: Path) -> None:
    source = tmp_path / "big"
    source.write_bytes(os.urandom(4_000_000))
    destination = tmp_path / "out" / "big"
    with pytest.raises(CommandTimeout, match="nothing was written"):
        LocalTransport().put(source, str(destination), timeout=0)
    assert list(destination.parent.iterdir()) == []


# ----------------------------------------------------------------------------- SSH only


@COMMAND_PATHS
def test_link_dropped_mid_call_fails_within_the_timeout_and_a_retry_succeeds_once_back(
    two_hosts: TestFleet, caplog: pytest.LogCaptureFixture, commands: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    """The link is cut once the command runs on the host (an event, not a delay: a one-shot
    command logs in for each call, and on a loaded machine that login may take longer than any
    fixed delay), and restored 2 s after the call gave up."""
    with commands():
        host = two_hosts.hosts[1]
        transport = SSHTransport(host.name, ssh_target(host, connect_timeout=1.5))
        marker = f"{secrets.randbelow(10**6) + 31}"

        def cut_once_running() -> None:
            while not any(cmd.startswith(f"sleep {marker}") for cmd in two_hosts.processes(host).values()):
                time.sleep(0.02)
            two_hosts.link_down(host)

        cutter = threading.Thread(target=cut_once_running, daemon=True)
        restore = threading.Timer(2.0, two_hosts.link_up, args=(host,))
        try:
            assert transport.run("true", timeout=10).ok  # connected before the drop
            cutter.start()
            started = time.monotonic()
            with pytest.raises(CommandTimeout, match="may still be running"):
                transport.run(f"sleep {marker}", timeout=6)
            assert time.monotonic() - started < 6 + MARGIN_S
            cutter.join()
            restore_at = time.monotonic() + 2.0
            restore.start()

            with caplog.at_level(logging.WARNING, logger="fleet.retry"):
                result = retrying(CONNECT, host.name, lambda: transport.run("hostname", timeout=3), idempotent=True)
            assert result.stdout.strip() == host.name
            assert time.monotonic() >= restore_at - 0.1, "answered only once the link was back"
            assert any(r.getMessage().startswith(f"{host.name}: connect attempt") for r in caplog.records)
            # The dropped command was not killed by the drop: it is still there, as the error said.
            assert any(cmd.startswith(f"sleep {marker}") for cmd in two_hosts.processes(host).values())
            transport.run(["pkill", "-x", "sleep"], timeout=5)
        finally:
            restore.cancel()
            two_hosts.link_up(host)
            transport.close()


def test_reboot_is_detected_by_a_new_boot_id(two_hosts: TestFleet) -> None:
    host = two_hosts.hosts[1]
    transport = SSHTransport(host.name, ssh_target(host))
    rebooting = threading.Thread(target=two_hosts.reboot, args=(host,), kwargs={"down_seconds": 1.0})
    try:
        old = read_boot_id(transport)
        assert old == host.boot_id()
        rebooting.start()
        started = time.monotonic()
        new = wait_for_reboot(transport, old)
        assert new != old and new == host.boot_id()
        assert time.monotonic() - started < 20
        assert transport.run("true", timeout=10).ok  # the stale connection was replaced
    finally:
        if rebooting.ident is not None:
            rebooting.join()
        transport.close()


@COMMAND_PATHS
def test_unknown_host_key_is_refused_by_default_and_recorded_with_accept_new(two_hosts: TestFleet, tmp_path: Path, commands: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
    with commands():
        host = two_hosts.hosts[0]
        known_hosts = tmp_path / "ssh" / "known_hosts"
        refusing = SSHTransport(host.name, ssh_target(host, known_hosts=known_hosts))
        with pytest.raises(HostKeyError, match="ssh-keyscan") as refused:
            refusing.run("true", timeout=10)
        assert not refused.value.transient
        assert not known_hosts.exists(), "verify must never record a key"

        accepting = SSHTransport(host.name, ssh_target(host, known_hosts=known_hosts, host_key_policy="accept-new"))
        assert accepting.run("true", timeout=10).ok
        accepting.close()
        # The recorded line is good for OpenSSH too: rsync (ssh) now verifies strictly against it.
        strict = SSHTransport(host.name, ssh_target(host, known_hosts=known_hosts))
        assert strict.rsync_pull("/etc/hostname", tmp_path / "hostname", timeout=20).ok
        assert strict.run("true", timeout=10).ok
        strict.close()


@COMMAND_PATHS
def test_changed_host_key_is_refused_by_every_policy(two_hosts: TestFleet, tmp_path: Path, commands: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
    with commands():
        host, other = two_hosts.hosts
        # The other host's key, filed under this host's address: what a man in the middle looks like.
        other_key = other.known_hosts.read_text().split()[1:3]
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(f"{host.address} {' '.join(other_key)}\n")
        for policy in ("verify", "accept-new"):
            transport = SSHTransport(host.name, ssh_target(host, known_hosts=known_hosts, host_key_policy=policy))
            with pytest.raises(HostKeyError, match="CHANGED.*ssh-keygen -R"):
                transport.run("true", timeout=10)
        assert known_hosts.read_text() == f"{host.address} {' '.join(other_key)}\n"


def test_ssh_alias_with_proxy_jump(two_hosts: TestFleet, tmp_path: Path) -> None:
    host = two_hosts.hosts[0]
    # The test hosts cannot route to each other, so the jump host forwards to its own address:
    # the connection then reaches sshd from the host itself instead of from the machine.
    config = tmp_path / "ssh_config"
    common = f"  HostName {host.address}\n  User {host.user}\n  IdentityFile {host.identity_file}\n  IdentitiesOnly yes\n  UserKnownHostsFile {host.known_hosts}\n  StrictHostKeyChecking yes\n"
    config.write_text(f"Host jump\n{common}\nHost behind-jump\n{common}  ProxyJump jump\n")
    transport = SSHTransport(host.name, SSHTarget(ssh_alias="behind-jump", ssh_config=config, known_hosts=host.known_hosts))
    try:
        peer = transport.run('echo "$SSH_CLIENT"', timeout=15, check=True).stdout.split()[0]
        assert peer == host.address, "the session must arrive through the jump host"
        direct = SSHTransport(host.name, ssh_target(host))
        assert direct.run('echo "$SSH_CLIENT"', timeout=10).stdout.split()[0] == host.gateway
        direct.close()
        transport.run("hostname > /tmp/fleet-jump-probe", timeout=10, check=True)
        assert transport.rsync_pull("/tmp/fleet-jump-probe", tmp_path / "hostname", timeout=20).ok
        assert (tmp_path / "hostname").read_text().strip() == host.name
    finally:
        transport.close()


def test_fan_out_returns_promptly_when_one_host_is_cut_off(two_hosts: TestFleet) -> None:
    alive, cut = two_hosts.hosts
    transports = {h.name: SSHTransport(h.name, ssh_target(h)) for h in two_hosts.hosts}
    two_hosts.link_down(cut)
    try:
        started = time.monotonic()
        result = fan_out(transports, lambda t: t.run("hostname", timeout=3).stdout.strip(), deadline_s=10)
        assert time.monotonic() - started < 3 + MARGIN_S
    finally:
        two_hosts.link_up(cut)
        for made in transports.values():
            made.close()
    assert list(result) == [alive.name, cut.name]
    assert result[alive.name].value == alive.name
    error = result[cut.name].error
    assert isinstance(error, (ConnectTimeout, CommandTimeout)) and isinstance(error, TransportError)
    assert result[cut.name].transient and cut.name in str(error)


def test_an_idle_connection_wakes_its_transport_thread_at_most_once_a_second(two_hosts: TestFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    """paramiko's thread wakes every 0.1 s on a socket with nothing to read (a caught timeout under
    the GIL each time); a connected link waits sshlink._IDLE_WAKE_S instead. Counted, not timed: a
    loaded machine can only make the thread wake less often than its timeout, never more."""
    wakes: dict[int, int] = {}
    check_keepalive = paramiko.packet.Packetizer._check_keepalive  # type: ignore[attr-defined]  # private, not in the stubs

    def counted(packetizer: paramiko.packet.Packetizer) -> None:  # called on each read that timed out
        wakes[id(packetizer)] = wakes.get(id(packetizer), 0) + 1
        check_keepalive(packetizer)

    monkeypatch.setattr(paramiko.packet.Packetizer, "_check_keepalive", counted)
    conn = sshlink.open_connection("ct", ssh_target(two_hosts.hosts[0]))
    try:
        packetizer = id(conn.transport.packetizer)
        before, started = wakes.get(packetizer, 0), time.monotonic()
        time.sleep(3)
        idle_s = time.monotonic() - started
        assert wakes.get(packetizer, 0) - before <= idle_s / sshlink._IDLE_WAKE_S + 1, (wakes, idle_s)
    finally:
        sshlink.close_quietly(conn)


def test_closing_a_connection_ends_its_transport_thread_without_waiting_for_a_wake_up(two_hosts: TestFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    """close_quietly shuts the socket down, which wakes the thread out of its read: with a wake-up
    two minutes away the thread still ends at once (a left thread would read a closed socket)."""
    monkeypatch.setattr(sshlink, "_IDLE_WAKE_S", 120.0)
    conn = sshlink.open_connection("ct", ssh_target(two_hosts.hosts[0]))
    thread = conn.transport
    assert thread.sock.gettimeout() == 120.0

    # Closed while the thread waits in its read (not while it still handles the login's last
    # messages: it would then see the close at the top of its loop, with or without a shutdown).
    def in_recv() -> bool:
        frame = sys._current_frames().get(thread.ident or 0)
        return frame is not None and ".recv(" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)

    for _ in range(600):
        was_in_recv = in_recv()
        time.sleep(0.1)
        if was_in_recv and in_recv():  # twice in a row: waiting, not passing through
            break
    else:
        pytest.fail("paramiko's transport thread never waited in its read")
    sshlink.close_quietly(conn)
    thread.join(60)  # a bound for a loaded machine, half the wake-up: the socket's shutdown ends it
    assert not thread.is_alive()


def test_a_connection_to_an_openssh_host_encrypts_with_aes_gcm(two_hosts: TestFleet) -> None:
    """OpenSSH offers AES-GCM (since 6.2); paramiko prefers aes-ctr with an HMAC it checks byte by
    byte in Python. fleet asks for GCM first, both ways, and through a jump host too."""
    conn = sshlink.open_connection("ct", ssh_target(two_hosts.hosts[0]))
    try:
        assert conn.transport.remote_cipher.endswith("-gcm@openssh.com")
        assert conn.transport.local_cipher.endswith("-gcm@openssh.com")
    finally:
        sshlink.close_quietly(conn)
