"""The driver every workload kind runs through: the client to a ready server, the server's own
facts, the run, and the `Gate` that every measured request passes. Standard library only.

After an error that may mean the server is gone (timeout, reset, refused), and between sections,
the gate checks the server's liveness; once that has failed no further request is sent, and the run
ends with that failure as its evidence. The kinds themselves: fleet.host.agent.kinds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fleet.host.agent.client import LIVENESS_SUSPECT, Client, Prompt, RequestOutcome
from fleet.host.agent.outcome import Sent, WorkloadOutcome
from fleet.host.agent.stats import min_samples
from fleet.host.contract import Failure
from fleet.host.contract.shard import AgentLimits, RunSpec
from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import SpecCounters
from fleet.host.errors import ReleaseError

# A concurrency level's default sample: enough requests for its p90.
MIN_REQUESTS_PER_LEVEL = min_samples(90)


def requests_at_level(level: int, requests_per_level: int | None) -> int:
    """How many requests a concurrency level sends: the playbook's count, else enough for a p90
    and at least two rounds of `level` requests in flight. The controller's ETA uses it too."""
    return requests_per_level or max(MIN_REQUESTS_PER_LEVEL, 2 * level)


@dataclass(frozen=True)
class ServerFacts:
    """What the server says about itself, and where each figure came from."""

    context_len: int | None = None
    max_running_requests: int | None = None  # effective, after the engine's own clamps
    served_model: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    # The longest prompt the scheduler takes: below context_len when the KV pool is smaller.
    max_req_input_len: int | None = None
    engine_version: str | None = None  # /server_info `version`: the engine's version serving (or the one the sim plays)
    engine: str = DEFAULT_ENGINE  # the engine serving (ENGINE_NAMES)
    # The log's lines that state what the start measured of memory (Engine.start_line).
    start_lines: tuple[str, ...] = ()

    @property
    def engine_release(self) -> str | None:
        """The known release nearest the version the server reports."""
        if self.engine_version is None:
            return None
        try:
            return engine_named(self.engine).choose_release(self.engine_version).release
        except ReleaseError:
            return None

    @property
    def prompt_room(self) -> int | None:
        """Tokens a prompt and its new tokens may use together."""
        limits = [n for n in (self.context_len, self.max_req_input_len) if n is not None]
        return min(limits) if limits else None

    def to_json(self) -> dict[str, Any]:
        return {
            "context_len": self.context_len,
            "max_req_input_len": self.max_req_input_len,
            "max_running_requests": self.max_running_requests,
            "served_model": self.served_model,
            "engine_version": self.engine_version,
            "sources": dict(self.sources),
            **({"start_lines": list(self.start_lines)} if self.start_lines else {}),
        }


class Gate:
    """Whether requests may still be sent to this server, shared by a run's threads."""

    def __init__(self, liveness: Callable[[], Failure | None], stopping: threading.Event) -> None:
        self._liveness = liveness
        self._stopping = stopping
        self._lock = threading.Lock()
        self.failure: Failure | None = None

    @property
    def open(self) -> bool:
        return self.failure is None and not self._stopping.is_set()

    def checkpoint(self) -> None:
        """Check the server (between sections, or after a suspicious error)."""
        with self._lock:
            if self.failure is None and not self._stopping.is_set():
                self.failure = self._liveness()


@dataclass
class Driver:
    client: Client
    limits: AgentLimits
    facts: ServerFacts
    gate: Gate
    run: RunSpec
    # The server's speculative-decoding totals now, where its engine states acceptance only there
    # (vLLM's /metrics; fleet.host.engines.base.SpecCounters); None for other engines.
    spec_counters: Callable[[], SpecCounters | None] = field(default=lambda: None)

    def acceptance_since(self, before: SpecCounters | None) -> dict[str, Any]:
        """The server-stated acceptance figures of a stretch that began at `before` (empty where
        the engine reports acceptance per request, or nothing was drafted)."""
        if before is None or (now := self.spec_counters()) is None:
            return {}
        length = now.acceptance_length_since(before)
        return {"acceptance_length": length, "spec_verify_ct": int(now.drafts - before.drafts)} if length is not None else {}

    def send(self, prompt: Prompt, max_new_tokens: int) -> RequestOutcome:
        outcome = self.client.generate(
            prompt,
            max_new_tokens,
            deadline_s=self.limits.request_timeout_s,
            no_token_timeout_s=self.limits.no_token_timeout_s,
        )
        return self.checked(outcome)

    def checked(self, outcome: RequestOutcome) -> RequestOutcome:
        """A request's outcome, the server's liveness checked after an error that may mean it is
        gone (`send` does it; so does the agent for a request another process sent)."""
        if outcome.error_class in LIVENESS_SUSPECT:
            self.gate.checkpoint()
        return outcome

    def timed(self, out: WorkloadOutcome, prompt: Prompt, max_new_tokens: int, tags: dict[str, Any]) -> RequestOutcome:
        """One request on its own; its wall time counts towards its repeat's section."""
        began = time.monotonic()
        outcome = self.send(prompt, max_new_tokens)
        out.measured({"repeat": tags["repeat"]}, time.monotonic() - began)
        out.sent.append(Sent(outcome, tags))
        return outcome
