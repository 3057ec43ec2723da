"""Rough duration estimates, so the scheduler can put the longest work first and show an ETA.

These are priors, not measurements: a single-stream decode rate per TP size taken from the seed
campaign (Qwen3.6-27B on RTX PRO 6000: ~26.5 tok/s autoregressive at TP1, ~143 tok/s for DDTree b15),
and a speed-up per decoding method. They only have to rank work and give an order of magnitude;
results of earlier sweeps are the better source once they exist.
"""

from __future__ import annotations

import math

from fleet.host.agent.drive import requests_at_level
from fleet.playbook import (
    AgenticWorkload,
    ConcurrencyWorkload,
    LongContextWorkload,
    Run,
    ServerConfig,
    ShortWorkload,
)
from fleet.workloads import short_rounds

AUTOREGRESSIVE_TOK_S = {1: 26.5, 2: 40.0, 4: 60.0, 8: 80.0}
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
    else:  # pragma: no cover - the union is closed
        raise TypeError(type(workload))
    return warmup + body * run.repeats


def server_start_seconds(server: ServerConfig) -> float:
    return SERVER_START_S.get(server.tp, 300.0)
