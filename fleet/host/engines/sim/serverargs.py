"""What `ServerArgs.__post_init__` does to the flags before anything is launched: defaults filled
in, speculative and mamba hooks applied, and the configurations SGLang refuses with a ValueError
(v0.5.13 `server_args.py`, `arg_groups/speculative_hook.py`, `configs/model_config.py`).

Pure: flags, model cards and the environment in; resolved values, warnings and a fatal error out.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from fleet.host.engines.sglang.memory import DEFAULT_GPU_RESERVED_MIB, MemoryInputs
from fleet.host.modelcard import ModelCard

DFLASH_FAMILY = ("DFLASH", "DDTREE")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
KNOWN_ALGORITHMS = DFLASH_FAMILY + EAGLE_FAMILY + ("NGRAM",)
SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS = 48
DFLASH_DEFAULT_BLOCK_SIZE = 16
NGRAM_DEFAULT_NUM_DRAFT_TOKENS = 8

MAX_RUNNING_RESET_WARNING = (
    "Max running requests is reset to 48 for speculative decoding. "
    "You can override this by explicitly setting --max-running-requests."
)


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
    values: dict[str, Any]  # ServerArgs fields after __post_init__ (memory settings still unresolved)
    algorithm: str | None  # upper-cased, NEXTN -> EAGLE
    num_draft_tokens: int | None  # the draft block / chain length (DDTREE: its block, not budget + 1)
    ddtree_budget: int | None
    warnings: tuple[ArgsWarning, ...]
    failure: ArgsFailure | None

    @property
    def context_length(self) -> int | None:
        return self.values["context_length"]


def memory_inputs(
    resolved: ResolvedArgs, *, gpu_memory_mib: int, sglang_version: str, gpu_reserved_mib: float = DEFAULT_GPU_RESERVED_MIB
) -> MemoryInputs:
    """The memory planner's inputs for resolved flags: the one flags -> MemoryInputs mapping, used by
    the simulator when it starts and by fleet's feasibility check before anything is launched."""
    values = resolved.values
    return MemoryInputs(
        gpu_memory_mib=gpu_memory_mib,
        tp_size=values["tp_size"],
        mem_fraction_static=values["mem_fraction_static"],
        context_length=values["context_length"],
        max_running_requests=values["max_running_requests"],
        speculative_algorithm=resolved.algorithm,
        num_draft_tokens=values["speculative_num_draft_tokens"] if resolved.algorithm else None,
        ddtree_budget=resolved.ddtree_budget,
        disable_radix_cache=values["disable_radix_cache"],
        mamba_scheduler_strategy=values["mamba_scheduler_strategy"],
        max_mamba_cache_size=values["max_mamba_cache_size"],
        mamba_full_memory_ratio=values["mamba_full_memory_ratio"],
        chunked_prefill_size=values["chunked_prefill_size"],
        cuda_graph_max_bs=values["cuda_graph_max_bs"],
        kv_cache_dtype=values["kv_cache_dtype"],
        page_size=values["page_size"],
        sglang_version=sglang_version,
        max_total_tokens=values["max_total_tokens"],
        mamba_ssm_dtype=values["mamba_ssm_dtype"],
        disable_overlap_schedule=values["disable_overlap_schedule"],
        gpu_reserved_mib=gpu_reserved_mib,
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
) -> ResolvedArgs:
    values = dict(raw)
    warnings: list[ArgsWarning] = []

    def done(failure: ArgsFailure | None = None) -> ResolvedArgs:
        return ResolvedArgs(values, algorithm, num_draft_tokens, values.get("speculative_ddtree_budget"), tuple(warnings), failure)

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
    num_draft_tokens: int | None = None

    if algorithm is not None and algorithm not in KNOWN_ALGORITHMS:
        return done(ArgsFailure("ValueError", f"Unknown speculative algorithm name: {algorithm}", "speculative_hook"))

    if algorithm in DFLASH_FAMILY:
        failure = _handle_dflash(values, draft, warnings)
        if failure is not None:
            return done(failure)
        num_draft_tokens = values["speculative_num_draft_tokens"]
    elif algorithm in EAGLE_FAMILY:
        # auto_choose_speculative_params for non-Llama targets: 3 steps, topk 1, 4 draft tokens.
        values["speculative_num_steps"] = values["speculative_num_steps"] or 3
        values["speculative_eagle_topk"] = values["speculative_eagle_topk"] or 1
        if values["speculative_eagle_topk"] == 1:
            values["speculative_num_draft_tokens"] = values["speculative_num_steps"] + 1
        num_draft_tokens = values["speculative_num_draft_tokens"] or values["speculative_num_steps"] + 1
        values["speculative_num_draft_tokens"] = num_draft_tokens
        _default_max_running(values, warnings)
    elif algorithm == "NGRAM":
        num_draft_tokens = values["speculative_num_draft_tokens"] or NGRAM_DEFAULT_NUM_DRAFT_TOKENS
        values["speculative_num_draft_tokens"] = num_draft_tokens
        _default_max_running(values, warnings)
        values["disable_overlap_schedule"] = True

    if target.is_hybrid:
        failure = _handle_mamba_radix_cache(values, target, algorithm, warnings)
        if failure is not None:
            return done(failure)

    failure = _derive_context_length(values, target, draft if algorithm in DFLASH_FAMILY else None, env, warnings)
    return done(failure)


def _default_max_running(values: dict[str, Any], warnings: list[ArgsWarning]) -> None:
    if values["max_running_requests"] is None:
        values["max_running_requests"] = SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
        warnings.append(ArgsWarning("sglang.srt.arg_groups.speculative_hook", MAX_RUNNING_RESET_WARNING))


def _handle_dflash(values: dict[str, Any], draft: ModelCard | None, warnings: list[ArgsWarning]) -> ArgsFailure | None:
    """speculative_hook._handle_dflash; the DDTree fork (sglang PR #29907) runs DFLASH's hook too."""
    hook = "sglang.srt.arg_groups.speculative_hook"
    if values["dp_size"] > 1 and values["enable_dp_attention"]:
        return ArgsFailure("ValueError", "Currently DFLASH speculative decoding does not support dp attention.", "speculative_hook")
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
            "--speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). "
            f"window_size={window}, block_size={values['speculative_num_draft_tokens']}.",
            "speculative_hook",
        )
    _default_max_running(values, warnings)
    values["disable_overlap_schedule"] = True
    warnings.append(ArgsWarning(hook, "Overlap scheduler is disabled when using DFLASH speculative decoding (spec v2 is not supported yet)."))
    return None


def _handle_mamba_radix_cache(
    values: dict[str, Any], target: ModelCard, algorithm: str | None, warnings: list[ArgsWarning]
) -> ArgsFailure | None:
    """ServerArgs._handle_mamba_radix_cache for hybrid GDN targets (Qwen3-Next / 3.5 / 3.6)."""
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
                    "extra_buffer_lazy is not yet supported with speculative decoding. "
                    "Use --mamba-scheduler-strategy extra_buffer instead.",
                    "mamba_radix_cache",
                )
            if values["mamba_track_interval"] < values["speculative_num_draft_tokens"]:
                return ArgsFailure(
                    "AssertionError",
                    f"mamba_track_interval {values['mamba_track_interval']} must be greater than or equal to "
                    f"speculative_num_draft_tokens {values['speculative_num_draft_tokens']}",
                    "mamba_radix_cache",
                )
    elif not values["disable_radix_cache"]:
        if values["page_size"] != 1:
            warnings.append(ArgsWarning(
                "sglang.srt.server_args",
                f"{arch} with radix cache requires page_size=1 in the current Mamba scheduling mode (no_buffer), "
                f"but got {values['page_size']}. Automatically setting page_size=1.",
            ))
            values["page_size"] = 1
        if algorithm is None:
            warnings.append(ArgsWarning(
                "sglang.srt.server_args",
                "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
                "try to use --disable-radix-cache if overlap schedule is necessary",
            ))
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


def _derive_context_length(
    values: dict[str, Any], target: ModelCard, draft: ModelCard | None, env: Mapping[str, str], warnings: list[ArgsWarning]
) -> ArgsFailure | None:
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
