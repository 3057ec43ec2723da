"""`fleet diagnose` on the texts the engines and their libraries print when a start fails (issue 27, round seventeen).

Each rule comes from the source that prints the text (the release and line are named in the catalogue beside the
trigger); each test builds its lines from that format string, with other figures, in the engine's own framing: SGLang's
scheduler traceback ("Scheduler hit an exception" ... the exception line ... the launcher's sigquit) and vLLM's engine
core ("(EngineCore_DP0 pid=7) ERROR ... EngineCore failed to start." ... the exception line under the same prefix ...
the API server's "Engine core initialization failed"). The real logs that carry the texts are read too, by their
manifest entries (never by their file names alone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.diagnose.classify import Diagnosis, diagnose_file, diagnose_text

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"

_SGLANG_HEAD = [
    "[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=2)",
    "[2026-05-24 10:00:02 TP0] Load weight begin. avail mem=78.00 GB",
    "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2000, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
]
_SGLANG_TAIL = ["", "[2026-05-24 10:00:04] Received sigquit from a child process. It usually means the child failed."]
_VLLM_PREFIX = "(EngineCore_DP0 pid=7) ERROR 05-24 10:00:03 [core.py:708] "
_VLLM_HEAD = [
    "INFO 05-24 10:00:00 [api_server.py:1000] vLLM API server version 0.33.0",
    _VLLM_PREFIX + "EngineCore failed to start.",
    _VLLM_PREFIX + "Traceback (most recent call last):",
    _VLLM_PREFIX + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core',
    _VLLM_PREFIX + "    engine_core = EngineCoreProc(*args, **kwargs)",
]
_VLLM_TAIL = ["(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]


def sglang(line: str) -> list[str]:
    return [*_SGLANG_HEAD, line, *_SGLANG_TAIL]


def vllm(line: str) -> list[str]:
    return [*_VLLM_HEAD, _VLLM_PREFIX + line, *_VLLM_TAIL]


FRAMINGS = {"sglang": sglang, "vllm": vllm}


def _read_as_labelled(folder: str, file: str, label: str) -> Diagnosis:
    """A real log, read through its manifest entry: fleet's class is the entry's label, and the label is `label`."""
    entry = _entry(folder, file)
    diagnosis = diagnose_file(LOGS / folder / file)
    assert (diagnosis.failure_class or "healthy") == entry["label"] == label
    return diagnosis


def _entry(folder: str, file: str) -> dict[str, object]:
    manifest = LOGS / folder / "manifest.jsonl"
    for raw in manifest.read_text(encoding="utf-8").splitlines():
        if raw.strip() and json.loads(raw)["file"] == file:
            entry: dict[str, object] = json.loads(raw)
            return entry
    raise AssertionError(f"{file} is not in {manifest}")


# (expected class, the line as the source formats it, the engines that print it or a library both load)
CASES = [
    # PyTorch's driver-API check, c10/cuda/driver_api.h C10_CUDA_DRIVER_CHECK: "CUDA driver error: " + cuGetErrorString.
    ("cuda_oom", "RuntimeError: CUDA driver error: out of memory", ("sglang", "vllm")),
    # Triton's launcher, third_party/nvidia/backend/driver.c gpuAssert: "Triton Error [CUDA]: %s".
    ("cuda_oom", "RuntimeError: Triton Error [CUDA]: out of memory", ("sglang", "vllm")),
    # PyTorch's checks on ROCm (hipified C10_CUDA_CHECK) and around cuBLAS (TORCH_CUDABLAS_CHECK).
    ("cuda_oom", "RuntimeError: HIP error: out of memory", ("sglang", "vllm")),
    ("cuda_oom", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", ("sglang", "vllm")),
    # c10d NCCLComm::getNcclComm before torch 2.2 (a RuntimeError; a DistBackendError since).
    ("nccl_error", "RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: NCCL error: unhandled system error", ("sglang", "vllm")),
    # PyTorch's capture guard, aten/src/ATen/cuda/CUDAGraphsUtils.cuh assertNotCapturing.
    (
        "cuda_graph_error",
        "RuntimeError: Cannot call CUDAGeneratorImpl::seed during CUDA graph capture. If you need this call to be captured, "
        "please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive",
        ("sglang", "vllm"),
    ),
    # ... CUDAGraph.cpp's replay guard, the same status words.
    ("cuda_graph_error", "RuntimeError: Cannot prepare for replay during capturing stage. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusInvalidated", ("sglang", "vllm")),
    # SGLang 0.5.23 srt/utils/network.py:178 try_bind_socket.
    ("port_in_use", "OSError: Could not bind port 31000 on any configured address family", ("sglang",)),
    # vLLM 0.4.0-0.4.1 _custom_ops.py: the names its failed `from vllm._C import ...` did not bind.
    ("import_error", "NameError: name 'vllm_ops' is not defined", ("vllm",)),
    ("import_error", "NameError: name 'vllm_cache_ops' is not defined", ("vllm",)),
    # A ModuleNotFoundError in the engine's own words (vLLM 0.33 utils/hashing.py:65).
    ("import_error", "ModuleNotFoundError: xxhash is required for the 'xxhash' prefix caching hash algorithms. Install it via `pip install xxhash`.", ("vllm",)),
    # Exceptions naming the pip command: vLLM ray_utils / config, SGLang cuda_utils.py:35, weight_utils.py, 0.4.x quantization.
    ("import_error", "ValueError: Failed to import Ray, please install Ray with `pip install ray`.", ("vllm",)),
    ("import_error", "ValueError: Unable to load Ray which is required for multi-node inference, please install Ray with `pip install ray`.", ("vllm",)),
    ("import_error", "ValueError: Ray Compiled Graph is not installed. Run `pip install ray[cgraph]` to install it.", ("vllm",)),
    ("import_error", "RuntimeError: cuda.bindings is not available. Install it with: pip install cuda-python", ("sglang",)),
    ("import_error", "ImportError: Please install fastsafetensors via `pip install fastsafetensors`", ("sglang", "vllm")),
    ("import_error", "ValueError: gptq_marlin quantization requires some operators from vllm. Pleaes install vllm by `pip install vllm==0.7.2`", ("sglang",)),
    # Model loading: both engines' get_quant_config, SGLang 0.5.23 weight_utils.py:801, the sharded-state loaders, vLLM's
    # default loader (0.33 default_loader.py:569) and Run:ai loader (:219), transformers' AutoConfig.
    ("model_load_error", "ValueError: Cannot find the config file for gptq", ("sglang", "vllm")),
    (
        "model_load_error",
        "RuntimeError: /models/m/model.safetensors.index.json references 3 shard file(s) missing from /models/m "
        "(incomplete download?): model-00002-of-00004.safetensors, model-00003-of-00004.safetensors",
        ("sglang",),
    ),
    ("model_load_error", "ValueError: Could not find checkpoint files 'model-rank-1-part-*.safetensors', only pre-sharded checkpoints are currently supported!", ("sglang", "vllm")),
    ("model_load_error", "ValueError: Following weights were not initialized from checkpoint: {'model.embed_tokens.weight', 'lm_head.weight'}", ("vllm",)),
    ("model_load_error", "RuntimeError: Cannot find any safetensors model weights with `s3://models/llama`", ("vllm",)),
    (
        "model_load_error",
        "ValueError: Unrecognized model in /models/m. Should have a `model_type` key in its config.json, or contain one of the following strings in its name: albert, align",
        ("sglang", "vllm"),
    ),
    # Architecture refusals by the SM a kernel needs: vLLM 0.33 triton_attn.py:520/:528, SGLang 0.5.23 mxfp4.py:655,
    # dsa_backend.py:374, hpc_ops_backend.py:140, 0.4.x model_runner.py's FA3 check, vLLM sparse_indexer.py:120;
    # FlashMLA's device check; flash-attn's own check.
    ("unsupported_gpu_arch", "ValueError: bfloat16 KV cache is not supported on Tesla V100 (compute capability 7.0); bfloat16 requires SM80+. Re-run with --kv-cache-dtype float16.", ("vllm",)),
    ("unsupported_gpu_arch", "ValueError: FP8 KV cache is not supported by the Triton attention backend on NVIDIA A100 (compute capability 8.0); native FP8 (fp8e4nv) requires SM89+.", ("vllm",)),
    ("unsupported_gpu_arch", "RuntimeError: MXFP4 Marlin requires SM90+.", ("sglang",)),
    ("unsupported_gpu_arch", "ValueError: triton_sparse_mla requires SM90 (Hopper) or newer; got sm_major=8.", ("sglang",)),
    ("unsupported_gpu_arch", "ValueError: The hpc_ops attention backend requires an SM90 (Hopper) GPU (the HPC-Ops kernels ship sm90a only), got sm86.", ("sglang",)),
    ("unsupported_gpu_arch", "AssertionError: FlashAttention v3 Backend requires SM>=90. Please use `--attention-backend flashinfer`.", ("sglang",)),
    ("unsupported_gpu_arch", "ValueError: SparseMQAIndexer requires an SM100-class GPU.", ("vllm",)),
    ("unsupported_gpu_arch", "AssertionError: FlashMLA is not supported on this device", ("vllm",)),
    ("unsupported_gpu_arch", "RuntimeError: FlashAttention only supports Turing GPUs or newer.", ("sglang", "vllm")),
    # Pool sizing: SGLang 0.5.23 pool_configurator.py:1025/:1679, unified_memory_pool.py:1563; vLLM 0.33 compilation.py:1525.
    (
        "kv_pool_too_small",
        "RuntimeError: SWA pool cap (65536 tokens, 6.00 GiB) leaves no room for the full KV pool within the available 5.20 GiB. "
        "Reduce --max-running-requests, lower SGLANG_SWA_EVICTION_INTERVAL, or raise --mem-fraction-static.",
        ("sglang",),
    ),
    (
        "kv_pool_too_small",
        "RuntimeError: [unified-memory-pool] mamba: byte budget 2147483648 cannot fit ONE worst-case request (bs=1 floor "
        "3221225472 = 3 GiB). A pool this size retract-livelocks at runtime. Raise --mem-fraction-static, lower the model context length.",
        ("sglang",),
    ),
    (
        "kv_pool_too_small",
        "ValueError: max_num_seqs (512) exceeds available Mamba cache blocks (200). Each decode sequence requires one Mamba "
        "cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most 200.",
        ("vllm",),
    ),
    # Requests over the context: vLLM 0.33 api_utils.py:249, 0.6.6 llm_engine.py:1960.
    ("context_length_exceeded", "ValueError: Input length (131073) exceeds model's maximum context length (131072).", ("vllm",)),
    (
        "context_length_exceeded",
        "ValueError: The prompt (total length 9000) is too long to fit into the model (context length 8192). Make sure that "
        "`max_model_len` is no smaller than the number of text tokens plus multimodal tokens.",
        ("vllm",),
    ),
    # SGLang's rank memory check raised (0.3.6 model_runner.py:225, 0.4.x :392, 0.5.23 distributed/bootstrap.py:450) and
    # vLLM 0.33 v1/worker/utils.py:732's externally held weights: memory another process holds.
    (
        "cuda_oom",
        "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=20.5, local_gpu_memory=78.2, local_gpu_memory * 0.9=70.38",
        ("sglang",),
    ),
    (
        "cuda_oom",
        "ValueError: Externally held weights on device cuda:1 (60.00/79.20 GiB) exceed the desired GPU memory utilization (0.9, 71.28 GiB). "
        "Increase GPU memory utilization or reduce GPU memory used by other processes.",
        ("vllm",),
    ),
    # SGLang 0.5.23 tokenizer / processor / config loading and loader.py:2644/:1678; vLLM 0.33 weight_utils.py:612.
    ("model_load_error", "RuntimeError: Retry with use_fast=False for /models/m also failed (initial load returned TokenizersBackend): bad merges", ("sglang",)),
    ("model_load_error", "RuntimeError: fastokens failed to load tokenizer for /models/m. This model's tokenizer may not be supported by fastokens.", ("sglang",)),
    ("model_load_error", "ValueError: Cannot determine processor class for /models/vl", ("sglang",)),
    ("model_load_error", "RuntimeError: Failed to load image_processor for /models/vl: missing preprocessor_config.json. This model requires an image processor.", ("sglang",)),
    (
        "model_load_error",
        "ValueError: Failed to load mistral 'params.json' config for model /models/m. Please check if the model is a mistral-format model and if the config file exists.",
        ("sglang",),
    ),
    ("model_load_error", "RuntimeError: No model weights found in: `/models/m`", ("sglang",)),
    ("model_load_error", "RuntimeError: Some weights are not initialized from checkpoints: {'model.vision_tower.proj.weight'}", ("sglang",)),
    # SGLang 0.3.x's request-slot refusal (schedule_batch.py:518), the older words of 0.4+'s alloc_req_slots one.
    ("kv_pool_too_small", "RuntimeError: Out of memory. Please set a smaller number for `--max-running-requests`.", ("sglang",)),
    ("model_load_error", "ValueError: Missing keys ('lm_head.weight',) in loaded state!", ("sglang",)),
    ("model_load_error", "FileNotFoundError: Weight files referenced in index but missing: {'model-00004-of-00004.safetensors'}", ("vllm",)),
    # vLLM 0.11+ platforms/cuda.py: every backend refusing the compute capability.
    (
        "unsupported_gpu_arch",
        "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=128, dtype=torch.float16, "
        "kv_cache_dtype=auto, block_size=None, use_mla=False). Reasons: {FLASH_ATTN: [compute capability not supported], "
        "FLASHINFER: [compute capability not supported], TRITON_ATTN: [block_size not supported, compute capability not supported]}.",
        ("vllm",),
    ),
    # The process group's rendezvous: c10d socket.cpp SocketConnectOp and TCPStore.cpp.
    ("nccl_error", "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (10.1.2.3, 29500).", ("sglang", "vllm")),
    ("nccl_error", "RuntimeError: The client socket has timed out after 1800s while trying to connect to (node-0, 5000).", ("sglang", "vllm")),
    (
        "nccl_error",
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (master-0, 23456). "
        "The client socket has failed to connect to 10.0.0.9:23456 (errno: 113 - No route to host).",
        ("sglang", "vllm"),
    ),
    ("nccl_error", "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 3/4 clients joined.", ("sglang", "vllm")),
]


@pytest.mark.parametrize(
    ("expected", "line", "engine"),
    [(expected, line, engine) for expected, line, engines in CASES for engine in engines],
    ids=[f"{engine}:{line[:60]}" for _, line, engines in CASES for engine in engines],
)
def test_a_start_failure_in_the_sources_words(expected: str, line: str, engine: str) -> None:
    diagnosis = diagnose_text(FRAMINGS[engine](line))
    assert diagnosis.failure_class == expected
    assert diagnosis.fix and "{" not in diagnosis.fix


def test_the_figures_the_fixes_name() -> None:
    ray = diagnose_text(vllm("ValueError: Failed to import Ray, please install Ray with `pip install ray`."))
    assert ray.figures.get("pip_package") == "ray" and "`pip install ray`" in (ray.fix or "")
    ops = diagnose_text(vllm("NameError: name 'vllm_cache_ops' is not defined"))
    assert "vllm._C" in (ops.fix or "") and ops.figures.get("vllm_ops_name") == "vllm_cache_ops"
    sm = diagnose_text(sglang("RuntimeError: MXFP4 Marlin requires SM90+."))
    assert sm.figures.get("required_sm") == "90" and "SM90" in (sm.fix or "")
    mamba = diagnose_text(vllm("ValueError: max_num_seqs (512) exceeds available Mamba cache blocks (200). Each decode sequence requires one Mamba cache block"))
    assert "holds 200 sequences" in (mamba.fix or "")
    port = diagnose_text(sglang("OSError: Could not bind port 31000 on any configured address family"))
    assert port.figures.get("port") == "31000"
    store = diagnose_text(vllm("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (10.1.2.3, 29500)."))
    assert "rendezvous" in (store.fix or "") and "(10.1.2.3, 29500)" in (store.fix or "")
    context = diagnose_text(vllm("ValueError: Input length (131073) exceeds model's maximum context length (131072)."))
    assert context.figures.get("input_tokens") == "131073" and context.figures.get("context_len") == "131072"


# -- what the new triggers must not read -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        # A requirement named on an info line, a fallback: not a refusal (the SM and pip rules read exception lines only).
        "[2026-05-24 10:00:03 TP0] FA3 requires SM90; falling back to the flashinfer backend.",
        "INFO 05-24 10:00:03 [cuda.py:300] Using FlashInfer since FlashAttention 3 requires SM90.",
        "[2026-05-24 10:00:03 TP0] For faster downloads install hf_transfer: pip install hf_transfer",
        # SGLang's own retry of a busy port (network.py:33, logger.info): it goes on with the next port.
        "[2026-05-24 10:00:03] Port 30000 is already in use, trying port 30001",
    ],
)
def test_advice_and_retries_on_info_lines_are_no_failure(line: str) -> None:
    ready = ["[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m')", line, "[2026-05-24 10:01:00] The server is fired up and ready to roll!"]
    assert diagnose_text(ready).failure_class is None


def test_an_attention_backend_refused_for_a_setting_is_not_the_gpu() -> None:
    # One backend refusing something other than the compute capability: a setting fits no backend, not the GPU.
    line = (
        "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=80). Reasons: "
        "{FLASH_ATTN: [head_size not supported], TRITON_ATTN: [compute capability not supported]}."
    )
    assert diagnose_text(vllm(line)).failure_class != "unsupported_gpu_arch"


def test_the_unbalanced_memory_warning_stays_a_finding() -> None:
    warned = [
        "[2026-05-23 20:00:03 TP3] The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=61.02, local_gpu_memory=93.80, local_gpu_memory * 0.9=84.42",
        "[2026-05-23 20:00:47] The server is fired up and ready to roll!",
    ]
    diagnosis = diagnose_text(warned)
    assert diagnosis.failure_class is None and any(finding.name == "memory_unbalanced" for finding in diagnosis.findings)


# -- SGLang's batch allocation refused while serving: not a pool too small -------------------------------------------
@pytest.mark.parametrize("phase", ["Decode", "Prefill", ""])
def test_an_allocation_refused_after_the_schedulers_check_is_no_pool_too_small(phase: str) -> None:
    # mem_cache/allocation.py (0.5.23 :163/:239/:613; 0.3.6-0.4.x schedule_batch.py): logged, then raised, while a
    # batch is prepared; the scheduler's check_decode_mem / retract_decode handle a full pool before it.
    head = f"{phase} out of memory" if phase else "Out of memory"
    lines = [
        "[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m', page_size=64)",
        "[2026-05-24 10:01:00] The server is fired up and ready to roll!",
        '[2026-05-24 10:02:00] INFO:     127.0.0.1:50000 - "POST /generate HTTP/1.1" 200 OK',
        f"[2026-05-24 10:03:00 TP0] {head}. Try to lower your batch size.",
        "Try to allocate 168 tokens.",
        "Available tokens: 2048",
        "[2026-05-24 10:03:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        f"RuntimeError: {head}. Try to lower your batch size.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown"
    assert "allocator" in (diagnosis.fix or "")
    # The request pool's own refusal (its fix names --max-running-requests) stays kv_pool_too_small.
    slots = "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`. req_to_token_pool.available_size()=0, num_reqs=3,"
    assert diagnose_text(sglang(slots)).failure_class == "kv_pool_too_small"


# -- the real logs that carry these texts, read as their labels -------------------------------------------------------
@pytest.mark.parametrize(
    ("folder", "file"),
    [
        ("batch4-heldout", "vllm-gptq-marlin-repack-driver-oom.log"),
        ("batch4-heldout", "sglang-fa3-capture-generator-seed.log"),
        ("batch7-heldout", "vllm-cpu-build-vllm-c-missing-nameerror.log"),
        ("batch7-heldout", "sglang-page-size-decode-oom-runtimeerror.log"),
        ("batch15-heldout", "sglang-jax-decode-oom-with-free-tokens-scheduler-exception.log"),
        ("batch3-heldout", "sglang-alloc-req-slots-oom.log"),
    ],
)
def test_round_seventeens_real_logs(folder: str, file: str) -> None:
    entry = _entry(folder, file)
    assert str(entry["source"]).startswith("https://")
    diagnosis = diagnose_file(LOGS / folder / file)
    assert (diagnosis.failure_class or "healthy") == entry["label"]


# -- round eighteen: Gloo's report of an incomplete mesh (batch24's Ascend prefill node) ------------------------------
# gloo/transport/tcp/context.cc printConnectivityInfo (afc1517, 2024-01: std::cout; d97133a, 2025-09: GLOO_INFO, printed
# "[<file>:<line>] INFO ..." by gloo/common/logging.h GLOO_LOG_MSG): each rank's count, then the peers it is not connected to.
_GLOO_COUT = ("[Gloo] Rank {rank} is connected to {n} peer ranks. Expected number of connected peer ranks is : {size}", "[Gloo] Rank {rank} is NOT connected to: [{peers}]")
_GLOO_INFO = (
    "[/pytorch/third_party/gloo/gloo/transport/tcp/context.cc:246] INFO Rank {rank} is connected to {n}. Expected number of connected peers is: {size}",
    "[/pytorch/third_party/gloo/gloo/transport/tcp/context.cc:254] INFO Rank {rank} is NOT connected to: [{peers}]",
)
_DIST_HEAD = {
    "sglang": ["[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=8, nnodes=2)", "[2026-05-24 10:00:05 TP3] Init torch distributed begin."],
    "vllm": [
        "INFO 05-24 10:00:00 [api_server.py:1000] vLLM API server version 0.11.0",
        "(EngineCore_DP0 pid=7) INFO 05-24 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/m'",
    ],
}


def _gloo_mesh(formats: tuple[str, str], size: int, missing: int, lazy: bool = False) -> list[str]:
    count, not_connected = formats
    lines = []
    for rank in range(size):
        if rank == missing:
            continue  # the missing peer never reports this group
        if lazy:
            peers = ", ".join(str(peer) for peer in range(size) if peer != rank)
            lines += [count.format(rank=rank, n=0, size=size - 1), not_connected.format(rank=rank, peers=peers)]
        elif rank == 5:
            lines += [count.format(rank=rank, n=size - 2, size=size - 1), not_connected.format(rank=rank, peers=missing)]
        else:
            lines.append(count.format(rank=rank, n=size - 1, size=size - 1))
    return lines


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("formats", [_GLOO_COUT, _GLOO_INFO], ids=["cout", "gloo_info"])
def test_a_gloo_mesh_left_incomplete_is_a_stalled_start(engine: str, formats: tuple[str, str]) -> None:
    lines = [*_DIST_HEAD[engine], *_gloo_mesh(formats, 12, missing=2)]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "server_start_timeout"
    stalled = next(line for line in lines if "NOT connected" in line)
    assert diagnosis.evidence[0].line == lines.index(stalled) + 1
    assert "NOT connected" in diagnosis.evidence[0].text and "{" not in (diagnosis.fix or "")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_gloo_report_the_start_went_on_after_or_lazy_init_is_no_stall(engine: str) -> None:
    went_on = [
        *_DIST_HEAD[engine],
        *_gloo_mesh(_GLOO_COUT, 4, missing=2),
        "[2026-05-24 10:00:09 TP3] Load weight begin. avail mem=70.00 GB",
        "[2026-05-24 10:01:00] The server is fired up and ready to roll!",
    ]
    assert diagnose_text(went_on).failure_class is None
    # TORCH_GLOO_LAZY_INIT: every rank is connected to 0 peers and names them all; the pairs connect on first use.
    lazy = diagnose_text([*_DIST_HEAD[engine], *_gloo_mesh(_GLOO_COUT, 4, missing=-1, lazy=True)])
    assert lazy.failure_class != "server_start_timeout"


def test_batch24s_ascend_prefill_node_left_waiting_on_a_gloo_peer() -> None:
    file = "sglang-ascend-dsr1-w8a8-2p1d-prefill-node-gloo-rank-not-connected-start-never-ready.log"
    diagnosis = _read_as_labelled("batch24-heldout", file, "server_start_timeout")
    assert "NOT connected" in diagnosis.evidence[0].text


# -- round eighteen: the releases round seventeen's sweep skipped (SGLang 0.2.7, 0.2.15, 0.3.0, 0.5.2, 0.5.9; vLLM 0.4.3,
# 0.5.5, 0.7.3, 0.9.2, 0.11.0) -------------------------------------------------------------------------------------------
# Their own framings as well: SGLang 0.2.x's controller process (a multiprocessing traceback, then the launcher's
# "Initialization failed. controller_init_state: ..."), vLLM V0's API server (the traceback in the server's own process).
def sglang_02(line: str) -> list[str]:
    return [
        "server_args=ServerArgs(model_path='/models/m', tokenizer_path='/models/m', tp_size=1)",
        "[gpu=0] Init nccl begin.",
        "Process Process-1:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap',
        '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/controller_single.py", line 150, in start_controller_process',
        line,
        "",
        "Initialization failed. controller_init_state: Traceback (most recent call last):",
    ]


def vllm_v0(line: str) -> list[str]:
    return [
        "INFO 05-24 10:00:00 api_server.py:177] vLLM API server version 0.5.5",
        "INFO 05-24 10:00:01 llm_engine.py:184] Initializing an LLM engine (v0.5.5) with config: model='/models/m'",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py", line 476, in <module>',
        "    asyncio.run(run_server(args))",
        line,
    ]


FRAMINGS_18 = {**FRAMINGS, "sglang_02": sglang_02, "vllm_v0": vllm_v0}
_BOTH = ("sglang", "vllm", "sglang_02", "vllm_v0")

CASES_18 = [
    # SGLang 0.5.9 layers/quantization/fp8_utils.py:666 and :222, server_args.py:1879; multimodal_gen/configs/quantization.py:81, :97.
    ("unsupported_gpu_arch", "RuntimeError: MXFP8 dense linear requires Blackwell GPUs (SM100+).", ("sglang",)),
    (
        "unsupported_gpu_arch",
        "RuntimeError: CUTLASS block FP8 requested via --fp8-gemm-backend=cutlass, but hardware does not support it. CUTLASS block FP8 requires Hopper (SM90+) GPUs with CUDA 12.0+.",
        ("sglang",),
    ),
    ("unsupported_gpu_arch", "ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a different backend.", ("sglang",)),
    ("unsupported_gpu_arch", "ValueError: Nunchaku SVDQuant is only supported on NVIDIA CUDA GPUs (Ampere SM8x or SM12x).", ("sglang",)),
    (
        "unsupported_gpu_arch",
        "ValueError: Nunchaku SVDQuant is currently only supported on Ampere (SM8x) or SM12x GPUs; Hopper (SM90) is not supported. "
        "Unsupported devices: NVIDIA H100 80GB HBM3. Disable it with --enable-svdquant false.",
        ("sglang",),
    ),
    # vLLM 0.4.x lora/punica.py:10, raised as an ImportError at import.
    ("unsupported_gpu_arch", "ImportError: punica LoRA kernels require compute capability >= 8.0", ("vllm_v0", "vllm")),
    # vLLM 0.11 model_executor/layers/linear.py:217, raised from torch.cuda.OutOfMemoryError.
    ("cuda_oom", "RuntimeError: Failed to create unquantized linear weights. This may be caused by insufficient memory to allocate the weight.", ("vllm",)),
    # transformers models/clip/modeling_clip.py CLIPTextEmbeddings; SGLang 0.5.9 multimodal_gen/runtime/models/encoders/clip.py:126.
    ("context_length_exceeded", "ValueError: Sequence length must be less than max_position_embeddings (got `sequence length`: 112 and max_position_embeddings: 77", _BOTH),
    # vLLM 0.4.x model_executor/models/__init__.py:97.
    ("model_load_error", "ValueError: Model architecture MixtralForCausalLM is not supported by ROCm for now.", ("vllm_v0",)),
    # SGLang 0.5.9 multimodal_gen/runtime/utils/hf_diffusers_utils.py, cli/utils.py:90, component_loaders/transformer_loader.py:64.
    ("model_load_error", "ValueError: Model black-forest-labs/FLUX.1-dev not found in local cache and download=False.", ("sglang",)),
    ("model_load_error", "ValueError: Model or revision not found at Wan-AI/Wan2.2-T2V-A14B. Please check the model ID or ensure you have access to the repository. Error: 404", ("sglang",)),
    ("model_load_error", "ValueError: Could not find model at /models/wan22 and failed to download from HF Hub: Connection refused", ("sglang",)),
    ("model_load_error", "ValueError: Could not find model locally at /models/qwen-image and failed to download model_index.json/config.json from /models/qwen-image: 404", ("sglang",)),
    ("model_load_error", "ValueError: Failed to find config.json for Qwen/Qwen-Image after failing to find model_index.jsonYou might be looking for models ending with '-Diffusers'", ("sglang",)),
    ("model_load_error", "ValueError: CI validation failed for local model at /models/wan22. Some safetensors shards are missing. Please manually delete the model directory and retry.", ("sglang",)),
    ("model_load_error", "FileNotFoundError: No safetensors files found in /models/wan22/transformer", ("sglang",)),
    # SGLang 0.5.9 multimodal_gen/configs/quantization.py:110, pipelines/diffusers_pipeline.py:546, configs/model_config.py:1019,
    # layers/attention/mamba/ops/ssu_dispatch.py:195; vLLM 0.11 plugins/io_processors/__init__.py:61.
    (
        "import_error",
        "ValueError: Nunchaku is enabled, but not installed. Please refer to https://nunchaku.tech/docs/nunchaku/installation/installation.html for detailed installation methods.",
        ("sglang",),
    ),
    ("import_error", "RuntimeError: cache-dit>=1.2.0 is required for --cache-dit-config. Please upgrade cache-dit.", ("sglang",)),
    ("import_error", "ValueError: Transformers version 4.57.1 is not supported for model Qwen/Qwen3.5-35B-A3B or model type qwen3_5_moe. Please upgrade transformers to >= 5.0.0.", ("sglang",)),
    ("import_error", "ValueError: Mamba backend 'flashinfer' requested but its dependencies are not available. Install the required package or use a different --mamba-backend value.", ("sglang",)),
    ("import_error", "ValueError: The model requires the 'prithvi_to_tiff' IO Processor plugin but it is not installed. Available plugins: []", ("vllm",)),
]


@pytest.mark.parametrize(
    ("expected", "line", "engine"),
    [(expected, line, engine) for expected, line, engines in CASES_18 for engine in engines],
    ids=[f"{engine}:{line[:60]}" for _, line, engines in CASES_18 for engine in engines],
)
def test_round_eighteens_sources(expected: str, line: str, engine: str) -> None:
    diagnosis = diagnose_text(FRAMINGS_18[engine](line))
    assert diagnosis.failure_class == expected
    assert diagnosis.fix and "{" not in diagnosis.fix


def test_round_eighteens_figures_and_what_they_leave() -> None:
    arch = diagnose_text(sglang("RuntimeError: MXFP8 dense linear requires Blackwell GPUs (SM100+)."))
    assert arch.figures.get("required_sm") == "100" and "SM100" in (arch.fix or "")
    clip = diagnose_text(vllm("ValueError: Sequence length must be less than max_position_embeddings (got `sequence length`: 112 and max_position_embeddings: 77"))
    assert clip.figures.get("input_tokens") == "112" and clip.figures.get("context_len") == "77"
    # Either the GPU or a package may be what is missing: not read as the GPU.
    both = "RuntimeError: FlashInfer FP8 GEMM requires Blackwell GPUs and FlashInfer to be installed"
    assert diagnose_text(sglang(both)).failure_class != "unsupported_gpu_arch"
    swap = "RuntimeError: FlashInfer DeepGEMM with swapAB requested, but it's not available. This backend requires Hopper (SM90) GPUs and FlashInfer to be installed."
    assert diagnose_text(sglang(swap)).failure_class != "unsupported_gpu_arch"
    # punica's other ImportError is the package's.
    assert diagnose_text(vllm_v0("ImportError: punica LoRA kernels could not be imported.")).failure_class == "import_error"


@pytest.mark.parametrize(
    "line",
    [
        "[2026-05-24 10:00:03 TP0] MXFP8 requires Blackwell (SM100+); falling back to the triton backend.",
        "[2026-05-24 10:00:03] Nunchaku is enabled, but not installed; serving without SVDQuant.",
        "[2026-05-24 10:00:03] For Qwen3.5 please upgrade transformers to >= 5.0.0",
    ],
)
def test_round_eighteens_words_on_info_lines_are_no_failure(line: str) -> None:
    ready = ["[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m')", line, "[2026-05-24 10:01:00] The server is fired up and ready to roll!"]
    assert diagnose_text(ready).failure_class is None


@pytest.mark.parametrize("phase", ["Decode", "Prefill"])
def test_sglang_02s_allocation_refused_while_serving_is_no_pool_too_small(phase: str) -> None:
    # SGLang 0.2.7 managers/schedule_batch.py:386 / :620: logger.error, then exit(), for a batch the scheduler admitted.
    lines = [
        "server_args=ServerArgs(model_path='/models/m', tokenizer_path='/models/m')",
        "[gpu=0] max_total_num_tokens=20000, max_prefill_tokens=16384, max_running_requests=2047, context_len=8192",
        "The server is fired up and ready to roll!",
        'INFO:     127.0.0.1:50000 - "POST /generate HTTP/1.1" 200 OK',
        f"{phase} out of memory. This should never happen.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and "allocator" in (diagnosis.fix or "")


# -- round eighteen: FlashInfer's own refusals (flashinfer-python 0.7.4, what `pip download flashinfer-python` offers), as
# the engines load it: utils.py, triton/utils.py, compilation_context.py, jit/env.py, jit/core.py, jit/cubin_loader.py.
CASES_FLASHINFER = [
    ("unsupported_gpu_arch", "flashinfer.utils.BackendSupportedError: mm_fp4 does not support compute capability 89 (supported: 100, 103, 110, 120, 121)"),
    ("unsupported_gpu_arch", "ValueError: trtllm_gen_attention is only supported on SM107 (Rubin); the current device is sm100. trtllm-gen exports those cubin variants for SM107 only."),
    ("unsupported_gpu_arch", "flashinfer.triton.utils.GPUArchitectureError: Device major should be in [9, 10], but got 8"),
    ("unsupported_gpu_arch", "RuntimeError: MiniMax-H3 MLP requires exact compute capability 10.0 (B200/GB200) or 10.3 (B300/GB300), got 9.0"),
    ("unsupported_gpu_arch", "RuntimeError: SM 120 requires CUDA >= 12.8"),
    ("unsupported_gpu_arch", "RuntimeError: SM 12.1+ requires CUDA >= 12.9"),
    ("unsupported_gpu_arch", "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."),
    ("import_error", "RuntimeError: flashinfer-cubin version (0.7.3) does not match flashinfer version (0.7.4). Please install the same version of flashinfer-cubin and flashinfer-python."),
    ("import_error", "RuntimeError: flashinfer-jit-cache version (0.7.3+cu129) does not match flashinfer version (0.7.4). Please install matching versions."),
    (
        "import_error",
        "flashinfer.jit.core.MissingJITCacheError: JIT compilation is disabled via FLASHINFER_DISABLE_JIT environment variable, but the required module is not found in the JIT cache.",
    ),
    (
        "import_error",
        "RuntimeError: Artifact not found locally: fmha/trtllm-gen/fmhaSm100a.cubin (looked at /root/.cache/flashinfer/cubins). FLASHINFER_NO_DOWNLOAD is set — refusing to download. This means flashinfer-cubin is missing this file.",
    ),
]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize(("expected", "line"), CASES_FLASHINFER, ids=[line[:60] for _, line in CASES_FLASHINFER])
def test_flashinfers_refusals(expected: str, line: str, engine: str) -> None:
    diagnosis = diagnose_text(FRAMINGS[engine](line))
    assert diagnosis.failure_class == expected
    assert diagnosis.fix and "{" not in diagnosis.fix


def test_flashinfers_jit_build_wrappers_leave_the_cause_to_the_compiler() -> None:
    # FlashInfer's run_ninja / torch's cpp_extension wrap the build; the compiler's own line is the cause when it is one.
    wrapped = [
        *_SGLANG_HEAD[:3],
        "nvcc fatal   : Unsupported gpu architecture 'compute_120a'",
        "ninja: build stopped: subcommand failed.",
        "RuntimeError: Ninja build failed. Ninja output:",
        *_SGLANG_TAIL,
    ]
    assert diagnose_text(wrapped).failure_class == "unsupported_gpu_arch"
    alone = diagnose_text(sglang("RuntimeError: Error building extension 'batch_prefill_with_kv_cache_dtype_q_bf16'"))
    assert alone.failure_class == "unknown"


# --- round nineteen: an exception line over a frame name --------------------------------------------------------------
# Frames the frame rules read, as the engines' real tracebacks print them: SGLang's and vLLM's load_weights (and the
# weight iterator that empties the cache), the capture loops' frames, pynccl's ncclCommInitRank, vLLM's bfloat16 check
# and its registry's refusal; exception lines that name their own kind, from their sources' format strings: PyTorch's
# TORCH_INTERNAL_ASSERT (c10/util/Exception.h: '{cond} INTERNAL ASSERT FAILED at "{file}":{line}, please report a bug to
# PyTorch. {msg}'), its CUDA check (c10/cuda/CUDAException: "CUDA error: {cudaGetErrorString}"), the ROCm library's.
_FRAMES = {
    "load_weights": (
        "model_load_error",
        ("sglang", "vllm"),
        {
            "sglang": [
                '  File "/sgl-workspace/sglang/python/sglang/srt/models/llama.py", line 481, in load_weights',
                "    for name, loaded_weight in weights:",
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/weight_utils.py", line 432, in pt_weights_iterator',
                "    torch.cuda.empty_cache()",
                '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/memory.py", line 192, in empty_cache',
                "    torch._C._cuda_emptyCache()",
            ],
            "vllm": [
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/llama.py", line 594, in load_weights',
                "    return loader.load_weights(weights)",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/linear.py", line 1305, in weight_loader',
                "    param_data.copy_(loaded_weight)",
            ],
        },
    ),
    "capture": (
        "cuda_graph_error",
        ("sglang", "vllm"),
        {
            "sglang": [
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 310, in capture',
                "    ) = self.capture_one_batch_size(bs, forward)",
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 402, in capture_one_batch_size',
                "    with torch.cuda.graph(graph, pool=self.graph_memory_pool, stream=stream):",
            ],
            "vllm": [
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3412, in capture_model',
                "    self._capture_cudagraphs(",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3480, in _capture_cudagraphs',
                "    self._dummy_run(",
            ],
        },
    ),
    "ncclCommInitRank": (
        "nccl_error",
        ("sglang", "vllm"),
        {
            "sglang": [
                '  File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/pynccl.py", line 129, in __init__',
                "    self.comm: ncclComm_t = self.nccl.ncclCommInitRank(",
                '  File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/pynccl_wrapper.py", line 340, in ncclCommInitRank',
                "    self.NCCL_CHECK(",
            ],
            "vllm": [
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/pynccl.py", line 180, in __init__',
                "    self.comm: ncclComm_t = self.nccl.ncclCommInitRank(",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/pynccl_wrapper.py", line 458, in ncclCommInitRank',
                "    self.NCCL_CHECK(",
            ],
        },
    ),
    "bfloat16_check": (
        "unsupported_gpu_arch",
        ("vllm",),
        {
            "vllm": [
                '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 100, in init_device',
                "    _check_if_gpu_supports_dtype(self.model_config.dtype)",
                '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 360, in _check_if_gpu_supports_dtype',
                "    torch.cuda.get_device_capability()",
            ],
        },
    ),
    "registry": (
        "model_load_error",
        ("vllm",),
        {
            "vllm": [
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/registry.py", line 1418, in resolve_model_cls',
                "    return self._raise_for_unsupported(architectures)",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/registry.py", line 1221, in _raise_for_unsupported',
                "    torch.cuda.synchronize()",
            ],
        },
    ),
}
_SELF_NAMED_LINES = [
    'RuntimeError: captures_underway.empty() INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":2967, please report a bug to PyTorch. ',
    'RuntimeError: it1 != graph_pools.end() INTERNAL ASSERT FAILED at "/pytorch/c10/cuda/CUDACachingAllocator.cpp":1382, please report a bug to PyTorch. ',
    "RuntimeError: CUDA error: unspecified launch failure",
    "RuntimeError: CUDA error: invalid argument",
]
_BARE_LINES = ["KeyError: 'model.layers.0.mlp.gate_up_proj.weight_scale'", "AssertionError"]


def _traceback(engine: str, frames: list[str], exception: str) -> list[str]:
    if engine == "sglang":
        return [*_SGLANG_HEAD, *frames, exception, *_SGLANG_TAIL]
    return [*_VLLM_HEAD, *(_VLLM_PREFIX + line for line in (*frames, exception)), *_VLLM_TAIL]


_FRAME_CASES = [(rule, engine) for rule, (_, engines, _) in _FRAMES.items() for engine in engines]


@pytest.mark.parametrize("exception", _SELF_NAMED_LINES, ids=[line[:40] for line in _SELF_NAMED_LINES])
@pytest.mark.parametrize(("rule", "engine"), _FRAME_CASES)
def test_an_exception_line_that_names_its_kind_wins_over_a_frame(rule: str, engine: str, exception: str) -> None:
    # The frame says where the error was raised; the exception line says what it is: no class names these, unknown.
    frames = _FRAMES[rule][2][engine]
    diagnosis = diagnose_text(_traceback(engine, frames, exception))
    assert diagnosis.failure_class == "unknown"
    assert any(exception.strip() in item.text for item in diagnosis.evidence)
    assert diagnosis.fix and "{" not in diagnosis.fix


@pytest.mark.parametrize("exception", _BARE_LINES)
@pytest.mark.parametrize(("rule", "engine"), _FRAME_CASES)
def test_a_bare_exception_leaves_the_frame_its_reading(rule: str, engine: str, exception: str) -> None:
    # A bare KeyError or AssertionError names no kind: the frame rule still says what failed (where it was raised).
    expected, _, by_engine = _FRAMES[rule]
    assert diagnose_text(_traceback(engine, by_engine[engine], exception)).failure_class == expected


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_named_exception_of_another_traceback_leaves_the_frame_its_reading(engine: str) -> None:
    # The withdrawal is the traceback's own: a load_weights KeyError, then a later traceback's CUDA error.
    frames = _FRAMES["load_weights"][2][engine]
    first = _traceback(engine, frames, _BARE_LINES[0])
    later = ["Traceback (most recent call last):", '  File "/usr/lib/python3.12/threading.py", line 1010, in run', _SELF_NAMED_LINES[2]]
    prefix = "[2026-05-24 10:00:05 TP1] " if engine == "sglang" else "(EngineCore_DP0 pid=7) ERROR 05-24 10:00:05 [core.py:708] "
    lines = [*first[: -len(_SGLANG_TAIL if engine == "sglang" else _VLLM_TAIL)], *(prefix + line for line in later)]
    assert diagnose_text(lines).failure_class == "model_load_error"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_fatal_exception_line_under_a_frame_keeps_its_own_class(engine: str) -> None:
    # Already so by rank (every frame rule is ranked after every cause); kept as the principle's other half.
    frames = _FRAMES["load_weights"][2][engine]
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.00 GiB is free."
    assert diagnose_text(_traceback(engine, frames, oom)).failure_class == "cuda_oom"


def test_pytorchs_internal_assertion_names_its_condition_and_source() -> None:
    diagnosis = diagnose_text(sglang(_SELF_NAMED_LINES[0]))
    assert diagnosis.failure_class == "unknown"
    assert diagnosis.figures.get("assert_condition") == "captures_underway.empty()"
    assert diagnosis.figures.get("assert_source") == "../c10/cuda/CUDACachingAllocator.cpp"
    assert "captures_underway.empty() at ../c10/cuda/CUDACachingAllocator.cpp" in (diagnosis.fix or "")


def test_batch25s_allocator_assertion_under_load_weights() -> None:
    # The real log (verl's SGLang 0.4.4 engine): torch.cuda.empty_cache() in pt_weights_iterator under load_weights
    # meets the allocator's captures_underway assertion; the checkpoint is not the cause.
    file = "sglang-044-verl-engine-tp4-load-weights-empty-cache-captures-underway-internal-assert.log"
    diagnosis = _read_as_labelled("batch25-heldout", file, "unknown")
    assert any("INTERNAL ASSERT FAILED" in item.text for item in diagnosis.evidence)
    assert not any(", in load_weights" in item.text for item in diagnosis.evidence)


# Round eighteen's "left" row taken: SGLang's diffusion runtime's ZMQ bind (0.5.9 multimodal_gen/runtime/utils/common.py:219)
# tries the next port only on EADDRINUSE and logs this after the last attempt, then re-raises.
@pytest.mark.parametrize("endpoint", ["tcp://127.0.0.1:5555", "tcp://[::1]:30011", "tcp://10.0.0.4:30011"])
def test_sglang_diffusions_zmq_bind_retries_exhausted_is_a_port_in_use(endpoint: str) -> None:
    port = endpoint.rsplit(":", 1)[1]
    lines = [
        "[05-24 10:00:00] server_args: ServerArgs(model_path='Wan-AI/Wan2.2-T2V-A14B-Diffusers', num_gpus=1)",
        f"[05-24 10:00:03] ERROR Failed to bind ZMQ socket after 10 attempts. Original endpoint: {endpoint}, Last tried port: {int(port) + 378}",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/multimodal_gen/runtime/utils/common.py", line 200, in get_zmq_socket',
        "    socket.bind(current_endpoint)",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "port_in_use"
    assert diagnosis.figures.get("port") == port and f"Port {port} " in (diagnosis.fix or "")


def test_another_programs_zmq_bind_words_are_not_sglangs() -> None:
    # A generic "Failed to bind ZMQ socket after {n} attempts" (no endpoint named) says nothing of why the binds failed.
    assert diagnose_text(sglang("[Weight receiver] Failed to bind ZMQ socket after 5 attempts")).failure_class != "port_in_use"


def test_a_requests_internal_assertion_answered_with_its_error_is_no_failure() -> None:
    # As any exception no class names: a request's handler raised it and uvicorn answered 500; the server lives on.
    answered = 'INFO:     127.0.0.1:51720 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error'
    request = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py", line 300, in create_chat_completion',
        "    prompt_embeds = torch.load(buffer)",
        'RuntimeError: data.has_storage() INTERNAL ASSERT FAILED at "/pytorch/aten/src/ATen/Tensor.cpp":120, please report a bug to PyTorch. ',
    ]
    assert diagnose_text([*request, answered]).failure_class is None
    assert diagnose_text(request).failure_class == "unknown"


# Round twenty: batch26's four miss kinds, each from the source that prints the text.
# (1) vLLM's front end waiting for its engine core's first message on the input socket (v1/engine/core_client.py
# MPClient.__init__: 0.10.1.1-0.12.0 join "Timed out waiting for engines to send" "initial message on input socket." with
# no space; 0.14.0 has the space; the scale-up path's "new engines").
_ENGINE_WAIT_MESSAGES = [
    "Timed out waiting for engines to sendinitial message on input socket.",
    "Timed out waiting for engines to send initial message on input socket.",
    "Timed out waiting for new engines to send initial message on input socket.",
]
_API = "(APIServer pid=1) "


def _api_server_timeout(message: str) -> list[str]:
    return [
        _API + "INFO 10-27 20:38:40 [api_server.py:1839] vLLM API server version 0.11.0",
        _API + "INFO 10-27 20:38:45 [model.py:1510] Using max model len 128000",
        _API + "Traceback (most recent call last):",
        _API + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 496, in __init__',
        _API + "    raise TimeoutError(",
        _API + "TimeoutError: " + message,
    ]


@pytest.mark.parametrize("message", _ENGINE_WAIT_MESSAGES)
def test_vllms_engine_handshake_timeout_is_a_start_timeout(message: str) -> None:
    for lines in (_api_server_timeout(message), ["TimeoutError: " + message]):
        diagnosis = diagnose_text(lines)
        assert diagnosis.failure_class == "server_start_timeout"
        assert any(message in item.text for item in diagnosis.evidence)
        assert "initial message on input socket" in (diagnosis.fix or "")


@pytest.mark.parametrize("message", _ENGINE_WAIT_MESSAGES)
def test_an_engine_cores_failure_before_the_handshake_timeout_wins(message: str) -> None:
    # Cause over consequence: the engine core that died (a named failure, or an error no class names) is why it never sent.
    core = "(EngineCore_DP0 pid=7) ERROR 10-27 20:39:02 [core.py:708] "
    oom = [core + "EngineCore failed to start.", core + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free."]
    unexplained = [core + "EngineCore failed to start.", core + "RuntimeError: shape '[4, 8]' is invalid for input of size 12"]
    head, tail = _api_server_timeout(message)[:2], _api_server_timeout(message)[2:]
    assert diagnose_text([*head, *oom, *tail]).failure_class == "cuda_oom"
    diagnosis = diagnose_text([*head, *unexplained, *tail])
    assert diagnosis.failure_class == "unknown"
    assert any("EngineCore failed to start" in item.text or "is invalid for input" in item.text for item in diagnosis.evidence)


def test_batch26s_engine_handshake_timeout() -> None:
    file = "vllm-v1-qwen25vl-awq-128k-timed-out-waiting-for-engines-initial-message.log"
    _read_as_labelled("batch26-heldout", file, "server_start_timeout")


# (2) vLLM V1's memory profile, "Available KV cache memory: %.2f GiB" (gpu_worker.py; "%s GiB" in 0.14), then
# check_enough_kv_cache_memory's `available_memory <= 0` raise: at or below zero, read only where the start then fails.
_KV_INFO = "(EngineCore_DP0 pid=7) INFO 09-06 03:10:08 [gpu_worker.py:276] "
_KV_FAILED = "(EngineCore_DP0 pid=7) ERROR 09-06 03:10:08 [core.py:700] EngineCore failed to start."


@pytest.mark.parametrize("figure", ["-0.53", "-12.40", "-0.00", "0.00", "-3.1"])
def test_vllms_negative_kv_cache_memory_then_a_failed_start_is_the_pool_too_small(figure: str) -> None:
    lines = [f"{_KV_INFO}Available KV cache memory: {figure} GiB", _KV_FAILED]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "kv_pool_too_small"
    assert diagnosis.figures.get("kv_cache_memory_gib") == figure
    assert f"left {figure} GiB" in (diagnosis.fix or "")
    # The whole traceback after it (the ValueError the excerpt above left out) reads the same.
    full = [
        *lines,
        "(EngineCore_DP0 pid=7) ERROR 09-06 03:10:08 [core.py:700] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    ]
    assert diagnose_text(full).failure_class == "kv_pool_too_small"


def test_a_positive_or_unfinished_kv_cache_memory_figure_is_no_failure_of_its_own() -> None:
    # A positive figure is progress: the start's later failure is read from its own line.
    assert diagnose_text([f"{_KV_INFO}Available KV cache memory: 41.27 GiB", _KV_FAILED]).failure_class == "unknown"
    # A negative figure with no failure after it (an excerpt cut there) is not read.
    assert diagnose_text([f"{_KV_INFO}Available KV cache memory: -0.53 GiB"]).failure_class != "kv_pool_too_small"


def test_batch26s_negative_kv_cache_memory() -> None:
    file = "vllm-v1-a100-available-kv-cache-memory-negative-enginecore-failed-to-start.log"
    diagnosis = _read_as_labelled("batch26-heldout", file, "kv_pool_too_small")
    assert diagnosis.figures.get("kv_cache_memory_gib") == "-0.53"


# (3) c10d's collective check (ProcessGroupWrapper.cpp CollectiveFingerPrint::verify, TORCH_DISTRIBUTED_DEBUG=DETAIL):
# "Detected mismatch between collectives on ranks. Rank {r} is running collective: {fp}, but Rank {s} is running
# collective: {fp'}." -- the ranks' collective failure, over the capture wrapper that relays it.
_MISMATCHES = [
    "Detected mismatch between collectives on ranks.",
    "Detected mismatch between collectives on ranks. Rank 3 is running collective: CollectiveFingerPrint(SequenceNumber=18, OpType=ALLREDUCE, TensorShape=[8192], TensorDtypes=BFloat16, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda)), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=22, OpType=ALLREDUCE).",
    "Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=7, OpType=BROADCAST), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=7, OpType=ALLGATHER). Collectives differ in the following aspects: \t Op type: BROADCASTvs ALLGATHER",
]


@pytest.mark.parametrize("mismatch", _MISMATCHES)
@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_a_collective_mismatch_is_the_ranks_failure_not_the_capture(framing: str, mismatch: str) -> None:
    line = f"Exception: Capture cuda graph failed: {mismatch}" if framing == "sglang" else f"RuntimeError: {mismatch}"
    diagnosis = diagnose_text(FRAMINGS[framing](line))
    assert diagnosis.failure_class == "nccl_error"
    assert diagnosis.figures.get("collective_mismatch") == "Detected mismatch between collectives on ranks"


def test_a_capture_failure_with_its_own_cause_keeps_it_before_a_later_mismatch() -> None:
    # A cause on the wrapper's line (an OOM) wins; a peer's mismatch printed after the wrapper is its consequence.
    lines = sglang("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.00 GiB")
    lines.insert(-2, "[2026-05-24 10:00:03 TP1] RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=9)")
    assert diagnose_text(lines).failure_class == "cuda_oom"


def test_batch26s_capture_wrapper_around_a_collective_mismatch() -> None:
    file = "sglang-04-h200-tp4-llama3-70b-capture-cuda-graph-failed-collectives-mismatch.log"
    _read_as_labelled("batch26-heldout", file, "nccl_error")


# (4) vllm-ascend's ACL graph capture (worker/model_runner_v1.py _capture_model, 0.11.0rc0-0.13.0rc1): the error logged,
# each line under vLLM's prefix, then re-raised: the start stops there, a capture failure.
_ACL = "ERROR 09-26 10:48:07 [model_runner_v1.py:3029] "


@pytest.mark.parametrize("exception", ["RuntimeError", "Exception", "ValueError"])
def test_vllm_ascends_aclgraph_capture_failure_is_a_capture_failure(exception: str) -> None:
    record = [
        f"{_ACL}ACLgraph sizes capture fail: {exception}:",
        f"{_ACL}ACLgraph has insufficient available streams to capture the configured number of sizes. Please verify both the availability of adequate streams and the appropriateness of the configured size count.",
        f"{_ACL}",
        f"{_ACL}Recommended solutions:",
        f"{_ACL}1. Manually configure the compilation_config parameter with a reduced set of sizes: '{{\"cudagraph_capture_sizes\":[size1, size2, size3, ...]}}'.",
    ]
    for lines in (record, record[1:2], vllm(record[0].removeprefix(_ACL))):
        diagnosis = diagnose_text(lines)
        assert diagnosis.failure_class == "cuda_graph_error"
        assert "ACLgraph capture failed" in (diagnosis.fix or "")
    traceback = [*record, "(EngineCore_DP0 pid=7) ERROR 09-26 10:48:07 [core.py:708] RuntimeError: aclmdlRICaptureEnd failed, retCode=0x7020023"]
    assert diagnose_text(traceback).failure_class == "cuda_graph_error"


def test_batch26s_aclgraph_capture_refusal() -> None:
    file = "vllm-ascend-aclgraph-sizes-capture-fail-insufficient-streams.log"
    _read_as_labelled("batch26-heldout", file, "cuda_graph_error")
