"""`fleet sweep --hosts <kind: slurm entry>`: the plan as Slurm job arrays on the cluster.

How a Slurm sweep goes:
1. The login host (the entry's transport) is asked for the cluster's nodes (`sinfo`); the plan is
   made for one node of the partition's largest GPU count (launch commands, memory checks,
   quarantine, estimates: as for an SSH host). Models go to the shared dir (`slurm.shared_dir`):
   fetched or, for the sim engine, made from the model card, once, from the login host.
2. Each server configuration becomes one task of a job array, one array per GPU count
   (`--gres=<gres>:N`), its time limit the longest task's estimate with the entry's margin. Each
   task has its own sweep dir on the shared fs (`<shared>/slurm/<sweep>/<array>/task-<i>/`) with a
   shard template; the batch script binds it to the GPUs Slurm grants (fleet.host.grant) and
   runs the same agent, which writes results exactly as on an SSH host. A request larger than
   any node of the partition is refused before anything is submitted.
3. The controller polls Slurm (`scontrol show job`) and pulls the shared dir through the login
   host (rsync); each result lands in `results/<sweep>/<entry>/runs/`, as from an SSH host. What
   happens to a task follows fleet.slurm.outcome: the results say what is done; a task that
   Slurm requeues (node failure, preemption) is waited for, one that ended lost to the cluster
   is submitted again on the same dir -- the agent then runs only what has no result.
4. Repair, as on SSH hosts (fleet.sweep.fixing.SweepFixer, the same code): once a task has all
   its results, its failed runs are classified (the agent's diagnosis rides in each result); a
   kernel crash quarantines the configuration (each unfinished task of a quarantined server gets
   `quarantine.json` in its dir, and its agent skips it, as on an SSH host), a fixable failure
   becomes a fixed variant, and the variants of one poll are submitted as further tasks of the
   array of their GPU count (a repair round: one more job).
5. `results/<sweep>/slurm.json` records the arrays, their tasks and every submission's job id:
   `fleet sweep --resume ID` reattaches to them, `fleet sweep --cancel ID` cancels them.
   Ctrl-C (or a killed controller) leaves the jobs to Slurm. Progress goes out as the events of an
   SSH sweep (fleet.sweep.events), the cluster as their one host. `fleet status` and
   `fleet fetch-logs` read the sweep by its job ids (fleet.slurm.observe).

Facts, preflight and model staging per node, inside each allocation: fleet.slurm.nodeprep.
"""

from __future__ import annotations

import json
import logging
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from fleet.connect import transport_for
from fleet.fixes.quarantine import QuarantineStore
from fleet.host import grant
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import ContractError, RunResult, SweepDir
from fleet.host.contract.quarantine import HostQuarantine
from fleet.host.contract.shard import AgentLimits, Shard
from fleet.inventory import EngineKind, EngineSpec, GpuSpec, Host, HostPaths, ServiceManager, Target
from fleet.layout import BASE_PORT, PORT_STRIDE, ResultsRoot, SweepFolder
from fleet.plan import Plan, PlannedServer, PlanOptions, hardware_of, launch_on, make_plan, start_scale_of, started_servers, time_scale_of
from fleet.planning.starts import record_sweep_starts, starts_for_plan
from fleet.planning.estimate import DurationHistory
from fleet.playbook import Playbook, load_playbook
from fleet.provision.models import ensure_cached, read_state
from fleet.provision.provision import ensure_dirs, ensure_sim_model, models_of, provision_options
from fleet.slurm.commands import SlurmClient
from fleet.slurm.feasibility import Request, fitting, infeasible, unusable_now
from fleet.slurm.jobs import NodeInfo
from fleet.slurm.nodeprep import NodeRefusals
from fleet.slurm.nodeprep import requirements_path as node_requirements_path
from fleet.slurm.nodeprep import ship as ship_node_prep
from fleet.slurm.outcome import Action, Verdict, judge
from fleet.slurm.record import TRANSFER_TIMEOUT_S, JobArray, Say, SlurmSweep, Submission, Task, TaskLedgers, cluster_of, pull_tasks, task_job
from fleet.errors import SlurmSweepError
from fleet.slurm.script import BatchJob, render_batch_script, time_limit_s
from fleet.sweep.bundle import write_bundle
from fleet.sweep.events import EventSink, EventStream, SweepProgress, record_durations
from fleet.sweep.fixing import SweepFixer
from fleet.sweep.hoststatus import HostStatus, Phase
from fleet.sweep.interface import ClosingLine
from fleet.sweep.ledger import host_ledger, read_sweep_results
from fleet.sweep.record import SweepRecord, file_sha256, new_sweep_id
from fleet.sweep.shards import agent_limits, server_name, server_spec
from fleet.transport.base import Transport

log = logging.getLogger("fleet.slurm")

# ---------------------------------------------------------------------------------------------
# planning (pure)


@dataclass(frozen=True)
class SlurmNode:
    """What a plan is made for on a cluster: one node of its partition (any of them: Slurm places
    the jobs), its work and models on the cluster's shared dir, the cluster entry's engine. A
    `fleet.inventory.Target`, not a host of the inventory: nothing connects to it."""

    name: str  # the cluster entry's: results, quarantine and durations are the cluster's
    gpus: GpuSpec
    paths: HostPaths
    engine: EngineSpec
    source_file: Path
    service_manager: ServiceManager = ServiceManager.process  # inside an allocation: no systemd units of ours

    @classmethod
    def of(cls, cluster: Host, gpus_per_node: int) -> SlurmNode:
        assert cluster.slurm is not None
        shared = cluster.slurm.shared_dir
        paths = HostPaths(work_dir=posixpath.join(shared, "work"), model_cache=posixpath.join(shared, "models"), staging=None)
        return cls(cluster.name, GpuSpec(count=gpus_per_node, model=cluster.gpus.model), paths, cluster.engine, cluster.source_file)


def partition_nodes(cluster: Host, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
    assert cluster.slurm is not None
    partition = cluster.slurm.partition
    return [n for n in nodes if (n.partition == partition if partition else n.default_partition)]


def gpus_per_node(cluster: Host, nodes: Sequence[NodeInfo]) -> int:
    assert cluster.slurm is not None
    counts = [n.gres.get(cluster.slurm.gres, 0) for n in partition_nodes(cluster, nodes)]
    return max(counts, default=0)


def task_server(planned: PlannedServer, node: Target, record: SlurmSweep, array: JobArray, index: int, port: int) -> dict[str, Any]:
    """The shard template's server: GPUs relative to the allocation (grant.py binds them), its own
    port (tasks of one sweep may share a node), its work dir the task's."""
    hardware = hardware_of(node)
    moved = replace(planned, gpus=tuple(range(len(planned.gpus))), port=port, launch=launch_on(node, planned.config, port, hardware))
    spec = server_spec(moved, node, record.sweep_id)
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


def batch_job(cluster: Host, record: SlurmSweep, array: JobArray, tasks: Sequence[int], limit_s: int, exclude: Sequence[str] = ()) -> BatchJob:
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
        node_requirements=node_requirements_path(record.root),
        exclude=tuple(exclude),
    )


def first_limit(cluster: Host, array: JobArray, tasks: Sequence[int]) -> int:
    assert cluster.slurm is not None
    longest = max(array.tasks[i].estimate_s for i in tasks)
    return time_limit_s(longest, margin=cluster.slurm.time_margin, floor_s=cluster.slurm.min_time_s, cap_s=cluster.slurm.time_limit_s)


# ---------------------------------------------------------------------------------------------
# talking to the cluster


def _ship(t: Transport, record: SlurmSweep) -> None:
    """The agent's bundle (fleet.host: the agent, grant, nodeprep) to the shared dir."""
    with tempfile.TemporaryDirectory(prefix="fleet-slurm-bundle-") as temp:
        bundle = Path(temp) / "bundle"
        write_bundle(bundle)
        t.rsync_push(bundle, record.bundle_dir + "/", timeout=TRANSFER_TIMEOUT_S, delete=True).check()


def _provision_models(t: Transport, node: Target, playbook_path: Path) -> None:
    playbook = load_playbook(playbook_path)
    options = provision_options(playbook_path.parent, {})
    ensure_dirs(t, node, dry_run=False)
    for model in models_of(playbook):
        if node.engine.kind is EngineKind.sim and not (model.mirror or model.path):
            ensure_sim_model(t, model, node, dry_run=False)
        else:
            ensure_cached(
                t, model, node, read_state(t, model, node), dry_run=False, mirror_root=options.mirror_root, transfer=lambda action: action(), timeout=TRANSFER_TIMEOUT_S, secrets=options.secrets
            )


def _submit(t: Transport, client: SlurmClient, cluster: Host, record: SlurmSweep, array: JobArray, tasks: Sequence[int], limit_s: int, say: Say, exclude: Sequence[str] = ()) -> None:
    job = batch_job(cluster, record, array, tasks, limit_s, exclude)
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
    fixes: list[dict[str, Any]] = field(default_factory=list)  # fleet.sweep.fixing.FixRecord, as summary.json has them

    @property
    def exit_code(self) -> int:
        """0 when no problem was found and no run failed; 130 when the watching was stopped
        (the jobs go on under Slurm); else 1."""
        if self.interrupted:
            return 130
        failed = sum(n for status, n in self.by_status.items() if status in ("failed", "partial"))
        return 1 if self.problems or failed else 0

    def closing_lines(self) -> list[ClosingLine]:
        """Said on stderr, as everything the Slurm side says while it works."""
        lines = [
            f"results: {self.directory}/{self.record.cluster}/runs/ ({self.results} results: {self.by_status}; summary: {self.directory}/summary.json)",
            *(f"{fix['host']}: {fix['label']}: {fix['failure_class']} -> {fix['action']}: {fix['description']}" for fix in self.fixes),
            *self.problems,
        ]
        if self.interrupted:
            lines.append(f"the jobs go on under Slurm: `fleet sweep --resume {self.sweep_id}`, `fleet sweep --cancel {self.sweep_id}`")
        return [ClosingLine("said", line) for line in lines]


def _durations(results_root: Path) -> DurationHistory | None:
    try:
        return DurationHistory.load(ResultsRoot(results_root).durations)
    except ContractError as exc:
        log.error("%s; estimating from priors", exc)
        return None


def _plan(playbook: Playbook, node: Target, store: QuarantineStore, memory_check: bool, results_root: Path) -> Plan:
    """The plan for one node of the cluster: what a start makes and a resume makes again (same
    playbook copy, node and options: the same server ids, which the fixer needs)."""
    options = PlanOptions(
        memory_check=memory_check, quarantine=store, hardware={node.name: hardware_of(node)}, durations=_durations(results_root), starts=starts_for_plan(ResultsRoot(results_root).starts)
    )
    return make_plan(playbook, [node], options)


def _fixer(playbook: Playbook, node: Target, plan: Plan, store: QuarantineStore, sweep_id: str, memory_check: bool) -> SweepFixer:
    """The SSH path's fixer, the cluster as its one host (a Slurm plan's servers are all the node's)."""
    return SweepFixer(playbook, {node.name: node}, {node.name: hardware_of(node)}, store, sweep_id, {s.config.id: s for s in plan.servers}, memory_check)


def _task_file(directory: Path, record: SlurmSweep, array: JobArray, index: int) -> Path:
    """The controller's copy of a task's shard template (a resume reads the fixes made from it)."""
    return directory / record.cluster / "tasks" / f"{array.key}-task-{index}.json"


def _plant(t: Transport, directory: Path, record: SlurmSweep, node: Target, array: JobArray, task: Task, planned: PlannedServer, limits: AgentLimits) -> None:
    """A task's shard template, on the shared dir (the agent's) and here (a resume's)."""
    if not task.port:
        # Tasks of one sweep may share a node: each its own port, the next one free in the sweep
        # (a fixed variant that had to move keeps the one it pinned).
        taken = [t.port for a in record.arrays for t in a.tasks]
        task.port = planned.config.port or max([BASE_PORT - PORT_STRIDE, *taken]) + PORT_STRIDE
    shard = json.loads(Shard(record.sweep_id, record.cluster, "", "process", limits, []).to_json())
    shard["servers"] = [task_server(planned, node, record, array, task.index, task.port)]
    text = json.dumps(shard, indent=1, sort_keys=True)
    t.put_bytes(text.encode(), posixpath.join(record.task_dir(array, task.index), grant.TEMPLATE), timeout=60)
    write_json_atomic(_task_file(directory, record, array, task.index), shard)


def _task_shards(directory: Path, record: SlurmSweep) -> list[Shard]:
    shards = []
    for array in record.arrays:
        for task in array.tasks:
            path = _task_file(directory, record, array, task.index)
            if path.exists():
                shards.append(Shard.from_json(path.read_text(), source=str(path)))
    return shards


def _one_shard(record: SlurmSweep, shards: Sequence[Shard], limits: AgentLimits) -> Shard:
    """Every task's server in one shard: what the progress display follows (the cluster as one host)."""
    return Shard(record.sweep_id, record.cluster, "", "process", limits, [server for shard in shards for server in shard.servers])


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
    on_event: EventSink | None = None,
) -> SlurmSweepOutcome:
    if cluster.slurm is None:
        raise SlurmSweepError(f"{cluster.source_file}: {cluster.name} is not a `kind: slurm` entry")
    stream = EventStream(on_event)
    playbook = load_playbook(playbook_path)
    t = connect(cluster)
    client = SlurmClient(t)
    nodes = client.nodes()
    per_node = gpus_per_node(cluster, nodes)
    if per_node == 0:
        raise SlurmSweepError(f"{cluster.name}: no node of partition {cluster.slurm.partition or '(default)'} has {cluster.slurm.gres} GRES (sinfo)")
    node = SlurmNode.of(cluster, per_node)
    store = quarantine or QuarantineStore(ResultsRoot(results_root).quarantine)
    plan = _plan(playbook, node, store, memory_check, results_root)
    if plan.unplaceable:
        raise SlurmSweepError(f"{cluster.name}: cannot place {[c.label for c, _ in plan.unplaceable]}: {plan.unplaceable[0][1]}")
    sweep_id = new_sweep_id(playbook)
    folder = ResultsRoot(results_root).sweep(sweep_id)
    folder.path.mkdir(parents=True)
    directory = folder.path
    shutil.copyfile(playbook_path, folder.playbook)
    folder.write_host(cluster)
    folder.write_plan(plan.to_json())
    # The start record every backend writes (what `fleet report` reads of any sweep); Slurm's own
    # record of its jobs is slurm.json beside it.
    SweepRecord(
        sweep_id, playbook.name, file_sha256(playbook_path), [cluster.name], created_at=stream.started_at, memory_check=memory_check,
        playbook_path=str(playbook_path.resolve()),
    ).save(directory)  # fmt: skip
    folder.root.point_latest_at(sweep_id)
    record = SlurmSweep(
        sweep_id, cluster.name, posixpath.join(cluster.slurm.shared_dir, "slurm", sweep_id), arrays_of(plan), memory_check=memory_check, gpus_per_node=per_node, created_at=stream.started_at
    )
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
    ship_node_prep(t, cluster, node, record.root, playbook)
    stream.emit("provisioned", cluster.name, status="ok", reason="")
    planned = {s.config.id: s for s in plan.servers}
    limits = agent_limits(playbook)
    for array in record.arrays:
        for task in array.tasks:
            _plant(t, directory, record, node, array, task, planned[task.server_id], limits)
    usable = max(1, sum(1 for n in partition_nodes(cluster, nodes) if n.usable and n.gres.get(cluster.slurm.gres, 0) > 0))
    stream.emit("planned", eta_s=plan.schedule.makespan_s / usable, runs=len(plan.runs), servers=len(plan.servers), hosts=[cluster.name], measured_runs=plan.measured_runs)
    for array in record.arrays:
        tasks = [task.index for task in array.tasks]
        _submit(t, client, cluster, record, array, tasks, first_limit(cluster, array, tasks), say)
        record.save(directory)
    watch = SlurmWatch(directory, cluster, node, record, t, client, plan, _fixer(playbook, node, plan, store, sweep_id, memory_check), stream, usable, say)
    return watch.run(poll_interval_s=poll_interval_s, stop=stop, resumed=False)


class SlurmWatch:
    """The loop of a Slurm sweep: Slurm's states and the results decide each task's fate
    (fleet.slurm.outcome); finished tasks' failures go to the fixer; its variants are submitted."""

    def __init__(
        self,
        directory: Path,
        cluster: Host,
        node: Target,
        record: SlurmSweep,
        t: Transport,
        client: SlurmClient,
        plan: Plan,
        fixer: SweepFixer,
        stream: EventStream,
        nodes: int,
        say: Say,
    ) -> None:
        assert cluster.slurm is not None
        self.directory, self.cluster, self.node, self.record = directory, cluster, node, record
        self.t, self.client, self.fixer, self.say = t, client, fixer, say
        self.playbook = load_playbook(SweepFolder(directory).playbook)
        self.limits = agent_limits(self.playbook)
        self.local = directory / record.cluster
        # The cluster's results as the record copies them out of the mirror (only a task's own runs).
        self.ledger = host_ledger(directory, record.cluster)
        self.task_ledgers: TaskLedgers = {}  # each task dir's results in the mirror, read once
        self.status = HostStatus(record.cluster, phase=Phase.SHIPPING)
        self.considered: set[str] = set()  # run ids handed to the fixer
        self.pushed: dict[str, str] = {}  # task dir -> the quarantine.json pushed there
        shards = _task_shards(directory, record)
        self.fixer.already_fixed(shards)
        self.progress = SweepProgress(stream, plan, {record.cluster: _one_shard(record, shards, self.limits)}, {record.cluster: start_scale_of(node)}, {record.cluster: self.ledger})
        # The plan packs one node; the partition's nodes run its tasks side by side.
        self.progress.hosts[record.cluster].parallel *= nodes

    def _observe(self) -> None:
        self.ledger.refresh()
        self.progress.observe(self.status, _one_shard(self.record, _task_shards(self.directory, self.record), self.limits), self.ledger)

    def run(self, *, poll_interval_s: float, stop: threading.Event | None, resumed: bool) -> SlurmSweepOutcome:
        assert self.cluster.slurm is not None
        stop = stop or threading.Event()
        self.progress.started(self.record.sweep_id, resumed)
        self.status.phase = Phase.RUNNING
        self._observe()
        while True:
            pending = self.poll()
            self.record.save(self.directory)
            self._observe()
            if pending == 0:
                break
            if stop.wait(poll_interval_s):
                self.say(f"{self.cluster.name}: stopped watching; the jobs go on under Slurm (fleet sweep --resume {self.record.sweep_id})")
                self.status.phase = Phase.DETACHED
                self._observe()
                return self.outcome(interrupted=True)
        self.record.state = "incomplete" if self.problems() else "finished"
        self.record.save(self.directory)
        self.status.phase = Phase.FINISHED if self.record.state == "finished" else Phase.FAILED
        self.status.last_error = "; ".join(self.problems())[:500]
        self._observe()
        return self.outcome()

    def problems(self) -> list[str]:
        """Tasks given up on, with why (from the record: a resume's too)."""
        labels = {(a.key, str(t.index)): t.label for a in self.record.arrays for t in a.tasks}
        return [f"{a.key} task {i} ({labels[(a.key, i)]}): {v.split(': ', 1)[1]}" for a in self.record.arrays
                for i, v in a.finished.items() if not v.startswith(Action.DONE.value)]  # fmt: skip

    def poll(self) -> int:
        """One look at Slurm and the shared dir; returns how many tasks are still to come."""
        assert self.cluster.slurm is not None
        record = self.record
        jobs = self.client.jobs(record.job_ids())
        done = pull_tasks(self.t, record, self.directory, ledgers=self.task_ledgers)
        refusals = NodeRefusals.read(self.directory / record.cluster / "slurm", [(a.key, k.index) for a in record.arrays for k in a.tasks])
        pending, cancelled = 0, set()
        for array in record.arrays:
            again: dict[int, Verdict] = {}
            for task in array.tasks:
                if str(task.index) in array.finished:
                    continue
                tries = array.submissions_of(task.index)
                job = task_job(jobs, tries[-1].job_id, task.index) if tries else None
                verdict = judge(
                    job, set(task.run_ids), done[(array.key, task.index)], len(tries), self.cluster.slurm.max_submissions, refusals.reason(array.key, task.index, job.job_id if job else None)
                )
                if verdict.action is Action.WAIT:
                    pending += 1
                elif verdict.action is Action.RESUBMIT:
                    again[task.index] = verdict
                    self.say(f"{self.cluster.name}: {array.key} task {task.index} ({task.label}): {verdict.reason}")
                else:
                    if verdict.action is Action.CANCEL and job is not None and job.job_id not in cancelled:
                        self.client.cancel([job.job_id])  # a pending array's rest is one record: cancelled once
                        cancelled.add(job.job_id)
                    array.finished[str(task.index)] = f"{verdict.action.value}: {verdict.reason}"
                    if verdict.action is not Action.DONE:
                        self.say(f"{self.cluster.name}: {array.key} task {task.index} ({task.label}): {verdict.reason}")
            if again:
                limit = self._next_limit(array, again)
                exclude = refusals.excluded(array.key)
                if exclude:  # sbatch refuses a request that excludes every node that can hold it
                    s = self.cluster.slurm
                    exclude = refusals.excluded(array.key, [n.name for n in fitting(Request(array.gpus, s.gres, s.partition, s.constraint), self.client.nodes())])
                _submit(self.t, self.client, self.cluster, record, array, sorted(again), limit, self.say, exclude)
                pending += len(again)
        return pending + self.repair()

    def _next_limit(self, array: JobArray, again: dict[int, Verdict]) -> int:
        """A resubmission's limit: the last one, or after a time-out at least twice what the task ran out of."""
        assert self.cluster.slurm is not None
        last = max(array.submissions_of(i)[-1].time_limit_s for i in again)
        ran_out = [v.ran_out_of_s or last for v in again.values() if v.longer_limit]
        if not ran_out:
            return last
        wanted = max(last, 2 * max(ran_out))
        cap = self.cluster.slurm.time_limit_s
        return min(wanted, cap) if cap is not None else wanted

    # ------------------------------------------------------------------------- repair

    def repair(self) -> int:
        """Failures of finished tasks to the fixer; a changed quarantine to the unfinished tasks'
        dirs; the fixed variants submitted as new tasks. Returns how many tasks it submitted."""
        fresh: list[RunResult] = []
        self.ledger.refresh()
        have, rejected = self.ledger.results, self.ledger.rejected
        for array in self.record.arrays:
            for task in array.tasks:
                if str(task.index) not in array.finished:
                    continue
                for run_id in task.run_ids:
                    if run_id in self.considered or (run_id not in have and f"{run_id}.json" not in rejected):
                        continue
                    if run_id in have:
                        fresh.append(have[run_id])
                    else:
                        log.error("%s: %s", self.cluster.name, rejected[f"{run_id}.json"])
                    self.considered.add(run_id)
        if fresh:
            self.fixer.consider(self.node.name, fresh)
        self._push_quarantine()
        variants = self.fixer.take_pending(self.node.name, max(a.gpus for a in self.record.arrays))
        if not variants:
            return 0
        self.status.phase = Phase.REPAIRING
        self._observe()
        added: dict[str, list[int]] = {}
        for planned in variants:
            gpus = len(planned.gpus)
            found = next((a for a in self.record.arrays if a.gpus == gpus), None)
            if found is None:
                found = JobArray(f"gpu{gpus}", gpus, [])
                self.record.arrays.append(found)
            array = found
            task = Task(len(array.tasks), planned.config.id, planned.config.label, [r.id for r in planned.runs], planned.end_s - planned.start_s)
            array.tasks.append(task)
            _plant(self.t, self.directory, self.record, self.node, array, task, planned, self.limits)
            added.setdefault(array.key, []).append(task.index)
        self.record.save(self.directory)
        for key, indexes in added.items():
            array = next(a for a in self.record.arrays if a.key == key)
            self.say(f"{self.cluster.name}: repair round: {len(indexes)} fixed variants as {key} tasks {indexes}")
            _submit(self.t, self.client, self.cluster, self.record, array, indexes, first_limit(self.cluster, array, indexes), self.say)
            self.record.save(self.directory)
        self.status.phase = Phase.RUNNING
        return sum(len(i) for i in added.values())

    def _push_quarantine(self) -> None:
        """Each unfinished task of a quarantined server gets its `quarantine.json` (its agent reads
        it before the launch and skips the server, as on an SSH host)."""
        wanted = self.fixer.quarantine_for(self.node.name)
        if not wanted:
            return
        for array in self.record.arrays:
            for task in array.tasks:
                if str(task.index) in array.finished or task.server_id not in wanted:
                    continue
                path = posixpath.join(self.record.task_dir(array, task.index), SweepDir.QUARANTINE)
                text = json.dumps(HostQuarantine({task.server_id: wanted[task.server_id]}).to_json(), indent=1)
                if self.pushed.get(path) != text:
                    self.t.put_bytes(text.encode(), path, timeout=60)
                    self.pushed[path] = text
                    self.say(f"{self.cluster.name}: {array.key} task {task.index} ({task.label}): {wanted[task.server_id]}")

    # ------------------------------------------------------------------------- the end

    def outcome(self, interrupted: bool = False) -> SlurmSweepOutcome:
        record = self.record
        swept = read_sweep_results(self.directory, {record.cluster: self.ledger})
        results, unreadable = swept.results, swept.rejected
        by_status: dict[str, int] = {}
        for result in results:
            by_status[result.status.value] = by_status.get(result.status.value, 0) + 1
        fixes = [fix.__dict__ for fix in self.fixer.records]
        summary: dict[str, Any] = {
            "sweep_id": record.sweep_id, "state": record.state, "directory": str(self.directory), "interrupted": interrupted,
            "results": len(results), "by_status": by_status, "unreadable": unreadable,
            "hosts": {record.cluster: {"phase": self.status.phase.value, "reboots": 0, "agent_restarts": 0, "link_drops": 0, "last_error": self.status.last_error}},
            "fixes": fixes, "problems": self.problems(),
            "jobs": {a.key: [asdict(s) for s in a.submissions] for a in record.arrays},
            "nodes_refused": NodeRefusals.read(self.local / "slurm", [(a.key, k.index) for a in record.arrays for k in a.tasks]).summary(),
        }  # fmt: skip
        folder = SweepFolder(self.directory)
        folder.write_summary(summary)
        if folder.record.exists():  # sweeps started before every backend wrote one have none
            start = SweepRecord.load(self.directory)
            start.state = record.state
            start.save(self.directory)
        if not interrupted:
            try:
                record_durations(self.directory.parent, record.sweep_id, results, self.progress.server_samples, {record.cluster: time_scale_of(self.node)})
            except (ContractError, OSError) as exc:
                log.error("measured durations not recorded: %s", exc)
            record_sweep_starts(ResultsRoot(self.directory.parent).starts, results, started_servers(self.fixer.planned.values(), self.fixer.hardware))
        # The summary event of an SSH sweep (what summary.json holds), and Slurm's problems and jobs.
        self.progress.stream.emit("summary", None, 0.0 if record.state == "finished" else None, **summary)
        return SlurmSweepOutcome(record.sweep_id, self.directory, record, len(results), by_status, summary["problems"], interrupted, fixes)


def resume_slurm_sweep(
    directory: Path,
    *,
    connect: Callable[[Host], Transport] = transport_for,
    poll_interval_s: float = 5.0,
    stop: threading.Event | None = None,
    say: Say = lambda line: None,
    quarantine: QuarantineStore | None = None,
    on_event: EventSink | None = None,
) -> SlurmSweepOutcome:
    """Reattach to a Slurm sweep's jobs (the controller was stopped or killed; the jobs went on),
    with the repairs a start has: the plan made again as it was, and the fixer told by the task
    templates which failures were fixed already. As on SSH hosts, fixes of fixed variants are not
    repaired again after a resume (their configurations lived in the first controller only)."""
    record = SlurmSweep.load(directory)
    cluster = cluster_of(directory, record)
    assert cluster.slurm is not None
    t = connect(cluster)
    client = SlurmClient(t)
    nodes = client.nodes()
    node = SlurmNode.of(cluster, record.gpus_per_node or gpus_per_node(cluster, nodes))
    store = quarantine or QuarantineStore(SweepFolder(directory).root.quarantine)
    playbook = load_playbook(SweepFolder(directory).playbook)
    plan = _plan(playbook, node, store, record.memory_check, directory.parent)
    usable = max(1, sum(1 for n in partition_nodes(cluster, nodes) if n.usable and n.gres.get(cluster.slurm.gres, 0) > 0))
    stream = EventStream(on_event, started_at=record.created_at)
    watch = SlurmWatch(directory, cluster, node, record, t, client, plan, _fixer(playbook, node, plan, store, record.sweep_id, record.memory_check), stream, usable, say)
    return watch.run(poll_interval_s=poll_interval_s, stop=stop, resumed=True)


def cancel_slurm_sweep(directory: Path, *, connect: Callable[[Host], Transport] = transport_for) -> list[str]:
    """`scancel` every job the sweep submitted; returns their ids."""
    record = SlurmSweep.load(directory)
    cluster = cluster_of(directory, record)
    t = connect(cluster)
    ids = record.job_ids()
    SlurmClient(t).cancel(ids)
    record.state = "cancelled"
    record.save(directory)
    return ids
