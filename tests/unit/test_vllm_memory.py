"""fleet/host/engines/vllm/memory.py and VLLM.predict_start: vLLM 0.33's start-up memory, pure.

The formulas are checked against vLLM's own code in tests/integration/test_vllm_memory.py; here, the
figures they give for known geometries (worked by hand from the cited formulas), the verdicts and
their texts, the smallest fix, and the correction from an earlier start's log lines. No vLLM needed.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.host.engines.vllm import memory as m
from fleet.host.engines.base import StartRecord
from fleet.host.engines.vllm.engine import ENGINE, parse_kv_cache_line
from fleet.host.modelcard import load_model_card

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GIB = 1 << 30
H200_MIB = 143771  # nvidia-smi memory.total of an H200 (measured on this project's device)
RELEASE = "0.33.0"


def _config(name: str) -> dict[str, object]:
    path = FIXTURES / "sim" / "llama-3.1-8b-instruct" / "config.json" if name == "llama" else FIXTURES / "vllm" / f"{name}.config.json"
    return json.loads(path.read_text())


def _llama() -> m.ModelShape:
    return m.model_shape(load_model_card("llama-3.1-8b-instruct"), tp_size=1)


# --- KV bytes per block and per token ---------------------------------------------------------


def test_dense_gqa_page_size_is_heads_times_block_times_k_and_v() -> None:
    layers = m.layers_from_config(_config("llama"), tp_size=1)
    assert len(layers) == 32 and {layer.kind for layer in layers} == {"full"}
    # 8 KV heads x 16 tokens x (128 + 128) x 2 bytes per layer and block.
    assert layers[0].page_size_bytes == 8 * 16 * 256 * 2 == 65536
    assert sum(layer.bytes_per_token for layer in layers) == 131072  # 128 KiB per token: the well-known Llama-3-8B figure
    # TP splits the KV heads; past 8 ranks they are replicated (config/model.py:1683 max(1, 8 // 16)).
    assert m.layers_from_config(_config("llama"), tp_size=2)[0].num_kv_heads == 4
    assert m.layers_from_config(_config("llama"), tp_size=16)[0].num_kv_heads == 1
    # fp8 halves it; a block size of 32 doubles the page, not the bytes per token.
    fp8 = m.layers_from_config(_config("llama"), tp_size=1, kv_cache_dtype="fp8", block_size=32)[0]
    assert (fp8.page_size_bytes, fp8.bytes_per_token) == (65536, 2048)


def test_mla_keeps_one_latent_vector_per_token_on_every_rank() -> None:
    layers = m.layers_from_config(_config("deepseek-v3"), tp_size=8)
    assert len(layers) == 61 and layers[0].kind == "mla"
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes, one head, no V, FlashMLA's 64-token blocks.
    assert (layers[0].num_kv_heads, layers[0].head_size, layers[0].head_size_v, layers[0].block_size) == (1, 576, 0, 64)
    assert layers[0].page_size_bytes == 576 * 2 * 64
    assert sum(layer.bytes_per_token for layer in layers) == 61 * 1152  # 70,272 bytes per token, whatever the TP


def test_a_sliding_window_layer_holds_the_window_and_the_tokens_in_flight() -> None:
    layers = m.layers_from_config(_config("mistral-7b-v0.1"), tp_size=1)
    assert {layer.sliding_window for layer in layers} == {4096}
    groups = m.kv_cache_groups(layers)
    assert len(groups) == 1
    # min(4096 - 1 + 2 x 8192 in flight, 32768) = 20479 tokens -> 1280 blocks of 16, + 1 for a window starting mid-block.
    assert m.blocks_per_request(groups, 32768, 2 * 8192) == cdiv_check(20479, 16) + 1 == 1281
    # A short max_model_len caps it: min(..., 3000) -> 188 blocks + 1.
    assert m.blocks_per_request(groups, 3000, 2 * 8192) == 189
    # A config that turns the window off (Qwen's use_sliding_window: false) plans full attention.
    assert {layer.kind for layer in m.layers_from_config(_config("qwen3-8b"), tp_size=1)} == {"full"}


def cdiv_check(a: int, b: int) -> int:
    return math.ceil(a / b)


def test_alternating_windows_make_two_groups_and_the_switch_promotes_them() -> None:
    layers = m.layers_from_config(_config("gpt-oss-20b"), tp_size=1)
    assert [layer.kind for layer in layers[:4]] == ["sliding_window", "full", "sliding_window", "full"]
    groups = m.kv_cache_groups(layers)
    assert len(groups) == 2 and all(len(group.layers) == 12 for group in groups)
    page = layers[0].page_size_bytes
    assert m.pool_bytes_per_block(groups) == 12 * page
    # A request of 131072: the full group every block, the window group 128 - 1 + 16384 in flight.
    assert m.blocks_per_request(groups, 131072, 16384) == 131072 // 16 + (cdiv_check(127 + 16384, 16) + 1)
    promoted = m.kv_cache_groups(layers, disable_hybrid_kv_cache_manager=True)
    assert len(promoted) == 1 and {layer.kind for layer in promoted[0].layers} == {"full"}
    assert m.blocks_per_request(promoted, 131072, 16384) == 131072 // 16


def test_unequal_pages_and_mamba_are_not_modelled() -> None:
    full = m.KvLayer("full", 8, 128, 128, 2, 16)
    window = m.KvLayer("sliding_window", 4, 128, 128, 2, 16, 512)
    with pytest.raises(m.NotModelled, match="different page sizes"):
        m.kv_cache_groups([full, window])
    with pytest.raises(m.NotModelled, match="mamba"):
        m.model_shape(load_model_card("qwen3.6-27b"), tp_size=1)
    with pytest.raises(m.NotModelled, match="kv-cache-dtype nvfp4"):
        m.layers_from_config(_config("llama"), tp_size=1, kv_cache_dtype="nvfp4")


# --- vLLM's check, its texts, blocks and the capacity line -------------------------------------


def test_the_check_raises_vllms_texts_at_the_null_block_boundary() -> None:
    groups = m.kv_cache_groups(m.layers_from_config(_config("llama"), tp_size=1))
    needed = m.needed_bytes(groups, 131072, 16384)
    bpb = m.pool_bytes_per_block(groups)
    assert (needed, bpb) == (16 * GIB, 2 * 1024 * 1024)
    m.check_enough_kv_cache_memory(groups, 131072, 16384, needed)  # exactly one request: fits
    with pytest.raises(m.KvCacheCheckError) as short:
        m.check_enough_kv_cache_memory(groups, 131072, 16384, needed - 1)
    assert str(short.value) == (
        "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache "
        "memory (16.0 GiB). Based on the available memory, the estimated maximum model length is 131056. Try increasing `gpu_memory_utilization` "
        "(which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    with pytest.raises(m.KvCacheCheckError, match=r"^To serve .*\(0.0 GiB\)\. Try increasing"):  # not one block: no estimate sentence
        m.check_enough_kv_cache_memory(groups, 131072, 16384, bpb - 1)
    with pytest.raises(m.KvCacheCheckError, match=r"^No available memory for the cache blocks\. Try increasing `gpu_memory_utilization`"):
        m.check_enough_kv_cache_memory(groups, 131072, 16384, 0)


def test_format_gib_is_vllms_round_not_a_fixed_width() -> None:
    assert (m.format_gib(16 * GIB), m.format_gib(int(12.006 * GIB)), m.format_gib(-GIB // 2)) == ("16.0", "12.01", "-0.5")


def test_blocks_and_the_capacity_line_round_trip_through_the_log_parser() -> None:
    groups = m.kv_cache_groups(m.layers_from_config(_config("llama"), tp_size=1))
    blocks = m.num_blocks(groups, 100 * GIB + 12345)
    assert blocks == 100 * GIB // (2 * 1024 * 1024) == 51200
    tokens, concurrency = m.kv_capacity(groups, blocks, 40000, 16384)
    assert (tokens, round(concurrency, 4)) == (int(51200 / 2500 * 40000), 20.48)
    line = "(EngineCore pid=1) INFO 11-02 10:00:01 [kv_cache_utils.py:1147] " + m.kv_cache_size_line(tokens, 40000, concurrency)
    parsed = parse_kv_cache_line(line)
    assert parsed is not None and (parsed.tokens, parsed.max_model_len, parsed.max_concurrency) == (tokens, 40000, 20.48)
    assert m.num_blocks(groups, 100 * GIB, override=7) == 7


# --- verdicts -----------------------------------------------------------------------------------


def test_llama_8b_fits_an_h200_with_the_overhead_range_stated() -> None:
    plan = m.plan_memory(_llama(), m.VllmMemoryInputs(gpu_memory_mib=H200_MIB))
    assert plan.verdict == "fits" and plan.failure is None and plan.feasible
    assert plan.requested_bytes == math.ceil((H200_MIB * (1 << 20) - m.NVIDIA_SMI_TOTAL_GAP_BYTES) * 0.92)
    assert (plan.max_running_requests, plan.max_num_batched_tokens, plan.context_len) == (1024, 8192, 131072)
    # KV memory at each end of the overhead range, and the blocks and tokens it gives.
    weights = 16060522496
    assert plan.available_kv_bytes_high == plan.requested_bytes - weights - plan.overhead.low
    assert plan.available_kv_bytes_low == plan.requested_bytes - weights - plan.overhead.high
    assert plan.num_blocks_low == plan.available_kv_bytes_low // (2 << 20)
    assert plan.kv_tokens == int(plan.num_blocks_low / 8192 * 131072) < plan.kv_tokens_high
    assert m.smallest_fix(_llama(), m.VllmMemoryInputs(gpu_memory_mib=H200_MIB), plan) == []


def test_a_request_longer_than_the_cache_does_not_fit_and_the_fix_is_the_smallest_that_does() -> None:
    inputs = m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, gpu_memory_utilization=0.2)
    plan = m.plan_memory(_llama(), inputs)
    assert plan.verdict == "does_not_fit" and plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase, plan.failure.exception) == ("kv_pool_too_small", "kv_cache", "ValueError")
    assert plan.failure.message.startswith("To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed")
    fix = m.smallest_fix(_llama(), inputs, plan)
    assert fix is not None and len(fix) == 1 and fix[0].field == "mem_fraction_static" and fix[0].old == 0.2
    raised = fix[0].new
    assert isinstance(raised, float)
    assert m.plan_memory(_llama(), replace(inputs, gpu_memory_utilization=raised)).verdict == "fits"
    assert m.plan_memory(_llama(), replace(inputs, gpu_memory_utilization=round(raised - 0.01, 2))).verdict != "fits"


def test_past_the_utilization_ceiling_the_fix_is_the_longest_context_that_fits() -> None:
    # A 24 GiB GPU: the 15 GiB of weights leave no 16 GiB request at any utilization up to 0.95.
    inputs = m.VllmMemoryInputs(gpu_memory_mib=24576, gpu_memory_utilization=0.9)
    plan = m.plan_memory(_llama(), inputs)
    assert plan.verdict == "does_not_fit" and plan.failure is not None and plan.failure.phase == "kv_cache"
    fix = m.smallest_fix(_llama(), inputs, plan)
    assert fix is not None and fix[0].field == "context_length" and fix[0].old == 131072
    longest = fix[0].new
    assert isinstance(longest, int) and 1 < longest < 131072
    assert m.plan_memory(_llama(), replace(inputs, max_model_len=longest)).verdict == "fits"
    assert m.plan_memory(_llama(), replace(inputs, max_model_len=longest + 1)).verdict != "fits"


def test_no_budget_left_after_the_weights_is_vllms_no_memory_error() -> None:
    plan = m.plan_memory(_llama(), m.VllmMemoryInputs(gpu_memory_mib=81559, gpu_memory_utilization=0.17))
    assert plan.failure is not None and plan.failure.message == m.NO_CACHE_BLOCKS_MESSAGE and plan.failure.failure_class == "kv_pool_too_small"


def test_weights_larger_than_the_gpu_are_an_oom_at_load_with_no_fix() -> None:
    inputs = m.VllmMemoryInputs(gpu_memory_mib=15000)
    plan = m.plan_memory(_llama(), inputs)
    assert plan.failure is not None and (plan.failure.phase, plan.failure.exception, plan.failure.failure_class) == ("load_weights", "torch.OutOfMemoryError", "cuda_oom")
    assert plan.failure.message.startswith("CUDA out of memory. Tried to allocate")
    assert m.smallest_fix(_llama(), inputs, plan) is None
    # TP 2 halves the weights per GPU.
    assert m.plan_memory(m.model_shape(load_model_card("llama-3.1-8b-instruct"), tp_size=2), replace(inputs, tp_size=2)).weights_bytes_per_gpu == 16060522496 // 2


def test_a_utilization_above_what_the_context_leaves_is_uncertain_or_refused_at_init() -> None:
    near = m.plan_memory(_llama(), m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, gpu_memory_utilization=0.995))
    assert near.verdict == "uncertain" and near.failure is None and near.uncertain_failure is not None
    assert near.uncertain_failure.phase == "init_device"
    assert near.kv_tokens > near.context_len  # if it starts, its KV cache is ample
    assert near.uncertain_failure.message.startswith("Free memory on device cuda:0 (") and "is less than desired GPU memory utilization (0.995, " in near.uncertain_failure.message
    inputs = m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, gpu_memory_utilization=1.0)
    full = m.plan_memory(_llama(), inputs)
    assert full.verdict == "does_not_fit" and full.failure is not None and (full.failure.phase, full.failure.failure_class) == ("init_device", "cuda_oom")
    fix = m.smallest_fix(_llama(), inputs, full)
    assert fix is not None and fix[0].field == "mem_fraction_static" and isinstance(fix[0].new, float) and fix[0].new < 1.0


def test_an_overhead_between_the_ends_makes_the_verdict_uncertain_with_its_threshold() -> None:
    model = _llama()
    base = m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, gpu_memory_utilization=0.25)
    plan = m.plan_memory(model, base)
    # The threshold is exact: the largest overhead with which the one-request check passes.
    limit = plan.max_overhead_that_fits
    assert limit is not None
    at_limit = m.plan_memory(model, replace(base, overhead=m.Overhead(limit, limit, "measured")))
    past = m.plan_memory(model, replace(base, overhead=m.Overhead(limit + 1, limit + 1, "measured")))
    assert at_limit.verdict == "fits" and past.verdict == "does_not_fit"
    straddling = m.plan_memory(model, replace(base, overhead=m.Overhead(limit - GIB, limit + GIB, "assumed")))
    assert straddling.verdict == "uncertain" and straddling.uncertain_failure is not None and straddling.uncertain_failure.phase == "kv_cache"
    # What plans read as its pool is the least it starts with: the KV cache at the threshold (one request and the null block).
    assert straddling.kv_tokens == at_limit.kv_tokens and straddling.context_len <= straddling.kv_tokens < straddling.kv_tokens_high


def test_the_assumed_overhead_grows_with_what_the_profiling_run_allocates() -> None:
    small = m.assumed_overhead(vocab_size=128256, hidden_size=4096, tp_size=1, max_num_seqs=256, max_num_batched_tokens=2048, enforce_eager=True)
    large = m.assumed_overhead(vocab_size=128256, hidden_size=4096, tp_size=1, max_num_seqs=1024, max_num_batched_tokens=8192, enforce_eager=False)
    assert small.low < large.low and small.high < large.high and large.source == "assumed"
    # The sampler's float32 logits for max_num_seqs requests are the floor's variable part.
    assert large.low == 1024 * 128256 * 4 + GIB // 2


# --- the correction from an earlier start ------------------------------------------------------


def _start_log(model: m.ModelShape, inputs: m.VllmMemoryInputs, true_overhead: int) -> list[str]:
    """The two lines a start prints when its real overhead is `true_overhead` (vLLM's formats, see memory.py)."""
    plan = m.plan_memory(model, replace(inputs, overhead=m.Overhead(true_overhead, true_overhead, "measured")))
    available = plan.requested_bytes - plan.weights_bytes_per_gpu - true_overhead
    blocks = available // plan.bytes_per_block
    tokens = int(blocks / plan.blocks_per_request * plan.context_len)
    return [
        "(EngineCore pid=7) INFO 12-03 08:00:00 [gpu_worker.py:772] " + m.available_kv_cache_memory_line(available),
        "(EngineCore pid=7) INFO 12-03 08:00:00 [kv_cache_utils.py:1147] " + m.kv_cache_size_line(tokens, plan.context_len, blocks / plan.blocks_per_request),
    ]


def test_an_earlier_starts_lines_replace_the_assumed_range_with_what_it_measured() -> None:
    model = _llama()
    earlier = m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, gpu_memory_utilization=0.9, max_model_len=32768)
    true_overhead = int(3.37 * GIB) + 4321
    observed = m.observe_start(model, earlier, _start_log(model, earlier, true_overhead))
    assert observed is not None and observed.overhead.source == "measured"
    assert observed.overhead.low <= true_overhead <= observed.overhead.high
    # The block count pins it to one block (2 MiB), closer than the 0.01 GiB of the memory line.
    assert observed.overhead.high - observed.overhead.low < 2 * 1024 * 1024
    # The next sweep plans the same configuration at another utilization and length with it.
    later = replace(earlier, gpu_memory_utilization=0.3, max_model_len=131072)
    corrected = m.corrected_inputs(model, later, [observed])
    assert corrected.overhead == observed.overhead
    truth = m.plan_memory(model, replace(later, overhead=m.Overhead(true_overhead, true_overhead, "measured")))
    plan = m.plan_memory(model, corrected)
    assert plan.verdict == truth.verdict and abs(plan.kv_tokens - truth.kv_tokens) <= 16 and abs(plan.kv_tokens_high - truth.kv_tokens) <= 16
    # A configuration whose profiling run differs (max_num_seqs) keeps the assumed range.
    assert m.corrected_inputs(model, replace(later, max_num_seqs=64), [observed]).overhead is None


def test_one_line_alone_still_measures_and_no_line_measures_nothing() -> None:
    model = _llama()
    inputs = m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, max_model_len=32768)
    lines = _start_log(model, inputs, 2 * GIB)
    only_memory = m.observe_start(model, inputs, lines[:1])
    assert only_memory is not None and only_memory.overhead.low <= 2 * GIB <= only_memory.overhead.high
    assert only_memory.overhead.high - only_memory.overhead.low <= int(0.01 * GIB) + 1
    only_size = m.observe_start(model, inputs, lines[1:])
    assert only_size is not None and only_size.overhead.low <= 2 * GIB <= only_size.overhead.high
    assert m.observe_start(model, inputs, ["INFO nothing about the cache"]) is None
    # A size line for another max_model_len says nothing of this configuration's blocks.
    assert m.observe_start(model, replace(inputs, max_model_len=8192), lines[1:]) is None


# --- the engine ---------------------------------------------------------------------------------


def test_predict_start_plans_vllm_memory_and_keeps_the_parsers_refusals() -> None:
    card = load_model_card("llama-3.1-8b-instruct")
    ok = ENGINE.predict_start(["serve", "/m"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    assert ok.ok and ok.plan is not None and ok.failure is None and ok.suggestion == []
    assert ok.reason.startswith("vllm 0.33.0 fits: KV cache ") and "start-up overhead assumed" in ok.reason
    bad = ENGINE.predict_start(["/m", "--max-num-seqs", "many"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    assert not bad.ok and bad.plan is None and bad.reason == "vLLM 0.33.0 refuses the command line: argument --max-num-seqs: invalid int value: 'many'"
    short = ENGINE.predict_start(["/m", "--gpu-memory-utilization", "0.2"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    assert not short.ok and short.failure is not None and short.failure.phase == "kv_cache"
    assert short.suggestion is not None and short.suggestion[0].field == "mem_fraction_static"
    assert short.reason.startswith("vllm 0.33.0 would stop at kv_cache: ValueError: To serve at least one request") and "; smallest fix: mem_fraction_static 0.2 -> " in short.reason
    tp2 = ENGINE.predict_start(["/m", "-tp", "2", "--max-model-len", "8192", "--block-size", "32"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    assert isinstance(tp2.plan, m.VllmMemoryPlan) and (tp2.plan.context_len, tp2.plan.block_size, tp2.plan.kv_bytes_per_token) == (8192, 32, 65536)
    graphs = ENGINE.predict_start(["/m", "--max-cudagraph-capture-size", "64"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    eager = ENGINE.predict_start(["/m", "--enforce-eager"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    assert isinstance(graphs.plan, m.VllmMemoryPlan) and isinstance(eager.plan, m.VllmMemoryPlan) and isinstance(ok.plan, m.VllmMemoryPlan)
    assert (ok.plan.cuda_graph_max_bs, graphs.plan.cuda_graph_max_bs, eager.plan.cuda_graph_max_bs) == (512, 64, 0)
    assert eager.plan.overhead.high < ok.plan.overhead.high  # no CUDA-graph pool in the range


def test_what_the_planner_does_not_model_is_not_checked_never_refused() -> None:
    card = load_model_card("llama-3.1-8b-instruct")
    spec = ENGINE.predict_start(
        ["/m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'], {}, card, None, algorithm="NGRAM", gpu_memory_mib=H200_MIB, release=RELEASE, fork=None
    )
    assert spec.ok and spec.plan is None and spec.reason.startswith("not checked: speculative decoding")
    hybrid = ENGINE.predict_start(["/m"], {}, load_model_card("qwen3.6-27b"), None, algorithm=None, gpu_memory_mib=97887, release=RELEASE, fork=None)
    assert hybrid.ok and hybrid.plan is None and "mamba" in hybrid.reason
    pp = ENGINE.predict_start(["/m", "-pp", "2"], {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None)
    assert pp.ok and pp.plan is None and "pipeline parallelism" in pp.reason


def test_predict_start_takes_an_earlier_starts_measurement() -> None:
    card = load_model_card("llama-3.1-8b-instruct")
    flags = ["/m", "--max-model-len", "32768", "--gpu-memory-utilization", "0.9"]
    model, inputs = m.model_shape(card, tp_size=1), m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, gpu_memory_utilization=0.9, max_model_len=32768)
    lines = _start_log(model, inputs, 7 * GIB)
    assert ENGINE.observe_start(flags, {}, card, gpu_memory_mib=H200_MIB, release=RELEASE, log_lines=lines) is not None  # type: ignore[attr-defined]
    assert all(ENGINE.start_line(line) for line in lines)  # the lines the agent keeps
    record = StartRecord("vllm", tuple(flags), (), H200_MIB, RELEASE, tuple(lines))
    verdict = ENGINE.predict_start(flags, {}, card, None, algorithm=None, gpu_memory_mib=H200_MIB, release=RELEASE, fork=None, observed=[record])
    assert isinstance(verdict.plan, m.VllmMemoryPlan) and verdict.plan.overhead.source == "measured" and "start-up overhead measured 7.0-7.0 GiB" in verdict.reason


# --- the weights on one rank --------------------------------------------------------------------


def test_dense_weights_from_the_config_equal_the_checkpoint_and_split_as_vllm_shards() -> None:
    config = _config("llama")
    card = load_model_card("llama-3.1-8b-instruct")  # weights_bytes: the checkpoint's safetensors index total_size
    assert m.dense_weights_bytes_per_rank(config, tp_size=1) == card.weights_bytes == 16060522496
    # TP 2: every matrix split, the 4096-wide norms replicated (65 x 4096 x 2 bytes stay whole on each rank).
    norms = (2 * 32 + 1) * 4096 * 2
    assert m.dense_weights_bytes_per_rank(config, tp_size=2) == (card.weights_bytes - norms) // 2 + norms
    # TP 16: 8 KV heads, so each rank keeps one replicated KV head (k and v: 2 x 4096 x 128 per layer, not / 16).
    tp16 = m.dense_weights_bytes_per_rank(config, tp_size=16)
    assert tp16 > (card.weights_bytes - norms) // 16 + norms
    kv_whole = 32 * 2 * 4096 * 128 * 2
    kv_split = 32 * 2 * 4096 * 1024 * 2 // 16
    assert tp16 - ((card.weights_bytes - norms) // 16 + norms) == kv_whole - kv_split
    with pytest.raises(m.NotModelled):
        m.dense_weights_bytes_per_rank(_config("gpt-oss-20b"), tp_size=1)  # MoE
    shape = m.model_from_config("llama", config, tp_size=16, weights_bytes=card.weights_bytes)
    assert m.plan_memory(shape, m.VllmMemoryInputs(gpu_memory_mib=H200_MIB, tp_size=16)).weights_bytes_per_gpu == tp16
