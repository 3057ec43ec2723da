"""`long_context`: one long prompt, sized by the server's own token count. Standard library only.

Calibration requests with max_new_tokens=1 read `meta_info.prompt_tokens` (or the count an
over-context 400 reports), and the text is cut by characters (interpolation search, a few
requests) until prompt + max_new_tokens + margin fits the context length. A prompt that the
server's context or KV pool made shorter than asked for is recorded as a `prompt_cut` deviation
(the run is then `not_comparable`, fleet.host.agent.results).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.host.agent.client import HTTP_400_CONTEXT, prompt_tokens_in_error
from fleet.host.agent.driver import Driver
from fleet.host.agent.outcome import PROMPT_CUT, WorkloadOutcome
from fleet.host.contract import Failure
from fleet.host.contract.results import Deviation
from fleet.host.failures import FailureClass

MAX_CALIBRATION_PROBES = 5
CALIBRATION_FAILED = FailureClass.CALIBRATION_FAILED.value
CONTEXT_TOO_SMALL = FailureClass.CONTEXT_TOO_SMALL.value


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


def drive(driver: Driver, out: WorkloadOutcome) -> None:
    workload = driver.run.workload
    max_new = workload["max_new_tokens"]
    room = driver.facts.prompt_room
    target = workload["prompt_tokens"]
    if room is not None:
        target = min(target, room - max_new - workload["margin_tokens"])
    if target <= 0:
        out.failure = Failure(
            CONTEXT_TOO_SMALL,
            f"a context of {room} tokens leaves no room for a prompt next to {max_new} new tokens and a {workload['margin_tokens']}-token margin",
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
            out.failure = Failure(CALIBRATION_FAILED, f"no cut of the corpus fitted {target} prompt tokens in {len(probes)} calibration requests")
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
