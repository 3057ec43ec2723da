"""One counter of work for the scale tests (issue 28): the Python lines a call executes
(sys.settrace's line events). Counted, not timed: load on the machine cannot make a test flaky."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


def lines_executed(work: Callable[[], object]) -> int:
    """The Python lines `work()` executes, in every frame it enters."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count
