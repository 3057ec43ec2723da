"""What to do about a job, from Slurm's state and the agent's results on the shared dir. Pure.

The results decide what is done; Slurm's state decides what happens to the rest:
- every run of the job has a result: done, whatever Slurm says (a TIMEOUT or NODE_FAIL after the
  last result loses nothing);
- still queued or running (a requeued job is PENDING again, Restarts counts it): wait — Slurm
  starts the agent again on the same directory and it runs only what has no result;
- ended by the cluster (NODE_FAIL, PREEMPTED, BOOT_FAIL, TIMEOUT, DEADLINE, or any end after
  Slurm chose it for preemption: a graceful preemption ends COMPLETED) without Slurm requeueing it: fleet submits the same directory again (a TIMEOUT with a longer limit), a bounded
  number of times. No run that has a result runs again, because the agent skips those;
- cancelled: someone meant it (scancel, an admin): reported, not resubmitted;
- ended otherwise with runs missing (the agent failed): reported, as an agent failure on an SSH host;
- a pending job whose reason can never clear: reported (and cancelled by the caller).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from enum import Enum

from fleet.slurm.feasibility import never_runs
from fleet.slurm.jobs import JobState, SlurmJob


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


def judge(job: SlurmJob | None, runs: Set[str], done: Set[str], submissions: int, max_submissions: int) -> Verdict:
    """`runs`: the run ids of the job (or array task); `done`: those with a result;
    `submissions`: how often fleet has submitted this work so far (the first counts)."""
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
    if job.state is JobState.CANCELLED:
        return Verdict(Action.REPORT, f"job {job.job_id} was cancelled with {missing} runs without a result")
    if job.state.lost_to_the_cluster or job.preempted:
        return _again(submissions, max_submissions, f"job {job.job_id} ended {job.state.value} ({job.reason}) with {missing} runs without a result",
                      job.state is JobState.TIMEOUT)
    return Verdict(Action.REPORT, f"job {job.job_id} ended {job.state.value} (exit {job.exit_code}) with {missing} runs without a result: "
                                  "the agent failed; its log is in the sweep dir")


def _again(submissions: int, max_submissions: int, why: str, longer: bool) -> Verdict:
    if submissions >= max_submissions:
        return Verdict(Action.REPORT, f"{why}; submitted {submissions} times, the limit: not again")
    return Verdict(Action.RESUBMIT, f"{why}: submitting again ({submissions + 1} of {max_submissions})", longer)
