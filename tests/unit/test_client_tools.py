"""The field's load generators as a workload's client (issue 22; fleet.host.agent.tools): their
readers on the tools' real output files (tests/fixtures/loadgen, see its README), their command
lines, the playbook's refusals, the preflight's probe of the interpreter, the result's `client`
and the report keeping clients apart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.config import ConfigError
from fleet.facts.models import FactsRequest, HostFacts
from fleet.host.agent.client import Client, Endpoint
from fleet.host.agent.drive import drive
from fleet.host.agent.driver import Driver, Gate, ServerFacts
from fleet.host.agent.outcome import WorkloadOutcome
from fleet.host.agent.kinds.tool import tool_load
from fleet.host.agent.results import request_figures
from fleet.host.agent.client import RequestOutcome
from fleet.host.agent.tools import TOOLS, ToolLoad, ToolOutput, ToolTarget, bench_serving_argv, guidellm_scenario, in_sample_order, probe_argv, read_probe
from fleet.host import nodeprep
from fleet.host.contract import RunResult, RunStatus
from fleet.host.contract.nodeprep import REFUSED_EXIT, NodePrep, NodeRequirements, load_node_preps
from fleet.host.contract.results import CLIENTS, FLEET_CLIENT
from fleet.host.contract.shard import AgentLimits, RunSpec
from fleet.host.errors import ContractError
from fleet.host.engines.sim.harness import SimProcess, start_sim
from fleet.host.failures import FailureClass
from fleet.inventory import Host
from fleet.playbook import expand_runs, load_playbook
from fleet.provision.preflight import PreflightRequirements, Verdict, run_preflight
from fleet.provision.provision import probe_client_tools
from fleet.report import load_sweep, render, report_of
from fleet.report.model import GroupKey, build_report, make_cells
from fleet.slurm.nodeprep import client_tools_of, requirements
from fleet.transport.local import LocalTransport
from fleet.workloads import resolve_workload
from tests.interpreters import bare_python
from tests.testfleet.gpu_tools import local_gpu_env
from tests.unit.fake_hosts import make_host

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "loadgen"
REPORT_SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "sweep"
# The load every fixture was captured with (tests/fixtures/loadgen/README.md).
REQUESTS, PROMPT, OUTPUT = 6, 64, 16


def fixture_folder(tool: str, tmp_path: Path) -> Path:
    """The tool's output folder as the tool left it (vllm bench serve's result file is stored under its tool's name)."""
    if tool == "vllm_bench_serve":
        (tmp_path / "out").mkdir()
        shutil.copy(FIXTURES / "vllm_result.json", tmp_path / "out" / "result.json")
        return tmp_path / "out"
    return FIXTURES / tool


@pytest.mark.parametrize("tool", list(TOOLS))
def test_each_reader_turns_the_tools_real_output_into_its_requests(tool: str, tmp_path: Path) -> None:
    output = TOOLS[tool].read(fixture_folder(tool, tmp_path), 1000.0)
    assert len(output.requests) == REQUESTS
    assert all(r.ok and r.prompt_tokens == PROMPT and r.output_tokens == OUTPUT for r in output.requests), output.requests
    assert all(r.ttft_s is not None and r.e2e_s is not None and 0 < r.ttft_s < r.e2e_s < 1 for r in output.requests)
    figures = request_figures(output.requests, output.wall_s)
    assert figures["output_tokens"] == REQUESTS * OUTPUT
    # fleet's output tok/s over the tool's duration (first request to last response, as fleet's own
    # sections are timed) is the tool's own figure where the tool divides by that duration too;
    # AIPerf divides by its profiling phase's window (aiperf/metrics/metric_dicts.py:231-233), which
    # opens before the first request, and GuideLLM's is a mean of its own rate series: within 10 %.
    bound = 0.10 if tool in ("aiperf", "guidellm") else 1e-9
    assert figures["output_tok_s"] == pytest.approx(output.stated["output_tok_s"], rel=bound)
    assert figures["output_tok_s"] == pytest.approx(REQUESTS * OUTPUT / output.wall_s)
    # The TTFT p50 a tool states is numpy's median; fleet's p50 is one of the middle values or between them.
    ttfts = sorted(r.ttft_s for r in output.requests if r.ttft_s is not None)
    assert ttfts[REQUESTS // 2 - 1] <= figures["ttft_s"]["p50"] <= ttfts[REQUESTS // 2]
    assert ttfts[REQUESTS // 2 - 1] <= output.stated["ttft_p50_s"] <= ttfts[REQUESTS // 2] or tool == "guidellm"


def test_itls_are_the_tools_own_where_it_keeps_them_and_none_where_it_does_not(tmp_path: Path) -> None:
    """bench_serving spreads a chunk's gap over its tokens as fleet's client does: one ITL per
    token after the first; GuideLLM keeps only a mean per request, so fleet makes up none."""
    bench = TOOLS["bench_serving"].read(FIXTURES / "bench_serving", 0.0)
    assert all(len(r.itl_s) == OUTPUT - 1 for r in bench.requests)
    # bench_serving writes no latency: a request's end is its TTFT and its ITLs.
    assert bench.requests[0].e2e_s == pytest.approx(bench.requests[0].ttft_s + sum(bench.requests[0].itl_s))
    guide = TOOLS["guidellm"].read(FIXTURES / "guidellm", 0.0)
    assert all(r.itl_s == [] for r in guide.requests)
    assert request_figures(guide.requests, guide.wall_s)["itl_s"] is None


def test_a_broken_output_names_the_file_and_field(tmp_path: Path) -> None:
    row = json.loads((FIXTURES / "bench_serving" / "result.jsonl").read_text().splitlines()[-1])
    row["ttfts"] = row["ttfts"][:-1]
    (tmp_path / "result.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"result.jsonl: `ttfts` should be a list of 6 entries"):
        TOOLS["bench_serving"].read(tmp_path, 0.0)
    summary = json.loads((FIXTURES / "aiperf" / "profile_export_aiperf.json").read_text())
    summary["time_to_first_token"]["unit"] = "s"
    shutil.copy(FIXTURES / "aiperf" / "profile_export.jsonl", tmp_path)
    (tmp_path / "profile_export_aiperf.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"profile_export_aiperf.json: `benchmark_duration/output_token_throughput/time_to_first_token` should be units sec"):
        TOOLS["aiperf"].read(tmp_path, 0.0)


def test_the_contracts_clients_are_fleets_and_every_tools() -> None:
    assert set(CLIENTS) == {FLEET_CLIENT, *TOOLS}


TARGET = ToolTarget("127.0.0.1", 30000, "served", "generate", "/root/tok")


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_bench_serving_gets_the_workloads_load() -> None:
    one_at_a_time = bench_serving_argv(TARGET, ToolLoad(1024, 128, 32, 1), "/o")
    assert (flag(one_at_a_time, "--request-rate"), flag(one_at_a_time, "--max-concurrency")) == ("inf", "1")
    capped = bench_serving_argv(TARGET, ToolLoad(1024, 128, 32, 1, rate=2.5, max_in_flight=8, warmup_requests=3), "/o")
    assert (flag(capped, "--request-rate"), flag(capped, "--max-concurrency"), flag(capped, "--warmup-requests")) == ("2.5", "8", "3")
    assert (flag(capped, "--random-input-len"), flag(capped, "--random-output-len"), flag(capped, "--random-range-ratio"), flag(capped, "--num-prompts")) == ("1024", "128", "1", "32")
    assert flag(capped, "--backend") == "sglang" and flag(bench_serving_argv(TARGET.__class__("h", 1, "m", "completions"), ToolLoad(1, 1, 1, 1), "/o"), "--backend") == "vllm"
    uncapped = bench_serving_argv(TARGET, ToolLoad(1024, 128, 32, 1, rate=2.5), "/o")
    assert "--max-concurrency" not in uncapped


def test_guidellm_profile_follows_the_load() -> None:
    assert guidellm_scenario(TARGET, ToolLoad(8, 8, 4, 0), "/o")["spec"]["profile"] == {"kind": "synchronous"}
    assert guidellm_scenario(TARGET, ToolLoad(8, 8, 4, 0, rate=float("inf"), max_in_flight=8), "/o")["spec"]["profile"] == {"kind": "concurrent", "streams": 8}
    assert guidellm_scenario(TARGET, ToolLoad(8, 8, 4, 0, rate=3.0, max_in_flight=2), "/o")["spec"]["profile"] == {"kind": "poisson", "rate": [3.0], "max_concurrency": 2}


BOOK = {
    "name": "tools",
    "model": {"repo": "meta-llama/Llama-3.1-8B-Instruct", "card": "llama-3.1-8b-instruct"},
    "methods": {"autoregressive": {}},
    "tp": [1],
    "workloads": {"fixed": {"kind": "random", "input_tokens": 64, "max_new_tokens": 16}},
}


def book(tmp_path: Path, **fixed: Any) -> Path:
    data = json.loads(json.dumps(BOOK))
    data["workloads"]["fixed"].update(fixed)
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("fixed", "message"),
    [
        ({"client": "benchserving"}, r"workloads.fixed.random.client.tool: expected a client of fleet, bench_serving, vllm_bench_serve, aiperf, guidellm, got 'benchserving'"),
        ({"client": {"tool": "aiperf", "pyhton": "/x"}}, r"workloads.fixed.random.client.pyhton"),
        ({"client": "bench_serving", "load": {"rate": 2, "burstiness": 0.5}}, r"`load.burstiness` of 1 with client bench_serving: sglang.bench_serving sends Poisson arrivals only"),
        ({"client": "guidellm", "load": {"rate": 2, "warmup_requests": 2}}, r"`load.warmup_requests` of 0 with client guidellm"),
        (
            {"client": "aiperf", "load": {"rate": 2, "search": {"rates": [1, 4]}}, "slo": {"ttft": "1s"}},
            r"`load.search` with fleet's client only",
        ),
    ],
)
def test_a_client_the_workload_cannot_have_is_refused_naming_file_and_field(tmp_path: Path, fixed: dict[str, Any], message: str) -> None:
    path = book(tmp_path, **fixed)
    with pytest.raises(ConfigError, match=message) as caught:
        load_playbook(path)
    assert str(path) in str(caught.value)


def test_fleets_own_client_keeps_the_run_ids_and_a_tool_resolves_to_the_engines_interpreter(tmp_path: Path) -> None:
    plain = expand_runs(load_playbook(book(tmp_path)))
    named = expand_runs(load_playbook(book(tmp_path, client="fleet")))
    assert [r.id for r in plain] == [r.id for r in named]
    assert "client" not in resolve_workload(plain[0], 1.0, "/opt/engine/bin/python")
    tool = expand_runs(load_playbook(book(tmp_path, client="bench_serving", load={"rate": 4, "max_in_flight": 2})))[0]
    assert tool.id != plain[0].id
    resolved = resolve_workload(tool, 0.5, "/opt/engine/bin/python")
    assert resolved["client"] == {"tool": "bench_serving", "python": "/opt/engine/bin/python", "tokenizer": None}
    # The rate is in engine time: where an engine second takes half a wall second (time_scale 0.5),
    # 4 a second in engine time is 8 a wall second, as fleet's own open loop sends them.
    assert tool_load(resolved, 1) == ToolLoad(64, 16, 10, 1, rate=8.0, max_in_flight=2)


def empty_facts() -> HostFacts:
    return HostFacts(request=FactsRequest(paths={}, engine_python="python3"), gathered_at="2026-12-03T00:00:00Z")


def test_the_preflight_probes_the_interpreter_each_tool_runs_in(tmp_path: Path) -> None:
    """A real probe on this machine: this interpreter finds the sglang wheel's bench_serving (the
    suite installs it), the same interpreter without site-packages finds nothing, and a path that is
    no interpreter gives no answer; the failure names the host, the interpreter and the tool."""
    host = make_host("ct200", kind="sim")
    bare = bare_python(tmp_path)
    workloads = {
        "found": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8, "client": {"tool": "bench_serving", "python": sys.executable}},
        "bare": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8, "client": {"tool": "aiperf", "python": bare}},
        "absent": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8, "client": {"tool": "guidellm", "python": str(tmp_path / "no-python")}},
        "fleets": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8},
    }
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump({**BOOK, "workloads": workloads}))
    probes = {p.workload: p for p in probe_client_tools(LocalTransport(), host, load_playbook(path))}
    assert set(probes) == {"found", "bare", "absent"}
    pytest.importorskip("sglang")
    assert probes["found"].found is True and probes["bare"].found is False and probes["absent"].found is None
    report = run_preflight(empty_facts(), PreflightRequirements(expected_gpu_count=0, client_tools=tuple(probes.values())), host="ct200")
    [check] = [c for c in report.checks if c.rule_id == "client-tools-installed"]
    assert check.verdict is Verdict.fail
    assert f"workload bare: {bare} cannot import aiperf (AIPerf)" in check.message
    assert f"workload absent: {tmp_path / 'no-python'} did not answer" in check.message
    assert "workload found" not in check.message
    assert report.summary().startswith("ct200: preflight failed: ") and "client-tools-installed" in report.summary()
    passing = run_preflight(empty_facts(), PreflightRequirements(expected_gpu_count=0, client_tools=(probes["found"],)))
    assert [c.verdict for c in passing.checks if c.rule_id == "client-tools-installed"] == [Verdict.ok]
    none = run_preflight(empty_facts(), PreflightRequirements(expected_gpu_count=0))
    assert [c.verdict for c in none.checks if c.rule_id == "client-tools-installed"] == [Verdict.skip]


def node_step(tmp_path: Path, workloads: dict[str, Any]) -> tuple[int, NodePrep, NodeRequirements]:
    """A Slurm node's preparation (`python -m fleet.host.nodeprep`, as the batch script runs it) for
    a sweep of `workloads` on a sim cluster: no GPUs, no models, so only the tools' check can fail."""
    tmp_path.mkdir()
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump({**BOOK, "workloads": workloads}))
    cluster = Host.model_validate({"name": "slurm-lab", "kind": "slurm", "address": "login", "engine": {"kind": "sim", "python": sys.executable},
                                   "gpus": {"count": 0}, "slurm": {"shared_dir": str(tmp_path)}})  # fmt: skip
    node = cluster.model_copy(update={"kind": "host", "slurm": None})
    (tmp_path / "node-facts.sh").write_text("true\n")  # a node without GPUs answers nothing the gate needs
    req = NodeRequirements.from_json(requirements(cluster, node, str(tmp_path), [], client_tools_of(node, load_playbook(path))).to_json())
    (tmp_path / "node-requirements.json").write_text(req.to_json())
    task = tmp_path / "task-0"
    task.mkdir()
    (task / "shard.json").write_text(json.dumps({"servers": []}))
    bundle = Path(nodeprep.__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "fleet.host.nodeprep", str(task), str(tmp_path / "node-requirements.json")], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(bundle), "SLURMD_NODENAME": "gpu-node-07", "SLURM_JOB_ID": "42"})  # fmt: skip
    (prep,) = load_node_preps(task)
    return done.returncode, prep, req


def test_a_slurm_node_probes_the_client_tools_as_the_ssh_preflight_does(tmp_path: Path) -> None:
    """The node runs the same probe on its own interpreters before the agent starts: a tool its
    interpreter cannot import refuses the node (as client-tools-installed fails an SSH host's
    preflight), naming the workload, the interpreter and the module; one it finds lets it start."""
    pytest.importorskip("sglang")
    bare = bare_python(tmp_path)
    absent = str(tmp_path / "no-python")
    workloads = {
        "found": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8, "client": {"tool": "bench_serving"}},  # the engine's interpreter
        "bare": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8, "client": {"tool": "aiperf", "python": bare}},
        "absent": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8, "client": {"tool": "guidellm", "python": absent}},
        "fleets": {"kind": "random", "input_tokens": 8, "max_new_tokens": 8},
    }
    code, prep, req = node_step(tmp_path / "refused", workloads)
    assert sorted((u.workload, u.tool, u.python) for u in req.client_tools) == [("absent", "guidellm", absent), ("bare", "aiperf", bare), ("found", "bench_serving", sys.executable)]
    assert code == REFUSED_EXIT and not prep.agent_started and [c.rule_id for c in prep.failures] == ["client-tools-installed"]
    assert f"workload bare: {bare} cannot import aiperf (AIPerf)" in prep.reason()
    assert f"workload absent: {absent} did not answer (exit 127: " in prep.reason() and "workload found" not in prep.reason()
    code, prep, _ = node_step(tmp_path / "fit", {"found": workloads["found"]})
    assert code == 0 and prep.agent_started
    assert [(c.verdict, c.message) for c in prep.checks if c.rule_id == "client-tools-installed"] == [("ok", f"sglang.bench_serving in {sys.executable}")]
    code, prep, _ = node_step(tmp_path / "none", {"fleets": workloads["fleets"]})
    assert code == 0 and [c.verdict for c in prep.checks if c.rule_id == "client-tools-installed"] == ["skip"]


DATASET_ROWS = [  # fleet's `jsonl` format: each prompt as given, its category, its own output length
    {"prompt": "It was the best of times, it was the worst of times.", "category": "prose", "output_len": 5},
    {"prompt": 'Say "hi" \u2014 twice,\nthen stop.', "category": "chat", "output_len": 7},
    {"prompt": "42", "category": "chat"},  # no length of its own: max_new_tokens, as fleet's client sends it
    {"prompt": "it was the age of wisdom", "category": "prose", "output_len": 3},
]


def dataset_book(tmp_path: Path, rows: list[dict[str, Any]] | None = None, **workload: Any) -> Path:
    """A playbook of one `jsonl` dataset workload over `rows` (DATASET_ROWS by default)."""
    file = tmp_path / "prompts.jsonl"
    file.write_text("".join(json.dumps(row) + "\n" for row in (DATASET_ROWS if rows is None else rows)))
    data = {**BOOK, "workloads": {"fixed": {"kind": "dataset", "file": str(file), "format": "jsonl", "max_new_tokens": 6, **workload}}}
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def dataset_workload(tmp_path: Path, client: dict[str, Any], **load: Any) -> dict[str, Any]:
    """The shard's resolved workload of a dataset workload with `client`, as the agent gets it."""
    path = dataset_book(tmp_path, client=client, **({"load": load} if load else {}))
    [run] = expand_runs(load_playbook(path))
    return json.loads(json.dumps(resolve_workload(run, 1.0)))


@pytest.mark.parametrize(
    ("tool", "workload", "message"),
    [
        # DATASET_ROWS' own output lengths, 3 to 7 (7 capped at max_new_tokens 6): bench_serving sends one length for all.
        ("bench_serving", {}, r"takes each output length from its tokenizer's count of a reply turn or one fixed length for all, and this sample has 3 \(3 to 6 tokens\)"),
        ("bench_serving", {"max_new_tokens": 3, "file_rows": [{"prompt": "a b c"}]}, r"fixed output length must be at least 4 \(sglang/benchmark/datasets/custom.py:66-67\), and this sample's is 3"),
        ("aiperf", {"file_rows": [{"prompt": "a b c"}, {"prompt": ""}]}, r"request \d of the sample has an empty prompt, which AIPerf 0.13.0 leaves out of the request"),
        ("guidellm", {"file_rows": [{"prompt": ""}]}, r"request 0 of the sample has an empty prompt, which GuideLLM 0.8.1 refuses to send"),
        (
            "vllm_bench_serve",
            {"file_rows": [{"prompt": "007"}, {"prompt": "42"}]},
            r"every prompt reads as a number, which vllm's custom dataset \(pandas.read_json, datasets.py:2454\) turns into one",
        ),
    ],
)
def test_a_sample_a_tool_cannot_send_as_it_is_is_refused_naming_file_field_and_why(tmp_path: Path, tool: str, workload: dict[str, Any], message: str) -> None:
    rows = workload.pop("file_rows", None)
    path = dataset_book(tmp_path, client=tool, rows=rows, **workload)
    with pytest.raises(ConfigError, match=rf"workloads.fixed.dataset: expected `client` fleet \(which sends each sample as it is\) for this sample, not {tool}: .*{message}") as caught:
        load_playbook(path)
    assert str(path) in str(caught.value)
    with pytest.raises(ConfigError, match=r"workloads.fixed.dataset: .*`load.search` with fleet's client only"):
        load_playbook(dataset_book(tmp_path, client="vllm_bench_serve", load={"rate": 2, "search": {"rates": [1, 4]}}, slo={"ttft": "1s"}))


@pytest.mark.parametrize("tool", ["bench_serving", "aiperf", "guidellm", "vllm_bench_serve"])
def test_a_sample_each_tool_can_send_is_planned(tmp_path: Path, tool: str) -> None:
    """Every prompt of DATASET_ROWS is non-empty and not all read as numbers; one output length (6) for bench_serving."""
    rows = [{"prompt": r["prompt"], "category": r["category"]} for r in DATASET_ROWS] if tool == "bench_serving" else None
    [run] = expand_runs(load_playbook(dataset_book(tmp_path, client=tool, rows=rows)))
    assert resolve_workload(run, 1.0, "/p")["client"]["tool"] == tool


def test_a_dataset_is_written_in_vllms_custom_format_and_vllms_loader_reads_back_fleets_requests(tmp_path: Path) -> None:
    """vllm's own CustomDataset and argument parser (the suite's vllm 0.33.0 wheel) on what fleet
    writes and passes: the same prompts, as given, in fleet's order, each with its own output length."""
    pytest.importorskip("vllm.benchmarks.serve")
    pytest.importorskip("tokenizers")
    import argparse

    from transformers import AutoTokenizer
    from vllm.benchmarks.datasets.datasets import CustomDataset
    from vllm.benchmarks.serve import add_cli_args

    from fleet.host.agent.kinds.listed import dataset_requests
    from tests.integration.test_load_generators import build_tokenizer

    workload = dataset_workload(tmp_path, {"tool": "vllm_bench_serve", "python": sys.executable}, rate=2.0)
    plans = dataset_requests(workload, 0)
    load = tool_load(workload, 0, plans)
    planned = [(plan.prompt, plan.max_new_tokens) for plan in plans]
    assert list(load.dataset) == planned and load.requests == 4 and sorted(n for _, n in planned) == [3, 5, 6, 6]  # 7 capped at max_new_tokens
    out = tmp_path / "out"
    out.mkdir()
    for name, text in TOOLS["vllm_bench_serve"].inputs(ToolTarget("127.0.0.1", 1, "m", "completions"), load, str(out)).items():
        (out / name).write_text(text, encoding="utf-8")
    argv = TOOLS["vllm_bench_serve"].argv(ToolTarget("127.0.0.1", 1, "m", "completions"), load, str(out))
    parser = argparse.ArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(argv[argv.index("serve") + 1 :])
    assert (args.dataset_name, args.custom_output_len, args.skip_chat_template, args.disable_shuffle, args.ignore_eos, args.num_prompts) == ("custom", -1, True, True, True, 4)
    tokenizer = AutoTokenizer.from_pretrained(str(build_tokenizer(tmp_path / "tok", " ".join(str(r["prompt"]) for r in DATASET_ROWS))))
    dataset = CustomDataset(dataset_path=args.dataset_path, disable_shuffle=args.disable_shuffle, random_seed=args.seed)
    sampled = dataset.sample(tokenizer=tokenizer, num_requests=args.num_prompts, output_len=args.custom_output_len, skip_chat_template=args.skip_chat_template, no_oversample=True)
    assert [(r.prompt, r.expected_output_len) for r in sampled] == planned
    # Prompts that all read as numbers: pandas would make them numbers ("007" -> 7): refused, and the agent does not run the tool.
    assert "every prompt reads as a number" in (TOOLS["vllm_bench_serve"].dataset_refusal((("007", 3), ("42", 3))) or "")
    assert TOOLS["vllm_bench_serve"].dataset_refusal((("007", 3), ("a 42", 3))) is None


# Requests with what a writer must carry through as it is: quotes, newlines (\n, \r\n, a tab), a
# line separator, unicode beyond the BMP, JSON and markup in the text, numbers as strings, a
# prompt twice; each with its own output length (bench_serving's: one for all, at least 4).
ODD_PROMPTS = (
    'Say "hi" \u2014 twice,\nthen stop.\r\n\tDone',
    "007",
    "3.14",
    "caf\u00e9 \u65e5\u672c\u8a9e \U0001f600 emoji",
    'back\\slash {"json": [1, 2]} </s> <|eot_id|>',
    "\u2028line separator\u2029 here",
    "It was the best of times",
    "It was the best of times",
)

# Each tool's own loader, run by the load generators' interpreter (build/loadgen) on the folders
# the writers filled (one process for all three: their imports take most of its time): prints, per
# tool, the requests the tool would send from its folder, in the order it sends them, as JSON
# [prompt, output tokens] (AIPerf: [its key, prompt, output tokens]). bench_serving: its `custom`
# dataset after the seeding its main does (serving.py:2055); AIPerf: its single_turn loader and the
# sequential sampler; GuideLLM: its json_file reader, the scenario's column mapping, its finalizer
# and its /v1/completions request body (what it sends).
TOOL_LOADERS = """
import json, random, sys

def bench_serving(folder, seed, tokenizer, argv):
    from transformers import AutoTokenizer
    from sglang.benchmark.datasets.custom import sample_custom_requests
    random.seed(seed)
    rows = sample_custom_requests(argv[argv.index("--dataset-path") + 1], int(argv[argv.index("--num-prompts") + 1]), AutoTokenizer.from_pretrained(tokenizer),
                                  fixed_output_len=int(argv[argv.index("--sharegpt-output-len") + 1]))
    return [[row.prompt, row.output_len] for row in rows]

def aiperf(folder, seed, tokenizer, argv):
    from aiperf.dataset.dataset_samplers import SequentialSampler
    from aiperf.dataset.loader.single_turn import SingleTurnDatasetLoader
    loader = SingleTurnDatasetLoader(filename=argv[argv.index("--input-file") + 1])
    conversations = {c.session_id: c for c in loader.convert_to_conversations(loader.load_dataset())}
    sampler = SequentialSampler(list(conversations))
    sent = []
    for _ in conversations:
        [turn] = conversations[key := sampler.next_conversation_id()].turns
        [prompt] = [content for text in turn.texts for content in text.contents if content]
        sent.append([key, prompt, turn.max_tokens])
    return sent

def guidellm(folder, seed, tokenizer, argv):
    from guidellm.backends.openai.request_handlers import TextCompletionsRequestHandler
    from guidellm.data.deserializers import DatasetDeserializerFactory
    from guidellm.data.finalizers.generative import GenerativeRequestFinalizer
    from guidellm.data.loaders.torch import DatasetsIterator
    from guidellm.data.preprocessors.mappers import GenerativeColumnMapper
    from guidellm.schemas.data.deserializers.file import FileDataArgs
    from guidellm.schemas.data.finalizers.generative import GenerativeRequestFinalizerArgs
    from guidellm.schemas.data.loaders.torch import TorchDataLoaderArgs
    from guidellm.schemas.data.preprocessors.mappers import GenerativeColumnMapperArgs
    spec = json.load(open(argv[argv.index("-c") + 1]))["spec"]
    assert TorchDataLoaderArgs(**spec["data_loader"]).shuffle is False
    [data] = spec["data"]
    dataset = DatasetDeserializerFactory.deserialize(config=FileDataArgs(**data), processor_factory=None, random_seed=seed)
    mapper = GenerativeColumnMapper(GenerativeColumnMapperArgs(**spec["data_column_mapper"]))
    sent = []
    for graph in DatasetsIterator([dataset], 0, [mapper], GenerativeRequestFinalizer(GenerativeRequestFinalizerArgs())):
        [root] = graph.root_node_ids
        body = TextCompletionsRequestHandler().format(graph.nodes[root].request, model="m", stream=True).body
        sent.append([body["prompt"], body["max_tokens"]])
    return sent

print(json.dumps({tool: globals()[tool](*job) for tool, *job in json.loads(sys.argv[1])}))
"""


def test_each_writer_gives_the_tools_own_loader_fleets_samples_as_they_are_in_fleets_order(tmp_path: Path) -> None:
    """The file each writer makes, read by the tool's own loader (the versions build/loadgen holds):
    the same prompts character for character, each with its output length, in fleet's order (AIPerf
    keyed by the session ids its records will carry, its warm-up requests first); an empty prompt,
    which AIPerf would send as `prompt: []` and GuideLLM not at all, is refused."""
    from tests.integration.test_load_generators import MAKE_VENV, VENV, build_tokenizer

    if not (VENV / "bin" / "python").exists():
        pytest.skip(f"no load generators: {VENV} is missing ({MAKE_VENV})")
    tokenizer = build_tokenizer(tmp_path / "tok", " ".join(ODD_PROMPTS))
    target = ToolTarget("127.0.0.1", 1, "m", "completions", str(tokenizer))
    loads, jobs = {}, []
    for tool in ("bench_serving", "aiperf", "guidellm"):
        lengths = [5] * len(ODD_PROMPTS) if tool == "bench_serving" else [4 + i for i in range(len(ODD_PROMPTS))]
        load = loads[tool] = ToolLoad(0, 0, len(ODD_PROMPTS), seed=7, rate=2.0, warmup_requests=2 if tool == "aiperf" else 0, dataset=tuple(zip(ODD_PROMPTS, lengths)))
        assert TOOLS[tool].dataset_refusal(load.dataset) is None
        refused = TOOLS[tool].dataset_refusal((("a b", 5), ("", 5)))
        assert (refused is None) == (tool == "bench_serving"), refused  # bench_serving drops it (custom.py:129-131): the run fails, fewer recorded
        out = tmp_path / tool
        out.mkdir()
        for name, text in TOOLS[tool].inputs(target, load, str(out)).items():
            (out / name).write_text(text, encoding="utf-8")
        jobs.append([tool, str(out), load.seed, str(tokenizer), TOOLS[tool].argv(target, load, str(out))])
    done = subprocess.run([str(VENV / "bin" / "python"), "-c", TOOL_LOADERS, json.dumps(jobs)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    sent = json.loads(done.stdout.splitlines()[-1])
    samples = {tool: [list(sample) for sample in load.dataset] for tool, load in loads.items()}
    assert sent["bench_serving"] == samples["bench_serving"]
    assert sent["guidellm"] == samples["guidellm"]
    warmup = [[f"fleet-warmup-{i:06d}", *samples["aiperf"][i]] for i in range(2)]
    assert sent["aiperf"] == warmup + [[f"fleet-{i:06d}", *sample] for i, sample in enumerate(samples["aiperf"])]
    aiperf_argv = jobs[1][-1]
    assert flag(aiperf_argv, "--custom-dataset-type") == "single_turn" and flag(aiperf_argv, "--dataset-sampling-strategy") == "sequential" and "--output-tokens-mean" not in aiperf_argv


def outcome(started_at: float, tokens: int) -> RequestOutcome:
    return RequestOutcome(started_at=started_at, ok=True, output_tokens=tokens)


def test_requests_recorded_as_they_complete_are_put_in_fleets_order_by_their_keys() -> None:
    """AIPerf's records come in completion order: each goes to the sample its session id names.
    GuideLLM's key is the prompt and max_tokens it sent: of two identical samples the one sent first
    takes the first; a request it kept no body for (no response) takes the sample left."""
    load = ToolLoad(0, 0, 3, 0, dataset=(("a", 4), ("b", 5), ("a", 4)))
    aiperf, guidellm = TOOLS["aiperf"], TOOLS["guidellm"]
    done = ToolOutput([outcome(2.0, 4), outcome(1.0, 5), outcome(0.0, 4)], 1.0, {}, ["fleet-000002", "fleet-000001", "fleet-000000"])
    assert in_sample_order(aiperf, done, load) == [done.requests[2], done.requests[1], done.requests[0]]
    keyed = ToolOutput([outcome(2.0, 4), outcome(1.0, 5), outcome(0.0, 4)], 1.0, {}, [json.dumps(["a", 4]), json.dumps(["b", 5]), json.dumps(["a", 4])])
    assert in_sample_order(guidellm, keyed, load) == [keyed.requests[2], keyed.requests[1], keyed.requests[0]]
    failed = RequestOutcome(started_at=0.5, error_class="http_error")
    partly = ToolOutput([outcome(2.0, 4), failed, outcome(0.0, 4)], 1.0, {}, [json.dumps(["a", 4]), None, json.dumps(["a", 4])])
    assert in_sample_order(guidellm, partly, load) == [partly.requests[2], failed, partly.requests[0]]
    other = ToolOutput([outcome(0.0, 4), outcome(1.0, 5), outcome(2.0, 9)], 1.0, {}, [json.dumps(["a", 4]), json.dumps(["b", 5]), json.dumps(["a", 9])])
    with pytest.raises(ValueError, match=r"GuideLLM recorded a request that is none of fleet's samples \(or one sample twice\): '\[\"a\", 9\]'"):
        in_sample_order(guidellm, other, load)
    with pytest.raises(ValueError, match=r"AIPerf recorded 2 requests of the 3 it was given"):
        in_sample_order(aiperf, ToolOutput(done.requests[:2], 1.0, {}, done.keys[:2] if done.keys else None), load)
    # bench_serving keeps no key: its lists are in the order it sent, which bench_serving_inputs makes fleet's.
    plain = ToolOutput(done.requests, 1.0, {})
    assert in_sample_order(TOOLS["bench_serving"], plain, load) == done.requests


def test_the_readers_give_the_keys_the_tools_recorded() -> None:
    """The real output files: AIPerf's records carry their conversation ids, GuideLLM's the body it sent."""
    aiperf = TOOLS["aiperf"].read(FIXTURES / "aiperf", 0.0)
    assert aiperf.keys is not None and len(set(aiperf.keys)) == REQUESTS and all(str(k).startswith("session_") for k in aiperf.keys)
    guide = TOOLS["guidellm"].read(FIXTURES / "guidellm", 0.0)
    assert guide.keys is not None and len(guide.keys) == REQUESTS
    prompt, tokens = json.loads(str(guide.keys[0]))
    assert tokens == OUTPUT and isinstance(prompt, str) and prompt
    assert TOOLS["bench_serving"].read(FIXTURES / "bench_serving", 0.0).keys is None


@pytest.fixture(scope="module")
def sim_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """One sim server on this machine for the module's end-to-end tool runs, started once: the sim
    runs without noise (none asked for) and without a prefix cache (--disable-radix-cache), and
    each request's pages are freed when it ends, so what one test's tool sent leaves nothing that
    changes what the next one's sends, measures or reads back."""
    tmp_path = tmp_path_factory.mktemp("sim")
    env = local_gpu_env(tmp_path / "gpu", os.environ)
    args = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--context-length", "8192", "--mem-fraction-static", "0.75", "--disable-radix-cache"]
    server = start_sim(args, tmp_path / "server.log", env={**env, "CUDA_VISIBLE_DEVICES": "0", "HF_HUB_OFFLINE": "1"}, speed=0.05)
    try:
        assert server.wait_ready(60), server.log()
        yield server
    finally:
        server.stop()


def tool_tokenizer(directory: Path, corpus: str) -> Path:
    """test_load_generators.build_tokenizer's folder with the config.json a model's folder has: without
    one, vllm bench serve's read of the model config fails and is retried after a 2 s sleep
    (vllm/transformers_utils/repo_utils.py with_retry) at every run. The tokenizer is the same: its
    class is the one tokenizer_config.json names, whatever the config's model type."""
    from tests.integration.test_load_generators import build_tokenizer

    folder = build_tokenizer(directory, corpus)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return folder


def drive_on_sim(server: SimProcess, workload: dict[str, Any]) -> WorkloadOutcome:
    """The agent's drive of `workload` (naming a tool) against the sim server."""
    assert server.process.poll() is None, server.log()[-3000:]
    out = drive(
        Driver(
            Client(Endpoint("127.0.0.1", server.port), api="completions", model="meta-llama/Llama-3.1-8B-Instruct"),
            AgentLimits(request_timeout_s=60.0),
            ServerFacts(served_model="meta-llama/Llama-3.1-8B-Instruct"),
            Gate(lambda: None, threading.Event()),
            RunSpec("r", "r", workload),
        )
    )
    assert out.failure is None, out.failure
    return out


def test_the_agent_runs_vllm_bench_serve_on_a_dataset_and_the_result_is_a_dataset_runs(tmp_path: Path, sim_server: SimProcess) -> None:
    """End to end on this machine: a sim server, `vllm bench serve` on fleet's sample of a dataset
    (4 prompts, their own output lengths, 2 in flight); each request is the sample's, with its
    category, and the run's sample_sha256 is the one fleet's client records for the same sample."""
    pytest.importorskip("vllm.benchmarks.serve")
    pytest.importorskip("tokenizers")
    from fleet.host.agent.kinds.listed import dataset_requests, sample_sha256

    tokenizer = tool_tokenizer(tmp_path / "tok", " ".join(str(r["prompt"]) for r in DATASET_ROWS))
    workload = dataset_workload(tmp_path, {"tool": "vllm_bench_serve", "python": sys.executable, "tokenizer": str(tokenizer)}, rate=1e6, max_in_flight=2)
    out = drive_on_sim(sim_server, workload)
    plans = dataset_requests(workload, 0)
    assert [(s.outcome.ok, s.outcome.output_tokens, s.tags) for s in out.sent] == [(True, p.max_new_tokens, p.tags) for p in plans]
    assert out.extras["sample_sha256"] == sample_sha256(plans) and workload["dataset"]["sample_sha256"]
    assert out.extras["tool"]["name"] == "vllm_bench_serve"


def result_json(**changes: Any) -> dict[str, Any]:
    base = RunResult(run_id="r1", label="l", server_id="s1", server_label="s", sweep_id="w1", host="ct200", status=RunStatus.ok, failure=None, figures={}, workload={}, started_at=1.0, ended_at=2.0)
    return {**base.to_json(), **changes}


def test_a_result_names_its_client_and_one_without_is_fleets() -> None:
    assert RunResult.from_json(result_json(client="aiperf")).client == "aiperf"
    old = result_json()
    del old["client"]
    assert RunResult.from_json(old).client == FLEET_CLIENT
    with pytest.raises(ContractError, match="client"):
        RunResult.from_json(result_json(client="wrk"))


def test_the_reports_groups_keep_clients_apart() -> None:
    fleets = GroupKey("H200", True, "sglang", "0.5.23", 1)
    tools = GroupKey("H200", True, "sglang", "0.5.23", 1, "bench_serving")
    assert fleets != tools
    assert fleets.title == "H200 (simulated) · SGLang 0.5.23 · TP1"
    assert tools.host_type == "H200 (simulated) · SGLang 0.5.23 · measured by bench_serving"


def test_a_tool_the_interpreter_lacks_fails_the_run_with_the_tools_own_words(tmp_path: Path) -> None:
    """The agent's tool run, for real: the workload's interpreter has no sglang (this Python without
    its site-packages), so `-m sglang.bench_serving` exits 1; the run fails as `client_tool_failed`
    with the exit status and the interpreter's own message as evidence, no request counted."""
    workload = {"name": "w", "kind": "random", "input_tokens": 8, "max_new_tokens": 8, "requests": 2, "seed": 0, "load": None, "slo": None}
    workload["client"] = {"tool": "bench_serving", "python": bare_python(tmp_path), "tokenizer": None}
    driver = Driver(
        Client(Endpoint("127.0.0.1", 9), model="served"),
        AgentLimits(request_timeout_s=5.0),
        ServerFacts(served_model="served"),
        Gate(lambda: None, threading.Event()),
        RunSpec("r", "r", workload),
    )
    out = drive(driver)
    assert out.failure is not None and out.failure.error_class == FailureClass.CLIENT_TOOL_FAILED.value
    assert "sglang.bench_serving" in out.failure.message and "exited 1" in out.failure.message
    assert "No module named" in out.failure.evidence[0]
    assert out.sent == [] and out.planned_requests == 2


def test_no_speed_up_divides_one_clients_figure_by_anothers() -> None:
    """The report fixture's TP1 autoregressive runs measured by another client: TP1's speculative
    cells lose their speed-ups (they had them), and those runs are a group of their own."""
    rows = report_of([REPORT_SWEEP]).rows
    baseline = [r for r in rows if r.group.tp == 1 and not r.speculative]
    fleets = baseline[0].group
    assert any(c.speedup is not None for g in make_cells(rows) if g.key == fleets for c in g.cells)
    measured = replace(fleets, client="bench_serving")
    groups = make_cells([replace(r, group=measured) if r in baseline else r for r in rows])
    assert all(c.speedup is None for g in groups if g.key == fleets for c in g.cells)
    assert [g.key for g in groups if g.key == measured] == [measured]


def test_a_result_measured_by_a_tool_is_reported_under_its_client() -> None:
    sweep = load_sweep(REPORT_SWEEP)
    loaded = next(each for each in sweep.results if each.result.status is RunStatus.ok)
    sweep.results[sweep.results.index(loaded)] = replace(loaded, result=replace(loaded.result, client="aiperf"))
    report = build_report([sweep])
    [row] = [r for r in report.rows if r.run_id == loaded.result.run_id]
    assert row.group.client == "aiperf" and row.flat()["client"] == "aiperf"
    assert "measured by aiperf" in render(report, "md")


def test_the_agent_runs_vllm_bench_serve_against_a_server_and_its_records_are_the_runs(tmp_path: Path, sim_server: SimProcess) -> None:
    """The agent's tool kind end to end on this machine: a sim server, `vllm bench serve` from the
    suite's vllm wheel run by this interpreter with a random workload's load (4 requests of exactly
    32 tokens in and 8 out, 2 in flight), its result.json read into the run's requests."""
    pytest.importorskip("vllm.benchmarks.serve")
    pytest.importorskip("tokenizers")
    tokenizer = tool_tokenizer(tmp_path / "tok", "It was the best of times, it was the worst of times.")
    workload = {"name": "w", "kind": "random", "input_tokens": 32, "max_new_tokens": 8, "requests": 4, "seed": 0, "slo": None}
    workload["load"] = {"rate": 1e6, "burstiness": 1.0, "max_in_flight": 2, "warmup_requests": 0, "seed": 0, "time_scale": 1.0}
    workload["client"] = {"tool": "vllm_bench_serve", "python": sys.executable, "tokenizer": str(tokenizer)}
    out = drive_on_sim(sim_server, workload)
    assert [(s.outcome.ok, s.outcome.prompt_tokens, s.outcome.output_tokens) for s in out.sent] == [(True, 32, 8)] * 4
    [section] = out.sections
    [stated] = out.extras["tool"]["stated"]
    assert section.wall_s == stated["wall_s"] and request_figures([s.outcome for s in out.sent], section.wall_s)["output_tok_s"] == pytest.approx(stated["output_tok_s"])


def test_the_tool_probe_finds_modules_without_importing_their_packages(tmp_path: Path) -> None:
    """The probe of a workload's interpreter answers for a dotted module without running its
    package's `__init__` (sglang's imports torch: seconds, past the probe's bound on a loaded host),
    and says no for a name under a plain module or a package that is not there."""
    package = tmp_path / "heavy"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    (package / "bench.py").write_text("")
    modules = ["heavy.bench", "heavy.gone", "heavy.bench.deeper", "absent.bench", "json.decoder", "json"]
    done = subprocess.run(probe_argv(sys.executable, modules), capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=True)
    assert read_probe(done.stdout, modules) == {"heavy.bench": True, "heavy.gone": False, "heavy.bench.deeper": False, "absent.bench": False, "json.decoder": True, "json": True}
    assert not (tmp_path / "imported").exists(), "the probe ran the package's __init__"
