"""The Slurm test cluster itself (tests/testfleet/slurm.py): real slurmctld, slurmd and munge over
the test hosts. GRES GPUs are granted per node, a node that loses power fails its jobs."""

from __future__ import annotations

import pytest

from tests.testfleet.slurm import GPUS_PER_NODE, SlurmCluster

pytestmark = pytest.mark.testfleet


def _submit(cluster: SlurmCluster, *options: str, wrap: str) -> str:
    done = cluster.fleet.exec(cluster.login, ["sbatch", "--parsable", *options, "--wrap", wrap])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_gpu_jobs_run_on_each_node_with_their_own_gpus(slurm: SlurmCluster) -> None:
    out = slurm.base / "shared-out"
    out.mkdir(exist_ok=True)
    report = 'echo "$(hostname) $CUDA_VISIBLE_DEVICES $(nvidia-smi -L | wc -l) $FLEET_FAKE_GPU_DIR"'
    jobs = {}
    for node in slurm.nodes:
        for half in (0, 1):  # two 4-GPU jobs side by side on each node
            jobs[(node.name, half)] = _submit(slurm, "--gres=gpu:4", f"--nodelist={node.name}", f"--output={out}/%j.out", wrap=f"{report}; sleep 2")
    seen: dict[str, list[set[str]]] = {}
    for (node_name, _), job in jobs.items():
        assert slurm.wait_job(job, ["COMPLETED", "FAILED"], timeout=60)["JobState"] == "COMPLETED"
        hostname, visible, listed, gpu_dir = (out / f"{job}.out").read_text().split()
        assert hostname == node_name
        assert listed == str(GPUS_PER_NODE)  # the node's fake nvidia-smi (no device cgroup), via the task prolog
        assert gpu_dir == str(slurm.fleet[node_name].fake_gpu_dir)
        seen.setdefault(node_name, []).append(set(visible.split(",")))
    for node_name, grants in seen.items():
        assert all(len(g) == 4 for g in grants), grants
        assert grants[0].isdisjoint(grants[1]), f"{node_name}: two jobs got the same GPUs: {grants}"


def test_more_gpus_than_any_node_is_refused_at_submit(slurm: SlurmCluster) -> None:
    done = slurm.fleet.exec(slurm.login, ["sbatch", "--parsable", f"--gres=gpu:{GPUS_PER_NODE + 1}", "--wrap", "true"])
    assert done.returncode == 1
    assert "Requested node configuration is not available" in done.stderr


def test_a_node_powered_off_fails_its_job(slurm: SlurmCluster) -> None:
    """(A requeueable job running again after a node failure: test_slurm_sweep.py's node and preemption tests.)"""
    fleet = slurm.fleet
    fixed = _submit(slurm, "--gres=gpu:2", "--nodelist=ct201", "--no-requeue", "--output=/dev/null", wrap="sleep 300")
    slurm.wait_job(fixed, ["RUNNING"])
    try:
        fleet.power_off("ct201")
        ended = slurm.wait_job(fixed, ["NODE_FAIL"], timeout=60)
        assert (ended["Reason"], ended["Restarts"]) == ("NodeDown", "0")
    finally:
        if not fleet.is_up("ct201"):
            fleet.power_on("ct201")
        slurm.start_node("ct201", timeout=60)
    assert slurm.node_state("ct201") in ("IDLE", "MIXED")  # back in service (ReturnToService=2)
