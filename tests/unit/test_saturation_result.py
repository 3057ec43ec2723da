"""A saturation search driven by the real agent code (fleet.host.agent.drive, the streaming client)
against a real simulated server, into a result that goes through the contract: every probe a
section of its own, chosen by the pure search from the probes before it, its figures and goodput in
the result's `saturation`, no run-wide rate that would blend the probes; the contract's typed view
of the section, None for a result without one, a ContractError naming the field for a bad one."""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Iterator

import pytest

from fleet.host.agent.client import Client, Endpoint
from fleet.host.agent.drive import drive
from fleet.host.agent.driver import Driver, Gate, ServerFacts
from fleet.host.agent.kinds.listed import random_requests, sample_sha256
from fleet.host.agent.kinds.saturation import Probe, SearchSpec, next_rate
from fleet.host.agent.results import RunIdentity, build_result
from fleet.host.contract import ContractError, RunResult, RunStatus
from fleet.host.contract.saturation import Saturation
from fleet.host.contract.shard import AgentLimits, RunSpec
from fleet.host.engines.sim.harness import SimProcess, start_sim
from fleet.playbook import Playbook, expand_runs
from fleet.workloads import resolve_workload
from tests.testfleet.gpu_tools import local_gpu_env

SPEED = 0.1  # the sim's time scale: results (and the search's rates) are in its time

WORKLOAD = {"kind": "random", "input_tokens": 256, "max_new_tokens": 16, "requests": 12, "seed": 2,
            "load": {"rate": 4, "burstiness": 100, "seed": 5, "search": {"target": 0.9, "rates": [2, 32], "tolerance": 0.5, "max_probes": 5}},
            "slo": {"tpot": "40ms"}}  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    base = tmp_path_factory.mktemp("sim")
    env = local_gpu_env(base / "gpu", os.environ)
    args = ["--model-path", "llama-3.1-8b-instruct", "--context-length", "4096", "--mem-fraction-static", "0.75"]
    process = start_sim(args, base / "server.log", env={**env, "CUDA_VISIBLE_DEVICES": "0"}, speed=SPEED)
    assert process.wait_ready(60), process.log()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def searched(server: SimProcess) -> tuple[RunSpec, RunResult]:
    playbook = Playbook.model_validate({"name": "s", "model": {"repo": "meta-llama/Llama-3.1-8B-Instruct", "card": "llama-3.1-8b-instruct"},
                                        "methods": {"ar": {}}, "tp": [1], "workloads": {"w": WORKLOAD}})  # fmt: skip
    run = expand_runs(playbook)[0]
    spec = RunSpec(run.id, run.label, json.loads(json.dumps(resolve_workload(run, SPEED))), 1)
    driver = Driver(Client(Endpoint("127.0.0.1", server.port)), AgentLimits(request_timeout_s=60, no_token_timeout_s=30), ServerFacts(),
                    Gate(lambda: None, threading.Event()), spec)  # fmt: skip
    identity = RunIdentity(run_id="r1", label="x", server_id="s1", server_label="x", sweep_id="sw", host="local", boot_id="b", attempt=1,
                           agent_pid=os.getpid(), gpus=(0,), server={}, log_path="x.log", host_facts=None, provenance=None,
                           engine_release="0.5.23", sim_speed=SPEED)  # fmt: skip
    result = build_result(identity=identity, workload=spec.workload, outcome=drive(driver), started_at=0.0, ended_at=1.0)
    return spec, RunResult.from_json(json.dumps(result.to_json()))


def test_a_search_records_every_probe_and_what_they_establish(searched: tuple[RunSpec, RunResult]) -> None:
    spec, result = searched
    assert result.status is RunStatus.ok, (result.failure, result.deviations)
    search = Saturation.of(result)
    assert search is not None and search.rates == (2.0, 32.0) and search.slo_s == {"tpot": 0.04} and len(search.searches) == 1
    [found] = search.searches
    # The rates are the pure search's, given the attainments the result records.
    pure = SearchSpec(0.9, 2.0, 32.0, 0.5, 5, 4.0)
    for index, probe in enumerate(found.probes):
        assert probe.rate == next_rate(pure, [Probe(p.rate, p.slo_attainment) for p in found.probes[:index]])
        assert probe.figures["requests"]["sent"] == 12 and probe.percentile("tpot_s", "p90") is not None and probe.percentile("ttft_s", "p50") is not None
    assert next_rate(pure, [Probe(p.rate, p.slo_attainment) for p in found.probes]) is None
    assert found.capacity_rate == max((p.rate for p in found.probes if p.passed), default=None) and found.bracket[0] == found.capacity_rate
    # Each probe its own prompts, all of them in the hash; no figure blends the probes.
    assert len(result.requests) == 12 * len(found.probes) and {r["probe"] for r in result.requests} == set(range(len(found.probes)))
    asked = [plan for index in range(len(found.probes)) for plan in random_requests(spec.workload, index)]
    assert result.extras["sample_sha256"] == sample_sha256(asked)
    assert result.figures["output_tok_s"] is None and result.figures["tpot_s"] is None and "goodput" not in result.figures
    assert result.figures["requests"]["sent"] == 12 * len(found.probes)


def test_a_result_without_a_search_reads_as_none_and_a_bad_one_is_named(searched: tuple[RunSpec, RunResult]) -> None:
    _, result = searched
    data: dict[str, Any] = result.to_json()
    older = {k: v for k, v in data.items() if k != "saturation"}
    assert Saturation.of(RunResult.from_json(json.dumps(older))) is None
    data["saturation"]["searches"][0]["verdict"] = "roughly"
    with pytest.raises(ContractError, match=r"saturation.searches\[0\].verdict"):
        Saturation.of(RunResult.from_json(json.dumps(data)))
