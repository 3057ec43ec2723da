"""`agentic`: concurrent multi-turn sessions, each turn's prompt the previous one plus its answer
and a tool result (the whole prefix reused). Standard library only.

Its result has, besides each repeat's figures, figures per turn (`turns`): how many sessions got
there, prompt growth and TTFT.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Sequence

from fleet.host.agent.driver import Driver
from fleet.host.agent.outcome import Measured, Sent, WorkloadOutcome, repeat_extras
from fleet.host.agent.stats import summary


def drive(driver: Driver, out: WorkloadOutcome) -> None:
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
        threads = [threading.Thread(target=session, args=(number, repeat), name=f"session{number}", daemon=True) for number in range(workload["sessions"])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        out.measured({"repeat": repeat}, time.monotonic() - began)
    # Per-turn figures are made with the result's others (result_extras).
    out.sent.sort(key=lambda s: (s.tags["repeat"], s.tags["session"], s.tags["turn"]))


def result_extras(measured: Measured) -> dict[str, Any]:
    return {**repeat_extras(measured), "turns": turn_figures(measured.sent, int(measured.workload.get("turns") or 0))}


def turn_figures(sent: Sequence[Sent], turns: int) -> list[dict[str, Any]]:
    """Per turn of an agentic run: how many sessions got there, prompt growth and TTFT."""
    rows = []
    for turn in range(turns):
        at_turn = [s.outcome for s in sent if s.tags.get("turn") == turn]
        ok = [o for o in at_turn if o.ok]
        rows.append(
            {
                "turn": turn,
                "sent": len(at_turn),
                "ok": len(ok),
                "prompt_tokens_mean": _mean([o.prompt_tokens for o in ok if o.prompt_tokens is not None]),
                "ttft_s": summary([o.ttft_s for o in ok if o.ttft_s is not None]),
            }
        )
    return rows


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
