"""Playbooks (`playbooks/*.yaml`): the matrix of a sweep, and its expansion into runs with stable ids.

A run is one server configuration x one workload. Its id is a hash of what defines it (model,
draft, TP size, method and its engine settings, the workload, repeats): canonical JSON, so the id
does not depend on key order, and edits elsewhere in the playbook (another method, a limit, the
description) leave it unchanged. A server configuration has an id of its own, so that all the
workloads of one configuration share one server launch.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from fleet.config import EnvName, FlagName, HfRepoId, HostPath, Int, Revision, StrictModel, Token, checked, checked_host_path, load_model_file
from fleet.host.engines import DEFAULT_ENGINE, ENGINE_NAMES
from fleet.host.engines import engine as engine_named
from fleet.host.modelcard import shipped_card_names
from fleet.inventory import Name
from fleet.workloads.kinds import MAX_CONTEXT, MAX_TIMEOUT_S, PLAYBOOK_DIR, Workload, WorkloadModel

FlagValue = Union[str, int, float, bool, None, list[Union[str, int, float]]]
# Flags and environment reach the engine's argv and its unit file: names are words (a key like
# `x; touch /tmp/p` is refused here), values free of control characters (fleet.config.read_yaml).
Flags = dict[FlagName, FlagValue]
Env = dict[EnvName, str]


def _card(value: str) -> str | None:
    if value.lower() in shipped_card_names():
        return None
    path = Path(value).expanduser()
    if ".." in path.parts or value.startswith("-"):
        return f"a shipped model card ({', '.join(shipped_card_names())}) or a card file path without `..`"
    if not (path.is_file() or path.is_dir()):
        return f"a shipped model card ({', '.join(shipped_card_names())}), a JSON card file or a model directory that exists"
    return None


def _mirror(value: str) -> str | None:
    if value.startswith("-"):
        return "an rsync source (`host:/dir` or a path on this machine), not starting with -"
    remote = re.match(r"^([^/:]*):(.*)$", value)
    if remote:
        host, path = remote.groups()
        if not re.fullmatch(r"([A-Za-z_][A-Za-z0-9_.-]*@)?[A-Za-z0-9][A-Za-z0-9._-]*", host):
            return "`host:/dir` with a host name or ssh alias (letters, digits, . _ -, optionally user@)"
        if why := checked_host_path(path):
            return f"`host:/dir` with {why}"
    return None


def _engine_name(value: str) -> str | None:
    return None if value in ENGINE_NAMES else f"one of the engines fleet knows ({', '.join(ENGINE_NAMES)})"


CardName = Annotated[str, checked(_card)]
MirrorSource = Annotated[str, checked(_mirror)]
EngineName = Annotated[str, checked(_engine_name)]


class ModelRef(StrictModel):
    """Where the weights come from. `repo` is fetched into each host's cache; `path` is already on the hosts."""

    # repo and revision name the cache directory (fleet.layout.model_cache_dir): no `..`, ever.
    repo: HfRepoId | None = Field(default=None, description="Hugging Face repo id, e.g. Qwen/Qwen3.6-27B")
    revision: Revision = Field(default="main", min_length=1)
    path: HostPath | None = Field(default=None, description="a model directory that already exists on every host")
    mirror: MirrorSource | None = Field(default=None, description="rsync source (`host:/dir` or a controller path) used instead of the hub")
    card: CardName | None = Field(default=None, description="fleet model card for memory planning, e.g. qwen3.6-27b")

    @model_validator(mode="after")
    def _one_source(self) -> ModelRef:
        if bool(self.repo) == bool(self.path):
            raise ValueError("exactly one of `repo` (fetched) or `path` (already on the hosts)")
        return self

    @property
    def label(self) -> str:
        return self.repo or self.path or "?"


class MethodSpec(StrictModel):
    """A decoding method: how the engine is told to decode. No `algorithm` = autoregressive."""

    algorithm: Token | None = Field(default=None, description="DFLASH, DDTREE (the ddtree fork), EAGLE, EAGLE3, NEXTN, NGRAM: checked at plan time against each host's release and fork")
    draft: Name | None = Field(default=None, description="a key of `drafts`")
    num_draft_tokens: Int | None = Field(default=None, ge=1, le=1024)
    num_steps: Int | None = Field(default=None, ge=1, le=256)
    eagle_topk: Int | None = Field(default=None, ge=1, le=256)
    budgets: list[Annotated[Int, Field(ge=1, le=4096)]] | None = Field(default=None, description="DDTree node budgets: one variant each")
    engines: list[EngineName] | None = Field(default=None, description="the engines of the playbook's `engine` this method runs under (default: all of them)")
    flags: Flags = Field(default_factory=dict, description="extra engine flags, without the leading --")
    env: Env = Field(default_factory=dict)

    @field_validator("algorithm")
    @classmethod
    def _upper(cls, value: str | None) -> str | None:
        return value.upper() if value else None

    @model_validator(mode="after")
    def _coherent(self) -> MethodSpec:
        if self.budgets is not None and self.algorithm != "DDTREE":
            raise ValueError("`budgets` only with algorithm DDTREE")
        if self.algorithm == "DDTREE" and not self.budgets:
            raise ValueError("a non-empty `budgets` list for algorithm DDTREE")
        if self.algorithm in ("DFLASH", "DDTREE", "EAGLE", "EAGLE3", "STANDALONE") and not self.draft:
            raise ValueError(f"a `draft` model for algorithm {self.algorithm}")
        return self


class ServerSettings(StrictModel):
    """Engine settings shared by every method; `overrides` can change them for some TP sizes or methods."""

    context_length: Int | None = Field(default=None, ge=256, le=MAX_CONTEXT)
    mem_fraction_static: float | None = Field(default=None, gt=0.05, lt=0.99)
    max_running_requests: Int | None = Field(default=None, ge=1, le=1 << 16)
    max_total_tokens: Int | None = Field(default=None, ge=1, le=1 << 34)
    chunked_prefill_size: Int | None = Field(default=None, ge=-1, le=MAX_CONTEXT)  # -1: SGLang's "no chunking"
    cuda_graph_max_bs: Int | None = Field(default=None, ge=1, le=1 << 16)
    attention_backend: Token | None = None
    draft_attention_backend: Token | None = None
    disable_radix_cache: bool | None = Field(default=None, description="unset: fleet decides (hybrid models with speculative decoding need it)")
    mamba_scheduler_strategy: Token | None = None
    page_size: Int | None = Field(default=None, ge=1, le=1 << 16)
    kv_cache_dtype: Token | None = None
    trust_remote_code: bool = False
    enable_metrics: bool = True
    flags: Flags = Field(default_factory=dict)
    env: Env = Field(default_factory=dict)

    def merged(self, patch: ServerSettings) -> ServerSettings:
        """Fields set in `patch` win; flags and env are merged key by key."""
        data = self.model_dump()
        for key in patch.model_fields_set:
            value = getattr(patch, key)
            data[key] = {**data[key], **value} if key in ("flags", "env") else value
        return ServerSettings.model_validate(data)


class Override(StrictModel):
    """Server settings that apply only where `tp` and/or `method` match."""

    tp: Int | None = None
    method: Name | None = None
    engine: EngineName | None = Field(default=None, description="only under this engine (its own flags, say)")
    server: ServerSettings


class AutoFix(str, Enum):
    apply = "apply"
    suggest = "suggest"
    off = "off"


class Isolation(str, Enum):
    shared = "shared"
    exclusive = "exclusive"


class Limits(StrictModel):
    server_start_timeout_s: float = Field(default=1200, gt=0, le=MAX_TIMEOUT_S)
    request_timeout_s: float = Field(default=600, gt=0, le=MAX_TIMEOUT_S)
    no_token_timeout_s: float = Field(default=120, gt=0, le=MAX_TIMEOUT_S, description="a stream with no token for this long is abandoned")
    max_fix_attempts: Int = Field(default=2, ge=0, le=20)
    # Unreachable this long (since its last answer) and a host is given up for good: its finished
    # runs are kept, the rest move to the live hosts (fleet.sweep.driver). Longer than a reboot.
    host_lost_after_s: float = Field(default=600, gt=0, le=MAX_TIMEOUT_S, description="a host unreachable this long is declared lost")


class Playbook(StrictModel):
    name: Name
    description: str = ""
    model: ModelRef
    drafts: dict[Name, ModelRef] = Field(default_factory=dict)
    methods: dict[Name, MethodSpec] = Field(min_length=1)
    tp: list[Annotated[Int, Field(ge=1, le=64)]] = Field(min_length=1)
    engine: list[EngineName] | None = Field(default=None, min_length=1, description="serving engines, an axis of the matrix like `tp` (default: " + DEFAULT_ENGINE + " alone, named in no run)")
    server: ServerSettings = ServerSettings()
    overrides: list[Override] = Field(default_factory=list)
    workloads: dict[Name, Workload] = Field(min_length=1)
    repeats: Int = Field(default=1, ge=1, le=1000)
    limits: Limits = Limits()
    auto_fix: AutoFix = AutoFix.apply
    isolation: Isolation = Isolation.shared
    _source: Path | None = PrivateAttr(default=None)  # the playbook file, for messages about it

    @property
    def source_file(self) -> Path:
        """The file the playbook was loaded from (playbooks/<name>.yaml when built in code)."""
        return self._source or Path("playbooks") / f"{self.name}.yaml"

    @field_validator("methods")
    @classmethod
    def _drafts_exist(cls, methods: dict[str, MethodSpec], info: ValidationInfo) -> dict[str, MethodSpec]:
        drafts = info.data.get("drafts", {})
        for name, method in methods.items():
            if method.draft and method.draft not in drafts:
                raise ValueError(f"methods.{name}.draft {method.draft!r} to name a key of `drafts` ({', '.join(drafts) or 'none defined'})")
        return methods

    @field_validator("tp")
    @classmethod
    def _distinct(cls, sizes: list[int]) -> list[int]:
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"distinct TP sizes, not {sizes}")
        return sizes

    @field_validator("overrides")
    @classmethod
    def _overrides_match(cls, overrides: list[Override], info: ValidationInfo) -> list[Override]:
        methods, sizes = info.data.get("methods", {}), info.data.get("tp", [])
        for i, override in enumerate(overrides):
            if override.method is not None and override.method not in methods:
                raise ValueError(f"overrides[{i}].method {override.method!r} to name a key of `methods`")
            if override.tp is not None and override.tp not in sizes:
                raise ValueError(f"overrides[{i}].tp {override.tp} to be one of `tp` {sizes}")
        return overrides

    @field_validator("engine")
    @classmethod
    def _distinct_engines(cls, engines: list[str] | None) -> list[str] | None:
        if engines is not None and len(set(engines)) != len(engines):
            raise ValueError(f"distinct engines, not {engines}")
        return engines

    @model_validator(mode="after")
    def _engines_named(self) -> Playbook:
        """Every engine a method or an override names is one of the playbook's, and a method's
        algorithm that one engine has is one each of its engines has (vLLM has no DDTREE): refused
        here, before any host is contacted, naming the field. A name no engine knows (a typo) is
        left to the plan, which names the algorithms of each host's release."""
        engines = self.engine or [DEFAULT_ENGINE]
        known = {a for name in ENGINE_NAMES for a in engine_named(name).algorithms(None)}
        for i, override in enumerate(self.overrides):
            if override.engine is not None and override.engine not in engines:
                raise ValueError(f"overrides[{i}].engine {override.engine!r} to be one of the playbook's `engine` {engines}")
        for name, method in self.methods.items():
            for engine in method.engines or []:
                if engine not in engines:
                    raise ValueError(f"methods.{name}.engines: {engine!r} to be one of the playbook's `engine` {engines}")
            for engine in self.engines_of(name):
                served = engine_named(engine)
                algorithms = served.algorithms(None)
                if method.algorithm in known and method.algorithm not in algorithms:
                    raise ValueError(
                        f"methods.{name}.algorithm {method.algorithm} to be a speculative method {served.title} has ({', '.join(algorithms)}); "
                        f"run it under the engines that have it with `methods.{name}.engines`"
                    )
        return self

    def engines_of(self, method: str) -> list[str]:
        """The engines `method` runs under: its `engines`, else the playbook's (SGLang alone by default)."""
        return self.methods[method].engines or self.engine or [DEFAULT_ENGINE]

    @model_validator(mode="after")
    def _answers_fit_the_context(self) -> Playbook:
        """A workload asking for more new tokens than a server's context holds can never run."""
        for tp in self.tp:
            for method, engine in ((m, e) for m in self.methods for e in self.engines_of(m)):
                context = _settings_for(self, tp, method, engine).context_length
                if context is None:
                    continue  # the model's own context: known from its card at plan time
                for name, workload in self.workloads.items():
                    if workload.max_new_tokens >= context:
                        raise ValueError(f"workloads.{name}.max_new_tokens ({workload.max_new_tokens}) below the context length {context} of tp {tp}, method {method}{_under(engine)}")
                    prompt = workload.fixed_input_tokens()
                    if prompt is not None and prompt + workload.max_new_tokens > context:
                        raise ValueError(
                            f"workloads.{name}.input_tokens + max_new_tokens ({prompt} + {workload.max_new_tokens}) within the context length {context} of tp {tp}, method {method}{_under(engine)}"
                        )
        return self


def load_playbook(path: Path) -> Playbook:
    # A dataset file named relative to the playbook is found beside it (fleet.workloads.kinds.dataset_path).
    playbook = load_model_file(path, Playbook, context={PLAYBOOK_DIR: path.resolve().parent})
    playbook._source = path
    return playbook


# ---------------------------------------------------------------------------------------------
# Expansion into server configurations and runs


def stable_hash(data: Any, length: int = 12) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:length]


@dataclass(frozen=True)
class ServerConfig:
    """One server launch: everything that goes into the engine's command line and environment."""

    model: ModelRef
    draft: ModelRef | None
    tp: int
    method: str  # the playbook's method name
    variant: str  # method name plus its variant, e.g. "ddtree-b15"
    algorithm: str | None
    num_draft_tokens: int | None
    num_steps: int | None
    eagle_topk: int | None
    ddtree_budget: int | None
    settings: ServerSettings
    method_flags: Mapping[str, FlagValue] = field(default_factory=dict)
    method_env: Mapping[str, str] = field(default_factory=dict)
    # Set only by a port_in_use fix: the port is placement, not definition, except when another
    # process took the planned one and the fixed variant must differ from the failed original.
    port: int | None = None
    # The engine a playbook's `engine` axis names; None where it names none (SGLang, as before).
    engine: str | None = None

    @property
    def engine_name(self) -> str:
        """The engine that serves it."""
        return self.engine or DEFAULT_ENGINE

    def defining(self) -> dict[str, Any]:
        pinned = {"port": self.port} if self.port is not None else {}  # ids of unpinned configs stay as they were
        # SGLang, named or not, is what every configuration ran before engines were an axis: its ids stay.
        served = {"engine": self.engine} if self.engine not in (None, DEFAULT_ENGINE) else {}
        return {
            **pinned,
            **served,
            "model": self.model.model_dump(exclude={"mirror"}),
            "draft": self.draft.model_dump(exclude={"mirror"}) if self.draft else None,
            "tp": self.tp,
            "method": self.method,
            "algorithm": self.algorithm,
            "num_draft_tokens": self.num_draft_tokens,
            "num_steps": self.num_steps,
            "eagle_topk": self.eagle_topk,
            "ddtree_budget": self.ddtree_budget,
            "settings": self.settings.model_dump(),
            "method_flags": dict(self.method_flags),
            "method_env": dict(self.method_env),
        }

    @property
    def id(self) -> str:
        return stable_hash(self.defining())

    @property
    def label(self) -> str:
        return f"tp{self.tp}-{self.variant}" if self.engine is None else f"{self.engine}-tp{self.tp}-{self.variant}"


@dataclass(frozen=True)
class Run:
    server: ServerConfig
    workload_name: str
    workload: WorkloadModel
    repeats: int

    @property
    def id(self) -> str:
        return stable_hash(
            {
                "server": self.server.defining(),
                "workload": {"name": self.workload_name, **self.workload.model_dump()},
                "repeats": self.repeats,
            }
        )

    @property
    def label(self) -> str:
        return f"{self.server.label}/{self.workload_name}"


def _variants(name: str, method: MethodSpec) -> list[tuple[str, int | None]]:
    if method.budgets:
        return [(f"{name}-b{budget}", budget) for budget in method.budgets]
    return [(name, None)]


def _under(engine: str) -> str:
    return "" if engine == DEFAULT_ENGINE else f" under {engine}"


def _settings_for(playbook: Playbook, tp: int, method: str, engine: str) -> ServerSettings:
    settings = playbook.server
    for override in playbook.overrides:
        if override.tp in (None, tp) and override.method in (None, method) and override.engine in (None, engine):
            settings = settings.merged(override.server)
    return settings


def server_configs(playbook: Playbook) -> list[ServerConfig]:
    """Engine x TP x method variant, in the playbook's order. A playbook that names no `engine`
    makes configurations that name none (SGLang's, with the ids they always had)."""
    configs = []
    engines: list[str | None] = list(playbook.engine) if playbook.engine else [None]
    for engine in engines:
        for tp in playbook.tp:
            for name, method in playbook.methods.items():
                if engine is not None and engine not in playbook.engines_of(name):
                    continue
                for variant, budget in _variants(name, method):
                    configs.append(
                        ServerConfig(
                            model=playbook.model,
                            draft=playbook.drafts[method.draft] if method.draft else None,
                            tp=tp,
                            method=name,
                            variant=variant,
                            algorithm=method.algorithm,
                            num_draft_tokens=method.num_draft_tokens,
                            num_steps=method.num_steps,
                            eagle_topk=method.eagle_topk,
                            ddtree_budget=budget,
                            settings=_settings_for(playbook, tp, name, engine or DEFAULT_ENGINE),
                            method_flags=method.flags,
                            method_env=method.env,
                            engine=engine,
                        )
                    )
    return configs


def expand_runs(playbook: Playbook) -> list[Run]:
    """Every run of the playbook, grouped by server configuration (in the playbook's order)."""
    return [Run(server=config, workload_name=name, workload=workload, repeats=playbook.repeats) for config in server_configs(playbook) for name, workload in playbook.workloads.items()]
