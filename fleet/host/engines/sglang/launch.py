"""The exact command line and environment of `python -m sglang.launch_server` for one server
configuration, including what SGLang needs that users forget.

Pure: a `ServerConfig` and where things are on the host in, a `LaunchSpec` out. What fleet adds on
its own is explained in `LaunchSpec.notes`; an explicit setting always wins over an addition, and
explicit settings that SGLang would refuse together raise `EngineConfigError` instead of being
quietly fixed.

Facts (see shared notes `sglang-facts.md`, read from the released wheels):
- Up to 0.5.13, a hybrid model (linear attention + full attention: Qwen3-Next, Qwen3.5/3.6) with
  speculative decoding fails at start-up with the radix cache in mamba `no_buffer` mode (the default).
  Either `--disable-radix-cache`, or `--mamba-scheduler-strategy extra_buffer` with `SGLANG_ENABLE_SPEC_V2=1`
  and `mamba_track_interval >= speculative_num_draft_tokens`. extra_buffer_lazy is refused with
  speculative decoding; extra_buffer is refused together with `--disable-radix-cache`. 0.5.23 resolves
  mamba `auto` to extra_buffer (overlap on) and keeps the radix cache with speculative decoding, so
  fleet adds nothing there. Which release does what: `fleet.host.engines.sglang.args.RESOLUTION`.
- DFLASH forces the draft's context length to the target's, which SGLang refuses unless
  `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1` (z-lab's instructions export it). DFLASH exists from 0.5.11.
- DDTREE and `--speculative-ddtree-budget` come from sgl-project/sglang PR #29907, in no release.
- 0.5.14 renamed `--mamba-scheduler-strategy` to `--mamba-radix-cache-strategy` and
  `--cuda-graph-max-bs` to `--cuda-graph-max-bs-decode` (0.5.23 rejects the old names). Every flag
  name comes from the release's flag table (`fleet.host.engines.sglang.flags.flag_for`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleet.host.engines.base import FlagValue, LaunchSpec, ServerShape, render_flag
from fleet.host.errors import ReleaseError
from fleet.host.engines.sglang.args import RESOLUTION
from fleet.host.engines.sglang.flags import FORK_ALGORITHMS as FORK_ALGORITHMS_BY_FORK
from fleet.host.engines.sglang.flags import FORK_FLAGS as FORK_FLAGS_BY_FORK
from fleet.host.engines.sglang.flags import every_spelling, flag_for
from fleet.host.engines.sglang.release import choose_release
from fleet.host.engines.sglang.speculative import DFLASH_FAMILY, DFLASH_SINCE, MAMBA_STRATEGIES
from fleet.host.engines.sglang.release import parse_version as _parse_version
from fleet.host.errors import EngineConfigError

if TYPE_CHECKING:
    from fleet.host.modelcard import ModelCard

SGLANG_MODULE = "sglang.launch_server"
# The release whose real argument parser tests/integration/test_sglang_parser.py checks every argv with.
SGLANG_VERSION_TESTED = "0.5.23"

FORK_ALGORITHMS = frozenset(a for algorithms in FORK_ALGORITHMS_BY_FORK.values() for a in algorithms)
# Flags of forks: PR #29907's budget, and DB-Guo/sglang-ddtree-dev's switch (flags.FORK_FLAGS).
FORK_FLAGS = frozenset(o for entries in FORK_FLAGS_BY_FORK.values() for entry in entries for o in entry["options"])

ALLOW_LONGER_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
DEFAULT_MAMBA_TRACK_INTERVAL = 256

# ServerSettings fields rendered as `--flag value`, in argv order; each flag's name is the release's
# (flag_for), e.g. cuda_graph_max_bs is --cuda-graph-max-bs up to 0.5.13, --cuda-graph-max-bs-decode after.
_VALUE_SETTINGS: tuple[str, ...] = (
    "context_length",
    "mem_fraction_static",
    "max_running_requests",
    "max_total_tokens",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "attention_backend",
    "page_size",
    "kv_cache_dtype",
)
# ServerArgs fields fleet renders from typed settings: a playbook's free-form `flags` must not set
# them under any spelling of any known release (aliases such as --model, --tensor-parallel-size).
_RENDERED_FIELDS = (
    "model_path",
    "served_model_name",
    "host",
    "port",
    "tp_size",
    *_VALUE_SETTINGS,
    "disable_radix_cache",
    "mamba_scheduler_strategy",
    "trust_remote_code",
    "enable_metrics",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_dflash_block_size",
    "speculative_draft_attention_backend",
)

_FLAG_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def parse_sglang_version(text: str) -> tuple[int, int, int]:
    """`0.5.23`, `v0.5.13.post1`, `0.5.14rc0` -> (0, 5, 23) ..."""
    try:
        return _parse_version(text)
    except ReleaseError as exc:
        raise EngineConfigError(str(exc)) from None


def build_launch(
    server: ServerShape,
    *,
    python: str,
    model_path: str,
    draft_path: str | None,
    port: int,
    bind_host: str = "127.0.0.1",
    hybrid: bool | None = None,
    served_model_name: str | None = None,
    card: ModelCard | None = None,
    sglang_version: str | None = None,
    module: str = SGLANG_MODULE,
) -> LaunchSpec:
    """The launch of `server` on a host. `hybrid` (or else `card`) says whether the target model has
    linear-attention layers; `sglang_version` (the host's release, default the tested one) picks the
    flag names and what a hybrid model needs: the nearest known release's (`choose_release`)."""
    where = f"server {server.label} ({server.model.label})"
    requested = sglang_version or SGLANG_VERSION_TESTED
    version = parse_sglang_version(requested)
    release = choose_release(requested).release
    settings = server.settings
    algorithm = server.algorithm
    _check_method(server, where, draft_path, version)
    is_hybrid = hybrid if hybrid is not None else (card.is_hybrid if card is not None else None)
    extra_flags = _extra_flags(server, where)
    strategy_flag = flag_for(release, "mamba_scheduler_strategy")

    additions = _Additions(user_env={**settings.env, **server.method_env})
    disable_radix, strategy = _radix_cache_choice(server, where, is_hybrid, extra_flags, strategy_flag, additions, release)
    if algorithm in DFLASH_FAMILY:
        additions.env(
            ALLOW_LONGER_CONTEXT_ENV,
            "1",
            f"{algorithm} gives the draft model the target's context length, which SGLang refuses when it exceeds the draft config's unless this is set (z-lab's instructions export it)",
        )

    options: list[tuple[str, FlagValue]] = [
        ("--model-path", model_path),
        ("--served-model-name", served_model_name or server.model.label),
        ("--host", bind_host),
        ("--port", port),
        ("--tp-size", server.tp),
    ]
    for name in _VALUE_SETTINGS:
        options.append((flag_for(release, name), getattr(settings, name)))
    options += [
        ("--disable-radix-cache", disable_radix),
        (strategy_flag, strategy),
        ("--trust-remote-code", settings.trust_remote_code),
        ("--enable-metrics", settings.enable_metrics),
        ("--speculative-algorithm", algorithm),
        ("--speculative-draft-model-path", draft_path),
        ("--speculative-num-draft-tokens", server.num_draft_tokens),
        ("--speculative-num-steps", server.num_steps),
        ("--speculative-eagle-topk", server.eagle_topk),
        ("--speculative-ddtree-budget", server.ddtree_budget),
        # Shared settings serve every method; the autoregressive server has no draft to give it to.
        ("--speculative-draft-attention-backend", settings.draft_attention_backend if algorithm else None),
    ]
    _refuse_duplicates(where, options, extra_flags)

    argv = [python, "-m", module]
    for flag, value in [*options, *extra_flags.items()]:
        argv += render_flag(flag, value)
    used = {arg for arg in argv if arg.startswith("--")}
    return LaunchSpec(
        argv=argv,
        env=dict(sorted({**additions.added_env, **additions.user_env}.items())),
        upstream=algorithm not in FORK_ALGORITHMS and not (used & FORK_FLAGS),
        notes=additions.notes,
    )


@dataclass
class _Additions:
    """What fleet adds to the environment, and why. The playbook's own env always wins."""

    user_env: Mapping[str, str]
    added_env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def env(self, key: str, value: str, reason: str) -> None:
        if key not in self.user_env:
            self.added_env[key] = value
            self.notes.append(f"{key}={value}: {reason}")
        elif self.user_env[key] != value:
            self.notes.append(f"{key}={self.user_env[key]} kept from the playbook, although fleet would set {value}: {reason}")


def _check_method(server: ServerShape, where: str, draft_path: str | None, version: tuple[int, int, int]) -> None:
    if server.algorithm is None:
        given = [name for name in ("num_draft_tokens", "num_steps", "eagle_topk", "ddtree_budget") if getattr(server, name) is not None]
        if given or server.draft is not None:
            raise EngineConfigError(
                f"{where}: method {server.method!r} sets {', '.join(given) or 'a draft'} without an `algorithm`; name the speculative algorithm (DFLASH, EAGLE, ...) or remove them"
            )
    if server.draft is not None and draft_path is None:
        raise EngineConfigError(f"{where}: method {server.method!r} uses draft {server.draft.label}, but no draft path on the host was given")
    if server.draft is None and draft_path is not None:
        raise EngineConfigError(f"{where}: a draft path {draft_path!r} was given, but method {server.method!r} has no `draft`")
    if server.algorithm == "DFLASH" and version < DFLASH_SINCE:
        raise EngineConfigError(f"{where}: DFLASH needs SGLang >= {'.'.join(map(str, DFLASH_SINCE))}, the host has {'.'.join(map(str, version))}")
    strategy = server.settings.mamba_scheduler_strategy
    if strategy is not None and strategy not in MAMBA_STRATEGIES:
        raise EngineConfigError(f"{where}: mamba_scheduler_strategy {strategy!r}: expected one of {', '.join(MAMBA_STRATEGIES)}")


def _extra_flags(server: ServerShape, where: str) -> dict[str, FlagValue]:
    """`server.flags` then the method's `flags` (the method wins on the same key), sorted so that the
    argv does not depend on the order of keys in the playbook."""
    merged: dict[str, FlagValue] = {}
    for origin, flags in (("flags", server.settings.flags), (f"methods.{server.method}.flags", server.method_flags)):
        for key, value in flags.items():
            if not _FLAG_KEY.match(key):
                raise EngineConfigError(f"{where}: {origin} key {key!r}: expected a flag name without the leading --, e.g. enable-mixed-chunk")
            merged[f"--{key}"] = value
    return dict(sorted(merged.items()))


def _radix_cache_choice(
    server: ServerShape,
    where: str,
    is_hybrid: bool | None,
    extra_flags: Mapping[str, FlagValue],
    strategy_flag: str,
    additions: _Additions,
    release: str,
) -> tuple[bool | None, str | None]:
    """(disable_radix_cache, mamba strategy) as rendered: the playbook's, or what a hybrid model with
    speculative decoding needs to start at all under `release`."""
    needs = RESOLUTION[release]
    disable_radix = server.settings.disable_radix_cache
    strategy = server.settings.mamba_scheduler_strategy
    algorithm = server.algorithm
    model = server.model.label
    if not is_hybrid:
        if is_hybrid is None and algorithm and disable_radix is None and strategy is None:
            additions.notes.append(
                f"radix cache left on: no model card says whether {model} is hybrid; if it has linear-attention "
                "layers, SGLang refuses speculative decoding with the radix cache in mamba no_buffer mode "
                "(give the model a `card`, or set disable_radix_cache)"
            )
        return disable_radix, strategy
    if disable_radix and strategy in ("extra_buffer", "extra_buffer_lazy") and needs.extra_buffer_refuses_disabled_radix:
        raise EngineConfigError(
            f"{where}: disable_radix_cache: true with mamba_scheduler_strategy {strategy}: extra_buffer is a "
            f"radix-cache mode, which SGLang {release} refuses without the radix cache; drop one of the two"
        )
    if not algorithm or disable_radix:
        return disable_radix, strategy
    if not needs.no_buffer_refuses_speculation:
        # The release keeps the radix cache with speculative decoding (mamba auto -> extra_buffer).
        if strategy in ("extra_buffer", "extra_buffer_lazy") or strategy in (None, "auto"):
            _check_track_interval(server, where, extra_flags)
        return disable_radix, strategy
    if strategy == "extra_buffer_lazy":
        raise EngineConfigError(f"{where}: mamba_scheduler_strategy extra_buffer_lazy is not supported with speculative decoding ({algorithm}); use extra_buffer, or disable_radix_cache: true")
    if strategy == "extra_buffer":
        _radix_with_speculation(server, where, extra_flags, additions, "the playbook chose")
        return disable_radix, strategy
    if disable_radix is None:
        additions.notes.append(
            f"--disable-radix-cache: {model} is a hybrid (linear + full attention) model, and SGLang refuses "
            f"speculative decoding ({algorithm}) with the radix cache in mamba no_buffer mode; set "
            "disable_radix_cache: false to keep the radix cache with mamba extra_buffer instead"
        )
        return True, strategy
    if strategy in (None, "auto"):
        additions.notes.append(
            f"{strategy_flag} extra_buffer: disable_radix_cache is false and {model} is a hybrid model with "
            f"speculative decoding ({algorithm}); SGLang keeps the radix cache then only in mamba extra_buffer mode"
        )
        _radix_with_speculation(server, where, extra_flags, additions, "fleet chose")
        return disable_radix, "extra_buffer"
    raise EngineConfigError(
        f"{where}: disable_radix_cache: false with mamba_scheduler_strategy {strategy} on hybrid model {model} "
        f"with speculative decoding ({algorithm}): SGLang refuses this at start-up. Use "
        "mamba_scheduler_strategy: extra_buffer to keep the radix cache, or disable_radix_cache: true"
    )


def _radix_with_speculation(server: ServerShape, where: str, extra_flags: Mapping[str, FlagValue], additions: _Additions, who: str) -> None:
    """Mamba extra_buffer with speculative decoding up to 0.5.13: spec v2, and a track interval no shorter than the draft."""
    _check_track_interval(server, where, extra_flags)
    additions.env(SPEC_V2_ENV, "1", f"{who} mamba extra_buffer with speculative decoding, which SGLang runs only with spec v2")


def _check_track_interval(server: ServerShape, where: str, extra_flags: Mapping[str, FlagValue]) -> None:
    """extra_buffer asserts mamba_track_interval >= speculative_num_draft_tokens (every release)."""
    interval = extra_flags.get("--mamba-track-interval", DEFAULT_MAMBA_TRACK_INTERVAL)
    if not isinstance(interval, int) or isinstance(interval, bool):
        try:
            interval = int(str(interval))
        except ValueError:
            raise EngineConfigError(f"{where}: flags mamba-track-interval {interval!r}: expected an integer") from None
    if server.num_draft_tokens is not None and interval < server.num_draft_tokens:
        raise EngineConfigError(
            f"{where}: mamba-track-interval {interval} is shorter than num_draft_tokens {server.num_draft_tokens}; "
            "SGLang's mamba extra_buffer mode needs mamba_track_interval >= speculative_num_draft_tokens"
        )


def _refuse_duplicates(where: str, options: list[tuple[str, FlagValue]], extra_flags: Mapping[str, FlagValue]) -> None:
    owned = {flag for flag, _ in options} | {spelling for name in _RENDERED_FIELDS for spelling in every_spelling(name)}
    clash = sorted(owned & set(extra_flags))
    if clash:
        raise EngineConfigError(
            f"{where}: flags {', '.join(c[2:] for c in clash)}: fleet renders these itself from the typed settings "
            "(server.*, the method's algorithm, draft, num_draft_tokens, ..., and the host); set them there, not in `flags`"
        )
