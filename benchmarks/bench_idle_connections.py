"""What an idle SSH connection of the sweep's transport costs the controller (issue 28).

A sweep holds one paramiko connection per host for its whole length, mostly idle between polls;
paramiko's transport thread wakes on a timer to check for close and keepalive, so the cost grows
as hosts x sweep seconds. This opens CONNECTIONS connections (fleet.transport.sshlink.open_connection,
as the sweep's transport does) to one real test host (tests/testfleet: needs root), lets them sit
idle for IDLE seconds and prints this process's CPU per connection-second (time.process_time).

    sudo python benchmarks/bench_idle_connections.py [--connections 32] [--idle 10]

Side by side with an older checkout: run it from each, e.g.
`cd /tmp/before && sudo PYTHONPATH=/tmp/before python benchmarks/bench_idle_connections.py`
(2026-12-04, 32 connections, 10 s, load 10: 0.325 ms before 95ed8f8, 0.070 ms after).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.transport import SSHTarget, sshlink  # noqa: E402
from tests.testfleet import start_test_fleet  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=32, help="connections held at once (default 32)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds they sit idle (default 10)")
    args = parser.parse_args()
    with start_test_fleet(["ct200"]) as fleet:
        host = fleet.hosts[0]
        target = SSHTarget(address=host.address, port=host.port, user=host.user, identity_file=host.identity_file, known_hosts=host.known_hosts, connect_timeout=5)
        connections = [sshlink.open_connection(host.name, target) for _ in range(args.connections)]
        time.sleep(1)  # the logins' last messages handled
        cpu, wall = time.process_time(), time.monotonic()
        time.sleep(args.idle)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        for connection in connections:
            sshlink.close_quietly(connection)
    per = cpu * 1000 / (args.connections * wall)
    print(f"{per:.3f} ms of controller CPU per idle connection-second ({args.connections} connections, {wall:.1f} s idle, {cpu:.3f} s CPU)")


if __name__ == "__main__":
    main()
