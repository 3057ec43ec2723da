"""Pure parts of the transport layer: rsync argv, error classification, retry policies, fan-out."""

from __future__ import annotations

import errno
import logging
import random
import shlex
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import paramiko
import pytest

from fleet.errors import (
    AuthenticationFailed,
    CommandTimeout,
    ConnectionLost,
    ConnectTimeout,
    HostKeyError,
    PermanentTransportError,
    TransportError,
)
from fleet.retry import CONNECT, TRANSFER, WAIT_FOR_REBOOT, RetryPolicy, at_most_once, retrying
from fleet.transport.base import CommandResult, command_text
from fleet.transport.fanout import fan_out
from fleet.transport.reboot import wait_for_reboot
from fleet.errors import RebootTimeout
from fleet.transport.openssh import command_argv
from fleet.transport.rsync import (
    PARTIAL_DIR,
    classify_rsync_failure,
    remote_spec,
    rsync_argv,
    ssh_argv,
)
from fleet.transport.ssh import put_script
from fleet.transport.sshlink import UnknownHostKey, classify_exception, host_key_hint
from fleet.transport.target import SSHTarget

RSYNC_FIXTURES = Path(__file__).parent.parent / "fixtures" / "transport" / "rsync"


# ------------------------------------------------------------------------------- rsync argv


def _e_option(argv: list[str]) -> list[str]:
    """The ssh command as rsync will split it (rsync honours quotes like a shell here)."""
    return shlex.split(argv[argv.index("-e") + 1])


def test_rsync_pull_argv_carries_every_ssh_setting() -> None:
    target = SSHTarget(
        address="10.201.1.2",
        port=2222,
        user="root",
        identity_file=Path("/keys/id_ed25519"),
        known_hosts=Path("/state/known_hosts"),
        connect_timeout=7.5,
    )
    argv = rsync_argv(remote_spec(target, "/var/lib/fleet/results/"), "/tmp/out", ssh=target, io_timeout_s=30)
    assert argv[0] == "rsync"
    assert argv[-3:] == ["--", "root@10.201.1.2:/var/lib/fleet/results/", "/tmp/out"]
    assert f"--partial-dir={PARTIAL_DIR}" in argv
    assert "--timeout=30" in argv
    assert "--delete" not in argv
    assert _e_option(argv) == [
        "ssh",
        "-p", "2222",
        "-i", "/keys/id_ed25519", "-o", "IdentitiesOnly=yes",
        "-o", "BatchMode=yes",
        "-o", "UserKnownHostsFile=/state/known_hosts",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "ConnectTimeout=8",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
    ]  # fmt: skip


def test_rsync_argv_for_an_alias_uses_the_ssh_config_and_accept_new() -> None:
    target = SSHTarget(ssh_alias="ct200", ssh_config=Path("/cfg/ssh_config"), host_key_policy="accept-new")
    argv = rsync_argv("/local/dir/", remote_spec(target, "/srv/models"), ssh=target, io_timeout_s=60, delete=True)
    ssh = _e_option(argv)
    assert ssh[:3] == ["ssh", "-F", "/cfg/ssh_config"]
    assert "-p" not in ssh and "-i" not in ssh  # port and key come from the ssh config
    assert "StrictHostKeyChecking=accept-new" in ssh
    assert "UserKnownHostsFile=" + str(Path("~/.ssh/known_hosts").expanduser()) in ssh
    assert argv[-2:] == ["/local/dir/", "ct200:/srv/models"]
    assert "--delete" in argv


def test_a_one_shot_command_goes_through_a_serving_master_and_never_starts_one() -> None:
    """fleet.transport.openssh: rsync's ssh settings, the user as `-l` (an alias keeps its own
    from the ssh config otherwise), ssh's own notices off (they would read as the shell talking)."""
    target = SSHTarget(address="10.201.1.2", port=2222, user="root", identity_file=Path("/keys/id"), known_hosts=Path("/state/known_hosts"))
    argv = command_argv(target, "/run/fleet-ssh/abc", "echo hi")
    assert argv[: len(ssh_argv(target))] == ssh_argv(target)
    assert argv[len(ssh_argv(target)) :] == ["-o", "ControlMaster=no", "-o", "ControlPath=/run/fleet-ssh/abc", "-o", "LogLevel=ERROR", "-l", "root", "10.201.1.2", "echo hi"]
    alias = command_argv(SSHTarget(ssh_alias="ct200"), None, "true")
    assert alias[-2:] == ["ct200", "true"] and "-l" not in alias and not any(o.startswith("Control") for o in alias)


def test_rsync_argv_quotes_paths_with_spaces() -> None:
    target = SSHTarget(address="h", identity_file=Path("/my keys/id"), known_hosts=Path("/my state/known_hosts"))
    ssh = _e_option(rsync_argv("h:/a", "/b", ssh=target, io_timeout_s=5))
    assert ssh[ssh.index("-i") + 1] == "/my keys/id"
    # ssh reads UserKnownHostsFile as a list split on spaces; the quotes keep it one path.
    assert 'UserKnownHostsFile="/my state/known_hosts"' in ssh


def test_local_rsync_argv_has_no_remote_shell_and_keeps_excludes_before_paths() -> None:
    argv = rsync_argv("/src/", "/dst", ssh=None, io_timeout_s=10, excludes=["*.tmp", "cache/"])
    assert "-e" not in argv
    assert argv[-5:] == ["--exclude=*.tmp", "--exclude=cache/", "--", "/src/", "/dst"]


# A remote shell as sshd runs one: the words after the host joined with spaces and handed to `sh -c`.
FAKE_SSH = '#!/bin/sh\nshift\nexec sh -c "$*"\n'


@pytest.mark.parametrize("protect", [True, False], ids=["protected", "unprotected-control"])
def test_a_remote_path_with_shell_syntax_never_runs_on_the_host(tmp_path: Path, protect: bool) -> None:
    """rsync's old argument handling forced on (RSYNC_OLD_ARGS=1: what an rsync before 3.2.4 does):
    the remote path reaches the remote shell as typed. With fleet's argv (--protect-args) the
    `$(touch ...)` is a directory name; without it -- the control case -- the marker appears."""
    if shutil.which("rsync") is None:
        pytest.skip("rsync is not installed")
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text(FAKE_SSH)
    fake_ssh.chmod(0o755)
    marker = tmp_path / "INJECTED"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f.txt").write_text("x")
    dest = f"{tmp_path}/dest/$(touch INJECTED)"  # the remote shell runs in tmp_path (cwd below)
    argv = rsync_argv(f"{tmp_path}/src/", f"host:{dest}", ssh=SSHTarget(address="host"), io_timeout_s=10)
    argv[argv.index("-e") + 1] = str(fake_ssh)
    if not protect:
        argv.remove("--protect-args")
    (tmp_path / "dest").mkdir()
    env = {"PATH": "/usr/bin:/bin", "RSYNC_OLD_ARGS": "1"}
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if protect:
        assert done.returncode == 0, done.stderr
        assert not marker.exists()
        assert (Path(dest) / "f.txt").read_text() == "x"  # the path, as typed, is where the file went
    else:
        assert marker.exists(), "the control did not inject: this test could not catch an injection"


def test_rsync_argv_rejects_a_non_positive_io_timeout() -> None:
    with pytest.raises(ValueError, match="io_timeout_s"):
        rsync_argv("/a", "/b", ssh=None, io_timeout_s=0)


def test_ssh_target_needs_exactly_one_of_address_and_alias() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        SSHTarget()
    with pytest.raises(ValueError, match="exactly one"):
        SSHTarget(address="10.0.0.1", ssh_alias="x")
    with pytest.raises(ValueError, match="host_key_policy"):
        SSHTarget(address="10.0.0.1", host_key_policy="yolo")  # type: ignore[arg-type]
    assert remote_spec(SSHTarget(ssh_alias="ct200", user="ops"), "/x") == "ops@ct200:/x"


# ------------------------------------------------------------------ rsync exit classification

# Captured from real rsync 3.5.0 + OpenSSH 9.2 runs against a test host (see the file names).
RSYNC_CASES = {
    "unknown_host_key": HostKeyError,
    "changed_host_key": HostKeyError,
    "auth_failed": AuthenticationFailed,
    "bad_ssh_config": PermanentTransportError,
    "remote_rsync_missing": PermanentTransportError,
    "refused": ConnectionLost,
    "unresolvable": ConnectionLost,
    "link_dropped_mid_transfer": ConnectionLost,
    "connect_timeout": ConnectTimeout,
    "no_route": ConnectTimeout,
    "missing_source": None,  # a file problem: the transfer ran, the caller reads exit 23
}


def _load_rsync_fixture(name: str) -> tuple[int, str]:
    lines = (RSYNC_FIXTURES / f"{name}.txt").read_text().splitlines()
    assert lines[-1].startswith("rc=")
    return int(lines[-1][3:]), "\n".join(lines[:-1])


@pytest.mark.parametrize("name", sorted(RSYNC_CASES))
def test_rsync_failures_are_classified_from_real_output(name: str) -> None:
    exit_code, stderr = _load_rsync_fixture(name)
    result = classify_rsync_failure(exit_code, stderr)
    expected = RSYNC_CASES[name]
    assert (result[0] if result else None) is expected


def test_rsync_file_permission_error_is_not_an_auth_failure() -> None:
    stderr = 'rsync: [sender] send_files failed to open "/root/x": Permission denied (13)\n'
    assert classify_rsync_failure(23, stderr) is None
    assert classify_rsync_failure(0, "") is None


# ------------------------------------------------------------- paramiko/socket classification


@pytest.fixture(scope="module")
def two_keys() -> tuple[paramiko.PKey, paramiko.PKey]:
    return paramiko.ECDSAKey.generate(), paramiko.ECDSAKey.generate()


def _exceptions(keys: tuple[paramiko.PKey, paramiko.PKey]) -> list[tuple[BaseException, type[TransportError]]]:
    got, expected = keys
    return [
        (paramiko.AuthenticationException("Authentication failed."), AuthenticationFailed),
        (paramiko.BadAuthenticationType("Bad authentication type", ["password"]), AuthenticationFailed),
        (paramiko.PasswordRequiredException("Private key file is encrypted"), AuthenticationFailed),
        (paramiko.SSHException("No authentication methods available"), AuthenticationFailed),
        (paramiko.BadHostKeyException("[10.0.0.2]:22", got, expected), HostKeyError),
        (UnknownHostKey("[10.0.0.2]:2222", got), HostKeyError),
        (paramiko.IncompatiblePeer("no acceptable kex algorithm"), PermanentTransportError),
        (paramiko.ConfigParseError("Unparsable line"), PermanentTransportError),
        (socket.timeout("timed out"), ConnectTimeout),
        (TimeoutError(), ConnectTimeout),
        (paramiko.SSHException("Error reading SSH protocol banner"), ConnectTimeout),
        (paramiko.SSHException("SSH session not active"), ConnectionLost),
        (paramiko.SSHException("Timeout opening channel."), ConnectionLost),
        (paramiko.ChannelException(2, "Connect failed"), ConnectionLost),
        (paramiko.ProxyCommandFailure("ssh -W", "exit 255"), ConnectionLost),
        (paramiko.ssh_exception.NoValidConnectionsError({("10.0.0.2", 22): ConnectionRefusedError()}), ConnectionLost),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), ConnectionLost),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), ConnectionLost),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), ConnectionLost),
        (OSError(errno.EHOSTUNREACH, "No route to host"), ConnectionLost),
        (socket.gaierror(-2, "Name or service not known"), ConnectionLost),
        (EOFError(), ConnectionLost),
    ]


def test_each_paramiko_and_socket_failure_maps_to_one_fleet_error(
    two_keys: tuple[paramiko.PKey, paramiko.PKey],
) -> None:
    for exc, expected in _exceptions(two_keys):
        assert classify_exception(exc) is expected, exc


def test_transient_means_the_network_may_recover(two_keys: tuple[paramiko.PKey, paramiko.PKey]) -> None:
    classified = [(type(exc).__name__, classify_exception(exc)) for exc, _ in _exceptions(two_keys)]
    transient = {name for name, cls in classified if cls is not None and cls.transient}
    permanent = {name for name, cls in classified if cls is not None and not cls.transient}
    assert {"ConnectionRefusedError", "ConnectionResetError", "EOFError", "TimeoutError", "gaierror"} <= transient
    assert {"AuthenticationException", "BadHostKeyException", "UnknownHostKey", "IncompatiblePeer"} <= permanent


def test_programming_errors_are_not_transport_errors() -> None:
    assert classify_exception(ValueError("bug")) is None
    assert classify_exception(KeyError("bug")) is None


def test_host_key_hints_name_the_fix(two_keys: tuple[paramiko.PKey, paramiko.PKey]) -> None:
    got, expected = two_keys
    known_hosts = Path("/state/known_hosts")
    unknown = host_key_hint(UnknownHostKey("[10.0.0.2]:2222", got), known_hosts)
    assert "ssh-keyscan -p 2222 10.0.0.2 >> /state/known_hosts" in unknown
    assert got.fingerprint in unknown and "accept-new" in unknown
    changed = host_key_hint(paramiko.BadHostKeyException("10.0.0.2", got, expected), known_hosts)
    assert "ssh-keygen -R 10.0.0.2 -f /state/known_hosts" in changed
    assert got.fingerprint in changed and expected.fingerprint in changed


# ------------------------------------------------------------------- shell text, run locally


def test_command_text_quotes_sequences_and_keeps_strings() -> None:
    assert command_text(["echo", "a b", "$HOME"]) == "echo 'a b' '$HOME'"
    assert command_text("echo $HOME") == "echo $HOME"
    with pytest.raises(ValueError):
        command_text([])


def test_put_script_writes_atomically_with_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "new dir" / "agent.py"
    subprocess.run(["sh", "-c", put_script(str(target), 0o750)], input=b"print(1)\n", check=True)
    assert target.read_bytes() == b"print(1)\n"
    assert target.stat().st_mode & 0o777 == 0o750
    assert [p.name for p in target.parent.iterdir()] == ["agent.py"], "no temp file may be left"


def test_put_script_leaves_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("old")
    # `chmod 99999` fails after the data was written: the old file must survive, no temp left.
    out = subprocess.run(["sh", "-c", put_script(str(target), 0o77777777)], input=b"new", capture_output=True)
    assert out.returncode != 0
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_run_result_check() -> None:
    ok = CommandResult("h", "true", 0, "", "", 0.1)
    assert ok.check() is ok
    with pytest.raises(Exception, match="exited 3: boom"):
        CommandResult("h", "false", 3, "", "boom\n", 0.1).check()


# ------------------------------------------------------------------------- retry policies


class FakeClock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _failing(errors: list[BaseException], value: str = "done"):
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return value

    return fn, calls


def test_transient_errors_are_retried_with_capped_jittered_backoff(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    fn, calls = _failing([ConnectionLost("ct200", "reset")] * 6)
    with caplog.at_level(logging.WARNING, logger="fleet.retry"):
        assert retrying(CONNECT, "ct200", fn, idempotent=True, sleep=clock.sleep, clock=clock, rng=random.Random(1)) == "done"
    assert calls["n"] == 7
    # 1, 2, 4, 8, then capped at 10; each plus up to 1 s of jitter.
    for slept, base in zip(clock.sleeps, [1, 2, 4, 8, 10, 10]):
        assert base <= slept <= base + CONNECT.jitter_s
    assert len(set(s - int(s) for s in clock.sleeps)) > 1, "jitter must vary"
    assert len(caplog.records) == 6
    assert all(r.getMessage().startswith("ct200: connect attempt") for r in caplog.records)


def test_permanent_and_non_transport_errors_are_raised_at_once() -> None:
    for error in (HostKeyError("ct200", "changed"), AuthenticationFailed("ct200", "denied"), ValueError("bug")):
        clock = FakeClock()
        fn, calls = _failing([error])
        with pytest.raises(type(error)):
            retrying(CONNECT, "ct200", fn, idempotent=True, sleep=clock.sleep, clock=clock)
        assert calls["n"] == 1 and clock.sleeps == []


@pytest.mark.parametrize("policy", [CONNECT, WAIT_FOR_REBOOT, TRANSFER], ids=lambda p: p.name)
def test_every_policy_gives_up_within_its_time_bound(policy: RetryPolicy) -> None:
    clock = FakeClock()

    def always_down() -> str:
        clock.now += 0.5  # each attempt costs time too
        raise ConnectTimeout("ct200", "no banner")

    with pytest.raises(ConnectTimeout):
        retrying(policy, "ct200", always_down, idempotent=True, sleep=clock.sleep, clock=clock, rng=random.Random(2))
    assert clock.now <= policy.max_delay_s + 0.5
    assert max(clock.sleeps) <= policy.max_wait_s + policy.jitter_s
    if policy.max_attempts is not None:
        assert len(clock.sleeps) == policy.max_attempts - 1


def test_reboot_policy_keeps_probing_for_its_whole_window() -> None:
    clock = FakeClock()
    fn, _ = _failing([ConnectionLost("ct200", "refused")] * 10_000)
    with pytest.raises(ConnectionLost):
        retrying(WAIT_FOR_REBOOT, "ct200", fn, idempotent=True, sleep=clock.sleep, clock=clock, rng=random.Random(3))
    assert WAIT_FOR_REBOOT.max_delay_s - (WAIT_FOR_REBOOT.max_wait_s + WAIT_FOR_REBOOT.jitter_s) <= clock.now
    assert len(clock.sleeps) > 60  # capped at ~12 s, so a host that is back is seen quickly


def test_retrying_refuses_a_non_idempotent_call() -> None:
    fn, calls = _failing([])
    with pytest.raises(ValueError, match="at_most_once"):
        retrying(CONNECT, "ct200", fn, idempotent=False)
    assert calls["n"] == 0


def test_at_most_once_checks_state_instead_of_re_running_an_action_that_took_effect() -> None:
    clock = FakeClock()
    started: list[str] = []

    def start_agent() -> str:
        started.append("agent")
        raise ConnectionLost("ct200", "dropped while the command ran")  # it did run

    def agent_running() -> str | None:
        return "pid 42" if started else None

    outcome = at_most_once(CONNECT, "ct200", start_agent, agent_running, sleep=clock.sleep, clock=clock)
    assert outcome == "pid 42"
    assert started == ["agent"], "the action must not run a second time"


def test_at_most_once_re_runs_an_action_that_provably_did_not_happen() -> None:
    clock = FakeClock()
    attempts: list[int] = []

    def start_agent() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectTimeout("ct200", "never connected")  # nothing ran
        return "pid 7"

    outcome = at_most_once(CONNECT, "ct200", start_agent, lambda: None, sleep=clock.sleep, clock=clock)
    assert outcome == "pid 7" and len(attempts) == 2


# ---------------------------------------------------------------------- reboot wait logic


class ScriptedBootIds:
    """Stands in for a host's answers to `cat boot_id`: a value, or a transport error."""

    host = "ct200"

    def __init__(self, answers: list[str | BaseException]) -> None:
        self.answers = answers

    def run(self, command: object, *, timeout: float, **_: object) -> CommandResult:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return CommandResult(self.host, str(command), 0, answer + "\n", "", 0.01)


def test_wait_for_reboot_rides_out_the_outage_and_returns_the_new_boot_id() -> None:
    clock = FakeClock()
    host = ScriptedBootIds(["old", ConnectionLost("ct200", "refused"), CommandTimeout("ct200", "hung"), "", "new"])
    assert wait_for_reboot(host, "old", sleep=clock.sleep, clock=clock) == "new"  # type: ignore[arg-type]
    assert len(clock.sleeps) == 4


def test_wait_for_reboot_times_out_when_the_boot_id_never_changes() -> None:
    clock = FakeClock()
    with pytest.raises(RebootTimeout, match="no new boot id") as caught:
        wait_for_reboot(ScriptedBootIds(["old"]), "old", sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert not caught.value.transient
    assert clock.now <= WAIT_FOR_REBOOT.max_delay_s


def test_wait_for_reboot_stops_at_a_permanent_error() -> None:
    clock = FakeClock()
    with pytest.raises(HostKeyError):
        wait_for_reboot(ScriptedBootIds([HostKeyError("ct200", "changed")]), "old", sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert clock.sleeps == []


# --------------------------------------------------------------------------------- fan-out


def test_fan_out_returns_every_host_even_when_one_hangs() -> None:
    never = threading.Event()

    def work(name: str) -> str:
        if name == "hung":
            never.wait()
        if name == "broken":
            raise ConnectionLost(name, "reset")
        return name.upper()

    started = time.monotonic()
    result = fan_out({"ok": "ok", "hung": "hung", "broken": "broken"}, work, deadline_s=0.5)
    elapsed = time.monotonic() - started
    never.set()
    assert elapsed < 1.5
    assert list(result) == ["ok", "hung", "broken"]
    assert result["ok"].value == "OK" and result["ok"].ok
    assert result["hung"].timed_out and result["hung"].transient
    assert isinstance(result["broken"].error, ConnectionLost) and not result["broken"].timed_out
    assert set(result.succeeded) == {"ok"} and set(result.failed) == {"hung", "broken"}
    assert all(o.duration_s >= 0 for o in result.values())


def test_fan_out_limits_parallelism_and_gives_each_host_its_own_deadline() -> None:
    running, peak = [0], [0]
    lock = threading.Lock()

    def work(delay: float) -> float:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(delay)
        with lock:
            running[0] -= 1
        return delay

    # Two waves of 0.6 s: the second ends after 1.2 s, past a deadline shared by all hosts.
    hosts = {f"h{i}": 0.6 for i in range(4)}
    result = fan_out(hosts, work, deadline_s=1.0, max_parallel=2)
    assert peak[0] == 2
    assert all(o.ok for o in result.values()), "later waves must not inherit the first wave's deadline"
