"""The shard: a lossless round trip, and errors that name the field and what was expected."""

from __future__ import annotations

import json

import pytest

from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard
from fleet.host.errors import ContractError


def make_shard() -> Shard:
    short = {"name": "short", "kind": "short", "max_new_tokens": 256, "prompts": [{"name": "fib", "category": "code", "text": "Write fib"}]}
    return Shard(
        sweep_id="sw1",
        host="ct200",
        boot_id="6fb66154-1f64-4a0f-b966-e39d6e9e0c28",
        service_manager="process",
        limits=AgentLimits(server_start_timeout_s=900, request_timeout_s=300, no_token_timeout_s=60),
        servers=[
            ServerSpec("a1", "tp1-ar", [0], 30000, ["python", "-m", "sglang.launch_server"], {"CUDA_VISIBLE_DEVICES": "0"}, "fleet-srv-sw1-a1", runs=[RunSpec("r1", "tp1-ar/short", short, repeats=2)]),
            ServerSpec("b2", "tp4-dflash", [0, 1, 2, 3], 30010, ["python"], {}, "fleet-srv-sw1-b2", api="completions", runs=[RunSpec("r2", "tp4-dflash/short", short)], estimate_s=42.5),
        ],
        gpus=list(range(8)),
        exclusive=True,
    )


def test_round_trip_is_lossless() -> None:
    shard = make_shard()
    again = Shard.from_json(shard.to_json())
    assert again == shard
    assert [run.run_id for _, run in again.runs] == ["r1", "r2"]
    again.servers[0].runs.append(RunSpec("r3", "tp1-ar/short", again.servers[0].runs[0].workload))
    assert again.run_count == len(again.runs) == 3  # counted without the list, as the sweep loop asks
    assert again.servers[1].gpus == [0, 1, 2, 3] and again.servers[1].gpu_count == 4 and again.servers[1].estimate_s == 42.5
    assert again.pool == tuple(range(8)) and again.exclusive
    assert again.servers[1].log_name == "tp4-dflash.log"  # where a systemd unit must write its log


def mutated(change) -> str:  # type: ignore[no-untyped-def]
    data = json.loads(make_shard().to_json())
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.pop("sweep_id"), "shard.json: sweep_id: expected a non-empty string (the field is missing)"),
        (lambda d: d.update(service_manager="docker"), "service_manager: expected one of systemd, process, got 'docker'"),
        (lambda d: d["servers"][1].update(port="30000"), "servers[1].port: expected a TCP port, got '30000'"),
        (lambda d: d["servers"][0].update(port=True), "servers[0].port: expected a TCP port, got True"),
        (lambda d: d["servers"][0].update(gpus=[0, -1]), "servers[0].gpus: expected a list of distinct GPU indexes (integers >= 0), got [0, -1]"),
        (lambda d: d["servers"][0].update(gpus=[1, 1]), "servers[0].gpus: expected a list of distinct GPU indexes (integers >= 0), got [1, 1]"),
        (lambda d: d["servers"][0].update(gpus=[]), "servers[0].gpus: expected at least one GPU (the count is what the server needs), got []"),
        (lambda d: d["servers"][1].update(gpus=[6, 7, 8, 9]), "servers[1].gpus: expected GPUs of the shard's pool [0, 1, 2, 3, 4, 5, 6, 7], got [6, 7, 8, 9]"),
        (lambda d: d["servers"][1].update(estimate_s=-1), "servers[1].estimate_s: expected seconds (a number >= 0) or null, got -1"),
        (lambda d: d.update(gpus="0-7"), "shard.json: gpus: expected a list of GPU indexes or null, got '0-7'"),
        (lambda d: d.update(exclusive="yes"), "exclusive: expected true or false, got 'yes'"),
        (lambda d: d["servers"][0]["runs"][0]["workload"].update(kind="batch"), "servers[0].runs[0].workload.kind: expected one of"),
        (lambda d: d["servers"][0]["runs"][0].update(repeats=0), "servers[0].runs[0].repeats: expected an integer >= 1, got 0"),
        (lambda d: d["limits"].update(no_token_timeout_s=0), "limits.no_token_timeout_s: expected a number > 0, got 0"),
        (lambda d: d["servers"][1]["runs"][0].update(run_id="r1"), "expected distinct run_id values (duplicates: ['r1'])"),
        (lambda d: d.update(format=1), "format: expected shard format 2 (agent and controller differ in version), got 1"),
    ],
)
def test_bad_shards_are_refused_with_the_field_named(change, expected: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ContractError) as error:
        Shard.from_json(mutated(change))
    assert expected in str(error.value)


def test_not_json_names_the_file() -> None:
    with pytest.raises(ContractError, match=r"^/var/lib/fleet/sweeps/x/shard.json: expected a whole JSON document \(truncated or not JSON\)"):
        Shard.from_json("{", source="/var/lib/fleet/sweeps/x/shard.json")


def test_without_a_pool_it_is_the_gpus_the_servers_name() -> None:
    """A Slurm task's shard names no pool: its servers' GPUs are exactly the job's grant (fleet.host.grant)."""
    shard = make_shard()
    data = json.loads(shard.to_json())
    data["gpus"] = None
    data["servers"][0]["gpus"] = [5]
    data["servers"][1]["gpus"] = [2, 3, 5, 6]
    again = Shard.from_json(json.dumps(data))
    assert again.gpus is None and again.pool == (2, 3, 5, 6) and not Shard.from_json(json.dumps({**data, "exclusive": False})).exclusive


def test_skip_reason_round_trips_and_defaults_to_none() -> None:
    from fleet.host.contract.shard import AgentLimits, RunSpec, ServerSpec, Shard

    server = ServerSpec(
        server_id="s1", label="tp1-ddtree-b8", gpus=[0], port=30000, argv=["python3"], env={}, unit_name="fleet-srv-x-s1",
        runs=[RunSpec("r1", "tp1-ddtree-b8/short", {"name": "short", "kind": "short"})],
        skip_reason="quarantined: cuda_illegal_instruction on sm_120",
    )  # fmt: skip
    shard = Shard("x", "ct200", "boot", "process", AgentLimits(), [server])
    again = Shard.from_json(shard.to_json())
    assert again.servers[0].skip_reason == "quarantined: cuda_illegal_instruction on sm_120"
    plain = Shard.from_json(Shard("x", "ct200", "boot", "process", AgentLimits(), [ServerSpec(**{**server.__dict__, "skip_reason": None})]).to_json())
    assert plain.servers[0].skip_reason is None


def test_reading_a_shard_sets_off_no_more_cyclic_collections_as_it_grows() -> None:
    """Every full collection walks every object alive: reading a 50,000-run shard set off six,
    a third of `fleet status` (issue 28). Counted with the collector's own callback, its thresholds
    at their lowest so that every tracked allocation could set one off: a read of 2,000 runs sets
    off no more than one of 20, and the collector is on again afterwards."""
    import dataclasses
    import gc

    shard = make_shard()
    first = shard.servers[0]

    def shard_text(count: int) -> str:
        runs = [RunSpec(f"many{i}", "tp1-ar/short", first.runs[0].workload) for i in range(count)]
        return dataclasses.replace(shard, servers=[dataclasses.replace(first, runs=runs), *shard.servers[1:]]).to_json()

    texts = {count: shard_text(count) for count in (20, 2000)}
    collections: list[int] = []

    def count_starts(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.callbacks.append(count_starts)
    gc.set_threshold(1, 1, 1)
    try:
        during = {}
        for count, text in texts.items():
            before = len(collections)
            read = Shard.from_json(text)
            during[count] = len(collections) - before
            assert read.run_count == count + 1
        before = len(collections)
        containers = [[] for _ in range(100)]  # the control: with the collector on, allocations set collections off
        after = len(collections) - before
        del containers
    finally:
        gc.callbacks.remove(count_starts)
        gc.set_threshold(*thresholds)
    assert during[2000] <= during[20] <= 5, during
    assert gc.isenabled() and after > 5, after
