"""SGLang's (and its neighbours') log texts, byte for byte where the source gives them.

The startup lines the parser reads come from the release's entry in
`fleet/host/engines/sglang/logformats.py` (`ReleaseText`), so the simulator writes what the parser is
tested to read, per release. The other messages here were read from the sglang 0.5.13 wheel (or
uvicorn, PyTorch, transformers, FlashInfer) and are cited next to them. Tracebacks keep SGLang's real
call chain and final line; the intermediate line numbers are those of 0.5.13 where known.
"""

from __future__ import annotations

import sys
import sysconfig
import time
from typing import Any, Iterable, Mapping, Sequence

from fleet.host.engines.sglang.logformats import LogFormats

SITE = sysconfig.get_paths()["purelib"]
SGLANG = f"{SITE}/sglang"
TORCH = f"{SITE}/torch"
PY_TAG = f"python{sys.version_info.major}.{sys.version_info.minor}"

# uvicorn's level prefixes are padded to 9 characters ("INFO:" + 5 spaces).
UVICORN_INFO = "INFO:     "
UVICORN_ERROR = "ERROR:    "


def timestamp(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))


def rank_prefix(rank: int | None, tp_size: int, dp_rank: int | None = None) -> str:
    """configure_logger's prefix: " DP{r}" when DP, " TP{r}" when tp > 1 (scheduler ranks only)."""
    prefix = ""
    if dp_rank is not None:
        prefix += f" DP{dp_rank}"
    if rank is not None and tp_size > 1:
        prefix += f" TP{rank}"
    return prefix


def log_line(message: str, prefix: str = "", now: float | None = None) -> str:
    return f"[{timestamp(now)}{prefix}] {message}"


# --- process start and model runner startup: per release, from logformats ------------------------


class _Repr(str):
    """A pre-rendered repr: `{x!r}` of it gives the text itself (0.5.12's `ServerArgs(...)`)."""

    def __repr__(self) -> str:
        return str(self)


class ReleaseText:
    """The startup lines of one release, formatted from its `LogFormats` entry."""

    def __init__(self, formats: LogFormats) -> None:
        self.formats = formats

    @property
    def release(self) -> str:
        return self.formats.release

    def launch_server_deprecation(self) -> list[str]:
        """sglang/launch_server.py warns through `warnings.warn(..., stacklevel=1)`."""
        return [
            f"{SGLANG}/launch_server.py:{self.formats.launch_warning_line}: UserWarning: 'python -m sglang.launch_server' is still supported, but 'sglang serve' is the recommended entrypoint.",
            "  Example: sglang serve --model-path <model> [options]",
            "  warnings.warn(",
        ]

    def pre_logging(self, message: str, now: float | None = None) -> str:
        """A line logged while ServerArgs is built: prepare_server_args' basicConfig, no rank prefix."""
        return self.formats.pre_logging.format(asctime=timestamp(now), message=message)

    def server_args(self, values: Mapping[str, Any], dataclass_repr: str) -> str:
        """0.5.12 logs the dataclass' repr (`dataclass_repr`), 0.5.23 the resolved dict."""
        shown: object = dict(values) if self.formats.server_args_shape.opening == "{" else _Repr(dataclass_repr)
        return self.formats.server_args.format(server_args=shown)

    def attention_default(self, backend: str) -> str:
        return self.formats.attention_default.format(backend=backend)

    def init_begin(self) -> str:
        return self.formats.init_begin.format()

    def init_end(self, elapsed_s: float, mem_usage_gb: float) -> str:
        return self.formats.init_end.format(elapsed=elapsed_s, mem_usage=mem_usage_gb)

    def memory_baseline(self, mem_usage_gb: float) -> str | None:
        baseline = self.formats.memory_baseline
        return None if baseline is None else baseline.format(mem_usage=mem_usage_gb)

    def load_weight_begin(self, avail_gb: float) -> str:
        return self.formats.load_weight_begin.format(avail=avail_gb)

    def load_weight_end(self, elapsed_s: float, model_class: str, avail_gb: float, usage_gb: float) -> str:
        return self.formats.load_weight_end.format(elapsed=elapsed_s, model_class=model_class, avail=avail_gb, usage=usage_gb)

    def mamba_cache_allocated(self, size: int, conv_gb: float, ssm_gb: float, spec: tuple[float, float] | None) -> str:
        """MambaPool: no comma before "intermediate" and a trailing space, as in the source."""
        if spec is None:
            return self.formats.mamba_cache.format(size=size, conv=conv_gb, ssm=ssm_gb)
        return self.formats.mamba_cache_spec.format(size=size, conv=conv_gb, ssm=ssm_gb, issm=spec[0], iconv=spec[1])

    def kv_cache_allocated(self, dtype: str, tokens: int, k_gb: float, v_gb: float) -> str:
        return self.formats.kv_cache.format(dtype=f"torch.{dtype}", tokens=tokens, k=k_gb, v=v_gb)

    def memory_pool_end(self, avail_gb: float) -> str:
        return self.formats.memory_pool_end.format(avail=avail_gb)

    def capture_begin(self, avail_gb: float, capture_name: str, backend: str, tokens_per_req: int) -> str:
        return self.formats.capture_begin.format(avail=avail_gb, capture_name=capture_name, backend=backend, num_tokens_per_req=tokens_per_req)

    def capture_bs(self, batch_sizes: Sequence[int]) -> str | None:
        """The batch sizes on a line of their own (0.5.12, rank 0); 0.5.23 puts them in the end line."""
        line = self.formats.capture_bs
        return None if line is None else line.format(bs=list(batch_sizes))

    def capture_end(self, elapsed_s: float, usage_gb: float, avail_gb: float, capture_name: str, batch_sizes: Sequence[int]) -> str:
        return self.formats.capture_end.format(elapsed=elapsed_s, usage=usage_gb, avail=avail_gb, capture_name=capture_name, bs=list(batch_sizes))

    def scheduler_ready(self, max_total_tokens: int, chunked: int, max_prefill: int, max_running: int, context_len: int, avail_gb: float) -> str:
        """managers/scheduler.py, TP0 only."""
        return self.formats.scheduler_ready.format(max_total=max_total_tokens, chunked=chunked, max_prefill=max_prefill, max_running=max_running, context_len=context_len, avail=avail_gb)

    def fired_up(self) -> str:
        return self.formats.ready.format()


# FlashInfer/compilation_context.py catches its own RuntimeError and logs it, at import, twice.
FLASHINFER_SM12_WARNING = "Failed to get device capability: SM 12.x requires CUDA >= 12.9."


def dflash_runner_lines(backend: str, block_size: int) -> list[str]:
    """speculative/dflash_worker.py, TP0."""
    return [
        f"Initialized DFLASH draft runner. attention_backend={backend}, model=DFlashDraftModel, block_size={block_size}, draft_window_size=None, compact_cache=False",
        "DFLASH draft runner ready. mask_token=<|MASK|>, mask_token_id=248319, mask_token_id_override=None",
    ]


def dflash_first_verify(correct_drafts_per_req: Sequence[int]) -> str:
    return f"DFLASH verify completed. num_correct_drafts_per_req={list(correct_drafts_per_req)}"


def uvicorn_startup(pid: int) -> list[str]:
    return [
        f"{UVICORN_INFO}Started server process [{pid}]",
        f"{UVICORN_INFO}Waiting for application startup.",
        f"{UVICORN_INFO}Application startup complete.",
    ]


def uvicorn_running(host: str, port: int) -> str:
    address = f"[{host}]" if ":" in host else host
    return f"{UVICORN_INFO}Uvicorn running on http://{address}:{port} (Press CTRL+C to quit)"


def uvicorn_shutdown() -> list[str]:
    return [f"{UVICORN_INFO}Waiting for application shutdown.", f"{UVICORN_INFO}Application shutdown complete."]


def bind_error(host: str, port: int) -> str:
    """asyncio's create_server OSError, logged by uvicorn.Server.startup before sys.exit(1)."""
    return f"[Errno 98] error while attempting to bind on address ({host!r}, {port}): address already in use"


def access_line(client: str, method: str, target: str, status: int, reason: str) -> str:
    return f'{UVICORN_INFO}{client} - "{method} {target} HTTP/1.1" {status} {reason}'


# --- serving lines (managers/scheduler_components/metrics_reporter.py) ---------------------------


def prefill_batch(
    new_seq: int,
    new_token: int,
    cached: int,
    usage_parts: str,
    running: int,
    queued: int,
    pending: int,
    cuda_graph: bool,
    input_throughput: float,
) -> str:
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, {usage_parts}"
        f"#running-req: {running}, #queue-req: {queued}, #pending-token: {pending}, "
        f"cuda graph: {cuda_graph}, input throughput (token/s): {input_throughput:.2f}"
    )


def decode_batch(running: int, usage_parts: str, spec: tuple[float, float] | None, cuda_graph: bool, gen_throughput: float, queued: int) -> str:
    text = f"Decode batch, #running-req: {running}, {usage_parts}"
    if spec is not None:
        text += f"accept len: {spec[0]:.2f}, accept rate: {spec[1]:.2f}, "
    return text + f"cuda graph: {cuda_graph}, gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queued}"


def ddtree_metrics(bs: int, budget: int, nodes: float, accepted: float, commit: float, depth: float) -> str:
    """The DDTree fork's line, as the seed campaign's logs show it (no public source has it)."""
    return f"DDTREE metrics: bs={bs} budget={budget} avg_actual_nodes={nodes:.2f} avg_accepted_drafts={accepted:.2f} avg_commit_len={commit:.2f} avg_accepted_depth={depth:.2f}"


def health_check_failed(timeout_s: int, tic: float, last: float) -> str:
    return (
        f"Health check failed. Server couldn't get a response from detokenizer for last {timeout_s} seconds. "
        f"tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. "
        f"last_heartbeat time: {time.strftime('%H:%M:%S', time.localtime(last))}"
    )


def http_error(message: str) -> str:
    return f"[http_server] Error: {message}"


def input_too_long(input_len: int, max_len: int) -> str:
    """scheduler.py: a prompt longer than the KV pool allows (sample 007)."""
    return f"Input length ({input_len} tokens) exceeds the maximum allowed length ({max_len} tokens). Use a shorter input or enable --allow-auto-truncate."


def context_exceeded(context_len: int, total: int, input_len: int, new_tokens: int) -> str:
    """tokenizer_manager._validate_one_request."""
    return (
        f"Requested token count exceeds the model's maximum context length of {context_len} tokens. "
        f"You requested a total of {total} tokens: {input_len} tokens from the input messages and "
        f"{new_tokens} tokens for the completion. Please reduce the number of tokens in the input messages "
        "or the completion to fit within the limit."
    )


def input_exceeds_context(input_len: int, context_len: int) -> str:
    return f"The input ({input_len} tokens) is longer than the model's context length ({context_len} tokens)."


# --- failures ------------------------------------------------------------------------------------

SIGQUIT_LAUNCH = "Received sigquit from a child process. It usually means the child failed."


def sigquit_running(frame_repr: str) -> str:
    """tokenizer_manager.running_phase_sigquit_handler."""
    return f"SIGQUIT received. signum=3, frame={frame_repr}. It usually means one child failed."


CUDA_ERROR_TAIL = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)
CUDA_ERRORS = {
    "illegal_instruction": "CUDA error: an illegal instruction was encountered",
    "illegal_memory_access": "CUDA error: an illegal memory access was encountered",
}

CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


def torch_oom(tried_gib: float, total_gib: float, free_gib: float, in_use_gib: float) -> str:
    """PyTorch's CUDACachingAllocator message."""
    return (
        f"CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU 0 has a total capacity of {total_gib:.2f} GiB "
        f"of which {free_gib * 1024:.2f} MiB is free. Including non-PyTorch memory, this process has {in_use_gib:.2f} GiB "
        "memory in use. Of the allocated memory "
        f"{in_use_gib * 0.97:.2f} GiB is allocated by PyTorch, and {in_use_gib * 0.02:.2f} GiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
        "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


Frame = tuple[str, int, str, str]  # file, line, function, source line ("" for none)


def _srt(path: str) -> str:
    return f"{SGLANG}/srt/{path}"


def format_traceback(frames: Iterable[Frame], final: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for file, line, function, source in frames:
        lines.append(f'  File "{file}", line {line}, in {function}')
        if source:
            lines.append(f"    {source}")
    lines.extend(final.split("\n"))
    return lines


LAUNCH_FRAMES: tuple[Frame, ...] = (
    ("<frozen runpy>", 198, "_run_module_as_main", ""),
    ("<frozen runpy>", 88, "_run_code", ""),
    (f"{SGLANG}/launch_server.py", 66, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
    (_srt("server_args.py"), 8009, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)"),
    (_srt("server_args.py"), 7284, "from_cli_args", "return cls(**{attr: getattr(args, attr) for attr in attrs})"),
    ("<string>", 384, "__init__", ""),
)

ARGS_FAILURE_FRAMES: dict[str, tuple[Frame, ...]] = {
    "speculative_hook": (
        (_srt("server_args.py"), 1003, "__post_init__", "self._handle_speculative_decoding()"),
        (_srt("server_args.py"), 3312, "_handle_speculative_decoding", "handle_speculative_decoding(self)"),
        (_srt("arg_groups/speculative_hook.py"), 313, "handle_speculative_decoding", "_handle_dflash(server_args)"),
        (_srt("arg_groups/speculative_hook.py"), 145, "_handle_dflash", "raise ValueError("),
    ),
    "mamba_radix_cache": (
        (_srt("server_args.py"), 966, "__post_init__", "self._handle_model_specific_adjustments()"),
        (_srt("server_args.py"), 2540, "_handle_model_specific_adjustments", "self._handle_mamba_radix_cache("),
        (_srt("server_args.py"), 2754, "_handle_mamba_radix_cache", "raise ValueError("),
    ),
    "context_length": (
        (_srt("server_args.py"), 966, "__post_init__", "self._handle_model_specific_adjustments()"),
        (_srt("server_args.py"), 2521, "_handle_model_specific_adjustments", "model_config=self.get_model_config(),"),
        (_srt("server_args.py"), 7334, "get_model_config", "self.model_config = ModelConfig.from_server_args(self)"),
        (_srt("configs/model_config.py"), 395, "from_server_args", "return ModelConfig("),
        (_srt("configs/model_config.py"), 232, "__init__", "self._derive_context_length(context_length)"),
        (_srt("configs/model_config.py"), 579, "_derive_context_length", "raise ValueError("),
    ),
}
# SGLang's path into transformers when it reads a model's config.json (ServerArgs -> ModelConfig
# -> hf_transformers.get_config -> AutoConfig.from_pretrained).
_CONFIG_FRAMES: tuple[Frame, ...] = (
    (_srt("server_args.py"), 966, "__post_init__", "self._handle_model_specific_adjustments()"),
    (_srt("server_args.py"), 2521, "_handle_model_specific_adjustments", "model_config=self.get_model_config(),"),
    (_srt("server_args.py"), 7334, "get_model_config", "self.model_config = ModelConfig.from_server_args(self)"),
    (_srt("configs/model_config.py"), 395, "from_server_args", "return ModelConfig("),
    (_srt("configs/model_config.py"), 201, "__init__", "self.hf_config = get_config("),
    (_srt("utils/hf_transformers/config.py"), 250, "get_config", "config = parser.parse("),
    (_srt("utils/hf_transformers/config.py"), 63, "parse", "config = AutoConfig.from_pretrained("),
    (f"{SITE}/transformers/models/auto/configuration_auto.py", 1332, "from_pretrained", "config_dict, unused_kwargs = PretrainedConfig.get_config_dict(pretrained_model_name_or_path, **kwargs)"),
)
_GET_CONFIG_DICT_FRAME: Frame = (f"{SITE}/transformers/configuration_utils.py", 662, "get_config_dict", "config_dict, kwargs = cls._get_config_dict(pretrained_model_name_or_path, **kwargs)")
_CACHED_FILE_FRAMES: tuple[Frame, ...] = (
    (f"{SITE}/transformers/configuration_utils.py", 721, "_get_config_dict", "resolved_config_file = cached_file("),
    (f"{SITE}/transformers/utils/hub.py", 322, "cached_file", "file = cached_files(path_or_repo_id=path_or_repo_id, filenames=[filename], **kwargs)"),
)
# AutoConfig's message lists every model type it knows (hundreds); the list is cut after its first entries.
_KNOWN_MODEL_TYPES = "aimv2, aimv2_vision_model, albert, align, altclip, apertus, arcee, aria, aria_text, autoformer, aya_vision, ..."


def missing_model_traceback(path: str, is_directory: bool) -> list[str]:
    """What SGLang prints (through transformers 4.57 / huggingface_hub) for a model that is not
    there: a directory without config.json (a partial download), a string that cannot be a Hub
    repo id (an absolute path, e.g. in a /dev/shm wiped by a reboot), or a repo id on a host that
    cannot reach the Hub."""
    if is_directory:
        return format_traceback(
            LAUNCH_FRAMES + _CONFIG_FRAMES + ((f"{SITE}/transformers/models/auto/configuration_auto.py", 1380, "from_pretrained", "raise ValueError("),),
            f"ValueError: Unrecognized model in {path}. Should have a `model_type` key in its config.json, or contain one of the following strings in its name: {_KNOWN_MODEL_TYPES}",
        )
    frames = LAUNCH_FRAMES + _CONFIG_FRAMES + (_GET_CONFIG_DICT_FRAME,)
    if path.count("/") > 1:
        # HFValidationError is no OSError: _get_config_dict re-raises it as its generic OSError.
        cause = format_traceback(
            _CACHED_FILE_FRAMES
            + (
                (f"{SITE}/transformers/utils/hub.py", 553, "cached_files", "raise e"),
                (f"{SITE}/transformers/utils/hub.py", 478, "cached_files", "hf_hub_download("),
                (f"{SITE}/huggingface_hub/utils/_validators.py", 106, "_inner_fn", "validate_repo_id(arg_value)"),
                (f"{SITE}/huggingface_hub/utils/_validators.py", 154, "validate_repo_id", "raise HFValidationError("),
            ),
            f"huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '{path}'. Use `repo_type` argument if needed.",
        )
        effect = format_traceback(
            frames + ((f"{SITE}/transformers/configuration_utils.py", 744, "_get_config_dict", "raise OSError("),),
            f"OSError: Can't load the configuration of '{path}'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with the same name. "
            f"Otherwise, make sure '{path}' is the correct path to a directory containing a config.json file",
        )
        return cause + ["", "During handling of the above exception, another exception occurred:", ""] + effect
    return format_traceback(
        frames + _CACHED_FILE_FRAMES + ((f"{SITE}/transformers/utils/hub.py", 554, "cached_files", "raise OSError("),),
        "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
        "cached files.\nCheck your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.",
    )


def args_failure_traceback(site: str, exception: str, message: str) -> list[str]:
    return format_traceback(LAUNCH_FRAMES + ARGS_FAILURE_FRAMES[site], f"{exception}: {message}")


SCHEDULER_FRAMES: tuple[Frame, ...] = (
    (_srt("managers/scheduler.py"), 4046, "run_scheduler_process", "scheduler = Scheduler("),
    (_srt("managers/scheduler.py"), 412, "__init__", "self.init_model_worker()"),
    (_srt("managers/scheduler.py"), 801, "init_model_worker", "self.init_tp_model_worker()"),
    (_srt("managers/scheduler.py"), 760, "init_tp_model_worker", "self.tp_worker = TpModelWorker("),
)
MODEL_RUNNER_FRAMES: tuple[Frame, ...] = (
    (_srt("managers/tp_worker.py"), 247, "__init__", "self._init_model_runner()"),
    (_srt("managers/tp_worker.py"), 330, "_init_model_runner", "self._model_runner = ModelRunner("),
    (_srt("model_executor/model_runner.py"), 420, "__init__", "self.initialize(pre_model_load_memory)"),
)
INIT_FAILURE_FRAMES: dict[str, tuple[Frame, ...]] = {
    "load_weights": MODEL_RUNNER_FRAMES
    + (
        (_srt("model_executor/model_runner.py"), 510, "initialize", "self.load_model()"),
        (_srt("model_executor/model_runner.py"), 1335, "load_model", "self.model = self.loader.load_model("),
        (_srt("model_loader/loader.py"), 671, "load_model", "model = _initialize_model("),
        (f"{TORCH}/nn/modules/module.py", 1355, "to", "return self._apply(convert)"),
    ),
    "mamba_cache": MODEL_RUNNER_FRAMES
    + (
        (_srt("model_executor/model_runner.py"), 602, "initialize", "self.init_memory_pool(pre_model_load_memory)"),
        (_srt("model_executor/model_runner_kv_cache_mixin.py"), 972, "init_memory_pool", "self.memory_pool_config = self._resolve_memory_pool_config("),
        (_srt("model_executor/model_runner_kv_cache_mixin.py"), 938, "_resolve_memory_pool_config", "available_bytes = self._profile_available_bytes(pre_model_load_memory)"),
        (_srt("model_executor/model_runner_kv_cache_mixin.py"), 212, "_profile_available_bytes", "rest_memory = self.handle_max_mamba_cache(rest_memory)"),
        (_srt("model_executor/model_runner_kv_cache_mixin.py"), 286, "handle_max_mamba_cache", "raise RuntimeError("),
    ),
    "kv_cache": MODEL_RUNNER_FRAMES
    + (
        (_srt("model_executor/model_runner.py"), 602, "initialize", "self.init_memory_pool(pre_model_load_memory)"),
        (_srt("model_executor/model_runner_kv_cache_mixin.py"), 972, "init_memory_pool", "self.memory_pool_config = self._resolve_memory_pool_config("),
        (_srt("model_executor/model_runner_kv_cache_mixin.py"), 944, "_resolve_memory_pool_config", "config = configurator.calculate_pool_sizes(available_bytes, page_size)"),
        (_srt("model_executor/pool_configurator.py"), 187, "calculate_pool_sizes", "return MemoryPoolConfig(max_total_num_tokens=max_total_num_tokens)"),
        ("<string>", 12, "__init__", ""),
        (_srt("model_executor/pool_configurator.py"), 58, "__post_init__", "raise RuntimeError("),
    ),
    "scheduler_init": ((_srt("managers/tp_worker.py"), 299, "__init__", 'assert self.max_running_requests > 0, "max_running_request is zero"'),),
    "attention_backend": MODEL_RUNNER_FRAMES
    + (
        (_srt("model_executor/model_runner.py"), 640, "initialize", "self.init_attention_backend()"),
        (_srt("model_executor/model_runner.py"), 2012, "init_attention_backend", "self.attn_backend = self._get_attention_backend()"),
        (_srt("model_executor/model_runner.py"), 2077, "_get_attention_backend", "return self._get_attention_backend_from_str(self.server_args.attention_backend)"),
        (_srt("layers/attention/attention_registry.py"), 186, "create_flashattention_v3_backend", "assert (major == 8 and not runner.use_mla_backend) or major == 9, ("),
    ),
    "cuda_graph": MODEL_RUNNER_FRAMES
    + (
        (_srt("model_executor/model_runner.py"), 655, "initialize", "self.init_device_graphs()"),
        (_srt("model_executor/model_runner.py"), 2251, "init_device_graphs", "self.graph_runner = graph_runners[self.device](self)"),
        (_srt("model_executor/cuda_graph_runner.py"), 628, "__init__", "raise Exception("),
    ),
    "device": MODEL_RUNNER_FRAMES
    + (
        (_srt("model_executor/model_runner.py"), 1094, "init_torch_distributed", "torch.get_device_module(self.device).set_device(self.gpu_id)"),
        (f"{TORCH}/cuda/__init__.py", 567, "set_device", "torch._C._cuda_setDevice(device)"),
    ),
}
DRAFT_FRAMES: tuple[Frame, ...] = (
    (_srt("managers/scheduler.py"), 806, "init_model_worker", "self.maybe_init_draft_worker()"),
    (_srt("managers/scheduler.py"), 781, "maybe_init_draft_worker", "self.draft_worker = DraftWorkerClass(**draft_worker_kwargs)"),
    (_srt("speculative/dflash_worker.py"), 160, "__init__", "self.draft_worker = TpModelWorker("),
)


# Where 0.5.23's own call chain differs from the one above: the whole traceback, read in the wheel
# (tests/unit/test_logs_0523.py checks each frame's source line). 0.5.23 sizes the pools after both
# workers are built (scheduler.init_memory_pools), and TpModelWorker asserts right after them.
INIT_FAILURE_FRAMES_BY_RELEASE: dict[str, dict[str, tuple[Frame, ...]]] = {
    "0.5.23": {
        "scheduler_init": (
            (_srt("managers/scheduler.py"), 6362, "run_scheduler_process", "scheduler = Scheduler(server_args, port_args)"),
            (_srt("managers/scheduler.py"), 568, "__init__", "self.init_model_worker()"),
            (_srt("managers/scheduler.py"), 1137, "init_model_worker", "self.init_memory_pools()"),
            (_srt("managers/scheduler.py"), 1100, "init_memory_pools", "self.init_target_memory_pool()"),
            (_srt("managers/scheduler.py"), 1090, "init_target_memory_pool", "self.tp_worker.alloc_memory_pool("),
            (_srt("managers/tp_worker.py"), 420, "alloc_memory_pool", 'assert self.model_runner.max_running_requests > 0, "max_running_request is zero"'),
        ),
    },
}


def init_failure_traceback(phase: str, exception: str, message: str, draft: bool = False, release: str | None = None) -> list[str]:
    own = INIT_FAILURE_FRAMES_BY_RELEASE.get(release or "", {}).get(phase)
    if own is not None:
        return format_traceback(own, f"{exception}: {message}")
    frames = SCHEDULER_FRAMES[:3] + DRAFT_FRAMES + INIT_FAILURE_FRAMES[phase] if draft else SCHEDULER_FRAMES + INIT_FAILURE_FRAMES[phase]
    return format_traceback(frames, f"{exception}: {message}")


RUNTIME_FRAMES: tuple[Frame, ...] = (
    (_srt("managers/scheduler.py"), 4061, "run_scheduler_process", "scheduler.run_event_loop()"),
    (_srt("managers/scheduler.py"), 1380, "run_event_loop", "dispatch_event_loop(self)"),
    (_srt("managers/scheduler.py"), 4011, "dispatch_event_loop", "scheduler.event_loop_normal()"),
    (f"{TORCH}/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
    (_srt("managers/scheduler.py"), 1436, "event_loop_normal", "result = self.run_batch(batch)"),
    (_srt("managers/scheduler.py"), 2702, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
)
SPEC_WORKER_FILES = {
    "DDTREE": ("speculative/ddtree_worker.py", 412, "verify = self._verify_tree(batch, draft_input)"),
    "DFLASH": ("speculative/dflash_worker.py", 1187, "logits_output, next_token_ids = self._run_verify(batch)"),
}


def runtime_crash_traceback(algorithm: str | None, error: str) -> list[str]:
    frames = list(RUNTIME_FRAMES)
    if algorithm in SPEC_WORKER_FILES:
        path, line, source = SPEC_WORKER_FILES[algorithm]
        frames.append((_srt(path), line, "forward_batch_generation", source))
        frames.append((_srt("speculative/dflash_utils.py"), 655, "commit_accepted_tokens", "accept_len_cpu = accept_len.cpu()"))
    else:
        frames.append((_srt("managers/tp_worker.py"), 452, "forward_batch_generation", "batch_result.next_token_ids = self.model_runner.sample("))
    return format_traceback(frames, f"torch.AcceleratorError: {CUDA_ERRORS[error]}\n" + "\n".join(CUDA_ERROR_TAIL) + "\n")


def nccl_watchdog_lines(rank: int, error: str, stamp: str) -> list[str]:
    """PyTorch ProcessGroupNCCL's watchdog when a CUDA error poisons the communicator (tp > 1)."""
    head = f"[PG ID 2 PG GUID 3 Rank {rank}] Process group watchdog thread terminated with exception: {CUDA_ERRORS[error]}"
    return [
        f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:2057] {head}",
        *CUDA_ERROR_TAIL,
        "",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {head}",
    ]
