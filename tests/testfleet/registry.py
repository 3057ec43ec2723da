"""What every test fleet on this machine has created, so that none collide and leftovers can go.

Several pytest processes (of different engineers) build fleets at the same time. Each fleet
instance records itself in `/var/tmp/fleet-testfleet-<id>/state.json` before it creates anything,
while holding one machine-wide flock; slots (subnet 10.201.<slot>.0/24, namespace
`fleet-tf-<slot>`, veth `ftf<slot>h`) are chosen under that lock. An instance whose owner process
is gone is "dead": anyone may tear it down (`python -m tests.testfleet cleanup`, or the next fleet
start).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_ROOT = Path("/var/tmp")
INSTANCE_PREFIX = "fleet-testfleet-"
LOCK_FILE = STATE_ROOT / "fleet-testfleet.lock"
NETNS_PREFIX = "fleet-tf-"
SUBNET_PREFIX = "10.201"
SLOTS = range(1, 255)


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Readers (the fake GPU tools, other fleets' cleanup) never see half a file. No fsync: these
    files live as long as the fleet, and a machine crash takes the namespaces with them; fsync
    was half of a fleet's start-up time on a busy disk."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(temp, "w") as handle:
        handle.write(text)
    os.chmod(temp, mode)
    os.replace(temp, path)


def netns_name(slot: int) -> str:
    return f"{NETNS_PREFIX}{slot}"


def host_veth_name(slot: int) -> str:
    return f"ftf{slot}h"  # interface names are limited to 15 characters


def slot_address(slot: int, last_octet: int) -> str:
    return f"{SUBNET_PREFIX}.{slot}.{last_octet}"


def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def process_start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot; together with the pid it names one process for good."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def is_same_process(pid: int | None, start_time: int | None) -> bool:
    return pid is not None and start_time is not None and process_start_time(pid) == start_time


@dataclass
class HostRecord:
    name: str
    slot: int
    init_pid: int | None = None  # first process of the host's PID namespace, as the machine sees it
    init_start: int | None = None


@dataclass
class InstanceRecord:
    instance_id: str
    owner_pid: int
    owner_start: int
    hosts: list[HostRecord] = field(default_factory=list)

    @property
    def base(self) -> Path:
        return STATE_ROOT / f"{INSTANCE_PREFIX}{self.instance_id}"

    def owner_alive(self) -> bool:
        return is_same_process(self.owner_pid, self.owner_start)

    def save(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        write_atomic(self.base / "state.json", json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> InstanceRecord:
        raw = json.loads(path.read_text())
        return cls(
            instance_id=raw["instance_id"],
            owner_pid=raw["owner_pid"],
            owner_start=raw["owner_start"],
            hosts=[HostRecord(**h) for h in raw["hosts"]],
        )


@contextmanager
def registry_lock() -> Iterator[None]:
    with open(LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def instance_dirs() -> list[Path]:
    return sorted(STATE_ROOT.glob(f"{INSTANCE_PREFIX}*"))


def load_instances() -> tuple[list[InstanceRecord], list[Path]]:
    """Readable instance records, and instance directories without one (a start cut short)."""
    records, broken = [], []
    for directory in instance_dirs():
        try:
            records.append(InstanceRecord.load(directory / "state.json"))
        except (OSError, ValueError, KeyError, TypeError):
            broken.append(directory)
    return records, broken


OUR_NAMES = (rf"\b{NETNS_PREFIX}(\d+)\b", r"\bftf(\d+)h\b")
OUR_SUBNET = rf"\b{re.escape(SUBNET_PREFIX)}\.(\d+)\."


def slots_in(text: str, patterns: tuple[str, ...]) -> set[int]:
    return {int(n) for pattern in patterns for n in re.findall(pattern, text)}


def named_slots() -> set[int]:
    """Slots of namespaces and veths named the way test fleets name them."""
    return slots_in(run_ip("netns", "list", check=False).stdout + run_ip("-o", "link", check=False).stdout, OUR_NAMES)


def slots_seen_on_machine() -> set[int]:
    """Slots whose names or subnet are in use, whoever made them (ours, leftovers, other tools)."""
    addresses = run_ip("-o", "-4", "addr", check=False).stdout + run_ip("-4", "route", check=False).stdout
    return named_slots() | slots_in(addresses, (OUR_SUBNET,))


def claim_slots(instance_id: str, names: list[str]) -> InstanceRecord:
    """Record a new instance holding len(names) free slots; dead instances are removed first."""
    with registry_lock():
        reap_dead_locked()
        records, _ = load_instances()
        used = slots_seen_on_machine() | {h.slot for r in records for h in r.hosts}
        free = [s for s in SLOTS if s not in used]
        if len(free) < len(names):
            raise RuntimeError(f"test fleet: {len(names)} hosts asked for, only {len(free)} free slots in 10.201.0.0/16")
        record = InstanceRecord(
            instance_id=instance_id,
            owner_pid=os.getpid(),
            owner_start=process_start_time(os.getpid()) or 0,
            hosts=[HostRecord(name=name, slot=slot) for name, slot in zip(names, free)],
        )
        record.save()
        return record


def kill_host_processes(host: HostRecord, timeout: float = 10.0) -> None:
    """SIGKILL the PID namespace's first process: the kernel then kills everything in it."""
    pid, start = host.init_pid, host.init_start
    if pid is None or not is_same_process(pid, start):
        return
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    # The init turns zombie only after every process of its namespace is gone.
    while is_same_process(pid, start) and process_state(pid) != "Z":
        if time.monotonic() > deadline:
            raise RuntimeError(f"test host {host.name}: pid {pid} did not die within {timeout}s")
        time.sleep(0.005)


def ip_batch(commands: list[str]) -> subprocess.CompletedProcess:
    """Run many `ip` commands in one process; `-force` goes on past the ones that fail."""
    return subprocess.run(["ip", "-force", "-batch", "-"], input="".join(c + "\n" for c in commands), capture_output=True, text=True)


def remove_networks(slots: list[int]) -> None:
    if not slots:
        return
    # Anything still inside (a process that was never recorded, an `exec` that outlived its
    # timeout) goes first; `ip netns pids` lists only processes of that very namespace.
    for pid in ip_batch([f"netns pids {netns_name(s)}" for s in slots]).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Deleting the host side removes the pair even while something still pins the namespace.
    ip_batch([command for s in slots for command in (f"link del {host_veth_name(s)}", f"netns del {netns_name(s)}")])


def teardown_instance(record: InstanceRecord) -> None:
    errors = []
    for host in record.hosts:
        try:
            kill_host_processes(host)
        except RuntimeError as exc:
            errors.append(str(exc))
    remove_networks([h.slot for h in record.hosts])
    # A systemd test host (systemd_host.py) also has a cgroup tree named after its instance.
    from tests.testfleet.systemd_host import remove_instance_cgroups

    remove_instance_cgroups(record.instance_id)
    shutil.rmtree(record.base, ignore_errors=True)
    if errors:
        raise RuntimeError("; ".join(errors))


def reap_dead_locked() -> list[str]:
    """Tear down instances whose owner died, and our named leftovers no live instance claims."""
    removed = []
    records, broken = load_instances()
    live_slots: set[int] = set()
    for record in records:
        if record.owner_alive():
            live_slots.update(h.slot for h in record.hosts)
        else:
            teardown_instance(record)
            removed.append(f"instance {record.instance_id} (owner pid {record.owner_pid} is gone)")
    for directory in broken:
        # A start is cut short before its first save only while it holds the lock, which we hold.
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(f"unreadable instance dir {directory}")
    orphans = sorted(named_slots() - live_slots)
    remove_networks(orphans)
    removed += [f"orphan namespace/veth of slot {slot}" for slot in orphans]
    return removed


def cleanup_dead_instances() -> list[str]:
    with registry_lock():
        return reap_dead_locked()
