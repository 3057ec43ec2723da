"""The sweep's progress tracker, alone, at growing sweep sizes (issue 28: it was quadratic).

One host loop's work per result, as in a sweep: the result lands in the host's `runs/` folder
(written as the agent writes it; not timed), the ledger looks at what the pull names as written
and the tracker observes the host (a `run` event with the ETA): one pull per result, the most a
sweep does. Prints the controller CPU seconds per sweep size and the ratio
between successive doublings: about 2 is linear, about 4 quadratic.

    python benchmarks/bench_tracker.py [--runs 512,1024,2048,4096,8192] [--hosts 8]

`--baseline DIR` runs the same work with another checkout's fleet (say, a worktree of the commit
before the ledger) in a child process, side by side, for the before/after table.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

SWEEP = "bench-20261202-000000-abcd"


def _result(run_id: str, server_id: str, host: str, at: float) -> dict[str, object]:
    return {
        "schema": "fleet.run_result/2", "run_id": run_id, "label": f"{server_id}/w", "server_id": server_id, "server_label": server_id,
        "sweep_id": SWEEP, "host": host, "status": "ok", "failure": None, "workload": {"name": "w"},
        "figures": {"output_tok_s": 350.0, "requests": {"sent": 4, "ok": 4}}, "started_at": at, "ended_at": at + 30.0,
    }  # fmt: skip


def measure(runs: int, hosts: int) -> float:
    """CPU seconds of the controller's tracking of a sweep of `runs` runs over `hosts` hosts."""
    from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
    from fleet.sweep.events import EventStream, SweepProgress
    from fleet.sweep.hoststatus import HostStatus, Phase

    try:  # this checkout: results through the ledger
        from fleet.sweep.ledger import host_ledger
    except ImportError:  # an older checkout: the tracker globbed the folder itself
        host_ledger = None  # type: ignore[assignment]
    named = host_ledger is not None and "written" in inspect.signature(host_ledger(Path("/nonexistent"), "h").refresh).parameters
    per_server = 4
    names = [f"h{i}" for i in range(hosts)]
    shards, estimates, servers_est = {}, {}, {}
    plan_servers = []
    for h, name in enumerate(names):
        servers = []
        for s in range(runs // hosts // per_server):
            server_id = f"{name}s{s}"
            specs = [RunSpec(f"{server_id}r{r}", f"{server_id}/w", {}) for r in range(per_server)]
            servers.append(ServerSpec(server_id, server_id, [0], 30000 + s, [], {}, f"unit-{s}", runs=specs))
            servers_est[server_id] = SimpleNamespace(seconds=120.0)
            estimates.update({spec.run_id: SimpleNamespace(seconds=30.0) for spec in specs})
            plan_servers.append(SimpleNamespace(skip_reason=None, host=name, start_s=0.0, end_s=600.0))
        shards[name] = Shard(SWEEP, name, "boot", "process", AgentLimits(), servers)
    plan = SimpleNamespace(run_estimates=estimates, server_estimates=servers_est, servers=plan_servers)
    root = Path(tempfile.mkdtemp(prefix="bench-tracker-")) / SWEEP
    for name in names:
        (root / name / "runs").mkdir(parents=True)
    where = {name: host_ledger(root, name, (r.run_id for _, r in shards[name].runs)) for name in names} if host_ledger else {n: root / n for n in names}
    progress = SweepProgress(EventStream(None), plan, shards, {n: 1.0 for n in names}, where)  # type: ignore[arg-type]
    statuses = {n: HostStatus(n, phase=Phase.RUNNING) for n in names}
    spent = 0.0
    at = 1.8e9
    queues = {n: [(server.server_id, run.run_id) for server, run in shards[n].runs] for n in names}
    for step in range(max(len(q) for q in queues.values())):
        for name in names:  # the hosts' loops take turns, as their threads do
            if step >= len(queues[name]):
                continue
            server_id, run_id = queues[name][step]
            at += 1.0
            path = root / name / "runs" / f"{run_id}.json"
            path.write_text(json.dumps(_result(run_id, server_id, name, at)))  # the agent's and rsync's work, not timed
            started = time.process_time()
            if named:  # the ledger looks at what the pull names as written (fleet.sweep.channel)
                where[name].refresh([f"{run_id}.json"])  # type: ignore[union-attr]
            elif host_ledger is not None:  # an older checkout's ledger listed the folder at every pull
                where[name].refresh()  # type: ignore[union-attr]
            progress.observe(statuses[name], shards[name], where[name])  # type: ignore[arg-type]
            spent += time.process_time() - started
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="512,1024,2048,4096,8192")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside this one")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child's single measurement
    args = parser.parse_args()
    if args.one:
        print(measure(args.one, args.hosts))
        return
    sizes = [int(n) for n in args.runs.split(",")]
    checkouts = {"now": Path(__file__).resolve().parents[1]}
    if args.baseline:
        checkouts["baseline"] = args.baseline.resolve()
    rows: dict[str, list[float]] = {label: [] for label in checkouts}
    for runs in sizes:
        for label, checkout in checkouts.items():  # interleaved: the machine's load falls on both alike
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            out = subprocess.run([sys.executable, "-P", str(Path(__file__).resolve()), "--one", str(runs), "--hosts", str(args.hosts)],
                                 env=env, capture_output=True, text=True, check=True, cwd=checkout)  # fmt: skip
            rows[label].append(float(out.stdout.strip().splitlines()[-1]))
    print(f"tracker CPU seconds, {args.hosts} hosts, one observation per result")
    print("runs      " + "  ".join(f"{label:>18}" for label in rows))
    for i, runs in enumerate(sizes):
        cells = []
        for label in rows:
            value = rows[label][i]
            growth = f"(x{value / rows[label][i - 1]:.1f})" if i and rows[label][i - 1] > 0 else ""
            cells.append(f"{value:10.2f} {growth:>7}")
        print(f"{runs:<8}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
