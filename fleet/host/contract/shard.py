"""The shard: what one host's agent must do in one sweep. Written by the controller as
`<work_dir>/sweeps/<sweep_id>/shard.json`, read by the agent.

The controller asks for GPUs by count; the agent places (`fleet.host.agent.dispatch`). `gpus` of
the shard is the pool: the host's GPUs the agent may hand out (under Slurm: exactly the GPUs the
job was granted). A server's `gpus` are where the controller's plan put it: their number is what
the server needs, the indexes only a hint (they were never a promise: a server starts on whichever
block of the pool frees first, and its results name the GPUs it really ran on). Servers are listed
in the controller's order, with `estimate_s`, the controller's estimate of a server's whole work
(start-up and runs, wall seconds on this host), which the agent uses to choose what to start next.
`exclusive` (the playbook's `isolation: exclusive`): one server at a time on the host. Each run
carries its workload already resolved into a plain request plan (`fleet.workloads.resolve_workload`),
so the agent needs no prompt library of its own.

Format 2 (format 1 fixed every server's GPUs and chained servers sharing them with `after`).

A shard grows while its agent runs: the controller may rewrite `shard.json` (atomically) with
servers appended -- a failed server's fixed variant starts on the next free GPUs of the running
agent instead of in a later round. Nothing else changes: same sweep, host, format, service
manager, limits, pool and isolation, every server the agent knows unchanged and in its place, new
servers only after them (`grown_servers`). Removal stays the hand-over's job (below): a server
the agent released may be gone from the new shard, or have fewer runs (the controller keeps only
the runs it has results for), and is never started either way. The agent refuses any other change
with an error in its log and works on with what it has; the controller's saved shard stays the
truth, shipped whole before any agent starts (a resume, a repair round, after a reboot).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from fleet.host.contract.layout import SweepDir
from fleet.host.contract.reader import Reader, collector_paused, parse_json
from fleet.host.errors import ContractError
from fleet.host.engines import DEFAULT_ENGINE, ENGINE_NAMES

SHARD_FORMAT = 2
SERVICE_MANAGERS = ("systemd", "process")
API_KINDS = ("generate", "completions")
WORKLOAD_KINDS = ("short", "long_context", "concurrency", "agentic", "dataset", "random")


@dataclass(frozen=True)
class AgentLimits:
    server_start_timeout_s: float = 1200.0
    request_timeout_s: float = 600.0
    no_token_timeout_s: float = 120.0


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    label: str
    workload: dict[str, Any]  # a resolved workload: {"name", "kind", ...}; see fleet.workloads
    repeats: int = 1
    # For a variant fleet made to fix a failure: what it fixes (original config, class, fix, attempt).
    provenance: dict[str, Any] | None = None


@dataclass(frozen=True)
class ServerSpec:
    server_id: str
    label: str
    gpus: list[int]  # the plan's GPUs: how many the server needs, and a hint of where (see above)
    port: int
    argv: list[str]  # ignored under systemd: the controller bakes it into the installed unit
    env: dict[str, str]  # its CUDA_VISIBLE_DEVICES is replaced by the GPUs the agent places it on
    unit_name: str
    runs: list[RunSpec] = field(default_factory=list)
    api: Literal["generate", "completions"] = "generate"
    cwd: str | None = None
    # Set by the controller for a configuration it will not launch (quarantined, predicted to fail):
    # the agent writes a `skipped` result with this reason for each of its runs.
    skip_reason: str | None = None
    # The engine that serves it (fleet.host.engines.ENGINE_NAMES) and its release as planned (or the
    # one the sim plays); copied into its results. A shard that names no engine is SGLang's.
    engine: str = DEFAULT_ENGINE
    engine_release: str | None = None
    # The controller's estimate of the server's whole work (start-up and runs), wall seconds; None: none.
    estimate_s: float | None = None

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def log_name(self) -> str:
        """The server's log file under `<sweep_dir>/logs/`: the agent tails it, so a systemd unit
        must write there too."""
        return self.label.replace("/", "_") + ".log"


@dataclass(frozen=True)
class Shard:
    sweep_id: str
    host: str
    boot_id: str  # the host's boot id when the controller wrote the shard
    service_manager: Literal["systemd", "process"]
    limits: AgentLimits
    servers: list[ServerSpec]
    gpus: list[int] | None = None  # the pool; None: the GPUs the servers' hints name (a Slurm task's grant)
    exclusive: bool = False
    format: int = SHARD_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = SweepDir.SHARD) -> Shard:
        with collector_paused():  # a shard of 50,000 runs: 6 full collections, a third of its read
            return shard_from_dict(parse_json(text, source), source)

    @property
    def runs(self) -> list[tuple[ServerSpec, RunSpec]]:
        return [(server, run) for server in self.servers for run in server.runs]

    @property
    def run_count(self) -> int:
        """len(runs), without building the list: the sweep loop asks at every poll."""
        return sum(len(server.runs) for server in self.servers)

    @property
    def pool(self) -> tuple[int, ...]:
        """The GPUs the agent may place servers on, in ascending order."""
        if self.gpus is not None:
            return tuple(sorted(set(self.gpus)))
        return tuple(sorted({gpu for server in self.servers for gpu in server.gpus}))


def _limits(reader: Reader) -> AgentLimits:
    defaults = AgentLimits()
    return AgentLimits(
        server_start_timeout_s=reader.number("server_start_timeout_s", defaults.server_start_timeout_s),
        request_timeout_s=reader.number("request_timeout_s", defaults.request_timeout_s),
        no_token_timeout_s=reader.number("no_token_timeout_s", defaults.no_token_timeout_s),
    )


def _run(reader: Reader) -> RunSpec:
    workload = reader.child("workload")
    workload.text("name")
    workload.choice("kind", WORKLOAD_KINDS)
    repeats = reader.get("repeats", int, "an integer >= 1", 1)
    if repeats < 1:
        raise reader.fail("repeats", "an integer >= 1", repeats)
    provenance = reader.get("provenance", (dict, type(None)), "an object or null", None)
    return RunSpec(run_id=reader.text("run_id"), label=reader.text("label"), workload=dict(workload.data), repeats=repeats, provenance=provenance)


def _gpu_list(reader: Reader, key: str, *, required: bool) -> list[int] | None:
    if required:
        gpus = reader.get(key, list, "a list of GPU indexes")
    else:
        gpus = reader.get(key, (list, type(None)), "a list of GPU indexes or null", None)
        if gpus is None:
            return None
    if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise reader.fail(key, "a list of distinct GPU indexes (integers >= 0)", gpus)
    return list(gpus)


def _server(reader: Reader) -> ServerSpec:
    gpus = _gpu_list(reader, "gpus", required=True)
    assert gpus is not None
    if not gpus:
        raise reader.fail("gpus", "at least one GPU (the count is what the server needs)", gpus)
    estimate = reader.get("estimate_s", (int, float, type(None)), "seconds (a number >= 0) or null", None)
    if estimate is not None and (isinstance(estimate, bool) or estimate < 0):
        raise reader.fail("estimate_s", "seconds (a number >= 0) or null", estimate)
    port = reader.get("port", int, "a TCP port")
    if not 0 < port < 65536:
        raise reader.fail("port", "a TCP port (1-65535)", port)
    env = reader.get("env", dict, "an object of strings", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise reader.fail("env", "an object of string values", env)
    return ServerSpec(
        server_id=reader.text("server_id"),
        label=reader.text("label"),
        gpus=list(gpus),
        port=port,
        argv=reader.strings("argv"),
        env=dict(env),
        unit_name=reader.text("unit_name"),
        runs=[_run(run) for run in reader.children("runs")],
        api=reader.choice("api", API_KINDS, "generate"),  # type: ignore[arg-type]
        cwd=reader.get("cwd", (str, type(None)), "a directory or null", None),
        skip_reason=reader.get("skip_reason", (str, type(None)), "a reason or null", None),
        engine=reader.choice("engine", ENGINE_NAMES, DEFAULT_ENGINE),
        engine_release=reader.get("engine_release", (str, type(None)), "a release such as 0.5.23, or null", None),
        estimate_s=float(estimate) if estimate is not None else None,
    )


def shard_from_dict(data: Any, source: str = SweepDir.SHARD) -> Shard:
    reader = Reader(data, source)
    version = reader.get("format", int, f"shard format {SHARD_FORMAT}", SHARD_FORMAT)
    if version != SHARD_FORMAT:
        raise reader.fail("format", f"shard format {SHARD_FORMAT} (agent and controller differ in version)", version)
    servers = [_server(server) for server in reader.children("servers")]
    shard = Shard(
        sweep_id=reader.text("sweep_id"),
        host=reader.text("host"),
        boot_id=reader.get("boot_id", str, "the host's boot id"),
        service_manager=reader.choice("service_manager", SERVICE_MANAGERS),  # type: ignore[arg-type]
        limits=_limits(reader.child("limits")) if "limits" in reader.data else AgentLimits(),
        servers=servers,
        gpus=_gpu_list(reader, "gpus", required=False),
        exclusive=reader.get("exclusive", bool, "true or false", False),
    )
    _check_references(shard, source)
    return shard


def _repeated(values: Iterable[str]) -> list[str]:
    """The values that occur more than once, sorted: counted in one pass (a `list.count` per value
    made reading a shard of 50,000 runs take 80 s)."""
    return sorted(value for value, times in Counter(values).items() if times > 1)


def _check_references(shard: Shard, source: str) -> None:
    duplicates = _repeated(server.server_id for server in shard.servers)
    if duplicates:
        raise ContractError(source, "servers", f"distinct server_id values (duplicates: {duplicates})")
    duplicate_runs = _repeated(run.run_id for _, run in shard.runs)
    if duplicate_runs:
        raise ContractError(source, "servers[].runs", f"distinct run_id values (duplicates: {duplicate_runs})")
    pool = set(shard.pool)
    for index, server in enumerate(shard.servers):
        if not set(server.gpus) <= pool:
            # A hint outside the pool, or a server wider than it: it could never be placed.
            raise ContractError(source, f"servers[{index}].gpus", f"GPUs of the shard's pool {sorted(pool)}", server.gpus)


# ------------------------------------------------------------------------------ growth

# What a grown shard must keep as it was (everything but the servers and the boot id, which names
# the boot the controller wrote it on: a resume after a reboot writes a new one).
_FIXED_FIELDS = ("sweep_id", "host", "service_manager", "limits", "gpus", "exclusive", "format")


def grown_servers(old: Shard, new: Shard, released: frozenset[str] | set[str] = frozenset(), source: str = SweepDir.SHARD) -> list[ServerSpec]:
    """The servers `new` appends to `old` (the agent's shard), or `ContractError` naming what else
    changed. `released`: servers the agent handed back (`HandoverAnswer.released`), which `new`
    may lack or have changed (the hand-over removed them; the agent starts them never)."""
    for name in _FIXED_FIELDS:
        if getattr(new, name) != getattr(old, name):
            raise ContractError(source, name, f"{getattr(old, name)!r} as when the agent started (a shard only grows)", getattr(new, name))
    by_id = {server.server_id: server for server in new.servers}
    kept = [server for server in old.servers if server.server_id not in released]
    for server in kept:
        if server.server_id not in by_id:
            raise ContractError(source, "servers", f"server {server.server_id} still there (only the hand-over removes servers)", "absent")
        if by_id[server.server_id] != server:
            raise ContractError(source, f"servers[{server.server_id}]", "unchanged (a shard only grows: new servers are appended)", "changed")
    known = {server.server_id for server in old.servers}
    # The kept servers, in their order, then only new ones: a released server may stay where it was.
    remaining = [server for server in new.servers if server.server_id not in released or server.server_id not in known]
    if [server.server_id for server in remaining[: len(kept)]] != [server.server_id for server in kept]:
        raise ContractError(source, "servers", "the agent's servers first, in their order, new servers after them", [s.server_id for s in new.servers])
    # (A released server's id stays the hand-over's: the controller never appends a new server under it.)
    return remaining[len(kept) :]


# ------------------------------------------------------------------------------ hand-over
#
# How queued servers move from one host's shard to another's while both agents work (the tail of
# a sweep), without a run ever running twice or not at all. The controller asks; only the agent
# decides, because only it knows, at the moment it would start a server, whether it has:
# - the controller adds server ids to `handover.json` (`HandoverRequest`, cumulative);
# - the agent, in its loop and before it starts any server, answers in `released.json`
#   (`HandoverAnswer`, cumulative): a requested server it has not started is `released` (it
#   never starts it, nor writes a result for it); one it has started is `kept`;
# - the controller moves only what the answer releases, and only the released servers' runs
#   that have no result yet; it never moves a server the agent kept or has not answered for.
# A lost host cannot answer: the controller moves what has no result pulled and never pulls from
# that host again, so a late result there cannot make a duplicate.

HANDOVER_SCHEMA = "fleet.handover/1"
HANDOVER_ANSWER_SCHEMA = "fleet.handover_answer/1"


@dataclass(frozen=True)
class HandoverRequest:
    """`handover.json`, written by the controller: servers it wants back."""

    servers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"schema": HANDOVER_SCHEMA, "servers": sorted(set(self.servers))}

    @classmethod
    def from_json(cls, text_or_data: str | bytes | dict[str, Any], source: str = SweepDir.HANDOVER) -> HandoverRequest:
        reader = Reader(parse_json(text_or_data, source), source)
        reader.schema(HANDOVER_SCHEMA)
        return cls(tuple(reader.strings("servers", [])))


@dataclass(frozen=True)
class HandoverAnswer:
    """`released.json`, written by the agent: what it did with each requested server."""

    released: tuple[str, ...] = ()  # never started by this agent, and never will be
    kept: tuple[str, ...] = ()  # already started when the request came: it runs here

    @property
    def answered(self) -> frozenset[str]:
        return frozenset(self.released) | frozenset(self.kept)

    def to_json(self) -> dict[str, Any]:
        return {"schema": HANDOVER_ANSWER_SCHEMA, "released": sorted(set(self.released)), "kept": sorted(set(self.kept))}

    @classmethod
    def from_json(cls, text_or_data: str | bytes | dict[str, Any], source: str = SweepDir.HANDOVER_ANSWER) -> HandoverAnswer:
        reader = Reader(parse_json(text_or_data, source), source)
        reader.schema(HANDOVER_ANSWER_SCHEMA)
        return cls(tuple(reader.strings("released", [])), tuple(reader.strings("kept", [])))


def without_servers(shard: Shard, server_ids: set[str] | frozenset[str]) -> Shard:
    """The shard less some servers (handed over)."""
    return replace(shard, servers=[server for server in shard.servers if server.server_id not in server_ids])
