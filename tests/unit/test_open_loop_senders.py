"""The open-loop client's sending processes (fleet.host.agent.senders), driven through
fleet.host.agent.kinds.listed.open_loop against a real local HTTP server that streams SGLang's
/generate chunks: outcomes come back to the request they belong to, the cap holds across the
processes (what the cap held is not lateness), a server that looks gone closes the gate in the
agent's process, `abort_all` reaches the processes' clients, a stopped process's requests say so,
and a process that dies is an error, not a hang. Each server waits on the test's own events, not on time, except where a test says."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet.host.agent.client import ABORTED_BY_AGENT, INCOMPLETE_STREAM, Client, Endpoint
from fleet.host.agent.driver import Driver, Gate, ServerFacts
from fleet.host.agent.kinds.listed import Planned, open_loop
from fleet.host.agent.pause import PauseWatch
from fleet.host.agent.senders import STREAMS_PER_PROCESS, sender_count
from fleet.host.contract import Failure
from fleet.host.contract.shard import AgentLimits, RunSpec

TOKENS = 3


class StreamServer(ThreadingHTTPServer):
    """Answers each /generate with TOKENS chunks echoing its prompt, after `hold_s` (or, with
    `release` given, once it is set); `cut` prompts get a stream without a finish reason. Counts the
    requests in flight and the most there were at once."""

    daemon_threads = True

    def __init__(self, hold_s: float = 0.0, release: threading.Event | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hold_s = hold_s
        self.release = release
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0
        self.prompts: list[str] = []
        self.arrived = threading.Condition(self.lock)


class _Handler(BaseHTTPRequestHandler):
    """Chunked HTTP/1.1, as uvicorn streams."""

    server: StreamServer
    protocol_version = "HTTP/1.1"

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        server = self.server
        prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["text"]
        with server.lock:
            server.active += 1
            server.most = max(server.most, server.active)
            server.prompts.append(prompt)
            server.arrived.notify_all()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if server.release is not None:
                server.release.wait(60)
            else:
                time.sleep(server.hold_s)
        finally:
            # Out of the count before the last chunk goes: the client may send its next request
            # as soon as it has read it, before this thread would run again.
            with server.lock:
                server.active -= 1
        try:
            for n in range(1, TOKENS + 1):
                finish = {"type": "length"} if n == TOKENS and prompt != "cut" else None
                chunk = {"text": f"echo {prompt}", "meta_info": {"prompt_tokens": 1, "completion_tokens": n, "finish_reason": finish}}
                self.chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            if prompt != "cut":
                self.chunk(b"data: [DONE]\n\n")
            self.chunk(b"")
            self.close_connection = True
        except OSError:
            pass  # the client cut the stream


def serving(server: StreamServer) -> Iterator[StreamServer]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    if server.release is not None:
        server.release.set()
    server.shutdown()
    server.server_close()


def driver_for(server: StreamServer, liveness: Any = lambda: None) -> Driver:
    spec = RunSpec("r", "open-loop", {"name": "w", "kind": "random"}, 1)
    client = Client(Endpoint("127.0.0.1", server.server_address[1]))
    return Driver(client, AgentLimits(request_timeout_s=120, no_token_timeout_s=90), ServerFacts(), Gate(liveness, threading.Event()), spec)


def plans_of(prompts: list[str]) -> list[Planned]:
    return [Planned(prompt, TOKENS, {"repeat": 0, "request": i}) for i, prompt in enumerate(prompts)]


def wait_for(server: StreamServer, active: int) -> None:
    with server.arrived:
        assert server.arrived.wait_for(lambda: server.active >= active, 60), (server.active, server.prompts)


def test_the_number_of_sending_processes_follows_the_streams_and_the_cpus() -> None:
    assert sender_count(STREAMS_PER_PROCESS, 16) == 1  # what one interpreter keeps to: its own threads
    assert sender_count(STREAMS_PER_PROCESS + 1, 16) == 2
    assert sender_count(512, 16) == 8  # one per two CPUs binds before one per 64 streams would (8 either way)
    assert sender_count(512, 64) == 8
    assert sender_count(512, 6) == 3
    assert sender_count(512, 2) == 1  # no second CPU to spread onto


def test_outcomes_come_back_from_the_processes_to_their_requests_and_the_cap_holds_across_them() -> None:
    """12 requests due within milliseconds, at most 4 in flight, from 2 processes; the server holds
    each 0.3 s. Every outcome is its own request's (the server echoes the prompt), in request order;
    the server never sees more than 4 at once; the 8 requests beyond the first 4 were held by the
    cap, and that wait is not counted as lateness (it would be 0.3 s or more for each)."""
    for server in serving(StreamServer(hold_s=0.3)):
        prompts = [f"prompt-{i}" for i in range(12)]
        sent, wall = open_loop(driver_for(server), plans_of(prompts), {"rate": 1000.0, "burstiness": 1.0, "max_in_flight": 4}, random.Random(1), processes=2)
        assert [s.tags["request"] for s in sent] == list(range(12))
        assert [s.outcome.text for s in sent] == [f"echo {p}" for p in prompts]
        assert all(s.outcome.ok and s.outcome.output_tokens == TOKENS for s in sent), [s.outcome for s in sent]
        assert sorted(server.prompts) == sorted(prompts)
        assert server.most <= 4
        held = [s.tags.get("held_by_cap_s", 0.0) for s in sent]
        assert sum(1 for h in held if h > 0.2) >= 8, held
        late = [s.outcome.schedule_delay_s for s in sent]
        assert all(d is not None and 0 <= d < 0.3 for d in late), late
        assert wall >= 0.9  # three rounds of four


def test_a_server_that_looks_gone_closes_the_gate_in_the_agents_process() -> None:
    """The first request's stream ends without a finish reason (a suspect end): the agent's process
    checks the server's liveness on that outcome, the check fails, and the loop sends nothing more.
    The second request is due a second after the first: the outcome has that long to come back."""
    checks: list[int] = []

    def liveness() -> Failure | None:
        checks.append(1)
        return Failure("server_died", "the server died while serving")

    for server in serving(StreamServer()):
        driver = driver_for(server, liveness)
        # Gaps of 1 s with almost no spread (gamma shape 1000).
        sent, _ = open_loop(driver, plans_of(["cut", "second", "third"]), {"rate": 1.0, "burstiness": 1000.0}, random.Random(1), processes=2)
        assert [s.outcome.error_class for s in sent] == [INCOMPLETE_STREAM]
        assert checks == [1] and driver.gate.failure is not None and not driver.gate.open
        assert server.prompts == ["cut"]


def test_abort_all_reaches_the_requests_the_processes_have_in_flight() -> None:
    release = threading.Event()
    for server in serving(StreamServer(release=release)):
        driver = driver_for(server)
        prompts = [f"p{i}" for i in range(6)]

        def abort_when_all_in_flight() -> None:
            wait_for(server, len(prompts))
            driver.client.abort_all()

        aborter = threading.Thread(target=abort_when_all_in_flight, daemon=True)
        aborter.start()
        began = time.monotonic()
        sent, _ = open_loop(driver, plans_of(prompts), {"rate": 1000.0, "burstiness": 1.0}, random.Random(1), processes=2)
        # The server holds every stream until the test ends (or 60 s): only the abort ended them.
        assert time.monotonic() - began < 30
        assert not release.is_set()
        assert [s.outcome.error_class for s in sent] == [ABORTED_BY_AGENT] * len(prompts)


def test_a_sending_process_that_dies_is_an_error_naming_its_requests() -> None:
    release = threading.Event()
    for server in serving(StreamServer(release=release)):
        driver = driver_for(server)

        def kill_a_sender() -> None:
            wait_for(server, 4)
            # Kill one of the two senders, then let the other's streams end.
            senders = sender_pids()
            assert len(senders) == 2, senders
            os.kill(senders[0], signal.SIGKILL)
            release.set()

        killer = threading.Thread(target=kill_a_sender, daemon=True)
        killer.start()
        with pytest.raises(RuntimeError, match=r"open-loop sender processes failed: \d+ \(exit code -9\); process \d+ ended with requests \[\d+, \d+\] in flight"):
            open_loop(driver, plans_of([f"p{i}" for i in range(4)]), {"rate": 1000.0, "burstiness": 1.0}, random.Random(1), processes=2)


def sender_pids() -> list[int]:
    """The open-loop senders among this process's children (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    return [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_a_sender_that_was_stopped_says_so_on_its_requests() -> None:
    """A sending process keeps its own pause watch, at the agent's threshold (0.5 s here): one
    stopped for 1.5 s (SIGSTOP) while its two streams wait on the server marks both requests with
    the pause (`agent_paused_s`), as the agent's own threads would."""
    release = threading.Event()
    for server in serving(StreamServer(release=release)):
        driver = driver_for(server)
        driver.client.pauses = PauseWatch(0.5)

        def stop_a_sender() -> None:
            wait_for(server, 4)
            pid = sender_pids()[0]
            os.kill(pid, signal.SIGSTOP)
            time.sleep(1.5)
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.5)  # two of its watch's ticks: it sees the gap without a request's help
            release.set()

        stopper = threading.Thread(target=stop_a_sender, daemon=True)
        stopper.start()
        sent, _ = open_loop(driver, plans_of([f"p{i}" for i in range(4)]), {"rate": 1000.0, "burstiness": 1.0}, random.Random(1), processes=2)
        paused = [s.outcome.agent_paused_s for s in sent]
        assert all(s.outcome.ok for s in sent)
        assert sum(1 for p in paused if p is not None and p >= 1.4) >= 2, paused


def test_a_stop_signalled_to_the_whole_process_group_leaves_the_senders_to_the_agent() -> None:
    """`service stop` and a scheduler's cancel SIGTERM the agent's process group, senders included;
    the agent handles the stop (it cuts the streams and ends its senders). A sender that died at the
    signal would lose its requests' outcomes and turn the stop into an error of the open loop."""
    release = threading.Event()
    for server in serving(StreamServer(release=release)):
        driver = driver_for(server)

        def signal_the_group() -> None:
            wait_for(server, 4)
            for pid in sender_pids():
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGINT)
            time.sleep(0.5)  # a sender that did not ignore them is gone by now
            release.set()

        signaller = threading.Thread(target=signal_the_group, daemon=True)
        signaller.start()
        sent, _ = open_loop(driver, plans_of([f"p{i}" for i in range(4)]), {"rate": 1000.0, "burstiness": 1.0}, random.Random(1), processes=2)
        assert [s.outcome.ok for s in sent] == [True] * 4
