"""What the agent's exit status says: the controller reads it (a channel's start, a unit's
ExecMainStatus) and the agent unit's RestartPreventExitStatus is rendered from `FINAL`."""

from __future__ import annotations

from enum import IntEnum


class AgentExit(IntEnum):
    OK = 0  # the shard is done, or the agent was asked to stop
    ERROR = 1  # an unexpected error: a restart may help (the agent resumes where it stopped)
    BAD_SHARD = 2  # the sweep dir or its shard cannot be read
    HOST_HELD = 3  # another sweep holds the host's lease (contract/lease.py)
    BUSY = 4  # another agent runs on this sweep dir
    HALTED = 5  # it cannot write results (ENOSPC, EROFS, EDQUOT) and stopped launching servers


# The exits a restart cannot mend: the agent unit stays down after them.
FINAL: tuple[AgentExit, ...] = (AgentExit.BAD_SHARD, AgentExit.HOST_HELD, AgentExit.BUSY, AgentExit.HALTED)
