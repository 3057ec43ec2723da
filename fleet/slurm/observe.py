"""`fleet status` and `fleet fetch-logs` of a Slurm sweep, by the job ids it recorded.

Status: one `scontrol show job` round trip for every job of the sweep (squeue's states, with the
reason, node and requeue count), and `sacct` for a job slurmctld has already forgotten (ended
longer than MinJobAge ago) where the cluster keeps accounting; where it keeps none (no slurmdbd,
as in the test cluster) the row says so. The runs done come from the task dirs on the shared fs,
brought back through the login host (results only, no logs). One row per array task.

Fetch-logs: every task dir whole (server logs, progress, results, node preparation) into
`results/<sweep>/<cluster>/slurm/` and each server's log into `<cluster>/logs/`, as from an SSH
host; Slurm's own output file of each task (`slurm-<array job>_<task>.out`: the batch script's
lines and the agent's log, which goes to stderr inside an allocation) into `<cluster>/logs/slurm/`,
beside `scontrol show job -o` of every job of the sweep as Slurm sees it now. Inside an
allocation there is no journald of fleet's: the files are the logs.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from fleet.errors import FleetError
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import SweepDir
from fleet.slurm.commands import FORGOTTEN_MARK, SlurmClient
from fleet.errors import SlurmCommandError
from fleet.slurm.jobs import AccountedJob, JobState, SlurmJob
from fleet.slurm.record import JobArray, SlurmSweep, Task, cluster_of, pull_tasks, task_job, task_ledger
from fleet.sweep.hoststatus import FetchedLogs, HostStatus, Phase
from fleet.sweep.record import Connect
from fleet.transport.base import Transport, command_text

# Slurm's state of a task -> the phase `fleet status` shows (its own words go beside it).
_WAITING = {JobState.PENDING, JobState.REQUEUED, JobState.REQUEUE_HOLD, JobState.REQUEUE_FED, JobState.SUSPENDED, JobState.STOPPED}
_RUNNING = {JobState.RUNNING, JobState.CONFIGURING, JobState.COMPLETING, JobState.RESIZING, JobState.SIGNALING, JobState.STAGE_OUT}


def _counts(mirror: Path, record: SlurmSweep, array: JobArray, task: Task) -> dict[str, int]:
    ledger = task_ledger(mirror, record, array, task)
    counts: dict[str, int] = {}
    for result in ledger.results.values():
        counts[result.status.value] = counts.get(result.status.value, 0) + 1
    if ledger.rejected:
        counts["unreadable"] = len(ledger.rejected)
    return counts


def task_row(array: JobArray, task: Task, job: SlurmJob | None, accounted: AccountedJob | None, accounting_note: str, counts: dict[str, int], finished: str | None) -> HostStatus:
    """One array task as `fleet status` shows it (pure)."""
    tries = array.submissions_of(task.index)
    status = HostStatus(f"{array.key}/task-{task.index}", total=len(task.run_ids), counts=counts)
    done = status.done >= status.total
    slurm: dict[str, object] = {"label": task.label, "job_id": None, "state": None, "reason": None, "nodes": None, "restarts": 0, "submissions": len(tries)}
    if job is not None:
        slurm.update(job_id=job.job_id, state=job.state.value, reason=job.reason, nodes=job.nodes or None, restarts=job.restarts)
        where = f" on {job.nodes}" if job.nodes else ""
        why = f" ({job.reason})" if job.reason not in ("None", "") else ""
        again = f", requeued {job.restarts}x" if job.restarts else ""
        slurm["phase"] = f"job {job.job_id} {job.state.value}{where}{why}{again}"
        state = job.state
    elif accounted is not None:
        slurm.update(job_id=accounted.job_id, state=accounted.state.value, nodes=accounted.nodes or None)
        slurm["phase"] = f"job {accounted.job_id} {accounted.state.value} on {accounted.nodes} (sacct)"
        state = accounted.state
    else:
        job_id = f"{tries[-1].job_id}_{task.index}" if tries else "-"
        slurm.update(job_id=job_id if tries else None)
        slurm["phase"] = f"job {job_id}: not known to slurmctld any more; {accounting_note}" if tries else "not submitted yet"
        state = None
    status.servers = {task.server_id: slurm}
    if done:
        status.phase = Phase.FINISHED
    elif state in _WAITING:
        status.phase = Phase.WAITING
    elif state in _RUNNING:
        status.phase = Phase.RUNNING
    elif state is JobState.CANCELLED:
        status.phase = Phase.STOPPED
    elif state is None and not tries:
        status.phase = Phase.NOT_STARTED
    else:
        status.phase = Phase.FAILED if finished and not finished.startswith("done") else Phase.AGENT_DOWN
    if finished and not finished.startswith("done"):
        status.last_error = finished
    return status


def slurm_status(directory: Path, *, connect: Connect) -> dict[str, HostStatus]:
    """One row per array task; one `unreachable` row for the cluster where its login host or
    Slurm does not answer (as an SSH sweep's host that does not)."""
    record = SlurmSweep.load(directory)
    cluster = cluster_of(directory, record)
    try:
        return _status(directory, record, connect(cluster))
    except FleetError as exc:
        return {record.cluster: HostStatus(record.cluster, phase=Phase.UNREACHABLE, last_error=str(exc))}


def _status(directory: Path, record: SlurmSweep, transport: Transport) -> dict[str, HostStatus]:
    try:
        client = SlurmClient(transport)
        jobs = client.jobs(record.job_ids())
        pull_tasks(transport, record, directory, logs=False)
        missing = _forgotten(record, jobs)
        accounted: dict[str, AccountedJob] = {}
        note = "(no sacct asked)"
        if missing:
            try:
                accounted = client.accounting(missing)
                note = "sacct has no record of it either"
            except SlurmCommandError as exc:
                note = f"sacct unavailable here ({exc.said})"
    finally:
        transport.close()
    mirror = directory / record.cluster / "slurm"
    rows: dict[str, HostStatus] = {}
    for array in record.arrays:
        for task in array.tasks:
            tries = array.submissions_of(task.index)
            job = task_job(jobs, tries[-1].job_id, task.index) if tries else None
            account = accounted.get(f"{tries[-1].job_id}_{task.index}") if tries and job is None else None
            row = task_row(array, task, job, account, note, _counts(mirror, record, array, task), array.finished.get(str(task.index)))
            rows[row.host] = row
    return rows


def _forgotten(record: SlurmSweep, jobs: dict[str, SlurmJob]) -> list[str]:
    """Tasks slurmctld no longer holds, as `<array job>_<task>` ids for sacct."""
    missing = []
    for array in record.arrays:
        for task in array.tasks:
            tries = array.submissions_of(task.index)
            if tries and task_job(jobs, tries[-1].job_id, task.index) is None:
                missing.append(f"{tries[-1].job_id}_{task.index}")
    return missing


def fetch_slurm_logs(directory: Path, host_names: Sequence[str] | None, *, connect: Connect) -> dict[str, FetchedLogs]:
    record = SlurmSweep.load(directory)
    if host_names is not None and record.cluster not in host_names:
        return {}
    cluster = cluster_of(directory, record)
    local = directory / record.cluster
    ids = record.job_ids()
    try:
        transport = connect(cluster)
        try:
            pull_tasks(transport, record, directory, logs=True)
            script = "; ".join(f"{command_text(['scontrol', 'show', 'job', '-o', j])} || echo {shlex.quote(FORGOTTEN_MARK + j)}" for j in ids)
            shown = transport.run(script, timeout=60).stdout if ids else ""
        finally:
            transport.close()
    except FleetError as exc:
        return {record.cluster: FetchedLogs(record.cluster, local, 0, 0, f"failed: {exc}")}
    mirror = local / "slurm"
    slurm_logs = local / SweepDir.LOGS / "slurm"
    slurm_logs.mkdir(parents=True, exist_ok=True)
    outputs = 0
    for array in record.arrays:
        for path in sorted((mirror / array.key).glob("slurm-*.out")):
            shutil.copyfile(path, slurm_logs / path.name)
            outputs += 1
    (slurm_logs / "scontrol-show-job.txt").write_text(shown)
    write_json_atomic(slurm_logs / "jobs.json", {a.key: [s.__dict__ for s in a.submissions] for a in record.arrays})
    servers = sum(1 for _ in (local / SweepDir.LOGS).glob("*.log"))
    note = f"Slurm: {servers} server logs, {outputs} Slurm output files (the agents' logs), scontrol of {len(ids)} jobs; no journald inside allocations"
    return {record.cluster: FetchedLogs(record.cluster, local, sum(1 for p in local.rglob("*") if p.is_file() and p.suffix in (".log", ".out")), 0, note)}
