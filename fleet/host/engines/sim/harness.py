"""Run a simulated server as a child process on this machine: for tests, benchmarks and local
rehearsals. Standard library only.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from fleet.host.engines.sglang.logparse import READY_TEXT

# Ports handed out by this process: never twice (a closed bind(0) probe's port may be the very
# next one bind(0) gives, and two servers of one shard then shared a port).
_GIVEN: set[int] = set()
_GIVEN_LOCK = threading.Lock()
_LOWEST_PORT = 10000


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A TCP port of 127.0.0.1 for a server that binds it later: free now, never handed out before
    by this process, and below the kernel's ephemeral range, where neither another process's
    bind(0) nor an outgoing connection's local port can take it meanwhile."""
    high = _ephemeral_low()
    chooser = random.Random()  # seeded from the OS: side-by-side test processes choose apart
    for _ in range(1000):
        port = chooser.randrange(_LOWEST_PORT, max(_LOWEST_PORT + 1, high))
        with _GIVEN_LOCK:
            if port in _GIVEN:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _GIVEN.add(port)
            return port
    raise RuntimeError(f"no free TCP port in {_LOWEST_PORT}-{high - 1} after 1000 tries")


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
    start_speed: float | None = None,
) -> SimProcess:
    """Start `python -m fleet.host.engines.sim ARGS --port PORT` with stdout and stderr in one log file
    (`speed`, `start_speed`: FLEET_SIM_SPEED and FLEET_SIM_START_SPEED, where given)."""
    port = port if port is not None else free_port()
    child_env = dict(os.environ if env is None else env)
    if speed is not None:
        child_env["FLEET_SIM_SPEED"] = str(speed)
    if start_speed is not None:
        child_env["FLEET_SIM_START_SPEED"] = str(start_speed)
    # The folder that holds the `fleet` package (this module's name says how deep it sits).
    repo_root = str(Path(__file__).resolve().parents[len(__name__.split(".")) - 1])
    child_env["PYTHONPATH"] = repo_root + (os.pathsep + child_env["PYTHONPATH"] if child_env.get("PYTHONPATH") else "")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fleet.host.engines.sim", *args, "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=child_env,
        )
    return SimProcess(process, log_path, port)
