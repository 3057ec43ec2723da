"""Run results: the figures of a run from its requests, the status rules, and atomic JSON files.
Standard library only.

Rules that make a result trustworthy:
- figures come from successful requests only, and a figure with nothing behind it is null --
  never 0 tok/s (a failed run that reads 0 tok/s is the seed campaign's worst trap);
- a run whose requests did not all succeed is `partial` (some did) or `failed` (none did), and
  a run that produced no output token at all is `failed`;
- the acceptance length is this run's alone: sum(completion_tokens) / sum(spec_verify_ct) over
  its successful requests, never the server's lifetime average from /server_info.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from fleet.host.agent.client import NO_TOKEN_TIMEOUT, TIMEOUT, RequestOutcome
from fleet.host.agent.stats import histogram, ratio, summary
from fleet.host.contract import Failure, RunResult, RunStatus

SKIPPED = "skipped"  # the failure class of a run the controller chose not to launch (quarantine, infeasible)
NO_OUTPUT_TOKENS = "no_output_tokens"
REQUESTS_FAILED = "requests_failed"


@dataclass
class Sent:
    """One measured request and where it belongs in the workload (repeat, level, turn, ...)."""

    outcome: RequestOutcome
    tags: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorkloadOutcome:
    """What running a workload produced: its requests, the wall time of its measured sections,
    kind-specific extras (levels, calibration, turns) and, if it could not finish, why."""

    sent: list[Sent] = field(default_factory=list)
    wall_s: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None


def request_figures(outcomes: Sequence[RequestOutcome], wall_s: float) -> dict[str, Any]:
    """Counts, errors, throughput and latency figures of a set of requests."""
    ok = [o for o in outcomes if o.ok]
    failed = [o for o in outcomes if not o.ok]
    errors: dict[str, dict[str, Any]] = {}
    for outcome in failed:
        entry = errors.setdefault(outcome.error_class or "unknown", {"count": 0, "sample": outcome.error_message})
        entry["count"] += 1
    output_tokens = sum(o.output_tokens for o in ok)
    spec = [o for o in ok if o.spec_verify_ct]
    chunks = [k for o in ok for k in o.tokens_per_chunk]
    return {
        "requests": {
            "sent": len(outcomes),
            "ok": len(ok),
            "failed": len(failed),
            "timed_out": sum(1 for o in failed if o.error_class in (TIMEOUT, NO_TOKEN_TIMEOUT)),
        },
        "errors": errors,
        "output_tokens": output_tokens if ok else None,
        "prompt_tokens": sum(o.prompt_tokens or 0 for o in ok) if ok else None,
        "wall_s": wall_s if ok else None,
        "output_tok_s": ratio(output_tokens, wall_s),
        "output_tok_s_per_request": _mean([r for o in ok if (r := ratio(o.output_tokens, o.e2e_s or 0)) is not None]),
        "request_throughput": ratio(len(ok), wall_s),
        "ttft_s": summary([o.ttft_s for o in ok if o.ttft_s is not None]),
        "itl_s": summary([gap for o in ok for gap in o.itl_s]),
        "tpot_s": summary([t for o in ok if (t := o.tpot_s) is not None]),
        "e2e_s": summary([o.e2e_s for o in ok if o.e2e_s is not None]),
        "tokens_per_chunk": {"mean": sum(chunks) / len(chunks), "histogram": histogram(chunks)} if chunks else None,
        "acceptance_length": ratio(sum(o.output_tokens for o in spec), sum(o.spec_verify_ct or 0 for o in spec)),
        "spec_verify_ct": sum(o.spec_verify_ct or 0 for o in spec) if spec else None,
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_status(figures: Mapping[str, Any], failure: Failure | None) -> tuple[RunStatus, Failure | None]:
    """The status of a run from its request counts and the failure (if any) that stopped it.
    Returns the failure to record: the given one, or one derived from the requests."""
    counts = figures["requests"]
    if counts["ok"] == 0:
        if failure is None:
            failure = _failure_from_errors(figures, "no request of the run succeeded")
        return RunStatus.failed, failure
    if not figures["output_tokens"]:
        return RunStatus.failed, failure or Failure(NO_OUTPUT_TOKENS, "the successful requests produced no output token")
    if failure is None and counts["failed"] == 0:
        return RunStatus.ok, None
    return RunStatus.partial, failure or _failure_from_errors(figures, f"{counts['failed']} of {counts['sent']} requests failed")


def _failure_from_errors(figures: Mapping[str, Any], message: str) -> Failure:
    errors = figures["errors"]
    if not errors:
        return Failure(REQUESTS_FAILED, message + " (none was sent)")
    top = max(errors, key=lambda name: errors[name]["count"])
    return Failure(top, f"{message}; {errors[top]['count']} x {top}: {errors[top]['sample']}")


def request_record(sent: Sent) -> dict[str, Any]:
    """One request in the result file: what it was and how it went, without per-token arrays."""
    o = sent.outcome
    return {
        **sent.tags,
        "ok": o.ok,
        "started_at": o.started_at,
        "prompt_tokens": o.prompt_tokens,
        "output_tokens": o.output_tokens,
        "ttft_s": o.ttft_s,
        "tpot_s": o.tpot_s,
        "e2e_s": o.e2e_s,
        "chunks": len(o.tokens_per_chunk),
        "spec_verify_ct": o.spec_verify_ct,
        "spec_accept_length": o.spec_accept_length,
        "finish_reason": o.finish_reason,
        "error_class": o.error_class,
        "error_message": o.error_message,
    }


@dataclass(frozen=True)
class RunIdentity:
    """What a result says of the run it belongs to, besides its outcome."""

    run_id: str
    label: str
    server_id: str
    server_label: str
    sweep_id: str
    host: str
    boot_id: str
    attempt: int
    agent_pid: int
    gpus: tuple[int, ...]
    server: dict[str, Any]  # what the server said of itself
    log_path: str
    host_facts: dict[str, Any] | None
    provenance: dict[str, Any] | None
    engine_release: str | None


def build_result(
    *,
    identity: RunIdentity,
    workload: Mapping[str, Any],
    outcome: WorkloadOutcome,
    started_at: float,
    ended_at: float,
) -> RunResult:
    """The result of one run; `workload` is the shard's resolved workload (its bulky texts are left out)."""
    figures = request_figures([s.outcome for s in outcome.sent], outcome.wall_s)
    status, failure = run_status(figures, outcome.failure)
    return RunResult(
        **vars(identity),
        workload=workload_summary(workload),
        status=status,
        failure=failure,
        figures=figures,
        extras=dict(outcome.extras),
        requests=tuple(request_record(s) for s in outcome.sent),
        started_at=started_at,
        ended_at=ended_at,
    )


_BULKY_KEYS = ("corpus", "system", "tasks", "tool_results", "chat")


def workload_summary(workload: Mapping[str, Any]) -> dict[str, Any]:
    summary_ = {key: value for key, value in workload.items() if key not in _BULKY_KEYS}
    if "prompts" in summary_:
        summary_["prompts"] = [p["name"] for p in summary_["prompts"]]
    if isinstance(summary_.get("prompt"), Mapping):
        summary_["prompt"] = summary_["prompt"]["name"]
    return summary_


def skipped_result(*, identity: RunIdentity, workload: Mapping[str, Any], reason: str, at: float) -> RunResult:
    """A run the controller decided not to launch: no figures at all, and the reason."""
    return RunResult(
        **vars(identity),
        workload=workload_summary(workload),
        status=RunStatus.skipped,
        failure=Failure(SKIPPED, reason),
        figures=request_figures([], 0.0),
        started_at=at,
        ended_at=at,
    )
