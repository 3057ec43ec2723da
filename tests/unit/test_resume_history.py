"""A resumed sweep's summary keeps the whole history (issue 25): counts and fixes come from the
record, added up across controllers, not from the last controller's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import ConfigError
from fleet.sweep.controller import host_counts, summarize
from fleet.sweep.hoststatus import HostStatus
from fleet.sweep.ledger import SweepResults
from fleet.sweep.record import SweepRecord

FIX = {"host": "ct200", "run_id": "r1", "label": "tp1-ddtree-b15/short", "failure_class": "kv_pool_too_small",
       "action": "applied", "description": "max_running_requests 4 -> 2", "variant_id": "v2"}  # fmt: skip


def controller(record: SweepRecord, directory: Path, reboots: int, drops: int, fixes: list[dict]) -> dict:
    """What _finish does with one controller's statuses and fixes."""
    status = HostStatus("ct200")
    status.reboots, status.link_drops = reboots, drops
    earlier = record.add_history({"ct200": host_counts(status)}, fixes)
    record.save(directory)
    return summarize(directory, SweepResults([], {}), {"ct200": status}, earlier)


def test_a_resume_adds_its_counts_and_fixes_to_the_first_controllers(tmp_path: Path) -> None:
    SweepRecord("s1", "demo", "0" * 64, ["ct200"]).save(tmp_path)
    first = controller(SweepRecord.load(tmp_path), tmp_path, reboots=1, drops=1, fixes=[FIX])
    assert first["hosts"]["ct200"]["reboots"] == 1
    # The resume: a new controller, which saw nothing of its own.
    record = SweepRecord.load(tmp_path)
    second = controller(record, tmp_path, reboots=0, drops=2, fixes=[])
    assert second["hosts"]["ct200"]["reboots"] == 1 and second["hosts"]["ct200"]["link_drops"] == 3
    assert SweepRecord.load(tmp_path).fixes == [FIX]


def test_a_damaged_history_is_refused_naming_the_field(tmp_path: Path) -> None:
    record = SweepRecord("s1", "demo", "0" * 64, ["ct200"])
    record.counts = {"ct200": {"reboots": -1}}
    record.save(tmp_path)
    with pytest.raises(ConfigError, match="counts"):
        SweepRecord.load(tmp_path)
