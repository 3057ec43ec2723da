"""The one failure-class vocabulary: results, diagnosis, fixes and reports all speak it.

A run's `Failure.error_class` (schema fleet.run_result/2, a string in the JSON) and a diagnosis'
`failure_class` are values of `FailureClass`. Two kinds of class share the enum:
- root causes (`ROOT_CAUSES`): what the server log proves (`fleet.host.diagnose.catalogue`), what
  the fixes act on (`fleet.fixes.autofix`);
- what the agent saw happen (a server died, a request timed out, a run was skipped): the record of
  a run when no log line names the cause. The agent's diagnosis of the server log (stored beside it
  as `Failure.diagnosis`) then carries the root cause; readers prefer it (`root_cause`).

Standard library only: shipped to hosts with the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


class FailureClass(str, Enum):
    # -- root causes: proved by a server log line (or by the run record: start timeout) ----------
    MAX_RUNNING_REQUESTS_ZERO = "max_running_requests_zero"
    KV_POOL_TOO_SMALL = "kv_pool_too_small"
    # The accelerator's memory ran out: named after CUDA, which it began with, but the class is the
    # device's memory, whatever the device (ROCm's HIP, Intel's XPU, Ascend's NPU print the same OOM).
    CUDA_OOM = "cuda_oom"
    CUDA_GRAPH_ERROR = "cuda_graph_error"
    CUDA_ILLEGAL_INSTRUCTION = "cuda_illegal_instruction"
    CUDA_ILLEGAL_MEMORY_ACCESS = "cuda_illegal_memory_access"
    UNSUPPORTED_GPU_ARCH = "unsupported_gpu_arch"
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    NCCL_ERROR = "nccl_error"
    PORT_IN_USE = "port_in_use"
    MODEL_LOAD_ERROR = "model_load_error"
    IMPORT_ERROR = "import_error"
    SERVER_START_TIMEOUT = "server_start_timeout"
    UNKNOWN = "unknown"

    # -- servers, as the agent saw them (fleet.host.agent.runner) --------------------------------
    SERVER_START_FAILED = "server_start_failed"
    SERVER_DIED = "server_died"
    SERVER_HUNG = "server_hung"
    WARMUP_FAILED = "warmup_failed"
    SERVICE_ERROR = "service_error"
    PORT_OR_GPU_BUSY = "port_or_gpu_busy"
    AGENT_ERROR = "agent_error"
    RESULTS_UNWRITABLE = "results_unwritable"  # a full or read-only disk: the agent stops launching servers

    # -- workloads (fleet.host.agent.drive, fleet.host.agent.results) ---------------------------
    SKIPPED = "skipped"  # the controller chose not to launch the run (quarantine, infeasible)
    NO_OUTPUT_TOKENS = "no_output_tokens"
    REQUESTS_FAILED = "requests_failed"
    UNKNOWN_MAX_RUNNING = "unknown_max_running_requests"
    CALIBRATION_FAILED = "calibration_failed"
    CONTEXT_TOO_SMALL = "context_too_small"
    # At temperature 0 a speculative server's tokens diverged early from the autoregressive
    # server's on most greedy prompts (fleet.host.agent.lossless): proved by the run record, fixed
    # by quarantine like an illegal instruction (a broken verify kernel does not mend on a retry).
    NOT_LOSSLESS = "not_lossless"
    # A workload's client tool (fleet.host.agent.kinds.tool) could not start, exited with an error,
    # outlived its time, or left an output fleet could not read: its output's tail is the evidence.
    CLIENT_TOOL_FAILED = "client_tool_failed"

    # -- requests (fleet.host.agent.client); the over-context 400 is CONTEXT_LENGTH_EXCEEDED -----
    HTTP_400 = "http_400"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    NO_TOKEN_TIMEOUT = "no_token_timeout"
    CONNECTION_REFUSED = "connection_refused"
    CONNECTION_RESET = "connection_reset"
    SERVER_ERROR_CHUNK = "server_error_chunk"
    ABORTED_BY_SERVER = "aborted_by_server"
    ABORTED_BY_AGENT = "aborted_by_agent"
    INCOMPLETE_STREAM = "incomplete_stream"
    BAD_RESPONSE = "bad_response"


ROOT_CAUSES: frozenset[FailureClass] = frozenset(
    {
        FailureClass.MAX_RUNNING_REQUESTS_ZERO,
        FailureClass.KV_POOL_TOO_SMALL,
        FailureClass.CUDA_OOM,
        FailureClass.CUDA_GRAPH_ERROR,
        FailureClass.CUDA_ILLEGAL_INSTRUCTION,
        FailureClass.CUDA_ILLEGAL_MEMORY_ACCESS,
        FailureClass.UNSUPPORTED_GPU_ARCH,
        FailureClass.CONTEXT_LENGTH_EXCEEDED,
        FailureClass.NCCL_ERROR,
        FailureClass.PORT_IN_USE,
        FailureClass.MODEL_LOAD_ERROR,
        FailureClass.IMPORT_ERROR,
        FailureClass.SERVER_START_TIMEOUT,
        FailureClass.UNKNOWN,
    }
)

VALUES: frozenset[str] = frozenset(member.value for member in FailureClass)


def parse_failure_class(value: str, where: str) -> FailureClass:
    """A failure class read from a file; `where` names the file and field for the error."""
    try:
        return FailureClass(value)
    except ValueError:
        raise ValueError(f"{where}: unknown failure class {value!r}; expected one of {', '.join(sorted(VALUES))}") from None


def root_cause(error_class: str, diagnosis: Mapping[str, Any] | None) -> str:
    """The class to report and fix: the diagnosis' root cause where the agent read one from the
    server log, else the run's own class (a request error, a skip). An `unknown` diagnosis says
    less than what the agent saw (`server_died`): the run's own class is kept then."""
    diagnosed = (diagnosis or {}).get("failure_class")
    if not diagnosed or (diagnosed == FailureClass.UNKNOWN.value and error_class):
        return error_class
    return str(diagnosed)
