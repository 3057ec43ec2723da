"""Driving a ready server through one run's workload. Standard library only.

The workload arrives resolved by the controller (fleet.workloads.resolve_workload); what depends
on the server is settled here, with the server's own answers:
- long context: the prompt is sized by the server's token count -- calibration requests with
  max_new_tokens=1 read `meta_info.prompt_tokens` (or the count an over-context 400 reports), and
  the text is cut by characters (interpolation search, a few requests) until
  prompt + max_new_tokens + margin fits the context length;
- concurrency `auto`: 1, 2, 4, ... up to the server's effective max_running_requests;
- requests per level: the playbook's `requests_per_level`, else `requests_at_level` -- enough
  for a p90 at every level (fleet.host.agent.stats), and two rounds of the level's width.
- dataset and random workloads: their requests one at a time, or open-loop (`load`): sent on a
  seeded schedule of gamma-distributed gaps whether or not earlier ones have finished, each
  request's lateness against its schedule recorded (fleet.host.agent.results turns a median above
  its bound into a `client_behind` deviation), warm-up requests first and in no figure.

What cannot run as the workload defines it is recorded as a deviation (the run is then
`not_comparable`, fleet.host.agent.results): a long-context prompt that the server's context or
KV pool made shorter than asked for.

Every measured request goes through one `Gate`: after an error that may mean the server is gone
(timeout, reset, refused), and between sections, the server's liveness is checked; once it has
failed no further request is sent, and the run ends with that failure as its evidence.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fleet.host.agent.client import HTTP_400_CONTEXT, LIVENESS_SUSPECT, Client, Prompt, RequestOutcome, prompt_tokens_in_error
from fleet.host.agent.results import PROMPT_CUT, Sent, WorkloadOutcome
from fleet.host.agent.stats import min_samples
from fleet.host.contract import Failure
from fleet.host.contract.results import Deviation
from fleet.host.contract.shard import AgentLimits, RunSpec
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import ReleaseError
from fleet.host.failures import FailureClass

MAX_CALIBRATION_PROBES = 5
UNKNOWN_MAX_RUNNING = FailureClass.UNKNOWN_MAX_RUNNING.value
CALIBRATION_FAILED = FailureClass.CALIBRATION_FAILED.value
CONTEXT_TOO_SMALL = FailureClass.CONTEXT_TOO_SMALL.value
# A concurrency level's default sample: enough requests for its p90.
MIN_REQUESTS_PER_LEVEL = min_samples(90)


def requests_at_level(level: int, requests_per_level: int | None) -> int:
    """How many requests a concurrency level sends: the playbook's count, else enough for a p90
    and at least two rounds of `level` requests in flight. The controller's ETA uses it too."""
    return requests_per_level or max(MIN_REQUESTS_PER_LEVEL, 2 * level)


@dataclass(frozen=True)
class ServerFacts:
    """What the server says about itself, and where each figure came from."""

    context_len: int | None = None
    max_running_requests: int | None = None  # effective, after the engine's own clamps
    served_model: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    # The longest prompt the scheduler takes: below context_len when the KV pool is smaller.
    max_req_input_len: int | None = None
    engine_version: str | None = None  # /server_info `version`: the SGLang version serving (or the one the sim plays)

    @property
    def engine_release(self) -> str | None:
        """The known release nearest the version the server reports."""
        if self.engine_version is None:
            return None
        try:
            return engine_named().choose_release(self.engine_version).release
        except ReleaseError:
            return None

    @property
    def prompt_room(self) -> int | None:
        """Tokens a prompt and its new tokens may use together."""
        limits = [n for n in (self.context_len, self.max_req_input_len) if n is not None]
        return min(limits) if limits else None

    def to_json(self) -> dict[str, Any]:
        return {
            "context_len": self.context_len,
            "max_req_input_len": self.max_req_input_len,
            "max_running_requests": self.max_running_requests,
            "served_model": self.served_model,
            "engine_version": self.engine_version,
            "sources": dict(self.sources),
        }


class Gate:
    """Whether requests may still be sent to this server, shared by a run's threads."""

    def __init__(self, liveness: Callable[[], Failure | None], stopping: threading.Event) -> None:
        self._liveness = liveness
        self._stopping = stopping
        self._lock = threading.Lock()
        self.failure: Failure | None = None

    @property
    def open(self) -> bool:
        return self.failure is None and not self._stopping.is_set()

    def checkpoint(self) -> None:
        """Check the server (between sections, or after a suspicious error)."""
        with self._lock:
            if self.failure is None and not self._stopping.is_set():
                self.failure = self._liveness()


@dataclass
class Driver:
    client: Client
    limits: AgentLimits
    facts: ServerFacts
    gate: Gate
    run: RunSpec

    def send(self, prompt: Prompt, max_new_tokens: int) -> RequestOutcome:
        outcome = self.client.generate(
            prompt,
            max_new_tokens,
            deadline_s=self.limits.request_timeout_s,
            no_token_timeout_s=self.limits.no_token_timeout_s,
        )
        if outcome.error_class in LIVENESS_SUSPECT:
            self.gate.checkpoint()
        return outcome

    def timed(self, out: WorkloadOutcome, prompt: Prompt, max_new_tokens: int, tags: dict[str, Any]) -> RequestOutcome:
        """One request on its own; its wall time counts towards its repeat's section."""
        began = time.monotonic()
        outcome = self.send(prompt, max_new_tokens)
        out.measured({"repeat": tags["repeat"]}, time.monotonic() - began)
        out.sent.append(Sent(outcome, tags))
        return outcome


def drive(driver: Driver) -> WorkloadOutcome:
    kind = driver.run.workload["kind"]
    handler = {
        "short": _short, "long_context": _long_context, "concurrency": _concurrency, "agentic": _agentic, "dataset": _listed, "random": _listed,
    }[kind]  # fmt: skip
    out = WorkloadOutcome()
    handler(driver, out)
    if out.failure is None:
        out.failure = driver.gate.failure
    return out


# ---------------------------------------------------------------------------------------------
# short


def _short(driver: Driver, out: WorkloadOutcome) -> None:
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


# ---------------------------------------------------------------------------------------------
# long context


@dataclass(frozen=True)
class Probe:
    chars: int
    prompt_tokens: int | None  # None: the server refused it and did not say how long it was
    error: str | None = None


def calibration_tolerance(target: int) -> int:
    """How far under the target a prompt may stay: 0.5 % (16 tokens at least). Closer costs more
    calibration requests: characters per token wobble locally (digits, code, long words)."""
    return max(16, target // 200)


def next_probe_chars(probes: list[Probe], target: int, body_chars: int) -> int:
    """Where to cut the body next. Token counts grow about linearly with characters, so: the
    secant through the two counted probes that bracket the target, or else the two nearest it on
    one side, or else the line through the origin and the only count; halve when nothing has a
    count yet (the server refused the prompt without saying how long it was). Aims half a
    tolerance under the target, so that local wobble in characters per token does not overshoot."""
    aim = target - calibration_tolerance(target) // 2
    counted = sorted((p for p in probes if p.prompt_tokens is not None), key=lambda p: p.chars)
    under = [p for p in counted if p.prompt_tokens <= target]  # type: ignore[operator]
    over = [p for p in counted if p.prompt_tokens > target]  # type: ignore[operator]
    refused = [p.chars for p in probes if p.prompt_tokens is None]
    ceiling = min([body_chars + 1, *refused, *(p.chars for p in over)])
    floor = under[-1].chars if under else 0
    if not counted:
        return ceiling // 2
    if under and over:
        a, b = under[-1], over[0]
    elif len(under) >= 2:
        a, b = under[-2], under[-1]
    elif len(over) >= 2:
        a, b = over[0], over[1]
    else:
        a, b = Probe(0, 0), counted[0]
    if b.prompt_tokens == a.prompt_tokens:
        guess = (floor + ceiling) // 2
    else:
        slope = (b.chars - a.chars) / (b.prompt_tokens - a.prompt_tokens)  # type: ignore[operator]
        guess = a.chars + int((aim - a.prompt_tokens) * slope)  # type: ignore[operator]
    return min(max(guess, floor + 1), ceiling - 1)


def calibration_done(probes: list[Probe], target: int, body_chars: int) -> bool:
    under = [p for p in probes if p.prompt_tokens is not None and p.prompt_tokens <= target]
    if not under:
        return False
    best = max(under, key=lambda p: p.prompt_tokens or 0)
    return target - (best.prompt_tokens or 0) <= calibration_tolerance(target) or best.chars >= body_chars


def prompt_cut(requested: int, chosen: int, room: int | None, max_new: int, margin: int) -> Deviation | None:
    """A deviation when the measured prompt is shorter than the workload's by more than the
    calibration's tolerance: its figures then describe a shorter prompt than its neighbours'."""
    if requested - chosen <= calibration_tolerance(requested):
        return None
    why = f"the server takes {room} tokens, less {max_new} new and a {margin}-token margin" if room is not None else "the corpus ran out"
    return Deviation(PROMPT_CUT, f"prompt cut to {chosen} of {requested} tokens: {why}")


def _long_context(driver: Driver, out: WorkloadOutcome) -> None:
    workload = driver.run.workload
    max_new = workload["max_new_tokens"]
    room = driver.facts.prompt_room
    target = workload["prompt_tokens"]
    if room is not None:
        target = min(target, room - max_new - workload["margin_tokens"])
    if target <= 0:
        out.failure = Failure(
            CONTEXT_TOO_SMALL,
            f"a context of {room} tokens leaves no room for a prompt next to {max_new} new tokens and a "
            f"{workload['margin_tokens']}-token margin",
        )
        return
    body = workload["corpus"]
    # The shard carries a generous slice; repeat it if the server still counts too few tokens.
    while len(body) < target * 6:
        body += "\n\n" + workload["corpus"]

    def prompt(index: int, chars: int) -> str:
        # A per-request tag at the very start: no two requests share a cacheable prefix, so the
        # calibration requests do not warm the prefix cache for the measured ones.
        return f"[{driver.run.run_id} #{index:03d}] {workload['instruction']}\n\n{body[:chars]}\n\n{workload['question']}"

    probes: list[Probe] = []
    chars = min(len(body), target * 3)
    while len(probes) < MAX_CALIBRATION_PROBES and driver.gate.open:
        probe_outcome = driver.send(prompt(900 + len(probes), chars), 1)
        if probe_outcome.ok and probe_outcome.prompt_tokens is not None:
            probes.append(Probe(chars, probe_outcome.prompt_tokens))
        elif probe_outcome.error_class == HTTP_400_CONTEXT:
            probes.append(Probe(chars, prompt_tokens_in_error(probe_outcome.error_message or ""), probe_outcome.error_message))
        else:
            out.failure = driver.gate.failure or Failure(
                CALIBRATION_FAILED,
                f"a calibration request failed: {probe_outcome.error_class}: {probe_outcome.error_message}",
            )
            break
        if calibration_done(probes, target, len(body)):
            break
        chars = next_probe_chars(probes, target, len(body))
    under = [p for p in probes if p.prompt_tokens is not None and p.prompt_tokens <= target]
    chosen = max(under, key=lambda p: p.chars) if under else None
    out.extras["calibration"] = {
        "target_prompt_tokens": target,
        "requested_prompt_tokens": workload["prompt_tokens"],
        "context_len": driver.facts.context_len,
        "max_req_input_len": driver.facts.max_req_input_len,
        "max_new_tokens": max_new,
        "margin_tokens": workload["margin_tokens"],
        "probes": [{"chars": p.chars, "prompt_tokens": p.prompt_tokens, "error": p.error} for p in probes],
        "chosen_chars": chosen.chars if chosen else None,
        "chosen_prompt_tokens": chosen.prompt_tokens if chosen else None,
    }
    if chosen is None:
        if out.failure is None and driver.gate.open:
            out.failure = Failure(
                CALIBRATION_FAILED, f"no cut of the corpus fitted {target} prompt tokens in {len(probes)} calibration requests"
            )
        return
    cut = prompt_cut(workload["prompt_tokens"], chosen.prompt_tokens or 0, room, max_new, workload["margin_tokens"])
    if cut is not None:
        out.deviations.append(cut)
    out.planned_requests = driver.run.repeats * workload["requests"]
    for repeat in range(driver.run.repeats):
        for index in range(workload["requests"]):
            if not driver.gate.open:
                return
            driver.timed(out, prompt(index + repeat * workload["requests"], chosen.chars), max_new, {"repeat": repeat, "request": index})


# ---------------------------------------------------------------------------------------------
# concurrency


def auto_levels(max_running: int) -> list[int]:
    """1, 2, 4, ... below max_running, then max_running itself."""
    levels = []
    level = 1
    while level < max_running:
        levels.append(level)
        level *= 2
    levels.append(max_running)
    return levels


def _parallel(driver: Driver, prompt: str, max_new: int, count: int, width: int, tags: dict[str, Any]) -> tuple[list[Sent], float]:
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


def _concurrency(driver: Driver, out: WorkloadOutcome) -> None:
    """Each level of each repeat is its own section: fleet.host.agent.results gives it its own figures."""
    workload = driver.run.workload
    if workload["levels"] == "auto":
        if driver.facts.max_running_requests is None:
            out.failure = Failure(
                UNKNOWN_MAX_RUNNING, "levels `auto` needs the server's max_running_requests: neither /server_info nor the log gave it"
            )
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
            sent, wall = _parallel(driver, workload["prompt"]["text"], workload["max_new_tokens"], count, level, key)
            out.sent.extend(sent)
            out.measured(key, wall)


# ---------------------------------------------------------------------------------------------
# agentic


def _agentic(driver: Driver, out: WorkloadOutcome) -> None:
    workload = driver.run.workload
    chat = workload["chat"]
    lock = threading.Lock()

    def fill(template: str, content: str) -> str:
        return template.replace("{content}", content)

    def session(number: int, repeat: int) -> None:
        task = workload["tasks"][number % len(workload["tasks"])]
        prompt = fill(chat["system"], workload["system"]) + fill(chat["user"], task) + chat["assistant_open"]
        for turn in range(workload["turns"]):
            if not driver.gate.open:
                return
            outcome = driver.send(prompt, workload["max_new_tokens"])
            with lock:
                out.sent.append(Sent(outcome, {"repeat": repeat, "session": number, "turn": turn}))
            if not outcome.ok:
                return  # the conversation cannot go on without the answer
            result = workload["tool_results"][turn % len(workload["tool_results"])]
            # The next prompt is this one plus the answer and a tool result: the whole prefix is reused.
            prompt += outcome.text + chat["assistant_close"] + fill(chat["tool"], result) + chat["assistant_open"]

    out.planned_requests = driver.run.repeats * workload["sessions"] * workload["turns"]
    for repeat in range(driver.run.repeats):
        driver.gate.checkpoint()
        if not driver.gate.open:
            break
        began = time.monotonic()
        threads = [
            threading.Thread(target=session, args=(number, repeat), name=f"session{number}", daemon=True)
            for number in range(workload["sessions"])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        out.measured({"repeat": repeat}, time.monotonic() - began)
    # Per-turn figures are made with the others, in fleet.host.agent.results.
    out.sent.sort(key=lambda s: (s.tags["repeat"], s.tags["session"], s.tags["turn"]))


# ---------------------------------------------------------------------------------------------
# dataset and random: a list of requests, one at a time or open-loop

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


def planned_requests(workload: dict[str, Any], repeat: int) -> list[Planned]:
    """One repeat's requests of a dataset (the controller's seeded sample) or random workload."""
    max_new = int(workload["max_new_tokens"])
    if workload["kind"] == "dataset":
        return [
            Planned(sample["prompt"], int(sample.get("output_tokens") or max_new),
                    {"repeat": repeat, "request": i, "category": sample.get("category"), "max_new_tokens": int(sample.get("output_tokens") or max_new)})
            for i, sample in enumerate(workload["samples"])
        ]  # fmt: skip
    count, length = int(workload["requests"]), int(workload["input_tokens"])
    return [
        Planned(random_prompt_ids(int(workload["seed"]), repeat * count + i, length), max_new, {"repeat": repeat, "request": i})
        for i in range(count)
    ]


def sample_sha256(plans: list[Planned]) -> str:
    """A hash of exactly what was asked: prompts (text or ids), output lengths and categories."""
    digest = hashlib.sha256()
    for plan in plans:
        digest.update(json.dumps([plan.prompt, plan.max_new_tokens, plan.tags.get("category")], separators=(",", ":")).encode())
    return digest.hexdigest()


def _open_loop(driver: Driver, plans: list[Planned], load: dict[str, Any], rng: random.Random) -> tuple[list[Sent], float]:
    """Send `plans` on their schedule, each on its own thread so that none waits for another; a
    request the `max_in_flight` cap held back is due when a slot frees, not at its scheduled time
    (the cap is the playbook's choice: only the client's own lateness counts against it)."""
    scale = float(load.get("time_scale") or 1.0)  # wall seconds per engine second
    offsets = arrival_offsets(len(plans), float(load["rate"]), float(load["burstiness"]), rng)
    cap = threading.BoundedSemaphore(load["max_in_flight"]) if load.get("max_in_flight") else None
    sent: list[Sent] = []
    lock = threading.Lock()

    def one(plan: Planned, due: float, held_s: float) -> None:
        late = time.monotonic() - due
        try:
            outcome = driver.send(plan.prompt, plan.max_new_tokens)
        finally:
            if cap is not None:
                cap.release()
        outcome.schedule_delay_s = late
        with lock:
            sent.append(Sent(outcome, {**plan.tags, **({"held_by_cap_s": held_s} if held_s else {})}))

    threads: list[threading.Thread] = []
    began = time.monotonic()
    for plan, offset in zip(plans, offsets):
        due = began + offset * scale
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        if not driver.gate.open:
            break
        held = 0.0
        if cap is not None and not cap.acquire(blocking=False):
            cap.acquire()
            now = time.monotonic()
            held, due = max(now - due, 0.0), max(now, due)
        thread = threading.Thread(target=one, args=(plan, due, held), name=f"open-loop-{plan.tags['request']}", daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return sorted(sent, key=lambda s: s.tags["request"]), time.monotonic() - began


def _listed(driver: Driver, out: WorkloadOutcome) -> None:
    workload = driver.run.workload
    load = workload.get("load")
    repeats = [planned_requests(workload, repeat) for repeat in range(driver.run.repeats)]
    out.planned_requests = sum(len(plans) for plans in repeats)
    out.extras["sample_sha256"] = sample_sha256([plan for plans in repeats for plan in plans])
    warmup = int(load.get("warmup_requests") or 0) if load else 0
    if warmup:
        # One at a time, before anything is measured, and in no figure (bench_serving's --warmup-requests).
        plans = repeats[0]
        outcomes = [driver.send(plans[i % len(plans)].prompt, plans[i % len(plans)].max_new_tokens) for i in range(warmup) if driver.gate.open]
        out.extras["warmup"] = {"requests": len(outcomes), "ok": sum(1 for o in outcomes if o.ok)}
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
        sent, wall = _open_loop(driver, plans, load, random.Random(int(load.get("seed") or 0) + repeat))
        out.sent.extend(sent)
        out.measured({"repeat": repeat}, wall)
