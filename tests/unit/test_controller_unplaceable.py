"""`fleet sweep` and runs no host can hold (issue 14, item 6): refused before anything is written
or any host contacted, naming the playbook's `tp` and each host's `gpus.count`; with
`allow_unplaceable` the rest runs and those runs are reported not run, the sweep incomplete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.plan import make_plan
from fleet.playbook import expand_runs, load_playbook
from fleet.sweep import controller
from fleet.sweep.controller import start_sweep
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import FakeAgent, FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
SWEEP = "demo-20261201-000000-cafe"


@pytest.fixture(autouse=True)
def fixed_sweep_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SWEEP)


def playbook_with_tp(tmp_path: Path, tp: list[int]) -> Path:
    data = yaml.safe_load(DEMO.read_text())
    data["tp"] = tp
    path = tmp_path / "tp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("tp", "gpus", "sizes"), [([1, 16], 8, [16]), ([1], 0, [1])])
def test_unplaceable_servers_are_refused_before_any_host_is_contacted(tmp_path: Path, tp: list[int], gpus: int, sizes: list[int]) -> None:
    host = make_host("ct200", gpus=gpus)
    calls: list[object] = []
    with pytest.raises(ConfigError) as caught:
        start_sweep(playbook_with_tp(tmp_path, tp), [host], tmp_path / "results", connect=lambda h: calls.append(h) or FakeTransport(h.name))  # type: ignore[func-returns-value]
    message = str(caught.value)
    assert caught.value.field == "tp" and caught.value.got == sizes
    assert f"ct200: gpus.count {gpus} in hosts/ct200.yaml" in message and "tp.yaml" in message
    assert not calls and not (tmp_path / "results").exists()  # nothing written, nobody contacted


def test_allowed_the_rest_runs_and_the_unplaceable_runs_are_reported_not_run(tmp_path: Path) -> None:
    host = make_host("ct200", gpus=2)
    t = FakeTransport(host.name, volatile_dirs=("/dev/shm",))
    FakeHostShell(t, host)
    FakeAgent(t, host, SWEEP)
    path = playbook_with_tp(tmp_path, [1, 4])
    outcome = start_sweep(path, [host], tmp_path / "results", connect=lambda h: t, poll_interval_s=0.0, sleep=lambda s: None, allow_unplaceable=True)
    plan = make_plan(load_playbook(path), [host])
    unplaced = {config.id for config, _ in plan.unplaceable}
    assert unplaced and all(c.tp == 4 for c, _ in plan.unplaceable)
    tp4_runs = {run.id for run in expand_runs(load_playbook(path)) if run.server.id in unplaced}
    assert set(outcome.not_run) == tp4_runs and all(why.startswith("unplaceable: needs 4 GPUs; the largest host has 2") for why in outcome.not_run.values())
    pulled = {p.stem for p in (outcome.directory / "ct200" / "runs").glob("*.json")}
    assert pulled == {run.id for _, run in plan.runs} and not pulled & set(outcome.not_run)
    record = json.loads((outcome.directory / "sweep.json").read_text())
    assert record["state"] == "incomplete" and record["not_run"] == outcome.not_run
    summary = json.loads((outcome.directory / "summary.json").read_text())
    assert summary["not_run"] == outcome.not_run
