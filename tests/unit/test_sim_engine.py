"""The simulated scheduler in-process: batching, queueing, speculative steps, determinism, faults,
and its serving log lines read by fleet's SGLang log parser."""

from __future__ import annotations

import asyncio
import dataclasses
import io

from fleet.host.engines.sglang import logparse
from fleet.host import tokens as tokenizer
from fleet.host.engines.sim import perf
from fleet.host.engines.sim.console import Console
from fleet.host.engines.sim.engine import Engine, EngineConfig, SimRequest
from fleet.host.engines.sim.faults import FaultProfile

GIB = 1 << 30
CONFIG = EngineConfig(
    max_running_requests=4,
    max_total_num_tokens=87061,
    context_len=32768,
    chunked_prefill_size=8192,
    max_prefill_tokens=16384,
    decode_log_interval=10,
    algorithm=None,
    verify_tokens=1,
    spec_num_draft_tokens=None,
    ddtree_budget=None,
    hybrid=True,
    max_mamba_cache_size=24,
    cuda_graph_max_bs=4,
    radix_cache=True,
    compute_cap_major=12,
    seed=0,
)
DDTREE = dataclasses.replace(CONFIG, algorithm="DDTREE", verify_tokens=16, spec_num_draft_tokens=16, ddtree_budget=15)
MODEL = perf.build_perf_model(bandwidth_gbs=1792, tflops=500, weights_bytes_per_gpu=51.05 * GIB, draft_weights_bytes_per_gpu=3.46 * GIB, kv_cell_bytes=65536, tp_size=1, cuda_graphs=True)


class Recorder:
    def __init__(self) -> None:
        self.chunks: list[int] = []
        self.finished = asyncio.Event()

    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None:
        self.chunks.append(len(pieces))

    def on_finish(self, request: SimRequest) -> None:
        self.finished.set()


class Harness:
    def __init__(self, config: EngineConfig, faults: FaultProfile = FaultProfile(), ready: bool = True) -> None:
        self.log = io.StringIO()
        self.crashes: list[str] = []
        self.engine = Engine(config, MODEL, faults, Console(1, self.log, io.StringIO()), 0.0001, self.crashes.append)
        self.engine.ready = ready
        self.max_running = 0

    async def run(self, prompts: list[tuple[str, int]], timeout: float = 10.0) -> list[SimRequest]:
        task = asyncio.create_task(self.engine.run())
        requests, recorders = [], []
        for text, new_tokens in prompts:
            recorder = Recorder()
            request = self.engine.new_request(text, max(len(text.split()), 1), new_tokens, recorder)
            requests.append(request)
            recorders.append(recorder)
            self.engine.submit(request)

        async def watch() -> None:
            while True:
                self.max_running = max(self.max_running, len(self.engine.running))
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        finished = asyncio.ensure_future(asyncio.gather(*(r.finished.wait() for r in recorders)))
        # Done when every request finished, or when the engine stopped (a crash).
        await asyncio.wait([finished, task], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for pending in (watcher, task, finished):
            pending.cancel()
        self.recorders = recorders
        return requests

    def events(self) -> list:
        return [logparse.parse_line(line) for line in self.log.getvalue().splitlines()]


def run(harness: Harness, prompts: list[tuple[str, int]]) -> list[SimRequest]:
    return asyncio.run(harness.run(prompts))


def test_batches_up_to_max_running_requests_and_queues_the_rest() -> None:
    harness = Harness(CONFIG)
    requests = run(harness, [(f"Tell me a story {i}", 30) for i in range(10)])
    assert [r.completion_tokens for r in requests] == [30] * 10
    assert all(r.finish_reason == {"type": "length", "length": 30} for r in requests)
    assert harness.max_running == 4
    decode = [e for e in harness.events() if isinstance(e, logparse.DecodeBatch)]
    assert decode and max(e.running_req for e in decode) == 4 and any(e.queue_req > 0 for e in decode)
    assert all(e.mamba_num == e.running_req and e.full_tokens is not None for e in decode)
    prefill = [e for e in harness.events() if isinstance(e, logparse.PrefillBatch)]
    assert sum(e.new_seq for e in prefill) == 10


def test_outputs_are_deterministic_for_a_seed() -> None:
    first = run(Harness(CONFIG), [("Write quicksort in Python", 40)])[0]
    again = run(Harness(CONFIG), [("Write quicksort in Python", 40)])[0]
    other = run(Harness(dataclasses.replace(CONFIG, seed=1)), [("Write quicksort in Python", 40)])[0]
    assert (first.text, first.output_ids) == (again.text, again.output_ids)
    assert first.text != other.text
    assert first.rid == again.rid  # ids follow the order of requests in a fresh engine
    assert first.kind == "code" and tokenizer.count_tokens(first.text) == 40
    assert set(tokenizer.tokenize(first.text)) <= set(tokenizer.GENERATION_VOCABULARY["code"])


def test_request_ids_are_unique() -> None:
    requests = run(Harness(CONFIG), [("same prompt", 3)] * 5)
    assert len({r.rid for r in requests}) == 5 and len({r.text for r in requests}) == 1


def test_speculative_steps_emit_several_tokens() -> None:
    harness = Harness(DDTREE)
    request = run(harness, [("Write a Python function for fibonacci", 200)])[0]
    assert request.completion_tokens == 200
    assert request.verify_ct < 200 / 3
    assert max(harness.recorders[0].chunks) > 1
    assert sum(request.histogram) == request.verify_ct
    assert harness.engine.stats.avg_spec_accept_length > 3
    decode = [e for e in harness.events() if isinstance(e, logparse.DecodeBatch)]
    assert decode and all(e.accept_len > 1 and 0 < e.accept_rate < 1 for e in decode)
    ddtree = [e for e in harness.events() if isinstance(e, logparse.DDTreeMetrics)]
    assert ddtree and ddtree[0].budget == 15 and ddtree[0].avg_actual_nodes == 16.0


def test_prose_accepts_less_than_code() -> None:
    code = run(Harness(DDTREE), [("Implement quicksort in Python", 400)])[0]
    prose = run(Harness(DDTREE), [("Tell me about the history of Rome", 400)])[0]
    assert prose.verify_ct > code.verify_ct


def test_ddtree_b8_crashes_on_the_first_decode_after_warmup() -> None:
    config = dataclasses.replace(DDTREE, ddtree_budget=8)
    warmup = Harness(config, ready=False)
    assert run(warmup, [("warm up", 8)])[0].completion_tokens == 8 and warmup.crashes == []
    harness = Harness(config)
    run(harness, [("Write fib in Python", 256)])
    assert harness.crashes == ["illegal_instruction"]
    ddtree = [e for e in harness.events() if isinstance(e, logparse.DDTreeMetrics)]
    assert ddtree[-1].avg_accepted_drafts == 0.0 and ddtree[-1].avg_commit_len == 1.0


def test_ddtree_b12_survives_16_tokens_and_crashes_past_them() -> None:
    config = dataclasses.replace(DDTREE, ddtree_budget=12)
    harness = Harness(config)
    assert run(harness, [("Write fib in Python", 16)])[0].completion_tokens == 16 and harness.crashes == []
    harness = Harness(config)
    request = run(harness, [("Write fib in Python", 256)])[0]
    assert harness.crashes == ["illegal_instruction"] and request.completion_tokens <= 16


def test_no_ddtree_crash_off_sm120() -> None:
    harness = Harness(dataclasses.replace(DDTREE, ddtree_budget=8, compute_cap_major=9))
    assert run(harness, [("Write fib in Python", 64)])[0].completion_tokens == 64 and harness.crashes == []


def test_crash_after_n_requests_and_hang() -> None:
    harness = Harness(CONFIG, FaultProfile(crash_after_requests=2))
    requests = run(harness, [("a", 5), ("b", 5)])
    assert [r.completion_tokens for r in requests] == [5, 5] and harness.crashes == []
    harness.engine.crashed = False
    asyncio.run(harness.run([("c", 5)]))
    assert harness.crashes == ["illegal_memory_access"]

    hung = Harness(CONFIG, FaultProfile(hang_after_requests=0))
    request = asyncio.run(hung.run([("d", 5)], timeout=0.3))[0]
    assert hung.engine.hung and request.finish_reason is None and request.completion_tokens == 1


def test_prompt_larger_than_the_kv_pool_is_aborted_like_sglang() -> None:
    harness = Harness(dataclasses.replace(CONFIG, max_total_num_tokens=1000))
    recorder = Recorder()

    async def go() -> SimRequest:
        request = harness.engine.new_request("x", 5000, 10, recorder)
        harness.engine.submit(request)
        return request

    request = asyncio.run(go())
    assert request.finish_reason["type"] == "abort" and request.finish_reason["status_code"] == 400
    assert "Input length (5000 tokens) exceeds the maximum allowed length (994 tokens)." in harness.log.getvalue()


def test_long_prompts_prefill_in_chunks_and_prefixes_are_cached() -> None:
    harness = Harness(CONFIG)
    long_text = "word " * 20000

    async def go() -> list[SimRequest]:
        task = asyncio.create_task(harness.engine.run())
        done = []
        for _ in range(2):
            recorder = Recorder()
            request = harness.engine.new_request(long_text, 20000, 4, recorder)
            harness.engine.submit(request)
            await asyncio.wait_for(recorder.finished.wait(), 10)
            done.append(request)
        task.cancel()
        return done

    first, second = asyncio.run(go())
    prefill = [e for e in harness.events() if isinstance(e, logparse.PrefillBatch)]
    assert [e.new_token for e in prefill[:3]] == [8192, 8192, 3616]
    assert first.cached_tokens == 0 and second.cached_tokens > 19000
    assert prefill[-1].cached_token == second.cached_tokens


def test_dense_model_lines_use_the_plain_format() -> None:
    harness = Harness(dataclasses.replace(CONFIG, hybrid=False, max_mamba_cache_size=0))
    run(harness, [(f"Summarize chapter {i}", 30) for i in range(3)])
    decode = [e for e in harness.events() if isinstance(e, logparse.DecodeBatch)]
    prefill = [e for e in harness.events() if isinstance(e, logparse.PrefillBatch)]
    assert decode and all(e.tokens is not None and e.full_tokens is None and e.mamba_num is None for e in decode)
    assert prefill and all(e.mamba_usage is None and e.token_usage is not None for e in prefill)
    assert "token usage: " in harness.log.getvalue() and "full token usage" not in harness.log.getvalue()


def test_flush_cache_empties_the_prefix_cache_and_refuses_while_busy() -> None:
    """Scheduler.flush_cache: a repeated prompt hits the cache until a flush, then misses it once."""
    harness = Harness(CONFIG)
    text = "The same long system prompt, said again and again. " * 40

    async def go() -> tuple[list[int], list[bool]]:
        task = asyncio.create_task(harness.engine.run())
        cached, flushed = [], []

        async def send() -> SimRequest:
            recorder = Recorder()
            request = harness.engine.new_request(text, tokenizer.count_tokens(text), 4, recorder)
            harness.engine.submit(request)
            return request

        for step in ("miss", "hit", "flush", "miss", "busy"):
            if step == "flush":
                flushed.append(harness.engine.flush_cache())
                continue
            request = await send()
            if step == "busy":
                flushed.append(harness.engine.flush_cache())  # queued or running: refused, nothing flushed
            while request.finish_reason is None:
                await asyncio.sleep(0.001)
            cached.append(request.cached_tokens)
        task.cancel()
        return cached, flushed

    cached, flushed = asyncio.run(go())
    tokens = tokenizer.count_tokens(text)
    assert cached[0] == 0 and cached[1] >= tokens - 32 and cached[2] == 0 and cached[3] >= tokens - 32
    assert flushed == [True, False]
    log = harness.log.getvalue()
    assert "Cache flushed successfully!" in log and "Cache not flushed because there are pending requests. #queue-req: " in log


def test_input_ids_prompts_are_prefix_cached_by_token_id() -> None:
    harness = Harness(CONFIG)
    ids = list(range(5000, 5400))

    async def go() -> list[SimRequest]:
        task = asyncio.create_task(harness.engine.run())
        done = []
        for prompt in (ids, ids, ids[:200] + [7] * 200, list(reversed(ids))):
            recorder = Recorder()
            request = harness.engine.new_request(None, len(prompt), 4, recorder, prompt_ids=prompt)
            harness.engine.submit(request)
            await asyncio.wait_for(recorder.finished.wait(), 10)
            done.append(request)
        task.cancel()
        return done

    first, again, shared_prefix, other = asyncio.run(go())
    assert first.cached_tokens == 0 and again.cached_tokens == 384  # 12 whole 32-id blocks of 400 ids
    assert shared_prefix.cached_tokens == 192  # the 6 blocks inside the common 200-id prefix
    assert other.cached_tokens == 0
    # The ids, not only their count, decide the outputs.
    assert first.output_ids == again.output_ids != other.output_ids


def test_eos_ends_a_request_early_unless_ignore_eos() -> None:
    """Without ignore_eos a request may stop at EOS before max_new_tokens (SGLang's default);
    bench_serving and fleet's client ask for exactly max_new_tokens with ignore_eos."""
    harness = Harness(CONFIG)

    async def go() -> list[SimRequest]:
        task = asyncio.create_task(harness.engine.run())
        done = []
        for index in range(8):
            for stop_at_eos in (True, False):
                recorder = Recorder()
                request = harness.engine.new_request(f"Tell me story {index}", 5, 600, recorder, stop_at_eos=stop_at_eos)
                harness.engine.submit(request)
                await asyncio.wait_for(recorder.finished.wait(), 10)
                done.append(request)
        task.cancel()
        return done

    requests = asyncio.run(go())
    stopping, exact = requests[0::2], requests[1::2]
    assert all(r.completion_tokens == 600 and r.finish_reason == {"type": "length", "length": 600} for r in exact)
    assert all(r.finish_reason["type"] == "stop" and r.completion_tokens < 600 for r in stopping if r.finish_reason)
