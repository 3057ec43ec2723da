"""The quarantine store: add, match, list, lift; persistent, atomic, and shared by two controllers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from rich.console import Console

from fleet.fixes.quarantine import QuarantineEntry, QuarantineKey, QuarantineStore, gpu_arch, parse_key, quarantine_table
from fleet.errors import QuarantineError

ROOT = Path(__file__).resolve().parents[2]
# The seed's crash, as the log shows it (seed 004).
EVIDENCE = "CUDA error: an illegal instruction was encountered"


def ddtree_entry(budget: int, version: str = "0.5.23", arch: str = "sm_120") -> QuarantineEntry:
    key = QuarantineKey.of(arch=arch, engine="sglang", engine_version=version, algorithm="ddtree", budget=budget)
    return QuarantineEntry(key, "cuda_illegal_instruction", EVIDENCE, sweep_id="s1", host="ct200", run_id=f"run-b{budget}")


def test_add_match_list_lift(tmp_path: Path) -> None:
    store = QuarantineStore(tmp_path / "quarantine.json")
    assert store.list() == []

    assert store.add(ddtree_entry(8)) is True
    assert store.add(ddtree_entry(12)) is True
    assert store.add(ddtree_entry(8)) is False  # already quarantined: the first entry is kept

    assert [e.key.budget for e in store.list()] == [8, 12]
    found = store.matches("sm_120", "sglang", "0.5.23", "DDTREE", 8)
    assert found is not None and found.evidence == EVIDENCE and found.run_id == "run-b8"
    assert store.matches("sm_120", "sglang", "0.5.23", "DDTREE", 15) is None  # b15 runs
    assert store.matches("sm_90", "sglang", "0.5.23", "DDTREE", 8) is None  # another architecture
    assert store.matches("sm_120", "sglang", "0.5.24", "DDTREE", 8) is None  # a newer engine gets a fresh try
    assert store.matches("sm_120", "sim", "0.5.23", "DDTREE", 8) is None

    lifted = store.lift("sm_120/sglang@0.5.23/DDTREE/b8")
    assert lifted.key.budget == 8
    assert store.matches("sm_120", "sglang", "0.5.23", "DDTREE", 8) is None
    assert store.lift(1).key.budget == 12  # by its number in the list
    assert store.list() == []


def test_entries_persist_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "results" / "quarantine.json"
    QuarantineStore(path).add(ddtree_entry(8))

    again = QuarantineStore(path)
    [entry] = again.list()
    assert entry == replace(ddtree_entry(8), created_at=entry.created_at)
    assert datetime.fromisoformat(entry.created_at).tzinfo is not None
    assert (str(entry.key), entry.sweep_id, entry.host) == ("sm_120/sglang@0.5.23/DDTREE/b8", "s1", "ct200")
    assert json.loads(path.read_text())["entries"][0]["budget"] == 8


def test_lifting_what_is_not_there_names_it(tmp_path: Path) -> None:
    store = QuarantineStore(tmp_path / "q.json")
    store.add(ddtree_entry(8))
    with pytest.raises(QuarantineError, match="b12 is not quarantined"):
        store.lift("sm_120/sglang@0.5.23/DDTREE/b12")
    with pytest.raises(QuarantineError, match="no entry #2"):
        store.lift(2)
    with pytest.raises(QuarantineError, match="expected ARCH/ENGINE@VERSION"):
        store.lift("DDTREE b8")
    assert len(store.list()) == 1


def test_keys_round_trip_through_their_text() -> None:
    for key in (
        QuarantineKey.of(arch="sm_120", engine="sglang", engine_version="0.5.23", algorithm="DDTREE", budget=12),
        QuarantineKey.of(arch="sm_90", engine="sim", engine_version=None, algorithm=None, budget=None),
    ):
        assert parse_key(str(key)) == key
    assert str(QuarantineKey.of(arch="sm_90", engine="sim", engine_version=None, algorithm=None, budget=None)) == ("sm_90/sim@unknown/AUTOREGRESSIVE/-")


def test_architecture_from_nvidia_smi_compute_capability() -> None:
    # tests/fixtures/facts: the RTX PRO 6000 reports compute_cap 12.0, an H200 9.0.
    assert gpu_arch("12.0") == "sm_120"
    assert gpu_arch("9.0") == "sm_90"
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        gpu_arch("sm_120")


def test_a_broken_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"schema": "fleet.quarantine/1", "entries": [{"arch": "sm_120"}]}')
    with pytest.raises(QuarantineError, match=r"q\.json: entries\[0\]\.engine: expected a non-empty string"):
        QuarantineStore(path).list()
    path.write_text("{not json")
    with pytest.raises(QuarantineError, match="invalid JSON"):
        QuarantineStore(path).list()


def _run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_crash_mid_write_leaves_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    store = QuarantineStore(path)
    store.add(ddtree_entry(8))
    before = path.read_bytes()

    # The writer is SIGKILLed after writing half of the new document to disk.
    crashed = _run_python(
        """
        import os, signal, sys
        from contextlib import contextmanager
        from pathlib import Path
        from fleet.fixes import quarantine as q

        real = q.atomic_file

        class HalfThenDie:
            def __init__(self, handle):
                self.handle = handle
            def write(self, data):
                self.handle.write(data[: len(data) // 2])
                self.handle.flush()
                os.fsync(self.handle.fileno())
                os.kill(os.getpid(), signal.SIGKILL)

        @contextmanager
        def dying(path, mode=0o644):
            with real(path, mode) as handle:
                yield HalfThenDie(handle)

        q.atomic_file = dying
        key = q.QuarantineKey.of(arch="sm_120", engine="sglang", engine_version="0.5.23", algorithm="DDTREE", budget=12)
        q.QuarantineStore(Path(sys.argv[1])).add(q.QuarantineEntry(key, "cuda_illegal_instruction", "x"))
        """,
        str(path),
    )

    assert crashed.returncode == -9, crashed.stderr
    assert path.read_bytes() == before
    assert [e.key.budget for e in QuarantineStore(path).list()] == [8]
    assert any(p.name.startswith(".q.json.") for p in tmp_path.iterdir())  # the torn temp file, never read
    assert store.add(ddtree_entry(12)) is True  # the dead writer's lock is gone
    assert [e.key.budget for e in store.list()] == [8, 12]


def test_two_controllers_adding_at_once_both_land(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    adder = """
        import sys
        from pathlib import Path
        from fleet.fixes import quarantine as q

        store = q.QuarantineStore(Path(sys.argv[1]))
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        sys.stdin.readline()  # both start adding together
        for budget in range(int(sys.argv[2]), int(sys.argv[2]) + 25):
            key = q.QuarantineKey.of(arch="sm_120", engine="sglang", engine_version="0.5.23", algorithm="DDTREE", budget=budget)
            assert store.add(q.QuarantineEntry(key, "cuda_illegal_instruction", "x", host=sys.argv[2]))
    """
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(adder), str(path), start],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for start in ("1", "101")
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err

    budgets = sorted(e.key.budget for e in QuarantineStore(path).list() if e.key.budget is not None)
    assert budgets == list(range(1, 26)) + list(range(101, 126))


def test_table_lists_every_entry_with_its_number(tmp_path: Path) -> None:
    store = QuarantineStore(tmp_path / "q.json")
    store.add(ddtree_entry(8))
    store.add(ddtree_entry(12))
    console = Console(width=250, record=True)
    console.print(quarantine_table(store.list()))
    text = console.export_text()
    assert "sm_120/sglang@0.5.23/DDTREE/b8" in text and "sm_120/sglang@0.5.23/DDTREE/b12" in text
    assert EVIDENCE in text and "ct200" in text
    assert "│ 2 " in text
