"""`fleet facts` as a table: one row per host, the figures an operator checks first."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rich.table import Table

from fleet.facts.models import HostFacts
from fleet.host.engines import engine as engine_named

GIB = 1024**3


def _gpus(facts: HostFacts) -> str:
    if not facts.gpus:
        return "none"
    kinds = Counter((g.name, g.compute_capability, g.memory_total_mib) for g in facts.gpus)
    return "\n".join(f"{count}x {name} (cc {cc}" + (f", {mib} MiB)" if mib is not None else ")") for (name, cc, mib), count in kinds.items())


def _engine(facts: HostFacts) -> str:
    engine = facts.engine
    if engine is None:
        return "?"
    torch = f"torch {engine.torch_version} cu {engine.torch_cuda}" if engine.torch_version else "no torch"
    served = engine_named()
    return f"Python {engine.python_version}, {torch}, {served.name} {engine.package_version(served.name) or '-'}"


def _disks(facts: HostFacts) -> str:
    return "\n".join(f"{key}: {d.available_bytes / GIB:.1f}/{d.total_bytes / GIB:.1f} GiB free" + (f" ({d.fstype})" if d.fstype else "") for key, d in facts.disks.items())


def _rows(facts: HostFacts) -> dict[str, str]:
    driver = f"{facts.driver.version} / {facts.driver.cuda_version or '?'}" if facts.driver else "?"
    memory = f"{facts.memory.available_bytes / GIB:.1f}/{facts.memory.total_bytes / GIB:.1f} GiB" if facts.memory else "?"
    system = " ".join(filter(None, [facts.os.pretty_name if facts.os else None, facts.kernel.release if facts.kernel else None]))
    return {
        "GPUs": _gpus(facts),
        "driver / CUDA": driver,
        "nvcc": f"{facts.toolkit.version} ({facts.toolkit.nvcc_path})" if facts.toolkit else "none",
        "engine": _engine(facts),
        "disks": _disks(facts),
        "RAM": memory,
        "OS / kernel": system or "?",
        "systemd": "?" if facts.systemd is None else (facts.systemd.state or "absent"),
        "boot id": facts.boot_id or "?",
        "problems": "\n".join(f"{name}: {why}" for name, why in facts.problems.items()) or "-",
    }


def facts_table(facts_by_host: Mapping[str, HostFacts]) -> Table:
    """One column per host (a handful of hosts side by side reads better than a row of ten columns)."""
    table = Table(title="host facts", show_lines=True)
    table.add_column("fact", style="bold")
    for host in facts_by_host:
        table.add_column(host, overflow="fold")
    rows = {host: _rows(facts) for host, facts in facts_by_host.items()}
    for name in next(iter(rows.values()), {}):
        table.add_row(name, *(rows[host][name] for host in rows))
    return table
