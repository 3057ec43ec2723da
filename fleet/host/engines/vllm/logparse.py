"""What fleet knows of vLLM's server log: its line prefix, its start-up steps and ready lines, and
the KV cache figures it prints. `fleet diagnose` reads a bare log that does not name its engine, so
the classifier (`fleet/host/diagnose/classify.py`) asks this module and SGLang's `logparse` both.

Every text here is vLLM's own, cited from the 0.33.0 wheel (paths under `vllm/`):

- the logger's format, vllm/logger.py:28-33:
  `f"{envs.VLLM_LOGGING_PREFIX}(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"`
  with `_DATE_FORMAT = "%m-%d %H:%M:%S"`; `fileinfo` is the file name (a shortened path at DEBUG,
  logging_utils/formatter.py:65-78); a multi-line message repeats the prefix after "\\r\\n"
  (formatter.py:82-85). Releases before the process name was part of the format printed
  `LEVEL MM-DD HH:MM:SS file.py:123] message` (0.6 and older) or `LEVEL MM-DD HH:MM:SS [file.py:123] message`,
  with the process tag `(VllmWorkerProcess pid=N)`, `(VllmWorker rank=0 pid=N)` or Ray's
  `(RayWorkerWrapper pid=N, ip=...)` put before it.
- start-up steps: "Starting to load model %s..." (v1/worker/gpu_model_runner.py:4979), weight_utils'
  tqdm "Loading safetensors checkpoint shards" (model_executor/model_loader/weight_utils.py:1130),
  "Model loading took %s GiB memory and %.6f seconds" (gpu_model_runner.py:5089), "Capturing CUDA
  graphs (...)" (gpu_model_runner.py:6592), "Graph capturing finished in %.0f secs, took %.2f GiB"
  (gpu_model_runner.py:6517), "init engine (profile, create kv cache, warmup model) took %.2f s"
  (v1/engine/core.py:413, the engine core's last start-up step).
- ready: "Starting vLLM server on %s" (entrypoints/launchers/api_server/entry.py:139), "Available
  routes are:" and "Route: %s, Methods: %s" (entrypoints/launchers/launcher.py:188, :197), uvicorn's
  "Application startup complete".
- KV cache: "Available KV cache memory: %s GiB" (v1/worker/gpu_worker.py:773), "%s KV cache size: %s
  tokens, Maximum concurrency for %s tokens per request: %.2fx" (v1/core/kv_cache_utils.py:1149; older
  releases print the two halves as two lines).

Standard library only: shipped to hosts with the agent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# vLLM's level/time/file head, both spellings: "[core.py:123] " (0.7 on) and "core.py:123] " (older).
_HEAD = r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?P<stamp>\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+(?:\[(?P<file>[^\]:]+):(?P<line>\d+)\]|(?P<file_old>[\w.]+):(?P<line_old>\d+)\])\s?"
# The process tag before it: "(EngineCore_DP0 pid=1707016) ", "(APIServer pid=1) ", "(VllmWorker rank=0 pid=2) ",
# "(RayWorkerWrapper pid=62111, ip=10.0.0.1) ", "(Worker_TP0 pid=9260) ".
_PROCESS = r"\((?P<process>[\w.-]+)(?: [\w.-]+=[\w.-]+)*(?:, ip=[\w.:-]+)?\)\s*"
PROCESS_TAG = re.compile(_PROCESS)
LINE_PREFIX = re.compile(rf"(?:{_PROCESS})?{_HEAD}")
# The KV cache line's halves (one line from 0.7 on, v1/core/kv_cache_utils.py:1147-1154:
#   logger.info_once("%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
#                    pools, f"{num_tokens:,}", f"{max_model_len:,}", max_concurrency)
# with pools "GPU" on CUDA, `_kv_cache_device_name` :1131-1133, " + host" under HiSparse; two lines before).
_KV_SIZE = re.compile(r"(?:(?P<pools>[A-Z]+(?: \+ host)?) )?KV cache size: (?P<tokens>[\d,]+) tokens")
_KV_CONCURRENCY = re.compile(r"Maximum concurrency for (?P<max_model_len>[\d,]+) tokens per request: (?P<concurrency>\d+(?:\.\d+)?)x")
KV_CACHE_LINE = re.compile(_KV_SIZE.pattern + ", " + _KV_CONCURRENCY.pattern)
# v1/worker/gpu_worker.py:772-775: logger.info_once("Available KV cache memory: %s GiB", format_gib(...));
# a negative budget prints negative (the check then raises NO_CACHE_BLOCKS_MESSAGE).
_KV_MEMORY = re.compile(r"Available KV cache memory: (?P<gib>-?\d+(?:\.\d+)?) GiB")


@dataclass(frozen=True)
class VllmPrefix:
    process: str | None  # "EngineCore_DP0", "APIServer", "VllmWorker"; None when the tag is absent
    level: str
    stamp: str  # "05-12 10:11:12": vLLM prints no year
    source: str  # "core.py:708"
    message: str


def parse_prefix(text: str) -> VllmPrefix | None:
    """vLLM's logger prefix of one line, or None when the line does not start with one."""
    found = LINE_PREFIX.match(text)
    if found is None:
        return None
    file, line = (found.group("file"), found.group("line")) if found.group("file") else (found.group("file_old"), found.group("line_old"))
    return VllmPrefix(found.group("process"), found.group("level"), found.group("stamp"), f"{file}:{line}", text[found.end() :])


# vLLM's tool parsers catch any exception while reading a tool call from the model's text, log it with
# logger.exception and answer the request with that text as plain content (0.33
# tool_parsers/hermes_tool_parser.py:116-120 "Error in extracting tool call from response.", the same in
# every `*_tool_parser.py`): each line of the traceback carries the parser's file in its prefix, and
# none of it stops the server. Read like a warning: it proves findings, never a failure.
_CAUGHT_BY_TOOL_PARSER = re.compile(r"_tool_parser\.py$")


def strip_prefix(text: str) -> tuple[str, bool]:
    """The message of a vLLM line without its prefix (a bare process tag too, as on a traceback
    line a worker prints through its decorated stdout), and whether it was logged as a warning
    (or by a tool parser that caught the error: _CAUGHT_BY_TOOL_PARSER)."""
    found = LINE_PREFIX.match(text)
    if found is not None:
        source = found.group("file") or found.group("file_old") or ""
        return text[found.end() :], found.group("level") == "WARNING" or bool(_CAUGHT_BY_TOOL_PARSER.search(source))
    tag = PROCESS_TAG.match(text)
    return (text[tag.end() :], False) if tag is not None else (text, False)


# Start-up steps, in vLLM's words: (literal, what the server was doing, whether the step is under way
# until a later line says it ended). The classifier's stall detection reads these beside SGLang's.
STARTUP_STEPS: tuple[tuple[bytes, str, bool], ...] = (
    # A start's first lines, before any engine step: the platform (platforms/__init__.py, 0.6-0.8 at info:
    # "Automatically detected platform %s."), the API server's version (0.4.3 entrypoints/openai/api_server.py:177
    # "vLLM API server version %s"), then the engine's config ("Initializing an LLM engine (v%s) with config: "
    # 0.2-0.6 engine/llm_engine.py, 0.4.3 :162; 0.33 v1/engine/core.py:140 "Initializing a V1 LLM engine
    # (v%s) with config: %s"). A log that stops there stopped before the engine's first step: `unknown` with
    # that stop point, not a stall, for vLLM prints the platform line on any import (its CLI, collect_env) and
    # the others before any step that takes time.
    (b"Automatically detected platform", "the start's first lines (vLLM's platform, version, arguments)", False),
    (b"vLLM API server version", "the start's first lines (vLLM's platform, version, arguments)", False),
    # Later releases print the version in a banner (0.19 utils.py:299, "version 0.19.0" in block letters;
    # 0.33 entrypoints/common/startup.py:18 "vLLM server version %s, serving model %s"), then the changed
    # arguments (0.33 startup.py:96 "non-default args: %s") and the model's architecture (0.33
    # config/model.py:744 "Resolved architecture: %s"), all before the engine's first step.
    (b"vLLM server version", "the start's first lines (vLLM's platform, version, arguments)", False),
    (b"non-default args: ", "the start's first lines (vLLM's platform, version, arguments)", False),
    (b"Resolved architecture: ", "the start's first lines (the model's config)", False),
    (b"Initializing an LLM engine", "the start's first lines (the engine's config)", False),
    (b"Initializing a V1 LLM engine", "the start's first lines (the engine's config)", False),
    (b"Starting to load model", "loading weights", True),
    # The checkpoint prefetch into the page cache before weights load (0.33
    # model_executor/model_loader/weight_utils.py:1107 "Prefetching checkpoint files into page cache
    # started ...", :1079 "Prefetching checkpoint files: %d%% (%d/%d)" per tenth, :1102 "... finished in
    # %.2fs"): its end first, for its head is the others' too; a bar at 100 % is done.
    (b"Prefetching checkpoint files into page cache finished", "done prefetching the checkpoint files", False),
    (b"Prefetching checkpoint files", "prefetching the checkpoint files into the page cache (weight loading)", True),
    (b"Loading model from scratch", "loading weights", True),
    (b"Loading safetensors checkpoint shards", "loading weights", True),
    (b"Loading weights took", "done loading weights", False),
    (b"Model loading took", "done loading weights", False),
    (b"Available KV cache memory", "done profiling memory for the KV cache", False),
    # V1 then sizes the cache from that memory and logs its capacity (0.33 v1/core/kv_cache_utils.py:1147-1154,
    # update_kv_cache_capacity from v1/engine/core.py:352: "%s KV cache size: %s tokens, Maximum concurrency for
    # %s tokens per request: %.2fx"; 0.7 printed the halves as two lines, kv_cache_utils.py:524 and :527); CUDA
    # graphs and warm-up come after it, before "init engine ... took".
    (b"KV cache size: ", "done sizing the KV cache", False),
    (b"Maximum concurrency for ", "done sizing the KV cache", False),
    # 0.2-0.6 print the profiled block counts (0.4.3 executor/gpu_executor.py:83 and
    # distributed_gpu_executor.py:56: "# GPU blocks: %d, # CPU blocks: %d"; 0.6 "# %s blocks: %d, # CPU
    # blocks: %d" with the device's name), and capture with "Capturing the model for CUDA graphs. This may
    # lead to ..." (0.4.3 worker/model_runner.py:854).
    (b", # CPU blocks:", "done profiling memory for the KV cache", False),
    (b"Capturing the model for CUDA graphs", "capturing CUDA graphs", True),
    (b"Capturing CUDA graph", "capturing CUDA graphs", True),
    (b"Capturing cudagraph", "capturing CUDA graphs", True),
    (b"Graph capturing finished", "finishing startup after CUDA graph capture", False),
    (b"Compiling a graph for", "compiling the model with torch.compile", True),
    # compilation/monitor.py's end of compilation: "torch.compile takes %.2f s in total" up to 0.22, "%storch.compile took
    # %.2f s in total" since (0.25; 0.33 :20).
    (b"torch.compile takes", "done compiling the model", False),
    (b"torch.compile took", "done compiling the model", False),
    # parallel_state.py (0.33: :1846 "world_size=%d rank=%d local_rank=%d distributed_init_method=%s
    # backend=%s", then :2386 "rank %s in world size %s is assigned as DP rank ..."): the distributed
    # groups are being formed, then formed; the model is built next.
    (b"distributed_init_method=", "initialising torch distributed / NCCL", True),
    (b"is assigned as DP rank", "done initialising the distributed groups", False),
    # The API server polls its engine cores every 10 s while they start (v1/engine/utils.py:1444-1451,
    # wait_for_engine_startup: "Waiting for %d local, %d remote core engine proc(s) to start." / "to
    # connect."): the front end is still waiting on an engine that has not come up.
    (b"core engine proc(s) to", "waiting for the engine core process(es) to start", True),
)

# Past any of these the start is done: the engine core finished its last step or the API server is up.
READY_MARKERS: tuple[bytes, ...] = (
    b"init engine (profile, create kv cache, warmup model) took",
    b"Starting vLLM server on",
    b"Starting vLLM API server",
    b"Available routes are",
    b"] Route: /",
)


@dataclass(frozen=True)
class KVCacheFigures:
    tokens: int | None = None
    max_model_len: int | None = None
    available_gib: float | None = None


def kv_cache_figures(message: str) -> KVCacheFigures | None:
    """The KV cache figures of one vLLM line ("GPU KV cache size: 188,640 tokens", "Maximum
    concurrency for 131,072 tokens per request: 5.23x", "Available KV cache memory: 17.36 GiB")."""
    size = _KV_SIZE.search(message)
    concurrency = _KV_CONCURRENCY.search(message)
    memory = _KV_MEMORY.search(message)
    if size is None and concurrency is None and memory is None:
        return None
    return KVCacheFigures(
        int(size.group("tokens").replace(",", "")) if size else None,
        int(concurrency.group("max_model_len").replace(",", "")) if concurrency else None,
        float(memory.group("gib")) if memory else None,
    )


KV_CACHE_MARKERS: tuple[bytes, ...] = (b"KV cache size:", b"Maximum concurrency for", b"Available KV cache memory")
# The same, as text: the lines of a start that `read_start_lines` reads (the memory correction's input).
START_MARKERS: tuple[str, ...] = tuple(marker.decode() for marker in KV_CACHE_MARKERS)


@dataclass(frozen=True)
class KvCacheLine:
    """The whole KV-cache line of a 0.7+ start: the cache's size in tokens, and how many requests of
    max_model_len tokens it holds at once (vLLM's own division, kv_cache_utils.py:1120-1128)."""

    pools: str
    tokens: int
    max_model_len: int
    max_concurrency: float


def parse_kv_cache_line(line: str) -> KvCacheLine | None:
    match = KV_CACHE_LINE.search(line)
    if not match:
        return None
    return KvCacheLine(match["pools"] or "GPU", int(match["tokens"].replace(",", "")), int(match["max_model_len"].replace(",", "")), float(match["concurrency"]))


@dataclass(frozen=True)
class StartLines:
    """What a start's log states of its KV cache: "Available KV cache memory: X GiB" and the whole
    KV-cache line. Either may be missing (a log cut short)."""

    available_gib: float | None = None
    kv_tokens: int | None = None
    max_model_len: int | None = None
    max_concurrency: float | None = None


def read_start_lines(lines: Iterable[str]) -> StartLines:
    """The last "Available KV cache memory" and KV-cache lines of a log (a restarted server logs
    them again; the last start is the one that served)."""
    available: float | None = None
    size: KvCacheLine | None = None
    for line in lines:
        match = _KV_MEMORY.search(line)
        if match:
            available = float(match["gib"])
        parsed = parse_kv_cache_line(line)
        if parsed is not None:
            size = parsed
    if size is None:
        return StartLines(available_gib=available)
    return StartLines(available, size.tokens, size.max_model_len, size.max_concurrency)
