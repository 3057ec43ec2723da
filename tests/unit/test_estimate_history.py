"""The duration history (`results/durations.json`): a sweep records what it measured, and the next
plan (and `fleet plan`) estimates a measured configuration by its measurements, scaled to the
host's time scale, and an unmeasured one by the priors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleet import cli
from fleet.host.errors import ContractError
from fleet.plan import PlanOptions, make_plan
from fleet.layout import DURATIONS
from fleet.planning.estimate import KEEP_SAMPLES, DurationHistory, Sample, estimate_run, run_seconds
from fleet.playbook import expand_runs, load_playbook
from tests.unit.fake_hosts import make_host
from tests.unit.test_progress import DEMO, SWEEP, TimedFleet, fixed_sweep_id  # noqa: F401 (an autouse fixture)


def sim_host(name: str, speed: float):
    host = make_host(name)
    return host.model_copy(update={"engine": host.engine.model_copy(update={"sim_speed": speed})})


def test_a_sweep_records_its_durations_and_the_next_plan_estimates_by_them(tmp_path: Path) -> None:
    hosts = [sim_host("ct200", 0.5)]
    fleet = TimedFleet(hosts, factor=3.0)  # every run takes 3x the priors' estimate
    fleet.start(tmp_path)
    path = tmp_path / "results" / DURATIONS
    history = DurationHistory.load(path)
    prior = fleet.plan
    for _, run in prior.runs:
        (sample,) = history.runs[run.id]
        # Recorded in engine time: 3x the wall estimate, divided by the host's sim_speed.
        assert sample.seconds == pytest.approx(3.0 * prior.run_estimates[run.id].seconds / 0.5, abs=1e-3)
        assert (sample.sweep_id, sample.host) == (SWEEP, "ct200")

    learned = make_plan(load_playbook(DEMO), hosts, PlanOptions(durations=history))
    assert learned.measured_runs == len(learned.runs) and prior.measured_runs == 0
    for _, run in learned.runs:
        estimate = learned.run_estimates[run.id]
        assert estimate.measured == 1
        assert estimate.seconds == pytest.approx(3.0 * prior.run_estimates[run.id].seconds, abs=1e-3)
    starts = sum(e.seconds for e in prior.server_estimates.values())  # the fake agent reports no server phases: starts stay priors
    assert sum(e.seconds for e in learned.server_estimates.values()) == pytest.approx(starts)
    assert learned.schedule.makespan_s > prior.schedule.makespan_s
    assert [r["estimate_measurements"] for r in learned.to_json()["runs"]] == [1] * len(learned.runs)

    # On another time scale the same measurement is scaled: a host 5x faster takes a fifth.
    faster = make_plan(load_playbook(DEMO), [sim_host("ct200", 0.1)], PlanOptions(durations=history))
    for _, run in faster.runs:
        assert faster.run_estimates[run.id].seconds == pytest.approx(learned.run_estimates[run.id].seconds / 5, rel=1e-6)


def test_an_unmeasured_run_is_estimated_by_the_priors() -> None:
    runs = expand_runs(load_playbook(DEMO))
    history = DurationHistory()
    history.record_run(runs[0].id, Sample(42.0, "s1", "h"))
    assert estimate_run(runs[0], history).seconds == 42.0 and estimate_run(runs[0], history).measured == 1
    assert estimate_run(runs[1], history).seconds == run_seconds(runs[1]) and estimate_run(runs[1], history).measured == 0


def test_the_history_keeps_the_latest_samples_one_per_sweep_and_estimates_by_their_median(tmp_path: Path) -> None:
    history = DurationHistory()
    for i, seconds in enumerate([10.0, 1000.0, 12.0, 11.0, 13.0, 14.0]):
        history.record_run("r", Sample(seconds, f"sweep-{i}", "h"))
    history.record_run("r", Sample(20.0, "sweep-5", "h"))  # a resume of sweep-5 records it again: replaced
    assert [s.sweep_id for s in history.runs["r"]] == [f"sweep-{i}" for i in range(6 - KEEP_SAMPLES, 6)]  # the oldest fell out
    assert [s.seconds for s in history.runs["r"]][-1] == 20.0
    assert history.run_seconds("r") == (13.0, KEEP_SAMPLES)  # the median of 1000, 12, 11, 13, 20: one slow run moves nothing
    path = tmp_path / DURATIONS
    history.save(path)
    assert DurationHistory.load(path).to_json() == history.to_json()
    assert DurationHistory.load(tmp_path / "none.json").runs == {}


def test_a_malformed_history_names_the_file_and_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results" / DURATIONS
    path.parent.mkdir()
    path.write_text(json.dumps({"schema": "fleet.durations/1", "runs": {"abc": [{"seconds": "fast", "sweep_id": "s", "host": "h"}]}, "servers": {}}))
    with pytest.raises(ContractError, match=r"durations.json: runs.abc\[0\].seconds: expected a number, got 'fast'"):
        DurationHistory.load(path)
    negative = {"schema": "fleet.durations/1", "runs": {}, "servers": {"s": [{"seconds": -1, "sweep_id": "s", "host": "h"}]}}
    (tmp_path / "negative.json").write_text(json.dumps(negative))
    with pytest.raises(ContractError, match=r"negative.json: servers.s\[0\].seconds: expected a duration >= 0 seconds, got -1"):
        DurationHistory.load(tmp_path / "negative.json")
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(cli, "_select_hosts", lambda spec: [make_host("ct200")])
    result = CliRunner().invoke(cli.app, ["plan", "-p", str(DEMO), "--json"])
    assert result.exit_code == 2 and "runs.abc[0].seconds" in result.stderr


def test_fleet_plan_shows_the_estimates_learned_from_measurements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = expand_runs(load_playbook(DEMO))
    history = DurationHistory()
    history.record_run(runs[0].id, Sample(777.0, "s1", "ct200"))
    history.save(tmp_path / "results" / DURATIONS)
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(cli, "_select_hosts", lambda spec: [make_host("ct200")])
    result = CliRunner().invoke(cli.app, ["plan", "-p", str(DEMO), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["measured_runs"] == 1
    (measured,) = [r for r in data["runs"] if r["estimate_measurements"]]
    assert measured["id"] == runs[0].id and measured["estimate_s"] == 777.0
    table = CliRunner().invoke(cli.app, ["plan", "-p", str(DEMO)], env={"COLUMNS": "300"})
    # Words, not lines: rich wraps the table's footnote at the console's width, which an earlier
    # import (another test in the same worker) may have fixed.
    assert f"1 of {len(runs)} runs estimated from measured durations" in " ".join(table.stdout.split())


def test_a_sweep_with_a_broken_history_runs_on_priors_and_leaves_the_file_for_a_person(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "results" / DURATIONS
    path.parent.mkdir()
    path.write_text('{"schema": "fleet.durations/1", "runs": ')  # truncated
    fleet = TimedFleet([make_host("ct200")])
    outcome = fleet.start(tmp_path)
    assert outcome.plan is not None and outcome.plan.measured_runs == 0
    assert {s.phase.value for s in outcome.statuses.values()} == {"finished"}
    assert path.read_text() == '{"schema": "fleet.durations/1", "runs": '  # not replaced: someone should look at it
    assert any(DURATIONS in r.getMessage() and "estimating from priors" in r.getMessage() for r in caplog.records)
