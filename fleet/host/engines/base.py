"""What every engine package gives the rest of fleet: the `Engine` interface and the engine-neutral
types that cross it (a launch, a release choice, a refused command line, a start prediction and its
smallest fix, a serving-limits line of the log).

Launch, plan, feasibility, fixes, the agent and facts ask an `Engine` (`fleet.host.engines.engine`);
no module outside `fleet/host/engines/` imports an engine package by name
(tests/unit/test_engine_seam.py). An engine package defines `ENGINE`, an object of this interface,
in its `engine` module, and its name in `fleet.host.engines.ENGINE_NAMES` registers it.

Standard library only: this package ships to hosts with the agent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Union
from fleet.host.errors import ReleaseError

if TYPE_CHECKING:
    from fleet.host.modelcard import ModelCard

Version = tuple[int, int, int]
# The same shape as fleet.playbook.FlagValue, spelled out so that hosts import it without pydantic.
FlagValue = Union[str, int, float, bool, None, list[Union[str, int, float]]]


def parse_version(text: str, *, title: str = "engine", example: str = "1.2.3") -> Version:
    """`0.5.23`, `v0.5.13.post1`, `0.5.14rc0` -> (0, 5, 23), (0, 5, 13), (0, 5, 14)."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if not match:
        raise ReleaseError(f"{title} version {text!r}: expected a release number such as {example}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


@dataclass(frozen=True)
class ReleaseChoice:
    """The version a host reports (or pins) and the known release fleet speaks for it."""

    requested: str
    release: str  # one of `known`
    known: tuple[str, ...]  # the engine's known releases, oldest first
    title: str  # the engine's name as people write it ("SGLang")

    @property
    def exact(self) -> bool:
        return parse_version(self.requested, title=self.title) == parse_version(self.release, title=self.title)

    @property
    def note(self) -> str | None:
        """A warning for the user when fleet speaks a release other than the one asked for."""
        if self.exact:
            return None
        return f"{self.title} {self.requested} is not a release fleet knows ({', '.join(self.known)}); planned with the nearest known release, {self.release}"


def choose_release(version: str, known: tuple[str, ...], title: str) -> ReleaseChoice:
    """The known release nearest to `version`: the newest known release not newer than it, else the
    oldest known one (a release's behaviour holds until the next known release changes it)."""
    wanted = parse_version(version, title=title, example=known[-1])
    candidates = [r for r in known if parse_version(r) <= wanted]
    return ReleaseChoice(requested=version, release=candidates[-1] if candidates else known[0], known=known, title=title)


def render_flag(flag: str, value: FlagValue) -> list[str]:
    """True -> bare flag; False, None or [] -> omitted; list -> one flag then its values; else str()."""
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, list):
        return [flag, *(str(item) for item in value)] if value else []
    return [flag, str(value)]


@dataclass(frozen=True)
class LaunchSpec:
    argv: list[str]  # the full command: [python, "-m", module, flags...]
    env: dict[str, str]  # only what fleet adds or the playbook sets (never secrets)
    upstream: bool  # False when it uses a fork's flags (DDTREE): not checkable against a released parser
    notes: list[str]  # why fleet added something the playbook did not ask for


# What a launch reads of fleet.playbook.ServerConfig, as protocols: the playbook's pydantic models
# stay on the controller, and an engine package ships to hosts with the standard library only.
class ModelRefShape(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def card(self) -> str | None: ...


class SettingsShape(Protocol):
    @property
    def context_length(self) -> int | None: ...
    @property
    def mem_fraction_static(self) -> float | None: ...
    @property
    def max_running_requests(self) -> int | None: ...
    @property
    def max_total_tokens(self) -> int | None: ...
    @property
    def chunked_prefill_size(self) -> int | None: ...
    @property
    def cuda_graph_max_bs(self) -> int | None: ...
    @property
    def attention_backend(self) -> str | None: ...
    @property
    def page_size(self) -> int | None: ...
    @property
    def kv_cache_dtype(self) -> str | None: ...
    @property
    def disable_radix_cache(self) -> bool | None: ...
    @property
    def mamba_scheduler_strategy(self) -> str | None: ...
    @property
    def trust_remote_code(self) -> bool: ...
    @property
    def enable_metrics(self) -> bool: ...
    @property
    def draft_attention_backend(self) -> str | None: ...
    @property
    def flags(self) -> Mapping[str, FlagValue]: ...
    @property
    def env(self) -> Mapping[str, str]: ...


class ServerShape(Protocol):
    @property
    def label(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def model(self) -> ModelRefShape: ...
    @property
    def draft(self) -> ModelRefShape | None: ...
    @property
    def tp(self) -> int: ...
    @property
    def algorithm(self) -> str | None: ...
    @property
    def num_draft_tokens(self) -> int | None: ...
    @property
    def num_steps(self) -> int | None: ...
    @property
    def eagle_topk(self) -> int | None: ...
    @property
    def ddtree_budget(self) -> int | None: ...
    @property
    def settings(self) -> SettingsShape: ...
    @property
    def method_flags(self) -> Mapping[str, FlagValue]: ...
    @property
    def method_env(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Adjustment:
    """One change of a server setting (`field`, a ServerSettings name) that a prediction suggests."""

    field: str
    old: object
    new: object
    reason: str


@dataclass(frozen=True)
class MemoryFailure:
    failure_class: str  # one of fleet.host.failures' classes: "max_running_requests_zero", "kv_pool_too_small", "cuda_oom", ...
    message: str  # the engine's exact text for the release planned (PyTorch's wording for cuda_oom)
    phase: str  # where the engine raises, in the engine's own start-up order ("load_weights", "kv_cache", ...)
    exception: str  # the exception type the engine shows, e.g. "AssertionError"
    model_role: str = "target"  # "draft" when the draft model's weights do not fit


class MemoryPlanShape(Protocol):
    """What the rest of fleet reads of an engine's memory plan (each engine's plan has more)."""

    @property
    def failure(self) -> MemoryFailure | None: ...
    @property
    def feasible(self) -> bool: ...
    @property
    def kv_tokens(self) -> int: ...
    @property
    def context_len(self) -> int: ...
    @property
    def max_running_requests(self) -> int: ...
    @property
    def cuda_graph_max_bs(self) -> int: ...


@dataclass(frozen=True)
class Feasibility:
    """Will a launch start? `ok`: the server is expected to start. `plan` None: nothing was planned,
    and `reason` says why: not checkable (no model card, a flag the planner cannot read: `ok` stays
    True, so a configuration is never skipped for the planner's sake) or refused by the engine's
    flag checks (`ok` False). `suggestion`: the smallest change that makes it start and serve the
    concurrency asked for; [] when none is needed, None when none was found or nothing was planned."""

    ok: bool
    plan: MemoryPlanShape | None
    failure: MemoryFailure | None
    suggestion: list[Adjustment] | None
    reason: str
    inputs: object | None = None  # what the engine's planner was given, derived from the launch


def unchecked(reason: str) -> Feasibility:
    return Feasibility(True, None, None, None, reason)


@dataclass(frozen=True)
class ServingLimits:
    """The line of a server's log that says what it serves with (SGLang's scheduler line)."""

    max_total_num_tokens: int
    max_running_requests: int | None  # None: the line does not say (vLLM's KV-cache line)
    context_len: int


@dataclass(frozen=True)
class StartRecord:
    """What an earlier start of a launch logged of its memory (the lines its engine's `start_line`
    keeps), with the launch and the GPU it started on: a later prediction of the same configuration
    reads it (`Engine.predict_start(observed=...)`) in place of what it would have to assume about
    what the engine measures at start-up."""

    engine: str
    flags: tuple[str, ...]  # the launch's flags, after `python -m MODULE`
    env: tuple[tuple[str, str], ...]  # the launch's environment, sorted
    gpu_memory_mib: int
    release: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class LaunchFacts:
    """What a launch's own flags say, read by the agent: the model as launched (the key of the
    lossless check's reference), whether it decodes speculatively, and the cap on running requests
    where the server does not report it (vLLM's --max-num-seqs; None where it does or they do not say)."""

    model: str
    speculative: bool
    max_running_requests: int | None = None


@dataclass(frozen=True)
class SpecCounters:
    """An engine's running totals of speculative decoding, as its /metrics states them: drafts (one
    per verify step of a request) and the draft tokens accepted (the bonus token not counted)."""

    drafts: float
    accepted: float

    def acceptance_length_since(self, before: SpecCounters) -> float | None:
        """vLLM's mean acceptance length over the window between two readings: 1 + accepted /
        drafts (vllm/v1/spec_decode/metrics.py:112, "conventionally ... includes the bonus token");
        None when no draft was verified in it."""
        drafts = self.drafts - before.drafts
        return 1.0 + (self.accepted - before.accepted) / drafts if drafts > 0 else None


class Engine(Protocol):
    """A serving engine, as the rest of fleet sees it. Releases are the engine's known ones (oldest
    first): every table of an engine package is keyed by one, and a version fleet does not know is
    spoken with the nearest known release (`choose_release`)."""

    @property
    def name(self) -> str:  # the key in ENGINE_NAMES, host files and results: "sglang"
        ...
    @property
    def title(self) -> str:  # as people write it: "SGLang"
        ...
    @property
    def server_module(self) -> str:  # `python -m` this to serve: "sglang.launch_server"
        ...
    @property
    def version_tested(self) -> str:  # the release planned for a real host whose version is unknown
        ...
    @property
    def releases(self) -> tuple[str, ...]: ...
    @property
    def sim_release(self) -> str:  # the release a sim host plays unless its host file pins one
        ...
    @property
    def forks(self) -> tuple[str, ...]:  # forks fleet knows by name ("ddtree"); the first is what a sim host plays
        ...
    @property
    def speculative_default_max_running_requests(self) -> int: ...
    @property
    def safe_max_mem_fraction_static(self) -> float: ...

    def choose_release(self, version: str) -> ReleaseChoice: ...

    def algorithms(self, fork: str | None) -> tuple[str, ...]:
        """The speculative algorithms the engine takes, the fork's own after the upstream ones, then
        every other fork's (a fork algorithm on an upstream host is a note, not a typo)."""
        ...

    def check_argv(self, release: str, flags: Sequence[str], *, fork: str | None) -> None:
        """Raises ArgvError where the release's own parser would refuse `flags` (engine flags
        alone: the engine adds the model argument its parser requires)."""
        ...

    def build_launch(
        self,
        server: ServerShape,
        *,
        python: str,
        model_path: str,
        draft_path: str | None,
        port: int,
        bind_host: str,
        hybrid: bool | None,
        served_model_name: str | None,
        card: ModelCard | None,
        version: str | None,
        module: str,
    ) -> LaunchSpec: ...

    def predict_start(
        self,
        flags: Sequence[str],
        env: Mapping[str, str],
        target: ModelCard,
        draft: ModelCard | None,
        *,
        algorithm: str | None,
        gpu_memory_mib: int,
        release: str,
        fork: str | None,
        observed: Sequence[StartRecord] = (),
    ) -> Feasibility:
        """The engine's verdict on a launch's flags and environment on a GPU of `gpu_memory_mib`;
        `observed`: what earlier starts logged (the engine uses those of the same configuration)."""
        ...

    def start_line(self, line: str) -> bool:
        """Whether a server's log line states what its start measured of memory (kept with its
        results for the next prediction, `StartRecord`)."""
        ...

    def flag_for(self, release: str, name: str) -> str:
        """The release's spelling of a setting (`cuda_graph_max_bs` -> `--cuda-graph-max-bs-decode`)."""
        ...

    def disable_cuda_graph(self, release: str) -> tuple[str, FlagValue]:
        """The flag (without --) and value that turn decode CUDA graphs off under `release`."""
        ...

    def serving_limits(self, line: str) -> ServingLimits | None:
        """The figures of a log line that states them, else None."""
        ...

    # -- the server's HTTP surface, as fleet's client and agent use it ---------------------------

    @property
    def client_api(self) -> str:  # the generation route a client drives: "generate" (SGLang's) or "completions" (/v1/completions)
        ...
    @property
    def speculative_flags(self) -> tuple[str, ...]:  # the flags fleet renders a speculative method with (any one of them: speculative)
        ...
    @property
    def info_path(self) -> str | None:  # the route that states the server's limits ("/server_info"); None: the engine has none
        ...

    def read_launch(self, flags: Sequence[str]) -> LaunchFacts:
        """What the agent needs to know of a launch from its flags (after `python -m MODULE`)."""
        ...

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        """The engine's speculative-decoding totals in a /metrics text, for an engine that reports
        acceptance there and not per request; None otherwise."""
        ...


def describe_adjustments(adjustments: Sequence[Adjustment]) -> str:
    """`max_running_requests 8 -> 4, ...`: the change itself, for provenance and tables."""
    return ", ".join(f"{a.field} {a.old} -> {a.new}" for a in adjustments)
