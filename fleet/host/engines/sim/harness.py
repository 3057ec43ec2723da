"""Run a simulated server as a child process on this machine: for tests, benchmarks and local
rehearsals. Standard library only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from fleet.host.engines.sglang.logparse import READY_TEXT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class SimProcess:
    process: subprocess.Popen
    log_path: Path
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """True once the log shows the ready line; False if the process exited first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if READY_TEXT in self.log():
                return True
            if self.process.poll() is not None:
                return READY_TEXT in self.log()
            time.sleep(0.02)
        raise TimeoutError(f"sim server on port {self.port} not ready after {timeout_s} s; log:\n{self.log()[-3000:]}")

    def wait_exit(self, timeout_s: float = 30.0) -> int:
        return self.process.wait(timeout=timeout_s)

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM, as systemd or the agent stops a server; SIGKILL if it does not go."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def start_sim(
    args: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    speed: float | None = None,
) -> SimProcess:
    """Start `python -m fleet.host.engines.sim ARGS --port PORT` with stdout and stderr in one log file."""
    port = port if port is not None else free_port()
    child_env = dict(os.environ if env is None else env)
    if speed is not None:
        child_env["FLEET_SIM_SPEED"] = str(speed)
    # The folder that holds the `fleet` package (this module's name says how deep it sits).
    repo_root = str(Path(__file__).resolve().parents[len(__name__.split(".")) - 1])
    child_env["PYTHONPATH"] = repo_root + (os.pathsep + child_env["PYTHONPATH"] if child_env.get("PYTHONPATH") else "")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fleet.host.engines.sim", *args, "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_env,
        )
    return SimProcess(process, log_path, port)
