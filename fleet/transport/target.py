"""How to reach a host over SSH: the settings both paramiko and the `ssh` binary (for rsync) use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

HostKeyPolicy = Literal["verify", "accept-new"]


@dataclass(frozen=True)
class SSHTarget:
    """Exactly one of `address` and `ssh_alias`.

    With `ssh_alias`, HostName, Port, User, IdentityFile and ProxyJump come from the ssh config
    (`ssh_config`, or ~/.ssh/config and /etc/ssh/ssh_config); `port`, `user` and
    `identity_file` given here override it, as they do on an `ssh` command line.
    Host keys are always checked against `known_hosts` (also for jump hosts): "verify" refuses
    an unknown key, "accept-new" records it; both refuse a key that changed.
    """

    address: str | None = None
    ssh_alias: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: Path | None = None
    host_key_policy: HostKeyPolicy = "verify"
    known_hosts: Path = field(default_factory=lambda: Path("~/.ssh/known_hosts"))
    ssh_config: Path | None = None
    connect_timeout: float = 10.0

    def __post_init__(self) -> None:
        if (self.address is None) == (self.ssh_alias is None):
            raise ValueError("SSHTarget needs exactly one of address and ssh_alias")
        if self.host_key_policy not in ("verify", "accept-new"):
            raise ValueError(f"host_key_policy must be 'verify' or 'accept-new', not {self.host_key_policy!r}")
        if self.connect_timeout <= 0:
            raise ValueError(f"connect_timeout must be positive, not {self.connect_timeout!r}")
        # Expand ~ once, here, so that paramiko and the ssh binary read the same files.
        object.__setattr__(self, "known_hosts", self.known_hosts.expanduser())
        if self.identity_file is not None:
            object.__setattr__(self, "identity_file", self.identity_file.expanduser())
        if self.ssh_config is not None:
            object.__setattr__(self, "ssh_config", self.ssh_config.expanduser())

    @property
    def destination(self) -> str:
        """What `ssh` is given as its host argument: the alias, or the address."""
        return self.ssh_alias or self.address  # type: ignore[return-value]  # one is set, see __post_init__


# Why a login failed, in words, and the host file fields to check: one vocabulary for the paramiko
# path (fleet.transport.sshlink `connect_failure`) and the OpenSSH one (fleet.transport.openssh
# `login_failure`), which read the cause from different things (exceptions, ssh's own words).
LoginCause = tuple[str, tuple[str, ...]]
REFUSED: LoginCause = ("connection refused (no sshd listens on that port, or the host is booting)", ("port", "address"))
NO_ROUTE: LoginCause = ("no route to the host (down, or not on a network this machine reaches)", ("address",))
TIMED_OUT: LoginCause = ("timed out (host down, link cut, or a firewall drops the packets)", ("address", "port"))
HANDSHAKE_CLOSED: LoginCause = ("the host closed the connection during the SSH handshake", ("address", "port"))


def authentication_failed(target: SSHTarget) -> LoginCause:
    key = f" with {target.identity_file}" if target.identity_file else " with the default keys and agent"
    return f"authentication failed for user {target.user or '(default)'}{key}", ("user", "identity_file")
