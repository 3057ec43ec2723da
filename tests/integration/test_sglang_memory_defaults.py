"""fleet's defaults for launches that leave the memory settings unset -- mem_fraction_static,
chunked_prefill_size and the decode CUDA-graph max batch size -- against SGLang 0.5.23's OWN
`handle_gpu_memory_settings` (arg_groups/memory_hook.py:47-343), run on CPU (issue 26, Must-show 1).

Needs `pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==0.5.23`.

What runs from the wheel, in a child interpreter: `prepare_server_args` on each argv, the real
`cuda_graph_hook` resolution of the graph backends (`apply_inkling_prefill_cuda_graph_default`,
`apply_muse_glimmer_prefill_cuda_graph_max_bs_default`, `handle_cuda_graph_config`: the parse and
`apply_cuda_graph_compatibility`'s rules, cuda_graph_hook.py:136-255, which turn a multimodal model's
breakable prefill graph off unless its architecture is on the allowlist, model_config.py:2501-2516) and
`memory_hook.handle_gpu_memory_settings` (with `reserve_for_graph_mb`, 8 MiB per prefill capture size
while the prefill graph is on, memory_hook.py:381-388, and `adjust_mem_fraction_for_vlm`), in the
pipeline's order (arg_groups/pipeline.py:184-189, :199: before the speculative hook at :306, so a
speculative launch's default of 48 requests is not yet set). The architecture checks those rules
import -- configs/model_config.py:174-190 `_hf_arch`/`_hf_attr`, :230-252 `uses_kda_attention`,
:395-400 `is_deepseek_v4`, :2391-2530 `is_multimodal_model`, :2501-2516 with :2584-2589
`is_multimodal_breakable_cuda_graph_supported` -- are compiled from the wheel's source
(sglang_wheel.compile_from_wheel); `layers/cp/bcg` (the context-parallel rule) is imported as is.

Stood in for, as a GPU host gives them (sglang_wheel.memory_settings): the device (`cuda`) and
`utils.is_cuda` (the prefill graph's default backend, cuda_graph_config.py:119-123),
`get_device_memory_capacity` (the GPU's memory.total), `model_config_of` (ModelConfig,
model_config.py:566-1010, is built through transformers: sglang_wheel._model_config builds the fields
the hooks read from the card, as transformers loads its config.json, with the compiled checks above),
`use_mla_backend` (neither card is MLA), and `qwen3_vl.expand_multimodal_decode_graph_to_running_limit`
(a no-op outside model types qwen3_vl / qwen3_vl_moe, model_overrides/qwen3_vl.py:17, :53).

Cards: the dense one (llama-3.1-8b-instruct), the hybrid multimodal one (qwen3.6-27b,
Qwen3_5ForConditionalGeneration, on the allowlist: its prefill graph is kept and reserved), and that card
under an architecture off the allowlist (Qwen2_5_VLForConditionalGeneration, model_config.py:2436: its
prefill graph is turned off), so both outcomes of the multimodal rule are compared.
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
from fleet.host.engines.sglang.memory import RULES, plan_memory
from fleet.host.modelcard import ModelCard, load_model_card
from tests.integration import sglang_wheel
from tests.integration.sglang_wheel import RELEASE
from tests.integration.test_memory_differential import card_fields

pytestmark = [pytest.mark.sglang_parser, pytest.mark.timeout(sglang_wheel.CHILD_TEST_TIMEOUT_S)]

DENSE = load_model_card("llama-3.1-8b-instruct")
HYBRID = load_model_card("qwen3.6-27b")
# The hybrid multimodal card under a multimodal architecture that 0.5.23 does not allow breakable prefill graphs.
UNLISTED_VLM = dataclasses.replace(HYBRID, name="qwen3.6-27b-as-qwen2.5-vl", architecture="Qwen2_5_VLForConditionalGeneration")
CARDS = {card.name: card for card in (DENSE, HYBRID, UNLISTED_VLM)}
DRAFTS = {"DFLASH": load_model_card("qwen3.6-27b-dflash"), "EAGLE": dataclasses.replace(DENSE, name="eagle-draft-1-layer", num_hidden_layers=1, weights_bytes=1_000_000_000)}
# The speculative methods each card is launched with: EAGLE drafts are dense-target drafts here.
CARD_METHODS = {DENSE.name: ("ar", "EAGLE", "DFLASH"), HYBRID.name: ("ar", "DFLASH"), UNLISTED_VLM.name: ("ar",)}
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
    ["--cuda-graph-backend-prefill", "breakable"],  # set explicitly: the compatibility rules are skipped (cuda_graph_hook.py:143-144)
    ["--language-model-only"],  # a multimodal card served as text: ModelConfig.is_multimodal is False (model_config.py:674-675)
)
FIELDS = ("mem_fraction_static", "chunked_prefill_size", "cuda_graph_max_bs")


def grid() -> list[dict[str, Any]]:
    cases = []
    for card_name, methods in CARD_METHODS.items():
        for (gpu, total), tp, method, others in itertools.product(GPUS.items(), TPS, methods, OTHERS):
            argv = ["--model-path", f"/models/{card_name}", "--tp-size", str(tp), "--context-length", "8192", *METHODS[method], *others]
            cases.append({"name": f"{card_name}/{gpu}/tp{tp}/{method}/{' '.join(others) or '-'}", "card": card_name, "gpu_memory_mib": total, "method": method, "argv": argv})
    return cases


def fleet_defaults(case: dict[str, Any]) -> dict[str, Any]:
    card: ModelCard = CARDS[case["card"]]
    draft = DRAFTS.get(case["method"])
    resolved = resolve_server_args(fleet_values(parse_argv(RELEASE, case["argv"])), card, draft, {}, 0, release=RELEASE)
    assert resolved.failure is None, f"{case['name']}: {resolved.failure}"
    plan = plan_memory(card, memory_inputs(resolved, gpu_memory_mib=case["gpu_memory_mib"], release=RELEASE), draft)
    return {name: getattr(plan, name) for name in FIELDS}


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    cases = grid()
    answer = sglang_wheel.run_child(__file__, {"cases": cases, "cards": {name: card_fields(card) for name, card in CARDS.items()}}, "upstream memory settings")
    return {**answer, "cases": cases}


def test_the_upstream_code_is_the_pinned_release(upstream: dict[str, Any]) -> None:
    assert upstream["version"] == RELEASE


def test_fleet_defaults_the_memory_settings_as_0523(upstream: dict[str, Any]) -> None:
    mismatches = []
    for case in upstream["cases"]:
        theirs, ours = {name: upstream["results"][case["name"]][name] for name in FIELDS}, fleet_defaults(case)
        if theirs != ours:
            mismatches.append(f"{case['name']}: 0.5.23 {theirs}, fleet {ours}")
    assert not mismatches, f"{len(mismatches)} of {len(upstream['cases'])} cases differ:\n" + "\n".join(mismatches[:30])


def test_the_grid_spans_every_gpu_bucket(upstream: dict[str, Any]) -> None:
    fractions = {result["mem_fraction_static"] for result in upstream["results"].values()}
    chunked = {result["chunked_prefill_size"] for result in upstream["results"].values()}
    assert len(fractions) >= 30 and {2048, 4096, 8192, 16384} <= chunked, (sorted(fractions), sorted(chunked))


def test_the_multimodal_prefill_graph_rule_goes_both_ways(upstream: dict[str, Any]) -> None:
    """The cards reach every outcome of cuda_graph_hook.py:143-144 and :230-236 in the wheel: the
    allowlisted hybrid card keeps its prefill graph, the same card under an unlisted architecture loses it
    unless --cuda-graph-backend-prefill is given or it is served as text (--language-model-only)."""
    kept: dict[tuple[str, bool], set[bool]] = {}
    for case in upstream["cases"]:
        if "--disable-cuda-graph" not in case["argv"]:
            exempt = "--cuda-graph-backend-prefill" in case["argv"] or "--language-model-only" in case["argv"]
            kept.setdefault((case["card"], exempt), set()).add(upstream["results"][case["name"]]["prefill_cuda_graph"])
    expected = {(DENSE.name, False): {True}, (HYBRID.name, False): {True}, (UNLISTED_VLM.name, False): {False}}
    expected.update({(name, True): {True} for name in CARDS})
    assert kept == expected, kept


def test_fleet_knows_0523s_multimodal_prefill_graph_allowlist(upstream: dict[str, Any]) -> None:
    """fleet's copy of configs/model_config.py:2501-2516 is the wheel's list."""
    ours = RULES[RELEASE].multimodal_prefill_graph_archs
    theirs = set(upstream["multimodal_prefill_graph_archs"])
    assert ours == theirs, f"memory.py RULES['{RELEASE}'].multimodal_prefill_graph_archs: missing {sorted(theirs - ours)}, extra {sorted(ours - theirs)}"


# ---------------------------------------------------------------------------------------------
# The child: 0.5.23's own memory settings for each argv, as JSON.


def _child(request: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import version

    cards = request["cards"]
    results = {case["name"]: sglang_wheel.memory_settings(case["argv"], case["gpu_memory_mib"], cards[case["card"]]) for case in request["cases"]}
    allowlist = sys.modules["sglang.srt.configs.model_config"].multimodal_breakable_cuda_graph_supported_model_archs
    return {"version": version("sglang"), "results": results, "multimodal_prefill_graph_archs": allowlist}


if __name__ == "__main__":
    json.dump(_child(json.load(sys.stdin)), sys.stdout)
