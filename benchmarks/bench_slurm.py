"""Issue 15's must-show: the seed matrix through Slurm against the same matrix over SSH, on the
same two test hosts, and the fault table of a Slurm sweep.

(a) `playbooks/qwen36-specdec.yaml` (24 server configurations x 4 workloads, sim engine) as a
    sweep over SSH on ct200 and ct201 (`start_sweep`, fleet packs the GPUs), then through the
    real Slurm cluster whose two nodes are those same hosts (tests/testfleet/slurm.py: slurmctld
    on the machine, slurmd inside ct200 and ct201, `login` the login host; `start_slurm_sweep`,
    Slurm places the jobs). Both start from an empty results folder (no quarantine, no measured
    durations), at the same sim speed. Shown side by side: jobs submitted, results by status,
    fixes, makespan (the call's wall time, and the work span: first run started to last ended),
    and whether both did the same work: the same run ids (the plan's and the fixed variants'),
    the same fixes. A run's status may differ where timing decides it: a configuration
    quarantined after its first crash is `skipped` where its server had not started yet and
    `failed` where it had (fleet packs and Slurm schedules them in different orders).
(b) Faults of a Slurm sweep of `playbooks/demo.yaml` (slower sim, so a task is caught between
    two runs): a node powered off (NODE_FAIL, Slurm requeues), the time limit (the running task's
    limit cut to a minute with `scontrol update`, as an admin may: fleet's --signal stops the
    agent, fleet resubmits with a longer limit), preemption (a job of the higher-tier partition
    takes the node: Slurm requeues), the controller killed (SIGKILL; `resume` reattaches). Per
    fault: runs lost (planned runs without a result), duplicated (a run whose result was written
    twice: a result from before the fault whose bytes changed, or a run whose completion the
    agents logged more than once), jobs submitted, time to recover (fault to the sweep's end).

    python benchmarks/bench_slurm.py                     # sim speed 0.05: ~6 min
    python benchmarks/bench_slurm.py --quick             # sim speed 0.02: ~4 min
    python benchmarks/bench_slurm.py --rows sweep        # (a) only; --rows faults: (b) only

Needs root (test hosts, slurmctld/slurmd/munge: see tests/testfleet/slurm.py). Figures go to
--json (default /var/tmp/fleet-bench/slurm-<time>.json); nothing is written in the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.host.contract import load_result  # noqa: E402
from fleet.inventory import Host, load_inventory  # noqa: E402
from fleet.slurm.commands import SlurmClient  # noqa: E402
from fleet.slurm.sweep import SlurmSweep, SlurmSweepOutcome, resume_slurm_sweep, start_slurm_sweep  # noqa: E402
from fleet.sweep.controller import start_sweep  # noqa: E402
from tests.integration.slurm_sweeps import (  # noqa: E402
    DEMO,
    GPU,
    SweepInThread,
    cluster_entry,
    connect,
    controller_process,
    rewritten_results,
    time_limit_playbook,
)
from tests.testfleet import start_test_fleet, unavailable_reason  # noqa: E402
from tests.testfleet.slurm import CPUS_PER_NODE, GPUS_PER_NODE, URGENT_PARTITION, SlurmCluster, slurm_unavailable_reason, start_slurm_cluster  # noqa: E402

SEED = REPO / "playbooks" / "qwen36-specdec.yaml"
NODES = ["ct200", "ct201"]
RUN_LINE = re.compile(r"fleet-agent INFO run (\S+): (\w+)")


def result_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*/runs/*.json"))


def work_done(directory: Path) -> dict[str, Any]:
    """What a sweep folder holds: results by status, run ids, the work span."""
    results = [load_result(path) for path in result_files(directory)]
    by_status: dict[str, int] = {}
    for result in results:
        by_status[result.status.value] = by_status.get(result.status.value, 0) + 1
    summary = json.loads((directory / "summary.json").read_text())
    # An applied fix by the run it fixes and the variant it made; a quarantine by its key (which
    # of the configuration's crashed runs came back first, and so triggered it, is timing).
    fixes = sorted((f["run_id"] if f["action"] != "quarantined" else f["description"], f["action"], f.get("variant_id") or "") for f in summary.get("fixes", []))
    ran = [r for r in results if r.ended_at > r.started_at]
    span = max(r.ended_at for r in ran) - min(r.started_at for r in ran) if ran else 0.0
    return {
        "results": len(results), "by_status": dict(sorted(by_status.items())), "run_ids": sorted(r.run_id for r in results),
        "status_of": {r.run_id: r.status.value for r in results}, "labels": {r.run_id: r.label for r in results},
        "fixes": fixes, "fix_actions": _count(a for _, a, _ in fixes), "span_s": round(span, 1), "state": summary.get("state"),
    }  # fmt: skip


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------
# (a) the seed matrix, SSH against Slurm


def ssh_sweep(cluster: SlurmCluster, workdir: Path, speed: float, poll: float) -> dict[str, Any]:
    inventory = cluster.fleet.write_inventory(workdir / "hosts", engine={"sim_speed": speed})
    hosts = [h for h in load_inventory(inventory) if h.name in NODES]
    began = time.time()
    outcome = start_sweep(SEED, hosts, workdir / "results-ssh", poll_interval_s=poll)
    wall = time.time() - began
    figures = work_done(outcome.directory)
    figures.update(wall_s=round(wall, 1), jobs="-", hosts={n: s.phase.value for n, s in outcome.statuses.items()})
    return figures


def slurm_sweep(cluster: SlurmCluster, workdir: Path, speed: float, poll: float) -> dict[str, Any]:
    # 4 CPUs a GPU: eight one-GPU tasks fill a node's 32 CPUs as they fill its 8 GPUs.
    entry = cluster_entry(cluster, "seed", speed=speed, gpu_model=GPU, cpus_per_gpu=CPUS_PER_NODE // GPUS_PER_NODE)
    lines: list[str] = []
    began = time.time()
    outcome = start_slurm_sweep(SEED, entry, workdir / "results-slurm", connect=connect, poll_interval_s=poll, say=lines.append)
    wall = time.time() - began
    figures = work_done(outcome.directory)
    jobs = SlurmClient(connect(entry)).jobs(outcome.record.job_ids())
    nodes = _count(j.nodes for j in jobs.values() if j.nodes)
    figures.update(
        wall_s=round(wall, 1), jobs=len(outcome.record.job_ids()), tasks=sum(len(a.tasks) for a in outcome.record.arrays),
        arrays={a.key: [len(s.tasks) for s in a.submissions] for a in outcome.record.arrays}, tasks_per_node=nodes, problems=outcome.problems,
        states=_count(j.state.value for j in jobs.values()),
    )  # fmt: skip
    return figures


def compare(ssh: dict[str, Any], slurm: dict[str, Any]) -> dict[str, Any]:
    same_runs = ssh["run_ids"] == slurm["run_ids"]
    differ = {r: (ssh["status_of"].get(r), slurm["status_of"].get(r)) for r in set(ssh["run_ids"]) | set(slurm["run_ids"])
              if ssh["status_of"].get(r) != slurm["status_of"].get(r)}  # fmt: skip
    return {
        "same_run_ids": same_runs, "only_ssh": sorted(set(ssh["run_ids"]) - set(slurm["run_ids"])),
        "only_slurm": sorted(set(slurm["run_ids"]) - set(ssh["run_ids"])), "same_fixes": ssh["fixes"] == slurm["fixes"],
        "status_differs": {ssh["labels"].get(r) or slurm["labels"].get(r): f"ssh {a}, slurm {b}" for r, (a, b) in sorted(differ.items())},
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# (b) faults


def completions(record: SlurmSweep) -> dict[str, int]:
    """How often the agents logged each run's completion, over every task's Slurm output file."""
    counts: dict[str, int] = {}
    for array in record.arrays:
        for path in Path(record.array_dir(array)).glob("slurm-*.out"):
            for match in RUN_LINE.finditer(path.read_text(errors="replace")):
                counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def fault_row(name: str, entry: Host, outcome: SlurmSweepOutcome, before: dict[str, bytes], injected: float, ended: float) -> dict[str, Any]:
    runs = {r for a in outcome.record.arrays for t in a.tasks for r in t.run_ids}
    local = outcome.directory / outcome.record.cluster / "runs"
    have = {p.stem for p in local.glob("*.json")}
    rewritten = rewritten_results(outcome, before)
    logged_twice = [label for label, n in completions(outcome.record).items() if n > 1]
    jobs = SlurmClient(connect(entry)).jobs(outcome.record.job_ids())
    return {
        "fault": name, "runs": len(runs), "lost": len(runs - have), "duplicated": len(rewritten) + len(logged_twice),
        "results_before_fault": len(before), "jobs_submitted": len(outcome.record.job_ids()),
        "requeues": sum(j.restarts for j in jobs.values()), "recovered_s": round(ended - injected, 1), "state": outcome.record.state,
        "problems": outcome.problems,
    }  # fmt: skip


def fault_node(cluster: SlurmCluster, entry: Host, root: Path) -> dict[str, Any]:
    sweep = SweepInThread(entry, root)
    victim, before = sweep.catch_between_runs("ct201", timeout=180)
    injected = time.time()
    cluster.fleet.power_off("ct201")
    sweep.wait_requeued(victim, timeout=90)
    cluster.fleet.power_on("ct201")
    cluster.start_node("ct201", timeout=90)
    outcome = sweep.finish()
    return fault_row("node powered off (NODE_FAIL, requeued by Slurm)", entry, outcome, before, injected, time.time())


def fault_time_limit(cluster: SlurmCluster, entry: Host, root: Path) -> dict[str, Any]:
    # One task of seven ~6 s runs (the test's playbook): once it has a result, more is left than
    # the 30 s between slurmctld's time-limit checks, so the check finds it running.
    root.mkdir(parents=True, exist_ok=True)
    sweep = SweepInThread(entry, root, time_limit_playbook(root))
    victim, before = sweep.catch_between_runs(sweep.node_of_first_task(), timeout=180)
    injected = time.time()
    done = cluster.scontrol("update", f"JobId={victim}", "TimeLimit=1")
    if done.returncode != 0:
        raise SystemExit(f"scontrol update failed: {done.stderr}")
    outcome = sweep.finish()
    return fault_row("time limit (cut to 1 min mid-run; resubmitted with a longer one)", entry, outcome, before, injected, time.time())


def fault_preempt(cluster: SlurmCluster, entry: Host, root: Path) -> dict[str, Any]:
    slow = entry.model_copy(update={"engine": entry.engine.model_copy(update={"sim_speed": 0.2})})
    sweep = SweepInThread(slow, root)
    victim, before = sweep.catch_between_runs("ct200", timeout=180)
    injected = time.time()
    urgent = cluster.fleet.exec(cluster.login, ["sbatch", "--parsable", f"--partition={URGENT_PARTITION}", "--gres=gpu:8", "--nodelist=ct200",
                                                "--output=/dev/null", "--wrap", "sleep 3"])  # fmt: skip
    if urgent.returncode != 0:
        raise SystemExit(f"sbatch of the urgent job failed: {urgent.stderr}")
    outcome = sweep.finish()
    return fault_row("preemption (higher-tier job on the node; graceful, resubmitted)", slow, outcome, before, injected, time.time())


def fault_controller(cluster: SlurmCluster, entry: Host, root: Path) -> dict[str, Any]:
    controller = controller_process(DEMO, entry, root)
    sweep = SweepInThread(entry, root, start=False)
    try:
        _, before = sweep.catch_between_runs("ct200", timeout=180)
    finally:
        injected = time.time()
        controller.send_signal(signal.SIGKILL)
        controller.wait(timeout=10)
    record = sweep.record()
    assert record is not None
    directory = root / (root / "LATEST").read_text().strip()
    outcome = resume_slurm_sweep(directory, connect=connect, poll_interval_s=1.0)
    return fault_row("controller killed (SIGKILL mid-sweep; resumed by job id)", entry, outcome, before, injected, time.time())


FAULTS: dict[str, Callable[[SlurmCluster, Host, Path], dict[str, Any]]] = {
    "node": fault_node,
    "time_limit": fault_time_limit,
    "preempt": fault_preempt,
    "controller": fault_controller,
}


# ---------------------------------------------------------------------------------------------
# Report


def print_sweeps(ssh: dict[str, Any], slurm: dict[str, Any], same: dict[str, Any]) -> None:
    print("\n(a) seed matrix (playbooks/qwen36-specdec.yaml), two 8-GPU test hosts, sim engine\n")
    print("| path | jobs submitted | results | by status | fixes | makespan (wall) | work span |")
    print("|---|---|---|---|---|---|---|")
    for name, f in (("SSH (fleet packs)", ssh), ("Slurm (2 slurmd nodes)", slurm)):
        by_status = ", ".join(f"{n} {s}" for s, n in f["by_status"].items())
        fixes = ", ".join(f"{n} {a}" for a, n in f["fix_actions"].items())
        print(f"| {name} | {f['jobs']} | {f['results']} | {by_status} | {len(f['fixes'])} ({fixes}) | {f['wall_s']} s | {f['span_s']} s |")
    print(f"\nSlurm / SSH makespan: {slurm['wall_s'] / ssh['wall_s']:.2f}x (wall), {slurm['span_s'] / max(ssh['span_s'], 0.1):.2f}x (work span)")
    print(f"same run ids: {same['same_run_ids']} (only SSH: {same['only_ssh']}, only Slurm: {same['only_slurm']}); same fixes: {same['same_fixes']}")
    if same["status_differs"]:
        print("status differs (timing: quarantined before or after its server started):")
        for label, text in same["status_differs"].items():
            print(f"  {label}: {text}")
    print(f"Slurm: {slurm['tasks']} array tasks, submissions per array {slurm['arrays']}, tasks per node {slurm['tasks_per_node']}, final states {slurm['states']}")


def print_faults(rows: list[dict[str, Any]]) -> None:
    print("\n(b) faults of a Slurm sweep (playbooks/demo.yaml), real slurmctld/slurmd\n")
    print("| fault | runs | results before the fault | runs lost | duplicated | jobs submitted | requeues by Slurm | fault -> sweep done | sweep |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['runs']} | {r['results_before_fault']} | {r['lost']} | {r['duplicated']} | {r['jobs_submitted']} | {r['requeues']} | {r['recovered_s']} s | {r['state']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sim speed 0.02 for the seed matrix")
    parser.add_argument("--speed", type=float, help="engine.sim_speed of the seed matrix (default 0.05, quick 0.02)")
    parser.add_argument("--poll", type=float, default=1.0, help="the controllers' poll interval, s (default 1)")
    parser.add_argument("--rows", default="sweep,faults", help="sweep, faults or both (default)")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"which faults (default all: {','.join(FAULTS)})")
    parser.add_argument("--json", type=Path, help="where to write the figures (default /var/tmp/fleet-bench/slurm-<time>.json)")
    args = parser.parse_args()
    speed = args.speed or (0.02 if args.quick else 0.05)
    rows = set(args.rows.split(","))
    json_path = args.json or Path("/var/tmp/fleet-bench") / f"slurm-{time.strftime('%Y%m%d-%H%M%S')}.json"
    why_not = unavailable_reason() or slurm_unavailable_reason()
    if why_not:
        print(f"cannot build the test cluster: {why_not}", file=sys.stderr)
        return 2
    figures: dict[str, Any] = {"benchmark": "slurm", "sim_speed": speed, "poll_s": args.poll, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp, start_test_fleet(["login", *NODES]) as fleet, \
            start_slurm_cluster(fleet, NODES, "login") as cluster:  # fmt: skip
        workdir = Path(tmp)
        if "sweep" in rows:
            print(f"seed matrix over SSH on {', '.join(NODES)} at sim speed {speed} ...", flush=True)
            ssh = ssh_sweep(cluster, workdir / "ssh", speed, args.poll)
            print("seed matrix through Slurm on the same hosts ...", flush=True)
            slurm = slurm_sweep(cluster, workdir / "slurm", speed, args.poll)
            same = compare(ssh, slurm)
            figures["sweep"] = {"ssh": ssh, "slurm": slurm, "same": same}
        if "faults" in rows:
            figures["faults"] = []
            for name in args.faults.split(","):
                print(f"fault: {name} ...", flush=True)
                entry = cluster_entry(cluster, f"fault-{name}", speed=0.06, gpu_model=GPU, cpus_per_gpu=32)  # one task per node at a time, slow enough to catch
                figures["faults"].append(FAULTS[name](cluster, entry, workdir / f"fault-{name}"))
    figures["load_after"] = os.getloadavg()
    if "sweep" in figures:
        print_sweeps(figures["sweep"]["ssh"], figures["sweep"]["slurm"], figures["sweep"]["same"])
    if "faults" in figures:
        print_faults(figures["faults"])
    print(f"\nload average before {figures['load_before']}, after {figures['load_after']}")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for side in ("ssh", "slurm"):
        if "sweep" in figures:
            for key in ("status_of", "labels"):
                figures["sweep"][side].pop(key, None)
    json_path.write_text(json.dumps(figures, indent=1, default=str))
    print(f"figures: {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
