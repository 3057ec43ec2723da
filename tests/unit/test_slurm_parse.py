"""fleet.slurm.jobs on output captured from a real slurmctld 22.05 (tests/fixtures/slurm, written by
`python -m tests.testfleet.slurm capture`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.slurm.jobs import SINFO_FORMAT, SQUEUE_FORMAT, JobState, parse_gres, parse_sbatch_parsable, parse_scontrol_fields, parse_scontrol_jobs, parse_sinfo_nodes, parse_squeue
from fleet.errors import SlurmOutputError
from tests.testfleet import slurm as test_cluster

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_the_capture_used_fleets_formats() -> None:
    assert test_cluster.SQUEUE_FORMAT == SQUEUE_FORMAT
    assert test_cluster.SINFO_FORMAT == SINFO_FORMAT


def test_sbatch_parsable() -> None:
    assert parse_sbatch_parsable(fixture("sbatch_parsable.txt")) == "1"
    assert parse_sbatch_parsable("42;cluster-a\n") == "42"
    for bad in ("", "Submitted batch job 42\n"):
        with pytest.raises(SlurmOutputError, match="sbatch --parsable"):
            parse_sbatch_parsable(bad)


def test_scontrol_every_state_the_cluster_went_through() -> None:
    jobs = {}
    for name in ("busy", "node_fail", "requeued", "cancelled", "preempted", "timeout"):
        jobs[name] = parse_scontrol_jobs(fixture(f"scontrol_{name}.txt"))
    busy = jobs["busy"]
    assert {j: (v.state, v.reason) for j, v in busy.items()} == {
        "1": (JobState.COMPLETED, "None"),
        "2": (JobState.FAILED, "NonZeroExitCode"),
        "4": (JobState.RUNNING, "None"),
        "5": (JobState.RUNNING, "None"),
        "6": (JobState.PENDING, "Resources"),
        "7": (JobState.PENDING, "JobHeldUser"),
    }
    assert busy["2"].exit_code == "3:0" and busy["2"].ended and not busy["4"].ended
    assert busy["4"].nodes == "ct200" and busy["4"].batch_host == "ct200" and busy["4"].gres == "gres:gpu:8"
    assert busy["6"].nodes == ""
    (node_fail,) = jobs["node_fail"].values()
    assert (node_fail.state, node_fail.reason, node_fail.requeue) == (JobState.NODE_FAIL, "NodeDown", False)
    assert node_fail.state.lost_to_the_cluster
    (requeued,) = jobs["requeued"].values()
    assert (requeued.state, requeued.restarts, requeued.requeue) == (JobState.PENDING, 1, True)
    (cancelled,) = jobs["cancelled"].values()
    assert cancelled.state is JobState.CANCELLED and cancelled.restarts == 1
    preempted = jobs["preempted"]
    # The urgent partition's job runs; of the two low-tier jobs, one was requeued (PENDING again).
    assert sorted((j.partition, j.state.value, j.restarts) for j in preempted.values()) == [("gpu", "PENDING", 1), ("gpu", "RUNNING", 0), ("urgent", "RUNNING", 0)]
    (late,) = jobs["timeout"].values()
    assert (late.state, late.reason, late.time_limit) == (JobState.TIMEOUT, "TimeLimit", "00:01:00")


def test_scontrol_fields_keep_values_with_spaces_and_odd_keys() -> None:
    fields = parse_scontrol_fields("JobId=7 Reason=Some words here CPUs/Task=1 AllocNode:Sid=login:12 Power= Comment=a=b")
    assert fields == {"JobId": "7", "Reason": "Some words here", "CPUs/Task": "1", "AllocNode:Sid": "login:12", "Power": "", "Comment": "a=b"}
    with pytest.raises(SlurmOutputError, match="JobState"):
        parse_scontrol_jobs("NodeName=ct200 State=IDLE\n")
    with pytest.raises(SlurmOutputError, match="unknown job state 'EXPLODED'"):
        parse_scontrol_jobs("JobId=1 JobState=EXPLODED\n")


def test_squeue_lines() -> None:
    busy = parse_squeue(fixture("squeue_busy.txt"))
    assert busy["3"].state is JobState.FAILED and busy["3"].reason == "BadConstraints"  # the gpu:9 refused at submit
    assert busy["6"].reason == "Resources" and busy["6"].gres == "gres:gpu:8"
    final = parse_squeue(fixture("squeue_all_final.txt"))
    assert final["12"].state is JobState.TIMEOUT and final["5"].state is JobState.NODE_FAIL
    assert final["11"].partition == "urgent"
    with pytest.raises(SlurmOutputError, match="squeue line 1"):
        parse_squeue("1|RUNNING\n")


def test_sinfo_nodes_and_gres() -> None:
    nodes = parse_sinfo_nodes(fixture("sinfo_nodes.txt"))
    assert [(n.name, n.partition, n.default_partition, n.gres, n.usable) for n in nodes] == [
        ("ct200", "gpu", True, {"gpu": 8}, True),
        ("ct200", "urgent", False, {"gpu": 8}, True),
        ("ct201", "gpu", True, {"gpu": 8}, True),
        ("ct201", "urgent", False, {"gpu": 8}, True),
    ]
    assert nodes[0].features == () and nodes[0].cpus == 32 and nodes[0].memory_mb == 64000
    down = parse_sinfo_nodes(fixture("sinfo_node_down.txt"))
    assert [(n.name, n.state, n.usable) for n in down if n.partition == "gpu"] == [("ct200", "mixed", True), ("ct201", "down*", False)]
    assert parse_gres("gpu:a100:4(S:0-1),gpu:h100:2,nic:1") == {"gpu": 6, "nic": 1}
    assert parse_gres("(null)") == {}
    with pytest.raises(SlurmOutputError, match="GRES"):
        parse_gres("gpu")
