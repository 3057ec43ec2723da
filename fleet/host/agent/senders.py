"""Where an open-loop run's requests are sent from: threads of the agent's own process or, for more
streams than one interpreter keeps to their schedule, several sending processes, each with threads
for its share of the streams. Standard library only.

Why processes: every streaming thread parses its chunks under the one interpreter lock, and a
request due now waits for that lock before it is sent. bench_open_loop.py on 16 idle cores
(benchmarks/results/open-loop.md): 64 streams on threads were a median 3 ms late, 512 streams 53 ms,
five times the bound (fleet.host.agent.results.MAX_SCHEDULE_DELAY_S); sent from 8 processes of 64
threads, the same 512 streams were a median 2.5 ms late.

The schedule stays in the agent's process (fleet.host.agent.kinds.listed `open_loop`): it waits for
each request's due time and for a slot of the cap, and hands the request to a sender with a thread
free. A sending process measures lateness against the due time on time.monotonic, which is
CLOCK_MONOTONIC, one clock for every process of a Linux machine, and sends back the outcome; the
agent's process checks the gate on it (Driver.checked), as Driver.send does for its own threads,
and frees the cap's slot. `Client.abort_all` reaches the senders' clients (Client.on_abort).
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Union

from fleet.host.agent.client import Client, Endpoint, Prompt, RequestOutcome
from fleet.host.agent.driver import Driver
from fleet.host.agent.pause import PauseWatch

# A request to send: its index among the run's, what is sent, and when it is due (time.monotonic).
Job = tuple[int, Prompt, int, float]
# Called once per job, on a sender's thread: its outcome (schedule_delay_s set), or None where the
# send raised (the error is raised again by `close`).
Finish = Callable[[int, Union[RequestOutcome, None]], None]

# Streams one process's threads keep within the bound: 64 were a median 3 ms late on 16 idle cores
# (benchmarks/results/open-loop.md), a third of it, leaving room for a host busier than that one.
STREAMS_PER_PROCESS = 64
# A sending process is ready once it has imported the client and started its threads: a second or
# less; this is for a machine so loaded that the run would not be worth measuring anyway.
START_TIMEOUT_S = 60.0
_ABORT = "abort"
_READY = "ready"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the platform has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def sender_count(streams: int, cpus: int) -> int:
    """How many processes send `streams` at once on a machine of `cpus`: threads of the agent's own
    process up to STREAMS_PER_PROCESS, else one process per STREAMS_PER_PROCESS streams, at most one
    for every two CPUs: the server beside the agent needs CPU too (an engine's tokenizer, scheduler
    and detokenizer; the sim's whole work on a test host), and more processes than free cores only
    trade the lock's waits for the kernel's."""
    if streams <= STREAMS_PER_PROCESS:
        return 1
    return max(1, min(math.ceil(streams / STREAMS_PER_PROCESS), cpus // 2))


class Threads:
    """`count` threads, started now, that each take a job when due, send it with `send` and hand
    the outcome, with its lateness, to `finish`. Started before the first send: starting a thread
    waits for it to run (threading.Thread.start), a switch of the interpreter lock per request under
    many streams, and a loop that started one per request fell behind its own schedule. A job's
    lateness is from its due time to a thread taking it up."""

    def __init__(self, count: int, send: Callable[[Prompt, int], RequestOutcome], finish: Finish) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._work, args=(send, finish), name=f"open-loop-{i}", daemon=True) for i in range(count)]
        for thread in self._threads:
            thread.start()

    def put(self, job: Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        """Wait for every job put; raise the first error a send raised."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]

    def _work(self, send: Callable[[Prompt, int], RequestOutcome], finish: Finish) -> None:
        while (job := self._jobs.get()) is not None:
            index, prompt, max_new_tokens, due = job
            late = time.monotonic() - due
            try:
                outcome = send(prompt, max_new_tokens)
            except Exception as exc:  # a bug, not a request's failure (the client classifies those): raised by close
                self._errors.append(exc)
                finish(index, None)  # its cap slot is free again
                continue
            outcome.schedule_delay_s = late
            finish(index, outcome)


@dataclass
class _Sender:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: set[int] = field(default_factory=set)  # job indices sent to it and not yet back
    ended: bool = False  # its end of the pipe closed: it takes no more jobs

    def tell(self, message: object) -> None:
        with self.send_lock:
            self.conn.send(message)


class Processes:
    """`count` sending processes of `threads` threads each (`serve`), started now and ready before
    this returns. A job goes to the process with the fewest in flight: while fewer than
    count * threads are in flight, that one has a thread free."""

    def __init__(self, driver: Driver, count: int, threads: int, finish: Finish) -> None:
        self._driver = driver
        self._finish = finish
        self._lock = threading.Lock()
        self._back = threading.Condition(self._lock)  # an outcome came back, or a process ended
        self._lost: list[str] = []
        # spawn, not fork: the agent's process has threads (the pause watch, the runner's), and a
        # fork copies whatever locks they hold.
        context = multiprocessing.get_context("spawn")
        client = driver.client
        threshold = client.pauses.threshold_s if client.pauses is not None else None
        limits = (driver.limits.request_timeout_s, driver.limits.no_token_timeout_s)
        self._senders: list[_Sender] = []
        try:
            for i in range(count):
                ours, theirs = context.Pipe()
                process = context.Process(target=serve, args=(theirs, client.endpoint, client.api, client.model, threshold, limits, threads), name=f"open-loop-sender-{i}", daemon=True)
                process.start()
                theirs.close()
                self._senders.append(_Sender(process, ours))
            for sender in self._senders:
                if not sender.conn.poll(START_TIMEOUT_S) or sender.conn.recv() != _READY:
                    raise RuntimeError(f"open-loop sender process {sender.process.pid} was not ready within {START_TIMEOUT_S:.0f} s")
        except (EOFError, OSError, RuntimeError) as exc:
            for sender in self._senders:
                sender.process.kill()
                sender.process.join()
            codes = [sender.process.exitcode for sender in self._senders]
            raise RuntimeError(f"open-loop sender processes did not start (exit codes {codes}; their stderr says why): {exc}") from exc
        self._remove_cut = client.on_abort(self._abort)
        self._collector = threading.Thread(target=self._collect, name="open-loop-collector", daemon=True)
        self._collector.start()

    def put(self, job: Job) -> None:
        with self._lock:
            live = [s for s in self._senders if not s.ended]
            if not live:
                raise RuntimeError("every open-loop sender process has exited: " + "; ".join(self._lost))
            sender = min(live, key=lambda s: len(s.in_flight))
            sender.in_flight.add(job[0])
        sender.tell(job)

    def close(self) -> None:
        """Wait for every job's outcome and every process's end; raise if one ended early. The
        processes are told to end only once every outcome is back: until then they listen for an
        abort."""
        with self._back:
            self._back.wait_for(lambda: not any(sender.in_flight for sender in self._senders))
        self._remove_cut()
        for sender in self._senders:
            try:
                sender.tell(None)
            except OSError:
                pass  # it has exited: the collector says why
        self._collector.join()
        for sender in self._senders:
            sender.process.join()
        failed = [f"{s.process.pid} (exit code {s.process.exitcode})" for s in self._senders if s.process.exitcode != 0]
        if failed or self._lost:
            raise RuntimeError(f"open-loop sender processes failed: {', '.join(failed)}; {'; '.join(self._lost)}")

    def _abort(self) -> None:
        for sender in self._senders:
            try:
                sender.tell(_ABORT)
            except OSError:
                pass  # it has exited: nothing of it left to cut

    def _collect(self) -> None:
        live = {sender.conn: sender for sender in self._senders}
        while live:
            for conn in multiprocessing.connection.wait(list(live)):
                assert isinstance(conn, multiprocessing.connection.Connection)
                sender = live[conn]
                try:
                    index, outcome = conn.recv()
                except (EOFError, OSError):  # it ended (a reset: with jobs it had not read)
                    del live[conn]
                    with self._lock:
                        sender.ended = True
                        lost, sender.in_flight = sorted(sender.in_flight), set()
                    if lost:
                        self._lost.append(f"process {sender.process.pid} ended with requests {lost} in flight")
                    for index in lost:
                        self._finish(index, None)
                    with self._back:
                        self._back.notify_all()
                    continue
                if outcome is not None:
                    self._driver.checked(outcome)
                with self._lock:
                    sender.in_flight.discard(index)
                self._finish(index, outcome)
                with self._back:
                    self._back.notify_all()


def serve(
    conn: multiprocessing.connection.Connection,
    endpoint: Endpoint,
    api: str,
    model: str | None,
    pause_threshold_s: float | None,
    limits: tuple[float, float],
    threads: int,
) -> None:
    """A sending process: jobs from `conn`, sent with a client of its own, outcomes back on `conn`.
    Ends on None, once every job's outcome is back; on the agent's end closing (the agent is gone),
    cuts its requests first. Its pauses are its own (a stopped sender is late on its streams)."""
    # A stop signalled to the agent's whole process group (`service stop`, a scheduler's cancel) is
    # the agent's to carry out: it cuts these streams (abort_all) and ends this process. Dying at
    # the signal would lose their outcomes and make the stop an error of the open loop.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pauses = PauseWatch(pause_threshold_s) if pause_threshold_s is not None else None
    if pauses is not None:
        pauses.start()
    client = Client(endpoint, api=api, model=model, pauses=pauses)
    deadline_s, no_token_timeout_s = limits
    lock = threading.Lock()

    def finish(index: int, outcome: RequestOutcome | None) -> None:
        with lock:
            conn.send((index, outcome))

    pool = Threads(threads, lambda prompt, n: client.generate(prompt, n, deadline_s=deadline_s, no_token_timeout_s=no_token_timeout_s), finish)
    conn.send(_READY)
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                client.abort_all()
                break
            if message is None:
                break
            if message == _ABORT:
                client.abort_all()
                continue
            pool.put(message)
    finally:
        pool.close()
        if pauses is not None:
            pauses.stop()
        conn.close()
