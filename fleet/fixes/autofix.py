"""The next fix for a failed run, decided from its failure class and the figures its diagnosis read.

Pure: nothing is launched, written or quarantined here; the sweep applies (or, under
`auto_fix: suggest`, only reports) what `propose_fix` returns. A fix never overwrites: a changed
server configuration or workload is a new variant with its own id, next to the original's failure,
and every fix carries its provenance (original configuration, class, fix, attempt).

The rules (issue 6, "Automatic fixes"):
- context_length_exceeded: a startup refusal (--context-length above the model's) -> the model's
  context length; a request that did not fit -> a long-context prompt shrunk by real token count
  (the prompt's target scaled by the tokens the server counted for it), or else fewer new tokens;
- max_running_requests_zero / kv_pool_too_small: the memory planner's smallest fix when model cards
  exist (fewer requests, then a higher mem_fraction_static up to 0.90, then a shorter context);
  without cards (or when the planner thinks the launch fits) the same ladder one step at a time:
  halve max_running_requests, else raise mem_fraction_static by 0.05 up to 0.90, else halve the
  context length (not below 2048);
- cuda_oom while capturing CUDA graphs -> half the largest captured batch size (--cuda-graph-max-bs);
  other CUDA OOMs -> the planner's smallest fix when it has one;
- cuda_graph_error (a capture that failed for another reason than memory) -> first half the largest
  captured batch size (the release's --cuda-graph-max-bs spelling), then, on a second attempt or
  when no batch size is known, a variant without decode CUDA graphs (the release's own switch);
- cuda_illegal_instruction -> quarantine (architecture, engine and version, algorithm, budget); not
  a retry, so not bounded by the attempt limit;
- not_lossless (a speculative configuration whose greedy tokens diverged early from the
  autoregressive server's: fleet.host.agent.lossless) -> the same quarantine: a verify kernel that
  accepts wrong tokens does so again on a retry;
- port_in_use -> another port, which the sweep's planner picks.

Figures (`diagnosis_numbers`) are the named values `fleet.host.diagnose` extracts, as str or numbers:
context_len, total_tokens, input_tokens, max_new_tokens, max_allowed, requested_context,
derived_context, requested_max_running_requests, mem_fraction_static, capture_step,
cuda_graph_max_bs, port.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any, Literal

from fleet.fixes.feasibility import apply_adjustments, check_config, predicted_failure
from fleet.fixes.quarantine import QuarantineKey
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import Adjustment, Feasibility, describe_adjustments
from fleet.host.failures import FailureClass
from fleet.host.modelcard import load_model_card
from fleet.inventory import ENGINE_DEFAULT_FORK, fork_of
from fleet.playbook import AutoFix, Limits, Run, ServerConfig, ServerSettings
from fleet.workloads.kinds import LongContextWorkload, WorkloadModel

# Room left for chat-template tokens when only max_new_tokens can give way (LongContextWorkload's default).
DEFAULT_MARGIN_TOKENS: int = LongContextWorkload.model_fields["margin_tokens"].default
MEM_FRACTION_STEP = 0.05
MIN_CONTEXT_LENGTH = 2048  # smallest_fix does not halve the context below this either
_MEMORY_CLASSES = frozenset({FailureClass.MAX_RUNNING_REQUESTS_ZERO.value, FailureClass.KV_POOL_TOO_SMALL.value})
# Why each quarantined class is skipped rather than retried: what happened, in the fix's words.
_QUARANTINE_WHY = {
    FailureClass.CUDA_ILLEGAL_INSTRUCTION.value: "a GPU kernel hit an illegal instruction",
    FailureClass.NOT_LOSSLESS.value: "its tokens at temperature 0 diverged early from the autoregressive server's (not lossless)",
    # The engine's build (or a kernel it needs) has no code for the GPU: "no kernel image is
    # available", "sm_120 is not compatible with the current PyTorch installation" (vLLM and SGLang alike).
    FailureClass.UNSUPPORTED_GPU_ARCH.value: "the engine's build has no kernels for this GPU architecture",
}
_QUARANTINED_CLASSES = frozenset(_QUARANTINE_WHY)


class FixKind(str, Enum):
    CONTEXT_LENGTH = "context_length"  # the server's --context-length, to what the model allows
    SHRINK_PROMPT = "shrink_prompt"  # the long-context workload's prompt_tokens
    SHRINK_NEW_TOKENS = "shrink_new_tokens"  # the workload's max_new_tokens
    MEMORY = "memory"  # max_running_requests / mem_fraction_static / context_length
    CUDA_GRAPH_MAX_BS = "cuda_graph_max_bs"
    DISABLE_CUDA_GRAPH = "disable_cuda_graph"  # a variant that captures no decode CUDA graph
    QUARANTINE = "quarantine"
    NEW_PORT = "new_port"  # the marker: the sweep's planner gives the server another port


@dataclass(frozen=True)
class Fix:
    kind: FixKind
    description: str  # why, with the figures it rests on
    new_config: ServerConfig | None  # a variant of the server configuration (its own id), or None
    new_workload: WorkloadModel | None  # a variant of the run's workload, or None
    quarantine: QuarantineKey | None  # what to quarantine, or None
    provenance: Mapping[str, Any] = field(default_factory=dict)  # original_config_id, failure_class, fix, attempt, ...

    @property
    def needs_new_port(self) -> bool:
        return self.kind is FixKind.NEW_PORT

    def new_run(self, run: Run) -> Run | None:
        """The fixed run (its own id), or None when the fix changes neither server nor workload."""
        if self.new_config is None and self.new_workload is None:
            return None
        return replace(run, server=self.new_config or run.server, workload=self.new_workload or run.workload)


def decide(policy: AutoFix, fix: Fix) -> Literal["apply", "suggest", "off"]:
    """What the sweep does with `fix` under the playbook's `auto_fix`: apply it (re-run the variant,
    quarantine, move the port), only report it, or neither. Every kind follows the policy alike."""
    if policy is AutoFix.apply:
        return "apply"
    if policy is AutoFix.suggest:
        return "suggest"
    return "off"


def propose_fix(
    config: ServerConfig,
    run: Run,
    failure_class: str,
    diagnosis_numbers: Mapping[str, Any],
    attempt: int,
    *,
    gpu_memory_mib: int,
    engine_version: str | None,
    limits: Limits,
    engine: str = "sglang",
    gpu_arch: str | None = None,
    original_config_id: str | None = None,
    engine_fork: str | None = ENGINE_DEFAULT_FORK,
    trust_planner: bool = True,
) -> Fix | None:
    """The fix for `run` (of server `config`) that failed with `failure_class`, or None when there
    is none (an unfixable class, nothing left to change, or the attempts are used up).

    `attempt`: the number this fix would have, 1 for the first fix of an original run;
    `limits.max_fix_attempts` bounds it. `engine` / `engine_version` / `gpu_memory_mib` / `gpu_arch`
    ("sm_120") describe the host the run failed on, `engine_fork` its engine's fork (`engine.fork`;
    default: the engine kind's). `original_config_id`: the configuration the chain of fixes started
    from (default: `config`'s own id). `trust_planner`: no variant the memory planner predicts to
    fail the same way is proposed (a model load for nothing); False for a sweep started with
    --no-memory-check, whose user asked for every configuration to be tried for real."""
    if run.server.id != config.id:
        raise ValueError(f"run {run.label} is of server {run.server.id}, not of the configuration {config.id} to fix")
    if attempt < 1:
        raise ValueError(f"attempt {attempt}: expected 1 or more (1 is the first fix of a run)")
    numbers = _Numbers(diagnosis_numbers)

    if failure_class in _QUARANTINED_CLASSES:
        proposal = _quarantine(config, gpu_arch, engine, engine_version, failure_class)
    elif attempt > limits.max_fix_attempts:
        return None
    elif failure_class == FailureClass.PORT_IN_USE.value:
        port = numbers.integer("port")
        taken = f"port {port} is" if port else "a port the server needs is"
        proposal = _Proposal(FixKind.NEW_PORT, f"{taken} taken by another process: start the server on another port", "another port")
    else:
        memory = _Memory(config, engine, gpu_memory_mib, engine_version, fork_of(engine, engine_fork))
        if failure_class == FailureClass.CONTEXT_LENGTH_EXCEEDED.value:
            proposal = _context_fix(config, run, numbers)
        elif failure_class in _MEMORY_CLASSES:
            proposal = _memory_fix(config, numbers, memory)
        elif failure_class == FailureClass.CUDA_OOM.value:
            proposal = _graph_fix(config, numbers, memory) if numbers.text("capture_step") else memory.planner_fix()
        elif failure_class == FailureClass.CUDA_GRAPH_ERROR.value:
            proposal = _graph_error_fix(config, numbers, memory, engine_version, attempt)
        else:
            proposal = None
    if proposal is None:
        return None
    new_config = apply_adjustments(config, proposal.adjustments) if proposal.adjustments else None
    if proposal.flags:
        base = new_config or config
        new_config = replace(base, settings=base.settings.merged(ServerSettings.model_validate({"flags": dict(proposal.flags)})))
    if (
        trust_planner
        and new_config is not None
        and gpu_memory_mib > 0
        and predicted_failure(
            new_config,
            failure_class,
            engine=engine,
            gpu_memory_mib=gpu_memory_mib,
            engine_version=engine_version,
            fork=fork_of(engine, engine_fork),
        )
    ):
        return None  # the planner expects the variant to fail the same way: a model load for nothing
    return Fix(
        kind=proposal.kind,
        description=proposal.description,
        new_config=new_config,
        new_workload=proposal.workload,
        quarantine=proposal.quarantine,
        provenance={
            "original_config_id": original_config_id or config.id,
            "failed_config_id": config.id,
            "failed_run_id": run.id,
            "failure_class": failure_class,
            "fix": proposal.summary,
            "attempt": attempt,
        },
    )


@dataclass(frozen=True)
class _Proposal:
    kind: FixKind
    description: str
    summary: str  # the change itself, e.g. "max_running_requests 8 -> 4"
    adjustments: tuple[Adjustment, ...] = ()
    workload: WorkloadModel | None = None
    quarantine: QuarantineKey | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)  # engine flags the variant adds


class _Numbers:
    """Diagnosis figures as numbers: regex groups arrive as text, and a missing or garbled one is None."""

    def __init__(self, figures: Mapping[str, Any]) -> None:
        self._figures = figures

    def text(self, name: str) -> str | None:
        value = self._figures.get(name)
        return None if value in (None, "", "None") else str(value)

    def integer(self, name: str) -> int | None:
        value = self.number(name)
        if value is None or not math.isfinite(value) or value != int(value):
            return None
        return int(value)

    def number(self, name: str) -> float | None:
        text = self.text(name)
        try:
            return float(text) if text is not None else None
        except ValueError:
            return None


class _Memory:
    """The memory planner's view of the failed configuration, computed once and only if asked."""

    def __init__(self, config: ServerConfig, engine: str, gpu_memory_mib: int, engine_version: str | None, fork: str | None) -> None:
        self._config = config
        self._engine = engine
        self._gpu_memory_mib = gpu_memory_mib
        self._engine_version = engine_version
        self._fork = fork

    @cached_property
    def feasibility(self) -> Feasibility:
        return check_config(
            self._config,
            engine=self._engine,
            gpu_memory_mib=self._gpu_memory_mib,
            engine_version=self._engine_version,
            fork=self._fork,
        )

    def planner_fix(self) -> _Proposal | None:
        suggestion = self.feasibility.suggestion
        if not suggestion:  # None: nothing found or not checked; []: the planner thinks it fits
            return None
        reasons = "; ".join(a.reason for a in suggestion)
        return _Proposal(FixKind.MEMORY, f"memory planner: {reasons}", describe_adjustments(suggestion), tuple(suggestion))


def _quarantine(config: ServerConfig, gpu_arch: str | None, engine: str, engine_version: str | None, failure_class: str = FailureClass.CUDA_ILLEGAL_INSTRUCTION.value) -> _Proposal | None:
    if gpu_arch is None:
        return None  # without the architecture the quarantine would hit GPUs that run it fine
    key = QuarantineKey.for_config(config, arch=gpu_arch, engine=engine, engine_version=engine_version)
    what = _QUARANTINE_WHY.get(failure_class, _QUARANTINE_WHY[FailureClass.CUDA_ILLEGAL_INSTRUCTION.value])
    return _Proposal(
        FixKind.QUARANTINE,
        f"{what}: {key} is skipped on {gpu_arch} hosts until lifted (`fleet quarantine lift {key}`); retrying the same kernel does not help",
        f"quarantine {key}",
        quarantine=key,
    )


def _context_fix(config: ServerConfig, run: Run, numbers: _Numbers) -> _Proposal | None:
    requested, derived = numbers.integer("requested_context"), numbers.integer("derived_context")
    if requested is not None and derived is not None and derived < requested:
        why = f"{engine_named(config.engine_name).title} refuses a context length of {requested} above the model's derived {derived}"
        return _step("context_length", config.settings.context_length, derived, why, FixKind.CONTEXT_LENGTH)

    workload = run.workload
    max_new = numbers.integer("max_new_tokens") or workload.max_new_tokens
    context = numbers.integer("context_len") or config.settings.context_length or _card_context(config)
    input_limit = numbers.integer("max_allowed")  # SGLang's max_req_input_len: the KV pool, not the context
    real_prompt = numbers.integer("input_tokens")
    margin = workload.margin_tokens if isinstance(workload, LongContextWorkload) else DEFAULT_MARGIN_TOKENS
    rooms = [room for room in (context - max_new - margin if context else None, input_limit - margin if input_limit else None) if room]
    if not rooms:
        return None
    room = min(rooms)  # real prompt tokens that fit
    limit_text = f"context {context}" + (f", input limit {input_limit}" if input_limit else "")

    if isinstance(workload, LongContextWorkload):
        # The server counted `real_prompt` tokens for a target of prompt_tokens: scale the target.
        scale = real_prompt / workload.prompt_tokens if real_prompt else 1.0
        target = math.floor(room / scale)
        if 1 <= target < workload.prompt_tokens:
            counted = f" (the server counted {real_prompt} tokens for a target of {workload.prompt_tokens})" if real_prompt else ""
            why = f"{target} prompt tokens + {max_new} new + {margin} margin fit the {limit_text}{counted}"
            return _workload_step(workload, "prompt_tokens", target, why, FixKind.SHRINK_PROMPT)
    if context and real_prompt:
        new_tokens = context - real_prompt - margin
        if 1 <= new_tokens < workload.max_new_tokens:
            why = f"a prompt of {real_prompt} tokens leaves {new_tokens} of the {limit_text} (margin {margin})"
            return _workload_step(workload, "max_new_tokens", new_tokens, why, FixKind.SHRINK_NEW_TOKENS)
    return None


def _memory_fix(config: ServerConfig, numbers: _Numbers, memory: _Memory) -> _Proposal | None:
    if config.model.card is not None:
        planned = memory.planner_fix()
        if planned is not None:
            return planned
    settings = config.settings
    # One request of the configured context does not fit the KV cache (vLLM's check at start,
    # kv_cache_planning.py:64-84, states the length that fits): fewer requests cannot help, the
    # context that fits does.
    fits, context = numbers.integer("context_that_fits"), settings.context_length or numbers.integer("max_model_len")
    if fits is not None and context is not None and MIN_CONTEXT_LENGTH <= fits < context:
        return _step("context_length", context, fits, "one request of the context did not fit in the KV cache; this length is what fits")
    requests = settings.max_running_requests or numbers.integer("requested_max_running_requests")
    if requests is None and config.algorithm is not None:
        requests = engine_named(config.engine_name).speculative_default_max_running_requests  # the engine's default with speculative decoding
    if requests is not None and requests > 1:
        return _step("max_running_requests", requests, requests // 2, "fewer concurrent requests need fewer KV tokens and state slots")
    fraction = settings.mem_fraction_static or numbers.number("mem_fraction_static")
    ceiling = engine_named(config.engine_name).safe_max_mem_fraction_static
    if fraction is not None and fraction < ceiling:
        raised = min(ceiling, round(fraction + MEM_FRACTION_STEP, 2))
        return _step("mem_fraction_static", fraction, raised, f"more memory for the caches (bounded at {ceiling})")
    context = settings.context_length or numbers.integer("context_len") or _card_context(config)
    if context is not None and context // 2 >= MIN_CONTEXT_LENGTH:
        return _step("context_length", context, context // 2, "a shorter context needs fewer KV tokens per request")
    return None


def _graph_fix(config: ServerConfig, numbers: _Numbers, memory: _Memory) -> _Proposal | None:
    """Half the largest batch size whose CUDA graph was being captured."""
    largest = config.settings.cuda_graph_max_bs or numbers.integer("cuda_graph_max_bs")
    plan = memory.feasibility.plan if config.model.card is not None else None
    if largest is None and plan is not None:
        largest = plan.cuda_graph_max_bs  # SGLang's default for this GPU's memory and TP size
    if largest is None:
        return None
    # SGLang captures no batch larger than the request pool.
    pool = plan.max_running_requests if plan is not None and plan.feasible else config.settings.max_running_requests
    captured = min(largest, pool) if pool else largest
    if captured < 2:
        return None
    return _step("cuda_graph_max_bs", largest, captured // 2, f"CUDA graph capture up to batch {captured} ran out of memory", FixKind.CUDA_GRAPH_MAX_BS)


def _graph_error_fix(config: ServerConfig, numbers: _Numbers, memory: _Memory, engine_version: str | None, attempt: int) -> _Proposal | None:
    """A capture that failed for a reason other than memory: fewer captured batch sizes first (a
    shape or kernel that fails only at large batches), then no decode graphs at all (slow, but it
    serves, and it shows whether capture is at fault)."""
    served = engine_named(config.engine_name)
    release = served.choose_release(engine_version).release if engine_version else served.sim_release
    cause = numbers.text("capture_error")
    why = f"CUDA graph capture failed ({cause})" if cause else "CUDA graph capture failed"
    if attempt == 1:
        halved = _graph_fix(config, numbers, memory)
        if halved is not None:
            flag = served.flag_for(release, "cuda_graph_max_bs")
            (adjustment,) = halved.adjustments
            return _step(
                "cuda_graph_max_bs", adjustment.old, adjustment.new,
                f"{why}: capture fewer batch sizes ({flag} {adjustment.new} under {served.title} {release})", FixKind.CUDA_GRAPH_MAX_BS,
            )  # fmt: skip
    name, value = served.disable_cuda_graph(release)
    if config.settings.flags.get(name) == value:
        return None  # already without graphs: nothing left to change
    spelled = f"--{name}" if value is True else f"--{name}={value}"
    return _Proposal(
        FixKind.DISABLE_CUDA_GRAPH,
        f"{why}: a variant without decode CUDA graphs ({spelled} under {served.title} {release}); slower, but it shows whether capture is at fault",
        spelled,
        flags={name: value},
    )


def _step(name: str, old: Any, new: Any, why: str, kind: FixKind = FixKind.MEMORY) -> _Proposal:
    adjustment = Adjustment(name, old, new, why)
    return _Proposal(kind, f"{name} {old} -> {new}: {why}", describe_adjustments([adjustment]), (adjustment,))


def _workload_step(workload: WorkloadModel, name: str, new: int, why: str, kind: FixKind) -> _Proposal:
    """A validated copy of `workload` with `name` set to `new`."""
    old = getattr(workload, name)
    changed = type(workload).model_validate({**workload.model_dump(), name: new})
    return _Proposal(kind, f"{name} {old} -> {new}: {why}", f"{name} {old} -> {new}", workload=changed)


def _card_context(config: ServerConfig) -> int | None:
    return load_model_card(config.model.card).context_length if config.model.card else None
