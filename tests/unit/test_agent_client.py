"""The agent's streaming client: SSE framing, chunk interpretation (multi-token chunks under
speculative decoding), per-token timing, and every way a request can end, against a real local
HTTP server that streams chunked SSE the way uvicorn does.

Payload shapes are SGLang's (sglang/srt/managers/tokenizer_manager.py, entrypoints/http_server.py,
openai serving_completions.py; see shared/notes/sglang-facts.md section 2).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dataclasses
import importlib.util
import json
import socket
import sys
import threading
import time
import traceback
import typing
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet.host.agent.client import (
    ABORTED_BY_AGENT,
    ABORTED_BY_SERVER,
    BAD_RESPONSE,
    COMPLETIONS_EXTRA_FIELDS,
    CONNECTION_REFUSED,
    HTTP_400,
    HTTP_400_CONTEXT,
    HTTP_ERROR,
    INCOMPLETE_STREAM,
    NO_TOKEN_TIMEOUT,
    SERVER_ERROR_CHUNK,
    TIMEOUT,
    Client,
    Endpoint,
    SseDecoder,
    StreamState,
    TokenClock,
    health_ok,
    prompt_tokens_in_error,
    request_body,
)
from fleet.host.errors import StreamError

OVER_CONTEXT = (
    "Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of "
    "32961 tokens: 32705 tokens from the input messages and 256 tokens for the completion. Please reduce the number "
    "of tokens in the input messages or the completion to fit within the limit."
)


def generate_chunk(text: str, completion_tokens: int, *, finish: Any = None, prompt_tokens: int = 12, **meta: Any) -> dict:
    return {
        "text": text,
        "output_ids": list(range(completion_tokens)),
        "meta_info": {
            "id": "9f3c",
            "finish_reason": finish,
            "prompt_tokens": prompt_tokens,
            "weight_version": "default",
            "completion_tokens": completion_tokens,
            "cached_tokens": 0,
            **meta,
        },
    }


def sse(payload: Any) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"


# ---------------------------------------------------------------------------------------------
# pure parts


def test_sse_decoder_frames_events_and_skips_comments() -> None:
    decoder = SseDecoder()
    events = []
    for line in [": keep-alive\n", 'data: {"a": 1}\n', "\n", "\n", "event: x\n", "data: line one\n", "data: line two\r\n", "\r\n", "data: [DONE]\n", "\n"]:
        data = decoder.feed_line(line)
        if data is not None:
            events.append(data)
    assert events == ['{"a": 1}', "line one\nline two", "[DONE]"]
    decoder.feed_line("data: cut")
    assert decoder.flush() == "cut" and decoder.flush() is None


def test_generate_chunks_carrying_several_tokens_are_counted_per_token() -> None:
    state = StreamState()
    # Speculative decoding: the cumulative completion_tokens jumps by the accepted length.
    carried = [state.apply_generate(generate_chunk("a", n)) for n in (1, 4, 9)]
    last = generate_chunk("abc", 10, finish={"type": "length", "length": 10}, e2e_latency=0.4, spec_verify_ct=4, spec_accept_length=2.5)
    carried.append(state.apply_generate(last))
    assert carried == [1, 3, 5, 1]
    assert state.completion_tokens == 10 and state.prompt_tokens == 12
    assert state.finish_reason == "length" and state.text == "abc"
    assert state.meta["spec_verify_ct"] == 4


def test_token_clock_spreads_a_chunk_gap_over_its_tokens() -> None:
    clock = TokenClock()
    for elapsed, tokens in ((0.5, 2), (0.8, 3), (0.8, 0), (1.4, 2)):
        clock.arrived(elapsed, tokens)
    assert clock.ttft_s == 0.5
    # The first chunk's second token came with the first: no ITL entry for it.
    assert clock.itl_s == pytest.approx([0.1, 0.1, 0.1, 0.3, 0.3])
    assert clock.tokens_per_chunk == [2, 3, 2]


def test_error_and_abort_chunks_end_the_stream_with_a_class() -> None:
    error = {"error": {"message": OVER_CONTEXT, "type": "invalid_request_error", "code": 400, "retryable": False}}
    with pytest.raises(StreamError) as context_error:
        StreamState().apply_generate(error)
    assert context_error.value.error_class == HTTP_400_CONTEXT and context_error.value.message == OVER_CONTEXT
    with pytest.raises(StreamError) as other:
        StreamState().apply_generate({"error": {"message": "Internal server error"}})
    assert other.value.error_class == SERVER_ERROR_CHUNK
    abort = generate_chunk("", 3, finish={"type": "abort", "message": "Abort by the scheduler", "status_code": 503})
    with pytest.raises(StreamError) as aborted:
        StreamState().apply_generate(abort)
    assert aborted.value.error_class == ABORTED_BY_SERVER and "Abort by the scheduler" in aborted.value.message


def test_completions_chunks_with_and_without_usage() -> None:
    with_usage = StreamState()
    chunks = [
        {"choices": [{"index": 0, "text": " def", "finish_reason": None}], "usage": {"prompt_tokens": 9, "completion_tokens": 1}},
        {"choices": [{"index": 0, "text": " fib(n):", "finish_reason": None}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
        {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
    ]
    assert [with_usage.apply_completions(c) for c in chunks] == [1, 3, 0]
    assert with_usage.text == " def fib(n):" and with_usage.finish_reason == "length" and with_usage.prompt_tokens == 9
    # Without per-chunk usage: one token per text chunk until the final usage chunk corrects the count.
    plain = StreamState()
    counts = [plain.apply_completions({"choices": [{"text": t, "finish_reason": None}], "usage": None}) for t in (" a", " b")]
    counts.append(plain.apply_completions({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}}))
    assert counts == [1, 1, 3] and plain.completion_tokens == 5


def test_prompt_length_is_read_from_over_context_errors() -> None:
    assert prompt_tokens_in_error(OVER_CONTEXT) == 32705
    assert prompt_tokens_in_error("The input (40000 tokens) is longer than the model's context length (32768 tokens).") == 40000
    with open("tests/fixtures/agent/007-context_length_exceeded.log") as log:
        line = next(line for line in log if "Input length" in line)
    assert prompt_tokens_in_error(line) == 160062
    assert prompt_tokens_in_error("CUDA out of memory") is None


# ---------------------------------------------------------------------------------------------
# the request body is bench_serving's


def bench_serving_file() -> Path | None:
    """sglang/benchmark/serving.py of the installed wheel, found without importing sglang."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "benchmark" / "serving.py"
    return path if path.is_file() else None


def bench_serving_defaults(tree: ast.Module) -> argparse.Namespace:
    """bench_serving's `args` as its own parser defaults them: every `parser.add_argument` call."""
    values: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in node.keywords}
        long = next((o for o in options if o.startswith("--")), None)
        if long is None:
            continue
        dest = ast.literal_eval(keywords["dest"]) if "dest" in keywords else long[2:].replace("-", "_")
        if "default" in keywords:
            try:
                values[dest] = ast.literal_eval(keywords["default"])
            except ValueError:
                values[dest] = None
        else:
            action = keywords.get("action")
            # argparse: store_true defaults to False, anything else to None.
            values[dest] = False if isinstance(action, ast.Constant) and action.value == "store_true" else None
    return argparse.Namespace(**values)


class _Posted(Exception):
    """Raised by the stub session once the request function has posted its payload."""


def bench_serving_payload(function: str, path_: str, prompt: str, output_len: int, model: str) -> dict[str, Any]:
    """The JSON body bench_serving's own request function posts: the function's source, run against a
    session that records the post instead of sending it (sglang itself is not imported: its package
    needs transformers and a GPU stack)."""
    path = bench_serving_file()
    assert path is not None
    tree = ast.parse(path.read_text())
    wanted = {"RequestFuncInput", "RequestFuncOutput", function}
    nodes = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.AsyncFunctionDef)) and n.name in wanted]
    assert {n.name for n in nodes} == wanted, f"{path}: {wanted - {n.name for n in nodes}} not found"
    posted: dict[str, Any] = {}

    class Session:
        async def __aenter__(self) -> Session:
            return self

        async def __aexit__(self, *exc: object) -> bool:
            return False

        def post(self, url: str, json: dict[str, Any], headers: dict[str, str]) -> Any:
            posted.update(url=url, json=json)
            raise _Posted

    namespace: dict[str, Any] = {
        **{name: getattr(typing, name) for name in ("Any", "Dict", "List", "Optional", "Union")},
        "dataclass": dataclasses.dataclass,
        "field": dataclasses.field,
        "tqdm": object,
        "time": time,
        "sys": sys,
        "traceback": traceback,
        "_create_bench_client_session": Session,
        "get_request_headers": dict,
        "_ROUTING_KEY_HEADER": "X-SMG-Routing-Key",
        "args": bench_serving_defaults(tree),
        "print": lambda *a, **k: None,
    }
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), namespace)
    request = namespace["RequestFuncInput"](
        prompt=prompt, api_url="http://127.0.0.1:30011" + path_, prompt_len=9, output_len=output_len, model=model, lora_name=None, image_data=None, extra_request_body={}
    )
    output = asyncio.run(namespace[function](request))
    assert "_Posted" in output.error, output.error  # it got as far as the post, and no further
    return posted["json"]


@pytest.mark.sglang_parser
@pytest.mark.skipif(bench_serving_file() is None, reason="sglang is not installed (pip install --no-deps sglang==0.5.23)")
def test_request_bodies_are_what_bench_serving_sends_for_the_same_load() -> None:
    prompt, tokens, model = "Write a haiku about GPUs.", 256, "qwen36"
    path, body = request_body("generate", prompt, tokens, model=model)
    assert path == "/generate"
    assert body == bench_serving_payload("async_request_sglang_generate", path, prompt, tokens, model)
    assert body["sampling_params"]["ignore_eos"] is True  # a fixed output length: no early stop at EOS

    path, body = request_body("completions", prompt, tokens, model=model)
    assert path == "/v1/completions"
    bench = bench_serving_payload("async_request_openai_completions", path, prompt, tokens, model)
    assert {k: v for k, v in body.items() if k not in COMPLETIONS_EXTRA_FIELDS} == bench
    assert set(COMPLETIONS_EXTRA_FIELDS).isdisjoint(bench)


def test_request_body_rejects_an_unknown_api() -> None:
    with pytest.raises(ValueError, match="expected 'generate' or 'completions'"):
        request_body("chat", "p", 1, model=None)


# ---------------------------------------------------------------------------------------------
# against a real local HTTP server


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True
    script: list[tuple[float, bytes]]  # (seconds to wait, then bytes to send as one HTTP chunk)
    status: int = 200
    body: bytes = b""
    health_status: int = 200
    # How the stream's end is told: HTTP/1.1 chunks (uvicorn's), or the server closing the
    # connection (HTTP/1.1 with `Connection: close`, or HTTP/1.0: proxies and older servers).
    framing: str = "chunked"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(self.server.health_status)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        if self.server.status != 200:
            self.send_response(self.server.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(self.server.body)))
            self.end_headers()
            self.wfile.write(self.server.body)
            return
        chunked = self.server.framing == "chunked"
        if self.server.framing == "http10":
            self.protocol_version = "HTTP/1.0"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked") if chunked else self.send_header("connection", "close")
        self.end_headers()
        try:
            for delay, data in self.server.script:
                time.sleep(delay)
                if data == b"CLOSE":
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    httpd = ScriptedServer(("127.0.0.1", 0), Handler)
    httpd.script = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def client_for(httpd: ScriptedServer, api: str = "generate") -> Client:
    return Client(Endpoint("127.0.0.1", httpd.server_address[1]), api=api, model="qwen36")


def test_streamed_request_yields_server_counts_and_per_token_timing(server: ScriptedServer) -> None:
    server.script = [
        (0.05, sse(generate_chunk("a", 1))),
        (0.02, sse(generate_chunk("ab", 5))),
        (0.02, sse(generate_chunk("abc", 9, finish={"type": "length", "length": 9}, spec_verify_ct=3, spec_accept_length=3.0))),
        (0.0, sse(b"[DONE]")),
    ]
    outcome = client_for(server).generate("Write fib", 9, deadline_s=5, no_token_timeout_s=2)
    assert outcome.ok and outcome.error_class is None
    assert (outcome.prompt_tokens, outcome.output_tokens, outcome.finish_reason) == (12, 9, "length")
    assert outcome.tokens_per_chunk == [1, 4, 4] and len(outcome.itl_s) == 8
    assert outcome.ttft_s is not None and outcome.ttft_s >= 0.05 and outcome.e2e_s is not None and outcome.e2e_s > outcome.ttft_s
    assert outcome.itl_s[0] == pytest.approx(outcome.itl_s[3]) and outcome.itl_s[0] < 0.02  # a 20 ms gap over 4 tokens
    assert outcome.spec_verify_ct == 3 and outcome.spec_accept_length == 3.0
    assert outcome.tpot_s == pytest.approx((outcome.e2e_s - outcome.ttft_s) / 8)


@pytest.mark.parametrize("framing", ["close", "http10"])
def test_a_stream_whose_end_is_the_connection_closing_is_read_the_same(server: ScriptedServer, framing: str) -> None:
    """A server (or a proxy in front of it) may end the stream by closing the connection instead of
    a last chunk. http.client then hands the socket to the response (HTTPConnection.getresponse
    drops `conn.sock`), and the client must keep its own hold of it for its read timeouts."""
    server.framing = framing
    server.script = [(0.02, sse(generate_chunk("a", 1))), (0.02, sse(generate_chunk("ab", 3, finish={"type": "length", "length": 3}))), (0.0, sse(b"[DONE]"))]
    outcome = client_for(server).generate("Write fib", 3, deadline_s=5, no_token_timeout_s=2)
    assert outcome.ok and outcome.error_class is None, outcome.error_message
    assert (outcome.output_tokens, outcome.finish_reason, outcome.tokens_per_chunk) == (3, "length", [1, 2])
    server.script = [(0.0, sse(generate_chunk("a", 1))), (5.0, sse(generate_chunk("ab", 2)))]
    stalled = client_for(server).generate("Write fib", 3, deadline_s=30, no_token_timeout_s=0.5)
    assert stalled.error_class == NO_TOKEN_TIMEOUT  # the watchdog still holds the socket's timeout


def test_completions_api_streams_through_the_same_client(server: ScriptedServer) -> None:
    server.script = [
        (0.0, sse({"choices": [{"index": 0, "text": " x", "finish_reason": None}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}})),
        (0.0, sse({"choices": [{"index": 0, "text": " y", "finish_reason": "length"}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})),
        (0.0, sse(b"[DONE]")),
    ]
    outcome = client_for(server, api="completions").generate("p", 3, deadline_s=5, no_token_timeout_s=2)
    assert outcome.ok and outcome.output_tokens == 3 and outcome.prompt_tokens == 7 and outcome.text == " x y"


def test_a_stalled_stream_trips_the_no_token_watchdog(server: ScriptedServer) -> None:
    server.script = [(0.0, sse(generate_chunk("a", 1))), (5.0, sse(generate_chunk("ab", 2)))]
    began = time.monotonic()
    outcome = client_for(server).generate("p", 8, deadline_s=30, no_token_timeout_s=0.3)
    assert time.monotonic() - began < 2.0
    assert not outcome.ok and outcome.error_class == NO_TOKEN_TIMEOUT
    assert "after 1 tokens" in (outcome.error_message or "")
    assert outcome.e2e_s is None and outcome.output_tokens == 1


def test_chunks_without_tokens_do_not_feed_the_watchdog(server: ScriptedServer) -> None:
    empty = sse(generate_chunk("a", 1))
    server.script = [(0.0, empty)] + [(0.1, empty)] * 10
    outcome = client_for(server).generate("p", 8, deadline_s=30, no_token_timeout_s=0.35)
    assert outcome.error_class == NO_TOKEN_TIMEOUT


def test_a_steady_stream_past_its_deadline_times_out(server: ScriptedServer) -> None:
    server.script = [(0.1, sse(generate_chunk("a" * n, n))) for n in range(1, 30)]
    outcome = client_for(server).generate("p", 64, deadline_s=0.5, no_token_timeout_s=2)
    assert outcome.error_class == TIMEOUT and 3 <= outcome.output_tokens <= 6


def test_http_400_over_context_keeps_the_whole_message(server: ScriptedServer) -> None:
    long_message = OVER_CONTEXT + " " + "x" * 2000
    server.status = 400
    server.body = json.dumps({"object": "error", "message": long_message, "type": "BadRequestError", "param": None, "code": 400}).encode()
    outcome = client_for(server, api="completions").generate("p", 256, deadline_s=5, no_token_timeout_s=2)
    assert outcome.error_class == HTTP_400_CONTEXT and outcome.http_status == 400
    assert outcome.error_message == f"HTTP 400: {long_message}"
    server.body = json.dumps({"error": {"message": "sampling_params.temperature must be >= 0"}}).encode()
    assert client_for(server).generate("p", 8, deadline_s=5, no_token_timeout_s=2).error_class == HTTP_400
    server.status, server.body = 503, b""
    assert client_for(server).generate("p", 8, deadline_s=5, no_token_timeout_s=2).error_class == HTTP_ERROR


def test_streams_that_end_badly(server: ScriptedServer) -> None:
    server.script = [(0.0, sse(generate_chunk("a", 1)))]  # chunked end without a finish reason
    assert client_for(server).generate("p", 8, deadline_s=5, no_token_timeout_s=2).error_class == INCOMPLETE_STREAM
    server.script = [(0.0, sse(generate_chunk("a", 1))), (0.0, b"CLOSE")]
    assert client_for(server).generate("p", 8, deadline_s=5, no_token_timeout_s=2).error_class in ("connection_reset", INCOMPLETE_STREAM)
    server.script = [(0.0, b"data: {not json\n\n")]
    assert client_for(server).generate("p", 8, deadline_s=5, no_token_timeout_s=2).error_class == BAD_RESPONSE


def test_refused_connection_and_health() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = Client(Endpoint("127.0.0.1", port)).generate("p", 8, deadline_s=5, no_token_timeout_s=2)
    assert outcome.error_class == CONNECTION_REFUSED
    assert not health_ok(Endpoint("127.0.0.1", port), 1.0)


def test_health_reflects_the_status(server: ScriptedServer) -> None:
    endpoint = Endpoint("127.0.0.1", server.server_address[1])
    assert health_ok(endpoint, 1.0)
    server.health_status = 503
    assert not health_ok(endpoint, 1.0)


def test_abort_all_cuts_requests_in_flight_and_refuses_new_ones(server: ScriptedServer) -> None:
    server.script = [(0.0, sse(generate_chunk("a", 1))), (10.0, sse(generate_chunk("ab", 2)))]
    client = client_for(server)
    outcomes = []
    thread = threading.Thread(target=lambda: outcomes.append(client.generate("p", 8, deadline_s=30, no_token_timeout_s=20)))
    thread.start()
    time.sleep(0.3)
    began = time.monotonic()
    client.abort_all()
    thread.join(timeout=5)
    assert time.monotonic() - began < 1.0
    assert outcomes[0].error_class == ABORTED_BY_AGENT
    assert client.generate("p", 8, deadline_s=5, no_token_timeout_s=2).error_class == ABORTED_BY_AGENT
