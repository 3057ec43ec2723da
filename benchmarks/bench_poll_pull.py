"""What one poll and one pull of the sweep's channel cost the controller (issue 28).

A sweep's controller CPU follows its wall time, not its runs: every host is polled every
`--poll` seconds (one command over the host's paramiko connection) and pulled when the poll saw
new results (two rsyncs through the host's OpenSSH master). This measures each against one real
test host (tests/testfleet: needs root), through `AgentChannel` as the sweep uses it:

- a poll (`AgentChannel.poll`: the agent's service status, boot id, progress, result count);
- a pull that brings nothing new (`AgentChannel.pull` with the sweep's ledger);
- a pull that brings one log line and `--new` result files (named `.txt`, so that only the
  transfer is measured, not the ledger's reading of results: bench_tracker.py measures that);
- the same pull of `runs/` alone (`results_only`: the sweep loop's pulls between two of the whole
  folder; a checkout without it prints no such row).

Printed: the controller's CPU per call (time.process_time: this process, every thread) and
the CPU of the ssh and rsync clients it ran (RUSAGE_CHILDREN), medians of `--calls`.

    sudo python benchmarks/bench_poll_pull.py [--calls 60] [--new 5]

Side by side with an older checkout: run it from each (`cd <worktree> && sudo python
benchmarks/bench_poll_pull.py`). Per second of a sweep on H hosts at poll interval P, the polls
cost H / P x the poll figure and the pulls up to as much again.
"""

from __future__ import annotations

import argparse
import inspect
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.connect import transport_for  # noqa: E402
from fleet.inventory import load_inventory  # noqa: E402
from fleet.sweep.channel import AgentChannel  # noqa: E402
from fleet.sweep.ledger import ResultLedger  # noqa: E402
from tests.testfleet import start_test_fleet  # noqa: E402

SWEEP = "bench-poll-pull"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(call: Callable[[], object], calls: int, before: Callable[[int], object] | None = None) -> dict[str, float]:
    own: list[float] = []
    children: list[float] = []
    for k in range(calls):
        if before is not None:
            before(k)
        cpu, child = time.process_time(), _children_cpu()
        call()
        own.append(time.process_time() - cpu)
        children.append(_children_cpu() - child)
    return {"controller_ms": round(statistics.median(own) * 1000, 2), "clients_ms": round(statistics.median(children) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of each kind (default 60)")
    parser.add_argument("--new", type=int, default=5, help="files each changed pull brings (default 5)")
    args = parser.parse_args()
    with start_test_fleet(["ct200"]) as fleet, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        host = next(iter(load_inventory(fleet.write_inventory(work / "hosts"))))
        transport = transport_for(host)
        channel = AgentChannel(host, SWEEP, transport)
        root = channel.dir.root
        transport.run(["mkdir", "-p", channel.dir.runs, f"{root}/logs"], timeout=30, check=True)
        # Four server logs of 27 KB, as a host has them mid-sweep.
        transport.run(f"for i in 1 2 3 4; do head -c 20000 /dev/urandom | base64 > {root}/logs/s$i.log; done", timeout=30, check=True)
        local = work / "local"
        ledger = ResultLedger(local / "runs", SWEEP, host.name)
        channel.poll()
        channel.pull(local, ledger=ledger)  # the connection and the master made, the first whole look done

        def land(k: int) -> None:  # what a host does between two pulls: results land, a log grows
            names = " ".join(f"{channel.dir.runs}/r{k}-{n}.txt" for n in range(args.new))
            transport.run(f"echo line >> {root}/logs/s1.log; for f in {names}; do echo x > $f; done", timeout=30, check=True)

        figures = {
            "poll": measure(channel.poll, args.calls),
            "pull_nothing_new": measure(lambda: channel.pull(local, ledger=ledger), args.calls),
            f"pull_{args.new}_new_files": measure(lambda: channel.pull(local, ledger=ledger), args.calls, before=land),
        }
        if "results_only" in inspect.signature(channel.pull).parameters:  # the sweep loop's pull between two of the whole folder
            figures[f"pull_results_only_{args.new}_new_files"] = measure(lambda: channel.pull(local, ledger=ledger, results_only=True), args.calls, before=land)
        transport.close()
    print(json.dumps(figures))
    for name, figure in figures.items():
        print(f"{name}: {figure['controller_ms']} ms of controller CPU, {figure['clients_ms']} ms of its ssh/rsync clients' (median of {args.calls})")


if __name__ == "__main__":
    main()
