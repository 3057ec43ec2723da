"""The failure-signature catalogue, as data.

Each `Signature` names the lines that prove something (its `Trigger`s), what it means (a failure
class, an unexplained error, or a non-fatal finding), how close to the root cause it sits (`rank`:
lower wins), and what to change (fix templates filled with figures from the log).

Why ranks: one fault prints a cascade. An illegal instruction on one rank is followed by an NCCL
watchdog timeout on the others and a "Scheduler hit an exception" everywhere; a CUDA OOM or an
illegal memory access during capture is wrapped in "Capture cuda graph failed". The classifier
picks the best-ranked fatal match, so the root cause wins over its consequences.

Texts come from SGLang v0.5.13 (`tp_worker.py`, `pool_configurator.py`,
`model_runner_kv_cache_mixin.py`, `cuda_graph_runner.py`, `tokenizer_manager.py`, `managers/utils.py`,
`configs/model_config.py`, `utils/network.py`, `server_args.py`, `mem_cache/common.py`,
`entrypoints/*`), PyTorch (CUDA error strings, c10d's ProcessGroupNCCL), NCCL, FlashInfer
(`compilation_context.py`), huggingface_hub/transformers and uvicorn. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from string import Formatter

from fleet.host.engines import engine
from fleet.host.failures import FailureClass


class Kind(str, Enum):
    FATAL = "fatal"  # proves its failure class wherever it appears
    GENERIC = "generic"  # an error no specific signature explains: "unknown", unless serving went on
    FINDING = "finding"  # worth telling, never a failure by itself


@dataclass(frozen=True)
class Trigger:
    """A line matches when it contains `literal` and (if given) `pattern` finds a match in the
    message with its log prefix removed. The literal is the cheap prefilter; named groups of the
    pattern become figures for the fix text."""

    literal: str
    pattern: str | None = None
    # Its source logs it at warning level although it is the failure (vLLM's scheduler drops a prompt
    # over the limit with logger.warning): on a warning line it still proves its class.
    proves_as_warning: bool = False
    # It reads a traceback's quoted source line (the call that raised), which proves nothing for any
    # other trigger: a call's own words can name the step that failed.
    quotes_source: bool = False


@dataclass(frozen=True)
class Signature:
    name: str
    kind: Kind
    failure_class: FailureClass | None
    rank: int
    triggers: tuple[Trigger, ...]
    # str.format templates over figures; the first whose fields are all known is used.
    fixes: tuple[str, ...]
    # A server goes on serving after it (a request it refused): the agent's fail-fast ignores it.
    server_survives: bool = False
    # It wraps or re-raises another failure ("Capture cuda graph failed: <e>"): a failure of another
    # signature on the same line or before it in the same start is its cause and wins over it.
    wrapper: bool = False


def _fatal(
    name: str,
    cls: FailureClass,
    rank: int,
    triggers: tuple[Trigger, ...],
    *fixes: str,
    server_survives: bool = False,
    wrapper: bool = False,
) -> Signature:
    return Signature(name, Kind.FATAL, cls, rank, triggers, fixes, server_survives, wrapper)


def _generic(name: str, rank: int, triggers: tuple[Trigger, ...], *fixes: str, server_survives: bool = False) -> Signature:
    return Signature(name, Kind.GENERIC, FailureClass.UNKNOWN, rank, triggers, fixes, server_survives)


def _finding(name: str, triggers: tuple[Trigger, ...], *advice: str) -> Signature:
    return Signature(name, Kind.FINDING, None, 10_000, triggers, advice)


T = Trigger
C = FailureClass
_EXC = r"^(?:[\w.]+\.)?"  # an exception line, possibly module-qualified: "torch.OutOfMemoryError: ..."
# A GPU architecture named (an SM or sm_ number, a compute capability, an AMD gfx target, an NVIDIA generation) and a
# refusal of it, in either order, in one message (unsupported_gpu_arch's generic trigger).
_ARCH = r"(?:\bsm_?\d{2,3}[a-z]?\b|\bSM ?\d{2,3}\w*|\b(?i:compute|CUDA) (?i:capabilit(?:y|ies))\b|\bgfx\d{2,4}\w*|\b(?:Volta|Turing|Ampere|Ada Lovelace|Hopper|Blackwell)\b)"
_REFUSAL = (
    r"(?i:\bnot supported\b|\bunsupported\b|\bnot implemented\b|\bincompatible\b|\bnot compatible\b|\btoo old\b|\bonly supports?\b|\brequires?\b|\bneeds?\b"
    # the same refusal in the words of SGLang 0.5.23's and vLLM 0.33's kernel and backend checks: "is only supported on sm90
    # and above", "is supported only on NVIDIA Blackwell SM100/SM103 GPUs", "is not available on compute capability 8.x",
    # "is SM90-only", "supports compute capability 9.0, 10.0, or 12.0; this tensor is on a 8.6 device", "MoE LoRA supports SM90
    # and SM100 only", "Please use Blackwell and above", "SM100-class CUDA device required"
    r"|\bonly supported\b|\bsupported only\b|\bnot available on\b|\w-only\b|\bsupports? (?:only )?(?=compute capabilit|SM ?\d|sm_?\d)"
    r"|\band above\b|\bor newer\b|\brequired\b)"
)
_ARCH_REFUSAL = rf".*?(?:{_ARCH}.*?{_REFUSAL}|{_REFUSAL}.*?{_ARCH})"
# The CUDA runtime's stream-capture errors, as cudaGetErrorString words them (HIP's wording where it differs):
# cuda_graph_capture_broken's triggers, each its own literal.
_CAPTURE_ERRORS = (
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
)
# An apostrophe as it reaches a log: plain, JSON- or repr-escaped (`model\'s`, `model\\'s`), typographic,
# or HTML-escaped inside an HTTP 400 body a client printed.
_APOS = r"(?:\\*'|\u2019|\\u2019|&#39;|&#x27;)"

# A checkpoint tensor's name as a KeyError's str() prints it: the whole message, quoted, dotted.
_BARE_WEIGHT_KEY = r"^'(?P<weight_name>[A-Za-z_]\w*(?:\.\w+)*\.(?:\w*weight\w*|\w*bias|\w*scales?|g_idx|qzeros|absmax))'$"

# argparse's prog as its refusal prints it: the program's base name (sys.argv[0]'s), a subcommand's parser
# adding its name ("vllm serve"); no path, no colon.
_ARGPARSE_PROG = r"^(?P<prog>[\w.-]+(?: [\w.-]+)*): error: "
_ARGPARSE_PROG_OPT = r"^(?:(?P<prog>[\w.-]+(?: [\w.-]+)*): )?error: "

_MEMORY_KNOBS = (
    "raise --mem-fraction-static a little, or give the pool more room: a shorter --context-length, a smaller {flag_cuda_graph_max_bs}, fewer --speculative-num-draft-tokens, or a larger --tp-size"
)

SIGNATURES: tuple[Signature, ...] = (
    # --- before the model is touched: the process could not even start -------------------------
    _fatal(
        "port_in_use",
        C.PORT_IN_USE,
        10,
        (
            # The group is optional (a bare "Address already in use" still counts); `.*?` lets it find the
            # port anywhere in the line instead of matching empty at its start.
            T("ddress already in use", r"(?:.*?(?:bind on address \('[^']*', |tcp://[^:\s]+:)(?P<port>\d+))?"),
            T("Port is already in use"),
            T("is not available in", r"(?P<port_name>\w+) at (?P<port>\d+) is not available in \d+ seconds"),
            T("is already in use", r"(?P<port_name>\w+_port) (?P<port>\d+) is already in use"),
            # SGLang's try_bind_socket (0.5.23 srt/utils/network.py:178), binding the server's and its internal ports:
            # raise OSError(f"Could not bind port {port} on any configured address family") when every address family's
            # bind failed; a port another process holds is what makes a bind fail on all of them.
            T("Could not bind port", r"Could not bind port (?P<port>\d+) on any configured address family"),
            # SGLang 0.5.23 utils.py reserve_port, binding a random port of 30000-39999 for an internal socket: raise
            # RuntimeError("No free port available.") when every bind failed (0.4.x utils.py: the same words without the
            # stop); its diffusion server under --strict-ports (multimodal_gen/runtime/server_args/server_args.py
            # _require_port): f"{name} port {port} is unavailable and --strict-ports is enabled. ..." when
            # is_port_available(port) is false, a port another process holds.
            T("No free port available"),
            T("is unavailable and --strict-ports is enabled", r"\b(?P<port_name>\w+) port (?P<port>\d+) is unavailable and --strict-ports is enabled"),
            # pyzmq's ZMQError for EADDRINUSE as libzmq words it ("zmq.error.ZMQError: Address in use (addr='tcp://*:42517')",
            # the engines' ZMQ ports: SGLang's scheduler and detokenizer IPC, vLLM's engine core and data-parallel sockets).
            T("ZMQError: Address in use", r"ZMQError: Address in use(?:.*?:(?P<port>\d+)\b)?"),
            # SGLang's diffusion runtime binding its scheduler's ZMQ socket (0.5.9 multimodal_gen/runtime/utils/common.py:219,
            # get_zmq_socket): it moves on to the next port only on EADDRINUSE (any other errno raises at once), and after the
            # last attempt logs f"Failed to bind ZMQ socket after {max_bind_retries} attempts. Original endpoint: {endpoint},
            # Last tried port: {port}" and re-raises: every port it tried was taken. The original endpoint's port is the one asked for.
            T("Failed to bind ZMQ socket after", r"Failed to bind ZMQ socket after \d+ attempts\. Original endpoint: \S*:(?P<port>\d+),"),
            # Ascend's HCCL binding its sockets, in CANN's error-code words (torch_npu raises the HCCL call's failure, e.g.
            # "HCCL function error: HcclGetRootInfo(&hcclID), error code is 11", and appends CANN's error message). The
            # CANN HCCL user guide, "Port Binding Failure on the Server (EJ0003)" (hiascend.com canncommercial 850
            # commlib/hcclug/hcclug_000035): "Bind_Failed(EJ0003): Failed to bind the IP port. Reason: The IP address and
            # port have been bound already." (older CANN prints "EJ0003: ... Failed to bind the IP port. ..."; 8.x
            # "Communication_Error_Bind_IP_Port(EI0020): ... The IP address <ip> and port <port> have already been bound."),
            # and HCCL's own log line for the same bind, host NIC (socket type 2) or device NIC (0, 1: "Parameter Plane
            # Port Binding Failure (EI0019)"): "[hccl_socket.cc:110] ... socket type[2], listen on ip[...] and specific
            # port[60000] fail. Please check the port status and whether the port is being used by other process.": a
            # port another process holds (a second program on the same host, or the previous run not yet gone).
            T("Failed to bind the IP port", r"(?P<hccl_bind>Failed to bind the IP port)\. Reason: The IP address and port have been bound already"),
            T("have already been bound", r"(?P<hccl_bind>The IP address \S+ and port (?P<port>\d+) have already been bound)"),
            T(
                "whether the port is being used by other process",
                r"(?P<hccl_bind>listen on ip\[[^\]]*\] and specific port\[(?P<port>\d+)\] fail)",
            ),
            # c10d's TCPStore server, the process group's rendezvous store on the first rank (torch/csrc/distributed/c10d/
            # socket.cpp SocketListenOp::run): each address family's bind failure is "The server socket has failed to bind to
            # {addr} (errno: {n} - {text})", and when none took, C10D_THROW_ERROR(DistNetworkError, "The server socket has
            # failed to listen on any local network address. port: {}, useIpv6: {}, code: {}, name: {}, message: {}")
            # (older torch appends the binds' lines instead). The bind fails on the port (EADDRINUSE, -98, in every copy
            # read): another process holds the store's port; a line that names another errno (EACCES, EADDRNOTAVAIL) is not this.
            T(
                "has failed to listen on any local network address",
                r"(?P<store_listen>The server socket has failed to listen on any local network address)\.(?!.*\bname: (?!EADDRINUSE\b)E[A-Z]+)"
                r"(?!.*\(errno: (?!98\b)\d+)(?:.*?\bport: (?P<port>\d+))?",
            ),
        ),
        "c10d's rendezvous store could not listen on port {port} ({store_listen}): another process holds the process "
        "group's port (a previous run not yet gone, or two engines on one host given the same MASTER_PORT, "
        "VLLM_PORT or --dist-init-addr / --nccl-port): stop it (`ss -ltnp 'sport = :{port}'` names it) or give each "
        "engine its own port.",
        "c10d's rendezvous store could not listen on its port ({store_listen}): another process holds the process "
        "group's port (a previous run not yet gone, or two engines on one host given the same MASTER_PORT, "
        "VLLM_PORT or --dist-init-addr / --nccl-port): stop it (`ss -ltnp` lists listeners) or give each engine its own port.",
        "Ascend's HCCL could not bind its socket ({hccl_bind}): another process holds HCCL's port (a second program on "
        "the same host or NPUs, or the previous run not yet gone): stop it, or let HCCL pick free ports "
        "(HCCL_HOST_SOCKET_PORT_RANGE=auto for the host NIC, HCCL_NPU_SOCKET_PORT_RANGE=auto for the device NIC).",
        "Port {port} is taken by another process: stop it (`ss -ltnp 'sport = :{port}'` names it) or start "
        "the server on another --port. SGLang also binds --port+1 and up for internal sockets and a "
        "--nccl-port, so leave a gap of 10 between servers on one host.",
        "A port the server needs is taken (a previous server still running?): stop the old process (`ss -ltnp` lists listeners) or choose another --port / --nccl-port, spaced 10 apart per server.",
    ),
    _fatal(
        "import_error",
        C.IMPORT_ERROR,
        20,
        (
            # importlib's "No module named '{name}'"; a quote whose closing quote the post dropped at the line's
            # end still names the module.
            T("ModuleNotFoundError", _EXC + r"ModuleNotFoundError: No module named '(?P<module>[\w.]+)(?:'|$)"),
            # The same missing module named inside another message: runpy's "Error while finding module
            # specification for 'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named
            # 'vllm')" (CPython Lib/runpy.py, _get_module_details: "{}: {}".format(type(ex).__name__, ex)),
            # or a launcher's print(f"Error: {e}"). CPython's text is importlib._bootstrap's
            # _ERR_MSG_PREFIX "No module named ". An exception's repr (vLLM's 'Failed to import from vllm._C
            # with ModuleNotFoundError("No module named ...")' warning) and SGLang's "Ignore import error
            # when loading <model>: No module named ..." (models/registry.py, str(e) only) name no "Error: ".
            T("No module named", r"\b\w*Error: No module named '(?P<module>[\w.]+)'"),
            T("ImportError", _EXC + r"ImportError: (?!.*\brequires? compute capability\b)(?:cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)')?"),
            T("cannot open shared object file", r"(?P<library>[\w.+-]+\.so[\w.]*): cannot open shared object file"),
            T("undefined symbol", r"undefined symbol: (?P<symbol>\S+)"),
            # torch_npu's op-plugin (and sgl-kernel-npu, which uses it) binding a CANN operator by name from the op API
            # library (op_plugin/utils/op_api_common.h EXEC_NPU_CMD: TORCH_CHECK(..., #aclnn_api " or " #aclnn_api
            # "GetWorkspaceSize not in ", GetOpApiLibName(), ", or ", GetOpApiLibName(), "not found.")): the installed CANN
            # has no such operator (a toolkit or kernels package older than the plugin) or no libopapi.so at all. Raised
            # wherever the op is first called, inside a graph capture too: the cause over the capture wrapper.
            T("GetWorkspaceSize not in ", r"(?P<aclnn_op>aclnn\w+) or \w+GetWorkspaceSize not in (?P<library>lib\w+\.so)"),
            # importlib.metadata: "PackageNotFoundError: No package metadata was found for sglang";
            # pkg_resources/transformers' require_version: "The 'sglang>=0.4.5' distribution was not found
            # and is required by this application".
            T("PackageNotFoundError", r"(?:metadata was found for (?:The ')?(?P<module>[\w.-]+))?"),
            T("distribution was not found", r"The '(?P<module>[\w.-]+)[^']*' distribution was not found"),
            T("DistributionNotFound", r"(?:The '(?P<module>[\w.-]+)[^']*' distribution)?"),
            # vLLM/SGLang/transformers guards: "flashinfer is not installed", "vllm is not installed.
            # Please install ..."; `pip` as the subject is pip's own chatter, not a failure.
            T(
                "is not installed",
                r"^(?:\w+: )?(?!pip\b)(?P<module>[\w.-]+) is not installed(?!.*(?:fall(?:ing)? ?back|[Uu]sing|will|skip|[Dd]isabl|ignor))",
            ),
            T("requires the package", r"requires the (?:package|library) `?(?P<module>[\w.-]+)"),
            # SGLang's package-version guard (0.5.23 srt/utils/common.py:2422 assert_pkg_version, called at start
            # for sgl-kernel, flashinfer and others): raise Exception(f"{pkg} is installed with version
            # {installed_version}, which is less than the minimum required version {min_version}. " + message), and
            # when importlib.metadata finds no such package f"{pkg} with minimum required version {min_version} is
            # not installed. ": an installed package the engine refuses, fixed by installing the right one.
            T(
                "which is less than the minimum required version",
                r"(?P<module>[\w.-]+) is installed with version (?P<installed_version>\S+), which is less than the minimum required version",
            ),
            T("with minimum required version", r"(?P<module>[\w.-]+) with minimum required version \S+ is not installed"),
            # A JIT build's link step (Triton's cuda_utils stub, a torch extension): GNU ld cannot find a
            # CUDA library, e.g. "/usr/bin/ld: cannot find -lcudart" / "-lcuda".
            T("cannot find -l", r"cannot find -l(?P<link_library>[\w.+-]+)"),
            # The same JIT stub's compile step: Triton builds its launcher (cuda_utils / the kernel launcher) with the host's C
            # compiler at first use, and with neither CC nor gcc/clang on PATH triton/runtime/build.py (_build) raises
            # RuntimeError("Failed to find C compiler. Please specify via CC environment variable."), here while vLLM's
            # gpu_model_runner imports a module whose @triton.autotune decorator reaches the driver.
            T("Failed to find C compiler. Please specify via CC", r"(?P<missing_compiler>Failed to find C compiler)"),
            # The same kind of run-time kernel build failing in the compiler: a header it cannot find. GCC's preprocessor
            # (libcpp/files.cc open_file_failed: cpp_errno_filename at CPP_DL_FATAL, printed through the diagnostic
            # printer as "<file>:<line>:<col>: fatal error: <header>: No such file or directory", then "compilation
            # terminated."; nvcc hands the host code to that compiler) and clang's ("<file>:<line>:<col>: fatal error:
            # '<header>' file not found"). Inside a JIT build (tvm-ffi's cpp/extension.py build_ninja raising
            # RuntimeError("ninja exited with status 1") with the build's stdout appended below it; torch's
            # cpp_extension "Error building extension"; FlashInfer's JIT; Triton's launcher stub) the build environment
            # lacks what the kernel's source includes: a host compiler too old for its C++ standard (nvcc's "The
            # -std=c++20 flag is not supported with the configured host compiler", GCC 8 without <version>), or a
            # toolkit's or Python's development headers not installed. As the link step's "cannot find -l<lib>" above,
            # the build tool's exit is the wrapper and this line the cause; the compiler's own format (a path with line
            # and column before "fatal error:") keeps other words out.
            T("fatal error: ", r"^\S+:\d+:\d+: fatal error: '?(?P<missing_header>[\w./+-]+)(?::|' file not found)(?: No such file or directory)?$"),
            # vLLM's warning that its compiled ops did not import, whatever the loader's words (Linux's "cannot
            # open shared object file", macOS dyld's "Symbol not found"): 0.4-0.6 _custom_ops.py:15
            # logger.warning("Failed to import from vllm._C with %r", e), 0.33 platforms/rocm.py:58 the same and
            # platforms/cpu.py:671 "Failed to import from vllm._C: %s" with repr(e). A warning line: it names the
            # failure only when nothing else failed and the start never came up (the classifier's rule).
            # FlashInfer's packages out of step or incomplete (flashinfer-python 0.7.4 jit/env.py:87/:168 f"{distribution}
            # version ({v}) does not match flashinfer version ({w}). ...", :182 "... does not match flashinfer-jit-cache version";
            # jit/core.py:384 and jit/attention/_lazy.py:82 MissingJITCacheError, a kernel module the installed JIT cache does not
            # hold while JIT is off; jit/cubin_loader.py:265 "... This means flashinfer-cubin is missing this file."): the kernel
            # library as installed cannot provide the kernel, fixed by installing matching, complete packages.
            T("does not match flashinfer", r"(?P<module>[\w.-]+) version \([^)]*\) does not match flashinfer(?:-jit-cache)? version"),
            T("MissingJITCacheError"),
            T("flashinfer-cubin is missing this file"),
            T("Failed to import from vllm._C", r"Failed to import from (?P<module>vllm\._C\w*)(?: with |: )\w+\("),
            # A kernel library whose installed build refuses this CUDA toolkit when it is imported: nvidia-cutlass-dsl's base
            # wheel (4.5.0, nvidia_cutlass_dsl/python_packages/cutlass/cute/experimental/__init__.py) is the unconditional
            # `raise NotImplementedError("CuTe Experimental module is only supported on Cuda toolkit 13.1 and above!")`,
            # the module itself coming with its cu13 libraries; FlashInfer's and SGLang's CuTe kernels import it (inside
            # graph capture or a warm-up forward, whose wrapper re-raises it: the import is the cause).
            T("is only supported on Cuda toolkit", r"(?P<toolkit_module>\w[\w ]*?) module is only supported on Cuda toolkit (?P<cuda_toolkit>\d+(?:\.\d+)*) and above"),
            # A ModuleNotFoundError in the engine's own words (vLLM 0.33 utils/hashing.py:65 "xxhash is required for the
            # 'xxhash' prefix caching hash algorithms. Install it via `pip install xxhash`."): the exception is
            # CPython's ImportError subclass for a module that is not there, whatever its message says.
            T("ModuleNotFoundError: ", _EXC + r"ModuleNotFoundError: \S"),
            # An exception whose message names the pip command that installs what is missing: the engines' guards
            # for an optional dependency a setting needs (vLLM 0.6-0.33 executor/ray_utils.py "Failed to import Ray,
            # please install Ray with `pip install ray`." and 0.33 v1/executor/ray_utils.py:49; 0.6.6 config.py
            # "Unable to load Ray which is required for multi-node inference, please install Ray with `pip install
            # ray`."; 0.8.5 "Ray Compiled Graph is not installed. Run `pip install ray[adag]`"; SGLang 0.5.23
            # breakable_cuda_graph/cuda_utils.py:35 "cuda.bindings is not available. Install it with: pip install
            # cuda-python", weight_utils.py "Please install fastsafetensors via `pip install fastsafetensors`",
            # 0.4.x layers/quantization "... requires some operators from vllm. Pleaes install vllm by `pip install
            # vllm==0.7.2`"). Only an exception line: a warning or an info line that suggests a package is advice.
            T("pip install", _EXC + r"\w*(?:Error|Exception): .*?\bpip install (?:-U |--upgrade )?['\"`]?(?P<pip_package>[A-Za-z][\w.\[\]+:/@-]*?(?:[<>=]=?[\w.]+)?)(?=['\"`\s,;)]|\.?$)"),
            # The same refusal without the command (round twenty-seven): an exception telling the user to install a
            # package ("RuntimeError: Please install flash_attn to use this backend", "ImportError: please install
            # triton>=3.0"). A package named right after the words, the sentence going on as instructions do ("to use ...",
            # "first", "via ..."); not a driver or a toolkit (a system install), not "a newer version" or "the plugin at
            # <url>" (no package named), and only an exception line.
            T(
                "nstall ",
                _EXC + r"\w*(?:Error|Exception): .*?\b[Pp]lease (?:re)?install ['\"`]?(?P<pip_package>(?!(?:the|a|an|it|them|this|that|newer|latest|NVIDIA|CUDA|ROCm|driver)\b)"
                r"[A-Za-z][\w.\[\]+-]*?(?:[<>=]=?[\w.]+)?)(?=['\"`]|\.?$|[,;)]| (?:to use|to enable|to run|first|via|with|for|and|or|\()\b)",
            ),
            # vLLM 0.4.0-0.4.1 _custom_ops.py binds its compiled ops only if they import ("try: from vllm._C import
            # cache_ops as vllm_cache_ops; from vllm._C import ops as vllm_ops / except ImportError: pass"): the first
            # op called then raises NameError for the name the failed import did not bind.
            # The engines' guards for a dependency a setting needs, in other words (round eighteen; exception lines only):
            # SGLang 0.5.9 multimodal_gen/configs/quantization.py:110 "Nunchaku is enabled, but not installed. Please refer
            # to ...", vLLM 0.11 plugins/io_processors/__init__.py:61 "The model requires the '{p}' IO Processor plugin but it
            # is not installed.", SGLang 0.5.9 layers/attention/mamba/ops/ssu_dispatch.py:195 "Mamba backend '{b}' requested
            # but its dependencies are not available. Install the required package ..."; a version the engine refuses:
            # multimodal_gen/runtime/pipelines/diffusers_pipeline.py:546 "cache-dit>=1.2.0 is required for
            # --cache-dit-config. Please upgrade cache-dit.", configs/model_config.py:1019 "Transformers version {v} is not
            # supported for model {m} or model type {t}. Please upgrade transformers to >= 5.0.0.".
            T("not installed", _EXC + r"\w*(?:Error|Exception): .*?\b(?:(?P<module>[A-Za-z][\w.-]*) is enabled, but not installed|but it is not installed)\b"),
            T("dependencies are not available", _EXC + r"\w*(?:Error|Exception): .*?\bdependencies are not available\. Install\b"),
            T(" is required for ", _EXC + r"\w*(?:Error|Exception): (?P<module>[A-Za-z][\w.-]*)>=[\w.]+ is required for "),
            T("Please upgrade ", _EXC + r"\w*(?:Error|Exception): .*?\bPlease upgrade (?P<module>[A-Za-z][\w.-]*) to >= ?\d"),
            T("NameError: name 'vllm_", r"NameError: name '(?P<vllm_ops_name>vllm_(?:cache_)?ops)' is not defined"),
            # Apache TVM FFI's type registry (apache/tvm-ffi src/ffi/object.cc RegisterTypeAttr): TVM_FFI_THROW(RuntimeError)
            # << "TypeAttr `" << name << "` is already registered for type index " << index << ". To update the stored
            # value, ...". Registration runs as each library loads (its static initialisers), once per process; a second
            # registration of the same attribute is a second copy of the registering code in the process: a package that
            # bundles its own TVM FFI runtime (tilelang, a TVM or MLC build) beside a standalone apache-tvm-ffi of another
            # version. Thrown through C++ it aborts the process ("terminate called after throwing an instance of
            # 'tvm::ffi::Error'" then "what(): ..."): packages that do not fit together, found at load. Up to 2026-04 (v0.1.8-
            # v0.1.9 and after, to 6066f605) the same check read "Type attribute `" << name << "` is already set for type `"
            # << type key << "`".
            T("is already registered for type index", r"TypeAttr `(?P<ffi_type_attribute>[^`]+)` is already registered for type index \d+"),
            T("is already set for type `", r"Type attribute `(?P<ffi_type_attribute>[^`]+)` is already set for type `"),
            # A module without a name its importer uses, while vLLM's model registry imports a model's class: CPython's
            # module getattr (Objects/moduleobject.c, 3.7-3.14: PyErr_Format(PyExc_AttributeError, "module '%U' has no
            # attribute '%U'", mod_name, name); "partially initialized module '%U' [from '%U'] has no attribute '%U' (most
            # likely due to a circular import)" while it is still being imported) when a module object lacks the attribute.
            # The registry imports and inspects each model class it is asked for and logs the failure with its traceback
            # (model_executor/models/registry.py _try_inspect_model_cls, logger.exception("Error in inspecting model
            # architecture '%s'"): 0.10.2 :444, 0.33 :1164), every line under its "[registry.py:N]" prefix, which is the
            # literal here. There a module lacking a name (vLLM's fla ops' `exp = tl.exp` against an installed
            # triton.language without it) is a dependency of the model's code older, newer or a stub of what it was written
            # for: an import that does not fit, as a package's own import-time TypeError is (import_failed_in_package).
            # Only inside the registry's report: an engine module's own AttributeError at its import stays the engine's (the
            # generalise tests' source checkout), and never a module of the engine itself.
            T(
                "registry.py:",
                _EXC + r"AttributeError: (?:partially initialized )?module '(?!(?:vllm|sglang)[.'])(?=(?P<module>\w+))(?P<attribute_owner>[\w.]+)'(?: from '[^']*')? "
                r"has no attribute '(?P<missing_attribute>\w+)'",
            ),
        ),
        "A kernel the server builds at run time (a JIT build) failed in the compiler: it found no header <{missing_header}>. "
        "The build environment lacks it: a host compiler too old for the kernel's C++ standard (nvcc's host GCC: GCC 8 has "
        "no <version>; point nvcc at a newer one with NVCC_CCBIN or CUDAHOSTCXX) or a toolkit's or Python's development "
        "headers not installed. Fix the compiler or headers, clear the JIT cache and restart.",
        "The installed {toolkit_module} module refuses this CUDA toolkit at import (it needs CUDA {cuda_toolkit} or newer): "
        "install the kernel library's build for this toolkit (nvidia-cutlass-dsl with its cu13 libraries on a CUDA "
        "{cuda_toolkit}+ toolkit) or a FlashInfer/SGLang build whose kernels do not import it.",
        "vLLM's compiled extension vllm._C did not import (its _custom_ops.py binds {vllm_ops_name} only when it does): "
        "install a vLLM build with its C extension for this torch, CUDA and platform (a source or CPU build that left it "
        "out fails so), and read the 'Failed to import from vllm._C' warning above for the loader's reason.",
        "A package the server needs is missing or too old (its error names `pip install {pip_package}`): install it in "
        "the environment that runs the server, with a build matching the installed torch and CUDA.",
        "Two copies of the TVM FFI runtime registered the type attribute {ffi_type_attribute} in one process (tvm-ffi's "
        "registry refuses a second registration): a package that bundles its own tvm-ffi (tilelang, a TVM or MLC build) "
        "beside a standalone apache-tvm-ffi of another version. Install the apache-tvm-ffi version that package pins.",
        "The installed module '{attribute_owner}' has no '{missing_attribute}', which the code importing it uses: the "
        "installed {module} is older or newer than what imports it was written for (or a stub of it is installed). Install "
        "the {module} version the engine and its kernels pin, with builds matching the installed torch and CUDA.",
        "Python module '{module}' is missing or broken in the server's environment: install the build "
        "that matches this torch/CUDA (e.g. `pip install {module}` in the venv that runs SGLang), then "
        "re-run `python -c 'import sglang.srt.server_args'` on the host to check.",
        "The installed CANN has no operator {aclnn_op} in {library} (or no {library} at all): install the CANN toolkit and "
        "kernels packages the NPU plugin (torch_npu, sgl-kernel-npu) was built for, and source their set_env.sh in the "
        "server's environment.",
        "Shared library {library} is not found: install the matching CUDA runtime / driver libraries or fix LD_LIBRARY_PATH for the service.",
        "A compiled extension does not match the installed torch/CUDA (undefined symbol {symbol}): reinstall sgl-kernel / flashinfer built for this torch version.",
        "Triton could not build its kernel launcher ({missing_compiler}: neither CC nor gcc / clang on PATH): install gcc in the server's image or set CC=gcc in its environment.",
        "A JIT build could not link lib{link_library} (the linker found no such library): install the CUDA "
        "toolkit's libraries or put their folder (e.g. /usr/local/cuda/lib64 and its stubs/) on "
        "LIBRARY_PATH / LD_LIBRARY_PATH for the service.",
        "An import failed in the server's environment: install the missing package, with builds matching the installed torch and CUDA.",
    ),
    _fatal(
        "model_load_error",
        C.MODEL_LOAD_ERROR,
        30,
        (
            T("gated repo", r"huggingface\.co/(?P<repo>[\w.-]+/[\w.-]+)/"),
            T("is restricted", r"Access to model (?P<repo>\S+) is restricted"),
            T("GatedRepoError"),
            T("401 Client Error"),
            T("Repository Not Found", r"(?:huggingface\.co/(?P<repo>[\w.-]+/[\w.-]+)/)?"),
            T("RepositoryNotFoundError"),
            T("is not a valid model identifier", r"(?P<path>\S+?)'? is not a local folder"),
            T("does not appear to have a file named", r"(?P<path>\S+) does not appear to have a file named (?P<file>[\w.-]+?)\.?(?:\s|$)"),
            # vLLM model_loader/default_loader.py:260 (0.33): f"Cannot find any model weights with
            # `{model_name_or_path}`": the literal proves it; the path is a figure only when the line is whole.
            T("Cannot find any model weights with", r"(?:.*?with `(?P<path>[^`]+)`)?"),
            # The same refusal of the Run:ai streamer loader (vLLM 0.33 model_loader/runai_streamer_loader.py:219):
            # f"Cannot find any safetensors model weights with `{model_name_or_path}`".
            T("Cannot find any safetensors model weights with", r"(?:.*?with `(?P<path>[^`]+)`)?"),
            # The quantization config file the checkpoint names is not there: vLLM model_loader/weight_utils.py
            # (0.6.6 :192, 0.33 :380) and SGLang model_loader/weight_utils.py (0.4.6 :194, 0.5.23 :389) get_quant_config,
            # raise ValueError(f"Cannot find the config file for {quant_config.get_name()}").
            T("Cannot find the config file for"),
            # transformers' AutoConfig (models/auto/configuration_auto.py from_pretrained): f"Unrecognized model in {path}.
            # Should have a `model_type` key in its {CONFIG_NAME}, or contain one of the following strings in its name:
            # ...": the folder's config.json is not a model's (or is not there in the form the engine reads).
            T("Should have a `model_type` key in its", r"Unrecognized model in (?P<path>\S+?)\. Should have"),
            # SGLang 0.5.23's tokenizer and processor loading (utils/hf_transformers/tokenizer.py:232 "Retry with
            # use_fast=False for {name} also failed ...", :556 "fastokens failed to load tokenizer for {name}. ...",
            # processor.py:164 "Cannot determine processor class for {path}", :182 "Failed to load image_processor for
            # {path}: {e}. ... Check that the model files are complete and accessible", mistral_utils.py:312 "Failed to
            # load mistral '{file}' config for model {model}. Please check if the model is a mistral-format model and if
            # the config file exists."): the model's tokenizer, processor or config files cannot be loaded.
            T("also failed (initial load returned"),
            T("failed to load tokenizer for"),
            T("Cannot determine processor class for"),
            # vLLM 0.33 model_loader/weight_utils.py:612: FileNotFoundError(f"Weight files referenced in index but missing:
            # {missing}"): the safetensors index names shards the folder does not hold (an incomplete download).
            T("Weight files referenced in index but missing"),
            # SGLang 0.5.23 model_loader/loader.py:2644 raise RuntimeError(f"No model weights found in: `{path}`") and the
            # sharded loaders' :1678/:3442 ValueError(f"Missing keys {keys} in loaded state!"): the checkpoint lacks the files
            # or tensors the model needs.
            T("No model weights found in: `", r"No model weights found in: `(?P<path>[^`]+)`"),
            T("in loaded state!", r"Missing keys .* in loaded state!"),
            T("Failed to load image_processor for"),
            T("Please check if the model is a mistral-format model"),
            # SGLang 0.5.23 model_loader/weight_utils.py:801: f"{index_file} references {n} shard file(s) missing
            # from {folder} (incomplete download?): {names}": the index lists shards the folder does not hold.
            T("shard file(s) missing from", r"missing from (?P<path>\S+) \(incomplete download\?\)"),
            # The sharded-state loaders of both engines (vLLM 0.33 model_loader/sharded_state_loader.py:212, 0.6.6 loader.py:626, SGLang
            # model_loader/loader.py:1650): "Could not find checkpoint files '{pattern}', only pre-sharded
            # checkpoints are currently supported!": no file of the rank's shard pattern in the model folder.
            T("only pre-sharded checkpoints are currently supported"),
            # vLLM's default loader after loading (0.33 model_loader/default_loader.py:569; not in 0.10.2): raise
            # ValueError(f"Following weights were not initialized from checkpoint: {weights_not_loaded}"): the
            # checkpoint lacks tensors the model needs (a partial download, another variant's files).
            T("weights were not initialized from checkpoint"),
            # SGLang's model classes after loading (0.3.6 models/gemma.py:346, gemma2.py:406; 0.4.10 internvl.py:711,
            # interns1.py:323; 0.5.23 deepseek_ocr.py:1891): raise RuntimeError(f"Some weights are not initialized from
            # checkpoints: {unloaded_params}"). Only the raised form: other classes log the same words as a warning and go on
            # (0.5.23 gemma4_mm.py:1083, mllama4.py:704, deepseek_v4.py:5634 logger.warning: scales or buffers the model
            # initialises itself), which SGLang's default format prints without a level (round thirty, batch47).
            T("Some weights are not initialized from checkpoints", _EXC + r"\w*(?:Error|Exception): Some weights are not initialized from checkpoints"),
            T("Can't load the configuration of", r"configuration of '(?P<path>[^']+)'"),
            T("Can't load tokenizer for", r"tokenizer for '(?P<path>[^']+)'"),
            T("HFValidationError"),
            T("LocalEntryNotFoundError"),
            T("couldn't connect to 'https://huggingface.co'"),
            T("SafetensorError"),
            T("Error while deserializing header"),
            # vLLM models/registry.py _raise_for_unsupported (0.33 :1221-1252), every path a ValueError: f"Model
            # architectures {architectures} are not supported for now. Supported architectures: ..." (read from its
            # head, so a line cut inside "for now" counts), f"Model architectures {architectures} failed to be
            # inspected. Please check the logs for more details." (a supported class that did not import: pydantic
            # carries it as "Value error, ..." inside ModelConfig's ValidationError), f"Model architecture {arch} was
            # supported in vLLM until v{previous_version}, ..." and f"Model architecture {arch} is not supported
            # in-tree anymore. ...": this release does not serve the model.
            T("Model architectures", r"Model architectures (?P<architectures>\[[^\]]*\]) (?:are not supported|failed to be inspected)"),
            # vLLM 0.4.x model_executor/models/__init__.py:97 (ModelRegistry.load_model_cls on ROCm): ValueError(f"Model
            # architecture {model_arch} is not supported by ROCm for now.").
            T("is not supported by ROCm for now", r"Model architecture (?P<architectures>\S+) is not supported by ROCm"),
            # SGLang's diffusion runtime resolving and fetching its model (0.5.9 multimodal_gen/runtime/utils/
            # hf_diffusers_utils.py:679 "Model {m} not found in local cache and download=False.", :748 "Model or revision
            # not found at {p}. Please check the model ID ...", :754/:769 "Could not find model at {p} and failed to download
            # from HF Hub ...", :528 "Failed to find config.json for {m} after failing to find model_index.json", :612/:739
            # "... Some safetensors shards are missing."; cli/utils.py:90 "Could not find model locally at {p} and failed to
            # download model_index.json/config.json from {p}"; runtime/loader/component_loaders/transformer_loader.py:64
            # and weights_updater.py:85 "No safetensors files found in {p}"): the model's files are not there or not whole.
            T("not found in local cache and download=False"),
            T("Model or revision not found at"),
            T("and failed to download from HF Hub"),
            T("and failed to download model_index.json/config.json from"),
            T("after failing to find model_index.json"),
            T("Some safetensors shards are missing"),
            T("No safetensors files found in", _EXC + r"\w*(?:Error|Exception): No safetensors files found in"),
            T("was supported in vLLM until v", r"Model architecture (?P<architectures>\w+) was supported in vLLM until v"),
            T("is not supported in-tree anymore", r"Model architecture (?P<architectures>\w+) is not supported in-tree anymore"),
            # vLLM's Transformers backend, when the architecture is neither a transformers class nor in the config's
            # auto_map (0.33 models/registry.py:1317 _try_resolve_transformers, 0.9 the same text): ValueError(f"Cannot
            # find model module. {architecture!r} is not a registered model in the Transformers library (only
            # relevant if ...) and 'AutoModel' is not present in the model config's 'auto_map' ...").
            T("is not a registered model in the Transformers library", r"^(?:.*?'(?P<architectures>\w+)' is not a registered model)?"),
            # A model class refusing the checkpoint's version (0.33 models/minicpmv.py:2475, minicpmo.py:1040:
            # ValueError(f"Currently, MiniCPMV only supports versions {supported_versions}. Got version:
            # {version_values}"), raised in the class's __init__ while the model is built).
            # Releases before the version list was computed (0.6-0.10 minicpmv.py: ValueError("Currently, MiniCPMV only
            # supports versions 2.0, 2.5, and 2.6"), a fixed text with "and" and no "Got version") refuse the same way.
            T(
                "only supports versions",
                r"Currently, (?P<model_family>\w+) only supports versions [\d., ]+(?:and [\d.]+?)?(?:\. Got version|\.?\s*$)",
            ),
            # SGLang's model resolver when the architecture has no SGLang class and its Transformers class is not
            # backend-compatible (0.4.7-0.5.23 srt/model_loader/utils.py:186, get_resolved_model_arch / resolve_transformers_arch):
            # ValueError(f"{arch} has no SGlang implementation and the Transformers implementation is not compatible
            # with SGLang."). Its warning twin ("has no SGLang implementation, falling back to Transformers") is not it.
            T(
                "Transformers implementation is not compatible with SGLang",
                r"(?:(?P<architectures>\w+) has no SGl?L?ang implementation and )?the Transformers implementation is not compatible",
            ),
            # vLLM's twin of it (0.7.3-0.9.2 model_executor/model_loader/utils.py resolve_transformers_arch, 0.7.3 :76,
            # 0.8.5 :76, 0.9.2 :212): with the default model_impl, ValueError(f"{arch} has no vLLM implementation and the
            # Transformers implementation is not compatible with vLLM.") (0.8.x and later add " Try setting VLLM_USE_V1=0.");
            # with model_impl "transformers", ValueError(f"The Transformers implementation of {arch} is not compatible with
            # vLLM.") (0.10.2 models/registry.py:597 and 0.33 :1335 with {architecture!r}): the architecture has no vLLM
            # class and no usable Transformers fallback, as "Model architectures [...] are not supported" says. Its warning
            # twin ("%s has no vLLM implementation, falling back to Transformers implementation") is not it.
            T(
                "Transformers implementation is not compatible with vLLM",
                r"(?:(?P<architectures>\w+) has no vLLM implementation and )?the Transformers implementation is not compatible with vLLM",
            ),
            T(
                "is not compatible with vLLM",
                r"The Transformers implementation of '?(?P<architectures>\w+)'? is not compatible with vLLM",
            ),
            # The engines' Transformers backend, the class that serves an architecture with no native class through its
            # transformers model (SGLang 0.4.10 srt/models/transformers.py:141 TransformersForCausalLM, 0.5.23 :535
            # TransformersBase and its ForCausalLM / MoE / MultiModal / EmbeddingModel kin; vLLM's TransformersForCausalLM,
            # TransformersModel and kin, model_executor/models/transformers*.py), lacking an attribute it or the engine reads
            # (torch's Module.__getattr__: "'<class>' object has no attribute '<name>'"): the fallback cannot build or run
            # this model, as "the Transformers implementation is not compatible" says in the engines' own words.
            T(
                "AttributeError: 'Transformers",
                _EXC + r"AttributeError: '(?P<transformers_backend_class>Transformers\w*)' object has no attribute '(?P<missing_attribute>\w+)'",
            ),
            # A quantized linear layer without the parameter its quantization method reads. Both engines build every linear
            # layer (vLLM and SGLang layers/linear.py: ReplicatedLinear, ColumnParallelLinear, MergedColumnParallelLinear,
            # QKVParallelLinear, RowParallelLinear, QKVCrossParallelLinear; the MoE layers' FusedMoE) with the checkpoint's
            # quantization method, whose create_weights registers the parameters the checkpoint carries (UnquantizedLinear
            # Method "weight"; an FP8 or compressed-tensors scheme "weight_scale" and, static only, "input_scale"; AWQ/GPTQ
            # "qweight", "qzeros", "scales", "g_idx"). When the method or the model's code then reads one that was not
            # registered (vLLM 0.6.x fp8.py / compressed_tensors_w8a8_fp8.py process_weights_after_loading passing
            # `input_scale=layer.input_scale` on ROCm for a dynamic-scale checkpoint, made getattr(layer, 'input_scale',
            # None) by 0.7.3 :46), torch's Module.__getattr__ raises AttributeError(f"'{type(self).__name__}' object has no
            # attribute '{name}'") (torch/nn/modules/module.py) while the model is loaded: a checkpoint's quantization
            # this release's method cannot load.
            T(
                "Linear' object has no attribute '",
                r"'(?P<quantized_layer>(?:Replicated|\w*Parallel)Linear)' object has no attribute "
                r"'(?P<quant_parameter>\w*(?:_scale|_scale_inv|zero_point|qweight|qzeros|scales|g_idx|weight_packed|weight_shape)|weight)'",
            ),
            T(
                "FusedMoE' object has no attribute '",
                r"'(?P<quantized_layer>FusedMoE)' object has no attribute "
                r"'(?P<quant_parameter>\w*(?:_scale|_scale_inv|zero_point|qweight|qzeros|scales|g_idx|weight_packed|weight_shape))'",
            ),
            # vLLM's ModelConfig reads the model's JSON files while it validates (transformers_utils/config.py get_config
            # and repo_utils.py's json.load of config.json / its siblings); a file that is not JSON (empty, an HTML page
            # saved as config.json) raises json's JSONDecodeError, a ValueError, "%s: line %d column %d (char %d)"
            # (CPython Lib/json/decoder.py), which pydantic reports under "1 validation error for ModelConfig" as
            # "Value error, {message}". Only the decoder's own messages count.
            T(
                "Value error, ",
                r"Value error, (?:Expecting (?:value|property name enclosed in double quotes|',' delimiter|':' delimiter)|Extra data|Unterminated string starting at|Invalid control character at|Invalid \\escape): line \d+ column \d+ \(char \d+\)",
            ),
            # compressed-tensors' scheme lookup, when the checkpoint's quantization has no kernel scheme in this
            # release (0.33 layers/quantization/compressed_tensors/compressed_tensors.py:946 _get_scheme_from_parts:
            # NotImplementedError(f"No compressed-tensors compatible scheme was found for {layer_name=}, ..."); 0.8-0.9
            # "No compressed-tensors compatible scheme was found."), raised while the model's layers are built.
            # The quantization method refusing the model's dtype while the model is built: SGLang 0.5.23
            # srt/model_loader/loader.py:266-271 _get_quantization_config and vLLM 0.33 config/vllm.py:937-942 (the
            # model loader's _get_quantization_config before): `if model_config.dtype not in supported_dtypes: raise
            # ValueError(f"{model_config.dtype} is not supported for quantization method {model_config.quantization}.
            # Supported dtypes: {supported_dtypes}")`, supported_dtypes from the method's get_supported_act_dtypes().
            T(
                "is not supported for quantization method",
                r"(?P<model_dtype>[\w.]+) is not supported for quantization method (?P<quant_method>[\w-]+)\. Supported dtypes: (?P<supported_dtypes>\[[^\]]*\])",
            ),
            T("No compressed-tensors compatible scheme was found"),
            T("No such file or directory", r"No such file or directory: '(?P<path>[^']*(?:config\.json|\.safetensors|\.bin|tokenizer[^']*))'"),
            # torch/nn/modules/module.py load_state_dict: "Error(s) in loading state_dict for X:\n\tsize mismatch for ...".
            T("Error(s) in loading state_dict for"),
            # A model whose config needs its repo's own code: transformers' dynamic_module_utils.py:743-749
            # ("The repository X contains custom code which must be executed to correctly load the model"),
            # its ValueError "Loading X requires you to execute the configuration file in that repo" (which
            # vLLM's transformers_utils/config.py:452-463 turns into "Failed to load the model config. ...
            # consider setting `trust_remote_code=True`"); a model type this transformers does not know
            # (models/auto/configuration_auto.py:431: "... but Transformers does not recognize this architecture").
            T("requires you to execute the configuration file"),
            T("contains custom code which must be executed"),
            T("Failed to load the model config"),
            # vLLM transformers_utils/config.py:912 (0.33), when no config of any format is found at the
            # name: "Invalid repository ID or local directory specified: '{model}'.\nPlease verify ...";
            # transformers configuration_utils.py:886 (5.x), a config.json that does not parse:
            # f"It looks like the config file at '{resolved_config_file}' is not a valid JSON file."
            T("Invalid repository ID or local directory specified", r"specified: '(?P<path>[^']+)'"),
            # transformers utils/hub.py (cached_files, on huggingface_hub's HFValidationError): EnvironmentError(f"Incorrect
            # path_or_model_id: '{path_or_repo_id}'. Please provide either the path to a local folder or the repo_id of a
            # model on the Hub."); models/auto/auto_factory.py: ValueError(f"Unrecognized configuration class
            # {config.__class__} for this kind of AutoModel: {cls.__name__}. ...") (the installed transformers has no class
            # of that kind for the model's configuration).
            T("Incorrect path_or_model_id", r"Incorrect path_or_model_id: '(?P<path>[^']+)'"),
            T("Unrecognized configuration class"),
            T("is not a valid JSON file", r"config file at '(?P<path>[^']+)' is not a valid JSON file"),
            T("does not recognize this architecture", r"(?:has model type `(?P<model_type>[\w.-]+)`)?"),
            # vLLM transformers_utils/config.py get_config, when the model has neither config.json nor
            # params.json: 0.7.x raise ValueError(f"No supported config format found in {model}"), 0.8+
            # "Could not detect config format for no config file found. With config_format 'auto', ...".
            T("No supported config format found in", r"No supported config format found in (?P<path>\S+?)\.?$"),
            T("Could not detect config format"),
            # requests' Response.raise_for_status (models.py): f"{status} Client Error: {reason} for url:
            # {url}", raised through huggingface_hub's hf_raise_for_status (utils/_errors.py) when a file
            # of the model is not in the repo at that revision.
            T("404 Client Error", r"404 Client Error: Not Found for url: https://huggingface\.co/(?P<path>[\w.-]+/[\w.-]+)/resolve/"),
            # SGLang 0.1-0.2 get_model_cls_by_arch_name (srt/model_executor/model_runner.py): raise
            # ValueError(f"Unsupported architectures: {arch}. Supported list: {list(...)}"), the older
            # form of the registry's "are not supported for now".
            T("Unsupported architectures:", r"Unsupported architectures: (?P<architectures>[\w, '\[\]]+?)\. Supported list"),
            # SGLang's multimodal processor registry, the same refusal for a vision model's processor (0.5.23
            # managers/multimodal_processor.py:86, get_mm_processor: f"No processor registered for architecture:
            # {hf_config.architectures}.\n" f"Registered architectures: ..."): no class of this release serves it.
            T("No processor registered for architecture", r"No processor registered for architecture: (?P<architectures>\[[^\]]*\])"),
            # huggingface_hub's other exceptions for a model it could not fetch or find (errors.py, 1.33):
            # OfflineModeIsEnabled (utils/_http.py:284, f"Cannot reach {request.url}: offline mode is enabled.
            # ..."; a ConnectionError whose name ends in neither Error nor Exception), DisabledRepoError and
            # RevisionNotFoundError (hf_raise_for_status, _http.py:852/:872), RemoteEntryNotFoundError /
            # EntryNotFoundError (:856; LocalEntryNotFoundError above), IncompleteSnapshotError,
            # CachedRepoTreeNotFoundError, NotASafetensorsRepoError and SafetensorsParsingError. Read as the
            # exception's name ("<name>:", "<name>(" or the line's end; a longer name ending in one, such as
            # RemoteEntryNotFoundError, too), so a sentence that merely mentions one does not count.
            *(
                T(name, rf"\b\w*{name}(?::|\(|$)")
                for name in (
                    "OfflineModeIsEnabled",
                    "DisabledRepoError",
                    "RevisionNotFoundError",
                    "EntryNotFoundError",
                    "IncompleteSnapshotError",
                    "CachedRepoTreeNotFoundError",
                    "NotASafetensorsRepoError",
                    "SafetensorsParsingError",
                )
            ),
        ),
        "Model {repo} is gated: accept its license on huggingface.co with the account whose token the host "
        "uses, and provide HF_TOKEN through the environment file (never a command line); or stage a local "
        "copy and pass its folder as --model-path.",
        "The engine's Transformers backend ({transformers_backend_class}, the fallback for an architecture with no native "
        "class) has no '{missing_attribute}': it cannot serve this model in this release. Use a release with a native class "
        "for the model, or one whose Transformers backend supports it.",
        "The quantization method {quant_method} does not run in {model_dtype} (it takes {supported_dtypes}): relaunch with "
        "--dtype float16 where float16 is among them (AWQ and GPTQ), or with a quantization method that takes this dtype "
        "(awq_marlin or gptq_marlin for a bfloat16 model).",
        "The model's {quantized_layer} layer has no '{quant_parameter}': the quantization method this release built it "
        "with does not match the checkpoint's quantization (its scheme, static or dynamic scales, or this release's handling "
        "of that scheme): use a checkpoint quantized in a scheme this release loads, or a release that loads this one.",
        "This release of the engine does not serve architectures {architectures} (no implementation, or its model "
        "class failed to import: the lines above the refusal say which): upgrade the engine, or serve a model it supports.",
        "The model files at {path} are missing or incomplete: check --model-path on the host (config.json, tokenizer and *.safetensors must be there), re-stage the model and verify its size.",
        "The model could not be loaded: check --model-path exists on the host with config.json and weights, that a gated repo's license is accepted and HF_TOKEN set, or that the hub is reachable.",
    ),
    # gpt-oss's tokenizer encoding: vLLM's harmony_utils.get_encoding (0.10-0.15 entrypoints/harmony_utils.py, 0.15+
    # entrypoints/openai/parser/harmony_utils.py) calls openai_harmony's load_harmony_encoding(HARMONY_GPT_OSS) while the API
    # server sets up its serving classes (the Responses API, the gpt-oss reasoning parser), before it listens. openai_harmony
    # (openai/harmony src/tiktoken_ext/public_encodings.rs, LoadError) reads the o200k_base.tiktoken vocab from the folder
    # TIKTOKEN_ENCODINGS_BASE names, or downloads and caches it, and raises HarmonyError with "invalid tiktoken vocab file:
    # {0}" (a line that is not "<base64 token> <rank>", e.g. an HTML page or a half-written cache file), "error downloading or
    # loading vocab file: {0}", "the env var TIKTOKEN_ENCODINGS_BASE is not set, or invalid", "failed to create CoreBPE: {0}",
    # "unknown encoding name: {0}": the model's tokenizer file cannot be loaded, like a tokenizer the engine cannot load.
    _fatal(
        "harmony_encoding_not_loaded",
        C.MODEL_LOAD_ERROR,
        32,
        (
            T(
                "HarmonyError",
                r"HarmonyError: (?P<harmony_error>invalid tiktoken vocab file|error downloading or loading vocab file|the env var "
                r"TIKTOKEN_ENCODINGS_BASE is not set, or invalid|failed to create CoreBPE|unknown encoding name)",
            ),
        ),
        "openai_harmony could not load gpt-oss's tokenizer encoding ({harmony_error}): put the real o200k_base.tiktoken "
        "in the folder TIKTOKEN_ENCODINGS_BASE names (an offline host), or let the host download it from "
        "openaipublic.blob.core.windows.net; delete a half-written copy in its cache (tiktoken-rs-cache) and pre-load it "
        "once before starting several servers at the same time.",
        "openai_harmony could not load gpt-oss's tokenizer encoding: put the real o200k_base.tiktoken in the folder "
        "TIKTOKEN_ENCODINGS_BASE names, or let the host download it; delete a half-written copy in its cache "
        "(tiktoken-rs-cache).",
    ),
    _fatal(
        "quantization_blocks_split",
        C.MODEL_LOAD_ERROR,
        31,
        (
            # A block-quantized (FP8) checkpoint split at a parallel size that cuts its blocks: vLLM 0.33
            # layers/quantization/utils/fp8_utils.py:1324-1344 validate_fp8_block_shape (f"Weight input_size_per_partition
            # = {n} is not divisible by weight quantization block_k = {block_k}.", f"Weight output_partition_size = {n} is
            # not divisible by weight quantization block_n = {block_n}."), :1361-1372 validate_fp8_block_shape_moe ("The
            # output_size of gate's and up's weight = {n} ...", "The input_size of down's weight = {n} ..."); SGLang 0.5.23
            # srt/layers/quantization/fp8_utils.py:2874 the same texts; raised while the layers are built.
            T(
                "by weight quantization block_",
                r"= (?P<partition_size>\d+) is not divisible by weight quantization (?P<quant_block>block_[nk]) = (?P<block_size>\d+)",
            ),
        ),
        "The checkpoint's block-quantized weights cannot be split at this parallel size: a partition of {partition_size} "
        "is not a multiple of the quantization {quant_block} = {block_size}. Serve it at a tensor-parallel size that cuts "
        "every weight into whole blocks (a smaller one), or spread the MoE layers by expert parallelism instead.",
        "The checkpoint's block-quantized weights cannot be split at this parallel size: serve it at a tensor-parallel "
        "size that cuts every weight into whole blocks (a smaller one), or spread the MoE layers by expert parallelism instead.",
    ),
    # --- the GPU itself is faulty: every CUDA error, NCCL timeout and crash after it is a consequence ---
    # CUDA runtime API, enum cudaError: cudaErrorECCUncorrectable (214) whose cudaGetErrorString is
    # "uncorrectable ECC error encountered", cudaErrorNvlinkUncorrectable (220); PyTorch prints them as
    # "CUDA error: <string>", c10d's watchdog carries them. Kernel driver: "NVRM: Xid (PCI:...): N".
    # Not a class of its own in the vocabulary (no fix changes a flag): unknown, with its own advice.
    _fatal(
        "gpu_hardware_error",
        C.UNKNOWN,
        35,
        (
            T("uncorrectable ECC error"),
            T("cudaErrorECCUncorrectable"),
            T("uncorrectable NVLink error"),
            T("cudaErrorNvlinkUncorrectable"),
            T("NVRM: Xid", r"NVRM: Xid \([^)]*\): (?P<xid>\d+)"),
            T("fallen off the bus"),
        ),
        "The GPU reported a hardware fault (Xid {xid}): this is not a configuration problem. Take the host "
        "out of the sweep (`nvidia-smi -q -d ECC,PAGE_RETIREMENT`, reset the GPU or have it replaced); the "
        "NCCL timeouts and crashes that follow are its consequences.",
        "The GPU reported a hardware fault (uncorrectable ECC / NVLink error): this is not a configuration "
        "problem. Take the host out of the sweep (`nvidia-smi -q -d ECC,PAGE_RETIREMENT`, reset the GPU or "
        "have it replaced); the NCCL timeouts and crashes that follow are its consequences.",
    ),
    # --- the GPU cannot run the code -------------------------------------------------------------
    _fatal(
        "unsupported_gpu_arch",
        C.UNSUPPORTED_GPU_ARCH,
        40,
        (
            T("no kernel image is available"),
            T("NoKernelImageForDevice"),
            T("FlashInfer requires GPUs with sm75 or higher"),
            T("is not defined for option 'gpu-name'", r"Value '(?P<arch>sm_\w+)' is not defined"),
            T("is only supported on Blackwell GPUs (SM100)"),
            T("FlashAttention v3 Backend requires SM>=80 and SM<=90"),
            # CUTLASS/CuTe's TMA descriptor set-up (include/cute/atom/copy_traits_sm90_tma.hpp make_tma_copy_desc, the
            # Hopper kernels of FlashAttention 3, FlashInfer and DeepGEMM): `std::cerr << "Error: Failed to initialize the
            # TMA descriptor " << result`, the CUresult of the driver's cuTensorMapEncodeTiled. 801 is CUDA_ERROR_NOT_SUPPORTED
            # (cuda.h: "the attempted operation is not supported on the current system or device"); the driver's tensor maps
            # exist only on compute capability 9.0 and up (CUDA driver API, cuTensorMapEncodeTiled): a Hopper kernel on an
            # older GPU. Other results (1, a shape the map refuses; 700, an earlier sticky fault) are not this class.
            T("Failed to initialize the TMA descriptor", r"Failed to initialize the TMA descriptor 801\b"),
            # Triton compiles kernels through ptxas at first use; an older ptxas has no target for a new
            # GPU (triton/backends/nvidia/compiler.py raises PTXASError with ptxas' stderr).
            T("PTXASError"),
            # ptxas' diagnostics are "ptxas fatal : <msg>" or, located, "ptxas <file>, line <n>; error : <msg>"
            # (PTX .version 8.4 does not support .target sm_120a: a ptxas older than the GPU).
            T("ptxas", r"ptxas (?:[^;:]*; )?(?:fatal|error)\s*:(?:.*?(?P<arch>sm_\d+[a-z]?)|.*?(?:not defined for option|\.target))"),
            # nvcc, for JIT-built extensions (FlashInfer, sgl-kernel): "nvcc fatal : Unsupported gpu architecture 'compute_120a'".
            T("Unsupported gpu architecture", r"Unsupported gpu architecture '(?P<arch>\w+)'"),
            # Triton's language/semantic.py: "type fp8e4nv not supported in this architecture".
            T("not supported in this architecture"),
            # Capability refusals in other words. vLLM: "Bfloat16 is only supported on GPUs with compute
            # capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5", quantization's
            # "... is not supported for the current GPU. Minimum capability: 80. Current capability: 75."
            # and compressed-tensors' "Min capability: 75. Current capability: 70."; FlashInfer/SGLang
            # "Unsupported compute capability"; containers and kernels that "only support(s) sm75/sm_90a".
            T("Unsupported compute capability", r"(?:(?P<arch>sm_?\d+\w?)|capability:? (?P<capability>\d+(?:\.\d+)?))?"),
            T("compute capability of at least", r"(?:has compute capability (?P<capability>\d+(?:\.\d+)?))?"),
            T("Current capability:", r"Min(?:imum)? capability: \d+\W{0,8}Current capability: (?P<capability>\d+)"),
            T("is not supported for the current GPU"),
            # flash-attn's own check (csrc/flash_attn/flash_api.cpp: "FlashAttention only supports Ampere GPUs or newer.";
            # its Turing-era build "... only supports Turing GPUs or newer.").
            T("only support", r"\bonly supports? (?:GPUs? (?:with )?)?(?:sm_?\d+|SM ?\d+|compute capability|Ampere|Hopper|Blackwell|Turing|Volta|Ada)"),
            # vLLM 0.4.x lora/punica.py:10 raises it as an ImportError at import: "punica LoRA kernels require compute
            # capability >= 8.0" (the GPU, not the package: the import_error trigger steps aside for it).
            T("require", r"\brequires? (?:exact )?compute capability (?:>= ?)?\d"),
            T("GPU is not supported", r"(?:compute capability|\bsm_?\d+|architecture)"),
            T("not supported on this GPU"),
            # AMD's AITER kernels (aiter/jit/utils/chip_info.py get_gfx_custom_op_core and get_gfx_runtime): raise
            # KeyError(f"Unknown GPU architecture: {gfx}. Supported architectures: {list(...)}") when the GPU's gfx
            # target (rocminfo's, or GPU_ARCHS) is not one it has kernels for, at import or first use by the engine.
            T("Unknown GPU architecture: ", r"Unknown GPU architecture: (?P<aiter_arch>gfx\w+)\. Supported architectures"),
            # A kernel, backend or quantization refusing the GPU by the SM it needs, in the engines' exception words:
            # vLLM 0.33 v1/attention/backends/triton_attn.py:528 "bfloat16 KV cache is not supported on {name}
            # (compute capability {cc}); bfloat16 requires SM80+.", :520 "... native FP8 (fp8e4nv) requires SM89+.";
            # SGLang 0.5.23 layers/quantization/mxfp4.py:655 "MXFP4 Marlin requires SM90+.", layers/attention/
            # dsa_backend.py:374 "triton_sparse_mla requires SM90 (Hopper) or newer", hpc_ops_backend.py:140 "... requires
            # an SM90 (Hopper) GPU", unquant.py:338 "--bf16-gemm-backend ... requires SM100/SM103 (Blackwell)",
            # model_runner.py (0.4.x) "FlashAttention v3 Backend requires SM>=90."; vLLM sparse_indexer.py:120 "... requires
            # an SM100-class GPU." Only on an exception line (an info line that names a requirement is not a refusal).
            T(
                "SM",
                _EXC + r"\w*(?:Error|Exception): .*?\b(?:requires?|needs?) (?:an? )?SM ?(?:>=|\u2265)? ?(?P<required_sm>\d{2,3})\w*",
            ),
            # FlashMLA's device check (vLLM 0.8-0.10 attention/backends/flashmla.py:193, 0.33 v1/attention/backends/mla/
            # flashattn_mla.py:332: assert ..., "FlashMLA is not supported on this device" with is_flashmla_supported()'s
            # reason, an SM below 9.0).
            # vLLM 0.11+ platforms/cuda.py get_attn_backend_cls: raise ValueError(f"No valid attention backend found for
            # {device_name} with {config}. Reasons: {{BACKEND: [reason, ...], ...}}.") with each backend's reasons from
            # v1/attention/backend.py validate_configuration; when every backend names "compute capability not supported",
            # the GPU is older than all of them (another reason on any backend is a setting, not the GPU).
            T(
                "No valid attention backend found",
                r"No valid attention backend found for .*? Reasons: \{(?:\w+: \[[^\]]*\bcompute capability not supported\b[^\]]*\](?:, |\}))+",
            ),
            T("is not supported on this device", _EXC + r"\w*(?:Error|Exception): .*?\bis not supported on this device\b"),
            # The same refusal naming the GPU generation, its SM in parentheses (round eighteen): SGLang 0.5.9
            # layers/quantization/fp8_utils.py:666 "MXFP8 dense linear requires Blackwell GPUs (SM100+).", :222 "CUTLASS
            # block FP8 requires Hopper (SM90+) GPUs with CUDA 12.0+.", server_args.py:1879 "TRTLLM MLA backend is only
            # supported on Blackwell GPUs (SM100/SM12x).", multimodal_gen/configs/quantization.py:81/:97 "Nunchaku
            # SVDQuant is only supported on NVIDIA CUDA GPUs (Ampere SM8x or SM12x)." / "... currently only supported on
            # Ampere (SM8x) or SM12x GPUs; Hopper (SM90) is not supported.". Only on an exception line, and not where the same
            # sentence also names a package to install ("... requires Hopper (SM90) GPUs and FlashInfer to be installed"): either
            # may be what is missing.
            T(
                "SM",
                _EXC + r"\w*(?:Error|Exception): (?!.*\bto be installed\b).*?\b(?:requires?|needs?|only supported on) (?:an? )?(?:NVIDIA (?:CUDA )?)?"
                r"(?:(?:Ampere|Hopper|Blackwell|Ada(?: Lovelace)?|Turing|Volta)[ -])?(?:GPUs? )?\((?:\w+ )?SM ?(?:(?P<required_sm>\d{2,3})|\d)",
            ),
            # FlashInfer's own refusals (flashinfer-python 0.7.4, what `pip download flashinfer-python` offers): utils.py:1691
            # BackendSupportedError(f"{func} does not support compute capability {cc}{supported}"), :388 f"{feature} is only
            # supported on SM107 (Rubin); the current device is sm{major}{minor}.", triton/utils.py:35/:39 GPUArchitectureError
            # ("Device major should be in {major}, but got {actual}"), jit/minimax_h3_mlp.py:66 "... requires exact compute
            # capability 10.0 (B200/GB200) or 10.3 ..." (the `require` trigger above), compilation_context.py:104/:107 "SM 120
            # requires CUDA >= 12.8" / "SM 12.1+ requires CUDA >= 12.9" (the toolkit has no target for this GPU, as ptxas'
            # refusal above) and :162 f"No supported CUDA architectures found for major versions {majors}." (the GPU's
            # major is none a kernel is built for). Exception lines only.
            # Any refusal of the GPU in other words (round twenty-seven): an exception's message that names a GPU
            # architecture (an SM or sm_ number, a compute capability, an AMD gfx target, an NVIDIA generation) and refuses
            # in the same message (not supported, unsupported, not implemented, incompatible, too old, only supports, requires
            # or needs). The engines and their kernel libraries raise their architecture checks in these words (the
            # triggers above are the ones read so far; a library not read yet words its own the same way), and an
            # exception that names the GPU's architecture while refusing is refusing the GPU. Exception lines only; not
            # where the message names a package to install, the installed build or what a package exports, or a toolkit
            # (either may be what is missing: "... is required for the gfx1250 path but was not found in the installed aiter
            # build", "... needs aiter's <op>: aiter exports it=False, gfx95=True"), nor vLLM's attention
            # backend selection (its reasons per backend are read above: one backend refused for a setting is not the GPU).
            *(
                T(literal, _EXC + r"\w*(?:Error|Exception): (?!.*\b(?:to be installed|pip install|CUDA (?:toolkit|version) |No valid attention backend found|the installed|exports)\b)" + _ARCH_REFUSAL)
                for literal in ("SM", "sm", "apability", "gfx", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
            ),
            T("does not support compute capability", _EXC + r"\w*(?:Error|Exception): .*?\bdoes not support compute capability \d"),
            T("only supported on SM", _EXC + r"\w*(?:Error|Exception): .*?\bonly supported on SM ?(?P<required_sm>\d{2,3})"),
            T("GPUArchitectureError"),
            T(" requires CUDA >", _EXC + r"\w*(?:Error|Exception): SM ?\d[\d.]*\+? requires CUDA >= ?\d"),
            T("No supported CUDA architectures found for major versions"),
            # FlagTree's FlagTune (the autotuner FlagGems' cost model calls: flag_gems/flagtune/cost_model.py load_model ->
            # discover_gpu_metadata -> triton/flagtune/runtime/device.py probe_flagtune_device) reads the active Triton
            # target's backend and, when no adapter is registered for it, raises UnsupportedFlagTuneDeviceError(f"FlagTune
            # does not support Triton backend {shown!r}; registered backends: {supported}"): the kernel library has no
            # support for this accelerator, as AITER's "Unknown GPU architecture" above. Python prints the message on the
            # line after the exception's name when it starts with a newline; either line holds the words.
            T(
                "does not support Triton backend",
                r"FlagTune does not support Triton backend '(?P<triton_backend>[^']*)'; registered backends: (?P<registered_backends>.+)",
            ),
            # SGLang's attention backend creation gating the backends by the GPU's generation for a model family (0.5.17
            # srt/layers/attention/attention_registry.py:395-414: for hybrid GDN models `if is_blackwell():` the allowed
            # set is {"triton", "trtllm_mha", "flashinfer"} on SM120 and {"triton", "trtllm_mha", "fa4"} on SM100/SM103,
            # then `assert attn_be in allowed, (f"Only {allowed} backends are supported on Blackwell GPUs for hybrid GDN
            # models. " f"Got attention_backend={attn_be}.")`): the chosen backend's kernels do not serve this family on
            # this GPU, the same refusal as "... is only supported on Blackwell GPUs (SM100)" above, by the GPU's class.
            T(
                "backends are supported on",
                r"\bOnly \{(?P<allowed_backends>[^}]*)\} backends are supported on (?P<gpu_generation>[A-Z]\w+) GPUs",
            ),
            # ROCm's twin of CUDA's "no kernel image is available": hipErrorInvalidDeviceFunction, whose hipGetErrorString
            # is "invalid device function", printed by PyTorch's hipified C10_CUDA_CHECK as "HIP error: " + the string
            # (with "HIP kernel errors might be asynchronously reported ..." and "Compile with `TORCH_USE_HIP_DSA` ...").
            # CUDA's cudaErrorInvalidDeviceFunction (98) prints the same words, documented as "the requested device
            # function does not exist or is not compiled for the proper device architecture" (CUDA runtime API): a
            # kernel with no code for this GPU's target. (ROCm's clr launch path was not read for other returns of it.)
            # Only the check's "<API> error: invalid device function" form counts, not the enum or the words in prose.
            T("error: invalid device function", r"\b(?P<runtime_api>HIP|CUDA) error: invalid device function\b"),
            # PyTorch Inductor's refusal before it compiles a Triton kernel for a GPU below compute capability 7.0
            # (torch 2.13 torch/_inductor/exc.py:143-155 GPUTooOldForTriton, raised by scheduler.py:8497
            # create_backend; older torch a RuntimeError with the same text): "Found {name} which is too old to be
            # supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA
            # Capability >= 7.0, but your device is of CUDA capability {major}.{minor}".
            T(
                "too old to be supported by the triton GPU compiler",
                r"too old to be supported by the triton GPU compiler(?:.*?your device is of CUDA capability (?P<triton_capability>\d+\.\d+))?",
            ),
            # vLLM's CUTLASS 3.x scaled-mm entry points for Blackwell (csrc/quantization/cutlass_w8a8 scaled_mm_c3x_sm100.cu
            # / scaled_mm_c3x_sm120.cu cutlass_scaled_mm_sm100 / _sm120: TORCH_CHECK((a_scales.numel() == 1 || ... ==
            # a.size(0)) && (b_scales.numel() == 1 || ... == b.size(1)), "Currently, block scaled fp8 gemm is not
            # implemented for Blackwell")): the release has no block-scaled FP8 kernel for this GPU family.
            T("block scaled fp8 gemm is not implemented for", r"block scaled fp8 gemm is not implemented for (?P<gpu_family>Blackwell|Hopper|Ada\w*)"),
            # FlagOS's vLLM platform plugin (vllm-plugin-FL vllm_fl/utils.py _get_vendor_device_field, behind get_device_type /
            # get_device_name when the platform initialises): raise ValueError(f"Vendor '{normalized_vendor}' not found in
            # VENDOR_DEVICE_MAP.") when the accelerator vendor it detected has no device entry: the plugin release does not
            # support this accelerator (as FlagTune's refusal of a Triton backend above).
            T("not found in VENDOR_DEVICE_MAP", r"Vendor '(?P<accelerator_vendor>[^']*)' not found in VENDOR_DEVICE_MAP"),
        ),
        "FlagOS's vLLM platform plugin (vllm-plugin-FL) has no device entry for this accelerator's vendor "
        "'{accelerator_vendor}' (its VENDOR_DEVICE_MAP): use a plugin release that lists the vendor, or run on an "
        "accelerator the installed release supports.",
        "This release's CUTLASS kernels have no block-scaled FP8 GEMM for {gpu_family} GPUs: serve the checkpoint with a "
        "release that has them (a newer vLLM), or a per-tensor / per-channel FP8 checkpoint of the model.",
        "Triton, which torch.compile's Inductor uses, needs CUDA capability 7.0 or newer and this GPU has "
        "{triton_capability}: serve with --enforce-eager (no torch.compile) or on a Volta-or-newer GPU.",
        "The installed build has no kernel code for this GPU's architecture ({runtime_api} error 'invalid device "
        "function'): use torch and engine builds compiled for it (ROCm: PYTORCH_ROCM_ARCH or the image's gfx list naming "
        "its gfx target, or HSA_OVERRIDE_GFX_VERSION set to a supported target of the same family; CUDA: "
        "TORCH_CUDA_ARCH_LIST naming its SM).",
        "SGLang allows only the attention backends {allowed_backends} on {gpu_generation} GPUs for this model family: "
        "relaunch with --attention-backend triton (or another backend of that set), and pick from the same set for the "
        "prefill and decode attention backends where they are set apart.",
        "FlagTune (FlagTree's autotuner, which FlagGems' cost model probes) has no adapter for this accelerator's Triton "
        "backend '{triton_backend}' (it has: {registered_backends}): use a FlagGems release without FlagTune's cost model "
        "or a FlagTree build that registers this backend.",
        "AMD's AITER kernels have no code for this GPU ({aiter_arch}): serve without AITER (vLLM "
        "VLLM_ROCM_USE_AITER=0, SGLang SGLANG_USE_AITER=0 and an attention backend other than aiter), or use an "
        "AITER build that lists this architecture.",
        "A kernel or backend the start chose needs an SM{required_sm} GPU or newer, which this GPU is not: pick another "
        "backend for it (the attention, MoE or GEMM backend the error names, or another quantization), or serve on a "
        "GPU of that generation.",
        "The installed kernels have no code for this GPU ({arch}): install torch / sgl-kernel / flashinfer "
        "wheels built for it (SM120 needs CUDA >= 12.8 builds) and a ptxas that knows it, or pick "
        "another --attention-backend.",
        "The installed kernels have no code for this GPU's architecture: install torch / sgl-kernel / "
        "flashinfer wheels built for it (SM120 = RTX PRO 6000 / RTX 5090 needs CUDA >= 12.8 builds; "
        'FlashInfer JIT needs a CUDA >= 12.9 toolkit or FLASHINFER_CUDA_ARCH_LIST="12.0f"); on SM120 use '
        "--attention-backend flashinfer or triton, not fa3 or trtllm_mha.",
    ),
    _fatal(
        "cuda_illegal_instruction",
        C.CUDA_ILLEGAL_INSTRUCTION,
        50,
        (T("an illegal instruction was encountered"), T("cudaErrorIllegalInstruction")),
        "A GPU kernel hit an illegal instruction while DDTree ran with budget={ddtree_budget} (last "
        "avg_accepted_drafts={ddtree_accepted}). In the seed campaign budgets 8 and 12 crashed this way on "
        "SM120 while 15 and 16 ran: skip this budget in the sweep, or re-try once with {flag_disable_cuda_graph} "
        "to tell a capture bug from a kernel bug.",
        "A GPU kernel hit an illegal instruction (a kernel bug or code built for another architecture). "
        "Re-try with {flag_disable_cuda_graph} and with another --attention-backend (flashinfer <-> triton) to "
        "isolate the kernel; with CUDA_LAUNCH_BLOCKING=1 the traceback names it. Skip this configuration "
        "if it persists.",
    ),
    _fatal(
        "cuda_illegal_memory_access",
        C.CUDA_ILLEGAL_MEMORY_ACCESS,
        55,
        (
            T("illegal memory access"),
            T("cudaErrorIllegalAddress"),
            # ROCm's HSA runtime on a GPU page fault (ROCR-Runtime's memory-fault handler: "Memory access fault by GPU node-%u
            # (Agent handle: %p) on address %p%s. Reason: %s.", then the process aborts; a queue's error callback may print
            # HSA_STATUS_ERROR_MEMORY_FAULT): a kernel read or wrote where no memory is mapped, CUDA's illegal address on AMD.
            T("Memory access fault by GPU node-"),
            T("HSA_STATUS_ERROR_MEMORY_FAULT"),
            T("CUDA error: misaligned address"),
            # Ascend's CANN runtime, when an AI Core / vector core kernel faults, decodes the core's error registers into
            # "The extend info: errcode:(...) errorStr: <words>." (runtime device_error_core_proc.cc PrintCoreInfo /
            # ProcessStarsCoreErrorInfo, after "there is an exception of aivec error" and before "Kernel task happen
            # error, retCode=0x31, [vector core exception]" and the caller's 507035 / 507011). The address faults among
            # those words: "The MPU address access is invalid." (the memory protection unit refused the address), "The
            # DDR address of the MTE instruction is out of range." (a data move from global memory outside it), "VEC
            # instruction error: the ub address out of bounds."; CANN's troubleshooting guide reads such AI Core errors as
            # memory accessed out of bounds (maintenref troubleshooting, "memory access may be out of bounds ... memory
            # error detection"). The NPU's kernel reading or writing outside its memory: the same class as CUDA's
            # illegal address, as HIP's "an illegal memory access was encountered" is. Not the bus-response or
            # instruction-decode words, which name no address.
            # AWS Neuron's runtime: NRT_EXEC_OOB = 1006 (libnrt nrt/nrt_status.h), an execution that accessed memory out of
            # bounds, which vllm-neuron's model runner raises as "Failed to execute the model status=1006
            # message=Execution Out-Of-Bounds Memory Access": the NeuronCore's illegal address, as CANN's below.
            T("Execution Out-Of-Bounds Memory Access", r"(?P<neuron_fault>(?:status=1006 message=)?Execution Out-Of-Bounds Memory Access)"),
            T(
                "errorStr: ",
                r"errorStr: (?P<npu_address_fault>[^.]*?\baddress\b[^.]*?\b(?:is invalid|out of range|out of bounds))",
            ),
        ),
        "A NeuronCore execution accessed memory out of bounds (Neuron runtime: {neuron_fault}): re-compile the model for "
        "these shapes (clear the neuron compile cache), check that the request fits the compiled sequence length and batch "
        "buckets, and compare with the previous Neuron SDK / vllm-neuron release.",
        "An NPU kernel read or wrote outside its memory (CANN: {npu_address_fault}): re-run with ASCEND_LAUNCH_BLOCKING=1 "
        "to name the kernel (the 'fault kernel_name' line names it too), try without graph mode and without the fused "
        "kernel's option (DeepEP / MoE dispatch, the attention backend), and compare with the previous torch_npu / CANN "
        "/ engine release.",
        "A kernel read or wrote outside its memory during {capture_step}: re-try with "
        "{flag_disable_cuda_graph} (slow, but shows whether capture is at fault), drop --enable-torch-compile, "
        "or try another --attention-backend; CUDA_LAUNCH_BLOCKING=1 names the kernel.",
        "A kernel read or wrote outside its memory: re-try with {flag_disable_cuda_graph} and with another "
        "--attention-backend to isolate it, and with CUDA_LAUNCH_BLOCKING=1 to name the kernel. Often a "
        "version regression: compare with the previous sglang / flashinfer release.",
    ),
    _fatal(
        "cuda_oom",
        C.CUDA_OOM,
        60,
        (
            # The size where the line states it: anchored, so that the optional group is tried before
            # the empty match at the line's start (unanchored, `search` took the empty match first).
            T("OutOfMemoryError", r"^(?:.*?Tried to allocate (?P<tried>[\d.]+ [GMK]iB))?"),
            T("CUDA out of memory", r"^(?:.*?Tried to allocate (?P<tried>[\d.]+ [GMK]iB))?"),
            # Other accelerators' caching allocators raise the same sentence with their device's name:
            # torch's XPU (c10/xpu/XPUCachingAllocator.cpp, TORCH_CHECK_WITH(OutOfMemoryError, ..., "XPU out
            # of memory. Tried to allocate ", ...)), ROCm's hipified CUDA allocator ("HIP out of memory"),
            # Ascend's torch_npu (csrc/core/npu/NPUCachingAllocator.cpp, "NPU out of memory. Tried to
            # allocate "), raised as RuntimeError or as OutOfMemoryError. The class is the device's memory.
            # A quote of PyTorch's OOM message that dropped its head ("CUDA out of memory. "): the rest is
            # still the allocator's own sentence (c10/cuda/CUDACachingAllocator.cpp: "Tried to allocate ",
            # format_size(alloc_size), ". GPU ", device, " has a total capacity of ", ...), which no other
            # message prints; the capacity alone (an info line, a doc) is not it.
            T("has a total capacity of", r"Tried to allocate (?P<tried>[\d.]+ [GMK]iB)\. GPU \d+ has a total capacity of"),
            T(" out of memory. Tried to allocate", r"\b(?:XPU|HIP|NPU) out of memory\. Tried to allocate (?P<tried>[\d.]+ [GMK]iB)"),
            # torch_npu's workspace allocator (c10_npu::NPUWorkspaceAllocator, NpuWorkspaceAllocator::malloc after
            # emptying both caches) raises its own sentence for the same device memory: TORCH_CHECK(false, "NPU out of
            # memory. NPUWorkspaceAllocator tried to allocate ", format_size(size), "(NPU ", device, "; ",
            # format_size(device_total), " total capacity; ", format_size(device_free), " free)", PTA_ERROR(...)).
            T("NPUWorkspaceAllocator tried to allocate", r"\bNPU out of memory\. NPUWorkspaceAllocator tried to allocate (?P<tried>[\d.]+ [GMK]iB)"),
            # PyTorch's caching allocator warning that a cudaMalloc failed (c10/cuda/CUDACachingAllocator.cpp, :3933 in the
            # build of a 2026 vLLM log: "[W930 15:33:03.660110548 CUDACachingAllocator.cpp:3933] memory allocation failed
            # with OOM on device 0 while trying to allocate 253755392 bytes (free: 191627264, total: 15636037632).") before
            # it frees its cached blocks and retries: a warning, often survived (the retry succeeds), so it names the
            # failure only as a warning does, where nothing else failed and the start never came up or went on past it.
            T("memory allocation failed with OOM on device"),
            T("CUDA error: out of memory"),
            # The same check on ROCm: PyTorch's hipified C10_CUDA_CHECK prints "HIP error: " + hipGetErrorString, "out of
            # memory" for hipErrorOutOfMemory.
            T("HIP error: out of memory"),
            # cuBLAS could not allocate its handle or workspace: PyTorch's TORCH_CUDABLAS_CHECK prints "CUDA error:
            # CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`" (aten/src/ATen/cuda/CUDABlas.cpp, Exceptions.h);
            # cuBLAS documents the status as "Resource allocation failed inside the cuBLAS library. This is usually caused by
            # a cudaMalloc() failure."
            T("CUBLAS_STATUS_ALLOC_FAILED"),
            # XLA / PJRT on TPU (and JAX's other backends): the runtime's out-of-memory statuses. PJRT tags them with the
            # "[type.googleapis.com/pjrt.OOM='']" payload; XLA's error E0101 RuntimeProgramAllocationFailure ("Error loading
            # program ...: Attempting to reserve 384.11M at the bottom of memory. That was not possible. There are 346.77M
            # free ..."), the TPU allocator's "Attempting to allocate 17.0K. That was not possible. There are 48.0K free.",
            # the BFC allocator's "RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes." and the TPU
            # compiler's "Ran out of memory in memory space hbm": the accelerator's memory, as torch_xla / tpu_inference
            # under vLLM meet it.
            T("pjrt.OOM"),
            T("That was not possible. There are", r"Attempting to (?:allocate|reserve) \S+(?: at the bottom of memory)?\. That was not possible\. There are \S+ free"),
            T("RESOURCE_EXHAUSTED: ", r"RESOURCE_EXHAUSTED: (?:Out of memory while trying to allocate|.*?\bRan out of memory in memory space)"),
            # vLLM's sleep-mode allocator (csrc/cumem_allocator.cpp, its CUDA_CHECK macro: snprintf(error_msg, ...,
            # "CUDA Error: %s at %s:%d", error_string, __FILE__, __LINE__) with the driver's cuGetErrorString, printed
            # to std::cerr and raised by python_create_and_map as RuntimeError(error_msg), which vllm/device_allocator/
            # cumem.py's wake_up and allocations let through): CUDA_ERROR_OUT_OF_MEMORY's string is "out of memory".
            T("CUDA Error: out of memory"),
            # PyTorch's driver-API check (c10/cuda/driver_api.h C10_CUDA_DRIVER_CHECK: TORCH_CHECK(false, "CUDA driver
            # error: ", err_str) with cuGetErrorString's text), e.g. under a GPTQ Marlin repack's cuMemCreate; CUDA's
            # CUDA_ERROR_OUT_OF_MEMORY reads "out of memory".
            T("river error: out of memory"),
            # Triton's launcher (third_party/nvidia/backend/driver.c gpuAssert: PyErr_Format(PyExc_RuntimeError, "Triton
            # Error [CUDA]: %s", cuGetErrorString's text)) when loading or launching a kernel finds no memory.
            T("Triton Error [CUDA]: out of memory"),
            # SGLang's check that every rank has about the same free memory before loading (0.3.6 model_executor/
            # model_runner.py:225 and 0.4.x :392 raise ValueError("The memory capacity is unbalanced. Some GPUs may be
            # occupied by other processes. ..."); 0.5.23 distributed/bootstrap.py:450 raises it as RuntimeError when
            # SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is on and logs a warning otherwise): raised, it is memory another process
            # holds, as vLLM's "Free memory on device ... on startup is less than desired" below is; the warning stays
            # the memory_unbalanced finding.
            # vLLM 0.33 v1/worker/utils.py:732, beside the free-memory refusal below: "Externally held weights on device
            # {dev} ({x}/{y} GiB) exceed the desired GPU memory utilization ({u}, {z} GiB). Increase GPU memory utilization
            # ...": memory held outside the engine's budget leaves it none.
            T("exceed the desired GPU memory utilization", r"Externally held weights on device"),
            T("The memory capacity is unbalanced", _EXC + r"\w*(?:Error|Exception): The memory capacity is unbalanced"),
            # NCCL's CUDACHECK (src/include/checks.h) WARNs "Cuda failure '%s'" with cudaGetErrorString, its
            # CUCHECK (src/include/cudawrap.h) "Cuda failure %d '%s'" with the driver's error number too.
            T("Cuda failure", r"Cuda failure (?:\d+ )?'out of memory'"),
            # NCCL's device allocation for its buffers (src/include/alloc.h ncclCudaCallocDebug, 2.12-2.27 and RCCL's copy):
            # cudaMalloc (cuMemCreate under NCCL_CUMEM_ENABLE) under CUDACHECKGOTO/NCCLCHECKGOTO, then `if (*ptr == nullptr &&
            # nelem > 0) WARN("Failed to CUDA calloc %ld bytes", ...)`: the device gave no memory for the buffer. That WARN is
            # NCCL's last error, which c10d's "unhandled cuda error" message quotes after "Last error:" in place of the
            # "Cuda failure 'out of memory'" before it. At NCCL's WARN level, it is still the failure. (Not "Failed to CUDA
            # host alloc", pinned host memory.)
            T("Failed to CUDA calloc", r"Failed to CUDA calloc \d+ bytes", proves_as_warning=True),
            T("cudaErrorMemoryAllocation"),
            # vLLM refuses to start when the GPU's free memory is below --gpu-memory-utilization's share
            # (v1/worker/utils.py:742, :763): "Free memory on device cuda:0 (3.22/4.0 GiB) on startup is
            # less than desired GPU memory utilization (0.9, 3.6 GiB)". Memory another process holds: the
            # OOM's fix (a lower fraction, or free the GPU). vLLM 0.9 (v1/worker/gpu_worker.py:146-152,
            # init_device) printed no device name: f"Free memory on device ({free}/{total} GiB) on startup".
            # vLLM 0.11 model_executor/layers/linear.py:217 (UnquantizedLinearMethod.create_weights): `except
            # torch.cuda.OutOfMemoryError` logs "Failed to create unquantized linear weights: %s" and raises
            # RuntimeError("Failed to create unquantized linear weights. This may be caused by insufficient memory to
            # allocate the weight.") from it: only an OOM makes it.
            T("Failed to create unquantized linear weights. This may be caused by insufficient memory"),
            T("on startup is less than", r"Free memory on device (?:\S+ )?\((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\)"),
            # torch_memory_saver (the pause/resume allocator SGLang's --enable-memory-saver and RL trainers' rollout engines
            # use; fzyzcjy/torch_memory_saver csrc/utils.h): its CURESULT_CHECK and CUDA_ERROR_CHECK macros print
            # "[torch_memory_saver.cpp] CUresult error: " << result << " (" << cuGetErrorString's text << ") " and
            # "[torch_memory_saver.cpp] cudaError error: " likewise (since 2025-07; before, "CUresult error  result=N" and on
            # ROCm "hipError_t error  result=N"), then " file=... func=... line=..." and exit(1). Result 2 is the device's
            # memory in each enumeration the macros print: CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation (which
            # CUDAUtils::cu_mem_create returns when cuMemCreate reports CUDA_ERROR_OUT_OF_MEMORY, after its own "may not be an
            # issue" line, which is no failure: the preload hook hands that result back to torch, which frees cache and
            # retries), hipErrorOutOfMemory (the ROCm build maps cudaErrorMemoryAllocation to it). resume() re-creating a
            # paused region's memory (csrc/core.cpp) is where an RL loop meets it: the engine cannot get its memory back.
            T(
                "[torch_memory_saver.cpp] ",
                r"\[torch_memory_saver\.cpp\] (?:(?:CUresult|cudaError) error: 2 \(|(?:CUresult|hipError_t) error\s+result=2\s)"
                r"(?:.*?\bfunc=(?P<memory_saver_call>\w+))?",
            ),
            # Intel GPUs (XPU) through SYCL: the runtime throws for a Unified Runtime call's failure
            # __SYCL_UR_ERROR_REPORT(backend) + codeToString(result) (intel/llvm sycl/source/detail/adapter.hpp checkUrResult:
            # "level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)", older releases "UR backend
            # failed. UR backend returns:39 (...)"), and UR's Level Zero adapter returns that result for Level Zero's
            # ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, "insufficient device memory to satisfy call" (unified-runtime
            # source/adapters/level_zero/common.cpp ze2urResult, 2023-09 to now). Not UR_RESULT_ERROR_OUT_OF_RESOURCES (40):
            # the adapter returns that for its own objects (a host std::bad_alloc creating a queue or an event, a full
            # completion batch or event pool in a kernel launch), not for the device's memory.
            T("_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", r"\b(?P<device_memory_result>(?:UR|ZE)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)\b"),
        ),
        "torch_memory_saver could not get GPU memory for the engine in its {memory_saver_call} (out of memory): when "
        "resuming, the memory the engine released is held by someone else, usually the trainer beside it (weights, "
        "gradients or optimizer states not offloaded before the resume). Free or offload that memory before resuming, "
        "or give the engine less: lower --mem-fraction-static by 0.05.",
        "CUDA ran out of memory during {capture_step} (mem_fraction_static={mem_fraction_static}): "
        "lower --mem-fraction-static by 0.03-0.05 to leave the graphs room, or lower {flag_cuda_graph_max_bs} "
        "(e.g. 16).",
        "CUDA ran out of memory during {capture_step}: lower --mem-fraction-static by 0.03-0.05, or lower {flag_cuda_graph_max_bs} (e.g. 16).",
        "CUDA ran out of memory (tried to allocate {tried}, mem_fraction_static={mem_fraction_static}): lower "
        "--mem-fraction-static by 0.03-0.05 to leave activation headroom, or lower --max-running-requests / "
        "--chunked-prefill-size.",
        "CUDA ran out of memory: lower --mem-fraction-static by 0.03-0.05 to leave activation headroom, "
        "or lower --max-running-requests / --chunked-prefill-size / {flag_cuda_graph_max_bs}; check with "
        "nvidia-smi that no other process holds GPU memory.",
    ),
    # --- SGLang's memory sizing refused to start ---------------------------------------------
    _fatal(
        "max_running_requests_zero",
        C.MAX_RUNNING_REQUESTS_ZERO,
        70,
        (
            T("max_running_request is zero"),
            T(
                "state cache is too small to serve any requests",
                r"max_mamba_cache_size=(?P<max_mamba_cache_size>\d+), mamba_ratio=(?P<mamba_ratio>\d+)",
            ),
        ),
        "SGLang computed max_running_requests=0 after the KV pool got {kv_tokens} tokens and the mamba "
        "state cache {max_mamba_cache_size} slots (context_len={context_len}). The hybrid state cache "
        "needs several slots per request: set --max-running-requests explicitly and small (e.g. 4; it was "
        "{requested_max_running_requests}), add --disable-radix-cache (1 slot per request), or raise "
        "--mamba-full-memory-ratio / --mem-fraction-static (now {mem_fraction_static}).",
        "SGLang computed max_running_requests=0 after the KV pool got {kv_tokens} tokens and the mamba "
        "state cache {max_mamba_cache_size} slots (context_len={context_len}): set --max-running-requests "
        "explicitly and small (e.g. 4), add --disable-radix-cache (1 state slot per request), or raise "
        "--mamba-full-memory-ratio / --mem-fraction-static.",
        "SGLang computed max_running_requests=0: the KV pool has {kv_tokens} tokens for "
        "context_len={context_len}. Set --max-running-requests explicitly, lower --context-length to at "
        "most {context_that_fits}, or raise --mem-fraction-static.",
        "SGLang computed max_running_requests=0 (no memory left for even one request): set "
        "--max-running-requests explicitly and small, for hybrid models add --disable-radix-cache or "
        "raise --mamba-full-memory-ratio, or raise --mem-fraction-static.",
    ),
    _fatal(
        "kv_pool_too_small",
        C.KV_POOL_TOO_SMALL,
        75,
        (
            T("Please try to increase --mem-fraction-static", r"(?:mem_fraction_static=(?P<mem_fraction_static>[\d.]+))?"),
            # mem_cache/kv_cache_configurator.py:3102 (0.5.23), model_runner.py in older releases: a warning
            # that the user's --max-total-tokens is above the profiled capacity. A negative profiled
            # value means the weights and reserved memory already exceed the budget: no pool at all.
            T(
                "is larger than the profiled value",
                r"max_total_tokens=(?P<max_total_tokens>\d+) is larger than the profiled value (?P<profiled_tokens>-\d+)",
            ),
            T("Memory pool size is too small"),
            T(
                "Not enough GPU memory for hybrid",
                r"total_rest_memory=(?P<rest_gb>-?[\d.]+) GB, mamba_cache_per_req=(?P<per_req_mb>[\d.]+) MB",
            ),
            # SGLang's kv_cache_configurator.py (0.5.16 :1561, 0.5.23 :3051): f"Loaded weights leave no GPU memory for the KV
            # cache under --mem-fraction-static={...}. Raise --mem-fraction-static above {suggested:.3f} (minimum viable =
            # ...)": the head alone proves it (a copy may stop after the first sentence); the figures when they are there.
            T(
                "Loaded weights leave no GPU memory for the KV cache",
                r"KV cache(?: under --mem-fraction-static=(?P<fraction_without_kv>\d+(?:\.\d+)?))?(?:.*?Raise --mem-fraction-static above (?P<minimum_fraction>\d+(?:\.\d+)?))?",
            ),
            T("alloc_req_slots runs out of memory"),
            # The same refusal in SGLang 0.3.x (managers/schedule_batch.py:518 alloc_req_slots: "Out of memory. Please set a
            # smaller number for `--max-running-requests`."), before 0.4 named the function in it.
            T("Please set a smaller number for `--max-running-requests`"),
            # SGLang 0.5.23's pool sizing, a sliding-window model whose window pool leaves nothing for the full KV pool
            # (model_executor/pool_configurator.py:1025 "SWA pool cap ({n} tokens, {x} GiB) leaves no room for the full
            # KV pool within the available {y} GiB. Reduce --max-running-requests, ...", :1679 the DeepSeek-V4 one), and
            # the unified pool's "[unified-memory-pool] {factory}: byte budget {b} cannot fit ONE worst-case request
            # ... Raise --mem-fraction-static, lower the model context length ..." (mem_cache/unified_memory_pool.py:1563).
            T("leaves no room for the full KV pool"),
            T("cannot fit ONE worst-case request"),
            # vLLM 0.33 config/compilation.py:1525: f"max_num_seqs ({n}) exceeds available Mamba cache blocks ({m}). Each
            # decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower
            # max_num_seqs ...": the state cache holds fewer sequences than the batch.
            T(
                "exceeds available Mamba cache blocks",
                r"max_num_seqs \((?P<max_num_seqs>\d+)\) exceeds available Mamba cache blocks \((?P<mamba_blocks>\d+)\)",
            ),
            # vLLM (engine/llm_engine.py, worker/worker.py, v1/core/kv_cache_utils.py), the pool too small
            # for one request of the model's length: "The model's max seq len (32768) is larger than the
            # maximum number of tokens that can be stored in KV cache (7344)", "To serve at least one request
            # with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the
            # available KV cache memory (0.71 GiB)", and no pool at all: "No available memory for the cache
            # blocks".
            T(
                "the maximum number of tokens that can be stored in KV cache",
                r"max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens that can be "
                r"stored in KV cache \((?P<kv_tokens>\d+)\)",
            ),
            T("To serve at least one request with the model", r"max seq len \((?P<max_model_len>\d+)\)"),
            T("KV cache is needed, which is larger than the available KV cache memory"),
            T("estimated maximum model length is", r"estimated maximum model length is (?P<kv_tokens>\d+)"),
            T("No available memory for the cache blocks"),
            # vLLM 0.33's max_model_len auto-fit (v1/core/kv_cache_planning.py:1381): raise ValueError("Cannot auto-fit
            # max_model_len: not enough GPU memory available to serve even a single token. Try increasing
            # `gpu_memory_utilization`."): the memory left for the KV cache holds not one token's cache.
            T("Cannot auto-fit max_model_len: not enough GPU memory"),
            # vLLM logs the profiled block count just before that ValueError: 0.2-0.5 llm_engine.py
            # _init_cache logger.info(f"# GPU blocks: {num_gpu_blocks}, # CPU blocks: {num_cpu_blocks}"),
            # 0.6+ executor_base.py initialize_cache "# %s blocks: %d, # CPU blocks: %d" with the device
            # name ("cuda", "GPU"). Zero device blocks is an empty pool whether or not the raise was logged.
            T(" blocks: 0", r"^# (?!CPU\b)\w+ blocks: 0(?:,|$)"),
            T("Insufficient memory for KV cache"),
        ),
        "The KV pool was profiled at {profiled_tokens} tokens: the weights and the memory SGLang reserves "
        "already exceed --mem-fraction-static's budget. Raise --mem-fraction-static, drop --max-total-tokens, "
        "or use a larger --tp-size.",
        "The weights leave no room for the KV cache: raise --mem-fraction-static above {minimum_fraction}, or use a larger --tp-size.",
        "Under --mem-fraction-static={fraction_without_kv} the weights leave no room for the KV cache: raise it, or use a larger --tp-size.",
        "The hybrid state cache does not fit: {rest_gb} GB are left after the weights and one request's "
        "state needs {per_req_mb} MB (times the draft tokens under speculative decoding): " + _MEMORY_KNOBS + "; or set a small --max-running-requests.",
        "The KV cache holds {kv_tokens} tokens, fewer than one request of the model's length "
        "({max_model_len}): lower the context length (vLLM --max-model-len, SGLang --context-length) to at "
        "most {context_that_fits}, or raise the memory fraction (vLLM --gpu-memory-utilization, SGLang "
        "--mem-fraction-static) or the tensor-parallel size.",
        "vLLM's Mamba state cache holds {mamba_blocks} sequences, fewer than max_num_seqs ({max_num_seqs}): lower --max-num-seqs to the cache's size or below, or raise --gpu-memory-utilization.",
        "The KV cache pool is too small (mem_fraction_static={mem_fraction_static}): " + _MEMORY_KNOBS + ".",
        "The KV cache pool is too small for this configuration: " + _MEMORY_KNOBS + ".",
    ),
    # vLLM V1's memory profile (v1/worker/gpu_worker.py determine_available_memory: 0.10.1.1 :276 and 0.11.0 :298
    # logger.info("Available KV cache memory: %.2f GiB", GiB(self.available_kv_cache_memory_bytes)), 0.11.1/0.12.0 :360,
    # 0.14.0 :359 "%s GiB"): requested memory (--gpu-memory-utilization's share) less the weights, activations and
    # graphs. The engine core then sizes the pool from it (v1/core/kv_cache_utils.py check_enough_kv_cache_memory:
    # `if available_memory <= 0: raise ValueError("No available memory for the cache blocks. ...")`, 0.10.1.1 :681,
    # 0.11.0 :698, 0.12.0 :685, 0.14.0 :615; a figure of 0.00 that is a few MiB above zero fails the next check, "...
    # KV cache is needed, which is larger than the available KV cache memory"). A figure at or below zero is no
    # room for the KV cache; a positive one is progress and never read. Read only where the start then fails
    # (classify: a failure after it in the same start): an excerpt that keeps the figure and "EngineCore failed to
    # start." but not the ValueError reads as the pool too small.
    _fatal(
        "kv_cache_memory_none_left",
        C.KV_POOL_TOO_SMALL,
        76,
        (T("Available KV cache memory: ", r"Available KV cache memory: (?P<kv_cache_memory_gib>-\d+(?:\.\d+)?|0(?:\.0+)?) GiB"),),
        "vLLM's memory profile left {kv_cache_memory_gib} GiB for the KV cache: the weights, activations and graphs "
        "already take --gpu-memory-utilization's share of the GPU. Raise --gpu-memory-utilization, lower --max-model-len "
        "or --max-num-seqs, or spread the model over more GPUs.",
        "vLLM's memory profile left no memory for the KV cache: raise --gpu-memory-utilization, lower --max-model-len or --max-num-seqs, or spread the model over more GPUs.",
    ),
    # --- a request did not fit --------------------------------------------------------------------
    _fatal(
        "context_length_exceeded",
        C.CONTEXT_LENGTH_EXCEEDED,
        80,
        (
            T(
                "maximum context length",  # after "the model's", whose quote some logs escape (tokenizer_manager.py)
                r"maximum context length of (?P<context_len>\d+) tokens\. You requested a total of "
                r"(?P<total_tokens>\d+) tokens: (?P<input_tokens>\d+) tokens from the input messages and "
                r"(?P<max_new_tokens>\d+) tokens",
            ),
            T(
                "is longer than the model",
                r"The input \((?P<input_tokens>\d+) tokens\) is longer than the model" + _APOS + r"s context length "
                r"\((?P<context_len>\d+) tokens\)(?!.*Truncating)",
            ),
            # vLLM's input processor: "The {prompt_type} prompt (length N) is longer than the maximum model
            # length of M" (0.33: v1/engine/input_processor.py:589), "The prompt (total length N) ..." and
            # "Prompt length of N is longer than the maximum model length of M" in other releases.
            T(
                "is longer than the maximum model length",
                r"length(?: of)? (?P<input_tokens>\d+)\)?(?: plus the number of requested output tokens \(at least 1\))? is longer than the maximum model length of (?P<context_len>\d+)",
            ),
            # vLLM's config: "User-specified max_model_len (40000) is greater than the derived max_model_len
            # (max_position_embeddings=32768 ...)", a startup refusal like SGLang's below.
            T(
                "is greater than the derived max_model_len",
                r"max_model_len \((?P<requested_context>\d+)\) is greater than the derived max_model_len "
                r"\((?:\w+=)?(?P<derived_context>\d+)",
            ),
            T(
                "exceeds the maximum allowed length",
                r"Input length \((?P<input_tokens>\d+) tokens\) exceeds the maximum allowed length "
                r"\((?P<max_allowed>\d+) tokens\)",
            ),
            T(
                "To allow overriding this maximum",
                r"context_length \((?P<requested_context>\d+)\) is greater than the derived context_length "
                r"\((?P<derived_context>\d+)\)",
            ),
            T("maximum context length is", r"maximum context length is (?P<context_len>\d+) tokens"),
            # A model build refusing the configured context above its own limit, in a vLLM platform's words: Tenstorrent's
            # vLLM fork (tt-inference-server's TT models' initialize_vllm_model: raise ValueError(f"TT-LLama8B and
            # TT-Llama11B do not support max_model_len greater than {max} on N150 (received {max_model_len}). Set
            # --max_model_len to {max} or lower in vLLM.")): the start asks for a context the model cannot serve there, as
            # vLLM's own "User-specified max_model_len ... is greater than the derived max_model_len" above. Exception lines.
            T(
                "max_model_len",
                _EXC + r"\w*(?:Error|Exception): .*?\b(?:do(?:es)? not|cannot|can ?not|must not) (?:support |serve |use )?(?:an? )?max_model_len "
                r"(?:greater|larger|longer|higher|more) than (?P<max_model_len_limit>\d+)(?:.*?\(received (?P<requested_context>\d+)\))?",
            ),
            # vLLM's tokenizer group (0.4-0.8 transformers_utils/tokenizer_group/tokenizer_group.py _raise_if_input_too_long:
            # raise ValueError("Input too long.", input_length, max_input_length), str() of a tuple of arguments).
            T("Input too long.", _EXC + r"ValueError: \('Input too long\.', (?P<input_tokens>\d+), (?P<context_len>\d+)\)"),
            # SGLang 0.5.23's decisions endpoint (srt/entrypoints/openai/serving_decisions.py:351): f"the prompt has {n} tokens,
            # which does not fit the context length of {m} tokens".
            T("which does not fit the context length of", r"the prompt has (?P<input_tokens>\d+) tokens, which does not fit the context length of (?P<context_len>\d+) tokens"),
            # vLLM 0.33 entrypoints/serve/utils/api_utils.py:249: f"Input length ({input_length}) exceeds model's maximum
            # context length ({max_model_len})."; 0.6.6 engine/llm_engine.py:1960 (V0 _validate_model_inputs): f"The prompt
            # (total length {n}) is too long to fit into the model (context length {m}). ...".
            T(
                "s maximum context length (",
                r"Input length \((?P<input_tokens>\d+)\) exceeds model" + _APOS + r"s maximum context length \((?P<context_len>\d+)\)",
            ),
            T(
                "is too long to fit into the model",
                r"\(total length (?P<input_tokens>\d+)\) is too long to fit into the model \(context length (?P<context_len>\d+)\)",
            ),
            # vLLM's scheduler (core/scheduler.py in v0, v1/core/sched/scheduler.py) drops a prompt over
            # its limit with logger.warning("Input prompt (%d tokens) is too long and exceeds limit of
            # %d", ...) and answers it with an empty completion: the request failed, at warning level.
            T(
                "is too long and exceeds limit of",
                r"Input prompt \((?P<input_tokens>\d+) tokens\) is too long and exceeds limit of (?P<prompt_limit>\d+)",
                proves_as_warning=True,
            ),
            T("Please reduce the length of the messages or completion"),
            # vLLM sampling_params.py:693 (0.33) f"max_tokens must be at least 1, got {self.max_tokens}.": a
            # negative or zero figure is what the OpenAI server computed as max_model_len - prompt tokens for a
            # request without max_tokens (0.4.x serving_engine; get_max_tokens since): the prompt fills the context.
            T("max_tokens must be at least 1, got", r"max_tokens must be at least 1, got (?P<room_left>-\d+|0)\b"),
            # A CLIP text encoder's position limit (transformers models/clip/modeling_clip.py CLIPTextEmbeddings.forward,
            # copied by SGLang 0.5.9 multimodal_gen/runtime/models/encoders/clip.py:126): ValueError(f"Sequence length must
            # be less than max_position_embeddings (got `sequence length`: {seq_length} and max_position_embeddings:
            # {max_position_embedding}"): a prompt longer than the encoder's context (77 tokens for CLIP).
            # vLLM's renderer checking a request's tokens (0.17+ renderers/params.py _token_len_check): VLLMValidationError(
            # "You passed {n} input tokens and requested {m} output tokens. However, the model's context length is only {c}
            # tokens, resulting in a maximum input length of {c - m} tokens. Please reduce the length of the input prompt.")
            # answered 400; its character pre-check "You passed {n} input characters. However, the model's context length
            # is only {c} tokens (at most {k} characters)." the same refusal before tokenising.
            T(
                "the model's context length is only",
                r"You passed (?P<input_tokens>\d+) input (?:tokens|characters)(?: and requested (?P<max_new_tokens>\d+) output tokens)?\. "
                r"However, the model(?:\\*'|\u2019|\\u2019|&#39;|&#x27;)s context length is only (?P<context_len>\d+) tokens",
            ),
            T(
                "Sequence length must be less than max_position_embeddings",
                r"got `sequence length`: (?P<input_tokens>\d+) and max_position_embeddings: (?P<context_len>\d+)",
            ),
        ),
        "The model build refuses a max_model_len above {max_model_len_limit} here (the start asked for {requested_context}): lower --max-model-len to {max_model_len_limit} or below.",
        "The model build refuses a max_model_len above {max_model_len_limit} here: lower --max-model-len to {max_model_len_limit} or below.",
        "--context-length {requested_context} is above the model's derived {derived_context}: lower it to "
        "{derived_context}, or set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in the service environment "
        "if the model really supports it (DFlash drafts inherit the target's context).",
        "A request needs {total_tokens} tokens ({input_tokens} prompt + {max_new_tokens} to generate) but "
        "the server's context is {context_len}: keep the workload's prompts below {max_prompt_tokens} "
        "tokens with a margin for chat-template tokens, lower max_new_tokens, or raise --context-length "
        "if the model allows it.",
        "A prompt of {input_tokens} tokens exceeds the {max_allowed} tokens this server accepts, which is "
        "set by its KV pool ({kv_tokens} tokens), not by --context-length ({context_len}): shorten the "
        "workload's prompts, or grow the pool with a higher --mem-fraction-static or a larger --tp-size.",
        "A prompt of {input_tokens} tokens exceeds the {max_allowed} tokens this server accepts (the KV "
        "pool or the context length limits it): shorten the workload's prompts, or grow the pool with a "
        "higher --mem-fraction-static or a larger --tp-size.",
        "vLLM ignored a prompt of {input_tokens} tokens (an empty completion): its limit is {prompt_limit}, "
        "--max-model-len, or without chunked prefill the smaller of that and --max-num-batched-tokens. "
        "Shorten the workload's prompts, or raise --max-model-len (and --max-num-batched-tokens) if the "
        "model allows it.",
        "A prompt of {input_tokens} tokens does not fit the context of {context_len}: shorten the workload's prompts or raise --context-length if the model allows it.",
        "A request exceeded the context ({context_len} tokens): shorten the workload's prompts or its max_new_tokens, or raise --context-length if the model allows it.",
        "A request exceeded the server's context length: keep prompt + max_new_tokens below the context length with a margin, or pass --allow-auto-truncate.",
        # tokenizer_manager.py answers the request with a 400 and serves on; a startup refusal of
        # --context-length is a ValueError whose "Scheduler hit an exception" kills the server.
        server_survives=True,
    ),
    # --- vLLM's custom all-reduce failed a CUDA call ---------------------------------------------------------
    # csrc/custom_all_reduce.cuh wraps its CUDA runtime calls (opening the peers' IPC handles, registering the graph
    # buffers when a CUDA graph capture ends) in a CUDACHECK of the NCCL-tests form: `printf("Failed: Cuda error
    # %s:%d '%s'\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(EXIT_FAILURE);` (older releases `printf("Failed:
    # %s:%d '%s'\n", ...)`, vllm#5613's "Failed: .../csrc/custom_all_reduce.cuh:310 'invalid argument'"). The process
    # exits on it: it is the failure, the worker-death lines after it its consequence. Its class comes from where it
    # happened (classify.py: under CUDA graph capture, cuda_graph_error, as SGLang's "Capture cuda graph failed" around
    # the same check is; elsewhere the CUDA error string's own class).
    _fatal(
        "custom_allreduce_cuda_check",
        C.CUDA_GRAPH_ERROR,
        84,
        (T("custom_all_reduce.cuh:", r"\bFailed: (?:Cuda error )?\S*custom_all_reduce\.cuh:\d+ '(?P<cuda_error>[^'\n]+)'"),),
        "vLLM's custom all-reduce failed a CUDA call ('{cuda_error}'; it registers its graph buffers as a CUDA graph "
        "capture ends and opens the peers' IPC handles): relaunch with --disable-custom-all-reduce (NCCL all-reduce), "
        "and check peer-to-peer access between the GPUs (nvidia-smi topo -m).",
        "vLLM's custom all-reduce failed a CUDA call (it registers its graph buffers as a CUDA graph capture ends and "
        "opens the peers' IPC handles): relaunch with --disable-custom-all-reduce (NCCL all-reduce), and check "
        "peer-to-peer access between the GPUs (nvidia-smi topo -m).",
    ),
    # --- an operation a CUDA graph capture cannot record broke the capture ------------------------
    # The CUDA runtime's own words for it (cudaGetErrorString; HIP's hipGetErrorString the same or its own
    # wording): cudaErrorStreamCaptureUnsupported "operation not permitted when stream is capturing", ...Merge
    # "operation would result in a merge of separate capture sequences", ...Unmatched "capture was not ended in
    # the same stream as it began" (HIP "capture was not initiated in this stream"), ...Unjoined "capturing stream
    # has unjoined work" (HIP "capture sequence contains a fork that was not joined to the primary stream"),
    # ...Isolation "dependency created on uncaptured work in another stream", ...Implicit "operation would make
    # the legacy stream depend on a capturing blocking stream", cudaErrorCapturedEvent "operation not permitted on
    # an event last recorded in a capturing stream", ...WrongThread "attempt to terminate a thread-local capture
    # sequence from another thread". Each is returned only by a call made while a stream captures: the capture
    # itself is what failed, whichever library made the call. A cause, not the wrapper above: NCCL's CUDA-call
    # check quotes it ("enqueue.cc:267 NCCL WARN Cuda failure 'dependency created on uncaptured work in another
    # stream'", a collective launched inside vLLM's capture), and the capture error, not the NCCL line, says why.
    _fatal(
        "cuda_graph_capture_broken",
        C.CUDA_GRAPH_ERROR,
        65,
        (
            *(T(error, rf"(?P<capture_error>{re.escape(error)})") for error in _CAPTURE_ERRORS),
            # torch_npu's NPUGraph refusing a call while an NPU stream captures (csrc/core/npu/NPUGraphsUtils.h
            # assertNotCapturingAclop: TORCH_CHECK(status == CaptureStatus::None, "Cannot run aclop operators during NPU
            # graph capture. Current working aclop is ", opName, ". If you need this call to be captured, please try to set
            # torch.npu.config.allow_internal_format = False. ..."; assertNotCapturing: attempt, " during NPU graph capture.
            # If you need this call to be captured, please file an issue. ..."): the ACL graph capture met an operator it
            # cannot record, as CUDA's "operation not permitted when stream is capturing" (round thirty-one, batch48).
            T("during NPU graph capture", r"(?P<npu_capture_refusal>Cannot run aclop operators during NPU graph capture\. Current working aclop is (?P<aclop>\w+))"),
            T("during NPU graph capture. If you need this call to be captured", r"(?P<npu_capture_refusal>[^.:\s][^.:]* during NPU graph capture)\. If you need this call"),
        ),
        "The NPU's ACL graph capture met an operator it cannot record ({npu_capture_refusal}): serve without graph "
        "capture (vllm-ascend --enforce-eager), or set torch.npu.config.allow_internal_format = False so the operator "
        "{aclop} runs through aclnn; if it still fails, that operator has no aclnn implementation in this torch_npu.",
        "The NPU's ACL graph capture met a call it cannot record ({npu_capture_refusal}): serve without graph capture "
        "(vllm-ascend --enforce-eager), or update torch_npu and the engine that makes the call inside the capture.",
        "A CUDA graph capture was broken by a call it cannot record ({capture_error}): the capture failed, whichever "
        "library reported it. Serve without CUDA graphs to confirm (vLLM --enforce-eager, SGLang {flag_disable_cuda_graph}), "
        "then update the engine or the library that makes the call inside the capture.",
        "A CUDA graph capture was broken by a call it cannot record: the capture failed, whichever library reported it. "
        "Serve without CUDA graphs to confirm (vLLM --enforce-eager, SGLang {flag_disable_cuda_graph}), then update the "
        "engine or the library that makes the call inside the capture.",
    ),
    # --- CUDA graph capture failed for a reason no cause above explains --------------------------
    # Ranked after every cause: the capture wrappers re-raise what failed inside them ("Capture cuda
    # graph failed: CUDA out of memory ..." is cuda_oom). 0.5.23: model_executor/runner/
    # decode_cuda_graph_runner.py:603, speculative/eagle_draft_cuda_graph_runner.py:297,
    # eagle_draft_extend_cuda_graph_runner.py:306, multi_layer_eagle_draft_extend_cuda_graph_runner.py:227
    # ("Capture cuda graph failed: {e}"), prefill_cuda_graph_runner.py:521 ("Capture prefill CUDA graph
    # failed"), frozen_kv_mtp_cuda_graph_runner.py:198, :1034 "Capture single-CG draft extend failed";
    # 0.4.x: cuda_graph_runner.py "Capture cuda graph failed". CUDA runtime errors a capture raises:
    # cudaErrorStreamCaptureInvalidated "operation failed due to a previous error during capture" (an error
    # earlier in the capture: the cause is above it); those that name what broke the capture are the cause
    # signature below.
    _fatal(
        "cuda_graph_capture_failed",
        C.CUDA_GRAPH_ERROR,
        85,
        (
            T("graph failed", r"Capture [\w -]*graph failed(?::\s*(?P<capture_error>[^\n]+))?"),
            # vllm-ascend's ACL graph capture (the NPU's CUDA graph; worker/model_runner_v1.py _capture_model, 0.11.0rc0
            # :3557, 0.11.0rc1 :3513, 0.11.0 :3552, 0.13.0rc1 :3017): logger.error(f"ACLgraph sizes capture fail:
            # {type(e).__name__}:\n" "ACLgraph has insufficient available streams to capture the configured number of
            # sizes. ..." f"{str(e)}") then `raise`: the start stops (0.11.0rc0 logs it for any exception, later releases
            # for ACL's stream-capture retCode 0x7020023 only, re-raising either way). Either line shows the capture failed.
            T("ACLgraph sizes capture fail", r"(?P<acl_graph>ACLgraph) sizes capture fail: (?P<capture_error>\w+)"),
            T("ACLgraph has insufficient available streams", r"(?P<acl_graph>ACLgraph) has insufficient available streams"),
            # torch_npu's NPU graph capture (the twin of PyTorch's CUDAGraph) checks the ACL runtime's capture status of its
            # stream, aclmdlRICaptureStatus (ACL_MODEL_RI_CAPTURE_STATUS_NONE / _ACTIVE / _INVALIDATED, as CUDA's
            # cudaStreamCaptureStatus above), through c10's TORCH_INTERNAL_ASSERT ('<condition> INTERNAL ASSERT FAILED at
            # "<file>":<line>, ...'): a graph capture on the NPU failed its state check.
            T("aclmdlRICaptureStatus", r"(?P<acl_capture_status>aclmdlRICaptureStatus)\b"),
            # torch_npu's NPUGraph calling the ACL runtime's capture (torch_npu/csrc/core/npu/NPUGraph.cpp capture_begin /
            # capture_end: NPU_CHECK_ERROR(c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, capture_mode)), printed "NPU
            # function error: c10_npu::acl::AclmdlRICaptureBegin(...), error code is <n>"): the capture itself failed.
            T("NPU function error: ", r"NPU function error: \S*(?P<acl_capture_call>AclmdlRICapture(?:Begin|End))\("),
            T("ACL_MODEL_RI_CAPTURE_STATUS_", r"(?P<acl_capture_status>ACL_MODEL_RI_CAPTURE_STATUS_\w+)"),
            T("Capture single-CG draft extend failed"),
            T("cudaErrorStreamCapture"),
            T("operation failed due to a previous error during capture"),
            # PyTorch's capture guards: at::cuda::assertNotCapturing (aten/src/ATen/cuda/CUDAGraphsUtils.cuh) raises
            # "{attempt} during CUDA graph capture. If you need this call to be captured, please file an issue. Current
            # cudaStreamCaptureStatus: {status}" (CUDAGeneratorImpl's "Cannot call CUDAGeneratorImpl::current_seed",
            # "::seed", ...; older releases " during graph capture. Current cudaStreamCaptureStatus: "), its cuDNN
            # benchmark guard "Current cudaStreamCaptureStatus: {status}\nCapturing ...", and CUDAGraph's "Cannot
            # prepare for replay during capturing stage. Current cudaStreamCaptureStatus: ...": a call a capture cannot
            # record, made while one was under way.
            T("during CUDA graph capture. If you need this call to be captured"),
            T("Current cudaStreamCaptureStatus: "),
            # The advice SGLang appends to every capture failure (CUDA_GRAPH_CAPTURE_FAILED_MSG: 0.4.x
            # cuda_graph_runner.py "4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf
            # loss)", 0.5.23 runner_backend_utils/__init__.py:19 "(Not recommended. Huge performance loss)"):
            # an excerpt that kept only the advice still shows the capture failed. SGLang prints it only inside
            # the exception it raises (0.5.23 decode_cuda_graph_runner.py:603), never on a start that goes on.
            T("Huge perf", r"\(Not recomm\w*\. Huge perf(?:ormance)? loss\)"),
            # The piecewise runner's own wrapper (0.5.x model_executor/forward_context.py and the torch.compile
            # backend's tc_piecewise context: logger.error("Piecewise CUDA Graph failed with error: %s\n%s", e,
            # PIECEWISE_CUDA_GRAPH_CAPTURE_FAILED_MSG), then re-raise), at capture or at replay while serving; its
            # advice, "To work around this error, add --disable-piecewise-cuda-graph to your launch command.", is
            # printed only inside that message.
            T("Piecewise CUDA Graph failed", r"Piecewise CUDA Graph failed with error:\s*(?P<capture_error>\S[^\n]*)?"),
            T("add --disable-piecewise-cuda-graph to your launch command"),
        ),
        "torch_npu's NPU graph capture failed in the ACL runtime ({acl_capture_call} returned an error): capture fewer sizes "
        "(cudagraph_capture_sizes in the compilation config) or serve with --enforce-eager, and check that the installed CANN "
        "is the version the NPU plugin was built for.",
        "torch_npu's NPU graph capture failed its capture-status check ({acl_capture_status}): capture fewer sizes "
        "(cudagraph_capture_sizes in the compilation config) or serve with --enforce-eager, and look above it for the "
        "first error inside the capture.",
        "vllm-ascend's {acl_graph} capture failed (the NPU has too few streams for the configured capture sizes): "
        "capture fewer sizes (cudagraph_capture_sizes in the compilation config), use ACL graph's full-graph mode, or "
        "use --enforce-eager to skip graph capture.",
        "CUDA graph capture failed ({capture_error}): capture fewer batch sizes (a smaller cuda-graph max "
        "batch size, e.g. 16) or, slower, disable CUDA graphs to tell a capture bug from a model bug; "
        "--enable-torch-compile and a mismatched draft model are the usual suspects.",
        "CUDA graph capture failed: capture fewer batch sizes (a smaller cuda-graph max batch size, e.g. 16) or, slower, disable CUDA graphs; drop --enable-torch-compile if it is on.",
        wrapper=True,
    ),
    # --- collective communication failed (often a consequence: ranked after the CUDA classes) ----
    _fatal(
        "nccl_error",
        C.NCCL_ERROR,
        90,
        (
            T("NCCL error", r"NCCL error:?(?: in: \S+,)? (?P<nccl_detail>[^(,]*[^(,\s])"),
            T("nccl", r"\bnccl(?:Unhandled|System|Internal|Invalid|Remote)\w*Error\b"),
            T("Watchdog caught collective operation timeout"),
            # c10d's ProcessGroupNCCL when a collective timed out (ProcessGroupNCCL.cpp, watchdog's checkTimeout and its
            # abort path: "Timeout at NCCL work: %ld, last enqueued NCCL work: %ld, last completed NCCL work: %ld.", then
            # "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, ..." and "To
            # avoid data inconsistency, we are taking the entire process down."): a collective never completed on this rank.
            T("Timeout at NCCL work: ", r"Timeout at NCCL work: -?\d+, last enqueued NCCL work: -?\d+, last completed NCCL work: -?\d+"),
            T("Some NCCL operations have failed or timed out"),
            T("DistBackendError"),
            # c10d's NCCLComm::getNcclComm on a communicator its watchdog aborted: "NCCL communicator was aborted on rank {r}.
            # Original reason for failure was: ..." (a DistBackendError since torch 2.2, a plain RuntimeError before).
            T("NCCL communicator was aborted on rank"),
            # NCCL has no error level: its CUDA-call checks WARN and return ncclUnhandledCudaError
            # (src/include/cudawrap.h CUCHECK: WARN("Cuda failure %d '%s'", err, errStr); checks.h
            # CUDACHECK: WARN("Cuda failure '%s'", ...)), printed "host:pid:tid [dev] file:line NCCL WARN
            # ..." (debug.c). Communicator set-up failed; the OOM form is cuda_oom's, ranked first.
            T("NCCL WARN Cuda failure", r"NCCL WARN Cuda failure (?:\d+ )?'(?P<nccl_detail>[^']+)'"),
            # c10d's heartbeat monitor: "ProcessGroupNCCL's watchdog got stuck for 600 seconds"; its flight
            # recorder on a timeout (ProcessGroupNCCL.cpp): "Received a dump signal due to a collective
            # timeout from this local rank ..." / "... from rank N".
            T("ProcessGroupNCCL's watchdog got stuck"),
            T("due to a collective timeout"),
            # The CPU process group (gloo) that SGLang and vLLM use beside NCCL: a peer that died or hangs
            # shows as "[.../gloo/transport/tcp/pair.cc:534] Connection closed by peer" or "Timed out
            # waiting 1800000ms for send operation to complete".
            T("gloo/transport", r"gloo/transport\S*\] (?P<nccl_detail>(?:Connection|Timed out|Read error|Write error)[^\[]*?)(?:\s*\[|$)"),
            # NVSHMEM (DeepEP's all-to-all under SGLang and vLLM) setting up its transports, printed
            # "<file>:<line>: <message>" by its error macros: its topology check (3.x src/host/topo/topo.cpp:469,
            # "[GPU %d] Peer GPU %d is not accessible, exiting ...") and the init that fails on it
            # (src/host/init/init.cu:1037, "non-zero status: %d building transport map failed"). The ranks'
            # communication could not be set up; the scheduler's EOFError that follows is its consequence.
            T("is not accessible, exiting", r"(?P<nccl_detail>\[GPU \d+\] Peer GPU \d+ is not accessible)"),
            T("building transport map failed", r"(?P<nccl_detail>building transport map failed)"),
            # NCCL's InfiniBand transport, testing a request whose work completion is not IBV_WC_SUCCESS (src/transport/
            # net_ib.cc ncclIbTest: WARN("NET/IB: Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d
            # (%s)%s%s%s%s hca %s", ...), "NET/IB : Got completion ..." in older releases, "NET/IB/GIN: ..." on the GIN
            # path; then `return ncclRemoteError`, the "<file>:<line> -> 6" NCCLCHECK trace under it): a collective's
            # transfer failed on the fabric after the communicators were set up. A non-zero status only.
            T(
                "Got completion from peer",
                r"NET/IB(?:/GIN)? ?: Got completion from peer \S+ with status=(?P<ib_wc_status>[1-9]\d*)",
            ),
            # The process group's rendezvous, before any collective: c10d's TCPStore client cannot reach the store the
            # first rank serves (torch/csrc/distributed/c10d/socket.cpp SocketConnectOp: "The client socket has timed out
            # after {} while trying to connect to ({}, {}).", "The client socket has failed to connect to any network
            # address of ({}, {})."), or the store gave up waiting for the others (TCPStore.cpp: "Timed out after {}
            # seconds waiting for clients. {}/{} clients joined."): the ranks never met.
            T("The client socket has ", r"(?P<rendezvous_detail>The client socket has (?:timed out after \S+ while trying to connect to|failed to connect to any network address of) \([^)]*\))"),
            T("clients joined", r"(?P<rendezvous_detail>Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined)"),
            # c10d's ProcessGroupNCCL fetching the communicator's unique id from the first rank through the store
            # (ProcessGroupNCCL.cpp broadcastUniqueNCCLID: "[<rank>] is setting up NCCL communicator and retrieving
            # ncclUniqueId from [0] via c10d key-value store by key '<key>', but store->get('<key>') got error: <what>",
            # "retreiving" in older torch): the ranks met no communicator; the first rank crashed or cannot be reached.
            T(
                "via c10d key-value store by key",
                r"(?P<rendezvous_detail>(?:is setting up NCCL communicator and )?retr(?:ie|ei)ving \w*UniqueId from \[0\] via c10d key-value store by key '[^']*', but store->get\('[^']*'\) got error: [^.]+)",
            ),
            # c10d's collective check under TORCH_DISTRIBUTED_DEBUG=DETAIL (torch/csrc/distributed/c10d/
            # ProcessGroupWrapper.cpp CollectiveFingerPrint::verify: before each collective the ranks all-gather its
            # fingerprint, sequence number, op type, shapes, over a gloo group, and on a difference TORCH_CHECK(false,
            # "Detected mismatch between collectives on ranks. Rank {r} is running collective: {fp}, but Rank {s} is
            # running collective: {fp'}." + "Collectives differ in the following aspects: ..."): the ranks desynchronised,
            # one issued a collective the others did not. It is raised by the collective call, so inside a CUDA graph
            # capture it reaches SGLang's "Capture cuda graph failed: {e}" on the same line: the ranks' collective
            # failure is the cause and the capture wrapper its consequence.
            T("Detected mismatch between collectives on ranks", r"(?P<collective_mismatch>Detected mismatch between collectives on ranks)"),
            # Ascend's HCCL, the collective library vllm-ascend and SGLang's NPU backend use in NCCL's place (read as NCCL's
            # and Gloo's are: the ranks' collective connection or call failing). HCCL's link set-up timing out, in its own
            # log ("[ERROR] HCCL(...) [hccl_socket_manager.cc:797] [Wait][LinkEstablish]wait socket establish timeout,
            # role[1] rank[1] timeout[120 s]"; the HCCL source's HCCL_ERROR("[%s][%s] wait socket establish timeout, ...")
            # beside RPT_INPUT_ERR("EI0006", ...)) and in CANN's error code: the HCCL troubleshooting guide's "Link Setup
            # Timeout (EI0006)" (the peer did not answer within HCCL_CONNECT_TIMEOUT), printed "EI0006: ... Getting socket
            # times out. Reason: Remote Rank did not send the data in time." And torch_npu's check of an HCCL collective
            # call (csrc/framework/OpParamMaker.cpp and ProcessGroupHCCL's HCCL_CHECK_ERROR: "<where> OPS function error:
            # HcclAllreduce, error code is 6", "HCCL function error: <call>, error code is <n>" for the collective ops):
            # the collective itself failed, as c10d's "NCCL error in: ..." says for NCCL. A cause CANN names beside it (a
            # port bound, EJ0003; the device's memory) is ranked before this class.
            T("wait socket establish timeout", r"(?P<hccl_detail>wait socket establish timeout(?:, role\[\d+\] rank\[\d+\] timeout\[[^\]]*\])?)"),
            T("Getting socket times out", r"(?P<hccl_detail>Getting socket times out)"),
            T("function error: Hccl", r"function error: (?P<hccl_detail>Hccl(?:All\w*|Broadcast|Reduce\w*|Send|Recv|BatchSendRecv|AlltoAll\w*|Scatter|Gather)\b[^,]*, error code is \d+)"),
            # Kunlunxin's XCCL, the collective library vLLM-Kunlun uses in NCCL's place through torch_xmlir's process group:
            # torch_xmlir raises an XCCL call's failure with the place it checked it, "ValueError: [INVALID PARAMETER]: error
            # code= 1(at .../torch_xmlir/csrc/new_xccl/XCCLUtils.hpp:53)" (XCCL's own "[XCCL][init.cpp:...] ... check failed"
            # lines before it say which step): the ranks' collective set-up or call failed, as HCCL's and NCCL's above.
            T("xccl/", _EXC + r"\w*(?:Error|Exception): (?P<xccl_detail>.*?)\s*\(at [^)]*/torch_xmlir/csrc/(?:new_)?xccl/"),
        ),
        "Kunlunxin's XCCL failed between the ranks ({xccl_detail}): read XCCL's own '[XCCL]' lines before it for the step "
        "that failed (an address window or a link check at set-up), check that every XPU is visible and the same XCCL "
        "and runtime are installed on every node, and look for the first error on the peer rank.",
        "NCCL's InfiniBand transport got a failed work completion from a peer (ibv_wc status {ib_wc_status}) during a "
        "collective: check the IB fabric between the nodes (ibstat, link errors), GPUDirect RDMA memory registration "
        "(nvidia-peermem loaded, ACS off), and that NCCL_IB_HCA / NCCL_IB_GID_INDEX name the right ports on every node.",
        "Ascend's HCCL failed between the ranks ({hccl_detail}): look for the first error on the peer rank or node (this "
        "is often its consequence: a rank that died or lags), check that every node started and reached the same step "
        "and that the NPUs' network links are up (hccn_tool's link status), and raise HCCL_CONNECT_TIMEOUT (link "
        "set-up) or HCCL_EXEC_TIMEOUT (a collective) only if a step is merely slow.",
        "The ranks ran different collectives (c10d's TORCH_DISTRIBUTED_DEBUG=DETAIL check: {collective_mismatch}): one "
        "rank issued a collective, or reached a sequence number, that the others did not. Check that every rank runs the "
        "same arguments and code and captures the same batch sizes, find the first rank that diverged, and try "
        "--disable-custom-all-reduce.",
        "The ranks could not meet at the process group's rendezvous ({rendezvous_detail}): check that the address and port "
        "the first rank serves (--dist-init-addr, MASTER_ADDR / MASTER_PORT) are reachable from every node and not "
        "firewalled, that the first node started, and that every node names the same address.",
        "NCCL failed ({nccl_detail}) while the TP ranks talked: run with NCCL_DEBUG=INFO; check that all "
        "--tp-size GPUs are visible and healthy (nvidia-smi topo -m), that /dev/shm is large enough, and "
        "try NCCL_P2P_DISABLE=1 on PCIe hosts without working peer-to-peer; or use --disable-custom-all-reduce.",
        "A collective between the TP ranks failed or timed out: look for the first CUDA error on any rank "
        "(this is often its consequence); otherwise run with NCCL_DEBUG=INFO, check peer-to-peer with "
        "nvidia-smi topo -m, and try NCCL_P2P_DISABLE=1 or --disable-custom-all-reduce.",
    ),
    # --- the engine's own watchdog cut a start (or a batch) that made no progress -------------------
    # SGLang's scheduler watchdog (managers/scheduler.py up to 0.4.x: "Watchdog timeout
    # (self.watchdog_timeout=300)"; utils/watchdog.py since: "Scheduler watchdog timeout
    # (self.watchdog_timeout=300, self.soft=False)"), then SIGQUIT to the parent. Before the server is
    # ready it is a stalled start; after it a hang while serving (the classifier says unknown then).
    # Ranked after NCCL: a collective that timed out is why a rank stopped making progress.
    _fatal(
        "engine_watchdog_timeout",
        C.SERVER_START_TIMEOUT,
        95,
        (T("atchdog timeout (self.watchdog_timeout", r"watchdog_timeout=(?P<watchdog_s>[\d.]+)"),),
        "The engine's watchdog stopped the server after {watchdog_s} s without progress; it was last "
        "{last_phase}. If loading weights: stage the model on local NVMe or /dev/shm; if capturing CUDA "
        "graphs or compiling kernels: lower {flag_cuda_graph_max_bs} or warm the JIT cache; on several nodes "
        "check that every node reached the same step (NCCL_DEBUG=INFO); or raise --watchdog-timeout.",
        "The engine's watchdog stopped the server after {watchdog_s} s without progress: a rank hung (NCCL "
        "between nodes, a JIT build, a slow disk). Look at the last step each rank logged; raise "
        "--watchdog-timeout only if the step is merely slow.",
        "The engine's watchdog stopped the server: a rank made no progress. Look at the last step each rank logged; raise --watchdog-timeout only if the step is merely slow.",
    ),
    # vLLM's front end gave up waiting for its engine core to start (v1/engine/core_client.py:764-770:
    # "Timed out waiting for engine core processes to start. This is often caused by slow weight loading
    # for large models. Waited {VLLM_ENGINE_READY_TIMEOUT_S}s (configured by VLLM_ENGINE_READY_TIMEOUT_S)").
    _fatal(
        "engine_start_timeout",
        C.SERVER_START_TIMEOUT,
        96,
        (
            T("Timed out waiting for", r"Timed out waiting for (?:new )?engine core processes to start.*?Waited (?P<ready_timeout_s>[\d.]+)s"),
            # The front end's wait for each engine core's first message on the input socket it binds (v1/engine/
            # core_client.py MPClient.__init__, 0.10.1.1 :494, 0.11.0 :496, 0.12.0 :526: raise TimeoutError("Timed out
            # waiting for engines to send" "initial message on input socket.") after poll(timeout=600_000), the two
            # literals joined without a space up to 0.12; 0.14.0 :536 "...to send " "initial message on input socket."
            # after poll(VLLM_ENGINE_READY_TIMEOUT_S * 1000); the scale-up path's "Timed out waiting for new engines to
            # send initial message on input socket." :1264/:1350). An engine core that never connected within the
            # timeout: the start timed out in the engine's own words. An engine core's failure printed before it is
            # why it never connected and wins (classify's _engine_failure_before_wait).
            T("Timed out waiting for", r"Timed out waiting for (?:new )?engines to send ?(?P<engine_wait>initial message on input socket)"),
        ),
        "vLLM's API server timed out waiting for its engine core's {engine_wait} (VLLM_ENGINE_READY_TIMEOUT_S where "
        "the release reads it, a fixed 600 s up to 0.12): the engine core never finished starting. Look at the engine "
        "core's last step; stage the model on local disk, raise VLLM_ENGINE_READY_TIMEOUT_S, lower --max-model-len, or "
        "use --enforce-eager to skip graph capture.",
        "vLLM's engine core was not ready within {ready_timeout_s} s; it was last {last_phase}. If loading "
        "weights: stage the model on local NVMe or /dev/shm, or raise VLLM_ENGINE_READY_TIMEOUT_S; if "
        "capturing CUDA graphs or compiling: lower --max-num-seqs / capture sizes or use --enforce-eager.",
        "vLLM's engine core was not ready in time: stage the model on local disk, raise VLLM_ENGINE_READY_TIMEOUT_S, or use --enforce-eager to skip graph capture.",
    ),
    # --- a crash whose traceback runs through the model's weight loader ------------------------
    # SGLang's loaders call `model.load_weights(...)` (model_loader/loader.py); a model whose
    # checkpoint names or shapes do not match it fails inside that frame with a bare KeyError or
    # AssertionError. Ranked after every cause: an OOM or an import error while loading is that.
    _fatal(
        "weight_loading_failed",
        C.MODEL_LOAD_ERROR,
        880,
        (
            # CPython's traceback line is '  File "{}", line {}, in {}'; a pasted copy may double or lose its
            # spaces ('",  line398, in load_weights'), the frame still names the loader.
            T("in load_weights", r'File "[^"]+",\s*line\s*\d+, in load_weights\b'),
            # A layer's own weight loader, which load_weights calls per tensor to copy (narrow, shard) it into the layer's
            # parameter: vLLM's and SGLang's `weight_loader` methods (vLLM 0.33 layers/linear.py, vocab_parallel_embedding.py,
            # fused_moe/routed_experts.py:667; SGLang 0.5.23 layers/moe/fused_moe_triton/layer.py:1163) and the fused-MoE
            # loader's helpers they call (`_load_w13`, `_load_w2`, `_load_model_weight_or_group_weight_scale`,
            # `_load_per_tensor_weight_scale`, `_load_per_channel_weight_scale`, `_load_single_value`, `_load_g_idx`,
            # `_load_gguf_weight`; SGLang layer.py:721-1270, vLLM's before 0.33 in fused_moe/layer.py). A traceback
            # through one, whether at start-up or when weights are loaded into a running engine (an RL trainer's
            # update), is a tensor the layer cannot take. Only in the engines' layers packages.
            T(", in _load_", r'File "[^"]*(?:vllm|sglang)[/\\]\S*layers[/\\][^"]+",\s*line\s*\d+, in _load_\w+\b'),
            T(", in weight_loader", r'File "[^"]*(?:vllm|sglang)[/\\]\S*layers[/\\][^"]+",\s*line\s*\d+, in weight_loader\w*\b'),
            # A KeyError on a checkpoint tensor's name logged as the bare key: vLLM 0.6's run_mp_engine
            # (vllm/engine/multiprocessing/engine.py) does logger.exception(e), whose message is str(e),
            # and a KeyError's str is repr(key): "ERROR ... engine.py:366] 'layers.0.mlp.down_proj.weight.absmax'".
            # The whole message is one quoted dotted name ending in a tensor's suffix.
            *(T(suffix, _BARE_WEIGHT_KEY) for suffix in ("weight", "bias", "scale", "g_idx", "qzeros", "absmax")),
            # vLLM's GGUF loader finds checkpoint tensors it cannot name for the model it built
            # (model_executor/model_loader/gguf_loader.py _get_gguf_weights_map: raise RuntimeError(f"Failed
            # to map GGUF parameters ({len(unmapped_params)}): {unmapped_params}"); a paste may lower its case).
            T("o map GGUF parameters", r"(?i:failed) to map GGUF parameters \((?P<unmapped_parameters>\d+)\)"),
        ),
        "The checkpoint does not match the model SGLang built (its weight names or shapes, read in "
        "load_weights): check that --model-path is the model its config names (architecture, revision), "
        "that a draft model belongs to this target, and that sglang supports this checkpoint format.",
    ),
    # --- the other ranks did not finish loading the model ----------------------------------------------
    # SGLang's barrier after weight loading (0.5.23 model_executor/model_runner_components/load_model_utils.py:394
    # dist_barrier_after_load: monitored_barrier over the TP group's CPU group with UNBALANCED_MODEL_LOADING_TIMEOUT_S,
    # raising ValueError(f"TP rank {tp_rank} could finish the model loading, but there are other ranks that didn't
    # finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.")): the model did not load on
    # every rank. Ranked after every cause: the other ranks' own failure (an OOM, a missing file) is why.
    _fatal(
        "ranks_did_not_finish_loading",
        C.MODEL_LOAD_ERROR,
        878,
        (T("there are other ranks that didn't finish loading", r"TP rank (?P<finished_rank>\d+) could finish the model loading"),),
        "TP rank {finished_rank} loaded the model but other ranks did not finish loading it: read the other ranks' "
        "lines for their failure (out of memory, a missing or unreadable weight file) or a node that loads far more "
        "slowly (weights on a network file system: stage them on local disk).",
        "Some ranks did not finish loading the model: read the other ranks' lines for their failure (out of memory, a "
        "missing or unreadable weight file) or a node that loads far more slowly (stage the weights on local disk).",
    ),
    # --- a model's code failing while it loads ------------------------------------------------------
    # Not triggered by a line: the classifier's traceback reading records it (classify.py, _LOAD_FRAMES). An
    # AttributeError or TypeError whose traceback (with the tracebacks chained to it) passes through a frame of
    # the engine's model load path (SGLang 0.5.23: ModelRunner.load_model, model_loader's get_model / load_model /
    # _initialize_model, ModelConfig.__init__ / from_server_args, hf_transformers' get_config / get_tokenizer /
    # get_processor; vLLM 0.33: the worker's and model runner's load_model, model_loader's get_model / load_model /
    # initialize_model, transformers_utils' get_config / get_processor, tokenizers' get_tokenizer; transformers'
    # from_pretrained, get_config_dict, get_image_processor_dict, get_processor_dict), in a start that never came
    # up: the model's config, class or processor files do not fit the code loading them. Ranked after every cause,
    # like the weight loader's frame: a named failure in the same start wins.
    _fatal(
        "model_code_failed_loading",
        C.MODEL_LOAD_ERROR,
        879,
        (),
        "The model's code failed while the engine loaded it (in {load_step}): its config, model class or "
        "processor files do not fit this release. Serve it with a release that supports this model (upgrade the "
        "engine, or transformers to the version the model card names), or check that the model folder holds "
        "every file its config names.",
        "The model's code failed while the engine loaded it: its config, model class or processor files do not fit "
        "this release. Serve it with a release that supports this model, or check that the model folder holds every "
        "file its config names.",
    ),
    # An installed package whose own import-time code raised an AttributeError or a TypeError: CPython runs a module's top level in a frame
    # named "<module>" when it is imported (traceback.py prints it '  File "{}", line {}, in <module>'), so a traceback whose
    # deepest "<module>" frame is a site- or dist-packages package other than the engine, ending in either, is that package's
    # import failing (e.g. Hygon's lightop reading a DTK version that is None while vLLM imports it; FlashInfer 0.6's
    # comm/fd_exchange.py subscripting array.array on Python 3.11 while vLLM's warm-up imports it). Read by
    # the classifier's traceback follower; ranked after every cause, like the other frame rules.
    _fatal(
        "import_failed_in_package",
        C.IMPORT_ERROR,
        877,
        (),
        "Importing the package '{module}' failed inside its own import-time code ({exception} in {module}): the "
        "package does not fit this environment; install the build of {module} that matches the installed engine, "
        "torch and driver stack, or remove it if the engine does not need it.",
        "An installed package failed inside its own import-time code: install the build that matches the engine, torch and driver stack.",
    ),
    # --- a traceback cut in vLLM's model registry refusing the architecture -------------------------
    # vLLM's ModelRegistry._raise_for_unsupported raises ValueError on every path (0.33
    # model_executor/models/registry.py:1221-1252: "Model architectures {architectures} failed to be
    # inspected", "... was supported in vLLM until v{previous_version}", "... is not supported in-tree
    # anymore", "Model architectures {architectures} are not supported for now"; 0.4.3 raised the last from
    # model_loader/utils.py:36): a traceback whose frames reach it is the model refused, whether or not the
    # stored copy kept the ValueError. Ranked after every cause, like the other frame rules.
    _fatal(
        "architecture_refused_frame",
        C.MODEL_LOAD_ERROR,
        881,
        (
            T("in _raise_for_unsupported", r'File "[^"]+",\s*line\s*\d+, in _raise_for_unsupported\b'),
            # The caller's quoted line (registry.py:1418 and :1472, `return self._raise_for_unsupported(architectures)`).
            T("._raise_for_unsupported(", r"\bself\._raise_for_unsupported\(", quotes_source=True),
        ),
        "vLLM's model registry refused the model's architecture (not supported by this release, supported "
        "only by an older one or a plugin, or its model class failed to import): read the ValueError after "
        "these frames in the full log; upgrade vLLM, install the plugin it names, or serve a model it supports.",
    ),
    # --- a traceback cut in vLLM's check of the KV cache's memory ---------------------------------------------
    # vLLM's V1 check_enough_kv_cache_memory (0.8-0.10 v1/core/kv_cache_utils.py, 0.10.2 :670-715) raises only
    # ValueError("No available memory for the cache blocks. ...") when the profiled KV memory is at or below zero and
    # ValueError(f"To serve at least one request with the models's max seq len ({max_model_len}), ({needed} GiB KV cache
    # is needed, which is larger than the available KV cache memory ({available} GiB). ...") when one request's cache
    # does not fit; V0's raise_if_cache_size_invalid (0.5-0.10 worker/worker.py, 0.6.6 :486-504) raises those two in their
    # V0 words ("The model's max seq len (...) is larger than the maximum number of tokens that can be stored in KV cache
    # (...)") and one for an attention-free model given blocks. A traceback whose frames reach either is the pool refused,
    # whether or not the stored copy kept the ValueError. Ranked after every cause, like the other frame rules.
    _fatal(
        "kv_cache_check_frame",
        C.KV_POOL_TOO_SMALL,
        883,
        (
            T(
                "check_enough_kv_cache_memory",
                r'File "[^"]+",\s*line\s*\d+, in _?check_enough_kv_cache_memory\b',
            ),
            T("raise_if_cache_size_invalid", r'File "[^"]+",\s*line\s*\d+, in raise_if_cache_size_invalid\b'),
        ),
        "vLLM's check of the KV cache's memory refused the start (no memory left for cache blocks, or not enough for one "
        "request at the model's max length): read the ValueError after these frames in the full log; raise "
        "--gpu-memory-utilization, lower --max-model-len, or serve on more or larger GPUs.",
    ),
    # --- vLLM's model registry reporting that a model class would not inspect ----------------------------
    # vLLM's registry imports and inspects a model class (in a subprocess up to 0.10, in process since) and, when that
    # raises, logs logger.exception("Error in inspecting model architecture '%s'", model_arch) (0.6-0.10
    # model_executor/models/registry.py _try_inspect_model_cls, 0.10.2 :444, 0.33 :1164), whose traceback follows the
    # header, before raising "Model architectures ... failed to be inspected": the model class could not be loaded, and
    # the exception after the header says why (an import of the class's dependencies, as a module without the name its
    # importer uses). Its header wraps that exception, printed after it: ranked after every cause like the registry's
    # frame, so a named failure in its traceback wins; with none, the model class is what failed to load.
    _fatal(
        "architecture_inspection_failed",
        C.MODEL_LOAD_ERROR,
        876,
        (T("Error in inspecting model architecture", r"Error in inspecting model architecture '(?P<architectures>[^']+)'"),),
        "vLLM's model registry could not import or inspect the model class of {architectures}: read the exception "
        "after this line in the full log (a package the class imports missing or of another version, a class this "
        "release cannot load); upgrade or pin the packages it names, or serve a model this release supports.",
        "vLLM's model registry could not import or inspect the model's class: read the exception after this line in the "
        "full log; upgrade or pin the packages it names, or serve a model this release supports.",
    ),
    # --- a traceback cut in vLLM's bfloat16 check -----------------------------------------------------
    # vLLM's worker `_check_if_gpu_supports_dtype` raises only "Bfloat16 is only supported on GPUs with
    # compute capability of at least 8.0. Your {gpu_name} GPU has compute capability {x}.{y}." (0.2-0.4
    # worker/worker.py, 0.6-0.8 likewise through current_platform.has_device_capability(80)): a traceback
    # whose innermost frames reach it is bfloat16 refused on an older GPU, whether or not the stored copy
    # kept the ValueError. Ranked after every cause, like the other frame rules.
    _fatal(
        "bfloat16_check_frame",
        C.UNSUPPORTED_GPU_ARCH,
        882,
        (T("in _check_if_gpu_supports_dtype", r'File "[^"]+",\s*line\s*\d+, in _check_if_gpu_supports_dtype\b'),),
        "vLLM refused bfloat16 on this GPU (compute capability below 8.0: V100, T4 and older): read the ValueError after these frames in the full log; serve with --dtype=half (float16).",
    ),
    # --- a traceback inside CUDA graph capture's own frames ------------------------------------------
    # The capture loop's frames: SGLang's CudaGraphRunner (0.3-0.4 model_executor/cuda_graph_runner.py
    # `capture` and `capture_one_batch_size`, 0.5.23 decode_cuda_graph_runner.py and the draft runners) and
    # vLLM's capture (0.4.3 worker/model_runner.py `capture_model` and CUDAGraphRunner.capture; 0.33
    # v1/worker/gpu_model_runner.py `capture_model` / `_capture_cudagraphs`). A traceback there is the capture
    # failing; the exception it ends in (an OOM, an NCCL error) is the cause and is ranked first when the log
    # shows it. Only when it shows none does the capture's own failure name the class.
    _fatal(
        "cuda_graph_capture_frame",
        C.CUDA_GRAPH_ERROR,
        887,
        (
            T(
                "graph_runner.py",
                r'File "[^"]*cuda_graph_runner\.py",\s*line\s*\d+, in (?:capture\w*|_capture\w*)\b',
            ),
            T("model_runner.py", r'File "[^"]*model_runner\.py",\s*line\s*\d+, in (?:capture_model|_capture_cudagraphs)\b'),
        ),
        "CUDA graph capture failed (the traceback runs through the capture's own frames; its exception is "
        "cut from this log): capture fewer batch sizes (a smaller cuda-graph max batch size, e.g. 16) or, slower, "
        "disable CUDA graphs (vLLM --enforce-eager) to tell a capture bug from a model bug.",
    ),
    # --- a crash whose traceback runs through vLLM's NCCL communicator set-up ----------------------
    # vLLM's PyNcclCommunicator calls ncclCommInitRank through pynccl_wrapper.py, whose NCCL_CHECK raises
    # RuntimeError(f"NCCL error: {error_str}") (0.33: :458-464); an excerpt that keeps the frames but not
    # that line still shows the communicator failing to form. vLLM 0.4's NCCLCommunicator.__init__ sets
    # self.comm only after its process group, device and unique-id broadcast, so its __del__ printing
    # "AttributeError: 'NCCLCommunicator' object has no attribute 'comm'" means that set-up raised. Ranked
    # after every cause, like the weight loader's frame: a named failure in the same start wins.
    _fatal(
        "nccl_communicator_setup_failed",
        C.NCCL_ERROR,
        885,
        (
            T("in ncclCommInitRank", r'File "[^"]+",\s*line\s*\d+, in ncclCommInitRank\b'),
            # The call line of the communicator's __init__ (vllm 0.33 device_communicators/pynccl.py:180, sglang
            # 0.5.23 srt/distributed/device_communicators/pynccl.py:129: `self.comm: ncclComm_t =
            # self.nccl.ncclCommInitRank(`): a traceback cut there stopped in that call. `self.nccl` is pynccl's
            # NCCLLibrary, so the words name the pynccl frame whatever the line's indentation.
            T("ncclCommInitRank(", r"\bself\.nccl\.ncclCommInitRank\(", quotes_source=True),
            T("object has no attribute 'comm'", r"'NCCLCommunicator' object has no attribute 'comm'"),
        ),
        "vLLM's NCCL communicator could not be set up between the ranks: run with NCCL_DEBUG=INFO; check "
        "that every rank sees its GPU (CUDA_VISIBLE_DEVICES, one GPU per rank on each node), that the nodes "
        "reach each other on the interface NCCL picks (NCCL_SOCKET_IFNAME), and that all ranks use one NCCL build.",
    ),
    # --- errors no specific signature explains -------------------------------------------------
    # SGLang's scheduler could not allocate KV slots for a batch it had already admitted: mem_cache/allocation.py
    # (0.5.23 :163 alloc_token_slots "Out of memory. Try to lower your batch size.", :239 "Prefill out of memory. ...",
    # :613 alloc_paged_token_slots_decode "Decode out of memory. ..."; 0.3.6-0.4.x managers/schedule_batch.py
    # alloc_token_slots, "{Prefill|Decode} out of memory. Try to lower your batch size."), raised while the scheduler
    # prepares a batch to run: a serving step, not a start's sizing. A full pool never reaches it: the scheduler admits
    # prefill by the pool's free and evictable tokens and checks every decode step first (check_decode_mem, then
    # retract_decode: "KV cache pool is full. Retract requests"; 0.5.23 schedule_batch.py:3432 "the retract loop
    # converges on this same check, so allocator-side shortfalls retract gracefully instead of tripping fail-loud alloc
    # errors"). The allocator refusing what that check admitted is its own accounting (a paged or hybrid allocator, a
    # leak), not a pool too small: no class names it.
    _generic(
        "kv_allocation_refused",
        905,
        (
            T("ut of memory. Try to lower your batch size"),
            # SGLang 0.2.x managers/schedule_batch.py (0.2.7 :386 prepare_for_extend, :620 prepare_for_decode):
            # logger.error("Prefill out of memory. This should never happen.") / "Decode out of memory. ..." then
            # exit() when token_to_kv_pool.alloc returns None for a batch the scheduler admitted: the same refusal.
            T("ut of memory. This should never happen"),
        ),
        "SGLang's allocator refused KV slots for a batch its scheduler had admitted (its capacity check passed; a full "
        "pool retracts requests instead): an allocator accounting fault of this release, not a pool too small. Note the "
        "'Try to allocate' and available-token figures, re-try with a page size of 1 and without speculative decoding "
        "or the hierarchical cache, and compare with the previous SGLang release.",
    ),
    _generic(
        "cuda_error",
        910,
        (
            T("CUDA error:", r"CUDA error: (?P<cuda_error>[^.\n]+)"),
            # vLLM's cumem allocator's other driver errors ("CUDA Error: invalid argument at .../cumem_allocator.cpp:57").
            T("CUDA Error: ", r"CUDA Error: (?P<cuda_error>.+?) at \S+:\d+"),
        ),
        "CUDA reported '{cuda_error}': re-run with CUDA_LAUNCH_BLOCKING=1 to find the failing kernel.",
        "CUDA reported an error: re-run with CUDA_LAUNCH_BLOCKING=1 to find the failing kernel.",
    ),
    # torch_memory_saver's own checks (fzyzcjy/torch_memory_saver csrc/utils.h SIMPLE_CHECK, CURESULT_CHECK,
    # CUDA_ERROR_CHECK; csrc/core.cpp's pause/resume state checks): each prints "[torch_memory_saver.cpp] <what failed>"
    # then " file=<source> func=<function> line=<n>" and calls exit(1): the process that runs the engine ends there (its
    # launcher logs the child's exit). A driver result other than out-of-memory (cuda_oom reads result 2), e.g. "CUresult
    # error  result=1" (CUDA_ERROR_INVALID_VALUE) in resume, names no class: unknown, with the call that failed.
    _generic(
        "memory_saver_check_failed",
        908,
        (
            T(
                "[torch_memory_saver.cpp] ",
                r"\[torch_memory_saver\.cpp\] (?P<memory_saver_error>\S.*?)\s+file=\S+ func=(?P<memory_saver_call>\w+) line=\d+",
            ),
        ),
        "torch_memory_saver's check failed in its {memory_saver_call} ({memory_saver_error}) and it ended the process: "
        "the engine's pause/resume of its memory (--enable-memory-saver, an RL trainer's release and resume) met an error "
        "no class names. Check that pause and resume calls pair up and that the torch_memory_saver build matches the "
        "installed torch and CUDA driver.",
        "torch_memory_saver's check failed and it ended the process: check that the engine's pause and resume calls pair "
        "up and that the torch_memory_saver build matches the installed torch and CUDA driver.",
    ),
    # PyTorch's own internal assertion: TORCH_INTERNAL_ASSERT (c10/util/Exception.h) fails with
    # C10_STRINGIZE(cond) " INTERNAL ASSERT FAILED at " C10_STRINGIZE(__FILE__) ":" C10_STRINGIZE(__LINE__) ", please
    # report a bug to PyTorch. " and the caller's message (c10/util/Exception.cpp torchInternalAssertFail), raised as a
    # RuntimeError. It names its own origin: PyTorch's state broke its own invariant (e.g. the caching allocator's
    # `TORCH_INTERNAL_ASSERT(captures_underway.empty())` in synchronize_and_free_events, reached from emptyCache while
    # a CUDA graph capture is still registered with the allocator, c10/cuda/CUDACachingAllocator.cpp), not the model
    # or the step whose frame raised it: an error no class names, whichever frame it came through.
    _generic(
        "torch_internal_assert",
        915,
        (T("INTERNAL ASSERT FAILED at", r'(?:[A-Z]\w*(?:Error|Exception): )?(?P<assert_condition>\S.*?) INTERNAL ASSERT FAILED at "?(?P<assert_source>[^":]+)"?:\d+'),),
        "PyTorch's own internal assertion failed ({assert_condition} at {assert_source}): PyTorch's state broke its own "
        "invariant (a bug, or state left by an earlier failure in the same process), not the model; read the steps "
        "before it in the full log, and try the PyTorch release the engine pins.",
        "PyTorch's own internal assertion failed: read the steps before it in the full log, and try the PyTorch release the engine pins.",
    ),
    # The server refused its command line: CPython's ArgumentParser.error prints "%(prog)s: error:
    # %(message)s" and exits 2 (Lib/argparse.py:2630, 3.11), before any start-up step. vLLM's
    # FlexibleArgumentParser.error (0.33 utils/argparse_utils.py:182) adds a hint and calls it; SGLang's
    # launch_server uses the plain parser. Only argparse's own messages count (:1871/:2384 "unrecognized
    # arguments: %s", :776 "argument %(argument_name)s: %(message)s" with :2552's "invalid choice",
    # :2142 "the following arguments are required: %s", :2263 "ambiguous option: %(option)s could
    # match"), so a linker's "ld.lld: error: ..." is not read as one. No failure class names a command
    # line (the vocabulary's classes are what a server met while starting or serving): `unknown`, with
    # the refused flag named, in quotes: the log's words, not a setting fleet advises (the advice corpus,
    # tests/integration/advice_corpus.py, parses every unquoted flag of a fix); a process that exits 2 is
    # never worth retrying unchanged.
    _generic(
        "arguments_refused",
        940,
        (
            # A copy that dropped the prog ("error: unrecognized arguments: --x y" at the line's head) is the same
            # refusal: the message text is argparse's own (:1871/:2384) and no other tool words it so.
            T("error: unrecognized arguments: ", _ARGPARSE_PROG_OPT + r"unrecognized arguments: (?P<refused_argument>.+)"),
            T(": error: argument ", _ARGPARSE_PROG + r"argument (?P<refused_argument>[^:]+): (?P<argparse_reason>.+)"),
            T(": error: the following arguments are required: ", _ARGPARSE_PROG + r"the following arguments are required: (?P<refused_argument>.+)"),
            T(": error: ambiguous option: ", _ARGPARSE_PROG + r"ambiguous option: (?P<refused_argument>\S+?)(?:=\S*)? could match"),
        ),
        "The server refused its command line and exited before starting ({prog} refused '{refused_argument}': {argparse_reason}): give that argument a value this release takes (`{prog} --help` lists them).",
        "The server refused its command line and exited before starting ({prog} refused '{refused_argument}'): the flag is spelt "
        "for another release or missing; spell it as this release does (`{prog} --help` lists them) or pin the release it was written for.",
        "The server refused its command line and exited before starting: a flag is spelt for another release or missing; spell it as this release does (`--help` lists them).",
    ),
    _generic(
        "process_failed",
        950,
        (
            T("hit an exception"),
            T("scheduler died during initialization", r"exit code: (?P<exit_code>-?\d+)"),
            T("Received sigquit from a child process"),
            # CPython's fatal-error report (faulthandler.c faulthandler_fatal_error: "Fatal Python error: " and
            # the signal's name, "Aborted", "Segmentation fault", ...; pylifecycle.c fatal_error): the process died.
            T("Fatal Python error"),
            T("Initialization failed"),
            T("terminate called after throwing"),
            # vLLM's engine going down: "Engine core initialization failed. See root cause above",
            # "EngineCore failed to start", "RuntimeError('Engine process (pid 77) died.')",
            # "MQLLMEngine is already dead, terminating server process", EngineDeadError.
            T("Engine core initialization failed"),
            T("EngineCore failed to start"),
            # 0.33: v1/engine/core.py:1584 "EngineCore failed to start.", :1586 "EngineCore encountered a fatal error."
            # vLLM-Omni's stage processes run the same loop under their own names and log the same words (0.30
            # engine/stage_engine_core_proc.py:260 "StageEngineCoreProc encountered a fatal error.",
            # diffusion/stage_diffusion_proc.py:708 "StageDiffusionProc encountered a fatal error.").
            T("encountered a fatal error", r"\b(?:EngineCore|\w+Proc) encountered a fatal error"),
            # EngineDeadError's own message (0.33 v1/engine/exceptions.py ENGINE_DEAD_MESSAGE, "EngineCore encountered an
            # issue. See stack trace (above) for the root cause."), wherever it is quoted: vLLM-Omni's orchestrator logs
            # str(e) of a stage's failure (0.16 entrypoints/omni.py:1008 and async_omni.py:518, f"[{name}] Stage
            # {stage_id} error on request {req_id}: {result['error']}"), so a dead stage engine reads in its words.
            T("EngineCore encountered an issue. See stack trace"),
            T("Engine process", r"Engine process \(pid \d+\) died"),
            T("is already dead, terminating server process"),
            T("EngineDeadError"),
            # The V1 front end's log of each request an EngineDeadError ended (0.8.5 v1/engine/async_llm.py:324, 0.9.2
            # :345/:507, 0.10.2 :411/:574, 0.33 :817/:1095; `except EngineDeadError: if self.log_requests:
            # logger.info("Request %s failed (engine dead).", request_id)`): logged at INFO level, but the engine core is
            # dead (its cause is above it, and wins when the log holds it).
            T("failed (engine dead)", r"\bRequest \S+ failed \(engine dead\)"),
            # A process the engine waits on is gone: 0.33 v1/engine/core_client.py's monitor "Engine core proc
            # %s died unexpectedly, shutting down client." (an application's logging format may carry it),
            # v1/utils.py:592 "Engine core process {name} died unexpectedly.", v1/executor/multiproc_executor.py:381
            # "Worker proc %s died unexpectedly (exit code: %s)", ray_executor_v2.py:523 "RayWorkerProc rank=%s
            # died unexpectedly, shutting down executor.".
            T("died unexpectedly", r"\b(?:Engine core proc(?:ess)?|Worker proc|RayWorkerProc rank=)\s*\S+ died unexpectedly"),
            # A Ray node of the engine's cluster is gone with its workers: the GCS's node-death report "The node
            # with node id: {id} and address: {ip} and node name: {name} has been marked dead because the detector
            # has missed too many heartbeats from it." (ray src/ray/gcs/gcs_server/gcs_node_manager.cc), which Ray
            # prints at warning level (RAY_LOG(WARNING); the driver's worker.py relays it as WARNING) though the
            # node and its workers are dead.
            T("has been marked dead because the detector has missed too many heartbeats", proves_as_warning=True),
            # SGLang's launcher reaps its children in a SIGCHLD handler (0.4.x entrypoints/engine.py and http_server.py
            # _set_envs_and_config: pid, exitcode = os.waitpid(0, os.WNOHANG); if exitcode != 0: logger.warning("Child
            # process unexpectedly failed with an exit code %d. pid=%d", ...); 0.5.x f"Child process unexpectedly failed with
            # {exitcode=}. {pid=}"), at warning level though a scheduler or detokenizer is gone. The number is waitpid's
            # status: 256 and up is an exit with a non-zero code (status >> 8; 256 is exit(1), what torch_memory_saver's
            # checks and a Python exception leave); below 256 the signal that killed it. Only exits and the crash signals
            # (SIGILL 4, SIGABRT 6, SIGBUS 7, SIGFPE 8, SIGSEGV 11, and those with the core-dump bit, 132-139): a child
            # killed by SIGTERM, SIGINT or SIGKILL is also what a stop does (a launcher's kill of the process group; the
            # signal-stop convention reads those).
            T(
                "Child process unexpectedly failed with",
                r"Child process unexpectedly failed with (?:an exit code |exitcode=)(?P<child_wait_status>[1-9]\d{3,}|[3-9]\d\d|2(?:5[6-9]|[6-9]\d)|4|6|7|8|11|13[2-6]|139)\b",
                proves_as_warning=True,
            ),
        ),
        "An engine child process (a scheduler or detokenizer) died: the launcher reaped it with wait status "
        "{child_wait_status} (256 and up: it exited with code status / 256, 256 being exit(1); below 256: the signal "
        "that killed it). Read the child's own lines before it for the error that made it exit.",
        "A server process died with exit code {exit_code}: -9 usually means the kernel's OOM killer (`dmesg -T | grep -i oom`); give the host more RAM or load fewer models at once.",
        "A server process failed: the exception above it in the evidence is the cause to read.",
    ),
    # ptxas' own error line (located "ptxas <file>, line <n>; error : <msg>" or "ptxas fatal : <msg>")
    # about anything but the GPU's target (unsupported_gpu_arch's): a kernel that did not assemble.
    _generic(
        "ptxas_error",
        960,
        (T("ptxas", r"ptxas (?:[^;:]*; )?(?:fatal|error)\s*:\s*(?P<ptxas_error>.+)"),),
        "ptxas could not assemble a generated kernel ({ptxas_error}): a Triton / torch.compile code-generation "
        "bug or a ptxas that does not match it; try --enforce-eager, or the Triton and CUDA versions the engine pins.",
        "ptxas could not assemble a generated kernel: try --enforce-eager, or the Triton and CUDA versions the engine pins.",
    ),
    # A C++ runtime beside the engine logging at error or fatal level in its own format, which no engine
    # prefix strip knows: glog's "Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg" (glog 0.6
    # src/logging.cc LogMessage::Init; 0.7 adds the year, "Lyyyymmdd"), E for ERROR, F for FATAL (a
    # CHECK failure is LOG(FATAL): the process aborts), as Mooncake's store and other glog users print
    # it; and Ray's spdlog pattern "[%Y-%m-%d %H:%M:%S,%e %L %P %t] %v" (src/ray/util/logging.cc)
    # whose short level is E for ERROR and C for FATAL (RAY_CHECK's "An unexpected system state has
    # occurred ..." and "Check failed: ..."), with a "(raylet) " tag in a raylet's lines. The level is the
    # runtime's word that the operation failed; the message says which: an error no class names.
    # glog and Ray name the C++ source file in the prefix, which the literals find.
    _generic(
        "runtime_error_logged",
        985,
        tuple(
            T(
                suffix,
                r"^(?:[EF]\d{4}(?:\d{4})? \d{2}:\d{2}:\d{2}\.\d+\s+\d+ |\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} [EC] \d+ \d+\] (?:\(\w+\) )?)"
                r"(?P<runtime_source>[\w.-]+\.(?:cc|cpp|cu|h|hpp):\d+)(?:\]|:)\s+(?P<runtime_message>\S.*)",
            )
            for suffix in (".cc:", ".cpp:", ".cu:", ".h:", ".hpp:")
        )
        # Huawei CANN's error report (Ascend NPUs): its REPORT_INNER_ERROR / REPORT_CALL_ERROR macros end each
        # line of the error message with the reporting function, "{message}[FUNC:ReportInnerError][FILE:
        # log_inner.cpp][LINE:145]" (also "[FUNC:ReportCallError]"), under the "EH9999: Inner Error!" head;
        # only an error report prints them.
        + (
            T(
                "[FUNC:Report",
                r"(?P<runtime_message>\S.*?)\s*\[FUNC:Report(?:Inner|Call)Error\]\[FILE:(?P<runtime_source>[^\]]+)\]",
            ),
        ),
        "A native runtime logged an error ({runtime_source}: {runtime_message}): the process that printed it (Ray, a KV store, a "
        "communication library) failed; read the lines around it for the operation and the peer it names.",
        "A native runtime logged an error: read the lines around it for the operation and the peer it names.",
    ),
    # AMD's ROCm libraries reporting a failure on stderr with no exception line of their own. hipRTC (HIP's
    # runtime compiler, hipamd/src/hiprtc/hiprtcInternal.cpp RTCProgram::findIsa) appends to a program's build
    # log "hip runtime failed to load.\nError: Please provide architecture for which code is to be generated.\n"
    # when libamdhip64.so does not dlopen (and the second line alone when no --offload-arch was given): the
    # kernel did not compile, and the caller prints that log. hipBLASLt (tensile_host.cpp) prints
    # "\nrocblaslt error: Could not load {path}" when its Tensile library for the GPU does not load, "rocblaslt
    # error: Cannot read {path}: {strerror}" before it and "rocblaslt error: Could not initialize Tensile ..."
    # after: the GEMMs it serves have no kernels. No class names them (the GPU is supported; the ROCm install
    # is broken): unknown, unless serving goes on after them.
    _generic(
        "rocm_library_error",
        970,
        (
            T("hip runtime failed to load", r"(?P<runtime_message>hip runtime failed to load)"),
            T("Please provide architecture for which code is to be generated", r"(?P<runtime_message>Please provide architecture for which code is to be generated)"),
            T("rocblaslt error: ", r"rocblaslt error: (?P<runtime_message>(?:Could not load|Cannot read|Could not initialize)\b.*)"),
        ),
        "A ROCm library failed ({runtime_message}): check that the ROCm runtime and libraries in the environment "
        "match the installed torch (libamdhip64.so on the library path, hipBLASLt's library/ folder holding this "
        "GPU's TensileLibrary files), or point HIPBLASLT_TENSILE_LIBPATH at it.",
        "A ROCm library failed: check that the ROCm runtime and libraries in the environment match the installed torch.",
    ),
    _generic(
        "exception",
        990,
        (
            T("Error", _EXC + r"[A-Z]\w*Error\b(?::|$)"),
            T("Exception", _EXC + r"[A-Z]\w*Exception\b(?::|$)"),
        ),
        "An error no signature explains: read the final exception of the traceback in the evidence.",
    ),
    # A traceback's header alone (its exception line cut off, or a process killed mid-print): it proves
    # that something raised, not what. Beside a start-up step still under way the stall is the story.
    _generic(
        "traceback_only",
        995,
        (T("Traceback (most recent call last)"),),
        "A traceback without its exception line: read the lines after it in the full log for the exception.",
    ),
    # A traceback's frames without its header or exception line (a paste or a stored copy that kept only
    # the middle): they too prove that something raised, and where, not what. CPython prints a frame as
    # '  File "{}", line {}, in {}' (traceback.py StackSummary.format_frame_summary, 3.11: :462) and
    # faulthandler's dump as '  File "%U", line %d in %U' (Python/traceback.c dump_frame). Only a log with
    # no other error line is read by them (the classifier drops them beside any other signature). A Ray
    # worker's line keeps Ray's tag when the vLLM prefix strip does not know it: "({name} pid={pid}, ip={ip}) "
    # (Ray's logging guide: "(MyActor pid=480956) actor log message"; Ray Serve's names hold colons).
    _generic(
        "traceback_frames",
        996,
        # A paste that wrapped a long frame line leaves 'File "{path}"' alone on its line and
        # ', line {n}, in {name}' on the next: the first half still is a frame.
        (T('File "', r'^(?:\([^()]*\bpid=\d+[^()]*\)\s*)?File "[^"]+"(?:,\s*line\s*\d+,?\s+in\s+\S|\s*$)'),),
        "Only a traceback's frames, without its exception line: read the lines after them in the full log for the exception.",
        # Servers print tracebacks they survive (a request's), and a frame is not even the traceback's head:
        # no reason for the agent's fail-fast to stop waiting.
        server_survives=True,
    ),
    # --- findings: true and useful, but not a failure ---------------------------------------
    _finding(
        "flashinfer_sm12_needs_cuda_12_9",
        (T("SM 12.x requires CUDA >= 12.9"),),
        "FlashInfer found a CUDA toolkit older than 12.9 (CUDA_HOME or nvcc on PATH) and left its target "
        "architectures empty; JIT-compiled kernels will fail. Put a CUDA >= 12.9 toolkit on PATH/CUDA_HOME "
        'for the service, or set FLASHINFER_CUDA_ARCH_LIST="12.0f". Harmless while only prebuilt kernels run.',
    ),
    _finding(
        "context_length_above_derived",
        (
            T(
                "is greater than the derived context_length",
                r"context_length \((?P<requested_context>\d+)\) is greater than the derived context_length "
                r"\((?P<derived_context>\d+)\)(?!.*To allow overriding)",
            ),
        ),
        "The context length ({requested_context}) is above what the model config derives ({derived_context}); SGLang warns of wrong outputs or CUDA errors past {derived_context} tokens.",
        "The context length is above what the model config derives; SGLang warns of wrong outputs or CUDA errors past the derived length.",
    ),
    _finding(
        "max_running_requests_reduced",
        (
            T("max_running_requests was reduced", r"from the requested (?P<requested>\d+) to (?P<granted>\d+)"),
            T("max_running_requests is capped to", r"capped to (?P<granted>\d+)"),
        ),
        "max_running_requests was cut from {requested} to {granted} by the KV cache capacity: concurrency above {granted} will queue.",
        "max_running_requests was capped to {granted} by the mamba state cache: concurrency above {granted} will queue.",
        "max_running_requests was lowered by the available cache capacity: higher concurrency will queue.",
    ),
    _finding(
        "ddtree_accepts_nothing",
        (T("avg_accepted_drafts=0.00", r"budget=(?P<ddtree_budget>\d+)"),),
        "DDTree (budget {ddtree_budget}) accepted no draft token: the tree is pure overhead here; check the draft model pairing, or use a larger budget.",
        "DDTree accepted no draft token: the tree is pure overhead here; check the draft model pairing, or use a larger budget.",
    ),
    _finding(
        "memory_unbalanced",
        (T("The memory capacity is unbalanced"),),
        "GPU memory differs between ranks: another process holds memory on some GPU (nvidia-smi), so the KV pool is sized for the smallest one.",
    ),
    _finding(
        "torch_lacks_gpu_arch",
        (T("is not compatible with the current PyTorch installation", r"(?P<arch>sm_\d+)"),),
        "This PyTorch build has no kernels for {arch}: install a wheel built with CUDA >= 12.8 for Blackwell.",
        "This PyTorch build has no kernels for this GPU: install a wheel built for its architecture.",
    ),
    _finding(
        "kv_pool_full_retracting",
        (T("KV cache pool is full. Retract requests"),),
        "The KV pool filled up and requests were retracted (recomputed later): throughput under this concurrency is below what the GPU can do; lower concurrency or grow the pool.",
    ),
    _finding(
        "http_400_responses",
        (T('" 400 Bad Request'),),
        "The server rejected requests with HTTP 400 (see the client's error text: often prompt + max_new_tokens above the context length).",
    ),
    # SGLang's registries import every model and processor module and skip one whose import fails
    # (0.5.23 models/registry.py:132 and managers/multimodal_processor.py:24, dllm/algorithm/__init__.py:20:
    # logger.warning(f"Ignore import error when loading {name}: {e}")). Starts that then serve print them for
    # optional models whose packages are absent; only a refusal of the architecture a skipped module defines
    # makes it the failure (the classifier's rule, `skipped_import_of`).
    _finding(
        "import_skipped",
        (
            T(
                "Ignore import error when loading ",
                r"Ignore import error when loading (?P<skipped_module>[\w.]+): (?P<import_reason>.*?No module named '(?P<module>[\w.]+)'|.*)",
            ),
        ),
        "SGLang skipped {skipped_module}, whose import failed ({import_reason}): the models or processors it defines cannot be served by this install.",
        "SGLang skipped a module whose import failed: the models or processors it defines cannot be served by this install.",
    ),
    # SGLang's PD decode side when a request's KV cache did not arrive from the prefill server (0.5.23
    # disaggregation/decode.py:2864-2884: f"Decode transfer failed for request rank={self.tp_rank} ..." with
    # " with exception {e}", e.g. KVTransferError (disaggregation/common/conn.py:103)): the request is aborted
    # with HTTP 500 (prepare_abort, :2885) and the scheduler goes on: a lost request, not a failed server.
    _finding(
        "kv_transfer_failed",
        (T("Decode transfer failed for request"),),
        "The decode server did not receive requests' KV cache from the prefill server (KV transfer failed); those "
        "requests were aborted with HTTP 500 and the server went on: check the transfer backend (Mooncake, NIXL) "
        "and the network between the prefill and decode hosts (their RDMA devices).",
    ),
    _finding(
        "recovered_error",
        (),
        "An error was logged but the server went on serving afterwards; results after it are still valid.",
    ),
    # A failure's words on a warning line that the start went on past (start-up steps after it, no error line after it;
    # classify.py's _went_on_past): vLLM's import_kernels warning on a build without a compiled _C, for one.
    _finding(
        "warning_start_went_on",
        (),
        "A failure's words were logged as a warning and the start went on past them (later start-up steps, no error "
        "after them); if a later step fails for no other reason, this is the first place to look.",
    ),
    _finding(
        "earlier_start_failed",
        (),
        "An earlier start in this log failed; the diagnosis covers the last start.",
    ),
)

# Not triggered by a line: chosen when the caller knows the server was killed for not becoming
# ready, and the log shows no fatal line.
SERVER_START_TIMEOUT_FIXES: tuple[str, ...] = (
    "The server was not ready within {timeout_s:.0f} s and logged no error; it was last {last_phase}. "
    "If loading weights: stage the model on local NVMe or /dev/shm; if capturing CUDA graphs: lower "
    "{flag_cuda_graph_max_bs}; otherwise raise the start timeout.",
    "The server was not ready within {timeout_s:.0f} s and logged no error: stage the model on local disk, lower {flag_cuda_graph_max_bs}, or raise the start timeout.",
    "The server was not ready in time and logged no error; it was last {last_phase}: stage the model on local disk, lower {flag_cuda_graph_max_bs}, or raise the start timeout.",
    "The server was not ready in time and logged no error: stage the model on local disk, lower {flag_cuda_graph_max_bs}, or raise the start timeout.",
)

# Chosen from the log alone: it ends inside a start-up step that began and never finished (weights
# loading, CUDA graphs capturing, kernels compiling, NCCL communicators forming) with no error line.
STALLED_START_FIXES: tuple[str, ...] = (
    "The start stalled while {last_phase} ({stall_detail}) and logged no error. If loading weights: "
    "stage the model on local NVMe or /dev/shm; if capturing CUDA graphs or compiling kernels: lower "
    "{flag_cuda_graph_max_bs} or warm the JIT cache; if forming NCCL communicators (several nodes): check that "
    "every node reached this step and can reach the others (NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME); "
    "otherwise raise the start timeout.",
    "The start stalled while {last_phase} and logged no error. If loading weights: stage the model on "
    "local NVMe or /dev/shm; if capturing CUDA graphs or compiling kernels: lower {flag_cuda_graph_max_bs} or "
    "warm the JIT cache; if forming NCCL communicators (several nodes): check that every node reached this "
    "step and can reach the others (NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME); otherwise raise the start timeout.",
    "The start stalled and logged no error: stage the model on local disk, lower {flag_cuda_graph_max_bs}, or raise the start timeout.",
)

# Chosen when the log ends during startup with no fatal line and no word that the start timed out.
STARTUP_INCOMPLETE_FIXES: tuple[str, ...] = (
    "The log ends during startup without an error (it was last {last_phase}): the server was stopped, killed (exit -9: `dmesg -T | grep -i oom`) or the log was cut. Read the run record's exit code.",
    "The log ends during startup without an error: the server was stopped, killed (exit -9: `dmesg -T | grep -i oom`) or the log was cut. Read the run record's exit code.",
)

NOTHING_OF_A_SERVER_FIXES: tuple[str, ...] = (
    "The log shows no error, but no start-up step, no ready line and no request served either: too little to say the server ran. Read the whole log from the server's start (`fleet fetch-logs`) and the run record's exit code.",
)

SIGNATURE_BY_NAME: dict[str, Signature] = {signature.name: signature for signature in SIGNATURES}


def advice_spellings(release: str) -> dict[str, str]:
    """The flags the fix templates name whose spelling differs between SGLang releases, as `release`
    spells them, keyed by the template field that stands for each: 0.5.23 takes `--cuda-graph-max-bs`
    as an ambiguous prefix (of -decode and -prefill) and `--disable-cuda-graph` only as a deprecated alias."""
    sglang = engine("sglang")
    name, value = sglang.disable_cuda_graph(release)
    return {
        "flag_cuda_graph_max_bs": sglang.flag_for(release, "cuda_graph_max_bs"),
        "flag_disable_cuda_graph": f"--{name}" if value is True else f"--{name}={value}",
    }


def fill_fix(templates: tuple[str, ...], figures: Mapping[str, object], release: str | None = None) -> str:
    """The first template whose fields are all known, filled in; a `{flag_...}` field is the flag as
    the SGLang `release` spells it (default: the newest fleet knows), so that the advice parses there."""
    known = {**advice_spellings(release or engine("sglang").releases[-1]), **figures}
    for template in templates:
        fields = {name for _, name, _, _ in Formatter().parse(template) if name}
        if all(known.get(name) is not None for name in fields):
            return template.format(**known)
    raise ValueError(f"no fix template applies and none is field-free: {templates[-1]!r}")


def grep_patterns() -> list[str]:
    """The catalogue's literals as POSIX extended regexes, for `grep -E` comparisons."""
    literals = {trigger.literal for signature in SIGNATURES for trigger in signature.triggers}
    return sorted(re.sub(r"([][.^$*+?(){}|\\])", r"\\\1", literal) for literal in literals)
