"""The phases one host of a sweep goes through under its loop (fleet.sweep.driver.HostDriver),
each change of phase a named transition on its `HostStatus` (fleet.sweep.hoststatus.Phase):

    WAITING     --shipping-->      SHIPPING     agent code, shard and units going to the host
    SHIPPING    --started-->       RUNNING      the agent started
    RUNNING     --unreachable-->   UNREACHABLE  a poll went unanswered
    any         --answered-->      RUNNING      a poll answered
    RUNNING     --rebooted-->      RECOVERING   a new boot id: re-provisioned, then started
    RUNNING     --repairing-->     REPAIRING    a repair round: shard extended, then started
    RUNNING     --ran_dry-->       FINISHED     its agent ran dry: waiting for work (the balancer's)
    FINISHED    --started-->       RUNNING      took work, or an agent started again for missing runs
    RUNNING     --ended-->         FINISHED | STOPPED | FAILED | DETACHED   the agent ended
    UNREACHABLE --lost-->          LOST         unreachable past its deadline, or a fault no retry mends
    any         --failed-->        FAILED       the controller gave up on the host (a FleetError)
    any         --detached-->      DETACHED     the controller left; the agent works on
    any         --folder_unwritable--> DETACHED the controller's results folder cannot be written

A host LOST or FAILED is given up on (`given_up`): nothing is pulled from it again and its runs
move to the live hosts. The loop decides when; these say what each change does to the status."""

from __future__ import annotations

import logging

from fleet.sweep.hoststatus import HostStatus, Phase

log = logging.getLogger("fleet.sweep")

# A host the controller gave up on: its agent is stopped, its runs go to the live hosts.
GIVEN_UP = (Phase.FAILED, Phase.LOST)


def given_up(status: HostStatus) -> bool:
    return status.phase in GIVEN_UP


def shipping(status: HostStatus) -> None:
    """Agent code, shard and units are going to the host."""
    status.phase = Phase.SHIPPING


def started(status: HostStatus) -> None:
    """An agent was started on the host (first, after a reboot, a repair round, work taken, a rerun)."""
    status.phase = Phase.RUNNING


def answered(status: HostStatus) -> None:
    """A poll answered: the host is reachable, its agent (as far as the loop knows) at work."""
    status.phase = Phase.RUNNING


def unreachable(status: HostStatus) -> None:
    """A poll went unanswered, not yet for long enough to give the host up; the agent may work on."""
    status.phase = Phase.UNREACHABLE


def lost(status: HostStatus, why: str) -> None:
    """Given up for good: unreachable past the deadline, or a fault no retry can mend."""
    status.phase = Phase.LOST
    status.last_error = why
    log.error("%s: %s", status.host, status.last_error)


def failed(status: HostStatus, error: Exception) -> None:
    """The controller gave up on this host for `error`."""
    status.phase = Phase.FAILED
    status.last_error = str(error)
    log.error("%s: %s", status.host, error)


def rebooted(status: HostStatus) -> None:
    """A new boot id: the host is re-provisioned (its fast dir is empty, the agent gone)."""
    status.phase = Phase.RECOVERING
    status.reboots += 1
    log.warning("%s: rebooted (boot id %s); re-staging and restarting the agent", status.host, status.boot_id)


def repairing(status: HostStatus) -> None:
    """A repair round: the shard extended (or shipped again), the agent about to start again."""
    status.phase = Phase.REPAIRING


def ran_dry(status: HostStatus) -> None:
    """The agent finished its share: the host waits for work handed over from other hosts."""
    status.phase = Phase.FINISHED


def ended(status: HostStatus, end: Phase, detached: bool) -> None:
    """The agent ended in `end` (fleet.sweep.hoststatus.AGENT_END_STATES, or FAILED for runs left
    without a result twice); DETACHED when the controller is leaving meanwhile."""
    status.phase = Phase.DETACHED if detached else end


def detached(status: HostStatus) -> None:
    """The controller left (its stop event); the agent works on."""
    status.phase = Phase.DETACHED


def folder_unwritable(status: HostStatus, why: str) -> None:
    """The controller's results folder cannot be written: not the host's fault, the loop detaches."""
    status.phase = Phase.DETACHED
    status.last_error = why
