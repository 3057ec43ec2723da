"""One login for a block of one-shot calls to a host (fleet.transport.openssh `shared_login`), over a
real SSH test host: `fleet fetch-logs` dumps a systemd host's journal and pulls its tree and its
results at once, three OpenSSH logins where one serves them all.

Logins are counted in the host's sshd log; the block's master is found by its socket path in the
process table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import pytest

from fleet.connect import ssh_target, transport_for
from fleet.errors import AuthenticationFailed
from fleet.inventory import Host, load_inventory
from fleet.transport.sharing import MASTERS, one_shot
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.testfleet


def logins(fleet, name: str) -> int:
    sshd_log = fleet[name].base / "log" / "sshd.log"
    return sum(1 for line in sshd_log.read_text(errors="replace").splitlines() if "Accepted publickey" in line)


def processes_naming(text: str) -> list[str]:
    """Command lines of the processes whose argv holds `text` (pgrep's own excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(text.encode() in arg for arg in argv):
                found.append(b" ".join(argv).decode(errors="replace"))
    return found


@pytest.fixture
def one_host(test_fleet_factory, tmp_path: Path):
    fleet = test_fleet_factory(["ct200"])
    (host,) = load_inventory(fleet.write_inventory(tmp_path / "hosts"))
    remote = fleet["ct200"].persistent_path("/var/lib/fleet/shared-login")
    remote.mkdir(parents=True)
    (remote / "a.log").write_text("a\n")
    return fleet, host


def command_and_two_pulls(host: Host, into: Path) -> tuple[str, str | None]:
    """What fetch-logs does on a systemd host, inside one block: a command, then two pulls at once.
    Returns the command's output and the socket path the block's processes used."""
    transport = transport_for(host)
    try:
        with one_shot(), transport.shared_login():
            path = MASTERS.control_path(ssh_target(host))
            said = transport.run("cat /var/lib/fleet/shared-login/a.log", timeout=60, check=True).stdout
            with ThreadPoolExecutor(2) as pool:
                pulls = [pool.submit(transport.rsync_pull, "/var/lib/fleet/shared-login/", into / side, timeout=60) for side in ("tree", "runs")]
                for pull in pulls:
                    pull.result().check()
        return said, path
    finally:
        transport.close()


def test_a_blocks_command_and_pulls_log_in_once_and_leave_no_master(one_host, tmp_path: Path) -> None:
    fleet, host = one_host
    shared = MASTERS.control_path(ssh_target(host))
    assert shared is not None and not Path(shared).exists()

    before = logins(fleet, "ct200")
    said, path = command_and_two_pulls(host, tmp_path)
    assert said == "a\n" and [(tmp_path / side / "a.log").read_text() for side in ("tree", "runs")] == ["a\n", "a\n"]
    assert logins(fleet, "ct200") == before + 1
    # The block's own socket, not the host's shared one (a sweep's ControlMaster=auto must never
    # take a master that goes away with the block); gone with its master when the block ended.
    assert path is not None and path != shared and path.startswith(shared)
    assert not Path(path).exists() and not Path(shared).exists() and processes_naming(path) == []

    # Without the block the same calls log in three times: what the block saves.
    transport = transport_for(host)
    try:
        before = logins(fleet, "ct200")
        with one_shot():
            transport.run("true", timeout=60, check=True)
            with ThreadPoolExecutor(2) as pool:
                for pull in [pool.submit(transport.rsync_pull, "/var/lib/fleet/shared-login/", tmp_path / side, timeout=60) for side in ("again-1", "again-2")]:
                    pull.result().check()
        assert logins(fleet, "ct200") == before + 3
    finally:
        transport.close()


def test_a_master_that_serves_the_host_already_serves_the_block(one_host, tmp_path: Path) -> None:
    """A running sweep's master (the host's shared socket) carries the block: no login at all."""
    fleet, host = one_host
    shared = MASTERS.control_path(ssh_target(host))
    assert shared is not None
    transport = transport_for(host)
    try:
        transport.rsync_pull("/var/lib/fleet/shared-login/", tmp_path / "sweep", timeout=60).check()  # a sweep's pull starts the master
        assert Path(shared).exists()
        before = logins(fleet, "ct200")
        said, path = command_and_two_pulls(host, tmp_path)
        assert said == "a\n" and path == shared and logins(fleet, "ct200") == before
        assert Path(shared).exists()  # the block leaves the sweep's master alone
    finally:
        transport.close()
        MASTERS.stop_own()
    assert not Path(shared).exists()


def test_a_refused_login_is_reported_as_without_the_block(one_host, tmp_path: Path) -> None:
    """The block's master cannot log in (a key the host does not know): the block's calls connect
    on their own and fail as they would without it, naming the host file's fields to check."""
    fleet, _ = one_host
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    (host,) = load_inventory(fleet.write_inventory(tmp_path / "stranger-hosts", identity_file=str(tmp_path / "stranger")))
    messages = []
    for block in (True, False):
        transport = transport_for(host)
        try:
            with one_shot(), transport.shared_login() if block else nullcontext():
                with pytest.raises(AuthenticationFailed) as refused:
                    transport.run("true", timeout=60)
            messages.append(str(refused.value))
        finally:
            transport.close()
    assert messages[0] == messages[1] and "identity_file" in messages[0]
    assert processes_naming(f"{MASTERS.control_path(ssh_target(host))}.") == []


# In a fresh interpreter: a block's master is started, then the controller is killed outright.
KILLED_IN_A_BLOCK = """
import os, signal, sys
from pathlib import Path
from fleet.connect import ssh_target, transport_for
from fleet.inventory import load_inventory
from fleet.transport.sharing import MASTERS, one_shot

(host,) = load_inventory(Path(sys.argv[1]))
transport = transport_for(host)
with one_shot(), transport.shared_login():
    print(MASTERS.control_path(ssh_target(host)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists() and not Path("/bin/setpriv").exists(), reason="util-linux's setpriv is not installed")
def test_a_killed_controller_takes_its_block_master_with_it(one_host, tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: the master dies with its parent (setpriv --pdeathsig), not
    holding a login to the host open for ever."""
    fleet, host = one_host
    done = subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_BLOCK, str(tmp_path / "hosts")],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr[-2000:]
    path = done.stdout.strip()
    assert path.startswith(str(MASTERS.control_path(ssh_target(host))) + ".")
    wait_for(lambda: processes_naming(path) == [], timeout=30, what="the block's master to exit")
    # ssh had no chance to remove its socket; nothing listens there, and the next block makes its own.
    said, _ = command_and_two_pulls(host, tmp_path)
    assert said == "a\n"
