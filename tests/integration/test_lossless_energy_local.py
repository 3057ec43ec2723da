"""The lossless check and the energy figures, end to end with the agent run locally against the
real simulator and the test hosts' fake nvidia-smi playing H200s (power as driver 580 prints it):

- an autoregressive server, a healthy DDTree b15 and a DDTree b15 whose verify step silently
  corrupts its tokens (the sim's `corrupt_outputs`) run side by side; the healthy one passes the
  check against the autoregressive server's greedy outputs and is measured; the corrupted one
  serves no run: each fails `not_lossless`, with the first diverging position per prompt;
- every measured run carries its energy: joules per GPU from the fake tool's 690 W (the H200's
  matmul-loop draw), tokens per joule, in simulated time as its tok/s are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet.host.agent.lossless import GREEDY_SET, MAX_NEW_TOKENS
from fleet.playbook import Run
from tests.integration.test_agent_local import (  # noqa: F401 (fixtures)
    AUTOREGRESSIVE,
    MODEL,
    REPO,
    SPEED,
    agents,
    kill_leftover_servers,
    results,
    seed_runs,
    server,
    start_agent,
    write_shard,
)
from tests.testfleet.gpu_tools import local_gpu_env

pytestmark = pytest.mark.timeout(180)

H200 = {
    "name": "NVIDIA H200", "count": 4, "compute_cap": "9.0", "memory_total_mib": 143771, "power_limit_w": 700,
    "idle": {"power_w": 78.37}, "busy": {"power_w": 690.0},
}  # fmt: skip
DDTREE_B15 = MODEL + [
    "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "15", "--speculative-draft-model-path", "qwen3.6-27b-dflash",
    "--speculative-num-draft-tokens", "16", "--mamba-scheduler-strategy", "extra_buffer", "--mamba-full-memory-ratio", "0.5",
    "--max-running-requests", "4",
]  # fmt: skip


def test_the_agent_fails_a_corrupting_server_and_measures_energy(tmp_path: Path, seed_runs: dict[str, Run], agents: list) -> None:  # noqa: F811
    env = local_gpu_env(tmp_path / "gpu-tools", os.environ, H200)
    env["PYTHONPATH"] = str(REPO)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text(json.dumps({"corrupt_outputs": [{"algorithm": "DDTREE", "budget": 15, "from_token": 3}]}))
    short = seed_runs["short"]
    servers = [
        server("ddtree", 1, DDTREE_B15, [short]),  # first in the shard: it waits for the reference starting beside it
        server("ar", 0, AUTOREGRESSIVE, [short]),
        server("ddtree-corrupt", 2, DDTREE_B15, [short], faults=corrupt),
    ]
    sweep = tmp_path / "sweep"
    write_shard(sweep, servers, pool=[0, 1, 2])
    agents.append(start_agent(sweep, env))
    try:
        assert agents[0].wait(timeout=150) == 0, (sweep / "agent.log").read_text()
    finally:
        kill_leftover_servers(sweep)
    by_label = {r["label"]: r for r in results(sweep).values()}

    reference = by_label["ar/short"]
    assert reference["status"] == "ok" and reference["lossless"]["role"] == "reference"
    assert [len(o["ids"]) for o in reference["lossless"]["outputs"]] == [MAX_NEW_TOKENS] * len(GREEDY_SET)

    healthy = by_label["ddtree/short"]
    assert healthy["status"] == "ok" and healthy["figures"]["acceptance_length"] > 1.5
    check = healthy["lossless"]["check"]
    assert check["verdict"] == "pass" and check["first_divergence"] == [None] * len(GREEDY_SET), check
    assert check["unit"] == "token" and check["reference_server"] == "ar"

    bad = by_label["ddtree-corrupt/short"]
    assert bad["status"] == "failed" and bad["failure"]["class"] == "not_lossless", bad["failure"]
    assert bad["figures"]["output_tok_s"] is None  # never a speed-up
    assert bad["lossless"]["check"]["first_divergence"] == [3] * len(GREEDY_SET)
    assert "first diverging token per greedy prompt: prose 3, code 3" in bad["failure"]["evidence"][0]
    assert "not lossless" in bad["failure"]["message"]

    for result in (reference, healthy):
        energy = result["figures"]["energy"]
        assert energy["unmeasured"] is None and energy["gpus"] == result["gpus"] and energy["time"] == "simulated"
        assert energy["mean_power_w"] == pytest.approx(690.0, rel=0.02)  # the fake's busy H200
        seconds = result["figures"]["output_tokens"] / result["figures"]["output_tok_s"]  # the run's simulated time
        assert energy["joules"] == pytest.approx(690.0 * seconds, rel=0.15)
        assert energy["tokens_per_joule"] == pytest.approx(result["figures"]["output_tokens"] / energy["joules"])
    # Faster at the same power: more tokens per joule.
    assert healthy["figures"]["energy"]["tokens_per_joule"] > 1.5 * reference["figures"]["energy"]["tokens_per_joule"]
