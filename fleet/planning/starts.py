"""What earlier server starts logged of their memory (`results/starts.json`), for the next plan.

An engine that measures at start-up what the planner cannot know beforehand (vLLM profiles its
activation peak, then logs the KV cache memory that is left) names those lines (`Engine.start_line`);
the agent keeps them in each result (`server.start_lines`), and at the end of a sweep they are
recorded here with the launch and the GPU they belong to (`StartRecord`). The next plan hands them
to the engine (`Engine.predict_start(observed=...)`), which puts what the start measured in place
of the range it would otherwise assume, for the same configuration.

What a host sent back is untrusted: a result's lines are taken only as a short list of short
strings (`START_LINES`, `START_LINE_CHARS`, as the agent keeps them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.host.agent.logwatch import START_LINE_CHARS, START_LINES
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import ContractError, RunResult
from fleet.host.contract.reader import Reader, read_text
from fleet.host.engines.base import StartRecord

log = logging.getLogger("fleet.planning")

STARTS_SCHEMA = "fleet.starts/1"
# The newest records kept: one per launch and GPU, and a sweep has tens of configurations.
KEEP_RECORDS = 1000


@dataclass(frozen=True)
class StartedServer:
    """What the controller knows of a server that started: its launch, engine release and GPU."""

    engine: str
    argv: tuple[str, ...]  # [python, -m, module, flags...]
    env: Mapping[str, str]
    release: str | None
    gpu_memory_mib: int | None


@dataclass
class StartHistory:
    records: list[StartRecord] = field(default_factory=list)

    def for_engine(self, engine: str) -> list[StartRecord]:
        return [r for r in self.records if r.engine == engine]

    def add(self, record: StartRecord) -> None:
        """The newest record of a launch on a GPU replaces an older one of the same."""
        same = (record.engine, record.flags, record.env, record.gpu_memory_mib, record.release)
        self.records = [r for r in self.records if (r.engine, r.flags, r.env, r.gpu_memory_mib, r.release) != same]
        self.records = [*self.records, record][-KEEP_RECORDS:]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": STARTS_SCHEMA,
            "starts": [
                {
                    "engine": r.engine,
                    "flags": list(r.flags),
                    "env": dict(r.env),
                    "gpu_memory_mib": r.gpu_memory_mib,
                    "release": r.release,
                    "lines": list(r.lines),
                }
                for r in self.records
            ],
        }

    @classmethod
    def from_json(cls, data: object, source: str) -> StartHistory:
        reader = Reader(data, source)
        reader.schema(STARTS_SCHEMA)
        history = cls()
        for item in reader.children("starts"):
            env = item.get("env", dict, "an object of strings")
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
                raise item.fail("env", "an object of string values", env)
            history.records.append(
                StartRecord(
                    engine=item.get("engine", str),
                    flags=tuple(item.strings("flags")),
                    env=tuple(sorted(env.items())),
                    gpu_memory_mib=item.get("gpu_memory_mib", int),
                    release=item.get("release", str),
                    lines=tuple(item.strings("lines")),
                )
            )
        return history

    @classmethod
    def load(cls, path: Path) -> StartHistory:
        """The history at `path`; empty where none was kept yet. A malformed file is a
        ContractError naming the file and the field."""
        if not path.exists():
            return cls()
        return cls.from_json(Reader.of(read_text(path), str(path)).data, str(path))

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())


def start_lines_of(result: RunResult) -> tuple[str, ...]:
    """The memory lines a result's server kept, if they are what the agent keeps (a short list of
    short strings); otherwise none: a host's file decides nothing else here."""
    lines = (result.server or {}).get("start_lines")
    if not isinstance(lines, list) or not 0 < len(lines) <= START_LINES:
        return ()
    if not all(isinstance(line, str) and len(line) <= START_LINE_CHARS for line in lines):
        return ()
    return tuple(lines)


def record_starts(history: StartHistory, results: Iterable[RunResult], servers: Mapping[str, StartedServer]) -> int:
    """Add the starts `results` logged (one record per server that has lines and a known launch
    and GPU) to `history`; returns how many were added."""
    added: dict[str, StartRecord] = {}
    for result in results:
        server = servers.get(result.server_id)
        lines = start_lines_of(result)
        if server is None or not lines or server.gpu_memory_mib is None or server.release is None or len(server.argv) < 3:
            continue
        added[result.server_id] = StartRecord(server.engine, tuple(server.argv[3:]), tuple(sorted(server.env.items())), server.gpu_memory_mib, server.release, lines)
    for record in added.values():
        history.add(record)
    return len(added)


def starts_for_plan(path: Path) -> StartHistory | None:
    """The history at `path` for a plan; None where it is unreadable: a broken history must not
    stop a sweep (its predictions fall back to what they assume), but it is said, with the file
    and the field."""
    try:
        return StartHistory.load(path)
    except ContractError as exc:
        log.error("%s; predicting without what earlier starts logged", exc)
        return None


def record_sweep_starts(path: Path, results: Iterable[RunResult], servers: Mapping[str, StartedServer]) -> None:
    """Add what a sweep's starts logged to the history at `path` (atomically); a failure to is said
    and loses nothing else (the results stand; only the next prediction learns less)."""
    try:
        history = StartHistory.load(path)
        if record_starts(history, results, servers):
            history.save(path)
    except (ContractError, OSError) as exc:
        log.error("what the starts logged of memory was not recorded: %s", exc)
