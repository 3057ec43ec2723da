"""`<sweep_dir>/progress.json`: what the agent is doing, for `fleet status`. Rewritten atomically
at every phase change, and at least every HEARTBEAT_S while the agent lives. Standard library only."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from fleet.host.agent.results import write_json_atomic

PROGRESS_SCHEMA = "fleet.agent_progress/1"
HEARTBEAT_S = 30.0


class Progress:
    def __init__(self, path: Path, *, sweep_id: str, boot_id: str, total_runs: int, counts: dict[str, int]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {
            "schema": PROGRESS_SCHEMA,
            "sweep_id": sweep_id,
            "agent_pid": os.getpid(),
            "boot_id": boot_id,
            "started_at": time.time(),
            "updated_at": time.time(),
            "state": "running",
            "total": total_runs,
            "counts": dict(counts),
            "servers": {},
            "last_error": None,
        }
        self._write()

    def _write(self) -> None:
        self._state["updated_at"] = time.time()
        self._state["counts"]["done"] = sum(self._state["counts"].get(k, 0) for k in ("ok", "partial", "failed", "skipped"))
        self._state["counts"]["remaining"] = self._state["total"] - self._state["counts"]["done"]
        write_json_atomic(self.path, self._state)

    def heartbeat(self) -> None:
        """Rewrite the file when nothing else has for a while, so that `updated_at` tells a live
        agent in a long run from a dead one."""
        with self._lock:
            if time.time() - self._state["updated_at"] >= HEARTBEAT_S:
                self._write()

    def phase(self, server_id: str, label: str, phase: str, run: str | None = None) -> None:
        """starting | warmup | running | stopping, with the run's label while running."""
        with self._lock:
            self._state["servers"][server_id] = {"label": label, "phase": phase, "run": run, "since": time.time()}
            self._write()

    def finished_server(self, server_id: str) -> None:
        with self._lock:
            self._state["servers"].pop(server_id, None)
            self._write()

    def run_done(self, status: str) -> None:
        with self._lock:
            self._state["counts"][status] = self._state["counts"].get(status, 0) + 1
            self._write()

    def error(self, server_label: str, error_class: str, message: str) -> None:
        with self._lock:
            self._state["last_error"] = {"server": server_label, "class": error_class, "message": message, "at": time.time()}
            self._write()

    def end(self, state: str) -> None:
        """finished | finished_with_errors | stopped"""
        with self._lock:
            self._state["state"] = state
            self._write()
