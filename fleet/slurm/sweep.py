"""`fleet sweep --hosts <kind: slurm entry>`: the plan as Slurm job arrays on the cluster.

How a Slurm sweep goes:
1. The login host (the entry's transport) is asked for the cluster's nodes (`sinfo`); the plan is
   made for one node of the partition's largest GPU count (launch commands, memory checks,
   quarantine, estimates: as for an SSH host). Models go to the shared dir (`slurm.shared_dir`):
   fetched or, for the sim engine, made from the model card, once, from the login host.
2. Each server configuration becomes one task of a job array, one array per GPU count
   (`--gres=<gres>:N`), its time limit the longest task's estimate with the entry's margin. Each
   task has its own sweep dir on the shared fs (`<shared>/slurm/<sweep>/<array>/task-<i>/`) with a
   shard template; the batch script binds it to the GPUs Slurm grants (fleet.slurm.grant) and
   runs the same agent, which writes results exactly as on an SSH host. A request larger than
   any node of the partition is refused before anything is submitted.
3. The controller polls Slurm (`scontrol show job`) and pulls the shared dir through the login
   host (rsync); each result lands in `results/<sweep>/<entry>/runs/`, as from an SSH host. What
   happens to a task follows fleet.slurm.outcome: the results say what is done; a task that
   Slurm requeues (node failure, preemption) is waited for, one that ended lost to the cluster
   is submitted again on the same dir -- the agent then runs only what has no result.
4. `results/<sweep>/slurm.json` records the arrays, their tasks and every submission's job id:
   `fleet sweep --resume ID` reattaches to them, `fleet sweep --cancel ID` cancels them.
   Ctrl-C (or a killed controller) leaves the jobs to Slurm.

Not done here (see README.md, Slurm): provisioning and preflight per node inside allocations
(facts, CUDA toolkit, node-local staging), repair rounds, live quarantine pushes.
"""

from __future__ import annotations

import json
import logging
import posixpath
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from fleet.connect import transport_for
from fleet.errors import FleetError
from fleet.fixes.quarantine import QuarantineStore
from fleet.host.atomic import atomic_file, write_json_atomic
from fleet.host.contract import ContractError, RunResult, SweepDir, load_result
from fleet.host.contract.shard import Shard
from fleet.inventory import EngineKind, GpuSpec, Host, HostKind, HostPaths, ServiceManager
from fleet.layout import BASE_PORT, LATEST, PORT_STRIDE
from fleet.plan import Plan, PlannedServer, PlanOptions, hardware_of, launch_on, make_plan
from fleet.playbook import load_playbook
from fleet.provision.models import ensure_cached, read_state
from fleet.provision.provision import ensure_dirs, ensure_sim_model, models_of, provision_options
from fleet.slurm import grant
from fleet.slurm.commands import SlurmClient
from fleet.slurm.feasibility import Request, infeasible, unusable_now
from fleet.slurm.jobs import NodeInfo, SlurmJob
from fleet.slurm.outcome import Action, Verdict, judge
from fleet.slurm.script import BatchJob, render_batch_script, time_limit_s
from fleet.sweep.bundle import write_bundle
from fleet.sweep.record import new_sweep_id
from fleet.sweep.shards import agent_limits, server_name, server_spec
from fleet.transport.base import Transport

log = logging.getLogger("fleet.slurm")

RECORD = "slurm.json"
RECORD_SCHEMA = "fleet.slurm_sweep/1"
TRANSFER_TIMEOUT_S = 600.0
Say = Callable[[str], None]


class SlurmSweepError(FleetError):
    pass


# ---------------------------------------------------------------------------------------------
# the record of a Slurm sweep (results/<sweep>/slurm.json)


@dataclass
class Task:
    index: int
    server_id: str
    label: str
    run_ids: list[str]
    estimate_s: float


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
    state: str = "running"
    schema: str = RECORD_SCHEMA

    def save(self, directory: Path) -> None:
        write_json_atomic(directory / RECORD, asdict(self))

    @classmethod
    def load(cls, directory: Path) -> SlurmSweep:
        path = directory / RECORD
        try:
            raw = json.loads(path.read_text())
            if raw.get("schema") != RECORD_SCHEMA:
                raise ValueError(f"schema {raw.get('schema')!r}, expected {RECORD_SCHEMA}")
            arrays = [
                JobArray(a["key"], a["gpus"], [Task(**t) for t in a["tasks"]], [Submission(**s) for s in a["submissions"]], a["finished"])
                for a in raw["arrays"]
            ]
            return cls(raw["sweep_id"], raw["cluster"], raw["root"], arrays, raw["state"])
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


# ---------------------------------------------------------------------------------------------
# planning (pure)


def node_host(cluster: Host, gpus_per_node: int) -> Host:
    """The host a plan is made for: one node of the cluster, its work and models on the shared dir."""
    assert cluster.slurm is not None
    shared = cluster.slurm.shared_dir
    return cluster.model_copy(
        update={
            "kind": HostKind.host,
            "slurm": None,
            "gpus": GpuSpec(count=gpus_per_node, model=cluster.gpus.model),
            "paths": HostPaths(work_dir=posixpath.join(shared, "work"), model_cache=posixpath.join(shared, "models"), staging=None),
            "service_manager": ServiceManager.process,  # inside an allocation: no systemd units of ours
        }
    )


def partition_nodes(cluster: Host, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
    assert cluster.slurm is not None
    partition = cluster.slurm.partition
    return [n for n in nodes if (n.partition == partition if partition else n.default_partition)]


def gpus_per_node(cluster: Host, nodes: Sequence[NodeInfo]) -> int:
    assert cluster.slurm is not None
    counts = [n.gres.get(cluster.slurm.gres, 0) for n in partition_nodes(cluster, nodes)]
    return max(counts, default=0)


def task_server(planned: PlannedServer, node: Host, record: SlurmSweep, array: JobArray, index: int, port: int) -> dict[str, Any]:
    """The shard template's server: GPUs relative to the allocation (grant.py binds them), its own
    port (tasks of one sweep may share a node), its work dir the task's."""
    hardware = hardware_of(node)
    moved = replace(planned, gpus=tuple(range(len(planned.gpus))), port=port, launch=launch_on(node, planned.config, port, hardware))
    spec = server_spec(moved, node, record.sweep_id, after=[])
    env = {k: v for k, v in spec.env.items() if k != "CUDA_VISIBLE_DEVICES"}
    if node.engine.kind is EngineKind.sim:
        env["PYTHONPATH"] = record.bundle_dir
    spec = replace(spec, env=env, cwd=record.task_dir(array, index), unit_name=f"{server_name(record.sweep_id, planned.config.id)}")
    return json.loads(json.dumps(asdict(spec)))


def arrays_of(plan: Plan) -> list[JobArray]:
    """One array per GPU count, longest tasks first (a partial array then starts the long ones)."""
    by_gpus: dict[int, list[PlannedServer]] = {}
    for server in plan.servers:
        by_gpus.setdefault(len(server.gpus), []).append(server)
    arrays = []
    for gpus in sorted(by_gpus):
        servers = sorted(by_gpus[gpus], key=lambda s: (-(s.end_s - s.start_s), s.config.id))
        tasks = [Task(i, s.config.id, s.config.label, [r.id for r in s.runs], s.end_s - s.start_s) for i, s in enumerate(servers)]
        arrays.append(JobArray(f"gpu{gpus}", gpus, tasks))
    return arrays


def batch_job(cluster: Host, record: SlurmSweep, array: JobArray, tasks: Sequence[int], limit_s: int) -> BatchJob:
    assert cluster.slurm is not None
    s = cluster.slurm
    return BatchJob(
        name=f"fleet-{record.sweep_id}-{array.key}",
        gpus=array.gpus,
        time_limit_s=limit_s,
        root=record.array_dir(array),
        python=cluster.engine.python,
        bundle_dir=record.bundle_dir,
        output=posixpath.join(record.array_dir(array), "slurm-%A_%a.out"),
        gres_name=s.gres,
        partition=s.partition,
        account=s.account,
        qos=s.qos,
        constraint=s.constraint,
        cpus_per_task=s.cpus_per_gpu * array.gpus if s.cpus_per_gpu else None,
        array_tasks=tuple(tasks),
    )


def first_limit(cluster: Host, array: JobArray, tasks: Sequence[int]) -> int:
    assert cluster.slurm is not None
    longest = max(array.tasks[i].estimate_s for i in tasks)
    return time_limit_s(longest, margin=cluster.slurm.time_margin, floor_s=cluster.slurm.min_time_s, cap_s=cluster.slurm.time_limit_s)


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


# ---------------------------------------------------------------------------------------------
# talking to the cluster


def _ship(t: Transport, record: SlurmSweep) -> None:
    """The agent's bundle and grant.py (standard library only) to the shared dir."""
    with tempfile.TemporaryDirectory(prefix="fleet-slurm-bundle-") as temp:
        bundle = Path(temp) / "bundle"
        write_bundle(bundle)
        (bundle / "fleet" / "slurm").mkdir()
        (bundle / "fleet" / "slurm" / "__init__.py").write_text("")
        shutil.copyfile(grant.__file__, bundle / "fleet" / "slurm" / "grant.py")
        t.rsync_push(bundle, record.bundle_dir + "/", timeout=TRANSFER_TIMEOUT_S, delete=True).check()


def _provision_models(t: Transport, node: Host, playbook_path: Path) -> None:
    playbook = load_playbook(playbook_path)
    options = provision_options(playbook_path.parent, {})
    ensure_dirs(t, node, dry_run=False)
    for model in models_of(playbook):
        if node.engine.kind is EngineKind.sim and not (model.mirror or model.path):
            ensure_sim_model(t, model, node, dry_run=False)
        else:
            ensure_cached(t, model, node, read_state(t, model, node), dry_run=False, mirror_root=options.mirror_root,
                          transfer=lambda action: action(), timeout=TRANSFER_TIMEOUT_S, secrets=options.secrets)


def _submit(t: Transport, client: SlurmClient, cluster: Host, record: SlurmSweep, array: JobArray, tasks: Sequence[int], limit_s: int, say: Say) -> None:
    job = batch_job(cluster, record, array, tasks, limit_s)
    n = len(array.submissions)
    job_id = client.submit(render_batch_script(job), posixpath.join(record.array_dir(array), f"submit-{n}.sh"))
    array.submissions.append(Submission(job_id, list(tasks), limit_s))
    say(f"{cluster.name}: submitted {array.key} tasks {job.array_tasks} as job {job_id} (limit {limit_s}s)")


@dataclass
class SlurmSweepOutcome:
    sweep_id: str
    directory: Path
    record: SlurmSweep
    results: int
    by_status: dict[str, int]
    problems: list[str]
    interrupted: bool = False


def start_slurm_sweep(
    playbook_path: Path,
    cluster: Host,
    results_root: Path,
    *,
    connect: Callable[[Host], Transport] = transport_for,
    poll_interval_s: float = 5.0,
    stop: threading.Event | None = None,
    memory_check: bool = True,
    quarantine: QuarantineStore | None = None,
    say: Say = lambda line: None,
) -> SlurmSweepOutcome:
    if cluster.slurm is None:
        raise SlurmSweepError(f"{cluster.source_file}: {cluster.name} is not a `kind: slurm` entry")
    playbook = load_playbook(playbook_path)
    t = connect(cluster)
    client = SlurmClient(t)
    nodes = client.nodes()
    per_node = gpus_per_node(cluster, nodes)
    if per_node == 0:
        raise SlurmSweepError(f"{cluster.name}: no node of partition {cluster.slurm.partition or '(default)'} has {cluster.slurm.gres} GRES (sinfo)")
    node = node_host(cluster, per_node)
    store = quarantine or QuarantineStore(results_root / "quarantine.json")
    plan = make_plan(playbook, [node], PlanOptions(memory_check=memory_check, quarantine=store, hardware={node.name: hardware_of(node)}))
    if plan.unplaceable:
        raise SlurmSweepError(f"{cluster.name}: cannot place {[c.label for c, _ in plan.unplaceable]}: {plan.unplaceable[0][1]}")
    sweep_id = new_sweep_id(playbook)
    directory = results_root / sweep_id
    directory.mkdir(parents=True)
    shutil.copyfile(playbook_path, directory / "playbook.yaml")
    write_json_atomic(directory / "hosts" / f"{cluster.name}.json", cluster.model_dump(mode="json"))
    write_json_atomic(directory / "plan.json", plan.to_json())
    with atomic_file(results_root / LATEST) as handle:
        handle.write(f"{sweep_id}\n".encode())
    record = SlurmSweep(sweep_id, cluster.name, posixpath.join(cluster.slurm.shared_dir, "slurm", sweep_id), arrays_of(plan))
    # Refused before anything is submitted: a request no node of the partition can ever hold.
    for array in record.arrays:
        request = Request(array.gpus, cluster.slurm.gres, cluster.slurm.partition, cluster.slurm.constraint)
        if (why := infeasible(request, nodes)) is not None:
            raise SlurmSweepError(f"{cluster.name}: {array.key} ({len(array.tasks)} servers): {why}")
        if (now := unusable_now(request, nodes)) is not None:
            say(f"{cluster.name}: {array.key}: {now}; the jobs will wait for them")
    record.save(directory)
    _provision_models(t, node, playbook_path)
    _ship(t, record)
    planned = {s.config.id: s for s in plan.servers}
    port = 0
    limits = agent_limits(playbook)
    for array in record.arrays:
        for task in array.tasks:
            template = Shard(sweep_id, cluster.name, "", "process", limits, [])
            shard = json.loads(template.to_json())
            shard["servers"] = [task_server(planned[task.server_id], node, record, array, task.index, BASE_PORT + PORT_STRIDE * port)]
            port += 1
            t.put_bytes(json.dumps(shard, indent=1, sort_keys=True).encode(), posixpath.join(record.task_dir(array, task.index), grant.TEMPLATE),
                        timeout=60)
    for array in record.arrays:
        tasks = [task.index for task in array.tasks]
        _submit(t, client, cluster, record, array, tasks, first_limit(cluster, array, tasks), say)
        record.save(directory)
    return watch_slurm_sweep(directory, cluster, record, t, client, poll_interval_s=poll_interval_s, stop=stop, say=say)


def _pull(t: Transport, record: SlurmSweep, directory: Path) -> dict[tuple[str, int], set[str]]:
    """The shared dir's task dirs into results/<sweep>/<cluster>/slurm/; every readable result
    into <cluster>/runs/. Returns the run ids with a result, per (array, task)."""
    mirror = directory / record.cluster / "slurm"
    mirror.mkdir(parents=True, exist_ok=True)
    t.rsync_pull(record.root + "/", mirror, timeout=TRANSFER_TIMEOUT_S, excludes=[*SweepDir.PULL_EXCLUDES, "agent/"]).check()
    runs = directory / record.cluster / SweepDir.RUNS
    logs = directory / record.cluster / SweepDir.LOGS
    runs.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, int], set[str]] = {}
    for array in record.arrays:
        for task in array.tasks:
            task_dir = mirror / array.key / f"task-{task.index}"
            have = done.setdefault((array.key, task.index), set())
            for path in sorted((task_dir / SweepDir.RUNS).glob("*.json")):
                try:
                    result = load_result(path)
                except ContractError:
                    continue  # a file the agent is still writing cannot be: atomic; a stranger's: left in the mirror
                if result.run_id in task.run_ids:
                    have.add(result.run_id)
                    shutil.copyfile(path, runs / path.name)
            for path in (task_dir / SweepDir.LOGS).glob("*.log"):
                shutil.copyfile(path, logs / path.name)
    return done


def watch_slurm_sweep(
    directory: Path,
    cluster: Host,
    record: SlurmSweep,
    t: Transport,
    client: SlurmClient,
    *,
    poll_interval_s: float,
    stop: threading.Event | None,
    say: Say,
) -> SlurmSweepOutcome:
    assert cluster.slurm is not None
    stop = stop or threading.Event()
    problems: list[str] = []
    cancelled: set[str] = set()
    while True:
        jobs = client.jobs(record.job_ids())
        done = _pull(t, record, directory)
        pending = 0
        for array in record.arrays:
            again: dict[int, Verdict] = {}
            for task in array.tasks:
                if str(task.index) in array.finished:
                    continue
                tries = array.submissions_of(task.index)
                job = task_job(jobs, tries[-1].job_id, task.index) if tries else None
                verdict = judge(job, set(task.run_ids), done[(array.key, task.index)], len(tries), cluster.slurm.max_submissions)
                if verdict.action is Action.WAIT:
                    pending += 1
                elif verdict.action is Action.RESUBMIT:
                    again[task.index] = verdict
                    say(f"{cluster.name}: {array.key} task {task.index} ({task.label}): {verdict.reason}")
                else:
                    if verdict.action is Action.CANCEL and job is not None and job.job_id not in cancelled:
                        client.cancel([job.job_id])  # a pending array's rest is one record: cancelled once
                        cancelled.add(job.job_id)
                    array.finished[str(task.index)] = f"{verdict.action.value}: {verdict.reason}"
                    if verdict.action is not Action.DONE:
                        problems.append(f"{array.key} task {task.index} ({task.label}): {verdict.reason}")
                        say(f"{cluster.name}: {array.key} task {task.index} ({task.label}): {verdict.reason}")
            if again:
                longer = any(v.longer_limit for v in again.values())
                last = max(array.submissions_of(i)[-1].time_limit_s for i in again)
                limit = min(last * 2, cluster.slurm.time_limit_s or last * 2) if longer else last
                _submit(t, client, cluster, record, array, sorted(again), limit, say)
                pending += len(again)
        record.save(directory)
        if pending == 0:
            break
        if stop.wait(poll_interval_s):
            say(f"{cluster.name}: stopped watching; the jobs go on under Slurm (fleet sweep --resume {record.sweep_id})")
            return _outcome(directory, record, problems, interrupted=True)
    record.state = "failed" if problems else "done"
    record.save(directory)
    return _outcome(directory, record, problems)


def _outcome(directory: Path, record: SlurmSweep, problems: list[str], interrupted: bool = False) -> SlurmSweepOutcome:
    results: list[RunResult] = []
    for path in sorted((directory / record.cluster / SweepDir.RUNS).glob("*.json")):
        results.append(load_result(path))
    by_status: dict[str, int] = {}
    for result in results:
        by_status[result.status.value] = by_status.get(result.status.value, 0) + 1
    summary = {
        "sweep_id": record.sweep_id, "state": record.state, "directory": str(directory), "interrupted": interrupted,
        "results": len(results), "by_status": by_status, "problems": problems,
        "jobs": {a.key: [asdict(s) for s in a.submissions] for a in record.arrays},
    }  # fmt: skip
    write_json_atomic(directory / "summary.json", summary)
    return SlurmSweepOutcome(record.sweep_id, directory, record, len(results), by_status, problems, interrupted)


def is_slurm_sweep(directory: Path) -> bool:
    return (directory / RECORD).exists()


def _cluster_of(directory: Path, record: SlurmSweep) -> Host:
    return Host.model_validate(json.loads((directory / "hosts" / f"{record.cluster}.json").read_text()))


def resume_slurm_sweep(
    directory: Path,
    *,
    connect: Callable[[Host], Transport] = transport_for,
    poll_interval_s: float = 5.0,
    stop: threading.Event | None = None,
    say: Say = lambda line: None,
) -> SlurmSweepOutcome:
    """Reattach to a Slurm sweep's jobs (the controller was stopped or killed; the jobs went on)."""
    record = SlurmSweep.load(directory)
    cluster = _cluster_of(directory, record)
    t = connect(cluster)
    return watch_slurm_sweep(directory, cluster, record, t, SlurmClient(t), poll_interval_s=poll_interval_s, stop=stop, say=say)


def cancel_slurm_sweep(directory: Path, *, connect: Callable[[Host], Transport] = transport_for) -> list[str]:
    """`scancel` every job the sweep submitted; returns their ids."""
    record = SlurmSweep.load(directory)
    cluster = _cluster_of(directory, record)
    t = connect(cluster)
    ids = record.job_ids()
    SlurmClient(t).cancel(ids)
    record.state = "cancelled"
    record.save(directory)
    return ids
