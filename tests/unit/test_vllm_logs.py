"""vLLM-format logs through `fleet diagnose`, generated from the installed vLLM wheel's own texts.

Every line here is GENERATED, not copied from a real log: the prefix is rendered by `logging.Formatter`
with the format and date format read out of the wheel's vllm/logger.py (`_FORMAT`, `_DATE_FORMAT`,
lines 28-33), a multi-line message is prefixed on each line as the wheel's NewLineFormatter does
(vllm/logging_utils/formatter.py:82-85), and each message is a template whose literal parts must be
found in the string literal at the cited file and line of the wheel (the check fails when a vLLM
release rewords a message, so the catalogue is kept honest against the engine). Real vLLM logs are
under tests/fixtures/logs/ (batch3-*, real/, heldout/) with their sources.

Skipped where vLLM is not installed (`pip install --no-deps vllm==0.33.0`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from fleet.host.diagnose import diagnose_text
from tests.unit.vllm_wheel import from_wheel, needs_wheel, wheel_format
from fleet.host.engines.vllm import logparse as vllm_log

pytestmark = needs_wheel


@dataclass(frozen=True)
class Line:
    process: str  # "EngineCore_DP0", "APIServer", "Worker_TP0"
    level: int
    source: str  # "core.py:1584": the file and line the wheel logs it from
    message: str


def render(lines: list[Line | str]) -> list[str]:
    """Each `Line` as vLLM's logger prints it; a str is output that bypasses the logger (tqdm, a
    traceback printed by multiprocessing), passed as it is."""
    fmt, datefmt = wheel_format()
    formatter = logging.Formatter(fmt, datefmt)
    out: list[str] = []
    for number, item in enumerate(lines):
        if isinstance(item, str):
            out.append(item)
            continue
        file, line_no = item.source.rsplit(":", 1)
        record = logging.LogRecord("vllm", item.level, file, int(line_no), item.message, None, None)
        record.created = 1_747_044_672 + number  # 05-12, as a real start's seconds tick
        record.vllm_process_name = item.process
        record.fileinfo = file
        text = formatter.format(record)
        # formatter.py:82-85: every further line of a message carries the same prefix.
        prefix = text.split(record.getMessage())[0]
        out.extend(text.replace("\n", "\r\n" + prefix).split("\r\n"))
    return out


ENGINE, API, INFO, WARN, ERROR = "EngineCore_DP0", "APIServer", logging.INFO, logging.WARNING, logging.ERROR


def _start(model: str = "Qwen/Qwen3-8B") -> list[Line | str]:
    return [
        Line(ENGINE, INFO, "gpu_model_runner.py:4979", from_wheel("v1/worker/gpu_model_runner.py:4979", "Starting to load model {}...", model)),
        "Loading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]",
        "Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:04<00:00,  1.10it/s]",
        Line(ENGINE, INFO, "gpu_model_runner.py:5089", from_wheel("v1/worker/gpu_model_runner.py:5089", "Model loading took {} GiB memory and {} seconds", "15.27", "4.512331")),
    ]


def _traceback(*frames_then_exception: str) -> list[Line | str]:
    """run_engine_core's logger.exception("EngineCore failed to start.") (v1/engine/core.py:1584) with its
    traceback: one message of many lines, each printed with the prefix."""
    body = "\n".join(["Traceback (most recent call last):", *frames_then_exception])
    return [Line(ENGINE, ERROR, "core.py:1584", from_wheel("v1/engine/core.py:1584", "EngineCore failed to start.") + "\n" + body)]


def _api_gives_up() -> list[Line | str]:
    return ["(APIServer pid=41) RuntimeError: " + from_wheel("v1/engine/utils.py:1474", "Engine core initialization failed. See root cause above. Failed core proc(s): {}", "{'EngineCore_DP0': 1}")]


def _kv_lines(gib: str, tokens: str, max_len: str, concurrency: str) -> list[Line | str]:
    return [
        Line(ENGINE, INFO, "gpu_worker.py:773", from_wheel("v1/worker/gpu_worker.py:773", "Available KV cache memory: {} GiB", gib)),
        Line(
            ENGINE,
            INFO,
            "kv_cache_utils.py:1149",
            from_wheel("v1/core/kv_cache_utils.py:1149", "{} KV cache size: {} tokens, Maximum concurrency for {} tokens per request: {}x", "GPU", tokens, max_len, concurrency),
        ),
    ]


def _ready() -> list[Line | str]:
    return [
        Line(ENGINE, INFO, "core.py:413", from_wheel("v1/engine/core.py:413", "init engine (profile, create kv cache, warmup model) took {} s", "41.20")),
        Line(API, INFO, "entry.py:139", from_wheel("entrypoints/launchers/api_server/entry.py:139", "Starting vLLM server on {}", "http://0.0.0.0:8000")),
        Line(API, INFO, "launcher.py:188", from_wheel("entrypoints/launchers/launcher.py:188", "Available routes are:")),
        Line(API, INFO, "launcher.py:197", from_wheel("entrypoints/launchers/launcher.py:197", "Route: {}, Methods: {}", "/v1/chat/completions", "POST")),
    ]


def _kv_too_small() -> list[Line | str]:
    estimated = from_wheel("v1/core/kv_cache_planning.py:73", "Based on the available memory, the estimated maximum model length is {}. ", 5808)
    message = from_wheel(
        "v1/core/kv_cache_planning.py:78",
        "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache is needed, which is larger than the available KV cache memory ({} GiB). {}"
        "Try increasing `gpu_memory_utilization`",
        131072,
        "16.00",
        "0.71",
        estimated,
    )
    return [*_start(), *_traceback('  File "/opt/vllm/v1/core/kv_cache_planning.py", line 77, in _check_enough_kv_cache_memory', "    raise ValueError(", f"ValueError: {message}"), *_api_gives_up()]


def _no_cache_blocks() -> list[Line | str]:
    message = from_wheel("v1/core/kv_cache_planning.py:58", "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine")
    return [*_start(), *_traceback('  File "/opt/vllm/v1/core/kv_cache_planning.py", line 57, in _check_enough_kv_cache_memory', f"ValueError: {message}."), *_api_gives_up()]


def _free_memory_below_share() -> list[Line | str]:
    message = from_wheel(
        "v1/worker/utils.py:763",
        "Free memory on device {} ({}/{} GiB) on startup is less than desired GPU memory utilization ({}, {} GiB). Decrease GPU memory utilization",
        "cuda:0",
        "3.22",
        "79.19",
        0.9,
        "71.27",
    )
    return [*_traceback('  File "/opt/vllm/v1/worker/utils.py", line 763, in request_memory', f"ValueError: {message} or reduce GPU memory used by other processes."), *_api_gives_up()]


def _engine_ready_timeout() -> list[Line | str]:
    message = from_wheel(
        "v1/engine/core_client.py:765",
        "Timed out waiting for engine core processes to start. This is often caused by slow weight loading for large models. Waited {}s (configured by VLLM_ENGINE_READY_TIMEOUT_S).",
        600,
    )
    return [
        Line(ENGINE, INFO, "gpu_model_runner.py:4979", from_wheel("v1/worker/gpu_model_runner.py:4979", "Starting to load model {}...", "deepseek-ai/DeepSeek-R1")),
        "Loading safetensors checkpoint shards:  41% Completed | 67/163 [09:58<14:17,  8.93s/it]",
        "(APIServer pid=41) Traceback (most recent call last):",
        '(APIServer pid=41)   File "/opt/vllm/v1/engine/core_client.py", line 764, in __init__',
        f"(APIServer pid=41) TimeoutError: {message}",
    ]


def _prompt_too_long() -> list[Line | str]:
    message = from_wheel("v1/engine/input_processor.py:589", "The {} prompt (length {}) is longer than the maximum model length of {}. ", "decoder", 33024, 32768)
    return [
        *_start(),
        *_kv_lines("20.11", "188,640", "32,768", "5.76"),
        *_ready(),
        Line(API, ERROR, "serving.py:212", f"Error in preprocessing prompt inputs\nvllm.exceptions.VLLMValidationError: {message}"),
    ]


def _oom_in_profile_after_an_optional_import_warning() -> list[Line | str]:
    return [
        Line(ENGINE, WARN, "_custom_ops.py:21", "Failed to import from vllm._C with ImportError('/opt/vllm/_C.abi3.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev')"),
        *_start(),
        *_traceback(
            '  File "/opt/vllm/v1/worker/gpu_model_runner.py", line 4400, in profile_run',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
        ),
        *_api_gives_up(),
    ]


def _stalled_in_weights() -> list[Line | str]:
    return [
        Line(ENGINE, INFO, "gpu_model_runner.py:4979", from_wheel("v1/worker/gpu_model_runner.py:4979", "Starting to load model {}...", "meta-llama/Llama-3.1-405B")),
        "Loading safetensors checkpoint shards:  11% Completed | 21/191 [03:07<25:18,  8.93s/it]",
        "Loading safetensors checkpoint shards:  12% Completed | 22/191 [03:16<25:09,  8.93s/it]",
    ]


def _fatal_while_serving(exception: str) -> list[Line | str]:
    """core.py:1586's logger.exception for a failure after the start, with the exception it carries."""
    body = "\n".join(["Traceback (most recent call last):", '  File "/opt/vllm/v1/engine/core.py", line 1412, in run_busy_loop', exception])
    return [
        *_start(),
        *_kv_lines("17.36", "188,640", "131,072", "5.23"),
        *_ready(),
        Line(ENGINE, ERROR, "core.py:1586", from_wheel("v1/engine/core.py:1586", "EngineCore encountered a fatal error.") + "\n" + body),
    ]


CASES = {
    "an illegal memory access while serving": (lambda: _fatal_while_serving("torch.AcceleratorError: CUDA error: an illegal memory access was encountered"), "cuda_illegal_memory_access"),
    "an unexplained fatal error while serving": (lambda: _fatal_while_serving("AssertionError: num_tokens=0"), "unknown"),
    "kv cache too small for max_model_len": (_kv_too_small, "kv_pool_too_small"),
    "no memory left for cache blocks": (_no_cache_blocks, "kv_pool_too_small"),
    "free memory below the utilization share": (_free_memory_below_share, "cuda_oom"),
    "the front end's engine-ready timeout": (_engine_ready_timeout, "server_start_timeout"),
    "a prompt above max_model_len": (_prompt_too_long, "context_length_exceeded"),
    "an OOM after an optional extension's import warning": (_oom_in_profile_after_an_optional_import_warning, "cuda_oom"),
    "a bare log stalled in the weights": (_stalled_in_weights, "server_start_timeout"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_vllm_failures_are_classified(case: str) -> None:
    build, expected = CASES[case]
    lines = render(build())
    assert any(vllm_log.parse_prefix(line) for line in lines), lines  # really vLLM's format
    diagnosis = diagnose_text(lines, f"<{case}>")
    assert diagnosis.failure_class == expected, (case, diagnosis.evidence, lines)


def test_figures_and_evidence_come_from_the_lines_vllm_printed() -> None:
    diagnosis = diagnose_text(render(_kv_too_small()))
    assert diagnosis.figures["max_model_len"] == "131072"
    assert "131072" in (diagnosis.fix or "") and "--max-model-len" in (diagnosis.fix or "")
    assert "To serve at least one request" in diagnosis.evidence[0].text
    # the API server's "initialization failed" is the cascade, not the cause
    assert all("initialization failed" not in item.text for item in diagnosis.evidence)
    stalled = diagnose_text(render(_stalled_in_weights()))
    assert "loading weights" in (stalled.fix or "") and stalled.evidence[0].text == "stalled at: loading weights"


def test_a_healthy_vllm_start_is_no_failure_and_its_kv_cache_is_read() -> None:
    lines = render([*_start(), *_kv_lines("17.36", "188,640", "131,072", "5.23"), *_ready()])
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class is None, diagnosis.evidence
    assert diagnosis.figures["kv_tokens"] == 188640 and diagnosis.figures["max_model_len"] == 131072


@pytest.mark.parametrize("cut_after", ["init engine", "Starting vLLM server", "Available routes"])
def test_a_healthy_vllm_start_cut_after_a_ready_line_is_no_failure(cut_after: str) -> None:
    lines = render([*_start(), *_kv_lines("17.36", "188,640", "131,072", "5.23"), *_ready()])
    cut = next(index for index, line in enumerate(lines) if cut_after in line)
    assert diagnose_text(lines[: cut + 1]).failure_class is None


def test_the_prefix_parser_reads_the_wheels_format() -> None:
    line = render([Line(ENGINE, WARN, "kv_cache_utils.py:1149", "a message")])[0]
    parsed = vllm_log.parse_prefix(line)
    assert parsed is not None
    assert (parsed.process, parsed.level, parsed.source, parsed.message) == (ENGINE, "WARNING", "kv_cache_utils.py:1149", "a message")
    assert vllm_log.strip_prefix(line) == ("a message", True)
    # older releases: "INFO 06-28 23:40:03 api_server.py:206] ..." and a bare process tag on a traceback line
    assert vllm_log.strip_prefix("INFO 06-28 23:40:03 api_server.py:206] vLLM API server version 0.5.0") == ("vLLM API server version 0.5.0", False)
    assert vllm_log.strip_prefix("(RayWorkerWrapper pid=62111, ip=10.0.0.2) RuntimeError: x") == ("RuntimeError: x", False)
    assert vllm_log.parse_prefix("[2025-06-26 07:25:31 TP0] Load weight begin.") is None  # SGLang's, not vLLM's


def test_the_message_check_can_fail() -> None:
    # A reworded message is caught: the test above would then stop vouching for the catalogue.
    with pytest.raises(AssertionError):
        from_wheel("v1/core/kv_cache_planning.py:58", "No free blocks for the KV cache at all")
    with pytest.raises(AssertionError):
        from_wheel("v1/core/kv_cache_planning.py:300", "No available memory for the cache blocks. ")  # right text, wrong line
