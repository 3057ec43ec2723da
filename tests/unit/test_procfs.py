"""A zombie is dead to every part of fleet that asks /proc -- real processes, real zombies.

Where PID 1 does not reap orphans (this sandbox's own init does not), a server killed before it
could unregister its GPU memory stays a zombie for good. The simulator counted its memory as
still held, and the next server on that GPU failed to start (seen as a flake in
test_agent_local's reclaimed-GPU server)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fleet.host import procfs
from fleet.host.engines.sim import gpu as gpumod
from fleet.host.engines.sim.server import other_processes_mib


def zombie() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped: a real zombie, until the caller waits on it."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while procfs.pid_alive(child.pid):
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.02)
    assert Path(f"/proc/{child.pid}/stat").exists()  # still there, as a zombie: not reaped
    return child


def test_a_zombie_is_not_alive_and_a_live_process_is() -> None:
    child = zombie()
    try:
        os.kill(child.pid, 0)  # what a signal-0 probe says: alive
        assert not procfs.pid_alive(child.pid)
        assert procfs.pid_alive(os.getpid())
    finally:
        child.wait()
    assert not procfs.pid_alive(child.pid)


def test_the_sim_counts_no_memory_for_a_zombie_on_its_gpu(tmp_path: Path) -> None:
    child = zombie()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        gpumod.register_process(str(tmp_path), child.pid, [6], 70_000)
        gpumod.register_process(str(tmp_path), sleeper.pid, [6], 1_000)
        gpumod.register_process(str(tmp_path), sleeper.pid + 100_000, [6], 5_000)  # no such process
        assert other_processes_mib(str(tmp_path), [6], own_pid=os.getpid()) == 1_000
        assert other_processes_mib(str(tmp_path), [5], own_pid=os.getpid()) == 0
    finally:
        child.wait()
        sleeper.kill()
        sleeper.wait()
