"""vLLM 0.33's GPU memory at start-up, as pure functions: will `vllm serve` start on a GPU of given
memory, with what KV cache, and how does it fail if it does not?

Standard library only (the package ships to hosts with the agent).

What vLLM computes on the CPU side is computed here as vLLM computes it, each formula cited in the
installed wheel (paths relative to `vllm/`, release 0.33.0; `kci.py` = v1/kv_cache_interface.py,
`kcp.py` = v1/core/kv_cache_planning.py, `kcu.py` = v1/core/kv_cache_utils.py):

1. Each attention layer's KV cache spec on one TP rank (`KvLayer`): full attention, sliding window
   or MLA, its page size per block (kci.py:586-601), what one request of max_model_len needs
   (kci.py:643-648 full, :918-955 sliding window).
2. The layers' grouping into KV cache groups (kcp.py:1113-1200 get_kv_cache_groups: one group when
   every layer has the same spec, else the hybrid allocator's equal-size groups, kcp.py:416-556), the
   bytes one block takes across a group (kcp.py:574-605), the blocks one request of max_model_len
   takes (kcp.py:1253-1285), the null block held back (kcp.py:1533-1542) and the check that raises
   vLLM's ValueError (kcp.py:50-87, called at :1549-1559), the block count (kcp.py:1560-1578) and the capacity line
   (kcu.py:1061-1154).
3. The weights on one TP rank: a dense Llama-family checkpoint's parameters as vLLM shards them
   (`dense_weights_bytes_per_rank`, from config.json); otherwise the card's checkpoint size / TP.

What vLLM *measures* at start-up cannot be computed before it runs: the memory the profiling run
takes beyond the weights (the transient activation peak, v1/worker/gpu_worker.py:682-700 and
utils/mem_utils.py:312-321), what the instance allocates outside torch (NCCL, attention workspaces),
and the CUDA-graph pool estimate (gpu_worker.py:707-724). Together they are `overhead` here: every
byte of vLLM's non-KV budget other than the weights. fleet assumes a range for it
(`assumed_overhead`, reasoning there) and says where the verdict depends on it; an earlier start's
log lines replace the range with what that start measured (`measured_overhead`).

Not modelled (`NotModelled`, so the caller says "not checked" rather than guess): mamba / linear
attention layers (hybrid models), speculative decoding's draft layers, pipeline and decode-context
parallelism, KV cache dtypes other than the model's, bfloat16/float16 and fp8, DeepSeek's sparse
indexer, HiSparse, KV connectors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from fleet.host.engines.base import Adjustment, MemoryFailure
from fleet.host.engines.vllm.logparse import StartLines, read_start_lines
from fleet.host.engines.vllm.release import KNOWN_RELEASES

if TYPE_CHECKING:
    from fleet.host.modelcard import ModelCard

GIB = 1 << 30
MIB = 1 << 20

DEFAULT_RELEASE = KNOWN_RELEASES[-1]

# config/cache.py:185 CacheConfig.DEFAULT_BLOCK_SIZE; platforms/interface.py:771-781 keeps it when
# the attention backend supports it (FLASH_ATTN, the default for GQA models on Hopper, does).
DEFAULT_BLOCK_SIZE = 16
# v1/attention/backends/mla/flashmla.py:57-58: FlashMLA supports block size 64 only, and
# platforms/interface.py:722 + v1/attention/backend.py:155-163 take its smallest supported size.
# ASSUMPTION: FlashMLA is the MLA backend vLLM picks (Hopper); another backend may choose another.
DEFAULT_MLA_BLOCK_SIZE = 64
# config/cache.py:215 gpu_memory_utilization default.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# engine/arg_utils.py:2973-3006 get_batch_defaults for UsageContext.OPENAI_API_SERVER (`vllm serve`):
# (at least this much GPU memory, max_num_batched_tokens, max_num_seqs). The 70 GiB tier excludes
# A100 and GB10 by name (arg_utils.py:2983-2986); fleet knows the GPU's memory, not its name, so an
# A100 80GB is planned with the H100 tier's 8192 tokens (vLLM takes 2048 there).
SERVE_BATCH_DEFAULTS: tuple[tuple[int, int, int], ...] = ((160 * GIB, 16384, 1024), (70 * GIB, 8192, 1024), (0, 2048, 256))
# config/vllm.py:2460-2470: min(max_num_seqs * decode_query_len * 2, 512) on Hopper (1024 on the
# Blackwell family, device capability 100, which fleet does not know: 512 is assumed).
DEFAULT_MAX_CUDAGRAPH_CAPTURE_SIZE = 512

# Bytes of one element of the KV cache dtypes modelled (utils/torch_utils.py:40-50: fp8 caches are
# uint8; "auto" is the model's dtype, config/cache.py).
KV_DTYPE_BYTES: Mapping[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}

# Architectures whose attention vLLM runs as MLA (model_executor/models/deepseek_v2.py: DeepseekV2/V3
# and the families built on it). A card of one of them states MLA's geometry or is not planned.
MLA_ARCHITECTURES = frozenset(
    {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK2ForCausalLM", "KimiVLForConditionalGeneration", "GlmMoeDsaForCausalLM", "MistralLarge3ForCausalLM"}
)

# The start-up overhead fleet assumes (everything in vLLM's non-KV budget except the weights), see
# assumed_overhead. The context figures are for the init_device check (v1/worker/utils.py:763).
# MEASURED on this project's device (NVIDIA H200, torch 2.11+cu130, no vLLM): nvidia-smi says
# memory.total 143771 MiB, torch.cuda.mem_get_info() says total 150109880320 B (143155.5 MiB): the
# total vLLM multiplies by gpu_memory_utilization (utils.py:724) is 615.5 MiB below nvidia-smi's, and
# a bare CUDA context took 526.8 MiB of it. Other GPUs were not measured: the same gap is assumed.
NVIDIA_SMI_TOTAL_GAP_BYTES = 645_398_528  # 143771 MiB - 150109880320 B
CUDA_CONTEXT_BYTES_LOW = 552_402_944  # the bare context measured above
# + cuBLAS handles and workspace (gpu_worker.py:515-529 creates them before the snapshot, :541) and NCCL
# communicators with TP > 1: not measured; a margin of 1 GiB is assumed.
CUDA_CONTEXT_BYTES_HIGH = CUDA_CONTEXT_BYTES_LOW + GIB
# Fixes never propose more than this gpu_memory_utilization: above it the memory vLLM does not budget
# (the CUDA context, the cuBLAS workspace, fragmentation) is short on a 80-141 GiB GPU.
MAX_FIX_GPU_MEMORY_UTILIZATION = 0.95


class NotModelled(ValueError):
    """A configuration this module does not plan (the caller answers `unchecked`)."""


def format_gib(value: int | float) -> str:
    """utils/mem_utils.py:30-31 `format_gib`: f"{round(b / GiB_bytes, 2)}" (so 1.5, not 1.50)."""
    return f"{round(value / GIB, 2)}"


def cdiv(a: int, b: int) -> int:
    """utils/math_utils.py cdiv: -(a // -b)."""
    return -(a // -b)


@dataclass(frozen=True)
class KvLayer:
    """One attention layer's KV cache spec on one TP rank, as the layer builds it (its
    `get_kv_cache_spec`). `kind`: "full" (FullAttentionSpec, model_executor/layers/attention/
    attention.py:675-682), "sliding_window" (SlidingWindowSpec, :624-673) or "mla" (MLAAttentionSpec,
    layers/attention/mla_attention.py:1371-1401: one latent vector per token, num_kv_heads=1,
    head_size = kv_lora_rank + qk_rope_head_dim (:480), no V, kci.py:743)."""

    kind: Literal["full", "sliding_window", "mla"]
    num_kv_heads: int
    head_size: int
    head_size_v: int
    dtype_bytes: int
    block_size: int
    sliding_window: int | None = None

    @property
    def page_size_bytes(self) -> int:
        # kci.py:586-601: num_heads * num_states * state_content_size_bytes, where num_states =
        # block_size // tokens_per_state (1 here, kci.py:268-275) and the state content is
        # (head_size + head_size_v) * dtype size (kci.py:590).
        return self.num_kv_heads * self.block_size * (self.head_size + self.head_size_v) * self.dtype_bytes

    @property
    def bytes_per_token(self) -> int:
        return self.page_size_bytes // self.block_size

    def with_block_size(self, block_size: int) -> KvLayer:
        return replace(self, block_size=block_size)

    def max_memory_usage_bytes(self, max_model_len: int, max_in_flight_tokens: int, extra_retained_tokens: int = 0) -> int:
        """What one request of max_model_len keeps on this layer."""
        if self.kind == "sliding_window":
            assert self.sliding_window is not None
            # kci.py:918-944 max_admission_blocks_per_request (+1: the window may start mid-block)
            # and :946-955 max_memory_usage_bytes.
            tokens = min(self.sliding_window - 1 + extra_retained_tokens + max_in_flight_tokens, max_model_len)
            return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes
        # kci.py:643-648 FullAttentionSpec (MLAAttentionSpec inherits it): every token, no DCP.
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes

    def blocks_per_request(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        # kcp.py:1274-1283 cdiv(spec.max_memory_usage_bytes, spec.page_size_bytes).
        return cdiv(self.max_memory_usage_bytes(max_model_len, max_in_flight_tokens), self.page_size_bytes)

    def as_full(self) -> KvLayer:
        """kcp.py:744-816 _promote_local_kv_cache_specs: with the hybrid allocator off, a sliding
        window layer is allocated as full attention (the compute keeps its window)."""
        return replace(self, kind="full", sliding_window=None) if self.kind == "sliding_window" else self


@dataclass(frozen=True)
class KvGroup:
    """A KV cache group: layers sharing one block table (kcp.py:187-215)."""

    layers: tuple[KvLayer, ...]

    @property
    def bytes_per_block(self) -> int:
        # kcp.py:574-605 _get_kv_cache_bytes_per_block: the sum of the group's layer pages (no
        # block stride alignment is declared by the specs modelled, kci.py:224-235 -> 1).
        return sum(layer.page_size_bytes for layer in self.layers)

    def blocks_per_request(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        # kcp.py:1274-1283: a UniformTypeKVCacheSpecs group takes its widest layer's pages
        # (kci.py:1381-1385); a group of identical specs, that spec's.
        return max(layer.blocks_per_request(max_model_len, max_in_flight_tokens) for layer in self.layers)


def kv_cache_groups(layers: Sequence[KvLayer], *, disable_hybrid_kv_cache_manager: bool = False) -> tuple[KvGroup, ...]:
    """kcp.py:1113-1200 get_kv_cache_groups for the specs modelled."""
    if not layers:
        return ()
    if disable_hybrid_kv_cache_manager:
        # kcp.py:1127-1128 -> :853-876 unify_hybrid_kv_cache_specs: when full and sliding-window
        # layers mix, the sliding-window ones are promoted to full attention.
        kinds = {layer.kind for layer in layers}
        if "sliding_window" in kinds and kinds & {"full", "mla"}:
            layers = [layer.as_full() for layer in layers]
    if len(set(layers)) == 1:
        # kcp.py:1138-1142: one spec for every layer, one group (kcp.py:314-327).
        return (KvGroup(tuple(layers)),)
    if _uniform_type(layers):
        # kcp.py:1143-1147 UniformTypeKVCacheSpecs.from_specs: every layer needs the same token
        # slots (all full attention, kci.py FullAttentionSpec.is_uniform_with_collection; or all
        # sliding window of one size, kci.py:957-965): one group.
        return (KvGroup(tuple(layers)),)
    return _hybrid_groups(layers)


def _uniform_type(layers: Sequence[KvLayer]) -> bool:
    kinds = {layer.kind for layer in layers}
    if kinds <= {"full", "mla"}:
        return True
    return kinds == {"sliding_window"} and len({layer.sliding_window for layer in layers}) == 1


def _hybrid_groups(layers: Sequence[KvLayer]) -> tuple[KvGroup, ...]:
    """kcp.py:416-556 _get_kv_cache_groups_uniform_page_size, for layers whose pages are equal (the
    case of full + sliding-window layers of one head geometry). Pages that differ go through
    unify_kv_cache_spec_page_size (kcp.py:346-408) and the packed grouping (kcp.py:914-1041),
    which are not modelled."""
    if len({layer.page_size_bytes for layer in layers}) != 1:
        raise NotModelled("vLLM's hybrid KV cache grouping of layers with different page sizes is not modelled")
    buckets: list[list[KvLayer]] = []
    for layer in layers:  # kcp.py:484-510: identical specs share a bucket, in first-seen order
        for bucket in buckets:
            if bucket[0] == layer:
                bucket.append(layer)
                break
        else:
            buckets.append([layer])
    smallest = min(len(b) for b in buckets)
    largest = max(len(b) for b in buckets)
    # kcp.py:521-533: the group size is the smallest bucket, or the largest when it is under 1.5x.
    group_size = largest if largest < smallest * 1.5 else smallest
    groups: list[KvGroup] = []
    for bucket in buckets:
        count = cdiv(len(bucket), group_size)  # kcp.py:535-555: layers[i::num_groups]
        groups.extend(KvGroup(tuple(bucket[i::count])) for i in range(count))
    return tuple(groups)


def pool_bytes_per_block(groups: Sequence[KvGroup]) -> int:
    """kcp.py:251-262 -> :574-605: the largest group's bytes per block."""
    return max(group.bytes_per_block for group in groups)


def blocks_per_request(groups: Sequence[KvGroup], max_model_len: int, max_in_flight_tokens: int) -> int:
    """kcp.py:1253-1285 / kcu.py:1076-1086: every group takes its blocks from one shared pool."""
    return sum(group.blocks_per_request(max_model_len, max_in_flight_tokens) for group in groups)


def needed_bytes(groups: Sequence[KvGroup], max_model_len: int, max_in_flight_tokens: int) -> int:
    """kcp.py:1253-1285 _max_memory_usage_bytes_from_groups: KV bytes one request of max_model_len needs."""
    return pool_bytes_per_block(groups) * blocks_per_request(groups, max_model_len, max_in_flight_tokens)


def estimate_max_model_len(groups: Sequence[KvGroup], max_model_len: int, max_in_flight_tokens: int, available: int) -> int:
    """kcp.py:1288-1334 _estimate_max_model_len_from_groups: binary search of the longest request
    that fits `available` bytes, 0 when not even one token does."""

    def fits(model_len: int) -> bool:
        return needed_bytes(groups, model_len, max_in_flight_tokens) <= available

    left, right = 1, max_model_len
    if not fits(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result = mid
            left = mid + 1
        else:
            right = mid - 1
    return result


class KvCacheCheckError(ValueError):
    """vLLM's ValueError from the KV cache check, with its exact text."""


def check_enough_kv_cache_memory(groups: Sequence[KvGroup], max_model_len: int, max_in_flight_tokens: int, check_memory: int) -> None:
    """kcp.py:50-87 _check_enough_kv_cache_memory, as get_kv_cache_configs calls it (kcp.py:1549-1559):
    `check_memory` is the available memory less the null block."""
    if check_memory <= 0:
        raise KvCacheCheckError(NO_CACHE_BLOCKS_MESSAGE)
    needed = needed_bytes(groups, max_model_len, max_in_flight_tokens)
    if needed > check_memory:
        estimated = estimate_max_model_len(groups, max_model_len, max_in_flight_tokens, check_memory)
        estimated_msg = f"Based on the available memory, the estimated maximum model length is {estimated}. " if estimated > 0 else ""
        raise KvCacheCheckError(
            f"To serve at least one request with the model's max seq len ({max_model_len}), ({format_gib(needed)} GiB KV cache is needed, "
            f"which is larger than the available KV cache memory ({format_gib(check_memory)} GiB). {estimated_msg}"
            "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
            "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )


# kcp.py:57-64.
NO_CACHE_BLOCKS_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine "
    "(this flag also controls CPU memory reservation on the CPU backend, despite its name). "
    "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)
# kcp.py:1380-1384 (_auto_fit_max_model_len).
AUTO_FIT_MESSAGE = "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing `gpu_memory_utilization`."


def num_blocks(groups: Sequence[KvGroup], available: int, override: int | None = None) -> int:
    """kcp.py:1560-1578: available // bytes per block (the full memory: the null block is one of
    them); kcp.py:242-248 num_gpu_blocks_override replaces it."""
    return override if override is not None else available // pool_bytes_per_block(groups)


def kv_capacity(groups: Sequence[KvGroup], blocks: int, max_model_len: int, max_in_flight_tokens: int) -> tuple[int, float]:
    """kcu.py:1120-1128 get_kv_cache_capacity (and :1061-1093): (tokens, max concurrency) as the
    "GPU KV cache size" line states them (kcu.py:1136-1154)."""
    concurrency = blocks / blocks_per_request(groups, max_model_len, max_in_flight_tokens)
    return int(concurrency * max_model_len), concurrency


def kv_cache_size_line(tokens: int, max_model_len: int, concurrency: float, pools: str = "GPU") -> str:
    """kcu.py:1147-1154: the message of the capacity line (its `%s` / `%.2f` arguments rendered)."""
    return f"{pools} KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"


def available_kv_cache_memory_line(available: int) -> str:
    """gpu_worker.py:772-775: "Available KV cache memory: %s GiB" with format_gib."""
    return f"Available KV cache memory: {format_gib(available)} GiB"


# ---------------------------------------------------------------------------------------------
# The layers of a model, from a fleet model card or from a checkpoint's config.json.


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    name = model_dtype if kv_cache_dtype == "auto" else kv_cache_dtype
    if name not in KV_DTYPE_BYTES:
        raise NotModelled(f"--kv-cache-dtype {kv_cache_dtype}: vLLM's page size for it is not modelled")
    return KV_DTYPE_BYTES[name]


def layers_from_geometry(
    *,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    tp_size: int,
    dtype_bytes: int,
    block_size: int,
    layer_windows: Sequence[int | None] | None = None,
) -> tuple[KvLayer, ...]:
    """A GQA/MHA model's layers. KV heads per rank: config/model.py:1683
    max(1, total_num_kv_heads // tensor_parallel_size) (replicated below TP). `layer_windows`: each
    layer's sliding window (None: full attention)."""
    heads = max(1, num_kv_heads // tp_size)
    windows = list(layer_windows) if layer_windows is not None else [None] * num_layers
    return tuple(
        KvLayer("sliding_window", heads, head_dim, head_dim, dtype_bytes, block_size, window) if window is not None else KvLayer("full", heads, head_dim, head_dim, dtype_bytes, block_size)
        for window in windows
    )


def mla_layers(*, num_layers: int, kv_lora_rank: int, qk_rope_head_dim: int, dtype_bytes: int, block_size: int) -> tuple[KvLayer, ...]:
    """mla_attention.py:1371-1401: num_kv_heads=1 (max_tp_shards=1: every TP rank holds the whole
    latent), head_size = kv_lora_rank + qk_rope_head_dim (:480), no V (kci.py:743)."""
    return tuple(KvLayer("mla", 1, kv_lora_rank + qk_rope_head_dim, 0, dtype_bytes, block_size) for _ in range(num_layers))


def layers_from_config(config: Mapping[str, Any], *, tp_size: int, kv_cache_dtype: str = "auto", block_size: int | None = None, disable_sliding_window: bool = False) -> tuple[KvLayer, ...]:
    """The KV layers of a Hugging Face config.json (its `text_config` when nested), for the
    attention kinds modelled: MLA (`kv_lora_rank`), per-layer sliding windows (`layer_types` with
    "sliding_attention" and `sliding_window`), a window on every layer (`sliding_window` without
    `layer_types`, unless `use_sliding_window` is false, as Qwen2's config says), else full attention.

    This is fleet's reading of the config, not vLLM's per-model code (each model class decides its
    layers' windows); the differential test checks the KV planning given these layers."""
    text = config.get("text_config", config)
    if any(key in text for key in ("layers_block_type", "linear_num_value_heads", "full_attention_interval", "mamba_d_state", "ssm_state_size")) or "linear_attention" in (
        text.get("layer_types") or []
    ):
        raise NotModelled("a model with mamba / linear-attention layers: vLLM's hybrid KV cache is not modelled")
    if "index_topk" in text:
        raise NotModelled("DeepSeek's sparse-attention indexer cache is not modelled")
    model_dtype = str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "bfloat16")
    dtype_bytes = kv_dtype_bytes(kv_cache_dtype, model_dtype)
    num_layers = int(text["num_hidden_layers"])
    if text.get("kv_lora_rank"):
        return mla_layers(
            num_layers=num_layers, kv_lora_rank=int(text["kv_lora_rank"]), qk_rope_head_dim=int(text["qk_rope_head_dim"]), dtype_bytes=dtype_bytes, block_size=block_size or DEFAULT_MLA_BLOCK_SIZE
        )
    heads = int(text["num_attention_heads"])
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    window = text.get("sliding_window")
    layer_types = text.get("layer_types")
    windows: list[int | None]
    if disable_sliding_window or not window or text.get("use_sliding_window") is False:
        windows = [None] * num_layers
    elif isinstance(layer_types, list):
        windows = [int(window) if kind == "sliding_attention" else None for kind in layer_types]
    else:
        windows = [int(window)] * num_layers
    return layers_from_geometry(
        num_layers=num_layers,
        num_kv_heads=int(text.get("num_key_value_heads") or heads),
        head_dim=head_dim,
        tp_size=tp_size,
        dtype_bytes=dtype_bytes,
        block_size=block_size or DEFAULT_BLOCK_SIZE,
        layer_windows=windows,
    )


# ---------------------------------------------------------------------------------------------
# The weights on one TP rank, from config.json (dense Llama-family checkpoints).

# model_executor/layers/vocab_parallel_embedding.py:36 DEFAULT_VOCAB_PADDING_SIZE.
VOCAB_PADDING = 64
DENSE_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def dense_weights_bytes_per_rank(config: Mapping[str, Any], *, tp_size: int) -> int:
    """Bytes of the parameters vLLM creates on one TP rank for a dense Llama-family checkpoint
    (model_executor/models/llama.py, qwen2.py, qwen3.py), in the checkpoint's dtype:

    - embed_tokens and lm_head: VocabParallelEmbedding pads the vocabulary to a multiple of 64
      (vocab_parallel_embedding.py:95-97, :289-306) and each rank holds padded / tp rows; a tied
      lm_head shares the embedding (llama.py:509-510);
    - qkv_proj: QKVParallelLinear keeps heads / tp query heads and kv_heads / tp KV heads, or one
      replicated KV head when tp >= kv_heads (layers/linear.py:1065-1071); o_proj: RowParallelLinear
      splits its input; gate_up_proj / down_proj split the intermediate size;
    - biases: qkv with `attention_bias` (Llama) or always (Qwen2); o_proj with `attention_bias`
      (Llama), a RowParallelLinear bias is whole on every rank; Qwen3's q_norm / k_norm
      (qwen3.py:153-154) and every RMSNorm are replicated.

    Quantized and MoE checkpoints are not modelled (the card's checkpoint size / TP stands in)."""
    text = config.get("text_config", config)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    if model_type not in DENSE_MODEL_TYPES or config.get("quantization_config") or any(k in text for k in ("num_local_experts", "n_routed_experts", "num_experts")):
        raise NotModelled(f"weights of a {model_type or 'unknown'} checkpoint per TP rank are not modelled from its config")
    dtype = str(text.get("torch_dtype") or text.get("dtype") or "bfloat16")
    if dtype not in KV_DTYPE_BYTES:
        raise NotModelled(f"checkpoint dtype {dtype}")
    hidden = int(text["hidden_size"])
    heads = int(text["num_attention_heads"])
    kv_heads = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or hidden // heads)
    intermediate = int(text["intermediate_size"])
    layers = int(text["num_hidden_layers"])
    vocab = cdiv(int(text["vocab_size"]), VOCAB_PADDING) * VOCAB_PADDING
    q_heads = heads // tp_size
    kv_per_rank = 1 if tp_size >= kv_heads else kv_heads // tp_size
    qkv_out = (q_heads + 2 * kv_per_rank) * head_dim
    attention_bias = bool(text.get("attention_bias"))
    qkv_bias = model_type == "qwen2" or attention_bias
    o_bias = attention_bias and model_type in ("llama", "mistral", "qwen3")
    mlp_bias = bool(text.get("mlp_bias"))
    per_layer = hidden * qkv_out + (qkv_out if qkv_bias else 0)
    per_layer += q_heads * head_dim * hidden + (hidden if o_bias else 0)
    per_layer += hidden * 2 * (intermediate // tp_size) + (2 * (intermediate // tp_size) if mlp_bias else 0)
    per_layer += (intermediate // tp_size) * hidden + (hidden if mlp_bias else 0)
    per_layer += 2 * hidden + (2 * head_dim if model_type == "qwen3" else 0)
    embeddings = vocab // tp_size * hidden * (1 if text.get("tie_word_embeddings", config.get("tie_word_embeddings")) else 2)
    return (embeddings + layers * per_layer + hidden) * KV_DTYPE_BYTES[dtype]


# ---------------------------------------------------------------------------------------------
# The start-up overhead: what vLLM measures.


@dataclass(frozen=True)
class Overhead:
    """Bytes of vLLM's non-KV budget beyond the weights, per GPU: [low, high], and where the
    figures come from ("assumed": fleet's range; "measured": an earlier start's log lines)."""

    low: int
    high: int
    source: str

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high:
            raise ValueError(f"overhead range [{self.low}, {self.high}] is not an interval of bytes")


def assumed_overhead(*, vocab_size: int, hidden_size: int, tp_size: int, max_num_seqs: int, max_num_batched_tokens: int, enforce_eager: bool) -> Overhead:
    """The start-up overhead fleet assumes before a start of the configuration has been seen.

    vLLM's KV budget is requested - non_kv (gpu_worker.py:753-757) where requested =
    ceil(total * gpu_memory_utilization) (v1/worker/utils.py:724) and non_kv = what the instance
    consumed since its init snapshot (weights, persistent buffers, non-torch allocations) + the
    profiling run's transient torch peak (mem_utils.py:312-321) + the CUDA-graph pool estimate
    (gpu_worker.py:707-724, on unless --enforce-eager or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0).
    None of it can be read from a config; fleet bounds it from what the profiling run does:

    - the dummy sampler run (v1/worker/gpu_model_runner.py:5866-5881) computes float32 logits for
      max_num_seqs requests over the whole vocabulary: `logits` = max_num_seqs * vocab * 4 bytes, and
      the sampler's softmax / top-p work holds a few such tensors at once;
    - the dummy forward over max_num_batched_tokens tokens holds the MLP's intermediate activations:
      at most ~20 hidden-size bf16 vectors per token on a rank (gate+up at up to ~5x hidden, their
      product, the residual and attention buffers), divided among TP ranks;
    - persistent buffers and non-torch memory: attention workspaces, rotary caches, the input batch;
      NCCL's buffers and custom all-reduce with TP > 1;
    - CUDA graphs: vLLM's own estimate of the graph pool, captured up to 512 tokens by default.

    low = logits + 0.5 GiB; high = 3 x logits + activations + 1 GiB (+ 1 GiB with TP > 1, + 1.5 GiB
    with CUDA graphs). For Llama-3.1-8B on an H200 with vLLM's serve defaults (1024 sequences, 8192
    batched tokens) that is 1.0 to 5.2 GiB. These constants are fleet's assumption, NOT a
    measurement: no vLLM start has been measured for them (this project has no GPU that runs vLLM);
    the first start of a configuration replaces them (`measured_overhead`)."""
    logits = max_num_seqs * vocab_size * 4
    activations = max_num_batched_tokens * hidden_size * 20 * 2 // tp_size
    low = logits + GIB // 2
    high = 3 * logits + activations + GIB + (GIB if tp_size > 1 else 0) + (0 if enforce_eager else 3 * GIB // 2)
    return Overhead(low, high, "assumed")


# ---------------------------------------------------------------------------------------------
# The plan.


@dataclass(frozen=True)
class VllmMemoryInputs:
    """What the plan needs of a `vllm serve` command line, resolved as vLLM resolves it."""

    gpu_memory_mib: int  # nvidia-smi's memory.total
    tp_size: int = 1
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    max_model_len: int | None = None  # None: the model's; -1: vLLM's auto-fit ("auto")
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    max_cudagraph_capture_size: int | None = None  # --max-cudagraph-capture-size; None: vLLM's default
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory: no profiling decides the KV budget
    num_gpu_blocks_override: int | None = None
    async_scheduling: bool | None = None  # None: on (config/vllm.py:1685-1719)
    disable_hybrid_kv_cache_manager: bool = False
    release: str = DEFAULT_RELEASE
    overhead: Overhead | None = None  # None: assumed_overhead


@dataclass(frozen=True)
class ModelShape:
    """What the plan reads of a model: its weights on one rank, its KV layers, its maximum length."""

    name: str
    weights_bytes: int  # all ranks together
    vocab_size: int
    hidden_size: int
    max_position_embeddings: int
    layers: tuple[KvLayer, ...]
    weights_bytes_per_rank: int | None = None  # exact where the config says (dense_weights_bytes_per_rank), else weights_bytes / TP


@dataclass(frozen=True)
class VllmMemoryPlan:
    """vLLM's start-up memory for one configuration. Where the verdict depends on the overhead,
    `_low` figures are at the overhead's low end (most KV memory) and `_high` ones at its high end."""

    release: str
    verdict: Literal["fits", "uncertain", "does_not_fit"]
    failure: MemoryFailure | None  # the failure at the low overhead end (so: certain)
    cuda_total_bytes: int
    requested_bytes: int
    weights_bytes_per_gpu: int
    overhead: Overhead
    max_overhead_that_fits: int | None  # the largest overhead with which it starts; None: none does
    block_size: int
    bytes_per_block: int
    kv_bytes_per_token: int
    blocks_per_request: int
    needed_bytes: int  # KV bytes one request of context_len needs
    available_kv_bytes_low: int  # at the high overhead (uncertain: at the largest overhead it survives)
    available_kv_bytes_high: int  # at the low overhead
    num_blocks_low: int
    num_blocks_high: int
    kv_tokens: int  # at the high overhead (the least; uncertain: the least with which it starts), 0 when it does not start
    kv_tokens_high: int
    max_concurrency_low: float
    max_concurrency_high: float
    context_len: int
    max_running_requests: int  # max_num_seqs: vLLM's scheduler cap (it does not lower it to fit the KV cache)
    max_num_batched_tokens: int
    cuda_graph_max_bs: int
    num_kv_groups: int
    uncertain_failure: MemoryFailure | None = None  # the failure at the high overhead end, when the verdict is uncertain
    notes: tuple[str, ...] = field(default=())

    @property
    def feasible(self) -> bool:
        return self.failure is None


def batch_defaults(inputs: VllmMemoryInputs, cuda_total: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs): the command line's, else vLLM's serve defaults for the
    GPU's memory (arg_utils.py:2973-3006 compare torch's total memory with 70 / 160 GiB)."""
    tokens, seqs = next((t, s) for floor, t, s in SERVE_BATCH_DEFAULTS if cuda_total >= floor)
    return inputs.max_num_batched_tokens or tokens, inputs.max_num_seqs or seqs


def cuda_total_bytes(gpu_memory_mib: int) -> int:
    """The total torch.cuda.mem_get_info reports for a GPU nvidia-smi says has `gpu_memory_mib`."""
    return gpu_memory_mib * MIB - NVIDIA_SMI_TOTAL_GAP_BYTES


def planned_overhead(model: ModelShape, inputs: VllmMemoryInputs) -> Overhead:
    """The start-up overhead a plan of `model` under `inputs` uses: the given one (measured), else
    the range fleet assumes for the batch vLLM will profile (`assumed_overhead`)."""
    if inputs.overhead is not None:
        return inputs.overhead
    batched_tokens, max_num_seqs = batch_defaults(inputs, cuda_total_bytes(inputs.gpu_memory_mib))
    return assumed_overhead(
        vocab_size=model.vocab_size, hidden_size=model.hidden_size, tp_size=inputs.tp_size, max_num_seqs=max_num_seqs, max_num_batched_tokens=batched_tokens, enforce_eager=inputs.enforce_eager
    )


def plan_memory(model: ModelShape, inputs: VllmMemoryInputs) -> VllmMemoryPlan:
    """vLLM `inputs.release` starting `model` under `inputs`: its verdict at both ends of the overhead range."""
    _validate(inputs)
    total = cuda_total_bytes(inputs.gpu_memory_mib)
    batched_tokens, max_num_seqs = batch_defaults(inputs, total)
    overhead = planned_overhead(model, inputs)
    layers = tuple(layer.with_block_size(inputs.block_size) for layer in model.layers) if inputs.block_size else model.layers
    groups = kv_cache_groups(layers, disable_hybrid_kv_cache_manager=inputs.disable_hybrid_kv_cache_manager)
    # config/vllm.py:588-609: async scheduling keeps two batches in flight (one without it).
    in_flight = (1 if inputs.async_scheduling is False else 2) * batched_tokens
    auto_fit = inputs.max_model_len == -1
    model_len = model.max_position_embeddings if inputs.max_model_len in (None, -1) else int(inputs.max_model_len or 0)
    # v1/worker/utils.py:724 requested_memory = ceil(total_memory * gpu_memory_utilization).
    requested = math.ceil(total * inputs.gpu_memory_utilization)
    weights = model.weights_bytes_per_rank if model.weights_bytes_per_rank is not None else model.weights_bytes // inputs.tp_size
    default_graph_bs = min(max_num_seqs * 2, DEFAULT_MAX_CUDAGRAPH_CAPTURE_SIZE, batched_tokens)  # config/vllm.py:2460-2470, :2552
    graph_bs = 0 if inputs.enforce_eager else (inputs.max_cudagraph_capture_size if inputs.max_cudagraph_capture_size is not None else default_graph_bs)
    bpb = pool_bytes_per_block(groups)

    def outcome(overhead_bytes: int, context_bytes: int) -> tuple[MemoryFailure | None, int, int, int]:
        """(failure, available KV bytes, blocks, max_model_len) with this overhead and CUDA context."""
        free = total - context_bytes
        if free < requested:
            return free_memory_failure(free, total, requested, inputs.gpu_memory_utilization), 0, 0, model_len
        if weights > free:
            return _weights_oom(weights, free, total), 0, 0, model_len
        if inputs.kv_cache_memory_bytes is not None:
            available = inputs.kv_cache_memory_bytes  # gpu_worker.py:656-681: taken as given
        else:
            available = requested - weights - overhead_bytes  # gpu_worker.py:753-757
        blocks = num_blocks(groups, available, inputs.num_gpu_blocks_override) if available > 0 else 0
        # kcp.py:1511-1542: the override's capacity replaces the profiled memory, less the null block.
        budget = blocks * bpb if inputs.num_gpu_blocks_override is not None else available
        check = budget - bpb
        length = model_len
        if auto_fit:
            fit = estimate_max_model_len(groups, model_len, in_flight, check) if check > 0 else 0
            if fit <= 0:  # kcp.py:1380-1384
                return MemoryFailure("kv_pool_too_small", AUTO_FIT_MESSAGE, "kv_cache", "ValueError"), available, blocks, model_len
            length = min(model_len, fit)
        try:
            check_enough_kv_cache_memory(groups, length, in_flight, check)
        except KvCacheCheckError as exc:
            return MemoryFailure("kv_pool_too_small", str(exc), "kv_cache", "ValueError"), available, blocks, length
        return None, available, blocks, length

    best = outcome(overhead.low, CUDA_CONTEXT_BYTES_LOW)
    worst = outcome(overhead.high, CUDA_CONTEXT_BYTES_HIGH)
    if best[0] is not None:
        verdict: Literal["fits", "uncertain", "does_not_fit"] = "does_not_fit"
    elif worst[0] is not None:
        verdict = "uncertain"
    else:
        verdict = "fits"
    context_len = worst[3] if worst[0] is None else best[3]
    limit = _max_overhead_that_fits(groups, requested, weights, context_len, in_flight, inputs, bpb) if best[0] is None or best[0].phase == "kv_cache" else None
    least = worst
    if verdict == "uncertain":
        # If it starts, it starts with at least the KV cache of the largest overhead (and CUDA
        # context) it survives: what plans read as its pool (kv_tokens), never 0 for a start.
        least = outcome(min(overhead.high, limit) if limit is not None else overhead.high, CUDA_CONTEXT_BYTES_LOW)
        context_len = least[3] if least[0] is None else context_len
    tokens_low, conc_low = kv_capacity(groups, least[2], context_len, in_flight) if least[0] is None else (0, 0.0)
    tokens_high, conc_high = kv_capacity(groups, best[2], context_len, in_flight) if best[0] is None else (0, 0.0)
    return VllmMemoryPlan(
        release=inputs.release,
        verdict=verdict,
        failure=best[0],
        cuda_total_bytes=total,
        requested_bytes=requested,
        weights_bytes_per_gpu=weights,
        overhead=overhead,
        max_overhead_that_fits=limit,
        block_size=layers[0].block_size if layers else 0,
        bytes_per_block=bpb,
        kv_bytes_per_token=sum(layer.bytes_per_token for layer in layers),
        blocks_per_request=blocks_per_request(groups, context_len, in_flight),
        needed_bytes=needed_bytes(groups, context_len, in_flight),
        available_kv_bytes_low=least[1],
        available_kv_bytes_high=best[1],
        num_blocks_low=least[2],
        num_blocks_high=best[2],
        kv_tokens=tokens_low,
        kv_tokens_high=tokens_high,
        max_concurrency_low=conc_low,
        max_concurrency_high=conc_high,
        context_len=context_len,
        max_running_requests=max_num_seqs,
        max_num_batched_tokens=batched_tokens,
        cuda_graph_max_bs=graph_bs,
        num_kv_groups=len(groups),
        uncertain_failure=worst[0] if verdict == "uncertain" else None,
    )


def _max_overhead_that_fits(groups: Sequence[KvGroup], requested: int, weights: int, model_len: int, in_flight: int, inputs: VllmMemoryInputs, bpb: int) -> int | None:
    """The largest overhead with which the KV check passes: available - bpb >= needed, so
    overhead <= requested - weights - bpb - needed. None when the KV budget does not depend on it."""
    if inputs.kv_cache_memory_bytes is not None or inputs.num_gpu_blocks_override is not None:
        return None
    needed = needed_bytes(groups, model_len, in_flight) if inputs.max_model_len != -1 else needed_bytes(groups, 1, in_flight)
    limit = requested - weights - bpb - needed
    return limit if limit >= 0 else None


def free_memory_failure(free: int, total: int, requested: int, utilization: float) -> MemoryFailure:
    # v1/worker/utils.py:762-771. The free figure is fleet's assumption of what the CUDA context
    # leaves (CUDA_CONTEXT_BYTES_*): the real line prints what the GPU had.
    message = (
        f"Free memory on device cuda:0 ({format_gib(free)}/{format_gib(total)} GiB) on startup is less than desired GPU memory utilization "
        f"({utilization}, {format_gib(requested)} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    return MemoryFailure("cuda_oom", message, "init_device", "ValueError")


def _weights_oom(weights: int, free: int, total: int) -> MemoryFailure:
    # PyTorch's wording (c10/cuda/CUDACachingAllocator.cpp); "Tried to allocate" names the shortfall,
    # since which tensor fails first depends on the loader.
    shortfall = max(weights - free, MIB)
    message = f"CUDA out of memory. Tried to allocate {shortfall / GIB:.2f} GiB. GPU 0 has a total capacity of {total / GIB:.2f} GiB of which {max(free, 0) / MIB:.2f} MiB is free."
    return MemoryFailure("cuda_oom", message, "load_weights", "torch.OutOfMemoryError")


def _validate(inputs: VllmMemoryInputs) -> None:
    if inputs.release not in KNOWN_RELEASES:
        raise ValueError(f"release {inputs.release!r} is not a release fleet knows ({', '.join(KNOWN_RELEASES)})")
    if inputs.gpu_memory_mib <= 0 or inputs.tp_size <= 0:
        raise ValueError(f"gpu_memory_mib and tp_size must be positive, got {inputs.gpu_memory_mib}, {inputs.tp_size}")
    if not 0 < inputs.gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {inputs.gpu_memory_utilization}")


# ---------------------------------------------------------------------------------------------
# The smallest fix.


def smallest_fix(model: ModelShape, inputs: VllmMemoryInputs, plan: VllmMemoryPlan) -> list[Adjustment] | None:
    """[] when the plan fits (or may: an uncertain verdict is left to the start, whose log then
    corrects the next plan); else the one change of a fleet setting that makes it fit even at the
    high end of the overhead range, or None when no single change does.

    - init_device (the GPU has less free memory than gpu_memory_utilization asks): a lower
      `mem_fraction_static` (vLLM's own advice, v1/worker/utils.py:768).
    - kv_cache: a higher `mem_fraction_static` (up to MAX_FIX_GPU_MEMORY_UTILIZATION) first, since it
      keeps the benchmark's meaning, else the longest `context_length` that fits (vLLM's estimate).
    - load_weights: none (the weights per GPU change only with the TP size, not a setting)."""
    if plan.failure is None:
        return []
    failure = plan.failure
    if failure.phase == "load_weights":
        return None
    current = inputs.gpu_memory_utilization
    if failure.phase == "init_device":
        candidate = math.floor((plan.cuda_total_bytes - CUDA_CONTEXT_BYTES_HIGH) / plan.cuda_total_bytes * 100) / 100
        if 0 < candidate < current and _fits(model, replace(inputs, gpu_memory_utilization=candidate)):
            return [Adjustment("mem_fraction_static", current, candidate, "the GPU's free memory at start-up is below what gpu_memory_utilization asks")]
        return None
    steps = range(round(current * 100) + 1, round(MAX_FIX_GPU_MEMORY_UTILIZATION * 100) + 1)
    for hundredths in steps:
        candidate = hundredths / 100
        if _fits(model, replace(inputs, gpu_memory_utilization=candidate)):
            return [Adjustment("mem_fraction_static", current, candidate, "more of the GPU for vLLM's KV cache")]
    if inputs.max_model_len == -1:
        return None
    longest = _longest_fitting_len(model, inputs, plan.context_len)
    if longest is not None:
        return [Adjustment("context_length", plan.context_len, longest, "the longest max_model_len whose one request fits the KV cache (vLLM's estimate)")]
    return None


def _fits(model: ModelShape, inputs: VllmMemoryInputs) -> bool:
    return plan_memory(model, inputs).verdict == "fits"


def _longest_fitting_len(model: ModelShape, inputs: VllmMemoryInputs, context_len: int) -> int | None:
    """The longest max_model_len below `context_len` that fits at the high overhead (binary search
    over the plan itself, so the null block and the in-flight tokens count as vLLM counts them)."""
    left, right, found = 1, context_len - 1, None
    while left <= right:
        mid = (left + right) // 2
        if _fits(model, replace(inputs, max_model_len=mid)):
            found, left = mid, mid + 1
        else:
            right = mid - 1
    return found


# ---------------------------------------------------------------------------------------------
# The correction: what an earlier start measured.


def available_kv_range(start: StartLines, plan: VllmMemoryPlan) -> tuple[int, int] | None:
    """[low, high] bytes of the KV memory that start had available, from its lines and the plan of
    its configuration (which knows the bytes per block and the blocks per request):

    - "Available KV cache memory: X GiB" is format_gib (round to 0.01 GiB): X +- 0.005 GiB;
    - "KV cache size: N tokens" at M tokens per request is int(blocks / R * M) with R the blocks one
      request takes (kcu.py:1120-1128), so blocks is one of the b with floor(b * M / R) == N, and the
      memory lies in [b_low * bytes_per_block, (b_high + 1) * bytes_per_block) (kcp.py:1560-1578).

    None when the lines say nothing usable (or contradict each other)."""
    low, high = 0, None
    if start.available_gib is not None:
        low = max(low, math.ceil((start.available_gib - 0.005) * GIB))
        high = math.floor((start.available_gib + 0.005) * GIB)
    if start.kv_tokens is not None and start.max_model_len is not None and start.max_model_len == plan.context_len:
        per_request = plan.blocks_per_request
        length = start.max_model_len
        first = cdiv(start.kv_tokens * per_request, length)
        last = cdiv((start.kv_tokens + 1) * per_request, length) - 1
        if last >= first:
            low = max(low, first * plan.bytes_per_block)
            block_high = (last + 1) * plan.bytes_per_block - 1
            high = block_high if high is None else min(high, block_high)
    if high is None or high < low:
        return None
    return low, high


def measured_overhead(start: StartLines, plan: VllmMemoryPlan) -> Overhead | None:
    """The overhead an earlier start of the same configuration measured: requested - weights -
    available (gpu_worker.py:753-757 solved for non_kv), `plan` being fleet's plan of that start (its
    command line and GPU). It replaces `assumed_overhead` in the next plan of a configuration whose
    profiling run is the same: same model, TP size, GPU, release, max_num_seqs,
    max_num_batched_tokens, CUDA graphs on or off (gpu_memory_utilization and max_model_len may
    differ: neither changes what the profiling run allocates). The rounding of total memory that
    fleet assumes (NVIDIA_SMI_TOTAL_GAP_BYTES) cancels out at the same gpu_memory_utilization."""
    available = available_kv_range(start, plan)
    if available is None:
        return None
    base = plan.requested_bytes - plan.weights_bytes_per_gpu
    low, high = base - available[1], base - available[0]
    if high < 0:
        return None
    return Overhead(max(low, 0), high, "measured")


def overhead_key(model: ModelShape, inputs: VllmMemoryInputs) -> tuple[object, ...]:
    """What a measured overhead is valid for (see measured_overhead): two configurations with the
    same key run the same profiling run on the same GPU."""
    batched_tokens, max_num_seqs = batch_defaults(inputs, cuda_total_bytes(inputs.gpu_memory_mib))
    return (inputs.release, model.name, model.weights_bytes, inputs.tp_size, inputs.gpu_memory_mib, max_num_seqs, batched_tokens, inputs.enforce_eager, inputs.kv_cache_dtype)


@dataclass(frozen=True)
class ObservedStart:
    """An earlier start's measured overhead, and the configuration it holds for (`overhead_key`)."""

    key: tuple[object, ...]
    overhead: Overhead
    lines: StartLines


def observe_start(model: ModelShape, inputs: VllmMemoryInputs, lines: Iterable[str]) -> ObservedStart | None:
    """What a start of `inputs` (the configuration that ran, on its GPU) measured, from its log
    lines; None when the log has neither line or they do not fit the plan of that configuration."""
    start = read_start_lines(lines)
    overhead = measured_overhead(start, plan_memory(model, replace(inputs, overhead=None)))
    return ObservedStart(overhead_key(model, inputs), overhead, start) if overhead is not None else None


def corrected_inputs(model: ModelShape, inputs: VllmMemoryInputs, observed: Iterable[ObservedStart]) -> VllmMemoryInputs:
    """`inputs` with the overhead of the last observed start of the same configuration in place of
    the assumed range (unchanged when none matches)."""
    key = overhead_key(model, inputs)
    matching = [o for o in observed if o.key == key]
    return replace(inputs, overhead=matching[-1].overhead) if matching else inputs


def model_shape(card: ModelCard, *, tp_size: int, kv_cache_dtype: str = "auto", block_size: int | None = None) -> ModelShape:
    """A fleet model card as the plan reads it. A card states no sliding window, so every layer is
    planned as full attention (for a model with windowed layers that over-states the KV one request
    needs); `layers_from_config` reads windows and MLA from a config.json."""
    if card.is_hybrid:
        raise NotModelled(f"{card.name} has linear-attention (mamba) layers: vLLM's hybrid KV cache is not modelled")
    if card.architecture in MLA_ARCHITECTURES:
        raise NotModelled(f"{card.name} ({card.architecture}) runs MLA attention in vLLM and its card has no kv_lora_rank / qk_rope_head_dim")
    layers = layers_from_geometry(
        num_layers=card.num_hidden_layers, num_kv_heads=card.num_key_value_heads, head_dim=card.head_dim, tp_size=tp_size,
        dtype_bytes=kv_dtype_bytes(kv_cache_dtype, card.kv_dtype), block_size=block_size or DEFAULT_BLOCK_SIZE,
    )  # fmt: skip
    return ModelShape(card.name, card.weights_bytes, card.vocab_size, card.num_attention_heads * card.head_dim, card.max_position_embeddings, layers)


def model_from_config(name: str, config: Mapping[str, Any], *, tp_size: int, weights_bytes: int, kv_cache_dtype: str = "auto", block_size: int | None = None) -> ModelShape:
    """A checkpoint's config.json as the plan reads it: its layers (windows, MLA) and, for a dense
    Llama-family checkpoint, its exact weights per rank; `weights_bytes` (the checkpoint's size)
    stands in for the rest."""
    text = config.get("text_config", config)
    try:
        per_rank: int | None = dense_weights_bytes_per_rank(config, tp_size=tp_size)
    except NotModelled:
        per_rank = None
    heads = int(text["num_attention_heads"])
    return ModelShape(
        name, weights_bytes, int(text["vocab_size"]), int(text.get("hidden_size") or heads * int(text["head_dim"])), int(text["max_position_embeddings"]),
        layers_from_config(config, tp_size=tp_size, kv_cache_dtype=kv_cache_dtype, block_size=block_size), per_rank,
    )  # fmt: skip
