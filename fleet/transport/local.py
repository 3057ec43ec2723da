"""The `Transport` for `transport: local` hosts: subprocesses on this machine, same rules as SSH.

Commands run in the user's login shell from the home directory, as sshd runs them, so that a
command behaves the same on a local and an SSH host; a relative "remote" path is relative to
the home directory too; and like SSH's, its output is framed (fleet.transport.framing): a shell
that sources a talking startup file here too (BASH_ENV, ~/.zshenv) adds nothing to it. `env` goes
into the child's environment, never onto its command line. On timeout the command's whole process
group is killed. The rsync calls copy in Python (fleet.transport.localcopy), with rsync's
semantics: a local copy needs no rsync installed.
"""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from fleet.errors import CommandFailed, CommandTimeout
from fleet.host.atomic import atomic_file
from fleet.transport.base import CommandResult, command_text
from fleet.transport.framing import Frame, cut, warn_noise
from fleet.transport.localcopy import copy_tree
from fleet.transport.process import run_process
from fleet.transport.rsync import push_source

_CHUNK = 1 << 20


class LocalTransport:
    def __init__(self, host: str = "local") -> None:
        self.host = host
        self._home = Path.home()
        self._shell = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"

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
        frame = Frame.new()
        outcome = run_process(self.host, [self._shell, "-c", frame.wrap(text)], timeout=timeout, env=env, stdin=stdin, cwd=self._home, what=text)
        stdout, stderr = cut(frame, outcome.stdout), cut(frame, outcome.stderr)
        warn_noise(self.host, stdout.noise, stderr.noise)
        exit_code = outcome.exit_code if stdout.exit_code is None else stdout.exit_code
        result = CommandResult.from_output(self.host, text, exit_code, stdout.output, stderr.output, outcome.duration_s)
        return result.check() if check else result

    def query(self, command: str | Sequence[str], *, timeout: float) -> CommandResult:
        """A command of its own: without a link there is no session to keep."""
        return replace(self.run(command, timeout=timeout, stdin=b""), stderr="")

    def put(self, local: Path, remote: str, *, mode: int | None = None, timeout: float) -> None:
        file_mode = local.stat().st_mode & 0o7777 if mode is None else mode
        with local.open("rb") as source:
            self._copy_in(source, self._path(remote), file_mode, timeout, f"put {local} -> {remote}")

    def put_bytes(self, data: bytes, remote: str, *, mode: int | None = None, timeout: float) -> None:
        with atomic_file(self._path(remote), 0o644 if mode is None else mode) as handle:
            handle.write(data)

    def get(self, remote: str, local: Path, *, timeout: float) -> None:
        source_path = self._path(remote)
        try:
            source = source_path.open("rb")
        except OSError as exc:
            raise CommandFailed(self.host, f"get {remote}", 1, "", str(exc)) from exc
        with source:
            self._copy_in(source, local, 0o644, timeout, f"get {remote} -> {local}")

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
        source = str(self._path(remote)) + ("/" if remote.endswith("/") else "")
        return self._copy(source, str(local), timeout, delete=delete, excludes=excludes, regular_only=True, ignore_existing=ignore_existing, list_written=list_written)

    def rsync_push(self, local: Path, remote: str, *, timeout: float, delete: bool = False) -> CommandResult:
        dest = str(self._path(remote)) + ("/" if remote.endswith("/") else "")
        return self._copy(push_source(local), dest, timeout, delete=delete)

    def _copy(self, source: str, dest: str, timeout: float, list_written: bool = False, **options: Any) -> CommandResult:
        """rsync's copy done in Python (fleet.transport.localcopy): no rsync needed on one machine."""
        started = time.monotonic()
        what = f"copy {source} -> {dest}"
        outcome = copy_tree(source, dest, deadline=started + timeout, what=what, host=self.host, **options)
        stdout = "".join(f"{path}\n" for path in outcome.written) if list_written else ""
        return CommandResult(self.host, what, outcome.exit_code, stdout, outcome.stderr, time.monotonic() - started)

    def shared_login(self) -> AbstractContextManager[None]:
        return nullcontext()  # no logins here

    def close(self) -> None:
        """Nothing to release: every call is its own process."""

    def _path(self, remote: str) -> Path:
        return self._home / Path(remote).expanduser()

    def _copy_in(self, source: BinaryIO, target: Path, mode: int, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with atomic_file(target, mode) as handle:
            while chunk := source.read(_CHUNK):
                if time.monotonic() > deadline:
                    raise CommandTimeout(self.host, f"{what} did not finish within {timeout:g}s; nothing was written")
                handle.write(chunk)
