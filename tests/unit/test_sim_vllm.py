"""The simulator playing `vllm serve` (FLEET_SIM_ENGINE=vllm): its log lines are vLLM 0.33's (each
template is the literal at its file and line of the installed wheel), fleet's vLLM log reader and
diagnosis read them as they read a real vLLM log, its figures are the memory planner's, and its HTTP
surface (/health, /v1/models, /v1/completions, /metrics with vLLM's names) serves fleet's client and
the agent's reading of acceptance from the speculative-decoding counters."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from fleet.host.agent.client import Client, Endpoint, get_body, get_json, health_ok
from fleet.host.agent.lossless import send_greedy_set
from fleet.host.diagnose import diagnose_text
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import SpecCounters
from fleet.host.engines.sim import vllmtext
from fleet.host.engines.sim.harness import start_sim
from fleet.host.engines.sim.vllmserver import VllmSim, prepare
from fleet.host.engines.vllm import logparse
from fleet.host.engines.vllm.metrics import spec_counters
from tests.unit.vllm_wheel import WHEEL, from_wheel, needs_wheel

ROOT = Path(__file__).resolve().parents[2]
VLLM = engine_named("vllm")
DFLASH = ["--speculative-config", json.dumps({"method": "dflash", "model": "qwen3.6-27b-dflash", "num_speculative_tokens": 15})]
SEED = ["serve", "qwen3.6-27b", "--max-model-len", "32768", "--gpu-memory-utilization", "0.75", "--max-num-seqs", "4", "--trust-remote-code"]


class Died(Exception):
    pass


@pytest.fixture(autouse=True)
def no_gpu_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No nvidia-smi on PATH: the GPUs are the --sim-gpu-* defaults (8x RTX PRO 6000, 96 GB), whatever this machine has."""
    monkeypatch.setenv("PATH", str(tmp_path))


def start(args: list[str]) -> tuple[VllmSim | int, str]:
    """The start-up up to the engine core's "init engine" line, in-process; the log and the server."""
    err, out = io.StringIO(), io.StringIO()
    server = prepare(args + ["--sim-speed", "0.00001"], {}, err, out)
    if isinstance(server, VllmSim):
        try:
            asyncio.run(server.start_engine())
        except SystemExit:
            pass
    return server, err.getvalue()


def _printf_to_format(template: str) -> tuple[str, int]:
    """A %-template as from_wheel's "{}" template, and how many values it takes."""
    holes = re.findall(r"%[-\d.,]*[sdfr]", template)
    return re.sub(r"%[-\d.,]*[sdfr]", "{}", template.replace("{", "{{").replace("}", "}}")).replace("%%", "%"), len(holes)


TEXTS = {name: value for name, value in vars(vllmtext).items() if isinstance(value, vllmtext.Text)}


@needs_wheel
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_line_the_sim_prints_is_the_wheels_own_text(name: str) -> None:
    text = TEXTS[name]
    template, holes = _printf_to_format(text.template)
    from_wheel(text.where, template, *(["x"] * holes))


def test_a_start_logs_what_the_planner_computes_and_reads_back_as_a_healthy_vllm_start() -> None:
    server, log = start(SEED)
    assert isinstance(server, VllmSim), log
    lines = log.splitlines()
    assert lines and all(logparse.parse_prefix(line) is not None for line in lines), [line for line in lines if logparse.parse_prefix(line) is None]
    limits = [found for line in lines if (found := VLLM.serving_limits(line)) is not None]
    assert [(x.max_total_num_tokens, x.context_len) for x in limits] == [(server.plan.kv_tokens, 32768)]
    assert server.plan.max_running_requests == 4
    diagnosis = diagnose_text(log.splitlines())
    assert diagnosis.failure_class is None, diagnosis  # a start that reached "init engine ... took": no failure
    # What the agent keeps of a start for the next plan (Engine.start_line): the KV lines.
    assert sum(1 for line in lines if VLLM.start_line(line)) == 2


def test_a_start_whose_kv_cache_cannot_hold_one_request_fails_as_vllm_does() -> None:
    args = [a if a != "32768" else "262144" for a in SEED] + DFLASH
    server, log = start(args)
    assert isinstance(server, VllmSim)
    assert "EngineCore failed to start." in log and "Engine core initialization failed" in log
    diagnosis = diagnose_text(log.splitlines())
    assert diagnosis.failure_class == "kv_pool_too_small", diagnosis
    fits = diagnosis.figures.get("context_that_fits")
    assert fits is not None and 0 < int(fits) < 262144


def test_a_command_line_vllm_refuses_exits_2_with_vllms_usage_error() -> None:
    err = io.StringIO()
    assert prepare(["serve", "qwen3.6-27b", "--max-num-seqz", "4"], {}, err, io.StringIO()) == 2
    assert "error: unrecognized arguments: --max-num-seqz" in err.getvalue() or "--max-num-seqs" in err.getvalue(), err.getvalue()


def test_the_speculative_counters_and_vllms_acceptance_length() -> None:
    text = "\n".join(
        [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            'vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 10.0',
            'vllm:spec_decode_num_drafts_total{model_name="m",engine="1"} 30.0',
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m",engine="0"} 50.0',
            'vllm:spec_decode_num_accepted_tokens_total{model_name="m",engine="1"} 70.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="0"} 9.0',
        ]
    )
    now = spec_counters(text)
    assert now == SpecCounters(drafts=40.0, accepted=120.0)
    assert now.acceptance_length_since(SpecCounters(0.0, 0.0)) == 4.0  # 1 + 120 / 40
    assert now.acceptance_length_since(now) is None  # no draft in the window
    assert spec_counters("vllm:num_requests_running 1.0") is None  # no speculative decoding
    assert spec_counters(text.replace("70.0", "NaN")) is None  # a host's garbage is no figure


def _wait(predicate, timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def served(tmp_path: Path):
    args = [*SEED, *DFLASH, "--host", "127.0.0.1"]
    sim = start_sim(args, tmp_path / "server.log", env={"PATH": str(tmp_path), "FLEET_SIM_ENGINE": "vllm"}, speed=0.01)
    endpoint = Endpoint("127.0.0.1", sim.port)
    try:
        assert _wait(lambda: sim.process.poll() is not None or health_ok(endpoint, 2.0)), sim.log()
        assert sim.process.poll() is None, sim.log()
        yield endpoint, sim.process, sim.log_path
    finally:
        sim.stop(timeout_s=60)


def test_the_http_surface_serves_fleets_client_and_reports_vllms_acceptance(served) -> None:
    endpoint, process, log = served
    models = get_json(endpoint, "/v1/models", 10)
    assert models["data"][0]["owned_by"] == "vllm" and models["data"][0]["max_model_len"] == 32768
    assert get_json(endpoint, "/version", 10) == {"version": "0.33.0"}
    for path in ("/generate", "/server_info", "/flush_cache"):
        with pytest.raises(ValueError, match="HTTP 404"):
            get_body(endpoint, path, 10)
    before = VLLM.spec_counters(get_body(endpoint, "/metrics", 10).decode())
    assert before is not None and before.drafts == 0
    client = Client(endpoint, api=VLLM.client_api, model=models["data"][0]["id"])
    outcome = client.generate("Write a Python function that returns the n-th Fibonacci number.", 64, deadline_s=60, no_token_timeout_s=30)
    assert outcome.ok and outcome.output_tokens == 64, outcome
    after = VLLM.spec_counters(get_body(endpoint, "/metrics", 10).decode())
    assert after is not None and after.drafts > 0
    accept = after.acceptance_length_since(before)
    assert accept is not None and 1.0 < accept <= 16.0
    # The lossless check's greedy set on the route vLLM has.
    outputs = send_greedy_set(endpoint.host, endpoint.port, 60, api=VLLM.client_api, model=models["data"][0]["id"])
    assert len(outputs) == 4 and all(o.text for o in outputs)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    text = log.read_text()
    assert "Application shutdown complete." in text and "Starting vLLM server on http://127.0.0.1:" in text


@needs_wheel
def test_every_metric_the_sim_serves_is_one_vllm_defines(served) -> None:
    endpoint, _, _ = served
    assert WHEEL is not None
    sources = "".join((WHEEL / f).read_text() for f in ("v1/metrics/loggers.py", "v1/spec_decode/metrics.py"))
    types = re.findall(r"^# TYPE (\S+) (\S+)$", get_body(endpoint, "/metrics", 10).decode(), re.MULTILINE)
    assert len(types) >= 10
    for name, kind in types:
        base = name.removesuffix("_total") if kind == "counter" else name
        assert f'"{base}"' in sources, f"{name} ({kind}) is not a metric vLLM 0.33 defines"
    # The per-engine labels of loggers.py:499.
    assert 'labelnames = ["model_name", "engine"]' in (WHEEL / "v1/metrics/loggers.py").read_text()


def test_the_agent_reads_a_vllm_launch_through_the_engine() -> None:
    facts = VLLM.read_launch(["serve", "/models/qwen", "--max-num-seqs", "4", *DFLASH])
    assert facts.model == "/models/qwen" and facts.speculative and facts.max_running_requests == 4
    plain = VLLM.read_launch(["serve", "/models/qwen"])
    assert not plain.speculative and plain.max_running_requests is None
    sglang = engine_named("sglang").read_launch(["--model-path", "/m", "--speculative-algorithm", "DFLASH"])
    assert sglang.model == "/m" and sglang.speculative and sglang.max_running_requests is None
    assert os.environ.get("FLEET_SIM_ENGINE") is None  # nothing here leaks into other tests
