"""Reading a server's log while it runs: the scheduler's figures, and the first fatal line with
the lines around it as evidence (readiness itself is `/health` answering 200). Standard library plus fleet's SGLang log parser
(shipped with the agent).

`LogScan` is the pure part (lines in, state out); `LogWatcher` feeds it from a growing file in a
thread of its own, starting at the offset the file had when the server was started, so that an
appended log shows only this start's lines.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Any

from fleet.agent.fatal import fatal_marker
from fleet.engines.sglang.logparse import SchedulerReady, parse_line

LINES_BEFORE_FATAL = 10
LINES_AFTER_FATAL = 120
TAIL_LINES = 40


class LogScan:
    def __init__(self) -> None:
        self.lines_seen = 0
        self.scheduler: SchedulerReady | None = None
        self.fatal_marker: str | None = None
        self.fatal_line: str | None = None
        self._before: deque[str] = deque(maxlen=LINES_BEFORE_FATAL)
        self._fatal: list[str] = []
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)

    def feed(self, line: str) -> None:
        line = line.rstrip("\r\n")
        self.lines_seen += 1
        self._tail.append(line)
        if self.fatal_marker is not None:
            if len(self._fatal) < 1 + LINES_AFTER_FATAL:
                self._fatal.append(line)
            return
        marker = fatal_marker(line)
        if marker is not None:
            self.fatal_marker = marker
            self.fatal_line = line
            self._fatal = [line]
            return
        self._before.append(line)
        event = parse_line(line, self.lines_seen)
        if isinstance(event, SchedulerReady):
            self.scheduler = event

    def evidence(self) -> list[str]:
        """From a little before the first fatal line to as far after it as was logged; without a
        fatal line, the last lines of the log."""
        if self.fatal_marker is not None:
            return [*self._before, *self._fatal]
        return list(self._tail)


class LogWatcher:
    """Follows a log file in a daemon thread and feeds a `LogScan`, thread-safely."""

    POLL_S = 0.1

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = Path(path)
        self._offset = start_offset
        self._scan = LogScan()
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._stop = threading.Event()
        self._partial = b""
        self._thread = threading.Thread(target=self._follow, name=f"log:{self.path.name}", daemon=True)
        self._thread.start()

    def _read_new(self) -> None:
        # Called by the follower thread and by sync()/close(): one reader at a time.
        with self._read_lock:
            self._read_new_locked()

    def _read_new_locked(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        if not data:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        with self._lock:
            for raw in lines:
                self._scan.feed(raw.decode("utf-8", errors="replace"))

    def _follow(self) -> None:
        while not self._stop.wait(self.POLL_S):
            self._read_new()

    def sync(self) -> None:
        """Read what the file holds now (before a decision that depends on the log)."""
        self._read_new()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._read_new()
        with self._read_lock, self._lock:
            if self._partial:
                self._scan.feed(self._partial.decode("utf-8", errors="replace"))
                self._partial = b""

    def _read_scan(self, name: str) -> Any:
        with self._lock:
            return getattr(self._scan, name)

    scheduler: SchedulerReady | None = property(lambda self: self._read_scan("scheduler"))  # type: ignore[assignment]
    fatal_marker: str | None = property(lambda self: self._read_scan("fatal_marker"))  # type: ignore[assignment]
    fatal_line: str | None = property(lambda self: self._read_scan("fatal_line"))  # type: ignore[assignment]

    def evidence(self) -> list[str]:
        with self._lock:
            return self._scan.evidence()
