"""What a host sends back is untrusted input (issue 29, items 1-3): the contract's bounded reader
and the sweep's ledger of pulled results read a corrupt, forged, oversized, deeply nested,
non-UTF-8 or planted file as a rejection with its reason -- never a crash, never a count, never a
path or a terminal escape taken from it -- and hand each accepted result out once."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from fleet.host.contract import ContractError, Failure, RunResult, RunStatus, load_result
from fleet.host.contract.reader import MAX_DEPTH, read_text
from fleet.host.contract.results import RESULT_MAX_BYTES
from fleet.sweep.ledger import ResultLedger, read_sweep_results

SWEEP = "demo-20261202-000000-abcd"


def result(run_id: str = "r1", **changes: Any) -> dict[str, Any]:
    base = RunResult(
        run_id=run_id,
        label="tp1-ddtree-b12/short",
        server_id="s1",
        server_label="tp1-ddtree-b12",
        sweep_id=SWEEP,
        host="ct200",
        status=RunStatus.ok,
        failure=None,
        figures={"output_tok_s": 350.5, "requests": {"sent": 4, "ok": 4}, "ttft_s": {"p50": 0.2, "n": 4}},
        workload={"name": "short"},
        started_at=1.8e9,
        ended_at=1.8e9 + 12.5,
    ).to_json()
    base.update(changes)
    return base


def write(folder: Path, name: str, data: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return path


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / SWEEP / "ct200" / "runs"


def ledger(runs: Path, expected: tuple[str, ...] | None = ("r1", "r2")) -> ResultLedger:
    return ResultLedger(runs, SWEEP, "ct200", expected)


# ------------------------------------------------------------------------------ the reader


def test_deep_nesting_is_a_rejection_not_a_recursion_error(tmp_path: Path) -> None:
    path = write(tmp_path, "r1.json", b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(ContractError, match=rf"r1\.json: expected JSON nested at most {MAX_DEPTH} levels deep"):
        load_result(path)
    path = write(tmp_path, "r1.json", b"[" * 40 + b"1" + b"]" * 40)
    with pytest.raises(ContractError, match="nested at most"):
        load_result(path)  # parses, but deeper than any document fleet writes


def test_invalid_utf8_names_the_file_and_the_byte(tmp_path: Path) -> None:
    good = json.dumps(result()).encode()
    path = write(tmp_path, "r1.json", good.replace(b"tp1-ddtree", b"tp1-\xff\xfeddtree"))
    with pytest.raises(ContractError, match=r"r1\.json: expected UTF-8 text, got 'invalid byte at offset \d+'"):
        load_result(path)


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "r1.json"
    with open(path, "wb") as handle:
        handle.truncate(RESULT_MAX_BYTES + 1)  # sparse: its size, not its bytes, refuses it
    with pytest.raises(ContractError, match=rf"expected a file of at most {RESULT_MAX_BYTES} bytes"):
        load_result(path)


def test_a_symlink_is_never_followed_and_a_fifo_never_blocks(tmp_path: Path) -> None:
    secret = write(tmp_path, "secret.json", result())
    (tmp_path / "r1.json").symlink_to(secret)
    with pytest.raises(ContractError, match=r"r1\.json: expected a regular file, got 'a symbolic link \(not followed\)'"):
        load_result(tmp_path / "r1.json")
    os.mkfifo(tmp_path / "r2.json")
    done = threading.Event()

    def read() -> None:
        with pytest.raises(ContractError, match=r"expected a regular file, got 'a FIFO \(named pipe\)'"):
            read_text(tmp_path / "r2.json")
        done.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(10)
    assert done.is_set(), "reading a FIFO blocked"


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        ({"run_id": "../../etc/passwd"}, "run_id", "an id of letters"),
        ({"host": "../../evilhost"}, "host", "an id of letters"),
        ({"sweep_id": ".."}, "sweep_id", "an id of letters"),
        ({"figures": {"output_tok_s": 1e308}}, "figures.output_tok_s", "a number of magnitude at most"),
        ({"figures": {"output_tok_s": 5e9}}, "figures.output_tok_s", "a rate of at most"),
        ({"figures": {"ttft_s": {"p50": -1.0}}}, "figures.ttft_s.p50", "a measurement >= 0"),
    ],
)
def test_forged_values_are_refused_by_field(tmp_path: Path, changes: dict[str, Any], field: str, expected: str) -> None:
    path = write(tmp_path, "r1.json", result(**changes))
    with pytest.raises(ContractError, match=rf"r1\.json: {field}: expected {expected}"):
        load_result(path)


@pytest.mark.parametrize("number", [b"1e999", b"NaN", b"Infinity", b"-Infinity"])
def test_numbers_that_are_no_measurement_are_refused(tmp_path: Path, number: bytes) -> None:
    text = json.dumps(result(figures={"output_tok_s": 12345.5})).encode().replace(b"12345.5", number)
    with pytest.raises(ContractError, match="expected a whole JSON document"):
        load_result(write(tmp_path, "r1.json", text))


def test_control_characters_are_taken_out_of_every_string(tmp_path: Path) -> None:
    label = "tp1\x1b[31m-evil\x1b]0;owned\x07\r\x9b2J/short\tok\nline"
    loaded = load_result(write(tmp_path, "r1.json", result(label=label, failure=None, extras_key={"k\x1b": "v\x00"})))
    assert loaded.label == "tp1\ufffd[31m-evil\ufffd]0;owned\ufffd\ufffd\ufffd2J/short\tok\nline"
    assert loaded.extras["extras_key"] == {"k\ufffd": "v\ufffd"}


def test_a_result_under_another_runs_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match=r"r2\.json: run_id: expected the run id the file is named after \(r2\), got 'r1'"):
        load_result(write(tmp_path, "r2.json", result("r1")))


# ------------------------------------------------------------------------------ the ledger


def test_each_result_is_handed_out_once_and_bad_files_are_named_once(runs: Path) -> None:
    book = ledger(runs)
    write(runs, "r1.json", result("r1"))
    write(runs, "evil.json", result("evil"))  # well formed, for no run of this host
    write(runs, "r2.json", result("r2", host="ct201"))  # another host's, or forged as it
    write(runs, ".r1.json.x1.tmp", b"{")  # the atomic writer's temporary: not a result
    book.refresh()
    first, cursor = book.accepted()
    assert [r.run_id for r in first] == ["r1"]
    rejected, rejected_cursor = book.rejections()
    assert dict(rejected) == {
        "evil.json": f"{runs / 'evil.json'}: run_id: expected a run this sweep gave ct200, got 'evil'",
        "r2.json": f"{runs / 'r2.json'}: host: expected ct200 (the host it was pulled from), got 'ct201'",
    }
    for _ in range(3):  # polls that find nothing new hand out nothing
        book.refresh()
        assert book.accepted(cursor) == ([], cursor) and book.rejections(rejected_cursor) == ([], rejected_cursor)
    assert set(book.results) == {"r1"} and book.present == {"r1", "r2", "evil"}

    # The agent redoes r2 and the pull puts the good result in place: accepted, once.
    write(runs, "r2.json", result("r2"))
    book.refresh()
    fresh, cursor = book.accepted(cursor)
    assert [r.run_id for r in fresh] == ["r2"] and set(book.rejected) == {"evil.json"}


def test_a_run_given_to_the_host_later_makes_its_result_acceptable(runs: Path) -> None:
    book = ledger(runs, ("r1",))
    write(runs, "v1.json", result("v1"))  # a fixed variant's, before the controller's shard shows it
    book.refresh()
    assert book.results == {} and set(book.rejected) == {"v1.json"}
    book.expect(["v1"])
    book.refresh()
    assert set(book.results) == {"v1"} and book.rejected == {}


def test_a_pulls_list_of_what_it_wrote_is_looked_at_and_nothing_else(runs: Path) -> None:
    """A pull that names what it wrote (rsync's --out-format=%n) spares the folder's listing; the
    names are the host's, so only a plain result name of this folder is looked up, and the first
    look is always the whole folder (what an earlier controller pulled)."""
    book = ledger(runs, ("r1", "r2", "r3", "r4"))
    write(runs, "r1.json", result("r1"))  # pulled before this controller started
    write(runs, "r2.json", result("r2"))
    book.refresh(["r2.json"])  # the first look: whole, whatever the pull says
    assert set(book.results) == {"r1", "r2"}
    write(runs.parent, "r3.json", result("r3"))  # outside the folder: a path in the list reaches nothing
    write(runs, "r4.json", b"{")  # cut short
    book.refresh(["./", "../r3.json", "r4.json"])
    assert set(book.results) == {"r1", "r2"} and set(book.rejected) == {"r4.json"}
    write(runs, "r3.json", result("r3"))  # written, but not named: left to the next whole look
    book.refresh([])
    assert "r3" not in book.results
    write(runs, "r4.json", result("r4"))  # a rejected file is looked at again at every pull (its re-run)
    book.refresh([])
    assert set(book.results) == {"r1", "r2", "r4"} and book.rejected == {}
    book.refresh()
    assert set(book.results) == {"r1", "r2", "r3", "r4"}


def test_results_of_one_host_hold_its_facts_once_and_keep_what_each_file_says(runs: Path) -> None:
    """A sweep's ledger holds its whole results to the end, and each carries the host's facts (the
    largest part of one in memory): results whose facts are equal hold one copy; results whose
    facts differ (the host changed: a reboot, a new driver) keep their own. Each still reads as its
    file says."""
    facts = {"gpus": [{"index": i, "name": "NVIDIA H200", "memory_total_mib": 143771} for i in range(8)], "driver": {"version": "580.95.05"}}
    changed = {**facts, "driver": {"version": "590.44.01"}}
    book = ledger(runs, ("r1", "r2", "r3", "r4"))
    for run_id, its_facts in (("r1", facts), ("r2", facts), ("r3", changed), ("r4", changed)):
        write(runs, f"{run_id}.json", result(run_id, host_facts=its_facts))
    book.refresh()
    held = book.results
    assert [held[r].host_facts for r in ("r1", "r2", "r3", "r4")] == [facts, facts, changed, changed]
    assert held["r1"].host_facts is held["r2"].host_facts
    assert held["r3"].host_facts is held["r4"].host_facts and held["r3"].host_facts is not held["r1"].host_facts
    assert [r.host_facts for r in book.accepted()[0]] == [facts, facts, changed, changed]  # handed out as held


def test_a_sweep_folder_with_junk_reads_without_a_crash(tmp_path: Path) -> None:
    sweep = tmp_path / SWEEP
    write(sweep / "ct200" / "runs", "r1.json", result("r1"))
    write(sweep / "ct200" / "runs", "nested.json", b"[" * 100_000)
    write(sweep / "ct201", "runs", b"a file where a folder should be")
    (sweep / "ct200" / "runs" / "link.json").symlink_to("/etc/passwd")
    swept = read_sweep_results(sweep)
    assert [r.run_id for r in swept.results] == ["r1"]
    assert set(swept.rejected) == {"ct200/runs/nested.json", "ct200/runs/link.json", "ct201/runs/."}
    assert "a symbolic link (not followed)" in swept.rejected["ct200/runs/link.json"]


def test_a_failure_with_evidence_survives_the_reader(tmp_path: Path) -> None:
    failure = Failure("server_died", "died", ("CUDA error: an illegal instruction\x1b[0m",))
    loaded = load_result(write(tmp_path, "r1.json", result(status="failed", failure=failure.to_json(), figures={})))
    assert loaded.failure is not None and loaded.failure.evidence == ("CUDA error: an illegal instruction\ufffd[0m",)


def test_what_the_agent_says_of_itself_is_printable() -> None:
    """progress.json is printed live (the host's last error, its servers' labels): a compromised
    agent's escape sequences reach no terminal."""
    from fleet.host.contract import AgentError, AgentState, Progress, ServerPhase, ServerProgress

    progress = Progress(
        sweep_id=SWEEP,
        agent_pid=42,
        boot_id="b1",
        started_at=1.0,
        updated_at=2.0,
        state=AgentState.running,
        total=1,
        counts={},
        servers={"s1": ServerProgress("tp1\x1b[2J", ServerPhase.running, "tp1/short", 1.5)},
        last_error=AgentError("tp1", "server_died", "died\x1b]0;owned\x07", 1.7),
    )
    read = Progress.from_json(json.dumps(progress.to_json()))
    assert read.servers["s1"].label == "tp1\ufffd[2J" and read.last_error is not None and read.last_error.message == "died\ufffd]0;owned\ufffd"
