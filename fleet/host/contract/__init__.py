"""The contract between the controller and the agent: what a sweep directory holds and what its
files say. Both ends read and write these types, so a file means the same thing at either end.

- `layout`: every file name of a sweep directory (`SweepDir`).
- `shard`: what the controller asks of one host's agent (`Shard`).
- `results`: one run's outcome (`RunResult`), `progress`: what the agent is doing (`Progress`),
  `quarantine`: servers to skip while the sweep runs (`HostQuarantine`).
- `nodeprep`: what a Slurm node must have before a task's agent starts, and what the node found
  (`NodeRequirements`, `NodePrep`; fleet.host.nodeprep).

Every document but the shard carries a `schema` (name/version; the shard a `format` number).
Readers check it: a document of another schema, a truncated file or a field of the wrong type
raises `ContractError` naming the file, the field and what was expected -- never a silent
misread. A change of meaning bumps the version; adding an optional field does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.host.errors import ContractError
from fleet.host.lazy import lazy_exports

if TYPE_CHECKING:
    from fleet.host.contract.layout import SweepDir
    from fleet.host.contract.progress import PROGRESS_SCHEMA, AgentError, AgentState, Progress, ServerPhase, ServerProgress
    from fleet.host.contract.quarantine import QUARANTINE_SCHEMA, HostQuarantine
    from fleet.host.contract.results import RESULT_SCHEMA, Failure, RunResult, RunStatus, load_result
    from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard

# The names above, each from its module, imported when first asked for: every controller command
# reads its host files through `reader` (fleet.config), which imports this package, and must not
# build the result, progress and shard types for it (22 ms of CPU of every command's start; issue
# 28, benchmarks/results/peers.md).
_EXPORTS = {
    "layout": ("SweepDir",),
    "progress": ("PROGRESS_SCHEMA", "AgentError", "AgentState", "Progress", "ServerPhase", "ServerProgress"),
    "quarantine": ("QUARANTINE_SCHEMA", "HostQuarantine"),
    "results": ("RESULT_SCHEMA", "Failure", "RunResult", "RunStatus", "load_result"),
    "shard": ("AgentLimits", "RunSpec", "ServerSpec", "Shard"),
}
_HOMES = {name: f"{__name__}.{module}" for module, names in _EXPORTS.items() for name in names}

__getattr__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "PROGRESS_SCHEMA",
    "QUARANTINE_SCHEMA",
    "RESULT_SCHEMA",
    "AgentError",
    "AgentLimits",
    "AgentState",
    "ContractError",
    "Failure",
    "HostQuarantine",
    "Progress",
    "RunResult",
    "RunSpec",
    "RunStatus",
    "ServerPhase",
    "ServerProgress",
    "ServerSpec",
    "Shard",
    "SweepDir",
    "load_result",
]
