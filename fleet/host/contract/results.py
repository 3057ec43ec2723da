"""`runs/<run-id>.json`: one run's outcome, written once by the agent, atomically.

Schema 2 (from 1): the status `not_comparable` and its `deviations`; `sim_speed`; durations and
rates of a simulated run in simulated time; percentiles null below their sample size and every
latency summary with its `n` (fleet.host.agent.stats); per-level figures of a concurrency run
in its `levels` section with no blended throughput at the top; the acceptance length without the
prefill token (fleet.host.agent.results). A reader of schema 1 would misread all of these.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from fleet.host.contract.reader import Decoder, Reader, json_decode, parse_untrusted, read_text
from fleet.host.errors import ContractError
from fleet.host.failures import VALUES as FAILURE_CLASSES
from fleet.host.engines import DEFAULT_ENGINE, ENGINE_NAMES

RESULT_SCHEMA = "fleet.run_result/2"

# Who sent a run's requests and measured them: fleet's own client, or a field's load generator the
# workload named (fleet.host.agent.tools.TOOLS, one entry each). A result that names no client is
# fleet's: every result written before there were others (an optional field: schema 2 still).
FLEET_CLIENT = "fleet"
CLIENTS = (FLEET_CLIENT, "bench_serving", "vllm_bench_serve", "aiperf", "guidellm")

# A result is what a host sends back, so untrusted (fleet.host.contract.reader): these bounds keep
# a forged or corrupt one from steering a path, a terminal or a mean.
RESULT_MAX_BYTES = 32 << 20  # thousands of requests' records are a few MiB
# Ids and names become file and folder names on the controller: one path component, no `..`.
_IDENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+:=-]{0,199}")
# No number in a result is larger: timestamps are ~1e9 s, token counts of one run far below.
MAX_MAGNITUDE = 1e12
# A rate no server reaches (a whole H200 node serves ~1e5 tok/s): above it a figure is forged or broken.
MAX_RATE = 1e8
_RATE_KEYS = re.compile(r"(tok_s|throughput)(_per_\w+)?$")


class RunStatus(str, Enum):
    """How a run ended. Only an `ok` run's figures are measurements of its workload as defined:
    `partial` and `not_comparable` runs keep what they measured, for the record, but a report must
    never show those figures beside comparable ones."""

    ok = "ok"
    partial = "partial"  # some requests failed
    failed = "failed"  # none succeeded, or none produced a token
    skipped = "skipped"  # the controller chose not to launch it (quarantine, infeasible)
    # Every request succeeded, but the workload did not run as defined (prompt cut, output
    # capped, requests dropped): `deviations` say how.
    not_comparable = "not_comparable"

    @property
    def has_figures(self) -> bool:
        """Whether the result holds figures at all (measured from some successful requests)."""
        return self in (RunStatus.ok, RunStatus.partial, RunStatus.not_comparable)

    @property
    def comparable(self) -> bool:
        """Whether its figures measure the workload as the playbook defines it."""
        return self is RunStatus.ok


@dataclass(frozen=True)
class Deviation:
    """How a run departed from its workload's definition, which makes it `not_comparable`."""

    kind: str  # fleet.host.agent.results: PROMPT_CUT, OUTPUT_CAPPED, REQUESTS_DROPPED, AGENT_PAUSED
    message: str  # with the figures it rests on: "prompt cut to 820 of 30000 tokens: ..."

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message}

    @classmethod
    def from_json(cls, data: object, source: str, prefix: str) -> Deviation:
        r = Reader(data, source, prefix)
        return cls(kind=r.get("kind", str), message=r.get("message", str))


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
        error_class = r.get("class", str)
        if error_class not in FAILURE_CLASSES:  # one vocabulary: fleet.host.failures
            raise r.fail("class", "a failure class of fleet.host.failures.FailureClass", error_class)
        return cls(
            error_class=error_class,
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
    "host_facts provenance engine engine_release client sim_speed workload status failure deviations figures requests started_at ended_at".split()
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
    server: dict[str, Any] | None = None  # what the server said of itself (fleet.host.agent.driver.ServerFacts)
    log_path: str | None = None
    host_facts: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None  # a fixed variant: what it fixes and why
    # The engine that served it and its release (or the one the sim played). A result that names no
    # engine is SGLang's: every result written before engines were an axis.
    engine: str = DEFAULT_ENGINE
    engine_release: str | None = None
    client: str = FLEET_CLIENT  # who measured it (CLIENTS)
    # The simulator's time scale (wall seconds per simulated second); None on real hardware. A
    # simulated run's durations and rates are in simulated time already.
    sim_speed: float | None = None
    deviations: tuple[Deviation, ...] = ()
    requests: tuple[dict[str, Any], ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def simulated(self) -> bool:
        return self.sim_speed is not None

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
            "engine": self.engine,
            "engine_release": self.engine_release,
            "client": self.client,
            "sim_speed": self.sim_speed,
            "workload": self.workload,
            "status": self.status.value,
            "failure": self.failure.to_json() if self.failure else None,
            "deviations": [d.to_json() for d in self.deviations],
            "figures": self.figures,
            **self.extras,
            "requests": list(self.requests),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = "run result", decode: Decoder = json_decode) -> RunResult:
        # Bounded, strings printable, every number finite and within MAX_MAGNITUDE (a forged 1e308
        # printed as a mean): in one pass where it can be, through `decode` (fleet.host.contract.reader.Decoder).
        r = Reader(parse_untrusted(text_or_data, source, MAX_MAGNITUDE, decode=decode), source)
        r.schema(RESULT_SCHEMA)
        for key in ("run_id", "server_id", "sweep_id", "host"):
            value = r.get(key, str)
            if not _IDENT.fullmatch(value) or ".." in value:
                raise r.fail(key, "an id of letters, digits and ._@+:=- (one path component, at most 200 characters)", value[:80])
        _check_figures(r.get("figures", dict), source, "figures")
        failure = r.data.get("failure")
        requests = r.get("requests", list, default=[])
        deviations = r.get("deviations", list, default=[])
        sim_speed = r.optional("sim_speed", float, "a positive time scale or null")
        if sim_speed is not None and sim_speed <= 0:
            raise ContractError(source, "sim_speed", "a positive time scale or null", sim_speed)
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
            engine=r.choice("engine", ENGINE_NAMES, DEFAULT_ENGINE),
            engine_release=r.optional("engine_release", str),
            client=r.choice("client", CLIENTS, FLEET_CLIENT),
            sim_speed=sim_speed,
            deviations=tuple(Deviation.from_json(d, source, f"deviations[{i}]") for i, d in enumerate(deviations)),
            # Each an object (Reader names the first that is not; made only then: thousands of requests).
            requests=tuple(q if type(q) is dict else Reader(q, source, f"requests[{i}]").data for i, q in enumerate(requests)),
            extras={k: v for k, v in r.data.items() if k not in _RESULT_FIELDS},
        )


def _check_figures(figures: Mapping[str, Any], source: str, where: str) -> None:
    """Figures are measurements: none negative, no rate beyond what any server reaches."""
    for key, value in figures.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if value < 0:
                raise ContractError(source, f"{where}.{key}", "a measurement >= 0", value)
            if value > MAX_RATE and _RATE_KEYS.search(key):
                raise ContractError(source, f"{where}.{key}", f"a rate of at most {MAX_RATE:g} per second", f"{value:.3g}")
        elif isinstance(value, dict) or isinstance(value, Mapping):  # a dict first: the abstract check costs more
            _check_figures(value, source, f"{where}.{key}")


def load_result(path: Path | str, decode: Decoder = json_decode) -> RunResult:
    """A result file, checked: `ContractError` for a truncated or oversized file, one that is not
    a regular file or not UTF-8, another schema, a bad field, or a run id other than its name's.
    `decode`: the checked reader's parser (RunResult.from_json)."""
    result = RunResult.from_json(read_text(path, RESULT_MAX_BYTES), str(path), decode)
    name = os.path.basename(path)
    if name != f"{result.run_id}.json":
        raise ContractError(str(path), "run_id", f"the run id the file is named after ({name.removesuffix('.json')})", result.run_id)
    return result
