"""benchmarks/fault_table.py: the fault suite's rows (JSON lines) as issue 14's markdown table,
the latest row per fault and phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "fault_table.py"


def row(fault: str, phase: str, at: float, **changes: object) -> str:
    data = {"fault": fault, "phase": phase, "injected": 1, "lost": 0, "duplicated": 0, "leftover": 0, "notice_s": 1.234, "outcome": "finished, exit 0", "at": at}
    return json.dumps({**data, **changes}) + "\n"


def test_the_latest_row_per_fault_and_phase_as_markdown(tmp_path: Path) -> None:
    rows = tmp_path / "faults.jsonl"
    rows.write_text(row("reboot", "pull", 1.0, lost=3) + row("link drop 5 s", "mid-workload", 2.0, notice_s=None) + row("reboot", "pull", 3.0, outcome="a | b"))
    done = subprocess.run([sys.executable, str(SCRIPT), str(rows)], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "| fault | phase | times injected | runs lost | duplicated | leftover processes | time to notice | sweep ended |"
    assert lines[2:] == [
        "| link drop 5 s | mid-workload | 1 | 0 | 0 | 0 | not reported | finished, exit 0 |",
        "| reboot | pull | 1 | 0 | 0 | 0 | 1.2 s | a \\| b |",  # the later run of the same fault wins
    ]
    every = subprocess.run([sys.executable, str(SCRIPT), str(rows), "--all"], capture_output=True, text=True, check=True)
    assert len(every.stdout.splitlines()) == 2 + 3


def test_a_missing_or_broken_rows_file_is_said(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.jsonl")], capture_output=True, text=True)
    assert missing.returncode == 2 and "no fault rows yet" in missing.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text(row("reboot", "pull", 1.0) + "{not json\n")
    done = subprocess.run([sys.executable, str(SCRIPT), str(broken)], capture_output=True, text=True)
    assert done.returncode != 0 and f"{broken}:2: not a JSON row" in done.stderr
