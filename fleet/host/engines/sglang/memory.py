"""SGLang's GPU memory sizing per known release, as pure functions: will a server configuration
start, and with what pools?

Standard library only (the simulator engine imports this on hosts without pydantic).

Both releases follow the same order; `ReleaseRules` holds each step that differs, and `RULES` has
one entry per `release.KNOWN_RELEASES` (adding a release is adding an entry there, and a branch here
only where a rule is new):

1. ServerArgs resolution: chunked_prefill_size, the decode CUDA-graph max batch size and, when not
   given, mem_fraction_static; the speculative default of 48 running requests; the overlap schedule
   and the mamba radix-cache strategy ("auto" -> no_buffer or extra_buffer).
2. The target's weights load ("Load weight end ... avail mem"); from 0.5.23 on, the draft worker is
   created (and its weights loaded) before the KV pool is profiled.
3. The KV budget: rest = free memory - pre_load_avail * (1 - mem_fraction_static) (- a multimodal
   reserve from 0.5.23), then, for hybrid models, the mamba state cache (and with speculative
   decoding the per-draft-token intermediate states) comes out of `rest`.
4. max_total_num_tokens = rest // cell_size, where a DFLASH target's cell includes the draft's KV.
5. max_running_requests: min(requested, token / mamba limits).
6. The pools are allocated, then `tp_worker` asserts max_running_requests > 0 and max_req_len > 0.

Sources. 0.5.12: the seed campaign's release; its formulas reproduce the campaign's logged figures
(`tests/unit/test_memory.py`). 0.5.23: the installed wheel, paths below relative to `sglang/srt/`,
cited term by term (`kvc.py` = mem_cache/kv_cache_configurator.py, `pool.py` =
model_executor/pool_configurator.py); `tests/integration/test_memory_differential.py` runs that
code itself against this module.

Two inputs are not in SGLang's formulas but in the GPU: `gpu_reserved_mib` (memory already taken
when SGLang measures the pre-load free memory: driver, CUDA context, NCCL) and
`post_load_overhead_mib` (allocated between "Load weight end" and the KV profile). Their defaults are
calibrated on the seed campaign, see DEFAULT_GPU_RESERVED_MIB and DEFAULT_POST_LOAD_OVERHEAD_MIB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping

from fleet.host.engines.base import Adjustment, MemoryFailure
from fleet.host.engines.sglang.release import KNOWN_RELEASES
from fleet.host.engines.sglang.speculative import (
    DFLASH_DEFAULT_BLOCK_SIZE, DFLASH_FAMILY, EAGLE_FAMILY, MAMBA_STRATEGIES, SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS,
)  # fmt: skip
from fleet.host.modelcard import DTYPE_BYTES, ModelCard

GIB = 1 << 30
MIB = 1 << 20

# Calibrated on seed 000 (RTX PRO 6000, nvidia-smi total 97887 MiB, TP1): "Load weight end" reported
# avail mem=43.19 GB after 51.05 GB of weights, i.e. 94.24 GiB free before loading, so 97887 MiB -
# 94.24 GiB = 1385 MiB were held by the driver, the CUDA context and torch.distributed.
DEFAULT_GPU_RESERVED_MIB = 1385.0
# Calibrated on the same seed: with the reserve above, sglang 0.5.12's formulas give the logged 11,893 KV
# tokens only if 40.00-40.07 MiB more are in use when the KV pool is profiled than at "Load weight end"
# (0 MiB would give 12,381). What allocates it was not identified in the source, and the logged figures
# are rounded to 10 MiB, so this is a fit to one observation (the middle of the window), not a measurement.
# No 0.5.23 log has been measured; the same figure is used for it.
DEFAULT_POST_LOAD_OVERHEAD_MIB = 40.03

# The release planned when a caller does not say (the newest known one).
DEFAULT_RELEASE = KNOWN_RELEASES[-1]

# kvc.py:227 (0.5.23; the same constant in 0.5.12's model_runner_kv_cache_mixin.py).
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3
# mem_cache/allocation_sizing.py:11-19 get_mamba_tracking_slots: extra_buffer adds 2 tracking slots
# per request with the overlap schedule, 1 without it or in lazy mode.
MAMBA_EXTRA_BUFFER_SLOTS_OVERLAP = 2
MAMBA_EXTRA_BUFFER_SLOTS_NO_OVERLAP = 1
MAMBA_EXTRA_BUFFER_SLOTS_LAZY = 1
# SGLANG_MAMBA_CONV_DTYPE default (configs/mamba_utils.py:66: bfloat16).
MAMBA_CONV_DTYPE_BYTES = 2
# smallest_fix never proposes a larger fraction: above it CUDA graphs and activations run short.
SAFE_MAX_MEM_FRACTION_STATIC = 0.90


@dataclass(frozen=True)
class ReleaseRules:
    """The steps of the sizing that differ between SGLang releases (see the module docstring)."""

    # 0.5.12: the draft worker loads after the target's pools, into what mem_fraction_static left
    # outside them. 0.5.23: scheduler.py:1128-1137 creates the draft worker (its weights load) before
    # init_memory_pools, so they are counted in the KV profile (kvc.py:3042 "Loaded weights (target +
    # draft)").
    draft_loads_before_kv_profile: bool
    # kvc.py:202-219 mm_runtime_reservation_gb, kvc.py:3034-3038: a multimodal checkpoint keeps
    # SGLANG_VLM_CACHE_SIZE_MB (environ.py:1598: 100) out of the KV budget; 0 before 0.5.23.
    multimodal_reserve_mib: float
    # How the mamba state cache is sized (`_handle_max_mamba_cache`):
    # "reserve_requested" (0.5.12): intermediate states reserved for the *requested* requests before
    #   the ratio split, no +1 padding slot, no check (a cache below the ratio asserts later);
    # "joint_padded" (0.5.23, kvc.py:3229-3409): a joint solve of state + intermediate states capped at
    #   max_mamba_cache_size // ratio requests, every pool counted with its padding slot, and
    #   RuntimeErrors before anything is allocated.
    mamba_sizing: Literal["reserve_requested", "joint_padded"]
    # Speculative algorithms for which SGLang turns the overlap schedule off. 0.5.12: DFLASH and NGRAM
    # (and the DDTREE fork built on DFLASH). 0.5.23: none on CUDA (speculative_hook.py:66-75 only on
    # CPU; _handle_dflash, speculative_hook.py:287-447, keeps it).
    overlap_off_algorithms: tuple[str, ...]
    # What "--mamba-scheduler-strategy auto" resolves to with the radix cache on. 0.5.12: no_buffer.
    # 0.5.23 (arg_groups/overrides.py:477-486): extra_buffer when the overlap schedule is on (or
    # page_size > 1) and the architecture supports it, else no_buffer with overlap turned off.
    auto_strategy_follows_overlap: bool
    # resolve_max_num_reqs with --max-running-requests given. 0.5.12: min(requested, the
    # context-based estimate). 0.5.23 (kvc.py:3126-3129): min(requested, tokens // 2).
    requested_requests_capped_by: Literal["estimate", "half_tokens"]
    # DFLASH target cell. 0.5.12: the target cell scaled by (target + draft layers) / target layers.
    # 0.5.23 (pool.py:318-338, mem_cache/draft_kv_budget.py:14-55): target cell + the draft's own
    # per-token KV bytes (speculative/dflash_utils.py:121-134), from the draft's geometry.
    dflash_draft_cell_from_draft_geometry: bool
    # EAGLE / EAGLE3 / STANDALONE drafts sized: 0.5.23 model_executor/pool_configurator.py:259-314 adds the
    # draft's layers to the target cell (the target's per-layer bytes x draft layers / target KV layers,
    # truncated), the draft's layer count being its config's (model_runner_components/
    # spec_aux_hidden_state.py:146-176), and its weights load before the KV profile like any draft's.
    # 0.5.12: fleet has no model of it (no 0.5.12 wheel to check against); the draft is not planned.
    eagle_draft_sized: bool
    # tp_worker asserts max_req_len > 0; 0.5.12 also needed 5 tokens of margin.
    max_req_len_margin: int
    # Default mem_fraction_static (server_args._handle_gpu_memory_settings; 0.5.23:
    # arg_groups/memory_hook.py:47-343): MiB reserved for a speculative draft, (any algorithm but
    # NGRAM, STANDALONE). 0.5.12: (4096, 6144); 0.5.23 reserves none (memory_hook.py:304-322).
    speculative_fraction_reserve_mib: tuple[float, float]
    # The 20-35 GiB bucket: (chunked_prefill_size, cuda graph max bs for TP < 4, for TP >= 4).
    # 0.5.23: memory_hook.py:102-116.
    mid_gpu_defaults: tuple[int, int, int]
    # 0.5.23 (memory_hook.py:169-175): a default decode graph max bs is capped at max_running_requests.
    graph_bs_capped_by_requests: bool
    # 0.5.23 (memory_hook.py:357-399): the graph reserve counts only the phases that capture graphs.
    graph_reserve_follows_backends: bool
    # Multimodal architectures that keep the prefill CUDA graph (and its reserve); any other multimodal
    # checkpoint runs prefill eagerly. 0.5.12: none (_handle_piecewise_cuda_graph turns it off for every
    # multimodal model). 0.5.23: the breakable-graph allowlist, configs/model_config.py:2501-2516, read by
    # the "multimodal model" rule of cuda_graph_hook.py:230-236 (disable_breakable_cudagraph_if_incompatible).
    multimodal_prefill_graph_archs: frozenset[str]


RULES: Mapping[str, ReleaseRules] = {
    "0.5.12": ReleaseRules(
        draft_loads_before_kv_profile=False,
        multimodal_reserve_mib=0.0,
        mamba_sizing="reserve_requested",
        overlap_off_algorithms=("DFLASH", "DDTREE", "NGRAM"),
        auto_strategy_follows_overlap=False,
        requested_requests_capped_by="estimate",
        dflash_draft_cell_from_draft_geometry=False,
        eagle_draft_sized=False,
        max_req_len_margin=5,
        speculative_fraction_reserve_mib=(4096.0, 6144.0),
        mid_gpu_defaults=(2048, 24, 80),
        graph_bs_capped_by_requests=False,
        graph_reserve_follows_backends=False,
        multimodal_prefill_graph_archs=frozenset(),
    ),
    "0.5.23": ReleaseRules(
        draft_loads_before_kv_profile=True,
        multimodal_reserve_mib=100.0,
        mamba_sizing="joint_padded",
        overlap_off_algorithms=(),
        auto_strategy_follows_overlap=True,
        requested_requests_capped_by="half_tokens",
        dflash_draft_cell_from_draft_geometry=True,
        eagle_draft_sized=True,
        max_req_len_margin=0,
        speculative_fraction_reserve_mib=(0.0, 0.0),
        mid_gpu_defaults=(4096, 48, 160),
        graph_bs_capped_by_requests=True,
        graph_reserve_follows_backends=True,
        multimodal_prefill_graph_archs=frozenset(
            {
                "MiniMaxM3SparseForConditionalGeneration",
                "Cohere2VisionForConditionalGeneration",
                "Glm5NextForConditionalGeneration",
                "InternS2MobiusForConditionalGeneration",
                "PaddleOCRVLForConditionalGeneration",
                "Qwen3_5ForConditionalGeneration",
                "Qwen3_5MoeForConditionalGeneration",
                "Qwen4ExpForConditionalGeneration",
                "MuseGlimmerForConditionalGeneration",
                "MuseSparkForConditionalGeneration",
                "KimiK3ForConditionalGeneration",
                "KimiK25ForConditionalGeneration",
                "MiniMaxM3SparseForCausalLM",
            }
        ),
    ),
}


@dataclass(frozen=True)
class MemoryInputs:
    gpu_memory_mib: int
    tp_size: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    max_running_requests: int | None = None
    speculative_algorithm: str | None = None  # None | "DFLASH" | "DDTREE" | "EAGLE" | "EAGLE3" | "NEXTN" | ...
    num_draft_tokens: int | None = None
    ddtree_budget: int | None = None
    disable_radix_cache: bool = False
    mamba_scheduler_strategy: str = "auto"  # auto | no_buffer | extra_buffer | extra_buffer_lazy
    max_mamba_cache_size: int | None = None
    mamba_full_memory_ratio: float = 0.9
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    decode_cuda_graph: bool = True  # False: --cuda-graph-backend-decode disabled / --disable-cuda-graph
    prefill_cuda_graph: bool = True  # False: --cuda-graph-backend-prefill disabled / --disable-cuda-graph (0.5.23)
    prefill_cuda_graph_backend_given: bool = False  # --cuda-graph-backend-prefill set (0.5.23): kept whatever the model
    language_model_only: bool = False  # --language-model-only (0.5.23)
    kv_cache_dtype: str = "auto"
    draft_kv_cache_dtype: str | None = None  # --speculative-draft-kv-cache-dtype (0.5.23); None: the target's
    draft_attention_backend: str | None = None  # the DFLASH draft's attention backend, as resolved
    page_size: int = 1
    gpu_reserved_mib: float = DEFAULT_GPU_RESERVED_MIB
    post_load_overhead_mib: float = DEFAULT_POST_LOAD_OVERHEAD_MIB
    # One of release.KNOWN_RELEASES; callers map a host's version with release.choose_release.
    release: str = DEFAULT_RELEASE
    max_total_tokens: int | None = None
    mamba_ssm_dtype: str | None = None  # --mamba-ssm-dtype; None -> the model card's
    disable_overlap_schedule: bool = False  # --disable-overlap-schedule; SGLang may also turn it off itself


@dataclass(frozen=True)
class MemoryPlan:
    """Figures in GB are GiB, as SGLang prints them ("GB" = 1 << 30 bytes)."""

    pre_load_avail_gb: float
    weights_gb_per_gpu: float
    draft_weights_gb_per_gpu: float
    post_load_avail_gb: float  # what "Load weight end ... avail mem" prints (target weights only)
    rest_gb: float  # memory for caches after weights, before the mamba split
    mamba_cache_per_req_mb: float
    max_mamba_cache_size: int
    conv_state_gb: float
    ssm_state_gb: float
    intermediate_ssm_gb: float
    intermediate_conv_gb: float
    kv_tokens: int  # max_total_num_tokens
    k_size_gb: float
    v_size_gb: float
    mamba_ratio: int
    max_running_requests: int  # effective, per dp worker
    context_len: int
    mem_fraction_static: float  # resolved
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    failure: MemoryFailure | None
    requested_max_running_requests: int | None = None  # after the speculative default of 48
    num_draft_tokens: int | None = None  # resolved (DDTREE: budget + 1)
    kv_cell_bytes: int = 0  # per token, including the DFLASH draft share
    draft_k_size_gb: float = 0.0
    draft_v_size_gb: float = 0.0
    pool_end_avail_gb: float = 0.0  # what "Memory pool end. avail mem" prints
    release: str = DEFAULT_RELEASE
    overlap_schedule: bool = True  # resolved
    mamba_scheduler_strategy: str = "-"  # resolved; "-" for a dense model or without the radix cache

    @property
    def feasible(self) -> bool:
        return self.failure is None

    @property
    def mamba_cache_gb(self) -> float:
        return self.conv_state_gb + self.ssm_state_gb + self.intermediate_ssm_gb + self.intermediate_conv_gb


def sizes_draft(algorithm: str | None, release: str) -> bool:
    """Whether `release`'s KV sizing counts the draft model of `algorithm` (its weights and KV cells),
    so that a plan needs the draft's model card."""
    algorithm = _normalize_algorithm(algorithm)
    return algorithm in DFLASH_FAMILY or (algorithm in EAGLE_FAMILY and RULES[release].eagle_draft_sized)


def plan_memory(model: ModelCard, inputs: MemoryInputs, draft: ModelCard | None = None) -> MemoryPlan:
    """What SGLang `inputs.release` would allocate for `model` under `inputs`, and how it would fail if it does.
    `draft`: the draft model's card where the release sizes it (`sizes_draft`), else not read."""
    _validate(inputs)
    rules = RULES[inputs.release]
    if inputs.language_model_only:
        # The checkpoint's language model alone: ModelConfig.is_multimodal is False (configs/model_config.py:
        # 674-675, :820-827), so no VLM fraction, multimodal prefill-graph rule or multimodal KV reserve applies.
        model = replace(model, is_multimodal=False)
    algorithm = _normalize_algorithm(inputs.speculative_algorithm)
    if not sizes_draft(algorithm, inputs.release):
        draft = None
    elif draft is None:
        raise ValueError(f"--speculative-algorithm {algorithm} needs the draft model card to size the KV pool")
    num_draft_tokens = _resolve_num_draft_tokens(model, inputs, algorithm, draft)
    requested_reqs = inputs.max_running_requests
    if algorithm is not None and requested_reqs is None:
        requested_reqs = SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
    context_len = inputs.context_length or model.context_length
    chunked_prefill, graph_max_bs, mem_fraction = _gpu_memory_settings(model, inputs, algorithm, rules, requested_reqs)
    overlap, strategy = _schedule(model, inputs, algorithm, rules)

    tp = inputs.tp_size
    pre_load = inputs.gpu_memory_mib / 1024 - inputs.gpu_reserved_mib / 1024
    weights = model.weights_bytes / tp / GIB
    with_draft = draft is not None and algorithm is not None
    draft_weights = draft.weights_bytes / tp / GIB if (with_draft and draft is not None) else 0.0
    post_load = pre_load - weights
    # What the KV profile measures as free (kvc.py:3000 get_available_gpu_memory).
    profiled_free = post_load - (draft_weights if rules.draft_loads_before_kv_profile else 0.0)
    profiled = profiled_free - inputs.post_load_overhead_mib / 1024
    # kvc.py:3007 slack_gb = pre_model_load_memory * (1 - mem_fraction_static); kvc.py:3038 rest_memory.
    mm_reserve = rules.multimodal_reserve_mib / 1024 if model.is_multimodal else 0.0
    rest = profiled - pre_load * (1 - mem_fraction) - mm_reserve

    ratio = _mamba_ratio(model, inputs, strategy, overlap)
    geometry = _MambaGeometry.of(model, inputs) if model.is_hybrid else None
    cell = _kv_cell_bytes(model, inputs, tp, algorithm, draft, rules)

    base: dict[str, Any] = dict(
        pre_load_avail_gb=pre_load,
        weights_gb_per_gpu=weights,
        draft_weights_gb_per_gpu=draft_weights,
        post_load_avail_gb=post_load,
        rest_gb=rest,
        mamba_cache_per_req_mb=geometry.per_req_bytes / MIB if geometry else 0.0,
        mamba_ratio=ratio,
        context_len=context_len,
        mem_fraction_static=mem_fraction,
        chunked_prefill_size=chunked_prefill,
        cuda_graph_max_bs=graph_max_bs,
        requested_max_running_requests=requested_reqs,
        num_draft_tokens=num_draft_tokens,
        kv_cell_bytes=cell,
        release=inputs.release,
        overlap_schedule=overlap,
        mamba_scheduler_strategy=strategy,
    )
    empty_pools: dict[str, Any] = dict(
        max_mamba_cache_size=0,
        conv_state_gb=0.0,
        ssm_state_gb=0.0,
        intermediate_ssm_gb=0.0,
        intermediate_conv_gb=0.0,
        kv_tokens=0,
        k_size_gb=0.0,
        v_size_gb=0.0,
        max_running_requests=0,
    )

    def stopped(failure: MemoryFailure, **sizes: int) -> MemoryPlan:
        return MemoryPlan(**base, **{**empty_pools, **sizes}, failure=failure)

    if post_load < 0:
        return stopped(_cuda_oom(-post_load, pre_load, inputs.gpu_memory_mib, "target"))
    if rules.draft_loads_before_kv_profile and profiled_free < 0:
        return stopped(_cuda_oom(-profiled_free, post_load, inputs.gpu_memory_mib, "draft"))

    mamba_size = 0
    rest_after_mamba = rest
    if geometry is not None:
        if rules.mamba_sizing == "reserve_requested":
            mamba_size, rest_after_mamba = _mamba_cache_reserve_requested(geometry.per_req_bytes, rest, inputs, algorithm, requested_reqs, num_draft_tokens)
        else:
            mamba_size, rest_after_mamba = _mamba_cache_joint_padded(geometry.per_req_bytes, rest, inputs, algorithm, requested_reqs, num_draft_tokens, ratio)
            if mamba_size <= 0:
                # kvc.py:3392-3402
                refused = MemoryFailure(
                    failure_class="kv_pool_too_small",
                    message=(
                        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                        f"Computed max_mamba_cache_size={mamba_size} "
                        f"(total_rest_memory={rest_after_mamba:.2f} GB, "
                        f"mamba_cache_per_req={geometry.per_req_bytes / MIB:.2f} MB). "
                        "Try: (1) reduce --max-running-requests, "
                        "(2) increase --mem-fraction-static, "
                        "(3) reduce --speculative-num-draft-tokens, or "
                        "(4) use GPUs with more memory."
                    ),
                    phase="mamba_cache",
                    exception="RuntimeError",
                )
                return stopped(refused, max_mamba_cache_size=mamba_size)
            # +1 accounts for each pool's padding slot (kvc.py:3404-3409).
            rest_after_mamba -= (mamba_size + 1) * geometry.per_req_bytes / GIB
    if rules.mamba_sizing == "joint_padded" and rest_after_mamba <= 0:
        # kvc.py:3042-3058: the loaded weights (target + draft) leave no KV budget.
        minimum = 1 - profiled / pre_load
        no_budget = MemoryFailure(
            failure_class="kv_pool_too_small",
            message=(
                "Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={mem_fraction}. "
                f"Raise --mem-fraction-static above {math.ceil(minimum * 1000) / 1000:.3f} "
                f"(minimum viable = 1 - available/pre = {minimum:.4f}). "
                "If using speculative decoding, draft weights are now counted."
            ),
            phase="kv_cache",
            exception="ValueError",
        )
        return stopped(no_budget, max_mamba_cache_size=mamba_size)

    # pool.py:637-647 DefaultPoolConfigurator.calculate_pool_sizes (kvc.py:3060: int(rest * 2^30) bytes).
    tokens = int(rest_after_mamba * GIB) // cell
    tokens = tokens // inputs.page_size * inputs.page_size
    if tokens <= 0:
        # pool.py:94-99 (MemoryPoolConfig is built without mem_fraction_static, so no "Current value").
        message = "Not enough memory. Please try to increase --mem-fraction-static."
        return stopped(MemoryFailure("kv_pool_too_small", message, "kv_cache", "RuntimeError"), max_mamba_cache_size=mamba_size)
    if inputs.max_total_tokens is not None:
        # kvc.py:3090-3105 and pool.py:649-653: the user cap, page-aligned again.
        tokens = min(tokens, inputs.max_total_tokens) // inputs.page_size * inputs.page_size

    max_reqs = _resolve_max_num_reqs(tokens, context_len, requested_reqs, mamba_size if geometry else None, ratio, rules)
    if geometry is not None and max_reqs <= 0 and rules.mamba_sizing == "joint_padded":
        # kvc.py:3152-3160
        no_requests = MemoryFailure(
            failure_class="max_running_requests_zero",
            message=(
                "Hybrid (mamba/linear-attention) state cache is too small to serve "
                f"any requests. max_mamba_cache_size={mamba_size}, "
                f"mamba_ratio={ratio}, resulting max_num_reqs={max_reqs}. "
                "Try: (1) reduce --max-running-requests, "
                "(2) increase --mem-fraction-static, or "
                "(3) use GPUs with more memory."
            ),
            phase="kv_cache",
            exception="RuntimeError",
        )
        return stopped(no_requests, max_mamba_cache_size=mamba_size, kv_tokens=tokens, max_running_requests=max_reqs)

    # The pools are allocated with the resolved sizes (even a zero max_num_reqs in 0.5.12).
    pools = _pool_sizes(model, inputs, geometry, mamba_size, max(max_reqs, 0), tokens, num_draft_tokens, algorithm)
    # The draft worker allocates its own KV pool with the same token count (sized into the DFLASH cell).
    draft_side = _kv_side_gb(draft, inputs, tokens) if (with_draft and draft is not None) else 0.0
    pool_end = profiled - sum(pools.values())  # the target's pools only, as its "Memory pool end" line
    plan_fields: dict[str, Any] = dict(
        **base,
        max_mamba_cache_size=mamba_size,
        kv_tokens=tokens,
        max_running_requests=max_reqs,
        pool_end_avail_gb=pool_end,
        draft_k_size_gb=draft_side,
        draft_v_size_gb=draft_side,
        **pools,
    )

    failure: MemoryFailure | None = None
    # managers/tp_worker.py:420-425 (0.5.23; the same asserts in 0.5.12's tp_worker).
    max_req_len = min(context_len - 1, tokens - 1)
    if max_reqs <= 0:
        failure = MemoryFailure("max_running_requests_zero", "max_running_request is zero", "scheduler_init", "AssertionError")
    elif not (max_req_len > 0 and max_req_len - rules.max_req_len_margin > 0):
        failure = MemoryFailure("kv_pool_too_small", "Memory pool size is too small", "scheduler_init", "AssertionError")
    elif not rules.draft_loads_before_kv_profile and draft_weights > pool_end - 2 * draft_side:
        # 0.5.12: the draft worker loads after the target's pools, into what mem_fraction_static left over.
        free = pool_end - 2 * draft_side
        failure = _cuda_oom(draft_weights - free, free, inputs.gpu_memory_mib, "draft")
    return MemoryPlan(**plan_fields, failure=failure)


def smallest_fix(model: ModelCard, inputs: MemoryInputs, draft: ModelCard | None = None) -> list[Adjustment] | None:
    """The smallest configuration change that starts the server with the concurrency it asks for.

    A plan counts as fixed when it starts and its effective max_running_requests equals the requested
    one (a server that silently caps concurrency to 2 does not run the benchmark that was asked for).
    Preference: lower --max-running-requests (largest value that works), then raise
    --mem-fraction-static (smallest value up to SAFE_MAX_MEM_FRACTION_STATIC; lowered instead when the
    draft's weights are what does not fit), then, for a hybrid model, --disable-radix-cache, then
    shorten --context-length (halving, down to 2048). [] when nothing needs fixing; None when none of
    these works.
    """
    current = plan_memory(model, inputs, draft)
    if _serves_as_requested(current):
        return []

    requested = current.requested_max_running_requests
    if requested is not None:
        for value in range(requested - 1, 0, -1):
            if _serves_as_requested(plan_memory(model, replace(inputs, max_running_requests=value), draft)):
                return [
                    Adjustment(
                        "max_running_requests",
                        requested,
                        value,
                        f"{requested} concurrent requests do not fit ({_why(current)}); {value} do",
                    )
                ]

    start = current.mem_fraction_static
    # Raising the fraction grows the caches; when the draft's weights are what does not fit in the
    # part left outside the fraction (0.5.12), lowering it is the fix instead.
    draft_oom = current.failure is not None and current.failure.model_role == "draft"
    if draft_oom:
        candidates = [round(start - step / 100, 2) for step in range(1, math.floor(round(start * 100, 6)))]
    else:
        steps = math.floor(round((SAFE_MAX_MEM_FRACTION_STATIC - start) * 100, 6))
        candidates = [round(start + step / 100, 2) for step in range(1, steps + 1)]
    for fraction in candidates:
        if _serves_as_requested(plan_memory(model, replace(inputs, mem_fraction_static=fraction), draft)):
            purpose = "leaves room for the draft model" if draft_oom else "leaves room for the caches"
            return [Adjustment("mem_fraction_static", start, fraction, f"{_why(current)}; mem_fraction_static={fraction} {purpose}")]

    # Only where the strategy is left to SGLang: an explicit extra_buffer refuses --disable-radix-cache.
    if model.is_hybrid and not inputs.disable_radix_cache and inputs.mamba_scheduler_strategy == "auto":
        # Without the radix cache the mamba state needs no extra-buffer slots (0.5.23's
        # extra_buffer keeps `mamba_ratio` of them per request; overrides.py:470-474): the seed
        # campaign's own way, which keeps the workload as defined (a shorter context would not).
        if _serves_as_requested(plan_memory(model, replace(inputs, disable_radix_cache=True), draft)):
            return [Adjustment("disable_radix_cache", False, True, f"{_why(current)}; without the radix cache the mamba state fits")]

    context = current.context_len
    length = context // 2
    while length >= 2048:
        if _serves_as_requested(plan_memory(model, replace(inputs, context_length=length), draft)):
            return [Adjustment("context_length", context, length, f"{_why(current)}; context_length={length} fits")]
        length //= 2
    return None


def _serves_as_requested(plan: MemoryPlan) -> bool:
    if plan.failure is not None:
        return False
    return plan.requested_max_running_requests is None or plan.max_running_requests == plan.requested_max_running_requests


def _why(plan: MemoryPlan) -> str:
    if plan.failure is not None:
        return f"{plan.failure.exception}: {plan.failure.message.splitlines()[0]}"
    return f"SGLang would cap max_running_requests at {plan.max_running_requests} (max_mamba_cache_size={plan.max_mamba_cache_size}, mamba_ratio={plan.mamba_ratio})"


@dataclass(frozen=True)
class _MambaGeometry:
    """Per-layer GDN state sizes on one TP rank (configs/qwen3_next.py:287-308 mamba2_cache_params,
    configs/mamba_utils.py:195-243 Mamba2StateShape.create, :116-125 mamba_cache_per_req)."""

    num_layers: int
    conv_numel: int
    ssm_numel: int
    ssm_bytes: int

    @property
    def per_req_bytes(self) -> int:
        return self.num_layers * (self.conv_numel * MAMBA_CONV_DTYPE_BYTES + self.ssm_numel * self.ssm_bytes)

    @classmethod
    def of(cls, model: ModelCard, inputs: MemoryInputs) -> _MambaGeometry:
        tp = inputs.tp_size
        key_heads = _required(model.linear_num_key_heads, model, "linear_num_key_heads")
        value_heads = _required(model.linear_num_value_heads, model, "linear_num_value_heads")
        key_dim = _required(model.linear_key_head_dim, model, "linear_key_head_dim")
        value_dim = _required(model.linear_value_head_dim, model, "linear_value_head_dim")
        kernel = _required(model.linear_conv_kernel_dim, model, "linear_conv_kernel_dim")
        n_groups = key_heads
        if n_groups % tp != 0:
            # extra_groups_for_head_shards: groups are replicated so every head shard has its group.
            n_groups += tp - n_groups
        conv_dim = value_dim * value_heads + 2 * n_groups * key_dim
        conv_numel = (conv_dim // tp) * (kernel - 1)
        ssm_numel = (value_heads // tp) * value_dim * key_dim
        ssm_dtype = inputs.mamba_ssm_dtype or _required(model.mamba_ssm_dtype, model, "mamba_ssm_dtype")
        return cls(len(model.linear_attention_layer_ids), conv_numel, ssm_numel, DTYPE_BYTES[ssm_dtype])


def _required(value: Any, model: ModelCard, field: str) -> Any:
    if value is None:
        raise ValueError(f"model card {model.name}: {field} is needed for a model with linear-attention layers")
    return value


def _mamba_cache_reserve_requested(
    per_req: int,
    rest: float,
    inputs: MemoryInputs,
    algorithm: str | None,
    max_running: int | None,
    num_draft_tokens: int | None,
) -> tuple[int, float]:
    """0.5.12 handle_max_mamba_cache: (max_mamba_cache_size, rest GiB left for the KV pool).
    Intermediate states for every requested request are reserved up front."""
    if algorithm is not None:
        rest -= per_req * (max_running or 0) * (num_draft_tokens or 0) / GIB
    if inputs.max_mamba_cache_size is not None:
        size = inputs.max_mamba_cache_size
    elif inputs.disable_radix_cache and max_running is not None:
        size = max_running
    else:
        budget = rest * inputs.mamba_full_memory_ratio / (1 + inputs.mamba_full_memory_ratio)
        size = int((budget * GIB) // per_req)
    return size, rest - size * per_req / GIB


def _mamba_cache_joint_padded(
    per_req: int,
    rest: float,
    inputs: MemoryInputs,
    algorithm: str | None,
    max_running: int | None,
    num_draft_tokens: int | None,
    ratio: int,
) -> tuple[int, float]:
    """0.5.23 kvc.py:3229-3386 `_handle_max_mamba_cache` (one attention-DP rank, no PP, no ReplaySSM):
    (max_mamba_cache_size, rest GiB after the intermediate states; the caller takes the padded main
    states out). The expressions keep upstream's order of float operations."""
    reserves_spec_state = algorithm is not None  # kvc.py:3294-3298 (not PD prefill, no ReplaySSM)
    draft_tokens = num_draft_tokens or 0
    requests = max(1, max_running or 0)  # kvc.py:3316, 3373: max(1, max_running_requests // attn_dp_size)
    if inputs.max_mamba_cache_size is not None:  # kvc.py:3303-3324
        size = inputs.max_mamba_cache_size
        if reserves_spec_state:
            capped = min(requests, size // ratio)
            rest = rest - (per_req * (capped + 1) * draft_tokens / GIB)
    elif inputs.disable_radix_cache and max_running is not None:  # kvc.py:3325-3344
        size = max(1, max_running)
        if reserves_spec_state:
            rest = rest - (per_req * (size + 1) * draft_tokens / GIB)
    else:  # kvc.py:3345-3386: a joint solve within mamba_full_memory_ratio's share
        ratio_share = inputs.mamba_full_memory_ratio
        budget_bytes = rest * ratio_share / (1 + ratio_share) * GIB
        if reserves_spec_state:
            size = int((budget_bytes - per_req * (1 + draft_tokens)) // (per_req * (1 + draft_tokens / ratio)))
            capped = min(requests, size // ratio)
            rest = rest - (per_req * (capped + 1) * draft_tokens / GIB)
        else:
            size = int((budget_bytes - per_req) // per_req)
    return size, rest


def _resolve_max_num_reqs(tokens: int, context_len: int, requested: int | None, mamba_size: int | None, ratio: int, rules: ReleaseRules) -> int:
    # 0.5.23: kvc.py:3119-3150.
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    if requested is not None:
        if rules.requested_requests_capped_by == "estimate":
            value = min(requested, estimated)
        else:
            value = min(max(1, requested), tokens // 2)
    else:
        value = min(estimated, tokens // 2)
    if mamba_size is not None:
        value = min(value, mamba_size // ratio)
    return value


def _schedule(model: ModelCard, inputs: MemoryInputs, algorithm: str | None, rules: ReleaseRules) -> tuple[bool, str]:
    """(overlap schedule on, resolved mamba radix-cache strategy) after ServerArgs resolution."""
    overlap = not (inputs.disable_overlap_schedule or algorithm in rules.overlap_off_algorithms)
    if not model.is_hybrid or inputs.disable_radix_cache:
        # overrides.py:470-474: no strategy without the mamba radix cache.
        return overlap, "-"
    strategy = inputs.mamba_scheduler_strategy
    if strategy == "auto":
        # 0.5.23 overrides.py:477-486 (Qwen3.5/3.6 and Qwen3-Next are in _MAMBA_EXTRA_BUFFER_ARCHS,
        # overrides.py:403-412, with the default triton linear-attention backend).
        wants_extra = rules.auto_strategy_follows_overlap and (overlap or inputs.page_size > 1)
        strategy = "extra_buffer" if wants_extra else "no_buffer"
    if strategy == "no_buffer":
        # no_buffer runs without the overlap schedule (arg_groups/mamba_hook.py:156-160).
        overlap = False
    return overlap, strategy


def _mamba_ratio(model: ModelCard, inputs: MemoryInputs, strategy: str, overlap: bool) -> int:
    """Mamba state slots per running request (0.5.23 kvc.py:3062-3088; the same rule in 0.5.12)."""
    if not model.is_hybrid or inputs.disable_radix_cache:
        return 1
    if strategy == "no_buffer":
        return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
    if strategy == "extra_buffer_lazy":
        extra = MAMBA_EXTRA_BUFFER_SLOTS_LAZY
    elif overlap:
        extra = MAMBA_EXTRA_BUFFER_SLOTS_OVERLAP
    else:
        extra = MAMBA_EXTRA_BUFFER_SLOTS_NO_OVERLAP
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + extra


def _kv_dtype_bytes(model: ModelCard, inputs: MemoryInputs, kv_cache_dtype: str | None = None) -> int:
    # mem_cache/kv_cache_dtype.py:49-75: auto -> the model's dtype.
    given = inputs.kv_cache_dtype if kv_cache_dtype is None else kv_cache_dtype
    if given == "auto":
        return DTYPE_BYTES[model.kv_dtype]
    name = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3fn": "fp8_e4m3"}.get(given, given)
    if name not in DTYPE_BYTES:
        raise ValueError(f"unsupported --kv-cache-dtype {given!r}")
    return DTYPE_BYTES[name]


def _draft_kv_dtype_bytes(draft: ModelCard, inputs: MemoryInputs) -> int:
    """A DFLASH draft's KV bytes per element (0.5.23 mem_cache/kv_cache_dtype.py:45-48, :94-108):
    --speculative-draft-kv-cache-dtype where given, else the target's --kv-cache-dtype; an fa4 draft
    cannot read a quantized KV and keeps its own compute dtype."""
    elements = _kv_dtype_bytes(draft, inputs, inputs.draft_kv_cache_dtype)
    if inputs.draft_attention_backend == "fa4":
        return DTYPE_BYTES[draft.kv_dtype]
    return elements


def _kv_heads_per_rank(model: ModelCard, tp: int) -> int:
    # configs/model_config.py:1700-1711 get_num_kv_heads: replicated when there are fewer than TP ranks.
    return max(1, model.num_key_value_heads // tp)


def _kv_layers(model: ModelCard) -> int:
    # pool.py:229-237: a hybrid model keeps KV for its full-attention layers only.
    return len(model.full_attention_layer_ids) if model.is_hybrid else model.num_hidden_layers


def _kv_cell_bytes(model: ModelCard, inputs: MemoryInputs, tp: int, algorithm: str | None, draft: ModelCard | None, rules: ReleaseRules) -> int:
    # pool.py:491-498: kv heads per rank x (head_dim + v_head_dim) x layers x dtype bytes.
    layers = _kv_layers(model)
    cell = _kv_heads_per_rank(model, tp) * 2 * model.head_dim * layers * _kv_dtype_bytes(model, inputs)
    if algorithm in DFLASH_FAMILY and draft is not None:
        if rules.dflash_draft_cell_from_draft_geometry:
            # dflash_utils.py:121-134 + :157-166: the draft's own bytes per token are added (its attention
            # TP is the target's, speculative/draft_parallel.py:71-76).
            draft_cell = _kv_heads_per_rank(draft, tp) * 2 * draft.head_dim * draft.num_hidden_layers * _draft_kv_dtype_bytes(draft, inputs)
            return cell + draft_cell
        # dflash_utils.scale_kv_cell_size_per_token_for_dflash: scaled by the layer counts.
        total_layers = layers + draft.num_hidden_layers
        cell = (cell * total_layers + layers - 1) // layers
    if algorithm in EAGLE_FAMILY and draft is not None:  # pool_configurator.py:290-314 (plan_memory: only where sized)
        cell += int(cell * draft.num_hidden_layers / layers)
    return cell


def _pool_sizes(
    model: ModelCard,
    inputs: MemoryInputs,
    geometry: _MambaGeometry | None,
    mamba_size: int,
    max_reqs: int,
    tokens: int,
    num_draft_tokens: int | None,
    algorithm: str | None,
) -> dict[str, float]:
    sizes = {"conv_state_gb": 0.0, "ssm_state_gb": 0.0, "intermediate_ssm_gb": 0.0, "intermediate_conv_gb": 0.0}
    if geometry is not None:
        # MambaPool: one padding slot each; intermediate states sized by max_num_reqs (spec_state_size).
        layers = geometry.num_layers
        conv_slot = geometry.conv_numel * MAMBA_CONV_DTYPE_BYTES
        ssm_slot = geometry.ssm_numel * geometry.ssm_bytes
        sizes["conv_state_gb"] = layers * (mamba_size + 1) * conv_slot / GIB
        sizes["ssm_state_gb"] = layers * (mamba_size + 1) * ssm_slot / GIB
        if algorithm is not None:
            draft_tokens = num_draft_tokens or 0
            sizes["intermediate_ssm_gb"] = layers * (max_reqs + 1) * draft_tokens * ssm_slot / GIB
            sizes["intermediate_conv_gb"] = layers * (max_reqs + 1) * draft_tokens * conv_slot / GIB
    sizes["k_size_gb"] = sizes["v_size_gb"] = _kv_side_gb(model, inputs, tokens)
    return sizes


def _kv_side_gb(card: ModelCard, inputs: MemoryInputs, tokens: int) -> float:
    """GiB of the K (or the V) buffers: MHATokenToKVPool keeps size + page_size slots per layer."""
    slots = _kv_layers(card) * (tokens + inputs.page_size) * _kv_heads_per_rank(card, inputs.tp_size) * card.head_dim
    return slots * _kv_dtype_bytes(card, inputs) / GIB


def _gpu_memory_settings(model: ModelCard, inputs: MemoryInputs, algorithm: str | None, rules: ReleaseRules, requested_reqs: int | None) -> tuple[int, int, float]:
    """chunked_prefill_size, decode cuda graph max bs, mem_fraction_static (_handle_gpu_memory_settings;
    0.5.23: arg_groups/memory_hook.py:47-343)."""
    gpu_mem = inputs.gpu_memory_mib
    tp = inputs.tp_size
    if gpu_mem < 20 * 1024:
        chunked, graph_bs = 2048, 8
    elif gpu_mem < 35 * 1024:
        mid_chunked, mid_bs_small_tp, mid_bs_large_tp = rules.mid_gpu_defaults
        chunked, graph_bs = mid_chunked, (mid_bs_small_tp if tp < 4 else mid_bs_large_tp)
    elif gpu_mem < 60 * 1024:
        chunked, graph_bs = 4096, (32 if tp < 4 else 160)
    elif gpu_mem < 160 * 1024:
        # The 60-90 GiB (H100) and 90-160 GiB (H20, H200, RTX PRO 6000) buckets set the same values.
        chunked, graph_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunked, graph_bs = 16384, 512
    chunked = inputs.chunked_prefill_size if inputs.chunked_prefill_size is not None else chunked
    if inputs.cuda_graph_max_bs is not None:
        graph_bs = inputs.cuda_graph_max_bs
    elif rules.graph_bs_capped_by_requests and inputs.max_running_requests is not None:
        # The --max-running-requests given: the speculative default of 48 comes later (the memory hook
        # runs at arg_groups/pipeline.py:199, the speculative hook at :306).
        graph_bs = min(graph_bs, inputs.max_running_requests)
    if inputs.mem_fraction_static is not None:
        return chunked, graph_bs, inputs.mem_fraction_static

    # 0.5.23 memory_hook.py:304-315 (the same terms in 0.5.12).
    reserved = 512.0
    reserved += max(chunked, 2048) * 1.5 if chunked > 0 else 16384 * 1.5  # max_prefill_tokens default 16384
    # memory_hook.py:357-399 reserve_for_graph_mb: 2 MiB per decode batch size and 8 MiB per prefill
    # capture size, each only while that phase captures graphs (0.5.12: whatever the flags).
    if inputs.decode_cuda_graph or not rules.graph_reserve_follows_backends:
        reserved += graph_bs * 2
    reserved += tp / 8 * 1024
    # A multimodal checkpoint captures prefill graphs only if its architecture is allowed to, or its
    # backend was chosen by flag (0.5.23 skips the compatibility rules then, cuda_graph_hook.py:143-144).
    prefill_graph_allowed = not model.is_multimodal or model.architecture in rules.multimodal_prefill_graph_archs or inputs.prefill_cuda_graph_backend_given
    if prefill_graph_allowed and (inputs.prefill_cuda_graph or not rules.graph_reserve_follows_backends):
        reserved += len(_prefill_capture_sizes(chunked)) * 8
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    draft_reserve, standalone_reserve = rules.speculative_fraction_reserve_mib
    if algorithm == "STANDALONE":
        reserved += standalone_reserve
    elif algorithm is not None and algorithm != "NGRAM":
        reserved += draft_reserve
    fraction = round((gpu_mem - reserved) / gpu_mem, 3)
    if model.is_multimodal:
        fraction *= _vlm_factor(model)
    return chunked, graph_bs, fraction


def _prefill_capture_sizes(max_tokens: int) -> list[int]:
    # arg_groups/cuda_graph_hook.py:480-497 generate_prefill_cuda_graph_batch_sizes.
    sizes = list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256)) + list(range(4608, max_tokens + 1, 512))
    return [s for s in sizes if s <= max_tokens]


def _vlm_factor(model: ModelCard) -> float:
    """adjust_mem_fraction_for_vlm (memory_hook.py:417-462): 0.95 x a ViT-size factor in [0.8, 1.05]."""
    layers = model.vision_num_hidden_layers or 24
    hidden = model.vision_hidden_size or 1024
    complexity_ratio = layers * hidden**2 / (24 * 1024**2)
    dynamic = max(0.8, min(1.05, 1.0 - 0.1 * (complexity_ratio - 1.0)))
    return 0.95 * dynamic


def _resolve_num_draft_tokens(model: ModelCard, inputs: MemoryInputs, algorithm: str | None, draft: ModelCard | None) -> int | None:
    if algorithm is None:
        return None
    if algorithm == "DDTREE":
        # sgl-project/sglang PR #29907: target verify runs draft_token_num = ddtree_budget + 1.
        if inputs.ddtree_budget is None:
            raise ValueError("DDTREE needs ddtree_budget")
        return inputs.ddtree_budget + 1
    if inputs.num_draft_tokens is not None:
        return inputs.num_draft_tokens
    if algorithm == "DFLASH":
        # speculative_hook.py:389-425: the draft config's block size, else 16.
        return (draft.dflash_block_size if draft is not None else None) or DFLASH_DEFAULT_BLOCK_SIZE
    if algorithm in EAGLE_FAMILY:
        # auto_choose_speculative_params: (steps, topk, draft tokens); topk 1 -> steps + 1.
        return 8 if model.architecture in ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM") and algorithm != "STANDALONE" else 4
    raise ValueError(f"num_draft_tokens is required for --speculative-algorithm {algorithm}")


def _normalize_algorithm(value: str | None) -> str | None:
    if value is None:
        return None
    name = value.upper()
    # speculative_hook._resolve_speculative_algorithm_alias
    return "EAGLE" if name == "NEXTN" else name


def _cuda_oom(shortfall_gib: float, free_gib: float, total_mib: int, role: str) -> MemoryFailure:
    # PyTorch's wording; "Tried to allocate" names the shortfall, since which tensor fails first is unknown.
    message = (
        f"CUDA out of memory. Tried to allocate {max(shortfall_gib, 0.01):.2f} GiB. GPU 0 has a total capacity of {total_mib / 1024:.2f} GiB of which {max(free_gib, 0.0) * 1024:.2f} MiB is free."
    )
    return MemoryFailure("cuda_oom", message, "load_weights", "torch.OutOfMemoryError", model_role=role)


def _validate(inputs: MemoryInputs) -> None:
    if inputs.release not in RULES:
        raise ValueError(f"release {inputs.release!r} is not a release fleet knows ({', '.join(KNOWN_RELEASES)}); map a host's version with fleet.host.engines.sglang.release.choose_release")
    if inputs.gpu_memory_mib <= 0:
        raise ValueError(f"gpu_memory_mib must be positive, got {inputs.gpu_memory_mib}")
    if inputs.tp_size <= 0:
        raise ValueError(f"tp_size must be positive, got {inputs.tp_size}")
    if inputs.mem_fraction_static is not None and not 0 < inputs.mem_fraction_static < 1:
        raise ValueError(f"mem_fraction_static must be in (0, 1), got {inputs.mem_fraction_static}")
    if inputs.max_running_requests is not None and inputs.max_running_requests <= 0:
        raise ValueError(f"max_running_requests must be positive, got {inputs.max_running_requests}")
    if inputs.page_size <= 0:
        raise ValueError(f"page_size must be positive, got {inputs.page_size}")
    if inputs.mamba_scheduler_strategy not in MAMBA_STRATEGIES:
        raise ValueError(f"unknown mamba_scheduler_strategy {inputs.mamba_scheduler_strategy!r}")
