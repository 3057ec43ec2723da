"""One host, at most two SSH connections per controller process: how they are shared.

The design (issue 12): a sweep's commands stay on paramiko (its per-call deadline, env staging and
host-key hints are what the rest of fleet relies on) and every OpenSSH process -- each rsync pull,
the bundle push, model copies -- goes through one OpenSSH ControlMaster per host. (A one-shot
command -- `fleet facts`, `status`, `fetch-logs` -- runs its commands through `ssh` instead and
starts no shared master: `one_shot` below; `fetch-logs`' calls to a host share a login of their
own, fleet.transport.openssh `shared_login`.) So a sweep makes one
paramiko login and one OpenSSH login per host; a reboot or a dropped link costs at most one new
login of each. Tunnelling rsync through paramiko instead would make one login in all, but it
would mean an rsync `-e` helper that speaks to a live paramiko session of another process; the
master is OpenSSH's own, battle-tested way of doing exactly this.

Paramiko: `SSHTransport.close()` parks its live connection here instead of closing it, and the
next transport for the same host and target takes it over (provisioning closes its transport,
the sweep driver opens its own a moment later). A parked connection is closed after `PARK_S`
idle seconds, and at exit.

OpenSSH: `ControlMaster=auto` under a private per-user directory (0700, owned by us, checked on
every use; short paths, as a socket path is limited to ~108 bytes), with `ControlPersist` so the
master outlives one rsync until the next. A socket whose master died is replaced by ssh itself
(it unlinks a socket that refuses connections). At exit, fleet stops the masters this process
started (and only those: a master another fleet process started keeps serving it); one that
outlives a killed controller exits by itself after `CONTROL_PERSIST_S` idle seconds.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from fleet.transport.target import SSHTarget
from fleet.errors import ControlDirError

log = logging.getLogger("fleet.transport")

C = TypeVar("C")

# A sweep's driver takes over provisioning's connection within seconds; fleet status/fetch-logs
# are separate processes and never see a parked connection.
PARK_S = 60.0
# How long an idle master waits for the next rsync (result pulls come every few seconds while a
# sweep runs); also the longest a master outlives a controller killed with SIGKILL.
CONTROL_PERSIST_S = 120
# Linux's sun_path is 108 bytes; ssh first binds "<ControlPath>.<16 random chars>" and renames.
MAX_SOCKET_PATH = 108 - 18
_MASTER_PID = re.compile(r"pid=(\d+)")
# How long a stopped master may take to exit (it answers `-O exit` first, then closes).
STOP_WAIT_S = 5.0


# --------------------------------------------------------------------------- one-shot commands

# A command that makes a call or two per host and exits (`fleet facts`, `status`, `fetch-logs`)
# gains nothing from the shared master: starting it, asking its pid after the transfer and
# stopping it at exit are three more ssh processes per host, a fifth of a nothing-changed fetch.
# (Where a host gets several calls at once, `fetch-logs`' journal dump and two pulls, a block
# shares one login through a master that is its own child: fleet.transport.openssh `shared_login`.)
# Nor from paramiko: importing it, Fabric and invoke, and its handshakes under one GIL, were most
# of what `fleet facts` took beyond 16 plain `ssh` logins (benchmarks/results/peers.md). Inside
# `one_shot()`, transfers and commands go through a master that already serves the host (a
# running sweep's: no new login) and otherwise connect on their own (ControlMaster=no), and
# commands run through the `ssh` client (fleet.transport.openssh), never paramiko.
_one_shot = False


@contextmanager
def one_shot() -> Iterator[None]:
    """What starts inside (in any thread) is one-shot (see above); also a decorator. Restored on the way out."""
    global _one_shot
    saved, _one_shot = _one_shot, True
    try:
        yield
    finally:
        _one_shot = saved


def is_one_shot() -> bool:
    return _one_shot


# --------------------------------------------------------------------------- paramiko parking


@dataclass
class _Parked(Generic[C]):
    conn: C
    since: float


class ConnectionPark(Generic[C]):
    """Live connections of closed transports, by key, waiting to be taken over.

    `close` closes one connection (it must not block for long); `is_live` says whether one is
    still worth handing out. Thread-safe: fan-out closes and opens transports from many threads.
    """

    def __init__(self, close: Callable[[C], None], is_live: Callable[[C], bool], park_s: float = PARK_S) -> None:
        self._close = close
        self._is_live = is_live
        self.park_s = park_s
        self._lock = threading.Lock()
        self._parked: dict[object, _Parked[C]] = {}
        self._reaper: threading.Timer | None = None

    def park(self, key: object, conn: C) -> None:
        if not self._is_live(conn):
            self._close(conn)
            return
        with self._lock:
            previous = self._parked.pop(key, None)
            self._parked[key] = _Parked(conn, time.monotonic())
            self._schedule_locked()
        if previous is not None:  # two transports of one host closed: keep the newer one
            self._close(previous.conn)

    def take(self, key: object) -> C | None:
        with self._lock:
            parked = self._parked.pop(key, None)
        if parked is None:
            return None
        if self._is_live(parked.conn):
            return parked.conn
        self._close(parked.conn)
        return None

    def close_all(self, wait_s: float = 2.0) -> None:
        """Close every parked connection, all at once (at exit: sixteen hosts must not cost
        sixteen goodbyes in a row), waiting at most `wait_s` in all."""
        with self._lock:
            parked, self._parked = list(self._parked.values()), {}
            if self._reaper is not None:
                self._reaper.cancel()
                self._reaper = None
        closers = [threading.Thread(target=self._close, args=(entry.conn,), daemon=True) for entry in parked]
        for closer in closers:
            closer.start()
        deadline = time.monotonic() + wait_s
        for closer in closers:
            closer.join(max(0.0, deadline - time.monotonic()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._parked)

    def _schedule_locked(self) -> None:
        if self._reaper is not None or not self._parked:
            return
        oldest = min(p.since for p in self._parked.values())
        delay = max(0.05, oldest + self.park_s - time.monotonic())
        self._reaper = threading.Timer(delay, self._reap)
        self._reaper.daemon = True
        self._reaper.start()

    def _reap(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._reaper = None
            expired = [k for k, p in self._parked.items() if now - p.since >= self.park_s]
            closing = [self._parked.pop(k).conn for k in expired]
            self._schedule_locked()
        for conn in closing:
            self._close(conn)


# --------------------------------------------------------------------------- OpenSSH masters


def control_dir_candidates(uid: int, runtime_dir: str | None) -> list[Path]:
    """Where the sockets may live, best first: $XDG_RUNTIME_DIR (per-user by design), else /tmp."""
    candidates = []
    if runtime_dir:
        candidates.append(Path(runtime_dir) / "fleet-ssh")
    candidates.append(Path("/tmp") / f"fleet-ssh-{uid}")
    return candidates


def ensure_private_dir(path: Path, uid: int) -> Path:
    """Create `path` (0700) or check that it is a real directory owned by `uid`, mode 0700."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ControlDirError(f"{path} is not a directory (a symlink or a file): not using it for SSH sockets")
    if info.st_uid != uid:
        raise ControlDirError(f"{path} belongs to uid {info.st_uid}, not {uid}: not using it for SSH sockets")
    if info.st_mode & 0o077:
        raise ControlDirError(f"{path} has mode {stat.S_IMODE(info.st_mode):o}, not 700: not using it for SSH sockets")
    return path


def socket_name(target: SSHTarget) -> str:
    """One name per distinct target: every field that changes the connection changes the name."""
    return hashlib.sha256(repr(target).encode()).hexdigest()[:16]


def control_options(control_path: str) -> list[str]:
    """The `ssh` options that share one master per target (pure; see module docstring)."""
    return [
        "-o", "ControlMaster=auto",
        "-o", f"ControlPath={control_path}",
        "-o", f"ControlPersist={CONTROL_PERSIST_S}",
    ]  # fmt: skip


class Masters:
    """The control sockets of this process; stops the masters it started, at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._disabled = False
        # control path -> (destination, pid of the master this process started, or None)
        self._used: dict[str, tuple[str, int | None]] = {}
        # control path -> held by the one transfer starting its master (`starting`)
        self._starting: dict[str, threading.Lock] = {}
        # socket name -> the socket of a one-shot block's own master (fleet.transport.openssh `shared_login`)
        self._block_masters: dict[str, str] = {}

    def control_path(self, target: SSHTarget) -> str | None:
        """The socket path for `target`, or None when no private directory can be had (then
        every OpenSSH process makes its own connection, as before, and a warning says why).
        Inside a one-shot block that logged in once for the host (`serve_block`), that login's."""
        with self._lock:
            if self._disabled:
                return None
            if block := self._block_masters.get(socket_name(target)):
                return block
            if self._dir is None:
                uid = os.getuid()
                problems = []
                for candidate in control_dir_candidates(uid, os.environ.get("XDG_RUNTIME_DIR")):
                    if len(str(candidate)) + 1 + 16 > MAX_SOCKET_PATH:
                        problems.append(f"{candidate}: path too long for a socket")
                        continue
                    try:
                        self._dir = ensure_private_dir(candidate, uid)
                        break
                    except (ControlDirError, OSError) as exc:
                        problems.append(str(exc))
                if self._dir is None:
                    self._disabled = True
                    log.warning("SSH connection sharing off: %s", "; ".join(problems))
                    return None
            return str(self._dir / socket_name(target))

    @contextmanager
    def serve_block(self, target: SSHTarget, path: str) -> Iterator[None]:
        """While the block runs, `target`'s OpenSSH processes go through the master on `path`."""
        name = socket_name(target)
        with self._lock:
            self._block_masters[name] = path
        try:
            yield
        finally:
            with self._lock:
                self._block_masters.pop(name, None)

    @contextmanager
    def starting(self, path: str) -> Iterator[None]:
        """Around a transfer that may start the master of `path`: with no socket there, one
        transfer at a time, so that a second one started at the same moment (a pull's two rsyncs
        run at once) waits and then shares the master the first made. With ControlMaster=auto both
        would log in, the second without sharing: one more login per pull after every reboot or
        dropped link (tests/integration/test_connections.py counts them)."""
        if os.path.exists(path):
            yield
            return
        with self._lock:
            gate = self._starting.setdefault(path, threading.Lock())
        with gate:
            yield

    def before_use(self, path: str) -> bool:
        """Whether a socket is there before a transfer (a master already serves it)."""
        return os.path.exists(path)

    def after_use(self, path: str, destination: str, existed: bool) -> None:
        """Record whose master serves `path` after a transfer: ours when the transfer found no
        socket (its ssh became the master), or when the master there was ours before (a reboot
        or a dropped link ended it and this transfer's ssh made the next one)."""
        with self._lock:
            known = self._used.get(path)
        if existed and known is not None and (known[1] is None or _running(known[1])):
            # Another process's master, or ours still alive: it served this transfer. Asking
            # `ssh -O check` after every transfer was two more processes per pull, a sweep's
            # largest per-pull cost after the rsyncs themselves (benchmarks/bench_sweep_scale.py).
            return
        if existed and known is None:
            with self._lock:
                self._used.setdefault(path, (destination, None))
            return
        pid = master_pid(path, destination)
        with self._lock:
            self._used[path] = (destination, pid)

    def stop_own(self) -> None:
        """`ssh -O exit` for each master this process started and that still has that pid."""
        with self._lock:
            used, self._used = dict(self._used), {}

        def stop(path: str, destination: str, pid: int) -> None:
            if master_pid(path, destination) != pid:
                return
            try:
                subprocess.run(_control_argv(path, "exit", destination), capture_output=True, timeout=5, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.debug("stopping ssh master %s: %s", path, exc)
                return
            # `-O exit` is answered before the master has exited and unlinked its socket: wait for
            # it, so that a caller (and the next controller) finds the socket gone, not half-gone.
            deadline = time.monotonic() + STOP_WAIT_S
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            if not _running(pid):
                try:
                    os.unlink(path)  # ours, and nothing listens on it any more
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.debug("removing ssh control socket %s: %s", path, exc)

        # All hosts at once: each stop is two local ssh calls, and a controller of many hosts exits now.
        stoppers = [threading.Thread(target=stop, args=(path, destination, pid), daemon=True) for path, (destination, pid) in used.items() if pid is not None and os.path.exists(path)]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join(10)


def _control_argv(path: str, command: str, destination: str) -> list[str]:
    # -F none: a control command talks to the local socket only; no config entry may redirect it.
    return ["ssh", "-F", "none", "-o", f"ControlPath={path}", "-O", command, destination]


def _running(pid: int) -> bool:
    """Whether `pid` is a live process: a zombie has exited (its socket is closed) but may wait
    for a parent that never reaps it (an init in a container)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rpartition(")")[2].split()[:1] != ["Z"]


def master_pid(path: str, destination: str) -> int | None:
    """The pid `ssh -O check` reports for the master on `path`, or None when none answers."""
    try:
        done = subprocess.run(_control_argv(path, "check", destination), capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _MASTER_PID.search(done.stderr + done.stdout)
    return int(match.group(1)) if done.returncode == 0 and match else None


MASTERS = Masters()
atexit.register(MASTERS.stop_own)
