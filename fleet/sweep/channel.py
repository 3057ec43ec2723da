"""The channel to one host's agent for one sweep: short, bounded calls, and no policy.

Ship the bundle and shard, start the agent, poll it, pull its results, push the quarantine, ask
for servers back and read what it released. Each call is idempotent (or, for the start, checked
first) and retried under the transport's policies, none for longer than `max_retry_s`: the
sweep loop sets it to the time after which it calls an unreachable host lost, so no call keeps
retrying past that (a bundle push once retried for TRANSFER's 30 minutes); a call that needed
retries counts as a link drop. What to do about what a poll says -- restart,
recover from a reboot, run a repair round -- is the sweep loop's business (`fleet.sweep.driver`);
`fleet status` and `fleet fetch-logs` use this channel alone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from fleet.errors import FleetError, TransportError
from fleet.host.agent import AGENT_MODULE
from fleet.host.agent.services import EXITED, RUNNING, RUNNING_ACTIVE_STATES
from fleet.host.contract import AgentError, AgentState, ContractError, HostQuarantine, Progress, SweepDir
from fleet.host.contract.progress import Halt
from fleet.host.contract.shard import HandoverAnswer, HandoverRequest, ServerSpec, Shard
from fleet.host.failures import FailureClass
from fleet.inventory import Host, ServiceManager
from fleet.layout import agent_dir, sweep_dir
from fleet.provision.units import agent_unit_name, render_server_unit, server_unit_name
from fleet.retry import CONNECT, TRANSFER, RetryPolicy, at_most_once, retrying
from fleet.sweep.ledger import ResultLedger
from fleet.transport.base import BOOT_ID_PATH, CommandResult, Transport

log = logging.getLogger("fleet.sweep")

T = TypeVar("T")

SEPARATOR = "--fleet--"
_COUNT = re.compile(r"[0-9]{1,9}")
QUICK_S = 15.0
# How long an agent being stopped has to stop its servers before it is killed.
STOP_GRACE_S = 30.0
# rsync's "some source files vanished": a log rotated or a temp file renamed mid-pull; the next pull gets them.
RSYNC_VANISHED = 24
# rsync's "some files could not be transferred" (a host folder turned into a file, a file that
# cannot be read): the rest came. Retried as a failed pull it failed the same way at every poll
# until the host was given up, its results on it called "ran nowhere"; said once instead, and
# the results (their own transfer) still come.
RSYNC_PARTIAL = 23


@dataclass(frozen=True)
class Poll:
    progress: Progress | None  # the agent's progress.json; None before it wrote one
    boot_id: str
    agent_alive: bool
    result_files: int
    halted: str | None = None  # why the agent halted, from halt.json (where progress.json could not say it)


def agent_service_name(sweep_id: str) -> str:
    return f"fleet-agent-{sweep_id}"


def parse_poll(stdout: str, source: str = SweepDir.PROGRESS) -> Poll:
    """The agent's service status first, then the boot id, the progress file, the result files
    and the halt file.

    Status comes first on purpose: an agent that exits between the two reads is seen as exited
    with its final progress, never as "running" in its progress yet gone. A progress file that
    does not follow the contract raises `ContractError` naming `source`. An agent that halted
    where it could not write its progress (a full disk) is shown halted, with the halt file's reason.
    """
    parts = stdout.split(SEPARATOR + "\n")
    parts += [""] * (5 - len(parts))
    status_text, boot_id, progress_text, listing, halt_text = parts[:5]
    try:
        alive = json.loads(status_text).get("state") == "running" if status_text.strip() else False
    except ValueError:
        alive = False
    # Written by atomic rename: a file that does not parse was edited by hand, or comes from an
    # agent of another contract version; either way an error, never a silent "no progress".
    progress = Progress.from_json(progress_text, source) if progress_text.strip() else None
    halt = Halt.from_text(halt_text, source.replace(SweepDir.PROGRESS, SweepDir.HALT)) if halt_text.strip() else Halt(None)
    if halt.reason is not None and progress is not None and progress.state is AgentState.running:
        error = AgentError("agent", FailureClass.RESULTS_UNWRITABLE.value, halt.reason, halt.at or progress.updated_at)
        progress = replace(progress, state=AgentState.halted, last_error=error)
    # The host counts its results (a count, not their names: the poll's size and parse stay the
    # same however many results the sweep has).
    count = listing.strip() or "0"
    if not _COUNT.fullmatch(count):
        raise ContractError(source.replace(SweepDir.PROGRESS, SweepDir.RUNS), "the poll's count of result files", "a whole number", count[:40])
    return Poll(progress, boot_id.strip(), alive, int(count), halt.reason)


class AgentChannel:
    """One host's agent for one sweep. Not thread-safe (one caller at a time, like its transport)."""

    def __init__(
        self,
        host: Host,
        sweep_id: str,
        transport: Transport,
        *,
        sleep: Callable[[float], None] = time.sleep,
        on_link_drop: Callable[[], None] | None = None,
        max_retry_s: float | None = None,
    ) -> None:
        self.host = host
        self.sweep_id = sweep_id
        self.transport = transport
        self.dir = SweepDir(sweep_dir(host, sweep_id))
        self.link_drops = 0  # calls that needed retries
        self._partial_said: set[str] = set()  # partial pulls already said (rsync exit 23), by what rsync said
        self._sleep = sleep
        self._on_link_drop = on_link_drop
        self.max_retry_s = max_retry_s

    # ------------------------------------------------------------------------------ helpers

    def _bounded(self, policy: RetryPolicy) -> RetryPolicy:
        if self.max_retry_s is None or policy.max_delay_s <= self.max_retry_s:
            return policy
        return replace(policy, max_delay_s=max(1.0, self.max_retry_s))

    def _retry(self, fn: Callable[[], T], policy: RetryPolicy = CONNECT) -> T:
        """An idempotent call under a retry policy (at most `max_retry_s` of it); a call that
        needed retries counts as a link drop."""
        policy = self._bounded(policy)
        hiccups = 0

        def attempt() -> T:
            nonlocal hiccups
            try:
                return fn()
            except TransportError as exc:
                hiccups += exc.transient
                raise

        try:
            return retrying(policy, self.host.name, attempt, idempotent=True, sleep=self._sleep)
        finally:
            if hiccups:
                self.link_drops += 1
                if self._on_link_drop is not None:
                    self._on_link_drop()

    def agent_cli(self, *args: str) -> list[str]:
        return ["env", f"PYTHONPATH={agent_dir(self.host)}", self.host.engine.python, "-m", AGENT_MODULE, *args]

    def service_args(self) -> list[str]:
        if self.host.service_manager is ServiceManager.systemd:
            return [agent_unit_name(self.sweep_id).removesuffix(".service"), "--manager", "systemd"]
        return [agent_service_name(self.sweep_id), "--manager", "process", "--state-dir", self.dir.services]

    # ------------------------------------------------------------------------------ calls

    def ship(self, bundle_dir: Path, shard: Shard, host_facts: Path | None) -> None:
        """The host's lease first (this sweep's: re-taken on a resume, a repair round, after a
        reboot; `LeaseHeld` where another live sweep holds it, before anything of ours lands on the
        host), then agent code, shard, host facts and (under systemd) the server units. Idempotent."""
        # The lease's code (its provisioning models) only where a sweep ships: `status` and
        # `fetch-logs` read through this channel too, and start in less without it (issue 28).
        from fleet.provision.lease import sweep_claim, take_lease

        t = self.transport
        self._retry(lambda: take_lease(t, self.host, sweep_claim(self.sweep_id)))
        self._retry(lambda: t.run(["mkdir", "-p", self.dir.runs], timeout=QUICK_S, check=True))
        self._retry(lambda: t.rsync_push(bundle_dir, agent_dir(self.host) + "/", timeout=300, delete=True).check(), TRANSFER)
        self._put_shard(shard)
        if host_facts is not None and host_facts.exists():
            self._retry(lambda: t.put(host_facts, self.dir.host_facts, timeout=60))
        if self.host.service_manager is ServiceManager.systemd:
            self._install_server_units(shard)

    def grow(self, shard: Shard, appended: Sequence[ServerSpec]) -> None:
        """A running agent's shard, grown by `appended` (fleet.host.contract.shard.grown_servers):
        under systemd their units first (so none is started before it is installed), then the shard,
        by rename (the agent sees a whole new file or the old one). The agent is not restarted. Idempotent."""
        if self.host.service_manager is ServiceManager.systemd:
            self._install_server_units(shard, appended)
        self._put_shard(shard)

    def _put_shard(self, shard: Shard) -> None:
        # By rename (put_bytes): a running agent reads the whole new file or the old one.
        self._retry(lambda: self.transport.put_bytes(shard.to_json().encode(), self.dir.shard, timeout=60))

    def _install_server_units(self, shard: Shard, servers: Sequence[ServerSpec] | None = None) -> None:
        for server in shard.servers if servers is None else servers:
            unit = render_server_unit(
                sweep_id=shard.sweep_id,
                server_id=server.server_id,
                label=server.label,
                argv=server.argv,
                # FLEET_SERVICE marks the processes as fleet's own: a later agent may clear them as stale.
                env={**{k: v for k, v in server.env.items() if k != "CUDA_VISIBLE_DEVICES"}, "FLEET_SERVICE": server.unit_name},
                gpus=server.gpus,
                working_dir=self.dir.root,
                log_file=self.dir.path(SweepDir.LOGS, server.log_name),  # where the agent tails it
                start_timeout_s=shard.limits.server_start_timeout_s,
                gpus_env_file=self.dir.placement_env(server.unit_name),  # the agent places it (fleet.host.agent.dispatch)
            )
            assert unit.name == server_unit_name(shard.sweep_id, server.server_id)
            text, path = unit.text.encode(), unit.path
            self._retry(lambda: self.transport.put_bytes(text, path, timeout=60))
        self._retry(lambda: self.transport.run(["systemctl", "daemon-reload"], timeout=60, check=True))

    def poll_command(self) -> str:
        """One query (`Transport.query`): service status, boot id, progress file, result count, halt file."""
        return (
            f"{self._status_command()} 2>/dev/null; echo; echo {SEPARATOR}; cat {BOOT_ID_PATH}; echo {SEPARATOR}; "
            f"cat {shlex.quote(self.dir.progress)} 2>/dev/null; echo; echo {SEPARATOR}; "
            f"ls {shlex.quote(self.dir.runs)} 2>/dev/null | grep -c '[.]json$'; echo {SEPARATOR}; "
            f"cat {shlex.quote(self.dir.halt)} 2>/dev/null; true"
        )

    def _status_command(self) -> str:
        """Whether the agent runs, as the agent's `service status` prints it (the state is what
        `parse_poll` reads). Under systemd, systemd answers: `systemctl show` of the unit's
        ActiveState, mapped as the agent maps it (RUNNING_ACTIVE_STATES), with no Python start on
        the GPU host in every poll (45 ms of its CPU each: the agent's interpreter and imports)."""
        if self.host.service_manager is not ServiceManager.systemd:
            return shlex.join(self.agent_cli("service", "status", *self.service_args()))
        unit = shlex.quote(agent_unit_name(self.sweep_id))
        running, exited = (shlex.quote(json.dumps({"state": state})) for state in (RUNNING, EXITED))
        return f'case "$(systemctl show --property=ActiveState --value {unit})" in {"|".join(RUNNING_ACTIVE_STATES)}) echo {running};; *) echo {exited};; esac'

    def poll(self, policy: RetryPolicy = CONNECT) -> Poll:
        """`policy`: the sweep loop bounds the retries by the time left before it declares the host
        lost (finer than `max_retry_s`: it counts from the last answer)."""
        command = self.poll_command()
        stdout = self._retry(lambda: self.transport.query(command, timeout=QUICK_S), policy).stdout
        return parse_poll(stdout, f"{self.host.name}:{self.dir.progress}")

    def start_command(self) -> list[str]:
        if self.host.service_manager is ServiceManager.systemd:
            return self.agent_cli("service", "start", *self.service_args())
        argv = [self.host.engine.python, "-m", AGENT_MODULE, "run", "--sweep-dir", self.dir.root]
        return self.agent_cli(
            "service", "start", *self.service_args(), "--log", self.dir.agent_log, "--cwd", self.dir.root,
            "--env", f"PYTHONPATH={agent_dir(self.host)}", "--", *argv,
        )  # fmt: skip

    def start_agent(self) -> None:
        """Start the agent unless it already runs (checked first: a start is not blindly repeated)."""
        start = self.start_command()

        def running() -> bool | None:
            return True if self.poll().agent_alive else None

        def action() -> bool:
            self.transport.run(start, timeout=60, check=True)
            return True

        at_most_once(self._bounded(CONNECT), self.host.name, action, running, sleep=self._sleep)

    def pull(
        self,
        local: Path,
        policy: RetryPolicy = TRANSFER,
        skip: Sequence[str] = (),
        ledger: ResultLedger | None = None,
        *,
        results_only: bool = False,
    ) -> int:
        """Results, logs and progress of this host's share into `local` (incremental); the number
        of result files there afterwards. `skip`: more rsync excludes (a given-up host's results
        of runs that went to another host). `ledger`: the sweep loop's reader of `local`'s results
        (one reader per folder: a result is parsed once); a one-shot pull makes its own.
        `results_only`: `runs/` alone, one rsync instead of two (the sweep loop's pulls between
        two of the whole folder).

        The controller keeps the first result it has of a run: a host that ran a run again (its
        work dir lost with a reboot, a restored backup, a misbehaving agent) never overwrites a
        result pulled before, so `runs/` comes over with --ignore-existing. Only a file the
        controller could not take as a result (fleet.sweep.ledger rejected it: truncated, forged)
        is replaced, by the host's copy of that name: the re-run of a bad answer."""
        local.mkdir(parents=True, exist_ok=True)

        # Beside the host's bookkeeping, its shard.json stays there: the controller's copy is the one
        # a resume reads, and it may be ahead of the host's (servers handed over to another host are
        # never taken out there).
        excludes = (*SweepDir.PULL_EXCLUDES, f"/{SweepDir.SHARD}", *skip)
        runs_excludes = tuple(pattern.removeprefix(f"/{SweepDir.RUNS}") for pattern in skip if pattern.startswith(f"/{SweepDir.RUNS}/"))
        runs = local / SweepDir.RUNS

        def rsync(remote: str, into: Path, patterns: Sequence[str], *, keep: bool, list_written: bool = False) -> CommandResult:
            result = self.transport.rsync_pull(remote, into, timeout=600, excludes=patterns, ignore_existing=keep, list_written=list_written)
            if result.exit_code == RSYNC_PARTIAL and "change_dir" not in result.stderr:  # the folder itself missing is no partial pull
                said = " | ".join(result.stderr.strip().splitlines()[-2:])[:300]
                if said not in self._partial_said:
                    self._partial_said.add(said)
                    log.warning("%s: a pull left files out (rsync exit 23), the rest came: %s", self.host.name, said)
            elif result.exit_code != RSYNC_VANISHED:
                result.check()
            return result

        tries = 0

        def pull_once() -> None:
            nonlocal tries
            tries += 1

            def pull_results() -> CommandResult:
                return rsync(self.dir.runs + "/", runs, (*SweepDir.PULL_EXCLUDES, *runs_excludes), keep=True, list_written=True)

            if results_only:
                pulled = pull_results()
            else:
                # The two pulls write disjoint local trees (the first leaves runs/ out), so they run at
                # once: a pull takes one login's time, not two in a row (a nothing-changed fetch-logs of
                # 4 test hosts: 0.27 s instead of 0.40; benchmarks/results/peers.md).
                with ThreadPoolExecutor(2, thread_name_prefix=f"fleet-pull-{self.host.name}") as pool:
                    tree = pool.submit(rsync, self.dir.root + "/", local, (*excludes, f"/{SweepDir.RUNS}/"), keep=False)
                    results = pool.submit(pull_results)
                    tree.result()
                    pulled = results.result()
            # The ledger looks at the files the results' pull named, where it named all it wrote: a
            # whole pull on the first try (one cut off before may have written files and died
            # before naming them; one that left files out is looked at whole too).
            judge.refresh(pulled.stdout.splitlines() if tries == 1 and pulled.ok else None)
            rejected = set(judge.rejected) - {"."}
            if rejected:
                # Everything this side holds that is not a rejected result is left out by name;
                # rejections are rare (a bad disk, a hostile host), so is this list.
                kept = sorted(set(os.listdir(runs)) - rejected)
                rsync(self.dir.runs + "/", runs, (*SweepDir.PULL_EXCLUDES, *runs_excludes, *(f"/{name}" for name in kept)), keep=False)
                judge.refresh(rejected)  # the host's copies of those, read now: the caller judges on this pull

        judge = ledger or ResultLedger(runs, self.sweep_id, self.host.name)
        self._retry(pull_once, policy)
        return judge.present_count

    def stop_agent(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop this sweep's agent on a host the sweep gave up on (its runs went to other hosts or
        are named not run, so nothing of fleet's may go on there): SIGTERM, on which the agent stops
        its servers and ends `stopped`, then SIGKILL after `grace_s` (the agent's `service stop`;
        systemd's stop under systemd). One try, no retries: a host given up on may be gone."""
        stop = self.agent_cli("service", "stop", *self.service_args(), "--grace", f"{grace_s:g}")
        self.transport.run(stop, timeout=grace_s + QUICK_S * 2, check=True)

    def release_lease(self) -> None:
        """At the sweep's end: the host's lease, if it is still this sweep's. Best effort: one
        left behind dies by its TTL (fleet.host.contract.lease)."""
        from fleet.provision.lease import release_lease, sweep_claim  # as in ship

        try:
            release_lease(self.transport, self.host, sweep_claim(self.sweep_id))
        except FleetError as exc:
            log.warning("%s: the lease was not released (it expires by itself): %s", self.host.name, exc)

    def push_quarantine(self, quarantine: Mapping[str, str], policy: RetryPolicy = CONNECT) -> None:
        """Server id -> reason: the agent skips these servers if it has not started them."""
        data = json.dumps(HostQuarantine(dict(quarantine)).to_json(), indent=1, sort_keys=True).encode()
        self._retry(lambda: self.transport.put_bytes(data, self.dir.quarantine, timeout=60), policy)

    def ask_handover(self, request: HandoverRequest) -> None:
        """The servers other hosts want (cumulative): the agent answers before it starts any of them."""
        data = json.dumps(request.to_json()).encode()
        self._retry(lambda: self.transport.put_bytes(data, self.dir.handover, timeout=QUICK_S * 4))

    def handover_answer(self) -> HandoverAnswer:
        """What the agent released (never started there) and kept; empty before it answered, or
        where its answer cannot be read (then nothing moves)."""
        path = self.dir.handover_answer
        # One try: the sweep loop asks again at its next poll (a retry here would hold up the loop).
        text = self.transport.query(f"cat {shlex.quote(path)} 2>/dev/null || true", timeout=QUICK_S).stdout.strip()
        if not text:
            return HandoverAnswer()
        try:
            return HandoverAnswer.from_json(text, f"{self.host.name}:{path}")
        except ContractError as exc:
            log.error("%s; nothing moves", exc)
            return HandoverAnswer()

    def close(self) -> None:
        self.transport.close()
