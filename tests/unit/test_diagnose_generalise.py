"""`fleet diagnose` on logs it was not written for (issue 27): rules by class, not by file.

- Real excerpts from public threads: tests/fixtures/logs/real (manifest.jsonl with each source URL),
  read from the bare log as a user would hand it over (no run record).
- The ranking rules of the catalogue, each on variants built from the format strings of the code
  that prints the lines: a peer's collective failure over the local wrapper it made fail, an inner
  cause over its wrapper, a fatal line over any warning, the last start over earlier ones.
- A bare stalled start classed with its stall point; a healthy log cut after uvicorn came up.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from fleet.host.diagnose.classify import diagnose_file, diagnose_text, signatures_in

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real"
REAL_MANIFEST = [json.loads(line) for line in (REAL / "manifest.jsonl").read_text().splitlines() if line.strip()]
READY = "[2026-05-24 11:00:01] The server is fired up and ready to roll!"
CAPTURE = "[2026-05-24 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=11.80 GB"
# c10d ProcessGroupNCCL.cpp's watchdog line and CUDA's OOM text (PyTorch c10/cuda/CUDACachingAllocator.cpp).
NCCL_TIMEOUT = (
    "[rank1]:[E524 10:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for "
    "600018 milliseconds before timing out."
)
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free."


@pytest.mark.parametrize("entry", REAL_MANIFEST, ids=[entry["file"] for entry in REAL_MANIFEST])
def test_real_excerpts_from_the_bare_log(entry: dict[str, str]) -> None:
    assert entry["url"].startswith("https://github.com/")
    diagnosis = diagnose_file(REAL / entry["file"])
    assert (diagnosis.failure_class or "healthy") == entry["label"]
    if diagnosis.failure_class:
        assert diagnosis.evidence and diagnosis.fix


# -- rule: a peer's collective failure over the local wrapper it made fail ------------------------
def test_peer_collective_failure_before_the_capture_wrapper_is_the_cause() -> None:
    lines = [CAPTURE, NCCL_TIMEOUT, "Exception: Capture cuda graph failed: CUDA error: unspecified launch failure"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "nccl_error" and diagnosis.evidence[0].line == 2
    # The same failure carried inside the wrapper's own line (gloo, the CPU group beside NCCL).
    inside = "Exception: Capture cuda graph failed: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4321"
    assert diagnose_text([CAPTURE, inside]).failure_class == "nccl_error"


def test_a_capture_failure_before_the_peers_timeouts_stays_the_cause() -> None:
    lines = [CAPTURE, "Exception: Capture cuda graph failed: mat1 and mat2 shapes cannot be multiplied (4x12288 and 8192x4096)", NCCL_TIMEOUT]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_graph_error" and diagnosis.consequences == ("nccl_error",)


# -- rule: an inner cause (link or import failure) over its wrapper ------------------------------
@pytest.mark.parametrize("library", ["cudart", "cuda"])
def test_a_link_error_inside_the_capture_wrapper_is_the_cause(library: str) -> None:
    # GNU ld's text, then Triton's CalledProcessError re-raised by SGLang's capture wrapper.
    lines = [
        CAPTURE,
        f"/usr/bin/ld: cannot find -l{library}: No such file or directory",
        "collect2: error: ld returned 1 exit status",
        f"Exception: Capture cuda graph failed: Command '['/usr/bin/gcc', '/tmp/tmpab/main.c', '-O3', '-shared', '-l{library}']' returned non-zero exit status 1.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error"
    assert f"lib{library}" in (diagnosis.fix or "")


def test_an_oom_inside_the_capture_wrapper_is_the_cause() -> None:
    assert diagnose_text([CAPTURE, f"Exception: Capture cuda graph failed: {OOM}"]).failure_class == "cuda_oom"


# -- rule: a fatal line over any warning ------------------------------------------------------------
@pytest.mark.parametrize(
    "warning",
    [
        # torchvision/io/image.py's UserWarning, as Python's warnings module prints it
        "/usr/local/lib/python3.10/dist-packages/torchvision/io/image.py:13: UserWarning: Failed to load image Python "
        "extension: '/usr/local/lib/python3.10/dist-packages/torchvision/image.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev'",
        # vLLM's _custom_ops.py logger.warning("Failed to import from vllm._C with %r", e)
        "WARNING 06-01 10:00:00 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('/usr/local/lib/python3.12/"
        "dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')",
        "[2026-05-24 10:00:00] WARNING: sgl_kernel optional op failed to load: undefined symbol: cutlass_fp4_gemm",
    ],
)
def test_an_undefined_symbol_warning_does_not_outrank_an_oom(warning: str) -> None:
    diagnosis = diagnose_text([warning, CAPTURE, OOM])
    assert diagnosis.failure_class == "cuda_oom"
    # On a healthy server it is no failure at all, and the agent's fail-fast does not stop for it.
    assert diagnose_text([warning, READY]).failure_class is None
    assert all(signature.name != "import_error" for signature in signatures_in(warning))


def test_a_warning_alone_before_a_silent_death_still_names_the_import() -> None:
    warning = (
        "WARNING 06-01 10:00:00 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('/usr/local/lib/"
        "python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')"
    )
    assert diagnose_text([warning, "Traceback (most recent call last):", "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'"]).failure_class == "import_error"


def test_pytorch_arch_warning_then_a_failure_is_unsupported_arch() -> None:
    # torch/cuda/__init__.py's incompatible_device_warn, then a start that fails with no named cause.
    lines = [
        "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:230: UserWarning: ",
        "NVIDIA B200 with CUDA capability sm_100 is not compatible with the current PyTorch installation.",
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
        "[2026-05-24 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: CUDA error: operation not supported",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    # The warning alone, on a server that came up, stays a finding.
    alone = diagnose_text([*lines[:3], READY])
    assert alone.failure_class is None and "torch_lacks_gpu_arch" in {f.name for f in alone.findings}


# -- rule: the first fatal line of the last start ---------------------------------------------------
def test_the_last_start_decides() -> None:
    first = ["[2026-05-24 09:00:00] server_args=ServerArgs(model_path='m', port=30000)", OOM]
    second = [
        "[2026-05-24 09:10:00] server_args=ServerArgs(model_path='m', port=30000)",
        "[2026-05-24 09:10:01] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
    ]
    diagnosis = diagnose_text(first + second)
    assert diagnosis.failure_class == "port_in_use"
    assert "earlier_start_failed" in {f.name for f in diagnosis.findings}


# -- stalls, cut logs and the watchdog, from the log alone ----------------------------------------
@pytest.mark.parametrize(
    ("lines", "stalled_at"),
    [
        (["[2026-05-24 10:00:00 TP0] Load weight begin. avail mem=78.00 GB", "Loading safetensors checkpoint shards:  40% Completed | 2/5 [00:31<00:47, 15.61s/it]"], "loading weights"),
        (["[2026-05-24 10:00:00 TP0] Init torch distributed begin."], "initialising torch distributed / NCCL"),
        # vLLM's gpu_model_runner: "Capturing CUDA graph shapes" tqdm bar, cut mid-way
        (
            [
                "INFO 06-01 10:00:00 [gpu_model_runner.py:1100] Starting to load model /models/x...",
                "INFO 06-01 10:01:00 [gpu_model_runner.py:1120] Model loading took 14.99 GiB and 60.1 seconds",
                "Capturing CUDA graph shapes:  43%|████▎     | 29/67 [00:12<00:16,  2.31it/s]",
            ],
            "capturing CUDA graphs",
        ),
    ],
)
def test_a_bare_stalled_start_is_classed_with_its_stall_point(lines: list[str], stalled_at: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "server_start_timeout"
    assert diagnosis.evidence[0].text == f"stalled at: {stalled_at}" and diagnosis.evidence[0].line == len(lines)
    assert stalled_at in (diagnosis.fix or "")


def test_a_log_that_ends_between_steps_is_unknown_with_its_stop_point() -> None:
    lines = [
        "[2026-05-24 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=15.00 GB.",
        "[2026-05-24 10:00:01 TP0] KV Cache is allocated. #tokens: 300288, K size: 8.38 GB, V size: 5.59 GB",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown"
    assert diagnosis.evidence[0].text == "last startup step: done allocating the KV cache"
    # Weights fully loaded (a tqdm bar at 100 %) is a finished step too.
    assert diagnose_text(["Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.9it/s]"]).failure_class == "unknown"


@pytest.mark.parametrize(
    "last",
    [
        "[2026-05-24 10:02:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        "INFO:     Application startup complete.",
    ],
)
def test_a_healthy_log_cut_after_uvicorn_came_up_is_no_failure(last: str) -> None:
    lines = [
        CAPTURE,
        "[2026-05-24 10:01:50 TP0] Capture cuda graph end. Time elapsed: 11.93 s. mem usage=0.61 GB. avail mem=11.19 GB.",
        "[2026-05-24 10:01:59] INFO:     Started server process [4242]",
        "[2026-05-24 10:01:59] INFO:     Waiting for application startup.",
        last,
    ]
    assert diagnose_text(lines).failure_class is None


def test_the_engine_watchdog_during_start_is_a_start_timeout_and_during_serving_a_hang() -> None:
    # SGLang utils/watchdog.py (0.5.x) and managers/scheduler.py (0.4.x) wordings.
    for line in ("[2026-05-24 10:05:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "[2026-05-24 10:05:00 TP0] Watchdog timeout (self.watchdog_timeout=300)"):
        started = diagnose_text([CAPTURE, line])
        assert started.failure_class == "server_start_timeout"
        assert [item.text for item in started.evidence][:1] == ["last startup step: capturing CUDA graphs"]
        assert "300" in (started.fix or "")
        serving = diagnose_text([READY, "[2026-05-24 11:00:02 TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0", line])
        assert serving.failure_class == "unknown"


# -- wording variants, built from their sources' format strings --------------------------------
@pytest.mark.parametrize(
    ("line", "failure_class"),
    [
        # tokenizer_manager.py's 400 text with the apostrophe as JSON/repr/HTML/typography print it
        (
            '{"object":"error","message":"The input (5000 tokens) is longer than the model\\\'s context length (4096 tokens).","type":"BadRequestError","param":null,"code":400}',
            "context_length_exceeded",
        ),
        ('{"error": {"message": "The input (5000 tokens) is longer than the model\\u2019s context length (4096 tokens)."}}', "context_length_exceeded"),
        ("The input (5000 tokens) is longer than the model&#39;s context length (4096 tokens).", "context_length_exceeded"),
        (
            '{"object":"error","message":"Requested token count exceeds the model\\u2019s maximum context length of 4096 tokens. You requested a total of 5000 tokens: 4000 tokens from the input messages and 1000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit."}',
            "context_length_exceeded",
        ),
        # vLLM input processor and config
        (
            "ValueError: The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
            "context_length_exceeded",
        ),
        (
            "ValueError: User-specified max_model_len (40000) is greater than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
            "context_length_exceeded",
        ),
        # vLLM's KV cache refusals
        ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", "kv_pool_too_small"),
        (
            "(EngineCore_DP0 pid=2) ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.10 GiB). Based on the available memory, the estimated maximum model length is 17216. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
            "kv_pool_too_small",
        ),
        # capability refusals in other words
        (
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
            "unsupported_gpu_arch",
        ),
        ("ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current capability: 75.", "unsupported_gpu_arch"),
        ("RuntimeError: Unsupported compute capability: 7.0", "unsupported_gpu_arch"),
        ("RuntimeError: This container only supports sm75 and newer GPUs", "unsupported_gpu_arch"),
        # a missing package without ImportError
        ("importlib.metadata.PackageNotFoundError: No package metadata was found for sglang", "import_error"),
        ("pkg_resources.DistributionNotFound: The 'vllm>=0.6.0' distribution was not found and is required by the application", "import_error"),
        ("RuntimeError: flashinfer is not installed. Please install it with `pip install flashinfer-python`.", "import_error"),
        # CUDA's cudaErrorCapturedEvent string, raised inside a capture
        ("RuntimeError: CUDA error: operation not permitted on an event last recorded in a capturing stream", "cuda_graph_error"),
    ],
)
def test_wording_variants(line: str, failure_class: str) -> None:
    assert diagnose_text([line]).failure_class == failure_class


@pytest.mark.parametrize(
    "line",
    [
        "INFO 06-01 10:00:00 [__init__.py:30] xformers is not installed, falling back to the torch SDPA backend",
        "WARNING: pip is not installed in this environment",
        "INFO 06-01 10:00:00 [cuda.py:200] Cannot use FlashAttention-2 backend for Volta and Turing GPUs.",
        "[2026-05-24 10:00:00] Custom allreduce is disabled because this process group spans across nodes.",
    ],
)
def test_healthy_lines_with_the_new_words_stay_quiet(line: str) -> None:
    assert diagnose_text([line, READY]).failure_class is None


# -- the held-out excerpts: measured once the rules were written, not tuned on -------------------
HELDOUT = REAL.parent / "heldout"


def test_heldout_excerpts_keep_their_measured_accuracy() -> None:
    """18 real excerpts collected after the rules above (SGLang and vLLM; tests/fixtures/logs/heldout).
    First measured at 10/18 (failures 8/14); 12/18 (9/14) after three source-level fixes the misses
    pointed to (vLLM's engine-ready lines, NCCL INFO run into an error line, vLLM's death lines). The
    six misses left are kinds, not typos: see the commit message. This guards the number, not files."""
    entries = [json.loads(line) for line in (HELDOUT / "manifest.jsonl").read_text().splitlines() if line.strip()]
    assert len(entries) == 18 and all(entry["url"].startswith("https://github.com/") for entry in entries)
    right = sum((diagnose_file(HELDOUT / entry["file"]).failure_class or "healthy") == entry["label"] for entry in entries)
    # 13 since vLLM 0.9's device-less free-memory refusal (batch6's kind) is read; 14 since its healthy start
    # cut after CUDA-graph capture is labelled `unknown` (the cut-start convention, 2026-12-03).
    assert right >= 14


def test_an_nccl_info_line_proves_nothing_but_an_error_run_into_one_does() -> None:
    info = "02fdc141b80d:213:213 [1] NCCL INFO cudaDriverVersion 12080"
    assert diagnose_text([info, READY]).failure_class is None
    flattened = "ERROR 11-04 18:02:56 [multiproc_executor.py:597] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details) " + info
    assert diagnose_text([flattened]).failure_class == "nccl_error"


def test_vllm_engine_ready_lines_end_a_start() -> None:
    lines = [
        "(EngineCore_0 pid=1) INFO 08-19 14:58:40 [core.py:215] init engine (profile, create kv cache, warmup model) took 1.06 seconds",
        "(APIServer pid=2) INFO 08-19 14:58:41 [launcher.py:37] Available routes are:",
    ]
    assert diagnose_text(lines).failure_class is None
    assert diagnose_text(["(APIServer pid=2) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]).failure_class == "unknown"


# -- the third batch: 39 real logs (25 vLLM, 14 SGLang), split before any rule change ----------------
# Every third log in collection order went to batch3-heldout; the rules were changed while looking at
# batch3-tune's misses only (tests/fixtures/logs/README.md).
BATCH3_TUNE = REAL.parent / "batch3-tune"
BATCH3_HELDOUT = REAL.parent / "batch3-heldout"


def _manifest(folder: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (folder / "manifest.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("entry", _manifest(BATCH3_TUNE), ids=[entry["file"] for entry in _manifest(BATCH3_TUNE)])
def test_batch3_tuning_logs_from_the_bare_log(entry: dict[str, str]) -> None:
    diagnosis = diagnose_file(BATCH3_TUNE / entry["file"])
    assert (diagnosis.failure_class or "healthy") == entry["label"], diagnosis.evidence
    if diagnosis.failure_class:
        assert diagnosis.evidence and diagnosis.fix


def test_batch3_heldout_keeps_its_measured_accuracy() -> None:
    """13 held-out logs, never tuned on: 12/13 before the batch's rule changes and 12/13 after them
    (bare logs, no run record); 13/13 since round twenty-four (round twenty-five's floor). This guards the number, not files."""
    entries = _manifest(BATCH3_HELDOUT)
    assert len(entries) == 13
    right = sum((diagnose_file(BATCH3_HELDOUT / entry["file"]).failure_class or "healthy") == entry["label"] for entry in entries)
    assert right >= 13


def test_batch3_has_its_sources_and_enough_vllm_logs() -> None:
    entries = _manifest(BATCH3_TUNE) + _manifest(BATCH3_HELDOUT)
    assert all(entry["source"].startswith("https://github.com/") and entry["engine"] in ("sglang", "vllm") for entry in entries)
    assert sum(entry["engine"] == "vllm" for entry in entries) >= 15  # issue 23, Must-show 3
    assert not {entry["file"] for entry in _manifest(BATCH3_TUNE)} & {entry["file"] for entry in _manifest(BATCH3_HELDOUT)}


# -- the fourth batch: 35 held-out real logs, labelled from their threads before fleet read them, and
# a separate tune split (tests/fixtures/logs/batch4-tune) that the rules below were written against.
BATCH4_TUNE = REAL.parent / "batch4-tune"
BATCH4_HELDOUT = REAL.parent / "batch4-heldout"


@pytest.mark.parametrize("entry", _manifest(BATCH4_TUNE), ids=[entry["file"] for entry in _manifest(BATCH4_TUNE)])
def test_batch4_tuning_logs_from_the_bare_log(entry: dict[str, str]) -> None:
    diagnosis = diagnose_file(BATCH4_TUNE / entry["file"])
    assert (diagnosis.failure_class or "healthy") == entry["label"], diagnosis.evidence
    if diagnosis.failure_class:
        assert diagnosis.evidence and diagnosis.fix


def test_batch4_heldout_keeps_its_measured_accuracy() -> None:
    """35 held-out logs (20 vLLM, 15 SGLang), never tuned on. From the bare log: 27/35 (failures 22/29)
    untouched, 30/35 (25/29) after the rules of the batch4 tune split; with the run record's start-timeout
    word 28/35 and 31/35 (benchmarks/results/diagnose-heldout.md); 33/35 from the bare log since round twenty-four (round
    twenty-five's floor), still since round twenty-seven relabelled its GB10 start cut after the chat template warm-up
    `unknown` (the cut-start convention, as batch17 labels the same cut; it reads unknown now, as it read healthy
    before). This guards the number, not files."""
    entries = _manifest(BATCH4_HELDOUT)
    assert len(entries) == 35 and all(entry["source"].startswith("https://github.com/") and entry["engine"] in ("sglang", "vllm") for entry in entries)
    assert not {entry["file"] for entry in _manifest(BATCH4_TUNE)} & {entry["file"] for entry in entries}
    right = sum((diagnose_file(BATCH4_HELDOUT / entry["file"]).failure_class or "healthy") == entry["label"] for entry in entries)
    assert right >= 33


# torch/cuda/__init__.py's incompatible_device_warn, as a launcher relays it (docker compose's
# "<service>  | ", Docker Desktop's stamp) and bare.
def _torch_arch_warning(prefix: str) -> list[str]:
    return [
        f"{prefix}/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:287: UserWarning: ",
        f"{prefix}NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        f"{prefix}The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
        f"{prefix}If you want to use the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/",
    ]


@pytest.mark.parametrize("prefix", ["", "vllm-1  | ", "2025-07-25 10:00:00 "])
def test_pytorch_arch_warning_on_a_start_that_never_came_up_is_unsupported_arch(prefix: str) -> None:
    diagnosis = diagnose_text(_torch_arch_warning(prefix))
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    assert "sm_120" in diagnosis.evidence[0].text and diagnosis.fix and "sm_120" in diagnosis.fix
    # The same warning on a server that came up stays a finding; a named failure after it keeps its class.
    assert diagnose_text([*_torch_arch_warning(prefix), READY]).failure_class is None
    assert diagnose_text([*_torch_arch_warning(prefix), OOM]).failure_class == "cuda_oom"


@pytest.mark.parametrize(
    ("line", "module"),
    [
        # CPython Lib/runpy.py _get_module_details: "Error while finding module specification for {!r} ({}: {})"
        ("/venv/bin/python: Error while finding module specification for 'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')", "vllm"),
        # a launcher's print(f"Error: {e}") of the ModuleNotFoundError
        ("Error: No module named 'outlines.fsm.regex'. Please install a new version of outlines", "outlines.fsm.regex"),
        # Docker Desktop's bare timestamp before the exception line
        ("2025-02-06 07:14:10 ModuleNotFoundError: No module named 'uvicorn'", "uvicorn"),
    ],
)
def test_a_missing_module_named_inside_another_message_is_an_import_error(line: str, module: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "import_error" and diagnosis.fix and f"'{module}'" in diagnosis.fix


@pytest.mark.parametrize(
    "line",
    [
        # SGLang models/registry.py: logger.warning(f"Ignore import error when loading {name}: {e}"), no level in its prefix
        "[2026-03-13 21:35:18] Ignore import error when loading sglang.srt.models.glm_ocr: No module named 'transformers.models.glm_ocr'",
        # vLLM _custom_ops.py's warning carries the exception's repr
        "WARNING 06-26 18:37:04 [_custom_ops.py:22] Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")",
        # the logging module's form keeps its level after the new bare-stamp prefix
        "2025-03-07 23:50:27,531 - __main__ - WARNING - ModuleNotFoundError: No module named 'flash_attn'",
    ],
)
def test_optional_modules_missing_on_a_healthy_start_stay_quiet(line: str) -> None:
    assert diagnose_text([line, READY]).failure_class is None
    assert all(signature.name != "import_error" for signature in signatures_in(line))


@pytest.mark.parametrize("key", ["layers.0.mlp.down_proj.weight.absmax", "lm_head.weight", "layers.35.mlp.gate.g_idx", "model.layers.13.mlp.experts.w2_weight_scale"])
def test_a_keyerror_logged_as_its_bare_key_while_loading_is_a_model_load_error(key: str) -> None:
    # vLLM 0.6 run_mp_engine: logger.exception(e) with a KeyError, whose str() is repr(key), then the traceback.
    lines = [
        "Loading safetensors checkpoint shards:   0% Completed | 0/8 [00:00<?, ?it/s]",
        f"ERROR 12-09 00:49:29 engine.py:366] '{key}'",
        "ERROR 12-09 00:49:29 engine.py:366] Traceback (most recent call last):",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error" and diagnosis.evidence[0].line == 2
    # A quoted name that is no tensor's, or a key inside a longer message, proves nothing here.
    assert diagnose_text(["ERROR 12-09 00:49:29 engine.py:366] 'foo.bar'", READY]).failure_class is None
    assert all(signature.name != "weight_loading_failed" for signature in signatures_in(f"INFO 12-09 00:49:29 loader.py:10] skipping '{key}' (tied)"))


# batch5-heldout: 31 more real logs from threads no earlier manifest names, committed before fleet read
# them and never tuned on (benchmarks/results/diagnose-heldout.md, "batch5-heldout: untouched").
BATCH5_HELDOUT = REAL.parent / "batch5-heldout"


def _threads(entries: list[dict[str, str]]) -> set[str]:
    """owner/repo#number for each entry: earlier manifests give a URL in `source`, or `owner/repo#N` there and the URL in `url`.
    A file in a repository (a docs notebook) is owner/repo:path, from a blob URL (its commit dropped) or written so."""
    threads = set()
    for entry in entries:
        for text in (entry.get("source", ""), entry.get("url", "")):
            if "github.com/" in text:
                owner, repo, kind, number, *path = text.split("github.com/", 1)[1].split("/")
                if kind in ("issues", "pull"):
                    threads.add(f"{owner}/{repo}#{number.split('#')[0]}".lower())
                elif kind == "blob":
                    threads.add(f"{owner}/{repo}:{'/'.join(path)}".lower())
            elif ("#" in text or ":" in text) and "/" in text and " " not in text:
                threads.add(text.lower())
    return threads


def _heldout_right(folder: Path, logs: int) -> int:
    """How many of a held-out folder's logs the bare log classes right, after checking that it has `logs`
    entries from `logs` threads of SGLang or vLLM (GitHub's, or a page's URL from batch13 on), none of them a source
    of any other manifest."""
    entries = _manifest(folder)
    assert len(entries) == logs and all(entry["source"].startswith(("https://", "http://")) and entry["engine"] in ("sglang", "vllm") for entry in entries)
    others = [other / "manifest.jsonl" for other in (*REAL.parent.iterdir(), REAL.parent.parent / "sample-logs") if other != folder]
    earlier = _threads([entry for path in others if path.exists() for entry in _manifest(path.parent)])
    assert len(_threads(entries)) == logs and not _threads(entries) & earlier
    return sum((diagnose_file(folder / entry["file"]).failure_class or "healthy") == entry["label"] for entry in entries)


def _guard_batch(folder: Path, *, total: int, floor: int, shows_cause: int, sglang: int) -> None:
    """The guard of a batch collected from run logs (batch21 on): its `shows_cause` count and its SGLang logs as
    collected; no source it names is named by another folder's manifest or skipped list, and its own skipped list names
    no other folder's source; and at least `floor` of its `total` logs read right from the bare log."""
    entries = _manifest(folder)
    assert sum(entry["shows_cause"] is True for entry in entries) == shows_cause and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert sorted(entry["engine"] for entry in entries).count("sglang") == sglang
    others = [other for other in (*REAL.parent.iterdir(), REAL.parent.parent / "sample-logs") if other != folder and other.is_dir()]
    skipped = [{"source": url} for other in others for listing in other.glob("skipped*.txt") for url in re.findall(r"https?://\S+", listing.read_text())]
    assert not _threads(entries) & _threads(skipped)
    own_skipped = [{"source": url} for url in re.findall(r"https?://\S+", (folder / "skipped.txt").read_text())]
    named = _threads([entry for other in others if (other / "manifest.jsonl").exists() for entry in _manifest(other)])
    assert not _threads(own_skipped) & named
    assert _heldout_right(folder, total) >= floor


def test_batch5_heldout_keeps_its_measured_accuracy() -> None:
    """31 real logs (22 vLLM, 9 SGLang): 22/31 right (failures 19/27) from the bare log, measured untouched;
    30/31 (27/27) after the rules of its miss kinds (test_batch5_kinds_from_their_sources); 31/31 since its
    start cut in KV-cache profiling is labelled `unknown` (the cut-start convention, 2026-12-03). It has been
    tuned on since: batch6-heldout is the held-out set now. A floor, not a file-by-file check."""
    assert _heldout_right(BATCH5_HELDOUT, 31) >= 31


# -- batch5's miss kinds as class rules, each from the source that prints the text (issue 27) -----------
# Each rule: the real line batch5 holds, then variants built from the source's format string (other
# figures, other releases' wording, other launcher prefixes), and the same words where they prove nothing.
@pytest.mark.parametrize(
    ("lines", "failure_class", "figure"),
    [
        # vLLM transformers_utils/config.py get_config, 0.7.x: f"No supported config format found in {model}"
        (["ValueError: No supported config format found in Benasd/Qwen2.5-VL-72B-Instruct-Pointer-AWQ"], "model_load_error", "Benasd/Qwen2.5-VL-72B-Instruct-Pointer-AWQ"),
        (["(APIServer pid=7) ValueError: No supported config format found in /models/llama-3-8b."], "model_load_error", "/models/llama-3-8b"),
        # 0.8+: "Could not detect config format for no config file found. With config_format 'auto', ..."
        (
            [
                "(APIServer pid=48263) ValueError: Could not detect config format for no config file found. With config_format 'auto', ensure your model has either config.json (HF format) or params.json (Mistral format). Otherwise please specify your_custom_config_format in engine args for customized config parser."
            ],
            "model_load_error",
            None,
        ),
        (
            [
                "ERROR 03-02 10:00:00 [config.py:480] ValueError('Could not detect config format for no config file found. Ensure your model has either config.json (HF format) or params.json (Mistral format).')"
            ],
            "model_load_error",
            None,
        ),
        # requests' raise_for_status through huggingface_hub: f"{status} Client Error: {reason} for url: {url}"
        (
            ["requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/HuggingFaceH4/gemma-2-2b-gkd/resolve/main/config.json"],
            "model_load_error",
            "HuggingFaceH4/gemma-2-2b-gkd",
        ),
        (["HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/org/model-v2/resolve/refs%2Fpr%2F3/tokenizer.json"], "model_load_error", "org/model-v2"),
        # SGLang 0.1-0.2 get_model_cls_by_arch_name: f"Unsupported architectures: {arch}. Supported list: {list(...)}"
        (["ValueError: Unsupported architectures: ChatGLMForConditionalGeneration. Supported list: ['ChatGLMForCausalLM', 'ChatGLMModel']"], "model_load_error", "ChatGLMForConditionalGeneration"),
        (["[rank0]: ValueError: Unsupported architectures: MiniCPMVForCausalLM. Supported list: ['LlamaForCausalLM']"], "model_load_error", "MiniCPMVForCausalLM"),
        # vLLM's profiled block count before "No available memory for the cache blocks" (0.2 llm_engine.py,
        # 0.6+ executor_base.py "# %s blocks: %d, # CPU blocks: %d")
        (["INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0, # CPU blocks: 256", "2024-04-27 10:13:05 | ERROR | stderr | Traceback (most recent call last):"], "kv_pool_too_small", None),
        (["INFO 11-02 09:00:00 executor_base.py:113] # cuda blocks: 0, # CPU blocks: 4096"], "kv_pool_too_small", None),
        (["(VllmWorkerProcess pid=9) INFO 11-02 09:00:00 llm_engine.py:300] # GPU blocks: 0"], "kv_pool_too_small", None),
        # vLLM's scheduler: logger.warning("Input prompt (%d tokens) is too long and exceeds limit of %d", ...)
        (["scheduler.py:648] Input prompt (36893 tokens) is too long and exceeds limit of 1000"], "context_length_exceeded", "36893"),
        (["WARNING 07-28 03:23:18 scheduler.py:196] Input prompt (2716 tokens) is too long and exceeds limit of 4096"], "context_length_exceeded", "2716"),
        (["(EngineCore_DP0 pid=3) WARNING 02-20 17:08:38 [scheduler.py:949] Input prompt (100005 tokens) is too long and exceeds limit of 2048"], "context_length_exceeded", "2048"),
        # NCCL's CUDA-call checks: WARN("Cuda failure %d '%s'", ...) (cudawrap.h), WARN("Cuda failure '%s'", ...) (checks.h)
        (
            [
                "kmaker-54-033138205093:44712:44746 [2] transport/nvls.cc:246 NCCL WARN Cuda failure 3 'initialization error'",
                "kmaker-54-033138205093:44712:44746 [2] NCCL INFO init.cc:1010 -> 1",
            ],
            "nccl_error",
            "initialization error",
        ),
        (["node1:301:355 [0] enqueue.cc:1302 NCCL WARN Cuda failure 'invalid device ordinal'", "node1:301:355 [0] NCCL INFO group.cc:64 -> 1 [Async thread]"], "nccl_error", "invalid device ordinal"),
        (["node1:301:355 [0] proxy.cc:1190 NCCL WARN Cuda failure 2 'out of memory'"], "cuda_oom", None),
    ],
)
def test_batch5_kinds_from_their_sources(lines: list[str], failure_class: str, figure: str | None) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class
    assert diagnosis.fix is not None and (figure is None or figure in diagnosis.fix)


def test_vllms_prompt_over_limit_warning_counts_on_a_server_that_serves() -> None:
    """The scheduler logs the dropped request at warning level on a running server: still the failure
    (SGLang's 400 for the same request is too), unlike a warning from an optional extension."""
    warning = "WARNING 11-19 08:01:02 scheduler.py:648] Input prompt (36893 tokens) is too long and exceeds limit of 1000"
    ready = "INFO 11-19 08:00:00 launcher.py:37] Available routes are:"
    assert diagnose_text([ready, warning]).failure_class == "context_length_exceeded"
    assert [signature.name for signature in signatures_in(warning)] == ["context_length_exceeded"]
    # the other triggers of the class still need an error line to count beside a running server
    other = "WARNING 11-19 08:01:02 serving.py:10] The decoder prompt (length 5000) is longer than the maximum model length of 4096."
    assert diagnose_text([ready, other]).failure_class is None


@pytest.mark.parametrize(
    "line",
    [
        # a healthy start's block counts, CPU blocks at 0 (no swap space), and another 404 than the hub's
        "INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 7281, # CPU blocks: 0",
        "INFO 11-02 09:00:00 executor_base.py:113] # cuda blocks: 10240, # CPU blocks: 2048",
        "WARNING 11-02 09:00:00 [metrics.py:10] 404 Client Error: Not Found for url: http://localhost:9090/api/v1/push",
        # NCCL's WARN lines that are not its CUDA-call checks, and its INFO error-return chains alone
        "node1:301:355 [0] misc/nvmlwrap.cc:183 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Not Found",
        "node1:301:355 [0] NCCL INFO init.cc:1010 -> 1",
    ],
)
def test_the_batch5_words_on_healthy_lines_stay_quiet(line: str) -> None:
    assert diagnose_text([line, READY]).failure_class is None


# batch6-heldout: 31 more real logs from threads no other manifest names, committed (c8dc75e) before fleet
# read them and never tuned on (benchmarks/results/diagnose-heldout.md, "batch6-heldout").
BATCH6_HELDOUT = REAL.parent / "batch6-heldout"


def test_batch6_heldout_keeps_its_measured_accuracy() -> None:
    """31 logs (20 vLLM, 11 SGLang): 29/31 right (failures 22/23) from the bare log, measured once untouched;
    30/31 (23/23) after the rules of its miss kinds (the tests below); 31/31 since its start cut after weight
    loading is labelled `unknown` (the cut-start convention, 2026-12-03), and since round twenty-seven relabelled its
    lone SGLang start-up warning `unknown` by the same convention (it still reads right). Tuned on since:
    batch7-heldout is the held-out set now. A floor, not a file-by-file check."""
    assert _heldout_right(BATCH6_HELDOUT, 31) >= 31


# -- batch6's miss kinds as class rules, each from the source that prints the text (issue 27) -----------
# vLLM 0.9.2 v1/worker/gpu_worker.py:146-152 (init_device): f"Free memory on device ({GiB(free)}/{GiB(total)} GiB)
# on startup is less than desired GPU memory utilization ({utilization}, {GiB(requested)} GiB). ..." with no
# device name; later releases name it ("on device cuda:0 ("). The first line is batch6's real one.
@pytest.mark.parametrize(
    ("line", "free_gib"),
    [
        (
            "ValueError: Free memory on device (59.32/79.15 GiB) on startup is less than desired GPU memory utilization (0.9, 71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "59.32",
        ),
        ("(EngineCore_0 pid=411) ValueError: Free memory on device (3.1/23.55 GiB) on startup is less than desired GPU memory utilization (0.85, 20.02 GiB).", "3.1"),
        ("ERROR 07-10 09:00:00 [core.py:515] ValueError: Free memory on device cuda:1 (5.31/23.56 GiB) on startup is less than desired GPU memory utilization (0.8, 18.85 GiB).", "5.31"),
    ],
)
def test_vllms_free_memory_refusal_with_or_without_a_device_name_is_an_oom(line: str, free_gib: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "cuda_oom" and diagnosis.figures.get("free_gib") == free_gib


# SGLang's multi-threaded safetensors loader bar (0.5.10 model_loader/weight_utils.py:807, :857,
# desc="Multi-thread loading shards", bar "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} ...").
# Mid-way it is weights loading (a stall); at 100 % every shard is read: the log ends between steps, which
# from the bare log is `unknown` with its stop point, not a stalled start. The last line is batch6's real one.
@pytest.mark.parametrize(
    ("bar", "failure_class", "evidence"),
    [
        ("Multi-thread loading shards: 100% Completed | 4/4 [00:04<00:00,  1.02s/it]", "unknown", "last startup step: done loading weights"),
        ("Multi-thread loading shards: 100% Completed | 163/163 [02:11<00:00,  1.24it/s]", "unknown", "last startup step: done loading weights"),
        ("Multi-thread loading shards:  50% Completed | 1/2 [00:01<00:01,  1.17s/it]", "server_start_timeout", "stalled at: loading weights"),
    ],
)
def test_sglangs_multi_thread_weight_bar_is_a_loading_step(bar: str, failure_class: str, evidence: str) -> None:
    lines = ["[2026-06-02 10:49:18] Init torch distributed ends. elapsed=0.22 s, mem usage=0.05 GB", "[2026-06-02 10:49:20] Load weight begin. avail mem=44.03 GB", bar]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and diagnosis.evidence[0].text == evidence and diagnosis.evidence[0].line == 3


# batch7-heldout: 47 more real logs from threads no other manifest names, committed (09e6a88) before fleet
# read them and never tuned on (benchmarks/results/diagnose-heldout.md, "batch7-heldout").
BATCH7_HELDOUT = REAL.parent / "batch7-heldout"


def test_batch7_keeps_its_tune_figure() -> None:
    """47 real logs (31 vLLM, 16 SGLang): 28/47 right (failures 24/39) from the bare log, measured once
    untouched as first labelled; 32/47 under the cut-start convention (four healthy starts cut between
    start-up steps relabelled `unknown` after that measurement); 44/47 after the rules of its miss kinds
    (the tests below). A tune split since: batch8-heldout is the held-out set. A floor, not a file check."""
    assert _heldout_right(BATCH7_HELDOUT, 47) >= 44


# -- batch7's miss kinds as class rules, each from the source that prints the text (issue 27) -----------
# Each case: batch7's real line first, then variants built from the printing source's format string, and
# the same words where they prove nothing.
@pytest.mark.parametrize(
    ("lines", "failure_class", "figure"),
    [
        # vLLM model_executor/model_loader/default_loader.py:260 (0.33) f"Cannot find any model weights with
        # `{model_name_or_path}`": the real line is cut inside the path; a whole one gives the path.
        (
            ["RuntimeError: Cannot find any model weights with `/models/huggingface-cache/hub/models--migtissera--Tess-3-Mistral-Large-2-123B/snapshots/8047f7cc9615909650b6a4ae5d13719d3e11594d"],
            "model_load_error",
            None,
        ),
        (["(EngineCore_DP0 pid=9) RuntimeError: Cannot find any model weights with `/data/llama-3-8b`"], "model_load_error", "/data/llama-3-8b"),
        # vLLM models/registry.py:1250 (0.33) f"Model architectures {architectures} are not supported for now. "
        (["ValueError: Model architectures ['Qwen2ForSequenceClassification'] are not supported for no"], "model_load_error", "['Qwen2ForSequenceClassification']"),
        (
            ["ERROR 01-02 03:04:05 [core.py:700] ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])"],
            "model_load_error",
            "['FooForCausalLM']",
        ),
        # vLLM transformers_utils/config.py:912 (0.33): "Invalid repository ID or local directory specified: '{model}'."
        (
            ["ValueError: Invalid repository ID or local directory specified: 'neuralmagic/Meta-Llama-3-8B-Instruct-FP8-dynamic'.", "Please verify the following requirements:"],
            "model_load_error",
            "neuralmagic/Meta-Llama-3-8B-Instruct-FP8-dynamic",
        ),
        (["(APIServer pid=1) ValueError: Invalid repository ID or local directory specified: '/models/missing'."], "model_load_error", "/models/missing"),
        # transformers configuration_utils.py:886 (5.x) f"It looks like the config file at '{resolved_config_file}' is not a valid JSON file."
        (
            [
                "OSError: It looks like the config file at '/Users/manish/.cache/huggingface/hub/models--microsoft--OmniParser-v2.0/snapshots/11459378703eb81474b8a59e156e7a37aa75a092/config.json' is not a valid JSON file."
            ],
            "model_load_error",
            "/Users/manish/.cache/huggingface/hub/models--microsoft--OmniParser-v2.0/snapshots/11459378703eb81474b8a59e156e7a37aa75a092/config.json",
        ),
        (["[rank0]: OSError: It looks like the config file at '/m/config.json' is not a valid JSON file."], "model_load_error", "/m/config.json"),
        # CPython's '  File "{}", line {}, in {}' for the model's load_weights, as batch7's paste spaced it and as printed.
        (['  File "/sgl-workspace/sglang/python/sglang/srt/models/qwen2.py",  line398, in load_weights', "    param = params_dict[name]", "KeyError: 'lm_head.weight'"], "model_load_error", None),
        (['  File "/x/sglang/srt/models/llama.py", line 512, in load_weights', "KeyError: 'model.embed_tokens.weight'"], "model_load_error", None),
        # SGLang's capture advice (0.4.x cuda_graph_runner.py's CUDA_GRAPH_CAPTURE_FAILED_MSG; 0.5.23
        # runner_backend_utils/__init__.py:19) with nothing else left of the failure.
        (
            [
                "3. disable torch compile by not using --enable-torch-compile",
                "4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf loss)",
                "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose",
            ],
            "cuda_graph_error",
            None,
        ),
        (["3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)"], "cuda_graph_error", None),
        # vLLM sampling_params.py:693 (0.33) f"max_tokens must be at least 1, got {self.max_tokens}.", the
        # OpenAI server having computed max_model_len - prompt tokens, inside a client's 400 body.
        (
            ["openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'max_tokens must be at least 1, got -344.', 'type': 'BadRequestError', 'param': None, 'code': 400}"],
            "context_length_exceeded",
            "-344",
        ),
        (["ERROR 06-01 10:00:00 [serving_chat.py:200] vllm.exceptions.VLLMValidationError: max_tokens must be at least 1, got 0."], "context_length_exceeded", "0"),
        # ptxas located errors ("ptxas <file>, line <n>; error : <msg>") under Inductor's glog prefix.
        (
            [
                "[rank0]:E0701 14:28:21.083000 911603 torch/_inductor/runtime/triton_heuristics.py:539] [0/0] ptxas /tmp/tmpmwke15zw.ptx, line 6; error   : PTX .version 8.4 does not support .target sm_120a"
            ],
            "unsupported_gpu_arch",
            "sm_120a",
        ),
        (["ptxas /tmp/k.ptx, line 5; fatal   : Unsupported .target 'sm_100a'"], "unsupported_gpu_arch", "sm_100a"),
        # ptxas about anything else is a kernel that did not assemble: no class, unknown with ptxas' words.
        (
            ["ERROR 03-27 12:41:06 [core.py:344] ptxas /tmp/tmp6qa78v4o.ptx, line 661; error   : Modifier '.evict_last' cannot be combined with modifier '.cg'"],
            "unknown",
            "Modifier '.evict_last' cannot be combined with modifier '.cg'",
        ),
        # vLLM's NCCL communicator set-up (pynccl_wrapper.py NCCL_CHECK; 0.4 pynccl.py __del__ without comm).
        (
            [
                '[rank0]:   File "/env/site-packages/vllm/distributed/device_communicators/pynccl_wrapper.py", line 277, in ncclCommInitRank',
                '[rank0]:     self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),',
            ],
            "nccl_error",
            None,
        ),
        (["(RayWorkerVllm pid=14289) AttributeError: 'NCCLCommunicator' object has no attribute 'comm'"], "nccl_error", None),
        (["[rank1]: AttributeError: 'NCCLCommunicator' object has no attribute 'comm'"], "nccl_error", None),
    ],
)
def test_batch7_kinds_from_their_sources(lines: list[str], failure_class: str, figure: str | None) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class, diagnosis.evidence
    if figure is not None:
        assert figure in diagnosis.figures.values() or figure in diagnosis.fix, (diagnosis.figures, diagnosis.fix)


@pytest.mark.parametrize(
    "line",
    [
        # A positive max_tokens refusal is another bound (a request's own max_tokens), not the context.
        "ERROR 06-01 10:00:00 [serving_chat.py:200] ValueError: max_tokens must be at least 1, got 5.",
        # ptxas' informational output (-v) is not an error.
        "ptxas info    : Used 40 registers, 384 bytes cmem[0]",
        # A model name that merely contains the words.
        "INFO 06-01 10:00:00 [registry.py:10] Model architectures ['LlamaForCausalLM'] loaded",
    ],
)
def test_the_batch7_words_on_healthy_lines_stay_quiet(line: str) -> None:
    diagnosis = diagnose_text([line, "INFO 06-01 10:00:01 [launcher.py:37] Available routes are:"])
    assert diagnosis.failure_class in (None, "unknown") and diagnosis.failure_class != "context_length_exceeded"
    if "ptxas info" in line or "loaded" in line:
        assert diagnosis.failure_class is None


# vLLM's start-up steps it had no entry for (fleet/host/engines/vllm/logparse.py STARTUP_STEPS): the API
# server's poll of its engine cores (v1/engine/utils.py:1449, every 10 s) is a step under way, a stall;
# parallel_state's rank assignment (:2386) ends distributed set-up, so a log that ends there ends between
# steps (`unknown` with the stop point). The first lines are batch7's real ones.
@pytest.mark.parametrize(
    ("lines", "failure_class", "evidence"),
    [
        (
            [
                "(APIServer pid=300606) DEBUG 09-02 17:29:06 [utils.py:777] Waiting for 1 local, 0 remote core engine proc(s) to start.",
                "(APIServer pid=300606) DEBUG 09-02 17:29:16 [utils.py:777] Waiting for 1 local, 0 remote core engine proc(s) to start.",
            ],
            "server_start_timeout",
            "stalled at: waiting for the engine core process(es) to start",
        ),
        (
            ["DEBUG 01-01 00:00:00 [utils.py:1444] Waiting for 0 local, 2 remote core engine proc(s) to connect."],
            "server_start_timeout",
            "stalled at: waiting for the engine core process(es) to start",
        ),
        (
            [
                "(EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://192.168.68.154:46985 backend=nccl",
                "(EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1712] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A, EPLB rank N/A",
            ],
            "unknown",
            "last startup step: done initialising the distributed groups",
        ),
        (
            ["INFO 04-14 13:41:01 [parallel_state.py:1846] world_size=2 rank=1 local_rank=1 distributed_init_method=env:// backend=nccl"],
            "server_start_timeout",
            "stalled at: initialising torch distributed / NCCL",
        ),
    ],
)
def test_vllm_start_up_steps_from_its_own_lines(lines: list[str], failure_class: str, evidence: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and diagnosis.evidence[0].text == evidence


# batch8-heldout: 42 more real logs from threads no other manifest names, committed (cf2203a) before fleet read
# them, measured once untouched (12/42); a tune split since the rules of its miss kinds (below).
BATCH8_HELDOUT = REAL.parent / "batch8-heldout"


def test_batch8_keeps_its_tune_figure() -> None:
    """42 real logs (30 vLLM, 12 SGLang): 12/42 right (failures 5/35) from the bare log, measured once
    untouched; 12/15 on the logs whose excerpt shows the cause (`excerpt_shows_cause`, set before fleet ran);
    14/42 (failures 7/35) after the rules of its miss kinds (the tests below; 11 of its frame-only excerpts
    now read `unknown`, not healthy, which their thread's label does not count). A tune split since:
    batch9-heldout is the held-out set. A floor, not a file check."""
    entries = _manifest(BATCH8_HELDOUT)
    assert all(isinstance(entry["excerpt_shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH8_HELDOUT, 42) >= 14


# -- batch8's miss kinds as class rules, each from the source that prints the text (issue 27) -----------
# CPython's traceback frame, traceback.py (3.11) :462 '  File "{}", line {}, in {}', and faulthandler's,
# Python/traceback.c dump_frame '  File "%U", line %d in %U'; the first case of each kind is batch8's real text.
_FRAMES_ONLY = [
    [
        'ERROR 04-09 05:39:54 [core.py:390]   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/llama.py", line 321, in __init__',
        "ERROR 04-09 05:39:54 [core.py:390]     self.start_layer, self.end_layer, self.layers = make_layers(",
        "ERROR 04-09 05:39:54 [core.py:390]                                                     ^^^^^^^^^^^^",
    ],
    ['  File "/x/vllm/worker/worker.py", line 12, in init_device', "    init_worker_distributed_environment(self.parallel_config, self.rank,"],
    ['File "/x/sglang/srt/managers/scheduler.py", line 7, in run_scheduler_process'],
    [
        '(ServeReplica:llama3-app:LLMDeploymentllama-3-8B-instruct pid=12249, ip=10.0.155.99)   File "/home/ray/anaconda3/lib/python3.11/site-packages/vllm/executor/executor_base.py", line 287, in __init__',
        "(ServeReplica:llama3-app:LLMDeploymentllama-3-8B-instruct pid=12249, ip=10.0.155.99)     super().__init__(*args, **kwargs)",
    ],
    ['(RayWorkerWrapper pid=62111, ip=10.0.0.1)   File "/x/vllm/worker/worker_base.py", line 3, in execute_method'],
    ['(pid=45601)   File "/x/vllm/worker/worker_base.py", line 3, in execute_method'],
    ["Thread 0x00007ee43dfff640 (most recent call first):", '  File "/usr/lib/python3.10/threading.py", line 953 in run'],
]


@pytest.mark.parametrize("lines", _FRAMES_ONLY)
def test_a_log_of_traceback_frames_alone_is_unknown_with_its_frames(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and 'File "' in diagnosis.evidence[0].text, diagnosis.evidence


@pytest.mark.parametrize(
    ("lines", "failure_class", "evidence"),
    [
        # faulthandler.c faulthandler_fatal_error: "Fatal Python error: " + the signal's name (batch8's real line).
        (["frame #4: <unknown function> + 0x126850 (0x7f0626126850 in /usr/lib/x86_64-linux-gnu/libc.so.6)", "", "Fatal Python error: Aborted"], "unknown", "Fatal Python error: Aborted"),
        (["[2026-01-01 00:00:00 TP3] Fatal Python error: Segmentation fault"], "unknown", "Fatal Python error: Segmentation fault"),
        # SGLang's start begins with its arguments (0.5.12- `server_args=ServerArgs(`, 0.5.23 engine.py:311
        # `server_args={...}`), then it launches its scheduler processes: a start that stops there stalled.
        (
            [
                "INFO 02-11 10:25:22 __init__.py:190] Automatically detected platform cuda.",
                "[2025-02-11 10:25:26] server_args=ServerArgs(model_path='/data/DeepSeek-R1-Distill-Qwen-32B', tokenizer_mode='auto', tp_size=4, stream_interval=1, constrained_json_whitespace_patter",
            ],
            "server_start_timeout",
            "stalled at: launching the scheduler processes (the server's arguments were logged)",
        ),
        (
            ["[2026-05-24 10:00:00] server_args={'model_path': '/m/Qwen3-8B', 'tp_size': 4, 'port': 30000}"],
            "server_start_timeout",
            "stalled at: launching the scheduler processes (the server's arguments were logged)",
        ),
        (
            ["server_args=ServerArgs(model_path='/m', tp_size=1)", "[2026-05-24 10:00:05 TP0] Load weight begin. avail mem=78.00 GB"],
            "server_start_timeout",
            "stalled at: loading weights",
        ),
        # vLLM's and SGLang's pynccl.py call into their NCCLLibrary (vllm 0.33 pynccl.py:180, sglang 0.5.23
        # srt/distributed/device_communicators/pynccl.py:129): a traceback that stops at that call.
        (
            [
                '(VllmWorkerProcess pid=1252) ERROR 12-25 01:10:28 multiproc_worker_utils.py:229]   File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/device_communicators/pynccl.py", line 99, in __init__',
                "(VllmWorkerProcess pid=1252) ERROR 12-25 01:10:28 multiproc_worker_utils.py:229]     self.comm: ncclComm_t = self.nccl.ncclCommInitRank(",
            ],
            "nccl_error",
            "self.nccl.ncclCommInitRank(",
        ),
        (
            ['[rank0]:   File "/sgl/python/sglang/srt/distributed/device_communicators/pynccl.py", line 129, in __init__', "[rank0]:     self.comm = self.nccl.ncclCommInitRank("],
            "nccl_error",
            "self.nccl.ncclCommInitRank(",
        ),
        (["                self.comm: ncclComm_t = self.nccl.ncclCommInitRank(", "RuntimeError: NCCL error: unhandled system error"], "nccl_error", None),
    ],
)
def test_batch8_kinds_from_their_sources(lines: list[str], failure_class: str, evidence: str | None) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class, diagnosis.evidence
    if evidence is not None:
        assert evidence in diagnosis.evidence[0].text, diagnosis.evidence


def test_frames_beside_their_exception_or_a_serving_server_add_nothing() -> None:
    frames = ['  File "/x/vllm/worker/model_runner.py", line 9, in load_model', "    self.model = get_model(vllm_config=self.vllm_config)"]
    # The exception line names the cause; the frames are not evidence of their own.
    oom = diagnose_text(["Traceback (most recent call last):", *frames, OOM])
    assert oom.failure_class == "cuda_oom" and all('File "' not in item.text for item in oom.evidence)
    # A request's traceback, then serving goes on: no failure, a recovered error.
    serving = [f"[2026-05-24 11:00:0{n} TP0] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, gen throughput (token/s): 50.00, #queue-req: 0" for n in range(4)]
    recovered = diagnose_text([READY, *frames, *serving])
    assert recovered.failure_class is None and [finding.name for finding in recovered.findings] == ["recovered_error"]


@pytest.mark.parametrize(
    "lines",
    [
        # A frame quoting SGLang's call with `server_args=server_args,` is no start; nor is NCCL's INFO line
        # naming ncclCommInitRank (debug.c's level), nor the API's own word in prose.
        ["    scheduler = Scheduler(", "        server_args=server_args,", READY],
        ["node1:1333:1333 [0] NCCL INFO ncclCommInitRank comm 0x39a43760 rank 12 nranks 20 cudaDev 0 busId 9c000 - Init COMPLETE", READY],
        ["INFO 01-01 00:00:00 [pynccl.py:70] vLLM is using nccl==2.21.5", "INFO 01-01 00:00:01 [launcher.py:37] Available routes are:"],
    ],
)
def test_the_batch8_words_on_healthy_lines_stay_quiet(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class is None


def test_the_agent_does_not_stop_on_a_frame_it_may_survive() -> None:
    from fleet.host.agent.fatal import fatal_marker

    line = 'ERROR 04-09 05:39:54 [core.py:390]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 390, in run'
    assert [signature.name for signature in signatures_in(line)] == ["traceback_frames"] and fatal_marker(line) is None


# batch9-heldout: 42 more real logs from threads no other manifest names, committed (8f0e45d) before fleet read
# them, measured once untouched with the batch8 rules (18/42); a tune split since the rules of its miss kinds (below).
BATCH9_HELDOUT = REAL.parent / "batch9-heldout"


def test_batch9_keeps_its_tune_figure() -> None:
    """42 real logs (21 vLLM, 21 SGLang): 18/42 right (failures 11/35) from the bare log, measured once
    untouched; 17/19 on the logs whose excerpt shows the cause (`shows_cause`, judged before fleet ran); 23/42
    (failures 16/35) after the rules of its miss kinds 1, 2, 4 and 5 (the tests below). A tune split since:
    batch10-heldout is the held-out set. A floor, not a file check."""
    entries = _manifest(BATCH9_HELDOUT)
    assert all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH9_HELDOUT, 42) >= 23


# -- batch9's miss kinds as class rules, each from the source that prints the text (issue 27) -----------
# The first case of each kind is batch9's real text; the others are built from the printing source's format string.
_REGISTRY_FRAME = '  File "/home/container_app_user/vllm/vllm/model_executor/models/registry.py", line 317, in _raise_for_unsupported'
_HUB_URL = "https://huggingface.co/api/models/bigcode/starcoder"


@pytest.mark.parametrize(
    ("lines", "failure_class", "evidence"),
    [
        # Kind 1: vLLM's ModelRegistry._raise_for_unsupported raises ValueError on every path (0.33 registry.py:1221-1252).
        ([_REGISTRY_FRAME, "    raise ValueError("], "model_load_error", "_raise_for_unsupported"),
        (
            [
                '(EngineCore_DP0 pid=77) ERROR 05-12 10:11:12 [core.py:708]   File "/usr/lib/python3.12/site-packages/vllm/model_executor/models/registry.py", line 1472, in resolve_model_cls',
                "(EngineCore_DP0 pid=77) ERROR 05-12 10:11:12 [core.py:708]     return self._raise_for_unsupported(architectures)",
            ],
            "model_load_error",
            "self._raise_for_unsupported(architectures)",
        ),
        # ... and the ValueError itself, when the log keeps it, is the named cause (the frame adds nothing).
        (
            [_REGISTRY_FRAME, "ValueError: Model architectures ['TTLlamaForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM']"],
            "model_load_error",
            "Model architectures ['TTLlamaForCausalLM'] are not supported",
        ),
        # Kind 4: huggingface_hub's exceptions (errors.py; utils/_http.py:284 f"Cannot reach {request.url}: offline mode is enabled. ...").
        (
            [f"huggingface_hub.utils._http.OfflineModeIsEnabled: Cannot reach {_HUB_URL}: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable."],
            "model_load_error",
            "OfflineModeIsEnabled",
        ),
        ([f"huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach {_HUB_URL}/revision/main: offline mode is enabled."], "model_load_error", None),
        (
            ["ERROR 01-01 00:00:00 [core.py:1] EngineCore failed to start.", "huggingface_hub.errors.RevisionNotFoundError: 404 Client Error. (Request ID: Root=1-6)"],
            "model_load_error",
            "RevisionNotFoundError",
        ),
        (["huggingface_hub.errors.RemoteEntryNotFoundError: 404 Client Error. Entry Not Found for url: https://huggingface.co/m/x/resolve/main/config.json."], "model_load_error", None),
        (["[2026-01-01 00:00:00 TP0] Scheduler hit an exception: huggingface_hub.errors.DisabledRepoError: Access to this resource is disabled."], "model_load_error", None),
        (["huggingface_hub.errors.NotASafetensorsRepoError: 'm/x' does not contain a 'model.safetensors' file."], "model_load_error", None),
        # Kind 4: a paste that lost its newlines runs a serving line and an error's header into one line (batch9's
        # real line, shortened): it is examined, not skipped as serving.
        (
            [
                'INFO: 192.168.66.179:11149 - "POST /v1/chat/completions HTTP/1.1" 200 OK INFO 02-10 15:09:45 engine.py:275] Added request chatcmpl-c7fb. '
                "ERROR 02-10 15:10:20 serving_chat.py:193] Error in preprocessing prompt inputs ERROR 02-10 15:10:20 serving_chat.py:193] Traceback (most recent call last):"
            ],
            "unknown",
            "Error in preprocessing prompt inputs",
        ),
        (
            ['INFO:     127.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'],
            "cuda_oom",
            None,
        ),
        # Kind 5: a traceback inside CUDA graph capture's own frames (SGLang 0.3 cuda_graph_runner.py `capture`,
        # `capture_one_batch_size`; 0.5.23 decode_cuda_graph_runner.py; vLLM's `capture_model`), its exception cut.
        (
            [
                "[2024-10-22 06:31:49 TP0] Capture cuda graph begin. This can take up to several minutes.",
                "[2024-10-22 06:31:49 TP0] Traceback (most recent call last):",
                '  File "/home/ubuntu/.local/lib/python3.10/site-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 212, in capture',
                "    ) = self.capture_one_batch_size(bs, forward)",
                '  File "/x/sglang/srt/layers/attention/flashinfer_backend.py", line 452, in call_begin_forward',
            ],
            "cuda_graph_error",
            "cuda_graph_runner.py",
        ),
        (['[rank0]:   File "/sgl/python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", line 590, in capture_one_batch_size'], "cuda_graph_error", None),
        (
            [
                'ERROR 01-01 00:00:00 [core.py:1]   File "/v/vllm/v1/worker/gpu_model_runner.py", line 6592, in capture_model',
                'ERROR 01-01 00:00:00 [core.py:1]   File "/v/vllm/v1/worker/gpu_model_runner.py", line 6601, in _capture_cudagraphs',
            ],
            "cuda_graph_error",
            "capture_model",
        ),
        (['  File "/v/vllm/worker/model_runner.py", line 854, in capture_model'], "cuda_graph_error", None),
        # ... but the exception it ends in, when the log keeps it, is the cause (an OOM, an NCCL error inside capture).
        (['  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 233, in capture_one_batch_size', OOM], "cuda_oom", None),
        (['  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 233, in capture', "RuntimeError: NCCL error: unhandled cuda error"], "nccl_error", None),
    ],
)
def test_batch9_kinds_from_their_sources(lines: list[str], failure_class: str, evidence: str | None) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class, diagnosis.evidence
    if evidence is not None:
        assert evidence in diagnosis.evidence[0].text, diagnosis.evidence


# Kind 2: start-up steps of old vLLM and of SGLang, each from its source's format string; a log that stops there
# reads as a stall (a step under way) or `unknown` with its stop point (between steps).
@pytest.mark.parametrize(
    ("lines", "failure_class", "evidence"),
    [
        # vLLM 0.4.3 worker/model_runner.py:854 (batch9's real line) and executor/gpu_executor.py:83.
        (
            [
                "INFO 08-19 07:51:08 distributed_gpu_executor.py:56] # GPU blocks: 22982, # CPU blocks: 6241",
                "(VllmWorkerProcess pid=13109) INFO 08-19 07:51:12 model_runner.py:1024] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.",
            ],
            "server_start_timeout",
            "stalled at: capturing CUDA graphs",
        ),
        (["INFO 04-13 12:07:32 gpu_executor.py:94] # GPU blocks: 34032, # CPU blocks: 2048"], "unknown", "last startup step: done profiling memory for the KV cache"),
        (["INFO 10-01 00:00:00 executor_base.py:110] # cuda blocks: 4100, # CPU blocks: 512"], "unknown", "last startup step: done profiling memory for the KV cache"),
        # 0.7.3's first lines (platforms/__init__.py, api_server.py "vLLM API server version %s"); 0.4.3 llm_engine.py:162.
        (
            ["INFO 02-27 19:28:10 __init__.py:207] Automatically detected platform cuda.", "INFO 02-27 19:28:10 api_server.py:912] vLLM API server version 0.7.3"],
            "unknown",
            "last startup step: the start's first lines",
        ),
        (["INFO 06-28 23:40:03 llm_engine.py:164] Initializing an LLM engine (v0.5.0.post1) with config: model='m'"], "unknown", "last startup step: the start's first lines"),
        (["(EngineCore_DP0 pid=1) INFO 05-12 10:11:12 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: model='m'"], "unknown", "last startup step: the start's first lines"),
        # SGLang: the ranks join the broadcast queue (shm_broadcast.py "Connecting to %s", batch9's real line).
        (
            ["[2025-06-23 15:07:01 TP6] Connecting to tcp://127.0.0.1:57063", "[2025-06-23 15:07:01 TP3] Connecting to tcp://[fd00::1]:57063"],
            "server_start_timeout",
            "stalled at: connecting the ranks' message queues",
        ),
        # DeepSeek's shared-expert fusion bar (0.4.6 deepseek_v2.py:1649): the last bar of a run-together line decides.
        (["Cloning 16 replicas of the shared expert into MoE:  97%|#########7| 56/58 [00:43<00:01,  1.30it/s]"], "server_start_timeout", "stalled at: cloning the shared expert"),
        (
            ["Cloning 8 replicas of the shared expert into MoE:  98%|#| 57/58 [00:44<00:00,  1Cloning 8 replicas of the shared expert into MoE: 100%|#| 58/58 [00:44<00:00,  1"],
            "unknown",
            "last startup step: done cloning the shared expert",
        ),
        (
            ["Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00]Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01]"],
            "server_start_timeout",
            "stalled at: loading weights",
        ),
        # A line per checkpoint tensor (batch9's real line; printed by a user's load_weights, not by SGLang).
        (["Loading model.layers.25.block_sparse_moe.experts.5.w3.weight", "Loading model.layers.25.block_sparse_moe.experts.6.w1.weight"], "server_start_timeout", "stalled at: loading weights"),
    ],
)
def test_old_vllm_and_sglang_start_up_steps(lines: list[str], failure_class: str, evidence: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and evidence in diagnosis.evidence[0].text, diagnosis.evidence


@pytest.mark.parametrize(
    "lines",
    [
        # The new words on healthy starts: a start that goes on to ready, and prose naming an exception.
        [
            "INFO 02-27 19:28:10 __init__.py:207] Automatically detected platform cuda.",
            "INFO 06-28 23:40:04 llm_engine.py:164] Initializing an LLM engine (v0.5.0) with config: model='m'",
            "INFO 06-28 23:40:20 gpu_executor.py:83] # GPU blocks: 2048, # CPU blocks: 512",
            "INFO 06-28 23:40:21 model_runner.py:854] Capturing the model for CUDA graphs. This may lead to unexpected consequences.",
            "INFO 06-28 23:40:30 model_runner.py:900] Graph capturing finished in 9 secs.",
            "INFO 06-28 23:40:31 api_server.py:200] Available routes are:",
        ],
        ["[2025-06-23 15:07:01 TP0] Connecting to tcp://127.0.0.1:57063", READY],
        ["INFO 01-01 00:00:00 [utils.py:1] Set HF_HUB_OFFLINE=1 to avoid OfflineModeIsEnabled warnings in tests", READY],
        # A serving line without an error head is still skipped whole.
        ['INFO:     127.0.0.1:5 - "POST /v1/errors_report HTTP/1.1" 200 OK', READY],
    ],
)
def test_the_batch9_words_on_healthy_lines_stay_quiet(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class is None


# batch10-heldout: 7 real logs from 5 threads and 2 CI-executed docs notebooks no other manifest names, committed (d26ffff)
# before fleet read them, measured once untouched with the batch9 rules (benchmarks/results/diagnose-heldout.md).
BATCH10_HELDOUT = REAL.parent / "batch10-heldout"


def test_batch10_keeps_its_tune_figure() -> None:
    """7 real logs (5 vLLM, 2 SGLang): 0/7 right from the bare log, measured once untouched (argparse's refusals read
    healthy, the warning-level docs starts `unknown`); 7/7 after the rules of its two miss kinds (the tests below). A
    tune split since: batch11-heldout is the held-out set. A floor, not a file check."""
    entries = _manifest(BATCH10_HELDOUT)
    assert all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH10_HELDOUT, 7) >= 7


# -- batch10's miss kinds as class rules, each from the source that prints the text (issue 27) ----------
# Kind 1: CPython's ArgumentParser.error, "%(prog)s: error: %(message)s" then exit 2 (Lib/argparse.py:2630). The first
# three are batch10's real lines; the others are built from argparse's message formats (:776, :2142, :2199, :2263).
@pytest.mark.parametrize(
    ("lines", "refused"),
    [
        (["usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", "vllm: error: unrecognized arguments: --omni"], "--omni"),
        (["vllm serve: error: argument --dtype: invalid choice: 'torch.bfloat16' (choose from 'auto', 'bfloat16', 'float', 'float16')"], "--dtype"),
        (["launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2"], "--reasoning_parser kimi_k2"),
        (["launch_server.py: error: the following arguments are required: --model-path"], "--model-path"),
        (["vllm serve: error: argument --tensor-parallel-size/-tp: expected one argument"], "--tensor-parallel-size/-tp"),
        (["launch_server.py: error: ambiguous option: --cuda-graph-max-bs=8 could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"], "--cuda-graph-max-bs"),
        (["vllm-1  | vllm serve: error: argument --max-model-len: invalid int value: '32k'"], "--max-model-len"),
        (["2026-01-01T00:00:00.123456789Z sglang serve: error: argument --tp-size: invalid int value: 'two'"], "--tp-size"),
    ],
)
def test_argparse_refusing_the_command_line_is_a_process_failure_naming_the_argument(lines: list[str], refused: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and diagnosis.fix is not None and f"refused '{refused}'" in diagnosis.fix, diagnosis
    assert [signature.name for signature in signatures_in(lines[-1])] == ["arguments_refused"]  # the agent stops on it


@pytest.mark.parametrize(
    "line",
    [
        # Other tools' "<name>: error: ..." lines are not argparse's messages.
        "ld.lld: error: unable to find library -lcudart",
        "nvcc fatal   : Unsupported gpu architecture 'compute_120a'",
        "/tmp/x.cpp:12:3: error: unrecognized arguments: --foo",
        "INFO 01-01 00:00:00 [api_server.py:1] args: Namespace(model='m', dtype='auto')",
    ],
)
def test_other_error_lines_are_not_argparse_refusals(line: str) -> None:
    assert "arguments_refused" not in [signature.name for signature in signatures_in(line)]


# Kind 2: SGLang at `--log-level warning` prints neither its step lines nor a ready line, only tqdm's capture bars
# (0.5.6 piecewise_cuda_graph_runner.py:393 "Capturing num tokens ({num_tokens=} {avail_mem=:.2f} GB)", cuda_graph_runner.py:474
# "Capturing batches ({bs=} {avail_mem=:.2f} GB)"; 0.5.23 tc_piecewise_cuda_graph_backend.py:207 "Compiling num tokens
# ({num_tokens=})", prefill_cuda_graph_runner.py:1734 "Capturing prefill shape (...)") and, once it serves, warnings
# raised inside a request's handler, which quote fastapi's `response = await f(request)` (routing.py:120).
_BAR = "  0%|          | 0/58 [00:00<?, ?it/s]"
_FASTAPI_WARNING = [
    "/usr/local/lib/python3.10/dist-packages/fastapi/routing.py:120: FastAPIDeprecationWarning: ORJSONResponse is deprecated, FastAPI now serializes data directly to JSON bytes",
    "  response = await f(request)",
]


@pytest.mark.parametrize(
    ("bars", "failure_class", "evidence"),
    [
        ([f"{_BAR}Capturing num tokens (num_tokens=8192 avail_mem=137.42 GB):   0%|          | 0/58 [00:00<?, ?it/s]"], "server_start_timeout", "stalled at: capturing piecewise CUDA graphs"),
        (
            [f"{_BAR}Capturing num tokens (num_tokens=8 avail_mem=136.56 GB):  97%|#| 56/58 [00:01<00:00]Capturing num tokens (num_tokens=4 avail_mem=136.56 GB): 100%|#| 58/58 [00:01<00:00]"],
            "unknown",
            "last startup step: done capturing piecewise CUDA graphs",
        ),
        ([f"{_BAR}Compiling num tokens (num_tokens=7680):   2%|1         | 1/58 [00:02<02:32,  2.67s/it]"], "server_start_timeout", "stalled at: compiling piecewise CUDA graphs"),
        (["Capturing batches (bs=160 avail_mem=20.12 GB):  35%|###5      | 13/37 [00:05<00:09]"], "server_start_timeout", "stalled at: capturing CUDA graphs"),
        (["Capturing prefill shape (num_tokens=4096 avail_mem=60.02 GB):  10%|#         | 2/20 [00:01<00:10]"], "server_start_timeout", "stalled at: capturing prefill CUDA graphs"),
    ],
)
def test_sglangs_capture_bars_are_start_up_steps(bars: list[str], failure_class: str, evidence: str) -> None:
    lines = ["Multi-thread loading shards: 100% Completed | 1/1 [00:00<00:00,  6.50it/s]", *bars]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and evidence in diagnosis.evidence[0].text, diagnosis.evidence


@pytest.mark.parametrize(
    "answered",
    [
        _FASTAPI_WARNING,
        # starlette's own request_response (1.7 routing.py:62) quotes the same statement; a warning of another category.
        ["/usr/lib/python3/site-packages/starlette/routing.py:62: DeprecationWarning: x is deprecated", "    response = await f(request)"],
    ],
)
def test_a_request_answered_proves_a_warning_level_start_came_up(answered: list[str]) -> None:
    start = [
        "Multi-thread loading shards: 100% Completed | 5/5 [00:02<00:00,  1.50it/s]",
        f"{_BAR}Capturing num tokens (num_tokens=4 avail_mem=136.56 GB): 100%|#| 58/58 [00:01<00:00]",
    ]
    assert diagnose_text(start).failure_class == "unknown"  # cut after capture, nothing after it: the convention
    assert diagnose_text([*start, *answered]).failure_class is None
    # ... with the weights loaded and no bar at all (batch10's vision start).
    assert diagnose_text([start[0], *answered]).failure_class is None
    # A failure the start met is still that failure.
    assert diagnose_text([*start, *answered, OOM]).failure_class == "cuda_oom"


# batch11-heldout: 43 real logs from 43 threads no other manifest names, under batch9's selection rule, committed (5da6362)
# before fleet read them and measured once untouched with the batch10 rules (benchmarks/results/diagnose-heldout.md).
BATCH11_HELDOUT = REAL.parent / "batch11-heldout"


def test_batch11_keeps_its_tune_figure() -> None:
    """43 real logs (23 SGLang, 20 vLLM): 17/43 right (failures 13/39) from the bare log, measured once untouched;
    22/43 after the rules of its miss kinds 2-4 (the tests below). A tune split since: batch12-heldout is the held-out
    set. A floor, not a file check."""
    entries = _manifest(BATCH11_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 23 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH11_HELDOUT, 43) >= 22


# -- batch11's miss kinds as class rules, each from the source that prints the text (issue 27) ----------
# Kind 2: launcher prefixes, stripped before a line is read. The first case of each is batch11's real text; the others
# are built from the launcher's format: docker compose's `{container name padded} | `, FastChat's logger
# "%(asctime)s | %(levelname)s | %(name)s | %(message)s" (its worker's stderr as the logger "stderr"), Open MPI's
# `--tag-output` "[%s,%s]<%s>:" (ORTE; PMIx adds a space) after `--timestamp-output`'s ctime, a viewer's short stamp.
_FASTCHAT = "qanything-container-local  | 2024-02-20 21:46:23 | ERROR | stderr | "
_MPIRUN = "Thu Jan 23 11:55:50 2025[1,1]<stderr>:"
_PREFIXED_FRAMES = [
    [_FASTCHAT + '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/llm_engine.py", line 795, in _run_workers', _FASTCHAT + "    driver_worker_output = getattr(self.driver_worker,"],
    ["api  | 2025-01-01 00:00:00 | ERROR | stderr | " + '  File "/x/fastchat/serve/vllm_worker.py", line 3, in <module>'],
    [_MPIRUN + "    scheduler.event_loop_overlap()", _MPIRUN + '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/_contextlib.py", line 116, in decorate_context'],
    ['[1,0]<stderr>:  File "/x/sglang/srt/managers/scheduler.py", line 489, in event_loop_overlap'],
    ['[1,0]<stderr>:   File "/x/sglang/srt/managers/scheduler.py", line 489, in event_loop_overlap'],
    ['04-20 13:32:25.784  File "/app/sglang/python/sglang/srt/managers/scheduler.py", line 3770, in run_scheduler_process', "04-20 13:32:25.784    scheduler = Scheduler("],
    # A frame line a paste split in two (batch11's real pair, then one built from CPython's '  File "{}", line {}, in {}').
    [
        '(VllmWorker rank=0 pid=2699411) ERROR 08-11 10:45:36 [multiproc_executor.py:511]   File "/environments/venv/lib64/python3.11/site-packages/vllm/distributed/parallel_state.py"',
        ", line 1121, in ensure_model_parallel_initialized",
    ],
    ['  File "/x/vllm/distributed/parallel_state.py"', ", line 1063, in initialize_model_parallel"],
]


@pytest.mark.parametrize("lines", _PREFIXED_FRAMES)
def test_frames_under_a_launchers_prefix_or_split_by_a_paste_are_frames(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and 'File "' in diagnosis.evidence[0].text, diagnosis.evidence


@pytest.mark.parametrize(
    ("line", "failure_class"),
    [
        (_FASTCHAT + "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100-PCIE-16GB GPU has compute capability 7.0.", "unsupported_gpu_arch"),
        (_MPIRUN + "ImportError: /usr/local/lib/python3.10/dist-packages/sgl_kernel/ops/_kernels.so: undefined symbol: cuModuleGetFunction", "import_error"),
        ("[1,0]<stderr>: [2025-01-23 11:55:50 TP0] Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda_oom"),
        ("04-20 13:32:25.784KeyError: 'model.layers.0.self_attn.kv_a_proj_with_mqa.weight'", "unknown"),
    ],
)
def test_a_launchers_prefix_does_not_hide_the_failure(line: str, failure_class: str) -> None:
    assert diagnose_text([line]).failure_class == failure_class


@pytest.mark.parametrize(
    "lines",
    [
        # A healthy start under the same prefixes stays healthy; a word before " | " is only a prefix.
        [_FASTCHAT + "INFO 02-20 21:46:20 llm_engine.py:70] Initializing an LLM engine with config: model='m'", "sglang-1  | " + READY],
        [_MPIRUN + READY],
        ["Model | tok/s", 'INFO:     127.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK'],
    ],
)
def test_launcher_prefixes_on_healthy_lines_stay_quiet(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class is None


# vLLM's worker `_check_if_gpu_supports_dtype` raises only the bfloat16 refusal (0.2-0.4 worker/worker.py; 0.6-0.8 through
# current_platform.has_device_capability(80)): frames that reach it are that refusal.
@pytest.mark.parametrize(
    "lines",
    [
        [
            _FASTCHAT + '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 71, in init_model',
            _FASTCHAT + "    _check_if_gpu_supports_dtype(self.model_config.dtype)",
            _FASTCHAT + '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 231, in _check_if_gpu_supports_dtype',
        ],
        ['(RayWorkerWrapper pid=7, ip=10.0.0.2)   File "/x/vllm/worker/worker.py", line 480, in _check_if_gpu_supports_dtype'],
        ['ERROR 01-01 00:00:00 engine.py:1]   File "/x/vllm/worker/worker.py", line 99, in _check_if_gpu_supports_dtype'],
    ],
)
def test_frames_in_vllms_bfloat16_check_are_the_gpu_refusing_bfloat16(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch" and diagnosis.fix is not None and "--dtype=half" in diagnosis.fix


def test_the_bfloat16_checks_caller_alone_names_nothing() -> None:
    # The caller's quoted line is no frame of the check: only frames that reach it count.
    assert diagnose_text(['  File "/x/vllm/worker/worker.py", line 71, in init_model', "    _check_if_gpu_supports_dtype(self.model_config.dtype)"]).failure_class == "unknown"


# Kind 3: a request answered proves the start came up. uvicorn's access line '%s - "%s %s HTTP/%s" %d' with its
# formatter's status phrase; SGLang's watchdog dump of the batch it was running (scheduler.py watchdog_thread,
# f"{self.cur_batch.batch_size()=}, ..."). A watchdog then ends a serving hang: unknown, not a start timeout.
_WATCHDOG = "[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)"


@pytest.mark.parametrize(
    "lines",
    [
        ['[2025-08-02 19:24:26] INFO:     172.16.19.148:37398 - "POST /v1/completions HTTP/1.1" 200 OK', _WATCHDOG],
        ["[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=70.00 GB", 'INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK', _WATCHDOG],
        [
            "INFO - flashinfer.  jit: Loading JIT ops: cascade",
            "[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)",
            "[2025-06-22 16:13:55 TP0] self.cur_batch.batch_size()=26,  self.cur_batch.reqs=[Req(rid=d4424f3eb90345f0a863068978c0f17c......................",
        ],
        # The 0.5 form puts the dump on lines of its own, before the timeout line.
        [
            "[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=70.00 GB",
            "[2026-01-01 00:30:00 TP0] self.cur_batch.batch_size()=3",
            "[2026-01-01 00:30:00 TP0] self.cur_batch.reqs=[Req(rid=1)]",
            _WATCHDOG,
        ],
    ],
)
def test_a_watchdog_after_a_request_was_answered_is_a_serving_hang(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown", diagnosis.evidence


def test_an_empty_batch_or_a_refused_request_proves_no_serving() -> None:
    load = "[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=70.00 GB"
    assert diagnose_text([load, "[2026-01-01 00:30:00 TP0] self.cur_batch.batch_size()=0", _WATCHDOG]).failure_class == "server_start_timeout"
    assert diagnose_text([load, 'INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 503 Service Unavailable', _WATCHDOG]).failure_class == "server_start_timeout"


def test_a_log_cut_after_a_request_was_answered_is_no_failure() -> None:
    lines = ["[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=70.00 GB", 'INFO:     10.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK']
    assert diagnose_text(lines).failure_class is None


# Kind 4: vLLM's registry, logger.exception("Error in inspecting model architecture '%s'", model_arch) (0.33
# model_executor/models/registry.py:1164), and the warning that vLLM's compiled ops did not import ("Failed to import
# from vllm._C with %r", 0.4-0.6 _custom_ops.py; 0.33 platforms/cpu.py "Failed to import from vllm._C: %s", repr(e)).
@pytest.mark.parametrize(
    ("lines", "failure_class"),
    [
        (
            [
                "ERROR 10-26 11:35:32 registry.py:267] Error in inspecting model architecture 'LlamaForCausalLM'",
                "ERROR 10-26 11:35:32 registry.py:267] Traceback (most recent call last):",
                "ERROR 10-26 11:35:32 registry.py:267] subprocess.CalledProcessError: Command '['python.exe', '-m', 'vllm.model_executor.models.registry']' returned non-zero exit status 1.",
            ],
            "model_load_error",
        ),
        (["(EngineCore pid=1) ERROR 01-01 00:00:00 [registry.py:1164] Error in inspecting model architecture 'Qwen3ForCausalLM'"], "model_load_error"),
        (
            [
                "WARNING 03-19 00:20:58 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('dlopen(/Users/q/vllm/_C.abi3.so, 0x0002): Symbol not found: __ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv')",
                "INFO 03-19 00:20:58 [parallel_state.py:967] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0",
                "[rank0]: Traceback (most recent call last):",
                '[rank0]:   File "<frozen runpy>", line 198, in _run_module_as_main',
            ],
            "import_error",
        ),
        (["WARNING 08-27 13:59:59 _custom_ops.py:15] Failed to import from vllm._C with ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')"], "import_error"),
        (["WARNING 01-01 00:00:00 [cpu.py:671] Failed to import from vllm._C: ModuleNotFoundError(\"No module named 'vllm._C'\")", "[rank0]: Traceback (most recent call last):"], "import_error"),
    ],
)
def test_batch11_vllm_lines_from_their_sources(lines: list[str], failure_class: str) -> None:
    assert diagnose_text(lines).failure_class == failure_class


def test_the_c_extension_warning_on_a_start_that_came_up_stays_quiet() -> None:
    warning = "WARNING 01-01 00:00:00 [cpu.py:671] Failed to import from vllm._C: ImportError('libcudart.so.12: cannot open shared object file')"
    assert diagnose_text([warning, "INFO 01-01 00:00:09 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"]).failure_class is None
    assert diagnose_text([warning, READY]).failure_class is None


# vLLM's checkpoint prefetch into the page cache (0.33 weight_utils.py:1079 "Prefetching checkpoint files: %d%% (%d/%d)",
# :1102 "Prefetching checkpoint files into page cache finished in %.2fs") is a start-up step.
@pytest.mark.parametrize(
    ("lines", "failure_class", "evidence"),
    [
        (
            [
                "[2026-08-30T12:56:36Z] (StageEngineCoreProc_stage0_replica0 pid=12964) INFO 08-30 12:56:36 [weight_utils.py:792] Prefetching checkpoint files: 30% (3/4)",
                "[2026-08-30T12:56:37Z] (StageEngineCoreProc_stage0_replica0 pid=12964) INFO 08-30 12:56:37 [weight_utils.py:815] Prefetching checkpoint files into page cache finished in 18.81s",
            ],
            "unknown",
            "last startup step: done prefetching the checkpoint files",
        ),
        (["(EngineCore pid=1) INFO 01-01 00:00:00 [weight_utils.py:1079] Prefetching checkpoint files: 30% (3/10)"], "server_start_timeout", "stalled at: prefetching the checkpoint files"),
        (["(EngineCore pid=1) INFO 01-01 00:00:00 [weight_utils.py:1079] Prefetching checkpoint files: 100% (10/10)"], "unknown", "last startup step: done prefetching"),
    ],
)
def test_vllms_checkpoint_prefetch_is_a_start_up_step(lines: list[str], failure_class: str, evidence: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and evidence in diagnosis.evidence[0].text, diagnosis.evidence


# batch12-heldout: 33 real logs from 33 threads no other manifest names, under batch9's rule with failure posts taken only
# where the stored copy reaches the failure line, committed (e2dd845) before fleet read them and measured once untouched
# with the batch11 rules (benchmarks/results/diagnose-heldout.md).
BATCH12_HELDOUT = REAL.parent / "batch12-heldout"


def test_batch12_keeps_its_tune_figure() -> None:
    """33 real logs (14 SGLang, 19 vLLM): 25/33 right (failures 20/28; 25/28 where the excerpt shows the cause) from the
    bare log, measured once untouched; 28/33 after the rules of its miss kinds 2 and 3 (the tests below) and the PD
    transfer log relabelled healthy (27/33 under its label as collected). A tune split since: batch13-heldout is the
    held-out set. A floor, not a file check."""
    entries = _manifest(BATCH12_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 28 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH12_HELDOUT, 33) >= 29  # round twenty-five: the reading since round twenty-four


# -- batch12's miss kinds as class rules, each from the source that prints the text (issue 27, round eight) -------
# Kind 2: SGLang's registries skip a module whose import failed (0.5.23 models/registry.py:132, managers/
# multimodal_processor.py:24: logger.warning(f"Ignore import error when loading {name}: {e}")); a refusal of an
# architecture that module defines (multimodal_processor.py:86 f"No processor registered for architecture:
# {hf_config.architectures}.", models/registry.py:64 f"Model architectures {architectures} are not supported for now. ")
# is that import failing. The first case is batch12's real pair; the others are built from the format strings.
def _skip(module: str, error: str) -> str:
    return f"[2025-06-03 12:29:18] Ignore import error when loading {module}: {error}"


@pytest.mark.parametrize(
    ("lines", "evidence"),
    [
        (
            [
                "[2025-06-03 12:29:18] Ignore import error when loading sglang.srt.managers.multimodal_processors.qwen_vl: Can not import sgl_kernel. Please check your installation.",
                "ValueError: No processor registered for architecture: ['Qwen2_5_VLForConditionalGeneration'].",
            ],
            "multimodal_processors.qwen_vl",
        ),
        (
            [
                _skip("sglang.srt.models.glm_ocr", "No module named 'transformers.models.glm_ocr'"),
                _skip("sglang.srt.models.qwen3_next", "cannot import name 'Qwen3NextConfig' from 'transformers'"),
                _skip("sglang.srt.models.deepseek_v2", "libcudart.so.13: cannot open shared object file: No such file or directory"),
                _skip("sglang.srt.models.mllama4", "No module named 'flashinfer'"),
                "[2026-01-01 00:00:05] Scheduler hit an exception: Traceback (most recent call last):",
                "ValueError: Model architectures ['DeepseekV3ForCausalLM'] are not supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])",
            ],
            "models.deepseek_v2",
        ),
        (
            [
                _skip("sglang.srt.models.qwen3_vl", "No module named 'flash_attn'"),
                "[2026-01-01 00:00:05 TP0] ValueError: No processor registered for architecture: ['Qwen3VLForConditionalGeneration'].\nRegistered",
            ],
            "models.qwen3_vl",
        ),
    ],
)
def test_a_refused_architecture_whose_module_failed_to_import_is_an_import_error(lines: list[str], evidence: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error" and evidence in diagnosis.evidence[0].text, diagnosis.evidence
    assert "architecture" in diagnosis.evidence[1].text


def test_skip_lines_kept_as_evidence_are_bounded() -> None:
    """A log is a host's file: 5,000 distinct skip lines keep at most classify's bound of examples (a
    registry's size), and a skip among the first of them still explains the refusal."""
    from fleet.host.diagnose import classify

    lines = [_skip("sglang.srt.models.qwen3_vl", "No module named 'flash_attn'")]
    lines += [_skip(f"sglang.srt.models.filler{i}", f"No module named 'pkg{i}'") for i in range(5000)]
    scan = classify._Scanner()
    scan.scan(io.BytesIO("\n".join(lines).encode() + b"\n"))
    [hits] = [hits for (_, name), hits in scan.hits.items() if name == "import_skipped"]
    assert hits.count == 5001 and len(hits.examples) == len(hits.messages) == classify._EVERY_EXAMPLE_LIMIT
    refused = "ValueError: No processor registered for architecture: ['Qwen3VLForConditionalGeneration']."
    assert diagnose_text([*lines, refused]).failure_class == "import_error"


def test_the_missing_module_a_skip_line_names_is_in_the_fix() -> None:
    lines = [_skip("sglang.srt.models.qwen3_vl", "No module named 'flash_attn'"), "ValueError: No processor registered for architecture: ['Qwen3VLForConditionalGeneration']."]
    assert "'flash_attn'" in (diagnose_text(lines).fix or "")


@pytest.mark.parametrize(
    "error",
    ["Can not import sgl_kernel. Please check your installation.", "libcuda.so.1: cannot open shared object file: No such file or directory", "No module named 'transformers.models.glm_ocr'"],
)
def test_a_skip_line_on_a_start_that_serves_is_no_failure(error: str) -> None:
    diagnosis = diagnose_text([_skip("sglang.srt.models.glm_ocr", error), "[2026-01-01 00:00:01 TP0] Load weight begin. avail mem=70.00 GB", READY])
    assert diagnosis.failure_class is None and [finding.name for finding in diagnosis.findings] == ["import_skipped"]


def test_a_skip_of_another_models_module_does_not_explain_a_refusal() -> None:
    refusal = "ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM']"
    assert diagnose_text([_skip("sglang.srt.models.glm_ocr", "No module named 'x'"), refusal]).failure_class == "model_load_error"
    # Printed after the refusal, a skip line is no cause of it; a refusal alone is the model's.
    assert diagnose_text([refusal, _skip("sglang.srt.models.foo", "No module named 'x'")]).failure_class == "model_load_error"
    assert diagnose_text(["ValueError: No processor registered for architecture: ['FooForConditionalGeneration']."]).failure_class == "model_load_error"


# Kind 3: vLLM V1 sizes its KV cache after profiling memory (0.33 v1/core/kv_cache_utils.py:1147-1154 "%s KV cache
# size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"; 0.7 printed the halves as two lines, :524 and
# :527): a start-up step, done, with CUDA graphs and warm-up after it. A log cut there is a start cut between steps.
@pytest.mark.parametrize(
    "lines",
    [
        ["INFO 02-19 23:56:55 kv_cache_utils.py:524] GPU KV cache size: 2,042,016 tokens", "INFO 02-19 23:56:55 kv_cache_utils.py:527] Maximum concurrency for 2,048 tokens per request: 997.08x"],
        ["(EngineCore_DP0 pid=1707016) INFO 01-01 00:00:00 [kv_cache_utils.py:1149] GPU KV cache size: 1,234,567 tokens, Maximum concurrency for 32,768 tokens per request: 37.68x"],
        ["(EngineCore pid=9) INFO 01-01 00:00:00 [kv_cache_utils.py:1149] GPU + host KV cache size: 10 tokens, Maximum concurrency for 8 tokens per request: 1.25x"],
    ],
)
def test_vllms_kv_cache_sizing_is_a_start_up_step(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and diagnosis.evidence[0].text == "last startup step: done sizing the KV cache", diagnosis.evidence
    ready = "(EngineCore pid=9) INFO 01-01 00:01:00 [core.py:413] init engine (profile, create kv cache, warmup model) took 60.00 seconds"
    assert diagnose_text([*lines, ready]).failure_class is None


# PD decode's "Decode transfer failed for request rank={tp_rank} {rid=} {bootstrap_room=} with exception {e}" (0.5.23
# disaggregation/decode.py:2864-2884) aborts that request with HTTP 500 and goes on serving: a finding, not a failure
# (the relabelling's reasoning is in benchmarks/results/diagnose-heldout.md).
def test_a_failed_kv_transfer_on_a_serving_decode_server_is_a_finding() -> None:
    lines = [
        "[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce84ffb82764f45b028dd8e6c4beed1' decode_req.req.bootstrap_room=1655955501905217457 with exception KVTransferError(bootstrap_room=1655955501905217457): Failed due to an unknown reason from another rank",
        "[2026-01-01 00:00:00 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='a' decode_req.req.bootstrap_room=7",
        '[2025-09-17 16:23:13] INFO:     10.10.11.1:41698 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class is None and [(finding.name, finding.count) for finding in diagnosis.findings] == [("kv_transfer_failed", 2)]


# batch13-heldout: 42 real logs from 42 threads and pages no other manifest names (four beyond GitHub issues: SGLang's
# docs, three blog posts), under batch12's rule, committed (f9e14a7) before fleet read them and measured once untouched
# with the round-eight rules (benchmarks/results/diagnose-heldout.md).
BATCH13_HELDOUT = REAL.parent / "batch13-heldout"


def test_batch13_keeps_its_tune_figure() -> None:
    """42 real logs (19 SGLang, 23 vLLM): 28/42 right (failures 23/36; 28/39 where the excerpt shows the cause) from the
    bare log, measured once untouched; 39/42 (33/36; 39/39) after the rules of its miss kinds 2-7 (the tests below).
    A tune split since: batch14-heldout is the held-out set. A floor, not a file check."""
    entries = _manifest(BATCH13_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 39 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH13_HELDOUT, 42) >= 40  # round twenty-five: the reading since round twenty-four


# -- batch13's miss kinds as class rules, each from the source that prints the text (issue 27, round nine) -------
# Kind 2: a fatal line outside the engines' log formats. A C++ runtime's error or fatal level in its own format (glog's
# "Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg", Ray's spdlog "[%Y-%m-%d %H:%M:%S,%e %L %P %t] %v") is an error no class
# names; vLLM's "died unexpectedly" lines are a process gone, whatever prefix an application's logging format gives them.
@pytest.mark.parametrize(
    "line",
    [
        # batch13's real lines
        "(EngineCore_DP0 pid=322563) (raylet, ip=172.27.221.101) [2025-12-12 15:10:48,697 C 42791 42791] (raylet) experimental_mutable_object_provider.cc:153:  An unexpected system state has occurred. You have likely discovered a bug in Ray.",
        "[2025-02-19 13:33:40,672 E 15244 15244] core_worker.cc:496: Failed to register worker to Raylet: IOError: [RayletClient] Unable to register worker with raylet. Failed to read data from the socket: End of file",
        "E0417 19:46:42.567034   481 store_py.cpp:191] Failed to mount segment: UNKNOWN_ERROR",
        # variants from the format strings: glog 0.7's year, a FATAL CHECK, Ray's C level with no tag
        "E20250417 19:46:42.567034   481 transfer_engine.cpp:77] Failed to install transport",
        "F0417 19:46:42.567034   481 rdma_context.cpp:12] Check failed: device != nullptr",
        "[2026-01-01 00:00:00,001 C 1 2] gcs_client.h:10: Check failed: status.ok()",
    ],
)
def test_a_native_runtimes_error_level_is_an_unexplained_failure(line: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "unknown" and line.endswith(diagnosis.evidence[0].text.split("] ")[-1][-20:]), diagnosis.evidence
    assert [signature.name for signature in signatures_in(line)] == ["runtime_error_logged"]


@pytest.mark.parametrize(
    "line",
    [
        # Info and warning levels, a Python frame naming a .cc file, an engine line quoting a source path
        "I0417 19:46:42.567034   481 store_py.cpp:191] Mounted segment",
        "W0417 19:46:42.567034   481 store_py.cpp:191] Slow mount",
        "[2026-01-01 00:00:00,001 I 1 2] core_worker.cc:496: Registered worker",
        "[2026-01-01 00:00:00,001 W 1 2] core_worker.cc:496: Retrying",
        "[2026-01-01 00:00:00 TP0] compiling kernel.cu: 12 registers",
    ],
)
def test_a_native_runtimes_other_levels_prove_nothing(line: str) -> None:
    assert "runtime_error_logged" not in [signature.name for signature in signatures_in(line)]


@pytest.mark.parametrize(
    "line",
    [
        "2025-11-02 13:17:04,315 - vllm.v1.engine.core_client - ERROR - Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
        "(APIServer pid=1) ERROR 01-01 00:00:00 [core_client.py:564] Engine core proc EngineCore_DP1 died unexpectedly, shutting down client.",
        "RuntimeError: Engine core process EngineCore_DP0 died unexpectedly.",
        "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [multiproc_executor.py:381] Worker proc VllmWorker-3 died unexpectedly (exit code: -9), shutting down executor.",
        "ERROR 01-01 00:00:00 [ray_executor_v2.py:523] RayWorkerProc rank=2 died unexpectedly, shutting down executor.",
    ],
)
def test_vllms_process_death_is_read_under_any_prefix(line: str) -> None:
    assert diagnose_text([line]).failure_class == "unknown"
    assert "process_failed" in [signature.name for signature in signatures_in(line)]


# Kind 3: other accelerators' allocators print PyTorch's OOM sentence with their device's name (torch_npu's
# NPUCachingAllocator, c10/xpu/XPUCachingAllocator.cpp, ROCm's hipified allocator): cuda_oom, the device's memory.
@pytest.mark.parametrize(
    ("line", "tried"),
    [
        ("RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 0; 60.97 GiB total capacity; 58.92 GiB already allocated)", "3.47 GiB"),
        ("(NPURayWorkerWrapper pid=45464) ERROR 06-09 06:57:48 worker_base.py:581] RuntimeError: NPU out of memory. Tried to allocate 30.00 MiB (NPU 3; 60.96 GiB total capacity)", "30.00 MiB"),
        ("RuntimeError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 11.93 GiB of which 7.61 MiB is free.", "2.00 GiB"),
        ("[2026-01-01 00:00:00 TP0] Scheduler hit an exception: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 191.98 GiB", "512.00 MiB"),
    ],
)
def test_other_accelerators_out_of_memory_is_cuda_oom(line: str, tried: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "cuda_oom" and f"Tried to allocate {tried}" in diagnosis.evidence[0].text, diagnosis


def test_an_out_of_memory_sentence_of_another_kind_is_not_the_devices() -> None:
    # The host's memory (a CPU tensor) and a tokenizer's words are not the accelerator's.
    assert diagnose_text(["RuntimeError: [enforce fail at alloc_cpu.cpp:83] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1024 bytes."]).failure_class != "cuda_oom"
    assert diagnose_text(["INFO: the prompt ran out of memory. Tried to allocate nothing"]).failure_class != "cuda_oom"


# Kind 4: vLLM's GGUF loader cannot name the checkpoint's tensors for the model it built (gguf_loader.py
# _get_gguf_weights_map: RuntimeError(f"Failed to map GGUF parameters ({len(unmapped_params)}): {unmapped_params}")).
@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: failed to map GGUF parameters (18288)",
        "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:708] RuntimeError: Failed to map GGUF parameters (48): ['model.layers.0.mlp.experts.gate_up_proj']",
    ],
)
def test_a_gguf_mapping_failure_is_a_model_load_error(line: str) -> None:
    assert diagnose_text([line]).failure_class == "model_load_error"


# Kind 5: start steps the tables lacked. vLLM's version banner and its next lines (0.33 entrypoints/common/startup.py:18
# "vLLM server version %s, serving model %s", :96 "non-default args: %s", config/model.py:744 "Resolved architecture:
# %s") come before the engine's first step; TorchInductor's autotuning (torch 2.13 _inductor/select_algorithm.py:5675
# "AUTOTUNE {name}({sizes})", :5700 "... AUTOTUNE benchmarking takes ...") is compiling, under way.
@pytest.mark.parametrize(
    "lines",
    [
        ["(APIServer pid=6539) INFO 04-18 20:22:57 [utils.py:233] non-default args: {'model_tag': 'openai/gpt-oss-20b', 'port': 10000}"],
        ["(APIServer pid=1) INFO 01-01 00:00:00 [startup.py:18] vLLM server version 0.33.0, serving model Qwen/Qwen3-8B"],
        ["(APIServer pid=1) INFO 01-01 00:00:00 [model.py:744] Resolved architecture: Qwen3ForCausalLM"],
    ],
)
def test_vllms_banner_lines_are_the_starts_first_lines(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and "first lines" in diagnosis.evidence[0].text, diagnosis.evidence


@pytest.mark.parametrize(
    "line",
    [
        "SingleProcess AUTOTUNE benchmarking takes 1.3427 seconds and 8.8429 seconds precompiling",
        "AUTOTUNE mm(4x4096, 4096x8)",
        "SubProcess AUTOTUNE benchmarking takes 0.5 seconds and 0.0 seconds precompiling for 10 choices",
    ],
)
def test_inductor_autotuning_is_a_start_step_under_way(line: str) -> None:
    diagnosis = diagnose_text(["[2026-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB", line])
    assert diagnosis.failure_class in ("unknown", "server_start_timeout") and "autotuning TorchInductor" in diagnosis.evidence[0].text, diagnosis.evidence


# Kind 6: a watchdog's batch dump pasted from its middle (0.4.9 scheduler.py:2045-2050 f"{self.cur_batch.reqs=},
# {self.token_to_kv_pool_allocator.available_size()=}, {self.tree_cache.evictable_size()=}, "): the request list's close
# and the pool's sizes are the dump of a running batch, a hang while serving.
@pytest.mark.parametrize(
    "dump",
    [
        "params.SamplingParams object at 0x7f33ca0fe6e0>)], available_size=1160, evictable_size=361907,",
        "sampling_params=<sglang.srt.sampling.sampling_params.SamplingParams object at 0x1>)], self.token_to_kv_pool_allocator.available_size()=0, self.tree_cache.evictable_size()=12, ",
    ],
)
def test_a_watchdog_dump_begun_mid_way_is_serving(dump: str) -> None:
    watchdog = "2025-07-15 17:47:33 - ERROR - Watchdog timeout (self.watchdog_timeout=300)"
    assert diagnose_text([dump, watchdog]).failure_class == "unknown"
    # Without the dump the same watchdog line ends a start.
    assert diagnose_text([watchdog]).failure_class == "server_start_timeout"
    # An empty request list is no batch.
    assert diagnose_text(["self.cur_batch.reqs=[], available_size=1160, evictable_size=0,", watchdog]).failure_class == "server_start_timeout"


# Kind 7: vLLM's tool parsers catch their error, log it with logger.exception and answer with the model's text
# (0.33 tool_parsers/hermes_tool_parser.py:116-120): every line of that traceback carries the parser's file.
def test_a_tool_parsers_caught_error_on_a_serving_server_is_no_failure() -> None:
    tag = "(APIServer pid=85343) ERROR 10-09 09:39:54 [hermes_tool_parser.py:157] "
    lines = [
        '(APIServer pid=85343) INFO:     127.0.0.1:50001 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        tag + "Error in extracting tool call from response.",
        tag + "Traceback (most recent call last):",
        tag + '  File "/x/vllm/tool_parsers/hermes_tool_parser.py", line 134, in extract_tool_calls',
        tag + "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    ]
    assert diagnose_text(lines).failure_class is None
    other = [line.replace("hermes_tool_parser.py:157", "llama_tool_parser.py:142") for line in lines]
    assert diagnose_text(other).failure_class is None
    # The same traceback logged by the engine's own code is a failure.
    engine = [line.replace("hermes_tool_parser.py:157", "serving_chat.py:157") for line in lines]
    assert diagnose_text(engine).failure_class == "unknown"


# batch14-heldout: 40 real logs from 40 threads no other manifest or skipped list names, under batch13's rule, committed
# (0aedac2) before fleet read them and measured once untouched with the round-nine rules (benchmarks/results/diagnose-heldout.md).
BATCH14_HELDOUT = REAL.parent / "batch14-heldout"


def test_batch14_keeps_its_tune_figure() -> None:
    """40 real logs (15 SGLang, 25 vLLM): 29/40 right (failures 27/38; 24/34 where the excerpt shows the cause) from the
    bare log, measured once untouched; 36/40 (34/38; 31/34) after the rules of its miss kinds 2-5 (the tests below) and
    its max_model_len refusal relabelled context_length_exceeded. A tune split since. A floor, not a file check."""
    entries = _manifest(BATCH14_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 34 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH14_HELDOUT, 40) >= 36


# -- batch14's miss kinds as class rules, each from the source that prints the text (issue 27, round ten) --------
# Kind 2: SGLang's piecewise CUDA graph runner wraps what failed inside it: logger.error("Piecewise CUDA Graph failed
# with error: %s\n%s", e, PIECEWISE_CUDA_GRAPH_CAPTURE_FAILED_MSG) and re-raises (model_executor/forward_context.py).
PCG_ADVICE = [
    "Piecewise CUDA Graph is enabled by default as an experimental feature.",
    "To work around this error, add --disable-piecewise-cuda-graph to your launch command.",
    "Please report this issue at https://github.com/sgl-project/sglang/issues/new/choose",
]
SCHEDULER_RAISED = ["[2026-06-10 13:08:34 TP5] Scheduler hit an exception: Traceback (most recent call last):", "AttributeError: boom"]


@pytest.mark.parametrize(
    "head",
    [
        # batch14's real lines
        "[2026-06-10 13:08:34 TP7] Piecewise CUDA Graph failed with error: 'TcPiecewiseForwardContext' object has no attribute 'num_tokens'",
        "[2026-05-22 04:54:32 TP6] Piecewise CUDA Graph failed with error: Tensor match failed for Tensor<8>[strides=<1>, dtype=int64, device=cuda:6] at /x/fused_store_index_cache.cuh:107",
        # variants from the format string: another error, no prefix, the message with its advice cut off
        "Piecewise CUDA Graph failed with error: PCG capture stream is not set, please check if runtime recompilation happened",
        "[2026-01-01 00:00:00] Piecewise CUDA Graph failed with error: ",
    ],
)
def test_a_piecewise_cuda_graph_failure_is_a_graph_error(head: str) -> None:
    assert diagnose_text([head, *PCG_ADVICE, *SCHEDULER_RAISED]).failure_class == "cuda_graph_error"
    assert diagnose_text([head]).failure_class == "cuda_graph_error"


def test_the_piecewise_advice_alone_shows_the_failure_and_a_cause_inside_it_wins() -> None:
    # A paste that kept only the advice SGLang prints inside the failure's message.
    assert diagnose_text([*PCG_ADVICE[1:], *SCHEDULER_RAISED]).failure_class == "cuda_graph_error"
    # The wrapper loses to the CUDA error it carries (inner cause over wrapper).
    inner = "Piecewise CUDA Graph failed with error: CUDA error: an illegal memory access was encountered"
    assert diagnose_text([inner, *PCG_ADVICE]).failure_class == "cuda_illegal_memory_access"
    # Its on/off flag in a server's arguments is no failure.
    assert diagnose_text(["server_args=ServerArgs(disable_piecewise_cuda_graph=False, piecewise_cuda_graph_max_tokens=4096)", READY]).failure_class is None


# Kind 3: other runtimes' failure lines. CANN's error report (REPORT_INNER_ERROR / REPORT_CALL_ERROR end each line with
# "[FUNC:Report{Inner,Call}Error][FILE:...][LINE:...]"); Ray's node-death report, printed at warning level; Gloo's
# "connected to N peer ranks" is a finished set-up step (a log cut there is a cut start, not a healthy one).
@pytest.mark.parametrize(
    "line",
    [
        # batch14's real lines
        "        [Init][Compiler]Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]",
        "(raylet) The node with node id: 0f219779261fab027e79667e6451e061ded81c76f07d05584652d818 and address: 10.0.0.51 and node name: 10.0.0.51 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc",
        # variants from the format strings: the call-error macro under vLLM's prefix, the driver's warning-level relay
        "ERROR 03-04 12:57:08 [engine.py:409]         [Build][SingleOpModel]call ge interface generator.BuildSingleOpModel failed. ge result = 4294967295[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]",
        "EH9999: [PID: 1439] 2025-04-28-02:50:24.965.356 [Init][PlatformInfo]init runtime platform info failed, SocVersion = Ascend910B2[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]",
        "2024-05-08 14:22:55,479\tWARNING worker.py:1829 -- The node with node id: 5ad7 and address: 10.0.0.2 and node name: 10.0.0.2 has been marked dead because the detector has missed too many heartbeats from it.",
    ],
)
def test_other_runtimes_failure_lines_are_unexplained_failures(line: str) -> None:
    assert diagnose_text([line]).failure_class == "unknown"
    assert diagnose_text([line, READY]).failure_class == "unknown"


def test_cann_and_ray_lines_that_report_no_failure_are_not_failures() -> None:
    lines = [
        "[Init][Compiler]Init compiler success[FUNC:Init][FILE:compiler.cpp][LINE:10]",  # another function's info line
        "2024-05-08 14:22:55,484\tINFO worker.py:1740 -- Connected to Ray cluster. View the dashboard at http://127.0.0.1:8265",
        READY,
    ]
    assert diagnose_text(lines).failure_class is None


GLOO = "[Gloo] Rank 0 is connected to 0 peer ranks. Expected number of connected peer ranks is : 0"


def test_a_start_cut_after_a_gloo_group_connected_is_a_cut_start_not_a_healthy_log() -> None:
    lines = ["[2025-12-26 23:01:32 DP1 TP1 EP1] [AR] Using sglang CustomAllreduce", GLOO, GLOO.replace("Rank 0", "Rank 3").replace("0 peer", "3 peer").replace(": 0", ": 3")]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and diagnosis.evidence[0].text == "last startup step: done connecting a Gloo group (distributed set-up)"
    # The same lines in a start that went on to serve are healthy.
    assert diagnose_text([*lines, "Multi-thread loading shards: 100% Completed | 1/1 [00:00<00:00,  5.26it/s]", READY]).failure_class is None


# Kind 4: PyTorch's OOM sentence quoted without its head ("CUDA out of memory. "): the allocator's "Tried to allocate
# {size}. GPU {n} has a total capacity of {size}" (c10/cuda/CUDACachingAllocator.cpp) is printed by nothing else.
@pytest.mark.parametrize(
    "lines",
    [
        # batch14's real fragment: indented and wrapped by the author
        [
            "    Tried to allocate 136.00 MiB. GPU 0 has a total capacity of 22.36 GiB of",
            "    which 120.88 MiB is free. ... If this problem persists, try setting",
            "    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0",
        ],
        # variants from the format string
        ["Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.19 GiB of which 1.02 GiB is free."],
        ["(EngineCore_DP0 pid=7) ERROR 01-01 00:00:00 [core.py:1] ... Tried to allocate 512.00 KiB. GPU 1 has a total capacity of 23.55 GiB of which 0 bytes is free."],
    ],
)
def test_an_oom_quote_without_its_head_is_cuda_oom(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class == "cuda_oom"


def test_a_gpus_capacity_without_the_allocators_sentence_is_not_an_oom() -> None:
    lines = ["INFO 01-01 00:00:00 [gpu_worker.py:1] GPU 0 has a total capacity of 79.19 GiB", "Tried to allocate a new block list", READY]
    assert diagnose_text(lines).failure_class is None


# Kind 5: vLLM refusing --max-model-len above the model's derived length (config/model.py, a pydantic "Value error, ..."
# at start-up) is context_length_exceeded, as SGLang's refusal of --context-length above the derived one is: the class
# fleet's context fix acts on (fleet/fixes/autofix.py lowers the configured length to the derived one).
def test_vllms_max_model_len_refusal_in_pydantics_words_is_context_length_exceeded() -> None:
    line = (
        "  Value error, User-specified max_model_len (131072) is greater than the derived max_model_len (max_position_embeddings=32768.0 or "
        "model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    )
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "context_length_exceeded" and "32768" in (diagnosis.fix or "")


# batch15-heldout: 40 real logs from 40 threads no other manifest names, under batch14's rule, committed (3ae7544) before
# fleet read them and measured once untouched with the round-ten rules (benchmarks/results/diagnose-heldout.md).
BATCH15_HELDOUT = REAL.parent / "batch15-heldout"


def test_batch15_keeps_its_tune_figure() -> None:
    """40 real logs (24 vLLM, 16 SGLang): 28/40 right (failures 23/35; 24/35 where the excerpt shows the cause) from the
    bare log, measured once untouched; 36/40 (31/35; 32/35) after the rules of its miss kinds 1-3 (the tests below). A
    tune split since. A floor, not a file check."""
    entries = _manifest(BATCH15_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 35 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH15_HELDOUT, 40) >= 36


# -- batch15's miss kinds as class rules, each from the source that prints the text (issue 27, round eleven) -------
# Kind 1: start steps no table named. SGLang's DeepGEMM pre-compile (layers/deep_gemm_wrapper/compile_utils.py: "Entering
# DeepGEMM JIT Pre-Compile session. ...", "Try DeepGEMM JIT Compiling for <{kernel_type.name}> N={n}, K={k},
# num_groups={num_groups} with all Ms.", then a tqdm bar, desc "DeepGEMM warmup" or none) is under way until its bar
# reaches 100 %; the scheduler's start summary (managers/scheduler.py: "max_total_num_tokens=..., context_len=...,
# available_gpu_mem=... GB") is a finished step. A start cut after either is a cut start, never a healthy log.
DG_ENTER = "[2025-12-26 08:58:40 DP0 TP0 EP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`. "
DG_TRY = "[2025-04-21 18:12:35 TP0] Try DeepGEMM JIT Compiling for <gemm_fp8_fp8_bf16_nt> N=24576, K=2560, num_groups=1 with all Ms."
SCHED_SUMMARY = "[2026-06-28 15:16:45] max_total_num_tokens=2086558, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=33, context_len=256000, available_gpu_mem=17.22 GB"


@pytest.mark.parametrize(
    ("lines", "failure_class", "evidence"),
    [
        # batch15's real shapes: a compile begun and cut; compiles whose bare bars reached 100 %; the summary alone
        ([DG_ENTER, DG_TRY.replace("TP0", "DP0 TP0 EP0")], "server_start_timeout", "stalled at: compiling DeepGEMM JIT kernels"),
        ([DG_TRY, "100%|██████████| 4096/4096 [00:54<00:00, 75.1it/s]"], "unknown", "last startup step: done compiling DeepGEMM JIT kernels"),
        ([SCHED_SUMMARY], "unknown", "last startup step: done starting the scheduler (its start summary was logged)"),
        # variants from the format strings: 0.5.23's bar with its description, a bar still running, another kernel type
        ([DG_TRY, "DeepGEMM warmup: 100%|██████████| 128/128 [00:00<00:00, 3853.51it/s]"], "unknown", "last startup step: done compiling DeepGEMM JIT kernels"),
        ([DG_TRY, " 37%|███▋      | 1510/4096 [00:20<00:34, 75.1it/s]"], "server_start_timeout", "stalled at: compiling DeepGEMM JIT kernels"),
        (
            ["[2026-01-01 00:00:00 TP3] Try DeepGEMM JIT Compiling for <GROUPED_GEMM_NT_F8F8BF16_MASKED> N=7168, K=2048, num_groups=32 with all Ms."],
            "server_start_timeout",
            "stalled at: compiling DeepGEMM JIT kernels",
        ),
        ([SCHED_SUMMARY.replace("available_gpu_mem=17.22 GB", "available_cpu_mem=120.00 GB")], "unknown", "last startup step: done starting the scheduler (its start summary was logged)"),
    ],
)
def test_deepgemm_compiles_and_the_schedulers_summary_are_start_steps(lines: list[str], failure_class: str, evidence: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and diagnosis.evidence[0].text == evidence


def test_a_start_that_serves_after_those_steps_is_healthy() -> None:
    lines = [DG_ENTER, DG_TRY, "DeepGEMM warmup: 100%|██████████| 128/128 [00:00<00:00, 3853.51it/s]", SCHED_SUMMARY, READY]
    assert diagnose_text(lines).failure_class is None
    # A bare bar after another step (weights loading) is not read as the compile's.
    assert diagnose_text(["[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=70.00 GB", "100%|██████████| 8/8"]).failure_class == "server_start_timeout"


# Kind 2: accelerator runtimes' errors printed with no exception line. vLLM's cumem allocator (csrc/cumem_allocator.cpp,
# CUDA_CHECK: "CUDA Error: %s at %s:%d" with cuGetErrorString; RuntimeError(error_msg) from python_create_and_map);
# hipRTC's build log ("hip runtime failed to load.\nError: Please provide architecture for which code is to be
# generated.\n", hiprtcInternal.cpp); hipBLASLt's "rocblaslt error: Could not load {path}" (tensile_host.cpp).
@pytest.mark.parametrize(
    ("lines", "failure_class"),
    [
        # batch15's real lines
        (
            [
                "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:56",
                "CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:57",
                "CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:64",
            ],
            "cuda_oom",
        ),
        (["    python_create_and_map(*allocation_handle)", "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"], "cuda_oom"),
        (
            [
                "(EngineCore_DP0 pid=160843) ERROR 03-05 12:36:31 [core.py:1006] hip runtime failed to load.",
                "(EngineCore_DP0 pid=160843) ERROR 03-05 12:36:31 [core.py:1006] Error: Please provide architecture for which code is to be generated.",
            ],
            "unknown",
        ),
        (["", "rocblaslt error: Could not load /opt/venv/lib/python3.11/site-packages/torch/lib/hipblaslt/library/TensileLibrary_lazy_gfx942.dat", ""], "unknown"),
        # variants from the format strings: another allocator line, other prefixes, hipRTC's second line alone, hipBLASLt's other texts
        (["(VllmWorker rank=3 pid=88) CUDA Error: out of memory at /home/runner/work/vllm/csrc/cumem_allocator.cpp:91"], "cuda_oom"),
        (["ERROR 01-01 00:00:00 [core.py:1] RuntimeError: CUDA Error: operation not supported at /workspace/csrc/cumem_allocator.cpp:75"], "unknown"),
        (["Error: Please provide architecture for which code is to be generated."], "unknown"),
        (['rocblaslt error: Cannot read "TensileLibrary_lazy_gfx1201.dat": No such file or directory', 'rocblaslt error: Could not load "TensileLibrary_lazy_gfx1201.dat"'], "unknown"),
        (["rocblaslt error: Could not initialize Tensile library"], "unknown"),
    ],
)
def test_accelerator_runtime_errors_without_an_exception_line(lines: list[str], failure_class: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and diagnosis.evidence


def test_a_rocm_library_error_on_a_start_that_serves_is_no_failure() -> None:
    lines = [
        'rocblaslt error: Could not load "TensileLibrary_lazy_gfx1200.dat"',
        READY,
        *["[2026-01-01 00:00:05] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, gen throughput (token/s): 50.00, #queue-req: 0"] * 4,
    ]
    assert diagnose_text(lines).failure_class is None
    # The library's other messages, and its name in prose, are no failure.
    assert diagnose_text(["rocblaslt info: loading TensileLibrary_lazy_gfx942.dat", "INFO hip runtime loaded", READY]).failure_class is None


# Kind 3: package refusals in other words. SGLang's assert_pkg_version (srt/utils/common.py): f"{pkg} is installed with
# version {installed_version}, which is less than the minimum required version {min_version}. " + message, and f"{pkg}
# with minimum required version {min_version} is not installed. "; CPython's "No module named '{name}'" quoted without
# its closing quote at the line's end.
@pytest.mark.parametrize(
    ("line", "module"),
    [
        # batch15's real lines
        (
            "Exception: sgl-kernel is installed with version 0.1.0, which is less than the minimum required version 0.1.1. Please reinstall the latest version with 'pip install sgl-kernel --force-reinstall'",
            "sgl-kernel",
        ),
        ("ModuleNotFoundError: No module named 'vllm.model_executor.input_metadata", "vllm.model_executor.input_metadata"),
        # variants from the format strings
        ("[2026-01-01 00:00:00] Exception: flashinfer_python is installed with version 0.2.3, which is less than the minimum required version 0.2.5. ", "flashinfer_python"),
        ("Exception: sgl-kernel with minimum required version 0.3.9 is not installed. Please reinstall the latest version with 'pip install sgl-kernel --force-reinstall'", "sgl-kernel"),
        ("  ModuleNotFoundError: No module named 'sgl_kernel", "sgl_kernel"),
    ],
)
def test_package_refusals_in_other_words_are_import_errors(line: str, module: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "import_error" and diagnosis.figures.get("module") == module


def test_a_version_sentence_that_refuses_nothing_is_no_import_error() -> None:
    lines = ["[2026-01-01 00:00:00] sgl-kernel is installed with version 0.3.9.", "No module named in this sentence", READY]
    assert diagnose_text(lines).failure_class is None


# batch16-heldout: 40 real logs from 40 threads no other manifest names, under batch15's rule, committed (07a664c, 93c4999)
# before fleet read them and measured once untouched with the round-eleven rules (benchmarks/results/diagnose-heldout.md).
BATCH16_HELDOUT = REAL.parent / "batch16-heldout"


def test_batch16_keeps_its_tune_figure() -> None:
    """40 real logs (26 vLLM, 14 SGLang): 30/40 right (failures 27/37; 27/35 where the excerpt shows the cause) from the
    bare log, measured once untouched; 37/40 (34/37; 34/35) after the rules of its miss kinds 1-3 (the tests below). A
    tune split since. A floor, not a file check."""
    entries = _manifest(BATCH16_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 35 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH16_HELDOUT, 40) >= 39  # round twenty-five: the reading since round twenty-four


# -- batch16's miss kinds as class rules, each from the source that prints the text (issue 27, round twelve) -------
# Kind 1: a release refusing a model in its own words. vLLM's registry (models/registry.py _raise_for_unsupported: "Model
# architectures {architectures} failed to be inspected. ...", "... are not supported for now. ...", "Model architecture
# {arch} was supported in vLLM until v{previous_version}, ...", "Model architecture {arch} is not supported in-tree
# anymore. ..."; _try_resolve_transformers: "Cannot find model module. {architecture!r} is not a registered model in the
# Transformers library ..."), a model class's version check (models/minicpmv.py, minicpmo.py: "Currently, MiniCPMV only
# supports versions {supported_versions}. Got version: {version_values}") and compressed-tensors' scheme lookup
# (compressed_tensors.py _get_scheme_from_parts: "No compressed-tensors compatible scheme was found ...").
@pytest.mark.parametrize(
    ("lines", "architectures"),
    [
        # batch16's real lines
        (["ERROR 08-29 13:40:25 [multiproc_executor.py:559] ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (4, 5)"], None),
        (
            [
                'ERROR 05-13 16:04:42 [core.py:387]   File "/data/home/fangxuwei/mambaforge/envs/vllm/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py", line 375, in _get_scheme_from_parts',
                "ERROR 05-13 16:04:42 [core.py:387]     raise NotImplementedError(",
                "ERROR 05-13 16:04:42 [core.py:387] NotImplementedError: No compressed-tensors compatible scheme was found.",
                "ERROR 05-13 16:04:42 [core.py:387]",
                "CRITICAL 05-13 16:04:42 [core_client.py:359] Got fatal signal from worker processes, shutting down. See stack trace above for root cause issue.",
                "Killed",
            ],
            None,
        ),
        (
            [
                "(APIServer pid=1261635) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                "(APIServer pid=1261635)   Value error, Model architectures ['HunYuanVLForConditionalGeneration'] failed to be inspected. Please check the logs for more details. [type=value_error, input_value=ArgsKwargs((), {'model': ...rocessor_plugin': None}), input_type=ArgsKwargs]",
                "(APIServer pid=1261635)     For further information visit https://errors.pydantic.dev/2.12/v/value_error",
            ],
            "['HunYuanVLForConditionalGeneration']",
        ),
        (
            [
                "ValueError: Cannot find model module. 'MiniMaxM1ForCausalLM' is not a registered model in the Transformers library (only relevant if the model is meant to be in Transformers) and 'AutoModel' is not present in the model config's 'auto_map' (relevant if the model is custom)."
            ],
            "MiniMaxM1ForCausalLM",
        ),
        # variants from the format strings: the sibling class, 0.33's longer scheme text, the registry's other refusals, other prefixes
        (["(VllmWorker rank=1 pid=4242) ERROR 01-01 00:00:00 [multiproc_executor.py:1] ValueError: Currently, MiniCPMO only supports versions 2.6. Got version: (2, 7)"], None),
        (
            [
                "(EngineCore_DP0 pid=9) NotImplementedError: No compressed-tensors compatible scheme was found for layer_name='model.layers.0.self_attn.qkv_proj', weight_quant=QuantizationArgs(num_bits=4), input_quant=None, output_quant=None, format='pack-quantized'"
            ],
            None,
        ),
        (["ValueError: Model architectures ['Qwen3VLForConditionalGeneration'] failed to be inspected. Please check the logs for more details."], "['Qwen3VLForConditionalGeneration']"),
        (
            [
                "(APIServer pid=1) ValueError: Model architecture MotifForCausalLM was supported in vLLM until v0.10.2, and is not supported anymore. Please use an older version of vLLM if you want to use this model architecture."
            ],
            "MotifForCausalLM",
        ),
        (
            ["ValueError: Model architecture BambaForCausalLM is not supported in-tree anymore. Please install the plugin at https://example.org/plugin if you want to use this model architecture."],
            "BambaForCausalLM",
        ),
        (
            [
                "ERROR 01-01 00:00:00 [core.py:1] ValueError: Cannot find model module. 'FooForCausalLM' is not a registered model in the Transformers library (only relevant if the model is meant to be in Transformers)"
            ],
            "FooForCausalLM",
        ),
    ],
)
def test_a_release_refusing_a_model_in_its_own_words_is_a_model_load_error(lines: list[str], architectures: str | None) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error" and diagnosis.evidence
    assert diagnosis.figures.get("architectures") == architectures


def test_words_of_those_refusals_in_other_sentences_refuse_nothing() -> None:
    lines = [
        "INFO 01-01 00:00:00 [config.py:1] This processor only supports versions of transformers >= 4.45.",
        "INFO 01-01 00:00:00 [registry.py:1] Model architectures ['Qwen2ForCausalLM'] are supported.",
        "INFO 01-01 00:00:00 [compressed_tensors.py:1] Using a compressed-tensors compatible scheme for layer 0.",
        READY,
    ]
    assert diagnose_text(lines).failure_class is None


# Kind 2: a model's code failing while it loads. An AttributeError or TypeError whose traceback (with those chained to it:
# "During handling of the above exception, ..." / "The above exception was the direct cause ...") passes through a frame
# of the model's load path, by file and function as the sources define them (SGLang: ModelRunner.load_model, model_loader's
# get_model / load_model / _initialize_model, ModelConfig.__init__, hf_transformers' get_config / get_tokenizer /
# get_processor; vLLM: the worker's and runner's load_model, model_loader's get_model / load_model / initialize_model,
# transformers_utils' get_config / get_processor; transformers' from_pretrained, get_config_dict,
# get_image_processor_dict, get_processor_dict), in a start that never came up. The message is CPython's
# (Objects/object.c "'%.100s' object has no attribute '%U'", Objects/abstract.c "'%.200s' object is not subscriptable").
def _frame(path: str, line: int, function: str, source: str, prefix: str = "") -> list[str]:
    return [f'{prefix}  File "{path}", line {line}, in {function}', f"{prefix}    {source}"]


SG_SITE = "/usr/local/lib/python3.12/dist-packages"
VLLM_LOAD_CHAIN = [
    "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] EngineCore failed to start.",
    "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] Traceback (most recent call last):",
    *_frame(f"{SG_SITE}/vllm/v1/worker/gpu_worker.py", 594, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)", "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] "),
    *_frame(f"{SG_SITE}/vllm/v1/worker/gpu_model_runner.py", 4967, "load_model", "self.model = model_loader.load_model(", "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] "),
    *_frame(f"{SG_SITE}/vllm/model_executor/model_loader/base_loader.py", 63, "load_model", "model = initialize_model(", "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] "),
    *_frame(
        f"{SG_SITE}/vllm/model_executor/model_loader/utils.py",
        74,
        "initialize_model",
        "return model_class(vllm_config=vllm_config, prefix=prefix)",
        "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] ",
    ),
    *_frame(f"{SG_SITE}/vllm/model_executor/models/foo.py", 120, "__init__", "self.rope_theta = config.rope_theta", "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] "),
    "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] AttributeError: 'FooConfig' object has no attribute 'rope_theta'",
]


@pytest.mark.parametrize(
    ("lines", "load_step"),
    [
        # variants from the format strings: vLLM 0.33's load path under the engine core's prefix
        (VLLM_LOAD_CHAIN, "load_model of gpu_worker.py"),
        # SGLang's model runner building the model: a TypeError in the class's __init__
        (
            [
                "[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                *_frame(f"{SG_SITE}/sglang/srt/model_executor/model_runner.py", 1270, "load_model", "self.model = get_model("),
                *_frame(f"{SG_SITE}/sglang/srt/model_loader/__init__.py", 23, "get_model", "return loader.load_model("),
                *_frame(f"{SG_SITE}/sglang/srt/model_loader/loader.py", 285, "_initialize_model", "return model_class(config=model_config.hf_config, quant_config=quant_config)"),
                "TypeError: FooForCausalLM.__init__() got an unexpected keyword argument 'quant_config'",
            ],
            "load_model of model_runner.py",
        ),
        # the error first, the load path in the traceback chained after it ("The above exception was the direct cause")
        (
            [
                "Traceback (most recent call last):",
                *_frame(f"{SG_SITE}/transformers/configuration_utils.py", 806, "_get_config_dict", "config_dict = cls._dict_from_json_file(resolved_config_file)"),
                "TypeError: 'NoneType' object is not subscriptable",
                "",
                "The above exception was the direct cause of the following exception:",
                "",
                "Traceback (most recent call last):",
                *_frame(f"{SG_SITE}/sglang/srt/utils/hf_transformers/config.py", 336, "get_config", "config = AutoConfig.from_pretrained("),
                "OSError: Can't parse the config",
            ],
            "_get_config_dict of configuration_utils.py",
        ),
    ],
)
def test_a_models_code_failing_while_it_loads_is_a_model_load_error(lines: list[str], load_step: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error" and diagnosis.figures.get("load_step") == load_step
    assert any("Error:" in item.text for item in diagnosis.evidence)


@pytest.mark.parametrize(
    ("name", "load_step"),
    [
        # batch16's real logs: InternVL's config read by SGLang's ModelConfig, the processor files chained under get_processor
        ("sglang-qwen25-14b-internvl-chat-config-no-hidden-size.log", "__init__ of model_config.py"),
        ("sglang-llama4-scout-quantized-tp-processor-files-none-typeerror.log", "get_image_processor_dict of image_processing_base.py"),
    ],
)
def test_batch16s_model_code_failures_read_by_their_frames(name: str, load_step: str) -> None:
    diagnosis = diagnose_file(BATCH16_HELDOUT / name)
    assert diagnosis.failure_class == "model_load_error" and diagnosis.figures.get("load_step") == load_step


def test_the_same_errors_outside_the_load_path_are_no_model_load_error() -> None:
    error = "AttributeError: 'NoneType' object has no attribute 'cpu'"
    # in a forward pass
    forward = ["Traceback (most recent call last):", *_frame(f"{SG_SITE}/sglang/srt/model_executor/model_runner.py", 2100, "forward_extend", "return self.model.forward("), error]
    assert diagnose_text(forward).failure_class == "unknown"
    # in a MoE kernel's config lookup, whose function shares a loader's name
    moe = [
        "Traceback (most recent call last):",
        *_frame(f"{SG_SITE}/sglang/srt/layers/moe/moe_runner/triton_utils/__init__.py", 25, "get_config", "return _config"),
        "TypeError: 'NoneType' object is not subscriptable",
    ]
    assert diagnose_text(moe).failure_class == "unknown"
    # a load-path traceback that ended in another exception, then the error in a traceback of its own
    separate = [*VLLM_LOAD_CHAIN[:-1], "(EngineCore_DP0 pid=2741) ERROR 01-01 00:00:00 [core.py:866] RuntimeError: boom", "Traceback (most recent call last):", *forward[1:]]
    assert diagnose_text(separate).failure_class == "unknown"
    # a load path that ran out of memory is the OOM
    oom = [*VLLM_LOAD_CHAIN[:-1], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"]
    assert diagnose_text(oom).failure_class == "cuda_oom"
    # a load-path traceback in a start that came up and served (a request's processor): no start-up failure
    served = [READY, *VLLM_LOAD_CHAIN[1:], *["[2026-01-01 00:00:05] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, gen throughput (token/s): 50.00, #queue-req: 0"] * 4]
    assert diagnose_text(served).failure_class != "model_load_error"


# Kind 3: AITER refusing the GPU's architecture (aiter/jit/utils/chip_info.py get_gfx_custom_op_core and get_gfx_runtime:
# KeyError(f"Unknown GPU architecture: {gfx}. Supported architectures: {...}")).
@pytest.mark.parametrize(
    "lines",
    [
        # batch16's real lines
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/aiter/jit/utils/chip_info.py", line 65, in get_gfx_custom_op_core',
            "    raise KeyError(",
            "KeyError: \"Unknown GPU architecture: gfx1101. Supported architectures: ['native', 'gfx90a', 'gfx908', 'gfx940', 'gfx941', 'gfx942', 'gfx945', 'gfx1100', 'gfx950']\"",
            "During handling of the above exception, another exception occurred:",
        ],
        # variants from the format strings: get_gfx_runtime's sorted list, under vLLM's engine core prefix
        ["(EngineCore_DP0 pid=7) ERROR 01-01 00:00:00 [core.py:1] KeyError: \"Unknown GPU architecture: gfx1151. Supported architectures: ['gfx1100', 'gfx942', 'gfx950']\""],
    ],
)
def test_aiter_refusing_the_gpu_architecture_is_unsupported_gpu_arch(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch" and str(diagnosis.figures.get("aiter_arch", "")).startswith("gfx")
    assert diagnosis.fix is not None and "AITER" in diagnosis.fix


def test_an_unknown_architecture_in_other_words_is_no_refusal() -> None:
    assert diagnose_text(["INFO 01-01 00:00:00 [rocm.py:1] Unknown GPU architecture: gfx1151, using defaults", READY]).failure_class is None


# batch17-heldout: 40 real logs from 40 threads no other manifest names, under batch16's rule, committed (48f6378) before
# fleet read them and measured once untouched with the round-twelve rules (benchmarks/results/diagnose-heldout.md).
BATCH17_HELDOUT = REAL.parent / "batch17-heldout"


def test_batch17_keeps_its_tune_figure() -> None:
    """40 real logs (32 vLLM, 8 SGLang): 22/40 right (failures 16/33; 15/30 where the excerpt shows the cause) from the
    bare log, measured once untouched with the round-twelve rules (b96d995); 36/40 (29/33; 26/30) after the rules of its
    miss kinds (the tests below); 40/40 once its four starts cut inside vLLM's route listing were relabelled healthy,
    as earlier batches label that cut (tests/fixtures/logs/README.md). A tune split since. A floor, not a file check."""
    entries = _manifest(BATCH17_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 30 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH17_HELDOUT, 40) >= 40


# -- batch17's miss kinds as class rules, each from the source that prints the text (issue 27, round thirteen) -------
# Kind 1: start-up steps no table named, so a start cut after them read as no failure. vLLM's KV-transfer connector
# (distributed/kv_transfer/kv_connector/factory.py: "Creating v1 connector with name: %s and engine_id: %s"), vLLM-Omni's
# stages and orchestrator (engine/stage_engine_core_client.py "[%s] stage-%s [rep-%s] initializing EngineCore" / "...
# EngineCore running"; entrypoints/omni.py "[%s] All stages initialized successfully"; engine/omni_engine_base.py
# "[OmniEngine] Orchestrator ready with {n} stages"), SGLang-Omni's pipeline (pipeline/coordinator.py "Coordinator
# registered stage: %s at %s", "Coordinator started"; pipeline/control_plane.py "Stage %s control plane started"),
# uvicorn's "Waiting for application startup." (lifespan/on.py) and Triton's decode-attention compile note.
VLLM_UP = "(APIServer pid=7) INFO:     Application startup complete."
SG_UVICORN_UP = "[2026-01-01 00:00:09] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"
TRITON_NOTE = 'loc("/sgl-workspace/sglang/python/sglang/srt/layers/attention/triton_ops/decode_attention.py":310:16): error: operation scheduled before its operands'


@pytest.mark.parametrize(
    ("lines", "failure_class", "stall"),
    [
        # variants from the format strings
        (["INFO 01-01 00:00:00 [factory.py:63] Creating v1 connector with name: LMCacheConnectorV1 and engine_id: 0f3a"], "unknown", "creating the KV-transfer connector"),
        (["(APIServer pid=7) INFO 01-01 00:00:00 [stage_engine_core_client.py:222] [StageEngineCoreClient] stage-1 [rep-0] EngineCore running"], "unknown", "done starting a stage"),
        (["(APIServer pid=7) INFO 01-01 00:00:00 [stage_engine_core_client.py:165] [StageEngineCoreClient] stage-0 [rep-0] initializing EngineCore"], "server_start_timeout", "starting a stage"),
        (["(APIServer pid=7) INFO 01-01 00:00:00 [omni_engine_base.py:344] [OmniEngine] Orchestrator ready with 3 stages"], "unknown", "done starting the stages"),
        (["(APIServer pid=7) INFO 01-01 00:00:00 [omni.py:477] [Omni] All stages initialized successfully"], "unknown", "done starting the stages"),
        (["(APIServer pid=7) INFO 01-01 00:00:00 [omni_base.py:227] [AsyncOmni] AsyncOmniEngine initialized in 61.23 seconds"], "unknown", "done starting the stages"),
        (["2026-01-01 00:00:00,000 [INFO] sglang_omni.pipeline.control_plane: Stage thinker control plane started"], "unknown", "pipeline's stages"),
        (["2026-01-01 00:00:00,000 [INFO] sglang_omni.pipeline.coordinator: Coordinator registered stage: decode at ipc:///tmp/x.sock"], "unknown", "pipeline's stages"),
        (["INFO:     Started server process [22122]", "INFO:     Waiting for application startup."], "server_start_timeout", "uvicorn's lifespan"),
        ([TRITON_NOTE, TRITON_NOTE], "unknown", "compiling Triton kernels"),
    ],
)
def test_start_steps_of_other_launchers_end_a_cut_start_with_its_stall_point(lines: list[str], failure_class: str, stall: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == failure_class and stall in str(diagnosis.figures.get("last_phase"))


@pytest.mark.parametrize(
    "name",
    [
        # batch17's real logs: LMCache's connector set-up, GLM-Image's stage 0 running, two vLLM-Omni starts past the
        # orchestrator, SGLang-Omni's stages inside uvicorn's start-up, SGLang's Triton compile notes
        "vllm-lmcache-connector-v1-dynamic-loading-start-cut-at-config.log",
        "vllm-omni-glm-image-multistage-cli-overrides-start-cut-stage0-running.log",
        "vllm-omni-qwen3-tts-sleep-wake-api-start-cut-after-tokenizer-warning.log",
        "vllm-omni-async-orchestrator-stages-initialized-start-cut-after-template-warmup.log",
        "sglang-omni-qwen3-omni-text-first-profiler-start-cut-in-stage-startup.log",
        "sglang-dsv3-triton-decode-attention-operands-warnings-start-cut.log",
    ],
)
def test_batch17s_cut_starts_are_cut_starts(name: str) -> None:
    diagnosis = diagnose_file(BATCH17_HELDOUT / name)
    assert diagnosis.failure_class == "unknown" and diagnosis.evidence and diagnosis.evidence[0].text.startswith("last startup step: ")


@pytest.mark.parametrize(
    ("steps", "ready"),
    [
        (["(APIServer pid=7) INFO 01-01 00:00:00 [omni_engine_base.py:344] [OmniEngine] Orchestrator ready with 3 stages"], VLLM_UP),
        (["INFO 01-01 00:00:00 [factory.py:63] Creating v1 connector with name: LMCacheConnectorV1 and engine_id: 0f3a"], VLLM_UP),
        # a healthy SGLang start cut after uvicorn's running line, before "fired up" (issue 27), behind the new steps
        (["INFO:     Waiting for application startup.", "2026-01-01 00:00:00,000 [INFO] sglang_omni.pipeline.coordinator: Coordinator started"], SG_UVICORN_UP),
        ([TRITON_NOTE], SG_UVICORN_UP),
        ([TRITON_NOTE], '[2026-01-01 00:00:10] INFO:     127.0.0.1:4 - "POST /generate HTTP/1.1" 200 OK'),
    ],
)
def test_those_steps_before_the_ready_line_are_a_healthy_start(steps: list[str], ready: str) -> None:
    assert diagnose_text([*steps, ready]).failure_class is None


# Kind 2: vLLM-Omni's engine-death lines. Its stage processes log vLLM's EngineCoreProc words under their own names
# (engine/stage_engine_core_proc.py "StageEngineCoreProc encountered a fatal error.", diffusion/stage_diffusion_proc.py
# "StageDiffusionProc encountered a fatal error."); its orchestrator quotes a stage's EngineDeadError, whose str() is
# vLLM's ENGINE_DEAD_MESSAGE (v1/engine/exceptions.py), in entrypoints/omni.py f"[{name}] Stage {stage_id} error on
# request {req_id}: {result['error']}".
@pytest.mark.parametrize(
    "line",
    [
        # batch17's real lines
        "(StageEngineCoreProc pid=70357) ERROR 06-08 17:39:53 [stage_engine_core_proc.py:174] StageEngineCoreProc encountered a fatal error.",
        "ERROR 02-27 03:29:31 [omni.py:963] [Orchestrator] Stage 1 error on request 36_01379a49-c81b-4b12-a21b-0efa924c54d3: EngineCore encountered an issue. See stack trace (above) for the root cause.",
        # variants from the format strings
        "(StageDiffusionProc pid=9) ERROR 01-01 00:00:00 [stage_diffusion_proc.py:708] StageDiffusionProc encountered a fatal error.",
        "(APIServer pid=9) ERROR 01-01 00:00:00 [async_omni.py:518] [AsyncOrchestrator] Stage 0 error on request chatcmpl-1: EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:1586] EngineCore encountered a fatal error.",
    ],
)
def test_vllm_omnis_engine_death_lines_are_a_process_death(line: str) -> None:
    assert [signature.name for signature in signatures_in(line)] == ["process_failed"]
    assert diagnose_text([line]).failure_class == "unknown"


def test_a_fatal_error_in_other_words_is_no_engine_death() -> None:
    assert signatures_in("INFO 01-01 00:00:00 [x.py:1] The tokenizer encountered a fatal error marker in the template, ignoring it") == ()
    assert signatures_in("INFO 01-01 00:00:00 [x.py:1] EngineCore encountered an issue with the prompt cache, retrying") == ()


# Kind 3: weight refusals in other words. FP8 block shapes (vLLM layers/quantization/utils/fp8_utils.py and SGLang
# srt/layers/quantization/fp8_utils.py validate_fp8_block_shape / _moe: "Weight input_size_per_partition = {n} is not
# divisible by weight quantization block_k = {block_k}.", "Weight output_partition_size = {n} ... block_n = {block_n}.",
# "The output_size of gate's and up's weight = {n} ...", "The input_size of down's weight = {n} ..."); a layer's weight
# loader in the traceback's frames (weight_loader and the fused-MoE loader's _load_* helpers); SGLang's
# dist_barrier_after_load ("TP rank {tp_rank} could finish the model loading, but there are other ranks that didn't finish
# loading. ...").
@pytest.mark.parametrize(
    ("line", "partition", "block"),
    [
        # batch17's real line
        (
            "(Worker_TP4_EP4 pid=1364714) ERROR 06-22 10:58:00 [multiproc_executor.py:888] ValueError: Weight input_size_per_partition = 192 is not divisible by weight quantization block_k = 128.",
            "192",
            "block_k",
        ),
        # variants from the format strings
        ("ValueError: Weight output_partition_size = 320 is not divisible by weight quantization block_n = 128.", "320", "block_n"),
        ("(EngineCore_DP0 pid=3) ERROR 01-01 00:00:00 [core.py:1] ValueError: The output_size of gate's and up's weight = 96 is not divisible by weight quantization block_n = 128.", "96", "block_n"),
        ("[2026-01-01 00:00:00 TP3] ValueError: The input_size of down's weight = 192 is not divisible by weight quantization block_k = 128.", "192", "block_k"),
    ],
)
def test_fp8_blocks_a_parallel_size_cuts_are_a_model_load_error(line: str, partition: str, block: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "model_load_error"
    assert diagnosis.figures.get("partition_size") == partition and diagnosis.figures.get("quant_block") == block
    assert diagnosis.fix is not None and "tensor-parallel size" in diagnosis.fix


def test_divisibility_in_other_words_is_no_weight_refusal() -> None:
    assert diagnose_text(["ValueError: attn_chunk_size 7 is not divisible by block_size 16"]).failure_class == "unknown"
    assert all(signature.name != "quantization_blocks_split" for signature in signatures_in("ValueError: Weight shape K=7 is not divisible by block_size=16"))


VERL = "(vLLMHttpServerForPartial pid=1007413) (Worker_TP3 pid=1024473) ERROR 03-04 05:42:52 [multiproc_executor.py:824] "


@pytest.mark.parametrize(
    "lines",
    [
        # batch17's real lines (verl loading weights into a running vLLM)
        [
            VERL + '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/fused_moe/layer.py", line 1006, in _load_w13',
            VERL + "    loaded_weight = loaded_weight.narrow(",
            VERL + "IndexError: start out of range (expected to be in range of [-768, 768], but got 3072)",
        ],
        # variants: SGLang's fused-MoE loader, vLLM's linear layer's weight_loader
        [
            "Traceback (most recent call last):",
            *_frame(f"{SG_SITE}/sglang/srt/layers/moe/fused_moe_triton/layer.py", 1163, "weight_loader", "self._load_w2("),
            *_frame(f"{SG_SITE}/sglang/srt/layers/moe/fused_moe_triton/layer.py", 881, "_load_w2", "expert_data.copy_(loaded_weight)"),
            "RuntimeError: The size of tensor a (768) must match the size of tensor b (3072) at non-singleton dimension 0",
        ],
        [
            "Traceback (most recent call last):",
            *_frame(f"{SG_SITE}/vllm/model_executor/layers/linear.py", 1211, "weight_loader", "assert param_data.shape == loaded_weight.shape"),
            "AssertionError",
        ],
    ],
)
def test_a_traceback_through_a_layers_weight_loader_is_a_model_load_error(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class == "model_load_error"


def test_other_frames_of_those_names_or_an_oom_in_the_loader_are_not_that() -> None:
    # a _load_ function outside the layers packages (a worker's, a server's): not a layer's weight loader
    worker = ["Traceback (most recent call last):", *_frame(f"{SG_SITE}/vllm/v1/worker/gpu_worker.py", 1, "_load_lora_adapter", "raise x"), "IndexError: list index out of range"]
    assert diagnose_text(worker).failure_class == "unknown"
    # an OOM while the loader copies a tensor is the OOM
    oom = ["Traceback (most recent call last):", *_frame(f"{SG_SITE}/vllm/model_executor/layers/linear.py", 1, "weight_loader", "x = y.to(z)"), OOM]
    assert diagnose_text(oom).failure_class == "cuda_oom"


OTHER_RANKS = "ValueError: TP rank 1 could finish the model loading, but there are other ranks that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node."


def test_ranks_that_did_not_finish_loading_are_a_model_load_error_after_their_cause() -> None:
    diagnosis = diagnose_text([OTHER_RANKS])
    assert diagnosis.failure_class == "model_load_error" and diagnosis.figures.get("finished_rank") == "1"
    assert diagnose_file(BATCH17_HELDOUT / "sglang-ktransformers-kimi-k2-thinking-tp8-other-ranks-did-not-finish-loading.log").failure_class == "model_load_error"
    # the other rank's own failure, printed after it, is the cause
    assert diagnose_text([OTHER_RANKS, "[2026-01-01 00:00:00 TP2] " + OOM]).failure_class == "cuda_oom"


# Kind 4: a request's exception on a server that answers it. uvicorn's access line ('%s - "%s %s HTTP/%s" %d') with 4xx or
# 500 (Starlette's ServerErrorMiddleware for a handler that raised) after an exception no class names, with no process
# death in the start: the request failed, the server lives on.
ANSWERED_500 = 'INFO:     127.0.0.1:51720 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error'


def test_a_requests_exception_answered_with_its_error_is_no_failure() -> None:
    real = diagnose_file(BATCH17_HELDOUT / "sglang-omni-qwen3-omni-nixl-relay-chat-500-audio-target-sr.log")
    assert real.failure_class is None and [finding.name for finding in real.findings] == ["recovered_error"]
    variant = [
        "Traceback (most recent call last):",
        '  File "/x/serving.py", line 3, in create',
        "ValueError: bad image",
        '[2026-01-01 00:00:00] INFO:     10.0.0.1:5 - "POST /generate HTTP/1.1" 400 Bad Request',
    ]
    assert diagnose_text(variant).failure_class is None


@pytest.mark.parametrize(
    "lines",
    [
        # the server is unavailable, not answering a request's error
        ["RuntimeError: boom", ANSWERED_500.replace("500 Internal Server Error", "503 Service Unavailable")],
        # a process died beside it
        ["[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):", "RuntimeError: boom", ANSWERED_500],
        [
            "RuntimeError: boom",
            "(APIServer pid=1) ERROR 01-01 00:00:00 [async_llm.py:1] AsyncLLM output_handler failed.",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
            ANSWERED_500,
        ],
        # the answer came before the exception
        [ANSWERED_500, "RuntimeError: boom"],
    ],
)
def test_an_error_answer_beside_a_dead_process_or_before_the_exception_proves_nothing(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class == "unknown"


# batch18-heldout: 33 real logs from 33 threads no other manifest names, under batch17's rule, committed (c378a41) before
# fleet read them and measured once untouched with the round-thirteen rules (benchmarks/results/diagnose-heldout.md).
BATCH18_HELDOUT = REAL.parent / "batch18-heldout"


def test_batch18_keeps_its_tune_figure() -> None:
    """33 real logs (26 vLLM, 7 SGLang): 24/33 right (failures 22/31; 20/27 where the excerpt shows the cause) from the
    bare log, measured once untouched with the round-thirteen rules (943b9ec); 29/33 (27/31; 25/27) after the rules of its
    miss kinds (the tests below, round fourteen). A tune split since. A floor, not a file check."""
    entries = _manifest(BATCH18_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 27 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert _heldout_right(BATCH18_HELDOUT, 33) >= 30  # round twenty-five: the reading since round twenty-four


# -- batch18's miss kinds as class rules, each from the source that prints the text (issue 27, round fourteen) -------
# Model refusals in other words: SGLang's resolver (srt/model_loader/utils.py:186, f"{arch} has no SGlang implementation
# and the Transformers implementation is not compatible with SGLang."), vLLM's older MiniCPMV refusal (0.6-0.10
# minicpmv.py, "Currently, MiniCPMV only supports versions 2.0, 2.5, and 2.6", no "Got version"), and a model JSON file
# that does not parse while ModelConfig validates (json's "%s: line %d column %d (char %d)" as pydantic's "Value error, ").
MODELCONFIG_INVALID = "(APIServer pid=7) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"


@pytest.mark.parametrize(
    ("lines", "figure"),
    [
        # variants from the format strings
        (["ValueError: BertForSequenceClassification has no SGlang implementation and the Transformers implementation is not compatible with SGLang."], "BertForSequenceClassification"),
        (["[2026-01-01 00:00:00] ValueError: Foo has no SGlang implementation and the Transformers implementation is not compatible with SGLang."], "Foo"),
        (["ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, and 2.6"], "MiniCPMV"),
        (["ERROR 01-01 00:00:00 [core.py:1] ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, and 4.0"], "MiniCPMV"),
        (["ValueError: Currently, MiniCPMO only supports versions 2.6. Got version: (4, 5)"], "MiniCPMO"),
        ([MODELCONFIG_INVALID, "(APIServer pid=7)   Value error, Expecting value: line 1 column 1 (char 0) [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]"], None),
        ([MODELCONFIG_INVALID, "  Value error, Expecting property name enclosed in double quotes: line 3 column 5 (char 20) [type=value_error]"], None),
        ([MODELCONFIG_INVALID, "  Value error, Extra data: line 2 column 1 (char 41) [type=value_error]"], None),
    ],
)
def test_model_refusals_and_unparsable_model_json_in_other_words_are_model_load_error(lines: list[str], figure: str | None) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error"
    if figure is not None:
        assert figure in diagnosis.figures.values()


@pytest.mark.parametrize(
    "lines",
    [
        # the resolver's warning twin, a pydantic value error that is not json's, a version list in other words
        ["[2026-01-01 00:00:00] Foo has no SGLang implementation, falling back to Transformers implementation. Some features may not be supported and performance may not be optimal.", SG_UVICORN_UP],
        [MODELCONFIG_INVALID, "  Value error, Invalid repository ID [type=value_error]"],
        ["INFO 01-01 00:00:00 [x.py:1] This kernel only supports versions 2 and 3 of the format", VLLM_UP],
    ],
)
def test_other_words_beside_those_refusals_are_not_model_load_error(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class != "model_load_error"


# SGLang's argument parser refusal copied without its prog: argparse's "%(prog)s: error: %(message)s" with the
# head cut, "error: unrecognized arguments: %s" (Lib/argparse.py), read like the prefixed refusal (unknown, the flag named).
@pytest.mark.parametrize(
    ("line", "prog"),
    [
        ("error: unrecognized arguments: --model-variant fl2va", None),
        ("launch_server.py: error: unrecognized arguments: --foo 1", "launch_server.py"),
        ("sglang serve: error: unrecognized arguments: --foo", "sglang serve"),
    ],
)
def test_an_unrecognized_argument_with_or_without_the_prog_is_a_refused_command_line(line: str, prog: str | None) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "unknown" and diagnosis.figures.get("refused_argument")
    assert diagnosis.figures.get("prog") == prog
    assert "refused its command line" in str(diagnosis.fix)


def test_a_linker_error_is_no_refused_command_line() -> None:
    assert "refused_argument" not in diagnose_text(["ld.lld: error: unrecognized arguments here"]).figures


@pytest.mark.parametrize(
    ("name", "failure_class"),
    [
        ("sglang-047-bge-reranker-v2-m3-xlmroberta-no-sglang-implementation.log", "model_load_error"),
        ("vllm-minicpmv-only-supports-versions-20-25-26-refusal.log", "model_load_error"),
        ("vllm-0102-minicpm-v45-modelconfig-validation-expecting-value.log", "model_load_error"),
        ("sglang-0516-serve-diffusion-unrecognized-argument-model-variant.log", "unknown"),
    ],
)
def test_batch18s_real_logs_of_those_kinds(name: str, failure_class: str) -> None:
    diagnosis = diagnose_file(BATCH18_HELDOUT / name)
    assert diagnosis.failure_class == failure_class and diagnosis.evidence


# An installed package's import-time code raising an AttributeError (CPython's "<module>" frame is a module's top level run
# by import): the deepest "<module>" frame in a site- or dist-packages package other than the engine's is that import failing.
def _import_traceback(package_frames: list[str], error: str = "AttributeError: 'NoneType' object has no attribute 'split'") -> list[str]:
    return [
        "(EngineCore_DP0 pid=7) Traceback (most recent call last):",
        '(EngineCore_DP0 pid=7)   File "/usr/local/lib/python3.10/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 43, in <module>',
        "(EngineCore_DP0 pid=7)     from x import y",
        *package_frames,
        f"(EngineCore_DP0 pid=7) {error}",
    ]


@pytest.mark.parametrize(
    ("lines", "module"),
    [
        # variants from CPython's frame format
        (
            _import_traceback(
                [
                    '(EngineCore_DP0 pid=7)   File "/usr/local/lib/python3.10/dist-packages/somepkg/__init__.py", line 20, in <module>',
                    "(EngineCore_DP0 pid=7)     v = probe()",
                    '(EngineCore_DP0 pid=7)   File "/usr/local/lib/python3.10/dist-packages/somepkg/__init__.py", line 16, in probe',
                ]
            ),
            "somepkg",
        ),
        (
            _import_traceback(['  File "/opt/venv/lib/python3.12/site-packages/other_ops/ops.py", line 5, in <module>'], "AttributeError: module 'torch' has no attribute 'foo'"),
            "other_ops",
        ),
    ],
)
def test_an_attribute_error_in_a_packages_import_time_code_is_import_error(lines: list[str], module: str) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error" and diagnosis.figures.get("module") == module


@pytest.mark.parametrize(
    "lines",
    [
        # the deepest "<module>" frame is the engine's own; the exception is no AttributeError; no "<module>" frame at all
        _import_traceback([]),
        _import_traceback(['  File "/usr/lib/python3/dist-packages/somepkg/__init__.py", line 20, in <module>'], "RuntimeError: boom"),
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/somepkg/core.py", line 20, in run',
            "AttributeError: 'NoneType' object has no attribute 'split'",
        ],
    ],
)
def test_other_tracebacks_are_no_failed_package_import(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class != "import_error" and "module" not in diagnosis.figures


def test_batch18s_package_import_failing_with_an_attribute_error() -> None:
    diagnosis = diagnose_file(BATCH18_HELDOUT / "vllm-gpustack-hygon-dcu-k100-lightop-import-dtk-version-none.log")
    assert diagnosis.failure_class == "import_error" and diagnosis.figures.get("module") == "lightop"


# batch20-heldout: 40 real vLLM logs from 40 sources no other manifest or skipped list names (11 public threads, 29 run
# logs that projects committed, cited by blob URL), under batch18's rule, committed (e8a64a5) before fleet read them and
# measured once untouched with the diagnose code of e8fa16e (benchmarks/results/diagnose-heldout.md); a tune split since
# round fifteen.
BATCH20_HELDOUT = REAL.parent / "batch20-heldout"


def test_batch20_keeps_its_tune_figure() -> None:
    """40 real vLLM logs: 36/40 right (failures 29/31; 30/33 where the excerpt shows the cause, failures 23/24) from the
    bare log, measured once untouched with the diagnose code of e8fa16e; 40/40 (31/31; 33/33) after the rules of its miss
    kinds (round fifteen, the tests below). A tune split since. A floor, not a file check. No source is named by another
    folder's skipped list either."""
    import re

    entries = _manifest(BATCH20_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 33 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert all(entry["engine"] == "vllm" for entry in entries)
    skipped = [
        {"source": url}
        for folder in (*REAL.parent.iterdir(), REAL.parent.parent / "sample-logs")
        if folder != BATCH20_HELDOUT and folder.is_dir()
        for listing in folder.glob("skipped*.txt")
        for url in re.findall(r"https?://\S+", listing.read_text())
    ]
    assert not _threads(entries) & _threads(skipped)
    assert _heldout_right(BATCH20_HELDOUT, 40) >= 40


# batch19-heldout: 21 real SGLang logs from 21 sources no other manifest or skipped list names (5 public threads, 16 run
# logs that projects committed, cited by blob URL), under batch18's rule, committed (396d789) before fleet read them and
# measured once untouched with the diagnose code of e8fa16e (benchmarks/results/diagnose-heldout.md); a tune split since
# round fifteen.
BATCH19_HELDOUT = REAL.parent / "batch19-heldout"


def test_batch19_keeps_its_tune_figure() -> None:
    """21 real SGLang logs: 11/21 right (failures 7/14; 11/17 where the excerpt shows the cause, failures 7/10) from the
    bare log, measured once untouched with the diagnose code of e8fa16e; 18/21 (11/14; 17/17) after the rules of its miss
    kinds and the CuTe log's relabel (round fifteen, the tests below). The three left are cut starts read as stalls (the
    stall-evidence conflict, diagnose-heldout.md). A tune split since. A floor, not a file check. No source is named by
    another folder's skipped list either."""
    import re

    entries = _manifest(BATCH19_HELDOUT)
    assert sum(entry["shows_cause"] is True for entry in entries) == 17 and all(isinstance(entry["shows_cause"], bool) for entry in entries)
    assert all(entry["engine"] == "sglang" for entry in entries)
    skipped = [
        {"source": url}
        for folder in (*REAL.parent.iterdir(), REAL.parent.parent / "sample-logs")
        if folder != BATCH19_HELDOUT and folder.is_dir()
        for listing in folder.glob("skipped*.txt")
        for url in re.findall(r"https?://\S+", listing.read_text())
    ]
    assert not _threads(entries) & _threads(skipped)
    assert _heldout_right(BATCH19_HELDOUT, 21) >= 18


# -- round fifteen (batch19 and batch20 become tune splits) -------------------------------------------------------
# Rule of the ranking, fatal over warning extended: a failure is where a start stops. An error line after which the
# start went through further start-up steps and came up (listening, serving, ready) did not stop it, whatever its words;
# so is an error the engine says it goes on after (see the next rule). Variants from SGLang's 0.5 start-up lines.
SG_STEPS = [
    "[2026-01-01 00:00:02] Init torch distributed begin.",
    "[2026-01-01 00:00:03] Init torch distributed ends. mem usage=0.00 GB",
    "[2026-01-01 00:00:03] Load weight begin. avail mem=78.00 GB",
    "[2026-01-01 00:00:08] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.00 GB, mem usage=16.00 GB.",
]
SG_READY = [SG_UVICORN_UP, '[2026-01-01 00:00:10] INFO:     127.0.0.1:4 - "POST /generate HTTP/1.1" 200 OK', READY]
MISSING_FILE = "[2026-01-01 00:00:01] OSError: org/model does not appear to have a file named preprocessor_config.json."
READ_TIMEOUT_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/httpx/_transports/default.py", line 77, in map_httpcore_exceptions',
    "    raise mapped_exc(message) from exc",
    "httpx.ReadTimeout: The read operation timed out",
]


@pytest.mark.parametrize("error", [[MISSING_FILE], READ_TIMEOUT_TRACEBACK, [OOM]])
def test_an_error_the_start_went_on_through_its_steps_after_and_came_up_is_not_the_failure(error: list[str]) -> None:
    diagnosis = diagnose_text([*error, *SG_STEPS, *SG_READY])
    assert diagnosis.failure_class is None
    assert any(finding.name == "recovered_error" for finding in diagnosis.findings)


@pytest.mark.parametrize("error", [[MISSING_FILE], READ_TIMEOUT_TRACEBACK])
def test_an_error_with_no_step_between_it_and_readiness_still_counts(error: list[str]) -> None:
    # An excerpt that begins at the error and then shows the server up (a scheduler that died while the front end answers
    # /health): nothing says the start went on after it.
    assert diagnose_text([*error, *SG_READY]).failure_class is not None
    # And a start that never came up after its steps: the error stays the failure.
    assert diagnose_text([*SG_STEPS[:2], *error, *SG_STEPS[2:]]).failure_class is not None


# An engine's own words that it goes on after an error (classify._GOES_ON, from SGLang's retry() helper, its generation-config
# reader and its CI weight validator): the error it reports on that line, the line before or the traceback just before is handled.
def _retry_line(try_index: int = 0, delay: float = 0.96) -> str:
    return f"[2026-03-30 19:35:44] retry() failed once ({try_index}th try, maximum 2 retries). Will delay {delay:.2f}s and retry. Error: The read operation timed out"


GENERATION_CONFIG_0516 = (
    "[2026-08-01 21:40:38] Failed to load generation config for org/m: org/m does not appear to have a file named "
    "generation_config.json. Checkout 'https://huggingface.co/org/m/tree/main' for available files.. Proceeding without generation config."
)
GENERATION_CONFIG_0523 = "[2026-08-01 21:40:38] No generation config for org/m: org/m does not appear to have a file named generation_config.json. Proceeding without it."
CORRUPTED = [
    "[2026-01-03 04:44:41] Corrupted safetensors file detected: /hf/model-00002-of-000002.safetensors - SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
    "[2026-01-03 04:44:41] Removed 1 corrupted file(s) for org/m. These will be re-downloaded on next load.",
]


@pytest.mark.parametrize(
    "handled",
    [
        [*READ_TIMEOUT_TRACEBACK, _retry_line()],
        [*READ_TIMEOUT_TRACEBACK, "", "During handling of the above exception, another exception occurred:", "", *READ_TIMEOUT_TRACEBACK, _retry_line(1, 3.5)],
        [GENERATION_CONFIG_0516],
        [GENERATION_CONFIG_0523],
        CORRUPTED,
    ],
)
def test_an_error_the_engine_says_it_goes_on_after_is_not_the_failure(handled: list[str]) -> None:
    # Cut right after the next step began: no failure line, so the end is read as a start cut or stalled, not the error.
    diagnosis = diagnose_text([*SG_STEPS[:2], *handled, SG_STEPS[2]])
    assert diagnosis.failure_class not in ("model_load_error",) and not any(item.text.startswith("Traceback") for item in diagnosis.evidence)
    assert any(finding.name == "recovered_error" for finding in diagnosis.findings)
    assert diagnose_text([*handled, *SG_STEPS, *SG_READY]).failure_class is None


@pytest.mark.parametrize(
    ("lines", "failure_class"),
    [
        # the words without the engine's "goes on"; retry()'s own give-up; an error after the retry line
        ([GENERATION_CONFIG_0516.replace(" Proceeding without generation config.", "")], "model_load_error"),
        ([*READ_TIMEOUT_TRACEBACK, "Exception: retry() exceed maximum number of retries."], "unknown"),
        ([*READ_TIMEOUT_TRACEBACK, _retry_line(), MISSING_FILE], "model_load_error"),
    ],
)
def test_errors_the_engine_did_not_say_it_went_on_after_still_count(lines: list[str], failure_class: str) -> None:
    diagnosis = diagnose_text([*SG_STEPS[:2], *lines])
    assert diagnosis.failure_class == failure_class
    assert not any(finding.name == "recovered_error" for finding in diagnosis.findings) or lines[-1] == MISSING_FILE


# A stop by a signal (label convention, round fifteen): a start that came up and is then stopped by a signal, in the
# engine's own shutdown lines, is healthy whatever its teardown prints; one stopped before it came up is unknown, with its
# stall point. Variants from vLLM 0.25's shutdown sequence (v1/engine/core.py, entrypoints/launcher.py, async_llm.py) and
# SGLang's tokenizer manager's SIGTERM handler.
VLLM_SIGTERM_TEARDOWN = [
    "(EngineCore pid=9) INFO 08-01 21:34:51 [core.py:1214] [shutdown] EngineCore: trigger received signal=SIGTERM",
    "(APIServer pid=7) INFO 08-01 21:34:51 [launcher.py:100] [shutdown] API server: shutdown triggered",
    "(APIServer pid=7) INFO 08-01 21:34:51 [launcher.py:116] [shutdown] API server: stopping engine client mode=abort timeout=0s",
    "(APIServer pid=7) ERROR 08-01 21:34:51 [async_llm.py:704] AsyncLLM output_handler failed.",
    "(APIServer pid=7) ERROR 08-01 21:34:51 [async_llm.py:704] Traceback (most recent call last):",
    '(APIServer pid=7) ERROR 08-01 21:34:51 [async_llm.py:704]   File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core_client.py", line 1061, in get_output_async',
    "(APIServer pid=7) ERROR 08-01 21:34:51 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
]
VLLM_OLD_SIGTERM = [
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.10/site-packages/vllm/entrypoints/openai/api_server.py", line 1307, in signal_handler',
    '    raise KeyboardInterrupt("terminated")',
    "KeyboardInterrupt: terminated",
]
SG_SIGTERM_TEARDOWN = [
    "[2026-08-02 00:17:43] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
    "[2026-08-02 00:17:43] Subprocess detokenizer (pid=31379) crashed with exit code -15. Triggering SIGQUIT for cleanup...",
    "[2026-08-02 00:17:43] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
]
VLLM_SERVING = [VLLM_UP, '(APIServer pid=7) INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK']


@pytest.mark.parametrize(
    "lines",
    [[*VLLM_SERVING, *VLLM_SIGTERM_TEARDOWN], [*VLLM_SERVING, *VLLM_OLD_SIGTERM], [*SG_STEPS, *SG_READY, *SG_SIGTERM_TEARDOWN]],
)
def test_a_server_stopped_by_a_signal_after_it_came_up_is_healthy(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class is None


@pytest.mark.parametrize("teardown", [VLLM_SIGTERM_TEARDOWN, VLLM_OLD_SIGTERM, SG_SIGTERM_TEARDOWN])
def test_a_start_stopped_by_a_signal_before_it_came_up_is_unknown_with_its_stall_point(teardown: list[str]) -> None:
    diagnosis = diagnose_text([*SG_STEPS[:3], *teardown])
    assert diagnosis.failure_class == "unknown"
    assert diagnosis.evidence[0].text == "last startup step: loading weights" and diagnosis.evidence[-1].text.startswith("stopped by a signal")
    # With the run record's word that the start timed out (the launcher's own stop), it is the timeout.
    from fleet.host.diagnose.classify import DiagnosisHint

    assert diagnose_text([*SG_STEPS[:3], *teardown], hint=DiagnosisHint(server_start_timed_out=True)).failure_class == "server_start_timeout"


@pytest.mark.parametrize(
    "line",
    [
        # a stop for a failed health check; Ray's own handler (vLLM's executor sends it after any end); no signal at all
        "[2026-01-01 00:00:00] Signal SIGTERM received while health check failed. Force exiting.",
        "[2025-05-26 18:58:10,599 E 629624 629624] logging.cc:496: *** SIGTERM received at time=1748300290 on cpu 8 ***",
        "(APIServer pid=7) INFO 08-01 21:34:51 [launcher.py:100] [shutdown] API server: shutdown triggered",
    ],
)
def test_other_words_are_no_stop_by_a_signal(line: str) -> None:
    assert diagnose_text([*VLLM_SERVING, line, OOM]).failure_class == "cuda_oom"


def test_a_failure_before_the_signal_is_still_the_failure() -> None:
    assert diagnose_text([*VLLM_SERVING, OOM, *VLLM_SIGTERM_TEARDOWN]).failure_class == "cuda_oom"


# A utility call that failed on a live vLLM engine (v1/engine/core.py _invoke_utility_method: logger.exception("Invocation of
# %s method failed", name), then the caller's f"Call to {name} method failed: {str(e)}"): the engine goes on. Like a failed
# request on a server that goes on serving (the request-error rule, which reads only unnamed exceptions), it is healthy when
# the server came up before it and answered a request after it. Variants from those format strings.
def _failed_call(method: str, error: str) -> list[str]:
    return [
        "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:139",
        f"(EngineCore pid=9) ERROR 06-02 14:31:01 [core.py:1365] Invocation of {method} method failed",
        "(EngineCore pid=9) ERROR 06-02 14:31:01 [core.py:1365] Traceback (most recent call last):",
        '(EngineCore pid=9) ERROR 06-02 14:31:01 [core.py:1365]   File "/venv/lib/python3.13/site-packages/vllm/device_allocator/cumem.py", line 59, in create_and_map',
        f"(EngineCore pid=9) ERROR 06-02 14:31:01 [core.py:1365] RuntimeError: {error}",
        f'(APIServer pid=7) INFO:     127.0.0.1:39984 - "POST /{method} HTTP/1.1" 500 Internal Server Error',
        f"(APIServer pid=7) Exception: Call to {method} method failed: {error}",
    ]


ANSWERED = '(APIServer pid=7) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


@pytest.mark.parametrize(
    ("method", "error"),
    [("wake_up", "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:139"), ("add_lora", "CUDA out of memory. Tried to allocate 2.00 GiB.")],
)
def test_a_failed_utility_call_on_a_live_server_that_goes_on_is_healthy(method: str, error: str) -> None:
    diagnosis = diagnose_text([*VLLM_SERVING, *_failed_call(method, error), ANSWERED])
    assert diagnosis.failure_class is None and any(finding.name == "recovered_error" for finding in diagnosis.findings)


@pytest.mark.parametrize(
    "lines",
    [
        # no request answered after it; before the server came up; the caller's line missing (the call's end unknown)
        [*VLLM_SERVING, *_failed_call("wake_up", "CUDA Error: out of memory at x.cpp:1")],
        [*_failed_call("wake_up", "CUDA Error: out of memory at x.cpp:1"), *VLLM_SERVING],
        [*VLLM_SERVING, *_failed_call("wake_up", "CUDA Error: out of memory at x.cpp:1")[:-1], ANSWERED],
    ],
)
def test_a_failed_utility_call_the_server_did_not_go_on_after_still_counts(lines: list[str]) -> None:
    assert diagnose_text(lines).failure_class == "cuda_oom"


# Failure texts in new words. SGLang's kv_cache_configurator.py (0.5.16 :1561, 0.5.23 :3051): f"Loaded weights leave no GPU
# memory for the KV cache under --mem-fraction-static={...}. Raise --mem-fraction-static above {:.3f} (minimum viable = ...)",
# whole or cut after its first sentence.
@pytest.mark.parametrize(
    ("line", "figure"),
    [
        ("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.", "0.88"),
        (
            "[2026-08-19 05:00:00] ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.8. Raise "
            "--mem-fraction-static above 0.853 (minimum viable = 1 - available/pre = 0.8521). If using speculative decoding, draft weights are now counted.",
            "0.853",
        ),
    ],
)
def test_weights_that_leave_no_memory_for_the_kv_cache_are_kv_pool_too_small(line: str, figure: str) -> None:
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "kv_pool_too_small" and figure in str(diagnosis.fix)


# NVSHMEM's transport set-up, "<file>:<line>: <message>" (3.x src/host/topo/topo.cpp:469 "[GPU %d] Peer GPU %d is not
# accessible, exiting ...", src/host/init/init.cu:1037 "non-zero status: %d building transport map failed"): the ranks'
# communication failed (nccl_error), and the scheduler's EOFError it caused is its consequence (cause over consequence).
NVSHMEM = "/build/nvshmem/src/host/topo/topo.cpp:469: [GPU {gpu}] Peer GPU {peer} is not accessible, exiting ... "
NVSHMEM_INIT = "/build/nvshmem/src/host/init/init.cu:1037: non-zero status: 3 building transport map failed "
DP_EOF = [
    "[2026-08-19 05:29:34] DataParallelController hit an exception: Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/managers/data_parallel_controller.py", line 90, in launch',
    "EOFError",
]


@pytest.mark.parametrize("lines", [[NVSHMEM.format(gpu=1, peer=8), NVSHMEM_INIT, *DP_EOF], [NVSHMEM_INIT, *DP_EOF], [NVSHMEM.format(gpu=0, peer=15)]])
def test_nvshmem_transport_failures_are_nccl_error_over_the_eof_they_cause(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "nccl_error" and diagnosis.evidence[0].line == 1


def test_nvshmem_words_alone_are_no_transport_failure() -> None:
    assert diagnose_text(["/build/nvshmem/src/host/topo/topo.cpp:400: [GPU 1] Peer GPU 8 is accessible", *DP_EOF]).failure_class == "unknown"


# vLLM's end of compilation in both wordings (compilation/monitor.py: "torch.compile takes %.2f s in total" up to 0.22,
# "%storch.compile took %.2f s in total" since 0.25): a start cut right after it was between steps, not stalled compiling.
@pytest.mark.parametrize("verb", ["takes", "took"])
def test_a_start_cut_after_torch_compile_ended_is_no_stall_inside_it(verb: str) -> None:
    lines = [
        "(EngineCore pid=7) INFO 08-01 17:49:03 [backends.py:1] Compiling a graph for dynamic shape takes 20.1 s",
        f"(EngineCore pid=7) INFO 08-01 17:49:34 [monitor.py:53] torch.compile {verb} 30.61 s in total",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown" and diagnosis.evidence[0].text == "last startup step: done compiling the model"


# Round fourteen's package-import rule read only an AttributeError although a package's top level fails as often with a
# TypeError (an annotation or call the running Python refuses): FlashInfer's comm/fd_exchange.py "def _fd_ancillary(fd: int)
# -> tuple[tuple[int, int, array.array[int]]]:" on Python 3.11 ("TypeError: type 'array.array' is not subscriptable"),
# here under vLLM's EngineCore logger prefix and bare. Variants from CPython's frame format.
@pytest.mark.parametrize(
    ("error", "prefix"),
    [
        ("TypeError: type 'array.array' is not subscriptable", "(EngineCore pid=7) ERROR 08-12 04:47:25 [core.py:1349] "),
        ("TypeError: type 'array.array' is not subscriptable", ""),
        ("TypeError: 'type' object is not subscriptable", "(EngineCore_DP0 pid=7) "),
    ],
)
def test_a_type_error_in_a_packages_import_time_code_is_import_error(error: str, prefix: str) -> None:
    lines = [
        f"{prefix}Traceback (most recent call last):",
        f'{prefix}  File "/venv/lib/python3.11/site-packages/vllm/compilation/passes/fusion/allreduce_rms_fusion.py", line 90, in <module>',
        f"{prefix}    import flashinfer.comm as flashinfer_comm",
        f'{prefix}  File "/venv/lib/python3.11/site-packages/flashinfer/comm/fd_exchange.py", line 55, in <module>',
        f"{prefix}    def _fd_ancillary(fd: int) -> tuple[tuple[int, int, array.array[int]]]:",
        f"{prefix}{error}",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error" and diagnosis.figures.get("module") == "flashinfer"
    assert "TypeError in flashinfer" in str(diagnosis.fix)


# A kernel library's module that refuses the CUDA toolkit when imported (nvidia-cutlass-dsl 4.5.0's base wheel,
# cutlass/cute/experimental/__init__.py: raise NotImplementedError("CuTe Experimental module is only supported on Cuda
# toolkit 13.1 and above!")), alone or re-raised by SGLang's capture wrapper: an import failure, the cause over the wrapper.
@pytest.mark.parametrize(
    "lines",
    [
        ["NotImplementedError: CuTe Experimental module is only supported on Cuda toolkit 13.1 and above!"],
        [
            CAPTURE,
            "NotImplementedError: CuTe Experimental module is only supported on Cuda toolkit 13.1 and above!",
            "Exception: Capture cuda graph failed: CuTe Experimental module is only supported on Cuda toolkit 13.1 and above!",
        ],
        [CAPTURE, "Exception: Capture cuda graph failed: CuTe Experimental module is only supported on Cuda toolkit 13.2 and above!"],
    ],
)
def test_a_kernel_module_refusing_the_cuda_toolkit_at_import_is_import_error(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error" and "CUDA 13." in str(diagnosis.fix)


def test_batch19s_cute_toolkit_refusal_inside_capture() -> None:
    diagnosis = diagnose_file(BATCH19_HELDOUT / "sglang-ci-h200-hicache-capture-cuda-graph-failed-cute-needs-toolkit-131.log")
    assert diagnosis.failure_class == "import_error" and diagnosis.consequences == ("cuda_graph_error",)


# The real logs of round fifteen's kinds, each read as its label from the bare log (the variants above test the rules).
@pytest.mark.parametrize(
    ("folder", "name", "failure_class"),
    [
        ("batch19-heldout", "sglang-0516-dgx-spark-laguna-int4-serving-400s-then-sigterm-shutdown.log", None),
        ("batch19-heldout", "sglang-docs-send-request-qwen25-05b-hf-timeouts-retried-then-serving.log", None),
        ("batch19-heldout", "sglang-docs-structured-outputs-llama31-8b-hf-read-timeout-traceback-then-serving.log", None),
        ("batch19-heldout", "sglang-docs-separate-reasoning-r1-distill-7b-corrupted-safetensors-removed-cut-in-capture.log", "unknown"),
        ("batch19-heldout", "sglang-dsv4-hopper-dsv4-pro-fp8-h200-tp8-weights-leave-no-memory-for-kv-cache.log", "kv_pool_too_small"),
        ("batch19-heldout", "sglang-dsv4-flash-p5en-two-node-deepep-decode-nvshmem-peer-gpu-not-accessible.log", "nccl_error"),
        ("batch20-heldout", "vllm-0251-dgx-spark-serving-then-sigterm-shutdown-output-handler-trace.log", None),
        ("batch20-heldout", "vllm-0220-sleep-mode-wake-up-cumem-allocator-cuda-out-of-memory-then-shutdown.log", None),
        ("batch20-heldout", "vllm-0251-dgx-spark-start-cut-after-torch-compile-run1.log", "unknown"),
        ("batch20-heldout", "vllm-0271-py311-warmup-imports-flashinfer-comm-array-not-subscriptable.log", "import_error"),
        ("batch16-heldout", "sglang-dynamo-031-sighup-sigterm-children-exitcode-15.log", None),
    ],
)
def test_round_fifteens_real_logs(folder: str, name: str, failure_class: str | None) -> None:
    diagnosis = diagnose_file(REAL.parent / folder / name)
    assert diagnosis.failure_class == failure_class
    if failure_class is not None:
        assert diagnosis.evidence and diagnosis.fix


# batch21-heldout: 38 real logs (12 SGLang, 26 vLLM) from 38 sources no other manifest or skipped list names (one PR
# excerpt, 37 run logs that projects committed, cited by blob URL), under batch18's rule, committed (15a3b65) before
# fleet read them and measured once untouched with the diagnose code of df1af24 (benchmarks/results/diagnose-heldout.md,
# "batch21-heldout"); a tune split since round sixteen.
BATCH21_HELDOUT = REAL.parent / "batch21-heldout"


def test_batch21_keeps_its_tune_figure() -> None:
    """38 real logs, 12 SGLang and 26 vLLM: 31/38 right (failures 20/26; SGLang 9/12, vLLM 22/26; 28/33 where the excerpt
    shows the cause, failures 17/21) from the bare log, measured once untouched with the diagnose code of df1af24; 36/38
    (failures 24/26) after the rules of its miss kinds (round sixteen, the tests below). The two left: a cut start read as
    a stall (the stall-evidence conflict) and a model-code TypeError in a decode path that capture ran first (read
    cuda_graph_error, labelled unknown). A tune split since. A floor, not a file check. No source is named by another
    folder's manifest or skipped list, and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH21_HELDOUT, total=38, floor=36, shows_cause=33, sglang=12)


# Round sixteen. A stop by a signal in two more wordings: vLLM's V0 engine process (0.6-0.10 engine/multiprocessing/engine.py
# signal_handler: raise KeyboardInterrupt("MQLLMEngine terminated")), after the V0 launcher's "Shutting down FastAPI HTTP
# server." (entrypoints/launcher.py); huggingface_hub's Xet downloader's SIGINT handler (xet-core hf_xet/src/runtime.rs:
# eprintln!("Cancellation requested; stopping current tasks.")), then asyncio.Runner's _on_sigint KeyboardInterrupt.
VLLM_V0_SIGTERM = [
    "INFO 04-14 08:41:19 multiproc_worker_utils.py:141] Terminating local vLLM worker processes",
    "INFO 04-14 08:41:19 launcher.py:59] Shutting down FastAPI HTTP server.",
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.12/site-packages/vllm/engine/multiprocessing/engine.py", line 374, in signal_handler',
    '    raise KeyboardInterrupt("MQLLMEngine terminated")',
    "KeyboardInterrupt: MQLLMEngine terminated",
    "INFO:     Shutting down",
]
XET_SIGINT = [
    "Cancellation requested; stopping current tasks.",
    "(APIServer pid=13078) Traceback (most recent call last):",
    '(APIServer pid=13078)   File "/usr/lib/python3.13/asyncio/runners.py", line 157, in _on_sigint',
    "(APIServer pid=13078)     raise KeyboardInterrupt()",
    "(APIServer pid=13078) KeyboardInterrupt",
]
VLLM_V0_SERVING = [
    "INFO:     Application startup complete.",
    'INFO:     ::1:41700 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]


@pytest.mark.parametrize("teardown", [VLLM_V0_SIGTERM, XET_SIGINT])
def test_round_sixteens_signal_wordings_after_readiness_are_healthy(teardown: list[str]) -> None:
    assert diagnose_text([*VLLM_V0_SERVING, *teardown]).failure_class is None
    assert diagnose_text([*VLLM_SERVING, *teardown]).failure_class is None


@pytest.mark.parametrize("teardown", [VLLM_V0_SIGTERM, XET_SIGINT])
def test_round_sixteens_signal_wordings_before_readiness_are_unknown_with_the_stall_point(teardown: list[str]) -> None:
    diagnosis = diagnose_text([*SG_STEPS[:3], *teardown])
    assert diagnosis.failure_class == "unknown"
    assert diagnosis.evidence[0].text == "last startup step: loading weights" and diagnosis.evidence[-1].text.startswith("stopped by a signal")


@pytest.mark.parametrize(
    "line",
    [
        # an interrupt the engine's handler did not raise, and a worker's own KeyboardInterrupt with other words
        "KeyboardInterrupt: MQLLMEngine shut down",
        "Cancellation requested by the user for request 12.",
    ],
)
def test_other_interrupt_words_are_no_stop_by_a_signal(line: str) -> None:
    assert diagnose_text([*VLLM_SERVING, line, OOM]).failure_class == "cuda_oom"


# gpt-oss's tokenizer encoding: openai_harmony's LoadError (openai/harmony src/tiktoken_ext/public_encodings.rs), raised as
# HarmonyError when vLLM's harmony_utils.get_encoding loads it while the API server sets up its serving classes.
VLLM_STARTING = [
    "(EngineCore pid=9) INFO 02-10 10:00:00 [gpu_model_runner.py:1100] Starting to load model openai/gpt-oss-20b...",
    "(EngineCore pid=9) INFO 02-10 10:00:40 [gpu_model_runner.py:1200] Model loading took 13.72 GiB memory and 38.1 seconds",
    "(EngineCore pid=9) INFO 02-10 10:01:10 [core.py:210] init engine (profile, create kv cache, warmup model) took 29.80 seconds",
]
HARMONY_FRAMES = [
    "(APIServer pid=21) Traceback (most recent call last):",
    '(APIServer pid=21)   File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/parser/harmony_utils.py", line 83, in get_encoding',
    "(APIServer pid=21)     _harmony_encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)",
    '(APIServer pid=21)   File "/usr/local/lib/python3.12/dist-packages/openai_harmony/__init__.py", line 699, in load_harmony_encoding',
    "(APIServer pid=21)     inner: _PyHarmonyEncoding = _load_harmony_encoding(name)",
]


@pytest.mark.parametrize(
    ("message", "figure"),
    [
        ("invalid tiktoken vocab file: expected token and rank, could not split on ' ' at line {n}", "invalid tiktoken vocab file"),
        ("invalid tiktoken vocab file: failed to decode base64 token at line {n}: Invalid byte 60, offset 0.", "invalid tiktoken vocab file"),
        ("invalid tiktoken vocab file: hash mismatch: computed=0a1b, expected=446a", "invalid tiktoken vocab file"),
        ("error downloading or loading vocab file: failed to download or load vocab file", "error downloading or loading vocab file"),
        ("the env var TIKTOKEN_ENCODINGS_BASE is not set, or invalid", "the env var TIKTOKEN_ENCODINGS_BASE is not set, or invalid"),
        ("failed to create CoreBPE: regex error", "failed to create CoreBPE"),
    ],
)
def test_harmony_encoding_that_cannot_load_is_model_load_error(message: str, figure: str) -> None:
    line = f"(APIServer pid=21) openai_harmony.HarmonyError: {message.format(n=67054)}"
    diagnosis = diagnose_text([*VLLM_STARTING, *HARMONY_FRAMES, line])
    assert diagnosis.failure_class == "model_load_error" and f"({figure})" in (diagnosis.fix or "")


def test_other_harmony_errors_are_no_encoding_load_failure() -> None:
    # a rendering refusal names no vocab file
    line = "(APIServer pid=21) openai_harmony.HarmonyError: unexpected tokens remaining in message header"
    assert diagnose_text([*VLLM_STARTING, *HARMONY_FRAMES, line]).failure_class != "model_load_error"


# Ascend's CANN runtime decoding a faulted AI Core / vector core kernel's error registers (runtime device_error_core_proc.cc,
# "The extend info: errcode:(...) errorStr: <words>."): its address faults are the NPU kernel reading or writing outside
# its memory, the class of CUDA's illegal address.
def _cann_fault(error_str: str) -> list[str]:
    return [
        "[ERROR] 2026-01-15-13:43:22 (PID:337412, Device:10, RankID:-1) ERR00100 PTA call acl api failed",
        "[Error]: The vector core execution is abnormal. ",
        "EZ9999: Inner Error!",
        "EZ9999[PID: 337412] 2026-01-15-13:43:21.691.723 (EZ9999):  The error from device(chipId:5, dieId:0), serial number is 11, "
        "there is an exception of aivec error, core id is 29, error code = 0, dump info: pc start: 0x12c0c15e8634",
        f"       The extend info: errcode:(0, 0x200000000000000, 0) errorStr: {error_str} fixp_error0 info: 0x600008e, "
        "fixp_error1 info: 0xc2, fsmId:0, tslot:1, thread:0, ctxid:0, blk:9, sublk:0, subErrType:4.[FUNC:PrintCoreInfo][FILE:device_error_core_proc.cc][LINE:360]",
        "       Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:PreCheckTaskErr][FILE:davinci_kernel_task.cc][LINE:1493]",
        "       synchronize stream with timeout failed, runtime result = 507035[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:148]",
    ]


@pytest.mark.parametrize(
    "error_str",
    ["The MPU address access is invalid.", "The DDR address of the MTE instruction is out of range.", "VEC instruction error: the ub address out of bounds."],
)
def test_cann_address_faults_are_an_illegal_memory_access(error_str: str) -> None:
    diagnosis = diagnose_text([*SG_STEPS, *SG_READY, *_cann_fault(error_str)])
    assert diagnosis.failure_class == "cuda_illegal_memory_access" and error_str.rstrip(".") in (diagnosis.fix or "")


def test_cann_errors_that_name_no_address_fault_are_not_an_illegal_memory_access() -> None:
    bus = "When the D-cache reads and writes data to the UB, the response value returned by the bus is a non-zero value."
    assert diagnose_text([*SG_STEPS, *SG_READY, *_cann_fault(bus)]).failure_class != "cuda_illegal_memory_access"


# The real logs of round sixteen's kinds, each read as its label from the bare log (the variants above test the rules).
@pytest.mark.parametrize(
    ("name", "failure_class"),
    [
        ("vllm-072-v0-mqllmengine-serving-then-signal-keyboardinterrupt-terminated.log", None),
        ("vllm-0220-gemma4-e4b-start-cancelled-during-model-load-keyboardinterrupt.log", "unknown"),
        ("sglang-ascend-npu-pd-decode-deepseek-r1-w8a8-moe-dispatch-ddr-address-out-of-range.log", "cuda_illegal_memory_access"),
        ("sglang-ascend-npu-qwen3-coder-480b-deepep-dp-attention-aivec-mpu-address-invalid-after-ready.log", "cuda_illegal_memory_access"),
        ("vllm-0151-gpt-oss-singularity-harmony-tiktoken-vocab-file-invalid.log", "model_load_error"),
    ],
)
def test_round_sixteens_real_logs(name: str, failure_class: str | None) -> None:
    diagnosis = diagnose_file(BATCH21_HELDOUT / name)
    assert diagnosis.failure_class == failure_class
    if failure_class is not None:
        assert diagnosis.evidence and diagnosis.fix


# batch23-heldout: 35 real logs (33 vLLM, 2 SGLang) from 35 sources no other manifest or skipped list names (run logs that
# projects committed, cited by blob URL), under batch18's rule, committed (4f4ce83) before fleet read them and measured
# once untouched with the diagnose code of 19c696d (benchmarks/results/diagnose-heldout.md, "batch23-heldout"); a tune
# split since round seventeen.
BATCH23_HELDOUT = REAL.parent / "batch23-heldout"


def test_batch23_keeps_its_tune_figure() -> None:
    """35 real logs, 33 vLLM and 2 SGLang: 31/35 right (failures 18/21; vLLM 29/33, SGLang 2/2; 29/33 where the excerpt
    shows the cause, failures 16/19) from the bare log, measured once untouched with the diagnose code of 19c696d; 35/35
    (failures 21/21) after the rules of its four miss kinds (round seventeen, test_round_seventeens_real_logs). A tune
    split since. A floor, not a file check. No source is named by another folder's manifest or skipped list, and this
    batch's skipped list names no other folder's source."""
    _guard_batch(BATCH23_HELDOUT, total=35, floor=35, shows_cause=33, sglang=2)


# batch22-heldout: 17 real SGLang logs from 17 sources no other manifest or skipped list names (one issue excerpt, 16 run
# logs that projects committed, cited by blob URL), under batch18's rule, committed (5381d21) before fleet read them and
# measured once untouched with the diagnose code of 19c696d (benchmarks/results/diagnose-heldout.md, "batch22-heldout");
# a tune split since round seventeen.
BATCH22_HELDOUT = REAL.parent / "batch22-heldout"


def test_batch22_keeps_its_tune_figure() -> None:
    """17 real logs, all SGLang: 15/17 right (failures 9/10; the same where the excerpt shows the cause, all 17) from the
    bare log, measured once untouched with the diagnose code of 19c696d; 17/17 (failures 10/10) after the rules of its two
    miss kinds (round seventeen, test_round_seventeens_real_logs). A tune split since. A floor, not a file check. No
    source is named by another folder's manifest or skipped list, and this batch's skipped list names no other folder's
    source."""
    _guard_batch(BATCH22_HELDOUT, total=17, floor=17, shows_cause=17, sglang=17)


# Round seventeen: batch22's and batch23's miss kinds as class rules (benchmarks/results/diagnose-heldout.md, "round
# seventeen"). Each from the source that prints the text; the real logs below.
SGLANG_036_SERVING = [
    "[2024-11-22 03:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1)",
    "[2024-11-22 03:01:00] The server is fired up and ready to roll!",
    "[2024-11-22 03:05:00 TP0] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 0, cache hit rate: 0.00%, #running-req: 0, #queue-req: 0",
]


@pytest.mark.parametrize("ready", [True, False])
def test_a_bare_keyboardinterrupt_is_a_stop_by_sigint(ready: bool) -> None:
    # CPython's default SIGINT handler raises KeyboardInterrupt() with no arguments; SGLang 0.3.6's scheduler and
    # detokenizer processes catch only Exception (scheduler.py:1410, detokenizer_manager.py:205), so each prints it.
    interrupted = [
        "Process Process-1:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.11/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()",
        '  File "/env/lib/python3.11/site-packages/sglang/srt/managers/detokenizer_manager.py", line 205, in run_detokenizer_process',
        "    manager.event_loop()",
        '  File "/env/lib/python3.11/site-packages/zmq/sugar/socket.py", line 972, in recv_pyobj',
        "    msg = self.recv(flags)",
        "KeyboardInterrupt",
        "[2024-11-22 03:08:40] INFO:     Shutting down",
        "[2024-11-22 03:08:40] INFO:     Waiting for connections to close. (CTRL+C to force quit)",
    ]
    head = SGLANG_036_SERVING if ready else SGLANG_036_SERVING[:1] + ["[2024-11-22 03:00:30 TP0] Load weight begin. avail mem=78.00 GB"]
    diagnosis = diagnose_text(head + interrupted)
    assert diagnosis.failure_class == (None if ready else "unknown")


def test_a_quoted_raise_of_keyboardinterrupt_is_no_stop() -> None:
    # A traceback's quoted source line naming the exception is code, not the interrupt; the TypeError is the failure.
    lines = SGLANG_036_SERVING + [
        "Traceback (most recent call last):",
        '  File "/env/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 1433, in run_scheduler_process',
        "    raise KeyboardInterrupt",
        "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'",
    ]
    assert diagnose_text(lines).failure_class == "unknown"


@pytest.mark.parametrize(
    "module_file",
    ["/sgl-workspace/aiter/aiter/fused_moe.py", "/opt/flashinfer/flashinfer/comm/__init__.py", "/usr/local/lib/python3.10/dist-packages/aiter/fused_moe.py"],
)
def test_a_source_checkouts_package_failing_at_import_is_import_error(module_file: str) -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 66, in <module>',
        "    server_args = prepare_server_args(sys.argv[1:])",
        '  File "/sgl-workspace/sglang/python/sglang/srt/layers/quantization/unquant.py", line 56, in <module>',
        "    from aiter.fused_moe import fused_moe",
        f'  File "{module_file}", line 572, in <module>',
        "    fmoe = aiter.fmoe",
        "AttributeError: module 'aiter' has no attribute 'fmoe'",
    ]
    assert diagnose_text(lines).failure_class == "import_error"


def test_the_engines_own_source_checkout_is_not_a_package_that_failed_at_import() -> None:
    # vLLM built from source (/workspace/vllm/vllm/...): its own module's AttributeError is the engine's, not a package's.
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/vllm/vllm/entrypoints/openai/api_server.py", line 12, in <module>',
        "    from vllm.config import ModelConfig",
        '  File "/workspace/vllm/vllm/config/__init__.py", line 3, in <module>',
        "    X = torch.foo",
        "AttributeError: module 'torch' has no attribute 'foo'",
    ]
    assert diagnose_text(lines).failure_class != "import_error"


@pytest.mark.parametrize(
    "echo",
    [
        # vLLM 0.4-0.10 entrypoints/logger.py, 0.33 serve/utils/request_logger.py, SGLang's request logger.
        "INFO 11-14 20:27:52 logger.py:36] Received request chat-1: prompt: '<s>[INST] Fix: This model maximum context length is 2048 tokens. However, your messages resulted in 2364 tokens. [/INST]', params: SamplingParams(n=1)",
        "(APIServer pid=1) DEBUG 05-24 10:00:00 [request_logger.py:57] Request cmpl-2 details: prompt: 'Why does torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB happen?', prompt_token_ids: [1, 2].",
        '(APIServer pid=1) INFO 05-24 10:00:00 [request_logger.py:86] Request cmpl-3 JSON body: {"messages": [{"content": "ImportError: libcudart.so.12: cannot open shared object file"}]}',
        "[2026-05-24 10:00:00] Receive: obj=GenerateReqInput(text='RuntimeError: NCCL error: unhandled system error, what now?', sampling_params={'max_new_tokens': 64})",
    ],
)
def test_a_request_that_quotes_an_error_is_the_clients_data(echo: str) -> None:
    lines = ["INFO 05-24 10:00:00 [api_server.py:1000] vLLM API server version 0.8.5", READY, echo, 'INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK']
    assert diagnose_text(lines).failure_class is None


@pytest.mark.parametrize(
    "lines",
    [
        # XLA error E0101 under vLLM's TPU backend, with PJRT's OOM payload, and the older allocator words.
        [
            "(EngineCore pid=187) ERROR 08-07 23:27:17 [core.py:1349] jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E0101: RuntimeProgramAllocationFailure:",
            "(EngineCore pid=187) ERROR 08-07 23:27:17 [core.py:1349] Error loading program 'jit_sample': Attempting to reserve 512.00M at the bottom of memory. That was not possible. There are 100.50M free, 0B reserved, and 100.50M reservable.",
            "(EngineCore pid=187) ERROR 08-07 23:27:17 [core.py:1349] See https://openxla.org/xla/errors/error_0101 for more details. [type.googleapis.com/pjrt.OOM='']",
        ],
        ["jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 20029400304 bytes."],
        ["E0101 pjrt_stream_executor_client.cc:2036] Execution of replica 0 failed: Resource exhausted: Attempting to allocate 17.0K. That was not possible. There are 48.0K free."],
        ["RuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.50G of 15.48G hbm."],
    ],
)
def test_an_accelerators_xla_memory_exhaustion_is_cuda_oom(lines: list[str]) -> None:
    # The CUDA extension's import warning every TPU start prints is no import failure beside it.
    warning = "WARNING 08-07 23:20:00 [interface.py:368] Failed to import from vllm._C: ModuleNotFoundError(\"No module named 'vllm._C'\")"
    assert diagnose_text([warning, *lines]).failure_class == "cuda_oom"


def test_a_neuron_execution_out_of_bounds_is_an_illegal_memory_access() -> None:
    # libnrt nrt_status.h NRT_EXEC_OOB = 1006, as vllm-neuron's runner raises it.
    line = "(EngineCore_DP0 pid=243) ERROR 06-27 02:23:02 [core.py:1008] RuntimeError: Failed to execute the model status=1006 message=Execution Out-Of-Bounds Memory Access"
    diagnosis = diagnose_text([line])
    assert diagnosis.failure_class == "cuda_illegal_memory_access" and "Neuron" in (diagnosis.fix or "")


def test_tritons_missing_c_compiler_is_import_error() -> None:
    # triton/runtime/build.py _build, at the first Triton use (here vLLM's import of its GPU model runner).
    lines = [
        "ERROR 08-15 03:11:52 [core.py:632] EngineCore failed to start.",
        'ERROR 08-15 03:11:52 [core.py:632]   File "/venv/lib/python3.12/site-packages/triton/runtime/build.py", line 32, in _build',
        'ERROR 08-15 03:11:52 [core.py:632]     raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")',
        "ERROR 08-15 03:11:52 [core.py:632] RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error" and "CC=gcc" in (diagnosis.fix or "")


@pytest.mark.parametrize(
    ("folder", "name", "failure_class"),
    [
        ("batch22-heldout", "sglang-036-llama31-8b-serving-prefix-batches-then-keyboardinterrupt-test-stop.log", None),
        ("batch22-heldout", "sglang-rocm-mi355x-glm51-mxfp4-aiter-flydsl-mismatch-no-attribute-fmoe.log", "import_error"),
        ("batch23-heldout", "vllm-054-v0-arena-hard-serving-prompts-quote-errors-then-graceful-stop.log", None),
        ("batch23-heldout", "vllm-tpu-v5e-gemma4-e2b-util095-resource-exhausted-program-allocation.log", "cuda_oom"),
        ("batch23-heldout", "vllm-0160-neuron-gemma4-12b-first-request-execution-out-of-bounds-memory-access.log", "cuda_illegal_memory_access"),
        ("batch23-heldout", "vllm-0100-tinyllama-import-gpu-model-runner-triton-failed-to-find-c-compiler.log", "import_error"),
        # Starts interrupted before readiness stay unknown under the signal-stop convention.
        ("batch21-heldout", "vllm-0230-qwen3-14b-awq-start-interrupted-in-torch-compile-keyboardinterrupt.log", "unknown"),
        ("batch20-heldout", "vllm-085-v0-ray-placement-group-waits-gpus-exceed-then-sigterm.log", "unknown"),
    ],
)
def test_round_seventeens_real_logs(folder: str, name: str, failure_class: str | None) -> None:
    entry = next(entry for entry in _manifest(REAL.parent / folder) if entry["file"] == name)
    assert (failure_class or "healthy") == entry["label"]
    diagnosis = diagnose_file(REAL.parent / folder / name)
    assert diagnosis.failure_class == failure_class
    if failure_class is not None:
        assert diagnosis.evidence and diagnosis.fix


# batch24-heldout: 24 real logs (16 vLLM, 8 SGLang) of the classes batch22 and batch23 lacked, from 24 sources no other
# manifest or skipped list names (run logs that projects committed, cited by blob URL), under batch15's rule, committed
# (8f0b912) before fleet read them and measured once untouched with the code of that commit held still in a worktree (the
# diagnose code of 3a1bf51; benchmarks/results/diagnose-heldout.md, "batch24-heldout"); a tune split since round eighteen.
BATCH24_HELDOUT = REAL.parent / "batch24-heldout"


def test_batch24_keeps_its_tune_figure() -> None:
    """24 real logs, 16 vLLM and 8 SGLang: 19/24 right (failures 17/22; vLLM 15/16, SGLang 4/8; 18/20 where the excerpt
    shows the cause, failures 16/18) from the bare log, measured once untouched with the code of 8f0b912; 20/24 with the
    run record's start-timeout word. One label was then corrected (nccl_error -> cuda_oom: two ranks' CUDA out-of-memory
    errors are what the others' NCCL errors report; fleet had read cuda_oom): 20/24. 21/24 (failures 19/22) after round
    eighteen's rule for Gloo's incomplete mesh (test_batch24s_ascend_prefill_node_left_waiting_on_a_gloo_peer); the three
    cut starts read as stalls are the stall-evidence conflict, left. A tune split since. A floor, not a file check. No
    source is named by another folder's manifest or skipped list, and this batch's skipped list names no other folder's
    source."""
    _guard_batch(BATCH24_HELDOUT, total=24, floor=21, shows_cause=20, sglang=8)


# batch25-heldout: 17 real logs (10 vLLM, 7 SGLang), the classes batch22-24 lacked looked for first, from 17 sources no other
# manifest or skipped list names (run logs that projects committed, cited by blob URL), under batch15's rule, committed
# (fec9667) before fleet read them and measured once untouched with the code of that commit held still in a worktree (the
# diagnose code of 52310f8; benchmarks/results/diagnose-heldout.md, "batch25-heldout"); a tune split since round nineteen.
BATCH25_HELDOUT = REAL.parent / "batch25-heldout"


def test_batch25_keeps_its_tune_figure() -> None:
    """17 real logs, 10 vLLM and 7 SGLang: 13/17 right (failures 12/16; vLLM 8/10, SGLang 5/7; 12/14 where the excerpt
    shows the cause, failures 11/13) from the bare log, measured once untouched with the code of fec9667; the same without
    --bare. One label was then corrected (vLLM's ScaledMM kernel-selection refusal on GB10, unsupported_gpu_arch -> unknown:
    its one reason is FP8 Marlin declining a GPU with native FP8, the only candidate because the start asked for
    linear_backend 'marlin'; fleet had read unknown): 14/17. 15/17 (failures 14/16; vLLM 9/10, SGLang 6/7; 14/14 where the
    excerpt shows the cause) after round nineteen's rule, an exception line that names its own kind over a frame name (a
    PyTorch allocator INTERNAL ASSERT under a load_weights frame: test_batch25s_allocator_assertion_under_load_weights); the
    two cut starts read as stalls are the stall-evidence conflict, left. A tune split since. A floor, not a file check. No
    source is named by another folder's manifest or skipped list, and this batch's skipped list names no other folder's
    source."""
    _guard_batch(BATCH25_HELDOUT, total=17, floor=15, shows_cause=14, sglang=7)


# batch26-heldout: 14 real logs (12 vLLM, 2 SGLang), the classes batch22-25 lacked looked for first, from 14 sources no other
# manifest or skipped list names (run logs that projects committed, cited by blob URL: files, a notebook cell's output,
# blocks pasted into committed notes, guides and FAQs), under batch15's rule, committed (353b963) before fleet read them and
# measured once untouched with the code of that commit held still in a worktree (the diagnose code of 98582d3;
# benchmarks/results/diagnose-heldout.md, "batch26-heldout"); a tune split since round twenty.
BATCH26_HELDOUT = REAL.parent / "batch26-heldout"


def test_batch26_keeps_its_tune_figure() -> None:
    """14 real logs, 12 vLLM and 2 SGLang: 10/14 right (failures 9/13; vLLM 9/12, SGLang 1/2; 8/12 where the excerpt shows
    the cause, failures 7/11) from the bare log, measured once untouched with the code of 353b963; the same without --bare.
    14/14 (failures 13/13; vLLM 12/12, SGLang 2/2; 12/12 where the excerpt shows the cause) after round twenty's rules,
    each from the source that prints the text: vLLM's engine-handshake TimeoutError a start timeout (an engine core's
    earlier error wins), a profiled 'Available KV cache memory' at or below zero before a failed start the pool too small,
    c10d's collectives mismatch the ranks' failure over SGLang's capture wrapper, vllm-ascend's ACL-graph capture failure
    (logged, then re-raised) a capture failure (test_diagnose_sources.py, round twenty). A tune split since. A floor, not a
    file check. No source is named by another folder's manifest or skipped list, and this batch's skipped list names no
    other folder's source."""
    _guard_batch(BATCH26_HELDOUT, total=14, floor=14, shows_cause=12, sglang=2)


# batch27-heldout: 9 real logs (8 vLLM, 1 SGLang), the classes batch22-26 lacked looked for first, from 9 issue threads no
# other manifest or skipped list names (vLLM-Omni, Xinference, a Qwen model repository, SGLang and vLLM), under batch15's
# rule, committed (a8b43fb, e8e0e77) before fleet read them and measured once untouched with the code of e8e0e77 held still
# in a worktree (the diagnose code of d8c6cd4; benchmarks/results/diagnose-heldout.md, "batch27-heldout").
BATCH27_HELDOUT = REAL.parent / "batch27-heldout"


def test_batch27_heldout_keeps_its_measured_accuracy() -> None:
    """9 real logs, 8 vLLM and 1 SGLang, all failures (cuda_oom 4, kv_pool_too_small 3, cuda_graph_error 1, nccl_error 1):
    9/9 right (failures 9/9; vLLM 8/8, SGLang 1/1; 9/9 where the excerpt shows the cause, which is all of them) from the
    bare log, measured once untouched with the code of e8e0e77; the same without --bare. Held out: not tuned on. A floor,
    not a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped list names
    no other folder's source."""
    _guard_batch(BATCH27_HELDOUT, total=9, floor=9, shows_cause=9, sglang=1)


# batch28-heldout: 19 real logs (12 vLLM, 7 SGLang), SGLang and the classes the last batches lacked first, from 19 issue
# threads no other manifest or skipped list names (vLLM-Kunlun, Intel llm-scaler, torch_memory_saver, SGLang, sglang-omni,
# KTransformers, vllm-ascend, vLLM-Omni, pascal-pkgs-ci, vLLM), under batch15's rule, committed (1d6393d) before fleet read
# them and measured once untouched with the code of 1d6393d held still in a worktree (the diagnose code of d8c6cd4;
# benchmarks/results/diagnose-heldout.md, "batch28-heldout"); a tune split since round twenty-two.
BATCH28_HELDOUT = REAL.parent / "batch28-heldout"


def test_batch28_keeps_its_tune_figure() -> None:
    """19 real logs, 12 vLLM and 7 SGLang: 12/19 right (failures 11/18; vLLM 8/12, SGLang 4/7; 10/16 where the excerpt shows
    the cause) from the bare log, measured once untouched with the code of 1d6393d against the labels as collected; the same
    without --bare. Round twenty-two relabelled its two Intel XPU 'UR_RESULT_ERROR_OUT_OF_RESOURCES' logs unknown from the
    source (UR's Level Zero adapter gives the device's memory as OUT_OF_DEVICE_MEMORY, 39; 40 is its own objects;
    label_as_collected kept: 14/19 untouched against these labels) and wrote rules from the rest, each from the source that
    prints the text (test_diagnose_platforms.py): torch_memory_saver's check lines (result 2 cuda_oom, any other an unknown
    failure) and SGLang's SIGCHLD line for a child that exited; Level Zero's OUT_OF_DEVICE_MEMORY as cuda_oom; a module
    without the name a model class imports, inside vLLM's registry report, as import_error: 18/19 (failures 17/18; vLLM
    11/12, SGLang 7/7; 16/16 where the excerpt shows the cause). The one left is the vLLM-Kunlun import hook's failure the
    start goes on after (a cut start labelled unknown read import_error). A tune split since. A floor, not a file check. No
    source is named by another folder's manifest or skipped list, and this batch's skipped list names no other folder's
    source."""
    _guard_batch(BATCH28_HELDOUT, total=19, floor=18, shows_cause=16, sglang=7)


# batch29-heldout: 18 real logs (12 vLLM, 6 SGLang), SGLang and the classes the last batches lacked first, from 17 issue
# threads and one run log a project committed, none named by another manifest or skipped list (FlagOS: FlagGems, FlagTree,
# vllm-plugin-FL, sglang-plugin-FL; vLLM-Kunlun, llm-scaler, verl, vllm-ascend, ROCm toolboxes, a TPU branch), under
# batch15's rule, committed (7df2da1) before fleet read them and measured once untouched with the code of 7df2da1 held
# still in a worktree (the diagnose code of 14a8298; benchmarks/results/diagnose-heldout.md, "batch29-heldout"); a tune
# split since round twenty-two.
BATCH29_HELDOUT = REAL.parent / "batch29-heldout"


def test_batch29_keeps_its_tune_figure() -> None:
    """18 real logs, 12 vLLM and 6 SGLang: 12/18 right (failures 11/17; vLLM 10/12, SGLang 2/6; 11/16 where the excerpt
    shows the cause) from the bare log, measured once untouched with the code of 7df2da1; the same without --bare. Round
    twenty-two's rules, each from the source that prints the text (test_diagnose_platforms.py): torch_memory_saver's other
    check lines an unknown failure; tvm-ffi's duplicate type-attribute registration as import_error; FlagTune refusing the
    accelerator's Triton backend as unsupported_gpu_arch: 15/18 (failures 14/17; vLLM 10/12, SGLang 5/6; 14/16 where the
    excerpt shows the cause). The three left: Kunlun XCCL's init check (no source to read), Triton's '0 active drivers'
    then vLLM's 'Failed to infer device type' (words a missing device prints too), a log with neither a failure nor a
    readiness line (the classifier's reading of a cut start), which round twenty-five's start-up chatter (FlagOS's
    'sglang_fl platform activating' as a start-up step) reads unknown: 16/18. A tune split since. A floor, not a file check. No source is
    named by another folder's manifest or skipped list, and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH29_HELDOUT, total=18, floor=16, shows_cause=16, sglang=6)  # 16/18 since round twenty-five


# batch30-heldout: 11 real SGLang logs, the classes the last batches lacked first, from 7 threads (sglang 5, ai-dynamo/nixl;
# six read as thread copies stored in the code corpus) and 4 run logs committed notes hold (willxxy/sglang-play,
# devopsrustem/slurmv4 twice, didier-durand/llms-in-clouds), none named by another manifest or skipped list, under batch15's
# rule, committed (649902f) before fleet read them and measured once untouched with the code of 649902f held still in a
# worktree (the diagnose code of e792bc2; benchmarks/results/diagnose-heldout.md, "batch30-heldout"); a tune split since
# round twenty-three.
BATCH30_HELDOUT = REAL.parent / "batch30-heldout"


def test_batch30_keeps_its_tune_figure() -> None:
    """11 real logs, all SGLang (unknown 5, import_error 2, nccl_error 2, model_load_error 1, healthy 1): 10/11 right
    (failures 9/10; the same where the excerpt shows the cause, all 11) from the bare log, measured once untouched with the
    code of 649902f; the same without --bare. Round twenty-three wrote the rule of its one miss kind from the compiler's
    own format (test_diagnose_platforms.py): GCC's '<file>:<line>:<col>: fatal error: <header>: No such file or directory'
    (clang's '... file not found') inside a JIT build, as import_error as the link step's 'cannot find -l<lib>' is: 11/11
    (failures 10/10). A tune split since. A floor, not a file check. No source is named by another folder's manifest or
    skipped list, and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH30_HELDOUT, total=11, floor=11, shows_cause=11, sglang=11)


# batch31-heldout: 20 real vLLM logs, the classes the last batches lacked first, from 19 issue threads and one start-up log
# a notes repository committed, none named by another manifest or skipped list (vllm-project/vllm 7, vllm-ascend 3,
# vllm-gaudi, tpu-inference, vLLM-Omni, llm-scaler, GPUStack's runner, club-3090, Qwen, a compose recipe, a tutorial, a
# Gitea notes repository), under batch15's rule, committed (eda2068, b8a90ef) before fleet read them and measured once
# untouched with the code of b8a90ef held still in a worktree (the diagnose code of e792bc2;
# benchmarks/results/diagnose-heldout.md, "batch31-heldout"); a tune split since round twenty-three.
BATCH31_HELDOUT = REAL.parent / "batch31-heldout"


def test_batch31_keeps_its_tune_figure() -> None:
    """20 real logs, all vLLM (unknown 5, healthy 5, kv_pool_too_small 3, nccl_error 3, port_in_use 2, model_load_error 1,
    cuda_graph_error 1): 14/20 right (failures 9/15; 12/15 where the excerpt shows the cause, failures 7/10) from the bare
    log, measured once untouched with the code of b8a90ef; the same without --bare. Round twenty-three's rules, each from
    the source that prints the text (test_diagnose_platforms.py): CANN's EJ0003/EI0020 bind and HCCL's own bind line as
    port_in_use; HCCL's 'wait socket establish timeout', CANN's EI0006 and torch_npu's failed HCCL collective call as
    nccl_error; vLLM's import_kernels warning a start went on past (start-up steps, no error after it) a finding, not the
    failure: 18/20 (failures 13/15; 15/15 where the excerpt shows the cause). The two left are starts cut with no
    readiness line read healthy (the classifier's reading of a cut start). A tune split since. A floor, not a file check.
    No source is named by another folder's manifest or skipped list, and this batch's skipped list names no other
    folder's source."""
    _guard_batch(BATCH31_HELDOUT, total=20, floor=18, shows_cause=15, sglang=0)


# batch32-heldout: 14 real logs, 12 vLLM and 2 SGLang, the classes the last batches lacked first, from 14 issue threads
# none named by another manifest or skipped list (vllm-project/vllm 7, sgl-project/sglang 2, NVIDIA/nim-deploy,
# lm-sys/FastChat, QwenLM/Qwen2.5-Omni, vllm-ascend, Xinference), under batch15's rule, committed (d0f01f2) before fleet
# read them and measured once untouched with the code of d0f01f2 held still in a worktree (the diagnose code of e792bc2;
# benchmarks/results/diagnose-heldout.md, "batch32-heldout"); a tune split since round twenty-four.
BATCH32_HELDOUT = REAL.parent / "batch32-heldout"


def test_batch32_keeps_its_tune_figure() -> None:
    """14 real logs, 12 vLLM and 2 SGLang (unknown 5, unsupported_gpu_arch 4, healthy 4, model_load_error 1): 12/14 right
    (failures 8/10; vLLM 10/12, SGLang 2/2; 10/11 where the excerpt shows the cause, failures 6/7) from the bare log,
    measured once untouched with the code of d0f01f2; the same without --bare. Round twenty-four's rules, each from the
    source that prints the text (test_diagnose_platforms.py): vLLM's '<arch> has no vLLM implementation and the
    Transformers implementation is not compatible with vLLM' (model_loader/utils.py resolve_transformers_arch) as
    model_load_error; the V1 front end's 'Request <id> failed (engine dead).' (v1/engine/async_llm.py, INFO) as an engine
    death (unknown): 14/14 (failures 10/10; 11/11 where the excerpt shows the cause). A tune split since. A floor, not a
    file check. No source is named by another folder's manifest or skipped list, and this batch's skipped list names no
    other folder's source."""
    _guard_batch(BATCH32_HELDOUT, total=14, floor=14, shows_cause=11, sglang=2)


# batch34-heldout: 15 real vLLM logs, the classes the last batches lacked first, from 15 sources none named by another
# manifest or skipped list (6 run logs guardkit/guardkit committed, cited by blob URL at a commit; vllm-project/vllm 3,
# ai-dynamo/dynamo, QwenLM/Qwen3, modelscope/ms-swift, opea-project/GenAIExamples, HabanaAI/vllm-fork), under batch15's
# rule, committed (492995b) before fleet read them and measured once untouched with the code of 492995b held still in a
# worktree (the diagnose code of a41f253; benchmarks/results/diagnose-heldout.md, "batch34-heldout"); a tune split since
# round twenty-five.
BATCH34_HELDOUT = REAL.parent / "batch34-heldout"


def test_batch34_keeps_its_tune_figure() -> None:
    """15 real logs, all vLLM (cuda_oom 3, context_length_exceeded 3, kv_pool_too_small 2, cuda_graph_error 2,
    import_error 1, unsupported_gpu_arch 1, port_in_use 1, healthy 1, unknown 1): 13/15 right (failures 12/14; the same
    where the excerpt shows the cause, all 15) from the bare log, measured once untouched with the code of 492995b; the
    same without --bare. Its 2 misses, one kind (the custom all-reduce's "Failed: Cuda error .../custom_all_reduce.cuh:<n>
    'invalid argument'" at the end of CUDA graph capture read unknown, under Dynamo and on V1), were written up. Round
    twenty-five's rule, from vLLM's csrc/custom_all_reduce.cuh CUDACHECK (test_diagnose_platforms.py): the check is a
    failure of its own over the worker death it causes, cuda_graph_error under capture: 15/15 (failures 14/14; the same
    without --bare). A tune split since. A floor, not a file check. No source is named by another folder's manifest or
    skipped list, and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH34_HELDOUT, total=15, floor=15, shows_cause=15, sglang=0)


# batch33-heldout: 14 real logs, SGLang first (11 SGLang, 3 vLLM), from 14 sources none named by another manifest or
# skipped list (12 issue-thread windows: sgl-project/sglang 4, Ascend/sglang, sgl-project/sglang-jax, kvcache-ai/Mooncake,
# eugr/llama-benchy, noonghunna/club-3090 2, vllm-project/vllm-ascend, 1CatAI/1Cat-vLLM; 2 start-up logs
# datawhalechina/self-llm committed, cited by blob URL at a commit), under batch15's rule, committed (641b21b) before fleet
# read them and measured once untouched with the code of 641b21b held still in a worktree (the diagnose code of 0d2a36c;
# benchmarks/results/diagnose-heldout.md, "batch33-heldout"); a tune split since round twenty-five.
BATCH33_HELDOUT = REAL.parent / "batch33-heldout"


def test_batch33_keeps_its_tune_figure() -> None:
    """14 real logs, 11 SGLang and 3 vLLM (healthy 6, unknown 5, unsupported_gpu_arch 2, cuda_oom 1): 11/14 right
    (failures 5/8; SGLang 8/11, vLLM 3/3; 7/9 where the excerpt shows the cause, failures 1/3) from the bare log, measured
    once untouched with the code of 641b21b; the same without --bare. Its 3 misses, all SGLang, three kinds (torch_npu's
    'NPU out of memory. NPUWorkspaceAllocator tried to allocate' read as no failure; SGLang 0.5.17's 'Only {...} backends
    are supported on Blackwell GPUs for hybrid GDN models' read unknown; a start cut inside SGLang-JAX's worker
    precompile read as no failure), were written up. Round twenty-five's rules, each from the source that prints the text
    (test_diagnose_platforms.py): torch_npu's workspace allocator's sentence as cuda_oom; SGLang 0.5.17's backend gate by
    GPU generation (attention_registry.py:395-414) as unsupported_gpu_arch, the label kept; sgl_jax's precompile lines as
    start-up steps: 14/14 (failures 8/8; 9/9 where the excerpt shows the cause; the same without --bare). A tune split
    since. A floor, not a file check. No source is named by another folder's manifest or skipped list, and this batch's
    skipped list names no other folder's source."""
    _guard_batch(BATCH33_HELDOUT, total=14, floor=14, shows_cause=9, sglang=11)


# batch35-heldout: 10 real SGLang logs, SGLang first, from 10 sources none named by another manifest or skipped list
# (thread windows: sgl-project/sglang 6, QwenLM/Qwen3-VL, sgl-project/sglang-omni, ovg-project/kvcached,
# mmcdermott/MEDS_EIC_AR), under batch15's rule, committed (d2c2c62) before fleet read them and measured once untouched
# with the code of d2c2c62 held still in a worktree (the diagnose code of 70ede08; benchmarks/results/diagnose-heldout.md,
# "batch35-heldout"); a tune split since round twenty-five.
BATCH35_HELDOUT = REAL.parent / "batch35-heldout"


def test_batch35_keeps_its_tune_figure() -> None:
    """10 real logs, all SGLang (unknown 4, healthy 3, unsupported_gpu_arch 2, kv_pool_too_small 1): 7/10 right
    (failures 5/7; 6/7 where the excerpt shows the cause, failures 4/4) from the bare log, measured once untouched with
    the code of d2c2c62; the same without --bare. Its 3 misses, two kinds (a failed request on a serving server, SGLang's
    'Error in request:' traceback, read unknown; two start cuts read as a stall and as healthy), were written up. Round
    twenty-five's rules, each from the source that prints the text (test_diagnose_platforms.py): serving_base.py
    handle_request's 'Error in request:' traceback as one failed request answered with a 500; SGLang's start-up chatter
    ('is running on CPUs', 'Attention backend not set. Use ... by default.') as start-up steps: 9/10 (failures 6/7; 7/7
    where the excerpt shows the cause; the same without --bare). The one left is the MUSA start cut inside piecewise
    CUDA graph compilation read as a stall (the stall-evidence conflict the lead keeps). A tune split since. A floor, not
    a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped list names
    no other folder's source."""
    _guard_batch(BATCH35_HELDOUT, total=10, floor=9, shows_cause=7, sglang=10)


# batch36-heldout: 9 real vLLM logs, the classes the last batches lacked first, from 9 sources none named by another
# manifest or skipped list (5 run logs projects committed, cited by blob URL at a commit: Einengutenmorgen/decode_kuki 2,
# Rajivjha003/LLM_factory, rahulrawat20022002/case_study2, RohanAwhad/rohans-sdft; 4 vllm-project/vllm-ascend thread
# windows), under batch15's rule, committed (6c12838) before fleet read them and measured once untouched with the code of
# 6c12838 held still in a worktree (the diagnose code of 70ede08; benchmarks/results/diagnose-heldout.md,
# "batch36-heldout"); a tune split since round twenty-five.
BATCH36_HELDOUT = REAL.parent / "batch36-heldout"


def test_batch36_keeps_its_tune_figure() -> None:
    """9 real logs, all vLLM (healthy 3, server_start_timeout 1, model_load_error 1, context_length_exceeded 1,
    cuda_graph_error 1, cuda_oom 1, unknown 1): 7/9 right (failures 4/6; 6/8 where the excerpt shows the cause, failures
    3/5) from the bare log, measured once untouched with the code of 6c12838; 8/9 without --bare. Its 2 misses, two kinds
    (vLLM's shm_broadcast 'No available shared memory broadcast block found in 60 seconds' for 57 minutes after CUDA graph
    capture read unknown from the bare log; torch_npu's 'aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
    INTERNAL ASSERT FAILED' read unknown), were written up. Round twenty-five's rules, each from the source that prints
    the text (test_diagnose_platforms.py): a run of ten or more shm_broadcast wait notices after the last start-up step
    as a stalled start; the ACL runtime's capture status (aclmdlRICaptureStatus) as cuda_graph_error: 9/9 (failures 6/6;
    8/8 where the excerpt shows the cause; the same without --bare). A tune split since. A floor, not a file check. No
    source is named by another folder's manifest or skipped list, and this batch's skipped list names no other folder's
    source."""
    _guard_batch(BATCH36_HELDOUT, total=9, floor=9, shows_cause=8, sglang=0)


# batch38-heldout: 15 real vLLM logs, the classes the last batches lacked first, from 15 sources none named by another
# manifest or skipped list (14 issue-thread windows: vllm-project/vllm 4, vllm-project/vllm-ascend 3,
# sasha0552/pascal-pkgs-ci 2, ROCm/legacy-rocm-build 2, verl-project/verl, Sandermage/genesis-vllm-patches,
# noonghunna/club-3090; 1 run log zjpzhao/vllm-qwen3vl-cu118-t4 committed, cited by blob URL at a commit), under
# batch15's rule, committed (b1e20f4) before fleet read them and measured once untouched with the code of b1e20f4 held
# still in a worktree (the diagnose code of 3037324; benchmarks/results/diagnose-heldout.md, "batch38-heldout").
BATCH38_HELDOUT = REAL.parent / "batch38-heldout"


def test_batch38_keeps_its_tune_figure() -> None:
    """15 real logs, all vLLM (unsupported_gpu_arch 5, healthy 5, model_load_error 2, server_start_timeout 1,
    kv_pool_too_small 1, cuda_oom 1): 9/15 right (failures 4/10; the same where the excerpt shows the cause, all 15) from
    the bare log, measured once untouched with the code of b1e20f4; the same without --bare. Its 6 misses, four kinds,
    were written up. Round twenty-six's rules, each from the source that prints the text (test_diagnose_platforms.py):
    Inductor's GPUTooOldForTriton 'Found <GPU> which is too old to be supported by the triton GPU compiler', HIP's
    'HIP error: invalid device function', vLLM's CUTLASS 'block scaled fp8 gemm is not implemented for Blackwell' as
    unsupported_gpu_arch; SGR colour codes written out as text ('ESC[1;36m') removed as carriers: 14/15 (failures 9/10;
    the same where the excerpt shows the cause). The one left is the AttributeError of a V0 worker's load_model whose
    traceback the window cuts above its frames (no load-path frame in its traceback: the existing rule does not read
    it). A tune split since. A floor, not a file check. No source is named by another folder's manifest or skipped list,
    and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH38_HELDOUT, total=15, floor=14, shows_cause=15, sglang=0)


# batch37-heldout: 15 real SGLang logs, SGLang first, from 15 sources none named by another manifest or skipped list
# (all run logs projects committed, cited by blob URL at a commit: jethac/dgx-spark-hijinks 6, shun8686/for_debug 4,
# thekevinli/sglang-benchmark-artifacts 2, StevenWang-CY/sglang-attention-reproducibility 2, devopsrustem/slurmv4 1),
# under batch15's rule, committed (b55fb32) before fleet read them and measured once untouched with the code of b55fb32
# held still in a worktree (the diagnose code of 3037324; benchmarks/results/diagnose-heldout.md, "batch37-heldout"); a
# tune split since round twenty-six.
BATCH37_HELDOUT = REAL.parent / "batch37-heldout"


def test_batch37_keeps_its_tune_figure() -> None:
    """15 real logs, all SGLang (healthy 4, unknown 3, model_load_error 3, cuda_oom 2, kv_pool_too_small 1,
    import_error 1, nccl_error 1): 13/15 right (failures 9/11; the same where the excerpt shows the cause, all 15) from
    the bare log, measured once untouched with the code of b55fb32; the same without --bare. Its 2 misses, two kinds,
    were written up. Round twenty-six's rules, each from the source that prints the text (test_diagnose_platforms.py):
    NCCL's net_ib.cc 'NET/IB: Got completion from peer ... with status=<n>' as nccl_error over the stall the hang
    leaves; the loader's '<dtype> is not supported for quantization method <m>. Supported dtypes: [...]' as
    model_load_error: 15/15 (failures 11/11; the same where the excerpt shows the cause). A tune split since. A floor,
    not a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped list
    names no other folder's source."""
    _guard_batch(BATCH37_HELDOUT, total=15, floor=15, shows_cause=15, sglang=15)


# batch39-heldout: 4 real SGLang logs, SGLang first, from 4 sources none named by another manifest or skipped list
# (run logs committed to a public repository, cited by blob URL at a commit: CI-executed SGLang docs notebooks in
# wxsms/sgl-project.github.io), under batch15's rule, committed (275a2b8) before fleet read them and measured once
# untouched with the code of 275a2b8 held still in a worktree (the diagnose code of a6caf0c;
# benchmarks/results/diagnose-heldout.md, "batch39-heldout").
BATCH39_HELDOUT = REAL.parent / "batch39-heldout"


def test_batch39_heldout_keeps_its_measured_accuracy() -> None:
    """4 real logs, all SGLang (healthy 4): 4/4 right (failures 0/0; the same where the excerpt shows the cause, all 4)
    from the bare log, measured once untouched with the code of 275a2b8; the same without --bare. No misses; one hard
    healthy case (a start past the model registry's 'Ignore import error when loading ...glm4v_moe'). Held out: not
    tuned on. A floor, not a file check. No source is named by another folder's manifest or skipped list, and this
    batch's skipped list names no other folder's source."""
    _guard_batch(BATCH39_HELDOUT, total=4, floor=4, shows_cause=4, sglang=4)


# batch40-heldout: 13 real vLLM logs, the classes the last batches lacked first, from 13 sources none named by another
# manifest or skipped list (11 issue-thread windows: ai-dynamo/dynamo 4, vllm-project/vllm 4, ray-project/ray 2,
# modelscope/ms-swift 1; 2 run-log excerpts xbill9/sagemaker-gemma committed, cited by blob URL at a commit), under
# batch15's rule, committed (8e8a8bb) before fleet read them and measured once untouched with the code of 8e8a8bb held
# still in a worktree (the diagnose code of a6caf0c; benchmarks/results/diagnose-heldout.md, "batch40-heldout").
BATCH40_HELDOUT = REAL.parent / "batch40-heldout"


def test_batch40_keeps_its_tune_figure() -> None:
    """13 real logs, all vLLM (unknown 9, cuda_graph_error 1, unsupported_gpu_arch 1, cuda_oom 1, model_load_error 1):
    10/13 right (failures 10/13; 3/5 where the excerpt shows the cause) from the bare log, measured once untouched with
    the code of 8e8a8bb; the same without --bare. Its 3 misses, three kinds, were written up. Round twenty-seven's rules,
    each from the source that prints the text (test_diagnose_platforms.py): the CUDA runtime's stream-capture errors
    ('dependency created on uncaptured work in another stream', ...) as cuda_graph_error, a cause over the NCCL WARN
    line that quotes one; PyTorch's CUDACachingAllocator 'memory allocation failed with OOM' warning as cuda_oom where
    a warning names a failure; healthy only with positive evidence where the log is all there is (a start cut before
    any step reads unknown): 13/13 (failures 13/13; 5/5 where the excerpt shows the cause). A tune split since. A
    floor, not a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped
    list names no other folder's source."""
    _guard_batch(BATCH40_HELDOUT, total=13, floor=13, shows_cause=5, sglang=0)


# batch42-heldout: 15 real vLLM logs, the classes the last batches lacked first, from 15 sources none named by another
# manifest or skipped list (issue-thread windows from the `issues` corpus: vllm-project/vllm 6, vllm-project/vllm-ascend 4,
# PrimeIntellect-ai/verifiers 2, MiniMax-AI/MiniMax-H3 1, eugr/spark-vllm-docker 1, QinYang79/ICL 1), under batch15's
# rule, committed (023a238) before fleet read them and measured once untouched with the code of 023a238 held still in a
# worktree (the diagnose code of b710c5c; benchmarks/results/diagnose-heldout.md, "batch42-heldout").
BATCH42_HELDOUT = REAL.parent / "batch42-heldout"


def test_batch42_keeps_its_tune_figure() -> None:
    """15 real logs, all vLLM (nccl_error 4, cuda_oom 3, healthy 2, unknown 2, cuda_graph_error 1, port_in_use 1,
    context_length_exceeded 1, model_load_error 1): 13/15 right (failures 11/13; the same where the excerpt shows the
    cause, all 15) from the bare log, measured once untouched with the code of 023a238; the same without --bare. Its 2
    misses, two kinds (torch_npu's 'AclmdlRICaptureBegin(...) error code is 207005' re-raised by vllm-ascend's
    NPUModelRunner, without the capture lines, read unknown; c10d's 'Timeout at NCCL work: 1 ... taking the entire
    process down' after the first collective read as a stall at NCCL set-up), were written up. Round twenty-eight's rules, each from the source that prints the text
    (test_diagnose_platforms.py, items 35-40): torch_npu's
    NPUGraph capture call failing as cuda_graph_error; c10d's NCCL work timeout lines as nccl_error over the stall: 15/15
    (failures 13/13). A tune split since. A floor, not a file check. No source is named by another folder's manifest or skipped list, and this
    batch's skipped list names no other folder's source."""
    _guard_batch(BATCH42_HELDOUT, total=15, floor=15, shows_cause=15, sglang=0)


# batch43-heldout: 15 real logs (6 SGLang, 9 vLLM), the classes the last batches lacked first, from 15 sources none
# named by another manifest or skipped list (run logs projects committed, from the `code` corpus, cited by blob URL at
# a commit: jethac/dgx-spark-hijinks 6, lennonYe/6998_project 3, colonel-otto/3x-dgx-spark-mesh-deepseek-v4-0731-flash
# 2, OscarTsao/CultureDx, Amadeus-ddc/Amadeus, p4s2wd/sglang-dev, sfxnz/DeepSeek-V4.1-Flash-EXL3-vLLM-2x-DGX-Spark), under
# batch15's rule, committed (e967c42) before fleet read them and measured once untouched with the code of e967c42 held
# still in a worktree (the diagnose code of b710c5c; benchmarks/results/diagnose-heldout.md, "batch43-heldout").
BATCH43_HELDOUT = REAL.parent / "batch43-heldout"


def test_batch43_keeps_its_tune_figure() -> None:
    """15 real logs, 6 SGLang and 9 vLLM (healthy 5, unknown 4, import_error 2, kv_pool_too_small 1, cuda_graph_error 1,
    context_length_exceeded 1, nccl_error 1): 13/15 right (failures 8/10; 12/14 where the excerpt shows the cause,
    failures 7/9; SGLang 6/6, vLLM 7/9) from the bare log, measured once untouched with the code of e967c42; the same
    without --bare. Its 2 misses, two kinds (vLLM 0.17.1's renderer 'VLLMValidationError: You passed 15361 input tokens
    and requested 1024 output tokens. However, the model's context length is only 16384 tokens' read healthy;
    FlashInfer's import-time 'AttributeError: module 'cutlass.cute.nvgpu' has no attribute 'OperandMajorMode'' inside
    the engine core's start read unknown), were written up. Round twenty-eight's rules, each from the source that prints the text
    (test_diagnose_platforms.py, items 35-40): vLLM's renderer refusal as
    context_length_exceeded; a package's import chain from a checkout under another name as import_error: 15/15
    (failures 10/10). A tune split since. A floor, not a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped list names no other
    folder's source."""
    _guard_batch(BATCH43_HELDOUT, total=15, floor=15, shows_cause=14, sglang=6)


# batch41-heldout: 9 real SGLang logs, the classes the last batches lacked first, from 9 issue-thread windows none named
# by another manifest or skipped list (sgl-project/sglang 7, kvcache-ai/sglang 1, kvcache-ai/ktransformers 1), under
# batch15's rule, committed (f2d2d77) before fleet read them and measured once untouched with the code of f2d2d77 held
# still in a worktree (the diagnose code of b710c5c; benchmarks/results/diagnose-heldout.md, "batch41-heldout").
BATCH41_HELDOUT = REAL.parent / "batch41-heldout"


def test_batch41_keeps_its_tune_figure() -> None:
    """9 real logs, all SGLang (unknown 3, cuda_illegal_memory_access 2, healthy 2, cuda_graph_error 1, import_error 1):
    7/9 right (failures 5/7; 6/8 where the excerpt shows the cause) from the bare log, measured once untouched with the
    code of f2d2d77; the same without --bare. Its 2 misses, two kinds (ROCm's 'Memory access fault by GPU node-1 ... on
    address' with HSA_STATUS_ERROR_MEMORY_FAULT read unknown; the NPU graph runner's 'Capture cuda graph failed:
    aclnnLightningIndexer ... not in libopapi.so' read cuda_graph_error, labelled import_error), were written up.
    Round twenty-eight's rules, each from the source that prints the text (test_diagnose_platforms.py, items 35-40):
    ROCm's HSA memory fault as cuda_illegal_memory_access; the op-plugin's '<op> ... not in libopapi.so' as
    import_error, a cause over the capture wrapper: 9/9 (failures 7/7). A tune split since. A floor, not a file check.
    No source is named by another folder's manifest or skipped list, and this batch's skipped list names no other
    folder's source."""
    _guard_batch(BATCH41_HELDOUT, total=9, floor=9, shows_cause=8, sglang=9)


# batch44-heldout: 15 real logs (2 SGLang, 13 vLLM), the classes the last batches lacked first, from 15 issue-thread
# windows none named by another manifest or skipped list (vllm-project/vllm 2, sgl-project/sglang 2, and one each from
# vllm-ascend, weicj/vLLM-2080Ti-Definitive, defilantech/LLMKube, MiniMax-AI/MiniMax-M2.7, production-stack,
# run-ai/runai-model-streamer, LMCache, baidu/vLLM-Kunlun, lamikr/rocm_sdk_builder, flagos-ai/vllm-plugin-FL and
# vllm-omni), under batch15's rule, committed (10f8559) before fleet read them and measured once untouched with the code
# of 10f8559 held still in a worktree (the diagnose code of 369e923; benchmarks/results/diagnose-heldout.md,
# "batch44-heldout").
BATCH44_HELDOUT = REAL.parent / "batch44-heldout"


def test_batch44_keeps_its_tune_figure() -> None:
    """15 real logs, 2 SGLang and 13 vLLM (unknown 9, healthy 3, cuda_oom 1, cuda_illegal_memory_access 1,
    unsupported_gpu_arch 1): 12/15 right (failures 9/12; 8/9 where the excerpt shows the cause, failures 5/6; SGLang 1/2,
    vLLM 11/13) from the bare log, measured once untouched with the code of 10f8559; the same without --bare. Its 3
    misses, two kinds (two starts cut while hung, SGLang in NCCL set-up and vLLM waiting for its engine core, read
    server_start_timeout, the stall-evidence conflict; FlagOS vllm_fl's 'ValueError: Vendor 'hygon' not found in
    VENDOR_DEVICE_MAP.' read unknown), were written up. Round twenty-nine's rule, from the plugin's source
    (test_diagnose_platforms.py, item 41): vllm-plugin-FL's vendor missing from its device map as unsupported_gpu_arch:
    13/15 (failures 10/12; the two cut starts stay the stall-evidence conflict, labels unchanged). A tune split since. A
    floor, not a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped
    list names no other folder's source."""
    _guard_batch(BATCH44_HELDOUT, total=15, floor=13, shows_cause=9, sglang=2)


# batch45-heldout: 15 real logs (7 SGLang, 8 vLLM), the classes the last batches lacked first, from 15 sources none
# named by another manifest or skipped list (run logs projects committed, from the `code` corpus, cited by blob URL at
# a commit: michael-amd/sglang-ci 4, Starwaves1/vllm-gsqrco-exl3 3, jiahaoliang/vllm-workspace 2, and one each from
# StellaLee/vllm-experiment, zcnrex/sglang, ccdd2023/sglang, 70hKMSWwAG/sglang-serving-challenge, xlisp/jimw-vllm and
# hzqjgthy/vllm), under batch15's rule, committed (57f2ab0) before fleet read them and measured once untouched with the
# code of 57f2ab0 held still in a worktree (the diagnose code of 369e923; benchmarks/results/diagnose-heldout.md,
# "batch45-heldout").
BATCH45_HELDOUT = REAL.parent / "batch45-heldout"


def test_batch45_heldout_keeps_its_measured_accuracy() -> None:
    """15 real logs, 7 SGLang and 8 vLLM (healthy 6, unknown 4, kv_pool_too_small 2, cuda_oom 1, port_in_use 1,
    cuda_graph_error 1): 15/15 right (failures 9/9; 14/14 where the excerpt shows the cause, failures 8/8; SGLang 7/7,
    vLLM 8/8) from the bare log, measured once untouched with the code of 57f2ab0; the same without --bare. No misses.
    Held out: not tuned on. A floor, not a file check. No source is named by another folder's manifest or skipped list,
    and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH45_HELDOUT, total=15, floor=15, shows_cause=14, sglang=7)


# batch46-heldout: 13 real logs (4 SGLang, 9 vLLM), SGLang first, the classes the last batches lacked first, from 13
# issue-thread windows none named by another manifest or skipped list (xorbitsai/inference 4, ovg-project/kvcached 2,
# vllm-project/vllm 2, and one each from sgl-project/sglang, QwenLM/Qwen3.8, THUDM/slime, ROCm/legacy-rocm-build and
# tenstorrent/tt-inference-server), under batch15's rule, committed (fdd14f9) before fleet read them and measured once
# untouched with the code of fdd14f9 held still in a worktree (the diagnose code of 2d31b85;
# benchmarks/results/diagnose-heldout.md, "batch46-heldout").
BATCH46_HELDOUT = REAL.parent / "batch46-heldout"


def test_batch46_keeps_its_tune_figure() -> None:
    """13 real logs, 4 SGLang and 9 vLLM (unknown 9, healthy 2, kv_pool_too_small 1, context_length_exceeded 1): 11/13
    right (failures 10/11; 4/6 where the excerpt shows the cause, failures 3/4; SGLang 3/4, vLLM 8/9) from the bare log,
    measured once untouched with the code of fdd14f9; the same without --bare. Its 2 misses, two kinds (Tenstorrent's
    vLLM fork's 'do not support max_model_len greater than 32768 on N150' read unknown; an SGLang serving window of
    'Token fusion between input and output' warnings only read unknown), were written up. Round thirty's rules, each
    from the source that prints the text (test_diagnose_platforms.py, items 46-48): a model build's refusal of a longer
    max_model_len as context_length_exceeded; SGLang's token-fusion warning as a server at work: 13/13 (failures 11/11).
    A tune split since. A floor, not a file check. No source is named by another folder's manifest or skipped list, and
    this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH46_HELDOUT, total=13, floor=13, shows_cause=6, sglang=4)


# batch47-heldout: 15 real logs (10 SGLang, 5 vLLM), the classes the last batches lacked first, from 15 sources none
# named by another manifest or skipped list (run logs projects committed, from the `code` corpus, cited by blob URL at
# a commit: sabreshao/sglang_disagg 4, leinfinitr/vllm-switch-bench 2, IsseiHasegawa/vLLM-experiment 2,
# lyell0710/sglang-prefix-lab 2, and one each from fractalyze/sglang, Jiminator/sglang, hasso5703/dgx-spark-qwen38,
# c0derzer0/llmsys_f25_hw6 and TaliesinYang/vllm-ltr-optimization), under batch15's rule, committed (adcec17) before
# fleet read them and measured once untouched with the code of adcec17 held still in a worktree (the diagnose code of
# 2d31b85; benchmarks/results/diagnose-heldout.md, "batch47-heldout").
BATCH47_HELDOUT = REAL.parent / "batch47-heldout"


def test_batch47_keeps_its_tune_figure() -> None:
    """15 real logs, 10 SGLang and 5 vLLM (healthy 7, unknown 4, cuda_oom 2, kv_pool_too_small 1, model_load_error 1):
    13/15 right (failures 7/8; the same where the excerpt shows the cause, all 15; SGLang 8/10, vLLM 5/5) from the bare
    log, measured once untouched with the code of adcec17; the same without --bare. Its 2 misses, two kinds (an
    in-process SGLang engine's complete start, no ready line printed in-process, read as a start cut; a load-time 'Some
    weights are not initialized from checkpoints' warning read model_load_error ahead of a FlashInfer-autotune
    AttributeError labelled unknown), were written up. Round thirty's rule, from SGLang's source
    (test_diagnose_platforms.py, item 47): 'Some weights are not initialized from checkpoints' a failure only where it
    is raised (other model classes log it as a warning): 14/15 (failures 8/8); the in-process start stays a cut start
    (no line tells an in-process engine's finished start from a server's start cut after capture). A tune split since. A
    floor, not a file check. No source is named by another folder's manifest or skipped list, and this batch's skipped
    list names no other folder's source."""
    _guard_batch(BATCH47_HELDOUT, total=15, floor=14, shows_cause=15, sglang=10)


# batch48-heldout: 15 real vLLM logs, the classes the last batches lacked first, from 15 issue-thread windows none named
# by another manifest or skipped list (the `issues` corpus: vllm-project/vllm 6, vllm-project/vllm-ascend 6, and one each
# from NVIDIA/nccl, vllm-project/vllm-metal and OpenBMB/MiniCPM-V), under batch15's rule, committed (63747a6) before
# fleet read them and measured once untouched with the code of 63747a6 held still in a worktree (the diagnose code of
# c55c91f, round thirty; benchmarks/results/diagnose-heldout.md, "batch48-heldout").
BATCH48_HELDOUT = REAL.parent / "batch48-heldout"


def test_batch48_keeps_its_tune_figure() -> None:
    """15 real vLLM logs (cuda_graph_error 3, healthy 3, nccl_error 2, unknown 2, cuda_illegal_memory_access 1,
    model_load_error 1, unsupported_gpu_arch 1, kv_pool_too_small 1, cuda_oom 1): 14/15 right (failures 11/12; the same
    where the excerpt shows the cause, all 15) from the bare log, measured once untouched with the code of 63747a6; the
    same without --bare. Its one miss (torch_npu's 'RuntimeError: Cannot run aclop operators during NPU graph capture'
    under vllm-ascend read unknown, labelled cuda_graph_error) was written up. Round thirty-one's rule, from torch_npu's
    source (test_diagnose_platforms.py, item 49): its capture refusals as cuda_graph_error: 15/15 (failures 12/12). A
    tune split since. A floor, not a file check. No source is named by another folder's manifest or skipped list, and
    this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH48_HELDOUT, total=15, floor=15, shows_cause=15, sglang=0)


# batch51-heldout: 14 real logs (8 SGLang, 6 vLLM), the classes the last batches lacked first, from 14 sources none
# named by another manifest or skipped list (run logs projects committed, from the `code` corpus, cited by blob URL at
# a commit: kaggle-vllm/kaggle-vllm 5, michael-amd/sglang-ci 5, Stars1233/sgl-project.github.io 3 and
# kagaho/VLLM_Serve_llama3-70b-awq_on_L40S_with_Tensor_Parallelism_2 1), under batch15's rule, committed (9685bee)
# before fleet read them and measured once untouched with the code of 9685bee held still in a worktree (the diagnose
# code of c55c91f, round thirty; benchmarks/results/diagnose-heldout.md, "batch51-heldout").
BATCH51_HELDOUT = REAL.parent / "batch51-heldout"


def test_batch51_heldout_keeps_its_measured_accuracy() -> None:
    """14 real logs, 8 SGLang and 6 vLLM (healthy 8, kv_pool_too_small 2, model_load_error 1, port_in_use 1,
    cuda_graph_error 1, cuda_illegal_memory_access 1): 11/14 right (failures 5/6; the same where the excerpt shows the
    cause, all 14; SGLang 7/8, vLLM 4/6) from the bare log, measured once untouched with the code of 9685bee; the same
    without --bare. Its 3 misses, two kinds (vLLM's ModelConfig refusal 'The model type 'gemma3' does not support
    float16' read unknown; in-process starts with no ready line, an SGLang sgl.Engine amid ipykernel ZMQ tracebacks and
    a vLLM client's 'Engine core proc EngineCore died unexpectedly' after the engine's own 'Shutdown complete', read
    unknown), are written up, not acted on. Held out: not tuned on. A floor, not a file check. No source is named by
    another folder's manifest or skipped list, and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH51_HELDOUT, total=14, floor=11, shows_cause=14, sglang=8)


# batch50-heldout: 15 real logs (2 SGLang, 13 vLLM), the classes the last batches lacked first, from 15 issue and
# pull-request thread windows none named by another manifest or skipped list (the `issues` corpus only:
# vllm-project/vllm 6, LMCache/LMCache 4, gpustack/gpustack 2, Dao-AILab/flash-attention, NVIDIA/nccl,
# QwenLM/Qwen3-VL), under batch15's rule, committed (778f24a) before fleet read them and measured once untouched with
# the code of 778f24a held still in a worktree (the diagnose code of c55c91f, round thirty;
# benchmarks/results/diagnose-heldout.md, "batch50-heldout").
BATCH50_HELDOUT = REAL.parent / "batch50-heldout"


def test_batch50_heldout_keeps_its_measured_accuracy() -> None:
    """15 real logs, 2 SGLang and 13 vLLM (unknown 5, healthy 3, unsupported_gpu_arch 2, nccl_error 2,
    kv_pool_too_small 1, cuda_oom 1, cuda_illegal_memory_access 1): 14/15 right (failures 11/12; 13/13 where the
    excerpt shows the cause; SGLang 1/2, vLLM 13/13) from the bare log, measured once untouched with the code of
    778f24a; the same without --bare. Its one miss (an SGLang pipeline-parallel start cut inside CUDA-graph capture,
    labelled unknown by the cut-start convention, read server_start_timeout) is the stall-evidence conflict, written up,
    not acted on. Held out: not tuned on. A floor, not a file check. No source is named by another folder's manifest or
    skipped list, and this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH50_HELDOUT, total=15, floor=14, shows_cause=13, sglang=2)


# batch49-heldout: 15 real vLLM logs, the classes the last batches lacked first, from 15 sources none named by another
# manifest or skipped list (run logs projects committed, from the `code` corpus, cited by blob URL at a commit:
# belonghim/vllm-optimizer 4, patcarter883/rdna4-vllm 3, mystous/vllm_hybrid 2, Anemll/dspark-vllm-gx10 2, and one
# each from vLLM-HUST/vllm-hust-benchmark, sukritRunara/gpt-oss-120b-blockwise-h100, cadamcat/dual-radeon-vllm and
# christopherowen/spark3-vllm-ds41f), under batch15's rule, committed (9fe09c8) before fleet read them and measured
# once untouched with the code of 9fe09c8 held still in a worktree (the diagnose code of c55c91f, round thirty;
# benchmarks/results/diagnose-heldout.md, "batch49-heldout").
BATCH49_HELDOUT = REAL.parent / "batch49-heldout"


def test_batch49_heldout_keeps_its_measured_accuracy() -> None:
    """15 real vLLM logs (unknown 5, healthy 3, cuda_oom 3, nccl_error 1, context_length_exceeded 1,
    kv_pool_too_small 1, import_error 1): 15/15 right (failures 12/12; the same where the excerpt shows the cause, all
    15) from the bare log, measured once untouched with the code of 9fe09c8; the same without --bare. No misses. Held
    out: not tuned on. A floor, not a file check. No source is named by another folder's manifest or skipped list, and
    this batch's skipped list names no other folder's source."""
    _guard_batch(BATCH49_HELDOUT, total=15, floor=15, shows_cause=15, sglang=0)
