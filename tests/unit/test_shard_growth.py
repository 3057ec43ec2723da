"""A shard grows while its agent runs (fleet.host.contract.shard.grown_servers): servers appended,
nothing else changed; a released server may be gone. Every refusal names the field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard, grown_servers
from fleet.host.errors import ContractError
from tests.unit.test_contract_shard import make_shard


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fleet.sweep.bundle import write_bundle

    directory = tmp_path_factory.mktemp("bundle") / ".bundle"
    write_bundle(directory)
    return directory


SHORT = {"name": "short", "kind": "short", "max_new_tokens": 256}


def variant(server_id: str = "a1-fix") -> ServerSpec:
    return ServerSpec(
        server_id,
        "tp1-ar",
        [0],
        30000,
        ["python", "-m", "sglang.launch_server", "--max-running-requests", "2"],
        {},
        f"fleet-srv-sw1-{server_id}",
        runs=[RunSpec(f"{server_id}-r1", "tp1-ar/short", SHORT, provenance={"attempt": 2})],
    )


def grown(old: Shard, *servers: ServerSpec) -> Shard:
    """As the agent reads it: through the file's JSON."""
    return Shard.from_json(replace(old, servers=[*old.servers, *servers]).to_json())


def test_appended_servers_are_returned_in_their_order() -> None:
    old = make_shard()
    new = grown(old, variant("v1"), variant("v2"))
    assert [s.server_id for s in grown_servers(old, new)] == ["v1", "v2"]
    assert grown_servers(old, Shard.from_json(old.to_json())) == []  # rewritten, unchanged: nothing new
    assert grown_servers(new, new) == []


def test_a_new_boot_id_is_no_change_to_refuse() -> None:
    old = make_shard()
    assert [s.server_id for s in grown_servers(old, replace(grown(old, variant()), boot_id="another-boot"))] == ["a1-fix"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: replace(s, sweep_id="sw2"), "shard.json: sweep_id: expected 'sw1' as when the agent started (a shard only grows), got 'sw2'"),
        (lambda s: replace(s, host="ct201"), "shard.json: host: expected 'ct200'"),
        (lambda s: replace(s, format=1), "shard.json: format: expected 2"),
        (lambda s: replace(s, service_manager="systemd"), "shard.json: service_manager: expected 'process'"),
        (lambda s: replace(s, limits=AgentLimits(request_timeout_s=1)), "shard.json: limits: expected AgentLimits(server_start_timeout_s=900"),
        (lambda s: replace(s, gpus=[0, 1]), "shard.json: gpus: expected [0, 1, 2, 3, 4, 5, 6, 7]"),
        (lambda s: replace(s, exclusive=False), "shard.json: exclusive: expected True"),
        (
            lambda s: replace(s, servers=[s.servers[0], replace(s.servers[1], port=30020), *s.servers[2:]]),
            "shard.json: servers[b2]: expected unchanged (a shard only grows: new servers are appended), got 'changed'",
        ),
        (lambda s: replace(s, servers=[s.servers[0], replace(s.servers[1], runs=[]), *s.servers[2:]]), "servers[b2]: expected unchanged"),
        (lambda s: replace(s, servers=[s.servers[0], *s.servers[2:]]), "shard.json: servers: expected server b2 still there (only the hand-over removes servers), got 'absent'"),
        (
            lambda s: replace(s, servers=[s.servers[1], s.servers[0], *s.servers[2:]]),
            "shard.json: servers: expected the agent's servers first, in their order, new servers after them, got ['b2', 'a1', 'a1-fix']",
        ),
        (lambda s: replace(s, servers=[s.servers[0], s.servers[2], s.servers[1]]), "expected the agent's servers first, in their order"),
    ],
)
def test_anything_but_an_append_is_refused_naming_the_field(change, expected: str) -> None:  # type: ignore[no-untyped-def]
    old = make_shard()
    with pytest.raises(ContractError) as caught:
        grown_servers(old, change(grown(old, variant())))
    assert expected in str(caught.value)


def test_a_released_server_may_be_gone_or_changed_and_is_never_new() -> None:
    old = make_shard()
    gone = replace(grown(old, variant()), servers=[old.servers[0], variant()])
    assert [s.server_id for s in grown_servers(old, gone, released={"b2"})] == ["a1-fix"]
    fewer_runs = grown(replace(old, servers=[old.servers[0], replace(old.servers[1], runs=[])]), variant())
    assert [s.server_id for s in grown_servers(old, fewer_runs, released=frozenset({"b2"}))] == ["a1-fix"]
    # Not released: the same shards are refused.
    for new in (gone, fewer_runs):
        with pytest.raises(ContractError):
            grown_servers(old, new)


# ------------------------------------------------------------------ the controller's side (SweepFixer)


def test_grow_appends_only_new_server_ids_and_keeps_the_rest_for_the_next_round(tmp_path: Path) -> None:
    from tests.unit.test_sweep_fixing import failed, setup

    plan, fixer, shard = setup(tmp_path)
    server = plan.servers[0]
    first, *rest = server.runs
    fixer.consider("local", [failed(first.id, "port_in_use", {"port": str(server.port)})])
    once = fixer.grow("local", shard)
    assert once is not None
    (variant,) = grown_servers(shard, once)
    # The same fix for the server's other runs: the same variant server, which the agent has:
    # not appended (that would change a server), but kept for the host's next round.
    fixer.consider("local", [failed(r.id, "port_in_use", {"port": str(server.port)}) for r in rest])
    assert fixer.grow("local", once) is None
    assert fixer.grow("local", shard, asked={variant.server_id}) is None  # nor under an id the hand-over asked back
    later = fixer.next_round("local", once)
    assert later is not None and [len(s.runs) for s in later.servers if s.server_id == variant.server_id] == [len(server.runs)]


def test_a_resumed_fixer_never_makes_pending_a_variant_run_already_shipped(tmp_path: Path) -> None:
    """A variant's provenance names one failed run; a resumed controller re-reading the others'
    failures makes the same variant runs again: they are in a shard already, so never pending
    (another host taking them pending would run them twice)."""
    from tests.unit.test_sweep_fixing import failed, setup

    plan, fixer, shard = setup(tmp_path)
    server = plan.servers[0]
    failures = [failed(r.id, "port_in_use", {"port": str(server.port)}) for r in server.runs]
    fixer.consider("local", failures)
    shipped = fixer.next_round("local", shard)
    assert shipped is not None
    _, resumed, _ = setup(tmp_path)
    resumed.already_fixed([shipped])
    resumed.consider("local", failures)
    assert resumed.next_round("local", shipped) is None and resumed.take_pending("local", 8) == []


def test_runs_appended_as_the_agent_ended_are_shipped_again_and_run_once(tmp_path: Path, bundle: Path) -> None:
    """The agent finishes its last run just as the grown shard lands, and never reads it: the
    loop sees the appended runs without results once that agent has ended, ships the shard and
    starts an agent for them (the real agent skips every run that has a result)."""
    from fleet.host.contract import AgentState, RunStatus
    from fleet.sweep.hoststatus import Phase
    from tests.unit.test_sweep_loop import local_results, port_in_use, rig

    first: list[str] = []

    def outcome(server, run):  # type: ignore[no-untyped-def]
        first.append(first[0] if first else server.server_id)
        return port_in_use(server.port) if server.server_id == first[0] else RunStatus.ok

    r = rig(tmp_path, bundle, fixer=True, outcome=outcome, runs_per_poll=2)
    original = {run.id for _, run in r.plan.runs}
    put = r.driver.channel.grow

    def grow_then_the_agent_ends(shard, appended):  # type: ignore[no-untyped-def]
        put(shard, appended)
        if r.agent.starts == 1 and r.agent.alive:
            done = r.agent.results()
            for server, run in shard.runs:
                if run.run_id in original and run.run_id not in done:
                    r.agent._finish(server, run)
            r.agent.alive = False
            r.agent._write_progress(AgentState.finished_with_errors)

    r.driver.channel.grow = grow_then_the_agent_ends  # type: ignore[method-assign]
    status = r.drive()
    assert status.phase is Phase.FINISHED, status.last_error
    added = {run.run_id for _, run in r.driver.shard.runs} - original
    assert added and r.agent.starts == 2 and Phase.REPAIRING in r.phases
    assert local_results(r) == original | added and status.total == len(original | added)


def test_a_variant_waits_until_its_failed_server_has_every_result_pulled(tmp_path: Path) -> None:
    """A pull may bring only some of a failed server's results: the variant goes out once all
    are in, with all its runs, not with some now and the rest in a later round."""
    from tests.unit.test_sweep_fixing import failed, setup

    plan, fixer, shard = setup(tmp_path)
    server = plan.servers[0]
    first, *rest = server.runs
    assert rest, "the demo's first server has several runs"
    fixer.consider("local", [failed(first.id, "port_in_use", {"port": str(server.port)})])
    assert fixer.grow("local", shard, done={first.id}) is None  # the others still to come
    fixer.consider("local", [failed(r.id, "port_in_use", {"port": str(server.port)}) for r in rest])
    grown = fixer.grow("local", shard, done={r.id for r in server.runs})
    assert grown is not None
    (variant,) = grown_servers(shard, grown)
    assert len(variant.runs) == len(server.runs)
