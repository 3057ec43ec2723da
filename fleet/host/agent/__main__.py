"""`python -m fleet.host.agent ...`: the host side of fleet. Standard library only.

python -m fleet.host.agent run --sweep-dir DIR
    work through DIR/shard.json; resumes where an earlier agent stopped. Exit 0 when every
    run has a result or when stopped on request (SIGTERM or a DIR/STOP file; progress.json
    then says "stopped"), 1 after an agent error, 2 on a bad shard, 3 when another live
    sweep holds the host's lease (fleet.host.contract.lease), 4 when another agent already
    works on DIR, 5 when it stopped itself, unable to write its results (a full or
    read-only disk; progress.json or halt.json says why where it could).
python -m fleet.host.agent service start NAME --manager process --state-dir DIR --log FILE
        [--cwd DIR] [--env K=V ...] [--env-file FILE.json] -- ARGV...
python -m fleet.host.agent service stop NAME --manager process --state-dir DIR [--grace S]
python -m fleet.host.agent service status NAME --manager process --state-dir DIR
    start, stop or query a detached service with the agent's own code (the controller uses
    it to start the agent itself). Each prints the service's status as JSON. Under
    `--manager systemd` NAME is an installed unit (`NAME.service`) and argv/env/log are the
    unit's.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Sequence

from fleet.host.agent.services import ServiceSpec, make_services
from fleet.host.errors import ServiceError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fleet.host.agent", description="fleet's host-side agent")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="work through a sweep's shard (resumable)")
    run.add_argument("--sweep-dir", required=True, type=Path)
    service = commands.add_parser("service", help="start, stop or query a detached service")
    service.add_argument("action", choices=("start", "stop", "status"))
    service.add_argument("name")
    service.add_argument("--manager", required=True, choices=("systemd", "process"))
    service.add_argument("--state-dir", type=Path, help="pid and exit files (process manager)")
    service.add_argument("--log", help="log file (start, process manager)")
    service.add_argument("--cwd")
    service.add_argument("--env", action="append", default=[], metavar="K=V")
    service.add_argument("--env-file", type=Path, help="a JSON object of environment variables (keeps secrets off the command line)")
    service.add_argument("--grace", type=float, default=30.0, help="seconds between SIGTERM and SIGKILL (stop)")
    return parser


def _environment(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, str]:
    env: dict[str, str] = {}
    if args.env_file:
        try:
            loaded = json.loads(args.env_file.read_text())
        except (OSError, ValueError) as exc:
            parser.error(f"--env-file {args.env_file}: {exc}")
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            parser.error(f"--env-file {args.env_file}: expected a JSON object of strings")
        env.update(loaded)
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--env {item!r}: expected K=V")
        env[key] = value
    return env


def _service(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.manager == "process" and args.state_dir is None:
        parser.error("--state-dir is required with --manager process")
    services = make_services(args.manager, args.state_dir or Path("."))
    try:
        if args.action == "start":
            if args.manager == "process" and (not args.argv or not args.log):
                parser.error("service start --manager process needs --log FILE and the command after --")
            status = services.start(ServiceSpec(args.name, list(args.argv), _environment(args, parser), args.log or "", args.cwd))
        elif args.action == "stop":
            status = services.stop(args.name, args.grace)
        else:
            status = services.status(args.name)
    except (ServiceError, OSError) as exc:  # OSError: its state dir cannot be written (a full or read-only disk)
        print(f"fleet agent: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(status.to_json()))
    return 0


def _run(args: argparse.Namespace) -> int:
    # The runner's imports here, not at the top: `service status` is in every poll of a running
    # sweep (fleet.sweep.channel.AgentChannel.poll_command), a Python start on the GPU host each
    # time, and the runner (with the log classifier) was 110 of its 140 ms of CPU.
    from fleet.host.agent.runner import Agent, unwritable
    from fleet.host.contract.exits import AgentExit
    from fleet.host.errors import AgentBusy, ContractError, HostLeased

    logging.basicConfig(level=logging.INFO, format="%(asctime)s fleet-agent %(levelname)s %(message)s", stream=sys.stderr)
    try:
        agent = Agent(args.sweep_dir)
    except (OSError, ContractError, ServiceError) as exc:
        print(f"fleet agent: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: agent.request_stop())
    signal.signal(signal.SIGINT, lambda *_: agent.request_stop())
    try:
        return agent.run()
    except AgentBusy as exc:
        print(f"fleet agent: {exc}", file=sys.stderr)
        return AgentExit.BUSY
    except HostLeased as exc:
        print(f"fleet agent: {exc}", file=sys.stderr)
        return AgentExit.HOST_HELD
    except OSError as exc:
        if not unwritable(exc):
            raise
        print(f"fleet agent: cannot write in {args.sweep_dir}: {exc}", file=sys.stderr)  # its own lock, before any server
        return AgentExit.HALTED


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The service's own command follows `--`; argparse's subcommands do not take it well.
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = command
    if args.command == "service":
        return _service(args, parser)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
