"""Will a server configuration start? The memory planner's verdict on the exact launch, before it runs.

The planner's inputs are not rebuilt from the playbook: the launch's own argv and environment go
through the host release's parser (`fleet.host.engines.sglang.flags.parse_argv`, built from that
release's flag table), its argument resolution (`args.resolve_server_args`: defaults, the
speculative and mamba hooks) and the one flags -> `MemoryInputs` mapping (`args.memory_inputs`) --
the same code the simulator runs when it starts, without importing the simulator. So what fleet
predicts before a launch is what the release does with that command line, and what fleet adds to a
launch on its own (a `--disable-radix-cache` for a hybrid model up to 0.5.13, the DFLASH context
env) is part of the prediction.

Pure: a configuration, its launch and the GPU's memory in; a `Feasibility` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from fleet.host.engines.sglang.args import DFLASH_FAMILY, fleet_values, memory_inputs, resolve_server_args
from fleet.host.engines.sglang.flags import ArgvError, ConfigFileError, parse_argv
from fleet.host.engines.sglang.memory import Adjustment, MemoryFailure, MemoryInputs, MemoryPlan, plan_memory, smallest_fix
from fleet.host.engines.sglang.release import DEFAULT_SIM_RELEASE, choose_release
from fleet.host.modelcard import load_model_card
from fleet.launch import SIM_FORK_ENV, SIM_MODULE, SIM_RELEASE_ENV, SIM_UPSTREAM, launch_spec
from fleet.launch.sglang import SGLANG_VERSION_TESTED, LaunchSpec
from fleet.playbook import ServerConfig, ServerSettings

# The release planned for a real SGLang host whose version nobody told fleet: what hosts run now.
PLANNER_DEFAULT_SGLANG_VERSION = SGLANG_VERSION_TESTED
# ServerSettings fields an adjustment may set: the typed scalar settings, not the free-form flags/env.
_ADJUSTABLE = frozenset(name for name in ServerSettings.model_fields if name not in ("flags", "env"))
# Placeholders for a launch built only to be planned: memory does not depend on paths or the port.
_PLANNING_PYTHON, _PLANNING_MODEL, _PLANNING_DRAFT, _PLANNING_PORT = "python3", "model", "draft", 30000


@dataclass(frozen=True)
class Feasibility:
    """`ok`: the server is expected to start. `plan` None: nothing was planned, and `reason` says
    why: not checkable (no model card, a flag the planner cannot read: `ok` stays True, so a
    configuration is never skipped for the planner's sake) or refused by SGLang's flag checks
    (`ok` False). `suggestion`: the planner's smallest change that makes it start and serve the
    concurrency asked for; [] when none is needed, None when none was found or nothing was planned."""

    ok: bool
    plan: MemoryPlan | None
    failure: MemoryFailure | None
    suggestion: list[Adjustment] | None
    reason: str
    inputs: MemoryInputs | None = None  # what the planner was given, derived from the launch


def check_server(
    config: ServerConfig, launch: LaunchSpec, *, gpu_memory_mib: int, engine_version: str | None, fork: str | None = None
) -> Feasibility:
    """The memory planner's verdict on `launch` (the launch of `config`) on a GPU of `gpu_memory_mib`.

    `engine_version`: the host's SGLang version (planned with the nearest known release). None: for
    a sim launch the release the simulator plays (its FLEET_SIM_SGLANG_VERSION, else
    DEFAULT_SIM_RELEASE), otherwise PLANNER_DEFAULT_SGLANG_VERSION. The release matters: the seed's
    max_running_requests=8 launch fails under 0.5.12's formula and starts under later ones.
    `fork`: the engine's fork ("ddtree"); for a sim launch its FLEET_SIM_SGLANG_FORK decides."""
    if config.model.card is None:
        return _unchecked("no model card: not checked")
    target = load_model_card(config.model.card)
    draft_card = config.draft.card if config.draft is not None else None
    draft = load_model_card(draft_card) if draft_card else None
    if config.algorithm in DFLASH_FAMILY and draft is None:
        return _unchecked(f"no model card for the {config.algorithm} draft: not checked")

    flags, module = _server_flags(launch.argv)
    release = engine_release(module, launch, engine_version)
    fork = _engine_fork(module, launch, fork)
    try:
        parsed = parse_argv(release, flags, fork=fork)
    except ArgvError as exc:  # what `sglang.launch_server` exits 2 with
        return Feasibility(False, None, None, None, f"SGLang {release} refuses the command line: {exc.message}")
    except ConfigFileError as exc:
        return _unchecked(f"not checked: the planner cannot read the --config file ({exc})")

    resolved = resolve_server_args(fleet_values(parsed), target, draft, launch.env, sim_seed=0, release=release, fork=fork)
    if resolved.failure is not None:
        refused = resolved.failure
        return Feasibility(False, None, None, None, f"SGLang {release} refuses the flags: {refused.exception}: {refused.message}")

    inputs = memory_inputs(resolved, gpu_memory_mib=gpu_memory_mib, release=release)
    planned_draft = draft if resolved.algorithm in DFLASH_FAMILY else None
    try:
        plan = plan_memory(target, inputs, planned_draft)
        suggestion = smallest_fix(target, inputs, planned_draft)
    except ValueError as exc:  # something the planner does not model (a KV dtype, a version before DFLASH)
        return _unchecked(f"not checked: {exc}")
    return Feasibility(plan.failure is None, plan, plan.failure, suggestion, _verdict(plan, suggestion, release), inputs)


def check_config(
    config: ServerConfig, *, engine: str, gpu_memory_mib: int, engine_version: str | None, fork: str | None = None
) -> Feasibility:
    """`check_server` on the launch `config` would get from `engine` ("sglang" or "sim"), for when
    no planned launch is at hand (a fix being worked out): the same flags, placeholder paths."""
    launch = launch_spec(
        engine,  # type: ignore[arg-type]  # EngineKind is a str enum; launch_spec compares by value
        config,
        python=_PLANNING_PYTHON,
        model_path=_PLANNING_MODEL,
        draft_path=_PLANNING_DRAFT if config.draft is not None else None,
        port=_PLANNING_PORT,
        sglang_version=engine_version,
        fork=fork,
    )
    return check_server(config, launch, gpu_memory_mib=gpu_memory_mib, engine_version=engine_version, fork=fork)


def hopeless(verdict: Feasibility) -> bool:
    """The memory planner expects the launch to fail and knows no single change that fixes it:
    planned as infeasible, not run (`fleet plan` says why). A command line the planner's flag
    tables refuse is not judged here (check_engine_flags refuses the playbook's own flags)."""
    return not verdict.ok and verdict.failure is not None and verdict.suggestion is None


def predicted_failure(
    config: ServerConfig, failure_class: str, *, engine: str, gpu_memory_mib: int, engine_version: str | None, fork: str | None = None
) -> str | None:
    """The planner's verdict when it predicts that `config` (a repair's variant) fails with
    `failure_class` again; None when it expects otherwise or cannot tell.
    A repair round never starts such a variant: it would fail the same way, a model load later."""
    if config.model.card is None:
        return None
    verdict = check_config(config, engine=engine, gpu_memory_mib=gpu_memory_mib, engine_version=engine_version, fork=fork)
    if not verdict.ok and verdict.failure is not None and verdict.failure.failure_class == failure_class:
        return verdict.reason
    return None


def apply_adjustments(config: ServerConfig, adjustments: Sequence[Adjustment]) -> ServerConfig:
    """A variant of `config` whose settings carry `adjustments` (so its id differs from the
    original's); the original is left as it is. Raises ValueError for a field that is not a
    server setting, and pydantic's ValidationError for a value the setting does not accept."""
    changes: dict[str, object] = {}
    for adjustment in adjustments:
        if adjustment.field not in _ADJUSTABLE:
            raise ValueError(
                f"adjustment of {adjustment.field!r}: expected one of the server settings {', '.join(sorted(_ADJUSTABLE))}"
            )
        changes[adjustment.field] = adjustment.new
    if not changes:
        return config
    return replace(config, settings=config.settings.merged(ServerSettings.model_validate(changes)))


def describe_adjustments(adjustments: Sequence[Adjustment]) -> str:
    """`max_running_requests 8 -> 4, ...`: the change itself, for provenance and tables."""
    return ", ".join(f"{a.field} {a.old} -> {a.new}" for a in adjustments)


def _unchecked(reason: str) -> Feasibility:
    return Feasibility(True, None, None, None, reason)


def _server_flags(argv: Sequence[str]) -> tuple[list[str], str]:
    """The flags after `python -m MODULE`, and MODULE."""
    if len(argv) < 3 or argv[1] != "-m":
        raise ValueError(f"launch argv {list(argv[:3])!r}: expected [python, '-m', module, flags...]")
    return list(argv[3:]), argv[2]


def engine_release(module: str, launch: LaunchSpec, engine_version: str | None) -> str:
    """The known release a launch is planned for (see check_server)."""
    if engine_version is None:
        sim = module == SIM_MODULE
        engine_version = (launch.env.get(SIM_RELEASE_ENV) or DEFAULT_SIM_RELEASE) if sim else PLANNER_DEFAULT_SGLANG_VERSION
    return choose_release(engine_version).release


def _engine_fork(module: str, launch: LaunchSpec, fork: str | None) -> str | None:
    if module == SIM_MODULE and SIM_FORK_ENV in launch.env:
        played = launch.env[SIM_FORK_ENV]
        return None if played == SIM_UPSTREAM else played
    return fork


def _verdict(plan: MemoryPlan, suggestion: list[Adjustment] | None, release: str) -> str:
    where = f"sglang {release}"
    if plan.failure is not None:
        failure = plan.failure
        role = " (draft model)" if failure.model_role == "draft" else ""
        text = f"{where} would stop at {failure.phase}{role}: {failure.exception}: {failure.message}"
    elif plan.requested_max_running_requests not in (None, plan.max_running_requests):
        text = (
            f"{where} starts but caps max_running_requests at {plan.max_running_requests} of the "
            f"{plan.requested_max_running_requests} asked (mamba cache {plan.max_mamba_cache_size} slots, "
            f"KV pool {plan.kv_tokens} tokens)"
        )
    else:
        text = (
            f"{where} fits: KV pool {plan.kv_tokens} tokens, max_running_requests {plan.max_running_requests}"
            + (f", mamba cache {plan.max_mamba_cache_size} slots" if plan.max_mamba_cache_size else "")
        )
    if suggestion:
        text += f"; smallest fix: {describe_adjustments(suggestion)}"
    elif suggestion is None and plan.failure is not None:
        text += "; no single change of max_running_requests, mem_fraction_static, the radix cache or context_length fixes it"
    return text

