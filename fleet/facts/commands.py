"""Facts, pyinfra style: a POSIX sh command (every argument quoted) and the pure parser of its output.

Facts are not run one by one: `composite_script` joins many into one script that prints each
fact's output between delimiter lines, so a host answers all of them in one SSH round trip;
`split_sections` cuts that output back into per-fact pieces for the parsers.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

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
from fleet.facts.parsers import (
    DF_SEPARATOR,
    DIR_ABSENT,
    GPU_QUERY_FIELDS,
    NVCC_ABSENT,
    NVCC_PATH_LABEL,
    SYSTEMD_BOOTED_LABEL,
    FactError,
    parse_boot_id,
    parse_disk_space,
    parse_driver_header,
    parse_du_bytes,
    parse_engine_probe,
    parse_gpu_processes,
    parse_gpus,
    parse_kernel,
    parse_kernel_module,
    parse_meminfo,
    parse_nvcc,
    parse_os_release,
    parse_systemd,
)
from fleet.host import nvidia_smi
from fleet.transport.base import BOOT_ID_PATH

T = TypeVar("T")

# nvidia-smi can hang for minutes when a GPU has fallen off the bus; one stuck tool must not
# cost the other facts, so each section has its own limit (GNU `timeout`, where installed).
SECTION_TIMEOUT_S = 20
# importing torch from a cold page cache takes a while
ENGINE_PROBE_TIMEOUT_S = 90
TIMED_OUT = 124  # GNU timeout's exit code

SECTION_MARK = "@@fleet-facts@@"
ENGINE_PROBE_SOURCE = Path(__file__).with_name("engine_probe.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Fact(Generic[T]):
    name: str
    command: str
    parse: Callable[[str, int], T]
    timeout_s: int = SECTION_TIMEOUT_S


GPUS: Fact[list[Gpu]] = Fact("gpus", shlex.join(nvidia_smi.query_command("query-gpu", GPU_QUERY_FIELDS)), parse_gpus)
GPU_PROCESSES: Fact[list[GpuProcess]] = Fact(
    "gpu_processes", shlex.join(nvidia_smi.query_command("query-compute-apps", nvidia_smi.COMPUTE_APPS_FIELDS)), parse_gpu_processes
)
# only the plain table's header carries the CUDA version the driver supports
DRIVER: Fact[Driver] = Fact("driver", "nvidia-smi", parse_driver_header)
KERNEL_MODULE: Fact[str | None] = Fact("kernel_module", "cat /proc/driver/nvidia/version", parse_kernel_module)
# FlashInfer's JIT looks for CUDA_HOME, then nvcc on PATH, then /usr/local/cuda: the same order here
TOOLKIT: Fact[CudaToolkit | None] = Fact(
    "toolkit",
    'for nvcc in ${CUDA_HOME:+"$CUDA_HOME/bin/nvcc"} "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc; do '
    f'if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then echo "{NVCC_PATH_LABEL} $nvcc"; exec "$nvcc" --version; fi; '
    f"done; echo {shlex.quote(NVCC_PATH_LABEL + ' ' + NVCC_ABSENT)}",
    parse_nvcc,
)
MEMORY: Fact[Memory] = Fact("memory", "cat /proc/meminfo", parse_meminfo)
OS_RELEASE: Fact[OperatingSystem] = Fact("os", "cat /etc/os-release", parse_os_release)
KERNEL: Fact[Kernel] = Fact("kernel", "uname -r; uname -m; uname -n", parse_kernel)
SYSTEMD: Fact[Systemd] = Fact(
    "systemd",
    f"if [ -d /run/systemd/system ]; then echo {shlex.quote(SYSTEMD_BOOTED_LABEL)} yes; "
    f"else echo {shlex.quote(SYSTEMD_BOOTED_LABEL)} no; fi; systemctl is-system-running",
    parse_systemd,
)
BOOT_ID: Fact[str] = Fact("boot_id", shlex.join(["cat", BOOT_ID_PATH]), parse_boot_id)


def engine_fact(engine_python: str, refresh: bool = False) -> Fact[EnginePython]:
    """The engine probe, answered from its cache on the host while boot and packages are the
    same (engine_probe.py); `refresh` probes afresh."""
    # from / so that a stray `torch/` in the login directory cannot shadow the real package
    return Fact(
        "engine",
        "cd / && " + shlex.join([engine_python, "-c", ENGINE_PROBE_SOURCE, *(["--refresh"] if refresh else [])]),
        parse_engine_probe,
        timeout_s=ENGINE_PROBE_TIMEOUT_S,
    )


def disk_space_fact(paths: Mapping[str, str]) -> Fact[dict[str, DiskSpace]]:
    """df of each path; a path not created yet is measured at its nearest existing parent."""
    quoted = " ".join(shlex.quote(path) for path in paths.values())
    command = (
        f"set --; for path in {quoted}; do "
        'while [ ! -e "$path" ]; do path=$(dirname "$path"); done; '
        'set -- "$@" "$path"; done; '
        f'printf "%s\\n" "$@"; echo {DF_SEPARATOR}; df -P -T -B1 "$@"'
    )
    requested = dict(paths)
    return Fact("disks", command, lambda text, exit_code: parse_disk_space(text, exit_code, requested))


def staging_dir_fact(path: str) -> Fact[int | None]:
    quoted = shlex.quote(path)
    return Fact("staging_dir", f"if [ -d {quoted} ]; then du -sk {quoted}; else echo {DIR_ABSENT}; fi", parse_du_bytes)


_SCRIPT_PROLOGUE = f"""\
fleet_section() {{
  printf '%s begin %s\\n' '{SECTION_MARK}' "$1"
  if command -v timeout >/dev/null 2>&1; then
    timeout "$2" sh -c "$3" </dev/null 2>&1
  else
    sh -c "$3" </dev/null 2>&1
  fi
  printf '\\n%s end %s %s\\n' '{SECTION_MARK}' "$1" "$?"
}}
"""


def composite_script(facts: Sequence[Fact[object]]) -> str:
    """One POSIX sh script running every fact; each section's stdout+stderr is framed by marker lines."""
    calls = [f"fleet_section {shlex.quote(f.name)} {int(f.timeout_s)} {shlex.quote(f.command)}" for f in facts]
    return _SCRIPT_PROLOGUE + "\n".join(calls) + "\n"


@dataclass(frozen=True)
class SectionOutput:
    text: str
    exit_code: int


def split_sections(output: str) -> dict[str, SectionOutput]:
    """The composite script's stdout -> fact name -> (output, exit code). Unfinished sections are left out."""
    sections: dict[str, SectionOutput] = {}
    name: str | None = None
    body: list[str] = []
    for line in output.split("\n"):
        if line.startswith(SECTION_MARK + " "):
            words = line.split()
            if len(words) == 3 and words[1] == "begin":
                name, body = words[2], []
                continue
            if len(words) == 4 and words[1] == "end" and words[2] == name and words[3].lstrip("-").isdigit():
                # the newline printed before the end marker ends the last line of output, or makes
                # an empty last line that restores the output's own final newline: joining is exact
                sections[name] = SectionOutput("\n".join(body), int(words[3]))
                name = None
                continue
        if name is not None:
            body.append(line)
    return sections


def parse_section(fact: Fact[T], section: SectionOutput) -> T:
    if section.exit_code == TIMED_OUT:
        raise FactError(fact.name, f"timed out after {fact.timeout_s} s", section.text)
    return fact.parse(section.text, section.exit_code)
