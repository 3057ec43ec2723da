"""The log lines of a `vllm serve` start, as vLLM 0.33.0 prints them: the simulator's vLLM voice.

Every message is a template with the wheel file and line that logs it (paths under `vllm/`);
tests/unit/test_sim_vllm.py checks each template's fixed text against the string literal at that
place of the installed wheel, as tests/unit/test_vllm_logs.py does for the diagnosis catalogue.

The prefix is vllm/logger.py:28-32's `_FORMAT` with the default empty VLLM_LOGGING_PREFIX:
`(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`,
`_DATE_FORMAT = "%m-%d %H:%M:%S"`; a message of several lines carries the prefix on each
(logging_utils/formatter.py:82-85). uvicorn's own lines go through vLLM's logging config as
`(APIServer pid=N) INFO:     Started server process [N]`. Standard library only: ships to hosts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

API = "APIServer"
ENGINE = "EngineCore_DP0"


@dataclass(frozen=True)
class Text:
    """One message: where the wheel logs it (`vllm/` relative path and line) and its %-template."""

    where: str  # "v1/worker/gpu_worker.py:773"
    template: str  # the logger call's format string, %-style as vLLM passes it

    @property
    def source(self) -> str:
        """`[fileinfo:lineno]` of the prefix: the file's name and the line."""
        path, line = self.where.rsplit(":", 1)
        return f"{path.rsplit('/', 1)[-1]}:{line}"

    def __mod__(self, values: object) -> str:
        return self.template % values


# The API server process (vllm/entrypoints/...).
SERVER_VERSION = Text("entrypoints/common/startup.py:18", "vLLM server version %s, serving model %s")
NON_DEFAULT_ARGS = Text("entrypoints/common/startup.py:96", "non-default args: %s")
STARTING_SERVER = Text("entrypoints/launchers/api_server/entry.py:139", "Starting vLLM server on %s")
ROUTES = Text("entrypoints/launchers/launcher.py:188", "Available routes are:")
ROUTE = Text("entrypoints/launchers/launcher.py:197", "Route: %s, Methods: %s")
CORE_INIT_FAILED = Text("v1/engine/utils.py:1474", "Engine core initialization failed. See root cause above. Failed core proc(s): %s")
# The engine core process (vllm/v1/...).
INITIALIZING = Text("v1/engine/core.py:140", "Initializing a V1 LLM engine (v%s) with config: %s")
LOADING_MODEL = Text("v1/worker/gpu_model_runner.py:4979", "Starting to load model %s...")
MODEL_LOADED = Text("v1/worker/gpu_model_runner.py:5089", "Model loading took %s GiB memory and %.6f seconds")
KV_MEMORY = Text("v1/worker/gpu_worker.py:773", "Available KV cache memory: %s GiB")
KV_SIZE = Text("v1/core/kv_cache_utils.py:1149", "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx")
GRAPHS_CAPTURED = Text("v1/worker/gpu_model_runner.py:6517", "Graph capturing finished in %.0f secs, took %.2f GiB")
ENGINE_READY = Text("v1/engine/core.py:413", "init engine (profile, create kv cache, warmup model) took %.2f s")
CORE_FAILED = Text("v1/engine/core.py:1584", "EngineCore failed to start.")
SPEC_STATS = Text(
    "v1/spec_decode/metrics.py:121",
    "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
    "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%",
)

# The routes `vllm serve` lists at start (a subset of launcher.py's, those the simulator serves).
SERVED_ROUTES = (("/health", "GET"), ("/metrics", "GET"), ("/version", "GET"), ("/v1/models", "GET"), ("/v1/completions", "POST"), ("/v1/chat/completions", "POST"))

# Where each start-up phase raises, for the traceback under "EngineCore failed to start.": the frame
# that raises (file under vllm/, line, function) as 0.33.0 has it.
FAILURE_FRAMES = {
    "init_device": ("v1/worker/utils.py", 762, "request_memory"),
    "load_weights": ("v1/worker/gpu_model_runner.py", 4967, "load_model"),
    "profile": ("v1/worker/gpu_model_runner.py", 6072, "profile_run"),
    "kv_cache": ("v1/core/kv_cache_planning.py", 77, "_check_enough_kv_cache_memory"),
}
VLLM_DIR = "/usr/local/lib/python3.12/dist-packages/vllm"


def prefix(process: str, pid: int, level: str, source: str, now: float | None = None) -> str:
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(time.time() if now is None else now))
    return f"({process} pid={pid}) {level} {stamp} [{source}] "


def lines(process: str, pid: int, level: str, text: Text, message: str) -> list[str]:
    """The message as vLLM's logger prints it: the prefix on each of its lines."""
    head = prefix(process, pid, level, text.source)
    return [head + part for part in message.split("\n")]


def uvicorn(pid: int, message: str) -> str:
    """uvicorn's lines in a `vllm serve` log (its default formatter, under the process tag)."""
    return f"({API} pid={pid}) INFO:     {message}"


def failure_traceback(phase: str, exception: str, message: str) -> str:
    """The traceback logger.exception prints under "EngineCore failed to start."."""
    path, line, function = FAILURE_FRAMES.get(phase, FAILURE_FRAMES["profile"])
    return "\n".join(
        [
            "Traceback (most recent call last):",
            f'  File "{VLLM_DIR}/v1/engine/core.py", line 1555, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
            f'  File "{VLLM_DIR}/{path}", line {line}, in {function}',
            f"{exception}: {message}",
        ]
    )


def gib(value_bytes: float) -> str:
    """vllm/utils/mem_utils.py:30 format_gib: `f"{round(b / GiB_bytes, 2)}"`."""
    return f"{round(value_bytes / (1 << 30), 2)}"
