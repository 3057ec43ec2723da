"""What the Slurm sweep tests and `benchmarks/bench_slurm.py` share: the cluster's inventory entry,
its login transport, a sweep run in a thread with one of its tasks caught between two runs, and
the checks that no run was lost or run twice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from fleet.host.contract import load_result
from fleet.inventory import Host
from fleet.slurm.commands import SlurmClient
from fleet.slurm.jobs import JobState, SlurmJob
from fleet.slurm.sweep import SlurmSweep, SlurmSweepOutcome, start_slurm_sweep
from fleet.transport.ssh import SSHTransport
from tests.integration.waiting import wait_for
from tests.testfleet.slurm import SlurmCluster

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"  # what the nodes' fake GPU tools report (SM 12.0)


def cluster_entry(cluster: SlurmCluster, shared: str, *, speed: float = 0.02, gpu_model: str | None = None, **slurm: object) -> Host:
    """The inventory entry of the cluster: its login host, reached over SSH like any host; `shared`
    names its dir on the cluster's shared fs (every test host sees the machine's /var/tmp)."""
    login = cluster.login
    entry: dict[str, Any] = {
        "name": "slurm-lab", "kind": "slurm", "address": login.address, "user": login.user,
        "identity_file": str(login.identity_file), "known_hosts": str(login.known_hosts),
        "engine": {"kind": "sim", "python": sys.executable, "sim_speed": speed},
        # 16 CPUs per GPU: two one-GPU tasks fill a node's 32 CPUs, so three spread over both nodes.
        "slurm": {"shared_dir": str(cluster.base / "shared" / shared), "partition": "gpu", "cpus_per_gpu": 16, "min_time_s": 300, **slurm},
    }  # fmt: skip
    host = Host.model_validate(entry)
    if gpu_model is not None:
        host = host.model_copy(update={"gpus": host.gpus.model_copy(update={"model": gpu_model})})
    return host


def connect(host: Host) -> SSHTransport:
    from fleet.connect import transport_for

    transport = transport_for(host)
    assert isinstance(transport, SSHTransport)
    return transport


def runs_of(record: SlurmSweep) -> set[str]:
    return {run for array in record.arrays for task in array.tasks for run in task.run_ids}


def record_dir(results_root: Path) -> Path:
    return results_root / (results_root / "LATEST").read_text().strip()


def ended_jobs(entry: Host, job_ids: list[str], timeout: float = 30) -> dict[str, SlurmJob]:
    client = SlurmClient(connect(entry))
    deadline = time.monotonic() + timeout
    jobs = client.jobs(job_ids)
    while not all(j.ended for j in jobs.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        jobs = client.jobs(job_ids)
    return jobs


def one_result_per_run(directory: Path, record: SlurmSweep) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for path in sorted((directory / record.cluster / "runs").glob("*.json")):
        result = load_result(path)
        assert result.run_id not in results
        results[result.run_id] = json.loads(path.read_text())
    assert set(results) == runs_of(record)
    return results


def rewritten_results(outcome: SlurmSweepOutcome, before: dict[str, bytes]) -> list[str]:
    """Results pulled before a fault whose bytes changed since: runs run again."""
    runs_dir = outcome.directory / outcome.record.cluster / "runs"
    return [name for name, data in before.items() if (runs_dir / name).read_bytes() != data]


def nothing_lost_or_duplicated(entry: Host, outcome: SlurmSweepOutcome, before: dict[str, bytes]) -> dict[str, SlurmJob]:
    assert outcome.problems == [] and outcome.record.state == "finished"
    results = one_result_per_run(outcome.directory, outcome.record)
    assert {r["status"] for r in results.values()} == {"ok"}
    assert rewritten_results(outcome, before) == []  # a run finished before the fault was not run again
    return ended_jobs(entry, outcome.record.job_ids())


def time_limit_playbook(tmp_path: Path) -> Path:
    """One server, seven runs of about 6 s each at sim speed 0.06: once its first result is in,
    some 35 s of work are left, more than the period of slurmctld's time-limit check (30 s), so
    the check always finds the task running."""
    data = yaml.safe_load((REPO / "playbooks" / "demo.yaml").read_text())
    data.update(name="slurm-limit", methods={"autoregressive": {}})
    data["workloads"] = {f"w{i}": {"kind": "short", "prompts": [prompt], "max_new_tokens": 640, "requests": 4} for i, prompt in enumerate(["fib", "qsort", "arith", "json", "fib", "qsort", "arith"])}
    path = tmp_path / "slurm-limit.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def controller_process(playbook: Path, entry: Host, results_root: Path) -> subprocess.Popen[bytes]:
    """A Slurm sweep's controller in a process of its own (for a test to kill)."""
    program = (
        "import sys; from pathlib import Path; from fleet.inventory import Host; from fleet.slurm.sweep import start_slurm_sweep\n"
        "start_slurm_sweep(Path(sys.argv[1]), Host.model_validate_json(sys.argv[2]), Path(sys.argv[3]), poll_interval_s=1.0)\n"
    )
    return subprocess.Popen([sys.executable, "-c", program, str(playbook), entry.model_dump_json(), str(results_root)], cwd=REPO)


class SweepInThread:
    """start_slurm_sweep in a thread, and ways to find its tasks on the cluster while it runs
    (`start=False`: only those, for a sweep run elsewhere, say by `controller_process`)."""

    def __init__(self, entry: Host, results_root: Path, playbook: Path = DEMO, *, start: bool = True) -> None:
        self.entry, self.results_root, self.playbook, self.lines = entry, results_root, playbook, []
        self.outcome: SlurmSweepOutcome | None = None
        self.client = SlurmClient(connect(entry))
        self.thread = threading.Thread(target=self._run, daemon=True)
        if start:
            self.thread.start()

    def _run(self) -> None:
        self.outcome = start_slurm_sweep(self.playbook, self.entry, self.results_root, connect=connect, poll_interval_s=1.0, say=self.lines.append)

    def record(self) -> SlurmSweep | None:
        latest = self.results_root / "LATEST"
        if not latest.exists() or not (self.results_root / latest.read_text().strip() / "slurm.json").exists():
            return None
        return SlurmSweep.load(self.results_root / latest.read_text().strip())

    def catch_between_runs(self, node: str, timeout: float = 120) -> tuple[str, dict[str, bytes]]:
        """(job id of a task running on `node` with some but not all results, those results)."""

        def caught() -> tuple[str, dict[str, bytes]] | None:
            record = self.record()
            if record is None or not record.job_ids():
                return None
            jobs = self.client.jobs(record.job_ids())
            for array in record.arrays:
                for task in array.tasks:
                    job = jobs.get(f"{array.submissions[0].job_id}_{task.index}")
                    runs = Path(record.task_dir(array, task.index)) / "runs"
                    done = sorted(runs.glob("*.json")) if runs.is_dir() else []
                    if job is not None and job.batch_host == node and job.state is JobState.RUNNING and 0 < len(done) < len(task.run_ids):
                        return job.job_id, {p.name: p.read_bytes() for p in done}
            return None

        return wait_for(caught, timeout, f"a task on {node} between runs", 0.2, detail=lambda: "\n".join(self.lines))

    def node_of_first_task(self, timeout: float = 60) -> str:
        """The node the sweep's first task runs on (the scheduler's choice)."""

        def node() -> str | None:
            record = self.record()
            if record is None or not record.job_ids():
                return None
            job = self.client.jobs(record.job_ids()).get(f"{record.job_ids()[0]}_0")
            return job.batch_host if job is not None else None

        return wait_for(node, timeout, "the first task to start", 0.2, detail=lambda: "\n".join(self.lines))

    def wait_requeued(self, job_id: str, timeout: float = 60) -> SlurmJob:
        def requeued() -> SlurmJob | None:
            job = self.client.jobs([job_id]).get(job_id)
            return job if job is not None and job.restarts > 0 else None

        return wait_for(requeued, timeout, f"{job_id} requeued", 0.5, detail=lambda: "\n".join(self.lines))

    def finish(self, timeout: float = 240) -> SlurmSweepOutcome:
        self.thread.join(timeout=timeout)
        assert not self.thread.is_alive() and self.outcome is not None, self.lines
        return self.outcome
