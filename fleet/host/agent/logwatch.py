"""Reading a server's log while it runs: the scheduler's figures, and the first fatal line with
the lines around it as evidence (readiness itself is `/health` answering 200). Standard library
plus the engine's log parser (shipped with the agent).

`LogScan` is the pure part (lines in, state out); `LogWatcher` feeds it from a growing file in a
thread of its own, starting at the offset the file had when the server was started, so that an
appended log shows only this start's lines.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Any

from fleet.host.agent.fatal import fatal_marker
from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import ServingLimits

LINES_BEFORE = 40  # enough for the traceback that leads to a decisive line
LINES_AFTER = 120
TAIL_LINES = 40
START_LINES = 8  # a start's memory lines (vLLM logs two)
START_LINE_CHARS = 1000


class _Capture:
    """A marked line with the lines before it and as many after it as arrive (up to a limit)."""

    def __init__(self, before: deque[str], line: str) -> None:
        self.line = line
        self.lines = [*before, line]
        self._room = LINES_AFTER

    def add(self, line: str) -> None:
        if self._room > 0:
            self.lines.append(line)
            self._room -= 1


class LogScan:
    """`fatal_*`: the first decisive fatal line (the server is dying); `suspect_line`: the first
    traceback-like line, which only counts together with an exit or a failed health probe."""

    def __init__(self, engine: str = DEFAULT_ENGINE) -> None:
        self.lines_seen = 0
        self.scheduler: ServingLimits | None = None
        self._engine = engine_named(engine)  # whose log line states the serving limits
        # The lines that state what the start measured of memory (Engine.start_line), the last few,
        # cut to a line's usual length: they go into the results for the next prediction.
        self.start_lines: deque[str] = deque(maxlen=START_LINES)
        self._fatal: _Capture | None = None
        self.fatal_marker: str | None = None
        self._suspect: _Capture | None = None
        self._before: deque[str] = deque(maxlen=LINES_BEFORE)
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)

    @property
    def fatal_line(self) -> str | None:
        return self._fatal.line if self._fatal else None

    @property
    def suspect_line(self) -> str | None:
        return self._suspect.line if self._suspect else None

    def feed(self, line: str) -> None:
        line = line.rstrip("\r\n")
        self.lines_seen += 1
        self._tail.append(line)
        for capture in (self._fatal, self._suspect):
            if capture is not None:
                capture.add(line)
        marker = fatal_marker(line) if self._fatal is None else None
        if marker is not None and marker.decisive:
            self._fatal = _Capture(self._before, line)
            self.fatal_marker = marker.name
        elif marker is not None and self._suspect is None:
            self._suspect = _Capture(self._before, line)
        self._before.append(line)
        limits = self._engine.serving_limits(line)
        if limits is not None:
            self.scheduler = limits
        if self._engine.start_line(line):
            self.start_lines.append(line[:START_LINE_CHARS])

    def evidence(self) -> list[str]:
        """Around the first decisive fatal line, else the first suspect one, else the last lines."""
        capture = self._fatal or self._suspect
        return list(capture.lines) if capture else list(self._tail)


class LogWatcher:
    """Follows a log file in a daemon thread and feeds a `LogScan`, thread-safely."""

    POLL_S = 0.1

    def __init__(self, path: Path, start_offset: int, engine: str = DEFAULT_ENGINE) -> None:
        self.path = Path(path)
        self._offset = start_offset
        self._scan = LogScan(engine)
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

    scheduler: ServingLimits | None = property(lambda self: self._read_scan("scheduler"))  # type: ignore[assignment]
    fatal_marker: str | None = property(lambda self: self._read_scan("fatal_marker"))  # type: ignore[assignment]
    fatal_line: str | None = property(lambda self: self._read_scan("fatal_line"))  # type: ignore[assignment]
    suspect_line: str | None = property(lambda self: self._read_scan("suspect_line"))  # type: ignore[assignment]

    def start_lines(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._scan.start_lines)

    def evidence(self) -> list[str]:
        with self._lock:
            return self._scan.evidence()
