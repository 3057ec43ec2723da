"""SGLang log parser: real logs from tests/fixtures/sample-logs, and every line format of
shared/notes/sglang-facts.md section 3 (the formats the simulator prints)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from fleet.host.engines.sglang.logparse import (
    DDTreeMetrics,
    DecodeBatch,
    KVCacheAllocated,
    MambaCacheAllocated,
    Other,
    PrefillBatch,
    SchedulerReady,
    ServerArgsLogged,
    ServerReady,
    StartupPhase,
    WeightsLoaded,
    parse_line,
    parse_log,
    strip_prefix,
)

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "sample-logs"


def _read(name: str) -> list[str]:
    return (SAMPLES / name).read_text().splitlines()


# -- real logs -------------------------------------------------------------------------------------
def test_eagle3_docs_log_yields_its_startup_figures() -> None:
    summary = parse_log(_read("021-healthy.log"))
    assert summary.is_ready and summary.ready is not None and summary.ready.line_no == 63
    assert summary.starts == 1
    assert summary.weights_loaded == WeightsLoaded(
        line_no=32,
        timestamp=datetime(2025, 9, 4, 11, 36, 37),
        rank=None,
        avail_mem_gb=63.48,
        mem_usage_gb=15.11,
        elapsed_s=None,
        model_class="LlamaForCausalLM",
    )
    assert summary.kv_cache is not None and (summary.kv_cache.tokens, summary.kv_cache.k_gb) == (20480, 1.25)
    # The EAGLE3 draft logs its own, much smaller pool on the same rank.
    assert summary.draft_kv_cache is not None and summary.draft_kv_cache.k_gb == 0.04
    assert summary.scheduler is not None
    assert (
        summary.scheduler.max_total_num_tokens,
        summary.scheduler.chunked_prefill_size,
        summary.scheduler.max_prefill_tokens,
        summary.scheduler.max_running_requests,
        summary.scheduler.context_len,
        summary.scheduler.available_gpu_mem_gb,
    ) == (20480, 8192, 16384, 128, 131072, 58.08)
    # Old format "Prefill batch. #new-seq: ..." with a trailing ", ".
    assert summary.prefill_lines == 2
    assert summary.last_prefill is not None and summary.last_prefill.new_token == 42
    assert summary.last_prefill.cached_token == 1 and summary.last_prefill.pending_token is None
    assert summary.server_args is not None
    assert summary.server_args.args["model_path"] == "'meta-llama/Llama-3.1-8B-Instruct'"


def test_vlm_docs_log_without_available_gpu_mem() -> None:
    summary = parse_log(_read("024-healthy.log"))
    assert summary.is_ready
    assert summary.kv_cache is not None and summary.kv_cache.tokens == 20480 and summary.kv_cache.v_gb == 0.55
    assert summary.scheduler is not None
    assert summary.scheduler.chunked_prefill_size == -1
    assert summary.scheduler.max_running_requests == 200
    assert summary.scheduler.context_len == 128000
    assert summary.scheduler.available_gpu_mem_gb is None
    assert summary.weights_loaded is not None and summary.weights_loaded.mem_usage_gb == 15.72


def test_tp4_excerpt_keeps_rank_and_first_pool() -> None:
    summary = parse_log(_read("017-unknown.log"))
    assert summary.kv_cache is not None
    assert (summary.kv_cache.rank, summary.kv_cache.tokens, summary.kv_cache.dtype) == ("TP1", 300288, None)
    assert summary.draft_kv_cache is None  # TP2's pool is another rank, not a draft
    assert not summary.is_ready


def test_tracebacks_are_other_events_with_line_numbers() -> None:
    event = parse_line(_read("014-import_error.log")[2], 3)
    assert event == Other(line_no=3, timestamp=None, rank=None, text="ModuleNotFoundError: No module named 'flashinfer'")


# -- prefixes -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "timestamp", "rank", "message"),
    [
        ("[2026-05-01 12:00:00] hello", datetime(2026, 5, 1, 12), None, "hello"),
        ("[2026-05-01 12:00:00 TP3] hello", datetime(2026, 5, 1, 12), "TP3", "hello"),
        ("[2026-05-01 12:00:00.042 DP1 PP0 ATTN_CP0 MOE_DP1 TP3 EP3] hello", datetime(2026, 5, 1, 12, 0, 0, 42000), "DP1 PP0 ATTN_CP0 MOE_DP1 TP3 EP3", "hello"),
        ("May 23 09:41:39 dflash-train python[61613]: [2026-05-23 09:41:39 TP0] hello", datetime(2026, 5, 23, 9, 41, 39), "TP0", "hello"),
        ("May  3 09:41:39 dflash-train python3[1]: bare text", None, None, "bare text"),
        ("2026-05-23T09:41:39+0000 ct200 python[7]: bare text", datetime(2026, 5, 23, 9, 41, 39), None, "bare text"),
        ("\x1b[32m[2026-05-01 12:00:00 TP0] hello\x1b[0m\r\n", datetime(2026, 5, 1, 12), "TP0", "hello"),
        ("Loading shards:  50%|#####\rLoading shards: 100%|##########\r", None, None, "Loading shards: 100%|##########"),
        ("    raise ValueError(", None, None, "    raise ValueError("),
        # wrappers of a pasted or captured log: quote marks, CI consoles, docker compose
        ("> [2025-11-06T02:10:00.703Z] [2025-11-06 02:10:00] Received sigquit", datetime(2025, 11, 6, 2, 10), None, "Received sigquit"),
        ("> > [2026-05-01 12:00:00 TP1] nested quote", datetime(2026, 5, 1, 12), "TP1", "nested quote"),
        ("> [2025-11-06T02:10:00.702Z]     param = params_dict[name]", None, None, "    param = params_dict[name]"),
        ("2026-05-01T12:00:00.1234567Z [2026-05-01 12:00:00 TP0] actions", datetime(2026, 5, 1, 12), "TP0", "actions"),
        ("sglang-1  | [2026-05-01 12:00:00 TP2] compose", datetime(2026, 5, 1, 12), "TP2", "compose"),
        ("a > b stays", None, None, "a > b stays"),
    ],
)
def test_prefixes(line: str, timestamp: datetime | None, rank: str | None, message: str) -> None:
    prefix = strip_prefix(line)
    assert (prefix.timestamp, prefix.rank, prefix.message) == (timestamp, rank, message)


def test_a_quoted_traceback_source_line_is_no_event() -> None:
    """A source line under a quote mark and a CI timestamp is still a source line: the classifier
    must not take the quoted code that raises an OOM for the failure itself. The frame alone proves
    only that something raised (`unknown` with the frame as evidence, issue 27's batch8 rule)."""
    from fleet.host.diagnose.classify import diagnose_text

    frame = '  File "/x/torch/cuda/memory.py", line 3, in f\n'
    source = '    raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")\n'
    wrapped = [f"> [2025-11-06T02:10:00.702Z] {line}" for line in (frame, source)]
    for lines in ([frame, source], wrapped):
        diagnosis = diagnose_text(lines)
        assert diagnosis.failure_class == "unknown" and [item.line for item in diagnosis.evidence] == [1], diagnosis.evidence
    assert diagnose_text(["> [2025-11-06T02:10:00.702Z] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"]).failure_class == "cuda_oom"


def test_blank_lines_are_no_event() -> None:
    assert parse_line("") is None
    assert parse_line("May 23 09:41:39 host python[1]:    \r\n") is None


# -- startup lines (v0.5.13 texts) ---------------------------------------------------------------
def test_load_weight_end_with_elapsed_and_quantization() -> None:
    event = parse_line("[2026-05-01 12:00:00 TP0] Load weight end. elapsed=23.88 s, type=Qwen3_5ForConditionalGeneration, quant=fp8, avail mem=80.79 GB, mem usage=13.28 GB.")
    assert isinstance(event, WeightsLoaded)
    assert (event.elapsed_s, event.model_class, event.avail_mem_gb, event.mem_usage_gb) == (
        23.88,
        "Qwen3_5ForConditionalGeneration",
        80.79,
        13.28,
    )


def test_mamba_cache_with_and_without_spec_decoding() -> None:
    plain = parse_line("[2026-05-01 12:00:00 TP0] Mamba Cache is allocated. max_mamba_cache_size: 144, conv_state size: 0.42GB, ssm_state size: 9.49GB ")
    spec = parse_line(
        "[2026-05-01 12:00:00 TP0] Mamba Cache is allocated. max_mamba_cache_size: 2, conv_state size: 0.03GB, "
        "ssm_state size: 0.70GB intermediate_ssm_state_cache size: 1.87GB intermediate_conv_window_cache size: 0.12GB "
    )
    assert isinstance(plain, MambaCacheAllocated) and isinstance(spec, MambaCacheAllocated)
    assert (plain.max_mamba_cache_size, plain.conv_state_gb, plain.ssm_state_gb) == (144, 0.42, 9.49)
    assert plain.intermediate_ssm_state_gb is None and plain.intermediate_conv_window_gb is None
    assert (spec.max_mamba_cache_size, spec.intermediate_ssm_state_gb, spec.intermediate_conv_window_gb) == (2, 1.87, 0.12)


def test_kv_cache_mha_and_mla() -> None:
    mha = parse_line("[2026-05-01 12:00:00] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 11893, K size: 0.73 GB, V size: 0.73 GB")
    mla = parse_line("[2026-05-01 12:00:00] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 59862, KV size: 3.91 GB")
    assert mha == KVCacheAllocated(line_no=0, timestamp=datetime(2026, 5, 1, 12), rank=None, dtype="torch.bfloat16", tokens=11893, k_gb=0.73, v_gb=0.73, kv_gb=None)
    assert isinstance(mla, KVCacheAllocated) and (mla.dtype, mla.tokens, mla.kv_gb, mla.k_gb) == ("torch.float8_e4m3fn", 59862, 3.91, None)


def test_scheduler_line_and_ready() -> None:
    sched = parse_line(
        "[2026-05-01 12:00:00 TP0] max_total_num_tokens=612480, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=32768, available_gpu_mem=9.81 GB"
    )
    assert isinstance(sched, SchedulerReady)
    assert (sched.max_total_num_tokens, sched.max_running_requests, sched.context_len, sched.available_gpu_mem_gb) == (612480, 48, 32768, 9.81)
    assert isinstance(parse_line("[2026-05-01 12:00:00] The server is fired up and ready to roll!", 7), ServerReady)


@pytest.mark.parametrize(
    ("message", "phase", "avail"),
    [
        ("Init torch distributed begin.", "init_distributed_begin", None),
        ("Load weight begin. avail mem=94.24 GB", "load_weight_begin", 94.24),
        ("Capture cuda graph begin. This can take up to several minutes. avail mem=11.02 GB", "cuda_graph_begin", 11.02),
        ("Capture draft extend cuda graph end. Time elapsed: 0.69 s. mem usage=0.11 GB. avail mem=58.08 GB.", "draft_cuda_graph_end", 58.08),
    ],
)
def test_startup_phases(message: str, phase: str, avail: float | None) -> None:
    event = parse_line(f"[2026-05-01 12:00:00 TP0] {message}")
    assert isinstance(event, StartupPhase) and (event.phase, event.avail_mem_gb) == (phase, avail)


def test_server_args_split_at_top_level_commas_only() -> None:
    event = parse_line(
        "[2026-05-01 12:00:00] server_args=ServerArgs(model_path='/m/a, b', tp_size=4, cuda_graph_bs=[1, 2, 4], "
        'json_model_override_args=\'{"a": 1, "b": [2]}\', mem_fraction_static=0.75, context_length=None)'
    )
    assert isinstance(event, ServerArgsLogged)
    assert event.args["model_path"] == "'/m/a, b'"
    assert event.args["cuda_graph_bs"] == "[1, 2, 4]"
    assert event.args["json_model_override_args"] == '\'{"a": 1, "b": [2]}\''
    assert event.number("mem_fraction_static") == 0.75
    assert event.number("context_length") is None and event.number("absent") is None


# -- serving lines ----------------------------------------------------------------------------
def test_decode_plain() -> None:
    event = parse_line("[2026-05-01 12:00:00 TP0] Decode batch, #running-req: 3, #token: 1234, token usage: 0.05, cuda graph: True, gen throughput (token/s): 123.45, #queue-req: 2")
    assert event == DecodeBatch(
        line_no=0,
        timestamp=datetime(2026, 5, 1, 12),
        rank="TP0",
        running_req=3,
        tokens=1234,
        full_tokens=None,
        token_usage=0.05,
        mamba_num=None,
        mamba_usage=None,
        accept_len=None,
        accept_rate=None,
        cuda_graph=True,
        gen_throughput=123.45,
        queue_req=2,
    )


def test_decode_hybrid_with_spec_and_iteration() -> None:
    event = parse_line(
        "[2026-05-01 12:00:00 TP0] Decode batch [4123], #running-req: 1, #full token: 958, full token usage: 0.01, "
        "mamba num: 3, mamba usage: 0.02, accept len: 5.41, accept rate: 0.29, cuda graph: False, "
        "gen throughput (token/s): 143.07, #queue-req: 0"
    )
    assert isinstance(event, DecodeBatch)
    assert (event.full_tokens, event.tokens, event.token_usage, event.mamba_num, event.mamba_usage) == (958, None, 0.01, 3, 0.02)
    assert (event.accept_len, event.accept_rate, event.cuda_graph, event.gen_throughput) == (5.41, 0.29, False, 143.07)


def test_prefill_v0_5_13_hybrid_and_v0_5_10_plain() -> None:
    new = parse_line(
        "[2026-05-01 12:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 412, #cached-token: 8, full token usage: 0.10, "
        "mamba usage: 0.02, #running-req: 1, #queue-req: 3, #pending-token: 77, cuda graph: False, "
        "input throughput (token/s): 1022.31"
    )
    old = parse_line(
        "[2026-05-01 12:00:00] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, cuda graph: True, input throughput (token/s): 0.00"
    )
    assert isinstance(new, PrefillBatch) and isinstance(old, PrefillBatch)
    assert (new.new_seq, new.new_token, new.cached_token, new.token_usage, new.mamba_usage) == (2, 412, 8, 0.10, 0.02)
    assert (new.running_req, new.queue_req, new.pending_token, new.input_throughput) == (1, 3, 77, 1022.31)
    assert (old.pending_token, old.mamba_usage, old.cuda_graph) == (None, None, True)


def test_serving_line_missing_required_fields_is_other() -> None:
    assert isinstance(parse_line("[2026-05-01 12:00:00] Decode batch, #running-req: 3"), Other)


def test_ddtree_metrics() -> None:
    event = parse_line("[2026-05-23 10:12:55 TP0] DDTREE metrics: bs=2 budget=8 avg_actual_nodes=9.00 avg_accepted_drafts=0.00 avg_commit_len=1.00 avg_accepted_depth=0.00")
    assert isinstance(event, DDTreeMetrics)
    assert (event.bs, event.budget, event.avg_actual_nodes, event.avg_accepted_drafts, event.avg_commit_len) == (2, 8, 9.0, 0.0, 1.0)


def test_summary_describes_the_last_start() -> None:
    lines = [
        "[2026-05-01 12:00:00] server_args=ServerArgs(tp_size=1, mem_fraction_static=0.9)",
        "[2026-05-01 12:00:10] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: 0.01 GB, V size: 0.01 GB",
        "[2026-05-01 12:00:11] Decode batch, #running-req: 1, #token: 10, token usage: 0.10, cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0",
        "[2026-05-01 12:01:00] server_args=ServerArgs(tp_size=1, mem_fraction_static=0.8)",
        "[2026-05-01 12:01:10] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 90, K size: 0.01 GB, V size: 0.01 GB",
    ]
    summary = parse_log(lines)
    assert summary.starts == 2 and summary.lines == 5
    assert summary.server_args is not None and summary.server_args.number("mem_fraction_static") == 0.8
    assert summary.kv_cache is not None and summary.kv_cache.tokens == 90
    assert summary.decode_lines == 0 and summary.last_decode is None
