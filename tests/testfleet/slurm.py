"""A real Slurm cluster over the test hosts: Debian's slurmctld, slurmd and munged, started as root.

- `munged` (one, on the machine) with a fresh key; its socket lives under the fleet's base dir,
  which every host sees at the same path (only /tmp, /dev/shm, /root and the persistent dirs are
  private), so one daemon serves every node as one shared key would (`AuthInfo=socket=`).
- `slurmctld` on the machine, listening on a free port of the first node's gateway address
  (10.201.<slot>.1); every other host gets a /32 route to it via its own gateway (the machine
  owns that address, so nothing is forwarded between hosts).
- one `slurmd` per compute host, inside that host's namespaces (`nsenter` into its net, UTS,
  mount and PID namespaces): its node name is the host's hostname, its NodeAddr the host's
  address, its spool, pid and log files under the host's base dir. A power cut of the host
  (`TestFleet.power_off`) kills it with everything the host ran: the node fails as a real one does;
  `start_node` after `power_on` brings it back (ReturnToService=2).
- `/etc/slurm` of every host (compute and login) is a bind mount of the cluster's config dir,
  inside the host's private mount namespace: `sbatch`, `squeue`, ... on a host find the cluster
  exactly as on a real cluster's login node; the machine's own /etc/slurm is never touched (the
  tests' own client calls pass `SLURM_CONF`).
- GPUs: 8 per node as GRES `gpu` with `File=` pointing at character devices made with `mknod`
  (major 195, as /dev/nvidiaN) in the host's base dir: slurmd accepts them, and binds
  CUDA_VISIBLE_DEVICES to the allocated indices, as on a real node. No cgroup device limits
  (`task/none`, `proctrack/linuxproc`): the fake GPU tools see all 8, as a GPU node without
  ConstrainDevices does.
- Accounting: none (`accounting_storage/none`, no slurmdbd); finished jobs stay visible to
  `scontrol show job` / `squeue --states=all` for MinJobAge (an hour), and every finished job is
  appended to `jobcomp/filetxt` (`jobcomp_log`), which the tests read for final states.
- A task prolog (the node's own configuration, like /etc/profile on a real node) sets PATH and
  FLEET_FAKE_GPU_DIR of the node the job landed on, so the fake GPU tools of *that* host answer.

`start_slurm_cluster(fleet, nodes=[...], login=...)` returns a `SlurmCluster` (a context manager);
the `slurm_cluster` fixture in tests/conftest.py-style modules builds one over its own test fleet.
The daemons on the machine die with the test process (PR_SET_PDEATHSIG), also after a kill -9.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.testfleet.hosts import SYSTEM_PATH, TestFleet, TestHost
from tests.testfleet.registry import run_ip, write_atomic

SLURM_TOOLS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun", "mknod")
GPUS_PER_NODE = 8
NVIDIA_MAJOR = 195  # /dev/nvidiaN is char 195:N on a real node
CPUS_PER_NODE = 32  # declared (config_overrides): the machine has fewer, jobs do no real work
MEMORY_MB_PER_NODE = 64000
PARTITION = "gpu"
URGENT_PARTITION = "urgent"  # same nodes, higher tier: preempts (requeues) jobs of `gpu`
SHORT_PARTITION = "short"  # same nodes, MaxTime 1 minute: a longer job pends for PartitionTimeLimit, for ever
CLUSTER_NAME = "fleettest"
PR_SET_PDEATHSIG = 1
# `ip netns exec` gives each host a sysfs of its own namespace, without /sys/fs/cgroup mounts:
# slurmd's autodetection then fails ("No filesystem mounted on /sys/fs/cgroup"). Naming the
# plugin skips the probe; with proctrack/linuxproc and task/none nothing else uses cgroups.
CGROUP_CONF = "CgroupPlugin=cgroup/v1\n"


@cache
def slurm_unavailable_reason() -> str | None:
    """Why a Slurm cluster cannot be built here (None: it can)."""
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]
    if missing:
        return f"a Slurm test cluster needs Debian's slurmctld, slurmd, slurm-client and munge (missing: {', '.join(missing)}); apt-get install -y slurmctld slurmd slurm-client munge"
    return None


def _die_with_parent() -> None:
    """preexec_fn: the daemon gets SIGKILL when the test process goes, even by kill -9."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


@dataclass
class SlurmCluster:
    """A running cluster: slurmctld + munged on the machine, slurmd on each node host."""

    __test__ = False

    fleet: TestFleet
    nodes: list[TestHost]
    login: TestHost
    base: Path
    controller_address: str
    controller_port: int
    _daemons: dict[str, subprocess.Popen] = field(default_factory=dict)
    _slurmd: dict[str, subprocess.Popen] = field(default_factory=dict)

    # ------------------------------------------------------------------ paths

    @property
    def etc(self) -> Path:
        return self.base / "etc"

    @property
    def conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.base / "munge" / "munge.socket.2"

    @property
    def ctld_log(self) -> Path:
        return self.base / "ctld" / "slurmctld.log"

    @property
    def jobcomp_log(self) -> Path:
        return self.base / "ctld" / "jobcomp.txt"

    def node_dir(self, node: TestHost | str) -> Path:
        return self.base / "nodes" / (node if isinstance(node, str) else node.name)

    def slurmd_log(self, node: TestHost | str) -> Path:
        return self.node_dir(node) / "slurmd.log"

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands run on the machine (the tests' own checks)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------ config

    def slurm_conf(self) -> str:
        b = self.base
        node_lines = [f"NodeName={n.name} NodeAddr={n.address} CPUs={CPUS_PER_NODE} RealMemory={MEMORY_MB_PER_NODE} Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN" for n in self.nodes]
        names = ",".join(n.name for n in self.nodes)
        return "\n".join(
            [
                f"ClusterName={CLUSTER_NAME}",
                f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.controller_address})",
                f"SlurmctldPort={self.controller_port}",
                "SlurmdPort=6818",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                # cred_expire: also how long a requeued job waits before it may start again (120 s by default).
                f"AuthInfo=socket={self.munge_socket},cred_expire=10",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"StateSaveLocation={b / 'ctld' / 'state'}",
                f"SlurmctldPidFile={b / 'ctld' / 'slurmctld.pid'}",
                f"SlurmctldLogFile={self.ctld_log}",
                "SlurmctldDebug=info",
                f"SlurmdSpoolDir={b / 'nodes' / '%n' / 'spool'}",
                f"SlurmdPidFile={b / 'nodes' / '%n' / 'slurmd.pid'}",
                f"SlurmdLogFile={b / 'nodes' / '%n' / 'slurmd.log'}",
                "SlurmdDebug=info",
                "SlurmdParameters=config_overrides",  # declared CPUs/memory, not the machine's
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/filetxt",
                f"JobCompLoc={self.jobcomp_log}",
                "MpiDefault=none",
                "SwitchType=switch/none",
                "SchedulerType=sched/backfill",
                # A pending job that becomes eligible with no event to wake the scheduler (a
                # requeued one once its begin time passes) waits for the backfill pass: every 30 s
                # by default, every second here (two nodes: a pass costs nothing).
                "SchedulerParameters=bf_interval=1",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory",
                "GresTypes=gpu",
                f"TaskProlog={self.etc / 'task_prolog.sh'}",
                # Fast failure detection for tests: a node silent for 10 s is DOWN, its jobs end
                # NODE_FAIL (and are requeued where they allow it); a node back is usable again.
                "SlurmdTimeout=10",
                "SlurmctldTimeout=10",
                "MessageTimeout=5",
                "ReturnToService=2",
                "JobRequeue=1",
                "KillWait=2",
                "OverTimeLimit=0",
                "MinJobAge=3600",
                "InactiveLimit=0",
                "DefMemPerCPU=1000",
                "PreemptType=preempt/partition_prio",
                "PreemptMode=REQUEUE",
                # Graceful preemption, as Slurm documents it: the job's --signal (fleet's batch
                # scripts: B:TERM, to the agent alone) at once, every process GraceTime later. Without
                # it every process of the job gets SIGTERM at once, servers included (see the report
                # of issue 15: the agent must then not write a result for the run in flight).
                "SlurmctldParameters=preempt_send_user_signal",
                *node_lines,
                f"PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=30",
                f"PartitionName={URGENT_PARTITION} Nodes={names} Default=NO MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF",
                f"PartitionName={SHORT_PARTITION} Nodes={names} Default=NO MaxTime=1 State=UP PriorityTier=1",
                "",
            ]
        )

    def gres_conf(self) -> str:
        lines = [f"NodeName={n.name} Name=gpu File={self.node_dir(n) / 'dev'}/nvidia[0-{GPUS_PER_NODE - 1}]" for n in self.nodes]
        return "AutoDetect=off\n" + "\n".join(lines) + "\n"

    def task_prolog(self) -> str:
        # Run by slurmd on the node before the job's script: lines `export K=V` reach the job.
        hosts = " ".join(f"{n.name}={shlex.quote(str(n.bin_dir))}:{shlex.quote(str(n.fake_gpu_dir))}" for n in self.nodes)
        return "\n".join(
            [
                "#!/bin/sh",
                "me=$(hostname)",
                f"for entry in {hosts}; do",
                "  name=${entry%%=*}; dirs=${entry#*=}",
                '  if [ "$name" = "$me" ]; then',
                f'    echo "export PATH=${{dirs%%:*}}:{SYSTEM_PATH}"',
                '    echo "export FLEET_FAKE_GPU_DIR=${dirs#*:}"',
                "  fi",
                "done",
                "",
            ]
        )

    # ------------------------------------------------------------------ life

    def _write_files(self) -> None:
        for sub in ("etc", "munge", "ctld/state"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.base / "munge", 0o755)
        for node in self.nodes:
            devices = self.node_dir(node) / "dev"
            (self.node_dir(node) / "spool").mkdir(parents=True, exist_ok=True)
            devices.mkdir(parents=True, exist_ok=True)
            for index in range(GPUS_PER_NODE):
                device = devices / f"nvidia{index}"
                if not device.exists():
                    os.mknod(device, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, index))
        write_atomic(self.conf, self.slurm_conf())
        write_atomic(self.etc / "gres.conf", self.gres_conf())
        write_atomic(self.etc / "cgroup.conf", CGROUP_CONF)
        write_atomic(self.etc / "task_prolog.sh", self.task_prolog(), mode=0o755)
        key = self.base / "munge" / "munge.key"
        if not key.exists():
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
            os.chmod(key, 0o400)

    def _spawn(self, name: str, argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._daemons[name] = process
        return process

    def _start_munge(self) -> None:
        m = self.base / "munge"
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={m / 'munge.key'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={m / 'munged.log'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
            m / "console.log",
        )
        _wait_for(lambda: self.munge_socket.exists(), 10, lambda: f"munged did not start: {_tail(m / 'munged.log')}{_tail(m / 'console.log')}")

    def _route_to_controller(self, host: TestHost) -> None:
        if host.gateway != self.controller_address:
            run_ip("-n", host.netns, "route", "replace", f"{self.controller_address}/32", "via", host.gateway)

    def _mount_etc(self, host: TestHost) -> None:
        done = self.fleet.exec(host, ["sh", "-c", f"mountpoint -q /etc/slurm || mount --bind {shlex.quote(str(self.etc))} /etc/slurm"])
        if done.returncode != 0:
            raise RuntimeError(f"{host.name}: bind-mounting the cluster's /etc/slurm failed: {done.stderr.strip()}")

    def _start_controller(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"], self.base / "ctld" / "console.log")
        _wait_for(
            lambda: self.scontrol("ping").returncode == 0,
            20,
            lambda: f"slurmctld did not answer: {_tail(self.ctld_log)}{_tail(self.base / 'ctld' / 'console.log')}",
        )

    def prepare_host(self, host: TestHost) -> None:
        """What a (re)booted host needs to be part of the cluster: the route and /etc/slurm."""
        self._route_to_controller(host)
        self._mount_etc(host)

    def start_node(self, node: TestHost | str, timeout: float = 30.0) -> None:
        """Start the node's slurmd inside the host (after boot or power_on) and wait until idle."""
        node = self.fleet[node] if isinstance(node, str) else node
        self.prepare_host(node)
        record = self.fleet._record_of(node)
        env = {"PATH": f"{node.bin_dir}:{SYSTEM_PATH}", "FLEET_FAKE_GPU_DIR": str(node.fake_gpu_dir), "HOME": "/root"}
        with open(self.node_dir(node) / "console.log", "ab") as out:
            # nsenter --pid forks: slurmd is a process of the host and dies with it.
            self._slurmd[node.name] = subprocess.Popen(
                ["nsenter", f"--target={record.init_pid}", "--net", "--uts", "--mount", "--pid", "--wd=/", "--", "slurmd", "-D", "-N", node.name],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        _wait_for(
            lambda: self.node_state(node.name).split("+")[0] in ("IDLE", "MIXED", "ALLOCATED"),
            timeout,
            lambda: f"node {node.name} not up: state {self.node_state(node.name)!r}; {_tail(self.slurmd_log(node))}{_tail(self.node_dir(node) / 'console.log')}",
        )

    def close(self) -> None:
        for process in [*self._slurmd.values(), *self._daemons.values()]:
            if process.poll() is None:
                process.terminate()
        for process in [*self._slurmd.values(), *self._daemons.values()]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self._slurmd.clear()
        self._daemons.clear()

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ looking

    def run(self, argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command on the machine, against this cluster."""
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=timeout)

    def scontrol(self, *args: str) -> subprocess.CompletedProcess:
        return self.run(["scontrol", *args])

    def node_state(self, name: str) -> str:
        done = self.run(["sinfo", "-h", "-N", "-n", name, "-p", PARTITION, "-o", "%T"])
        return done.stdout.strip().upper() if done.returncode == 0 else f"(sinfo failed: {done.stderr.strip()})"

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o ID` as key -> value (empty when slurmctld forgot the job)."""
        done = self.scontrol("show", "job", "-o", job_id)
        if done.returncode != 0:
            return {}
        fields: dict[str, str] = {}
        for token in done.stdout.split():
            key, _, value = token.partition("=")
            fields.setdefault(key, value)
        return fields

    def wait_job(self, job_id: str, states: Sequence[str], timeout: float = 60) -> dict[str, str]:
        _wait_for(lambda: self.job(job_id).get("JobState") in states, timeout, lambda: f"job {job_id}: {self.job(job_id).get('JobState')!r}, waited for {list(states)}; {_tail(self.ctld_log)}")
        return self.job(job_id)


def _tail(path: Path, size: int = 1500) -> str:
    if not path.exists():
        return ""
    return f" [{path.name}: {path.read_text(errors='replace')[-size:].strip()}]"


def _wait_for(ready: object, timeout: float, describe: object) -> None:
    assert callable(ready) and callable(describe)
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(describe())
        time.sleep(0.1)


def start_slurm_cluster(fleet: TestFleet, nodes: Sequence[str], login: str) -> SlurmCluster:
    """Munge, slurmctld and one slurmd per node over an existing test fleet; `login` (a host of
    the fleet that is not a node) gets the client config only."""
    reason = slurm_unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    node_hosts = [fleet[n] for n in nodes]
    first = node_hosts[0]
    cluster = SlurmCluster(
        fleet=fleet,
        nodes=node_hosts,
        login=fleet[login],
        base=fleet.base / "slurm",
        controller_address=first.gateway,
        controller_port=_free_port(first.gateway),
    )
    try:
        cluster._write_files()
        cluster._start_munge()
        cluster._start_controller()
        cluster.prepare_host(cluster.login)
        for node in node_hosts:
            cluster.start_node(node)
    except BaseException:
        cluster.close()
        raise
    return cluster


# --------------------------------------------------------------------------------------------
# Real output for the parsers' tests: `python -m tests.testfleet.slurm capture tests/fixtures/slurm`
# drives the cluster through every job state fleet reads and writes what Slurm's own commands
# printed, unchanged. The parsers are tested on these files (tests/unit/test_slurm_parse.py);
# tests/integration/test_slurm_cluster.py checks that live output still parses the same way.

SQUEUE_FORMAT = "%i|%T|%r|%N|%b|%P"  # the one fleet.slurm.commands uses; kept equal by a test
SINFO_FORMAT = "%N|%P|%T|%G|%c|%m|%f"


def _submit(cluster: SlurmCluster, *options: str, wrap: str) -> str:
    done = cluster.fleet.exec(cluster.login, ["sbatch", "--parsable", "--output=/dev/null", *options, "--wrap", wrap])
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed: {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def capture_time_limit_signal(cluster: SlurmCluster, directory: Path) -> None:
    """A job stopped by its time-limit signal, as fleet's batch scripts ask for it (`--signal=B:TERM@60`,
    the script exits on it): it ends COMPLETED, not TIMEOUT, well before its one-minute limit."""
    wrap = "trap 'echo stopped by the limit signal; exit 0' TERM; sleep 300 & wait"
    job = _submit(cluster, "--gres=gpu:1", "--time=1", "--signal=B:TERM@60", wrap=wrap)
    cluster.wait_job(job, ["COMPLETED", "FAILED", "TIMEOUT"], timeout=150)
    (directory / "scontrol_time_limit_signal.txt").write_text(cluster.scontrol("show", "job", "-o", job).stdout)
    print(f"wrote {directory / 'scontrol_time_limit_signal.txt'}")


def capture_fixtures(directory: Path) -> None:
    from tests.testfleet import start_test_fleet

    directory.mkdir(parents=True, exist_ok=True)

    def save(name: str, text: str) -> None:
        (directory / name).write_text(text)
        print(f"wrote {directory / name} ({len(text)} bytes)")

    def scontrol_jobs(job_ids: Sequence[str]) -> str:
        return "".join(cluster.scontrol("show", "job", "-o", j).stdout for j in job_ids)

    with start_test_fleet(["login", "ct200", "ct201"]) as fleet, start_slurm_cluster(fleet, ["ct200", "ct201"], "login") as cluster:
        save("sinfo_nodes.txt", cluster.run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT]).stdout)
        submitted = fleet.exec(cluster.login, ["sbatch", "--parsable", "--output=/dev/null", "--gres=gpu:2", "--wrap", "true"])
        save("sbatch_parsable.txt", submitted.stdout)
        ok = submitted.stdout.strip()
        failed = _submit(cluster, "--gres=gpu:1", wrap="exit 3")
        too_big = fleet.exec(cluster.login, ["sbatch", "--parsable", "--gres=gpu:9", "--wrap", "true"])
        save("sbatch_too_many_gpus.txt", f"exit {too_big.returncode}\n--- stdout\n{too_big.stdout}--- stderr\n{too_big.stderr}")
        cluster.wait_job(ok, ["COMPLETED"])
        cluster.wait_job(failed, ["FAILED"])
        # Every GPU busy: a third 8-GPU job waits for Resources; one pinned to a nonexistent
        # feature can never start (sbatch refuses it: captured above as too_big's kind).
        full = [_submit(cluster, "--gres=gpu:8", f"--nodelist={n.name}", "--no-requeue", wrap="sleep 300") for n in cluster.nodes]
        for job in full:
            cluster.wait_job(job, ["RUNNING"])
        waiting = _submit(cluster, "--gres=gpu:8", wrap="sleep 1")
        _wait_for(lambda: cluster.job(waiting).get("Reason") not in ("None", None), 20, lambda: cluster.job(waiting))
        held = _submit(cluster, "--gres=gpu:1", "--hold", wrap="sleep 1")
        save("squeue_busy.txt", cluster.run(["squeue", "-h", "-t", "all", "-o", SQUEUE_FORMAT]).stdout)
        save("squeue_busy.json", cluster.run(["squeue", "--json"]).stdout)
        save("scontrol_busy.txt", scontrol_jobs([ok, failed, *full, waiting, held]))
        # Node failure: ct201 powered off mid-job; its job (--no-requeue) ends NODE_FAIL.
        cluster.run(["scancel", waiting, held])
        requeueable = _submit(cluster, "--gres=gpu:4", "--nodelist=ct200", wrap="sleep 300")
        cluster.run(["scancel", full[0]])
        cluster.wait_job(requeueable, ["RUNNING"])
        fleet.power_off("ct201")
        cluster.wait_job(full[1], ["NODE_FAIL"], timeout=60)
        save("scontrol_node_fail.txt", scontrol_jobs([full[1]]))
        save("sinfo_node_down.txt", cluster.run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT]).stdout)
        fleet.power_on("ct201")
        cluster.start_node("ct201", timeout=60)
        # Node failure of a requeueable job: ct200 powered off, the job goes back to PENDING.
        fleet.power_off("ct200")
        _wait_for(lambda: cluster.job(requeueable).get("Restarts", "0") != "0", 60, lambda: cluster.job(requeueable))
        save("scontrol_requeued.txt", scontrol_jobs([requeueable]))
        save("squeue_requeued.txt", cluster.run(["squeue", "-h", "-t", "all", "-j", requeueable, "-o", SQUEUE_FORMAT]).stdout)
        fleet.power_on("ct200")
        cluster.start_node("ct200", timeout=60)
        cluster.wait_job(requeueable, ["RUNNING"], timeout=90)
        cluster.run(["scancel", requeueable])
        cancelled = cluster.wait_job(requeueable, ["CANCELLED"])
        assert cancelled
        save("scontrol_cancelled.txt", scontrol_jobs([requeueable]))
        # Preemption: low-tier jobs fill both nodes; an urgent-partition job requeues one.
        low = [_submit(cluster, "--gres=gpu:8", f"--nodelist={n.name}", wrap="sleep 300") for n in cluster.nodes]
        for job in low:
            cluster.wait_job(job, ["RUNNING"])
        urgent = _submit(cluster, f"--partition={URGENT_PARTITION}", "--gres=gpu:8", wrap="sleep 300")
        _wait_for(lambda: any(cluster.job(j).get("Restarts", "0") != "0" or cluster.job(j).get("JobState") == "PREEMPTED" for j in low), 60, lambda: [cluster.job(j) for j in low])
        save("scontrol_preempted.txt", scontrol_jobs([*low, urgent]))
        save("squeue_preempted.txt", cluster.run(["squeue", "-h", "-t", "all", "-o", SQUEUE_FORMAT]).stdout)
        cluster.run(["scancel", *low, urgent])
        # Time limit: one minute is Slurm's smallest; the job ends TIMEOUT.
        late = _submit(cluster, "--gres=gpu:1", "--time=1", wrap="sleep 300")
        cluster.wait_job(late, ["TIMEOUT"], timeout=150)
        save("scontrol_timeout.txt", scontrol_jobs([late]))
        capture_time_limit_signal(cluster, directory)
        save("squeue_all_final.txt", cluster.run(["squeue", "-h", "-t", "all", "-o", SQUEUE_FORMAT]).stdout)
        time.sleep(1)
        save("jobcomp.txt", cluster.jobcomp_log.read_text() if cluster.jobcomp_log.exists() else "")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["capture"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m tests.testfleet.slurm capture DIR")
    capture_fixtures(Path(sys.argv[2]))
