"""`fleet plan`'s work grows with the plan, not faster (issue 28): counted, not timed.

At 1,000 servers a plan cost 24 ms of CPU per server: 203 placement orders of every plan, and the
id of each run (a hash of its JSON) asked for eight times. Here the work of two plans ten times
apart, per run and per server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import fleet.playbook
from fleet.plan import PlanOptions, make_plan
from fleet.planning import schedule as scheduling
from fleet.planning.schedule import SearchStats
from fleet.playbook import Playbook
from tests.unit.fake_hosts import make_host

DEMO = Path(__file__).resolve().parents[2] / "playbooks" / "demo.yaml"
HOSTS = [make_host(f"h{i}", gpus=8) for i in range(8)]


def playbook(servers: int) -> Playbook:
    """demo.yaml with `servers` server configurations: four TP sizes, DDTree at many budgets."""
    data = yaml.safe_load(DEMO.read_text())
    data["tp"] = [1, 2, 4, 8]
    data["methods"]["ddtree"]["budgets"] = list(range(1, servers // 4 - 2 + 1))
    return Playbook.model_validate(data)


def work(servers: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, SearchStats]:
    """Hashes computed (run and server ids), runs, and the placement search's counts."""
    hashes = 0
    real_hash = fleet.playbook.stable_hash
    stats = SearchStats()
    real_schedule = scheduling.schedule

    def counting_hash(data: object) -> str:
        nonlocal hashes
        hashes += 1
        return real_hash(data)

    monkeypatch.setattr(fleet.playbook, "stable_hash", counting_hash)
    monkeypatch.setattr("fleet.plan.schedule", lambda *a, **k: real_schedule(*a, **{**k, "stats": stats}))
    plan = make_plan(playbook(servers), HOSTS, PlanOptions(memory_check=False))
    runs = len(plan.runs)
    plan.to_json()
    monkeypatch.undo()
    return hashes, runs, stats


def test_planning_work_per_run_does_not_grow_with_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    small_hashes, small_runs, small = work(40, monkeypatch)
    large_hashes, large_runs, large = work(400, monkeypatch)
    assert large_runs == 10 * small_runs
    # Each run's id and each server's, once: planning and its JSON share them (it was about 12 per run).
    assert large_hashes / large_runs <= small_hashes / small_runs <= 2.5
    assert large.gpu_visits / 400 <= small.gpu_visits / 40
    assert large.placements / 400 <= small.placements / 40


def test_the_quarantine_is_read_once_per_plan_and_still_skips_its_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleet.fixes.quarantine import QuarantineEntry, QuarantineKey, QuarantineStore
    from fleet.plan import hardware_of

    version = hardware_of(HOSTS[0]).engine_version
    store = QuarantineStore(tmp_path / "quarantine.json")
    key = QuarantineKey.of(arch="sm_120", engine="sim", engine_version=version, algorithm="DDTREE", budget=3)
    store.add(QuarantineEntry(key, "cuda_illegal_instruction", "CUDA error: an illegal instruction", sweep_id="s1", host="h0", run_id="r"))
    reads = 0
    real_read = QuarantineStore._read

    def counting_read(self: QuarantineStore) -> list[QuarantineEntry]:
        nonlocal reads
        reads += 1
        return real_read(self)

    monkeypatch.setattr(QuarantineStore, "_read", counting_read)
    plan = make_plan(playbook(40), HOSTS, PlanOptions(memory_check=False, quarantine=store))
    assert reads == 1
    skipped = [s for s in plan.servers if s.skip_reason]
    assert sorted(s.config.tp for s in skipped) == [1, 2, 4, 8]
    assert all(s.config.ddtree_budget == 3 and s.skip_reason.startswith(f"quarantined ({key})") for s in skipped)


@pytest.mark.parametrize("servers", [0, 12])
def test_the_streamed_json_is_the_json(servers: int) -> None:
    import io
    import json

    book = playbook(max(servers, 12))
    plan = make_plan(book if servers else book.model_copy(update={"tp": [16]}), HOSTS, PlanOptions(memory_check=False))
    assert bool(plan.runs) == bool(servers) and bool(plan.unplaceable) != bool(servers)
    stream = io.StringIO()
    plan.write_json(stream)
    assert stream.getvalue() == json.dumps(plan.to_json(), indent=2) + "\n"
