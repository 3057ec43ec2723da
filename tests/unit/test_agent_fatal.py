"""Fail-fast on server logs: real SGLang logs (tests/fixtures/agent/), healthy ones must never
trip the fatal-line list, failing ones must, and the evidence must hold the lines that matter."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.host.agent.fatal import fatal_marker
from fleet.host.agent.logwatch import LogScan, LogWatcher
from fleet.host.diagnose.catalogue import SIGNATURES, Kind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent"


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


@pytest.mark.parametrize("name", ["021-healthy.log", "024-healthy.log"])
def test_healthy_logs_have_no_fatal_line(name: str) -> None:
    assert [line for line in lines(name) if fatal_marker(line)] == []
    scan = LogScan()
    for line in lines(name):
        scan.feed(line)
    assert scan.fatal_line is None and scan.suspect_line is None


def test_the_context_length_warning_is_not_a_cuda_error() -> None:
    warning = next(line for line in lines("021-healthy.log") if "CUDA errors" in line)
    assert fatal_marker(warning) is None
    cuda = fatal_marker("RuntimeError: CUDA error: an illegal instruction was encountered")
    assert cuda is not None and cuda.name == "cuda_illegal_instruction" and cuda.decisive
    other = fatal_marker("RuntimeError: CUDA error: unspecified launch failure")
    assert other is not None and other.name == "cuda_error" and other.decisive


@pytest.mark.parametrize(
    ("name", "decisive", "suspect"),
    [
        ("027-cuda_illegal_memory_access.log", "Exception: Capture cuda graph failed: RuntimeError: CUDA error", None),
        # An excerpt that starts mid-traceback: the exception's last line comes first, then the scheduler's crash.
        ("007-context_length_exceeded.log", "Scheduler hit an exception", "TypeError: '>' not supported"),
        ("009-nccl_error.log", "RuntimeError: NCCL error: unhandled system error", None),  # frames only, no traceback head
        # Old SGLang: no SGLang death line, but the exception proves the class (no kernel image).
        ("004-unsupported_gpu_arch.log", "RuntimeError: RMSNorm failed with error code no kernel image", None),
    ],
)
def test_failing_logs_are_caught(name: str, decisive: str | None, suspect: str | None) -> None:
    scan = LogScan()
    for line in lines(name):
        scan.feed(line)
    if decisive is None:
        assert scan.fatal_line is None
    else:
        assert scan.fatal_line is not None and decisive in scan.fatal_line
    if suspect is None:
        assert scan.suspect_line is None
    else:
        assert scan.suspect_line is not None and suspect in scan.suspect_line
    assert scan.evidence()[-1] == lines(name)[-1]


@pytest.mark.parametrize(
    "line",
    [
        "AssertionError: max_running_request is zero",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.75",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[2026-05-01 12:00:00] Received sigquit from a child process. It usually means the child failed.",
        "[2026-05-01 12:00:00] Rank 3 scheduler died during initialization (exit code: -9).",
        "OSError: [Errno 98] Address already in use",
        "[2026-05-01 12:00:00] Scheduler hit an exception: Traceback (most recent call last):",
    ],
)
def test_sglang_death_texts_are_decisive(line: str) -> None:
    marker = fatal_marker(line)
    assert marker is not None and marker.decisive


@pytest.mark.parametrize(
    "line",
    ["Traceback (most recent call last):", "asyncio.exceptions.CancelledError: ", "ValueError: invalid literal for int()"],
)
def test_tracebacks_servers_survive_are_only_suspect(line: str) -> None:
    marker = fatal_marker(line)
    assert marker is not None and not marker.decisive


def test_scan_of_a_healthy_start_reads_the_scheduler_figures() -> None:
    scan = LogScan()
    for line in lines("024-healthy.log"):
        scan.feed(line)
    assert scan.fatal_marker is None
    assert scan.scheduler is not None and scan.scheduler.max_running_requests == 200 and scan.scheduler.context_len == 128000
    assert scan.evidence() == lines("024-healthy.log")[-len(scan.evidence()) :]


def test_evidence_runs_from_before_the_fatal_line_to_the_end() -> None:
    log = lines("007-context_length_exceeded.log")
    scan = LogScan()
    for line in log:
        scan.feed(line)
    evidence = scan.evidence()
    assert scan.fatal_marker == "process_failed"
    assert evidence[0] == log[0]  # the lines before the decisive one: the request that caused it
    assert "Input length (160062 tokens) exceeds" in "\n".join(evidence)
    assert evidence[-1] == log[-1]


def test_watcher_follows_an_appended_file_from_its_start_offset(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-05-01 12:00:00] Traceback (most recent call last): from an earlier start\n")
    watcher = LogWatcher(log, log.stat().st_size)
    try:
        with open(log, "a") as handle:
            handle.write("[2026-05-01 12:00:01] max_total_num_tokens=170644, chunked_prefill_size=8192, max_prefill_tokens=16384, ")
            handle.flush()
            watcher.sync()
            assert watcher.scheduler is None  # half a line is not a line
            handle.write("max_running_requests=4, context_len=32768, available_gpu_mem=4.10 GB\n")
            handle.write("[2026-05-01 12:00:02] The server is fired up and ready to roll!\n")
        watcher.sync()
        assert watcher.scheduler is not None and watcher.scheduler.max_running_requests == 4
        assert watcher.fatal_marker is None  # the earlier start's traceback is not this start's
        with open(log, "a") as handle:
            handle.write("[2026-05-01 12:00:09] Scheduler hit an exception: Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal instruction was encountered")
    finally:
        watcher.close()
    assert watcher.fatal_marker == "process_failed"
    assert watcher.fatal_line is not None and "Scheduler hit an exception" in watcher.fatal_line
    assert watcher.evidence()[-1] == "RuntimeError: CUDA error: an illegal instruction was encountered"


def test_fail_fast_and_diagnosis_read_one_catalogue() -> None:
    # Every fatal signature of the catalogue that a server does not survive is decisive for the
    # agent, on a line its own trigger proves; a request the server refused (HTTP 400) is not.
    for signature in SIGNATURES:
        if signature.kind is not Kind.FATAL:
            continue
        for trigger in signature.triggers:
            if trigger.pattern is None:
                marker = fatal_marker(f"[2026-05-01 12:00:00] RuntimeError: {trigger.literal}")
                assert marker is not None, (signature.name, trigger.literal)
                assert marker.decisive is (not signature.server_survives) or marker.name != signature.name
    refused = "[2026-05-01 12:00:00] The input (5000 tokens) is longer than the model's context length (4096 tokens)."
    assert fatal_marker(refused) is None
    nccl_info = "host:1333:1333 [0] NCCL INFO NET/Plugin: libnccl-net.so: cannot open shared object file: No such file or directory"
    assert fatal_marker(nccl_info) is None
    ecc = fatal_marker("[rank1]:[E524 08:15:00] Process group watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered")
    assert ecc is not None and ecc.decisive and ecc.name == "gpu_hardware_error"
