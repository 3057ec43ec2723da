"""One vocabulary and one reading of a sweep folder: `fleet diagnose DIR` finds each failure once,
from server logs, failed runs and agent logs, and nothing in plans, shards, facts or ok runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleet.host.agent import client, results, runner
from fleet.host.agent.kinds import concurrency, long_context
from fleet.host.contract import ContractError, RunResult
from fleet.host.contract.layout import SweepDir
from fleet.host.contract.results import Failure
from fleet.host.diagnose.classify import diagnose_file, diagnose_paths
from fleet.host.failures import ROOT_CAUSES, VALUES, FailureClass, parse_failure_class, root_cause
from fleet.sweep.fixing import classify_result

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
SWEEP = LOGS / "sweep"


def test_every_agent_failure_constant_is_a_value_of_the_one_enum() -> None:
    names = {
        runner: ("SERVER_START_FAILED", "SERVER_START_TIMEOUT", "SERVER_DIED", "SERVER_HUNG", "WARMUP_FAILED", "SERVICE_ERROR", "PORT_OR_GPU_BUSY", "AGENT_ERROR"),
        client: ("HTTP_400_CONTEXT", "HTTP_400", "HTTP_ERROR", "TIMEOUT", "NO_TOKEN_TIMEOUT", "CONNECTION_REFUSED", "CONNECTION_RESET",
                 "SERVER_ERROR_CHUNK", "ABORTED_BY_SERVER", "ABORTED_BY_AGENT", "INCOMPLETE_STREAM", "BAD_RESPONSE"),
        results: ("SKIPPED", "NO_OUTPUT_TOKENS", "REQUESTS_FAILED"),
        concurrency: ("UNKNOWN_MAX_RUNNING",),
        long_context: ("CALIBRATION_FAILED", "CONTEXT_TOO_SMALL"),
    }  # fmt: skip
    for module, constants in names.items():
        for name in constants:
            assert getattr(module, name) in VALUES, f"{module.__name__}.{name}"
    assert client.HTTP_400_CONTEXT == FailureClass.CONTEXT_LENGTH_EXCEEDED.value  # a root cause, said once


def test_the_result_reader_checks_the_failure_class() -> None:
    assert Failure.from_json({"class": "cuda_graph_error", "message": "m"}, "r.json").error_class == "cuda_graph_error"
    with pytest.raises(ContractError, match=r"r\.json: failure\.class: expected a failure class .* got 'http_400_context'"):
        Failure.from_json({"class": "http_400_context", "message": "m"}, "r.json")
    with pytest.raises(ValueError, match="plan.json: failures.x: unknown failure class 'boom'"):
        parse_failure_class("boom", "plan.json: failures.x")


def test_root_cause_prefers_the_agents_diagnosis() -> None:
    assert root_cause("server_died", {"failure_class": "cuda_oom"}) == "cuda_oom"
    assert root_cause("http_400", None) == "http_400"
    assert root_cause("server_died", {"failure_class": "unknown"}) == "server_died"  # says more than unknown
    assert FailureClass.SERVER_DIED not in ROOT_CAUSES and FailureClass.CUDA_GRAPH_ERROR in ROOT_CAUSES


def _result(source: str, **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((SWEEP / source / "result.json").read_text())
    failure = changes.pop("failure", None)
    if failure is not None:
        document["failure"] = {**document["failure"], **failure}
    document.update(changes)
    return document


def test_a_sweep_folder_finds_every_failure_once_and_nothing_else(tmp_path: Path) -> None:
    sweep = tmp_path / "s1" / "ct200"
    (sweep / SweepDir.RUNS).mkdir(parents=True)
    (sweep / SweepDir.LOGS).mkdir()
    # Beside the results: facts of a sim host without torch, a shard and a plan that speak of KV
    # pools, the agent's progress and its log (which quotes a server's fatal line).
    (sweep / SweepDir.HOST_FACTS).write_text(json.dumps({"engine": {"error": "ModuleNotFoundError: No module named 'torch'"}}))
    (sweep / SweepDir.SHARD).write_text(json.dumps({"notes": "Not enough memory. Please try to increase --mem-fraction-static"}))
    (tmp_path / "s1" / "plan.json").write_text(json.dumps({"notes": ["KV cache pool is too small"]}))
    (sweep / SweepDir.PROGRESS).write_text(json.dumps({"error": "CUDA out of memory"}))
    crash = (LOGS / "seed-ddtree-b8-illegal-instruction.log").read_text()
    (sweep / SweepDir.LOGS / "tp1-b8.log").write_text(crash)
    (sweep / SweepDir.LOGS / "tp1-linear.log").write_text((SWEEP / "tp1-linear-fib" / "server.log").read_text())
    (sweep / SweepDir.AGENT_LOG).write_text(
        "2026-05-23 10:12:56 INFO fleet.agent: run tp1-b8-fib: failed\n"
        "2026-05-23 10:12:56 WARNING fleet.agent: server tp1-b8: fatal log line (process_failed): "
        "RuntimeError: CUDA error: an illegal instruction was encountered\n"
    )
    server_log = "/var/lib/fleet/sweeps/s1/logs/tp1-b8.log"
    died = {"class": "server_died", "message": "the server died", "evidence": [], "log_path": server_log}
    runs = {
        "ok": _result("tp1-linear-fib"),
        # Two runs of the one server that crashed: one failure.
        "b8-fib": _result("tp1-b12-timeout", run_id="b8a", label="tp1-b8-fib", failure=died),
        "b8-long": _result("tp1-b12-timeout", run_id="b8b", label="tp1-b8-long", failure=died),
        # A server whose log was not fetched: the agent's stored diagnosis is read, not redone.
        "oom": _result(
            "tp1-b12-timeout",
            run_id="oom",
            label="tp1-oom-fib",
            failure={
                **died,
                "log_path": "/var/lib/fleet/sweeps/s1/logs/tp1-oom.log",
                "diagnosis": {
                    "failure_class": "cuda_oom",
                    "evidence": [{"line": 7, "text": "torch.OutOfMemoryError: CUDA out of memory."}],
                    "fix": "lower --mem-fraction-static",
                    "figures": {"tried": "1.52 GiB"},
                },
            },
        ),  # fmt: skip
        # The client saw the 400; the server log (the healthy one) shows no failure.
        "ctx": _result("tp1-auto-ctx30k", log_path="/var/lib/fleet/sweeps/s1/logs/tp1-linear.log"),
    }
    for name, document in runs.items():
        (sweep / SweepDir.RUNS / f"{name}.json").write_text(json.dumps(document))

    diagnoses = diagnose_paths([tmp_path])
    assert sorted((Path(d.path).name, d.failure_class) for d in diagnoses) == [
        ("ctx.json", "context_length_exceeded"),
        ("oom.json", "cuda_oom"),
        ("tp1-b8.log", "cuda_illegal_instruction"),
    ]
    b8 = next(d for d in diagnoses if d.failure_class == "cuda_illegal_instruction")
    assert "an illegal instruction was encountered" in b8.evidence[0].text  # the b12 story: the crash, first
    oom = next(d for d in diagnoses if d.failure_class == "cuda_oom")
    assert oom.evidence[0].line == 7 and oom.fix == "lower --mem-fraction-static"

    # Only ok runs and the non-results: nothing at all.
    for name in ("b8-fib", "b8-long", "oom", "ctx"):
        (sweep / SweepDir.RUNS / f"{name}.json").unlink()
    (sweep / SweepDir.LOGS / "tp1-b8.log").unlink()
    (sweep / SweepDir.AGENT_LOG).write_text("2026-05-23 10:12:56 INFO fleet.agent: run tp1-linear-fib: ok\n")
    assert diagnose_paths([tmp_path]) == []


def test_a_server_log_that_shows_nothing_is_unknown_alone_and_no_failure_beside_its_runs(tmp_path: Path) -> None:
    # SGLang at --log-level warning prints no ready line: its whole log may be one warning. Given alone, the log is all
    # there is and it shows nothing of a server that ran (unknown); in a sweep folder its run records say more, and a
    # server whose runs succeeded is no failure.
    sweep = tmp_path / "s1" / "ct200"
    (sweep / SweepDir.RUNS).mkdir(parents=True)
    (sweep / SweepDir.LOGS).mkdir()
    quiet = sweep / SweepDir.LOGS / "tp1-linear.log"
    quiet.write_text("[2026-05-24 10:00:03] Warning: Target model's context_length (524288) is greater than the derived context_length (262144).\n")
    (sweep / SweepDir.RUNS / "ok.json").write_text(json.dumps(_result("tp1-linear-fib")))
    assert [diagnosis.failure_class for diagnosis in diagnose_paths([tmp_path])] == [None]  # its warning, a finding
    (alone,) = diagnose_paths([quiet])
    assert alone.failure_class == "unknown" and "no ready line" in (alone.fix or "")
    (sweep / SweepDir.RUNS / "ok.json").unlink()  # a folder of bare logs is read as bare logs
    assert [diagnosis.failure_class for diagnosis in diagnose_paths([tmp_path])] == ["unknown"]


def test_an_agent_log_speaks_of_what_no_server_log_shows(tmp_path: Path) -> None:
    # The agent itself crashed: its traceback is the only evidence.
    (tmp_path / SweepDir.AGENT_LOG).write_text(
        "2026-05-23 10:12:56 ERROR fleet.agent: server tp1-b8: Traceback (most recent call last):\n"
        '  File "/opt/fleet/fleet/host/agent/runner.py", line 200, in run\n'
        "PermissionError: [Errno 13] Permission denied: '/var/lib/fleet/sweeps/s1/logs'\n"
    )
    (diagnosis,) = diagnose_paths([tmp_path])
    assert diagnosis.failure_class == "unknown" and any("PermissionError" in e.text for e in diagnosis.evidence)


def test_classify_result_reads_the_agents_diagnosis_and_the_runs_own_root_cause() -> None:
    stored = RunResult.from_json(_result("tp1-b12-timeout", failure={"class": "server_died", "diagnosis": {"failure_class": "cuda_graph_error", "figures": {"cuda_graph_max_bs": "64"}}}), "r.json")
    assert classify_result(stored) == ("cuda_graph_error", {"cuda_graph_max_bs": "64"})
    own = RunResult.from_json(_result("tp1-b12-timeout", failure={"class": "context_length_exceeded", "message": "400", "evidence": []}), "r.json")
    assert classify_result(own) == ("context_length_exceeded", {})
    agent_only = RunResult.from_json(_result("tp1-b12-timeout", failure={"class": "server_hung", "message": "no answer", "evidence": []}), "r.json")
    assert classify_result(agent_only) == (None, {})


def test_the_sweep_fixture_folder_still_reads_as_before() -> None:
    by_name = {Path(d.path).parent.name + "/" + Path(d.path).name: d.failure_class for d in diagnose_paths([SWEEP])}
    assert by_name == {
        "tp1-auto-ctx30k/server.log": None,  # only its finding: the server answered 400 and served on
        "tp1-auto-ctx30k/result.json": "context_length_exceeded",
        "tp1-b12-timeout/server.log": "server_start_timeout",
    }
    assert diagnose_file(SWEEP / "tp1-linear-fib" / "server.log").failure_class is None
