"""`progress.json`: what the agent is doing, for the controller's watch and `fleet status`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from fleet.host.contract.layout import SweepDir
from fleet.host.contract.reader import Reader, parse_json, untrusted
from fleet.host.contract.results import RunStatus

PROGRESS_SCHEMA = "fleet.agent_progress/1"


class AgentState(str, Enum):
    running = "running"
    finished = "finished"  # every run has a result, all ok
    finished_with_errors = "finished_with_errors"  # every run has a result, some failed or the agent hit errors
    stopped = "stopped"  # told to stop (STOP file, SIGTERM): not a crash to undo
    halted = "halted"  # stopped itself: it cannot write its results (`last_error` says why); the host failed

    @property
    def finished_work(self) -> bool:
        return self in (AgentState.finished, AgentState.finished_with_errors)


class ServerPhase(str, Enum):
    starting = "starting"
    warmup = "warmup"
    running = "running"
    stopping = "stopping"


@dataclass(frozen=True)
class ServerProgress:
    label: str
    phase: ServerPhase
    run: str | None  # the run's label while running
    since: float
    gpus: tuple[int, ...] = ()  # where the agent placed it (fleet.host.agent.dispatch)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "phase": self.phase.value, "run": self.run, "since": self.since, "gpus": list(self.gpus)}

    @classmethod
    def from_json(cls, data: object, source: str, prefix: str) -> ServerProgress:
        r = Reader(data, source, prefix)
        gpus = r.get("gpus", list, "a list of GPU indexes", [])
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
            raise r.fail("gpus", "a list of GPU indexes", gpus)
        return cls(r.get("label", str), r.enum("phase", ServerPhase), r.optional("run", str), r.get("since", float), tuple(gpus))


@dataclass(frozen=True)
class AgentError:
    """The agent's latest error, for the live display."""

    server: str
    error_class: str
    message: str
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "class": self.error_class, "message": self.message, "at": self.at}

    @classmethod
    def from_json(cls, data: object, source: str) -> AgentError:
        r = Reader(data, source, "last_error")
        return cls(r.get("server", str), r.get("class", str), r.get("message", str), r.get("at", float))


# Run statuses that count as done.
DONE_STATUSES = tuple(status.value for status in RunStatus)


@dataclass(frozen=True)
class Progress:
    """`progress.json`: what the agent is doing, rewritten atomically at every change."""

    sweep_id: str
    agent_pid: int
    boot_id: str
    started_at: float
    updated_at: float
    state: AgentState
    total: int
    counts: dict[str, int]  # runs per RunStatus value
    servers: dict[str, ServerProgress] = field(default_factory=dict)  # by server id
    last_error: AgentError | None = None

    @property
    def done(self) -> int:
        return sum(self.counts.get(status, 0) for status in DONE_STATUSES)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": PROGRESS_SCHEMA,
            "sweep_id": self.sweep_id,
            "agent_pid": self.agent_pid,
            "boot_id": self.boot_id,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "state": self.state.value,
            "total": self.total,
            # done/remaining: derived, for people reading the file
            "counts": {**self.counts, "done": self.done, "remaining": self.total - self.done},
            "servers": {sid: s.to_json() for sid, s in self.servers.items()},
            "last_error": self.last_error.to_json() if self.last_error else None,
        }

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = SweepDir.PROGRESS) -> Progress:
        # What the agent says of itself is printed live (last error, server labels): made printable.
        r = Reader(untrusted(parse_json(text_or_data, source)), source)
        r.schema(PROGRESS_SCHEMA)
        counts = r.child("counts")
        servers = r.child("servers")
        error = r.data.get("last_error")
        return cls(
            sweep_id=r.get("sweep_id", str),
            agent_pid=r.get("agent_pid", int),
            boot_id=r.get("boot_id", str),
            started_at=r.get("started_at", float),
            updated_at=r.get("updated_at", float),
            state=r.enum("state", AgentState),
            total=r.get("total", int),
            counts={k: counts.get(k, int) for k in counts.data if k not in ("done", "remaining")},
            servers={sid: ServerProgress.from_json(v, source, f"servers.{sid}") for sid, v in servers.data.items()},
            last_error=AgentError.from_json(error, source) if error is not None else None,
        )


# `halt.json`: where the agent says it halted when even `progress.json` cannot be written (a full
# disk has no room for the atomic writer's temp file). Written at the agent's start at full size,
# then overwritten in place: no new blocks are needed. (A read-only disk takes nothing: then the
# controller sees an agent gone, and its restart fails naming the read-only file system.)
HALT_SCHEMA = "fleet.agent_halt/1"
HALT_BYTES = 4096


@dataclass(frozen=True)
class Halt:
    reason: str | None  # None: not halted
    at: float | None = None

    def to_bytes(self) -> bytes:
        """JSON padded with spaces to HALT_BYTES (a long reason is cut to fit)."""
        reason, budget = self.reason, HALT_BYTES - 128
        while True:
            text = json.dumps({"schema": HALT_SCHEMA, "reason": reason, "at": self.at}, ensure_ascii=False).encode()
            if len(text) <= HALT_BYTES or reason is None or budget <= 0:
                return text.ljust(HALT_BYTES, b" ")[:HALT_BYTES]
            # Cut by bytes (UTF-8), on a character boundary; JSON escapes may still overflow: again, shorter.
            reason = self.reason.encode()[:budget].decode(errors="ignore") + "..." if self.reason else reason
            budget -= len(text) - HALT_BYTES + 8

    @classmethod
    def from_text(cls, text: str | bytes, source: str = SweepDir.HALT) -> Halt:
        r = Reader(untrusted(parse_json(text, source)), source)
        r.schema(HALT_SCHEMA)
        return cls(r.optional("reason", str), r.optional("at", float))
