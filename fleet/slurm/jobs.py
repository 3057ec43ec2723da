"""What Slurm's own commands print, read: `sbatch --parsable`, `squeue -o`, `scontrol show job -o`,
`sinfo -N -o`. Pure; tested on output captured from a real slurmctld/slurmd (tests/fixtures/slurm).

fleet never keeps its own copy of a job's state: every decision reads Slurm's answer afresh
(and the agent's results on the shared dir, which say which runs are done).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from fleet.inventory import parse_slurm_time
from fleet.errors import SlurmOutputError


class JobState(str, Enum):
    """Slurm's job states (squeue/scontrol spelling); fleet groups them by what it must do."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESIZING = "RESIZING"
    SIGNALING = "SIGNALING"
    STAGE_OUT = "STAGE_OUT"
    STOPPED = "STOPPED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REVOKED = "REVOKED"
    SPECIAL_EXIT = "SPECIAL_EXIT"

    @property
    def ended(self) -> bool:
        return self in ENDED

    @property
    def lost_to_the_cluster(self) -> bool:
        """Ended by the cluster, not by the job: its unfinished runs deserve another allocation."""
        return self in (JobState.NODE_FAIL, JobState.PREEMPTED, JobState.BOOT_FAIL, JobState.TIMEOUT, JobState.DEADLINE)


ENDED = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        JobState.OUT_OF_MEMORY,
        JobState.REVOKED,
        JobState.SPECIAL_EXIT,
    }
)

# Pending reasons that no amount of waiting fixes: the request itself is wrong for this cluster
# (slurmctld's job_reason strings). `ReqNodeNotAvail` and `Resources` are not among them: nodes
# come back and GPUs free up; fleet compares the request with `sinfo` instead (feasibility.py).
NEVER_REASONS = frozenset(
    {
        "BadConstraints",
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "PartitionDown",
        "PartitionInactive",
        "InvalidAccount",
        "InvalidQOS",
        "QOSJobLimit",
        "AssocMaxGRESPerJob",
        "QOSMaxGRESPerJob",
        "AssocMaxWallDurationPerJobLimit",
        "QOSMaxWallDurationPerJobLimit",
        "AccountNotAllowed",
        "QOSNotAllowed",
    }
)


@dataclass(frozen=True)
class SlurmJob:
    """One job (or one array task) as `scontrol show job -o` describes it."""

    job_id: str  # as sbatch printed it; an array task `<array job>_<task>`, its pending rest `<array job>_[<tasks>]`
    name: str
    state: JobState
    reason: str  # `None` when Slurm has none
    restarts: int  # how often Slurm requeued it (node failure, preemption, scontrol requeue)
    requeue: bool  # whether Slurm may requeue it
    nodes: str  # NodeList ('' while pending)
    batch_host: str
    exit_code: str  # `status:signal`
    time_limit: str
    partition: str
    gres: str  # TresPerNode, e.g. gres:gpu:2
    fields: Mapping[str, str]  # every field, for messages and for what fleet does not model

    @property
    def ended(self) -> bool:
        return self.state.ended

    @property
    def time_limit_s(self) -> int | None:
        """The limit Slurm enforces (TimeLimit; an admin's `scontrol update` shows here), None when UNLIMITED."""
        return _seconds(self.time_limit)

    @property
    def run_time_s(self) -> int | None:
        """How long it ran (RunTime), None where Slurm says nothing readable."""
        return _seconds(self.fields.get("RunTime", ""))

    @property
    def preempted(self) -> bool:
        """Slurm chose it for preemption (PreemptTime set). Under graceful preemption (GraceTime,
        preempt_send_user_signal) the agent stops on its signal and the job ends COMPLETED, not
        PREEMPTED: this says what happened to it."""
        return self.fields.get("PreemptTime", "None") not in ("None", "Unknown", "")


def _seconds(text: str) -> int | None:
    try:
        return parse_slurm_time(text) if text and text not in ("UNLIMITED", "NONE", "INVALID", "Partition_Limit") else None
    except ValueError:
        return None


def parse_sbatch_parsable(text: str) -> str:
    """`sbatch --parsable` prints `<job id>` or `<job id>;<cluster>`."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise SlurmOutputError("sbatch --parsable printed nothing (expected a job id)")
    job_id = lines[-1].split(";")[0]
    if not re.fullmatch(r"\d+", job_id):
        raise SlurmOutputError(f"sbatch --parsable printed {lines[-1]!r}: expected a job id (digits), optionally ';cluster'")
    return job_id


# A key of `scontrol show -o` output: words, `/` and `:` (CPUs/Task, ReqB:S:C:T, AllocNode:Sid).
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:]*)=")


def parse_scontrol_fields(line: str) -> dict[str, str]:
    """One `scontrol show ... -o` line -> {key: value}. Values run to the next ` Key=`, so a value
    with spaces (a Reason or Comment) stays whole; the first of a repeated key wins."""
    matches = list(_KEY.finditer(line))
    fields: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        fields.setdefault(match.group(1), line[match.end() : end].strip())
    return fields


def _state(text: str, source: str) -> JobState:
    # squeue/scontrol may add flags after the state for some states (`CANCELLED by 0`).
    word = text.split()[0] if text.split() else ""
    try:
        return JobState(word)
    except ValueError:
        raise SlurmOutputError(f"{source}: unknown job state {text!r} (one of {', '.join(s.value for s in JobState)})") from None


def job_from_fields(fields: Mapping[str, str]) -> SlurmJob:
    if "JobId" not in fields or "JobState" not in fields:
        raise SlurmOutputError(f"scontrol show job: a line without JobId/JobState: {dict(fields)!r:.200}")
    job_id = fields["JobId"]
    if fields.get("ArrayJobId") and fields.get("ArrayTaskId"):
        tasks = fields["ArrayTaskId"]
        # A started task is `A_3`; the pending rest of an array is one record, `A_[4-6]` as squeue
        # spells it (and as scancel takes it).
        job_id = f"{fields['ArrayJobId']}_{tasks}" if tasks.isdigit() else f"{fields['ArrayJobId']}_[{tasks}]"
    try:
        restarts = int(fields.get("Restarts", "0"))
    except ValueError:
        raise SlurmOutputError(f"scontrol show job {job_id}: Restarts={fields.get('Restarts')!r}, expected a count") from None
    return SlurmJob(
        job_id=job_id,
        name=fields.get("JobName", ""),
        state=_state(fields["JobState"], f"scontrol show job {job_id}"),
        reason=fields.get("Reason", "None"),
        restarts=restarts,
        requeue=fields.get("Requeue", "0") == "1",
        nodes=fields.get("NodeList", "") if fields.get("NodeList") != "(null)" else "",
        batch_host=fields.get("BatchHost", ""),
        exit_code=fields.get("ExitCode", ""),
        time_limit=fields.get("TimeLimit", ""),
        partition=fields.get("Partition", ""),
        gres=fields.get("TresPerNode", ""),
        fields=dict(fields),
    )


def parse_scontrol_jobs(text: str) -> dict[str, SlurmJob]:
    """`scontrol show job -o [ID...]`: one job per line -> {job id: job}."""
    jobs = {}
    for line in text.splitlines():
        if line.strip():
            job = job_from_fields(parse_scontrol_fields(line))
            jobs[job.job_id] = job
    return jobs


# `squeue -o` fields fleet asks for, in order; `|` never occurs in them.
SQUEUE_FIELDS = ("%i", "%T", "%r", "%N", "%b", "%P")
SQUEUE_FORMAT = "|".join(SQUEUE_FIELDS)


@dataclass(frozen=True)
class QueueEntry:
    job_id: str
    state: JobState
    reason: str
    nodes: str
    gres: str
    partition: str


def parse_squeue(text: str) -> dict[str, QueueEntry]:
    """`squeue -h -t all -o SQUEUE_FORMAT` -> {job id: entry}. A pending array prints `<id>_[1-3]`."""
    entries = {}
    for number, (job_id, state, reason, nodes, gres, partition) in _pipe_rows(text, "squeue", len(SQUEUE_FIELDS), SQUEUE_FORMAT):
        entries[job_id] = QueueEntry(job_id, _state(state, f"squeue line {number}"), reason, nodes, gres, partition)
    return entries


def _pipe_rows(text: str, command: str, fields: int, layout: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line of a `|`-separated listing; a line with
    another number of fields is refused, naming the command, the line and the layout asked for."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != fields:
            raise SlurmOutputError(f"{command} line {number}: {line!r}: expected {fields} fields ({layout})")
        rows.append((number, parts))
    return rows


SINFO_FORMAT = "%N|%P|%T|%G|%c|%m|%f"


@dataclass(frozen=True)
class NodeInfo:
    """One node in one partition, as `sinfo -h -N -o SINFO_FORMAT` reports it."""

    name: str
    partition: str
    default_partition: bool
    state: str  # idle, mixed, allocated, down*, drained, ... (a trailing * : not responding)
    gres: Mapping[str, int]  # gres name -> count per node (types summed: gpu:a100:4 -> gpu: 4)
    cpus: int
    memory_mb: int
    features: tuple[str, ...]

    @property
    def usable(self) -> bool:
        """Takes new work now (or soon: a node that is merely busy)."""
        base = self.state.rstrip("*~#!%$@^-")
        return not self.state.endswith("*") and base in ("idle", "mixed", "allocated", "completing", "planned")


def parse_gres(text: str) -> dict[str, int]:
    """`gpu:8`, `gpu:a100:4(S:0-1)`, `gpu:2,nic:1`, `(null)` -> {name: count}."""
    counts: dict[str, int] = {}
    if text in ("", "(null)"):
        return counts
    for item in re.split(r",(?![^(]*\))", text):
        item = re.sub(r"\(.*\)$", "", item.strip())
        parts = item.split(":")
        if len(parts) < 2 or not parts[-1].isdigit():
            raise SlurmOutputError(f"sinfo: GRES {text!r}: expected name[:type]:count items")
        counts[parts[0]] = counts.get(parts[0], 0) + int(parts[-1])
    return counts


def parse_sinfo_nodes(text: str) -> list[NodeInfo]:
    nodes = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 7:
            raise SlurmOutputError(f"sinfo line {number}: {line!r}: expected 7 fields ({SINFO_FORMAT})")
        name, partition, state, gres, cpus, memory, features = parts
        try:
            cpu_count, memory_mb = int(cpus), int(memory.rstrip("+"))
        except ValueError:
            raise SlurmOutputError(f"sinfo line {number}: {line!r}: CPUs and memory must be numbers") from None
        nodes.append(
            NodeInfo(
                name=name,
                partition=partition.rstrip("*"),
                default_partition=partition.endswith("*"),
                state=state,
                gres=parse_gres(gres),
                cpus=cpu_count,
                memory_mb=memory_mb,
                features=tuple(f for f in features.split(",") if f and f != "(null)"),
            )
        )
    return nodes


# `sacct` fields fleet reads where the cluster keeps accounting (slurmdbd): a job slurmctld has
# forgotten (ended longer than MinJobAge ago) is still there. `-P`: `|`-separated, no padding.
SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList", "Elapsed", "Timelimit")


@dataclass(frozen=True)
class AccountedJob:
    job_id: str  # `<job>` or `<array job>_<task>` (-X: allocations only, no steps)
    state: JobState
    exit_code: str
    nodes: str
    elapsed: str
    time_limit: str


def parse_sacct(text: str) -> dict[str, AccountedJob]:
    """`sacct -n -P -X -o JobID,State,ExitCode,NodeList,Elapsed,Timelimit` -> {job id: job}."""
    jobs = {}
    for number, (job_id, state, exit_code, nodes, elapsed, limit) in _pipe_rows(text, "sacct", len(SACCT_FIELDS), ",".join(SACCT_FIELDS)):
        jobs[job_id] = AccountedJob(job_id, _state(state, f"sacct line {number}"), exit_code, nodes, elapsed, limit)
    return jobs
