"""Noticing that the agent itself did not run: a stretch in which the whole process was stopped
(SIGSTOP, a debugger, a frozen container or VM) or the whole machine was suspended. Standard
library only.

A run measured across such a gap measures fleet's own pause, not the server: a request in flight
sees no token for the length of the pause and is blamed on the server, and every duration holds
the pause. So the agent keeps a watch (`PauseWatch`): a thread that ticks every TICK_S and looks
at how much time passed since the previous tick (`GapDetector`). SIGSTOP freezes every thread of
the process at once while CLOCK_MONOTONIC keeps counting, so the first tick after SIGCONT sees a
jump far beyond its interval; a suspended machine stops CLOCK_MONOTONIC too, but CLOCK_BOOTTIME
counts the suspension, so the detector reads both. Whoever needs to know (a run, a request) takes
a `mark()` before and asks `since(mark)` after; both look at the clocks themselves first, so a gap
is seen at once even when the watch's thread has not ticked since the process resumed.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger("fleet.host.agent")

TICK_S = 0.25
# A gap is time between two looks at the clock beyond this. Well above what a loaded machine does
# to a thread that sleeps TICK_S: scheduling delays, a GC pass, the GIL held by another thread
# (a multi-MiB JSON dump), a page fault from swap -- tens to hundreds of milliseconds, a second
# or two at worst. 5 s is 20 ticks late; a shorter stop costs a run's figures little next to its
# requests' own no-token watchdog (minutes).
PAUSE_THRESHOLD_S = 5.0
# Tests pause an agent for seconds, not minutes: they lower the threshold here.
THRESHOLD_ENV = "FLEET_AGENT_PAUSE_THRESHOLD_S"

Clocks = Callable[[], tuple[float, float]]  # (CLOCK_MONOTONIC, CLOCK_BOOTTIME) in seconds


@dataclass(frozen=True)
class Gap:
    """A stretch in which the agent did not run. `began` and `ended`: CLOCK_MONOTONIC at the
    look before it and the look that saw it; `seconds`: how long it lasted (CLOCK_BOOTTIME, which
    counts a suspension too); `suspended_s`: how much of it the whole machine was suspended."""

    began: float
    ended: float
    seconds: float
    suspended_s: float = 0.0

    def describe(self) -> str:
        if self.suspended_s > self.seconds / 2:
            how = "its machine was suspended"
        else:
            how = "its process was stopped (SIGSTOP, a debugger, a frozen VM) or starved of CPU"
        return f"fleet's agent did not run for {self.seconds:.1f} s: {how}"


class GapDetector:
    """Pure: fed clock readings, says when the time since the previous reading exceeds the threshold."""

    def __init__(self, threshold_s: float = PAUSE_THRESHOLD_S) -> None:
        self.threshold_s = threshold_s
        self._last: tuple[float, float] | None = None

    def observe(self, monotonic: float, boottime: float) -> Gap | None:
        last, self._last = self._last, (monotonic, boottime)
        if last is None:
            return None
        ran, elapsed = monotonic - last[0], boottime - last[1]
        # CLOCK_BOOTTIME runs at least as fast as CLOCK_MONOTONIC; max() keeps a stop seen where
        # the boot-time clock is only the monotonic one (`clocks` without CLOCK_BOOTTIME).
        seconds = max(ran, elapsed)
        if seconds <= self.threshold_s:
            return None
        return Gap(began=last[0], ended=monotonic, seconds=seconds, suspended_s=max(0.0, elapsed - ran))


def clocks() -> tuple[float, float]:
    monotonic = time.monotonic()
    boottime = getattr(time, "CLOCK_BOOTTIME", None)  # Linux only
    return monotonic, (time.clock_gettime(boottime) if boottime is not None else monotonic)


def threshold_from_env(environ: Mapping[str, str] = os.environ) -> float:
    """THRESHOLD_ENV where it is a positive number of seconds, else PAUSE_THRESHOLD_S."""
    value = environ.get(THRESHOLD_ENV)
    if value is None:
        return PAUSE_THRESHOLD_S
    try:
        threshold = float(value)
    except ValueError:
        threshold = math.nan
    if not (math.isfinite(threshold) and threshold > 0):
        log.warning("%s=%r: expected a positive number of seconds; using %g s", THRESHOLD_ENV, value, PAUSE_THRESHOLD_S)
        return PAUSE_THRESHOLD_S
    return threshold


class PauseWatch:
    """The agent's gaps, shared by its threads. Until `start()` (and after `stop()`) it looks at
    nothing: a watch that does not tick would call its own idleness a gap."""

    def __init__(self, threshold_s: float = PAUSE_THRESHOLD_S, *, tick_s: float = TICK_S, clock: Clocks = clocks) -> None:
        self.threshold_s = threshold_s
        self._tick_s = tick_s
        self._clock = clock
        self._detector = GapDetector(threshold_s)
        self._lock = threading.Lock()
        self._gaps: list[Gap] = []
        self._ticking = threading.Event()  # set while started: only then are the clocks looked at
        self._quit = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            self._detector = GapDetector(self.threshold_s)  # no reading from before: not ticking then
            self._ticking.set()
            self._quit.clear()
        self.check()  # the first reading
        self._thread = threading.Thread(target=self._tick, name="pause-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._ticking.clear()
        self._quit.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _tick(self) -> None:
        while not self._quit.wait(self._tick_s):
            self.check()

    def check(self) -> None:
        """Look at the clocks now (the watch's thread does every TICK_S; anyone may in between)."""
        with self._lock:
            gap = self._detector.observe(*self._clock()) if self._ticking.is_set() else None
            if gap is not None:
                self._gaps.append(gap)
        if gap is not None:
            log.warning("%s; a run in flight across it is done again", gap.describe())

    def mark(self) -> int:
        """Where to count gaps from: those seen until now are not counted."""
        self.check()
        with self._lock:
            return len(self._gaps)

    def since(self, mark: int) -> list[Gap]:
        """The gaps seen after `mark()` returned `mark`, up to now."""
        self.check()
        with self._lock:
            return self._gaps[mark:]
