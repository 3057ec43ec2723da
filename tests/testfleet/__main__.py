"""`python -m tests.testfleet cleanup|list|bench`: leftovers of dead test fleets, and timings."""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from tests.testfleet.hosts import start_test_fleet
from tests.testfleet.registry import cleanup_dead_instances, load_instances


def bench(sizes: list[int]) -> None:
    """Wall time to start N hosts (until every banner is served), reboot one, close all."""
    for size in sizes:
        started = time.monotonic()
        fleet = start_test_fleet([f"ct{200 + i}" for i in range(size)])
        up = time.monotonic() - started
        try:
            for host in fleet.hosts:  # every host really serves SSH
                with socket.create_connection((host.address, host.port), timeout=5) as conn:
                    assert conn.recv(8).startswith(b"SSH-")
            started = time.monotonic()
            fleet.reboot(fleet.hosts[0])
            reboot = time.monotonic() - started
        finally:
            started = time.monotonic()
            fleet.close()
            closed = time.monotonic() - started
        print(f"{size} hosts: start {up:.2f} s, reboot one {reboot:.2f} s, close {closed:.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.testfleet", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("cleanup", help="tear down fleets whose owner process is gone, and orphan namespaces/veths")
    commands.add_parser("list", help="show the fleet instances recorded on this machine")
    timing = commands.add_parser("bench", help="time starting, rebooting and closing fleets")
    timing.add_argument("--hosts", type=int, nargs="+", default=[2, 8], help="fleet sizes (default: 2 8)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m tests.testfleet: needs root (the fleets are root's namespaces)", file=sys.stderr)
        return 2
    if args.command == "bench":
        bench(args.hosts)
        return 0
    if args.command == "cleanup":
        removed = cleanup_dead_instances()
        for line in removed:
            print(f"removed {line}")
        if not removed:
            print("nothing to clean up")
        return 0
    records, broken = load_instances()
    for record in records:
        state = "live" if record.owner_alive() else "dead"
        hosts = ", ".join(f"{h.name}=10.201.{h.slot}.2" for h in record.hosts)
        print(f"{record.instance_id} ({state}, owner pid {record.owner_pid}): {hosts}  [{record.base}]")
    for directory in broken:
        print(f"{directory} (no readable state.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
