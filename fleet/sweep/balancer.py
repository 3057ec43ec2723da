"""The balancer: one mechanism that moves work between the hosts of one sweep -- queued servers to
a host whose agent ran dry (the tail), a given-up host's runs to the live ones -- decided on the
hosts' shards, their pulled results and the plan's estimates. Every host's loop
(fleet.sweep.driver.HostDriver) calls it from its own thread; it reads of a loop only what
`HostLoop` names."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from fleet.host.contract.shard import ServerSpec
from fleet.inventory import Host
from fleet.plan import Hardware, PlannedServer
from fleet.sweep.hoststatus import HostStatus, Phase
from fleet.sweep.shards import place_moved

if TYPE_CHECKING:  # the display's: the balancer only tells it what moved
    from fleet.sweep.events import SweepProgress

log = logging.getLogger("fleet.sweep")


class LoopContext(Protocol):
    """What the balancer reads of the sweep a loop runs in (fleet.sweep.context.SweepContext)."""

    @property
    def stop(self) -> threading.Event: ...

    @property
    def poll_interval_s(self) -> float: ...


class HostLoop(Protocol):
    """What the balancer reads of one host's loop (fleet.sweep.driver.HostDriver)."""

    @property
    def host(self) -> Host: ...

    @property
    def status(self) -> HostStatus: ...

    @property
    def ctx(self) -> LoopContext: ...

    def queued(self) -> list[ServerSpec]: ...

    def orphans(self) -> list[tuple[ServerSpec, list[str]]]: ...

    def _remaining(self) -> list[tuple[ServerSpec, list[str]]]: ...


@dataclass(frozen=True)
class Move:
    """Runs handed from one host to another, for the summary."""

    source: str
    target: str
    server_id: str
    runs: tuple[str, ...]
    why: str  # "tail" (queued servers to a host that ran dry) or "lost: ..." / "failed: ..."


class Balancer:
    """Moves work between the hosts of one sweep, one mechanism for two cases:
    - the tail: a host whose agent has run dry asks for queued servers of the host with the most
      work left; that host's agent releases those it has not started (`HostDriver.hand_over`);
    - a host given up on (lost, failed): every run it has not brought back goes to a live host.
    Moved servers get the new host's GPUs, port and launch command (`shards.place_moved`). A run
    no live host can take is reported as not run, with why. Thread-safe: every host's loop calls it."""

    def __init__(
        self,
        sweep_id: str,
        hosts: Mapping[str, Host],
        hardware: Mapping[str, Hardware],
        planned: Callable[[str], PlannedServer | None],
        seconds: Callable[[str, Sequence[str]], float],
        *,
        exclusive: bool = False,
        progress: SweepProgress | None = None,
        take_pending: Callable[[str, int], list[PlannedServer]] | None = None,
    ) -> None:
        self.sweep_id = sweep_id
        self.hosts = dict(hosts)
        self.hardware = dict(hardware)
        self._planned = planned
        self._seconds = seconds  # (server id, run ids) -> estimated wall seconds on its host
        self.exclusive = exclusive
        self.progress = progress
        self._take_pending = take_pending  # a host's fixed variants not yet shipped (SweepFixer.take_pending)
        self._cond = threading.Condition()
        self._drivers: dict[str, HostLoop] = {}
        self._active: set[str] = set()  # loops that may still produce or take work
        self._idle: set[str] = set()  # agents run dry, waiting for work
        self._asks: dict[str, dict[str, str]] = {}  # donor -> server id -> the host that asked
        self._incoming: dict[str, list[tuple[PlannedServer, str]]] = {}  # host -> (server to run, why)
        self.moves: list[Move] = []
        self._moved: set[str] = set()  # servers moved once (the tail takes them no further)
        self.not_run: dict[str, str] = {}  # run id -> why it ran nowhere

    # ---------------------------------------------------------------- every host's loop

    def register(self, driver: HostLoop) -> None:
        with self._cond:
            self._drivers[driver.host.name] = driver
            self._active.add(driver.host.name)

    def left(self, driver: HostLoop) -> None:
        """A loop that ended with its share done (or detached): it takes no more work."""
        with self._cond:
            name = driver.host.name
            self._active.discard(name)
            self._idle.discard(name)
            self._reroute_incoming(name)
            self._cond.notify_all()

    def gone(self, driver: HostLoop, why: str) -> None:
        """A host given up on: what it has not brought back (and what was on its way to it) moves."""
        with self._cond:
            name = driver.host.name
            self._active.discard(name)
            self._idle.discard(name)
            self._asks.pop(name, None)  # it can answer no more: its orphans below include those servers
            for asks in self._asks.values():
                for server_id in [s for s, taker in asks.items() if taker == name]:
                    del asks[server_id]  # no longer wanted there; the donor keeps it (it never released it)
            reason = f"{driver.status.phase.value}: {why}"[:300]
            for spec, runs in driver.orphans():
                self._route(name, spec.server_id, runs, reason)
            self._reroute_incoming(name)
            self._cond.notify_all()

    def adopt(self, server_id: str, run_ids: Sequence[str], why: str) -> None:
        """Runs no host holds (a stopped controller was moving them): to a live host, as a lost host's."""
        with self._cond:
            self._route("", server_id, run_ids, why)
            self._cond.notify_all()

    # ---------------------------------------------------------------- the donor's side

    def asked_of(self, donor: str) -> set[str]:
        with self._cond:
            return set(self._asks.get(donor, {}))

    def answered(self, driver: HostLoop, moving: list[tuple[ServerSpec, list[str]]], kept: set[str]) -> None:
        """The donor's agent answered: `moving` (released, with their runs still to do) go to the hosts that asked."""
        with self._cond:
            name = driver.host.name
            asks = self._asks.get(name, {})
            for spec, runs in moving:
                taker = asks.pop(spec.server_id, None)
                self._route(name, spec.server_id, runs, "tail", prefer=taker)
            for server_id in kept:
                asks.pop(server_id, None)
            self._cond.notify_all()

    # ---------------------------------------------------------------- the taker's side

    def wait_for_work(self, driver: HostLoop) -> list[ServerSpec]:
        """Block until work comes for this host (servers placed on it), or until no host can
        produce any (every loop idle or ended, nothing asked, nothing on its way): then []."""
        name = driver.host.name
        with self._cond:
            # Asked of this host after its loop answered the last time: never written (its loop
            # writes the requests, and it is here), and its agent has ended, so none is queued there.
            self._asks.pop(name, None)
            self._idle.add(name)  # until work comes, or its loop has left (`left`): never busy in between
            while not driver.ctx.stop.is_set():
                incoming = self._incoming.pop(name, None)
                if incoming:
                    self._idle.discard(name)
                    try:
                        return self._place(driver, incoming)
                    except ValueError as exc:  # routed by GPU count, so not expected: said, never dropped
                        for planned, why in incoming:
                            for run in planned.runs:
                                self.not_run[run.id] = f"{why}; {exc}"
                        return []
                if not self._asks_by(name):
                    self._ask_for(name)
                if self._settled():
                    self._cond.notify_all()
                    return []
                self._cond.wait(min(1.0, driver.ctx.poll_interval_s))
            return []

    # ---------------------------------------------------------------- inside the lock

    def _settled(self) -> bool:
        busy = self._active - self._idle
        return not busy and not any(self._asks.values()) and not any(self._incoming.values())

    def _asks_by(self, taker: str) -> bool:
        return any(t == taker for asks in self._asks.values() for t in asks.values())

    def _ask_for(self, taker: str) -> None:
        """Ask the host with the most work left for queued servers, as many as make both end
        about together (by the plan's estimates)."""
        gpus = self.hosts[taker].gpus.count
        if self._take_pending is not None:
            # Fixed variants waiting for a busy host's next round would start only once it has
            # finished: a host that ran dry runs them now.
            for name in sorted(self._active - self._idle - {taker}):
                for planned in self._take_pending(name, gpus):
                    self._route(name, planned.config.id, [r.id for r in planned.runs], "repair", prefer=taker)
            if self._incoming.get(taker):
                return
        best: tuple[float, str, list[ServerSpec]] | None = None
        # (Exclusive isolation: a host runs one server at a time, so its work is the plain sum.)
        for name in self._active - self._idle:
            donor = self._drivers[name]
            if donor.status.phase is not Phase.RUNNING or self._asks.get(name):
                continue
            # A server moved once stays where it went: no back and forth between two hosts.
            queued = [s for s in donor.queued() if len(s.gpus) <= gpus and s.server_id not in self._moved]
            if not queued:
                continue
            left = self._work_left(donor)
            if best is None or left > best[0]:
                best = (left, name, queued)
        if best is None:
            return
        left, donor_name, queued = best
        taken, longest, chosen = 0.0, 0.0, []
        for spec in reversed(queued):  # the end of its queue: what it would start last
            seconds = self._seconds(spec.server_id, [r.run_id for r in spec.runs])
            finish = max(taken + self._share(taker, spec, seconds), longest, seconds)
            if finish <= left - self._share(donor_name, spec, seconds):
                chosen.append(spec.server_id)
                taken, longest = taken + self._share(taker, spec, seconds), max(longest, seconds)
                left -= self._share(donor_name, spec, seconds)
        if chosen:
            log.info("%s ran dry: asking %s for %s", taker, donor_name, chosen)
            self._asks.setdefault(donor_name, {}).update({server_id: taker for server_id in chosen})

    def _share(self, host: str, spec: ServerSpec, seconds: float) -> float:
        """The wall time a server adds to a host's work: all of it where servers run one at a time
        (exclusive), else its GPU time spread over the host's GPUs."""
        return seconds if self.exclusive else seconds * len(spec.gpus) / max(1, self.hosts[host].gpus.count)

    def _work_left(self, driver: HostLoop) -> float:
        """Estimated wall seconds of the runs without a result on a host."""
        name = driver.host.name
        return sum(self._share(name, spec, self._seconds(spec.server_id, runs)) for spec, runs in driver._remaining())

    def _route(self, source: str, server_id: str, runs: Sequence[str], why: str, prefer: str | None = None) -> None:
        """Send runs of a server to a live host: `prefer` if it can take them, else the live host
        with the least work left that has enough GPUs; with none, the runs are reported not run."""
        planned = self._planned(server_id)
        if planned is None:
            for run_id in runs:
                self.not_run[run_id] = f"{why}; server {server_id} is not in this controller's plan, so it cannot move"
            return
        planned = replace(planned, runs=tuple(r for r in planned.runs if r.id in set(runs)))
        tp = planned.config.tp
        live = [n for n in self._active if n != source and self.hosts[n].gpus.count >= tp]
        if prefer in live:
            target: str | None = prefer
        else:
            target = min(live, key=lambda n: (n not in self._idle, self._work_left(self._drivers[n]), n), default=None)
        if target is None:
            for run in planned.runs:
                self.not_run[run.id] = f"{why}; no live host with {tp} GPUs to take it"
            log.error("%s: %d runs of %s run nowhere: %s", source, len(planned.runs), planned.config.label, why)
            return
        self._incoming.setdefault(target, []).append((planned, why))
        self._moved.add(server_id)
        self.moves.append(Move(source, target, server_id, tuple(r.id for r in planned.runs), why))
        if self.progress is not None:
            self.progress.moved(source, target, tuple(r.id for r in planned.runs), server_id=server_id, label=planned.config.label, why=why)

    def _reroute_incoming(self, name: str) -> None:
        for planned, why in self._incoming.pop(name, []):
            self.moves[:] = [m for m in self.moves if not (m.target == name and m.server_id == planned.config.id)]
            self._route(name, planned.config.id, [r.id for r in planned.runs], why)

    def _place(self, driver: HostLoop, incoming: list[tuple[PlannedServer, str]]) -> list[ServerSpec]:
        """Servers on their way to an idle host: on its GPUs, with its launch commands."""
        name = driver.host.name
        merged: dict[str, PlannedServer] = {}
        for planned, _ in incoming:
            have = merged.get(planned.config.id)
            merged[planned.config.id] = replace(have, runs=have.runs + planned.runs) if have else planned
        seconds = {sid: self._seconds(sid, [r.id for r in p.runs]) for sid, p in merged.items()}
        return place_moved(list(merged.values()), self.hosts[name], self.hardware.get(name), self.sweep_id, seconds, exclusive=self.exclusive)
