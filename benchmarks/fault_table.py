"""Print the fault table of issue 14 from the rows tests/integration/test_faults.py recorded.

    python -m pytest tests/integration/test_faults.py     # records rows (root: real test hosts)
    python benchmarks/fault_table.py [ROWS.jsonl] [--all]

Rows come from $FLEET_FAULT_TABLE, default results/faults/faults.jsonl; one per fault and phase,
the latest recorded (--all: every row, oldest first). Columns: fault, phase, times injected, runs
lost, duplicated, leftover processes, time to notice (injection -> the first event or log line
where fleet reports it), and how the sweep ended.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "results" / "faults" / "faults.jsonl"
COLUMNS = ("fault", "phase", "times injected", "runs lost", "duplicated", "leftover processes", "time to notice", "sweep ended")


def load_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise SystemExit(f"{path}:{number}: not a JSON row ({exc})") from None
    return rows


def latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest row per (fault, phase), in the order the faults were first recorded."""
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r.get("at", 0)):
        key = (row["fault"], row["phase"])
        by_key.pop(key, None)  # re-inserted: keeps the order of the latest run
        by_key[key] = row
    return list(by_key.values())


def markdown(rows: list[dict[str, Any]]) -> str:
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for row in rows:
        notice = row.get("notice_s")
        values = (
            row["fault"], row["phase"], row["injected"], row["lost"], row["duplicated"], row["leftover"],
            f"{notice:.1f} s" if isinstance(notice, (int, float)) else "not reported", row.get("outcome", ""),
        )  # fmt: skip
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="?", type=Path, default=Path(os.environ.get("FLEET_FAULT_TABLE") or DEFAULT))
    parser.add_argument("--all", action="store_true", help="every recorded row, not only the latest per fault and phase")
    args = parser.parse_args(argv)
    if not args.rows.exists():
        print(f"{args.rows}: no fault rows yet (run tests/integration/test_faults.py as root)", file=sys.stderr)
        return 2
    rows = load_rows(args.rows)
    print(markdown(sorted(rows, key=lambda r: r.get("at", 0)) if args.all else latest(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
