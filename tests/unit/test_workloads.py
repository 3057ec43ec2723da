"""Workloads resolved for the shard: plain JSON, prompts from the repo's data files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.agent.driver import requests_at_level
from fleet.host.agent.stats import min_samples
from fleet.host.contract.shard import WORKLOAD_KINDS
from fleet.host.tokens import count_tokens
from fleet.playbook import expand_runs, load_playbook
from fleet.workloads import comparability_warnings, resolve_workload
from fleet.workloads.kinds import KINDS, LongContextWorkload, ShortWorkload, short_rounds
from fleet.workloads.library import MAX_CHARS_PER_TOKEN, corpus_slice, prompt_names
from fleet.errors import WorkloadError

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
    assert workload["turns"] == 6 and workload["sessions"] == 2  # 12 requests: enough for a p90
    assert '"name": "read_file"' in workload["system"] and "{tools}" not in workload["system"]
    assert all(isinstance(json.loads(result), dict) for result in workload["tool_results"])
    assert "{content}" in workload["chat"]["tool"]


def test_unknown_prompt_names_the_library() -> None:
    run = expand_runs(load_playbook(REPO / "playbooks" / "qwen36-specdec.yaml"))[0]
    # The playbook model refuses an unknown prompt (tests/unit/test_bad_input.py); built unchecked, the resolver still names the library.
    unchecked = ShortWorkload.model_construct(kind="short", prompts=["fib", "haiku"], max_new_tokens=256, requests=None)
    broken = type(run)(run.server, "short", unchecked, 1)
    with pytest.raises(WorkloadError, match=r"prompt 'haiku' is not in fleet's prompt library .*prompts.json\); known: arith, fib"):
        resolve_workload(broken)


def test_defaults_send_enough_requests_for_a_p90(seed: dict[str, dict]) -> None:
    p90 = min_samples(90)
    assert seed["short"]["rounds"] * len(seed["short"]["prompts"]) >= p90  # 3 rounds of the 4 prompts: 12
    assert seed["long_context"]["requests"] >= p90
    assert all(requests_at_level(level, None) >= p90 for level in (1, 2, 4, 48))
    assert requests_at_level(48, None) == 96 and requests_at_level(4, 3) == 3  # two rounds at 48; a playbook's count wins
    # Whole rounds, so that every prompt weighs the same; an explicit count is honoured upwards.
    assert short_rounds(ShortWorkload(kind="short", prompts=["fib", "json", "qsort"])) == 4
    assert short_rounds(ShortWorkload(kind="short", prompts=["fib"], requests=3)) == 3


def test_the_plan_warns_of_a_long_context_prompt_the_server_cannot_take() -> None:
    run = next(r for r in expand_runs(load_playbook(REPO / "playbooks" / "qwen36-specdec.yaml")) if r.workload_name == "long_context")
    (warning,) = comparability_warnings([run], context_len=32768, kv_tokens=1155)
    assert "long_context will be not_comparable" in warning and "30000-token prompt is cut to about 834" in warning
    assert "KV pool 1155" in warning
    assert comparability_warnings([run], context_len=32768, kv_tokens=169044) == []  # 30000 + 256 + 64 fit
    other = type(run)(run.server, "lc", LongContextWorkload(kind="long_context", prompt_tokens=30000), 1)
    assert comparability_warnings([other], context_len=16384, kv_tokens=169044)[0].startswith("lc will be not_comparable")


def test_the_controller_and_the_host_know_the_same_kinds() -> None:
    """A kind is one class on the controller (fleet.workloads.kinds, listed in WorkloadModel) and
    one name in the shard contract the agent checks (and drives)."""
    assert sorted(KINDS) == sorted(WORKLOAD_KINDS)
