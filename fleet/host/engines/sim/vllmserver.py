"""The simulator playing `vllm serve` (`FLEET_SIM_ENGINE=vllm`): a process that starts, serves and
fails as vLLM 0.33 does, on the simulated engine and GPUs the SGLang play uses.

    FLEET_SIM_ENGINE=vllm python -m fleet.host.engines.sim serve MODEL [vllm serve flags] [--sim-* flags]

Order of events, as in vLLM: the command line through the release's own parser (`fleet.host.engines.vllm.flags.parse_serve`,
rebuilt from the release's flag table: a refusal is argparse's usage and error, exit 2), the API
server's version and non-default-args lines, the engine core's config line, the model load, the
profiling run and the KV cache lines ("Available KV cache memory", "GPU KV cache size"), CUDA graph
capture, "init engine ... took", then the API server's routes and uvicorn's start; ready when
/health answers (vLLM sends no warm-up request of its own). A start-up failure is the engine core's
"EngineCore failed to start." with vLLM's exception and message (from fleet's vLLM memory planner,
`fleet.host.engines.vllm.memory`, which computes what vLLM's own code does), then the API server's
"Engine core initialization failed" and exit 1.

Memory: the planner's figures where it models the configuration; vLLM measures its start-up
overhead (activation peak, CUDA graphs, non-torch memory), which the planner bounds by a range:
the simulator takes the middle of that range, as one real start would measure one value. Where the
planner does not model a configuration (a hybrid mamba model's KV cache, a draft model's layers),
the simulator plans the target's full-attention layers and counts a draft's weights, and the
planner itself says "not checked" for it: the sim is a stand-in for a GPU, not a second opinion.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, NoReturn, TextIO

from fleet.host.engines.sim import gpu as gpumod
from fleet.host.engines.sim import perf, vllmtext
from fleet.host.engines.sim.api import ServerState
from fleet.host.engines.sim.cli import SimSettings, split_command_line
from fleet.host.engines.sim.console import Console
from fleet.host.engines.sim.engine import Engine, EngineConfig
from fleet.host.engines.sim.faults import FaultProfile, load_fault_profile
from fleet.host.engines.sim.httpserver import serve
from fleet.host.engines.sim.server import WEIGHT_LOAD_GBS, other_processes_mib, resolve_model
from fleet.host.engines.sim.vllmapi import VllmApi
from fleet.host.engines.vllm import release as vllm_release
from fleet.host.engines.vllm.engine import memory_inputs
from fleet.host.engines.vllm.flags import ParsedServe, ServeArgsError, parse_serve
from fleet.host.engines.vllm.launch import SPECULATIVE_METHODS
from fleet.host.engines.vllm.memory import NotModelled, Overhead, VllmMemoryPlan, free_memory_failure, plan_memory, planned_overhead
from fleet.host.errors import ArgvError, ConfigError, ConfigFileError, FaultProfileError, ReleaseError, SimUsageError
from fleet.host.modelcard import ModelCard

ENGINE_ENV = "FLEET_SIM_ENGINE"  # "vllm": the simulator plays `vllm serve`; unset or "sglang": SGLang
RELEASE_ENV = "FLEET_SIM_VLLM_VERSION"  # the vLLM release played (the launch sets it from the host's engine.vllm.release)
PLAYS = "vllm"

# Simulated seconds of the start-up steps that do not depend on the model's size.
SPAWN_S = 6.0  # the API server, the engine core process, NCCL and the worker processes
PROFILE_S = 3.0  # the profiling run and the KV cache's allocation
GRAPH_CAPTURE_S = 4.0
GRAPH_POOL_GIB = 1.5  # the CUDA-graph share of the start-up overhead the planner assumes (memory.assumed_overhead)
# vLLM's method (SpeculativeConfig.method) -> the simulated engine's algorithm (fleet's names).
_ALGORITHMS = {method: algorithm for algorithm, method in SPECULATIVE_METHODS.items() if algorithm != "MTP"}


@dataclass(frozen=True)
class VllmLaunch:
    release: str
    values: Mapping[str, Any]  # `vllm serve`'s parsed values (its parser's dests)
    settings: SimSettings
    faults: FaultProfile
    env: Mapping[str, str]
    argv: tuple[str, ...]

    @property
    def model_path(self) -> str:
        return str(self.values.get("model_tag") or self.values["model"])

    @property
    def served_model_name(self) -> str:
        names = self.values.get("served_model_name")
        return str(names[0]) if isinstance(names, list) and names else self.model_path

    @property
    def speculative(self) -> Mapping[str, Any] | None:
        config = self.values.get("speculative_config")
        return config if isinstance(config, dict) and config else None


def plays_vllm(env: Mapping[str, str]) -> bool:
    return env.get(ENGINE_ENV, "") == PLAYS


def sim_memory(launch: VllmLaunch, target: ModelCard, draft: ModelCard | None, gpu_memory_mib: int) -> VllmMemoryPlan:
    """vLLM's start-up memory for this launch: the planner's where it plans it, with the start-up
    overhead at the middle of its range; else the target's full-attention layers, a draft's weights
    counted with the target's (see the module's docstring). Raises NotModelled when neither can."""
    values = {k: v for k, v in launch.values.items() if k != "speculative_config"}
    try:
        model, inputs = memory_inputs(values, target, gpu_memory_mib=gpu_memory_mib, release=launch.release)
    except NotModelled:
        if not target.is_hybrid:
            raise
        plain = replace(target, num_hidden_layers=len(target.full_attention_layer_ids), linear_attention_layer_ids=(), full_attention_layer_ids=tuple(range(len(target.full_attention_layer_ids))))
        model, inputs = memory_inputs(values, plain, gpu_memory_mib=gpu_memory_mib, release=launch.release)
    if draft is not None:
        model = replace(model, weights_bytes=model.weights_bytes + draft.weights_bytes, weights_bytes_per_rank=None)
    assumed = planned_overhead(model, inputs)
    middle = (assumed.low + assumed.high) // 2
    return plan_memory(model, replace(inputs, overhead=Overhead(middle, middle, "measured")))


class VllmSim:
    def __init__(self, launch: VllmLaunch, target: ModelCard, draft: ModelCard | None, host: gpumod.GpuHost, plan: VllmMemoryPlan, console: Console) -> None:
        self.launch = launch
        self.target = target
        self.draft = draft
        self.host = host
        self.plan = plan
        self.console = console
        self.speed = launch.settings.speed
        self.start_speed = launch.settings.start_scale  # the start-up phases' time scale (--sim-start-speed)
        self.tp = int(launch.values.get("tensor_parallel_size") or 1)
        self.pid = os.getpid()
        self.engine_pid = self.pid + 1  # the engine core is a process of its own in vLLM
        self.fake_gpu_dir = None if host.played else launch.env.get("FLEET_FAKE_GPU_DIR")
        self.gpu_indices = [g.index for g in host.gpus[: self.tp]]
        self.started = time.time()
        self.engine: Engine | None = None
        self.kill_self: Callable[[], None] = lambda: os.kill(self.pid, signal.SIGKILL)

    # --- lines -------------------------------------------------------------------------------------

    def api(self, text: vllmtext.Text, *values: object, level: str = "INFO") -> None:
        self.console.raw(vllmtext.lines(vllmtext.API, self.pid, level, text, text % values if values else text.template))

    def core(self, text: vllmtext.Text, *values: object, level: str = "INFO") -> None:
        self.console.raw(vllmtext.lines(vllmtext.ENGINE, self.engine_pid, level, text, text % values if values else text.template))

    async def pause(self, simulated_s: float) -> None:
        """A start-up phase's simulated seconds, at the start-up time scale."""
        await asyncio.sleep(simulated_s * self.start_speed)

    def register(self, used_bytes: float) -> None:
        if self.fake_gpu_dir:
            gpumod.register_process(self.fake_gpu_dir, self.pid, self.gpu_indices, int(used_bytes / gpumod.MIB))

    def fail(self, phase: str, exception: str, message: str) -> NoReturn:
        """run_engine_core's logger.exception, then the API server's RuntimeError; exit 1."""
        body = vllmtext.CORE_FAILED.template + "\n" + vllmtext.failure_traceback(phase, exception, message)
        self.console.raw(vllmtext.lines(vllmtext.ENGINE, self.engine_pid, "ERROR", vllmtext.CORE_FAILED, body))
        self.console.raw([f"({vllmtext.API} pid={self.pid}) RuntimeError: " + vllmtext.CORE_INIT_FAILED % "{'EngineCore_DP0': 1}"])
        self.console.flush()
        if self.fake_gpu_dir:
            gpumod.unregister_process(self.fake_gpu_dir, self.pid)
        raise SystemExit(1)

    def crash(self, error: str) -> None:
        """A CUDA error in a step: core.py:1586's "EngineCore encountered a fatal error." and the process' end."""
        body = "\n".join(
            [
                "EngineCore encountered a fatal error.",
                "Traceback (most recent call last):",
                f'  File "{vllmtext.VLLM_DIR}/v1/engine/core.py", line 1412, in run_busy_loop',
                f"torch.AcceleratorError: {error}",
            ]
        )
        self.console.raw(vllmtext.lines(vllmtext.ENGINE, self.engine_pid, "ERROR", vllmtext.Text("v1/engine/core.py:1586", "EngineCore encountered a fatal error."), body))
        self.console.flush()
        if self.fake_gpu_dir:
            gpumod.unregister_process(self.fake_gpu_dir, self.pid)
        self.kill_self()

    # --- start-up ----------------------------------------------------------------------------------

    async def start_engine(self) -> None:
        plan, values = self.plan, self.launch.values
        config = ", ".join(
            f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"
            for key, value in (("model", self.launch.model_path), ("speculative_config", self.launch.speculative), ("max_seq_len", plan.context_len), ("tensor_parallel_size", self.tp),
                               ("enforce_eager", bool(values.get("enforce_eager"))), ("kv_cache_dtype", values.get("kv_cache_dtype") or "auto"), ("served_model_name", self.launch.served_model_name))
        )  # fmt: skip
        self.core(vllmtext.INITIALIZING, self.launch.release, config)
        await self.pause(SPAWN_S)
        failure = plan.failure
        if failure is not None and failure.phase == "init_device":
            self.fail(failure.phase, failure.exception, failure.message)
        self.core(vllmtext.LOADING_MODEL, self.launch.model_path)
        weights = plan.weights_bytes_per_gpu
        began = time.monotonic()
        await self.pause(weights / (WEIGHT_LOAD_GBS * 1e9) + 1.0 + self.launch.faults.slow_start_s)
        if failure is not None and failure.phase == "load_weights":
            self.fail(failure.phase, failure.exception, failure.message)
        self.core(vllmtext.MODEL_LOADED, vllmtext.gib(weights), time.monotonic() - began)
        self.register(weights)
        await self.pause(PROFILE_S)
        if failure is not None:
            self.fail(failure.phase, failure.exception, failure.message)
        self.core(vllmtext.KV_MEMORY, vllmtext.gib(plan.available_kv_bytes_low))
        self.core(vllmtext.KV_SIZE, "GPU", f"{plan.kv_tokens:,}", f"{plan.context_len:,}", plan.max_concurrency_low)
        if not values.get("enforce_eager"):
            await self.pause(GRAPH_CAPTURE_S)
            self.core(vllmtext.GRAPHS_CAPTURED, GRAPH_CAPTURE_S, GRAPH_POOL_GIB)
        self.register(plan.requested_bytes)
        self.core(vllmtext.ENGINE_READY, time.time() - self.started)

    def build_engine(self) -> Engine:
        plan, values, spec = self.plan, self.launch.values, self.launch.speculative
        bandwidth, tflops = gpumod.gpu_speed(self.host.gpus[0].name)
        algorithm = _ALGORITHMS.get(str(spec.get("method"))) if spec else None
        tokens = int(spec.get("num_speculative_tokens") or 1) if spec else 0
        draft_bytes = (self.draft.weights_bytes / self.tp) if self.draft is not None else 0.0
        model = perf.build_perf_model(
            bandwidth_gbs=bandwidth, tflops=tflops, weights_bytes_per_gpu=plan.weights_bytes_per_gpu - draft_bytes, draft_weights_bytes_per_gpu=draft_bytes,
            kv_cell_bytes=plan.kv_bytes_per_token, tp_size=self.tp, cuda_graphs=not values.get("enforce_eager"),
        )  # fmt: skip
        config = EngineConfig(
            max_running_requests=plan.max_running_requests,
            max_total_num_tokens=max(plan.kv_tokens, 1),
            context_len=plan.context_len,
            chunked_prefill_size=plan.max_num_batched_tokens,
            max_prefill_tokens=plan.max_num_batched_tokens,
            decode_log_interval=1 << 30,  # vLLM logs no per-batch lines (its stats logger is periodic)
            algorithm=algorithm,
            verify_tokens=tokens + 1 if algorithm else 1,
            spec_num_draft_tokens=tokens + 1 if algorithm else None,
            ddtree_budget=None,
            hybrid=False,
            max_mamba_cache_size=0,
            cuda_graph_max_bs=0 if values.get("enforce_eager") else plan.cuda_graph_max_bs,
            radix_cache=bool(values.get("enable_prefix_caching", True)),
            compute_cap_major=self.host.compute_cap[0],
            seed=self.launch.settings.seed,
            noise=self.launch.settings.noise,
            noise_seed=self.launch.settings.seed,
        )
        return Engine(config, model, self.launch.faults, _Quiet(self.console), self.speed, self.crash)

    def server_state(self) -> ServerState:
        plan = self.plan
        return ServerState(
            server_args=dict(self.launch.values), scheduler_info={}, context_len=plan.context_len, served_model_name=self.launch.served_model_name,
            model_type=self.target.architecture.lower(), architectures=[self.target.architecture], has_image_understanding=self.target.is_multimodal,
            memory_usage={}, max_running_requests=plan.max_running_requests, reserved_spec_tokens=0, spec_num_draft_tokens=None, started_at=self.started,
            version=self.launch.release, launch_command=" ".join(self.launch.argv), status="Up",
        )  # fmt: skip

    async def run(self) -> int:
        host, port = str(self.launch.values.get("host") or "0.0.0.0"), int(self.launch.values.get("port") or 8000)
        self.api(vllmtext.SERVER_VERSION, self.launch.release, self.launch.model_path)
        self.api(vllmtext.NON_DEFAULT_ARGS, _non_default(self.launch.values))
        await self.start_engine()
        self.engine = self.build_engine()
        engine_task = asyncio.create_task(self.engine.run())
        self.engine.ready = True
        spec = self.launch.speculative
        api = VllmApi(self.server_state(), self.engine, self.console, self.speed, True, False, num_speculative_tokens=int(spec.get("num_speculative_tokens") or 1) if spec else None)
        self.api(vllmtext.STARTING_SERVER, f"http://{host}:{port}")
        self.api(vllmtext.ROUTES)
        for path, method in vllmtext.SERVED_ROUTES:
            self.api(vllmtext.ROUTE, path, method)
        self.console.raw([vllmtext.uvicorn(self.pid, f"Started server process [{self.pid}]"), vllmtext.uvicorn(self.pid, "Waiting for application startup.")])
        try:
            if self.launch.faults.port_in_use:
                raise OSError(98, f"error while attempting to bind on address ({host!r}, {port}): address already in use")
            server = await serve(host, port, api, self.console)
        except OSError as exc:
            self.console.raw([f"({vllmtext.API} pid={self.pid}) ERROR:    [Errno {exc.errno}] {exc.strerror}"])
            self.console.flush()
            if self.fake_gpu_dir:
                gpumod.unregister_process(self.fake_gpu_dir, self.pid)
            return 1
        self.console.raw([vllmtext.uvicorn(self.pid, "Application startup complete.")])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        engine_task.cancel()
        server.close()
        self.console.raw([vllmtext.uvicorn(self.pid, m) for m in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.", f"Finished server process [{self.pid}]")])
        if self.fake_gpu_dir:
            gpumod.unregister_process(self.fake_gpu_dir, self.pid)
        self.console.flush()
        return 0


class _Quiet(Console):
    """The engine's per-batch lines are SGLang's: a vLLM log has none of them (its stats logger
    prints every 10 s), so only warnings and errors of the simulated scheduler pass, in vLLM's prefix."""

    def __init__(self, console: Console) -> None:
        self.__dict__.update(console.__dict__)

    def rank(self, rank: int, message: str, level: int = 20) -> None:
        if level >= 30:
            self.raw(vllmtext.lines(vllmtext.ENGINE, os.getpid() + 1, "WARNING" if level < 40 else "ERROR", vllmtext.Text("v1/engine/core.py:1", "%s"), message))

    def main(self, message: str, level: int = 20) -> None:
        self.rank(0, message, level)


def _non_default(values: Mapping[str, Any]) -> dict[str, Any]:
    """The flags a person gave, as entrypoints/common/startup.py:96 lists them (by dest)."""
    shown = ("model_tag", "host", "port", "served_model_name", "tensor_parallel_size", "max_model_len", "gpu_memory_utilization", "max_num_seqs", "speculative_config", "enforce_eager")
    return {key: values[key] for key in shown if values.get(key) not in (None, False, [], {})}


@dataclass(frozen=True)
class CommandLine:
    release: str
    parsed: ParsedServe
    settings: SimSettings


class Refusal(Exception):
    """Where `vllm serve` stops on its command line: its exit code and what it writes to stderr."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def read_command_line(argv: Sequence[str], env: Mapping[str, str]) -> CommandLine:
    """The release played and `vllm serve`'s arguments through that release's parser (fleet's
    rebuild of it, which tests/integration/test_vllm_parser.py holds to the real one), the --sim-*
    flags apart. Raises Refusal: argparse's usage and error with exit 2, an exception raised while
    vLLM builds its engine arguments (ServeArgsError, a --config file) with its traceback and exit 1,
    a sim setting fleet's own message and exit 2."""
    try:
        release = vllm_release.choose_release(env.get(RELEASE_ENV) or vllm_release.DEFAULT_SIM_RELEASE).release
        args, settings = split_command_line(list(argv), env)
    except (ReleaseError, SimUsageError) as exc:
        raise Refusal(2, f"fleet sim: error: {exc}\n") from None
    if args[:1] == ["serve"]:
        args = args[1:]
    try:
        return CommandLine(release, parse_serve(release, args, env), settings)
    except ArgvError as exc:
        raise Refusal(2, exc.text) from None
    except (ServeArgsError, ConfigFileError) as exc:
        what = f"{exc.exception}: {exc.message}" if isinstance(exc, ServeArgsError) else f"ValueError: {exc}"
        raise Refusal(1, "Traceback (most recent call last):\n" + f'  File "{vllmtext.VLLM_DIR}/entrypoints/cli/main.py", line 75, in main\n    args.dispatch_function(args)\n{what}\n') from None


def prepare(argv: Sequence[str], env: Mapping[str, str], err: TextIO | None = None, out: TextIO | None = None) -> VllmSim | int:
    """Everything `vllm serve` does before its engine core starts: the release, its command line, the
    model, GPUs and the memory plan. An exit code where vLLM stops there."""
    errors = err if err is not None else sys.stderr
    try:
        line = read_command_line(argv, env)
    except Refusal as exc:
        errors.write(exc.text)
        errors.flush()
        return exc.code
    release, parsed, settings = line.release, line.parsed, line.settings
    console = Console(int(parsed.values.get("tensor_parallel_size") or 1), err, out)
    try:
        faults = load_fault_profile(settings.faults_path)
    except FaultProfileError as exc:
        console.raw([f"fleet sim: {exc}"])
        return 2
    launch = VllmLaunch(release, parsed.values, settings, faults, env, tuple(argv))
    spec = launch.speculative
    draft_path = str(spec["model"]) if spec and spec.get("model") else None
    try:
        target = resolve_model(launch.model_path, faults)
        draft = resolve_model(draft_path, FaultProfile()) if draft_path else None
    except ConfigError as exc:
        console.raw([f"({vllmtext.API} pid={os.getpid()}) ValueError: {exc}"])
        return 1
    for path, card in ((launch.model_path, target), (draft_path, draft)):
        if path and card is None:
            # transformers' config lookup for a path that is neither a directory nor a hub id it can reach.
            kind = "local directory" if Path(path).is_absolute() else "repository ID"
            console.raw([f"({vllmtext.API} pid={os.getpid()}) ValueError: Invalid {kind} or local directory specified: '{path}'."])
            return 1
    assert target is not None
    try:
        host = gpumod.detect_gpu_host(settings.gpu, env)
    except gpumod.GpuDetectionError as exc:
        console.raw([f"({vllmtext.API} pid={os.getpid()}) RuntimeError: No CUDA GPUs are available ({exc})"])
        return 1
    tp = int(parsed.values.get("tensor_parallel_size") or 1)
    try:
        plan = sim_memory(launch, target, draft, host.gpus[0].memory_total_mib)
    except (NotModelled, ValueError) as exc:
        console.raw([f"fleet sim: the simulator cannot play this vLLM start: {exc}"])
        return 2
    # Other servers on the same GPU hold memory before this one starts, as on a real host: vLLM's
    # request_memory (v1/worker/utils.py:762) compares its share with what is free.
    others = other_processes_mib(env.get("FLEET_FAKE_GPU_DIR"), [g.index for g in host.gpus[:tp]], os.getpid()) * gpumod.MIB
    if others and plan.failure is None and plan.cuda_total_bytes - others < plan.requested_bytes:
        plan = replace(plan, failure=free_memory_failure(int(plan.cuda_total_bytes - others), plan.cuda_total_bytes, plan.requested_bytes, float(launch.values.get("gpu_memory_utilization") or 0.92)))
    return VllmSim(launch, target, draft, host, plan, console)


def main(argv: Sequence[str], env: Mapping[str, str]) -> int:
    prepared = prepare(argv, env)
    if isinstance(prepared, int):
        return prepared
    try:
        return asyncio.run(prepared.run())
    except KeyboardInterrupt:
        return 130
