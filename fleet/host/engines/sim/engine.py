"""The simulated scheduler: requests queue, are admitted up to max_running_requests and the KV pool,
prefill in chunks, then decode in batched steps whose simulated duration comes from the perf
model, scaled by the speed factor and, when the server was asked for it, varied by the noise model
(noise.py; a new run begins at each prefix-cache flush). Speculative methods emit several tokens
per verify step.
Faults (crash, hang) fire from here, at the step where SGLang's would.

One asyncio task runs the loop; outputs go straight to each request's sink (which writes to its
HTTP connection), so a step costs one pass over the running batch.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from fleet.host import tokens
from fleet.host.engines.sim import metrics, perf, sgltext
from fleet.host.engines.sim.console import ERROR, WARNING, Console
from fleet.host.engines.sim.faults import DDTreeCrash, FaultProfile
from fleet.host.engines.sim.noise import NoiseModel

EOS_TOKEN_ID = 248046  # Qwen3.5/3.6 <|im_end|>
# Radix cache granularity for the simulator's prefix matching (real SGLang matches per token).
PREFIX_BLOCK = 32


class RequestSink(Protocol):
    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None: ...

    def on_finish(self, request: SimRequest) -> None: ...


@dataclass(eq=False)
class SimRequest:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    natural_stop: int | None  # the EOS position: with no limit, or when EOS may end the request (no ignore_eos)
    kind: str
    prefix_blocks: tuple[int, ...]  # chained hashes of the prompt's PREFIX_BLOCK-token blocks (text pieces or token ids)
    rng: random.Random  # acceptance, natural stop: what varies with the method
    sink: RequestSink
    # The model's output: a function of the seed and the prompt alone, so that every method of a
    # model returns the same tokens for the same prompt (speculative decoding is lossless).
    tokens: random.Random = field(default_factory=random.Random)
    log_metrics: bool = True  # False for /health probes and the server's own warm-up
    completion_tokens: int = 0
    output_ids: list[int] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    cached_tokens: int = 0
    prefilled: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    first_token_at: float | None = None
    last_token_at: float | None = None
    finished_at: float | None = None
    finish_reason: dict | None = None
    aborted: bool = False

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def e2e_latency(self) -> float:
        return (self.finished_at or time.time()) - self.created


@dataclass(frozen=True)
class EngineConfig:
    max_running_requests: int
    max_total_num_tokens: int
    context_len: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    decode_log_interval: int
    algorithm: str | None
    verify_tokens: int  # tokens a decode step runs per sequence: 1, or the verify width (DDTREE: budget + 1)
    spec_num_draft_tokens: int | None  # ServerArgs.speculative_num_draft_tokens (the DFLASH block)
    ddtree_budget: int | None
    hybrid: bool
    max_mamba_cache_size: int
    cuda_graph_max_bs: int  # 0 when CUDA graphs are disabled
    radix_cache: bool
    compute_cap_major: int
    seed: int
    noise: NoiseModel | None = None  # run-to-run variation (noise.py); None: the perf model's exact times
    # The noise's own seed: the server's, not the outputs' (`seed`, which every method of a model
    # shares so that their tokens compare). One for all servers made pass k of every configuration
    # draw the same factor, which a paired speed-up divides out: intervals narrower than hardware's.
    noise_seed: int = 0

    @property
    def max_req_input_len(self) -> int:
        # tp_worker: max_req_len = min(context_len - 1, max_total_num_tokens - 1); input = that - 5.
        return min(self.context_len - 1, self.max_total_num_tokens - 1) - 5


@dataclass
class EngineStats:
    """Counters behind /server_info, /metrics and the periodic log lines."""

    num_requests: int = 0
    num_finished: int = 0
    num_aborted: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    cached_tokens: int = 0
    verify_ct: int = 0
    accepted_tokens: int = 0  # tokens committed by verify steps (bonus included)
    last_gen_throughput: float = 0.0
    ttft: metrics.Histogram = field(default_factory=lambda: metrics.Histogram(metrics.TTFT_BUCKETS))
    itl: metrics.Histogram = field(default_factory=lambda: metrics.Histogram(metrics.ITL_BUCKETS))
    e2e: metrics.Histogram = field(default_factory=lambda: metrics.Histogram(metrics.E2E_BUCKETS))

    @property
    def avg_spec_accept_length(self) -> float | None:
        return self.accepted_tokens / self.verify_ct if self.verify_ct else None


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        model: perf.PerfModel,
        faults: FaultProfile,
        console: Console,
        speed: float,
        on_crash: Callable[[str], None],
    ) -> None:
        self.config = config
        self.model = model
        self.faults = faults
        self.console = console
        self.speed = speed
        self.on_crash = on_crash
        self.stats = EngineStats()
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.chunked: SimRequest | None = None
        self.ready = False  # set after the server's own warm-up: faults only hit real traffic
        self.hung = False
        self.crashed = False
        self.last_progress = time.time()  # the detokenizer heartbeat /health looks at
        self._wakeup = asyncio.Event()
        self._due = 0.0
        self._decode_steps = 0
        self._decode_steps_after_ready = 0
        self._logged_first_verify = False
        self._reserved_tokens = 0
        self._finished_after_ready = 0
        self._interval = _IntervalStats()
        self._last_decode_log = time.monotonic()
        self._last_prefill_log = time.monotonic()
        self._prefix_cache: OrderedDict[int, None] = OrderedDict()
        self._request_ids = random.Random(config.seed)
        self._run = 0  # the run (noise.py): flushes of the prefix cache so far
        self._run_factor = config.noise.run(config.noise_seed, 0).throughput_factor if config.noise else 1.0
        self._prefill_batches = 0  # in this run
        self._ddtree_crash: DDTreeCrash | None = faults.ddtree_crash_for(config.compute_cap_major, config.ddtree_budget) if config.algorithm == "DDTREE" else None
        self._corruption = faults.corruption_for(config.algorithm, config.ddtree_budget)

    # --- requests ------------------------------------------------------------------------------

    def new_request(
        self,
        prompt_text: str | None,
        prompt_tokens: int,
        max_new_tokens: int | None,
        sink: RequestSink,
        log_metrics: bool = True,
        prompt_ids: Sequence[int] | None = None,
        stop_at_eos: bool = False,
    ) -> SimRequest:
        """A request for `prompt_tokens` tokens, given as text or as token ids (`input_ids`); its
        outputs depend only on the seed and the prompt, its id on the seed and the order of requests.
        `stop_at_eos`: the model's end-of-sequence token may end it before `max_new_tokens` (SGLang's
        default; a client asks for exactly `max_new_tokens` with `ignore_eos`)."""
        if log_metrics:
            self.stats.num_requests += 1
        text = prompt_text or ""
        ids = _ids_bytes(prompt_ids) if prompt_ids is not None and prompt_text is None else b""
        key = zlib.crc32(ids or text.encode("utf-8", "surrogatepass")) ^ (self.config.seed * 0x9E3779B1) ^ prompt_tokens
        blocks: tuple[int, ...] = ()
        if self.config.radix_cache:
            # The radix tree keys on token ids: a prompt sent as input_ids is cached like one sent as text.
            blocks = _id_blocks(ids) if ids else _prefix_blocks(text) if text else ()
        rng = random.Random(key)
        natural = None
        if max_new_tokens is None or stop_at_eos:
            natural = 64 + rng.randrange(448)
        if max_new_tokens is None:
            max_new_tokens = self.config.context_len - prompt_tokens
        return SimRequest(
            rid=f"{self._request_ids.getrandbits(128):032x}",
            prompt_tokens=prompt_tokens,
            max_new_tokens=max_new_tokens,
            natural_stop=natural,
            kind=perf.classify_prompt(text) if text else "prose",
            prefix_blocks=blocks,
            rng=rng,
            sink=sink,
            tokens=random.Random(f"fleet-sim-tokens:{key}"),
            log_metrics=log_metrics,
        )

    def submit(self, request: SimRequest) -> None:
        if request.prompt_tokens > self.config.max_req_input_len:
            message = sgltext.input_too_long(request.prompt_tokens, self.config.max_req_input_len)
            self.console.rank(0, message, ERROR)
            request.finish_reason = {"type": "abort", "message": message, "status_code": 400, "err_type": "BadRequest"}
            self._finish(request)
            return
        self.waiting.append(request)
        self._wakeup.set()

    def flush_cache(self) -> bool:
        """Scheduler.flush_cache: empty the radix cache when nothing runs or waits, else refuse."""
        if self.waiting or self.running or self.chunked is not None:
            self.console.rank(0, (f"Cache not flushed because there are pending requests. #queue-req: {len(self.waiting)}, #running-req: {len(self.running) + (self.chunked is not None)}"), WARNING)
            return False
        self._prefix_cache.clear()
        self.console.rank(0, "Cache flushed successfully!")
        if self.config.noise is not None:
            self._run += 1
            self._run_factor = self.config.noise.run(self.config.noise_seed, self._run).throughput_factor
            self._prefill_batches = 0
        return True

    def abort(self, request: SimRequest) -> None:
        """The client went away: SGLang aborts the request and frees its slot."""
        if request.finish_reason is not None:
            return
        request.aborted = True
        request.finish_reason = {"type": "abort", "message": "The client disconnected."}
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.running:
            self.running.remove(request)
            self._reserved_tokens -= self._reservation(request)
        if self.chunked is request:
            self.chunked = None
            self._reserved_tokens -= self._reservation(request)
        if request.log_metrics:
            self.stats.num_aborted += 1
        request.finished_at = time.time()

    # --- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        while not self.crashed:
            if self.hung:
                await asyncio.Event().wait()  # never: the socket stays open, nothing comes
            if not (self.waiting or self.running or self.chunked):
                self._wakeup.clear()
                await self._wakeup.wait()
                self._due = time.monotonic()
                continue
            if self._admit_and_prefill_ready():
                await self._prefill()
            elif self.running:
                await self._decode()
            else:
                # Waiting requests that do not fit yet: wait for a finish to free the pool.
                self._wakeup.clear()
                await self._wakeup.wait()

    async def _spend(self, simulated_s: float) -> None:
        """Let `simulated_s` of GPU time pass (scaled), keeping a virtual clock so that coarse
        sleeps do not slow the simulation down; never fall more than 50 ms behind real time."""
        now = time.monotonic()
        start = self._due if now - self._due < 0.05 else now
        self._due = start + simulated_s * self.speed
        delay = self._due - now
        await asyncio.sleep(delay if delay > 0 else 0)

    # --- prefill -------------------------------------------------------------------------------

    def _reservation(self, request: SimRequest) -> int:
        return min(request.prompt_tokens + request.max_new_tokens, self.config.max_total_num_tokens)

    def _admit_and_prefill_ready(self) -> bool:
        return self.chunked is not None or (bool(self.waiting) and self._can_admit(self.waiting[0], 0))

    def _can_admit(self, request: SimRequest, in_batch: int) -> bool:
        admitted = len(self.running) + in_batch
        if admitted >= self.config.max_running_requests:
            return False
        free = self.config.max_total_num_tokens - self._reserved_tokens
        # A request larger than the whole pool still runs, alone (SGLang retracts others for it).
        return self._reservation(request) <= free or admitted == 0

    async def _prefill(self) -> None:
        """One prefill batch: the chunked request's next chunk first, then new requests while the
        chunk budget, max_running_requests and the KV pool allow."""
        budget = self.config.chunked_prefill_size if self.config.chunked_prefill_size > 0 else self.config.max_prefill_tokens
        batch: list[SimRequest] = []
        new_tokens = cached_tokens = 0
        if self.chunked is not None:
            request = self.chunked
            take = min(budget, request.prompt_tokens - request.prefilled)
            request.prefilled += take
            new_tokens += take
            budget -= take
            batch.append(request)
            if request.prefilled >= request.prompt_tokens:
                self.chunked = None
        while self.chunked is None and budget > 0 and self.waiting and self._can_admit(self.waiting[0], len(batch)):
            request = self.waiting.popleft()
            self._reserved_tokens += self._reservation(request)
            request.cached_tokens = self._match_prefix(request)
            take = min(budget, request.prompt_tokens - request.cached_tokens)
            request.prefilled = request.cached_tokens + take
            new_tokens += take
            cached_tokens += request.cached_tokens
            budget -= take
            batch.append(request)
            if request.prefilled < request.prompt_tokens:
                self.chunked = request
        started = time.monotonic()
        await self._spend(self._prefill_noise() * self.model.prefill_s(new_tokens))
        if self.crashed:
            return
        self._log_prefill(len(batch), new_tokens, cached_tokens, started)
        now = time.time()
        for request in batch:
            if request.prefilled < request.prompt_tokens or request.aborted:
                continue
            self._insert_prefix(request)
            self.running.append(request)
            request.first_token_at = now
            if request.log_metrics:
                self.stats.prompt_tokens += request.prompt_tokens
                self.stats.cached_tokens += request.cached_tokens
                self.stats.ttft.observe(now - request.created)
            # The prefill forward samples the first output token.
            self._emit(request, 1, now)
        self.last_progress = now

    def _prefill_noise(self) -> float:
        """How many times its noise-free time this prefill batch takes (1.0 without noise)."""
        noise = self.config.noise
        if noise is None:
            return 1.0
        self._prefill_batches += 1
        return noise.prefill_factor(self.config.noise_seed, self._run, self._prefill_batches) / self._run_factor

    def _match_prefix(self, request: SimRequest) -> int:
        matched = 0
        for block in request.prefix_blocks:
            if block not in self._prefix_cache:
                break
            self._prefix_cache.move_to_end(block)
            matched += PREFIX_BLOCK
        # At least one token is always computed, as in SGLang.
        return min(matched, request.prompt_tokens - 1)

    def _insert_prefix(self, request: SimRequest) -> None:
        for block in request.prefix_blocks:
            self._prefix_cache[block] = None
            self._prefix_cache.move_to_end(block)
        # Bounded like the radix tree: evict the least recently used blocks beyond the pool.
        limit = max(1, self.config.max_total_num_tokens // PREFIX_BLOCK)
        while len(self._prefix_cache) > limit:
            self._prefix_cache.popitem(last=False)

    def _log_prefill(self, new_seq: int, new_tokens: int, cached: int, started: float) -> None:
        now = time.monotonic()
        gap = max(now - self._last_prefill_log, now - started, 1e-6)
        self._last_prefill_log = now
        usage = self._token_usage()
        if self.config.hybrid:
            parts = f"full token usage: {usage:.2f}, mamba usage: {self._mamba_usage():.2f}, "
        else:
            parts = f"token usage: {usage:.2f}, "
        pending = sum(r.prompt_tokens for r in self.waiting)
        self.console.rank(0, sgltext.prefill_batch(new_seq, new_tokens, cached, parts, len(self.running), len(self.waiting), pending, False, new_tokens / gap))

    # --- decode --------------------------------------------------------------------------------

    async def _decode(self) -> None:
        config = self.config
        if self.ready and self._fault_before_decode():
            return
        batch = len(self.running)
        context = sum(r.context_tokens for r in self.running)
        await self._spend(self.model.decode_step_s(batch, config.verify_tokens, context) / self._run_factor)
        if self.crashed or self.hung:
            return
        self._decode_steps += 1
        if self.ready:
            self._decode_steps_after_ready += 1
        now = time.time()
        spec = config.algorithm is not None
        step = self._interval
        first_verify: list[int] = []
        crash = self._ddtree_crash if self.ready else None
        planned: list[tuple[SimRequest, int]] = []
        for request in self.running:
            produced = 1
            if spec:
                accept = perf.acceptance(config.algorithm, request.kind, config.spec_num_draft_tokens, config.ddtree_budget)
                limit = min(accept.max_drafts, request.max_new_tokens - request.completion_tokens - 1)
                accepted = 0
                p = accept.p
                random_ = request.rng.random
                while accepted < limit and random_() < p:
                    accepted += 1
                produced += accepted
            planned.append((request, produced))
        if crash is not None and crash.fires(
            first_decode=self._decode_steps_after_ready == 1,
            max_output_tokens_after_step=max(r.completion_tokens + n for r, n in planned),
        ):
            self._log_ddtree(batch, [1] * batch if crash.trigger == "first_decode" else [n for _, n in planned])
            self._crash("illegal_instruction")
            return
        for request, produced in planned:
            if spec:
                request.verify_ct += 1
                request.correct_drafts += produced - 1
                histogram = request.histogram
                while len(histogram) < produced:
                    histogram.append(0)
                histogram[produced - 1] += 1
                step.verify_ct += 1
                step.accepted += produced
                first_verify.append(produced - 1)
            step.tokens += produced
            self._emit(request, produced, now)
        if spec:
            self.stats.verify_ct += len(planned)
            self.stats.accepted_tokens += sum(n for _, n in planned)
            if config.algorithm in ("DFLASH", "DDTREE") and not self._logged_first_verify:
                self._logged_first_verify = True
                self.console.rank(0, sgltext.dflash_first_verify(first_verify))
        self.last_progress = now
        if self._decode_steps % config.decode_log_interval == 0:
            self._log_decode(batch)

    def _fault_before_decode(self) -> bool:
        finished = self._finished_after_ready
        if self.faults.hang_after_requests is not None and finished >= self.faults.hang_after_requests:
            self.hung = True
            return True
        if self.faults.crash_after_requests is not None and finished >= self.faults.crash_after_requests:
            self._crash(self.faults.crash_error)
            return True
        return False

    def _crash(self, error: str) -> None:
        self.crashed = True
        self.on_crash(error)

    def _emit(self, request: SimRequest, produced: int, now: float) -> None:
        remaining = request.max_new_tokens - request.completion_tokens
        if request.natural_stop is not None:
            remaining = min(remaining, request.natural_stop - request.completion_tokens)
        produced = min(produced, remaining)
        vocabulary = tokens.GENERATION_VOCABULARY[request.kind]
        # Drawn as before the model's tokens had their own generator, so that acceptance and stops,
        # which draw from `rng` next, are what they were.
        request.rng.choices(vocabulary, k=produced)
        pieces = request.tokens.choices(vocabulary, k=produced)
        corruption = self._corruption
        if corruption is not None and request.completion_tokens + produced > corruption.from_token:
            # A verify step that accepts the wrong token (faults.py): another piece, never the model's.
            first = max(corruption.from_token - request.completion_tokens, 0)
            pieces[first:] = [vocabulary[(vocabulary.index(piece) + 1) % len(vocabulary)] for piece in pieces[first:]]
        request.text_parts.extend(pieces)
        request.output_ids.extend(map(tokens.piece_id, pieces))
        if request.last_token_at is not None and request.log_metrics:
            # A step's tokens arrive together; each gets its share of the gap (sglang bench_serving).
            self.stats.itl.observe((now - request.last_token_at) / produced, produced)
        request.last_token_at = now
        request.completion_tokens += produced
        if request.log_metrics:
            self.stats.generation_tokens += produced
        if request.natural_stop is not None and request.completion_tokens >= request.natural_stop:
            request.finish_reason = {"type": "stop", "matched": EOS_TOKEN_ID}
        elif request.completion_tokens >= request.max_new_tokens:
            request.finish_reason = {"type": "length", "length": request.max_new_tokens}
        request.sink.on_tokens(request, pieces)
        if request.aborted:
            return
        if request.finish_reason is not None:
            self.running.remove(request)
            self._reserved_tokens -= self._reservation(request)
            self._finish(request)

    def _finish(self, request: SimRequest) -> None:
        request.finished_at = time.time()
        if request.log_metrics:
            self.stats.num_finished += 1
            self.stats.e2e.observe(request.e2e_latency)
            if self.ready:
                self._finished_after_ready += 1
        request.sink.on_finish(request)
        self._wakeup.set()

    # --- periodic lines ------------------------------------------------------------------------

    def _token_usage(self) -> float:
        used = sum(r.context_tokens for r in self.running)
        return used / self.config.max_total_num_tokens

    def _mamba_usage(self) -> float:
        return len(self.running) / self.config.max_mamba_cache_size if self.config.max_mamba_cache_size else 0.0

    def _log_decode(self, batch: int) -> None:
        now = time.monotonic()
        interval = self._interval
        gap = max(now - self._last_decode_log, 1e-6)
        self._last_decode_log = now
        self.stats.last_gen_throughput = interval.tokens / gap
        used = sum(r.context_tokens for r in self.running)
        if self.config.hybrid:
            parts = f"#full token: {used}, full token usage: {self._token_usage():.2f}, mamba num: {len(self.running)}, mamba usage: {self._mamba_usage():.2f}, "
        else:
            parts = f"#token: {used}, token usage: {self._token_usage():.2f}, "
        spec = None
        if self.config.algorithm is not None and interval.verify_ct:
            length = interval.accepted / interval.verify_ct
            drafts_per_round = max((self.config.spec_num_draft_tokens or 2) - 1, 1)
            spec = (length, (interval.accepted - interval.verify_ct) / (interval.verify_ct * drafts_per_round))
        graph = 0 < batch <= self.config.cuda_graph_max_bs
        self.console.rank(0, sgltext.decode_batch(len(self.running), parts, spec, graph, self.stats.last_gen_throughput, len(self.waiting)))
        if self.config.algorithm == "DDTREE" and interval.verify_ct:
            self._log_ddtree(batch, None)
        self._interval = _IntervalStats()

    def _log_ddtree(self, batch: int, commits: list[int] | None) -> None:
        interval = self._interval
        if commits is None:
            commit = interval.accepted / interval.verify_ct
        else:
            commit = sum(commits) / len(commits)
        if self._ddtree_crash is not None and self._ddtree_crash.trigger == "first_decode":
            commit = 1.0  # the seed's b8 line: the tree committed only its root before dying
        budget = self.config.ddtree_budget or 0
        self.console.rank(0, sgltext.ddtree_metrics(batch, budget, budget + 1.0, commit - 1, commit, commit - 1))


@dataclass
class _IntervalStats:
    tokens: int = 0
    verify_ct: int = 0
    accepted: int = 0


def _ids_bytes(ids: Sequence[int]) -> bytes:
    return b"".join(int(token).to_bytes(4, "little", signed=True) for token in ids)


def _id_blocks(ids: bytes) -> tuple[int, ...]:
    """Chained hashes of PREFIX_BLOCK-id blocks of a prompt's token ids (4 bytes per id)."""
    width = 4 * PREFIX_BLOCK
    blocks = []
    running = 0
    for start in range(0, len(ids) - width + 1, width):
        running = zlib.crc32(ids[start : start + width], running)
        blocks.append(running)
    return tuple(blocks)


def _prefix_blocks(text: str) -> tuple[int, ...]:
    """Chained hashes of the prompt's token blocks, so a block matches only with its whole prefix."""
    pieces = tokens.tokenize(text)
    blocks = []
    running = 0
    for start in range(0, len(pieces) - PREFIX_BLOCK + 1, PREFIX_BLOCK):
        running = zlib.crc32("".join(pieces[start : start + PREFIX_BLOCK]).encode("utf-8", "surrogatepass"), running)
        blocks.append(running)
    return tuple(blocks)
