"""The memory planner against the seed campaign's figures and against SGLang's own arithmetic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleet.host.engines.sglang.memory import (
    SAFE_MAX_MEM_FRACTION_STATIC,
    MemoryInputs,
    plan_memory,
    smallest_fix,
)
from fleet.host.modelcard import load_model_card

TARGET = load_model_card("qwen3.6-27b")
DRAFT = load_model_card("qwen3.6-27b-dflash")

# Seed 000: one RTX PRO 6000 (nvidia-smi: 97887 MiB), TP1, --mem-fraction-static 0.75, DFLASH with the
# z-lab draft, 16 draft tokens, --mamba-full-memory-ratio 0.5, radix cache on with extra_buffer.
SEED = MemoryInputs(
    gpu_memory_mib=97887,
    tp_size=1,
    mem_fraction_static=0.75,
    max_running_requests=8,
    speculative_algorithm="DFLASH",
    mamba_scheduler_strategy="extra_buffer",
    mamba_full_memory_ratio=0.5,
    sglang_version="0.5.12",
)


def test_seed_eight_requests_fails_like_the_campaign() -> None:
    plan = plan_memory(TARGET, SEED, DRAFT)

    assert round(plan.weights_gb_per_gpu, 2) == 51.05
    assert round(plan.post_load_avail_gb, 2) == 43.19
    assert plan.kv_tokens == 11893
    assert plan.max_mamba_cache_size == 2
    # "The mamba cache components add up to about 2.72 GB": conv 0.01 + ssm 0.42 + intermediate 2.25 + 0.04.
    assert round(plan.mamba_cache_gb, 2) == 2.72
    assert round(plan.intermediate_ssm_gb, 2) == 2.25
    assert plan.max_running_requests == 0
    assert plan.failure is not None
    assert plan.failure.failure_class == "max_running_requests_zero"
    assert plan.failure.message == "max_running_request is zero"
    assert plan.failure.exception == "AssertionError"
    assert plan.failure.phase == "scheduler_init"


def test_seed_four_requests_starts_with_the_working_services_mamba_cache() -> None:
    plan = plan_memory(TARGET, replace(SEED, max_running_requests=4), DRAFT)

    assert plan.failure is None
    assert plan.max_mamba_cache_size == 24
    assert plan.max_running_requests == 4


def test_smallest_fix_for_the_seed_is_the_campaigns_fix() -> None:
    fix = smallest_fix(TARGET, SEED, DRAFT)

    assert fix is not None and len(fix) == 1
    assert (fix[0].field, fix[0].old, fix[0].new) == ("max_running_requests", 8, 4)
    fixed = plan_memory(TARGET, replace(SEED, max_running_requests=fix[0].new), DRAFT)
    assert fixed.failure is None and fixed.max_running_requests == 4


def test_sglang_0_5_13_sizes_the_same_launch_differently() -> None:
    plan = plan_memory(TARGET, replace(SEED, sglang_version="0.5.13"), DRAFT)

    # Joint solve: 9 slots, intermediate states capped at 9 // 4 = 2 requests; it starts but caps concurrency.
    assert plan.failure is None
    assert plan.max_mamba_cache_size == 9
    assert plan.max_running_requests == 2
    assert plan.kv_tokens > 100_000


def test_dflash_scales_the_kv_cell_by_the_draft_layers() -> None:
    plan = plan_memory(TARGET, SEED, DRAFT)
    # 16 full-attention layers x 4 KV heads x (256 + 256) x bf16 = 64 KiB, x (16 + 5) / 16.
    assert plan.kv_cell_bytes == 65536 * 21 // 16


def test_speculative_decoding_defaults_to_48_requests() -> None:
    plan = plan_memory(TARGET, replace(SEED, max_running_requests=None, sglang_version="0.5.13"), DRAFT)
    assert plan.requested_max_running_requests == 48


def test_ddtree_verifies_budget_plus_one_tokens() -> None:
    plan = plan_memory(TARGET, replace(SEED, speculative_algorithm="DDTREE", ddtree_budget=15, max_running_requests=1), DRAFT)
    assert plan.num_draft_tokens == 16


def test_mem_fraction_static_default_for_a_multimodal_hybrid_on_96_gb() -> None:
    plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, tp_size=8))
    # reserved = 512 + 8192 * 1.5 + 512 * 2 + 1024 = 14848 MiB (no piecewise graphs for a VLM),
    # round((97887 - 14848) / 97887, 3) = 0.848, times 0.95 * (1 - 0.1 * (1152^2 / 1024^2 - 1)).
    assert plan.chunked_prefill_size == 8192
    assert plan.cuda_graph_max_bs == 512
    assert plan.mem_fraction_static == pytest.approx(0.848 * 0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1)))


def test_weights_that_do_not_fit_are_a_cuda_oom_at_load() -> None:
    plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=48 * 1024, tp_size=1, mem_fraction_static=0.9))
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase) == ("cuda_oom", "load_weights")
    assert plan.failure.message.startswith("CUDA out of memory. Tried to allocate")


def test_too_small_a_fraction_leaves_no_kv_pool() -> None:
    plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, tp_size=1, mem_fraction_static=0.5))
    assert plan.failure is not None
    assert plan.failure.failure_class == "kv_pool_too_small"
    assert plan.failure.phase in ("mamba_cache", "kv_cache")


def test_old_sglang_names_the_fraction_in_the_kv_error() -> None:
    plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, mem_fraction_static=0.5, sglang_version="0.5.10"))
    assert plan.failure is not None
    assert plan.failure.message == (
        "Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.5"
    )


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13"])
@pytest.mark.parametrize("fraction", [0.75, 0.85])
def test_more_requests_never_grow_the_kv_pool(version: str, fraction: float) -> None:
    previous = None
    for requests in range(1, 49):
        inputs = replace(SEED, max_running_requests=requests, mem_fraction_static=fraction, sglang_version=version)
        tokens = plan_memory(TARGET, inputs, DRAFT).kv_tokens
        if previous is not None:
            assert tokens <= previous, f"{requests} requests gave {tokens} > {previous} tokens"
        previous = tokens


@pytest.mark.parametrize(
    "inputs",
    [
        replace(SEED, max_running_requests=4),
        replace(SEED, max_running_requests=1, sglang_version="0.5.13"),
        MemoryInputs(gpu_memory_mib=97887, tp_size=1),
        MemoryInputs(gpu_memory_mib=97887, tp_size=4, sglang_version="0.5.12"),
    ],
    ids=["0.5.12-dflash", "0.5.13-dflash-1-request", "0.5.13-no-spec", "0.5.12-no-spec-tp4"],
)
def test_a_higher_fraction_never_shrinks_the_kv_pool(inputs: MemoryInputs) -> None:
    previous = None
    checked = 0
    for step in range(60, 96):
        plan = plan_memory(TARGET, replace(inputs, mem_fraction_static=step / 100), DRAFT)
        if plan.failure is not None:  # only servers that start have a KV pool to compare
            continue
        tokens = plan.kv_tokens
        checked += 1
        if previous is not None:
            assert tokens >= previous, f"mem_fraction_static={step / 100} gave {tokens} < {previous} tokens"
        previous = tokens
    assert checked >= 20


def test_sglang_0_5_13_can_lose_kv_tokens_when_the_fraction_grows() -> None:
    # Not a planner bug: 0.5.13 reserves intermediate states for min(max_running_requests,
    # max_mamba_cache_size // ratio) requests, so when the mamba cache grows past a multiple of the
    # ratio, 16 more draft-token states (2.25 GiB) leave the KV pool at once.
    low = plan_memory(TARGET, replace(SEED, max_running_requests=4, mem_fraction_static=0.63, sglang_version="0.5.13"), DRAFT)
    high = plan_memory(TARGET, replace(SEED, max_running_requests=4, mem_fraction_static=0.64, sglang_version="0.5.13"), DRAFT)
    assert high.max_mamba_cache_size // high.mamba_ratio > low.max_mamba_cache_size // low.mamba_ratio
    assert high.kv_tokens < low.kv_tokens


@pytest.mark.parametrize(
    "inputs",
    [
        SEED,
        replace(SEED, max_running_requests=32, sglang_version="0.5.13"),
        replace(SEED, mem_fraction_static=0.55, max_running_requests=1),
        replace(SEED, speculative_algorithm="DDTREE", ddtree_budget=63, max_running_requests=8),
    ],
    ids=["seed", "0.5.13-32-requests", "low-fraction", "ddtree-64"],
)
def test_smallest_fix_really_fixes(inputs: MemoryInputs) -> None:
    fix = smallest_fix(TARGET, inputs, DRAFT)
    assert fix, "expected a non-empty fix for an infeasible launch"
    fixed = inputs
    for adjustment in fix:
        assert getattr(inputs, adjustment.field) in (adjustment.old, None) or adjustment.field == "mem_fraction_static"
        fixed = replace(fixed, **{adjustment.field: adjustment.new})
    plan = plan_memory(TARGET, fixed, DRAFT)
    assert plan.failure is None
    assert plan.max_running_requests == plan.requested_max_running_requests
    if fix[0].field == "mem_fraction_static":
        assert fix[0].new <= SAFE_MAX_MEM_FRACTION_STATIC


def test_a_feasible_launch_needs_no_fix() -> None:
    assert smallest_fix(TARGET, replace(SEED, max_running_requests=4), DRAFT) == []


def test_dflash_without_its_draft_card_is_refused() -> None:
    with pytest.raises(ValueError, match="draft model card"):
        plan_memory(TARGET, SEED)


def test_seed_outcome_does_not_hinge_on_the_calibrated_overhead() -> None:
    # Without the 40 MiB post-load calibration the mamba cache and the failure are the same,
    # and the KV pool is within 5 % of the logged 11,893 tokens.
    plan = plan_memory(TARGET, replace(SEED, post_load_overhead_mib=0.0), DRAFT)
    assert plan.max_mamba_cache_size == 2
    assert plan.failure is not None and plan.failure.message == "max_running_request is zero"
    assert abs(plan.kv_tokens - 11893) / 11893 < 0.05
    assert plan_memory(TARGET, replace(SEED, max_running_requests=4, post_load_overhead_mib=0.0), DRAFT).max_mamba_cache_size == 24


def test_gdn_state_per_request_follows_the_qwen3_next_shapes() -> None:
    # conv: (16*128*2 + 48*128) / TP x (4 - 1) bf16; ssm: 48 / TP x 128 x 128 fp32; 48 linear layers.
    tp1 = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, tp_size=1))
    tp8 = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, tp_size=8))
    assert tp1.mamba_cache_per_req_mb * (1 << 20) == 48 * (10240 * 3 * 2 + 48 * 128 * 128 * 4)
    assert tp8.mamba_cache_per_req_mb * (1 << 20) == 48 * (1280 * 3 * 2 + 6 * 128 * 128 * 4)


def test_sglang_0_5_13_refuses_an_empty_mamba_cache() -> None:
    plan = plan_memory(TARGET, replace(SEED, mem_fraction_static=0.55, sglang_version="0.5.13"), DRAFT)
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase) == ("kv_pool_too_small", "mamba_cache")
    assert plan.failure.message.startswith(
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=0 "
    )
    assert "mamba_cache_per_req=146.81 MB" in plan.failure.message


def test_sglang_0_5_13_refuses_a_state_cache_below_the_ratio() -> None:
    plan = plan_memory(TARGET, replace(SEED, mem_fraction_static=0.6, sglang_version="0.5.13"), DRAFT)
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase) == ("max_running_requests_zero", "kv_cache")
    assert plan.failure.message == (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size=2, mamba_ratio=4, resulting max_num_reqs=0. "
        "Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory."
    )


def test_a_draft_that_does_not_fit_after_the_pools_is_a_draft_oom() -> None:
    plan = plan_memory(TARGET, replace(SEED, max_running_requests=4, mem_fraction_static=0.97, sglang_version="0.5.13"), DRAFT)
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.model_role) == ("cuda_oom", "draft")


def test_a_draft_oom_is_fixed_by_a_lower_fraction() -> None:
    inputs = replace(SEED, max_running_requests=4, mem_fraction_static=0.97, sglang_version="0.5.13")
    fix = smallest_fix(TARGET, inputs, DRAFT)
    assert fix is not None and fix[0].field == "mem_fraction_static" and fix[0].new < 0.97
    assert plan_memory(TARGET, replace(inputs, mem_fraction_static=fix[0].new), DRAFT).failure is None


def test_planner_imports_with_the_standard_library_only() -> None:
    # The sim engine imports the planner on hosts that have only Python: block every third-party import.
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *args, **kwargs):\n"
        "    if name.split('.')[0] in {'pydantic', 'yaml', 'fabric', 'paramiko', 'typer', 'rich', 'jinja2', 'tenacity'}:\n"
        "        raise ImportError('third-party import: ' + name)\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = guard\n"
        "import fleet.host.engines.sglang.memory, fleet.host.modelcard\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
