"""Rough duration estimates, so the scheduler can put the longest work first and show an ETA.

The priors are not measurements: a single-stream decode rate per TP size taken from the seed
campaign (Qwen3.6-27B on RTX PRO 6000: ~26.5 tok/s autoregressive at TP1, ~143 tok/s for DDTree b15),
and a speed-up per decoding method. They only have to rank work and give an order of magnitude.
Measurements of earlier sweeps are the better source: `DurationHistory` (`results/durations.json`)
keeps the measured duration of each run (by run id) and each server start (by server id), and
`estimate_run` / `estimate_server_start` prefer them to the priors.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.host.agent.driver import requests_at_level
from fleet.host.agent.kinds.saturation import probes_needed
from fleet.host.atomic import write_json_atomic
from fleet.host.contract.reader import Reader, read_text
from fleet.planning.ids import IdCache
from fleet.playbook import Run, ServerConfig
from fleet.workloads.kinds import AgenticWorkload, ConcurrencyWorkload, DatasetWorkload, LongContextWorkload, RandomWorkload, ShortWorkload, short_rounds

AUTOREGRESSIVE_TOK_S = {1: 26.5, 2: 40.0, 4: 60.0, 8: 80.0}
# A dataset workload's prior, before a measurement: prompts of chat/benchmark sets run to about a
# thousand tokens; one that samples its whole file has about a hundred of them (MT-Bench 80).
DATASET_PROMPT_TOKENS = 1000
DATASET_REQUESTS = 100
METHOD_SPEEDUP = {None: 1.0, "DFLASH": 3.5, "DDTREE": 4.5, "EAGLE": 2.5, "EAGLE3": 3.0, "NGRAM": 1.5}
PREFILL_TOK_S = 8000.0  # per TP1 GPU; scales with TP
SERVER_START_S = {1: 150.0, 2: 180.0, 4: 240.0, 8: 300.0}
DEFAULT_SPEC_MAX_RUNNING = 48  # SGLang's default under speculative decoding
# With no max_running_requests set and no spec decoding SGLang derives it from the KV pool;
# 64 is a middle-of-the-road guess for the concurrency ladder's top rung.
DEFAULT_MAX_RUNNING = 64


def decode_tok_s(server: ServerConfig) -> float:
    base = AUTOREGRESSIVE_TOK_S.get(server.tp) or AUTOREGRESSIVE_TOK_S[1] * math.sqrt(server.tp)
    return base * METHOD_SPEEDUP.get(server.algorithm, 2.0)


def prefill_s(server: ServerConfig, tokens: int) -> float:
    return tokens / (PREFILL_TOK_S * server.tp**0.8)


def expected_max_running(server: ServerConfig) -> int:
    if server.settings.max_running_requests:
        return server.settings.max_running_requests
    return DEFAULT_SPEC_MAX_RUNNING if server.algorithm else DEFAULT_MAX_RUNNING


def concurrency_levels(run: Run, max_running: int | None = None) -> list[int]:
    workload = run.workload
    assert isinstance(workload, ConcurrencyWorkload)
    if workload.levels != "auto":
        return list(workload.levels)
    top = max_running or expected_max_running(run.server)
    levels, level = [], 1
    while level < top:
        levels.append(level)
        level *= 2
    levels.append(top)
    return levels


def _batched_rate(single: float, batch: int) -> float:
    """Per-stream decode rate at a batch size: decode is memory-bound, so a batch costs little more than one."""
    return single / (1.0 + 0.04 * (batch - 1))


def run_seconds(run: Run) -> float:
    """Estimated wall time of one run on a ready server, warm-up included."""
    rate = decode_tok_s(run.server)
    workload = run.workload
    warmup = 2.0
    if isinstance(workload, ShortWorkload):
        per = prefill_s(run.server, 200) + workload.max_new_tokens / rate
        body = per * len(workload.prompts) * short_rounds(workload)
    elif isinstance(workload, LongContextWorkload):
        body = workload.requests * (prefill_s(run.server, workload.prompt_tokens) + workload.max_new_tokens / rate)
    elif isinstance(workload, ConcurrencyWorkload):
        body = 0.0
        for level in concurrency_levels(run):
            requests = requests_at_level(level, workload.requests_per_level)
            rounds = math.ceil(requests / level)
            body += rounds * workload.max_new_tokens / _batched_rate(rate, level)
    elif isinstance(workload, AgenticWorkload):
        per_turn = prefill_s(run.server, 1500) + workload.max_new_tokens / rate
        body = workload.sessions * workload.turns * per_turn
    elif isinstance(workload, (DatasetWorkload, RandomWorkload)):
        prompt = workload.input_tokens if isinstance(workload, RandomWorkload) else DATASET_PROMPT_TOKENS
        requests = workload.requests or DATASET_REQUESTS  # a dataset's whole sample: its size is the file's
        per = prefill_s(run.server, prompt) + workload.max_new_tokens / rate
        load = workload.load
        # One at a time without a load; open-loop, the arrivals set the pace (the last request's
        # own time after the last arrival), warm-up requests one at a time first.
        if load is None:
            body = requests * per
        elif load.search is None:
            body = load.warmup_requests * per + requests / load.rate + per
        else:
            # A saturation search: up to probes_needed probes, each the requests once at its own
            # rate; where in the range they fall is not known before, so each at the range's
            # geometric middle (the bisection's first step in log space).
            low, high = load.search.rates
            probes = min(probes_needed(low, high, load.search.tolerance), load.search.max_probes)
            body = load.warmup_requests * per + probes * (requests / math.sqrt(low * high) + per)
    else:  # pragma: no cover - the union is closed
        raise TypeError(type(workload))
    return warmup + body * run.repeats


def server_start_seconds(server: ServerConfig) -> float:
    return SERVER_START_S.get(server.tp, 300.0)


# ------------------------------------------------------------------------------ measured durations

DURATIONS_SCHEMA = "fleet.durations/1"
# The latest measurements kept per key: enough for a median that one slow run does not move,
# few enough that an engine upgrade shows within a handful of sweeps.
KEEP_SAMPLES = 5


@dataclass(frozen=True)
class Sample:
    """One measured duration, in the engine's own time: wall seconds divided by the host's time
    scale (a sim host's `sim_speed`; 1 on real hardware), so that measurements taken at one
    `sim_speed` estimate a sweep at another, and real ones estimate real ones."""

    seconds: float
    sweep_id: str
    host: str

    def to_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "sweep_id": self.sweep_id, "host": self.host}

    @classmethod
    def from_json(cls, reader: Reader) -> Sample:
        seconds = reader.number("seconds", positive=False)
        if seconds < 0:
            raise reader.fail("seconds", "a duration >= 0 seconds", seconds)
        return cls(seconds, reader.get("sweep_id", str), reader.get("host", str))


@dataclass
class DurationHistory:
    """Measured durations of earlier sweeps: runs by run id (its id is a hash of what defines it, so
    a run measured before is the same work), server starts by server configuration id."""

    runs: dict[str, list[Sample]] = field(default_factory=dict)
    servers: dict[str, list[Sample]] = field(default_factory=dict)

    def run_seconds(self, run_id: str) -> tuple[float, int] | None:
        """The median measured duration of a run and how many measurements stand behind it."""
        return _median(self.runs.get(run_id))

    def server_seconds(self, server_id: str) -> tuple[float, int] | None:
        return _median(self.servers.get(server_id))

    def record_run(self, run_id: str, sample: Sample) -> None:
        _record(self.runs, run_id, sample)

    def record_server(self, server_id: str, sample: Sample) -> None:
        _record(self.servers, server_id, sample)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": DURATIONS_SCHEMA,
            "runs": {key: [s.to_json() for s in samples] for key, samples in sorted(self.runs.items())},
            "servers": {key: [s.to_json() for s in samples] for key, samples in sorted(self.servers.items())},
        }

    @classmethod
    def from_json(cls, data: object, source: str) -> DurationHistory:
        reader = Reader(data, source)
        reader.schema(DURATIONS_SCHEMA)
        history = cls()
        for section, target in (("runs", history.runs), ("servers", history.servers)):
            table = reader.child(section)
            for key in table.data:
                target[key] = [Sample.from_json(item) for item in table.children(key)]
        return history

    @classmethod
    def load(cls, path: Path) -> DurationHistory:
        """The history at `path`; empty where none was kept yet. A malformed file is a
        ContractError naming the file and the field (never silently replaced)."""
        if not path.exists():
            return cls()
        return cls.from_json(Reader.of(read_text(path), str(path)).data, str(path))

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())


def _median(samples: list[Sample] | None) -> tuple[float, int] | None:
    if not samples:
        return None
    return statistics.median(s.seconds for s in samples), len(samples)


def _record(table: dict[str, list[Sample]], key: str, sample: Sample) -> None:
    # A resumed sweep records again what it already recorded: one sample per sweep and key.
    kept = [s for s in table.get(key, []) if s.sweep_id != sample.sweep_id]
    table[key] = [*kept, sample][-KEEP_SAMPLES:]


@dataclass(frozen=True)
class Estimate:
    """An estimated duration in the engine's own time (the plan multiplies by a sim host's
    sim_speed), and the number of measurements behind it (0: the prior)."""

    seconds: float
    measured: int = 0


@dataclass(frozen=True)
class Calibration:
    """How far the priors are off, learned from the measured work of a plan: the median of
    measured / prior over its measured runs, per (decoding method, workload kind) and overall,
    and over its measured server starts, per TP size and overall. An unmeasured run or start is
    estimated by its prior times the factor of its group (else the overall one; 1 with no
    measurements): the priors rank the work, the measurements set its scale."""

    runs: dict[tuple[str | None, str], float] = field(default_factory=dict)
    run_overall: float = 1.0
    starts: dict[int, float] = field(default_factory=dict)
    start_overall: float = 1.0

    def run_factor(self, run: Run) -> float:
        return self.runs.get((run.server.algorithm, run.workload.kind), self.run_overall)

    def start_factor(self, server: ServerConfig) -> float:
        return self.starts.get(server.tp, self.start_overall)


def calibrate(runs: Sequence[Run], history: DurationHistory | None, ids: IdCache | None = None) -> Calibration:
    """The calibration of the priors by the measured durations of these runs and their servers."""
    if history is None:
        return Calibration()
    id_of = ids or IdCache()
    by_group: dict[tuple[str | None, str], list[float]] = {}
    by_tp: dict[int, list[float]] = {}
    servers: dict[str, ServerConfig] = {}
    for run in runs:
        servers[id_of(run.server)] = run.server
        found = history.run_seconds(id_of(run))
        if found is not None and run_seconds(run) > 0:
            by_group.setdefault((run.server.algorithm, run.workload.kind), []).append(found[0] / run_seconds(run))
    for server in servers.values():
        found = history.server_seconds(id_of(server))
        if found is not None:
            by_tp.setdefault(server.tp, []).append(found[0] / server_start_seconds(server))

    def overall(groups: Mapping[Any, list[float]]) -> float:
        ratios = [r for values in groups.values() for r in values]
        return statistics.median(ratios) if ratios else 1.0

    return Calibration(
        {k: statistics.median(v) for k, v in by_group.items()}, overall(by_group), {k: statistics.median(v) for k, v in by_tp.items()}, overall(by_tp),
    )  # fmt: skip


def estimate_run(run: Run, history: DurationHistory | None = None, calibration: Calibration | None = None, ids: IdCache | None = None) -> Estimate:
    """A run measured before is estimated by its measurements; an unmeasured one by the priors,
    calibrated by what was measured of its kind."""
    found = history.run_seconds(ids(run) if ids else run.id) if history is not None else None
    if found is not None:
        return Estimate(*found)
    return Estimate(run_seconds(run) * (calibration.run_factor(run) if calibration else 1.0))


def estimate_server_start(server: ServerConfig, history: DurationHistory | None = None, calibration: Calibration | None = None, ids: IdCache | None = None) -> Estimate:
    found = history.server_seconds(ids(server) if ids else server.id) if history is not None else None
    if found is not None:
        return Estimate(*found)
    return Estimate(server_start_seconds(server) * (calibration.start_factor(server) if calibration else 1.0))
