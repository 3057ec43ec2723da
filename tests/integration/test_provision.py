"""`fleet provision` against real SSH test hosts: idempotence, preflight, staging after reboots and drops."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from fleet.host.modelcard import hf_files_from_card, load_model_card
from fleet.inventory import load_inventory
from fleet.playbook import load_playbook
from fleet.provision.provision import ProvisionOptions, provision

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
STAGED = "/dev/shm/fleet/Qwen--Qwen3.6-27B--main"
CACHED = "/srv/models/Qwen--Qwen3.6-27B/main"


def make_mirror(directory: Path) -> Path:
    """A small model the tests make themselves: the card's config plus two weight shards."""
    directory.mkdir(parents=True)
    for name, content in hf_files_from_card(load_model_card("qwen3.6-27b")).items():
        (directory / name).write_text(json.dumps(content))
    (directory / "model-00001-of-00002.safetensors").write_bytes(os.urandom(3 << 20))
    (directory / "model-00002-of-00002.safetensors").write_bytes(os.urandom(1 << 20))
    return directory


def make_playbook(tmp_path: Path) -> Path:
    mirror = make_mirror(tmp_path / "mirror" / "qwen36")
    data = {
        "name": "provision-test",
        "model": {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "card": "qwen3.6-27b", "mirror": str(mirror)},
        "methods": {"autoregressive": {}},
        "tp": [1],
        "workloads": {"short": {"kind": "short", "prompts": ["fib"]}},
    }
    path = tmp_path / "provision-test.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def actions(report) -> list[str]:
    return [c.action for c in report.changes]


def provision_all(fleet, tmp_path: Path, **options):
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts")))
    playbook = load_playbook(make_playbook(tmp_path) if not (tmp_path / "provision-test.yaml").exists() else tmp_path / "provision-test.yaml")
    return {r.host: r for r in provision(hosts, playbook, ProvisionOptions(**options))}


def slow_disk(host, seconds: float, only: str = "") -> None:
    """The host's cp takes `seconds` more: staging lasts long enough to inject a fault under it.
    `only`: just the copies whose arguments hold it (a copy that needs no time to strike in takes none)."""
    slow_cp = host.bin_dir / "cp"
    wait = f'case "$*" in *{shlex.quote(only)}*) sleep {seconds:g};; esac' if only else f"sleep {seconds:g}"
    slow_cp.write_text(f'#!/bin/sh\n{wait}\nexec /bin/cp "$@"\n')
    slow_cp.chmod(0o755)


def when_staging(fleet, host, staged: str, fault, timeout: float) -> tuple[threading.Thread, threading.Event]:
    """Run `fault()` once, as soon as the host stages into `staged` (its .partial or .lock is
    there); the event is set once it ran."""
    done = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if fleet.exec(host, ["sh", "-c", f"test -e {staged}.partial || test -e {staged}.lock"]).returncode == 0:
                fault()
                done.set()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher, done


def test_first_provision_changes_second_changes_nothing_then_reboot_restages(two_hosts, tmp_path: Path) -> None:
    dry = provision_all(two_hosts, tmp_path, dry_run=True)
    for report in dry.values():
        assert report.status == "changed", report.reason
        assert {"fetch", "stage"} <= set(actions(report))
    assert not two_hosts["ct200"].persistent_path(CACHED).exists()  # a dry run changes nothing

    first = provision_all(two_hosts, tmp_path)
    for report in first.values():
        assert report.status == "changed", report.reason
        assert actions(report)[-2:] == ["fetch", "stage"], report.changes
    for host in two_hosts.hosts:
        listing = two_hosts.exec(host, ["ls", STAGED]).stdout.split()
        assert "model-00001-of-00002.safetensors" in listing and "config.json" in listing

    second = provision_all(two_hosts, tmp_path)
    assert {r.status for r in second.values()} == {"ok"}
    assert all(not r.changes for r in second.values())

    # A reboot wipes /dev/shm: the next provision stages again from the cache, and fetches nothing.
    two_hosts.reboot("ct200")
    assert two_hosts.exec("ct200", ["ls", "/dev/shm"]).stdout.strip() == ""
    third = provision_all(two_hosts, tmp_path)
    assert actions(third["ct200"]) == ["mkdir", "stage"], third["ct200"].changes  # mkdir: /dev/shm/fleet is gone too
    assert third["ct201"].status == "ok"
    assert "config.json" in two_hosts.exec("ct200", ["ls", STAGED]).stdout


def test_toolkit_too_old_for_blackwell_fails_preflight_with_reason_and_hint(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"], gpu_profiles={"ct200": {"toolkit": "12.8", "compute_cap": "12.0"}})
    report = provision_all(fleet, tmp_path)["ct200"]
    assert report.status == "failed"
    assert "12.9" in report.reason and "12.8" in report.reason, report.reason
    failed = [c for c in report.preflight.checks if c.verdict.value == "fail"]
    assert failed and all(c.hint for c in failed)
    assert not fleet["ct200"].persistent_path(CACHED).exists()  # nothing fetched for a host that cannot run


def test_link_drop_during_staging_finishes_once_the_link_is_back(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    slow_disk(host, 4)  # the link can drop while staging runs
    watcher, seen_partial = when_staging(fleet, host, STAGED, lambda: fleet.drop_link(host, 8).join(), timeout=60)
    started = time.monotonic()
    report = provision_all(fleet, tmp_path)["ct200"]
    watcher.join(timeout=70)
    assert seen_partial.is_set(), "staging never started"
    assert report.status == "changed", report.reason
    assert actions(report)[-1] == "stage"
    assert time.monotonic() - started >= 8  # it really waited out the drop
    listing = fleet.exec(host, ["ls", "-a", "/dev/shm/fleet"]).stdout.split()
    assert not any(name.endswith(".partial") for name in listing), listing
    assert ".fleet-complete.json" in fleet.exec(host, ["ls", "-a", STAGED]).stdout


def _start_sim_server(fleet, host, gpu: int, port: int, marker: str | None) -> None:
    """A real sim server process on the host, in a session of its own; `marker`: the FLEET_SERVICE
    value fleet sets on the services it starts (None: started by hand, not fleet's)."""
    mark = f"FLEET_SERVICE={marker} " if marker else ""
    start = (
        f"cd /tmp && setsid env -u FLEET_SERVICE {mark}CUDA_VISIBLE_DEVICES={gpu} FLEET_SIM_SPEED=0.01 "
        f"{sys.executable} -m fleet.host.engines.sim --model-path qwen3.6-27b --port {port} --mem-fraction-static 0.75 "
        f"--context-length 32768 >/tmp/server-{port}.log 2>&1 </dev/null &"
    )
    fleet.exec(host, ["sh", "-c", start])


def _sim_servers(fleet, host) -> list[str]:
    return [cmd for cmd in fleet.processes(host).values() if "fleet.host.engines.sim" in cmd]


def test_stale_servers_of_an_earlier_run_are_cleared_and_a_colleagues_server_survives(test_fleet_factory, tmp_path: Path) -> None:
    """One stale-server rule (fleet.host.agent.services): only processes carrying fleet's marker are
    stopped. The colleague's server has the very command line fleet would launch, on another port."""
    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    _start_sim_server(fleet, host, gpu=0, port=30000, marker="fleet-server-old")  # left by an earlier run
    _start_sim_server(fleet, host, gpu=1, port=31000, marker=None)  # a colleague's, started by hand
    wait = time.monotonic() + 60
    while len(fleet.exec(host, ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"]).stdout.split()) < 2:
        assert time.monotonic() < wait, "the servers never came up"
        time.sleep(0.2)
    report = provision_all(fleet, tmp_path)["ct200"]
    assert actions(report)[:1] == ["clear"], (report.status, report.reason, report.changes)
    survivors = _sim_servers(fleet, host)
    assert len(survivors) == 1 and "--port 31000" in survivors[0], survivors
    # The colleague's server still holds GPU 1: preflight names it as foreign instead of killing it.
    assert report.status == "failed" and "foreign" in report.reason, report.reason
    again = provision_all(fleet, tmp_path)["ct200"]
    assert "clear" not in actions(again) and len(_sim_servers(fleet, host)) == 1


def test_a_colleagues_server_survives_provision_and_a_whole_sweep_on_its_host(test_fleet_factory, tmp_path: Path) -> None:
    """A hand-started process with `-m sglang.launch_server` on its command line (the old pgrep
    rule killed it), listening on a port of its own and holding no GPU, so the sweep can run."""
    from fleet.sweep.controller import start_sweep

    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    listen = "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 31000)); s.listen(); time.sleep(900)"
    start = f'cd /tmp && setsid env -u FLEET_SERVICE {sys.executable} -c "{listen}" -m sglang.launch_server --port 31000 >/dev/null 2>&1 </dev/null &'
    fleet.exec(host, ["sh", "-c", start])

    def colleague() -> list[str]:
        return [cmd for cmd in fleet.processes(host).values() if "sglang.launch_server --port 31000" in cmd]

    wait = time.monotonic() + 30
    while not colleague():
        assert time.monotonic() < wait, "the colleague's server never started"
        time.sleep(0.2)
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02})))
    provisioned: list = []
    outcome = start_sweep(REPO / "playbooks" / "demo.yaml", hosts, tmp_path / "results", poll_interval_s=0.5, on_provisioned=provisioned.extend)
    assert outcome.statuses["ct200"].phase == "finished"
    assert [r.status for r in provisioned] == ["changed"] and "clear" not in actions(provisioned[0])
    assert len(colleague()) == 1, fleet.processes(host)


def test_hub_fetch_gets_the_token_in_its_environment_only(test_fleet_factory, tmp_path: Path) -> None:
    """No hub is reachable here: the engine's Python is replaced by a recorder that fails like an
    unreachable hub. What is checked is everything fleet does around huggingface_hub."""
    from fleet.connect import transport_for
    from fleet.provision.models import ensure_cached, read_state
    from fleet.errors import ModelError

    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    recorder = host.persistent_path("/var/lib/fleet/bin/python")
    recorder.parent.mkdir(parents=True)
    recorder.write_text(
        "#!/bin/sh\n"
        "printf '%s\\n' \"$@\" > /var/lib/fleet/python-call.txt\n"
        "env | grep -c '^HF_TOKEN=hf_secret_123$' >> /var/lib/fleet/python-call.txt\n"
        "echo \"OSError: We couldn't connect to 'https://huggingface.co'\" >&2\n"
        "exit 1\n"
    )
    recorder.chmod(0o755)
    (inventory_host,) = load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"kind": "sglang", "python": "/var/lib/fleet/bin/python"}))
    model = load_playbook(make_playbook(tmp_path)).model.model_copy(update={"mirror": None})
    transport = transport_for(inventory_host)
    try:
        state = read_state(transport, model, inventory_host)
        with pytest.raises(ModelError, match="couldn't connect to 'https://huggingface.co'"):
            ensure_cached(
                transport, model, inventory_host, state, dry_run=False, mirror_root=tmp_path,
                transfer=lambda action: action(), timeout=60, secrets={"HF_TOKEN": "hf_secret_123"},
            )  # fmt: skip
        call = fleet.exec(host, ["cat", "/var/lib/fleet/python-call.txt"]).stdout.splitlines()
        assert call[0] == "-c" and call[-4:-1] == ["Qwen/Qwen3.6-27B", "main", "/srv/models/Qwen--Qwen3.6-27B/main"]
        assert not any("hf_secret_123" in line for line in call[:-1])  # never an argument
        assert call[-1] == "1"  # but in the environment of the fetch
        fetch_log = fleet.exec(host, ["cat", "/srv/models/Qwen--Qwen3.6-27B/main.fetch.log"]).stdout
        assert "hf_secret_123" not in fetch_log and "fleet-exit=1" in fetch_log
        assert read_state(transport, model, inventory_host).cached is None  # nothing counts as fetched
    finally:
        transport.close()


def test_a_reboot_while_the_draft_is_staged_restages_the_target_it_wiped(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    target, draft = make_mirror(tmp_path / "mirror" / "qwen36"), make_mirror(tmp_path / "mirror" / "dflash")
    playbook = tmp_path / "two-models.yaml"
    playbook.write_text(
        yaml.safe_dump(
            {
                "name": "two-models",
                "model": {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "card": "qwen3.6-27b", "mirror": str(target)},
                "drafts": {"dflash": {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main", "card": "qwen3.6-27b-dflash", "mirror": str(draft)}},
                "methods": {"dflash": {"algorithm": "DFLASH", "draft": "dflash", "num_draft_tokens": 16}},
                "tp": [1],
                "workloads": {"short": {"kind": "short", "prompts": ["fib"]}},
            }
        )
    )
    staged_draft = "/dev/shm/fleet/z-lab--Qwen3.6-27B-DFlash--main"
    # The draft's copy (the stage script's `cp -a SRC DST.partial`) long enough to reboot under it;
    # the target's copies, before and after, need no time and take none (each of the stage's two
    # cp's slept 3 s: 18 s of the test).
    slow_disk(host, 3, only=f"{staged_draft}.partial")
    target_staged_first: list[bool] = []

    def reboot() -> None:
        target_staged_first.append(fleet.exec(host, ["test", "-e", f"{STAGED}/.fleet-complete.json"]).returncode == 0)
        fleet.reboot(host)

    watcher, rebooted = when_staging(fleet, host, staged_draft, reboot, timeout=90)
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts")))
    report = provision(hosts, load_playbook(playbook), ProvisionOptions())[0]
    watcher.join(timeout=100)
    assert rebooted.is_set(), "the draft's staging was never seen"
    assert target_staged_first == [True]  # the reboot came after the target's copy was complete
    assert report.status == "changed", report.reason
    assert [c.detail.split(" -> ")[1] for c in report.changes if c.action == "stage"] == [STAGED, staged_draft, STAGED]
    for staged in (STAGED, staged_draft):  # both copies complete on the new boot
        listing = fleet.exec(host, ["ls", "-a", staged]).stdout.split()
        assert ".fleet-complete.json" in listing and "model-00001-of-00002.safetensors" in listing, (staged, listing)
