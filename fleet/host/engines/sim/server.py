"""`python -m fleet.host.engines.sim`: a process that starts, serves and fails like `python -m sglang.launch_server`.

Order of events, as in SGLang: flags parsed and ServerArgs built (config errors end here with a
traceback and exit 1), `server_args=...`, the scheduler ranks' startup (weights, mamba and KV pools,
CUDA graphs, draft model, in the order of the release played: logformats.LogFormats), `max_total_num_tokens=...`, uvicorn's lines and the bind,
the warm-up request through the server's own HTTP port, `The server is fired up and ready to roll!`.
A failure after the scheduler started prints `Scheduler hit an exception: <traceback>`, then the main
process' SIGQUIT line, and the process kills itself with SIGKILL as `kill_process_tree` does.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, Sequence, TextIO

from fleet.host import procfs
from fleet.host.engines.sglang import args as sglang_args
from fleet.host.engines.sglang.args import ResolvedArgs, resolve_server_args
from fleet.host.engines.sglang.speculative import DFLASH_FAMILY, EAGLE_FAMILY
from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.sglang.flags import ParsedArgv
from fleet.host.engines.sglang.logformats import log_formats
from fleet.host.engines.sglang.memory import DEFAULT_GPU_RESERVED_MIB, MemoryInputs, MemoryPlan, plan_memory, sizes_draft
from fleet.host.engines.sglang.release import choose_release
from fleet.host.engines.sim import gpu as gpumod
from fleet.host.engines.sim import perf, sgltext
from fleet.host.engines.sim.api import Api, ServerState
from fleet.host.engines.sim.cli import SimSettings, read_command_line, render_server_args
from fleet.host.errors import SimUsageError
from fleet.host.engines.sim.console import ERROR, Console
from fleet.host.engines.sim.engine import Engine, EngineConfig
from fleet.host.engines.sim.faults import FaultProfile, load_fault_profile
from fleet.host.errors import FaultProfileError
from fleet.host.engines.sim.httpserver import serve
from fleet.host.errors import ConfigError
from fleet.host.modelcard import SHIPPED_CARDS_DIR, ModelCard, load_model_card, shipped_card_names

# Simulated seconds of each startup phase that does not depend on the model size.
SPAWN_S = 4.0
INIT_DISTRIBUTED_S = 0.6
INIT_DISTRIBUTED_TP_S = 3.0
WEIGHT_LOAD_GBS = 2.5  # from /dev/shm or a page-cached NVMe
POOL_ALLOC_S = 0.6
GRAPH_CAPTURE_S_PER_BS = 0.25
ATTENTION_WORKSPACE_GB = 0.4  # allocated between "Memory pool end" and "Capture cuda graph begin"
GRAPH_HEADROOM_GB = 0.2
WARMUP_ATTEMPTS = 120  # _execute_server_warmup polls /model_info once a second, 120 times


def graph_batch_sizes(max_bs: int, speculative: bool, max_running_requests: int) -> list[int]:
    """ServerArgs._generate_cuda_graph_batch_sizes, then the runner's cap at the request pool size."""
    if speculative:
        sizes = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8)) + list(range(272, max_bs + 1, 16))
    else:
        sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    sizes = [size for size in sizes if size <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return [size for size in sizes if size <= max_running_requests]


def graph_memory_gb(max_bs: int, verify_tokens: int) -> float:
    """CUDA graph memory: a fixed part plus the captured batches' activations."""
    return 0.3 + 0.003 * max_bs * math.sqrt(verify_tokens)


def resolve_model(path: str, faults: FaultProfile) -> ModelCard | None:
    """The card for a --model-path: a model directory, a shipped card name or its Hugging Face id.
    None when SGLang would not find the model."""
    if faults.missing_model_path:
        return None
    candidate = Path(path)
    if candidate.is_dir() and not (candidate / "config.json").is_file():
        return None  # a partial download: transformers finds no config
    if candidate.exists():
        return load_model_card(candidate)
    if path.lower() in shipped_card_names():
        return load_model_card(path.lower())
    for name in shipped_card_names():
        data = json.loads((SHIPPED_CARDS_DIR / f"{name}.json").read_text())
        if data.get("hf_repo") == path:
            return load_model_card(name)
    return None


def other_processes_mib(fake_gpu_dir: str | None, gpu_indices: Sequence[int], own_pid: int) -> float:
    """Memory that live processes registered with the fake nvidia-smi hold on our first GPU."""
    if not fake_gpu_dir:
        return 0.0
    total = 0.0
    for record_path in (Path(fake_gpu_dir) / "procs").glob("*.json"):
        try:
            record = json.loads(record_path.read_text())
            pid = int(record["pid"])
            if pid == own_pid or gpu_indices[0] not in record.get("gpus", []):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        # A dead process holds no GPU memory, a zombie neither: a server killed before it could
        # unregister stays a zombie for good where PID 1 does not reap orphans.
        if not procfs.pid_alive(pid):
            continue
        total += float(record.get("used_mib", 0))
    return total


@dataclass
class Launch:
    raw: dict[str, Any]
    settings: SimSettings
    faults: FaultProfile
    env: Mapping[str, str]
    # The SGLang release the sim plays (one of release.KNOWN_RELEASES: FLEET_SIM_SGLANG_VERSION, else
    # DEFAULT_SIM_RELEASE): its command line, resolution, memory formulas, log lines and reported version.
    release: str
    parsed: ParsedArgv | None = None  # the release's own ServerArgs fields as given (its field names)
    fork: str | None = None  # "ddtree" when playing the DDTree fork
    argv: tuple[str, ...] = ()  # the command line as given (/server_info's launch_command)

    @property
    def sglang_version(self) -> str:
        """The release played (the name the log-line code reads)."""
        return self.release


class SimServer:
    def __init__(self, launch: Launch, resolved: ResolvedArgs, target: ModelCard, draft: ModelCard | None, host: gpumod.GpuHost, plan: MemoryPlan, console: Console) -> None:
        self.launch = launch
        self.resolved = resolved
        self.values = resolved.values
        self.target = target
        self.draft = draft
        self.host = host
        self.plan = plan
        self.console = console
        self.speed = launch.settings.speed
        self.start_speed = launch.settings.start_scale  # the start-up phases' time scale (--sim-start-speed)
        self.tp = self.values["tp_size"]
        self.pid = os.getpid()
        # The GPUs it plays are not the machine's: nothing of them belongs in its nvidia-smi.
        self.fake_gpu_dir = None if host.played else launch.env.get("FLEET_FAKE_GPU_DIR")
        self.gpu_indices = [g.index for g in host.gpus[: self.tp]]
        self.total_gb = host.gpus[0].memory_total_gb
        self.started = time.time()
        self.load_weights_s = 0.0
        self.graph_gb = 0.0
        self.engine: Engine | None = None
        self.text = release_text(launch.sglang_version)
        # The process' death on a fatal error; tests that run a server in-process replace it.
        self.kill_self: Callable[[], None] = lambda: os.kill(self.pid, signal.SIGKILL)

    # --- small helpers ---------------------------------------------------------------------------

    async def pause(self, simulated_s: float) -> None:
        """A start-up phase's simulated seconds, at the start-up time scale."""
        await asyncio.sleep(simulated_s * self.start_speed)

    def register(self, avail_gb: float) -> None:
        if self.fake_gpu_dir:
            used = max((self.total_gb - avail_gb) * 1024, 0.0)
            gpumod.register_process(self.fake_gpu_dir, self.pid, self.gpu_indices, int(used))

    def die(self) -> NoReturn:
        """kill_process_tree(os.getpid()): the process SIGKILLs itself; the driver frees its memory."""
        self.console.flush()
        if self.fake_gpu_dir:
            gpumod.unregister_process(self.fake_gpu_dir, self.pid)
        self.kill_self()
        raise SystemExit(137)  # not reached when kill_self kills the process

    def fail_scheduler(self, phase: str, exception: str, message: str, draft: bool = False) -> NoReturn:
        lines = sgltext.init_failure_traceback(phase, exception, message, draft, self.text.release)
        for rank in range(self.tp):
            self.console.rank(rank, "Scheduler hit an exception: " + lines[0], ERROR)
            self.console.raw(lines[1:])
        self.console.main(sgltext.SIGQUIT_LAUNCH, ERROR)
        self.die()

    def crash(self, error: str) -> None:
        """A CUDA error in a decode step: the scheduler dies, NCCL's watchdog takes the other ranks."""
        lines = sgltext.runtime_crash_traceback(self.resolved.algorithm, error)
        self.console.rank(0, "Scheduler hit an exception: " + lines[0], ERROR)
        self.console.raw(lines[1:])
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime()) + ".%09d" % (time.time_ns() % 1_000_000_000)
        for rank in range(1, self.tp):
            self.console.raw(sgltext.nccl_watchdog_lines(rank, error, stamp))
        self.console.main(sgltext.sigquit_running(f"<frame at 0x7f3a2c1e5a40, file '{sgltext.SGLANG}/srt/entrypoints/http_server.py', line 2318, code _setup_and_run_http_server>"), ERROR)
        self.die()

    # --- startup ---------------------------------------------------------------------------------

    async def start_scheduler(self) -> None:
        values, plan, console = self.values, self.plan, self.console
        shows_flashinfer = self.launch.faults.shows_flashinfer_warning(self.host.compute_cap, self.host.cuda_toolkit)
        if shows_flashinfer:
            console.raw([sgltext.FLASHINFER_SM12_WARNING])
        if values["attention_backend"] is None:
            console.main(self.text.attention_default("flashinfer"))
        await self.pause(SPAWN_S)
        if shows_flashinfer:
            console.raw([sgltext.FLASHINFER_SM12_WARNING])
        if self.tp > len(self.host.gpus):
            self.fail_scheduler("device", "torch.AcceleratorError", "CUDA error: invalid device ordinal\n" + "\n".join(sgltext.CUDA_ERROR_TAIL) + "\n")

        text = self.text
        console.ranks(text.init_begin())
        began = time.monotonic()
        await self.pause(INIT_DISTRIBUTED_S if self.tp == 1 else INIT_DISTRIBUTED_TP_S)
        nccl_gb = 0.0 if self.tp == 1 else 0.38
        console.ranks(text.init_end(time.monotonic() - began, nccl_gb))
        self.memory_baseline(nccl_gb)

        console.ranks(text.load_weight_begin(plan.pre_load_avail_gb))
        self.register(plan.pre_load_avail_gb)
        began = time.monotonic()
        await self.pause(plan.weights_gb_per_gpu / WEIGHT_LOAD_GBS + 1.0 + self.launch.faults.slow_start_s)
        failure = plan.failure
        if failure is not None and failure.phase == "load_weights" and failure.model_role == "target":
            self.fail_scheduler("load_weights", failure.exception, failure.message)
        self.load_weights_s = time.monotonic() - began
        console.ranks(text.load_weight_end(self.load_weights_s, self.target.architecture, plan.post_load_avail_gb, plan.weights_gb_per_gpu))
        self.register(plan.post_load_avail_gb)
        has_draft = self.resolved.algorithm in DFLASH_FAMILY and self.draft is not None
        # 0.5.23 builds the draft worker (its weights) before it sizes the pools of both models.
        draft_first = has_draft and text.formats.draft_loads_before_pools
        avail = plan.post_load_avail_gb
        if draft_first:
            avail = await self.load_draft(avail)

        await self.pause(POOL_ALLOC_S)
        if failure is not None and failure.phase in ("mamba_cache", "kv_cache"):
            self.fail_scheduler(failure.phase, failure.exception, failure.message)
        if self.target.is_hybrid:
            spec = (plan.intermediate_ssm_gb, plan.intermediate_conv_gb) if self.resolved.algorithm else None
            console.ranks(text.mamba_cache_allocated(plan.max_mamba_cache_size, plan.conv_state_gb, plan.ssm_state_gb, spec))
        console.ranks(text.kv_cache_allocated(self.kv_dtype(), plan.kv_tokens, plan.k_size_gb, plan.v_size_gb))
        # 0.5.12's figures are the memory plan's own; after a draft loaded first they follow from it.
        pool_end = avail - (plan.k_size_gb + plan.v_size_gb + plan.mamba_cache_gb) if draft_first else plan.pool_end_avail_gb
        console.ranks(text.memory_pool_end(pool_end))
        self.register(pool_end)
        if failure is not None and failure.phase == "scheduler_init":
            self.fail_scheduler("scheduler_init", failure.exception, failure.message)
        if draft_first:
            pool_end = self.draft_pools(pool_end)
        self.check_attention_backend()

        avail = pool_end - ATTENTION_WORKSPACE_GB
        graph_gb = 0.0
        if not values["disable_cuda_graph"]:
            avail, graph_gb = await self.capture_graphs(avail)
        if has_draft and not draft_first:
            avail = self.draft_pools(await self.load_draft(avail))
        self.graph_gb = graph_gb
        console.rank(
            0,
            text.scheduler_ready(
                plan.kv_tokens,
                plan.chunked_prefill_size,
                values["max_prefill_tokens"],
                plan.max_running_requests,
                plan.context_len,
                avail,
            ),
        )
        self.register(avail)

    def memory_baseline(self, mem_usage_gb: float) -> None:
        """0.5.23 measures the memory before each model runner loads (target, then draft)."""
        line = self.text.memory_baseline(mem_usage_gb)
        if line is not None:
            self.console.ranks(line)

    def kv_dtype(self) -> str:
        dtype = self.values["kv_cache_dtype"]
        if dtype in ("auto", None):
            return self.target.kv_dtype
        return {"bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}.get(dtype, dtype)

    def check_attention_backend(self) -> None:
        """attention_registry: FA3 needs SM 8.x/9.x; TRTLLM MHA prefill needs SM100."""
        backend = self.values["attention_backend"]
        major = self.host.compute_cap[0]
        if backend == "fa3" and major not in (8, 9):
            self.fail_scheduler("attention_backend", "AssertionError", "FlashAttention v3 Backend requires SM>=80 and SM<=90. Please use `--attention-backend flashinfer`.")
        if backend == "trtllm_mha" and major != 10 and self.values["prefill_attention_backend"] in (None, "trtllm_mha"):
            self.fail_scheduler("attention_backend", "ValueError", "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). Please use a different prefill backend.")

    async def capture_graphs(self, avail: float) -> tuple[float, float]:
        console, plan, text = self.console, self.plan, self.text
        speculative = self.resolved.algorithm is not None
        batch_sizes = self.values["cuda_graph_bs"] or graph_batch_sizes(plan.cuda_graph_max_bs, speculative, plan.max_running_requests)
        batch_sizes = [bs for bs in batch_sizes if bs <= plan.max_running_requests] or [1]
        verify = plan.num_draft_tokens or 1
        graph_gb = graph_memory_gb(max(batch_sizes), verify)
        # 0.5.23 names the graph: a speculative target captures its verify step (verify tokens per request).
        capture_name = "target verify" if speculative else "target decode"
        console.ranks(text.capture_begin(avail, capture_name, "full", verify))
        bs_line = text.capture_bs(batch_sizes)
        if bs_line is not None:
            console.rank(0, bs_line)
        began = time.monotonic()
        await self.pause(GRAPH_CAPTURE_S_PER_BS * len(batch_sizes) * (1.5 if speculative else 1.0))
        if avail - graph_gb < GRAPH_HEADROOM_GB:
            in_use = self.total_gb - max(avail, 0.0)
            oom = sgltext.torch_oom(graph_gb, self.total_gb, max(avail, 0.0), in_use)
            self.fail_scheduler("cuda_graph", "Exception", f"Capture cuda graph failed: {oom}\n{sgltext.CUDA_GRAPH_CAPTURE_FAILED_MSG}")
        avail -= graph_gb
        console.ranks(text.capture_end(time.monotonic() - began, graph_gb, avail, capture_name, batch_sizes))
        return avail, graph_gb

    async def load_draft(self, avail: float) -> float:
        """The DFLASH/DDTREE draft worker's model runner and weights: after the target's graphs with a
        distributed init of its own (0.5.12), or right after the target's weights (0.5.23)."""
        console, plan, text = self.console, self.plan, self.text
        if text.formats.draft_inits_parallel:
            console.ranks(text.init_begin())
            console.ranks(text.init_end(0.0, 0.0))
        self.memory_baseline(0.0)
        console.ranks(text.load_weight_begin(avail))
        began = time.monotonic()
        await self.pause(plan.draft_weights_gb_per_gpu / WEIGHT_LOAD_GBS + 0.5)
        failure = plan.failure
        if failure is not None and failure.phase == "load_weights" and failure.model_role == "draft":
            self.fail_scheduler("load_weights", failure.exception, failure.message, draft=True)
        avail -= plan.draft_weights_gb_per_gpu
        console.ranks(text.load_weight_end(time.monotonic() - began, "DFlashDraftModel", avail, plan.draft_weights_gb_per_gpu))
        return avail

    def draft_pools(self, avail: float) -> float:
        """The draft's KV pool (it shares the target's token count) and its runner's lines."""
        console, plan, text = self.console, self.plan, self.text
        console.ranks(text.kv_cache_allocated(self.kv_dtype(), plan.kv_tokens, plan.draft_k_size_gb, plan.draft_v_size_gb))
        avail -= plan.draft_k_size_gb + plan.draft_v_size_gb
        console.ranks(text.memory_pool_end(avail))
        backend = self.values["speculative_draft_attention_backend"] or self.values["attention_backend"] or "flashinfer"
        for line in sgltext.dflash_runner_lines(backend, self.values["speculative_num_draft_tokens"]):
            console.rank(0, line)
        return avail

    # --- serving ---------------------------------------------------------------------------------

    def _noise_seed(self) -> int:
        """Each server its own noise, as each start on hardware has: drawn from the sim seed and
        the server's whole resolved command line (port included), so two configurations, or one on
        two ports, vary independently, and the same plan replays the same draws."""
        identity = json.dumps(self.values, sort_keys=True, default=str)
        return zlib.crc32(f"{self.launch.settings.seed}:{identity}".encode())

    def build_engine(self) -> Engine:
        values, plan = self.values, self.plan
        bandwidth, tflops = gpumod.gpu_speed(self.host.gpus[0].name)
        algorithm = self.resolved.algorithm
        model = perf.build_perf_model(
            bandwidth_gbs=bandwidth,
            tflops=tflops,
            weights_bytes_per_gpu=plan.weights_gb_per_gpu * gpumod.GIB,
            draft_weights_bytes_per_gpu=plan.draft_weights_gb_per_gpu * gpumod.GIB,
            kv_cell_bytes=plan.kv_cell_bytes,
            tp_size=self.tp,
            cuda_graphs=not values["disable_cuda_graph"],
        )
        config = EngineConfig(
            max_running_requests=plan.max_running_requests,
            max_total_num_tokens=plan.kv_tokens,
            context_len=plan.context_len,
            chunked_prefill_size=plan.chunked_prefill_size,
            max_prefill_tokens=values["max_prefill_tokens"],
            decode_log_interval=max(values["decode_log_interval"], 1),
            algorithm=algorithm,
            verify_tokens=plan.num_draft_tokens or 1,
            spec_num_draft_tokens=values["speculative_num_draft_tokens"] if algorithm else None,
            ddtree_budget=self.resolved.ddtree_budget,
            hybrid=self.target.is_hybrid,
            max_mamba_cache_size=plan.max_mamba_cache_size,
            cuda_graph_max_bs=0 if values["disable_cuda_graph"] else plan.cuda_graph_max_bs,
            radix_cache=not values["disable_radix_cache"],
            compute_cap_major=self.host.compute_cap[0],
            seed=self.launch.settings.seed,
            noise=self.launch.settings.noise,
            noise_seed=self._noise_seed(),
        )
        return Engine(config, model, self.launch.faults, self.console, self.speed, self.crash)

    def server_state(self) -> ServerState:
        plan, values = self.plan, self.values
        reported = dict(values)
        reported.update(
            mem_fraction_static=plan.mem_fraction_static,
            chunked_prefill_size=plan.chunked_prefill_size,
            cuda_graph_max_bs=plan.cuda_graph_max_bs,
            max_running_requests=plan.requested_max_running_requests,
        )
        algorithm = self.resolved.algorithm
        reserved = 0
        if algorithm in EAGLE_FAMILY:
            reserved = max((values["speculative_eagle_topk"] or 1) * (values["speculative_num_steps"] or 1), values["speculative_num_draft_tokens"] or 0)
        return ServerState(
            server_args=reported,
            scheduler_info={"status": "ready", "max_total_num_tokens": plan.kv_tokens, "max_req_input_len": min(plan.context_len - 1, plan.kv_tokens - 1) - 5},
            context_len=plan.context_len,
            served_model_name=values["served_model_name"],
            model_type="qwen3_5" if self.target.architecture.startswith("Qwen3_5") else self.target.architecture.lower(),
            architectures=[self.target.architecture],
            has_image_understanding=self.target.is_multimodal,
            memory_usage={
                "weight": round(plan.weights_gb_per_gpu, 2),
                "kvcache": round(plan.k_size_gb + plan.v_size_gb + plan.mamba_cache_gb, 2),
                "token_capacity": plan.kv_tokens,
                "graph": round(self.graph_gb, 2),
            },
            max_running_requests=plan.max_running_requests,
            reserved_spec_tokens=reserved,
            spec_num_draft_tokens=values["speculative_num_draft_tokens"] if algorithm else None,
            started_at=self.started,
            version=self.launch.release,
            load_weights_s=self.load_weights_s,
            # 0.5.23 server_args.py:717 `_launch_command`: the argv joined by spaces (watermark keys redacted).
            launch_command=" ".join(self.launch.argv),
        )

    async def run(self) -> int:
        await self.start_scheduler()
        self.engine = self.build_engine()
        engine_task = asyncio.create_task(self.engine.run())
        state = self.server_state()
        values = self.values
        api = Api(state, self.engine, self.console, self.speed, values["enable_metrics"], values["enable_cache_report"])
        await self.pause(1.0)
        for line in sgltext.uvicorn_startup(self.pid):
            self.console.http(line)
        host, port = values["host"], values["port"]
        try:
            if self.launch.faults.port_in_use:
                raise OSError(98, sgltext.bind_error(host, port).split("] ", 1)[1])
            server = await serve(host, port, api, self.console)
        except OSError as exc:
            self.console.http(sgltext.UVICORN_ERROR + str(exc), ERROR)
            for line in sgltext.uvicorn_shutdown():
                self.console.http(line)
            self.console.flush()
            if self.fake_gpu_dir:
                gpumod.unregister_process(self.fake_gpu_dir, self.pid)
            return 1
        self.console.http(sgltext.uvicorn_running(host, port))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        warmup = asyncio.create_task(self.warm_up(state))
        await stop.wait()
        warmup.cancel()
        engine_task.cancel()
        self.console.http(sgltext.UVICORN_INFO + "Shutting down")
        server.close()
        for line in sgltext.uvicorn_shutdown():
            self.console.http(line)
        self.console.http(sgltext.UVICORN_INFO + f"Finished server process [{self.pid}]")
        if self.fake_gpu_dir:
            gpumod.unregister_process(self.fake_gpu_dir, self.pid)
        self.console.flush()
        return 0

    async def warm_up(self, state: ServerState) -> None:
        """_execute_server_warmup: poll /model_info, send one 8-token request, then declare ready."""
        assert self.engine is not None
        if not self.values["skip_server_warmup"]:
            host = self.values["host"]
            target = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            port = self.values["port"]
            info: Any = None
            for _ in range(WARMUP_ATTEMPTS):
                await asyncio.sleep(self.start_speed)  # start-up: its once-a-second poll before the ready line
                status, info = await http_json(target, port, "GET", "/model_info", None)
                if status == 200:
                    break
            else:
                self.warmup_failed(f"res=<Response [{status}]>, /model_info did not answer")
            if info.get("has_image_understanding"):
                path = "/v1/chat/completions"
                body: dict[str, Any] = {
                    "model": self.values["served_model_name"],
                    "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}, {"type": "text", "text": "Describe the image."}]}],
                    "max_tokens": 8,
                    "stream": False,
                    "temperature": 0.0,
                }
            else:
                path = "/generate"
                body = {"sampling_params": {"temperature": 0, "max_new_tokens": 8}, "text": "The capital city of France is"}
            status, answer = await http_json(target, port, "POST", path, body)
            if status != 200:
                self.warmup_failed(json.dumps(answer))
        state.status = "Up"
        state.ready_at = time.time()
        self.engine.ready = True
        self.console.main(self.text.fired_up())

    def warmup_failed(self, detail: str) -> NoReturn:
        """_execute_server_warmup's failure: the error log, then kill_process_tree(os.getpid())."""
        lines = sgltext.format_traceback(
            ((f"{sgltext.SGLANG}/srt/entrypoints/http_server.py", 2019, "_execute_server_warmup", 'assert res.status_code == 200, f"{res.text}"'),), f"AssertionError: {detail}"
        )
        self.console.main("Initialization failed. warmup error: " + "\n".join(lines), ERROR)
        self.die()


async def http_json(host: str, port: int, method: str, path: str, body: Any) -> tuple[int, Any]:
    """A minimal HTTP/1.1 client for the warm-up (the real one uses `requests`)."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return 0, None
    payload = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nhost: {host}:{port}\r\nuser-agent: python-requests/2.32.3\r\nconnection: close\r\n"
    if body is not None:
        head += f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n"
    writer.write(head.encode() + b"\r\n" + payload)
    try:
        response = await reader.read()
    finally:
        writer.close()
    status_line, _, rest = response.partition(b"\r\n")
    _, _, body_bytes = rest.partition(b"\r\n\r\n")
    try:
        status = int(status_line.split()[1])
        return status, json.loads(body_bytes or b"null")
    except (IndexError, ValueError):
        return 0, None


def prepare(argv: Sequence[str], env: Mapping[str, str], err: TextIO | None = None, out: TextIO | None = None) -> SimServer | int:
    """Everything SGLang does before it launches the scheduler: flags, model, ServerArgs hooks, GPUs,
    memory plan, and the `server_args=` line. An exit code when it stops there, as SGLang would."""
    errors = err if err is not None else sys.stderr
    try:
        line = read_command_line(argv, env)
    except ArgvError as exc:  # argparse's usage and error, exit 2, before any logging is set up
        errors.write(exc.text)
        errors.flush()
        return 2
    except SimUsageError as exc:
        errors.write(f"fleet sim: error: {exc}\n")
        errors.flush()
        return 2
    except ConfigFileError as exc:  # ConfigArgumentMerger's ValueError in prepare_server_args
        errors.write("\n".join(sgltext.format_traceback(sgltext.LAUNCH_FRAMES, f"ValueError: {exc}")) + "\n")
        errors.flush()
        return 1
    raw, settings = line.values, line.settings
    console = Console(raw["tp_size"], err, out, raw["log_level"], raw["log_level_http"])
    text = release_text(line.release)
    console.raw(text.launch_server_deprecation())
    if line.release_note:
        console.raw([f"fleet sim: {line.release_note}"])
    try:
        faults = load_fault_profile(settings.faults_path)
    except FaultProfileError as exc:
        console.raw([f"fleet sim: {exc}"])
        return 2
    launch = Launch(raw, settings, faults, env, line.release, line.parsed, line.fork, tuple(argv))

    try:
        target = resolve_model(raw["model_path"], faults)
        draft_path = raw["speculative_draft_model_path"]
        draft = resolve_model(draft_path, FaultProfile()) if draft_path else None
    except ConfigError as exc:
        if exc.field == "weights":
            # SGLang gets further (it fails in the weight loader), but with this final line.
            message = f"RuntimeError: Cannot find any model weights with `{exc.path}`"
        else:
            message = f"ValueError: {exc}"
        console.raw(sgltext.format_traceback(sgltext.LAUNCH_FRAMES, message))
        return 1
    for path, card in ((raw["model_path"], target), (draft_path, draft)):
        if path and card is None:
            console.raw(sgltext.missing_model_traceback(path, Path(path).is_dir()))
            return 1
    assert target is not None

    resolved = resolve_server_args(raw, target, draft, env, settings.seed, release=launch.release, fork=launch.fork)
    console.raw([text.pre_logging(w.message) for w in resolved.warnings])
    if resolved.failure is not None:
        failure = resolved.failure
        console.raw(sgltext.args_failure_traceback(failure.site, failure.exception, failure.message))
        return 1

    try:
        host = gpumod.detect_gpu_host(settings.gpu, env)
    except gpumod.GpuDetectionError as exc:
        console.raw(sgltext.format_traceback(sgltext.LAUNCH_FRAMES, f"RuntimeError: No CUDA GPUs are available ({exc})"))
        return 1
    try:
        # The draft's card where the release sizes the draft (DFLASH's; EAGLE's from 0.5.23): as the planner does.
        plan = plan_memory(target, memory_inputs(resolved, host, launch), draft if sizes_draft(resolved.algorithm, launch.release) else None)
    except ValueError as exc:
        console.raw(sgltext.format_traceback(sgltext.LAUNCH_FRAMES, f"ValueError: {exc}"))
        return 1
    shown = dict(resolved.values)
    shown.update(mem_fraction_static=plan.mem_fraction_static, chunked_prefill_size=plan.chunked_prefill_size, cuda_graph_max_bs=plan.cuda_graph_max_bs)
    console.main(text.server_args(shown, render_server_args(shown)))
    return SimServer(launch, resolved, target, draft, host, plan, console)


def release_text(version: str) -> sgltext.ReleaseText:
    """The log lines of the release the simulator plays (the nearest known one for any other)."""
    return sgltext.ReleaseText(log_formats(choose_release(version).release))


def memory_inputs(resolved: ResolvedArgs, host: gpumod.GpuHost, launch: Launch) -> MemoryInputs:
    gpus = [g.index for g in host.gpus[: resolved.values["tp_size"]]]
    others = other_processes_mib(launch.env.get("FLEET_FAKE_GPU_DIR"), gpus, os.getpid())
    return sglang_args.memory_inputs(
        resolved,
        gpu_memory_mib=host.gpus[0].memory_total_mib,
        release=launch.release,
        # Other servers on the same GPU hold memory before we measure it, as on a real host.
        gpu_reserved_mib=DEFAULT_GPU_RESERVED_MIB + others,
    )


def main(argv: Sequence[str] | None = None) -> int:
    prepared = prepare(sys.argv[1:] if argv is None else argv, os.environ)
    if isinstance(prepared, int):
        return prepared
    try:
        return asyncio.run(prepared.run())
    except KeyboardInterrupt:
        return 130
