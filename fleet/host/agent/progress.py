"""The agent's side of `<sweep_dir>/progress.json` (`fleet.host.contract.Progress`): rewritten
atomically at every phase change, and at least every HEARTBEAT_S while the agent lives."""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fleet.host.atomic import write_json_atomic
from fleet.host.contract import AgentError, AgentState, Progress, RunStatus, ServerPhase, ServerProgress

HEARTBEAT_S = 30.0
# Write failures that every later write repeats: a full disk, a read-only one, a spent quota.
UNWRITABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})


class ProgressFile:
    """`on_unwritable`: called (instead of raising) when a write fails for want of space or of a
    writable disk, so that a progress update never takes a server's stop down with it; the agent
    halts (fleet.host.agent.runner)."""

    def __init__(
        self,
        path: Path,
        *,
        sweep_id: str,
        boot_id: str,
        total_runs: int,
        counts: dict[str, int],
        on_unwritable: Callable[[OSError], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._on_unwritable = on_unwritable
        self._lock = threading.Lock()
        now = time.time()
        self.state = Progress(
            sweep_id=sweep_id,
            agent_pid=os.getpid(),
            boot_id=boot_id,
            started_at=now,
            updated_at=now,
            state=AgentState.running,
            total=total_runs,
            counts=dict(counts),
        )
        self._write()

    def _write(self, *, strict: bool = False) -> None:
        self.state = dataclasses.replace(self.state, updated_at=time.time())
        try:
            write_json_atomic(self.path, self.state.to_json())
        except OSError as exc:
            exc.filename = exc.filename or str(self.path)  # a failed write() names no file
            if strict or self._on_unwritable is None or exc.errno not in UNWRITABLE_ERRNOS:
                raise
            self._on_unwritable(exc)

    def heartbeat(self) -> None:
        """Rewrite the file when nothing else has for a while, so that `updated_at` tells a live
        agent in a long run from a dead one."""
        with self._lock:
            if time.time() - self.state.updated_at >= HEARTBEAT_S:
                self._write()

    def phase(self, server_id: str, label: str, phase: ServerPhase, run: str | None = None, gpus: tuple[int, ...] = ()) -> None:
        """A server's phase, with the run's label while running and the GPUs it was placed on."""
        with self._lock:
            self.state.servers[server_id] = ServerProgress(label, phase, run, time.time(), gpus)
            self._write()

    def finished_server(self, server_id: str) -> None:
        with self._lock:
            self.state.servers.pop(server_id, None)
            self._write()

    def run_done(self, status: RunStatus) -> None:
        with self._lock:
            self.state.counts[status.value] = self.state.counts.get(status.value, 0) + 1
            self._write()

    def add_runs(self, total: int, counts: dict[str, int]) -> None:
        """Runs of servers appended to a running agent's shard (`fleet.host.contract.shard.grown_servers`);
        `counts`: those of them with a result already (an earlier agent's)."""
        with self._lock:
            merged = dict(self.state.counts)
            for status, count in counts.items():
                merged[status] = merged.get(status, 0) + count
            self.state = dataclasses.replace(self.state, total=self.state.total + total, counts=merged)
            self._write()

    def error(self, server_label: str, error_class: str, message: str) -> None:
        with self._lock:
            self.state = dataclasses.replace(self.state, last_error=AgentError(server_label, error_class, message, time.time()))
            self._write()

    def halt(self, error_class: str, reason: str) -> None:
        """The agent stopped itself (it cannot write): the reason and the end state in one write."""
        with self._lock:
            error = AgentError("agent", error_class, reason, time.time())
            self.state = dataclasses.replace(self.state, state=AgentState.halted, last_error=error)
            self._write(strict=True)

    def end(self, state: AgentState) -> None:
        with self._lock:
            self.state = dataclasses.replace(self.state, state=state)
            self._write()
