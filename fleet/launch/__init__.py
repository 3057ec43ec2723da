"""How a server configuration is launched on a host, per engine kind: the configuration's engine
renders it (`fleet.host.engines.engine(config.engine_name).build_launch`), and the kind says what
runs it.

`sglang` (a real host) runs the engine's own server module (`python -m sglang.launch_server`, or
vLLM's `python -m vllm.entrypoints.cli.main serve` for a vLLM configuration); `sim` runs fleet's
simulator under `python -m fleet.host.engines.sim`, with the same flags: it plays the
configuration's engine (FLEET_SIM_ENGINE) and the host's release of it, which the launch tells it
in FLEET_SIM_SGLANG_VERSION or FLEET_SIM_VLLM_VERSION (and whether it plays SGLang's DDTree fork in
FLEET_SIM_SGLANG_FORK).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.engines import engine as engine_named
from fleet.host.errors import EngineConfigError
from fleet.host.engines.base import LaunchSpec
from fleet.host.modelcard import load_model_card
from fleet.host.nvidia_smi import DECLARED_GPU_ENV, KNOWN_GPUS

if TYPE_CHECKING:
    from fleet.inventory import EngineKind
    from fleet.playbook import ServerConfig

SIM_MODULE = "fleet.host.engines.sim"
# Read by fleet/host/engines/sim/cli.py (SGLang) and vllmserver.py (ENGINE_ENV, RELEASE_ENV).
SIM_ENGINE_ENV = "FLEET_SIM_ENGINE"
SIM_RELEASE_ENV = "FLEET_SIM_SGLANG_VERSION"
SIM_RELEASE_ENVS = {DEFAULT_ENGINE: SIM_RELEASE_ENV, "vllm": "FLEET_SIM_VLLM_VERSION"}
SIM_FORK_ENV = "FLEET_SIM_SGLANG_FORK"
SIM_NOISE_ENV = "FLEET_SIM_NOISE"  # fleet/host/engines/sim/noise.py NOISE_ENV
SIM_UPSTREAM = "upstream"


def launch_spec(
    engine: EngineKind,
    server: ServerConfig,
    *,
    python: str,
    model_path: str,
    draft_path: str | None,
    port: int,
    bind_host: str = "127.0.0.1",
    hybrid: bool | None = None,
    served_model_name: str | None = None,
    engine_version: str | None = None,
    fork: str | None = None,
    declared_gpus: tuple[int, str | None] | None = None,
    sim_noise: str = "off",
) -> LaunchSpec:
    """`hybrid=None`: decided from the playbook's model card when it names one. `engine_version`: the
    host's release (facts, or its `engine.release` pin; for `sim` the release it plays, default
    the engine's sim_release). `fork`: "ddtree" when the host's engine is the DDTree fork (sim only: the
    real engine's fork is whatever is installed). `declared_gpus`: the host file's (count, model),
    which a sim server plays where the machine has none of that model. `sim_noise`: the host
    file's `engine.sim_noise` (`on`: a sim server varies from run to run as hardware does)."""
    card = load_model_card(server.model.card) if hybrid is None and server.model.card else None
    served = engine_named(server.engine_name)
    sim = engine == "sim"  # EngineKind is a str enum; comparing by value keeps fleet.inventory unimported
    if sim and served.name not in SIM_RELEASE_ENVS:  # the plan refuses it first, naming the host (EngineSpec.serves)
        raise EngineConfigError(f"{server.label}: the simulator does not play {served.title} yet")
    played = served.choose_release(engine_version or served.sim_release).release if sim else None
    spec = served.build_launch(
        server,
        python=python,
        model_path=model_path,
        draft_path=draft_path,
        port=port,
        bind_host=bind_host,
        hybrid=hybrid,
        served_model_name=served_model_name,
        card=card,
        version=played or engine_version,
        module=SIM_MODULE if sim else served.server_module,
    )
    if played is None:
        return spec
    # The release the simulator plays: the known one fleet rendered the flags for.
    if served.name == DEFAULT_ENGINE:
        sim_env = {SIM_RELEASE_ENV: played, SIM_FORK_ENV: fork or SIM_UPSTREAM}
    else:
        sim_env = {SIM_ENGINE_ENV: served.name, SIM_RELEASE_ENVS[served.name]: played}
    sim_env.update(_declared_gpu_env(declared_gpus))
    if sim_noise != "off":
        sim_env[SIM_NOISE_ENV] = sim_noise
    return replace(spec, env=dict(sorted({**sim_env, **spec.env}.items())))


def sim_release_of(env: dict[str, str] | LaunchSpec, engine: str) -> str | None:
    """The release a sim launch of `engine` plays, as its environment tells the simulator."""
    variables = env.env if isinstance(env, LaunchSpec) else env
    return variables.get(SIM_RELEASE_ENVS.get(engine, SIM_RELEASE_ENV))


def _declared_gpu_env(declared: tuple[int, str | None] | None) -> dict[str, str]:
    """The host file's GPUs for the simulator (fleet.host.engines.sim.gpu): its model, count and,
    for a model fleet knows, nvidia-smi's memory and compute capability of it."""
    if declared is None:
        return {}
    count, model = declared
    if model is None:
        return {}
    env = {DECLARED_GPU_ENV: model, "FLEET_SIM_GPU_NAME": model, "FLEET_SIM_GPU_COUNT": str(count)}
    if model in KNOWN_GPUS:
        memory_mib, compute_cap = KNOWN_GPUS[model]
        env |= {"FLEET_SIM_GPU_MEMORY_MIB": str(memory_mib), "FLEET_SIM_GPU_COMPUTE_CAP": compute_cap}
    return env
