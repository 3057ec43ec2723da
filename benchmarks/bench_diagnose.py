"""How fast is `fleet diagnose` on a huge log, next to `grep -E -n` with the catalogue's patterns?

Generates (once, reused while its size and content version match) a realistic SGLang log under
/var/tmp: a TP4 hybrid-model DFlash startup, millions of Prefill/Decode lines with uvicorn access
lines, DDTree metrics and an occasional KV-retract warning, then near the end an illegal instruction
on one rank followed by the NCCL watchdog and the scheduler exception on the others.

Both tools then read the same file from the page cache; each runs `--repeat` times and the best
time counts. The requirement: diagnose time <= 3 x grep time.

    python benchmarks/bench_diagnose.py            # ~1 GB
    python benchmarks/bench_diagnose.py --size 64M # quick
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.host.diagnose.catalogue import grep_patterns  # noqa: E402
from fleet.host.diagnose.classify import diagnose_file  # noqa: E402

CONTENT_VERSION = 2
REQUIRED_RATIO = 3.0

STARTUP = """\
[{d} 09:40:01] server_args=ServerArgs(model_path='/dev/shm/Qwen3.6-27B', tokenizer_path='/dev/shm/Qwen3.6-27B', tp_size=4, mem_fraction_static=0.75, max_running_requests=8, context_length=32768, speculative_algorithm='DFLASH', speculative_num_draft_tokens=16, port=30000)
May 23 09:40:02 ct200 python[61613]: Failed to get device capability: SM 12.x requires CUDA >= 12.9.
[{d} 09:40:05 TP0] Init torch distributed begin.
[{d} 09:40:05 TP1] Init torch distributed begin.
[{d} 09:40:07 TP0] Init torch distributed ends. elapsed=1.92 s, mem usage=0.61 GB
[{d} 09:40:07 TP0] Load weight begin. avail mem=94.07 GB
[{d} 09:40:31 TP0] Load weight end. elapsed=23.88 s, type=Qwen3_5ForConditionalGeneration, avail mem=80.79 GB, mem usage=13.28 GB.
[{d} 09:40:31 TP0] Mamba Cache is allocated. max_mamba_cache_size: 144, conv_state size: 0.42GB, ssm_state size: 9.49GB intermediate_ssm_state_cache size: 3.80GB intermediate_conv_window_cache size: 0.17GB 
[{d} 09:40:31 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 612480, K size: 18.69 GB, V size: 18.69 GB
[{d} 09:40:31 TP0] Memory pool end. avail mem=11.32 GB
[{d} 09:40:32 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=11.02 GB
[{d} 09:40:32 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48]
[{d} 09:40:51 TP0] Capture cuda graph end. Time elapsed: 18.71 s. mem usage=1.21 GB. avail mem=9.81 GB.
[{d} 09:40:53 TP0] max_total_num_tokens=612480, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=32768, available_gpu_mem=9.81 GB
[{d} 09:40:54] INFO:     Started server process [61613]
[{d} 09:40:54] INFO:     Application startup complete.
[{d} 09:40:54] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[{d} 09:40:56] The server is fired up and ready to roll!
"""

FATAL = """\
[{d} 11:59:58 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2890, in run_scheduler_process
    scheduler.event_loop_normal()
  File "/opt/sglang/python/sglang/srt/speculative/dflash_worker.py", line 611, in forward_batch_generation
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal instruction was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
[rank0]:[E523 12:09:58.112233445 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=981234, OpType=ALLREDUCE, NumelIn=5120, NumelOut=5120, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.
[{d} 12:09:59] Received sigquit from a child process. It usually means the child failed.
"""


def _serving_block(rng: random.Random, minute: int, lines: int) -> str:
    out: list[str] = []
    stamp = f"2026-05-23 {9 + minute // 60:02d}:{minute % 60:02d}"
    for index in range(lines):
        second = f"{stamp}:{index * 60 // lines:02d}"
        roll = rng.random()
        if roll < 0.70:
            running = rng.randint(1, 48)
            out.append(
                f"[{second} TP0] Decode batch, #running-req: {running}, #full token: {rng.randint(1000, 600000)}, "
                f"full token usage: {rng.random():.2f}, mamba num: {running * 3}, mamba usage: {rng.random():.2f}, "
                f"accept len: {rng.uniform(1, 8):.2f}, accept rate: {rng.random():.2f}, cuda graph: True, "
                f"gen throughput (token/s): {rng.uniform(50, 2000):.2f}, #queue-req: {rng.randint(0, 9)}"
            )
        elif roll < 0.82:
            out.append(
                f"[{second} TP0] Prefill batch, #new-seq: {rng.randint(1, 4)}, #new-token: {rng.randint(16, 8192)}, "
                f"#cached-token: {rng.randint(0, 4096)}, full token usage: {rng.random():.2f}, mamba usage: "
                f"{rng.random():.2f}, #running-req: {rng.randint(0, 48)}, #queue-req: {rng.randint(0, 9)}, "
                f"#pending-token: 0, cuda graph: False, input throughput (token/s): {rng.uniform(1000, 40000):.2f}"
            )
        elif roll < 0.94:
            out.append(f'[{second}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /generate HTTP/1.1" 200 OK')
        elif roll < 0.99995:
            out.append(
                f"[{second} TP0] DDTREE metrics: bs={rng.randint(1, 8)} budget=16 avg_actual_nodes="
                f"{rng.uniform(8, 17):.2f} avg_accepted_drafts={rng.uniform(0.5, 6):.2f} avg_commit_len="
                f"{rng.uniform(1.5, 7):.2f} avg_accepted_depth={rng.uniform(0.5, 6):.2f}"
            )
        else:
            out.append(f"[{second} TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 3120, #mamba_num_gained: 3, #new_token_ratio: 0.4123 -> 0.5000")
    return "\n".join(out) + "\n"


def generate(path: Path, size: int) -> None:
    marker = path.with_suffix(".version")
    if path.exists() and marker.exists() and marker.read_text() == f"{CONTENT_VERSION} {size}":
        return
    rng = random.Random(20260523)
    blocks = [_serving_block(rng, minute, 20_000).encode() for minute in range(16)]
    fatal = FATAL.format(d="2026-05-23").encode()
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as out:
        out.write(STARTUP.format(d="2026-05-23").encode())
        written = out.tell()
        index = 0
        while written + len(fatal) < size:
            block = blocks[index % len(blocks)]
            out.write(block)
            written += len(block)
            index += 1
        out.write(fatal)
        out.write(blocks[0].split(b"\n", 1)[0] + b"\n")  # rank 0 logs once more before it blocks
        out.flush()
        os.fsync(out.fileno())
    os.replace(out.name, path)
    marker.write_text(f"{CONTENT_VERSION} {size}")


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def time_grep(path: Path, patterns: list[str]) -> float:
    command = ["grep", "-E", "-n"] + [arg for pattern in patterns for arg in ("-e", pattern)] + [str(path)]
    # Output goes to a real file: GNU grep stops at the first match when it writes to /dev/null.
    with tempfile.TemporaryFile() as sink:
        tic = time.perf_counter()
        subprocess.run(command, stdout=sink, check=False, env={**os.environ, "LC_ALL": "C"})
        return time.perf_counter() - tic


def time_diagnose(path: Path) -> tuple[float, str | None]:
    tic = time.perf_counter()
    diagnosis = diagnose_file(path)
    return time.perf_counter() - tic, diagnosis.failure_class


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1G", help="log size, e.g. 1G, 64M (default 1G)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per tool; the best counts (default 2)")
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="where the log is generated")
    options = parser.parse_args()
    size = _parse_size(options.size)
    path = options.dir / f"fleet-bench-diagnose-{size}.log"
    print(f"generating {path} ({size / (1 << 20):.0f} MiB) ...", flush=True)
    generate(path, size)
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    patterns = grep_patterns()
    grep_times, diagnose_times = [], []
    failure_class = None
    for _ in range(options.repeat):
        grep_times.append(time_grep(path, patterns))
        elapsed, failure_class = time_diagnose(path)
        diagnose_times.append(elapsed)
    grep_best, diagnose_best = min(grep_times), min(diagnose_times)
    megabytes = path.stat().st_size / (1 << 20)
    ratio = diagnose_best / grep_best
    print(f"patterns: {len(patterns)} literals from the catalogue")
    print(f"grep -E -n : {grep_best:7.2f} s  ({megabytes / grep_best:7.0f} MiB/s)")
    print(f"diagnose   : {diagnose_best:7.2f} s  ({megabytes / diagnose_best:7.0f} MiB/s)  -> {failure_class}")
    print(f"ratio diagnose/grep = {ratio:.2f} (required <= {REQUIRED_RATIO:.0f})")
    return 0 if ratio <= REQUIRED_RATIO and failure_class == "cuda_illegal_instruction" else 1


if __name__ == "__main__":
    raise SystemExit(main())
