"""One controller per sweep: a lock on its folder (results/<sweep-id>/).

Two controllers on one sweep (two `fleet sweep --resume ID` at once, or a resume beside the
start) each read the other's agent as "already running", give its hosts up, run repairs nowhere
and release leases under each other's agents: the sweep is damaged for good. The lock is an
`flock` on `controller.lock` in the folder, held for the controller's life: the kernel drops it
when the process ends however it ends (kill -9 included), so a lock is never left held by a
controller that is gone. Beside it, `controller.json` names the holder (pid, the process's start
time, host, when, what for) for the message that refuses a second controller; where it names a
process that no longer holds the lock (gone, or its pid reused by another process since), the
lock is taken over and that is said.

The lock's descriptor is not inherited by the controller's children (ssh, rsync, an ssh
ControlMaster that outlives the controller): one that was would keep the lock after the
controller ended.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from fleet.host.atomic import write_json_atomic
from fleet.errors import SweepBusy

log = logging.getLogger("fleet.sweep")

LOCK_FILE = "controller.lock"  # the flock, never written
HOLDER_FILE = "controller.json"  # who holds it, for messages only

# The holder writes controller.json just after it takes the flock: a second controller that finds
# the flock held and no (or an older) holder named waits this long for the name before it says so.
_NAME_WAIT_S = 1.0


@dataclass(frozen=True)
class Holder:
    """A process, as it can be told apart from a later one that got the same pid."""

    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22: clock ticks after boot
    boot_id: str
    host: str
    since: float  # wall time it took the lock
    purpose: str  # "start", "--resume", "--cancel"

    @classmethod
    def me(cls, purpose: str) -> Holder:
        pid = os.getpid()
        return cls(pid, process_start_ticks(pid) or 0, _boot_id(), socket.gethostname(), time.time(), purpose)

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)

    @classmethod
    def from_file(cls, path: Path) -> Holder | None:
        """The holder the file names, None where there is none or it cannot be read (small: read whole)."""
        try:
            data = json.loads(path.read_bytes()[:4096])
            return cls(int(data["pid"]), int(data["start_ticks"]), str(data["boot_id"]), str(data["host"]), float(data["since"]), str(data["purpose"]))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def alive(self) -> bool | None:
        """Whether this very process still runs: False when its pid is gone or now names another
        process (another start time, or another boot); None where that cannot be told from here
        (it ran on another machine, sharing the results folder)."""
        if self.host != socket.gethostname():
            return None
        if self.boot_id != _boot_id():
            return False
        return process_start_ticks(self.pid) == self.start_ticks

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host} ({self.purpose}, since {when})"


def process_start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks after boot), None for no such process. After the
    command name, which may hold spaces and parentheses: field 22 of /proc/<pid>/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class SweepLock:
    """The lock on one sweep folder, held until `release` (or the process's end)."""

    def __init__(self, directory: Path, fd: int, holder: Holder, took_over: Holder | None) -> None:
        self.directory = directory
        self._fd: int | None = fd
        self.holder = holder
        self.took_over = took_over  # the gone controller whose lock this was, if any

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Named holder out first: a controller that finds the flock free finds no stale name."""
        if self._fd is None:
            return
        try:
            (self.directory / HOLDER_FILE).unlink(missing_ok=True)
        except OSError:
            pass  # a stale name is said and taken over by the next controller, never trusted
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> SweepLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        self.release()


def lock_sweep(directory: Path, purpose: str) -> SweepLock:
    """Take the controller's lock on `directory` (an existing sweep folder), or raise SweepBusy
    naming the controller that holds it. Touches nothing outside the folder."""
    # os.open's descriptors are close-on-exec (PEP 446): no ssh or rsync child inherits the lock.
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SweepBusy(_busy_message(directory)) from None
    except BaseException:
        os.close(fd)
        raise
    stale = Holder.from_file(directory / HOLDER_FILE)
    me = Holder.me(purpose)
    try:
        write_json_atomic(directory / HOLDER_FILE, me.to_json())
    except BaseException:
        os.close(fd)  # the flock goes with it
        raise
    if stale is not None:
        # The flock was free, so the controller it names ended without tidying up (killed, crashed).
        log.warning("%s: took over the lock of controller %s: %s", directory, stale.describe(), _why_stale(stale))
    return SweepLock(directory, fd, me, stale)


def _why_stale(holder: Holder) -> str:
    alive = holder.alive()
    if alive is None:
        return "it ran on another machine and holds the lock no more"
    if alive:
        return "it holds the lock no more"
    if holder.boot_id != _boot_id():
        return "this machine rebooted since"
    if process_start_ticks(holder.pid) is None:
        return "its process is gone"
    return f"pid {holder.pid} is another process now"


def _busy_message(directory: Path) -> str:
    deadline = time.monotonic() + _NAME_WAIT_S
    while True:
        holder = Holder.from_file(directory / HOLDER_FILE)
        if (holder is not None and holder.alive() is not False) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)  # the holder has the flock and is about to name itself
    who = holder.describe() if holder is not None else "a controller that has not named itself yet"
    return f"{directory}: another controller drives this sweep: {who}; nothing was done (wait for it, or stop it first)"
