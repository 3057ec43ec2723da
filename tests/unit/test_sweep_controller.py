"""`fleet sweep` start and resume on fake hosts (no root): provisioning, planning, shards, driving,
the sweep's records, a host that fails preflight, HF_TOKEN only in the fetch's environment, and a
resume that re-provisions with the same secrets and mirror folder as the start."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

from fleet.host.contract import Failure, RunStatus, SweepDir
from fleet.inventory import Host
from fleet.plan import make_plan
from fleet.playbook import load_playbook
from fleet.sweep import controller
from fleet.sweep.controller import resume_sweep, start_sweep
from fleet.sweep.hoststatus import Phase
from fleet.sweep.record import SweepRecord, latest_sweep
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import GPU_ENGINE_PROBE, FakeAgent, FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
SWEEP = "demo-20261201-000000-beef"
TOKEN = "hf_sweep_secret_9876543210"


@pytest.fixture(autouse=True)
def fixed_sweep_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: SWEEP)


class FakeFleet:
    """Fake hosts with their shells and agents, and the `connect` a sweep is given."""

    def __init__(self, hosts: list[Host], *, gpu: bool = False, volatile: tuple[str, ...] = ("/dev/shm",), **shell: object) -> None:
        self.hosts = hosts
        self.t = {h.name: FakeTransport(h.name, volatile_dirs=volatile) for h in hosts}
        self.shell = {h.name: FakeHostShell(self.t[h.name], h, gpu=gpu, **shell) for h in hosts}  # type: ignore[arg-type]
        self.agent = {h.name: FakeAgent(self.t[h.name], h, SWEEP) for h in hosts}

    def connect(self, host: Host) -> FakeTransport:
        return self.t[host.name]


def sweep(fleet: FakeFleet, tmp_path: Path, playbook: Path = DEMO, **options: object):
    return start_sweep(playbook, fleet.hosts, tmp_path / "results", connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None, **options)  # type: ignore[arg-type]


def every_file(directory: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_a_sweep_on_two_hosts_brings_back_one_result_per_run_and_its_records(tmp_path: Path) -> None:
    fleet = FakeFleet([make_host("ct200"), make_host("ct201")])
    outcome = sweep(fleet, tmp_path)
    assert {s.phase for s in outcome.statuses.values()} == {Phase.FINISHED}, {n: s.last_error for n, s in outcome.statuses.items()}
    expected = {run.id for _, run in make_plan(load_playbook(DEMO), fleet.hosts).runs}
    pulled = {p.stem: p.parent.parent.name for p in outcome.directory.glob(f"*/{SweepDir.RUNS}/*.json")}
    assert set(pulled) == expected and set(pulled.values()) == {"ct200", "ct201"}
    assert latest_sweep(tmp_path / "results") == SWEEP
    record = SweepRecord.load(outcome.directory)
    assert record.state == "finished" and record.hosts == ["ct200", "ct201"]
    assert record.mirror_root == str(DEMO.parent.resolve())
    summary = json.loads((outcome.directory / "summary.json").read_text())
    assert summary["results"] == len(expected) and summary["hosts"]["ct200"]["phase"] == "finished"
    for name in ("ct200", "ct201"):
        assert (outcome.directory / name / SweepDir.SHARD).is_file()
        assert fleet.t[name].is_file(fleet.agent[name].dir.host_facts)  # facts travel with the shard
        assert fleet.agent[name].starts == 1


def test_a_host_that_fails_preflight_takes_no_part_and_its_share_moves(tmp_path: Path) -> None:
    fleet = FakeFleet([make_host("ct200", kind="sglang", gpus=8), make_host("ct201", kind="sglang", gpus=8)], gpu=True)
    fleet.shell["ct201"].engine_probe = GPU_ENGINE_PROBE.replace('"sglang_version": "0.5.23"', '"sglang_version": null')
    outcome = sweep(fleet, tmp_path)
    assert set(outcome.excluded) == {"ct201"} and "has no sglang" in outcome.excluded["ct201"]
    assert outcome.statuses["ct200"].phase is Phase.FINISHED and "ct201" not in outcome.statuses
    hosts = {p.parent.parent.name for p in outcome.directory.glob("*/runs/*.json")}
    assert hosts == {"ct200"} and fleet.agent["ct201"].starts == 0
    assert not fleet.t["ct201"].exists(fleet.agent["ct201"].dir.root)  # nothing shipped there


def test_fleet_sweep_hands_hf_token_to_the_hosts_model_fetch_only_in_its_environment(tmp_path: Path) -> None:
    """The token comes from the controller's environment, reaches each hub fetch in its env, and
    appears in no argv, no stdin, no file written to a host, nothing on the controller's disk."""
    fleet = FakeFleet([make_host("ct200", kind="sglang", gpus=8), make_host("ct201", kind="sglang", gpus=8)], gpu=True)
    outcome = sweep(fleet, tmp_path, environ={"HF_TOKEN": TOKEN, "HOME": "/root"})
    assert {s.phase for s in outcome.statuses.values()} == {Phase.FINISHED}
    for name in ("ct200", "ct201"):
        assert fleet.shell[name].fetch_envs == [{"HF_TOKEN": TOKEN}] * 2  # target and draft, nothing else
        assert fleet.t[name].secret_leaks(TOKEN) == []
        carrying = [c for c in fleet.t[name].calls if TOKEN in c.env.values()]
        assert len(carrying) == 2 and all("fleet-fetch" in c.command for c in carrying)
    leaked = [str(p) for p, data in every_file(tmp_path).items() if TOKEN.encode() in data]
    assert leaked == []  # results, records, plan, shards, logs, the facts cache


def test_without_a_token_the_fetch_gets_none(tmp_path: Path) -> None:
    fleet = FakeFleet([make_host("ct200", kind="sglang", gpus=8)], gpu=True)
    outcome = sweep(fleet, tmp_path, environ={"HOME": "/root"})
    assert outcome.statuses["ct200"].phase is Phase.FINISHED
    assert fleet.shell["ct200"].fetch_envs == [{}, {}]


def detach_at(fleet: FakeFleet, name: str, polls: int, stop: threading.Event) -> None:
    agent = fleet.agent[name]
    fleet.t[name].on(lambda c: c.command == agent.poll_command and agent.polls == polls, lambda t, c: stop.set(), times=1)


def test_resume_after_the_host_lost_its_models_refetches_with_the_token_from_the_environment(tmp_path: Path) -> None:
    # A host whose model cache does not survive a reboot (a re-imaged disk): the resume's
    # recovery fetches again, and needs the token as much as the start did.
    fleet = FakeFleet([make_host("ct200", kind="sglang", gpus=8)], gpu=True, volatile=("/dev/shm", "/srv/models"))
    fleet.agent["ct200"].runs_per_poll = 1
    stop = threading.Event()
    detach_at(fleet, "ct200", 4, stop)
    first = sweep(fleet, tmp_path, environ={"HF_TOKEN": TOKEN}, stop=stop)
    assert first.interrupted and first.statuses["ct200"].phase is Phase.DETACHED
    fleet.t["ct200"].reboot()  # while no controller watches

    outcome = resume_sweep(SWEEP, tmp_path / "results", environ={"HF_TOKEN": TOKEN}, connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None)
    status = outcome.statuses["ct200"]
    assert status.phase is Phase.FINISHED, status.last_error
    assert status.reboots == 1 and fleet.agent["ct200"].starts == 2
    assert fleet.shell["ct200"].fetch_envs == [{"HF_TOKEN": TOKEN}] * 4  # two at the start, two in the resume's recovery
    assert fleet.t["ct200"].secret_leaks(TOKEN) == []
    assert [str(p) for p, data in every_file(tmp_path).items() if TOKEN.encode() in data] == []
    expected = {run.id for _, run in make_plan(load_playbook(DEMO), fleet.hosts).runs}
    assert {p.stem for p in outcome.directory.glob("ct200/runs/*.json")} == expected
    assert SweepRecord.load(outcome.directory).state == "finished"


def test_resume_resolves_a_relative_mirror_against_the_playbooks_folder_not_the_sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = tmp_path / "books"
    mirror = book / "mirrors" / "qwen"
    mirror.mkdir(parents=True)
    (mirror / "config.json").write_text("{}")
    (mirror / "model.safetensors").write_bytes(b"m" * 1000)
    data = yaml.safe_load(DEMO.read_text())
    data["model"]["mirror"] = "mirrors/qwen"
    (book / "mirrored.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    fleet = FakeFleet([make_host("ct200")], volatile=("/dev/shm", "/srv/models"))
    fleet.agent["ct200"].runs_per_poll = 1
    stop = threading.Event()
    detach_at(fleet, "ct200", 4, stop)
    first = sweep(fleet, tmp_path, playbook=book / "mirrored.yaml", stop=stop)
    assert first.statuses["ct200"].phase is Phase.DETACHED
    fleet.t["ct200"].reboot()

    outcome = resume_sweep(SWEEP, tmp_path / "results", environ={}, connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None)
    assert outcome.statuses["ct200"].phase is Phase.FINISHED, outcome.statuses["ct200"].last_error
    pushes = [c.command for c in fleet.t["ct200"].calls if c.kind == "rsync_push" and "mirrors" in c.command]
    assert len(pushes) == 2 and all(str(mirror) in p for p in pushes)  # the start's fetch, the resume's re-fetch


def test_a_resume_repairs_like_a_start_and_never_fixes_a_failure_twice(tmp_path: Path) -> None:
    """A run that fails for a fixable reason gets exactly one fixed variant, whether the failure is
    pulled by the first controller or only by a resume after it was stopped."""
    fleet = FakeFleet([make_host("ct200")])
    plan = make_plan(load_playbook(DEMO), fleet.hosts)
    server, (run, *_) = plan.servers[0], plan.servers[0].runs
    port_taken = Failure("server_start_failed", "the server exited", diagnosis={"failure_class": "port_in_use", "figures": {"port": str(server.port)}})
    fleet.agent["ct200"].outcome = lambda s, r: port_taken if r.run_id == run.id else RunStatus.ok
    fleet.agent["ct200"].runs_per_poll = 1
    stop = threading.Event()
    # Stopped on its second poll: the failed run has a result on the host, not yet pulled or reviewed.
    detach_at(fleet, "ct200", 1, stop)
    first = sweep(fleet, tmp_path, stop=stop, memory_check=False)
    assert first.statuses["ct200"].phase is Phase.DETACHED

    outcome = resume_sweep(SWEEP, tmp_path / "results", environ={}, connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None)
    assert outcome.statuses["ct200"].phase is Phase.FINISHED, outcome.statuses["ct200"].last_error
    fixes = first.fixes + outcome.fixes
    assert first.fixes == [], "the first controller stopped before it saw the failure"
    assert [(f.action, f.run_id) for f in fixes] == [("applied", run.id)]
    results = {p.stem: json.loads(p.read_text()) for p in outcome.directory.glob("ct200/runs/*.json")}
    assert results[run.id]["status"] == "failed" and results[str(fixes[0].variant_id)]["status"] == "ok"
    assert len(results) == len(plan.runs) + 1  # every planned run once, and the one variant

    # A second resume finds the variant in the shard: nothing is fixed again.
    again = resume_sweep(SWEEP, tmp_path / "results", environ={}, connect=fleet.connect, poll_interval_s=0.0, sleep=lambda s: None)
    assert again.fixes == [] and again.statuses["ct200"].phase is Phase.FINISHED
