"""From inventory hosts to transports: the one place that maps a Host onto the transport seam."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.inventory import Host, TransportKind
from fleet.transport.base import Transport
from fleet.transport.fanout import FanoutResult, fan_out
from fleet.transport.reboot import read_boot_id
from fleet.transport.sharing import one_shot
from fleet.transport.target import SSHTarget

if TYPE_CHECKING:  # the facts' models cost fetch-logs and status, which only connect, a tenth of a second
    from fleet.facts import HostFacts

CONNECT_TIMEOUT_S = 10.0


def ssh_target(host: Host) -> SSHTarget:
    return SSHTarget(
        address=host.address,
        ssh_alias=host.ssh_alias,
        # With an alias, port and user come from ~/.ssh/config unless the host file sets them.
        port=host.port if (host.address or "port" in host.model_fields_set) else None,
        user=host.user,
        identity_file=Path(host.identity_file) if host.identity_file else None,
        host_key_policy=host.host_key_policy.value,
        known_hosts=Path(host.known_hosts) if host.known_hosts else Path("~/.ssh/known_hosts"),
        connect_timeout=CONNECT_TIMEOUT_S,
    )


def transport_for(host: Host) -> Transport:
    if host.transport is TransportKind.local:
        from fleet.transport.local import LocalTransport  # its copier only where the local host is used

        return LocalTransport(host.name)
    from fleet.transport.ssh import SSHTransport  # paramiko only where SSH is used

    return SSHTransport(host.name, ssh_target(host), host.source_file)


@dataclass(frozen=True)
class Reachability:
    ok: bool
    detail: str  # the boot id when reachable, the reason when not
    seconds: float


def check_reachability(hosts: Sequence[Host], deadline_s: float = 30.0) -> dict[str, Reachability]:
    """Connect to every host at once and read its boot id; one dead host never delays the others."""

    def probe(host: Host) -> str:
        transport = transport_for(host)
        try:
            return read_boot_id(transport)
        finally:
            transport.close()

    outcomes = fan_out({h.name: h for h in hosts}, probe, deadline_s=deadline_s)
    return {name: Reachability(o.ok, str(o.value) if o.ok else str(o.error), o.duration_s) for name, o in outcomes.items()}


def facts_cache_dir() -> Path:
    """Per-user cache of host facts on the controller (valid per boot id of each host)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "fleet" / "facts"


def host_paths(host: Host) -> dict[str, str]:
    paths = {"work_dir": host.paths.work_dir, "model_cache": host.paths.model_cache}
    if host.paths.staging:
        paths["staging"] = host.paths.staging
    return paths


def collect_facts(transport: Transport, host: Host, *, refresh: bool = False) -> HostFacts:
    from fleet.facts import FactsCache

    vllm = host.engine.vllm
    vllm_python = vllm.python if vllm is not None and vllm.python not in (None, host.engine.python) else None
    return FactsCache(facts_cache_dir()).facts(host.name, transport, host_paths(host), host.engine.python, refresh=refresh, vllm_python=vllm_python)


@one_shot()  # `fleet facts`: one command per host, then exit (fleet.transport.sharing)
def facts_of(hosts: Sequence[Host], *, refresh: bool = False, deadline_s: float = 240.0) -> FanoutResult[HostFacts]:
    def work(host: Host) -> HostFacts:
        transport = transport_for(host)
        try:
            return collect_facts(transport, host, refresh=refresh)
        finally:
            transport.close()

    return fan_out({h.name: h for h in hosts}, work, deadline_s=deadline_s)
