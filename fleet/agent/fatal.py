"""Lines that mean a server is dying: the agent's fail-fast list. Standard library only.

This is deliberately coarse: it answers "stop waiting, this server is gone", not "why" --
`fleet diagnose` classifies the evidence on the controller. A pattern must not fire on a healthy
log: SGLang warns that an overridden context length "may lead to ... CUDA errors", so the CUDA
pattern wants the singular `CUDA error` followed by a colon or a space and a lower-case word.
"""

from __future__ import annotations

import re

FATAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("traceback", r"Traceback \(most recent call last\)"),
        ("assertion", r"\bAssertionError\b"),
        ("cuda_error", r"\bCUDA error(?::| [a-z])"),
        ("scheduler_exception", r"Scheduler hit an exception"),
        ("sigquit", r"Received sigquit from a child process"),
        ("rank_died", r"scheduler died during initialization"),
        ("not_enough_memory", r"Not enough (?:GPU )?memory"),
        ("out_of_memory", r"\b(?:CUDA out of memory|OutOfMemoryError|(?:Prefill|Decode) out of memory)"),
        ("address_in_use", r"Address already in use"),
        ("nccl_error", r"\bNCCL error\b|ncclCommInitRank failed"),
        # A bare exception line that ends a traceback: `ValueError: ...`, `torch.OutOfMemoryError: ...`.
        ("exception_line", r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): "),
    )
)


def fatal_marker(line: str) -> str | None:
    """The name of the first fatal pattern the line matches, or None."""
    for name, pattern in FATAL_PATTERNS:
        if pattern.search(line):
            return name
    return None
