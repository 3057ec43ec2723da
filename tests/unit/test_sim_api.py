"""The HTTP layer in-process: health while starting, routing errors, keep-alive, chunked SSE."""

from __future__ import annotations

import asyncio
import io
import json
import re
import time

from fleet.host.engines.sim.api import Api, ServerState
from fleet.host.engines.sim.console import Console
from fleet.host.engines.sim.engine import Engine
from fleet.host.engines.sim.faults import FaultProfile
from fleet.host.engines.sim.httpserver import serve
from tests.unit.test_sim_engine import CONFIG, MODEL


def state() -> ServerState:
    return ServerState(
        server_args={"model_path": "qwen3.6-27b", "tokenizer_path": "qwen3.6-27b"},
        scheduler_info={"status": "ready", "max_total_num_tokens": 87061, "max_req_input_len": 32762},
        context_len=32768,
        served_model_name="qwen3.6-27b",
        model_type="qwen3_5",
        architectures=["Qwen3_5ForConditionalGeneration"],
        has_image_understanding=True,
        memory_usage={"weight": 51.05, "kvcache": 9.0, "token_capacity": 87061, "graph": 0.35},
        max_running_requests=4,
        reserved_spec_tokens=0,
        spec_num_draft_tokens=None,
        started_at=time.time(),
    )


async def exchange(port: int, raw: bytes, expect_responses: int = 1, until: tuple[bytes, ...] = (b"\r\n\r\n", b"}")) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    data = b""
    while data.count(b"HTTP/1.1 ") < expect_responses or not data.endswith(until):
        chunk = await asyncio.wait_for(reader.read(65536), 5)
        if not chunk:
            break
        data += chunk
    writer.close()
    return data


def test_health_is_503_while_starting_then_200_and_routes_answer_like_fastapi() -> None:
    access = io.StringIO()

    async def go() -> dict[str, bytes]:
        console = Console(1, io.StringIO(), access)
        engine = Engine(CONFIG, MODEL, FaultProfile(), console, 0.001, lambda error: None)
        engine_task = asyncio.create_task(engine.run())
        server_state = state()
        api = Api(server_state, engine, console, 0.001, enable_metrics=False, enable_cache_report=False)
        server = await serve("127.0.0.1", 0, api, console)
        port = server.sockets[0].getsockname()[1]
        results = {"starting": await exchange(port, b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")}
        server_state.status = "Up"
        results["up"] = await exchange(port, b"GET /health_generate HTTP/1.1\r\nhost: x\r\n\r\n")
        results["missing"] = await exchange(port, b"GET /nope HTTP/1.1\r\nhost: x\r\n\r\n")
        results["method"] = await exchange(port, b"DELETE /generate HTTP/1.1\r\nhost: x\r\n\r\n")
        results["metrics_off"] = await exchange(port, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        # Two requests on one kept-alive connection.
        results["keepalive"] = await exchange(port, b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\nGET /model_info HTTP/1.1\r\nhost: x\r\n\r\n", 2)
        body = json.dumps({"text": "Hello", "sampling_params": {"max_new_tokens": 5}, "stream": True}).encode()
        results["stream"] = await exchange(port, b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body), until=(b"0\r\n\r\n",))
        batch = json.dumps({"input_ids": [[1, 2, 3], [4, 5]], "sampling_params": {"max_new_tokens": 3}}).encode()
        results["batch"] = await exchange(port, b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (len(batch), batch), until=(b"]",))
        server.close()
        engine_task.cancel()
        return results

    results = asyncio.run(go())
    batch = json.loads(results["batch"].split(b"\r\n\r\n", 1)[1])
    assert [(r["meta_info"]["prompt_tokens"], r["meta_info"]["completion_tokens"]) for r in batch] == [(3, 3), (2, 3)]
    assert results["starting"].startswith(b"HTTP/1.1 503 Service Unavailable\r\n") and b"content-length: 0" in results["starting"]
    assert results["up"].startswith(b"HTTP/1.1 200 OK\r\n")
    assert results["missing"].startswith(b"HTTP/1.1 404 Not Found") and results["missing"].endswith(b'{"detail":"Not Found"}')
    assert results["method"].startswith(b"HTTP/1.1 405 Method Not Allowed")
    assert results["metrics_off"].startswith(b"HTTP/1.1 404")
    assert results["keepalive"].count(b"HTTP/1.1 200 OK") == 2 and b'"max_model_len":32768' in results["keepalive"]
    stream = results["stream"]
    assert b"transfer-encoding: chunked" in stream and b"content-type: text/event-stream" in stream
    assert stream.count(b"data: {") == 5 and b"data: [DONE]\n\n" in stream and stream.endswith(b"0\r\n\r\n")
    lines = access.getvalue().splitlines()
    assert re.fullmatch(r'\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO:     127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" 503 Service Unavailable', lines[0])
    assert '"POST /generate HTTP/1.1" 200 OK' in lines[-1]


class CapturingConnection:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write_chunk(self, data: bytes) -> bool:
        self.chunks.append(data)
        return True

    def end_stream(self) -> None:
        pass


def test_templated_stream_chunks_equal_the_json_of_their_dicts() -> None:
    from fleet.host.engines.sim.api import _GenerateStream, _OpenAIStream
    from fleet.host.engines.sim.httpserver import dumps

    async def go() -> None:
        console = Console(1, io.StringIO(), io.StringIO())
        engine = Engine(CONFIG, MODEL, FaultProfile(), console, 0.001, lambda error: None)
        api = Api(state(), engine, console, 0.001, enable_metrics=False, enable_cache_report=False)
        connection = CapturingConnection()
        sinks = [_GenerateStream(connection, api), _OpenAIStream(connection, api, 'my "model" 100%', True, False), _OpenAIStream(connection, api, "m", False, False)]
        for sink in sinks:
            request = engine.new_request('Return JSON: {"name": "x"}', 9, 6, sink)
            connection.chunks.clear()
            for pieces in (["{", ' "'], ["name", '"', ":"], [' \\"', "\n"]):
                request.text_parts.extend(pieces)
                request.output_ids.extend(range(len(pieces)))
                request.completion_tokens += len(pieces)
                sink.on_tokens(request, pieces)
                sent = json.loads(connection.chunks[-1][len(b"data: ") :])
                if isinstance(sink, _GenerateStream):
                    expected = {"text": request.text, "output_ids": request.output_ids, "meta_info": api._meta_info(request)}
                else:
                    expected = json.loads(sink._chunk(request, "".join(pieces), None)[len(b"data: ") :])
                assert sent == expected
                assert connection.chunks[-1] == b"data: " + dumps(expected) + b"\n\n"

    asyncio.run(go())


def test_api_key_guards_all_but_health_and_metrics_and_deprecated_paths_warn() -> None:
    err = io.StringIO()

    async def go() -> dict[str, bytes]:
        console = Console(1, err, io.StringIO())
        engine = Engine(CONFIG, MODEL, FaultProfile(), console, 0.001, lambda error: None)
        engine_task = asyncio.create_task(engine.run())
        server_state = state()
        server_state.server_args["api_key"] = "s3cret"
        server_state.status = "Up"
        api = Api(server_state, engine, console, 0.001, enable_metrics=True, enable_cache_report=False)
        server = await serve("127.0.0.1", 0, api, console)
        port = server.sockets[0].getsockname()[1]
        results = {
            "anonymous": await exchange(port, b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n"),
            "bearer": await exchange(port, b"GET /get_model_info HTTP/1.1\r\nhost: x\r\nauthorization: Bearer s3cret\r\n\r\n"),
            "health": await exchange(port, b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"),
            "metrics": await exchange(port, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n", until=(b"\n",)),
        }
        server.close()
        engine_task.cancel()
        return results

    results = asyncio.run(go())
    assert results["anonymous"].startswith(b"HTTP/1.1 401 Unauthorized") and results["anonymous"].endswith(b'{"error":"Unauthorized"}')
    assert results["bearer"].startswith(b"HTTP/1.1 200 OK") and b'"model_type":"qwen3_5"' in results["bearer"]
    assert results["health"].startswith(b"HTTP/1.1 200 OK") and results["metrics"].startswith(b"HTTP/1.1 200 OK")
    assert ("Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead.") in err.getvalue()


def test_flush_cache_route_empties_the_cache_for_text_and_input_ids_prompts() -> None:
    """POST /generate twice hits the prefix cache, POST /flush_cache (200) empties it; the same holds
    for a prompt sent as input_ids."""

    async def post(port: int, path: str, body: object | None) -> tuple[int, bytes]:
        data = b"" if body is None else json.dumps(body).encode()
        raw = await exchange(port, b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (path.encode(), len(data), data), until=(b"}", b"\n"))
        head, _, payload = raw.partition(b"\r\n\r\n")
        return int(head.split()[1]), payload

    async def go() -> tuple[list[int], list[tuple[int, bytes]]]:
        console = Console(1, io.StringIO(), io.StringIO())
        engine = Engine(CONFIG, MODEL, FaultProfile(), console, 0.0001, lambda error: None)
        engine_task = asyncio.create_task(engine.run())
        api = Api(state(), engine, console, 0.0001, enable_metrics=False, enable_cache_report=False)
        server = await serve("127.0.0.1", 0, api, console)
        port = server.sockets[0].getsockname()[1]
        text = {"text": "An agent's long tool description, repeated. " * 30, "sampling_params": {"max_new_tokens": 2}}
        ids = {"input_ids": list(range(100, 260)), "sampling_params": {"max_new_tokens": 2}}
        cached, flushes = [], []
        for body in (text, ids):
            for step in ("send", "send", "flush", "send"):
                if step == "flush":
                    flushes.append(await post(port, "/flush_cache", None))
                else:
                    status, payload = await post(port, "/generate", body)
                    assert status == 200, payload
                    cached.append(json.loads(payload)["meta_info"]["cached_tokens"])
        server.close()
        engine_task.cancel()
        return cached, flushes

    cached, flushes = asyncio.run(go())
    assert cached[0] == 0 and cached[1] > 150 and cached[2] == 0
    assert cached[3:] == [0, 160 - 1, 0]  # 5 whole 32-id blocks; at least one token is always computed
    assert all(status == 200 and payload.startswith(b"Cache flushed.\n") for status, payload in flushes)


def test_generate_and_completions_honour_ignore_eos() -> None:
    async def go() -> list[dict]:
        console = Console(1, io.StringIO(), io.StringIO())
        engine = Engine(CONFIG, MODEL, FaultProfile(), console, 0.0001, lambda error: None)
        engine_task = asyncio.create_task(engine.run())
        api = Api(state(), engine, console, 0.0001, enable_metrics=False, enable_cache_report=False)
        server = await serve("127.0.0.1", 0, api, console)
        port = server.sockets[0].getsockname()[1]
        answers = []
        for path, body in (
            ("/generate", {"text": "Tell me a story", "sampling_params": {"max_new_tokens": 600}}),
            ("/generate", {"text": "Tell me a story", "sampling_params": {"max_new_tokens": 600, "ignore_eos": True}}),
            ("/v1/completions", {"prompt": "Tell me a story", "max_tokens": 600}),
            ("/v1/completions", {"prompt": "Tell me a story", "max_tokens": 600, "ignore_eos": True}),
        ):
            data = json.dumps(body).encode()
            raw = await exchange(port, b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
            answers.append(json.loads(raw.partition(b"\r\n\r\n")[2]))
        server.close()
        engine_task.cancel()
        return answers

    stopped, exact, stopped_c, exact_c = asyncio.run(go())
    assert stopped["meta_info"]["finish_reason"]["type"] == "stop" and stopped["meta_info"]["completion_tokens"] < 600
    assert exact["meta_info"]["finish_reason"] == {"type": "length", "length": 600} and exact["meta_info"]["completion_tokens"] == 600
    assert stopped_c["choices"][0]["finish_reason"] == "stop" and stopped_c["usage"]["completion_tokens"] < 600
    assert exact_c["choices"][0]["finish_reason"] == "length" and exact_c["usage"]["completion_tokens"] == 600
