"""Parse SGLang server log lines into typed events.

Standard library only: the host-side agent ships this file and uses it to fail fast while it waits
for a server, and `fleet diagnose` uses it to read startup figures.

Accepted line shapes (all may carry ANSI colour codes and a trailing CR):
- SGLang's own format `[%Y-%m-%d %H:%M:%S{.mmm}{ DP0 PP0 ATTN_CP0 MOE_DP0 TP0 EP0}] message`
  (`sglang/srt/utils/common.py::configure_logger`; milliseconds only with SGLANG_LOG_MS);
- the same behind a journald prefix, short (`May 23 09:41:39 host python[61613]: ...`) or
  short-iso (`2026-05-23T09:41:39+0000 host python[61613]: ...`);
- bare lines pasted without any prefix (tracebacks, excerpts from issues).

Message formats: every release in `logformats.LOG_FORMATS` (0.5.12 and 0.5.23), recognised line by
line, since a log does not say its release and a journald dump can span an upgrade. A server start
is `server_args=ServerArgs(...)` (0.5.12) or `server_args={...}` (0.5.23); startup steps are the
heads of the table's phase lines (`Init torch distributed begin.` / `Init parallel begin.`, `Capture
cuda graph begin.` / `Capture target decode CUDA graph begin.`, ...). Serving lines are parsed as
`key: value` lists, so plain, hybrid-mamba, hybrid-SWA and spec-decoding variants all parse (also
the 0.5.10 variant without `#pending-token`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict, Union

from fleet.host.engines.sglang.logformats import LOG_FORMATS, LogFormat, ServerArgsShape, StartupPhaseName

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_JOURNALD_RE = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}"
    r"|(?P<iso>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r" \S+ [^\s:\[]+(?:\[\d+\])?: "
)
# Wrappers a log picks up on its way to a user, outside journald's and SGLang's own prefixes:
# e-mail/markdown quote marks, a CI console's timestamp (Jenkins' timestamper writes
# `[2025-11-06T02:10:00.702Z] `, GitHub Actions `2025-11-06T02:10:00.7020000Z `), docker
# compose's container name padded to the longest, then ` | ` (`service-1  | `, or a `container_name:`
# the compose file chose, `qanything-container-local  | `) and Open MPI's `--tag-output`
# (orte/mca/iof/base/iof_base_output.c: "[%s,%s]<%s>:" with the job id, the rank and stdout/stderr, no
# space after it; with `--timestamp-output` ctime's "Thu Jan 23 11:55:50 2025" before it; PMIx's
# iof "[%s,%s]<%s>: " adds one). Without removing them an anchored rule (a traceback source line is no
# event) would read the wrapper instead of the line. Open MPI's space is left to the line's own
# indentation (a frame's two spaces, a quoted source line's four).
_WRAPPER_RE = re.compile(
    r"^(?:>[ \t]?)+"
    r"|^\[\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z\] ?"
    r"|^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z "
    r"|^[A-Za-z0-9][\w.-]* +\| "
    r"|^(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})?\[\d+,\d+\]<std(?:out|err|diag)>:(?: (?=\S))?"
)
_SGLANG_PREFIX_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,](?P<ms>\d{1,6}))?"
    r"(?P<rank>(?: [A-Z][A-Z_]*\d+)*)\] "
)
_FLOAT = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_KEY_EQ_NUMBER_RE = re.compile(rf"(\w+)=({_FLOAT})")
_GB_FIELD_RE = re.compile(rf"(avail mem|mem usage|elapsed)=({_FLOAT})")
_MAMBA_RE = re.compile(
    rf"max_mamba_cache_size: (?P<size>\d+), conv_state size: (?P<conv>{_FLOAT}) ?GB, "
    rf"ssm_state size: (?P<ssm>{_FLOAT}) ?GB"
    rf"(?:,? intermediate_ssm_state_cache size: (?P<issm>{_FLOAT}) ?GB)?"
    rf"(?:,? intermediate_conv_window_cache size: (?P<iconv>{_FLOAT}) ?GB)?"
)
_KV_RE = re.compile(
    rf"KV Cache is allocated\.(?: dtype: (?P<dtype>[\w.]+),)? #tokens: (?P<tokens>\d+), "
    rf"(?:K size: (?P<k>{_FLOAT}) GB, V size: (?P<v>{_FLOAT}) GB|KV size: (?P<kv>{_FLOAT}) GB)"
)
_SCHEDULER_RE = re.compile(
    r"max_total_num_tokens=(?P<max_total>\d+), chunked_prefill_size=(?P<chunked>-?\d+|None), "
    r"max_prefill_tokens=(?P<max_prefill>\d+), max_running_requests=(?P<max_running>\d+), "
    rf"context_len=(?P<context_len>\d+)(?:, available_(?:gpu|cpu)_mem=(?P<avail>{_FLOAT}) GB)?"
)
_SERVING_RE = re.compile(r"^(Prefill|Decode) batch(?: \[\d+\])?[,.] ")

# Every known release logs the same line (http_server.py's _wait_and_warmup; see logformats).
READY_TEXT = next(iter(LOG_FORMATS.values())).ready.template
assert all(formats.ready.template == READY_TEXT for formats in LOG_FORMATS.values()), "one ready line for all releases"


def _capture_phase(default: StartupPhaseName, capture_name: str | None) -> StartupPhaseName:
    """0.5.23 names the captured graph ("target decode", "target verify", "draft decode", "target
    prefill"): a draft's graphs are the draft phase, prefill graphs replaced the piecewise ones."""
    if not capture_name:
        return default
    end = default.endswith("_end")
    if capture_name.startswith("draft"):
        return "draft_cuda_graph_end" if end else "draft_cuda_graph_begin"
    if "prefill" in capture_name:
        return "piecewise_cuda_graph_end" if end else "piecewise_cuda_graph_begin"
    return "cuda_graph_end" if end else "cuda_graph_begin"


def _phase_patterns() -> tuple[tuple[tuple[re.Pattern[str], StartupPhaseName], ...], tuple[str, ...]]:
    """The head of every startup-step line of every known release, most specific first."""
    entries: list[tuple[LogFormat, StartupPhaseName]] = []
    for formats in LOG_FORMATS.values():
        entries.extend((fmt, phase) for phase, fmt in formats.other_phases)
    for formats in LOG_FORMATS.values():
        entries += [
            (formats.init_begin, "init_distributed_begin"),
            (formats.init_end, "init_distributed_end"),
            (formats.load_weight_begin, "load_weight_begin"),
            (formats.memory_pool_end, "memory_pool_end"),
            (formats.capture_begin, "cuda_graph_begin"),
            (formats.capture_end, "cuda_graph_end"),
        ]
        if formats.memory_baseline is not None:
            # The baseline is taken right before the weights load: startup is where init ends.
            entries.append((formats.memory_baseline, "init_distributed_end"))
    patterns: dict[str, tuple[re.Pattern[str], StartupPhaseName]] = {}
    for fmt, phase in entries:
        pattern = fmt.regex(fmt.head)
        patterns.setdefault(pattern.pattern, (pattern, phase))
    return tuple(patterns.values()), tuple(sorted({fmt.marker.split(" ")[0] for fmt, _ in entries}))


# _PHASE_INITIALS: the first words of every phase line; most lines have none of them and fail this
# one cheap test.
_PHASES, _PHASE_INITIALS = _phase_patterns()
_SERVER_ARGS = "server_args="
_SERVER_ARGS_SHAPES: tuple[ServerArgsShape, ...] = tuple(dict.fromkeys(f.server_args_shape for f in LOG_FORMATS.values()))
_DDTREE_HEAD = "DDTREE metrics:"


def _summary_markers() -> tuple[bytes, ...]:
    markers: set[str] = {_SERVER_ARGS, _DDTREE_HEAD, "Decode batch", "Prefill batch"}
    for formats in LOG_FORMATS.values():
        for fmt in (
            formats.init_begin,
            formats.init_end,
            formats.memory_baseline,
            formats.load_weight_begin,
            formats.load_weight_end,
            formats.mamba_cache,
            formats.kv_cache,
            formats.memory_pool_end,
            formats.capture_begin,
            formats.capture_end,
            formats.scheduler_ready,
            formats.ready,
            *(fmt for _, fmt in formats.other_phases),
        ):
            if fmt is not None:
                markers.add(fmt.marker)
    # A marker that contains another adds nothing: the shorter one already lets the line through.
    kept = {m for m in markers if not any(other != m and other in m for other in markers)}
    return tuple(sorted(marker.encode() for marker in kept))


# Texts a line must contain to be worth handing to the parser (startup figures, readiness,
# serving statistics), for readers that prefilter lines in bulk (`fleet diagnose`).
SUMMARY_MARKERS: tuple[bytes, ...] = _summary_markers()


class _Stamp(TypedDict):
    line_no: int
    timestamp: datetime | None
    rank: str | None


@dataclass(frozen=True, kw_only=True)
class _Event:
    line_no: int
    timestamp: datetime | None
    rank: str | None  # the rank prefix as logged, e.g. "TP0" or "DP0 TP1"; None on tp=1 / bare lines


@dataclass(frozen=True, kw_only=True)
class WeightsLoaded(_Event):
    avail_mem_gb: float | None
    mem_usage_gb: float | None
    elapsed_s: float | None  # absent before v0.5.x logged it
    model_class: str | None


@dataclass(frozen=True, kw_only=True)
class MambaCacheAllocated(_Event):
    max_mamba_cache_size: int
    conv_state_gb: float
    ssm_state_gb: float
    intermediate_ssm_state_gb: float | None  # only with speculative decoding
    intermediate_conv_window_gb: float | None


@dataclass(frozen=True, kw_only=True)
class KVCacheAllocated(_Event):
    dtype: str | None  # older versions do not log the dtype
    tokens: int
    k_gb: float | None  # MHA pools log K and V ...
    v_gb: float | None
    kv_gb: float | None  # ... MLA pools log one KV size


@dataclass(frozen=True, kw_only=True)
class SchedulerReady(_Event):
    max_total_num_tokens: int
    chunked_prefill_size: int | None
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    available_gpu_mem_gb: float | None


@dataclass(frozen=True, kw_only=True)
class ServerReady(_Event):
    pass


@dataclass(frozen=True, kw_only=True)
class StartupPhase(_Event):
    phase: StartupPhaseName
    avail_mem_gb: float | None


@dataclass(frozen=True, kw_only=True)
class ServerArgsLogged(_Event):
    """`server_args=ServerArgs(...)` (0.5.12) or `server_args={...}` (0.5.23): the first line of every
    server start. Values are Python reprs, as logged."""

    args: dict[str, str]

    def number(self, name: str) -> float | None:
        try:
            return float(self.args[name])
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True, kw_only=True)
class PrefillBatch(_Event):
    new_seq: int
    new_token: int
    cached_token: int
    token_usage: float | None  # "full token usage" on hybrid models
    mamba_usage: float | None
    running_req: int
    queue_req: int
    pending_token: int | None  # not logged by v0.5.10
    cuda_graph: bool | None
    input_throughput: float | None


@dataclass(frozen=True, kw_only=True)
class DecodeBatch(_Event):
    running_req: int
    tokens: int | None  # "#token" on plain models ...
    full_tokens: int | None  # ... "#full token" on hybrid models
    token_usage: float | None  # "full token usage" on hybrid models
    mamba_num: int | None
    mamba_usage: float | None
    accept_len: float | None  # speculative decoding only
    accept_rate: float | None
    cuda_graph: bool | None
    gen_throughput: float
    queue_req: int


@dataclass(frozen=True, kw_only=True)
class DDTreeMetrics(_Event):
    bs: int
    budget: int
    avg_actual_nodes: float
    avg_accepted_drafts: float
    avg_commit_len: float
    avg_accepted_depth: float


@dataclass(frozen=True, kw_only=True)
class Other(_Event):
    text: str


LogEvent = Union[
    WeightsLoaded,
    MambaCacheAllocated,
    KVCacheAllocated,
    SchedulerReady,
    ServerReady,
    StartupPhase,
    ServerArgsLogged,
    PrefillBatch,
    DecodeBatch,
    DDTreeMetrics,
    Other,
]


@dataclass(frozen=True)
class LinePrefix:
    timestamp: datetime | None
    rank: str | None
    message: str


def clean_line(text: str) -> str:
    """Remove ANSI codes and line endings; of a line redrawn with bare CRs keep what shows last."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    text = text.rstrip("\r\n")
    if "\r" in text:
        # Progress bars redraw with bare CRs: keep what a terminal would show last.
        text = next((part for part in reversed(text.split("\r")) if part.strip()), "")
    return text


def strip_prefix(text: str) -> LinePrefix:
    """Clean the line (`clean_line`), remove the wrappers of a pasted or captured log (quote marks,
    CI console and docker compose prefixes), then a journald prefix and SGLang's `[time rank]` prefix."""
    text = clean_line(text)
    while wrapper := _WRAPPER_RE.match(text):
        text = text[wrapper.end() :]
    timestamp: datetime | None = None
    journald = _JOURNALD_RE.match(text)
    if journald:
        if journald.group("iso"):
            timestamp = datetime.fromisoformat(journald.group("iso"))
        text = text[journald.end() :]
    rank: str | None = None
    sglang = _SGLANG_PREFIX_RE.match(text)
    if sglang:
        stamp = sglang.group("ts")
        if sglang.group("ms"):
            stamp += "." + sglang.group("ms").ljust(3, "0")
        timestamp = datetime.fromisoformat(stamp)
        rank = sglang.group("rank").strip() or None
        text = text[sglang.end() :]
    return LinePrefix(timestamp, rank, text)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _count(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _flag(value: str | None) -> bool | None:
    return {"True": True, "False": False}.get(value or "")


def _serving_fields(message: str, head_end: int) -> dict[str, str]:
    """`key: value, key: value, ` after the "Prefill batch, " / "Decode batch, " head."""
    fields: dict[str, str] = {}
    for part in message[head_end:].split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            fields[key.strip()] = value.strip().rstrip(",")
    return fields


def _split_server_args(body: str, shape: ServerArgsShape) -> dict[str, str]:
    """Split the inside of `ServerArgs(a=1, b='x, y', c=[1, 2])` or `{'a': 1, 'b': {'c': 2}}` at
    top-level commas into names and value reprs."""
    args: dict[str, str] = {}

    def add(item: str) -> None:
        key, sep, value = item.strip().partition(shape.separator)
        if sep:
            if shape.quoted_names and len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
                key = key[1:-1]
            args[key] = value.strip()

    depth = 0
    quote = ""
    start = 0
    for index, char in enumerate(body):
        if quote:
            if char == quote and body[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            add(body[start:index])
            start = index + 1
    add(body[start:])
    return args


def _parse_server_args(message: str, base: _Stamp) -> ServerArgsLogged | None:
    rendered = message[len(_SERVER_ARGS) :].rstrip()
    for shape in _SERVER_ARGS_SHAPES:
        if rendered.startswith(shape.opening):
            # A line cut short (journald's LineMax, a pasted excerpt) still starts a server: keep the
            # arguments it has, the last one possibly cut.
            end = len(rendered) - len(shape.closing) if rendered.endswith(shape.closing) else len(rendered)
            return ServerArgsLogged(**base, args=_split_server_args(rendered[len(shape.opening) : end], shape))
    return None


def _parse_serving(kind: str, message: str, head_end: int, base: _Stamp) -> LogEvent | None:
    fields = _serving_fields(message, head_end)
    usage = fields.get("token usage", fields.get("full token usage"))
    graph = fields.get("cuda graph")
    if kind == "Prefill":
        new_seq = _count(fields.get("#new-seq"))
        new_token = _count(fields.get("#new-token"))
        running = _count(fields.get("#running-req"))
        queue = _count(fields.get("#queue-req"))
        if new_seq is None or new_token is None or running is None or queue is None:
            return None
        return PrefillBatch(
            **base,
            new_seq=new_seq,
            new_token=new_token,
            cached_token=_count(fields.get("#cached-token")) or 0,
            token_usage=_number(usage),
            mamba_usage=_number(fields.get("mamba usage")),
            running_req=running,
            queue_req=queue,
            pending_token=_count(fields.get("#pending-token")),
            cuda_graph=_flag(graph),
            input_throughput=_number(fields.get("input throughput (token/s)")),
        )
    running = _count(fields.get("#running-req"))
    queue = _count(fields.get("#queue-req"))
    throughput = _number(fields.get("gen throughput (token/s)"))
    if running is None or queue is None or throughput is None:
        return None
    return DecodeBatch(
        **base,
        running_req=running,
        tokens=_count(fields.get("#token")),
        full_tokens=_count(fields.get("#full token")),
        token_usage=_number(usage),
        mamba_num=_count(fields.get("mamba num")),
        mamba_usage=_number(fields.get("mamba usage")),
        accept_len=_number(fields.get("accept len")),
        accept_rate=_number(fields.get("accept rate")),
        cuda_graph=_flag(graph),
        gen_throughput=throughput,
        queue_req=queue,
    )


def _parse_message(message: str, base: _Stamp) -> LogEvent | None:
    serving = _SERVING_RE.match(message)
    if serving:
        return _parse_serving(serving.group(1), message, serving.end(), base)
    if message.startswith("Load weight end"):
        figures = dict(_GB_FIELD_RE.findall(message))
        model_class = re.search(r"type=(\w+)", message)
        return WeightsLoaded(
            **base,
            avail_mem_gb=_number(figures.get("avail mem")),
            mem_usage_gb=_number(figures.get("mem usage")),
            elapsed_s=_number(figures.get("elapsed")),
            model_class=model_class.group(1) if model_class else None,
        )
    if message.startswith("KV Cache is allocated"):
        kv = _KV_RE.match(message)
        if not kv:
            return None
        return KVCacheAllocated(
            **base,
            dtype=kv.group("dtype"),
            tokens=int(kv.group("tokens")),
            k_gb=_number(kv.group("k")),
            v_gb=_number(kv.group("v")),
            kv_gb=_number(kv.group("kv")),
        )
    if message.startswith("Mamba Cache is allocated"):
        mamba = _MAMBA_RE.search(message)
        if not mamba:
            return None
        return MambaCacheAllocated(
            **base,
            max_mamba_cache_size=int(mamba.group("size")),
            conv_state_gb=float(mamba.group("conv")),
            ssm_state_gb=float(mamba.group("ssm")),
            intermediate_ssm_state_gb=_number(mamba.group("issm")),
            intermediate_conv_window_gb=_number(mamba.group("iconv")),
        )
    if message.startswith("max_total_num_tokens="):
        sched = _SCHEDULER_RE.match(message)
        if not sched:
            return None
        return SchedulerReady(
            **base,
            max_total_num_tokens=int(sched.group("max_total")),
            chunked_prefill_size=_count(sched.group("chunked")),
            max_prefill_tokens=int(sched.group("max_prefill")),
            max_running_requests=int(sched.group("max_running")),
            context_len=int(sched.group("context_len")),
            available_gpu_mem_gb=_number(sched.group("avail")),
        )
    if READY_TEXT in message:
        return ServerReady(**base)
    if message.startswith(_SERVER_ARGS):
        return _parse_server_args(message, base)
    if message.startswith(_DDTREE_HEAD):
        values = dict(_KEY_EQ_NUMBER_RE.findall(message))
        try:
            return DDTreeMetrics(
                **base,
                bs=int(values["bs"]),
                budget=int(values["budget"]),
                avg_actual_nodes=float(values["avg_actual_nodes"]),
                avg_accepted_drafts=float(values["avg_accepted_drafts"]),
                avg_commit_len=float(values["avg_commit_len"]),
                avg_accepted_depth=float(values["avg_accepted_depth"]),
            )
        except KeyError:
            return None
    if message.startswith(_PHASE_INITIALS):
        for pattern, phase in _PHASES:
            found = pattern.match(message)
            if found:
                avail = re.search(rf"avail mem=({_FLOAT})", message)
                phase = _capture_phase(phase, found.groupdict().get("capture_name"))
                return StartupPhase(**base, phase=phase, avail_mem_gb=float(avail.group(1)) if avail else None)
    return None


def parse_line(text: str, line_no: int = 0) -> LogEvent | None:
    """One log line -> a typed event; `Other` for lines of no known shape; None for blank lines."""
    prefix = strip_prefix(text)
    if not prefix.message.strip():
        return None
    base = _Stamp(line_no=line_no, timestamp=prefix.timestamp, rank=prefix.rank)
    event = _parse_message(prefix.message, base)
    return event if event is not None else Other(**base, text=prefix.message)


@dataclass
class LogSummary:
    """What one server start logged: startup figures, readiness, the latest serving statistics.

    A log that holds several starts (a journald dump across restarts) summarises the last one;
    `starts` counts them.
    """

    lines: int = 0
    starts: int = 0
    server_args: ServerArgsLogged | None = None
    weights_loaded: WeightsLoaded | None = None
    mamba_cache: MambaCacheAllocated | None = None
    kv_cache: KVCacheAllocated | None = None  # the first pool logged: the target model's
    draft_kv_cache: KVCacheAllocated | None = None  # a second pool from the same rank: the draft's
    scheduler: SchedulerReady | None = None
    last_phase: StartupPhase | None = None
    ready: ServerReady | None = None
    decode_lines: int = 0
    prefill_lines: int = 0
    last_decode: DecodeBatch | None = None
    last_prefill: PrefillBatch | None = None
    last_ddtree: DDTreeMetrics | None = None
    _kv_ranks: set[str | None] = field(default_factory=set, repr=False)

    @property
    def is_ready(self) -> bool:
        return self.ready is not None

    def add(self, event: LogEvent) -> None:
        """Fold one event in. Events must arrive in file order."""
        if isinstance(event, DecodeBatch):
            self.decode_lines += 1
            self.last_decode = event
        elif isinstance(event, PrefillBatch):
            self.prefill_lines += 1
            self.last_prefill = event
        elif isinstance(event, DDTreeMetrics):
            self.last_ddtree = event
        elif isinstance(event, ServerArgsLogged):
            # A new start: figures of the previous one no longer describe the server.
            lines, starts = self.lines, self.starts
            self.__init__()  # type: ignore[misc]
            self.lines, self.starts = lines, starts + 1
            self.server_args = event
        elif isinstance(event, WeightsLoaded):
            self.weights_loaded = self.weights_loaded or event
        elif isinstance(event, MambaCacheAllocated):
            self.mamba_cache = self.mamba_cache or event
        elif isinstance(event, KVCacheAllocated):
            if self.kv_cache is None:
                self.kv_cache = event
            elif event.rank in self._kv_ranks and self.draft_kv_cache is None:
                self.draft_kv_cache = event
            self._kv_ranks.add(event.rank)
        elif isinstance(event, SchedulerReady):
            self.scheduler = event
        elif isinstance(event, StartupPhase):
            self.last_phase = event
        elif isinstance(event, ServerReady):
            self.ready = event

    def set_latest(self, event: DecodeBatch | PrefillBatch | DDTreeMetrics) -> None:
        """Record the latest serving statistics without counting the line (see `skip_serving`)."""
        if isinstance(event, DecodeBatch):
            self.last_decode = event
        elif isinstance(event, PrefillBatch):
            self.last_prefill = event
        else:
            self.last_ddtree = event

    def skip_serving(self, decode_lines: int, prefill_lines: int) -> None:
        """Count serving lines that were not parsed (the classifier skips them in bulk)."""
        self.decode_lines += decode_lines
        self.prefill_lines += prefill_lines


def parse_log(lines: Iterable[str]) -> LogSummary:
    """Parse a whole log (any iterable of lines, e.g. an open text file)."""
    summary = LogSummary()
    line_no = 0
    for line_no, text in enumerate(lines, start=1):
        event = parse_line(text, line_no)
        if event is not None and not isinstance(event, Other):
            summary.add(event)
    summary.lines = line_no
    return summary
