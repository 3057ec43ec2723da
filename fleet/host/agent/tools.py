"""The field's own load generators as a workload's client (issue 22): `sglang.bench_serving`,
`vllm bench serve`, AIPerf and GuideLLM, run on the host by an interpreter that has them, with the
load fleet's own client would send, and their own output files read into fleet's request outcomes.
Standard library only: the agent runs the tools (fleet.host.agent.kinds.tool), the controller's
preflight asks whether an interpreter can import them, and tests/integration/test_load_generators.py
runs them beside fleet's client; all three take the command lines and readers from here.

A reader turns the tool's per-request records into `RequestOutcome`s (durations in wall seconds,
as fleet's client measures them), so that the result's figures are made by the same code and in
the same units as any other run's (fleet.host.agent.results), and keeps the tool's own headline
figures beside them (`ToolOutput.stated`), as the tool printed them. The fields read are those the
tool's own source writes, cited with file and line of the versions tests/requirements-loadgen.txt
pins (sglang 0.5.23, vllm 0.33.0, AIPerf 0.13.0, GuideLLM 0.8.1); the tests read real output files
of these versions (tests/fixtures/loadgen).

A dataset workload's samples go to each tool in the file format its own loader reads (its
`inputs`), each prompt as given with its own output length, in fleet's order; a sample a tool
cannot send so is refused with the reason (`dataset_refusal`), and records a tool writes as
requests complete are matched back to the samples by what it recorded of each (in_sample_order).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from fleet.host.agent.client import RequestOutcome


@dataclass(frozen=True)
class ToolLoad:
    """What a tool is asked to send: a `random` workload's lengths, or a `dataset` workload's
    requests as fleet's client would send them (`dataset`), and the arrivals."""

    input_tokens: int  # a random workload's; a dataset's prompts are its own
    output_tokens: int
    requests: int
    seed: int
    # Requests per second in wall time (inf: all due at once); None: one at a time (a workload without `load`).
    rate: float | None = None
    burstiness: float = 1.0  # gamma shape of the gaps; 1 is a Poisson process
    max_in_flight: int | None = None
    warmup_requests: int = 0
    # A dataset workload's requests, in the order fleet's client sends them: (prompt text, output tokens).
    dataset: tuple[tuple[str, int], ...] = ()

    @property
    def concurrency(self) -> int | None:
        """The cap on requests in flight: 1 for one at a time."""
        return 1 if self.rate is None else self.max_in_flight


@dataclass(frozen=True)
class ToolTarget:
    """The server the tool measures, as fleet's client reaches it."""

    host: str
    port: int
    model: str  # the served model's name (/v1/models)
    api: str  # fleet.host.engines.base.Engine.client_api: "generate" (SGLang's /generate) or "completions"
    tokenizer: str | None = None  # a tokenizer folder on the host; None: the tool loads the model's own

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class ToolOutput:
    """A tool's run as fleet reads it: its requests, the wall seconds it measured them over (its own
    benchmark duration, from before its first request to after its last), and its own headline
    figures (output tok/s, TTFT p50 in seconds) as it stated them."""

    requests: list[RequestOutcome]
    wall_s: float
    stated: dict[str, float]
    # Each request's key as the tool recorded it (the key `Tool.sample_key` gives fleet's samples;
    # None where the tool kept none for that request); None: the tool writes its requests in the
    # order it was given them.
    keys: list[str | None] | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    module: str  # what the interpreter must import to run it (the preflight's check)
    # Its argv after the interpreter: writes its output under `out` (a folder of its own).
    argv: Callable[[ToolTarget, ToolLoad, str], list[str]]
    read: Callable[[Path, float], ToolOutput]  # its output folder, the epoch second it was started
    # Files it reads, written into its output folder before it starts: name -> text.
    inputs: Callable[[ToolTarget, ToolLoad, str], dict[str, str]] = lambda target, load, out: {}
    gamma_arrivals: bool = True  # can it draw gamma gaps (burstiness other than 1)?
    warmup: bool = True  # can it send warm-up requests that no figure counts?
    # Why it cannot send these samples of a dataset workload (prompt text, output tokens) exactly as
    # fleet's client does, each prompt's text as given with its own output length; None: it can (its
    # `inputs` write them). The plan asks it before anything starts, the agent again before the tool runs.
    dataset_refusal: Callable[[Sequence[tuple[str, int]]], str | None] = lambda samples: None
    # The key its output records for fleet's sample i (prompt, output tokens); None: it keeps none,
    # and writes its requests in the order of its input (ToolOutput.keys is None).
    sample_key: Callable[[int, str, int], str] | None = None


def in_sample_order(tool: Tool, output: ToolOutput, load: ToolLoad) -> list[RequestOutcome]:
    """A dataset run's requests in the order of `load.dataset` (fleet's samples), so that each
    gets its own sample's tags: by the key the tool recorded where it keeps one (AIPerf and GuideLLM
    write records as requests complete), else as the tool wrote them. Of identical samples (the same
    key), the one sent first takes the first. A request without a key (GuideLLM keeps no request body
    for a request that got no response) takes the first sample left: it failed, so only its tags
    depend on this. A key that is none of the samples' is an error: the tool sent another request."""
    planned = len(load.dataset)
    if len(output.requests) != planned:
        raise ValueError(f"{tool.title} recorded {len(output.requests)} requests of the {planned} it was given")
    if output.keys is None or tool.sample_key is None:
        return output.requests
    free: dict[str, list[int]] = {}
    for index, (prompt, tokens) in enumerate(load.dataset):
        free.setdefault(tool.sample_key(index, prompt, tokens), []).append(index)
    placed: dict[int, RequestOutcome] = {}
    unkeyed = []
    for key, request in sorted(zip(output.keys, output.requests), key=lambda pair: pair[1].started_at):
        if key is None:
            unkeyed.append(request)
        elif free.get(key):
            placed[free[key].pop(0)] = request
        else:
            raise ValueError(f"{tool.title} recorded a request that is none of fleet's samples (or one sample twice): {key[:200]!r}")
    left = sorted(index for indices in free.values() for index in indices)
    placed.update(zip(left, unkeyed))
    return [placed[index] for index in range(planned)]


def _empty_prompt(samples: Sequence[tuple[str, int]], why: str) -> str | None:
    empty = [i for i, (prompt, _) in enumerate(samples) if not prompt]
    return f"request {empty[0]} of the sample has an empty prompt, which {why}" if empty else None


def _bad(path: Path, field: str, expected: str, found: object) -> ValueError:
    return ValueError(f"{path}: `{field}` should be {expected}, found {str(found)[:120]!r}")


def _number(data: dict[str, Any], key: str, path: Path, where: str = "") -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise _bad(path, where + key, "a finite number >= 0", value)
    return float(value)


def _list(data: dict[str, Any], key: str, path: Path, length: int | None = None) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise _bad(path, key, f"a list of {length} entries" if length is not None else "a list", value)
    return value


def _rate_flag(load: ToolLoad) -> str:
    return "inf" if load.rate is None else repr(load.rate)


# --- sglang.bench_serving (sglang 0.5.23: sglang/benchmark/serving.py) -------------------------


def bench_serving_argv(target: ToolTarget, load: ToolLoad, out: str) -> list[str]:
    """`-m sglang.bench_serving`. A random workload: the `random-ids` dataset, token ids of exactly
    `input_tokens` sent as input_ids (--tokenize-prompt), as fleet's `random` sends them;
    --random-range-ratio 1 makes both lengths exact. A dataset workload: its `custom` dataset
    (bench_serving_inputs), every request the one output length --sharegpt-output-len gives
    (custom.py:34, :125-128). Either way it asks for the lengths with ignore_eos (serving.py:700-709
    for /generate, :315-317 for /v1/completions). Its gaps are exponential only (serving.py:1126-1127):
    it has no burstiness."""
    if load.dataset:
        requests = ["--dataset-name", "custom", "--dataset-path", f"{out}/{BENCH_SERVING_DATASET}", "--sharegpt-output-len", str(load.dataset[0][1])]
    else:
        requests = ["--dataset-name", "random-ids", "--tokenize-prompt", "--random-input-len", str(load.input_tokens), "--random-output-len", str(load.output_tokens), "--random-range-ratio", "1"]
    args = [
        "-m", "sglang.bench_serving", "--backend", "sglang" if target.api == "generate" else "vllm",
        "--host", target.host, "--port", str(target.port), "--model", target.model, *requests, "--num-prompts", str(load.requests),
        "--request-rate", _rate_flag(load), "--warmup-requests", str(load.warmup_requests),
        "--seed", str(load.seed), "--disable-tqdm", "--output-file", f"{out}/result.jsonl", "--output-details",
    ]  # fmt: skip
    if load.concurrency is not None:
        args += ["--max-concurrency", str(load.concurrency)]
    return args + (["--tokenizer", target.tokenizer] if target.tokenizer else [])


BENCH_SERVING_DATASET = "dataset.jsonl"


def bench_serving_refusal(samples: Sequence[tuple[str, int]]) -> str | None:
    """sglang 0.5.23's `custom` dataset (sglang/benchmark/datasets/custom.py) takes each request's
    output length from its tokenizer's count of the reply turn, or one fixed length for all
    (--sharegpt-output-len, :125-128), which must be at least 4 (:66-67): it sends fleet's samples
    exactly only where they all have one output length of at least 4. (Its `openai` dataset sends
    chat messages to /v1/chat/completions, a request other than fleet's.)"""
    lengths = sorted({tokens for _, tokens in samples})
    if len(lengths) > 1:
        return (
            "sglang.bench_serving's `custom` dataset (sglang 0.5.23: sglang/benchmark/datasets/custom.py:125-128) takes each output length from"
            f" its tokenizer's count of a reply turn or one fixed length for all, and this sample has {len(lengths)} ({lengths[0]} to {lengths[-1]} tokens)"
        )
    if lengths and lengths[0] < 4:
        return f"sglang.bench_serving's fixed output length must be at least 4 (sglang/benchmark/datasets/custom.py:66-67), and this sample's is {lengths[0]}"
    return None


def bench_serving_inputs(target: ToolTarget, load: ToolLoad, out: str) -> dict[str, str]:
    """A dataset workload's requests as bench_serving's `custom` dataset: one JSON line each,
    `conversations` [prompt, reply] (custom.py:74-90, the `content` of each; the reply is not read
    with a fixed output length, :125-128). It sends each prompt as written (no --prompt-suffix, no
    --apply-chat-template: :104-120), as `text` to /generate (serving.py:707) or `prompt` to
    /v1/completions (:305), with max_new_tokens / max_tokens the fixed length (:702, :307).

    It shuffles the lines (custom.py:92) with Python's `random`, seeded with --seed just before
    (serving.py:2055; nothing between there and the dataset, :2057-2187, draws from `random`: URLs,
    the model list, check_chat_template and get_tokenizer load the tokenizer), so the file holds the
    samples where that shuffle takes each to its place in fleet's order: bench_serving sends them
    in fleet's order and writes its per-request lists in that order (gathered in order, serving.py:1619;
    written :1944-1951). It
    drops a prompt of under 2 tokens in its tokenizer's count (custom.py:129-131): the run then
    fails, with fewer requests recorded than given (in_sample_order)."""
    if not load.dataset:
        return {}
    places = list(range(len(load.dataset)))
    random.Random(load.seed).shuffle(places)  # random.seed(s); random.shuffle(x) draws exactly these
    lines = [""] * len(places)
    for position, place in enumerate(places):  # the shuffle puts line `place` at `position`
        prompt, _ = load.dataset[position]
        lines[place] = json.dumps({"conversations": [{"content": prompt}, {"content": ""}]}) + "\n"
    return {BENCH_SERVING_DATASET: "".join(lines)}


def bench_serving_read(out: Path, started_at: float) -> ToolOutput:
    """result.jsonl: serving.py:1961-1966 appends one JSON line per run, its summary (:1855-1907) and,
    with --output-details, its per-request lists (:1944-1951): `input_lens`, `output_lens`, `ttfts`
    (seconds), `itls` (per token: a chunk of k tokens adds k entries of gap/k, :793-797, as fleet's
    client spreads them), `errors` ("" for a success). It writes no request's start or latency: a
    request's end is its TTFT plus its ITLs (the latency is taken at the stream's last chunk,
    :799-804), its start the tool's. `duration` (:1869) is the benchmark's wall time (:1551-1665)."""
    path = out / "result.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise _bad(path, "(lines)", "one JSON line per run", "an empty file")
    row = json.loads(lines[-1])
    return _serving_style(path, row, started_at, latencies=None)


def _serving_style(path: Path, row: dict[str, Any], started_at: float, latencies: list[Any] | None, starts: list[Any] | None = None) -> ToolOutput:
    """The per-request lists bench_serving and vllm bench serve both write (vllm's is the original)."""
    if not isinstance(row, dict):
        raise _bad(path, "(line)", "a JSON object", row)
    errors = _list(row, "errors", path)
    count = len(errors)
    ttfts, itls, outputs, inputs = (_list(row, key, path, count) for key in ("ttfts", "itls", "output_lens", "input_lens"))
    first = min((float(s) for s in starts), default=0.0) if starts else 0.0
    requests = []
    for i in range(count):
        ok = not errors[i]
        gaps = [float(g) for g in itls[i]] if ok else []
        ttft = float(ttfts[i]) if ok else None
        e2e = (float(latencies[i]) if latencies is not None else (ttft or 0.0) + sum(gaps)) if ok else None
        requests.append(
            RequestOutcome(
                started_at=started_at + (float(starts[i]) - first if starts else 0.0), ok=ok, prompt_tokens=int(inputs[i]),
                output_tokens=int(outputs[i]) if ok else 0, ttft_s=ttft, e2e_s=e2e, itl_s=gaps,
                error_class=None if ok else "http_error", error_message=None if ok else str(errors[i])[:500],
            )
        )  # fmt: skip
    stated = {"output_tok_s": _number(row, "output_throughput", path), "ttft_p50_s": _number(row, "median_ttft_ms", path) / 1000}
    return ToolOutput(requests, _number(row, "duration", path), stated)


# --- vllm bench serve (vllm 0.33.0: vllm/benchmarks/serve.py) ----------------------------------


def vllm_bench_serve_argv(target: ToolTarget, load: ToolLoad, out: str) -> list[str]:
    """`vllm bench serve` (its console script's module) on the `random` dataset: --random-range-ratio 0
    makes both lengths exact (vllm/benchmarks/datasets/datasets.py:1900), --ignore-eos keeps the
    output at its length; /v1/completions (backend `vllm`). A dataset workload's requests go as its
    `custom` dataset (vllm_bench_serve_inputs)."""
    if load.dataset:
        requests = ["--dataset-name", "custom", "--dataset-path", f"{out}/{VLLM_DATASET}", "--custom-output-len", "-1", "--skip-chat-template", "--disable-shuffle", "--no-oversample"]
    else:
        requests = ["--dataset-name", "random", "--random-input-len", str(load.input_tokens), "--random-output-len", str(load.output_tokens), "--random-range-ratio", "0"]
    args = [
        "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm", "--base-url", target.url, "--model", target.model, *requests,
        "--ignore-eos", "--num-prompts", str(load.requests), "--request-rate", _rate_flag(load),
        "--burstiness", repr(load.burstiness), "--num-warmups", str(load.warmup_requests), "--seed", str(load.seed), "--disable-tqdm",
        "--save-result", "--save-detailed", "--result-dir", out, "--result-filename", "result.json",
    ]  # fmt: skip
    if load.concurrency is not None:
        args += ["--max-concurrency", str(load.concurrency)]
    return args + (["--tokenizer", target.tokenizer] if target.tokenizer else [])


def _reads_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


VLLM_DATASET = "dataset.jsonl"  # CustomDataset reads only a `.jsonl` path (datasets.py:2453-2469)


def vllm_bench_serve_refusal(samples: Sequence[tuple[str, int]]) -> str | None:
    """pandas infers a column's type (datasets.py:2454): prompts that all read as numbers become numbers ("007" -> 7)."""
    if samples and all(_reads_as_number(prompt) for prompt, _ in samples):
        return f"every prompt reads as a number, which vllm's custom dataset (pandas.read_json, datasets.py:2454) turns into one: it would not send them as given ({samples[0][0]!r})"
    return None


def vllm_bench_serve_inputs(target: ToolTarget, load: ToolLoad, out: str) -> dict[str, str]:
    """A dataset workload's requests as vllm's `custom` dataset (vllm/benchmarks/datasets/datasets.py,
    CustomDataset): one JSON line per request, `prompt` and `output_tokens` (:2425-2435), read with
    pandas (:2454) and kept in this order with --disable-shuffle (:2471-2473); each request's
    `output_tokens` is its length with --custom-output-len -1 (:2507-2516; the default 256 would
    override it), its prompt sent as written with --skip-chat-template (:2529-2534) as /v1/completions'
    `prompt` (lib/endpoint_request_func.py:230), with max_tokens the output length (:232) and
    ignore_eos (:153-154). Its tokenizer only counts the prompt's tokens (:2537)."""
    if not load.dataset:
        return {}
    return {VLLM_DATASET: "".join(json.dumps({"prompt": prompt, "output_tokens": output}, ensure_ascii=False) + "\n" for prompt, output in load.dataset)}


def vllm_bench_serve_read(out: Path, started_at: float) -> ToolOutput:
    """result.json: serve.py:1318-1338 with --save-detailed: the lists bench_serving writes (its fork)
    and each request's `latencies` and `start_times` (perf_counter seconds, :1333-1334); `itls` one
    entry per streamed chunk. `duration` (:1320) is the benchmark's wall time."""
    path = out / "result.json"
    row = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(row, dict):
        raise _bad(path, "(file)", "a JSON object", row)
    count = len(_list(row, "errors", path))
    return _serving_style(path, row, started_at, latencies=_list(row, "latencies", path, count), starts=_list(row, "start_times", path, count))


# --- AIPerf 0.13.0 ----------------------------------------------------------------------------


def aiperf_argv(target: ToolTarget, load: ToolLoad, out: str) -> list[str]:
    """`-m aiperf profile`, streamed from /v1/completions, outputs with ignore_eos: a random workload's
    synthetic prompts of exactly `input_tokens` (stddev 0) in the tokenizer's count and outputs of
    exactly `output_tokens`; a dataset workload's samples from its --input-file (aiperf_inputs), in
    the file's order (--dataset-sampling-strategy sequential). Open loop with --arrival-pattern
    poisson or gamma (--arrival-smoothness: vllm's burstiness)."""
    if load.dataset:
        requests = ["--input-file", f"{out}/{AIPERF_DATASET}", "--custom-dataset-type", "single_turn", "--dataset-sampling-strategy", "sequential"]
    else:
        requests = [
            "--synthetic-input-tokens-mean", str(load.input_tokens), "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(load.output_tokens), "--output-tokens-stddev", "0",
        ]  # fmt: skip
    args = [
        "-m", "aiperf", "profile", "--model", target.model, "--url", target.url, "--endpoint-type", "completions", "--streaming",
        *requests, "--extra-inputs", "ignore_eos:true",
        "--request-count", str(load.requests), "--random-seed", str(load.seed), "--artifact-dir", out,
        "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
    ]  # fmt: skip
    if load.rate is not None and not math.isinf(load.rate):  # everything due at once: a closed loop of --concurrency
        args += ["--request-rate", repr(load.rate)]
        args += ["--arrival-pattern", "poisson"] if load.burstiness == 1 else ["--arrival-pattern", "gamma", "--arrival-smoothness", repr(load.burstiness)]
    if load.concurrency is not None:
        args += ["--concurrency", str(load.concurrency)]
    if load.warmup_requests:
        args += ["--warmup-request-count", str(load.warmup_requests), "--warmup-concurrency", "1"]
    return args + (["--tokenizer", target.tokenizer] if target.tokenizer else [])


AIPERF_DATASET = "dataset.jsonl"


def aiperf_sample_key(index: int, prompt: str, tokens: int) -> str:
    """The session id fleet gives sample `index` (aiperf_inputs): AIPerf records it as the request's `conversation_id`."""
    return f"fleet-{index:06d}"


def aiperf_refusal(samples: Sequence[tuple[str, int]]) -> str | None:
    return _empty_prompt(samples, "AIPerf 0.13.0 leaves out of the request (aiperf/endpoints/openai_completions.py:37-39: `if content`), sending `prompt: []`")


def aiperf_inputs(target: ToolTarget, load: ToolLoad, out: str) -> dict[str, str]:
    """A dataset workload's requests as AIPerf 0.13.0's `single_turn` dataset
    (aiperf/dataset/loader/single_turn.py, the SingleTurn model in loader/models.py): one JSON
    object a line (read with orjson, base_loader.py:186-189), `text` sent as it is
    (loader/mixins.py:64-70), `output_length` its max_tokens (single_turn.py:142 ->
    endpoints/openai_completions.py:51-52; it overrides --output-tokens-mean, models.py:111-115),
    ignore_eos from --extra-inputs (:54-55). `session_id` (models.py:106-110) names each record: one
    conversation each (single_turn.py:100-104), in the file's order, which the sequential sampler
    walks (dataset/dataset_samplers.py:46-63), and the record of its request carries it as its
    `conversation_id`, by which fleet finds its sample (AIPerf writes records as requests complete).

    Warm-up requests come from the same sampler, before the profiling phase's (one sampler for
    both phases: timing/phase_orchestrator.py:186-209, :258-260): the file starts with them, as fleet's client
    sends them (the samples from the first, one at a time), so that the measured requests are the
    samples in fleet's order."""
    if not load.dataset:
        return {}
    warmup = [(f"fleet-warmup-{i:06d}", *load.dataset[i % len(load.dataset)]) for i in range(load.warmup_requests)]
    records = warmup + [(aiperf_sample_key(i, prompt, tokens), prompt, tokens) for i, (prompt, tokens) in enumerate(load.dataset)]
    return {AIPERF_DATASET: "".join(json.dumps({"session_id": key, "text": prompt, "output_length": tokens}) + "\n" for key, prompt, tokens in records)}


def _metric(record: dict[str, Any], name: str, unit: str, path: Path, where: str) -> Any:
    entry = record.get(name)
    if not isinstance(entry, dict) or entry.get("unit") != unit:
        raise _bad(path, f"{where}.{name}", f"an object with its value in {unit}", entry)
    return entry.get("value")


def aiperf_read(out: Path, started_at: float) -> ToolOutput:
    """profile_export.jsonl (aiperf/config/artifacts.py): one JSON record per request, `metadata`
    (`benchmark_phase`: warm-up records are left out; `request_start_ns` epoch nanoseconds;
    `conversation_id`, the key of a dataset's sample, aiperf_inputs) and
    `metrics`, each a value with its unit: `time_to_first_token` and `request_latency` (ms),
    `input_sequence_length` and `output_sequence_length` (tokens), `inter_chunk_latency` (ms, one
    per chunk after the first); a failed request has an `error`. profile_export_aiperf.json
    (artifacts.py:51): `benchmark_duration` (sec), `output_token_throughput` (tokens/sec, total
    output tokens over that duration) and `time_to_first_token` (ms) with its `p50`."""
    path = out / "profile_export.jsonl"
    requests = []
    keys: list[str | None] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        record = json.loads(line)
        meta, metrics = record.get("metadata") or {}, record.get("metrics") or {}
        if meta.get("benchmark_phase") != "profiling":
            continue
        keys.append(str(meta["conversation_id"]) if meta.get("conversation_id") is not None else None)
        where = f"line {n}.metrics"
        start = float(meta.get("request_start_ns") or 0) / 1e9 or started_at
        if record.get("error"):
            requests.append(RequestOutcome(started_at=start, error_class="http_error", error_message=json.dumps(record["error"])[:500]))
            continue
        chunks = _metric(metrics, "inter_chunk_latency", "ms", path, where) if "inter_chunk_latency" in metrics else []
        requests.append(
            RequestOutcome(
                started_at=start, ok=True, prompt_tokens=int(_metric(metrics, "input_sequence_length", "tokens", path, where)),
                output_tokens=int(_metric(metrics, "output_sequence_length", "tokens", path, where)),
                ttft_s=float(_metric(metrics, "time_to_first_token", "ms", path, where)) / 1000,
                e2e_s=float(_metric(metrics, "request_latency", "ms", path, where)) / 1000, itl_s=[float(c) / 1000 for c in chunks],
            )
        )  # fmt: skip
    summary_path = out / "profile_export_aiperf.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    duration = summary.get("benchmark_duration") or {}
    throughput = summary.get("output_token_throughput") or {}
    ttft = summary.get("time_to_first_token") or {}
    if duration.get("unit") != "sec" or throughput.get("unit") != "tokens/sec" or ttft.get("unit") != "ms":
        raise _bad(summary_path, "benchmark_duration/output_token_throughput/time_to_first_token", "units sec, tokens/sec and ms", (duration, throughput, ttft))
    stated = {"output_tok_s": _number(throughput, "avg", summary_path, "output_token_throughput."), "ttft_p50_s": _number(ttft, "p50", summary_path, "time_to_first_token.") / 1000}
    return ToolOutput(requests, _number(duration, "avg", summary_path, "benchmark_duration."), stated, keys)


# --- GuideLLM 0.8.1 ---------------------------------------------------------------------------


def guidellm_scenario(target: ToolTarget, load: ToolLoad, out: str) -> dict[str, Any]:
    """A `guidellm run -c` scenario, streamed from /v1/completions with each request's output length
    as max_tokens and ignore_eos (guidellm/backends/openai/request_handlers.py:621-624): a random
    workload's synthetic text prompts of `input_tokens` in the tokenizer's count, or a dataset
    workload's samples from a file (guidellm_inputs); one at a time (`synchronous`), a closed loop of
    `concurrent` streams, or `poisson` arrivals (guidellm/benchmark/profiles/asynchronous.py:44-49)
    under an optional `max_concurrency` (:88-95)."""
    if load.rate is None:
        profile: dict[str, Any] = {"kind": "synchronous"}
    elif math.isinf(load.rate) and load.max_in_flight:
        profile = {"kind": "concurrent", "streams": load.max_in_flight}
    else:
        profile = {"kind": "poisson", "rate": [load.rate], **({"max_concurrency": load.max_in_flight} if load.max_in_flight else {})}
    if load.dataset:
        data: dict[str, Any] = {
            "data": [{"kind": "json_file", "path": f"{out}/{GUIDELLM_DATASET}"}],
            "data_column_mapper": {"kind": "generative_column_mapper", "column_mappings": {"text_column": "prompt", "output_tokens_count_column": "output_tokens_count"}},
            "data_loader": {"kind": "pytorch", "shuffle": False},
        }
    else:
        data = {"data": [{"kind": "synthetic_text", "prompt_tokens": load.input_tokens, "output_tokens": load.output_tokens}]}
    return {
        "spec": {
            "backend": {"kind": "openai_http", "target": target.url, "model": target.model, "request_format": "/v1/completions", "stream": True},
            "profile": profile,
            **({"tokenizer": {"kind": "hf_auto", "model": target.tokenizer}} if target.tokenizer else {}),
            **data,
            "constraints": [{"kind": "max_requests", "count": load.requests}],
            "outputs": [{"kind": "json", "path": f"{out}/benchmarks.json"}],
        }
    }


GUIDELLM_DATASET = "dataset.jsonl"  # its json_file reader takes a `.json` or `.jsonl` path (guidellm/data/deserializers/file.py:108-116)


def guidellm_sample_key(index: int, prompt: str, tokens: int) -> str:
    """What GuideLLM records of a request it sent (guidellm_read): the prompt and max_tokens of its body."""
    return json.dumps([prompt, tokens], ensure_ascii=False)


def guidellm_refusal(samples: Sequence[tuple[str, int]]) -> str | None:
    return _empty_prompt(samples, "GuideLLM 0.8.1 refuses to send (guidellm/backends/openai/request_handlers.py:648-657: `prompt` must be non-empty)")


def guidellm_inputs(target: ToolTarget, load: ToolLoad, out: str) -> dict[str, str]:
    """The scenario and a dataset workload's requests as a JSON-lines file GuideLLM 0.8.1 reads with
    `datasets.load_dataset("json")` (guidellm/data/deserializers/file.py:34-47, :99-118; a JSON
    string stays a string): `prompt`, its text column, sent as the body's `prompt` as it is (the
    one text of the request joined by " ", request_handlers.py:643-649), and `output_tokens_count`,
    its output column, the request's max_tokens (data/finalizers/generative.py:83-87 ->
    request_handlers.py:621-624); named in the scenario's column mapping
    (data/preprocessors/mappers.py:159-200). The rows go in the file's order: the data loader does
    not shuffle (`shuffle: false`, schemas/data/loaders/torch.py:19-22) and its one worker reads
    every row (data/loaders/torch.py:53-65)."""
    inputs = {"scenario.json": json.dumps(guidellm_scenario(target, load, out))}
    if load.dataset:
        inputs[GUIDELLM_DATASET] = "".join(json.dumps({"prompt": prompt, "output_tokens_count": tokens}) + "\n" for prompt, tokens in load.dataset)
    return inputs


def guidellm_argv(target: ToolTarget, load: ToolLoad, out: str) -> list[str]:
    """`-m guidellm run -c SCENARIO` (guidellm_inputs writes it into `out`)."""
    return ["-m", "guidellm", "run", "-c", f"{out}/scenario.json", "--disable-progress"]


def guidellm_read(out: Path, started_at: float) -> ToolOutput:
    """benchmarks.json: `benchmarks`, one per profile strategy, each with `duration` (seconds) and its
    `requests` split into `successful`, `errored` and `incomplete`; a request's
    `request_start_time` (epoch s), `time_to_first_token_ms`, `request_latency` (s), `prompt_tokens`,
    `output_tokens`, and `request_args`, the JSON of the request it sent (its `body`'s `prompt` and
    `max_tokens` are a dataset sample's key, guidellm_sample_key; None where it kept none, as for
    a request that got no response: benchmark/schemas/accumulator.py:776-779). GuideLLM keeps no
    per-token times, only each request's mean ITL: fleet's ITL
    figures of a GuideLLM run are therefore null, not made up. Its `metrics` hold the headline
    `output_tokens_per_second.successful.mean` and `time_to_first_token_ms.successful.median`."""
    path = out / "benchmarks.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benchmarks, list) or len(benchmarks) != 1:
        raise _bad(path, "benchmarks", "one benchmark (one profile strategy)", benchmarks)
    [benchmark] = benchmarks
    groups = benchmark.get("requests") or {}
    requests = []
    keys = []
    for n, stats in enumerate(groups.get("successful") or []):
        where = f"requests.successful[{n}]."
        keys.append(_guidellm_key(stats, path, where))
        requests.append(
            RequestOutcome(
                started_at=_number(stats, "request_start_time", path, where), ok=True, prompt_tokens=int(_number(stats, "prompt_tokens", path, where)),
                output_tokens=int(_number(stats, "output_tokens", path, where)), ttft_s=_number(stats, "time_to_first_token_ms", path, where) / 1000,
                e2e_s=_number(stats, "request_latency", path, where),
            )
        )  # fmt: skip
    for group in ("errored", "incomplete"):
        for n, stats in enumerate(groups.get(group) or []):
            keys.append(_guidellm_key(stats, path, f"requests.{group}[{n}]."))
            error = (stats.get("info") or {}).get("error") or group
            requests.append(RequestOutcome(started_at=float(stats.get("request_start_time") or started_at), error_class="http_error", error_message=str(error)[:500]))
    metrics = benchmark.get("metrics") or {}
    stated = {
        "output_tok_s": _number((metrics.get("output_tokens_per_second") or {}).get("successful") or {}, "mean", path, "metrics.output_tokens_per_second.successful."),
        "ttft_p50_s": _number((metrics.get("time_to_first_token_ms") or {}).get("successful") or {}, "median", path, "metrics.time_to_first_token_ms.successful.") / 1000,
    }
    return ToolOutput(requests, _number(benchmark, "duration", path), stated, keys)


def _guidellm_key(stats: dict[str, Any], path: Path, where: str) -> str | None:
    """The request's sample key from the request GuideLLM recorded sending (None where it kept none)."""
    if stats.get("request_args") is None:
        return None
    try:
        body = json.loads(stats["request_args"])["body"]
        prompt, tokens = body["prompt"], body["max_tokens"]
    except (TypeError, ValueError, KeyError):
        raise _bad(path, where + "request_args", "the JSON of a request with `body.prompt` and `body.max_tokens`", stats["request_args"]) from None
    if not isinstance(prompt, str) or isinstance(tokens, bool) or not isinstance(tokens, int):
        raise _bad(path, where + "request_args", "a body whose `prompt` is one text and `max_tokens` an integer", stats["request_args"])
    return guidellm_sample_key(0, prompt, tokens)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "bench_serving", "sglang.bench_serving", "sglang.bench_serving", bench_serving_argv, bench_serving_read, bench_serving_inputs, gamma_arrivals=False, dataset_refusal=bench_serving_refusal
        ),
        Tool("vllm_bench_serve", "vllm bench serve", "vllm.benchmarks.serve", vllm_bench_serve_argv, vllm_bench_serve_read, vllm_bench_serve_inputs, dataset_refusal=vllm_bench_serve_refusal),
        Tool("aiperf", "AIPerf", "aiperf", aiperf_argv, aiperf_read, aiperf_inputs, dataset_refusal=aiperf_refusal, sample_key=aiperf_sample_key),
        Tool("guidellm", "GuideLLM", "guidellm", guidellm_argv, guidellm_read, guidellm_inputs, gamma_arrivals=False, warmup=False, dataset_refusal=guidellm_refusal, sample_key=guidellm_sample_key),
    )
}
# Run by the interpreter a workload names, with the tools' modules as its arguments: prints which
# of them it can find, without importing them or their packages (finding its module is what `-m`
# needs first). Each dotted name is looked up one part at a time through the interpreter's own
# finders, inside the package found before: `importlib.util.find_spec("sglang.bench_serving")`
# imports `sglang` to reach its submodule, 6 s of CPU on an idle machine (torch among its imports),
# and past TOOL_PROBE_TIMEOUT_S on a loaded one; `vllm.benchmarks.serve` imports vllm.
PROBE = """import json, sys
def found(name):
    parts, path = name.split("."), None
    for depth in range(len(parts)):
        if depth and path is None:
            return False
        prefix = ".".join(parts[: depth + 1])
        spec = next((s for f in sys.meta_path if hasattr(f, "find_spec") for s in [f.find_spec(prefix, path)] if s is not None), None)
        if spec is None:
            return False
        path = spec.submodule_search_locations
    return True
print(json.dumps({m: found(m) for m in sys.argv[1:]}))"""


# A tool's module is found without importing it: seconds at most, even for a cold interpreter.
TOOL_PROBE_TIMEOUT_S = 60.0


def probe_argv(python: str, modules: list[str]) -> list[str]:
    return [python, "-c", PROBE, *modules]


def read_probe(stdout: str, modules: list[str]) -> dict[str, bool] | None:
    """The probe's answer, or None where it printed none (the interpreter did not run)."""
    for line in reversed(stdout.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and all(isinstance(found.get(m), bool) for m in modules):
            return {m: found[m] for m in modules}
    return None


@dataclass(frozen=True)
class ToolFound:
    """Whether the interpreter a workload's client tool runs in can find the tool's module."""

    workload: str
    tool: str  # a key of TOOLS
    python: str
    found: bool | None  # None: the interpreter gave no answer (`problem` says what it printed)
    problem: str | None = None


def probe_tools(uses: Mapping[str, Sequence[tuple[str, str]]], run: Callable[[list[str]], tuple[int, str, str]]) -> list[ToolFound]:
    """Each interpreter of `uses` (python -> its (workload, tool) pairs) asked once which of its
    tools' modules it finds. `run`: the probe's argv to (exit code, stdout, stderr), over SSH from
    the controller's preflight, as a subprocess on a Slurm node (fleet.host.nodeprep)."""
    found_all: list[ToolFound] = []
    for python, pairs in uses.items():
        modules = sorted({TOOLS[tool].module for _, tool in pairs})
        code, stdout, stderr = run(probe_argv(python, modules))
        found = read_probe(stdout, modules)
        problem = None if found is not None else f"exit {code}: {(stderr or stdout).strip()[-300:]}"
        found_all += [ToolFound(workload, tool, python, found[TOOLS[tool].module] if found is not None else None, problem) for workload, tool in pairs]
    return found_all


def missing_tools(found: Sequence[ToolFound]) -> str | None:
    """Why some workload's tool cannot run (each workload, its interpreter, what failed), or None."""
    missing = [f for f in found if not f.found]
    if not missing:
        return None
    return "; ".join(
        f"workload {f.workload}: {f.python} " + (f"cannot import {TOOLS[f.tool].module} ({TOOLS[f.tool].title})" if f.found is False else f"did not answer ({f.problem})") for f in missing
    )
