"""How well does `fleet diagnose` classify labelled logs? A confusion table by failure class.

Reads a `manifest.jsonl` (one JSON object a line: `file`, `label`; as in shared/sample-logs and
tests/fixtures/sample-logs), diagnoses every log it names and prints, per true label, how the logs
were classified, then the misses with their evidence line. A log labelled `healthy` is right when
the diagnosis finds no failure; `server_start_timeout` is judged with the run record's word that
the start timed out (the label itself says so: that is what such a record carries), so the log
alone must not show a fatal line. With `--bare` no log gets that word: each is judged from its text
alone, as `fleet diagnose` reads a log a user hands it (a stalled start must then show its stall).
Manifests may also carry `engine` ("sglang" / "vllm"): `--by-engine` prints a table per engine.
`--where FIELD=VALUE` keeps the entries whose manifest field has that value (JSON true/false as
`true`/`false`), e.g. batch8's `--where excerpt_shows_cause=true`.

    python benchmarks/diagnose_confusion.py ../shared/sample-logs/manifest.jsonl
    python benchmarks/diagnose_confusion.py tests/fixtures/sample-logs/manifest.jsonl --misses
    python benchmarks/diagnose_confusion.py tests/fixtures/logs/batch3-tune/manifest.jsonl --bare --by-engine
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


def read_manifest(path: Path, where: tuple[str, str] | None = None) -> list[tuple[Path, str, str]]:
    entries: list[tuple[Path, str, str]] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            raise SystemExit(f"{path}:{number}: not JSON ({error.msg})") from error
        if not isinstance(record, dict) or not isinstance(record.get("file"), str) or not isinstance(record.get("label"), str):
            raise SystemExit(f"{path}:{number}: expected an object with string fields 'file' and 'label'")
        if where is not None:
            field, value = where
            if field not in record:
                raise SystemExit(f"{path}:{number}: --where names field {field!r}, which this entry does not have")
            if json.dumps(record[field]).strip('"') != value:
                continue
        entries.append((path.parent / record["file"], record["label"], str(record.get("engine") or "")))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--misses", action="store_true", help="also print each miss with its first evidence line")
    parser.add_argument("--bare", action="store_true", help="judge every log from its text alone, without the run record's start-timeout word")
    parser.add_argument("--by-engine", action="store_true", help="one table per engine named in the manifest, then all together")
    parser.add_argument("--where", metavar="FIELD=VALUE", help="only the entries whose manifest field has this value (true/false for JSON booleans)")
    args = parser.parse_args(argv)
    where: tuple[str, str] | None = None
    if args.where is not None:
        field, sep, value = args.where.partition("=")
        if not sep or not field:
            parser.error(f"--where expects FIELD=VALUE, got {args.where!r}")
        where = (field, value)

    results: list[tuple[str, str, str, str]] = []  # engine, label, diagnosed, miss line
    for log, label, engine in read_manifest(args.manifest, where):
        hint = DiagnosisHint(server_start_timed_out=True) if label == "server_start_timeout" and not args.bare else None
        diagnosis = diagnose_file(log, hint)
        got = diagnosis.failure_class or HEALTHY
        first = diagnosis.evidence[0].text if diagnosis.evidence else "(no evidence)"
        results.append((engine, label, got, f"  {log.name}: {label} -> {got}: {first[:160]}" if got != label else ""))
    groups = sorted({engine for engine, _, _, _ in results}) if args.by_engine else []
    for engine in groups:
        print(f"engine {engine or '(not named)'}:")
        _table([item for item in results if item[0] == engine])
        print()
    if groups:
        print("all engines:")
    _table(results)
    misses = [miss for _, _, _, miss in results if miss]
    if args.misses and misses:
        print("misses:")
        print("\n".join(misses))
    return 0


def _table(results: list[tuple[str, str, str, str]]) -> None:
    table: dict[str, Counter[str]] = {}
    for _, label, got, _ in results:
        table.setdefault(label, Counter())[got] += 1
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


if __name__ == "__main__":
    raise SystemExit(main())
