"""The host's lease: which sweep may use a host's GPUs and ports now. One per host, in
`<work_dir>/lease.json`, read and written only under an flock of `<work_dir>/lease.lock`.

Without it two sweeps aimed at one host both plan GPUs 0-1 on port 30000, one agent kills the
other's server as "stale" (it carries fleet's marker) and runs are measured on the other sweep's
server. So a controller takes the lease before provisioning clears stale servers, the agent takes
it again when it starts (its pid becomes the holder) and heartbeats it while it runs, hands it back
to the controller when it ends, and the controller releases it at the sweep's end.

The freshness rule (`Lease.dead_reason`): a lease is live while its heartbeat is younger than its
TTL and, on the boot it was last heartbeated on, its holder process (the agent) exists. After a
reboot only the heartbeat counts: the controller is re-staging and will restart its agent. A dead
lease is taken over, and the takeover is said (to the taker's log and in its reply). A lease is
always re-taken by its own sweep (`fleet sweep --resume`, a repair round, a re-provision after a
reboot).

`fleet provision` outside a sweep takes a lease of its own (no sweep id) for as long as it runs.

Before any fleet code is on a host the controller runs this module as `python - acquire ...`
with `remote_program()` on stdin: it carries the few modules the module needs, inline.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fleet.host import procfs
from fleet.host.atomic import write_json_atomic
from fleet.host.contract.reader import Reader
from fleet.host.errors import ContractError
from fleet.host.errors import LeaseHeld, LeaseLost

log = logging.getLogger("fleet.host.lease")

LEASE_SCHEMA = "fleet.host_lease/1"
LEASE_FILE = "lease.json"
LOCK_FILE = "lease.lock"

# An agent heartbeats every AGENT_HEARTBEAT_S; a lease it holds is dead AGENT_TTL_S after its
# last heartbeat (or at once, on the same boot, when its process is gone). Handed back at the
# agent's end, it stays live that long too: long enough for the controller to start a repair round.
AGENT_HEARTBEAT_S = 10.0
AGENT_TTL_S = 120.0
# From a controller's take until its agent's first heartbeat: provisioning (a model fetch may be
# long), planning, shipping. A controller killed meanwhile blocks the host this long at most.
CONTROLLER_TTL_S = 900.0

# `python - acquire`: exit codes. EXIT_HELD is the agent's own AgentExit.HOST_HELD (contract/exits.py;
# not imported: this module runs on hosts as a carried program of few modules).
EXIT_TAKEN, EXIT_ERROR, EXIT_HELD = 0, 1, 3


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


@dataclass(frozen=True)
class Claim:
    """Who asks for the lease: a sweep (its id) or a `fleet provision` (sweep_id "")."""

    sweep_id: str
    owner: str  # user@controller-host
    controller_pid: int

    @property
    def key(self) -> str:
        """What makes a lease one's own: the sweep; a provision by its controller process."""
        return self.sweep_id or f"provision:{self.owner}:{self.controller_pid}"


@dataclass(frozen=True)
class Lease:
    """`lease.json`."""

    sweep_id: str  # "" for `fleet provision`
    owner: str
    controller_pid: int
    taken_at: float
    heartbeat_at: float
    ttl_s: float
    boot_id: str  # the host's boot at the last heartbeat
    holder_pid: int | None  # the agent's pid while it runs; None: held by the controller

    @property
    def claim(self) -> Claim:
        return Claim(self.sweep_id, self.owner, self.controller_pid)

    @property
    def key(self) -> str:
        return self.claim.key

    def dead_reason(self, now: float, boot_id: str, alive: Callable[[int], bool]) -> str | None:
        """None while the lease is live; else why it is dead (for the takeover's log line)."""
        age = now - self.heartbeat_at
        if age >= self.ttl_s:
            return f"its heartbeat is {age:.0f} s old (TTL {self.ttl_s:.0f} s)"
        if self.holder_pid is not None and self.boot_id == boot_id and not alive(self.holder_pid):
            return f"its agent (pid {self.holder_pid}) is gone"
        return None

    def describe(self, now: float) -> str:
        """The holder as a person reads it: what, whose, since when, how fresh."""
        what = f"sweep {self.sweep_id}" if self.sweep_id else "`fleet provision`"
        holder = f"agent pid {self.holder_pid}" if self.holder_pid is not None else "no agent yet"
        return (
            f"{what} of {self.owner} (controller pid {self.controller_pid}; {holder}), held since {_utc(self.taken_at)}, "
            f"heartbeat {max(0.0, now - self.heartbeat_at):.0f} s ago (live until {self.ttl_s:.0f} s without one)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": LEASE_SCHEMA,
            "sweep_id": self.sweep_id,
            "owner": self.owner,
            "controller_pid": self.controller_pid,
            "taken_at": self.taken_at,
            "heartbeat_at": self.heartbeat_at,
            "ttl_s": self.ttl_s,
            "boot_id": self.boot_id,
            "holder_pid": self.holder_pid,
        }

    @classmethod
    def from_json(cls, text_or_data: str | bytes | dict[str, Any], source: str = LEASE_FILE) -> Lease:
        r = Reader.of(text_or_data, source)
        r.schema(LEASE_SCHEMA)
        return cls(
            sweep_id=r.get("sweep_id", str),
            owner=r.text("owner"),
            controller_pid=r.get("controller_pid", int),
            taken_at=r.get("taken_at", float),
            heartbeat_at=r.get("heartbeat_at", float),
            ttl_s=r.number("ttl_s"),
            boot_id=r.get("boot_id", str),
            holder_pid=r.optional("holder_pid", int),
        )


@dataclass(frozen=True)
class Taken:
    lease: Lease
    took_over: Lease | None = None  # the dead lease taken over, if any
    reason: str | None = None  # why it was dead

    def to_json(self) -> dict[str, Any]:
        return {"lease": self.lease.to_json(), "took_over": self.took_over.to_json() if self.took_over else None, "reason": self.reason}


# ------------------------------------------------------------------------------ on the host


class HostLease:
    """The lease file of one host's work dir. Every read-decide-write holds the flock."""

    def __init__(
        self,
        work_dir: Path | str,
        *,
        clock: Callable[[], float] = time.time,
        boot_id: Callable[[], str] = procfs.boot_id,
        alive: Callable[[int], bool] = procfs.pid_alive,  # a zombie agent holds nothing
    ) -> None:
        self.dir = Path(work_dir)
        self.path = self.dir / LEASE_FILE
        self._clock, self._boot_id, self._alive = clock, boot_id, alive

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for milliseconds: a plain wait
            yield
        finally:
            os.close(fd)  # closing drops the lock

    def read(self) -> Lease | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        return Lease.from_json(text, str(self.path))

    def _current(self) -> tuple[Lease | None, str | None]:
        """The lease on file, or (None, why) where the file cannot be read: written atomically, so
        only a hand edit or another fleet's schema gets there; taken over, and said."""
        try:
            return self.read(), None
        except (ContractError, OSError) as exc:
            return None, f"{self.path} is unreadable ({exc})"

    def acquire(self, claim: Claim, *, agent_pid: int | None = None, host: str = "") -> Taken:
        """Take the lease for `claim` (the agent passes its pid: it becomes the holder). Raises
        `LeaseHeld` when another claim's lease is live."""
        with self._locked():
            now, boot = self._clock(), self._boot_id()
            current, unreadable = self._current()
            took_over, reason = None, unreadable
            owner, controller_pid = claim.owner, claim.controller_pid
            if current is not None and current.key == claim.key:
                holder = agent_pid
                if holder is None and current.holder_pid is not None and current.boot_id == boot and self._alive(current.holder_pid):
                    holder = current.holder_pid  # the controller re-takes while its agent runs: the agent stays the holder
                if agent_pid is not None:
                    owner, controller_pid = current.owner, current.controller_pid  # the agent knows no controller: the lease keeps its own
                taken_at = current.taken_at
            else:
                if current is not None:
                    reason = current.dead_reason(now, boot, self._alive)
                    if reason is None:
                        raise LeaseHeld(host or str(self.dir), current, now)
                    took_over = current
                holder, taken_at = agent_pid, now
            ttl = AGENT_TTL_S if holder is not None else CONTROLLER_TTL_S
            lease = Lease(claim.sweep_id, owner, controller_pid, taken_at, now, ttl, boot, holder)
            write_json_atomic(self.path, lease.to_json())
        if took_over is not None or unreadable:
            log.warning("took over the lease of %s: %s", took_over.describe(now) if took_over else "an unreadable file", reason)
        return Taken(lease, took_over, reason)

    def _update(self, key: str, change: Callable[[Lease, float, str], Lease]) -> Lease:
        with self._locked():
            now, boot = self._clock(), self._boot_id()
            current, unreadable = self._current()
            if current is None or current.key != key:
                held = unreadable or (f"now held by {current.describe(now)}" if current else "released")
                raise LeaseLost(f"{self.path}: the lease of {key} is lost: {held}")
            lease = change(current, now, boot)
            write_json_atomic(self.path, lease.to_json())
            return lease

    def heartbeat(self, key: str, agent_pid: int) -> Lease:
        """The agent, while it runs. Raises `LeaseLost` when the lease is no longer its sweep's."""
        return self._update(key, lambda lease, now, boot: replace(lease, heartbeat_at=now, boot_id=boot, holder_pid=agent_pid, ttl_s=AGENT_TTL_S))

    def hand_back(self, key: str) -> Lease:
        """The agent, at its end: the controller holds the lease again, live for AGENT_TTL_S."""
        return self._update(key, lambda lease, now, boot: replace(lease, heartbeat_at=now, boot_id=boot, holder_pid=None, ttl_s=AGENT_TTL_S))

    def release(self, key: str) -> bool:
        """Remove the lease if it is `key`'s (never another's); whether it was."""
        with self._locked():
            current, _ = self._current()
            if current is None or current.key != key:
                return False
            self.path.unlink(missing_ok=True)
            return True


# ------------------------------------------------------------------------------ the controller's call


def command_args(action: str, work_dir: str, claim: Claim) -> list[str]:
    """The arguments of `python - ACTION ...` (run with `remote_program()` on stdin)."""
    return [action, "--work-dir", work_dir, "--sweep-id", claim.sweep_id, "--owner", claim.owner, "--controller-pid", str(claim.controller_pid)]


# What the program carries, in import order: this module and what it imports of fleet.
_CARRIED = ("fleet/host/errors.py", "fleet/host/atomic.py", "fleet/host/procfs.py", "fleet/host/contract/reader.py", "fleet/host/contract/lease.py")
_PACKAGES = ("fleet", "fleet.host", "fleet.host.contract")
_BOOTSTRAP = """\
import sys, types
def _load(name, source, package=False):
    module = types.ModuleType(name)
    module.__file__ = "<fleet-lease:" + name + ">"
    if package:
        module.__path__ = []
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module
for _name in PACKAGES:
    _load(_name, "", package=True)
for _name, _source in SOURCES:
    _lease = _load(_name, _source)
sys.exit(_lease.main(sys.argv[1:]))
"""


def remote_program() -> bytes:
    """Python source (for `python -` on a host) that runs `main` of this module with no fleet code
    on the host: the carried modules, loaded from their text. Built on the controller."""
    root = Path(__file__).resolve().parents[3]
    sources = [(relative[:-3].replace("/", "."), (root / relative).read_text()) for relative in _CARRIED]
    return (f"PACKAGES = {_PACKAGES!r}\nSOURCES = {sources!r}\n" + _BOOTSTRAP).encode()


def answer(argv: Sequence[str], lease_of: Callable[[str], HostLease] = HostLease) -> tuple[int, str, str]:
    """What `python - acquire|release ...` answers: (exit code, stdout, stderr). `acquire` prints a
    `Taken` as JSON (exit 0) or the live lease and the host's clock (exit 3, the reason on stderr);
    `release` whether it released. Exit 1: the lease could not be read or written."""
    parser = argparse.ArgumentParser(prog="fleet-lease")
    parser.add_argument("action", choices=("acquire", "release"))
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--sweep-id", default="")
    parser.add_argument("--owner", required=True)
    parser.add_argument("--controller-pid", type=int, required=True)
    args = parser.parse_args(argv)
    lease = lease_of(args.work_dir)
    claim = Claim(args.sweep_id, args.owner, args.controller_pid)
    try:
        if args.action == "release":
            return EXIT_TAKEN, json.dumps({"released": lease.release(claim.key)}) + "\n", ""
        return EXIT_TAKEN, json.dumps(lease.acquire(claim).to_json()) + "\n", ""
    except LeaseHeld as exc:
        return EXIT_HELD, json.dumps({"held": exc.lease.to_json(), "now": exc.now}) + "\n", f"{exc}\n"
    except OSError as exc:
        return EXIT_ERROR, "", f"fleet-lease: {args.work_dir}: {exc}\n"


def main(argv: Sequence[str]) -> int:
    code, out, err = answer(argv)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


def parse_taken(stdout: str, source: str) -> Taken:
    """The reply of an `acquire` that took the lease."""
    r = Reader.of(_last_line(stdout), source)
    took_over = r.data.get("took_over")
    return Taken(
        Lease.from_json(r.child("lease").data, source),
        Lease.from_json(took_over, source) if took_over is not None else None,
        r.optional("reason", str),
    )


def parse_held(stdout: str, source: str, host: str) -> LeaseHeld:
    """The reply of an `acquire` refused (exit 3): the live lease, its age by the host's clock."""
    r = Reader.of(_last_line(stdout), source)
    return LeaseHeld(host, Lease.from_json(r.child("held").data, source), r.get("now", float))


def _last_line(stdout: str) -> str:
    lines = stdout.strip().splitlines()
    return lines[-1] if lines else ""
