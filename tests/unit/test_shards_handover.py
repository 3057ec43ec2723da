"""The hand-over contract (fleet.host.contract.shard) and the agent's answer to it: a requested
server is released only if this agent has not started it; answers are cumulative and survive a
restarted agent; a hand-edited request releases nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.agent.handover import release_handed_over
from fleet.host.contract import AgentLimits, ContractError, RunSpec, ServerSpec, Shard, SweepDir
from fleet.host.contract.shard import HandoverAnswer, HandoverRequest, without_servers


def request(tmp_path: Path, *servers: str) -> SweepDir:
    files = SweepDir(str(tmp_path))
    Path(files.handover).write_text(json.dumps(HandoverRequest(servers).to_json()))
    return files


def answer(files: SweepDir) -> HandoverAnswer:
    return HandoverAnswer.from_json(Path(files.handover_answer).read_text())


def test_no_request_releases_nothing_and_writes_nothing(tmp_path: Path) -> None:
    files = SweepDir(str(tmp_path))
    assert release_handed_over(files, started=()) == frozenset()
    assert not Path(files.handover_answer).exists()


def test_a_started_server_is_kept_a_queued_one_released(tmp_path: Path) -> None:
    files = request(tmp_path, "a", "b")
    assert release_handed_over(files, started={"a"}) == {"b"}
    assert answer(files) == HandoverAnswer(released=("b",), kept=("a",))


def test_answers_are_cumulative_and_hold_for_a_restarted_agent(tmp_path: Path) -> None:
    files = request(tmp_path, "b")
    assert release_handed_over(files, started=()) == {"b"}
    request(tmp_path, "b", "c")
    # A new agent (nothing started yet) keeps b released, and answers c afresh.
    assert release_handed_over(files, started={"c"}) == {"b"}
    assert answer(files) == HandoverAnswer(released=("b",), kept=("c",))
    # Once kept, a later start of the same agent does not turn it into a release.
    assert release_handed_over(files, started=()) == {"b"}


def test_a_broken_request_releases_nothing(tmp_path: Path) -> None:
    files = SweepDir(str(tmp_path))
    Path(files.handover).write_text('{"schema": "fleet.handover/1", "servers": [1]}')
    assert release_handed_over(files, started=()) == frozenset()
    with pytest.raises(ContractError, match="servers"):
        HandoverRequest.from_json(Path(files.handover).read_text(), files.handover)


def spec(server_id: str, gpus: list[int]) -> ServerSpec:
    return ServerSpec(server_id, server_id, gpus, 30000, ["x"], {}, f"u-{server_id}", [RunSpec(f"r-{server_id}", "l", {"name": "w", "kind": "short"})])


def test_without_servers_drops_them_and_keeps_the_pool() -> None:
    shard = Shard("s", "h", "boot", "process", AgentLimits(), [spec("a", [0]), spec("b", [1]), spec("c", [0, 1])], gpus=[0, 1, 2, 3])
    reduced = without_servers(shard, {"b"})
    assert [s.server_id for s in reduced.servers] == ["a", "c"]
    assert reduced.pool == (0, 1, 2, 3)
    assert Shard.from_json(reduced.to_json()) == reduced  # still a valid shard


def test_a_server_no_longer_asked_for_is_this_agents_again(tmp_path: Path) -> None:
    # Released once, then given back to this host (the host that took it was lost): the
    # controller drops it from its request, and the next agent may start it.
    files = request(tmp_path, "b", "c")
    assert release_handed_over(files, started=()) == {"b", "c"}
    request(tmp_path, "c")
    assert release_handed_over(files, started=()) == {"c"}
    assert answer(files) == HandoverAnswer(released=("c",), kept=())
