"""Inside a Slurm allocation, before the agent: the node's facts, its preflight, model staging.

`python -m fleet.host.nodeprep TASK_DIR REQUIREMENTS` (the batch script runs it after
fleet.host.grant has bound the shard to the granted GPUs):
1. runs the controller's facts script (the same composite script an SSH host answers, fleet.facts)
   on the node and keeps its whole output in `node-facts/<job>.<start>.txt`;
2. judges the node by the preflight rules that decide whether a task may start there (the rule ids
   and figures of fleet.provision.preflight, carried in the requirements): the granted GPUs are
   listed, of the expected model, idle; the CUDA toolkit builds for their architecture; the driver
   runs that toolkit; the engine is installed; the interpreter of each workload's client tool
   can import it (the probe the SSH preflight runs); the node-local dir has room for the models;
3. stages every model from the shared fs to the node-local dir, once per node and boot: under an
   exclusive lock (tasks of one node wait for the first one's copy instead of copying twice), into
   a `.partial` dir renamed into place with a marker naming the boot id (a reader never sees half a
   model; a reboot, which wipes a tmpfs and makes any copy on a disk suspect, stages again), and
   points the shard's server arguments at the node-local copies;
4. writes `node-prep/<job>.<start>.json` (fleet.host.contract.nodeprep.NodePrep) and exits 0, or
   REFUSED_EXIT when a check failed or staging did: the agent is not started on this node and the
   controller resubmits the task elsewhere (`--exclude`).

Standard library only: shipped in the bundle. The controller re-reads the facts file with its own
parsers and runs the full preflight report on it (fleet.slurm.nodeprep).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleet.host import nvidia_smi, procfs
from fleet.host.agent.tools import TOOL_PROBE_TIMEOUT_S, TOOLS, ToolFound, missing_tools, probe_tools
from fleet.host.atomic import atomic_file
from fleet.host.engines import DEFAULT_ENGINE
from fleet.host.contract.nodeprep import (
    NODE_FACTS_DIR,
    REFUSED_EXIT,
    ArchRule,
    ClientToolUse,
    ModelToStage,
    NodeCheck,
    NodePrep,
    NodeRequirements,
    Staged,
)
from fleet.host.errors import ContractError
from fleet.host.facts_output import SectionOutput, split_sections
from fleet.host.errors import NodePrepError, SharedCopyError
from fleet.host.errors import NvidiaSmiError

COPY_MARKER = ".fleet-complete.json"  # fleet.provision.models.MARKER: a complete copy's listing
STAGED_MARKER = ".fleet-staged.json"  # this node's copy: the boot it was made in, the listing it copied
_IGNORED_PREFIXES = (".fleet-", ".rsync-partial", ".cache")  # as fleet.provision.models lists a copy
FACTS_TIMEOUT_S = 600.0  # the script bounds each section itself; this only stops a runaway
SHARD = "shard.json"


# ---------------------------------------------------------------------------------------------
# The facts script's output (pure)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


@dataclass(frozen=True)
class NodeFacts:
    """What the node gate reads of the facts (each None where the fact was unreadable, with why)."""

    gpus: list[dict[str, str]] | None
    gpus_problem: str | None
    apps: list[nvidia_smi.ComputeApp] | None
    apps_problem: str | None
    toolkit: tuple[str, str] | None  # (nvcc path, "12.8"); None: no nvcc found
    toolkit_line: str
    driver: tuple[str | None, str | None]  # (driver version, the CUDA version its header names)
    engine: dict[str, Any] | None
    engine_problem: str | None


def _problem(section: SectionOutput | None, what: str) -> str | None:
    if section is None:
        return f"no {what} section: the facts script stopped before it"
    if section.exit_code != 0:
        last = section.text.strip().splitlines()[-1:] or ["no output"]
        return f"exit {section.exit_code}: {last[0]}"
    return None


def read_facts(sections: Mapping[str, SectionOutput], req: NodeRequirements) -> NodeFacts:
    labels = req.facts_labels
    gpus: list[dict[str, str]] | None = None
    gpus_problem = _problem(sections.get("gpus"), "gpus")
    if gpus_problem is None:
        try:
            gpus = nvidia_smi.parse_csv(sections["gpus"].text, req.gpu_query_fields)
        except NvidiaSmiError as exc:
            gpus_problem = str(exc)
    apps: list[nvidia_smi.ComputeApp] | None = None
    apps_problem = _problem(sections.get("gpu_processes"), "gpu_processes")
    if apps_problem is None:
        try:
            apps = nvidia_smi.parse_compute_apps(sections["gpu_processes"].text)
        except NvidiaSmiError as exc:
            apps_problem = str(exc)
    toolkit: tuple[str, str] | None = None
    toolkit_text = sections["toolkit"].text if "toolkit" in sections else ""
    first = toolkit_text.splitlines()[0] if toolkit_text else ""
    path = first.removeprefix(labels.get("nvcc_path", "nvcc-path:")).strip()
    release = re.search(r"release (\d+\.\d+), V[\w.]+", toolkit_text)
    if path and path != labels.get("nvcc_absent", "none") and release:
        toolkit = (path, release.group(1))
    release_line = next((line for line in toolkit_text.splitlines() if "release" in line), first)
    header = sections["driver"].text if "driver" in sections else ""
    driver = re.search(r"Driver Version\s*:\s*(\d[\d.]*)", header, re.IGNORECASE)
    cuda = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", header, re.IGNORECASE)
    engine: dict[str, Any] | None = None
    engine_problem: str | None = "no engine section: the facts script stopped before it"
    if "engine" in sections:
        mark = labels.get("engine_probe", "fleet-engine-probe:")
        line = next((line for line in reversed(sections["engine"].text.splitlines()) if line.startswith(mark)), None)
        if line is None:
            engine_problem = f"the engine's Python printed no probe result (exit {sections['engine'].exit_code})"
        else:
            try:
                engine, engine_problem = json.loads(line.removeprefix(mark)), None
            except ValueError as exc:
                engine_problem = f"unreadable probe result: {exc}"
    # The driver's version from its header, else from the GPU query (as fleet.facts does).
    version = driver.group(1) if driver else next((g["driver_version"] for g in gpus or [] if g.get("driver_version")), None)
    return NodeFacts(gpus, gpus_problem, apps, apps_problem, toolkit, release_line.strip(), (version, cuda.group(1) if cuda else None), engine, engine_problem)


# ---------------------------------------------------------------------------------------------
# The checks (pure): preflight's rules on the GPUs Slurm granted this task


def granted_gpus(env: Mapping[str, str]) -> list[int]:
    text = env.get("CUDA_VISIBLE_DEVICES", "")
    return [int(p) for p in text.split(",") if p.strip().isdigit()]


def _arch_rule(rules: Sequence[ArchRule], capability: tuple[int, ...]) -> ArchRule | None:
    major, minor = (capability + (0, 0))[:2]
    return next((r for r in rules if r.major == major and r.minor in (None, minor)), None)


def _driver_cuda(facts: NodeFacts, req: NodeRequirements) -> tuple[int, ...] | None:
    version, cuda = facts.driver
    if cuda:
        return _version(cuda)
    if not version:
        return None
    supported = [_version(t) for t, minimum in req.toolkit_min_driver.items() if _version(version) >= _version(minimum)]
    return max(supported) if supported else None


def shard_gpus(shard: Mapping[str, Any]) -> int:
    """How many GPUs the task needs (the shard as fleet.host.grant bound it): its pool where it
    names one, else the GPUs its servers' hints name (fleet.host.contract.shard.Shard.pool)."""
    pool = shard.get("gpus")
    return len(set(pool)) if isinstance(pool, list) else len({g for server in shard.get("servers", []) for g in server.get("gpus", [])})


@dataclass(frozen=True)
class Scene:
    """What the node's rules look at: the facts, the requirements, this start's GPUs and room."""

    facts: NodeFacts
    req: NodeRequirements
    wanted: int  # the GPUs the task's servers use
    granted: Sequence[int]  # CUDA_VISIBLE_DEVICES of this start
    free_bytes: int | None  # free space of the node-local dir
    to_stage_bytes: int  # what this start must copy there
    local_dir: str | None  # the node-local dir as it expanded on the node
    tools: Sequence[ToolFound] = ()  # what the node's interpreters said of the workloads' client tools

    @property
    def mine(self) -> list[dict[str, str]]:
        """The granted GPUs' rows of nvidia-smi's query."""
        return [g for g in self.facts.gpus or [] if g.get("index", "").isdigit() and int(g["index"]) in self.granted]

    @property
    def played(self) -> bool:
        """A sim engine that plays the declared GPUs (fleet.provision.preflight.played_gpus)."""
        names = [g.get("name", "") for g in self.facts.gpus or []]
        return self.req.engine_kind == "sim" and (self.facts.gpus is None or nvidia_smi.plays_declared(self.req.gpu_model, names))

    @property
    def gpu_rules_apply(self) -> bool:
        return bool(self.mine) and not self.played

    @property
    def evidence(self) -> str:
        return "; ".join(", ".join(f"{k}={v}" for k, v in g.items() if k in ("index", "name", "compute_cap", "uuid")) for g in self.mine)


def check_gpu_count(s: Scene) -> tuple[str, str, str]:
    """Every GPU Slurm granted is listed by nvidia-smi."""
    if s.wanted == 0:
        return "skip", "the task asks for no GPUs", ""
    if s.played:
        return "skip", f"the sim engine plays the {s.wanted} GPUs the task was granted", ""
    if s.facts.gpus is None:
        return "fail", f"granted GPUs {list(s.granted)}, but nvidia-smi failed", s.facts.gpus_problem or ""
    listed = sorted(int(g["index"]) for g in s.facts.gpus if g.get("index", "").isdigit())
    missing = [i for i in s.granted if i not in listed]
    if len(s.granted) < s.wanted or missing:
        return (
            "fail",
            f"Slurm granted GPUs {list(s.granted)} (the task's servers use {s.wanted}); nvidia-smi lists {listed}" + (f": {missing} missing (fallen off the bus? dmesg: Xid 79)" if missing else ""),
            f"CUDA_VISIBLE_DEVICES={','.join(map(str, s.granted))}",
        )
    return "ok", f"the {len(s.granted)} granted GPUs are listed", s.evidence


def check_gpu_model(s: Scene) -> tuple[str, str, str]:
    if s.req.gpu_model is None:
        return "skip", "no GPU model expected", ""
    if not s.gpu_rules_apply:
        return "skip", "no granted GPUs listed", ""
    wrong = sorted({g.get("name", "") for g in s.mine if not nvidia_smi.same_model(g.get("name", ""), s.req.gpu_model)})
    return ("fail", f"expected {s.req.gpu_model!r}, found {wrong}", s.evidence) if wrong else ("ok", f"granted GPUs are {s.req.gpu_model}", s.evidence)


def check_gpus_idle(s: Scene) -> tuple[str, str, str]:
    """No process holds a granted GPU (a neighbouring job's GPUs are its own business)."""
    if not s.gpu_rules_apply:
        return "skip", "no granted GPUs listed", ""
    if s.facts.apps is None:
        return "warn", "could not list GPU processes", s.facts.apps_problem or ""
    uuids = {g.get("uuid", ""): g.get("index", "") for g in s.mine}
    holders = [a for a in s.facts.apps if a.gpu_uuid in uuids]
    if holders:
        return "fail", f"{len(holders)} process(es) hold granted GPUs: " + "; ".join(f"pid {a.pid} {a.process_name} on GPU {uuids[a.gpu_uuid]}" for a in holders), ""
    return "ok", "no processes on the granted GPUs", ""


def check_toolkit_supports_gpu(s: Scene) -> tuple[str, str, str]:
    capabilities = sorted({_version(g.get("compute_cap", "")) for g in s.mine if g.get("compute_cap")})
    if not s.gpu_rules_apply or not capabilities:
        return "skip", "no granted GPUs listed", ""
    findings: list[tuple[str, str, str]] = []
    toolkit, line = s.facts.toolkit, s.facts.toolkit_line
    for capability in capabilities:
        rule = _arch_rule(s.req.arch_rules, capability)
        cc = ".".join(map(str, capability))
        if rule is None:
            findings.append(("skip", f"no toolkit rule for compute capability {cc}", ""))
        elif toolkit is None:
            findings.append(("warn", "no nvcc in CUDA_HOME, on PATH or in /usr/local/cuda: kernels the engine compiles at run time (JIT) cannot be built", line))
        elif _version(toolkit[1]) < _version(rule.min_toolkit):
            findings.append(("fail", f"nvcc {toolkit[0]} is CUDA {toolkit[1]}; compute capability {cc} needs >= {rule.min_toolkit}: {rule.reason}", line))
        else:
            findings.append(("ok", f"CUDA {toolkit[1]} >= {rule.min_toolkit} for {cc}", line))
    return min(findings, key=lambda f: VERDICT_ORDER.index(f[0]))


def check_driver_supports_toolkit(s: Scene) -> tuple[str, str, str]:
    toolkit, (driver, _) = s.facts.toolkit, s.facts.driver
    if toolkit is None:
        return "skip", "no CUDA toolkit", ""
    if s.played:
        return "skip", "the sim engine plays the GPUs", ""
    driver_cuda = _driver_cuda(s.facts, s.req)
    if driver_cuda is None:
        return "warn", "the driver's CUDA version is unknown (nvidia-smi did not report it)", ""
    wanted = _version(toolkit[1])[:2]
    have = f"driver {driver or '?'} supports CUDA {'.'.join(map(str, driver_cuda))}"
    floor = s.req.minor_compat_min_driver.get(str(wanted[0]))
    if driver_cuda >= wanted:
        return "ok", f"{have} >= toolkit {toolkit[1]}", ""
    if driver_cuda[:1] == wanted[:1] and floor and driver and _version(driver) >= _version(floor):
        return "warn", f"{have} < toolkit {toolkit[1]}: it runs under CUDA minor-version compatibility (driver >= {floor})", ""
    return "fail", f"{have} < toolkit {toolkit[1]}: code built by this toolkit will not load", ""


def check_engine_installed(s: Scene) -> tuple[str, str, str]:
    engine = s.facts.engine
    if s.req.engine_kind != "sglang":
        return "skip", f"engine {s.req.engine_kind} needs no Python packages", ""
    if engine is None:
        return "fail", f"the engine's Python: {s.facts.engine_problem}", ""
    package = DEFAULT_ENGINE  # what sglang hosts serve; the probe reports each engine's package as `<name>_version`
    version = engine.get(f"{package}_version")
    if not version:
        return "fail", f"{engine.get('executable')} has no {package}", ""
    return "ok", f"{package} {version} in {engine.get('executable')}", ""


def check_client_tools_installed(s: Scene) -> tuple[str, str, str]:
    """As fleet.provision.preflight's rule: fleet installs nothing, so a tool its interpreter cannot
    import on this node would fail every run of the workload here."""
    if not s.req.client_tools:
        return "skip", "no workload names a client tool", ""
    what = missing_tools(s.tools)
    if what is not None:
        return "fail", f"{what} (install the tool into that interpreter on the node, or name one that has it in the workload's `client.python`)", ""
    return "ok", "; ".join(sorted({f"{TOOLS[f.tool].title} in {f.python}" for f in s.tools})), ""


def probe_client_tools(uses: Sequence[ClientToolUse], env: Mapping[str, str]) -> list[ToolFound]:
    """Each interpreter the workloads' tools run in, asked on this node (the probe the SSH
    preflight runs on a host: fleet.host.agent.tools.probe_tools)."""
    wanted: dict[str, list[tuple[str, str]]] = {}
    for use in uses:
        wanted.setdefault(use.python, []).append((use.workload, use.tool))

    def run(argv: list[str]) -> tuple[int, str, str]:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_PROBE_TIMEOUT_S, cwd="/", env=dict(env))
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 127, "", str(exc)
        return done.returncode, done.stdout, done.stderr

    return probe_tools(wanted, run)


def check_staging_space(s: Scene) -> tuple[str, str, str]:
    if not s.req.models or s.req.node_local_dir is None:
        return "skip", "nothing to stage", ""
    if s.to_stage_bytes == 0:
        return "ok", "every model is staged on this node for this boot", ""
    where = s.local_dir or s.req.node_local_dir
    if s.free_bytes is None:
        return "fail", f"cannot measure free space of the node-local dir {where}", ""
    if s.free_bytes < s.to_stage_bytes:
        return ("fail", f"stage {s.to_stage_bytes} bytes into {where}: {s.free_bytes} bytes free (point slurm.node_local_dir in {s.req.host_file} at a larger disk)", f"statvfs {where}")
    return "ok", f"stage {s.to_stage_bytes} bytes into {where}: {s.free_bytes} bytes free", f"statvfs {where}"


VERDICT_ORDER = ("fail", "warn", "ok", "skip")
# The rules a node is judged by before a task starts, by their ids in fleet.provision.preflight.RULES
# (the rules about a host's whole inventory -- service manager, model cache -- have no say here).
NODE_RULES: tuple[tuple[str, Callable[[Scene], tuple[str, str, str]]], ...] = (
    ("gpu-count", check_gpu_count),
    ("gpu-model", check_gpu_model),
    ("gpus-idle", check_gpus_idle),
    ("toolkit-supports-gpu", check_toolkit_supports_gpu),
    ("driver-supports-toolkit", check_driver_supports_toolkit),
    ("engine-installed", check_engine_installed),
    ("client-tools-installed", check_client_tools_installed),
    ("staging-space", check_staging_space),
)


def judge(
    facts: NodeFacts, req: NodeRequirements, wanted: int, granted: Sequence[int], free_bytes: int | None, to_stage_bytes: int, local_dir: str | None = None, tools: Sequence[ToolFound] = ()
) -> list[NodeCheck]:
    """Every node rule's verdict on this start (see Scene for the arguments)."""
    scene = Scene(facts, req, wanted, granted, free_bytes, to_stage_bytes, local_dir, tools)
    return [NodeCheck(rule_id, *check(scene)) for rule_id, check in NODE_RULES]


# ---------------------------------------------------------------------------------------------
# Staging (I/O)


def local_root(node_local_dir: str, env: Mapping[str, str]) -> Path:
    """`$TMPDIR` (Slurm's per-node scratch where the site sets it) expands on the node, else /tmp."""
    if node_local_dir == "$TMPDIR" or node_local_dir.startswith("$TMPDIR/"):
        return Path(env.get("TMPDIR") or "/tmp") / node_local_dir.removeprefix("$TMPDIR").lstrip("/")
    return Path(node_local_dir)


def listing(directory: Path) -> dict[str, int]:
    return {p.relative_to(directory).as_posix(): p.stat().st_size for p in sorted(directory.rglob("*")) if p.is_file() and not p.relative_to(directory).as_posix().startswith(_IGNORED_PREFIXES)}


def source_marker(model: ModelToStage) -> dict[str, Any]:
    """The shared copy's marker: a model without one is not complete on the shared fs."""
    path = Path(model.source) / COPY_MARKER
    try:
        marker = json.loads(path.read_text())
        files = {str(k): int(v) for k, v in marker["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SharedCopyError(f"{model.name}: {path}: no complete copy on the shared fs ({exc})") from None
    return {**marker, "files": files}


def staged_ok(target: Path, marker: Mapping[str, Any], boot_id: str) -> bool:
    try:
        staged = json.loads((target / STAGED_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return bool(staged.get("boot_id") == boot_id and staged.get("marker") == marker and listing(target) == marker["files"])


def stage(model: ModelToStage, root: Path, boot_id: str) -> Staged:
    """One model to `root/<key>`, once per boot: under `root/.<key>.lock` (a second task of the
    node waits, then finds the copy done), via `<key>.partial`, the staged marker inside it."""
    began = time.monotonic()
    marker = source_marker(model)
    target = root / model.key
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{model.key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if staged_ok(target, marker, boot_id):
            return Staged(model.name, str(target), "present", sum(marker["files"].values()), time.monotonic() - began)
        partial = root / f"{model.key}.partial"
        for stale in (partial, target):
            if stale.exists():
                shutil.rmtree(stale)
        shutil.copytree(model.source, partial, ignore=shutil.ignore_patterns(".fleet-staged.json", ".rsync-partial"), symlinks=False)
        found = listing(partial)
        if found != marker["files"]:
            shutil.rmtree(partial)
            raise SharedCopyError(f"{model.name}: the copy from {model.source} does not match its marker (files changed under the copy?)")
        with atomic_file(partial / STAGED_MARKER) as handle:
            handle.write(json.dumps({"boot_id": boot_id, "source": model.source, "marker": marker}, sort_keys=True).encode())
        os.rename(partial, target)
        return Staged(model.name, str(target), "copied", sum(marker["files"].values()), time.monotonic() - began)


def bytes_to_stage(models: Sequence[ModelToStage], root: Path, boot_id: str) -> int:
    """What this start would copy (models without this boot's complete copy); an unreadable
    source counts nothing here: staging then fails with its reason."""
    total = 0
    for model in models:
        try:
            marker = source_marker(model)
        except NodePrepError:
            continue
        if not staged_ok(root / model.key, marker, boot_id):
            total += sum(marker["files"].values())
    return total


def free_space(root: Path) -> int | None:
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        stat = os.statvfs(probe)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def point_at(shard: dict[str, Any], moves: Mapping[str, str]) -> dict[str, Any]:
    """The shard with every server argument and environment value under a shared model dir
    pointed at its node-local copy. Pure."""

    def moved(value: str) -> str:
        for source, target in moves.items():
            if value == source or value.startswith(source.rstrip("/") + "/"):
                return target + value[len(source.rstrip("/")) :]
        return value

    out = json.loads(json.dumps(shard))
    for server in out.get("servers", []):
        server["argv"] = [moved(a) for a in server.get("argv", [])]
        server["env"] = {k: moved(v) for k, v in server.get("env", {}).items()}
    return out


# ---------------------------------------------------------------------------------------------
# The step


def _identity(env: Mapping[str, str]) -> tuple[str, str, str, str, int]:
    hostname = socket.gethostname()
    boot_id = procfs.boot_id()
    # An array task as squeue and the controller name it (`A_i`); a single job by its id.
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        job_id = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    else:
        job_id = env.get("SLURM_JOB_ID", "nojob")
    return env.get("SLURMD_NODENAME") or hostname, hostname, boot_id, job_id, int(env.get("SLURM_RESTART_COUNT", "0") or 0) + 1


def prepare(task_dir: Path, req: NodeRequirements, env: Mapping[str, str]) -> NodePrep:
    began, clock = time.time(), time.monotonic()
    prep = _prepare(task_dir, req, env, began)
    return replace(prep, seconds=round(time.monotonic() - clock, 3))


def _prepare(task_dir: Path, req: NodeRequirements, env: Mapping[str, str], began: float) -> NodePrep:
    node, hostname, boot_id, job_id, start = _identity(env)
    facts_file = f"{NODE_FACTS_DIR}/{job_id}.{start}.txt"
    try:
        # Without the bundle's PYTHONPATH: the engine's Python is probed as an SSH login finds it,
        # and the probe's cache (keyed by boot, interpreter and sys.path) holds across sweeps.
        clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        done = subprocess.run(["sh", req.facts_script], capture_output=True, text=True, timeout=FACTS_TIMEOUT_S, cwd="/", env=clean)
        output = done.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        output = f"the facts script did not run: {exc}"
    with atomic_file(task_dir / facts_file) as handle:
        handle.write(output.encode())
    facts = read_facts(split_sections(output), req)
    root = local_root(req.node_local_dir, env) if req.node_local_dir else None
    pending = bytes_to_stage(req.models, root, boot_id) if root else 0
    shard_path = task_dir / SHARD
    try:
        shard = json.loads(shard_path.read_text())
    except (OSError, ValueError) as exc:
        raise NodePrepError(f"{shard_path}: {exc}") from None
    tools = probe_client_tools(req.client_tools, clean)
    checks = judge(facts, req, shard_gpus(shard), granted_gpus(env), free_space(root) if root else None, pending, str(root) if root else None, tools)
    prep = NodePrep(node, hostname, boot_id, job_id, start, began, checks, agent_started=False, facts_file=facts_file)
    if prep.failures:
        return prep
    staged: list[Staged] = []
    try:
        if root is not None:
            staged = [stage(model, root, boot_id) for model in req.models]
            with atomic_file(shard_path) as handle:
                handle.write(json.dumps(point_at(shard, {m.source: s.path for m, s in zip(req.models, staged)}), indent=1, sort_keys=True).encode())
    except (OSError, ValueError, NodePrepError) as exc:
        return replace(prep, staged=staged, error=f"staging failed: {exc}", node_at_fault=not isinstance(exc, SharedCopyError))
    return replace(prep, staged=staged, agent_started=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m fleet.host.nodeprep TASK_DIR REQUIREMENTS", file=sys.stderr)
        return 2
    task_dir = Path(argv[0])
    try:
        req = NodeRequirements.load(argv[1])
        prep = prepare(task_dir, req, os.environ)
    except (ContractError, NodePrepError) as exc:
        print(f"fleet nodeprep: {exc}", file=sys.stderr)
        return 2
    with atomic_file(task_dir / prep.file_name()) as handle:
        handle.write(prep.to_json().encode())
    for check in prep.checks:
        print(f"fleet nodeprep: {prep.node}: {check.verdict:4} {check.rule_id}: {check.message}", file=sys.stderr)
    for item in prep.staged:
        print(f"fleet nodeprep: {prep.node}: {item.action} {item.model} -> {item.path} ({item.bytes} bytes, {item.seconds:.2f} s)", file=sys.stderr)
    if not prep.agent_started:
        print(f"fleet nodeprep: {prep.reason()}", file=sys.stderr)
        return REFUSED_EXIT
    print(f"fleet nodeprep: {prep.node}: ready in {prep.seconds:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
