"""What to do about a job, from Slurm's state and the agent's results on the shared dir. Pure.

The results decide what is done; Slurm's state decides what happens to the rest:
- every run of the job has a result: done, whatever Slurm says (a TIMEOUT or NODE_FAIL after the
  last result loses nothing);
- still queued or running (a requeued job is PENDING again, Restarts counts it): wait — Slurm
  starts the agent again on the same directory and it runs only what has no result;
- ended by the cluster (NODE_FAIL, PREEMPTED, BOOT_FAIL, TIMEOUT, DEADLINE, or any end after
  Slurm chose it for preemption: a graceful preemption ends COMPLETED) without Slurm requeueing it: fleet submits the same directory again (a TIMEOUT with a longer limit), a bounded
  number of times. No run that has a result runs again, because the agent skips those;
- stopped at its time limit: fleet's batch scripts ask for the agent's SIGTERM `stop_grace_s`
  before the limit (`--signal=B:TERM@60`), so the agent stops its servers cleanly and the job
  ends COMPLETED (FAILED if the stop went wrong) rather than TIMEOUT. A job that ended so, with
  runs missing, after running at least its limit less that grace, met its limit: a time-out;
- cancelled: someone meant it (scancel, an admin): reported, not resubmitted;
- refused by its node (fleet.host.nodeprep: a preflight rule failed there, or staging did; the
  agent never started): submitted again, excluding that node, a bounded number of times;
- ended otherwise with runs missing (the agent failed): reported, as an agent failure on an SSH host;
- a pending job whose reason can never clear: reported (and cancelled by the caller).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from enum import Enum

from fleet.slurm.feasibility import never_runs
from fleet.slurm.jobs import JobState, SlurmJob
from fleet.slurm.script import BatchJob

# How long before its limit a job's agent gets its SIGTERM (the batch scripts' --signal).
STOP_GRACE_S: int = BatchJob.stop_grace_s


class Action(str, Enum):
    WAIT = "wait"
    DONE = "done"
    RESUBMIT = "resubmit"
    REPORT = "report"  # give up on this job's missing runs, saying why
    CANCEL = "cancel"  # cancel it (it can never start) and report


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str
    longer_limit: bool = False  # resubmit with a longer time limit (the last one was too short)
    ran_out_of_s: int | None = None  # the limit Slurm enforced, where it ran out of it (an admin may have changed fleet's)


def judge(job: SlurmJob | None, runs: Set[str], done: Set[str], submissions: int, max_submissions: int, refused: str | None = None) -> Verdict:
    """`runs`: the run ids of the job (or array task); `done`: those with a result;
    `submissions`: how often fleet has submitted this work so far (the first counts);
    `refused`: why the job's node refused to start the agent (fleet.slurm.nodeprep.NodeRefusals),
    if it did: the work is submitted again, excluding that node."""
    missing = len(runs - done)
    if not missing:
        return Verdict(Action.DONE, f"all {len(runs)} runs have results")
    if job is None:
        # slurmctld forgot the job (it ended longer ago than MinJobAge) and runs lack results.
        return _again(submissions, max_submissions, f"the job is gone from slurmctld with {missing} runs without a result", False)
    if (never := never_runs(job)) is not None:
        return Verdict(Action.CANCEL, never)
    if not job.ended:
        restarts = f" (requeued {job.restarts}x)" if job.restarts else ""
        return Verdict(Action.WAIT, f"job {job.job_id} {job.state.value.lower()}{restarts}, {missing} runs to go")
    if refused is not None and job.state is JobState.FAILED:
        return _again(submissions, max_submissions, f"job {job.job_id}: {refused}", False)
    if job.state is JobState.CANCELLED:
        return Verdict(Action.REPORT, f"job {job.job_id} was cancelled with {missing} runs without a result")
    if job.state.lost_to_the_cluster or job.preempted:
        timeout = job.state is JobState.TIMEOUT
        return _again(submissions, max_submissions, f"job {job.job_id} ended {job.state.value} ({job.reason}) with {missing} runs without a result", timeout, job.time_limit_s if timeout else None)
    if met_its_limit(job):
        return _again(
            submissions,
            max_submissions,
            f"job {job.job_id} was stopped at its time limit ({job.time_limit}, ran {job.fields.get('RunTime')}) with {missing} runs without a result",
            True,
            job.time_limit_s,
        )
    return Verdict(Action.REPORT, f"job {job.job_id} ended {job.state.value} (exit {job.exit_code}) with {missing} runs without a result: the agent failed; its log is in the sweep dir")


def met_its_limit(job: SlurmJob, stop_grace_s: int = STOP_GRACE_S) -> bool:
    """Ended by the agent after its time-limit signal: it ran at least its limit less the grace
    (Slurm sends the signal no earlier). A job with no readable RunTime or limit never counts."""
    limit, ran = job.time_limit_s, job.run_time_s
    return job.state in (JobState.COMPLETED, JobState.FAILED) and limit is not None and ran is not None and ran >= limit - stop_grace_s


def _again(submissions: int, max_submissions: int, why: str, longer: bool, ran_out_of_s: int | None = None) -> Verdict:
    if submissions >= max_submissions:
        return Verdict(Action.REPORT, f"{why}; submitted {submissions} times, the limit: not again")
    return Verdict(Action.RESUBMIT, f"{why}: submitting again ({submissions + 1} of {max_submissions})", longer, ran_out_of_s)
