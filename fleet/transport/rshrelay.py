"""rsync's remote shell for a host whose login shell talks: `python rshrelay.py TOKEN ssh ARGS...`.

rsync speaks its protocol over the remote shell's stdout, so a banner that the host's startup files
print there (an `echo` in ~/.bashrc) reaches rsync as protocol bytes: "protocol version mismatch
-- is your shell clean?". This relay runs the ssh command rsync asked for and drops everything
its stdout carries before a marker that the remote side prints first (`marker_rsync_path`: the
remote rsync is started as `printf MARKER; exec rsync ...`), then passes the rest through
unchanged. Run by file path, with the standard library only: it is started by rsync, wherever
fleet runs from.

How the bytes go (the first point is what the first relay, 0f5f0bf, got wrong; the rest it left implicit):

- rsync hands its remote shell a stdout that is a NON-BLOCKING socket (rsync 3.5.0 here; OpenSSH
  copes, it polls). The first relay wrote to it with a plain `os.write` loop: once rsync read
  slower than ssh delivered (a pull of a few hundred kB, more so under load), the socket buffer
  filled, `os.write` raised BlockingIOError, the relay died with a traceback and rsync saw
  "connection unexpectedly closed ... error in rsync protocol data stream (code 12)": the pull
  that failed 1 time in 3. Here the relay's stdout is made blocking, and a write that still meets
  EAGAIN (another holder of that description made it non-blocking again) waits for room with
  select() instead of failing; a read that meets EAGAIN waits likewise.
- ssh's stdout is a pipe of the relay's own (never a description shared with rsync: ssh sets its
  descriptors non-blocking); ssh's stdin and stderr are the relay's, inherited, and the relay
  gives up its own copy of stdin once ssh runs. The relay never reads stdin, so it holds no byte
  of rsync's (none read before ssh exists, none left unsent), and ssh itself sees rsync's EOF
  and passes it on; the shell's stderr reaches rsync's untouched.
- Once ssh's stdout ends, the relay's stdout is closed at once (rsync sees the end even if ssh
  lingers), then the relay waits for ssh and exits with its status (128+N for a signal).
"""

from __future__ import annotations

import errno
import os
import select
import shlex
import subprocess
import sys

# Noise before the marker is dropped up to this much; past it the relay gives up looking and
# passes everything on (rsync then says what it saw).
_LIMIT = 1 << 20
_CHUNK = 1 << 16


def marker(token: str) -> bytes:
    return f"@@fleet:{token}:rsync\n".encode()


def marker_rsync_path(token: str, rsync: str = "rsync") -> str:
    """The remote rsync command that prints the marker before the protocol starts."""
    return f"printf '%s\\n' {shlex.quote(f'@@fleet:{token}:rsync')}; exec {rsync}"


class Banner:
    """What comes before the marker is dropped, whatever the reads' boundaries: `feed` each chunk
    read, in order; it returns the bytes to pass on (nothing until the marker is complete, then
    what follows it in the same chunk, then every chunk whole). `end` at EOF returns what is owed:
    with no marker seen, all that came (rsync reports it)."""

    def __init__(self, wanted: bytes, limit: int = _LIMIT) -> None:
        self.wanted = wanted
        self.limit = limit
        self.found = False
        self._seen = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        if self.found:
            return chunk
        start = max(0, len(self._seen) - len(self.wanted) + 1)  # a marker split across reads
        self._seen += chunk
        at = self._seen.find(self.wanted, start)
        if at >= 0:
            self.found = True
            rest = bytes(self._seen[at + len(self.wanted) :])
            self._seen = bytearray()
            return rest
        if len(self._seen) > self.limit:
            self.found = True  # no marker in sight: everything, for rsync to report
            seen, self._seen = bytes(self._seen), bytearray()
            return seen
        return b""

    def end(self) -> bytes:
        seen, self._seen = bytes(self._seen), bytearray()
        return seen


def read_some(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, _CHUNK)
        except BlockingIOError:
            select.select([fd], [], [])


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])  # the reader is behind: wait for room, never fail


def _to_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, fd)
    os.close(devnull)


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def relay(token: str, argv: list[str]) -> int:
    """Run `argv` (ssh), pass its stdout on from the marker on; its exit status."""
    sink = sys.stdout.fileno()
    try:
        os.set_blocking(sink, True)
    except OSError:
        pass  # write_all waits for room anyway
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, close_fds=True)
    assert process.stdout is not None
    _to_devnull(0)  # stdin is ssh's alone: rsync writing to a dead ssh gets EPIPE, not a wait
    source = process.stdout.fileno()
    banner = Banner(marker(token))
    try:
        while chunk := read_some(source):
            out = banner.feed(chunk)
            if out:
                write_all(sink, out)
        write_all(sink, banner.end())
    except BrokenPipeError:
        pass  # rsync stopped reading (it failed, and says why): ssh gets EPIPE in turn
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
    finally:
        _to_devnull(sink)  # rsync sees the end now, not when ssh finally exits
        process.stdout.close()
    return _exit_status(process.wait())


if __name__ == "__main__":
    sys.exit(relay(sys.argv[1], sys.argv[2:]))
