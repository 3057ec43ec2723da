"""Reading sweep folders for a report: what the controller wrote (`sweep.json`, `plan.json`,
`summary.json`, `playbook.yaml`, `hosts/<host>.json` and `.facts.json`) and every result the
agents wrote (`<host>/runs/<run-id>.json`, through the sweep's one reader of pulled results,
`fleet.sweep.ledger`: bounded, checked, a bad file listed with why).

A sweep still running is fine: what has a result is reported, what has none yet is counted as
pending; `summary.json` appears only at its end (fixes are then read from the fixed variants'
own provenance). A result that cannot be read is not skipped silently: it is listed with the
reason (another schema, a truncated file) and named in the report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.host.contract import RunResult, SweepDir
from fleet.host.contract.reader import Reader, collector_paused
from fleet.layout import LATEST, SweepFolder
from fleet.sweep.ledger import read_sweep_results
from fleet.sweep.resultcache import TTFTs
from fleet.errors import ReportError


@dataclass(frozen=True)
class HostRecord:
    """One host of a sweep: its inventory entry and, where gathered, its facts."""

    name: str
    inventory: dict[str, Any]
    facts: dict[str, Any] | None


@dataclass(frozen=True)
class Loaded:
    """One result (fleet.sweep.resultcache.reported: the part the report reads, its requests left
    out), its successful requests' TTFTs by their tags, and the folder of the file it came from
    (one Path a host's folder, not one a result: a Path is ~1 KiB, a fifth of what the report
    keeps of a result)."""

    runs: Path
    result: RunResult
    ttft_s: TTFTs = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The result's file (the ledger reads only files named after their run id)."""
        return self.runs / f"{self.result.run_id}.json"


@dataclass
class SweepData:
    directory: Path
    sweep_id: str
    playbook_name: str
    created_at: float | None
    state: str | None  # "finished", "incomplete", ... ; None: still running or never recorded
    hosts: dict[str, HostRecord]
    plan_runs: dict[str, dict[str, Any]]  # run id -> the plan's entry
    unplaceable: list[dict[str, Any]]
    fixes: list[dict[str, Any]]  # summary.json's FixRecords; [] while the sweep runs
    playbook_description: str = ""
    results: list[Loaded] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def span(self) -> tuple[float | None, float | None]:
        """When its first run started and its last one ended."""
        if not self.results:
            return None, None
        return min(lo.result.started_at for lo in self.results), max(lo.result.ended_at for lo in self.results)

    @property
    def finished(self) -> bool:
        return SweepFolder(self.directory).summary.exists()


def _json(path: Path, required: bool) -> Any:
    if not path.exists():
        if required:
            raise ReportError(str(path), "", "a sweep folder's file (is this a results/<sweep-id>/ folder?)", "missing")
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(str(path), "", "a whole JSON document", str(exc)) from None


def _followed(path: Path) -> Path:
    """`results/LATEST` (the file `fleet sweep` writes, naming the last sweep) stands for that
    sweep's folder: `fleet report results/LATEST` is how a user asks for the last one."""
    if path.name != LATEST or not path.is_file():
        return path
    try:
        sweep_id = path.read_text().strip()
    except OSError as exc:
        raise ReportError(str(path), "", "the id of the last sweep", str(exc)) from None
    if not sweep_id or "/" in sweep_id or sweep_id.startswith("."):
        raise ReportError(str(path), "", "the id of the last sweep (a folder beside it)", repr(sweep_id))
    return path.parent / sweep_id


def load_sweep(directory: Path | str) -> SweepData:
    """One sweep folder, checked: `ReportError` names what is wrong and where."""
    directory = _followed(Path(directory))
    if not directory.is_dir():
        raise ReportError(str(directory), "", "a sweep folder (results/<sweep-id>/)", "not a directory")
    folder = SweepFolder(directory)
    record = Reader(_json(folder.record, True), str(folder.record))
    plan_data = _json(folder.plan, False)
    plan_runs: dict[str, dict[str, Any]] = {}
    unplaceable: list[dict[str, Any]] = []
    if plan_data is not None:
        plan = Reader(plan_data, str(folder.plan))
        for entry in plan.children("runs", []):
            entry.text("id")
            plan_runs[entry.data["id"]] = entry.data
        unplaceable = [u.data for u in plan.children("unplaceable", [])]
    summary_data = _json(folder.summary, False)
    fixes = [f.data for f in Reader(summary_data, str(folder.summary)).children("fixes", [])] if summary_data is not None else []
    sweep = SweepData(
        directory=directory,
        sweep_id=record.text("sweep_id"),
        playbook_name=record.get("playbook_name", str, default=""),
        created_at=record.optional("created_at", float),
        state=record.optional("state", str),
        hosts=_hosts(folder, record.strings("hosts", [])),
        plan_runs=plan_runs,
        unplaceable=unplaceable,
        fixes=fixes,
        playbook_description=_description(folder.playbook),
    )
    # Through the sweep's one reader of pulled results: bounded, checked, never a crash (a bad
    # file is listed with why, as unreadable). It holds of each result only what the report reads
    # (fleet.sweep.resultcache.Digest: its requests as one tuple of TTFTs per (level, repeat), 1 KiB
    # where their dicts are 5.5 KiB), from the user's cache of checked results where it has them.
    # The Loaded made with the collector paused too: made beside tens of thousands of results,
    # they set off full collections that walk all of those (half of a warm load's CPU).
    with collector_paused():
        swept = read_sweep_results(directory, sweep_id=sweep.sweep_id, digests=True)
        runs = {host: directory / host / SweepDir.RUNS for host in {r.host for r in swept.results}}
        sweep.results = [Loaded(runs[r.host], r, swept.ttft_s[r.host, r.run_id]) for r in swept.results]
    sweep.unreadable = [(directory / relative, why) for relative, why in sorted(swept.rejected.items())]
    return sweep


def _description(path: Path) -> str:
    """The playbook's one-line description, as it ran (the sweep's copy); "" where it has none."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return ""
    return str(data.get("description") or "") if isinstance(data, dict) else ""


def _hosts(folder: SweepFolder, names: list[str]) -> dict[str, HostRecord]:
    hosts = {}
    for name in names or folder.recorded_host_names():
        inventory = _json(folder.host_file(name), False) or {}
        facts = _json(folder.facts_file(name), False)
        hosts[name] = HostRecord(name, inventory if isinstance(inventory, dict) else {}, facts if isinstance(facts, dict) else None)
    return hosts
