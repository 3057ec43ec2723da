"""The sweep loop of one host: ship, start, watch, recover, repair, until its share is done.

The agent does the work on the host, detached from SSH; the loop talks to it only through the
`AgentChannel` (short, bounded calls) and decides what to do about what it sees:
- a new boot id means the host rebooted: re-provision (the model is re-staged from the cache),
  ship again and restart the agent, which skips the runs already finished;
- an agent that died is restarted, up to `MAX_AGENT_RESTARTS` times;
- results are pulled at each poll that sees new ones, the logs with them at most every
  `folder_pull_every_s` (fleet.sweep.context), everything at the host's end;
- results pulled back are reviewed by the sweep's fixer (`review`); a fixed variant goes to the
  running agent, appended to its shard (`grow_live`; fleet.host.contract.shard, growth), so it
  starts on the next GPUs that free; when the agent has finished, a repair round (`repair_round`)
  extends the shard with what could not be appended (more runs for a server it has), and with what
  was appended too late for that agent to see, and starts it again;
- the stop event detaches the loop, leaving the agent working;
- a host unreachable for `host_lost_after_s` is declared lost (and one the loop gave up on,
  failed): what it had finished and was pulled is kept, its other runs go to the live hosts
  through the `Balancer` (fleet.sweep.balancer), and nothing is pulled from it again, so a late
  result there never makes a second one;
- a host whose agent has run dry takes queued servers from the busiest host's shard, through the
  hand-over of `fleet.host.contract.shard` (asked, answered by that host's agent, then moved).

Each change of the host's phase is a named transition of `fleet.sweep.phases`; what the loops of
one sweep share is its `SweepContext` (fleet.sweep.context).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from fleet.errors import FleetError, TransportError
from fleet.host.atomic import write_json_atomic
from fleet.host.agent.outcome import AGENT_PAUSED
from fleet.host.contract import SweepDir
from fleet.host.contract.progress import AgentError
from fleet.host.contract.shard import HandoverRequest, ServerSpec, Shard, without_servers
from fleet.inventory import Host
from fleet.provision.provision import provision_host
from fleet.retry import CONNECT, TRANSFER, WAIT_FOR_REBOOT, RetryPolicy, retrying
from fleet.sweep import phases
from fleet.sweep.channel import AgentChannel
from fleet.sweep.context import SweepContext
from fleet.sweep.hoststatus import AGENT_END_STATES, HostStatus, Phase
from fleet.sweep.ledger import ResultLedger, host_ledger
from fleet.sweep.resultsfolder import DISK_ERRNOS, folder_error, unwritable
from fleet.errors import ResultsFolderError
from fleet.transport.base import Transport

log = logging.getLogger("fleet.sweep")

MAX_AGENT_RESTARTS = 5


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
        self.status = HostStatus(host.name, total=shard.run_count)
        self.channel = AgentChannel(host, ctx.sweep_id, transport, sleep=ctx.sleep, on_link_drop=self._link_dropped, max_retry_s=ctx.host_lost_after_s)
        self.local_dir = ctx.directory / host.name
        self._review_cursor = 0
        self._rejection_cursor = 0
        self._pushed_quarantine: dict[str, str] = {}
        self.done_runs: set[str] = self._local_results()  # runs with a result pulled here
        self._asked: set[str] = set()  # servers asked back (handover.json, cumulative)
        self._last_contact = time.monotonic()
        self._pull_failing_since: float | None = None
        self._folder_pulled_at = -math.inf  # the last pull of the whole folder (logs too), not of runs/ alone
        self._pause_said = ""  # the agent's latest pause already said (its message)
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
        """The runs with a result file pulled here (read or rejected), after a fresh look of the
        whole folder; each rejected file is named once, here."""
        self.ledger.refresh()
        return self._answered()

    def _answered(self) -> set[str]:
        """The runs with a result file pulled here, as the ledger last looked (a pull looks at
        what it brought: a whole look per pull grew with the square of the runs)."""
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
            phases.folder_unwritable(self.status, str(error))
            self.ctx.folder_errors.append(str(error))
            self.ctx.stop.set()
            log.error("%s: %s", self.host.name, error)
        except FleetError as exc:
            phases.failed(self.status, exc)
        if balancer is not None and phases.given_up(self.status):
            # Given up: nothing is pulled from it again; what it has not brought back runs elsewhere.
            balancer.gone(self, self.status.last_error)
        elif balancer is not None:
            balancer.left(self)
        if phases.given_up(self.status):
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
        phases.shipping(self.status)
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
        phases.started(self.status)
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
                if self._unanswered(exc):
                    return
                self.ctx.stop.wait(self.ctx.poll_interval_s)
                continue
            self._last_contact = time.monotonic()
            phases.answered(self.status)
            if self.status.boot_id and state.boot_id and state.boot_id != self.status.boot_id:
                self.status.boot_id = state.boot_id
                self.recover_from_reboot()
                self.ship()
                self.channel.start_agent()
                phases.started(self.status)
                self._observe()
                continue
            self.status.boot_id = state.boot_id or self.status.boot_id
            self.status.absorb(state.progress)
            self._say_pauses(state.progress.last_error if state.progress is not None else None)
            self.status.total = self.shard.run_count  # the agent's count still has what was handed over
            if state.result_files != pulled_files and self.pull(results_only=time.monotonic() - self._folder_pulled_at < self.ctx.folder_pull_every_s):
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
                self._end(ended)
                return
            if not state.agent_alive and state.progress is not None:
                self.restart_agent(agent_state)
            self._observe()
            self.ctx.stop.wait(self.ctx.poll_interval_s)
        phases.detached(self.status)
        self._observe()

    def _unanswered(self, exc: TransportError) -> bool:
        """A poll the host did not answer. True when the host is given up on (lost): at once for a
        fault no retry mends, else once it has been silent for `host_lost_after_s`."""
        if not exc.transient:
            # A changed host key or refused credentials: no retry can mend it, and waiting for
            # the lost-host deadline would keep knocking with a key fleet must never accept.
            # Fail closed at once: given up like a lost host (never pulled again; its runs move).
            phases.lost(self.status, f"given up at once, fleet does not retry this: {exc}")
            return True
        silent = time.monotonic() - self._last_contact
        self.status.last_error = f"unreachable for {silent:.0f} s: {exc}"
        if silent >= self.ctx.host_lost_after_s:
            phases.lost(self.status, f"lost: unreachable for {silent:.0f} s (limits.host_lost_after_s {self.ctx.host_lost_after_s:g} s): {exc}")
            return True
        phases.unreachable(self.status)
        self._observe()
        return False

    def _end(self, ended: Phase) -> None:
        """The agent has ended (`ended`: its end state's phase), its results pulled and nothing
        left to run again, repair or take: the host's phase for good."""
        if ended is Phase.FINISHED and not self.ctx.stop.is_set():
            lost = self.runs_without_answer()
            if lost:
                # Run twice and still no result: an agent error, never a finished share.
                # Given up like a failed host: its runs without a result go to a live
                # host, or are named not run, with this reason (Balancer.gone).
                self.status.last_error = (f"the agent ended twice with runs without a result ({', '.join(lost[:5])}{', ...' if len(lost) > 5 else ''}): {self.status.last_error or 'no error given'}")[
                    :500
                ]
                log.error("%s: %s", self.host.name, self.status.last_error)
                ended = Phase.FAILED
        # STOPPED: someone stopped it on purpose (a STOP file, SIGTERM): not a crash to undo.
        phases.ended(self.status, ended, detached=self.ctx.stop.is_set())
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
        self.status.total = self.shard.run_count
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
        phases.ran_dry(self.status)
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
        self.status.total = self.shard.run_count
        log.info("%s: took %d servers handed over from other hosts", self.host.name, len(incoming))
        self._save_shard()
        self.ship()
        self.channel.start_agent()
        phases.started(self.status)
        return True

    # ------------------------------------------------------------------------------ steps

    def ship(self) -> None:
        """Idempotent; the phase stays what the step that ships says (shipping, recovering, repairing)."""
        facts = self.ctx.directory / "hosts" / f"{self.host.name}.facts.json"
        self.channel.ship(self.ctx.bundle_dir, self.shard, facts)

    def _say_pauses(self, error: AgentError | None) -> None:
        """Say it (once per pause) when the agent reports that it was itself stopped: the run in
        flight measured fleet's pause, not the server, and is done again (fleet.host.agent.pause)."""
        if error is None or error.error_class != AGENT_PAUSED or error.message == self._pause_said:
            return
        self._pause_said = error.message
        log.warning("%s: fleet's agent was paused (%s)", self.host.name, error.message)

    def pull(self, *, results_only: bool = False) -> bool:
        """Bring the host's results back. False when the pull failed and the loop should try again
        at its next poll: a host that went away mid-pull (power, link) is the poll's to judge, and
        one whose pulls keep failing for `host_lost_after_s` is given up on (the error raised). A
        failure an operator must fix (a shell that garbles even the relay's rsync stream, a changed
        host key, rsync gone) is raised at once: waiting would only delay its runs' move."""
        try:
            pulled_at = time.monotonic()
            self.status.pulled = self.channel.pull(self.local_dir, self._poll_policy(TRANSFER), ledger=self.ledger, results_only=results_only)
        except (FleetError, OSError) as exc:
            problem = exc if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS else unwritable(self.local_dir)
            if problem is not None:
                raise folder_error(self.ctx.directory, problem) from None
            if isinstance(exc, OSError) or (isinstance(exc, TransportError) and not exc.transient):
                raise
            now = time.monotonic()
            self._pull_failing_since = self._pull_failing_since or now
            if now - self._pull_failing_since >= self.ctx.host_lost_after_s:
                raise
            self.status.last_error = f"pull failed, tried again at the next poll: {exc}"[:500]
            log.warning("%s: %s", self.host.name, self.status.last_error)
            return False
        self._pull_failing_since = None
        if not results_only:
            self._folder_pulled_at = pulled_at
        self.done_runs = self._answered()
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
        phases.started(self.status)
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
        phases.started(self.status)
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
        self.status.total = grown.run_count
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
        phases.repairing(self.status)
        if late:
            log.info("%s: %d runs appended too late for the agent that ended: shipped again", self.host.name, len(late))
        if extended is not None:
            log.info("%s: repair round: %d runs added", self.host.name, extended.run_count - self.shard.run_count)
            self.shard = extended
            self.status.total = extended.run_count
            self._save_shard()
        self.ship()
        self.channel.start_agent()
        phases.started(self.status)
        return True

    def recover_from_reboot(self) -> None:
        """The host rebooted: its fast dir is empty and the agent is gone. Stage again."""
        phases.rebooted(self.status)
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


def drive_all(drivers: Sequence[HostDriver]) -> list[threading.Thread]:
    threads = [threading.Thread(target=d.drive, name=f"fleet-sweep-{d.host.name}", daemon=True) for d in drivers]
    for thread in threads:
        thread.start()
    return threads
