"""Is the simulator ever the bottleneck of what it simulates?

Starts a real `python -m fleet.host.engines.sim` process, drives 64 concurrent streaming /generate
requests at it from this process, and measures the server process' own CPU time (utime + stime
from /proc/<pid>/stat) per emitted token. That overhead is compared with the simulated decode step
time at batch 64 (the perf model's step, scaled by the speed factor): the simulator keeps up as
long as the overhead per token is a small fraction of a step, because a step emits at least one
token for every one of the 64 streams.

    python benchmarks/bench_sim.py [--requests 128] [--new-tokens 128] [--speeds 1.0 0.1 0.02]

Prints one row per (configuration, speed) and the verdict for speed 1.0 (real time): ratio < 0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.host.engines.sim import perf  # noqa: E402
from fleet.host.engines.sim.harness import start_sim  # noqa: E402
from fleet.host.engines.sim.server import SimServer, prepare  # noqa: E402

STREAMS = 64
BASE = ["--model-path", "qwen3.6-27b", "--context-length", "32768", "--max-running-requests", str(STREAMS), "--disable-radix-cache", "--decode-log-interval", "40"]
CONFIGS = {
    "autoregressive": BASE,
    # 64 requests' intermediate mamba states for 16 draft tokens only fit when sharded over 8 GPUs.
    "dflash-tp8": BASE + ["--tp-size", "8", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "qwen3.6-27b-dflash"],
}
PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "Implement quicksort in C and explain it.",
    "Compute 1234 * 5678 + 91 step by step.",
    "Tell me about the history of the Roman empire.",
]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat(5) (utime, stime) are the 12th and 13th after the ")".
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def simulated_step_s(args: list[str], speed: float) -> tuple[float, float, int]:
    """The perf model's decode step at batch 64 (scaled), its mean accept length, the effective
    max_running_requests: computed by the same code the server runs."""
    server = prepare(args + ["--sim-gpu-count", "8"], {}, io.StringIO(), io.StringIO())
    assert isinstance(server, SimServer), "configuration does not start"
    engine = server.build_engine()
    config = engine.config
    batch = min(STREAMS, config.max_running_requests)
    step = engine.model.decode_step_s(batch, config.verify_tokens, batch * 200)
    accept = 1.0
    if config.algorithm:
        lengths = [perf.acceptance(config.algorithm, perf.classify_prompt(p), config.spec_num_draft_tokens, config.ddtree_budget).mean_length for p in PROMPTS]
        accept = sum(lengths) / len(lengths)
    return step * speed, accept, config.max_running_requests


async def one_request(port: int, prompt: str, new_tokens: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"text": prompt, "sampling_params": {"max_new_tokens": new_tokens}, "stream": True}).encode()
    writer.write(b"POST /generate HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
    # Only the last chunk is decoded: the client's CPU must not be what limits the run.
    last = b""
    async for line in reader:
        if line.startswith(b"data: {"):
            last = line
    writer.close()
    return json.loads(last[6:])["meta_info"]["completion_tokens"] if last else 0


async def drive(port: int, requests: int, new_tokens: int) -> int:
    semaphore = asyncio.Semaphore(STREAMS)

    async def bounded(index: int) -> int:
        async with semaphore:
            return await one_request(port, PROMPTS[index % len(PROMPTS)] + f" ({index})", new_tokens)

    return sum(await asyncio.gather(*(bounded(i) for i in range(requests))))


def measure(name: str, args: list[str], speed: float, requests: int, new_tokens: int, workdir: Path) -> dict:
    step_s, accept, max_running = simulated_step_s(args, speed)
    server = start_sim(args + ["--sim-gpu-count", "8"], workdir / f"{name}-{speed}.log", speed=speed)
    try:
        if not server.wait_ready(120):
            raise RuntimeError(f"{name} did not start:\n{server.log()[-2000:]}")
        cpu_before, wall_before = cpu_seconds(server.process.pid), time.monotonic()
        tokens = asyncio.run(drive(server.port, requests, new_tokens))
        cpu = cpu_seconds(server.process.pid) - cpu_before
        wall = time.monotonic() - wall_before
    finally:
        server.stop()
    per_token = cpu / tokens
    return {
        "config": name,
        "speed": speed,
        "max_running": max_running,
        "tokens": tokens,
        "wall_s": wall,
        "server_cpu_s": cpu,
        "cpu_us_per_token": per_token * 1e6,
        "sim_step_ms": step_s * 1e3,
        "ratio": per_token / step_s,
        "achieved_tok_s": tokens / wall,
        "model_tok_s": max_running * accept / step_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--speeds", type=float, nargs="+", default=[1.0, 0.1, 0.02])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as workdir:
        for name in options.configs:
            for speed in options.speeds:
                rows.append(measure(name, CONFIGS[name], speed, options.requests, options.new_tokens, Path(workdir)))
                row = rows[-1]
                print(
                    f"{row['config']:>14} speed={row['speed']:<5} streams={STREAMS} max_running={row['max_running']} "
                    f"tokens={row['tokens']} wall={row['wall_s']:.1f}s server_cpu={row['server_cpu_s']:.2f}s "
                    f"cpu/token={row['cpu_us_per_token']:.1f}us sim_step={row['sim_step_ms']:.2f}ms "
                    f"ratio={row['ratio']:.4f} achieved={row['achieved_tok_s']:.0f} tok/s "
                    f"(model at full batch {row['model_tok_s']:.0f} tok/s)",
                    flush=True,
                )
    real_time = [row for row in rows if row["speed"] == 1.0]
    worst = max((row["ratio"] for row in real_time), default=None)
    if worst is not None:
        verdict = "PASS" if worst < 0.1 else "FAIL"
        print(f"{verdict}: at speed 1.0 and {STREAMS} streams the simulator's CPU per token is at most {worst:.4f} of a simulated decode step (limit 0.1)")
        return 0 if verdict == "PASS" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
