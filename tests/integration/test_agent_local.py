"""The agent run locally (no SSH) against the real simulator (`python -m fleet.host.engines.sim`),
with the test hosts' fake nvidia-smi on PATH: real processes, real HTTP streams, real log files.

- a shard of healthy servers (more servers than GPUs: the rest start as GPUs free up) completes
  with ok results and plausible figures; a GPU a stranger holds is never handed out;
- a server later in the shard's order starts on a GPU freed early, ahead of its place, and every
  run has exactly one result naming the GPU its server really ran on;
- servers that fail are failed runs with their evidence, never 0 tok/s: an assertion at start-up
  (DFlash, max_running_requests 8 on a 96 GB GPU) fails fast, DDTree b8 on cc 12.0 crashes with
  an illegal instruction, a hung server trips the no-token watchdog;
- stopping the agent (STOP file, SIGTERM) and killing it (SIGKILL) mid-run, then restarting it,
  ends with exactly one result per run, the interrupted runs redone, orphaned servers killed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

from fleet.host.agent.services import ProcessServices, ServiceSpec, pid_alive
from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
from fleet.host.engines.sim.gpu import register_process
from fleet.host.engines.sim.harness import free_port
from fleet.launch import SIM_RELEASE_ENV
from fleet.playbook import Run, expand_runs, load_playbook
from fleet.workloads import resolve_workload
from fleet.workloads.kinds import ConcurrencyWorkload
from tests.integration.waiting import wait_for
from tests.testfleet.gpu_tools import local_gpu_env

REPO = Path(__file__).resolve().parents[2]
SPEED = 0.02
MODEL = ["--model-path", "qwen3.6-27b", "--context-length", "32768", "--mem-fraction-static", "0.75", "--trust-remote-code"]
DRAFT = ["--speculative-draft-model-path", "qwen3.6-27b-dflash", "--speculative-num-draft-tokens", "16", "--mamba-scheduler-strategy", "extra_buffer", "--mamba-full-memory-ratio", "0.5"]
AUTOREGRESSIVE = MODEL + ["--max-running-requests", "4"]
DFLASH = MODEL + ["--speculative-algorithm", "DFLASH", *DRAFT]
DDTREE_B8 = MODEL + ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "8", *DRAFT, "--max-running-requests", "4"]
LIMITS = AgentLimits(server_start_timeout_s=60, request_timeout_s=30, no_token_timeout_s=2)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def seed_runs() -> dict[str, Run]:
    """The seed playbook's four workloads, as runs of its TP1 autoregressive configuration."""
    runs = [r for r in expand_runs(load_playbook(REPO / "playbooks" / "qwen36-specdec.yaml")) if r.server.label == "tp1-autoregressive"]
    return {run.workload_name: run for run in runs}


@pytest.fixture
def host_env(tmp_path: Path) -> dict[str, str]:
    """The agent's environment: fake nvidia-smi first on PATH, its state in FLEET_FAKE_GPU_DIR."""
    env = local_gpu_env(tmp_path / "gpu-tools", os.environ)
    env["PYTHONPATH"] = str(REPO)
    return env


def server(server_id: str, gpu: int, args: list[str], runs: list[Run], *, speed: float = SPEED, faults: Path | None = None, estimate_s: float | None = None) -> ServerSpec:
    """`gpu`: the plan's hint; the agent places it on whichever GPU of the pool frees."""
    port = free_port()
    # The seed campaign's flags and memory settings: the simulator plays the seed's release.
    env = {"CUDA_VISIBLE_DEVICES": str(gpu), "FLEET_SIM_SPEED": str(speed), SIM_RELEASE_ENV: "0.5.12"}
    if faults is not None:
        env["FLEET_SIM_FAULTS"] = str(faults)
    return ServerSpec(
        server_id=server_id,
        label=server_id,
        gpus=[gpu],
        port=port,
        argv=[sys.executable, "-m", "fleet.host.engines.sim", *args, "--port", str(port)],
        env=env,
        unit_name=f"fleet-test-{server_id}",
        estimate_s=estimate_s,
        # The run id is the playbook's; suffixed so that one run can be served by several servers here.
        runs=[RunSpec(f"{run.id}-{server_id}", f"{server_id}/{run.workload_name}", resolve_workload(run)) for run in runs],
    )


def write_shard(sweep: Path, servers: list[ServerSpec], pool: list[int] | None = None) -> Shard:
    shard = Shard(sweep_id=sweep.name, host="local", boot_id="", service_manager="process", limits=LIMITS, servers=servers, gpus=pool)
    sweep.mkdir(parents=True, exist_ok=True)
    (sweep / "shard.json").write_text(shard.to_json())
    return shard


def start_agent(sweep: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    log = open(sweep / "agent.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "fleet.host.agent", "run", "--sweep-dir", str(sweep)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def results(sweep: Path) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in (sweep / "runs").glob("*.json")}


def progress(sweep: Path) -> dict[str, Any]:
    return json.loads((sweep / "progress.json").read_text())


def service_pids(sweep: Path) -> list[int]:
    return [json.loads(p.read_text())["pid"] for p in (sweep / "services").glob("*.pid")]


@pytest.fixture
def agents() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Agents a test started; whatever is left of them and their servers is killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for agent in started:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()


def kill_leftover_servers(sweep: Path) -> None:
    for pid in service_pids(sweep):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_no_gpu_shared_at_once(results: Iterable[dict[str, Any]]) -> None:
    """From the results: servers whose runs overlap in time ran on disjoint GPUs."""
    spans: dict[str, tuple[float, float, set[int]]] = {}
    for result in results:
        if result["status"] == "skipped" or result["ended_at"] <= result["started_at"]:
            continue  # nothing ran
        began, ended, gpus = spans.get(result["server_id"], (result["started_at"], result["ended_at"], set(result["gpus"])))
        spans[result["server_id"]] = (min(began, result["started_at"]), max(ended, result["ended_at"]), gpus)
    for a, (a0, a1, a_gpus) in spans.items():
        for b, (b0, b1, b_gpus) in spans.items():
            if a < b and a0 < b1 and b0 < a1:
                assert not a_gpus & b_gpus, (a, b, a_gpus & b_gpus)


def assert_never_zero_tok_s(result: dict[str, Any]) -> None:
    for figures in [result["figures"], *result.get("levels", [])]:
        for key in ("output_tok_s", "output_tok_s_per_request", "request_throughput"):
            assert figures[key] is None or figures[key] > 0, (result["label"], key, figures[key])


def test_sweep_of_healthy_and_failing_servers(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    hang = tmp_path / "hang.json"
    # 2 warm-up requests + the lossless check's 4 greedy prompts + 1 measured, then silence
    hang.write_text(json.dumps({"hang_after_requests": 7}))
    short, long_context, concurrency, agentic = (seed_runs[k] for k in ("short", "long_context", "concurrency", "agentic"))
    servers = [
        server("ar", 0, AUTOREGRESSIVE, [short, concurrency]),
        server("dflash", 1, DFLASH + ["--max-running-requests", "4"], [long_context, agentic]),
        server("ar-again", 0, AUTOREGRESSIVE, [short, long_context]),  # nine servers, eight GPUs: it waits for one to free
        server("dflash-mrr8", 2, DFLASH + ["--max-running-requests", "8"], [short, concurrency]),
        server("ddtree-b8", 3, DDTREE_B8, [short, agentic]),
        server("hung", 4, AUTOREGRESSIVE, [short, concurrency], faults=hang),
        server("noisy", 5, AUTOREGRESSIVE, [short]),
        server("reclaimed", 6, AUTOREGRESSIVE, [short]),  # GPU 6 held by a stale fleet server of an earlier sweep
        server("blocked", 7, AUTOREGRESSIVE, [short]),  # planned on GPU 7, which someone else's process holds
    ]
    # A server that logs a traceback it survives (as servers do when a client hangs up) still serves.
    noisy = next(s for s in servers if s.server_id == "noisy")
    noisy.argv[:] = ["sh", "-c", 'echo "Traceback (most recent call last):"; echo "ValueError: client went away"; exec "$@"', "sh", *noisy.argv]
    sweep = tmp_path / "sweep-a"
    shard = write_shard(sweep, servers)
    gpu_procs = Path(host_env["FLEET_FAKE_GPU_DIR"]) / "procs"
    earlier = ProcessServices(tmp_path / "earlier-sweep")
    stale_port = free_port()
    earlier.start(
        ServiceSpec(
            "fleet-srv-old",
            [sys.executable, "-m", "fleet.host.engines.sim", *AUTOREGRESSIVE, "--port", str(stale_port)],
            {**host_env, "CUDA_VISIBLE_DEVICES": "6", "FLEET_SIM_SPEED": str(SPEED)},
            str(tmp_path / "old.log"),
        )
    )
    stranger = subprocess.Popen(["sleep", "120"])
    register_process(str(gpu_procs.parent), stranger.pid, [7], 2048)
    # The stale server registers its GPU use once it loads weights.
    wait_for(lambda: len(list(gpu_procs.glob("*.json"))) >= 2, 30, "the stale server on GPU 6")
    began = time.time()
    agents.append(start_agent(sweep, host_env))
    try:
        assert agents[0].wait(timeout=120) == 0, (sweep / "agent.log").read_text()
        assert stranger.poll() is None  # never touched
    finally:
        kill_leftover_servers(sweep)
        earlier.stop("fleet-srv-old", grace_s=5)
        stranger.kill()
        stranger.wait()
    by_run = results(sweep)
    assert sorted(by_run) == sorted(run.run_id for _, run in shard.runs)  # exactly one result per run
    state = progress(sweep)
    assert state["state"] == "finished" and state["counts"]["remaining"] == 0 and state["counts"]["done"] == 15
    by_label = {r["label"]: r for r in by_run.values()}
    for result in by_label.values():
        assert_never_zero_tok_s(result)

    # Healthy servers: ok, with figures that hang together.
    for label in ("ar/short", "ar/concurrency", "dflash/long_context", "dflash/agentic", "ar-again/short", "ar-again/long_context", "noisy/short", "reclaimed/short"):
        result = by_label[label]
        figures = result["figures"]
        assert result["status"] == "ok" and result["failure"] is None, (label, result["failure"])
        assert figures["requests"]["ok"] == figures["requests"]["sent"] > 0
        measured = result["levels"][-1] if result["workload"]["kind"] == "concurrency" else figures  # figures per level only
        assert measured["output_tok_s"] > 0 and measured["ttft_s"]["p50"] < measured["e2e_s"]["p50"]
        assert measured["itl_s"]["p99"] < measured["e2e_s"]["max"]
        assert result["server"]["context_len"] == 32768 and result["server"]["max_running_requests"] == 4
        assert 32768 - 10 < result["server"]["max_req_input_len"] < 32768
        assert result["attempt"] == 1 and result["host_facts"] is None
    assert "ValueError: client went away" in Path(by_label["noisy/short"]["log_path"]).read_text()  # and it served
    assert by_label["ar/short"]["figures"]["output_tokens"] == 12 * 256  # 3 rounds of the 4 prompts: enough for a p90
    assert by_label["ar/short"]["figures"]["acceptance_length"] is None
    assert by_label["ar/short"]["figures"]["tokens_per_chunk"]["mean"] == 1.0
    dflash = by_label["dflash/agentic"]["figures"]
    assert dflash["acceptance_length"] > 1.5 and dflash["tokens_per_chunk"]["mean"] > 1.5
    # One gap per chunk spread over its tokens: as many ITL entries as tokens after the first chunk.
    assert dflash["itl_s"]["n"] < dflash["output_tokens"]
    assert [level["level"] for level in by_label["ar/concurrency"]["levels"]] == [1, 2, 4]
    turns = by_label["dflash/agentic"]["turns"]
    assert [t["ok"] for t in turns] == [2] * 6  # two sessions
    assert all(a["prompt_tokens_mean"] < b["prompt_tokens_mean"] for a, b in zip(turns, turns[1:]))  # a growing conversation
    calibration = by_label["ar-again/long_context"]["calibration"]
    assert 2 <= len(calibration["probes"]) <= 5
    assert calibration["chosen_prompt_tokens"] + 256 + 64 <= 32768
    assert calibration["chosen_prompt_tokens"] >= 0.99 * calibration["target_prompt_tokens"]
    assert by_label["ar-again/long_context"]["requests"][0]["prompt_tokens"] <= calibration["chosen_prompt_tokens"] + 2
    # Nine servers on eight GPUs: never two of them on one GPU at once.
    assert_no_gpu_shared_at_once(by_run.values())

    # DFlash with max_running_requests 8 on 96 GB: asserts at start-up; failed fast, with evidence.
    for workload in ("short", "concurrency"):
        result = by_label[f"dflash-mrr8/{workload}"]
        assert result["status"] == "failed" and result["figures"]["output_tok_s"] is None
        failure = result["failure"]
        assert failure["class"] == "server_start_failed"
        assert any("AssertionError: max_running_request is zero" in line for line in failure["evidence"])
        assert failure["exit_code"] not in (None, 0) and Path(failure["log_path"]).exists()
        assert result["ended_at"] - began < 20  # the start timeout is 60 s: nobody waited it out

    # DDTree b8 on compute capability 12.0: an illegal instruction on the first decode.
    for workload in ("short", "agentic"):
        result = by_label[f"ddtree-b8/{workload}"]
        assert result["status"] == "failed" and result["figures"]["output_tok_s"] is None
        assert result["failure"]["class"] == "server_died"
        assert any("CUDA error: an illegal instruction was encountered" in line for line in result["failure"]["evidence"])

    # A server that hangs after its first measured request: the watchdog cuts the stream, the run
    # keeps what it measured, the next run is failed -- both with the class and evidence.
    first, second = by_label["hung/short"], by_label["hung/concurrency"]
    assert first["status"] == "partial" and first["failure"]["class"] == "server_hung"
    assert first["figures"]["requests"]["ok"] == 1 and first["figures"]["output_tok_s"] > 0
    assert first["figures"]["errors"]["no_token_timeout"]["count"] == 1
    assert first["figures"]["requests"]["timed_out"] == 1
    assert second["status"] == "failed" and second["failure"]["class"] == "server_hung"

    # GPU 6: the earlier sweep's server was killed to make room; GPU 7: a stranger's, never handed
    # out (and the stranger left alone): the server planned there ran on a GPU that freed.
    for label in ("reclaimed/short", "blocked/short"):
        assert by_label[label]["status"] == "ok", (label, by_label[label]["failure"], (sweep / "agent.log").read_text())
    assert by_label["blocked/short"]["gpus"] != [7]
    assert not [r["label"] for r in by_run.values() if 7 in r["gpus"]]
    assert all(len(r["gpus"]) == 1 for r in by_run.values())

    # Everything fleet started was stopped: no server process, no port held, no GPU process left but the stranger's.
    assert not [pid for pid in service_pids(sweep) if pid_alive(pid)]
    alive = [p for p in gpu_procs.glob("*.json") if pid_alive(int(p.stem))]
    assert alive == []
    for spec in servers:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", spec.port)) != 0


def gpu_use_sampler(gpu_dir: Path, sweep: Path, seen: dict[int, set[int]], units: dict[str, Any], done: threading.Event) -> threading.Thread:
    """Every 50 ms: which GPUs each process tells the fake nvidia-smi it holds (the sim registers
    what its CUDA_VISIBLE_DEVICES shows it), into `seen` by its process group (a service's pid
    leads its group); each service's pid, by unit; and the GPUs progress.json gives each server."""

    def sample() -> None:
        while not done.wait(0.05):
            for path in [*(gpu_dir / "procs").glob("*.json"), *(sweep / "services").glob("*.pid"), sweep / "progress.json"]:
                try:
                    record = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if path.name == "progress.json":
                    for server_id, server in record["servers"].items():  # what `fleet status` reads: where each server runs
                        units[f"progress {server_id}"] = tuple(server["gpus"])
                elif path.suffix == ".pid":
                    units[path.stem] = int(record["pid"])
                else:
                    try:
                        group = os.getpgid(int(record["pid"]))
                    except ProcessLookupError:
                        continue
                    seen.setdefault(group, set()).update(record["gpus"])

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return thread


def test_a_server_starts_on_a_gpu_freed_early_ahead_of_its_place_in_the_order(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    """Two GPUs, four servers in the controller's order long (GPU 0), short (GPU 1), then two
    planned after them on GPUs 0 and 1. The short one ends early: the next in the order, planned
    to wait for GPU 0, starts on GPU 1 while the long one still runs (the agent before waited)."""
    short, long_context, concurrency, agentic = (seed_runs[k] for k in ("short", "long_context", "concurrency", "agentic"))
    servers = [
        server("long", 0, AUTOREGRESSIVE, [long_context, concurrency], speed=SPEED * 2, estimate_s=20),
        server("short", 1, AUTOREGRESSIVE, [short], estimate_s=20),
        server("next-on-0", 0, AUTOREGRESSIVE, [short, agentic], estimate_s=5),
        server("next-on-1", 1, AUTOREGRESSIVE, [short], estimate_s=5),
    ]
    sweep = tmp_path / "sweep-early"
    shard = write_shard(sweep, servers)
    seen: dict[int, set[int]] = {}
    units: dict[str, Any] = {}
    done = threading.Event()
    sampler = gpu_use_sampler(Path(host_env["FLEET_FAKE_GPU_DIR"]), sweep, seen, units, done)
    agents.append(start_agent(sweep, host_env))
    try:
        assert agents[-1].wait(timeout=120) == 0, (sweep / "agent.log").read_text()
    finally:
        done.set()
        sampler.join()
        kill_leftover_servers(sweep)
    by_run = results(sweep)
    assert sorted(by_run) == sorted(run.run_id for _, run in shard.runs)  # exactly one result per run
    assert {r["status"] for r in by_run.values()} == {"ok"}
    by_server: dict[str, list[dict[str, Any]]] = {}
    for result in by_run.values():
        by_server.setdefault(result["server_label"], []).append(result)
    gpus = {label: {tuple(r["gpus"]) for r in mine} for label, mine in by_server.items()}
    assert gpus["long"] == {(0,)} and gpus["short"] == {(1,)}
    # Ahead of its place: on the GPU "short" freed, while "long" (planned before it on GPU 0) still ran.
    assert gpus["next-on-0"] == {(1,)}, gpus
    log = (sweep / "agent.log").read_text().splitlines()
    launched = log.index(next(line for line in log if "server next-on-0 (next-on-0): launching on GPUs 1" in line))
    assert launched < log.index(next(line for line in log if "server long (long): stopped" in line))
    assert min(r["started_at"] for r in by_server["next-on-0"]) < max(r["ended_at"] for r in by_server["long"])
    # And the server really ran there: its process registered GPU 1, nothing else.
    pid = units["fleet-test-next-on-0"]
    assert seen.get(pid) == {1}, (pid, units, seen)
    assert units["progress next-on-0"] == (1,) and units["progress long"] == (0,)
    assert_no_gpu_shared_at_once(by_run.values())


def test_a_server_no_gpu_but_a_strangers_can_hold_fails_naming_it(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    """The pool is GPU 7 alone and a process fleet did not start holds it: the agent does not wait
    for it forever, nor touch it; the server's runs fail with the holder as evidence."""
    sweep = tmp_path / "sweep-blocked"
    write_shard(sweep, [server("blocked", 7, AUTOREGRESSIVE, [seed_runs["short"]])], pool=[7])
    stranger = subprocess.Popen(["sleep", "120"])
    register_process(host_env["FLEET_FAKE_GPU_DIR"], stranger.pid, [7], 2048)
    agents.append(start_agent(sweep, host_env))
    try:
        assert agents[-1].wait(timeout=60) == 0, (sweep / "agent.log").read_text()
        assert stranger.poll() is None  # never touched
    finally:
        kill_leftover_servers(sweep)
        stranger.kill()
        stranger.wait()
    (blocked,) = results(sweep).values()
    assert blocked["status"] == "failed" and blocked["failure"]["class"] == "port_or_gpu_busy"
    assert blocked["failure"]["evidence"] == [f"pid {stranger.pid} holds GPU 7: sleep 120"]
    assert blocked["gpus"] == [7]


def started_without_result(sweep: Path) -> list[str]:
    """The run ids an agent started (attempts/<run-id>.json) that have no result."""
    done = results(sweep)
    return sorted(path.stem for path in (sweep / "attempts").glob("*.json") if path.stem not in done)


def running_runs(sweep: Path) -> list[str]:
    """The labels of the runs in progress that have no result yet, from progress.json."""
    try:
        servers = progress(sweep)["servers"]
    except (OSError, ValueError):
        return []
    done = {r["label"] for r in results(sweep).values()}
    return [s["run"] for s in servers.values() if s["phase"] == "running" and s["run"] and s["run"] not in done]


def test_stop_kill_and_resume_leave_exactly_one_result_per_run(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    short, agentic = seed_runs["short"], seed_runs["agentic"]
    # Wide enough levels that a run lasts long enough to be interrupted.
    wide = Run(short.server, "concurrency", ConcurrencyWorkload(kind="concurrency", levels=[1, 2, 4], requests_per_level=6), 1)
    servers = [
        server("a", 0, AUTOREGRESSIVE, [short, wide, agentic], speed=0.05),
        server("b", 1, AUTOREGRESSIVE, [agentic, short, wide], speed=0.05),
    ]
    sweep = tmp_path / "sweep-b"
    shard = write_shard(sweep, servers)
    try:
        # 1. A clean stop through the STOP file while runs are in progress.
        agents.append(start_agent(sweep, host_env))
        wait_for(lambda: running_runs(sweep) and results(sweep), 40, "a first result")
        (sweep / "STOP").write_text("")
        assert agents[-1].wait(timeout=40) == 0
        assert progress(sweep)["state"] == "stopped" and not (sweep / "STOP").exists()
        assert not [pid for pid in service_pids(sweep) if pid_alive(pid)]
        after_stop = results(sweep)

        # 2. A crash: SIGKILL in the middle of a run; its servers live on.
        agents.append(start_agent(sweep, host_env))
        wait_for(lambda: len(results(sweep)) > len(after_stop), 40, "a result after the restart")
        orphans = wait_for(lambda: [pid for pid in service_pids(sweep) if pid_alive(pid)], 10, "a running server")
        wait_for(lambda: running_runs(sweep), 40, "a run in progress")
        os.kill(agents[-1].pid, signal.SIGKILL)
        agents[-1].wait()
        # What it had started and not finished when it died: the runs with an attempt recorded and
        # no result (a run seen in progress may have ended before the kill, or not yet started:
        # the agent shows a run in progress a moment before it counts the attempt).
        interrupted = started_without_result(sweep)
        assert interrupted, "the SIGKILL interrupted no run"
        assert all(pid_alive(pid) for pid in orphans)

        # 3. SIGTERM while the servers are starting: they are stopped, nothing is written.
        before = results(sweep)
        agents.append(start_agent(sweep, host_env))
        wait_for(lambda: progress(sweep)["agent_pid"] == agents[-1].pid and progress(sweep)["servers"], 20, "servers starting")
        wait_for(lambda: not any(pid_alive(pid) for pid in orphans), 20, "the orphans killed, not adopted")
        agents[-1].send_signal(signal.SIGTERM)
        assert agents[-1].wait(timeout=40) == 0
        assert progress(sweep)["state"] == "stopped" and results(sweep).keys() == before.keys()
        assert not [pid for pid in service_pids(sweep) if pid_alive(pid)]

        # 4. Resume to the end: the interrupted runs are redone.
        agents.append(start_agent(sweep, host_env))
        assert agents[-1].wait(timeout=90) == 0, (sweep / "agent.log").read_text()
    finally:
        kill_leftover_servers(sweep)
    by_run = results(sweep)
    assert sorted(by_run) == sorted(run.run_id for _, run in shard.runs)
    assert {r["status"] for r in by_run.values()} == {"ok"}
    assert all(by_run[run_id]["attempt"] >= 2 for run_id in interrupted), [(by_run[r]["label"], by_run[r]["attempt"]) for r in interrupted]
    assert progress(sweep)["state"] == "finished" and progress(sweep)["counts"]["ok"] == 6
    assert not list((sweep / "runs").glob(".*.tmp"))


def test_a_server_killed_with_sigkill_mid_run_is_a_crash_with_its_signal_not_a_hang(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    """The kernel's OOM killer, as a `kill -9` of the server's own process while it serves: the
    run is `server_died` with exit code -9 (137 from the shell) and says so, never `server_hung`."""
    short = seed_runs["short"]
    wide = Run(short.server, "concurrency", ConcurrencyWorkload(kind="concurrency", levels=[1, 2, 4], requests_per_level=6), 1)
    victim = server("victim", 0, AUTOREGRESSIVE, [wide, short], speed=0.05)
    sweep = tmp_path / "sweep-kill"
    write_shard(sweep, [victim])
    agents.append(start_agent(sweep, host_env))
    try:
        wait_for(lambda: "victim/concurrency" in running_runs(sweep), 60, "the victim serving its first run")
        main = int((sweep / "services" / f"{victim.unit_name}.main").read_text())
        killed_at = time.time()
        os.kill(main, signal.SIGKILL)
        assert agents[-1].wait(timeout=60) == 0, (sweep / "agent.log").read_text()
    finally:
        kill_leftover_servers(sweep)
    by_label = {r["label"]: r for r in results(sweep).values()}
    assert sorted(by_label) == ["victim/concurrency", "victim/short"]
    for label, result in by_label.items():
        failure = result["failure"]
        assert result["status"] in ("failed", "partial") and failure["class"] == "server_died", (label, failure)
        assert failure["exit_code"] == -9, (label, failure)
        assert "was killed by signal 9 (SIGKILL; exit status 137)" in failure["message"] and "OOM killer" in failure["message"], failure
        assert "hung" not in failure["message"] and "did not answer" not in failure["message"]
    # Noticed at once: well within the death grace, nowhere near a 20-second health timeout.
    assert by_label["victim/concurrency"]["ended_at"] - killed_at < 8
    assert not [pid for pid in service_pids(sweep) if pid_alive(pid)]


def put_shard(sweep: Path, shard: Shard) -> None:
    """As the controller puts it: a whole new file, by rename."""
    temp = sweep / ".shard.json.tmp"
    temp.write_text(shard.to_json())
    os.replace(temp, sweep / "shard.json")


def test_servers_appended_to_the_shard_start_in_the_running_agent_and_a_change_is_refused(tmp_path: Path, host_env: dict[str, str], seed_runs: dict[str, Run], agents: list) -> None:
    """Two GPUs; a long server runs on one. A rewrite of shard.json that changes a server is
    refused (logged) and the agent goes on; one that appends a server (a fixed variant) is taken
    in: the same agent launches it on the free GPU while the long server still runs, and its runs
    join the progress total. One result per run, the refused change never applied."""
    short, long_context, concurrency = (seed_runs[k] for k in ("short", "long_context", "concurrency"))
    long_server = server("long", 0, AUTOREGRESSIVE, [long_context, concurrency], speed=SPEED * 2, estimate_s=20)
    sweep = tmp_path / "sweep-grow"
    shard = write_shard(sweep, [long_server], pool=[0, 1])
    agents.append(start_agent(sweep, host_env))
    try:
        wait_for(lambda: running_runs(sweep), 60, "the long server to serve")
        # Not an append: the long server's port changed. Refused; the agent works on with what it has.
        put_shard(sweep, replace(shard, servers=[replace(long_server, port=free_port())]))
        wait_for(lambda: "shard change refused" in (sweep / "agent.log").read_text(), 10, "the refusal in the agent's log")
        variant = server("variant", 0, AUTOREGRESSIVE, [short])
        put_shard(sweep, replace(shard, servers=[long_server, variant]))
        assert agents[-1].wait(timeout=120) == 0, (sweep / "agent.log").read_text()
    finally:
        kill_leftover_servers(sweep)
    log = (sweep / "agent.log").read_text()
    assert "servers[long]: expected unchanged (a shard only grows: new servers are appended)" in log
    assert "shard grew: server variant (variant) appended, 1 runs" in log
    assert log.count("fleet-agent INFO sweep ") == 1  # one agent, started once
    lines = log.splitlines()
    launched = next(i for i, line in enumerate(lines) if "server variant (variant): launching on GPUs 1" in line)
    assert launched < next(i for i, line in enumerate(lines) if "server long (long): stopped" in line)
    by_run = results(sweep)
    assert sorted(by_run) == sorted([*(r.run_id for r in long_server.runs), *(r.run_id for r in variant.runs)])
    assert {r["status"] for r in by_run.values()} == {"ok"} and {r["attempt"] for r in by_run.values()} == {1}
    assert progress(sweep)["total"] == 3 and progress(sweep)["state"] == "finished"
    (variant_result,) = [r for r in by_run.values() if r["server_id"] == "variant"]
    assert variant_result["ended_at"] < max(r["ended_at"] for r in by_run.values() if r["server_id"] == "long")
