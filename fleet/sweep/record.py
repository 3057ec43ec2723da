"""What a sweep folder records (results/<sweep-id>/sweep.json) and how it is found again: read by
`fleet sweep --resume`, `fleet status` and `fleet fetch-logs`. Apart from the controller so that the
commands that only read a sweep do not import the planner, provisioning and the fixes."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.errors import FleetError
from fleet.host.atomic import write_json_atomic
from fleet.host.contract import Shard, SweepDir
from fleet.inventory import Host
from fleet.layout import LATEST, SWEEP_RECORD
from fleet.transport.base import Transport

if TYPE_CHECKING:
    from fleet.playbook import Playbook

# Makes each host's transport; tests pass fakes (fleet.transport.fake.FakeTransport).
Connect = Callable[[Host], Transport]


class SweepError(FleetError):
    pass


def new_sweep_id(playbook: Playbook, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{playbook.name}-{stamp}-{secrets.token_hex(2)}"


def latest_sweep(results_root: Path) -> str:
    try:
        return (results_root / LATEST).read_text().strip()
    except OSError:
        raise SweepError(f"no sweep recorded in {results_root} yet (run `fleet sweep` first, or give --sweep ID)") from None


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
    # Hosts given up on (unreachable past limits.host_lost_after_s, or failed): never driven or
    # pulled again, on a resume neither, so a late result there cannot make a second one.
    lost: dict[str, str] = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)  # run id -> why no host ran it
    moves: list[dict[str, Any]] = field(default_factory=list)  # runs handed from one host to another

    def save(self, directory: Path) -> None:
        write_json_atomic(directory / SWEEP_RECORD, self.__dict__)

    @classmethod
    def load(cls, directory: Path) -> SweepRecord:
        path = directory / SWEEP_RECORD
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise SweepError(f"{path}: not a readable sweep record ({exc})") from None


@dataclass
class LoadedSweep:
    directory: Path
    record: SweepRecord
    hosts: dict[str, Host]
    shards: dict[str, Shard]

    @cached_property
    def playbook(self) -> Playbook:
        """The sweep's copy of its playbook, read when first asked: a resume re-plans from it;
        `fleet status` and `fleet fetch-logs` never need it (nor the import of the playbook model)."""
        from fleet.playbook import load_playbook

        return load_playbook(self.directory / "playbook.yaml")


def load_sweep(results_root: Path, sweep_id: str | None) -> LoadedSweep:
    """Everything recorded for a sweep (the latest when `sweep_id` is None)."""
    directory = results_root / (sweep_id or latest_sweep(results_root))
    if not directory.is_dir():
        raise SweepError(f"no sweep {directory.name} in {results_root}")
    record = SweepRecord.load(directory)
    hosts = {name: Host.model_validate(json.loads((directory / "hosts" / f"{name}.json").read_text())) for name in record.hosts}
    shards = {
        name: Shard.from_json(path.read_text(), source=str(path))
        for name in record.hosts
        if (path := directory / name / SweepDir.SHARD).exists()
    }
    # A host given up on stays out: what it brought back is kept, the rest ran elsewhere.
    shards = {name: shard for name, shard in shards.items() if name not in record.lost}
    return LoadedSweep(directory, record, {n: hosts[n] for n in shards}, shards)
