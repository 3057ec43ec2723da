"""`/metrics` in Prometheus text format with SGLang's `sglang:` names and labels
(0.5.23 `sglang/srt/observability/metrics_collector.py`; tests/integration/test_sim_conformance.py
checks every name, type and label set against that file). Pure: counters in, text out.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0, 800.0)


@dataclass
class Histogram:
    """Cumulative-bucket histogram, observed as values arrive (nothing is kept per value)."""

    buckets: Sequence[float]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += times
        self.total += value * times
        self.count += times


@dataclass
class StreamTally:
    """What the streamed requests (`stream: true`) contributed to the engine's totals: 0.5.23 splits the
    tokenizer's request counters and the TTFT and E2E histograms by `is_streaming` (metrics_collector.py:1856-2073)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    num_requests: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))


def histogram_series(name: str, labels: str, histogram: Histogram, number: Callable[[float], str]) -> list[str]:
    """One labelled series of a histogram in Prometheus text: cumulative buckets, +Inf, count and
    sum (the exposition format; `number` writes a value as the engine's client library does)."""
    lines, cumulative = [], 0
    for bound, count in zip(histogram.buckets, histogram.counts):
        cumulative += count
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {number(cumulative)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {number(histogram.count)}')
    lines.append(f"{name}_count{{{labels}}} {number(histogram.count)}")
    lines.append(f"{name}_sum{{{labels}}} {number(histogram.total)}")
    return lines


def _minus(total: Histogram, part: Histogram) -> Histogram:
    rest = Histogram(total.buckets)
    rest.counts = [max(a - b, 0) for a, b in zip(total.counts, part.counts)]
    rest.total = max(total.total - part.total, 0.0)
    rest.count = max(total.count - part.count, 0)
    return rest


@dataclass(frozen=True)
class MetricsSnapshot:
    model_name: str
    num_running_reqs: int
    num_queue_reqs: int
    num_used_tokens: int
    token_usage: float
    mamba_usage: float
    max_total_num_tokens: int
    context_len: int
    gen_throughput: float
    cache_hit_rate: float
    spec_accept_length: float | None
    spec_accept_rate: float | None
    spec_num_draft_tokens: int | None
    spec_verify_calls: int
    prompt_tokens: int
    generation_tokens: int
    num_requests: int
    num_aborted_requests: int
    is_cuda_graph: bool
    engine_startup_time: float
    engine_load_weights_time: float
    ttft: Histogram
    itl: Histogram
    e2e: Histogram
    since_0523: bool = True  # 0.5.23's names and labels; older releases keep the sim's earlier ones
    streamed: StreamTally | None = None


def _fmt(value: float) -> str:
    return repr(float(value))


def render(snapshot: MetricsSnapshot) -> str:
    scheduler = f'engine_type="unified",model_name="{snapshot.model_name}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    tokenizer = f'engine_type="unified",model_name="{snapshot.model_name}"'
    lines: list[str] = []

    def gauge(name: str, help_text: str, value: float, labels: str = scheduler) -> None:
        lines.extend((f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge", f"sglang:{name}{{{labels}}} {_fmt(value)}"))

    def counter(name: str, help_text: str, value: float, labels: str = tokenizer) -> None:
        lines.extend(
            (
                f"# HELP sglang:{name}_total {help_text}",
                f"# TYPE sglang:{name}_total counter",
                f"sglang:{name}_total{{{labels}}} {_fmt(value)}",
            )
        )

    def histogram(name: str, help_text: str, values: Histogram, split: Histogram | None = None) -> None:
        """With `split` (the streamed part), one series per is_streaming value."""
        lines.extend((f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} histogram"))
        series = [(tokenizer, values)] if split is None else [(f'{tokenizer},is_streaming="false"', _minus(values, split)), (f'{tokenizer},is_streaming="true"', split)]
        for labels, part in series:
            lines.extend(histogram_series(f"sglang:{name}", labels, part, _fmt))

    if snapshot.since_0523:
        _render_0523(snapshot, lines, gauge, counter, histogram, tokenizer)
        return "\n".join(lines) + "\n"

    _scheduler_gauges(snapshot, gauge)
    if snapshot.spec_num_draft_tokens is not None:
        counter("spec_verify_calls", "Total number of speculative verify forward calls.", snapshot.spec_verify_calls, scheduler)
    gauge("engine_startup_time", "The time taken for the engine to start up.", snapshot.engine_startup_time)
    gauge("engine_load_weights_time", "The time taken for the engine to load weights.", snapshot.engine_load_weights_time)
    counter("prompt_tokens", "Number of prefill tokens processed.", snapshot.prompt_tokens)
    counter("generation_tokens", "Number of generation tokens processed.", snapshot.generation_tokens)
    counter("num_requests", "Number of requests processed.", snapshot.num_requests)
    counter("num_aborted_requests", "Number of requests aborted.", snapshot.num_aborted_requests)
    histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", snapshot.ttft)
    histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", snapshot.itl)
    histogram("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", snapshot.e2e)
    return "\n".join(lines) + "\n"


def _scheduler_gauges(snapshot: MetricsSnapshot, gauge: Any) -> None:
    """The scheduler's gauges, the same in every release the sim plays (speculative ones with a draft)."""
    gauge("num_running_reqs", "The number of running requests.", snapshot.num_running_reqs)
    gauge("num_used_tokens", "The number of used tokens.", snapshot.num_used_tokens)
    gauge("token_usage", "The token usage.", snapshot.token_usage)
    gauge("full_token_usage", "The token usage for full attention layers.", snapshot.token_usage)
    gauge("mamba_usage", "The token usage for Mamba layers.", snapshot.mamba_usage)
    gauge("gen_throughput", "The generation throughput (token/s).", snapshot.gen_throughput)
    gauge("num_queue_reqs", "The number of requests in the waiting queue.", snapshot.num_queue_reqs)
    gauge("cache_hit_rate", "The prefix cache hit rate.", snapshot.cache_hit_rate)
    gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", snapshot.max_total_num_tokens)
    gauge("context_len", "The context length of the model.", snapshot.context_len)
    gauge("is_cuda_graph", "Whether the batch is using CUDA graph.", float(snapshot.is_cuda_graph))
    if snapshot.spec_num_draft_tokens is not None:
        gauge("spec_accept_length", "The average acceptance length of speculative decoding.", snapshot.spec_accept_length or 0.0)
        gauge("spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).", snapshot.spec_accept_rate or 0.0)
        gauge("spec_num_draft_tokens", "The number of draft tokens per speculative step.", snapshot.spec_num_draft_tokens)


def _render_0523(snapshot: MetricsSnapshot, lines: list[str], gauge: Any, counter: Any, histogram: Any, tokenizer: str) -> None:
    """0.5.23's families (metrics_collector.py: SchedulerMetricsCollector :334, TokenizerMetricsCollector :1822)."""
    streamed = snapshot.streamed or StreamTally()
    _scheduler_gauges(snapshot, gauge)
    if snapshot.spec_num_draft_tokens is not None:
        counter("spec_verify_calls", "Number of speculative decoding verification calls.", snapshot.spec_verify_calls)  # tokenizer labels (:1866)
    # :1842 startup_time_seconds{phase}: replaces the older engine_startup_time / engine_load_weights_time.
    lines.extend(("# HELP sglang:startup_time_seconds Engine startup duration by phase in seconds.", "# TYPE sglang:startup_time_seconds gauge"))
    for phase, seconds in (
        ("load_weight", snapshot.engine_load_weights_time),
        ("kv_cache_allocation", 0.0),
        ("scheduler_e2e", snapshot.engine_startup_time),
        ("tokenizer_e2e", snapshot.engine_startup_time),
    ):
        lines.append(f'sglang:startup_time_seconds{{{tokenizer},phase="{phase}"}} {_fmt(seconds)}')

    def split_counter(name: str, help_text: str, total: float, streamed_part: float) -> None:
        lines.extend((f"# HELP sglang:{name}_total {help_text}", f"# TYPE sglang:{name}_total counter"))
        lines.append(f'sglang:{name}_total{{{tokenizer},is_streaming="false"}} {_fmt(max(total - streamed_part, 0))}')
        lines.append(f'sglang:{name}_total{{{tokenizer},is_streaming="true"}} {_fmt(streamed_part)}')

    split_counter("prompt_tokens", "Number of prefill tokens processed.", snapshot.prompt_tokens, streamed.prompt_tokens)
    split_counter("generation_tokens", "Number of generation tokens processed.", snapshot.generation_tokens, streamed.generation_tokens)
    split_counter("num_requests", "Number of requests processed.", snapshot.num_requests, streamed.num_requests)
    counter("num_aborted_requests", "Number of requests aborted.", snapshot.num_aborted_requests)
    histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", snapshot.ttft, streamed.ttft)
    histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", snapshot.itl)
    histogram("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", snapshot.e2e, streamed.e2e)
