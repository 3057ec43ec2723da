"""rsync's remote shell for a talking host (fleet/transport/rshrelay.py), run as rsync runs it:
what the shell prints before the marker is dropped, the protocol after it passes byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fleet.transport.rshrelay import marker_rsync_path
from fleet.transport.rsync import RELAY


def relayed(script: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, str(RELAY), "tok", "sh", "-c", script], input=stdin, capture_output=True, timeout=30)


def test_the_banner_before_the_marker_is_dropped_and_the_rest_passes_unchanged() -> None:
    payload = bytes(range(256)) * 1000
    done = relayed(f"echo 'Welcome to the GPU box'; echo quota >&2; {marker_rsync_path('tok', 'cat')}", payload)
    assert done.returncode == 0 and done.stdout == payload  # stdin reaches the remote side, its stdout comes back whole
    assert done.stderr == b"quota\n"  # the shell's stderr is ssh's, untouched


def test_without_a_marker_everything_passes_for_rsync_to_report_and_the_exit_is_the_commands() -> None:
    done = relayed("echo 'no marker here'; exit 12")
    assert (done.returncode, done.stdout) == (12, b"no marker here\n")


def test_the_marker_is_the_remote_commands_and_quoted(tmp_path: Path) -> None:
    """The remote side's marker (via --rsync-path) is what the relay looks for: run it in a shell."""
    done = subprocess.run(["sh", "-c", marker_rsync_path("tok", "printf x")], capture_output=True, timeout=30)
    assert done.stdout == b"@@fleet:tok:rsync\nx"
