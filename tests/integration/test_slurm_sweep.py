"""A sweep through a real Slurm cluster (tests/testfleet/slurm.py): the login host over SSH, jobs on
two slurmd nodes running the agent inside their allocations, results back as from an SSH host."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.host.contract import load_result
from fleet.inventory import Host
from fleet.slurm.commands import SlurmClient
from fleet.slurm.jobs import JobState, SlurmJob
from fleet.slurm.sweep import SlurmSweep, cancel_slurm_sweep, resume_slurm_sweep, start_slurm_sweep
from fleet.transport.ssh import SSHTransport
from tests.testfleet import start_test_fleet, unavailable_reason
from tests.testfleet.slurm import SlurmCluster, slurm_unavailable_reason, start_slurm_cluster

pytestmark = pytest.mark.testfleet

DEMO = Path(__file__).resolve().parents[2] / "playbooks" / "demo.yaml"


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    reason = unavailable_reason() or slurm_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with start_test_fleet(["login", "ct200", "ct201"]) as fleet, start_slurm_cluster(fleet, ["ct200", "ct201"], "login") as cluster:
        yield cluster


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
    assert outcome.problems == [] and outcome.record.state == "done", lines
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


def test_a_node_powered_off_mid_sweep_loses_and_duplicates_nothing(slurm: SlurmCluster, tmp_path: Path) -> None:
    """ct201 loses power while its task is between runs: Slurm requeues the task (NODE_FAIL), it
    runs again and the agent skips the run that already had a result on the shared dir."""
    entry = cluster_entry(slurm, tmp_path, cpus_per_gpu=32)  # one task per node at a time
    entry = entry.model_copy(update={"engine": entry.engine.model_copy(update={"sim_speed": 0.06})})
    fleet, results_root = slurm.fleet, tmp_path / "results"
    box: dict = {}
    lines: list[str] = []

    def sweep() -> None:
        box["outcome"] = start_slurm_sweep(DEMO, entry, results_root, connect=connect, poll_interval_s=1.0, say=lines.append)

    runner = threading.Thread(target=sweep, daemon=True)
    runner.start()
    client = SlurmClient(connect(entry))
    before: dict[str, bytes] = {}
    try:
        deadline = time.monotonic() + 120
        while not before and time.monotonic() < deadline:
            time.sleep(0.2)
            if not (results_root / "LATEST").exists() or not (record_path := results_root / (results_root / "LATEST").read_text().strip() / "slurm.json").exists():
                continue
            record = SlurmSweep.load(record_path.parent)
            if not record.job_ids():
                continue
            jobs = client.jobs(record.job_ids())
            (array,) = record.arrays
            for task in array.tasks:
                job = jobs.get(f"{record.job_ids()[0]}_{task.index}")
                runs = Path(record.task_dir(array, task.index)) / "runs"
                done = sorted(runs.glob("*.json")) if runs.is_dir() else []
                if job is not None and job.batch_host == "ct201" and job.state is JobState.RUNNING and 0 < len(done) < len(task.run_ids):
                    before, victim = {p.name: p.read_bytes() for p in done}, job.job_id
                    break
        assert before, f"no task on ct201 was caught between runs: {lines}"
        fleet.power_off("ct201")
        # slurmctld marks the node DOWN (SlurmdTimeout 10 s) and requeues its task.
        while (job := client.jobs([victim]).get(victim)) is None or job.restarts == 0:
            assert time.monotonic() < deadline + 60, f"{victim} not requeued ({job}): {lines}"
            time.sleep(0.5)
        fleet.power_on("ct201")
        slurm.start_node("ct201", timeout=60)
        runner.join(timeout=240)
        assert not runner.is_alive(), lines
    finally:
        if not fleet.is_up("ct201"):
            fleet.power_on("ct201")
            slurm.start_node("ct201", timeout=60)
    outcome = box["outcome"]
    assert outcome.problems == [], lines
    results = one_result_per_run(outcome.directory, outcome.record)
    assert {r["status"] for r in results.values()} == {"ok"}
    # The run finished before the failure was not run again: its result is the same bytes.
    runs_dir = outcome.directory / outcome.record.cluster / "runs"
    for name, data in before.items():
        assert (runs_dir / name).read_bytes() == data
    jobs = ended_jobs(entry, outcome.record.job_ids())
    assert any(j.restarts >= 1 for j in jobs.values()), {k: (j.state, j.restarts) for k, j in jobs.items()}
    assert len(outcome.record.job_ids()) == 1  # Slurm requeued the task; fleet submitted nothing more


def test_resume_after_the_controller_stopped_and_cancel(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path)
    stop = threading.Event()
    stop.set()  # the controller submits and stops watching at once (as after Ctrl-C or a kill)
    first = start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect, poll_interval_s=1.0, stop=stop)
    assert first.interrupted and first.record.job_ids()
    outcome = resume_slurm_sweep(first.directory, connect=connect, poll_interval_s=1.0)
    assert outcome.problems == [] and outcome.record.state == "done"
    one_result_per_run(outcome.directory, outcome.record)
    assert outcome.record.job_ids() == first.record.job_ids()  # reattached, nothing resubmitted
    # Cancel: scancel of every job of the sweep (they are done; Slurm takes it quietly).
    assert cancel_slurm_sweep(first.directory, connect=connect) == first.record.job_ids()
