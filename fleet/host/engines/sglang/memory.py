"""SGLang's GPU memory sizing, as pure functions: will a server configuration start, and with what pools?

Standard library only (the simulator engine imports this on hosts without pydantic).

The steps follow SGLang's own order (sources: the sglang 0.5.11 / 0.5.12 / 0.5.13 wheels,
`sglang/srt/...`):

1. `server_args._handle_gpu_memory_settings`: chunked_prefill_size, cuda_graph_max_bs and, when not
   given, mem_fraction_static (then `adjust_mem_fraction_for_vlm` for multimodal checkpoints).
   Speculative decoding defaults max_running_requests to 48 (`speculative_hook`).
2. `model_runner.load_model`: weights land on the GPU ("Load weight begin/end ... avail mem").
3. `ModelRunnerKVCacheMixin._profile_available_bytes`:
   rest = post_load_avail - pre_load_avail * (1 - mem_fraction_static), then
   `handle_max_mamba_cache` for hybrid models (case A: --max-mamba-cache-size, case B:
   --disable-radix-cache with --max-running-requests, case C: the --mamba-full-memory-ratio split),
   which takes the mamba state (and, with speculative decoding, the per-draft-token intermediate
   states) out of `rest`.
4. `pool_configurator.DefaultPoolConfigurator`: max_total_num_tokens = rest // cell_size, where a
   DFLASH target scales cell_size by (target full-attention layers + draft layers) / target layers.
5. `_resolve_max_num_reqs`: min(requested, token estimate, max_mamba_cache_size // mamba_ratio).
6. Pools are allocated ("Mamba Cache is allocated ...", "KV Cache is allocated ..."), then
   `tp_worker` asserts max_running_requests > 0 and max_req_len > 0.

Version matters for hybrid models with speculative decoding, and the seed campaign only reproduces
with the older formula:
- sglang <= 0.5.12 reserves the intermediate states for the *requested* max_running_requests before
  the ratio split (so more requests shrink the mamba cache), never checks the result, and a mamba
  cache smaller than mamba_ratio ends in `AssertionError: max_running_request is zero` after the
  pools are allocated.
- sglang 0.5.13 solves the split jointly, caps the intermediate states at max_mamba_cache_size //
  ratio, and raises its own RuntimeErrors before allocating.

Two inputs are not in SGLang's formulas but in the GPU: `gpu_reserved_mib` (memory already taken
when SGLang measures the pre-load free memory: driver, CUDA context, NCCL) and
`post_load_overhead_mib` (allocated between "Load weight end" and the KV profile). Their defaults are
calibrated on the seed campaign, see DEFAULT_GPU_RESERVED_MIB and DEFAULT_POST_LOAD_OVERHEAD_MIB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

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
DEFAULT_POST_LOAD_OVERHEAD_MIB = 40.03

# sglang/srt/model_executor/model_runner_kv_cache_mixin.py
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3
MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2
MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP_LAZY = 1
MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP = 1
# SGLANG_MAMBA_CONV_DTYPE default (configs/mamba_utils.py).
MAMBA_CONV_DTYPE_BYTES = 2
SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS = 48
DFLASH_DEFAULT_NUM_DRAFT_TOKENS = 16
# smallest_fix never proposes a larger fraction: above it CUDA graphs and activations run short.
SAFE_MAX_MEM_FRACTION_STATIC = 0.90

_DFLASH_FAMILY = ("DFLASH", "DDTREE")
_EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
_OVERLAP_DISABLED_ALGORITHMS = ("DFLASH", "DDTREE", "NGRAM")


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
    mamba_scheduler_strategy: str = "auto"  # auto (= no_buffer) | no_buffer | extra_buffer | extra_buffer_lazy
    max_mamba_cache_size: int | None = None
    mamba_full_memory_ratio: float = 0.9
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    kv_cache_dtype: str = "auto"
    page_size: int = 1
    gpu_reserved_mib: float = DEFAULT_GPU_RESERVED_MIB
    post_load_overhead_mib: float = DEFAULT_POST_LOAD_OVERHEAD_MIB
    sglang_version: str = "0.5.13"
    max_total_tokens: int | None = None
    mamba_ssm_dtype: str | None = None  # --mamba-ssm-dtype; None -> the model card's
    disable_overlap_schedule: bool = False  # forced on where SGLang forces it (DFLASH, NGRAM, mamba no_buffer)


@dataclass(frozen=True)
class MemoryFailure:
    failure_class: str  # "max_running_requests_zero" | "kv_pool_too_small" | "cuda_oom"
    message: str  # SGLang's exact text for the version planned (PyTorch's wording for cuda_oom)
    # Where SGLang raises: "load_weights" | "mamba_cache" | "kv_cache" (pool sizing, before any pool is
    # allocated) | "scheduler_init" (tp_worker asserts, after the Mamba/KV "is allocated" lines were logged).
    phase: str
    exception: str  # the exception type SGLang shows, e.g. "AssertionError"
    model_role: str = "target"  # "draft" when the draft model's weights do not fit


@dataclass(frozen=True)
class MemoryPlan:
    """Figures in GB are GiB, as SGLang prints them ("GB" = 1 << 30 bytes)."""

    pre_load_avail_gb: float
    weights_gb_per_gpu: float
    draft_weights_gb_per_gpu: float
    post_load_avail_gb: float  # what "Load weight end ... avail mem" prints
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
    sglang_version: str = "0.5.13"

    @property
    def feasible(self) -> bool:
        return self.failure is None

    @property
    def mamba_cache_gb(self) -> float:
        return self.conv_state_gb + self.ssm_state_gb + self.intermediate_ssm_gb + self.intermediate_conv_gb


@dataclass(frozen=True)
class Adjustment:
    field: str
    old: object
    new: object
    reason: str


def plan_memory(model: ModelCard, inputs: MemoryInputs, draft: ModelCard | None = None) -> MemoryPlan:
    """What SGLang would allocate for `model` under `inputs`, and how it would fail if it does."""
    _validate(inputs)
    version = _parse_version(inputs.sglang_version)
    legacy = version < (0, 5, 13)
    algorithm = _normalize_algorithm(inputs.speculative_algorithm)
    if algorithm in _DFLASH_FAMILY and draft is None:
        raise ValueError(f"--speculative-algorithm {algorithm} needs the draft model card to size the KV pool")
    if algorithm == "DFLASH" and version < (0, 5, 11):
        raise ValueError("DFLASH is not in sglang before 0.5.11")
    num_draft_tokens = _resolve_num_draft_tokens(model, inputs, algorithm, draft)
    requested_reqs = inputs.max_running_requests
    if algorithm is not None and requested_reqs is None:
        requested_reqs = SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
    context_len = inputs.context_length or model.context_length
    chunked_prefill, graph_max_bs, mem_fraction = _gpu_memory_settings(model, inputs, algorithm, version)

    tp = inputs.tp_size
    pre_load = inputs.gpu_memory_mib / 1024 - inputs.gpu_reserved_mib / 1024
    weights = model.weights_bytes / tp / GIB
    draft_weights = draft.weights_bytes / tp / GIB if (draft is not None and algorithm is not None) else 0.0
    post_load = pre_load - weights
    profiled = post_load - inputs.post_load_overhead_mib / 1024
    rest = profiled - pre_load * (1 - mem_fraction)

    ratio = _mamba_ratio(model, inputs, algorithm)
    geometry = _MambaGeometry.of(model, inputs) if model.is_hybrid else None
    cell = _kv_cell_bytes(model, inputs, tp, algorithm, draft)

    base = dict(
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
        sglang_version=inputs.sglang_version,
    )
    empty_pools = dict(
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

    mamba_size = 0
    if geometry is not None:
        mamba_size, rest_after_mamba = _handle_max_mamba_cache(
            geometry.per_req_bytes, rest, inputs, algorithm, requested_reqs, num_draft_tokens, ratio, legacy
        )
        if not legacy and mamba_size <= 0:
            failure = MemoryFailure(
                failure_class="kv_pool_too_small",
                message=(
                    "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                    f"Computed max_mamba_cache_size={mamba_size} "
                    f"(total_rest_memory={rest_after_mamba + mamba_size * geometry.per_req_bytes / GIB:.2f} GB, "
                    f"mamba_cache_per_req={geometry.per_req_bytes / MIB:.2f} MB). "
                    "Try: (1) reduce --max-running-requests, "
                    "(2) increase --mem-fraction-static, "
                    "(3) reduce --speculative-num-draft-tokens, or "
                    "(4) use GPUs with more memory."
                ),
                phase="mamba_cache",
                exception="RuntimeError",
            )
            return stopped(failure, max_mamba_cache_size=mamba_size)
    else:
        rest_after_mamba = rest

    # DefaultPoolConfigurator.calculate_pool_sizes
    tokens = int(rest_after_mamba * GIB) // cell
    tokens = tokens // inputs.page_size * inputs.page_size
    if tokens <= 0:
        message = "Not enough memory. Please try to increase --mem-fraction-static."
        if version < (0, 5, 11):
            message += f" Current value: mem_fraction_static={mem_fraction}"
        return stopped(MemoryFailure("kv_pool_too_small", message, "kv_cache", "RuntimeError"), max_mamba_cache_size=mamba_size)
    if inputs.max_total_tokens is not None:
        tokens = min(tokens, inputs.max_total_tokens) // inputs.page_size * inputs.page_size

    max_reqs = _resolve_max_num_reqs(tokens, context_len, requested_reqs, mamba_size if geometry else None, ratio)
    if geometry is not None and max_reqs <= 0 and not legacy:
        failure = MemoryFailure(
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
        return stopped(failure, max_mamba_cache_size=mamba_size, kv_tokens=tokens, max_running_requests=max_reqs)

    # _init_pools: the pools are allocated with the resolved sizes (even a zero max_num_reqs, <= 0.5.12).
    pools = _pool_sizes(model, inputs, geometry, mamba_size, max(max_reqs, 0), tokens, num_draft_tokens, algorithm)
    # The draft worker allocates its own KV pool with the same token count (sized into the DFLASH cell).
    draft_side = _kv_side_gb(draft, inputs, tokens) if (draft is not None and algorithm is not None) else 0.0
    pool_end = profiled - sum(pools.values())
    plan_fields = dict(
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
    max_req_len = min(context_len - 1, tokens - 1)
    if max_reqs <= 0:
        failure = MemoryFailure("max_running_requests_zero", "max_running_request is zero", "scheduler_init", "AssertionError")
    elif not (max_req_len > 0 and max_req_len - 5 > 0):
        failure = MemoryFailure("kv_pool_too_small", "Memory pool size is too small", "scheduler_init", "AssertionError")
    elif draft_weights > pool_end - 2 * draft_side:
        # The draft worker loads after the target's pools, into what mem_fraction_static left over.
        free = pool_end - 2 * draft_side
        failure = _cuda_oom(draft_weights - free, free, inputs.gpu_memory_mib, "draft")
    return MemoryPlan(**plan_fields, failure=failure)


def smallest_fix(model: ModelCard, inputs: MemoryInputs, draft: ModelCard | None = None) -> list[Adjustment] | None:
    """The smallest configuration change that starts the server with the concurrency it asks for.

    A plan counts as fixed when it starts and its effective max_running_requests equals the requested
    one (a server that silently caps concurrency to 2 does not run the benchmark that was asked for).
    Preference: lower --max-running-requests (largest value that works), then raise
    --mem-fraction-static (smallest value up to SAFE_MAX_MEM_FRACTION_STATIC; lowered instead when the
    draft's weights are what does not fit), then shorten --context-length (halving, down to 2048).
    [] when nothing needs fixing; None when none of these works.
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
    # part left outside the fraction, lowering it is the fix instead.
    draft_oom = current.failure is not None and current.failure.model_role == "draft"
    if draft_oom:
        candidates = [round(start - step / 100, 2) for step in range(1, math.floor(round(start * 100, 6)))]
    else:
        steps = math.floor(round((SAFE_MAX_MEM_FRACTION_STATIC - start) * 100, 6))
        candidates = [round(start + step / 100, 2) for step in range(1, steps + 1)]
    for value in candidates:
        if _serves_as_requested(plan_memory(model, replace(inputs, mem_fraction_static=value), draft)):
            purpose = "leaves room for the draft model" if draft_oom else "leaves room for the caches"
            return [Adjustment("mem_fraction_static", start, value, f"{_why(current)}; mem_fraction_static={value} {purpose}")]

    context = current.context_len
    value = context // 2
    while value >= 2048:
        if _serves_as_requested(plan_memory(model, replace(inputs, context_length=value), draft)):
            return [Adjustment("context_length", context, value, f"{_why(current)}; context_length={value} fits")]
        value //= 2
    return None


def _serves_as_requested(plan: MemoryPlan) -> bool:
    if plan.failure is not None:
        return False
    return plan.requested_max_running_requests is None or plan.max_running_requests == plan.requested_max_running_requests


def _why(plan: MemoryPlan) -> str:
    if plan.failure is not None:
        return f"{plan.failure.exception}: {plan.failure.message.splitlines()[0]}"
    return (
        f"SGLang would cap max_running_requests at {plan.max_running_requests} "
        f"(max_mamba_cache_size={plan.max_mamba_cache_size}, mamba_ratio={plan.mamba_ratio})"
    )


@dataclass(frozen=True)
class _MambaGeometry:
    """Per-layer GDN state sizes on one TP rank (Mamba2StateShape.create for Qwen3-Next/3.5)."""

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
        n_groups = model.linear_num_key_heads
        if n_groups % tp != 0:
            # extra_groups_for_head_shards: groups are replicated so every head shard has its group.
            n_groups += tp - n_groups
        conv_dim = model.linear_value_head_dim * model.linear_num_value_heads + 2 * n_groups * model.linear_key_head_dim
        conv_numel = (conv_dim // tp) * (model.linear_conv_kernel_dim - 1)
        ssm_numel = (model.linear_num_value_heads // tp) * model.linear_value_head_dim * model.linear_key_head_dim
        ssm_dtype = inputs.mamba_ssm_dtype or model.mamba_ssm_dtype
        return cls(len(model.linear_attention_layer_ids), conv_numel, ssm_numel, DTYPE_BYTES[ssm_dtype])


def _handle_max_mamba_cache(
    per_req: int,
    rest: float,
    inputs: MemoryInputs,
    algorithm: str | None,
    max_running: int | None,
    num_draft_tokens: int | None,
    ratio: int,
    legacy: bool,
) -> tuple[int, float]:
    """(max_mamba_cache_size, rest GiB left for the KV pool), per handle_max_mamba_cache."""
    spec = algorithm is not None
    per_req_gib = per_req / GIB
    if legacy:
        # <= 0.5.12: intermediate states for every requested request, reserved up front.
        if spec:
            rest -= per_req * max_running * num_draft_tokens / GIB
        if inputs.max_mamba_cache_size is not None:
            size = inputs.max_mamba_cache_size
        elif inputs.disable_radix_cache and max_running is not None:
            size = max_running
        else:
            budget = rest * inputs.mamba_full_memory_ratio / (1 + inputs.mamba_full_memory_ratio)
            size = int((budget * GIB) // per_req)
        return size, rest - size * per_req_gib

    if inputs.max_mamba_cache_size is not None:  # case A
        size = inputs.max_mamba_cache_size
        if spec:
            rest -= per_req * min(max_running, size // ratio) * num_draft_tokens / GIB
    elif inputs.disable_radix_cache and max_running is not None:  # case B
        size = max_running
        if spec:
            rest -= per_req * size * num_draft_tokens / GIB
    else:  # case C: joint solve of main state + intermediate states within the ratio budget
        budget_bytes = rest * inputs.mamba_full_memory_ratio / (1 + inputs.mamba_full_memory_ratio) * GIB
        if spec:
            size = int(budget_bytes // (per_req * (1 + num_draft_tokens / ratio)))
            rest -= per_req * min(max_running, size // ratio) * num_draft_tokens / GIB
        else:
            size = int(budget_bytes // per_req)
    return size, rest - size * per_req_gib


def _resolve_max_num_reqs(tokens: int, context_len: int, requested: int | None, mamba_size: int | None, ratio: int) -> int:
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    if requested is not None:
        value = min(requested, estimated)
    else:
        value = min(estimated, tokens // 2)
    if mamba_size is not None:
        value = min(value, mamba_size // ratio)
    return value


def _mamba_ratio(model: ModelCard, inputs: MemoryInputs, algorithm: str | None) -> int:
    if not model.is_hybrid:
        return 1
    if inputs.disable_radix_cache:
        return 1
    strategy = "no_buffer" if inputs.mamba_scheduler_strategy == "auto" else inputs.mamba_scheduler_strategy
    if strategy == "no_buffer":
        return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
    overlap = not (inputs.disable_overlap_schedule or algorithm in _OVERLAP_DISABLED_ALGORITHMS)
    if not overlap:
        extra = MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP
    elif strategy == "extra_buffer_lazy":
        extra = MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP_LAZY
    else:
        extra = MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + extra


def _kv_dtype_bytes(model: ModelCard, inputs: MemoryInputs) -> int:
    if inputs.kv_cache_dtype == "auto":
        return DTYPE_BYTES[model.kv_dtype]
    name = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3fn": "fp8_e4m3"}.get(inputs.kv_cache_dtype, inputs.kv_cache_dtype)
    if name not in DTYPE_BYTES:
        raise ValueError(f"unsupported --kv-cache-dtype {inputs.kv_cache_dtype!r}")
    return DTYPE_BYTES[name]


def _kv_heads_per_rank(model: ModelCard, tp: int) -> int:
    # ModelConfig.get_num_kv_heads: KV heads are replicated when there are fewer than TP ranks.
    return max(1, model.num_key_value_heads // tp)


def _kv_layers(model: ModelCard) -> int:
    return len(model.full_attention_layer_ids) if model.is_hybrid else model.num_hidden_layers


def _kv_cell_bytes(
    model: ModelCard, inputs: MemoryInputs, tp: int, algorithm: str | None, draft: ModelCard | None
) -> int:
    layers = _kv_layers(model)
    cell = _kv_heads_per_rank(model, tp) * 2 * model.head_dim * layers * _kv_dtype_bytes(model, inputs)
    if algorithm in _DFLASH_FAMILY:
        # dflash_utils.scale_kv_cell_size_per_token_for_dflash: the draft's KV pool shares the budget.
        total_layers = layers + draft.num_hidden_layers
        cell = (cell * total_layers + layers - 1) // layers
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
            sizes["intermediate_ssm_gb"] = layers * (max_reqs + 1) * num_draft_tokens * ssm_slot / GIB
            sizes["intermediate_conv_gb"] = layers * (max_reqs + 1) * num_draft_tokens * conv_slot / GIB
    sizes["k_size_gb"] = sizes["v_size_gb"] = _kv_side_gb(model, inputs, tokens)
    return sizes


def _kv_side_gb(card: ModelCard, inputs: MemoryInputs, tokens: int) -> float:
    """GiB of the K (or the V) buffers: MHATokenToKVPool keeps size + page_size slots per layer."""
    slots = _kv_layers(card) * (tokens + inputs.page_size) * _kv_heads_per_rank(card, inputs.tp_size) * card.head_dim
    return slots * _kv_dtype_bytes(card, inputs) / GIB


def _gpu_memory_settings(
    model: ModelCard, inputs: MemoryInputs, algorithm: str | None, version: tuple[int, int, int]
) -> tuple[int, int, float]:
    """chunked_prefill_size, cuda_graph_max_bs, mem_fraction_static (ServerArgs._handle_gpu_memory_settings)."""
    gpu_mem = inputs.gpu_memory_mib
    tp = inputs.tp_size
    if gpu_mem < 20 * 1024:
        chunked, graph_bs = 2048, 8
    elif gpu_mem < 35 * 1024:
        chunked, graph_bs = 2048, (24 if tp < 4 else 80)
    elif gpu_mem < 60 * 1024:
        chunked, graph_bs = 4096, (32 if tp < 4 else 160)
    elif gpu_mem < 160 * 1024:
        # The 60-90 GiB (H100) and 90-160 GiB (H20, H200, RTX PRO 6000) buckets set the same values.
        chunked, graph_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunked, graph_bs = 16384, 512
    chunked = inputs.chunked_prefill_size if inputs.chunked_prefill_size is not None else chunked
    graph_bs = inputs.cuda_graph_max_bs if inputs.cuda_graph_max_bs is not None else graph_bs
    if inputs.mem_fraction_static is not None:
        return chunked, graph_bs, inputs.mem_fraction_static

    reserved = 512.0
    reserved += max(chunked, 2048) * 1.5 if chunked > 0 else 16384 * 1.5  # max_prefill_tokens default 16384
    reserved += graph_bs * 2
    reserved += tp / 8 * 1024
    # Piecewise CUDA graphs are off for multimodal checkpoints (_handle_piecewise_cuda_graph, rule 8).
    if not model.is_multimodal:
        max_tokens = chunked
        if inputs.context_length is not None and version >= (0, 5, 13):  # the clamp arrived in 0.5.13
            max_tokens = min(max_tokens, inputs.context_length)
        reserved += len(_piecewise_capture_sizes(max_tokens)) * 8
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if algorithm == "STANDALONE":
        reserved += 6 * 1024
    elif algorithm is not None and algorithm != "NGRAM":
        reserved += 4 * 1024
    fraction = round((gpu_mem - reserved) / gpu_mem, 3)
    if model.is_multimodal:
        fraction *= _vlm_factor(model)
    return chunked, graph_bs, fraction


def _piecewise_capture_sizes(max_tokens: int) -> list[int]:
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [s for s in sizes if s <= max_tokens]


def _vlm_factor(model: ModelCard) -> float:
    """ServerArgs.adjust_mem_fraction_for_vlm: 0.95 x a ViT-size factor in [0.8, 1.05]."""
    layers = model.vision_num_hidden_layers or 24
    hidden = model.vision_hidden_size or 1024
    complexity_ratio = layers * hidden**2 / (24 * 1024**2)
    dynamic = max(0.8, min(1.05, 1.0 - 0.1 * (complexity_ratio - 1.0)))
    return 0.95 * dynamic


def _resolve_num_draft_tokens(
    model: ModelCard, inputs: MemoryInputs, algorithm: str | None, draft: ModelCard | None
) -> int | None:
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
        return (draft.dflash_block_size if draft is not None else None) or DFLASH_DEFAULT_NUM_DRAFT_TOKENS
    if algorithm in _EAGLE_FAMILY:
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
        f"CUDA out of memory. Tried to allocate {max(shortfall_gib, 0.01):.2f} GiB. "
        f"GPU 0 has a total capacity of {total_mib / 1024:.2f} GiB of which {max(free_gib, 0.0) * 1024:.2f} MiB is free."
    )
    return MemoryFailure("cuda_oom", message, "load_weights", "torch.OutOfMemoryError", model_role=role)


def _parse_version(text: str) -> tuple[int, int, int]:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]), int("".join(ch for ch in parts[2] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        raise ValueError(f"sglang_version {text!r} is not like 0.5.13") from None


def _validate(inputs: MemoryInputs) -> None:
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
    if inputs.mamba_scheduler_strategy not in ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"):
        raise ValueError(f"unknown mamba_scheduler_strategy {inputs.mamba_scheduler_strategy!r}")
