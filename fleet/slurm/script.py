"""The batch script of one Slurm job: `#SBATCH` options from the cluster's inventory entry and
the job's needs, and a body that runs the same agent as on an SSH host. Pure.

The job asks for one node and its GPUs as GRES (`--gres=gpu:N`); the agent inside works through
a sweep directory on the cluster's shared filesystem, exactly as on an SSH host, so a requeued
job (node failure, preemption) starts the agent again on the same directory and it runs only
what has no result yet. Before the agent, `fleet.host.grant` binds the shard to the GPUs Slurm
granted this start, and `fleet.host.nodeprep` gathers the node's facts, runs the preflight rules
on them (refusing the node where one fails) and stages the models to node-local storage. A job
array runs one such directory per task
(`<root>/task-<SLURM_ARRAY_TASK_ID>`): servers of one size in one submission.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from dataclasses import dataclass

SLURM_MINUTE_S = 60  # Slurm's time limits are whole minutes
ARRAY_TASK_DIR = "task-{index}"
# sbatch reads #SBATCH lines itself, splitting at whitespace (no shell quoting): a value must be one word.
_WORD = re.compile(r"^[^\s'\"\\]+$")


@dataclass(frozen=True)
class BatchJob:
    """One submission: a single job, or an array of `array_size` tasks of the same shape."""

    name: str
    gpus: int
    time_limit_s: int
    root: str  # the sweep dir (single job) or the parent of the task dirs (array), on the shared fs
    python: str  # the interpreter on the nodes
    bundle_dir: str  # where the shipped fleet/host package lies on the shared fs (PYTHONPATH)
    output: str  # Slurm's stdout/stderr file pattern (%j, %A, %a allowed)
    gres_name: str = "gpu"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    cpus_per_task: int | None = None
    array_tasks: tuple[int, ...] | None = None  # an array job's task indexes (a resubmission: only some)
    requeue: bool = True
    stop_grace_s: int = 60  # SIGTERM to the agent this long before the limit: it stops cleanly
    # The sweep's node requirements (fleet.host.contract.nodeprep): the node's facts, preflight and
    # model staging run before the agent (fleet.host.nodeprep); None: the agent starts at once.
    node_requirements: str | None = None
    exclude: tuple[str, ...] = ()  # nodes that refused this work before (--exclude)

    def task_dir(self, index: int) -> str:
        if self.array_tasks is None:
            raise ValueError(f"{self.name}: not an array job")
        return posixpath.join(self.root, ARRAY_TASK_DIR.format(index=index))


def slurm_time(seconds: float) -> str:
    """`D-HH:MM:SS` for sbatch --time, rounded up to Slurm's whole minutes."""
    minutes = max(1, math.ceil(seconds / SLURM_MINUTE_S))
    days, rest = divmod(minutes * SLURM_MINUTE_S, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days}-{hours:02d}:{rest // 60:02d}:00"


def time_limit_s(estimate_s: float, *, margin: float, floor_s: int, cap_s: int | None) -> int:
    """The job's limit: the estimate with a margin (never below the floor: server start-up and
    model load are in every job), at most the partition's or the inventory's cap."""
    wanted = max(float(floor_s), estimate_s * margin)
    limit = math.ceil(wanted / SLURM_MINUTE_S) * SLURM_MINUTE_S
    return min(limit, cap_s) if cap_s is not None else limit


def array_spec(indexes: tuple[int, ...]) -> str:
    """`--array` value: sorted indexes as ranges, `0-3,7,9-10`."""
    ordered = sorted(set(indexes))
    runs: list[list[int]] = [[ordered[0], ordered[0]]]
    for index in ordered[1:]:
        if index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    return ",".join(parts)


def _option(name: str, value: object) -> str:
    text = str(value)
    if not _WORD.match(text):
        raise ValueError(f"#SBATCH --{name}: {text!r} must be one word (no spaces, quotes or backslashes)")
    return f"#SBATCH --{name}={text}"


def render_batch_script(job: BatchJob) -> str:
    if job.gpus < 0 or (job.array_tasks is not None and (not job.array_tasks or min(job.array_tasks) < 0)):
        raise ValueError(f"{job.name}: gpus must be >= 0 and an array at least one task, indexes >= 0")
    options = [
        _option("job-name", job.name),
        _option("nodes", 1),
        _option("ntasks", 1),
        _option("time", slurm_time(job.time_limit_s)),
        _option("output", job.output),
        _option("open-mode", "append"),  # a requeued job's output follows the first start's
        _option("signal", f"B:TERM@{job.stop_grace_s}"),
    ]
    if job.gpus:
        options.append(_option("gres", f"{job.gres_name}:{job.gpus}"))
    for name, value in (("partition", job.partition), ("account", job.account), ("qos", job.qos), ("constraint", job.constraint), ("cpus-per-task", job.cpus_per_task)):
        if value is not None:
            options.append(_option(name, value))
    if job.array_tasks is not None:
        options.append(_option("array", array_spec(job.array_tasks)))
    if job.exclude:
        options.append(_option("exclude", ",".join(sorted(set(job.exclude)))))
    options.append("#SBATCH --requeue" if job.requeue else "#SBATCH --no-requeue")
    q = shlex.quote
    if job.array_tasks is None:
        sweep_dir = q(job.root)
    else:
        sweep_dir = q(job.root.rstrip("/") + "/") + '"' + ARRAY_TASK_DIR.format(index="${SLURM_ARRAY_TASK_ID:?not an array task}") + '"'
    body = [
        "set -eu",
        f"dir={sweep_dir}",
        # Which start this is, for the agent's log: Slurm counts requeues in SLURM_RESTART_COUNT.
        'echo "fleet: job ${SLURM_JOB_ID} on $(hostname), start $((${SLURM_RESTART_COUNT:-0} + 1)), GPUs ${CUDA_VISIBLE_DEVICES:-none}" >&2',
        f"export PYTHONPATH={q(job.bundle_dir)}",
        # The shard names the GPUs Slurm granted this start (fleet.host.grant), then the agent runs.
        f'{q(job.python)} -m fleet.host.grant "$dir"',
    ]
    if job.node_requirements is not None:
        # The node's facts and preflight, then the models to node-local storage (once per node and
        # boot); a node that fails exits REFUSED_EXIT here, the agent never starts on it.
        body.append(f'{q(job.python)} -m fleet.host.nodeprep "$dir" {q(job.node_requirements)}')
    body += [
        # exec: the agent is the batch step's process, so Slurm's SIGTERM (limit, scancel,
        # preemption) reaches it and it stops its servers.
        f'exec {q(job.python)} -m fleet.host.agent run --sweep-dir "$dir"',
    ]
    return "#!/bin/bash\n" + "\n".join(options) + "\n\n" + "\n".join(body) + "\n"
