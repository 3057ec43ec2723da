"""vLLM behind the engine seam (`fleet.host.engines.base.Engine`): its release table, the `vllm serve`
parser rebuilt from the release's flag table, launch rendering, the memory planner (`memory.py`:
`predict_start` checks the command line with the release's parser, then plans vLLM's start-up
memory) and the KV-cache lines of its log.

Not yet: a simulator that plays vLLM. The planner says "not checked" for what it does not model
(hybrid mamba models, MLA cards, speculative decoding's draft layers, pipeline parallelism).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from fleet.host.engines.base import (
    Adjustment,
    Engine,
    Feasibility,
    FlagValue,
    LaunchFacts,
    LaunchSpec,
    ReleaseChoice,
    ServerShape,
    ServingLimits,
    SpecCounters,
    StartRecord,
    describe_adjustments,
    unchecked,
)
from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.vllm import release as release_table
from fleet.host.engines.vllm.flags import ServeArgsError, flag_for, load_table, parse_serve
from fleet.host.engines.vllm.launch import SPECULATIVE_METHODS, VLLM_MODULE, VLLM_VERSION_TESTED, build_launch
from fleet.host.engines.vllm.memory import (
    ModelShape, NotModelled, ObservedStart, VllmMemoryInputs, VllmMemoryPlan, corrected_inputs, format_gib, model_shape, observe_start, plan_memory,
    smallest_fix,
)  # fmt: skip
from fleet.host.engines.vllm.logparse import parse_kv_cache_line as parse_kv_cache_line  # the KV-cache line's reader, where callers found it
from fleet.host.engines.vllm.logparse import START_MARKERS
from fleet.host.engines.vllm.metrics import spec_counters

if TYPE_CHECKING:
    from fleet.host.modelcard import ModelCard

# vLLM's own default of max_num_seqs for `vllm serve` on a GPU of 70 GiB or more (H100, H200, B200):
# vllm/engine/arg_utils.py:2995 (0.33.0) `UsageContext.OPENAI_API_SERVER: 1024` (also :2981 at 160 GiB and more; 256 below 70 GiB,
# :3005). Speculative decoding does not change it.
DEFAULT_MAX_NUM_SEQS = 1024
# vllm/config/cache.py:215 `gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)`.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92

# fleet's setting names (SGLang's) -> `vllm serve`'s parser dests.
SETTING_DESTS: Mapping[str, str] = {
    "tp_size": "tensor_parallel_size",
    "context_length": "max_model_len",
    "mem_fraction_static": "gpu_memory_utilization",
    "max_running_requests": "max_num_seqs",
    "page_size": "block_size",
    "cuda_graph_max_bs": "max_cudagraph_capture_size",
    "attention_backend": "attention_backend",
    "kv_cache_dtype": "kv_cache_dtype",
    "trust_remote_code": "trust_remote_code",
}


class VLLM:
    name = "vllm"
    title = release_table.TITLE
    server_module = VLLM_MODULE
    version_tested = VLLM_VERSION_TESTED
    releases = release_table.KNOWN_RELEASES
    sim_release = release_table.DEFAULT_SIM_RELEASE
    forks = release_table.FORKS
    speculative_default_max_running_requests = DEFAULT_MAX_NUM_SEQS
    safe_max_mem_fraction_static = DEFAULT_GPU_MEMORY_UTILIZATION

    def choose_release(self, version: str) -> ReleaseChoice:
        return release_table.choose_release(version)

    def algorithms(self, fork: str | None) -> tuple[str, ...]:
        """fleet's names of the methods vLLM 0.33 has (launch.SPECULATIVE_METHODS); vLLM has no forks
        fleet knows, so DDTREE is not one."""
        return tuple(SPECULATIVE_METHODS)

    def check_argv(self, release: str, flags: Sequence[str], *, fork: str | None) -> None:
        """`flags` as `vllm serve` takes them after its model; a placeholder model goes first when
        they do not start with one. Raises ArgvError where vLLM's parser exits 2; where vLLM raises
        instead (ServeArgsError, a --config file), raises ArgvError with vLLM's message too."""
        args = list(flags)
        if not args or args[0].startswith("-"):
            args = ["/model", *args]
        try:
            parse_serve(release, args)
        except (ServeArgsError, ConfigFileError) as exc:
            table = load_table(release)
            raise ArgvError(str(exc), f"usage: {table.usage}\n", table.prog) from None

    def build_launch(
        self,
        server: ServerShape,
        *,
        python: str,
        model_path: str,
        draft_path: str | None,
        port: int,
        bind_host: str,
        hybrid: bool | None,
        served_model_name: str | None,
        card: ModelCard | None,
        version: str | None,
        module: str,
    ) -> LaunchSpec:
        return build_launch(
            server, python=python, model_path=model_path, draft_path=draft_path, port=port, bind_host=bind_host,
            served_model_name=served_model_name, card=card, vllm_version=version, module=module,
        )  # fmt: skip

    def predict_start(
        self,
        flags: Sequence[str],
        env: Mapping[str, str],
        target: ModelCard,
        draft: ModelCard | None,
        *,
        algorithm: str | None,
        gpu_memory_mib: int,
        release: str,
        fork: str | None,
        observed: Sequence[StartRecord] = (),
    ) -> Feasibility:
        """The command line through the release's parser (a refusal is a verdict), then vLLM's
        start-up memory (`memory.plan_memory`): "fits", "does not fit" (with vLLM's error, its phase
        and exception, and the smallest fix) or "uncertain" where the verdict turns on what vLLM
        measures at start-up (the activation peak, CUDA graphs, non-torch memory).

        `observed`: what earlier starts logged (`StartRecord`s, read by `observe_start`); the last
        one of the same configuration replaces the assumed overhead range."""
        try:
            parsed = parse_serve(release, [a for a in flags if a != "serve"], env)
        except ArgvError as exc:
            return Feasibility(False, None, None, None, f"vLLM {release} refuses the command line: {exc.message}")
        except ServeArgsError as exc:
            return Feasibility(False, None, None, None, f"vLLM {release} refuses the command line: {exc.exception}: {exc.message}")
        except ConfigFileError as exc:
            return unchecked(f"not checked: the planner cannot read the --config file ({exc})")
        try:
            model, inputs = memory_inputs(parsed.values, target, gpu_memory_mib=gpu_memory_mib, release=release)
        except NotModelled as exc:
            return unchecked(f"not checked: {exc}")
        inputs = corrected_inputs(model, inputs, self._observations(observed, target))
        plan = plan_memory(model, inputs)
        suggestion = smallest_fix(model, inputs, plan)
        return Feasibility(plan.failure is None, plan, plan.failure, suggestion, _verdict(plan, suggestion), inputs)

    def observe_start(self, flags: Sequence[str], env: Mapping[str, str], target: ModelCard, *, gpu_memory_mib: int, release: str, log_lines: Iterable[str]) -> ObservedStart | None:
        """What the start of this launch (its flags, on a GPU of `gpu_memory_mib`) measured, read
        from its log's "Available KV cache memory" / "KV cache size" lines; pass it to a later
        `predict_start(observed=...)`. None when the log lacks the lines or the launch is not planned."""
        try:
            parsed = parse_serve(release, [a for a in flags if a != "serve"], env)
            model, inputs = memory_inputs(parsed.values, target, gpu_memory_mib=gpu_memory_mib, release=release)
        except (ArgvError, ServeArgsError, ConfigFileError, NotModelled):
            return None
        return observe_start(model, inputs, log_lines)

    def _observations(self, records: Sequence[StartRecord], target: ModelCard) -> list[ObservedStart]:
        found = []
        for record in records:
            if record.engine != self.name:
                continue
            seen = self.observe_start(record.flags, dict(record.env), target, gpu_memory_mib=record.gpu_memory_mib, release=record.release, log_lines=record.lines)
            if seen is not None:
                found.append(seen)
        return found

    def start_line(self, line: str) -> bool:
        """vLLM's "Available KV cache memory" and KV-cache lines: what its profiling run left for the cache."""
        return any(marker in line for marker in START_MARKERS)

    def flag_for(self, release: str, name: str) -> str:
        return flag_for(release, SETTING_DESTS.get(name, name))

    def disable_cuda_graph(self, release: str) -> tuple[str, FlagValue]:
        """`--enforce-eager` (ModelConfig.enforce_eager: eager mode, no CUDA graphs)."""
        return flag_for(release, "enforce_eager")[2:], True

    client_api = "completions"  # `vllm serve` has no /generate of SGLang's shape
    info_path = None  # no /server_info (it exists only under VLLM_SERVER_DEV_MODE)
    speculative_flags = ("--speculative-config",)  # launch.build_launch renders the method as this flag

    def read_launch(self, flags: Sequence[str]) -> LaunchFacts:
        """The flags through the newest release's parser (fleet rendered them, so it takes them):
        the model tag, a speculative config, and --max-num-seqs (None when not set: vLLM's default
        then depends on the GPU's memory, arg_utils.py:2973-3006, which the agent does not guess)."""
        args = [a for a in flags if a != "serve"]
        try:
            values = parse_serve(self.releases[-1], args).values
        except (ArgvError, ServeArgsError, ConfigFileError):
            return LaunchFacts(args[0] if args else "?", any(flag in args for flag in self.speculative_flags))
        seqs = values.get("max_num_seqs")
        return LaunchFacts(str(values.get("model_tag") or values.get("model") or "?"), bool(values.get("speculative_config")), seqs if isinstance(seqs, int) else None)

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        """vllm:spec_decode_num_drafts_total and vllm:spec_decode_num_accepted_tokens_total, summed
        over engines (vllm/v1/spec_decode/metrics.py:226-241); None without speculative decoding."""
        return spec_counters(metrics_text)

    def serving_limits(self, line: str) -> ServingLimits | None:
        """The KV-cache line's figures (`parse_kv_cache_line`): the cache's tokens and max_model_len.
        It does not state the scheduler's cap (max_num_seqs), so `max_running_requests` stays None:
        the agent takes that from the server, never from a guess (a cap below a playbook's
        concurrency levels would make them queue unseen)."""
        line_figures = parse_kv_cache_line(line)
        if line_figures is None:
            return None
        return ServingLimits(max_total_num_tokens=line_figures.tokens, max_running_requests=None, context_len=line_figures.max_model_len)


def memory_inputs(values: Mapping[str, object], target: ModelCard, *, gpu_memory_mib: int, release: str) -> tuple[ModelShape, VllmMemoryInputs]:
    """`vllm serve`'s parsed values (flags.parse_serve) -> what the planner reads. Raises
    NotModelled for what it does not plan."""
    if values.get("speculative_config"):
        raise NotModelled("speculative decoding: the draft's KV cache layers and weights are not modelled for vLLM")
    for dest, name in (("pipeline_parallel_size", "pipeline parallelism"), ("decode_context_parallel_size", "decode context parallelism")):
        if int(values.get(dest) or 1) > 1:  # type: ignore[call-overload]
            raise NotModelled(f"{name} is not modelled")
    if values.get("kv_transfer_config") or values.get("kv_cache_dtype_skip_layers"):
        raise NotModelled("a KV connector or per-layer KV cache dtypes are not modelled")
    tp = int(values.get("tensor_parallel_size") or 1)  # type: ignore[call-overload]
    kv_dtype = str(values.get("kv_cache_dtype") or "auto")
    block_size = values.get("block_size")
    model = model_shape(target, tp_size=tp, kv_cache_dtype=kv_dtype, block_size=int(block_size) if block_size else None)  # type: ignore[call-overload]
    max_model_len = values.get("max_model_len")
    hybrid_manager = values.get("disable_hybrid_kv_cache_manager")
    inputs = VllmMemoryInputs(
        gpu_memory_mib=gpu_memory_mib,
        tp_size=tp,
        gpu_memory_utilization=float(values.get("gpu_memory_utilization") or DEFAULT_GPU_MEMORY_UTILIZATION),  # type: ignore[arg-type]
        max_model_len=int(max_model_len) if max_model_len is not None else None,  # type: ignore[call-overload]
        block_size=int(block_size) if block_size else None,  # type: ignore[call-overload]
        kv_cache_dtype=kv_dtype,
        max_num_seqs=_optional_int(values.get("max_num_seqs")),
        max_num_batched_tokens=_optional_int(values.get("max_num_batched_tokens")),
        enforce_eager=bool(values.get("enforce_eager")),
        max_cudagraph_capture_size=_optional_int(values.get("max_cudagraph_capture_size")),
        kv_cache_memory_bytes=_optional_int(values.get("kv_cache_memory_bytes")),
        num_gpu_blocks_override=_optional_int(values.get("num_gpu_blocks_override")),
        async_scheduling=None if values.get("async_scheduling") is None else bool(values.get("async_scheduling")),
        disable_hybrid_kv_cache_manager=bool(hybrid_manager),
        release=release,
    )
    return model, inputs


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _gib(value: int) -> str:
    return f"{format_gib(value)} GiB"


def _verdict(plan: VllmMemoryPlan, suggestion: list[Adjustment] | None) -> str:
    where = f"vllm {plan.release}"
    overhead = plan.overhead
    assumed = f"start-up overhead {overhead.source} {format_gib(overhead.low)}-{format_gib(overhead.high)} GiB"
    if plan.failure is not None:
        failure = plan.failure
        text = f"{where} would stop at {failure.phase}: {failure.exception}: {failure.message}"
        if failure.phase == "kv_cache":
            text += f" ({assumed}; figures at its low end)"
    elif plan.verdict == "uncertain":
        risk = plan.uncertain_failure
        if risk is not None and risk.phase in ("init_device", "load_weights"):
            asks, what = (plan.requested_bytes, "gpu_memory_utilization asks") if risk.phase == "init_device" else (plan.weights_bytes_per_gpu, "the weights take")
            text = f"{where} uncertain: fits unless the CUDA context takes more than {_gib(plan.cuda_total_bytes - asks)} of the GPU ({what} {_gib(asks)}); past it: {risk.exception}: {risk.message}"
        else:
            limit = _gib(plan.max_overhead_that_fits) if plan.max_overhead_that_fits is not None else "?"
            text = (
                f"{where} uncertain: fits unless the start-up overhead (activation peak, CUDA graphs, non-torch memory; {overhead.source} "
                f"{format_gib(overhead.low)}-{format_gib(overhead.high)} GiB) exceeds {limit}; if it starts, KV cache {plan.kv_tokens:,}-{plan.kv_tokens_high:,} tokens"
                + (f"; past it: {risk.exception}: {risk.message}" if risk is not None else "")
            )
    else:
        text = (
            f"{where} fits: KV cache {plan.kv_tokens:,}-{plan.kv_tokens_high:,} tokens, {plan.max_concurrency_low:.2f}-{plan.max_concurrency_high:.2f}x requests "
            f"of {plan.context_len:,} tokens ({plan.kv_bytes_per_token} KV bytes per token, {assumed})"
        )
    if suggestion:
        text += f"; smallest fix: {describe_adjustments(suggestion)}"
    elif suggestion is None and plan.failure is not None:
        text += "; no single change of mem_fraction_static or context_length fixes it"
    return text


ENGINE: Engine = VLLM()
