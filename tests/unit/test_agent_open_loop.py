"""Dataset and random workloads driven by the real agent code (fleet.host.agent.drive and its
streaming client) against a real simulated server: a Spec-Bench-format dataset with categories,
and a random fixed-length workload under an open-loop Poisson rate with an SLO. The results carry
the dataset's hashes and lengths, per-category figures, goodput and each request's schedule delay;
a client that sends late makes the run `not_comparable`."""

from __future__ import annotations

import json
import os
import random
import time
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from fleet.host.agent.client import Client, Endpoint, RequestOutcome
from fleet.host.agent.drive import drive
from fleet.host.agent.driver import Driver, Gate, ServerFacts
from fleet.host.agent.results import RunIdentity, build_result
from fleet.host.agent.outcome import CLIENT_BEHIND, Sent, WorkloadOutcome
from fleet.host.contract import RunResult, RunStatus
from fleet.host.contract.shard import AgentLimits, RunSpec
from fleet.host.engines.sim.harness import SimProcess, start_sim
from fleet.playbook import Playbook, Run, expand_runs
from fleet.workloads import resolve_workload
from fleet.workloads.kinds import DatasetWorkload, RandomWorkload
from tests.testfleet.gpu_tools import local_gpu_env

# The sims' time scales: results are in sim time, and so is an open-loop schedule. The dataset run
# goes one request at a time, so its sim may run fast; the open-loop one is slower, so that the 10 ms
# bound on schedule delay (in sim time too) is 1 ms of wall time, which threads keep to.
FAST, STEADY = 0.02, 0.1


def start(base: Path, speed: float) -> SimProcess:
    env = local_gpu_env(base / "gpu", os.environ)
    args = ["--model-path", "qwen3.6-27b", "--context-length", "8192", "--mem-fraction-static", "0.75", "--speculative-algorithm", "DFLASH",
            "--speculative-draft-model-path", "qwen3.6-27b-dflash", "--speculative-num-draft-tokens", "16", "--trust-remote-code",
            "--disable-cuda-graph"]  # fmt: skip
    process = start_sim(args, base / "server.log", env={**env, "CUDA_VISIBLE_DEVICES": "0"}, speed=speed)
    assert process.wait_ready(60), process.log()
    return process


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = start(tmp_path_factory.mktemp("fast"), FAST)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = start(tmp_path_factory.mktemp("steady"), STEADY)
    yield process
    process.stop()


def identity(speed: float | None) -> RunIdentity:
    return RunIdentity(run_id="r1", label="tp1-dflash/x", server_id="s1", server_label="tp1-dflash", sweep_id="sw", host="local",
                       boot_id="b", attempt=1, agent_pid=os.getpid(), gpus=(0,), server={}, log_path="x.log", host_facts=None,
                       provenance=None, engine_release="0.5.23", sim_speed=speed)  # fmt: skip


def playbook_run(name: str, workload: dict[str, Any]) -> Run:
    playbook = Playbook.model_validate({
        "name": "openloop", "model": {"repo": "Qwen/Qwen3.6-27B", "card": "qwen3.6-27b"}, "methods": {"ar": {}}, "tp": [1],
        "workloads": {name: workload},
    })  # fmt: skip
    return expand_runs(playbook)[0]


def run_it(server: SimProcess, speed: float, run: Run) -> RunResult:
    """The agent's way through one run: the shard's resolved workload (at this host's time scale),
    driven against the server, into a result that goes through the contract's reader."""
    spec = RunSpec(run.id, run.label, json.loads(json.dumps(resolve_workload(run, speed))), 1)
    driver = Driver(Client(Endpoint("127.0.0.1", server.port)), AgentLimits(request_timeout_s=60, no_token_timeout_s=30), ServerFacts(),
                    Gate(lambda: None, threading.Event()), spec)  # fmt: skip
    outcome = drive(driver)
    result = build_result(identity=identity(speed), workload=spec.workload, outcome=outcome, started_at=0.0, ended_at=1.0)
    return RunResult.from_json(json.dumps(result.to_json()))


def test_a_spec_bench_dataset_run_records_the_dataset_and_figures_per_category(fast: SimProcess, tmp_path: Path) -> None:
    questions = tmp_path / "question.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in [
        {"question_id": 81, "category": "writing", "turns": ["Compose an engaging travel blog post about a trip to Hawaii.", "Rewrite it."]},
        {"question_id": 82, "category": "writing", "turns": ["Draft a short professional email asking for feedback."]},
        {"question_id": 161, "category": "coding", "turns": ["Write a Python function that returns the n-th Fibonacci number."]},
        {"question_id": 162, "category": "coding", "turns": ["Write a Python function that sorts a list with quicksort."]},
    ]))  # fmt: skip
    run = playbook_run("spec", {"kind": "dataset", "file": str(questions), "format": "spec_bench", "requests": 6, "seed": 1, "max_new_tokens": 24})
    assert isinstance(run.workload, DatasetWorkload)
    result = run_it(fast, FAST, run)
    assert result.status is RunStatus.ok, (result.failure, result.deviations)
    dataset = result.workload["dataset"]
    assert dataset["file"] == "question.jsonl" and len(dataset["sha256"]) == 64 and len(dataset["sample_sha256"]) == 64
    assert dataset["prompt_tokens"]["n"] == 6 and sum(dataset["categories"].values()) == 6
    assert "samples" not in result.workload  # the texts stay in the shard
    assert len(result.extras["sample_sha256"]) == 64
    categories = result.extras["categories"]
    assert set(categories) == set(dataset["categories"])
    for figures in categories.values():
        assert figures["acceptance_length"] > 1 and figures["output_tok_s_per_request"] > 0 and figures["output_tok_s"] is None
    assert all(r["category"] in categories and r["output_tokens"] == 24 for r in result.requests)


def test_an_open_loop_random_run_has_exact_lengths_goodput_and_schedule_delay(steady: SimProcess) -> None:
    workload = {"kind": "random", "input_tokens": 200, "max_new_tokens": 16, "requests": 24, "seed": 5,
                "load": {"rate": 8, "burstiness": 1.0, "max_in_flight": 16, "warmup_requests": 2, "seed": 9},
                "slo": {"ttft": "2s", "tpot": "200ms", "e2e": "5s"}}  # fmt: skip
    run = playbook_run("rnd", workload)
    assert isinstance(run.workload, RandomWorkload)
    result = run_it(steady, STEADY, run)
    delays = result.figures["schedule_delay_s"]
    # The bound is in the sim's time (10 ms there is 1 ms of wall time here): a machine loaded by
    # others can make the client late, and the run must then say so, never pass as ok.
    if delays["p50"] <= 0.010:
        assert result.status is RunStatus.ok, (result.failure, result.deviations)
    else:
        assert result.status is RunStatus.not_comparable and [d.kind for d in result.deviations] == [CLIENT_BEHIND]
    assert [r["prompt_tokens"] for r in result.requests] == [200] * 24  # exact, counted by the server
    assert all(r["output_tokens"] == 16 for r in result.requests)
    assert result.extras["warmup"] == {"requests": 2, "ok": 2}  # sent first, and in no figure
    assert result.figures["requests"]["sent"] == 24
    assert delays["n"] == 24 and delays["min"] >= 0
    assert all("schedule_delay_s" in r for r in result.requests)
    good = result.figures["goodput"]
    assert good["slo_s"] == {"ttft": 2.0, "tpot": 0.2, "e2el": 5.0}
    assert 0 < good["good_requests"] <= 24 and good["request_goodput"] == pytest.approx(good["good_requests"] / result.figures["wall_s"])
    # The load was the one asked for: 24 requests at 8 per second of the sim's time are due over
    # about 3 s of it. Judged on when each was due (sent less its lateness), which a loaded machine
    # does not stretch as it stretches the run's wall time (10.8 s of it beside a CPU hog).
    due = [r["started_at"] - r["schedule_delay_s"] for r in result.requests]
    assert 1.5 < (max(due) - min(due)) / STEADY < 8
    assert result.figures["wall_s"] > 1.5


def test_goodput_is_vllms_definition_and_a_late_client_is_not_comparable() -> None:
    def done(ttft: float, e2e: float, tokens: int, late: float) -> RequestOutcome:
        return RequestOutcome(started_at=0.0, ok=True, output_tokens=tokens, ttft_s=ttft, e2e_s=e2e, schedule_delay_s=late)

    outcomes = [done(0.1, 1.0, 11, 0.02), done(0.5, 1.0, 11, 0.03), done(0.1, 3.0, 11, 0.02), done(0.1, 0.1, 1, 0.02)]
    out = WorkloadOutcome(sent=[Sent(o, {"repeat": 0, "request": i}) for i, o in enumerate(outcomes)], planned_requests=4)
    out.measured({"repeat": 0}, 2.0)
    workload = {"name": "r", "kind": "random", "max_new_tokens": 1, "slo": {"ttft": 0.2, "tpot": 0.1}}
    result = build_result(identity=identity(None), workload=workload, outcome=out, started_at=0.0, ended_at=1.0)
    good = result.figures["goodput"]
    # TTFT 0.5 s misses; TPOT (3.0-0.1)/10 = 0.29 s misses; a one-token output's TPOT counts as 0 (vllm's rule).
    assert good["good_requests"] == 2 and good["request_goodput"] == 1.0 and good["slo_attainment"] == 0.5
    assert good["attainment_by_metric"] == {"ttft": 0.75, "tpot": 0.75}
    assert result.status is RunStatus.not_comparable
    assert [d.kind for d in result.deviations] == [CLIENT_BEHIND] and "median 20.0 ms" in result.deviations[0].message


class _SlowServer:
    """A driver stand-in whose requests take `busy_s` each (a server slower than the schedule)."""

    def __init__(self, busy_s: float) -> None:
        self.busy_s = busy_s
        self.gate = Gate(lambda: None, threading.Event())

    def send(self, prompt: Any, max_new_tokens: int) -> RequestOutcome:
        time.sleep(self.busy_s)
        return RequestOutcome(started_at=time.time(), ok=True)


def test_requests_the_cap_held_back_are_not_counted_late_behind_an_earlier_held_one() -> None:
    """A rate far above what `max_in_flight` admits: while the loop waits for a slot, the requests
    due meanwhile wait for the cap too. Their lateness is the client's own (thread start-up), and the
    time the cap held them is recorded apart (held_by_cap_s). Before the fix every request behind a
    held one counted the whole wait as lateness (a median of hundreds of ms here)."""
    from fleet.host.agent.kinds.listed import Planned, open_loop

    plans = [Planned("p", 4, {"request": i}) for i in range(24)]
    busy_s = 0.2
    sent, _ = open_loop(_SlowServer(busy_s), plans, {"rate": 1000.0, "burstiness": 1.0, "max_in_flight": 2}, random.Random(1))  # type: ignore[arg-type]
    assert len(sent) == 24
    # Two slots free together every busy_s: the request taking the second one was due long before.
    late = [s.outcome.schedule_delay_s for s in sent if (s.outcome.schedule_delay_s or 0.0) > busy_s * 0.8]
    assert late == [], sorted(s.outcome.schedule_delay_s or 0.0 for s in sent)
    held = [s.tags.get("held_by_cap_s", 0.0) for s in sent]
    assert sum(1 for h in held if h > busy_s * 0.8) >= 20, held  # all but the first two waited for a slot
