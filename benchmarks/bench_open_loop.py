"""The open-loop client's lateness at many streams (issue 22: "the schedule-delay bound measured at
512 streams against the sim").

An open-loop run sends each request at its scheduled time whether or not earlier ones finished
(fleet/host/agent/kinds/listed.py `open_loop`); a request sent late loads the server less than
asked, so the agent records each request's lateness and turns a median above MAX_SCHEDULE_DELAY_S
(10 ms) into a `client_behind` deviation (fleet/host/agent/results.py). This measures that
lateness with the agent's own code (drive, the streaming client, build_result) against a real sim
server (SGLang's play, Llama 3.1 8B on one simulated H200, its scheduler cap above the streams),
at 64 and 512 streams in flight: `max_in_flight` streams at once and a rate high enough to keep
them all busy (a request the cap held is due when a slot frees: only the client's own lateness
counts). The sim runs at speed 1 (real time) on this machine, beside the client: its CPU is part
of what the client competes with, as on a host that runs fleet's agent beside a real server's
CPU-side work.

    python benchmarks/bench_open_loop.py [--streams 64,512] [--requests-per-stream 4] [--json PATH]

Prints, per stream count: the sending processes the agent chose (fleet.host.agent.senders; 1: the
agent's own threads), requests sent/ok, schedule delay p50/p90/p99/max (ms), whether the p50 is
within the bound, wall seconds and the machine's load average during the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.host.agent.client import Client, Endpoint  # noqa: E402
from fleet.host.agent.drive import drive  # noqa: E402
from fleet.host.agent.driver import Driver, Gate, ServerFacts  # noqa: E402
from fleet.host.agent.results import MAX_SCHEDULE_DELAY_S, RunIdentity, build_result  # noqa: E402
from fleet.host.agent.senders import sender_count, usable_cpus  # noqa: E402
from fleet.host.contract.shard import AgentLimits, RunSpec  # noqa: E402
from fleet.host.engines.sim.harness import start_sim  # noqa: E402
from tests.testfleet.gpu_tools import local_gpu_env  # noqa: E402

H200 = {"name": "NVIDIA H200", "count": 1, "memory_total_mib": 143771, "compute_cap": "9.0"}


def random_workload(streams: int, requests: int) -> dict[str, Any]:
    """A `random` workload as fleet.workloads.resolve_workload hands it to the agent (at time scale
    1): 128 input and 128 output tokens, a rate that schedules every request within the first
    second, `streams` in flight at most. Written out, not resolved, so that this runs where only the
    standard library is (a GPU machine without fleet's controller dependencies)."""
    load = {"rate": float(requests), "burstiness": 1.0, "max_in_flight": streams, "warmup_requests": 0, "seed": 3, "time_scale": 1.0}
    return {"name": "w", "kind": "random", "max_new_tokens": 128, "input_tokens": 128, "requests": requests, "seed": 1, "load": load, "slo": None}


def measure(port: int, streams: int, requests: int) -> dict[str, Any]:
    spec = RunSpec("r", "bench", random_workload(streams, requests), 1)
    limits = AgentLimits(request_timeout_s=600, no_token_timeout_s=120)
    driver = Driver(Client(Endpoint("127.0.0.1", port)), limits, ServerFacts(), Gate(lambda: None, threading.Event()), spec)
    identity = RunIdentity(run_id="r", label="b", server_id="s", server_label="b", sweep_id="bench", host="local", boot_id="b", attempt=1,
                           agent_pid=os.getpid(), gpus=(0,), server={}, log_path="b.log", host_facts=None, provenance=None, engine_release="0.5.23")  # fmt: skip
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    result = build_result(identity=identity, workload=spec.workload, outcome=drive(driver), started_at=time.time(), ended_at=time.time())
    wall = time.monotonic() - began
    delay = result.figures["schedule_delay_s"] or {}
    counts = result.figures["requests"]

    def ms(name: str) -> float | None:
        value = delay.get(name)
        return None if value is None else round(value * 1000, 2)

    return {
        "streams": streams, "senders": sender_count(streams, usable_cpus()), "cpus": usable_cpus(), "requests": counts["sent"], "ok": counts["ok"], "delay_ms": {q: ms(q) for q in ("p50", "p90", "p99", "max")},
        "within_bound": delay.get("p50") is not None and delay["p50"] <= MAX_SCHEDULE_DELAY_S, "deviations": [d.kind for d in result.deviations],
        "wall_s": round(wall, 1), "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="64,512")
    parser.add_argument("--requests-per-stream", type=int, default=4)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval for the client (Python's default 0.005 s)")
    args = parser.parse_args()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    rows = []
    with tempfile.TemporaryDirectory() as base:
        env = local_gpu_env(Path(base) / "gpu", os.environ, H200)
        counts = [int(s) for s in args.streams.split(",")]
        server_args = ["--model-path", "llama-3.1-8b-instruct", "--context-length", "4096", "--mem-fraction-static", "0.85", "--max-running-requests", str(max(counts) * 2)]
        server = start_sim(server_args, Path(base) / "server.log", env={**env, "CUDA_VISIBLE_DEVICES": "0"}, speed=1.0)
        try:
            assert server.wait_ready(180), server.log()[-3000:]
            for streams in counts:
                row = measure(server.port, streams, streams * args.requests_per_stream)
                rows.append(row)
                d = row["delay_ms"]
                print(
                    f"streams {streams:>4} from {row['senders']} process(es) on {row['cpus']} CPUs: {row['ok']}/{row['requests']} ok, schedule delay p50 {d['p50']} ms, p90 {d['p90']}, p99 {d['p99']}, max {d['max']} "
                    f"({'within' if row['within_bound'] else 'ABOVE'} the {MAX_SCHEDULE_DELAY_S * 1000:.0f} ms bound), {row['wall_s']} s, load {row['load_avg']}",
                    flush=True,
                )
        finally:
            server.stop()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
