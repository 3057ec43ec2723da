"""fleet side by side with Ansible and pyinfra on the same real SSH test hosts (issue 12).

Rows (each a median of --runs interleaved runs, A B A B ..., against its peer in the same run):

- `facts`: `fleet facts <all hosts> --json` with an empty controller cache (cold) and with the
  cache of the previous run (warm), against `ansible all -m setup -f N`, against pyinfra
  (`--parallel N`) running fleet's own facts script as a `server.Command` fact (the same
  content, so the comparison is of the tools, not of what they read), and against the floor:
  N parallel OpenSSH logins (`ssh host sh -c <script>`) running that script (cold) or its
  volatile part (what a warm gather runs).
- `handshakes`: SSH logins per host in one `fleet sweep` of playbooks/demo.yaml over 4 hosts,
  counted from each test host's own sshd log ("Accepted publickey" lines); also per
  `fleet fetch-logs` and per `fleet status`, and the time of `fleet status --json` of that sweep.
- `fetchlogs`: `fleet fetch-logs` of that sweep after 256 MiB of logs were written into each of
  the 4 hosts' sweep directories (1 GiB in all), into an empty local tree, against 4 parallel
  `rsync -a` of the same directories into an empty tree; then both again with nothing changed.
- `cli`: `fleet --help` and `fleet facts local --json` against `ansible --version`.
- `gap` (not in the default rows): what `fleet facts` (warm) takes beyond the OpenSSH floor, part
  by part: `python -c pass` (and with `-S`: without site's .pth files), the imports of `fleet
  facts` and of `fleet fetch-logs`, and `facts_of` run in the benchmark's own process (imports
  done) beside the floor. The controller CPU column counts child processes only (for the
  in-process row: its ssh clients).
- `processes`: the processes one gather starts on a host (cold: every fact; warm: the volatile
  ones), counted with `strace -f` (execve and fork/clone calls) around fleet's facts script run
  here with the test hosts' fake GPU tools first on PATH (no test hosts needed).

Ansible (ansible-core) and pyinfra are installed by this script into their own virtualenvs under
/var/tmp/fleet-bench-venvs/ (pinned versions; kept, so reruns are fast), and so is fleet, as
`bin/fleet` installs it (`pip install -e <checkout>`, one venv per checkout: `fleet_venv`), so that
each tool starts as its users' installs do (`--as-checkout`: fleet from this interpreter instead).
Needs root (test hosts).

    python benchmarks/bench_peers.py                       # every row, 16 hosts, 5 runs each
    python benchmarks/bench_peers.py --rows cli,facts --runs 7 --label after
    python benchmarks/bench_peers.py --hosts 4 --runs 3    # quick
    python benchmarks/bench_peers.py --host-counts 4,16,64 --runs 3 --label host-counts

`--host-counts` runs the facts row alone on a fresh test fleet of each size (issue 28): each
command's wall, controller CPU and hosts' CPU per host at each count, and the growth exponent of
each between counts (log(cost2/cost1) / log(n2/n1), bench_scale's: 1 grows with the hosts). The
hosts' CPU is what every host's sshd and the sessions it reaped used (bench_provision's count),
read between runs once the sessions have ended; the facts row shows it at any size.

Prints one table per row (median, min-max, controller CPU of the child processes, ratio fleet/peer pair by pair, the load average at its end) and writes all figures
to results/benchmarks/peers-<label>.json.

`--baseline PATH` (a checkout of an older commit, e.g. a `git worktree`) adds that fleet's runs
to the cli, facts and fetch-logs rows, interleaved with this checkout's on the same hosts in the
same minutes (the test hosts and their fake tools are this checkout's): a before/after that load
on the machine cannot skew.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_provision import host_cpu_ticks, machine_cpu, settle  # noqa: E402  (this script's directory is on sys.path)
from bench_scale import exponent  # noqa: E402
from tests.testfleet import TestFleet, start_test_fleet, unavailable_reason  # noqa: E402

VENVS = Path("/var/tmp/fleet-bench-venvs")
PEERS = {"ansible": ("ansible-core==2.19.14", "ansible"), "pyinfra": ("pyinfra==3.10.0", "pyinfra")}
LOG_BYTES_PER_HOST = 256 << 20
LOG_FILES_PER_HOST = 16


# ----------------------------------------------------------------------------------- harness


def _venv(venv: Path, stamp: str, install: Sequence[str]) -> Path:
    """The virtualenv at `venv`, made and `pip install`-ed with `install` unless its marker says it
    was with `stamp`; returns its bin directory."""
    marker = venv / "installed.txt"
    if not (marker.exists() and marker.read_text().strip() == stamp):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *install], check=True, stderr=subprocess.DEVNULL)
        marker.write_text(stamp + "\n")
    return venv / "bin"


def ensure_venv(name: str) -> Path:
    """The peer's virtualenv (created and pip-installed once); returns its bin directory."""
    spec, _ = PEERS[name]
    return _venv(VENVS / name, spec, [spec])


def fleet_venv(repo: Path) -> Path:
    """fleet of the checkout `repo` installed the way README's `bin/fleet` installs it, and measured
    the way the peers are (each in a virtualenv of its own, with its bytecode): a virtualenv with
    `pip install -e <checkout>` (its dependencies from the index, once per pyproject.toml); returns
    its bin directory. Not the suite's interpreter: this machine's site-packages carry `.pth` files
    (fleet's own editable finder, a certifi hook) that every Python start there pays and a user's
    install does not."""
    key = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    stamp = hashlib.sha256((repo / "pyproject.toml").read_bytes()).hexdigest()
    return _venv(VENVS / f"fleet-{key}", stamp, ["-e", str(repo)])


def run_quiet(argv: Sequence[str], env: dict[str, str] | None = None, timeout: float = 600) -> float:
    """Wall seconds of one run; a failing run stops the benchmark (a figure of a failure is no figure)."""
    started = time.perf_counter()
    done = subprocess.run(list(argv), env=env, capture_output=True, timeout=timeout)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} exited {done.returncode}:\n{done.stdout.decode()[-2000:]}\n{done.stderr.decode()[-2000:]}")
    return elapsed


def children_cpu_s() -> float:
    """User + system CPU seconds of every child process waited for so far (the controller side of a
    run: the tool's own process, and for the OpenSSH floor its ssh clients)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timed(dict[str, list[float]]):
    """Wall seconds per variant (the dict), the CPU seconds of its child processes (`cpu`) and,
    where measured, the CPU seconds spent inside the test hosts (`host_cpu`)."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__({name: [] for name in names})
        self.cpu: dict[str, list[float]] = {name: [] for name in names}
        self.host_cpu: dict[str, list[float]] = {name: [] for name in names}


def interleave(variants: dict[str, Callable[[], float]], runs: int, warmup: int = 1, host_cpu: Callable[[], float] | None = None) -> Timed:
    """Each variant once per round, in turn, `runs` counted rounds after `warmup` rounds;
    `host_cpu`: the hosts' CPU seconds so far, read before and after each run (not timed)."""
    times = Timed(list(variants))
    for round_no in range(warmup + runs):
        for name, fn in variants.items():
            hosts = host_cpu() if host_cpu is not None else 0.0
            cpu = children_cpu_s()
            seconds = fn()
            if round_no >= warmup:
                times[name].append(seconds)
                times.cpu[name].append(children_cpu_s() - cpu)
                if host_cpu is not None:
                    times.host_cpu[name].append(host_cpu() - hosts)
    return times


def summary(times: dict[str, list[float]], pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name, values in times.items():
        rows[name] = {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values), "runs": values}
        if isinstance(times, Timed):
            rows[name]["cpu_median_s"] = statistics.median(times.cpu[name])
            if times.host_cpu[name]:
                rows[name]["host_cpu_median_s"] = statistics.median(times.host_cpu[name])
    ratios = {}
    for a, b in pairs:
        per_pair = [x / y for x, y in zip(times[a], times[b])]
        ratios[f"{a} / {b}"] = {"median": statistics.median(per_pair), "min": min(per_pair), "max": max(per_pair)}
    return {"times": rows, "ratios": ratios}


def print_table(title: str, result: dict[str, Any]) -> None:
    print(f"\n## {title}\n")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end\n")
    print("| command | median s | min-max s | controller CPU s (median) | hosts' CPU s (median) |")
    print("|---|---|---|---|---|")
    for name, row in result["times"].items():
        cpu = f"{row['cpu_median_s']:.3f}" if "cpu_median_s" in row else ""
        host = f"{row['host_cpu_median_s']:.3f}" if "host_cpu_median_s" in row else ""
        print(f"| {name} | {row['median_s']:.3f} | {row['min_s']:.3f}-{row['max_s']:.3f} | {cpu} | {host} |")
    for name, ratio in result.get("ratios", {}).items():
        print(f"| ratio {name} | {ratio['median']:.2f} | {ratio['min']:.2f}-{ratio['max']:.2f} | | |")
    sys.stdout.flush()


# ----------------------------------------------------------------------------------- setting


class Setting:
    """A test fleet, its fleet inventory, an Ansible inventory and a pyinfra inventory."""

    def __init__(self, fleet: TestFleet, work: Path, engine: str, baseline: Path | None = None, as_checkout: bool = False) -> None:
        self.fleet = fleet
        self.baseline = baseline
        self.as_checkout = as_checkout
        self.work = work
        self.hosts_dir = fleet.write_inventory(work / "hosts")
        # The facts row's engine Python: /usr/bin/python3 without torch by default (`--engine
        # bare`), as real hosts each import torch on their own CPUs while test hosts share this
        # machine's; `--engine torch` keeps the test interpreter (imports torch per host).
        self.facts_hosts_dir = self.hosts_dir if engine == "torch" else fleet.write_inventory(work / "hosts-bare", engine={"python": "/usr/bin/python3"})
        self.results = work / "results"
        self.results.mkdir()
        self.names = [h.name for h in fleet.hosts]
        self.idle_processes = {h.name: len(fleet.processes(h)) for h in fleet.hosts}

    def host_cpu_s(self) -> float:
        """CPU seconds spent inside all the test hosts so far (each host's sshd and every session
        it reaped), once the sessions of the last run have ended."""
        settle(self.fleet, self.idle_processes)
        return sum(host_cpu_ticks(h) for h in self.fleet.hosts) / os.sysconf("SC_CLK_TCK")

    def fleet_env(self, cache: Path | None = None, hosts_dir: Path | None = None, repo: Path = REPO) -> dict[str, str]:
        env = dict(os.environ, FLEET_HOSTS_DIR=str(hosts_dir or self.hosts_dir), FLEET_RESULTS_DIR=str(self.results))
        env["XDG_CACHE_HOME"] = str(cache or self.work / "cache")
        if self.as_checkout:
            # The fleet of `repo` (this checkout, or the baseline's) through PYTHONPATH, in the
            # interpreter running this script, bytecode as its environment says.
            env["PYTHONPATH"] = str(repo)
        else:
            # As installed (fleet_venv): the venv's own fleet, and bytecode written on the first
            # run as a user's shell writes it (this machine's environment sets
            # PYTHONDONTWRITEBYTECODE, which would compile every module on every run).
            env.pop("PYTHONPATH", None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def fleet_argv(self, *args: str, repo: Path = REPO) -> list[str]:
        if self.as_checkout:
            # -P: `-m` would put the working directory (this checkout) ahead of PYTHONPATH, and a
            # --baseline run would measure this checkout's fleet instead of the baseline's.
            return [sys.executable, "-P", "-m", "fleet", *args]
        return [str(fleet_venv(repo) / "fleet"), *args]

    def fleet_python(self, repo: Path = REPO) -> list[str]:
        """The interpreter `fleet_argv` runs fleet in (for the gap row's import timings)."""
        return [sys.executable, "-P"] if self.as_checkout else [str(fleet_venv(repo) / "python")]

    def ssh_common(self) -> str:
        return f"-F none -o UserKnownHostsFile={self.fleet.known_hosts} -o StrictHostKeyChecking=yes -o BatchMode=yes"

    def ansible_inventory(self) -> Path:
        path = self.work / "ansible-hosts.ini"
        lines = ["[all]"]
        lines += [
            f"{h.name} ansible_host={h.address} ansible_port={h.port} ansible_user={h.user} ansible_ssh_private_key_file={h.identity_file} ansible_python_interpreter=/usr/bin/python3"
            for h in self.fleet.hosts
        ]
        lines += ["[all:vars]", f"ansible_ssh_common_args='{self.ssh_common()}'", ""]
        path.write_text("\n".join(lines))
        return path

    def pyinfra_inventory(self) -> Path:
        path = self.work / "pyinfra_inventory.py"
        hosts = [
            (
                h.name,
                {
                    "ssh_hostname": h.address,
                    "ssh_port": h.port,
                    "ssh_user": h.user,
                    "ssh_key": str(h.identity_file),
                    "ssh_known_hosts_file": str(self.fleet.known_hosts),
                    "ssh_strict_host_key_checking": "yes",
                },
            )
            for h in self.fleet.hosts
        ]
        path.write_text(f"hosts = {hosts!r}\n")
        return path

    def logins(self) -> dict[str, int]:
        """Accepted SSH logins so far, per host, from the host's own sshd log."""
        counts = {}
        for host in self.fleet.hosts:
            log = host.base / "log" / "sshd.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            counts[host.name] = sum(1 for line in text.splitlines() if "Accepted publickey" in line)
        return counts


def fleet_facts_script(setting: Setting, *, warm: bool = False) -> str:
    """The composite script `fleet facts` runs on a host without a cache (with one, `warm`: the
    volatile facts alone), as fleet builds it."""
    from fleet.connect import host_paths
    from fleet.facts import gather
    from fleet.facts.commands import composite_script
    from fleet.facts.models import FactsRequest
    from fleet.inventory import load_inventory

    host = next(iter(load_inventory(setting.facts_hosts_dir)))
    request = FactsRequest(paths=host_paths(host), engine_python=host.engine.python)
    facts = gather._volatile_facts(request) + ([] if warm else gather._stable_facts(request))
    return composite_script(facts)


def openssh_floor(setting: Setting, script: str) -> float:
    """The physical floor of a gather: one OpenSSH login per host, all at once, each running
    `script` (fleet's own) and exiting; wall seconds until the last is done."""
    started = time.perf_counter()
    with ThreadPoolExecutor(len(setting.fleet.hosts)) as pool:
        for future in [pool.submit(run_quiet, host.ssh_argv(shlex.join(["sh", "-c", script]))) for host in setting.fleet.hosts]:
            future.result()
    return time.perf_counter() - started


# -------------------------------------------------------------------------------------- rows


def row_cli(setting: Setting, runs: int) -> dict[str, Any]:
    ansible = ensure_venv("ansible") / "ansible"
    local_hosts = setting.work / "local-hosts"
    local_hosts.mkdir(exist_ok=True)
    shutil.copy(REPO / "hosts" / "local.yaml", local_hosts / "local.yaml")
    env = dict(setting.fleet_env(), FLEET_HOSTS_DIR=str(local_hosts))
    variants = {
        "fleet --help": lambda: run_quiet(setting.fleet_argv("--help"), env),
        "fleet facts local --json": lambda: run_quiet(setting.fleet_argv("facts", "local", "--json"), env),
        "ansible --version": lambda: run_quiet([str(ansible), "--version"]),
    }
    pairs = [("fleet --help", "ansible --version"), ("fleet facts local --json", "ansible --version")]
    if setting.baseline is not None:
        baseline = setting.baseline
        old = dict(setting.fleet_env(repo=baseline), FLEET_HOSTS_DIR=str(local_hosts))
        variants["fleet --help (baseline)"] = lambda: run_quiet(setting.fleet_argv("--help", repo=baseline), old)
        variants["fleet facts local --json (baseline)"] = lambda: run_quiet(setting.fleet_argv("facts", "local", "--json", repo=baseline), old)
        pairs += [("fleet --help", "fleet --help (baseline)"), ("fleet facts local --json", "fleet facts local --json (baseline)")]
    return summary(interleave(variants, runs), pairs)


def row_processes() -> dict[str, Any]:
    """execve and fork/clone calls of one facts script (cold, warm), as strace sees them."""
    from collections import Counter

    from fleet.facts import gather
    from fleet.facts.commands import composite_script, parse_section
    from fleet.facts.models import FactsRequest
    from fleet.host.facts_output import split_sections
    from tests.testfleet.gpu_tools import local_gpu_env

    if shutil.which("strace") is None:
        return {"skipped": "strace is not installed"}
    base = Path(tempfile.mkdtemp(prefix="fleet-bench-procs-", dir="/var/tmp"))
    try:
        env = {**local_gpu_env(base, os.environ), "XDG_CACHE_HOME": str(base / "cache")}
        request = FactsRequest(paths={"work_dir": str(base / "work" / "x"), "model_cache": "/srv/models/q", "staging": str(base / "shm")}, engine_python="/usr/bin/python3")
        out: dict[str, Any] = {}
        for kind, facts in (("cold", gather._volatile_facts(request) + gather._stable_facts(request)), ("warm", gather._volatile_facts(request))):
            script = composite_script(facts)
            subprocess.run(["sh", "-c", script], env=env, capture_output=True, timeout=120)  # the engine probe's host cache, as after a first gather
            trace = base / f"{kind}.trace"
            done = subprocess.run(
                ["strace", "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-e", "status=successful", "-o", str(trace), "sh", "-c", script],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            lines = trace.read_text().splitlines()
            execs = [line.split('execve("', 1)[1].split('"', 1)[0].rsplit("/", 1)[-1] for line in lines if "execve(" in line]
            sections = split_sections(done.stdout)
            problems = {}
            for fact in facts:
                try:
                    parse_section(fact, sections[fact.name])
                except Exception as exc:  # a count of a gather that failed is no count
                    problems[fact.name] = str(exc)
            out[kind] = {"execs": len(execs), "forks": sum(1 for line in lines if "clone" in line or "fork(" in line), "by_program": dict(Counter(execs)), "problems": problems}
        return out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def row_facts(setting: Setting, runs: int) -> dict[str, Any]:
    n = len(setting.names)
    ansible = ensure_venv("ansible") / "ansible"
    pyinfra = ensure_venv("pyinfra") / "pyinfra"
    ansible_inv = setting.ansible_inventory()
    pyinfra_inv = setting.pyinfra_inventory()
    script = fleet_facts_script(setting)
    counter = iter(range(1_000_000))

    def fleet_cold(repo: Path = REPO) -> float:
        cache = setting.work / f"cold-cache-{next(counter)}"
        try:
            return run_quiet(setting.fleet_argv("facts", "all", "--json", repo=repo), setting.fleet_env(cache, setting.facts_hosts_dir, repo))
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def fleet_warm(repo: Path = REPO) -> float:
        cache = setting.work / ("warm-cache" if repo == REPO else "warm-cache-baseline")
        return run_quiet(setting.fleet_argv("facts", "all", "--json", repo=repo), setting.fleet_env(cache, setting.facts_hosts_dir, repo))

    def ansible_setup() -> float:
        # A fresh ControlPath directory per run: no run reuses a master left by the one before.
        control = Path(tempfile.mkdtemp(prefix="cp-", dir="/tmp"))
        config = setting.work / "ansible.cfg"
        config.write_text("[defaults]\n")
        env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_SSH_CONTROL_PATH_DIR=str(control), ANSIBLE_LOCAL_TEMP=str(control / "tmp"), ANSIBLE_NOCOLOR="1")
        try:
            return run_quiet([str(ansible), "all", "-i", str(ansible_inv), "-m", "setup", "-f", str(n)], env)
        finally:
            for sock in control.iterdir():
                if sock.is_socket():
                    subprocess.run(["ssh", "-S", str(sock), "-O", "exit", "x"], capture_output=True, timeout=10)
            shutil.rmtree(control, ignore_errors=True)

    def pyinfra_same() -> float:
        argv = [str(pyinfra), "-y", "--parallel", str(n), str(pyinfra_inv), "fact", "server.Command", f"command=sh -c {shlex.quote(script)}"]
        return run_quiet(argv, dict(os.environ, HOME=str(setting.work)))

    warm_script = fleet_facts_script(setting, warm=True)
    floor_cold, floor_warm = f"{n} x ssh, the cold script (floor)", f"{n} x ssh, the warm script (floor)"
    variants: dict[str, Callable[[], float]] = {
        "fleet facts (cold)": fleet_cold,
        "fleet facts (warm cache)": fleet_warm,
        f"ansible all -m setup -f {n}": ansible_setup,
        f"pyinfra fleet's script --parallel {n}": pyinfra_same,
        floor_cold: lambda: openssh_floor(setting, script),
        floor_warm: lambda: openssh_floor(setting, warm_script),
    }
    pairs = [
        ("fleet facts (cold)", f"ansible all -m setup -f {n}"),
        ("fleet facts (cold)", f"pyinfra fleet's script --parallel {n}"),
        ("fleet facts (warm cache)", f"ansible all -m setup -f {n}"),
        ("fleet facts (warm cache)", f"pyinfra fleet's script --parallel {n}"),
        ("fleet facts (cold)", floor_cold),
        ("fleet facts (warm cache)", floor_warm),
    ]
    baseline = setting.baseline
    if baseline is not None:
        variants["fleet facts (cold, baseline)"] = lambda: fleet_cold(baseline)
        variants["fleet facts (warm cache, baseline)"] = lambda: fleet_warm(baseline)
        pairs += [
            ("fleet facts (cold)", "fleet facts (cold, baseline)"),
            ("fleet facts (warm cache)", "fleet facts (warm cache, baseline)"),
            ("fleet facts (cold, baseline)", f"ansible all -m setup -f {n}"),
        ]
    return summary(interleave(variants, runs, host_cpu=setting.host_cpu_s), pairs)


def row_gap(setting: Setting, runs: int) -> dict[str, Any]:
    """What `fleet facts` (warm) takes beyond the OpenSSH floor, part by part: the interpreter's
    start, the imports of the command, and the gather itself (`facts_of` in this process, its
    imports done) beside the floor, interleaved; and the imports of `fleet fetch-logs`."""
    from fleet.connect import facts_of
    from fleet.inventory import load_inventory

    hosts = list(load_inventory(setting.facts_hosts_dir))
    cache = setting.work / "gap-cache"
    python = setting.fleet_python()
    env = setting.fleet_env(cache, setting.facts_hosts_dir)
    warm_script = fleet_facts_script(setting, warm=True)

    def in_process() -> float:
        saved = os.environ.get("XDG_CACHE_HOME")
        os.environ["XDG_CACHE_HOME"] = str(cache)  # fleet.connect.facts_cache_dir reads it per call
        try:
            started = time.perf_counter()
            failed = facts_of(hosts).failed
            elapsed = time.perf_counter() - started
        finally:
            if saved is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = saved
        if failed:
            raise SystemExit(f"facts_of failed: {failed}")
        return elapsed

    n = len(hosts)
    variants: dict[str, Callable[[], float]] = {
        "python -c pass": lambda: run_quiet([*python, "-c", "pass"], env),
        # The interpreter without site: what the .pth files of the interpreter's site-packages
        # cost every command (fleet's editable finder among them).
        "python -S -c pass": lambda: run_quiet([*python, "-S", "-c", "pass"], env),
        "imports of fleet facts": lambda: run_quiet([*python, "-c", "import fleet.cli; from fleet.connect import facts_of; import fleet.facts, fleet.transport.ssh, fleet.transport.openssh"], env),
        "imports of fleet fetch-logs": lambda: run_quiet([*python, "-c", "import fleet.cli, fleet.backend; fleet.backend.backends(); import fleet.sweep.logs, fleet.sweep.status"], env),
        "fleet facts (warm cache)": lambda: run_quiet(setting.fleet_argv("facts", "all", "--json"), env),
        "facts_of in this process (warm, imports done)": in_process,
        f"{n} x ssh, the warm script (floor)": lambda: openssh_floor(setting, warm_script),
    }
    in_process()  # the cache, so that every counted run is warm
    pairs = [("fleet facts (warm cache)", f"{n} x ssh, the warm script (floor)"), ("facts_of in this process (warm, imports done)", f"{n} x ssh, the warm script (floor)")]
    return summary(interleave(variants, runs), pairs)


def demo_sweep(setting: Setting, names: Sequence[str]) -> tuple[str, dict[str, int]]:
    """One `fleet sweep` of playbooks/demo.yaml, plus a fourth server (DFlash with 8 draft
    tokens), on `names` (one GPU each, so that each host runs one server); its id and the logins
    it took per host."""
    import yaml

    for name in names:
        setting.fleet[name].set_gpu_profile(count=1)
    hosts_dir = setting.fleet.write_inventory(setting.work / "hosts-sweep", engine={"sim_speed": 0.05})
    book = yaml.safe_load((REPO / "playbooks" / "demo.yaml").read_text())
    book["methods"]["dflash8"] = {**book["methods"]["dflash"], "num_draft_tokens": 8}
    playbook = setting.work / "demo4.yaml"
    playbook.write_text(yaml.safe_dump(book))
    before = setting.logins()
    argv = setting.fleet_argv("sweep", "-p", str(playbook), "--hosts", ",".join(names), "--json")
    done = subprocess.run(argv, env=setting.fleet_env(hosts_dir=hosts_dir), capture_output=True, text=True, timeout=900)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    last = lines[-1] if lines else {}
    if last.get("type") != "summary" or done.returncode not in (0, 1):
        raise SystemExit(f"demo sweep failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    after = setting.logins()
    hosts_with_runs = {e["host"] for e in lines if e.get("type") == "run"}
    if hosts_with_runs != set(names):
        raise SystemExit(f"the sweep ran on {sorted(hosts_with_runs)}, not on each of {names}")
    return last["sweep_id"], {n: after[n] - before[n] for n in names}


def row_handshakes_and_fetch(setting: Setting, runs: int) -> dict[str, Any]:
    names = setting.names[:4]
    sweep_id, sweep_logins = demo_sweep(setting, names)
    result: dict[str, Any] = {"sweep_id": sweep_id, "hosts": names, "logins_per_sweep": sweep_logins}

    before = setting.logins()
    run_quiet(setting.fleet_argv("status", sweep_id, "--json"), setting.fleet_env())
    result["logins_per_status"] = {n: setting.logins()[n] - before[n] for n in names}

    # 256 MiB of incompressible "logs" per host, in its sweep directory (persistent, on disk).
    from fleet.inventory import load_inventory
    from fleet.layout import sweep_dir

    inventory = {h.name: h for h in load_inventory(setting.hosts_dir)}
    remote_dirs = {n: sweep_dir(inventory[n], sweep_id) for n in names}
    chunk = LOG_BYTES_PER_HOST // LOG_FILES_PER_HOST
    for name in names:
        logs = setting.fleet[name].persistent_path(remote_dirs[name]) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for i in range(LOG_FILES_PER_HOST):
            with open(logs / f"bench-{i:02d}.log", "wb") as handle:
                handle.write(os.urandom(chunk))

    local_fleet = setting.results / sweep_id
    local_rsync = setting.work / "rsync-copy"

    def rsync_all() -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(len(names)) as pool:
            futures = []
            for name in names:
                host = setting.fleet[name]
                ssh = " ".join(["ssh", *host.ssh_options()])
                dest = local_rsync / name
                dest.mkdir(parents=True, exist_ok=True)
                futures.append(pool.submit(run_quiet, ["rsync", "-a", "-e", ssh, f"{host.user}@{host.address}:{remote_dirs[name]}/", f"{dest}/"]))
            for future in futures:
                future.result()
        return time.perf_counter() - started

    def fleet_fetch(repo: Path = REPO) -> float:
        return run_quiet(setting.fleet_argv("fetch-logs", "--sweep", sweep_id, "--hosts", ",".join(names), repo=repo), setting.fleet_env(repo=repo))

    def fresh(fn: Callable[[], float], local: Path) -> Callable[[], float]:
        def run() -> float:
            for name in names:  # the 1 GiB of logs gone locally (the sweep's own records, shard.json among them, stay)
                shutil.rmtree(local / name / "logs", ignore_errors=True)
            return fn()

        return run

    full_variants = {"fleet fetch-logs (1 GiB, 4 hosts)": fresh(fleet_fetch, local_fleet), "4 x rsync -a (1 GiB)": fresh(rsync_all, local_rsync)}
    full_pairs = [("fleet fetch-logs (1 GiB, 4 hosts)", "4 x rsync -a (1 GiB)")]

    def fetch_in_process() -> float:
        """The command's work alone: `fetch_logs` in this process, its imports done (what the
        command takes beyond it is the interpreter's start and the imports: the `gap` row)."""
        from fleet.backend import fetch_logs

        started = time.perf_counter()
        fetched = fetch_logs(setting.results, sweep_id, names, hosts_dir=setting.hosts_dir)
        elapsed = time.perf_counter() - started
        if failed := [f.note for f in fetched.values() if f.note.startswith("failed")]:
            raise SystemExit(f"fetch_logs failed: {failed}")
        return elapsed

    same_variants: dict[str, Callable[[], float]] = {
        "fleet fetch-logs, nothing changed": fleet_fetch,
        "4 x rsync -a, nothing changed": rsync_all,
        "fetch_logs in this process (imports done), nothing changed": fetch_in_process,
    }
    same_pairs = [("fleet fetch-logs, nothing changed", "4 x rsync -a, nothing changed"), ("fetch_logs in this process (imports done), nothing changed", "4 x rsync -a, nothing changed")]
    baseline = setting.baseline
    if baseline is not None:
        full_variants["fleet fetch-logs (1 GiB, 4 hosts, baseline)"] = fresh(lambda: fleet_fetch(baseline), local_fleet)
        full_pairs += [("fleet fetch-logs (1 GiB, 4 hosts)", "fleet fetch-logs (1 GiB, 4 hosts, baseline)")]
        same_variants["fleet fetch-logs, nothing changed (baseline)"] = lambda: fleet_fetch(baseline)
        same_pairs += [("fleet fetch-logs, nothing changed", "fleet fetch-logs, nothing changed (baseline)")]
    result["full"] = summary(interleave(full_variants, runs), full_pairs)
    fleet_fetch(), rsync_all()
    result["unchanged"] = summary(interleave(same_variants, runs), same_pairs)

    # `fleet status` of the same sweep (one poll of each host's agent), beside the baseline's.
    def fleet_status(repo: Path = REPO) -> float:
        return run_quiet(setting.fleet_argv("status", sweep_id, "--json", repo=repo), setting.fleet_env(repo=repo))

    status_variants: dict[str, Callable[[], float]] = {"fleet status (4 hosts)": fleet_status}
    status_pairs: list[tuple[str, str]] = []
    if baseline is not None:
        status_variants["fleet status (4 hosts, baseline)"] = lambda: fleet_status(baseline)
        status_pairs.append(("fleet status (4 hosts)", "fleet status (4 hosts, baseline)"))
    result["status"] = summary(interleave(status_variants, runs), status_pairs)

    before = setting.logins()
    fleet_fetch()
    result["logins_per_fetch_logs"] = {n: setting.logins()[n] - before[n] for n in names}
    return result


def row_host_counts(counts: Sequence[int], work: Path, engine: str, runs: int, as_checkout: bool = False) -> dict[str, Any]:
    """The facts row on a fresh test fleet of each size in turn (booting not timed), with the
    load on the machine meanwhile."""
    out: dict[str, Any] = {}
    for n in counts:
        folder = work / f"hosts-{n}"
        folder.mkdir()
        # sshd start-up of 64 hosts on a busy 2-core machine takes tens of seconds.
        with start_test_fleet([f"h{i:02d}" for i in range(n)], boot_timeout=max(60.0, 2.0 * n)) as fleet:
            load_before, busy_before = os.getloadavg()[0], machine_cpu()
            facts = row_facts(Setting(fleet, folder, engine, as_checkout=as_checkout), runs)
            busy, total = (after - before for after, before in zip(machine_cpu(), busy_before))
        out[str(n)] = {**facts, "load_before": load_before, "load_after": os.getloadavg()[0], "machine_busy": busy / total if total else 0.0}
        print_table(f"facts, {n} hosts (machine busy {out[str(n)]['machine_busy']:.0%})", out[str(n)])
    return out


def print_host_counts(by_count: dict[str, Any]) -> None:
    """Per host, each command at each host count (wall, controller CPU, hosts' CPU, in ms) and the
    growth exponent of each from the count before (1: grows with the hosts, 0: does not grow)."""
    counts = [int(n) for n in by_count]
    # Variants in the same order at every count; their names carry the count (`-f 16`, `16 x ssh`).
    names = {n: list(by_count[str(n)]["times"]) for n in counts}
    print("\n## facts per host at each host count, and the growth exponent between counts\n")
    print("per host: wall ms / controller CPU ms / hosts' CPU ms (medians); exp: log(cost2/cost1) / log(n2/n1) of the whole run's wall, controller CPU, hosts' CPU\n")
    steps = [f"{a}->{b}" for a, b in zip(counts, counts[1:])]
    print("| command | " + " | ".join(f"{n} hosts" for n in counts) + " | " + " | ".join(f"exp {s} (wall, ctrl, hosts)" for s in steps) + " |")
    print("|---" * (1 + len(counts) + len(steps)) + "|")
    for index, name in enumerate(names[counts[0]]):
        rows = [by_count[str(n)]["times"][names[n][index]] for n in counts]
        cells = [f"{r['median_s'] / n * 1000:.0f} / {r['cpu_median_s'] / n * 1000:.0f} / {r['host_cpu_median_s'] / n * 1000:.0f}" for n, r in zip(counts, rows)]
        for (n1, r1), (n2, r2) in zip(zip(counts, rows), zip(counts[1:], rows[1:])):
            grown = [exponent(n1, r1[key], n2, r2[key]) for key in ("median_s", "cpu_median_s", "host_cpu_median_s")]
            cells.append(", ".join("-" if g is None else f"{g:.2f}" for g in grown))
        label = re.sub(rf"\b{counts[0]}\b", "N", name)
        print(f"| {label} | " + " | ".join(cells) + " |")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--host-counts", help="e.g. 4,16,64: the facts row alone on a fresh fleet of each size, per host and with its growth exponent (--hosts and --rows unused)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rows", default="processes,cli,facts,handshakes")
    parser.add_argument("--label", default="now")
    parser.add_argument("--engine", choices=("bare", "torch"), default="bare", help="the facts row's engine Python on the hosts")
    parser.add_argument("--baseline", type=Path, help="an older checkout whose fleet runs beside this one's (cli, facts, fetch-logs rows)")
    parser.add_argument(
        "--as-checkout", action="store_true",
        help="run fleet from the checkout in this script's interpreter (PYTHONPATH; this environment's bytecode setting and .pth files) instead of installed as bin/fleet installs it",
    )  # fmt: skip
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"test hosts unavailable: {reason}")
    rows = set() if args.host_counts else set(args.rows.split(","))
    for peer in PEERS:
        ensure_venv(peer)
    out: dict[str, Any] = {
        "label": args.label,
        "engine": args.engine,
        "hosts": args.hosts,
        "runs": args.runs,
        "load_before": os.getloadavg(),
        "baseline": str(args.baseline) if args.baseline else None,
    }
    if "processes" in rows:
        out["processes"] = row_processes()
        print("\n## processes of one facts gather on a host (strace -f)\n")
        for kind, counts in out["processes"].items():
            print(
                f"- {kind}: {counts}"
                if kind == "skipped"
                else f"- {kind}: {counts['execs']} execs, {counts['forks']} forks: {counts['by_program']}" + (f"; problems: {counts['problems']}" if counts["problems"] else "")
            )
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-peers-", dir="/var/tmp"))
    try:
        if args.host_counts:
            out["host_counts"] = row_host_counts([int(n) for n in args.host_counts.split(",")], work, args.engine, args.runs, args.as_checkout)
            print_host_counts(out["host_counts"])
        else:
            run_rows(rows, args, work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["load_after"] = os.getloadavg()
    target = REPO / "results" / "benchmarks" / f"peers-{args.label}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {target}")


def run_rows(rows: set[str], args: argparse.Namespace, work: Path, out: dict[str, Any]) -> None:
    """The rows of --rows on one test fleet of --hosts hosts."""
    with start_test_fleet([f"h{i:02d}" for i in range(args.hosts)], boot_timeout=60.0) as fleet:
        setting = Setting(fleet, work, args.engine, args.baseline.resolve() if args.baseline else None, as_checkout=args.as_checkout)
        if "cli" in rows:
            out["cli"] = row_cli(setting, args.runs)
            print_table("CLI start", out["cli"])
        if "facts" in rows:
            out["facts"] = row_facts(setting, args.runs)
            print_table(f"facts, {args.hosts} hosts", out["facts"])
        if "gap" in rows:
            out["gap"] = row_gap(setting, args.runs)
            print_table(f"what fleet facts takes beyond the floor, {args.hosts} hosts", out["gap"])
        if "handshakes" in rows:
            out["handshakes"] = row_handshakes_and_fetch(setting, args.runs)
            h = out["handshakes"]
            print("\n## SSH logins per host (sshd logs)\n")
            for what in ("logins_per_sweep", "logins_per_status", "logins_per_fetch_logs"):
                print(f"- {what}: {h[what]}")
            print_table("fetch-logs 1 GiB over 4 hosts", h["full"])
            print_table("fetch-logs, nothing changed", h["unchanged"])
            print_table("status", h["status"])


if __name__ == "__main__":
    main()
