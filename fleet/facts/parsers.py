"""Pure parsers: the captured output (stdout and stderr together) and exit code of one command -> a fact.

Each parser raises `FactError` when the command failed or printed something it does not
understand, with the reason and the start of the output; "not installed" is a value (None),
not an error, where the fact allows it (nvcc, the staging dir, the NVIDIA proc file).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from fleet.facts.engine_probe import PROBE_MARK
from fleet.facts.models import (
    CudaToolkit,
    DiskSpace,
    Driver,
    EnginePython,
    Gpu,
    GpuProcess,
    Kernel,
    Memory,
    OperatingSystem,
    Systemd,
)
from fleet.host import nvidia_smi
from fleet.errors import FactError
from fleet.host.errors import NvidiaSmiError

# the exit code of `sh` when a command is not found
COMMAND_NOT_FOUND = 127

GPU_QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "compute_cap",
    "memory.total",
    "memory.used",
    "memory.free",
    "driver_version",
)

NVCC_PATH_LABEL = "nvcc-path:"
NVCC_ABSENT = "none"
SYSTEMD_BOOTED_LABEL = "systemd-booted:"
DF_SEPARATOR = "fleet-df:"
DIR_ABSENT = "absent"


def _require_success(fact: str, text: str, exit_code: int) -> None:
    if exit_code == COMMAND_NOT_FOUND:
        raise FactError(fact, "command not found", text)
    if exit_code != 0:
        raise FactError(fact, f"exited {exit_code}", text)


def _mib(fact: str, value: str) -> int | None:
    try:
        return nvidia_smi.mib(value)
    except NvidiaSmiError as exc:
        raise FactError(fact, f"expected a MiB figure, got {value!r}") from exc


def parse_gpus(text: str, exit_code: int = 0, fields: Sequence[str] = GPU_QUERY_FIELDS) -> list[Gpu]:
    """`nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`.

    With a header, columns are found by name (any order, extra columns ignored); without one
    they are `fields`. index, name, compute_cap, memory.total and driver_version are required.
    """
    _require_success("gpus", text, exit_code)
    try:
        rows = nvidia_smi.parse_csv(text, fields)
    except NvidiaSmiError as exc:
        raise FactError("gpus", exc.reason, exc.line) from exc
    gpus = []
    for cell in rows:
        missing = {"index", "name", "compute_cap", "memory.total", "driver_version"} - set(cell)
        if missing:
            raise FactError("gpus", f"query lacks the fields {sorted(missing)}")
        if not cell["index"].isdigit() or not re.fullmatch(r"\d+\.\d+", cell["compute_cap"]):
            raise FactError("gpus", "expected an integer index and a compute capability like 12.0", ", ".join(cell.values()))
        gpus.append(
            Gpu(
                index=int(cell["index"]),
                name=cell["name"],
                uuid=cell.get("uuid"),
                pci_bus_id=cell.get("pci.bus_id"),
                compute_capability=cell["compute_cap"],
                memory_total_mib=_mib("gpus", cell["memory.total"]),
                memory_used_mib=_mib("gpus", cell["memory.used"]) if "memory.used" in cell else None,
                memory_free_mib=_mib("gpus", cell["memory.free"]) if "memory.free" in cell else None,
                driver_version=cell["driver_version"],
            )
        )
    return gpus


def parse_gpu_processes(text: str, exit_code: int = 0) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv[,noheader][,nounits]`."""
    _require_success("gpu_processes", text, exit_code)
    try:
        apps = nvidia_smi.parse_compute_apps(text)
    except NvidiaSmiError as exc:
        raise FactError("gpu_processes", exc.reason, exc.line) from exc
    return [GpuProcess(pid=a.pid, process_name=a.process_name, used_memory_mib=a.used_memory_mib, gpu_uuid=a.gpu_uuid) for a in apps]


def parse_driver_header(text: str, exit_code: int = 0) -> Driver:
    """`nvidia-smi --version` (also the plain table and `-q`): the driver version and the CUDA version it supports."""
    _require_success("driver", text, exit_code)
    driver = re.search(r"Driver Version\s*:\s*(\d[\d.]*)", text, re.IGNORECASE)
    cuda = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", text, re.IGNORECASE)
    if not driver:
        raise FactError("driver", "no 'Driver Version' in nvidia-smi's output", text)
    return Driver(version=driver.group(1), cuda_version=cuda.group(1) if cuda else None)


def parse_kernel_module(text: str, exit_code: int = 0) -> str | None:
    """`cat /proc/driver/nvidia/version` -> its NVRM line; None when the file is absent (no driver loaded)."""
    if exit_code != 0:
        return None
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            return " ".join(line.removeprefix("NVRM version:").split())
    raise FactError("kernel_module", "no 'NVRM version:' line", text)


def parse_nvcc(text: str, exit_code: int = 0) -> CudaToolkit | None:
    """`nvcc-path: <path>` then `nvcc --version`; `nvcc-path: none` -> None (no toolkit)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(NVCC_PATH_LABEL):
        raise FactError("toolkit", f"expected a first line `{NVCC_PATH_LABEL} <path>`", text)
    path = lines[0].removeprefix(NVCC_PATH_LABEL).strip()
    if path == NVCC_ABSENT:
        return None
    _require_success("toolkit", text, exit_code)
    release = re.search(r"release (\d+\.\d+), (V[\w.]+)", text)
    if not release:
        raise FactError("toolkit", f"{path} --version printed no 'release X.Y, VX.Y.Z'", text)
    return CudaToolkit(version=release.group(1), build=release.group(2), nvcc_path=path)


def parse_engine_probe(text: str, exit_code: int = 0) -> EnginePython:
    """The JSON line of `engine_probe.py` (torch warnings on stderr may come before it)."""
    for line in reversed(text.splitlines()):
        if line.startswith(PROBE_MARK):
            try:
                return EnginePython.model_validate(json.loads(line.removeprefix(PROBE_MARK)))
            except ValueError as exc:
                raise FactError("engine", f"unreadable probe result: {exc}", line) from None
    if exit_code == COMMAND_NOT_FOUND:
        raise FactError("engine", "the engine's Python interpreter was not found", text)
    raise FactError("engine", f"the engine's Python printed no probe result (exit {exit_code})", text)


@dataclass(frozen=True)
class DfRow:
    filesystem: str
    fstype: str | None
    total_bytes: int
    used_bytes: int
    available_bytes: int
    mount_point: str


_DF_ROW = re.compile(r"^(?P<fs>\S+)\s+(?:(?P<type>\S+)\s+)?(?P<total>\d+)\s+(?P<used>\d+)\s+(?P<avail>\d+)\s+(?:\d+%|-)\s+(?P<mount>/.*)$")


def parse_df(text: str) -> list[DfRow]:
    """`df -P [-T] [-B1|-k] PATH...`: one row per operand, sizes scaled by the header's block size."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("Filesystem"):
        raise FactError("disks", "expected df's `Filesystem ...` header", text)
    header = lines[0].split()
    block = re.search(r"(\d+)-blocks", lines[0])
    if not block:
        raise FactError("disks", "expected an `N-blocks` column in df's header", lines[0])
    scale = int(block.group(1))
    has_type = len(header) > 1 and header[1] == "Type"
    rows = []
    for line in lines[1:]:
        match = _DF_ROW.match(line)
        if not match or (match.group("type") is not None) != has_type:
            raise FactError("disks", "unexpected df row", line)
        rows.append(
            DfRow(
                filesystem=match.group("fs"),
                fstype=match.group("type"),
                total_bytes=int(match.group("total")) * scale,
                used_bytes=int(match.group("used")) * scale,
                available_bytes=int(match.group("avail")) * scale,
                mount_point=match.group("mount"),
            )
        )
    return rows


def parse_disk_space(text: str, exit_code: int, requested: Mapping[str, str]) -> dict[str, DiskSpace]:
    """The measured path of each requested path (one a line), `fleet-df:`, then df's output for them."""
    _require_success("disks", text, exit_code)
    measured, separator, df_output = text.partition(DF_SEPARATOR + "\n")
    if not separator:
        raise FactError("disks", f"no `{DF_SEPARATOR}` line", text)
    measured_paths = measured.splitlines()
    rows = parse_df(df_output)
    if not len(measured_paths) == len(rows) == len(requested):
        raise FactError("disks", f"expected {len(requested)} paths and df rows, got {len(measured_paths)} and {len(rows)}", text)
    return {key: DiskSpace(path=path, measured_path=measured_path, **asdict(row)) for (key, path), measured_path, row in zip(requested.items(), measured_paths, rows)}


def parse_du_bytes(text: str, exit_code: int = 0) -> int | None:
    """`du -sk DIR` -> bytes; `absent` (the dir does not exist yet) -> None."""
    if text.strip() == DIR_ABSENT:
        return None
    _require_success("staging_dir", text, exit_code)
    first = text.split()
    if not first or not first[0].isdigit():
        raise FactError("staging_dir", "expected `<KiB><TAB><path>` from du -sk", text)
    return int(first[0]) * 1024


def parse_meminfo(text: str, exit_code: int = 0) -> Memory:
    """`/proc/meminfo` (kB figures)."""
    _require_success("memory", text, exit_code)
    kib = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)", line)
        if match:
            kib[match.group(1)] = int(match.group(2))
    if "MemTotal" not in kib:
        raise FactError("memory", "no MemTotal line", text)
    # kernels before 3.14 have no MemAvailable; free + page cache is the usual stand-in
    available = kib.get("MemAvailable", kib.get("MemFree", 0) + kib.get("Cached", 0))
    return Memory(total_bytes=kib["MemTotal"] * 1024, available_bytes=available * 1024)


def parse_os_release(text: str, exit_code: int = 0) -> OperatingSystem:
    """`/etc/os-release`: shell-style KEY=value lines."""
    _require_success("os", text, exit_code)
    values = {}
    for line in text.splitlines():
        key, equals, raw = line.partition("=")
        if equals and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
            try:
                words = shlex.split(raw)
            except ValueError:
                words = [raw]
            values[key] = " ".join(words)
    return OperatingSystem(id=values.get("ID"), version_id=values.get("VERSION_ID"), pretty_name=values.get("PRETTY_NAME"))


def parse_kernel(text: str, exit_code: int = 0) -> Kernel:
    """`uname -n -r -m`: one line, `nodename release machine` (uname's own order, whatever the flags' order)."""
    _require_success("kernel", text, exit_code)
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) != 1 or len(lines[0]) != 3:
        raise FactError("kernel", "expected one line: hostname, release, machine", text)
    hostname, release, machine = lines[0]
    return Kernel(release=release, machine=machine, hostname=hostname)


def parse_systemd(text: str, exit_code: int) -> Systemd:
    """`systemd-booted: yes|no`, then `systemctl is-system-running` (its exit code is `exit_code`).

    Exit codes are non-zero for every state but `running`, so the state comes from the text;
    127 or a "not found" message means there is no systemctl at all.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith(SYSTEMD_BOOTED_LABEL):
        raise FactError("systemd", f"expected a first line `{SYSTEMD_BOOTED_LABEL} yes|no`", text)
    booted = lines[0].removeprefix(SYSTEMD_BOOTED_LABEL).strip() == "yes"
    rest = lines[1:]
    if exit_code == COMMAND_NOT_FOUND or any(re.search(r"systemctl:.*not found", line) for line in rest):
        return Systemd(booted=booted, state=None, exit_code=exit_code)
    states = [line for line in rest if re.fullmatch(r"[a-z-]+", line)]
    if not states:
        raise FactError("systemd", "systemctl is-system-running printed no state", text)
    return Systemd(booted=booted, state=states[-1], exit_code=exit_code)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def parse_boot_id(text: str, exit_code: int = 0) -> str:
    """`/proc/sys/kernel/random/boot_id`: a UUID, new at every boot."""
    _require_success("boot_id", text, exit_code)
    boot_id = text.strip().lower()
    if not _UUID.fullmatch(boot_id):
        raise FactError("boot_id", "expected a UUID", text)
    return boot_id
