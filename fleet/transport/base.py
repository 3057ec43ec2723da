"""The narrow seam between fleet and a host: run a command, move a file, rsync a tree.

Every method takes a wall-clock `timeout` and returns or raises within it (plus a second or two),
even when the link drops silently mid-call. Failures raise the `fleet.errors.TransportError`
hierarchy; `transient` on the error says whether retrying an *idempotent* call may help (see
`fleet.retry`). A command that ran and exited non-zero is not a transport failure: it comes back
as a `CommandResult` with `ok == False`, or raises `CommandFailed` when `check=True`.

Commands: a sequence is joined with `shlex.join` (each argument quoted); a `str` is shell text,
and quoting whatever goes into it is the caller's job.

Secrets: values in `env` never appear on a command line (readable by anyone via `ps`) nor in a
log or a `CommandResult`; each implementation documents how it delivers them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from contextlib import AbstractContextManager
from typing import Protocol

from fleet.errors import CommandFailed
from fleet.shell import is_env_name

# Hosts read their boot id here; a new value means the kernel booted again.
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class CommandResult:
    host: str
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    @classmethod
    def from_output(cls, host: str, command: str, exit_code: int, stdout: bytes, stderr: bytes, duration_s: float) -> CommandResult:
        """Decode raw output; undecodable bytes become U+FFFD rather than failing the call."""
        return cls(host, command, exit_code, stdout.decode(errors="replace"), stderr.decode(errors="replace"), duration_s)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def check(self) -> CommandResult:
        """Return self if the command succeeded, else raise `CommandFailed` with its output tail."""
        if not self.ok:
            raise CommandFailed(self.host, self.command, self.exit_code, self.stdout, self.stderr)
        return self


class Transport(Protocol):
    """One host. Not safe to share between threads: give each thread its own, or call in turn."""

    host: str  # the inventory name, used in every error and log line

    def run(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        check: bool = False,
    ) -> CommandResult:
        """Run `command` and wait for it and for its stdout/stderr to close.

        On timeout raise `CommandTimeout`: over SSH the command may still be running. A background
        child that keeps stdout/stderr open keeps the call waiting until the timeout: start
        detached work with its output redirected (`setsid cmd >log 2>&1 </dev/null &`).
        `stdout`/`stderr` are the command's own: whatever the host's shell prints around it (its
        startup files' banners) is left out (fleet.transport.framing). `exit_code` is 128+N when
        signal N killed the command; negative (-1 over SSH) when its shell itself was killed.
        That shell outlives the command with the command's text on its command line: a
        `pgrep -f`/`pkill -f` pattern must not match its own text (`[s]leep 30`, not `sleep 30`).
        """
        ...

    def query(self, command: str | Sequence[str], *, timeout: float) -> CommandResult:
        """Run a short read-only `command` that is asked often (the sweep's poll) for its stdout
        and exit status; it gets no stdin and no env, and its stderr is not kept (empty).

        Over SSH every query goes into one long-lived shell on the host, not a session of its
        own: a few packets instead of a dozen, which is most of what a poll costs the controller.
        Its stdout is text (a shell drops NUL bytes) and at most a few MiB. Same timeout and
        errors as `run`.
        """
        ...

    def put(self, local: Path, remote: str, *, mode: int | None = None, timeout: float) -> None:
        """Copy a local file to `remote`, atomically (temp name, fsync, rename); parents are created.

        `mode` defaults to the local file's permission bits.
        """
        ...

    def put_bytes(self, data: bytes, remote: str, *, mode: int | None = None, timeout: float) -> None:
        """Write `data` to `remote`, atomically; `mode` defaults to 0o644."""
        ...

    def get(self, remote: str, local: Path, *, timeout: float) -> None:
        """Copy `remote` to a local file, atomically; a missing remote file raises `CommandFailed`."""
        ...

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
        """rsync `remote` (a trailing slash copies a directory's contents) into `local`;
        `ignore_existing`: a file `local` already has is left as it is, never replaced.
        `list_written`: the result's stdout names each file the pull wrote, one per line, by its
        path below the transfer's root (rsync's `--out-format=%n`; a folder's line ends in `/`,
        an odd character is escaped as `\\#ooo`; rsync's notices, `skipping non-regular file "x"`
        and `deleting x`, are there too), so that a reader looks at what came and not the whole folder.

        Returns the rsync result; rsync exits that mean the link failed raise a `TransportError`.
        """
        ...

    def rsync_push(self, local: Path, remote: str, *, timeout: float, delete: bool = False) -> CommandResult:
        """rsync `local` to `remote` (a directory's contents, so `remote` mirrors it); parents are
        created; same error rules as `rsync_pull`."""
        ...

    def shared_login(self) -> AbstractContextManager[None]:
        """A block whose calls share one login to the host, where logins are the cost (over SSH,
        inside a one-shot command: fleet.transport.openssh `shared_login`); elsewhere it changes
        nothing."""
        ...

    def close(self) -> None: ...


def command_text(command: str | Sequence[str]) -> str:
    """Shell text for `command`: a sequence is quoted argument by argument, a str is taken as is."""
    if isinstance(command, str):
        return command
    if not command:
        raise ValueError("empty command")
    return shlex.join(command)


def env_exports(env: Mapping[str, str]) -> str:
    """`export NAME='value'` lines, for a shell to source; names are checked, values quoted."""
    for name in env:
        if not is_env_name(name):
            raise ValueError(f"environment variable name {name!r} is not a shell identifier")
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
