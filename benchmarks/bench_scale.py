"""fleet's cost at growing sizes (issue 28): CPU seconds and peak memory of one fleet command per
size, the cost per item at each size and the growth exponent between sizes, side by side with an
older checkout.

    python benchmarks/bench_scale.py [--rows plan] [--sizes 1000,10000,50000] [--baseline DIR] [--json PATH]

Each measurement is one child process (`python -P -m fleet ...` with PYTHONPATH set to the checkout
measured), started by a small launcher: its CPU (user + system) and its peak resident memory
(ru_maxrss) from os.wait4, so the figures are the command's own, imports included, as a user pays
them. The growth exponent between
two sizes n1 < n2 is log(cpu2 / cpu1) / log(n2 / n1): 1 is linear, 2 quadratic. `--baseline DIR`
(say `git worktree add /tmp/fleet-before <commit>`) runs the same inputs with that checkout's fleet,
interleaved size by size with this one.

Rows. A row is a name, the unit of its size, its default sizes and a function that writes the
inputs for one size into a folder and returns the command (a `Work`); optionally a function that
reads the command's stdout and returns figures worth printing beside the cost (the plan row: its
makespan against its lower bound, so that a faster plan is seen not to be a worse one).

- plan: `fleet plan --json` of a playbook of `size` runs (10 workloads x 4 TP sizes x autoregressive,
  DFlash and DDTree at size/40 - 2 budgets: size/10 server configurations) on 8 hosts of 8 GPUs
  (sglang 0.5.23 with the DDTree fork on RTX PRO 6000s: the memory check and the fixed variants
  run as in a real plan), from host files alone (no facts, no measured durations).
- report: `fleet report --format json` of a sweep folder of `size` results (faithful copies of a
  real sim sweep's results, one cell each, a speed-up per speculative cell: `report_inputs`), 1k /
  10k / 50k by default (issue 28's aim: 50k under 30 s of CPU and 1 GiB). The 50k folder is 1 GB
  of files under /tmp; its baseline run needs ~3.5 GiB of memory before commit 56ebbdf. Each
  size twice: first, with an empty state folder (`$FLEET_STATE_DIR`: every result parsed and
  checked, the cache of checked results written, fleet.sweep.resultcache), then warm (`this-warm`:
  the same command again, reading that cache).
- status, diagnose: `fleet status <sweep> --json` and `fleet diagnose <sweep folder> --json` of a
  finished sweep of `size` runs: faithful copies of a real sweep (playbooks/demo.yaml on `local`
  with the sim, run once per benchmark: `real_sweep`), its shard's servers given size/3 runs each,
  copies of their real runs and results under new run ids, the agent's progress file on the host
  side saying all are done (`sweep_copy`). status reads the record and the shard and polls the
  host's agent; diagnose reads every result and scans every server log (all `ok`: no failure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Work:
    """One measured command: the arguments after `python -P` and its environment (added to a
    clean copy of this one); stdout goes to a file that the row's `check` may read. `forget`:
    what makes the next measurement a first run (the state a command keeps between runs removed),
    for a row measured first and warm."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    forget: Callable[[], None] | None = None


def fleet(*args: str | Path) -> list[str]:
    return ["-m", "fleet", *map(str, args)]


@dataclass(frozen=True)
class Row:
    name: str
    unit: str  # what a size counts: "run", "result", "host"
    sizes: tuple[int, ...]
    make: Callable[[int, Path], Work]  # writes the inputs of `size` items under the folder; the command
    check: Callable[[Path], dict[str, Any]] | None = None  # figures read from the command's stdout (to --json)
    shown: tuple[str, ...] = ()  # which of them the table shows, per checkout
    floor_size: int | None = None  # the smallest size: its cost is the fixed part (imports, start-up)
    warm: bool = False  # each checkout measured twice a size: a first run (`forget` before it), then a warm one (`<checkout>-warm`)


@dataclass
class Measured:
    cpu_s: float
    maxrss_mib: float
    wall_s: float
    returncode: int
    figures: dict[str, Any] = field(default_factory=dict)


# --- the plan row ----------------------------------------------------------------------------------

PLAN_HOSTS = 8
PLAN_GPUS = 8
PLAN_WORKLOADS = 10
PLAN_TP = (1, 2, 4, 8)


def plan_inputs(size: int, folder: Path) -> Work:
    """A playbook of exactly `size` runs (a multiple of 40) and 8 host files of 8 GPUs."""
    per_tp, rest = divmod(size, PLAN_WORKLOADS * len(PLAN_TP))
    if rest or per_tp < 3:
        raise SystemExit(f"plan: sizes are multiples of {PLAN_WORKLOADS * len(PLAN_TP)} runs, at least {3 * PLAN_WORKLOADS * len(PLAN_TP)}; got {size}")
    hosts = folder / "hosts"
    hosts.mkdir(parents=True, exist_ok=True)
    for i in range(PLAN_HOSTS):
        (hosts / f"b{i:02d}.yaml").write_text(
            f"name: b{i:02d}\ntransport: ssh\naddress: 10.9.0.{i + 1}\nuser: root\nhost_key_policy: accept-new\n"
            f"gpus: {{count: {PLAN_GPUS}, model: NVIDIA RTX PRO 6000 Blackwell Server Edition}}\n"
            "paths: {work_dir: /var/lib/fleet, model_cache: /srv/models}\n"
            'engine: {kind: sglang, python: /opt/sglang/bin/python, release: "0.5.23", fork: ddtree}\n'
            "service_manager: systemd\ngroups: [bench]\n"
        )
    workloads = "".join(f"  w{k}:\n    kind: short\n    prompts: [fib, qsort]\n    max_new_tokens: {64 * (k + 1)}\n" for k in range(PLAN_WORKLOADS))
    budgets = list(range(1, per_tp - 2 + 1))  # + autoregressive + dflash = per_tp configurations per TP size
    (folder / "playbook.yaml").write_text(
        f"name: scale-{size}\n"
        "model: {repo: Qwen/Qwen3.6-27B, revision: main, card: qwen3.6-27b}\n"
        "drafts:\n  dflash: {repo: z-lab/Qwen3.6-27B-DFlash, revision: main, card: qwen3.6-27b-dflash}\n"
        "methods:\n  autoregressive: {}\n  dflash: {algorithm: DFLASH, draft: dflash, num_draft_tokens: 16}\n"
        f"  ddtree: {{algorithm: DDTREE, draft: dflash, budgets: {budgets}}}\n"
        f"tp: {list(PLAN_TP)}\n"
        "server: {context_length: 32768, mem_fraction_static: 0.75, max_running_requests: 4, attention_backend: flashinfer, trust_remote_code: true}\n"
        f"workloads:\n{workloads}"
        "repeats: 1\nauto_fix: apply\nisolation: shared\n"
    )
    (folder / "results").mkdir(exist_ok=True)
    env = {"FLEET_HOSTS_DIR": str(hosts), "FLEET_RESULTS_DIR": str(folder / "results"), "XDG_CACHE_HOME": str(folder / "cache")}
    return Work(fleet("plan", "-p", folder / "playbook.yaml", "--hosts", "all", "--json"), env)


def plan_figures(stdout: Path) -> dict[str, Any]:
    data = json.loads(stdout.read_text())
    lower = data.get("lower_bound_s") or 0.0
    return {
        "runs": len(data["runs"]),
        "servers": len({r["server_id"] for r in data["runs"]}),
        "makespan_ratio": round(data["makespan_s"] / lower, 4) if lower else None,
    }


# --- the report row --------------------------------------------------------------------------------

REPORT_FIXTURE = REPO / "tests" / "fixtures" / "report" / "noisy"  # a real sim sweep, 3 passes per run
REPORT_METHODS = 10  # autoregressive and DDTree b1..b9 per workload: a speed-up cell each


def report_inputs(size: int, folder: Path) -> Work:
    """A sweep folder of `size` results: faithful copies of the noisy fixture's two ok short runs
    (its real result files, 3 passes each), each under its own run id, an autoregressive and nine
    DDTree budgets per workload, size/10 workloads: every result its own cell, every speculative
    cell a speed-up over its workload's autoregressive one. No plan.json: the report identifies a
    run by its server label, as for a fixed variant."""
    runs = sorted((REPORT_FIXTURE / "local" / "runs").glob("*.json"))
    templates = {}
    for path in runs:
        data = json.loads(path.read_text())
        if data["status"] == "ok" and data["workload"].get("kind") == "short" and data["server_label"] in ("tp1-autoregressive", "tp1-ddtree-b16"):
            templates["autoregressive" if "autoregressive" in data["server_label"] else "ddtree"] = data
    sweep_id = f"scale-report-{size}"
    sweep = folder / "results" / sweep_id
    shutil.copytree(REPORT_FIXTURE / "hosts", sweep / "hosts")
    record = json.loads((REPORT_FIXTURE / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps({**record, "sweep_id": sweep_id, "playbook_name": sweep_id}))
    out = sweep / "local" / "runs"
    out.mkdir(parents=True)
    for i in range(size):
        workload, method = divmod(i, REPORT_METHODS)
        server_label = "tp1-autoregressive" if method == 0 else f"tp1-ddtree-b{method}"
        data = templates["autoregressive" if method == 0 else "ddtree"]
        run_id = f"{i:012x}"
        result = {**data, "run_id": run_id, "sweep_id": sweep_id, "server_label": server_label, "server_id": f"s{method:03d}",
                  "label": f"{server_label}/w{workload}", "workload": {**data["workload"], "name": f"w{workload}"}}  # fmt: skip
        (out / f"{run_id}.json").write_text(json.dumps(result))
    state = folder / "state"
    return Work(fleet("report", sweep, "--format", "json"), {"FLEET_STATE_DIR": str(state)}, lambda: shutil.rmtree(state, ignore_errors=True))


def report_figures(stdout: Path) -> dict[str, Any]:
    """What the report said, so that a command that failed (exit 1 with a traceback: an import
    error once measured as a 0.04 s report) is never taken for a fast one."""
    rows = [json.loads(line) for line in stdout.read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"report: no rows in {stdout}: the command did not produce a report")
    return {"rows": len(rows), "speedups": sum(1 for r in rows if r.get("speedup") is not None)}


# --- the status and diagnose rows: copies of a real sweep ------------------------------------------

DEMO_PLAYBOOK = REPO / "playbooks" / "demo.yaml"


def real_sweep(folder: Path) -> Path:
    """A real sweep of playbooks/demo.yaml on `local` (the sim engine, about 30 s), made once under
    `folder`: its controller folder, and the host's side under `folder/host` (the agent's
    progress file, which `fleet status` reads). The template the status and diagnose rows copy."""
    results = folder / "results"
    made = [p for p in results.iterdir() if p.is_dir()] if results.is_dir() else []
    if made:
        return made[0]
    hosts = folder / "hosts"
    hosts.mkdir(parents=True)
    (hosts / "local.yaml").write_text((REPO / "hosts" / "local.yaml").read_text().replace("/tmp/fleet-local", str(folder / "host")))
    env = {**os.environ, "PYTHONPATH": str(REPO), "FLEET_HOSTS_DIR": str(hosts), "FLEET_RESULTS_DIR": str(results), "XDG_CACHE_HOME": str(folder / "cache")}
    done = subprocess.run([sys.executable, "-P", "-m", "fleet", "sweep", "-p", str(DEMO_PLAYBOOK), "--hosts", "local"], cwd=REPO, env=env, capture_output=True, text=True)
    made = [p for p in results.iterdir() if p.is_dir()] if results.is_dir() else []
    if done.returncode != 0 or not made:
        raise SystemExit(f"the template sweep failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return made[0]


def sweep_copy(size: int, folder: Path) -> tuple[Path, str]:
    """A copy of the real sweep with `size` runs, all finished and pulled: its shard's servers each
    given size/3 runs, copies of that server's real runs under new run ids, each with a copy of
    its real result; the agent's progress file says all are done. The results root and the id."""
    template = real_sweep(folder.parent / "template")
    sweep_id = f"demo-20261203-{size:06d}-5ca1"
    target = folder / "results" / sweep_id
    shutil.copytree(template, target, ignore=shutil.ignore_patterns("runs", "shard.json", "controller.lock"))
    host = "local"
    shard = json.loads((template / host / "shard.json").read_text())
    results = {}
    for path in (template / host / "runs").glob("*.json"):
        data = json.loads(path.read_text())
        results.setdefault(data["server_id"], data)
    servers = [server for server in shard["servers"] if server["server_id"] in results]
    runs_of: dict[str, list[dict[str, Any]]] = {server["server_id"]: [] for server in servers}
    out = target / host / "runs"
    out.mkdir()
    for i in range(size):
        server = servers[i % len(servers)]
        run_id = f"{i:012x}"
        runs_of[server["server_id"]].append({**server["runs"][0], "run_id": run_id})
        result = {**results[server["server_id"]], "run_id": run_id, "sweep_id": sweep_id}
        (out / f"{run_id}.json").write_text(json.dumps(result))
    shard["servers"] = [{**server, "runs": runs_of[server["server_id"]]} for server in servers]
    shard["sweep_id"] = sweep_id
    (target / host / "shard.json").write_text(json.dumps(shard))
    for name in ("sweep.json", "summary.json"):
        record = json.loads((target / name).read_text())
        (target / name).write_text(json.dumps({**record, "sweep_id": sweep_id}))
    on_host = template.parents[1] / "host" / "work" / "sweeps"
    progress = json.loads((on_host / template.name / "progress.json").read_text())
    counts = {"done": size, "ok": size, "remaining": 0}
    (on_host / sweep_id).mkdir(parents=True, exist_ok=True)
    (on_host / sweep_id / "progress.json").write_text(json.dumps({**progress, "sweep_id": sweep_id, "total": size, "counts": counts}))
    return folder / "results", sweep_id


def status_inputs(size: int, folder: Path) -> Work:
    """`fleet status <sweep> --json` of a finished sweep of `size` runs on `local` (sweep_copy): the
    sweep's record and shard read, the host's agent polled once."""
    results, sweep_id = sweep_copy(size, folder)
    return Work(fleet("status", sweep_id, "--json"), {"FLEET_RESULTS_DIR": str(results), "XDG_CACHE_HOME": str(folder / "cache")})


def diagnose_inputs(size: int, folder: Path) -> Work:
    """`fleet diagnose <sweep folder> --json` of a finished sweep of `size` results (sweep_copy):
    every result read for a failure to diagnose, every server log scanned. All are `ok` (the real
    demo sweep's are): the cost measured is the reading, which a failure adds one log's scan to."""
    results, sweep_id = sweep_copy(size, folder)
    return Work(fleet("diagnose", results / sweep_id, "--json"), {"XDG_CACHE_HOME": str(folder / "cache")})


def status_figures(stdout: Path) -> dict[str, Any]:
    """The runs `fleet status --json` counted (host name -> its status), so that a command that
    printed nothing is never taken for a fast one."""
    return {"runs": sum(int(host.get("total") or 0) for host in json.loads(stdout.read_text()).values())}


ROWS: dict[str, Row] = {
    "plan": Row("plan", "run", (1000, 10000, 50000), plan_inputs, plan_figures, shown=("makespan_ratio",), floor_size=120),
    "report": Row("report", "result", (1000, 10000, 50000), report_inputs, report_figures, floor_size=100, warm=True),
    "status": Row("status", "run", (1000, 10000, 50000), status_inputs, status_figures, shown=("runs",), floor_size=6),
    "diagnose": Row("diagnose", "result", (1000, 10000, 50000), diagnose_inputs, floor_size=6),
}


# --- measuring -------------------------------------------------------------------------------------


# Linux keeps a process' peak memory across exec: a child's ru_maxrss counts the process it was
# forked from until its exec. This one holds the generated inputs (about 400 MiB at 50k results),
# so every command reported at least that. A small launcher starts the command and writes the
# command's own usage (exit code, CPU s, ru_maxrss KiB) to the file named first; the launcher's
# own few MiB at the spawn are the bias left, the same at every size.
LAUNCHER = (
    "import json, os, sys; pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ); _, status, ru = os.wait4(pid, 0); "
    "open(sys.argv[1], 'w').write(json.dumps([os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, ru.ru_maxrss]))"
)


def measure(checkout: Path, work: Work, stdout: Path) -> Measured:
    env = {**os.environ, **work.env, "PYTHONPATH": str(checkout)}
    usage_file = stdout.with_name(stdout.name + ".usage")
    started = time.monotonic()
    with stdout.open("wb") as out:
        done = subprocess.run([sys.executable, "-c", LAUNCHER, str(usage_file), sys.executable, "-P", *work.argv], cwd=checkout, env=env, stdout=out, stderr=subprocess.PIPE, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the launcher of {' '.join(work.argv)} in {checkout}: exit {done.returncode}\n{done.stderr.decode(errors='replace')[-2000:]}")
    returncode, cpu_s, maxrss_kib = json.loads(usage_file.read_text())
    if returncode not in (0, 1):  # 1: the work ran, something in it failed (an unplaceable server)
        raise SystemExit(f"{' '.join(work.argv)} in {checkout}: exit {returncode}\n{done.stderr.decode(errors='replace')[-2000:]}")
    return Measured(cpu_s, maxrss_kib / 1024, wall, returncode)


def exponent(n1: int, cost1: float, n2: int, cost2: float) -> float | None:
    if cost1 <= 0 or cost2 <= 0 or n1 == n2:
        return None
    return math.log(cost2 / cost1) / math.log(n2 / n1)


def run_row(row: Row, sizes: Sequence[int], checkouts: Mapping[str, Path], folder: Path, repeat: int) -> list[dict[str, Any]]:
    """Every size, each checkout in turn (interleaved), `repeat` times: the least CPU is kept (the
    others are the same work slowed by the machine's other load). The row's floor size first: the
    growth exponent net of its cost (imports, start-up) is the one that tells how the work grows."""
    figures: list[dict[str, Any]] = []
    floor = [row.floor_size] if row.floor_size is not None and row.floor_size < min(sizes) else []
    for size in [*floor, *sizes]:
        inputs = folder / row.name / str(size)
        work = row.make(size, inputs)
        best: dict[str, Measured] = {}
        for _ in range(repeat):
            for name, checkout in checkouts.items():
                for label in [name, f"{name}-warm"] if row.warm else [name]:
                    if label == name and work.forget is not None:
                        work.forget()
                    stdout = inputs / f"stdout-{label}"
                    got = measure(checkout, work, stdout)
                    if row.check is not None:
                        got.figures = row.check(stdout)
                    if label not in best or got.cpu_s < best[label].cpu_s:
                        best[label] = got
                    print(f"  {row.name} {size} {label}: {got.cpu_s:.2f} s CPU, {got.maxrss_mib:.0f} MiB {got.figures or ''}", file=sys.stderr, flush=True)
        for label, got in best.items():
            figures.append({"row": row.name, "unit": row.unit, "size": size, "checkout": label, "cpu_s": round(got.cpu_s, 3),
                            "maxrss_mib": round(got.maxrss_mib, 1), "wall_s": round(got.wall_s, 3), **got.figures})  # fmt: skip
    for label in dict.fromkeys(f["checkout"] for f in figures):
        fixed = [f for f in figures if f["checkout"] == label and floor and f["size"] == floor[0]]
        for f in fixed:
            f["floor"] = True
        fixed_s = fixed[0]["cpu_s"] if fixed else 0.0
        mine = [f for f in figures if f["checkout"] == label and not f.get("floor")]
        for previous, current in zip(mine, mine[1:]):
            grown = exponent(previous["size"], previous["cpu_s"], current["size"], current["cpu_s"])
            current["exponent"] = round(grown, 3) if grown is not None else None
            if fixed:
                net = exponent(previous["size"], previous["cpu_s"] - fixed_s, current["size"], current["cpu_s"] - fixed_s)
                current["net_exponent"] = round(net, 3) if net is not None else None
    return figures


def table(figures: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    extra = [k for row in ROWS.values() if any(f["row"] == row.name for f in figures) for k in row.shown]
    head = ["row", "size"]
    for label in labels:
        head += [f"{label} CPU s", f"{label} ms/item", f"{label} MiB", f"{label} exp (net)"] + [f"{label} {k}" for k in extra]
    if len(labels) == 2:
        head.append(f"{labels[0]} / {labels[1]} CPU")
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    keys = sorted({(f["row"], f["size"]) for f in figures}, key=lambda k: (list(ROWS).index(k[0]) if k[0] in ROWS else 99, k[1]))
    for name, size in keys:
        unit = next(f["unit"] for f in figures if f["row"] == name)
        cells = [name, f"{size} {unit}s"]
        by_label = {f["checkout"]: f for f in figures if (f["row"], f["size"]) == (name, size)}
        for label in labels:
            f = by_label.get(label)
            if f is None:
                cells += ["-"] * (4 + len(extra))
                continue
            grown, net = f.get("exponent"), f.get("net_exponent")
            shown = "floor" if f.get("floor") else "-" if grown is None else f"{grown:.2f}" + ("" if net is None else f" ({net:.2f})")
            cells += [f"{f['cpu_s']:.2f}", f"{1000 * f['cpu_s'] / size:.2f}", f"{f['maxrss_mib']:.0f}", shown]
            cells += [str(f.get(k, "-")) for k in extra]
        if len(labels) == 2 and all(label in by_label for label in labels):
            cells.append(f"{by_label[labels[0]]['cpu_s'] / by_label[labels[1]]['cpu_s']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    parser.add_argument("--sizes", help="comma-separated sizes for every row chosen (default: each row's own)")
    parser.add_argument("--baseline", type=Path, help="another checkout (a git worktree of an older commit) measured side by side")
    parser.add_argument("--repeat", type=int, default=1, help="measure each size this many times; the least CPU is kept")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs and outputs (their folder is printed)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.rows.split(",") if n.strip()]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)}; expected some of {', '.join(ROWS)}")
    checkouts = {"this": REPO}
    if args.baseline is not None:
        if not (args.baseline / "fleet" / "__main__.py").is_file():
            parser.error(f"--baseline {args.baseline}: expected a checkout of fleet (fleet/__main__.py)")
        checkouts["baseline"] = args.baseline.resolve()
    folder = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    figures: list[dict[str, Any]] = []
    try:
        for name in names:
            row = ROWS[name]
            sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(row.sizes)
            figures += run_row(row, sorted(sizes), checkouts, folder, args.repeat)
    finally:
        if args.keep:
            print(f"inputs and outputs kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    print(f"CPU = user + system of the command's process (imports included), least of {args.repeat}; MiB = its peak RSS; "
          f"exp = growth exponent of CPU from the size before (1 linear, 2 quadratic), (net) of the floor size's CPU; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    for label, checkout in checkouts.items():
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
        print(f"{label}: {checkout} at {commit or '?'}{' (with uncommitted changes)' if dirty else ''}")
    print(table(figures, list(dict.fromkeys(f["checkout"] for f in figures))))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"load": load, "checkouts": {k: str(v) for k, v in checkouts.items()}, "figures": figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
