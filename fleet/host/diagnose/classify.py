"""Classify why a run failed from its logs: `fleet diagnose`.

How a log is read, and why it is fast: logs of long runs are almost all serving lines
("Decode batch", "Prefill batch", uvicorn's `200 OK`, DDTree metrics), which never carry a failure.
The file is read in large binary chunks; for each chunk the newlines and the serving markers are
counted in C (`bytes.count`). When every line of a chunk is a serving line it is skipped whole (only
its last decode line is parsed, for the summary). Only chunks with other lines are cut into small
blocks, and only blocks with other lines are split into lines; each such line is tested against the
catalogue's literals (`in` on bytes) and, on a hit, against the signature's regex. So the cost per
gigabyte is a handful of C scans, whatever the size of the catalogue.

Standard library only, like the catalogue and the log parser.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from fleet.host.contract import RESULT_SCHEMA, ContractError, RunResult, RunStatus, SweepDir
from fleet.host.contract.reader import parse_json, read_text
from fleet.host.contract.results import RESULT_MAX_BYTES
from fleet.host.diagnose.carriers import CODE_BLOCK, CRI_PARTIAL_LITERAL, code_block_indent, cri_partial, strip_carriers, strip_colour_text
from fleet.host.diagnose.catalogue import (
    SERVER_START_TIMEOUT_FIXES,
    SIGNATURE_BY_NAME,
    SIGNATURES,
    STALLED_START_FIXES,
    STARTUP_INCOMPLETE_FIXES,
    NOTHING_OF_A_SERVER_FIXES,
    FailureClass,
    Kind,
    Signature,
    fill_fix,
)
from fleet.host.engines.sglang.logparse import (
    SUMMARY_MARKERS,
    DDTreeMetrics,
    DecodeBatch,
    KVCacheAllocated,
    LogSummary,
    Other,
    PrefillBatch,
    SchedulerReady,
    ServerArgsLogged,
    StartupPhase,
    WeightsLoaded,
    clean_line,
    parse_line,
    strip_prefix,
)
from fleet.host.engines.sglang.flags import release_of_fields
from fleet.host.engines.sglang.release import KNOWN_RELEASES, choose_release
from fleet.host.engines.vllm import logparse as vllm_log

# The log parser's events that are start-up steps.
_STEP_EVENTS = (StartupPhase, WeightsLoaded, KVCacheAllocated, SchedulerReady)
# An engine's own words that it goes on after an error it reports: it handled it. SGLang's retry helper prints the
# traceback of a failed try, then (0.5.23 srt/utils/common.py:3811) logger.warning(f"retry() failed once ({try_index}th
# try, maximum {max_retry} retries). Will delay {delay:.2f}s and retry. Error: {e}"); its generation-config reader
# (0.5.16 srt/utils/hf_transformers/common.py:491) logger.warning("Failed to load generation config for %s: %s.
# Proceeding without generation config.") (0.5.23 :727 "No generation config for %s: %s. Proceeding without it.", at
# debug level); the CI weight validator (0.5.23 srt/model_loader/ci_weight_validation.py:259 and :475) warns "Corrupted
# safetensors file detected: %s - %s: %s" per file, then "Removed %d corrupted file(s) for %s. These will be
# re-downloaded on next load." SGLang's log format prints no level, so the words are what says so.
_GOES_ON = re.compile(r"(?P<retry>\bWill delay \d+(?:\.\d+)?s and retry\b)|\bProceeding without\b|\bwill be re-downloaded\b")
_TRACEBACK_TAIL = 4
# A server stopped by a signal, in the engine's own words: vLLM's engine core (0.25 v1/engine/core.py:1214, 0.33 :1526
# logger.info("[shutdown] EngineCore: trigger received signal=%s", ...)) before its launcher's "[shutdown] API server:
# shutdown triggered" and the abort-mode teardown (whose EngineDeadError and "AsyncLLM output_handler failed" follow); vLLM
# 0.6-0.21's API server, whose SIGTERM handler raises KeyboardInterrupt("terminated") (entrypoints/openai/api_server.py
# signal_handler; 0.7.2 :871), and the V0 engine's process (0.6-0.10 engine/multiprocessing/engine.py signal_handler, 0.7.2
# :374, raise KeyboardInterrupt("MQLLMEngine terminated")); the SIGINT handler of huggingface_hub's Xet downloader (xet-core
# hf_xet/src/runtime.rs perform_sigint_shutdown, eprintln!("Cancellation requested; stopping current tasks.") while its
# runtime has tasks: a start interrupted while fetching weights); SGLang's tokenizer manager (0.5.23 managers/tokenizer_manager.py:4068 f"SIGTERM received. {signum=}
# {frame=}. Draining requests and shutting down...") and multi-node engine (entrypoints/engine.py:1268 "SIGTERM received on
# node_rank ..."). Not "Signal SIGTERM received while health check failed" (a stop for a failed health check), nor Ray's
# logging.cc "*** SIGTERM received at time=" (vLLM's Ray executor sends it while shutting down after any end). Whatever a
# start prints from that line on is its teardown (label convention: a start that came up and was stopped by a signal is
# healthy; one stopped before it came up is unknown, with its stall point).
# CPython's default SIGINT handler (signal.default_int_handler) raises KeyboardInterrupt with no arguments: a traceback
# that ends in a bare "KeyboardInterrupt" is a process interrupted by SIGINT (Ctrl-C, a launcher's interrupt). SGLang
# 0.3.6's run_scheduler_process (managers/scheduler.py:1410) and run_detokenizer_process (detokenizer_manager.py:205)
# catch only Exception, and 0.3.6 handles only SIGTERM (tokenizer_manager.py:508), so an interrupted 0.3 server prints
# those tracebacks, each ending so, then uvicorn's "Shutting down": its form of the signal stop. Not a quoted source line
# ("raise KeyboardInterrupt").
_SIGNAL_STOP = re.compile(
    r"\[shutdown\] EngineCore: trigger received signal=\w+|\bSIGTERM received(?:\. signum=| on node_rank )"
    r"|\bKeyboardInterrupt\S*: (?:MQLLMEngine )?\S*terminated\b|Cancellation requested; stopping current tasks\."
    r"|(?<!raise )(?<![\w.])KeyboardInterrupt(?=\s*$)"
)
# A request's own text echoed by the engine's request logger is the client's data, not the server's output: vLLM 0.4-0.10
# entrypoints/logger.py log_inputs logger.info("Received request %s: prompt: %r, params: %s, ...") and 0.33
# entrypoints/serve/utils/request_logger.py ("Request %s details: prompt: %r, ...", "Request %s JSON body: %s"); SGLang
# 0.4.x managers/tokenizer_manager.py:377 and 0.5.23 utils/request_logger.py:116 f"Receive: obj={...}". A prompt that
# quotes an error message (a benchmark's question about a bug) proves nothing about the server. (SGLang's "Finish: obj=...,
# out=..." carries the server's answer and is read as before.)
_REQUEST_ECHO = re.compile(r"^(?:Received request \S+: prompt: |Request \S+ (?:details: prompt: |JSON body: )|Receive: obj=)")
# A utility call on a live vLLM engine that failed (sleep mode's wake_up, a LoRA load, collective_rpc): the engine core's
# utility path (0.33 v1/engine/core.py:1849 _invoke_utility_method) logs logger.exception("Invocation of %s method failed",
# name) and hands f"Call to {name} method failed: {str(e)}" back to the caller, whose client raises it (the API server's
# request answered 500); the engine core's loop goes on. From the line before the first (a native allocator's own stderr
# line, cumem_allocator.cpp's "CUDA Error: ... at <file>:<line>") to the second, the errors are that call's.
_CALL_FAILED = re.compile(r"Invocation of (?P<method>\w+) method failed")
_CALL_FAILED_RETURNED = "Call to {} method failed: "
_SIGNAL_STOP_LITERALS = (b"trigger received signal=", b"SIGTERM received", b"KeyboardInterrupt", b"Cancellation requested")
_GOES_ON_LITERALS = (b"and retry", b"Proceeding without", b"re-downloaded")
CHUNK_BYTES = 8 << 20
BLOCK_BYTES = 64 << 10
# A generic error followed by this many serving lines did not stop the server (one or two stray
# lines can still come from rank 0 while another rank is dying).
RECOVERY_SERVING_LINES = 3
EVIDENCE_PER_SIGNATURE = 3

_DECODE = b"] Decode batch"
_PREFILL = b"] Prefill batch"
_HTTP_OK = b'HTTP/1.1" 200 OK'
_DDTREE = b"DDTREE metrics:"
_DDTREE_ZERO = b"avg_accepted_drafts=0.00"
# A serving line with one of these in it is read for errors too: a paste that lost its newlines runs the
# serving lines and a traceback's header ("ERROR ... Error in preprocessing prompt inputs", "Traceback
# (most recent call last)") into one line, which the serving skip would otherwise never examine.
_ERROR_HEADS = (b"Traceback (most recent call last)", b"Error", b"ERROR")
# Lines worth handing to the log parser (startup figures, readiness), of every known SGLang release.
_SUMMARY_MARKERS = SUMMARY_MARKERS
# Traceback frames quote the source of the failing statement (`raise RuntimeError(f"NCCL error:
# {error_str}")`, `assert ..., "max_running_request is zero"`): code, not a message.
_SOURCE_LINE = re.compile(r"^\s{4,}(?:raise\b|assert\b|return\b|logger\.|[\w.\[\]]+\s*[(=]|f?[\"'])")
_CAPTURE_PHASES = {"cuda_graph_begin", "draft_cuda_graph_begin", "piecewise_cuda_graph_begin"}
# What the server was doing when a startup step was its last line, for fix texts.
_PHASE_ACTIVITY = {
    "init_distributed_begin": "initialising torch distributed / NCCL",
    "init_distributed_end": "about to load weights",
    "load_weight_begin": "loading weights",
    "memory_pool_end": "about to capture CUDA graphs",
    "cuda_graph_begin": "capturing CUDA graphs",
    "cuda_graph_end": "finishing startup after CUDA graph capture",
    "draft_cuda_graph_begin": "capturing the draft model's CUDA graphs",
    "draft_cuda_graph_end": "finishing startup after the draft's CUDA graphs",
    "piecewise_cuda_graph_begin": "capturing piecewise CUDA graphs",
    "piecewise_cuda_graph_end": "finishing startup after piecewise CUDA graphs",
}
# Start-up lines that say what a start was doing last, with whether the step was still under way
# (a step that began and has no end line yet) or had finished. The log parser's phases cover the
# 0.5.x formats; these cover the steps it has no phase for and the wordings of other releases.
# flashinfer/jit/core.py logs "Loading JIT ops: <name>" before it builds or loads a kernel; NCCL's
# debug.c prefixes its INFO lines with "NCCL INFO"; the weight loaders print tqdm bars; SGLang 0.2-0.5
# "Init torch distributed begin/ends", "Load weight begin/end", "Capture cuda graph begin/end",
# "Memory pool end". vLLM's own steps are the vLLM log module's (a bare log names no engine).
_DEEPGEMM_COMPILE = "compiling DeepGEMM JIT kernels"
_GLOO_MESH_INCOMPLETE = "connecting a Gloo group (a rank is NOT connected to a peer: distributed set-up incomplete)"
# Gloo's per-rank connectivity report (see _STALL_MARKERS): "Rank {rank} is connected to {n}" and "Rank {rank} is NOT connected to: [".
_GLOO_CONNECTED = re.compile(rb"Rank (\d+) is connected to (\d+)\b")
_GLOO_NOT_CONNECTED = re.compile(rb"Rank (\d+) is NOT connected to: \[")
_STALL_MARKERS: tuple[tuple[bytes, str, bool], ...] = (
    # SGLang logs its arguments as a start begins, then launches the scheduler and detokenizer processes
    # (0.5.23 srt/entrypoints/engine.py:311 and :1185, logger.info(f"server_args={...}") just before
    # _launch_subprocesses); 0.5.12 and older print `server_args=ServerArgs(...)`, 0.5.23 `server_args={...}`.
    # A start with nothing after it stopped launching them. (A frame quoting `server_args=server_args,`
    # is neither form.)
    (b"server_args=ServerArgs(", "launching the scheduler processes (the server's arguments were logged)", True),
    (b"server_args={", "launching the scheduler processes (the server's arguments were logged)", True),
    (b"Loading JIT ops", "loading or compiling FlashInfer JIT kernels", True),
    # SGLang's DeepGEMM pre-compile (0.5.23 layers/deep_gemm_wrapper/compile_utils.py:168-183, since the
    # 2025-04 pre-compile): logger.warning("Entering DeepGEMM JIT Pre-Compile session. It may take a long time
    # ...") on the first rank of a node, then per kernel type logger.info(f"Try DeepGEMM JIT Compiling for
    # <{kernel_type.name}> N={n}, K={k}, num_groups={num_groups} with all Ms.") before it compiles and runs the
    # kernel over every M under a tqdm bar (:255, desc="DeepGEMM warmup"; 2025's builds print the bar with
    # no description). A compile is under way until its bar reaches 100 %.
    (b"Entering DeepGEMM JIT Pre-Compile session", _DEEPGEMM_COMPILE, True),
    (b"Try DeepGEMM JIT Compiling for", _DEEPGEMM_COMPILE, True),
    (b"DeepGEMM warmup", _DEEPGEMM_COMPILE, True),
    # TorchInductor's max-autotune (torch.compile under either engine) benchmarks each kernel choice and
    # writes to stderr whatever the log level (torch 2.13 _inductor/select_algorithm.py:5675 "AUTOTUNE
    # {name}({sizes})", :5700 "{SingleProcess|SubProcess} AUTOTUNE benchmarking takes {elapse:.4f} seconds
    # and {precompile_elapse:.4f} seconds precompiling ..."): compiling is under way until a later step.
    (b"AUTOTUNE ", "autotuning TorchInductor kernels (torch.compile)", True),
    # The ranks join their group's broadcast queue (shm_broadcast.py MessageQueue, SGLang 0.4.6 :273/:291 and
    # vLLM alike: logger.debug("Connecting to %s", socket_addr) with socket_addr f"tcp://{ip}:{port}") while
    # the distributed groups form, before weights load.
    (b"Connecting to tcp://", "connecting the ranks' message queues (distributed set-up)", True),
    # DeepSeek's shared-expert fusion, part of weight loading (SGLang 0.4.6 models/deepseek_v2.py:1649,
    # tqdm desc=f"Cloning {self.n_share_experts_fusion} replicas of the shared expert into MoE").
    (b"replicas of the shared expert into MoE", "cloning the shared expert into the MoE experts (weight loading)", True),
    # A line per checkpoint tensor, "Loading model.layers.N.<...>.weight": no release of SGLang or vLLM prints
    # it itself (a user's print in load_weights, batch9's thread); whoever prints it, the loader is at that tensor.
    (b"Loading model.layers.", "loading weights", True),
    (b"NCCL INFO", "setting up NCCL communicators", True),
    # torch's Gloo process group reports each group's mesh once it is connected (c10d ProcessGroupGloo.cpp
    # after connectFullMesh: "[Gloo] Rank {rank} is connected to {n} peer ranks. Expected number of connected
    # peer ranks is : {n}"), one line per CPU group SGLang and vLLM create while setting up distributed state.
    # The group it names is done; what comes next is not known from it.
    # The same report names the peers a rank is not connected to when its mesh is incomplete (Gloo
    # gloo/transport/tcp/context.cc printConnectivityInfo, since afc1517 of 2024-01: std::cout "[Gloo] Rank {rank}
    # is NOT connected to: [{peers}]"; GLOO_INFO "Rank {rank} is NOT connected to: [{peers}]" since d97133a of
    # 2025-09). createAndConnectAllPairs waits on each pair's connect (Pair::connect's waitUntilConnected, which
    # throws on a failure or a timeout) before it prints, so a peer named there left the mesh (its end closed) or
    # never joined it, and without an error line the group's first collective waits on that peer: distributed
    # set-up that cannot complete, a start under way until a later step. Under TORCH_GLOO_LAZY_INIT the pairs
    # connect on first use and every rank prints "is connected to 0 peer ranks" and names all its peers: no stall.
    (b" is NOT connected to: [", _GLOO_MESH_INCOMPLETE, True),
    (b"[Gloo] Rank ", "done connecting a Gloo group (distributed set-up)", False),
    (b"checkpoint shards", "loading weights", True),
    # SGLang's multi-threaded safetensors loader names its bar so (0.5.10
    # python/sglang/srt/model_loader/weight_utils.py:807 and :857, desc="Multi-thread loading shards"); at
    # 100 % every shard is read and weight loading is ending, not stalled on I/O.
    (b"Multi-thread loading shards", "loading weights", True),
    (b"Init torch distributed begin", "initialising torch distributed / NCCL", True),
    (b"Init torch distributed ends", "about to load weights", False),
    (b"Load weight begin", "loading weights", True),
    (b"Load weight end", "done loading weights", False),
    (b"Memory pool end", "about to capture CUDA graphs", False),
    (b"KV Cache is allocated", "done allocating the KV cache", False),
    (b"Capture cuda graph begin", "capturing CUDA graphs", True),
    # Start-up chatter that only a starting server prints, each a step done (a log that ends after it, with no readiness
    # line, is a cut start): SGLang's scheduler process pinning itself at its start (srt/utils/common.py 0.5.17 :2699
    # set_gpu_proc_affinity, logger.info(f"Process {pid} gpu_id {gpu_id} is running on CPUs: {p.cpu_affinity()}")); its
    # model runner choosing the default attention backend (0.4.x model_runner.py, logger.info(f"Attention backend not set.
    # Use {server_args.attention_backend} backend by default.")); FlagOS's SGLang platform plugin found at platform
    # discovery (sglang_fl's entry point, logger.info("sglang_fl platform activating: vendor=%s, device=%s", ...), and
    # sglang_plugin_FL's the same). vllm-gaudi's sampler warm-up (hpu_model_runner.py warmup_sampler: "Starting sampler
    # warmup..." then "Sampler warmup completed successfully") is a step under way until its end line.
    (b" is running on CPUs: ", "done pinning the scheduler process to its CPUs (SGLang's scheduler start)", False),
    (b"Attention backend not set. Use ", "done choosing the default attention backend (SGLang's model runner)", False),
    (b" platform activating: vendor=", "done activating the platform plugin (FlagOS)", False),
    (b"Sampler warmup completed successfully", "done warming up the sampler (vllm-gaudi)", False),
    (b"Starting sampler warmup...", "warming up the sampler (vllm-gaudi)", True),
    # SGLang-JAX's scheduler precompiles the model's batch shapes before its loop (sgl_jax srt/managers/scheduler.py:
    # `logger.info("[Scheduler] Begins to run worker precompile.")`, `self.tp_worker.run_precompile()`,
    # `logger.info("[Scheduler] Completes worker precompile.")`, and "Begins to run spec_decode worker precompile." with a
    # draft; its tp worker logs "[EXTEND] Begin to precompile bs_paddings=...", then "[EXTEND] Precompile finished in %.0f
    # secs", the same for [DECODE] and [PENALTIES]). Start-up steps: a log that ends inside them has not started.
    # (the ends first: the begin marker's words are in them)
    (b"Completes worker precompile.", "done precompiling the JAX model's batch shapes (SGLang-JAX)", False),
    (b"Completes spec_decode worker precompile.", "done precompiling the JAX model's batch shapes (SGLang-JAX)", False),
    (b"worker precompile.", "precompiling the JAX model's batch shapes (SGLang-JAX)", True),
    (b"] Begin to precompile", "precompiling the JAX model's batch shapes (SGLang-JAX)", True),
    (b"] Precompile finished in", "done precompiling a phase of the JAX model's batch shapes (SGLang-JAX)", False),
    (b"Capture draft cuda graph begin", "capturing the draft model's CUDA graphs", True),
    (b"Capture cuda graph end", "finishing startup after CUDA graph capture", False),
    # The capture loops' tqdm bars, which SGLang prints at any log level (its begin/end lines are logger.info,
    # so at `--log-level warning` the bars are the only trace of capture): decode graphs, "Capturing batches
    # ({bs=} {avail_mem=:.2f} GB)" (0.5.6 cuda_graph_runner.py:474, 0.5.23 decode_cuda_graph_runner.py:1343);
    # piecewise graphs, "Capturing num tokens ({num_tokens=} {avail_mem=:.2f} GB)" (0.5.6
    # piecewise_cuda_graph_runner.py:393) and their torch.compile pass, "Compiling num tokens ({num_tokens=})"
    # (0.5.23 runner_backend/tc_piecewise_cuda_graph_backend.py:207); 0.5.23's prefill graphs, "Capturing
    # prefill shape ({num_tokens=} {avail_mem=:.2f} GB)" (prefill_cuda_graph_runner.py:1734). Under way
    # until the last bar on the line is at 100 %.
    (b"Capturing batches (bs=", "capturing CUDA graphs", True),
    (b"Capturing num tokens (num_tokens=", "capturing piecewise CUDA graphs", True),
    (b"Compiling num tokens (num_tokens=", "compiling piecewise CUDA graphs", True),
    (b"Capturing prefill shape (num_tokens=", "capturing prefill CUDA graphs", True),
    # Triton's compiler reports this MLIR diagnostic while it compiles the decode-attention kernel (SGLang 0.4.1
    # srt/layers/attention/triton_ops/decode_attention.py:35 and vLLM 0.33 v1/attention/ops/triton_decode_attention.py:46
    # warn at import that "The following error message 'operation scheduled before its operands' can be ignored."): a
    # kernel is being compiled (the start's CUDA graph capture or warm-up runs it first); no end line follows it.
    (b"operation scheduled before its operands", "compiling Triton kernels (Triton's harmless 'operation scheduled before its operands')", False),
    # vLLM builds the KV-transfer connector while the engine starts (0.33 distributed/kv_transfer/kv_connector/factory.py:63,
    # "Creating v1 connector with name: %s and engine_id: %s"; LMCache's connector then reads its configuration).
    (b"Creating v1 connector with name", "creating the KV-transfer connector", False),
    # vLLM-Omni's stages (0.30 engine/stage_engine_core_client.py:165 and :222, "[%s] stage-%s [rep-%s] initializing
    # EngineCore" / "... EngineCore running"; 0.16 "Stage-%s ..."): a stage's engine core starts, then runs. Then the
    # orchestrator (0.16 entrypoints/omni.py:477 "[%s] All stages initialized successfully", 0.30
    # engine/omni_engine_base.py:344 "[OmniEngine] Orchestrator ready with {n} stages", entrypoints/omni_base.py:227
    # "[%s] %s initialized in %.2f seconds"): the stages are up, the API server is not yet.
    (b"initializing EngineCore", "starting a stage's engine core (vLLM-Omni)", True),
    (b"EngineCore running", "done starting a stage's engine core (vLLM-Omni)", False),
    (b"All stages initialized successfully", "done starting the stages (vLLM-Omni's orchestrator)", False),
    (b"Orchestrator ready with", "done starting the stages (vLLM-Omni's orchestrator)", False),
    (b"OmniEngine initialized in", "done starting the stages (vLLM-Omni's orchestrator)", False),
    # SGLang-Omni's pipeline (sglang-omni 0.1.9 pipeline/coordinator.py:240 "Coordinator registered stage: %s at %s",
    # :246 "Coordinator started", pipeline/control_plane.py:313 "Stage %s control plane started", :439 "Coordinator
    # control plane started"): its stages start before and inside uvicorn's application start-up; the HTTP server is up
    # at uvicorn's "Application startup complete."
    (b"Coordinator registered stage: ", "starting the pipeline's stages (SGLang-Omni)", False),
    (b"control plane started", "starting the pipeline's stages (SGLang-Omni)", False),
    (b"Coordinator started", "starting the pipeline's stages (SGLang-Omni)", False),
    # uvicorn's own start (0.55 lifespan/on.py:48 "Waiting for application startup.", :62 "Application startup
    # complete."): the application's start-up is under way until its complete line.
    (b"Waiting for application startup", "starting the HTTP application (uvicorn's lifespan start-up)", True),
    *vllm_log.STARTUP_STEPS,
)
# A tqdm bar at 100 % is a finished step.
_DONE_BAR = b"100%"
# A tqdm bar printed without a description ("100%|#####| 128/128 [...]"; tqdm's format_meter begins with
# the percentage when desc is empty) on its own line: the bar of the step under way, when that step's bar
# has no description of its own (2025's DeepGEMM compile).
_BARE_BAR = re.compile(rb"^\s*\d{1,3}%\|")
_BARE_BAR_STEPS = {_DEEPGEMM_COMPILE}
# The HTTP server is up: SGLang's uvicorn starts before its warm-up request and the "fired up" line,
# uvicorn's "Application startup complete" follows it. A log that ends here is not a failure. vLLM's
# ready lines (its engine core's last start-up step, its API server's route list) are the vLLM log
# module's.
_LISTENING = (
    b"Uvicorn running on",
    b"Application startup complete",
    *vllm_log.READY_MARKERS,
    # A request being answered: the ASGI handler's own statement, `response = await f(request)` (fastapi
    # 0.136 routing.py:120 in request_response's inner app, starlette 1.7 routing.py:62 likewise), quoted by
    # a warning raised while serving a request (Python's warnings print the source line under
    # "<file>:<line>: <Category>: <message>") or by a request's traceback frame. SGLang at `--log-level
    # warning` prints no ready line; a request answered proves the HTTP server was up.
    b"response = await f(request)",
)
# A request answered: uvicorn's access line ('%s - "%s %s HTTP/%s" %d', protocols/http/h11_impl.py:474 and
# httptools_impl.py:481 in 0.55, its AccessFormatter adding the status phrase: '"POST /generate HTTP/1.1"
# 200 OK'). The HTTP server was up, as with the lines above; counted by the serving-block skip as well.
# SGLang's scheduler watchdog dumps the batch it was running when it fired (managers/scheduler.py 0.4-0.5
# watchdog_thread: logger.error(f"{self.cur_batch.batch_size()=}, {self.cur_batch.reqs=}, ...")); the
# watchdog times only a batch the event loop scheduled, which it enters after start-up, and a batch of
# one or more requests is the server serving: a hang while serving, not a stalled start.
# The dump is one message over many lines (each request's repr); a paste may begin inside it, past the
# head: its tail, the request list closing (")]", one or more Req reprs) and the pool's sizes after it
# (0.4.9 scheduler.py:2045-2050 f"{self.cur_batch.reqs=}, {self.token_to_kv_pool_allocator.available_size()=},
# {self.tree_cache.evictable_size()=}, "; other builds print the bare names, "available_size=N, evictable_size=N"), is
# the same batch.
_RUNNING_BATCH = re.compile(rb"cur_batch\.batch_size\(\)=([1-9]\d*)|\)\], (?:[\w.]+\.)?available_size(?:\(\))?=\d+, (?:[\w.]+\.)?evictable_size")
_RUNNING_BATCH_LITERALS = (b"cur_batch.batch_size()=", b"available_size")
# Start-up phases of the log parser that begin a step (no end line yet means it was under way).
_PHASES_UNDER_WAY = {"init_distributed_begin", "load_weight_begin", *_CAPTURE_PHASES}
# NCCL_DEBUG=INFO output is informational by NCCL's own levels (debug.c: NCCL_LOG_INFO); it quotes
# paths and plugin results ("libnccl-net.so: cannot open shared object file") a healthy start prints.
_NCCL_INFO = b" NCCL INFO "
# Signatures ranked below this are causes: among them the earliest line wins (the first fatal line
# of the last start). From it on they wrap or follow a cause (a capture failure, an NCCL timeout, a
# crash inside the weight loader, a bare exception): they win only when no cause is in the log.
CONSEQUENCE_RANK = 85
# Generic signatures that prove something raised but name nothing (a traceback's header or its frames alone).
_NO_CAUSE = {"traceback_only", "traceback_frames"}
# Signatures whose distinct lines are kept up to a registry's size, not only the first few: a start prints a
# skip line per module whose import failed, and the one a refused architecture needs may come after several
# others. Bounded all the same: a log is a host's file, and a million distinct lines must not become a
# million examples (SGLang 0.5.23 has 259 files of models).
_EVERY_EXAMPLE = {"import_skipped"}
_EVERY_EXAMPLE_LIMIT = 512
# An architecture's name in a registry's refusal ("['Qwen2_5_VLForConditionalGeneration']").
_ARCHITECTURE = re.compile(r"[A-Za-z_]\w*")
# A model's code failing while it loads (the catalogue's `model_code_failed_loading`): an AttributeError or TypeError
# whose traceback, or one chained to it, passes through a frame of the model's load path, in a start that never came
# up. A traceback is read as CPython prints it (traceback.py: "Traceback (most recent call last):", frames '  File
# "{}", line {}, in {}', the exception line "{type}: {message}"; chained ones joined by "During handling of the above
# exception, another exception occurred:" or "The above exception was the direct cause of the following
# exception:"). The load path's frames are named by file and function as the sources define them: the engines'
# model loaders and the runners' and workers' load_model (SGLang 0.5.23 model_executor/model_runner.py:1270,
# model_loader/__init__.py:23 get_model, model_loader/loader.py _initialize_model and every loader's load_model;
# vLLM 0.33 v1/worker/gpu_model_runner.py:4967 and gpu_worker.py:594 load_model, model_loader/__init__.py:131
# get_model, base_loader.py:63 load_model, utils.py:74 initialize_model); the model's config, tokenizer and
# processor as the engines read them (SGLang configs/model_config.py ModelConfig.__init__ / from_server_args,
# hf_transformers_utils.py and utils/hf_transformers/ get_config / get_tokenizer / get_processor; vLLM
# transformers_utils/config.py get_config, transformers_utils/processor.py get_processor, tokenizers' and
# transformers_utils' get_tokenizer); and transformers' loaders (from_pretrained, configuration_utils'
# get_config_dict / _get_config_dict, image_processing_base's get_image_processor_dict, processing_utils'
# get_processor_dict). A MoE kernel's `get_config` (SGLang layers/moe/...) is not one: the file names the loader.
_LOAD_CODE = "model_code_failed_loading"
# vLLM's profiled KV memory at or below zero (catalogue): a failure only where the start then fails.
_KV_NONE_LEFT = "kv_cache_memory_none_left"
# vLLM's front end's wait for its engine core (catalogue): an engine core's earlier error is its cause.
_ENGINE_WAIT = "engine_start_timeout"
# A package's import-time code raising (the catalogue's `import_failed_in_package`): the deepest "<module>" frame of the
# traceback is in an installed package other than the engine's, and the traceback ends in an AttributeError or a TypeError
# (an API or a Python version the package's top level does not fit: Hygon's lightop reading a DTK version that is None,
# FlashInfer's comm/fd_exchange.py annotating with `array.array[int]`, which Python 3.11 refuses with "TypeError: type
# 'array.array' is not subscriptable"; round fourteen read only the AttributeError). Installed from a source checkout (pip
# install -e, as ROCm images ship aiter at /sgl-workspace/aiter), a package's files sit in <checkout>/<package>/ with the
# checkout named as the package: "/aiter/aiter/fused_moe.py" is package aiter's module as "site-packages/aiter/..." is.
# A checkout under any other name ("/opt/jethac-flashinfer/flashinfer/...") is known by the import chain itself: a
# "<module>" frame running a package's "<root>/<package>/__init__.py" makes every later file under that root the package's.
_IMPORT_CODE = "import_failed_in_package"
_PACKAGE_MODULE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<package>[A-Za-z_]\w*)[/\\.]|[/\\](?P<checkout>[A-Za-z_]\w*)[/\\](?P=checkout)[/\\]")
_PACKAGE_INIT = re.compile(r"^(?P<root>.*[/\\](?P<package>[A-Za-z_]\w*)[/\\])__init__\.py$")
_ENGINE_PACKAGES = {"vllm", "sglang", "vllm_omni", "sglang_omni"}
_LOAD_ERRORS = {"AttributeError", "TypeError"}
# Exception lines that name their own kind: the generic signatures that say what failed, though no class names it
# (a CUDA runtime error, PyTorch's internal assertion, ptxas, a ROCm library, a native runtime's error, the allocator's
# refusal), unlike a bare exception ("exception": a KeyError, an AssertionError), a process's death or a traceback's
# parts. A traceback that ends in one is that error wherever it was raised: the frame rules (a load_weights or capture
# frame, ncclCommInitRank) step aside, as a fatal line wins over a warning and an exception line over a frame name.
_SELF_NAMED = frozenset(signature.name for signature in SIGNATURES if signature.kind is Kind.GENERIC and signature.name not in {"exception", "process_failed", "traceback_only", "traceback_frames"})
_TRACEBACK_HEAD = b"Traceback (most recent call last)"
_CHAINED = (b"During handling of the above exception", b"The above exception was the direct cause")
_FRAME = re.compile(r'^(?:\([^()]*\bpid=\d+[^()]*\)\s*)?File "(?P<file>[^"]+)",\s*line\s*\d+,?\s+in\s+(?P<function>[\w<>.]+)')
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?(?P<exception>[A-Z]\w*(?:Error|Exception))(?::|$)")
_LOAD_FRAMES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"(?:sglang|vllm)/\S*model_loader/[\w.]+\.py$"), frozenset({"get_model", "load_model", "_initialize_model", "initialize_model"})),
    (re.compile(r"(?:sglang|vllm)/\S*(?:model_runner|worker)\.py$"), frozenset({"load_model"})),
    (re.compile(r"sglang/\S*configs/model_config\.py$"), frozenset({"__init__", "from_server_args"})),
    (re.compile(r"(?:sglang|vllm)/\S*(?:hf_transformers|transformers_utils|tokenizers)\S*\.py$"), frozenset({"get_config", "get_tokenizer", "get_processor"})),
    (
        re.compile(r"transformers/\S*\.py$"),
        frozenset({"from_pretrained", "get_config_dict", "_get_config_dict", "get_image_processor_dict", "get_processor_dict"}),
    ),
)
# A request answered with an error: uvicorn's access line ('%s - "%s %s HTTP/%s" %d', protocols/http/h11_impl.py:474 and
# httptools_impl.py:481 in 0.55) with a client error (4xx) or 500, the status Starlette's ServerErrorMiddleware sends when a
# request's handler raised (starlette 1.7 middleware/errors.py), or the engine's own error response. The HTTP server took
# the request and answered it: an exception no class names that precedes such an answer, in a start where no process died
# (no other unexplained error), was that request's, and the server lives on. (503 is not one: SGLang and vLLM answer it
# when the engine is unavailable.)
_ANSWERED_ERROR = re.compile(rb'"[A-Z]+ \S+ HTTP/[\d.]+" (?:4\d\d|500)\b')
_ANSWERED_LITERAL = b" HTTP/"
# PyTorch's internal assertion is an exception line like any other there: a request's handler that met one and was answered
# with its error status leaves the server serving, as before it had a signature of its own (round nineteen).
_ALLREDUCE_CHECK = "custom_allreduce_cuda_check"
# SGLang's OpenAI serving base (srt/entrypoints/openai/serving_base.py, OpenAIServingBase.handle_request): `except
# Exception as e: logger.exception(f"Error in request: {e}")` then `return self.create_error_response(message=f"Internal
# server error: {str(e)}", err_type="InternalServerError", status_code=500)`: the exception ended one request, answered with
# a 500, and the server goes on. logger.exception prints the message, then the traceback under it.
_REQUEST_ERROR_LOGGED = b"Error in request: "
# A server at work, in its own words: healthy needs this much positive evidence when a log shows no start-up step and
# no ready line (a paste of serving lines only). uvicorn's access line with any status (a 503 too: the HTTP server took
# the request); vLLM's metrics logger (0.33 v1/metrics/loggers.py:283 "Avg prompt throughput: %.1f tokens/s", V0
# engine/metrics.py the same words), its speculative-decoding metrics (0.33 v1/spec_decode/metrics.py:121
# "SpecDecoding metrics: ", V0 spec_decode/metrics.py "Speculative metrics: "), its request lifecycle (0.33
# v1/engine/async_llm.py:587 "Added request %s.", :959 "Aborted request(s) %s.", V0 "Finished request %s.",
# entrypoints/serve/utils/request_logger.py:67 "Received request %s: "), its CUDA graph statistics (0.33
# compilation/cuda_graph.py:62 "**CUDAGraph Stats:**", logged with the metrics), vLLM-Omni's per-request metrics
# (log_utils.py "{'type': 'request_level_metrics', ..."); SGLang's request logger (0.5.23 utils/request_logger.py
# "Receive: obj=", "Finish: obj="), its request errors (entrypoints/openai/serving_base.py:137 f"Error in request: {e}")
# and its scheduler's retraction (managers/scheduler.py:4530 f"#retracted_reqs: ...", 0.4 "Decode out of memory
# happened. #retracted_reqs: ..."): requests being decoded. A log with none of these, no start-up step, no ready line,
# no stop by a signal and no failure shows nothing of a server that ran: `unknown`, not `healthy` (label convention: a
# start cut before it came up is unknown).
_ACCESS_LINE = re.compile(rb'"[A-Z]+ \S+ HTTP/[\d.]+" \d{3}\b')
_AT_WORK = (
    b"Avg prompt throughput:",
    b"SpecDecoding metrics: ",
    b"Speculative metrics: ",
    b"Added request ",
    b"Aborted request",
    b"Finished request ",
    b"Received request ",
    b"**CUDAGraph Stats:**",
    b"'request_level_metrics'",
    b"Receive: obj=",
    b"Finish: obj=",
    _REQUEST_ERROR_LOGGED,
    b"#retracted_reqs: ",
    # SGLang 0.2-0.4 schedule_batch.py Req.jump_forward_and_retokenize (constrained decoding's jump-forward, on a request
    # being decoded): logger.warning("Token fusion between input and output, try to avoid this by removing the space at
    # the end of the input.") (round thirty, batch46).
    b"Token fusion between input and output",
)
# vLLM's shared-memory ring buffer (distributed/device_communicators/shm_broadcast.py, MessageQueue's acquire_write and
# acquire_read): while a reader or writer waits on a peer it logs, every VLLM_RINGBUFFER_WARNING_INTERVAL seconds (60 by
# default), "No available shared memory broadcast block found in %d seconds. This typically happens when some processes are
# hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization)." One or two inside a start that
# goes on are a slow step; a run of them after the start's last step, with no step after, is the engine's own word that the
# start is waiting on a peer that does not answer: a stalled start.
_SHM_WAIT = b"No available shared memory broadcast block found"
_SHM_WAIT_RUN = 10  # notices (ten minutes at the default interval) after the last start-up step
_REQUEST_ERROR_GAP = 3  # lines between the message and the traceback's lines it follows (a frame's source line, a separator)
_REQUEST_ERRORS = {"exception", "torch_internal_assert", "traceback_only", "traceback_frames"}
_RESULT_SUFFIXES = {".json"}
_LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ".journal"}
_EVIDENCE_KEYS = re.compile(r"error|evidence|message|detail|reason|traceback|stderr", re.IGNORECASE)
# Foreign JSON (not a fleet run result) is read by its keys: status-like values and error-like strings.
_STATUS_KEYS = {"status", "class", "error_class", "failure_class"}
_START_TIMEOUT_VALUES = {"server_start_timeout"}
_TIMEOUT_SECONDS = re.compile(r"not ready after (\d+(?:\.\d+)?) s")


class ReadInto(Protocol):
    """A binary stream read into a caller's buffer: an open file (buffering=0) or io.BytesIO."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


@dataclass(frozen=True)
class Evidence:
    line: int
    text: str


@dataclass(frozen=True)
class Finding:
    name: str
    line: int
    text: str
    advice: str
    count: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "line": self.line, "text": self.text, "advice": self.advice, "count": self.count}


@dataclass(frozen=True)
class DiagnosisHint:
    """What the caller knows beyond the log: the server was killed for not becoming ready in time,
    and the SGLang version it ran (the advice spells flags as that release does; unknown: the release
    whose ServerArgs the log's `server_args` line shows, else the newest fleet knows). No hint at all
    (None) means the log is all there is: then a log with no failure reads healthy only where it shows
    the server ran (a start-up step, a ready line, the server at work), else unknown. A caller that has
    a run's record, or text that is not a server's log, passes a hint, even an empty one."""

    server_start_timed_out: bool = False
    start_timeout_s: float | None = None
    sglang_version: str | None = None


@dataclass(frozen=True)
class Diagnosis:
    path: str
    failure_class: str | None  # a FailureClass value; None: no failure in this log
    evidence: tuple[Evidence, ...]
    findings: tuple[Finding, ...]
    fix: str | None
    consequences: tuple[str, ...] = ()  # other failure classes seen after the root cause
    summary: LogSummary | None = field(default=None, compare=False, repr=False)
    # The numbers read around the root cause (context_len, kv_tokens, port, ...): what a fix rests on.
    figures: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "failure_class": self.failure_class,
            "evidence": [{"line": item.line, "text": item.text} for item in self.evidence],
            "findings": [finding.to_json() for finding in self.findings],
            "fix": self.fix,
        }


@dataclass
class _SignatureHits:
    count: int = 0
    # Lines of it that were not warnings ("WARNING ...", "UserWarning: ..."): an error on a warning
    # line (an optional extension that failed to import) is no failure while a fatal line exists.
    not_warnings: int = 0
    examples: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    messages: set[str] = field(default_factory=set)
    serving_at_last: int = 0
    last_line: int = 0
    steps_at_last: int = 0  # start-up steps met up to its last line
    handled_at: int = 0  # the line of an engine's word that it went on after it (see _GOES_ON), if any


@dataclass
class _FailedCall:
    """A utility call that failed (see _CALL_FAILED): its first line, the caller's line (0 until seen), the method."""

    first: int
    last: int
    method: str


_IndexEntry = tuple[Signature, re.Pattern[str] | None, bool, bool]


def _compile_index() -> tuple[tuple[bytes, tuple[_IndexEntry, ...]], ...]:
    """Per literal: each signature with a trigger on it, the trigger's compiled pattern, whether it
    proves its class on a warning line and whether it reads a traceback's quoted source line."""
    by_literal: dict[bytes, list[_IndexEntry]] = {}
    for signature in SIGNATURES:
        for trigger in signature.triggers:
            pattern = re.compile(trigger.pattern) if trigger.pattern else None
            by_literal.setdefault(trigger.literal.encode(), []).append((signature, pattern, trigger.proves_as_warning, trigger.quotes_source))
    return tuple((literal, tuple(entries)) for literal, entries in by_literal.items())


_INDEX = _compile_index()


class _Scanner:
    """Reads one log, keeps the summary and the catalogue hits of every server start."""

    def __init__(self) -> None:
        self.summary = LogSummary()
        self.hits: dict[tuple[int, str], _SignatureHits] = {}
        self.serving = 0
        self.lines = 0
        self._latest: dict[bytes, tuple[int, bytes]] = {}  # serving marker -> its latest line, unparsed
        self.stall: tuple[int, str, bool] | None = None  # the latest startup step: line, activity, under way
        self._gloo_peers: dict[bytes, int] = {}  # per rank, the peers its latest Gloo report says it is connected to
        self.listening_start: int | None = None  # the start whose HTTP server came up (uvicorn)
        self.up_at: dict[int, int] = {}  # per start, the first line that shows it came up (ready, listening or serving)
        self.steps = 0  # start-up steps met so far (a step line whose activity differs from the one before)
        self.steps_before_up: dict[int, int] = {}  # per start, the steps met before it came up
        self.failed_calls: dict[int, list[_FailedCall]] = {}  # per start, each utility call that failed
        self.last_answered = 0  # the latest line of a request answered 200 OK
        self.signalled: dict[int, tuple[int, int, str]] = {}  # per start, where its stop by a signal begins, the signal's line, its words
        self.vllm_kv: dict[str, object] = {}  # vLLM's KV cache figures of the latest start (kv_tokens, max_model_len)
        self.answered_error: dict[int, int] = {}  # per start, the last line where a request was answered with an error
        self.at_work: set[int] = set()  # the starts that showed the server at work (see _AT_WORK)
        # Per start, SGLang's "Error in request: " lines with the traceback its logger.exception prints under each: first, last line.
        self.request_errors: dict[int, list[list[int]]] = {}
        self.shm_waits: list[tuple[int, int]] = []  # vLLM's shared-memory broadcast wait notices: line, steps met before it
        # The traceback being read (with those chained to it): "none", "open" (frames), "ended" (its exception
        # line), "chaining" (a chaining sentence: the next header continues it); its first load-path frame's
        # function, and its AttributeError / TypeError lines (line, text, message).
        self._traceback_state = "none"
        self._load_frame: str | None = None
        self._module_package: str | None = None  # the package of the traceback's deepest "<module>" frame, if installed
        self._package_roots: dict[str, str] = {}  # the traceback's packages by their folder, from their __init__ frames
        self._load_errors: list[tuple[int, str, str]] = []
        # The frame readings of the traceback being read (a fatal signature read off a frame or a quoted source line,
        # ranked after every cause: load_weights, the capture's frames, ncclCommInitRank): name, line, message, warning.
        self._frame_readings: list[tuple[str, int, str, bool]] = []
        self._traceback_first = 0  # the first line of the traceback (or chain) being read or last read
        self._traceback_last = 0  # the last line of it that was followed (a header, frame, chaining or exception line)
        self._previous_line = 0  # the last line examined before this one
        # Carriers (see carriers.py): whether the log is a Markdown code block (decided on its first chunk),
        # the parts of a kubelet-split line read so far, and the line being examined as the log shows it
        # when a carrier's text was removed from it (its evidence shows the line as the log has it).
        self._code_block: bool | None = None
        self._partial = b""
        self._shown: tuple[int, bytes] | None = None

    # -- reading ------------------------------------------------------------------------------
    def scan(self, stream: ReadInto) -> None:
        buffer = bytearray(CHUNK_BYTES)
        carried = 0
        next_line = 1
        while True:
            with memoryview(buffer) as view, view[carried:] as free:
                read = stream.readinto(free)
            if not read:
                if carried:
                    buffer[carried:carried] = b"\n"
                    next_line = self._blocks(buffer, carried + 1, next_line)
                break
            end = carried + read
            if self._code_block is None:
                self._code_block = code_block_indent(bytes(buffer[: min(end, BLOCK_BYTES)]))
            last_newline = buffer.rfind(b"\n", 0, end)
            if last_newline < 0:
                carried = end
                if carried == len(buffer):  # one line longer than the buffer
                    buffer.extend(bytes(len(buffer)))
                continue
            next_line = self._blocks(buffer, last_newline + 1, next_line)
            rest = end - last_newline - 1
            buffer[:rest] = buffer[last_newline + 1 : end]
            carried = rest
        self._flush_latest()
        self.lines = next_line - 1
        self.summary.lines = self.lines

    def _blocks(self, buffer: bytearray, end: int, first_line: int) -> int:
        """Scan the whole lines buffer[:end] block by block; returns the number of the next line."""
        line = first_line
        start = 0
        while start < end:
            cut = buffer.find(b"\n", min(start + BLOCK_BYTES, end) - 1, end) + 1
            line = self._block(buffer, start, cut, line)
            start = cut
        return line

    def _block(self, buffer: bytearray, start: int, end: int, first_line: int) -> int:
        newlines = buffer.count(b"\n", start, end)
        decode = buffer.count(_DECODE, start, end)
        prefill = buffer.count(_PREFILL, start, end)
        ddtree = buffer.count(_DDTREE, start, end)
        answered = buffer.count(_HTTP_OK, start, end)
        serving_only = decode + prefill + ddtree + answered == newlines
        if serving_only and not self._partial and not any(buffer.find(head, start, end) >= 0 for head in _ERROR_HEADS):
            self._serving_only(buffer, start, end, first_line, newlines, decode, prefill, ddtree)
        else:
            self._line_by_line(bytes(buffer[start:end]), first_line)
        return first_line + newlines

    def _line_of(self, buffer: bytearray, position: int, end: int, first_line: int, newlines: int) -> tuple[int, bytes]:
        line_start = buffer.rfind(b"\n", 0, position) + 1
        line_end = buffer.find(b"\n", position, end)
        return first_line + newlines - buffer.count(b"\n", position, end), bytes(buffer[line_start:line_end])

    def _serving_only(self, buffer: bytearray, start: int, end: int, first_line: int, newlines: int, decode: int, prefill: int, ddtree: int) -> None:
        """A block of serving lines only: count them, remember the latest of each kind, parse nothing."""
        if decode + prefill + ddtree < newlines:  # the rest are requests answered
            self.listening_start = self.summary.starts
        if decode + prefill + ddtree < newlines or decode + prefill:
            self._up(first_line)
        if decode + prefill + ddtree < newlines:
            self.last_answered = self._line_of(buffer, buffer.rfind(_HTTP_OK, start, end), end, first_line, newlines)[0]
        self.summary.skip_serving(decode, prefill)
        self.serving += decode + prefill
        for count, marker in ((decode, _DECODE), (prefill, _PREFILL), (ddtree, _DDTREE)):
            if count:
                self._latest[marker] = self._line_of(buffer, buffer.rfind(marker, start, end), end, first_line, newlines)
        zero = buffer.find(_DDTREE_ZERO, start, end) if ddtree else -1
        if zero >= 0:
            line_no, raw = self._line_of(buffer, zero, end, first_line, newlines)
            self._examine(line_no, raw)
            more = buffer.count(_DDTREE_ZERO, start, end) - 1
            self.hits.setdefault((self.summary.starts, "ddtree_accepts_nothing"), _SignatureHits()).count += more

    def _line_by_line(self, block: bytes, first_line: int) -> None:
        lines = block.split(b"\n")
        lines.pop()  # the block ends with a newline
        for index, raw in enumerate(lines):
            if self._partial or CRI_PARTIAL_LITERAL in raw:
                joined = self._join_partial(raw)
                if joined is None:
                    continue
                raw = joined
            if _DECODE in raw:
                self.serving += 1
                self.summary.skip_serving(1, 0)
                self._latest[_DECODE] = (first_line + index, raw)
            elif _PREFILL in raw:
                self.serving += 1
                self.summary.skip_serving(0, 1)
                self._latest[_PREFILL] = (first_line + index, raw)
            elif _HTTP_OK not in raw:
                self._examine(first_line + index, raw)
                continue
            else:
                self.listening_start = self.summary.starts
                self.last_answered = first_line + index
            self._up(first_line + index)
            if any(head in raw for head in _ERROR_HEADS):
                self._errors(first_line + index, self._bare(first_line + index, raw), None)

    def _join_partial(self, raw: bytes) -> bytes | None:
        """A kubelet CRI partial line ("P") is kept until the line it belongs to ends ("F"): None while it goes on,
        then the whole line (read as the line of its last part)."""
        part = cri_partial(raw)
        if part is not None:
            self._partial += part
            return None
        if not self._partial:
            return raw
        joined = self._partial + strip_carriers(raw)
        self._partial = b""
        return joined

    def _bare(self, line_no: int, raw: bytes) -> bytes:
        """The line without its carriers' text (see carriers.py), every rule's reading; the line as the log shows it
        is kept for its evidence."""
        bare = raw[len(CODE_BLOCK) :] if self._code_block and raw.startswith(CODE_BLOCK) else raw
        bare = strip_carriers(bare)
        self._shown = (line_no, raw) if bare is not raw else None
        return bare

    def _flush_latest(self) -> None:
        """Parse the latest serving lines met since the last flush, for the summary."""
        for line_no, raw in sorted(self._latest.values()):
            event = parse_line(strip_carriers(raw).decode("utf-8", "replace"), line_no)
            if isinstance(event, (DecodeBatch, PrefillBatch, DDTreeMetrics)):
                self.summary.set_latest(event)
        self._latest.clear()

    # -- one interesting line -----------------------------------------------------------------
    def _examine(self, line_no: int, raw: bytes) -> None:
        raw = self._bare(line_no, raw)
        text: str | None = None
        for marker in _SUMMARY_MARKERS:
            if marker in raw:
                text = raw.decode("utf-8", "replace")
                event = parse_line(text, line_no)
                if isinstance(event, (DecodeBatch, PrefillBatch)):  # a bare serving line, no prefix
                    decode = isinstance(event, DecodeBatch)
                    self._up(line_no)
                    self.serving += 1
                    self.summary.skip_serving(int(decode), int(not decode))
                    self._latest[_DECODE if decode else _PREFILL] = (line_no, raw)
                elif isinstance(event, DDTreeMetrics):
                    self._latest[_DDTREE] = (line_no, raw)
                elif event is not None and not isinstance(event, Other):
                    if isinstance(event, ServerArgsLogged):
                        self._flush_latest()
                    self.summary.add(event)
                    if self.summary.is_ready:
                        self._up(line_no)
                    elif isinstance(event, _STEP_EVENTS):
                        self.steps += 1
                break
        if not self.summary.is_ready:
            for marker, activity, under_way in _STALL_MARKERS:
                if marker in raw:
                    if activity == _GLOO_MESH_INCOMPLETE and not self._gloo_mesh_incomplete(raw):
                        continue
                    if activity.endswith("a Gloo group (distributed set-up)") and self.stall is not None and self.stall[1] == _GLOO_MESH_INCOMPLETE:
                        # The other ranks' reports of their own groups: the incomplete mesh is still waited on.
                        self._gloo_report(raw)
                        break
                    self._gloo_report(raw)
                    # tqdm bars run together on one line (carriage returns): the last bar is the state.
                    done = under_way and _DONE_BAR in raw[raw.rfind(marker) :]
                    if self.stall is None or self.stall[1].removeprefix("done ") != activity:
                        self.steps += 1
                    self.stall = (line_no, "done " + activity if done else activity, under_way and not done)
                    break
            else:
                if self.stall is not None and self.stall[2] and self.stall[1] in _BARE_BAR_STEPS:
                    last_bar = raw.rstrip().rsplit(b"\r", 1)[-1]
                    if _BARE_BAR.match(last_bar):
                        done = last_bar.lstrip().startswith(_DONE_BAR)
                        activity = self.stall[1]
                        self.stall = (line_no, "done " + activity if done else activity, not done)
            if any(marker in raw for marker in _LISTENING) or (any(literal in raw for literal in _RUNNING_BATCH_LITERALS) and _RUNNING_BATCH.search(raw)):
                self.listening_start = self.summary.starts
                self._up(line_no)
            if any(marker in raw for marker in vllm_log.KV_CACHE_MARKERS):
                kv = vllm_log.kv_cache_figures(raw.decode("utf-8", "replace"))
                if kv is not None:
                    for name, value in (("kv_tokens", kv.tokens), ("max_model_len", kv.max_model_len)):
                        if value is not None:
                            self.vllm_kv[name] = value
        if _ANSWERED_LITERAL in raw and _ANSWERED_ERROR.search(raw):
            self.answered_error[self.summary.starts] = line_no
        if self.summary.starts not in self.at_work and ((_ANSWERED_LITERAL in raw and _ACCESS_LINE.search(raw)) or any(marker in raw for marker in _AT_WORK)):
            self.at_work.add(self.summary.starts)  # once per start: the markers are not looked for again
        self._errors(line_no, raw, text)
        if _SHM_WAIT in raw:
            self.shm_waits.append((line_no, self.steps))
        if _REQUEST_ERROR_LOGGED in raw:
            self.request_errors.setdefault(self.summary.starts, []).append([line_no, line_no])
        elif (spans := self.request_errors.get(self.summary.starts)) and self._traceback_last == line_no and line_no - spans[-1][1] <= _REQUEST_ERROR_GAP:
            spans[-1][1] = line_no  # a line of the traceback under it (a frame's source line or a separator between)
        if any(literal in raw for literal in _GOES_ON_LITERALS) and (went_on := _GOES_ON.search(raw.decode("utf-8", "replace"))) is not None:
            self._went_on(line_no, went_on["retry"] is not None)
        if b"method failed" in raw:
            self._failed_call(line_no, raw.decode("utf-8", "replace"))
        if self.summary.starts not in self.signalled and any(literal in raw for literal in _SIGNAL_STOP_LITERALS):
            if (found := _SIGNAL_STOP.search(raw.decode("utf-8", "replace"))) is not None:
                # Raised by a signal handler (KeyboardInterrupt), it ends a traceback: the teardown begins with that traceback.
                just_before = found.group(0).startswith("KeyboardInterrupt") and self._just_after_traceback(line_no)
                self.signalled[self.summary.starts] = (self._traceback_first if just_before else line_no, line_no, found.group(0))
        self._previous_line = line_no

    def _gloo_report(self, raw: bytes) -> None:
        """Remember how many peers a rank's Gloo report says it is connected to."""
        if (found := _GLOO_CONNECTED.search(raw)) is not None:
            self._gloo_peers[found.group(1)] = int(found.group(2))

    def _gloo_mesh_incomplete(self, raw: bytes) -> bool:
        """A rank names peers it is not connected to after connecting its others (not lazy init's zero)."""
        found = _GLOO_NOT_CONNECTED.search(raw)
        return found is not None and self._gloo_peers.get(found.group(1), 1) > 0

    def _failed_call(self, line_no: int, text: str) -> None:
        """A vLLM utility call that failed (see _CALL_FAILED): it opens with the engine core's line, closes with the caller's."""
        calls = self.failed_calls.setdefault(self.summary.starts, [])
        if (found := _CALL_FAILED.search(text)) is not None:
            calls.append(_FailedCall(self._previous_line or line_no, 0, found["method"]))
        elif calls and not calls[-1].last and _CALL_FAILED_RETURNED.format(calls[-1].method) in text:
            calls[-1].last = line_no

    def _just_after_traceback(self, line_no: int) -> bool:
        """A traceback ends on this line or just before it (its exception line and a quoted source line may match no
        signature, so its last line followed may be a few lines up)."""
        return self._traceback_first > 0 and self._traceback_state in ("open", "ended") and line_no - self._traceback_last <= _TRACEBACK_TAIL

    def _went_on(self, line_no: int, retry: bool) -> None:
        """The engine said it goes on after an error (see _GOES_ON): the errors it reported on this line or the line
        before it, or in the traceback a retry printed just before it, were handled."""
        since = self._traceback_first if retry and self._just_after_traceback(line_no) else self._previous_line
        for (hit_start, _), hits in self.hits.items():
            if hit_start == self.summary.starts and hits.examples and hits.examples[0][0] >= since:
                hits.handled_at = line_no

    def _up(self, line_no: int) -> None:
        """The current start showed it came up at this line (the first such line counts)."""
        if self.summary.starts not in self.up_at:
            self.up_at[self.summary.starts] = line_no
            self.steps_before_up[self.summary.starts] = self.steps

    def _errors(self, line_no: int, raw: bytes, text: str | None) -> None:
        """The catalogue signatures of one line, recorded."""
        if _is_nccl_info(raw):
            return
        text, message, matched, warning = _match(raw, text)
        for signature, (groups, as_warning) in matched.items():
            self._record(signature, line_no, text, message, groups, warning and not as_warning)
        if matched or any(sentence in raw for sentence in _CHAINED):
            self._traceback(line_no, raw, text, message, {signature.name for signature in matched})
            if self._traceback_state == "open":
                for signature, (_, as_warning) in matched.items():
                    if signature.kind is Kind.FATAL and signature.rank >= CONSEQUENCE_RANK and not signature.wrapper:
                        self._frame_readings.append((signature.name, line_no, message, warning and not as_warning))

    def _forget_traceback(self) -> None:
        """A new traceback begins (not one chained to the last): what was read of the last one no longer counts."""
        self._load_frame, self._load_errors, self._module_package = None, [], None
        self._frame_readings = []
        self._package_roots = {}

    def _traceback(self, line_no: int, raw: bytes, text: str, message: str, matched: set[str]) -> None:
        """Follow the traceback being printed: its load-path frames and its AttributeError / TypeError lines; both in
        one traceback (or chain) are the model's code failing while it loads."""
        self._traceback_last = line_no
        if _TRACEBACK_HEAD in raw:  # possibly after a message on its line ("Scheduler hit an exception: Traceback ...")
            if self._traceback_state != "chaining":
                self._forget_traceback()
                self._traceback_first = line_no
            self._traceback_state = "open"
            return
        if any(sentence in raw for sentence in _CHAINED):
            self._traceback_state = "chaining"
            return
        frame = _FRAME.match(message)
        if frame is not None:
            if self._traceback_state in ("none", "ended"):  # frames with no header: a copy that begins inside one
                self._forget_traceback()
                self._traceback_first = line_no
            self._traceback_state = "open"
            if frame["function"] == "<module>":
                if (init := _PACKAGE_INIT.match(frame["file"])) is not None:
                    self._package_roots[init["root"]] = init["package"]
                package = _PACKAGE_MODULE.search(frame["file"])
                name = (package["package"] or package["checkout"]) if package else self._package_under(frame["file"])
                self._module_package = name if name not in _ENGINE_PACKAGES else None
            if self._load_frame is None and _is_load_frame(frame["file"], frame["function"]):
                self._load_frame = f"{frame['function']} of {frame['file'].replace(chr(92), '/').rsplit('/', 1)[-1]}"
        else:
            exception = _EXCEPTION_LINE.match(message)
            if exception is None:
                return
            if self._traceback_state in ("none", "ended"):
                self._forget_traceback()
                self._traceback_first = line_no
            self._traceback_state = "ended"
            if not matched.isdisjoint(_SELF_NAMED):
                self._withdraw_frame_readings()
            if exception["exception"] in _LOAD_ERRORS:
                self._load_errors.append((line_no, self._as_shown(line_no, text), message))
            if exception["exception"] in _LOAD_ERRORS and self._module_package is not None:
                self._record(SIGNATURE_BY_NAME[_IMPORT_CODE], line_no, text, message, {"module": self._module_package, "exception": exception["exception"]})
        if self._load_frame is not None and self._load_errors:
            error_line, error_text, error_message = self._load_errors.pop(0)
            self._record(SIGNATURE_BY_NAME[_LOAD_CODE], error_line, error_text, error_message, {"load_step": self._load_frame})

    def _package_under(self, file: str) -> str | None:
        """The package whose folder holds this file, as the traceback's __init__ frames named them (the outermost: a
        subpackage's __init__ names the subpackage, not the distribution)."""
        roots = [root for root in self._package_roots if file.startswith(root)]
        return self._package_roots[min(roots, key=len)] if roots else None

    def _withdraw_frame_readings(self) -> None:
        """The traceback ends in an exception line that names its own kind (see _SELF_NAMED): its frames said only
        where it was raised, so what the frame rules read off them is withdrawn (an exception line over a frame name)."""
        for name, line_no, message, warning in self._frame_readings:
            key = (self.summary.starts, name)
            hits = self.hits.get(key)
            if hits is None:
                continue
            hits.count -= 1
            hits.not_warnings -= not warning
            kept = [example for example in hits.examples if example[0] != line_no]
            if len(kept) < len(hits.examples):
                hits.messages.discard(message)
                hits.examples = kept
            if hits.count <= 0 or not hits.examples:
                del self.hits[key]
        self._frame_readings = []

    def _record(self, signature: Signature, line_no: int, text: str, message: str, groups: dict[str, str], warning: bool = False) -> None:
        hits = self.hits.setdefault((self.summary.starts, signature.name), _SignatureHits())
        hits.count += 1
        hits.not_warnings += not warning
        hits.serving_at_last = self.serving
        hits.last_line = line_no
        hits.steps_at_last = self.steps
        limit = _EVERY_EXAMPLE_LIMIT if signature.name in _EVERY_EXAMPLE else EVIDENCE_PER_SIGNATURE
        if len(hits.examples) < limit and message not in hits.messages:
            hits.messages.add(message)
            hits.examples.append((line_no, clean_line(self._as_shown(line_no, text)), groups))

    def _as_shown(self, line_no: int, text: str) -> str:
        """The line as the log shows it, its carriers' text included, when it is the line being examined and a
        carrier's text was removed from it (see _bare); else the text read."""
        return strip_colour_text(self._shown[1].decode("utf-8", "replace")) if self._shown is not None and self._shown[0] == line_no else text


# Prefixes other launchers and engines put before a message, after those strip_prefix removes:
# vLLM's logger prefix and process tags (the vLLM log module's), `docker logs -t`'s nanosecond stamp,
# torchrun's "[rank0]:", the logging module's "2025-03-07 23:50:27,531 - __main__ - INFO - " of a
# wrapper that relays SGLang's output, and SGLang's own "[time rank]" prefix again inside such a wrapper.
# FastChat's logger relaying a worker's output ("%(asctime)s | %(levelname)s | %(name)s | %(message)s",
# fastchat/utils.py build_logger, the worker's stderr as the logger "stderr": "2024-02-20 21:46:23 |
# ERROR | stderr | "), likewise before the bare stamp.
# Last, a bare "2025-02-06 07:14:10 " stamp (Docker Desktop's log view, `ts`-style tools): after the
# logging module's forms, which start the same way and must keep their level; and a short "04-20
# 13:32:25.784" stamp a log viewer put before each line with no separator (a frame keeps its two
# spaces, a quoted source line its four, an exception line none: only the stamp is removed).
_MORE_PREFIX = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\s+"
    r"|\[rank\d+\]:\s*"
    r"|(?P<level>WARN)\s+\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+(?:\[[^\]]*\]|[\w.]+:\d+\])\s*"
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:,\d+)? - [\w.]+ - (?P<level2>[A-Z]+) - "
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \| (?P<level3>[A-Z]+) \| [\w.]+ \| "
    r"|\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: [A-Z][A-Z_]*\d+)*\] "
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+"
    r"|\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}(?!\d)"
)
# A message at warning level: Python's warnings ("/path/x.py:13: UserWarning: ..."), a logger's
# "WARNING ..." / "Warning: ...", c10's "[W502 ...]" / "[W ...]" and glog's "W0224 ...".
# SGLang's registries log a skipped module with logger.warning (models/registry.py:132, "Ignore import error
# when loading {name}: {e}"), but SGLang's log format prints no level: the exception text it carries ("...:
# cannot open shared object file") names a failure only as a warning does.
_WARNING_MESSAGE = re.compile(r"^(?:WARNING|WARN|Warning)\b[:\s]|^(?:\S+:\d+: )?\w*Warning: |^\[W(?:\d{3,4})? |^W\d{4} |^Ignore import error when loading ")
_WARNING_LEVELS = {"WARNING", "WARN"}


def _is_load_frame(path: str, function: str) -> bool:
    """A frame of the model's load path (see _LOAD_FRAMES), by its file and function."""
    path = path.replace("\\", "/")
    return any(function in functions and where.search(path) for where, functions in _LOAD_FRAMES)


def _is_nccl_info(raw: bytes) -> bool:
    """An NCCL INFO line ("host:pid:tid [dev] NCCL INFO ..."), not a line that has one run into it
    after an error (a paste that lost its newlines)."""
    where = raw.find(_NCCL_INFO)
    return where >= 0 and b"rror" not in raw[:where]


def _unwrap(message: str) -> tuple[str, bool]:
    """The message without launcher and engine prefixes, and whether it was logged as a warning."""
    warning = False
    while True:
        unwrapped, vllm_warning = vllm_log.strip_prefix(message)
        if unwrapped is not message and len(unwrapped) < len(message):
            warning = warning or vllm_warning
            message = unwrapped
            continue
        found = _MORE_PREFIX.match(message)
        if not found or not found.end():
            break
        warning = warning or (found.group("level") or found.group("level2") or found.group("level3") or "") in _WARNING_LEVELS
        message = message[found.end() :]
    return message, warning or bool(_WARNING_MESSAGE.match(message))


def _match(raw: bytes, text: str | None) -> tuple[str, str, dict[Signature, tuple[dict[str, str], bool]], bool]:
    """The catalogue signatures one line proves, each with the named groups its triggers read and
    whether a trigger that proves its class at warning level matched; the line decoded (only when a
    literal is in it: most lines cost one `in` per literal), its message (its log prefixes removed)
    and whether it is a warning. A traceback frame quoting source is no event, but for the triggers
    that read a call's own words (`quotes_source`)."""
    matched: dict[Signature, tuple[dict[str, str], bool]] = {}  # groups of all of a signature's triggers
    message = ""
    warning = False
    source = False
    for literal, entries in _INDEX:
        if literal not in raw:
            continue
        if not message:
            if text is None:
                text = raw.decode("utf-8", "replace")
            message, warning = _unwrap(strip_prefix(text).message)
            source = bool(_SOURCE_LINE.match(message))
            message = message.strip()
            if _REQUEST_ECHO.match(message):
                return text, message, {}, False
        for signature, pattern, as_warning, quotes_source in entries:
            if source and not quotes_source:
                continue
            found = pattern.search(message) if pattern is not None else None
            if pattern is not None and found is None:
                continue
            groups, proven = matched.get(signature, ({}, False))
            matched[signature] = (groups, proven or as_warning)
            if found is not None:
                for key, value in found.groupdict().items():
                    if value is not None:
                        groups.setdefault(key, value)
    return text or "", message, matched, warning and not source


def signatures_in(line: str) -> tuple[Signature, ...]:
    """The signatures a single log line proves, best-ranked first: the agent's fail-fast reads the
    same catalogue as `fleet diagnose`. NCCL INFO lines prove nothing (see _NCCL_INFO); a warning
    line proves only findings (an optional extension's import warning is no reason to stop)."""
    raw = strip_carriers(line.encode("utf-8", "surrogateescape"))
    if _is_nccl_info(raw):
        return ()
    _, _, matched, warning = _match(raw, line)
    found = (signature for signature, (_, as_warning) in matched.items() if not warning or as_warning or signature.kind is Kind.FINDING)
    return tuple(sorted(found, key=lambda signature: signature.rank))


def _figures(scan: _Scanner, start: int, hint: DiagnosisHint | None) -> dict[str, object]:
    summary = scan.summary
    figures: dict[str, object] = {}
    if summary.kv_cache is not None:
        figures["kv_tokens"] = summary.kv_cache.tokens
    for name, value in scan.vllm_kv.items():
        figures.setdefault(name, value)
    if summary.mamba_cache is not None:
        figures["max_mamba_cache_size"] = summary.mamba_cache.max_mamba_cache_size
    if summary.scheduler is not None:
        figures["context_len"] = summary.scheduler.context_len
        figures["max_total_num_tokens"] = summary.scheduler.max_total_num_tokens
    if summary.server_args is not None:
        args = summary.server_args.args
        for name, figure in (
            ("mem_fraction_static", "mem_fraction_static"),
            ("max_running_requests", "requested_max_running_requests"),
            ("context_length", "context_len"),
            ("cuda_graph_max_bs", "cuda_graph_max_bs"),
            ("cuda_graph_max_bs_decode", "cuda_graph_max_bs"),  # 0.5.23's name for it (flags.py renamed)
        ):
            value = args.get(name)
            if value not in (None, "None") and figure not in figures:
                figures[figure] = value
    if summary.last_ddtree is not None:
        figures["ddtree_budget"] = summary.last_ddtree.budget
        figures["ddtree_accepted"] = f"{summary.last_ddtree.avg_accepted_drafts:.2f}"
    if summary.last_phase is not None:
        figures["last_phase"] = _PHASE_ACTIVITY[summary.last_phase.phase]
        if summary.last_phase.phase in _CAPTURE_PHASES:
            figures["capture_step"] = "CUDA graph capture"
    if (start, "cuda_graph_capture_failed") in scan.hits:
        figures["capture_step"] = "CUDA graph capture"
    if hint is not None and hint.start_timeout_s is not None:
        figures["timeout_s"] = hint.start_timeout_s
    return figures


def _derive(figures: dict[str, object]) -> dict[str, object]:
    """Figures computed from others, for fix texts."""
    if figures.get("context_len") is not None and figures.get("max_new_tokens") is not None:
        figures["max_prompt_tokens"] = int(str(figures["context_len"])) - int(str(figures["max_new_tokens"]))
    # A context length to suggest: the KV pool's tokens, when there are some and fewer than the
    # context asked (a pool of 0 tokens makes "--context-length 0" no advice at all).
    kv_tokens, context = _integer(figures.get("kv_tokens")), _integer(figures.get("max_model_len", figures.get("context_len")))
    if kv_tokens is not None and kv_tokens > 0 and (context is None or kv_tokens < context):
        figures["context_that_fits"] = kv_tokens
    return figures


def _integer(value: object) -> int | None:
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None


def _line_groups(hits: _SignatureHits) -> dict[str, str]:
    """The figures of one line of the root cause (the first with the most): figures of two lines
    (two requests that exceeded the context differently) would make one request of numbers that
    belong to two."""
    groups: dict[str, str] = {}
    for _, _, found in hits.examples:
        if len(found) > len(groups):
            groups = dict(found)
    return groups


def _release(scan: _Scanner, hint: DiagnosisHint | None) -> str:
    """The SGLang release whose flags the advice names."""
    if hint is not None and hint.sglang_version is not None:
        return choose_release(hint.sglang_version).release
    if scan.summary.server_args is not None:
        return release_of_fields(scan.summary.server_args.args)
    return KNOWN_RELEASES[-1]


def _classify(scan: _Scanner, path: str, hint: DiagnosisHint | None) -> Diagnosis:
    start = scan.summary.starts
    current = {name: hits for (hit_start, name), hits in scan.hits.items() if hit_start == start}
    fatal: list[tuple[Signature, _SignatureHits]] = []
    recovered: list[_SignatureHits] = []
    # Errors the start went on after (fatal over warning, extended): a failure is where the start stops, so an error
    # the engine said it handled, or one after which the start went through further steps and came up, is not it.
    signalled = scan.signalled.get(start)
    for name, hits in list(current.items()):
        if signalled is not None and SIGNATURE_BY_NAME[name].kind is not Kind.FINDING and hits.examples[0][0] >= signalled[0]:
            del current[name]  # the teardown of a stop by a signal
            continue
        if SIGNATURE_BY_NAME[name].kind is not Kind.FINDING and (_handled(hits) or _before_up(scan, start, hits) or _in_failed_call(scan, start, hits)):
            del current[name]
            if hits.not_warnings:  # a failure's words on warning lines only were never more than a warning
                recovered.append(hits)
    warned: list[tuple[Signature, _SignatureHits]] = []  # failures seen on warning lines only
    went_on: list[_SignatureHits] = []  # of them, those the start went on past (see _went_on_past)
    explained = any(SIGNATURE_BY_NAME[name].kind is Kind.FATAL and hits.not_warnings for name, hits in current.items())
    for name, hits in current.items():
        signature = SIGNATURE_BY_NAME[name]
        if signature.kind is Kind.FINDING:
            continue
        if name == _LOAD_CODE and _came_up(scan, start):
            continue  # a load-path traceback of a start that came up (a request's processor, a weight update): no start-up failure
        if name == _KV_NONE_LEFT and not _failed_after(current, hits):
            continue  # vLLM's profile figure at or below zero is read only where the start then fails (see the catalogue)
        if not hits.not_warnings:
            warned.append((signature, hits))
            continue
        # Beside a known failure, generic errors are its cascade; alone, they count only if the
        # server stopped serving after them.
        if signature.kind is Kind.GENERIC and not explained and scan.serving - hits.serving_at_last >= RECOVERY_SERVING_LINES:
            recovered.append(hits)
            continue
        if name in _REQUEST_ERRORS and not explained and (_answered_after(scan, start, current, hits) or _request_logged(scan, start, current, hits)):
            recovered.append(hits)  # a request's exception, answered with its error status: the server lives on
            continue
        fatal.append((signature, hits))
    if len(fatal) > 1:
        # A traceback's frames say only that something raised: beside any other error line they add nothing.
        fatal = [item for item in fatal if item[0].name != "traceback_frames"]
    if fatal and all(signature.name in _NO_CAUSE for signature, _ in fatal) and not _came_up(scan, start) and _startup_seen(scan) is not None:
        # A traceback's header with no exception names no cause; the start's last step (or the run
        # record's timeout) says more: weights still loading when the launcher gave up and printed it.
        fatal = []
    arch_warning = scan.hits.get((start, "torch_lacks_gpu_arch"))
    if arch_warning is not None and not _came_up(scan, start) and not any(signature.kind is Kind.FATAL for signature, _ in fatal):
        # PyTorch warned that it has no kernels for this GPU (torch/cuda/__init__.py, _check_capability's
        # incompatible_device_warn) and this start never came up with no other failure named: every CUDA
        # kernel it launches fails for that reason, whether or not the log shows the next line.
        fatal.append((SIGNATURE_BY_NAME["unsupported_gpu_arch"], arch_warning))
    fatal.sort(key=_root_first)
    fatal = _causes_before_wrappers(fatal)
    fatal = _engine_failure_before_wait(fatal)
    # A failure named only on warning lines counts when nothing else failed and the server never
    # came up; after any real error line it is at most a consequence.
    if warned and not _came_up(scan, start):
        # Fatal over warning, for a start cut short: a failure named on a warning line that start-up steps followed,
        # with no error line after it, is one the engine logged and went on past (vLLM's platforms/interface.py
        # import_kernels, 0.11.1 :201: `except ImportError as e: logger.warning("Failed to import from vllm._C: %r",
        # e)`, then the start continues: a TPU or plugin build has no compiled _C). The log ends later, in a later
        # step: a cut start, read from its last step, with the warning among the findings. With an error line after
        # it (the first op call failing, a traceback) or no step after it, the warning still names the failure.
        past = [_went_on_past(scan, current, hits) for _, hits in warned]
        went_on = [hits for (_, hits), gone_on in zip(warned, past) if gone_on]
        warned = [item for item, gone_on in zip(warned, past) if not gone_on]
    if warned and not _came_up(scan, start):
        warned.sort(key=_root_first)
        generic_at = next((i for i, (signature, _) in enumerate(fatal) if signature.kind is Kind.GENERIC), len(fatal))
        fatal[generic_at:generic_at] = [item for item in warned if item[0].kind is Kind.FATAL]

    figures = _figures(scan, start, hint)
    release = _release(scan, hint)
    failure_class: str | None = None
    evidence: tuple[Evidence, ...] = ()
    fix: str | None = None
    consequences: tuple[str, ...] = ()
    if fatal:
        root, root_hits = fatal[0]
        assert root.failure_class is not None
        failure_class = root.failure_class.value
        if root.failure_class is FailureClass.SERVER_START_TIMEOUT and _came_up(scan, start):
            failure_class = FailureClass.UNKNOWN.value  # the watchdog cut a hang while serving
        elif root.kind is Kind.GENERIC and (start, "torch_lacks_gpu_arch") in scan.hits:
            # PyTorch warned that it has no kernels for this GPU, then the start failed: that is why.
            failure_class = FailureClass.UNSUPPORTED_GPU_ARCH.value
            root, root_hits = SIGNATURE_BY_NAME["unsupported_gpu_arch"], scan.hits[(start, "torch_lacks_gpu_arch")]
        elif root.name == _ALLREDUCE_CHECK and not _captured_last(scan, start):
            # vLLM's custom all-reduce's CUDACHECK away from a CUDA graph capture (see the catalogue): the CUDA error
            # string's own class, the device's memory for cudaErrorMemoryAllocation's 'out of memory', else unknown.
            cuda_error = root_hits.examples[0][2].get("cuda_error", "")
            failure_class = (FailureClass.CUDA_OOM if cuda_error == "out of memory" else FailureClass.UNKNOWN).value
        elif root.failure_class is FailureClass.MODEL_LOAD_ERROR and (skipped := _skipped_import_of(scan, start, root_hits)) is not None:
            # The registry refused an architecture whose module SGLang skipped because its import failed: the
            # import is why (the refusal alone would send the user looking for an unsupported model).
            failure_class = FailureClass.IMPORT_ERROR.value
            root, root_hits = SIGNATURE_BY_NAME["import_error"], skipped
        evidence = tuple(Evidence(line, text) for line, text, _ in root_hits.examples)
        if root.kind is Kind.GENERIC:
            evidence = _generic_evidence([hits for signature, hits in fatal if signature.kind is Kind.GENERIC])
        elif root.rank >= CONSEQUENCE_RANK:
            # A wrapper or a frame (capture failed, load_weights): the exception it carries says why.
            after = [item for item in _generic_evidence([h for s, h in fatal if s.kind is Kind.GENERIC]) if item.line > evidence[0].line]
            shown = {item.line for item in evidence}
            evidence += tuple([item for item in after if item.line not in shown][:EVIDENCE_PER_SIGNATURE])
        figures = _derive({**figures, **_line_groups(root_hits)})
        if root.failure_class is FailureClass.SERVER_START_TIMEOUT:
            stalled = _stalled_at(scan)
            figures.setdefault("last_phase", stalled.text if stalled else None)
            if stalled is not None and stalled.line < evidence[0].line:
                evidence = (Evidence(stalled.line, f"last startup step: {stalled.text}"), *evidence)
        fix = fill_fix(root.fixes, figures, release)
        consequences = tuple(dict.fromkeys(signature.failure_class.value for signature, _ in fatal[1:] if signature.failure_class not in (None, root.failure_class, FailureClass.UNKNOWN)))
    elif not _came_up(scan, start) and _startup_seen(scan) is not None:
        # The log ends during startup without a fatal line. With the run record's word that the start
        # timed out, that is the failure. From the log alone: a step that began and never ended (weights
        # loading, graphs capturing, kernels compiling, communicators forming) is a stalled start; a log
        # that ends between steps was stopped, killed or cut: unknown. The stall point is the evidence.
        stalled = _stalled_at(scan)
        if stalled is not None:
            figures["last_phase"] = stalled.text
            evidence = (Evidence(stalled.line, f"last startup step: {stalled.text}"),)
        if hint is not None and hint.server_start_timed_out:
            failure_class = FailureClass.SERVER_START_TIMEOUT.value
            fix = fill_fix(SERVER_START_TIMEOUT_FIXES, figures, release)
        elif signalled is not None:
            # Stopped by a signal before it came up: what stopped it is not in the log; where it was is.
            failure_class = FailureClass.UNKNOWN.value
            evidence = (*evidence, Evidence(signalled[1], f"stopped by a signal: {signalled[2]}"))
            fix = fill_fix(STARTUP_INCOMPLETE_FIXES, figures, release)
        elif stalled is not None and len(waits := [line for line, steps in scan.shm_waits if steps == scan.steps and line > stalled.line]) >= _SHM_WAIT_RUN:
            failure_class = FailureClass.SERVER_START_TIMEOUT.value
            figures["stall_detail"] = f"after it, {len(waits)} of vLLM's 'No available shared memory broadcast block found' notices, lines {waits[0]}-{waits[-1]}"
            evidence = (
                Evidence(stalled.line, f"stalled after: {stalled.text}"),
                Evidence(waits[0], "waiting on a peer: no shared memory broadcast block found"),
                Evidence(waits[-1], f"still waiting, {len(waits)} notices later"),
            )
            fix = fill_fix(STALLED_START_FIXES, figures, release)
        elif stalled is not None and _under_way(scan, stalled):
            failure_class = FailureClass.SERVER_START_TIMEOUT.value
            tail = scan.lines - stalled.line
            figures["stall_detail"] = f"stalled at line {stalled.line}" + (f", {tail} more lines and no step after it" if tail else ", the last line of the log")
            evidence = (Evidence(stalled.line, f"stalled at: {stalled.text}"),)
            fix = fill_fix(STALLED_START_FIXES, figures, release)
        else:
            failure_class = FailureClass.UNKNOWN.value
            fix = fill_fix(STARTUP_INCOMPLETE_FIXES, figures, release)
    elif hint is None and not _came_up(scan, start) and start not in scan.at_work and start not in scan.answered_error and signalled is None:
        # Healthy needs positive evidence where the log is all there is: no failure, but no start-up step, no ready line
        # and nothing of a server at work either (a few lines of a launcher, a start cut at its first lines, a warning
        # alone). Nothing says the server ran. (A caller with a run's record passes a hint: the record says more.)
        failure_class = FailureClass.UNKNOWN.value
        fix = fill_fix(NOTHING_OF_A_SERVER_FIXES, figures, release)

    findings = _findings(scan, start, figures, recovered, failure_class, release, went_on)
    return Diagnosis(path, failure_class, evidence, findings, fix, consequences, scan.summary, figures)


def _answered_after(scan: _Scanner, start: int, current: Mapping[str, _SignatureHits], hits: _SignatureHits) -> bool:
    """The HTTP server answered a request with an error status after this exception's last line, and no other
    unexplained error (a process that died, a CUDA error) is in the start: the exception was that request's."""
    answered = scan.answered_error.get(start)
    if answered is None or answered <= hits.last_line:
        return False
    return all(name in _REQUEST_ERRORS for name, other in current.items() if SIGNATURE_BY_NAME[name].kind is Kind.GENERIC and other.not_warnings)


def _request_logged(scan: _Scanner, start: int, current: Mapping[str, _SignatureHits], hits: _SignatureHits) -> bool:
    """Every line of this exception lies under SGLang's "Error in request: " (handle_request's logger.exception, then a
    500 answer; see _REQUEST_ERROR_LOGGED), and every other unexplained error of the start does too: one request failed."""
    spans = scan.request_errors.get(start)
    if not spans:
        return False

    def inside(other: _SignatureHits) -> bool:
        lines = [line for line, _, _ in other.examples] + [other.last_line]
        return all(any(first <= line <= last for first, last in spans) for line in lines)

    return all(inside(other) for name, other in current.items() if SIGNATURE_BY_NAME[name].kind is Kind.GENERIC and other.not_warnings) and inside(hits)


def _skipped_import_of(scan: _Scanner, start: int, refusal: _SignatureHits) -> _SignatureHits | None:
    """The skip line of this start (SGLang's "Ignore import error when loading {module}: {e}", the
    `import_skipped` finding) for a module that defines an architecture the refusal names, before it, with
    the refusal: evidence of an import failure. SGLang names a model's or processor's module after its family
    with the version dropped (models/qwen2_5_vl.py defines Qwen2_5_VLForConditionalGeneration,
    multimodal_processors/qwen_vl.py serves Qwen2-VL and Qwen2.5-VL, models/glm4.py Glm4ForCausalLM): the
    module name's letters begin the architecture's. A skip of another model's module explains nothing."""
    skips = scan.hits.get((start, "import_skipped"))
    refused_line, refused_text, refused_groups = refusal.examples[0]
    named = refused_groups.get("architectures")
    if skips is None or named is None:
        return None
    architectures = {_letters(name) for name in _ARCHITECTURE.findall(named)}
    for line, text, groups in skips.examples:
        module = _letters(groups.get("skipped_module", "").rsplit(".", 1)[-1])
        if line < refused_line and len(module) >= 3 and any(name.startswith(module) for name in architectures):
            return _SignatureHits(count=1, not_warnings=1, examples=[(line, text, groups), (refused_line, refused_text, refused_groups)])
    return None


def _letters(name: str) -> str:
    return "".join(char for char in name.lower() if char.isalpha())


def _root_first(item: tuple[Signature, _SignatureHits]) -> tuple[int, int]:
    """Sort key: causes by their first line, then consequences by rank, each by first line."""
    signature, hits = item
    first_line = hits.examples[0][0]
    return (0, first_line) if signature.rank < CONSEQUENCE_RANK else (signature.rank, first_line)


def _causes_before_wrappers(fatal: list[tuple[Signature, _SignatureHits]]) -> list[tuple[Signature, _SignatureHits]]:
    """A wrapper ("Capture cuda graph failed: <e>") loses to a failure of another signature that is on
    its own line or before it: what it re-raised, or a peer's collective failure that made it fail. A
    failure printed after the wrapper (the other ranks' NCCL timeouts) stays its consequence."""
    if not fatal or not fatal[0][0].wrapper:
        return fatal
    wrapper_line = fatal[0][1].examples[0][0]
    for index, (signature, hits) in enumerate(fatal[1:], 1):
        if signature.kind is Kind.FATAL and not signature.wrapper and hits.examples[0][0] <= wrapper_line:
            return [fatal[index], *fatal[:index], *fatal[index + 1 :]]
    return fatal


def _failed_after(current: dict[str, _SignatureHits], hits: _SignatureHits) -> bool:
    """Another error line (a failure or an unexplained error, not a warning) of the same start after these hits' first line."""
    first = hits.examples[0][0]
    return any(SIGNATURE_BY_NAME[name].kind is not Kind.FINDING and other is not hits and other.not_warnings and other.last_line > first for name, other in current.items())


def _engine_failure_before_wait(fatal: list[tuple[Signature, _SignatureHits]]) -> list[tuple[Signature, _SignatureHits]]:
    """vLLM's front end timed out waiting for its engine core (engine_start_timeout): an engine core's error printed
    before the timeout, even one no class names, is why it never answered (cause over consequence); the timeout's own
    traceback (its header and frames, on lines before its exception line) is no such error."""
    if not fatal or fatal[0][0].name != _ENGINE_WAIT:
        return fatal
    wait_line = fatal[0][1].examples[0][0]
    for index, (signature, hits) in enumerate(fatal[1:], 1):
        if signature.kind is Kind.GENERIC and signature.name not in _NO_CAUSE and hits.examples[0][0] < wait_line:
            return [fatal[index], *fatal[:index], *fatal[index + 1 :]]
    return fatal


def _in_failed_call(scan: _Scanner, start: int, hits: _SignatureHits) -> bool:
    """Every line of these hits is inside a utility call that failed on a live server (see _CALL_FAILED): the start had
    come up before it and answered a request after it, so the engine went on."""
    up = scan.up_at.get(start)
    if up is None:
        return False
    for call in scan.failed_calls.get(start, ()):
        if up < call.first and call.last and scan.last_answered > call.last and call.first <= hits.examples[0][0] and hits.last_line <= call.last:
            return True
    return False


def _went_on_past(scan: _Scanner, current: dict[str, _SignatureHits], hits: _SignatureHits) -> bool:
    """Start-up steps followed these warning-only hits and no error line of the start came after them."""
    return scan.steps > hits.steps_at_last and not _failed_after(current, hits)


def _handled(hits: _SignatureHits) -> bool:
    """The engine said it went on after every line of these hits (see _GOES_ON)."""
    return hits.handled_at >= hits.last_line


def _before_up(scan: _Scanner, start: int, hits: _SignatureHits) -> bool:
    """Every line of these hits came before the start came up, with start-up steps between: the start went on
    through its steps after them and became ready (listening, serving); whatever printed them did not stop it."""
    up = scan.up_at.get(start)
    return up is not None and hits.last_line < up and scan.steps_before_up.get(start, 0) > hits.steps_at_last


def _came_up(scan: _Scanner, start: int) -> bool:
    """The start became ready, served requests, or its HTTP server came up (a log cut after uvicorn's
    "running on" line, before the ready line, is no failure)."""
    return scan.summary.is_ready or scan.serving > 0 or scan.listening_start == start


def _captured_last(scan: _Scanner, start: int) -> bool:
    """The start's latest start-up step was a CUDA graph capture (under way or just done) and it never came up: a
    failure there happened under capture (vLLM's custom all-reduce registers its graph buffers as a capture ends)."""
    stalled = _stalled_at(scan)
    return stalled is not None and "cuda graph" in stalled.text.lower() and not _came_up(scan, start)


def _under_way(scan: _Scanner, stalled: Evidence) -> bool:
    """Was the last start-up step still under way when the log ended (it began and never finished)?"""
    phase = scan.summary.last_phase
    if scan.stall is not None and scan.stall[0] == stalled.line:
        return scan.stall[2]
    return phase is not None and phase.line_no == stalled.line and phase.phase in _PHASES_UNDER_WAY


def _startup_seen(scan: _Scanner) -> object | None:
    summary = scan.summary
    return summary.weights_loaded or summary.kv_cache or summary.scheduler or summary.last_phase or scan.stall


def _stalled_at(scan: _Scanner) -> Evidence | None:
    """The last thing a start that never became ready was doing: its last phase line, or a later
    startup activity (JIT kernels, NCCL set-up, weight shards) that no phase names."""
    phase = scan.summary.last_phase
    candidates: list[Evidence] = []
    if phase is not None:
        candidates.append(Evidence(phase.line_no, _PHASE_ACTIVITY[phase.phase]))
    summary = scan.summary
    # The scheduler's start summary (0.5.23 managers/scheduler.py:1268, logger.info(f"max_total_num_tokens=...,
    # chunked_prefill_size=..., max_prefill_tokens=..., max_running_requests=..., context_len=...,
    # available_gpu_mem=... GB") on TP rank 0, the log parser's SchedulerReady) ends the scheduler's own
    # start; the HTTP server and its warm-up come after it.
    for event, activity in (
        (summary.weights_loaded, "done loading weights"),
        (summary.kv_cache, "done allocating the KV cache"),
        (summary.scheduler, "done starting the scheduler (its start summary was logged)"),
    ):
        if event is not None:
            candidates.append(Evidence(event.line_no, activity))
    if scan.stall is not None:
        candidates.append(Evidence(*scan.stall[:2]))
    # The latest step; on one line the marker's wording (it knows whether the step was under way).
    return max(reversed(candidates), key=lambda item: item.line) if candidates else None


def _generic_evidence(generic: list[_SignatureHits]) -> tuple[Evidence, ...]:
    """For an unexplained error: the distinct error lines of every generic signature, in file order."""
    lines = sorted({(line, text) for hits in generic for line, text, _ in hits.examples})
    return tuple(Evidence(line, text) for line, text in lines[: 2 * EVIDENCE_PER_SIGNATURE])


def _findings(scan: _Scanner, start: int, figures: dict[str, object], recovered: list[_SignatureHits], failure_class: str | None, release: str, went_on: list[_SignatureHits]) -> tuple[Finding, ...]:
    findings: dict[str, Finding] = {}

    def add(name: str, line: int, text: str, count: int, extra: dict[str, str]) -> None:
        if name in findings:
            previous = findings[name]
            findings[name] = Finding(name, previous.line, previous.text, previous.advice, previous.count + count)
            return
        advice = fill_fix(SIGNATURE_BY_NAME[name].fixes, {**figures, **extra}, release)
        findings[name] = Finding(name, line, text, advice, count)

    for (hit_start, name), hits in sorted(scan.hits.items(), key=lambda item: item[1].examples[0][0]):
        signature = SIGNATURE_BY_NAME[name]
        line, text, groups = hits.examples[0]
        if signature.kind is Kind.FINDING:
            add(name, line, text, hits.count, groups)
        elif hit_start < start and signature.kind is Kind.FATAL:
            add("earlier_start_failed", line, text, 1, {})
    for hits in recovered:
        line, text, _ = hits.examples[0]
        add("recovered_error", line, text, hits.count, {})
    for hits in went_on:
        line, text, _ = hits.examples[0]
        add("warning_start_went_on", line, text, hits.count, {})
    return tuple(sorted(findings.values(), key=lambda finding: finding.line))


def diagnose_stream(stream: ReadInto, path: str, hint: DiagnosisHint | None = None) -> Diagnosis:
    scan = _Scanner()
    scan.scan(stream)
    return _classify(scan, path, hint)


def diagnose_text(lines: Iterable[str], path: str | Path = "<text>", hint: DiagnosisHint | None = None) -> Diagnosis:
    """Diagnose log lines already in memory (a pasted excerpt, a journald capture)."""
    data = "\n".join(line.rstrip("\n") for line in lines).encode("utf-8", "surrogateescape")
    return diagnose_stream(io.BytesIO(data + b"\n" if data else b""), str(path), hint)


def diagnose_file(path: Path, hint: DiagnosisHint | None = None) -> Diagnosis:
    with open(path, "rb", buffering=0) as stream:
        return diagnose_stream(stream, str(path), hint)


# -- result JSON ----------------------------------------------------------------------------------
@dataclass
class _JsonStrings:
    evidence: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    log_paths: list[str] = field(default_factory=list)


def _walk_json(value: object, key: str, found: _JsonStrings) -> None:
    if isinstance(value, dict):
        for child_key, child in value.items():
            _walk_json(child, str(child_key), found)
    elif isinstance(value, list):
        for child in value:
            _walk_json(child, key, found)
    elif isinstance(value, str):
        if key in _STATUS_KEYS:
            found.statuses.append(value)
        elif key == "log_path":
            found.log_paths.append(value)
        elif _EVIDENCE_KEYS.search(key) and value.strip():
            found.evidence.append(value)


@dataclass(frozen=True)
class ResultEvidence:
    """What a run's result JSON says about its failure: error texts (with the JSON line they start
    on), whether the server was killed for a start timeout, and the file names of its logs."""

    lines: tuple[tuple[int, str], ...]
    hint: DiagnosisHint
    log_names: tuple[str, ...]


def read_result_json(path: Path) -> ResultEvidence:
    """The failure texts of a result file: a fleet run result is read through the contract
    (its failure's message and evidence, its request errors); any other JSON -- a file a user
    names, from another tool -- by the strings under error-like keys."""
    # Bounded, regular files only, depth-limited: a result a host sent back is untrusted input.
    try:
        raw = read_text(path, RESULT_MAX_BYTES)
        document = parse_json(raw, str(path))
    except ContractError as error:
        raise ValueError(str(error)) from None
    if is_run_result(document):
        return _run_result_evidence(RunResult.from_json(document, str(path)), raw)
    found = _JsonStrings()
    _walk_json(document, "", found)
    timed_out = any(status in _START_TIMEOUT_VALUES for status in found.statuses)
    return _evidence(raw, found.evidence, timed_out, found.log_paths)


def is_run_result(document: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(document, dict) and document.get("schema") == RESULT_SCHEMA


def _run_result_evidence(result: RunResult, raw: str) -> ResultEvidence:
    failure = result.failure
    if failure is None or not (result.status is RunStatus.failed or result.status is RunStatus.partial):
        return ResultEvidence((), DiagnosisHint(), ())  # ok, or skipped on purpose: nothing to diagnose
    texts = [failure.message, *failure.evidence]
    texts += [str(request.get("error_message") or "") for request in result.requests if request.get("ok") is False]
    texts += [str(error.get("sample") or "") for error in (result.figures.get("errors") or {}).values() if isinstance(error, dict)]
    texts = list(dict.fromkeys(texts))  # a request's error is often its class's sample too
    log_paths = [path for path in (failure.log_path, result.log_path) if path]
    return _evidence(raw, [text for text in texts if text.strip()], failure.error_class in _START_TIMEOUT_VALUES, log_paths)


def _evidence(raw: str, texts: Sequence[str], timed_out: bool, log_paths: Sequence[str]) -> ResultEvidence:
    lines: list[tuple[int, str]] = []
    cursor = 0  # texts come in file order: search each one after the previous
    for value in texts:
        json_line = 0  # unknown, if the file escapes differently from either json.dumps form
        for encoded in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
            where = raw.find(encoded, cursor)
            if where >= 0:
                cursor = where + len(encoded)
                json_line = raw.count("\n", 0, where) + 1
                break
        lines.extend((json_line, part) for part in value.splitlines() if part.strip())
    seconds = next((float(m.group(1)) for text in texts if (m := _TIMEOUT_SECONDS.search(text))), None)
    names = tuple(dict.fromkeys(Path(log_path).name for log_path in log_paths))
    return ResultEvidence(tuple(lines), DiagnosisHint(timed_out, seconds if timed_out else None), names)


def _diagnose_result(path: Path, evidence: ResultEvidence) -> Diagnosis:
    diagnosis = diagnose_text([text for _, text in evidence.lines], path, evidence.hint)
    # Line numbers inside the extracted text -> lines of the JSON file.
    json_lines = [line for line, _ in evidence.lines]

    def remap(line: int) -> int:
        return json_lines[line - 1] if 0 < line <= len(json_lines) else line

    return Diagnosis(
        diagnosis.path,
        diagnosis.failure_class,
        tuple(Evidence(remap(item.line), item.text) for item in diagnosis.evidence),
        tuple(Finding(f.name, remap(f.line), f.text, f.advice, f.count) for f in diagnosis.findings),
        diagnosis.fix,
        diagnosis.consequences,
        diagnosis.summary,
    )


def _server_log_of(result_path: Path, names: Sequence[str], logs: Sequence[Path]) -> Path | None:
    """The server log a result names, as fetched into the tree: next to the result (a run folder),
    in the sweep dir's logs/ beside runs/, or the only log of that name in the tree."""
    for name in names:
        for candidate in (result_path.parent / name, result_path.parent.parent / SweepDir.LOGS / name):
            if candidate in logs:
                return candidate
        same = [log for log in logs if log.name == name]
        if len(same) == 1:
            return same[0]
    return None


def _agent_diagnosis(path: Path, diagnosis: Mapping[str, Any]) -> Diagnosis:
    """The diagnosis the agent read from the whole server log, as the result stores it: read, not redone."""
    evidence = tuple(Evidence(int(item.get("line") or 0), str(item.get("text") or "")) for item in diagnosis.get("evidence") or [] if isinstance(item, Mapping))
    fix = diagnosis.get("fix")
    figures = diagnosis.get("figures")
    return Diagnosis(
        str(path),
        str(diagnosis["failure_class"]),
        evidence,
        (),
        str(fix) if fix else None,
        figures=dict(figures) if isinstance(figures, Mapping) else {},
    )


def _diagnose_tree(root: Path) -> list[Diagnosis]:
    """A sweep folder (or any tree of them): each failure once, from server logs, failed run results
    and agent logs; plans, shards, facts, progress and ok runs are no evidence.

    - every server log is diagnosed once, with the start-timeout word of the result that names it;
    - a failed run whose server log is in the tree and shows a failure is that failure (several runs
      of one dead server are one failure); otherwise the agent's stored diagnosis, else its own texts
      (a client-side 400, a start timeout whose log was not fetched);
    - an agent log speaks only of what no server log or result already showed (the agent's own crash).
    """
    # Regular files only: a symlink a host planted among its results must not make fleet read
    # (and print) whatever it points at on this machine.
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    agent_logs = [p for p in files if p.name == SweepDir.AGENT_LOG]
    logs = [p for p in files if p.suffix in _LOG_SUFFIXES and p.name != SweepDir.AGENT_LOG]
    failed: list[tuple[Path, ResultEvidence, Path | None, Mapping[str, Any] | None]] = []
    hints: dict[Path, DiagnosisHint] = {}
    records = False  # any run record in the tree
    for path in (p for p in files if p.suffix in _RESULT_SUFFIXES):
        try:
            document = parse_json(read_text(path, RESULT_MAX_BYTES), str(path))
            if not is_run_result(document):
                continue  # plan.json, shard.json, facts, progress: never a failure
            records = True
            result = RunResult.from_json(document, str(path))
            evidence = read_result_json(path)
        except (ContractError, ValueError):
            continue  # not a result of ours, or a bad one (named when given explicitly)
        if not evidence.lines and not evidence.hint.server_start_timed_out:
            continue  # an ok or skipped run
        log = _server_log_of(path, evidence.log_names, logs)
        if log is not None and evidence.hint.server_start_timed_out:
            hints[log] = evidence.hint
        failed.append((path, evidence, log, result.failure.diagnosis if result.failure else None))
    diagnoses: list[Diagnosis] = []
    by_log: dict[Path, Diagnosis] = {}
    # A tree with run records says more than its logs: a server log that shows no failure is no failure there (a server
    # at --log-level warning prints no ready line). A tree of bare logs is read as bare logs.
    known = DiagnosisHint() if records else None
    for log in logs:
        by_log[log] = diagnose_file(log, hints.get(log, known))
        diagnoses.append(by_log[log])
    for path, evidence, log, stored in failed:
        if log is not None and by_log[log].failure_class is not None:
            continue  # its server log already shows it
        if stored and stored.get("failure_class"):
            diagnoses.append(_agent_diagnosis(path, stored))
        else:
            diagnoses.append(_diagnose_result(path, evidence))
    found = {diagnosis.failure_class for diagnosis in diagnoses if diagnosis.failure_class}
    for agent_log in agent_logs:
        diagnosis = diagnose_file(agent_log, DiagnosisHint())  # the agent's own log: no server's, nothing to come up
        if diagnosis.failure_class is not None and diagnosis.failure_class not in found:
            diagnoses.append(replace(diagnosis, findings=()))
    return [diagnosis for diagnosis in diagnoses if diagnosis.failure_class is not None or diagnosis.findings]


def diagnose_paths(paths: Sequence[Path]) -> list[Diagnosis]:
    """Diagnose log files, result JSON files, run folders and whole sweep folders.

    A file named explicitly is always reported; inside folders (searched recursively) only logs and
    results that show a failure or a finding are.
    """
    diagnoses: list[Diagnosis] = []
    for path in paths:
        if path.is_dir():
            diagnoses.extend(_diagnose_tree(path))
        elif path.is_file():
            if path.suffix in _RESULT_SUFFIXES:
                evidence = read_result_json(path)
                diagnoses.append(_diagnose_result(path, evidence))
            else:
                diagnoses.append(diagnose_file(path))
        else:
            raise FileNotFoundError(f"{path}: no such file or folder to diagnose")
    return diagnoses


def render_diagnoses(diagnoses: Sequence[Diagnosis]) -> str:
    """Plain text for a terminal: one block per log."""
    if not diagnoses:
        return "No failures or findings.\n"
    blocks: list[str] = []
    for diagnosis in diagnoses:
        head = f"{diagnosis.path}: {diagnosis.failure_class or 'no failure'}"
        if diagnosis.consequences:
            head += f"  (then: {', '.join(diagnosis.consequences)})"
        lines = [head]
        lines += [f"  line {item.line}: {item.text}" for item in diagnosis.evidence]
        if diagnosis.fix:
            lines.append(f"  fix: {diagnosis.fix}")
        for finding in diagnosis.findings:
            times = f" (x{finding.count})" if finding.count > 1 else ""
            lines.append(f"  finding {finding.name}{times} at line {finding.line}: {finding.advice}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
