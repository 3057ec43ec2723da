"""Where fleet keeps things on a host, and on the controller. One place, so that every part agrees.

On a host (under `paths.work_dir`, persistent; survives reboots):
    agent/                 the shipped agent and its state
    sweeps/<sweep-id>/     the shard, runs/<run-id>.json results, logs/, progress.json
On a host (model files):
    <model_cache>/<repo-slug>/<revision>/    persistent copy (fetched once)
    <staging>/<repo-slug>--<revision>/        fast copy (tmpfs), re-staged after a reboot
On the controller (under results/; `ResultsRoot` and `SweepFolder` name every file, for both
sweep backends, the report and the estimator):
    LATEST, durations.json, starts.json, quarantine.json  the last sweep started; measured durations; what starts logged of memory; quarantine
    <sweep-id>/sweep.json                    the start record (every backend's; a backend may add its own)
    <sweep-id>/playbook.yaml, plan.json, summary.json, hosts/<host>.json and .facts.json
    <sweep-id>/<host>/                       what came back
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING

from dataclasses import dataclass

from fleet.config import read_input_file
from fleet.errors import ConfigError
from fleet.host.atomic import atomic_file, write_json_atomic
from fleet.inventory import Host, Target, slugify

if TYPE_CHECKING:  # for types only: the commands that read a sweep need no playbook model
    from fleet.playbook import ModelRef

BASE_PORT = 30000

# The controller's results folder (results/): the names every reader and writer uses.
LATEST = "LATEST"
DURATIONS = "durations.json"
STARTS = "starts.json"
QUARANTINE = "quarantine.json"
SWEEP_RECORD = "sweep.json"
PLAN = "plan.json"
SUMMARY = "summary.json"
PLAYBOOK_COPY = "playbook.yaml"
HOSTS = "hosts"


# A sweep id names a folder of results/ and of every host's work dir: `<playbook>-<stamp>-<hex>`
# (fleet.sweep.record.new_sweep_id), one path component however it was typed or recorded.
SWEEP_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SWEEP_ID_EXPECTED = "a sweep id (a folder name of letters, digits, . _ -; at most 128 characters)"


def checked_sweep_id(sweep_id: str, source: Path | str, field: str = "") -> str:
    """`sweep_id` when it can only name one folder of the results (no `/`, no `..`, not empty, short);
    else a ConfigError naming `source` (a file, or the option that gave it)."""
    if not SWEEP_ID_PATTERN.fullmatch(sweep_id):
        shown = sweep_id if len(sweep_id) <= 120 else sweep_id[:117] + "..."
        raise ConfigError(source, field, SWEEP_ID_EXPECTED, shown)
    return sweep_id


def read_latest(results_root: Path) -> str | None:
    """The sweep `results/LATEST` names, None where no sweep was started yet. Whatever else the
    file holds (garbage, a megabyte, a path) is a ConfigError naming it."""
    path = results_root / LATEST
    if not path.exists() and not path.is_symlink():
        return None
    data = read_input_file(path, "the id of the latest sweep", limit=256)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", "UTF-8 text: " + SWEEP_ID_EXPECTED, f"an invalid byte at offset {exc.start}") from None
    return checked_sweep_id(text.strip(), path)


@dataclass(frozen=True)
class ResultsRoot:
    """results/: the sweeps' folders and what outlives a sweep."""

    path: Path

    @property
    def latest(self) -> Path:
        return self.path / LATEST

    @property
    def durations(self) -> Path:
        return self.path / DURATIONS

    @property
    def starts(self) -> Path:
        return self.path / STARTS

    @property
    def quarantine(self) -> Path:
        return self.path / QUARANTINE

    def own_files(self) -> tuple[str, ...]:
        return (LATEST, DURATIONS, STARTS, QUARANTINE)

    def sweep(self, sweep_id: str) -> SweepFolder:
        return SweepFolder(self.path / sweep_id)

    def point_latest_at(self, sweep_id: str) -> None:
        with atomic_file(self.latest) as handle:
            handle.write(f"{sweep_id}\n".encode())


@dataclass(frozen=True)
class SweepFolder:
    """results/<sweep-id>/ on the controller: every file a backend writes there beside what came
    back from the hosts (`<host>/`, read through `fleet.sweep.ledger`), named once."""

    path: Path

    @property
    def sweep_id(self) -> str:
        return self.path.name

    @property
    def root(self) -> ResultsRoot:
        return ResultsRoot(self.path.parent)

    @property
    def record(self) -> Path:
        return self.path / SWEEP_RECORD

    @property
    def plan(self) -> Path:
        return self.path / PLAN

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY

    @property
    def playbook(self) -> Path:
        """The sweep's copy of its playbook: what a resume runs, whatever became of the original."""
        return self.path / PLAYBOOK_COPY

    @property
    def hosts(self) -> Path:
        return self.path / HOSTS

    def host_file(self, name: str) -> Path:
        return self.hosts / f"{name}.json"

    def facts_file(self, name: str) -> Path:
        return self.hosts / f"{name}.facts.json"

    def recorded_host_names(self) -> list[str]:
        """The hosts with an entry under hosts/, sorted (facts files aside)."""
        return sorted(p.name.removesuffix(".json") for p in self.hosts.glob("*.json") if not p.name.endswith(".facts.json"))

    def write_host(self, host: Host) -> None:
        write_json_atomic(self.host_file(host.name), host.model_dump(mode="json"))

    def write_plan(self, plan: object) -> None:
        write_json_atomic(self.plan, plan)

    def write_summary(self, summary: object) -> None:
        write_json_atomic(self.summary, summary)


def model_cache_dir(model: ModelRef, host: Target) -> str:
    if model.path:
        return model.path
    return posixpath.join(host.paths.model_cache, slugify(model.label), slugify(model.revision))


def model_serve_dir(model: ModelRef, host: Target) -> str:
    """The directory the engine loads from: the staged copy when the host stages, else the cache."""
    if model.path or not host.paths.staging:
        return model_cache_dir(model, host)
    return posixpath.join(host.paths.staging, f"{slugify(model.label)}--{slugify(model.revision)}")


def sweep_dir(host: Target, sweep_id: str) -> str:
    return posixpath.join(host.paths.work_dir, "sweeps", sweep_id)


def agent_dir(host: Target) -> str:
    return posixpath.join(host.paths.work_dir, "agent")


# SGLang binds more than --port (internal sockets near it, an NCCL port): servers side by side on
# one host keep 10 ports apart.
PORT_STRIDE = 10


def server_port(index: int) -> int:
    """The port of a host's index-th server: any of them may run side by side (the agent places
    them as GPUs free up), so each has its own."""
    return BASE_PORT + PORT_STRIDE * index
