"""Workloads: a playbook run's workload resolved into the plain-JSON request plan of a shard.

Runs on the controller. The prompts are data (`fleet/workloads/data/`, see its README); what
depends on the server -- the long-context prompt size, the concurrency levels of `auto` -- is
left for the agent to settle on the host, where the server can be asked.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from fleet.errors import FleetError
from fleet.host.agent.drive import calibration_tolerance
from fleet.host.agent.stats import min_samples
from fleet.playbook import AgenticWorkload, ConcurrencyWorkload, DatasetWorkload, Load, LongContextWorkload, RandomWorkload, Run, ShortWorkload, Slo
from fleet.workloads.datasets import describe, sample_requests

DATA_DIR = Path(__file__).resolve().parent / "data"
# A generous bound on characters per token (real BPE on English and code: about 3-4.5), so that
# the corpus slice shipped in a shard holds at least the target number of tokens.
MAX_CHARS_PER_TOKEN = 8


class WorkloadError(FleetError):
    """A workload names something fleet's workload data does not have."""


@lru_cache(maxsize=None)
def _load(name: str) -> Any:
    path = DATA_DIR / name
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read workload data: {exc}") from exc


@lru_cache(maxsize=None)
def _corpus() -> str:
    return (DATA_DIR / _load("long_context.json")["corpus_file"]).read_text(encoding="utf-8")


def prompt_names() -> list[str]:
    """The names a playbook may use in `prompts:` (short) and `prompt:` (concurrency)."""
    return sorted(_load("prompts.json"))


def _prompt(workload_name: str, name: str) -> dict[str, str]:
    library = _load("prompts.json")
    if name not in library:
        raise WorkloadError(
            f"workload {workload_name!r}: prompt {name!r} is not in fleet's prompt library "
            f"({DATA_DIR / 'prompts.json'}); known: {', '.join(sorted(library))}"
        )
    return {"name": name, "category": library[name]["category"], "text": library[name]["text"]}


def corpus_slice(prompt_tokens: int) -> str:
    """Enough of the corpus for a prompt of `prompt_tokens` (the agent repeats it if the server
    counts fewer tokens than wanted, and shrinks it to size)."""
    return _corpus()[: prompt_tokens * MAX_CHARS_PER_TOKEN]


def short_rounds(workload: ShortWorkload) -> int:
    """Passes over a short workload's prompts per repeat: whole rounds, so that every prompt weighs
    the same, and at least `requests` (default: enough for a p90) requests in all."""
    wanted = workload.requests or min_samples(90)
    return -(-wanted // len(workload.prompts))


def _arrivals(load: Load | None, time_scale: float) -> dict[str, Any] | None:
    """Open-loop arrivals as the agent schedules them. `time_scale`: wall seconds per engine second
    (a sim host's sim_speed), so that a rate means the same in results, which are in engine time."""
    if load is None:
        return None
    return {**load.model_dump(), "time_scale": time_scale}


def _slo(slo: Slo | None) -> dict[str, float] | None:
    """SLOs in seconds, under vllm's metric names (ttft, tpot, e2el), only those set."""
    if slo is None:
        return None
    return {name: value for name, value in (("ttft", slo.ttft), ("tpot", slo.tpot), ("e2el", slo.e2e)) if value is not None}


def resolve_workload(run: Run, time_scale: float = 1.0) -> dict[str, Any]:
    """The run's workload as the shard carries it: plain JSON, everything the agent needs.
    `time_scale`: the host's wall seconds per engine second (sim_speed; 1 on real hardware)."""
    workload = run.workload
    base: dict[str, Any] = {"name": run.workload_name, "kind": workload.kind, "max_new_tokens": workload.max_new_tokens}
    if isinstance(workload, DatasetWorkload):
        samples = sample_requests(workload)
        return {
            **base,
            "dataset": describe(workload, samples),
            "samples": [{"prompt": s.prompt, "category": s.category, "output_tokens": s.output_tokens} for s in samples],
            "load": _arrivals(workload.load, time_scale),
            "slo": _slo(workload.slo),
        }
    if isinstance(workload, RandomWorkload):
        return {
            **base,
            "input_tokens": workload.input_tokens,
            "requests": workload.requests,
            "seed": workload.seed,
            "load": _arrivals(workload.load, time_scale),
            "slo": _slo(workload.slo),
        }
    if isinstance(workload, ShortWorkload):
        return {**base, "prompts": [_prompt(run.workload_name, name) for name in workload.prompts], "rounds": short_rounds(workload)}
    if isinstance(workload, LongContextWorkload):
        spec = _load("long_context.json")
        return {
            **base,
            "prompt_tokens": workload.prompt_tokens,
            "margin_tokens": workload.margin_tokens,
            "requests": workload.requests,
            "instruction": spec["instruction"],
            "question": spec["question"],
            "corpus": corpus_slice(workload.prompt_tokens),
        }
    if isinstance(workload, ConcurrencyWorkload):
        return {
            **base,
            "levels": workload.levels,
            "prompt": _prompt(run.workload_name, workload.prompt),
            "requests_per_level": workload.requests_per_level,
        }
    if isinstance(workload, AgenticWorkload):
        spec = _load("agentic.json")
        tools = "\n".join(json.dumps(tool, sort_keys=True) for tool in spec["tools"])
        return {
            **base,
            "turns": workload.turns,
            "sessions": workload.sessions,
            "chat": spec["chat"],
            "system": spec["system"].replace("{tools}", tools),
            "tasks": spec["tasks"],
            "tool_results": [json.dumps(result, sort_keys=True) for result in spec["tool_results"]],
        }
    raise WorkloadError(f"workload {run.workload_name!r}: unknown kind {workload.kind!r}")


def comparability_warnings(runs: Sequence[Run], context_len: int, kv_tokens: int) -> list[str]:
    """What the memory prediction says will make a run `not_comparable` before it starts: a
    long-context prompt that cannot fit the server's context or KV pool is cut on the host (the
    agent's calibration, fleet.host.agent.drive) -- its figures would describe a shorter prompt.
    SGLang takes prompts up to min(context_len, max_total_num_tokens) - 1 tokens."""
    room = min(context_len, kv_tokens) - 1
    warnings = []
    for run in runs:
        workload = run.workload
        if not isinstance(workload, LongContextWorkload):
            continue
        fits = room - workload.max_new_tokens - workload.margin_tokens
        if workload.prompt_tokens - fits > calibration_tolerance(workload.prompt_tokens):
            warnings.append(
                f"{run.workload_name} will be not_comparable: its {workload.prompt_tokens}-token prompt is cut to about "
                f"{max(fits, 0)} (the server takes {room} tokens: context {context_len}, KV pool {kv_tokens})"
            )
    return warnings
