"""vLLM 0.33's HTTP surface on top of the simulated engine: the routes `vllm serve` answers that a
benchmark client uses, and its `/metrics` under vLLM's `vllm:` names.

- `/health`: an empty 200 once the engine runs (vllm/entrypoints/serve/instrumentator/health.py:22-33;
  503 when the engine is dead). `/version`: `{"version": ...}` (instrumentator/basic.py:53-56).
- `/v1/models`: ModelCard with `owned_by` "vllm" and `max_model_len` (entrypoints/serve/engine/protocol.py:104-113).
- `/v1/completions`, `/v1/chat/completions`: the OpenAI shapes the SGLang sim already speaks, less
  SGLang's extensions (no `sglext` chunk: vLLM reports speculative decoding in /metrics only). A
  prompt longer than max_model_len is refused with input_processor.py:589's text; `max_tokens`
  beyond the context is cut to what fits, as vLLM's V1 engine does.
- `/metrics`: vllm/v1/metrics/loggers.py's names and label sets (`model_name`, `engine`), and the
  speculative-decoding counters of vllm/v1/spec_decode/metrics.py:226-262, from which vLLM's mean
  acceptance length is `1 + accepted / drafts` (metrics.py:112). tests/unit/test_sim_vllm.py checks
  every name against the installed wheel.

Everything else is a 404, as `vllm serve` has no /generate, /server_info or /flush_cache route.
"""

from __future__ import annotations

import time
from typing import Any

from fleet.host.engines.sim import metrics
from fleet.host.engines.sim.api import Api
from fleet.host.engines.sim.httpserver import Connection, HttpRequest
from fleet.host.errors import RequestError

# vllm/v1/metrics/loggers.py label names of every per-engine metric: [model_name, engine index].
_LABELS = 'model_name="%s",engine="0"'


class VllmApi(Api):
    """The routes `vllm serve` has (launcher.py's list, those a client of the sim reaches)."""

    def __init__(self, *args: Any, num_speculative_tokens: int | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_speculative_tokens = num_speculative_tokens
        self.routes = {
            ("GET", "/health"): self.health,
            ("GET", "/version"): self.version,
            ("GET", "/v1/models"): self.models,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/v1/chat/completions"): self.chat_completions,
            ("GET", "/metrics"): self.metrics,
        }

    async def health(self, request: HttpRequest, connection: Connection) -> None:
        connection.send(503 if self.engine.crashed else 200, b"", "application/json")

    async def version(self, request: HttpRequest, connection: Connection) -> None:
        connection.send(200, {"version": self.state.version})

    def _model_card(self) -> dict[str, Any]:
        name = self.state.served_model_name
        return {
            "id": name, "object": "model", "created": self.state.created, "owned_by": "vllm", "root": self.state.server_args.get("model_tag") or name,
            "parent": None, "max_model_len": self.state.context_len, "permission": [],
        }  # fmt: skip

    def _validate_length(self, input_tokens: int, max_new_tokens: int | None) -> None:
        """input_processor.py:583-592: a prompt that does not leave room for one output token."""
        context = self.state.context_len
        if input_tokens > context:
            raise RequestError(
                f"The decoder prompt (length {input_tokens}) is longer than the maximum model length of {context}. Make sure that `max_model_len` is no smaller than the number of text tokens."
            )
        if input_tokens == context:
            raise RequestError(
                f"The decoder prompt (length {input_tokens}) plus the number of requested output tokens (at least 1) is longer than the maximum model length of {context}. "
                "Make sure that `max_model_len` is no smaller than the number of text tokens (prompt + requested output tokens)."
            )

    def _request_error(self, message: str) -> dict[str, Any]:
        """ErrorResponse(error=ErrorInfo(message, type, param, code)): entrypoints/serve/engine/protocol.py:70-87."""
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}

    async def _openai(self, body: dict, connection: Connection, text: str | None, prompt_tokens: int, max_tokens: int | None, chat: bool, prompt_ids: list[int] | None = None) -> None:
        # vLLM's V1 engine cuts max_tokens to what the context leaves (its default is all of it).
        room = self.state.context_len - prompt_tokens
        await super()._openai(body, connection, text, prompt_tokens, room if max_tokens is None else min(max_tokens, room), chat, prompt_ids)

    async def metrics(self, request: HttpRequest, connection: Connection) -> None:
        engine, stats = self.engine, self.engine.stats
        used = sum(r.context_tokens for r in engine.running)
        labels = _LABELS % self.state.served_model_name.replace("\\", "\\\\").replace('"', '\\"')
        out: list[str] = []

        def gauge(name: str, value: float, doc: str) -> None:
            out.extend([f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"])

        def counter(name: str, value: float, doc: str, extra: str = "") -> None:
            out.extend([f"# HELP {name}_total {doc}", f"# TYPE {name}_total counter", f"{name}_total{{{labels}{extra}}} {float(value)}"])

        gauge("vllm:num_requests_running", len(engine.running), "Number of requests in model execution batches.")
        gauge("vllm:num_requests_waiting", len(engine.waiting), "Number of requests waiting to be processed.")
        gauge("vllm:kv_cache_usage_perc", used / engine.config.max_total_num_tokens, "KV-cache usage. 1 means 100 percent usage.")
        counter("vllm:prompt_tokens", stats.prompt_tokens, "Number of prefill tokens processed.")
        counter("vllm:generation_tokens", stats.generation_tokens, "Number of generation tokens processed.")
        counter("vllm:prefix_cache_queries", stats.prompt_tokens, "Prefix cache queries, in terms of number of queried tokens.")
        counter("vllm:prefix_cache_hits", stats.cached_tokens, "Prefix cache hits, in terms of number of cached tokens.")
        finished = max(stats.num_finished - stats.num_aborted, 0)
        out.extend(["# HELP vllm:request_success_total Count of successfully processed requests.", "# TYPE vllm:request_success_total counter"])
        out.append(f'vllm:request_success_total{{{labels},finished_reason="length"}} {float(finished)}')
        out.append(f'vllm:request_success_total{{{labels},finished_reason="abort"}} {float(stats.num_aborted)}')
        for name, histogram, doc in (
            ("vllm:time_to_first_token_seconds", stats.ttft, "Histogram of time to first token in seconds."),
            ("vllm:inter_token_latency_seconds", stats.itl, "Histogram of inter-token latency in seconds."),
            ("vllm:e2e_request_latency_seconds", stats.e2e, "Histogram of e2e request latency in seconds."),
        ):
            out.extend(_histogram(name, histogram, labels, doc))
        if self.num_speculative_tokens:
            # spec_decode/metrics.py: one draft per verify step of a request; every draft proposes
            # num_speculative_tokens; accepted tokens exclude the bonus token each step adds.
            drafts = stats.verify_ct
            counter("vllm:spec_decode_num_drafts", drafts, "Number of spec decoding drafts.")
            counter("vllm:spec_decode_num_draft_tokens", drafts * self.num_speculative_tokens, "Number of draft tokens.")
            counter("vllm:spec_decode_num_accepted_tokens", max(stats.accepted_tokens - drafts, 0), "Number of accepted tokens.")
        out.append("")
        connection.send(200, "\n".join(out).encode(), "text/plain; version=0.0.4; charset=utf-8")


def _histogram(name: str, histogram: metrics.Histogram, labels: str, doc: str) -> list[str]:
    lines = [f"# HELP {name} {doc}", f"# TYPE {name} histogram", *metrics.histogram_series(name, labels, histogram, lambda value: str(float(value)))]
    lines.append(f"{name}_created{{{labels}}} {time.time()}")
    return lines
