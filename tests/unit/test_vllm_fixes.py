"""vLLM's failures through the same repair machinery as SGLang's (issue 23): each diagnosed from
vLLM's own text, each with its fix or quarantine, its provenance, and a variant whose launch says
the change in vLLM's flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.fixes.autofix import Fix, FixKind, propose_fix
from fleet.host.diagnose import diagnose_text
from fleet.launch import launch_spec
from fleet.plan import quarantine_engine
from fleet.playbook import Limits, Playbook, Run, expand_runs
from tests.unit.fake_hosts import make_host

ROOT = Path(__file__).resolve().parents[2]
H100_MIB = 81559
START = "(EngineCore_DP0 pid=2) INFO 05-12 10:11:10 [gpu_model_runner.py:4979] Starting to load model meta-llama/Llama-3.1-8B-Instruct..."
CORE = "(EngineCore_DP0 pid=2) ERROR 05-12 10:11:12 [core.py:1584] "


def vllm_run(**server: Any) -> Run:
    """Llama 3.1 8B (a card vLLM's planner models) served by vLLM alone."""
    data = yaml.safe_load((ROOT / "playbooks" / "demo.yaml").read_text())
    data.pop("drafts")
    data.update(
        model={"repo": "meta-llama/Llama-3.1-8B-Instruct", "revision": "main", "card": "llama-3.1-8b-instruct"},
        methods={"autoregressive": {}},
        engine=["vllm"],
        server={"context_length": 131072, "mem_fraction_static": 0.2, "max_running_requests": 64, **server},
    )
    return expand_runs(Playbook.model_validate(data))[0]


def fix_for(run: Run, line: str, **kwargs: Any) -> tuple[str | None, Fix | None]:
    diagnosis = diagnose_text([START, line])
    kwargs.setdefault("engine", "vllm")
    fix = propose_fix(run.server, run, diagnosis.failure_class or "unknown", diagnosis.figures, 1, gpu_memory_mib=H100_MIB, engine_version="0.33.0", limits=Limits(), **kwargs)
    return diagnosis.failure_class, fix


def flags_of(fix: Fix) -> list[str]:
    assert fix.new_config is not None
    return launch_spec("sglang", fix.new_config, python="python3", model_path="/m", draft_path=None, port=8000, engine_version="0.33.0").argv  # type: ignore[arg-type]


def value_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize(
    "line",
    [
        CORE + "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the "
        "available KV cache memory (3.10 GiB). Based on the available memory, the estimated maximum model length is 25344. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        CORE + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        CORE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
    ],
    ids=["kv-cache-too-small-for-max-model-len", "no-memory-for-cache-blocks", "oom-in-profiling"],
)
def test_a_memory_failure_gets_the_planners_fix_in_vllms_flags(line: str) -> None:
    run = vllm_run()
    failure_class, fix = fix_for(run, line)
    assert failure_class in ("kv_pool_too_small", "cuda_oom")
    assert fix is not None and fix.kind is FixKind.MEMORY and fix.provenance["failure_class"] == failure_class
    argv = flags_of(fix)
    assert argv[2:4] == ["vllm.entrypoints.cli.main", "serve"]
    # 0.2 of the GPU leaves the 8B model no KV cache: the planner's smallest fix raises it, and the
    # variant is one it expects to start (trust_planner: no variant predicted to fail again).
    assert float(value_after(argv, "--gpu-memory-utilization")) > 0.2
    assert fix.new_config is not None and fix.new_config.id != run.server.id


def test_max_model_len_above_the_models_is_brought_down_to_it() -> None:
    run = vllm_run(context_length=300000, mem_fraction_static=0.9)
    line = (
        "(APIServer pid=1) ValueError: User-specified max_model_len (300000) is greater than the derived max_model_len (max_position_embeddings=131072.0 "
        "or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    )
    failure_class, fix = fix_for(run, line)
    assert failure_class == "context_length_exceeded"
    assert fix is not None and fix.kind is FixKind.CONTEXT_LENGTH and fix.provenance["fix"] == "context_length 300000 -> 131072"
    assert "vLLM refuses a context length of 300000" in fix.description
    assert value_after(flags_of(fix), "--max-model-len") == "131072"


def test_an_unsupported_architecture_quarantines_the_configuration_for_that_gpu() -> None:
    run = vllm_run()
    line = CORE + "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    failure_class, fix = fix_for(run, line, gpu_arch="sm_120")
    assert failure_class == "unsupported_gpu_arch"
    assert fix is not None and fix.kind is FixKind.QUARANTINE and str(fix.quarantine) == "sm_120/vllm@0.33.0/AUTOREGRESSIVE/-"
    assert "no kernels for this GPU architecture" in fix.description
    # A sim host's vLLM is not a real one: what the simulator quarantines keeps its own key.
    sim = make_host("ct201", kind="sim")
    assert quarantine_engine(sim, "vllm") == "sim-vllm" and quarantine_engine(sim, "sglang") == "sim"
    assert quarantine_engine(make_host("ct200", kind="sglang"), "vllm") == "vllm"
