"""The next fix for a failed run: each failure class, bounded attempts, variants with their own stable ids."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.fixes.autofix import Fix, FixKind, decide, propose_fix
from fleet.fixes.feasibility import check_config
from fleet.host.diagnose.catalogue import SIGNATURE_BY_NAME
from fleet.host.diagnose import diagnose_text
from fleet.host.diagnose.classify import diagnose_file
from fleet.host.engines.sglang import logparse
from fleet.host.engines.sglang.args import resolve_server_args
from fleet.host.engines.sglang.memory import SAFE_MAX_MEM_FRACTION_STATIC
from fleet.host.engines.sim.cli import parse_command_line
from fleet.host.modelcard import load_model_card
from fleet.playbook import AutoFix, Limits, Playbook, Run, expand_runs
from fleet.workloads.kinds import LongContextWorkload, ShortWorkload

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
RTX_PRO_6000_MIB = 97887
LIMITS = Limits(max_fix_attempts=2)


def seed_runs(*, card: bool = True, **server: Any) -> list[Run]:
    """The seed campaign's playbook at TP1 with the seed's launch (8 requests, mamba extra_buffer, ratio 0.5)."""
    data = yaml.safe_load((ROOT / "playbooks" / "qwen36-specdec.yaml").read_text())
    data["tp"] = [1]
    data["server"].update(max_running_requests=8, mamba_scheduler_strategy="extra_buffer", flags={"mamba-full-memory-ratio": 0.5})
    data["server"].update(server)
    if not card:
        del data["model"]["card"]
    return expand_runs(Playbook.model_validate(data))


def seed_run(variant: str = "dflash", workload: str = "short", **kwargs: Any) -> Run:
    return next(r for r in seed_runs(**kwargs) if r.server.variant == variant and r.workload_name == workload)


def propose(run: Run, failure_class: str, numbers: dict[str, Any] | None = None, attempt: int = 1, **kwargs: Any) -> Fix | None:
    kwargs.setdefault("engine", "sim")
    kwargs.setdefault("engine_version", "0.5.12")
    kwargs.setdefault("limits", LIMITS)
    return propose_fix(run.server, run, failure_class, numbers or {}, attempt, gpu_memory_mib=RTX_PRO_6000_MIB, **kwargs)


def catalogue_figures(signature: str, text: str) -> dict[str, str]:
    """The figures the diagnose catalogue's trigger for `signature` extracts from a line of `text`."""
    for line in text.splitlines():
        for trigger in SIGNATURE_BY_NAME[signature].triggers:
            if trigger.literal in line and trigger.pattern:
                match = re.search(trigger.pattern, line)
                if match and any(match.groupdict().values()):
                    return {k: v for k, v in match.groupdict().items() if v is not None}
    raise AssertionError(f"no {signature} figures in the text")


def logged_server_args(path: Path) -> dict[str, str]:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        event = logparse.parse_line(line, number)
        if isinstance(event, logparse.ServerArgsLogged):
            return event.args
    raise AssertionError(f"{path}: no server_args line")


# --- memory ------------------------------------------------------------------------------------


def test_the_seed_failure_gets_the_planners_fix_as_a_new_variant() -> None:
    run = seed_run()
    fix = propose(run, "max_running_requests_zero")

    assert fix is not None and fix.kind is FixKind.MEMORY
    assert fix.new_config is not None and fix.new_config.settings.max_running_requests == 4
    assert fix.new_config.id != run.server.id
    fixed_run = fix.new_run(run)
    assert fixed_run is not None and fixed_run.id != run.id and fixed_run.workload == run.workload
    assert run.server.settings.max_running_requests == 8  # the original stays as it failed
    assert dict(fix.provenance) == {
        "original_config_id": run.server.id,
        "failed_config_id": run.server.id,
        "failed_run_id": run.id,
        "failure_class": "max_running_requests_zero",
        "fix": "max_running_requests 8 -> 4",
        "attempt": 1,
    }
    repeated = propose(run, "max_running_requests_zero")
    assert repeated is not None and repeated.new_config is not None and repeated.new_config.id == fix.new_config.id
    after = check_config(fix.new_config, engine="sim", gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12")
    assert after.ok and after.suggestion == []


def test_without_cards_the_ladder_halves_requests_one_attempt_at_a_time() -> None:
    run = seed_run(card=False)
    first = propose(run, "max_running_requests_zero", attempt=1)
    assert first is not None and first.new_config is not None
    assert first.new_config.settings.max_running_requests == 4

    second_run = first.new_run(run)
    assert second_run is not None
    second = propose(second_run, "max_running_requests_zero", attempt=2, original_config_id=run.server.id)
    assert second is not None and second.new_config is not None
    assert second.new_config.settings.max_running_requests == 2
    assert second.provenance["original_config_id"] == run.server.id
    assert second.provenance["failed_config_id"] == second_run.server.id
    assert len({run.server.id, first.new_config.id, second.new_config.id}) == 3

    third_run = second.new_run(second_run)
    assert third_run is not None
    assert propose(third_run, "max_running_requests_zero", attempt=3) is None  # max_fix_attempts = 2


def test_the_ladder_raises_the_fraction_within_the_safe_bound_then_shortens_the_context() -> None:
    one_request = seed_run(card=False, max_running_requests=1)
    raised = propose(one_request, "kv_pool_too_small")
    assert raised is not None and raised.new_config is not None
    assert raised.new_config.settings.mem_fraction_static == pytest.approx(0.80)

    at_the_bound = seed_run(card=False, max_running_requests=1, mem_fraction_static=SAFE_MAX_MEM_FRACTION_STATIC)
    shorter = propose(at_the_bound, "kv_pool_too_small")
    assert shorter is not None and shorter.new_config is not None
    assert shorter.new_config.settings.context_length == 16384
    assert shorter.new_config.settings.mem_fraction_static == SAFE_MAX_MEM_FRACTION_STATIC

    nothing_left = seed_run(card=False, max_running_requests=1, mem_fraction_static=0.9, context_length=2048)
    assert propose(nothing_left, "kv_pool_too_small") is None


def test_when_one_request_of_the_context_does_not_fit_the_context_that_fits_is_the_fix() -> None:
    """vLLM's start check names the length that fits (kv_cache_planning.py:64-84: "the estimated
    maximum model length is N"): fewer running requests cannot help one request fit, so the fix
    is that length, under either engine, whatever the ladder would have tried first."""
    log = (
        "(EngineCore_DP0 pid=354) ERROR 12-03 11:35:45 [core.py:1584] ValueError: To serve at least one request with the model's max seq len (262144), "
        "(16.0 GiB KV cache is needed, which is larger than the available KV cache memory (14.29 GiB). Based on the available memory, the estimated "
        "maximum model length is 234080. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    diagnosis = diagnose_text([log])
    assert diagnosis.failure_class == "kv_pool_too_small"
    numbers = diagnosis.figures  # what the agent hands the fixer
    run = seed_run(card=False, context_length=262144)  # 8 running requests: the ladder would halve them
    fix = propose(run, "kv_pool_too_small", numbers)
    assert fix is not None and fix.new_config is not None
    assert fix.new_config.settings.context_length == 234080 and fix.new_config.settings.max_running_requests == 8
    assert fix.provenance["fix"] == "context_length 262144 -> 234080"
    # Without the figure the ladder is as before (requests first).
    assert propose(run, "kv_pool_too_small").new_config.settings.max_running_requests == 4  # type: ignore[union-attr]


def test_a_fraction_near_the_bound_is_raised_only_to_the_bound() -> None:
    run = seed_run(card=False, max_running_requests=1, mem_fraction_static=0.88)
    fix = propose(run, "kv_pool_too_small")
    assert fix is not None and fix.new_config is not None
    assert fix.new_config.settings.mem_fraction_static == SAFE_MAX_MEM_FRACTION_STATIC


def test_a_pool_too_small_with_cards_is_fixed_so_that_the_planner_agrees() -> None:
    run = seed_run(mem_fraction_static=0.5, max_running_requests=1)
    assert not check_config(run.server, engine="sim", gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12").ok

    fix = propose(run, "kv_pool_too_small")

    assert fix is not None and fix.new_config is not None
    fraction = fix.new_config.settings.mem_fraction_static
    assert fraction is not None and fraction <= SAFE_MAX_MEM_FRACTION_STATIC
    assert check_config(fix.new_config, engine="sim", gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12").ok


def test_the_logged_request_count_is_used_when_the_playbook_left_it_unset() -> None:
    run = seed_run(card=False, max_running_requests=None)
    fix = propose(run, "max_running_requests_zero", {"requested_max_running_requests": "8"})
    assert fix is not None and fix.new_config is not None and fix.new_config.settings.max_running_requests == 4


# --- context length ----------------------------------------------------------------------------


def test_the_seeds_30k_prompt_is_shrunk_by_the_tokens_the_server_counted() -> None:
    # Seed 004: a 30k-token target became 32,700 real tokens; with 256 new tokens that is over 32768.
    figures = catalogue_figures("context_length_exceeded", (LOGS / "context-length-generate-400.log").read_text())
    assert figures == {"context_len": "32768", "total_tokens": "32956", "input_tokens": "32700", "max_new_tokens": "256"}
    run = seed_run("autoregressive", "long_context")
    workload = run.workload
    assert isinstance(workload, LongContextWorkload) and workload.prompt_tokens == 30000

    fix = propose(run, "context_length_exceeded", figures)

    assert fix is not None and fix.kind is FixKind.SHRINK_PROMPT and fix.new_config is None
    shrunk = fix.new_workload
    assert isinstance(shrunk, LongContextWorkload)
    real_per_target = 32700 / 30000
    room = 32768 - 256 - workload.margin_tokens
    assert shrunk.prompt_tokens * real_per_target <= room < (shrunk.prompt_tokens + 1) * real_per_target
    assert (shrunk.max_new_tokens, shrunk.margin_tokens) == (workload.max_new_tokens, workload.margin_tokens)
    fixed_run = fix.new_run(run)
    assert fixed_run is not None and fixed_run.server == run.server and fixed_run.id != run.id
    assert fix.provenance["fix"] == f"prompt_tokens 30000 -> {shrunk.prompt_tokens}"


def test_without_figures_the_prompt_is_fitted_to_the_configured_context() -> None:
    run = seed_run("autoregressive", "long_context", context_length=16384)
    fix = propose(run, "context_length_exceeded")
    assert fix is not None and isinstance(fix.new_workload, LongContextWorkload)
    assert fix.new_workload.prompt_tokens == 16384 - 256 - 64


def test_fixed_prompts_give_up_new_tokens_instead() -> None:
    run = seed_run("autoregressive", "short")
    assert isinstance(run.workload, ShortWorkload)
    fix = propose(run, "context_length_exceeded", {"context_len": "4096", "input_tokens": "3900", "max_new_tokens": "256"})

    assert fix is not None and fix.kind is FixKind.SHRINK_NEW_TOKENS
    assert isinstance(fix.new_workload, ShortWorkload) and fix.new_workload.max_new_tokens == 4096 - 3900 - 64
    assert fix.new_workload.prompts == run.workload.prompts


def test_a_kv_pool_input_limit_bounds_the_prompt() -> None:
    # sample 007: the KV pool, not --context-length, limits the input (max_allowed).
    run = seed_run("autoregressive", "long_context")
    fix = propose(run, "context_length_exceeded", {"input_tokens": "30000", "max_allowed": "20000", "context_len": "32768"})
    assert fix is not None and isinstance(fix.new_workload, LongContextWorkload)
    assert fix.new_workload.prompt_tokens == 20000 - 64


def test_a_context_above_the_models_is_brought_down_to_it() -> None:
    card = load_model_card("qwen3.6-27b")
    raw, _ = parse_command_line(["--model-path", "qwen3.6-27b", "--context-length", "300000"], {})
    refusal = resolve_server_args(raw, card, None, {}, sim_seed=0).failure
    assert refusal is not None
    figures = catalogue_figures("context_length_exceeded", refusal.message)
    run = seed_run("autoregressive", "short", context_length=300_000)

    fix = propose(run, "context_length_exceeded", figures)

    assert fix is not None and fix.kind is FixKind.CONTEXT_LENGTH and fix.new_workload is None
    assert fix.new_config is not None and fix.new_config.settings.context_length == card.context_length


# --- CUDA ------------------------------------------------------------------------------------------


def test_a_cuda_graph_oom_halves_the_logged_batch_size() -> None:
    args = logged_server_args(LOGS / "cuda-graph-oom.log")
    run = seed_run("autoregressive", card=False, max_running_requests=None)
    fix = propose(run, "cuda_oom", {"capture_step": "CUDA graph capture", "cuda_graph_max_bs": args["cuda_graph_max_bs"]})

    assert fix is not None and fix.kind is FixKind.CUDA_GRAPH_MAX_BS
    assert fix.new_config is not None and fix.new_config.settings.cuda_graph_max_bs == int(args["cuda_graph_max_bs"]) // 2


def test_a_cuda_graph_oom_starts_from_sglangs_default_for_the_gpu() -> None:
    # 96 GB at TP1: SGLang's default cuda_graph_max_bs is 256, but no batch larger than the request
    # pool is captured, so the largest graph was the pool's size (the mamba cache caps it here).
    run = seed_run("autoregressive", max_running_requests=64)
    plan = check_config(run.server, engine="sim", gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12").plan
    assert plan is not None and plan.failure is None and plan.cuda_graph_max_bs == 256
    captured = min(plan.cuda_graph_max_bs, plan.max_running_requests)
    assert 2 <= captured < 64

    fix = propose(run, "cuda_oom", {"capture_step": "CUDA graph capture"})
    assert fix is not None and fix.new_config is not None and fix.new_config.settings.cuda_graph_max_bs == captured // 2

    again = fix.new_run(run)
    assert again is not None
    second = propose(again, "cuda_oom", {"capture_step": "CUDA graph capture"}, attempt=2)
    assert second is not None and second.new_config is not None
    assert second.new_config.settings.cuda_graph_max_bs == captured // 4


def test_a_cuda_graph_error_captures_fewer_batches_then_none() -> None:
    # The figures come from the diagnosis of a 0.5.23 capture failure that is not OOM.
    diagnosis = diagnose_file(LOGS / "cuda-graph-capture-stream-0523.log")
    assert diagnosis.failure_class == "cuda_graph_error" and diagnosis.figures["cuda_graph_max_bs"] == "64"
    run = seed_run("autoregressive", card=False, max_running_requests=None)
    fix = propose(run, "cuda_graph_error", diagnosis.figures, engine="sglang", engine_version="0.5.23")
    assert fix is not None and fix.kind is FixKind.CUDA_GRAPH_MAX_BS
    assert fix.new_config is not None and fix.new_config.settings.cuda_graph_max_bs == 32
    assert "--cuda-graph-max-bs-decode 32 under SGLang 0.5.23" in fix.description
    assert "operation not permitted when stream is capturing" in fix.description
    assert fix.provenance["failure_class"] == "cuda_graph_error" and fix.provenance["attempt"] == 1
    assert fix.provenance["original_config_id"] == run.server.id and fix.new_config.id != run.server.id
    # 0.5.12 spells the flag --cuda-graph-max-bs.
    old = propose(run, "cuda_graph_error", diagnosis.figures, engine="sglang", engine_version="0.5.12")
    assert old is not None and "--cuda-graph-max-bs 32 under SGLang 0.5.12" in old.description

    # The halved variant failed to capture again: no decode graphs, in the release's own words.
    again = fix.new_run(run)
    assert again is not None
    second = propose(again, "cuda_graph_error", diagnosis.figures, attempt=2, engine="sglang", engine_version="0.5.23")
    assert second is not None and second.kind is FixKind.DISABLE_CUDA_GRAPH
    assert second.new_config is not None and second.new_config.settings.flags["cuda-graph-backend-decode"] == "disabled"
    assert second.new_config.settings.cuda_graph_max_bs == 32 and second.new_config.id != again.server.id
    first_old = propose(again, "cuda_graph_error", {}, attempt=2, engine="sglang", engine_version="0.5.12")
    assert first_old is not None and first_old.new_config is not None and first_old.new_config.settings.flags["disable-cuda-graph"] is True
    # Already without graphs: nothing left to change; past the attempt limit: nothing either.
    disabled = second.new_run(again)
    assert disabled is not None
    assert propose(disabled, "cuda_graph_error", {}, attempt=2, engine="sglang", engine_version="0.5.23") is None
    assert propose(run, "cuda_graph_error", diagnosis.figures, attempt=3) is None


def test_a_cuda_graph_error_without_a_known_batch_size_disables_graphs() -> None:
    run = seed_run("autoregressive", card=False, max_running_requests=None)
    fix = propose(run, "cuda_graph_error", {}, engine="sglang", engine_version="0.5.23")
    assert fix is not None and fix.kind is FixKind.DISABLE_CUDA_GRAPH and "--cuda-graph-backend-decode=disabled" in fix.description


def test_an_oom_outside_capture_without_cards_has_no_automatic_fix() -> None:
    assert propose(seed_run("autoregressive", card=False), "cuda_oom", {"tried": "1.52 GiB"}) is None


def test_an_illegal_instruction_quarantines_the_budget_for_the_architecture() -> None:
    run = seed_run("ddtree-b8")
    fix = propose(run, "cuda_illegal_instruction", {"ddtree_budget": "8"}, gpu_arch="sm_120", engine="sglang", engine_version="0.5.23")

    assert fix is not None and fix.kind is FixKind.QUARANTINE
    assert fix.new_config is None and fix.new_workload is None and fix.new_run(run) is None
    assert fix.quarantine is not None and str(fix.quarantine) == "sm_120/sglang@0.5.23/DDTREE/b8"
    # Not a retry: the attempt limit does not hold it back.
    assert propose(run, "cuda_illegal_instruction", attempt=9, gpu_arch="sm_120") is not None
    # Without the architecture a quarantine would also hit GPUs that run the kernel fine.
    assert propose(run, "cuda_illegal_instruction") is None


def test_port_in_use_asks_for_another_port() -> None:
    run = seed_run()
    figures = catalogue_figures("port_in_use", (LOGS / "port-in-use-nccl-port.log").read_text())
    assert figures["port"] == "30005"
    fix = propose(run, "port_in_use", figures)

    assert fix is not None and fix.needs_new_port and fix.new_run(run) is None
    assert f"port {figures['port']} is taken" in fix.description


@pytest.mark.parametrize("failure_class", ["model_load_error", "import_error", "nccl_error", "unknown"])
def test_classes_without_an_automatic_fix(failure_class: str) -> None:
    assert propose(seed_run(), failure_class) is None


# --- bounds and policy -----------------------------------------------------------------------------


def test_no_fix_when_fixing_is_switched_off_by_the_limit() -> None:
    assert propose(seed_run(), "max_running_requests_zero", limits=Limits(max_fix_attempts=0)) is None
    assert propose(seed_run(), "port_in_use", limits=Limits(max_fix_attempts=0)) is None


def test_a_run_of_another_configuration_is_refused() -> None:
    run, other = seed_run("dflash"), seed_run("autoregressive")
    with pytest.raises(ValueError, match="not of the configuration"):
        propose_fix(other.server, run, "port_in_use", {}, 1, gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None, limits=LIMITS)
    with pytest.raises(ValueError, match="attempt 0"):
        propose(run, "port_in_use", attempt=0)


def test_policy_decides_what_happens_to_a_fix() -> None:
    fix = propose(seed_run(), "port_in_use")
    assert fix is not None
    assert [decide(policy, fix) for policy in AutoFix] == ["apply", "suggest", "off"]
