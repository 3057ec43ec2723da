"""vLLM behind the engine seam (`fleet.host.engines.base.Engine`): its release table, the `vllm serve`
parser rebuilt from the release's flag table, launch rendering and the KV-cache line of its log.

Not yet: vLLM's memory planning (`predict_start` checks the command line with the release's parser,
then says `vLLM memory is not planned yet`), fixes, and a simulator that plays vLLM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet.host.engines.base import Engine, Feasibility, FlagValue, LaunchSpec, ReleaseChoice, ServerShape, ServingLimits, unchecked
from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.vllm import release as release_table
from fleet.host.engines.vllm.flags import ServeArgsError, flag_for, load_table, parse_serve
from fleet.host.engines.vllm.launch import SPECULATIVE_METHODS, VLLM_MODULE, VLLM_VERSION_TESTED, build_launch

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

# vllm/v1/core/kv_cache_utils.py:1147 (0.33.0), `update_kv_cache_capacity`:
#   logger.info_once("%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
#                    pools, f"{num_tokens:,}", f"{max_model_len:,}", max_concurrency)
# pools is "GPU" on CUDA (`_kv_cache_device_name`, :1131), with " + host" under HiSparse.
KV_CACHE_LINE = re.compile(
    r"(?P<pools>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens, "
    r"Maximum concurrency for (?P<max_model_len>[\d,]+) tokens per request: (?P<concurrency>\d+\.\d\d)x"
)


@dataclass(frozen=True)
class KvCacheLine:
    """What vLLM's KV-cache line states: the cache's size in tokens, and how many requests of
    max_model_len tokens it holds at once (vLLM's own division, :1120 get_kv_cache_capacity)."""

    pools: str
    tokens: int
    max_model_len: int
    max_concurrency: float


def parse_kv_cache_line(line: str) -> KvCacheLine | None:
    match = KV_CACHE_LINE.search(line)
    if not match:
        return None
    return KvCacheLine(match["pools"], int(match["tokens"].replace(",", "")), int(match["max_model_len"].replace(",", "")), float(match["concurrency"]))


class VLLM:
    name = "vllm"
    title = release_table.TITLE
    server_module = VLLM_MODULE
    version_tested = VLLM_VERSION_TESTED
    releases = release_table.KNOWN_RELEASES
    sim_release = release_table.DEFAULT_SIM_RELEASE
    forks: tuple[str, ...] = ()
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
    ) -> Feasibility:
        """The command line through the release's parser (a refusal is a verdict); memory is not
        planned yet: `unchecked`, so no configuration is skipped for the planner's sake."""
        try:
            parse_serve(release, [a for a in flags if a != "serve"], env)
        except ArgvError as exc:
            return Feasibility(False, None, None, None, f"vLLM {release} refuses the command line: {exc.message}")
        except ServeArgsError as exc:
            return Feasibility(False, None, None, None, f"vLLM {release} refuses the command line: {exc.exception}: {exc.message}")
        except ConfigFileError as exc:
            return unchecked(f"not checked: the planner cannot read the --config file ({exc})")
        return unchecked("vLLM memory is not planned yet")

    def flag_for(self, release: str, name: str) -> str:
        return flag_for(release, SETTING_DESTS.get(name, name))

    def disable_cuda_graph(self, release: str) -> tuple[str, FlagValue]:
        """`--enforce-eager` (ModelConfig.enforce_eager: eager mode, no CUDA graphs)."""
        return flag_for(release, "enforce_eager")[2:], True

    def serving_limits(self, line: str) -> ServingLimits | None:
        """None, always, for now: vLLM's KV-cache line (`parse_kv_cache_line`) states the cache's
        tokens and its concurrency at max_model_len, but not the scheduler's cap (max_num_seqs),
        which `ServingLimits.max_running_requests` is; the agent would drive concurrency levels a
        max_num_seqs below them cannot run. See the engine package's notes."""
        return None


ENGINE: Engine = VLLM()
