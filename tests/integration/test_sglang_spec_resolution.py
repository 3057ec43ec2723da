"""fleet's resolution of speculative decoding (`fleet.host.engines.sglang.args.resolve_server_args`)
against SGLang 0.5.23's OWN hooks, run on CPU over a grid (issue 26, Must-show 2).

Needs `pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==0.5.23`.

What runs from the wheel, in a child interpreter (importing sglang loads torch and sets environment
variables): `prepare_server_args` parses each argv; then, in the resolution pipeline's order
(arg_groups/pipeline.py:45, :306), `handle_deprecated_dp_attention` (parallel_hook.py:39, compiled
from the wheel: its module imports `sglang.srt.configs`, i.e. transformers), the real post-process
pass `_page_size_default` (overrides.py:1343), and the real imported
`speculative_hook.handle_speculative_decoding` with its per-algorithm handlers (`_handle_dflash`,
`_handle_eagle_family`, `_handle_ngram`, `_auto_choose_speculative_params`, spec_info.py:235's
dispatch). The resolved fields are read through the wheel's own `resolved_view`.

What is stood in for, each what a GPU host's earlier steps or files would give:
- the device: `cuda` (platform_hook resolves it from the GPU);
- `model_config_of` (builds the HF config through transformers): an object whose
  `hf_config.architectures` is the target card's architecture, all `_handle_eagle_family` reads of it;
- `hf_transformers_utils.get_config` (transformers): the draft's config.json as fleet writes it from
  its card (`fleet.host.modelcard.hf_files_from_card`); `speculative/dflash_utils.py` (needs tvm_ffi):
  `parse_dflash_draft_config` and what it calls, compiled from the wheel;
- `sglang.srt.configs` registered without its `__init__` (transformers) and `configs.iquest_q1`
  as a class no draft here is (`_handle_iquest_q1_mtp_draft` returns for other architectures).
Every case is a dense target (hybrid targets go through the mamba hooks, which the memory differential
and tests/unit/test_sglang_args.py cover); page sizes above 1 come with an explicit attention backend
(on a host the attention hook picks one before the speculative hook runs).

Not compared, because fleet neither renders nor reads them (speculative_hook.py of 0.5.23): the
draft model path DeepSeek-V3-class targets default to their own (:1117-1148), the DFLASH draft's
attention backend (:886 `_resolve_dflash_draft_attention_backend`), rejection sampling and block
verification (:176, :1196), adaptive steps (:240, :1374), non-CUDA devices (:66, :1288), and
SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION (:226, :318). 0.5.12's resolution is fleet's model of it
(`args._eagle_and_ngram_0512`): no 0.5.12 wheel is installed to compare it with.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.host.engines.sglang.args import fleet_values, resolve_server_args
from fleet.host.engines.sglang.flags import parse_argv
from fleet.host.modelcard import ModelCard, hf_files_from_card, load_model_card
from tests.integration import sglang_wheel
from tests.integration.sglang_wheel import RELEASE

pytestmark = [pytest.mark.sglang_parser, pytest.mark.timeout(sglang_wheel.CHILD_TEST_TIMEOUT_S)]


DENSE = load_model_card("llama-3.1-8b-instruct")
# _auto_choose_speculative_params (speculative_hook.py:1430) and _handle_eagle_family (:1117) branch on
# the target's architecture: Llama and Grok get 5/4/8, DeepSeek-V3 its MTP default and the rest 3/1/4.
ARCHITECTURES = ("LlamaForCausalLM", "Qwen3ForCausalLM", "Grok1ForCausalLM", "DeepseekV3ForCausalLM")
DFLASH_DRAFT = load_model_card("qwen3.6-27b-dflash")
DRAFTS = {
    "/models/eagle-draft": None,  # EAGLE-family drafts: fleet sizes them from no card here
    "/models/dflash-block16": DFLASH_DRAFT,
    "/models/dflash-no-block": dataclasses.replace(DFLASH_DRAFT, dflash_block_size=None),
}
EAGLE_PARAMS: tuple[tuple[str, ...], ...] = (
    (),
    ("--speculative-num-steps", "3"),
    ("--speculative-num-steps", "3", "--speculative-eagle-topk", "1"),
    ("--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
    ("--speculative-num-steps", "5", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"),
    ("--speculative-num-steps", "2", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"),
    ("--speculative-eagle-topk", "2"),
    ("--speculative-num-draft-tokens", "8"),
)
NGRAM_PARAMS: tuple[tuple[str, ...], ...] = (
    (),
    ("--speculative-num-draft-tokens", "8"),
    ("--speculative-num-draft-tokens", "8", "--speculative-ngram-max-bfs-breadth", "1"),
    ("--speculative-ngram-max-bfs-breadth", "4"),
    ("--speculative-num-steps", "2"),
)
DFLASH_PARAMS: tuple[tuple[str, ...], ...] = (
    (),
    ("--speculative-num-draft-tokens", "8"),
    ("--speculative-dflash-block-size", "8"),
    ("--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "16"),
    ("--speculative-num-steps", "3", "--speculative-eagle-topk", "2"),
    ("--speculative-draft-window-size", "4"),
)
DP_MODES: tuple[tuple[str, ...], ...] = (
    (),
    ("--dp-size", "2", "--enable-dp-attention"),
    ("--attn-dp-size", "2"),
    ("--attn-dp-size", "2", "--enable-dp-lm-head"),
)
# The rest of the launch, cycled over the cases so that each occurs with every method and dp mode.
OTHERS: tuple[tuple[str, ...], ...] = (
    (),
    ("--max-running-requests", "16"),
    ("--enable-mixed-chunk",),
    ("--page-size", "16", "--attention-backend", "triton"),
    ("--page-size", "16", "--attention-backend", "trtllm_mha", "--max-running-requests", "8"),
    ("--disable-overlap-schedule", "--enable-mixed-chunk"),
    ("--page-size", "16", "--attention-backend", "fa3"),
)
# The fields the speculative hook decides, compared after resolution.
FIELDS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "max_running_requests",
    "disable_overlap_schedule",
    "enable_mixed_chunk",
)


def grid() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    methods: list[tuple[str, str, tuple[str, ...], str]] = []
    for algorithm in ("EAGLE", "NEXTN", "EAGLE3", "STANDALONE"):
        methods += [(algorithm, "/models/eagle-draft", params, arch) for params, arch in itertools.product(EAGLE_PARAMS, ARCHITECTURES)]
    methods += [("NGRAM", "", params, ARCHITECTURES[0]) for params in NGRAM_PARAMS]
    methods += [("DFLASH", draft, params, ARCHITECTURES[1]) for draft in ("/models/dflash-block16", "/models/dflash-no-block") for params in DFLASH_PARAMS]
    for index, ((algorithm, draft, params, arch), dp) in enumerate(itertools.product(methods, DP_MODES)):
        others = OTHERS[index % len(OTHERS)]
        argv = ["--model-path", "/models/target", "--speculative-algorithm", algorithm, *(("--speculative-draft-model-path", draft) if draft else ()), *params, *dp, *others]
        name = f"{algorithm}/{arch}/{draft.rsplit('/', 1)[-1] or 'no draft'}/{' '.join(params) or 'defaults'}/{' '.join(dp) or 'no dp'}/{' '.join(others) or '-'}"
        cases.append({"name": name, "argv": argv, "architecture": arch, "draft": draft or None})
    return cases


def fleet_outcome(case: dict[str, Any]) -> dict[str, Any]:
    target = dataclasses.replace(DENSE, architecture=case["architecture"])
    draft: ModelCard | None = DRAFTS[case["draft"]] if case["draft"] else None
    resolved = resolve_server_args(fleet_values(parse_argv(RELEASE, case["argv"])), target, draft, {}, 0, release=RELEASE)
    if resolved.failure is not None:
        return {"error": [resolved.failure.exception, resolved.failure.message]}
    return {"error": None, "values": {name: resolved.values[name] for name in FIELDS}}


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    cases = grid()
    configs = {path: hf_files_from_card(card)["config.json"] for path, card in DRAFTS.items() if card is not None}
    answer = sglang_wheel.run_child(__file__, {"cases": cases, "draft_configs": configs, "fields": FIELDS}, "upstream resolution")
    return {"version": answer["version"], "cases": cases, "results": answer["results"]}


def test_the_upstream_code_is_the_pinned_release(upstream: dict[str, Any]) -> None:
    assert upstream["version"] == RELEASE


def test_fleet_resolves_every_speculative_launch_as_0523(upstream: dict[str, Any]) -> None:
    mismatches = []
    for case in upstream["cases"]:
        theirs, ours = upstream["results"][case["name"]], fleet_outcome(case)
        if theirs != ours:
            mismatches.append(f"{case['name']}:\n    0.5.23 {theirs}\n    fleet  {ours}")
    assert not mismatches, f"{len(mismatches)} of {len(upstream['cases'])} cases differ:\n" + "\n".join(mismatches[:25])


def test_the_grid_reaches_every_verdict(upstream: dict[str, Any]) -> None:
    # A differential is only a test where the hooks accept and refuse in each of their ways.
    results = upstream["results"].values()
    errors = {(error[0], error[1].split(".")[0]) for result in results if (error := result["error"])}
    accepted = [result for result in results if result["error"] is None]
    assert len(accepted) >= 200 and len(errors) >= 8, (len(accepted), sorted(errors))
    assert {
        ("ValueError", "Currently ngram speculative decoding does not support dp attention"),
        ("ValueError", "DFLASH with dp attention requires --enable-dp-lm-head"),
        ("AssertionError", ""),
    } <= errors
    assert {(5, 4, 8), (3, 1, 4)} <= {(r["values"]["speculative_num_steps"], r["values"]["speculative_eagle_topk"], r["values"]["speculative_num_draft_tokens"]) for r in accepted}


# ---------------------------------------------------------------------------------------------
# The child: 0.5.23's own resolution of each argv, as JSON.


def _child(request: dict[str, Any]) -> dict[str, Any]:
    import logging
    import numbers
    import types
    from importlib.metadata import version
    from collections.abc import Sequence
    from typing import Any as AnyType, List, Optional

    import sglang  # type: ignore[import-untyped]

    srt = Path(sglang.__file__).resolve().parent / "srt"
    sglang_wheel.empty_package("sglang.srt.configs", srt / "configs")
    iquest = types.ModuleType("sglang.srt.configs.iquest_q1")
    iquest.IQuestQ1MTPConfig = type("IQuestQ1MTPConfig", (), {})  # type: ignore[attr-defined]
    sys.modules[iquest.__name__] = iquest
    configs = request["draft_configs"]
    hf_utils = types.ModuleType("sglang.srt.utils.hf_transformers_utils")
    hf_utils.get_config = lambda path, **kwargs: configs.get(path, {"architectures": ["LlamaForCausalLMEagle"]})  # type: ignore[attr-defined]
    sys.modules[hf_utils.__name__] = hf_utils
    given = {"Any": AnyType, "Optional": Optional, "List": List, "Sequence": Sequence, "dataclass": dataclasses.dataclass, "Integral": numbers.Integral}
    sglang_wheel.compile_from_wheel(
        srt,
        "speculative/dflash_utils.py",
        {"_cfg_get", "_get_text_config", "_get_dflash_config", "_parse_optional_int", "DFlashDraftConfig", "parse_dflash_draft_config", "get_dflash_layer_types"},
        given,
        as_module="sglang.srt.speculative.dflash_utils",
    )

    from sglang.srt.arg_groups import speculative_hook as hook  # type: ignore[import-untyped]
    from sglang.srt.arg_groups.model_override_base import resolved_view, resolving_view  # type: ignore[import-untyped]
    from sglang.srt.arg_groups.overrides import _page_size_default, declare_resolution, run_post_process_pass  # type: ignore[import-untyped]
    from sglang.srt.server_args import prepare_server_args  # type: ignore[import-untyped]

    deprecated_dp = sglang_wheel.compile_from_wheel(
        srt, "arg_groups/parallel_hook.py", {"handle_deprecated_dp_attention"}, {"Any": AnyType, "resolving_view": resolving_view, "declare_resolution": declare_resolution}
    )["handle_deprecated_dp_attention"]
    architecture: dict[str, str] = {}
    hook.model_config_of = lambda server_args: types.SimpleNamespace(hf_config=types.SimpleNamespace(architectures=[architecture["now"]]))

    results = {}
    for case in request["cases"]:
        architecture["now"] = case["architecture"]
        server_args = prepare_server_args(case["argv"])
        logging.disable(logging.CRITICAL)  # prepare_server_args configures logging; the hooks' warnings are not results
        declare_resolution(server_args, "differential.platform", device="cuda")
        try:
            deprecated_dp(server_args)
            run_post_process_pass(server_args, _page_size_default)
            hook.handle_speculative_decoding(server_args)
        except Exception as exc:  # AssertionError and TypeError too: fleet predicts each as the start's failure
            results[case["name"]] = {"error": [type(exc).__name__, str(exc)]}
            continue
        view = resolved_view(server_args)
        results[case["name"]] = {"error": None, "values": {name: getattr(view, name) for name in request["fields"]}}
    return {"version": version("sglang"), "results": results}


if __name__ == "__main__":
    json.dump(_child(json.load(sys.stdin)), sys.stdout)
