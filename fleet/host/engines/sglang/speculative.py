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
# NGRAM's draft tokens when none are given, per release: 0.5.23 arg_groups/speculative_hook.py:1310 (12);
# 0.5.12 as fleet has modelled it (8; no 0.5.12 wheel is installed to check it against).
NGRAM_DEFAULT_NUM_DRAFT_TOKENS = {"0.5.12": 8, "0.5.23": 12}
# 0.5.23 speculative/spec_info.py:147 supports_mixed_chunk: the algorithms that keep --enable-mixed-chunk.
MIXED_CHUNK_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH")
# 0.5.23 speculative_hook.py:1271: the attention backends that run EAGLE's topk > 1 tree on pages > 1.
PAGE_TREE_SPEC_BACKENDS = ("flashinfer", "fa3", "triton")
# 0.5.23 speculative_hook.py:1430-1461 _auto_choose_speculative_params: (num_steps, eagle_topk,
# num_draft_tokens) for an EAGLE-family launch that gives none; these targets get the wide tree.
_WIDE_TREE_ARCHITECTURES = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")


def auto_speculative_params(algorithm: str, architecture: str) -> tuple[int, int, int]:
    """What 0.5.23 chooses for an EAGLE-family launch without --speculative-num-steps."""
    if algorithm != "STANDALONE" and architecture in _WIDE_TREE_ARCHITECTURES:
        return (5, 4, 8)
    return (3, 1, 4)


# --mamba-scheduler-strategy (--mamba-radix-cache-strategy from 0.5.14).
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
