"""One command over the OpenSSH client (`ssh`), for one-shot commands (fleet.transport.sharing
`one_shot`): `fleet facts`, `status`, `fetch-logs` make one call or two per host and exit, and
for them paramiko's import (with Fabric and invoke) and its handshakes under one GIL cost more
than the whole of a plain `ssh` login (benchmarks/results/peers.md).

The command is what `SSHTransport` sends over paramiko: wrapped between the same fresh markers
(fleet.transport.framing), its environment first on stdin, so the output, exit status and
secrets rules are the same. The `ssh` argv is rsync's (fleet.transport.rsync `ssh_argv`: same
key, port, known_hosts policy, timeouts, and a master that already serves the host), and a
failed login is read from what ssh prints as rsync's is.

Where a one-shot command makes several calls to a host at once (`fetch-logs`), `shared_login`
gives them one login: a master of the block's own, stopped when the block ends.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import re
import select
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fleet.errors import AuthenticationFailed, CommandTimeout, ConnectionLost, HostKeyError, PermanentTransportError, TransportError
from fleet.transport.framing import Frame, Unframer, cut, warn_noise
from fleet.transport.process import run_process
from fleet.transport.rsync import ssh_argv, ssh_failure
from fleet.transport.sharing import MAX_SOCKET_PATH, MASTERS, STOP_WAIT_S
from fleet.transport.target import HANDSHAKE_CLOSED, NO_ROUTE, REFUSED, TIMED_OUT, LoginCause, SSHTarget, authentication_failed

log = logging.getLogger("fleet.transport")

# What `ssh` exits with when it, not the remote command, failed (or a signal killed the remote shell).
SSH_FAILED = 255
# The exit code of a command whose shell was killed (fleet.transport.base `Transport.run`).
KILLED_SHELL = -1
# What ssh prints when the link went while a command ran (a peer that stopped answering, a reset,
# sshd gone); a remote shell killed by a signal leaves ssh silent.
_LINK_LOST = re.compile(r"Connection to \S+ closed|closed by remote host|Broken pipe|Connection reset|not responding|client_loop")


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: bytes
    stderr: bytes


class LoginFailed(Exception):
    """`ssh` exited before the command ran: `error_class` and `reason` say why, `fields` are the host
    file fields to check, `stderr` is ssh's tail (for the debug log)."""

    def __init__(self, error_class: type[TransportError], reason: str, fields: tuple[str, ...], stderr: str) -> None:
        super().__init__(reason)
        self.error_class, self.reason, self.fields, self.stderr = error_class, reason, fields, stderr


def command_argv(target: SSHTarget, control_path: str | None, remote_command: str) -> list[str]:
    """`ssh ... [-l user] destination remote_command`; through a master that serves the host
    already, never starting one (a one-shot command leaves none behind). LogLevel=ERROR: ssh's
    own notices ("Permanently added ... to the list of known hosts") are not the host's shell
    talking, which is what the wrapper's noise warning would call them."""
    argv = ssh_argv(target, control_path, start_master=False)
    argv += ["-o", "LogLevel=ERROR"]
    if target.user:
        argv += ["-l", target.user]
    return [*argv, target.destination, remote_command]


def run_command(host: str, target: SSHTarget, script: str, *, timeout: float, env_exports: str | None, stdin: bytes | None, what: str) -> Outcome:
    """Run `script` on the host through `ssh`, within `timeout` (the process group is killed
    after it: `CommandTimeout`). Raises `LoginFailed` when ssh could not run it, `ConnectionLost`
    when the link dropped while it ran (it may have run)."""
    frame = Frame.new()
    wrapped = frame.wrap(script, env_on_stdin=env_exports is not None)
    if env_exports is not None:  # ahead of the command's own stdin, as over paramiko
        stdin = frame.env_input(env_exports) + (stdin or b"")
    if target.identity_file is not None and not target.identity_file.is_file():  # ssh would only warn, then fail to log in
        raise LoginFailed(PermanentTransportError, f"identity_file {target.identity_file} does not exist", ("identity_file",), "")
    if target.host_key_policy == "accept-new":  # ssh records a new key only where the folder exists (paramiko's policy makes it too)
        target.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = command_argv(target, MASTERS.control_path(target), wrapped)
    try:
        done = run_process(host, argv, timeout=timeout, stdin=stdin, what=what)
    except CommandTimeout:
        raise CommandTimeout(host, f"{what} did not finish within {timeout:g}s (link down or command too slow); killed its ssh client; the command may still be running on the host") from None
    captured = io.BytesIO()
    unframer = Unframer(frame, captured.write)
    unframer.feed(done.stdout)
    unframer.close()
    errors = cut(frame, done.stderr)
    if unframer.exit_code is None and done.exit_code == SSH_FAILED:
        said = done.stderr.decode(errors="replace")
        tail = " | ".join(said.strip().splitlines()[-3:])
        if unframer.framed:
            if _LINK_LOST.search(said):
                raise ConnectionLost(host, f"{what}: the connection dropped while the command ran (ssh: {tail}); it may have run, check before re-running")
            # ssh exits 255 too when a signal killed the remote shell, and then says nothing:
            # the contract's -1, as paramiko reports a shell that ended without an exit status.
            return Outcome(KILLED_SHELL, captured.getvalue(), errors.output)
        raise LoginFailed(*login_failure(said, target), stderr=tail)
    warn_noise(host, unframer.noise, errors.noise)
    status = done.exit_code if unframer.exit_code is None else unframer.exit_code
    return Outcome(status, captured.getvalue(), errors.output)


def host_key_hint(stderr: str, target: SSHTarget) -> str:
    """What the operator should do about a host key ssh refused (as fleet.transport.sshlink says it for paramiko)."""
    port = target.port or 22
    name = target.destination if port == 22 else f"[{target.destination}]:{port}"
    if "HOST IDENTIFICATION HAS CHANGED" in stderr:
        return (
            f"host key for {name} CHANGED: it is not the one {target.known_hosts} holds. If the host was reinstalled, remove the old key with "
            f"ssh-keygen -R {shlex.quote(name)} -f {target.known_hosts} and verify the new one; otherwise someone may be intercepting the connection"
        )
    if "host key is known for" in stderr:
        return (
            f"unknown host key for {name}, not in {target.known_hosts}. Check its fingerprint out of band, then record it: "
            f"ssh-keyscan -p {port} {target.destination} >> {target.known_hosts} (or set host_key_policy: accept-new)"
        )
    return "host key refused"


def login_failure(stderr: str, target: SSHTarget) -> tuple[type[TransportError], str, tuple[str, ...]]:
    """Why `ssh` could not run the command, from what it printed, in the words the paramiko path
    uses (fleet.transport.sshlink `connect_failure`), and the host file fields to check."""
    error_class, reason = ssh_failure(stderr)
    if error_class is HostKeyError:
        return error_class, host_key_hint(stderr, target), ("known_hosts", "host_key_policy")
    if error_class is AuthenticationFailed:
        return (error_class, *authentication_failed(target))
    if error_class is PermanentTransportError:
        return error_class, reason, ("ssh_alias",)
    for pattern, (cause, fields) in _CONNECT_CAUSES:
        if pattern.search(stderr):
            return error_class, cause.replace("{destination}", target.destination), fields
    tail = " | ".join(stderr.strip().splitlines()[-3:])
    return error_class, f"{reason}: {tail}", ("address", "port")


# What ssh prints when it cannot reach the host, and the cause in the paramiko path's words.
_CONNECT_CAUSES: tuple[tuple[re.Pattern[str], LoginCause], ...] = (
    (re.compile(r"Connection refused"), REFUSED),
    (re.compile(r"No route to host|Network is unreachable"), NO_ROUTE),
    (re.compile(r"Could not resolve hostname"), ("cannot resolve {destination}", ("address", "ssh_alias"))),
    (re.compile(r"timed out"), TIMED_OUT),
    (re.compile(r"Connection closed by|Connection reset|kex_exchange_identification"), HANDSHAKE_CLOSED),
)

# --------------------------------------------------------------------------- one login for a block

# What a block's master prints (its LocalCommand) once it has logged in and listens on its socket.
_READY = "fleet-login-ready"
# A block's socket is the host's shared name (fleet.transport.sharing `socket_name`) plus this
# process and block: no other process (a running sweep's ControlMaster=auto) may take it for the
# host's master, and lose it when the block ends.
_BLOCKS = itertools.count()


@contextmanager
def shared_login(host: str, target: SSHTarget) -> Iterator[None]:
    """The block's OpenSSH processes for `target` (commands and rsyncs of a one-shot command) go
    through one login: `fetch-logs` dumps a host's journal and pulls its tree and its results at
    once, three logins with a handshake on both ends each, where one serves them all.

    A master that serves the host already (a running sweep's) is used as it is. Otherwise the
    block starts one of its own, `ssh -N` with its socket under this process's name, and reads
    its LocalCommand's line: ssh runs it once it has logged in and listens. The master is this
    process's child (under `setpriv --pdeathsig`, where util-linux has it, so that it dies with a
    killed controller too) and is stopped by a signal when the block ends: no `ssh -O` calls.
    Where it cannot log in, the block's processes connect on their own, as without it, and say
    why in their own words (a host that is down costs one connect timeout more)."""
    shared = MASTERS.control_path(target)
    if shared is None or os.path.exists(shared):
        yield
        return
    path = f"{shared}.{os.getpid()}.{next(_BLOCKS)}"
    if len(path) > MAX_SOCKET_PATH:
        yield
        return
    argv = ssh_argv(target, None)
    argv += ["-o", "ControlMaster=yes", "-o", f"ControlPath={path}", "-o", "ControlPersist=no"]
    argv += ["-o", "PermitLocalCommand=yes", "-o", f"LocalCommand=echo {_READY}", "-o", "LogLevel=ERROR", "-N"]
    if target.user:
        argv += ["-l", target.user]
    argv.append(target.destination)
    if setpriv := shutil.which("setpriv"):
        argv = [setpriv, "--pdeathsig", "TERM", *argv]
    try:
        master = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError as exc:
        log.debug("%s: no shared login (%s)", host, exc)
        yield
        return
    try:
        if _ready(master, deadline=time.monotonic() + max(30.0, 3 * target.connect_timeout)):
            with MASTERS.serve_block(target, path):
                yield
        else:
            log.debug("%s: the shared login did not come up (ssh exit %s); each connects on its own", host, master.poll())
            yield
    finally:
        master.terminate()
        try:
            master.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()
        assert master.stdout is not None
        master.stdout.close()
        try:
            os.unlink(path)  # ours; ssh removes it itself on a signal, this is for one that died harder
        except FileNotFoundError:
            pass


def _ready(master: subprocess.Popen[bytes], deadline: float) -> bool:
    """Whether the master said it is ready before `deadline` (False: it exited, or is too slow)."""
    assert master.stdout is not None
    said = b""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([master.stdout], [], [], left)[0]:
            return False
        chunk = os.read(master.stdout.fileno(), 256)
        if not chunk:
            return False
        said += chunk
        if _READY.encode() in said:
            return True
    return False
