"""The agent's watch on its own gaps (fleet.host.agent.pause), fed clock readings; what a gap
makes of a run (fleet.host.agent.results) and of a request (fleet.host.agent.client).
A real agent stopped and continued: tests/integration/test_agent_paused.py."""

from __future__ import annotations

import threading

import pytest

from fleet.host.agent.client import NO_TOKEN_TIMEOUT, Client, Endpoint, RequestOutcome
from fleet.host.agent.pause import PAUSE_THRESHOLD_S, THRESHOLD_ENV, Gap, GapDetector, PauseWatch, threshold_from_env
from fleet.host.agent.results import paused_deviation, request_figures, request_record, run_status
from fleet.host.agent.outcome import AGENT_PAUSED, Sent
from fleet.host.contract import Failure, RunStatus
from tests.unit.test_agent_client import ScriptedServer, generate_chunk, server, sse  # noqa: F401 (fixture)


class FakeClocks:
    """CLOCK_MONOTONIC and CLOCK_BOOTTIME, moved by the test alone."""

    def __init__(self) -> None:
        self.monotonic = 1000.0
        self.boottime = 5000.0
        self._lock = threading.Lock()

    def __call__(self) -> tuple[float, float]:
        with self._lock:
            return self.monotonic, self.boottime

    def run(self, seconds: float) -> None:
        """Time in which the process ran (or was stopped: both clocks count that)."""
        with self._lock:
            self.monotonic += seconds
            self.boottime += seconds

    def suspend(self, seconds: float) -> None:
        """The machine suspended: only CLOCK_BOOTTIME counts it."""
        with self._lock:
            self.boottime += seconds


def readings(clocks: FakeClocks, detector: GapDetector, steps: list[float]) -> list[Gap]:
    gaps = []
    for step in steps:
        clocks.run(step)
        if (gap := detector.observe(*clocks())) is not None:
            gaps.append(gap)
    return gaps


def test_ticks_late_by_what_a_loaded_machine_does_are_no_gap() -> None:
    clocks, detector = FakeClocks(), GapDetector()
    assert detector.observe(*clocks()) is None  # the first reading has nothing to compare with
    # Every 0.25 s, with scheduling delays up to a couple of seconds, and exactly the threshold.
    assert readings(clocks, detector, [0.25, 0.26, 0.3, 1.1, 0.25, 2.4, 0.25, PAUSE_THRESHOLD_S]) == []


def test_a_stopped_process_is_one_gap_as_long_as_the_stop() -> None:
    clocks, detector = FakeClocks(), GapDetector()
    detector.observe(*clocks())
    gaps = readings(clocks, detector, [0.25, 60.2, 0.25, 0.25])
    assert [(gap.began, gap.ended, gap.suspended_s) for gap in gaps] == [(1000.25, 1060.45, 0.0)]
    assert gaps[0].seconds == pytest.approx(60.2)
    assert gaps[0].describe().startswith("fleet's agent did not run for 60.2 s: its process was stopped")


def test_a_suspended_machine_is_seen_by_the_boot_time_clock() -> None:
    clocks, detector = FakeClocks(), GapDetector()
    detector.observe(*clocks())
    clocks.run(0.1)
    clocks.suspend(3600.0)
    clocks.run(0.15)
    gap = detector.observe(*clocks())
    assert gap is not None and gap.seconds == pytest.approx(3600.25) and gap.suspended_s == pytest.approx(3600.0)
    assert "its machine was suspended" in gap.describe()


def test_without_a_boot_time_clock_a_stop_is_still_seen() -> None:
    detector = GapDetector(threshold_s=2.0)
    detector.observe(10.0, 10.0)
    assert detector.observe(10.25, 10.25) is None
    gap = detector.observe(13.0, 13.0)
    assert gap is not None and gap.seconds == pytest.approx(2.75)


def watch(clocks: FakeClocks, threshold_s: float = 5.0) -> PauseWatch:
    # Its thread reads the same fake clocks: whoever looks first after a jump sees the gap, once.
    return PauseWatch(threshold_s, tick_s=0.01, clock=clocks)


def test_a_gap_counts_for_the_marks_taken_before_it_and_not_after() -> None:
    clocks = FakeClocks()
    pauses = watch(clocks)
    pauses.start()
    try:
        before = pauses.mark()
        clocks.run(1.0)
        assert pauses.since(before) == []
        clocks.run(60.0)  # stopped for a minute: the watch's thread or since() sees it
        (gap,) = pauses.since(before)
        assert gap.seconds == pytest.approx(60.0)
        after = pauses.mark()
        assert pauses.since(after) == [] and pauses.since(before) == [gap]
    finally:
        pauses.stop()


def test_a_watch_that_does_not_tick_sees_no_gap() -> None:
    clocks = FakeClocks()
    pauses = watch(clocks)
    mark = pauses.mark()
    clocks.run(600.0)  # not started: its own idleness is no pause of the agent
    assert pauses.since(mark) == []
    pauses.start()
    pauses.stop()
    clocks.run(600.0)
    assert pauses.since(mark) == []
    pauses.start()  # started again: nothing from the stopped stretch is counted
    try:
        assert pauses.since(mark) == []
    finally:
        pauses.stop()


@pytest.mark.parametrize(("value", "expected"), [(None, PAUSE_THRESHOLD_S), ("1.5", 1.5), ("0", PAUSE_THRESHOLD_S), ("-2", PAUSE_THRESHOLD_S), ("nan", PAUSE_THRESHOLD_S), ("soon", PAUSE_THRESHOLD_S)])
def test_the_threshold_is_lowered_only_by_a_positive_number(value: str | None, expected: float) -> None:
    assert threshold_from_env({} if value is None else {THRESHOLD_ENV: value}) == expected


def failed_request() -> RequestOutcome:
    return RequestOutcome(started_at=1.0, output_tokens=3, error_class=NO_TOKEN_TIMEOUT, error_message="no token for 120 s")


def ok_request() -> RequestOutcome:
    return RequestOutcome(started_at=1.0, ok=True, prompt_tokens=40, output_tokens=8, ttft_s=0.1, e2e_s=61.0, finish_reason="length")


def test_a_run_across_the_agents_pause_is_not_comparable_never_blamed_on_the_server() -> None:
    deviation = paused_deviation([Gap(began=1.0, ended=61.0, seconds=60.0)])
    assert deviation.kind == AGENT_PAUSED and "did not run for 60.0 s" in deviation.message and "not the server's" in deviation.message
    figures = request_figures([ok_request(), failed_request()], wall_s=62.0)
    assert run_status(figures, None)[0] is RunStatus.partial  # what it was before: a time-out on the server
    assert run_status(figures, None, [deviation]) == (RunStatus.not_comparable, None)
    nothing = request_figures([failed_request()], wall_s=62.0)
    hung = Failure("server_hung", "the server process is alive but /health did not answer")
    assert run_status(nothing, hung, [deviation]) == (RunStatus.not_comparable, None)


class JumpingClocks(FakeClocks):
    """Fake clocks that jump forward at given looks (1 is the first), as if stopped just before."""

    def __init__(self, jumps: dict[int, float]) -> None:
        super().__init__()
        self.jumps = jumps
        self.looks = 0

    def __call__(self) -> tuple[float, float]:
        self.looks += 1
        self.run(self.jumps.get(self.looks, 0.0))
        return super().__call__()


def test_a_request_across_a_pause_says_so_and_its_time_out_names_it(server: ScriptedServer) -> None:  # noqa: F811
    # Looks: 1 the watch's start; 2 and 3 the first request's mark and end; 4 and 5 the second's.
    clocks = JumpingClocks({2: 30.0, 5: 40.0})
    pauses = PauseWatch(5.0, tick_s=3600.0, clock=clocks)  # its thread waits: only the client looks
    pauses.start()
    try:
        server.script = [(0.0, sse(generate_chunk("a", 1))), (5.0, sse(generate_chunk("ab", 2)))]
        client = Client(Endpoint("127.0.0.1", server.server_address[1]), pauses=pauses)
        plain = client.generate("p", 8, deadline_s=30, no_token_timeout_s=0.3)  # the pause came before it: not its own
        assert plain.error_class == NO_TOKEN_TIMEOUT and plain.agent_paused_s is None
        assert "fleet's agent" not in (plain.error_message or "") and "agent_paused_s" not in request_record(Sent(plain))
        paused = client.generate("p", 8, deadline_s=30, no_token_timeout_s=0.3)
        assert clocks.looks == 5
        assert paused.error_class == NO_TOKEN_TIMEOUT and paused.agent_paused_s == pytest.approx(40.0)
        assert "fleet's agent did not run for 40.0 s" in (paused.error_message or "") and "not the server's" in (paused.error_message or "")
        assert request_record(Sent(paused))["agent_paused_s"] == paused.agent_paused_s
    finally:
        pauses.stop()
