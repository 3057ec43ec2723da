"""The host's registry of workload kinds (fleet.host.agent.kinds): the same kinds as the shard
contract and the controller's registry, and the one place the agent's driving and its results
ask, so that a kind added there is driven and reported without another edit."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, Collection

import pytest

from fleet.host.agent.client import RequestOutcome
from fleet.host.agent.drive import drive
from fleet.host.agent.driver import Driver, Gate, ServerFacts
from fleet.host.agent.kinds import KINDS, Kind
from fleet.host.agent.outcome import Measured, Sent, WorkloadOutcome
from fleet.host.agent.results import RunIdentity, build_result
from fleet.host.contract.shard import WORKLOAD_KINDS
from fleet.workloads.kinds import KINDS as CONTROLLER_KINDS


def disagreements(host: Collection[str], contract: Collection[str], controller: Collection[str]) -> list[str]:
    """Each kind one side lacks, named with the sides that have it; [] when all three agree."""
    sides = {"the host's registry (fleet.host.agent.kinds)": set(host), "the shard contract (WORKLOAD_KINDS)": set(contract),
             "the controller's registry (fleet.workloads.kinds)": set(controller)}  # fmt: skip
    return [f"{kind}: missing from {side}" for side, kinds in sides.items() for kind in sorted(set().union(*sides.values()) - kinds)]


def test_the_host_registry_the_contract_and_the_controller_know_the_same_kinds() -> None:
    assert disagreements(KINDS, WORKLOAD_KINDS, CONTROLLER_KINDS) == []
    assert len(KINDS) == len(WORKLOAD_KINDS) == 6  # no duplicate in the contract's tuple either


@pytest.mark.parametrize(
    ("host", "contract", "controller", "expected"),
    [
        ({*KINDS, "toy"}, WORKLOAD_KINDS, CONTROLLER_KINDS, ["toy: missing from the shard contract (WORKLOAD_KINDS)", "toy: missing from the controller's registry (fleet.workloads.kinds)"]),
        (set(KINDS) - {"agentic"}, WORKLOAD_KINDS, CONTROLLER_KINDS, ["agentic: missing from the host's registry (fleet.host.agent.kinds)"]),
        (KINDS, (*WORKLOAD_KINDS, "toy"), {*CONTROLLER_KINDS, "toy"}, ["toy: missing from the host's registry (fleet.host.agent.kinds)"]),
    ],
)  # fmt: skip
def test_a_kind_one_side_lacks_is_a_disagreement(host: Collection[str], contract: Collection[str], controller: Collection[str], expected: list[str]) -> None:
    assert disagreements(host, contract, controller) == expected


def test_a_kind_added_to_the_host_registry_alone_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KINDS, "toy", Kind(lambda driver, out: None))
    assert disagreements(KINDS, WORKLOAD_KINDS, CONTROLLER_KINDS) != []


def _ok(tokens: int) -> RequestOutcome:
    return RequestOutcome(started_at=1.0, ok=True, prompt_tokens=10, output_tokens=tokens, ttft_s=0.1, e2e_s=1.0, itl_s=[0.9 / (tokens - 1)] * (tokens - 1))


def _toy_drive(driver: Driver, out: WorkloadOutcome) -> None:
    for repeat in range(2):
        out.sent.append(Sent(_ok(8 * (repeat + 1)), {"repeat": repeat, "toy": True}))
        out.measured({"repeat": repeat}, 1.0)


def _toy_extras(measured: Measured) -> dict[str, Any]:
    return {"toy_sections": [figures["output_tokens"] for figures in measured.section_figures()], "toy_of": measured.workload["name"]}


def test_drive_and_build_result_ask_the_registry_for_a_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """One entry is all a kind needs on the host: drive() runs its driver, build_result adds its
    extras and, where it says so, leaves the run-wide rates out."""
    monkeypatch.setitem(KINDS, "toy", Kind(_toy_drive, _toy_extras, run_wide_rates=lambda workload: False))
    workload = {"name": "t", "kind": "toy", "max_new_tokens": 8}
    gate = Gate(lambda: None, threading.Event())
    driver = Driver(client=None, limits=None, facts=ServerFacts(), gate=gate, run=SimpleNamespace(workload=workload))  # type: ignore[arg-type]
    outcome = drive(driver)
    assert [s.tags for s in outcome.sent] == [{"repeat": 0, "toy": True}, {"repeat": 1, "toy": True}] and outcome.failure is None
    identity = RunIdentity(run_id="r1", label="x/t", server_id="s1", server_label="x", sweep_id="sw", host="local", boot_id="b", attempt=1,
                           agent_pid=1, gpus=(0,), server={}, log_path="x.log", host_facts=None, provenance=None, engine_release=None)  # fmt: skip
    result = build_result(identity=identity, workload=workload, outcome=outcome, started_at=0.0, ended_at=2.0)
    assert result.extras == {"toy_sections": [8, 16], "toy_of": "t"}  # not the default per-repeat figures
    assert result.figures["output_tokens"] == 24 and result.figures["output_tok_s"] is None and result.figures["ttft_s"] is None
    assert result.status == "ok"
