"""How well does `fleet diagnose` classify labelled logs? A confusion table by failure class.

Reads a `manifest.jsonl` (one JSON object a line: `file`, `label`; as in shared/sample-logs and
tests/fixtures/sample-logs), diagnoses every log it names and prints, per true label, how the logs
were classified, then the misses with their evidence line. A log labelled `healthy` is right when
the diagnosis finds no failure; `server_start_timeout` is judged with the run record's word that
the start timed out (the label itself says so: that is what such a record carries), so the log
alone must not show a fatal line.

    python benchmarks/diagnose_confusion.py ../shared/sample-logs/manifest.jsonl
    python benchmarks/diagnose_confusion.py tests/fixtures/sample-logs/manifest.jsonl --misses
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.host.diagnose.classify import DiagnosisHint, diagnose_file  # noqa: E402

HEALTHY = "healthy"


def read_manifest(path: Path) -> list[tuple[Path, str]]:
    entries: list[tuple[Path, str]] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            raise SystemExit(f"{path}:{number}: not JSON ({error.msg})") from error
        if not isinstance(record, dict) or not isinstance(record.get("file"), str) or not isinstance(record.get("label"), str):
            raise SystemExit(f"{path}:{number}: expected an object with string fields 'file' and 'label'")
        entries.append((path.parent / record["file"], record["label"]))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--misses", action="store_true", help="also print each miss with its first evidence line")
    args = parser.parse_args(argv)

    table: dict[str, Counter[str]] = {}
    misses: list[str] = []
    for log, label in read_manifest(args.manifest):
        hint = DiagnosisHint(server_start_timed_out=True) if label == "server_start_timeout" else None
        diagnosis = diagnose_file(log, hint)
        got = diagnosis.failure_class or HEALTHY
        table.setdefault(label, Counter())[got] += 1
        if got != label:
            first = diagnosis.evidence[0].text if diagnosis.evidence else "(no evidence)"
            misses.append(f"  {log.name}: {label} -> {got}: {first[:160]}")

    columns = sorted({got for row in table.values() for got in row} | set(table))
    width = max(len(name) for name in columns) + 1
    print("true \\ diagnosed".ljust(width) + " " + " ".join(f"{name[:8]:>8}" for name in columns) + "   right")
    total = right = failures = failures_right = 0
    for label in sorted(table):
        row = table[label]
        count = sum(row.values())
        total += count
        right += row[label]
        if label != HEALTHY:
            failures += count
            failures_right += row[label]
        cells = " ".join(f"{row[name] or '.':>8}" for name in columns)
        print(f"{label.ljust(width)} {cells}   {row[label]}/{count}")
    print(f"overall {right}/{total} right; failures {failures_right}/{failures}")
    if args.misses and misses:
        print("misses:")
        print("\n".join(misses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
