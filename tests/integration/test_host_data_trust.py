"""Host data trusted too much (issue 29, item 9), on real SSH test hosts: a model larger than the
host's tmpfs whose stale cached copy is smaller is refused by preflight with its real size; a
stage that runs out of room leaves nothing in /dev/shm; a work_dir on tmpfs is refused with the
consequence; results a host makes again after a reboot never replace those the controller pulled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from fleet.inventory import load_inventory
from fleet.playbook import load_playbook
from fleet.provision.provision import ProvisionOptions, provision
from fleet.sweep import controller
from fleet.sweep.controller import start_sweep
from fleet.sweep.logs import fetch_logs
from tests.integration.test_provision import STAGED, actions, make_mirror, slow_disk, when_staging

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20


@pytest.fixture(autouse=True)
def facts_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def mirror_of(directory: Path, weights_mib: int) -> Path:
    """make_mirror's model (4 MiB) with one more shard of `weights_mib`."""
    make_mirror(directory)
    (directory / "model-extra.safetensors").write_bytes(os.urandom(weights_mib * MIB))
    return directory


def playbook_for(tmp_path: Path, mirror: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "model": {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "card": "qwen3.6-27b", "mirror": str(mirror)},
        "methods": {"autoregressive": {}},
        "tp": [1],
        "workloads": {"short": {"kind": "short", "prompts": ["fib"]}},
    }))  # fmt: skip
    return path


def provision_one(fleet, tmp_path: Path, playbook: Path, **overrides):
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", **overrides)))
    return provision(hosts, load_playbook(playbook), ProvisionOptions())[0]


def fast_dir(fleet) -> list[str]:
    return fleet.exec("ct200", ["ls", "-a", "/dev/shm/fleet"]).stdout.split()


def test_a_model_larger_than_the_tmpfs_is_refused_by_preflight_though_its_cached_copy_is_smaller(test_fleet_factory, tmp_path: Path) -> None:
    """The 300 MiB model and 256 MiB tmpfs of the report, scaled by ten: a 4 MiB copy cached and
    staged from the mirror the playbook named before, a 30 MiB model behind the mirror it names now."""
    fleet = test_fleet_factory(["ct200"], shm_size="26m")
    first = provision_one(fleet, tmp_path, playbook_for(tmp_path, make_mirror(tmp_path / "old-mirror"), "old"))
    assert first.status == "changed", first.reason

    report = provision_one(fleet, tmp_path, playbook_for(tmp_path, mirror_of(tmp_path / "new-mirror", 26), "new"))
    assert report.status == "failed"
    assert "staging-space: stage 30.0 MiB into /dev/shm/fleet" in report.reason, report.reason  # the copy asked for, not the 4 MiB cached
    assert "4.0 MiB more once the stale copy is removed" in report.reason, report.reason
    assert "fetch" not in actions(report)  # refused before a byte was copied
    assert not any(name.endswith(".partial") for name in fast_dir(fleet))


def test_a_stage_that_runs_out_of_room_leaves_nothing_in_dev_shm_and_a_retry_stages_clean(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"], shm_size="24m")
    host = fleet["ct200"]
    playbook = playbook_for(tmp_path, mirror_of(tmp_path / "mirror", 8), "fill")  # 12 MiB: preflight passes
    slow_disk(host, 3)  # the copy waits: another process fills /dev/shm meanwhile
    fill = ["dd", "if=/dev/zero", "of=/dev/shm/filler", "bs=1M", "count=16"]
    watcher, filled = when_staging(fleet, host, STAGED, lambda: fleet.exec(host, fill), timeout=60)
    report = provision_one(fleet, tmp_path, playbook)
    watcher.join(timeout=70)
    assert filled.is_set(), "staging never started"
    assert report.status == "failed"
    assert "fleet-stage failed" in report.reason and ("No space left on device" in report.reason or "not staged" in report.reason), report.reason
    left = fast_dir(fleet)
    assert not any(name.endswith(".partial") for name in left) and "Qwen--Qwen3.6-27B--main" not in left, left

    fleet.exec(host, ["rm", "/dev/shm/filler"])
    again = provision_one(fleet, tmp_path, playbook)
    assert again.status == "changed" and actions(again)[-1] == "stage", again.reason
    assert ".fleet-complete.json" in fleet.exec(host, ["ls", "-a", STAGED]).stdout


def test_a_work_dir_on_tmpfs_is_refused_with_the_consequence_unless_the_host_file_allows_it(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    playbook = playbook_for(tmp_path, make_mirror(tmp_path / "mirror"), "volatile")
    fleet.mount_tmpfs("ct200", "/var/lib/fleet", "64m")
    try:
        refused = provision_one(fleet, tmp_path, playbook)
        assert refused.status == "failed"
        assert "work-dir-persistent: /var/lib/fleet is on tmpfs" in refused.reason, refused.reason
        assert "a reboot erases the results of finished runs there, and the sweep runs them again" in refused.reason
        assert "point paths.work_dir in hosts/ct200.yaml at a persistent disk" in refused.reason
        assert "\n" not in refused.reason
        assert "fetch" not in actions(refused)
        allowed = provision_one(fleet, tmp_path, playbook, paths={"allow_volatile_work_dir": True})
    finally:
        fleet.umount("ct200", "/var/lib/fleet")
    assert allowed.status == "changed", allowed.reason
    warned = [c for c in allowed.preflight.checks if c.rule_id == "work-dir-persistent"]
    assert warned[0].verdict.value == "warn" and "reboot erases" in warned[0].message


def test_results_a_host_makes_again_after_a_reboot_never_replace_those_pulled(test_fleet_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep_id = "demo-rerun-after-reboot"
    monkeypatch.setattr(controller, "new_sweep_id", lambda playbook: sweep_id)
    fleet = test_fleet_factory(["ct200"])
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02})))
    results = tmp_path / "results"
    outcome = start_sweep(REPO / "playbooks" / "demo.yaml", hosts, results, poll_interval_s=0.5)
    assert outcome.statuses["ct200"].phase == "finished"
    pulled = {p.name: p.read_bytes() for p in (outcome.directory / "ct200" / "runs").glob("*.json")}
    assert len(pulled) >= 2

    # The host comes back and runs every run again (as a work dir the reboot emptied would):
    # new results under the same names, other figures.
    fleet.reboot("ct200")
    on_host = fleet["ct200"].persistent_path(f"/var/lib/fleet/sweeps/{sweep_id}/runs")
    for name in pulled:
        again = json.loads((on_host / name).read_text())
        again["figures"]["output_tok_s"] = 12345.0
        again["ended_at"] += 3600
        (on_host / name).write_text(json.dumps(again))
    # One copy on the controller was unreadable (cut short): the host's is the one to have.
    bad = sorted(pulled)[0]
    (outcome.directory / "ct200" / "runs" / bad).write_bytes(pulled[bad][:50])

    fetched = fetch_logs(results, sweep_id)
    assert not fetched["ct200"].note.startswith("failed"), fetched["ct200"].note
    now = {p.name: p.read_bytes() for p in (outcome.directory / "ct200" / "runs").glob("*.json")}
    assert {name: data for name, data in now.items() if name != bad} == {name: data for name, data in pulled.items() if name != bad}
    assert json.loads(now[bad])["figures"]["output_tok_s"] == 12345.0  # the rejected copy replaced by the host's
