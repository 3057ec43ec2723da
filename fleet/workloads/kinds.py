"""Workload kinds: the controller's registry of them. Each kind is one class here: its playbook
model (`kind:` and its fields, checked when the playbook loads) and what the controller does with
a workload of the kind (`WorkloadKind`'s methods: its part of the shard's resolved workload, what
the playbook checks against a server's context, what the plan warns of). `WorkloadModel` lists
them; a new kind is a class and its place there (and, on the host, its entry in the contract's
WORKLOAD_KINDS and the agent's driver: fleet.host.agent.kinds).

Runs on the controller. The prompts are data (fleet.workloads.library); what depends on the
server -- the long-context prompt size, the concurrency levels of `auto` -- is left for the agent
to settle on the host, where the server can be asked.
"""

from __future__ import annotations

import json
import re
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import AfterValidator, BeforeValidator, Field, PrivateAttr, SerializerFunctionWrapHandler, ValidationInfo, model_serializer, model_validator

from fleet.config import HfRepoId, Int, StrictModel
from fleet.host.agent.kinds.long_context import calibration_tolerance
from fleet.host.agent.tools import TOOLS
from fleet.host.contract.results import CLIENTS, FLEET_CLIENT
from fleet.host.agent.kinds.saturation import probes_needed
from fleet.host.agent.stats import min_samples
from fleet.inventory import NAME_PATTERN
from fleet.workloads.datasets import check_dataset, describe, file_sha256, sample_requests
from fleet.workloads.hub import cached_path, fetch_dataset_file
from fleet.workloads.library import corpus_slice, library_prompt, load_data, prompt_names

# Bounds far above any real setting: a value past them is a typo (1e15), not a configuration.
MAX_CONTEXT = 1 << 24
MAX_TIMEOUT_S = 7 * 86400.0


def _prompt_name(value: str) -> str:
    if value not in prompt_names():
        raise ValueError(f"a prompt of fleet's library ({', '.join(prompt_names())})")
    return value


PromptName = Annotated[str, Field(pattern=NAME_PATTERN), AfterValidator(_prompt_name)]


class WorkloadKind(StrictModel):
    """What every kind's model does for the controller (its fields are its own)."""

    @abstractmethod
    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        """The kind's fields of the run's workload as the shard carries it (plain JSON, after
        `name`, `kind` and `max_new_tokens`). `time_scale`: the host's wall seconds per engine second."""

    def resolved_client(self, engine_python: str) -> dict[str, Any] | None:
        """The tool that measures the workload instead of fleet's client, as the agent runs it
        (fleet.host.agent.kinds.tool); None: fleet's client. `engine_python`: the interpreter the
        host runs the server's engine with, the tool's where the workload names none."""
        return None

    def fixed_input_tokens(self) -> int | None:
        """The prompt tokens of every request, where the kind fixes them (`input_tokens`): with
        max_new_tokens they must fit a server's context. None: the prompt's length is the host's."""
        return None

    def comparability_warning(self, name: str, context_len: int, kv_tokens: int) -> str | None:
        """Why a run of this workload will be `not_comparable` on a server of this context and KV
        pool, known before it starts; None: nothing known."""
        return None


# Workload defaults send enough requests for a p90 (10: fleet.host.agent.stats states the rule).
class ShortWorkload(WorkloadKind):
    kind: Literal["short"]
    prompts: list[PromptName] = Field(min_length=1, description="names from fleet's prompt library (fib, qsort, arith, json, ...)")
    max_new_tokens: Int = Field(default=256, ge=1, le=MAX_CONTEXT)
    requests: Int | None = Field(default=None, ge=1, le=100_000, description="requests per repeat, in whole rounds of the prompts; default: enough for a p90 (10)")

    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        return {"prompts": [library_prompt(name, each) for each in self.prompts], "rounds": short_rounds(self)}


def short_rounds(workload: ShortWorkload) -> int:
    """Passes over a short workload's prompts per repeat: whole rounds, so that every prompt weighs
    the same, and at least `requests` (default: enough for a p90) requests in all."""
    wanted = workload.requests or min_samples(90)
    return -(-wanted // len(workload.prompts))


class LongContextWorkload(WorkloadKind):
    kind: Literal["long_context"]
    prompt_tokens: Int = Field(ge=1, le=MAX_CONTEXT, description="target prompt length; shrunk by real token count to fit the context")
    max_new_tokens: Int = Field(default=256, ge=1, le=MAX_CONTEXT)
    margin_tokens: Int = Field(default=64, ge=0, le=MAX_CONTEXT)
    requests: Int = Field(default=10, ge=1, le=100_000, description="requests per repeat; the default is enough for a p90")

    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        spec = load_data("long_context.json")
        return {
            "prompt_tokens": self.prompt_tokens,
            "margin_tokens": self.margin_tokens,
            "requests": self.requests,
            "instruction": spec["instruction"],
            "question": spec["question"],
            "corpus": corpus_slice(self.prompt_tokens),
        }

    def comparability_warning(self, name: str, context_len: int, kv_tokens: int) -> str | None:
        """A prompt that cannot fit the server's context or KV pool is cut on the host (the agent's
        calibration, fleet.host.agent.kinds.long_context): its figures would describe a shorter prompt. SGLang
        takes prompts up to min(context_len, max_total_num_tokens) - 1 tokens."""
        room = min(context_len, kv_tokens) - 1
        fits = room - self.max_new_tokens - self.margin_tokens
        if self.prompt_tokens - fits <= calibration_tolerance(self.prompt_tokens):
            return None
        return f"{name} will be not_comparable: its {self.prompt_tokens}-token prompt is cut to about {max(fits, 0)} (the server takes {room} tokens: context {context_len}, KV pool {kv_tokens})"


class ConcurrencyWorkload(WorkloadKind):
    kind: Literal["concurrency"]
    levels: Literal["auto"] | list[Annotated[Int, Field(ge=1, le=1 << 16)]] = Field(default="auto", description="`auto`: 1, 2, 4, ... up to the server's effective max_running_requests")
    prompt: PromptName = "qsort"
    max_new_tokens: Int = Field(default=256, ge=1, le=MAX_CONTEXT)
    requests_per_level: Int | None = Field(default=None, ge=1, le=100_000, description="default: enough for a p90 (10) and 2 x the level (fleet.host.agent.driver.requests_at_level)")

    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        return {"levels": self.levels, "prompt": library_prompt(name, self.prompt), "requests_per_level": self.requests_per_level}


class AgenticWorkload(WorkloadKind):
    kind: Literal["agentic"]
    turns: Int = Field(default=6, ge=1, le=1000)
    sessions: Int = Field(default=2, ge=1, le=1000, description="conversations side by side; 2 x 6 turns: enough for a p90")
    max_new_tokens: Int = Field(default=256, ge=1, le=MAX_CONTEXT)

    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        spec = load_data("agentic.json")
        tools = "\n".join(json.dumps(tool, sort_keys=True) for tool in spec["tools"])
        return {
            "turns": self.turns,
            "sessions": self.sessions,
            "chat": spec["chat"],
            "system": spec["system"].replace("{tools}", tools),
            "tasks": spec["tasks"],
            "tool_results": [json.dumps(result, sort_keys=True) for result in spec["tool_results"]],
        }


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s)\s*$")


def _duration_s(value: object) -> float:
    """An SLO's duration from `200ms` or `1.5s`: a bare number is refused, since milliseconds
    (vllm bench serve's --goodput) and seconds (fleet's results) are both at home here."""
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError("a duration with its unit, e.g. 200ms or 1.5s")
    seconds = float(match.group(1)) / (1000.0 if match.group(2) == "ms" else 1.0)
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"a duration above 0 and at most {MAX_TIMEOUT_S:.0f}s")
    return seconds


Duration = Annotated[float, BeforeValidator(_duration_s)]


class Slo(StrictModel):
    """Latency targets a request must all meet to count towards goodput (vllm bench serve --goodput:
    TTFT, TPOT, E2E latency); each with its unit (`500ms`, `2s`)."""

    ttft: Duration | None = None
    tpot: Duration | None = None
    e2e: Duration | None = None

    @model_validator(mode="after")
    def _some(self) -> Slo:
        if self.ttft is None and self.tpot is None and self.e2e is None:
            raise ValueError("at least one of `ttft`, `tpot`, `e2e`")
        return self


Rate = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]


class Search(StrictModel):
    """A saturation search: within one server start, short open-loop probes at rates chosen by
    bisection (fleet.host.agent.kinds.saturation) find the highest rate at which `target` of a
    probe's requests meet every SLO, as `vllm bench sweep` and GuideLLM's sweep search for it."""

    target: float = Field(default=0.9, gt=0, le=1, allow_inf_nan=False, description="share of a probe's requests that must meet every SLO (vllm's goodput counts them)")
    rates: tuple[Rate, Rate] = Field(description="the range searched, [lowest, highest] requests per second")
    tolerance: float = Field(default=0.05, gt=0, lt=1, allow_inf_nan=False, description="the search stops once the highest passing and lowest failing rates are this close (relative)")
    max_probes: Int = Field(default=8, ge=2, le=16, description="probes at most; each sends the workload's requests once")

    @model_validator(mode="after")
    def _reachable(self) -> Search:
        low, high = self.rates
        if not low < high:
            raise ValueError(f"`rates` as [lowest, highest] with lowest below highest, not [{low:g}, {high:g}]")
        needed = probes_needed(low, high, self.tolerance)
        if needed > self.max_probes:
            raise ValueError(f"`max_probes` of at least {needed}: a search of [{low:g}, {high:g}] to a tolerance of {self.tolerance:g} may take {needed} (or a narrower range, a wider tolerance)")
        return self


class Load(StrictModel):
    """Open-loop arrivals: requests sent at `rate` per second whether or not earlier ones have
    finished, with gamma-distributed gaps (shape `burstiness`; 1 is a Poisson process), as
    vllm bench serve's --request-rate and --burstiness define them."""

    rate: Rate = Field(description="requests per second (finite, above 0); with a `search`, its first probe's rate")
    burstiness: float = Field(default=1.0, gt=0, le=1e3, description="gamma shape of the gaps: 1 Poisson, < 1 burstier, > 1 steadier")
    max_in_flight: Int | None = Field(default=None, ge=1, le=1 << 16, description="a cap on requests in flight; none by default")
    warmup_requests: Int = Field(default=0, ge=0, le=10_000, description="sent one at a time first, and left out of every figure")
    seed: Int = Field(default=0, ge=0, le=2**32 - 1)
    search: Search | None = Field(default=None, description="find the highest rate within the workload's `slo` instead of running at `rate` only")

    @model_serializer(mode="wrap")
    def _without_unset_search(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A load without a search dumps as it did before there were searches: a run's id hashes it.
        data: dict[str, Any] = handler(self)
        if data.get("search", ...) is None:
            del data["search"]
        return data

    @model_validator(mode="after")
    def _rate_in_range(self) -> Load:
        if self.search is not None and not self.search.rates[0] <= self.rate <= self.search.rates[1]:
            raise ValueError(f"`rate` (the search's first probe) within `search.rates` [{self.search.rates[0]:g}, {self.search.rates[1]:g}], not {self.rate:g}")
        return self


def _search_has_slo(load: Load | None, slo: Slo | None) -> None:
    """A search looks for the highest rate within the SLO: without one it has nothing to meet."""
    if load is not None and load.search is not None and slo is None:
        raise ValueError("an `slo` beside `load.search` (the targets the search keeps within)")


def _arrivals(load: Load | None, time_scale: float) -> dict[str, Any] | None:
    """Open-loop arrivals as the agent schedules them. `time_scale`: wall seconds per engine second
    (a sim host's sim_speed), so that a rate means the same in results, which are in engine time."""
    if load is None:
        return None
    return {**load.model_dump(), "time_scale": time_scale}


def _slo(slo: Slo | None) -> dict[str, float] | None:
    """SLOs in seconds, under vllm's metric names (ttft, tpot, e2el), only those set."""
    if slo is None:
        return None
    return {name: value for name, value in (("ttft", slo.ttft), ("tpot", slo.tpot), ("e2el", slo.e2e)) if value is not None}


_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _commit(value: str) -> str:
    if not _COMMIT.match(value):
        raise ValueError(f"a commit id (40 hex digits), not {value!r}: a branch or tag moves, and a run's id must mean one sample (the hub shows a file's commit in its history)")
    return value


def _path_in_repo(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"a file's path inside the repo (`data/question.jsonl`), not {value!r}")
    return value


# In a validation's context (fleet.playbook.load_playbook): the playbook file's folder.
PLAYBOOK_DIR = "playbook_dir"


def dataset_path(file: str, context: Any) -> Path:
    """Where a dataset `file` is: a relative one beside the playbook that names it when it is there
    (as a user reads the playbook), else from the current folder (where it was always looked for);
    `file` itself stays as written, so a run's id does not depend on where fleet runs."""
    path = Path(file).expanduser()
    base = context.get(PLAYBOOK_DIR) if isinstance(context, dict) else None
    if not path.is_absolute() and base is not None and (Path(base) / path).is_file():
        return Path(base) / path
    return path


class HubDataset(StrictModel):
    """A dataset file from a Hugging Face hub dataset repo at one commit (fleet.workloads.hub)."""

    repo: HfRepoId = Field(description="the dataset repo's id, e.g. nvidia/SPEED-Bench")
    revision: Annotated[str, AfterValidator(_commit)] = Field(description="the commit (40 hex digits) the file is taken at")
    path: Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_path_in_repo)] = Field(description="the file inside the repo, e.g. qualitative.jsonl")


def _tool_name(value: str) -> str:
    if value not in TOOLS:
        raise ValueError(f"a client of {', '.join(CLIENTS)}")
    return value


class ClientTool(StrictModel):
    """One of the field's load generators as a workload's client (fleet.host.agent.tools): run on
    the host by `python` with the workload's lengths, requests and arrivals (a dataset workload's
    samples, as fleet's client would send them, written in the tool's own format; a sample the tool
    cannot send as it is is refused, naming why); its own output file is read into the run's result, which names
    it (`client`). fleet installs nothing: the preflight fails on a host whose interpreter cannot
    import it."""

    tool: Annotated[str, AfterValidator(_tool_name)] = Field(description=f"the tool: {', '.join(TOOLS)}")
    python: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="the interpreter on the host that has the tool; default: the one the host runs the engine with (engine.python, or engine.vllm.python for vLLM)",
    )
    tokenizer: str | None = Field(
        default=None, min_length=1, max_length=4096, description="a tokenizer folder on the host the tool sizes prompts with; default: the tool's own (the served model's name)"
    )


def _client(value: Any) -> Any:
    """`client: bench_serving` is short for `client: {tool: bench_serving}`; `fleet` is fleet's own client."""
    if value == FLEET_CLIENT:
        return None
    return {"tool": value} if isinstance(value, str) else value


class MeasuredByTool(WorkloadKind):
    """A kind whose workload may name a client tool (`client`) to send its requests instead of
    fleet's client: the field and the checks of what the tool can send, in one place."""

    client: Annotated[ClientTool | None, BeforeValidator(_client)] = Field(
        default=None, description=f"who sends the requests and measures them: {', '.join(CLIENTS)} (default fleet), or {{tool, python, tokenizer}}"
    )

    @model_serializer(mode="wrap")
    def _without_fleets_client(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # fleet's own client dumps as a workload did before there were others: a run's id hashes it.
        data: dict[str, Any] = handler(self)
        if data.get("client", ...) is None:
            del data["client"]
        return data

    def resolved_client(self, engine_python: str) -> dict[str, Any] | None:
        if self.client is None:
            return None
        return {"tool": self.client.tool, "python": self.client.python or engine_python, "tokenizer": self.client.tokenizer}

    def _tool_can_send(self, load: Load | None, samples: Sequence[tuple[str, int]] = ()) -> None:
        """Refuse, at plan time, what the named tool cannot send as fleet's client would: the load,
        and a dataset workload's `samples` (prompt, output tokens) the tool would not send as they are."""
        tool = TOOLS[self.client.tool] if self.client is not None else None
        if tool is None:
            return
        refusal = tool.dataset_refusal(samples) if samples else None
        if refusal is not None:
            raise ValueError(f"`client` {FLEET_CLIENT} (which sends each sample as it is) for this sample, not {tool.name}: {refusal}")
        if load is not None:
            if load.search is not None:
                raise ValueError(f"`load.search` with fleet's client only: a saturation search chooses each probe's rate from the probes before, which {tool.title} does not")
            if load.burstiness != 1 and not tool.gamma_arrivals:
                raise ValueError(f"`load.burstiness` of 1 with client {tool.name}: {tool.title} sends Poisson arrivals only, not gamma gaps of shape {load.burstiness:g}")
            if load.warmup_requests and not tool.warmup:
                raise ValueError(f"`load.warmup_requests` of 0 with client {tool.name}: {tool.title} has no warm-up by request count")


class DatasetWorkload(MeasuredByTool):
    """Prompts sampled from a dataset file in its publisher's format (fleet.workloads.datasets): a
    file on this machine, or one of a hub dataset repo at a commit, fetched once into the
    controller's cache (fleet.workloads.hub); either way the sample is shipped with the sweep."""

    kind: Literal["dataset"]
    file: str | None = Field(default=None, min_length=1, max_length=4096, description="a dataset file on this machine, shipped with the sweep (or `hub`)")
    hub: HubDataset | None = Field(default=None, description="a file of a Hugging Face hub dataset repo at a commit (or `file`); HF_TOKEN in the environment for a gated one")
    format: Literal["sharegpt", "spec_bench", "mt_bench", "speed_bench", "gsm8k", "humaneval", "mbpp", "jsonl"]
    # Filled from the file when not given (a before-validator): the run id then changes with the
    # file's contents, and a pinned value is checked against it.
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    categories: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(default=None, min_length=1, description="only these categories (the dataset must have them)")
    requests: Int | None = Field(default=None, ge=1, le=1_000_000, description="requests sampled per repeat (sent once per probe of a `load.search`); default: every sample once")
    seed: Int = Field(default=0, ge=0, le=2**32 - 1)
    max_new_tokens: Int = Field(default=256, ge=1, le=MAX_CONTEXT, description="output length; a sample's own (ShareGPT reply, output_len) is capped by it")
    load: Load | None = Field(default=None, description="open-loop arrivals; without it requests go one at a time")
    slo: Slo | None = None

    _file_path: Path | None = PrivateAttr(default=None)  # `file` as found (see dataset_path)

    @model_validator(mode="before")
    @classmethod
    def _hash_the_file(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and data.get("sha256") is None and isinstance(data.get("file"), str):
            digest = file_sha256(dataset_path(data["file"], info.context))
            if digest is not None:
                return {**data, "sha256": digest}
        return data

    @model_validator(mode="after")
    def _readable(self, info: ValidationInfo) -> DatasetWorkload:
        if self.file is not None:
            self._file_path = dataset_path(self.file, info.context)
        if (self.file is None) == (self.hub is None):
            raise ValueError("one of `file` (a dataset file on this machine) or `hub` (a hub dataset repo's file at a commit)")
        _search_has_slo(self.load, self.slo)
        self._tool_can_send(self.load)
        if self.hub is not None:
            try:
                path = fetch_dataset_file(self.hub.repo, self.hub.revision, self.hub.path)
            except ValueError as exc:
                raise ValueError(f"`hub`: {exc}") from None
            # The file's hash, as for a local one: a pinned `sha256` is checked against it.
            object.__setattr__(self, "sha256", self.sha256 or file_sha256(path))
        check_dataset(self)
        if self.client is not None:  # the samples as the agent will give them to the tool (ToolLoad.dataset)
            self._tool_can_send(None, [(s.prompt, s.output_tokens or self.max_new_tokens) for s in sample_requests(self)])
        return self

    @property
    def source(self) -> Path:
        """The file the samples are read from: `file`, or the hub file in the controller's cache."""
        if self.hub is not None:
            return cached_path(self.hub.repo, self.hub.revision, self.hub.path)
        assert self._file_path is not None  # one of the two: _readable
        return self._file_path

    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        samples = sample_requests(self)
        return {
            "dataset": describe(self, samples),
            "samples": [{"prompt": s.prompt, "category": s.category, "output_tokens": s.output_tokens} for s in samples],
            "load": _arrivals(self.load, time_scale),
            "slo": _slo(self.slo),
        }


class RandomWorkload(MeasuredByTool):
    """Random token ids of exactly `input_tokens` and outputs of exactly `max_new_tokens` (ignore_eos),
    as `sglang.bench_serving --dataset-name random --random-range-ratio 1` defines them."""

    kind: Literal["random"]
    input_tokens: Int = Field(ge=1, le=MAX_CONTEXT)
    max_new_tokens: Int = Field(ge=1, le=MAX_CONTEXT)
    requests: Int = Field(default=min_samples(90), ge=1, le=1_000_000, description="requests per repeat (per probe of a `load.search`); the default is enough for a p90")
    seed: Int = Field(default=0, ge=0, le=2**32 - 1)
    load: Load | None = Field(default=None, description="open-loop arrivals; without it requests go one at a time")
    slo: Slo | None = None

    def resolved(self, name: str, time_scale: float) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "requests": self.requests,
            "seed": self.seed,
            "load": _arrivals(self.load, time_scale),
            "slo": _slo(self.slo),
        }

    @model_validator(mode="after")
    def _searchable(self) -> RandomWorkload:
        _search_has_slo(self.load, self.slo)
        self._tool_can_send(self.load)
        return self

    def fixed_input_tokens(self) -> int | None:
        return self.input_tokens


# The registry: every kind, once. A playbook's `kind:` picks its model (pydantic's discriminator).
WorkloadModel = Union[ShortWorkload, LongContextWorkload, ConcurrencyWorkload, AgenticWorkload, DatasetWorkload, RandomWorkload]
Workload = Annotated[WorkloadModel, Field(discriminator="kind")]
KINDS: dict[str, type[WorkloadKind]] = {get_args(model.model_fields["kind"].annotation)[0]: model for model in get_args(WorkloadModel)}
