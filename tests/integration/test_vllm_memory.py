"""The vLLM memory differential: fleet's KV-cache planning (fleet/host/engines/vllm/memory.py, standard
library only) against the REAL code of vLLM 0.33.0 run on CPU (the wheel installed without its GPU
dependencies, as tests/integration/test_vllm_parser.py installs it).

For real model configs (tests/fixtures/vllm/, tests/fixtures/sim/llama-3.1-8b-instruct): dense GQA
(Llama-3.1-8B, Qwen3-8B, at TP 1, 2, 4 and 16, where KV heads replicate), MLA (DeepSeek-V3), a
sliding window on every layer (Mistral-7B-v0.1) and alternating sliding / full layers (gpt-oss-20b,
with the hybrid allocator on and off), at several block sizes, max_model_len values and available
memories (from ample to not one token), fleet's layers (`layers_from_config`) are turned into vLLM's
own KVCacheSpec objects with the arguments each layer class passes (FullAttentionSpec,
model_executor/layers/attention/attention.py:674-681; SlidingWindowSpec, :661-670; MLAAttentionSpec,
layers/attention/mla_attention.py:1371-1398), and vLLM's start-up path runs on them:
get_global_kv_cache_groups and get_kv_cache_configs (v1/core/kv_cache_planning.py:1461-1657, what
EngineCore._initialize_kv_caches calls, v1/engine/core.py:292-323), generate_scheduler_kv_cache_config
and get_kv_cache_capacity (v1/core/kv_cache_utils.py:1096-1128), and the older
check_enough_kv_cache_memory (kv_cache_planning.py:151-184). Compared, for every case: each layer's
page size, the number of KV cache groups, the pool's bytes per block, the blocks and bytes one
request of max_model_len needs, the block count, the KV cache size line's tokens and concurrency,
and the ValueError (or none) with its exact text.

The weights: vLLM's own LlamaForCausalLM / Qwen3ForCausalLM built on the meta device from the
configs (ModelConfig -> VllmConfig -> initialize_model, TP 1 and, patched, one rank of TP 2, 4, 16):
the bytes of their parameters against `dense_weights_bytes_per_rank` (this part also needs einops).

What is not compared: the per-model choice of each layer's window and head geometry (fleet's reading
of config.json is stated in layers_from_config), and what vLLM measures on a GPU (fleet assumes a
range for it).

vLLM's functions get a stand-in VllmConfig (a namespace with the fields they read: max_model_len,
max_in_flight_tokens, the hybrid-allocator switch, num_gpu_blocks_override, the KV cache layout, no
HiSparse, no speculative config): building a real one needs the model registry.

Needs `pip install -r tests/requirements-vllm.txt && pip install --no-deps vllm==0.33.0`. vLLM runs
in a child interpreter (this file is its script, see the bottom), one for all cases of both comparisons: importing vllm
loads torch and sets environment variables that must not leak into the test session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RELEASE = "0.33.0"
INSTALL = f"pip install -r tests/requirements-vllm.txt && pip install --no-deps vllm=={RELEASE}"
GIB = 1 << 30

CONFIGS = {
    "llama-3.1-8b": FIXTURES / "sim" / "llama-3.1-8b-instruct" / "config.json",
    "qwen3-8b": FIXTURES / "vllm" / "qwen3-8b.config.json",
    "deepseek-v3": FIXTURES / "vllm" / "deepseek-v3.config.json",
    "mistral-7b-v0.1": FIXTURES / "vllm" / "mistral-7b-v0.1.config.json",
    "gpt-oss-20b": FIXTURES / "vllm" / "gpt-oss-20b.config.json",
}


def _cases() -> list[dict[str, Any]]:
    """(model, tp, block size, max_model_len, batched tokens, async, hybrid allocator off, available memories)."""
    cases: list[dict[str, Any]] = []

    def add(model: str, tp: int, block_size: int | None, max_model_len: int, *, batched: int = 8192, async_sched: bool = True, disable_hybrid: bool = False, kv_dtype: str = "auto") -> None:
        cases.append(dict(model=model, tp=tp, block_size=block_size, max_model_len=max_model_len, batched=batched, async_sched=async_sched, disable_hybrid=disable_hybrid, kv_dtype=kv_dtype))

    for tp in (1, 2, 4, 16):
        add("llama-3.1-8b", tp, None, 131072)
    add("llama-3.1-8b", 1, 32, 8192)
    add("llama-3.1-8b", 1, 16, 1000, kv_dtype="fp8")
    for tp in (1, 4):
        add("qwen3-8b", tp, None, 40960)
    add("qwen3-8b", 2, 128, 32769)
    add("deepseek-v3", 8, None, 163840)
    add("deepseek-v3", 8, 64, 4097, kv_dtype="fp8")
    add("mistral-7b-v0.1", 1, None, 32768)
    add("mistral-7b-v0.1", 1, None, 32768, async_sched=False, batched=2048)
    add("mistral-7b-v0.1", 2, None, 3000)
    add("gpt-oss-20b", 1, None, 131072)
    add("gpt-oss-20b", 2, None, 131072, batched=16384)
    add("gpt-oss-20b", 1, None, 131072, disable_hybrid=True)
    add("gpt-oss-20b", 1, None, 100)
    return cases


def _fleet(case: dict[str, Any]) -> dict[str, Any]:
    """fleet's figures for `case`, and the layers (as plain dicts) the child builds vLLM's specs from."""
    from fleet.host.engines.vllm import memory as m

    config = json.loads(CONFIGS[case["model"]].read_text())
    layers = m.layers_from_config(config, tp_size=case["tp"], kv_cache_dtype=case["kv_dtype"], block_size=case["block_size"])
    groups = m.kv_cache_groups(layers, disable_hybrid_kv_cache_manager=case["disable_hybrid"])
    in_flight = (2 if case["async_sched"] else 1) * case["batched"]
    length = case["max_model_len"]
    bpb = m.pool_bytes_per_block(groups)
    per_request = m.blocks_per_request(groups, length, in_flight)
    needed = m.needed_bytes(groups, length, in_flight)
    # Available memories around the boundary: ample, just enough (the null block + one request),
    # one byte short, half a request, nothing.
    availables = [needed * 7 + 12345, needed + bpb, needed + bpb - 1, needed // 2, bpb // 2, 0]
    outcomes = []
    for available in availables:
        try:
            m.check_enough_kv_cache_memory(groups, length, in_flight, available - bpb)
        except m.KvCacheCheckError as exc:
            outcomes.append({"available": available, "error": str(exc)})
            continue
        blocks = m.num_blocks(groups, available)
        tokens, concurrency = m.kv_capacity(groups, blocks, length, in_flight)
        outcomes.append({"available": available, "error": None, "num_blocks": blocks, "tokens": tokens, "concurrency": concurrency})
    return {
        "layers": [asdict(layer) for layer in layers],
        "page_sizes": [layer.page_size_bytes for layer in layers],
        "num_groups": len(groups),
        "bytes_per_block": bpb,
        "blocks_per_request": per_request,
        "needed_bytes": needed,
        "outcomes": outcomes,
    }


WEIGHT_CASES = [("llama-3.1-8b", 1), ("llama-3.1-8b", 2), ("llama-3.1-8b", 16), ("qwen3-8b", 1), ("qwen3-8b", 4)]
# Why the weights' part was left out of the child (None: it ran).
NO_EINOPS = "einops is not installed: vLLM's model registry imports it (pip install einops==0.8.1)"


@pytest.fixture(scope="module")
def vllm_child() -> dict[str, Any]:
    """One child interpreter for both comparisons (importing vllm and torch is most of a child's
    time): the KV cache part first, then the weights' part (which patches vLLM's TP accessors);
    each part's answer, or the traceback it raised, so that one failing fails only its own tests."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(f"vLLM {RELEASE} is not installed ({INSTALL})")
    cases = _cases()
    fleet = [_fleet(case) for case in cases]
    request: dict[str, Any] = {"kv": [{**case, "layers": f["layers"], "availables": [o["available"] for o in f["outcomes"]]} for case, f in zip(cases, fleet)]}
    weights_skipped = NO_EINOPS if importlib.util.find_spec("einops") is None else None
    if weights_skipped is None:
        request["weights"] = [{"model": model, "tp": tp, "config": json.loads(CONFIGS[model].read_text())} for model, tp in WEIGHT_CASES]
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(request), capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"the vLLM child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    marker = proc.stdout.rindex("\n@@RESULTS@@\n")
    answer = json.loads(proc.stdout[marker + len("\n@@RESULTS@@\n") :])
    return {"fleet": fleet, "request": request, "answer": answer, "weights_skipped": weights_skipped}


def _part(child: dict[str, Any], name: str) -> Any:
    got = child["answer"][name]
    if "error" in got:
        pytest.fail(f"the vLLM child's {name} part failed:\n{got['error'][-4000:]}")
    return got["results"]


@pytest.fixture(scope="module")
def vllm_results(vllm_child: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return vllm_child["fleet"], _part(vllm_child, "kv")


def _label(case: dict[str, Any]) -> str:
    return f"{case['model']} tp{case['tp']} bs{case['block_size']} len{case['max_model_len']} batched{case['batched']} async{case['async_sched']} hma_off{case['disable_hybrid']} {case['kv_dtype']}"


def test_fleet_plans_the_kv_cache_as_vllm_computes_it(vllm_results: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    fleet, real = vllm_results
    cases = _cases()
    assert len(real) == len(fleet) == len(cases)
    mismatches: list[str] = []
    compared = 0
    for case, ours, theirs in zip(cases, fleet, real):
        label = _label(case)
        for key in ("page_sizes", "num_groups", "bytes_per_block", "blocks_per_request", "needed_bytes"):
            compared += 1
            if ours[key] != theirs[key]:
                mismatches.append(f"{label}: {key}: fleet {ours[key]} vLLM {theirs[key]}")
        for mine, vllm in zip(ours["outcomes"], theirs["outcomes"], strict=True):
            compared += 1
            if mine != vllm:
                mismatches.append(f"{label}: available {mine['available']}: fleet {mine} vLLM {vllm}")
    assert not mismatches, f"{len(mismatches)} of {compared} comparisons differ:\n" + "\n".join(mismatches)
    # The corpus reaches every verdict: a fit, the one-request error with an estimate, and the no-memory error.
    errors = [o["error"] or "" for f in fleet for o in f["outcomes"]]
    assert any(e.startswith("To serve at least one request") and "estimated maximum model length" in e for e in errors)
    assert any(e.startswith("No available memory for the cache blocks") for e in errors)
    assert any(o["error"] is None for f in fleet for o in f["outcomes"])
    # And every grouping: one group, the hybrid allocator's groups (gpt-oss), and its promotion when off.
    assert {f["num_groups"] for f in fleet} >= {1, 2}


def test_the_older_check_agrees_where_the_model_has_one_group(vllm_results: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """check_enough_kv_cache_memory (kv_cache_planning.py:151-184) sums each layer's own usage; with
    one group of one attention kind that is what get_kv_cache_configs checks: the same error or none.
    (Not with mixed kinds: with the hybrid allocator off, gpt-oss's sliding-window layers are promoted
    to full attention on a copy only, kv_cache_planning.py:171-176, so the older check sums their
    window-bounded usage and passes memory the start-up path refuses. fleet follows the start-up path.)"""
    fleet, real = vllm_results
    checked = 0
    for ours, theirs in zip(fleet, real):
        if ours["num_groups"] != 1 or len({layer["kind"] for layer in ours["layers"]}) != 1:
            continue
        for mine, vllm in zip(ours["outcomes"], theirs["old_check"], strict=True):
            checked += 1
            assert mine["error"] == vllm, f"{mine['available']}: fleet {mine['error']!r} vLLM {vllm!r}"
    assert checked > 0


def test_dense_weights_per_rank_are_the_parameters_vllm_creates(vllm_child: dict[str, Any]) -> None:
    """vLLM's own model classes (LlamaForCausalLM, Qwen3ForCausalLM) built on the meta device from the
    fixture configs through ModelConfig / VllmConfig / initialize_model (no weights, no GPU), at TP 1
    and, with the TP world size patched into vLLM's layers, at 2, 4 and 16 (one rank's shard): the bytes
    of their parameters against `dense_weights_bytes_per_rank`. Needs einops besides the parser's
    requirements (vLLM's model registry imports it; tests/requirements-vllm.txt does not list it)."""
    if vllm_child["weights_skipped"]:
        pytest.skip(vllm_child["weights_skipped"])
    from fleet.host.engines.vllm.memory import dense_weights_bytes_per_rank

    request = vllm_child["request"]["weights"]
    real = _part(vllm_child, "weights")
    ours = [dense_weights_bytes_per_rank(case["config"], tp_size=case["tp"]) for case in request]
    assert ours == real, [f"{m} tp{t}: fleet {a} vLLM {b}" for (m, t), a, b in zip(WEIGHT_CASES, ours, real) if a != b]


# ---------------------------------------------------------------------------------------------
# The children: vLLM's own code, on what the parent sends.


def _child_weights(request: list[dict[str, Any]]) -> list[int]:  # pragma: no cover - runs in the child interpreter
    import tempfile

    import torch
    from vllm.config import CacheConfig, LoadConfig, ModelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    results, started = [], False
    for case in request:
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "config.json").write_text(json.dumps(case["config"]))
            model_config = ModelConfig(model=directory, skip_tokenizer_init=True, max_model_len=4096)
            vllm_config = VllmConfig(model_config=model_config, cache_config=CacheConfig(), load_config=LoadConfig(load_format="dummy"))
            with set_current_vllm_config(vllm_config):
                if not started:  # a one-process gloo world; the TP size each layer reads is patched below
                    init_distributed_environment(world_size=1, rank=0, distributed_init_method="tcp://127.0.0.1:29517", local_rank=0, backend="gloo")
                    initialize_model_parallel(1, 1)
                    started = True
                # Rank 0 of a TP group of case["tp"]: every vLLM module that imported the accessors sees it.
                for name, module in list(sys.modules.items()):
                    if name.startswith("vllm") and module is not None:
                        if hasattr(module, "get_tensor_model_parallel_world_size"):
                            module.get_tensor_model_parallel_world_size = lambda tp=case["tp"]: tp
                        if hasattr(module, "get_tensor_model_parallel_rank"):
                            module.get_tensor_model_parallel_rank = lambda: 0
                vllm_config.parallel_config.tensor_parallel_size = case["tp"]
                with set_default_torch_dtype(model_config.dtype), torch.device("meta"):
                    model = initialize_model(vllm_config=vllm_config)
            results.append(sum(p.numel() * p.element_size() for p in model.parameters()))
    return results


def _child_kv(request: list[dict[str, Any]]) -> list[dict[str, Any]]:  # pragma: no cover - runs in the child interpreter
    from types import SimpleNamespace as NS

    import torch
    from vllm.v1.core import kv_cache_planning as planning
    from vllm.v1.core import kv_cache_utils as utils
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec

    dtypes = {2: torch.bfloat16, 1: torch.uint8}
    results = []
    for case in request:

        def config(length: int) -> Any:
            cache = NS(num_gpu_blocks_override=None, prefix_cache_retention_interval=None, kv_cache_layout="LBNHC", kv_cache_size_tokens=None, kv_cache_max_concurrency=None)
            from vllm.config.cache import _layout_from_name

            cache.get_resolved_kv_cache_layout = lambda: _layout_from_name("LBNHC")
            return NS(
                model_config=NS(max_model_len=length, original_max_model_len=length, supports_kv_cache_grouping=False),
                cache_config=cache,
                scheduler_config=NS(disable_hybrid_kv_cache_manager=case["disable_hybrid"], max_num_batched_tokens=case["batched"]),
                parallel_config=NS(decode_context_parallel_size=1, tensor_parallel_size=case["tp"], pipeline_parallel_size=1),
                attention_config=NS(hisparse_config=None),
                device_config=NS(device_type="cuda"),
                speculative_config=None,
                num_prefill_lookahead_tokens=0,
                max_in_flight_tokens=(2 if case["async_sched"] else 1) * case["batched"],
            )

        def specs() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for index, layer in enumerate(case["layers"]):
                name = f"model.layers.{index}.self_attn.attn"
                dtype = dtypes[layer["dtype_bytes"]]
                if layer["kind"] == "mla":
                    cache_dtype = case["kv_dtype"]
                    out[name] = MLAAttentionSpec(
                        block_size=layer["block_size"], num_kv_heads=1, max_tp_shards=1, head_size=layer["head_size"], dtype=dtype, cache_dtype_str=cache_dtype,
                        kv_quant_mode=__import__("vllm.v1.kv_cache_interface", fromlist=["x"]).get_kv_quant_mode(cache_dtype),
                    )  # fmt: skip
                elif layer["kind"] == "sliding_window":
                    out[name] = SlidingWindowSpec(
                        block_size=layer["block_size"],
                        num_kv_heads=layer["num_kv_heads"],
                        head_size=layer["head_size"],
                        head_size_v=layer["head_size_v"],
                        dtype=dtype,
                        sliding_window=layer["sliding_window"],
                    )
                else:
                    out[name] = FullAttentionSpec(block_size=layer["block_size"], num_kv_heads=layer["num_kv_heads"], head_size=layer["head_size"], head_size_v=layer["head_size_v"], dtype=dtype)
            return out

        vllm_config = config(case["max_model_len"])
        page_sizes = [spec.page_size_bytes for spec in specs().values()]
        groups = planning.get_global_kv_cache_groups(vllm_config, [specs()])
        builder = planning.DefaultKVCacheConfigBuilder()
        bpb = planning._pool_bytes_per_block_from_builder(builder, vllm_config, groups)
        needed = planning._max_memory_usage_bytes_from_groups(builder, vllm_config, groups)
        outcomes, old_check = [], []
        for available in case["availables"]:
            try:
                planning.check_enough_kv_cache_memory(vllm_config, specs(), available)
                old_check.append(None)
            except ValueError as exc:
                old_check.append(str(exc))
            try:
                configs = planning.get_kv_cache_configs(vllm_config, [specs()], [available], planning.get_global_kv_cache_groups(vllm_config, [specs()]))
            except ValueError as exc:
                outcomes.append({"available": available, "error": str(exc)})
                continue
            scheduler = utils.generate_scheduler_kv_cache_config(configs)
            tokens, concurrency = utils.get_kv_cache_capacity(vllm_config, scheduler)
            outcomes.append({"available": available, "error": None, "num_blocks": scheduler.num_blocks, "tokens": tokens, "concurrency": concurrency})
        results.append(
            {
                "page_sizes": page_sizes,
                "num_groups": len(groups),
                "bytes_per_block": bpb,
                "blocks_per_request": needed // bpb,
                "needed_bytes": needed,
                "outcomes": outcomes,
                "old_check": old_check,
            }
        )
    return results


def _child() -> None:  # pragma: no cover - runs in the child interpreter
    """Each part the parent asked for, in this order, as {"results": ...} or {"error": its traceback}."""
    import traceback

    request = json.loads(sys.stdin.read())
    answer: dict[str, Any] = {}
    for name, part in (("kv", _child_kv), ("weights", _child_weights)):
        if name in request:
            try:
                answer[name] = {"results": part(request[name])}
            except Exception:  # noqa: BLE001 - reported to that part's tests
                answer[name] = {"error": traceback.format_exc()}
    sys.stdout.write("\n@@RESULTS@@\n" + json.dumps(answer))


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    _child()
