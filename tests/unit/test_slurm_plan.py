"""fleet.slurm's pure parts: batch scripts, time limits, feasibility at submit, job outcomes, the
inventory's `kind: slurm`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fleet.errors import ConfigError
from fleet.inventory import HostKind, load_inventory
from fleet.slurm.feasibility import Request, infeasible, never_runs, unusable_now
from fleet.slurm.jobs import JobState, parse_scontrol_jobs, parse_sinfo_nodes
from fleet.slurm.outcome import Action, judge
from fleet.slurm.record import expand_array_spec, task_job
from fleet.inventory import parse_slurm_time
from fleet.slurm.script import BatchJob, array_spec, render_batch_script, slurm_time, time_limit_s

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def job(**changes: object) -> BatchJob:
    base: dict = dict(
        name="fleet-s1-ab12",
        gpus=2,
        time_limit_s=3600,
        root="/shared/fleet/slurm/s1/jobs/ab12",
        python="/opt/py/bin/python3",
        bundle_dir="/shared/fleet/slurm/s1/agent",
        output="/shared/fleet/slurm/s1/out/%j.out",
    )
    return BatchJob(**{**base, **changes})  # type: ignore[arg-type]


def test_batch_script_of_one_job() -> None:
    text = render_batch_script(job(partition="gpu", account="lab", qos="normal", constraint="h200&nvlink", cpus_per_task=16))
    options = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert options == [
        "#SBATCH --job-name=fleet-s1-ab12",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --time=0-01:00:00",
        "#SBATCH --output=/shared/fleet/slurm/s1/out/%j.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --signal=B:TERM@60",
        "#SBATCH --gres=gpu:2",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=lab",
        "#SBATCH --qos=normal",
        "#SBATCH --constraint=h200&nvlink",
        "#SBATCH --cpus-per-task=16",
        "#SBATCH --requeue",
    ]
    assert text.startswith("#!/bin/bash\n")
    assert "export PYTHONPATH=/shared/fleet/slurm/s1/agent\n" in text
    assert "\ndir=/shared/fleet/slurm/s1/jobs/ab12\n" in text
    assert '/opt/py/bin/python3 -m fleet.host.grant "$dir"\n' in text
    assert text.rstrip().endswith('exec /opt/py/bin/python3 -m fleet.host.agent run --sweep-dir "$dir"')


def test_batch_script_of_an_array_and_odd_paths(tmp_path: Path) -> None:
    text = render_batch_script(job(array_tasks=(0, 1, 2, 5), gres_name="gpu_h200", requeue=False, root="/shared/my dir"))
    assert "#SBATCH --array=0-2,5\n" in text and "#SBATCH --gres=gpu_h200:2\n" in text and "#SBATCH --no-requeue\n" in text
    # The path is quoted for the shell; the task's directory comes from Slurm's task id.
    assert "\ndir='/shared/my dir/'\"task-${SLURM_ARRAY_TASK_ID:?not an array task}\"\n" in text
    assert job(array_tasks=(3,)).task_dir(3) == "/shared/fleet/slurm/s1/jobs/ab12/task-3"
    with pytest.raises(ValueError, match="one word"):
        render_batch_script(job(partition="gpu a"))
    with pytest.raises(ValueError, match="at least one task"):
        render_batch_script(job(array_tasks=()))


def test_array_spec_and_times() -> None:
    assert array_spec((7, 0, 1, 2, 3, 9, 10)) == "0-3,7,9-10"
    assert [slurm_time(s) for s in (1, 60, 61, 3600, 90061)] == ["0-00:01:00", "0-00:01:00", "0-00:02:00", "0-01:00:00", "1-01:02:00"]
    assert [parse_slurm_time(t) for t in ("30", "5:30", "4:00:00", "2-12", "1-01:02", "1-01:02:03", "00:01:00")] == [1800, 330, 14400, 216000, 90120, 90123, 60]
    with pytest.raises(ValueError, match="a Slurm time"):
        parse_slurm_time("4h")
    assert time_limit_s(1000, margin=1.5, floor_s=600, cap_s=None) == 1500  # 1500 s is 25 whole minutes
    assert time_limit_s(100, margin=1.5, floor_s=600, cap_s=None) == 600
    assert time_limit_s(10_000, margin=2, floor_s=600, cap_s=14_400) == 14_400


def test_feasibility_against_the_real_sinfo() -> None:
    nodes = parse_sinfo_nodes((FIXTURES / "sinfo_nodes.txt").read_text())
    assert infeasible(Request(8, "gpu", "gpu"), nodes) is None
    assert infeasible(Request(8, "gpu", None), nodes) is None  # the default partition
    assert infeasible(Request(9, "gpu", "gpu"), nodes) == "9 gpu GRES per node asked for; the largest node of partition 'gpu' has 8"
    assert "partitions: gpu, urgent" in (infeasible(Request(1, "gpu", "debug"), nodes) or "")
    assert "features ['h200']" in (infeasible(Request(1, "gpu", "gpu", constraint="h200"), nodes) or "")
    assert "largest node" in (infeasible(Request(1, "gpu_h200", "gpu"), nodes) or "")
    down = parse_sinfo_nodes((FIXTURES / "sinfo_node_down.txt").read_text())
    assert unusable_now(Request(8, "gpu", "gpu"), down) is None  # ct200 still takes work
    only_ct201_down = [n for n in down if n.name == "ct201"]
    assert unusable_now(Request(8, "gpu", "gpu"), only_ct201_down) == "every node that fits is unavailable: ct201 (down*)"


def _jobs(name: str) -> dict:
    return parse_scontrol_jobs((FIXTURES / name).read_text())


def test_outcomes_from_real_job_states() -> None:
    runs = {"r1", "r2", "r3"}
    busy, node_fail = _jobs("scontrol_busy.txt"), _jobs("scontrol_node_fail.txt")["5"]
    requeued, timeout = _jobs("scontrol_requeued.txt")["8"], _jobs("scontrol_timeout.txt")["12"]
    cancelled = _jobs("scontrol_cancelled.txt")["8"]
    # Results decide what is done, whatever Slurm says.
    assert judge(node_fail, runs, runs, 1, 3).action is Action.DONE
    assert judge(busy["4"], runs, {"r1"}, 1, 3).action is Action.WAIT
    verdict = judge(requeued, runs, {"r1"}, 1, 3)
    assert verdict.action is Action.WAIT and "requeued 1x" in verdict.reason
    verdict = judge(node_fail, runs, {"r1"}, 1, 3)
    assert verdict.action is Action.RESUBMIT and "NODE_FAIL (NodeDown) with 2 runs" in verdict.reason and not verdict.longer_limit
    verdict = judge(timeout, runs, set(), 1, 3)
    assert verdict.action is Action.RESUBMIT and verdict.longer_limit
    assert judge(node_fail, runs, set(), 3, 3).action is Action.REPORT  # bounded
    assert judge(cancelled, runs, set(), 1, 3).action is Action.REPORT
    failed = judge(busy["2"], runs, set(), 1, 3)
    assert failed.action is Action.REPORT and "exit 3:0" in failed.reason
    assert judge(None, runs, {"r1"}, 1, 3).action is Action.RESUBMIT
    # Waiting for GPUs is waiting; a reason that never clears is cancelled.
    assert judge(busy["6"], runs, set(), 1, 3).action is Action.WAIT and never_runs(busy["6"]) is None
    stuck = replace(busy["6"], reason="PartitionTimeLimit")
    assert stuck.state is JobState.PENDING
    assert judge(stuck, runs, set(), 1, 3).action is Action.CANCEL


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(text)
    return directory


def test_inventory_kind_slurm(tmp_path: Path) -> None:
    hosts = _write(
        tmp_path / "hosts",
        "slurm-lab.yaml",
        (
            "name: slurm-lab\nkind: slurm\naddress: login.example.org\nuser: bench\ngroups: [clusters]\n"
            "slurm:\n  shared_dir: /shared/fleet\n  partition: gpu\n  account: lab\n  qos: normal\n  gres: gpu\n"
            "  time_limit: '4:00:00'\n  constraint: h200&nvlink\n"
        ),
    )
    inventory = load_inventory(hosts)
    (lab,) = inventory.select("clusters")
    assert lab.kind is HostKind.slurm and lab.slurm is not None
    assert (lab.slurm.partition, lab.slurm.time_limit_s, lab.slurm.time_margin) == ("gpu", 14400, 1.5)
    assert inventory.select("slurm-lab") == [lab]


@pytest.mark.parametrize(
    "body, field",
    [
        ("kind: slurm\n", "slurm"),  # kind slurm without its section
        ("slurm:\n  shared_dir: /shared\n", "slurm"),  # a section on a plain host
        ("kind: slurm\nslurm:\n  shared_dir: /shared\n  time_limit: 4h\n", "time_limit"),
        ("kind: slurm\nslurm:\n  shared_dir: /shared\n  partition: 'gpu;rm'\n", "partition"),
        ("kind: slurm\nslurm:\n  shared_dir: relative/dir\n", "shared_dir"),
        ("kind: slurm\nslurm:\n  partition: gpu\n", "shared_dir"),
    ],
)
def test_inventory_kind_slurm_bad_input_names_the_field(tmp_path: Path, body: str, field: str) -> None:
    hosts = _write(tmp_path / "hosts", "lab.yaml", "name: lab\naddress: login.example.org\n" + body)
    with pytest.raises(ConfigError) as caught:
        load_inventory(hosts)
    assert "lab.yaml" in str(caught.value) and field in str(caught.value)


def test_array_tasks_and_their_pending_rest() -> None:
    # scontrol's spelling of an array (ArrayJobId/ArrayTaskId); the captures hold single jobs only.
    jobs = parse_scontrol_jobs("JobId=14 ArrayJobId=14 ArrayTaskId=0-2,5%2 JobName=x JobState=PENDING Reason=Resources\nJobId=15 ArrayJobId=14 ArrayTaskId=3 JobName=x JobState=RUNNING Reason=None\n")
    assert sorted(jobs) == ["14_3", "14_[0-2,5%2]"]
    assert expand_array_spec("[0-2,5%2]") == {0, 1, 2, 5}
    assert [getattr(task_job(jobs, "14", i), "job_id", None) for i in range(7)] == ["14_[0-2,5%2]"] * 3 + ["14_3", None, "14_[0-2,5%2]", None]


def test_a_graceful_preemption_ends_completed_and_is_submitted_again() -> None:
    completed = _jobs("scontrol_busy.txt")["1"]
    assert not completed.preempted and judge(completed, {"r1", "r2"}, {"r1"}, 1, 3).action is Action.REPORT
    preempted = replace(completed, fields={**completed.fields, "PreemptTime": "2026-12-01T13:51:31"})
    assert preempted.preempted and judge(preempted, {"r1", "r2"}, {"r1"}, 1, 3).action is Action.RESUBMIT
