"""Fake hosts for unit tests: a `FakeTransport` that answers what fleet sends a host.

`FakeHostShell` answers the shell text of facts, provisioning and model copies against the fake's
in-memory files, from captured tool output (`tests/fixtures/facts/`): a sim host is the
development machine (no GPU tools), a GPU host the 8x RTX PRO 6000 capture. `FakeAgent` plays
the agent of one sweep: started by the channel's start command, it finishes runs of the shard
it finds on the host as it is polled, writing contract results and progress; it dies in a
reboot, or when told to.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.facts.commands import SECTION_MARK
from fleet.facts.engine_probe import PROBE_MARK
from fleet.facts.parsers import DF_SEPARATOR, DIR_ABSENT, NVCC_ABSENT, NVCC_PATH_LABEL, SYSTEMD_BOOTED_LABEL
from fleet.host.contract import AgentState, Failure, Progress, RunResult, RunStatus, SweepDir
from fleet.host.contract.progress import AgentError
from fleet.host.contract.lease import HostLease
from fleet.host.contract.lease import answer as lease_answer
from fleet.host.contract.shard import RunSpec, ServerSpec, Shard
from fleet.inventory import Host
from fleet.layout import sweep_dir
from fleet.sweep.channel import SEPARATOR, AgentChannel
from fleet.transport.base import BOOT_ID_PATH
from fleet.transport.fake import Call, FakeTransport, Reply

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "facts"
DEV = FIXTURES / "dev-machine"
RTX = FIXTURES / "rtx-pro-6000-8gpu-driver580-cuda13.1"
H200 = FIXTURES / "h200-driver580-cuda13.0-device"
RTX_MODEL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def make_host(name: str = "ct200", *, kind: str = "sim", gpus: int = 2, service_manager: str = "process", **paths: str) -> Host:
    return Host.model_validate(
        {
            "name": name,
            "address": "10.201.0.2",
            "gpus": {"count": gpus, "model": RTX_MODEL},
            "paths": {"work_dir": "/var/lib/fleet", "model_cache": "/srv/models", "staging": "/dev/shm/fleet", **paths},
            "engine": {"kind": kind, "python": "/opt/engine/bin/python"},
            "service_manager": service_manager,
        }
    )


def _fixture(directory: Path, name: str) -> str:
    return (directory / name).read_text()


# The engine probe of a host with a CUDA 13.0 torch for sm_120 and SGLang 0.5.23 (the release CI installs).
GPU_ENGINE_PROBE = PROBE_MARK + json.dumps(
    {
        "executable": "/opt/engine/bin/python",
        "python_version": "3.11.7",
        "torch_version": "2.11.0+cu130",
        "torch_cuda": "13.0",
        "torch_arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
        "triton_version": "3.6.0",
        "flashinfer_version": "0.6.7.post3",
        "sglang_version": "0.5.23",
    }
)


@dataclass
class FakeHostShell:
    """Answers facts, stale-server checks, directory checks, markers, listings and detached jobs."""

    t: FakeTransport
    host: Host
    gpu: bool = False  # the RTX capture; else the development machine without GPU tools
    engine_probe: str = ""  # the engine probe's output; default: GPU_ENGINE_PROBE on a GPU host
    stale_pids: list[str] = field(default_factory=list)
    agent_running: bool = False  # a fleet agent is running (stale servers are then its own)
    hub_files: Mapping[str, bytes] = field(default_factory=lambda: {"config.json": b"{}", "model.safetensors": b"w" * 4096})
    killed: list[str] = field(default_factory=list)
    fetch_envs: list[dict[str, str]] = field(default_factory=list)  # the env each hub fetch started with
    jobs: list[str] = field(default_factory=list)  # detached jobs started, by name
    lease_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fleet-fake-lease-")))  # the host's lease lives here

    def __post_init__(self) -> None:
        on = self.t.on
        on(lambda c: c.argv is not None and c.argv[:2] == ("sh", "-c") and SECTION_MARK in c.argv[2], self._facts, name="facts")
        on(lambda c: c.argv is None and c.command.startswith("if pgrep -f"), self._pgrep, name="stale servers")
        on(lambda c: c.argv is None and c.command.startswith("for p in "), self._kill, name="kill stale")
        on(lambda c: c.argv is None and c.command.startswith("[ -d "), self._missing_dirs, name="dirs")
        on(lambda c: c.argv is None and "echo '--fleet--'" in c.command and c.command.startswith("cat "), self._markers, name="markers")
        on(lambda c: c.argv is None and c.command.startswith("cd ") and "find . -type f" in c.command, self._listing, name="listing")
        on(lambda c: c.argv is None and "setsid -f sh -c" in c.command, self._start_job, name="detached job")
        on(lambda c: c.argv is None and c.command.startswith("a=$(cat "), self._poll_job, name="job poll")
        on(lambda c: c.argv is None and c.stdin is not None and (" - acquire " in c.command or " - release " in c.command), self._lease, name="lease")
        weakref.finalize(self, shutil.rmtree, self.lease_dir, ignore_errors=True)

    # ------------------------------------------------------------------------------ facts

    def _facts(self, t: FakeTransport, call: Call) -> Reply:
        assert call.argv is not None
        names = re.findall(r"^fleet_begin (\S+)$", call.argv[2], re.M)
        out = []
        for name in names:
            text, rc = self._section(name)
            out.append(f"{SECTION_MARK} begin {name}\n{text}\n{SECTION_MARK} end {name} {rc}")
        return Reply("\n".join(out) + "\n")

    def _section(self, name: str) -> tuple[str, int]:
        not_found = (_fixture(DEV, "nvidia-smi-not-found.txt").strip(), 127)
        if name == "boot_id":
            return self.t.read_text(BOOT_ID_PATH).strip(), 0
        if name == "gpus":
            return (_fixture(RTX, "fleet-query-gpu.csv").strip(), 0) if self.gpu else not_found
        if name == "gpu_processes":
            return ("", 0) if self.gpu else not_found
        if name == "driver":
            # `nvidia-smi --version`, captured on a real H200 with the RTX capture's driver (580.159.04, CUDA 13.0).
            return (_fixture(H200, "nvidia-smi-version.txt").rstrip(), 0) if self.gpu else not_found
        if name == "kernel_module":
            if self.gpu:
                nvrm = next(line for line in _fixture(RTX, "versions.txt").splitlines() if line.startswith("NVRM"))
                return nvrm, 0
            return "cat: /proc/driver/nvidia/version: No such file or directory", 1
        if name == "toolkit":
            if self.gpu:
                return f"{NVCC_PATH_LABEL} /usr/local/cuda/bin/nvcc\n" + (FIXTURES / "nvcc" / "nvcc-13.1.txt").read_text().strip(), 0
            return f"{NVCC_PATH_LABEL} {NVCC_ABSENT}", 0
        if name == "engine":
            if self.engine_probe or self.gpu:
                return self.engine_probe or GPU_ENGINE_PROBE, 0
            return PROBE_MARK + json.dumps({"executable": self.host.engine.python, "python_version": "3.11.7"}), 0
        if name == "memory":
            if self.gpu:
                return "\n".join(line for line in _fixture(RTX, "versions.txt").splitlines() if line.startswith("Mem")), 0
            return _fixture(DEV, "meminfo-head.txt").strip(), 0
        if name == "disks":
            return self._disks(), 0
        if name == "staging_dir":
            staging = self.host.paths.staging or ""
            if not self.t.exists(staging):
                return DIR_ABSENT, 0
            kib = sum(len(d) for d in self.t.tree(staging).values()) // 1024
            return f"{kib}\t{staging}", 0
        if name == "os":
            return _fixture(DEV, "os-release.txt").strip(), 0
        if name == "kernel":
            return _fixture(DEV, "uname-n-r-m.txt").strip(), 0
        if name == "systemd":
            return f"{SYSTEMD_BOOTED_LABEL} no\n" + _fixture(DEV, "systemctl-is-system-running.txt").strip(), 1
        raise AssertionError(f"FakeHostShell has no answer for the fact {name!r}")

    def _disks(self) -> str:
        """df rows of the capture: tmpfs for paths under /dev/shm, the root disk for the others."""
        if self.gpu:
            lines = _fixture(RTX, "versions.txt").splitlines()
            at = next(i for i, line in enumerate(lines) if line.startswith("Filesystem"))
            header, root, tmpfs = lines[at : at + 3]
        else:
            header, root, tmpfs = _fixture(DEV, "df-P-T-B1.txt").strip().splitlines()[:3]
        paths = [self.host.paths.work_dir, self.host.paths.model_cache] + ([self.host.paths.staging] if self.host.paths.staging else [])
        measured = ["/dev/shm" if p.startswith("/dev/shm") else "/" for p in paths]
        rows = [tmpfs if m == "/dev/shm" else root for m in measured]
        return "\n".join([*measured, DF_SEPARATOR, header, *rows])

    # ------------------------------------------------------------------------------ provisioning

    def _pgrep(self, t: FakeTransport, call: Call) -> str:
        if self.agent_running:
            return "agent\n"
        return "".join(f"{pid}\n" for pid in self.stale_pids)

    def _kill(self, t: FakeTransport, call: Call) -> Reply:
        self.killed += [pid for pid in self.stale_pids if f" {pid} " in call.command.split(";")[0] + " "]
        self.stale_pids = []
        return Reply()

    def _missing_dirs(self, t: FakeTransport, call: Call) -> str:
        wanted = re.findall(r"\[ -d (\S+) \] \|\| echo \S+;", call.command)
        return "".join(f"{d}\n" for d in map(shlex_unquote, wanted) if not t.exists(d))

    def _markers(self, t: FakeTransport, call: Call) -> str:
        out = []
        for path in map(shlex_unquote, re.findall(r"cat (\S+) 2>/dev/null; echo; echo '--fleet--'", call.command)):
            out.append((t.read_text(path) if t.is_file(path) else "") + "\n--fleet--\n")
        return "".join(out)

    def _listing(self, t: FakeTransport, call: Call) -> Reply:
        directory = shlex_unquote(call.command.split(" ")[1])
        if directory not in t.dirs:
            return Reply("", f"sh: cd: {directory}: No such file or directory", 2)
        return Reply("".join(f"{path}\t{len(data)}\n" for path, data in sorted(t.tree(directory).items())))

    def _start_job(self, t: FakeTransport, call: Call) -> Reply:
        """A detached job runs to its end at once: staging copies cache -> fast dir, a hub fetch
        records its environment and writes the files and the expected listing."""
        words = call.words()
        at = words.index("setsid")
        locked, name = words[at + 4], words[at + 5]
        queued = shlex.split(locked)  # echo fleet-queued $$; exec flock LOCK sh -c BODY NAME "$@"
        lock = queued[queued.index("flock") + 1]
        log = next(w[1:] for w in words[at + 6 :] if w.startswith(">"))
        args = [w for w in words[at + 6 :] if not w.startswith((">", "<", "2>"))]
        self.jobs.append(name)
        if name == "fleet-stage":
            source, dest = args[:2]
            t.remove(dest)
            for relative, data in t.tree(source).items():
                t.write(posixpath.join(dest, relative), data)
        elif name == "fleet-fetch":
            repo, revision, dest = args[:3]
            self.fetch_envs.append(dict(call.env))
            for relative, data in self.hub_files.items():
                t.write(posixpath.join(dest, relative), data)
            sha = uuid.uuid5(uuid.NAMESPACE_URL, f"{repo}@{revision}").hex
            expected = {"sha": sha, "files": {p: len(d) for p, d in self.hub_files.items()}}
            t.write(dest + ".fleet-expected.json", json.dumps(expected))
        else:
            raise AssertionError(f"unknown detached job {name}")
        t.write(log, f"fleet-queued 41\nfleet-started\n{name} done\nfleet-exit=0\n")
        t.dirs.add(posixpath.dirname(lock))
        return Reply()

    def _lease(self, t: FakeTransport, call: Call) -> Reply:
        """The host lease's real answer (fleet.host.contract.lease), kept in a real directory
        standing for the host's work dir (the lease takes an flock)."""
        args = call.words()
        code, out, err = lease_answer(args[args.index("-") + 1 :], lambda _work_dir: HostLease(self.lease_dir))
        return Reply(out, err, code)

    def _poll_job(self, t: FakeTransport, call: Call) -> str:
        log = shlex_unquote(call.command.rsplit("cat ", 1)[1].split(" ")[0])
        return "free gone\n" + (t.read_text(log) if t.is_file(log) else "")


def shlex_unquote(word: str) -> str:
    return shlex.split(word)[0] if word else word


# ------------------------------------------------------------------------------------ the agent

Outcome = Callable[[ServerSpec, RunSpec], RunStatus | Failure]


@dataclass
class FakeAgent:
    """The agent of one sweep on a fake host, polled through the real channel's poll command.

    Each poll while it lives finishes `runs_per_poll` runs of the shard on the host (skipping
    those with a result, as the real agent does); `outcome` says how each run ends (a status,
    or a Failure for a failed run). `die_after` kills it after that many more runs (its progress
    still says running); a reboot kills it too.
    """

    t: FakeTransport
    host: Host
    sweep_id: str
    runs_per_poll: int = 2
    outcome: Outcome = lambda server, run: RunStatus.ok
    die_after: int | None = None
    alive: bool = False
    starts: int = 0
    polls: int = 0
    stops: int = 0
    stopped_on_purpose: bool = False
    last_error: AgentError | None = None  # what its progress file says went wrong last

    def __post_init__(self) -> None:
        self.dir = SweepDir(sweep_dir(self.host, self.sweep_id))
        channel = AgentChannel(self.host, self.sweep_id, self.t)
        self.poll_command = channel.poll_command()
        start = channel.start_command()
        self.t.on(lambda c: c.command == self.poll_command, self._poll, name="agent poll")
        self.t.script(start, lambda _t, _c: self._start())
        self.t.script(channel.agent_cli("service", "stop", *channel.service_args(), "--grace", "30"), lambda _t, _c: self._stop())
        self.t.on_reboot.append(lambda _t: self._die())

    def _die(self) -> None:
        self.alive = False

    def _stop(self) -> Reply:
        """`service stop` (a host given up on): it ends `stopped`, if it ran."""
        self.stops += 1
        if self.alive:
            self.alive = False
            self._write_progress(AgentState.stopped)
        return Reply(json.dumps({"state": "exited"}) + "\n")

    def _start(self) -> Reply:
        self.starts += 1
        self.alive = True
        self.boot_id = self.t.boot_id
        self.started_at = time.time()
        self._write_progress(AgentState.running)
        return Reply(json.dumps({"state": "running"}) + "\n")

    def shard(self) -> Shard:
        return Shard.from_json(self.t.read_text(self.dir.shard), self.dir.shard)

    def results(self) -> dict[str, dict[str, Any]]:
        return {name[:-5]: json.loads(data) for name, data in self.t.tree(self.dir.runs).items() if name.endswith(".json")}

    def _poll(self, t: FakeTransport, call: Call) -> str:
        self.polls += 1
        if self.alive:
            self._work()
        status = json.dumps({"state": "running" if self.alive else "exited"})
        progress = t.read_text(self.dir.progress) if t.is_file(self.dir.progress) else ""
        count = len(self.results())  # the poll's `ls | grep -c`
        return f"{status}\n{SEPARATOR}\n{t.boot_id}\n{SEPARATOR}\n{progress}\n{SEPARATOR}\n{count}\n"

    def _work(self) -> None:
        done = self.results()
        todo = [(s, r) for s, r in self.shard().runs if r.run_id not in done]
        for server, run in todo[: self.runs_per_poll]:
            self._finish(server, run)
            if self.die_after is not None:
                self.die_after -= 1
                if self.die_after <= 0:
                    self.die_after = None
                    self.alive = False
                    self._write_progress(AgentState.running)  # it died: nobody wrote an end state
                    return
        if len(todo) <= self.runs_per_poll:
            self.alive = False
            statuses = {r["status"] for r in self.results().values()}
            ended = AgentState.finished if statuses <= {"ok"} else AgentState.finished_with_errors
            self._write_progress(AgentState.stopped if self.stopped_on_purpose else ended)
        else:
            self._write_progress(AgentState.running)

    def _finish(self, server: ServerSpec, run: RunSpec) -> None:
        outcome = self.outcome(server, run)
        failure = outcome if isinstance(outcome, Failure) else None
        status = outcome if isinstance(outcome, RunStatus) else RunStatus.failed
        result = RunResult(
            run_id=run.run_id, label=run.label, server_id=server.server_id, server_label=server.label, sweep_id=self.sweep_id,
            host=self.host.name, status=status, failure=failure,
            figures={"output_tok_s": 100.0} if status is RunStatus.ok else {}, workload=dict(run.workload),
            started_at=time.time(), ended_at=time.time(), boot_id=self.t.boot_id,
        )  # fmt: skip
        self.t.write(self.dir.result(run.run_id), json.dumps(result.to_json()))

    def _write_progress(self, state: AgentState) -> None:
        counts: dict[str, int] = {}
        for result in self.results().values():
            counts[result["status"]] = counts.get(result["status"], 0) + 1
        progress = Progress(
            sweep_id=self.sweep_id, agent_pid=4242, boot_id=self.boot_id, started_at=self.started_at, updated_at=time.time(),
            state=state, total=len(self.shard().runs), counts=counts, last_error=self.last_error,
        )  # fmt: skip
        self.t.write(self.dir.progress, json.dumps(progress.to_json()))
