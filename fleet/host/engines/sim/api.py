"""SGLang's HTTP API on top of the simulated engine: the routes, request validation and the exact
JSON and SSE shapes of `entrypoints/http_server.py` and `entrypoints/openai/serving_*.py` (0.5.23;
tests/integration/test_sim_conformance.py checks them against that wheel's protocol models).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fleet.host.engines.sglang.flags import FORK_FLAGS, fleet_field, load_table
from fleet.host.engines.sglang.release import DEFAULT_SIM_RELEASE, KNOWN_RELEASES, parse_version
from fleet.host import tokens
from fleet.host.engines.sim import metrics, sgltext
from fleet.host.engines.sim.console import ERROR, WARNING, Console
from fleet.host.engines.sim.engine import Engine, SimRequest
from fleet.host.engines.sim.httpserver import Connection, HttpRequest, dumps
from fleet.host.errors import RequestError

HEALTH_CHECK_TIMEOUT_S = 20  # sglang's HEALTH_CHECK_TIMEOUT
DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams.max_new_tokens
DEFAULT_COMPLETION_MAX_TOKENS = 16  # CompletionRequest.max_tokens


@dataclass
class ServerState:
    server_args: dict[str, Any]  # ServerArgs fields, resolved
    scheduler_info: dict[str, Any]  # status, max_total_num_tokens, max_req_input_len
    context_len: int
    served_model_name: str
    model_type: str
    architectures: list[str]
    has_image_understanding: bool
    memory_usage: dict[str, Any]
    max_running_requests: int
    reserved_spec_tokens: int  # EAGLE reserves draft slots on top of the input
    spec_num_draft_tokens: int | None
    started_at: float
    ready_at: float | None = None
    load_weights_s: float = 0.0
    status: str = "Starting"  # Starting | Up | UnHealthy (ServerStatus)
    version: str = DEFAULT_SIM_RELEASE  # /get_server_info's `version`: the release the sim plays
    created: int = field(default_factory=lambda: int(time.time()))
    launch_command: str | None = None  # /server_info's launch_command (0.5.23)

    @property
    def since_0523(self) -> bool:
        """Whether the release played answers with 0.5.23's shapes (older ones keep the sim's earlier ones)."""
        return parse_version(self.version) >= (0, 5, 23)

    def startup_time(self) -> dict[str, Any]:
        """TokenizerManager.startup_time (0.5.23 observability/startup_time.py:11 build_scheduler_startup_time,
        plus tokenizer_e2e): seconds per start-up phase."""
        total = (self.ready_at or time.time()) - self.started_at
        return {"load_weight": self.load_weights_s, "kv_cache_allocation": 0.0, "scheduler_e2e": total, "cuda_graph": {}, "tokenizer_e2e": total}


def openai_error(message: str, error_type: str = "BadRequestError", code: int = 400) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": error_type, "param": None, "code": code}


def finish_type(request: SimRequest) -> str | None:
    return request.finish_reason["type"] if request.finish_reason else None


def matched_stop(request: SimRequest) -> Any:
    return request.finish_reason.get("matched") if request.finish_reason else None


class Api:
    def __init__(self, state: ServerState, engine: Engine, console: Console, speed: float, enable_metrics: bool, enable_cache_report: bool) -> None:
        self.state = state
        self.engine = engine
        self.console = console
        self.speed = speed
        self.enable_metrics = enable_metrics
        self.enable_cache_report = enable_cache_report
        self.streamed = metrics.StreamTally()  # the streamed requests' share of the engine's counters
        self.routes: dict[tuple[str, str], Callable[[HttpRequest, Connection], Any]] = {
            ("GET", "/health"): self.health,
            ("GET", "/health_generate"): self.health,
            ("GET", "/ready"): self.ready,
            ("GET", "/model_info"): self.model_info,
            ("GET", "/get_model_info"): self.deprecated_info,
            ("GET", "/server_info"): self.server_info,
            ("GET", "/get_server_info"): self.deprecated_info,
            ("GET", "/v1/models"): self.models,
            ("POST", "/generate"): self.generate,
            ("PUT", "/generate"): self.generate,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/v1/chat/completions"): self.chat_completions,
            ("POST", "/flush_cache"): self.flush_cache,
            ("GET", "/flush_cache"): self.flush_cache,
        }
        if enable_metrics:
            self.routes[("GET", "/metrics")] = self.metrics

    async def __call__(self, request: HttpRequest, connection: Connection) -> None:
        api_key = self.state.server_args.get("api_key")
        # utils/auth.py: health and metrics stay open; everything else needs the bearer token.
        if api_key and not request.path.startswith(("/health", "/metrics")) and (request.headers.get("authorization") != f"Bearer {api_key}"):
            return connection.send(401, {"error": "Unauthorized"})
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            if request.method == "GET" and request.path.startswith("/v1/models/"):
                return self.model_card(request, connection, request.path[len("/v1/models/") :])
            known_path = any(path == request.path for _, path in self.routes)
            if known_path:
                return connection.send(405, {"detail": "Method Not Allowed"})
            return connection.send(404, {"detail": "Not Found"})
        try:
            await handler(request, connection)
        except ValueError as exc:  # malformed JSON body
            if not connection.responded:
                connection.send(400, {"error": {"message": f"Invalid request body: {exc}"}})

    # --- health and info -----------------------------------------------------------------------

    async def health(self, request: HttpRequest, connection: Connection) -> None:
        """Sends a 1-token generation; 200 as soon as the scheduler shows any progress."""
        if self.state.status == "Starting":
            return connection.send(503, b"")
        sink = _DiscardSink()
        probe = self.engine.new_request(None, 1, 1, sink, log_metrics=False)
        tic = time.time()
        self.engine.submit(probe)
        deadline = tic + HEALTH_CHECK_TIMEOUT_S * self.speed
        while time.time() < deadline:
            await asyncio.sleep(self.speed)
            if self.engine.last_progress > tic:
                self.engine.abort(probe)
                self.state.status = "Up"
                return connection.send(200, b"")
        self.engine.abort(probe)
        self.console.main(sgltext.health_check_failed(HEALTH_CHECK_TIMEOUT_S, tic, self.engine.last_progress), ERROR)
        self.state.status = "UnHealthy"
        connection.send(503, b"")

    async def ready(self, request: HttpRequest, connection: Connection) -> None:
        """0.5.23 http_server.py:714: 200 once the server is Up (TokenizerManager.is_ready), else 503, no body."""
        connection.send(200 if self.state.status == "Up" else 503, b"")

    def _model_info(self) -> dict[str, Any]:
        args = self.state.server_args
        if self.state.since_0523:
            # 0.5.23 http_server.py:812-843, key for key.
            return {
                "model_path": args["model_path"],
                "served_model_name": self.state.served_model_name,
                "tokenizer_path": args["tokenizer_path"],
                "is_generation": True,
                "preferred_sampling_params": args.get("preferred_sampling_params"),
                "weight_version": args.get("weight_version", "default"),
                "load_format": args.get("load_format", "auto"),
                "reasoning_parser": args.get("reasoning_parser"),
                "tool_call_parser": args.get("tool_call_parser"),
                "disaggregation_mode": args.get("disaggregation_mode", "null"),
                "has_image_understanding": self.state.has_image_understanding,
                "has_audio_understanding": False,
                "model_type": self.state.model_type,
                "architectures": self.state.architectures,
            }
        return {
            "model_path": args["model_path"],
            "tokenizer_path": args["tokenizer_path"],
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": self.state.has_image_understanding,
            "has_audio_understanding": False,
            "model_type": self.state.model_type,
            "architectures": self.state.architectures,
        }

    async def model_info(self, request: HttpRequest, connection: Connection) -> None:
        connection.send(200, self._model_info())

    async def deprecated_info(self, request: HttpRequest, connection: Connection) -> None:
        """/get_model_info and /get_server_info: the same data, with SGLang's deprecation warning."""
        current = request.path.replace("/get_", "/", 1)
        self.console.main(
            f"Endpoint '{request.path}' is deprecated and will be removed in a future version. Please use '{current}' instead.",
            WARNING,
        )
        connection.send(200, self._model_info() if current == "/model_info" else self._server_info())

    def _server_info(self) -> dict[str, Any]:
        stats = self.engine.stats
        internal = dict(self.state.server_args)
        internal["last_gen_throughput"] = stats.last_gen_throughput
        internal["memory_usage"] = self.state.memory_usage
        internal["effective_max_running_requests_per_dp"] = self.state.max_running_requests
        if stats.avg_spec_accept_length is not None:
            internal["avg_spec_accept_length"] = stats.avg_spec_accept_length
        if self.state.since_0523:
            # 0.5.23 http_server.py:863-892 over utils/common.py:3584 build_server_info: the resolved
            # fields, launch_command, the scheduler's info (with its startup_time), kv_events, then
            # the tokenizer's startup_time, internal_states, version and frontend.
            return {
                **self._release_fields(),
                "launch_command": self.state.launch_command,
                **self.state.scheduler_info,
                "startup_time": self.state.startup_time(),
                "kv_events": None,
                "internal_states": [internal],
                "version": self.state.version,
                "frontend": "python",
            }
        return {
            **self.state.server_args,
            **self.state.scheduler_info,
            "internal_states": [internal],
            "version": self.state.version,
            "kv_events": None,
        }

    def _release_fields(self) -> dict[str, Any]:
        """The resolved settings under the played release's ServerArgs field names (0.5.23 server_args.py:316
        resolved_dict): fleet's 0.5.12 names renamed (flags.RELEASE_FLAGS), settings that are no field of
        the release (a fork's when unset, fleet's own) left out."""
        args = self.state.server_args
        release = self.state.version
        if release not in KNOWN_RELEASES:
            return dict(args)
        fork_dests = {flag["dest"] for flags in FORK_FLAGS.values() for flag in flags}
        dests = {action["dest"] for action in load_table(release).actions} | fork_dests
        fields: dict[str, Any] = {}
        for key, value in args.items():
            name = fleet_field(release, key)
            if name != key:
                if name not in args:
                    fields[name] = value
            elif key in dests and not (key in fork_dests and value is None):
                fields[key] = value
        return fields

    async def server_info(self, request: HttpRequest, connection: Connection) -> None:
        connection.send(200, self._server_info())

    def _model_card(self) -> dict[str, Any]:
        name = self.state.served_model_name
        return {"id": name, "object": "model", "created": self.state.created, "owned_by": "sglang", "root": name, "parent": None, "max_model_len": self.state.context_len}

    async def models(self, request: HttpRequest, connection: Connection) -> None:
        connection.send(200, {"object": "list", "data": [self._model_card()]})

    def model_card(self, request: HttpRequest, connection: Connection, name: str) -> None:
        if name != self.state.served_model_name:
            return connection.send(404, {"error": {"message": f"The model '{name}' does not exist", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}})
        connection.send(200, self._model_card())

    async def flush_cache(self, request: HttpRequest, connection: Connection) -> None:
        """http_server.flush_cache: 200 once the scheduler emptied its radix cache, 400 when requests
        were running or waiting (it then flushes nothing)."""
        if self.engine.flush_cache():
            connection.send(
                200,
                b"Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n",
                "text/plain; charset=utf-8",
            )
        else:
            connection.send(400, b"Flush cache failed.\n", "text/plain; charset=utf-8")

    async def metrics(self, request: HttpRequest, connection: Connection) -> None:
        engine = self.engine
        stats = engine.stats
        config = engine.config
        used = sum(r.context_tokens for r in engine.running)
        snapshot = metrics.MetricsSnapshot(
            model_name=self.state.served_model_name,
            num_running_reqs=len(engine.running),
            num_queue_reqs=len(engine.waiting),
            num_used_tokens=used,
            token_usage=used / config.max_total_num_tokens,
            mamba_usage=len(engine.running) / config.max_mamba_cache_size if config.max_mamba_cache_size else 0.0,
            max_total_num_tokens=config.max_total_num_tokens,
            context_len=config.context_len,
            gen_throughput=stats.last_gen_throughput,
            cache_hit_rate=stats.cached_tokens / stats.prompt_tokens if stats.prompt_tokens else 0.0,
            spec_accept_length=stats.avg_spec_accept_length,
            spec_accept_rate=(
                (stats.accepted_tokens - stats.verify_ct) / (stats.verify_ct * max(self.state.spec_num_draft_tokens - 1, 1)) if stats.verify_ct and self.state.spec_num_draft_tokens else None
            ),
            spec_num_draft_tokens=self.state.spec_num_draft_tokens,
            spec_verify_calls=stats.verify_ct,
            prompt_tokens=stats.prompt_tokens,
            generation_tokens=stats.generation_tokens,
            num_requests=stats.num_requests,
            num_aborted_requests=stats.num_aborted,
            is_cuda_graph=config.cuda_graph_max_bs > 0,
            engine_startup_time=(self.state.ready_at or time.time()) - self.state.started_at,
            engine_load_weights_time=self.state.load_weights_s,
            ttft=stats.ttft,
            itl=stats.itl,
            e2e=stats.e2e,
            since_0523=self.state.since_0523,
            streamed=self.streamed,
        )
        connection.send(200, metrics.render(snapshot).encode(), "text/plain; version=0.0.4; charset=utf-8")

    # --- generation ----------------------------------------------------------------------------

    def _validate_length(self, input_tokens: int, max_new_tokens: int | None) -> None:
        """TokenizerManager._validate_one_request."""
        context = self.state.context_len
        counted = input_tokens + self.state.reserved_spec_tokens
        if counted >= context:
            raise RequestError(sgltext.input_exceeds_context(counted, context))
        if max_new_tokens is not None and counted + max_new_tokens > context:
            raise RequestError(sgltext.context_exceeded(context, counted + max_new_tokens, counted, max_new_tokens))

    def _meta_info(self, request: SimRequest) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": request.rid,
            "finish_reason": request.finish_reason,
            "prompt_tokens": request.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": request.completion_tokens,
            "cached_tokens": request.cached_tokens,
        }
        if request.finish_reason is not None:
            meta["e2e_latency"] = request.e2e_latency
            drafts = self.state.spec_num_draft_tokens
            if drafts and request.verify_ct > 0:
                proposed = request.verify_ct * (drafts - 1)
                meta["spec_accept_rate"] = request.correct_drafts / proposed
                meta["spec_accept_length"] = request.completion_tokens / request.verify_ct
                meta["spec_num_correct_drafts"] = request.correct_drafts
                meta["spec_num_proposed_drafts"] = proposed
                meta["spec_verify_ct"] = request.verify_ct
                if self.state.since_0523:
                    # 0.5.23 tokenizer_manager.py:3138-3200 _calculate_spec_decoding_metrics: no older
                    # aliases; the histogram only when it has entries.
                    if len(request.histogram):
                        meta["spec_correct_drafts_histogram"] = list(request.histogram)
                    return meta
                meta["spec_accepted_drafts"] = request.correct_drafts
                meta["spec_proposed_drafts"] = proposed
                meta["spec_correct_drafts_histogram"] = list(request.histogram)
                meta["spec_accept_histogram"] = list(request.histogram)
        return meta

    async def generate(self, request: HttpRequest, connection: Connection) -> None:
        body = request.json()
        if not isinstance(body, dict):
            return connection.send(400, {"error": {"message": "The request body must be a JSON object."}})
        stream = bool(body.get("stream"))
        params = body.get("sampling_params") or {}
        max_new_tokens = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        stop_at_eos = not params.get("ignore_eos", False)  # SamplingParams.ignore_eos defaults to False
        prompts = _generate_prompts(body)
        if not prompts:
            return self._generate_error(connection, stream, "Either text or input_ids should be provided.")
        if stream and len(prompts) > 1:
            return self._generate_error(connection, stream, "The simulator streams one prompt per request, not a batch.")
        try:
            for _, _, prompt_tokens in prompts:
                self._validate_length(prompt_tokens, max_new_tokens)
        except RequestError as exc:
            return self._generate_error(connection, stream, str(exc))
        if stream:
            sink = _GenerateStream(connection, self)
            text, ids, tokens = prompts[0]
            sim_request = self.engine.new_request(text, tokens, max_new_tokens, sink, prompt_ids=ids, stop_at_eos=stop_at_eos)
            connection.start_stream()
            self.engine.submit(sim_request)
            await sink.done
            return
        sinks = [_Collect() for _ in prompts]
        collected = [self.engine.new_request(text, tokens, max_new_tokens, sink, prompt_ids=ids, stop_at_eos=stop_at_eos) for (text, ids, tokens), sink in zip(prompts, sinks)]
        for sim_request in collected:
            self.engine.submit(sim_request)
        await asyncio.gather(*(sink.done for sink in sinks))
        for sim_request in collected:
            reason = sim_request.finish_reason or {}
            if reason.get("type") == "abort" and reason.get("status_code"):
                self.console.main(sgltext.http_error(reason["message"]), ERROR)
                return connection.send(400, {"error": {"message": reason["message"]}})
        results = [{"text": r.text, "output_ids": r.output_ids, "meta_info": self._meta_info(r)} for r in collected]
        # A batch (a list of texts or of input_ids lists) gets a list back, one prompt a single object.
        connection.send(200, results if _is_batch(body) else results[0])

    def _generate_error(self, connection: Connection, stream: bool, message: str) -> None:
        self.console.main(sgltext.http_error(message), ERROR)
        if stream:
            connection.start_stream()
            error = {"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}}
            connection.write_chunk(b"data: " + dumps(error) + b"\n\n")
            connection.write_chunk(b"data: [DONE]\n\n")
            connection.end_stream()
        else:
            connection.send(400, {"error": {"message": message}})

    async def completions(self, request: HttpRequest, connection: Connection) -> None:
        body = request.json()
        if not isinstance(body, dict) or "prompt" not in body:
            return connection.send(400, openai_error("The request must have a prompt."))
        prompt = body["prompt"]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            prompt = prompt[0]
        ids: list[int] | None = None
        if isinstance(prompt, str):
            text: str | None = prompt
            prompt_tokens = tokens.count_tokens(prompt)
        else:
            text = None
            ids = prompt[0] if prompt and isinstance(prompt[0], list) else prompt
            prompt_tokens = len(ids or [])
        max_tokens = body.get("max_tokens", DEFAULT_COMPLETION_MAX_TOKENS)
        await self._openai(body, connection, text, prompt_tokens, max_tokens, chat=False, prompt_ids=ids)

    async def chat_completions(self, request: HttpRequest, connection: Connection) -> None:
        body = request.json()
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            return connection.send(400, openai_error("The request must have a non-empty list of messages."))
        text = "\n".join(tokens.message_text(m) for m in messages if isinstance(m, dict))
        prompt_tokens = tokens.count_chat_tokens([m for m in messages if isinstance(m, dict)])
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        await self._openai(body, connection, text, prompt_tokens, max_tokens, chat=True)

    async def _openai(self, body: dict, connection: Connection, text: str | None, prompt_tokens: int, max_tokens: int | None, chat: bool, prompt_ids: list[int] | None = None) -> None:
        try:
            self._validate_length(prompt_tokens, max_tokens)
        except RequestError as exc:
            # Streaming requests are validated before the 200 goes out: same 400 JSON.
            return connection.send(400, self._request_error(str(exc)))
        model = body.get("model") or self.state.served_model_name
        stream = bool(body.get("stream"))
        # 0.5.23 entrypoints/openai/utils.py:250 should_include_usage (the server's default include_usage,
        # --stream-response-default-include-usage, when the request has no stream_options).
        options = body.get("stream_options")
        default_usage = bool(self.state.server_args.get("stream_response_default_include_usage"))
        include_usage = bool(options.get("include_usage")) or default_usage if isinstance(options, dict) and options else default_usage
        continuous_usage = bool(options.get("continuous_usage_stats")) if isinstance(options, dict) and options else False
        spec_details = bool(body.get("return_spec_tokens_details"))
        sink: _Sink = _OpenAIStream(connection, self, model, chat, include_usage, spec_details, continuous_usage) if stream else _Collect()
        sim_request = self.engine.new_request(text, prompt_tokens, max_tokens, sink, prompt_ids=prompt_ids, stop_at_eos=not body.get("ignore_eos", False))
        if stream:
            connection.start_stream()
        self.engine.submit(sim_request)
        await sink.done
        if stream:
            return
        reason = sim_request.finish_reason or {}
        if reason.get("type") == "abort" and reason.get("status_code"):
            return connection.send(400, openai_error(reason["message"]))
        usage = self._usage(sim_request)
        # The response-level sglext (0.5.23 serving_completions.py:548-572, serving_chat.py:2891): only
        # what was asked for and exists, so no key at all without speculative decoding.
        details = spec_tokens_details(self._meta_info(sim_request)) if spec_details else None
        if chat:
            # ChatMessage (protocol.py:1293) drops tool_calls when None; 0.5.12's sim answer kept it.
            message = {"role": "assistant", "content": sim_request.text, "reasoning_content": None}
            if not self.state.since_0523:
                message["tool_calls"] = None
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_type(sim_request),
                "matched_stop": matched_stop(sim_request),
            }
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": sim_request.text, "logprobs": None, "finish_reason": finish_type(sim_request), "matched_stop": matched_stop(sim_request)}
            kind = "text_completion"
        response = {"id": sim_request.rid, "object": kind, "created": int(time.time()), "model": model, "choices": [choice], "usage": usage, "metadata": {"weight_version": "default"}}
        if details is not None and self.state.since_0523:
            response["sglext"] = {"spec_tokens_details": details}
        connection.send(200, response)

    def _request_error(self, message: str) -> dict[str, Any]:
        """The body of a 400 for a request refused before it runs (SGLang's ErrorResponse)."""
        return openai_error(message)

    def _usage(self, request: SimRequest, cache_report: bool | None = None) -> dict[str, Any]:
        """UsageProcessor.calculate_token_usage (0.5.23 usage_processor.py:96-131) as UsageInfo dumps it
        (protocol.py:221): completion_tokens_details only when there are reasoning tokens (never here)."""
        report = self.enable_cache_report if cache_report is None else cache_report
        details = {"cached_tokens": request.cached_tokens} if report else None
        usage: dict[str, Any] = {
            "prompt_tokens": request.prompt_tokens,
            "total_tokens": request.prompt_tokens + request.completion_tokens,
            "completion_tokens": request.completion_tokens,
            "prompt_tokens_details": details,
            "reasoning_tokens": 0,
        }
        if self.state.since_0523:
            usage["completion_tokens_details"] = None
        return usage


def _is_batch(body: dict[str, Any]) -> bool:
    text, input_ids = body.get("text"), body.get("input_ids")
    return isinstance(text, list) or (isinstance(input_ids, list) and bool(input_ids) and isinstance(input_ids[0], list))


def _generate_prompts(body: dict[str, Any]) -> list[tuple[str | None, list[int] | None, int]]:
    """(text, token ids, prompt tokens) per prompt of a /generate body: `text` (a string or a list of
    them) or `input_ids` (a list of ids or a list of such lists)."""
    text, input_ids = body.get("text"), body.get("input_ids")
    if isinstance(text, str):
        return [(text, None, tokens.count_tokens(text))]
    if isinstance(text, list):
        return [(t, None, tokens.count_tokens(t)) for t in text if isinstance(t, str)]
    if isinstance(input_ids, list) and input_ids:
        batches = input_ids if isinstance(input_ids[0], list) else [input_ids]
        return [(None, ids, len(ids)) for ids in batches]
    return []


class _Sink:
    def __init__(self) -> None:
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None:
        pass

    def on_finish(self, request: SimRequest) -> None:
        if not self.done.done():
            self.done.set_result(None)


class _Collect(_Sink):
    """Non-streamed responses: everything is read from the request once it finishes."""


class _DiscardSink:
    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None:
        pass

    def on_finish(self, request: SimRequest) -> None:
        pass


class _StreamSink(_Sink):
    def __init__(self, connection: Connection, api: Api) -> None:
        super().__init__()
        self.connection = connection
        self.api = api
        self._counted_tokens = 0
        self._first_seen = False
        api.streamed.num_requests += 1  # counted at submission, as the engine counts every request

    def tally(self, request: SimRequest) -> None:
        """The streamed share of the tokenizer counters split by is_streaming (0.5.23 metrics_collector.py:1856-1963):
        prompt tokens and TTFT at the first output (when the engine counts them), generated tokens as they come."""
        tally = self.api.streamed
        if not self._first_seen and request.first_token_at is not None:
            self._first_seen = True
            tally.prompt_tokens += request.prompt_tokens
            tally.ttft.observe(request.first_token_at - request.created)
        tally.generation_tokens += request.completion_tokens - self._counted_tokens
        self._counted_tokens = request.completion_tokens

    def _send(self, request: SimRequest, payload: bytes) -> None:
        if not self.connection.write_chunk(payload):
            # The client hung up: SGLang aborts the request (create_abort_task).
            self.api.engine.abort(request)
            self.on_finish(request)

    def on_finish(self, request: SimRequest) -> None:
        if not self.done.done():
            if request.finished_at is not None:
                self.api.streamed.e2e.observe(request.e2e_latency)
            self.connection.write_chunk(b"data: [DONE]\n\n")
            self.connection.end_stream()
        super().on_finish(request)


# Streamed chunks are formatted from templates on the hot path (one per token step and stream);
# they produce exactly what json.dumps of the equivalent dict would (tests compare the two).
_RUNNING_META = '{"id":"%s","finish_reason":null,"prompt_tokens":%d,"weight_version":"default","num_retractions":0,"reasoning_tokens":0,"completion_tokens":%d,"cached_tokens":%d}'
_escaped_pieces: dict[str, str] = {}


def json_escaped(pieces: list[str]) -> str:
    """The JSON string body (no quotes) of "".join(pieces), cached per piece."""
    parts = []
    for piece in pieces:
        escaped = _escaped_pieces.get(piece)
        if escaped is None:
            escaped = dumps(piece).decode()[1:-1]
            if len(_escaped_pieces) < 65536:
                _escaped_pieces[piece] = escaped
        parts.append(escaped)
    return "".join(parts)


class _GenerateStream(_StreamSink):
    def __init__(self, connection: Connection, api: Api) -> None:
        super().__init__(connection, api)
        self._text = ""  # the cumulative text, JSON-escaped
        self._ids = ""  # the cumulative output_ids, comma-separated

    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None:
        self.tally(request)
        # Non-incremental streaming (SGLang's default): cumulative text and output_ids every chunk.
        if pieces:
            self._text += json_escaped(pieces)
            new_ids = ",".join(map(str, request.output_ids[-len(pieces) :]))
            self._ids = f"{self._ids},{new_ids}" if self._ids else new_ids
        if request.finish_reason is None:
            meta = _RUNNING_META % (request.rid, request.prompt_tokens, request.completion_tokens, request.cached_tokens)
        else:
            meta = dumps(self.api._meta_info(request)).decode()
        self._send(request, f'data: {{"text":"{self._text}","output_ids":[{self._ids}],"meta_info":{meta}}}\n\n'.encode())

    def on_finish(self, request: SimRequest) -> None:
        reason = request.finish_reason or {}
        if reason.get("type") == "abort" and reason.get("status_code") and request.completion_tokens == 0:
            error = {"error": {"message": reason["message"], "type": "invalid_request_error", "code": 400, "retryable": False}}
            self.connection.write_chunk(b"data: " + dumps(error) + b"\n\n")
        super().on_finish(request)


# sglang 0.5.23 SpecTokensDetails (entrypoints/openai/protocol.py:456-467), field for field, with its defaults.
_SPEC_TOKENS_DETAILS_DEFAULTS: dict[str, Any] = {
    "spec_accept_rate": 0.0,
    "spec_accept_length": 0.0,
    "spec_cap_length": 0.0,
    "spec_block_accept_length": 0.0,
    "spec_num_correct_drafts": 0,
    "spec_num_proposed_drafts": 0,
    "spec_verify_ct": 0,
    "spec_correct_drafts_histogram": [],
    "spec_cap_lens_histogram": [],
}


def spec_tokens_details(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A finished request's speculative statistics as the `sglext.spec_tokens_details` object;
    None without speculative decoding (sglang sends no sglext chunk then)."""
    if meta.get("spec_verify_ct") is None:
        return None
    return {key: meta.get(key, default) for key, default in _SPEC_TOKENS_DETAILS_DEFAULTS.items()}


class _OpenAIStream(_StreamSink):
    """The SSE chunks of /v1/completions and /v1/chat/completions.

    0.5.23 shapes (checked by tests/integration/test_sim_conformance.py):
    - completions: every chunk is CompletionStreamResponse.model_dump_json() (serving_completions.py:387-403),
      `usage` null, or the running usage with stream_options.continuous_usage_stats (:395-401); the final
      usage chunk is dumped with exclude_none=True (:495).
    - chat: content chunks come from sse_utils.build_sse_content (msgspec, omit_defaults): the delta always
      has reasoning_content, role and content only when set, and the chunk has `usage` only with
      continuous_usage_stats (serving_chat.py:985-1000); the role chunk (:2586) and the finish chunk (:2655)
      never carry usage. The sglext and usage chunks are ChatCompletionStreamResponse.model_dump_json().
    Releases before 0.5.23 keep the sim's earlier shapes (every key, `tool_calls` null).
    """

    def __init__(self, connection: Connection, api: Api, model: str, chat: bool, include_usage: bool, spec_details: bool = False, continuous_usage: bool = False) -> None:
        super().__init__(connection, api)
        self.model = model
        self.chat = chat
        self.include_usage = include_usage
        self.spec_details = spec_details
        self.continuous_usage = continuous_usage
        self.new_shapes = api.state.since_0523
        self.first = True
        self.created = int(time.time())
        self.kind = "chat.completion.chunk" if chat else "text_completion"
        head = 'data: {"id":"%s","object":"' + self.kind + '","created":' + str(self.created) + ',"model":' + dumps(model).decode().replace("%", "%%") + ',"choices":[{"index":0,'
        if chat and self.new_shapes:
            body = '"delta":{"reasoning_content":null,"content":"%s"}'
        elif chat:
            body = '"delta":{"role":null,"content":"%s","reasoning_content":null,"tool_calls":null}'
        else:
            body = '"text":"%s"'
        # The content chunk as a %-template of (rid, escaped content[, usage JSON]): the dict-built chunk, pre-serialized.
        tail = ',"logprobs":null,"finish_reason":null,"matched_stop":null}]'
        if continuous_usage and self.new_shapes:
            tail += ',"usage":%s}\n\n'
        elif chat and self.new_shapes:
            tail += "}\n\n"
        else:
            tail += ',"usage":null}\n\n'
        self._content_template = head + body + tail

    def _running_usage(self, request: SimRequest) -> dict[str, Any]:
        # Completions: calculate_token_usage without cached details (serving_completions.py:397);
        # chat: with them under --enable-cache-report (serving_chat.py:834 _continuous_usage_cached_details).
        return self.api._usage(request, cache_report=self.api.enable_cache_report if self.chat else False)

    def _chunk(self, request: SimRequest, content: str | None, finish: str | None, role: str | None = None) -> bytes:
        chunk: dict[str, Any]
        if self.chat and self.new_shapes:
            delta: dict[str, Any] = {"reasoning_content": None}
            if role is not None:
                delta["role"] = role
            if content is not None:
                delta["content"] = content
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": matched_stop(request) if finish else None}
            chunk = {"id": request.rid, "object": self.kind, "created": self.created, "model": self.model, "choices": [choice]}
            return b"data: " + dumps(chunk) + b"\n\n"
        if self.chat:
            choice = {
                "index": 0,
                "delta": {"role": role, "content": content, "reasoning_content": None, "tool_calls": None},
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": matched_stop(request) if finish else None,
            }
        else:
            choice = {"index": 0, "text": content or "", "logprobs": None, "finish_reason": finish, "matched_stop": matched_stop(request) if finish else None}
        usage = self._running_usage(request) if self.continuous_usage and self.new_shapes and not self.chat else None
        chunk = {"id": request.rid, "object": self.kind, "created": self.created, "model": self.model, "choices": [choice], "usage": usage}
        return b"data: " + dumps(chunk) + b"\n\n"

    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None:
        self.tally(request)
        if self.first and self.chat:
            self.first = False
            self._send(request, self._chunk(request, "", None, role="assistant"))
        if self.continuous_usage and self.new_shapes:
            payload = self._content_template % (request.rid, json_escaped(pieces), dumps(self._running_usage(request)).decode())
        else:
            payload = self._content_template % (request.rid, json_escaped(pieces))
        self._send(request, payload.encode())

    def on_finish(self, request: SimRequest) -> None:
        if not self.done.done():
            reason = request.finish_reason or {}
            if reason.get("type") == "abort" and reason.get("status_code"):
                error = openai_error(reason["message"])
                self.connection.write_chunk(b"data: " + dumps(error) + b"\n\n")
            elif not request.aborted:
                self.connection.write_chunk(self._chunk(request, None if self.chat else "", finish_type(request)))
                details = spec_tokens_details(self.api._meta_info(request)) if self.spec_details else None
                if details is not None:
                    # After the finish chunk, before usage, with no choices: sglang 0.5.23
                    # serving_completions.py:444-476 (serving_chat.py:2703 for chat); SglExt drops None fields
                    # (protocol.py:470-503).
                    sglext_body: dict[str, Any] = {"spec_tokens_details": details} if self.new_shapes else {"routed_experts": None, "cached_tokens_details": None, "spec_tokens_details": details}
                    sglext: dict[str, Any] = {"id": request.rid, "object": self.kind, "created": self.created, "model": self.model, "choices": [], "usage": None, "sglext": sglext_body}
                    self.connection.write_chunk(b"data: " + dumps(sglext) + b"\n\n")
                if self.include_usage:
                    usage: dict[str, Any] = {"id": request.rid, "object": self.kind, "created": self.created, "model": self.model, "choices": [], "usage": self.api._usage(request)}
                    if self.new_shapes and not self.chat:  # serving_completions.py:495 model_dump_json(exclude_none=True)
                        usage["usage"] = {k: v for k, v in usage["usage"].items() if v is not None}
                    self.connection.write_chunk(b"data: " + dumps(usage) + b"\n\n")
        super().on_finish(request)
