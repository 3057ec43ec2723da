"""`fleet diagnose` on the texts of the libraries and platforms under the engines (issue 27, round twenty-two).

batch28-heldout's miss kinds, each decided from the source that prints the text (named in the catalogue beside the
trigger): torch_memory_saver's own check lines (fzyzcjy/torch_memory_saver csrc/utils.h, every one followed by exit(1))
and SGLang's SIGCHLD handler reaping a child that died; the SYCL runtime's Unified Runtime results on Intel GPUs (only
UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY is the device's memory; OUT_OF_RESOURCES is not); CPython's "module '%U' has no
attribute '%U'" for a module without a name its importer uses. Each test builds its lines from the format strings, in
the framings that print them (SGLang's launcher and scheduler, vLLM's engine core and API server, Ray's actor prefix),
and the real logs that carry them are read by their manifest entries (never by their file names alone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.diagnose.classify import diagnose_file, diagnose_text

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def _entries(folder: str) -> list[dict[str, object]]:
    manifest = LOGS / folder / "manifest.jsonl"
    return [json.loads(raw) for raw in manifest.read_text(encoding="utf-8").splitlines() if raw.strip()]


def _entries_where(folder: str, words: str) -> list[dict[str, object]]:
    """The manifest entries whose notes quote `words` (a log's own text, as the collector's notes cite it)."""
    found = [entry for entry in _entries(folder) if words in str(entry.get("notes", ""))]
    assert found, f"no entry of {folder} quotes {words!r}"
    return found


# An SGLang server that came up (its launcher's lines carry only a timestamp: no level).
_SGLANG_UP = [
    "[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=2, enable_memory_saver=True)",
    "[2026-05-24 10:00:02 TP0] Load weight begin. avail mem=78.00 GB",
    "[2026-05-24 10:00:09] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "[2026-05-24 10:00:10] The server is fired up and ready to roll!",
]
# The same start as a Ray actor of an RL trainer prints it (Ray prefixes every line with the actor's name and pid).
_RAY = "(SGLangHttpServer pid=250977) "


def test_a_served_sglang_start_reads_healthy() -> None:
    # The control for the tests below: the head alone is a healthy start.
    assert diagnose_text(_SGLANG_UP).failure_class is None


# (1) torch_memory_saver's CURESULT_CHECK / CUDA_ERROR_CHECK (csrc/utils.h): "[torch_memory_saver.cpp] CUresult error: "
# << result << " (" << cuGetErrorString's text << ") " << " file=" ... " func=" ... " line=" ..., then exit(1); before
# 2025-07 "CUresult error " << " result=" << result << " file=...", and the ROCm file's "hipError_t error  result=".
_SAVER_OUT_OF_MEMORY = [
    "[torch_memory_saver.cpp] CUresult error: 2 (out of memory)  file=csrc/utils.h func=cu_mem_create line=194",
    "[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172",
    "[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp func=resume line=214",
    "[torch_memory_saver.cpp] hipError_t error  result=2 file=csrc/torch_memory_saver_hip.cpp func=resume line=230",
]
_SAVER_OTHER = [
    ("CUresult error  result=1", "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=214"),
    ("CUresult error: 1 (invalid argument)", "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument)  file=csrc/core.cpp func=resume line=246"),
    ("CUresult error: 801", "[torch_memory_saver.cpp] CUresult error: 801 (operation not supported)  file=csrc/utils.h func=cu_mem_set_access line=158"),
    # SIMPLE_CHECK and core.cpp's state checks: the same " file= func= line=" tail, the same exit(1).
    (
        "Cannot resume allocation that is not paused.",
        "[torch_memory_saver.cpp] Cannot resume allocation that is not paused.  tag=kv_cache ptr=140551 file=csrc/core.cpp func=resume line=237",
    ),
]


@pytest.mark.parametrize("line", _SAVER_OUT_OF_MEMORY)
@pytest.mark.parametrize("framing", ["bare", "sglang", "ray"])
def test_the_memory_savers_out_of_memory_check_is_cuda_oom(line: str, framing: str) -> None:
    lines = {"bare": [line], "sglang": [*_SGLANG_UP, line], "ray": [_RAY + item for item in [*_SGLANG_UP, line]]}[framing]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_oom"
    assert any("torch_memory_saver.cpp" in item.text for item in diagnosis.evidence)
    assert "torch_memory_saver could not get GPU memory" in (diagnosis.fix or "")


def test_the_memory_savers_may_not_be_an_issue_line_alone_is_no_failure() -> None:
    # cu_mem_create prints it and hands cudaErrorMemoryAllocation back; the preload hook returns that to torch, which
    # frees cache and retries: only the check line after it (exit(1)) is the failure.
    line = "[torch_memory_saver.cpp] cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch allocator will free cache and retry)"
    assert diagnose_text([*_SGLANG_UP, line]).failure_class is None
    check = "[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172"
    assert diagnose_text([*_SGLANG_UP, line, check]).failure_class == "cuda_oom"


@pytest.mark.parametrize(("words", "line"), _SAVER_OTHER)
@pytest.mark.parametrize("framing", ["bare", "sglang", "ray"])
def test_the_memory_savers_other_checks_are_a_failure_no_class_names(words: str, line: str, framing: str) -> None:
    lines = {"bare": [line], "sglang": [*_SGLANG_UP, line], "ray": [_RAY + item for item in [*_SGLANG_UP, line]]}[framing]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown"
    assert any(words in item.text for item in diagnosis.evidence)
    assert "torch_memory_saver's check failed" in (diagnosis.fix or "")


# SGLang's SIGCHLD handler: 0.4.x logger.warning("Child process unexpectedly failed with an exit code %d. pid=%d", ...),
# 0.5.x f"Child process unexpectedly failed with {exitcode=}. {pid=}"; the number is waitpid's status.
def _child(status: int, wording: str) -> str:
    return f"Child process unexpectedly failed with an exit code {status}. pid=97721" if wording == "0.4" else f"Child process unexpectedly failed with exitcode={status}. pid=97721"


_PREFIXES = {
    "sglang": "[2026-05-24 10:00:30] ",  # the launcher's logger: a timestamp, no level
    "root-logger": "WARNING:root:",  # 0.4.x's logging.warning on an unconfigured-format root logger
    "dynamo": "2026-05-24T10:00:30.228Z  WARN engine.sigchld_handler: ",  # a host that prints the level
}


@pytest.mark.parametrize("status", [256, 512, 32512, 139, 134, 11, 6])
@pytest.mark.parametrize("wording", ["0.4", "0.5"])
@pytest.mark.parametrize("prefix", sorted(_PREFIXES))
def test_sglangs_child_that_died_is_a_failure(status: int, wording: str, prefix: str) -> None:
    # An exit with a non-zero code (status 256 and up) or a crash signal: the engine lost a scheduler or detokenizer,
    # at warning level in the source, still a failure; with nothing naming a cause, unknown (never healthy).
    line = _PREFIXES[prefix] + _child(status, wording)
    diagnosis = diagnose_text([*_SGLANG_UP, line, line.replace("97721", "97719")])
    assert diagnosis.failure_class == "unknown"
    assert any("Child process unexpectedly failed" in item.text for item in diagnosis.evidence)
    assert f"wait status {status}" in (diagnosis.fix or "")


@pytest.mark.parametrize("status", [9, 15, 2, 1])
@pytest.mark.parametrize("wording", ["0.4", "0.5"])
def test_sglangs_child_stopped_by_a_signal_is_not_read(status: int, wording: str) -> None:
    # SIGKILL, SIGTERM, SIGINT, SIGHUP: what a stop does to the process group too; the signal-stop convention reads stops.
    assert diagnose_text([*_SGLANG_UP, _PREFIXES["sglang"] + _child(status, wording)]).failure_class is None


def test_children_exiting_after_sglangs_sigterm_are_its_teardown() -> None:
    # The signal-stop convention: a served start stopped by a signal is healthy, whatever its children print after it.
    stop = "[2026-05-24 10:00:29] SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
    assert diagnose_text([*_SGLANG_UP, stop, _PREFIXES["sglang"] + _child(256, "0.5")]).failure_class is None


def test_a_memory_savers_check_then_the_children_exiting_names_the_check() -> None:
    check = "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=214"
    diagnosis = diagnose_text([*_SGLANG_UP, check, check, _child(256, "0.4"), _child(256, "0.4").replace("97721", "97709")])
    assert diagnosis.failure_class == "unknown"
    assert "result=1" in diagnosis.evidence[0].text
    assert "in its resume" in (diagnosis.fix or "")


def test_batch28s_memory_saver_logs() -> None:
    # The three SGLang logs whose notes quote the memory saver's check lines, by their manifest entries.
    for words, label in (("CUresult error: 2 (out of memory)", "cuda_oom"), ("cudaError error: 2 (out of memory)", "cuda_oom"), ("CUresult error  result=1", "unknown")):
        for entry in _entries_where("batch28-heldout", words):
            diagnosis = diagnose_file(LOGS / "batch28-heldout" / str(entry["file"]))
            assert diagnosis.failure_class == entry["label"] == label, entry["file"]
            assert any("torch_memory_saver.cpp" in item.text for item in diagnosis.evidence)


# (2) The SYCL runtime's exception for a Unified Runtime call's failure (intel/llvm sycl/source/detail/adapter.hpp
# checkUrResult: __SYCL_UR_ERROR_REPORT(backend) + codeToString(result); older releases "UR backend failed. UR backend
# returns:" + codeToString(result)). Level Zero's ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY arrives as result 39.
def _ur(result: str, older: bool) -> str:
    return f"RuntimeError: UR backend failed. UR backend returns:{result}" if older else f"RuntimeError: level_zero backend failed with error: {result}"


_VLLM_CORE = "(EngineCore_DP0 pid=568) ERROR 04-16 12:49:28 [core.py:936] "
_VLLM_WORKER = "(Worker_TP1 pid=8317) ERROR 02-03 09:24:09 [multiproc_executor.py:743] "


def _xpu_vllm(line: str) -> list[str]:
    return [
        "INFO 04-16 12:49:00 [api_server.py:1000] vLLM API server version 0.11.1",
        _VLLM_CORE + "EngineCore failed to start.",
        _VLLM_CORE + "Traceback (most recent call last):",
        _VLLM_CORE + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/xpu_worker.py", line 105, in determine_available_memory',
        _VLLM_CORE + "    torch.xpu.synchronize()",
        _VLLM_CORE + line,
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]


def _xpu_worker(line: str) -> list[str]:
    return [
        _VLLM_WORKER + "WorkerProc failed to start.",
        _VLLM_WORKER + "Traceback (most recent call last):",
        _VLLM_WORKER + '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/ipex_quant.py", line 463, in create_weights',
        _VLLM_WORKER + "    torch.ones(num_experts, 2, dtype=torch.float32), requires_grad=False",
        _VLLM_WORKER + line,
    ]


def _xpu_sglang(line: str) -> list[str]:
    return [
        "[2026-05-24 10:00:00] server_args=ServerArgs(model_path='/models/m', device='xpu')",
        "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2000, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
        line,
        "",
        "[2026-05-24 10:00:04] Received sigquit from a child process. It usually means the child failed.",
    ]


_XPU_FRAMINGS = {"vllm-engine-core": _xpu_vllm, "vllm-worker": _xpu_worker, "sglang": _xpu_sglang}


@pytest.mark.parametrize("older", [False, True])
@pytest.mark.parametrize("framing", sorted(_XPU_FRAMINGS))
def test_level_zeros_device_out_of_memory_is_cuda_oom(older: bool, framing: str) -> None:
    diagnosis = diagnose_text(_XPU_FRAMINGS[framing](_ur("39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)", older)))
    assert diagnosis.failure_class == "cuda_oom"
    assert any("UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY" in item.text for item in diagnosis.evidence)


@pytest.mark.parametrize("result", ["40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)", "20 (UR_RESULT_ERROR_DEVICE_LOST)", "38 (UR_RESULT_ERROR_OUT_OF_HOST_MEMORY)"])
@pytest.mark.parametrize("older", [False, True])
@pytest.mark.parametrize("framing", sorted(_XPU_FRAMINGS))
def test_other_unified_runtime_results_are_not_the_devices_memory(result: str, older: bool, framing: str) -> None:
    # OUT_OF_RESOURCES is what UR's Level Zero adapter returns for its own objects (a host bad_alloc, a full event pool
    # or completion batch in a kernel launch), DEVICE_LOST a lost device, OUT_OF_HOST_MEMORY the host's: no class names them.
    diagnosis = diagnose_text(_XPU_FRAMINGS[framing](_ur(result, older)))
    assert diagnosis.failure_class == "unknown"
    assert any(result.split(" ")[1].strip("()") in item.text for item in diagnosis.evidence)


def test_batch28s_level_zero_out_of_resources_logs_read_unknown() -> None:
    # Both collected as cuda_oom (a judgement call in their notes); relabelled unknown from the source, label_as_collected kept.
    entries = _entries_where("batch28-heldout", "UR_RESULT_ERROR_OUT_OF_RESOURCES")
    assert len(entries) == 2
    for entry in entries:
        assert entry["label_as_collected"] == "cuda_oom"
        diagnosis = diagnose_file(LOGS / "batch28-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "unknown", entry["file"]
        assert any("UR_RESULT_ERROR_OUT_OF_RESOURCES" in item.text for item in diagnosis.evidence)


# (3) CPython's module getattr (Objects/moduleobject.c): "module '%U' has no attribute '%U'", and while the module is
# still being imported "partially initialized module '%U' has no attribute '%U' (most likely due to a circular import)"
# (3.13: "... module '%U' from '%U' has no attribute ..."), inside vLLM's model registry's report of a model class it
# could not import (registry.py _try_inspect_model_cls: logger.exception("Error in inspecting model architecture '%s'"),
# the traceback under its "[registry.py:N]" prefix).
_MISSING = [
    ("triton", "AttributeError: module 'triton.language' has no attribute 'exp'"),
    ("aiter", "AttributeError: module 'aiter' has no attribute 'fmoe'"),
    ("torch", "AttributeError: module 'torch' has no attribute 'float8_e8m0fnu'"),
    ("flashinfer", "AttributeError: partially initialized module 'flashinfer' has no attribute 'jit' (most likely due to a circular import)"),
    (
        "transformers",
        "AttributeError: partially initialized module 'transformers' from '/usr/lib/python3/dist-packages/transformers/__init__.py' has no attribute 'utils' (most likely due to a circular import)",
    ),
]
_REGISTRIES = {
    "0.10": "(APIServer pid=3500) ERROR 09-16 14:02:15 [registry.py:444] ",
    "0.6": "ERROR 10-26 11:35:32 registry.py:267] ",
    "0.33": "(APIServer pid=1) ERROR 05-24 10:00:00 [registry.py:1164] ",
}


def _vllm_registry(line: str, release: str = "0.10", header: bool = True) -> list[str]:
    # The registry's report (its header, the import's traceback under its prefix), then the API server's own traceback
    # and its refusal, "Model architectures [...] failed to be inspected" (a model_load_error line after the cause).
    prefix = _REGISTRIES[release]
    return [
        *([prefix + "Error in inspecting model architecture 'Qwen3NextForCausalLM'"] if header else []),
        prefix + "Traceback (most recent call last):",
        prefix + '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/fla/ops/op.py", line 26, in <module>',
        prefix + "    exp = tl.exp",
        prefix + line,
        prefix,
        "(APIServer pid=3500) Traceback (most recent call last):",
        "(APIServer pid=3500) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
        "(APIServer pid=3500)   Value error, Model architectures ['Qwen3NextForCausalLM'] failed to be inspected. Please check the logs for more details.",
    ]


@pytest.mark.parametrize(("package", "line"), _MISSING)
@pytest.mark.parametrize("release", sorted(_REGISTRIES))
@pytest.mark.parametrize("header", [True, False])
def test_a_module_without_the_name_a_model_class_imports_is_import_error(package: str, line: str, release: str, header: bool) -> None:
    # With its header or without it (a window that starts inside the traceback): the import's failure is the cause,
    # over the registry's "Error in inspecting" (ranked after every cause) and the API server's refusal after it.
    diagnosis = diagnose_text(_vllm_registry(line, release, header))
    assert diagnosis.failure_class == "import_error"
    assert "has no attribute" in diagnosis.evidence[0].text
    assert f"the installed {package} is older or newer" in (diagnosis.fix or "")


@pytest.mark.parametrize(("package", "line"), _MISSING[:3])
def test_sglangs_registry_skipping_the_same_import_then_refusing_the_model_is_import_error(package: str, line: str) -> None:
    # SGLang's framing of the same event (the existing rule for its registry, kept): it logs the import's message as a
    # warning, "Ignore import error when loading {name}: {e}", and refuses the architecture that module defines.
    message = line.removeprefix("AttributeError: ")
    lines = [
        f"[2026-05-24 10:00:01] Ignore import error when loading sglang.srt.models.qwen3_next: {message}",
        "[2026-05-24 10:00:05] Scheduler hit an exception: Traceback (most recent call last):",
        "ValueError: Model architectures ['Qwen3NextForCausalLM'] are not supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error"
    assert package in diagnosis.evidence[0].text or "qwen3_next" in diagnosis.evidence[0].text


@pytest.mark.parametrize(
    "line",
    [
        "AttributeError: module 'vllm.model_executor.layers' has no attribute 'rotary'",  # the engine's own modules
        "AttributeError: 'NoneType' object has no attribute 'shape'",  # an object's attribute, not a module's
    ],
)
def test_other_attribute_errors_in_the_registrys_report_stay_the_model_class_failing(line: str) -> None:
    assert diagnose_text(_vllm_registry(line)).failure_class == "model_load_error"


def test_the_same_words_outside_the_registrys_report_are_not_read_by_this_rule() -> None:
    # An engine module's own AttributeError at its import (vLLM's engine core starting) stays the engine's, as the
    # generalise tests read a source checkout's; and a logged warning that names the words proves nothing.
    core = "(EngineCore_DP0 pid=7) ERROR 05-24 10:00:03 [core.py:708] "
    lines = [
        core + "EngineCore failed to start.",
        core + "Traceback (most recent call last):",
        core + '  File "/workspace/vllm/vllm/config/__init__.py", line 3, in <module>',
        core + "    X = torch.foo",
        core + "AttributeError: module 'torch' has no attribute 'foo'",
    ]
    assert diagnose_text(lines).failure_class != "import_error"
    warning = "WARNING 09-16 14:02:15 [registry.py:12] Skipping the fla ops: module 'triton.language' has no attribute 'exp'"
    assert diagnose_text([*_SGLANG_UP, warning]).failure_class is None


def test_the_registrys_report_alone_is_still_the_model_class_failing() -> None:
    # The subprocess's own failure (0.6-0.10 run the inspection in a subprocess: CalledProcessError) names no cause.
    prefix = _REGISTRIES["0.6"]
    lines = [
        prefix + "Error in inspecting model architecture 'LlamaForCausalLM'",
        prefix + "Traceback (most recent call last):",
        prefix + "    raise CalledProcessError(self.returncode, self.args, self.stdout,",
        prefix + "subprocess.CalledProcessError: Command '['/bin/python', '-m', 'vllm.model_executor.models.registry']' returned non-zero exit status 1.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error"
    assert "Error in inspecting model architecture" in diagnosis.evidence[0].text


def test_batch28s_registry_import_attribute_error() -> None:
    for entry in _entries_where("batch28-heldout", "has no attribute 'exp'"):
        diagnosis = diagnose_file(LOGS / "batch28-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "import_error", entry["file"]
        assert "has no attribute 'exp'" in diagnosis.evidence[0].text


def test_earlier_registry_reports_keep_their_reading() -> None:
    # The real logs that carry the registry's header (batch11, 16, 17): their label and reading did not move.
    for folder in ("batch11-heldout", "batch16-heldout", "batch17-heldout"):
        for entry in _entries(folder):
            text = (LOGS / folder / str(entry["file"])).read_text(encoding="utf-8", errors="replace")
            if "Error in inspecting model architecture" in text:
                assert diagnose_file(LOGS / folder / str(entry["file"])).failure_class == entry["label"] == "model_load_error", entry["file"]


# batch29's miss kinds (round twenty-two takes them too: its untouched figure was committed first).
# (4) Apache TVM FFI's type registry (src/ffi/object.cc RegisterTypeAttr): "TypeAttr `{name}` is already registered for
# type index {index}. To update the stored value, ..." thrown through C++ at a library's load: two copies of the runtime.
_TVM_FFI = [
    "terminate called after throwing an instance of 'tvm::ffi::Error'",
    "what(): TypeAttr `__ffi_repr__` is already registered for type index 130",
    "Fatal Python error: Aborted",
]


@pytest.mark.parametrize(
    "what",
    [
        "what(): TypeAttr `__ffi_repr__` is already registered for type index 130",
        "  what():  TypeAttr `__ffi_repr__` is already registered for type index 132. To update the stored value, register a mutable container (e.g., Dict/List) once and mutate it in place on subsequent calls.",
        "RuntimeError: TypeAttr `__ffi_shape__` is already registered for type index 64. To update the stored value, register a mutable container (e.g., Dict/List) once and mutate it in place on subsequent calls.",
        # v0.1.8-v0.1.9's wording of the same check.
        "  what():  Type attribute `__ffi_repr__` is already set for type `ffi.Shape`",
    ],
)
@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_tvm_ffis_duplicate_registration_is_import_error(what: str, framing: str) -> None:
    lines = [_TVM_FFI[0], what, _TVM_FFI[2]]
    if framing == "sglang":
        lines = [*_SGLANG_UP[:2], *lines, "RuntimeError: Rank 1 scheduler died during initialization (exit code: -6)"]
    else:
        core = "(EngineCore_DP0 pid=7) "
        lines = [core + line for line in lines] + ["(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error"
    assert "__ffi_" in diagnosis.evidence[0].text and " is already " in diagnosis.evidence[0].text
    assert "Two copies of the TVM FFI runtime" in (diagnosis.fix or "")


def test_a_terminate_without_tvm_ffis_words_is_still_unknown() -> None:
    lines = [_TVM_FFI[0], "what(): invalid handle", _TVM_FFI[2]]
    assert diagnose_text(lines).failure_class == "unknown"


# (5) FlagTree's FlagTune (triton/flagtune/runtime/device.py probe_flagtune_device): UnsupportedFlagTuneDeviceError(f"FlagTune
# does not support Triton backend {shown!r}; registered backends: {supported}").
@pytest.mark.parametrize("backend", ["corex", "xpu", "<unknown>"])
@pytest.mark.parametrize("form", ["next-line", "same-line"])
@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_flagtune_refusing_the_accelerators_backend_is_unsupported_gpu_arch(backend: str, form: str, framing: str) -> None:
    message = f"FlagTune does not support Triton backend '{backend}'; registered backends: cuda, hip, maca, musa"
    name = "triton.flagtune.runtime.device.UnsupportedFlagTuneDeviceError:"
    error = [name, "  " + message] if form == "next-line" else [f"{name} {message}"]
    if framing == "sglang":
        lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):", *error]
    else:
        core = "(EngineCore_DP0 pid=7) ERROR 05-24 10:00:03 [core.py:708] "
        lines = [core + "EngineCore failed to start.", *[core + line for line in error]]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    assert f"backend '{backend}'" in (diagnosis.fix or "")


def test_batch29s_logs_of_these_kinds() -> None:
    for words, label in (
        ("TypeAttr `__ffi_repr__` is already registered", "import_error"),
        ("FlagTune does not support Triton backend", "unsupported_gpu_arch"),
        ("CUresult error  result=1", "unknown"),
    ):
        for entry in _entries_where("batch29-heldout", words):
            diagnosis = diagnose_file(LOGS / "batch29-heldout" / str(entry["file"]))
            assert diagnosis.failure_class == entry["label"] == label, entry["file"]


# --- round twenty-three: batch30's and batch31's miss kinds ------------------------------------------------------------
# (6) Ascend's HCCL in CANN's own words. torch_npu raises the HCCL call's failure and appends CANN's error message. A port
# bound already: CANN's HCCL user guide, "Port Binding Failure on the Server (EJ0003)" ("Bind_Failed(EJ0003): Failed to
# bind the IP port. Reason: The IP address and port have been bound already."; older CANN "EJ0003: [PID: n] <time>
# Failed to bind ..."; 8.x "Communication_Error_Bind_IP_Port(EI0020): ... The IP address <ip> and port <port> have already
# been bound."), and HCCL's own line for it ("socket type[2], listen on ip[...] and specific port[60000] fail. Please check
# the port status and whether the port is being used by other process.").
_NPU_RANK = "[rank0]: "
_NPU_VLLM = "(VllmWorker rank=0 pid=97934) ERROR 04-01 08:04:31 [multiproc_executor.py:383] "
_HCCL_ROOT_INFO = "RuntimeError: createHCCLComm:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1479 HCCL function error: HcclGetRootInfo(&hcclID), error code is 11"
_HCCL_BIND = [
    ("EJ0003: [PID: 159] 2025-03-26-17:01:02.816.428 Failed to bind the IP port. Reason: The IP address and port have been bound already.", None),
    ("[PID: 2267203] 2025-11-21-11:38:29.575.404 Bind_Failed(EJ0003): Failed to bind the IP port. Reason: The IP address and port have been bound already.", None),
    ("[PID: 3354790] 2026-04-28-16:56:52.897.463 Communication_Error_Bind_IP_Port(EI0020): The IP address 192.0.2.193 and port 16666 have already been bound.", "16666"),
    (
        "[ERROR] HCCL(3626636,python3):2025-03-15-13:18:47.639.860 [hccl_socket.cc:110] [3626636][InitChannelStage][RanktableDetect] socket type[2], "
        "listen on ip[192.0.2.222%enp53s0f2] and specific port[60000] fail. Please check the port status and whether the port is being used by other process.",
        "60000",
    ),
]


@pytest.mark.parametrize(("line", "port"), _HCCL_BIND)
@pytest.mark.parametrize("prefix", ["", _NPU_RANK, _NPU_VLLM])
def test_hccls_port_bound_already_is_port_in_use(line: str, port: str | None, prefix: str) -> None:
    lines = [prefix + _HCCL_ROOT_INFO, prefix + "[ERROR] 2025-03-26-17:01:03 (PID:159, Device:0, RankID:-1) ERR02200 DIST call hccl api failed.", prefix + line]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "port_in_use"
    assert "HCCL_HOST_SOCKET_PORT_RANGE=auto" in (diagnosis.fix or "")
    if port is not None:
        assert port in str(diagnosis.figures.get("port"))


# HCCL's link set-up timing out (its log: "[Wait][LinkEstablish]wait socket establish timeout, role[r] rank[n]
# timeout[120 s]"; CANN's "Link Setup Timeout (EI0006)", "Getting socket times out. Reason: Remote Rank did not send the data
# in time.") and torch_npu's check of an HCCL collective call ("OPS function error: HcclAllreduce, error code is 6"): the
# collective library's connection or call failing, nccl_error's family as NCCL's and Gloo's are.
_HCCL_COLLECTIVE = [
    "[ERROR] HCCL(17528,python3):2026-03-18-10:33:52.113.403 [hccl_socket_manager.cc:797] [18744][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[1] timeout[120 s]",
    "[ERROR] HCCL(9,):2026-03-18-10:33:52.113.403 [channel.cc:310] [9][InitChannelStage][Timeout] wait socket establish timeout, channel connect timeout after 120 sec, elapsed[120001]ms, retryCount[3]",
    "EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank did not send the data in time. Please check the reason for the rank being stuck",
    "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllreduce, error code is 6",
    "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclBroadcast, error code is 9",
    "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllGather, error code is 13",
]


@pytest.mark.parametrize("line", _HCCL_COLLECTIVE)
@pytest.mark.parametrize("prefix", ["", _NPU_RANK, _NPU_VLLM])
def test_hccls_link_and_collective_failures_are_nccl_error(line: str, prefix: str) -> None:
    diagnosis = diagnose_text([prefix + line])
    assert diagnosis.failure_class == "nccl_error"
    assert "Ascend's HCCL failed between the ranks" in (diagnosis.fix or "")


def test_hccls_bound_port_wins_over_the_collective_call_that_carries_it() -> None:
    lines = [_NPU_RANK + _HCCL_COLLECTIVE[3], _NPU_RANK + _HCCL_BIND[0][0]]
    assert diagnose_text(lines).failure_class == "port_in_use"


def test_an_hccl_init_call_failing_for_another_reason_is_not_read_by_these_rules() -> None:
    # hcclCommInitRootInfoConfig failing with the runtime's error (rtBinaryGetFunction): neither a port nor a link.
    lines = [
        "RuntimeError: create_config:torch_npu/csrc/distributed/HCCLUtils.cpp:130 HCCL function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 15",
        "        rtBinaryGetFunction failed, runtime result = 107000.",
    ]
    assert diagnose_text(lines).failure_class == "unknown"


def test_batch31s_hccl_logs() -> None:
    for words, label in (("EJ0003", "port_in_use"), ("EI0006", "nccl_error"), ("wait socket establish timeout", "nccl_error")):
        for entry in _entries_where("batch31-heldout", words):
            diagnosis = diagnose_file(LOGS / "batch31-heldout" / str(entry["file"]))
            assert diagnosis.failure_class == entry["label"] == label, entry["file"]


# (7) A warning the start goes on after. vLLM's platforms/interface.py import_kernels (0.11.1 :201): `except ImportError as
# e: logger.warning("Failed to import from vllm._C: %r", e)`, and the start continues (a TPU or plugin build has no _C).
_C_WARNING = "WARNING 10-20 00:02:14 [interface.py:201] Failed to import from vllm._C: ModuleNotFoundError(\"No module named 'vllm._C'\")"
_VLLM_ON = [
    "(APIServer pid=7) INFO 10-20 00:02:15 [api_server.py:1873] vLLM API server version 0.11.1",
    "(APIServer pid=7) INFO 10-20 00:02:15 [utils.py:243] non-default args: {'enforce_eager': True}",
    "(APIServer pid=7) INFO 10-20 00:02:16 [model.py:646] Resolved architecture: Qwen3ForCausalLM",
    "(APIServer pid=7) INFO 10-20 00:02:16 [model.py:1734] Using max model len 40960",
]


def test_vllms_c_import_warning_the_start_went_on_past_is_a_finding() -> None:
    diagnosis = diagnose_text(["INFO 10-20 00:02:12 [__init__.py:22] TPU info: node_name=n | tpu_type=v4-8", _C_WARNING, *_VLLM_ON])
    assert diagnosis.failure_class == "unknown"  # a start cut during its first steps
    assert [finding.name for finding in diagnosis.findings] == ["warning_start_went_on"]


def test_vllms_c_import_warning_alone_still_names_the_failure() -> None:
    assert diagnose_text([_C_WARNING]).failure_class == "import_error"


def test_vllms_c_import_warning_then_an_error_still_names_the_failure() -> None:
    lines = [
        _C_WARNING,
        *_VLLM_ON,
        "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/_custom_ops.py", line 30, in rms_norm',
        "    torch.ops._C.rms_norm(out, input, weight, epsilon)",
        "RuntimeError: generic failure in the first op",
    ]
    assert diagnose_text(lines).failure_class == "import_error"


def test_batch31s_tpu_start_with_the_c_import_warning() -> None:
    entries = _entries_where("batch31-heldout", "vllm._C's import warning")
    for entry in entries:
        diagnosis = diagnose_file(LOGS / "batch31-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "unknown", entry["file"]
        assert "warning_start_went_on" in [finding.name for finding in diagnosis.findings]


# (8) A JIT kernel build failing in the compiler: GCC's "<file>:<line>:<col>: fatal error: <header>: No such file or
# directory" (libcpp/files.cc open_file_failed), clang's "... fatal error: '<header>' file not found", inside the build
# wrapper's exception (tvm-ffi's build_ninja "ninja exited with status 1", torch cpp_extension's "Error building extension").
_COMPILER_MISSING = [
    ("/venv/lib/python3.11/site-packages/sglang/jit_kernel/include/sgl_kernel/source_location.h:8:10: fatal error: version: No such file or directory", "version"),
    ("/root/.cache/torch_extensions/py310_cu121/fused/cuda.cu:3:10: fatal error: cuda_runtime.h: No such file or directory", "cuda_runtime.h"),
    ("/tmp/tmpab12/main.c:1:10: fatal error: 'Python.h' file not found", "Python.h"),
]
_JIT_WRAPPERS = {
    "tvm-ffi": ["RuntimeError: ninja exited with status 1", "stdout:", "FAILED: [code=1] cuda_0.o"],
    "torch": ["RuntimeError: Error building extension 'fused'", "FAILED: cuda.cuda.o"],
}


@pytest.mark.parametrize(("line", "header"), _COMPILER_MISSING)
@pytest.mark.parametrize("wrapper", sorted(_JIT_WRAPPERS))
def test_a_compilers_missing_header_inside_a_jit_build_is_import_error(line: str, header: str, wrapper: str) -> None:
    lines = [
        *_SGLANG_UP[:2],
        "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        *_JIT_WRAPPERS[wrapper],
        "nvcc warning : The -std=c++20 flag is not supported with the configured host compiler. Flag will be ignored.",
        line,
        "compilation terminated.",
        "ninja: build stopped: subcommand failed.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "import_error"
    assert f"<{header}>" in (diagnosis.fix or "")


def test_the_same_words_without_the_compilers_location_are_not_read() -> None:
    lines = ["Traceback (most recent call last):", "RuntimeError: ninja exited with status 1", "fatal error: version: No such file or directory"]
    assert diagnose_text(lines).failure_class == "unknown"


def test_batch30s_jit_build_failing_in_the_host_compiler() -> None:
    for entry in _entries_where("batch30-heldout", "fatal error: version"):
        diagnosis = diagnose_file(LOGS / "batch30-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "import_error", entry["file"]


# (9) Round twenty-four, batch32's kinds. vLLM's architecture resolution when the architecture has neither a vLLM class
# nor a backend-compatible Transformers class: 0.7.3-0.9.2 model_executor/model_loader/utils.py resolve_transformers_arch
# (0.8.5 :76) ValueError(f"{arch} has no vLLM implementation and the Transformers implementation is not compatible with
# vLLM.") (0.8.x on: " Try setting VLLM_USE_V1=0."), and with model_impl "transformers" f"The Transformers implementation
# of {arch} is not compatible with vLLM." (0.10.2 models/registry.py:597 and 0.33 :1335 with {architecture!r}).
_NO_VLLM_IMPLEMENTATION = [
    (
        "ValueError: Qwen2_5OmniForConditionalGeneration has no vLLM implementation and the Transformers implementation is not compatible with vLLM. Try setting VLLM_USE_V1=0.",
        "Qwen2_5OmniForConditionalGeneration",
    ),
    ("ValueError: ChatGLMForConditionalGeneration has no vLLM implementation and the Transformers implementation is not compatible with vLLM.", "ChatGLMForConditionalGeneration"),
    ("ValueError: The Transformers implementation of 'CLIPModel' is not compatible with vLLM.", "CLIPModel"),
    ("ValueError: The Transformers implementation of CLIPModel is not compatible with vLLM.", "CLIPModel"),
]
_VLLM_FRAMINGS = {
    "v0-mq-engine": "ERROR 05-21 18:19:15 [engine.py:448] ",
    "v1-engine-core": "(EngineCore_0 pid=4711) ERROR 05-21 18:19:15 [core.py:700] ",
    "torchrun-rank": "[rank0]: ",
}


@pytest.mark.parametrize(("line", "architecture"), _NO_VLLM_IMPLEMENTATION)
@pytest.mark.parametrize("framing", sorted(_VLLM_FRAMINGS))
def test_vllms_architecture_without_a_usable_transformers_fallback_is_model_load_error(line: str, architecture: str, framing: str) -> None:
    prefix = _VLLM_FRAMINGS[framing]
    lines = [
        *_VLLM_ON,
        f"{prefix}Traceback (most recent call last):",
        f'{prefix}  File "/opt/vllm/vllm/model_executor/model_loader/utils.py", line 76, in resolve_transformers_arch',
        f"{prefix}    raise ValueError(",
        f"{prefix}{line}",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error"
    assert architecture in (diagnosis.fix or "")


def test_vllms_transformers_fallback_warning_is_not_a_refusal() -> None:
    lines = [
        *_VLLM_ON,
        "WARNING 05-21 18:19:15 [utils.py:80] Qwen2ForCausalLM has no vLLM implementation, falling back to Transformers "
        "implementation. Some features may not be supported and performance may not be optimal.",
        "INFO 05-21 18:19:30 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000",
        "INFO:     Application startup complete.",
    ]
    assert diagnose_text(lines).failure_class is None


# The V1 front end's log of each request an EngineDeadError ended: 0.8.5 v1/engine/async_llm.py:324, 0.9.2 :345 and
# :507, 0.10.2 :411 and :574, 0.33 :817 and :1095, `except EngineDeadError: if self.log_requests: logger.info("Request %s
# failed (engine dead).", request_id)`. INFO level, every release; the engine core is dead.
_SERVED_V1 = [
    "(APIServer pid=7) INFO 06-25 04:30:00 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000",
    "(APIServer pid=7) INFO:     Application startup complete.",
    '(APIServer pid=7) INFO:     127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK',
]
_ENGINE_DEAD = [
    "(APIServer pid=7) INFO 06-25 04:34:01 [async_llm.py:817] Request cmpl-4bc768660a3b455e96e7fbb639747c86-0 failed (engine dead).",
    "INFO 06-25 04:34:01 [async_llm.py:345] Request chatcmpl-b3678bb5415c4440b811f5d3598e1323 failed (engine dead).",
]


@pytest.mark.parametrize("line", _ENGINE_DEAD)
@pytest.mark.parametrize("head", ["served", "bare"])
def test_the_front_ends_request_failed_engine_dead_is_an_engine_death(line: str, head: str) -> None:
    lines = [*(_SERVED_V1 if head == "served" else []), line, '(APIServer pid=7) INFO:     127.0.0.1:50002 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error']
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown"
    assert any("failed (engine dead)" in evidence.text for evidence in diagnosis.evidence)


def test_a_failure_above_the_engine_dead_lines_keeps_its_class() -> None:
    lines = [
        *_SERVED_V1,
        "(EngineCore_0 pid=9) ERROR 06-25 04:34:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free.",
        "(APIServer pid=7) ERROR 06-25 04:34:01 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
        _ENGINE_DEAD[0],
    ]
    assert diagnose_text(lines).failure_class == "cuda_oom"


def test_engine_dead_lines_after_a_stop_by_a_signal_are_its_teardown() -> None:
    lines = [
        *_SERVED_V1,
        "(EngineCore_0 pid=9) INFO 06-25 04:34:00 [core.py:1526] [shutdown] EngineCore: trigger received signal=SIGTERM",
        _ENGINE_DEAD[0],
    ]
    assert diagnose_text(lines).failure_class is None


def test_a_request_failed_for_another_reason_is_no_engine_death() -> None:
    lines = [*_SERVED_V1, "(APIServer pid=7) INFO 06-25 04:34:01 [async_llm.py:822] Request cmpl-1-0 failed (bad request): prompt too long."]
    assert diagnose_text(lines).failure_class is None


def test_batch32s_logs_of_these_kinds() -> None:
    for words, label in (("has no vLLM implementation", "model_load_error"), ("failed (engine dead).", "unknown")):
        for entry in _entries_where("batch32-heldout", words):
            diagnosis = diagnose_file(LOGS / "batch32-heldout" / str(entry["file"]))
            assert (diagnosis.failure_class or "healthy") == entry["label"] == label, entry["file"]


# (10) A quantized linear layer without the parameter its quantization method reads: torch's Module.__getattr__
# (torch/nn/modules/module.py) raises AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'") when
# the method (vLLM 0.6.x fp8.py / compressed_tensors_w8a8_fp8.py process_weights_after_loading, `input_scale=layer.input_scale`
# for a dynamic-scale checkpoint on ROCm; getattr(layer, 'input_scale', None) by 0.7.3) or the model's code reads a
# parameter the method's create_weights did not register on the engines' linear layers (vLLM and SGLang layers/linear.py)
# or FusedMoE. vLLM's V0 engine logs str(e) alone before the traceback; SGLang's scheduler and V1's engine core after it.
_NO_QUANT_PARAMETER = [
    ("'ColumnParallelLinear' object has no attribute 'input_scale'", "ColumnParallelLinear", "input_scale"),
    ("'QKVParallelLinear' object has no attribute 'weight_scale'", "QKVParallelLinear", "weight_scale"),
    ("'ReplicatedLinear' object has no attribute 'weight'", "ReplicatedLinear", "weight"),
    ("'FusedMoE' object has no attribute 'w13_input_scale'", "FusedMoE", "w13_input_scale"),
]


@pytest.mark.parametrize(("message", "layer", "parameter"), _NO_QUANT_PARAMETER)
@pytest.mark.parametrize("framing", ["vllm-v0", "vllm-v1", "sglang"])
def test_a_quantized_layer_without_its_methods_parameter_is_model_load_error(message: str, layer: str, parameter: str, framing: str) -> None:
    if framing == "vllm-v0":
        prefix = "ERROR 12-27 00:09:08 engine.py:366] "
        lines = [*_VLLM_ON, f"{prefix}{message}", f"{prefix}Traceback (most recent call last):"]
    elif framing == "vllm-v1":
        prefix = "(EngineCore_0 pid=4711) ERROR 05-26 00:17:47 [core.py:700] "
        lines = [
            *_VLLM_ON,
            f"{prefix}EngineCore failed to start.",
            f"{prefix}Traceback (most recent call last):",
            f'{prefix}  File "/opt/vllm/vllm/model_executor/layers/quantization/fp8.py", line 319, in process_weights_after_loading',
            f"{prefix}    input_scale=layer.input_scale)",
            f"{prefix}AttributeError: {message}",
        ]
    else:
        lines = [
            *_SGLANG_UP[:2],
            "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/loader.py", line 380, in load_model',
            "    quant_method.process_weights_after_loading(module)",
            f"AttributeError: {message}",
        ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error"
    assert f"{layer} layer has no '{parameter}'" in (diagnosis.fix or "")


@pytest.mark.parametrize(
    "message",
    [
        "AttributeError: 'RowParallelLinear' object has no attribute 'tp_size'",  # not a quantization parameter
        "AttributeError: 'MyCustomHead' object has no attribute 'input_scale'",  # not an engine's linear layer
    ],
)
def test_other_missing_attributes_are_not_read_as_a_quantization_mismatch(message: str) -> None:
    assert diagnose_text(["Traceback (most recent call last):", message]).failure_class == "unknown"


def test_batch12s_and_batch18s_quantized_layers_without_input_scale() -> None:
    for folder in ("batch12-heldout", "batch18-heldout"):
        for entry in _entries_where(folder, "object has no attribute 'input_scale'"):
            diagnosis = diagnose_file(LOGS / folder / str(entry["file"]))
            assert diagnosis.failure_class == entry["label"] == "model_load_error", entry["file"]


# (11) NCCL's device allocation for its buffers: src/include/alloc.h ncclCudaCallocDebug (2.12-2.27, RCCL's copy the
# same) runs cudaMalloc (cuMemCreate under NCCL_CUMEM_ENABLE) under CUDACHECKGOTO, then `if (*ptr == nullptr && nelem >
# 0) WARN("Failed to CUDA calloc %ld bytes", ...)`. That WARN is NCCL's last error, quoted by c10d's "unhandled cuda
# error" after "Last error:" (the form batch4's log holds), or printed at NCCL's WARN level with NCCL_DEBUG=WARN.
_C10D_UNHANDLED = [
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:76, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
    "ncclUnhandledCudaError: Call to CUDA function failed.",
    "Last error:",
]


@pytest.mark.parametrize(
    "lines",
    [
        [*_C10D_UNHANDLED, "Failed to CUDA calloc 67108864 bytes"],
        ["node1:2710:2790 [0] include/alloc.h:124 NCCL WARN Failed to CUDA calloc 67108864 bytes", *_C10D_UNHANDLED[:2]],
        [f"[rank1]: {line}" for line in [*_C10D_UNHANDLED, "Failed to CUDA calloc 2097152 bytes"]],
    ],
)
@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_nccls_failed_buffer_allocation_is_cuda_oom_over_the_nccl_error(lines: list[str], framing: str) -> None:
    head = _SGLANG_UP[:2] if framing == "sglang" else _VLLM_ON
    assert diagnose_text([*head, *lines]).failure_class == "cuda_oom"


def test_nccls_other_last_errors_stay_nccl_error() -> None:
    lines = [*_C10D_UNHANDLED, "Cuda failure 'invalid device ordinal'"]
    assert diagnose_text(lines).failure_class == "nccl_error"


def test_batch4s_nccl_calloc_failure() -> None:
    for entry in _entries_where("batch4-heldout", "Failed to CUDA calloc"):
        diagnosis = diagnose_file(LOGS / "batch4-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "cuda_oom", entry["file"]


# (12) A traceback cut inside vLLM's check of the KV cache's memory: V1's check_enough_kv_cache_memory (0.10.2
# v1/core/kv_cache_utils.py:670-715) and V0's raise_if_cache_size_invalid (0.6.6 worker/worker.py:486-504) raise only the
# pool's refusals ("No available memory for the cache blocks", one request's cache larger than the available memory).
_KV_CHECK_FRAMES = {
    "v1": [
        "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708]   File "/opt/vllm/vllm/v1/engine/core.py", line 220, in _initialize_kv_caches',
        '(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708]   File "/opt/vllm/vllm/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory',
        '(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708]     raise ValueError("No available memory for the cache blocks. "',
    ],
    "v0": [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/opt/vllm/vllm/worker/worker.py", line 267, in initialize_cache',
        "[rank0]:     raise_if_cache_size_invalid(num_gpu_blocks, self.cache_config.block_size,",
        '[rank0]:   File "/opt/vllm/vllm/worker/worker.py", line 498, in raise_if_cache_size_invalid',
    ],
}


@pytest.mark.parametrize("release", sorted(_KV_CHECK_FRAMES))
def test_a_traceback_cut_in_vllms_kv_memory_check_is_kv_pool_too_small(release: str) -> None:
    assert diagnose_text([*_VLLM_ON, *_KV_CHECK_FRAMES[release]]).failure_class == "kv_pool_too_small"


def test_a_cause_below_the_kv_check_frames_wins() -> None:
    lines = [*_VLLM_ON, *_KV_CHECK_FRAMES["v1"][:3], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    assert diagnose_text(lines).failure_class == "cuda_oom"


def test_batch3s_traceback_cut_in_the_kv_memory_check() -> None:
    for entry in _entries_where("batch3-heldout", "check_enough_kv_cache_memory"):
        diagnosis = diagnose_file(LOGS / "batch3-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "kv_pool_too_small", entry["file"]


# (13) CUTLASS/CuTe's TMA descriptor set-up (include/cute/atom/copy_traits_sm90_tma.hpp make_tma_copy_desc; FlashAttention
# 3's, FlashInfer's and DeepGEMM's Hopper kernels): std::cerr << "Error: Failed to initialize the TMA descriptor " <<
# result, the CUresult of cuTensorMapEncodeTiled, then a dump of the descriptor. 801 is CUDA_ERROR_NOT_SUPPORTED (cuda.h);
# tensor maps exist only on compute capability 9.0 and up: a Hopper kernel on an older GPU (sm_87 in batch13's log).
_TMA_DUMP = ["TMA Desc Addr:   0xfffe8d7f6a80", "format         9", "dim            4", "swizzle        3"]


@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_a_tma_descriptor_the_device_does_not_support_is_unsupported_gpu_arch(framing: str) -> None:
    head = _SGLANG_UP[:2] if framing == "sglang" else _VLLM_ON
    lines = [*head, "Error: Failed to initialize the TMA descriptor 801", *_TMA_DUMP]
    assert diagnose_text(lines).failure_class == "unsupported_gpu_arch"


@pytest.mark.parametrize("result", ["1", "700", "999", "8010"])
def test_other_tma_descriptor_results_are_not_the_gpus_architecture(result: str) -> None:
    lines = [*_SGLANG_UP[:2], f"Error: Failed to initialize the TMA descriptor {result}", *_TMA_DUMP]
    assert diagnose_text(lines).failure_class != "unsupported_gpu_arch"


def test_batch13s_tma_descriptor_801_on_jetson() -> None:
    for entry in _entries_where("batch13-heldout", "TMA descriptor"):
        diagnosis = diagnose_file(LOGS / "batch13-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "unsupported_gpu_arch", entry["file"]


# (14) The engines' Transformers backend (SGLang srt/models/transformers.py, 0.4.10 :141 TransformersForCausalLM, 0.5.23
# :535 TransformersBase and its kin; vLLM's TransformersForCausalLM / TransformersModel) lacking an attribute: torch's
# Module.__getattr__ "'<class>' object has no attribute '<name>'". The fallback cannot serve the model.
@pytest.mark.parametrize(
    "message",
    [
        "AttributeError: 'TransformersForCausalLM' object has no attribute 'tp_size'",
        "AttributeError: 'TransformersMultiModalForCausalLM' object has no attribute 'get_input_embeddings'",
        "AttributeError: 'TransformersForCasualLM' object has no attribute 'tp_size'",  # as batch16's poster spelt it
    ],
)
@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_the_transformers_backend_lacking_an_attribute_is_model_load_error(message: str, framing: str) -> None:
    if framing == "sglang":
        lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):", message]
    else:
        prefix = "(EngineCore_0 pid=4711) ERROR 05-26 00:17:47 [core.py:700] "
        lines = [*_VLLM_ON, f"{prefix}Traceback (most recent call last):", f"{prefix}{message}"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error"
    assert "Transformers backend" in (diagnosis.fix or "")


def test_another_models_missing_attribute_is_not_the_transformers_backend() -> None:
    lines = ["Traceback (most recent call last):", "AttributeError: 'Qwen2ForCausalLM' object has no attribute 'tp_size'"]
    assert diagnose_text(lines).failure_class == "unknown"


def test_batch16s_transformers_fallback_without_tp_size() -> None:
    for entry in _entries_where("batch16-heldout", "object has no attribute 'tp_size'"):
        diagnosis = diagnose_file(LOGS / "batch16-heldout" / str(entry["file"]))
        assert diagnosis.failure_class == entry["label"] == "model_load_error", entry["file"]


# Round twenty-five: batch33-35's miss kinds, each from the source that prints the text (fleet/host/diagnose/catalogue.py
# and classify.py cite it beside the trigger or rule).
def _labelled(folder: str, file: str, label: str) -> object:
    from tests.unit.test_diagnose_sources import _read_as_labelled

    return _read_as_labelled(folder, file, label)


# (15) torch_npu's workspace allocator (c10_npu::NPUWorkspaceAllocator, NpuWorkspaceAllocator::malloc): TORCH_CHECK(false,
# "NPU out of memory. NPUWorkspaceAllocator tried to allocate ", format_size(size), "(NPU ", device, "; ",
# format_size(device_total), " total capacity; ", format_size(device_free), " free)", ...): the device's memory.
_NPU_WORKSPACE = "NPU out of memory. NPUWorkspaceAllocator tried to allocate 216.00 MiB(NPU 0; 61.27 GiB total capacity; 90.23 MiB free)"


@pytest.mark.parametrize("framing", ["sglang", "vllm", "bare"])
def test_npu_workspace_allocator_out_of_memory_is_cuda_oom(framing: str) -> None:
    if framing == "sglang":
        lines = [*_SGLANG_UP[:2], f"[2026-05-24 10:00:03 TP0] Scheduler hit an exception: RuntimeError: {_NPU_WORKSPACE}"]
    elif framing == "vllm":
        lines = [*_VLLM_ON, f"(EngineCore_DP0 pid=90) ERROR 10-20 00:03:01 [core.py:708] RuntimeError: {_NPU_WORKSPACE}"]
    else:
        lines = [f"[rank0]:[E522 11:31:08.878836785 OpParamMaker.cpp:454] {_NPU_WORKSPACE}. If you want to reduce memory usage, take a try to set the environment variable TASK_QUEUE_ENABLE=1."]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_oom"
    assert diagnosis.figures.get("tried") == "216.00 MiB"


def test_the_npu_workspace_allocators_name_alone_is_not_out_of_memory() -> None:
    lines = [*_SGLANG_UP, "[2026-05-24 10:00:12] NPUWorkspaceAllocator tried to allocate 216.00 MiB from its cache"]
    assert diagnose_text(lines).failure_class is None


def test_batch33s_npu_workspace_allocator_out_of_memory() -> None:
    _labelled("batch33-heldout", "sglang-ascend-a3-cann9-qwen3-8b-32b-startup-npu-workspace-allocator-out-of-memory.log", "cuda_oom")


# (16) SGLang 0.5.17 srt/layers/attention/attention_registry.py:395-414, hybrid GDN models on Blackwell: the allowed set
# depends on the GPU (SM120 {"triton", "trtllm_mha", "flashinfer"}, SM100/103 {"triton", "trtllm_mha", "fa4"}), then
# assert attn_be in allowed, (f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN models. " ...).
@pytest.mark.parametrize(
    "got",
    ["Got attention_backend=flashinfer.", "Got prefill=flashinfer, decode=fa3."],
)
def test_an_attention_backend_the_gpu_generation_refuses_is_unsupported_gpu_arch(got: str) -> None:
    message = f"AssertionError: Only {{'trtllm_mha', 'triton', 'fa4'}} backends are supported on Blackwell GPUs for hybrid GDN models. {got}"
    lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):", message]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    assert "--attention-backend triton" in (diagnosis.fix or "") and "'fa4'" in (diagnosis.fix or "")


def test_a_backend_set_without_a_gpu_generation_is_not_the_gpus_class() -> None:
    lines = [*_SGLANG_UP[:2], "AssertionError: Only {'triton'} backends are supported on this deployment."]
    assert diagnose_text(lines).failure_class != "unsupported_gpu_arch"


def test_batch33s_blackwell_hybrid_gdn_backend_refusal() -> None:
    _labelled("batch33-heldout", "sglang-0517-b300-sm103-verl-hybrid-gdn-flashinfer-only-backends-supported-on-blackwell.log", "unsupported_gpu_arch")


# (17) vLLM's csrc/custom_all_reduce.cuh CUDACHECK: printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__,
# cudaGetErrorString(e)); exit(EXIT_FAILURE) (older: "Failed: %s:%d '%s'\n"). A failure of its own, over the worker death
# it causes; under CUDA graph capture cuda_graph_error, elsewhere the CUDA error string's class.
_CAPTURE = [
    "Capturing CUDA graphs (PIECEWISE): 86%|████████▌ | 6/7 [00:03<00:00, 1.78it/s]",
    "Capturing CUDA graphs (PIECEWISE): 100%|██████████| 7/7 [00:04<00:00, 1.64it/s]",
]
_DIED = "(EngineCore_DP0 pid=90) ERROR 10-20 00:03:01 [multiproc_executor.py:314] Worker proc VllmWorker-0 died unexpectedly (exit code: None), shutting down executor."


@pytest.mark.parametrize(
    "check", ["Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'", "Failed: /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:310 'invalid argument'"]
)
def test_custom_all_reduce_check_under_capture_is_cuda_graph_error_over_the_worker_death(check: str) -> None:
    diagnosis = diagnose_text([*_VLLM_ON, *_CAPTURE, check, _DIED])
    assert diagnosis.failure_class == "cuda_graph_error"
    assert "custom_all_reduce.cuh" in diagnosis.evidence[0].text
    assert "--disable-custom-all-reduce" in (diagnosis.fix or "")


@pytest.mark.parametrize(("error", "expected"), [("out of memory", "cuda_oom"), ("invalid argument", "unknown")])
def test_custom_all_reduce_check_away_from_capture_is_the_cuda_errors_class(error: str, expected: str) -> None:
    lines = [
        *_VLLM_ON,
        "(VllmWorker rank=0 pid=91) INFO 10-20 00:02:40 [custom_all_reduce.py:204] Registering 0 cuda graph addresses",
        f"Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:88 '{error}'",
        _DIED,
    ]
    assert diagnose_text(lines).failure_class == expected


def test_batch34s_custom_all_reduce_checks_after_capture() -> None:
    for file in (
        "dynamo-run-vllm-tp8-r1-distill-70b-fp8-custom-all-reduce-invalid-argument-after-capture.log",
        "vllm-v1-piecewise-full-capture-custom-all-reduce-invalid-argument-worker-died.log",
    ):
        _labelled("batch34-heldout", file, "cuda_graph_error")


# (18) SGLang's srt/entrypoints/openai/serving_base.py OpenAIServingBase.handle_request (0.5.17 alike): except Exception as
# e: logger.exception(f"Error in request: {e}") then return self.create_error_response(..., status_code=500): one request
# failed and was answered; the server lives on. A process death after it is still a failure.
_REQUEST_TRACEBACK = [
    "[2025-08-08 16:52:59] Error in request: Expected 2 output messages (reasoning and final), but got 3.",
    "Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/entrypoints/openai/serving_base.py", line 45, in handle_request',
    "    return await self._handle_non_streaming_request(",
    '  File "/sgl/python/sglang/srt/entrypoints/openai/serving_chat.py", line 785, in _build_chat_response',
    "    raise ValueError(",
    "ValueError: Expected 2 output messages (reasoning and final), but got 3.",
]


def test_an_error_in_request_traceback_is_one_failed_request() -> None:
    assert diagnose_text([*_SGLANG_UP, *_REQUEST_TRACEBACK]).failure_class is None
    assert diagnose_text(_REQUEST_TRACEBACK).failure_class is None


def test_an_error_in_request_then_a_scheduler_death_is_still_a_failure() -> None:
    lines = [*_SGLANG_UP, *_REQUEST_TRACEBACK, "[2025-08-08 16:53:02] Received sigquit from a child process. It usually means the child failed."]
    assert diagnose_text(lines).failure_class is not None


def test_an_unrelated_traceback_after_an_error_in_request_is_not_the_requests() -> None:
    lines = [*_REQUEST_TRACEBACK, "[2025-08-08 16:59:00] some later line", "x", "y", "z", "Traceback (most recent call last):", "RuntimeError: boom"]
    assert diagnose_text(lines).failure_class == "unknown"


def test_batch35s_error_in_request_on_a_serving_server() -> None:
    _labelled("batch35-heldout", "sglang-2025-08-gpt-oss-120b-h20-tp2-dp4-serving-chat-error-in-request-expected-2-output-messages.log", "healthy")


# (19) SGLang-JAX's scheduler and tp worker: "[Scheduler] Begins to run worker precompile.", "[EXTEND] Begin to precompile
# ...", "[EXTEND] Precompile finished in %.0f secs" (and [DECODE], [PENALTIES]), "[Scheduler] Completes worker precompile.":
# start-up steps, so a log that ends among them has not started.
_JAX_PRECOMPILE = [
    "[2025-10-29 08:23:33] [Scheduler] Begins to run worker precompile.",
    "[2025-10-29 08:23:33] [EXTEND] Begin to precompile bs_paddings=[256] token_paddings=[256, 512, 1024, 2048]",
    "[2025-10-29 08:24:18] [EXTEND] Precompile finished in 45 secs",
]


def test_a_log_cut_between_jax_precompile_phases_is_a_cut_start() -> None:
    diagnosis = diagnose_text(_JAX_PRECOMPILE)
    assert diagnosis.failure_class == "unknown"
    assert "precompiling" in diagnosis.evidence[0].text


def test_a_log_cut_inside_a_jax_precompile_phase_is_a_stalled_start() -> None:
    assert diagnose_text(_JAX_PRECOMPILE[:2]).failure_class == "server_start_timeout"


def test_a_completed_jax_precompile_is_done() -> None:
    diagnosis = diagnose_text([*_JAX_PRECOMPILE, "[2025-10-29 08:26:20] [Scheduler] Completes worker precompile."])
    assert diagnosis.failure_class == "unknown"
    assert diagnosis.evidence[0].text.startswith("last startup step: done precompiling the JAX")


def test_batch33s_jax_start_cut_in_precompile() -> None:
    _labelled("batch33-heldout", "sglang-jax-tpu-qwen3-8b-tp4-worker-precompile-extend-decode-penalties-finished.log", "unknown")


# (20) vLLM's distributed/device_communicators/shm_broadcast.py MessageQueue: every VLLM_RINGBUFFER_WARNING_INTERVAL seconds a
# wait on a peer logs "No available shared memory broadcast block found in %d seconds. This typically happens when some
# processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization)." A run of ten
# or more after the start's last step, none after them, is a stalled start; one or two inside a start are a slow step.
def _shm_wait(minute: int) -> str:
    return (
        f"(EngineCore pid=1445363) INFO 10-09 11:{minute:02d}:47 [shm_broadcast.py:812] No available shared memory broadcast block "
        "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. "
        "compilation, weight/kv cache quantization)."
    )


_VLLM_CAPTURED = [*_VLLM_ON, "(Worker_TP0 pid=1445400) INFO 10-09 11:10:30 [gpu_model_runner.py:4587] Graph capturing finished in 9 secs, took 0.41 GiB"]


def test_a_run_of_shared_memory_broadcast_waits_after_the_last_step_is_a_stalled_start() -> None:
    diagnosis = diagnose_text([*_VLLM_CAPTURED, *(_shm_wait(minute) for minute in range(11, 23))])
    assert diagnosis.failure_class == "server_start_timeout"
    assert "12 of vLLM's 'No available shared memory broadcast block found' notices" in (diagnosis.fix or "")


def test_a_few_shared_memory_broadcast_waits_are_a_cut_start() -> None:
    diagnosis = diagnose_text([*_VLLM_CAPTURED, _shm_wait(11), _shm_wait(12)])
    assert diagnosis.failure_class != "server_start_timeout"


def test_shared_memory_broadcast_waits_on_a_serving_server_are_not_a_stall() -> None:
    serving = '(APIServer pid=7) INFO:     127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK'
    diagnosis = diagnose_text([*_VLLM_CAPTURED, serving, *(_shm_wait(minute) for minute in range(11, 23))])
    assert diagnosis.failure_class != "server_start_timeout"


def test_batch36s_start_waiting_an_hour_after_graph_capture() -> None:
    _labelled("batch36-heldout", "vllm-0310-tp2-sm89-qwen38-27b-stall-after-graph-capture-shm-broadcast-no-block-57-minutes.log", "server_start_timeout")


# (21) torch_npu's NPU graph capture checks the ACL runtime's capture status (aclmdlRICaptureStatus, ACL_MODEL_RI_CAPTURE_
# STATUS_NONE / _ACTIVE / _INVALIDATED: CUDA's cudaStreamCaptureStatus on the NPU) through TORCH_INTERNAL_ASSERT.
@pytest.mark.parametrize("framing", ["vllm", "sglang"])
def test_an_npu_graph_capture_status_assert_is_cuda_graph_error(framing: str) -> None:
    message = 'RuntimeError: status == aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE INTERNAL ASSERT FAILED at "build/CMakeFiles/torch_npu.dir/compiler_depend.ts":162, please report a bug to PyTorch.'
    if framing == "vllm":
        lines = [*_VLLM_ON, f"ERROR 08-12 01:31:20 [core.py:586] {message}"]
    else:
        lines = [*_SGLANG_UP[:2], f"[2026-05-24 10:00:03 TP0] Scheduler hit an exception: {message}"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_graph_error"
    assert "aclmdlRICaptureStatus" in (diagnosis.fix or "")


def test_batch36s_npu_graph_capture_status_assert() -> None:
    _labelled("batch36-heldout", "vllm-ascend-v1-engine-aclmdlri-capture-status-active-internal-assert-failed.log", "cuda_graph_error")


# (22) Start-up chatter that only a starting server prints, as start-up steps (classify.py's _STALL_MARKERS): SGLang's
# set_gpu_proc_affinity (srt/utils/common.py 0.5.17 :2699, f"Process {pid} gpu_id {gpu_id} is running on CPUs: {...}"),
# its model runner's f"Attention backend not set. Use {backend} backend by default." (0.4.x model_runner.py), FlagOS's
# platform plugin ("sglang_fl platform activating: vendor=%s, device=%s"), vllm-gaudi's "Starting sampler warmup..." (until
# "Sampler warmup completed successfully"). A log that ends after them with no readiness line has not started.
_SGLANG_AFFINITY = "[2025-04-15 05:11:42 TP0] Process 1091 gpu_id 0 is running on CPUs: [0, 1, 2, 3]"
_SGLANG_DEFAULT_BACKEND = "[2025-04-15 05:11:47 TP0] Attention backend not set. Use triton backend by default."
_PLUGIN = "sglang_fl platform activating: vendor=ascend, device=npu"


@pytest.mark.parametrize("lines", [[_SGLANG_AFFINITY], [_SGLANG_AFFINITY, _SGLANG_DEFAULT_BACKEND], [_PLUGIN, "PlatformFL initialized: vendor=ascend, device=npu, dist_backend=hccl"]])
def test_a_log_cut_after_start_up_chatter_is_a_cut_start(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown"
    assert diagnosis.evidence and diagnosis.evidence[0].text.startswith("last startup step: done")


def test_start_up_chatter_then_readiness_is_healthy() -> None:
    assert diagnose_text([_SGLANG_AFFINITY, _SGLANG_DEFAULT_BACKEND, *_SGLANG_UP]).failure_class is None


def test_a_gaudi_sampler_warmup_that_never_ends_is_a_stall_and_one_that_ends_is_a_cut_start() -> None:
    prefix = "(Worker_TP0 pid=635023) INFO 04-09 11:25:43 [hpu_model_runner.py:4675] "
    assert diagnose_text([f"{prefix}Starting sampler warmup..."]).failure_class == "server_start_timeout"
    done = diagnose_text([f"{prefix}Starting sampler warmup...", f"{prefix}Sampler warmup completed successfully"])
    assert done.failure_class == "unknown"


def test_the_multimodal_backend_default_is_not_the_model_runners_line() -> None:
    # No start-up step: alone it is no stall (and, showing nothing of a server at work, no healthy start either).
    diagnosis = diagnose_text(["[2026-05-24 10:00:03 TP0] Multimodal attention backend not set. Use triton_attn."])
    assert diagnosis.failure_class == "unknown" and not diagnosis.evidence


def test_batch29s_plugin_start_cut_and_batch35s_mi300x_start_cut() -> None:
    _labelled("batch29-heldout", "sglang-ascend-plugin-fl-flaggems-platform-activating-opmanager-cut-start.log", "unknown")
    _labelled("batch35-heldout", "sglang-2025-04-llama4-scout-2x-mi300x-tp2-start-cut-after-attention-backend-triton.log", "unknown")


# Round twenty-six: batch37-38's miss kinds, each from the source that prints the text (catalogue.py and carriers.py cite
# it beside the trigger or rule).
# (23) ROCm's hipErrorInvalidDeviceFunction, hipGetErrorString "invalid device function", printed by PyTorch's hipified
# C10_CUDA_CHECK as "HIP error: invalid device function": no code object for the GPU's gfx target, as CUDA's "no kernel
# image is available" (cudaErrorInvalidDeviceFunction prints the same words with "CUDA error: ").
_HIP_INVALID = [
    "RuntimeError: HIP error: invalid device function",
    "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
]


@pytest.mark.parametrize("framing", ["sglang", "vllm", "cuda"])
def test_an_invalid_device_function_is_unsupported_gpu_arch(framing: str) -> None:
    if framing == "sglang":
        lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):", *_HIP_INVALID]
    elif framing == "vllm":
        lines = [*_VLLM_ON, *(f"(EngineCore_DP0 pid=90) ERROR 10-20 00:03:01 [core.py:708] {line}" for line in _HIP_INVALID)]
    else:
        lines = [*_VLLM_ON, "RuntimeError: CUDA error: invalid device function"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    assert "invalid device function" in diagnosis.evidence[0].text and "no kernel code" in (diagnosis.fix or "")


def test_invalid_device_function_named_without_the_runtime_check_is_not_the_gpus_class() -> None:
    lines = [*_SGLANG_UP, "[2026-05-24 10:00:12] hipErrorInvalidDeviceFunction: see the troubleshooting guide for invalid device function"]
    assert diagnose_text(lines).failure_class is None


def test_batch38s_hip_invalid_device_function() -> None:
    for file in (
        "vllm-rocm-docker-2025-02-rx7900xt-gfx1100-serve-hip-error-invalid-device-function.log",
        "vllm-rocm-2025-06-ryzen-ai-max-395-gfx1151-rotary-embedding-hip-error-invalid-device-function.log",
    ):
        _labelled("batch38-heldout", file, "unsupported_gpu_arch")


# (24) PyTorch Inductor's GPUTooOldForTriton (torch 2.13 torch/_inductor/exc.py:143-155, raised by scheduler.py:8497
# create_backend; a RuntimeError with the same text before): f"Found {name} which is too old to be supported by the triton
# GPU compiler, which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of
# CUDA capability {major}.{minor}".
_TRITON_TOO_OLD = (
    "Found Tesla P40 which is too old to be supported by the triton GPU compiler, which is used as the backend. Triton only "
    "supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.1"
)


@pytest.mark.parametrize(
    "line",
    [
        f"[2026-05-24 10:00:03 TP0] Scheduler hit an exception: RuntimeError: {_TRITON_TOO_OLD}",
        f"(VllmWorker rank=0 pid=91) ERROR 10-20 00:03:01 [multiproc_executor.py:596] torch._inductor.exc.GPUTooOldForTriton: {_TRITON_TOO_OLD}",
        f"(VllmWorkerProcess pid=62) ERROR 12-26 16:20:28 multiproc_worker_utils.py:236] RuntimeError: {_TRITON_TOO_OLD}",
    ],
)
def test_a_gpu_too_old_for_triton_is_unsupported_gpu_arch(line: str) -> None:
    diagnosis = diagnose_text([*_VLLM_ON, line])
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    assert "has 6.1" in (diagnosis.fix or "") and "--enforce-eager" in (diagnosis.fix or "")


def test_the_triton_compiler_named_without_the_refusal_is_not_the_gpus_class() -> None:
    lines = [*_SGLANG_UP, "[2026-05-24 10:00:12] Using the triton GPU compiler as the backend for Tesla V100 (CUDA capability 7.0)"]
    assert diagnose_text(lines).failure_class is None


def test_batch38s_triton_gpu_too_old() -> None:
    _labelled("batch38-heldout", "vllm-pascal-2025-05-2x-p40-tp2-rolmocr-triton-gpu-too-old-capability-6.1.log", "unsupported_gpu_arch")


# (25) vLLM's CUTLASS 3.x scaled-mm entry points for Blackwell (csrc/quantization/cutlass_w8a8 cutlass_scaled_mm_sm100 /
# _sm120: TORCH_CHECK(<per-tensor or per-token/per-channel scales>, "Currently, block scaled fp8 gemm is not implemented for
# Blackwell")): no block-scaled FP8 kernel for that GPU family in this release. vLLM only.
def test_a_block_scaled_fp8_gemm_refused_for_blackwell_is_unsupported_gpu_arch() -> None:
    lines = [*_VLLM_ON, "(VllmWorker rank=0 pid=91) ERROR 10-20 00:03:01 [multiproc_executor.py:596] RuntimeError: Currently, block scaled fp8 gemm is not implemented for Blackwell"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch"
    assert "Blackwell" in (diagnosis.fix or "") and "block-scaled FP8" in (diagnosis.fix or "")


def test_a_block_scaled_fp8_gemm_in_use_is_not_a_refusal() -> None:
    lines = [*_SGLANG_UP, "[2026-05-24 10:00:12] Using CUTLASS block scaled fp8 gemm on Blackwell"]
    assert diagnose_text(lines).failure_class is None


def test_batch38s_blackwell_block_scaled_fp8_gemm() -> None:
    _labelled("batch38-heldout", "vllm-2025-08-dual-rtx5090-sm120-cutlass-block-scaled-fp8-gemm-not-implemented-for-blackwell.log", "unsupported_gpu_arch")


# (26) NCCL's src/transport/net_ib.cc ncclIbTest on a failed work completion: WARN("NET/IB: Got completion from peer %s with
# status=%d opcode=%d len=%d vendor err %d (%s)...") ("NET/IB : Got completion ..." in older releases), then ncclRemoteError
# (the "net.cc:<line> -> 6" trace): a collective failed on the fabric after set-up, ranked over the stall the hang leaves.
_NCCL_UP = [
    "host7:185302:185302 [0] NCCL INFO ncclCommInitRank comm 0x55a0be47d620 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x221dee7fa4558566 - Init COMPLETE",
    "host7:185303:185303 [1] NCCL INFO ncclCommInitRank comm 0x55a0be47d621 rank 1 nranks 16 cudaDev 1 nvmlDev 1 busId 2a000 commId 0x221dee7fa4558566 - Init COMPLETE",
    "host7:185302:185302 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f4311e00400 recvbuff 0x7f4311e00400 count 1 datatype 7 op 0 root 0 comm 0x55e11d052a20 [nranks=16] stream 0x55e1271cb4f0",
]


@pytest.mark.parametrize(
    ("head", "warn"),
    [
        (
            _SGLANG_UP[:2],
            "host7:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send) hca mlx5_1",
        ),
        (_VLLM_ON, "host7:185303:186751 [1] NCCL WARN NET/IB : Got completion from peer 10.99.91.63<51161> with status=12 opcode=0 len=0 vendor err 129"),
    ],
)
def test_an_ib_completion_error_after_set_up_is_nccl_error_over_the_stall(head: list[str], warn: str) -> None:
    diagnosis = diagnose_text([*head, *_NCCL_UP, warn, "host7:185303:186751 [1] NCCL INFO transport/net.cc:1227 -> 6"])
    assert diagnosis.failure_class == "nccl_error"
    assert "Got completion from peer" in diagnosis.evidence[0].text and "NCCL_IB_HCA" in (diagnosis.fix or "")


def test_an_ib_completion_of_status_zero_is_no_failure() -> None:
    lines = [*_SGLANG_UP, "host7:185303:186751 [1] NCCL INFO NET/IB: Got completion from peer 10.99.91.63<51161> with status=0 opcode=0"]
    assert diagnose_text(lines).failure_class != "nccl_error"


def test_batch37s_ib_completion_error_at_the_first_all_reduce() -> None:
    _labelled("batch37-heldout", "sglang-059-2node-pd-decode-tp16-nccl-ib-completion-error-vendor-err-81-hang-at-first-allreduce.log", "nccl_error")


# (27) The quantization method refusing the model's dtype: SGLang 0.5.23 srt/model_loader/loader.py:266-271
# _get_quantization_config, vLLM 0.33 config/vllm.py:937-942: ValueError(f"{model_config.dtype} is not supported for
# quantization method {model_config.quantization}. Supported dtypes: {supported_dtypes}").
_DTYPE_REFUSED = "ValueError: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16]"


@pytest.mark.parametrize("framing", ["sglang", "vllm"])
def test_a_dtype_the_quantization_method_refuses_is_model_load_error(framing: str) -> None:
    if framing == "sglang":
        lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):", _DTYPE_REFUSED]
    else:
        lines = [*_VLLM_ON, f"(APIServer pid=7) ERROR 10-20 00:02:17 [api_server.py:1900] {_DTYPE_REFUSED}"]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "model_load_error"
    assert "--dtype float16" in (diagnosis.fix or "") and "[torch.float16]" in (diagnosis.fix or "")


def test_the_supported_dtypes_named_without_a_refusal_are_no_failure() -> None:
    lines = [*_SGLANG_UP, "[2026-05-24 10:00:12] quantization method awq: Supported dtypes: [torch.float16]"]
    assert diagnose_text(lines).failure_class is None


def test_batch37s_bfloat16_refused_by_awq() -> None:
    _labelled("batch37-heldout", "sglang-2025-12-fork-deepseek-v32-awq-dp4-load-model-bfloat16-not-supported-for-quantization-method-awq.log", "model_load_error")


# (28) An escape's SGR codes written out as text ("ESC[1;36m", "^[[1;36m"), as GitHub's log view and terminal copy tools
# render the escape character: removed as the colours themselves are (carriers.py), so the lines under them read.
@pytest.mark.parametrize("escape", ["ESC", "^["])
def test_colour_codes_written_as_text_hide_no_error(escape: str) -> None:
    tag = f"{escape}[1;36m(VllmWorkerProcess pid=62){escape}[0;0m "
    diagnosis = diagnose_text([*(tag + line for line in _VLLM_ON), f"{tag}ERROR 12-26 16:20:28 multiproc_worker_utils.py:236] RuntimeError: {_TRITON_TOO_OLD}"])
    assert diagnosis.failure_class == "unsupported_gpu_arch"


def test_batch38s_pascal_log_under_literal_escape_text() -> None:
    _labelled("batch38-heldout", "vllm-2024-12-pascal-docker-4x-p100-tp4-worker-triton-gpu-too-old-capability-6.0.log", "unsupported_gpu_arch")


# (29) The CUDA runtime's stream-capture errors (cudaGetErrorString; HIP's own wording where it differs), returned only by a
# call made while a stream captures: the capture was broken, whichever library made the call. NCCL's CUDA-call check quotes
# one (checks.h CUDACHECK: WARN("Cuda failure '%s'", cudaGetErrorString(err)), printed "host:pid:tid [dev] file:line NCCL
# WARN ..."): the capture error is the cause over the NCCL line that carries it (round twenty-seven, batch40).
# The texts as CUDA's documentation gives them, written out here rather than imported from the catalogue's tuple of the same
# name: the test is the check that the catalogue reads every one of them, so it must not shrink with the catalogue.
_CAPTURE_ERRORS = [
    "operation not permitted when stream is capturing",
    "operation would result in a merge of separate capture sequences",
    "capture was not ended in the same stream as it began",
    "capture was not initiated in this stream",
    "capturing stream has unjoined work",
    "capture sequence contains a fork that was not joined to the primary stream",
    "dependency created on uncaptured work in another stream",
    "operation would make the legacy stream depend on a capturing blocking stream",
    "operation not permitted on an event last recorded in a capturing stream",
    "attempt to terminate a thread-local capture sequence from another thread",
]
_VLLM_V0_CAPTURING = [
    "(RayWorkerVllm pid=62111) INFO 04-28 20:50:21 model_runner.py:1008] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.",
]


@pytest.mark.parametrize("error", _CAPTURE_ERRORS)
def test_a_capture_error_nccl_quotes_is_cuda_graph_error_over_nccl(error: str) -> None:
    lines = [
        *_VLLM_ON,
        *_VLLM_V0_CAPTURING,
        f"(RayWorkerVllm pid=62111) worker-6:62111:62111 [1] enqueue.cc:267 NCCL WARN Cuda failure '{error}'",
        "(RayWorkerVllm pid=62111) worker-6:62111:62111 [1] NCCL INFO enqueue.cc:1045 -> 1",
        "(RayWorkerVllm pid=62111) ERROR 04-28 20:50:23 ray_utils.py:44] Error executing method warm_up_model. This might cause deadlock in distributed execution.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_graph_error"
    assert error in diagnosis.evidence[0].text and error in (diagnosis.fix or "")
    assert "nccl_error" in diagnosis.consequences


@pytest.mark.parametrize("error", _CAPTURE_ERRORS[::3])
def test_a_capture_error_pytorch_raises_is_cuda_graph_error(error: str) -> None:
    diagnosis = diagnose_text([*_SGLANG_UP[:2], "[2026-05-24 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):", f"RuntimeError: CUDA error: {error}"])
    assert diagnosis.failure_class == "cuda_graph_error"


def test_an_nccl_cuda_failure_of_no_capture_stays_nccl_error() -> None:
    # The control: NCCL's same WARN line with a CUDA error no capture returns is NCCL's failure, as before.
    lines = [*_VLLM_ON, *_VLLM_V0_CAPTURING, "(RayWorkerVllm pid=62111) worker-6:62111:62111 [1] enqueue.cc:267 NCCL WARN Cuda failure 'invalid argument'"]
    assert diagnose_text(lines).failure_class == "nccl_error"


def test_batch40s_nccl_warn_quoting_the_capture_isolation_error() -> None:
    _labelled("batch40-heldout", "vllm-v0-2024-04-ray-tp-worker-warm-up-model-nccl-cuda-failure-dependency-on-uncaptured-work-during-graph-capture.log", "cuda_graph_error")


# (30) PyTorch's caching allocator warning that a cudaMalloc failed, before it frees its cache and retries
# (c10/cuda/CUDACachingAllocator.cpp, a TORCH_WARN: "[W<mmdd> <time> CUDACachingAllocator.cpp:<line>] memory allocation
# failed with OOM on device <d> while trying to allocate <n> bytes (free: <f>, total: <t>)."): a warning, so it names the
# failure only where nothing else failed and the start never came up or went on past it (the retry often succeeds).
_ALLOCATOR_OOM = (
    "[rank0]:[W930 15:33:03.660110548 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 0 while trying to allocate 253755392 bytes (free: 191627264, total: 15636037632)."
)


def test_the_allocators_oom_warning_alone_is_cuda_oom() -> None:
    assert diagnose_text([_ALLOCATOR_OOM]).failure_class == "cuda_oom"
    assert diagnose_text([*_VLLM_ON, _ALLOCATOR_OOM]).failure_class == "cuda_oom"


def test_the_allocators_oom_warning_a_start_came_up_past_is_no_failure() -> None:
    # The retry succeeded: the start went on and came up.
    assert diagnose_text([*_SGLANG_UP[:2], _ALLOCATOR_OOM, *_SGLANG_UP[2:]]).failure_class is None


def test_batch40s_allocator_oom_warning_line() -> None:
    _labelled("batch40-heldout", "vllm-sagemaker-2026-09-t4-gemma4-26b-cudacachingallocator-oom-allocate-253755392-bytes-one-line.log", "cuda_oom")


# (31) Healthy needs positive evidence (the label convention: a start cut before it came up is unknown). A log with no
# failure, no start-up step and no ready line is healthy only where it shows a server at work, in the engine's own words
# (classify.py _AT_WORK, each from its source): serving lines, access lines of any status, metrics, request lifecycle.
_AT_WORK_LINES = [
    "(APIServer pid=1) INFO 05-05 12:36:59 [loggers.py:283] Engine 000: Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 45.6 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%",
    "INFO 02-10 15:09:45 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 24.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.",
    "(APIServer pid=1) INFO 05-05 12:36:59 [metrics.py:121] SpecDecoding metrics: Mean acceptance length: 2.31, Accepted throughput: 10.20 tokens/s, Drafted throughput: 20.40 tokens/s",
    "(APIServer pid=1) INFO 05-05 12:36:58 [async_llm.py:587] Added request chatcmpl-84bad635e9eb25c7.",
    'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 503 Service Unavailable',
    "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845",
]


@pytest.mark.parametrize("line", _AT_WORK_LINES)
def test_a_server_at_work_with_no_start_in_the_log_is_healthy(line: str) -> None:
    assert diagnose_text([line]).failure_class is None


@pytest.mark.parametrize(
    "lines",
    [
        ["Starting the server with: python -m sglang.launch_server --model-path /models/m --tp 2"],
        [
            "(RayWorkerWrapper pid=362, ip=192.168.100.119) INFO 02-21 11:24:50 cuda.py:160] Using Triton MLA backend.",
            "(RayWorkerWrapper pid=362, ip=192.168.100.119) INFO 02-21 11:24:50 rejection_sampler.py:60] Use pytorch for rejection sampling.",
        ],
    ],
)
def test_a_log_that_shows_nothing_of_a_server_is_unknown(lines: list[str]) -> None:
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unknown"
    assert "no start-up step, no ready line and no request served" in (diagnosis.fix or "")


def test_a_signal_stop_with_no_start_in_the_log_stays_healthy() -> None:
    # The teardown of a server the paste began after (SGLang's SIGTERM handler drains requests): what the log shows is the
    # stop of a server that ran, read as before.
    lines = ["2025-08-05T10:33:30.214Z  WARN tokenizer_manager.sigterm_handler: SIGTERM received. signum=None frame=None. Draining requests and shutting down...   "]
    assert diagnose_text(lines).failure_class is None


def test_batch40s_ray_start_cut_before_any_step() -> None:
    _labelled("batch40-heldout", "vllm-v0-2025-02-ray-multinode-deepseek-v3-tp32-spec-decode-start-cut-wrapped-lines.log", "unknown")


# (32) A refusal of the GPU in other words (round twenty-seven): an exception whose message names a GPU architecture (an
# SM or sm_ number, a compute capability, a gfx target, an NVIDIA generation) and refuses it (not supported, unsupported,
# not implemented, incompatible, too old, only supports, requires, needs), in either order, whatever library raised it.
@pytest.mark.parametrize(
    "exception",
    [
        "RuntimeError: sm_120 is not supported by this build",
        "AssertionError: DeepGEMM requires Hopper (sm_90) or newer",
        "NotImplementedError: FP8 block quantization is not supported on compute capability 8.0",
        "RuntimeError: Unsupported GPU architecture: gfx1151",
        "ValueError: This kernel is incompatible with SM75 GPUs",
        "RuntimeError: NVFP4 MoE needs Blackwell",
        "RuntimeError: Kernels for CUDA Capability 6.1 are not implemented in this build",
    ],
)
def test_an_exception_refusing_a_named_gpu_architecture_is_unsupported_gpu_arch(exception: str) -> None:
    sglang = [*_SGLANG_UP[:2], "[2026-05-24 10:00:03 TP0] Scheduler hit an exception: Traceback (most recent call last):", exception]
    for lines in ([*_VLLM_ON, "Traceback (most recent call last):", exception], sglang):
        assert diagnose_text(lines).failure_class == "unsupported_gpu_arch", lines[-1]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: expected sm_90 kernel but got None",  # an architecture named, nothing refused
        "ValueError: Model Foo requires 2 GPUs",  # a refusal, no architecture
        "ValueError: MXFP8 requires Hopper (SM90) GPUs and FlashInfer to be installed",  # a package may be what is missing
        "(APIServer pid=7) INFO 10-20 00:02:16 [cuda.py:120] Hopper (SM90) is not supported by FA2; using FLASHINFER.",  # info, not an exception
    ],
)
def test_an_architecture_named_without_an_exceptions_refusal_is_not_the_gpus_class(line: str) -> None:
    assert diagnose_text([*_VLLM_ON, line]).failure_class != "unsupported_gpu_arch"


# (33) An exception telling the user to install a package without the pip command (round twenty-seven): import_error with
# the package named; a driver or a toolkit is a system install, not a package.
@pytest.mark.parametrize(
    ("exception", "package"),
    [
        ("RuntimeError: Please install flash_attn to use this backend", "flash_attn"),
        ("ImportError: please install triton>=3.0", "triton>=3.0"),
        ("RuntimeError: Please reinstall `sgl-kernel`", "sgl-kernel"),
    ],
)
def test_an_exception_asking_for_a_package_is_import_error(exception: str, package: str) -> None:
    diagnosis = diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", exception])
    assert diagnosis.failure_class == "import_error" and diagnosis.figures.get("pip_package") == package


@pytest.mark.parametrize("exception", ["RuntimeError: Please install the NVIDIA driver", "RuntimeError: Please install CUDA 12.8 or newer"])
def test_an_exception_asking_for_a_driver_or_toolkit_is_not_import_error(exception: str) -> None:
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", exception]).failure_class != "import_error"


def test_advice_to_install_on_an_info_line_is_no_failure() -> None:
    assert diagnose_text([*_SGLANG_UP, "[2026-05-24 10:00:12] For faster loading, please install fastsafetensors."]).failure_class is None


# (34) Known classes in the words of the libraries under the engines (round twenty-seven): pyzmq's ZMQError for EADDRINUSE
# ("Address in use", libzmq's wording), c10d's ProcessGroupNCCL failing to fetch the communicator's unique id from the
# first rank through the store, transformers' hub and auto-class refusals of a model.
@pytest.mark.parametrize(
    ("exception", "port"),
    [("zmq.error.ZMQError: Address in use (addr='tcp://*:5557')", "5557"), ("zmq.error.ZMQError: Address in use (tcp://127.0.0.1:2033)", "2033")],
)
def test_zmqs_address_in_use_is_port_in_use(exception: str, port: str) -> None:
    diagnosis = diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", exception])
    assert diagnosis.failure_class == "port_in_use" and diagnosis.figures.get("port") == port


_UNIQUE_ID = "[{rank}] is setting up NCCL communicator and {verb} ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: {what}"


@pytest.mark.parametrize(("verb", "what"), [("retrieving", "Socket Timeout"), ("retreiving", "Connection reset by peer")])
def test_a_rank_that_cannot_fetch_the_nccl_unique_id_is_nccl_error(verb: str, what: str) -> None:
    line = f"torch.distributed.DistBackendError: {_UNIQUE_ID.format(rank=3, verb=verb, what=what)}. This may indicate a possible application crash on rank 0 or a network set up issue."
    diagnosis = diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", line])
    assert diagnosis.failure_class == "nccl_error" and what in (diagnosis.fix or "")


def test_the_first_ranks_own_failure_is_the_cause_over_the_others_unique_id_errors() -> None:
    lines = [
        *_VLLM_ON,
        "(Worker_TP0 pid=11) ERROR 10-20 00:02:20 [multiproc_executor.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        f"(Worker_TP1 pid=12) ERROR 10-20 00:02:21 [multiproc_executor.py:700] torch.distributed.DistBackendError: {_UNIQUE_ID.format(rank=1, verb='retrieving', what='Connection reset by peer')}",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_oom" and "nccl_error" in diagnosis.consequences


@pytest.mark.parametrize(
    "exception",
    [
        "OSError: Incorrect path_or_model_id: '/models/llama'. Please provide either the path to a local folder or the repo_id of a model on the Hub.",
        "ValueError: Unrecognized configuration class <class 'transformers.models.foo.FooConfig'> for this kind of AutoModel: AutoModelForCausalLM.",
    ],
)
def test_transformers_refusing_the_model_is_model_load_error(exception: str) -> None:
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", exception]).failure_class == "model_load_error"


# Round twenty-eight: batch41-43's miss kinds, each from the source that prints the text.
# (35) ROCm's HSA runtime on a GPU page fault (ROCR-Runtime's memory-fault handler): "Memory access fault by GPU node-%u
# (Agent handle: %p) on address %p%s. Reason: %s.", a queue's HSA_STATUS_ERROR_MEMORY_FAULT: CUDA's illegal address on AMD.
@pytest.mark.parametrize(
    "line",
    [
        "Memory access fault by GPU node-1 (Agent handle: 0x55b017570c40) on address 0x7fcd499e6000. Reason: Page not present or supervisor privilege.",
        "Memory access fault by GPU node-2 (Agent handle: ...) on address 0x7f4067e00000. Reason: Unknown.",
        "Warning: Queue error - HSA_STATUS_ERROR_MEMORY_FAULT",
    ],
)
def test_rocms_gpu_memory_fault_is_an_illegal_memory_access(line: str) -> None:
    assert diagnose_text([*_SGLANG_UP[:2], line]).failure_class == "cuda_illegal_memory_access"


def test_batch41s_rocm_memory_fault() -> None:
    _labelled("batch41-heldout", "sglang-0519-rocm10-nightly-mi300x-nextn-qwen35-ck-tile-fmha-memory-access-fault-hsa.log", "cuda_illegal_memory_access")


# (36) torch_npu's op-plugin binding a CANN operator (op_plugin/utils/op_api_common.h EXEC_NPU_CMD: "<op> or
# <op>GetWorkspaceSize not in libopapi.so, or libopapi.sonot found."): the installed CANN lacks the operator, a cause over
# the capture wrapper that carries it.
_OP_MISSING = "aclnnLightningIndexer or aclnnLightningIndexerGetWorkspaceSize not in libopapi.so, or libopapi.sonot found."


@pytest.mark.parametrize("line", [f"Exception: Capture cuda graph failed: {_OP_MISSING}", f"RuntimeError: {_OP_MISSING}"])
def test_an_operator_the_cann_op_library_lacks_is_import_error(line: str) -> None:
    diagnosis = diagnose_text([*_SGLANG_UP[:2], "[2026-05-24 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):", line])
    assert diagnosis.failure_class == "import_error" and "aclnnLightningIndexer" in (diagnosis.fix or "") and "CANN" in (diagnosis.fix or "")


def test_the_capture_wrapper_alone_stays_cuda_graph_error() -> None:
    lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):", "Exception: Capture cuda graph failed: boom"]
    assert diagnose_text(lines).failure_class == "cuda_graph_error"


def test_batch41s_npu_capture_failed_on_a_missing_operator() -> None:
    _labelled("batch41-heldout", "sglang-2025-12-npu-a2x2-dsv32-exp-w8a8-capture-failed-aclnnlightningindexer-not-in-libopapi.log", "import_error")


# (37) torch_npu's NPUGraph calling the ACL runtime's capture (NPUGraph.cpp capture_begin / capture_end,
# NPU_CHECK_ERROR(c10_npu::acl::AclmdlRICaptureBegin(...)) printed "NPU function error: ..., error code is <n>").
@pytest.mark.parametrize("call", ["AclmdlRICaptureBegin(capture_stream_, capture_mode)", "AclmdlRICaptureEnd(capture_stream_, &model_ri_)"])
def test_the_acl_runtimes_capture_call_failing_is_cuda_graph_error(call: str) -> None:
    line = f"(Worker_TP3 pid=317) ERROR 07-14 06:35:03 [multiproc_executor.py:962] RuntimeError: NPUModelRunner failed, error is capture_begin:../torch_npu/csrc/core/npu/NPUGraph.cpp:230 NPU function error: c10_npu::acl::{call}, error code is 207005"
    diagnosis = diagnose_text([*_VLLM_ON, line])
    assert diagnosis.failure_class == "cuda_graph_error" and call.split("(")[0] in (diagnosis.fix or "")


def test_batch42s_acl_capture_begin_error() -> None:
    _labelled("batch42-heldout", "vllm-ascend-0221rc1-qwen3-coder-30b-tp4-ep-aclgraph-capture-begin-error-207005.log", "cuda_graph_error")


# (38) c10d's ProcessGroupNCCL when a collective timed out (ProcessGroupNCCL.cpp: "Timeout at NCCL work: %ld, last enqueued
# NCCL work: %ld, last completed NCCL work: %ld.", "Some NCCL operations have failed or timed out. ..."): nccl_error, over
# the stall the hang leaves in the NCCL set-up lines.
@pytest.mark.parametrize(
    "line",
    [
        "[rank3]:[E1112 09:49:50.743894047 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] Timeout at NCCL work: 1, last enqueued NCCL work: 1, last completed NCCL work: -1.",
        "[rank3]:[E1112 09:49:50.743921998 ProcessGroupNCCL.cpp:621] [Rank 3] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
    ],
)
def test_c10ds_collective_timeout_lines_are_nccl_error_over_the_stall(line: str) -> None:
    assert diagnose_text([*_VLLM_ON, *_NCCL_UP[:2], line]).failure_class == "nccl_error"


def test_batch42s_first_nccl_work_timeout() -> None:
    _labelled("batch42-heldout", "vllm-2024-11-llama31-70b-tp4-first-nccl-work-watchdog-timeout-abort.log", "nccl_error")


# (39) vLLM 0.17's renderer refusing a request over the context (renderers/params.py _token_len_check, VLLMValidationError
# answered 400): "You passed {n} input tokens and requested {m} output tokens. However, the model's context length is only
# {c} tokens, resulting in a maximum input length of {c - m} tokens." and its characters pre-check.
@pytest.mark.parametrize(
    ("line", "input_tokens"),
    [
        (
            "vllm.exceptions.VLLMValidationError: You passed 15361 input tokens and requested 1024 output tokens. However, the model's context length is only 16384 tokens, resulting in a maximum input length of 15360 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=15361)",
            "15361",
        ),
        (
            "vllm.exceptions.VLLMValidationError: You passed 70000 input characters. However, the model's context length is only 16384 tokens (at most 65536 characters). Please reduce the length of the input prompt.",
            "70000",
        ),
    ],
)
def test_vllms_renderer_refusing_a_long_request_is_context_length_exceeded(line: str, input_tokens: str) -> None:
    lines = [*_VLLM_ON, f"(APIServer pid=7) ERROR 03-20 01:47:57 [serving.py:311] {line}", '(APIServer pid=7) INFO:     127.0.0.1:43628 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request']
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "context_length_exceeded" and diagnosis.figures.get("input_tokens") == input_tokens


def test_batch43s_renderer_validation_error() -> None:
    _labelled("batch43-heldout", "vllm-0171-qwen3-32b-awq-serving-then-validation-error-15361-input-plus-1024-output-over-context-16384-400.log", "context_length_exceeded")


# (40) A package imported from a checkout under another name ("/opt/jethac-flashinfer/flashinfer/...") is known by the
# import chain: the "<module>" frame running its "<root>/<package>/__init__.py" makes the files under that root the package's
# (the outermost such root: a subpackage's __init__ names the subpackage), so its import-time AttributeError is
# import_failed_in_package, as for site-packages and same-named checkouts.
def _import_chain(root: str, package: str) -> list[str]:
    return [
        "Traceback (most recent call last):",
        '  File "/opt/jethac-vllm/vllm/v1/attention/backends/flashinfer.py", line 12, in <module>',
        f"    from {package} import (",
        f'  File "{root}/{package}/__init__.py", line 25, in <module>',
        "    from .gemm import x",
        f'  File "{root}/{package}/gemm/__init__.py", line 39, in <module>',
        "    from .kernels.grouped_gemm import y",
        f'  File "{root}/{package}/gemm/kernels/grouped_gemm.py", line 585, in <module>',
        "    class Sm100Kernel:",
        f'  File "{root}/{package}/gemm/kernels/grouped_gemm.py", line 2383, in Sm100Kernel',
        "    a_major_mode: cute.nvgpu.OperandMajorMode,",
        "AttributeError: module 'cutlass.cute.nvgpu' has no attribute 'OperandMajorMode'",
    ]


def test_an_import_time_error_in_a_checkout_under_another_name_is_import_error() -> None:
    diagnosis = diagnose_text([*_VLLM_ON, *_import_chain("/opt/jethac-flashinfer", "flashinfer")])
    assert diagnosis.failure_class == "import_error" and "'flashinfer'" in (diagnosis.fix or "")


def test_an_import_time_error_in_the_engines_own_checkout_is_not_a_packages() -> None:
    assert diagnose_text([*_VLLM_ON, *_import_chain("/opt/jethac-vllm", "vllm")]).failure_class != "import_error"


def test_batch43s_flashinfer_import_from_a_fork_checkout() -> None:
    _labelled("batch43-heldout", "vllm-2026-06-fork-gb10-qwen-fp8-sampler-init-flashinfer-import-attributeerror-cutlass-cute-operandmajormode.log", "import_error")


# --- round twenty-nine: batch44's miss kind, batch18's and batch29's leftovers, and a sweep of the engines' raise texts ----
# (41) FlagOS's vLLM platform plugin (vllm-plugin-FL vllm_fl/utils.py _get_vendor_device_field): ValueError(f"Vendor
# '{normalized_vendor}' not found in VENDOR_DEVICE_MAP.") when the accelerator's vendor has no device entry.
@pytest.mark.parametrize("vendor", ["hygon", "cambricon", "iluvatar"])
@pytest.mark.parametrize("framed", [True, False])
def test_vllm_fls_vendor_missing_from_its_device_map_is_unsupported_gpu_arch(vendor: str, framed: bool) -> None:
    line = f"ValueError: Vendor '{vendor}' not found in VENDOR_DEVICE_MAP."
    lines = [*_VLLM_ON, "Traceback (most recent call last):", line] if framed else [line]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "unsupported_gpu_arch" and f"vendor '{vendor}'" in (diagnosis.fix or "")


def test_vllm_fls_missing_field_for_a_known_vendor_is_not_the_accelerator() -> None:
    # The plugin's other VENDOR_DEVICE_MAP error, as _get_vendor_device_field raises it (its own table incomplete for a
    # vendor it lists): not a refusal of the accelerator, though it names the vendor and the map as the refusal does.
    line = "ValueError: Field 'device_name' for vendor 'hygon' is missing or empty in VENDOR_DEVICE_MAP."
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", line]).failure_class != "unsupported_gpu_arch"


def test_batch44s_vendor_refusal() -> None:
    _labelled("batch44-heldout", "vllm-0200-dcu-hygon-bw1000-vllm-fl-plugin-valueerror-vendor-hygon-not-in-vendor-device-map.log", "unsupported_gpu_arch")


# (42) c10d's TCPStore server (torch/csrc/distributed/c10d/socket.cpp SocketListenOp, TCPStoreLibUvBackend.cpp): "The
# server socket has failed to listen on any local network address. port: {}, useIpv6: {}, code: {}, name: {}, message: {}"
# (older torch: the binds' "(errno: 98 - Address already in use)" appended), a port another process holds; another errno
# is not this. Round fourteen read the words alone as no port clash (libuv's -9 is UV_EBADF); round twenty-nine reads them
# as one unless the line names another errno: every copy of the words read since names EADDRINUSE (ten of ten in public
# code and docs), and a cut line ("code: -9" with no name, batch18's) is a cut "-98". The rule's tests all stand here.
def _store_listen(line: str, framed: bool) -> list[str]:
    """The line alone, or inside a vLLM start under the engine core's log prefix."""
    core = "(EngineCore_DP0 pid=7) ERROR 04-10 03:00:00 [core.py:708] "
    return [*_VLLM_ON, core + "Traceback (most recent call last):", core + line] if framed else [line]


@pytest.mark.parametrize("framed", [True, False])
@pytest.mark.parametrize(
    ("line", "port"),
    [
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
            "29500",
        ),
        ("RuntimeError: The server socket has failed to listen on any local network address. port: 46571, useIpv6: 0, code: -9", "46571"),
        (
            "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:6000 (errno: 98 - Address already in use).",
            None,
        ),
    ],
)
def test_c10ds_store_that_cannot_listen_is_port_in_use(line: str, port: str | None, framed: bool) -> None:
    diagnosis = diagnose_text(_store_listen(line, framed))
    assert diagnosis.failure_class == "port_in_use" and diagnosis.figures.get("port") == port
    assert "rendezvous store" in (diagnosis.fix or "")


@pytest.mark.parametrize("framed", [True, False])
@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: The server socket has failed to listen on any local network address. port: 80, useIpv6: 0, code: -13, name: EACCES, message: permission denied",
        "RuntimeError: The server socket has failed to listen on any local network address. port: 46571, useIpv6: 0, code: -9, name: EBADF, message: bad file descriptor",
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to 10.9.9.9:29500 (errno: 99 - Cannot assign requested address).",
    ],
)
def test_c10ds_store_refused_for_another_reason_is_not_port_in_use(line: str, framed: bool) -> None:
    assert diagnose_text(_store_listen(line, framed)).failure_class != "port_in_use"


def test_batch18s_store_listen_line() -> None:
    _labelled("batch18-heldout", "vllm-pipelinerl-process-group-socket-failed-to-listen-port-race.log", "port_in_use")


# (43) Kunlunxin's XCCL through torch_xmlir's process group: the XCCL call's failure raised with the place it was checked,
# "(at .../torch_xmlir/csrc/new_xccl/XCCLUtils.hpp:53)".
@pytest.mark.parametrize("what", ["[INVALID PARAMETER]: error code= 1", "[SYSTEM ERROR]: error code= 2"])
def test_xccls_failure_raised_by_torch_xmlir_is_nccl_error(what: str) -> None:
    lines = [
        *_VLLM_ON,
        "[XCCL][init.cpp:1227] host 10.0.0.2 addr_window check failed",
        f"ValueError: {what}(at .../torch_xmlir/csrc/new_xccl/XCCLUtils.hpp:53)",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "nccl_error" and what in (diagnosis.fix or "")


def test_the_same_error_code_words_elsewhere_are_not_xccls() -> None:
    # XCCL named, but not torch_xmlir's own check of an XCCL call: another program's test of the library.
    line = "ValueError: [INVALID PARAMETER]: error code= 1(at /opt/xccl/examples/allreduce_test.cpp:53)"
    assert diagnose_text([*_VLLM_ON, line]).failure_class != "nccl_error"


def test_batch29s_xccl_log() -> None:
    _labelled("batch29-heldout", "vllm-kunlun-tp2-xccl-init-addr-window-check-failed-engine-core-init.log", "nccl_error")


# (44) From a sweep of the raise statements of SGLang 0.2.15-0.5.23 and vLLM 0.6.6-0.33 (benchmarks/diagnose_raise_sweep.py:
# each message rendered with its placeholders filled and read as an exception line of a start): known classes' texts no
# signature read.
@pytest.mark.parametrize(
    ("line", "label"),
    [
        # SGLang utils.py reserve_port: every port of 30000-39999 refused the bind.
        ("RuntimeError: No free port available.", "port_in_use"),
        ("RuntimeError: No free port available", "port_in_use"),  # SGLang 0.4.x utils.py, without the stop
        # vLLM 0.4-0.8's tokenizer group: ValueError("Input too long.", input_length, max_input_length).
        ("ValueError: ('Input too long.', 40000, 32768)", "context_length_exceeded"),
        # SGLang's diffusion server under --strict-ports (multimodal_gen/runtime/server_args/server_args.py _require_port).
        ("RuntimeError: master port 30005 is unavailable and --strict-ports is enabled. Either use a different port or disable --strict-ports.", "port_in_use"),
        # vLLM 0.33 v1/engine/input_processor.py:598, a prompt exactly as long as the model.
        (
            "vllm.exceptions.VLLMValidationError: The decoder prompt (length 32768) plus the number of requested output tokens (at least 1) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens (prompt + requested output tokens).",
            "context_length_exceeded",
        ),
        # SGLang 0.5.23 srt/entrypoints/openai/serving_decisions.py:351.
        ("ValueError: the prompt has 40000 tokens, which does not fit the context length of 32768 tokens", "context_length_exceeded"),
        # vLLM 0.33 v1/core/kv_cache_planning.py:1381.
        (
            "ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing `gpu_memory_utilization`.",
            "kv_pool_too_small",
        ),
    ],
)
def test_raise_texts_of_known_classes_from_the_engines_sources(line: str, label: str) -> None:
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", line]).failure_class == label


# (45) The GPU refused in the words of the engines' newer kernel and backend checks (the generic refusal's vocabulary,
# round twenty-nine): "only supported on", "supported only on", "not available on", "<SM>-only", "supports <SM or compute
# capability>", "and above", "or newer", "required"; and AMD targets named by family ("gfx95x", "gfx12").
@pytest.mark.parametrize(
    "line",
    [
        "NotImplementedError: flash_attn at sgl-kernel is only supported on sm90 and above",  # sgl-kernel flash_attention_v3.py:138
        "ValueError: --quantization nvfp4_online is supported only on NVIDIA Blackwell SM100/SM103 GPUs.",  # SGLang overrides.py:1458
        "ValueError: FlashAttention-4 block-sparse attention is not available on compute capability 8.x; supported: SM90 (Hopper) and SM100 (Blackwell)",
        "ValueError: --dsa-prefill-backend flashmla_sparse_q8 is SM90-only; got compute capability sm_100x.",  # dsa_backend.py:461
        "RuntimeError: SubBlock sparse attention supports compute capability 9.0, 10.0, or 12.0; this tensor is on a 8.6 device.",
        "NotImplementedError: MoE LoRA supports SM90 and SM100 only; this device is sm86.",  # SGLang lora/moe/runner.py:221
        "ValueError: Current platform does not support NVFP4 quantization. Please use Blackwell and above.",
        "RuntimeError: Q8KV4/Q8KV8 indexers support only SM100, SM103 and SM107, got SM90",  # vLLM fmha_sm100 q8_indexer_interface.py:90
        "RuntimeError: SM100-class CUDA device required",
        "NotImplementedError: Online MXFP4 quantization requires an AMD ROCm device with FP4 hardware support (gfx95x, e.g. MI355x).",
    ],
)
def test_the_gpu_refused_in_newer_words_is_unsupported_gpu_arch(line: str) -> None:
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", line]).failure_class == "unsupported_gpu_arch"


@pytest.mark.parametrize(
    "line",
    [
        # a feature the installed package lacks, on the GPU that needs it: not the GPU
        "RuntimeError: aiter triton W4A8 MoE (moe_gemm_a8w4) is required for the gfx1250 GPT-OSS MXFP4 path but was not found in the installed aiter build.",
        "RuntimeError: fp8 two-pool unified_kv needs aiter's fused_qk_norm_rope_group_quant: aiter exports it=False, gfx95=True",
        # a kernel's limits on its own GPU, not a refusal of the GPU
        "TypeError: SM90 port supports F16/BF16 A/B; got torch.float32",
        "ValueError: the SM100 dual GEMM supports 1 to 4096 tokens",
        "ValueError: SM107 N must be a multiple of 8 in the range 8…256",
    ],
)
def test_a_packages_missing_feature_or_a_kernels_limits_are_not_the_gpu(line: str) -> None:
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", line]).failure_class != "unsupported_gpu_arch"


# --- round thirty: batch46's and batch47's miss kinds ----------------------------------------------------------------
# (46) A model build refusing the configured context above its limit: Tenstorrent's vLLM fork (tt-inference-server's TT
# models: ValueError(f"TT-LLama8B and TT-Llama11B do not support max_model_len greater than {max} on N150 (received {n}).
# Set --max_model_len to {max} or lower in vLLM.")), as vLLM's own "User-specified max_model_len ... is greater than the
# derived max_model_len".
@pytest.mark.parametrize(
    ("line", "requested"),
    [
        (
            "ValueError: TT-LLama8B and TT-Llama11B do not support max_model_len greater than 32768 on N150 (received 65536). Set --max_model_len to 32768 or lower in vLLM.",
            "65536",
        ),
        ("ValueError: TT-Qwen3-32B does not support max_model_len greater than 40960 on T3K", None),
        ("AssertionError: This device cannot serve a max_model_len larger than 8192", None),
    ],
)
def test_a_model_build_refusing_a_longer_max_model_len_is_context_length_exceeded(line: str, requested: str | None) -> None:
    core = "(EngineCore_DP0 pid=7) ERROR 04-10 03:00:00 [core.py:708] "
    diagnosis = diagnose_text([*_VLLM_ON, core + "EngineCore failed to start.", core + "Traceback (most recent call last):", core + line])
    assert diagnosis.failure_class == "context_length_exceeded" and diagnosis.figures.get("requested_context") == requested
    assert "lower --max-model-len to" in (diagnosis.fix or "")


@pytest.mark.parametrize(
    "line",
    [
        # another parameter refused against max_model_len, not the context itself
        "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (32768). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences.",
        "ValueError: speculative_max_model_len=40960 cannot be larger than draft_max_model_len=4096",
        "ValueError: long_prefill_token_threshold (40000) cannot be greater than the max_model_len (32768).",
    ],
)
def test_other_settings_refused_against_max_model_len_are_not_the_context(line: str) -> None:
    assert diagnose_text([*_VLLM_ON, "Traceback (most recent call last):", line]).failure_class != "context_length_exceeded"


def test_batch46s_tenstorrent_context_refusal() -> None:
    _labelled("batch46-heldout", "vllm-tt-inference-server-2026-04-n150-llama31-8b-max-model-len-65536-over-device-limit-32768.log", "context_length_exceeded")


# (47) SGLang's "Some weights are not initialized from checkpoints" is a failure only where a model class raises it
# (RuntimeError, deepseek_ocr.py, internvl.py); gemma4_mm.py, mllama4.py and deepseek_v4.py log the same words as a warning
# and go on, and SGLang's default format prints no level: the plain line is no failure, a later exception is the cause.
_UNLOADED = "Some weights are not initialized from checkpoints: ['language_model.layers.0.moe.experts.w13_blockscale_swizzled', 'language_model.layers.0.self_attn.attn.k_scale']"


def test_a_raised_weights_not_initialised_is_model_load_error() -> None:
    lines = [*_SGLANG_UP[:2], "[2026-05-24 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):", f"RuntimeError: {_UNLOADED}"]
    assert diagnose_text(lines).failure_class == "model_load_error"


def test_the_same_words_logged_as_a_warning_are_not_the_cause_of_a_later_crash() -> None:
    lines = [
        *_SGLANG_UP[:2],
        f"[2026-05-24 10:00:05] {_UNLOADED}",
        "[2026-05-24 10:00:25] Scheduler hit an exception: Traceback (most recent call last):",
        "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'",
    ]
    assert diagnose_text(lines).failure_class == "unknown"


def test_the_same_words_logged_in_a_start_that_came_up_are_no_failure() -> None:
    lines = [*_SGLANG_UP[:2], f"[2026-05-24 10:00:05] {_UNLOADED}", *_SGLANG_UP[2:]]
    assert diagnose_text(lines).failure_class is None


def test_batch47s_warning_before_a_flashinfer_autotune_crash() -> None:
    _labelled("batch47-heldout", "sglang-2026-10-dev-rtx5090-gemma4-26b-nvfp4-flashinfer-autotune-fusedmoe-no-attribute-g1-scale-c-sigquit.log", "unknown")


# (48) SGLang 0.2-0.4's constrained decoding retokenising a request being decoded (schedule_batch.py
# Req.jump_forward_and_retokenize: logger.warning("Token fusion between input and output, try to avoid this by removing
# the space at the end of the input.")): a server at work, the positive evidence a bare serving window needs.
def test_sglangs_token_fusion_warnings_show_a_server_at_work() -> None:
    warning = "Token fusion between input and output, try to avoid this by removing the space at the end of the input."
    lines = [f"[00:07:30 TP{rank}] {warning}" for rank in range(4)] * 3
    assert diagnose_text(lines).failure_class is None


def test_batch46s_token_fusion_serving_window() -> None:
    _labelled("batch46-heldout", "sglang-2024-09-tp4-regex-gen-token-fusion-warnings-while-serving.log", "healthy")


# --- round thirty-one: batch48's miss kind -----------------------------------------------------------------------------
# (49) torch_npu's NPUGraph refusing a call while an NPU stream captures (csrc/core/npu/NPUGraphsUtils.h): assertNotCapturingAclop's
# "Cannot run aclop operators during NPU graph capture. Current working aclop is <op>. ..." and assertNotCapturing's
# "<attempt> during NPU graph capture. If you need this call to be captured, please file an issue. ...": the capture
# failed, cuda_graph_error, as CUDA's stream-capture errors are.
_NPU_CORE = "(EngineCore_DP0 pid=31774) "


@pytest.mark.parametrize(
    ("line", "aclop"),
    [
        (
            "RuntimeError: Cannot run aclop operators during NPU graph capture. Current working aclop is Fill. If you need this call to be captured, please try to set torch.npu.config.allow_internal_format = False. If still fail, the operator needs aclnn implementation and please file an issue. Current npuStreamCaptureStatus: npuStreamCaptureStatusActive",
            "Fill",
        ),
        ("RuntimeError: Cannot run aclop operators during NPU graph capture. Current working aclop is Conv2D. If you need this call to be captured, ...", "Conv2D"),
        ("RuntimeError: Cannot call NPUGeneratorImpl::current_seed during NPU graph capture. If you need this call to be captured, please file an issue. Current npuStreamCaptureStatus: 1", None),
    ],
)
def test_torch_npus_capture_refusal_is_cuda_graph_error(line: str, aclop: str | None) -> None:
    lines = [*_VLLM_ON, _NPU_CORE + "Traceback (most recent call last):", _NPU_CORE + line, "RuntimeError: Engine core initialization failed. See root cause above."]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_graph_error" and diagnosis.figures.get("aclop") == aclop
    assert "NPU graph capture" in (diagnosis.fix or "") and "--enforce-eager" in (diagnosis.fix or "")


def test_npu_graph_capture_words_outside_torch_npus_refusals_are_not_read() -> None:
    # The trigger's literal alone ("during NPU graph capture") is no refusal: only torch_npu's two sentences are.
    lines = [
        *_VLLM_ON,
        "(EngineCore_DP0 pid=7) INFO 10-20 00:03:00 [model_runner_v1.py:3500] 12 aclop operators were replaced during NPU graph capture warm-up",
        "(APIServer pid=7) INFO:     Application startup complete.",
    ]
    assert diagnose_text(lines).failure_class != "cuda_graph_error"


def test_batch48s_npu_capture_refusal() -> None:
    _labelled("batch48-heldout", "vllm-ascend-0110rc0-bge-large-zh-npu-graph-capture-cannot-run-aclop-fill.log", "cuda_graph_error")
