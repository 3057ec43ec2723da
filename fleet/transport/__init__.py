"""Reaching hosts: the `Transport` seam, its SSH and local implementations, fan-out, reboots."""

from fleet.transport.base import CommandResult, Transport
from fleet.transport.fanout import FanoutResult, HostOutcome, fan_out
from fleet.transport.local import LocalTransport
from fleet.transport.reboot import read_boot_id, wait_for_reboot
from fleet.errors import RebootTimeout
from fleet.transport.target import SSHTarget

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


def __getattr__(name: str) -> object:
    # paramiko and Fabric load only where SSH is used: a command on the local host never pays for them.
    if name == "SSHTransport":
        from fleet.transport.ssh import SSHTransport

        return SSHTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
