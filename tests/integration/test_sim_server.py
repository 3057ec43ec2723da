"""The sim engine as a real process: its command line, startup log, HTTP API and failures, checked
against the seed stories, SGLang's texts and the log parser fleet uses on real SGLang logs.

Every server runs at FLEET_SIM_SPEED=0.01 (startup in well under a second) on fake GPUs: the test
fleet's own fake `nvidia-smi`/`nvcc` (tests/testfleet/fake_gpu.py) driven by a profile.json. The
seed stories are 0.5.12's (the seed campaign's release), so servers play 0.5.12 unless a test asks
for another release (`FLEET_SIM_SGLANG_VERSION`).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest

from fleet.host.agent.client import Client, Endpoint
from fleet.host.engines.sglang import logparse
from fleet.host.engines.sglang.memory import MemoryInputs, plan_memory
from fleet.host import tokens as tokenizer
from fleet.host.engines.sim.harness import SimProcess, start_sim
from fleet.host.modelcard import load_model_card
from tests.testfleet import fake_gpu
from tests.testfleet.gpu_tools import local_gpu_env

SPEED = 0.01
SEED_DFLASH = [
    "--model-path",
    "qwen3.6-27b",
    "--context-length",
    "32768",
    "--mem-fraction-static",
    "0.75",
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    "qwen3.6-27b-dflash",
    "--speculative-num-draft-tokens",
    "16",
    "--mamba-scheduler-strategy",
    "extra_buffer",
    "--mamba-full-memory-ratio",
    "0.5",
    "--trust-remote-code",
]
SEED_AR = ["--model-path", "qwen3.6-27b", "--context-length", "32768", "--mem-fraction-static", "0.75", "--max-running-requests", "4", "--trust-remote-code"]


def ddtree_args(budget: int) -> list[str]:
    args = list(SEED_DFLASH)
    args[args.index("DFLASH")] = "DDTREE"
    return args + ["--speculative-ddtree-budget", str(budget), "--max-running-requests", "4"]


@pytest.fixture(scope="module")
def gpu_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH with fake nvidia-smi/nvcc first, FLEET_FAKE_GPU_DIR with an RTX PRO 6000 x8 profile."""
    env = local_gpu_env(tmp_path_factory.mktemp("fakegpu"), os.environ)
    env["FLEET_SIM_SPEED"] = str(SPEED)
    env["FLEET_SIM_SGLANG_VERSION"] = "0.5.12"
    return env


@pytest.fixture
def launch(tmp_path: Path, gpu_env: dict[str, str]) -> Iterator:
    started: list[SimProcess] = []

    def run(args: list[str], name: str = "server", **env: str) -> SimProcess:
        # Servers started together get GPUs of their own, as the sweep's scheduler places them:
        # on a shared GPU the second would see the first's memory as taken (it does, on purpose).
        tp = int(args[args.index("--tp-size") + 1]) if "--tp-size" in args else 1
        first = sum(int(p.process.args[p.process.args.index("--tp-size") + 1]) if "--tp-size" in p.process.args else 1 for p in started)
        devices = ",".join(str((first + i) % 8) for i in range(tp))
        process = start_sim(args, tmp_path / f"{name}.log", env={**gpu_env, "CUDA_VISIBLE_DEVICES": devices, **env})
        started.append(process)
        return process

    yield run
    for process in started:
        process.stop()


def request(server: SimProcess, method: str, path: str, body: Any = None, timeout: float = 20.0) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request(method, path, body=None if body is None else json.dumps(body), headers={"content-type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        content_type = response.getheader("content-type") or ""
        return response.status, json.loads(data) if data and "json" in content_type else data.decode()
    finally:
        connection.close()


def stream(server: SimProcess, path: str, body: Any, timeout: float = 20.0) -> list[Any]:
    """The SSE events of a streamed response, decoded (`"[DONE]"` kept as a string)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("content-type").startswith("text/event-stream")
        events = []
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: "):
                payload = line[len("data: ") :]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events
    finally:
        connection.close()


def generate(server: SimProcess, text: str, max_new_tokens: int) -> tuple[int, Any]:
    return request(server, "POST", "/generate", {"text": text, "sampling_params": {"max_new_tokens": max_new_tokens}})


def parsed(server: SimProcess) -> logparse.LogSummary:
    lines = server.log().splitlines()
    for number, line in enumerate(lines, 1):
        logparse.parse_line(line, number)  # every line must parse (to an event or to Other)
    return logparse.parse_log(lines)


def seed_plan(max_running_requests: int, algorithm: str | None = "DFLASH", budget: int | None = None):
    target, draft = load_model_card("qwen3.6-27b"), load_model_card("qwen3.6-27b-dflash")
    inputs = MemoryInputs(
        gpu_memory_mib=fake_gpu.DEFAULT_PROFILE["memory_total_mib"],
        mem_fraction_static=0.75,
        context_length=32768,
        max_running_requests=max_running_requests,
        speculative_algorithm=algorithm,
        num_draft_tokens=16 if algorithm else None,
        ddtree_budget=budget,
        mamba_scheduler_strategy="extra_buffer" if algorithm else "auto",
        mamba_full_memory_ratio=0.5 if algorithm else 0.9,
        release="0.5.12",
        disable_overlap_schedule=algorithm is not None,
    )
    return plan_memory(target, inputs, draft if algorithm else None)


def assert_startup_matches_plan(summary: logparse.LogSummary, plan) -> None:
    assert summary.weights_loaded.mem_usage_gb == round(plan.weights_gb_per_gpu, 2)
    assert summary.weights_loaded.avail_mem_gb == round(plan.post_load_avail_gb, 2)
    assert summary.mamba_cache.max_mamba_cache_size == plan.max_mamba_cache_size
    assert summary.mamba_cache.conv_state_gb == round(plan.conv_state_gb, 2)
    assert summary.mamba_cache.ssm_state_gb == round(plan.ssm_state_gb, 2)
    assert summary.kv_cache.tokens == plan.kv_tokens
    assert summary.kv_cache.k_gb == round(plan.k_size_gb, 2)


# --- the seed stories ------------------------------------------------------------------------------


def test_seed_000_max_running_requests_8_asserts_while_4_starts(launch) -> None:
    eight = launch(SEED_DFLASH + ["--max-running-requests", "8"], "mrr8")
    four = launch(SEED_DFLASH + ["--max-running-requests", "4"], "mrr4")

    assert eight.wait_exit() == -signal.SIGKILL  # kill_process_tree(os.getpid())
    log = eight.log()
    assert "AssertionError: max_running_request is zero" in log
    assert log.index("KV Cache is allocated") < log.index("Scheduler hit an exception:") < log.index("Received sigquit from a child process. It usually means the child failed.")
    failed = parsed(eight)
    assert failed.mamba_cache.max_mamba_cache_size == 2
    assert failed.kv_cache.tokens == 11893
    assert_startup_matches_plan(failed, seed_plan(8))
    assert not failed.is_ready

    assert four.wait_ready()
    started = parsed(four)
    assert started.mamba_cache.max_mamba_cache_size == 24
    assert started.weights_loaded.mem_usage_gb == 51.05 and started.weights_loaded.avail_mem_gb == 43.19
    assert started.scheduler.max_running_requests == 4
    assert_startup_matches_plan(started, seed_plan(4))
    assert request(four, "GET", "/health")[0] == 200


def test_seed_002_ddtree_b8_and_b12_crash_b15_serves(launch) -> None:
    servers = {budget: launch(ddtree_args(budget), f"b{budget}") for budget in (8, 12, 15)}
    for server in servers.values():
        assert server.wait_ready()
    warmup = "Write a Python function fib(n) that returns the n-th Fibonacci number."

    b8 = servers[8]
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        generate(b8, warmup, 256)
    assert b8.wait_exit() == -signal.SIGKILL
    events = [logparse.parse_line(line) for line in b8.log().splitlines()]
    ddtree = [e for e in events if isinstance(e, logparse.DDTreeMetrics)]
    assert ddtree and ddtree[0].budget == 8 and ddtree[0].avg_accepted_drafts == 0.0 and ddtree[0].avg_commit_len == 1.0
    assert "CUDA error: an illegal instruction was encountered" in b8.log()
    assert b8.log().index("DDTREE metrics") < b8.log().index("Scheduler hit an exception")

    b12 = servers[12]
    status, body = generate(b12, warmup, 16)
    assert status == 200 and body["meta_info"]["completion_tokens"] == 16
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        generate(b12, warmup, 256)
    assert b12.wait_exit() == -signal.SIGKILL
    assert "CUDA error: an illegal instruction was encountered" in b12.log()

    b15 = servers[15]
    for new_tokens in (16, 256):
        status, body = generate(b15, warmup, new_tokens)
        assert status == 200 and body["meta_info"]["completion_tokens"] == new_tokens
        assert body["meta_info"]["spec_accept_length"] > 2.0
    assert b15.process.poll() is None


def test_seed_004_prompt_of_32_7k_tokens_plus_256_gets_http_400(launch) -> None:
    server = launch(SEED_AR, "ctx")
    assert server.wait_ready()
    paragraph = "The quick brown fox jumps over the lazy dog, again and again, 1234. "
    per_repeat = tokenizer.count_tokens(paragraph * 2) - tokenizer.count_tokens(paragraph)
    prompt = paragraph * (32700 // per_repeat)
    prompt_tokens = tokenizer.count_tokens(prompt)
    assert 32768 - 256 < prompt_tokens < 32768  # fits alone, not with 256 new tokens

    expected = (
        "Requested token count exceeds the model's maximum context length of 32768 tokens. "
        f"You requested a total of {prompt_tokens + 256} tokens: {prompt_tokens} tokens from the input messages and "
        "256 tokens for the completion. Please reduce the number of tokens in the input messages or the completion "
        "to fit within the limit."
    )
    status, body = request(server, "POST", "/v1/completions", {"model": "qwen3.6-27b", "prompt": prompt, "max_tokens": 256})
    assert (status, body) == (400, {"object": "error", "message": expected, "type": "BadRequestError", "param": None, "code": 400})
    status, body = request(server, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 256, "stream": True})
    assert status == 400 and body["message"] == expected
    status, body = generate(server, prompt, 256)
    assert (status, body) == (400, {"error": {"message": expected}})
    assert f"[http_server] Error: {expected}" in server.log()
    # Shrunk by the real token count, it fits.
    fitting = prompt[: len(prompt) * 24000 // prompt_tokens]
    status, body = generate(server, fitting, 256)
    assert status == 200 and body["meta_info"]["prompt_tokens"] == tokenizer.count_tokens(fitting)


# --- the API -------------------------------------------------------------------------------------


def test_api_shapes_streaming_usage_and_metrics(launch) -> None:
    server = launch(SEED_DFLASH + ["--max-running-requests", "4", "--enable-metrics", "--served-model-name", "qwen36"], "api")
    assert server.wait_ready()

    status, models = request(server, "GET", "/v1/models")
    assert status == 200 and models["data"][0]["id"] == "qwen36" and models["data"][0]["max_model_len"] == 32768
    assert request(server, "GET", "/v1/models/other")[0] == 404
    status, info = request(server, "GET", "/model_info")
    assert info["architectures"] == ["Qwen3_5ForConditionalGeneration"] and info["has_image_understanding"] is True

    events = stream(server, "/generate", {"text": "Compute 17 * 23 + 4", "sampling_params": {"max_new_tokens": 40}, "stream": True})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert [c["meta_info"]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 40} and final["completion_tokens"] == 40
    assert len(chunks[-1]["output_ids"]) == 40 and tokenizer.count_tokens(chunks[-1]["text"]) == 40
    assert final["spec_verify_ct"] < 40 and final["spec_accept_length"] == pytest.approx(40 / final["spec_verify_ct"])
    assert len(chunks) < 40  # several tokens per verify step

    events = stream(
        server,
        "/v1/chat/completions",
        {"model": "qwen36", "messages": [{"role": "user", "content": "Write quicksort in Python."}], "max_tokens": 30, "stream": True, "stream_options": {"include_usage": True}},
    )
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(e["choices"][0]["delta"]["content"] or "" for e in events[:-2] if e["choices"])
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    usage = events[-2]["usage"]
    assert events[-2]["choices"] == [] and usage["completion_tokens"] == 30 == tokenizer.count_tokens(text)
    assert usage["prompt_tokens"] == tokenizer.count_chat_tokens([{"role": "user", "content": "Write quicksort in Python."}])

    status, body = request(server, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 12})
    assert status == 200 and body["object"] == "text_completion" and body["usage"]["completion_tokens"] == 12

    status, info = request(server, "GET", "/server_info")
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] > 1.5 and state["effective_max_running_requests_per_dp"] == 4
    assert info["max_total_num_tokens"] == state["memory_usage"]["token_capacity"] == 87061

    status, text = request(server, "GET", "/metrics")
    assert status == 200
    assert 'sglang:num_requests_total{engine_type="unified",model_name="qwen36"}' in text
    assert "sglang:spec_accept_length{" in text and "sglang:max_total_num_tokens{" in text


def test_the_agents_client_reads_a_runs_verify_steps_on_both_apis(launch) -> None:
    """The speculative statistics SGLang reports per request: meta_info on /generate, and on
    /v1/completions the response-level `sglext.spec_tokens_details` chunk that fleet asks for
    (`return_spec_tokens_details`), sent after the finish chunk and before usage."""
    server = launch(SEED_DFLASH + ["--max-running-requests", "4"], "spec-details")
    assert server.wait_ready()
    events = stream(
        server,
        "/v1/completions",
        {"prompt": "Write quicksort in Python.", "max_tokens": 48, "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}, "return_spec_tokens_details": True},
    )
    (details,) = [e for e in events[:-1] if e.get("sglext")]
    assert details["choices"] == [] and events.index(details) == len(events) - 3  # then usage, then [DONE]
    assert 0 < details["sglext"]["spec_tokens_details"]["spec_verify_ct"] < 48
    for api in ("generate", "completions"):
        outcome = Client(Endpoint("127.0.0.1", server.port), api=api).generate("Write quicksort in Python.", 48, deadline_s=30, no_token_timeout_s=10)
        assert outcome.ok and outcome.output_tokens == 48, (api, outcome.error_message)
        assert outcome.spec_verify_ct is not None and 0 < outcome.spec_verify_ct < 48, api


def test_requests_queue_beyond_max_running_requests(launch) -> None:
    server = launch(SEED_AR + ["--decode-log-interval", "5"], "queue")
    assert server.wait_ready()
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: generate(server, f"Tell me a story number {i}", 60), range(8)))
    assert all(status == 200 and body["meta_info"]["completion_tokens"] == 60 for status, body in results)
    summary = parsed(server)
    decode = [e for e in map(logparse.parse_line, server.log().splitlines()) if isinstance(e, logparse.DecodeBatch)]
    assert max(e.running_req for e in decode) == 4  # the effective max_running_requests
    assert any(e.queue_req > 0 for e in decode)
    assert summary.prefill_lines >= 2


# --- failures ------------------------------------------------------------------------------------


def test_config_errors_fail_before_the_server_starts(launch, tmp_path: Path) -> None:
    radix = launch(["--model-path", "qwen3.6-27b", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "qwen3.6-27b-dflash"], "radix")
    assert radix.wait_exit() == 1
    assert ("ValueError: Speculative decoding for Qwen3_5ForConditionalGeneration is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer.To use radix cache") in radix.log()

    longer = launch(["--model-path", "qwen3.6-27b", "--context-length", "300000"], "longer")
    assert longer.wait_exit() == 1
    assert "set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in longer.log()
    allowed = launch(["--model-path", "qwen3.6-27b", "--context-length", "300000"], "allowed", SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1")
    assert allowed.wait_ready()

    missing = launch(["--model-path", "/dev/shm/Qwen3.6-27B"], "missing")
    assert missing.wait_exit() == 1
    assert ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/dev/shm/Qwen3.6-27B'. Use `repo_type` argument if needed.") in missing.log()
    assert (
        missing.log()
        .rstrip()
        .endswith(
            "OSError: Can't load the configuration of '/dev/shm/Qwen3.6-27B'. If you "
            "were trying to load it from 'https://huggingface.co/models', make sure you "
            "don't have a local directory with the same name. Otherwise, make sure "
            "'/dev/shm/Qwen3.6-27B' is the correct path to a directory containing a "
            "config.json file"
        )
    )

    unknown = launch(["--model-path", "qwen3.6-27b", "--no-such-flag"], "unknown")
    assert unknown.wait_exit() == 2
    # prepare_server_args' parser is ArgumentParser(prog="sglang serve") (0.5.12 server_args.py:7734).
    assert "sglang serve: error: unrecognized arguments: --no-such-flag" in unknown.log()


def test_port_in_use_fails_with_uvicorn_message(launch, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = start_sim(SEED_AR, tmp_path / "port.log", env={**os.environ, "FLEET_SIM_SPEED": str(SPEED)}, port=port)
        assert server.wait_exit() == 1
    assert (f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address already in use") in server.log()
    assert READY_LINE not in server.log()


READY_LINE = "The server is fired up and ready to roll!"


def test_fault_profile_crash_after_requests_and_tp2_noise(launch, tmp_path: Path) -> None:
    faults = tmp_path / "sim-faults.json"
    faults.write_text(json.dumps({"crash_after_requests": 2}))
    server = launch(SEED_AR + ["--tp-size", "2"], "crash", FLEET_SIM_FAULTS=str(faults))
    assert server.wait_ready()
    for _ in range(2):
        assert generate(server, "Hello there", 8)[0] == 200
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        generate(server, "Hello there", 8)
    assert server.wait_exit() == -signal.SIGKILL
    log = server.log()
    assert "[rank1]:" in log and "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access" in log
    assert "It usually means one child failed." in log
    ranks = {e.rank for e in map(logparse.parse_line, log.splitlines()) if isinstance(e, logparse.WeightsLoaded)}
    assert ranks == {"TP0", "TP1"}


def test_fault_profile_hang_keeps_socket_open(launch, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "sim-faults.json").write_text(json.dumps({"hang_after_requests": 1}))
    server = launch(SEED_AR, "hang", FLEET_SIM_WORK_DIR=str(work))
    assert server.wait_ready()
    assert generate(server, "Hello", 4)[0] == 200
    with pytest.raises(TimeoutError):
        request(server, "POST", "/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 4}}, timeout=1.0)
    assert server.process.poll() is None
    assert request(server, "GET", "/health")[0] == 503  # after HEALTH_CHECK_TIMEOUT (scaled)
    assert "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds." in server.log()


def test_fake_nvidia_smi_gpus_process_registration_and_flashinfer_warning(launch, gpu_env: dict[str, str], tmp_path: Path) -> None:
    state = Path(gpu_env["FLEET_FAKE_GPU_DIR"])
    old = tmp_path / "gpu"
    shutil.copytree(state, old)
    profile = json.loads((old / "profile.json").read_text())
    (old / "profile.json").write_text(json.dumps({**profile, "toolkit": "12.8", "memory_total_mib": 143771}))
    server = launch(SEED_AR, "smi", FLEET_FAKE_GPU_DIR=str(old), CUDA_VISIBLE_DEVICES="3")
    assert server.wait_ready()
    record = json.loads((old / "procs" / f"{server.process.pid}.json").read_text())
    assert record["gpus"] == [3] and record["process_name"] == "python3" and record["used_mib"] > 100_000
    log = server.log()
    assert log.count("Failed to get device capability: SM 12.x requires CUDA >= 12.9.") == 2
    assert parsed(server).weights_loaded.avail_mem_gb > 80  # the 140 GiB profile, not the default
    assert server.stop() == 0
    assert not (old / "procs" / f"{server.process.pid}.json").exists()
    assert "Finished server process" in server.log()


# --- the simulator playing 0.5.23 -----------------------------------------------------------------


def test_sim_0523_log_restart_and_crash_read_by_parser_and_diagnose(launch, tmp_path: Path) -> None:
    """Two real sim processes playing 0.5.23, their logs in one file as a restarted service's would
    be: the parser counts both starts, `fleet diagnose` finds the crash of the second. On the way:
    the reported release, /flush_cache and prefix caching of text and input_ids prompts."""
    from fleet.host.diagnose.classify import diagnose_file
    from fleet.host.engines.sglang.logformats import SGLANG_0_5_23

    args = ["--model-path", "qwen3.6-27b", "--context-length", "32768", "--max-running-requests", "4"]
    first = launch(args, "first", FLEET_SIM_SGLANG_VERSION="0.5.23")
    assert first.wait_ready()
    status, info = request(first, "GET", "/get_server_info")
    assert status == 200 and info["version"] == "0.5.23"
    long_text = "A long shared instruction for every request of the agentic workload. " * 40
    for body in ({"text": long_text}, {"input_ids": list(range(1000, 1300))}):
        body["sampling_params"] = {"max_new_tokens": 4}
        cached = []
        for step in ("send", "send", "flush", "send"):
            if step == "flush":
                status, text = request(first, "POST", "/flush_cache")
                assert status == 200 and text.startswith("Cache flushed.")
                continue
            status, answer = request(first, "POST", "/generate", body)
            assert status == 200
            cached.append(answer["meta_info"]["cached_tokens"])
        assert cached[0] == 0 and cached[1] > 250 and cached[2] == 0, (body.keys(), cached)
    assert first.stop() == 0

    faults = tmp_path / "sim-faults.json"
    faults.write_text(json.dumps({"crash_after_requests": 1}))
    second = launch(args, "second", FLEET_SIM_SGLANG_VERSION="0.5.23", FLEET_SIM_FAULTS=str(faults))
    assert second.wait_ready()
    assert generate(second, "Hello there", 8)[0] == 200
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        generate(second, "Hello there", 8)
    assert second.wait_exit() == -signal.SIGKILL

    first_lines, second_lines = first.log().splitlines(), second.log().splitlines()
    journal = tmp_path / "server.log"
    journal.write_text("\n".join(first_lines + second_lines) + "\n")
    text = journal.read_text()
    # 0.5.23's own lines, and none of 0.5.12's.
    assert "] server_args={'model_path': 'qwen3.6-27b'" in text and "] Init parallel begin." in text
    assert "] Memory baseline taken. mem usage=" in text and "Capture target decode CUDA graph begin. backend=full" in text
    assert "server_args=ServerArgs(" not in text and "Init torch distributed" not in text
    assert f"launch_server.py:{SGLANG_0_5_23.launch_warning_line}: UserWarning" in text

    summary = logparse.parse_log(text.splitlines())
    assert summary.starts == 2 and summary.server_args is not None
    assert summary.server_args.line_no > len(first_lines)
    assert summary.kv_cache is not None and summary.kv_cache.dtype == "torch.bfloat16"
    assert summary.scheduler is not None and summary.scheduler.max_running_requests == 4 and summary.is_ready

    diagnosis = diagnose_file(journal)
    assert diagnosis.summary is not None and diagnosis.summary.starts == 2
    assert diagnosis.failure_class == "cuda_illegal_memory_access"
    assert diagnosis.evidence and all(item.line > len(first_lines) for item in diagnosis.evidence)
    assert not any(f.name == "earlier_start_failed" for f in diagnosis.findings)  # the first start ended cleanly
