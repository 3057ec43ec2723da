"""The lossless check: speculative decoding at temperature 0 must return the tokens the
autoregressive server of the same model returns. Standard library only (shipped with the agent).

Every server the agent brings up -- autoregressive or speculative -- answers one fixed set of
greedy prompts (`GREEDY_SET`: temperature 0, a fixed `sampling_seed`, `ignore_eos`, `MAX_NEW_TOKENS`
each) after its warm-up and before its first run, on SGLang's native `/generate` (whatever API
the workloads use: every SGLang server has it), or on /v1/completions for an engine without it (vLLM). Its outputs go into each of its runs' results
(`lossless`). An autoregressive server's outputs are the *reference* of its model and TP size on
that host type; a speculative server's are compared with it:

- in the agent, where the reference is known on the host (an autoregressive server of the same
  model and TP ran earlier in this sweep on this host, or runs now and answers in time);
- else by the controller (fleet.sweep.fixing) and the report (fleet.report.model) from the two
  results, once both exist, with the same function (`compare`).

What is compared: token ids (`output_ids`, which SGLang's /generate returns beside the text:
sglang 0.5.23 tokenizer_manager.py, `out["output_ids"]`); a server that sends no ids is compared
on its text, character by character, and the record says so (`unit`). The first diverging
position per prompt is recorded (None: identical over the whole output). Real GPUs can flip a
near-tie late in an output (other batch shapes, other kernels) without anything being broken, so
a configuration fails the check (`not_lossless`, fleet.host.failures) only when it diverges
*early* (before `EARLY_POSITION`) on *most* prompts (more than half); a later or rarer divergence
is recorded and passes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SET_ID = "fleet-greedy/1"
MAX_NEW_TOKENS = 32
SAMPLING_SEED = 0
EARLY_POSITION = MAX_NEW_TOKENS // 2  # a divergence before this output position is early
REQUEST_TIMEOUT_S = 60.0

# Four short prompts of the kinds a benchmark sends (prose, code, arithmetic, JSON).
GREEDY_SET: tuple[tuple[str, str], ...] = (
    ("prose", "Explain in two sentences why the sky is blue."),
    ("code", "Write a Python function that returns the n-th Fibonacci number."),
    ("arithmetic", "Compute 17 * 23 + 4 and show each step."),
    ("json", "Return a JSON object with the fields name, id and tags for a user called Ada."),
)

PASS, FAIL, PENDING, ERROR = "pass", "fail", "pending", "error"
# A result's part in the check: an autoregressive server's outputs are the reference, a
# speculative one's the candidate.
REFERENCE, CANDIDATE = "reference", "candidate"


@dataclass(frozen=True)
class Output:
    """One greedy prompt's answer: token ids where the server sent them, else its text."""

    prompt: str
    ids: tuple[int, ...] | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "ids": list(self.ids) if self.ids is not None else None, "text": self.text}

    @classmethod
    def from_json(cls, data: Any) -> Output | None:
        """None for anything that is not an output record (a result is untrusted input)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("prompt"), str) or not isinstance(data.get("text"), str):
            return None
        ids = data.get("ids")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
            return None
        return cls(data["prompt"], tuple(ids) if ids is not None else None, data["text"])


def reference_key(model: str, tp: int) -> str:
    """What must be equal for two servers' outputs to be compared on one host type: the model
    (its path or repo as launched) and the TP size. (Host type: the results' own group.)"""
    return f"{model}|tp{tp}"


def request_body(prompt: str) -> dict[str, Any]:
    return {
        "text": prompt,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": MAX_NEW_TOKENS, "ignore_eos": True, "sampling_seed": SAMPLING_SEED},
        "stream": False,
    }


def completions_body(prompt: str, model: str | None) -> dict[str, Any]:
    """The same greedy request on /v1/completions, for an engine without SGLang's /generate (vLLM):
    `seed` is the OpenAI API's name of the sampling seed, `ignore_eos` the engines' extension."""
    return {"model": model or "default", "prompt": prompt, "max_tokens": MAX_NEW_TOKENS, "temperature": 0.0, "ignore_eos": True, "seed": SAMPLING_SEED, "stream": False}


def parse_completion(prompt: str, payload: Any) -> Output:
    """One /v1/completions answer: its first choice's text (no token ids: compared on text)."""
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, Mapping) or not isinstance(first.get("text"), str):
        raise ValueError(f"expected a /v1/completions answer with a choice's text, got {str(payload)[:200]!r}")
    return Output(prompt, None, first["text"])


def parse_response(prompt: str, payload: Any) -> Output:
    """One /generate answer (a JSON object with `text`, and `output_ids` where the server sends them)."""
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    if not isinstance(payload, Mapping) or not isinstance(payload.get("text"), str):
        raise ValueError(f"expected a /generate answer with a text, got {str(payload)[:200]!r}")
    ids = payload.get("output_ids")
    if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return Output(prompt, tuple(ids), payload["text"])
    return Output(prompt, None, payload["text"])


def send_greedy_set(host: str, port: int, timeout_s: float = REQUEST_TIMEOUT_S, *, api: str = "generate", model: str | None = None) -> list[Output]:
    """Each prompt of GREEDY_SET, one after another, on the engine's route (`api`: SGLang's
    /generate, or /v1/completions). Raises OSError/ValueError/HTTPException."""
    import http.client  # here, not at the top: the controller's readers of lossless records (the report, the result cache) send nothing, and http.client brings ssl and email (about 7 ms of every command's start)

    path = "/generate" if api == "generate" else "/v1/completions"
    outputs = []
    for name, prompt in GREEDY_SET:
        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
        try:
            body_json = request_body(prompt) if api == "generate" else completions_body(prompt, model)
            conn.request("POST", path, body=json.dumps(body_json).encode(), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise ValueError(f"{path}: HTTP {response.status}: {body[:300].decode('utf-8', errors='replace')}")
            outputs.append(parse_response(name, json.loads(body)) if api == "generate" else parse_completion(name, json.loads(body)))
        finally:
            conn.close()
    return outputs


def first_divergence(candidate: Sequence[Any], reference: Sequence[Any]) -> int | None:
    """The first position where the two differ (a shorter one differs where it ends); None: equal."""
    for position, (a, b) in enumerate(zip(candidate, reference)):
        if a != b:
            return position
    return None if len(candidate) == len(reference) else min(len(candidate), len(reference))


@dataclass(frozen=True)
class Check:
    verdict: str  # pass | fail | pending (no reference yet) | error (the set could not be sent)
    unit: str | None = None  # "token" (ids compared) or "char" (text compared: a server without ids)
    positions: tuple[int | None, ...] = ()  # per prompt of the set, in order
    early: int = 0  # prompts that diverged before the early bound
    reference: str | None = None  # the reference server's label
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "unit": self.unit, "first_divergence": list(self.positions), "diverged_early": self.early,
            "early_before": _early_bound(self.unit), "reference_server": self.reference, "message": self.message,
        }  # fmt: skip


def _early_bound(unit: str | None) -> int:
    # Text is compared per character: about four characters a token in the sim's and Qwen's vocabularies.
    return EARLY_POSITION * 4 if unit == "char" else EARLY_POSITION


def compare(candidate: Sequence[Output], reference: Sequence[Output], reference_label: str | None = None) -> Check:
    """The check of a speculative server's outputs against the autoregressive reference."""
    ref = {o.prompt: o for o in reference}
    pairs = [(o, ref[o.prompt]) for o in candidate if o.prompt in ref]
    if not pairs:
        return Check(PENDING, reference=reference_label, message="no prompt in common with the reference")
    unit = "token" if all(o.ids is not None and r.ids is not None for o, r in pairs) else "char"
    positions = tuple(first_divergence(o.ids, r.ids) if unit == "token" else first_divergence(o.text, r.text) for o, r in pairs)  # type: ignore[arg-type]
    bound = _early_bound(unit)
    early = sum(1 for p in positions if p is not None and p < bound)
    diverged = sum(1 for p in positions if p is not None)
    where = ", ".join(f"{o.prompt}: {'identical' if p is None else f'{unit} {p}'}" for (o, _), p in zip(pairs, positions))
    compared = "token ids" if unit == "token" else "text (the server sent no token ids)"
    if early * 2 > len(pairs):
        message = (
            f"at temperature 0 the output diverged from the autoregressive server's{f' ({reference_label})' if reference_label else ''} "
            f"before {unit} {bound} on {early} of {len(pairs)} greedy prompts ({where}; {compared} compared): "
            "speculative decoding is not lossless here"
        )
        return Check(FAIL, unit, positions, early, reference_label, message)
    message = f"{len(pairs) - diverged} of {len(pairs)} greedy prompts identical to the reference ({where}; {compared} compared)"
    return Check(PASS, unit, positions, early, reference_label, message)


def record(role: str, key: str, outputs: Sequence[Output] | None, check: Check | None, error: str | None = None) -> dict[str, Any]:
    """What a result says of its server's greedy set (`lossless` in the result)."""
    return {
        "set": SET_ID, "max_new_tokens": MAX_NEW_TOKENS, "sampling_seed": SAMPLING_SEED, "role": role, "key": key,
        "outputs": [o.to_json() for o in outputs] if outputs is not None else None,
        "check": check.to_json() if check is not None else None, "error": error,
    }  # fmt: skip


def left_to_the_controller(lossless: Mapping[str, Any]) -> str | None:
    """What the controller compares of a result's lossless record: a reference's outputs
    (REFERENCE), and a candidate's the agent left pending (CANDIDATE: no reference on its host
    when it answered); None for a candidate the agent judged, whose verdict is in its `check`."""
    if lossless.get("role") == REFERENCE:
        return REFERENCE
    check = lossless.get("check")
    return CANDIDATE if isinstance(check, Mapping) and check.get("verdict") == PENDING else None


def outputs_of(lossless: Any) -> list[Output] | None:
    """The outputs a result's `lossless` record holds; None when it holds none (or not readably)."""
    if not isinstance(lossless, Mapping) or lossless.get("set") != SET_ID or not isinstance(lossless.get("outputs"), list):
        return None
    outputs = [Output.from_json(item) for item in lossless["outputs"]]
    return [o for o in outputs if o is not None] or None
