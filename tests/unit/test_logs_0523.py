"""0.5.23's log lines, from the wheel's own source: the format table matches the installed wheel, and
the parser and `fleet diagnose` read logs written with those formats -- two restarts in one file and
a crash after a restart included.

The table check reads the source files of the installed `sglang==0.5.23` (no import: finding the
package's folder runs none of its code) at the file and line each entry cites, and compares the
f-string there with the entry's template: the same literal text, the same fields in the same places,
the same format specs and conversions. A drift in SGLang fails here, not in a parser on a host.
`FLEET_SGLANG_SOURCES=DIR` (a folder holding another release's unpacked `sglang/`, e.g. from
`pip download --no-deps sglang==0.5.12`) checks that release's entry the same way.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path
from string import Formatter

import pytest

from fleet.host.diagnose.classify import diagnose_file, diagnose_text
from fleet.host.engines.sglang import logparse
from fleet.host.engines.sglang.logformats import LOG_FORMATS, SGLANG_0_5_12, SGLANG_0_5_23, LogFormat, LogFormats
from fleet.host.engines.sim import sgltext

Shape = list[tuple[str, ...]]


def installed_sglang() -> Path | None:
    spec = importlib.util.find_spec("sglang")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def package_version(root: Path) -> str | None:
    version = root / "_version.py"
    found = re.search(r"__version__ = version = '([^']+)'", version.read_text()) if version.is_file() else None
    return found.group(1) if found else None


def _merge(tokens: Shape) -> Shape:
    merged: Shape = []
    for token in tokens:
        if token[0] == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + token[1])
        elif token != ("lit", ""):
            merged.append(token)
    return merged


def template_shape(template: str) -> Shape:
    tokens: Shape = []
    for literal, name, spec, conversion in Formatter().parse(template):
        tokens.append(("lit", literal))
        if name is not None:
            tokens.append(("field", spec or "", conversion or ""))
    return _merge(tokens)


_CONVERSIONS = {-1: "", ord("r"): "r", ord("s"): "s", ord("a"): "a"}


def _string_shape(node: ast.expr) -> Shape:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        # A %-style format (logging.basicConfig's): each %(name)s is a field.
        parts = re.split(r"%\((\w+)\)s", node.value)
        tokens: Shape = []
        for index, part in enumerate(parts):
            tokens.append(("lit", part) if index % 2 == 0 else ("field", "", ""))
        return _merge(tokens)
    assert isinstance(node, ast.JoinedStr)
    tokens = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            tokens.append(("lit", str(value.value)))
        else:
            assert isinstance(value, ast.FormattedValue)
            spec_node = value.format_spec
            spec = "".join(str(p.value) for p in spec_node.values if isinstance(p, ast.Constant)) if isinstance(spec_node, ast.JoinedStr) else ""
            tokens.append(("field", spec, _CONVERSIONS[value.conversion]))
    return _merge(tokens)


@lru_cache(maxsize=None)
def _parsed(file: Path) -> tuple[str, ast.Module]:
    text = file.read_text()
    return text, ast.parse(text)


def source_shape(root: Path, source: str) -> tuple[Shape, str]:
    """The shape of the string literal (f-string or plain) that starts or runs through `file:line`,
    the outermost one there, and its text as written (for the failure message)."""
    path, _, line_text = source.rpartition(":")
    line = int(line_text)
    file = root / path
    text, tree = _parsed(file)
    candidates = [
        node
        for node in ast.walk(tree)
        if (isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))) and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    assert candidates, f"{file}:{line}: no string literal on that line"
    outer = max(candidates, key=lambda n: ((n.end_lineno or 0) - n.lineno, (n.end_col_offset or 0) - n.col_offset, isinstance(n, ast.JoinedStr)))
    return _string_shape(outer), ast.get_source_segment(text, outer) or ""


def check_against_source(root: Path, formats: LogFormats) -> None:
    checked = 0
    for fmt in formats.all_formats():
        shape, written = source_shape(root, fmt.source)
        assert template_shape(fmt.template) == shape, f"SGLang {formats.release} {fmt.source} writes\n  {written}\nbut logformats has\n  {fmt.template!r}"
        checked += 1
    launch = (root / "launch_server.py").read_text().splitlines()
    assert launch[formats.launch_warning_line - 1].strip() == "warnings.warn(", f"launch_server.py:{formats.launch_warning_line}"
    assert checked >= 15


WHEEL = installed_sglang()


@pytest.mark.sglang_parser
@pytest.mark.skipif(WHEEL is None, reason="sglang is not installed (pip install --no-deps sglang==0.5.23)")
def test_0523_formats_are_the_installed_wheels() -> None:
    assert WHEEL is not None
    version = package_version(WHEEL)
    assert version == SGLANG_0_5_23.release, f"installed sglang is {version}, the table's entry is {SGLANG_0_5_23.release}"
    check_against_source(WHEEL, SGLANG_0_5_23)


def test_the_source_check_fails_on_a_drifted_template(tmp_path: Path) -> None:
    """The comparison is strict: another literal, a missing field or another spec fail it."""
    source = tmp_path / "srt" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text('logger.info(\n    f"Init parallel ends. "\n    f"elapsed={time.perf_counter() - tic:.2f} s"\n)\n')
    good = LogFormat("Init parallel ends. elapsed={elapsed:.2f} s", "srt/x.py:2")
    assert template_shape(good.template) == source_shape(tmp_path, good.source)[0]
    for drifted in (
        "Init parallel ended. elapsed={elapsed:.2f} s",
        "Init parallel ends. elapsed={elapsed} s",
        "Init parallel ends.",
        "Init parallel ends. elapsed={elapsed:.2f} s, mem usage={m:.2f} GB",
    ):
        assert template_shape(drifted) != source_shape(tmp_path, good.source)[0], drifted


@pytest.mark.skipif(not os.environ.get("FLEET_SGLANG_SOURCES"), reason="FLEET_SGLANG_SOURCES not set (another release's unpacked wheel)")
def test_other_release_formats_match_their_sources() -> None:
    root = Path(os.environ["FLEET_SGLANG_SOURCES"]) / "sglang"
    version = package_version(root)
    assert version in LOG_FORMATS, f"{root}: sglang {version} has no table entry"
    check_against_source(root, LOG_FORMATS[version])


# --- logs written with 0.5.23's formats ---------------------------------------------------------

F = SGLANG_0_5_23
GB_W, GB_K = 25.52, 13.83


def stamp(second: int, rank: str = "") -> str:
    return f"[2026-06-01 10:{second // 60:02d}:{second % 60:02d}{rank}] "


def start_lines(t: int, tp: int, kv_tokens: int, max_running: int, mem_fraction: float) -> list[str]:
    """One 0.5.23 start up to the scheduler's line: pre-logging warning, server_args dict, per-rank
    startup in 0.5.23's order."""
    ranks = [f" TP{r}" for r in range(tp)] if tp > 1 else [""]
    args = {
        "model_path": "/dev/shm/fleet/Qwen3.6-27B",
        "tp_size": tp,
        "mem_fraction_static": mem_fraction,
        "max_running_requests": max_running,
        "context_length": 32768,
        "cuda_graph_bs": [1, 2, 4],
        "api_key": None,
        "mamba": {"strategy": "extra_buffer", "ratio": 5},
    }
    lines = [
        stamp(t) + F.pre_logging.format(asctime="x", message="Overlap scheduler stays on.").split("] ", 1)[1],
        stamp(t) + F.server_args.format(server_args=args),
        stamp(t) + F.attention_default.format(backend="flashinfer"),
    ]

    def each(message: str) -> None:
        lines.extend(stamp(t, rank) + message for rank in ranks)

    each(F.init_begin.format())
    each(F.init_end.format(elapsed=2.31))
    assert F.memory_baseline is not None
    each(F.memory_baseline.format(mem_usage=0.38))
    each(F.load_weight_begin.format(avail=94.24))
    each(F.load_weight_end.format(elapsed=41.5, model_class="Qwen3_5ForConditionalGeneration", avail=68.72, usage=GB_W))
    each(F.mamba_cache_spec.format(size=4, conv=0.01, ssm=0.29, issm=0.38, iconv=0.01))
    each(F.kv_cache.format(dtype="torch.bfloat16", tokens=kv_tokens, k=GB_K, v=GB_K))
    each(F.memory_pool_end.format(avail=29.29))
    each(F.capture_begin.format(capture_name="target verify", backend="full", num_tokens_per_req=16, avail=28.89))
    each(F.capture_end.format(capture_name="target verify", bs=[1, 2, 4], elapsed=3.1, usage=0.35, avail=28.54))
    lines.append(stamp(t, ranks[0]) + F.scheduler_ready.format(max_total=kv_tokens, chunked=8192, max_prefill=16384, max_running=max_running, context_len=32768, avail=28.54))
    return lines


def serving(t: int, rank: str) -> list[str]:
    prefill = sgltext.prefill_batch(1, 512, 0, "full token usage: 0.01, mamba usage: 0.25, ", 0, 0, 0, False, 1234.5)
    decode = sgltext.decode_batch(1, "#full token: 600, full token usage: 0.01, mamba num: 1, mamba usage: 0.25, ", (3.2, 0.15), True, 88.4, 0)
    return [stamp(t, rank) + prefill, stamp(t + 1, rank) + decode, stamp(t + 2, rank) + decode]


def ready(t: int) -> list[str]:
    return [stamp(t) + line for line in sgltext.uvicorn_startup(4242)] + [stamp(t) + sgltext.uvicorn_running("127.0.0.1", 30011), stamp(t + 1) + F.ready.format()]


def three_starts() -> tuple[list[str], dict[str, int]]:
    """Start 1 serves and is stopped; start 2 (a restart at TP2) dies in its scheduler's init;
    start 3 (TP1) serves, then crashes on an illegal instruction."""
    lines = start_lines(0, 1, 906237, 48, 0.85) + ready(60) + serving(62, "")
    lines += [stamp(70) + line for line in sgltext.uvicorn_shutdown()]
    marks = {"start2": len(lines) + 2}
    # TpModelWorker.alloc_memory_pool asserts right after the pools (tp_worker.py:420), before any graph.
    second = start_lines(100, 2, 11893, 8, 0.75)
    lines += second[: next(i for i, line in enumerate(second) if "] Capture " in line)]
    failure = sgltext.init_failure_traceback("scheduler_init", "AssertionError", "max_running_request is zero")
    lines += [stamp(130, " TP0") + "Scheduler hit an exception: " + failure[0], *failure[1:]]
    lines.append(stamp(130) + sgltext.SIGQUIT_LAUNCH)
    marks["start3"] = len(lines) + 2
    lines += start_lines(200, 1, 50123, 4, 0.8) + ready(260) + serving(262, "")
    marks["crash"] = len(lines) + 1
    crash = sgltext.runtime_crash_traceback("DFLASH", "illegal_instruction")
    lines += [stamp(270) + "Scheduler hit an exception: " + crash[0], *crash[1:]]
    lines.append(stamp(270) + sgltext.sigquit_running("<frame at 0x7f, file 'http_server.py', line 1, code x>"))
    return lines, marks


def journald(lines: list[str]) -> list[str]:
    return [f"2026-06-01T10:00:00+0000 ct200 python[61613]: {line}" for line in lines]


@pytest.mark.parametrize("wrap", [list, journald], ids=["plain", "journald"])
def test_parser_counts_each_0523_start_and_summarises_the_last(wrap) -> None:
    lines, marks = three_starts()
    summary = logparse.parse_log(wrap(lines))
    assert summary.starts == 3
    assert summary.server_args is not None and summary.server_args.line_no == marks["start3"]
    assert summary.server_args.args["tp_size"] == "1" and summary.server_args.args["model_path"] == "'/dev/shm/fleet/Qwen3.6-27B'"
    assert summary.server_args.number("mem_fraction_static") == 0.8
    assert summary.server_args.args["mamba"] == "{'strategy': 'extra_buffer', 'ratio': 5}"
    assert summary.kv_cache is not None and summary.kv_cache.tokens == 50123 and summary.kv_cache.dtype == "torch.bfloat16"
    assert summary.mamba_cache is not None and summary.mamba_cache.intermediate_ssm_state_gb == 0.38
    assert summary.weights_loaded is not None and summary.weights_loaded.mem_usage_gb == GB_W
    assert summary.scheduler is not None and summary.scheduler.max_total_num_tokens == 50123
    assert summary.ready is not None and summary.ready.line_no > marks["start3"]
    assert summary.last_phase is not None and summary.last_phase.phase == "cuda_graph_end"
    assert summary.last_decode is not None and summary.last_decode.accept_len == 3.2


def test_parser_reads_every_0523_startup_step() -> None:
    phases = [e.phase for e in map(logparse.parse_line, start_lines(0, 1, 100, 4, 0.8)) if isinstance(e, logparse.StartupPhase)]
    assert phases == ["init_distributed_begin", "init_distributed_end", "init_distributed_end", "load_weight_begin", "memory_pool_end", "cuda_graph_begin", "cuda_graph_end"]
    draft = F.capture_begin.format(capture_name="draft decode", backend="full", num_tokens_per_req=1, avail=3.0)
    prefill = F.other_phases[0][1].format(capture_name="target prefill", backend="full", num_tokens=[8], avail=3.0)
    assert [logparse.parse_line(stamp(0) + line).phase for line in (draft, prefill)] == [  # type: ignore[union-attr]
        "draft_cuda_graph_begin",
        "piecewise_cuda_graph_begin",
    ]


@pytest.mark.parametrize("wrap", [list, journald], ids=["plain", "journald"])
def test_diagnose_finds_the_crash_after_the_restarts(wrap, tmp_path: Path) -> None:
    lines, marks = three_starts()
    path = tmp_path / "server.log"
    path.write_text("\n".join(wrap(lines)) + "\n")
    for diagnosis in (diagnose_text(wrap(lines)), diagnose_file(path)):
        assert diagnosis.summary is not None and diagnosis.summary.starts == 3
        assert diagnosis.failure_class == "cuda_illegal_instruction"
        assert diagnosis.evidence and all(item.line >= marks["crash"] for item in diagnosis.evidence)
        assert "an illegal instruction was encountered" in diagnosis.evidence[0].text
        earlier = [f for f in diagnosis.findings if f.name == "earlier_start_failed"]
        assert len(earlier) == 1 and marks["start2"] < earlier[0].line < marks["start3"]
        assert "max_running_request is zero" in earlier[0].text
        assert diagnosis.figures["kv_tokens"] == 50123  # the last start's pool, not the first's


def test_a_0523_start_that_dies_is_diagnosed_with_its_own_figures() -> None:
    lines, marks = three_starts()
    diagnosis = diagnose_text(lines[: marks["start3"] - 2])
    assert diagnosis.summary is not None and diagnosis.summary.starts == 2
    assert diagnosis.failure_class == "max_running_requests_zero"
    assert diagnosis.figures["kv_tokens"] == 11893 and diagnosis.figures["last_phase"] == "about to capture CUDA graphs"
    # The fix speaks of this start's figures, read from its 0.5.23 lines (KV and mamba pools, the dict).
    assert "the KV pool got 11893 tokens and the mamba state cache 4 slots (context_len=32768)" in (diagnosis.fix or "")
    assert "it was 8" in (diagnosis.fix or "") and "(now 0.75)" in (diagnosis.fix or "")


@pytest.mark.parametrize("formats", [SGLANG_0_5_12, SGLANG_0_5_23], ids=lambda f: f.release)
def test_every_release_line_parses_to_its_figures(formats: LogFormats) -> None:
    """The lines the table formats, for either release, come back with the figures put in."""
    kv = logparse.parse_line(stamp(0) + formats.kv_cache.format(dtype="torch.float8_e4m3fn", tokens=777, k=1.25, v=1.5))
    assert isinstance(kv, logparse.KVCacheAllocated) and (kv.tokens, kv.k_gb, kv.v_gb) == (777, 1.25, 1.5)
    assert kv.dtype == ("torch.float8_e4m3fn" if "{dtype}" in formats.kv_cache.template else None)
    weights = logparse.parse_line(stamp(0) + formats.load_weight_end.format(elapsed=3.5, model_class="M", avail=9.5, usage=7.25))
    assert isinstance(weights, logparse.WeightsLoaded) and (weights.elapsed_s, weights.model_class, weights.avail_mem_gb, weights.mem_usage_gb) == (3.5, "M", 9.5, 7.25)
    mamba = logparse.parse_line(stamp(0) + formats.mamba_cache.format(size=24, conv=0.5, ssm=1.5))
    assert isinstance(mamba, logparse.MambaCacheAllocated) and mamba.max_mamba_cache_size == 24 and mamba.intermediate_ssm_state_gb is None
    sched = logparse.parse_line(stamp(0) + formats.scheduler_ready.format(max_total=11893, chunked=2048, max_prefill=16384, max_running=4, context_len=32768, avail=9.99))
    assert isinstance(sched, logparse.SchedulerReady) and (sched.max_total_num_tokens, sched.available_gpu_mem_gb) == (11893, 9.99)
    args = logparse.parse_line(stamp(0) + formats.server_args.format(server_args={"tp_size": 2} if formats.server_args_shape.opening == "{" else sgltext._Repr("ServerArgs(tp_size=2)")))
    assert isinstance(args, logparse.ServerArgsLogged) and args.args == {"tp_size": "2"}
    assert isinstance(logparse.parse_line(stamp(0) + formats.ready.format()), logparse.ServerReady)
    # A pre-logging warning is a timestamped line of its own, not a start.
    warning = logparse.parse_line(formats.pre_logging.format(asctime="2026-06-01 10:00:00", message="server_args look odd"))
    assert isinstance(warning, logparse.Other) and warning.timestamp is not None


# Failure texts the catalogue keys on, and the 0.5.23 source file that prints each (read in the wheel).
FATAL_TEXTS_0523 = {
    "max_running_request is zero": "srt/managers/tp_worker.py",
    "Memory pool size is too small": "srt/managers/tp_worker.py",
    "Please try to increase --mem-fraction-static": "srt/model_executor/pool_configurator.py",
    "Not enough GPU memory for hybrid": "srt/mem_cache/kv_cache_configurator.py",
    "state cache is too small to serve any requests": "srt/mem_cache/kv_cache_configurator.py",
    "Loaded weights leave no GPU memory for the KV cache": "srt/mem_cache/kv_cache_configurator.py",
    "Capture cuda graph failed": "srt/model_executor/runner/decode_cuda_graph_runner.py",
    "Capture prefill CUDA graph failed": "srt/model_executor/runner/prefill_cuda_graph_runner.py",
    "exceeds the model's maximum context length": "srt/managers/tokenizer_manager.py",
    "To allow overriding this maximum": "srt/configs/model_config.py",
    "Scheduler hit an exception": "srt/managers/scheduler.py",
    "Received sigquit from a child process": "srt/entrypoints/engine.py",
    "scheduler died during initialization": "srt/entrypoints/engine.py",
    "max_running_requests was reduced": "srt/mem_cache/kv_cache_configurator.py",
    "max_running_requests is capped to": "srt/mem_cache/kv_cache_configurator.py",
    "The memory capacity is unbalanced": "srt/distributed/bootstrap.py",
    "KV cache pool is full. Retract requests": "srt/managers/scheduler.py",
}


@pytest.mark.sglang_parser
@pytest.mark.skipif(WHEEL is None, reason="sglang is not installed (pip install --no-deps sglang==0.5.23)")
def test_catalogue_failure_texts_are_printed_by_0523() -> None:
    from fleet.host.diagnose.catalogue import SIGNATURES

    assert WHEEL is not None
    literals = {trigger.literal for signature in SIGNATURES for trigger in signature.triggers}
    for text, path in FATAL_TEXTS_0523.items():
        assert any(literal in text for literal in literals), f"the catalogue has no trigger for {text!r}"
        assert any(text in printed for printed in printed_texts(WHEEL / path)), f"sglang 0.5.23 {path} no longer prints {text!r}"


def printed_texts(path: Path) -> list[str]:
    """The literal text of every string a source file builds (implicitly joined f-string parts as
    one; a field as a NUL): what its messages can contain, however the source splits them."""
    texts = []
    for node in ast.walk(_parsed(path)[1]):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(str(v.value) if isinstance(v, ast.Constant) else "\0" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
    return texts


def test_a_0523_prefill_graph_capture_failure_gets_the_capture_fix() -> None:
    lines = start_lines(0, 1, 1000, 4, 0.8)[:-3] + [
        stamp(9) + F.other_phases[0][1].format(capture_name="target prefill", backend="full", num_tokens=[512], avail=2.0),
        stamp(9) + "Scheduler hit an exception: Traceback (most recent call last):",
        "Exception: Capture prefill CUDA graph failed: an unexpected error",
        stamp(9) + sgltext.SIGQUIT_LAUNCH,
    ]
    diagnosis = diagnose_text(lines)
    assert diagnosis.failure_class == "cuda_graph_error" and (diagnosis.fix or "").startswith("CUDA graph capture failed")
    assert diagnosis.figures["last_phase"] == "capturing piecewise CUDA graphs"


def test_a_server_args_line_cut_short_still_starts_a_server() -> None:
    line = stamp(0) + F.server_args.format(server_args={"model_path": "/m", "tp_size": 8, "mem_fraction_static": 0.85})
    cut = line[: line.index("'mem_fraction_static'") + 10]
    for text in (line, cut):
        event = logparse.parse_line(text)
        assert isinstance(event, logparse.ServerArgsLogged) and event.args["tp_size"] == "8"
    assert logparse.parse_log([line, cut, line]).starts == 3
    assert isinstance(logparse.parse_line(stamp(0) + "server_args=nothing like a repr"), logparse.Other)


def test_the_agents_log_watch_reads_a_0523_start() -> None:
    """The agent follows its own start (from the offset the log had): the scheduler's figures, then
    the crash as the decisive fatal line."""
    from fleet.host.agent.logwatch import LogScan

    lines, marks = three_starts()
    scan = LogScan()
    for line in lines[marks["start3"] - 2 :]:
        scan.feed(line)
    assert scan.scheduler is not None and scan.scheduler.max_total_num_tokens == 50123
    assert scan.fatal_marker == "process_failed" and "Scheduler hit an exception" in (scan.fatal_line or "")
    assert any("an illegal instruction was encountered" in line for line in scan.evidence())


@pytest.mark.sglang_parser
@pytest.mark.skipif(WHEEL is None, reason="sglang is not installed (pip install --no-deps sglang==0.5.23)")
def test_the_sims_0523_traceback_frames_are_the_wheels() -> None:
    assert WHEEL is not None
    for phase, frames in sgltext.INIT_FAILURE_FRAMES_BY_RELEASE["0.5.23"].items():
        for file, line, function, source in frames:
            path = WHEEL / file.split("/sglang/", 1)[1]
            text, tree = _parsed(path)
            assert text.splitlines()[line - 1].strip() == source, f"{phase}: {path}:{line}"
            assert any(isinstance(n, ast.FunctionDef) and n.name == function and n.lineno <= line <= (n.end_lineno or 0) for n in ast.walk(tree)), f"{phase}: {path}:{line} is not in {function}"
