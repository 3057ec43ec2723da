"""The SSH `Transport`: Fabric resolves the target (ssh config, ProxyJump), paramiko carries its
commands (fleet.transport.sshlink, imported on the first one: a transfer is OpenSSH's rsync and
needs neither). Inside `one_shot()` (fleet.transport.sharing) `run` goes through the `ssh` client
instead (fleet.transport.openssh): same framing, env on stdin and deadline, no paramiko.

Why not Fabric's `run`: its session open can wait an hour on a dead peer, paramiko's keepalive
never notices one, and its env support puts values on the command line. So every call here runs
in a worker thread that the caller waits for at most `timeout`; when that passes, the connection
is closed under the worker (which unblocks it) and `CommandTimeout` is raised. The next call
opens a fresh connection; so does a call that finds the cached one stale before its command
was sent (safe: nothing ran yet).

Output: every command runs wrapped between random markers (fleet.transport.framing), and only
what lies between them comes back: the text a host's shell startup files print around every
command (a banner in ~/.bashrc) is skipped, and named once per host in a warning.

Queries (`query`, the sweep's poll): written as one line each into one `sh` that the transport
keeps open on the host (fleet.transport.framing's `query_line`), instead of a session opened,
run and closed for each: a query costs the controller a few packets instead of a dozen. The
shell goes with its connection (a drop, a timeout, a reboot); the next query opens another.

Secrets: `env` goes first on the command's stdin as `export` lines, which the wrapper reads and
exports before the command runs (fleet.transport.framing): never in an argv, a file on the
host, a log or a `CommandResult`.

Files: `put` streams into `mktemp` next to the target, `chmod`s, `sync`s and `mv`s it into place
(needs only coreutils on the host, no SFTP); `get` streams `cat` into a local temp file that is
fsynced and renamed.
"""

from __future__ import annotations

import io
import logging
import posixpath
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from fleet.errors import CommandFailed, CommandTimeout, ConnectionLost, ConnectTimeout, HostKeyError, PermanentTransportError, TransportError, short_command
from fleet.host.atomic import atomic_file
from fleet.transport.base import CommandResult, command_text, env_exports
from fleet.transport.framing import Frame, Unframer, cut, warn_noise
from fleet.transport.rsync import push_source, remote_spec, rsync_transfer
from fleet.transport.sharing import is_one_shot
from fleet.transport.target import SSHTarget

if TYPE_CHECKING:
    import paramiko
    from fabric import Connection

log = logging.getLogger("fleet.transport")

T = TypeVar("T")


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

    def __init__(self, host: str, target: SSHTarget, host_file: Path | None = None) -> None:
        self.host = host
        self.target = target
        self.host_file = host_file  # named in a connect failure's message: the fields to check are there
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        # Bumped whenever the connection is dropped, so that a worker abandoned by a timed-out
        # call cannot install the connection it finishes opening afterwards.
        self._epoch = 0
        # The long-lived `sh` that `query` writes its commands into, with the connection it runs on.
        self._shell: tuple[Connection, paramiko.Channel] | None = None

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
        exports = env_exports(env) if env else None
        started = time.monotonic()
        if is_one_shot():
            outcome = self._run_openssh(text, timeout, exports, stdin)
            result = CommandResult.from_output(self.host, text, outcome.exit_code, outcome.stdout, outcome.stderr, time.monotonic() - started)
            return result.check() if check else result

        def work(call: _Call, epoch: int) -> _ExecOutcome:
            source = io.BytesIO(stdin) if stdin is not None else None
            return self._exec(epoch, text, stdin=source, env_exports=exports, call=call)

        outcome = self._bounded(f"`{short_command(text)}`", timeout, work, full=text)
        result = CommandResult.from_output(self.host, text, outcome.exit_code, outcome.stdout, outcome.stderr, time.monotonic() - started)
        return result.check() if check else result

    def query(self, command: str | Sequence[str], *, timeout: float) -> CommandResult:
        if is_one_shot():
            return replace(self.run(command, timeout=timeout), stderr="")
        text = command_text(command)
        started = time.monotonic()

        def work(call: _Call, epoch: int) -> _ExecOutcome:
            return self._ask(epoch, text, call)

        outcome = self._bounded(f"`{short_command(text)}`", timeout, work, full=text)
        return CommandResult.from_output(self.host, text, outcome.exit_code, outcome.stdout, b"", time.monotonic() - started)

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
        self,
        remote: str,
        local: Path,
        *,
        timeout: float,
        delete: bool = False,
        excludes: Sequence[str] = (),
        ignore_existing: bool = False,
        list_written: bool = False,
    ) -> CommandResult:
        source = remote_spec(self.target, remote)
        return rsync_transfer(
            self.host, source, local, ssh=self.target, timeout=timeout, delete=delete, excludes=excludes, regular_only=True,
            ignore_existing=ignore_existing, list_written=list_written,
        )  # fmt: skip

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

    def shared_login(self) -> AbstractContextManager[None]:
        """Inside a one-shot command, one login for the block's OpenSSH processes; a sweep's
        share the host's master already (fleet.transport.sharing)."""
        if not is_one_shot():
            return nullcontext()
        from fleet.transport.openssh import shared_login

        return shared_login(self.host, self.target)

    def close(self) -> None:
        """Hand the live connection to the park, for the next transport of this host to take
        over (fleet.transport.sharing); a dead one is closed."""
        with self._lock:
            conn, self._conn = self._conn, None
            shell, self._shell = self._shell, None
            self._epoch += 1
        if shell is not None:
            shell[1].close()  # its `sh` exits on the end of its stdin; the connection lives on
        if conn is not None:
            from fleet.transport.sshlink import PARK

            PARK.park((self.host, self.target), conn)

    # ------------------------------------------------------------------------- deadline guard

    def _bounded(self, what: str, timeout: float, work: Callable[[_Call, int], T], full: str | None = None) -> T:
        """Run `work` in a worker thread; return or raise within `timeout` whatever the link does.
        `what` names the call in an error (one line); `full`, the whole command, goes to the debug
        log only (`fleet --verbose`)."""
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
            log.debug("%s: %s: no answer within %gs; the command:\n%s", self.host, what, timeout, full or what)
            if call.started:
                raise CommandTimeout(
                    self.host,
                    f"{what} did not finish within {timeout:g}s (link down or command too slow); dropped the connection; the command may still be running on the host",
                )
            raise ConnectTimeout(
                self.host,
                f"cannot connect to {self._where()}: timed out after {timeout:g}s (host down, link cut, or a firewall drops the packets); {what} did not start; {self._check('address', 'port')}",
            )
        if "error" in box:
            log.debug("%s: %s failed (%s); the command:\n%s", self.host, what, box["error"], full or what)
            raise self._translate(box["error"], what, call)  # type: ignore[arg-type]
        return box["value"]  # type: ignore[return-value]

    def _translate(self, exc: BaseException, what: str, call: _Call) -> BaseException:
        from fleet.transport.sshlink import classify_exception, connect_failure, host_key_hint

        error_class = classify_exception(exc)
        if error_class is None or isinstance(exc, TransportError):
            if isinstance(exc, TransportError) and exc.transient:
                self._drop()
            return exc
        self._drop()
        if error_class is HostKeyError:
            message = f"{host_key_hint(exc, self.target.known_hosts)}; {self._check('known_hosts', 'host_key_policy')}"
        elif not call.started:  # nothing ran: the connection itself failed
            cause, fields = connect_failure(exc, self.target)
            message = f"cannot connect to {self._where()}: {cause}; {self._check(*fields)}"
        else:
            message = f"{what}: {type(exc).__name__}: {str(exc) or 'the host closed the connection'}"
            if error_class is ConnectionLost and call.started:
                message += " (the connection dropped while the command ran; it may have run, check before re-running)"
        error = error_class(self.host, message)
        error.__cause__ = exc
        return error

    def _where(self) -> str:
        user = f"{self.target.user}@" if self.target.user else ""
        return f"{user}{self.target.address or self.target.ssh_alias}:{self.target.port or 22}"

    def _check(self, *fields: str) -> str:
        named = ", ".join(f"`{f}`" for f in fields)
        return f"check {named} in {self.host_file}" if self.host_file else f"check {named} in the host file"

    # ----------------------------------------------------------------------------- connection

    def _connection(self, epoch: int) -> tuple[Connection, bool]:
        """The live connection and whether it was reused; opens one if there is none."""
        from fleet.transport.sshlink import PARK, close_quietly, open_connection

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
        conn = open_connection(self.host, self.target)
        with self._lock:
            if self._epoch == epoch:
                self._conn = conn
                return conn, False
        close_quietly(conn)
        raise ConnectionLost(self.host, "the call was abandoned while connecting")

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self._shell = None  # closed with its connection
            self._epoch += 1
        if conn is not None:
            from fleet.transport.sshlink import close_quietly

            close_quietly(conn)

    def _session(self, epoch: int) -> paramiko.Channel:
        from fleet.transport.sshlink import SESSION_ERRORS, close_quietly

        conn, reused = self._connection(epoch)
        open_timeout = self.target.connect_timeout
        try:
            return conn.transport.open_session(timeout=open_timeout)
        except SESSION_ERRORS as exc:
            if not reused:
                raise
            # A connection the link dropped while idle still looks active; nothing was sent
            # on it yet, so a fresh one is safe even for a non-idempotent command.
            log.info("%s: cached connection is stale (%s), reconnecting", self.host, exc)
        with self._lock:
            if self._conn is conn:
                self._conn = None
        close_quietly(conn)
        conn, _ = self._connection(epoch)
        return conn.transport.open_session(timeout=open_timeout)

    # ---------------------------------------------------------------------------------- exec

    def _exec(
        self,
        epoch: int,
        script: str,
        *,
        stdin: BinaryIO | None,
        env_exports: str | None = None,
        stdout_sink: BinaryIO | None = None,
        call: _Call | None = None,
    ) -> _ExecOutcome:
        """Run `script` wrapped between fresh markers; its own output and exit status come back,
        the shell's noise around them is warned about (once per host) and dropped."""
        from fleet.transport.sshlink import pump

        frame = Frame.new()
        wrapped = frame.wrap(script, env_on_stdin=env_exports is not None)
        if env_exports is not None:  # ahead of the command's own stdin (`run`'s: a few bytes)
            stdin = io.BytesIO(frame.env_input(env_exports) + (stdin.read() if stdin is not None else b""))
        captured = io.BytesIO()
        unframer = Unframer(frame, (stdout_sink or captured).write)
        channel = self._session(epoch)
        try:
            if call is not None:
                call.started = True
            channel.exec_command(wrapped)
            stderr = pump(channel, stdin, unframer.feed)
            unframer.close()
            exit_code = channel.recv_exit_status()
        finally:
            channel.close()
        errors = cut(frame, stderr)
        warn_noise(self.host, unframer.noise, errors.noise)
        # The shell's own status where the wrapper's end marker never came (its shell was killed).
        status = exit_code if unframer.exit_code is None else unframer.exit_code
        return _ExecOutcome(status, captured.getvalue(), errors.output)

    def _ask(self, epoch: int, script: str, call: _Call) -> _ExecOutcome:
        """`query`'s work: `script` written into the host's long-lived shell as one line
        (`Frame.query_line`), its framed answer read back up to the end marker."""
        from fleet.transport.sshlink import QUERY_LIMIT, drain_stderr

        frame = Frame.new()
        captured = bytearray()
        unframer = Unframer(frame, captured.extend)
        shell = self._query_shell(epoch)
        call.started = True
        shell.sendall(frame.query_line(script).encode())
        while unframer.exit_code is None:
            data = shell.recv(1 << 16)
            if not data:
                raise EOFError("the host's shell for queries closed before it answered")
            unframer.feed(data)
            drain_stderr(shell)  # a startup file's stderr: read, so that it never fills the window
            if len(captured) > QUERY_LIMIT:
                self._drop()  # the rest of the answer would meet the next query
                raise PermanentTransportError(self.host, f"`{short_command(script)}` answered more than {QUERY_LIMIT} bytes, more than a query may; dropped the connection")
        warn_noise(self.host, unframer.noise, b"")
        return _ExecOutcome(unframer.exit_code, bytes(captured), b"")

    def _query_shell(self, epoch: int) -> paramiko.Channel:
        """The host's long-lived shell for queries: one session for all of them, instead of a
        session opened and closed for each. Opened on the live connection when there is none."""
        with self._lock:
            shell, conn = self._shell, self._conn
        if shell is not None and shell[0] is conn and not (shell[1].closed or shell[1].eof_received):
            return shell[1]
        channel = self._session(epoch)
        # `exec`: the login shell, once it ran the startup files, becomes a plain `sh` reading stdin.
        channel.exec_command("exec sh")
        with self._lock:
            if self._epoch == epoch and self._conn is not None and channel.get_transport() is self._conn.transport:
                self._shell = (self._conn, channel)
                return channel
        channel.close()
        raise ConnectionLost(self.host, "the call was abandoned while opening the host's shell")

    def _run_openssh(self, text: str, timeout: float, exports: str | None, stdin: bytes | None) -> _ExecOutcome:
        """A one-shot command's call: through the `ssh` client, not paramiko (fleet.transport.openssh)."""
        from fleet.transport.openssh import LoginFailed, run_command

        what = f"`{short_command(text)}`"
        try:
            outcome = run_command(self.host, self.target, text, timeout=timeout, env_exports=exports, stdin=stdin, what=what)
        except LoginFailed as failed:
            log.debug("%s: %s failed (%s); the command:\n%s", self.host, what, failed.stderr, text)
            raise failed.error_class(self.host, f"cannot connect to {self._where()}: {failed.reason}; {what} did not run; {self._check(*failed.fields)}") from None
        return _ExecOutcome(outcome.exit_code, outcome.stdout, outcome.stderr)

    def _put_stream(self, source: BinaryIO, remote: str, mode: int, timeout: float, what: str) -> None:
        def work(call: _Call, epoch: int) -> None:
            outcome = self._exec(epoch, put_script(remote, mode), stdin=source, call=call)
            if outcome.exit_code != 0:
                raise CommandFailed(self.host, what, outcome.exit_code, "", outcome.stderr.decode(errors="replace"))

        self._bounded(what, timeout, work)
