"""Workloads resolved for the shard: plain JSON, prompts from the repo's data files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.engines.sim.tokenizer import count_tokens
from fleet.playbook import ShortWorkload, expand_runs, load_playbook
from fleet.workloads import MAX_CHARS_PER_TOKEN, WorkloadError, corpus_slice, prompt_names, resolve_workload

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seed() -> dict[str, dict]:
    runs = [r for r in expand_runs(load_playbook(REPO / "playbooks" / "qwen36-specdec.yaml")) if r.server.label == "tp1-dflash"]
    return {run.workload_name: resolve_workload(run) for run in runs}


def test_resolved_workloads_are_plain_json(seed: dict[str, dict]) -> None:
    for name, workload in seed.items():
        assert json.loads(json.dumps(workload)) == workload
        assert workload["name"] == name and workload["kind"] == name and workload["max_new_tokens"] == 256


def test_short_carries_the_seed_prompts(seed: dict[str, dict]) -> None:
    assert [p["name"] for p in seed["short"]["prompts"]] == ["fib", "qsort", "arith", "json"]
    assert all(len(p["text"]) > 50 for p in seed["short"]["prompts"])
    assert {"fib", "qsort", "arith", "json"} <= set(prompt_names())


def test_long_context_ships_enough_corpus_for_its_target(seed: dict[str, dict]) -> None:
    workload = seed["long_context"]
    assert workload["prompt_tokens"] == 30000 and workload["margin_tokens"] == 64
    assert count_tokens(workload["corpus"]) > workload["prompt_tokens"]
    assert len(corpus_slice(1000)) == 1000 * MAX_CHARS_PER_TOKEN
    assert "def " in workload["corpus"] and "statement" in workload["corpus"]  # prose and code


def test_concurrency_leaves_auto_levels_to_the_host(seed: dict[str, dict]) -> None:
    workload = seed["concurrency"]
    assert workload["levels"] == "auto" and workload["requests_per_level"] is None
    assert workload["prompt"]["name"] == "qsort"


def test_agentic_turns_carry_tool_call_json(seed: dict[str, dict]) -> None:
    workload = seed["agentic"]
    assert workload["turns"] == 6 and workload["sessions"] == 1
    assert '"name": "read_file"' in workload["system"] and "{tools}" not in workload["system"]
    assert all(isinstance(json.loads(result), dict) for result in workload["tool_results"])
    assert "{content}" in workload["chat"]["tool"]


def test_unknown_prompt_names_the_library() -> None:
    run = expand_runs(load_playbook(REPO / "playbooks" / "qwen36-specdec.yaml"))[0]
    broken = type(run)(run.server, "short", ShortWorkload(kind="short", prompts=["fib", "haiku"]), 1)
    with pytest.raises(WorkloadError, match=r"prompt 'haiku' is not in fleet's prompt library .*prompts.json\); known: arith, fib"):
        resolve_workload(broken)
