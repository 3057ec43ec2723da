"""The timing and acceptance model: calibrated on the seed, monotone where SGLang's behaviour is."""

from __future__ import annotations

import pytest

from fleet.host.engines.sim import perf

GIB = 1 << 30


def model(draft_gb: float = 0.0, tp: int = 1, graphs: bool = True) -> perf.PerfModel:
    return perf.build_perf_model(
        bandwidth_gbs=1792, tflops=500, weights_bytes_per_gpu=51.05 * GIB / tp, draft_weights_bytes_per_gpu=draft_gb * GIB / tp, kv_cell_bytes=65536, tp_size=tp, cuda_graphs=graphs
    )


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("Write a Python function that returns the n-th Fibonacci number.", "code"),
        ("Implement quicksort in C.", "code"),
        ("What is 1234 * 5678 + 91?", "arithmetic"),
        ("Return a JSON object with the fields name and id.", "json"),
        ("Tell me about the history of Rome.", "prose"),
    ],
)
def test_classify_prompt(prompt: str, kind: str) -> None:
    assert perf.classify_prompt(prompt) == kind


def test_autoregressive_step_matches_the_seed_throughput() -> None:
    step = model().decode_step_s(1, 1, 300)
    assert 1 / step == pytest.approx(26.5, rel=0.05)  # seed 000: ~26.5 tok/s at TP1


def test_decode_step_grows_with_batch_and_verify_width() -> None:
    m = model(draft_gb=3.46)
    steps = [m.decode_step_s(batch, 16, 300 * batch) for batch in (1, 4, 16, 64)]
    assert steps == sorted(steps) and steps[-1] > 3 * steps[0]
    assert m.decode_step_s(1, 16, 300) > model().decode_step_s(1, 1, 300)
    assert model(graphs=False).decode_step_s(1, 1, 300) > model().decode_step_s(1, 1, 300)
    assert model(tp=4).decode_step_s(1, 1, 300) < model().decode_step_s(1, 1, 300)


def test_prefill_time_grows_with_prompt() -> None:
    m = model()
    assert m.prefill_s(32000) > 10 * m.prefill_s(1000) > m.prefill_s(10)


def test_acceptance_depends_on_prompt_kind_method_and_budget() -> None:
    dflash = {kind: perf.acceptance("DFLASH", kind, 16).mean_length for kind in perf.PROMPT_KINDS}
    assert dflash["arithmetic"] > dflash["code"] > dflash["prose"]
    assert dflash["code"] == pytest.approx(5.2, abs=0.01)
    budgets = [perf.acceptance("DDTREE", "code", 16, budget).mean_length for budget in (8, 12, 15, 32, 64)]
    assert budgets == sorted(budgets) and budgets[0] > dflash["code"]
    assert perf.acceptance("EAGLE", "code", 4).mean_length < dflash["code"]
    assert perf.acceptance("DDTREE", "code", 16, 4).max_drafts == 4  # a tree of 4 nodes commits at most 4 drafts


def test_ddtree_b15_code_throughput_is_in_the_seed_range() -> None:
    accept = perf.acceptance("DDTREE", "code", 16, 15).mean_length
    step = model(draft_gb=3.46).decode_step_s(1, 16, 300)
    assert 120 < accept / step < 180  # seed 002: b15 ~143 tok/s on the fib prompt
