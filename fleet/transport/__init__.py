"""Reaching hosts: the `Transport` seam, its SSH and local implementations, fan-out, reboots."""

from fleet.transport.base import CommandResult, Transport
from fleet.transport.fanout import FanoutResult, HostOutcome, fan_out
from fleet.transport.local import LocalTransport
from fleet.transport.reboot import RebootTimeout, read_boot_id, wait_for_reboot
from fleet.transport.ssh import SSHTransport
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
