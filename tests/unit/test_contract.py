"""The controller<->agent contract: documents round-trip, and a reader never misreads a file of
another schema, a truncated file or a field of the wrong type -- it names the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.contract import (
    AgentError,
    AgentState,
    ContractError,
    Failure,
    HostQuarantine,
    Progress,
    RunResult,
    RunStatus,
    ServerPhase,
    ServerProgress,
    SweepDir,
    load_result,
)


def _result(**changes: object) -> RunResult:
    base = RunResult(
        run_id="r1",
        label="tp1-ddtree-b12/short",
        server_id="s1",
        server_label="tp1-ddtree-b12",
        sweep_id="sw",
        host="ct200",
        status=RunStatus.failed,
        failure=Failure("server_died", "died while serving", ("CUDA error: an illegal instruction",), "logs/x.log", -6, {"class": "cuda_illegal_instruction"}),
        figures={"requests": {"sent": 4, "ok": 0, "failed": 4, "timed_out": 0}, "output_tok_s": None},
        workload={"name": "short", "kind": "short"},
        started_at=1.0,
        ended_at=2.5,
        gpus=(0, 1),
        engine_release="0.5.23",
        extras={"levels": [{"concurrency": 1}]},
    )
    return RunResult(**{**vars(base), **changes})  # type: ignore[arg-type]


def test_a_result_round_trips_through_its_file(tmp_path: Path) -> None:
    result = _result()
    path = tmp_path / "r1.json"
    path.write_text(json.dumps(result.to_json()))
    assert load_result(path) == result
    assert json.loads(path.read_text())["levels"] == [{"concurrency": 1}]  # extras stay top-level sections


def test_a_result_of_another_schema_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "r1.json"
    path.write_text(json.dumps({**_result().to_json(), "schema": "fleet.run_result/1"}))
    with pytest.raises(ContractError, match=r"r1\.json: schema: expected fleet\.run_result/2 .*got 'fleet\.run_result/1'"):
        load_result(path)
    path.write_text(json.dumps({k: v for k, v in _result().to_json().items() if k != "schema"}))
    with pytest.raises(ContractError, match="schema: expected fleet.run_result/2"):
        load_result(path)


def test_a_truncated_result_names_its_file(tmp_path: Path) -> None:
    path = tmp_path / "r1.json"
    path.write_text(json.dumps(_result().to_json())[:200])
    with pytest.raises(ContractError, match=r"r1\.json: expected a whole JSON document \(truncated or not JSON\)"):
        load_result(path)
    with pytest.raises(ContractError, match=r"missing\.json: expected a readable file"):
        load_result(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("status", "great", "status: expected one of ok, partial, failed, skipped, not_comparable, got 'great'"),
        ("attempt", "2", "attempt: expected an integer, got '2'"),
        ("attempt", True, "attempt: expected an integer, got True"),
        ("figures", [], r"figures: expected an object, got \[\]"),
        ("failure", {"message": "x"}, r"failure\.class: expected a string \(the field is missing\)"),
    ],
)
def test_a_field_of_the_wrong_kind_is_named(field: str, value: object, message: str) -> None:
    with pytest.raises(ContractError, match=message):
        RunResult.from_json({**_result().to_json(), field: value}, "runs/r1.json")


def test_progress_round_trips_and_checks_its_schema() -> None:
    progress = Progress(
        sweep_id="sw",
        agent_pid=42,
        boot_id="b1",
        started_at=1.0,
        updated_at=2.0,
        state=AgentState.finished_with_errors,
        total=5,
        counts={"ok": 3, "failed": 1},
        servers={"s1": ServerProgress("tp1-ar", ServerPhase.running, "tp1-ar/short", 1.5)},
        last_error=AgentError("tp1-ar", "server_died", "died", 1.7),
    )
    document = progress.to_json()
    assert document["counts"] == {"ok": 3, "failed": 1, "done": 4, "remaining": 1}
    assert Progress.from_json(json.dumps(document)) == progress and progress.state.finished_work
    with pytest.raises(ContractError, match="progress.json: state: expected one of running, finished"):
        Progress.from_json({**document, "state": "crashed"})
    with pytest.raises(ContractError, match=r"servers\.s1\.phase: expected one of starting, warmup, running, stopping"):
        Progress.from_json({**document, "servers": {"s1": {**document["servers"]["s1"], "phase": "napping"}}})
    with pytest.raises(ContractError, match="schema: expected fleet.agent_progress/1"):
        Progress.from_json({**document, "schema": "fleet.agent_progress/0"})


def test_host_quarantine_round_trips_and_none_pushed_is_empty(tmp_path: Path) -> None:
    path = tmp_path / SweepDir.QUARANTINE
    assert HostQuarantine.load(path) == HostQuarantine()
    path.write_text(json.dumps(HostQuarantine({"s2": "illegal instruction on sm_120"}).to_json()))
    assert HostQuarantine.load(path).reasons == {"s2": "illegal instruction on sm_120"}
    path.write_text(json.dumps({"s2": "reason"}))  # an older fleet's bare mapping: refused, not misread
    with pytest.raises(ContractError, match="schema: expected fleet.host_quarantine/1"):
        HostQuarantine.load(path)


def test_the_sweep_directory_names_each_file_once() -> None:
    files = SweepDir("/srv/fleet/sweeps/sw")
    assert files.result("r1") == "/srv/fleet/sweeps/sw/runs/r1.json"
    assert files.server_log("tp1-ar") == "/srv/fleet/sweeps/sw/logs/tp1-ar.log"
    assert files.progress == "/srv/fleet/sweeps/sw/progress.json" and files.shard == "/srv/fleet/sweeps/sw/shard.json"
    # What a pull leaves behind is the agent's bookkeeping only, never results or logs.
    assert not any(pattern.startswith((SweepDir.RUNS, SweepDir.LOGS)) for pattern in SweepDir.PULL_EXCLUDES)
