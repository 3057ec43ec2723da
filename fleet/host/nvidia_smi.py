"""nvidia-smi's CSV queries (`--query-gpu`, `--query-compute-apps` with `--format=csv[,noheader][,nounits]`),
parsed once for everything that reads them: the controller's facts, the agent's check of who holds
a GPU, and the simulator's view of its GPUs. Pure; tested on real captured output."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fleet.host.errors import NvidiaSmiError

# The compute-apps query everyone runs: its process name may itself contain ", ", so it sits
# between the fields whose positions are fixed.
COMPUTE_APPS_FIELDS: tuple[str, ...] = ("pid", "process_name", "used_memory", "gpu_uuid")


# What nvidia-smi reports of the GPUs fleet knows: name -> (memory.total in MiB, compute_cap).
# For a host file's declared model where no nvidia-smi speaks for it: planning without facts, and
# a sim host that plays its declared GPUs on a machine that has others (or none).
KNOWN_GPUS: dict[str, tuple[int, str]] = {
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": (97887, "12.0"),
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": (97887, "12.0"),
    "NVIDIA H200": (143771, "9.0"),
    "NVIDIA H100 80GB HBM3": (81559, "9.0"),
    "NVIDIA B200": (183359, "10.0"),
}


# In a sim server's environment: the GPU model its host file declares (with FLEET_SIM_GPU_NAME,
# _COUNT, _MEMORY_MIB, _COMPUTE_CAP, set by fleet.launch); where `plays_declared`, the simulator
# plays those and the agent leaves the machine's GPUs out of its checks.
DECLARED_GPU_ENV = "FLEET_SIM_GPU_DECLARED"


def same_model(a: str, b: str) -> bool:
    """GPU names as nvidia-smi and host files spell them: case and spacing aside."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def plays_declared(declared_model: str | None, found_names: Sequence[str]) -> bool:
    """Whether a sim host plays the GPUs its host file declares instead of the machine's: the
    machine has none, or none of the declared model (a real H200 under a file that declares RTX
    PRO 6000s). A machine with the declared model -- a real one, or a test host's fake nvidia-smi
    in the real formats -- is the stage itself: its view (count, memory in use, driver) counts."""
    if not found_names:
        return True
    return declared_model is not None and not any(same_model(name, declared_model) for name in found_names)


def query_command(query: str, fields: Sequence[str]) -> list[str]:
    """`nvidia-smi --query-gpu=index,uuid --format=csv,noheader,nounits` and its like."""
    return ["nvidia-smi", f"--{query}={','.join(fields)}", "--format=csv,noheader,nounits"]


def _cells(line: str) -> list[str]:
    # nvidia-smi never quotes fields and separates them with ", "
    return [cell.strip() for cell in line.split(",")]


def _header_name(cell: str) -> str:
    return re.sub(r"\s*\[.*\]$", "", cell)  # "memory.total [MiB]" -> "memory.total"


def parse_csv(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a `--query-gpu` answer as {field: cell}. With a header (`--format=csv`), columns
    are found by name, in any order; without one they are `fields`, in order."""
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    names: Sequence[str] = fields
    if lines:
        first = _cells(lines[0][1])
        if _header_name(first[0]) == fields[0] and not first[0].isdigit():
            names, lines = [_header_name(cell) for cell in first], lines[1:]
    rows = []
    for number, line in lines:
        cells = _cells(line)
        if len(cells) != len(names):
            raise NvidiaSmiError(f"line {number}: expected {len(names)} comma-separated fields ({', '.join(names)}), got {len(cells)}", line)
        rows.append(dict(zip(names, cells)))
    return rows


def not_available(value: str) -> bool:
    return value.strip().strip("[]").upper() in ("N/A", "NOT SUPPORTED", "UNKNOWN ERROR")


def mib(value: str) -> int | None:
    """'97887', '97887 MiB', '97887.0' -> 97887; '[N/A]' (containers, MIG, unified memory) -> None."""
    if not_available(value):
        return None
    number = value.strip().removesuffix("MiB").strip()
    try:
        return int(float(number))
    except ValueError:
        raise NvidiaSmiError("expected a MiB figure", value) from None


@dataclass(frozen=True)
class ComputeApp:
    pid: int
    process_name: str
    used_memory_mib: int | None
    gpu_uuid: str


def parse_compute_apps(text: str) -> list[ComputeApp]:
    """A `--query-compute-apps=pid,process_name,used_memory,gpu_uuid` answer, with or without a header."""
    apps = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("pid,") or "no running processes found" in line.lower():
            continue
        cells = _cells(line)
        if len(cells) < len(COMPUTE_APPS_FIELDS) or not cells[0].isdigit():
            raise NvidiaSmiError("expected `pid, process_name, used_memory, gpu_uuid`", line)
        apps.append(ComputeApp(int(cells[0]), ", ".join(cells[1:-2]), mib(cells[-2]), cells[-1]))
    return apps


# The power query a run's sampler runs (`query_command("query-gpu", POWER_FIELDS)`). `power.draw` is
# the driver's one-second average on current drivers (580: equal to `power.draw.average`), steadier
# than `power.draw.instant`, which swings by +-50 W under load on an H200 (the busy-loop capture).
POWER_FIELDS: tuple[str, ...] = ("index", "power.draw", "power.limit")


@dataclass(frozen=True)
class PowerReading:
    index: int
    draw_w: float | None  # None: [N/A] (GPUs or vGPUs that report no power)
    limit_w: float | None  # None: [N/A], or not queried


def watts(value: str) -> float | None:
    """'78.37 W', '78.37' -> 78.37; '[N/A]', 'N/A' -> None."""
    if not_available(value):
        return None
    number = value.strip().removesuffix("W").strip()
    try:
        return float(number)
    except ValueError:
        raise NvidiaSmiError("expected a power figure in W", value) from None


def parse_power(text: str, fields: Sequence[str] = POWER_FIELDS) -> list[PowerReading]:
    """A `--query-gpu` answer holding `index` and `power.draw` (and `power.limit` where asked),
    with or without a header and units (see parse_csv: without a header, columns are `fields`);
    a looped query (`-lms`) gives one reading per line, in order."""
    readings = []
    for row in parse_csv(text, fields):
        if "index" not in row or "power.draw" not in row:
            raise NvidiaSmiError(f"expected the index and power.draw columns, got {', '.join(row)}")
        if not row["index"].isdigit():
            raise NvidiaSmiError("expected a GPU index", row["index"])
        limit = row.get("power.limit")
        readings.append(PowerReading(int(row["index"]), watts(row["power.draw"]), None if limit is None else watts(limit)))
    return readings
