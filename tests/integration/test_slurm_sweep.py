"""A sweep through a real Slurm cluster (tests/testfleet/slurm.py): the login host over SSH, jobs on
two slurmd nodes running the agent inside their allocations, results back as from an SSH host."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fleet.inventory import Host
from fleet.slurm.jobs import JobState
from fleet.slurm.sweep import SlurmSweep, SlurmSweepError, cancel_slurm_sweep, resume_slurm_sweep, start_slurm_sweep
from tests.integration.slurm_sweeps import (
    DEMO,
    REPO,
    SweepInThread,
    cluster_entry,
    connect,
    controller_process,
    ended_jobs,
    nothing_lost_or_duplicated,
    one_result_per_run,
    record_dir,
)
from tests.testfleet.slurm import SHORT_PARTITION, URGENT_PARTITION, SlurmCluster

pytestmark = pytest.mark.testfleet


def test_a_sweep_runs_as_job_arrays_on_two_nodes_one_result_per_run(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path.name)
    lines: list[str] = []
    outcome = start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect, poll_interval_s=1.0, say=lines.append)
    assert outcome.problems == [] and outcome.record.state == "finished", lines
    results = one_result_per_run(outcome.directory, outcome.record)
    assert {r["status"] for r in results.values()} == {"ok"}
    (array,) = outcome.record.arrays
    assert (array.key, len(array.tasks), len(array.submissions)) == ("gpu1", 3, 1)
    # The sweep is done when every run has a result; the agents then stop and their tasks end.
    jobs = ended_jobs(entry, [array.submissions[0].job_id])
    assert {j.state for j in jobs.values()} == {JobState.COMPLETED}
    assert {j.nodes for j in jobs.values()} == {"ct200", "ct201"}  # the scheduler spread them
    # Each task's server ran on the GPU Slurm granted it (bound by fleet.host.grant).
    granted = {r["server_label"]: tuple(r["gpus"]) for r in results.values()}
    assert all(len(g) == 1 for g in granted.values())
    summary = json.loads((outcome.directory / "summary.json").read_text())
    assert summary["results"] == len(results) and summary["by_status"] == {"ok": len(results)}


def slow_entry(cluster: SlurmCluster, tmp_path: Path, speed: float = 0.06) -> Host:
    return cluster_entry(cluster, tmp_path.name, speed=speed, cpus_per_gpu=32)  # one task per node at a time


def test_a_node_powered_off_mid_sweep_loses_and_duplicates_nothing(slurm: SlurmCluster, tmp_path: Path) -> None:
    """ct201 loses power while its task is between runs: Slurm requeues the task (NODE_FAIL), it
    runs again and the agent skips the run that already had a result on the shared dir."""
    entry, fleet = slow_entry(slurm, tmp_path), slurm.fleet
    sweep = SweepInThread(entry, tmp_path / "results")
    try:
        victim, before = sweep.catch_between_runs("ct201")
        fleet.power_off("ct201")
        sweep.wait_requeued(victim)  # slurmctld marks the node DOWN (SlurmdTimeout 10 s) and requeues the task
        fleet.power_on("ct201")
        slurm.start_node("ct201", timeout=60)
        outcome = sweep.finish()
    finally:
        if not fleet.is_up("ct201"):
            fleet.power_on("ct201")
            slurm.start_node("ct201", timeout=60)
    jobs = nothing_lost_or_duplicated(entry, outcome, before)
    assert jobs[victim].restarts >= 1
    assert len(outcome.record.job_ids()) == 1  # Slurm requeued the task; fleet submitted nothing more


def test_a_preempted_task_is_requeued_and_loses_and_duplicates_nothing(slurm: SlurmCluster, tmp_path: Path) -> None:
    """A job of the higher-tier partition takes ct200's GPUs: Slurm preempts fleet's task there."""
    # Runs long enough that the task is still in its second run when the scheduler preempts it.
    entry = slow_entry(slurm, tmp_path, speed=0.2)
    sweep = SweepInThread(entry, tmp_path / "results")
    victim, before = sweep.catch_between_runs("ct200", timeout=180)
    urgent = slurm.fleet.exec(slurm.login, ["sbatch", "--parsable", f"--partition={URGENT_PARTITION}", "--gres=gpu:8", "--nodelist=ct200", "--output=/dev/null", "--wrap", "sleep 3"])
    assert urgent.returncode == 0, urgent.stderr
    outcome = sweep.finish()
    jobs = nothing_lost_or_duplicated(entry, outcome, before)
    # Graceful preemption (the test cluster's GraceTime + preempt_send_user_signal): the agent
    # stops on its signal, the task ends COMPLETED with PreemptTime set, fleet submits it again.
    assert jobs[victim].preempted and jobs[victim].state is JobState.COMPLETED, jobs[victim]
    resubmitted = outcome.record.arrays[0].submissions[1:]
    assert [s.tasks for s in resubmitted] == [[int(victim.split("_")[1])]]
    assert slurm.wait_job(urgent.stdout.strip(), ["COMPLETED"])["NodeList"] == "ct200"


def test_a_killed_controller_is_resumed_and_loses_and_duplicates_nothing(slurm: SlurmCluster, tmp_path: Path) -> None:
    """The controller process gets SIGKILL mid-sweep; the jobs go on; `resume` reattaches."""
    entry = slow_entry(slurm, tmp_path)
    results_root = tmp_path / "results"
    controller = controller_process(DEMO, entry, results_root)
    watcher = SweepInThread(entry, results_root, start=False)  # only its catching: the sweep is the subprocess's
    try:
        _, before = watcher.catch_between_runs("ct200")
    finally:
        controller.send_signal(signal.SIGKILL)
        controller.wait(timeout=10)
    record = watcher.record()
    assert record is not None and record.state == "running"
    submitted = record.job_ids()
    outcome = resume_slurm_sweep(record_dir(results_root), connect=connect, poll_interval_s=1.0)
    nothing_lost_or_duplicated(entry, outcome, before)
    assert outcome.record.job_ids() == submitted  # reattached to the same jobs, none submitted again


def test_a_request_no_node_can_hold_is_refused_before_submitting(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path.name, constraint="h200")
    with pytest.raises(SlurmSweepError, match=r"gpu1 \(3 servers\): no node of partition 'gpu' has the features \['h200'\]"):
        start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect)
    queued = slurm.run(["squeue", "-h", "-o", "%j"]).stdout
    assert "fleet-demo" not in queued


def test_a_job_that_can_never_start_is_cancelled_and_reported(slurm: SlurmCluster, tmp_path: Path) -> None:
    """Asked for more time than the partition allows: Slurm keeps it pending for ever (22.05 says PartitionConfig)."""
    entry = cluster_entry(slurm, tmp_path.name, partition=SHORT_PARTITION, min_time_s=300)
    outcome = start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect, poll_interval_s=1.0)
    assert outcome.record.state == "incomplete" and len(outcome.problems) == 3
    assert all(re.search(r"job \d+_\[0-2\] pends for Partition(Config|TimeLimit)", p) for p in outcome.problems), outcome.problems
    (job_id,) = outcome.record.job_ids()
    assert {j.state for j in ended_jobs(entry, [job_id]).values()} == {JobState.CANCELLED}


def test_resume_after_the_controller_stopped_and_cancel(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path.name)
    stop = threading.Event()
    stop.set()  # the controller submits and stops watching at once (as after Ctrl-C or a kill)
    first = start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect, poll_interval_s=1.0, stop=stop)
    assert first.interrupted and first.record.job_ids()
    outcome = resume_slurm_sweep(first.directory, connect=connect, poll_interval_s=1.0)
    assert outcome.problems == [] and outcome.record.state == "finished"
    one_result_per_run(outcome.directory, outcome.record)
    assert outcome.record.job_ids() == first.record.job_ids()  # reattached, nothing resubmitted
    # Cancel: scancel of every job of the sweep (they are done; Slurm takes it quietly).
    assert cancel_slurm_sweep(first.directory, connect=connect) == first.record.job_ids()


def test_fleet_sweep_hosts_slurm_entry_then_cancel(slurm: SlurmCluster, tmp_path: Path) -> None:
    """The command line: `fleet sweep --hosts slurm-lab` with the entry in hosts/, then `--cancel`."""
    import yaml

    entry = cluster_entry(slurm, tmp_path.name)
    hosts_dir = tmp_path / "hosts"
    hosts_dir.mkdir()
    (hosts_dir / "slurm-lab.yaml").write_text(yaml.safe_dump(entry.model_dump(mode="json", exclude_defaults=True) | {"kind": "slurm"}))
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "fleet", "sweep", "-p", str(DEMO), "--hosts", "slurm-lab", "--poll", "1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    directory = record_dir(tmp_path / "results")
    record = SlurmSweep.load(directory)
    one_result_per_run(directory, record)
    assert "results: " in done.stderr and "submitted gpu1 tasks (0, 1, 2)" in done.stderr
    cancelled = subprocess.run([sys.executable, "-m", "fleet", "sweep", "--cancel", directory.name], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert cancelled.returncode == 0 and f"scancel {record.job_ids()[0]}" in cancelled.stderr, cancelled.stderr
    assert SlurmSweep.load(directory).state == "cancelled"
