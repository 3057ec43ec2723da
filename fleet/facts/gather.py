"""Gathering a host's facts in one round trip, and caching them per host for as long as it stays up.

Facts fall in two kinds. Stable ones (GPU driver, toolkit, the engine's Python, OS, systemd)
change only when someone installs something, which on a GPU host means a reboot more often than
not. Volatile ones (GPU memory and processes, free disk, RAM) change all the time. The cache's
one cheap call therefore reads the boot id *together with* the volatile facts: same boot id ->
the cached stable facts plus fresh volatile ones; new boot id -> everything again. A provision
step that installs a toolkit without rebooting must call `FactsCache.invalidate`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleet.facts import commands
from fleet.facts.commands import Fact, composite_script, parse_section
from fleet.facts.models import Driver, FactsRequest, HostFacts
from fleet.errors import FactError
from fleet.host.atomic import atomic_file
from fleet.host.facts_output import split_sections
from fleet.inventory import NAME_PATTERN
from fleet.transport.base import Transport

STAGING_PATH_KEY = "staging"
DEFAULT_TIMEOUT_S = 180.0
VLLM_ENGINE = "vllm_engine"  # the section of the vLLM interpreter's probe, where it is not engine.python


def _volatile_facts(request: FactsRequest) -> list[Fact[Any]]:
    facts: list[Fact[Any]] = [commands.BOOT_ID, commands.GPUS, commands.GPU_PROCESSES, commands.MEMORY]
    if request.paths:
        facts.append(commands.disk_space_fact(request.paths))
    if STAGING_PATH_KEY in request.paths:
        facts.append(commands.staging_dir_fact(request.paths[STAGING_PATH_KEY]))
    return facts


def _stable_facts(request: FactsRequest, refresh: bool = False) -> list[Fact[Any]]:
    facts: list[Fact[Any]] = [
        commands.DRIVER,
        commands.KERNEL_MODULE,
        commands.TOOLKIT,
        commands.engine_fact(request.engine_python, refresh=refresh),
        commands.OS_RELEASE,
        commands.KERNEL,
        commands.SYSTEMD,
    ]
    if request.vllm_python is not None and request.vllm_python != request.engine_python:
        facts.append(commands.engine_fact(request.vllm_python, refresh=refresh, name=VLLM_ENGINE))
    return facts


def gather_script(request: FactsRequest, *, engine: bool = True) -> str:
    """The composite script of a cold gather, for a host fleet cannot run it on itself (a Slurm
    node, reached only inside an allocation); `engine=False` leaves out the engine probe."""
    facts = _volatile_facts(request) + _stable_facts(request)
    return composite_script([f for f in facts if engine or f.name not in ("engine", VLLM_ENGINE)])


def _run_facts(transport: Transport, facts: Sequence[Fact[Any]], timeout: float) -> tuple[dict[str, Any], dict[str, str]]:
    """One round trip: the composite script. Returns parsed values and, per unreadable fact, why."""
    result = transport.run(["sh", "-c", composite_script(facts)], timeout=timeout)
    sections = split_sections(result.stdout)
    if not sections:
        raise FactError("facts", f"the facts script printed no sections (exit {result.exit_code})", result.stdout + result.stderr)
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for fact in facts:
        section = sections.get(fact.name)
        if section is None:
            problems[fact.name] = "no output: the facts script stopped before it"
            continue
        try:
            values[fact.name] = parse_section(fact, section)
        except FactError as exc:
            problems[fact.name] = str(exc)
    return values, problems


def _driver(values: Mapping[str, Any]) -> Driver | None:
    header: Driver | None = values.get("driver")
    kernel_module: str | None = values.get("kernel_module")
    if header is not None:
        return header.model_copy(update={"kernel_module": kernel_module})
    gpus = values.get("gpus") or []
    if gpus or kernel_module:
        return Driver(version=gpus[0].driver_version if gpus else None, cuda_version=None, kernel_module=kernel_module)
    return None


def _volatile_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "gathered_at": datetime.now(timezone.utc),
        "boot_id": values.get("boot_id"),
        "gpus": values.get("gpus", []),
        "gpu_processes": values.get("gpu_processes", []),
        "memory": values.get("memory"),
        "disks": values.get("disks", {}),
        "staging_dir_bytes": values.get("staging_dir"),
    }


def gather_facts(
    transport: Transport,
    host_config_paths: Mapping[str, str],
    engine_python: str,
    timeout: float = DEFAULT_TIMEOUT_S,
    refresh: bool = False,
    vllm_python: str | None = None,
) -> HostFacts:
    """Every fact of a host in one round trip. Unreadable facts are left empty and explained in `problems`.

    The engine probe answers from the host's own cache while the boot and the engine's packages
    are unchanged (fleet/facts/engine_probe.py); `refresh` probes it afresh too.
    """
    request = FactsRequest(paths=dict(host_config_paths), engine_python=engine_python, vllm_python=vllm_python)
    values, problems = _run_facts(transport, _volatile_facts(request) + _stable_facts(request, refresh), timeout)
    return HostFacts(
        request=request,
        driver=_driver(values),
        toolkit=values.get("toolkit"),
        engine=values.get("engine"),
        vllm_engine=values.get(VLLM_ENGINE),
        os=values.get("os"),
        kernel=values.get("kernel"),
        systemd=values.get("systemd"),
        problems=problems,
        **_volatile_fields(values),
    )


def refresh_volatile(transport: Transport, facts: HostFacts, timeout: float = DEFAULT_TIMEOUT_S) -> HostFacts | None:
    """`facts` with fresh volatile facts, or None when the host rebooted since (or its boot id is unreadable)."""
    volatile = _volatile_facts(facts.request)
    values, problems = _run_facts(transport, volatile, timeout)
    if facts.boot_id is None or values.get("boot_id") != facts.boot_id:
        return None
    renewed = {f.name for f in volatile}
    kept = {name: why for name, why in facts.problems.items() if name not in renewed}
    return facts.model_copy(update={**_volatile_fields(values), "problems": {**kept, **problems}})


_HOST_FILE_NAME = re.compile(NAME_PATTERN)


class FactsCache:
    """`<dir>/<host>.json`, one HostFacts per host, valid while the host's boot id is unchanged."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, host: str) -> Path:
        if not _HOST_FILE_NAME.match(host):
            raise ValueError(f"host name {host!r}: expected [a-z0-9_-] (it names a cache file)")
        return self.directory / f"{host}.json"

    def load(self, host: str) -> HostFacts | None:
        """The cached facts, or None when there are none or the file is unreadable (it is only a cache)."""
        try:
            return HostFacts.model_validate_json(self.path(host).read_text(encoding="utf-8"))
        except (OSError, ValidationError):
            return None

    def store(self, host: str, facts: HostFacts) -> None:
        with atomic_file(self.path(host)) as handle:
            handle.write((facts.model_dump_json(indent=2) + "\n").encode())

    def invalidate(self, host: str) -> None:
        self.path(host).unlink(missing_ok=True)

    def facts(
        self,
        host: str,
        transport: Transport,
        host_config_paths: Mapping[str, str],
        engine_python: str,
        timeout: float = DEFAULT_TIMEOUT_S,
        refresh: bool = False,
        vllm_python: str | None = None,
    ) -> HostFacts:
        """Cached stable facts + fresh volatile ones while the boot id holds; a full gather otherwise."""
        request = FactsRequest(paths=dict(host_config_paths), engine_python=engine_python, vllm_python=vllm_python)
        cached = None if refresh else self.load(host)
        current = None
        if cached is not None and cached.request == request:
            current = refresh_volatile(transport, cached, timeout)
        if current is None:
            current = gather_facts(transport, host_config_paths, engine_python, timeout, refresh=refresh, vllm_python=vllm_python)
        self.store(host, current)
        return current
