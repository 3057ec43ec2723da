"""Quarantine: configurations a GPU architecture cannot run, skipped with their reason until lifted.

A run that dies of `cuda_illegal_instruction` does not get better by retrying: the kernel it runs
has no valid code path on that GPU (the seed campaign: DDTree budgets 8 and 12 crashed on SM120
while 15 and above ran). The configuration is quarantined for that architecture, and every host of
that architecture skips it, in this sweep and in later ones, until someone runs
`fleet quarantine lift KEY`.

A key is (GPU architecture, engine and its version, speculative algorithm, budget):
- the architecture, because the same configuration runs on other GPUs (SM90 has the kernel right);
- the engine *version*, because the crash is a property of the kernels shipped with one release: a
  new SGLang (or a new sim) may fix the kernel, and it deserves a fresh try without anyone having to
  remember to lift old entries; an upgraded host simply no longer matches them;
- the algorithm and the DDTree budget, because only some budgets crash. Methods without budgets are
  keyed by algorithm alone (`budget` None).

The store is one JSON file (default `results/quarantine.json`), rewritten atomically (temp file,
fsync, rename) under an exclusive `fcntl` lock on a side file, so that two controllers on the same
machine never lose each other's entries and a crash mid-write leaves the previous file intact.
"""

from __future__ import annotations

import builtins
import fcntl
import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.table import Table

from fleet.config import read_input_file
from fleet.errors import ConfigError
from fleet.host.atomic import atomic_file
from fleet.playbook import ServerConfig
from fleet.errors import QuarantineError

DEFAULT_QUARANTINE_PATH = Path("results") / "quarantine.json"
# A quarantine holds one entry per crashing configuration and GPU architecture: a few KB. A bound
# keeps a wrong or damaged file from costing the controller its memory on every plan.
MAX_QUARANTINE_BYTES = 16 << 20
SCHEMA = "fleet.quarantine/1"
AUTOREGRESSIVE = "AUTOREGRESSIVE"  # the algorithm of a configuration without speculative decoding
UNKNOWN_VERSION = "unknown"
# ARCH/ENGINE@VERSION/ALGORITHM/BUDGET, e.g. sm_120/sglang@0.5.23/DDTREE/b8 ("-" for no budget).
_KEY_PATTERN = re.compile(r"^(?P<arch>sm_\w+)/(?P<engine>[\w.-]+)@(?P<version>[^/\s]+)/(?P<algorithm>[A-Za-z0-9_]+)/(?P<budget>b\d+|-)$")
KEY_FORMAT = "ARCH/ENGINE@VERSION/ALGORITHM/BUDGET, e.g. sm_120/sglang@0.5.23/DDTREE/b8 (BUDGET '-' for none)"


def gpu_arch(compute_capability: str) -> str:
    """nvidia-smi's compute capability ("12.0") as an architecture name ("sm_120")."""
    match = re.fullmatch(r"(\d+)\.(\d+)", compute_capability.strip())
    if not match:
        raise ValueError(f"compute capability {compute_capability!r}: expected MAJOR.MINOR as nvidia-smi prints it, e.g. 12.0")
    return f"sm_{match[1]}{match[2]}"


@dataclass(frozen=True)
class QuarantineKey:
    arch: str  # "sm_120"
    engine: str  # "sglang" | "sim"
    engine_version: str  # the engine's release, or "unknown"
    algorithm: str  # upper case; AUTOREGRESSIVE without speculative decoding
    budget: int | None  # the DDTree budget; None for methods without budgets

    @classmethod
    def of(cls, *, arch: str, engine: str, engine_version: str | None, algorithm: str | None, budget: int | None) -> QuarantineKey:
        """The canonical key: algorithm upper-cased (None -> AUTOREGRESSIVE), version None -> "unknown"."""
        return cls(arch, engine, engine_version or UNKNOWN_VERSION, (algorithm or AUTOREGRESSIVE).upper(), budget)

    @classmethod
    def for_config(cls, config: ServerConfig, *, arch: str, engine: str, engine_version: str | None) -> QuarantineKey:
        return cls.of(arch=arch, engine=engine, engine_version=engine_version, algorithm=config.algorithm, budget=config.ddtree_budget)

    def __str__(self) -> str:
        budget = f"b{self.budget}" if self.budget is not None else "-"
        return f"{self.arch}/{self.engine}@{self.engine_version}/{self.algorithm}/{budget}"


def parse_key(text: str) -> QuarantineKey:
    """`sm_120/sglang@0.5.23/DDTREE/b8` -> QuarantineKey (the form `fleet quarantine list` prints)."""
    match = _KEY_PATTERN.match(text.strip())
    if not match:
        raise QuarantineError(f"quarantine key {text!r}: expected {KEY_FORMAT}")
    budget = match["budget"]
    return QuarantineKey.of(
        arch=match["arch"],
        engine=match["engine"],
        engine_version=match["version"],
        algorithm=match["algorithm"],
        budget=None if budget == "-" else int(budget[1:]),
    )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class QuarantineEntry:
    key: QuarantineKey
    reason: str  # the failure class and what it means, e.g. "cuda_illegal_instruction: ..."
    evidence: str  # the log line that proves it
    sweep_id: str | None = None
    host: str | None = None
    run_id: str | None = None
    created_at: str = field(default_factory=_now)  # ISO 8601, UTC

    def to_json(self) -> dict[str, Any]:
        return {
            "arch": self.key.arch,
            "engine": self.key.engine,
            "engine_version": self.key.engine_version,
            "algorithm": self.key.algorithm,
            "budget": self.key.budget,
            "reason": self.reason,
            "evidence": self.evidence,
            "sweep_id": self.sweep_id,
            "host": self.host,
            "run_id": self.run_id,
            "created_at": self.created_at,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> QuarantineEntry:
        if not isinstance(data, dict):
            raise QuarantineError(f"{where}: expected an object, got {type(data).__name__}")

        def text(name: str, optional: bool = False) -> Any:
            value = data.get(name)
            if value is None and optional:
                return None
            if not isinstance(value, str) or not value:
                raise QuarantineError(f"{where}.{name}: expected a non-empty string, got {value!r}")
            return value

        budget = data.get("budget")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise QuarantineError(f"{where}.budget: expected a positive integer or null, got {budget!r}")
        key = QuarantineKey(text("arch"), text("engine"), text("engine_version"), text("algorithm"), budget)
        return cls(
            key,
            reason=text("reason"),
            evidence=data.get("evidence") or "",
            sweep_id=text("sweep_id", True),
            host=text("host", True),
            run_id=text("run_id", True),
            created_at=text("created_at"),
        )


class QuarantineStore:
    """The quarantine file. Every call reads the file afresh, so other controllers' changes show."""

    def __init__(self, path: Path = DEFAULT_QUARANTINE_PATH) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    # `builtins.list` below: inside the class, `list` is the method.
    def list(self) -> builtins.list[QuarantineEntry]:
        """Entries in the order they were added."""
        return self._read()

    def matches(self, arch: str, engine: str, version: str | None, algorithm: str | None, budget: int | None) -> QuarantineEntry | None:
        """The entry that quarantines this configuration on this architecture and engine release."""
        key = QuarantineKey.of(arch=arch, engine=engine, engine_version=version, algorithm=algorithm, budget=budget)
        return next((entry for entry in self._read() if entry.key == key), None)

    def add(self, entry: QuarantineEntry) -> bool:
        """False when the key is already quarantined (the first entry, with its evidence, is kept)."""
        with self._locked():
            entries = self._read()
            if any(existing.key == entry.key for existing in entries):
                return False
            self._write([*entries, entry])
        return True

    def lift(self, key_or_index: QuarantineKey | str | int) -> QuarantineEntry:
        """Remove one entry, named by key (a QuarantineKey or its text) or by its 1-based position
        in `list()`, and return it."""
        with self._locked():
            entries = self._read()
            position = self._position(entries, key_or_index)
            lifted = entries.pop(position)
            self._write(entries)
        return lifted

    def _position(self, entries: Sequence[QuarantineEntry], key_or_index: QuarantineKey | str | int) -> int:
        if isinstance(key_or_index, int) or (isinstance(key_or_index, str) and key_or_index.strip().isdigit()):
            index = int(key_or_index)
            if not 1 <= index <= len(entries):
                raise QuarantineError(f"{self.path}: no entry #{index} (the quarantine holds {len(entries)})")
            return index - 1
        key = parse_key(key_or_index) if isinstance(key_or_index, str) else key_or_index
        for position, entry in enumerate(entries):
            if entry.key == key:
                return position
        raise QuarantineError(f"{self.path}: {key} is not quarantined")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        # The lock is on a side file: the data file is replaced by rename, so a lock on it would be
        # on an inode that the next writer no longer opens.
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # closing releases the lock; a killed process releases it too

    def _read(self) -> builtins.list[QuarantineEntry]:
        if not self.path.exists() and not self.path.is_symlink():
            return []
        try:
            data = json.loads(read_input_file(self.path, "a fleet quarantine file (JSON)", MAX_QUARANTINE_BYTES))
        except ConfigError as exc:  # not a regular file, or too large
            raise QuarantineError(str(exc)) from None
        except RecursionError:
            raise QuarantineError(f"{self.path}: expected a fleet quarantine file (JSON), got JSON nested too deep") from None
        except ValueError as exc:  # not UTF-8, not JSON
            raise QuarantineError(f"{self.path}: expected a fleet quarantine file (JSON), got invalid JSON: {str(exc)[:120]}") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), list):
            raise QuarantineError(f"{self.path}: expected an object with schema {SCHEMA!r} and a list of entries")
        return [QuarantineEntry.from_json(item, f"{self.path}: entries[{i}]") for i, item in enumerate(data["entries"])]

    def _write(self, entries: Sequence[QuarantineEntry]) -> None:
        document = {"schema": SCHEMA, "entries": [entry.to_json() for entry in entries]}
        with atomic_file(self.path) as handle:
            handle.write((json.dumps(document, indent=1, sort_keys=True) + "\n").encode())


def quarantine_table(entries: Sequence[QuarantineEntry]) -> Table:
    """`fleet quarantine list`: one row per entry, numbered as `lift` accepts them."""
    table = Table(title="Quarantined configurations", show_lines=False)
    for column in ("#", "key", "reason", "evidence", "sweep", "host", "run", "since"):
        table.add_column(column, overflow="fold")
    for number, entry in enumerate(entries, 1):
        table.add_row(
            str(number),
            str(entry.key),
            entry.reason,
            entry.evidence,
            entry.sweep_id or "-",
            entry.host or "-",
            entry.run_id or "-",
            entry.created_at,
        )
    return table
