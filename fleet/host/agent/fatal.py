"""Lines that mean a server is dying: the agent's fail-fast list. Standard library only.

Deliberately coarse: it answers "stop waiting, this server is gone", not "why" -- `fleet
diagnose` classifies the evidence on the controller. Two strengths:
- decisive: SGLang prints these only on its way down (a scheduler exception, a CUDA error, an
  assertion, out of memory, ...). One of them is enough to call the server dead.
- suspect: a bare `Traceback` or `SomeError: ...` line. Servers also log tracebacks they survive
  (a client that hung up mid-stream, a JIT fallback), so these count only together with an
  exited process or a failed health probe; they still mark where the evidence starts.
A pattern must not fire on a healthy log: SGLang warns that an overridden context length "may
lead to ... CUDA errors", so the CUDA pattern wants the singular `CUDA error` followed by a colon
or a space and a lower-case word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Marker:
    name: str
    decisive: bool


def _patterns(decisive: bool, *pairs: tuple[str, str]) -> tuple[tuple[Marker, re.Pattern[str]], ...]:
    return tuple((Marker(name, decisive), re.compile(pattern)) for name, pattern in pairs)


# Decisive first: a line that matches both kinds ("Scheduler hit an exception: Traceback ...") is decisive.
FATAL_PATTERNS = _patterns(
    True,
    ("scheduler_exception", r"Scheduler hit an exception"),
    ("sigquit", r"Received sigquit from a child process"),
    ("rank_died", r"scheduler died during initialization"),
    ("assertion", r"\bAssertionError\b"),
    ("cuda_error", r"\bCUDA error(?::| [a-z])"),
    ("not_enough_memory", r"Not enough (?:GPU )?memory"),
    ("out_of_memory", r"\b(?:CUDA out of memory|OutOfMemoryError|(?:Prefill|Decode) out of memory)"),
    ("address_in_use", r"Address already in use"),
    ("nccl_error", r"\bNCCL error\b|ncclCommInitRank failed"),
) + _patterns(
    False,
    ("traceback", r"Traceback \(most recent call last\)"),
    # The last line of a traceback: `ValueError: ...`, `torch.OutOfMemoryError: ...`.
    ("exception_line", r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): "),
)


def fatal_marker(line: str) -> Marker | None:
    """The first fatal pattern the line matches, or None. Indented lines are a traceback's frames
    and source (`    raise RuntimeError(f"NCCL error: ...")`): code, not an event."""
    if line[:1].isspace():
        return None
    for marker, pattern in FATAL_PATTERNS:
        if pattern.search(line):
            return marker
    return None
