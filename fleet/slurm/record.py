"""What a Slurm sweep records (results/<sweep>/slurm.json: its arrays, tasks and every
submission's job id), how its tasks' dirs come back through the login host, and which job is a
task's. Apart from the sweep loop so that `fleet status` and `fleet fetch-logs` read a Slurm
sweep without importing the planner, provisioning or the fixes (as fleet.sweep.record does for
SSH sweeps)."""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fleet.host.atomic import write_json_atomic
from fleet.host.contract import SweepDir
from fleet.inventory import Host
from fleet.layout import SweepFolder
from fleet.slurm.jobs import SlurmJob
from fleet.sweep.ledger import ResultLedger
from fleet.transport.base import Transport
from fleet.errors import SlurmSweepError

RECORD = "slurm.json"
RECORD_SCHEMA = "fleet.slurm_sweep/1"
TRANSFER_TIMEOUT_S = 600.0
Say = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# the record of a Slurm sweep (results/<sweep>/slurm.json)


@dataclass
class Task:
    index: int
    server_id: str
    label: str
    run_ids: list[str]
    estimate_s: float
    port: int = 0  # its server's port, unique in the sweep (tasks share nodes); 0 until planted


@dataclass
class Submission:
    job_id: str
    tasks: list[int]
    time_limit_s: int
    at: float = field(default_factory=time.time)


@dataclass
class JobArray:
    key: str  # `gpu<N>`: the arrays of a sweep differ by the GPUs a task asks for
    gpus: int
    tasks: list[Task]
    submissions: list[Submission] = field(default_factory=list)
    # Task index -> what was decided for good (done, or given up with the reason).
    finished: dict[str, str] = field(default_factory=dict)

    def submissions_of(self, index: int) -> list[Submission]:
        return [s for s in self.submissions if index in s.tasks]


@dataclass
class SlurmSweep:
    sweep_id: str
    cluster: str  # the inventory entry
    root: str  # <shared>/slurm/<sweep-id> on the cluster
    arrays: list[JobArray]
    state: str = "running"  # running, then finished (every run has its result) or incomplete; cancelled
    schema: str = RECORD_SCHEMA
    # How the plan was made, so that a resume makes it again (same server ids) for its repairs.
    memory_check: bool = True
    gpus_per_node: int = 0
    created_at: float = field(default_factory=time.time)  # a resume's elapsed time counts from here

    def save(self, directory: Path) -> None:
        write_json_atomic(directory / RECORD, asdict(self))

    @classmethod
    def load(cls, directory: Path) -> SlurmSweep:
        path = directory / RECORD
        try:
            raw = json.loads(path.read_text())
            if raw.get("schema") != RECORD_SCHEMA:
                raise ValueError(f"schema {raw.get('schema')!r}, expected {RECORD_SCHEMA}")
            arrays = [JobArray(a["key"], a["gpus"], [Task(**t) for t in a["tasks"]], [Submission(**s) for s in a["submissions"]], a["finished"]) for a in raw["arrays"]]
            return cls(
                raw["sweep_id"],
                raw["cluster"],
                raw["root"],
                arrays,
                raw["state"],
                memory_check=raw.get("memory_check", True),
                gpus_per_node=raw.get("gpus_per_node", 0),
                created_at=raw.get("created_at", time.time()),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SlurmSweepError(f"{path}: not a readable Slurm sweep record ({exc})") from None

    def array_dir(self, array: JobArray) -> str:
        return posixpath.join(self.root, array.key)

    def task_dir(self, array: JobArray, index: int) -> str:
        return posixpath.join(self.array_dir(array), f"task-{index}")

    @property
    def bundle_dir(self) -> str:
        return posixpath.join(self.root, "agent")

    def job_ids(self) -> list[str]:
        return [s.job_id for a in self.arrays for s in a.submissions]


def is_slurm_sweep(directory: Path) -> bool:
    return (directory / RECORD).exists()


def cluster_of(directory: Path, record: SlurmSweep) -> Host:
    return Host.model_validate(json.loads(SweepFolder(directory).host_file(record.cluster).read_text()))


def expand_array_spec(text: str) -> set[int]:
    """`3`, `[3-5]`, `1,4-6%2` (Slurm's pending-task ranges, a `%` limit after them) -> indexes."""
    body = text.strip("[]").split("%")[0]
    indexes: set[int] = set()
    for part in body.split(","):
        if "-" in part:
            start, end = part.split("-", 1)
            indexes.update(range(int(start), int(end) + 1))
        elif part:
            indexes.add(int(part))
    return indexes


def task_job(jobs: dict[str, SlurmJob], job_id: str, index: int) -> SlurmJob | None:
    """The job of one array task: `A_i` once it started; the pending record `A_[i-j]` before."""
    exact = jobs.get(f"{job_id}_{index}")
    if exact is not None:
        return exact
    for key, job in jobs.items():
        if key.startswith(f"{job_id}_") and index in expand_array_spec(key.split("_", 1)[1]):
            return job
    return None


def _copy_atomic(source: Path, target: Path) -> None:
    """A result into runs/ whole or not at all: `fleet status` and the progress display read it meanwhile."""
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, temp)
    os.replace(temp, target)


TaskLedgers = dict[tuple[str, int], ResultLedger]


def task_ledger(mirror: Path, record: SlurmSweep, array: JobArray, task: Task, ledgers: TaskLedgers | None = None) -> ResultLedger:
    """The reader of one task dir's results in the mirror (fleet.sweep.ledger: bounded, checked,
    a task's own runs only), kept in `ledgers` across polls so that each file is read once."""
    key = (array.key, task.index)
    ledger = (ledgers or {}).get(key) or ResultLedger(mirror / array.key / f"task-{task.index}" / SweepDir.RUNS, record.sweep_id, record.cluster, task.run_ids)
    if ledgers is not None:
        ledgers[key] = ledger
    ledger.refresh()
    return ledger


def pull_tasks(t: Transport, record: SlurmSweep, directory: Path, *, logs: bool = True, ledgers: TaskLedgers | None = None) -> dict[tuple[str, int], set[str]]:
    """The shared dir's task dirs into results/<sweep>/<cluster>/slurm/; every result a task's
    ledger accepts into <cluster>/runs/, the first one of a run only (and, with `logs`, the server
    logs into <cluster>/logs/). Returns the run ids with a result, per (array, task). `ledgers`:
    the task ledgers a watch keeps between polls."""
    mirror = directory / record.cluster / "slurm"
    mirror.mkdir(parents=True, exist_ok=True)
    excludes = [*SweepDir.PULL_EXCLUDES, "agent/"] + ([] if logs else [f"{SweepDir.LOGS}/", "slurm-*.out"])
    t.rsync_pull(record.root + "/", mirror, timeout=TRANSFER_TIMEOUT_S, excludes=excludes).check()
    runs = directory / record.cluster / SweepDir.RUNS
    runs.mkdir(parents=True, exist_ok=True)
    logs_dir = directory / record.cluster / SweepDir.LOGS
    logs_dir.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, int], set[str]] = {}
    for array in record.arrays:
        for task in array.tasks:
            task_dir = mirror / array.key / f"task-{task.index}"
            have = done.setdefault((array.key, task.index), set())
            # A file the ledger rejects stays in the mirror, named by the cluster's own ledger of
            # runs/ never: it is not copied (a stranger's, a forgery, a truncated copy).
            for run_id in task_ledger(mirror, record, array, task, ledgers).results:
                have.add(run_id)
                target = runs / f"{run_id}.json"
                if not target.exists():  # the first result of a run is the one kept, as on an SSH host
                    _copy_atomic(task_dir / SweepDir.RUNS / f"{run_id}.json", target)
            if logs:
                for path in (task_dir / SweepDir.LOGS).glob("*.log"):
                    _copy_atomic(path, logs_dir / path.name)
    return done
