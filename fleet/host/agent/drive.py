"""Driving a ready server through one run's workload. Standard library only.

The workload arrives resolved by the controller (fleet.workloads.resolve_workload); what depends
on the server is settled on the host, with the server's own answers, by the driver of the
workload's kind -- its entry in fleet.host.agent.kinds, its code a module of that package:
- `short` (kinds.short): `rounds` passes over the prompts per repeat;
- `long_context` (kinds.long_context): the prompt sized by the server's own token count, a few
  calibration requests; a prompt the server's context or KV pool made shorter than asked for is a
  `prompt_cut` deviation (the run is then `not_comparable`, fleet.host.agent.results);
- `concurrency` (kinds.concurrency): levels `auto` are 1, 2, 4, ... up to the server's effective
  max_running_requests; requests per level: the playbook's `requests_per_level`, else
  `requests_at_level` (fleet.host.agent.driver) -- enough for a p90 at every level, and two
  rounds of the level's width;
- `agentic` (kinds.agentic): concurrent multi-turn sessions that reuse their whole prefix;
- `dataset` and `random` (kinds.listed): their requests one at a time, or open-loop (`load`) on a
  seeded schedule, each request's lateness against it recorded, warm-up requests in no figure.

Every measured request goes through one `Gate` (fleet.host.agent.driver): after an error that may
mean the server is gone (timeout, reset, refused), and between sections, the server's liveness is
checked; once it has failed no further request is sent, and the run ends with that failure as its
evidence.
"""

from __future__ import annotations

from fleet.host.agent.driver import Driver
from fleet.host.agent.kinds import KINDS
from fleet.host.agent.outcome import WorkloadOutcome


def drive(driver: Driver) -> WorkloadOutcome:
    """Run the driver's workload by its kind's driver; a failure of the gate is the run's own."""
    handler = KINDS[driver.run.workload["kind"]].drive
    out = WorkloadOutcome()
    handler(driver, out)
    if out.failure is None:
        out.failure = driver.gate.failure
    return out
