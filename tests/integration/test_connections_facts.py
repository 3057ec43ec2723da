"""Facts and one-shot transfers over a real SSH test host. The engine probe's cache lives on the host, per boot.

The first gather imports torch with the engine's Python and leaves its report in the host's
~/.cache/fleet/engine-probe/; the next gather reads it from there (shown by marking the cached
report); a reboot (a new boot id) makes the probe run again. Both gathers share one connection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.connect import host_paths, ssh_target, transport_for
from fleet.facts.engine_probe import CACHE_SEPARATOR
from fleet.facts.gather import gather_facts
from fleet.inventory import load_inventory
from fleet.transport.sharing import one_shot
from fleet.transport.sharing import MASTERS

pytestmark = pytest.mark.testfleet


def test_the_engine_probe_is_cached_on_the_host_until_it_reboots(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    (host,) = load_inventory(fleet.write_inventory(tmp_path / "hosts"))
    cache_dir = fleet["ct200"].persistent_path("/root/.cache/fleet/engine-probe")
    transport = transport_for(host)
    try:
        first = gather_facts(transport, host_paths(host), host.engine.python)
        assert first.engine is not None and first.engine.python_version, first.problems
        (cached,) = cache_dir.glob("*.txt")
        key, separator, text = cached.read_text().partition(CACHE_SEPARATOR)
        report = json.loads(text)
        assert report["python_version"] == first.engine.python_version
        cached.write_text(key + separator + json.dumps({**report, "torch_version": "from-the-host-cache"}))

        again = gather_facts(transport, host_paths(host), host.engine.python)
        assert again.engine is not None and again.engine.torch_version == "from-the-host-cache"

        fleet.reboot("ct200")
        rebooted = gather_facts(transport, host_paths(host), host.engine.python)
        assert rebooted.boot_id != first.boot_id
        assert rebooted.engine is not None and rebooted.engine.torch_version == first.engine.torch_version
    finally:
        transport.close()


def test_a_one_shot_transfer_uses_a_serving_master_and_starts_none(test_fleet_factory, tmp_path: Path) -> None:
    """`fleet fetch-logs` makes one rsync per host, `fleet facts` and `status` one command
    (`one_shot`): a master of its own would cost three ssh processes more per host. Each call logs
    in once where no master serves, leaves none behind, and logs in not at all through a master
    that serves already (a sweep's)."""
    fleet = test_fleet_factory(["ct200"])
    (host,) = load_inventory(fleet.write_inventory(tmp_path / "hosts"))
    sshd_log = fleet["ct200"].base / "log" / "sshd.log"

    def logins() -> int:
        return sum(1 for line in sshd_log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)

    remote = fleet["ct200"].persistent_path("/var/lib/fleet/one-shot")
    remote.mkdir(parents=True)
    (remote / "a.log").write_text("a\n")
    target = ssh_target(host)
    socket = MASTERS.control_path(target)
    assert socket is not None and not Path(socket).exists()
    transport = transport_for(host)
    try:
        before = logins()
        with one_shot():
            transport.rsync_pull("/var/lib/fleet/one-shot/", tmp_path / "first", timeout=60).check()
            assert (tmp_path / "first" / "a.log").read_text() == "a\n"
            assert logins() == before + 1 and not Path(socket).exists()
            assert transport.run("cat /var/lib/fleet/one-shot/a.log", timeout=60, check=True).stdout == "a\n"  # over ssh, its own login
            assert logins() == before + 2 and not Path(socket).exists()

        transport.rsync_pull("/var/lib/fleet/one-shot/", tmp_path / "second", timeout=60).check()  # starts a master
        assert Path(socket).exists() and logins() == before + 3
        (remote / "b.log").write_text("b\n")
        with one_shot():
            transport.rsync_pull("/var/lib/fleet/one-shot/", tmp_path / "second", timeout=60).check()
            assert (tmp_path / "second" / "b.log").read_text() == "b\n" and logins() == before + 3
            assert transport.run("cat /var/lib/fleet/one-shot/b.log", timeout=60, check=True).stdout == "b\n"  # through the master
            assert logins() == before + 3
    finally:
        transport.close()
        MASTERS.stop_own()
    assert not Path(socket).exists()


# In a fresh interpreter: what a transfer and then a command load of the SSH libraries.
TRANSFER_THEN_COMMAND = """
import sys
from pathlib import Path
from fleet.connect import transport_for
from fleet.inventory import load_inventory
from fleet.transport.sharing import one_shot

(host,) = load_inventory(Path(sys.argv[1]))
transport = transport_for(host)
ssh_libraries = lambda: sorted({"paramiko", "fabric", "invoke"} & set(sys.modules))
with one_shot():
    transport.rsync_pull("/var/lib/fleet/pulled/", Path(sys.argv[2]), timeout=60).check()
    print("after the pull:", ssh_libraries())
    print("a one-shot command says:", transport.run("echo hello", timeout=60, check=True).stdout.strip())
    print("after a one-shot command:", ssh_libraries())
print("a sweep's command says:", transport.run("echo hello", timeout=60, check=True).stdout.strip())
print("after a sweep's command:", ssh_libraries())
transport.close()
"""


def test_one_shot_calls_load_no_paramiko_and_a_sweeps_command_does(test_fleet_factory, tmp_path: Path) -> None:
    """A pull is OpenSSH's rsync, and a one-shot command (`fleet facts`, `status`, `fetch-logs`)
    goes through the `ssh` client: they never import paramiko, Fabric nor invoke (a third of a
    nothing-changed fetch); the first command outside `one_shot` (a sweep's) does."""
    fleet = test_fleet_factory(["ct200"])
    hosts = fleet.write_inventory(tmp_path / "hosts")
    remote = fleet["ct200"].persistent_path("/var/lib/fleet/pulled")
    remote.mkdir(parents=True)
    (remote / "agent.log").write_text("pulled\n")
    done = subprocess.run(
        [sys.executable, "-c", TRANSFER_THEN_COMMAND, str(hosts), str(tmp_path / "local")],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "local" / "agent.log").read_text() == "pulled\n"
    assert done.stdout.splitlines() == [
        "after the pull: []",
        "a one-shot command says: hello",
        "after a one-shot command: []",
        "a sweep's command says: hello",
        "after a sweep's command: ['fabric', 'invoke', 'paramiko']",
    ]
