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
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import Field, ValidationInfo, field_validator, model_validator

from fleet.config import StrictModel, load_model_file
from fleet.inventory import NAME_PATTERN

FlagValue = Union[str, int, float, bool, None, list[Union[str, int, float]]]
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


class ModelRef(StrictModel):
    """Where the weights come from. `repo` is fetched into each host's cache; `path` is already on the hosts."""

    repo: str | None = Field(default=None, description="Hugging Face repo id, e.g. Qwen/Qwen3.6-27B")
    revision: str = Field(default="main", min_length=1)
    path: str | None = Field(default=None, description="a model directory that already exists on every host")
    mirror: str | None = Field(default=None, description="rsync source (`host:/dir` or a controller path) used instead of the hub")
    card: str | None = Field(default=None, description="fleet model card for memory planning, e.g. qwen3.6-27b")

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

    algorithm: str | None = Field(default=None, description="DFLASH, DDTREE, EAGLE, EAGLE3, NGRAM, ... or a plugin's name")
    draft: Name | None = Field(default=None, description="a key of `drafts`")
    num_draft_tokens: int | None = Field(default=None, ge=1)
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    budgets: list[Annotated[int, Field(ge=1)]] | None = Field(default=None, description="DDTree node budgets: one variant each")
    flags: dict[str, FlagValue] = Field(default_factory=dict, description="extra engine flags, without the leading --")
    env: dict[str, str] = Field(default_factory=dict)

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

    context_length: int | None = Field(default=None, ge=256)
    mem_fraction_static: float | None = Field(default=None, gt=0.05, lt=0.99)
    max_running_requests: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = Field(default=None, ge=1)
    attention_backend: str | None = None
    draft_attention_backend: str | None = None
    disable_radix_cache: bool | None = Field(default=None, description="unset: fleet decides (hybrid models with speculative decoding need it)")
    mamba_scheduler_strategy: str | None = None
    page_size: int | None = Field(default=None, ge=1)
    kv_cache_dtype: str | None = None
    trust_remote_code: bool = False
    enable_metrics: bool = True
    flags: dict[str, FlagValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    def merged(self, patch: ServerSettings) -> ServerSettings:
        """Fields set in `patch` win; flags and env are merged key by key."""
        data = self.model_dump()
        for key in patch.model_fields_set:
            value = getattr(patch, key)
            data[key] = {**data[key], **value} if key in ("flags", "env") else value
        return ServerSettings.model_validate(data)


class Override(StrictModel):
    """Server settings that apply only where `tp` and/or `method` match."""

    tp: int | None = None
    method: str | None = None
    server: ServerSettings


# Workload defaults send enough requests for a p90 (10: fleet.host.agent.stats states the rule).
class ShortWorkload(StrictModel):
    kind: Literal["short"]
    prompts: list[Name] = Field(min_length=1, description="names from fleet's prompt library (fib, qsort, arith, json, ...)")
    max_new_tokens: int = Field(default=256, ge=1)
    requests: int | None = Field(
        default=None, ge=1, description="requests per repeat, in whole rounds of the prompts; default: enough for a p90 (10)"
    )


class LongContextWorkload(StrictModel):
    kind: Literal["long_context"]
    prompt_tokens: int = Field(ge=1, description="target prompt length; shrunk by real token count to fit the context")
    max_new_tokens: int = Field(default=256, ge=1)
    margin_tokens: int = Field(default=64, ge=0)
    requests: int = Field(default=10, ge=1, description="requests per repeat; the default is enough for a p90")


class ConcurrencyWorkload(StrictModel):
    kind: Literal["concurrency"]
    levels: Literal["auto"] | list[Annotated[int, Field(ge=1)]] = Field(
        default="auto", description="`auto`: 1, 2, 4, ... up to the server's effective max_running_requests"
    )
    prompt: Name = "qsort"
    max_new_tokens: int = Field(default=256, ge=1)
    requests_per_level: int | None = Field(
        default=None, ge=1, description="default: enough for a p90 (10) and 2 x the level (fleet.host.agent.drive.requests_at_level)"
    )


class AgenticWorkload(StrictModel):
    kind: Literal["agentic"]
    turns: int = Field(default=6, ge=1)
    sessions: int = Field(default=2, ge=1, description="conversations side by side; 2 x 6 turns: enough for a p90")
    max_new_tokens: int = Field(default=256, ge=1)


Workload = Annotated[
    Union[ShortWorkload, LongContextWorkload, ConcurrencyWorkload, AgenticWorkload], Field(discriminator="kind")
]


class AutoFix(str, Enum):
    apply = "apply"
    suggest = "suggest"
    off = "off"


class Isolation(str, Enum):
    shared = "shared"
    exclusive = "exclusive"


class Limits(StrictModel):
    server_start_timeout_s: float = Field(default=1200, gt=0)
    request_timeout_s: float = Field(default=600, gt=0)
    no_token_timeout_s: float = Field(default=120, gt=0, description="a stream with no token for this long is abandoned")
    max_fix_attempts: int = Field(default=2, ge=0)


class Playbook(StrictModel):
    name: Name
    description: str = ""
    model: ModelRef
    drafts: dict[Name, ModelRef] = Field(default_factory=dict)
    methods: dict[Name, MethodSpec] = Field(min_length=1)
    tp: list[Annotated[int, Field(ge=1, le=64)]] = Field(min_length=1)
    server: ServerSettings = ServerSettings()
    overrides: list[Override] = Field(default_factory=list)
    workloads: dict[Name, Workload] = Field(min_length=1)
    repeats: int = Field(default=1, ge=1)
    limits: Limits = Limits()
    auto_fix: AutoFix = AutoFix.apply
    isolation: Isolation = Isolation.shared

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


def load_playbook(path: Path) -> Playbook:
    return load_model_file(path, Playbook)


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

    def defining(self) -> dict[str, Any]:
        pinned = {"port": self.port} if self.port is not None else {}  # ids of unpinned configs stay as they were
        return {
            **pinned,
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
        return f"tp{self.tp}-{self.variant}"


@dataclass(frozen=True)
class Run:
    server: ServerConfig
    workload_name: str
    workload: ShortWorkload | LongContextWorkload | ConcurrencyWorkload | AgenticWorkload
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


def _settings_for(playbook: Playbook, tp: int, method: str) -> ServerSettings:
    settings = playbook.server
    for override in playbook.overrides:
        if override.tp in (None, tp) and override.method in (None, method):
            settings = settings.merged(override.server)
    return settings


def server_configs(playbook: Playbook) -> list[ServerConfig]:
    configs = []
    for tp in playbook.tp:
        for name, method in playbook.methods.items():
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
                        settings=_settings_for(playbook, tp, name),
                        method_flags=method.flags,
                        method_env=method.env,
                    )
                )
    return configs


def expand_runs(playbook: Playbook) -> list[Run]:
    """Every run of the playbook, grouped by server configuration (in the playbook's order)."""
    return [
        Run(server=config, workload_name=name, workload=workload, repeats=playbook.repeats)
        for config in server_configs(playbook)
        for name, workload in playbook.workloads.items()
    ]
