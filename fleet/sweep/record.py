"""What a sweep folder records (results/<sweep-id>/sweep.json) and how it is found again: read by
`fleet sweep --resume`, `fleet status` and `fleet fetch-logs`. Apart from the controller so that the
commands that only read a sweep do not import the planner, provisioning and the fixes."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.config import read_input_file
from fleet.errors import ConfigError, ContractError
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import Shard, SweepDir
from fleet.host.contract.reader import parse_json, read_text
from fleet.inventory import NAME_PATTERN, Host, load_host, load_host_record
from fleet.layout import SWEEP_RECORD, SweepFolder, read_latest
from fleet.sweep.ledger import host_ledger
from fleet.transport.base import Transport
from fleet.errors import SweepError

if TYPE_CHECKING:
    from fleet.playbook import Playbook

# Makes each host's transport; tests pass fakes (fleet.transport.fake.FakeTransport).
Connect = Callable[[Host], Transport]


def new_sweep_id(playbook: Playbook, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{playbook.name}-{stamp}-{secrets.token_hex(2)}"


def latest_sweep(results_root: Path) -> str:
    """The sweep `results/LATEST` names (a ConfigError where it holds anything but a sweep id)."""
    latest = read_latest(results_root)
    if latest is None:
        raise SweepError(f"no sweep recorded in {results_root} yet (run `fleet sweep` first, or give --sweep ID)")
    return latest


# The playbook as the sweep ran it, in the sweep's folder: what a resume re-plans from.


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# sweep.json's state while its hosts are provisioned (no plan yet); then running, finished,
# incomplete or failed.
PROVISIONING = "provisioning"


@dataclass
class SweepRecord:
    """results/<id>/sweep.json: what a resume, `fleet status` and `fleet fetch-logs` need."""

    sweep_id: str
    playbook_name: str
    playbook_sha256: str
    hosts: list[str]
    excluded: dict[str, str] = field(default_factory=dict)  # host -> why it takes no part
    created_at: float = field(default_factory=time.time)
    state: str = "running"
    # The folder of the playbook as the user gave it: relative `mirror:` paths resolve against it,
    # on a resume too (the sweep's copy of the playbook lives elsewhere). "" in records made
    # before it was kept: those resolve against the sweep's directory, as they did.
    mirror_root: str = ""
    # How the plan was made, so that a resume re-plans the same servers (with the same ids) for its repairs.
    memory_check: bool = True
    # Hosts given up on (unreachable past limits.host_lost_after_s, or failed): never driven again,
    # on a resume neither; a pull brings back only their results of runs that ran nowhere else
    # (`LoadedSweep.given_up`), so a late result there cannot make a second one.
    lost: dict[str, str] = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)  # run id -> why no host ran it
    moves: list[dict[str, Any]] = field(default_factory=list)  # runs handed from one host to another
    # The playbook file the sweep started from (absolute; "" in records made before it was kept):
    # a resume runs the sweep's copy, and says so where this file changed or is gone.
    playbook_path: str = ""
    # The sweep's history across controllers (a resume is a new one): per host, the reboots, link
    # drops and agent restarts each controller saw, added up; every fix decided. summary.json
    # reports these, not what the last controller alone remembers.
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    fixes: list[dict[str, Any]] = field(default_factory=list)

    def add_history(self, seen: Mapping[str, Mapping[str, int]], fixes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
        """Add what one controller saw (host -> counter -> count, its fixes) to the record's
        history; returns the counts as they were before (what earlier controllers saw)."""
        earlier = {host: dict(counters) for host, counters in self.counts.items()}
        for host, counters in seen.items():
            total = self.counts.setdefault(host, {})
            for name, count in counters.items():
                total[name] = int(total.get(name, 0)) + int(count)
        for fix in fixes:
            if dict(fix) not in self.fixes:
                self.fixes.append(dict(fix))
        return earlier

    def save(self, directory: Path) -> None:
        write_json_atomic(directory / SWEEP_RECORD, self.__dict__)

    @classmethod
    def load(cls, directory: Path) -> SweepRecord:
        """sweep.json, checked: bounded, a JSON object of this record's fields, host names that
        are names (a record naming `../../../etc/passwd` would send readers out of the folder)."""
        path = directory / SWEEP_RECORD
        try:
            data = parse_json(read_input_file(path, "a sweep record (JSON)"), str(path))
            record = cls(**data) if isinstance(data, dict) else None
        except ContractError as exc:
            raise SweepError(f"{exc}: not a readable sweep record") from None
        except TypeError as exc:  # a field it does not have, or one missing
            raise SweepError(f"{path}: expected the fields of a sweep record, got {str(exc).split('(')[-1].rstrip(')')}") from None
        if record is None:
            raise SweepError(f"{path}: expected a JSON object (a sweep record), got {type(data).__name__}")
        if not isinstance(record.hosts, list):
            raise ConfigError(path, "hosts", "a list of host names", record.hosts)
        for i, name in enumerate(record.hosts):
            if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
                raise ConfigError(path, f"hosts[{i}]", f"a host name matching {NAME_PATTERN}", name)
        counts = record.counts
        if not isinstance(counts, dict) or not all(isinstance(c, dict) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in c.values()) for c in counts.values()):
            raise ConfigError(path, "counts", "host -> counter -> a count (non-negative integers)", counts)
        if not isinstance(record.fixes, list) or not all(isinstance(f, dict) for f in record.fixes):
            raise ConfigError(path, "fixes", "a list of fix records (objects)", record.fixes)
        return record

    def playbook_notes(self, directory: Path) -> list[str]:
        """What a resume says about its playbook: it runs the sweep's copy (`playbook.yaml`), never
        the file it started from, which may have changed or be gone since."""
        copy = SweepFolder(directory).playbook
        notes = []
        if self.playbook_path:
            original = Path(self.playbook_path)
            try:
                changed = file_sha256(original) != self.playbook_sha256 if original.is_file() else None
            except OSError:
                changed = None
            if changed is None:
                notes.append(f"{original}, the playbook this sweep started from, is gone: the sweep's copy runs ({copy})")
            elif changed:
                notes.append(f"{original} changed since this sweep started: the sweep's copy runs, as it started ({copy}); a new sweep runs the edited file")
        if copy.is_file() and file_sha256(copy) != self.playbook_sha256:
            notes.append(f"{copy}: not the playbook this sweep started from (its sha256 differs from {SWEEP_RECORD}'s): edited by hand? it runs as it is now")
        return notes


@dataclass(frozen=True)
class GivenUp:
    """A host the sweep gave up on (lost, failed): never driven again, but what it finished for
    runs that ran nowhere else stays its to bring back (`fleet fetch-logs`, a later resume)."""

    host: Host
    shard: Shard
    why: str
    # Result files a pull of it leaves on the host: runs it was given that went to another host
    # (a late result there would be a second one), as rsync --exclude patterns.
    excludes: tuple[str, ...]


@dataclass
class LoadedSweep:
    directory: Path
    record: SweepRecord
    hosts: dict[str, Host]
    shards: dict[str, Shard]
    given_up: dict[str, GivenUp] = field(default_factory=dict)

    @cached_property
    def playbook(self) -> Playbook:
        """The sweep's copy of its playbook, read when first asked: a resume re-plans from it;
        `fleet status` and `fleet fetch-logs` never need it (nor the import of the playbook model)."""
        from fleet.playbook import load_playbook

        return load_playbook(SweepFolder(self.directory).playbook)


def load_sweep(results_root: Path, sweep_id: str | None) -> LoadedSweep:
    """Everything recorded for a sweep (the latest when `sweep_id` is None)."""
    directory = results_root / (sweep_id or latest_sweep(results_root))
    if not directory.is_dir():
        raise SweepError(f"no sweep {directory.name} in {results_root}")
    record, hosts = recorded_hosts(directory)
    shards = {name: Shard.from_json(read_text(path), source=str(path)) for name in record.hosts if (path := directory / name / SweepDir.SHARD).exists()}
    # A host given up on is not driven again: what it brought back is kept, the rest ran
    # elsewhere, or nowhere (then its late results for those may still come back).
    given_up = {
        name: GivenUp(hosts[name], shard, record.lost[name], _elsewhere(directory, name, shard, record.not_run))
        for name, shard in shards.items() if name in record.lost
    }  # fmt: skip
    shards = {name: shard for name, shard in shards.items() if name not in record.lost}
    return LoadedSweep(directory, record, {n: hosts[n] for n in shards}, shards, given_up)


def recorded_hosts(directory: Path) -> tuple[SweepRecord, dict[str, Host]]:
    """A sweep's record and its hosts as it recorded them (hosts/<name>.json), each checked:
    SweepError or ConfigError naming the file and the field."""
    record = SweepRecord.load(directory)
    folder = SweepFolder(directory)
    return record, {name: load_host_record(folder.host_file(name)) for name in record.hosts}


def _elsewhere(directory: Path, name: str, shard: Shard, not_run: Mapping[str, str]) -> tuple[str, ...]:
    """Result files of a given-up host's shard that a pull must not bring: runs without a result
    pulled here that are not named as run nowhere (they moved to another host)."""
    runs = [run.run_id for _, run in shard.runs]
    ledger = host_ledger(directory, name, runs)
    ledger.refresh()
    pulled = ledger.present
    return tuple(sorted(f"/{SweepDir.RUNS}/{run_id}.json" for run_id in runs if run_id not in pulled and run_id not in not_run))


# How a host is reached, as against what it is: on a resume these follow the host's file in the
# inventory (a host given a new address is reached there), the rest stays as the sweep recorded it.
REACH_FIELDS = ("address", "ssh_alias", "port", "user", "identity_file", "known_hosts", "host_key_policy")


@dataclass(frozen=True)
class HostMove:
    """A host of a sweep that its file in the inventory now reaches another way."""

    recorded: Host
    current: Host  # the recorded host, reached as its file says now
    source: Path  # the host file

    def describe(self) -> str:
        return f"{self.recorded.name}: moved from {_where(self.recorded)} to {_where(self.current)} ({self.source})"


def _where(host: Host) -> str:
    return f"{host.user + '@' if host.user else ''}{host.ssh_target_name}:{host.port}"


def moved_hosts(hosts_dir: Path, recorded: Mapping[str, Host]) -> list[HostMove]:
    """The sweep's hosts whose file in `hosts_dir` reaches them another way than the sweep recorded
    (address, port, user, ssh alias, key); a host whose file is gone is reached as recorded. A file
    that changed the host's work dir along with its address may name another machine: a SweepError
    that says what to change (the sweep's results on the host are in the recorded work dir)."""
    moves = []
    for name, host in recorded.items():
        path = next((p for p in (hosts_dir / f"{name}.yaml", hosts_dir / f"{name}.yml") if p.is_file()), None)
        if path is None:
            continue
        now = load_host(path)
        changed = {key: getattr(now, key) for key in REACH_FIELDS if getattr(now, key) != getattr(host, key)}
        if not changed:
            continue
        if now.paths.work_dir != host.paths.work_dir:
            raise SweepError(
                f"{path}: {name} moved from {_where(host)} to {_where(now)} and its paths.work_dir from {host.paths.work_dir} to "
                f"{now.paths.work_dir}: the sweep's results there are under {host.paths.work_dir}; to resume at the new address put "
                f"paths.work_dir back, to resume at the old one put the address back; nothing was done"
            )
        moves.append(HostMove(host, host.model_copy(update=changed), path))
    return moves
