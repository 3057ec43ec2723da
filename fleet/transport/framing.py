"""Markers around a remote command's own output, so that what the host's shell prints of its own
never reaches a caller.

sshd runs every command through the user's login shell, and that shell runs its startup files
first: an `echo` in ~/.bashrc (common on shared machines: a banner, a quota notice, a module
list) lands in the command's stdout before the command's own output, a `mesg n` in ~/.profile
or a locale warning in its stderr. Read as the command's output, a banner made a marker file
unreadable, a staged path wrong and a lease reply garbage. So each command is wrapped (`wrap`):
it prints a begin marker on stdout and stderr, runs in a subshell, then prints an end marker
with its exit status on both; the caller keeps only what lies between (`Unframer`, `cut`).

The markers hold a random token fresh for every call, and are printed from two pieces
(`printf '@@fleet:%s:begin' TOKEN`) so that the command line itself never holds the joined
marker: a command that prints command lines (`ps`, `pgrep -a`, `set -x`) cannot fake one.

The command's environment (secrets such as HF_TOKEN) travels the same way: `export` lines
first on the command's stdin, read by the shell with its `read` builtin (one byte at a time on
a pipe, so the command's own stdin after them is untouched) up to a line holding the token, and
`eval`ed. Never on a command line, never in a file on the host.
"""

from __future__ import annotations

import logging
import secrets
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("fleet.transport")

# Where a shell's own output comes from, for the messages that name it (rsync's too).
STARTUP_FILES = "~/.bashrc, ~/.bash_profile, ~/.profile, /etc/bash.bashrc, /etc/profile; for zsh ~/.zshenv"
STARTUP_FIX = "make them print only in interactive shells (`case $- in *i*) echo ...;; esac`)"

# A begin marker not seen within this much output: the wrapper did not run (a shell that is not
# POSIX, a forced command) and the output is passed on as it came.
_BEFORE_LIMIT = 1 << 20
# How much of the noise is kept, for the message that shows it.
_NOISE_SAMPLE = 512
# An exit status is at most 3 digits; a longer "status" is not the wrapper's.
_STATUS_DIGITS = 3


@dataclass(frozen=True)
class Frame:
    """One call's markers. `Frame.new()` for every call: the token is what makes them unforgeable."""

    token: str

    @classmethod
    def new(cls) -> Frame:
        return cls(secrets.token_hex(16))

    @property
    def begin(self) -> bytes:
        return f"@@fleet:{self.token}:begin\n".encode()

    @property
    def end(self) -> bytes:
        """What precedes the exit status; the newline before it is the frame's, not the output's."""
        return f"\n@@fleet:{self.token}:end ".encode()

    @property
    def _env_terminator(self) -> str:
        return f"@@fleet:{self.token}:env"

    def wrap(self, script: str, *, env_on_stdin: bool = False) -> str:
        """Shell text that runs `script` (POSIX sh) in a subshell between the markers. With
        `env_on_stdin`, the subshell first reads and exports `env_input`'s lines from stdin."""
        begin = f"printf '@@fleet:%s:begin\\n' {self.token}"
        end = f"printf '\\n@@fleet:%s:end %s\\n' {self.token} \"$__fleet_rc\""
        env = ""
        if env_on_stdin:
            env = (
                "__fleet_env=; __fleet_ok=\n"
                "while IFS= read -r __fleet_line; do\n"
                f"  if [ \"$__fleet_line\" = '{self._env_terminator}' ]; then __fleet_ok=1; break; fi\n"
                '  __fleet_env="$__fleet_env$__fleet_line\n"\n'
                "done\n"
                '[ -n "$__fleet_ok" ] || { echo "fleet: the environment did not arrive on stdin" >&2; exit 125; }\n'
                'eval "$__fleet_env" || { echo "fleet: could not load the environment" >&2; exit 125; }\n'
                "unset __fleet_env __fleet_ok __fleet_line\n"
            )
        # `:` first: a script of comments alone would leave the subshell empty, a syntax error.
        return f'{begin}; {begin} >&2\n(\n:\n{env}{script}\n)\n__fleet_rc=$?; {end}; {end} >&2; exit "$__fleet_rc"\n'

    def query_line(self, script: str) -> str:
        """One command line for a long-lived `sh` that reads its commands on stdin
        (`Transport.query`): `script` runs in its own `sh -c`, so that a syntax error or an
        unclosed quote stays in that child and the reading shell never waits for more; with no
        stdin (the reading shell's stdin is the next commands) and its stderr dropped. Its whole
        stdout is captured first and printed between the markers by one `printf`: one write, so
        one SSH packet where it fits, however many writes the script makes. The `x` keeps the
        trailing newlines that `$(...)` would strip."""
        captured = f'__fleet_out=$(sh -c {shlex.quote(script)} </dev/null 2>/dev/null; __fleet_rc=$?; printf x; exit "$__fleet_rc")'
        answer = f'printf \'@@fleet:%s:begin\\n%s\\n@@fleet:%s:end %s\\n\' {self.token} "${{__fleet_out%x}}" {self.token} "$__fleet_rc"'
        return f"{captured}; __fleet_rc=$?; {answer}; unset __fleet_out __fleet_rc\n"

    def env_input(self, exports: str) -> bytes:
        """What goes first on the stdin of a command wrapped with `env_on_stdin`: `exports`
        (`fleet.transport.base.env_exports`), then the terminator line."""
        if self._env_terminator in exports:  # 128 random bits: never; checked all the same
            raise ValueError("an environment value holds this call's marker")
        return f"{exports}{self._env_terminator}\n".encode()


class Unframer:
    """Cuts one stream (stdout or stderr) of a wrapped command as it arrives: what lies between
    the markers goes to `sink`; what lies outside is noise (a sample kept in `noise`).

    Without a begin marker (the wrapper did not run) everything goes to `sink`; without an end
    marker (the shell died) what came after the begin marker does.
    """

    def __init__(self, frame: Frame, sink: Callable[[bytes], object]) -> None:
        self.frame, self.sink = frame, sink
        self.framed = False  # the begin marker was seen
        self.exit_code: int | None = None  # the command's, from the end marker
        self.noise = b""
        self._buffer = b""
        self._state = "before"  # before -> body -> status -> after; or before -> passing

    def feed(self, data: bytes) -> None:
        self._buffer += data
        if self._state == "before":
            at = self._buffer.find(self.frame.begin)
            if at < 0:
                if len(self._buffer) > _BEFORE_LIMIT:
                    self._state = "passing"
                else:
                    return
            else:
                self._keep_noise(self._buffer[:at])
                self._buffer = self._buffer[at + len(self.frame.begin) :]
                self.framed, self._state = True, "body"
        if self._state == "passing":
            self._emit(len(self._buffer))
            return
        if self._state == "body":
            end = self.frame.end
            at = self._buffer.find(end)
            if at < 0:
                # The tail may be the start of the end marker: held back until more arrives.
                self._emit(len(self._buffer) - (len(end) - 1))
                return
            self._emit(at)
            self._buffer, self._state = self._buffer[len(end) :], "status"
        if self._state == "status":
            status, newline, rest = self._buffer.partition(b"\n")
            if not newline and len(status) <= _STATUS_DIGITS:
                return  # the rest of the status line is on its way
            self._read_status(status)
            self._buffer, self._state = rest, "after"
        self._keep_noise(self._buffer)
        self._buffer = b""

    def close(self) -> None:
        """The stream ended: pass on what is held back."""
        if self._state == "status":
            self._read_status(self._buffer)
        elif self._state in ("before", "body", "passing"):
            self._emit(len(self._buffer))
        self._buffer, self._state = b"", "after"

    def _emit(self, upto: int) -> None:
        if upto > 0:
            self.sink(self._buffer[:upto])
            self._buffer = self._buffer[upto:]

    def _read_status(self, status: bytes) -> None:
        if status.isdigit():
            self.exit_code = int(status)
        else:  # not the wrapper's status line: nothing the command printed, so noise
            self._keep_noise(status)

    def _keep_noise(self, data: bytes) -> None:
        if data and len(self.noise) < _NOISE_SAMPLE:
            self.noise = (self.noise + data)[:_NOISE_SAMPLE]


@dataclass(frozen=True)
class Cut:
    output: bytes
    exit_code: int | None
    noise: bytes


def cut(frame: Frame, data: bytes) -> Cut:
    """A whole stream of a wrapped command: its own output, its exit status, the noise around it."""
    parts: list[bytes] = []
    unframer = Unframer(frame, parts.append)
    unframer.feed(data)
    unframer.close()
    return Cut(b"".join(parts), unframer.exit_code, unframer.noise)


_warned: set[str] = set()
_warned_lock = threading.Lock()


def noise_message(host: str, stdout_noise: bytes, stderr_noise: bytes) -> str:
    """What the operator reads about a shell that talks: what it printed, where that comes from."""
    stream, noise = ("stdout", stdout_noise) if stdout_noise else ("stderr", stderr_noise)
    lines = [line.strip() for line in noise.decode(errors="replace").splitlines() if line.strip()]
    shown = "".join(char if char.isprintable() else "?" for char in " | ".join(lines))[:160]
    consequence = "fleet's commands skip it"
    if stdout_noise:  # rsync speaks its protocol on stdout
        consequence += "; rsync cannot read its protocol through it and goes through fleet's relay (fleet/transport/rshrelay.py)"
    return (
        f"{host}: the host's shell prints text of its own around every command (on {stream}: {shown!r}); {consequence}. It comes from a shell startup file on the host ({STARTUP_FILES}): {STARTUP_FIX}"
    )


def warn_noise(host: str, stdout_noise: bytes, stderr_noise: bytes) -> None:
    """Say once per host (per controller process) that its shell talks; quiet when it does not."""
    if not (stdout_noise or stderr_noise):
        return
    with _warned_lock:
        if host in _warned:
            return
        _warned.add(host)
    log.warning("%s", noise_message(host, stdout_noise, stderr_noise))
