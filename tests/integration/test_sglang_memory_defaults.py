"""fleet's defaults for launches that leave the memory settings unset -- mem_fraction_static,
chunked_prefill_size and the decode CUDA-graph max batch size -- against SGLang 0.5.23's OWN
`handle_gpu_memory_settings` (arg_groups/memory_hook.py:47-343), run on CPU (issue 26, Must-show 1).

Needs `pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==0.5.23`.

What runs from the wheel, in a child interpreter: `prepare_server_args` on each argv, the real
`cuda_graph_hook.parse_cuda_graph_config` and `memory_hook.handle_gpu_memory_settings` (with
`reserve_for_graph_mb`), in the pipeline's order (arg_groups/pipeline.py:172, :199: before the
speculative hook at :306, so a speculative launch's default of 48 requests is not yet set).
Stood in for, as a GPU host gives them: the device (`cuda`) and `utils.is_cuda` (the prefill graph's
default backend, cuda_graph_config.py:119-123), `get_device_memory_capacity` (the GPU's memory.total),
`model_config_of` / `use_mla_backend` (a dense, text-only, non-MLA model: transformers builds the real
one), and `qwen3_vl.expand_multimodal_decode_graph_to_running_limit` (a no-op for a text model).
Dense targets only: `apply_cuda_graph_compatibility`'s rules (cuda_graph_hook.py:136-330), which may
turn a hybrid model's prefill graph off, import the model configs through transformers.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from typing import Any

import pytest

from fleet.host.engines.sglang.args import fleet_values, memory_inputs, resolve_server_args
from fleet.host.engines.sglang.flags import parse_argv
from fleet.host.engines.sglang.memory import plan_memory
from fleet.host.modelcard import load_model_card
from tests.integration import sglang_wheel
from tests.integration.sglang_wheel import RELEASE

pytestmark = pytest.mark.sglang_parser

DENSE = load_model_card("llama-3.1-8b-instruct")
DRAFTS = {"DFLASH": load_model_card("qwen3.6-27b-dflash"), "EAGLE": dataclasses.replace(DENSE, name="eagle-draft-1-layer", num_hidden_layers=1, weights_bytes=1_000_000_000)}
# nvidia-smi memory.total of GPUs across memory_hook.py's buckets (<20, <35, <60, <90, <160, larger GiB).
GPUS = {"T4": 15360, "RTX 5090": 32607, "A100-40GB": 40960, "L40S": 46068, "H100": 81559, "RTX PRO 6000": 97887, "H200": 143771, "B200": 183359}
TPS = (1, 2, 4, 8)
METHODS: dict[str, list[str]] = {
    "ar": [],
    "EAGLE": ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/models/draft", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"],
    "DFLASH": ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/draft", "--speculative-num-draft-tokens", "16"],
}
OTHERS: tuple[list[str], ...] = (
    [],
    ["--max-running-requests", "16"],
    ["--max-running-requests", "300"],
    ["--cuda-graph-backend-decode", "disabled"],
    ["--chunked-prefill-size", "2048", "--max-running-requests", "8"],
    ["--cuda-graph-max-bs-decode", "64"],
    ["--disable-cuda-graph"],
)
FIELDS = ("mem_fraction_static", "chunked_prefill_size", "cuda_graph_max_bs")


def grid() -> list[dict[str, Any]]:
    cases = []
    for (gpu, total), tp, (method, flags), others in itertools.product(GPUS.items(), TPS, METHODS.items(), OTHERS):
        argv = ["--model-path", "/models/llama", "--tp-size", str(tp), "--context-length", "8192", *flags, *others]
        cases.append({"name": f"{gpu}/tp{tp}/{method}/{' '.join(others) or '-'}", "gpu_memory_mib": total, "method": method, "argv": argv})
    return cases


def fleet_defaults(case: dict[str, Any]) -> dict[str, Any]:
    draft = DRAFTS.get(case["method"])
    resolved = resolve_server_args(fleet_values(parse_argv(RELEASE, case["argv"])), DENSE, draft, {}, 0, release=RELEASE)
    assert resolved.failure is None, f"{case['name']}: {resolved.failure}"
    plan = plan_memory(DENSE, memory_inputs(resolved, gpu_memory_mib=case["gpu_memory_mib"], release=RELEASE), draft)
    return {name: getattr(plan, name) for name in FIELDS}


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    cases = grid()
    answer = sglang_wheel.run_child(__file__, cases, "upstream memory settings")
    return {"version": answer["version"], "cases": cases, "results": answer["results"]}


def test_the_upstream_code_is_the_pinned_release(upstream: dict[str, Any]) -> None:
    assert upstream["version"] == RELEASE


def test_fleet_defaults_the_memory_settings_as_0523(upstream: dict[str, Any]) -> None:
    mismatches = []
    for case in upstream["cases"]:
        theirs, ours = upstream["results"][case["name"]], fleet_defaults(case)
        if theirs != ours:
            mismatches.append(f"{case['name']}: 0.5.23 {theirs}, fleet {ours}")
    assert not mismatches, f"{len(mismatches)} of {len(upstream['cases'])} cases differ:\n" + "\n".join(mismatches[:30])


def test_the_grid_spans_every_gpu_bucket(upstream: dict[str, Any]) -> None:
    fractions = {result["mem_fraction_static"] for result in upstream["results"].values()}
    chunked = {result["chunked_prefill_size"] for result in upstream["results"].values()}
    assert len(fractions) >= 30 and {2048, 4096, 8192, 16384} <= chunked, (sorted(fractions), sorted(chunked))


# ---------------------------------------------------------------------------------------------
# The child: 0.5.23's own memory settings for each argv, as JSON.


def _child(cases: list[dict[str, Any]]) -> dict[str, Any]:
    from importlib.metadata import version

    return {"version": version("sglang"), "results": {case["name"]: sglang_wheel.memory_settings(case["argv"], case["gpu_memory_mib"]) for case in cases}}


if __name__ == "__main__":
    json.dump(_child(json.load(sys.stdin)), sys.stdout)
