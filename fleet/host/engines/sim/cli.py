"""The simulator's command line: the `sglang.launch_server` flags fleet renders and the common
others (v0.5.13 names, types and defaults, plus the DDTree fork's --speculative-ddtree-budget),
and sim-only --sim-* flags. An unknown flag is an argparse error (exit 2), as with SGLang.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from fleet.host.engines.sim.faults import fault_profile_path
from fleet.host.engines.sim.gpu import GpuOverrides

ATTENTION_BACKENDS = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "dsv4", "compressed", "cutlass_mla", "fa3",
    "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla", "trtllm_mha",
    "dual_chunk_flash_attn", "aiter", "wave", "intel_amx", "ascend", "intel_xpu",
)
MAMBA_SCHEDULER_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


def human_readable_int(text: str) -> int:
    """SGLang's --context-length / --max-total-tokens parser: 32768, 32k, 1M, 1.5K."""
    suffixes = {"k": 1000, "m": 1000**2, "g": 1000**3}
    cleaned = text.strip().replace("_", "").replace(",", "")
    factor = suffixes.get(cleaned[-1:].lower(), 1)
    number = cleaned[:-1] if factor != 1 else cleaned
    try:
        value = float(number) * factor
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value != int(value):
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
    return int(value)


@dataclass(frozen=True)
class Flag:
    """One ServerArgs field: its flags, parser and default, in ServerArgs' field order."""

    dest: str
    flags: tuple[str, ...]
    type: Callable[[str], Any] = str
    default: Any = None
    store_true: bool = False
    choices: tuple[str, ...] | None = None
    nargs: str | None = None


# In the order of the ServerArgs dataclass (v0.5.13), which is the order `server_args=ServerArgs(...)` prints.
SERVER_FLAGS: tuple[Flag, ...] = (
    Flag("model_path", ("--model-path", "--model")),
    Flag("tokenizer_path", ("--tokenizer-path",)),
    Flag("tokenizer_mode", ("--tokenizer-mode",), default="auto"),
    Flag("load_format", ("--load-format",), default="auto"),
    Flag("trust_remote_code", ("--trust-remote-code",), store_true=True),
    Flag("context_length", ("--context-length",), human_readable_int),
    Flag("revision", ("--revision",)),
    Flag("host", ("--host",), default="127.0.0.1"),
    Flag("port", ("--port",), int, 30000),
    Flag("skip_server_warmup", ("--skip-server-warmup",), store_true=True),
    Flag("nccl_port", ("--nccl-port",), int),
    Flag("dtype", ("--dtype",), default="auto", choices=DTYPES),
    Flag("quantization", ("--quantization",)),
    Flag("kv_cache_dtype", ("--kv-cache-dtype",), default="auto", choices=KV_CACHE_DTYPES),
    Flag("mem_fraction_static", ("--mem-fraction-static",), float),
    Flag("max_running_requests", ("--max-running-requests",), int),
    Flag("max_queued_requests", ("--max-queued-requests",), int),
    Flag("max_total_tokens", ("--max-total-tokens",), human_readable_int),
    Flag("chunked_prefill_size", ("--chunked-prefill-size",), int),
    Flag("max_prefill_tokens", ("--max-prefill-tokens",), human_readable_int, 16384),
    Flag("schedule_policy", ("--schedule-policy",), default="fcfs"),
    Flag("schedule_conservativeness", ("--schedule-conservativeness",), float, 1.0),
    Flag("page_size", ("--page-size",), int),
    Flag("tp_size", ("--tp-size", "--tensor-parallel-size"), int, 1),
    Flag("pp_size", ("--pp-size", "--pipeline-parallel-size"), int, 1),
    Flag("stream_interval", ("--stream-interval",), int, 1),
    Flag("random_seed", ("--random-seed",), int),
    Flag("watchdog_timeout", ("--watchdog-timeout",), float, 300),
    Flag("download_dir", ("--download-dir",)),
    Flag("base_gpu_id", ("--base-gpu-id",), int, 0),
    Flag("log_level", ("--log-level",), default="info"),
    Flag("log_level_http", ("--log-level-http",)),
    Flag("log_requests", ("--log-requests",), store_true=True),
    Flag("show_time_cost", ("--show-time-cost",), store_true=True),
    Flag("enable_metrics", ("--enable-metrics",), store_true=True),
    Flag("decode_log_interval", ("--decode-log-interval",), int, 40),
    Flag("api_key", ("--api-key",)),
    Flag("served_model_name", ("--served-model-name",)),
    Flag("chat_template", ("--chat-template",)),
    Flag("enable_cache_report", ("--enable-cache-report",), store_true=True),
    Flag("reasoning_parser", ("--reasoning-parser",)),
    Flag("tool_call_parser", ("--tool-call-parser",)),
    Flag("dp_size", ("--dp-size", "--data-parallel-size"), int, 1),
    Flag("dist_init_addr", ("--dist-init-addr",)),
    Flag("nnodes", ("--nnodes",), int, 1),
    Flag("node_rank", ("--node-rank",), int, 0),
    Flag("json_model_override_args", ("--json-model-override-args",), default="{}"),
    Flag("attention_backend", ("--attention-backend",), choices=ATTENTION_BACKENDS),
    Flag("decode_attention_backend", ("--decode-attention-backend",), choices=ATTENTION_BACKENDS),
    Flag("prefill_attention_backend", ("--prefill-attention-backend",), choices=ATTENTION_BACKENDS),
    Flag("mamba_backend", ("--mamba-backend",), default="triton", choices=("triton", "flashinfer")),
    Flag("speculative_algorithm", ("--speculative-algorithm",)),
    Flag("speculative_draft_model_path", ("--speculative-draft-model-path", "--speculative-draft-model")),
    Flag("speculative_num_steps", ("--speculative-num-steps",), int),
    Flag("speculative_eagle_topk", ("--speculative-eagle-topk",), int),
    Flag("speculative_num_draft_tokens", ("--speculative-num-draft-tokens",), int),
    Flag("speculative_dflash_block_size", ("--speculative-dflash-block-size",), int),
    Flag("speculative_ddtree_budget", ("--speculative-ddtree-budget",), int),
    Flag("speculative_attention_mode", ("--speculative-attention-mode",), default="prefill", choices=("prefill", "decode")),
    Flag("speculative_draft_attention_backend", ("--speculative-draft-attention-backend",)),
    Flag("speculative_draft_window_size", ("--speculative-draft-window-size",), int),
    Flag("ep_size", ("--ep-size", "--expert-parallel-size"), int, 1),
    Flag("max_mamba_cache_size", ("--max-mamba-cache-size",), int),
    Flag("mamba_ssm_dtype", ("--mamba-ssm-dtype",), choices=("float32", "bfloat16", "float16")),
    Flag("mamba_full_memory_ratio", ("--mamba-full-memory-ratio",), float, 0.9),
    Flag("mamba_scheduler_strategy", ("--mamba-scheduler-strategy",), default="auto", choices=MAMBA_SCHEDULER_STRATEGIES),
    Flag("mamba_track_interval", ("--mamba-track-interval",), int, 256),
    Flag("linear_attn_backend", ("--linear-attn-backend",), default="triton", choices=("triton", "cutedsl", "flashinfer")),
    Flag("disable_radix_cache", ("--disable-radix-cache",), store_true=True),
    Flag("cuda_graph_max_bs", ("--cuda-graph-max-bs",), int),
    Flag("cuda_graph_bs", ("--cuda-graph-bs",), int, nargs="+"),
    Flag("disable_cuda_graph", ("--disable-cuda-graph",), store_true=True),
    Flag("disable_overlap_schedule", ("--disable-overlap-schedule",), store_true=True),
    Flag("enable_mixed_chunk", ("--enable-mixed-chunk",), store_true=True),
    Flag("enable_dp_attention", ("--enable-dp-attention",), store_true=True),
    Flag("enable_torch_compile", ("--enable-torch-compile",), store_true=True),
    Flag("disable_piecewise_cuda_graph", ("--disable-piecewise-cuda-graph",), store_true=True),
    Flag("allow_auto_truncate", ("--allow-auto-truncate",), store_true=True),
)


@dataclass(frozen=True)
class SimSettings:
    """What only the simulator has: time scale, seed, fault profile path, GPU fallback."""

    speed: float  # wall seconds per simulated second: 0.01 runs everything 100x faster
    seed: int
    faults_path: str | None
    gpu: GpuOverrides


def build_parser() -> argparse.ArgumentParser:
    # `python -m sglang.launch_server` reports itself as launch_server.py in usage and errors.
    parser = argparse.ArgumentParser(prog="launch_server.py")
    for flag in SERVER_FLAGS:
        if flag.store_true:
            parser.add_argument(*flag.flags, dest=flag.dest, action="store_true")
        else:
            parser.add_argument(
                *flag.flags, dest=flag.dest, type=flag.type, default=flag.default, choices=flag.choices,
                nargs=flag.nargs, required=flag.dest == "model_path",
            )
    sim = parser.add_argument_group("simulator (not SGLang flags)")
    sim.add_argument("--sim-speed", type=float, help="time scale (env FLEET_SIM_SPEED, default 1.0)")
    sim.add_argument("--sim-seed", type=int, help="seed of the simulated outputs (env FLEET_SIM_SEED, default 0)")
    sim.add_argument("--sim-faults", help="fault profile JSON (env FLEET_SIM_FAULTS)")
    sim.add_argument("--sim-gpu-name")
    sim.add_argument("--sim-gpu-count", type=int)
    sim.add_argument("--sim-gpu-memory-mib", type=int)
    sim.add_argument("--sim-gpu-compute-cap")
    sim.add_argument("--sim-gpu-driver")
    sim.add_argument("--sim-cuda-toolkit")
    return parser


def parse_command_line(argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, Any], SimSettings]:
    """(ServerArgs field values as given, simulator settings). Exits 2 on a bad flag, as argparse does."""
    parser = build_parser()
    namespace = vars(parser.parse_args(list(argv)))
    server = {flag.dest: namespace[flag.dest] for flag in SERVER_FLAGS}

    def pick(flag_value: Any, env_name: str, default: Any, convert: Callable[[str], Any]) -> Any:
        if flag_value is not None:
            return flag_value
        raw = env.get(env_name)
        if raw in (None, ""):
            return default
        try:
            return convert(raw)
        except ValueError:
            parser.error(f"environment variable {env_name}: invalid value {raw!r}")

    speed = pick(namespace["sim_speed"], "FLEET_SIM_SPEED", 1.0, float)
    if speed <= 0:
        parser.error(f"the time scale (--sim-speed / FLEET_SIM_SPEED) must be positive, got {speed}")
    defaults = GpuOverrides()
    gpu = GpuOverrides(
        name=pick(namespace["sim_gpu_name"], "FLEET_SIM_GPU_NAME", defaults.name, str),
        count=pick(namespace["sim_gpu_count"], "FLEET_SIM_GPU_COUNT", defaults.count, int),
        compute_cap=pick(namespace["sim_gpu_compute_cap"], "FLEET_SIM_GPU_COMPUTE_CAP", defaults.compute_cap, str),
        memory_mib=pick(namespace["sim_gpu_memory_mib"], "FLEET_SIM_GPU_MEMORY_MIB", defaults.memory_mib, int),
        driver=pick(namespace["sim_gpu_driver"], "FLEET_SIM_GPU_DRIVER", defaults.driver, str),
        cuda_toolkit=pick(namespace["sim_cuda_toolkit"], "FLEET_SIM_CUDA_TOOLKIT", defaults.cuda_toolkit, str),
    )
    settings = SimSettings(
        speed=speed,
        seed=pick(namespace["sim_seed"], "FLEET_SIM_SEED", 0, int),
        faults_path=namespace["sim_faults"] or fault_profile_path(env),
        gpu=gpu,
    )
    return server, settings


def render_server_args(values: Mapping[str, Any]) -> str:
    """`ServerArgs(model_path='...', ...)` as the dataclass repr prints it, in field order."""
    return "ServerArgs(" + ", ".join(f"{flag.dest}={values[flag.dest]!r}" for flag in SERVER_FLAGS) + ")"
