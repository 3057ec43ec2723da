"""Every text fleet can produce that names engine flags (issue 26, Must-show 4), from its real
producers, and the argv fragments in each.

The producers, driven over the failure catalogue's classes and over representative inputs:
- the diagnosis (`fleet.host.diagnose`): every real log under tests/fixtures (and ../shared/sample-logs
  where the checkout has it), plus start logs written with the simulator's text of each release for the
  cases no real log shows (a KV pool of 0 tokens; two requests that exceeded the context differently),
  each diagnosed as from each SGLang release fleet knows: the fix and every finding's advice;
- every fix template of the catalogue, filled with the figures of each real diagnosis that has them all;
- the automatic fixes (`fleet.fixes.autofix.propose_fix`) for every failure class, with the figures of
  each diagnosed log of that class and none, attempts 1 and 2, on each release: the description,
  the change, and the launch of the variant fleet would run;
- the feasibility verdicts (`fleet.fixes.feasibility.check_config`) of those configurations and variants;
- the plan's notes and skip reasons (`fleet.plan.make_plan`) for the shipped playbooks on hosts of each
  release and of several GPU sizes.
No text is written here: what a producer changes shows up in the corpus.

A fragment is one flag with the value the text gives it (`--context-length 8192`, `--x=y`, `lower --y to
at most N`, `--z (e.g. 16)`), or alone. A flag that no SGLang release fleet knows has, but a vLLM release
has, is vLLM's (the catalogue speaks of both engines); fleet's own command-line options are not engine flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import typer.main
import yaml

from fleet.cli import app
from fleet.fixes.autofix import propose_fix
from fleet.fixes.feasibility import check_config
from fleet.host.diagnose import Diagnosis, DiagnosisHint, diagnose_file, diagnose_text
from fleet.host.diagnose.catalogue import SERVER_START_TIMEOUT_FIXES, SIGNATURES, STALLED_START_FIXES, STARTUP_INCOMPLETE_FIXES, fill_fix
from fleet.host.engines import engine
from fleet.host.engines.sglang import flags as sglang_flags
from fleet.host.engines.sglang.args import fleet_values, resolve_server_args
from fleet.host.engines.sglang.logformats import log_formats
from fleet.host.engines.sglang.release import KNOWN_RELEASES
from fleet.host.engines.sim import sgltext
from fleet.host.engines.vllm import flags as vllm_flags
from fleet.host.failures import FailureClass
from fleet.host.modelcard import load_model_card
from fleet.inventory import EngineKind, EngineSpec, GpuSpec, Host
from fleet.launch import launch_spec
from fleet.plan import make_plan
from fleet.playbook import Limits, Playbook, Run, ServerConfig, expand_runs, load_playbook

ROOT = Path(__file__).resolve().parents[2]
LOG_DIRS = (ROOT / "tests" / "fixtures", ROOT.parent / "shared" / "sample-logs")
GPU_MIB = 97887  # RTX PRO 6000 Blackwell, the seed campaign's GPU
GPU_ARCH = "sm_120"
HOST_GPUS = {"NVIDIA RTX PRO 6000 Blackwell Server Edition": (1, 2, 8), "NVIDIA L40S": (1,)}


@dataclass(frozen=True)
class Advice:
    source: str  # the producer and its input
    release: str  # the SGLang release it was produced for
    text: str
    launch: tuple[str, ...] = ()  # a whole command line fleet would run (its text is for reading)
    fork: str | None = None  # produced for a host whose SGLang is this fork (DDTree): its parser judges


@dataclass(frozen=True)
class Fragment:
    advice: Advice
    engine: str  # "sglang" or "vllm"
    argv: tuple[str, ...]  # the flag, and its value where the text gives one


# --- the producers -----------------------------------------------------------------------------------


def log_paths() -> list[Path]:
    """Every real log (server logs, journals) of the fixtures, the shared copies only where they differ."""
    seen: dict[bytes, Path] = {}
    for directory in LOG_DIRS:
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*")):
            if path.is_file() and (path.suffix == ".log" or path.name.endswith(".journal.txt")):
                seen.setdefault(path.read_bytes(), path)
    return list(seen.values())


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else str(path)


# Launches of a dense model that fleet's planner or argument resolution predicts to fail, each its own way.
FAILING_LAUNCHES: dict[str, list[str]] = {
    "weights-leave-no-room": ["--mem-fraction-static", "0.1"],
    "context-above-the-model": ["--context-length", "1000000"],
}


def synthetic_logs(release: str) -> dict[str, list[str]]:
    """Start logs in `release`'s own text (the simulator's) for what no real log shows."""
    text = sgltext.ReleaseText(log_formats(release))
    args = {"model_path": "/models/llama", "context_length": 8192, "mem_fraction_static": 0.3}
    started = [
        text.server_args(args, "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"),
        text.kv_cache_allocated("bfloat16", 6000, 0.37, 0.37),
        text.scheduler_ready(6000, 8192, 16384, 48, 8192, 40.0),
    ]
    logs = {
        # A dense model whose KV pool got no token: "max_running_request is zero" after a pool of 0.
        "zero-kv-pool": [
            started[0],
            text.kv_cache_allocated("bfloat16", 0, 0.0, 0.0),
            *sgltext.init_failure_traceback("scheduler_init", "AssertionError", "max_running_request is zero", release=release),
        ],
        # A prompt above what the KV pool lets a request have, on a server that started.
        "input-above-the-pool": [*started, sgltext.http_error(sgltext.input_too_long(7000, 5999))],
        "torch-oom-serving": [*started, "torch.OutOfMemoryError: " + sgltext.torch_oom(2.5, 94.97, 1.2, 93.1)],
    }
    logs.update(_predicted_failures(release))
    # Two requests refused with different figures, in each order: a fix quotes one of them.
    refusals = {
        "input-too-long": sgltext.http_error(sgltext.input_too_long(9000, 8000)),
        "context-exceeded": sgltext.http_error(sgltext.context_exceeded(4096, 5000, 4900, 100)),
        "input-exceeds-context": sgltext.http_error(sgltext.input_exceeds_context(6000, 2048)),
    }
    for first, second in ((a, b) for a in refusals for b in refusals if a != b):
        logs[f"{first}+{second}"] = [refusals[first], refusals[second]]
    return logs


def _predicted_failures(release: str) -> dict[str, list[str]]:
    """What a start of each FAILING_LAUNCHES prints, as the simulator prints it: the refusal of
    fleet's argument resolution, or the memory planner's failure."""
    dense = load_model_card("llama-3.1-8b-instruct")
    logs = {}
    for name, flags in FAILING_LAUNCHES.items():
        argv = ["--model-path", "/models/llama", *flags]
        resolved = resolve_server_args(fleet_values(sglang_flags.parse_argv(release, argv)), dense, None, {}, 0, release=release)
        if resolved.failure is not None:
            logs[name] = sgltext.args_failure_traceback(resolved.failure.site, resolved.failure.exception, resolved.failure.message)
            continue
        predicted = engine("sglang").predict_start(argv, {}, dense, None, algorithm=None, gpu_memory_mib=GPU_MIB, release=release, fork=None)
        assert predicted.failure is not None, f"{name}: fleet predicts a start ({predicted.reason})"
        failure = predicted.failure
        logs[name] = sgltext.init_failure_traceback(failure.phase, failure.exception, failure.message, release=release)
    return logs


MIXED_REQUEST_LINES = "+"  # synthetic_logs' names of the logs that hold two refused requests


def diagnoses() -> Iterator[tuple[str, str, Diagnosis, list[str] | None]]:
    """(source, release, diagnosis, its lines for a synthetic log) of every log, as from every release."""
    yield from _diagnoses()


@lru_cache(maxsize=1)
def _diagnoses() -> tuple[tuple[str, str, Diagnosis, list[str] | None], ...]:
    """diagnoses(), made once per process: the diagnosis advice, the catalogue's figure sets, the
    fixes' figures and the fix-quoting test each read every one of them (920 logs x 2 releases,
    13 s each time at load 15), and a diagnosis depends on nothing but its log and its release."""
    out = []
    for release in KNOWN_RELEASES:
        hint = DiagnosisHint(sglang_version=release)
        for path in log_paths():
            out.append((f"diagnose:{_relative(path)}", release, diagnose_file(path, hint), None))
        for name, lines in synthetic_logs(release).items():
            out.append((f"diagnose:synthetic:{name}", release, diagnose_text(lines, name, hint), lines))
    return tuple(out)


def diagnosis_advice() -> list[Advice]:
    out = []
    for source, release, diagnosis, _ in diagnoses():
        texts = [diagnosis.fix, *(finding.advice for finding in diagnosis.findings)]
        out += [Advice(source, release, text) for text in texts if text]
    return out


@lru_cache(maxsize=1)
def _figure_sets() -> tuple[tuple[str, dict[str, object]], ...]:
    return tuple((f"{source}", dict(d.figures)) for source, release, d, _ in diagnoses() if release == KNOWN_RELEASES[-1] and d.figures)


def catalogue_advice() -> list[Advice]:
    """Each template on its own, filled with every real figure set that has all its fields."""
    templates = [(signature.name, template) for signature in SIGNATURES for template in signature.fixes]
    for name, group in (("server_start_timeout", SERVER_START_TIMEOUT_FIXES), ("stalled_start", STALLED_START_FIXES), ("startup_incomplete", STARTUP_INCOMPLETE_FIXES)):
        templates += [(name, template) for template in group]
    out = []
    for release in KNOWN_RELEASES:
        for index, (name, template) in enumerate(templates):
            for source, figures in (("no figures", {}), *_figure_sets()):
                try:
                    text = fill_fix((template,), figures, release)
                except ValueError:
                    continue  # a figure this template needs is not in this set
                out.append(Advice(f"catalogue:{name}#{index} with {source}", release, text))
    return out


def _seed_playbook(**server: Any) -> Playbook:
    data = yaml.safe_load((ROOT / "playbooks" / "qwen36-specdec.yaml").read_text())
    data["tp"] = [1]
    data["server"].update(max_running_requests=8, flags={"mamba-full-memory-ratio": 0.5})
    data["server"].update(server)
    return Playbook.model_validate(data)


def _dense_playbook() -> Playbook:
    return Playbook.model_validate(
        {
            "name": "dense",
            "model": {"repo": "meta-llama/Llama-3.1-8B-Instruct", "card": "llama-3.1-8b-instruct"},
            "methods": {"autoregressive": {}},
            "tp": [1],
            "server": {"context_length": 131072, "mem_fraction_static": 0.88, "max_running_requests": 64},
            "workloads": {"short": {"kind": "short", "prompts": ["fib"], "max_new_tokens": 128}, "long_context": {"kind": "long_context", "prompt_tokens": 100000, "max_new_tokens": 256}},
        }
    )


def fix_runs() -> list[Run]:
    """One run per configuration and workload kind: the seed's hybrid model with and without its card
    and the radix cache, and a dense model."""
    playbooks = [_seed_playbook(), _seed_playbook(disable_radix_cache=False), _dense_playbook()]
    uncarded = yaml.safe_load((ROOT / "playbooks" / "qwen36-specdec.yaml").read_text())
    del uncarded["model"]["card"]
    uncarded["tp"] = [1]
    playbooks.append(Playbook.model_validate(uncarded))
    runs: dict[tuple[int, str | None, str], Run] = {}
    for index, playbook in enumerate(playbooks):
        for run in expand_runs(playbook):
            if type(run.workload).__name__ in ("ShortWorkload", "LongContextWorkload"):
                runs.setdefault((index, run.server.algorithm, type(run.workload).__name__), run)
    return list(runs.values())


# The diagnosis figures propose_fix reads (fleet/fixes/autofix.py's docstring): logs that differ
# only in others give it the same input.
_FIX_FIGURES = (
    "context_len", "total_tokens", "input_tokens", "max_new_tokens", "max_allowed", "requested_context", "derived_context",
    "requested_max_running_requests", "mem_fraction_static", "capture_step", "capture_error", "cuda_graph_max_bs", "port",
)  # fmt: skip


def _numbers_by_class() -> dict[str, list[tuple[str, dict[str, object]]]]:
    by_class: dict[str, dict[tuple[object, ...], tuple[str, dict[str, object]]]] = {}
    for source, release, diagnosis, _ in diagnoses():
        if release == KNOWN_RELEASES[-1] and diagnosis.failure_class:
            key = tuple(diagnosis.figures.get(name) for name in _FIX_FIGURES)
            by_class.setdefault(diagnosis.failure_class, {}).setdefault(key, (source, dict(diagnosis.figures)))
    return {name: list(found.values()) for name, found in by_class.items()}


def _launch_argv(config: ServerConfig, release: str) -> list[str]:
    spec = launch_spec(EngineKind.sglang, config, python="python3", model_path="/models/target", draft_path="/models/draft" if config.draft else None, port=30000, engine_version=release)
    return spec.argv[3:]


def fork_of_algorithm(algorithm: str | None) -> str | None:
    """The fork a configuration needs (DDTREE: the DDTree fork), None for upstream SGLang."""
    return next((fork for fork, algorithms in sglang_flags.FORK_ALGORITHMS.items() if algorithm in algorithms), None)


def fix_advice() -> list[Advice]:
    """propose_fix for every class x figures x attempt x run, and the verdict on each configuration."""
    out = []
    numbers = _numbers_by_class()
    limits = Limits(max_fix_attempts=2)
    for release in KNOWN_RELEASES:
        checked: set[str] = set()
        for run in fix_runs():
            fork = fork_of_algorithm(run.server.algorithm)
            verdict = check_config(run.server, engine="sglang", gpu_memory_mib=GPU_MIB, engine_version=release, fork=fork)
            out.append(Advice(f"feasibility:{run.server.label}", release, verdict.reason, fork=fork))
            out += [Advice(f"feasibility:{run.server.label}:suggestion", release, a.reason, fork=fork) for a in verdict.suggestion or ()]
            for failure_class in FailureClass:
                for figures_source, figures in [("no figures", {}), *numbers.get(failure_class.value, [])]:
                    for attempt in (1, 2):
                        fix = propose_fix(
                            run.server, run, failure_class.value, figures, attempt,
                            gpu_memory_mib=GPU_MIB, engine_version=release, limits=limits, gpu_arch=GPU_ARCH, engine_fork=fork or "upstream",
                        )  # fmt: skip
                        if fix is None:
                            continue
                        where = f"autofix:{failure_class.value}:{run.label}:attempt {attempt}:{figures_source}"
                        out += [Advice(where, release, fix.description, fork=fork), Advice(f"{where}:change", release, str(fix.provenance["fix"]), fork=fork)]
                        if fix.new_config is not None and fix.new_config.id not in checked:
                            checked.add(fix.new_config.id)
                            argv = _launch_argv(fix.new_config, release)
                            out.append(Advice(f"{where}:variant launch", release, " ".join(argv), tuple(argv), fork=fork))
                            variant = check_config(fix.new_config, engine="sglang", gpu_memory_mib=GPU_MIB, engine_version=release, fork=fork)
                            out.append(Advice(f"{where}:variant feasibility", release, variant.reason, fork=fork))
    return out


def plan_advice() -> list[Advice]:
    out = []
    for release in KNOWN_RELEASES:
        for model, counts in HOST_GPUS.items():
            for gpus in counts:
                host = Host(name="h", address="10.0.0.1", gpus=GpuSpec(count=gpus, model=model), engine=EngineSpec(kind=EngineKind.sglang, release=release))
                for path in sorted((ROOT / "playbooks").glob("*.yaml")):
                    for server in make_plan(load_playbook(path), [host]).servers:
                        where = f"plan:{path.name}:{gpus}x {model}:{server.config.label}"
                        fork = None if server.launch.upstream else fork_of_algorithm(server.config.algorithm)
                        out += [Advice(where, release, note, fork=fork) for note in server.launch.notes]
                        if server.skip_reason:
                            out.append(Advice(where, release, server.skip_reason, fork=fork))
    return out


def every_advice() -> list[Advice]:
    return [*diagnosis_advice(), *catalogue_advice(), *fix_advice(), *plan_advice()]


# --- the fragments -------------------------------------------------------------------------------------

# A flag, then its value: `=value`, or a number after connecting words ("to at most 8192", "above 0.912",
# "(e.g. 16)"). "by 0.03-0.05" is a step, not a value, and ends the fragment.
# A flag in a text, with its value where one follows. Not one opened by a quote: a fix quotes what a
# log refused (catalogue arguments_refused: "vllm refused '--omni'"), which is no setting it advises.
_FRAGMENT = re.compile(
    r"(?<![\w'-])(?P<flag>--[a-z][a-z0-9-]*)"
    r"(?:=(?P<assigned>[^\s,;)]+)|\s+(?:(?:to|at|most|above|below|\(e\.g\.)\s+)*(?P<value>-?\d+(?:\.\d+)?)(?![\w.-]))?"
)


@lru_cache(maxsize=1)
def fleet_options() -> frozenset[str]:
    """fleet's own command-line options (`--no-memory-check`): named in its advice, not an engine's."""
    options: set[str] = set()

    def walk(command: Any) -> None:
        for param in getattr(command, "params", ()):
            options.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return frozenset(options)


@lru_cache(maxsize=1)
def _sglang_options() -> frozenset[str]:
    return frozenset(option for release in KNOWN_RELEASES for option in sglang_flags.load_table(release).option_strings)


@lru_cache(maxsize=1)
def _vllm_options() -> frozenset[str]:
    return frozenset(option for release in vllm_flags.KNOWN_RELEASES for option in vllm_flags.load_table(release).option_strings)


def fragments(advice: Advice) -> list[Fragment]:
    if advice.launch:
        return [Fragment(advice, "sglang", advice.launch)]
    out = []
    for match in _FRAGMENT.finditer(advice.text):
        flag = match["flag"]
        if flag in fleet_options() and flag not in _sglang_options():
            continue
        # argparse's own help action, in every release's parser: advice that names it ("`{prog} --help`
        # lists them", the catalogue's refused-arguments fix) tells the user to read the help and sets
        # nothing; parsed, it prints the usage and exits 0 (a parser's answer, not a setting's).
        if flag == "--help":
            continue
        engine = "vllm" if flag not in _sglang_options() and flag in _vllm_options() else "sglang"
        value = match["assigned"] or match["value"]
        out.append(Fragment(advice, engine, (flag, value) if value is not None else (flag,)))
    return out


def every_fragment(advice: list[Advice]) -> list[Fragment]:
    return [fragment for item in advice for fragment in fragments(item)]
