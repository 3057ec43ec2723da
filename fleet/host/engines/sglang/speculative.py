"""SGLang's speculative algorithms and the defaults it gives them: one home, read by the argument
resolution, the memory planner, the launch renderer and the simulator alike."""

from __future__ import annotations

DFLASH_FAMILY = ("DFLASH", "DDTREE")  # a DFLASH-style draft model (DDTREE: the fork's tree variant)
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
UPSTREAM_ALGORITHMS = ("DFLASH",) + EAGLE_FAMILY + ("NGRAM",)
DFLASH_SINCE = (0, 5, 11)  # the first release with DFLASH
# arg_groups/speculative_hook.py:438-443 (0.5.23) and speculative_hook in 0.5.12: max_running_requests
# when speculative decoding is on and none was given.
SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS = 48
# A DFLASH draft's block size where its config names none: its num_draft_tokens.
DFLASH_DEFAULT_BLOCK_SIZE = 16
NGRAM_DEFAULT_NUM_DRAFT_TOKENS = 8
# --mamba-scheduler-strategy (--mamba-radix-cache-strategy from 0.5.14).
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
