"""The controller's errors, one module (httpx-style): import them from here. The errors of the
code that ships to hosts live in `fleet.host.errors`, whose four at the top are re-exported here.

Everything fleet raises on purpose derives from `FleetError`, so callers can catch one type.
Transport errors carry `transient`: True means "the network or the host hiccupped, retrying the
same idempotent call may succeed"; False means "an operator must act" (bad key, unknown host key).

    FleetError
    +-- ConfigError, ContractError, EngineConfigError      (fleet.host.errors)
    |   ContractError
    |   +-- ReportError           a sweep folder the report cannot read
    +-- UsageError                a command that cannot run as given (exit 2)
    +-- HostSelectionError        --hosts named no host, group or `all`
    +-- TransportError            a call to a host could not complete
    |   +-- TransientTransportError   retrying may help
    |   |   +-- ConnectTimeout, CommandTimeout, ConnectionLost
    |   +-- PermanentTransportError   an operator must act
    |   |   +-- AuthenticationFailed, HostKeyError, ToolMissing
    |   +-- RebootTimeout         a host that did not come back
    +-- CommandFailed             a remote command exited non-zero
    +-- FactError                 facts output that cannot be read
    +-- ModelError, PreflightFailed                          (provisioning)
    +-- QuarantineError           a damaged quarantine file
    +-- WorkloadError             a workload the prompts or datasets cannot make
    +-- SweepError, SweepBusy     a sweep's record; another controller holds its lock
    +-- ResultsFolderError        the controller cannot write its results folder
    +-- SlurmCommandError, SlurmOutputError, SlurmSweepError  (the Slurm backend)

Not FleetErrors: DatasetFormatError (a ValueError: pydantic validators report it as a bad value)
and ControlDirError (an OpenSSH control directory that cannot be used, handled where it is raised).
"""

from __future__ import annotations

from typing import Protocol

# The base and the errors that host code raises live in the shipped package; callers import them here.
from fleet.host.errors import ConfigError as ConfigError
from fleet.host.errors import ContractError as ContractError
from fleet.host.errors import EngineConfigError as EngineConfigError
from fleet.host.errors import FleetError as FleetError


# What two errors read of the objects they carry, as protocols: this module sits below the modules
# that define them (fleet.provision.preflight.PreflightReport, fleet.transport.base.CommandResult).
class _Summarised(Protocol):
    def summary(self) -> str: ...


class _CommandOutcome(Protocol):
    @property
    def command(self) -> str: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


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


# raised by fleet.facts.parsers
class FactError(FleetError):
    """A fact could not be read: the command failed, or printed what the parser does not understand."""

    def __init__(self, fact: str, reason: str, output: str = "") -> None:
        self.fact = fact
        self.reason = reason
        self.output = output
        excerpt = " | ".join(line.strip() for line in output.strip().splitlines()[:4])
        super().__init__(f"{fact}: {reason}" + (f" (output: {excerpt})" if excerpt else ""))


# raised by fleet.fixes.quarantine
class QuarantineError(FleetError):
    """A quarantine file that cannot be read, or a key or index that names no entry."""


# raised by fleet.provision.models
class ModelError(FleetError):
    """A model could not be fetched, verified or staged; the message says which and why."""


# raised by fleet.provision.preflight
class PreflightFailed(FleetError):
    """A host failed a preflight check: nothing is launched on it."""

    def __init__(self, report: _Summarised) -> None:
        self.report = report
        super().__init__(report.summary())


# raised by fleet.report.load
class ReportError(ContractError):
    """A sweep folder the report cannot read: names the file, the field and what was expected."""


# raised by fleet.slurm.commands
class SlurmCommandError(FleetError):
    """A Slurm command failed on the login host; the message carries Slurm's own words."""

    def __init__(self, host: str, result: _CommandOutcome) -> None:
        said = (result.stderr.strip() or result.stdout.strip() or "(no output)").splitlines()[-1]
        super().__init__(f"{host}: `{result.command}` exited {result.exit_code}: {said}")
        self.result = result
        self.said = said


# raised by fleet.slurm.jobs
class SlurmOutputError(FleetError):
    """A Slurm command printed something fleet cannot read (another version's format, a wrapper)."""


# raised by fleet.slurm.record
class SlurmSweepError(FleetError):
    pass


# raised by fleet.sweep.interface
class UsageError(FleetError):
    """A command that cannot be carried out as given (exit 2): the message says what would work."""


# raised by fleet.sweep.lock
class SweepBusy(FleetError):
    """Another controller drives this sweep: nothing was done (no host contacted, no lease touched)."""


# raised by fleet.sweep.record
class SweepError(FleetError):
    pass


# raised by fleet.transport.reboot
class RebootTimeout(TransportError):
    """The host did not come back with a new boot id within the reboot policy's bound."""


# raised by fleet.transport.sharing
class ControlDirError(Exception):
    """The socket directory exists but is not ours alone (owner, mode or a symlink)."""


# raised by fleet.workloads.datasets
class DatasetFormatError(ValueError):
    """A dataset file that is not what its format says; the message names the file, where and what was expected."""


# raised by fleet.workloads.library
class WorkloadError(FleetError):
    """A workload names something fleet's workload data does not have."""


# raised by fleet.sweep.resultsfolder
class ResultsFolderError(FleetError):
    """The controller cannot write its results folder: the sweep stops (the agents work on, their
    results stay on the hosts) and can be resumed once there is room."""
