"""SGLang's log lines per release: each format copied from that release's source, with file and line.

One table, two readers: the log parser (`logparse.py`) accepts the lines of every release in it (a
log does not say its release up front, so each line is recognised on its own), and the simulator
writes its lines from the entry of the release it plays. Adding a release is one more `LogFormats`
entry in `LOG_FORMATS`; `tests/unit/test_logs_0523.py` checks every 0.5.23 entry against the
installed wheel's source, so a drift in SGLang fails a test instead of a parser.

A template is a `str.format` string whose literal text is the source's, byte for byte, and whose
fields stand for the source's expressions (named by fleet; format specs and `!r` as in the source).
Fields in `fixed` are expressions whose value fleet knows for the lines it cares about (the device's
graph name on CUDA, the plain pool's cache name): they are literals when the parser matches a line.
Sources are paths inside the wheel's `sglang/` package.

Standard library only: shipped to hosts with the agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from string import Formatter
from typing import Any, Literal, Mapping

from fleet.host.engines.sglang.release import KNOWN_RELEASES

_FLOAT = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"

# The steps of startup the parser reports (logparse.StartupPhase), whatever the release calls them.
StartupPhaseName = Literal[
    "init_distributed_begin",
    "init_distributed_end",
    "load_weight_begin",
    "memory_pool_end",
    "cuda_graph_begin",
    "cuda_graph_end",
    "draft_cuda_graph_begin",
    "draft_cuda_graph_end",
    "piecewise_cuda_graph_begin",
    "piecewise_cuda_graph_end",
]


@dataclass(frozen=True)
class LogFormat:
    template: str
    source: str  # "srt/entrypoints/engine.py:1185": where the release's wheel builds the line
    fixed: Mapping[str, str] = field(default_factory=dict)

    def format(self, **values: Any) -> str:
        """The line SGLang logs for these values (fields in `fixed` default to their fixed value)."""
        return self.template.format(**{**self.fixed, **values})

    @property
    def head(self) -> str:
        """The template's first sentence (up to and with its first ". " or final "."): what names the
        line, before the figures."""
        cut = self.template.find(". ")
        return self.template if cut < 0 else self.template[: cut + 1]

    @property
    def marker(self) -> str:
        """The literal text the line's head starts with, fixed fields filled in: a cheap prefilter."""
        text = ""
        for literal, name, _, _ in Formatter().parse(self.head):
            text += literal
            if name is None:
                break
            if name not in self.fixed:
                break
            text += self.fixed[name]
        return text

    def regex(self, text: str | None = None) -> re.Pattern[str]:
        """A pattern matching the start of the line (`text`: a part of the template, e.g. `head`):
        literals escaped, fixed fields as their values, float fields as numbers, others lazily."""
        pattern = ""
        seen: set[str] = set()
        for literal, name, spec, _ in Formatter().parse(self.template if text is None else text):
            pattern += re.escape(literal)
            if name is None:
                continue
            if name in self.fixed:
                pattern += re.escape(self.fixed[name])
            elif name in seen:
                pattern += rf"(?P={name})"
            else:
                seen.add(name)
                pattern += rf"(?P<{name}>{_FLOAT})" if spec and spec.endswith("f") else rf"(?P<{name}>.*?)"
        return re.compile(pattern)


@dataclass(frozen=True)
class ServerArgsShape:
    """How the `server_args=` line renders the arguments: 0.5.12 logs the dataclass' repr
    `ServerArgs(a=1, b='x')`, 0.5.23 the resolved dict `{'a': 1, 'b': 'x'}`."""

    opening: str
    closing: str
    separator: str  # between a name and its value
    quoted_names: bool


DATACLASS_REPR = ServerArgsShape("ServerArgs(", ")", "=", quoted_names=False)
DICT_REPR = ServerArgsShape("{", "}", ": ", quoted_names=True)


@dataclass(frozen=True)
class LogFormats:
    """The lines fleet reads (and the simulator writes) as one release logs them. None: the release
    does not log that line."""

    release: str
    # `python -m sglang.launch_server` warns through warnings.warn(..., stacklevel=1) at this line of
    # launch_server.py: the warning names it.
    launch_warning_line: int
    server_args: LogFormat  # the main process' first line of every start
    server_args_shape: ServerArgsShape
    # logging.basicConfig in prepare_server_args, before ServerArgs' hooks warn (no rank prefix yet).
    pre_logging: LogFormat
    attention_default: LogFormat
    init_begin: LogFormat
    init_end: LogFormat
    memory_baseline: LogFormat | None
    load_weight_begin: LogFormat
    load_weight_end: LogFormat
    mamba_cache: LogFormat
    mamba_cache_spec: LogFormat  # with speculative decoding's intermediate state caches
    kv_cache: LogFormat
    memory_pool_end: LogFormat
    capture_begin: LogFormat  # the target model's decode (or verify) CUDA graphs
    capture_bs: LogFormat | None  # the batch sizes on a line of their own
    capture_end: LogFormat
    scheduler_ready: LogFormat
    ready: LogFormat
    # Further startup steps the parser recognises (draft and piecewise/prefill graphs).
    other_phases: tuple[tuple[StartupPhaseName, LogFormat], ...] = ()
    # Startup order of a speculative server with a separate draft model (DFLASH): the draft's
    # weights are loaded before the KV pools are sized (0.5.23), or the draft starts after the
    # target's graphs, with its own distributed init (0.5.12).
    draft_loads_before_pools: bool = False
    draft_inits_parallel: bool = True

    def all_formats(self) -> tuple[LogFormat, ...]:
        formats: list[LogFormat] = []
        for value in vars(self).values():
            if isinstance(value, LogFormat):
                formats.append(value)
        formats.extend(fmt for _, fmt in self.other_phases)
        return tuple(formats)


_CUDA = {"graph": "cuda graph"}
_GPU_MEM = {"mem_name": "available_gpu_mem"}

SGLANG_0_5_12 = LogFormats(
    release="0.5.12",
    launch_warning_line=54,
    server_args=LogFormat("server_args={server_args!r}", "srt/entrypoints/engine.py:773"),
    server_args_shape=DATACLASS_REPR,
    pre_logging=LogFormat("[{asctime}] {message}", "srt/server_args.py:7752"),
    attention_default=LogFormat("Attention backend not specified. Use {backend} backend by default.", "srt/server_args.py:2664"),
    init_begin=LogFormat("Init torch distributed begin.", "srt/model_executor/model_runner.py:1188"),
    init_end=LogFormat(
        "Init torch distributed ends. elapsed={elapsed:.2f} s, mem usage={mem_usage:.2f} GB",
        "srt/model_executor/model_runner.py:1321",
    ),
    memory_baseline=None,
    load_weight_begin=LogFormat("Load weight begin. avail mem={avail:.2f} GB", "srt/model_executor/model_runner.py:1375"),
    load_weight_end=LogFormat(
        "Load weight end. elapsed={elapsed:.2f} s, type={model_class}, {quant}avail mem={avail:.2f} GB, mem usage={usage:.2f} GB.",
        "srt/model_executor/model_runner.py:1554",
        {"quant": ""},
    ),
    mamba_cache=LogFormat(
        "Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {conv:.2f}GB, ssm_state size: {ssm:.2f}GB ",
        "srt/mem_cache/memory_pool.py:338",
    ),
    mamba_cache_spec=LogFormat(
        "Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {conv:.2f}GB, ssm_state size: {ssm:.2f}GB "
        "intermediate_ssm_state_cache size: {issm:.2f}GB intermediate_conv_window_cache size: {iconv:.2f}GB ",
        "srt/mem_cache/memory_pool.py:328",
    ),
    kv_cache=LogFormat("KV Cache is allocated. #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB", "srt/mem_cache/memory_pool.py:744"),
    memory_pool_end=LogFormat("Memory pool end. avail mem={avail:.2f} GB", "srt/model_executor/model_runner_kv_cache_mixin.py:909"),
    capture_begin=LogFormat(
        "Capture {graph} begin. This can take up to several minutes. avail mem={avail:.2f} GB",
        "srt/model_executor/model_runner.py:2945",
        _CUDA,
    ),
    capture_bs=LogFormat("Capture cuda graph bs {bs}", "srt/model_executor/cuda_graph_runner.py:658"),
    capture_end=LogFormat(
        "Capture {graph} end. Time elapsed: {elapsed:.2f} s. mem usage={usage:.2f} GB. avail mem={avail:.2f} GB.",
        "srt/model_executor/model_runner.py:2963",
        _CUDA,
    ),
    scheduler_ready=LogFormat(
        "max_total_num_tokens={max_total}, chunked_prefill_size={chunked}, max_prefill_tokens={max_prefill}, max_running_requests={max_running}, context_len={context_len}, {mem_name}={avail:.2f} GB",
        "srt/managers/scheduler.py:777",
        _GPU_MEM,
    ),
    ready=LogFormat("The server is fired up and ready to roll!", "srt/entrypoints/http_server.py:2033"),
    other_phases=(
        ("draft_cuda_graph_begin", LogFormat("Capture draft cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB", "srt/speculative/eagle_worker.py:287")),
        ("draft_cuda_graph_end", LogFormat("Capture draft cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={usage:.2f} GB. avail mem={avail:.2f} GB.", "srt/speculative/eagle_worker.py:295")),
        ("draft_cuda_graph_begin", LogFormat("Capture draft extend cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB", "srt/speculative/eagle_worker.py:304")),
        (
            "draft_cuda_graph_end",
            LogFormat("Capture draft extend cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={usage:.2f} GB. avail mem={avail:.2f} GB.", "srt/speculative/eagle_worker.py:312"),
        ),
        ("piecewise_cuda_graph_begin", LogFormat("Capture piecewise CUDA graph begin. avail mem={avail:.2f} GB", "srt/model_executor/model_runner.py:3077")),
        (
            "piecewise_cuda_graph_end",
            LogFormat("Capture piecewise CUDA graph end. Time elapsed: {elapsed:.2f} s. mem usage={usage:.2f} GB. avail mem={avail:.2f} GB.", "srt/model_executor/model_runner.py:3089"),
        ),
    ),
    draft_loads_before_pools=False,
    draft_inits_parallel=True,
)

_CUDA_0523 = {"graph": "CUDA graph"}
SGLANG_0_5_23 = LogFormats(
    release="0.5.23",
    launch_warning_line=71,
    # `_server_args_for_logging` is `redact_watermark_secrets(server_args.resolved_dict())`: a dict.
    server_args=LogFormat("server_args={server_args}", "srt/entrypoints/engine.py:1185"),
    server_args_shape=DICT_REPR,
    pre_logging=LogFormat("[{asctime}] {message}", "srt/server_args.py:705"),
    attention_default=LogFormat("Attention backend not specified. Use {backend} backend by default.", "srt/arg_groups/overrides.py:1137"),
    # distributed/bootstrap.py runs once per scheduler process, before any model runner (scheduler.py:536).
    init_begin=LogFormat("Init parallel begin.", "srt/distributed/bootstrap.py:115"),
    init_end=LogFormat("Init parallel ends. elapsed={elapsed:.2f} s", "srt/distributed/bootstrap.py:190"),
    # measure_pre_model_load_memory: once per model runner (target and draft), before its weights.
    memory_baseline=LogFormat("Memory baseline taken. mem usage={mem_usage:.2f} GB", "srt/distributed/bootstrap.py:220"),
    load_weight_begin=LogFormat("Load weight begin. avail mem={avail:.2f} GB", "srt/model_executor/model_runner.py:1274"),
    load_weight_end=LogFormat(
        "Load weight end. elapsed={elapsed:.2f} s, type={model_class}, {quant}avail mem={avail:.2f} GB, mem usage={usage:.2f} GB.",
        "srt/model_executor/model_runner.py:1373",
        {"quant": ""},
    ),
    mamba_cache=LogFormat(
        "Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {conv:.2f}GB, ssm_state size: {ssm:.2f}GB ",
        "srt/mem_cache/memory_pool.py:1005",
    ),
    mamba_cache_spec=LogFormat(
        "Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {conv:.2f}GB, ssm_state size: {ssm:.2f}GB "
        "intermediate_ssm_state_cache size: {issm:.2f}GB intermediate_conv_window_cache size: {iconv:.2f}GB ",
        "srt/mem_cache/memory_pool.py:984",
    ),
    kv_cache=LogFormat(
        "{cache_name} {state}. dtype: {dtype}, #tokens: {tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB",
        "srt/mem_cache/memory_pool.py:2088",
        {"cache_name": "KV Cache", "state": "is allocated"},
    ),
    memory_pool_end=LogFormat("Memory pool end. avail mem={avail:.2f} GB", "srt/mem_cache/kv_cache_configurator.py:499"),
    # capture_name: "target decode", "target verify" (speculative), "draft decode" / "draft verify".
    capture_begin=LogFormat(
        "Capture {capture_name} {graph} begin. backend={backend}, num_tokens_per_req={num_tokens_per_req}, avail mem={avail:.2f} GB",
        "srt/model_executor/model_runner_components/cuda_graph_setup.py:759",
        _CUDA_0523,
    ),
    capture_bs=None,
    capture_end=LogFormat(
        "Capture {capture_name} {graph} end. bs={bs}, elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={avail:.2f} GB.",
        "srt/model_executor/model_runner_components/cuda_graph_setup.py:788",
        _CUDA_0523,
    ),
    scheduler_ready=LogFormat(
        "max_total_num_tokens={max_total}, chunked_prefill_size={chunked}, max_prefill_tokens={max_prefill}, max_running_requests={max_running}, context_len={context_len}, {mem_name}={avail:.2f} GB",
        "srt/managers/scheduler.py:1269",
        _GPU_MEM,
    ),
    ready=LogFormat("The server is fired up and ready to roll!", "srt/entrypoints/http_server.py:2600"),
    other_phases=(
        # capture_name: "target prefill" / "draft prefill": the token-count graphs piecewise graphs became.
        (
            "piecewise_cuda_graph_begin",
            LogFormat(
                "Capture {capture_name} CUDA graph begin. backend={backend}, num_tokens={num_tokens}, avail mem={avail:.2f} GB", "srt/model_executor/model_runner_components/cuda_graph_setup.py:685"
            ),
        ),
        (
            "piecewise_cuda_graph_end",
            LogFormat(
                "Capture {capture_name} CUDA graph end. elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={avail:.2f} GB.",
                "srt/model_executor/model_runner_components/cuda_graph_setup.py:696",
            ),
        ),
    ),
    # scheduler.init_model_worker (scheduler.py:1128): target worker, draft worker, then the pools
    # of both (init_memory_pools), then the graphs of both.
    draft_loads_before_pools=True,
    draft_inits_parallel=False,
)

LOG_FORMATS: dict[str, LogFormats] = {formats.release: formats for formats in (SGLANG_0_5_12, SGLANG_0_5_23)}
assert tuple(LOG_FORMATS) == KNOWN_RELEASES, "one LogFormats entry per known release"


def log_formats(release: str) -> LogFormats:
    """The formats of a known release (see release.choose_release for any other version)."""
    try:
        return LOG_FORMATS[release]
    except KeyError:
        raise KeyError(f"no log formats for SGLang {release!r}; known: {', '.join(LOG_FORMATS)}") from None
