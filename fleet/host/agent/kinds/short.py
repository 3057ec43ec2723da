"""`short`: a few library prompts, one request at a time. Standard library only."""

from __future__ import annotations

from fleet.host.agent.driver import Driver
from fleet.host.agent.outcome import WorkloadOutcome


def drive(driver: Driver, out: WorkloadOutcome) -> None:
    """`rounds` passes over the prompts per repeat (fleet.workloads sizes them for a p90)."""
    workload = driver.run.workload
    rounds = int(workload.get("rounds") or 1)
    out.planned_requests = driver.run.repeats * rounds * len(workload["prompts"])
    for repeat in range(driver.run.repeats):
        if repeat:
            driver.gate.checkpoint()
        for round_ in range(rounds):
            for prompt in workload["prompts"]:
                if not driver.gate.open:
                    return
                driver.timed(out, prompt["text"], workload["max_new_tokens"], {"repeat": repeat, "round": round_, "prompt": prompt["name"]})
