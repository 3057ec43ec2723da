"""The pure and local parts of connection sharing (fleet/transport/sharing.py): the park of
paramiko connections, the private socket directory, the ssh options. The logins themselves are
counted on real test hosts in tests/integration/test_connections.py."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from fleet.transport.rsync import rsync_argv, ssh_argv
from fleet.transport.sharing import CONTROL_PERSIST_S, ConnectionPark, Masters, control_dir_candidates, control_options, ensure_private_dir, socket_name
from fleet.errors import ControlDirError
from fleet.transport.target import SSHTarget


class Conn:
    def __init__(self, name: str, live: bool = True) -> None:
        self.name, self.live, self.closed = name, live, threading.Event()


def park(park_s: float = 60.0) -> ConnectionPark[Conn]:
    return ConnectionPark(lambda c: c.closed.set(), lambda c: c.live and not c.closed.is_set(), park_s=park_s)


def test_a_parked_connection_is_taken_over_once_and_only_for_its_key() -> None:
    p, conn = park(), Conn("a")
    p.park(("ct200", 1), conn)
    assert p.take(("ct201", 1)) is None
    assert p.take(("ct200", 1)) is conn and not conn.closed.is_set()
    assert p.take(("ct200", 1)) is None


def test_a_dead_connection_is_closed_not_parked_and_the_newer_of_two_is_kept() -> None:
    p, dead, old, new = park(), Conn("dead", live=False), Conn("old"), Conn("new")
    p.park("k", dead)
    assert dead.closed.is_set() and len(p) == 0
    p.park("k", old)
    p.park("k", new)
    assert old.closed.is_set() and p.take("k") is new


def test_a_connection_that_died_while_parked_is_not_handed_out() -> None:
    p, conn = park(), Conn("a")
    p.park("k", conn)
    conn.live = False
    assert p.take("k") is None and conn.closed.is_set()


def test_an_idle_parked_connection_is_closed_after_the_park_time() -> None:
    p, conn = park(park_s=0.2), Conn("a")
    p.park("k", conn)
    assert conn.closed.wait(5), "the reaper closed it"
    assert len(p) == 0


def test_close_all_closes_every_parked_connection() -> None:
    p = park()
    conns = [Conn(str(i)) for i in range(16)]
    for i, conn in enumerate(conns):
        p.park(i, conn)
    p.close_all()
    assert all(c.closed.is_set() for c in conns) and len(p) == 0


def test_the_socket_directory_is_made_private_and_a_foreign_one_is_refused(tmp_path: Path) -> None:
    made = ensure_private_dir(tmp_path / "s", os.getuid())
    assert (made.stat().st_mode & 0o777) == 0o700
    assert ensure_private_dir(made, os.getuid()) == made  # ours already: fine
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    with pytest.raises(ControlDirError, match="mode 755"):
        ensure_private_dir(open_dir, os.getuid())
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(ControlDirError, match="symlink"):
        ensure_private_dir(link, os.getuid())
    with pytest.raises(ControlDirError, match="belongs to uid"):
        ensure_private_dir(made, os.getuid() + 1)


def test_sockets_go_to_the_runtime_dir_first_and_stay_short() -> None:
    assert control_dir_candidates(1000, "/run/user/1000") == [Path("/run/user/1000/fleet-ssh"), Path("/tmp/fleet-ssh-1000")]
    assert control_dir_candidates(0, None) == [Path("/tmp/fleet-ssh-0")]
    a, b = SSHTarget(address="10.0.0.1"), SSHTarget(address="10.0.0.1", identity_file=Path("/k"))
    assert len(socket_name(a)) == 16 and socket_name(a) != socket_name(b) and socket_name(a) == socket_name(SSHTarget(address="10.0.0.1"))


def test_rsync_goes_through_the_master_with_the_command_sessions_options() -> None:
    target = SSHTarget(address="10.0.0.1", port=2222, identity_file=Path("/k"), known_hosts=Path("/kh"))
    plain = ssh_argv(target)
    shared = ssh_argv(target, "/tmp/fleet-ssh-0/abc")
    assert shared[: len(plain)] == plain  # same key, known_hosts policy, timeouts
    assert shared[len(plain) :] == control_options("/tmp/fleet-ssh-0/abc")
    assert f"ControlPersist={CONTROL_PERSIST_S}" in shared and "ControlMaster=auto" in shared
    argv = rsync_argv("h:/a/", "/b", ssh=target, io_timeout_s=5, control_path="/tmp/fleet-ssh-0/abc")
    assert "ControlPath=/tmp/fleet-ssh-0/abc" in argv[argv.index("-e") + 1]


def test_the_reaper_does_not_close_a_connection_taken_back_in_time() -> None:
    p, conn = park(park_s=0.3), Conn("a")
    p.park("k", conn)
    assert p.take("k") is conn
    time.sleep(0.5)
    assert not conn.closed.is_set()


def test_transfers_that_may_start_a_master_go_one_at_a_time_until_its_socket_is_there(tmp_path: Path) -> None:
    """A pull's two rsyncs run at once: with no master yet, the second waits for the first (which
    makes the master) instead of logging in beside it; with the socket there, both run at once."""
    masters, path = Masters(), str(tmp_path / "socket")
    inside: list[str] = []
    first_in, release = threading.Event(), threading.Event()

    def first() -> None:
        with masters.starting(path):
            inside.append("first")
            first_in.set()
            release.wait(30)
            Path(path).touch()  # the first transfer's ssh became the master
            inside.append("first done")

    def second() -> None:
        with masters.starting(path):
            inside.append("second")

    one = threading.Thread(target=first)
    one.start()
    assert first_in.wait(30)
    two = threading.Thread(target=second)
    two.start()
    two.join(0.3)  # not a timing the test relies on: the order below is what it checks
    release.set()
    one.join(30)
    two.join(30)
    assert inside == ["first", "first done", "second"]
    # The socket is there: nobody waits.
    with masters.starting(path), masters.starting(path):
        pass


def test_a_transfer_through_our_live_master_asks_no_ssh_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ssh -O check` (a process) only where the master may have changed: after a transfer that
    found no socket, or one whose master of ours has died since (a reboot or a dropped link: the
    transfer's own ssh made the next master). A pull through our live master asks nothing."""
    import fleet.transport.sharing as sharing

    checks: list[str] = []
    pids = iter([4101, 4102])

    def check(path: str, destination: str) -> int | None:
        checks.append(path)
        return next(pids)

    alive = {4101}
    monkeypatch.setattr(sharing, "master_pid", check)
    monkeypatch.setattr(sharing, "_running", lambda pid: pid in alive)
    masters, path = Masters(), str(tmp_path / "socket")
    masters.after_use(path, "ct200", existed=False)  # this transfer started the master
    assert checks == [path]
    for _ in range(100):  # the sweep's pulls, through it
        masters.after_use(path, "ct200", existed=True)
    assert checks == [path]
    alive.clear()  # the master died (the host rebooted); the next transfer's ssh made a new one
    masters.after_use(path, "ct200", existed=True)
    assert checks == [path, path]
    alive.add(4102)
    masters.after_use(path, "ct200", existed=True)
    assert len(checks) == 2 and masters._used[path] == ("ct200", 4102)
    # Another process's master (found there, never ours) is never asked about either.
    other = str(tmp_path / "other")
    masters.after_use(other, "ct201", existed=True)
    masters.after_use(other, "ct201", existed=True)
    assert len(checks) == 2
