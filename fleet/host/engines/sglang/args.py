"""What `ServerArgs` resolution does to the flags before anything is launched, per SGLang release:
defaults filled in, the speculative and mamba hooks applied, and the configurations SGLang refuses
with a ValueError/AssertionError. The one flags -> `MemoryInputs` mapping is here too.

fleet reads a fixed set of settings (`FLEET_FIELDS`, named as in 0.5.12); `fleet_values` takes them
from a release's parsed command line under that release's own field names (`flags.fleet_field`).
Where releases differ, the difference is a `ReleaseResolution` entry, with the source it comes from:
- 0.5.12 (server_args.py:3620-3712 `_handle_speculative_decoding`, :2481 `_handle_mamba_radix_cache`):
  DFLASH turns the overlap scheduler off; a hybrid model in mamba `no_buffer` mode refuses
  speculative decoding with the radix cache (hence fleet's `--disable-radix-cache` for DFLASH).
- 0.5.23 (arg_groups/speculative_hook.py:287 `_handle_dflash`, arg_groups/overrides.py:453
  `_mamba_radix_cache_resolution`, arg_groups/mamba_hook.py:115/156 the validators): DFLASH keeps
  the overlap scheduler, and mamba strategy `auto` becomes `extra_buffer` when overlap is on (the
  model's architecture supports it, linear-attention backend triton), so DFLASH keeps the radix cache.

Used by the simulator when it starts and by fleet's feasibility check before a launch; pure (flags,
model cards and the environment in; resolved values, warnings and a refusal out), standard library only.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.host.engines.sglang.flags import FORK_ALGORITHMS, ParsedArgv, fleet_field, load_table
from fleet.host.engines.sglang.memory import DEFAULT_GPU_RESERVED_MIB, MemoryInputs
from fleet.host.engines.sglang.release import KNOWN_RELEASES
from fleet.host.engines.sglang.speculative import (
    DFLASH_DEFAULT_BLOCK_SIZE, DFLASH_FAMILY, EAGLE_FAMILY, MIXED_CHUNK_ALGORITHMS, NGRAM_DEFAULT_NUM_DRAFT_TOKENS, PAGE_TREE_SPEC_BACKENDS,
    SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS, UPSTREAM_ALGORITHMS, auto_speculative_params,
)  # fmt: skip
from fleet.host.modelcard import ModelCard


MAX_RUNNING_RESET_WARNING = "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests."

# The settings fleet reads (the simulator, the memory planner, the renderer), named as in 0.5.12, in
# the order of the 0.5.12 ServerArgs dataclass, with the value fleet assumes where a release leaves
# one unset at parse time (None: unset until resolution, or really None). 0.5.23 declares many fields
# None with a resolution `fallback` (e.g. mamba_full_memory_ratio, fallback 0.9:
# arg_groups/fields/schedule.py:220); the values here are those fallbacks for the models fleet has cards for.
FLEET_FIELDS: tuple[tuple[str, Any], ...] = (
    ("model_path", None),
    ("tokenizer_path", None),
    ("tokenizer_mode", "auto"),
    ("load_format", "auto"),
    ("trust_remote_code", False),
    ("context_length", None),
    ("revision", None),
    ("host", "127.0.0.1"),
    ("port", 30000),
    ("skip_server_warmup", False),
    ("nccl_port", None),
    ("dtype", "auto"),
    ("quantization", None),
    ("kv_cache_dtype", "auto"),
    ("mem_fraction_static", None),
    ("max_running_requests", None),
    ("max_queued_requests", None),
    ("max_total_tokens", None),
    ("chunked_prefill_size", None),
    ("max_prefill_tokens", 16384),
    ("schedule_policy", "fcfs"),
    ("schedule_conservativeness", 1.0),
    ("page_size", None),
    ("tp_size", 1),
    ("pp_size", 1),
    ("stream_interval", 1),
    ("random_seed", None),
    ("watchdog_timeout", 300),
    ("download_dir", None),
    ("base_gpu_id", 0),
    ("log_level", "info"),
    ("log_level_http", None),
    ("log_requests", False),
    ("show_time_cost", False),
    ("enable_metrics", False),
    ("decode_log_interval", 40),
    ("api_key", None),
    ("served_model_name", None),
    ("chat_template", None),
    ("enable_cache_report", False),
    ("reasoning_parser", None),
    ("tool_call_parser", None),
    ("dp_size", 1),
    ("attn_dp_size", 1),  # 0.5.23's attention-DP width (0.5.12: --dp-size with --enable-dp-attention)
    ("attn_cp_size", 1),
    ("enable_dp_lm_head", False),
    ("dist_init_addr", None),
    ("nnodes", 1),
    ("node_rank", 0),
    ("json_model_override_args", "{}"),
    ("attention_backend", None),
    ("decode_attention_backend", None),
    ("prefill_attention_backend", None),
    ("mamba_backend", "triton"),
    ("speculative_algorithm", None),
    ("speculative_draft_model_path", None),
    ("speculative_num_steps", None),
    ("speculative_eagle_topk", None),
    ("speculative_num_draft_tokens", None),
    ("speculative_dflash_block_size", None),
    ("speculative_ddtree_budget", None),
    ("speculative_attention_mode", "prefill"),
    ("speculative_draft_attention_backend", None),
    ("speculative_draft_window_size", None),
    ("speculative_ngram_max_bfs_breadth", 10),
    ("speculative_draft_kv_cache_dtype", None),  # 0.5.23 only
    ("ep_size", 1),
    ("max_mamba_cache_size", None),
    ("mamba_ssm_dtype", None),
    ("mamba_full_memory_ratio", 0.9),
    ("mamba_scheduler_strategy", "auto"),
    ("mamba_track_interval", 256),
    ("linear_attn_backend", "triton"),
    ("disable_radix_cache", False),
    ("cuda_graph_max_bs", None),
    ("cuda_graph_bs", None),
    ("disable_cuda_graph", False),  # the decode graphs
    ("disable_prefill_cuda_graph", False),  # fleet's name: 0.5.23's prefill graph backend "disabled"
    ("disable_overlap_schedule", False),
    ("enable_mixed_chunk", False),
    ("enable_dp_attention", False),
    ("enable_torch_compile", False),
    ("disable_piecewise_cuda_graph", False),
    ("allow_auto_truncate", False),
)
FLEET_FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in FLEET_FIELDS)


def fleet_values(parsed: ParsedArgv) -> dict[str, Any]:
    """fleet's settings from a release's parsed command line; a setting the release has no flag for
    (a fork's budget on upstream, 0.5.12's piecewise switch on 0.5.23) takes fleet's default."""
    values: dict[str, Any] = {}
    for name, default in FLEET_FIELDS:
        value = parsed.values.get(fleet_field(parsed.release, name))
        values[name] = default if value is None else value
    if parsed.values.get("cuda_graph_backend_decode") == "disabled":
        values["disable_cuda_graph"] = True  # 0.5.23's spelling of --disable-cuda-graph
    # 0.5.23 cuda_graph_hook.py:52-66: --disable-cuda-graph turns both phases off, the prefill backend flag one.
    if parsed.release != "0.5.12" and (parsed.values.get("disable_cuda_graph") or parsed.values.get("cuda_graph_backend_prefill") == "disabled"):
        values["disable_prefill_cuda_graph"] = True
    # 0.5.23 cuda_graph_hook.py:143-144: a prefill backend given by flag is not turned off by the model's
    # compatibility rules (the memory planner's multimodal rule, memory.py _gpu_memory_settings).
    values["prefill_cuda_graph_backend_given"] = parsed.values.get("cuda_graph_backend_prefill") is not None
    # 0.5.23's --language-model-only (no 0.5.12 flag): a multimodal checkpoint served as text (memory.py plan_memory).
    values["language_model_only"] = bool(parsed.values.get("language_model_only"))
    return values


@dataclass(frozen=True)
class ArgsFailure:
    """A ValueError/AssertionError raised while ServerArgs is built, before any process starts."""

    exception: str
    message: str
    site: str  # which SGLang check raised it, to pick the traceback frames


@dataclass(frozen=True)
class ArgsWarning:
    logger: str  # the Python logger name SGLang uses for it
    message: str


@dataclass(frozen=True)
class ResolvedArgs:
    values: dict[str, Any]  # fleet's settings after resolution (memory settings still unresolved)
    algorithm: str | None  # upper-cased, NEXTN -> EAGLE
    num_draft_tokens: int | None  # the draft block / chain length (DDTREE: its block, not budget + 1)
    ddtree_budget: int | None
    warnings: tuple[ArgsWarning, ...]
    failure: ArgsFailure | None
    release: str = KNOWN_RELEASES[-1]  # whose resolution this is
    # --max-running-requests as given: the memory settings are decided before the speculative default
    # of 48 is set (0.5.23 arg_groups/pipeline.py:199 before :306); the planner applies that default itself.
    given_max_running_requests: int | None = None

    @property
    def context_length(self) -> int | None:
        return self.values["context_length"]


MambaHook = Callable[[dict[str, Any], ModelCard, "str | None", "list[ArgsWarning]"], "ArgsFailure | None"]
# The EAGLE family's and NGRAM's hook: (values, algorithm, target, warnings, the release's behaviour).
SpeculativeHook = Callable[[dict[str, Any], str, ModelCard, "list[ArgsWarning]", "ReleaseResolution"], "ArgsFailure | None"]


@dataclass(frozen=True)
class ReleaseResolution:
    """How a release resolves what fleet renders, where releases differ."""

    dflash_disables_overlap: bool
    dflash_logger: str  # the logger of the module that holds the speculative hooks
    # DFLASH with attention DP: refused outright (False), or with --enable-dp-lm-head and no context parallel.
    dflash_takes_dp_attention: bool
    eagle_and_ngram: SpeculativeHook
    mamba_radix_cache: MambaHook
    # What a hybrid (linear + full attention) model with speculative decoding needs, read by the launch
    # renderer so that what it adds follows the release:
    # - the radix cache in mamba `no_buffer` mode (the `auto` default then) refuses speculative decoding;
    no_buffer_refuses_speculation: bool
    # - extra_buffer with speculative decoding runs only with SGLANG_ENABLE_SPEC_V2=1;
    extra_buffer_needs_spec_v2: bool
    # - extra_buffer together with --disable-radix-cache is refused;
    extra_buffer_refuses_disabled_radix: bool
    # - extra_buffer_lazy is refused with speculative decoding.
    lazy_refuses_speculation: bool


def _handle_dflash(values: dict[str, Any], draft: ModelCard | None, warnings: list[ArgsWarning], behaviour: ReleaseResolution) -> ArgsFailure | None:
    """0.5.12 server_args.py:3620-3712, 0.5.23 arg_groups/speculative_hook.py:287 _handle_dflash;
    the DDTree fork (sglang PR #29907) runs DFLASH's hook too."""
    hook = behaviour.dflash_logger
    if _attention_dp(values):
        if not behaviour.dflash_takes_dp_attention:
            return ArgsFailure("ValueError", "Currently DFLASH speculative decoding does not support dp attention.", "speculative_hook")
        if not values["enable_dp_lm_head"]:  # both the greedy projection and the selector borrow the target head
            return ArgsFailure("ValueError", "DFLASH with dp attention requires --enable-dp-lm-head.", "speculative_hook")
        if values["attn_cp_size"] != 1:
            return ArgsFailure("ValueError", "DFLASH with dp attention does not support context parallel.", "speculative_hook")
    if values["pp_size"] != 1:
        return ArgsFailure("ValueError", "Currently DFLASH speculative decoding only supports pp_size == 1.", "speculative_hook")
    if values["speculative_draft_model_path"] is None:
        return ArgsFailure("ValueError", "DFLASH speculative decoding requires setting --speculative-draft-model-path.", "speculative_hook")
    if values["speculative_algorithm"] == "DDTREE" and not values.get("speculative_ddtree_budget"):
        # The fork's wording is not public; this names the flag it adds.
        return ArgsFailure("ValueError", "DDTREE speculative decoding requires setting --speculative-ddtree-budget.", "speculative_hook")
    for name in ("speculative_num_steps", "speculative_eagle_topk"):
        if values[name] is not None and values[name] != 1:
            warnings.append(ArgsWarning(hook, f"DFLASH only supports {name} == 1; overriding {name}={values[name]} to 1."))
        values[name] = 1
    block = values["speculative_dflash_block_size"]
    if block is not None:
        if block <= 0:
            return ArgsFailure("ValueError", f"DFLASH requires --speculative-dflash-block-size to be positive, got {block}.", "speculative_hook")
        if values["speculative_num_draft_tokens"] is not None and values["speculative_num_draft_tokens"] != block:
            return ArgsFailure(
                "ValueError",
                "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ. "
                "For DFLASH they must match. "
                f"speculative_num_draft_tokens={values['speculative_num_draft_tokens']}, speculative_dflash_block_size={block}.",
                "speculative_hook",
            )
        values["speculative_num_draft_tokens"] = block
    if values["speculative_num_draft_tokens"] is None:
        inferred = draft.dflash_block_size if draft is not None else None
        if inferred is None:
            inferred = DFLASH_DEFAULT_BLOCK_SIZE
            warnings.append(ArgsWarning(hook, f"speculative_num_draft_tokens is not set; defaulting to {inferred} for DFLASH."))
        values["speculative_num_draft_tokens"] = inferred
    window = values["speculative_draft_window_size"]
    if window is not None and window < values["speculative_num_draft_tokens"]:
        return ArgsFailure(
            "ValueError",
            f"--speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). window_size={window}, block_size={values['speculative_num_draft_tokens']}.",
            "speculative_hook",
        )
    _default_max_running(values, warnings, behaviour)
    if behaviour.dflash_disables_overlap:
        values["disable_overlap_schedule"] = True
        warnings.append(ArgsWarning(behaviour.dflash_logger, "Overlap scheduler is disabled when using DFLASH speculative decoding (spec v2 is not supported yet)."))
    return None


def _attention_dp(values: dict[str, Any]) -> bool:
    """Whether attention runs data parallel: 0.5.23 parallel_hook.py:39 turns the deprecated
    `--dp-size N --enable-dp-attention` into attn_dp_size N, and runtime_context.py:191 asks
    attn_dp_size > 1; 0.5.12 (no --attn-dp-size) asks dp_size > 1 with --enable-dp-attention."""
    size = values["attn_dp_size"]
    if size == 1 and values["enable_dp_attention"]:
        size = values["dp_size"]
    return bool(size > 1)


def _eagle_and_ngram_0512(values: dict[str, Any], algorithm: str, target: ModelCard, warnings: list[ArgsWarning], behaviour: ReleaseResolution) -> ArgsFailure | None:
    """0.5.12 server_args.py:3620-3712 as fleet has modelled it; no 0.5.12 wheel is installed to
    check it against (0.5.23's is: _eagle_family_0523, _ngram_0523)."""
    if algorithm in EAGLE_FAMILY:
        # auto_choose_speculative_params for non-Llama targets: 3 steps, topk 1, 4 draft tokens.
        values["speculative_num_steps"] = values["speculative_num_steps"] or 3
        values["speculative_eagle_topk"] = values["speculative_eagle_topk"] or 1
        if values["speculative_eagle_topk"] == 1:
            values["speculative_num_draft_tokens"] = values["speculative_num_steps"] + 1
        values["speculative_num_draft_tokens"] = values["speculative_num_draft_tokens"] or values["speculative_num_steps"] + 1
        _default_max_running(values, warnings, behaviour)
        return None
    values["speculative_num_draft_tokens"] = values["speculative_num_draft_tokens"] or NGRAM_DEFAULT_NUM_DRAFT_TOKENS["0.5.12"]
    _default_max_running(values, warnings, behaviour)
    values["disable_overlap_schedule"] = True
    return None


_NONE_ABOVE_ONE = "'>' not supported between instances of 'NoneType' and 'int'"  # Python's TypeError for `None > 1`


def _eagle_family_0523(values: dict[str, Any], algorithm: str, target: ModelCard, warnings: list[ArgsWarning], behaviour: ReleaseResolution) -> ArgsFailure | None:
    """0.5.23 arg_groups/speculative_hook.py:1072 _handle_eagle_family (CUDA, no rejection sampling,
    no adaptive steps), for EAGLE, EAGLE3 and STANDALONE."""
    hook = behaviour.dflash_logger
    if algorithm == "STANDALONE" and _attention_dp(values):
        return ArgsFailure("ValueError", "Currently standalone speculative decoding does not support dp attention.", "speculative_hook")
    _default_max_running(values, warnings, behaviour)
    if values["enable_mixed_chunk"] and algorithm not in MIXED_CHUNK_ALGORITHMS:  # :1104, spec_info.py:147
        values["enable_mixed_chunk"] = False
        warnings.append(ArgsWarning(hook, f"Mixed chunked prefill is disabled: {algorithm} speculative decoding does not support it."))
    if values["speculative_num_steps"] is None:  # :1158: all three chosen together, or none
        if values["speculative_eagle_topk"] is not None or values["speculative_num_draft_tokens"] is not None:
            return ArgsFailure("AssertionError", "", "speculative_hook")  # a bare assert
        steps, topk, draft_tokens = auto_speculative_params(algorithm, target.architecture)
        values.update(speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=draft_tokens)
    topk = values["speculative_eagle_topk"]
    backends = (values["prefill_attention_backend"] or values["attention_backend"], values["decode_attention_backend"] or values["attention_backend"])
    if "trtllm_mha" in backends:  # :1174
        if topk is None:
            return ArgsFailure("TypeError", _NONE_ABOVE_ONE, "speculative_hook")
        if topk > 1:
            return ArgsFailure("ValueError", "trtllm_mha backend only supports topk = 1 for speculative decoding.", "speculative_hook")
    if topk == 1 and values["speculative_num_draft_tokens"] != values["speculative_num_steps"] + 1:  # :1250
        warnings.append(ArgsWarning(hook, "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"))
        values["speculative_num_draft_tokens"] = values["speculative_num_steps"] + 1
    if topk is None:  # :1265 compares the topk a launch left unset (steps given alone) with 1
        return ArgsFailure("TypeError", _NONE_ABOVE_ONE, "speculative_hook")
    if topk > 1 and values["page_size"] > 1 and values["attention_backend"] not in PAGE_TREE_SPEC_BACKENDS:
        return ArgsFailure(
            "ValueError",
            f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {PAGE_TREE_SPEC_BACKENDS}; got attention_backend="
            f"{values['attention_backend']!r}. Use page_size == 1 or one of those backends.",
            "speculative_hook",
        )
    return None


def _ngram_0523(values: dict[str, Any], algorithm: str, target: ModelCard, warnings: list[ArgsWarning], behaviour: ReleaseResolution) -> ArgsFailure | None:
    """0.5.23 arg_groups/speculative_hook.py:1285 _handle_ngram (CUDA, no external corpus): the overlap
    schedule stays on; the tree is --speculative-ngram-max-bfs-breadth wide."""
    hook = behaviour.dflash_logger
    _default_max_running(values, warnings, behaviour)
    values["enable_mixed_chunk"] = False
    values["speculative_eagle_topk"] = topk = values["speculative_ngram_max_bfs_breadth"]
    if values["speculative_num_draft_tokens"] is None:
        values["speculative_num_draft_tokens"] = NGRAM_DEFAULT_NUM_DRAFT_TOKENS["0.5.23"]
        warnings.append(
            ArgsWarning(
                hook,
                f"speculative_num_draft_tokens is set to {NGRAM_DEFAULT_NUM_DRAFT_TOKENS['0.5.23']} by default for ngram speculative decoding. "
                "You can override this by explicitly setting --speculative-num-draft-tokens.",
            )
        )
    if values["speculative_num_steps"] is None:
        values["speculative_num_steps"] = values["speculative_num_draft_tokens"] // topk
    warnings.append(ArgsWarning(hook, "The mixed chunked prefill are disabled because of using ngram speculative decoding."))
    if topk > 1 and values["page_size"] > 1 and values["attention_backend"] != "flashinfer":
        return ArgsFailure(
            "ValueError",
            f"speculative_eagle_topk({topk}) > 1 with page_size({values['page_size']}) > 1 is unstable and produces incorrect results for paged "
            "attention backends. This combination is only supported for the 'flashinfer' backend.",
            "speculative_hook",
        )
    if _attention_dp(values):
        return ArgsFailure("ValueError", "Currently ngram speculative decoding does not support dp attention.", "speculative_hook")
    return None


def _eagle_and_ngram_0523(values: dict[str, Any], algorithm: str, target: ModelCard, warnings: list[ArgsWarning], behaviour: ReleaseResolution) -> ArgsFailure | None:
    hook = _eagle_family_0523 if algorithm in EAGLE_FAMILY else _ngram_0523
    return hook(values, algorithm, target, warnings, behaviour)


def _mamba_radix_cache_0512(values: dict[str, Any], target: ModelCard, algorithm: str | None, warnings: list[ArgsWarning]) -> ArgsFailure | None:
    """0.5.12 server_args.py:2481 ServerArgs._handle_mamba_radix_cache, for hybrid GDN targets
    (Qwen3-Next / 3.5 / 3.6) on CUDA."""
    strategy = values["mamba_scheduler_strategy"]
    if strategy == "auto":
        strategy = "no_buffer"
    values["mamba_scheduler_strategy"] = strategy
    arch = target.architecture
    if strategy.startswith("extra_buffer"):
        if values["disable_radix_cache"]:
            return ArgsFailure(
                "ValueError",
                "mamba extra_buffer is not compatible with --disable-radix-cache. "
                "Overlap scheduling is already supported with no_buffer + disable_radix_cache. "
                "Please use --mamba-scheduler-strategy no_buffer instead.",
                "mamba_radix_cache",
            )
        if values["speculative_num_draft_tokens"] is not None:
            if strategy == "extra_buffer_lazy":
                return ArgsFailure(
                    "AssertionError",
                    "extra_buffer_lazy is not yet supported with speculative decoding. Use --mamba-scheduler-strategy extra_buffer instead.",
                    "mamba_radix_cache",
                )
            if values["mamba_track_interval"] < values["speculative_num_draft_tokens"]:
                return ArgsFailure(
                    "AssertionError",
                    f"mamba_track_interval {values['mamba_track_interval']} must be greater than or equal to speculative_num_draft_tokens {values['speculative_num_draft_tokens']}",
                    "mamba_radix_cache",
                )
    elif not values["disable_radix_cache"]:
        if values["page_size"] != 1:
            warnings.append(
                ArgsWarning(
                    "sglang.srt.server_args",
                    f"{arch} with radix cache requires page_size=1 in the current Mamba scheduling mode (no_buffer), but got {values['page_size']}. Automatically setting page_size=1.",
                )
            )
            values["page_size"] = 1
        if algorithm is None:
            warnings.append(
                ArgsWarning(
                    "sglang.srt.server_args",
                    "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, try to use --disable-radix-cache if overlap schedule is necessary",
                )
            )
            values["disable_overlap_schedule"] = True
        else:
            # The missing space after "no_buffer." is SGLang's.
            return ArgsFailure(
                "ValueError",
                f"Speculative decoding for {arch} is not compatible with radix cache when using "
                "--mamba-scheduler-strategy no_buffer."
                "To use radix cache with speculative decoding, please use --mamba-scheduler-strategy extra_buffer "
                "and set SGLANG_ENABLE_SPEC_V2=1.",
                "mamba_radix_cache",
            )
    return None


# 0.5.23 arg_groups/overrides.py:403 _MAMBA_EXTRA_BUFFER_ARCHS (the hybrid architectures fleet has cards for).
MAMBA_EXTRA_BUFFER_ARCHS_0523 = frozenset(
    {
        "KimiLinearForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3NextForCausalLM",
    }
)


def _mamba_radix_cache_0523(values: dict[str, Any], target: ModelCard, algorithm: str | None, warnings: list[ArgsWarning]) -> ArgsFailure | None:
    """0.5.23 arg_groups/overrides.py:453 _mamba_radix_cache_resolution, then model_hook.py:1048
    handle_mamba_radix_cache's validators (mamba_hook.py:115 extra_buffer, :156 no_buffer)."""
    if values["disable_radix_cache"]:
        return None  # no mamba radix cache: the strategy is not read (model_override_base.py:262)
    strategy = values["mamba_scheduler_strategy"]
    supports_extra = target.architecture in MAMBA_EXTRA_BUFFER_ARCHS_0523 and values["linear_attn_backend"] == "triton"
    if strategy == "auto":
        wants_overlap = not values["disable_overlap_schedule"]
        wants_paging = values["page_size"] is not None and values["page_size"] > 1
        if (wants_overlap or wants_paging) and supports_extra:
            strategy = "extra_buffer"
        else:
            strategy = "no_buffer"
            values["disable_overlap_schedule"] = True
    values["mamba_scheduler_strategy"] = strategy
    if strategy.startswith("extra_buffer"):
        if not supports_extra:
            return ArgsFailure("AssertionError", f"extra_buffer is not supported for {target.architecture}; use no_buffer.", "mamba_radix_cache")
        if values["speculative_num_draft_tokens"] is not None and values["mamba_track_interval"] < values["speculative_num_draft_tokens"]:
            return ArgsFailure("AssertionError", "", "mamba_radix_cache")  # a bare assert
        if values["page_size"] is not None and values["mamba_track_interval"] % values["page_size"] != 0:
            return ArgsFailure("AssertionError", "", "mamba_radix_cache")
        return None
    if values["page_size"] not in (1, None):
        return ArgsFailure("AssertionError", "no_buffer only supports page_size=1.", "mamba_radix_cache")
    if not values["disable_overlap_schedule"]:
        return ArgsFailure("AssertionError", "no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True.", "mamba_radix_cache")
    if values["attention_backend"] == "trtllm_mha":
        return ArgsFailure("AssertionError", "no_buffer do not support trtllm_mha attention backend.", "mamba_radix_cache")
    return None


RESOLUTION: Mapping[str, ReleaseResolution] = {
    # 0.5.12 server_args.py:2481-2571 (_handle_mamba_radix_cache), :3705 (DFLASH overlap).
    "0.5.12": ReleaseResolution(
        dflash_disables_overlap=True,
        dflash_logger="sglang.srt.server_args",
        dflash_takes_dp_attention=False,
        eagle_and_ngram=_eagle_and_ngram_0512,
        mamba_radix_cache=_mamba_radix_cache_0512,
        no_buffer_refuses_speculation=True,
        extra_buffer_needs_spec_v2=True,
        extra_buffer_refuses_disabled_radix=True,
        lazy_refuses_speculation=True,
    ),
    # 0.5.23 overrides.py:477 (auto -> extra_buffer with overlap on), mamba_hook.py:115 (no spec-v2 switch, lazy
    # wired for every verify path), model_override_base.py:262 (no radix cache: the strategy is not read).
    "0.5.23": ReleaseResolution(
        dflash_disables_overlap=False,
        dflash_logger="sglang.srt.arg_groups.speculative_hook",
        dflash_takes_dp_attention=True,
        eagle_and_ngram=_eagle_and_ngram_0523,
        mamba_radix_cache=_mamba_radix_cache_0523,
        no_buffer_refuses_speculation=False,
        extra_buffer_needs_spec_v2=False,
        extra_buffer_refuses_disabled_radix=False,
        lazy_refuses_speculation=False,
    ),
}
assert set(RESOLUTION) == set(KNOWN_RELEASES), "one ReleaseResolution per known release"


def memory_inputs(resolved: ResolvedArgs, *, gpu_memory_mib: int, release: str, gpu_reserved_mib: float = DEFAULT_GPU_RESERVED_MIB) -> MemoryInputs:
    """The memory planner's inputs for resolved flags: the one flags -> MemoryInputs mapping, used by
    the simulator when it starts and by fleet's feasibility check before anything is launched."""
    values = resolved.values
    return MemoryInputs(
        gpu_memory_mib=gpu_memory_mib,
        tp_size=values["tp_size"],
        mem_fraction_static=values["mem_fraction_static"],
        context_length=values["context_length"],
        max_running_requests=resolved.given_max_running_requests,
        speculative_algorithm=resolved.algorithm,
        num_draft_tokens=values["speculative_num_draft_tokens"] if resolved.algorithm else None,
        ddtree_budget=resolved.ddtree_budget,
        disable_radix_cache=values["disable_radix_cache"],
        mamba_scheduler_strategy=values["mamba_scheduler_strategy"],
        max_mamba_cache_size=values["max_mamba_cache_size"],
        mamba_full_memory_ratio=values["mamba_full_memory_ratio"],
        chunked_prefill_size=values["chunked_prefill_size"],
        cuda_graph_max_bs=values["cuda_graph_max_bs"],
        decode_cuda_graph=not values["disable_cuda_graph"],
        prefill_cuda_graph=not values["disable_prefill_cuda_graph"],
        prefill_cuda_graph_backend_given=values["prefill_cuda_graph_backend_given"],
        language_model_only=values["language_model_only"],
        kv_cache_dtype=values["kv_cache_dtype"],
        draft_kv_cache_dtype=values["speculative_draft_kv_cache_dtype"],
        # 0.5.23 speculative_hook.py:930-934: the draft's own backend, else the target's prefill backend
        # (unset: flashinfer, which keeps the target's KV dtype as any backend but fa4 does).
        draft_attention_backend=values["speculative_draft_attention_backend"] or values["prefill_attention_backend"] or values["attention_backend"],
        page_size=values["page_size"],
        max_total_tokens=values["max_total_tokens"],
        mamba_ssm_dtype=values["mamba_ssm_dtype"],
        disable_overlap_schedule=values["disable_overlap_schedule"],
        gpu_reserved_mib=gpu_reserved_mib,
        release=release,
    )


def default_random_seed(sim_seed: int, model_path: str) -> int:
    """SGLang draws a random seed when none is given; the simulator derives one deterministically."""
    return zlib.crc32(f"{sim_seed}:{model_path}".encode()) % (1 << 30)


def resolve_server_args(
    raw: Mapping[str, Any],
    target: ModelCard,
    draft: ModelCard | None,
    env: Mapping[str, str],
    sim_seed: int,
    *,
    release: str = KNOWN_RELEASES[-1],
    fork: str | None = None,
) -> ResolvedArgs:
    """`raw`: fleet's settings as given (`fleet_values`). `fork`: the engine's fork ("ddtree"),
    whose algorithms upstream SGLang does not know."""
    behaviour = RESOLUTION[release]
    load_table(release)  # an unknown release fails here, not halfway through
    values = dict(raw)
    warnings: list[ArgsWarning] = []
    algorithm: str | None = None
    num_draft_tokens: int | None = None

    def done(failure: ArgsFailure | None = None) -> ResolvedArgs:
        return ResolvedArgs(values, algorithm, num_draft_tokens, values.get("speculative_ddtree_budget"), tuple(warnings), failure, release, raw["max_running_requests"])

    values["tokenizer_path"] = values["tokenizer_path"] or values["model_path"]
    values["served_model_name"] = values["served_model_name"] or values["model_path"]
    if values["random_seed"] is None:
        values["random_seed"] = default_random_seed(sim_seed, values["model_path"])
    if values["page_size"] is None:
        values["page_size"] = 1

    algorithm = values["speculative_algorithm"].upper() if values["speculative_algorithm"] else None
    if algorithm == "NEXTN":
        algorithm = "EAGLE"
    values["speculative_algorithm"] = algorithm
    known = UPSTREAM_ALGORITHMS + tuple(FORK_ALGORITHMS[fork] if fork else ())
    if algorithm is not None and algorithm not in known:
        # speculative/spec_info.py SpeculativeAlgorithm.from_string (0.5.12 :54, 0.5.23 :65)
        return done(ArgsFailure("ValueError", f"Unknown speculative algorithm name: {algorithm}", "speculative_hook"))

    if algorithm in DFLASH_FAMILY:
        failure = _handle_dflash(values, draft, warnings, behaviour)
        if failure is not None:
            return done(failure)
        num_draft_tokens = values["speculative_num_draft_tokens"]
    elif algorithm is not None:
        failure = behaviour.eagle_and_ngram(values, algorithm, target, warnings, behaviour)
        if failure is not None:
            return done(failure)
        num_draft_tokens = values["speculative_num_draft_tokens"]

    if target.is_hybrid:
        failure = behaviour.mamba_radix_cache(values, target, algorithm, warnings)
        if failure is not None:
            return done(failure)

    failure = _derive_context_length(values, target, draft if algorithm in DFLASH_FAMILY else None, env, warnings)
    return done(failure)


def _default_max_running(values: dict[str, Any], warnings: list[ArgsWarning], behaviour: ReleaseResolution) -> None:
    if values["max_running_requests"] is None:
        values["max_running_requests"] = SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
        warnings.append(ArgsWarning(behaviour.dflash_logger, MAX_RUNNING_RESET_WARNING))


def _derive_context_length(values: dict[str, Any], target: ModelCard, draft: ModelCard | None, env: Mapping[str, str], warnings: list[ArgsWarning]) -> ArgsFailure | None:
    """ModelConfig._derive_context_length, for the target and then for a DFLASH draft, whose
    context is forced to the target's (hence z-lab's `export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`)."""
    allow = env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() in ("1", "true", "yes", "on")
    requested = values["context_length"]
    checks = [("User-specified", requested, target)]
    if draft is not None:
        checks.append(("Target model's", requested or target.context_length, draft))
    for reason, length, card in checks:
        if length is None or length <= card.context_length:
            continue
        message = (
            f"Warning: {reason} context_length ({length}) is greater than the derived context_length "
            f"({card.context_length}). This may lead to incorrect model outputs or CUDA errors. Note that the "
            "derived context_length may differ from max_position_embeddings in the model's config."
        )
        if not allow:
            return ArgsFailure(
                "ValueError",
                f"{message} To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
                "context_length",
            )
        warnings.append(ArgsWarning("sglang.srt.configs.model_config", message))
    return None
