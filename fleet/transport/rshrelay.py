"""rsync's remote shell for a host whose login shell talks: `python rshrelay.py TOKEN ssh ARGS...`.

rsync speaks its protocol over the remote shell's stdout, so a banner that the host's startup files
print there (an `echo` in ~/.bashrc) reaches rsync as protocol bytes: "protocol version mismatch
-- is your shell clean?". This relay runs the ssh command rsync asked for and drops everything
its stdout carries before a marker that the remote side prints first (`marker_rsync_path`: the
remote rsync is started as `printf MARKER; exec rsync ...`), then passes the rest through
unchanged. stdin and stderr are ssh's own. Run by file path, with the standard library only: it
is started by rsync, wherever fleet runs from.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

# Noise before the marker is dropped up to this much; past it the relay gives up looking and
# passes everything on (rsync then says what it saw).
_LIMIT = 1 << 20


def marker(token: str) -> bytes:
    return f"@@fleet:{token}:rsync\n".encode()


def marker_rsync_path(token: str, rsync: str = "rsync") -> str:
    """The remote rsync command that prints the marker before the protocol starts."""
    return f"printf '%s\\n' {shlex.quote(f'@@fleet:{token}:rsync')}; exec {rsync}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def relay(token: str, argv: list[str]) -> int:
    wanted = marker(token)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert process.stdout is not None
    source, sink = process.stdout.fileno(), sys.stdout.fileno()
    seen = b""
    while True:
        chunk = os.read(source, 1 << 16)
        if not chunk:
            _write_all(sink, seen)  # no marker at all: what came, for rsync to report
            return process.wait()
        seen += chunk
        at = seen.find(wanted)
        if at >= 0:
            rest = seen[at + len(wanted) :]
            break
        if len(seen) > _LIMIT:
            rest = seen
            break
    _write_all(sink, rest)
    while chunk := os.read(source, 1 << 16):
        _write_all(sink, chunk)
    return process.wait()


if __name__ == "__main__":
    sys.exit(relay(sys.argv[1], sys.argv[2:]))
