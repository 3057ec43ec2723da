"""How long simulated work takes, and how many draft tokens a verify step accepts. Pure.

Decode is memory-bound: one step reads the weights once plus each sequence's KV cache, then pays
for the tokens it verifies when that compute outgrows the memory time. Prefill is compute-bound.
Calibrated on the seed campaign (Qwen3.6-27B on one RTX PRO 6000: ~26.5 tok/s autoregressive,
~143 tok/s with DDTree budget 15 on a code prompt).

Speculative acceptance is a chain: each successive draft token is accepted with a probability p
until the first rejection, capped by the drafts a step proposes. p is chosen per method and prompt
kind so the mean accept length (accepted drafts + the bonus token) matches the published picture:
DFlash/DDTree accept most on code and arithmetic, least on free prose; DDTree's tree adds to DFlash
with diminishing returns in its node budget.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

PROMPT_KINDS = ("code", "arithmetic", "json", "prose")

_JSON = re.compile(r"\bjson\b|^\s*[{\[]", re.IGNORECASE)
_CODE = re.compile(
    r"```|\bdef |\bclass |\bfunction\b|#include|\bimplement|\bcode\b|\bpython\b|\bjavascript\b|\brust\b"
    r"|\bfibonacci\b|\bquick ?sort\b|\bqsort\b|\balgorithm\b|\bprogram\b",
    re.IGNORECASE,
)
_ARITHMETIC = re.compile(r"\d+\s*[-+*/x×]\s*\d+|\bcalculate\b|\bcompute\b|\bsolve\b|\barithmetic\b|\bsum of\b", re.IGNORECASE)


def classify_prompt(text: str) -> str:
    """The kind of continuation a prompt asks for; the last 4000 characters decide (the question)."""
    tail = text[-4000:]
    if _JSON.search(tail):
        return "json"
    if _CODE.search(tail):
        return "code"
    if _ARITHMETIC.search(tail):
        return "arithmetic"
    return "prose"


# Mean accept length (accepted drafts + bonus token) at the reference number of draft tokens.
_REFERENCE_ACCEPT: dict[str, tuple[int, dict[str, float]]] = {
    "DFLASH": (16, {"code": 5.2, "arithmetic": 5.8, "json": 4.6, "prose": 3.0}),
    "EAGLE": (4, {"code": 2.9, "arithmetic": 3.1, "json": 2.7, "prose": 2.3}),
    "EAGLE3": (4, {"code": 3.1, "arithmetic": 3.3, "json": 2.9, "prose": 2.5}),
    "STANDALONE": (4, {"code": 2.7, "arithmetic": 2.9, "json": 2.5, "prose": 2.1}),
    "NGRAM": (8, {"code": 1.9, "arithmetic": 1.6, "json": 2.2, "prose": 1.3}),
}
# A DDTree of `budget` nodes over DFlash's block gains up to this fraction of DFlash's accept length.
_DDTREE_MAX_GAIN = 0.30
_DDTREE_GAIN_SCALE = 12.0


def _chain_mean(p: float, drafts: int) -> float:
    """1 + sum_{i=1..drafts} p^i: the mean accept length of a chain with per-token acceptance p."""
    if p >= 1.0:
        return 1.0 + drafts
    return 1.0 + p * (1 - p**drafts) / (1 - p)


@functools.lru_cache(maxsize=None)
def _solve_p(mean: float, drafts: int) -> float:
    target = min(mean, drafts + 1 - 1e-6)
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if _chain_mean(middle, drafts) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


@dataclass(frozen=True)
class Acceptance:
    p: float  # per-draft-token acceptance probability
    max_drafts: int  # drafts a verify step can accept

    @property
    def mean_length(self) -> float:
        return _chain_mean(self.p, self.max_drafts)


@functools.lru_cache(maxsize=None)
def acceptance(algorithm: str, kind: str, num_draft_tokens: int, ddtree_budget: int | None = None) -> Acceptance:
    """Acceptance of `algorithm` on a prompt of `kind` with `num_draft_tokens` (DFLASH block size)."""
    family = "DFLASH" if algorithm == "DDTREE" else algorithm
    reference_tokens, means = _REFERENCE_ACCEPT[family]
    p = _solve_p(means[kind], reference_tokens - 1)
    drafts = num_draft_tokens - 1
    if algorithm == "DDTREE":
        budget = ddtree_budget or num_draft_tokens
        gain = 1.0 + _DDTREE_MAX_GAIN * (1.0 - math.exp(-budget / _DDTREE_GAIN_SCALE))
        drafts = min(drafts, budget)
        p = _solve_p(_chain_mean(p, drafts) * gain, drafts)
    return Acceptance(p, max(drafts, 0))


@dataclass(frozen=True)
class PerfModel:
    weights_read_s: float  # reading the target's weights once (per GPU)
    draft_s: float  # drafting per verify step (0 without speculative decoding)
    fixed_s: float  # launch / sampling / scheduling per step
    tp_comm_s: float  # all-reduces per step
    kv_read_s_per_token: float  # reading one cached token's KV
    verify_s_per_token: float  # compute per token in the forward
    prefill_s_per_token: float
    prefill_fixed_s: float

    def decode_step_s(self, batch: int, tokens_per_seq: int, context_tokens: int) -> float:
        memory = self.weights_read_s + context_tokens * self.kv_read_s_per_token
        compute = batch * tokens_per_seq * self.verify_s_per_token
        # Memory-bound until the tokens' compute overtakes the weight reads; overlap is imperfect.
        return max(memory, compute) + 0.3 * min(memory, compute) + self.fixed_s + self.tp_comm_s + self.draft_s

    def prefill_s(self, tokens: int) -> float:
        return self.prefill_fixed_s + tokens * self.prefill_s_per_token + self.tp_comm_s


def build_perf_model(
    *,
    bandwidth_gbs: float,
    tflops: float,
    weights_bytes_per_gpu: float,
    draft_weights_bytes_per_gpu: float,
    kv_cell_bytes: int,
    tp_size: int,
    cuda_graphs: bool,
) -> PerfModel:
    bandwidth = bandwidth_gbs * 1e9 * 0.85
    flops_per_s = tflops * 1e12 * 0.5
    # 2 FLOPs per parameter per token; bf16 weights are 2 bytes per parameter.
    flops_per_token = 2 * weights_bytes_per_gpu / 2
    draft_s = 0.0
    if draft_weights_bytes_per_gpu:
        draft_s = draft_weights_bytes_per_gpu / bandwidth + 0.0008
    # Without CUDA graphs every kernel launch shows: a few ms more per step.
    fixed = 0.0017 if cuda_graphs else 0.0065
    return PerfModel(
        weights_read_s=weights_bytes_per_gpu / bandwidth,
        draft_s=draft_s,
        fixed_s=fixed,
        # PCIe all-reduces: two per layer, tens of microseconds each.
        tp_comm_s=0.0 if tp_size == 1 else 0.0032 * math.log2(tp_size),
        kv_read_s_per_token=kv_cell_bytes / bandwidth,
        verify_s_per_token=flops_per_token / flops_per_s,
        prefill_s_per_token=flops_per_token / flops_per_s / 0.9,
        prefill_fixed_s=0.012,
    )


def tpot_capacity(model: PerfModel, *, tpot_s: float, prompt_tokens: int, output_tokens: int) -> float:
    """The highest open-loop request rate at which an autoregressive server of `model` keeps the
    mean time per output token at `tpot_s`, for requests of `prompt_tokens` (none cached) and
    exactly `output_tokens`: the sim's capacity under a TPOT SLO, from its own model, for a test
    to hold a measured search against. Pure.

    In steady state at rate r each request is prefilled alone (`prefill_s`, during which no
    sequence decodes) and then decodes `output_tokens - 1` steps, while the prefills of the
    requests arriving meanwhile interrupt it: its decode time D = (n - 1) * step + r * D * prefill,
    so TPOT = step / (1 - r * prefill). Little's law gives the batch a step decodes, b = r * D, each
    sequence holding its prompt and half its output on average. Holds while b stays below the
    server's max_running_requests and arrivals are steady enough that prefills do not batch."""
    prefill = model.prefill_s(prompt_tokens)
    context = prompt_tokens + output_tokens / 2

    def within(rate: float) -> bool:
        batch = rate * (output_tokens - 1) * tpot_s
        return model.decode_step_s(batch, 1, batch * context) <= tpot_s * (1 - rate * prefill)  # type: ignore[arg-type]

    low, high = 0.0, 1.0 / prefill
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if within(middle) else (low, middle)
    return low
