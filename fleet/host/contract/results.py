"""`runs/<run-id>.json`: one run's outcome, written once by the agent, atomically."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from fleet.host.contract.reader import Reader, read_text

RESULT_SCHEMA = "fleet.run_result/1"


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
        r = Reader(data, source, prefix)
        evidence = r.get("evidence", list, default=[])
        return cls(
            error_class=r.get("class", str),
            message=r.get("message", str),
            evidence=tuple(str(line) for line in evidence),
            log_path=r.optional("log_path", str),
            exit_code=r.optional("exit_code", int),
            diagnosis=r.optional("diagnosis", dict),
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
        r = Reader.of(text_or_data, source)
        r.schema(RESULT_SCHEMA)
        failure = r.data.get("failure")
        requests = r.get("requests", list, default=[])
        return cls(
            run_id=r.get("run_id", str),
            label=r.get("label", str),
            server_id=r.get("server_id", str),
            server_label=r.get("server_label", str, default=""),
            sweep_id=r.get("sweep_id", str),
            host=r.get("host", str),
            status=r.enum("status", RunStatus),
            failure=Failure.from_json(failure, source) if failure is not None else None,
            figures=r.get("figures", dict),
            workload=r.get("workload", dict, default={}),
            started_at=r.get("started_at", float),
            ended_at=r.get("ended_at", float),
            boot_id=r.get("boot_id", str, default=""),
            attempt=r.get("attempt", int, default=1),
            agent_pid=r.optional("agent_pid", int),
            gpus=tuple(r.get("gpus", list, default=[])),
            server=r.optional("server", dict),
            log_path=r.optional("log_path", str),
            host_facts=r.optional("host_facts", dict),
            provenance=r.optional("provenance", dict),
            engine_release=r.optional("engine_release", str),
            requests=tuple(Reader(q, source, f"requests[{i}]").data for i, q in enumerate(requests)),
            extras={k: v for k, v in r.data.items() if k not in _RESULT_FIELDS},
        )


def load_result(path: Path | str) -> RunResult:
    """A result file, checked: `ContractError` for a truncated file, another schema, a bad field."""
    return RunResult.from_json(read_text(path), str(path))
