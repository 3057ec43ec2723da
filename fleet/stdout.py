"""A stdout that may stop taking output: its reader gone (`fleet sweep ... | head -1`) or its disk
full (`> /dev/full`). Once a write or flush fails, stdout points at /dev/null, so that no later
print, nor the interpreter's last flush, fails on it again (each did: a traceback per progress
event, exit 120); the command says so once and keeps its own exit code (fleet.cli.run)."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class Loss:
    """Why stdout stopped taking output, once it has."""

    error: OSError | None = None
    said = False  # the progress display said so and the work went on: it keeps its exit code

    @classmethod
    def lose(cls, error: OSError, stream: TextIO) -> None:
        if cls.error is not None:
            return
        cls.error = error
        try:
            descriptor = os.open(os.devnull, os.O_WRONLY)
            os.dup2(descriptor, stream.fileno())  # what is still buffered goes nowhere
            os.close(descriptor)
        except (OSError, ValueError):  # no descriptor (a test's captured stdout): nothing to redirect
            pass


class _Stdout:
    """sys.stdout under the console entry: a write or flush that fails is remembered (`Loss`)
    before the error goes on, and every later one does nothing."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if Loss.error is not None:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as exc:
            Loss.lose(exc, self._stream)
            raise

    def flush(self) -> None:
        if Loss.error is not None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            Loss.lose(exc, self._stream)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    """Wrap sys.stdout (the console entry does, once)."""
    sys.stdout = _Stdout(sys.stdout)


def show(text: str) -> OSError | None:
    """Write and flush `text` (progress, as it happens). The error that made stdout stop taking
    output, returned by the call that found it (None otherwise, and once lost, nothing is written):
    the display stops, the work goes on."""
    if Loss.error is not None:
        return None
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        Loss.lose(exc, sys.stdout)
        Loss.said = True
        return exc
    return None
