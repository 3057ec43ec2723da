"""The contract between the controller and the agent: what a sweep directory holds and what its
files say. Both sides read and write these types, so a file means the same thing at either end.

A sweep directory is `<work_dir>/sweeps/<sweep-id>/` on a host and, once pulled,
`results/<sweep-id>/<host>/` on the controller; `SweepDir` names every file in it, once.

Every document carries a `schema` (name/version). Readers check it: a document of another
schema, a truncated file or a field of the wrong type raises `ContractError` naming the file,
the field and what was expected -- never a silent misread. A reader of version N reads only N;
a change of meaning bumps the version, and adding an optional field does not.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from fleet.host.errors import FleetError

RESULT_SCHEMA = "fleet.run_result/1"
PROGRESS_SCHEMA = "fleet.agent_progress/1"
QUARANTINE_SCHEMA = "fleet.host_quarantine/1"


@dataclass(frozen=True)
class SweepDir:
    """The files of one host's share of a sweep, under `root` (a host path or a local one)."""

    root: str

    # What the controller writes for the agent.
    SHARD = "shard.json"  # the runs and servers this host runs (fleet.host.agent.shard)
    HOST_FACTS = "host_facts.json"  # the controller's facts of this host, copied into every result
    QUARANTINE = "quarantine.json"  # servers to skip, pushed while the sweep runs
    STOP = "STOP"  # present: the agent stops at the next safe point
    # What the agent writes.
    RUNS = "runs"  # runs/<run-id>.json: one RunResult per run
    LOGS = "logs"  # logs/<server-label>.log: each server's whole log
    PROGRESS = "progress.json"  # what the agent is doing, for `fleet status`
    AGENT_LOG = "agent.log"
    # The agent's own bookkeeping, meaningless on the controller.
    ATTEMPTS = "attempts"  # attempts/<run-id>.json: how many times a run was started
    SERVICES = "services"  # the `process` service manager's state
    AGENT_LOCK = "agent.lock"  # one agent per sweep directory

    # What a pull leaves on the host: its bookkeeping, and the atomic writer's temp files
    # (`.<name>.<random>.tmp`), which vanish under rsync's feet.
    PULL_EXCLUDES = (f"{ATTEMPTS}/", f"{SERVICES}/", "*.lock", STOP, ".*.tmp")

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    @property
    def shard(self) -> str:
        return self.path(self.SHARD)

    @property
    def host_facts(self) -> str:
        return self.path(self.HOST_FACTS)

    @property
    def quarantine(self) -> str:
        return self.path(self.QUARANTINE)

    @property
    def stop_file(self) -> str:
        return self.path(self.STOP)

    @property
    def runs(self) -> str:
        return self.path(self.RUNS)

    @property
    def logs(self) -> str:
        return self.path(self.LOGS)

    @property
    def progress(self) -> str:
        return self.path(self.PROGRESS)

    @property
    def agent_log(self) -> str:
        return self.path(self.AGENT_LOG)

    @property
    def attempts(self) -> str:
        return self.path(self.ATTEMPTS)

    @property
    def services(self) -> str:
        return self.path(self.SERVICES)

    @property
    def agent_lock(self) -> str:
        return self.path(self.AGENT_LOCK)

    def result(self, run_id: str) -> str:
        return self.path(self.RUNS, f"{run_id}.json")

    def attempt(self, run_id: str) -> str:
        return self.path(self.ATTEMPTS, f"{run_id}.json")

    def server_log(self, label: str) -> str:
        return self.path(self.LOGS, f"{label}.log")


# ---------------------------------------------------------------------------------- reading


class ContractError(FleetError):
    """A sweep-directory document that is not what the contract says: names the file, the field
    and what was expected."""

    def __init__(self, source: str, field_name: str, expected: str, got: object = None) -> None:
        self.source, self.field, self.expected = source, field_name, expected
        where = f"{source}: {field_name}" if field_name else source
        detail = f"{where}: expected {expected}"
        if got is not None:
            detail += f", got {_short(got)}"
        super().__init__(detail)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


T = TypeVar("T")
_JSON_KINDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object", list: "a list"}
E = TypeVar("E", bound=Enum)


class _Reader:
    """Typed access to one JSON object, every complaint naming the file and the field's path."""

    def __init__(self, data: object, source: str, prefix: str = "") -> None:
        if not isinstance(data, dict):
            raise ContractError(source, prefix, "a JSON object", type(data).__name__)
        self.data: dict[str, Any] = data
        self.source, self.prefix = source, prefix

    def _name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def get(self, key: str, kind: type[T] | tuple[type, ...], *, optional: bool = False, default: Any = None) -> Any:
        if key not in self.data or (optional and self.data[key] is None):
            if optional:
                return default
            raise ContractError(self.source, self._name(key), "a value (the field is missing)")
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # JSON has one number type: an int is a fine float; a bool is never a number.
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(_JSON_KINDS.get(k, k.__name__) for k in kinds)
            raise ContractError(self.source, self._name(key), names, value)
        return value

    def enum(self, key: str, kind: type[E]) -> E:
        value = self.get(key, str)
        try:
            return kind(value)
        except ValueError:
            raise ContractError(self.source, self._name(key), "one of " + ", ".join(m.value for m in kind), value) from None

    def child(self, key: str) -> _Reader:
        return _Reader(self.get(key, dict), self.source, self._name(key))

    def schema(self, expected: str) -> None:
        found = self.data.get("schema")
        if found != expected:
            raise ContractError(self.source, "schema", f"{expected} (this fleet reads only that version)", found)



def _parse(text_or_data: str | bytes | Mapping[str, Any], source: str) -> object:
    if isinstance(text_or_data, Mapping):
        return dict(text_or_data)
    try:
        return json.loads(text_or_data)
    except ValueError as exc:
        raise ContractError(source, "", "a whole JSON document (truncated or not JSON)", str(exc)) from None


def _read(path: Path | str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ContractError(str(path), "", "a readable file", exc.strerror or str(exc)) from None


# ---------------------------------------------------------------------------------- run results


class RunStatus(str, Enum):
    """How a run ended. Only `ok` and `partial` carry figures; a run that could not run as
    defined never shows one."""

    ok = "ok"
    partial = "partial"  # some requests failed
    failed = "failed"  # none succeeded, or none produced a token
    skipped = "skipped"  # the controller chose not to launch it (quarantine, infeasible)

    @property
    def has_figures(self) -> bool:
        return self in (RunStatus.ok, RunStatus.partial)


@dataclass(frozen=True)
class Failure:
    """Why a run (or a server) failed, with the evidence `fleet diagnose` reads."""

    error_class: str
    message: str
    evidence: tuple[str, ...] = ()
    log_path: str | None = None
    exit_code: int | None = None
    # The root cause read from the whole server log by fleet.host.diagnose (class, evidence lines, fix).
    diagnosis: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.error_class,
            "message": self.message,
            "evidence": list(self.evidence),
            "log_path": self.log_path,
            "exit_code": self.exit_code,
            "diagnosis": dict(self.diagnosis) if self.diagnosis else None,
        }

    @classmethod
    def from_json(cls, data: object, source: str, prefix: str = "failure") -> Failure:
        r = _Reader(data, source, prefix)
        evidence = r.get("evidence", list, optional=True, default=[])
        return cls(
            error_class=r.get("class", str),
            message=r.get("message", str),
            evidence=tuple(str(line) for line in evidence),
            log_path=r.get("log_path", str, optional=True),
            exit_code=r.get("exit_code", int, optional=True),
            diagnosis=r.get("diagnosis", dict, optional=True),
        )


# The result's own fields; every other top-level key is a workload kind's extra section
# (`levels` of a concurrency sweep, `calibration` of a long-context run, `turns` of an agentic one).
_RESULT_FIELDS = frozenset(
    "schema run_id label server_id server_label sweep_id host boot_id attempt agent_pid gpus server log_path "
    "host_facts provenance engine_release workload status failure figures requests started_at ended_at".split()
)


@dataclass(frozen=True)
class RunResult:
    """`runs/<run-id>.json`: one run's outcome, written once by the agent, atomically."""

    run_id: str
    label: str
    server_id: str
    server_label: str
    sweep_id: str
    host: str
    status: RunStatus
    failure: Failure | None
    figures: dict[str, Any]  # from fleet.host.agent.results.request_figures; null where nothing stands behind a figure
    workload: dict[str, Any]  # the shard's resolved workload, its bulky texts left out
    started_at: float
    ended_at: float
    boot_id: str = ""
    attempt: int = 1
    agent_pid: int | None = None
    gpus: tuple[int, ...] = ()
    server: dict[str, Any] | None = None  # what the server said of itself (fleet.host.agent.drive.ServerFacts)
    log_path: str | None = None
    host_facts: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None  # a fixed variant: what it fixes and why
    engine_release: str | None = None  # the SGLang release the server ran (or the sim played)
    requests: tuple[dict[str, Any], ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA,
            "run_id": self.run_id,
            "label": self.label,
            "server_id": self.server_id,
            "server_label": self.server_label,
            "sweep_id": self.sweep_id,
            "host": self.host,
            "boot_id": self.boot_id,
            "attempt": self.attempt,
            "agent_pid": self.agent_pid,
            "gpus": list(self.gpus),
            "server": self.server,
            "log_path": self.log_path,
            "host_facts": self.host_facts,
            "provenance": self.provenance,
            "engine_release": self.engine_release,
            "workload": self.workload,
            "status": self.status.value,
            "failure": self.failure.to_json() if self.failure else None,
            "figures": self.figures,
            **self.extras,
            "requests": list(self.requests),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = "run result") -> RunResult:
        r = _Reader(_parse(text_or_data, source), source)
        r.schema(RESULT_SCHEMA)
        failure = r.data.get("failure")
        requests = r.get("requests", list, optional=True, default=[])
        return cls(
            run_id=r.get("run_id", str),
            label=r.get("label", str),
            server_id=r.get("server_id", str),
            server_label=r.get("server_label", str, optional=True, default=""),
            sweep_id=r.get("sweep_id", str),
            host=r.get("host", str),
            status=r.enum("status", RunStatus),
            failure=Failure.from_json(failure, source) if failure is not None else None,
            figures=r.get("figures", dict),
            workload=r.get("workload", dict, optional=True, default={}),
            started_at=r.get("started_at", float),
            ended_at=r.get("ended_at", float),
            boot_id=r.get("boot_id", str, optional=True, default=""),
            attempt=r.get("attempt", int, optional=True, default=1),
            agent_pid=r.get("agent_pid", int, optional=True),
            gpus=tuple(r.get("gpus", list, optional=True, default=[])),
            server=r.get("server", dict, optional=True),
            log_path=r.get("log_path", str, optional=True),
            host_facts=r.get("host_facts", dict, optional=True),
            provenance=r.get("provenance", dict, optional=True),
            engine_release=r.get("engine_release", str, optional=True),
            requests=tuple(_Reader(q, source, f"requests[{i}]").data for i, q in enumerate(requests)),
            extras={k: v for k, v in r.data.items() if k not in _RESULT_FIELDS},
        )


def load_result(path: Path | str) -> RunResult:
    """A result file, checked: `ContractError` for a truncated file, another schema, a bad field."""
    return RunResult.from_json(_read(path), str(path))


# ---------------------------------------------------------------------------------- progress


class AgentState(str, Enum):
    running = "running"
    finished = "finished"  # every run has a result, all ok
    finished_with_errors = "finished_with_errors"  # every run has a result, some failed or the agent hit errors
    stopped = "stopped"  # told to stop (STOP file, SIGTERM): not a crash to undo

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

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "phase": self.phase.value, "run": self.run, "since": self.since}

    @classmethod
    def from_json(cls, data: object, source: str, prefix: str) -> ServerProgress:
        r = _Reader(data, source, prefix)
        return cls(r.get("label", str), r.enum("phase", ServerPhase), r.get("run", str, optional=True), r.get("since", float))


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
        r = _Reader(data, source, "last_error")
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
        r = _Reader(_parse(text_or_data, source), source)
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


# ---------------------------------------------------------------------------------- host quarantine


@dataclass(frozen=True)
class HostQuarantine:
    """`quarantine.json`: servers of this host that the controller quarantined while the sweep
    runs (server id -> reason); the agent reads it afresh before each launch and skips them."""

    reasons: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"schema": QUARANTINE_SCHEMA, "servers": dict(sorted(self.reasons.items()))}

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = SweepDir.QUARANTINE) -> HostQuarantine:
        r = _Reader(_parse(text_or_data, source), source)
        r.schema(QUARANTINE_SCHEMA)
        servers = r.child("servers")
        return cls({sid: servers.get(sid, str) for sid in servers.data})

    @classmethod
    def load(cls, path: Path | str) -> HostQuarantine:
        """The pushed file; none yet is an empty quarantine."""
        if not Path(path).exists():
            return cls()
        return cls.from_json(_read(path), str(path))
