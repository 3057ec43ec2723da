"""Facts, pyinfra style: a POSIX sh command (every argument quoted) and the pure parser of its output.

Facts are not run one by one: `composite_script` joins many into one script that prints each
fact's output between delimiter lines, so a host answers all of them in one SSH round trip;
`fleet.host.facts_output.split_sections` cuts that output back into per-fact pieces for the parsers
(it lives in fleet/host, so that a Slurm node cuts its own output the same way).
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
from fleet.errors import FactError
from fleet.host import nvidia_smi
from fleet.host.facts_output import SECTION_MARK, SectionOutput
from fleet.transport.base import BOOT_ID_PATH

T = TypeVar("T")

# nvidia-smi can hang for minutes when a GPU has fallen off the bus; one stuck tool must not
# cost the other facts, so each external command that can hang has its own limit (GNU
# `timeout`, where installed).
SECTION_TIMEOUT_S = 20
# importing torch from a cold page cache takes a while
ENGINE_PROBE_TIMEOUT_S = 90
TIMED_OUT = 124  # GNU timeout's exit code

ENGINE_PROBE_SOURCE = Path(__file__).with_name("engine_probe.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Fact(Generic[T]):
    """`command` is POSIX sh, pasted into the facts script (not a string it evaluates): with
    `subshell` it runs in a subshell (its `exit`, `exec`, `cd` and variables stay there; one fork
    and no exec), else in the script's own shell (builtins only, no fork: files read by
    `fleet_cat`). Commands that can hang go through `limited`; `timeout_s` is the limit the
    parser names when one exits 124."""

    name: str
    command: str
    parse: Callable[[str, int], T]
    timeout_s: int = SECTION_TIMEOUT_S
    subshell: bool = True


def limited(command: str, seconds: int = SECTION_TIMEOUT_S) -> str:
    """One simple command, killed after `seconds` where GNU timeout is installed (else unlimited).
    `${fleet_timeout:+timeout N}` expands to two words or none: no wrapper shell, no extra exec."""
    return f"${{fleet_timeout:+timeout {int(seconds)}}} {command}"


def guarded(body: str, seconds: int = SECTION_TIMEOUT_S) -> str:
    """`body` (sh) in a shell of its own under the limit: for sections whose builtins touch
    configured paths (`[ -e ]`, `[ -x ]`), a stat that can hang on a dead network mount."""
    return "exec " + limited("sh -c " + shlex.quote(body), seconds)


def file_fact(name: str, path: str, parse: Callable[[str, int], T]) -> Fact[T]:
    """A file read with the shell's own `read` (no `cat` process); a missing file is the shell's
    'cannot open' message and a non-zero exit code, as with cat."""
    return Fact(name, f"fleet_cat {shlex.quote(path)}", parse, subshell=False)


def nvidia_smi_fact(name: str, argv: Sequence[str], parse: Callable[[str, int], T]) -> Fact[T]:
    return Fact(name, "exec " + limited(shlex.join(argv)), parse)


GPUS: Fact[list[Gpu]] = nvidia_smi_fact("gpus", nvidia_smi.query_command("query-gpu", GPU_QUERY_FIELDS), parse_gpus)
GPU_PROCESSES: Fact[list[GpuProcess]] = nvidia_smi_fact("gpu_processes", nvidia_smi.query_command("query-compute-apps", nvidia_smi.COMPUTE_APPS_FIELDS), parse_gpu_processes)
# The driver's version and the CUDA version it supports; `--version` asks nothing of the GPUs,
# where the plain table (the other place that prints the CUDA version) queries all of them.
DRIVER: Fact[Driver] = nvidia_smi_fact("driver", ["nvidia-smi", "--version"], parse_driver_header)
KERNEL_MODULE: Fact[str | None] = file_fact("kernel_module", "/proc/driver/nvidia/version", parse_kernel_module)
# FlashInfer's JIT looks for CUDA_HOME, then nvcc on PATH, then /usr/local/cuda: the same order
# here. PATH is walked with builtins (as `command -v` would, without a command substitution's
# fork), all under the limit: CUDA often lives on a network mount.
TOOLKIT: Fact[CudaToolkit | None] = Fact(
    "toolkit",
    guarded(
        'set -f; set --; [ -n "$CUDA_HOME" ] && set -- "$CUDA_HOME/bin/nvcc"; '
        'IFS=:; for dir in $PATH; do set -- "$@" "${dir:-.}/nvcc"; done; unset IFS; '
        'for nvcc in "$@" /usr/local/cuda/bin/nvcc; do '
        f'if [ -f "$nvcc" ] && [ -x "$nvcc" ]; then echo "{NVCC_PATH_LABEL} $nvcc"; exec "$nvcc" --version; fi; '
        f"done; echo {shlex.quote(NVCC_PATH_LABEL + ' ' + NVCC_ABSENT)}"
    ),
    parse_nvcc,
)
MEMORY: Fact[Memory] = file_fact("memory", "/proc/meminfo", parse_meminfo)
OS_RELEASE: Fact[OperatingSystem] = file_fact("os", "/etc/os-release", parse_os_release)
# one process: uname prints the fields in its own fixed order, nodename release machine
KERNEL: Fact[Kernel] = Fact("kernel", "exec uname -n -r -m", parse_kernel)
SYSTEMD: Fact[Systemd] = Fact(
    "systemd",
    f"if [ -d /run/systemd/system ]; then echo {shlex.quote(SYSTEMD_BOOTED_LABEL)} yes; else echo {shlex.quote(SYSTEMD_BOOTED_LABEL)} no; fi; exec {limited('systemctl is-system-running')}",
    parse_systemd,
)
BOOT_ID: Fact[str] = file_fact("boot_id", BOOT_ID_PATH, parse_boot_id)


def engine_fact(engine_python: str, refresh: bool = False, name: str = "engine") -> Fact[EnginePython]:
    """The engine probe, answered from its cache on the host while boot and packages are the
    same (engine_probe.py); `refresh` probes afresh."""
    # from / so that a stray `torch/` in the login directory cannot shadow the real package
    argv = [engine_python, "-c", ENGINE_PROBE_SOURCE, *(["--refresh"] if refresh else [])]
    return Fact(name, "cd / && exec " + limited(shlex.join(argv), ENGINE_PROBE_TIMEOUT_S), parse_engine_probe, timeout_s=ENGINE_PROBE_TIMEOUT_S)


def disk_space_fact(paths: Mapping[str, str]) -> Fact[dict[str, DiskSpace]]:
    """df of each path; a path not created yet is measured at its nearest existing parent (found
    with parameter expansion, as `dirname` would, without a process per level). Model caches sit
    on network mounts: the walk's stats are under the limit too."""
    quoted = " ".join(shlex.quote(path) for path in paths.values())
    body = (
        f"set --; for path in {quoted}; do "
        'while [ ! -e "$path" ]; do case $path in */*) path=${path%/*}; path=${path:-/} ;; *) path=. ;; esac; done; '
        'set -- "$@" "$path"; done; '
        f'printf "%s\\n" "$@"; echo {DF_SEPARATOR}; exec df -P -T -B1 "$@"'
    )
    requested = dict(paths)
    return Fact("disks", guarded(body), lambda text, exit_code: parse_disk_space(text, exit_code, requested))


def staging_dir_fact(path: str) -> Fact[int | None]:
    quoted = shlex.quote(path)
    return Fact("staging_dir", guarded(f"if [ -d {quoted} ]; then exec du -sk {quoted}; else echo {DIR_ABSENT}; fi"), parse_du_bytes)


# fleet_cat: `cat FILE` in builtins. `read` returns non-zero on a last line without a newline,
# which is printed as it is; a file that cannot be opened fails the loop's redirection (the
# shell's message on stderr, exit 2) and prints nothing.
_SCRIPT_PROLOGUE = f"""\
if command -v timeout >/dev/null 2>&1; then fleet_timeout=1; else fleet_timeout=; fi
fleet_cat() {{
  while IFS= read -r fleet_line; do printf '%s\\n' "$fleet_line"; done < "$1" && {{ [ -z "$fleet_line" ] || printf '%s' "$fleet_line"; }}
}}
fleet_begin() {{ printf '%s begin %s\\n' '{SECTION_MARK}' "$1"; }}
fleet_end() {{ printf '\\n%s end %s %s\\n' '{SECTION_MARK}' "$1" "$2"; }}
"""


def _section(fact: Fact[object]) -> str:
    name = shlex.quote(fact.name)
    body = f"( {fact.command}\n)" if fact.subshell else f"{{ {fact.command}\n}}"
    return f"fleet_begin {name}\n{body} </dev/null 2>&1\nfleet_end {name} $?\n"


def composite_script(facts: Sequence[Fact[object]]) -> str:
    """One POSIX sh script running every fact; each section's stdout+stderr is framed by marker lines."""
    return _SCRIPT_PROLOGUE + "".join(_section(f) for f in facts)


def parse_section(fact: Fact[T], section: SectionOutput) -> T:
    if section.exit_code == TIMED_OUT:
        raise FactError(fact.name, f"timed out after {fact.timeout_s} s", section.text)
    return fact.parse(section.text, section.exit_code)
