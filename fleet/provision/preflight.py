"""Preflight checks: is this host fit to run a sweep? Rules kept as data, judged on gathered facts.

Each rule is a record (id, description, check). A check is a pure function of the host's facts
and the sweep's needs, returning a verdict (ok / warn / fail / skip), a message with the figures
it compared, and a fix hint. The figures it compares against are data too: which CUDA each GPU
architecture needs, and NVIDIA's table of minimum drivers per CUDA toolkit. A `fail` stops the
sweep on that host before anything is launched; the report says why and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from pydantic import BaseModel, ConfigDict
from rich.table import Table
from rich.text import Text

from fleet.facts.gather import VLLM_ENGINE
from fleet.facts.models import EnginePython, Gpu, HostFacts, Version, version_tuple
from fleet.host.agent.tools import TOOLS, ToolFound, missing_tools
from fleet.host.engines import engine as engine_named
from fleet.host.nvidia_smi import plays_declared
from fleet.inventory import EngineKind, Host, ServiceManager

MODEL_CACHE_KEY = "model_cache"
STAGING_KEY = "staging"
WORK_DIR_KEY = "work_dir"
# Filesystems in RAM: what is written there is gone after a reboot.
VOLATILE_FSTYPES = frozenset({"tmpfs", "ramfs"})
MIB = 1024**2
GIB = 1024**3
# below this much spare room after a copy, warn: a model's size on the hub is not exact, and the
# cache disk also holds logs, JIT caches and the next model
HEADROOM_FRACTION = 0.05
CACHE_HEADROOM_MIN_BYTES = 2 * GIB
# GPU memory in use beyond what the listed processes hold; an idle GPU shows a few MiB at most
UNLISTED_MEMORY_MIB = 1024


class Verdict(str, Enum):
    ok = "ok"
    warn = "warn"
    fail = "fail"
    skip = "skip"


# ---------------------------------------------------------------------------------------------
# Data: what each GPU architecture needs, and which driver each CUDA toolkit needs.


@dataclass(frozen=True)
class ArchRequirement:
    major: int
    minor: int | None  # None: every minor of `major`
    min_cuda: Version  # first CUDA that targets the arch: what torch must be built with
    min_toolkit: Version  # what nvcc must be for the engine's JIT builds (may be stricter)
    toolkit_reason: str
    toolkit_hint: str = ""

    def matches(self, capability: tuple[int, int]) -> bool:
        return capability[0] == self.major and self.minor in (None, capability[1])


ARCH_REQUIREMENTS: tuple[ArchRequirement, ...] = (
    ArchRequirement(
        12,
        None,
        (12, 8),
        (12, 9),
        "FlashInfer's JIT refuses SM 12.x below CUDA 12.9 (log: 'SM 12.x requires CUDA >= 12.9'), is left with no target arch, and its kernel builds then fail",
        "; or, to keep this toolkit, set FLASHINFER_CUDA_ARCH_LIST=12.0a in the engine's environment",
    ),
    ArchRequirement(10, None, (12, 8), (12, 8), "CUDA 12.8 is the first toolkit that targets SM 10.x"),
    ArchRequirement(9, 0, (11, 8), (11, 8), "CUDA 11.8 is the first toolkit that targets sm_90"),
    ArchRequirement(8, 9, (11, 8), (11, 8), "CUDA 11.8 is the first toolkit that targets sm_89"),
    ArchRequirement(8, 6, (11, 1), (11, 1), "CUDA 11.1 is the first toolkit that targets sm_86"),
    ArchRequirement(8, 0, (11, 0), (11, 0), "CUDA 11.0 is the first toolkit that targets sm_80"),
)

# NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions", Linux
# x86_64, GA releases: the driver each toolkit needs for full support.
TOOLKIT_MIN_DRIVER: dict[Version, str] = {
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
}
# NVIDIA "CUDA Compatibility", minor version compatibility: any toolkit of a major release runs
# (without PTX JIT of its newer PTX) on a driver at least this new.
MINOR_COMPAT_MIN_DRIVER: dict[int, str] = {12: "525.60.13", 13: "580.65.06"}

NVIDIA_SMI_FAILURE_HINTS: tuple[tuple[str, str], ...] = (
    ("version mismatch", "the NVIDIA kernel module and libraries differ (driver upgraded, not reloaded): reboot the host"),
    ("couldn't communicate with the nvidia driver", "the NVIDIA kernel driver is not loaded: check `lsmod | grep nvidia` and dmesg"),
    ("no devices were found", "no GPU is visible: check `lspci | grep -i nvidia`, dmesg for Xid errors, and the container's GPU access"),
    ("not found", "nvidia-smi is not installed, or not on PATH for non-interactive SSH sessions"),
)


def arch_requirement(capability: tuple[int, int]) -> ArchRequirement | None:
    return next((rule for rule in ARCH_REQUIREMENTS if rule.matches(capability)), None)


def driver_cuda_version(facts: HostFacts) -> Version | None:
    """The CUDA version the driver supports: nvidia-smi's header, else NVIDIA's table from the driver version."""
    driver = facts.driver
    if driver is None:
        return None
    if driver.cuda_version:
        return version_tuple(driver.cuda_version)
    if not driver.version:
        return None
    installed = version_tuple(driver.version)
    supported = [cuda for cuda, minimum in TOOLKIT_MIN_DRIVER.items() if installed >= version_tuple(minimum)]
    return max(supported) if supported else None


def torch_arch_support(arch_list: Sequence[str], capability: tuple[int, int]) -> str | None:
    """'native' (a cubin the GPU runs), 'ptx' (only PTX the driver must JIT), or None.

    A cubin for sm_XY runs on any GPU of the same major with minor >= Y; arch-specific ones
    (sm_90a, sm_100a) run only on exactly that arch. PTX runs on any newer arch.
    """
    major, minor = capability
    native = False
    ptx = False
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([af]?)", arch)
        if not match:
            continue
        kind, arch_major, arch_minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if kind == "sm" and arch_major == major and (arch_minor == minor if suffix else arch_minor <= minor):
            native = True
        elif kind == "compute" and not suffix and (arch_major, arch_minor) <= capability:
            ptx = True
    return "native" if native else ("ptx" if ptx else None)


# ---------------------------------------------------------------------------------------------
# What the sweep needs from the host.


@dataclass(frozen=True)
class PreflightRequirements:
    expected_gpu_count: int
    expected_gpu_model: str | None = None
    engine_kind: EngineKind = EngineKind.sglang
    service_manager: ServiceManager = ServiceManager.systemd
    model_bytes_to_fetch: int | None = None  # still to download into the cache; None: nothing to fetch
    bytes_to_stage: int | None = None  # to copy into the staging dir; None: no staging
    # bytes of the stale copies those replace, removed before the copy: room it has beyond df's
    cache_bytes_freed: int = 0
    staging_bytes_freed: int = 0
    own_gpu_pids: frozenset[int] = field(default_factory=frozenset)  # fleet's own servers
    host_file: str = "the host's inventory file"  # named in fix hints
    allow_volatile_work_dir: bool = False  # the host file's paths.allow_volatile_work_dir
    vllm: bool = False  # the host serves vLLM too (its host file's engine.vllm): its interpreter is checked as SGLang's is
    client_tools: tuple[ToolFound, ...] = ()  # the playbook's workloads measured by a tool, probed on the host

    def __post_init__(self) -> None:
        # accept the plain strings of a YAML file or a test as well as the enums
        object.__setattr__(self, "engine_kind", EngineKind(self.engine_kind))
        object.__setattr__(self, "service_manager", ServiceManager(self.service_manager))

    @classmethod
    def for_host(
        cls,
        host: Host,
        *,
        model_bytes_to_fetch: int | None = None,
        bytes_to_stage: int | None = None,
        cache_bytes_freed: int = 0,
        staging_bytes_freed: int = 0,
        own_gpu_pids: Iterable[int] = (),
        client_tools: Iterable[ToolFound] = (),
    ) -> PreflightRequirements:
        return cls(
            expected_gpu_count=host.gpus.count,
            expected_gpu_model=host.gpus.model,
            engine_kind=host.engine.kind,
            service_manager=host.service_manager,
            model_bytes_to_fetch=model_bytes_to_fetch,
            bytes_to_stage=bytes_to_stage,
            cache_bytes_freed=cache_bytes_freed,
            staging_bytes_freed=staging_bytes_freed,
            own_gpu_pids=frozenset(own_gpu_pids),
            host_file=f"hosts/{host.name}.yaml",
            allow_volatile_work_dir=host.paths.allow_volatile_work_dir,
            vllm=host.engine.kind is EngineKind.sglang and host.engine.vllm is not None,
            client_tools=tuple(client_tools),
        )


@dataclass(frozen=True)
class Finding:
    verdict: Verdict
    message: str
    hint: str | None = None


Check = Callable[[HostFacts, PreflightRequirements], Finding]


@dataclass(frozen=True)
class Rule:
    id: str
    description: str
    check: Check


def _version_text(version: Version) -> str:
    return ".".join(str(part) for part in version)


def _size(num_bytes: int) -> str:
    return f"{num_bytes / GIB:.1f} GiB" if num_bytes >= GIB else f"{num_bytes / MIB:.1f} MiB"


def _capabilities(gpus: Sequence[Gpu]) -> dict[tuple[int, int], str]:
    """Distinct compute capabilities -> a GPU name that has it (for messages)."""
    found: dict[tuple[int, int], str] = {}
    for gpu in gpus:
        found.setdefault(gpu.capability, gpu.name)
    return found


def _cc_text(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def _worst(findings: Sequence[Finding]) -> Finding:
    order = [Verdict.fail, Verdict.warn, Verdict.ok, Verdict.skip]
    return min(findings, key=lambda f: order.index(f.verdict))


# ---------------------------------------------------------------------------------------------
# The checks.


def _nvidia_smi_hint(problem: str) -> str:
    lowered = problem.lower()
    return next((hint for needle, hint in NVIDIA_SMI_FAILURE_HINTS if needle in lowered), "run nvidia-smi on the host and read its error")


def check_gpu_count(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    expected, found = needs.expected_gpu_count, len(facts.gpus)
    problem = facts.problems.get("gpus")
    if problem and not facts.gpus:
        if expected == 0:
            return Finding(Verdict.ok, "no GPUs expected, none readable")
        if needs.engine_kind is EngineKind.sim and "not found" in problem:
            # A rehearsal host without GPUs: the simulator plays the inventory's GPUs itself.
            return Finding(Verdict.skip, f"no nvidia-smi: the sim engine simulates the {expected} GPUs")
        return Finding(Verdict.fail, f"expected {expected} GPUs, but nvidia-smi failed: {problem}", _nvidia_smi_hint(problem))
    if found == expected:
        return Finding(Verdict.ok, f"{found} GPUs, as the inventory expects")
    if found < expected:
        return Finding(
            Verdict.fail,
            f"nvidia-smi lists {found} GPUs, the inventory expects {expected}",
            f"a GPU may have fallen off the bus (dmesg: Xid 79; `nvidia-smi -L`), or gpus.count in {needs.host_file} is wrong",
        )
    return Finding(
        Verdict.warn,
        f"nvidia-smi lists {found} GPUs, the inventory expects {expected}: fleet will use only {expected}",
        f"set gpus.count: {found} in {needs.host_file} to use them all",
    )


def _normal_name(name: str) -> str:
    return " ".join(name.split()).casefold()


def check_gpu_model(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if needs.expected_gpu_model is None:
        return Finding(Verdict.skip, "the inventory names no GPU model")
    if not facts.gpus:
        return Finding(Verdict.skip, "no GPUs listed (see the GPU count check)")
    wrong = sorted({g.name for g in facts.gpus if _normal_name(g.name) != _normal_name(needs.expected_gpu_model)})
    if wrong:
        return Finding(
            Verdict.fail,
            f"expected {needs.expected_gpu_model!r}, found {', '.join(repr(n) for n in wrong)}",
            f"check that this is the intended host, or set gpus.model in {needs.host_file} to the name nvidia-smi prints",
        )
    return Finding(Verdict.ok, f"all {len(facts.gpus)} GPUs are {needs.expected_gpu_model}")


def check_gpus_idle(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if not facts.gpus:
        return Finding(Verdict.skip, "no GPUs listed")
    problem = facts.problems.get("gpu_processes")
    if problem:
        return Finding(Verdict.warn, f"could not list GPU processes: {problem}", "run nvidia-smi on the host and read its error")
    index_of = {g.uuid: g.index for g in facts.gpus}
    foreign = [p for p in facts.gpu_processes if p.pid not in needs.own_gpu_pids]
    if foreign:
        listed = "; ".join(
            f"pid {p.pid} {p.process_name} on GPU {index_of.get(p.gpu_uuid, p.gpu_uuid)} ({'memory unknown' if p.used_memory_mib is None else f'{p.used_memory_mib} MiB'})" for p in foreign
        )
        return Finding(
            Verdict.fail,
            f"{len(foreign)} foreign process(es) hold GPU memory: {listed}",
            "stop them or choose another host; stale fleet servers are cleared by `fleet provision`",
        )
    unlisted = []
    for gpu in facts.gpus:
        held = [p.used_memory_mib for p in facts.gpu_processes if p.gpu_uuid == gpu.uuid]
        if gpu.memory_used_mib is None or None in held:
            continue
        extra = gpu.memory_used_mib - sum(m for m in held if m is not None)
        if extra > UNLISTED_MEMORY_MIB:
            unlisted.append(f"GPU {gpu.index}: {extra} MiB")
    if unlisted:
        return Finding(
            Verdict.warn,
            "memory in use that no listed process holds (" + ", ".join(unlisted) + "): processes of other containers or PID namespaces are invisible to nvidia-smi",
            "find the owner on the machine that runs the container(s), or choose another host",
        )
    own = len(facts.gpu_processes)
    return Finding(Verdict.ok, f"only fleet's own servers ({own} processes) on the GPUs" if own else "no processes on the GPUs")


def check_toolkit_supports_gpu(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    capabilities = _capabilities(facts.gpus)
    if not capabilities:
        return Finding(Verdict.skip, "no GPUs listed")
    findings = []
    for capability, gpu_name in sorted(capabilities.items()):
        need = arch_requirement(capability)
        if need is None:
            findings.append(Finding(Verdict.skip, f"no toolkit rule for compute capability {_cc_text(capability)}"))
            continue
        wanted = _version_text(need.min_toolkit)
        install = f"install CUDA toolkit >= {wanted} and make it the one the engine finds (CUDA_HOME, else the first nvcc on PATH, else /usr/local/cuda){need.toolkit_hint}"
        toolkit = facts.toolkit
        if toolkit is None:
            why = facts.problems.get("toolkit", "no nvcc in CUDA_HOME, on PATH or in /usr/local/cuda")
            findings.append(Finding(Verdict.warn, f"{why}: kernels the engine compiles at run time (JIT) cannot be built; prebuilt ones still run", install))
        elif version_tuple(toolkit.version) < need.min_toolkit:
            findings.append(
                Finding(
                    Verdict.fail,
                    f"nvcc {toolkit.nvcc_path} is CUDA {toolkit.version} ({toolkit.build}); compute capability {_cc_text(capability)} ({gpu_name}) needs >= {wanted}: {need.toolkit_reason}",
                    install,
                )
            )
        else:
            findings.append(Finding(Verdict.ok, f"CUDA {toolkit.version} ({toolkit.nvcc_path}) >= {wanted} for compute capability {_cc_text(capability)}"))
    return _worst(findings)


def check_driver_supports_toolkit(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    toolkit = facts.toolkit
    if toolkit is None:
        return Finding(Verdict.skip, "no CUDA toolkit")
    toolkit_version = version_tuple(toolkit.version)[:2]
    driver_cuda = driver_cuda_version(facts)
    if driver_cuda is None:
        return Finding(Verdict.warn, "the driver's CUDA version is unknown (nvidia-smi did not report it)", "run nvidia-smi on the host")
    driver_version = facts.driver.version if facts.driver else None
    minimum = TOOLKIT_MIN_DRIVER.get(toolkit_version)
    upgrade = (
        f"upgrade the NVIDIA driver to >= {minimum} (NVIDIA's minimum for CUDA {toolkit.version})"
        if minimum
        else (f"upgrade the NVIDIA driver to one whose nvidia-smi shows CUDA Version >= {toolkit.version}")
    )
    have = f"driver {driver_version or '?'} supports CUDA {_version_text(driver_cuda)}"
    if driver_cuda >= toolkit_version:
        return Finding(Verdict.ok, f"{have} >= toolkit {toolkit.version}")
    compat_floor = MINOR_COMPAT_MIN_DRIVER.get(toolkit_version[0])
    if driver_cuda[0] == toolkit_version[0] and compat_floor and driver_version and version_tuple(driver_version) >= version_tuple(compat_floor):
        return Finding(
            Verdict.warn,
            f"{have} < toolkit {toolkit.version}: it runs under CUDA minor-version compatibility (driver >= {compat_floor}), but PTX built by this toolkit cannot be JIT-loaded by the driver",
            upgrade,
        )
    return Finding(Verdict.fail, f"{have} < toolkit {toolkit.version}: code built by this toolkit will not load", upgrade)


def _engine_uses_torch(needs: PreflightRequirements) -> bool:
    return needs.engine_kind is EngineKind.sglang


def check_engine_installed(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if not _engine_uses_torch(needs):
        return Finding(Verdict.skip, f"engine {needs.engine_kind.value} needs no Python packages")
    return _installed(facts.engine, facts.request.engine_python, facts.problems.get("engine"), engine_named().name, "engine.python", needs)


def _vllm_interpreter(facts: HostFacts) -> tuple[EnginePython | None, str, str | None]:
    """The probe of the interpreter vLLM runs in, that interpreter and why it is missing: its own
    (engine.vllm.python) where the host file names another one, else the engine's."""
    if facts.request.vllm_python not in (None, facts.request.engine_python):
        return facts.vllm_engine, str(facts.request.vllm_python), facts.problems.get(VLLM_ENGINE)
    return facts.engine, facts.request.engine_python, facts.problems.get("engine")


def check_vllm_installed(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if not needs.vllm:
        return Finding(Verdict.skip, "the host file names no vLLM (engine.vllm)")
    engine, python, problem = _vllm_interpreter(facts)
    return _installed(engine, python, problem, "vllm", "engine.vllm.python", needs)


def _installed(engine: EnginePython | None, python: str, problem: str | None, package: str, setting: str, needs: PreflightRequirements) -> Finding:
    """Whether the interpreter `setting` names has `package`, with its version (and flashinfer's)."""
    if engine is None:
        return Finding(
            Verdict.fail,
            f"{python}: {problem or 'the interpreter was not probed'}",
            f"set {setting} in {needs.host_file} to the interpreter that has {package} installed",
        )
    version = engine.package_version(package)
    if version is None:
        return Finding(
            Verdict.fail,
            f"{engine.executable} (Python {engine.python_version}) has no {package}",
            f"install {package} into it, or set {setting} in {needs.host_file} to the interpreter that has it",
        )
    extras = f", flashinfer {engine.flashinfer_version}" if engine.flashinfer_version else ", no flashinfer"
    return Finding(Verdict.ok, f"{package} {version}{extras} in {engine.executable} (Python {engine.python_version})")


def check_client_tools_installed(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    """A workload's client tool runs in the interpreter it names (or the engine's): fleet installs
    nothing there, so one that cannot import the tool would fail every run of the workload."""
    if not needs.client_tools:
        return Finding(Verdict.skip, "no workload names a client tool")
    what = missing_tools(needs.client_tools)
    if what is not None:
        return Finding(
            Verdict.fail,
            what,
            f"install the tool into that interpreter on the host, or name one that has it in the workload's `client.python` (fleet installs nothing; {needs.host_file} names the engine's)",
        )
    return Finding(Verdict.ok, "; ".join(sorted({f"{TOOLS[p.tool].title} in {p.python}" for p in needs.client_tools})))


def check_engine_cuda_supports_gpu(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if not _engine_uses_torch(needs):
        return Finding(Verdict.skip, f"engine {needs.engine_kind.value} does not use torch")
    return _torch_supports_gpus(facts.engine, facts)


def check_vllm_cuda_supports_gpu(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if not needs.vllm:
        return Finding(Verdict.skip, "the host file names no vLLM (engine.vllm)")
    return _torch_supports_gpus(_vllm_interpreter(facts)[0], facts)


def _torch_supports_gpus(engine: EnginePython | None, facts: HostFacts) -> Finding:
    """Whether the interpreter's torch is a CUDA build with kernels for every GPU of the host."""
    if engine is None:
        return Finding(Verdict.skip, "the engine's Python was not probed (see engine-installed)")
    if engine.torch_version is None:
        return Finding(
            Verdict.fail,
            f"torch cannot be imported by {engine.executable}: {engine.torch_error or 'not installed'}",
            "install the engine's dependencies (torch with CUDA) into that interpreter",
        )
    if engine.torch_cuda is None:
        return Finding(Verdict.fail, f"torch {engine.torch_version} is a CPU-only build", "install a CUDA build of torch (cu128 or newer wheels)")
    capabilities = _capabilities(facts.gpus)
    if not capabilities:
        return Finding(Verdict.skip, f"torch {engine.torch_version} (CUDA {engine.torch_cuda}); no GPUs listed")
    findings = []
    for capability, gpu_name in sorted(capabilities.items()):
        need = arch_requirement(capability)
        if need and version_tuple(engine.torch_cuda) < need.min_cuda:
            wanted = _version_text(need.min_cuda)
            findings.append(
                Finding(
                    Verdict.fail,
                    f"torch {engine.torch_version} is built for CUDA {engine.torch_cuda}; {_sm(capability)} ({gpu_name}) needs CUDA >= {wanted}",
                    f"install torch built for CUDA >= {wanted} (e.g. the cu{wanted.replace('.', '')} wheels or newer)",
                )
            )
            continue
        if engine.torch_arch_list is None:
            findings.append(Finding(Verdict.ok, f"torch {engine.torch_version} (CUDA {engine.torch_cuda}); its arch list is unknown"))
            continue
        support = torch_arch_support(engine.torch_arch_list, capability)
        archs = " ".join(engine.torch_arch_list)
        if support == "native":
            findings.append(Finding(Verdict.ok, f"torch {engine.torch_version} (CUDA {engine.torch_cuda}) has kernels for {_sm(capability)}"))
        elif support == "ptx":
            findings.append(
                Finding(
                    Verdict.warn,
                    f"torch {engine.torch_version} has only PTX for {_sm(capability)} ({archs}): the driver JIT-compiles every kernel at first use (slow start)",
                    f"install a torch build whose arch list includes {_sm(capability)}",
                )
            )
        else:
            findings.append(
                Finding(
                    Verdict.fail,
                    f"torch {engine.torch_version} is compiled for {archs}, not {_sm(capability)} ({gpu_name}): kernels fail with 'no kernel image is available for execution on the device'",
                    f"install a torch build whose arch list includes {_sm(capability)}",
                )
            )
    return _worst(findings)


def check_driver_runs_engine_cuda(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if not _engine_uses_torch(needs) or facts.engine is None or facts.engine.torch_cuda is None:
        return Finding(Verdict.skip, "no CUDA build of torch to check (see the engine checks)")
    torch_cuda = version_tuple(facts.engine.torch_cuda)[:2]
    driver_cuda = driver_cuda_version(facts)
    if driver_cuda is None:
        return Finding(Verdict.warn, "the driver's CUDA version is unknown (nvidia-smi did not report it)", "run nvidia-smi on the host")
    have = f"driver supports CUDA {_version_text(driver_cuda)}"
    if driver_cuda >= torch_cuda:
        return Finding(Verdict.ok, f"{have} >= torch's CUDA {facts.engine.torch_cuda}")
    if driver_cuda[0] == torch_cuda[0]:
        return Finding(Verdict.ok, f"{have}, torch's is {facts.engine.torch_cuda}: same major release, minor-version compatibility")
    floor = MINOR_COMPAT_MIN_DRIVER.get(torch_cuda[0])
    return Finding(
        Verdict.fail,
        f"{have}; torch is built for CUDA {facts.engine.torch_cuda}, which needs a CUDA {torch_cuda[0]}.x driver"
        + (f" (>= {floor})" if floor else "")
        + ": CUDA initialisation fails ('driver is too old')",
        f"upgrade the NVIDIA driver, or install torch built for CUDA {driver_cuda[0]}.x",
    )


def check_model_cache_space(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if needs.model_bytes_to_fetch is None:
        return Finding(Verdict.skip, "nothing to download")
    return _space_finding(
        facts,
        MODEL_CACHE_KEY,
        needs.model_bytes_to_fetch,
        needs.cache_bytes_freed,
        "download",
        CACHE_HEADROOM_MIN_BYTES,
        f"free space there, or point paths.model_cache in {needs.host_file} at a larger disk",
    )


def check_staging_space(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if needs.bytes_to_stage is None:
        return Finding(Verdict.skip, "nothing to stage")
    found = _space_finding(
        facts, STAGING_KEY, needs.bytes_to_stage, needs.staging_bytes_freed, "stage", 0, "enlarge the tmpfs (`mount -o remount,size=<N>G /dev/shm`), or unset paths.staging to serve from the cache"
    )
    if found.verdict is Verdict.fail:
        return found
    if facts.memory and needs.bytes_to_stage > facts.memory.available_bytes + needs.staging_bytes_freed:
        return Finding(
            Verdict.fail,
            f"staging {_size(needs.bytes_to_stage)} needs that much RAM (tmpfs lives in memory), only {_size(facts.memory.available_bytes)} available of {_size(facts.memory.total_bytes)}",
            "unset paths.staging to serve from the cache, or free memory",
        )
    disk = facts.disks[STAGING_KEY]
    if disk.fstype is not None and disk.fstype != "tmpfs":
        return Finding(
            Verdict.warn,
            f"{found.message}; but {disk.measured_path} is on {disk.fstype}, not tmpfs: staging gains no speed",
            "point paths.staging at a tmpfs such as /dev/shm/fleet",
        )
    return found


def _space_finding(facts: HostFacts, key: str, needed: int, freed: int, verb: str, min_headroom: int, hint: str) -> Finding:
    """`freed`: bytes of the stale copies the copy replaces (removed first): room beyond df's figure."""
    disk = facts.disks.get(key)
    if disk is None:
        why = facts.problems.get("disks", f"paths.{key} is not configured")
        return Finding(Verdict.fail, f"cannot {verb} {_size(needed)}: free space of paths.{key} unknown ({why})", hint)
    where = f"{disk.path} (on {disk.mount_point})"
    headroom = max(min_headroom, int(needed * HEADROOM_FRACTION))
    room = disk.available_bytes + freed
    figures = f"{_size(disk.available_bytes)} free of {_size(disk.total_bytes)}" + (f", {_size(freed)} more once the stale copy is removed" if freed else "")
    if room < needed:
        return Finding(Verdict.fail, f"{verb} {_size(needed)} into {where}: only {figures}", hint)
    if room < needed + headroom:
        return Finding(Verdict.warn, f"{verb} {_size(needed)} into {where} leaves under {_size(headroom)} ({figures})", hint)
    return Finding(Verdict.ok, f"{verb} {_size(needed)} into {where}: {figures}")


def check_work_dir_persistent(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    disk = facts.disks.get(WORK_DIR_KEY)
    if disk is None or disk.fstype is None:
        return Finding(Verdict.skip, f"the filesystem of paths.work_dir was not measured ({facts.problems.get('disks', 'df did not say')})")
    if disk.fstype not in VOLATILE_FSTYPES:
        return Finding(Verdict.ok, f"{disk.path} is on {disk.fstype} ({disk.mount_point})")
    consequence = f"{disk.path} is on {disk.fstype} ({disk.mount_point}), in RAM: a reboot erases the results of finished runs there, and the sweep runs them again"
    if needs.allow_volatile_work_dir:
        return Finding(Verdict.warn, f"{consequence} (allowed by paths.allow_volatile_work_dir)", f"point paths.work_dir in {needs.host_file} at a persistent disk (e.g. /var/lib/fleet)")
    return Finding(
        Verdict.fail,
        consequence,
        f"point paths.work_dir in {needs.host_file} at a persistent disk (e.g. /var/lib/fleet), or set paths.allow_volatile_work_dir: true there to accept this",
    )


def check_service_manager(facts: HostFacts, needs: PreflightRequirements) -> Finding:
    if needs.service_manager is ServiceManager.process:
        return Finding(Verdict.ok, "process service manager (setsid, pid files): needs no systemd")
    systemd = facts.systemd
    if systemd is not None and systemd.usable:
        return Finding(Verdict.ok, f"systemd is {systemd.state}")
    if systemd is None:
        state = facts.problems.get("systemd", "unknown")
    elif systemd.state is None:
        state = "systemctl is not installed"
    else:
        state = f"systemctl says {systemd.state!r}" + ("" if systemd.booted else ", and systemd is not PID 1")
    return Finding(
        Verdict.fail,
        f"the inventory asks for systemd units, but systemd is not running ({state})",
        f"set service_manager: process in {needs.host_file}",
    )


RULES: tuple[Rule, ...] = (
    Rule("gpu-count", "the GPU count the inventory expects", check_gpu_count),
    Rule("gpu-model", "the GPU model the inventory expects", check_gpu_model),
    Rule("gpus-idle", "no foreign processes hold GPU memory", check_gpus_idle),
    Rule("toolkit-supports-gpu", "the CUDA toolkit (nvcc) can build for the GPU's compute capability", check_toolkit_supports_gpu),
    Rule("driver-supports-toolkit", "the driver is new enough for the CUDA toolkit", check_driver_supports_toolkit),
    Rule("engine-installed", "the engine's Python has the engine", check_engine_installed),
    Rule("engine-cuda-supports-gpu", "the engine's torch is a CUDA build that supports the GPU", check_engine_cuda_supports_gpu),
    Rule("vllm-installed", "vLLM's Python has vLLM (a host file with engine.vllm)", check_vllm_installed),
    Rule("client-tools-installed", "the interpreter of each workload's client tool can import it", check_client_tools_installed),
    Rule("vllm-cuda-supports-gpu", "vLLM's torch is a CUDA build that supports the GPU", check_vllm_cuda_supports_gpu),
    Rule("driver-runs-engine-cuda", "the driver can run the engine's torch CUDA", check_driver_runs_engine_cuda),
    Rule("model-cache-space", "enough disk in the model cache for the download", check_model_cache_space),
    Rule("staging-space", "enough tmpfs (and RAM) to stage the model", check_staging_space),
    Rule("work-dir-persistent", "paths.work_dir survives a reboot (not on tmpfs)", check_work_dir_persistent),
    Rule("service-manager", "the configured service manager works on the host", check_service_manager),
)


# ---------------------------------------------------------------------------------------------
# Running the rules, and the report.


class CheckResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str
    description: str
    verdict: Verdict
    message: str
    hint: str | None = None


class PreflightReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: str | None = None
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict is Verdict.fail]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict is Verdict.warn]

    def summary(self) -> str:
        """One paragraph: why the host cannot run a sweep (or that it can)."""
        name = self.host or "host"
        if self.ok:
            return f"{name}: preflight passed" + (f" with {len(self.warnings)} warning(s)" if self.warnings else "")
        reasons = "; ".join(f"{c.rule_id}: {c.message}" + (f" (fix: {c.hint})" if c.hint else "") for c in self.failures)
        return f"{name}: preflight failed: {reasons}"


# The rules about the machine's GPUs and the CUDA stack that drives them: none of it is used by a
# sim host that plays the GPUs its host file declares on a machine that has others.
GPU_RULES = frozenset({"gpu-count", "gpu-model", "gpus-idle", "toolkit-supports-gpu", "driver-supports-toolkit", "engine-cuda-supports-gpu", "vllm-cuda-supports-gpu", "driver-runs-engine-cuda"})


def played_gpus(facts: HostFacts, needs: PreflightRequirements) -> str | None:
    """Why the GPU rules do not apply: a sim host whose machine has GPUs, none of the declared
    model (a real H200 under `hosts/local.yaml`'s RTX PRO 6000s) -- the simulator plays the
    declared ones (fleet.host.nvidia_smi.plays_declared). None where they apply (a machine of the
    declared model, real or a test host's fake; no GPUs at all is the count rule's to say)."""
    if needs.engine_kind is not EngineKind.sim or not facts.gpus or not plays_declared(needs.expected_gpu_model, [g.name for g in facts.gpus]):
        return None
    found = ", ".join(sorted({g.name for g in facts.gpus}))
    return f"the sim engine plays the {needs.expected_gpu_count} {needs.expected_gpu_model} its host file declares; this machine's {len(facts.gpus)} GPU(s) ({found}) are not used"


def run_preflight(facts: HostFacts, requirements: PreflightRequirements, host: str | None = None, rules: Sequence[Rule] = RULES) -> PreflightReport:
    played = played_gpus(facts, requirements)
    checks = []
    for rule in rules:
        finding = Finding(Verdict.skip, played) if played and rule.id in GPU_RULES else rule.check(facts, requirements)
        checks.append(
            CheckResult(rule_id=rule.id, description=rule.description, verdict=finding.verdict, message=finding.message, hint=finding.hint if finding.verdict in (Verdict.fail, Verdict.warn) else None)
        )
    return PreflightReport(host=host, checks=checks)


VERDICT_STYLES = {Verdict.ok: "green", Verdict.warn: "yellow", Verdict.fail: "bold red", Verdict.skip: "dim"}


def preflight_table(report: PreflightReport) -> Table:
    """A rich table: one row per check, verdict coloured, with the fix for what is not ok."""
    title = f"preflight {report.host}: " if report.host else "preflight: "
    title += "ok" if report.ok else f"{len(report.failures)} failed"
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("verdict", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("finding")
    table.add_column("fix")
    for check in report.checks:
        table.add_row(
            Text(check.verdict.value, style=VERDICT_STYLES[check.verdict]),
            check.rule_id,
            check.message,
            check.hint or "",
        )
    return table
