"""Progress of `fleet sweep` as events, on fake hosts (no root): events in order with elapsed time
and an ETA that falls as runs finish; the same events as plain lines (stdout not a terminal) and
as JSON lines (`--json`), with the exit code unchanged; a resume that does not announce again what
was pulled before."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleet import cli
from fleet.host.contract import RunResult, RunStatus
from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
from fleet.inventory import Host
from fleet.plan import make_plan
from fleet.playbook import load_playbook
from fleet.sweep import controller
from fleet.sweep.controller import resume_sweep, start_sweep
from fleet.sweep.events import EVENT_TYPES, Event, EventStream, SweepProgress
from fleet.sweep.hoststatus import HostStatus, Phase
from fleet.sweep.ledger import ResultLedger
from fleet.errors import SweepError
from fleet.transport.fake import FakeTransport
from fleet.views import event_line
from tests.unit.fake_hosts import GPU_ENGINE_PROBE, FakeAgent, FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
SWEEP = "demo-20261201-000000-cafe"
ANSI = re.compile(r"\x1b\[|\x1b\]|\x1b")
LINE = re.compile(r"^\[\s*\d+(h\d\dm|m\d\ds|s)( \| ETA \d+(h\d\dm|m\d\ds|s))?\] ")


@pytest.fixture(autouse=True)
def fixed_sweep_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SWEEP)


@dataclass
class TimedAgent(FakeAgent):
    """A fake agent whose runs take `factor` times their planned estimate (fake timestamps, no waiting)."""

    estimates: dict[str, float] | None = None
    factor: float = 2.0

    def _finish(self, server: ServerSpec, run: RunSpec) -> None:
        super()._finish(server, run)
        path = self.dir.result(run.run_id)
        result = json.loads(self.t.read_text(path))
        assert self.estimates is not None
        result["ended_at"] = result["started_at"] + self.factor * self.estimates[run.run_id]
        self.t.write(path, json.dumps(result))


class TimedFleet:
    def __init__(self, hosts: list[Host], factor: float = 2.0, sweep_id: str = SWEEP) -> None:
        self.hosts = hosts
        self.plan = make_plan(load_playbook(DEMO), hosts)
        estimates = {run_id: e.seconds for run_id, e in self.plan.run_estimates.items()}
        self.t = {h.name: FakeTransport(h.name) for h in hosts}
        self.shell = {h.name: FakeHostShell(self.t[h.name], h) for h in hosts}
        self.agent = {h.name: TimedAgent(self.t[h.name], h, sweep_id, estimates=estimates, factor=factor) for h in hosts}

    def connect(self, host: Host) -> FakeTransport:
        return self.t[host.name]

    def start(self, tmp_path: Path, **options: Any):
        return start_sweep(DEMO, self.hosts, tmp_path / "results", connect=self.connect, poll_interval_s=0.0, sleep=lambda s: None, **options)


def test_a_sweep_emits_its_events_in_order_with_an_eta_that_falls_as_runs_finish(tmp_path: Path) -> None:
    fleet = TimedFleet([make_host("ct200"), make_host("ct201")])
    events: list[Event] = []
    outcome = fleet.start(tmp_path, on_event=events.append)
    assert {s.phase for s in outcome.statuses.values()} == {Phase.FINISHED}
    assert outcome.plan is not None and outcome.plan.run_estimates == fleet.plan.run_estimates  # the agent's durations are 2x these

    types = [e.type for e in events]
    assert types[:4] == ["provisioned", "provisioned", "planned", "started"] and types[-1] == "summary"
    assert set(types) <= set(EVENT_TYPES) and types.count("summary") == 1
    assert events[2].eta_s == pytest.approx(outcome.plan.schedule.makespan_s)  # before anything ran: the plan's ETA
    assert [e.elapsed_s for e in events] == sorted(e.elapsed_s for e in events)

    planned = {run.id: server.host for server, run in outcome.plan.runs}
    runs = [e for e in events if e.type == "run"]
    assert sorted(e.data["run_id"] for e in runs) == sorted(planned)  # every run announced once
    for name in ("ct200", "ct201"):
        mine = [e for e in events if e.host == name]
        phases = [e.data["phase"] for e in mine if e.type == "phase"]
        assert phases == ["shipping", "running", "finished"]
        assert mine[-1].type == "phase" and mine[-1].data["phase"] == "finished"
        host_runs = [e for e in runs if e.host == name]
        assert all(planned[e.data["run_id"]] == name and e.data["status"] == "ok" for e in host_runs)
        assert [e.data["done"] for e in host_runs] == list(range(1, len(host_runs) + 1))
        assert {e.data["total"] for e in host_runs} == {len(host_runs)}
        # Each run took 2x its estimate: from the first measured run on the correction is a
        # steady 2, so every further run takes its share off the host's ETA.
        etas = [e.data["host_eta_s"] for e in host_runs]
        assert all(a > b for a, b in zip(etas, etas[1:])), etas
        assert etas[-1] == 0.0
        durations = [e.data["duration_s"] for e in host_runs]
        assert all(d > 0 for d in durations)
    sweep_etas = [e.eta_s for e in runs]
    # Timestamps of ~1.8e9 s carry the durations to about a microsecond: equal up to that.
    assert all(a is not None and b is not None and a >= b - 1e-3 for a, b in zip(sweep_etas, sweep_etas[1:])), sweep_etas
    summary = events[-1]
    assert summary.eta_s == 0.0 and summary.data["state"] == "finished" and summary.data["results"] == len(planned)
    assert summary.data["by_status"] == {"ok": len(planned)} and summary.data["directory"] == str(outcome.directory)


def test_the_eta_grows_when_runs_take_longer_than_estimated() -> None:
    """The correction is learned: a host whose first runs took 3x their estimate is expected to
    take 3x for the rest too."""
    plan = make_plan(load_playbook(DEMO), [make_host("ct200")])
    # No local results folder: nothing pulled, so the tracker learns only what it is told.
    progress = SweepProgress(EventStream(None), plan, {"ct200": shard_of(plan)}, {"ct200": 1.0}, {"ct200": ResultLedger(Path("/nonexistent"), SWEEP, "ct200")})
    before = progress.eta()
    progress.measure(3.0, 1.0)
    assert progress.correction() == 3.0
    host = progress.hosts["ct200"]
    starts = sum(progress.server_estimates[s] for s in set(host.runs.values()))
    assert progress.eta() == pytest.approx(3 * (before - starts / host.parallel) + starts / host.parallel)


def shard_of(plan, extra: list[ServerSpec] | None = None) -> Shard:
    """The plan's servers and runs as a shard (what the tracker reads of one: ids and labels)."""
    servers = [ServerSpec(s.config.id, s.config.label, list(s.gpus), s.port, [], {}, f"unit-{i}", runs=[RunSpec(r.id, r.label, {}) for r in s.runs]) for i, s in enumerate(plan.servers)]
    return Shard(SWEEP, "ct200", "boot", "process", AgentLimits(), [*servers, *(extra or [])])


def test_a_server_start_is_measured_from_the_agents_phase_timestamps_in_engine_time(tmp_path: Path) -> None:
    plan = make_plan(load_playbook(DEMO), [make_host("ct200")])
    shard = shard_of(plan)
    ledger = ResultLedger(tmp_path, SWEEP, "ct200")
    progress = SweepProgress(EventStream(None), plan, {"ct200": shard}, {"ct200": 0.5}, {"ct200": ledger})
    server = plan.servers[0].config.id
    status = HostStatus("ct200", phase=Phase.RUNNING, servers={server: {"label": "x", "phase": "starting", "run": None, "since": 100.0}})
    progress.observe(status, shard, ledger)
    assert progress.server_samples == {}
    status.servers[server] = {"label": "x", "phase": "warmup", "run": None, "since": 130.0}
    progress.observe(status, shard, ledger)
    assert progress.server_samples == {server: ("ct200", 60.0)}  # 30 wall seconds at sim_speed 0.5
    assert server in progress.hosts["ct200"].started  # its start is no longer part of the ETA


def test_a_reboot_a_link_drop_and_a_repair_round_are_events(tmp_path: Path) -> None:
    plan = make_plan(load_playbook(DEMO), [make_host("ct200")])
    shard = shard_of(plan)
    events: list[Event] = []
    ledger = ResultLedger(tmp_path, SWEEP, "ct200")
    progress = SweepProgress(EventStream(events.append), plan, {"ct200": shard}, {"ct200": 1.0}, {"ct200": ledger})
    status = HostStatus("ct200", phase=Phase.RUNNING)
    progress.observe(status, shard, ledger)
    status.reboots, status.link_drops, status.boot_id = 1, 2, "new-boot"
    variant = RunSpec("fixedvariant1", "tp1-x/short", {})
    extended = shard_of(plan, [ServerSpec("v1", "tp1-x", [0], 30000, [], {}, "unit-v", runs=[variant])])
    progress.observe(status, extended, ledger)
    got = [(e.type, dict(e.data)) for e in events]
    assert got[0][0] == "phase"
    assert got[1:] == [("reboot", {"boot_id": "new-boot"}), ("link_drop", {"count": 2}), ("repair_round", {"added": 1, "total": len(plan.runs) + 1})]
    assert all(line.count("\n") == 0 and not ANSI.search(line) for line in map(event_line, events))


def test_a_resume_counts_what_was_pulled_before_and_announces_only_new_runs(tmp_path: Path) -> None:
    fleet = TimedFleet([make_host("ct200")])
    fleet.agent["ct200"].runs_per_poll = 1
    stop = threading.Event()
    agent = fleet.agent["ct200"]
    fleet.t["ct200"].on(lambda c: c.command == agent.poll_command and agent.polls == 4, lambda t, c: stop.set(), times=1)
    first: list[Event] = []
    fleet.start(tmp_path, on_event=first.append, stop=stop)
    assert first[-1].type == "summary" and first[-1].data["interrupted"] is True
    assert "sweep detached (the agents work on)" in event_line(first[-1])
    announced = {e.data["run_id"] for e in first if e.type == "run"}
    assert 0 < len(announced) < len(fleet.plan.runs)

    events: list[Event] = []
    outcome = resume_sweep(SWEEP, tmp_path / "results", environ={}, connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None, on_event=events.append)
    assert outcome.statuses["ct200"].phase is Phase.FINISHED
    started = next(e for e in events if e.type == "started")
    assert started.data["resumed"] is True
    assert started.data["hosts"]["ct200"]["done"] >= len(announced)
    again = {e.data["run_id"] for e in events if e.type == "run"}
    assert announced.isdisjoint(again) and announced | again == {run.id for _, run in fleet.plan.runs}
    assert started.elapsed_s >= first[-1].elapsed_s  # elapsed counts from the first start


# ------------------------------------------------------------------------------ the command line


def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet: TimedFleet, *args: str) -> tuple[Any, list[Event]]:
    """`fleet sweep` as a user runs it, its hosts fake; returns the result and the events the
    controller emitted (teed on their way to the command's display)."""
    seen: list[Event] = []

    def fake_start(*a: Any, on_event: Any, **k: Any) -> Any:
        def tee(event: Event) -> None:
            seen.append(event)
            on_event(event)

        return start_sweep(*a, **{**k, "connect": fleet.connect, "poll_interval_s": 0.0, "sleep": lambda s: None, "on_event": tee})

    monkeypatch.setattr(controller, "start_sweep", fake_start)
    monkeypatch.setattr(cli, "_select_hosts", lambda spec: fleet.hosts)
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(tmp_path / "results"))
    result = CliRunner().invoke(cli.app, ["sweep", "-p", str(DEMO), *args], catch_exceptions=False)
    return result, seen


def test_piped_progress_is_one_plain_line_per_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = TimedFleet([make_host("ct200"), make_host("ct201")])
    result, seen = run_cli(tmp_path, monkeypatch, fleet)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert not ANSI.search(result.stdout)
    event_lines = [line for line in lines if not line.startswith("results: ")]
    assert event_lines == [event_line(e) for e in seen]  # one line per event, in order, nothing else
    assert all(LINE.match(line) for line in event_lines), event_lines
    # provisioned x2, planned, started, three phases per host, a line per run, the summary
    assert len(event_lines) == 4 + 2 * 3 + len(fleet.plan.runs) + 1
    assert lines[-1].startswith("results: ")


def test_sweep_json_streams_one_object_per_event_and_keeps_the_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = TimedFleet([make_host("ct200")])
    failing = next(run.id for _, run in fleet.plan.runs)
    fleet.agent["ct200"].outcome = lambda server, run: RunStatus.partial if run.run_id == failing else RunStatus.ok
    result, seen = run_cli(tmp_path, monkeypatch, fleet, "--json")
    objects = [json.loads(line) for line in result.stdout.splitlines()]  # stdout is JSON lines only
    assert [o["type"] for o in objects] == [e.type for e in seen] and objects[-1]["type"] == "summary"
    assert objects == [json.loads(json.dumps(e.to_json())) for e in seen]
    for o in objects:
        assert {"type", "time", "elapsed_s", "eta_s", "host"} <= set(o) and o["type"] in EVENT_TYPES
    run = next(o for o in objects if o["type"] == "run" and o["run_id"] == failing)
    assert run["status"] == "partial"
    assert objects[-1]["by_status"] == {"ok": len(fleet.plan.runs) - 1, "partial": 1}
    assert result.exit_code == 1  # a partial run: the same code as without --json

    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SWEEP + "2")
    fleet = TimedFleet([make_host("ct200")], sweep_id=SWEEP + "2")
    fleet.agent["ct200"].outcome = lambda server, run: RunStatus.partial if run.run_id == failing else RunStatus.ok
    plain, _ = run_cli(tmp_path, monkeypatch, fleet)
    assert plain.exit_code == 1


def test_the_stream_ends_with_a_summary_when_no_host_passes_provisioning(tmp_path: Path) -> None:
    host = make_host("ct200", kind="sglang", gpus=8)
    transport = FakeTransport("ct200")
    shell = FakeHostShell(transport, host, gpu=True)
    shell.engine_probe = GPU_ENGINE_PROBE.replace('"sglang_version": "0.5.23"', '"sglang_version": null')
    events: list[Event] = []
    with pytest.raises(SweepError, match="no host passed provisioning"):
        start_sweep(DEMO, [host], tmp_path / "results", connect=lambda h: transport, poll_interval_s=0.0, sleep=lambda s: None, on_event=events.append)
    assert [e.type for e in events] == ["provisioned", "summary"]
    assert events[0].data["status"] == "failed" and "has no sglang" in events[0].data["reason"]
    assert events[-1].data["state"] == "failed" and "has no sglang" in events[-1].data["error"]
    assert "sweep failed: no host passed provisioning" in event_line(events[-1])


def test_every_event_type_renders_as_one_plain_line_with_what_matters() -> None:
    samples: dict[str, dict[str, Any]] = {
        "provisioned": {"status": "failed", "reason": "has no sglang"},
        "planned": {"runs": 96, "servers": 24, "hosts": ["ct200", "ct201"], "measured_runs": 90},
        "started": {"sweep_id": SWEEP, "resumed": True, "hosts": {"ct200": {"done": 3, "total": 60}}},
        "phase": {"phase": "failed", "previous": "running", "done": 3, "total": 60, "host_eta_s": 0.0, "error": "ct200: gave up"},
        "run": {"run_id": "r1", "label": "tp1-ddtree-b32/short", "status": "failed", "duration_s": 0.25, "failure": "kv_pool_too_small",
                "fix": "max_running_requests 2 -> 1", "done": 4, "total": 60, "host_eta_s": 12.0},
        "reboot": {"boot_id": "5d65"}, "link_drop": {"count": 2}, "agent_restart": {"count": 1}, "repair_round": {"added": 8, "total": 68},
        "moved": {"to": "ct201", "runs": 3, "server_id": "s1", "label": "tp2-dflash", "why": "tail"},
        "summary": {"sweep_id": SWEEP, "state": "finished", "directory": "/r/x", "interrupted": False, "results": 5, "by_status": {"ok": 4, "failed": 1},
                    "unreadable": {}, "hosts": {}, "fixes": []},
    }  # fmt: skip
    assert set(samples) == set(EVENT_TYPES)
    lines = {kind: event_line(Event(kind, 0.0, 75.0, 3725.0, None if kind in ("planned", "summary") else "ct200", data)) for kind, data in samples.items()}
    for kind, line in lines.items():
        assert "\n" not in line and not ANSI.search(line) and LINE.match(line), (kind, line)
        assert line.startswith("[ 1m15s | ETA 1h02m] ")
    assert lines["provisioned"].endswith("ct200: provisioned: failed (has no sglang)")
    assert "96 runs of 24 servers on 2 hosts (90 estimated from measured durations)" in lines["planned"]
    assert lines["started"].endswith(f"resumed {SWEEP}: 3/60 runs done")
    assert lines["phase"].endswith("ct200: failed (3/60 runs): ct200: gave up")
    assert lines["run"].endswith("tp1-ddtree-b32/short (fixed: max_running_requests 2 -> 1) failed [kv_pool_too_small] in 0.2s (4/60 runs)")
    assert lines["moved"].endswith("ct200: 3 runs of tp2-dflash moved to ct201 (tail)")
    assert lines["summary"].endswith("sweep finished: 5 results (1 failed, 4 ok) in 1m15s; /r/x")
    skipped = event_line(Event("run", 0.0, 1.0, None, "ct200", {**samples["run"], "status": "skipped", "failure": "skipped", "fix": None}))
    assert skipped.endswith("ct200: tp1-ddtree-b32/short skipped in 0.2s (4/60 runs)")  # the class says nothing the status does not


def _work_per_result(runs: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, float]:
    """Operations the ledger and the tracker spend per result of a sweep of `runs` runs on 4
    hosts (one pull and one observation per result, the most a sweep does)."""
    from fleet.sweep import events, ledger

    counts: dict[str, int] = {}

    def counting(cls: object, name: str) -> None:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    # `_plain_result_name` is asked of every name the ledger considers: each name a folder
    # listing holds, or each name a pull says it wrote.
    looked_at: tuple[tuple[object, str], ...] = ((ledger.ResultLedger, "_stamp"), (ledger.ResultLedger, "_read"), (ledger, "_plain_result_name"))
    for cls, name in (*looked_at, (events._Host, "estimate"), (events._Host, "_recount")):
        counting(cls, name)
    hosts = [f"h{i}" for i in range(4)]
    shards: dict[str, Shard] = {}
    for name in hosts:
        servers = [ServerSpec(f"{name}s{s}", f"{name}s{s}", [0], 30000, [], {}, f"u{s}", runs=[RunSpec(f"{name}s{s}r{r}", "x/w", {}) for r in range(4)])
                   for s in range(runs // len(hosts) // 4)]  # fmt: skip
        shards[name] = Shard(SWEEP, name, "boot", "process", AgentLimits(), servers)
    books = {name: ResultLedger(tmp_path / name / "runs", SWEEP, name, [r.run_id for _, r in shards[name].runs]) for name in hosts}
    progress = SweepProgress(EventStream(None), None, shards, {n: 1.0 for n in hosts}, books)
    counts.clear()
    status = {name: HostStatus(name, phase=Phase.RUNNING) for name in hosts}
    for name in hosts:
        (tmp_path / name / "runs").mkdir(parents=True)
    for step in range(runs // len(hosts)):
        for name in hosts:
            server, run = shards[name].runs[step]
            result = RunResult(run.run_id, run.label, server.server_id, server.label, SWEEP, name, RunStatus.ok, None, {}, {}, 1.0, 2.0)
            (tmp_path / name / "runs" / f"{run.run_id}.json").write_text(json.dumps(result.to_json()))
            books[name].refresh([f"{run.run_id}.json", "./"])  # what the pull says it wrote (fleet.sweep.channel)
            progress.observe(status[name], shards[name], books[name])
    return {name: count / runs for name, count in counts.items()}


def test_the_trackers_work_per_result_does_not_grow_with_the_sweep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 28: the tracker re-summed every run on every event (quadratic), and the ledger listed
    the whole folder at every pull. Counted, not timed: per result, the two names its pull wrote
    considered (its file and the folder's `./`), one look at its file, one parse, two estimates,
    no recount of a host, at 64 runs as at 1,024."""
    small = _work_per_result(64, monkeypatch, tmp_path / "small")
    large = _work_per_result(1024, monkeypatch, tmp_path / "large")
    expected = {"_plain_result_name": 2.0, "_stamp": 1.0, "_read": 1.0, "estimate": 2.0}  # its ETA share, then its measurement
    assert small == large == expected, (small, large)
