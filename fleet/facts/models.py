"""What fleet knows about a host: pydantic models that round-trip through JSON (cache, `--json`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

Version = tuple[int, ...]


def version_tuple(text: str) -> Version:
    """'12.8' -> (12, 8); '580.159.04' -> (580, 159, 4). Non-numeric parts end the tuple."""
    parts: list[int] = []
    for piece in text.strip().split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    if not parts:
        raise ValueError(f"not a dotted version: {text!r}")
    return tuple(parts)


class FactModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gpu(FactModel):
    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str = Field(description="as nvidia-smi prints it, e.g. '12.0'")
    memory_total_mib: int | None = Field(description="None where nvidia-smi prints [N/A] (unified-memory parts)")
    memory_used_mib: int | None = None
    memory_free_mib: int | None = None
    driver_version: str

    @property
    def capability(self) -> tuple[int, int]:
        major, minor = version_tuple(self.compute_capability)[:2]
        return major, minor


class GpuProcess(FactModel):
    pid: int
    process_name: str
    used_memory_mib: int | None = Field(description="None where nvidia-smi prints [N/A] (containers, MIG)")
    gpu_uuid: str


class Driver(FactModel):
    version: str | None = Field(description="from nvidia-smi")
    cuda_version: str | None = Field(description="the highest CUDA the driver supports: nvidia-smi's 'CUDA Version'")
    kernel_module: str | None = Field(default=None, description="the NVRM line of /proc/driver/nvidia/version")


class CudaToolkit(FactModel):
    version: str = Field(description="'12.8'")
    build: str = Field(description="'V12.8.93'")
    nvcc_path: str


class EnginePython(FactModel):
    executable: str
    python_version: str
    torch_version: str | None = None
    torch_cuda: str | None = Field(default=None, description="torch.version.cuda; None for a CPU build")
    torch_arch_list: list[str] | None = Field(default=None, description="compiled archs, e.g. sm_120; None when unknown")
    torch_error: str | None = Field(default=None, description="why torch could not be imported")
    triton_version: str | None = None
    flashinfer_version: str | None = None
    # The serving engines' packages (fleet.host.engines.ENGINE_NAMES), by the probe's field names:
    # one interpreter may have both.
    sglang_version: str | None = None
    vllm_version: str | None = None

    def package_version(self, engine: str) -> str | None:
        """The installed version of `engine`'s package (an ENGINE_NAMES name), None where it is absent."""
        return {"sglang": self.sglang_version, "vllm": self.vllm_version}.get(engine)


class DiskSpace(FactModel):
    path: str = Field(description="the configured path")
    measured_path: str = Field(description="the path df measured: the configured one or its nearest existing parent")
    filesystem: str
    fstype: str | None = None
    mount_point: str
    total_bytes: int
    used_bytes: int
    available_bytes: int


class Memory(FactModel):
    total_bytes: int
    available_bytes: int


class OperatingSystem(FactModel):
    id: str | None = None
    version_id: str | None = None
    pretty_name: str | None = None


class Kernel(FactModel):
    release: str
    machine: str
    hostname: str


# `systemctl is-system-running` states in which units can be started
SYSTEMD_USABLE_STATES = frozenset({"initializing", "starting", "running", "degraded"})


class Systemd(FactModel):
    booted: bool = Field(description="/run/systemd/system exists: systemd is PID 1")
    state: str | None = Field(description="`systemctl is-system-running` output; None when systemctl is missing")
    exit_code: int

    @property
    def usable(self) -> bool:
        return self.booted and self.state in SYSTEMD_USABLE_STATES


class FactsRequest(FactModel):
    """What the facts were gathered for; a cached entry answers only the same request."""

    paths: dict[str, str]
    engine_python: str
    vllm_python: str | None = None  # the host file's engine.vllm.python where it is another interpreter


class HostFacts(FactModel):
    request: FactsRequest
    gathered_at: datetime
    boot_id: str | None = None
    gpus: list[Gpu] = Field(default_factory=list)
    gpu_processes: list[GpuProcess] = Field(default_factory=list)
    driver: Driver | None = None
    toolkit: CudaToolkit | None = Field(default=None, description="None: no nvcc found")
    engine: EnginePython | None = None
    vllm_engine: EnginePython | None = Field(default=None, description="request.vllm_python's probe (vLLM in an interpreter of its own); None: none asked")
    disks: dict[str, DiskSpace] = Field(default_factory=dict, description="keyed like request.paths")
    staging_dir_bytes: int | None = Field(default=None, description="bytes in the staging dir; None if it does not exist")
    memory: Memory | None = None
    os: OperatingSystem | None = None
    kernel: Kernel | None = None
    systemd: Systemd | None = None
    problems: dict[str, str] = Field(default_factory=dict, description="fact name -> why it could not be read")
