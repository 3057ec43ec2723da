"""Priors calibrated by measurements (issue 12, scheduling): an unmeasured run is estimated by its
prior times the measured/prior ratio of runs of its method and workload kind (else of all measured
runs); a measured one by its own measurements; server starts likewise per TP size."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.plan import PlanOptions, make_plan
from fleet.planning.estimate import DurationHistory, Estimate, Sample, calibrate, estimate_run, estimate_server_start, run_seconds, server_start_seconds
from fleet.playbook import expand_runs, load_playbook
from tests.unit.fake_hosts import make_host

SEED = Path(__file__).resolve().parents[2] / "playbooks" / "qwen36-specdec.yaml"


def test_no_measurements_leave_the_priors_as_they_are() -> None:
    runs = expand_runs(load_playbook(SEED))
    calibration = calibrate(runs, DurationHistory())
    assert all(estimate_run(r, DurationHistory(), calibration).seconds == run_seconds(r) for r in runs)
    assert calibrate(runs, None).run_overall == 1.0


def test_unmeasured_runs_take_the_ratio_of_their_kind_then_of_all() -> None:
    runs = expand_runs(load_playbook(SEED))
    history = DurationHistory()
    ddtree_short = [r for r in runs if r.server.algorithm == "DDTREE" and r.workload.kind == "short"]
    ar_agentic = [r for r in runs if r.server.algorithm is None and r.workload.kind == "agentic"]
    for run in ddtree_short[::2]:
        history.record_run(run.id, Sample(run_seconds(run) * 0.25, "earlier", "ct200"))
    for run in ar_agentic[:1]:
        history.record_run(run.id, Sample(run_seconds(run) * 0.5, "earlier", "ct200"))
    calibration = calibrate(runs, history)
    unmeasured = ddtree_short[1::2]
    assert unmeasured
    for run in unmeasured:
        assert estimate_run(run, history, calibration).seconds == pytest.approx(run_seconds(run) * 0.25)
        assert estimate_run(run, history, calibration).measured == 0
    measured = ddtree_short[0]
    assert estimate_run(measured, history, calibration) == Estimate(run_seconds(measured) * 0.25, 1)
    # A kind with no measurement of its own: the median of every measured ratio (0.25 x 6, 0.5 x 1).
    other = next(r for r in runs if r.server.algorithm == "DFLASH" and r.workload.kind == "long_context")
    assert estimate_run(other, history, calibration).seconds == pytest.approx(run_seconds(other) * 0.25)


def test_server_starts_take_the_ratio_of_their_tp_size() -> None:
    runs = expand_runs(load_playbook(SEED))
    servers = {r.server.id: r.server for r in runs}.values()
    tp4 = [s for s in servers if s.tp == 4]
    history = DurationHistory()
    history.record_server(tp4[0].id, Sample(server_start_seconds(tp4[0]) / 10, "earlier", "ct200"))
    calibration = calibrate(runs, history)
    assert estimate_server_start(tp4[1], history, calibration).seconds == pytest.approx(server_start_seconds(tp4[1]) / 10)
    tp1 = next(s for s in servers if s.tp == 1)
    assert estimate_server_start(tp1, history, calibration).seconds == pytest.approx(server_start_seconds(tp1) / 10)  # the overall ratio


def test_the_plan_schedules_by_the_calibrated_estimates() -> None:
    playbook = load_playbook(SEED)
    hosts = [make_host("ct200", gpus=8), make_host("ct201", gpus=8)]
    runs = expand_runs(playbook)
    history = DurationHistory()
    for run in runs[::3]:
        history.record_run(run.id, Sample(run_seconds(run) * 0.2, "earlier", "ct200"))
    plain = make_plan(playbook, hosts)
    calibrated = make_plan(playbook, hosts, PlanOptions(durations=history))
    # Most runs unmeasured, yet every estimate moved towards the measurements: the ETA with them.
    unmeasured = [r for r in runs if history.run_seconds(r.id) is None]
    assert all(calibrated.run_estimates[r.id].seconds < plain.run_estimates[r.id].seconds for r in unmeasured)
    assert calibrated.schedule.makespan_s < plain.schedule.makespan_s  # server starts (unmeasured here) keep their priors
