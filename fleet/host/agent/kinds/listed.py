"""`dataset` and `random`: a list of requests (the controller's seeded sample of a dataset, or
random token ids of exact lengths), sent one at a time or open-loop (`load`): on a seeded schedule
of gamma-distributed gaps whether or not earlier ones have finished, each request's lateness
against its schedule recorded (fleet.host.agent.results turns a median above its bound into a
`client_behind` deviation), warm-up requests first and in no figure. With a `load.search`, each
repeat is a saturation search instead: the requests sent once per probe, at the rates
fleet.host.agent.kinds.saturation chooses from the probes before, all against the one server; the
result's `saturation` holds every probe and the capacity found. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fleet.host.agent.client import Prompt, RequestOutcome
from fleet.host.agent.driver import Driver
from fleet.host.agent.kinds.saturation import Probe, SearchSpec, conclusion, next_rate
from fleet.host.agent.outcome import Measured, Sent, WorkloadOutcome, repeat_extras
from fleet.host.agent.senders import Processes, Threads, sender_count, usable_cpus
from fleet.host.agent.slo import goodput

# Token ids of `random` prompts: ordinary tokens of every current vocabulary (Qwen 151k, Llama
# 128k, Mistral 32k), below the special tokens at their ends. sglang's bench_serving draws from the
# whole vocabulary (sglang/benchmark/datasets/random.py:147-153), which fleet's agent does not know.
RANDOM_TOKEN_IDS = (1000, 30000)


@dataclass(frozen=True)
class Planned:
    """One request of a listed workload: what is sent and its tags in the result."""

    prompt: Prompt
    max_new_tokens: int
    tags: dict[str, Any]


def arrival_offsets(count: int, rate: float, burstiness: float, rng: random.Random) -> list[float]:
    """Send times of `count` requests, seconds after the first: gaps drawn from a gamma
    distribution of shape `burstiness` and mean 1/rate, as vllm bench serve draws them
    (vllm/benchmarks/serve.py `get_request`: `theta = 1.0 / (request_rate * burstiness)`,
    `np.random.gamma(shape=burstiness, scale=theta)`; shape 1 is the exponential of a Poisson
    process, sglang 0.5.23 sglang/benchmark/serving.py:1126-1127). The first request goes at once
    (serving.py:1120, a yield before the first sleep); vllm's rescaling of the sum to count/rate is
    left out, so the gaps stay independent draws."""
    offsets = [0.0]
    for _ in range(count - 1):
        offsets.append(offsets[-1] + rng.gammavariate(burstiness, 1.0 / (rate * burstiness)))
    return offsets[:count]


def random_prompt_ids(seed: int, index: int, length: int) -> list[int]:
    """The token ids of request `index` of a `random` workload: exactly `length` of them, the same
    for a seed on every host and run (a string seed is hashed with sha512: stable across processes)."""
    rng = random.Random(f"fleet-random:{seed}:{index}")
    low, high = RANDOM_TOKEN_IDS
    return [rng.randrange(low, high) for _ in range(length)]


def dataset_requests(workload: dict[str, Any], repeat: int) -> list[Planned]:
    """One repeat's requests of a dataset workload: the controller's seeded sample."""
    max_new = int(workload["max_new_tokens"])
    return [
        Planned(sample["prompt"], int(sample.get("output_tokens") or max_new),
                {"repeat": repeat, "request": i, "category": sample.get("category"), "max_new_tokens": int(sample.get("output_tokens") or max_new)})
        for i, sample in enumerate(workload["samples"])
    ]  # fmt: skip


def random_requests(workload: dict[str, Any], repeat: int) -> list[Planned]:
    """One repeat's requests of a random workload: `requests` prompts of exactly `input_tokens` ids."""
    max_new = int(workload["max_new_tokens"])
    count, length = int(workload["requests"]), int(workload["input_tokens"])
    return [Planned(random_prompt_ids(int(workload["seed"]), repeat * count + i, length), max_new, {"repeat": repeat, "request": i}) for i in range(count)]


def sample_sha256(plans: list[Planned]) -> str:
    """A hash of exactly what was asked: prompts (text or ids), output lengths and categories."""
    digest = hashlib.sha256()
    for plan in plans:
        digest.update(json.dumps([plan.prompt, plan.max_new_tokens, plan.tags.get("category")], separators=(",", ":")).encode())
    return digest.hexdigest()


def open_loop(driver: Driver, plans: list[Planned], load: dict[str, Any], rng: random.Random, *, processes: int | None = None) -> tuple[list[Sent], float]:
    """Send `plans` on their schedule, each on a thread of its own so that none waits for another;
    a request the `max_in_flight` cap held back is due when a slot frees, not at its scheduled time
    (the cap is the playbook's choice: only the client's own lateness counts against it).

    The threads, in the agent's process or, for many streams, in several sending processes
    (`processes` of them, else as many as fleet.host.agent.senders.sender_count chooses for the
    streams and this machine's CPUs), are started before the first send and wait for their request;
    a request's lateness is from its due time to a thread taking it up."""
    scale = float(load.get("time_scale") or 1.0)  # wall seconds per engine second
    offsets = arrival_offsets(len(plans), float(load["rate"]), float(load["burstiness"]), rng)
    # As many streams as can be in flight at once: the cap, else every request (an open loop
    # without a cap may have them all in flight).
    streams = min(len(plans), int(load.get("max_in_flight") or len(plans)))
    cap = threading.BoundedSemaphore(load["max_in_flight"]) if load.get("max_in_flight") else None
    sent: list[Sent] = []
    lock = threading.Lock()
    held_by_cap: dict[int, float] = {}

    def finish(index: int, outcome: RequestOutcome | None) -> None:
        if cap is not None:
            cap.release()
        if outcome is not None:
            held = held_by_cap[index]
            with lock:
                sent.append(Sent(outcome, {**plans[index].tags, **({"held_by_cap_s": held} if held else {})}))

    count = processes or sender_count(streams, usable_cpus())
    senders = Threads(streams, driver.send, finish) if count <= 1 else Processes(driver, count, math.ceil(streams / count), finish)
    began = time.monotonic()
    # When the sending loop last got a slot it had to wait for: every request due before then was
    # held by the cap too (the loop could not reach it while it waited), not sent late by the client.
    slot_freed = began
    try:
        for index, (plan, offset) in enumerate(zip(plans, offsets)):
            due = began + offset * scale
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if not driver.gate.open:
                break
            held = 0.0
            if cap is not None:
                if not cap.acquire(blocking=False):
                    cap.acquire()
                    slot_freed = time.monotonic()
                if slot_freed > due:
                    held, due = slot_freed - due, slot_freed
            held_by_cap[index] = held
            senders.put((index, plan.prompt, plan.max_new_tokens, due))
    finally:
        senders.close()
    return sorted(sent, key=lambda s: s.tags["request"]), time.monotonic() - began


def drive_dataset(driver: Driver, out: WorkloadOutcome) -> None:
    drive_listed(driver, out, dataset_requests)


def drive_random(driver: Driver, out: WorkloadOutcome) -> None:
    drive_listed(driver, out, random_requests)


def drive_listed(driver: Driver, out: WorkloadOutcome, requests_of: Callable[[dict[str, Any], int], list[Planned]]) -> None:
    """Each repeat's requests (`requests_of(workload, repeat)`), one at a time or on their schedule."""
    workload = driver.run.workload
    load = workload.get("load")
    repeats = [requests_of(workload, repeat) for repeat in range(driver.run.repeats)]
    out.planned_requests = sum(len(plans) for plans in repeats)
    out.extras["sample_sha256"] = sample_sha256([plan for plans in repeats for plan in plans])
    warmup = int(load.get("warmup_requests") or 0) if load else 0
    if warmup:
        # One at a time, before anything is measured, and in no figure (bench_serving's --warmup-requests).
        plans = repeats[0]
        outcomes = [driver.send(plans[i % len(plans)].prompt, plans[i % len(plans)].max_new_tokens) for i in range(warmup) if driver.gate.open]
        out.extras["warmup"] = {"requests": len(outcomes), "ok": sum(1 for o in outcomes if o.ok)}
    if load and load.get("search"):
        # Each probe's requests are planned when the search chooses it; the hash covers them all.
        out.planned_requests = 0
        asked = [plan for repeat in range(driver.run.repeats) for plan in search(driver, out, requests_of, repeat)]
        out.extras["sample_sha256"] = sample_sha256(asked)
        return
    for repeat, plans in enumerate(repeats):
        driver.gate.checkpoint()
        if not driver.gate.open:
            return
        if load is None:
            for plan in plans:
                if not driver.gate.open:
                    return
                driver.timed(out, plan.prompt, plan.max_new_tokens, plan.tags)
            continue
        sent, wall = open_loop(driver, plans, load, random.Random(int(load.get("seed") or 0) + repeat))
        out.sent.extend(sent)
        out.measured({"repeat": repeat}, wall)


def search(driver: Driver, out: WorkloadOutcome, requests_of: Callable[[dict[str, Any], int], list[Planned]], repeat: int) -> list[Planned]:
    """One saturation search: probes at the rates the search chooses until it has its answer, each
    a section of its own (`repeat`, `probe`, `rate`); returns every request it planned. A probe is
    judged as the result will judge it (fleet.host.agent.slo.goodput)."""
    workload = driver.run.workload
    load = workload["load"]
    spec = SearchSpec.from_load(load)
    scale = float(load.get("time_scale") or 1.0)
    probes: list[Probe] = []
    asked: list[Planned] = []
    while (rate := next_rate(spec, probes)) is not None:
        driver.gate.checkpoint()
        if not driver.gate.open:
            break
        index = len(probes)
        # Each probe its own requests (a random workload's ids differ; a dataset's sample repeats)
        # and its own arrivals: requests_of and the seed take the probe's place among all probes.
        place = repeat * spec.max_probes + index
        plans = [Planned(p.prompt, p.max_new_tokens, {**p.tags, "repeat": repeat, "probe": index, "rate": rate}) for p in requests_of(workload, place)]
        out.planned_requests += len(plans)
        asked.extend(plans)
        sent, wall = open_loop(driver, plans, {**load, "rate": rate}, random.Random(int(load.get("seed") or 0) + place))
        out.sent.extend(sent)
        out.measured({"repeat": repeat, "probe": index, "rate": rate}, wall)
        # The SLOs in wall seconds, as the outcomes are: the same verdict as in the result's time.
        attainment = goodput([s.outcome for s in sent], {name: limit * scale for name, limit in workload["slo"].items()}, wall)["slo_attainment"]
        probes.append(Probe(rate, attainment))
    return asked


def run_wide_rates(workload: Mapping[str, Any]) -> bool:
    """A search's probes load the server at different rates: no figure blends them."""
    return not (workload.get("load") or {}).get("search")


def result_extras(measured: Measured) -> dict[str, Any]:
    """A search's `saturation`: one entry per repeat, every probe's figures (its goodput and SLO
    attainment, TTFT and TPOT among them) and what they establish; otherwise each repeat's figures."""
    load = measured.workload.get("load") or {}
    if not load.get("search"):
        return repeat_extras(measured)
    spec = SearchSpec.from_load(load)
    slo = measured.workload["slo"]
    searches: dict[int, list[dict[str, Any]]] = {}
    for section in measured.sections:
        members = [s for s in measured.sent if section.holds(s)]
        figures = measured.figures_of(members, section.wall_s)
        good = goodput([s.outcome for s in members], slo, figures["wall_s"] or 0.0)
        searches.setdefault(section.key["repeat"], []).append({**section.key, **figures, "goodput": good})
    entries = []
    for repeat, probes in sorted(searches.items()):
        found = conclusion(spec, [Probe(p["rate"], p["goodput"]["slo_attainment"]) for p in probes])
        for probe in probes:
            probe["passed"] = Probe(probe["rate"], probe["goodput"]["slo_attainment"]).passed(spec.target)
        entries.append({"repeat": repeat, "verdict": found.verdict, "capacity_rate": found.capacity, "bracket": [found.low, found.high], "probes": probes})
    return {"saturation": {"target": spec.target, "rates": [spec.low, spec.high], "tolerance": spec.tolerance, "max_probes": spec.max_probes, "slo_s": dict(slo), "searches": entries}}
