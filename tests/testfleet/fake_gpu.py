"""Fake `nvidia-smi` and `nvcc` for the test hosts: the real tools' output formats, driven by files.

Each test host runs a copy of this file through small launchers `nvidia-smi` and `nvcc` in its
bin directory; it picks its behaviour from argv[0]. It uses only cheap standard-library imports
(no pathlib, dataclasses, socket, not even `json` or `uuid`, see `loads` and `default_uuid`):
every call of a GPU tool pays Python's start-up, sixteen hosts' calls on this machine's CPUs.

State lives in `$FLEET_FAKE_GPU_DIR` (default: `../gpu` next to the bin directory):
- `profile.json`: what the GPUs are (see `DEFAULT_PROFILE`; README.md lists every key);
- `procs/<pid>.json`: `{"pid", "process_name", "gpus": [index, ...], "used_mib"}` per GPU process;
  entries whose pid is not alive on the host are ignored, exactly as the driver forgets them.

The layouts are copied from real output of driver 580 (tests/testfleet/real_tool_output/).
"""

from __future__ import annotations

import os
import sys
import time
from collections import namedtuple
from collections.abc import Callable

try:  # a built-in module; hashlib would load OpenSSL's (about 4 ms a call)
    from _sha1 import sha1
except ImportError:  # pragma: no cover - builds without it
    from hashlib import sha1
import _json

DEFAULT_PROFILE: dict[str, object] = {
    "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "count": 8,
    "compute_cap": "12.0",
    "memory_total_mib": 97887,
    "driver": "580.95.05",
    "cuda_driver_version": "13.0",
    "toolkit": "13.1",
    # Optional keys, with the values used when they are missing:
    # "uuids": derived from the hostname and the index, stable across reboots
    # "bus_ids": ["00000000:01:00.0", ...]
    # "memory_reserved_mib": 616, "power_limit_w": 600,
    # "idle": {"temperature_c": 28, "power_w": 34, "pstate": "P8"},
    # "busy": {"temperature_c": 61, "power_w": 455, "pstate": "P1", "utilization_pct": 100},
    # power_w may be fractional (an H200 idles at 78.37 W, runs a matmul loop at about 690 W).
}

IDLE = {"temperature_c": 28, "power_w": 34, "pstate": "P8", "utilization_pct": 0}
BUSY = {"temperature_c": 61, "power_w": 455, "pstate": "P1", "utilization_pct": 100}

# nvcc builds seen on real hosts: toolkit -> (Built on, V version, Build line suffix).
NVCC_BUILDS = {
    "12.8": ("Fri_Feb_21_20:23:50_PST_2025", "V12.8.93", "compiler.35583870_0"),
    "13.0": ("Wed_Aug_20_01:58:59_PM_PDT_2025", "V13.0.88", "compiler.36424714_0"),
    "13.1": ("Tue_Dec_16_07:23:41_PM_PST_2025", "V13.1.115", "compiler.37061995_0"),
}


class UsageError(Exception):
    """Arguments the real tool would refuse; the message is what it prints."""


GpuProcess = namedtuple("GpuProcess", "pid process_name gpus used_mib")


class Gpu(
    namedtuple(
        "Gpu",
        "index name uuid bus_id compute_cap total_mib reserved_mib used_mib power_limit_w temperature_c power_w pstate utilization_pct",
    )
):
    @property
    def free_mib(self) -> int:
        return max(self.total_mib - self.reserved_mib - self.used_mib, 0)


def gpu_state_dir() -> str:
    configured = os.environ.get("FLEET_FAKE_GPU_DIR")
    if configured:
        return configured
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0]))), "gpu")


def read_text(path: str) -> str:
    with open(path) as handle:
        return handle.read()


class _Decoding:
    """What `_json.make_scanner` reads of a decoder: the `json` module's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo: dict = {}


_scan = _json.make_scanner(_Decoding())


def loads(text: str) -> object:
    """`json.loads` with json's own C scanner: importing `json` imports `re` and `enum`, about
    half of this tool's start-up. Raises ValueError on bad JSON, as json.loads does."""
    stripped = text.strip()
    try:
        value, end = _scan(stripped, 0)
    except StopIteration as exc:
        raise ValueError(f"expected a JSON value at character {exc.value}") from None
    if end != len(stripped):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return value


def load_profile(state_dir: str | os.PathLike) -> dict:
    path = os.path.join(state_dir, "profile.json")
    try:
        loaded = loads(read_text(path))
    except FileNotFoundError:
        return dict(DEFAULT_PROFILE)
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(loaded).__name__}")
    return {**DEFAULT_PROFILE, **loaded}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = read_text(f"/proc/{pid}/stat")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def load_processes(state_dir: str | os.PathLike, count: int, alive: Callable[[int], bool] = pid_alive) -> list[GpuProcess]:
    procs_dir = os.path.join(state_dir, "procs")
    if not os.path.isdir(procs_dir):
        return []
    found = []
    for name in sorted(n for n in os.listdir(procs_dir) if n.endswith(".json")):
        path = os.path.join(procs_dir, name)
        entry = loads(read_text(path))
        try:
            proc = GpuProcess(
                pid=int(entry["pid"]),
                process_name=str(entry["process_name"]),
                gpus=tuple(int(i) for i in entry["gpus"]),
                used_mib=int(entry["used_mib"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: expected {{pid: int, process_name: str, gpus: [int], used_mib: int}}: {exc!r}") from exc
        bad = [i for i in proc.gpus if not 0 <= i < count]
        if bad:
            raise ValueError(f"{path}: gpus: expected indexes below {count}, got {bad}")
        if alive(proc.pid):
            found.append(proc)
    return sorted(found, key=lambda p: p.pid)


# uuid.NAMESPACE_DNS; the uuid module imports enum and hashlib, most of this tool's start-up
NAMESPACE_DNS = bytes.fromhex("6ba7b8109dad11d180b400c04fd430c8")


def default_uuid(hostname: str, index: int) -> str:
    """uuid.uuid5(NAMESPACE_DNS, "<host>.gpu<i>.fleet-testfleet") written out (RFC 4122 section 4.3)."""
    digest = bytearray(sha1(NAMESPACE_DNS + f"{hostname}.gpu{index}.fleet-testfleet".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def build_gpus(profile: dict, processes: list[GpuProcess], hostname: str) -> list[Gpu]:
    count = int(profile["count"])
    uuids = profile.get("uuids") or [default_uuid(hostname, i) for i in range(count)]
    bus_ids = profile.get("bus_ids") or [f"00000000:{0x01 + 0x10 * i:02X}:00.0" for i in range(count)]
    if len(uuids) != count or len(bus_ids) != count:
        raise ValueError(f"profile: uuids and bus_ids need {count} entries (count), got {len(uuids)}, {len(bus_ids)}")
    gpus = []
    for index in range(count):
        used = sum(p.used_mib for p in processes if index in p.gpus)
        looks = {**IDLE, **profile.get("idle", {})} if used == 0 else {**BUSY, **profile.get("busy", {})}
        gpus.append(
            Gpu(
                index=index,
                name=str(profile["name"]),
                uuid=str(uuids[index]),
                bus_id=str(bus_ids[index]),
                compute_cap=str(profile["compute_cap"]),
                total_mib=int(profile["memory_total_mib"]),
                reserved_mib=int(profile.get("memory_reserved_mib", 616)),
                used_mib=used,
                power_limit_w=int(profile.get("power_limit_w", 600)),
                temperature_c=int(looks["temperature_c"]),
                power_w=float(looks["power_w"]),
                pstate=str(looks["pstate"]),
                utilization_pct=int(looks["utilization_pct"]),
            )
        )
    return gpus


# --------------------------------------------------------------------------------------------
# nvidia-smi (no arguments): the table

RULE_FULL = "+-----------------------------------------------------------------------------------------+"
RULE_COLUMNS = "+-----------------------------------------+------------------------+----------------------+"
TABLE_HEAD = [
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
    "|=========================================+========================+======================|",
]
PROCESS_HEAD = [
    "| Processes:                                                                              |",
    "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
    "|        ID   ID                                                               Usage      |",
    "|=========================================================================================|",
]
NO_PROCESSES = "|  No running processes found                                                             |"


def clip(text: str, width: int, keep_end: bool = False) -> str:
    """nvidia-smi cuts long names to `width` with '...' (GPU names keep the start, paths the end)."""
    if len(text) <= width:
        return text
    return "..." + text[-(width - 3) :] if keep_end else text[: width - 3] + "..."


def render_table(profile: dict, gpus: list[Gpu], processes: list[GpuProcess], now: float) -> str:
    lines = [time.ctime(now) + "       ", RULE_FULL]
    driver, cuda = str(profile["driver"]), str(profile["cuda_driver_version"])
    lines.append(f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}CUDA Version: {cuda:<9}|")
    lines += [RULE_COLUMNS, *TABLE_HEAD]
    for gpu in gpus:
        usage, cap = f"{gpu.power_w:.0f}W", f"{gpu.power_limit_w}W"
        memory = f"{gpu.used_mib}MiB"
        lines += [
            f"| {gpu.index:>3}  {clip(gpu.name, 27):<31}On  |   {gpu.bus_id:>16} Off |{'0':>21} |",
            f"| N/A   {gpu.temperature_c:>2}C    {gpu.pstate:<2}{usage:>16} / {cap:>5} |{memory:>11} / {gpu.total_mib:>6}MiB |{f'{gpu.utilization_pct}%':>8}{'Default':>13} |",
            f"|{'':41}|{'':24}|{'Disabled':>21} |",
            RULE_COLUMNS,
        ]
    lines += ["", RULE_FULL, *PROCESS_HEAD]
    shown = {g.index for g in gpus}
    rows = [(i, p) for p in processes for i in p.gpus if i in shown]
    if not rows:
        lines.append(NO_PROCESSES)
    for index, proc in sorted(rows, key=lambda row: (row[0], row[1].pid)):
        name, memory = clip(proc.process_name, 32, keep_end=True), f"{proc.used_mib}MiB"
        lines.append(f"|{index:>5}   N/A  N/A{proc.pid:>16}      C   {name:<32}{memory:>14} |")
    lines.append(RULE_FULL)
    return "\n".join(lines) + "\n"


def render_version(profile: dict) -> str:
    """`nvidia-smi --version` (real_tool_output/.../nvidia-smi-version.txt): NVML's version is the
    driver's without its last part (580.159.04 -> 580.159). Nothing is asked of the GPUs."""
    driver = str(profile["driver"])
    return (
        f"NVIDIA-SMI version  : {driver}\n"
        f"NVML version        : {driver.rsplit('.', 1)[0] if driver.count('.') > 1 else driver}\n"
        f"DRIVER version      : {driver}\n"
        f"CUDA Version        : {profile['cuda_driver_version']}\n"
    )


def render_list(gpus: list[Gpu]) -> str:
    return "".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in gpus)


# --------------------------------------------------------------------------------------------
# --query-gpu / --query-compute-apps with --format=csv[,noheader][,nounits]

# header: the canonical name nvidia-smi prints, whatever alias was asked for; unit: printed as
# " [unit]" in the header and " unit" after values (unless nounits); value: row -> value.
Field = namedtuple("Field", "header unit value")


def _timestamp(_: object = None) -> str:
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def _pci_part(part: int) -> Callable[[Gpu], str]:
    """pci.domain / pci.bus / pci.device as nvidia-smi prints them, from "DDDDDDDD:BB:DD.F"."""

    def value(gpu: Gpu) -> str:
        domain, bus, device_function = gpu.bus_id.split(":")
        return "0x" + (domain[-4:], bus, device_function.split(".")[0])[part]

    return value


def _gpu_fields(profile: dict, gpu_count: int) -> dict[str, Field]:
    fields = {
        "timestamp": Field("timestamp", "", _timestamp),
        "driver_version": Field("driver_version", "", lambda g: profile["driver"]),
        "count": Field("count", "", lambda g: gpu_count),
        "name": Field("name", "", lambda g: g.name),
        "serial": Field("serial", "", lambda g: f"{1654024032000 + g.index}"),
        "uuid": Field("uuid", "", lambda g: g.uuid),
        "pci.bus_id": Field("pci.bus_id", "", lambda g: g.bus_id),
        "pci.domain": Field("pci.domain", "", _pci_part(0)),
        "pci.bus": Field("pci.bus", "", _pci_part(1)),
        "pci.device": Field("pci.device", "", _pci_part(2)),
        "index": Field("index", "", lambda g: g.index),
        "display_mode": Field("display_mode", "", lambda g: "Disabled"),
        "display_active": Field("display_active", "", lambda g: "Disabled"),
        "persistence_mode": Field("persistence_mode", "", lambda g: "Enabled"),
        "compute_mode": Field("compute_mode", "", lambda g: "Default"),
        "compute_cap": Field("compute_cap", "", lambda g: g.compute_cap),
        "pstate": Field("pstate", "", lambda g: g.pstate),
        "fan.speed": Field("fan.speed", "%", lambda g: None),
        "memory.total": Field("memory.total", "MiB", lambda g: g.total_mib),
        "memory.reserved": Field("memory.reserved", "MiB", lambda g: g.reserved_mib),
        "memory.used": Field("memory.used", "MiB", lambda g: g.used_mib),
        "memory.free": Field("memory.free", "MiB", lambda g: g.free_mib),
        "utilization.gpu": Field("utilization.gpu", "%", lambda g: g.utilization_pct),
        "utilization.memory": Field("utilization.memory", "%", lambda g: g.utilization_pct // 2),
        "temperature.gpu": Field("temperature.gpu", "", lambda g: g.temperature_c),
        # Power as driver 580 prints it (real-tool-output/.../query-power*.csv): "78.37 W", two
        # decimals; power.draw is the driver's one-second average, so it equals power.draw.average,
        # and a fake with no moment-to-moment swing gives the same figure as the instant reading.
        "power.draw": Field("power.draw", "W", lambda g: f"{g.power_w:.2f}"),
        "power.draw.average": Field("power.draw.average", "W", lambda g: f"{g.power_w:.2f}"),
        "power.draw.instant": Field("power.draw.instant", "W", lambda g: f"{g.power_w:.2f}"),
        "power.limit": Field("power.limit", "W", lambda g: f"{g.power_limit_w:.2f}"),
        "enforced.power.limit": Field("enforced.power.limit", "W", lambda g: f"{g.power_limit_w:.2f}"),
        "power.default_limit": Field("power.default_limit", "W", lambda g: f"{g.power_limit_w:.2f}"),
        "clocks.current.sm": Field("clocks.current.sm", "MHz", lambda g: 2430 if g.used_mib else 180),
        "clocks.current.memory": Field("clocks.current.memory", "MHz", lambda g: 14001 if g.used_mib else 405),
        "clocks.max.sm": Field("clocks.max.sm", "MHz", lambda g: 2430),
        "clocks.max.memory": Field("clocks.max.memory", "MHz", lambda g: 14001),
        "ecc.mode.current": Field("ecc.mode.current", "", lambda g: "Enabled"),
        "mig.mode.current": Field("mig.mode.current", "", lambda g: "Disabled"),
        "vbios_version": Field("vbios_version", "", lambda g: "98.02.52.00.02"),
    }
    aliases = {
        "gpu_name": "name",
        "gpu_serial": "serial",
        "gpu_uuid": "uuid",
        "gpu_bus_id": "pci.bus_id",
        "clocks.sm": "clocks.current.sm",
        "clocks.mem": "clocks.current.memory",
        "clocks.max.mem": "clocks.max.memory",
    }
    return {**fields, **{alias: fields[name] for alias, name in aliases.items()}}


def _app_fields(gpus: list[Gpu]) -> dict[str, Field]:
    by_index = {g.index: g for g in gpus}
    fields = {
        "timestamp": Field("timestamp", "", _timestamp),
        "pid": Field("pid", "", lambda row: row[1].pid),
        "process_name": Field("process_name", "", lambda row: row[1].process_name),
        "used_gpu_memory": Field("used_gpu_memory", "MiB", lambda row: row[1].used_mib),
        "gpu_uuid": Field("gpu_uuid", "", lambda row: by_index[row[0]].uuid),
        "gpu_name": Field("gpu_name", "", lambda row: by_index[row[0]].name),
        "gpu_bus_id": Field("gpu_bus_id", "", lambda row: by_index[row[0]].bus_id),
        "gpu_serial": Field("gpu_serial", "", lambda row: f"{1654024032000 + row[0]}"),
    }
    return {**fields, "used_memory": fields["used_gpu_memory"], "name": fields["process_name"]}


def render_csv(requested: str, fields: dict[str, Field], rows: list, options: set[str]) -> str:
    names = [n.strip() for n in requested.split(",") if n.strip()]
    for name in names:
        if name not in fields:
            raise UsageError(f'Field "{name}" is not a valid field to query.\n')
    chosen = [fields[n] for n in names]
    out = []
    if "noheader" not in options:
        out.append(", ".join(f.header + (f" [{f.unit}]" if f.unit else "") for f in chosen))
    for row in rows:
        cells = []
        for f in chosen:
            value = f.value(row)
            if value is None:
                cells.append("[N/A]")
            else:
                cells.append(f"{value} {f.unit}" if f.unit and "nounits" not in options else str(value))
        out.append(", ".join(cells))
    return "".join(line + "\n" for line in out)


def parse_format(value: str) -> set[str]:
    options = {v.strip() for v in value.split(",") if v.strip()}
    if "csv" not in options or not options <= {"csv", "noheader", "nounits"}:
        raise UsageError(f'"{value}" is not a valid format option.\n')
    return options


def select_gpus(gpus: list[Gpu], selector: str | None) -> list[Gpu]:
    if selector is None:
        return gpus
    chosen = []
    for word in selector.split(","):
        match = [g for g in gpus if word in (str(g.index), g.uuid, g.bus_id)]
        if not match:
            raise UsageError(f"No devices were found matching the ID '{word}'\n")
        chosen += match
    return chosen


def nvidia_smi(argv: list[str], state_dir: str | os.PathLike, hostname: str, now: float, alive: Callable[[int], bool] = pid_alive) -> str:
    options: dict[str, str] = {}
    flags = set()
    args = list(argv)
    while args:
        arg = args.pop(0)
        key, has_value, value = arg.partition("=")
        if key in ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id"):
            if not has_value:
                if not args:
                    raise UsageError(f"Option {key} requires a value.\n")
                value = args.pop(0)
            options["--id" if key == "-i" else key] = value
        elif arg in ("-L", "--list-gpus", "-h", "--help", "--version"):
            flags.add({"--list-gpus": "-L", "--help": "-h"}.get(arg, arg))
        else:
            raise UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
    if "-h" in flags:
        return "NVIDIA System Management Interface -- fake of fleet's test hosts (see tests/testfleet/README.md)\n"
    if "--version" in flags:
        others = [a for a in argv if a != "--version"]
        if others:
            raise UsageError(f"ERROR: Option {others[0]} is not valid for this command. Please run 'nvidia-smi -h' for help.\n\n")
        return render_version(load_profile(state_dir))
    profile = load_profile(state_dir)
    processes = load_processes(state_dir, int(profile["count"]), alive)
    gpus = build_gpus(profile, processes, hostname)
    selected = select_gpus(gpus, options.get("--id"))
    queries = [q for q in ("--query-gpu", "--query-compute-apps") if q in options]
    if len(queries) > 1:
        raise UsageError("Only one --query-* switch can be used at a time.\n")
    if queries and "-L" in flags:
        raise UsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
    if queries:
        if "--format" not in options:
            raise UsageError("Must specify --format with query options.\n")
        fmt = parse_format(options["--format"])
        if queries[0] == "--query-gpu":
            return render_csv(options["--query-gpu"], _gpu_fields(profile, len(gpus)), selected, fmt)
        indexes = {g.index for g in selected}
        rows = sorted(((i, p) for p in processes for i in p.gpus if i in indexes), key=lambda r: (r[0], r[1].pid))
        return render_csv(options["--query-compute-apps"], _app_fields(gpus), rows, fmt)
    if "-L" in flags:
        return render_list(selected)
    return render_table(profile, selected, processes, now)


def nvcc(argv: list[str], state_dir: str | os.PathLike) -> str:
    if not ({"--version", "-V"} & set(argv)):
        raise UsageError("nvcc fatal   : No input files specified; use option --help for more information\n")
    toolkit = str(load_profile(state_dir)["toolkit"])
    built, version, build = NVCC_BUILDS.get(toolkit, ("Mon_Jan_06_12:00:00_PM_PST_2025", f"V{toolkit}.0", "compiler.00000000_0"))
    return (
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-2025 NVIDIA Corporation\n"
        f"Built on {built}\n"
        f"Cuda compilation tools, release {toolkit}, {version}\n"
        f"Build cuda_{toolkit}.r{toolkit}/{build}\n"
    )


def driver_version_file(profile: dict) -> str:
    """/proc/driver/nvidia/version as the open kernel module writes it (layout of the real capture)."""
    return f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {profile['driver']}  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n"


def main() -> int:
    tool = os.path.basename(sys.argv[0])
    try:
        if tool == "nvcc":
            sys.stdout.write(nvcc(sys.argv[1:], gpu_state_dir()))
        else:
            sys.stdout.write(nvidia_smi(sys.argv[1:], gpu_state_dir(), os.uname().nodename, time.time()))
    except UsageError as exc:
        sys.stdout.write(str(exc))
        return 1 if tool == "nvcc" else 2
    except ValueError as exc:
        sys.stderr.write(f"fake {tool}: {exc}\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
