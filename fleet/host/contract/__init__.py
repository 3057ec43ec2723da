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

from fleet.host.contract.layout import SweepDir
from fleet.host.contract.progress import PROGRESS_SCHEMA, AgentError, AgentState, Progress, ServerPhase, ServerProgress
from fleet.host.contract.quarantine import QUARANTINE_SCHEMA, HostQuarantine
from fleet.host.contract.results import RESULT_SCHEMA, Failure, RunResult, RunStatus, load_result
from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
from fleet.host.errors import ContractError

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
