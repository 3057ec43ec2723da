"""Reaching hosts: the `Transport` seam, its SSH and local implementations, fan-out, reboots."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.host.lazy import lazy_exports

if TYPE_CHECKING:
    from fleet.errors import RebootTimeout
    from fleet.transport.base import CommandResult, Transport
    from fleet.transport.fanout import FanoutResult, HostOutcome, fan_out
    from fleet.transport.local import LocalTransport
    from fleet.transport.reboot import read_boot_id, wait_for_reboot
    from fleet.transport.ssh import SSHTransport
    from fleet.transport.target import SSHTarget

# The names above, each from its module, imported when first asked for: importing any module of
# this package runs this file, and a command must pay only for the transports it uses (paramiko and
# Fabric only where SSH runs through them, the local host's copier only where it is used; issue 28,
# benchmarks/results/peers.md).
_HOMES = {
    "CommandResult": "fleet.transport.base",
    "Transport": "fleet.transport.base",
    "FanoutResult": "fleet.transport.fanout",
    "HostOutcome": "fleet.transport.fanout",
    "fan_out": "fleet.transport.fanout",
    "LocalTransport": "fleet.transport.local",
    "read_boot_id": "fleet.transport.reboot",
    "wait_for_reboot": "fleet.transport.reboot",
    "RebootTimeout": "fleet.errors",
    "SSHTarget": "fleet.transport.target",
    "SSHTransport": "fleet.transport.ssh",
}

__getattr__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "FanoutResult",
    "HostOutcome",
    "LocalTransport",
    "RebootTimeout",
    "CommandResult",
    "SSHTarget",
    "SSHTransport",
    "Transport",
    "fan_out",
    "read_boot_id",
    "wait_for_reboot",
]
