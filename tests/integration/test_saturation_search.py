"""The saturation search on a real test host (issue 22, Must-show 4): `fleet sweep` of a random
workload with a `load.search` under a TPOT SLO, against the sim, finds the sim's known capacity
within 5 % in at most 8 probes, all against one server start.

The reference is not the search's: it is the sim's own performance model (the PerfModel the sim
builds for this model on this GPU) solved for the rate at which the steady-state TPOT reaches the
SLO (fleet.host.engines.sim.perf.tpot_capacity). Arrivals are steady (burstiness 100: gaps within
about 10 % of 1/rate), so that every request of a probe decoding while arrivals go on sees the
same load, give or take one prefill in its life: the mean-field model's. Those that still decode
after the probe's last arrival (at these lengths about a third of 80 requests) see a lighter load
and pass at any rate, so the search's target (0.75) stays well above their share; under Poisson
arrivals the requests of one probe see different loads and the capacity depends on the TPOT
distribution's tail, which the mean-field model does not give.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from fleet.host.contract import load_result
from fleet.host.contract.saturation import FOUND, Saturation
from fleet.host.engines.sim import perf
from fleet.host.engines.sim.server import SimServer, prepare
from fleet.inventory import load_inventory
from fleet.report import render, report_of
from fleet.report.saturation import TITLE
from fleet.sweep.controller import start_sweep
from tests.testfleet.gpu_tools import local_gpu_env

pytestmark = pytest.mark.testfleet

PROMPT, OUTPUT, TPOT = 1024, 64, 0.050
# Four times the sim's own speed: the search's rates, TPOTs and SLO are in the sim's time (the agent
# scales arrivals by the host's time_scale and its figures back), so the probes are the same ones
# at a quarter of the wall time (sim_speed 1: the same 7 probes, 8.03 found of 8.20, each probe's
# TPOT p50 within 1 %; beside two busy loops at load average 21 too). A decode step at capacity is
# 12.5 ms of wall time, far above the client's own work per token, and the sim keeps a virtual clock
# (engine._spend) that a wake-up late by less than 50 ms does not slow. A figure left in wall time
# would now read 4x too fast and fail the test (at sim_speed 1 it could not be seen).
SIM_SPEED = 0.25
# The one server start at twenty times the sim's own speed: the search measures none of it.
SIM_START_SPEED = 0.05
SERVER = {"context_length": 8192, "mem_fraction_static": 0.75}
PLAYBOOK = {
    "name": "saturation",
    "model": {"repo": "meta-llama/Llama-3.1-8B-Instruct", "card": "llama-3.1-8b-instruct"},
    "methods": {"autoregressive": {}},
    "tp": [1],
    "server": SERVER,
    "workloads": {
        "capacity": {
            "kind": "random", "input_tokens": PROMPT, "max_new_tokens": OUTPUT, "requests": 80, "seed": 1,
            "load": {"rate": 6, "burstiness": 100, "seed": 3, "search": {"target": 0.75, "rates": [4, 16], "tolerance": 0.03, "max_probes": 8}},
            "slo": {"tpot": f"{TPOT * 1000:.0f}ms"},
        },
    },
    "limits": {"server_start_timeout_s": 300, "request_timeout_s": 120, "no_token_timeout_s": 60},
}  # fmt: skip


def sim_model(base: Path) -> perf.PerfModel:
    """The PerfModel the sim builds for the playbook's server on the test host's GPU (the fake
    nvidia-smi's default profile, an RTX PRO 6000): its own code, run here without serving."""
    env = {**local_gpu_env(base, os.environ), "CUDA_VISIBLE_DEVICES": "0"}
    args = ["--model-path", "llama-3.1-8b-instruct", "--context-length", str(SERVER["context_length"]), "--mem-fraction-static", str(SERVER["mem_fraction_static"])]
    server = prepare(args, env)
    assert isinstance(server, SimServer), server
    return server.build_engine().model


def test_the_search_finds_the_sims_capacity_within_5_percent_in_8_probes(test_fleet_factory, tmp_path: Path) -> None:
    model = sim_model(tmp_path / "gpu")
    capacity = perf.tpot_capacity(model, tpot_s=TPOT, prompt_tokens=PROMPT, output_tokens=OUTPUT)
    fleet = test_fleet_factory(["ct200"])
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": SIM_SPEED, "sim_start_speed": SIM_START_SPEED})))
    book = tmp_path / "saturation.yaml"
    book.write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))

    outcome = start_sweep(book, hosts, tmp_path / "results", poll_interval_s=0.5)

    [path] = list(outcome.directory.glob("ct200/runs/*.json"))
    result = load_result(path)
    assert result.status.value == "ok", (result.failure, result.deviations)
    search = Saturation.of(result)
    assert search is not None and len(search.searches) == 1
    [found] = search.searches
    rates = [probe.rate for probe in found.probes]
    assert found.verdict == FOUND and len(found.probes) <= 8, rates
    assert found.capacity_rate is not None and abs(found.capacity_rate - capacity) / capacity <= 0.05, (capacity, found)
    # One server for every probe, and the model's own condition held: the batch stayed below the
    # server's max_running_requests, so no request queued for a slot.
    assert result.server is not None and len({r["probe"] for r in result.requests}) == len(found.probes)
    assert capacity * (OUTPUT - 1) * TPOT < result.server["max_running_requests"]
    # Every probe's record: its rate, SLO attainment and latency percentiles.
    for probe in found.probes:
        assert probe.slo_attainment is not None and probe.percentile("tpot_s", "p90") is not None and probe.percentile("ttft_s", "p50") is not None
        assert probe.passed == (probe.slo_attainment >= search.target)
    # The report reads it back (through the ledger) into its SLO frontier.
    markdown = render(report_of([outcome.directory]), "md")
    assert f"## {TITLE}" in markdown and f"{found.capacity_rate:,.2f} [" in markdown, markdown
