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
import time
from pathlib import Path

import pytest

from fleet.host.contract import load_result
from fleet.inventory import Host
from fleet.slurm.commands import SlurmClient
from fleet.slurm.jobs import JobState, SlurmJob
from fleet.slurm.sweep import SlurmSweep, SlurmSweepError, SlurmSweepOutcome, cancel_slurm_sweep, resume_slurm_sweep, start_slurm_sweep
from fleet.transport.ssh import SSHTransport
from tests.testfleet.slurm import SHORT_PARTITION, URGENT_PARTITION, SlurmCluster

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"


def cluster_entry(cluster: SlurmCluster, tmp_path: Path, **slurm: object) -> Host:
    """The inventory entry of the cluster: its login host, reached over SSH like any host."""
    login = cluster.login
    shared = cluster.base / "shared" / tmp_path.name  # the cluster's shared fs (every host sees the machine's /var/tmp)
    return Host.model_validate(
        {
            "name": "slurm-lab", "kind": "slurm", "address": login.address, "user": login.user,
            "identity_file": str(login.identity_file), "known_hosts": str(login.known_hosts),
            "engine": {"kind": "sim", "python": sys.executable, "sim_speed": 0.02},
            # 16 CPUs per GPU: two one-GPU tasks fill a node's 32 CPUs, so three spread over both nodes.
            "slurm": {"shared_dir": str(shared), "partition": "gpu", "cpus_per_gpu": 16, "min_time_s": 300, **slurm},
        }
    )  # fmt: skip


def connect(host: Host) -> SSHTransport:
    from fleet.connect import transport_for

    transport = transport_for(host)
    assert isinstance(transport, SSHTransport)
    return transport


def runs_of(record: SlurmSweep) -> set[str]:
    return {run for array in record.arrays for task in array.tasks for run in task.run_ids}


def ended_jobs(entry: Host, job_ids: list[str], timeout: float = 30) -> dict[str, SlurmJob]:
    client = SlurmClient(connect(entry))
    deadline = time.monotonic() + timeout
    jobs = client.jobs(job_ids)
    while not all(j.ended for j in jobs.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        jobs = client.jobs(job_ids)
    return jobs


def one_result_per_run(directory: Path, record: SlurmSweep) -> dict[str, dict]:
    results = {}
    for path in sorted((directory / record.cluster / "runs").glob("*.json")):
        result = load_result(path)
        assert result.run_id not in results
        results[result.run_id] = json.loads(path.read_text())
    assert set(results) == runs_of(record)
    return results


def test_a_sweep_runs_as_job_arrays_on_two_nodes_one_result_per_run(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path)
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
    # Each task's server ran on the GPU Slurm granted it (bound by fleet.slurm.grant).
    granted = {r["server_label"]: tuple(r["gpus"]) for r in results.values()}
    assert all(len(g) == 1 for g in granted.values())
    summary = json.loads((outcome.directory / "summary.json").read_text())
    assert summary["results"] == len(results) and summary["by_status"] == {"ok": len(results)}


class SweepInThread:
    """start_slurm_sweep in a thread, and a way to catch one of its tasks between two runs."""

    def __init__(self, entry: Host, results_root: Path) -> None:
        self.entry, self.results_root, self.lines = entry, results_root, []
        self.outcome: SlurmSweepOutcome | None = None
        self.client = SlurmClient(connect(entry))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.outcome = start_slurm_sweep(DEMO, self.entry, self.results_root, connect=connect, poll_interval_s=1.0, say=self.lines.append)

    def record(self) -> SlurmSweep | None:
        latest = self.results_root / "LATEST"
        if not latest.exists() or not (self.results_root / latest.read_text().strip() / "slurm.json").exists():
            return None
        return SlurmSweep.load(self.results_root / latest.read_text().strip())

    def catch_between_runs(self, node: str, timeout: float = 120) -> tuple[str, dict[str, bytes]]:
        """(job id of a task running on `node` with some but not all results, those results)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.2)
            record = self.record()
            if record is None or not record.job_ids():
                continue
            jobs = self.client.jobs(record.job_ids())
            for array in record.arrays:
                for task in array.tasks:
                    job = jobs.get(f"{array.submissions[0].job_id}_{task.index}")
                    runs = Path(record.task_dir(array, task.index)) / "runs"
                    done = sorted(runs.glob("*.json")) if runs.is_dir() else []
                    if job is not None and job.batch_host == node and job.state is JobState.RUNNING and 0 < len(done) < len(task.run_ids):
                        return job.job_id, {p.name: p.read_bytes() for p in done}
        raise AssertionError(f"no task on {node} was caught between runs: {self.lines}")

    def wait_requeued(self, job_id: str, timeout: float = 60) -> SlurmJob:
        deadline = time.monotonic() + timeout
        while (job := self.client.jobs([job_id]).get(job_id)) is None or job.restarts == 0:
            assert time.monotonic() < deadline, f"{job_id} not requeued ({job}): {self.lines}"
            time.sleep(0.5)
        return job

    def finish(self, timeout: float = 240) -> SlurmSweepOutcome:
        self.thread.join(timeout=timeout)
        assert not self.thread.is_alive() and self.outcome is not None, self.lines
        return self.outcome


def nothing_lost_or_duplicated(entry: Host, outcome: SlurmSweepOutcome, before: dict[str, bytes]) -> dict[str, SlurmJob]:
    assert outcome.problems == [] and outcome.record.state == "finished"
    results = one_result_per_run(outcome.directory, outcome.record)
    assert {r["status"] for r in results.values()} == {"ok"}
    # Each run finished before the fault was not run again: its result is the same bytes.
    runs_dir = outcome.directory / outcome.record.cluster / "runs"
    for name, data in before.items():
        assert (runs_dir / name).read_bytes() == data
    return ended_jobs(entry, outcome.record.job_ids())


def slow_entry(cluster: SlurmCluster, tmp_path: Path) -> Host:
    entry = cluster_entry(cluster, tmp_path, cpus_per_gpu=32)  # one task per node at a time
    return entry.model_copy(update={"engine": entry.engine.model_copy(update={"sim_speed": 0.06})})


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
    entry = slow_entry(slurm, tmp_path)
    # Runs long enough that the task is still in its second run when the scheduler preempts it.
    entry = entry.model_copy(update={"engine": entry.engine.model_copy(update={"sim_speed": 0.2})})
    sweep = SweepInThread(entry, tmp_path / "results")
    victim, before = sweep.catch_between_runs("ct200", timeout=180)
    urgent = slurm.fleet.exec(slurm.login, ["sbatch", "--parsable", f"--partition={URGENT_PARTITION}", "--gres=gpu:8",
                                            "--nodelist=ct200", "--output=/dev/null", "--wrap", "sleep 3"])
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
    program = (
        "import sys; from pathlib import Path; from fleet.inventory import Host; from fleet.slurm.sweep import start_slurm_sweep\n"
        "start_slurm_sweep(Path(sys.argv[1]), Host.model_validate_json(sys.argv[2]), Path(sys.argv[3]), poll_interval_s=1.0)\n"
    )
    controller = subprocess.Popen([sys.executable, "-c", program, str(DEMO), entry.model_dump_json(), str(results_root)], cwd=REPO)
    watcher = SweepInThread.__new__(SweepInThread)  # only its catching: the sweep is the subprocess's
    watcher.entry, watcher.results_root, watcher.lines, watcher.client = entry, results_root, [], SlurmClient(connect(entry))
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


def record_dir(results_root: Path) -> Path:
    return results_root / (results_root / "LATEST").read_text().strip()


def test_a_request_no_node_can_hold_is_refused_before_submitting(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path, constraint="h200")
    with pytest.raises(SlurmSweepError, match=r"gpu1 \(3 servers\): no node of partition 'gpu' has the features \['h200'\]"):
        start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect)
    queued = slurm.run(["squeue", "-h", "-o", "%j"]).stdout
    assert "fleet-demo" not in queued


def test_a_job_that_can_never_start_is_cancelled_and_reported(slurm: SlurmCluster, tmp_path: Path) -> None:
    """Asked for more time than the partition allows: Slurm keeps it pending for ever (22.05 says PartitionConfig)."""
    entry = cluster_entry(slurm, tmp_path, partition=SHORT_PARTITION, min_time_s=300)
    outcome = start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect, poll_interval_s=1.0)
    assert outcome.record.state == "incomplete" and len(outcome.problems) == 3
    assert all(re.search(r"job \d+_\[0-2\] pends for Partition(Config|TimeLimit)", p) for p in outcome.problems), outcome.problems
    (job_id,) = outcome.record.job_ids()
    assert {j.state for j in ended_jobs(entry, [job_id]).values()} == {JobState.CANCELLED}


def test_resume_after_the_controller_stopped_and_cancel(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path)
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

    entry = cluster_entry(slurm, tmp_path)
    hosts_dir = tmp_path / "hosts"
    hosts_dir.mkdir()
    (hosts_dir / "slurm-lab.yaml").write_text(yaml.safe_dump(entry.model_dump(mode="json", exclude_defaults=True) | {"kind": "slurm"}))
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-m", "fleet", "sweep", "-p", str(DEMO), "--hosts", "slurm-lab", "--poll", "1"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    directory = record_dir(tmp_path / "results")
    record = SlurmSweep.load(directory)
    one_result_per_run(directory, record)
    assert "results: " in done.stderr and "submitted gpu1 tasks (0, 1, 2)" in done.stderr
    cancelled = subprocess.run([sys.executable, "-m", "fleet", "sweep", "--cancel", directory.name], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=60)
    assert cancelled.returncode == 0 and f"scancel {record.job_ids()[0]}" in cancelled.stderr, cancelled.stderr
    assert SlurmSweep.load(directory).state == "cancelled"
