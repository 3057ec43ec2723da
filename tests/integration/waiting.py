"""Helpers the sweep-level integration tests share: waiting on a real signal (never a bare sleep)
and counting results on a test host and in a results folder."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fleet.host.procfs import group_members

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05, detail: Callable[[], str] | None = None) -> T:
    """The predicate's first truthy value within `timeout` seconds; else an AssertionError naming
    `what`, followed by `detail()` (say, the controllers' transcripts) where given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out ({timeout:g}s) waiting for {what}" + (":\n" + detail() if detail else ""))


def retry_line(host: str) -> re.Pattern[str]:
    """fleet.retry's warning for a call to `host` that failed and is retried ("<host>: <policy> attempt N failed
    (<why>); retrying in ..."; on a controller's stderr without --verbose): the event a test waits for to know the
    controller met a fault, instead of a fixed time."""
    return re.compile(rf"{re.escape(host)}: \w+ attempt \d+ failed \(")


def kill_group(pgid: int, timeout: float = 30) -> None:
    """SIGKILL every process of a group (a controller and its rsync and ssh children) and wait until
    none is left alive. A killed controller's child caught between fork and exec still holds the
    open file of the controller's sweep lock until it dies itself, and a resume started before then
    is refused as busy (seen at load 20-40)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_for(lambda: not group_members(pgid), timeout, f"the processes of group {pgid} to die")


def remote_done(fleet: Any, host: str, sweep_id: str) -> int:
    """How many results the host's agent has written for the sweep (read on the host itself)."""
    done = fleet.exec(host, ["sh", "-c", f"ls /var/lib/fleet/sweeps/{sweep_id}/runs 2>/dev/null | grep -c json || true"])
    return int(done.stdout.strip() or 0)


def results_by_run(directory: Path) -> dict[str, list[str]]:
    """Run id -> the hosts whose folder in a sweep's results holds a result for it."""
    by_run: dict[str, list[str]] = {}
    for path in directory.glob("*/runs/*.json"):
        by_run.setdefault(json.loads(path.read_text())["run_id"], []).append(path.parent.parent.name)
    return by_run
