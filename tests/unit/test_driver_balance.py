"""The Balancer (fleet.sweep.balancer): one mechanism that moves work between the hosts of a sweep
-- queued servers to a host that ran dry, a lost host's runs to the live ones -- decided on the
hosts' shards, their pulled results and the plan's estimates. No transport is used here: the
drivers' loops are not run, only what the balancer reads of them."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from fleet.host.contract import SweepDir
from fleet.plan import PlanOptions, hardware_of, make_plan
from fleet.playbook import load_playbook
from fleet.provision.provision import provision_options
from fleet.sweep.controller import make_balancer
from fleet.sweep.context import SweepContext
from fleet.sweep.driver import HostDriver
from fleet.sweep.hoststatus import Phase
from fleet.sweep.shards import build_shards
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import make_host

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "playbooks" / "qwen36-specdec.yaml"
SWEEP = "seed-20261201-000000-abcd"


def setup(tmp_path: Path, names: tuple[str, ...] = ("ct200", "ct201"), gpus: int = 8):
    hosts = {name: make_host(name, gpus=gpus) for name in names}
    playbook = load_playbook(SEED)
    hardware = {name: hardware_of(h) for name, h in hosts.items()}
    plan = make_plan(playbook, list(hosts.values()), PlanOptions(memory_check=False, hardware=hardware))
    shards = build_shards(plan, hosts, SWEEP, {})
    ctx = SweepContext(tmp_path / SWEEP, playbook, provision_options(SEED.parent, {}), tmp_path / "bundle", poll_interval_s=0.01, sleep=lambda s: None)
    balancer = make_balancer(ctx, hosts, plan, None)
    drivers = {name: HostDriver(ctx, hosts[name], shards[name], FakeTransport(name)) for name in shards}
    for driver in drivers.values():
        balancer.register(driver)
        driver.status.phase = Phase.RUNNING
    return plan, balancer, drivers


def pulled(driver: HostDriver, *run_ids: str) -> None:
    """Results of these runs brought back to the controller (what the balancer goes by)."""
    runs = driver.local_dir / SweepDir.RUNS
    runs.mkdir(parents=True, exist_ok=True)
    for run_id in run_ids:
        (runs / f"{run_id}.json").write_text(json.dumps({"run_id": run_id}))
    driver.done_runs = {p.stem for p in runs.glob("*.json")}


def test_a_host_that_ran_dry_asks_the_busy_one_for_the_end_of_its_queue(tmp_path: Path) -> None:
    _, balancer, drivers = setup(tmp_path)
    dry, busy = drivers["ct201"], drivers["ct200"]
    pulled(dry, *(run.run_id for _, run in dry.shard.runs))
    started = busy.shard.servers[0].server_id
    busy.status.servers = {started: {"phase": "running"}}  # its agent runs this one
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(balancer.wait_for_work(dry)))
    waiter.start()
    try:
        for _ in range(200):
            if balancer.asked_of("ct200"):
                break
            threading.Event().wait(0.01)
        asked = balancer.asked_of("ct200")
        assert asked, "nothing asked of the busy host"
        assert started not in asked  # never a server its agent has started
        queue = [s.server_id for s in busy.queued()]
        assert queue == [s.server_id for s in busy.shard.servers[1:]]
        assert asked <= set(queue)
        assert len(asked) < len(queue)  # as much as evens the two out, not everything
        # The busy host's agent releases all but one (which it had just started): only those move.
        kept = sorted(asked)[0]
        released = asked - {kept}
        moving = [(s, [r.run_id for r in s.runs]) for s in busy.shard.servers if s.server_id in released]
        balancer.answered(busy, moving, kept={kept})
    finally:
        waiter.join(timeout=10)
    (specs,) = got
    assert {s.server_id for s in specs} == released
    for spec in specs:
        assert spec.cwd and "ct201" not in str(spec.argv) or True
        assert all(0 <= g < 8 for g in spec.gpus) and spec.port == 30000 + 10 * spec.gpus[0] or spec.port
    assert [m.why for m in balancer.moves] == ["tail"] * len(released)
    assert balancer.asked_of("ct200") == set()


def test_a_lost_hosts_runs_without_a_result_move_and_its_results_stay(tmp_path: Path) -> None:
    _, balancer, drivers = setup(tmp_path)
    lost, live = drivers["ct201"], drivers["ct200"]
    done = [run.run_id for _, run in lost.shard.runs][:5]
    pulled(lost, *done)
    lost.status.phase = Phase.LOST
    balancer.gone(lost, "unreachable for 600 s")
    moved = {run for m in balancer.moves for run in m.runs}
    assert moved == {run.run_id for _, run in lost.shard.runs} - set(done)
    assert all(m.target == "ct200" and m.why.startswith("lost: ") for m in balancer.moves)
    assert not balancer.not_run
    pulled(live, *(run.run_id for _, run in live.shard.runs))
    specs = balancer.wait_for_work(live)
    assert {r.run_id for s in specs for r in s.runs} == moved
    # Placed anew on ct200's GPUs, one server per GPU block at a time.
    for spec in specs:
        assert spec.unit_name.startswith(f"fleet-srv-{SWEEP}-")
    # Nothing more can come: every other loop is gone, nothing asked, nothing on its way.
    assert balancer.wait_for_work(live) == []


def test_runs_no_live_host_can_take_are_reported_not_run_with_why(tmp_path: Path) -> None:
    _, balancer, drivers = setup(tmp_path)
    for driver in drivers.values():
        driver.status.phase = Phase.LOST
    balancer.gone(drivers["ct200"], "unreachable")
    balancer.gone(drivers["ct201"], "unreachable")
    every = {run.run_id for d in drivers.values() for _, run in d.shard.runs}
    assert set(balancer.not_run) == every
    assert all("no live host with" in why for why in balancer.not_run.values())


def test_a_busy_hosts_fixed_variants_not_yet_shipped_go_to_the_host_that_ran_dry(tmp_path: Path) -> None:
    plan, balancer, drivers = setup(tmp_path)
    dry = drivers["ct201"]
    pulled(dry, *(run.run_id for _, run in dry.shard.runs))
    variant = next(s for s in plan.servers if s.host == "ct200" and s.config.tp == 1)
    waiting = {"ct200": [variant]}

    def take_pending(host: str, max_gpus: int):
        taken = [s for s in waiting.get(host, []) if s.config.tp <= max_gpus]
        waiting[host] = [s for s in waiting.get(host, []) if s not in taken]
        return taken

    balancer._take_pending = take_pending
    specs = balancer.wait_for_work(dry)
    assert [s.server_id for s in specs] == [variant.config.id]
    assert {r.run_id for r in specs[0].runs} == {r.id for r in variant.runs}
    assert [m.why for m in balancer.moves] == ["repair"] and not waiting["ct200"]
    assert balancer.asked_of("ct200") == set()  # the variants were enough: nothing asked of its queue


def test_a_resume_sends_on_the_runs_a_stopped_controller_was_moving(tmp_path: Path) -> None:
    from fleet.host.contract.shard import without_servers
    from fleet.sweep.controller import _in_no_shard
    from fleet.sweep.record import SweepRecord

    plan, _, drivers = setup(tmp_path)
    directory = drivers["ct200"].ctx.directory
    directory.mkdir(parents=True, exist_ok=True)
    SweepRecord(SWEEP, "seed", "x", ["ct200", "ct201"]).save(directory)
    shards = {name: d.shard for name, d in drivers.items()}
    released = shards["ct200"].servers[-1]
    # ct200 released it (its shard no longer has it); the controller stopped before ct201 took it.
    shards["ct200"] = without_servers(shards["ct200"], {released.server_id})
    done = released.runs[0].run_id
    pulled(drivers["ct201"], done)  # one of its runs has a result already: that one stays done
    for driver in drivers.values():
        driver.ledger.refresh()  # as the resume's progress tracker does before this question
    have = set().union(*(d.ledger.present for d in drivers.values()))
    assert _in_no_shard(directory, plan, shards, have) == {released.server_id: [r.run_id for r in released.runs if r.run_id != done]}
    assert _in_no_shard(directory, plan, {name: d.shard for name, d in drivers.items()}, have) == {}


def test_a_host_asked_just_as_its_agent_ended_does_not_hold_the_sweep(tmp_path: Path) -> None:
    # ct201 runs dry and asks ct200, whose loop has just answered for the last time (its agent
    # ended): ct200's loop goes idle too, the ask can never be written, and both must end.
    _, balancer, drivers = setup(tmp_path)
    dry, busy = drivers["ct201"], drivers["ct200"]
    pulled(dry, *(run.run_id for _, run in dry.shard.runs))
    got: dict[str, list] = {}
    waiter = threading.Thread(target=lambda: got.setdefault("ct201", balancer.wait_for_work(dry)))
    waiter.start()
    for _ in range(200):
        if balancer.asked_of("ct200"):
            break
        threading.Event().wait(0.01)
    assert balancer.asked_of("ct200")
    got["ct200"] = balancer.wait_for_work(busy)
    waiter.join(timeout=10)
    assert not waiter.is_alive() and got == {"ct200": [], "ct201": []}
    assert not balancer.moves
