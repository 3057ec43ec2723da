"""The controller's cost per run in real sweeps of growing size (issue 28): 512 / 2k / 8k runs on 8
test hosts (real sshd, tests/testfleet), the sim engine, short runs.

For each size, one `fleet sweep` (through `start_sweep`, in this process) of a playbook of exactly
that many runs: 16 server configurations at TP1 (autoregressive and DFlash drafting 2..16 tokens)
x `size / 16` short workloads (one prompt, 8 new tokens; a run is one server x one workload, its
repeats are passes inside it), so that every size has the same servers and only the number of
runs grows. Measured:

- controller CPU (this process: user + system, start_sweep to return; its child processes, the
  ssh and rsync clients it ran and waited for, beside it) per run event, and the growth exponent
  between sizes (1 is linear);
- result-to-event latency: from a run's `ended_at` (written by the agent on the host, whose clock
  is this machine's) to the controller's `run` event for it (the wall time the event reached
  `on_event`), median, p90 and max;
- the controller's memory: this process' resident set (VmRSS) just before `start_sweep` and its
  peak while the sweep runs (VmHWM, reset first through /proc/self/clear_refs), the growth per run
  (peak minus start, over the runs) and its growth exponent between sizes. Run one size per
  process (`--sizes 2048`) for figures that an earlier, larger sweep's freed memory cannot hide;
- the sweep's wall time and how many runs ended with each status.

    python benchmarks/bench_sweep_scale.py [--sizes 512,2048,8192] [--speed 0.02] [--poll 0.5] [--json PATH]

The aims (issue 28): growth exponent <= 1.1, under 1 ms of controller CPU per run event at 8k runs
(the tracker alone: benchmarks/bench_tracker.py), result-to-event latency under 5 s median at 8k
runs on 8 hosts. Figures go to --json (default /var/tmp/fleet-bench/sweep-scale-<time>.json).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_scale import exponent  # noqa: E402  (this script's directory is on sys.path)
from fleet.inventory import load_inventory  # noqa: E402
from fleet.sweep.controller import resume_sweep, start_sweep  # noqa: E402
from fleet.sweep.events import Event  # noqa: E402
from tests.testfleet import start_test_fleet, unavailable_reason  # noqa: E402

HOSTS = [f"ct{200 + i}" for i in range(8)]
# Autoregressive and DFlash drafting 2..16 tokens at TP1: two servers a host at a time. More
# drafting tokens do not fit the hybrid model's state cache in the planner's memory check (the
# runs would be planned infeasible and skipped, which is no work for the agents).
SERVERS = 16
MAX_RESUMES = 3


def playbook(size: int, path: Path) -> Path:
    """A playbook of exactly `size` runs (a multiple of SERVERS)."""
    count, rest = divmod(size, SERVERS)
    if rest or count < 1:
        raise SystemExit(f"--sizes: multiples of {SERVERS} runs; got {size}")
    workloads = "".join(f"  w{k}:\n    kind: short\n    prompts: [fib]\n    max_new_tokens: 8\n" for k in range(count))
    drafting = "".join(f"  dflash{n}: {{algorithm: DFLASH, draft: dflash, num_draft_tokens: {n}}}\n" for n in range(2, SERVERS + 1))
    path.write_text(
        f"name: sweep-scale-{size}\n"
        "model: {repo: Qwen/Qwen3.6-27B, revision: main, card: qwen3.6-27b}\n"
        "drafts:\n  dflash: {repo: z-lab/Qwen3.6-27B-DFlash, revision: main, card: qwen3.6-27b-dflash}\n"
        f"methods:\n  autoregressive: {{}}\n{drafting}"
        "tp: [1]\n"
        "server: {context_length: 4096, mem_fraction_static: 0.75, max_running_requests: 4, attention_backend: flashinfer, trust_remote_code: true}\n"
        f"workloads:\n{workloads}"
        "repeats: 1\nauto_fix: apply\nisolation: shared\n"
    )
    return path


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _rss_kib(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak_rss() -> None:
    # Linux >= 4.0: writing 5 resets VmHWM to the present resident set.
    Path("/proc/self/clear_refs").write_text("5")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def sweep_once(size: int, workdir: Path, speed: float, poll_s: float) -> dict[str, Any]:
    """One sweep of `size` runs on fresh test hosts; the controller's figures."""
    arrived: dict[str, float] = {}  # run id -> wall time its first `run` event reached the controller
    lock = threading.Lock()

    def on_event(event: Event) -> None:
        if event.type == "run":
            with lock:
                arrived.setdefault(str(event.data["run_id"]), time.time())

    with start_test_fleet(HOSTS) as fleet:
        hosts = list(load_inventory(fleet.write_inventory(workdir / "hosts", engine={"sim_speed": speed})))
        book = playbook(size, workdir / "playbook.yaml")
        results_root = workdir / "results"
        own0, children0 = _cpu()
        _reset_peak_rss()
        rss0 = _rss_kib("VmRSS")
        began = time.time()
        outcome = start_sweep(book, hosts, results_root, poll_interval_s=poll_s, on_event=on_event)
        resumes = 0
        while not all(s.phase == "finished" for s in outcome.statuses.values()) and resumes < MAX_RESUMES:
            resumes += 1
            outcome = resume_sweep(outcome.sweep_id, results_root, poll_interval_s=poll_s, on_event=on_event)
        wall = time.time() - began
        own1, children1 = _cpu()
        peak = _rss_kib("VmHWM")
    ended = {p.stem: float(json.loads(p.read_text())["ended_at"]) for p in outcome.directory.glob("*/runs/*.json")}
    statuses: Counter[str] = Counter()
    for path in outcome.directory.glob("*/runs/*.json"):
        result = json.loads(path.read_text())
        failure = result.get("failure") or {}
        statuses[result["status"] + (f" ({failure.get('error_class')}: {str(failure.get('message', ''))[:120]})" if failure else "")] += 1
    latency = [arrived[run] - at for run, at in ended.items() if run in arrived]
    events = len(arrived)
    return {
        "runs": size,
        "results": len(ended),
        "run_events": events,
        "statuses": dict(statuses),
        "resumes": resumes,
        "wall_s": round(wall, 1),
        "controller_cpu_s": round(own1 - own0, 2),
        "children_cpu_s": round(children1 - children0, 2),
        "cpu_ms_per_event": round((own1 - own0) / max(events, 1) * 1000, 3),
        "rss_start_mib": round(rss0 / 1024, 1),
        "rss_peak_mib": round(peak / 1024, 1),
        "kib_per_run": round((peak - rss0) / size, 2),
        "latency_s": {"median": round(statistics.median(latency), 2), "p90": round(percentile(latency, 0.9), 2), "max": round(max(latency), 2)} if latency else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="512,2048,8192", help="runs per sweep, multiples of 16 (default 512,2048,8192)")
    parser.add_argument("--speed", type=float, default=0.02, help="the hosts' engine.sim_speed (default 0.02)")
    parser.add_argument("--poll", type=float, default=0.5, help="the controller's poll interval, s (default 0.5)")
    parser.add_argument("--json", type=Path, help="where to write the figures")
    args = parser.parse_args()
    why_not = unavailable_reason()
    if why_not:
        print(f"cannot start test hosts: {why_not}", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench-sweep-scale-{size}-") as tmp:
            print(f"sweep of {size} runs on {len(HOSTS)} test hosts, sim speed {args.speed} ...", flush=True)
            row = sweep_once(size, Path(tmp), args.speed, args.poll)
        if rows:
            before = rows[-1]
            for key, cost in (("cpu_exponent", lambda r: r["controller_cpu_s"]), ("memory_exponent", lambda r: r["rss_peak_mib"] - r["rss_start_mib"])):
                grew = exponent(before["runs"], cost(before), size, cost(row))
                if grew is not None:
                    row[key] = round(grew, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| runs | results | wall s | controller CPU s | ms CPU / run event | exponent | children CPU s | latency median / p90 / max s | RSS start / peak MiB | KiB / run | exponent |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        lat = r["latency_s"] or {}
        print(
            f"| {r['runs']} | {r['results']} | {r['wall_s']} | {r['controller_cpu_s']} | {r['cpu_ms_per_event']} | {r.get('cpu_exponent', '-')} "
            f"| {r['children_cpu_s']} | {lat.get('median', '-')} / {lat.get('p90', '-')} / {lat.get('max', '-')} "
            f"| {r['rss_start_mib']} / {r['rss_peak_mib']} | {r['kib_per_run']} | {r.get('memory_exponent', '-')} |"
        )
    path = args.json or Path("/var/tmp/fleet-bench") / f"sweep-scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hosts": HOSTS, "speed": args.speed, "poll_s": args.poll, "rows": rows}, indent=2))
    print(f"\nfigures: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
