"""The simulator's command line: exactly what the SGLang release it plays accepts and refuses, with
that release's error text (the parser is built from the release's flag table,
`fleet.host.engines.sglang.flags`), plus the sim-only --sim-* flags.

Which release: `FLEET_SIM_SGLANG_VERSION` (the launch sets it from the host's `engine.release`),
default `DEFAULT_SIM_RELEASE`; a version fleet does not know plays the nearest known release.
Whether the DDTree fork's flags exist: `FLEET_SIM_SGLANG_FORK` (`ddtree`, the default, as the sim
has always played the fork for the seed campaign; `upstream` for a released SGLang exactly).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.host.engines.sglang.args import FLEET_FIELD_NAMES, fleet_values
from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.sglang.flags import ParsedArgv, parse_argv
from fleet.host.errors import ReleaseError
from fleet.host.engines.sglang.release import DEFAULT_SIM_RELEASE, FORKS, choose_release
from fleet.host.engines.sim.faults import fault_profile_path
from fleet.host.engines.sim.gpu import GpuOverrides
from fleet.host.engines.sim.noise import NOISE_ENV, NoiseModel, parse_noise
from fleet.host.errors import NoiseModelError
from fleet.host.errors import SimUsageError

RELEASE_ENV = "FLEET_SIM_SGLANG_VERSION"
FORK_ENV = "FLEET_SIM_SGLANG_FORK"
UPSTREAM = "upstream"
DEFAULT_FORK = "ddtree"

# The sim's own flags: taken out of the command line by their full names before the release's parser
# sees the rest, so they change nothing of how SGLang's flags abbreviate or clash.
_SIM_FLAGS: Mapping[str, Callable[[str], Any]] = {
    "--sim-speed": float,  # time scale (env FLEET_SIM_SPEED, default 1.0)
    "--sim-start-speed": float,  # time scale of the start-up phases (env FLEET_SIM_START_SPEED, default the time scale)
    "--sim-seed": int,  # seed of the simulated outputs (env FLEET_SIM_SEED, default 0)
    "--sim-faults": str,  # fault profile JSON (env FLEET_SIM_FAULTS)
    "--sim-noise": str,  # run-to-run noise: off (default), on, or a JSON object (env FLEET_SIM_NOISE; noise.py)
    "--sim-gpu-name": str,
    "--sim-gpu-count": int,
    "--sim-gpu-memory-mib": int,
    "--sim-gpu-compute-cap": str,
    "--sim-gpu-driver": str,
    "--sim-cuda-toolkit": str,
}


@dataclass(frozen=True)
class SimSettings:
    """What only the simulator has: time scale, seed, fault profile path, GPU fallback, noise."""

    speed: float  # wall seconds per simulated second: 0.01 runs everything 100x faster
    seed: int
    faults_path: str | None
    gpu: GpuOverrides
    noise: NoiseModel | None = None  # None: no run-to-run noise
    start_speed: float | None = None  # wall seconds per simulated second of the start-up phases; None: `speed`

    @property
    def start_scale(self) -> float:
        """The time scale of the start-up phases' sleeps: `start_speed`, else the serving scale."""
        return self.start_speed if self.start_speed is not None else self.speed


@dataclass(frozen=True)
class SimCommandLine:
    release: str  # the known release the sim plays (one of KNOWN_RELEASES)
    requested_release: str  # what FLEET_SIM_SGLANG_VERSION asked for
    release_note: str | None  # set when the two differ
    fork: str | None
    parsed: ParsedArgv  # the release's own ServerArgs fields, as given
    values: dict[str, Any]  # fleet's settings (0.5.12 names), as given
    settings: SimSettings


def sim_release(env: Mapping[str, str]) -> tuple[str, str, str | None]:
    """(release played, release asked for, note when they differ)."""
    requested = env.get(RELEASE_ENV) or DEFAULT_SIM_RELEASE
    try:
        choice = choose_release(requested)
    except ReleaseError as exc:
        raise SimUsageError(f"environment variable {RELEASE_ENV}: {exc}") from None
    return choice.release, requested, choice.note


def sim_fork(env: Mapping[str, str]) -> str | None:
    fork = env.get(FORK_ENV) or DEFAULT_FORK
    if fork == UPSTREAM:
        return None
    if fork not in FORKS:
        raise SimUsageError(f"environment variable {FORK_ENV}: {fork!r}: expected {UPSTREAM} or one of {', '.join(FORKS)}")
    return fork


def _split_sim_flags(argv: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    rest: list[str] = []
    sim: dict[str, Any] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if name in _SIM_FLAGS:
            if eq:
                raw = inline
            elif i + 1 < len(args):
                i += 1
                raw = args[i]
            else:
                raise SimUsageError(f"argument {name}: expected one argument")
            try:
                sim[name[2:].replace("-", "_")] = _SIM_FLAGS[name](raw)
            except ValueError:
                raise SimUsageError(f"argument {name}: invalid {_SIM_FLAGS[name].__name__} value: {raw!r}") from None
        else:
            rest.append(arg)
        i += 1
    return rest, sim


def read_command_line(argv: Sequence[str], env: Mapping[str, str]) -> SimCommandLine:
    """Raises ArgvError (the release's parser exits 2), ConfigFileError (its --config merge raises,
    exit 1) and SimUsageError (a sim-only flag or variable, exit 2)."""
    release, requested, note = sim_release(env)
    fork = sim_fork(env)
    rest, sim = _split_sim_flags(argv)
    parsed = parse_argv(release, rest, fork=fork)
    return SimCommandLine(release, requested, note, fork, parsed, fleet_values(parsed), sim_settings(sim, env))


def split_command_line(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], SimSettings]:
    """(the engine's own arguments, the simulator's settings): the --sim-* flags taken out by their
    full names, the rest left for the played engine's parser. Raises SimUsageError."""
    rest, sim = _split_sim_flags(argv)
    return rest, sim_settings(sim, env)


def sim_settings(sim: Mapping[str, Any], env: Mapping[str, str]) -> SimSettings:
    """The simulator's settings from its --sim-* flags, else its FLEET_SIM_* environment."""

    def pick(name: str, env_name: str, default: Any, convert: Callable[[str], Any]) -> Any:
        if sim.get(name) is not None:
            return sim[name]
        raw = env.get(env_name)
        if raw in (None, ""):
            return default
        try:
            return convert(raw)
        except ValueError:
            raise SimUsageError(f"environment variable {env_name}: invalid value {raw!r}") from None

    speed = pick("sim_speed", "FLEET_SIM_SPEED", 1.0, float)
    if speed <= 0:
        raise SimUsageError(f"the time scale (--sim-speed / FLEET_SIM_SPEED) must be positive, got {speed}")
    start_speed = pick("sim_start_speed", "FLEET_SIM_START_SPEED", None, float)
    if start_speed is not None and not start_speed > 0:
        raise SimUsageError(f"the start-up time scale (--sim-start-speed / FLEET_SIM_START_SPEED) must be positive, got {start_speed}")
    defaults = GpuOverrides()
    gpu = GpuOverrides(
        name=pick("sim_gpu_name", "FLEET_SIM_GPU_NAME", defaults.name, str),
        count=pick("sim_gpu_count", "FLEET_SIM_GPU_COUNT", defaults.count, int),
        compute_cap=pick("sim_gpu_compute_cap", "FLEET_SIM_GPU_COMPUTE_CAP", defaults.compute_cap, str),
        memory_mib=pick("sim_gpu_memory_mib", "FLEET_SIM_GPU_MEMORY_MIB", defaults.memory_mib, int),
        driver=pick("sim_gpu_driver", "FLEET_SIM_GPU_DRIVER", defaults.driver, str),
        cuda_toolkit=pick("sim_cuda_toolkit", "FLEET_SIM_CUDA_TOOLKIT", defaults.cuda_toolkit, str),
    )
    noise_text, noise_source = (sim["sim_noise"], "argument --sim-noise") if sim.get("sim_noise") is not None else (env.get(NOISE_ENV), f"environment variable {NOISE_ENV}")
    try:
        noise = parse_noise(noise_text, noise_source)
    except NoiseModelError as exc:
        raise SimUsageError(str(exc)) from None
    return SimSettings(
        speed=speed,
        seed=pick("sim_seed", "FLEET_SIM_SEED", 0, int),
        faults_path=sim.get("sim_faults") or fault_profile_path(env),
        gpu=gpu,
        noise=noise,
        start_speed=start_speed,
    )


def parse_command_line(argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, Any], SimSettings]:
    """(fleet's settings as given, simulator settings), exiting as `sglang.launch_server` does on a
    bad command line: argparse's usage and error on stderr and exit 2; a --config error exit 1."""
    try:
        line = read_command_line(argv, env)
    except ArgvError as exc:
        sys.stderr.write(exc.text)
        raise SystemExit(2) from None
    except SimUsageError as exc:
        sys.stderr.write(f"fleet sim: error: {exc}\n")
        raise SystemExit(2) from None
    except ConfigFileError as exc:
        sys.stderr.write(f"ValueError: {exc}\n")
        raise SystemExit(1) from None
    return line.values, line.settings


def render_server_args(values: Mapping[str, Any]) -> str:
    """`ServerArgs(model_path='...', ...)` as 0.5.12's dataclass repr prints it, in field order
    (the fields fleet reads)."""
    return "ServerArgs(" + ", ".join(f"{name}={values[name]!r}" for name in FLEET_FIELD_NAMES) + ")"
