"""SGLang behind the engine seam (`fleet.host.engines.base.Engine`): the package's release table,
flag tables, argument resolution, launch rendering, memory planner and log parser, as the rest of
fleet asks for them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fleet.host.engines.base import (
    Adjustment, Feasibility, FlagValue, LaunchSpec, ReleaseChoice, LaunchFacts, ServerShape, ServingLimits, SpecCounters, StartRecord,
    describe_adjustments, unchecked,
)  # fmt: skip
from fleet.host.engines.base import Engine
from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.sglang import release as release_table
from fleet.host.engines.sglang.args import fleet_values, memory_inputs, resolve_server_args
from fleet.host.engines.sglang.flags import FORK_ALGORITHMS, RELEASE_FLAGS, flag_for, parse_argv
from fleet.host.engines.sglang.launch import SGLANG_MODULE, SGLANG_VERSION_TESTED, build_launch
from fleet.host.engines.sglang.memory import (
    SAFE_MAX_MEM_FRACTION_STATIC, MemoryPlan, plan_memory, sizes_draft, smallest_fix,
)  # fmt: skip
from fleet.host.engines.sglang.speculative import SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS, UPSTREAM_ALGORITHMS

if TYPE_CHECKING:
    from fleet.host.modelcard import ModelCard


class SGLang:
    name = "sglang"
    title = release_table.TITLE
    server_module = SGLANG_MODULE
    version_tested = SGLANG_VERSION_TESTED
    releases = release_table.KNOWN_RELEASES
    sim_release = release_table.DEFAULT_SIM_RELEASE
    forks = release_table.FORKS
    speculative_default_max_running_requests = SPECULATIVE_DEFAULT_MAX_RUNNING_REQUESTS
    safe_max_mem_fraction_static = SAFE_MAX_MEM_FRACTION_STATIC

    def choose_release(self, version: str) -> ReleaseChoice:
        return release_table.choose_release(version)

    def algorithms(self, fork: str | None) -> tuple[str, ...]:
        """What `SpeculativeAlgorithm.from_string` takes (the releases fleet knows agree; NEXTN is
        EAGLE's alias), then the host's fork's, then every other fork's."""
        own = sorted(FORK_ALGORITHMS.get(fork, ())) if fork else []
        others = sorted(a for name, algorithms in FORK_ALGORITHMS.items() if name != fork for a in algorithms)
        return (*UPSTREAM_ALGORITHMS, "NEXTN", *own, *others)

    def check_argv(self, release: str, flags: Sequence[str], *, fork: str | None) -> None:
        model = [] if "--model-path" in flags else ["--model-path", "/model"]  # required by launch_server's parser
        parse_argv(release, [*model, *flags], fork=fork)

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
            hybrid=hybrid, served_model_name=served_model_name, card=card, sglang_version=version, module=module,
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
        """The launch's own flags through the release's parser (built from its flag table), its
        argument resolution (defaults, the speculative and mamba hooks) and the one flags ->
        `MemoryInputs` mapping: the same code the simulator runs when it starts. So what fleet
        predicts is what the release does with that command line, including what fleet adds to a
        launch on its own (a `--disable-radix-cache` for a hybrid model up to 0.5.13, the DFLASH env).
        `observed` is not read: SGLang's pools follow from the model and the flags (the simulator
        checks them against the release's own code), with nothing measured at start-up to assume."""
        if sizes_draft(algorithm, release) and draft is None:
            return unchecked(f"no model card for the {algorithm} draft: not checked")
        try:
            parsed = parse_argv(release, list(flags), fork=fork)
        except ArgvError as exc:  # what `sglang.launch_server` exits 2 with
            return Feasibility(False, None, None, None, f"SGLang {release} refuses the command line: {exc.message}")
        except ConfigFileError as exc:
            return unchecked(f"not checked: the planner cannot read the --config file ({exc})")
        resolved = resolve_server_args(fleet_values(parsed), target, draft, dict(env), sim_seed=0, release=release, fork=fork)
        if resolved.failure is not None:
            refused = resolved.failure
            return Feasibility(False, None, None, None, f"SGLang {release} refuses the flags: {refused.exception}: {refused.message}")
        inputs = memory_inputs(resolved, gpu_memory_mib=gpu_memory_mib, release=release)
        planned_draft = draft if sizes_draft(resolved.algorithm, release) else None
        try:
            plan = plan_memory(target, inputs, planned_draft)
            suggestion = smallest_fix(target, inputs, planned_draft)
        except ValueError as exc:  # something the planner does not model (a KV dtype, a version before DFLASH)
            return unchecked(f"not checked: {exc}")
        return Feasibility(plan.failure is None, plan, plan.failure, suggestion, _verdict(plan, suggestion, release), inputs)

    def start_line(self, line: str) -> bool:
        return False  # nothing for the planner to learn: see predict_start

    def flag_for(self, release: str, name: str) -> str:
        return flag_for(release, name)

    def disable_cuda_graph(self, release: str) -> tuple[str, FlagValue]:
        name, value = RELEASE_FLAGS[release].disable_cuda_graph
        return name, value

    client_api = "generate"
    info_path = "/server_info"
    speculative_flags = ("--speculative-algorithm",)

    def read_launch(self, flags: Sequence[str]) -> LaunchFacts:
        """The model after --model-path (or --model), speculative when an algorithm is named; the
        cap is not read here: SGLang states its effective one in /server_info and its scheduler line."""
        model = next((flags[i + 1] for i, arg in enumerate(flags[:-1]) if arg in ("--model-path", "--model")), "?")
        return LaunchFacts(model, any(flag in flags for flag in self.speculative_flags))

    def spec_counters(self, metrics_text: str) -> SpecCounters | None:
        """None: SGLang reports acceptance per request (meta_info, sglext), which the client reads."""
        return None

    def serving_limits(self, line: str) -> ServingLimits | None:
        # Imported here: the log parser is the agent's, and every controller command that reads a
        # host file asks this engine for its releases (21 ms of CPU of each start; issue 28).
        from fleet.host.engines.sglang.logparse import SchedulerReady, parse_line

        event = parse_line(line)
        if not isinstance(event, SchedulerReady):
            return None
        return ServingLimits(event.max_total_num_tokens, event.max_running_requests, event.context_len)


def _verdict(plan: MemoryPlan, suggestion: list[Adjustment] | None, release: str) -> str:
    where = f"sglang {release}"
    if plan.failure is not None:
        failure = plan.failure
        role = " (draft model)" if failure.model_role == "draft" else ""
        text = f"{where} would stop at {failure.phase}{role}: {failure.exception}: {failure.message}"
    elif plan.requested_max_running_requests not in (None, plan.max_running_requests):
        text = (
            f"{where} starts but caps max_running_requests at {plan.max_running_requests} of the "
            f"{plan.requested_max_running_requests} asked (mamba cache {plan.max_mamba_cache_size} slots, "
            f"KV pool {plan.kv_tokens} tokens)"
        )
    else:
        text = f"{where} fits: KV pool {plan.kv_tokens} tokens, max_running_requests {plan.max_running_requests}" + (
            f", mamba cache {plan.max_mamba_cache_size} slots" if plan.max_mamba_cache_size else ""
        )
    if suggestion:
        text += f"; smallest fix: {describe_adjustments(suggestion)}"
    elif suggestion is None and plan.failure is not None:
        text += "; no single change of max_running_requests, mem_fraction_static, the radix cache or context_length fixes it"
    return text


ENGINE: Engine = SGLang()
