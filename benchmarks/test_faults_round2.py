"""Issue 29's fault table, round two: the new faults, each injected on real SSH test hosts
(tests/testfleet) into a demo-sized sweep driven by the real `fleet sweep` CLI, with the
accounting of tests/integration/faults.py (runs lost, duplicated, fleet's processes left on the
hosts) and the exit code. Slow (each test is one or more whole sweeps), so not in the suite
(pyproject's testpaths = ["tests"]); run as root, one test at a time on a small machine:

    FLEET_FAULT_TABLE=results/faults/round2.jsonl python -m pytest benchmarks/test_faults_round2.py -q
    python benchmarks/fault_table.py results/faults/round2.jsonl

Every test records its row(s) before it asserts, so a fault that reveals a bug still has its row
(the assertion says what went wrong). Tools: `iptables` (statistic match: random loss) and
`benchmarks/nfqueue_delay.py` (NFQUEUE: a fixed delay, as `tc ... netem delay` would, on kernels
without sch_netem), installed by
`apt-get install -y iptables libnetfilter-queue-dev && pip install netfilterqueue`. Host clocks are
skewed for fleet's Python processes on the host (see USERCUSTOMIZE: libfaketime breaks Python here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import test_fleet_factory  # noqa: F401  (the fixture, for this file outside tests/)
from tests.integration.faults import (
    REPO,
    TABLE_ENV,
    Accounting,
    Controller,
    Scenario,
    account,
    any_of,
    fault_playbook,
    leftovers,
    notice,
    stderr_mentions,
)
from tests.integration.test_faults import (  # noqa: F401  (scenario: the fixture)
    assert_clean,
    finish,
    fresh_boot,
    outcome_of,
    plan_of,
    row,
    scenario,
    trouble,
)

# The two round-two tests of the regular suite, collected here too so that one command records
# the whole table (they also run in the suite, where they belong: each is one short sweep).
from tests.integration.test_faults import test_a_compromised_host_cannot_crash_or_poison_the_controller  # noqa: F401
from tests.integration.test_faults import test_an_agent_error_never_ends_a_sweep_with_exit_0_and_runs_missing  # noqa: F401
from tests.testfleet.hosts import TestFleet, write_atomic

pytestmark = [pytest.mark.testfleet, pytest.mark.timeout(1200)]

LONG_SWEEP_S = 900
DELAYER = Path(__file__).resolve().parent / "nfqueue_delay.py"
# demo.yaml's workloads with 4 and 8 times the new tokens: runs of seconds, not a fraction of one,
# so that a sweep lasts long enough for faults that strike several times.
LONGER_WORKLOADS = {
    "short": {"kind": "short", "prompts": ["fib", "json"], "max_new_tokens": 512},
    "concurrency": {"kind": "concurrency", "levels": [1, 4], "prompt": "qsort", "max_new_tokens": 512},
}


@pytest.fixture(autouse=True, scope="module")
def _table() -> Iterator[None]:
    """Rows go to results/faults/round2.jsonl unless FLEET_FAULT_TABLE says otherwise."""
    os.environ.setdefault(TABLE_ENV, str(REPO / "results" / "faults" / "round2.jsonl"))
    yield


# -------------------------------------------------------------------------------------------------
# network shaping inside a host's network namespace (the host's eth0; its veth peer on the machine)


def iptables(fleet: TestFleet, host: str, *args: str) -> None:
    done = subprocess.run(["ip", "netns", "exec", fleet[host].netns, "iptables", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"iptables {' '.join(args)} in {host}: {done.stderr}"


class Shaper:
    """Delay (NFQUEUE + nfqueue_delay.py) and random loss (iptables statistic) on a host's link.
    Delay and loss are on what the host sends (as netem on its interface would be); loss may be
    asked both ways. `stop()` removes every rule and the delayer; safe to repeat."""

    QUEUE = 7

    def __init__(self, fleet: TestFleet, host: str) -> None:
        self.fleet, self.host = fleet, host
        self.rules: list[tuple[str, ...]] = []
        self.delayer: subprocess.Popen | None = None

    def _add(self, *rule: str) -> None:
        iptables(self.fleet, self.host, "-A", *rule)
        self.rules.append(rule)

    def loss(self, probability: float, both_ways: bool = False) -> None:
        self._add("OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random", "--probability", str(probability), "-j", "DROP")
        if both_ways:
            self._add("INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random", "--probability", str(probability), "-j", "DROP")

    def delay(self, ms: float) -> None:
        self.delayer = subprocess.Popen(
            ["ip", "netns", "exec", self.fleet[self.host].netns, sys.executable, str(DELAYER), "--queue", str(self.QUEUE), "--delay-ms", str(ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.delayer.stdout is not None
        ready = self.delayer.stdout.readline().strip()
        assert ready == "ready", f"nfqueue_delay.py did not start: {ready!r} {self.delayer.stderr.read() if self.delayer.stderr else ''}"
        self._add("OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", str(self.QUEUE), "--queue-bypass")

    def stop(self) -> None:
        while self.rules:
            rule = self.rules.pop()
            subprocess.run(["ip", "netns", "exec", self.fleet[self.host].netns, "iptables", "-D", *rule], capture_output=True)
        if self.delayer is not None and self.delayer.poll() is None:
            self.delayer.terminate()
            self.delayer.wait(timeout=10)
        self.delayer = None


def ssh_seconds(fleet: TestFleet, host: str) -> float:
    """How long one fresh `ssh host true` takes: the control that the shaping is in place."""
    started = time.monotonic()
    subprocess.run(fleet[host].ssh_argv("true", connect_timeout=30), capture_output=True, timeout=120)
    return round(time.monotonic() - started, 2)


def sshd_config_with(fleet: TestFleet, host: str, **replace: str) -> None:
    """The host's sshd config with lines replaced (old -> new), re-read by sshd (SIGHUP: the host
    lives on, open sessions too): the testfleet's own refuse_ssh/serve_ssh mechanism."""
    h = fleet[host]
    config = TestFleet._sshd_config(h)
    for old, new in replace.items():
        assert old in config, (old, config)
        config = config.replace(old, new)
    write_atomic(h.base / "etc" / "sshd_config", config)
    fleet._reload_sshd(h)


def event_trouble(host: str):
    """`trouble(host)` from fleet's events alone (a stderr line naming the host is also the
    provisioning table's): a reboot, link drop, agent restart or a phase other than progress."""
    seen = trouble(host)
    return lambda line: line.event is not None and seen(line)


def controller_log(sc: Scenario, controller: Controller, name: str) -> None:
    (sc.root / f"{name}.log").write_text(controller.transcript(last=100000) + "\n")


def statuses(accounting: Accounting) -> str:
    counts: dict[str, int] = {}
    for status in accounting.statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


# -------------------------------------------------------------------------------------------------
# the network


def test_latency_300ms_and_loss_5pct_for_a_whole_sweep(scenario) -> None:
    """ct200's link: 300 ms of delay and 5 % loss on everything it sends, from before the sweep to
    its end (provisioning, the bundle push, every poll and pull)."""
    sc = scenario(["ct200"])
    shaper = Shaper(sc.fleet, "ct200")
    plain = ssh_seconds(sc.fleet, "ct200")
    shaper.delay(300)
    shaper.loss(0.05)
    shaped = ssh_seconds(sc.fleet, "ct200")
    try:
        at = time.time()
        controller = sc.sweep(fault_playbook(sc.root), "ct200")
        sweep_id = controller.sweep_id(timeout=LONG_SWEEP_S)
        code, accounting, left = finish(sc, controller, sweep_id, ["ct200"], timeout=LONG_SWEEP_S)
    finally:
        shaper.stop()
    took = round(time.time() - at)
    row(sc, "latency 300 ms + 5 % loss (host's egress)", "whole sweep", 1, accounting, left, notice(controller, at, event_trouble("ct200")),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; sweep {took} s; ssh login {plain} s -> {shaped} s")  # fmt: skip
    assert shaped > plain + 1.5, f"the shaping did not take: ssh {plain} s -> {shaped} s"
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


def test_loss_30pct_for_a_minute(scenario) -> None:
    """30 % of ct200's packets, both ways, dropped for 60 s from the moment its first server runs
    a workload (one server at a time: the sweep lasts beyond it)."""
    sc = scenario(["ct200"])
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200")
    sweep_id = controller.sweep_id()
    sc.wait_server("ct200", sweep_id, "running", with_run=True)
    shaper = Shaper(sc.fleet, "ct200")
    at = time.time()
    shaper.loss(0.30, both_ways=True)
    lifted: list[float] = []

    def lift() -> None:
        time.sleep(60)  # the fault's duration
        shaper.stop()
        lifted.append(time.time())

    lifter = threading.Thread(target=lift, daemon=True)
    lifter.start()
    try:
        code, accounting, left = finish(sc, controller, sweep_id, ["ct200"], timeout=LONG_SWEEP_S)
    finally:
        lifter.join(timeout=90)
        shaper.stop()
    ended = controller.first(lambda l: l.event is not None and l.event.get("type") == "summary")
    inside = ended is not None and not lifted or (lifted and ended is not None and ended.at < lifted[0])
    row(sc, "30 % loss both ways for 60 s", "mid-workload", 1, accounting, left, notice(controller, at, event_trouble("ct200")),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; " + ("sweep ended inside the loss window" if inside else "sweep outlived the window"))  # fmt: skip
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


# -------------------------------------------------------------------------------------------------
# pulls: the rsync sender and sshd killed under them


def _during_pulls(sc: Scenario, host: str, sweep_id: str, strike, times: int = 3) -> list[float]:
    """Strike `times` times, each when a new rsync sender (a pull) runs on the host."""
    at: list[float] = []
    seen: set[int] = set()

    def new_sender() -> list[int] | None:
        pids = [p for p, c in sc.fleet.processes(host).items() if "rsync --server --sender" in c and p not in seen]
        return pids or None

    for _ in range(times):
        pids = sc.wait_host(new_sender, 120, f"{host}: a new pull under way", interval=0.003)
        seen.update(pids)
        at.append(time.time())
        strike()
    return at


def test_rsync_sender_killed_three_times_during_pulls(scenario) -> None:
    sc = scenario(["ct200"])
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200")
    sweep_id = controller.sweep_id()
    hits: list[int] = []
    at = _during_pulls(sc, "ct200", sweep_id, lambda: hits.extend(sc.fleet.kill_in_host("ct200", "rsync --server --sender")))
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"])
    said = any_of(trouble("ct200"), stderr_mentions("rsync"))
    row(sc, "host's rsync sender killed (SIGKILL) x3", "pull", len(at), accounting, left, notice(controller, at[0], said),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; {len(hits)} rsync processes killed")  # fmt: skip
    assert hits, "no rsync sender was killed"
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


def test_sshd_killed_three_times_during_pulls(scenario) -> None:
    """sshd killed under a pull, as `pkill -9 sshd` would: every sshd session process of the host
    dies (the one serving the pull among them) and the listener is gone until its supervisor
    restarts it 2 s later. The test host's listening sshd is the host's first process (killing it
    is a power cut), so its death is played by the testfleet's refuse_ssh (connections refused)
    and its restart by serve_ssh."""
    sc = scenario(["ct200"])
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200")
    sweep_id = controller.sweep_id()
    hits: list[int] = []

    def kill_sshd() -> None:
        hits.extend(sc.fleet.kill_in_host("ct200", "sshd: ", signal.SIGKILL))
        sc.fleet.refuse_ssh("ct200")
        time.sleep(2)  # the supervisor's restart delay: a duration of the fault
        sc.fleet.serve_ssh("ct200")

    at = _during_pulls(sc, "ct200", sweep_id, kill_sshd)
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"])
    row(sc, "host's sshd killed (SIGKILL, restarted after 2 s) x3", "pull", len(at), accounting, left, notice(controller, at[0], trouble("ct200")),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; {len(hits)} sshd processes killed")  # fmt: skip
    assert hits, "no sshd session was killed"
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


# -------------------------------------------------------------------------------------------------
# reboots


def test_three_reboots_of_one_host_in_75s(scenario) -> None:
    """ct200 (one server at a time, runs of seconds) loses power three times: while a server runs
    a workload, then each time its agent runs again in the new boot with a server running, at
    least 20 s after the previous power cut."""
    sc = scenario(["ct200"], sim_speed=0.05)
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200")
    sweep_id = controller.sweep_id()
    at: list[float] = []
    for n in range(3):
        boot = sc.fleet["ct200"].boot_id()
        if n:
            sc.wait_host(lambda: fresh_boot(sc, "ct200", sweep_id, previous), 120, "ct200: the agent running after the reboot")
            time.sleep(max(0.0, at[-1] + 20 - time.time()))  # spacing: three cuts in about 75 s
        sc.wait_server("ct200", sweep_id, "running", with_run=True, timeout=120)
        at.append(time.time())
        sc.fleet.reboot("ct200")
        previous = boot
    span = round(at[-1] - at[0], 1)
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"], timeout=LONG_SWEEP_S)
    reboots = controller.events("reboot", "ct200")
    row(sc, "3 reboots of one host", f"mid-workload, {span} s from first to third", 3, accounting, left, notice(controller, at[0], trouble("ct200")),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; {len(reboots)} reboot events")  # fmt: skip
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)
    assert len(reboots) == 3, reboots


# -------------------------------------------------------------------------------------------------
# host clocks


# The host's clock as fleet's Python processes on it read it (the agent, its services, the sim
# engine): time.time/time_ns and datetime.now/utcnow plus the offset in /root/clock-offset
# (seconds, read again every 0.5 s), through a usercustomize module in the host's own user site
# (its /root is its own). CLOCK_MONOTONIC is left alone, as an NTP step or a wrong RTC leaves it.
# libfaketime is not usable here: Debian's 0.9.10 (apt `faketime`) and the copy vendored by pip's
# libfaketime 3.0.1 both break Python 3.11 -- with FAKETIME_DONT_FAKE_MONOTONIC=1 time.sleep
# raises OSError(EINVAL) (the agent fails at once: every run named not run, exit 1), with the
# monotonic clock faked threading.Event.wait never returns.
USERCUSTOMIZE = """
import datetime as _dt
import time as _t

_real_time, _real_time_ns, _cache = _t.time, _t.time_ns, [0.0, -1e9]


def _offset():
    now = _t.monotonic()
    if now - _cache[1] > 0.5:
        try:
            with open("/root/clock-offset") as handle:
                _cache[0] = float(handle.read().strip() or 0)
        except (OSError, ValueError):
            pass
        _cache[1] = now
    return _cache[0]


_t.time = lambda: _real_time() + _offset()
_t.time_ns = lambda: _real_time_ns() + int(_offset() * 1e9)


class _SkewedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls.fromtimestamp(_t.time(), tz)

    @classmethod
    def utcnow(cls):
        return cls.utcfromtimestamp(_t.time())


_dt.datetime = _SkewedDatetime
"""


def host_python_clock(sc: Scenario, host: str) -> float:
    """Hours between the host's Python clock (as an SSH session's python3 reads it) and ours."""
    python = sys.executable
    done = subprocess.run(sc.fleet[host].ssh_argv(f"{python} -c 'import time, datetime; print(time.time(), datetime.datetime.now().timestamp())'"), capture_output=True, text=True, timeout=60)
    values = [float(v) for v in done.stdout.split()]
    assert len(values) == 2 and abs(values[0] - values[1]) < 5, done
    return round((values[0] - time.time()) / 3600, 1)


def test_host_clock_days_off_and_jumping_by_hours(scenario) -> None:
    """ct200's clock is 3 days ahead for the whole sweep; ct201's jumps 6 h ahead once its first
    server runs a workload, and 6 h back (a backward step) once its next server runs."""
    sc = scenario(["ct200", "ct201"])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    offset = {h: sc.fleet[h].persistent_path("/root/clock-offset") for h in ("ct200", "ct201")}
    for host in offset:
        site = sc.fleet[host].persistent_path(f"/root/.local/lib/{version}/site-packages")
        site.mkdir(parents=True, exist_ok=True)
        (site / "usercustomize.py").write_text(USERCUSTOMIZE)
    offset["ct200"].write_text(str(3 * 86400))
    offset["ct201"].write_text("0")
    off = {h: host_python_clock(sc, h) for h in offset}
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200,ct201")
    sweep_id = controller.sweep_id()
    first = sc.wait_server("ct201", sweep_id, "running", with_run=True, timeout=120)
    jump_at = time.time()
    offset["ct201"].write_text(str(6 * 3600))
    jumps = 1
    try:
        sc.wait_host(lambda: (s := sc.server_in("ct201", sweep_id, "running", with_run=True)) and s != first, 120, "ct201: its next server running")
        offset["ct201"].write_text("0")
        jumps = 2
    except AssertionError:
        pass  # ct201 had no further server: its clock stays 6 h ahead to the end
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200", "ct201"])
    # What the agents' clocks said: each result's started_at against its file's mtime (the
    # kernel's real clock on the host; rsync keeps it), in hours.
    stamped: dict[str, set[float]] = {}
    for path in (sc.results / sweep_id).glob("*/runs/*.json"):
        stamped.setdefault(path.parent.parent.name, set()).add(round((json.loads(path.read_text())["started_at"] - path.stat().st_mtime) / 3600))
    outcome = f"{outcome_of(code, controller)}; {statuses(accounting)}; results stamped " + ", ".join(f"{h}: {sorted(v)} h" for h, v in sorted(stamped.items()))
    row(sc, "host clock 3 days ahead", "whole sweep", 1, accounting, left, notice(controller, jump_at, event_trouble("ct200")),
        f"{outcome}; host's Python clock {off['ct200']} h ahead")  # fmt: skip
    row(sc, "host clock jumps +6 h, then -6 h", "mid-workload", jumps, accounting, left, notice(controller, jump_at, event_trouble("ct201")), outcome)
    assert 71 < off["ct200"] < 73 and abs(off["ct201"]) < 0.1, off
    assert stamped.get("ct200") == {72}, f"ct200's agent did not run 3 days ahead: {stamped}"
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


# -------------------------------------------------------------------------------------------------
# resumes: concurrent, a moved host, an edited playbook


def _killed_mid_workload(sc: Scenario, playbook: Path, hosts: str = "ct200") -> tuple[str, float]:
    controller = sc.sweep(playbook, hosts)
    sweep_id = controller.sweep_id()
    sc.wait_server(hosts.split(",")[0], sweep_id, "running", with_run=True)
    at = time.time()
    controller.kill()
    return sweep_id, at


def test_two_resumes_at_once(scenario) -> None:
    """The controller is SIGKILLed mid-workload; two `fleet sweep --resume` of the sweep start at
    the same moment. One must drive the sweep to its end; the other must be refused (exit 1,
    naming the first's pid) before it touches a host."""
    sc = scenario(["ct200"])
    sweep_id, _ = _killed_mid_workload(sc, fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS))
    at = time.time()
    pair = [Controller(["--resume", sweep_id, "--poll", "0.3"], sc.env) for _ in range(2)]
    sc.controllers.extend(pair)
    codes = [c.wait(LONG_SWEEP_S) for c in pair]
    for n, c in enumerate(pair):
        controller_log(sc, c, f"resume-{n}")
    refused = [c for c, code in zip(pair, codes) if c.summary() is None]
    drove = [c for c, code in zip(pair, codes) if c.summary() is not None]
    winner = drove[0] if drove else pair[0]
    code = codes[pair.index(winner)]
    accounting = account(sc.results / sweep_id, winner.summary())
    left = leftovers(sc.fleet, ["ct200"])
    loser = refused[0] if refused else pair[1]
    loser_code = codes[pair.index(loser)]
    said = loser.stderr().strip().splitlines()
    noticed = notice(loser, at, lambda l: l.stream == "stderr" and "pid" in l.text.lower())
    row(sc, "two `--resume` at once", "controller killed mid-workload", 1, accounting, left, noticed,
        f"one: {outcome_of(code, winner)}; other: exit {loser_code}, {said[-1][:140] if said else 'nothing on stderr'}")  # fmt: skip
    assert len(refused) == 1 and len(drove) == 1, f"exits {codes}; summaries {[c.summary() is not None for c in pair]}"
    assert loser_code == 1 and noticed[0] is not None, loser.transcript()
    assert_clean(accounting, left, winner)
    assert code == 0 and (winner.summary() or {}).get("state") == "finished", outcome_of(code, winner)


def test_a_moved_host_on_resume(scenario) -> None:
    """The controller is SIGKILLed mid-workload; then ct200 moves to a new address (its agent works
    on: a re-addressed network, not a reboot): sshd listens only there, the old address is gone,
    known_hosts learns the new address for the same key, and the host file's `address` changes.
    The resume must reach ct200 at its new address and bring back every run."""
    sc = scenario(["ct200"])
    sweep_id, _ = _killed_mid_workload(sc, fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS))
    h = sc.fleet["ct200"]
    old = h.address
    new = old.rsplit(".", 1)[0] + ".3"
    subprocess.run(["ip", "-n", h.netns, "addr", "add", f"{new}/24", "dev", "eth0"], check=True)
    sshd_config_with(sc.fleet, "ct200", **{f"ListenAddress {old}:": f"ListenAddress {new}:"})
    # The old address is the subnet's primary: without promotion its removal takes the new one too.
    subprocess.run(["ip", "netns", "exec", h.netns, "sysctl", "-qw", "net.ipv4.conf.eth0.promote_secondaries=1"], check=True)
    subprocess.run(["ip", "-n", h.netns, "addr", "del", f"{old}/24", "dev", "eth0"], check=True)
    key = h.known_hosts.read_text().split(" ", 1)[1]
    for known in (h.known_hosts, sc.fleet.known_hosts):
        known.write_text(known.read_text() + f"{new} {key}")
    host_file = sc.hosts_dir / "ct200.yaml"
    data = yaml.safe_load(host_file.read_text())
    data["address"] = new
    host_file.write_text(yaml.safe_dump(data, sort_keys=False))
    gone = subprocess.run(h.ssh_argv("true", connect_timeout=3), capture_output=True, text=True, timeout=30)
    assert gone.returncode != 0, "the old address still answers"
    there = subprocess.run([a.replace(f"root@{old}", f"root@{new}") for a in h.ssh_argv("true", connect_timeout=5)], capture_output=True, text=True, timeout=30)
    assert there.returncode == 0, f"the new address does not answer: {there.stderr}"
    at = time.time()
    controller = sc.resume(sweep_id)
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"])
    noticed = notice(controller, at, any_of(stderr_mentions(new), lambda l: l.event is not None and new in json.dumps(l.event)))
    row(sc, "host moved to a new address (host file edited)", "resume", 1, accounting, left, noticed, f"{outcome_of(code, controller)}; {statuses(accounting)}")
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)
    record = json.dumps(json.loads((sc.results / sweep_id / "sweep.json").read_text()))
    assert new in record or new in controller.stderr(), "the resume does not say where it reached the host"


def test_an_edited_playbook_between_start_and_resume(scenario) -> None:
    """The controller is SIGKILLed mid-workload; the playbook file is then edited (a method
    dropped, another workload, other limits). The resume must run the sweep's recorded copy
    (every run of plan.json, nothing of the edit) and say that the file changed."""
    sc = scenario(["ct200"])
    playbook = fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS)
    sweep_id, _ = _killed_mid_workload(sc, playbook)
    before = plan_of(sc, sweep_id)
    data = yaml.safe_load(playbook.read_text())
    data["methods"].pop("ddtree")
    data["workloads"] = {"other": {"kind": "short", "prompts": ["qsort"], "max_new_tokens": 32}}
    data["limits"]["request_timeout_s"] = 5
    playbook.write_text(yaml.safe_dump(data, sort_keys=False))
    at = time.time()
    controller = sc.resume(sweep_id)
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"])
    noticed = notice(controller, at, stderr_mentions("changed"))
    labels = {json.loads(p.read_text())["label"] for p in (sc.results / sweep_id).glob("*/runs/*.json")}
    row(sc, "playbook edited between start and resume", "resume", 1, accounting, left, noticed,
        f"{outcome_of(code, controller)}; {statuses(accounting)}; {len(accounting.results)} results of {len(before['runs'])} planned")  # fmt: skip
    assert plan_of(sc, sweep_id)["runs"] == before["runs"], "the plan changed on resume"
    assert not any("other" in label for label in labels), labels
    assert noticed[0] is not None, controller.stderr()
    assert_clean(accounting, left, controller)
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


# -------------------------------------------------------------------------------------------------
# the agent stopped


STOP_S = 20  # above the agent's pause threshold (fleet/host/agent/pause.py: 5 s) and request_timeout_s (10 s here)


def test_agent_stopped_for_20s(scenario) -> None:
    """ct200's agent is SIGSTOPped while a server runs a workload and SIGCONTed 20 s later (as a
    debugger or a frozen VM would). No run may be lost or doubled, and the run in flight must not
    carry the pause in its figures as a server failure."""
    sc = scenario(["ct200"])
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200")
    sweep_id = controller.sweep_id()
    server = sc.wait_server("ct200", sweep_id, "running", with_run=True)
    in_flight = ((sc.progress("ct200", sweep_id) or {}).get("servers") or {}).get(server, {}).get("run")
    at = time.time()
    stopped = sc.fleet.kill_in_host("ct200", "fleet.host.agent run", signal.SIGSTOP)
    try:
        time.sleep(STOP_S)  # the fault's duration
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"])
    results = [json.loads(p.read_text()) for p in (sc.results / sweep_id).glob("*/runs/*.json")]
    disturbed = [r for r in results if r["status"] != "ok"]
    said = any_of(event_trouble("ct200"), stderr_mentions("did not run"), stderr_mentions("ct200", "paus"))
    run_said = [e for e in controller.events("run") if e.get("status") != "ok"]
    agent_log = sc.results / sweep_id / "ct200" / "agent.log"
    agent_saw = [l for l in (agent_log.read_text(errors="replace") if agent_log.exists() else "").splitlines() if "did not run" in l]
    row(sc, f"agent stopped {STOP_S} s (SIGSTOP, SIGCONT)", "mid-workload", 1, accounting, left, notice(controller, at, said),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; not ok: "
        + ("; ".join(f"{r['label']}: {r['status']} ({(r.get('failure') or {}).get('class')})" for r in disturbed) or "none")
        + f"; agent.log: {agent_saw[0].split(' WARNING ')[-1][:110] if agent_saw else 'no gap noticed'}")  # fmt: skip
    assert stopped, "no agent process to stop"
    assert_clean(accounting, left, controller)
    assert not disturbed, f"the pause was blamed on the server: {[(r['label'], r['status'], r.get('failure')) for r in disturbed]} (in flight: {in_flight}); {run_said}"
    assert code == 0 and (controller.summary() or {}).get("state") == "finished", outcome_of(code, controller)


# -------------------------------------------------------------------------------------------------
# a login shell that talks


BANNER = "Welcome to the shared GPU box -- please be nice"
BASHRC = f"echo '{BANNER}'\necho 'quota: 91% of /root used' >&2\n"


def _noisy_outcome(sc: Scenario, controller: Controller, code: int) -> tuple[Accounting | None, str]:
    """The accounting where the sweep got as far as a plan; what the host keeps of fleet's."""
    sweep_id = (sc.results / "LATEST").read_text().strip() if (sc.results / "LATEST").exists() else None
    accounting = None
    if sweep_id and (sc.results / sweep_id / "plan.json").exists():
        accounting = account(sc.results / sweep_id, controller.summary())
    kept = sc.fleet.exec("ct200", ["sh", "-c", "ls -A /var/lib/fleet /dev/shm /tmp"]).stdout
    lines = [l for l in controller.stderr().splitlines() if "rsync" in l or "bashrc" in l]
    extra = "; lease left on the host" if "lease.json" in kept.split() else "; no lease left"
    extra += "; .fleet-env file left" if "fleet-env" in kept else ""
    return accounting, f"{outcome_of(code, controller)}{extra}; says: {lines[0][:150] if lines else controller.stderr()[-150:]}"


def test_a_noisy_login_shell(scenario) -> None:
    """ct200's ~/.bashrc prints a banner (stdout) and a quota notice (stderr) before every command,
    from the start. rsync speaks its protocol on the shell's stdout: the sweep must work through
    the noise or say why it cannot, lose nothing, leave nothing running, no lease, no secret file."""
    sc = scenario(["ct200"])
    sc.fleet["ct200"].persistent_path("/root/.bashrc").write_text(BASHRC)
    at = time.time()
    controller = sc.sweep(fault_playbook(sc.root), "ct200")
    code = controller.wait(LONG_SWEEP_S)
    controller_log(sc, controller, "controller-0")
    accounting, outcome = _noisy_outcome(sc, controller, code)
    left = leftovers(sc.fleet, ["ct200"])
    empty = Accounting(set(), {}, {}, {}, {}, {})
    noticed = notice(controller, at, stderr_mentions("bashrc"))
    row(sc, "noisy login shell (banner in ~/.bashrc)", "from the start", 1, accounting or empty, left, noticed,
        outcome + ("" if accounting else "; no plan: stopped before any run"))  # fmt: skip
    assert "Traceback" not in controller.transcript(last=100000)
    assert not left, left
    assert accounting is None or not accounting.lost and not accounting.duplicated, accounting
    assert "; lease left" not in outcome and ".fleet-env" not in outcome, outcome
    # Either the sweep works through the noise (rsync relayed since 0f5f0bf) or it stops saying why.
    assert (code == 0 and (controller.summary() or {}).get("state") == "finished") or (code == 1 and noticed[0] is not None), outcome


def test_a_login_shell_that_starts_talking_mid_sweep(scenario) -> None:
    """ct200's ~/.bashrc starts printing its banner after the first result came back: the pulls
    that follow cannot work (rsync). The sweep must end with every run accounted for (pulled, or
    named as not brought back), nothing left running."""
    sc = scenario(["ct200"])
    controller = sc.sweep(fault_playbook(sc.root, isolation="exclusive", workloads=LONGER_WORKLOADS), "ct200")
    sweep_id = controller.sweep_id()
    controller.wait_event("run", 120, "ct200")
    at = time.time()
    sc.fleet["ct200"].persistent_path("/root/.bashrc").write_text(BASHRC)
    code = controller.wait(LONG_SWEEP_S)
    controller_log(sc, controller, "controller-0")
    accounting = account(sc.results / sweep_id, controller.summary())
    # The agent may work on after fleet gave the host up: what it leaves once it ends.
    sc.wait_host(lambda: (sc.progress("ct200", sweep_id) or {}).get("state") != "running", 180, "ct200's agent to end", interval=0.5)
    left = leftovers(sc.fleet, ["ct200"])
    _, outcome = _noisy_outcome(sc, controller, code)
    on_host = len(sc.host_results("ct200", sweep_id))
    row(sc, "noisy login shell (banner in ~/.bashrc)", "appears mid-sweep", 1, accounting, left, notice(controller, at, any_of(trouble("ct200"), stderr_mentions("bashrc"))),
        f"{outcome}; {statuses(accounting)}; {len(accounting.results)} results pulled, {on_host} on the host, {len(accounting.not_run)} named not run")  # fmt: skip
    assert "Traceback" not in controller.transcript(last=100000)
    assert_clean(accounting, left, controller)
    assert code == 1 or (code == 0 and (controller.summary() or {}).get("state") == "finished"), outcome


# -------------------------------------------------------------------------------------------------
# the suite's agent-error fault, waited for to its end


@pytest.mark.parametrize("when", ["after the first result", "after a pull of the logs folder"])
def test_agent_error_logs_folder_replaced_waited_to_the_end(scenario, when: str) -> None:
    """tests/integration/test_faults.py's agent error (the host's `<sweep>/logs` replaced by a file
    after the first result), with the controller waited for as long as it takes (the suite's test
    gives it 150 s): how the sweep really ends, and when. Second case: struck only once the
    controller holds a pulled copy of the logs folder with a file in it (rsync cannot put the
    host's file in place of a non-empty folder: code 23), which the suite's test meets by chance."""
    sc = scenario(["ct200"])
    controller = sc.sweep(fault_playbook(sc.root), "ct200")
    sweep_id = controller.sweep_id()
    sc.wait_host(lambda: sc.host_results("ct200", sweep_id), 120, "ct200: a result", interval=0.002)
    if when != "after the first result":
        local_logs = sc.results / sweep_id / "ct200" / "logs"
        sc.wait_host(lambda: local_logs.is_dir() and any(local_logs.rglob("*.log")), 120, "the controller's copy of ct200's logs", interval=0.01)
    logs = sc.host_sweep_dir("ct200", sweep_id) / "logs"
    broken_at = time.time()
    logs.rename(logs.with_name("logs.moved"))
    logs.write_text("not a folder\n")
    code, accounting, left = finish(sc, controller, sweep_id, ["ct200"], timeout=LONG_SWEEP_S)
    ended = round(time.time() - broken_at)
    retries = sum(1 for l in controller.stderr().splitlines() if "pull failed, tried again" in l)
    missing = accounting.planned - set(accounting.results)
    row(sc, "agent error (its logs folder replaced by a file)", f"mid-sweep, {when}", 1, accounting, left, notice(controller, broken_at, stderr_mentions("ct200")),
        f"{outcome_of(code, controller)}; {statuses(accounting)}; {len(missing)} without a result, {len(accounting.not_run)} named not run; "
        f"ended {ended} s after the fault; {retries} 'pull failed, tried again' lines")  # fmt: skip
    assert_clean(accounting, left, controller)
    assert code == 1 and (controller.summary() or {}).get("state") != "finished", outcome_of(code, controller)
