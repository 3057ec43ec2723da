"""The memory planner against the seed campaign's figures (SGLang 0.5.12) and against SGLang 0.5.23's
own arithmetic (each expected figure is derived in the comments from the wheel's formulas; the
grid-wide comparison with 0.5.23's code itself is tests/integration/test_memory_differential.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fleet.host.engines.sglang.memory import (
    GIB,
    MIB,
    RULES,
    SAFE_MAX_MEM_FRACTION_STATIC,
    MemoryInputs,
    plan_memory,
    smallest_fix,
)
from fleet.host.engines.sglang.release import KNOWN_RELEASES
from fleet.host.modelcard import load_model_card

TARGET = load_model_card("qwen3.6-27b")
DRAFT = load_model_card("qwen3.6-27b-dflash")
DENSE = load_model_card("llama-3.1-8b-instruct")

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
    release="0.5.12",
)
# The playbook's TP1 DFLASH server (playbooks/qwen36-specdec.yaml) as fleet launches it on 0.5.23: 4
# requests, 32k context, --mem-fraction-static 0.75, and --disable-radix-cache (fleet adds it for
# speculative decoding on a hybrid model).
PLAYBOOK_DFLASH_0523 = MemoryInputs(
    gpu_memory_mib=97887,
    tp_size=1,
    mem_fraction_static=0.75,
    context_length=32768,
    max_running_requests=4,
    speculative_algorithm="DFLASH",
    num_draft_tokens=16,
    disable_radix_cache=True,
    release="0.5.23",
)
# 48 GDN layers x (conv 10240 x 3 bf16 + ssm 48 x 128 x 128 fp32) at TP1 (see the shapes test).
PER_REQ_TP1 = 48 * (10240 * 3 * 2 + 48 * 128 * 128 * 4)


def test_every_known_release_has_its_rules() -> None:
    assert set(RULES) == set(KNOWN_RELEASES)


def test_an_unknown_release_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"release '0\.5\.13' is not a release fleet knows \(0\.5\.12, 0\.5\.23\).*choose_release"):
        plan_memory(TARGET, replace(SEED, release="0.5.13"), DRAFT)


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
    assert isinstance(fix[0].new, int)
    fixed = plan_memory(TARGET, replace(SEED, max_running_requests=fix[0].new), DRAFT)
    assert fixed.failure is None and fixed.max_running_requests == 4


def test_0_5_23_sizes_the_playbooks_dflash_server_to_about_48k_tokens() -> None:
    plan = plan_memory(TARGET, PLAYBOOK_DFLASH_0523, DRAFT)
    # pre-load 97887 - 1385 MiB = 94.24 GiB; the target's 51.05 GiB and the draft's 3.46 GiB are loaded
    # before the profile (scheduler.py:1128-1137), 40 MiB more in use: 39.69 GiB free; minus the slack
    # 94.24 x 0.25 and the 100 MB multimodal reserve: rest 16.03 GiB. Radix cache off: 4 mamba slots
    # (kvc.py:3325-3335), intermediate states for 4 + 1 requests x 16 tokens x 146.81 MB = 11.47 GiB,
    # main states with the padding slot 5 x 146.81 MB: 3.84 GiB left, / 86016 B (target 65536 + draft
    # 8 KV heads x 256 x 5 layers x 2 B) = 48,0xx tokens (122,855 under the old 0.5.13 branch).
    assert plan.failure is None
    rest = (97887 - 1385) / 1024 * 0.75 - TARGET.weights_bytes / GIB - DRAFT.weights_bytes / GIB - 40.03 / 1024 - 100 / 1024
    left = rest - PER_REQ_TP1 * 5 * 16 / GIB - 5 * PER_REQ_TP1 / GIB
    assert plan.kv_cell_bytes == 65536 + 8 * 256 * 5 * 2
    assert plan.kv_tokens == int(left * GIB) // plan.kv_cell_bytes
    assert 47_500 < plan.kv_tokens < 48_500
    assert (plan.max_mamba_cache_size, plan.mamba_ratio, plan.max_running_requests) == (4, 1, 4)


def test_0_5_23_loads_the_draft_before_the_kv_profile() -> None:
    # The same launch without the draft's weights in the profile would have DRAFT.weights_bytes more
    # for the KV pool; 0.5.12 loaded the draft after the pools instead.
    inputs = MemoryInputs(gpu_memory_mib=97887, mem_fraction_static=0.8, speculative_algorithm="DFLASH", num_draft_tokens=16, max_running_requests=4, release="0.5.23")
    new, old = plan_memory(DENSE, inputs, DRAFT), plan_memory(DENSE, replace(inputs, release="0.5.12"), DRAFT)
    assert new.failure is None and old.failure is None
    assert new.rest_gb == pytest.approx((97887 - 1385) / 1024 * 0.8 - DENSE.weights_bytes / GIB - DRAFT.weights_bytes / GIB - 40.03 / 1024)
    assert old.rest_gb - new.rest_gb == pytest.approx(DRAFT.weights_bytes / GIB)


def test_0_5_23_keeps_a_multimodal_reserve_out_of_the_kv_budget() -> None:
    text_only = replace(TARGET, is_multimodal=False)
    inputs = replace(PLAYBOOK_DFLASH_0523, mem_fraction_static=0.8)
    vlm, text = plan_memory(TARGET, inputs, DRAFT), plan_memory(text_only, inputs, DRAFT)
    assert text.rest_gb - vlm.rest_gb == pytest.approx(100 / 1024)  # SGLANG_VLM_CACHE_SIZE_MB, environ.py:1598
    assert plan_memory(TARGET, replace(inputs, release="0.5.12"), DRAFT).rest_gb == pytest.approx(plan_memory(text_only, replace(inputs, release="0.5.12"), DRAFT).rest_gb)


def test_0_5_23_keeps_overlap_for_dflash_so_auto_radix_cache_is_extra_buffer_with_ratio_5() -> None:
    inputs = replace(PLAYBOOK_DFLASH_0523, disable_radix_cache=False, mamba_scheduler_strategy="auto")
    new, old = plan_memory(TARGET, inputs, DRAFT), plan_memory(TARGET, replace(inputs, release="0.5.12"), DRAFT)
    assert (new.overlap_schedule, new.mamba_scheduler_strategy, new.mamba_ratio) == (True, "extra_buffer", 5)
    # 0.5.12 turns overlap off for DFLASH, and its auto strategy is no_buffer (3 slots per request).
    assert (old.overlap_schedule, old.mamba_scheduler_strategy, old.mamba_ratio) == (False, "no_buffer", 3)


def test_0_5_23_solves_the_mamba_cache_jointly_with_padding_slots() -> None:
    # The seed's settings on 0.5.23 (radix cache on, extra_buffer, overlap on: ratio 5): rest 16.03 GiB,
    # mamba budget rest x 0.5 / 1.5; K = (budget - per_req x 17) // (per_req x (1 + 16 / 5)) = 4 slots
    # (kvc.py:3362-3369), 4 // 5 = 0 requests: SGLang refuses before allocating (kvc.py:3152-3160).
    plan = plan_memory(TARGET, replace(SEED, release="0.5.23"), DRAFT)
    rest = (97887 - 1385) / 1024 * 0.75 - TARGET.weights_bytes / GIB - DRAFT.weights_bytes / GIB - 40.03 / 1024 - 100 / 1024
    budget = rest * 0.5 / 1.5 * GIB
    assert plan.max_mamba_cache_size == int((budget - PER_REQ_TP1 * 17) // (PER_REQ_TP1 * (1 + 16 / 5))) == 4
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase, plan.failure.exception) == ("max_running_requests_zero", "kv_cache", "RuntimeError")
    assert plan.failure.message == (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size=4, mamba_ratio=5, resulting max_num_reqs=0. "
        "Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory."
    )


def test_0_5_23_refuses_an_empty_mamba_cache() -> None:
    plan = plan_memory(TARGET, replace(SEED, mem_fraction_static=0.6, release="0.5.23"), DRAFT)
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase) == ("kv_pool_too_small", "mamba_cache")
    assert plan.failure.message.startswith("Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=-")
    assert f"{PER_REQ_TP1 / MIB:.2f}" == "146.81" and "mamba_cache_per_req=146.81 MB). Try: (1)" in plan.failure.message


def test_0_5_23_says_when_the_loaded_weights_leave_no_kv_budget() -> None:
    # The dense model at TP1 on a 24 GiB budget: 14.96 GiB of weights > 0.6 of the pre-load memory.
    plan = plan_memory(DENSE, MemoryInputs(gpu_memory_mib=24 * 1024, mem_fraction_static=0.6, release="0.5.23"))
    assert plan.failure is not None
    assert (plan.failure.exception, plan.failure.phase) == ("ValueError", "kv_cache")
    pre = (24 * 1024 - 1385) / 1024
    minimum = 1 - (pre - DENSE.weights_bytes / GIB - 40.03 / 1024) / pre
    assert plan.failure.message == (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.6. "
        f"Raise --mem-fraction-static above {math.ceil(minimum * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). "
        "If using speculative decoding, draft weights are now counted."
    )
    # 0.5.12 had no such check: the same launch ends in its pool-size error.
    old = plan_memory(DENSE, MemoryInputs(gpu_memory_mib=24 * 1024, mem_fraction_static=0.6, release="0.5.12"))
    assert old.failure is not None and old.failure.message == "Not enough memory. Please try to increase --mem-fraction-static."


def test_0_5_23_caps_requested_requests_at_half_the_tokens_not_at_the_estimate() -> None:
    inputs = MemoryInputs(gpu_memory_mib=97887, mem_fraction_static=0.8, max_running_requests=16, max_total_tokens=10)
    assert plan_memory(DENSE, replace(inputs, release="0.5.23")).max_running_requests == 10 // 2  # kvc.py:3129
    assert plan_memory(DENSE, replace(inputs, release="0.5.12")).max_running_requests == 16  # min(16, 2048)


@pytest.mark.parametrize(
    ("release", "tp", "cell"),
    [
        # 16 full-attention layers x 4 KV heads x (256 + 256) x bf16 = 64 KiB per token at TP1.
        ("0.5.12", 1, 65536 * 21 // 16),  # scaled by (16 + 5) / 16 layers
        ("0.5.23", 1, 65536 + 8 * 256 * 5 * 2),  # + the draft's 8 KV heads x 256 x 5 layers x 2 B
        # TP8: the target's 4 KV heads are replicated (1 per rank), the draft's 8 split (1 per rank).
        ("0.5.12", 8, 16384 * 21 // 16),
        ("0.5.23", 8, 16384 + 1 * 256 * 5 * 2),
    ],
)
def test_the_dflash_kv_cell_includes_the_draft(release: str, tp: int, cell: int) -> None:
    plan = plan_memory(TARGET, replace(SEED, tp_size=tp, max_running_requests=1, release=release), DRAFT)
    assert plan.kv_cell_bytes == cell


@pytest.mark.parametrize("release", KNOWN_RELEASES)
def test_speculative_decoding_defaults_to_48_requests(release: str) -> None:
    plan = plan_memory(TARGET, replace(SEED, max_running_requests=None, release=release), DRAFT)
    assert plan.requested_max_running_requests == 48


def test_ddtree_verifies_budget_plus_one_tokens() -> None:
    plan = plan_memory(TARGET, replace(SEED, speculative_algorithm="DDTREE", ddtree_budget=15, max_running_requests=1), DRAFT)
    assert plan.num_draft_tokens == 16


# reserved = 512 + 8192 * 1.5 + 512 * 2 + 1024 = 14848 MiB, plus in 0.5.23 8 MiB for each of the 58
# prefill capture sizes up to 8192 (Qwen3_5ForConditionalGeneration keeps its prefill graph there,
# model_config.py:2501-2516; 0.5.12 has none for a VLM): round((97887 - reserved) / 97887, 3).
@pytest.mark.parametrize(("release", "fraction"), [("0.5.12", 0.848), ("0.5.23", 0.844)])
def test_mem_fraction_static_default_for_a_multimodal_hybrid_on_96_gb(release: str, fraction: float) -> None:
    plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, tp_size=8, release=release))
    assert plan.chunked_prefill_size == 8192
    assert plan.cuda_graph_max_bs == 512
    # times adjust_mem_fraction_for_vlm's 0.95 * (1 - 0.1 * (1152^2 / 1024^2 - 1)).
    assert plan.mem_fraction_static == pytest.approx(fraction * 0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1)))


def test_0_5_23_default_fraction_reserves_nothing_for_the_draft_and_caps_graphs_at_the_requests() -> None:
    inputs = MemoryInputs(gpu_memory_mib=97887, tp_size=1, speculative_algorithm="DFLASH", num_draft_tokens=16, max_running_requests=4)
    new, old = plan_memory(DENSE, replace(inputs, release="0.5.23"), DRAFT), plan_memory(DENSE, replace(inputs, release="0.5.12"), DRAFT)
    assert (new.cuda_graph_max_bs, old.cuda_graph_max_bs) == (4, 256)  # memory_hook.py:169-175
    prefill_graphs = 8 + 14 + 8 + 8 + 12 + 8  # capture sizes up to 8192 (cuda_graph_hook.py:480-497)
    reserved_new = max(512 + 8192 * 1.5 + 4 * 2 + 1024 / 8 + prefill_graphs * 8, 10 * 1024)
    reserved_old = max(512 + 8192 * 1.5 + 256 * 2 + 1024 / 8 + prefill_graphs * 8, 10 * 1024) + 4096
    assert new.mem_fraction_static == round((97887 - reserved_new) / 97887, 3)
    assert old.mem_fraction_static == round((97887 - reserved_old) / 97887, 3)


def test_weights_that_do_not_fit_are_a_cuda_oom_at_load() -> None:
    for release in KNOWN_RELEASES:
        plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=48 * 1024, tp_size=1, mem_fraction_static=0.9, release=release))
        assert plan.failure is not None
        assert (plan.failure.failure_class, plan.failure.phase, plan.failure.model_role) == ("cuda_oom", "load_weights", "target")
        assert plan.failure.message.startswith("CUDA out of memory. Tried to allocate")


def test_0_5_23_a_draft_that_does_not_fit_beside_the_target_is_a_draft_oom_at_load() -> None:
    # pre-load free between the target's 51.05 GiB and target + draft (54.51 GiB).
    gpu = int(1385 + (TARGET.weights_bytes + DRAFT.weights_bytes / 2) / MIB)
    plan = plan_memory(TARGET, replace(SEED, gpu_memory_mib=gpu, max_running_requests=1, release="0.5.23"), DRAFT)
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.phase, plan.failure.model_role) == ("cuda_oom", "load_weights", "draft")


def test_too_small_a_fraction_leaves_no_kv_pool() -> None:
    for release in KNOWN_RELEASES:
        plan = plan_memory(TARGET, MemoryInputs(gpu_memory_mib=97887, tp_size=1, mem_fraction_static=0.5, release=release))
        assert plan.failure is not None
        assert plan.failure.failure_class == "kv_pool_too_small"
        assert plan.failure.phase in ("mamba_cache", "kv_cache")


@pytest.mark.parametrize("release", KNOWN_RELEASES)
@pytest.mark.parametrize("fraction", [0.75, 0.85])
def test_more_requests_never_grow_the_kv_pool(release: str, fraction: float) -> None:
    previous = None
    for requests in range(1, 49):
        inputs = replace(PLAYBOOK_DFLASH_0523, max_running_requests=requests, mem_fraction_static=fraction, release=release)
        tokens = plan_memory(TARGET, inputs, DRAFT).kv_tokens
        if previous is not None:
            assert tokens <= previous, f"{requests} requests gave {tokens} > {previous} tokens"
        previous = tokens


@pytest.mark.parametrize(
    "inputs",
    [
        replace(SEED, max_running_requests=4),
        replace(SEED, max_running_requests=1, release="0.5.23"),
        PLAYBOOK_DFLASH_0523,
        MemoryInputs(gpu_memory_mib=97887, tp_size=1, release="0.5.23"),
        MemoryInputs(gpu_memory_mib=97887, tp_size=4, release="0.5.12"),
    ],
    ids=["0.5.12-dflash", "0.5.23-dflash-1-request", "0.5.23-playbook-dflash", "0.5.23-no-spec", "0.5.12-no-spec-tp4"],
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
    assert checked >= 15


def test_0_5_23_can_lose_kv_tokens_when_the_fraction_grows() -> None:
    # Not a planner bug: 0.5.23 reserves intermediate states for min(max_running_requests,
    # max_mamba_cache_size // ratio) + 1 requests, so when the mamba cache grows past a multiple of the
    # ratio, 16 more draft-token states (2.25 GiB) leave the KV pool at once.
    inputs = replace(SEED, max_running_requests=4, release="0.5.23")
    plans = [plan_memory(TARGET, replace(inputs, mem_fraction_static=step / 100), DRAFT) for step in range(60, 96)]
    drops = [(low, high) for low, high in zip(plans, plans[1:]) if low.failure is None and high.failure is None and high.kv_tokens < low.kv_tokens]
    assert drops
    for low, high in drops:
        assert high.max_mamba_cache_size // high.mamba_ratio > low.max_mamba_cache_size // low.mamba_ratio


@pytest.mark.parametrize(
    "inputs",
    [
        SEED,
        replace(PLAYBOOK_DFLASH_0523, max_running_requests=32),
        replace(SEED, mem_fraction_static=0.55, max_running_requests=1),
        replace(SEED, speculative_algorithm="DDTREE", ddtree_budget=63, max_running_requests=8),
        replace(PLAYBOOK_DFLASH_0523, max_running_requests=16, mem_fraction_static=0.7),
    ],
    ids=["seed", "0.5.23-playbook-32-requests", "low-fraction", "ddtree-64", "0.5.23-playbook-16-requests"],
)
def test_smallest_fix_really_fixes(inputs: MemoryInputs) -> None:
    fix = smallest_fix(TARGET, inputs, DRAFT)
    assert fix, "expected a non-empty fix for an infeasible launch"
    fixed = inputs
    for adjustment in fix:
        assert getattr(inputs, adjustment.field) in (adjustment.old, None) or adjustment.field == "mem_fraction_static"
        fixed = replace(fixed, **{adjustment.field: adjustment.new})  # type: ignore[arg-type]  # Adjustment.new is the field's type
    plan = plan_memory(TARGET, fixed, DRAFT)
    assert plan.failure is None
    assert plan.max_running_requests == plan.requested_max_running_requests
    if fix[0].field == "mem_fraction_static":
        assert isinstance(fix[0].new, float) and fix[0].new <= SAFE_MAX_MEM_FRACTION_STATIC


def test_0_5_23_fixes_the_seeds_requests_with_the_radix_cache_by_disabling_it() -> None:
    # Ratio 5 with 16 draft tokens: at 0.75 the joint solve gives 4 slots, 4 // 5 = 0 requests however
    # few are asked for; even at SAFE_MAX_MEM_FRACTION_STATIC only 2 requests get state slots; and a
    # shorter context frees no mamba memory. --disable-radix-cache (ratio 1, the seed campaign's way)
    # is the fix that keeps the workload as defined.
    inputs = replace(SEED, release="0.5.23", max_running_requests=4, mamba_scheduler_strategy="auto")
    assert plan_memory(TARGET, replace(inputs, max_running_requests=1), DRAFT).max_running_requests == 0
    assert plan_memory(TARGET, replace(inputs, mem_fraction_static=SAFE_MAX_MEM_FRACTION_STATIC), DRAFT).max_running_requests == 2
    (fix,) = smallest_fix(TARGET, inputs, DRAFT) or [None]
    assert fix is not None and (fix.field, fix.old, fix.new) == ("disable_radix_cache", False, True)
    assert plan_memory(TARGET, replace(inputs, disable_radix_cache=True), DRAFT).max_running_requests == 4
    # An explicit extra_buffer refuses --disable-radix-cache: no such fix is offered then.
    assert smallest_fix(TARGET, replace(inputs, mamba_scheduler_strategy="extra_buffer"), DRAFT) is None
    # A dense model has no mamba state: the radix cache is never what a fix turns off.
    assert all(f.field != "disable_radix_cache" for f in smallest_fix(DENSE, replace(inputs, max_running_requests=64), DRAFT) or [])


def test_a_feasible_launch_needs_no_fix() -> None:
    assert smallest_fix(TARGET, replace(SEED, max_running_requests=4), DRAFT) == []
    assert smallest_fix(TARGET, PLAYBOOK_DFLASH_0523, DRAFT) == []


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
    assert tp1.mamba_cache_per_req_mb * (1 << 20) == PER_REQ_TP1
    assert tp8.mamba_cache_per_req_mb * (1 << 20) == 48 * (1280 * 3 * 2 + 6 * 128 * 128 * 4)


def test_0_5_12_a_draft_that_does_not_fit_after_the_pools_is_a_draft_oom_fixed_by_a_lower_fraction() -> None:
    inputs = replace(SEED, max_running_requests=4, mem_fraction_static=0.97)
    plan = plan_memory(TARGET, inputs, DRAFT)
    assert plan.failure is not None
    assert (plan.failure.failure_class, plan.failure.model_role) == ("cuda_oom", "draft")
    fix = smallest_fix(TARGET, inputs, DRAFT)
    assert fix is not None and fix[0].field == "mem_fraction_static" and isinstance(fix[0].new, float) and fix[0].new < 0.97
    assert plan_memory(TARGET, replace(inputs, mem_fraction_static=fix[0].new), DRAFT).failure is None
    # 0.5.23 loads the draft first, so the same fraction is no draft OOM there.
    assert plan_memory(TARGET, replace(inputs, release="0.5.23"), DRAFT).failure is None


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
