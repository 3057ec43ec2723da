"""How well does `fleet sweep` pack the seed matrix, and what does it cost between runs?

Runs `playbooks/qwen36-specdec.yaml` (24 server configurations x 4 workloads) with the sim engine
on two 8-GPU test hosts (real sshd, tests/testfleet) through `start_sweep`, then reads back what
the agents recorded on each host and measures:

(a) makespan against its lower bound = total server-busy GPU time / number of GPUs. A server is
    busy from its launch to its process exit, on every GPU it holds. Target: 1.15x or better.
(b) the same matrix one configuration at a time, as the seed's script ran it: the playbook with
    `isolation: exclusive` on ONE host, measured (unless --quick), and also constructed from (a)'s
    own server-busy times; the speed-up of (a) over both.
(c) the overhead per run on a slot: from one run's end to the next run's start on the same GPUs,
    the server's start-up (launch to ready) excluded. Target: under 2 s. Median and p90, and
    where the time goes (stopping the old server, handing the GPUs over, warm-up, run to run).

Where each timestamp comes from (all on the host, whose clock is this machine's):
- launch and GPUs: the agent log's `server <label> (<id>): launching on GPUs <list>` line (asctime,
  ms), by server id; where an agent wrote none, the birth time of the server's log file
  (`<sweep>/logs/<label>.log`) and the shard's GPUs.
- ready: the agent log's `server <label>: ready in R s` line.
- exit: the agent log's `server <label> (<id>): stopped, GPUs <list> handed back` line: the moment
  the agent may give those GPUs to another server (the server stopped, its port and GPUs free);
  where it wrote none, mtime of `<sweep>/services/<unit>.exit` (a crash), else of the server log.
- runs: `started_at` / `ended_at` of each result in `<sweep>/runs/`.
The log-file fallbacks are wrong for a fixed variant that shares its original's label (one log
file for both): an agent before issue 12's dispatch needs the two log lines added to measure it
(`git show` the commit that added this paragraph for the patch used).

    python benchmarks/bench_sweep.py                   # sim speed 0.1, serial run measured: ~4 min
    python benchmarks/bench_sweep.py --quick           # sim speed 0.02, serial constructed only: ~1 min
    python benchmarks/bench_sweep.py --speed 0.1 --poll 0.5 --json /var/tmp/sweep.json
    python benchmarks/bench_sweep.py --quick --rounds 2  # the second sweep plans with what the first measured

Figures go to --json (default /var/tmp/fleet-bench/sweep-<time>.json); nothing is written in the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_provision import machine_cpu  # noqa: E402  (this script's directory is on sys.path)

from fleet.host.contract.shard import Shard  # noqa: E402
from fleet.inventory import Host, load_inventory  # noqa: E402
from fleet.layout import agent_dir, sweep_dir  # noqa: E402
from fleet.planning.schedule import HostSlots, Job, aligned_blocks, schedule  # noqa: E402
from fleet.sweep.controller import SweepOutcome, resume_sweep, start_sweep  # noqa: E402
from tests.testfleet import TestFleet, start_test_fleet, unavailable_reason  # noqa: E402

SEED = REPO / "playbooks" / "qwen36-specdec.yaml"
HOSTS = ["ct200", "ct201"]
MAKESPAN_TARGET = 1.15
OVERHEAD_TARGET_S = 2.0
MAX_RESUMES = 3
READY_LINE = re.compile(r"^(\S+ \S+) fleet-agent INFO server (.+): ready in ([0-9.]+) s$")
LAUNCH_LINE = re.compile(r"^(\S+ \S+) fleet-agent INFO server .+ \((\S+)\): launching on GPUs ([0-9,]+)$")
HANDBACK_LINE = re.compile(r"^(\S+ \S+) fleet-agent INFO server .+ \((\S+)\): stopped, GPUs ([0-9,]*) handed back$")


# ---------------------------------------------------------------------------------------------
# What the agents recorded


@dataclass
class RunTimes:
    label: str
    status: str
    started: float
    ended: float

    @property
    def executed(self) -> bool:
        """False for a result written without running anything: skipped, or its server failed first."""
        return self.status != "skipped" and self.ended > self.started


@dataclass
class ServerTimes:
    """A server that was launched: from its launch to its process exit it held its GPUs."""

    host: str
    server_id: str
    label: str
    gpus: tuple[int, ...]  # where it ran
    planned_gpus: tuple[int, ...]  # the shard's (a hint since issue 12's dispatch)
    estimate_s: float | None  # the shard's estimate of its work (None before issue 12)
    order: int  # its place in the shard
    launch: float
    launch_source: str
    ready: float | None  # None: never ready (died during start-up)
    exit: float
    exit_source: str
    runs: list[RunTimes] = field(default_factory=list)

    @property
    def busy_s(self) -> float:
        return self.exit - self.launch

    @property
    def executed_runs(self) -> list[RunTimes]:
        return sorted((r for r in self.runs if r.executed), key=lambda r: r.started)


@dataclass
class HostTimes:
    servers: list[ServerTimes]
    never_launched: list[str]  # labels of servers skipped (quarantined, replaced by a fixed variant)


def birth_time(path: Path) -> float | None:
    """statx birth time (Python 3.11 has no st_birthtime on Linux); None where the file system has none."""
    done = subprocess.run(["stat", "--format=%W", str(path)], capture_output=True, text=True, check=False)
    value = done.stdout.strip()
    if done.returncode != 0 or not value.isdigit() or value == "0":
        return None
    # %W is whole seconds; %w has the nanoseconds.
    text = subprocess.run(["stat", "--format=%w", str(path)], capture_output=True, text=True, check=True).stdout.strip()
    return datetime.strptime(text[:26] + text[29:], "%Y-%m-%d %H:%M:%S.%f %z").timestamp()


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as asctime writes it


def ready_times(agent_log: str) -> dict[str, tuple[float, float]]:
    """{server label: (time of the ready line, seconds from launch to ready)} from the agent log."""
    ready = {}
    for line in agent_log.splitlines():
        match = READY_LINE.match(line)
        if match:
            ready[match[2]] = (_stamp(match[1]), float(match[3]))
    return ready


def placements(agent_log: str) -> tuple[dict[str, tuple[float, tuple[int, ...]]], dict[str, float]]:
    """({server id: (launch time, GPUs)}, {server id: time its GPUs were handed back}) from the
    agent log; the last of each (a server restarted after a reboot launches again)."""
    launched: dict[str, tuple[float, tuple[int, ...]]] = {}
    handed_back: dict[str, float] = {}
    for line in agent_log.splitlines():
        if match := LAUNCH_LINE.match(line):
            launched[match[2]] = (_stamp(match[1]), tuple(int(g) for g in match[3].split(",")))
        elif match := HANDBACK_LINE.match(line):
            handed_back[match[2]] = _stamp(match[1])
    return launched, handed_back


def read_host(host: str, directory: Path) -> HostTimes:
    """Every server of one host's shard with the times its agent left in `directory` (the sweep dir)."""
    shard = Shard.from_json((directory / "shard.json").read_text(), source=str(directory / "shard.json"))
    agent_log = directory / "agent.log"
    log_text = agent_log.read_text() if agent_log.exists() else ""
    ready = ready_times(log_text)
    launched, handed_back = placements(log_text)
    runs: dict[str, list[RunTimes]] = {}
    for path in (directory / "runs").glob("*.json"):
        result = json.loads(path.read_text())
        runs.setdefault(result["server_id"], []).append(RunTimes(result["label"], result["status"], result["started_at"], result["ended_at"]))
    times = HostTimes([], [])
    for order, spec in enumerate(shard.servers):
        mine = runs.get(spec.server_id, [])
        log = directory / "logs" / spec.log_name
        # A skipped server (quarantined, or replaced by a fixed variant that may share its label
        # and so its log file) never launched.
        # An agent that logs its launches names every server it launched.
        if (mine and all(r.status == "skipped" for r in mine)) or (spec.server_id not in launched if launched else not log.exists()):
            times.never_launched.append(spec.label)
            continue
        ready_at, startup_s = ready.get(spec.label, (None, None))
        launch: float | None
        if spec.server_id in launched:
            (launch, gpus), launch_source = launched[spec.server_id], "agent log launching"
        else:
            launch, launch_source, gpus = birth_time(log), "log birth", tuple(spec.gpus)
        if launch is None:
            if ready_at is None or startup_s is None:
                raise SystemExit(f"{host}: no launch time for {spec.label}: no birth time of {log}, no ready line in {agent_log}")
            launch, launch_source = ready_at - startup_s, "agent log ready - R"
        exit_file = directory / "services" / f"{spec.unit_name}.exit"
        if spec.server_id in handed_back:
            exit_at, exit_source = handed_back[spec.server_id], "agent log handed back"
        elif exit_file.exists():
            exit_at, exit_source = exit_file.stat().st_mtime, "exit file"
        else:
            # The agent stops a server by signalling its whole process group, wrapper included,
            # so the exit file exists only when the server ended on its own: its log's last line
            # ("Finished server process", written on the way out) stands in.
            exit_at, exit_source = log.stat().st_mtime, "log mtime"
        times.servers.append(
            ServerTimes(host, spec.server_id, spec.label, gpus, tuple(spec.gpus), getattr(spec, "estimate_s", None), order,
                        launch, launch_source, ready_at, exit_at, exit_source, mine)
        )  # fmt: skip
    return times


# ---------------------------------------------------------------------------------------------
# Figures (pure)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "median_s": _round(percentile(values, 0.5)),
        "p90_s": _round(percentile(values, 0.9)),
        "max_s": _round(max(values) if values else None),
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def packing(live: Sequence[ServerTimes], gpus_per_host: int, hosts: int) -> dict[str, Any]:
    """(a): makespan, lower bound, and where the GPUs stood idle."""
    gpu_count = gpus_per_host * hosts
    start = min(s.launch for s in live)
    end = max(s.exit for s in live)
    busy_gpu_s = sum(s.busy_s * len(s.gpus) for s in live)
    lower_bound = busy_gpu_s / gpu_count
    makespan = end - start
    idle = {"head": 0.0, "between_servers": 0.0, "tail": 0.0}
    for host in {s.host for s in live}:
        for gpu in range(gpus_per_host):
            holding = sorted((s for s in live if s.host == host and gpu in s.gpus), key=lambda s: s.launch)
            if not holding:
                idle["tail"] += makespan
                continue
            idle["head"] += holding[0].launch - start
            idle["tail"] += end - holding[-1].exit
            for before, after in zip(holding, holding[1:]):
                idle["between_servers"] += max(0.0, after.launch - before.exit)
    per_host = {}
    for host in sorted({s.host for s in live}):
        mine = [s for s in live if s.host == host]
        per_host[host] = {
            "start": min(s.launch for s in mine),
            "end": max(s.exit for s in mine),
            "busy_gpu_s": round(sum(s.busy_s * len(s.gpus) for s in mine), 2),
        }
    return {
        "gpus": gpu_count,
        "servers_launched": len(live),
        "start": start,
        "end": end,
        "makespan_s": round(makespan, 3),
        "busy_gpu_s": round(busy_gpu_s, 2),
        "lower_bound_s": round(lower_bound, 3),
        "ratio": round(makespan / lower_bound, 3),
        "longest_busy_s": round(max(s.busy_s for s in live), 3),
        "longest_label": max(live, key=lambda s: s.busy_s).label,
        "idle_gpu_s": {k: round(v, 2) for k, v in idle.items()},
        "per_host": per_host,
        "launch_sources": _count(s.launch_source for s in live),
        "exit_sources": _count(s.exit_source for s in live),
    }


def _count(items: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def previous_holder(server: ServerTimes, live: Sequence[ServerTimes]) -> ServerTimes | None:
    """The server that last gave up any of this one's GPUs before it launched."""
    before = [s for s in live if s.host == server.host and s is not server and set(s.gpus) & set(server.gpus) and s.exit <= server.launch + 0.05]
    return max(before, key=lambda s: s.exit, default=None)


def slot_overheads(live: Sequence[ServerTimes]) -> dict[str, Any]:
    """(c): per run on a slot, one run's end to the next run's start, start-up excluded; and its parts."""
    within: list[float] = []  # run to run on the same server
    across: list[float] = []  # last run of the server before -> first run of the next, start-up excluded
    stop: list[float] = []  # last run's end -> server process exit
    handover: list[float] = []  # latest exit among the servers it waits for -> launch
    startup: list[float] = []  # launch -> ready (excluded from the overhead)
    after_ready: list[float] = []  # ready -> first run (the agent's warm-up and server facts)
    for server in live:
        runs = server.executed_runs
        within += [b.started - a.ended for a, b in zip(runs, runs[1:])]
        if runs:
            stop.append(server.exit - runs[-1].ended)
        if server.ready is not None:
            startup.append(server.ready - server.launch)
            if runs:
                after_ready.append(runs[0].started - server.ready)
        previous = previous_holder(server, live)
        if previous is None:
            continue
        handover.append(max(0.0, server.launch - previous.exit))
        previous_runs = previous.executed_runs
        if runs and previous_runs and server.ready is not None:
            across.append(runs[0].started - previous_runs[-1].ended - (server.ready - server.launch))
    return {
        "per_run": spread(within + across),
        "run_to_run_same_server": spread(within),
        "server_to_server_startup_excluded": spread(across),
        "parts": {
            "stop (last run end -> GPUs handed back)": spread(stop),
            "handover (GPUs handed back -> next launch on them)": spread(handover),
            "warm-up + facts (ready -> first run)": spread(after_ready),
        },
        "startup_excluded (launch -> ready)": spread(startup),
    }


def replanned(live: Sequence[ServerTimes], gpus_per_host: dict[str, int], handover_s: float) -> float:
    """The makespan fleet's own scheduler would reach had it known each server's real busy time
    (plus a handover between servers): what is left of the ratio is the packing itself."""
    jobs = [Job(f"{s.host}/{s.server_id}", len(s.gpus), s.busy_s + handover_s, s.label) for s in live]
    # The last server on each GPU needs no handover after it.
    return schedule(jobs, [HostSlots(h, n) for h, n in gpus_per_host.items()]).makespan_s - handover_s


def best_order(live: Sequence[ServerTimes], gpus_per_host: dict[str, int], tries: int = 2000) -> float:
    """A reference, not fleet's scheduler: the same greedy placement (each server to the aligned GPU
    block where it starts earliest) over `tries` random server orders plus longest-wall-first, with
    the real busy times; the best makespan found. How much a better order alone could give."""

    def place(order: Sequence[ServerTimes]) -> float:
        free_at = {h: [0.0] * n for h, n in gpus_per_host.items()}
        for server in order:
            start, host, block = min((max(free_at[h][g] for g in block), h, block) for h, n in gpus_per_host.items() for block in aligned_blocks(n, len(server.gpus)))
            for g in block:
                free_at[host][g] = start + server.busy_s
        return max(max(times) for times in free_at.values())

    orders = [sorted(live, key=lambda s: -s.busy_s)]
    orders += [random.Random(seed).sample(live, len(live)) for seed in range(tries)]
    return min(place(order) for order in orders)


REPLAYS = ("shard", "order", "real", "none")


def dispatch_replay(live: Sequence[ServerTimes], gpus_per_host: dict[str, int], planned: set[tuple[str, str]], estimates: str = "shard") -> float | None:
    """The makespan fleet's agent dispatch (fleet.host.agent.dispatch.choose) reaches on each host
    when every server takes its real busy time and hand-overs cost nothing: what is left of the
    ratio with the same choice rules and no overhead. A server the plan did not put on that host
    (a fixed variant, a server moved there) is released at its real launch, the rest at the start.
    `estimates`: "shard" (what the agent had), "order" (the same, but ranked by the controller's
    order instead of longest first), "real" (perfect ones), "none" (the controller's order alone,
    no reservation). None for a tree without the dispatch (before issue 12)."""
    try:
        from fleet.host.agent.dispatch import Running, Waiting, choose
    except ImportError:
        return None
    if not live:
        return 0.0
    start = min(s.launch for s in live)
    end = 0.0
    for host, count in gpus_per_host.items():
        mine = sorted((s for s in live if s.host == host), key=lambda s: s.order)
        if not mine:
            continue
        release = {s.server_id: 0.0 if (host, s.server_id) in planned else s.launch - start for s in mine}
        guess = {s.server_id: {"shard": s.estimate_s or 0.0, "order": s.estimate_s or 0.0, "real": s.busy_s, "none": 0.0}[estimates] for s in mine}
        pending = {s.server_id: s for s in mine}
        running: dict[str, tuple[Running, float]] = {}  # with its real end
        now = 0.0
        while pending or running:
            ready = [Waiting(s.server_id, len(s.gpus), guess[s.server_id], s.order, s.order) for s in pending.values() if release[s.server_id] <= now]
            running_now = [r for r, _ in running.values()]
            while (choice := choose(tuple(range(count)), running_now, ready, now, by_estimate=estimates != "order")) is not None:
                server = pending.pop(choice.server_id)
                running[server.server_id] = (Running(server.server_id, choice.gpus, now + guess[server.server_id], server.order), now + server.busy_s)
                ready = [w for w in ready if w.server_id != choice.server_id]
                running_now = [r for r, _ in running.values()]
            events = [e for _, e in running.values()] + [release[sid] for sid in pending if release[sid] > now]
            now = min(events)
            for sid in [sid for sid, (_, e) in running.items() if e <= now]:
                del running[sid]
        end = max(end, now)
    return end


def first_round(live: Sequence[ServerTimes], planned: set[tuple[str, str]], gpus_per_host: dict[str, int]) -> dict[str, Any] | None:
    mine = [s for s in live if (s.host, s.server_id) in planned]
    if not mine:
        return None
    a = packing(mine, 8, len(gpus_per_host))
    replay = {kind: _round(dispatch_replay(mine, gpus_per_host, planned, kind)) for kind in REPLAYS}
    return {
        "servers": len(mine),
        "makespan_s": a["makespan_s"],
        "lower_bound_s": a["lower_bound_s"],
        "ratio": a["ratio"],
        "longest_busy_s": a["longest_busy_s"],
        "idle_gpu_s": a["idle_gpu_s"],
        "dispatch_replay_s": replay,
        "best_order_s": round(best_order(mine, gpus_per_host), 3),
    }


def estimate_errors(live: Sequence[ServerTimes], plan: dict[str, Any]) -> dict[str, Any]:
    """Real busy time / the plan's estimate (already scaled by the sim speed), per server."""
    estimated = {(r["host"], r["server_id"]): r["server_end_s"] - r["server_start_s"] for r in plan["runs"]}
    ratios = [s.busy_s / estimated[(s.host, s.server_id)] for s in live if estimated.get((s.host, s.server_id))]
    return {"n": len(ratios), "min": _round(min(ratios)), "median": _round(percentile(ratios, 0.5)), "max": _round(max(ratios))}


def constructed_serial(live: Sequence[ServerTimes], handover_s: float) -> float:
    """One server at a time on one host: every server's busy time, and a handover between each two."""
    return sum(s.busy_s for s in live) + handover_s * max(0, len(live) - 1)


# ---------------------------------------------------------------------------------------------
# Running sweeps


@dataclass
class SweepRun:
    outcome: SweepOutcome
    wall_s: float
    began: float  # time.time() when start_sweep was called
    ended: float
    resumes: list[str]  # why the controller had to be resumed
    servers: list[ServerTimes]  # launched, on every host
    never_launched: list[str]
    plan: dict[str, Any]
    results: dict[str, int]  # result files brought back, by status
    cpu: dict[str, dict[str, float]]  # CpuSampler.figures()


class CpuSampler:
    """Once a second: CPU time used by each host's agent and by the sim servers, and how busy the
    machine was. The agent drives every server of its host from one Python process (one GIL): near
    1.0 core it is what slows the hand-overs down."""

    def __init__(self, fleet: TestFleet, hosts: Sequence[str], interval_s: float = 1.0) -> None:
        self.fleet, self.hosts, self.interval_s = fleet, list(hosts), interval_s
        self.samples: list[dict[str, float]] = []  # cores used per category over one interval
        self._ticks: dict[int, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()

    def _used(self, pids: Iterable[int]) -> int:
        """Clock ticks used since the last sample by these processes (all of them, if new)."""
        used = 0
        for pid in pids:
            ticks = process_ticks(pid)
            if ticks is not None:
                used += ticks - self._ticks.get(pid, 0)
                self._ticks[pid] = ticks
        return used

    def _loop(self) -> None:
        clock = os.sysconf("SC_CLK_TCK")
        last, last_machine = time.monotonic(), machine_cpu()
        while not self._done.wait(self.interval_s):
            sample: dict[str, float] = {}
            sims = 0
            for host in self.hosts:
                processes = self.fleet.processes(host) if self.fleet.is_up(host) else {}
                sample[f"agent {host}"] = self._used(p for p, cmd in processes.items() if "fleet.host.agent run" in cmd)
                sims += self._used(p for p, cmd in processes.items() if "fleet.host.engines.sim" in cmd)
            now, machine = time.monotonic(), machine_cpu()
            elapsed = now - last
            self.samples.append(
                {**{k: v / clock / elapsed for k, v in sample.items()}, "sim servers": sims / clock / elapsed,
                 "machine": (machine[0] - last_machine[0]) / (machine[1] - last_machine[1]) * (os.cpu_count() or 1)}
            )  # fmt: skip
            last, last_machine = now, machine

    def figures(self) -> dict[str, dict[str, float]]:
        """Per category: mean and peak cores used over the sampled intervals."""
        keys = self.samples[0].keys() if self.samples else []
        return {k: {"mean_cores": round(statistics.mean(x[k] for x in self.samples), 2),
                    "peak_cores": round(max(x[k] for x in self.samples), 2)} for k in keys}  # fmt: skip


def process_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def run_sweep(fleet: TestFleet, hosts: list[Host], playbook: Path, results_root: Path, poll_s: float) -> SweepRun:
    began = time.time()
    with CpuSampler(fleet, [h.name for h in hosts]) as cpu:
        outcome = start_sweep(playbook, hosts, results_root, poll_interval_s=poll_s)
        resumes: list[str] = []
        # A host driver that gave up leaves its agent working: resume like a user would, and say why.
        while not all(s.phase == "finished" for s in outcome.statuses.values()) and len(resumes) < MAX_RESUMES:
            # The error's end says why (an rsync failure starts with its whole command line).
            resumes.append("; ".join(f"{h}: {s.phase}: ...{s.last_error[-200:]}" for h, s in outcome.statuses.items() if s.phase != "finished"))
            outcome = resume_sweep(outcome.sweep_id, results_root, poll_interval_s=poll_s)
    ended = time.time()
    if not all(s.phase == "finished" for s in outcome.statuses.values()):
        raise SystemExit(f"sweep {outcome.sweep_id} did not finish after {MAX_RESUMES} resumes: {resumes}")
    servers: list[ServerTimes] = []
    never_launched: list[str] = []
    for host in hosts:
        directory = fleet[host.name].persistent_path(sweep_dir(host, outcome.sweep_id))
        if (directory / "shard.json").exists():
            times = read_host(host.name, directory)
            servers += times.servers
            never_launched += [f"{host.name}:{label}" for label in times.never_launched]
    plan = json.loads((outcome.directory / "plan.json").read_text())
    results = _count(json.loads(p.read_text())["status"] for p in outcome.directory.glob("*/runs/*.json"))
    return SweepRun(outcome, ended - began, began, ended, resumes, servers, never_launched, plan, results, cpu.figures())


def exclusive_copy(playbook: Path, directory: Path) -> Path:
    data = yaml.safe_load(playbook.read_text())
    data["isolation"] = "exclusive"
    path = directory / f"{playbook.stem}-exclusive.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# The agent's own checks around a hand-over, as it runs them: after a stop, wait until the port and
# GPUs are free; before the next start, clear stale holders (each asks nvidia-smi twice).
HANDOVER_CHECKS = """
import statistics, sys, time
from fleet.host.agent.services import clear_stale, wait_free
took = []
for _ in range(5):
    began = time.perf_counter()
    wait_free(39999, [0, 1, 2, 3], 30.0)
    clear_stale(39999, [0, 1, 2, 3], 30.0)
    took.append(time.perf_counter() - began)
print(statistics.median(took))
"""


def handover_checks_s(fleet: TestFleet, host: Host) -> float | None:
    """Median time of the agent's port/GPU checks of one hand-over, on an idle host, with the agent
    code the sweep shipped there."""
    argv = ["env", f"PYTHONPATH={agent_dir(host)}", host.engine.python, "-c", HANDOVER_CHECKS]
    done = fleet.exec(host.name, argv, timeout=120)
    return float(done.stdout.strip()) if done.returncode == 0 else None


def _moves(directory: Path) -> dict[str, int]:
    """Servers handed from one host to another in a sweep, by why (tail, repair, lost: ...)."""
    try:
        record = json.loads((directory / "sweep.json").read_text())
    except (OSError, ValueError):
        return {}
    return _count(str(move.get("why", "?")).split(":")[0] for move in record.get("moves", []))


def sweep_on(names: list[str], playbook: Path, workdir: Path, speed: float, poll_s: float, rounds: int = 1) -> tuple[list[SweepRun], float | None]:
    """`rounds` sweeps of the playbook one after the other on the same hosts and results folder:
    each later one plans with the durations the earlier ones measured (results/durations.json)."""
    with start_test_fleet(names) as fleet:
        inventory = fleet.write_inventory(workdir / f"hosts-{len(names)}", engine={"sim_speed": speed})
        hosts = list(load_inventory(inventory))
        runs = [run_sweep(fleet, hosts, playbook, workdir / f"results-{len(names)}", poll_s) for _ in range(rounds)]
        return runs, handover_checks_s(fleet, hosts[0])


# ---------------------------------------------------------------------------------------------
# Report


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def print_report(figures: dict[str, Any]) -> None:
    a, c = figures["packing"], figures["overhead"]
    print()
    print(f"fleet sweep, {figures['playbook']} on {len(figures['hosts'])} x 8-GPU test hosts, sim speed {figures['sim_speed']}, controller poll {figures['poll_s']} s")
    print(f"machine: {figures['cpus']} CPUs shared by both hosts, load average {figures['load_average']}")
    print(f"results: {figures['results']}   controller resumes: {len(figures['resumes'])}")
    for why in figures["resumes"]:
        print(f"  resumed because: {why}")
    print()
    print("(a) packing")
    print(f"  servers launched                 {a['servers_launched']}   (never launched: {', '.join(figures['never_launched']) or 'none'})")
    print(f"  server-busy GPU time             {a['busy_gpu_s']:.1f} GPU s on {a['gpus']} GPUs")
    print(f"  lower bound                      {a['lower_bound_s']:.2f} s")
    print(f"  makespan (first launch -> last exit)   {a['makespan_s']:.2f} s   = {a['ratio']:.3f} x lower bound   (target <= {MAKESPAN_TARGET})")
    for one in figures.get("rounds", []):
        print(
            f"  round {one['round']}: makespan {one['makespan_s']:.2f} s = {one['ratio']:.3f} x lower bound {one['lower_bound_s']:.2f} s"
            f"   (planned with {one['measured_runs']} measured runs; plan said {one['plan_makespan_s']:.1f} s; servers moved: {one['moves'] or 'none'})"
        )
    wall = figures["controller_wall_s"]
    print(
        f"  controller wall (start_sweep -> return) {wall:.2f} s = {wall / a['lower_bound_s']:.3f} x lower bound"
        f"   (+ {figures['controller_head_s']:.2f} s before the first launch: provision, ship, agent start;"
        f" + {figures['controller_tail_s']:.2f} s after the last exit: last poll and pull)"
    )
    plan = figures["plan"]
    print(f"  the plan's own estimate          makespan {plan['makespan_s']:.2f} s / lower bound {plan['lower_bound_s']:.2f} s = {plan['makespan_s'] / plan['lower_bound_s']:.3f}")
    print(
        f"  replanned with the real busy times (fleet's scheduler, perfect estimates):"
        f" {figures['replanned_s']:.2f} s = {figures['replanned_s'] / a['lower_bound_s']:.3f} x;"
        f" with a median handover between servers: {figures['replanned_handover_s']:.2f} s"
        f" = {figures['replanned_handover_s'] / a['lower_bound_s']:.3f} x"
    )
    print(f"  best of 2000 server orders with the real busy times (greedy placement, no handover): {figures['best_order_s']:.2f} s = {figures['best_order_s'] / a['lower_bound_s']:.3f} x")
    replay = figures["dispatch_replay_s"]
    if replay["shard"] is not None:
        print(
            "  the agent's dispatch replayed with the real busy times, no hand-over cost: "
            + ", ".join(f"{kind} estimates {replay[kind]:.2f} s = {replay[kind] / a['lower_bound_s']:.3f} x" for kind in REPLAYS)
        )
    first = figures.get("first_round")
    if first:
        print(
            f"  first round alone ({first['servers']} planned servers, no fixed variant, no move): makespan {first['makespan_s']:.2f} s"
            f" = {first['ratio']:.3f} x its lower bound {first['lower_bound_s']:.2f} s (longest server {first['longest_busy_s']:.2f} s);"
            f" best of 2000 orders {first['best_order_s'] / first['lower_bound_s']:.3f} x"
        )
        if first["dispatch_replay_s"]["shard"] is not None:
            r = first["dispatch_replay_s"]
            print("    its dispatch replayed with real busy times: " + ", ".join(f"{k} estimates {r[k] / first['lower_bound_s']:.3f} x" for k in REPLAYS))
        print("    idle GPU time: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} GPU s" for k, v in first["idle_gpu_s"].items()))
    e = figures["estimate_error"]
    print(f"  real busy time / the plan's estimate, per server: min {e['min']}, median {e['median']}, max {e['max']}")
    print(f"  longest server busy {a['longest_busy_s']:.2f} s ({a['longest_label']}): no schedule ends before it")
    idle = a["idle_gpu_s"]
    print("  idle GPU time inside the makespan: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} GPU s" for k, v in idle.items()))
    for host, h in a["per_host"].items():
        print(f"    {host}: {h['end'] - h['start']:.2f} s from first launch to last exit, {h['busy_gpu_s']:.1f} busy GPU s")
    print(f"  timestamps: launch from {a['launch_sources']}, exit from {a['exit_sources']}")
    print()
    print("(b) against one configuration at a time on one host (the seed's script)")
    b = figures["serial"]
    print(f"  constructed from (a)'s busy times + a median handover each: {b['constructed_s']:.2f} s -> speed-up {b['constructed_speedup']:.2f}x")
    if b.get("measured_s") is not None:
        print(f"  measured (isolation: exclusive, one host): {b['measured_s']:.2f} s first launch -> last exit ({b['measured_wall_s']:.2f} s controller wall) -> speed-up {b['measured_speedup']:.2f}x")
    print(f"  per host (the serial time split evenly over {len(figures['hosts'])} hosts, an upper bound for two serial hosts): speed-up {b['per_host_speedup']:.2f}x")
    print()
    print(f"(c) overhead per run on a slot, start-up excluded (target median < {OVERHEAD_TARGET_S} s)")
    print(f"  {'':50} {'n':>4} {'median':>9} {'p90':>9} {'max':>9}")

    def row(name: str, d: dict[str, Any]) -> None:
        print(f"  {name:50} {d['n']:>4} {_s(d['median_s']):>9} {_s(d['p90_s']):>9} {_s(d['max_s']):>9}")

    row("every run (end -> next start)", c["per_run"])
    row("  run -> run, same server", c["run_to_run_same_server"])
    row("  server -> next server, start-up excluded", c["server_to_server_startup_excluded"])
    for name, d in c["parts"].items():
        row("    " + name, d)
    row("  (excluded) start-up: launch -> ready", c["startup_excluded (launch -> ready)"])
    print(
        f"  of a handover, the agent's port/GPU checks (wait_free + clear_stale, 4 nvidia-smi calls) take"
        f" {_s(figures['handover_checks_idle_s'])} on an idle host; the rest: servers that start at the same moment each run"
        f" their own checks, and the CPUs are shared with every other server (below)"
    )
    print()
    print("CPU during the packed sweep (cores; 1.0 = one CPU busy all the time; the agent is one Python process):")
    print("  " + ", ".join(f"{k} mean {v['mean_cores']:.2f} peak {v['peak_cores']:.2f}" for k, v in figures["cpu"].items()))
    print()
    print(f"figures: {figures['json']}")


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sim speed 0.02, serial schedule constructed, not run")
    parser.add_argument("--speed", type=float, help="the hosts' engine.sim_speed (default 0.1, quick 0.02)")
    parser.add_argument("--poll", type=float, default=0.5, help="the controller's poll interval, s (default 0.5)")
    parser.add_argument("--playbook", type=Path, default=SEED)
    parser.add_argument("--no-serial", action="store_true", help="do not run the exclusive (one at a time) sweep")
    parser.add_argument("--json", type=Path, help="where to write the figures (default /var/tmp/fleet-bench/sweep-<time>.json)")
    parser.add_argument("--rounds", type=int, default=1, help="packed sweeps in a row on the same results folder: later ones plan with the durations earlier ones measured; the last is reported")
    args = parser.parse_args()
    speed = args.speed or (0.02 if args.quick else 0.1)
    json_path = args.json or Path("/var/tmp/fleet-bench") / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}.json"
    why_not = unavailable_reason()
    if why_not:
        print(f"cannot start test hosts: {why_not}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        workdir = Path(tmp)
        print(f"packed sweep on {', '.join(HOSTS)} at sim speed {speed} ...", flush=True)
        rounds, checks_s = sweep_on(HOSTS, args.playbook, workdir / "packed", speed, args.poll, args.rounds)
        packed = rounds[-1]
        serial = None
        if not (args.quick or args.no_serial):
            print("serial sweep (isolation: exclusive) on ct200 ...", flush=True)
            serial = sweep_on(HOSTS[:1], exclusive_copy(args.playbook, workdir), workdir / "serial", speed, args.poll)[0][0]
        by_round = []
        for index, one in enumerate(rounds):
            figures_of = packing(one.servers, 8, len(HOSTS))
            by_round.append(
                {
                    "round": index + 1,
                    "makespan_s": figures_of["makespan_s"],
                    "lower_bound_s": figures_of["lower_bound_s"],
                    "ratio": figures_of["ratio"],
                    "measured_runs": one.plan.get("measured_runs"),
                    "plan_makespan_s": one.plan["makespan_s"],
                    "moves": _moves(one.outcome.directory),
                }
            )

    a = packing(packed.servers, 8, len(HOSTS))
    c = slot_overheads(packed.servers)
    handover = c["parts"]["handover (GPUs handed back -> next launch on them)"]["median_s"] or 0.0
    constructed = constructed_serial(packed.servers, handover)
    per_host_gpus = {h: 8 for h in HOSTS}
    planned_on = {(r["host"], r["server_id"]) for r in packed.plan["runs"]}
    serial_figures: dict[str, Any] = {
        "constructed_s": round(constructed, 3),
        "constructed_speedup": round(constructed / a["makespan_s"], 3),
        "per_host_speedup": round(constructed / len(HOSTS) / a["makespan_s"], 3),
    }
    if serial is not None:
        s = packing(serial.servers, 8, 1)
        serial_figures.update(
            measured_s=s["makespan_s"],
            measured_wall_s=round(serial.wall_s, 3),
            measured_speedup=round(s["makespan_s"] / a["makespan_s"], 3),
            measured_busy_s=round(sum(x.busy_s for x in serial.servers), 2),
            measured_overhead=slot_overheads(serial.servers),
            per_host_speedup=round(s["makespan_s"] / len(HOSTS) / a["makespan_s"], 3),
        )
    figures = {
        "benchmark": "sweep",
        "playbook": args.playbook.name,
        "hosts": HOSTS,
        "sim_speed": speed,
        "poll_s": args.poll,
        "cpus": os.cpu_count(),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "sweep_id": packed.outcome.sweep_id,
        "results": packed.results,
        "resumes": packed.resumes,
        "controller_wall_s": round(packed.wall_s, 3),
        "controller_head_s": round(a["start"] - packed.began, 3),
        "controller_tail_s": round(packed.ended - a["end"], 3),
        "plan": {"makespan_s": packed.plan["makespan_s"], "lower_bound_s": packed.plan["lower_bound_s"]},
        "packing": a,
        "never_launched": packed.never_launched,
        "replanned_s": round(replanned(packed.servers, per_host_gpus, 0.0), 3),
        "replanned_handover_s": round(replanned(packed.servers, per_host_gpus, handover), 3),
        "best_order_s": round(best_order(packed.servers, per_host_gpus), 3),
        "dispatch_replay_s": {kind: _round(dispatch_replay(packed.servers, per_host_gpus, planned_on, kind)) for kind in REPLAYS},
        # The first round alone: the servers the plan put on each host, none of the fixed variants
        # (later rounds, after their originals failed) nor the servers moved between hosts.
        "first_round": first_round(packed.servers, planned_on, per_host_gpus),
        "estimate_error": estimate_errors(packed.servers, packed.plan),
        "overhead": c,
        "cpu": packed.cpu,
        "handover_checks_idle_s": _round(checks_s),
        "serial": serial_figures,
        "servers": [{**{k: v for k, v in s.__dict__.items() if k != "runs"}, "busy_s": s.busy_s, "runs": [{**r.__dict__, "executed": r.executed} for r in s.runs]} for s in packed.servers],
        "rounds": by_round,
        "planned_on": sorted(f"{h}/{sid}" for h, sid in planned_on),
        "json": str(json_path),
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(figures, indent=2) + "\n")
    print_report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
