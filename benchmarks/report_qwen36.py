"""Issue 21, must-show 1: the report of `playbooks/qwen36-specdec.yaml` with repeats, on two SSH
test hosts, its HTML opened in headless Chromium, the first screen kept as a screenshot.

What it does (as root; the test hosts are tests/testfleet's real sshd in Linux namespaces):

1. boots ct200 and ct201, each with the fake GPUs of the seed story (8x NVIDIA RTX PRO 6000
   Blackwell Server Edition, SM 12.0, 97,887 MiB: the fake GPU tools' default profile), the sim
   engine at `--speed` and the sim's run-to-run noise on. There is no host-file setting for the
   noise and the controller does not forward FLEET_SIM_NOISE to the hosts, so the script puts
   `FLEET_SIM_NOISE=<--noise>` into each test host's sshd `SetEnv` (beside PATH): the agent's
   environment, which every server it starts inherits (fleet/host/agent/services.py);
2. writes the seed playbook with `repeats: <--repeats>` (the playbook's only repeats setting:
   `fleet sweep` has no `--repeats`; the shipped file says `repeats: 1`), everything else as
   shipped, under the same name, into the work folder;
3. `fleet plan` of the shipped playbook and of the repeated one (what the plan says about passes
   and what they cost in the ETA), then `fleet sweep` of the repeated one on both hosts, timed;
4. counts runs: planned (plan.json), results pulled, each run id exactly once;
5. `fleet report --format html` and `--format md`; Chromium (`--headless --screenshot
   --window-size=1400,1000 --hide-scrollbars`) takes the first screen of the HTML;
6. writes into --out (default benchmarks/results/), each name prefixed by --tag (qwen36):
   -report-first-screen.png, the Markdown report's first screen (title to the end of 'At a
   glance') as -report-first-screen.md, the whole report as -report-full.md, -report.html and
   -report.csv (the sweep's folder named results/<sweep id>), both plans' text (-plan.txt) and
   the figures as JSON (-report-run.json: command, wall times, runs, load, commit). The note
   (qwen36-report.md) is written by hand from those.

The sweep runs in wall-clock time on this machine's CPUs (2 here, shared): a sim server starved of
CPU is slower in simulated time too, so the machine's load adds to the noise model's variation.

    python benchmarks/report_qwen36.py                        # sim speed 0.05, 3 passes: ~3.5 min here
    python benchmarks/report_qwen36.py --levels 1,2,4,8,16 --tag qwen36-ladder16
    python benchmarks/report_qwen36.py --noise '{"throughput_sigma": 0.3}' --out /var/tmp/x --keep /var/tmp/x/work
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.testfleet import TestFleet, unavailable_reason  # noqa: E402
from tests.testfleet.hosts import TestHost, boot_test_fleet  # noqa: E402

SEED = REPO / "playbooks" / "qwen36-specdec.yaml"
HOSTS = ["ct200", "ct201"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"]


def noisy_fleet_kind(noise: str) -> type[TestFleet]:
    """TestFleet whose hosts' SSH sessions carry FLEET_SIM_NOISE (sshd SetEnv)."""

    class NoisyFleet(TestFleet):
        @staticmethod
        def _sshd_config(host: TestHost) -> str:
            lines = TestFleet._sshd_config(host).split("\n")
            return "\n".join(f"{line} FLEET_SIM_NOISE={value}" if line.startswith("SetEnv ") else line for line in lines)

    # sshd splits SetEnv's arguments as a shell would: a JSON object goes in single quotes.
    value = noise if noise.replace("_", "").isalnum() else "'" + noise + "'"

    return NoisyFleet


def run(argv: list[str], env: dict[str, str], log: Path, timeout: float | None = None) -> tuple[int, float, str]:
    """Run a fleet command; its output is kept in `log`. Returns (exit code, wall seconds, output)."""
    start = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - start
    output = done.stdout + (("\n--- stderr ---\n" + done.stderr) if done.stderr.strip() else "")
    log.write_text(f"$ {' '.join(argv)}\n(exit {done.returncode}, {wall:.1f} s)\n\n{output}")
    return done.returncode, wall, output


def first_screen_md(markdown: str) -> str:
    """The Markdown report from its title to the end of its 'At a glance' section."""
    lines = markdown.splitlines()
    out: list[str] = []
    seen_glance = False
    for line in lines:
        if line.startswith("## "):
            if seen_glance:
                break
            seen_glance = "glance" in line.lower()
        out.append(line)
    return "\n".join(out).rstrip() + "\n"


def count_runs(sweep: Path) -> dict[str, object]:
    plan = json.loads((sweep / "plan.json").read_text())
    planned = plan_run_ids(plan)
    found: list[str] = []
    statuses: Counter[str] = Counter()
    passes: Counter[int] = Counter()
    for path in sorted(sweep.glob("*/runs/*.json")):
        result = json.loads(path.read_text())
        found.append(result["run_id"])
        statuses[result["status"]] += 1
        if result["status"] == "ok":  # a concurrency run's passes are per level (`levels`: one entry per level and pass)
            per_level = Counter(entry["level"] for entry in result.get("levels") or [])
            for n in per_level.values() if per_level else [len(result.get("repeats") or [])]:
                passes[n] += 1
    counts = Counter(found)
    return {
        "planned": len(planned),
        "results": len(found),
        "distinct": len(counts),
        "duplicated": sorted(r for r, n in counts.items() if n > 1),
        "missing": sorted(set(planned) - set(counts)),
        "unplanned": sorted(set(counts) - set(planned)),
        "statuses": dict(statuses),
        "passes_per_measurement": {str(k): v for k, v in sorted(passes.items())},  # n passes: how many run-levels had n
    }


def plan_run_ids(plan: dict) -> list[str]:
    """The run ids plan.json lists (`runs`: one object per planned run, its `id`)."""
    return sorted({run["id"] for run in plan["runs"]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed", type=float, default=0.05, help="sim_speed of both hosts (wall s per simulated s)")
    parser.add_argument("--repeats", type=int, default=3, help="the playbook's repeats (passes per run)")
    parser.add_argument("--noise", default="on", help="FLEET_SIM_NOISE on the hosts: on, off or a JSON object")
    parser.add_argument("--poll", type=float, default=1.0, help="fleet sweep --poll")
    parser.add_argument("--window", default="1400,1000", help="Chromium window size of the first screen")
    parser.add_argument("--levels", help="replace the concurrency workload's levels (e.g. 1,2,4,8,16); default: the playbook's (auto)")
    parser.add_argument("--tag", default="qwen36", help="prefix of the files written into --out")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one, deleted)")
    args = parser.parse_args()

    reason = unavailable_reason()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if reason or chromium is None:
        print(f"cannot run: {reason or 'no chromium (apt-get install -y chromium)'}", file=sys.stderr)
        return 2
    work = args.keep or Path(tempfile.mkdtemp(prefix="fleet-qwen36-report-"))
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    data = yaml.safe_load(SEED.read_text())
    shipped_repeats = data.get("repeats", 1)
    data["repeats"] = args.repeats
    changed = f"repeats: {args.repeats} (shipped: {shipped_repeats})"
    if args.levels:
        shipped_levels = data["workloads"]["concurrency"]["levels"]
        data["workloads"]["concurrency"]["levels"] = [int(x) for x in args.levels.split(",")]
        changed += f", concurrency levels {data['workloads']['concurrency']['levels']} (shipped: {shipped_levels})"
    playbook = work / "qwen36-specdec.yaml"
    playbook.write_text(f"# {SEED.relative_to(REPO)} with {changed}\n" + yaml.safe_dump(data, sort_keys=False))

    fleet = boot_test_fleet(noisy_fleet_kind(args.noise), HOSTS, "256m", None, 15.0)
    started = time.monotonic()
    figures: dict[str, object] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "playbook_changes": changed,
        "speed": args.speed,
        "repeats": args.repeats,
        "noise": args.noise,
        "hosts": HOSTS,
        "window": args.window,
    }
    try:
        hosts_dir = fleet.write_inventory(work / "hosts", engine={"sim_speed": args.speed})
        env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(work / "results"), "COLUMNS": "200"}
        profile = fleet["ct200"].gpu_profile()
        figures["gpu"] = f"{profile['count']}x {profile['name']} (SM {profile['compute_cap']}, {profile['memory_total_mib']} MiB)"
        # What an SSH session (so the agent, so every server it starts) sees; `fleet.exec` would not.
        seen = subprocess.run(fleet["ct200"].ssh_argv("echo $FLEET_SIM_NOISE"), capture_output=True, text=True, timeout=30).stdout.strip()
        figures["noise_seen_over_ssh"] = seen
        print(f"hosts up: {', '.join(HOSTS)}; {figures['gpu']} each; FLEET_SIM_NOISE on the hosts: {seen!r}", flush=True)

        fleet_cmd = [sys.executable, "-m", "fleet"]
        plans: list[str] = []
        for name, book in (("shipped", SEED), (f"repeats {args.repeats}", playbook)):
            code, wall, output = run([*fleet_cmd, "plan", "-p", str(book), "--hosts", ",".join(HOSTS)], env, work / f"plan-{name.replace(' ', '')}.log")
            plans.append(f"=== fleet plan of the {name} playbook (exit {code}, {wall:.1f} s) ===\n{output}")
            print(f"fleet plan ({name}): exit {code}", flush=True)
        (args.out / f"{args.tag}-plan.txt").write_text("\n".join(plans))

        sweep_cmd = [*fleet_cmd, "sweep", "-p", str(playbook), "--hosts", ",".join(HOSTS), "--poll", str(args.poll)]
        print(f"$ {' '.join(sweep_cmd)}", flush=True)
        load_before = os.getloadavg()
        code, wall, output = run(sweep_cmd, env, work / "sweep.log")
        figures.update(sweep_exit=code, sweep_wall_s=round(wall, 1), load_before=load_before, load_after=os.getloadavg())
        print(f"fleet sweep: exit {code} in {wall:.1f} s", flush=True)
        print("\n".join(output.splitlines()[-25:]), flush=True)
        sweep = work / "results" / (work / "results" / "LATEST").read_text().strip()
        figures["sweep_id"] = sweep.name
        figures["runs"] = count_runs(sweep)
        print(json.dumps(figures["runs"], indent=1), flush=True)

        html = work / "report.html"
        markdown = work / "report.md"
        for fmt, target in (("html", html), ("md", markdown), ("csv", work / "report.csv")):
            code, wall, _ = run([*fleet_cmd, "report", str(sweep), "--format", fmt, "-o", str(target)], env, work / f"report-{fmt}.log")
            figures[f"report_{fmt}"] = {"exit": code, "wall_s": round(wall, 2)}
        shot = args.out / f"{args.tag}-report-first-screen.png"
        done = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--screenshot={shot}", f"--window-size={args.window}", html.as_uri()], capture_output=True, text=True, timeout=180)
        figures["chromium"] = {"exit": done.returncode, "screenshot": str(shot.relative_to(REPO)) if shot.is_relative_to(REPO) else str(shot)}
        full = markdown.read_text()
        (args.out / f"{args.tag}-report-first-screen.md").write_text(first_screen_md(full))
        # Kept copies name the sweep's folder as results/<sweep id>, not the (deleted) work folder.
        for source, name in ((markdown, "report-full.md"), (html, "report.html"), (work / "report.csv", "report.csv")):
            (args.out / f"{args.tag}-{name}").write_text(source.read_text().replace(str(sweep), f"results/{sweep.name}"))
        figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "fleet"], capture_output=True, text=True)
        figures["commit"] = (head.stdout.strip() + (" + uncommitted changes under fleet/" if dirty.stdout.strip() else "")) if head.returncode == 0 else None
        figures["script_wall_s"] = round(time.monotonic() - started, 1)
        (args.out / f"{args.tag}-report-run.json").write_text(json.dumps(figures, indent=1, default=str) + "\n")
        print(json.dumps({k: figures[k] for k in ("sweep_exit", "sweep_wall_s", "report_html", "report_md", "chromium")}, indent=1))
        print(f"work folder: {work}")
    finally:
        fleet.close()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
