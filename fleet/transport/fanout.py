"""Run one function per host in parallel threads; always get one outcome per host back.

Unlike Fabric's ThreadingGroup, nothing joins a thread without a bound: each host has its own
deadline, counted from when its thread starts, and a host that misses it is reported as timed
out while its thread is abandoned (a daemon thread, it cannot keep the process alive). A host
that fails never hides the others: its exception is its outcome, and the caller decides.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from fleet.errors import CommandTimeout, TransportError

log = logging.getLogger("fleet.transport")

X = TypeVar("X")
T = TypeVar("T")


@dataclass(frozen=True)
class HostOutcome(Generic[T]):
    host: str
    value: T | None
    error: BaseException | None
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def timed_out(self) -> bool:
        return isinstance(self.error, CommandTimeout)

    @property
    def transient(self) -> bool:
        """A transport hiccup (worth another try later), as opposed to a hard failure."""
        return isinstance(self.error, TransportError) and self.error.transient


class FanoutResult(Mapping[str, HostOutcome[T]]):
    """host -> outcome, in the order the hosts were given."""

    def __init__(self, outcomes: Mapping[str, HostOutcome[T]]) -> None:
        self._outcomes = dict(outcomes)

    def __getitem__(self, host: str) -> HostOutcome[T]:
        return self._outcomes[host]

    def __iter__(self) -> Iterator[str]:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return len(self._outcomes)

    @property
    def succeeded(self) -> dict[str, T]:
        return {host: o.value for host, o in self._outcomes.items() if o.ok}  # type: ignore[misc]

    @property
    def failed(self) -> dict[str, BaseException]:
        return {host: o.error for host, o in self._outcomes.items() if o.error is not None}


def fan_out(
    targets: Mapping[str, X],
    fn: Callable[[X], T],
    *,
    deadline_s: float,
    max_parallel: int | None = None,
) -> FanoutResult[T]:
    """Call `fn(target)` for every host in its own thread; return within about `deadline_s`
    per wave of `max_parallel` hosts (all hosts at once by default).

    `fn` should bound its own calls (every Transport call takes a timeout); `deadline_s` is the
    backstop for whatever it does not bound.
    """
    if deadline_s <= 0:
        raise ValueError(f"deadline_s must be positive, not {deadline_s}")
    limit = max_parallel or max(1, len(targets))
    done: queue.Queue[HostOutcome[T]] = queue.Queue()
    waiting = list(targets.items())
    running: dict[str, float] = {}  # host -> start time
    outcomes: dict[str, HostOutcome[T]] = {}

    def work(host: str, target: X, started: float) -> None:
        try:
            value = fn(target)
        except BaseException as exc:  # the outcome of this host, reported to the caller
            done.put(HostOutcome(host, None, exc, time.monotonic() - started))
        else:
            done.put(HostOutcome(host, value, None, time.monotonic() - started))

    while waiting or running:
        while waiting and len(running) < limit:
            host, target = waiting.pop(0)
            started = time.monotonic()
            running[host] = started
            threading.Thread(target=work, args=(host, target, started), name=f"fleet-fanout-{host}", daemon=True).start()
        next_deadline = min(started + deadline_s for started in running.values())
        try:
            outcome = done.get(timeout=max(0.0, next_deadline - time.monotonic()))
        except queue.Empty:
            now = time.monotonic()
            for host, started in list(running.items()):
                if now >= started + deadline_s:
                    del running[host]
                    outcomes[host] = HostOutcome(
                        host,
                        None,
                        CommandTimeout(host, f"no result within the {deadline_s:g}s deadline; abandoned, it may still be running"),
                        now - started,
                    )
                    log.warning("%s: no result within %gs, abandoned", host, deadline_s)
            continue
        if outcome.host in running:  # not already reported as timed out
            del running[outcome.host]
            outcomes[outcome.host] = outcome
    return FanoutResult({host: outcomes[host] for host in targets})
