"""The sweep loop of one host: ship, start, watch, recover, repair, until its share is done.

The agent does the work on the host, detached from SSH; the loop talks to it only through the
`AgentChannel` (short, bounded calls) and decides what to do about what it sees:
- a new boot id means the host rebooted: re-provision (the model is re-staged from the cache),
  ship again and restart the agent, which skips the runs already finished;
- an agent that died is restarted, up to `MAX_AGENT_RESTARTS` times;
- results pulled back are reviewed by the sweep's fixer (`review`); a fixed variant goes to the
  running agent, appended to its shard (`grow_live`; fleet.host.contract.shard, growth), so it
  starts on the next GPUs that free; when the agent has finished, a repair round (`repair_round`)
  extends the shard with what could not be appended (more runs for a server it has), and with what
  was appended too late for that agent to see, and starts it again;
- the stop event detaches the loop, leaving the agent working;
- a host unreachable for `host_lost_after_s` is declared lost (and one the loop gave up on,
  failed): what it had finished and was pulled is kept, its other runs go to the live hosts
  through the `Balancer`, and nothing is pulled from it again, so a late result there never
  makes a second one;
- a host whose agent has run dry takes queued servers from the busiest host's shard, through the
  hand-over of `fleet.host.contract.shard` (asked, answered by that host's agent, then moved).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.errors import FleetError, TransportError
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import SweepDir
from fleet.host.contract.shard import HandoverRequest, ServerSpec, Shard, without_servers
from fleet.inventory import Host
from fleet.plan import Hardware, PlannedServer
from fleet.playbook import Playbook
from fleet.provision.provision import ProvisionOptions, provision_host
from fleet.retry import CONNECT, TRANSFER, WAIT_FOR_REBOOT, RetryPolicy, retrying
from fleet.sweep.channel import AgentChannel
from fleet.sweep.fixing import SweepFixer
from fleet.sweep.hoststatus import AGENT_END_STATES, HostStatus, Phase
from fleet.sweep.ledger import ResultLedger, host_ledger
from fleet.sweep.shards import place_moved
from fleet.transport.base import Transport

if TYPE_CHECKING:  # events.py builds on this module's HostStatus
    from fleet.sweep.events import SweepProgress

log = logging.getLogger("fleet.sweep")

MAX_AGENT_RESTARTS = 5


# A controller folder that cannot take a file: full, read-only, over quota.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})


class ResultsFolderError(FleetError):
    """The controller cannot write its results folder: the sweep stops (the agents work on, their
    results stay on the hosts) and can be resumed once there is room."""


def unwritable(directory: Path) -> OSError | None:
    """Why `directory` (or the nearest folder of it that exists) cannot take a small file, or None."""
    folder = directory
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    probe = folder / f".fleet-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(probe, "wb") as handle:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
        return None
    except OSError as exc:
        return exc if exc.errno in DISK_ERRNOS else None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass


def folder_error(directory: Path, problem: OSError) -> ResultsFolderError:
    return ResultsFolderError(
        f"{directory}: the results folder cannot be written ({problem.strerror or problem}): the sweep stopped here; "
        "the agents work on and keep their results on the hosts; make room, then `fleet sweep --resume`"
    )


# Default of `limits.host_lost_after_s`: longer than a GPU host's reboot (BIOS, driver, sshd),
# short enough that a host gone for good holds the sweep minutes, not forever.
HOST_LOST_AFTER_S = 600.0


@dataclass(frozen=True)
class SweepContext:
    """What the loops of every host of one sweep share (one per `fleet sweep` or resume)."""

    directory: Path  # results/<sweep-id>/ on the controller
    playbook: Playbook
    provision_options: ProvisionOptions  # for re-provisioning after a reboot
    bundle_dir: Path  # the agent bundle shipped to every host
    poll_interval_s: float = 2.0
    stop: threading.Event = field(default_factory=threading.Event)
    fixer: SweepFixer | None = None
    sleep: Callable[[float], None] = time.sleep  # retry back-off; tests pass a no-op
    progress: SweepProgress | None = None  # events with elapsed time and ETA, for the display
    host_lost_after_s: float = HOST_LOST_AFTER_S  # unreachable this long (since the last answer): lost
    balancer: Balancer | None = None  # moves work between the hosts (None: each host keeps its share)
    folder_errors: list[str] = field(default_factory=list)  # a host's loop could not write results here

    @property
    def sweep_id(self) -> str:
        return self.directory.name


class HostDriver:
    """The loop of one host. `drive()` returns when the share is done, failed, lost or detached."""

    def __init__(self, ctx: SweepContext, host: Host, shard: Shard, transport: Transport, ledger: ResultLedger | None = None) -> None:
        self.ctx = ctx
        self.host = host
        # The one reader of what this host sends back (untrusted): each result read once, checked
        # against the sweep and the runs any shard of this host held, a bad file named once and
        # never counted.
        self.ledger = ledger or host_ledger(ctx.directory, host.name, ())
        self.shard = shard
        self.status = HostStatus(host.name, total=len(shard.runs))
        self.channel = AgentChannel(host, ctx.sweep_id, transport, sleep=ctx.sleep, on_link_drop=self._link_dropped, max_retry_s=ctx.host_lost_after_s)
        self.local_dir = ctx.directory / host.name
        self._review_cursor = 0
        self._rejection_cursor = 0
        self._pushed_quarantine: dict[str, str] = {}
        self.done_runs: set[str] = self._local_results()  # runs with a result pulled here
        self._asked: set[str] = set()  # servers asked back (handover.json, cumulative)
        self._last_contact = time.monotonic()
        self._pull_failing_since: float | None = None
        self._rerun_unreadable: set[str] = set()  # runs whose pulled result could not be read, run again once
        self._rerun_missing: set[str] = set()  # runs an agent ended without a result for, run again once
        self._grown: set[str] = set()  # runs appended to a running agent's shard, until an agent has ended after them

    @property
    def shard(self) -> Shard:
        return self._shard

    @shard.setter
    def shard(self, shard: Shard) -> None:
        self._shard = shard
        self.ledger.expect(run.run_id for _, run in shard.runs)

    def _link_dropped(self) -> None:
        self.status.link_drops += 1

    def _observe(self) -> None:
        """Let the progress display see this host's status after a step (it emits what changed)."""
        if self.ctx.progress is not None:
            self.ctx.progress.observe(self.status, self.shard, self.ledger)

    def _local_results(self) -> set[str]:
        """The runs with a result file pulled here (read or rejected), after a fresh look; each
        rejected file is named once, here."""
        self.ledger.refresh()
        rejections, self._rejection_cursor = self.ledger.rejections(self._rejection_cursor)
        for _, why in rejections:
            # Never guessed at nor counted: a run of this host's shard is redone (rerun_unreadable)
            # and its new result comes over the bad copy; anything else stays aside, named.
            self.status.last_error = f"not a result fleet can read: {why}"[:500]
            log.error("%s: %s", self.host.name, self.status.last_error)
        return self.ledger.present

    # ------------------------------------------------------------------------------ the loop

    def drive(self) -> HostStatus:
        balancer = self.ctx.balancer
        if balancer is not None:
            balancer.register(self)
        try:
            self.start()
            self.watch()
        except (ResultsFolderError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno not in DISK_ERRNOS:
                raise
            error = exc if isinstance(exc, ResultsFolderError) else folder_error(self.ctx.directory, exc)
            # Not the host's fault: every loop stops, the agents work on, a resume picks it all up.
            self.status.phase = Phase.DETACHED
            self.status.last_error = str(error)
            self.ctx.folder_errors.append(str(error))
            self.ctx.stop.set()
            log.error("%s: %s", self.host.name, error)
        except FleetError as exc:
            self.status.phase = Phase.FAILED
            self.status.last_error = str(exc)
            log.error("%s: %s", self.host.name, exc)
        if balancer is not None and self.status.phase in (Phase.FAILED, Phase.LOST):
            # Given up: nothing is pulled from it again; what it has not brought back runs elsewhere.
            balancer.gone(self, self.status.last_error)
        elif balancer is not None:
            balancer.left(self)
        if self.status.phase in (Phase.FAILED, Phase.LOST):
            self.stop_agent()
        self._observe()
        return self.status

    def stop_agent(self) -> None:
        """A host given up on keeps none of fleet's processes where it can still be reached: its
        agent (and so its servers) is stopped. Its runs have gone elsewhere already: what it
        finishes meanwhile is never pulled (fleet.sweep.record.GivenUp.excludes)."""
        try:
            self.channel.stop_agent()
        except FleetError as exc:
            log.warning("%s: given up, and its agent could not be stopped (it stops by itself at its shard's end): %s", self.host.name, exc)

    def start(self) -> None:
        """Ship, recover first if the host rebooted while no controller watched, start the agent."""
        self.status.phase = Phase.SHIPPING
        self._observe()
        self.ship()
        state = self.channel.poll()
        if state.agent_alive:
            # A resume that finds the agent at work: it may end before it reads the shard just put.
            self._grown.update(run.run_id for _, run in self.shard.runs if run.run_id not in self.done_runs)
        self.status.boot_id = state.boot_id
        agent_boot = state.progress.boot_id if state.progress is not None else ""
        if agent_boot and agent_boot != state.boot_id and not state.agent_alive:
            self.recover_from_reboot()
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        self._observe()

    def _poll_policy(self, policy: RetryPolicy = CONNECT) -> RetryPolicy:
        """The loop's calls (poll, pull, quarantine push) retry until the host would be declared
        lost, not later: a host powered off mid-pull was noticed minutes late (TRANSFER's 30 min)."""
        left = self.ctx.host_lost_after_s - (time.monotonic() - self._last_contact)
        return replace(policy, max_delay_s=max(1.0, min(policy.max_delay_s, left)))

    def watch(self) -> None:
        pulled_files = -1
        self._last_contact = time.monotonic()
        while not self.ctx.stop.is_set():
            try:
                state = self.channel.poll(self._poll_policy())
            except TransportError as exc:
                if not exc.transient:
                    # A changed host key or refused credentials: no retry can mend it, and waiting for
                    # the lost-host deadline would keep knocking with a key fleet must never accept.
                    # Fail closed at once: given up like a lost host (never pulled again; its runs move).
                    self.status.phase = Phase.LOST
                    self.status.last_error = f"given up at once, fleet does not retry this: {exc}"
                    log.error("%s: %s", self.host.name, self.status.last_error)
                    return
                silent = time.monotonic() - self._last_contact
                self.status.last_error = f"unreachable for {silent:.0f} s: {exc}"
                if silent >= self.ctx.host_lost_after_s:
                    self.status.phase = Phase.LOST
                    self.status.last_error = f"lost: unreachable for {silent:.0f} s (limits.host_lost_after_s {self.ctx.host_lost_after_s:g} s): {exc}"
                    log.error("%s: %s", self.host.name, self.status.last_error)
                    return
                self.status.phase = Phase.UNREACHABLE
                self._observe()
                self.ctx.stop.wait(self.ctx.poll_interval_s)
                continue
            self._last_contact = time.monotonic()
            self.status.phase = Phase.RUNNING
            if self.status.boot_id and state.boot_id and state.boot_id != self.status.boot_id:
                self.status.boot_id = state.boot_id
                self.recover_from_reboot()
                self.ship()
                self.channel.start_agent()
                self.status.phase = Phase.RUNNING
                self._observe()
                continue
            self.status.boot_id = state.boot_id or self.status.boot_id
            self.status.absorb(state.progress)
            self.status.total = len(self.shard.runs)  # the agent's count still has what was handed over
            if state.result_files != pulled_files and self.pull():
                pulled_files = state.result_files
            agent_state = state.progress.state if state.progress is not None else None
            ended = AGENT_END_STATES.get(agent_state) if agent_state is not None else None
            self.review(agent_running=state.agent_alive and ended is None)
            over = ended is not None and not state.agent_alive
            settled = self.hand_over(agent_ended=over)
            if over and not (settled and self.pull()):
                self.ctx.stop.wait(self.ctx.poll_interval_s)  # its end is judged on a complete pull and hand-over only
                continue
            if over:
                assert ended is not None
                self.review()
                if ended is Phase.FINISHED and (self.rerun_unreadable() or self.repair_round() or self.rerun_missing() or self.take_work()):
                    pulled_files = -1
                    self._observe()
                    continue
                if ended is Phase.FINISHED and not self.ctx.stop.is_set():
                    lost = self.runs_without_answer()
                    if lost:
                        # Run twice and still no result: an agent error, never a finished share.
                        # Given up like a failed host: its runs without a result go to a live
                        # host, or are named not run, with this reason (Balancer.gone).
                        self.status.last_error = (
                            f"the agent ended twice with runs without a result ({', '.join(lost[:5])}{', ...' if len(lost) > 5 else ''}): "
                            f"{self.status.last_error or 'no error given'}"
                        )[:500]
                        log.error("%s: %s", self.host.name, self.status.last_error)
                        ended = Phase.FAILED
                # STOPPED: someone stopped it on purpose (a STOP file, SIGTERM): not a crash to undo.
                self.status.phase = Phase.DETACHED if self.ctx.stop.is_set() else ended
                self._observe()
                return
            if not state.agent_alive and state.progress is not None:
                self.restart_agent(agent_state)
            self._observe()
            self.ctx.stop.wait(self.ctx.poll_interval_s)
        self.status.phase = Phase.DETACHED
        self._observe()

    # ------------------------------------------------------------------------------ hand-over

    def queued(self) -> list[ServerSpec]:
        """Servers of the shard its agent has not started, as far as this controller knows (the
        agent has the last word), that have runs to do and are not asked back already."""
        started = set(self.status.servers)
        return [
            s for s in self.shard.servers
            if s.server_id not in started and s.server_id not in self._asked and not s.skip_reason
            and s.runs and not any(r.run_id in self.done_runs for r in s.runs)
        ]  # fmt: skip

    def hand_over(self, agent_ended: bool) -> bool:
        """Ask the agent for the servers another host wants, and pass on what it releases. True
        when nothing asked of this host is left unanswered."""
        balancer = self.ctx.balancer
        if balancer is None:
            return True
        wanted = balancer.asked_of(self.host.name)
        if not wanted:
            return True
        try:
            if wanted - self._asked:
                asked = self._asked | wanted
                self.channel.ask_handover(HandoverRequest(tuple(sorted(asked))))
                self._asked = asked
            answer = self.channel.handover_answer()
        except TransportError as exc:
            # The link, for now: the request is rewritten and the answer read at the next poll
            # (the host's poll decides whether it is lost; until then nothing moves).
            log.warning("%s: hand-over: %s; trying again at the next poll", self.host.name, exc)
            return False
        answered = wanted & answer.answered
        if agent_ended:
            # An agent that has ended started everything it was going to: what it did not answer, it ran.
            answered = wanted
        if not answered:
            return False
        released = answered & set(answer.released)
        if released and not self.pull():
            return False  # every result the released servers had (an earlier agent's) is here before they move: next poll
        moving = self._remaining(released)
        self.shard = self._shard_without(released)
        self._save_shard()
        self.status.total = len(self.shard.runs)
        balancer.answered(self, moving, kept=answered - released)
        return answered == wanted

    def _remaining(self, server_ids: set[str] | None = None) -> list[tuple[ServerSpec, list[str]]]:
        """Servers (all, or these) with the ids of their runs that have no result pulled here."""
        self.done_runs = self._local_results()
        out = []
        for server in self.shard.servers:
            if server_ids is not None and server.server_id not in server_ids:
                continue
            todo = [r.run_id for r in server.runs if r.run_id not in self.done_runs]
            if todo:
                out.append((server, todo))
        return out

    def _shard_without(self, server_ids: set[str]) -> Shard:
        """The shard less the runs that move: a server keeps the runs it has results for."""
        kept = replace(self.shard, servers=[
            replace(s, runs=[r for r in s.runs if r.run_id in self.done_runs]) if s.server_id in server_ids else s for s in self.shard.servers
        ])  # fmt: skip
        return without_servers(kept, {s.server_id for s in kept.servers if s.server_id in server_ids and not s.runs})

    def orphans(self) -> list[tuple[ServerSpec, list[str]]]:
        """What a host given up on leaves: every run without a result pulled here."""
        return self._remaining()

    def take_work(self) -> bool:
        """The agent has run dry: take servers handed over from other hosts (queued there, or left
        by a lost host), extend the shard, ship it and start the agent. False when the sweep has
        no more work for this host."""
        balancer = self.ctx.balancer
        if balancer is None:
            return False
        self.status.phase = Phase.FINISHED
        self._observe()
        incoming = balancer.wait_for_work(self)
        if not incoming:
            return False
        given_back = self._asked & {spec.server_id for spec in incoming}
        if given_back:
            # Servers this host once released come back to it (say, the host that took them was
            # lost): no longer asked for, so its next agent starts them (its agent is not running now).
            self._asked -= given_back
            self.channel.ask_handover(HandoverRequest(tuple(sorted(self._asked))))
        servers = {s.server_id: s for s in self.shard.servers}
        for spec in incoming:
            existing = servers.get(spec.server_id)
            if existing is not None:
                # Back where it was once (handed over and back): one server, its runs together.
                have = {r.run_id for r in existing.runs}
                spec = replace(spec, runs=[*existing.runs, *(r for r in spec.runs if r.run_id not in have)])
            servers[spec.server_id] = spec
        self.shard = replace(self.shard, servers=list(servers.values()))
        self.status.total = len(self.shard.runs)
        log.info("%s: took %d servers handed over from other hosts", self.host.name, len(incoming))
        self._save_shard()
        self.ship()
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        return True

    # ------------------------------------------------------------------------------ steps

    def ship(self) -> None:
        """Idempotent; the phase stays what the step that ships says (shipping, recovering, repairing)."""
        facts = self.ctx.directory / "hosts" / f"{self.host.name}.facts.json"
        self.channel.ship(self.ctx.bundle_dir, self.shard, facts)

    def pull(self) -> bool:
        """Bring the host's results back. False when the pull failed and the loop should try again
        at its next poll: a host that went away mid-pull (power, link) is the poll's to judge, and
        one whose pulls keep failing for `host_lost_after_s` is given up on (the error raised)."""
        try:
            self.status.pulled = self.channel.pull(self.local_dir, self._poll_policy(TRANSFER), ledger=self.ledger)
        except (FleetError, OSError) as exc:
            problem = exc if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS else unwritable(self.local_dir)
            if problem is not None:
                raise folder_error(self.ctx.directory, problem) from None
            if isinstance(exc, OSError):
                raise
            now = time.monotonic()
            self._pull_failing_since = self._pull_failing_since or now
            if now - self._pull_failing_since >= self.ctx.host_lost_after_s:
                raise
            self.status.last_error = f"pull failed, tried again at the next poll: {exc}"[:500]
            log.warning("%s: %s", self.host.name, self.status.last_error)
            return False
        self._pull_failing_since = None
        self.done_runs = self._local_results()
        return True

    def _save_shard(self) -> None:
        """The controller's copy of the shard (a resume reads it)."""
        try:
            write_json_atomic(self.local_dir / SweepDir.SHARD, json.loads(self.shard.to_json()))
        except OSError as exc:
            if exc.errno in DISK_ERRNOS:
                raise folder_error(self.ctx.directory, exc) from None
            raise

    def review(self, agent_running: bool = False) -> None:
        """Hand the results pulled since the last review to the fixer; the fixed variants to the
        agent if it runs (`grow_live`); push a changed quarantine."""
        fixer = self.ctx.fixer
        if fixer is None:
            return
        fresh, self._review_cursor = self.ledger.accepted(self._review_cursor)
        fixer.consider(self.host.name, fresh)
        if agent_running:
            self.grow_live()
        wanted = fixer.quarantine_for(self.host.name)
        if wanted != self._pushed_quarantine:
            try:
                self.channel.push_quarantine(wanted, self._poll_policy())
            except TransportError as exc:
                # The link, for now: pushed again at the next review. Whether the host is lost is
                # the poll's to judge (a host that went away mid-push was once failed here instead).
                log.warning("%s: quarantine not pushed, trying again at the next poll: %s", self.host.name, exc)
                return
            self._pushed_quarantine = wanted

    def unreadable_results(self) -> list[str]:
        """Runs of this host's shard whose pulled result was rejected (truncated, another schema,
        forged): the agent can redo those; a file for no run of it is only named."""
        mine = {run.run_id for _, run in self.shard.runs}
        return sorted(run_id for run_id in (name.removesuffix(".json") for name in self.ledger.rejected) if run_id in mine)

    def runs_without_answer(self) -> list[str]:
        """Runs of this host's shard with no file pulled here at all: neither a result nor a
        rejected file (that one the agent redoes: `rerun_unreadable`)."""
        answered = self.ledger.present
        return sorted(run.run_id for _, run in self.shard.runs if run.run_id not in answered)

    def rerun_missing(self) -> bool:
        """An agent that ended as finished but left runs of its shard without a result (an error
        of its own: a server's thread that raised, a folder it could not write) is started again
        once for them: it runs only what has no result. What is still missing after that does not end
        the host as finished (`watch`)."""
        fresh = [run_id for run_id in self.runs_without_answer() if run_id not in self._rerun_missing]
        if not fresh:
            return False
        self._rerun_missing.update(fresh)
        self.status.last_error = f"the agent ended with {len(fresh)} runs without a result ({self.status.last_error or 'no error given'}): run again"[:500]
        log.warning("%s: %s", self.host.name, self.status.last_error)
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        return True

    def rerun_unreadable(self) -> bool:
        """A result that came back unreadable is run again, once: the agent, started again, keeps
        the bad file aside (`<run>.unreadable`) and redoes the run (host/agent/runner.py
        existing_status); the pull then brings the new one over the bad copy. One that is still
        unreadable after that is named in the summary and the sweep is not finished."""
        fresh = [run_id for run_id in self.unreadable_results() if run_id not in self._rerun_unreadable]
        if not fresh:
            return False
        self._rerun_unreadable.update(fresh)
        self.status.last_error = f"unreadable results, run again: {', '.join(fresh)}"
        log.warning("%s: %s", self.host.name, self.status.last_error)
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        return True

    def grow_live(self) -> bool:
        """Fixed variants waiting for this host, to its running agent: appended to the shard (saved
        here first: a resume ships it whole), put on the host by rename; the agent takes them in at
        its next loop and starts them as GPUs free, with no new agent. What the running agent ends
        before reading, `repair_round` ships and starts again. False when nothing was appended."""
        fixer = self.ctx.fixer
        if fixer is None:
            return False
        grown = fixer.grow(self.host.name, self.shard, self._asked, done=self.done_runs)
        if grown is None:
            return False
        appended = grown.servers[len(self.shard.servers) :]  # grow appends only (fleet.host.contract.shard.grown_servers)
        self.shard = grown
        self.status.total = len(grown.runs)
        self._save_shard()
        self._grown.update(run.run_id for server in appended for run in server.runs)
        log.info("%s: %d fixed variants to the running agent: %s", self.host.name, len(appended), ", ".join(s.label for s in appended))
        try:
            self.channel.grow(grown, appended)
        except TransportError as exc:
            # Not on the host: the next growth puts the whole shard, or the repair round after the agent ends.
            log.warning("%s: the grown shard was not put, shipped with the next one: %s", self.host.name, exc)
        return True

    def repair_round(self) -> bool:
        """Fixed variants of this host's failed runs: extend the shard, ship it, start the agent;
        also when runs appended to the last agent's shard (`grow_live`) came too late for it (no
        result). False when there is nothing to repair (the share is finished)."""
        fixer = self.ctx.fixer
        if fixer is None:
            return False
        extended = fixer.next_round(self.host.name, self.shard)
        in_shard = {run.run_id for _, run in self.shard.runs}  # what was handed over since is not this host's
        late = sorted(run_id for run_id in self._grown if run_id in in_shard and run_id not in self.done_runs)
        self._grown.clear()  # once: an agent started on the whole shard sees them all
        if extended is None and not late:
            return False
        self.status.phase = Phase.REPAIRING
        if late:
            log.info("%s: %d runs appended too late for the agent that ended: shipped again", self.host.name, len(late))
        if extended is not None:
            log.info("%s: repair round: %d runs added", self.host.name, len(extended.runs) - len(self.shard.runs))
            self.shard = extended
            self.status.total = len(extended.runs)
            self._save_shard()
        self.ship()
        self.channel.start_agent()
        self.status.phase = Phase.RUNNING
        return True

    def recover_from_reboot(self) -> None:
        """The host rebooted: its fast dir is empty and the agent is gone. Stage again."""
        self.status.phase = Phase.RECOVERING
        self.status.reboots += 1
        log.warning("%s: rebooted (boot id %s); re-staging and restarting the agent", self.host.name, self.status.boot_id)
        report = retrying(
            WAIT_FOR_REBOOT,
            self.host.name,
            lambda: provision_host(self.host, self.ctx.playbook, self.ctx.provision_options, transport=self.channel.transport),
            idempotent=True,
            sleep=self.ctx.sleep,
        )
        if report.status == "failed":
            raise FleetError(f"{self.host.name}: after a reboot: {report.reason}")

    def restart_agent(self, agent_state: object) -> None:
        if self.status.agent_restarts >= MAX_AGENT_RESTARTS:
            raise FleetError(f"{self.host.name}: the agent stopped ({agent_state}) {self.status.agent_restarts} times; giving up")
        self.status.agent_restarts += 1
        log.warning("%s: agent not running (state %s); restarting it", self.host.name, agent_state)
        self.channel.start_agent()


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
        self._drivers: dict[str, HostDriver] = {}
        self._active: set[str] = set()  # loops that may still produce or take work
        self._idle: set[str] = set()  # agents run dry, waiting for work
        self._asks: dict[str, dict[str, str]] = {}  # donor -> server id -> the host that asked
        self._incoming: dict[str, list[tuple[PlannedServer, str]]] = {}  # host -> (server to run, why)
        self.moves: list[Move] = []
        self._moved: set[str] = set()  # servers moved once (the tail takes them no further)
        self.not_run: dict[str, str] = {}  # run id -> why it ran nowhere

    # ---------------------------------------------------------------- every host's loop

    def register(self, driver: HostDriver) -> None:
        with self._cond:
            self._drivers[driver.host.name] = driver
            self._active.add(driver.host.name)

    def left(self, driver: HostDriver) -> None:
        """A loop that ended with its share done (or detached): it takes no more work."""
        with self._cond:
            name = driver.host.name
            self._active.discard(name)
            self._idle.discard(name)
            self._reroute_incoming(name)
            self._cond.notify_all()

    def gone(self, driver: HostDriver, why: str) -> None:
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

    def answered(self, driver: HostDriver, moving: list[tuple[ServerSpec, list[str]]], kept: set[str]) -> None:
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

    def wait_for_work(self, driver: HostDriver) -> list[ServerSpec]:
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

    def _work_left(self, driver: HostDriver) -> float:
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

    def _place(self, driver: HostDriver, incoming: list[tuple[PlannedServer, str]]) -> list[ServerSpec]:
        """Servers on their way to an idle host: on its GPUs, with its launch commands."""
        name = driver.host.name
        merged: dict[str, PlannedServer] = {}
        for planned, _ in incoming:
            have = merged.get(planned.config.id)
            merged[planned.config.id] = replace(have, runs=have.runs + planned.runs) if have else planned
        seconds = {sid: self._seconds(sid, [r.id for r in p.runs]) for sid, p in merged.items()}
        return place_moved(list(merged.values()), self.hosts[name], self.hardware.get(name), self.sweep_id, seconds, exclusive=self.exclusive)


def drive_all(drivers: Sequence[HostDriver]) -> list[threading.Thread]:
    threads = [threading.Thread(target=d.drive, name=f"fleet-sweep-{d.host.name}", daemon=True) for d in drivers]
    for thread in threads:
        thread.start()
    return threads
