"""`concurrency`: one prompt at widening concurrency levels, each level of each repeat a section of
its own. Levels `auto`: 1, 2, 4, ... up to the server's effective max_running_requests; requests
per level: fleet.host.agent.driver.requests_at_level. Standard library only.

Its result has figures per level (`levels`) and no run-wide throughput or latency, which would
blend levels that load the server differently.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from fleet.host.agent.driver import Driver, requests_at_level
from fleet.host.agent.outcome import Measured, Sent, WorkloadOutcome
from fleet.host.contract import Failure
from fleet.host.failures import FailureClass

UNKNOWN_MAX_RUNNING = FailureClass.UNKNOWN_MAX_RUNNING.value


def auto_levels(max_running: int) -> list[int]:
    """1, 2, 4, ... below max_running, then max_running itself."""
    levels = []
    level = 1
    while level < max_running:
        levels.append(level)
        level *= 2
    levels.append(max_running)
    return levels


def parallel(driver: Driver, prompt: str, max_new: int, count: int, width: int, tags: dict[str, Any]) -> tuple[list[Sent], float]:
    """`count` requests, `width` at a time; (what was sent, wall seconds from first send to last end)."""
    sent: list[Sent] = []
    lock = threading.Lock()
    issued = 0

    def worker() -> None:
        nonlocal issued
        while True:
            with lock:
                if issued >= count or not driver.gate.open:
                    return
                index = issued
                issued += 1
            outcome = driver.send(prompt, max_new)
            with lock:
                sent.append(Sent(outcome, {**tags, "request": index}))

    began = time.monotonic()
    threads = [threading.Thread(target=worker, name=f"level{width}-{i}", daemon=True) for i in range(width)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(sent, key=lambda s: s.tags["request"]), time.monotonic() - began


def drive(driver: Driver, out: WorkloadOutcome) -> None:
    """Each level of each repeat is its own section, with figures of its own (result_extras)."""
    workload = driver.run.workload
    if workload["levels"] == "auto":
        if driver.facts.max_running_requests is None:
            out.failure = Failure(UNKNOWN_MAX_RUNNING, "levels `auto` needs the server's max_running_requests: neither /server_info nor the log gave it")
            return
        levels = auto_levels(driver.facts.max_running_requests)
    else:
        levels = list(workload["levels"])
    out.planned_requests = driver.run.repeats * sum(requests_at_level(level, workload["requests_per_level"]) for level in levels)
    for repeat in range(driver.run.repeats):
        for level in levels:
            driver.gate.checkpoint()
            if not driver.gate.open:
                return
            count = requests_at_level(level, workload["requests_per_level"])
            key = {"repeat": repeat, "level": level}
            counted = driver.spec_counters()
            sent, wall = parallel(driver, workload["prompt"]["text"], workload["max_new_tokens"], count, level, key)
            out.sent.extend(sent)
            out.measured(key, wall, driver.acceptance_since(counted))


def result_extras(measured: Measured) -> dict[str, Any]:
    """Figures per level of each repeat: the run-wide ones would blend the levels."""
    return {"levels": measured.section_figures()}
