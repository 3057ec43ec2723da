"""The errors of the code that ships to hosts, and the base of all of fleet's: one module a side
(httpx-style), this one for `fleet.host`, `fleet.errors` for the controller (which re-exports the
four at the top). A module that raises one imports it from here.

    FleetError                    everything fleet raises on purpose
    +-- ConfigError               a host or playbook file: file, field, expectation
    +-- ContractError             a sweep-folder document that is not what the contract says
    +-- EngineConfigError         a server configuration the engine would refuse
    +-- LeaseHeld, LeaseLost      a host's lease (fleet.host.contract.lease)

Not FleetErrors: what the agent, the engines' parsers and the simulator raise and handle among
themselves, or turn into the program's own exit (never a controller's message as such):

    ValueError                    (pydantic validators and parsers take these as bad values)
    +-- ReleaseError, ConfigFileError, UnknownEngineError, FlagTableError   (fleet.host.engines)
    |   ConfigFileError
    |   +-- YamlError, YamlUnsupported   PyYAML's refusal; YAML fleet's reader cannot read (yaml11)
    +-- NvidiaSmiError            nvidia-smi output that cannot be read
    +-- FaultProfileError, NoiseModelError                                  (the simulator's settings)
    Exception
    +-- ArgvError                 what an engine's argument parser would exit 2 with
    +-- StreamError, ServiceError, AgentBusy, HostLeased                    (the agent)
    +-- NodePrepError
    |   +-- SharedCopyError       (a Slurm node's preparation)
    +-- SimUsageError, GpuDetectionError, RequestError, BadRequest          (the simulator)

Kept beside their code, on purpose: GrantError (fleet/host/grant.py runs with the standard library
alone) and private control-flow exceptions (a leading underscore).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class _Lease(Protocol):
    """What LeaseHeld reads of the lease it carries (fleet.host.contract.lease.Lease, which imports
    this module)."""

    def describe(self, now: float) -> str: ...
    def to_json(self) -> dict[str, Any]: ...


class FleetError(Exception):
    """Base of every error fleet raises on purpose."""


class ConfigError(FleetError):
    """A host or playbook file is malformed. Names the file, the field and what was expected."""

    def __init__(self, path: Path | str, field: str, expected: str, got: object = None, *, more: tuple[str, ...] = ()) -> None:
        self.path = str(path)
        self.field = field
        self.expected = expected
        self.got = got
        self.more = more
        where = f"{self.path}: {field}" if field else self.path
        detail = f"{where}: expected {expected}"
        if got is not None:
            detail += f", got {got!r}"
        # Every other problem of the same file, so one run of the command shows them all.
        detail += "".join(f"\n{self.path}: {line}" for line in more)
        super().__init__(detail)


class ContractError(FleetError):
    """A sweep-directory document (shard, result, progress, quarantine) that is not what the
    contract says. Names the file, the field and what was expected."""

    def __init__(self, source: str, field: str, expected: str, got: object = None) -> None:
        self.source, self.field, self.expected, self.got = source, field, expected, got
        where = f"{source}: {field}" if field else source
        detail = f"{where}: expected {expected}"
        if got is not None:
            text = repr(got)
            detail += f", got {text if len(text) <= 120 else text[:117] + '...'}"
        super().__init__(detail)


class EngineConfigError(FleetError):
    """A server configuration that the engine would refuse, or whose explicit settings contradict
    each other. The message names the server, the setting and what would work instead."""


# raised by fleet.host.agent.client
class StreamError(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message


# raised by fleet.host.agent.runner
class AgentBusy(Exception):
    """Another agent already works on this sweep directory."""


# raised by fleet.host.agent.runner
class HostLeased(Exception):
    """Another live sweep holds the host's lease (fleet.host.contract.lease): its servers are not ours to clear."""


# raised by fleet.host.agent.services
class ServiceError(Exception):
    """A service could not be started, stopped or queried."""


# raised by fleet.host.contract.lease
class LeaseHeld(FleetError):
    """The host is held by another live sweep (or provision)."""

    def __init__(self, host: str, lease: _Lease, now: float) -> None:
        self.host, self.lease, self.now = host, lease, now
        super().__init__(f"{host}: held by {lease.describe(now)}; not touching its GPUs or servers")


# raised by fleet.host.contract.lease
class LeaseLost(FleetError):
    """The lease this agent held is now someone else's (or gone): it must stop."""


# raised by fleet.host.engines
class UnknownEngineError(ValueError):
    """An engine name that is not one of ENGINE_NAMES."""


# raised by fleet.host.engines.base
class ArgvError(Exception):
    """What the engine's argument parser would print before exiting 2: the usage line and
    `prog: error: message`."""

    def __init__(self, message: str, usage: str, prog: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage
        self.prog = prog

    @property
    def text(self) -> str:
        return f"{self.usage}{self.prog}: error: {self.message}\n"


# raised by fleet.host.engines.base
class ConfigFileError(ValueError):
    """An engine `--config` file the engine itself would refuse (it raises ValueError at start-up)."""


# raised by fleet.host.engines.yaml11
class YamlError(ConfigFileError):
    """Text that PyYAML's safe_load refuses."""


class YamlUnsupported(ConfigFileError):
    """Valid YAML that fleet's reader does not read (a fleet limitation)."""


# raised by fleet.host.engines.base
class ReleaseError(ValueError):
    """A version string that is not a release number."""


# raised by fleet.host.engines.sglang.flags
class FlagTableError(ValueError):
    """A flag table that is not what tools/sglang_flag_table.py writes."""


# raised by fleet.host.engines.sim.api
class RequestError(Exception):
    """A request SGLang rejects with HTTP 400 before it reaches the scheduler."""


# raised by fleet.host.engines.sim.cli
class SimUsageError(Exception):
    """A bad sim-only flag or environment variable (exit 2, like argparse)."""


# raised by fleet.host.engines.sim.faults
class FaultProfileError(ValueError):
    """The fault profile file is malformed; the message names the file and the field."""


# raised by fleet.host.engines.sim.gpu
class GpuDetectionError(Exception):
    """nvidia-smi printed something we cannot read, or CUDA_VISIBLE_DEVICES names no GPU."""


# raised by fleet.host.engines.sim.httpserver
class BadRequest(Exception):
    pass


# raised by fleet.host.engines.sim.noise
class NoiseModelError(ValueError):
    """A malformed noise setting; the message names the source and the field."""


# raised by fleet.host.nodeprep
class NodePrepError(Exception):
    pass


# raised by fleet.host.nodeprep
class SharedCopyError(NodePrepError):
    """The model's copy on the shared fs is incomplete: no node can stage it."""


# raised by fleet.host.nvidia_smi
class NvidiaSmiError(ValueError):
    """nvidia-smi printed a line this parser does not understand."""

    def __init__(self, reason: str, line: str = "") -> None:
        self.reason, self.line = reason, line
        super().__init__(f"{reason}: {line!r}" if line else reason)
