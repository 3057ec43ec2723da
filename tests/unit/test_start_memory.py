"""What a vLLM start measured corrects the next sweep's prediction (issue 23, Must-show 2): the
agent keeps the start's memory lines in the result, the sweep records them with the launch and
the GPU (results/starts.json), and the next plan of the same configuration predicts from what was
measured instead of the range it assumes. What a host sent back is bounded before it is used."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.host.agent.logwatch import START_LINE_CHARS, START_LINES, LogScan
from fleet.host.contract import ContractError, RunResult, RunStatus
from fleet.host.engines.vllm import memory as m
from fleet.host.engines.vllm.engine import memory_inputs
from fleet.host.engines.vllm.flags import parse_serve
from fleet.host.modelcard import load_model_card
from fleet.inventory import Host
from fleet.plan import PlanOptions, hardware_of, make_plan, started_servers
from fleet.planning.starts import StartHistory, record_starts
from fleet.playbook import load_playbook
from tests.unit.fake_hosts import RTX_MODEL

GIB = 1 << 30
MEASURED = 7 * GIB  # what the start "measured": the activation peak and the rest, above the weights


def host() -> Host:
    return Host.model_validate(
        {
            "name": "ct200",
            "address": "10.201.0.2",
            "gpus": {"count": 1, "model": RTX_MODEL},
            "paths": {"work_dir": "/var/lib/fleet", "model_cache": "/srv/models", "staging": "/dev/shm/fleet"},
            "engine": {"kind": "sglang", "python": "/opt/sglang/bin/python", "vllm": {"python": "/opt/vllm/bin/python", "release": "0.33.0"}},
        }
    )


def playbook(tmp_path: Path, context_length: int = 32768) -> Any:
    data = {
        "name": "llama-vllm",
        "model": {"repo": "meta-llama/Llama-3.1-8B-Instruct", "card": "llama-3.1-8b-instruct"},
        "methods": {"autoregressive": {}},
        "tp": [1],
        "engine": ["vllm"],
        "server": {"context_length": context_length, "mem_fraction_static": 0.9},
        "workloads": {"short": {"kind": "short", "prompts": ["fib"], "max_new_tokens": 64}},
    }
    path = tmp_path / f"book-{context_length}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_playbook(path)


def logged_by_a_start(argv: list[str], gpu_memory_mib: int) -> list[str]:
    """The lines vLLM prints when its start measures MEASURED (its own formats, fleet/host/engines/vllm/memory.py)."""
    card = load_model_card("llama-3.1-8b-instruct")
    model, inputs = memory_inputs(parse_serve("0.33.0", argv[4:]).values, card, gpu_memory_mib=gpu_memory_mib, release="0.33.0")
    plan = m.plan_memory(model, replace(inputs, overhead=m.Overhead(MEASURED, MEASURED, "measured")))
    available = plan.requested_bytes - plan.weights_bytes_per_gpu - MEASURED
    blocks = available // plan.bytes_per_block
    return [
        "(EngineCore_DP0 pid=7) INFO 12-03 08:00:00 [gpu_worker.py:772] " + m.available_kv_cache_memory_line(available),
        "(EngineCore_DP0 pid=7) INFO 12-03 08:00:01 [kv_cache_utils.py:1147] "
        + m.kv_cache_size_line(int(blocks / plan.blocks_per_request * plan.context_len), plan.context_len, blocks / plan.blocks_per_request),
    ]


def result_with(server_id: str, lines: object) -> RunResult:
    return RunResult("r1", "vllm-tp1-autoregressive/short", server_id, "vllm-tp1-autoregressive", "sw", "ct200", RunStatus.ok, None, {}, {}, 0.0, 1.0,
                     server={"start_lines": lines}, engine="vllm", engine_release="0.33.0")  # fmt: skip


def test_the_next_plan_predicts_from_what_the_last_start_measured(tmp_path: Path) -> None:
    target = host()
    book = playbook(tmp_path)
    first = make_plan(book, [target])
    (server,) = first.servers
    assert "start-up overhead assumed" in (server.prediction or ""), server.prediction
    gpu = hardware_of(target).gpu_memory_mib
    assert gpu is not None
    lines = logged_by_a_start(server.launch.argv, gpu)

    # The agent's log watch of the vLLM server keeps them (and nothing else of the log).
    scan = LogScan("vllm")
    for line in ["(APIServer pid=1) INFO 12-03 07:59:59 [api_server.py:1] vLLM API server version 0.33.0", *lines, "INFO: Application startup complete."]:
        scan.feed(line)
    assert list(scan.start_lines) == lines

    # The sweep records them with the launch and the GPU; the file is what the next plan reads.
    history = StartHistory()
    assert record_starts(history, [result_with(server.config.id, list(scan.start_lines))], started_servers(first.servers, {"ct200": hardware_of(target)})) == 1
    path = tmp_path / "starts.json"
    history.save(path)
    again = StartHistory.load(path)
    assert again.records == history.records

    second = make_plan(book, [target], PlanOptions(starts=again))
    assert "start-up overhead measured 7.0-7.0 GiB" in (second.servers[0].prediction or ""), second.servers[0].prediction
    # Another max_model_len of the same profiling run is predicted from it too; the first plan's
    # range is gone from it.
    longer = make_plan(playbook(tmp_path, 65536), [target], PlanOptions(starts=again))
    assert "measured 7.0-7.0 GiB" in (longer.servers[0].prediction or "")


@pytest.mark.parametrize(
    "lines",
    [
        ["x"] * (START_LINES + 1),  # more lines than the agent keeps
        ["x" * (START_LINE_CHARS + 1)],  # a longer line than it keeps
        [1, 2],
        "Available KV cache memory: 1.00 GiB",
        [],
    ],
)
def test_what_a_host_sent_is_taken_only_as_the_agent_keeps_it(lines: object) -> None:
    history = StartHistory()
    servers = {"s1": m_started()}
    assert record_starts(history, [result_with("s1", lines)], servers) == 0 and history.records == []


def m_started():  # a server the controller launched, as started_servers makes it
    from fleet.planning.starts import StartedServer

    return StartedServer("vllm", ("/opt/vllm/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "/m"), {}, "0.33.0", 97887)


def test_a_malformed_history_names_its_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "starts.json"
    path.write_text(json.dumps({"schema": "fleet.starts/1", "starts": [{"engine": "vllm", "flags": ["/m"], "env": {}, "gpu_memory_mib": "lots", "release": "0.33.0", "lines": []}]}))
    with pytest.raises(ContractError) as caught:
        StartHistory.load(path)
    assert str(path) in str(caught.value) and "gpu_memory_mib" in str(caught.value)
