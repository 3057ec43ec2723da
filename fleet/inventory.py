"""The inventory: one host per file in `hosts/*.yaml`, validated with pydantic.

Files whose name contains `.example.` document a host shape and are never loaded as hosts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Literal, Protocol

from pydantic import Field, PrivateAttr, Strict, field_validator, model_validator

from fleet.config import (
    Command, HostAddress, HostPath, Int, LocalPath, SshAlias, StrictModel, UserName, checked, checked_host_path, load_model_file,
    read_input_file, validate_model,
)  # fmt: skip
from fleet.errors import ConfigError, HostSelectionError
from fleet.host.engines import DEFAULT_ENGINE, release_table

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
# Names become file and folder names (hosts/<name>.yaml, results/<playbook>-<stamp>/<host>/):
# bounded well below a file name's 255 bytes, with room for what is added to them.
MAX_NAME = 64


def _name_length(value: str) -> str | None:
    return None if len(value) <= MAX_NAME else f"a name of at most {MAX_NAME} characters (got {len(value)})"


# The name of a host, group, playbook, method, workload or draft.
Name = Annotated[str, Field(pattern=NAME_PATTERN), checked(_name_length)]


class TransportKind(str, Enum):
    ssh = "ssh"
    local = "local"


class HostKeyPolicy(str, Enum):
    verify = "verify"
    accept_new = "accept-new"


class HostKind(str, Enum):
    host = "host"  # a GPU host fleet drives itself
    slurm = "slurm"  # the login host of a Slurm cluster: the scheduler places the work (fleet.slurm)


class EngineKind(str, Enum):
    sglang = "sglang"
    sim = "sim"


class ServiceManager(str, Enum):
    systemd = "systemd"
    process = "process"


class GpuSpec(StrictModel):
    count: Int = Field(ge=0, le=64, description="GPUs the host must have")
    model: str | None = Field(default=None, description="expected `nvidia-smi` name, e.g. NVIDIA RTX PRO 6000 Blackwell ...")


class HostPaths(StrictModel):
    # HostPath: absolute, no `..`, no spaces or shell characters -- these reach remote shells and rsync.
    work_dir: HostPath = "/var/lib/fleet"
    model_cache: HostPath = "/srv/models"
    staging: HostPath | None = Field(default=None, description="fast dir such as /dev/shm/fleet; none = serve from the cache")
    allow_volatile_work_dir: bool = Field(
        default=False,
        description="accept a work_dir on tmpfs (a reboot erases finished runs' results there and the sweep runs them again); provisioning warns instead of refusing",
    )


UPSTREAM = "upstream"
# `engine.fork` left out: the engine kind's default (see fork_of).
ENGINE_DEFAULT_FORK = "default"


def fork_of(kind: str, fork: str | None = ENGINE_DEFAULT_FORK) -> str | None:
    """The fork whose flags an engine takes, None for a released SGLang. `fork` as in a host file
    (upstream, ddtree), or ENGINE_DEFAULT_FORK/None for the kind's default: the simulator has always
    played the DDTree fork (the seed campaign's DDTree runs rehearse on it), a real host is upstream."""
    if fork in (None, ENGINE_DEFAULT_FORK):
        fork = release_table().FORKS[0] if kind == EngineKind.sim.value else UPSTREAM
    return None if fork == UPSTREAM else fork


# The engines a sim host plays: the simulator speaks SGLang's and vLLM's command lines, logs and HTTP
# surfaces (fleet/host/engines/sim/server.py and vllmserver.py).
SIM_PLAYS: tuple[str, ...] = (DEFAULT_ENGINE, "vllm")


class VllmInstall(StrictModel):
    """vLLM on a host beside its SGLang: the configurations of a playbook's `engine: [.., vllm]` go
    to hosts that have it."""

    python: Command | None = Field(default=None, description="interpreter with vllm installed (default: engine.python)")
    release: str | None = Field(default=None, description="the vLLM release the host runs, pinned (one fleet knows); facts' vllm_version must agree; sim hosts: the release the simulator plays")

    @field_validator("release")
    @classmethod
    def _known_release(cls, value: str | None) -> str | None:
        served = release_table("vllm")
        if value is not None and value not in served.KNOWN_RELEASES:
            raise ValueError(f"one of the {served.TITLE} releases fleet knows ({', '.join(served.KNOWN_RELEASES)}), not {value!r}")
        return value


class EngineSpec(StrictModel):
    kind: EngineKind = EngineKind.sglang
    python: Command = Field(default="python3", description="interpreter that runs the engine")
    sim_speed: float = Field(default=1.0, gt=0, le=1.0, description="sim engine only: time scale (0.01 = a hundred times faster than real)")
    sim_start_speed: float | None = Field(
        default=None,
        gt=0,
        le=1.0,
        description="sim engine only: time scale of the simulated start-ups alone (default: sim_speed); serving and results keep sim_speed",
    )
    release: str | None = Field(
        default=None,
        description=(
            "the SGLang release the host runs, pinned (one fleet knows); sglang hosts: facts' sglang_version "
            "must agree; sim hosts: the release the simulator plays (default " + release_table().DEFAULT_SIM_RELEASE + ")"
        ),
    )
    fork: str | None = Field(
        default=None,
        description="ddtree: the engine is the DDTree fork (its flags and algorithm exist); upstream: a released SGLang. Default: upstream for sglang hosts, ddtree for sim hosts",
    )
    # YAML reads a bare `on`/`off` as true/false: both spellings mean the same.
    sim_noise: Literal["on", "off"] | bool = Field(default="off", description="sim engine only: run-to-run variation as hardware shows it (on), or the exact figures (off)")
    vllm: VllmInstall | None = Field(default=None, description="sglang hosts: vLLM is installed too (where, and its release); without it the host serves SGLang alone")

    @field_validator("release")
    @classmethod
    def _known_release(cls, value: str | None) -> str | None:
        served = release_table()
        if value is not None and value not in served.KNOWN_RELEASES:
            raise ValueError(f"one of the {served.TITLE} releases fleet knows ({', '.join(served.KNOWN_RELEASES)}), not {value!r}")
        return value

    @field_validator("fork")
    @classmethod
    def _known_fork(cls, value: str | None) -> str | None:
        forks = release_table().FORKS
        if value is not None and value not in (UPSTREAM, *forks):
            raise ValueError(f"one of {UPSTREAM}, {', '.join(forks)}, not {value!r}")
        return value

    @property
    def noise(self) -> str:
        """The simulator's noise setting, `on` or `off`."""
        return "on" if self.sim_noise in (True, "on") else "off"

    @property
    def engine_fork(self) -> str | None:
        """The fork whose flags the engine takes, None for a released SGLang (see fork_of)."""
        return fork_of(self.kind.value, self.fork)

    def serves(self, engine: str) -> bool:
        """Whether the host can serve `engine` (an ENGINE_NAMES name)."""
        if self.kind is EngineKind.sim:
            return engine in SIM_PLAYS
        return engine == DEFAULT_ENGINE or (engine == "vllm" and self.vllm is not None)

    def python_for(self, engine: str) -> str:
        """The interpreter that runs `engine` on the host."""
        if engine == "vllm" and self.vllm is not None and self.vllm.python:
            return self.vllm.python
        return self.python

    def release_for(self, engine: str) -> str | None:
        """The release the host file pins for `engine`, if any."""
        if engine == DEFAULT_ENGINE:
            return self.release
        return self.vllm.release if engine == "vllm" and self.vllm is not None else None

    def fork_for(self, engine: str) -> str | None:
        """The fork of `engine` the host runs: only SGLang has forks fleet knows."""
        return self.engine_fork if engine == DEFAULT_ENGINE else None

    def missing(self, engine: str) -> str:
        """Why the host cannot serve `engine`, in words naming what to set (see `serves`)."""
        if self.kind is EngineKind.sim:
            return f"a sim host plays {', '.join(SIM_PLAYS)} only (the simulator does not play {release_table(engine).TITLE} yet)"
        return f"no {release_table(engine).TITLE} on the host: set engine.{engine}.python (where it is installed) in its host file"


# Partition, account, QOS and GRES names as Slurm spells them; a constraint joins features with `&`.
SLURM_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
SLURM_CONSTRAINT_PATTERN = r"^[A-Za-z0-9_.-]+(&[A-Za-z0-9_.-]+)*$"


def _node_local_dir(value: str) -> str | None:
    """An absolute path on the node, or one under `$TMPDIR` (expanded on the node)."""
    if value == TMPDIR or value.startswith(TMPDIR + "/"):
        rest = value.removeprefix(TMPDIR)
        return None if not rest or checked_host_path(rest) is None else f"{TMPDIR} or {TMPDIR}/<relative path> (letters, digits and . _ - /)"
    expected = checked_host_path(value)
    return None if expected is None else f"{expected}, or a path under {TMPDIR}"


TMPDIR = "$TMPDIR"
NodeLocalDir = Annotated[str, checked(_node_local_dir)]


def parse_slurm_time(text: str) -> int:
    """Slurm's time formats (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`) -> seconds."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not match:
        raise ValueError(f"a Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS), not {text!r}")
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 86400 + int(first) * 3600 + int(second or 0) * 60 + int(third or 0)
    if third is not None:  # HH:MM:SS
        return int(first) * 3600 + int(second) * 60 + int(third)
    if second is not None:  # MM:SS
        return int(first) * 60 + int(second)
    return int(first) * 60  # MM


class SlurmSpec(StrictModel):
    """Where and how a `kind: slurm` entry's jobs run; every field reaches `#SBATCH` lines."""

    shared_dir: HostPath = Field(
        description="a directory on the cluster's shared filesystem, the same path on the login host and every node: sweep dirs, the shipped agent and batch scripts live there"
    )
    partition: str | None = Field(default=None, pattern=SLURM_NAME_PATTERN, description="none: the cluster's default partition")
    account: str | None = Field(default=None, pattern=SLURM_NAME_PATTERN)
    qos: str | None = Field(default=None, pattern=SLURM_NAME_PATTERN)
    gres: str = Field(default="gpu", pattern=SLURM_NAME_PATTERN, description="the GRES name of a GPU (--gres=<gres>:N)")
    constraint: str | None = Field(default=None, pattern=SLURM_CONSTRAINT_PATTERN, description="node features, `a&b`")
    time_limit: str | None = Field(default=None, description="the longest a job may ask for (Slurm's time format, e.g. 4:00:00)")
    time_margin: float = Field(default=1.5, ge=1.0, le=10.0, description="a job's limit is its estimate times this")
    min_time_s: Int = Field(default=600, ge=60, description="no job asks for less: server start-up and model load are in every job")
    cpus_per_gpu: Int | None = Field(default=None, ge=1, le=256)
    max_submissions: Int = Field(default=3, ge=1, le=20, description="submissions of one job's work after node failures, preemptions, time-outs")
    node_local_dir: NodeLocalDir | None = Field(
        default="$TMPDIR/fleet-models",
        description="each node's fast local storage: models are copied there from shared_dir once per node and boot, and "
        "servers load them from there; `$TMPDIR` expands on the node (else /tmp); null: servers read shared_dir",
    )

    @field_validator("time_limit")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None:
            parse_slurm_time(value)  # raises ValueError naming the formats
        return value

    @property
    def time_limit_s(self) -> int | None:
        return None if self.time_limit is None else parse_slurm_time(self.time_limit)


class Target(Protocol):
    """Where a plan puts servers, as planning, launch, fixes and shards see it: a host of the
    inventory (`Host`), or one node of a Slurm cluster (`fleet.slurm.sweep.SlurmNode`), which is
    no host of the inventory and is not dressed up as one."""

    @property
    def name(self) -> str: ...
    @property
    def gpus(self) -> GpuSpec: ...
    @property
    def paths(self) -> HostPaths: ...
    @property
    def engine(self) -> EngineSpec: ...
    @property
    def service_manager(self) -> ServiceManager: ...
    @property
    def source_file(self) -> Path: ...


class Host(StrictModel):
    name: Name
    kind: HostKind = HostKind.host
    slurm: SlurmSpec | None = Field(default=None, description="kind slurm only: the cluster's partition, account, ...")
    transport: TransportKind = TransportKind.ssh
    # Each of these lands on ssh's command line: a leading `-` would be read as an option.
    address: HostAddress | None = None
    ssh_alias: SshAlias | None = Field(default=None, description="a Host entry of ~/.ssh/config (ProxyJump works)")
    port: Int = Field(default=22, ge=1, le=65535)
    user: UserName | None = None
    identity_file: LocalPath | None = None
    host_key_policy: HostKeyPolicy = HostKeyPolicy.verify
    known_hosts: LocalPath | None = None
    gpus: GpuSpec = GpuSpec(count=0)
    paths: HostPaths = HostPaths()
    engine: EngineSpec = EngineSpec()
    service_manager: ServiceManager = ServiceManager.systemd
    groups: tuple[Name, ...] = ()
    usd_per_gpu_hour: Annotated[float, Strict()] | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="what one of its GPUs costs per hour, in dollars: the report's $ per million tokens (none: not priced)",
    )
    _source: Path | None = PrivateAttr(default=None)  # the host file, for messages about it

    @property
    def source_file(self) -> Path:
        """The file the host was loaded from (hosts/<name>.yaml when built in code)."""
        return self._source or Path("hosts") / f"{self.name}.yaml"

    @model_validator(mode="after")
    def _reachable(self) -> Host:
        if self.transport is TransportKind.ssh and not (self.address or self.ssh_alias):
            raise ValueError("`address` or `ssh_alias` for an ssh host")
        if self.address and self.ssh_alias:
            raise ValueError("either `address` or `ssh_alias`, not both")
        if (self.kind is HostKind.slurm) != (self.slurm is not None):
            raise ValueError("a `slurm:` section exactly when `kind: slurm` (the login host of a Slurm cluster)")
        return self

    @property
    def ssh_target_name(self) -> str:
        return self.ssh_alias or self.address or "localhost"


class Inventory:
    """All hosts of a directory, and the `--hosts` selection language (names, groups, `all`)."""

    def __init__(self, hosts: Iterable[Host], source: Path | None = None) -> None:
        self.source = source
        self.hosts: dict[str, Host] = {}
        for host in hosts:
            self.hosts[host.name] = host

    def __iter__(self):
        return iter(self.hosts.values())

    def __len__(self) -> int:
        return len(self.hosts)

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for host in self.hosts.values():
            for group in host.groups:
                out.setdefault(group, []).append(host.name)
        return out

    def select(self, spec: str | Sequence[str]) -> list[Host]:
        """`ct200,ct201`, `blackwell` (a group), `all`; order kept, duplicates dropped."""
        words = [w for part in ([spec] if isinstance(spec, str) else spec) for w in part.split(",")]
        words = [w.strip() for w in words if w.strip()]
        if not words:
            raise HostSelectionError("no hosts given: name hosts, groups or `all`")
        groups = self.groups()
        chosen: dict[str, Host] = {}
        for word in words:
            if word == "all":
                names = list(self.hosts)
            elif word in self.hosts:
                names = [word]
            elif word in groups:
                names = groups[word]
            else:
                known = ", ".join(sorted(self.hosts)) or "(none)"
                group_list = ", ".join(sorted(groups)) or "(none)"
                where = f" in {self.source}" if self.source else ""
                raise HostSelectionError(f"unknown host or group {word!r}{where}; hosts: {known}; groups: {group_list}; or `all`")
            for name in names:
                chosen.setdefault(name, self.hosts[name])
        return list(chosen.values())


def load_host(path: Path) -> Host:
    host = load_model_file(path, Host)
    if host.name != path.name.split(".")[0]:
        raise ConfigError(path, "name", f"the file name without extension ({path.name.split('.')[0]!r})", host.name)
    host._source = path
    return host


def load_host_record(path: Path) -> Host:
    """A host as a sweep recorded it (results/<sweep>/hosts/<name>.json, the host file's model as
    JSON): read and validated as a host file is, so a damaged record is a ConfigError naming it."""
    data = read_input_file(path, "a sweep's record of a host (JSON)")
    try:
        parsed = json.loads(data)
    except RecursionError:
        raise ConfigError(path, "", "a host record (JSON)", "nested too deep") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise ConfigError(path, "", "a host record (JSON)", str(exc)[:120]) from None
    host = validate_model(path, parsed, Host)
    if host.name != path.name.removesuffix(".json"):
        raise ConfigError(path, "name", f"the file name without .json ({path.name.removesuffix('.json')!r})", host.name)
    return host


def host_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.y*ml") if p.suffix in (".yaml", ".yml") and ".example." not in p.name)


def load_inventory(directory: Path) -> Inventory:
    if not directory.is_dir():
        raise ConfigError(directory, "", "a directory of host files (hosts/*.yaml)", "no such directory")
    hosts = [load_host(path) for path in host_files(directory)]
    seen: dict[str, Path] = {}
    for host in hosts:
        if host.name in seen:  # ct200.yaml and ct200.yml: neither may silently win
            raise ConfigError(host.source_file, "name", f"one host file per host (also defined in {seen[host.name]})", host.name)
        seen[host.name] = host.source_file
    clash = _group_name_clashes(hosts)
    if clash:
        raise ConfigError(directory, "groups", "group names distinct from host names", clash)
    return Inventory(hosts, source=directory)


def check_distinct_machines(hosts: Sequence[Host]) -> None:
    """Refuse two of `hosts` (the ones a command is to work on) that are one machine and work dir:
    they would run two agents over one sweep folder and count its GPUs twice. A Slurm entry names
    a cluster, of which several partitions may each have one."""
    machines: dict[tuple[object, ...], Host] = {}
    for host in hosts:
        if host.kind is HostKind.slurm:
            continue
        key = _machine(host)
        if key in machines:
            first = machines[key]
            raise ConfigError(
                host.source_file, "address", f"one host file per machine and work_dir (also {first.source_file}, host {first.name})",
                f"{host.ssh_target_name}, port {host.port}, user {host.user or '(default)'}, work_dir {host.paths.work_dir}",
            )  # fmt: skip
        machines[key] = host


def _machine(host: Host) -> tuple[object, ...]:
    """What a host file says of where fleet works: the same for two files that reach one machine
    the same way (host names are case-insensitive) and keep one work dir there."""
    if host.transport is TransportKind.local:
        return ("local", host.paths.work_dir)
    return ("ssh", host.ssh_target_name.lower(), host.port, host.user, host.paths.work_dir)


def _group_name_clashes(hosts: Sequence[Host]) -> str | None:
    names = {h.name for h in hosts}
    for host in hosts:
        for group in host.groups:
            if group in names or group == "all":
                return group
    return None


def slugify(text: str) -> str:
    """A file-system and unit-name safe form of a model repo or other label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "--", text).strip("-")
