"""Does `fleet provision` scale out? Eight test hosts at once against one host, same playbook.

Each measurement boots a fresh test fleet (real sshd per host, tests/testfleet) so that every host
starts empty: nothing cached in /srv/models, nothing staged in /dev/shm. It then times
`provision(hosts, playbook, provision_options(...))` -- facts, preflight, directories, the model
copied from a mirror path into each host's cache with rsync and staged to /dev/shm -- and, on the
same hosts, a second provision that must find everything in place and change nothing. Booting the
fleet is not timed. One-host and eight-host measurements alternate, so that a burst of load on the
machine hits both sides; the medians count.

The model is a small mirror made here: the card's config files (from
fleet.host.modelcard.hf_files_from_card) and a few MB of random "weights" shards.

Two variants of the hosts' engine Python (the facts read torch.version.cuda with it):
- `torch`: this interpreter, as the test inventory writes it: importing torch costs ~2-3 CPU s
  per host. Every test host runs on this machine's few CPUs, so that cost adds up here, where
  real hosts each pay it on their own CPUs.
- `bare`: /usr/bin/python3 without torch: what is left is fleet's own work (SSH, rsync, checks).
Also shown: this process' CPU time (the controller's own cost), the CPU time spent inside each
host (its sshd and everything it started), the CPU floor = (hosts' + controller's CPU time) / this
machine's CPUs -- no provision here can be faster --, and how busy the machine's CPUs were meanwhile
(near 100%: the hosts queue for too few CPUs instead of running side by side).

    python benchmarks/bench_provision.py                  # 5 repetitions, 2 x 4 MiB shards
    python benchmarks/bench_provision.py --quick          # 1 repetition, smaller model
    python benchmarks/bench_provision.py --repeat 3 --hosts 8 --shard-mib 16 --json out.json

Target (issue 4): provisioning 8 hosts at once takes well under 8 times one host's time.
Prints the table and the ratio t8/t1 (against N: N x one host), transport calls (round trips) and
SSH logins per host (from the hosts' sshd logs), the cost per host at each count and its growth
exponent from the count before (bench_scale's: 1 grows with the hosts); --json also writes the
figures. `--host-counts 4,16,64` measures those counts instead of 1 and --hosts (issue 28):

    python benchmarks/bench_provision.py --host-counts 4,16,64 --repeat 1 --variants bare --shard-mib 1

Issue 12: `python benchmarks/bench_provision.py --hosts 16 --repeat 3 --variants bare --json results/benchmarks/provision-16.json`
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.connect import transport_for  # noqa: E402
from fleet.host.modelcard import hf_files_from_card, load_model_card  # noqa: E402
from fleet.inventory import load_inventory  # noqa: E402
from fleet.playbook import load_playbook  # noqa: E402
from fleet.provision.provision import HostReport, provision, provision_options  # noqa: E402
from bench_scale import exponent  # noqa: E402  (this script's directory is on sys.path)
from tests.testfleet import TestFleet, TestHost, start_test_fleet, unavailable_reason  # noqa: E402

CARD = "qwen3.6-27b"
SHARDS = 2


@dataclass(frozen=True)
class Variant:
    name: str
    python: str | None  # the hosts' engine.python; None: what the test inventory writes (this interpreter)
    about: str


VARIANTS = {
    v.name: v
    for v in (
        Variant("torch", None, "engine Python = this interpreter: the facts import torch for torch.version.cuda"),
        Variant("bare", "/usr/bin/python3", "engine Python without torch: what is left is fleet's own work (SSH, rsync, checks)"),
    )
}


@dataclass(frozen=True)
class Measurement:
    hosts: int
    first_s: float
    second_s: float
    controller_cpu_s: float  # this process' CPU time (all threads) during the first provision
    machine_busy: float  # share of the machine's CPU time that was busy meanwhile (every process, 0..1)
    host_cpu_s: float  # CPU time spent inside the hosts (sshd, shells, rsync, tools, engine probe), all hosts
    first_calls_per_host: float = 0.0  # transport calls (round trips) per host, first provision
    second_calls_per_host: float = 0.0
    first_logins_per_host: float = 0.0  # SSH logins per host, from the hosts' sshd logs
    second_logins_per_host: float = 0.0


class CountingTransport:
    """A host's real transport, counting the calls made on it (each is one round trip or more)."""

    def __init__(self, inner: Any, counts: dict[str, int]) -> None:
        self._inner, self._counts = inner, counts

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in ("run", "put", "put_bytes", "get", "rsync_pull", "rsync_push"):

            def counted(*args: Any, **kwargs: Any) -> Any:
                self._counts[self._inner.host] = self._counts.get(self._inner.host, 0) + 1
                return value(*args, **kwargs)

            return counted
        return value


def logins(fleet: TestFleet) -> int:
    total = 0
    for host in fleet.hosts:
        log = host.base / "log" / "sshd.log"
        total += sum(1 for line in log.read_text(errors="replace").splitlines() if "Accepted publickey" in line) if log.exists() else 0
    return total


def make_mirror(directory: Path, shard_mib: int) -> Path:
    """The card's config files plus SHARDS shards of random bytes (incompressible, like weights)."""
    directory.mkdir(parents=True)
    for name, content in hf_files_from_card(load_model_card(CARD)).items():
        (directory / name).write_text(json.dumps(content))
    for index in range(1, SHARDS + 1):
        (directory / f"model-{index:05d}-of-{SHARDS:05d}.safetensors").write_bytes(os.urandom(shard_mib << 20))
    return directory


def make_playbook(directory: Path, mirror: Path) -> Path:
    data = {
        "name": "bench-provision",
        "model": {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "card": CARD, "mirror": str(mirror)},
        "methods": {"autoregressive": {}},
        "tp": [1],
        "workloads": {"short": {"kind": "short", "prompts": ["fib"]}},
    }
    path = directory / "bench-provision.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _check(reports: list[HostReport], expected: str, which: str) -> None:
    wrong = [f"{r.host}: {r.status} {r.reason}" for r in reports if r.status != expected]
    if wrong:
        raise SystemExit(f"{which} provision: expected every host {expected!r}, got: " + "; ".join(wrong))
    if expected == "changed":
        for report in reports:
            actions = [c.action for c in report.changes]
            if "fetch" not in actions or "stage" not in actions:
                raise SystemExit(f"{which} provision of {report.host}: no fetch+stage in {actions} -- the host was not fresh")


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat (idle and iowait are not busy)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def host_cpu_ticks(host: TestHost) -> int:
    """CPU ticks used on a test host so far: its first process (the PID namespace's init) with every
    descendant it or they have reaped (utime, stime, cutime, cstime: fields 14-17 of stat(5)).
    Exact once the provision's sessions have ended."""
    init_pid = int((host.base / "run" / "init.pid").read_text())
    fields = Path(f"/proc/{init_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15])


def release_connections() -> None:
    """fleet keeps each host's connections for its next step (fleet/transport/sharing.py); an
    older fleet has none to release."""
    try:
        from fleet.transport import sharing
    except ImportError:
        return
    try:
        from fleet.transport.sshlink import PARK
    except ImportError:  # before the paramiko side had a module of its own
        from fleet.transport.ssh import PARK  # type: ignore[attr-defined,no-redef]
    PARK.close_all()
    sharing.MASTERS.stop_own()


def settle(fleet: TestFleet, idle_processes: dict[str, int], timeout_s: float = 10.0) -> None:
    """Wait until every host is back to its idle process count: the SSH sessions have ended and
    were reaped, so that their CPU time shows in the init's cutime."""
    deadline = time.monotonic() + timeout_s
    while any(len(fleet.processes(h)) > idle_processes[h.name] for h in fleet.hosts) and time.monotonic() < deadline:
        time.sleep(0.05)


def measure(count: int, playbook_path: Path, workdir: Path, shm_size: str, engine_python: str | None) -> Measurement:
    """Provision `count` fresh hosts at once, twice."""
    names = [f"ct{200 + i}" for i in range(count)]
    playbook = load_playbook(playbook_path)
    options = provision_options(playbook_path.parent, os.environ)
    engine = {"engine": {"python": engine_python}} if engine_python else {}
    with start_test_fleet(names, shm_size=shm_size) as fleet:
        hosts = list(load_inventory(fleet.write_inventory(workdir / f"hosts-{count}-{time.monotonic_ns()}", **engine)))
        idle_processes = {h.name: len(fleet.processes(h)) for h in fleet.hosts}
        hosts_started = sum(host_cpu_ticks(h) for h in fleet.hosts)
        counts: dict[str, int] = {}

        def connect(host: Any) -> Any:
            return CountingTransport(transport_for(host), counts)

        logins_before = logins(fleet)
        started, cpu_started, machine_started = time.perf_counter(), time.process_time(), machine_cpu()
        first = provision(hosts, playbook, options, connect=connect)
        first_s, controller_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
        busy, total = (after - before for after, before in zip(machine_cpu(), machine_started))
        release_connections()  # their sessions must end for the hosts' CPU time to show
        settle(fleet, idle_processes)
        host_cpu_s = (sum(host_cpu_ticks(h) for h in fleet.hosts) - hosts_started) / os.sysconf("SC_CLK_TCK")
        _check(first, "changed", "first")
        first_calls, first_logins = sum(counts.values()) / count, (logins(fleet) - logins_before) / count
        counts.clear()
        logins_before = logins(fleet)
        started = time.perf_counter()
        second = provision(hosts, playbook, options, connect=connect)
        second_s = time.perf_counter() - started
        _check(second, "ok", "second")
        second_calls, second_logins = sum(counts.values()) / count, (logins(fleet) - logins_before) / count
    return Measurement(count, first_s, second_s, controller_cpu_s, busy / total if total else 0.0, host_cpu_s, first_calls, second_calls, first_logins, second_logins)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def probe_cpu_s(python: str) -> float:
    """CPU seconds one host spends importing torch for its CUDA facts (the engine probe's big cost)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, "-c", "import torch"], capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_variant(variant: Variant, counts: list[int], repeat: int, playbook_path: Path, workdir: Path, shm_size: str) -> dict[str, Any]:
    results: dict[int, list[Measurement]] = {count: [] for count in counts}
    for round_ in range(repeat):
        # Alternate the order so that neither side always runs first (warm caches, load bursts).
        for count in counts if round_ % 2 == 0 else counts[::-1]:
            m = measure(count, playbook_path, workdir, shm_size, variant.python)
            results[count].append(m)
            print(f"  {variant.name} round {round_ + 1}/{repeat}: {count} host(s): first {m.first_s:.2f} s, second {m.second_s:.2f} s", flush=True)
    rows: list[dict[str, Any]] = []
    for count, ms in results.items():
        firsts = [m.first_s for m in ms]
        rows.append(
            {
                "hosts": count,
                "first_median_s": round(_median(firsts), 3),
                "first_min_s": round(min(firsts), 3),
                "first_max_s": round(max(firsts), 3),
                "second_median_s": round(_median([m.second_s for m in ms]), 3),
                "controller_cpu_median_s": round(_median([m.controller_cpu_s for m in ms]), 3),
                "machine_busy_median": round(_median([m.machine_busy for m in ms]), 3),
                "calls_per_host_first": round(_median([m.first_calls_per_host for m in ms]), 1),
                "calls_per_host_second": round(_median([m.second_calls_per_host for m in ms]), 1),
                "logins_per_host_first": round(_median([m.first_logins_per_host for m in ms]), 1),
                "logins_per_host_second": round(_median([m.second_logins_per_host for m in ms]), 1),
                "host_cpu_per_host_median_s": round(_median([m.host_cpu_s / count for m in ms]), 3),
                # No schedule on this machine's CPUs beats the CPU time it needs spread over all of them.
                "cpu_floor_median_s": round(_median([(m.host_cpu_s + m.controller_cpu_s) / (os.cpu_count() or 1) for m in ms]), 3),
            }
        )
    for previous, row in zip(rows, rows[1:]):
        # Of the first provision's wall time, this process' CPU and the hosts' CPU: 1 grows with
        # the hosts, 0 does not grow.
        for key, cost in (("wall", "first_median_s"), ("controller_cpu", "controller_cpu_median_s")):
            grown = exponent(previous["hosts"], previous[cost], row["hosts"], row[cost])
            row[f"{key}_exponent"] = None if grown is None else round(grown, 3)
        grown = exponent(previous["hosts"], previous["host_cpu_per_host_median_s"] * previous["hosts"], row["hosts"], row["host_cpu_per_host_median_s"] * row["hosts"])
        row["host_cpu_exponent"] = None if grown is None else round(grown, 3)
    t1, tn = rows[0]["first_median_s"], rows[-1]["first_median_s"]
    return {
        "variant": variant.name,
        "engine_python": variant.python or sys.executable,
        "about": variant.about,
        "rows": rows,
        "t1_s": t1,
        "tn_s": tn,
        "ratio": round(tn / t1, 3),
        "measurements": [m.__dict__ for ms in results.values() for m in ms],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repetition, 1 MiB shards: a smoke run")
    parser.add_argument("--repeat", type=int, help="measurements per host count and variant (default 5, quick 1)")
    parser.add_argument("--hosts", type=int, default=8, help="the many-host side (default 8)")
    parser.add_argument("--host-counts", help="e.g. 4,16,64: these host counts instead of 1 and --hosts, each with its cost per host and growth exponent")
    parser.add_argument("--shard-mib", type=int, help="size of each of the 2 weight shards (default 4, quick 1)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 5)
    shard_mib = args.shard_mib or (1 if args.quick else 4)
    why_not = unavailable_reason()
    if why_not:
        print(f"cannot start test hosts: {why_not}", file=sys.stderr)
        return 2
    variants = [VARIANTS[name] for name in args.variants.split(",")]
    counts = [int(n) for n in args.host_counts.split(",")] if args.host_counts else [1, args.hosts]
    first, last = counts[0], counts[-1]
    # The staged copy and the fleet's own files share each host's /dev/shm.
    shm_size = f"{max(64, 4 * SHARDS * shard_mib)}m"
    torch_cpu_s = probe_cpu_s(sys.executable)

    with tempfile.TemporaryDirectory(prefix="bench-provision-") as tmp:
        workdir = Path(tmp)
        playbook_path = make_playbook(workdir, make_mirror(workdir / "mirror" / "qwen36", shard_mib))
        outcomes = [run_variant(v, counts, repeat, playbook_path, workdir, shm_size) for v in variants]

    cpus = os.cpu_count() or 1
    print()
    print(f"fleet provision of fresh test hosts: model {SHARDS * shard_mib} MiB + config from a mirror path (rsync), then staged to /dev/shm; {repeat} repetition(s), median")
    print(f"machine: {cpus} CPUs shared by every test host, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'engine python':<14} {'hosts':>5}  {'first (changes)':>16}  {'min..max':>14}  {'second (no change)':>18}  {'controller CPU':>14}  {'CPU per host':>12}  {'CPU floor':>9}  {'machine busy':>12}"
    )
    for outcome in outcomes:
        for row in outcome["rows"]:
            span = f"{row['first_min_s']:.2f}..{row['first_max_s']:.2f}"
            print(
                f"{outcome['variant']:<14} {row['hosts']:>5}  {row['first_median_s']:>14.2f} s  {span:>14}  {row['second_median_s']:>16.2f} s  {row['controller_cpu_median_s']:>12.2f} s  {row['host_cpu_per_host_median_s']:>10.2f} s  {row['cpu_floor_median_s']:>7.2f} s  {row['machine_busy_median']:>11.0%}"
            )
    for outcome in outcomes:
        for row in outcome["rows"]:
            print(
                f"{outcome['variant']} {row['hosts']} host(s): transport calls per host {row['calls_per_host_first']:g} (first), "
                f"{row['calls_per_host_second']:g} (second); SSH logins per host {row['logins_per_host_first']:g}, {row['logins_per_host_second']:g}"
            )
    for outcome in outcomes:
        for previous, row in zip(outcome["rows"], outcome["rows"][1:]):
            print(
                f"{outcome['variant']} {previous['hosts']} -> {row['hosts']} hosts: per host {previous['first_median_s'] / previous['hosts'] * 1000:.0f} -> {row['first_median_s'] / row['hosts'] * 1000:.0f} ms wall,"
                f" {previous['controller_cpu_median_s'] / previous['hosts'] * 1000:.0f} -> {row['controller_cpu_median_s'] / row['hosts'] * 1000:.0f} ms controller CPU,"
                f" {previous['host_cpu_per_host_median_s'] * 1000:.0f} -> {row['host_cpu_per_host_median_s'] * 1000:.0f} ms hosts' CPU;"
                f" growth exponent (1: grows with the hosts) wall {row['wall_exponent']}, controller CPU {row['controller_cpu_exponent']}, hosts' CPU {row['host_cpu_exponent']}"
            )
    for outcome in outcomes:
        many = outcome["rows"][-1]
        print(
            f"{outcome['variant']}: t{last}/t{first} = {outcome['tn_s']:.2f} s / {outcome['t1_s']:.2f} s = {outcome['ratio']:.2f}"
            f"   (target: well under {last / first:g}; {last / first:g} = no parallelism);"
            f" t{last} = {outcome['tn_s'] / many['cpu_floor_median_s']:.2f} x this machine's CPU floor"
        )
    print(
        f"why `torch` scales worse here: importing torch for the CUDA facts costs {torch_cpu_s:.1f} CPU s per host; "
        f"{last} test hosts need >= {last * torch_cpu_s / cpus:.1f} s of this machine's {cpus} CPUs for it alone, "
        f"where real hosts each use their own CPUs"
    )

    if args.json:
        figures = {
            "benchmark": "provision",
            "hosts": counts,
            "repeat": repeat,
            "model_mib": SHARDS * shard_mib,
            "cpus": cpus,
            "torch_import_cpu_s": round(torch_cpu_s, 2),
            "variants": outcomes,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"figures: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
