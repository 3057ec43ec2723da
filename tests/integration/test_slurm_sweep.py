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
    """ct201 loses power while its tasks run: Slurm requeues them (NODE_FAIL), they run again and
    the agent skips every run that already had a result on the shared dir."""
    entry = cluster_entry(slurm, tmp_path, cpus_per_gpu=32)  # one task per node at a time
    fleet = slurm.fleet
    stop = threading.Event()
    box: dict = {}
    lines: list[str] = []

    def sweep() -> None:
        box["outcome"] = start_slurm_sweep(DEMO, entry, tmp_path / "results", connect=connect, poll_interval_s=1.0, stop=stop, say=lines.append)

    runner = threading.Thread(target=sweep, daemon=True)
    runner.start()
    shared = Path(entry.slurm.shared_dir)  # type: ignore[union-attr]
    before: dict[str, bytes] = {}
    try:
        deadline = time.monotonic() + 120
        # Wait for a result written on ct201 by a task that still has runs to go.
        while not before and time.monotonic() < deadline:
            for path in shared.glob("slurm/*/gpu1/task-*/runs/*.json"):
                data = json.loads(path.read_text())
                if data["host"] and path.parent.parent.joinpath("progress.json").exists():
                    progress = json.loads(path.parent.parent.joinpath("progress.json").read_text())
                    if progress.get("state") == "running" and "ct201" in (path.parent.parent / "agent.log").read_text(errors="replace") + "":
                        before = {p.name: p.read_bytes() for p in path.parent.glob("*.json")}
                        break
            time.sleep(0.2)
        assert before, f"no task ran on ct201 in time: {lines}"
        fleet.power_off("ct201")
        time.sleep(15)  # slurmctld notices (SlurmdTimeout 10 s) and requeues
        fleet.power_on("ct201")
        slurm.start_node("ct201", timeout=60)
        runner.join(timeout=240)
        assert not runner.is_alive(), lines
    finally:
        stop.set()
        if not fleet.is_up("ct201"):
            fleet.power_on("ct201")
            slurm.start_node("ct201", timeout=60)
    outcome = box["outcome"]
    assert outcome.problems == [], lines
    results = one_result_per_run(outcome.directory, outcome.record)
    assert {r["status"] for r in results.values()} == {"ok"}
    # A run finished before the failure was not run again: its result file is the same bytes.
    runs_dir = outcome.directory / outcome.record.cluster / "runs"
    for name, data in before.items():
        assert (runs_dir / name).read_bytes() == data
    jobs = ended_jobs(entry, outcome.record.job_ids())
    assert any(j.restarts >= 1 for j in jobs.values()), {k: (j.state, j.restarts) for k, j in jobs.items()}


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
