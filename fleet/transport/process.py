"""Run a local subprocess under a wall-clock deadline, killing its whole process group on expiry."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.errors import CommandTimeout, ToolMissing

# After SIGKILL, how long to wait for the pipes to close. A child that left the process group
# (setsid) can hold them open forever; we stop reading then rather than miss our deadline.
_DRAIN_AFTER_KILL_S = 1.0


@dataclass(frozen=True)
class ProcessOutcome:
    exit_code: int
    stdout: bytes
    stderr: bytes
    duration_s: float


def run_process(
    host: str,
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    cwd: Path | None = None,
    what: str | None = None,
) -> ProcessOutcome:
    """Run `argv` in a new session; on timeout kill its process group and raise `CommandTimeout`.

    `env` is added to this process's environment (never to the argv). `what` names the call in
    the timeout message (default: the argv).
    """
    started = time.monotonic()
    full_env = {**os.environ, **env} if env else None
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
            start_new_session=True,  # its own process group, so a timeout kills grandchildren too
        )
    except FileNotFoundError:
        # Seen on a GPU machine without rsync: a traceback from deep in a sweep. Say what is missing.
        raise ToolMissing(host, f"`{argv[0]}` is not installed on this machine (the controller); install it (Debian/Ubuntu: apt-get install {argv[0]})") from None
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CommandTimeout(
            host,
            f"`{what or ' '.join(argv)}` did not finish within {timeout:g}s; killed its process group (a child that left the group may still be running)",
        ) from None
    except BaseException:
        _kill_group(proc)
        raise
    return ProcessOutcome(proc.returncode, stdout, stderr, time.monotonic() - started)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.communicate(timeout=_DRAIN_AFTER_KILL_S)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait(timeout=_DRAIN_AFTER_KILL_S)
