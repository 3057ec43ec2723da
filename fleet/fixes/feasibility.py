"""Will a server configuration start? The engine's verdict on the exact launch, before it runs.

The verdict's inputs are not rebuilt from the playbook: the launch's own argv and environment go to
the engine (`Engine.predict_start`), which reads them as the host's release does. This module is the
engine-neutral part: which release and fork a launch is for, the model cards, a repair variant's
check, and applying a suggested change to a configuration.

Pure: a configuration, its launch and the GPU's memory in; a `Feasibility` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import Adjustment, Feasibility, LaunchSpec, StartRecord, unchecked
from fleet.host.modelcard import load_model_card
from fleet.launch import SIM_FORK_ENV, SIM_MODULE, SIM_UPSTREAM, launch_spec, sim_release_of
from fleet.playbook import ServerConfig, ServerSettings

# ServerSettings fields an adjustment may set: the typed scalar settings, not the free-form flags/env.
_ADJUSTABLE = frozenset(name for name in ServerSettings.model_fields if name not in ("flags", "env"))
# Placeholders for a launch built only to be planned: memory does not depend on paths or the port.
_PLANNING_PYTHON, _PLANNING_MODEL, _PLANNING_DRAFT, _PLANNING_PORT = "python3", "model", "draft", 30000


def check_server(config: ServerConfig, launch: LaunchSpec, *, gpu_memory_mib: int, engine_version: str | None, fork: str | None = None, observed: Sequence[StartRecord] = ()) -> Feasibility:
    """The engine's verdict on `launch` (the launch of `config`) on a GPU of `gpu_memory_mib`.

    `engine_version`: the host's engine version (planned with the nearest known release). None: for
    a sim launch the release the simulator plays (its FLEET_SIM_SGLANG_VERSION, else the engine's
    sim_release), otherwise the engine's version_tested (what hosts run now). The release matters: the seed's
    max_running_requests=8 launch fails under 0.5.12's formula and starts under later ones.
    `fork`: the engine's fork ("ddtree"); for a sim launch its FLEET_SIM_SGLANG_FORK decides.
    `observed`: what earlier starts logged of their memory (fleet.planning.starts)."""
    if config.model.card is None:
        return unchecked("no model card: not checked")
    target = load_model_card(config.model.card)
    draft_card = config.draft.card if config.draft is not None else None
    draft = load_model_card(draft_card) if draft_card else None
    flags, module = _server_flags(launch.argv)
    return engine_named(config.engine_name).predict_start(
        flags, launch.env, target, draft, algorithm=config.algorithm, gpu_memory_mib=gpu_memory_mib,
        release=engine_release(module, launch, engine_version, config.engine_name), fork=_engine_fork(module, launch, fork), observed=observed,
    )  # fmt: skip


def check_config(config: ServerConfig, *, engine: str, gpu_memory_mib: int, engine_version: str | None, fork: str | None = None) -> Feasibility:
    """`check_server` on the launch `config` would get from `engine` ("sglang" or "sim"), for when
    no planned launch is at hand (a fix being worked out): the same flags, placeholder paths."""
    launch = launch_spec(
        engine,  # type: ignore[arg-type]  # EngineKind is a str enum; launch_spec compares by value
        config,
        python=_PLANNING_PYTHON,
        model_path=_PLANNING_MODEL,
        draft_path=_PLANNING_DRAFT if config.draft is not None else None,
        port=_PLANNING_PORT,
        engine_version=engine_version,
        fork=fork,
    )
    return check_server(config, launch, gpu_memory_mib=gpu_memory_mib, engine_version=engine_version, fork=fork)


def hopeless(verdict: Feasibility) -> bool:
    """The memory planner expects the launch to fail and knows no single change that fixes it:
    planned as infeasible, not run (`fleet plan` says why). A command line the planner's flag
    tables refuse is not judged here (check_engine_flags refuses the playbook's own flags)."""
    return not verdict.ok and verdict.failure is not None and verdict.suggestion is None


def predicted_failure(config: ServerConfig, failure_class: str, *, engine: str, gpu_memory_mib: int, engine_version: str | None, fork: str | None = None) -> str | None:
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
            raise ValueError(f"adjustment of {adjustment.field!r}: expected one of the server settings {', '.join(sorted(_ADJUSTABLE))}")
        changes[adjustment.field] = adjustment.new
    if not changes:
        return config
    return replace(config, settings=config.settings.merged(ServerSettings.model_validate(changes)))


def _server_flags(argv: Sequence[str]) -> tuple[list[str], str]:
    """The flags after `python -m MODULE`, and MODULE."""
    if len(argv) < 3 or argv[1] != "-m":
        raise ValueError(f"launch argv {list(argv[:3])!r}: expected [python, '-m', module, flags...]")
    return list(argv[3:]), argv[2]


def engine_release(module: str, launch: LaunchSpec, engine_version: str | None, engine: str = DEFAULT_ENGINE) -> str:
    """The known release of `engine` a launch is planned for (see check_server)."""
    served = engine_named(engine)
    if engine_version is None:
        sim = module == SIM_MODULE
        engine_version = (sim_release_of(launch, engine) or served.sim_release) if sim else served.version_tested
    return served.choose_release(engine_version).release


def _engine_fork(module: str, launch: LaunchSpec, fork: str | None) -> str | None:
    if module == SIM_MODULE and SIM_FORK_ENV in launch.env:
        played = launch.env[SIM_FORK_ENV]
        return None if played == SIM_UPSTREAM else played
    return fork
