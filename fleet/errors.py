"""One error hierarchy for all of fleet (httpx-style); import errors from here.

Everything fleet raises on purpose derives from `FleetError`, so callers can catch one type.
Transport errors carry `transient`: True means "the network or the host hiccupped, retrying the
same idempotent call may succeed"; False means "an operator must act" (bad key, unknown host key).
"""

from __future__ import annotations

# The base and the errors that host code raises live in the shipped package; callers import them here.
from fleet.host.errors import ConfigError as ConfigError
from fleet.host.errors import ContractError as ContractError
from fleet.host.errors import EngineConfigError as EngineConfigError
from fleet.host.errors import FleetError as FleetError


def short_command(text: str, width: int = 60) -> str:
    """A command as an error names it: its first line, cut to `width` characters (a facts script
    is 250 lines: the whole of it went into every connect error and every retry's log line; the
    whole command is in the debug log, `fleet --verbose`)."""
    lines = text.strip().splitlines() or [""]
    first = lines[0]
    cut = len(lines) > 1 or len(first) > width
    return (first[:width].rstrip() + " ...") if cut else first


def without_host(host: str, error: BaseException) -> str:
    """An error's text without the `host: ` its message starts with (for a line that names the host)."""
    text = str(error)
    return text[len(host) + 2 :] if text.startswith(f"{host}: ") else text


class HostSelectionError(FleetError):
    """`--hosts` named something that is neither a host, a group nor `all`."""


class TransportError(FleetError):
    """A remote (or local) call could not be completed. `transient` says whether a retry may help."""

    transient: bool = False

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(f"{host}: {message}")


class TransientTransportError(TransportError):
    """Refused, reset, timed out, EOF, banner not read: the host may come back."""

    transient = True


class ConnectTimeout(TransientTransportError):
    """The TCP connect, banner or auth did not finish in time."""


class CommandTimeout(TransientTransportError):
    """A command did not finish within its wall-clock timeout. It may still be running remotely."""


class ConnectionLost(TransientTransportError):
    """The connection dropped (reset, EOF, refused, no route)."""


class PermanentTransportError(TransportError):
    """Authentication failed, host key mismatch or unknown, bad config: retrying will not help."""


class AuthenticationFailed(PermanentTransportError):
    pass


class HostKeyError(PermanentTransportError):
    """The host key is unknown or does not match known_hosts. fleet never silently accepts it."""


class ToolMissing(PermanentTransportError):
    """A program fleet runs on this machine (rsync, ssh) is not installed here."""


class CommandFailed(FleetError):
    """A remote command ran and exited non-zero where success was required."""

    def __init__(self, host: str, command: str, exit_code: int, stdout: str, stderr: str) -> None:
        self.host = host
        self.command = command
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        tail = (stderr or stdout).strip().splitlines()[-5:]
        super().__init__(f"{host}: `{short_command(command)}` exited {exit_code}" + (": " + " | ".join(tail) if tail else ""))
