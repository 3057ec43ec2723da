"""A log reads the same however it was carried (issue 27, round twenty-one).

The carriers a real log passes through (container runtimes, journald, Ray, job launchers, CI consoles,
terminals, Markdown) put their own text before each line; `fleet diagnose` removes it before any rule
reads the line (fleet/host/diagnose/carriers.py). Here: each carrier on lines built from the format its
tool prints, then every wrapper of benchmarks/diagnose_wrappers.py on a fixed subset of labelled logs,
chosen by their manifest fields (label, engine, notes) and size, never by name: class and first evidence
line must not change. The whole corpus under every wrapper is the benchmark's
(`python benchmarks/diagnose_wrappers.py`).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fleet.host.diagnose.carriers import code_block_indent, cri_partial, strip_carriers
from fleet.host.diagnose.classify import diagnose_file, diagnose_text, signatures_in

ROOT = Path(__file__).resolve().parents[2]


def _wrappers_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("diagnose_wrappers", ROOT / "benchmarks" / "diagnose_wrappers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["diagnose_wrappers"] = module
    spec.loader.exec_module(module)
    return module


W = _wrappers_module()

# Each carrier's text as its tool prints it (see carriers.py for the sources).
CARRIERS = [
    ("docker compose logs", "vllm-1        | "),
    ("docker compose logs, coloured", "\x1b[36msglang-1      |\x1b[0m "),
    ("docker compose logs -t", "vllm-1        | 2025-07-25T07:53:08.217487123Z "),
    ("docker logs -t", "2025-07-25T07:53:08.217487123Z "),
    ("kubectl logs --timestamps", "2025-07-25T07:53:08.21748Z "),
    ("kubelet CRI log file", "2025-07-25T07:53:08.217487080+08:00 stdout F "),
    ("kubelet CRI log file, stderr", "2025-07-25T07:53:08.217487080Z stderr F "),
    ("journalctl -o short-iso", "2025-01-02T03:04:05+0000 gpu-node-3 sglang[123]: "),
    ("journalctl -o short", "Jan 02 03:04:05 gpu-node-3 sglang[123]: "),
    ("Ray task", "\x1b[36m(pid=952)\x1b[0m "),
    ("Ray actor on another node", "\x1b[36m(RayWorkerWrapper pid=952, ip=10.0.0.1)\x1b[0m "),
    ("Ray SGLang actor", "(SGLangEngine pid=952, ip=10.0.0.1) "),
    ("Ray Serve replica", "(ServeReplica:default:VLLMDeployment pid=952, ip=10.0.0.1) "),
    ("kubectl around Ray", "2025-07-25T07:53:08.217487Z (pid=952) "),
    ("kubectl logs --prefix", "[pod/vllm-0/vllm] "),
    ("torchrun --tee", "[default0]:"),
    ("srun --label", "0: "),
    ("srun --label, ten tasks or more", " 3: "),
    ("mpirun --tag-output", "[1,0]<stdout>:"),
    ("mpirun --tag-output --timestamp-output", "Thu Jan 23 11:55:50 2025[1,1]<stderr>:"),
    ("Buildkite web log", "  | "),
    ("buildkite-agent --timestamp-lines", "[2025-07-25T07:53:08Z] "),
    ("GitHub Actions raw log", "2025-01-02T03:04:05.1234567Z "),
    ("ts", "Jul 25 07:53:08 "),
    ("ts %.S", "Jul 25 07:53:08.217487 "),
    ("ts ISO", "2025-07-25 07:53:08.217487 "),
    ("Markdown quote", "> "),
]
CARRIER_IDS = [name for name, _ in CARRIERS]

# Lines whose own leading text matters to the rules: a frame's two spaces, a quoted source line's four,
# SGLang's and vLLM's own prefixes, an exception line.
LINES = [
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 1787, in run_scheduler_process',
    '    raise RuntimeError(f"Not enough memory. {mem_fraction_static=}")',
    "[2025-01-23 11:55:50 TP0] Load weight begin. avail mem=94.07 GB",
    "INFO 07-25 07:53:08 [gpu_worker.py:298] Available KV cache memory: -2.77 GiB",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "",
]

OOM_LOG = [
    "[2025-01-23 11:55:40] server_args=ServerArgs(model_path='m', tp_size=1, port=30000)",
    "[2025-01-23 11:55:45 TP0] Load weight begin. avail mem=94.07 GB",
    "[2025-01-23 11:55:50 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 1787, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/memory.py", line 12, in empty',
    "    raise torch.OutOfMemoryError(msg)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB",
]
STALLED_LOG = [
    "INFO 07-25 07:53:01 [__init__.py:235] Automatically detected platform cuda.",
    "INFO 07-25 07:53:04 [core.py:69] Initializing a V1 LLM engine (v0.10.0) with config: model='m'",
    "INFO 07-25 07:53:09 [gpu_model_runner.py:1770] Starting to load model m...",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:10<00:10, 10.00s/it]",
]
FRAMES_ONLY = [
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 254, in _initialize_kv_caches',
    "    kv_cache_configs = get_kv_cache_configs(",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 616, in _check_enough_kv_cache_memory',
    "    raise ValueError(",
]


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize(("tool", "prefix"), CARRIERS, ids=CARRIER_IDS)
def test_a_carriers_text_is_all_that_is_removed(tool: str, prefix: str, line: str) -> None:
    assert strip_carriers((prefix + line).encode()) == line.encode(), tool


@pytest.mark.parametrize("log", [OOM_LOG, STALLED_LOG, FRAMES_ONLY], ids=["oom", "stalled", "frames-only"])
@pytest.mark.parametrize(("tool", "prefix"), CARRIERS, ids=CARRIER_IDS)
def test_a_carried_log_keeps_its_class_and_evidence_line(tool: str, prefix: str, log: list[str]) -> None:
    bare = diagnose_text(log)
    carried = diagnose_text([prefix + line for line in log])
    assert (carried.failure_class, carried.evidence[0].line) == (bare.failure_class, bare.evidence[0].line), tool
    # The evidence shows the line as the log has it, the carrier's text included (a user searches the file for it).
    assert W.clean_line(carried.evidence[0].text).endswith(bare.evidence[0].text.strip()), (tool, carried.evidence[0].text)


@pytest.mark.parametrize(("tool", "prefix"), CARRIERS, ids=CARRIER_IDS)
def test_the_agents_fail_fast_reads_a_carried_line_as_the_bare_one(tool: str, prefix: str) -> None:
    line = "[2025-01-23 11:55:50 TP0] Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert [signature.name for signature in signatures_in(prefix + line)] == [signature.name for signature in signatures_in(line)]


def test_vllms_own_process_tag_takes_its_spaces_as_the_vllm_log_module_does() -> None:
    # A line under vLLM's tag has always read as a message (vllm logparse PROCESS_TAG takes the spaces after it),
    # Ray's tags of a remote actor or a task keep the line's own indentation.
    assert strip_carriers(b"(EngineCore_DP0 pid=6804)     kv_cache_configs = get_kv_cache_configs(") == b"kv_cache_configs = get_kv_cache_configs("
    assert strip_carriers(b"(VllmWorker rank=0 pid=2699411)   File x") == b"File x"
    assert strip_carriers(b"(pid=952)     raise ValueError(") == b"    raise ValueError("


@pytest.mark.parametrize(
    "line",
    [
        # Not carriers: the logging module's and FastChat's lines keep their level for the classifier's own rules,
        # a stamp before "vllm: error: ..." is no journald host and unit (journald's lines carry the pid).
        "2025-03-07 23:50:27,531 - __main__ - WARNING - something",
        "2025-03-07 23:50:27 - __main__ - INFO - something",
        "2024-02-20 21:46:23 | ERROR | stderr | ValueError: x",
        "vllm: error: unrecognized arguments: --omni",
        "Traceback (most recent call last):",
        "ValueError: x: y",
        "| Model | tok/s |",
    ],
)
def test_what_is_no_carrier_stays(line: str) -> None:
    assert strip_carriers(line.encode()) == line.encode()
    assert strip_carriers(("2025-07-25T07:53:08.217487123Z " + line).encode()) == line.encode()


def test_the_ansi_colours_of_a_terminal_go_anywhere_on_the_line() -> None:
    assert strip_carriers(b"\x1b[1;31mERROR\x1b[0m 07-25 07:53:08 [core.py:1] x\x1b[0m") == b"ERROR 07-25 07:53:08 [core.py:1] x"


def test_ansi_colours_written_as_text_go_too() -> None:
    # GitHub's log view and terminal copy tools render the escape character as "ESC" (or "^[", caret notation).
    assert strip_carriers(b"ESC[1;36m(VllmWorkerProcess pid=62)ESC[0;0m ERROR 12-26 16:20:28 x.py:1] y") == b"ERROR 12-26 16:20:28 x.py:1] y"
    assert strip_carriers(b"^[[1;31mERROR^[[0m x") == b"ERROR x"
    assert strip_carriers(b"ESCAPE [1;31m and ESC[K stay") == b"ESCAPE [1;31m and ESC[K stay"


def test_kubelets_partial_lines_are_read_as_the_line_they_split() -> None:
    stamp = "2025-07-25T07:53:08.217487080+08:00 stderr "
    assert cri_partial((stamp + "P torch.OutOfMemoryError: CUDA out").encode()) == b"torch.OutOfMemoryError: CUDA out"
    assert cri_partial((stamp + "F of memory.").encode()) is None
    log = [*OOM_LOG[:-1], stamp + "P " + OOM_LOG[-1][:20], stamp + "P " + OOM_LOG[-1][20:50], stamp + "F " + OOM_LOG[-1][50:]]
    carried = diagnose_text(log)
    bare = diagnose_text(OOM_LOG)
    assert carried.failure_class == bare.failure_class == "cuda_oom"
    assert carried.evidence[0].text == bare.evidence[0].text and carried.evidence[0].line == len(log)


def test_a_log_pasted_as_a_code_block_is_read_without_the_indent() -> None:
    assert code_block_indent("\n".join("    " + line for line in OOM_LOG).encode())
    assert code_block_indent(b"    [2026-06-28 15:16:45] max_total_num_tokens=2086558\n")
    # A bare log that begins inside a traceback (frames at two spaces) is no code block.
    assert not code_block_indent("\n".join(FRAMES_ONLY).encode())
    assert not code_block_indent(b"    raise ValueError(\n  File x\n")
    indented = diagnose_text(["    " + line for line in FRAMES_ONLY])
    bare = diagnose_text(FRAMES_ONLY)
    assert (indented.failure_class, indented.evidence[0].line) == (bare.failure_class, bare.evidence[0].line)


# -- labelled logs ---------------------------------------------------------------------------------
SIZE_LIMIT = 16 << 10  # small logs: the subset under every wrapper stays within seconds


def _subset() -> list[Any]:
    """Per label and engine (both engines, every class) the smallest labelled log and the largest under
    SIZE_LIMIT; then per engine the smallest logs whose notes say the log is cut, and those whose notes say
    it holds only frames. Chosen by manifest fields and size, never by a file's name."""
    by_key: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    cut: dict[str, list[tuple[int, Any]]] = {}
    frames: dict[str, list[tuple[int, Any]]] = {}
    for manifest in W.manifests():
        for raw in manifest.read_text(encoding="utf-8").splitlines():
            if not raw.strip():
                continue
            record = json.loads(raw)
            engine = str(record.get("engine") or "")
            if engine not in ("sglang", "vllm"):
                continue
            entry = W.Entry(manifest.parent / record["file"], record["label"], engine)
            size = entry.path.stat().st_size
            if size > SIZE_LIMIT:
                continue
            by_key.setdefault((record["label"], engine), []).append((size, entry))
            notes = str(record.get("notes") or "").lower()
            if " cut" in notes:
                cut.setdefault(engine, []).append((size, entry))
            if "frames" in notes:
                frames.setdefault(engine, []).append((size, entry))
    chosen: dict[Path, Any] = {}
    for key in sorted(by_key):
        ranked = sorted(by_key[key], key=lambda item: (item[0], str(item[1].path)))
        for _, entry in (ranked[0], ranked[-1]):
            chosen.setdefault(entry.path, entry)
    for pool in (cut, frames):
        for engine in sorted(pool):
            for _, entry in sorted(pool[engine], key=lambda item: (item[0], str(item[1].path)))[:2]:
                chosen.setdefault(entry.path, entry)
    return list(chosen.values())


SUBSET = _subset()


def test_the_subset_covers_every_class_both_engines_stalls_cuts_and_frames() -> None:
    labels = {(entry.label, entry.engine) for entry in SUBSET}
    assert {label for label, _ in labels} >= {"healthy", "unknown", "server_start_timeout", "cuda_oom", "nccl_error", "import_error", "model_load_error", "kv_pool_too_small"}
    assert {engine for _, engine in labels} == {"sglang", "vllm"}
    assert ("server_start_timeout", "sglang") in labels and ("server_start_timeout", "vllm") in labels


@pytest.mark.parametrize("name", W.NAMES)
def test_every_wrapper_keeps_class_and_evidence_line_on_labelled_logs(name: str) -> None:
    changed = []
    for entry in SUBSET:
        lines = W.read_lines(entry.path)
        bare = diagnose_file(entry.path)
        change = W.compare(entry, bare, name, lines)
        if change is not None:
            changed.append(f"{entry.path.name}: {change.bare_class} -> {change.wrapped_class}: {change.wrapped_evidence[:120]!r}")
    assert not changed, changed


def test_an_error_read_before_its_load_path_shows_its_line_as_the_log_has_it() -> None:
    # The TypeError is read before the chained traceback shows the load path (the model-code rule records it later):
    # its evidence, like every other, is the line with the carrier's text, read as the bare line.
    site = "/usr/local/lib/python3.10/dist-packages"
    log = [
        "Traceback (most recent call last):",
        f'  File "{site}/foo_models/helpers.py", line 12, in build',
        "    return make(config)",
        "TypeError: 'NoneType' object is not subscriptable",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        f'  File "{site}/sglang/srt/model_executor/model_runner.py", line 1270, in load_model',
        "    self.model = get_model(",
        "RuntimeError: the model could not be built",
    ]
    bare = diagnose_text(log)
    carried = diagnose_text(["0: " + line for line in log])
    assert carried.failure_class == bare.failure_class == "model_load_error"
    assert [(item.line, item.text) for item in carried.evidence] == [(item.line, "0: " + item.text) for item in bare.evidence]
