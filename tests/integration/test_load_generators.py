"""The field's own load generators beside fleet's client (issue 22): the real `sglang.bench_serving`
(the 0.5.23 wheel), AIPerf and GuideLLM (from PyPI, tests/requirements-loadgen.txt) run against the
sim on a test host with the load fleet's client ran there, and their output tok/s and TTFT p50,
read from each tool's own output file, agree with fleet's within 5 % and 10 %. fleet's figures for
that comparison are its client's on the same server in the same minutes, one run just before the
tool's and one just after (their mean; the run after one tool's is the run before the next one's
where the server's totals show it served nothing between them): the sweep's own run was minutes
earlier, and the suite beside a CPU hog (benchmarks/suite_under_load.sh) changes the server's
speed from minute to minute. The server, the tools and fleet's client run at a higher priority
than the suite's other work (PRIORITY): what is compared is how each measures the server, not how
much CPU each could get beside the hog.

The load is one fleet workload, `random` with a closed-loop cap: every request exactly PROMPT tokens
in, exactly OUTPUT tokens out (ignore_eos), CONCURRENCY in flight, REQUESTS in all. What each tool
sends is checked on the server's side, not the tool's: the sim's own counters (`/metrics`
sglang:prompt_tokens_total, generation_tokens_total, num_requests_total) must grow by exactly
REQUESTS x PROMPT, REQUESTS x OUTPUT and REQUESTS over each tool's run.

The tools size text prompts with a Hugging Face tokenizer. The sim's tokenizer is fleet's stand-in
(fleet.host.tokens), so the tools get that tokenizer as a `tokenizer.json` built here: the same
pieces (a pre-tokenizer regex that splits as fleet.host.tokens does), a vocabulary of the pieces of
the tools' own corpora, and an unknown token `§` that counts as one token in both (a piece the
vocabulary lacks decodes to it, so a prompt a tool decodes from token ids keeps its length in the
sim's count; `<unk>` would be three tokens there).

The tools run on the test host itself (nsenter), against the server at 127.0.0.1 as fleet's agent
ran, from a virtual environment the README's test command makes (`build/loadgen`, which sees the
suite's site packages, the sglang wheel among them); without it the tests skip and say how to make it. The server
they measure is the sweep's own server configuration started again (the shard's argv and env): the
sim runs without noise, so a server start measures what another one does.

A dataset workload's samples go to each tool as fleet's agent writes them (fleet.host.agent.tools:
AIPerf's single_turn file, GuideLLM's json_file, bench_serving's `custom` file), a handful of
prompts one at a time through a relay on the host that records every request it passes to the
server (RELAY): what the server received must be fleet's samples, text and max tokens, in fleet's
order, and the tool's records, matched to the samples as the agent matches them, the requests of
the run with each sample's tags.

The command lines and the readers of the tools' output are fleet's own (fleet.host.agent.tools), and
the sweep itself has a second workload, the same load with `client: bench_serving`: fleet's agent
runs bench_serving on the host and its result says so (`client`), with figures made from the tool's
own output file.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from fleet.host import tokens
from fleet.host.agent.kinds.listed import Planned
from fleet.host.agent.kinds.tool import tool_sent
from fleet.host.agent.results import request_figures
from fleet.host.agent.tools import TOOLS, ToolLoad, ToolOutput, ToolTarget, guidellm_sample_key
from fleet.host.contract import RunResult, load_result
from fleet.inventory import load_inventory
from fleet.sweep.controller import start_sweep
from tests.testfleet import TestFleet, start_test_fleet, unavailable_reason

# Hang guards, not speed checks: the first test also pays for the module's sweep and server start,
# and the tools' start-up is seconds of CPU each, all stretched five- to tenfold when the suite
# runs beside a CPU hog (benchmarks/suite_under_load.sh: 300 s was exceeded there).
pytestmark = [pytest.mark.testfleet, pytest.mark.timeout(1500)]
TOOL_TIMEOUT_S = 900

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "build" / "loadgen"
MAKE_VENV = "the three commands at the top of tests/requirements-loadgen.txt"

PROMPT, OUTPUT, REQUESTS, CONCURRENCY = 1024, 128, 32, 8
# Real time: at the sim's own speed a decode step of this batch takes about 13 ms, far above what
# a client's own work per chunk costs; at 0.02 the clients' overheads would be what is compared.
SIM_SPEED = 1.0
# The sim's start-ups (the sweep's server and its second start for the tools) at twenty times the
# speed: nothing here measures a start-up, and the serving the tools are compared on stays at SIM_SPEED.
SIM_START_SPEED = 0.05
PORT = 30100  # the sweep's server had 30000
TOK_S_BOUND, TTFT_BOUND = 0.05, 0.10
# The server, each tool and fleet's client on the host above the suite's other work: beside busy
# loops at nice 0, with no priority of their own, aiperf measured 0.879 of fleet's tok/s and
# guidellm 0.838 of its TTFT (0.981 and 0.982 on an idle machine, benchmarks/results/load-generators.md).
# Where the kernel schedules by autogroup (Debian's and Ubuntu's default), nice orders processes
# within one session only: the tools and fleet's client run in the pytest worker's session, above
# its other work; the server, in the session its setsid made, shares the CPU with the hog's
# session as an equal (benchmarks/suite_under_load.sh says how that was found). Not the real-time
# class: under SCHED_RR (chrt -r 1) GuideLLM's TTFT p50 fell to 0.53 of fleet's while its tok/s
# stayed at 0.99, and fleet's own runs around it did not move (610 ms).
PRIORITY = "nice -n -10"
SERVED = "meta-llama/Llama-3.1-8B-Instruct"
PLAYBOOK = {
    "name": "loadgen",
    "model": {"repo": SERVED, "card": "llama-3.1-8b-instruct"},
    "methods": {"autoregressive": {}},
    "tp": [1],
    # No prefix cache: the tools' text prompts share words, fleet's random ids share nothing, and a
    # cache hit would shorten one side's prefill. Metrics on: the server's counters check the load.
    "server": {"context_length": 8192, "mem_fraction_static": 0.75, "disable_radix_cache": True, "enable_metrics": True},
    "workloads": {
        # A closed loop as the tools run it: everything due at once, CONCURRENCY in flight.
        "fixed": {"kind": "random", "input_tokens": PROMPT, "max_new_tokens": OUTPUT, "requests": REQUESTS, "seed": 1, "load": {"rate": 1e6, "max_in_flight": CONCURRENCY}},
        # The same load sent and measured by bench_serving, run by fleet's agent (BENCH_SERVING_PYTHON, made in the fixture).
        "fixed_bench_serving": {
            "kind": "random", "input_tokens": PROMPT, "max_new_tokens": OUTPUT, "requests": REQUESTS, "seed": 1, "load": {"rate": 1e6, "max_in_flight": CONCURRENCY},
            "client": {"tool": "bench_serving", "python": "/root/loadgen/python", "tokenizer": "/root/loadgen/tokenizer"},
        },
    },
    "limits": {"server_start_timeout_s": 300, "request_timeout_s": 120, "no_token_timeout_s": 60},
}  # fmt: skip

# fleet.host.tokens' pieces as one Oniguruma regex (what `tokenizers` runs): a word of up to 6
# letters with its optional leading space; a longer word in 4-letter pieces, the first with the
# space; a digit with its space; any other visible character with its space; a newline; a run of
# other whitespace. Alternatives in that order, as tokens._PIECE and tokens.tokenize split.
PIECE_REGEX = r" ?(?<!\p{L})\p{L}{1,6}(?!\p{L})| ?(?<!\p{L})\p{L}{4}|\p{L}{1,4}| ?\p{Nd}| ?[^\s]|\n|[^\S\n]+"
UNKNOWN = "\u00a7"  # §: one token in fleet.host.tokens wherever it stands

# The loadgen interpreter names the corpora the tools draw prompts from: AIPerf's Shakespeare
# (aiperf/dataset/generator/prompt.py reads assets/shakespeare.txt) and Faker's en_US lorem words
# (guidellm/data/deserializers/synthetic.py:465 `faker.text(...)`).
CORPORA = """
import json, pathlib, aiperf
from faker.providers.lorem.en_US import Provider
print(json.dumps({"shakespeare": str(pathlib.Path(aiperf.__file__).parent / "dataset/generator/assets/shakespeare.txt"), "words": list(Provider.word_list)}))
"""

# bench_serving's interpreter on the host: the loadgen venv's, with one name of the wheel stood in
# (a sitecustomize.py of its own): sglang/benchmark/serving.py:57 imports FAKE_BOOTSTRAP_HOST from
# sglang.srt.disaggregation.utils, a module whose own imports need CUDA-side packages (tvm_ffi,
# torchvision). The constant is read from that module's source text. Offline: before it runs,
# bench_serving asks the hub for the served model's tokenizer config (check_chat_template,
# serving.py:1971-1977), 46 s of retries on a machine without the hub.
BENCH_SERVING_PYTHON = "/root/loadgen/python"
BENCH_SERVING_SITE = """
import ast, sys, types
from importlib.util import find_spec
from pathlib import Path
source = Path(find_spec("sglang").submodule_search_locations[0]) / "srt" / "disaggregation" / "utils.py"
[value] = [ast.literal_eval(node.value) for node in ast.parse(source.read_text()).body if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "FAKE_BOOTSTRAP_HOST"]
stand_in = types.ModuleType("sglang.srt.disaggregation.utils")
stand_in.FAKE_BOOTSTRAP_HOST = value
sys.modules[stand_in.__name__] = stand_in
"""


def build_tokenizer(directory: Path, corpus: str) -> Path:
    """A Hugging Face tokenizer directory that counts as fleet.host.tokens does (see the module's docstring)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {UNKNOWN: 0}
    for piece in tokens.tokenize(corpus):
        vocab.setdefault(piece, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE_REGEX), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()  # pieces carry their own spaces: decoding joins them as they are
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072}))
    return directory


def corpus_text(words: list[str], shakespeare: str) -> str:
    """Every piece the tools' prompts are cut from: Faker's words as `faker.text` writes them (capitalised
    at a sentence's start, after a space or a newline), and AIPerf's Shakespeare as it is and with its
    punctuation dropped (its prompt generator tokenizes the corpus it has cleaned)."""
    faker = " ".join(f"{w} {w.capitalize()}\n{w}\n{w.capitalize()}." for w in words)
    return "\n".join((faker, shakespeare, re.sub(r"[^\w\s]", "", shakespeare), " ".join(chr(c) for c in range(33, 127))))


@dataclass(frozen=True)
class Bench:
    fleet: TestFleet
    host: str
    work: str  # a folder of the host's (its /root), where the tools' inputs and outputs live
    tokenizer: str
    fleet_figures: dict[str, Any]  # the sweep's run of the load by fleet's agent
    tool_result: RunResult  # the sweep's run of the same load measured by bench_serving
    workload: dict[str, Any]  # the load as the agent got it (the shard's resolved workload)
    env: str  # the server's environment, as `K=V ...`: the host's python3 imports fleet with it
    # fleet's client's latest run on the load: its figures and the server's totals just after it (fleet_client_before)
    latest: dict[str, Any] = field(default_factory=dict, compare=False)

    def on_host(self, path: str) -> Path:
        return self.fleet[self.host].persistent_path(path)

    def run(self, command: str, timeout: float) -> subprocess.CompletedProcess:
        """`command` in bash on the host. Every tokenizer is a local folder, so nothing asks the hub;
        HF_HUB_OFFLINE is not set because AIPerf 0.13.0 then loads every tokenizer as a hub snapshot,
        a local folder too (aiperf/common/tokenizer.py:559-567 -> _resolve_local_snapshot :667-690).
        GNU timeout on the host ends the command's whole process group at `timeout`: a tool cut
        short must not go on sending to the server whose counters the next test reads (the exec's
        own bound, later, would end only the local nsenter)."""
        inner = "export HF_DATASETS_OFFLINE=1 NO_COLOR=1 COLUMNS=200; " + command
        return self.fleet.exec(self.host, ["timeout", "-k", "10", str(int(timeout)), "bash", "-c", inner], timeout=timeout + 30)

    def serve(self, command: str, cwd: str, log: str, url: str, tries: int, timeout: float) -> None:
        """`command` started on the host in the background from `cwd` (its output in bench.work/`log`),
        then `url` asked every 0.2 s, at most `tries` times, until it answers."""
        log = f"{self.work}/{log}"
        started = self.run(f"mkdir -p {self.work} && cd {shlex.quote(cwd)} && (setsid {command} > {log} 2>&1 < /dev/null &)", 30)
        assert started.returncode == 0, started.stderr
        ready = self.run(f"for i in $(seq {tries}); do python3 -c 'import urllib.request; urllib.request.urlopen(\"{url}\")' 2>/dev/null && exit 0; sleep 0.2; done; cat {log}; exit 1", timeout)
        assert ready.returncode == 0, ready.stdout[-3000:]

    def fleet_client(self) -> dict[str, Any]:
        """fleet's client on the load now, against the server at PORT: the agent's own open loop
        (fleet.host.agent.kinds.listed.open_loop) and figures (request_figures), in wall seconds."""
        limits = PLAYBOOK["limits"]
        arguments = [str(PORT), json.dumps(self.workload), str(limits["request_timeout_s"]), str(limits["no_token_timeout_s"])]
        done = self.run(f"env {self.env} {PRIORITY} python3 {self.work}/{FLEET_CLIENT_SCRIPT} {shlex.join(arguments)}", TOOL_TIMEOUT_S)
        assert done.returncode == 0, f"fleet's client failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        figures: dict[str, Any] = json.loads(done.stdout)
        assert figures["requests"]["ok"] == REQUESTS and figures["output_tokens"] == REQUESTS * OUTPUT, figures
        self.latest.update(figures=figures, totals=self.totals())
        return figures

    def fleet_client_before(self) -> dict[str, Any]:
        """fleet's client on the load just before a tool's run: the previous test's run just after
        its tool where the server has served nothing since (every total of its /metrics, streamed
        requests or not, as it was right after that run: the same server state a run now would
        follow, seconds later), else a run now. Either way nothing reaches the server between
        fleet's run and the tool's; the agreement tests in a row share one run of fleet's client
        between them instead of two back to back."""
        if self.latest and self.latest["totals"] == self.totals():
            return self.latest["figures"]
        return self.fleet_client()

    def metrics(self) -> str:
        done = self.run(f"python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:{PORT}/metrics\").read().decode())'", 30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def totals(self) -> list[str]:
        """Every running total of the server's /metrics, each series: unchanged only where it served nothing."""
        text = self.metrics()
        found = re.findall(r"^sglang:\w+_total\{.*$", text, re.M)
        assert found, f"the server's /metrics has no running totals:\n{text[:3000]}"
        return found

    def counters(self) -> dict[str, float]:
        """The server's own totals over its streamed requests: requests, prompt and generated tokens."""
        text = self.metrics()
        found = {}
        for name in ("num_requests_total", "prompt_tokens_total", "generation_tokens_total"):
            match = re.search(rf'^sglang:{name}\{{[^}}]*is_streaming="true"[^}}]*\}} (\S+)$', text, re.M)
            assert match, f"the server's /metrics has no sglang:{name} for streamed requests:\n{text[:3000]}"
            found[name] = float(match.group(1))
        return found


# fleet's client on the host, as the agent sends a `random` workload with a load: the open loop,
# the client with the sweep's request limits (its arguments), the figures of the result. Standard
# library and fleet; written to the host once, by the module's fixture.
FLEET_CLIENT_SCRIPT = "fleet_client.py"
FLEET_CLIENT = """
import json, random, sys
from fleet.host.agent.client import Client, Endpoint
from fleet.host.agent.kinds.listed import open_loop, random_requests
from fleet.host.agent.results import request_figures

port, workload, deadline_s, no_token_timeout_s = int(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])


class Open:
    open = True


class Sender:  # what open_loop uses of the agent's Driver
    gate = Open()
    client = Client(Endpoint("127.0.0.1", port))

    def send(self, prompt, max_new_tokens):
        return self.client.generate(prompt, max_new_tokens, deadline_s=deadline_s, no_token_timeout_s=no_token_timeout_s)


load = workload["load"]
sent, wall = open_loop(Sender(), random_requests(workload, 0), load, random.Random(int(load.get("seed") or 0)), processes=1)
print(json.dumps(request_figures([s.outcome for s in sent], wall)))
"""


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    """fleet's client on the load (a sweep on test host ct200), then the same server started again
    for the tools, and the tokenizer they take."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    if not (VENV / "bin" / "python").exists():
        pytest.skip(f"no load generators: {VENV} is missing (the README's test command makes it: {MAKE_VENV})")
    tmp = tmp_path_factory.mktemp("loadgen")
    with start_test_fleet(["ct200"]) as fleet:
        # The tokenizer and bench_serving's interpreter on the host, before the sweep that uses them.
        corpora = subprocess.run([str(VENV / "bin" / "python"), "-c", CORPORA], capture_output=True, text=True, check=True)
        named = json.loads(corpora.stdout)
        build_tokenizer(fleet["ct200"].persistent_path("/root/loadgen/tokenizer"), corpus_text(named["words"], Path(named["shakespeare"]).read_text()))
        site = fleet["ct200"].persistent_path("/root/loadgen/site")
        site.mkdir(parents=True)
        (site / "sitecustomize.py").write_text(BENCH_SERVING_SITE)
        python = fleet["ct200"].persistent_path(BENCH_SERVING_PYTHON)
        python.write_text(f'#!/bin/sh\nHF_HUB_OFFLINE=1 PYTHONPATH=/root/loadgen/site exec {VENV}/bin/python "$@"\n')
        python.chmod(0o755)

        hosts = list(load_inventory(fleet.write_inventory(tmp / "hosts", engine={"sim_speed": SIM_SPEED, "sim_start_speed": SIM_START_SPEED})))
        book = tmp / "loadgen.yaml"
        book.write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))
        outcome = start_sweep(book, hosts, tmp / "results", poll_interval_s=0.5)
        results = {r.workload["name"]: r for r in map(load_result, outcome.directory.glob("ct200/runs/*.json"))}
        for result in results.values():
            assert result.status.value == "ok", (result.workload["name"], result.failure, result.deviations)
            assert result.figures["prompt_tokens"] == REQUESTS * PROMPT and result.figures["output_tokens"] == REQUESTS * OUTPUT, result.figures

        # The sweep's server once more, from the shard the controller wrote: argv, env and folder.
        [server] = json.loads((outcome.directory / "ct200" / "shard.json").read_text())["servers"]
        argv = list(server["argv"])
        argv[argv.index("--port") + 1] = str(PORT)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in server["env"].items())
        [workload] = [run["workload"] for run in server["runs"] if run["workload"]["name"] == "fixed"]
        bench = Bench(fleet, "ct200", "/root/loadgen", "/root/loadgen/tokenizer", results["fixed"].figures, results["fixed_bench_serving"], workload, env)
        bench.on_host(f"{bench.work}/{FLEET_CLIENT_SCRIPT}").write_text(FLEET_CLIENT)
        bench.serve(f"env {env} {PRIORITY} {shlex.join(argv)}", server["cwd"], "server.log", f"http://127.0.0.1:{PORT}/health_generate", tries=1500, timeout=400)
        yield bench


# Each tool's interpreter on the host: bench_serving's needs its stand-in, the others are the venv's.
PYTHONS = {"bench_serving": BENCH_SERVING_PYTHON, "aiperf": f"{VENV}/bin/python", "guidellm": f"{VENV}/bin/python"}
# The sweep's load, as each tool is given it (fleet.host.agent.kinds.tool.tool_load makes the same of the workload).
LOAD = ToolLoad(PROMPT, OUTPUT, REQUESTS, seed=1, rate=math.inf, max_in_flight=CONCURRENCY)


def tool_command(bench: Bench, name: str, load: ToolLoad = LOAD, port: int = PORT, folder: str | None = None) -> str:
    """The tool's command line on the host as fleet's agent runs it (its argv and input files from
    fleet.host.agent.tools) with `load` against the server at `port`, writing under bench.work/<folder or name>."""
    tool, out = TOOLS[name], f"{bench.work}/{folder or name}"
    target = ToolTarget("127.0.0.1", port, SERVED, "generate", bench.tokenizer)
    bench.on_host(out).mkdir(parents=True, exist_ok=True)
    for file, text in tool.inputs(target, load, out).items():
        (bench.on_host(out) / file).write_text(text, encoding="utf-8")
    return f"cd {out} && {PRIORITY} {shlex.join([PYTHONS[name], *tool.argv(target, load, out)])}"


def ratios(name: str, tok_s: float, ttft: float, ours: dict[str, Any]) -> tuple[float, float, str]:
    """The tool's figures against fleet's client's, and the table row that shows them. The tools
    measure wall time; fleet's figures of a simulated run are in the sim's time (wall / sim_speed)."""
    tok_s, ttft = tok_s * SIM_SPEED, ttft / SIM_SPEED
    ours_tok_s, ours_ttft = ours["output_tok_s"], ours["ttft_s"]["p50"]
    row = f"| {name} | {tok_s:.1f} | {ttft * 1000:.1f} | {ours_tok_s:.1f} | {ours_ttft * 1000:.1f} | {tok_s / ours_tok_s:.3f} | {ttft / ours_ttft:.3f} |"
    print(f"\n| tool | output tok/s | TTFT p50 ms | fleet tok/s | fleet TTFT p50 ms | tok/s ratio | TTFT ratio |\n{row}")
    return tok_s / ours_tok_s, ttft / ours_ttft, row


@pytest.mark.parametrize("tool", list(PYTHONS))
def test_the_tool_agrees_with_fleets_client_on_the_same_load(bench: Bench, tool: str) -> None:
    ours_before = bench.fleet_client_before()
    before = bench.counters()
    done = bench.run(tool_command(bench, tool), TOOL_TIMEOUT_S)
    assert done.returncode == 0, f"{tool} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    after = bench.counters()
    ours_after = bench.fleet_client()
    # The same load, as the server counted it: every request PROMPT tokens in and OUTPUT out.
    sent = {name: after[name] - before[name] for name in after}
    assert sent == {"num_requests_total": REQUESTS, "prompt_tokens_total": REQUESTS * PROMPT, "generation_tokens_total": REQUESTS * OUTPUT}, (tool, sent)

    # The tool's own figures, as it stated them in its own output file.
    output = TOOLS[tool].read(bench.on_host(f"{bench.work}/{tool}"), 0.0)
    assert sum(1 for r in output.requests if r.ok) == REQUESTS, output.requests
    # fleet's client just before and just after, its wall figures in the sim's time as ratios takes fleet's.
    ours = {
        "output_tok_s": (ours_before["output_tok_s"] + ours_after["output_tok_s"]) / 2 * SIM_SPEED,
        "ttft_s": {"p50": (ours_before["ttft_s"]["p50"] + ours_after["ttft_s"]["p50"]) / 2 / SIM_SPEED},
    }
    tok_s, ttft, row = ratios(tool, output.stated["output_tok_s"], output.stated["ttft_p50_s"], ours)
    print(
        f"fleet's client before / after: {ours_before['output_tok_s']:.1f} / {ours_after['output_tok_s']:.1f} tok/s, TTFT p50 {ours_before['ttft_s']['p50'] * 1000:.1f} / {ours_after['ttft_s']['p50'] * 1000:.1f} ms"
    )
    assert abs(tok_s - 1) <= TOK_S_BOUND, row
    assert abs(ttft - 1) <= TTFT_BOUND, row


def test_a_workload_measured_by_bench_serving_is_its_result_and_says_so(bench: Bench) -> None:
    """fleet's agent ran bench_serving for the sweep's second workload: the result names its client,
    its figures (fleet's, from the tool's own records) agree with fleet's client's as the tool's own
    do, and the tool's own statement of them is kept beside them."""
    result = bench.tool_result
    assert (result.client, result.workload["client"]["tool"]) == ("bench_serving", "bench_serving")
    assert len(result.requests) == REQUESTS and all(r["ok"] and r["output_tokens"] == OUTPUT for r in result.requests), result.requests
    [stated] = result.extras["tool"]["stated"]
    assert result.figures["output_tok_s"] == pytest.approx(stated["output_tok_s"] / SIM_SPEED, rel=1e-6)
    tok_s, ttft, row = ratios("bench_serving (fleet's agent)", result.figures["output_tok_s"] * SIM_SPEED, result.figures["ttft_s"]["p50"] * SIM_SPEED, bench.fleet_figures)
    assert abs(tok_s - 1) <= TOK_S_BOUND, row
    assert abs(ttft - 1) <= TTFT_BOUND, row


# A relay on the host between a tool and the server: it appends every POST's path and JSON body to
# a file, one line each, in the order they arrive, and passes the request on (the answer whole, not
# streamed: what is checked here is what was sent, not its timing). Standard library, the host's python3.
RELAY = """
import http.client, json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

listen, upstream, record = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()


class Relay(BaseHTTPRequestHandler):
    def relay(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.command == "POST":
            with lock, open(record, "a", encoding="utf-8") as sink:
                sink.write(json.dumps({"path": self.path, "body": json.loads(body)}) + "\\n")
        server = http.client.HTTPConnection("127.0.0.1", upstream, timeout=600)
        server.request(self.command, self.path, body or None, {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")})
        answer = server.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = relay

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", listen), Relay).serve_forever()
"""
RELAY_PORT = 30101
RECEIVED = "/root/loadgen/received.jsonl"

# A dataset workload's sample as the agent gives it to a tool (ToolLoad.dataset): quotes, a newline,
# a dash, accents and CJK, markup, digits; each its own output length (bench_serving: one for all).
DATASET_PROMPTS = ('Say "hi" \u2014 twice,\nthen stop.', "caf\u00e9 \u65e5\u672c <b>bold</b> 42", "It was the best of times", "007 and 3.14")


@pytest.fixture(scope="module")
def relay(bench: Bench) -> str:
    """The relay, started on the host in front of the server (RELAY_PORT -> PORT)."""
    bench.on_host(f"{bench.work}/relay.py").write_text(RELAY)
    bench.serve(f"python3 relay.py {RELAY_PORT} {PORT} {RECEIVED}", bench.work, "relay.log", f"http://127.0.0.1:{RELAY_PORT}/v1/models", tries=300, timeout=120)
    return RECEIVED


def received(bench: Bench) -> list[tuple[str, int]]:
    """What the server received through the relay, in order: each request's prompt text and max tokens, asked with ignore_eos."""
    sent = []
    for line in bench.on_host(RECEIVED).read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        body = request["body"]
        if request["path"] == "/generate":
            params = body["sampling_params"]
            sent.append((body["text"], params["max_new_tokens"], params["ignore_eos"]))
        else:
            assert request["path"] == "/v1/completions", request
            sent.append((body["prompt"], body["max_tokens"], body["ignore_eos"]))
    assert all(ignore_eos is True for *_, ignore_eos in sent), sent
    return [(prompt, tokens) for prompt, tokens, _ in sent]


# GuideLLM 0.8.1 can lose the record of a benchmark's last request: the thread that receives a
# request's completion sets the shutdown event (WorkerGroupState.received_callback,
# guidellm/scheduler/worker_group.py:752-761) before it puts the update in the buffer
# (utils/messaging.py:757-772), and the loop reading that buffer ends at its next 0.1 s poll timeout
# once the event is set (worker_group.py:425-429); a descheduled thread between the two (a loaded
# machine) loses the update. The server got the request; GuideLLM's benchmarks.json lacks it, and
# fleet's agent fails such a run as client_tool_failed (in_sample_order's count). The test runs the
# tool again on exactly that symptom (every sample received, the records those of the first samples,
# the last missing): any other shortfall still fails it.
GUIDELLM_RACE_TRIES = 3


def lost_its_last_records(output: ToolOutput, samples: tuple[tuple[str, int], ...]) -> bool:
    """GuideLLM's records are those of the first samples only (each once), with at least the last missing."""
    kept, keys = len(output.requests), [key for key in output.keys or [] if key is not None]
    return 0 < kept < len(samples) and len(keys) == kept and sorted(keys) == sorted(guidellm_sample_key(0, prompt, tokens) for prompt, tokens in samples[:kept])


@pytest.mark.parametrize("tool", list(PYTHONS))
def test_the_tool_sends_a_dataset_workloads_samples_as_fleets_client_does(bench: Bench, relay: str, tool: str) -> None:
    """One at a time (so that the order they arrive in is the order they were sent): the server
    receives exactly fleet's samples, each prompt's text as given and its own output length, in
    fleet's order (AIPerf after its warm-up request, the first sample, as fleet's client warms up);
    the tool's own records, matched to the samples as the agent does (tool_sent), are the run's
    requests, each with its sample's tags and its output length."""
    lengths = [4] * len(DATASET_PROMPTS) if tool == "bench_serving" else [4 + i for i in range(len(DATASET_PROMPTS))]
    samples = tuple(zip(DATASET_PROMPTS, lengths))
    warmup = 1 if tool == "aiperf" else 0
    load = ToolLoad(0, 0, len(samples), seed=5, warmup_requests=warmup, dataset=samples)
    assert TOOLS[tool].dataset_refusal(samples) is None
    for attempt in range(1, GUIDELLM_RACE_TRIES + 1):
        bench.on_host(relay).write_text("")
        done = bench.run(tool_command(bench, tool, load, RELAY_PORT, f"{tool}-dataset"), TOOL_TIMEOUT_S)
        assert done.returncode == 0, f"{tool} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert received(bench) == list(samples[:warmup] + samples)
        output = TOOLS[tool].read(bench.on_host(f"{bench.work}/{tool}-dataset"), 0.0)
        if not (tool == "guidellm" and lost_its_last_records(output, samples) and attempt < GUIDELLM_RACE_TRIES):
            break
        print(f"\nGuideLLM lost its last {len(samples) - len(output.requests)} record(s) (its end-of-benchmark race): run again")
    planned = [Planned(prompt, tokens, {"repeat": 0, "request": i, "category": f"c{i % 2}", "max_new_tokens": tokens}) for i, (prompt, tokens) in enumerate(samples)]
    sent = tool_sent(TOOLS[tool], output, load, planned, 0)
    assert [(s.outcome.ok, s.outcome.output_tokens, s.tags) for s in sent] == [(True, p.max_new_tokens, p.tags) for p in planned]
    assert request_figures([s.outcome for s in sent], output.wall_s)["output_tokens"] == sum(lengths)


def test_the_tools_tokenizer_counts_as_the_sims(tmp_path: Path) -> None:
    """The tokenizer the tools get counts every text as fleet.host.tokens does: the sim's own output,
    prose, code, long words, digits, whitespace runs and text none of its vocabulary holds."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer

    corpus = "It was the best of times, it was the worst of times; extraordinarily so."
    built = Tokenizer.from_file(str(build_tokenizer(tmp_path / "tok", corpus) / "tokenizer.json"))
    texts = [
        corpus,
        "def f(x_1):\n\treturn 3.14159 * x_1  # comment\n\n\n    indented   spaces",
        "Unbelievably long wordsmithery: internationalization, a b c, naïve café, 12345 ² ½",
        "  leading spaces and trailing  ",
        " §unknown§ pieces§",
        *("".join(vocabulary) * 3 for vocabulary in tokens.GENERATION_VOCABULARY.values()),  # what the sim generates
    ]
    # A piece the vocabulary lacks decodes to one token of the sim's (`<unk>` would be three).
    assert tokens.count_tokens(built.decode(built.encode(" wordsmithery", add_special_tokens=False).ids)) == 3
    for text in texts:
        encoded = built.encode(text, add_special_tokens=False)
        assert len(encoded.ids) == tokens.count_tokens(text), (text, encoded.tokens, tokens.tokenize(text))
        # Text of the vocabulary decodes back to itself: a prompt decoded from ids re-counts to as many.
        if UNKNOWN not in encoded.tokens:
            assert built.decode(encoded.ids) == text, text
