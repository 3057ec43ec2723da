"""The simulated server's GPUs: read from the host's `nvidia-smi` (real or a test host's fake), or
from --sim-gpu-* flags / FLEET_SIM_GPU_* env vars when there is none or when the host file's
declared GPUs are not the machine's (a sim host plays what its host file declares); and the
registration of the running server in the fake `nvidia-smi`'s process table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from fleet.host import nvidia_smi
from fleet.host.errors import GpuDetectionError

MIB = 1024 * 1024
GIB = 1024 * MIB

QUERY_FIELDS: tuple[str, ...] = ("index", "name", "compute_cap", "memory.total", "driver_version")


@dataclass(frozen=True)
class SimGpu:
    index: int
    name: str
    compute_cap: tuple[int, int]
    memory_total_mib: int
    driver: str

    @property
    def memory_total_gb(self) -> float:
        """In GiB, the unit SGLang's "GB" figures use (bytes / 1<<30)."""
        return self.memory_total_mib * MIB / GIB


@dataclass(frozen=True)
class GpuHost:
    gpus: tuple[SimGpu, ...]  # the GPUs visible to the server, in CUDA order
    cuda_toolkit: tuple[int, int] | None  # from nvcc; None when no toolkit was found
    played: bool = False  # in place of the machine's GPUs of another model: nothing to register in its nvidia-smi

    @property
    def compute_cap(self) -> tuple[int, int]:
        return self.gpus[0].compute_cap


def parse_query_gpu(text: str) -> list[SimGpu]:
    """Parse `nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version
    --format=csv,noheader,nounits` output."""
    gpus = []
    try:
        for row in nvidia_smi.parse_csv(text, QUERY_FIELDS):
            major, minor = (int(part) for part in row["compute_cap"].split("."))
            gpus.append(SimGpu(int(row["index"]), row["name"], (major, minor), nvidia_smi.mib(row["memory.total"]) or 0, row["driver_version"]))
    except ValueError as exc:  # NvidiaSmiError included
        raise GpuDetectionError(f"nvidia-smi: {exc}") from exc
    return gpus


_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def parse_nvcc_version(text: str) -> tuple[int, int] | None:
    match = _NVCC_RELEASE.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_version(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


def select_visible(gpus: Sequence[SimGpu], cuda_visible_devices: str | None) -> list[SimGpu]:
    """Apply CUDA_VISIBLE_DEVICES (indices or GPU-uuids are allowed; we know indices only)."""
    if cuda_visible_devices is None:
        return list(gpus)
    by_index = {gpu.index: gpu for gpu in gpus}
    visible = []
    for item in cuda_visible_devices.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit() or int(item) not in by_index:
            # CUDA stops at the first invalid entry, silently.
            break
        visible.append(by_index[int(item)])
    return visible


def _run(command: list[str]) -> str | None:
    if shutil.which(command[0]) is None:
        return None
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except OSError:
        return None
    return result.stdout if result.returncode == 0 else None


DECLARED_ENV = nvidia_smi.DECLARED_GPU_ENV


@dataclass(frozen=True)
class GpuOverrides:
    """--sim-gpu-* flags (or FLEET_SIM_GPU_* env): used when the host has no nvidia-smi, or when
    it plays the GPUs its host file declares (DECLARED_ENV)."""

    name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    count: int = 8
    compute_cap: str = "12.0"
    memory_mib: int = 97887
    driver: str = "580.95.05"
    cuda_toolkit: str | None = "13.1"


def detect_gpu_host(overrides: GpuOverrides, env: Mapping[str, str]) -> GpuHost:
    """The GPUs and CUDA toolkit this server would see: the machine's (nvidia-smi), unless the
    launch declared the host file's GPUs (FLEET_SIM_GPU_DECLARED) and the machine has none of
    that model -- then the declared ones, whatever the machine has (fleet.host.nvidia_smi.plays_declared)."""
    smi = _run(nvidia_smi.query_command("query-gpu", QUERY_FIELDS))
    gpus = parse_query_gpu(smi) if smi is not None else []
    declared = env.get(DECLARED_ENV)
    # Played over the machine's own GPUs: nvidia-smi answers for others (nothing of ours belongs there).
    played = smi is not None and bool(declared and nvidia_smi.plays_declared(declared, [gpu.name for gpu in gpus]))
    if smi is None or played:
        cap = parse_version(overrides.compute_cap)
        gpus = [SimGpu(i, overrides.name, cap, overrides.memory_mib, overrides.driver) for i in range(overrides.count)]
    visible = select_visible(gpus, env.get("CUDA_VISIBLE_DEVICES"))
    if not visible:
        raise GpuDetectionError("no CUDA GPU is visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides all)")
    return GpuHost(tuple(visible), _detect_toolkit(overrides, env), played)


def _detect_toolkit(overrides: GpuOverrides, env: Mapping[str, str]) -> tuple[int, int] | None:
    nvcc = _run(["nvcc", "--version"])
    if nvcc is not None:
        return parse_nvcc_version(nvcc)
    fake_dir = env.get("FLEET_FAKE_GPU_DIR")
    if fake_dir:
        try:
            profile = json.loads((Path(fake_dir) / "profile.json").read_text())
            if profile.get("toolkit"):
                return parse_version(str(profile["toolkit"]))
        except (OSError, ValueError):
            pass
    return parse_version(overrides.cuda_toolkit) if overrides.cuda_toolkit else None


# Peak HBM/GDDR bandwidth (GB/s) and dense BF16 TFLOPS of the GPUs fleet meets, for the timing
# model: decode is bandwidth-bound, prefill compute-bound. Matched by substring of the name.
_GPU_SPEEDS: tuple[tuple[str, float, float], ...] = (
    ("RTX PRO 6000", 1792.0, 500.0),
    ("B200", 8000.0, 2250.0),
    ("H200", 4800.0, 989.0),
    ("H100", 3350.0, 989.0),
    ("H20", 4000.0, 148.0),
    ("A100", 2039.0, 312.0),
    ("L40S", 864.0, 362.0),
    ("RTX 5090", 1792.0, 419.0),
    ("RTX 4090", 1008.0, 330.0),
)


def gpu_speed(name: str) -> tuple[float, float]:
    """(memory bandwidth GB/s, dense bf16 TFLOPS) for a GPU name; a mid-range guess if unknown."""
    for needle, bandwidth, tflops in _GPU_SPEEDS:
        if needle in name:
            return bandwidth, tflops
    return 1500.0, 300.0


def register_process(fake_gpu_dir: str, pid: int, gpu_indices: Sequence[int], used_mib: int) -> Path:
    """Tell the test host's fake nvidia-smi that `pid` holds memory on these GPUs (atomic write)."""
    procs = Path(fake_gpu_dir) / "procs"
    procs.mkdir(parents=True, exist_ok=True)
    target = procs / f"{pid}.json"
    record = {"pid": pid, "process_name": "python3", "gpus": list(gpu_indices), "used_mib": int(used_mib)}
    temporary = procs / f".{pid}.json.tmp"
    with open(temporary, "w") as handle:
        json.dump(record, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)
    return target


def unregister_process(fake_gpu_dir: str, pid: int) -> None:
    try:
        (Path(fake_gpu_dir) / "procs" / f"{pid}.json").unlink()
    except FileNotFoundError:
        pass
