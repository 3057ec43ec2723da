"""The SSH `Transport`: Fabric resolves the target (ssh config, ProxyJump), paramiko carries it.

Why not Fabric's `run`: its session open can wait an hour on a dead peer, paramiko's keepalive
never notices one, and its env support puts values on the command line. So every call here runs
in a worker thread that the caller waits for at most `timeout`; when that passes, the connection
is closed under the worker (which unblocks it) and `CommandTimeout` is raised. The next call
opens a fresh connection; so does a call that finds the cached one stale before its command
was sent (safe: nothing ran yet).

Secrets: `env` is written by a first exec into a `mktemp` file (mode 0600, in /dev/shm when it
is writable, else /tmp) via that exec's stdin; the command's shell sources it, removes it, then
runs the command. Values never appear in an argv, a log or a `CommandResult`.

Files: `put` streams into `mktemp` next to the target, `chmod`s, `sync`s and `mv`s it into place
(needs only coreutils on the host, no SFTP); `get` streams `cat` into a local temp file that is
fsynced and renamed.
"""

from __future__ import annotations

import atexit
import io
import logging
import math
import os
import posixpath
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

import paramiko
from fabric import Config, Connection

from fleet.errors import (
    AuthenticationFailed,
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    ConnectTimeout,
    HostKeyError,
    PermanentTransportError,
    TransportError,
)
from fleet.host.atomic import atomic_file
from fleet.transport.base import CommandResult, command_text, env_exports
from fleet.transport.rsync import push_source, remote_spec, rsync_transfer
from fleet.transport.sharing import ConnectionPark
from fleet.transport.target import SSHTarget

log = logging.getLogger("fleet.transport")

T = TypeVar("T")

_CHUNK = 1 << 16
# Keeps NAT and firewall state alive on idle connections; it does not detect a dead peer
# (paramiko never waits for the reply), the per-call deadline does that.
_KEEPALIVE_S = 15
# Closing a connection must never hold up the caller, even if the link is dead.
_CLOSE_WAIT_S = 1.0

_STAGE_ENV_SCRIPT = (
    'umask 077; d=/dev/shm; { [ -d "$d" ] && [ -w "$d" ]; } || d="${TMPDIR:-/tmp}"; '
    'f=$(mktemp "$d/.fleet-env.XXXXXXXXXX") && cat > "$f" && printf %s "$f"'
)


class UnknownHostKey(paramiko.SSHException):
    """The server's key is not in known_hosts and the policy is "verify"."""

    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        self.hostname = hostname
        self.key = key
        super().__init__(f"no {key.get_name()} host key known for {hostname}")


class _RefuseUnknownKey(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise UnknownHostKey(hostname, key)


class _AcceptNewKey(paramiko.MissingHostKeyPolicy):
    """Record an unknown key (a changed one still fails: paramiko raises BadHostKeyException)."""

    def __init__(self, host: str, known_hosts: Path) -> None:
        self.host = host
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n".encode()
        # One O_APPEND write, not a rewrite: several hosts may be accepted at once from parallel
        # threads, and a read-modify-rename would lose all but one of their lines.
        fd = os.open(self.known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("%s: accepted new host key %s for %s into %s", self.host, key.fingerprint, hostname, self.known_hosts)


def classify_exception(exc: BaseException) -> type[TransportError] | None:
    """The fleet error for a paramiko/socket failure; None if `exc` is not a transport failure."""
    if isinstance(exc, TransportError):
        return type(exc)
    if isinstance(exc, (paramiko.BadHostKeyException, UnknownHostKey)):
        return HostKeyError
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthenticationFailed
    if isinstance(exc, (paramiko.ssh_exception.IncompatiblePeer, paramiko.ConfigParseError)):
        return PermanentTransportError
    if isinstance(exc, paramiko.SSHException) and "No authentication methods available" in str(exc):
        return AuthenticationFailed
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError since 3.10
        return ConnectTimeout
    if isinstance(exc, paramiko.SSHException) and "banner" in str(exc):
        return ConnectTimeout
    if isinstance(exc, (paramiko.SSHException, EOFError, OSError)):
        # Refused, reset, broken pipe, no route, DNS, "session not active", channel refused.
        return ConnectionLost
    return None


def host_key_hint(exc: BaseException, known_hosts: Path) -> str:
    """What the operator should do about a refused host key."""
    if isinstance(exc, UnknownHostKey):
        address, port = _split_key_name(exc.hostname)
        return (
            f"unknown host key {exc.key.fingerprint} ({exc.key.get_name()}) for {exc.hostname}, not in {known_hosts}. "
            f"Check that fingerprint out of band, then record it: ssh-keyscan -p {port} {address} >> {known_hosts} "
            "(or set host_key_policy: accept-new)"
        )
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            f"host key for {exc.hostname} CHANGED: the host sent {exc.key.fingerprint}, {known_hosts} expects "
            f"{exc.expected_key.fingerprint}. If the host was reinstalled, remove the old key with "
            f"ssh-keygen -R {shlex.quote(exc.hostname)} -f {known_hosts} and verify the new one; "
            "otherwise someone may be intercepting the connection"
        )
    return str(exc)


def _split_key_name(name: str) -> tuple[str, int]:
    """known_hosts names are `addr` (port 22) or `[addr]:port`."""
    if name.startswith("[") and "]:" in name:
        address, port = name[1:].split("]:", 1)
        return address, int(port)
    return name, 22


def env_prelude(env_file: str) -> str:
    """Shell lines that load and delete a staged env file before the caller's command runs."""
    quoted = shlex.quote(env_file)
    # `command .`: a failing `.` must not exit a POSIX shell before the file is removed.
    return (
        f"command . {quoted}; __fleet_rc=$?; rm -f {quoted}; "
        '[ "$__fleet_rc" -eq 0 ] || { echo "fleet: could not load the environment file" >&2; exit 125; }; '
        "unset __fleet_rc\n"
    )


def put_script(remote: str, mode: int) -> str:
    """Shell text that writes stdin to `remote` atomically: temp file, chmod, fsync, rename."""
    directory = posixpath.dirname(remote) or "."
    template = posixpath.join(directory, f".{posixpath.basename(remote)}.fleet-tmp.XXXXXXXX")
    return (
        f"set -e; mkdir -p {shlex.quote(directory)}; tmp=$(mktemp {shlex.quote(template)}); "
        "trap 'rm -f \"$tmp\"' EXIT; "
        f'cat > "$tmp"; chmod {mode:o} "$tmp"; sync "$tmp"; mv -f "$tmp" {shlex.quote(remote)}; trap - EXIT'
    )


@dataclass
class _Call:
    # Set just before the caller's command is sent: from then on it may have run.
    started: bool = False


@dataclass(frozen=True)
class _ExecOutcome:
    exit_code: int
    stdout: bytes
    stderr: bytes


class SSHTransport:
    """One SSH host. Not thread-safe: one caller at a time (fan-out gives each host a thread)."""

    def __init__(self, host: str, target: SSHTarget) -> None:
        self.host = host
        self.target = target
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        # Bumped whenever the connection is dropped, so that a worker abandoned by a timed-out
        # call cannot install the connection it finishes opening afterwards.
        self._epoch = 0

    # ----------------------------------------------------------------------------- public API

    def run(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        check: bool = False,
    ) -> CommandResult:
        text = command_text(command)
        prelude_env = env_exports(env) if env else None
        started = time.monotonic()

        def work(call: _Call, epoch: int) -> _ExecOutcome:
            script = text
            if prelude_env is not None:
                staged = self._exec(epoch, _STAGE_ENV_SCRIPT, stdin=io.BytesIO(prelude_env.encode()))
                if staged.exit_code != 0 or not staged.stdout:
                    raise CommandFailed(
                        self.host, "stage environment file", staged.exit_code, "", staged.stderr.decode(errors="replace")
                    )
                script = env_prelude(staged.stdout.decode()) + text
            return self._exec(epoch, script, stdin=io.BytesIO(stdin) if stdin is not None else None, call=call)

        outcome = self._bounded(f"`{text}`", timeout, work)
        result = CommandResult.from_output(
            self.host, text, outcome.exit_code, outcome.stdout, outcome.stderr, time.monotonic() - started
        )
        return result.check() if check else result

    def put(self, local: Path, remote: str, *, mode: int | None = None, timeout: float) -> None:
        file_mode = local.stat().st_mode & 0o7777 if mode is None else mode
        with local.open("rb") as source:
            self._put_stream(source, remote, file_mode, timeout, f"put {local} -> {remote}")

    def put_bytes(self, data: bytes, remote: str, *, mode: int | None = None, timeout: float) -> None:
        self._put_stream(io.BytesIO(data), remote, 0o644 if mode is None else mode, timeout, f"put {remote}")

    def get(self, remote: str, local: Path, *, timeout: float) -> None:
        what = f"get {remote} -> {local}"
        command = shlex.join(["cat", "--", remote])

        def work(call: _Call, epoch: int) -> None:
            with atomic_file(local) as sink:
                outcome = self._exec(epoch, command, stdin=None, stdout_sink=sink, call=call)
                if outcome.exit_code != 0:
                    raise CommandFailed(self.host, what, outcome.exit_code, "", outcome.stderr.decode(errors="replace"))

        self._bounded(what, timeout, work)

    def rsync_pull(
        self, remote: str, local: Path, *, timeout: float, delete: bool = False, excludes: Sequence[str] = ()
    ) -> CommandResult:
        source = remote_spec(self.target, remote)
        return rsync_transfer(self.host, source, local, ssh=self.target, timeout=timeout, delete=delete, excludes=excludes)

    def rsync_push(self, local: Path, remote: str, *, timeout: float, delete: bool = False) -> CommandResult:
        deadline = time.monotonic() + timeout
        # rsync creates only the last level of the destination; older rsyncs lack --mkpath.
        self.run(["mkdir", "-p", posixpath.dirname(remote.rstrip("/")) or "."], timeout=timeout, check=True)
        return rsync_transfer(
            self.host,
            push_source(local),
            remote_spec(self.target, remote),
            ssh=self.target,
            timeout=max(1.0, deadline - time.monotonic()),
            delete=delete,
        )

    def close(self) -> None:
        """Hand the live connection to the park, for the next transport of this host to take
        over (fleet.transport.sharing); a dead one is closed."""
        with self._lock:
            conn, self._conn = self._conn, None
            self._epoch += 1
        if conn is not None:
            PARK.park((self.host, self.target), conn)

    # ------------------------------------------------------------------------- deadline guard

    def _bounded(self, what: str, timeout: float, work: Callable[[_Call, int], T]) -> T:
        """Run `work` in a worker thread; return or raise within `timeout` whatever the link does."""
        call = _Call()
        with self._lock:
            epoch = self._epoch
        box: dict[str, object] = {}
        done = threading.Event()

        def worker() -> None:
            try:
                box["value"] = work(call, epoch)
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=worker, name=f"fleet-ssh-{self.host}", daemon=True).start()
        if not done.wait(timeout):
            self._drop()
            if call.started:
                raise CommandTimeout(
                    self.host,
                    f"{what} did not finish within {timeout:g}s (link down or command too slow); "
                    "dropped the connection; the command may still be running on the host",
                )
            raise ConnectTimeout(self.host, f"{what}: could not connect within {timeout:g}s; the command did not start")
        if "error" in box:
            raise self._translate(box["error"], what, call)  # type: ignore[arg-type]
        return box["value"]  # type: ignore[return-value]

    def _translate(self, exc: BaseException, what: str, call: _Call) -> BaseException:
        error_class = classify_exception(exc)
        if error_class is None or isinstance(exc, TransportError):
            if isinstance(exc, TransportError) and exc.transient:
                self._drop()
            return exc
        self._drop()
        if error_class is HostKeyError:
            message = host_key_hint(exc, self.target.known_hosts)
        else:
            message = f"{what}: {type(exc).__name__}: {str(exc) or 'the host closed the connection'}"
            if error_class is ConnectionLost and call.started:
                message += " (the connection dropped while the command ran; it may have run, check before re-running)"
        error = error_class(self.host, message)
        error.__cause__ = exc
        return error

    # ----------------------------------------------------------------------------- connection

    def _connection(self, epoch: int) -> tuple[Connection, bool]:
        """The live connection and whether it was reused; opens one if there is none."""
        with self._lock:
            conn = self._conn
            if conn is not None and conn.is_connected:
                return conn, True
        parked = PARK.take((self.host, self.target))
        if parked is not None:
            with self._lock:
                if self._epoch == epoch and self._conn is None:
                    self._conn = parked
                    return parked, True
            PARK.park((self.host, self.target), parked)
        conn = self._open()
        with self._lock:
            if self._epoch == epoch:
                self._conn = conn
                return conn, False
        _close_quietly(conn)
        raise ConnectionLost(self.host, "the call was abandoned while connecting")

    def _open(self) -> Connection:
        target = self.target
        if target.identity_file is not None and not target.identity_file.is_file():
            raise PermanentTransportError(self.host, f"identity_file {target.identity_file} does not exist")
        connect_timeout = max(1, math.ceil(target.connect_timeout))
        connect_kwargs: dict[str, object] = {
            "banner_timeout": connect_timeout,
            "auth_timeout": connect_timeout,
            "channel_timeout": connect_timeout,
        }
        if target.identity_file is not None:
            # Like IdentitiesOnly=yes: the given key (and IdentityFile from ssh config), nothing else.
            connect_kwargs.update(key_filename=[str(target.identity_file)], look_for_keys=False, allow_agent=False)
        try:
            # Jump hosts inherit these through Fabric's config clone: same key, same timeouts.
            config = Config(
                overrides={"connect_kwargs": connect_kwargs, "timeouts": {"connect": connect_timeout}},
                runtime_ssh_path=str(target.ssh_config) if target.ssh_config is not None else None,
            )
        except FileNotFoundError as exc:
            raise PermanentTransportError(self.host, f"ssh_config {target.ssh_config} does not exist") from exc
        conn = Connection(target.destination, user=target.user, port=target.port, config=config)
        hop: object = conn
        while isinstance(hop, Connection):  # the target, then each ProxyJump hop
            hop.client = self._new_client()
            hop = hop.gateway
        try:
            conn.open()
        except BaseException:
            _close_quietly(conn)
            raise
        conn.transport.set_keepalive(_KEEPALIVE_S)
        hop = conn
        while isinstance(hop, Connection):
            if isinstance(hop.transport.sock, socket.socket):
                # Without it every channel open waits ~40 ms on Nagle + delayed ACK.
                hop.transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hop = hop.gateway
        return conn

    def _new_client(self) -> paramiko.SSHClient:
        """A client that trusts exactly the keys in our known_hosts (never the AutoAdd default)."""
        client = paramiko.SSHClient()
        if self.target.known_hosts.is_file():
            client.load_host_keys(str(self.target.known_hosts))
        if self.target.host_key_policy == "accept-new":
            client.set_missing_host_key_policy(_AcceptNewKey(self.host, self.target.known_hosts))
        else:
            client.set_missing_host_key_policy(_RefuseUnknownKey())
        return client

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self._epoch += 1
        if conn is not None:
            _close_quietly(conn)

    def _session(self, epoch: int) -> paramiko.Channel:
        conn, reused = self._connection(epoch)
        open_timeout = self.target.connect_timeout
        try:
            return conn.transport.open_session(timeout=open_timeout)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if not reused:
                raise
            # A connection the link dropped while idle still looks active; nothing was sent
            # on it yet, so a fresh one is safe even for a non-idempotent command.
            log.info("%s: cached connection is stale (%s), reconnecting", self.host, exc)
        with self._lock:
            if self._conn is conn:
                self._conn = None
        _close_quietly(conn)
        conn, _ = self._connection(epoch)
        return conn.transport.open_session(timeout=open_timeout)

    # ---------------------------------------------------------------------------------- exec

    def _exec(
        self,
        epoch: int,
        script: str,
        *,
        stdin: BinaryIO | None,
        stdout_sink: BinaryIO | None = None,
        call: _Call | None = None,
    ) -> _ExecOutcome:
        channel = self._session(epoch)
        try:
            if call is not None:
                call.started = True
            channel.exec_command(script)
            stdout = io.BytesIO() if stdout_sink is None else stdout_sink
            stderr = _pump(channel, stdin, stdout)
            return _ExecOutcome(
                channel.recv_exit_status(), stdout.getvalue() if stdout_sink is None else b"", stderr  # type: ignore[attr-defined]
            )
        finally:
            channel.close()

    def _put_stream(self, source: BinaryIO, remote: str, mode: int, timeout: float, what: str) -> None:
        def work(call: _Call, epoch: int) -> None:
            outcome = self._exec(epoch, put_script(remote, mode), stdin=source, call=call)
            if outcome.exit_code != 0:
                raise CommandFailed(self.host, what, outcome.exit_code, "", outcome.stderr.decode(errors="replace"))

        self._bounded(what, timeout, work)


def _pump(channel: paramiko.Channel, stdin: BinaryIO | None, stdout: BinaryIO) -> bytes:
    """Feed stdin and drain stdout/stderr together (either side may fill its window first).

    Returns stderr once the command exited and both streams reached EOF; raises ConnectionLost
    if the channel closes without an exit status.
    """
    stderr = bytearray()
    pending = b""
    if stdin is None:
        channel.shutdown_write()
    while True:
        sent = False
        if stdin is not None and channel.send_ready():
            pending = pending or stdin.read(_CHUNK)
            if not pending:
                channel.shutdown_write()
                stdin = None
            else:
                try:
                    pending = pending[channel.send(pending) :]
                    sent = True
                except OSError:  # the command exited without reading all of its stdin
                    stdin, pending = None, b""
        while channel.recv_ready():
            stdout.write(channel.recv(_CHUNK))
        while channel.recv_stderr_ready():
            stderr += channel.recv_stderr(_CHUNK)
        if channel.exit_status_ready() and channel.eof_received:
            if not (channel.recv_ready() or channel.recv_stderr_ready()):
                return bytes(stderr)
        elif channel.closed:
            raise EOFError("the channel closed before the command's exit status arrived")
        if sent:
            continue
        if channel.eof_received:  # output done, exit status on its way
            channel.status_event.wait(0.2)
        else:  # wakes on output; paramiko has no event for "send window open", so poll for that
            select.select([channel], [], [], 0.01 if stdin is not None else 0.5)


def _is_live(conn: Connection) -> bool:
    return bool(conn.is_connected)


def _close_quietly(conn: Connection) -> None:
    """Close a connection and its jump hosts without ever blocking the caller for long."""

    def close_all() -> None:
        hop: object = conn
        while isinstance(hop, Connection):
            try:
                hop.close()
            except Exception as exc:  # a dead link may fail to close cleanly; it is gone anyway
                log.debug("closing %s: %s", hop.host, exc)
            hop = hop.gateway

    closer = threading.Thread(target=close_all, name="fleet-ssh-close", daemon=True)
    closer.start()
    closer.join(_CLOSE_WAIT_S)


# Closed transports' live connections, for the next transport of the same host (one paramiko
# login per host per controller process); closed after PARK_S idle seconds and at exit.
PARK: ConnectionPark[Connection] = ConnectionPark(_close_quietly, _is_live)
atexit.register(PARK.close_all)
