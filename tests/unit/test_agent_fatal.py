"""Fail-fast on server logs: real SGLang logs (tests/fixtures/agent/), healthy ones must never
trip the fatal-line list, failing ones must, and the evidence must hold the lines that matter."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.agent.fatal import fatal_marker
from fleet.agent.logwatch import LogScan, LogWatcher

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent"


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


@pytest.mark.parametrize("name", ["021-healthy.log", "024-healthy.log"])
def test_healthy_logs_have_no_fatal_line(name: str) -> None:
    assert [line for line in lines(name) if fatal_marker(line)] == []


def test_the_context_length_warning_is_not_a_cuda_error() -> None:
    warning = next(line for line in lines("021-healthy.log") if "CUDA errors" in line)
    assert fatal_marker(warning) is None
    assert fatal_marker("RuntimeError: CUDA error: an illegal instruction was encountered") == "cuda_error"


@pytest.mark.parametrize(
    ("name", "marker", "text"),
    [
        ("027-cuda_illegal_memory_access.log", "cuda_error", "Exception: Capture cuda graph failed"),
        # An excerpt that starts mid-traceback: its first fatal line is the exception's last line.
        ("007-context_length_exceeded.log", "exception_line", "TypeError: '>' not supported"),
        ("009-nccl_error.log", None, None),
        ("004-unsupported_gpu_arch.log", None, None),
    ],
)
def test_failing_logs_are_caught(name: str, marker: str | None, text: str | None) -> None:
    hits = [(fatal_marker(line), line) for line in lines(name) if fatal_marker(line)]
    assert hits, f"{name}: no fatal line found"
    if marker is not None and text is not None:
        assert hits[0][0] == marker and text in hits[0][1]


@pytest.mark.parametrize(
    "line",
    [
        "AssertionError: max_running_request is zero",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.75",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[2026-05-01 12:00:00] Received sigquit from a child process. It usually means the child failed.",
        "[2026-05-01 12:00:00] Rank 3 scheduler died during initialization (exit code: -9).",
        "OSError: [Errno 98] Address already in use",
        "Traceback (most recent call last):",
    ],
)
def test_sglang_fatal_texts(line: str) -> None:
    assert fatal_marker(line) is not None


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
    assert scan.fatal_line is not None and scan.fatal_line.startswith("TypeError")
    assert evidence[0] == log[0]  # the line before the fatal one
    assert evidence[-1] == log[-1] and "Scheduler hit an exception" in "\n".join(evidence)


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
    assert watcher.fatal_marker == "traceback"
    assert watcher.fatal_line is not None and "Scheduler hit an exception" in watcher.fatal_line
    assert watcher.evidence()[-1] == "RuntimeError: CUDA error: an illegal instruction was encountered"
