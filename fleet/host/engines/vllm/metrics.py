"""What fleet reads of `vllm serve`'s /metrics: the speculative-decoding counters, from which vLLM
defines its mean acceptance length (vllm/v1/spec_decode/metrics.py:112: `1 + num_accepted_tokens /
num_drafts`). vLLM reports no per-request acceptance in its responses, so a run's acceptance
length is the counters' change over the run (the server serves one run at a time).

Counter names: vllm/v1/spec_decode/metrics.py:226-231 (`vllm:spec_decode_num_drafts`,
`vllm:spec_decode_num_accepted_tokens`), exposed by prometheus_client with the `_total` suffix and
labelled per engine (`model_name`, `engine`): summed over engines. Standard library only.
"""

from __future__ import annotations

import math
import re

from fleet.host.engines.base import SpecCounters

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
# One sample line of the text format: a name, optional labels, a value (an optional timestamp after).
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)")


def spec_counters(text: str) -> SpecCounters | None:
    """The two totals in a /metrics text; None when the server has no speculative decoding (vLLM
    registers the counters only then) or a value is not a finite number."""
    totals = {DRAFTS: 0.0, ACCEPTED: 0.0}
    seen: set[str] = set()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or match["name"] not in totals:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            return None
        if not math.isfinite(value) or value < 0:
            return None
        totals[match["name"]] += value
        seen.add(match["name"])
    if seen != set(totals):
        return None
    return SpecCounters(drafts=totals[DRAFTS], accepted=totals[ACCEPTED])
