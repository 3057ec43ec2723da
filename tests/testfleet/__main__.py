"""`python -m tests.testfleet cleanup|list`: find and remove what dead test fleets left behind."""

from __future__ import annotations

import argparse
import os
import sys

from tests.testfleet.registry import cleanup_dead_instances, load_instances


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.testfleet", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("cleanup", help="tear down fleets whose owner process is gone, and orphan namespaces/veths")
    commands.add_parser("list", help="show the fleet instances recorded on this machine")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("python -m tests.testfleet: needs root (the fleets are root's namespaces)", file=sys.stderr)
        return 2
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
