"""fleet's memory planner for SGLang 0.5.23 against 0.5.23's OWN sizing code, run on CPU over a grid.

Needs `pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==0.5.23`.

What runs from the wheel. The sizing modules cannot be imported on a CPU-only machine with what CI
installs: `sglang.srt.mem_cache.kv_cache_configurator` and `sglang.srt.model_executor.pool_configurator`
import `sglang.srt.configs` (its `__init__.py:1` imports `afmoe.py`, whose line 3 is
`from transformers import PretrainedConfig`: ModuleNotFoundError 'transformers'; with transformers 5.19
installed the same package stops at `nano_nemotron_vl.py:22` -> `multimodal/internvl_utils.py:5`,
ModuleNotFoundError 'torchvision'), and `page_interleave.py` / `layers/cp/utils.py` /
`speculative/dflash_utils.py` need `tvm_ffi` (a CUDA-side package). `ServerArgs.resolve_once` stops the
same way (`arg_groups/pipeline.py:9` -> `kv_shard_hook.py:17` -> `sglang.srt.configs`). So the child
below compiles the sizing code's own source text from the installed wheel (the named functions and
classes, with their file names and line numbers, so a traceback points into the wheel) and runs it:
`KVCacheConfigurator` (`_resolve_memory_pool_config`, `_profile_available_bytes`,
`_handle_max_mamba_cache`, `_calculate_mamba_ratio`, `config_from_budget`, `resolve_max_num_reqs`,
`__post_init__`), `DefaultPoolConfigurator` with `MemoryPoolConfig` and `create_memory_pool_configurator`,
`resolve_dflash_draft_cell_size` and the DFLASH cell functions, `ModelConfig.get_num_kv_heads`, the
Qwen3-Next config's layer and `mamba2_cache_params` properties, and the real (imported)
`configs/mamba_utils.py`, `mem_cache/allocation_sizing.py`, `mem_cache/kv_cache_dtype.py`, `environ.py`
and `SpeculativeAlgorithm`. The launch flags go through the real `ServerArgs.add_cli_args` parser.

What is stubbed, each named in `_child_context`: the device-memory queries (`get_available_gpu_memory`
returns the GPU's free memory once the weights are loaded, from the GPU's total and the same calibrated
reserve the planner uses), the runtime-context bags (filled from the parsed flags plus the few
resolution steps that cannot run, each citing the wheel), and the switches that are off in these
launches (KV-cache sharding, unified memory, hybrid SWA, MLA/DSA, pipeline parallelism).

Fit/fail: upstream's own exceptions (RuntimeError/ValueError with their texts) and the two `tp_worker`
asserts (managers/tp_worker.py:420-425); weights that do not fit are a CUDA OOM at load (the child
checks target, then target + draft, against the pre-load free memory, in scheduler.py:1128-1137's order).
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from fleet.host.engines.sglang.args import fleet_values, memory_inputs, resolve_server_args
from fleet.host.engines.sglang.flags import parse_argv
from fleet.host.engines.sglang.memory import DEFAULT_GPU_RESERVED_MIB, DEFAULT_POST_LOAD_OVERHEAD_MIB, MemoryInputs, MemoryPlan, plan_memory
from fleet.host.modelcard import ModelCard, load_model_card
from tests.integration import sglang_wheel

pytestmark = [pytest.mark.sglang_parser, pytest.mark.timeout(sglang_wheel.CHILD_TEST_TIMEOUT_S)]

RELEASE = "0.5.23"

# nvidia-smi memory.total of the two GPUs fleet's hosts have (tests/fixtures/real-tool-output, and the
# seed campaign's RTX PRO 6000), and of a 48 GB-class card (L40S), on which the weights may not load.
GPUS = {"H200": 143771, "RTX PRO 6000": 97887, "L40S": 46068, "A100-40GB": 40960}
HYBRID = load_model_card("qwen3.6-27b")
DENSE = load_model_card("llama-3.1-8b-instruct")
# The Qwen3.6 DFLASH drafter. With the dense target it is a sizing exercise (its KV geometry and
# weights), not a served pairing: the KV arithmetic is the same for any DFLASH draft.
DRAFT = load_model_card("qwen3.6-27b-dflash")
# EAGLE-family drafts: 0.5.23 sizes their KV from the target's per-layer bytes and the draft's layer
# count (pool_configurator.py:290-314), so a draft is its layers and its weights: a one-layer EAGLE
# head, a four-layer EAGLE3 head, and a sixteen-layer STANDALONE model (Llama-3.2-1B's size).
DRAFTS = {
    "DFLASH": DRAFT,
    "EAGLE": replace(DENSE, name="eagle-draft-1-layer", num_hidden_layers=1, weights_bytes=1_000_000_000),
    "EAGLE3": replace(DENSE, name="eagle3-draft-4-layers", num_hidden_layers=4, weights_bytes=1_900_000_000),
    "STANDALONE": replace(DENSE, name="standalone-draft-16-layers", num_hidden_layers=16, weights_bytes=2_471_645_608),
}
# DFLASH's block, and the EAGLE family's chain of 3 steps (topk 1: steps + 1 draft tokens).
SPECULATIVE_FLAGS = (
    {"DFLASH": ["--speculative-num-draft-tokens", "16"]}
    | {algorithm: ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"] for algorithm in ("EAGLE", "EAGLE3", "STANDALONE")}
    | {"NGRAM": ["--speculative-num-draft-tokens", "8"]}
)  # NGRAM drafts from the prompt: no draft model

TPS = (1, 4, 8)
ALGORITHMS = (None, "DFLASH", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM")
# A DFLASH draft's KV dtype (mem_cache/kv_cache_dtype.py:45-48: its own flag, else the target's) and an
# fa4 draft backend (:94-108: its compute dtype under a quantized target KV).
DFLASH_KV_VARIANTS = (
    ["--kv-cache-dtype", "fp8_e4m3"],
    ["--kv-cache-dtype", "fp8_e4m3", "--speculative-draft-kv-cache-dtype", "bf16"],
    ["--kv-cache-dtype", "fp8_e4m3", "--speculative-draft-attention-backend", "fa4"],
    ["--speculative-draft-kv-cache-dtype", "fp8_e4m3"],
    ["--speculative-draft-kv-cache-dtype", "auto", "--kv-cache-dtype", "fp8_e4m3"],
)
REQUESTS = (1, 2, 4, 8, 16)
FRACTIONS = (0.6, 0.7, 0.8, 0.9)
CONTEXTS = (8192, 32768, 131072)


def grid() -> list[dict[str, Any]]:
    """Both cards on every GPU x TP x algorithm (the hybrid card with the radix cache on -- mamba
    strategy auto -> extra_buffer -- and off, as fleet launches hybrid speculative decoding), each
    with every (max_running_requests, mem_fraction_static) pair and a context length that cycles so
    that every pair of the three settings occurs (a pairwise covering: 20 of the 60 triples)."""
    cases = []
    configurations = [
        (gpu, total, card, tp, algorithm, radix)
        for (gpu, total), card, tp, algorithm in itertools.product(GPUS.items(), (HYBRID, DENSE), TPS, ALGORITHMS)
        for radix in ((True, False) if card.is_hybrid else (True,))
    ]
    for index, (gpu, total, card, tp, algorithm, radix) in enumerate(configurations):
        for (i, requests), (j, fraction) in itertools.product(enumerate(REQUESTS), enumerate(FRACTIONS)):
            context = CONTEXTS[(i + j + index) % len(CONTEXTS)]
            cases.append(
                {
                    "name": f"{card.name}/{gpu}/tp{tp}/{algorithm or 'ar'}/req{requests}/mfs{fraction}/ctx{context}/radix-{'on' if radix else 'off'}",
                    "card": card.name,
                    "gpu_memory_mib": total,
                    "tp": tp,
                    "algorithm": algorithm,
                    "max_running_requests": requests,
                    "mem_fraction_static": fraction,
                    "context_length": context,
                    "disable_radix_cache": not radix,
                }
            )
    for (gpu, total), card, tp, extra in itertools.product(GPUS.items(), (HYBRID, DENSE), (1, 4), DFLASH_KV_VARIANTS):
        for requests, fraction in ((4, 0.6), (16, 0.8), (8, 0.9)):
            cases.append(
                {
                    "name": f"{card.name}/{gpu}/tp{tp}/DFLASH {' '.join(extra)}/req{requests}/mfs{fraction}/ctx32768/radix-off",
                    "card": card.name,
                    "gpu_memory_mib": total,
                    "tp": tp,
                    "algorithm": "DFLASH",
                    "max_running_requests": requests,
                    "mem_fraction_static": fraction,
                    "context_length": 32768,
                    "disable_radix_cache": True,
                    "extra": extra,
                }
            )
    # No --mem-fraction-static: the default 0.5.23's memory hook computes (a dense target: a hybrid
    # model's prefill-graph default needs the compatibility rules, which import transformers).
    for (gpu, total), tp, algorithm, requests in itertools.product(GPUS.items(), TPS, ALGORITHMS, (None, 8, 64)):
        cases.append(
            {
                "name": f"{DENSE.name}/{gpu}/tp{tp}/{algorithm or 'ar'}/req{requests or 'default'}/default-fraction/ctx32768",
                "card": DENSE.name,
                "gpu_memory_mib": total,
                "tp": tp,
                "algorithm": algorithm,
                "max_running_requests": requests,
                "mem_fraction_static": None,
                "context_length": 32768,
                "disable_radix_cache": False,
            }
        )
    return cases


def edge_cases() -> list[dict[str, Any]]:
    """Every configuration at the memory fraction where fleet's verdict turns from a failure to a start
    (a scan in steps of 0.01, then 0.001), one and two steps below it and one above: there every sizing
    term counts, and a term off by a little flips a verdict."""
    cases = []
    for (gpu, total), card, tp, algorithm in itertools.product(GPUS.items(), (HYBRID, DENSE), (1, 4), ALGORITHMS):
        base = {"card": card.name, "gpu_memory_mib": total, "tp": tp, "algorithm": algorithm, "max_running_requests": 8, "context_length": 32768, "disable_radix_cache": card.is_hybrid}
        card_, draft, inputs = _planner_inputs({**base, "name": "edge", "mem_fraction_static": 0.5})

        def starts(fraction: float) -> bool:
            return plan_memory(card_, replace(inputs, mem_fraction_static=fraction), draft).failure is None

        coarse = next((f / 100 for f in range(5, 100) if starts(f / 100)), None)
        if coarse is None or coarse == 0.05:
            continue  # starts at no fraction, or at every one: no edge in range
        edge = next(round(coarse - step / 1000, 3) for step in range(9, -1, -1) if starts(round(coarse - step / 1000, 3)))
        for fraction in (round(edge - 0.002, 3), round(edge - 0.001, 3), edge, round(edge + 0.001, 3)):
            cases.append({**base, "name": f"edge:{card.name}/{gpu}/tp{tp}/{algorithm or 'ar'}/req8/mfs{fraction}/ctx32768", "mem_fraction_static": fraction})
    return cases


def argv(case: dict[str, Any]) -> list[str]:
    args = [
        "--model-path",
        f"/models/{case['card']}",
        "--tp-size",
        str(case["tp"]),
        *(["--mem-fraction-static", str(case["mem_fraction_static"])] if case["mem_fraction_static"] is not None else []),
        *(["--max-running-requests", str(case["max_running_requests"])] if case["max_running_requests"] is not None else []),
        "--context-length",
        str(case["context_length"]),
    ]
    if case["algorithm"]:
        args += ["--speculative-algorithm", case["algorithm"], *(["--speculative-draft-model-path", "/models/draft"] if case["algorithm"] in DRAFTS else []), *SPECULATIVE_FLAGS[case["algorithm"]]]
    if case["disable_radix_cache"]:
        args.append("--disable-radix-cache")
    return args + case.get("extra", [])


def _planner_inputs(case: dict[str, Any]) -> tuple[ModelCard, ModelCard | None, MemoryInputs]:
    """The case's command line as Engine.predict_start reads it: the release's parser, its argument
    resolution, the one flags -> MemoryInputs mapping."""
    card = HYBRID if case["card"] == HYBRID.name else DENSE
    draft = DRAFTS.get(case["algorithm"])
    resolved = resolve_server_args(fleet_values(parse_argv(RELEASE, argv(case))), card, draft, {}, 0, release=RELEASE)
    assert resolved.failure is None, f"{case['name']}: fleet refuses the flags: {resolved.failure}"
    return card, draft, memory_inputs(resolved, gpu_memory_mib=case["gpu_memory_mib"], release=RELEASE)


def planned(case: dict[str, Any]) -> MemoryPlan:
    card, draft, inputs = _planner_inputs(case)
    return plan_memory(card, inputs, draft)


def card_fields(card: ModelCard) -> dict[str, Any]:
    fields = asdict(card)
    fields.pop("source")
    return fields


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    cases = grid() + edge_cases()
    request = {
        "cards": {card.name: card_fields(card) for card in (HYBRID, DENSE, *DRAFTS.values())},
        "drafts": {algorithm: card.name for algorithm, card in DRAFTS.items()},
        "gpu_reserved_mib": DEFAULT_GPU_RESERVED_MIB,
        "post_load_overhead_mib": DEFAULT_POST_LOAD_OVERHEAD_MIB,
        "cases": [{**case, "argv": argv(case)} for case in cases],
    }
    answer = sglang_wheel.run_child(__file__, request, "upstream sizing")
    return {"version": answer["version"], "cases": cases, "results": answer["results"]}


def test_the_upstream_code_is_the_pinned_release(upstream: dict[str, Any]) -> None:
    assert upstream["version"] == RELEASE


def test_planner_matches_upstream_sizing_on_every_grid_case(upstream: dict[str, Any]) -> None:
    mismatches = []
    for case in upstream["cases"]:
        problem = _compare(planned(case), upstream["results"][case["name"]])
        if problem:
            mismatches.append(f"{case['name']}: {problem}")
    assert not mismatches, f"{len(mismatches)} of {len(upstream['cases'])} cases differ:\n" + "\n".join(mismatches[:40])


def test_the_grid_has_both_verdicts_and_every_upstream_failure(upstream: dict[str, Any]) -> None:
    # The comparison is only a test if servers that start and servers that fail both occur, each
    # failure path among them: a weight OOM, the KV-budget ValueError, the two mamba RuntimeErrors.
    errors = [result["error"] for result in upstream["results"].values() if result["error"]]
    assert len(upstream["results"]) - len(errors) >= 300 and len(errors) >= 50, (len(upstream["results"]), len(errors))
    seen = {(kind, message.split(".")[0]) for kind, message in errors}
    assert {
        ("cuda_oom", "target"),
        ("ValueError", "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0"),
        ("RuntimeError", "Not enough GPU memory for hybrid (mamba/linear-attention) state cache"),
        ("RuntimeError", "Hybrid (mamba/linear-attention) state cache is too small to serve any requests"),
    } <= seen, sorted(seen)


def test_the_edge_sweep_brackets_each_upstream_boundary(upstream: dict[str, Any]) -> None:
    # At each configuration's edge upstream itself must fail below and start at it, or the sweep
    # brackets nothing.
    edges = [case for case in upstream["cases"] if case["name"].startswith("edge:")]
    assert len(edges) >= 200
    for below, _, at, _ in zip(*[iter(edges)] * 4):
        assert upstream["results"][below["name"]]["error"] is not None, below["name"]
        assert upstream["results"][at["name"]]["error"] is None, at["name"]


def test_the_dflash_draft_cell_comes_from_the_draft_geometry(upstream: dict[str, Any]) -> None:
    # resolve_dflash_draft_cell_size returns None (and pool.py falls back to layer scaling) when it
    # cannot resolve; the child must have run the resolved path, as a GPU host does.
    cells = [upstream["results"][case["name"]]["dflash_draft_cell"] for case in upstream["cases"] if case["algorithm"] == "DFLASH" and upstream["results"][case["name"]]["cell_size"] is not None]
    assert cells and None not in cells


def _compare(ours: MemoryPlan, theirs: dict[str, Any]) -> str | None:
    error = theirs["error"]
    if error is None:
        if ours.failure is not None:
            return f"upstream starts ({theirs['tokens']} tokens), fleet predicts {ours.failure.exception}: {ours.failure.message}"
        if abs(ours.kv_tokens - theirs["tokens"]) > 0.01 * theirs["tokens"]:
            return f"KV tokens: fleet {ours.kv_tokens}, upstream {theirs['tokens']}"
        if ours.max_running_requests != theirs["max_running_requests"]:
            return f"max_running_requests: fleet {ours.max_running_requests}, upstream {theirs['max_running_requests']}"
        if theirs["max_mamba_cache_size"] is not None and ours.max_mamba_cache_size != theirs["max_mamba_cache_size"]:
            return f"max_mamba_cache_size: fleet {ours.max_mamba_cache_size}, upstream {theirs['max_mamba_cache_size']}"
        if theirs["mamba_ratio"] is not None and ours.mamba_ratio != theirs["mamba_ratio"]:
            return f"mamba ratio: fleet {ours.mamba_ratio}, upstream {theirs['mamba_ratio']}"
        if ours.kv_cell_bytes != theirs["cell_size"]:
            return f"KV cell bytes: fleet {ours.kv_cell_bytes}, upstream {theirs['cell_size']}"
        return None
    kind, message = error
    if ours.failure is None:
        return f"upstream fails ({kind}: {message}), fleet predicts a start with {ours.kv_tokens} tokens"
    if kind == "cuda_oom":
        if (ours.failure.failure_class, ours.failure.model_role) != ("cuda_oom", message):
            return f"upstream: CUDA OOM loading the {message}; fleet: {ours.failure.exception} ({ours.failure.model_role}): {ours.failure.message}"
        return None
    if (ours.failure.exception, ours.failure.message) != (kind, message):
        return f"upstream {kind}: {message!r}; fleet {ours.failure.exception}: {ours.failure.message!r}"
    return None


# ---------------------------------------------------------------------------------------------
# The child: 0.5.23's sizing code, compiled from the installed wheel and run on stubbed device memory.


def _child(request: dict[str, Any]) -> dict[str, Any]:
    import argparse
    import dataclasses
    import enum
    import gc
    import logging
    import math
    import types
    from importlib.metadata import version
    from typing import Optional

    import msgspec
    import sglang  # type: ignore[import-untyped]
    import torch

    srt = Path(sglang.__file__).resolve().parent / "srt"
    logging.disable(logging.WARNING)  # upstream's warnings (capped requests, ...) are not results

    # `sglang.srt.configs/__init__.py` imports every HF config class (transformers); its submodule
    # mamba_utils.py needs only torch and numpy. An empty package object lets that file load as is.
    sglang_wheel.empty_package("sglang.srt.configs", srt / "configs")
    from sglang.srt.configs import mamba_utils  # type: ignore[import-untyped]
    from sglang.srt.environ import envs  # type: ignore[import-untyped]
    from sglang.srt.mem_cache.allocation_sizing import get_mamba_tracking_slots  # type: ignore[import-untyped]
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-untyped]
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # type: ignore[import-untyped]
    from sglang.srt.utils.common import ceil_div, is_float4_e2m1fn_x2  # type: ignore[import-untyped]

    compile_from_wheel = functools.partial(sglang_wheel.compile_from_wheel, srt)

    def module(name: str, namespace: dict[str, Any]) -> None:
        mod = types.ModuleType(name)
        mod.__dict__.update(namespace)
        sys.modules[name] = mod

    class Bag(types.SimpleNamespace):
        """One runtime-context bag (runtime_context.py:802-867 _ConfigBag): attribute reads."""

    state: dict[str, Any] = {}

    def ctx(name: str) -> Any:
        return state[name]

    class Context:
        # runtime_context.py:1103 RuntimeContext.override(source, **fields): the named leaves change.
        def override(self, source: str, **fields: Any) -> None:
            for key, value in fields.items():
                setattr(state["schedule"], key, value)

    getters = {
        "get_parallel": lambda: ctx("parallel"),
        "get_schedule": lambda: ctx("schedule"),
        "get_memory": lambda: ctx("memory"),
        "get_exec": lambda: ctx("exec"),
        "get_spec": lambda: ctx("spec"),
        "get_model": lambda: ctx("model"),
        "get_disagg": lambda: ctx("disagg"),
        "get_mm": lambda: ctx("mm"),
        "get_context": lambda: Context(),
    }
    base = {
        "torch": torch,
        "math": math,
        "gc": gc,
        "logging": logging,
        "logger": logging.getLogger("wheel"),
        "Optional": Optional,
        "Any": Any,
        "dataclass": dataclasses.dataclass,
        "field": dataclasses.field,
        "msgspec": msgspec,
        "envs": envs,
        "enum": enum,
        "ceil_div": ceil_div,
        **getters,
    }

    # speculative/dflash_utils.py (needs tvm_ffi to import): the two DFLASH cell functions.
    compile_from_wheel("speculative/dflash_utils.py", {"dflash_draft_cell_size_per_token", "scale_kv_cell_size_per_token_for_dflash"}, base, as_module="sglang.srt.speculative.dflash_utils")
    # mem_cache/kv_cache_dtype.py: importing it loads sglang.kernels (fp8_kernel.py pulls in torch's
    # compiler stack, 10 s); compiled with the CUDA (not ROCm) fp8 dtype that fp8_kernel defines.
    dtype_ns = compile_from_wheel(
        "mem_cache/kv_cache_dtype.py",
        {"TORCH_DTYPE_TO_KV_CACHE_STR", "configure_kv_cache_dtype"},
        {**base, "nn": torch.nn, "fp8_dtype": torch.float8_e4m3fn, "_is_hip": False, "current_platform": types.SimpleNamespace(is_cpu=lambda: False)},
        as_module="sglang.srt.mem_cache.kv_cache_dtype",
    )
    configure_kv_cache_dtype = dtype_ns["configure_kv_cache_dtype"]
    # mem_cache/draft_kv_budget.py: resolve_dflash_draft_cell_size, reading this child's bags.
    budget_ns = compile_from_wheel("mem_cache/draft_kv_budget.py", {"resolve_dflash_draft_cell_size"}, base)
    # layers/cp/utils.py (tvm_ffi): DSA layer split is off for these models.
    compile_from_wheel(
        "layers/cp/utils.py", {"get_glm_dsa_layer_split_effective_num_layers"}, {**base, "is_glm_dsa_cache_layer_split_enabled": lambda runner: False}, as_module="sglang.srt.layers.cp.utils"
    )
    # mem_cache/qsa_kv_pool.py imports transformers; parse_qsa_profile (real) returns None for these
    # configs before either name is used.
    module("sglang.srt.mem_cache.qsa_kv_pool", {"QSATokenToKVPool": None, "resolve_qsa_indexer_dtype": None})
    # mem_cache/page_interleave.py (tvm_ffi): the scratch charge, with KV-cache sharding off
    # (make_page_shard_spec returns None without --enable-kv-cache-sharding).
    interleave_ns = compile_from_wheel("mem_cache/page_interleave.py", {"compute_page_shard_scratch_bytes"}, {**base, "make_page_shard_spec": lambda kvc: None})
    # runtime_context.py: the draft's attention group (reads this child's parallel bag).
    group_ns = compile_from_wheel("runtime_context.py", {"draft_attn_parallel_group"}, base)
    draft_parallel_ns = compile_from_wheel("speculative/draft_parallel.py", {"legacy_draft_attn_tp_size"}, {**base, "draft_attn_parallel_group": group_ns["draft_attn_parallel_group"]})

    def mambaish_config(model_config: Any) -> Any:
        # configs/hybrid_arch.py:145-155: the Qwen3.5/3.6 text config for a hybrid GDN model, None otherwise.
        return model_config.hf_config if getattr(model_config.hf_config, "is_hybrid_gdn", False) else None

    pool_given: dict[str, Any] = {
        **base,
        "mambaish_config": mambaish_config,
        "compute_page_shard_scratch_bytes": interleave_ns["compute_page_shard_scratch_bytes"],
        "is_deepseek_dsa": lambda hf_config: False,
        "is_deepseek_v4": lambda hf_config: False,
        "is_minimax_sparse": lambda hf_config: False,
        "is_float4_e2m1fn_x2": is_float4_e2m1fn_x2,
        "_is_hip": False,
        "_is_npu": False,
    }
    pool_ns = compile_from_wheel(
        "model_executor/pool_configurator.py",
        {"MemoryPoolConfig", "_dflash_draft_cell_size", "MemoryPoolConfigurator", "DefaultPoolConfigurator", "create_memory_pool_configurator"},
        pool_given,
        as_module="sglang.srt.model_executor.pool_configurator",
    )

    free_gib: dict[str, float] = {}
    kvc_given: dict[str, Any] = {
        **base,
        # kvc.py:2999 collects weight-loading garbage before measuring; there is none here, and a full
        # collection of this interpreter's heap costs 0.6 s a case.
        "gc": types.SimpleNamespace(collect=lambda: 0),
        "get_available_gpu_memory": lambda device, gpu_id, distributed=False, cpu_group=None: free_gib["now"],
        "mambaish_config": mambaish_config,
        "hybrid_gdn_config": mambaish_config,
        "hybrid_kda_config": lambda model_config: None,
        "resolve_dflash_draft_cell_size": budget_ns["resolve_dflash_draft_cell_size"],
        "legacy_draft_attn_tp_size": draft_parallel_ns["legacy_draft_attn_tp_size"],
        "make_page_shard_spec": lambda kvc: None,
        "get_mamba_tracking_slots": get_mamba_tracking_slots,
        "_is_npu": False,
        "_is_hip": False,
    }
    kvc_ns = compile_from_wheel(
        "mem_cache/kv_cache_configurator.py",
        {
            "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO",
            "MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP",
            "MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER",
            "mm_runtime_reservation_gb",
            "_pd_prefill_skips_mamba_spec_state",
            "KVCacheConfigurator",
        },
        kvc_given,
    )

    wheel_configurator: Any = kvc_ns["KVCacheConfigurator"]

    class Configurator(wheel_configurator):
        __slots__ = ()

        def fused_entry_bytes(self, sub_pool_name: str) -> None:
            # kvc.py:1079-1090 _fused_draft_decision: no fusion without --enable-unified-memory.
            return None

    # configs/model_config.py:1700-1711 get_num_kv_heads; configs/qwen3_next.py:35-37, 259-308.
    model_config_ns = compile_from_wheel("configs/model_config.py", {"ModelConfig"}, base, members={"ModelConfig": {"get_num_kv_heads"}})
    qwen_given: dict[str, Any] = {
        **base,
        "Mamba2StateShape": mamba_utils.Mamba2StateShape,
        "Mamba2CacheParams": mamba_utils.Mamba2CacheParams,
        "mamba2_state_dtype": mamba_utils.mamba2_state_dtype,
        "_is_cpu": False,
        "linear_attn_tp_size": lambda: ctx("parallel").attn_tp_size,
    }
    qwen_ns = compile_from_wheel(
        "configs/qwen3_next.py",
        {"HybridLayerType", "Qwen3NextConfig"},
        qwen_given,
        members={"Qwen3NextConfig": {"layers_block_type", "linear_layer_ids", "full_attention_layer_ids", "mamba2_cache_params"}},
    )

    wheel_model_config: Any = model_config_ns["ModelConfig"]

    class ModelConfig(wheel_model_config):
        def __init__(self, card: dict[str, Any], context_len: int, is_draft: bool) -> None:
            self.card = card
            self.context_len = context_len
            self.is_draft_model = is_draft
            self.head_dim = self.v_head_dim = card["head_dim"]
            self.num_hidden_layers = card["num_hidden_layers"]
            self.is_multimodal = card["is_multimodal"]
            self.dtype = getattr(torch, card["kv_dtype"])
            self.quantization = None
            self.hf_config = hf_config(card)

        def get_total_num_kv_heads(self) -> int:
            return self.card["num_key_value_heads"]

    def hf_config(card: dict[str, Any]) -> Any:
        if not card["linear_attention_layer_ids"]:
            return types.SimpleNamespace(architectures=[card["architecture"]])
        config = qwen_ns["Qwen3NextConfig"]()
        full = list(card["full_attention_layer_ids"])
        interval = full[0] + 1
        assert full == [i for i in range(card["num_hidden_layers"]) if (i + 1) % interval == 0], "not a Qwen3-Next layer pattern"
        config.__dict__.update(
            is_hybrid_gdn=True,
            architectures=[card["architecture"]],
            num_hidden_layers=card["num_hidden_layers"],
            full_attention_interval=interval,
            mamba_ssm_dtype=card["mamba_ssm_dtype"],
            **{key: card[key] for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim")},
        )
        return config

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    cards, gib = request["cards"], float(1 << 30)
    results = {}
    for case in request["cases"]:
        args = parser.parse_args(case["argv"])  # the fields ServerArgs.from_cli_args would copy
        if args.mem_fraction_static is None:  # memory_hook.py:47-343, run from the wheel
            settings = sglang_wheel.memory_settings(case["argv"], case["gpu_memory_mib"])
            args.mem_fraction_static, args.chunked_prefill_size = settings["mem_fraction_static"], settings["chunked_prefill_size"]
        card = cards[case["card"]]
        draft = cards[request["drafts"][args.speculative_algorithm]] if args.speculative_algorithm in request["drafts"] else None
        tp = args.tp_size
        context_len = args.context_length or card["max_position_embeddings"]
        hybrid = bool(card["linear_attention_layer_ids"])
        # Resolution that cannot run here (ServerArgs.resolve_once needs transformers):
        # speculative_hook.py:438-443, the default of 48 running requests with speculative decoding;
        max_running = args.max_running_requests or (48 if args.speculative_algorithm else None)
        # overrides.py:470-486, mamba radix strategy auto -> extra_buffer while the overlap schedule is on
        # (Qwen3.5/3.6 is in _MAMBA_EXTRA_BUFFER_ARCHS, overrides.py:403-412; DFLASH keeps overlap on,
        # speculative_hook.py:287-447);
        # arg_groups/fields/schedule.py:220-227: mamba_full_memory_ratio falls back to 0.9;
        mamba_ratio_share = 0.9 if args.mamba_full_memory_ratio is None else args.mamba_full_memory_ratio
        strategy = args.mamba_radix_cache_strategy
        disable_overlap = args.disable_overlap_schedule
        if hybrid and not args.disable_radix_cache and strategy == "auto":
            strategy = "extra_buffer" if not disable_overlap else "no_buffer"
        state.update(
            parallel=Bag(attn_tp_size=tp, tp_size=tp, attn_dcp_size=1, attn_dp_size=1, attn_cp_size=1, pp_size=1, launch_world_size=tp, world_group=Bag(cpu_group=None), attn_tp_size_of=tp),
            schedule=Bag(
                mem_fraction_static=args.mem_fraction_static,
                max_running_requests=max_running,
                max_mamba_cache_size=args.max_mamba_cache_size,
                mamba_full_memory_ratio=mamba_ratio_share,
                page_size=args.page_size or 1,
                max_total_tokens=args.max_total_tokens,
                disable_overlap_schedule=disable_overlap,
                prefill_max_requests=None,
                chunked_prefill_size=args.chunked_prefill_size,
            ),
            memory=Bag(disable_radix_cache=args.disable_radix_cache, enable_unified_memory=False, enable_hisparse=False),
            exec=Bag(
                mamba=Bag(
                    enable_mamba_extra_buffer=strategy.startswith("extra_buffer"),
                    enable_mamba_extra_buffer_lazy=strategy == "extra_buffer_lazy",
                    enable_linear_replayssm_spec=False,
                    linear_replayssm_cache_len=None,
                ),
                graph=Bag(cuda_graph_config=Bag(prefill=Bag(full_prefill_max_req=None, backend=None))),
            ),
            spec=Bag(
                speculative_algorithm=args.speculative_algorithm,
                speculative_num_draft_tokens=args.speculative_num_draft_tokens,
                speculative_draft_kv_cache_dtype=args.speculative_draft_kv_cache_dtype,
                # speculative_hook.py:930-934: the draft's backend, else the target's prefill backend, else flashinfer.
                speculative_draft_attention_backend=args.speculative_draft_attention_backend or args.prefill_attention_backend or args.attention_backend or "flashinfer",
            ),
            model=Bag(kv_cache_dtype=args.kv_cache_dtype, qsa_indexer_dtype=None),
            disagg=Bag(disaggregation_mode="null", enable_pd_role_switch=False),
            mm=Bag(mm_feature_transport=None),
        )
        pre_load = case["gpu_memory_mib"] / 1024 - request["gpu_reserved_mib"] / 1024
        weights = card["weights_bytes"] / tp / gib
        draft_weights = draft["weights_bytes"] / tp / gib if draft else 0.0
        result: dict[str, Any] = {"error": None, "tokens": None, "max_running_requests": None, "max_mamba_cache_size": None, "mamba_ratio": None, "cell_size": None, "dflash_draft_cell": None}
        results[case["name"]] = result
        if weights > pre_load:
            result["error"] = ["cuda_oom", "target"]
            continue
        if weights + draft_weights > pre_load:
            result["error"] = ["cuda_oom", "draft"]
            continue
        free_gib["now"] = pre_load - weights - draft_weights - request["post_load_overhead_mib"] / 1024
        model_config = ModelConfig(card, context_len, is_draft=False)
        draft_config = ModelConfig(draft, context_len, is_draft=True) if draft else None
        kv_dtype = configure_kv_cache_dtype(
            server_args_kv_cache_dtype=args.kv_cache_dtype, model=None, model_dtype=model_config.dtype, is_draft_worker=False, is_dflash=False, speculative_draft_attention_backend=None
        )[1]
        algorithm = SpeculativeAlgorithm.from_string(args.speculative_algorithm)
        kvc = Configurator(
            device="cuda",
            gpu_id=0,
            attn_dp_size=1,
            pp_size=1,
            pp_group=None,
            model=None,
            model_config=model_config,
            server_args=Bag(enable_hisparse=False),
            kv_cache_dtype=kv_dtype,
            model_dtype=model_config.dtype,
            page_size=args.page_size or 1,
            sliding_window_size=None,
            spec_algorithm=algorithm,
            is_draft_worker=False,
            # kv_pool_runtime.py:34-49: post-capture sizing needs SGLANG_ENABLE_POST_CAPTURE_KV_SIZING (off, environ.py:640).
            post_capture_kv_active=False,
            # model_runner_components/spec_aux_hidden_state.py:146-176: a draft path's layer count for the EAGLE family.
            spec_aux_config=Bag(
                draft_model_config=draft_config,
                dflash_draft_num_layers=draft["num_hidden_layers"] if algorithm.is_dflash_family() else None,
                eagle_draft_num_layers=draft["num_hidden_layers"] if algorithm.is_eagle() or algorithm.is_standalone() else None,
            ),
            is_hybrid_swa=False,
            is_hybrid_swa_compress=False,
            use_mla_backend=False,
            layer_info=Bag(start_layer=0, end_layer=card["num_hidden_layers"], num_effective_layers=card["num_hidden_layers"], is_hybrid_swa_mtp_draft=False, swa_attention_layer_ids=[]),
            forward_stream=None,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=None,
            memory_pool_config=None,
            draft_parallel_layout=None,
            kv_cache_dtype_str=args.kv_cache_dtype,
        )
        result["dflash_draft_cell"] = kvc.dflash_draft_cell_size_per_token
        result["cell_size"] = pool_ns["create_memory_pool_configurator"](kvc)._cell_size
        if hybrid:
            result["mamba_ratio"] = kvc._calculate_mamba_ratio()
        try:
            config = kvc._resolve_memory_pool_config(pre_load)
        except (RuntimeError, ValueError) as exc:
            result["error"] = [type(exc).__name__, str(exc)]
            continue
        result.update(tokens=config.max_total_num_tokens, max_running_requests=config.max_running_requests, max_mamba_cache_size=state["schedule"].max_mamba_cache_size if hybrid else None)
        # managers/tp_worker.py:420-425, after the pools are allocated.
        if config.max_running_requests <= 0:
            result["error"] = ["AssertionError", "max_running_request is zero"]
        elif not min(context_len - 1, config.max_total_num_tokens - 1) > 0:
            result["error"] = ["AssertionError", "Memory pool size is too small"]
    return {"version": version("sglang"), "results": results}


if __name__ == "__main__":
    json.dump(_child(json.load(sys.stdin)), sys.stdout)
