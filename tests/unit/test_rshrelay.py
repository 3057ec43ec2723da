"""rsync's remote shell for a talking host (fleet/transport/rshrelay.py).

The banner filter on its own, at every read boundary; then the relay run as rsync runs it -- its
stdin and stdout non-blocking sockets (rsync 3.5.0 hands its remote shell a non-blocking stdout)
-- around a pure-Python fake ssh, with several MB each way and a slow reader; EOF on either side,
exit status; and a real rsync pull and push through the relay and a fake ssh whose shell talks.

The first relay (0f5f0bf) failed here: a full socket buffer made its plain os.write raise
BlockingIOError, it died, and rsync said "error in rsync protocol data stream (code 12)".
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from fleet.transport.rshrelay import Banner, marker, marker_rsync_path
from fleet.transport.rsync import RELAY

TOKEN = "0123456789abcdef"
MARK = marker(TOKEN)
NOISE = b"Welcome to the shared GPU box\n@@fleet:\n@@fleet:" + TOKEN.encode() + b":rsyn\n"  # near misses
PROTOCOL = b"\x20\x00\x00\x00" + bytes(range(256)) * 4  # what follows: rsync's bytes, NULs and all


def through(chunks: list[bytes], limit: int = 1 << 20) -> bytes:
    banner = Banner(MARK, limit)
    return b"".join(banner.feed(chunk) for chunk in chunks) + banner.end()


# ------------------------------------------------------------------------- the banner filter


def test_the_marker_split_at_every_offset_with_protocol_bytes_in_the_same_read() -> None:
    stream = NOISE + MARK + PROTOCOL
    for cut in range(len(stream) + 1):
        assert through([stream[:cut], stream[cut:]]) == PROTOCOL, cut
    # Two cuts, each anywhere in or around the marker (the marker in three reads, or the
    # protocol's first bytes in the marker's read).
    around = range(len(NOISE) - 2, len(NOISE) + len(MARK) + 3)
    for first in around:
        for second in range(first, len(NOISE) + len(MARK) + 8):
            assert through([stream[:first], stream[first:second], stream[second:]]) == PROTOCOL, (first, second)


def test_byte_at_a_time_and_all_at_once() -> None:
    stream = NOISE + MARK + PROTOCOL
    assert through([bytes([b]) for b in stream]) == PROTOCOL
    assert through([stream]) == PROTOCOL
    assert through([MARK + PROTOCOL]) == PROTOCOL  # a quiet shell
    assert through([NOISE, MARK]) == b""  # a transfer that sends nothing after the marker


def test_only_the_first_marker_counts_and_empty_reads_change_nothing() -> None:
    payload = MARK + b"a file holding the marker\n" + MARK
    assert through([NOISE, b"", MARK, b"", payload, b""]) == payload


def test_no_marker_passes_everything_for_rsync_to_report() -> None:
    assert through([b"no marker ", b"here\n"]) == b"no marker here\n"
    noise = b"x" * 100
    assert through([noise[:60], noise[60:], MARK, b"after"], limit=64) == noise + MARK + b"after"


def test_the_marker_is_the_remote_commands_and_quoted() -> None:
    done = subprocess.run(["sh", "-c", marker_rsync_path("tok", "printf x")], capture_output=True, timeout=30)
    assert done.stdout == b"@@fleet:tok:rsync\nx"


# --------------------------------------------------------------- the relay, as rsync runs it

# A pure-Python stand-in for ssh: noise on stdout (in pieces: argv[1] holds the cuts) and stderr,
# the marker, then stdin copied to stdout byte for byte; on stdin's EOF it exits with argv[2].
FAKE_SSH = textwrap.dedent(
    """
    import os, sys, time
    cuts, status, stream = [int(c) for c in sys.argv[1].split(",") if c], int(sys.argv[2]), sys.argv[3].encode()
    os.write(2, b"quota: 91% of /root used\\n")
    at = 0
    for cut in cuts + [len(stream)]:
        os.write(1, stream[at:cut]); at = cut
        time.sleep(0.002)  # each piece its own read, as much as timing allows
    while chunk := os.read(0, 1 << 16):
        view = memoryview(chunk)
        while view:
            view = view[os.write(1, view):]
    sys.exit(status)
    """
)


def relay_argv(tmp_path: Path, cuts: tuple[int, ...] = (), status: int = 0, stream: bytes | None = None) -> list[str]:
    fake = tmp_path / "fake_ssh.py"
    fake.write_text(FAKE_SSH)
    text = (NOISE + MARK if stream is None else stream).decode()
    return [sys.executable, str(RELAY), TOKEN, sys.executable, "-S", str(fake), ",".join(map(str, cuts)), str(status), text]


class Relayed:
    """The relay started as rsync starts its remote shell: stdin and stdout are sockets, the
    stdout one non-blocking and with a small buffer (it fills at once)."""

    def __init__(self, argv: list[str], before: bytes = b"") -> None:
        self.to_relay, relay_in = socket.socketpair()
        self.from_relay, relay_out = socket.socketpair()
        relay_out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        relay_out.setblocking(False)
        if before:
            self.to_relay.sendall(before)  # there before the relay (and its ssh) exist
        self.process = subprocess.Popen(argv, stdin=relay_in.fileno(), stdout=relay_out.fileno(), stderr=subprocess.PIPE)
        relay_in.close()
        relay_out.close()

    def send(self, data: bytes, close: bool = True) -> threading.Thread:
        def feed() -> None:
            try:
                self.to_relay.sendall(data)
            except OSError:
                pass
            if close:
                self.to_relay.shutdown(socket.SHUT_WR)  # stdin's EOF

        sender = threading.Thread(target=feed, daemon=True)
        sender.start()
        return sender

    def receive(self, slow_s: float = 0.0) -> bytes:
        got = bytearray()
        while chunk := self.from_relay.recv(1 << 16):
            got += chunk
            if slow_s:
                time.sleep(slow_s)  # a reader behind the writer: the buffer stays full
        return bytes(got)

    def wait(self) -> tuple[int, bytes]:
        _, stderr = self.process.communicate(timeout=60)
        self.to_relay.close()
        self.from_relay.close()
        return self.process.returncode, stderr


def test_megabytes_each_way_with_a_slow_reader_pass_byte_for_byte(tmp_path: Path) -> None:
    payload = os.urandom(8 << 20)
    relayed = Relayed(relay_argv(tmp_path, status=0))
    sender = relayed.send(payload)
    time.sleep(0.3)  # nobody reads: the relay's stdout is full and non-blocking
    got = relayed.receive(slow_s=0.0005)
    sender.join(30)
    status, stderr = relayed.wait()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(payload).hexdigest() and len(got) == len(payload)
    assert (status, stderr) == (0, b"quota: 91% of /root used\n")  # the shell's stderr untouched, nothing of the relay's


def test_the_marker_split_at_every_offset_by_a_real_child(tmp_path: Path) -> None:
    """The fake ssh writes the marker in two pieces, cut at each of its bytes, with the first
    protocol bytes (stdin, sent at once) following it."""
    stream = NOISE + MARK
    for cut in range(len(NOISE) - 1, len(stream) + 1):
        relayed = Relayed(relay_argv(tmp_path, cuts=(cut,), status=0), before=PROTOCOL)
        relayed.send(b"")
        got = relayed.receive()
        assert (got, relayed.wait()[0]) == (PROTOCOL, 0), cut


def test_stdin_written_before_the_child_exists_all_reaches_it(tmp_path: Path) -> None:
    before = os.urandom(100_000)
    relayed = Relayed(relay_argv(tmp_path, status=0), before=before[:50_000])
    relayed.send(before[50_000:])
    assert relayed.receive() == before and relayed.wait()[0] == 0


def test_the_exit_status_is_the_childs(tmp_path: Path) -> None:
    for status in (0, 1, 12, 255):
        relayed = Relayed(relay_argv(tmp_path, status=status))
        relayed.send(b"x")
        assert relayed.receive() == b"x" and relayed.wait()[0] == status, status


def test_a_child_killed_by_a_signal_exits_128_plus_it(tmp_path: Path) -> None:
    relayed = Relayed([sys.executable, str(RELAY), TOKEN, "sh", "-c", "kill -9 $$"])
    relayed.send(b"", close=False)
    assert relayed.receive() == b"" and relayed.wait()[0] == 128 + 9


def test_eof_before_the_marker_passes_what_came(tmp_path: Path) -> None:
    relayed = Relayed([sys.executable, str(RELAY), TOKEN, "sh", "-c", "echo 'no marker here'; exit 12"])
    relayed.send(b"", close=False)
    assert relayed.receive() == b"no marker here\n" and relayed.wait()[0] == 12


def test_the_childs_stdout_ending_ends_the_relays_at_once(tmp_path: Path) -> None:
    """rsync sees the end of the stream when ssh closes it, not when ssh exits."""
    go = tmp_path / "go"
    script = f"printf 'noise\\n{MARK.decode().strip()}\\nlast'; exec >&-; i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 3"
    relayed = Relayed([sys.executable, str(RELAY), TOKEN, "sh", "-c", script])
    relayed.send(b"", close=False)
    assert relayed.receive() == b"last"
    assert relayed.process.poll() is None  # the end came while ssh still runs (it waits for `go`)
    go.touch()
    assert relayed.wait()[0] == 3


def test_a_reader_that_goes_away_ends_the_relay_and_its_child(tmp_path: Path) -> None:
    """rsync failing stops reading: the relay must not hang on a full buffer, nor its child."""
    relayed = Relayed(relay_argv(tmp_path, status=0))
    relayed.send(os.urandom(4 << 20), close=False)  # stdin never ends: only the reader's leaving can
    relayed.from_relay.recv(1000)
    relayed.from_relay.close()
    relayed.to_relay.close()  # rsync exits: both its ends go
    relayed.process.wait(timeout=30)


# ------------------------------------------------------ a real rsync through a talking shell


FAKE_LOGIN = textwrap.dedent(
    """
    # ssh HOST COMMAND...: a login shell that talks on both streams, then runs the command.
    import os, sys
    os.write(1, b"Welcome to the shared GPU box -- please be nice\\n")
    os.write(2, b"quota: 91% of /root used\\n")
    os.execvp("sh", ["sh", "-c", " ".join(sys.argv[2:])])
    """
)


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
@pytest.mark.parametrize("direction", ["pull", "push"])
def test_real_rsync_through_the_relay_and_a_talking_shell(tmp_path: Path, direction: str) -> None:
    fake = tmp_path / "fake_login.py"
    fake.write_text(FAKE_LOGIN)
    (tmp_path / "src").mkdir()
    files = {f"f{i}": os.urandom(size) for i, size in enumerate((6 << 20, 300_000, 0, 1))}
    for name, data in files.items():
        (tmp_path / "src" / name).write_bytes(data)
    shell = shlex.join([sys.executable, str(RELAY), TOKEN, sys.executable, str(fake)])
    remote, local = f"somehost:{tmp_path / 'src'}/", f"{tmp_path / 'src'}/"
    source = remote if direction == "pull" else local
    dest = tmp_path / "dest" if direction == "pull" else f"somehost:{tmp_path / 'dest'}"
    argv = ["rsync", "-rt", "--protect-args", f"--rsync-path={marker_rsync_path(TOKEN)}", "-e", shell, source, str(dest)]
    bare_dest = tmp_path / "bare" if direction == "pull" else f"somehost:{tmp_path / 'bare'}"
    bare = subprocess.run([*argv[:4], "-e", shlex.join([sys.executable, str(fake)]), source, str(bare_dest)], capture_output=True, text=True, timeout=60)
    assert bare.returncode != 0 and "protocol version mismatch" in bare.stderr  # the control: the shell does talk
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert {name: (tmp_path / "dest" / name).read_bytes() for name in files} == files
