"""Workload kinds: the host's registry of them. Standard library only.

Each kind is one entry of `KINDS`: the function that drives a workload of the kind against a ready
server (fleet.host.agent.drive calls it) and what a result of it adds to the figures every run
has (fleet.host.agent.results.build_result asks for it). The kinds' code is in this package, a
module for each (dataset and random share `listed`); what they all run through is
fleet.host.agent.driver, and what they produce fleet.host.agent.outcome.

A new kind is one entry here, beside its class on the controller (fleet.workloads.kinds) and its
name in the shard contract (fleet.host.contract.shard.WORKLOAD_KINDS); tests/unit/test_kinds_registry.py
checks that the three agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fleet.host.agent.driver import Driver
from fleet.host.agent.kinds import agentic, concurrency, listed, long_context, short, tool
from fleet.host.agent.outcome import Measured, WorkloadOutcome, repeat_extras


@dataclass(frozen=True)
class Kind:
    """What the agent does with a workload of one kind."""

    # Runs the workload against the driver's server, filling the outcome (its requests, sections,
    # extras, deviations, planned count and, if it could not finish, its failure).
    drive: Callable[[Driver, WorkloadOutcome], None]
    # What its result adds to its `extras`, after the outcome's own.
    result_extras: Callable[[Measured], dict[str, Any]] = repeat_extras
    # False for a workload (the shard's resolved one): the run's top-level figures count requests
    # and tokens but carry no throughput, latency or goodput, which would blend sections that load
    # the server differently (concurrency levels, a saturation search's probes).
    run_wide_rates: Callable[[Mapping[str, Any]], bool] = lambda workload: True


KINDS: dict[str, Kind] = {
    "short": Kind(short.drive),
    "long_context": Kind(long_context.drive),
    "concurrency": Kind(concurrency.drive, concurrency.result_extras, run_wide_rates=lambda workload: False),
    "agentic": Kind(agentic.drive, agentic.result_extras),
    # A dataset or random workload may name a client tool (fleet.host.agent.tools) to measure it instead of fleet's client.
    "dataset": Kind(tool.or_fleet(listed.drive_dataset), listed.result_extras, listed.run_wide_rates),
    "random": Kind(tool.or_fleet(listed.drive_random), listed.result_extras, listed.run_wide_rates),
}
