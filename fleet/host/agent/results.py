"""Run results: the figures of a run from its requests, the status rules, and atomic JSON files.
Standard library only.

Rules that make a result trustworthy:
- figures come from successful requests only, and a figure with nothing behind it is null --
  never 0 tok/s (a failed run that reads 0 tok/s is the seed campaign's worst trap);
- a run whose requests did not all succeed is `partial` (some did) or `failed` (none did), and
  a run that produced no output token at all is `failed`;
- a run whose workload did not run as defined -- its prompt cut to fit the server, an output
  shorter than asked for, requests planned but never sent -- is `not_comparable`, with its
  `deviations`; never `ok`;
- a run during which fleet's own agent did not run (stopped, its machine suspended:
  fleet.host.agent.pause) measured that pause, not the server: `not_comparable` with an
  `agent_paused` deviation whatever its requests did, never `partial` or `failed` with a request
  time-out blamed on the server (the agent redoes such a run once before it writes this);
- every latency summary carries its sample size `n`; percentiles only where the sample supports
  them (the rule lives in fleet.host.agent.stats);
- what a run's kind adds to its result is the kind's entry in fleet.host.agent.kinds: a
  concurrency run has figures per level (`levels`: one entry per repeat and level); its
  top-level figures count requests and tokens but carry no throughput or latency, which would
  blend levels that load the server differently; an agentic run has figures per turn (`turns`);
- with repeats, `repeats` holds each repeat's own figures, so a report can show their spread;
- an open-loop run (a `load` with a request rate) records how late each request was sent against
  its schedule (`schedule_delay_s`); a median above `MAX_SCHEDULE_DELAY_S` means the client could
  not keep up, so the load was not the one asked for: `not_comparable`, a `client_behind` deviation;
- goodput (a workload with an `slo`) is vllm bench serve's --goodput: successful requests that
  met every SLO (TTFT, TPOT -- 0 for a single-token output -- and E2E latency), per second of the
  run (vllm/benchmarks/serve.py `calculate_metrics`: `is_good_req = all(s >= r ...)`,
  `request_goodput = good_completed / dur_s`; sglang 0.5.23 sglang/benchmark/goodput.py:24-56,
  whose `slo_attainment` -- good over sent -- is kept beside it);
- a dataset with categories has figures per category (`categories`): acceptance length and
  per-request output tok/s, but no run-wide rate, which the categories share;
- a simulated run (its `sim_speed` set) has every duration and rate in simulated time: wall
  seconds / sim_speed. Nothing of a simulated run is in wall-clock time but its timestamps;
- the acceptance length is SGLang's own: accepted tokens per verify step, this run's alone.
  SGLang 0.5.23 counts it so for the server (`avg_spec_accept_length` in /server_info, the
  `accept len` log line, `sglang:spec_accept_length`): metrics_reporter.py:973
  `spec_num_accept_tokens / spec_num_forward_ct`, fed per decode step with that step's tokens
  (batch_result_processor.py:986-989), so the token the prefill produced is not in it. The
  per-request `meta_info.spec_accept_length` (tokenizer_manager.py:3165-3167) is
  completion_tokens / spec_verify_ct, which does count it. fleet takes the server's definition,
  run-scoped: sum(completion_tokens - 1) / sum(spec_verify_ct) over the run's successful
  requests that report a verify count (never the server's lifetime average).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.agent.client import NO_TOKEN_TIMEOUT, TIMEOUT, RequestOutcome
from fleet.host.agent.kinds import KINDS
from fleet.host.agent.outcome import AGENT_PAUSED, CLIENT_BEHIND, OUTPUT_CAPPED, REQUESTS_DROPPED, Measured, Sent, WorkloadOutcome
from fleet.host.agent.pause import Gap
from fleet.host.agent.slo import goodput
from fleet.host.agent.stats import histogram, ratio, summary
from fleet.host.contract import Failure, RunResult, RunStatus
from fleet.host.contract.results import FLEET_CLIENT, Deviation
from fleet.host.failures import FailureClass

SKIPPED = FailureClass.SKIPPED.value  # the failure class of a run the controller chose not to launch (quarantine, infeasible)
NO_OUTPUT_TOKENS = FailureClass.NO_OUTPUT_TOKENS.value
REQUESTS_FAILED = FailureClass.REQUESTS_FAILED.value

# The median lateness of an open-loop run's sends beyond which its load was not the one asked for.
MAX_SCHEDULE_DELAY_S = 0.010

# Figures that describe throughput or latency, which mean nothing blended across concurrency levels.
_RATE_AND_LATENCY = ("wall_s", "output_tok_s", "output_tok_s_per_request", "request_throughput", "ttft_s", "itl_s", "tpot_s", "e2e_s")


def in_simulated_time(outcome: RequestOutcome, sim_speed: float | None) -> RequestOutcome:
    """The request's durations in simulated seconds (wall / sim_speed); as it is without a sim."""
    if sim_speed is None:
        return outcome

    def scaled(seconds: float | None) -> float | None:
        return seconds / sim_speed if seconds is not None else None

    # The schedule delay stays in wall seconds: it measures the client, not the server, and the
    # client runs in wall time (1 ms late is 1 ms late at any sim speed; scaled, a client on a
    # busy test machine read as 50x behind at sim_speed 0.02).
    return replace(outcome, ttft_s=scaled(outcome.ttft_s), e2e_s=scaled(outcome.e2e_s), itl_s=[gap / sim_speed for gap in outcome.itl_s])


def request_figures(outcomes: Sequence[RequestOutcome], wall_s: float) -> dict[str, Any]:
    """Counts, errors, throughput and latency figures of a set of requests, in the outcomes' time."""
    ok = [o for o in outcomes if o.ok]
    failed = [o for o in outcomes if not o.ok]
    errors: dict[str, dict[str, Any]] = {}
    for outcome in failed:
        entry = errors.setdefault(outcome.error_class or "unknown", {"count": 0, "sample": outcome.error_message})
        entry["count"] += 1
    output_tokens = sum(o.output_tokens for o in ok)
    spec = [o for o in ok if o.spec_verify_ct]
    chunks = [k for o in ok for k in o.tokens_per_chunk]
    verify_steps = sum(o.spec_verify_ct or 0 for o in spec)
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
        # SGLang's definition (see the module's docstring): the prefill token is not accepted by a verify step.
        "acceptance_length": ratio(sum(o.output_tokens - 1 for o in spec), verify_steps),
        "acceptance_length_n": len(spec) if spec else None,
        "spec_verify_ct": verify_steps if spec else None,
        "schedule_delay_s": summary([o.schedule_delay_s for o in outcomes if o.schedule_delay_s is not None]),
    }


def category_figures(sent: Sequence[Sent]) -> dict[str, Any] | None:
    """Figures per dataset category; no rates, since the categories share one run's time."""
    names = sorted({s.tags["category"] for s in sent if s.tags.get("category") is not None})
    if not names:
        return None
    return {name: request_figures([s.outcome for s in sent if s.tags.get("category") == name], 0.0) for name in names}


def schedule_deviations(figures: Mapping[str, Any]) -> list[Deviation]:
    """An open-loop run whose client sent late: its load was lighter than the one asked for."""
    delays = figures.get("schedule_delay_s")
    median = delays and (delays["p50"] if delays["p50"] is not None else delays["max"])
    if not median or median <= MAX_SCHEDULE_DELAY_S:
        return []
    return [
        Deviation(
            CLIENT_BEHIND, f"requests were sent a median {median * 1000:.1f} ms after their schedule (bound {MAX_SCHEDULE_DELAY_S * 1000:.0f} ms): the client could not keep up with the load asked for"
        )
    ]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_status(figures: Mapping[str, Any], failure: Failure | None, deviations: Sequence[Deviation] = ()) -> tuple[RunStatus, Failure | None]:
    """The status of a run from its request counts, the failure (if any) that stopped it and its
    departures from the workload's definition. Returns the failure to record: the given one, or
    one derived from the requests. A failure outranks a deviation (`partial` runs are the ones
    the fixer retries), but for the agent's own pause: what failed across it is no evidence
    against the server."""
    if any(deviation.kind == AGENT_PAUSED for deviation in deviations):
        return RunStatus.not_comparable, None
    counts = figures["requests"]
    if counts["ok"] == 0:
        if failure is None:
            failure = _failure_from_errors(figures, "no request of the run succeeded")
        return RunStatus.failed, failure
    if not figures["output_tokens"]:
        return RunStatus.failed, failure or Failure(NO_OUTPUT_TOKENS, "the successful requests produced no output token")
    if failure is None and counts["failed"] == 0:
        return (RunStatus.not_comparable if deviations else RunStatus.ok), None
    return RunStatus.partial, failure or _failure_from_errors(figures, f"{counts['failed']} of {counts['sent']} requests failed")


def _failure_from_errors(figures: Mapping[str, Any], message: str) -> Failure:
    errors = figures["errors"]
    if not errors:
        return Failure(REQUESTS_FAILED, message + " (none was sent)")
    top = max(errors, key=lambda name: errors[name]["count"])
    return Failure(top, f"{message}; {errors[top]['count']} x {top}: {errors[top]['sample']}")


def output_deviations(sent: Sequence[Sent], max_new_tokens: int) -> list[Deviation]:
    """Successful requests that produced fewer tokens than asked for: the server capped or ended
    them early (the client asks for a fixed length with ignore_eos), so their figures describe
    shorter outputs than the workload's."""
    # A request's own length where its workload gives one (a dataset's reply length), else the workload's.
    short = [s.outcome.output_tokens for s in sent if s.outcome.ok and s.outcome.output_tokens < s.tags.get("max_new_tokens", max_new_tokens)]
    if not short:
        return []
    ok = sum(1 for s in sent if s.outcome.ok)
    return [Deviation(OUTPUT_CAPPED, f"{len(short)} of {ok} requests produced fewer tokens than asked for (at most {max_new_tokens}; min {min(short)})")]


def dropped_deviations(outcome: WorkloadOutcome) -> list[Deviation]:
    sent = len(outcome.sent)
    if outcome.planned_requests and sent < outcome.planned_requests:
        return [Deviation(REQUESTS_DROPPED, f"{sent} of the {outcome.planned_requests} planned requests were sent")]
    return []


def paused_deviation(gaps: Sequence[Gap]) -> Deviation:
    """What the agent's own pauses during a run make of it."""
    what = "; ".join(gap.describe() for gap in gaps)
    return Deviation(AGENT_PAUSED, f"{what} -- during this run, so its figures (and any request that timed out) measure that pause, not the server's serving")


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
        "spec_accept_length": o.spec_accept_length,  # the server's per-request figure, prefill token included
        "finish_reason": o.finish_reason,
        "error_class": o.error_class,
        "error_message": o.error_message,
        **({"agent_paused_s": o.agent_paused_s} if o.agent_paused_s is not None else {}),
        **({"schedule_delay_s": o.schedule_delay_s} if o.schedule_delay_s is not None else {}),
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
    sim_speed: float | None = None  # the simulator's time scale; None on real hardware
    engine: str = DEFAULT_ENGINE  # the engine that served it (ENGINE_NAMES)


def sim_speed_of(env: Mapping[str, str]) -> float | None:
    """The time scale a sim server runs at, from its environment (FLEET_SIM_SPEED, set by the
    controller from the host file's `engine.sim_speed`); None for a real engine."""
    value = env.get("FLEET_SIM_SPEED")
    if value is None:
        return None
    try:
        speed = float(value)
    except ValueError:
        return None
    return speed if speed > 0 else None


def build_result(
    *,
    identity: RunIdentity,
    workload: Mapping[str, Any],
    outcome: WorkloadOutcome,
    started_at: float,
    ended_at: float,
) -> RunResult:
    """The result of one run; `workload` is the shard's resolved workload (its bulky texts are left out)."""
    speed = identity.sim_speed
    sent = [Sent(in_simulated_time(s.outcome, speed), s.tags) for s in outcome.sent]

    def figures_of(members: Sequence[Sent], wall_s: float) -> dict[str, Any]:
        return request_figures([s.outcome for s in members], wall_s / speed if speed else wall_s)

    kind = KINDS[workload["kind"]]
    figures = figures_of(sent, outcome.wall_s)
    run_wide = kind.run_wide_rates(workload)
    if not run_wide:
        for key in _RATE_AND_LATENCY:
            figures[key] = None
    extras = {**outcome.extras, **kind.result_extras(Measured(workload, sent, outcome.sections, figures_of))}
    if workload.get("slo") and run_wide:
        figures["goodput"] = goodput([s.outcome for s in sent], workload["slo"], outcome.wall_s / speed if speed else outcome.wall_s)
    if (categories := category_figures(sent)) is not None:
        extras["categories"] = categories
    deviations = [
        *outcome.deviations, *output_deviations(sent, int(workload.get("max_new_tokens") or 0)), *dropped_deviations(outcome),
        *schedule_deviations(figures),
    ]  # fmt: skip
    status, failure = run_status(figures, outcome.failure, deviations)
    return RunResult(
        **vars(identity),
        client=str((workload.get("client") or {}).get("tool") or FLEET_CLIENT),
        workload=workload_summary(workload),
        status=status,
        failure=failure,
        deviations=tuple(deviations),
        figures=figures,
        extras=extras,
        requests=tuple(request_record(s) for s in sent),
        started_at=started_at,
        ended_at=ended_at,
    )


_BULKY_KEYS = ("corpus", "system", "tasks", "tool_results", "chat", "samples")


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
