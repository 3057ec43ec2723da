"""A streaming HTTP client for SGLang's `/generate` and `/v1/completions`. Standard library only.

Every request has a deadline (wall clock from send to the last byte) and a no-token watchdog: the
socket read timeout is never longer than `no_token_timeout_s`, and a stream whose chunks stop
carrying tokens for that long is abandoned too. A hung server therefore costs one watchdog period,
never the whole sweep. `abort_all()` shuts the sockets of requests in flight from another thread,
so an agent that is told to stop does not wait for them.

A request across which the agent itself did not run (fleet.host.agent.pause: stopped, suspended)
says so (`agent_paused_s`), and a time-out it then ended with names the pause: the server may
well have answered while the agent could not read.

Request bodies are those `sglang.bench_serving` sends for the same load (`request_body`), so fleet's
figures and bench_serving's measure the same requests: a fixed output length is asked for with
`ignore_eos` (the server must not stop at an end-of-sequence token before the length), temperature 0.

Inter-token latency under speculative decoding: one streamed chunk can carry k tokens. The gap
before such a chunk is spread evenly over its tokens (k entries of gap/k), so that the per-token
ITL of a chunk averages to that chunk's time per token; one gap plus k-1 zeros would make the
percentiles bimodal (p50 = 0 as soon as most chunks carry two tokens). Tokens per chunk are
recorded as well -- a client-side view of the acceptance length. Tokens that arrive in the same
chunk as the first token belong to the TTFT and get no ITL entry.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from fleet.host.agent.pause import PauseWatch
from fleet.host.failures import FailureClass
from fleet.host.errors import StreamError

CONNECT_TIMEOUT_S = 10.0

# Error classes a request can end with.
# An over-context 400 is the root cause itself: the one vocabulary names it so.
HTTP_400_CONTEXT = FailureClass.CONTEXT_LENGTH_EXCEEDED.value
HTTP_400 = FailureClass.HTTP_400.value
HTTP_ERROR = FailureClass.HTTP_ERROR.value
TIMEOUT = FailureClass.TIMEOUT.value
NO_TOKEN_TIMEOUT = FailureClass.NO_TOKEN_TIMEOUT.value
CONNECTION_REFUSED = FailureClass.CONNECTION_REFUSED.value
CONNECTION_RESET = FailureClass.CONNECTION_RESET.value
SERVER_ERROR_CHUNK = FailureClass.SERVER_ERROR_CHUNK.value
ABORTED_BY_SERVER = FailureClass.ABORTED_BY_SERVER.value
ABORTED_BY_AGENT = FailureClass.ABORTED_BY_AGENT.value
INCOMPLETE_STREAM = FailureClass.INCOMPLETE_STREAM.value
BAD_RESPONSE = FailureClass.BAD_RESPONSE.value
# Classes after which the agent checks whether the server is still alive.
LIVENESS_SUSPECT = frozenset({TIMEOUT, NO_TOKEN_TIMEOUT, CONNECTION_REFUSED, CONNECTION_RESET, INCOMPLETE_STREAM})

# SGLang's over-context texts (TokenizerManager._validate_one_request, and the scheduler's
# older "Input length ... exceeds the maximum allowed length").
_CONTEXT_ERROR = re.compile(
    r"longer than the model's context length|exceeds the model's maximum context length"
    r"|exceeds the maximum allowed length"
    # vLLM 0.33: v1/engine/input_processor.py:589 and renderers/params.py:544.
    r"|is longer than the maximum model length of|This model's maximum context length is"
)
_PROMPT_COUNT_IN_ERROR = re.compile(
    r"The input \((\d+) tokens\)|: (\d+) tokens from the input|Input length \((\d+) tokens\)|The decoder prompt \(length (\d+)\)|your prompt contains (\d+) input tokens"
)


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


@dataclass
class RequestOutcome:
    """One request as the client saw it. Durations in seconds; `started_at` is epoch seconds."""

    started_at: float
    ok: bool = False
    prompt_tokens: int | None = None  # as the server counted them
    output_tokens: int = 0
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)  # one entry per token after the first chunk
    tokens_per_chunk: list[int] = field(default_factory=list)
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    finish_reason: str | None = None
    text: str = ""
    error_class: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    agent_paused_s: float | None = None  # how long the agent itself did not run during the request
    # Open-loop load: how late the client sent the request against its schedule (fleet.host.agent.drive).
    schedule_delay_s: float | None = None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (E2E - TTFT) / (tokens - 1)."""
        if self.e2e_s is None or self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


def is_context_error(message: str) -> bool:
    return bool(_CONTEXT_ERROR.search(message))


def prompt_tokens_in_error(message: str) -> int | None:
    """The prompt length an over-context error reports (the server's own count), if it says."""
    match = _PROMPT_COUNT_IN_ERROR.search(message)
    if not match:
        return None
    return int(next(group for group in match.groups() if group))


# ---------------------------------------------------------------------------------------------
# Pure parts: request bodies, SSE framing, chunk interpretation, token timing

# What fleet adds to bench_serving's /v1/completions body: usage in every chunk, so that a chunk
# carrying several tokens (speculative decoding) is counted as such; and the request's speculative
# statistics (sglang 0.5.23 `CompletionRequest.return_spec_tokens_details`, protocol.py:393), which
# the server sends as a response-level `sglext` chunk (serving_completions.py:444-476), so that a
# run's acceptance length is known on /v1/completions as on /generate. Both change what the
# server reports, not what it generates.
COMPLETIONS_EXTRA_FIELDS: dict[str, Any] = {
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    "return_spec_tokens_details": True,
}


Prompt = Union[str, list[int]]  # text, or token ids (exact lengths in the model's tokens: the `random` workload)


def request_body(api: str, prompt: Prompt, max_new_tokens: int, *, model: str | None, temperature: float = 0.0, ignore_eos: bool = True) -> tuple[str, dict[str, Any]]:
    """The path and JSON body of one streamed request, field for field what sglang 0.5.23's
    bench_serving builds for the same load (`async_request_sglang_generate` and
    `async_request_openai_completions` in sglang/benchmark/serving.py, with bench_serving's defaults:
    no LoRA, no logprobs), plus `COMPLETIONS_EXTRA_FIELDS` on /v1/completions. Token ids go as
    bench_serving sends a tokenized prompt: `input_ids` on /generate, the `prompt` list on /v1/completions."""
    if api == "completions":
        body: dict[str, Any] = {
            "model": model or "default",
            "prompt": prompt,
            "best_of": 1,
            "max_tokens": max_new_tokens,
            "stream": True,
            "temperature": temperature,
            "ignore_eos": ignore_eos,
            **COMPLETIONS_EXTRA_FIELDS,
        }
        return "/v1/completions", body
    if api != "generate":
        raise ValueError(f"api {api!r}: expected 'generate' or 'completions'")
    body = {
        **({"input_ids": prompt} if isinstance(prompt, list) else {"text": prompt}),
        "sampling_params": {"temperature": temperature, "max_new_tokens": max_new_tokens, "ignore_eos": ignore_eos},
        "stream": True,
        "lora_path": None,
        "return_logprob": False,
        "return_routed_experts": False,
        "logprob_start_len": -1,
    }
    return "/generate", body


class SseDecoder:
    """Server-sent events, one line at a time: returns an event's data when its blank line arrives."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed_line(self, line: str) -> str | None:
        line = line.rstrip("\r\n")
        if line == "":
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        """Data of a last event not followed by a blank line (a server that closed early)."""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data


def _error_from_payload(error: Any) -> StreamError:
    message = error.get("message") if isinstance(error, dict) else None
    message = str(message if message is not None else error)
    return StreamError(HTTP_400_CONTEXT if is_context_error(message) else SERVER_ERROR_CHUNK, message)


def _finish_type(reason: Any) -> str | None:
    if isinstance(reason, dict):
        return str(reason.get("type")) if reason.get("type") is not None else None
    return str(reason) if reason is not None else None


@dataclass
class StreamState:
    """What the stream has said so far. `apply_*` take one decoded JSON payload and return the
    number of new tokens it carried."""

    text: str = ""
    completion_tokens: int = 0
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def apply_generate(self, payload: Any) -> int:
        """A `/generate` chunk: cumulative `text` and `meta_info.completion_tokens`."""
        if not isinstance(payload, dict):
            raise StreamError(BAD_RESPONSE, f"expected a JSON object chunk, got {payload!r}")
        if "error" in payload:
            raise _error_from_payload(payload["error"])
        meta = payload.get("meta_info") or {}
        self.meta.update(meta)
        if isinstance(payload.get("text"), str):
            self.text = payload["text"]
        if meta.get("prompt_tokens") is not None:
            self.prompt_tokens = int(meta["prompt_tokens"])
        new_tokens = 0
        if meta.get("completion_tokens") is not None:
            total = int(meta["completion_tokens"])
            new_tokens, self.completion_tokens = max(total - self.completion_tokens, 0), max(total, self.completion_tokens)
        finish = _finish_type(meta.get("finish_reason"))
        if finish is not None:
            self.finish_reason = finish
            if finish == "abort":
                reason = meta["finish_reason"]
                detail = reason.get("message") if isinstance(reason, dict) else None
                raise StreamError(ABORTED_BY_SERVER, str(detail or reason))
        return new_tokens

    def apply_completions(self, payload: Any) -> int:
        """A `/v1/completions` chunk: delta text per choice; `usage` per chunk when the server
        honours `continuous_usage_stats`, else only in the last chunk (one token per text chunk)."""
        if not isinstance(payload, dict):
            raise StreamError(BAD_RESPONSE, f"expected a JSON object chunk, got {payload!r}")
        if "error" in payload or payload.get("object") == "error":
            raise _error_from_payload(payload.get("error", payload))
        details = (payload.get("sglext") or {}).get("spec_tokens_details")
        if isinstance(details, dict):  # one choice (n == 1): a SpecTokensDetails object
            self.meta.update({k: details[k] for k in ("spec_verify_ct", "spec_accept_length") if details.get(k) is not None})
        choices = payload.get("choices") or []
        delta = "".join(str(c.get("text") or "") for c in choices if isinstance(c, dict))
        self.text += delta
        for choice in choices:
            if isinstance(choice, dict) and choice.get("finish_reason") is not None:
                self.finish_reason = _finish_type(choice["finish_reason"])
        usage = payload.get("usage") or {}
        if usage.get("prompt_tokens") is not None:
            self.prompt_tokens = int(usage["prompt_tokens"])
        if usage.get("completion_tokens") is not None:
            total = int(usage["completion_tokens"])
            new_tokens, self.completion_tokens = max(total - self.completion_tokens, 0), max(total, self.completion_tokens)
            return new_tokens
        if delta:
            self.completion_tokens += 1
            return 1
        return 0


@dataclass
class TokenClock:
    """Arrival times of tokens, relative to the request's send time."""

    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    tokens_per_chunk: list[int] = field(default_factory=list)
    _last: float | None = None

    def arrived(self, elapsed_s: float, tokens: int) -> None:
        if tokens <= 0:
            return
        self.tokens_per_chunk.append(tokens)
        if self._last is None:
            self.ttft_s = elapsed_s
        else:
            gap = (elapsed_s - self._last) / tokens
            self.itl_s.extend([gap] * tokens)
        self._last = elapsed_s


# ---------------------------------------------------------------------------------------------
# I/O


class _InFlight:
    """Sockets of requests in flight, so that another thread can cut them all at once, and what
    else to cut then (requests sent from other processes: `Client.on_abort`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._cuts: list[Callable[[], None]] = []
        self.aborted = threading.Event()

    def on_abort(self, cut: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._cuts.append(cut)
        if self.aborted.is_set():
            cut()

        def remove() -> None:
            with self._lock:
                self._cuts.remove(cut)

        return remove

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def discard(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def abort_all(self) -> None:
        self.aborted.set()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            cuts = list(self._cuts)
        for cut in cuts:
            cut()


class Client:
    """Requests against one server. Thread-safe: each request uses its own connection.
    `pauses`: the agent's watch on its own gaps, to tell them apart from the server's silences."""

    def __init__(self, endpoint: Endpoint, *, api: str = "generate", model: str | None = None, pauses: PauseWatch | None = None) -> None:
        self.endpoint = endpoint
        self.api = api
        self.model = model
        self.pauses = pauses
        self._in_flight = _InFlight()

    def abort_all(self) -> None:
        """Cut every request in flight and refuse new ones (they end as aborted_by_agent)."""
        self._in_flight.abort_all()

    def on_abort(self, cut: Callable[[], None]) -> Callable[[], None]:
        """Call `cut` too when `abort_all` is called (at once if it has been): an open loop's
        sending processes send with clients of their own (fleet.host.agent.senders), which this
        one's `abort_all` must reach. Returns what removes `cut`."""
        return self._in_flight.on_abort(cut)

    def generate(
        self,
        prompt: Prompt,
        max_new_tokens: int,
        *,
        deadline_s: float,
        no_token_timeout_s: float,
        temperature: float = 0.0,
        ignore_eos: bool = True,
    ) -> RequestOutcome:
        outcome = RequestOutcome(started_at=time.time())
        if self._in_flight.aborted.is_set():
            outcome.error_class, outcome.error_message = ABORTED_BY_AGENT, "the agent is stopping"
            return outcome
        path, fields = request_body(self.api, prompt, max_new_tokens, model=self.model, temperature=temperature, ignore_eos=ignore_eos)
        body = json.dumps(fields).encode()
        mark = self.pauses.mark() if self.pauses is not None else 0
        start = time.monotonic()
        clock = TokenClock()
        state = StreamState()
        conn = http.client.HTTPConnection(self.endpoint.host, self.endpoint.port, timeout=CONNECT_TIMEOUT_S)
        # The client's own hold of the socket: for a response that ends when the server closes the
        # connection (`Connection: close`, HTTP/1.0), getresponse hands the socket to the response
        # and drops `conn.sock`, and the read timeouts and abort_all still need it.
        sock: socket.socket | None = None
        try:
            conn.connect()
            sock = conn.sock
            assert sock is not None
            self._in_flight.add(sock)
            sock.settimeout(min(no_token_timeout_s, deadline_s))
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
            response = conn.getresponse()
            outcome.http_status = response.status
            if response.status != 200:
                raise _http_error(response)
            self._read_stream(response, sock, state, clock, start, deadline_s, no_token_timeout_s)
            outcome.ok = True
        except StreamError as exc:
            outcome.error_class, outcome.error_message = exc.error_class, exc.message
        except (TimeoutError, socket.timeout):
            outcome.error_class, outcome.error_message = _timeout_class(start, deadline_s, no_token_timeout_s, clock)
        except ConnectionRefusedError as exc:
            outcome.error_class, outcome.error_message = CONNECTION_REFUSED, f"{self.endpoint.host}:{self.endpoint.port}: {exc}"
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            outcome.error_class, outcome.error_message = CONNECTION_RESET, f"{type(exc).__name__}: {exc}"
        finally:
            if sock is not None:
                self._in_flight.discard(sock)
            conn.close()
        if not outcome.ok and self._in_flight.aborted.is_set():
            # The agent cut the socket: whatever the read then saw (EOF, reset) is not the server's fault.
            outcome.error_class, outcome.error_message = ABORTED_BY_AGENT, "the agent is stopping"
        outcome.e2e_s = time.monotonic() - start if outcome.ok else None
        gaps = self.pauses.since(mark) if self.pauses is not None else []
        if gaps:
            outcome.agent_paused_s = sum(gap.seconds for gap in gaps)
            if outcome.error_class in (TIMEOUT, NO_TOKEN_TIMEOUT):
                outcome.error_message = f"{outcome.error_message}; but {gaps[-1].describe()} during this request: not the server's"
        outcome.prompt_tokens = state.prompt_tokens
        outcome.output_tokens = state.completion_tokens
        outcome.ttft_s = clock.ttft_s
        outcome.itl_s = clock.itl_s
        outcome.tokens_per_chunk = clock.tokens_per_chunk
        outcome.finish_reason = state.finish_reason
        outcome.text = state.text
        if state.meta.get("spec_verify_ct") is not None:
            outcome.spec_verify_ct = int(state.meta["spec_verify_ct"])
        if state.meta.get("spec_accept_length") is not None:
            outcome.spec_accept_length = float(state.meta["spec_accept_length"])
        return outcome

    def _read_stream(
        self,
        response: http.client.HTTPResponse,
        sock: socket.socket,
        state: StreamState,
        clock: TokenClock,
        start: float,
        deadline_s: float,
        no_token_timeout_s: float,
    ) -> None:
        decoder = SseDecoder()
        apply = state.apply_completions if self.api == "completions" else state.apply_generate
        last_token = start
        while True:
            now = time.monotonic()
            remaining = deadline_s - (now - start)
            watchdog = no_token_timeout_s - (now - last_token)
            if remaining <= 0 or watchdog <= 0:
                raise socket.timeout()
            sock.settimeout(min(remaining, watchdog))
            raw = response.readline()
            if not raw:
                data = decoder.flush()
                if data is None or data == "[DONE]":
                    break
            else:
                data = decoder.feed_line(raw.decode("utf-8", errors="replace"))
                if data is None:
                    continue
            if data == "[DONE]":
                break
            try:
                payload = json.loads(data)
            except json.JSONDecodeError as exc:
                raise StreamError(BAD_RESPONSE, f"not JSON: {data!r}: {exc}") from exc
            tokens = apply(payload)
            if tokens:
                last_token = time.monotonic()
                clock.arrived(last_token - start, tokens)
        if state.finish_reason is None:
            raise StreamError(INCOMPLETE_STREAM, f"the stream ended after {state.completion_tokens} tokens without a finish reason")


def _timeout_class(start: float, deadline_s: float, no_token_timeout_s: float, clock: TokenClock) -> tuple[str, str]:
    elapsed = time.monotonic() - start
    if elapsed >= deadline_s - 0.05:
        return TIMEOUT, f"the request did not finish within its {deadline_s:.0f} s deadline"
    got = sum(clock.tokens_per_chunk)
    return NO_TOKEN_TIMEOUT, f"no token for {no_token_timeout_s:.0f} s (after {got} tokens, {elapsed:.1f} s into the request)"


def _http_error(response: http.client.HTTPResponse) -> StreamError:
    raw = response.read().decode("utf-8", errors="replace")
    message = raw
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message") is not None:
            message = str(error["message"])
        elif data.get("message") is not None:
            message = str(data["message"])
        elif data.get("detail") is not None:
            message = str(data["detail"])
    text = f"HTTP {response.status}: {message}"
    if response.status == 400:
        return StreamError(HTTP_400_CONTEXT if is_context_error(message) else HTTP_400, text)
    return StreamError(HTTP_ERROR, text)


def get_json(endpoint: Endpoint, path: str, timeout_s: float) -> Any:
    """GET a JSON document; raises OSError / http.client.HTTPException / ValueError on failure."""
    return json.loads(get_body(endpoint, path, timeout_s))


# A /metrics text of a server with many labels runs to a few hundred KiB; a body past this is no
# server's answer to trust (a host's process on the port is untrusted input too).
MAX_BODY_BYTES = 16 << 20


def get_body(endpoint: Endpoint, path: str, timeout_s: float) -> bytes:
    """GET a 200 body of at most MAX_BODY_BYTES; raises OSError / http.client.HTTPException / ValueError."""
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read(MAX_BODY_BYTES + 1)
        if response.status != 200:
            raise ValueError(f"GET {path}: HTTP {response.status}: {body[:2000].decode('utf-8', errors='replace')}")
        if len(body) > MAX_BODY_BYTES:
            raise ValueError(f"GET {path}: a body of more than {MAX_BODY_BYTES} bytes")
        return body
    finally:
        conn.close()


def health_ok(endpoint: Endpoint, timeout_s: float) -> bool:
    """`GET /health` answered 200 within the timeout (SGLang runs a 1-token generation behind it)."""
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout_s)
    try:
        conn.request("GET", "/health")
        response = conn.getresponse()
        response.read()
        return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
