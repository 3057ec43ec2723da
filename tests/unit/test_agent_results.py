"""Run results: status rules, figures from successful requests only, run-scoped acceptance
length, and atomic files. A failed run never reads 0 tok/s."""

from __future__ import annotations

import json

import pytest

from fleet.host.agent.client import RequestOutcome
from fleet.host.agent.results import (
    Failure,
    RunIdentity,
    Sent,
    WorkloadOutcome,
    build_result,
    request_figures,
    run_status,
    workload_summary,
)
from fleet.host.contract import RunResult


def ok(tokens: int = 256, e2e: float = 2.0, ttft: float = 0.1, verify: int | None = None) -> RequestOutcome:
    return RequestOutcome(
        started_at=1.0, ok=True, prompt_tokens=40, output_tokens=tokens, ttft_s=ttft, e2e_s=e2e,
        itl_s=[(e2e - ttft) / (tokens - 1)] * (tokens - 1), tokens_per_chunk=[1] * tokens, spec_verify_ct=verify,
        spec_accept_length=tokens / verify if verify else None, finish_reason="length",
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
    assert figures["e2e_s"]["p50"] == 3.0 and figures["ttft_s"]["count"] == 2
    assert figures["tpot_s"]["mean"] == pytest.approx(((1.9 / 255) + (3.9 / 255)) / 2)
    assert figures["acceptance_length"] is None and figures["errors"] == {}


def test_acceptance_length_is_this_runs_token_weighted_ratio() -> None:
    # 100 tokens in 20 verify steps and 300 in 100: 400 / 120, not the mean of 5.0 and 3.0.
    figures = request_figures([ok(100, verify=20), ok(300, verify=100), failed("timeout")], wall_s=5.0)
    assert figures["acceptance_length"] == pytest.approx(400 / 120)
    assert figures["spec_verify_ct"] == 120


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
    workload = {"name": "long_context", "kind": "long_context", "max_new_tokens": 256, "prompt_tokens": 30000, "corpus": "x" * 10000,
                "instruction": "Read", "question": "Q", "margin_tokens": 64, "requests": 1}
    outcome = WorkloadOutcome(sent=[Sent(ok(), {"request": 0})], wall_s=2.0, extras={"calibration": {"chosen_prompt_tokens": 29990}})
    facts = {"gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}], "driver": {"version": "580.95.05"}}
    identity = RunIdentity(run_id="r1", label="tp1-ar/long_context", server_id="s1", server_label="tp1-ar", sweep_id="sw", host="ct200",
                           boot_id="b", attempt=2, agent_pid=7, gpus=(0,), server={"version": "0.5.23"}, log_path="logs/tp1-ar.log",
                           host_facts=facts, provenance=None, engine_release="0.5.23")
    result = build_result(identity=identity, workload=workload, outcome=outcome, started_at=10.0, ended_at=12.5)
    document = result.to_json()
    assert document["schema"] == "fleet.run_result/1" and document["status"] == "ok" and document["failure"] is None
    assert document["host_facts"] == facts and document["engine_release"] == "0.5.23"
    assert document["attempt"] == 2 and document["calibration"]["chosen_prompt_tokens"] == 29990
    assert "corpus" not in document["workload"] and document["workload"]["prompt_tokens"] == 30000
    assert document["requests"][0]["request"] == 0 and document["requests"][0]["tpot_s"] is not None
    # The controller reads back exactly what the agent wrote, through plain JSON.
    assert RunResult.from_json(json.dumps(document)) == result
    short = workload_summary({"name": "s", "kind": "short", "prompts": [{"name": "fib", "text": "..."}], "max_new_tokens": 256})
    assert short["prompts"] == ["fib"]
