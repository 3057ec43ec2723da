"""A simulated server's startup log, run in-process: every line parses with fleet's SGLang log parser,
the figures it extracts are the memory planner's, and the lines and their order are those of the
release the simulator plays (`FLEET_SIM_SGLANG_VERSION`)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from fleet.host.engines.sglang import logparse
from fleet.host.engines.sglang.flags import flag_for
from fleet.host.engines.sglang.logformats import log_formats
from fleet.host.engines.sglang.release import KNOWN_RELEASES
from fleet.host.engines.sim.server import SimServer, prepare

SEED = ["--model-path", "qwen3.6-27b", "--context-length", "32768", "--mem-fraction-static", "0.75", "--trust-remote-code"]
# MAMBA_STRATEGY: the release's spelling of the mamba strategy flag (--mamba-scheduler-strategy in
# 0.5.12, --mamba-radix-cache-strategy in 0.5.23), filled in by `start`.
MAMBA = "MAMBA_STRATEGY"
DFLASH = ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "qwen3.6-27b-dflash", MAMBA, "extra_buffer", "--mamba-full-memory-ratio", "0.5"]


class Died(Exception):
    pass


@pytest.fixture(autouse=True)
def no_gpu_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No nvidia-smi or nvcc on PATH: the GPUs come from the --sim-gpu-* defaults (8x RTX PRO 6000)."""
    monkeypatch.setenv("PATH", str(tmp_path))


def start(args: list[str], release: str | None = None) -> tuple[SimServer | int, list[logparse.LogEvent | None], str]:
    err, out = io.StringIO(), io.StringIO()
    env = {"FLEET_SIM_SGLANG_VERSION": release} if release else {}
    if "DDTREE" in args:
        env["FLEET_SIM_SGLANG_FORK"] = "ddtree"  # DDTree's flags exist only in the fork
    args = [flag_for(release or "0.5.23", "mamba_scheduler_strategy") if arg == MAMBA else arg for arg in args]
    server = prepare(args + ["--sim-speed", "0.00001"], env, err, out)
    if isinstance(server, SimServer):

        def died() -> None:
            raise Died

        server.kill_self = died
        try:
            asyncio.run(server.start_scheduler())
        except Died:
            pass
    text = err.getvalue()
    return server, [logparse.parse_line(line, n) for n, line in enumerate(text.splitlines(), 1)], text


def summary_of(events) -> logparse.LogSummary:
    summary = logparse.LogSummary()
    for event in events:
        if event is not None and not isinstance(event, logparse.Other):
            summary.add(event)
    return summary


@pytest.mark.parametrize(
    "args",
    [
        SEED + ["--max-running-requests", "4"],
        SEED + ["--tp-size", "2", "--disable-cuda-graph"],
        # 0.85: under 0.5.23's sizing the seed's 0.75 leaves DFLASH's mamba cache too small to start.
        SEED + DFLASH + ["--max-running-requests", "4", "--mem-fraction-static", "0.85"],
        SEED
        + [
            "--speculative-algorithm",
            "DDTREE",
            "--speculative-ddtree-budget",
            "15",
            "--speculative-draft-model-path",
            "qwen3.6-27b-dflash",
            "--tp-size",
            "4",
            MAMBA,
            "extra_buffer",
            "--max-running-requests",
            "16",
        ],
        ["--model-path", "qwen3.6-27b", "--tp-size", "8", "--disable-radix-cache"],
    ],
    ids=["ar-tp1", "ar-tp2-nographs", "dflash-tp1", "ddtree-tp4", "ar-tp8-defaults"],
)
@pytest.mark.parametrize("release", KNOWN_RELEASES)
def test_startup_figures_are_the_memory_plan(args: list[str], release: str) -> None:
    server, events, text = start(args, release)
    assert isinstance(server, SimServer)
    plan, tp = server.plan, server.tp
    summary = summary_of(events)
    assert summary.server_args.args["tp_size"] == str(tp)
    assert summary.server_args.number("mem_fraction_static") == pytest.approx(plan.mem_fraction_static)
    assert summary.weights_loaded.mem_usage_gb == round(plan.weights_gb_per_gpu, 2)
    assert summary.weights_loaded.avail_mem_gb == round(plan.post_load_avail_gb, 2)
    assert summary.mamba_cache.max_mamba_cache_size == plan.max_mamba_cache_size
    assert (summary.mamba_cache.conv_state_gb, summary.mamba_cache.ssm_state_gb) == (round(plan.conv_state_gb, 2), round(plan.ssm_state_gb, 2))
    if server.resolved.algorithm:
        assert summary.mamba_cache.intermediate_ssm_state_gb == round(plan.intermediate_ssm_gb, 2)
        assert summary.draft_kv_cache.k_gb == round(plan.draft_k_size_gb, 2)
    else:
        assert summary.mamba_cache.intermediate_ssm_state_gb is None
    assert (summary.kv_cache.tokens, summary.kv_cache.k_gb, summary.kv_cache.v_gb) == (plan.kv_tokens, round(plan.k_size_gb, 2), round(plan.v_size_gb, 2))
    # 0.5.12 does not log the pool's dtype (memory_pool.py:744); 0.5.23 does (memory_pool.py:2088).
    assert summary.kv_cache.dtype == ("torch.bfloat16" if release == "0.5.23" else None)
    assert (summary.scheduler.max_total_num_tokens, summary.scheduler.max_running_requests, summary.scheduler.context_len, summary.scheduler.chunked_prefill_size) == (
        plan.kv_tokens,
        plan.max_running_requests,
        plan.context_len,
        plan.chunked_prefill_size,
    )
    ranks = {event.rank for event in events if isinstance(event, logparse.WeightsLoaded)}
    assert ranks == ({None} if tp == 1 else {f"TP{r}" for r in range(tp)})
    # The scheduler line is TP0's alone.
    assert [e.rank for e in events if isinstance(e, logparse.SchedulerReady)] == [None if tp == 1 else "TP0"]
    phases = [e.phase for e in events if isinstance(e, logparse.StartupPhase)]
    assert ("cuda_graph_begin" in phases) != ("--disable-cuda-graph" in args)
    assert text.index("Load weight begin") < text.index("Mamba Cache is allocated") < text.index("KV Cache is allocated") < text.index("Memory pool end")
    assert summary.starts == 1 and summary.server_args.line_no < min(e.line_no for e in events if isinstance(e, logparse.StartupPhase))
    formats = log_formats(release)
    # Distributed init: per rank, and (0.5.12 only) again for the draft worker.
    draft = server.resolved.algorithm in ("DFLASH", "DDTREE")
    inits = text.count("] " + formats.init_begin.format() + "\n")
    assert inits == tp * (2 if draft and formats.draft_inits_parallel else 1)
    assert text.count("Memory baseline taken.") == (0 if formats.memory_baseline is None else tp * (2 if draft else 1))
    if draft:
        draft_loaded = text.index("type=DFlashDraftModel")
        target_pool = text.index("Mamba Cache is allocated")
        # 0.5.23 loads the draft before it sizes the pools; 0.5.12 after the target's graphs.
        assert (draft_loaded < target_pool) == formats.draft_loads_before_pools
    other = log_formats(next(r for r in KNOWN_RELEASES if r != release))
    assert other.init_begin.format() not in text
    assert (formats.capture_begin.regex(formats.capture_begin.head).search(text) is not None) != ("--disable-cuda-graph" in args)


def test_seed_failure_lines_stop_after_the_pools() -> None:
    server, events, text = start(SEED + DFLASH + ["--max-running-requests", "8"], "0.5.12")
    summary = summary_of(events)
    assert (summary.mamba_cache.max_mamba_cache_size, summary.kv_cache.tokens) == (2, 11893)
    assert summary.scheduler is None and "Capture cuda graph" not in text
    assert text.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
    assert "AssertionError: max_running_request is zero\n" in text


def test_cuda_graph_capture_runs_out_of_memory_at_a_high_fraction() -> None:
    server, events, text = start(["--model-path", "qwen3.6-27b", "--context-length", "32768", "--mem-fraction-static", "0.99"], "0.5.12")
    assert "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate" in text
    assert "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)" in text
    summary = summary_of(events)
    assert summary.last_phase is not None and summary.last_phase.phase == "cuda_graph_begin"
    assert summary.last_phase.line_no < text[: text.index("Scheduler hit an exception")].count("\n") + 1


def test_fa3_on_sm120_fails_like_sglang() -> None:
    server, events, text = start(SEED + ["--attention-backend", "fa3"])
    assert "AssertionError: FlashAttention v3 Backend requires SM>=80 and SM<=90. Please use `--attention-backend flashinfer`." in text


def test_more_tp_ranks_than_gpus_fails_on_the_device() -> None:
    server, events, text = start(SEED + ["--tp-size", "4", "--sim-gpu-count", "2"])
    assert "CUDA error: invalid device ordinal" in text and "[" in text


def test_missing_model_and_bad_fault_profile_stop_before_server_args(tmp_path: Path) -> None:
    code, events, text = start(["--model-path", "Qwen/Qwen3.6-27B-Instruct"])
    assert code == 1 and "server_args=" not in text
    assert text.rstrip().endswith("'https://huggingface.co/docs/transformers/installation#offline-mode'.")
    bad = tmp_path / "faults.json"
    bad.write_text('{"hang": 1}')
    code, events, text = start(["--model-path", "qwen3.6-27b", "--sim-faults", str(bad)])
    assert code == 2 and "unknown keys ['hang']" in text


def write_faults(tmp_path: Path, **faults: object) -> str:
    import json

    path = tmp_path / "sim-faults.json"
    path.write_text(json.dumps(faults))
    return str(path)


def test_slow_start_stretches_weight_loading(tmp_path: Path) -> None:
    args = ["--model-path", "qwen3.6-27b", "--sim-speed", "0.001"]
    err = io.StringIO()
    server = prepare(args + ["--sim-faults", write_faults(tmp_path, slow_start_s=300)], {}, err, io.StringIO())
    asyncio.run(server.start_scheduler())
    loaded = [e for e in map(logparse.parse_line, err.getvalue().splitlines()) if isinstance(e, logparse.WeightsLoaded)]
    assert loaded[0].elapsed_s >= 0.3  # 300 simulated seconds at speed 0.001


def test_missing_model_and_port_in_use_faults(tmp_path: Path) -> None:
    code, events, text = start(["--model-path", "qwen3.6-27b", "--sim-faults", write_faults(tmp_path, missing_model_path=True)])
    assert code == 1 and "HFValidationError" not in text and "OSError: We couldn't connect to 'https://huggingface.co'" in text

    err = io.StringIO()
    server = prepare(["--model-path", "qwen3.6-27b", "--port", "31555", "--sim-speed", "0.00001", "--sim-faults", write_faults(tmp_path, port_in_use=True)], {}, err, io.StringIO())
    assert asyncio.run(server.run()) == 1
    lines = err.getvalue().splitlines()
    assert lines[-3].endswith("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 31555): address already in use")
    assert lines[-2:] == [lines[-2][:21] + " INFO:     Waiting for application shutdown.", lines[-1][:21] + " INFO:     Application shutdown complete."]


def test_log_level_warning_keeps_errors_only() -> None:
    server, events, text = start(SEED + DFLASH + ["--max-running-requests", "8", "--log-level", "warning"], "0.5.12")
    assert "Load weight begin" not in text and "KV Cache is allocated" not in text
    assert "Scheduler hit an exception: Traceback" in text and "AssertionError: max_running_request is zero" in text


def test_a_hugging_face_model_directory_starts_with_plain_kv_lines() -> None:
    directory = Path(__file__).resolve().parents[1] / "fixtures" / "sim" / "llama-3.1-8b-instruct"
    server, events, text = start(["--model-path", str(directory), "--context-length", "8192"])
    assert isinstance(server, SimServer) and not server.target.is_hybrid
    summary = summary_of(events)
    assert summary.weights_loaded.model_class == "LlamaForCausalLM"
    assert summary.weights_loaded.mem_usage_gb == round(16060522496 / (1 << 30), 2)
    assert summary.mamba_cache is None and "Mamba Cache" not in text
    assert summary.kv_cache.tokens == server.plan.kv_tokens and summary.scheduler.context_len == 8192


def test_partial_model_directories_fail_like_transformers_and_sglang(tmp_path: Path) -> None:
    empty = tmp_path / "Qwen3.6-27B"
    empty.mkdir()
    code, events, text = start(["--model-path", str(empty)])
    assert code == 1 and f"ValueError: Unrecognized model in {empty}. Should have a `model_type` key in its config.json" in text
    (empty / "config.json").write_text((Path(__file__).resolve().parents[1] / "fixtures" / "sim" / "llama-3.1-8b-instruct" / "config.json").read_text())
    code, events, text = start(["--model-path", str(empty)])
    assert code == 1 and text.rstrip().endswith(f"RuntimeError: Cannot find any model weights with `{empty}`")


def test_wiped_model_path_raises_through_transformers_chain() -> None:
    code, events, text = start(["--model-path", "/dev/shm/Qwen3.6-27B"])
    assert code == 1
    assert "HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/dev/shm/Qwen3.6-27B'." in text
    assert "During handling of the above exception, another exception occurred:" in text
    assert text.rstrip().endswith("make sure '/dev/shm/Qwen3.6-27B' is the correct path to a directory containing a config.json file")


def test_each_server_draws_its_own_noise_and_the_same_server_the_same() -> None:
    """Noise seeded by the outputs' seed alone made pass k of every configuration draw the same
    factor, which a paired speed-up divides out (intervals narrower than hardware's): each
    server's noise comes from its own command line, while its outputs stay the model's."""
    base = ["--model-path", "qwen3.6-27b", "--tp-size", "1", "--sim-noise", "on"]
    seeds = {}
    for name, extra in {"ar": [], "ar again": [], "other port": ["--port", "31001"], "capped": ["--max-running-requests", "2"]}.items():
        server, _, text = start(base + extra)
        assert isinstance(server, SimServer), text
        engine = server.build_engine()
        seeds[name] = engine.config.noise_seed
        assert engine.config.seed == 0  # the outputs' seed, shared by every server of the model
    assert seeds["ar"] == seeds["ar again"]
    assert len({seeds["ar"], seeds["other port"], seeds["capped"]}) == 3


def test_an_eagle_start_is_sized_with_its_draft_as_the_planner_sizes_it() -> None:
    """0.5.23 counts an EAGLE-family draft's KV cells and weights (pool_configurator.py:290-314);
    the sim plans a start with the draft's card where the release does (memory.sizes_draft), so its
    KV pool is the planner's. (Before, it passed a draft for DFLASH only: more tokens than predicted.)"""
    from fleet.host.engines import engine as engine_named
    from fleet.host.modelcard import load_model_card

    args = ["--model-path", "llama-3.1-8b-instruct", "--context-length", "8192", "--mem-fraction-static", "0.8", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "llama-3.1-8b-instruct", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4", "--max-running-requests", "8"]  # fmt: skip
    server, _, _ = start(args, "0.5.23")
    assert isinstance(server, SimServer)
    card = load_model_card("llama-3.1-8b-instruct")
    predicted = engine_named("sglang").predict_start(args, {}, card, card, algorithm="EAGLE3", gpu_memory_mib=97887, release="0.5.23", fork=None)
    assert predicted.plan is not None and server.plan.kv_tokens == predicted.plan.kv_tokens
    undrafted = engine_named("sglang").predict_start(args, {}, card, None, algorithm="EAGLE3", gpu_memory_mib=97887, release="0.5.23", fork=None)
    assert undrafted.plan is None or undrafted.plan.kv_tokens != server.plan.kv_tokens  # the draft is what makes the difference
