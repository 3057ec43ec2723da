"""Lines that mean a server is dying: the agent's fail-fast, read from the one catalogue.

`fleet diagnose` and the agent read the same signatures (`fleet.host.diagnose.catalogue`); the
agent asks only "stop waiting, this server is gone", the diagnosis "why". Two strengths:
- decisive: a line that proves a failure class, or a process death (a scheduler exception, a
  sigquit, a CUDA error): SGLang prints these only on its way down. One is enough.
- suspect: a bare `Traceback` or `SomeError: ...` line (the catalogue's generic "exception").
  Servers also log tracebacks they survive (a client that hung up mid-stream, a JIT fallback), so
  these count only together with an exited process or a failed health probe; they still mark where
  the evidence starts.
Neither are lines of signatures a server survives (a request over the context length: a 400, and
serving goes on), findings, indented traceback frames and source, or NCCL INFO lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.host.diagnose.catalogue import Kind
from fleet.host.diagnose.classify import signatures_in

# The catalogue's catch-alls for an exception line and for a traceback head: suspect, not decisive
# (a server logs tracebacks it survives).
SUSPECT_SIGNATURES = frozenset({"exception", "traceback_only"})


@dataclass(frozen=True)
class Marker:
    name: str  # the catalogue signature the line matched
    decisive: bool


def fatal_marker(line: str) -> Marker | None:
    """The best-ranked catalogue signature on the line that says the server is dying, or None.
    Indented lines are a traceback's frames and source (`    raise RuntimeError(f"NCCL error: ...")`):
    code, not an event."""
    if line[:1].isspace():
        return None
    suspect: Marker | None = None
    for signature in signatures_in(line):
        if signature.kind is Kind.FINDING or signature.server_survives:
            continue
        if signature.name in SUSPECT_SIGNATURES:
            suspect = suspect or Marker(signature.name, False)
            continue
        return Marker(signature.name, True)
    return suspect
