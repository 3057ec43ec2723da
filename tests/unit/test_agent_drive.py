"""Host-side workload logic: long-context calibration converges in a few requests on a real
tokenizer-like count (the simulator's tokenizer over fleet's corpus), and `auto` levels."""

from __future__ import annotations

from typing import Callable

import pytest

from fleet.host.agent.driver import requests_at_level
from fleet.host.agent.kinds.concurrency import auto_levels
from fleet.host.agent.kinds.long_context import MAX_CALIBRATION_PROBES, Probe, calibration_done, calibration_tolerance, next_probe_chars, prompt_cut
from fleet.host.tokens import count_tokens
from fleet.workloads.library import corpus_slice


def calibrate(count: Callable[[int], int | None], body_chars: int, target: int, first: int) -> list[Probe]:
    """The agent's loop, with `count` standing in for the server."""
    probes: list[Probe] = []
    chars = first
    while len(probes) < MAX_CALIBRATION_PROBES:
        probes.append(Probe(chars, count(chars)))
        if calibration_done(probes, target, body_chars):
            break
        chars = next_probe_chars(probes, target, body_chars)
    return probes


def best(probes: list[Probe], target: int) -> Probe:
    return max((p for p in probes if p.prompt_tokens is not None and p.prompt_tokens <= target), key=lambda p: p.chars)


@pytest.mark.parametrize("target", [1000, 7000, 30000])
@pytest.mark.parametrize("chars_per_token_guess", [2.0, 3.0, 5.0])
def test_calibration_fits_the_target_in_a_few_requests(target: int, chars_per_token_guess: float) -> None:
    body = corpus_slice(target)
    overhead = 37  # instruction, question and the request tag

    def count(chars: int) -> int:
        return overhead + count_tokens(body[:chars])

    probes = calibrate(count, len(body), target, min(len(body), int(target * chars_per_token_guess)))
    chosen = best(probes, target)
    assert len(probes) <= 4
    assert target - calibration_tolerance(target) <= chosen.prompt_tokens <= target  # type: ignore[operator]


def test_calibration_copes_with_refusals_that_do_not_say_the_length() -> None:
    body = corpus_slice(5000)
    target, context = 5000, 6000

    def count(chars: int) -> int | None:
        tokens = count_tokens(body[:chars])
        return None if tokens >= context else tokens  # an over-context 400 without a count

    probes = calibrate(count, len(body), target, len(body))
    assert probes[0].prompt_tokens is None
    chosen = best(probes, target)
    assert target - calibration_tolerance(target) <= chosen.prompt_tokens <= target  # type: ignore[operator]


def test_a_body_too_short_for_the_target_is_used_whole() -> None:
    probes = [Probe(900, 300)]
    assert calibration_done(probes, 1000, body_chars=900)
    assert next_probe_chars([Probe(400, 150)], 1000, body_chars=900) == 900


@pytest.mark.parametrize(("max_running", "levels"), [(1, [1]), (4, [1, 2, 4]), (48, [1, 2, 4, 8, 16, 32, 48]), (6, [1, 2, 4, 6])])
def test_auto_levels(max_running: int, levels: list[int]) -> None:
    assert auto_levels(max_running) == levels


def test_a_prompt_cut_to_fit_the_server_is_a_deviation() -> None:
    # The case: a KV pool of 1155 tokens takes a 30000-token prompt down to 820.
    cut = prompt_cut(30000, 820, 1154, 256, 64)
    assert cut is not None and cut.kind == "prompt_cut"
    assert cut.message == "prompt cut to 820 of 30000 tokens: the server takes 1154 tokens, less 256 new and a 64-token margin"
    # Within the calibration's tolerance the prompt is the workload's own: no deviation.
    assert prompt_cut(30000, 30000 - calibration_tolerance(30000), 32768, 256, 64) is None
    assert prompt_cut(30000, 29000, None, 256, 64).message.endswith("the corpus ran out")  # type: ignore[union-attr]


def test_each_level_sends_enough_for_a_p90_and_two_rounds() -> None:
    assert [requests_at_level(level, None) for level in (1, 4, 8, 32)] == [10, 10, 16, 64]
    assert requests_at_level(8, 5) == 5
