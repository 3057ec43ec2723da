"""`fleet diagnose`: the catalogue and the classifier.

Real logs: tests/fixtures/sample-logs (labelled in manifest.jsonl). Constructed logs:
tests/fixtures/logs (see its README: seed stories and SGLang source messages)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.host.diagnose import classify
from fleet.host.diagnose.catalogue import SIGNATURES, Kind, fill_fix, grep_patterns
from fleet.host.diagnose.classify import (
    Diagnosis,
    DiagnosisHint,
    diagnose_file,
    diagnose_paths,
    diagnose_text,
    read_result_json,
    render_diagnoses,
)
from fleet.host.failures import ROOT_CAUSES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SAMPLES = FIXTURES / "sample-logs"
LOGS = FIXTURES / "logs"
MANIFEST = [json.loads(line) for line in (SAMPLES / "manifest.jsonl").read_text().splitlines() if line.strip()]


def _expected(label: str) -> str | None:
    # "healthy": no failure. "unknown": none of the classes -- an unexplained error (117, 129), or
    # (017) a start the log leaves between two steps with no error line: not healthy, not a known
    # cause. "server_start_timeout" (133) is read from the log alone: it ends inside a step that began
    # (NCCL communicators forming) and never finished.
    return None if label == "healthy" else label


@pytest.mark.parametrize("entry", MANIFEST, ids=[entry["file"] for entry in MANIFEST])
def test_every_labelled_sample(entry: dict[str, str]) -> None:
    diagnosis = diagnose_file(SAMPLES / entry["file"])
    assert diagnosis.failure_class == _expected(entry["label"])
    if diagnosis.failure_class is not None:
        assert diagnosis.evidence and diagnosis.fix
    else:
        assert diagnosis.evidence == () and diagnosis.fix is None


def test_sample_evidence_lines_and_fix_figures() -> None:
    context = diagnose_file(SAMPLES / "007-context_length_exceeded.log")
    # The root cause (line 3), not the TypeError it provokes (line 2) nor the scheduler exception.
    assert [item.line for item in context.evidence] == [3]
    assert "160062" in (context.fix or "") and "59862" in (context.fix or "")

    capture = diagnose_file(SAMPLES / "027-cuda_illegal_memory_access.log")
    assert capture.evidence[0].line == 3 and "illegal memory access" in capture.evidence[0].text

    gated = diagnose_file(SAMPLES / "011-model_load_error.log")
    assert "meta-llama/Llama-2-7b-chat-hf" in (gated.fix or "") and "HF_TOKEN" in (gated.fix or "")

    nccl = diagnose_file(SAMPLES / "009-nccl_error.log")
    # The quoted source line `raise RuntimeError(f"NCCL error: {error_str}")` is code, not evidence.
    assert [item.line for item in nccl.evidence] == [13]
    assert "unhandled system error" in (nccl.fix or "")


def test_healthy_docs_log_reports_the_context_warning_as_a_finding() -> None:
    diagnosis = diagnose_file(SAMPLES / "021-healthy.log")
    assert diagnosis.failure_class is None
    assert [(f.name, f.line) for f in diagnosis.findings] == [("context_length_above_derived", 39)]
    assert "131072" in diagnosis.findings[0].advice and "2048" in diagnosis.findings[0].advice


# -- the seed stories --------------------------------------------------------------------------
def test_seed_max_running_request_zero_after_kv_allocation() -> None:
    diagnosis = diagnose_file(LOGS / "seed-max-running-request-zero.journal.txt")
    assert diagnosis.failure_class == "max_running_requests_zero"
    assert [item.line for item in diagnosis.evidence] == [18]
    fix = diagnosis.fix or ""
    for figure in ("11893", "2 slots", "32768", "--max-running-requests", "it was 8", "0.75", "--disable-radix-cache"):
        assert figure in fix
    assert [f.name for f in diagnosis.findings] == ["flashinfer_sm12_needs_cuda_12_9"]
    assert diagnosis.findings[0].count == 2


@pytest.mark.parametrize("name", ["seed-ddtree-b8-illegal-instruction.log", "interleaved-ranks-nccl-first.log"])
def test_seed_ddtree_b8_root_cause_beats_watchdog_and_scheduler_exception(name: str) -> None:
    diagnosis = diagnose_file(LOGS / name)
    assert diagnosis.failure_class == "cuda_illegal_instruction"
    assert diagnosis.consequences == ("nccl_error",)
    assert all("illegal instruction" in item.text for item in diagnosis.evidence)
    assert "budget=8" in (diagnosis.fix or "")
    names = {f.name: f for f in diagnosis.findings}
    assert set(names) == {"flashinfer_sm12_needs_cuda_12_9", "ddtree_accepts_nothing"}
    assert "FLASHINFER_CUDA_ARCH_LIST" in names["flashinfer_sm12_needs_cuda_12_9"].advice
    assert names["ddtree_accepts_nothing"].line == 23


def test_seed_context_overflow_http_400() -> None:
    diagnosis = diagnose_file(LOGS / "context-length-generate-400.log")
    assert diagnosis.failure_class == "context_length_exceeded"
    assert "32956" in (diagnosis.fix or "") and "32512" in (diagnosis.fix or "")
    assert [f.name for f in diagnosis.findings] == ["http_400_responses"]


# -- variants built from SGLang's source messages --------------------------------------------
@pytest.mark.parametrize(
    ("name", "failure_class", "in_fix"),
    [
        ("port-in-use-uvicorn.log", "port_in_use", "--port"),
        ("port-in-use-nccl-port.log", "port_in_use", "Port 30005"),
        ("cuda-graph-oom.log", "cuda_oom", "during CUDA graph capture (mem_fraction_static=0.88)"),
        ("not-enough-memory.log", "kv_pool_too_small", "mem_fraction_static=0.55"),
        ("mamba-state-too-small.log", "max_running_requests_zero", "--disable-radix-cache"),
        ("mamba-state-no-memory.log", "kv_pool_too_small", "1.84 GB"),
        ("no-kernel-image-sm120.log", "unsupported_gpu_arch", "SM120"),
        ("import-error-undefined-symbol.log", "import_error", "_ZN3c104cuda9SetDeviceEa"),
        ("missing-model-path.log", "model_load_error", "/dev/shm/Qwen3.6-27B"),
        ("nccl-carries-illegal-memory-access.log", "cuda_illegal_memory_access", "--cuda-graph-backend-decode=disabled"),  # no server_args line: the newest release spells it
        ("weight-name-keyerror.log", "model_load_error", "load_weights"),
        # New signatures, each a variant built from the text its source prints (catalogue.py cites it).
        ("cuda-graph-capture-stream-0523.log", "cuda_graph_error", "operation not permitted when stream is capturing"),
        ("ecc-through-nccl-watchdog.log", "unknown", "hardware fault"),
        ("kv-profiled-negative.log", "kv_pool_too_small", "profiled at -561981 tokens"),
        ("ptxas-sm120a.log", "unsupported_gpu_arch", "sm_120a"),
        ("nvcc-unsupported-arch.log", "unsupported_gpu_arch", "compute_120a"),
        ("context-400-json-client.log", "context_length_exceeded", "5000 tokens does not fit the context of 4096"),
    ],
)
def test_constructed_failures(name: str, failure_class: str, in_fix: str) -> None:
    diagnosis = diagnose_file(LOGS / name)
    assert diagnosis.failure_class == failure_class
    assert in_fix in (diagnosis.fix or "")


def test_a_crash_in_the_weight_loader_shows_the_final_exception() -> None:
    # The real 124 (a KeyError in DeepseekVL2.load_weights, labelled model_load_error) and this variant.
    diagnosis = diagnose_file(LOGS / "weight-name-keyerror.log")
    assert any(item.text.startswith("KeyError:") for item in diagnosis.evidence)


def test_root_cause_first_in_time_consequences_after_it() -> None:
    # A hardware fault first on rank 1, NCCL's watchdog timeout (printed first, on rank 0) follows from it.
    ecc = diagnose_file(LOGS / "ecc-through-nccl-watchdog.log")
    assert ecc.failure_class == "unknown" and ecc.consequences == ("nccl_error",)
    assert "uncorrectable ECC error encountered" in ecc.evidence[0].text
    # A capture failure wrapping OOM is OOM; wrapping anything else it is cuda_graph_error.
    assert diagnose_file(LOGS / "cuda-graph-oom.log").failure_class == "cuda_oom"
    graph = diagnose_file(LOGS / "cuda-graph-capture-stream-0523.log")
    assert graph.evidence[0].line == 12 and len({item.line for item in graph.evidence}) == len(graph.evidence)


def test_the_b12_story_the_crash_before_the_import_error_it_is_followed_by(tmp_path: Path) -> None:
    # The seed's DDTree crash, then (a later process on the same host) a missing module: the crash is
    # the root cause, with its evidence line; before the fix the import error outranked it.
    lines = (LOGS / "seed-ddtree-b8-illegal-instruction.log").read_text().splitlines()
    lines.append("ModuleNotFoundError: No module named 'torch'")
    diagnosis = diagnose_text(lines, "b12.log")
    assert diagnosis.failure_class == "cuda_illegal_instruction"
    assert "an illegal instruction was encountered" in diagnosis.evidence[0].text
    assert diagnosis.consequences == ("import_error",) or "import_error" in diagnosis.consequences
    # The other way round (the import failed first) the import error is the cause. (Placed after the server came up:
    # an error before start-up steps that the start went through and came up after did not stop it, round fifteen.)
    reordered = diagnose_text([*lines[:21], "ModuleNotFoundError: No module named 'sgl_kernel'", *lines[21:-1]], "b12.log")
    assert reordered.failure_class == "import_error"


def test_nccl_info_lines_are_never_failures() -> None:
    # NCCL_DEBUG=INFO quotes a missing net plugin on healthy starts (the real 133 does, on every node).
    line = "0d7b897a995a:1333:1333 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory"
    assert diagnose_text([line, "[2026-05-24 11:00:01] The server is fired up and ready to roll!"]).failure_class is None
    warn = "0d7b897a995a:1333:1333 [0] NCCL WARN NET/Socket : no usable interface; NCCL error: unhandled system error"
    assert diagnose_text([warn]).failure_class == "nccl_error"


def test_a_stalled_start_says_where_it_stalled() -> None:
    log = LOGS / "jit-stall-during-capture.log"
    timed_out = diagnose_file(log, DiagnosisHint(server_start_timed_out=True, start_timeout_s=600))
    assert timed_out.failure_class == "server_start_timeout"
    assert timed_out.evidence[0].line == 5 and "FlashInfer JIT kernels" in timed_out.evidence[0].text
    real = diagnose_file(SAMPLES / "133-server_start_timeout.log", DiagnosisHint(server_start_timed_out=True))
    assert real.failure_class == "server_start_timeout" and "NCCL" in real.evidence[0].text
    # Without the record's word: the log ends inside a step that began (JIT kernels during capture).
    bare = diagnose_file(log)
    assert bare.failure_class == "server_start_timeout"
    assert bare.evidence[0].line == 5 and bare.evidence[0].text == "stalled at: loading or compiling FlashInfer JIT kernels"
    assert "stalled while loading or compiling FlashInfer JIT kernels" in (bare.fix or "")


@pytest.mark.parametrize(
    ("name", "finding"),
    [
        ("recovered-request-error.log", "recovered_error"),
        ("restart-oom-then-healthy.journal.txt", "earlier_start_failed"),
        ("unbalanced-memory-tp4.log", "memory_unbalanced"),
        ("no-kernel-image-sm120.log", "torch_lacks_gpu_arch"),
    ],
)
def test_findings(name: str, finding: str) -> None:
    assert finding in {f.name for f in diagnose_file(LOGS / name).findings}


def test_recovered_and_restarted_logs_are_not_failures() -> None:
    assert diagnose_file(LOGS / "recovered-request-error.log").failure_class is None
    restarted = diagnose_file(LOGS / "restart-oom-then-healthy.journal.txt")
    assert restarted.failure_class is None
    assert restarted.summary is not None and restarted.summary.starts == 2 and restarted.summary.is_ready
    reduced = next(f for f in restarted.findings if f.name == "max_running_requests_reduced")
    assert "64" in reduced.advice and "48" in reduced.advice


def test_start_timeout_from_the_callers_word_or_the_stall() -> None:
    log = (LOGS / "sweep" / "tp1-b12-timeout" / "server.log").read_text().splitlines()
    plain = diagnose_text(log, "server.log")
    assert plain.failure_class == "server_start_timeout"  # it ends while capturing CUDA graphs
    assert [item.text for item in plain.evidence] == ["stalled at: capturing CUDA graphs"]
    timed_out = diagnose_text(log, "server.log", DiagnosisHint(server_start_timed_out=True, start_timeout_s=600))
    assert timed_out.failure_class == "server_start_timeout"
    assert "600 s" in (timed_out.fix or "") and "capturing CUDA graphs" in (timed_out.fix or "")
    # A fatal line outranks the timeout: the server was killed, but it had already failed.
    failed = diagnose_file(LOGS / "cuda-graph-oom.log", DiagnosisHint(server_start_timed_out=True))
    assert failed.failure_class == "cuda_oom"


# -- messy input --------------------------------------------------------------------------------
def test_crlf_and_ansi_colours_change_nothing() -> None:
    plain = (LOGS / "seed-max-running-request-zero.journal.txt").read_text().splitlines()
    coloured = [f"\x1b[1;31m{line}\x1b[0m\r" for line in plain]
    a, b = diagnose_text(plain, "x"), diagnose_text(coloured, "x")
    assert (a.failure_class, a.fix, [e.line for e in a.evidence]) == (b.failure_class, b.fix, [e.line for e in b.evidence])
    assert b.evidence[0].text == plain[17]


def test_text_and_file_agree(tmp_path: Path) -> None:
    source = LOGS / "seed-ddtree-b8-illegal-instruction.log"
    from_text = diagnose_text(source.read_text().splitlines(), str(source))
    assert from_text.to_json() == diagnose_file(source).to_json()


def _long_log(decode_lines: int) -> list[str]:
    head = (LOGS / "seed-ddtree-b8-illegal-instruction.log").read_text().splitlines()
    serving = [
        f"[2026-05-23 10:12:5{i % 10} TP0] Decode batch, #running-req: 2, #full token: {1000 + i}, full token usage: 0.01, "
        f"mamba num: 6, mamba usage: 0.02, accept len: 1.00, accept rate: 0.00, cuda graph: True, "
        f"gen throughput (token/s): {i}.00, #queue-req: 0"
        for i in range(decode_lines)
    ]
    extra = [f'[2026-05-23 10:12:55] INFO:     127.0.0.1:{40000 + i} - "POST /generate HTTP/1.1" 200 OK' for i in range(50)]
    return head[:24] + serving + extra + head[24:]


def test_small_chunks_and_blocks_give_the_same_answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = _long_log(3000)
    path = tmp_path / "long.log"
    path.write_text("\n".join(lines))  # no final newline
    reference = diagnose_file(path)
    monkeypatch.setattr(classify, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(classify, "BLOCK_BYTES", 700)
    small = diagnose_file(path)
    assert small.to_json() == reference.to_json()
    assert reference.failure_class == "cuda_illegal_instruction"
    crash_line = lines.index("RuntimeError: CUDA error: an illegal instruction was encountered") + 1
    assert [item.line for item in small.evidence] == [crash_line]
    for diagnosis in (reference, small):
        summary = diagnosis.summary
        assert summary is not None
        assert (summary.lines, summary.decode_lines, summary.prefill_lines) == (len(lines), 3000, 2)
        assert summary.last_decode is not None and summary.last_decode.gen_throughput == 2999.0
        assert summary.last_decode.line_no == 24 + 3000


def test_a_line_longer_than_the_buffer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(classify, "CHUNK_BYTES", 1024)
    path = tmp_path / "long-line.log"
    path.write_text("x" * 5000 + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    diagnosis = diagnose_file(path)
    assert diagnosis.failure_class == "cuda_illegal_memory_access" and diagnosis.evidence[0].line == 2


def test_grep_finds_every_line_the_classifier_cites() -> None:
    """The benchmark's grep patterns are the classifier's prefilter: same lines, so a fair race."""
    patterns = [arg for pattern in grep_patterns() for arg in ("-e", pattern)]
    for path in sorted(LOGS.glob("*.log")) + sorted(SAMPLES.glob("*.log")):
        found = subprocess.run(["grep", "-E", "-n", *patterns, str(path)], capture_output=True, text=True, check=False)
        grep_lines = {int(line.split(":", 1)[0]) for line in found.stdout.splitlines()}
        diagnosis = diagnose_file(path)
        # "last startup step" / "stalled at" evidence is a start-up step's line, not a catalogue hit.
        cited = {item.line for item in diagnosis.evidence if not item.text.startswith(("last startup step", "stalled at"))}
        cited |= {f.line for f in diagnosis.findings if f.text}
        assert cited <= grep_lines, path.name


# -- folders and result JSON --------------------------------------------------------------------
def test_sweep_folder_reports_only_runs_that_matter() -> None:
    sweep = LOGS / "sweep"
    by_path = {Path(d.path).relative_to(sweep).as_posix(): d for d in diagnose_paths([sweep])}
    assert set(by_path) == {"tp1-auto-ctx30k/result.json", "tp1-auto-ctx30k/server.log", "tp1-b12-timeout/server.log"}
    result = by_path["tp1-auto-ctx30k/result.json"]
    assert result.failure_class == "context_length_exceeded"
    # The lines of the JSON file holding the error: the failure's message and the request's error.
    assert [item.line for item in result.evidence] == [8, 14]
    assert by_path["tp1-auto-ctx30k/server.log"].failure_class is None
    assert [f.name for f in by_path["tp1-auto-ctx30k/server.log"].findings] == ["http_400_responses"]
    timeout = by_path["tp1-b12-timeout/server.log"]
    assert timeout.failure_class == "server_start_timeout" and "900 s" in (timeout.fix or "")


def test_named_files_are_always_reported() -> None:
    [diagnosis] = diagnose_paths([SAMPLES / "024-healthy.log"])
    assert diagnosis.failure_class is None and diagnosis.findings == ()


def test_result_json_reading(tmp_path: Path) -> None:
    evidence = read_result_json(LOGS / "sweep" / "tp1-b12-timeout" / "result.json")
    assert evidence.hint == DiagnosisHint(server_start_timed_out=True, start_timeout_s=900.0)
    broken = tmp_path / "result.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=r"result.json: expected a whole JSON document \(truncated or not JSON\)"):
        diagnose_paths([broken])
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        diagnose_paths([tmp_path / "nothing-here"])


def test_folder_with_a_timeout_result_and_no_log(tmp_path: Path) -> None:
    shutil.copy(LOGS / "sweep" / "tp1-b12-timeout" / "result.json", tmp_path / "result.json")
    [diagnosis] = diagnose_paths([tmp_path])
    assert diagnosis.failure_class == "server_start_timeout"


# -- output ----------------------------------------------------------------------------------------
def test_to_json_shape() -> None:
    document = diagnose_file(LOGS / "seed-ddtree-b8-illegal-instruction.log").to_json()
    assert list(document) == ["path", "failure_class", "evidence", "findings", "fix"]
    assert document["evidence"] == [{"line": 31, "text": "RuntimeError: CUDA error: an illegal instruction was encountered"}]
    assert json.loads(json.dumps(document)) == document


def test_render() -> None:
    text = render_diagnoses(diagnose_paths([LOGS / "cuda-graph-oom.log", SAMPLES / "024-healthy.log"]))
    assert "cuda-graph-oom.log: cuda_oom" in text and "fix: CUDA ran out of memory" in text
    assert "024-healthy.log: no failure" in text
    assert render_diagnoses([]) == "No failures or findings.\n"


# -- the catalogue as data ---------------------------------------------------------------------
def test_catalogue_covers_every_class_and_every_fix_list_has_a_fallback() -> None:
    triggered = {s.failure_class for s in SIGNATURES if s.kind is Kind.FATAL}
    assert triggered == ROOT_CAUSES  # server_start_timeout: the engine's watchdog
    for signature in SIGNATURES:
        fill_fix(signature.fixes, {})  # raises if no template is field-free
    ranks = [s.rank for s in SIGNATURES if s.kind is not Kind.FINDING]
    assert len(ranks) == len(set(ranks))


def test_benchmark_log_generator_yields_the_planted_failure(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_diagnose", FIXTURES.parent.parent / "benchmarks" / "bench_diagnose.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path / "bench.log"
    bench.generate(path, 3 << 20)
    diagnosis: Diagnosis = diagnose_file(path)
    assert diagnosis.failure_class == "cuda_illegal_instruction"
    assert diagnosis.summary is not None and diagnosis.summary.is_ready and diagnosis.summary.decode_lines > 10_000


def test_port_in_use_reads_the_port_from_uvicorns_bind_line() -> None:
    diagnosis = diagnose_file(FIXTURES / "logs" / "port-in-use-uvicorn.log")
    assert diagnosis.failure_class == "port_in_use"
    assert diagnosis.figures["port"] == "30000"
    assert "Port 30000 is taken" in (diagnosis.fix or "")


def test_a_sweep_folder_reads_failures_from_run_results_only(tmp_path: Path) -> None:
    # What a sweep folder holds beside its results: facts that mention a missing torch (a sim
    # host), a plan whose notes speak of KV pools, an ok run. None of them is a failure.
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "ct200.facts.json").write_text(json.dumps({"engine": {"error": "ModuleNotFoundError: No module named 'torch'"}}))
    (tmp_path / "plan.json").write_text(json.dumps({"notes": ["tp1-ddtree-b32 fits: KV pool 1155 tokens; KV cache pool is too small"]}))
    runs = tmp_path / "ct200" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(LOGS / "sweep" / "tp1-linear-fib" / "result.json", runs / "ok.json")
    assert diagnose_paths([tmp_path]) == []
    shutil.copy(LOGS / "sweep" / "tp1-b12-timeout" / "result.json", runs / "timeout.json")
    assert [d.failure_class for d in diagnose_paths([tmp_path])] == ["server_start_timeout"]


# -- the new signatures, on lines a healthy server prints and on other spellings of their source ---
@pytest.mark.parametrize(
    "line",
    [
        "[2026-05-23 10:12:32 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=11.80 GB",
        "[2026-05-23 10:12:44 TP0] Capture cuda graph end. Time elapsed: 11.93 s. mem usage=0.61 GB. avail mem=11.19 GB.",
        "[2026-05-24 09:00:41] max_total_tokens=65536 is larger than the profiled value 50000. Use the profiled value instead.",
        "ptxas info    : Used 32 registers, 384 bytes cmem[0]",
        "[2026-05-24 09:00:41] Xid-aware health checks are off",
    ],
)
def test_new_signatures_stay_quiet_on_healthy_lines(line: str) -> None:
    ready = "[2026-05-24 11:00:01] The server is fired up and ready to roll!"
    assert diagnose_text([line, ready]).failure_class is None


@pytest.mark.parametrize(
    ("line", "failure_class"),
    [
        # prefill_cuda_graph_runner.py:521 (0.5.23), frozen_kv_mtp_cuda_graph_runner.py:198
        ("Exception: Capture prefill CUDA graph failed: Expected all tensors to be on the same device", "cuda_graph_error"),
        ("RuntimeError: Capture frozen-KV MTP cuda graph failed: shape mismatch", "cuda_graph_error"),
        # cudaErrorStreamCaptureInvalidated's string, with no SGLang wrapper around it
        ("RuntimeError: CUDA error: operation failed due to a previous error during capture", "cuda_graph_error"),
        # a capture wrapper around a cause: the cause
        ("Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered", "cuda_illegal_memory_access"),
        ("[Mon May 24 08:15:00 2026] NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "unknown"),
        ("RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution", "unknown"),
        ("ptxas error   : Feature '.NaN' requires .target sm_80 or higher", "unsupported_gpu_arch"),
        ("ValueError: type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')", "unsupported_gpu_arch"),
        ("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:", "model_load_error"),
    ],
)
def test_new_signatures_on_other_spellings_of_their_source(line: str, failure_class: str) -> None:
    assert diagnose_text([line]).failure_class == failure_class


def test_the_constructed_fixtures_manifest_is_right() -> None:
    # The confusion script's input for tests/fixtures/logs; every entry must be diagnosed as labelled.
    spec = importlib.util.spec_from_file_location("diagnose_confusion", FIXTURES.parent.parent / "benchmarks" / "diagnose_confusion.py")
    assert spec is not None and spec.loader is not None
    confusion = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(confusion)
    entries = confusion.read_manifest(LOGS / "manifest.jsonl")
    assert len(entries) >= 25
    for path, label, _engine in entries:
        hint = DiagnosisHint(server_start_timed_out=True) if label == "server_start_timeout" else None
        assert (diagnose_file(path, hint).failure_class or "healthy") == label, path.name


def test_a_cuda_oom_states_the_size_it_tried_to_allocate() -> None:
    """PyTorch's OOM text (c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to allocate
    %s"): the size is a figure and, with the launch's memory fraction, in the advice. (The pattern's
    optional group once matched empty at the line's start, and the size was never read.)"""
    from fleet.host.diagnose import diagnose_text

    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free."
    assert diagnose_text([line]).figures.get("tried") == "2.00 GiB"
    args = "[2026-05-23 09:10:42] server_args=ServerArgs(model_path='/m', mem_fraction_static=0.88, tp_size=1)"
    diagnosis = diagnose_text([args, line])
    assert diagnosis.failure_class == "cuda_oom" and "tried to allocate 2.00 GiB, mem_fraction_static=0.88" in (diagnosis.fix or ""), diagnosis.fix
    assert "tried" not in diagnose_text(["RuntimeError: CUDA out of memory."]).figures
