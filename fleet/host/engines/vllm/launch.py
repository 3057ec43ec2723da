"""The exact command line and environment of `vllm serve` for one server configuration, from the
same playbook fields as SGLang's launch.

Pure: a server configuration (`ServerShape`) and where things are on the host in, a `LaunchSpec`
out. The command is `python -m vllm.entrypoints.cli.main serve MODEL ...`: the module behind the
`vllm` console script (vllm/entrypoints/cli/main.py:39 main, run as `__main__` at :122), started with
the host's Python as SGLang's is, so the venv fleet found is the one that serves. (Run this way,
argparse's prog is the module file's name, `main.py`, where the console script says `vllm`: only
the error text's first word differs.)

The playbook's fields, in vLLM's words (every flag name from the release's flag table):
- tp -> `--tensor-parallel-size`; context_length -> `--max-model-len`;
  mem_fraction_static -> `--gpu-memory-utilization`; max_running_requests -> `--max-num-seqs`;
  page_size -> `--block-size`; cuda_graph_max_bs -> `--max-cudagraph-capture-size`;
  attention_backend -> `--attention-backend` (SGLang's names mapped to vLLM's enum names:
  vllm/config/attention.py:229 takes `AttentionBackendEnum[value.upper()]`); kv_cache_dtype ->
  `--kv-cache-dtype` (`bf16` is vLLM's `bfloat16`); trust_remote_code -> `--trust-remote-code`;
  disable_radix_cache true -> `--disable-prefix-caching` (vLLM's prefix cache).
  mem_fraction_static is not the same quantity: SGLang's is the share of GPU memory for weights and
  KV cache, vLLM's `gpu_memory_utilization` the share the whole instance may use (activations and
  CUDA graphs included), so the same number leaves vLLM less KV cache.
- The speculative method -> `--speculative-config` JSON: `method` in vLLM 0.33's names
  (vllm/config/speculative.py:74 SpeculativeMethod: eagle, eagle3, mtp, ngram, draft_model, dflash),
  `model` (the draft's path), `num_speculative_tokens` (the method's `num_steps` when given, else
  its `num_draft_tokens` less the one verified token SGLang counts in it: SGLang's DFLASH block of
  16 is vLLM's 15 speculative tokens) and, with a draft, the playbook's draft_attention_backend as
  its `attention_backend`.
- Settings vLLM has no flag of the same meaning are refused by name (max_total_tokens,
  chunked_prefill_size, mamba_scheduler_strategy), as is a speculative algorithm vLLM lacks
  (DDTREE): `EngineConfigError`, before anything runs.
- enable_metrics: vLLM always serves `/metrics`; nothing to render.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fleet.host.engines.base import FlagValue, LaunchSpec, ServerShape, render_flag
from fleet.host.errors import ReleaseError
from fleet.host.engines.vllm.flags import every_spelling, every_spelling_of_any, flag_for, negative_flag_for
from fleet.host.engines.vllm.release import KNOWN_RELEASES, choose_release, parse_version
from fleet.host.errors import EngineConfigError

if TYPE_CHECKING:
    from fleet.host.modelcard import ModelCard

VLLM_MODULE = "vllm.entrypoints.cli.main"
SUBCOMMAND = "serve"
# The release whose real parser tests/integration/test_vllm_parser.py checks every argv with.
VLLM_VERSION_TESTED = KNOWN_RELEASES[-1]

# fleet's algorithm (the playbook's, SGLang's spelling) -> vLLM 0.33's SpeculativeConfig.method
# (vllm/config/speculative.py:74). NEXTN is SGLang's name for MTP heads.
SPECULATIVE_METHODS: Mapping[str, str] = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "MTP": "mtp",
    "NGRAM": "ngram",
    "STANDALONE": "draft_model",
    "DFLASH": "dflash",
}
# Methods whose drafter is a separate model given as `model`.
DRAFT_METHODS = frozenset({"eagle", "eagle3", "draft_model", "dflash"})

# SGLang's attention backend names -> vLLM's AttentionBackendEnum names.
ATTENTION_BACKENDS: Mapping[str, str] = {
    "flashinfer": "FLASHINFER",
    "fa3": "FLASH_ATTN",
    "fa4": "FLASH_ATTN",
    "flash_attn": "FLASH_ATTN",
    "triton": "TRITON_ATTN",
    "torch_native": "TORCH_SDPA",
}
KV_CACHE_DTYPES: Mapping[str, str] = {"bf16": "bfloat16", "fp16": "float16"}

# ServerSettings fields with no vLLM flag of the same meaning: refused, with what to use instead.
UNSUPPORTED_SETTINGS: Mapping[str, str] = {
    "max_total_tokens": "vLLM sizes its KV cache from gpu_memory_utilization (or flags kv-cache-memory-bytes / num-gpu-blocks-override)",
    "chunked_prefill_size": "vLLM's nearest is the per-step token budget, flags max-num-batched-tokens, which is not the same quantity",
    "mamba_scheduler_strategy": "it is an SGLang radix-cache mode; vLLM's prefix caching is enable_prefix_caching",
}

# Parser dests fleet renders from typed settings: a playbook's free-form `flags` must not set them
# under any spelling (aliases such as -tp, --device-memory-utilization, -sc, --spec-method).
_RENDERED_DESTS = (
    "model",
    "model_tag",
    "served_model_name",
    "host",
    "port",
    "tensor_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "block_size",
    "max_cudagraph_capture_size",
    "attention_backend",
    "kv_cache_dtype",
    "trust_remote_code",
    "enable_prefix_caching",
    "speculative_config",
    "spec_method",
    "spec_model",
    "spec_tokens",
)
_FLAG_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def build_launch(
    server: ServerShape,
    *,
    python: str,
    model_path: str,
    draft_path: str | None,
    port: int,
    bind_host: str = "127.0.0.1",
    served_model_name: str | None = None,
    card: ModelCard | None = None,
    vllm_version: str | None = None,
    module: str = VLLM_MODULE,
) -> LaunchSpec:
    """The launch of `server` on a host whose vLLM is `vllm_version` (default: the tested release;
    flag names are the nearest known release's)."""
    where = f"server {server.label} ({server.model.label})"
    try:
        parse_version(vllm_version or VLLM_VERSION_TESTED)
    except ReleaseError as exc:
        raise EngineConfigError(str(exc)) from None
    release = choose_release(vllm_version or VLLM_VERSION_TESTED).release
    settings = server.settings
    notes: list[str] = []
    for name, instead in UNSUPPORTED_SETTINGS.items():
        if getattr(settings, name) is not None:
            raise EngineConfigError(f"{where}: server.{name} has no vLLM equivalent: {instead}")
    speculative = speculative_config(server, where, draft_path, notes)
    extra_flags = _extra_flags(server, where)

    def flag(dest: str) -> str:
        return flag_for(release, dest)

    options: list[tuple[str, FlagValue]] = [
        (flag("served_model_name"), served_model_name or server.model.label),
        (flag("host"), bind_host),
        (flag("port"), port),
        (flag("tensor_parallel_size"), server.tp),
        (flag("max_model_len"), settings.context_length),
        (flag("gpu_memory_utilization"), settings.mem_fraction_static),
        (flag("max_num_seqs"), settings.max_running_requests),
        (flag("block_size"), settings.page_size),
        (flag("max_cudagraph_capture_size"), settings.cuda_graph_max_bs),
        (flag("attention_backend"), _attention_backend(settings.attention_backend, notes)),
        (flag("kv_cache_dtype"), KV_CACHE_DTYPES.get(settings.kv_cache_dtype or "", settings.kv_cache_dtype)),
        (flag("trust_remote_code"), settings.trust_remote_code),
        (negative_flag_for(release, "enable_prefix_caching"), True if settings.disable_radix_cache else None),
        (flag("speculative_config"), json.dumps(speculative, separators=(",", ":")) if speculative else None),
    ]
    _refuse_duplicates(where, extra_flags)
    argv = [python, "-m", module, SUBCOMMAND, model_path]
    for name, value in [*options, *extra_flags.items()]:
        argv += render_flag(name, value)
    if not settings.enable_metrics:
        notes.append("enable_metrics false: vLLM serves /metrics whatever fleet renders")
    return LaunchSpec(argv=argv, env=dict(sorted({**settings.env, **server.method_env}.items())), upstream=True, notes=notes)


def speculative_config(server: ServerShape, where: str, draft_path: str | None, notes: list[str]) -> dict[str, Any] | None:
    """The `--speculative-config` object of `server`'s method, None for autoregressive decoding."""
    algorithm = server.algorithm
    if algorithm is None:
        given = [n for n in ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget") if getattr(server, n) is not None]
        if given or server.draft is not None:
            raise EngineConfigError(
                f"{where}: method {server.method!r} sets {', '.join(given) or 'a draft'} without an `algorithm`; name the speculative algorithm (DFLASH, EAGLE3, ...) or remove them"
            )
        return None
    method = SPECULATIVE_METHODS.get(algorithm)
    if method is None:
        raise EngineConfigError(f"{where}: method {server.method!r}: vLLM has no speculative algorithm {algorithm} (vLLM's: {', '.join(sorted(SPECULATIVE_METHODS))})")
    if server.draft is not None and draft_path is None:
        raise EngineConfigError(f"{where}: method {server.method!r} uses draft {server.draft.label}, but no draft path on the host was given")
    if server.draft is None and draft_path is not None:
        raise EngineConfigError(f"{where}: a draft path {draft_path!r} was given, but method {server.method!r} has no `draft`")
    if method in DRAFT_METHODS and draft_path is None:
        raise EngineConfigError(f"{where}: method {server.method!r}: vLLM's {method} needs a draft model (`draft`)")
    if server.eagle_topk not in (None, 1):
        raise EngineConfigError(f"{where}: eagle_topk {server.eagle_topk}: vLLM 0.33 drafts one chain (top-k 1) only")
    config: dict[str, Any] = {"method": method}
    if draft_path is not None:
        config["model"] = draft_path
    if server.num_steps is not None:
        config["num_speculative_tokens"] = server.num_steps
    elif server.num_draft_tokens is not None:
        if server.num_draft_tokens < 2:
            raise EngineConfigError(f"{where}: num_draft_tokens {server.num_draft_tokens}: vLLM needs at least one speculative token (2 in SGLang's count)")
        config["num_speculative_tokens"] = server.num_draft_tokens - 1
        notes.append(f"num_speculative_tokens {server.num_draft_tokens - 1}: num_draft_tokens {server.num_draft_tokens} counts the verified token, which vLLM's num_speculative_tokens does not")
    if draft_path is not None and server.settings.draft_attention_backend:
        config["attention_backend"] = _attention_backend(server.settings.draft_attention_backend, notes)
    return config


def _attention_backend(name: str | None, notes: list[str]) -> str | None:
    if name is None:
        return None
    mapped = ATTENTION_BACKENDS.get(name.lower(), name.upper())
    if name.lower() in ATTENTION_BACKENDS and mapped.lower() != name.lower():
        notes.append(f"attention backend {name} is vLLM's {mapped}")
    return mapped


def _extra_flags(server: ServerShape, where: str) -> dict[str, FlagValue]:
    """`server.flags` then the method's `flags` (the method wins on the same key), sorted."""
    merged: dict[str, FlagValue] = {}
    for origin, flags in (("flags", server.settings.flags), (f"methods.{server.method}.flags", server.method_flags)):
        for key, value in flags.items():
            if not _FLAG_KEY.match(key):
                raise EngineConfigError(f"{where}: {origin} key {key!r}: expected a flag name without the leading --, e.g. enforce-eager")
            merged[f"--{key}"] = value
    return dict(sorted(merged.items()))


def _as_vllm_reads_it(flag: str) -> str:
    """The option string vLLM takes `flag` for: underscores as dashes up to the first `.`, and a
    dotted JSON key as its flag (FlexibleArgumentParser), an unambiguous prefix as the one option
    it abbreviates (allow_abbrev)."""
    name = flag.split(".", 1)[0].replace("_", "-")
    options = every_spelling_of_any()
    if name in options:
        return name
    matches = [o for o in options if o.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def _refuse_duplicates(where: str, extra_flags: Mapping[str, FlagValue]) -> None:
    owned = {spelling for dest in _RENDERED_DESTS for spelling in every_spelling(dest)}
    clash = sorted(flag for flag in extra_flags if _as_vllm_reads_it(flag) in owned)
    if clash:
        raise EngineConfigError(
            f"{where}: flags {', '.join(c[2:] for c in clash)}: fleet renders these itself from the typed settings "
            "(server.*, tp, the method's algorithm, draft and token counts, and the host); set them there, not in `flags`"
        )
