"""A `random` or `dataset` workload measured by one of the field's load generators instead of
fleet's client (its `client`, fleet.host.agent.tools): each repeat is one run of the tool on this
host, by the interpreter the workload names, against the ready server, with the workload's lengths
(a dataset's: the samples fleet's client would send, written in the tool's own format), requests
and arrivals; the tool's own output file becomes the repeat's requests, so that the result's
figures are made as any other run's are. Standard library only.

The tool is a child process of the agent: a stop (the gate closing) ends it, and one that outlives
every request's time-out is ended and fails the run, as a hung request does fleet's client.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from fleet.host.agent.driver import Driver
from fleet.host.agent.kinds.listed import Planned, dataset_requests, sample_sha256
from fleet.host.agent.outcome import Sent, WorkloadOutcome
from fleet.host.agent.tools import TOOLS, Tool, ToolLoad, ToolOutput, ToolTarget, in_sample_order
from fleet.host.contract import Failure
from fleet.host.failures import FailureClass

# Start-up a tool may take before its first request (imports, tokenizer, its own warm-up): AIPerf's
# services took about 10 s on a 2-core test machine, bench_serving's imports about 8 s.
STARTUP_ALLOWANCE_S = 300.0
POLL_S = 0.5
OUTPUT_TAIL = 3000  # characters of the tool's own output kept in a failure's message


def tool_load(workload: Mapping[str, Any], repeat: int, planned: Sequence[Planned] | None = None) -> ToolLoad:
    """The tool's load for one repeat: the workload's, its rate in wall time (the workload's is in
    engine time: a sim host runs time_scale wall seconds per engine second), its seed the repeat's
    (fleet's own client draws other ids per repeat too). A dataset workload's requests are
    `planned`: the ones fleet's client would send (listed.dataset_requests)."""
    load = workload.get("load")
    scale = float(load.get("time_scale") or 1.0) if load else 1.0
    dataset = tuple((str(plan.prompt), plan.max_new_tokens) for plan in planned) if planned is not None else ()
    return ToolLoad(
        input_tokens=int(workload.get("input_tokens") or 0),
        output_tokens=int(workload["max_new_tokens"]),
        requests=len(dataset) if dataset else int(workload["requests"]),
        # A dataset's seed drew its sample on the controller; the tool's draws only arrivals: the load's.
        seed=(int(load.get("seed") or 0) if load else 0) + repeat if dataset else int(workload["seed"]) + repeat,
        rate=float(load["rate"]) / scale if load else None,
        burstiness=float(load.get("burstiness") or 1.0) if load else 1.0,
        max_in_flight=int(load["max_in_flight"]) if load and load.get("max_in_flight") else None,
        warmup_requests=int(load.get("warmup_requests") or 0) if load else 0,
        dataset=dataset,
    )


def run_tool(driver: Driver, tool: Tool, python: str, target: ToolTarget, load: ToolLoad, out: Path) -> tuple[float, Failure | None]:
    """The tool once, writing under `out`: the epoch second it started and, if it did not finish, why."""
    # The plan refused such a sample already (fleet.workloads.kinds); a shard written otherwise is refused here.
    refusal = tool.dataset_refusal(load.dataset) if load.dataset else None
    if refusal is not None:
        return time.time(), Failure(FailureClass.CLIENT_TOOL_FAILED.value, f"{tool.title} cannot be given these requests: {refusal}")
    for name, text in tool.inputs(target, load, str(out)).items():
        (out / name).write_text(text, encoding="utf-8")
    argv = [python, *tool.argv(target, load, str(out))]
    log = out / "tool.log"
    # Every request may take its whole time-out, `concurrency` of them at once (one: no cap known).
    rounds = -(-load.requests // (load.concurrency or 1)) + load.warmup_requests
    deadline = time.monotonic() + STARTUP_ALLOWANCE_S + rounds * driver.limits.request_timeout_s
    started = time.time()
    with open(log, "wb") as sink:
        try:
            process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(out))
        except OSError as exc:
            return started, Failure(FailureClass.CLIENT_TOOL_FAILED.value, f"{tool.title} could not be started with {python}: {exc}")
        while process.poll() is None:
            if not driver.gate.open or time.monotonic() > deadline:
                process.kill()
                process.wait()
                if not driver.gate.open:
                    return started, driver.gate.failure
                return started, Failure(
                    FailureClass.CLIENT_TOOL_FAILED.value,
                    f"{tool.title} ran past {deadline - started:.0f} s ({rounds} rounds of the request time-out and {STARTUP_ALLOWANCE_S:.0f} s to start)",
                    (_tail(log),),
                )
            time.sleep(POLL_S)
    if process.returncode != 0:
        return started, Failure(FailureClass.CLIENT_TOOL_FAILED.value, f"{tool.title} ({' '.join(argv[:3])} ...) exited {process.returncode}", (_tail(log),))
    return started, None


def _tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-OUTPUT_TAIL:]


def drive(driver: Driver, out: WorkloadOutcome) -> None:
    """Each repeat: the tool once; its requests are the repeat's, its own duration the repeat's wall time."""
    workload = driver.run.workload
    client = workload["client"]
    tool = TOOLS[client["tool"]]
    # A dataset's requests as fleet's client plans them: their tags (category, output length) go to
    # the tool's requests matched to them (tool_sent), and their hash is the run's sample_sha256.
    plans = [dataset_requests(workload, repeat) if workload["kind"] == "dataset" else None for repeat in range(driver.run.repeats)]
    out.planned_requests = sum(len(p) if p is not None else int(workload["requests"]) for p in plans)
    if workload["kind"] == "dataset":
        out.extras["sample_sha256"] = sample_sha256([plan for repeat in plans if repeat for plan in repeat])
    if driver.facts.served_model is None:  # every tool sends the model's name, as the server lists it
        out.failure = Failure(FailureClass.CLIENT_TOOL_FAILED.value, f"the server named no model (/v1/models), which {tool.title} must send")
        return
    target = ToolTarget(driver.client.endpoint.host, driver.client.endpoint.port, driver.facts.served_model, driver.client.api, client.get("tokenizer"))
    stated = []
    for repeat in range(driver.run.repeats):
        driver.gate.checkpoint()
        if not driver.gate.open:
            return
        load = tool_load(workload, repeat, plans[repeat])
        with tempfile.TemporaryDirectory(prefix=f"fleet-{tool.name}-") as folder:
            started, failure = run_tool(driver, tool, client["python"], target, load, Path(folder))
            if failure is not None or not driver.gate.open:  # a stop ended the tool: nothing of it is read
                out.failure = failure
                return
            try:
                output = tool.read(Path(folder), started)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                out.failure = Failure(FailureClass.CLIENT_TOOL_FAILED.value, f"{tool.title}'s output could not be read: {exc}", (_tail(Path(folder) / "tool.log"),))
                return
            try:
                out.sent.extend(tool_sent(tool, output, load, plans[repeat], repeat))
            except ValueError as exc:  # its requests are not the samples it was given
                out.failure = Failure(FailureClass.CLIENT_TOOL_FAILED.value, str(exc), (_tail(Path(folder) / "tool.log"),))
                return
        out.measured({"repeat": repeat}, output.wall_s)
        stated.append({"repeat": repeat, "wall_s": output.wall_s, **output.stated})
    # What the tool itself printed, in its wall time: a check of fleet's reading of its records.
    out.extras["tool"] = {"name": tool.name, "python": client["python"], "stated": stated}


def tool_sent(tool: Tool, output: ToolOutput, load: ToolLoad, planned: Sequence[Planned] | None, repeat: int) -> list[Sent]:
    """The repeat's requests with their tags: a dataset's each with its own sample's (in_sample_order
    matches them), a random workload's in the order the tool wrote them."""
    if planned is None:
        return [Sent(outcome, {"repeat": repeat, "request": i}) for i, outcome in enumerate(output.requests)]
    return [Sent(outcome, plan.tags) for outcome, plan in zip(in_sample_order(tool, output, load), planned)]


def or_fleet(drive_with_fleet: Callable[[Driver, WorkloadOutcome], None]) -> Callable[[Driver, WorkloadOutcome], None]:
    """A kind's driver that hands a workload naming a client tool to `drive`."""

    def dispatch(driver: Driver, out: WorkloadOutcome) -> None:
        (drive if driver.run.workload.get("client") else drive_with_fleet)(driver, out)

    return dispatch
