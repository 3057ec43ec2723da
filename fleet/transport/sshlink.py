"""The paramiko side of the SSH transport (fleet.transport.ssh): a verified connection through
Fabric's resolution of the target (ssh config, ProxyJump), the host-key policies, the stream pump
of one exec, the park of live connections, and how paramiko's failures map to fleet's errors.

Apart from `SSHTransport` so that a transfer (rsync over OpenSSH) and a one-shot command
(`fleet facts`, `status`, `fetch-logs`: fleet.transport.openssh) never import paramiko, Fabric and
invoke -- a third of a nothing-changed fetch's time. `SSHTransport` imports this module on its
first command outside `one_shot` (a sweep's).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import math
import os
import select
import shlex
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import paramiko
from fabric import Config, Connection

from fleet.errors import AuthenticationFailed, ConnectionLost, ConnectTimeout, HostKeyError, PermanentTransportError, TransportError
from fleet.transport.sharing import ConnectionPark
from fleet.transport.target import HANDSHAKE_CLOSED, NO_ROUTE, REFUSED, TIMED_OUT, SSHTarget, authentication_failed

log = logging.getLogger("fleet.transport")

_CHUNK = 1 << 16
# The most a query's answer may hold (Transport.query: a poll's few hundred bytes; a progress
# file of a big sweep is tens of KiB): a host cannot make the controller hold more.
QUERY_LIMIT = 4 << 20
# Keeps NAT and firewall state alive on idle connections; it does not detect a dead peer
# (paramiko never waits for the reply), the per-call deadline does that.
_KEEPALIVE_S = 15
# How often paramiko's transport thread wakes on a connection with nothing to read, once connected
# (paramiko's own 0.1 s, Transport._active_check_timeout, serves its handshake). Each wake-up is an
# exception raised and caught in that thread, under the GIL: 0.39-0.76 ms of controller CPU per
# idle connection-second at 0.1 s, 0.07 ms at 1 s (benchmarks/bench_idle_connections.py); at 64 hosts
# 0.8-1.5 s of provision's 4.72 s (benchmarks/bench_provision.py). Once a second still sends the keepalive on time; closing does not wait for it
# (close_quietly shuts the socket down, which wakes the thread at once).
_IDLE_WAKE_S = 1.0
# Closing a connection must never hold up the caller, even if the link is dead.
_CLOSE_WAIT_S = 1.0
# AES-GCM first, where both ends have it (OpenSSH since 6.2): one authenticated decryption per packet
# in C. paramiko prefers aes-ctr, whose HMAC it checks with a byte-by-byte comparison in Python (21 %
# of the controller's Python time in a profile of 400 polls). Measured: a bare paramiko command 1.51 ->
# 1.36 ms of CPU (300 commands x 4 rounds to a test host); the sweep's poll 2.70 -> 2.56-2.62 ms
# (benchmarks/bench_poll_pull.py), where the channel's opening and closing cost more than the cipher.
# The order only: a server without GCM negotiates what it has, as before.
_AEAD = "-gcm@openssh.com"


def _aead_first(sock: socket.socket | paramiko.Channel, disabled_algorithms: dict[str, list[str]] | None = None) -> paramiko.Transport:
    """paramiko's Transport, as SSHClient.connect makes it (its transport_factory), preferring AES-GCM."""
    transport = paramiko.Transport(sock, disabled_algorithms=disabled_algorithms)
    options = transport.get_security_options()
    ciphers = tuple(options.ciphers)
    options.ciphers = tuple(c for c in ciphers if c.endswith(_AEAD)) + tuple(c for c in ciphers if not c.endswith(_AEAD))
    return transport


# What opening a session on a cached connection raises when the link dropped it while idle.
SESSION_ERRORS = (paramiko.SSHException, EOFError, OSError)


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


def connect_failure(exc: BaseException, target: SSHTarget) -> tuple[str, tuple[str, ...]]:
    """Why a connection to `target` failed, in words, and the host file fields to check."""
    if isinstance(exc, (paramiko.BadHostKeyException, UnknownHostKey)):
        return "host key refused", ("known_hosts", "host_key_policy")
    if isinstance(exc, paramiko.AuthenticationException) or (isinstance(exc, paramiko.SSHException) and "No authentication methods available" in str(exc)):
        return authentication_failed(target)
    causes: list[BaseException] = [exc]
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        causes = list(exc.errors.values()) or causes
    for cause in causes:
        number = getattr(cause, "errno", None)
        if isinstance(cause, ConnectionRefusedError) or number == errno.ECONNREFUSED:
            return REFUSED
        if number in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return NO_ROUTE
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve {target.address or target.ssh_alias} ({cause.strerror or cause})", ("address", "ssh_alias")
        if isinstance(cause, TimeoutError) or number == errno.ETIMEDOUT:
            return TIMED_OUT
    if isinstance(exc, paramiko.SSHException) and "banner" in str(exc):
        return "timed out waiting for the SSH banner (not an SSH server on that port, or an overloaded one)", ("port", "address")
    if isinstance(exc, (EOFError, ConnectionResetError)):
        return HANDSHAKE_CLOSED
    return f"{type(exc).__name__}: {str(exc) or 'the host closed the connection'}", ("address", "port")


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


def open_connection(host: str, target: SSHTarget) -> Connection:
    """A verified connection to `target` (and its ProxyJump hops), keepalive and TCP_NODELAY on."""
    if target.identity_file is not None and not target.identity_file.is_file():
        raise PermanentTransportError(host, f"identity_file {target.identity_file} does not exist")
    connect_timeout = max(1, math.ceil(target.connect_timeout))
    connect_kwargs: dict[str, object] = {
        "banner_timeout": connect_timeout,
        "auth_timeout": connect_timeout,
        "channel_timeout": connect_timeout,
        "transport_factory": _aead_first,
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
        raise PermanentTransportError(host, f"ssh_config {target.ssh_config} does not exist") from exc
    conn = Connection(target.destination, user=target.user, port=target.port, config=config)
    hop: object = conn
    while isinstance(hop, Connection):  # the target, then each ProxyJump hop
        hop.client = _new_client(host, target)
        hop = hop.gateway
    try:
        conn.open()
    except BaseException:
        close_quietly(conn)
        raise
    conn.transport.set_keepalive(_KEEPALIVE_S)
    hop = conn
    while isinstance(hop, Connection):
        if isinstance(hop.transport.sock, socket.socket):
            # Without it every channel open waits ~40 ms on Nagle + delayed ACK.
            hop.transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A hop's socket is a channel of the hop before it: its timeout bounds the same wait.
        hop.transport.sock.settimeout(_IDLE_WAKE_S)
        hop = hop.gateway
    return conn


def _new_client(host: str, target: SSHTarget) -> paramiko.SSHClient:
    """A client that trusts exactly the keys in our known_hosts (never the AutoAdd default)."""
    client = paramiko.SSHClient()
    if target.known_hosts.is_file():
        client.load_host_keys(str(target.known_hosts))
    if target.host_key_policy == "accept-new":
        client.set_missing_host_key_policy(_AcceptNewKey(host, target.known_hosts))
    else:
        client.set_missing_host_key_policy(_RefuseUnknownKey())
    return client


def pump(channel: paramiko.Channel, stdin: BinaryIO | None, stdout: Callable[[bytes], object]) -> bytes:
    """Feed stdin and drain stdout (to `stdout`, as it arrives) and stderr together (either side
    may fill its window first).

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
            stdout(channel.recv(_CHUNK))
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


def drain_stderr(channel: paramiko.Channel) -> None:
    """Read and drop what waits on a long-lived channel's stderr (its window never fills)."""
    while channel.recv_stderr_ready():
        channel.recv_stderr(_CHUNK)


def is_live(conn: Connection) -> bool:
    return bool(conn.is_connected)


def close_quietly(conn: Connection) -> None:
    """Close a connection and its jump hosts without ever blocking the caller for long."""

    def close_all() -> None:
        hop: object = conn
        while isinstance(hop, Connection):
            if hop.transport is not None and isinstance(hop.transport.sock, socket.socket):
                # Wakes the transport thread out of its read now, instead of at its next
                # _IDLE_WAKE_S timeout, so that no thread outlives its connection.
                with contextlib.suppress(OSError):  # never connected, or the link already gone
                    hop.transport.sock.shutdown(socket.SHUT_RDWR)
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
PARK: ConnectionPark[Connection] = ConnectionPark(close_quietly, is_live)
atexit.register(PARK.close_all)
