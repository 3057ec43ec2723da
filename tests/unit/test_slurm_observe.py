"""fleet.slurm's pure parts for time limits, `fleet status` rows and sacct, on output captured
from the real test cluster (tests/fixtures/slurm; `python -m tests.testfleet.slurm capture`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fleet.slurm.jobs import AccountedJob, JobState, parse_sacct, parse_scontrol_jobs
from fleet.errors import SlurmOutputError
from fleet.slurm.observe import task_row
from fleet.slurm.outcome import STOP_GRACE_S, Action, judge, met_its_limit
from fleet.slurm.record import JobArray, Submission, Task
from fleet.slurm.script import BatchJob

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def _job(name: str):
    (job,) = parse_scontrol_jobs((FIXTURES / name).read_text()).values()
    return job


def test_a_job_stopped_by_its_time_limit_signal_is_a_time_out_and_gets_a_longer_limit() -> None:
    # The real end of a job that exits on fleet's --signal=B:TERM@60: COMPLETED, 27 s into its minute.
    stopped = _job("scontrol_time_limit_signal.txt")
    assert (stopped.state, stopped.time_limit_s, stopped.run_time_s) == (JobState.COMPLETED, 60, 27)
    assert STOP_GRACE_S == BatchJob.stop_grace_s == 60
    assert met_its_limit(stopped)
    verdict = judge(stopped, {"r1", "r2"}, {"r1"}, 1, 3)
    assert verdict.action is Action.RESUBMIT and verdict.longer_limit and verdict.ran_out_of_s == 60, verdict
    assert "stopped at its time limit (00:01:00, ran 00:00:27) with 1 runs without a result" in verdict.reason
    # Slurm's own TIMEOUT: the same, with the limit it enforced.
    timeout = _job("scontrol_timeout.txt")
    verdict = judge(timeout, {"r1"}, set(), 1, 3)
    assert verdict.action is Action.RESUBMIT and verdict.longer_limit and verdict.ran_out_of_s == 60
    # A job that ended early, far from its limit, is not: the agent failed (reported, not resubmitted).
    early = replace(stopped, time_limit="00:10:00")
    assert not met_its_limit(early) and judge(early, {"r1", "r2"}, {"r1"}, 1, 3).action is Action.REPORT
    unlimited = parse_scontrol_jobs((FIXTURES / "scontrol_busy.txt").read_text())["2"]  # FAILED, TimeLimit=UNLIMITED
    assert unlimited.time_limit_s is None and not met_its_limit(unlimited)


def test_sacct_parsable_output() -> None:
    # sacct's documented -P form (the test cluster keeps no accounting: no slurmdbd, nothing to capture).
    text = "12_0|COMPLETED|0:0|ct200|00:00:41|00:10:00\n12_1|CANCELLED by 0|0:15|ct201|00:00:03|00:10:00\n"
    jobs = parse_sacct(text)
    assert jobs["12_0"] == AccountedJob("12_0", JobState.COMPLETED, "0:0", "ct200", "00:00:41", "00:10:00")
    assert jobs["12_1"].state is JobState.CANCELLED
    with pytest.raises(SlurmOutputError, match="sacct line 1: .*expected 6 fields"):
        parse_sacct("12_0|COMPLETED\n")


def _array() -> tuple[JobArray, Task]:
    task = Task(1, "srv1", "tp1-ddtree-b15", ["r1", "r2"], 30.0)
    return JobArray("gpu1", 1, [Task(0, "srv0", "tp1-autoregressive", ["r0"], 20.0), task], [Submission("7", [0, 1], 600)]), task


def test_status_rows_of_array_tasks_from_real_job_states() -> None:
    array, task = _array()
    busy = parse_scontrol_jobs((FIXTURES / "scontrol_busy.txt").read_text())
    pending = replace(busy["6"], job_id="7_[1]")
    row = task_row(array, task, pending, None, "", {}, None)
    assert (row.host, row.phase.value, row.total, row.done) == ("gpu1/task-1", "waiting", 2, 0)
    (view,) = row.servers.values()
    assert view["phase"] == "job 7_[1] PENDING (Resources)" and view["label"] == "tp1-ddtree-b15"
    requeued = replace(_job("scontrol_requeued.txt"), job_id="7_1")
    row = task_row(array, task, requeued, None, "", {"ok": 1}, None)
    assert row.phase.value == "waiting" and "requeued 1x" in row.servers["srv1"]["phase"] and row.done == 1
    running = replace(busy["4"], job_id="7_1")
    assert task_row(array, task, running, None, "", {"ok": 1}, None).phase.value == "running"
    cancelled = replace(_job("scontrol_cancelled.txt"), job_id="7_1")
    row = task_row(array, task, cancelled, None, "", {"ok": 1}, "report: job 7_1 was cancelled with 1 runs without a result")
    assert row.phase.value == "stopped" and "cancelled" in row.last_error
    done = task_row(array, task, None, None, "sacct unavailable here (accounting disabled)", {"ok": 1, "failed": 1}, "done: all 2 runs have results")
    assert done.phase.value == "finished" and done.last_error == ""
    assert done.servers["srv1"]["phase"] == "job 7_1: not known to slurmctld any more; sacct unavailable here (accounting disabled)"
    accounted = AccountedJob("7_1", JobState.COMPLETED, "0:0", "ct201", "00:00:41", "00:10:00")
    row = task_row(array, task, None, accounted, "", {"ok": 2}, None)
    assert row.servers["srv1"]["phase"] == "job 7_1 COMPLETED on ct201 (sacct)" and row.phase.value == "finished"
    fresh = JobArray("gpu1", 1, [task], [])
    assert task_row(fresh, task, None, None, "", {}, None).phase.value == "not started"
