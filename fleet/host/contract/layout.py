"""The files of a sweep directory: `<work_dir>/sweeps/<sweep-id>/` on a host and, once pulled,
`results/<sweep-id>/<host>/` on the controller. Every name, once."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass


@dataclass(frozen=True)
class SweepDir:
    """The files of one host's share of a sweep, under `root` (a host path or a local one)."""

    root: str

    # What the controller writes for the agent.
    SHARD = "shard.json"  # the runs and servers this host runs (fleet.host.contract.shard)
    HOST_FACTS = "host_facts.json"  # the controller's facts of this host, copied into every result
    QUARANTINE = "quarantine.json"  # servers to skip, pushed while the sweep runs
    STOP = "STOP"  # present: the agent stops at the next safe point
    HANDOVER = "handover.json"  # queued servers the controller wants back (contract.shard.HandoverRequest)
    # What the agent writes.
    RUNS = "runs"  # runs/<run-id>.json: one RunResult per run
    LOGS = "logs"  # logs/<server-label>.log: each server's whole log
    PROGRESS = "progress.json"  # what the agent is doing, for `fleet status`
    HALT = "halt.json"  # why the agent halted, where progress.json could not be written (fleet.host.contract.progress.Halt)
    AGENT_LOG = "agent.log"
    HANDOVER_ANSWER = "released.json"  # the agent's answer to handover.json (contract.shard.HandoverAnswer)
    # The agent's own bookkeeping, meaningless on the controller.
    ATTEMPTS = "attempts"  # attempts/<run-id>.json: how many times a run was started
    SERVICES = "services"  # the `process` service manager's state
    AGENT_LOCK = "agent.lock"  # one agent per sweep directory

    # What a pull leaves on the host: its bookkeeping, and the atomic writer's temp files
    # (`.<name>.<random>.tmp`), which vanish under rsync's feet.
    PULL_EXCLUDES = (f"{ATTEMPTS}/", f"{SERVICES}/", "*.lock", STOP, ".*.tmp")

    @property
    def work_dir(self) -> str | None:
        """The host's work dir, where its lease lives: a sweep directory is
        `<work_dir>/sweeps/<sweep-id>` (fleet.layout). None for one elsewhere (a test's, a copy)."""
        parent = posixpath.dirname(self.root.rstrip("/"))
        return posixpath.dirname(parent) if posixpath.basename(parent) == "sweeps" else None

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    @property
    def shard(self) -> str:
        return self.path(self.SHARD)

    @property
    def host_facts(self) -> str:
        return self.path(self.HOST_FACTS)

    @property
    def quarantine(self) -> str:
        return self.path(self.QUARANTINE)

    @property
    def stop_file(self) -> str:
        return self.path(self.STOP)

    @property
    def handover(self) -> str:
        return self.path(self.HANDOVER)

    @property
    def handover_answer(self) -> str:
        return self.path(self.HANDOVER_ANSWER)

    @property
    def runs(self) -> str:
        return self.path(self.RUNS)

    @property
    def logs(self) -> str:
        return self.path(self.LOGS)

    @property
    def progress(self) -> str:
        return self.path(self.PROGRESS)

    @property
    def halt(self) -> str:
        return self.path(self.HALT)

    @property
    def agent_log(self) -> str:
        return self.path(self.AGENT_LOG)

    @property
    def attempts(self) -> str:
        return self.path(self.ATTEMPTS)

    @property
    def services(self) -> str:
        return self.path(self.SERVICES)

    @property
    def agent_lock(self) -> str:
        return self.path(self.AGENT_LOCK)

    def result(self, run_id: str) -> str:
        return self.path(self.RUNS, f"{run_id}.json")

    def attempt(self, run_id: str) -> str:
        return self.path(self.ATTEMPTS, f"{run_id}.json")

    def server_log(self, label: str) -> str:
        return self.path(self.LOGS, f"{label}.log")

    def placement_env(self, unit_name: str) -> str:
        """`services/<unit>.gpus.env`: `CUDA_VISIBLE_DEVICES=` the GPUs the agent placed the server
        on (fleet.host.agent.dispatch), written before each start; a systemd server unit reads it
        (EnvironmentFile=), since its other settings are baked in when the shard is shipped."""
        return self.path(self.SERVICES, f"{unit_name}.gpus.env")
