"""Run results: status rules, figures from successful requests only, run-scoped acceptance
length, and atomic files. A failed run never reads 0 tok/s."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

import pytest

from fleet.host.agent.client import Client, Endpoint, RequestOutcome
from fleet.host.agent.results import Failure, RunIdentity, build_result, in_simulated_time, request_figures, run_status, sim_speed_of, workload_summary
from fleet.host.agent.outcome import Sent, WorkloadOutcome
from fleet.host.contract import RESULT_SCHEMA, RunResult, RunStatus
from fleet.host.contract.results import Deviation
from fleet.host.engines.sim.harness import start_sim
from tests.testfleet.gpu_tools import local_gpu_env


def ok(tokens: int = 256, e2e: float = 2.0, ttft: float = 0.1, verify: int | None = None) -> RequestOutcome:
    return RequestOutcome(
        started_at=1.0,
        ok=True,
        prompt_tokens=40,
        output_tokens=tokens,
        ttft_s=ttft,
        e2e_s=e2e,
        itl_s=[(e2e - ttft) / (tokens - 1)] * (tokens - 1),
        tokens_per_chunk=[1] * tokens,
        spec_verify_ct=verify,
        spec_accept_length=tokens / verify if verify else None,
        finish_reason="length",
    )


def failed(error_class: str, message: str = "boom", tokens: int = 0) -> RequestOutcome:
    return RequestOutcome(started_at=1.0, output_tokens=tokens, error_class=error_class, error_message=message)


def test_all_ok_is_ok_with_figures() -> None:
    figures = request_figures([ok(), ok(e2e=4.0)], wall_s=6.0)
    assert run_status(figures, None) == ("ok", None)
    assert figures["requests"] == {"sent": 2, "ok": 2, "failed": 0, "timed_out": 0}
    assert figures["output_tok_s"] == pytest.approx(512 / 6.0)
    assert figures["output_tok_s_per_request"] == pytest.approx((128 + 64) / 2)
    assert figures["request_throughput"] == pytest.approx(2 / 6.0)
    assert figures["e2e_s"]["p50"] == 3.0 and figures["ttft_s"]["n"] == 2 and figures["ttft_s"]["p99"] is None
    assert figures["tpot_s"]["mean"] == pytest.approx(((1.9 / 255) + (3.9 / 255)) / 2)
    assert figures["acceptance_length"] is None and figures["errors"] == {}


def test_acceptance_length_is_this_runs_token_weighted_ratio_without_the_prefill_token() -> None:
    # 100 tokens in 20 verify steps and 300 in 100: the prefill made one token of each, so the
    # verify steps accepted 99 + 299 -- (99 + 299) / 120, not 400 / 120 nor the mean of the two.
    figures = request_figures([ok(100, verify=20), ok(300, verify=100), failed("timeout")], wall_s=5.0)
    assert figures["acceptance_length"] == pytest.approx(398 / 120)
    assert figures["spec_verify_ct"] == 120 and figures["acceptance_length_n"] == 2


def test_a_run_with_no_successful_request_is_failed_and_has_no_throughput() -> None:
    outcomes = [failed("connection_reset", "ConnectionResetError: [Errno 104]"), failed("connection_reset"), failed("no_token_timeout", "no token for 120 s", tokens=3)]
    figures = request_figures(outcomes, wall_s=3.0)
    status, failure = run_status(figures, None)
    assert status == "failed"
    for key in ("output_tok_s", "output_tok_s_per_request", "request_throughput", "ttft_s", "e2e_s", "output_tokens", "wall_s"):
        assert figures[key] is None, key
    assert failure is not None and failure.error_class == "connection_reset"
    assert "2 x connection_reset: ConnectionResetError: [Errno 104]" in failure.message
    assert figures["requests"] == {"sent": 3, "ok": 0, "failed": 3, "timed_out": 1}
    assert figures["errors"]["no_token_timeout"] == {"count": 1, "sample": "no token for 120 s"}


def test_some_failed_is_partial_and_figures_come_from_the_successful_ones() -> None:
    figures = request_figures([ok(), failed("http_400_context", "HTTP 400: " + "x" * 3000)], wall_s=2.5)
    status, failure = run_status(figures, None)
    assert status == "partial" and failure is not None and failure.error_class == "http_400_context"
    assert figures["output_tokens"] == 256 and figures["output_tok_s"] == pytest.approx(256 / 2.5)
    assert len(figures["errors"]["http_400_context"]["sample"]) == 3010  # the whole message


def test_server_failure_after_some_requests_is_partial_with_that_failure() -> None:
    died = Failure("server_died", "the server died while serving", ("RuntimeError: CUDA error: an illegal instruction was encountered",), "/x.log", 137)
    figures = request_figures([ok()], wall_s=2.0)
    assert run_status(figures, died) == ("partial", died)
    assert run_status(request_figures([], wall_s=0.0), died) == ("failed", died)


def test_successful_requests_without_tokens_are_a_failed_run() -> None:
    figures = request_figures([RequestOutcome(started_at=1.0, ok=True, output_tokens=0, e2e_s=0.5)], 0.5)
    status, failure = run_status(figures, None)
    assert status == "failed" and failure is not None and failure.error_class == "no_output_tokens"
    assert figures["output_tok_s"] is None


def test_nothing_sent_and_no_failure_is_still_failed() -> None:
    status, failure = run_status(request_figures([], 0.0), None)
    assert status == "failed" and failure is not None and "none was sent" in failure.message


def test_result_document() -> None:
    workload = {
        "name": "long_context",
        "kind": "long_context",
        "max_new_tokens": 256,
        "prompt_tokens": 30000,
        "corpus": "x" * 10000,
        "instruction": "Read",
        "question": "Q",
        "margin_tokens": 64,
        "requests": 1,
    }
    outcome = WorkloadOutcome(sent=[Sent(ok(), {"repeat": 0, "request": 0})], extras={"calibration": {"chosen_prompt_tokens": 29990}})
    outcome.measured({"repeat": 0}, 2.0)
    facts = {"gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}], "driver": {"version": "580.95.05"}}
    identity = RunIdentity(
        run_id="r1",
        label="tp1-ar/long_context",
        server_id="s1",
        server_label="tp1-ar",
        sweep_id="sw",
        host="ct200",
        boot_id="b",
        attempt=2,
        agent_pid=7,
        gpus=(0,),
        server={"version": "0.5.23"},
        log_path="logs/tp1-ar.log",
        host_facts=facts,
        provenance=None,
        engine_release="0.5.23",
    )
    result = build_result(identity=identity, workload={**workload, "requests": 1}, outcome=outcome, started_at=10.0, ended_at=12.5)
    document = result.to_json()
    assert document["schema"] == RESULT_SCHEMA == "fleet.run_result/2" and document["status"] == "ok" and document["failure"] is None
    assert document["sim_speed"] is None and document["deviations"] == []
    assert document["host_facts"] == facts and document["engine_release"] == "0.5.23"
    assert document["attempt"] == 2 and document["calibration"]["chosen_prompt_tokens"] == 29990
    assert "corpus" not in document["workload"] and document["workload"]["prompt_tokens"] == 30000
    assert document["requests"][0]["request"] == 0 and document["requests"][0]["tpot_s"] is not None
    # The controller reads back exactly what the agent wrote, through plain JSON.
    assert RunResult.from_json(json.dumps(document)) == result
    short = workload_summary({"name": "s", "kind": "short", "prompts": [{"name": "fib", "text": "..."}], "max_new_tokens": 256})
    assert short["prompts"] == ["fib"]


def identity(sim_speed: float | None = None) -> RunIdentity:
    return RunIdentity(
        run_id="r1",
        label="tp1-ddtree-b15/x",
        server_id="s1",
        server_label="tp1-ddtree-b15",
        sweep_id="sw",
        host="h",
        boot_id="b",
        attempt=1,
        agent_pid=7,
        gpus=(0,),
        server={},
        log_path="x.log",
        host_facts=None,
        provenance=None,
        engine_release="0.5.23",
        sim_speed=sim_speed,
    )


def short_workload(requests: int, max_new: int = 256) -> dict:
    return {"name": "short", "kind": "short", "max_new_tokens": max_new, "prompts": [{"name": "fib", "text": "..."}], "rounds": requests}


def outcome_of(outcomes: list[RequestOutcome], planned: int | None = None, **extra: object) -> WorkloadOutcome:
    out = WorkloadOutcome(sent=[Sent(o, {"repeat": 0, "request": i}) for i, o in enumerate(outcomes)], **extra)  # type: ignore[arg-type]
    out.measured({"repeat": 0}, sum(o.e2e_s or 0 for o in outcomes))
    out.planned_requests = len(outcomes) if planned is None else planned
    return out


def test_a_cut_prompt_makes_the_run_not_comparable_never_ok() -> None:
    cut = Deviation("prompt_cut", "prompt cut to 820 of 30000 tokens: the server takes 1155 tokens")
    result = build_result(identity=identity(), workload=short_workload(2), outcome=outcome_of([ok(), ok()], deviations=[cut]), started_at=0, ended_at=1)
    assert result.status is RunStatus.not_comparable and not result.status.comparable and result.status.has_figures
    assert result.deviations == (cut,) and result.failure is None
    assert RunResult.from_json(json.dumps(result.to_json())) == result
    # A failure outranks a deviation: the fixer retries partial runs.
    died = Failure("server_died", "died")
    assert run_status(request_figures([ok()], 2.0), died, [cut])[0] is RunStatus.partial


def test_an_output_shorter_than_asked_for_or_a_dropped_request_is_a_deviation() -> None:
    capped = build_result(identity=identity(), workload=short_workload(2), outcome=outcome_of([ok(256), ok(200)]), started_at=0, ended_at=1)
    assert capped.status is RunStatus.not_comparable
    assert [d.kind for d in capped.deviations] == ["output_capped"] and "1 of 2 requests" in capped.deviations[0].message
    dropped = build_result(identity=identity(), workload=short_workload(3), outcome=outcome_of([ok(), ok()], planned=3), started_at=0, ended_at=1)
    assert dropped.status is RunStatus.not_comparable and dropped.deviations[0].kind == "requests_dropped"
    whole = build_result(identity=identity(), workload=short_workload(2), outcome=outcome_of([ok(), ok()]), started_at=0, ended_at=1)
    assert whole.status is RunStatus.ok and whole.status.comparable


def test_a_simulated_run_is_in_simulated_time_and_says_so() -> None:
    # At sim_speed 0.02 a wall second is 50 simulated seconds: 256 tokens in 0.04 wall s = 2 simulated s.
    fast = ok(256, e2e=0.04, ttft=0.002)
    result = build_result(identity=identity(0.02), workload=short_workload(1), outcome=outcome_of([fast]), started_at=0, ended_at=1)
    assert result.sim_speed == 0.02 and result.simulated
    assert result.figures["wall_s"] == pytest.approx(2.0)
    assert result.figures["output_tok_s"] == pytest.approx(128.0)  # not 6400
    assert result.figures["ttft_s"]["max"] == pytest.approx(0.1) and result.requests[0]["e2e_s"] == pytest.approx(2.0)
    assert in_simulated_time(fast, None) is fast
    assert sim_speed_of({"FLEET_SIM_SPEED": "0.02"}) == 0.02 and sim_speed_of({}) is None and sim_speed_of({"FLEET_SIM_SPEED": "0"}) is None


def test_a_concurrency_run_has_figures_per_level_and_none_blended() -> None:
    workload = {"name": "concurrency", "kind": "concurrency", "max_new_tokens": 256, "levels": [1, 4], "prompt": {"name": "qsort", "text": "."}, "requests_per_level": 2}
    out = WorkloadOutcome()
    for level, wall in ((1, 4.0), (4, 2.0)):
        for i in range(2):
            out.sent.append(Sent(ok(), {"repeat": 0, "level": level, "request": i}))
        out.measured({"repeat": 0, "level": level}, wall)
    result = build_result(identity=identity(), workload=workload, outcome=out, started_at=0, ended_at=1)
    assert result.status is RunStatus.ok
    assert result.figures["output_tok_s"] is None and result.figures["ttft_s"] is None  # a blend of levels means nothing
    assert result.figures["requests"]["ok"] == 4 and result.figures["output_tokens"] == 1024
    levels = result.extras["levels"]
    assert [(lv["level"], lv["output_tok_s"], lv["ttft_s"]["n"]) for lv in levels] == [(1, 128.0, 2), (4, 256.0, 2)]


def test_repeats_keep_their_own_figures_for_the_spread() -> None:
    out = WorkloadOutcome()
    for repeat, wall in ((0, 2.0), (1, 4.0)):
        out.sent.append(Sent(ok(), {"repeat": repeat, "request": 0}))
        out.measured({"repeat": repeat}, wall)
    result = build_result(identity=identity(), workload=short_workload(1), outcome=out, started_at=0, ended_at=1)
    assert [r["output_tok_s"] for r in result.extras["repeats"]] == [128.0, 64.0]
    assert result.figures["output_tok_s"] == pytest.approx(512 / 6.0)


def _counters(endpoint: Endpoint) -> dict[str, float]:
    """The server's /metrics counters (Prometheus text), summed over their labels."""
    connection = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=10)
    connection.request("GET", "/metrics")
    body = connection.getresponse().read().decode()
    connection.close()
    totals: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith("sglang:") and "_total" in line.split(" ")[0]:
            name = line.split("{")[0].split(" ")[0]
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def test_acceptance_length_is_the_servers_own_figure_over_the_same_requests(tmp_path: Path) -> None:
    """SGLang's acceptance length (metrics_reporter.py:973) is accepted tokens per verify step;
    over a run that is the /metrics delta around it (vllm bench serve's way): (generation tokens
    - one prefill token per request) / verify calls. fleet's figure from the per-request counts
    equals it; counting the prefill token (meta_info's completion_tokens / spec_verify_ct) reads higher."""
    env = local_gpu_env(tmp_path / "gpu", os.environ)
    args = [
        "--model-path",
        "qwen3.6-27b",
        "--context-length",
        "32768",
        "--mem-fraction-static",
        "0.75",
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "qwen3.6-27b-dflash",
        "--speculative-num-draft-tokens",
        "16",
        "--trust-remote-code",
        "--enable-metrics",
    ]
    server = start_sim(args, tmp_path / "server.log", env={**env, "CUDA_VISIBLE_DEVICES": "0"}, speed=0.005)
    endpoint = Endpoint("127.0.0.1", server.port)
    try:
        assert server.wait_ready(30), server.log()
        before = _counters(endpoint)
        client = Client(endpoint)
        outcomes = [client.generate(f"Write a function number {i}.", 48, deadline_s=30, no_token_timeout_s=10) for i in range(4)]
        after = _counters(endpoint)
    finally:
        server.stop()
    assert all(o.ok and o.spec_verify_ct for o in outcomes)

    def delta(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    own = (delta("sglang:generation_tokens_total") - delta("sglang:num_requests_total")) / delta("sglang:spec_verify_calls_total")
    figures = request_figures(outcomes, 1.0)
    assert figures["acceptance_length"] == pytest.approx(own)
    with_prefill = sum(o.output_tokens for o in outcomes) / sum(o.spec_verify_ct or 0 for o in outcomes)
    assert with_prefill > own
