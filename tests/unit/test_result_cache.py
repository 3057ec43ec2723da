"""The controller's cache of checked results (fleet.sweep.resultcache, issue 28): a result the
ledger checked once is read back from the user's signed cache while its file's stamp holds; an
edited, forged, torn or foreign cache, a changed file, a copied folder or a missing key fall back
to reading and checking the file, never a crash and never trust. Each test counts the files the
contract's checked reader parsed (`load_result` calls, through sys.setprofile: counted, not
timed) and compares the report with one of the cache-free reading."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest

from fleet.host.contract import RunResult, load_result
from fleet.host.contract import results as contract_results
from fleet.planning.starts import start_lines_of
from fleet.report import build_report, load_sweep, render
from fleet.sweep import resultcache
from fleet.sweep.fixing import classify_result
from fleet.sweep.ledger import ResultLedger, host_ledger, read_sweep_results
from fleet.sweep.resultcache import KEY_FILE, STATE_DIR_ENV, ResultCache, user_key

REPO = Path(__file__).resolve().parents[2]
NOISY = REPO / "tests" / "fixtures" / "report" / "noisy"
HOST = "local"
T = TypeVar("T")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own state folder: its key and caches."""
    folder = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A copy of a real sim sweep's folder (24 results), named as its sweep.json says."""
    sweep_id = json.loads((NOISY / "sweep.json").read_text())["sweep_id"]
    directory = tmp_path / "results" / sweep_id
    shutil.copytree(NOISY, directory)
    return directory


def parsed(work: Callable[[], T]) -> tuple[T, int]:
    """`work()`'s value and how many result files the contract's checked reader parsed for it."""
    calls = 0
    code = contract_results.load_result.__code__

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is code:
            calls += 1

    sys.setprofile(profile)
    try:
        value = work()
    finally:
        sys.setprofile(None)
    return value, calls


def report(directory: Path) -> list[str]:
    """The Markdown and JSON-lines reports of the folder, but for the clock's line."""
    data = load_sweep(directory)
    return [line for fmt in ("md", "json") for line in render(build_report([data]), fmt).splitlines() if not line.startswith("Generated ")]


def results_count(directory: Path) -> int:
    return len(list((directory / HOST / "runs").glob("*.json")))


def cache_file(directory: Path) -> Path:
    cache = ResultCache.of(directory / HOST / "runs", directory.name, HOST)
    assert cache is not None
    return cache.path


def no_cache_report(directory: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The report read with no key to be had (the state folder under a file): every file checked."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with monkeypatch.context() as patched:
        patched.setenv(STATE_DIR_ENV, str(blocker / "state"))
        lines, parses = parsed(lambda: report(directory))
    assert parses == results_count(directory)
    return lines


def test_a_warm_report_parses_nothing_and_is_the_same_report(state: Path, sweep: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    total = results_count(sweep)
    first, parses = parsed(lambda: report(sweep))
    assert parses == total and cache_file(sweep).is_file()
    warm, parses = parsed(lambda: report(sweep))
    assert parses == 0
    assert warm == first == no_cache_report(sweep, monkeypatch, tmp_path)


def test_the_key_and_the_cache_are_the_users_alone(state: Path, sweep: Path) -> None:
    report(sweep)
    assert stat.S_IMODE((state / KEY_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache_file(sweep).stat().st_mode) == 0o600
    assert not cache_file(sweep).is_relative_to(sweep)  # never where a host's rsync writes
    assert user_key(state) == (state / KEY_FILE).read_bytes()  # made once, then read


def test_a_key_others_can_read_is_no_key_and_is_left_alone(state: Path, sweep: Path) -> None:
    state.mkdir(mode=0o700)
    (state / KEY_FILE).write_bytes(b"k" * 32)
    (state / KEY_FILE).chmod(0o644)
    assert user_key(state) is None
    _, parses = parsed(lambda: report(sweep))
    _, again = parsed(lambda: report(sweep))
    assert parses == again == results_count(sweep)
    assert (state / KEY_FILE).read_bytes() == b"k" * 32


def forge(cache: ResultCache, edit: Callable[[dict[str, Any]], None], signer: str) -> None:
    """The folder's cache with its entries edited, then: its first chunk's bytes replaced under its
    old signature ("stale signature"), or the whole signed anew with a forger's own key ("another
    key") or with the user's ("the user's key": what only the user's fleet can do)."""
    entries = cache.load()
    edit(entries)
    if signer == "another key":
        ResultCache(cache.path, b"x" * 32, cache._scope).save(entries)
    elif signer == "the user's key":
        cache.save(entries)
    else:
        data = cache.path.read_bytes()
        at = len(resultcache._MAGIC)
        length, mac = resultcache._RECORD.unpack_from(data, at)
        first = pickle.loads(data[at + resultcache._RECORD.size : at + resultcache._RECORD.size + length])
        payload = pickle.dumps({name: entries[name] for name in first})
        rest = data[at + resultcache._RECORD.size + length :]
        cache.path.write_bytes(data[:at] + resultcache._RECORD.pack(len(payload), mac) + payload + rest)


def faster(entries: dict[str, Any]) -> None:
    """Every cached result's throughput made 1000 tok/s higher than its file says."""
    for name, (stamp, digest) in entries.items():
        figures = {**digest.result.figures, "output_tok_s": (digest.result.figures.get("output_tok_s") or 0) + 1000}
        entries[name] = (stamp, digest._replace(result=replace(digest.result, figures=figures)))


def throughputs(directory: Path) -> dict[str, Any]:
    return {r.run_id: r.figures.get("output_tok_s") for r in read_sweep_results(directory, digests=True).results}


@pytest.mark.parametrize("signer", ["stale signature", "another key"])
def test_a_tampered_cache_is_not_trusted_and_the_results_are_read_again(state: Path, sweep: Path, signer: str) -> None:
    truth, _ = parsed(lambda: throughputs(sweep))
    cache = ResultCache.of(sweep / HOST / "runs", sweep.name, HOST)
    assert cache is not None
    forge(cache, faster, signer)
    got, parses = parsed(lambda: throughputs(sweep))
    assert got == truth and parses == results_count(sweep)


def test_a_forgery_signed_with_the_users_key_is_taken_which_is_why_the_key_is_kept_0600(state: Path, sweep: Path) -> None:
    """The other side of the test above: the signature is what stands between a cache and trust
    (were the check missing, the forgeries above would be read as the truth)."""
    truth = throughputs(sweep)
    cache = ResultCache.of(sweep / HOST / "runs", sweep.name, HOST)
    assert cache is not None
    forge(cache, faster, "the user's key")
    got, parses = parsed(lambda: throughputs(sweep))
    assert parses == 0 and got == {run: (tok_s or 0) + 1000 for run, tok_s in truth.items()}


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "a folder", "a symlink to the results"])
def test_a_corrupt_cache_costs_a_reading_never_a_crash(state: Path, sweep: Path, damage: str) -> None:
    truth = report(sweep)
    path = cache_file(sweep)
    data = path.read_bytes()
    path.unlink()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif damage == "a folder":
        path.mkdir()
    else:
        path.symlink_to(next((sweep / HOST / "runs").glob("*.json")))
    got, parses = parsed(lambda: report(sweep))
    assert got == truth and parses == results_count(sweep)


def test_a_changed_result_file_is_checked_again(state: Path, sweep: Path) -> None:
    """Rewritten in place to the same size, its mtime set back: only its ctime tells, and the
    ledger reads it again; a file turned bad is rejected, not served from the cache."""
    throughputs(sweep)
    path = max((sweep / HOST / "runs").glob("*.json"), key=lambda p: json.loads(p.read_text())["figures"].get("output_tok_s") or 0)
    text = path.read_text()
    before = path.stat()
    tok_s = json.dumps(json.loads(text)["figures"]["output_tok_s"])
    changed = text.replace(f'"output_tok_s": {tok_s}', f'"output_tok_s": {int(tok_s[0]) % 9 + 1}{tok_s[1:]}', 1)  # first digit changed
    assert len(changed) == len(text) and json.loads(changed)["figures"]["output_tok_s"] != float(tok_s)
    path.write_text(changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    got, parses = parsed(lambda: throughputs(sweep))
    assert parses == 1 and got[path.stem] == json.loads(changed)["figures"]["output_tok_s"]
    path.write_text(text[: len(text) // 2])  # torn: rejected with why, though its old digest is cached
    swept = read_sweep_results(sweep, digests=True)
    assert path.stem not in {r.run_id for r in swept.results}
    assert f"{HOST}/runs/{path.name}" in swept.rejected


def test_a_copied_folder_is_read_afresh_and_another_users_cache_is_not_trusted(state: Path, sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = report(sweep)
    copy = tmp_path / "elsewhere" / sweep.name
    shutil.copytree(sweep, copy)  # copy2: the same mtimes, new inodes
    got, parses = parsed(lambda: report(copy))
    assert [line.replace(str(copy), str(sweep)) for line in got] == truth and parses == results_count(copy)
    # Another user's state folder (another key, made on first use) given this user's cache of the
    # folder, under the name it has there too: refused.
    mine = cache_file(sweep)
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "other-user"))
    theirs = cache_file(sweep)
    assert theirs.name == mine.name and theirs != mine
    theirs.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(mine, theirs)
    got, parses = parsed(lambda: report(sweep))
    assert got == truth and parses == results_count(sweep)


def test_a_cached_result_is_still_checked_for_where_it_lies(state: Path, sweep: Path) -> None:
    """The cache stands for a file's content checks; the sweep's expectations (which runs this
    host was given) are checked on every reading."""
    runs = sweep / HOST / "runs"
    read_sweep_results(sweep, digests=True)
    names = sorted(runs.glob("*.json"))
    ledger = ResultLedger(runs, sweep.name, HOST, {p.stem for p in names[1:]}, digests=True, cache=ResultCache.of(runs, sweep.name, HOST))
    _, parses = parsed(ledger.refresh)
    assert parses == 0 and set(ledger.rejected) == {names[0].name}
    assert "run_id: expected a run this sweep gave" in ledger.rejected[names[0].name]


def test_the_sweeps_ledger_writes_the_cache_the_report_reads(state: Path, sweep: Path) -> None:
    """A sweep's ledgers hold digests (what a report and the sweep's bookkeeping read, not whole
    results: a sweep holds its results to its summary); at its summary (read_sweep_results with its
    ledgers) they write the folder's cache, and the report after it parses no file."""
    ledger = host_ledger(sweep, HOST)
    swept = read_sweep_results(sweep, {HOST: ledger})
    assert swept.results and not any(r.requests or r.host_facts for r in swept.results)  # digests
    assert set(swept.ttft_s) == {(HOST, r.run_id) for r in swept.results}  # with the requests' TTFTs
    _, parses = parsed(lambda: report(sweep))
    assert parses == 0


def test_a_sweeps_ledger_keeps_what_its_bookkeeping_reads(state: Path, sweep: Path) -> None:
    """Of each result a sweep's ledger keeps what the sweep reads to its end: status, times, the
    failure; a failed run's request errors (its repair diagnoses them, fleet.sweep.fixing); the
    server's start lines (the start history, fleet.planning.starts); and what a report reads."""
    runs = sweep / HOST / "runs"
    path = next(p for p in sorted(runs.glob("*.json")) if json.loads(p.read_text()).get("requests"))
    data = json.loads(path.read_text())
    data["status"], data["failure"] = "failed", {"class": "requests_failed", "message": "every request failed", "evidence": []}
    data["figures"]["errors"] = {"http_400": {"count": 4, "sample": "This model's maximum context length is 32768 tokens"}}
    data["server"] = {**(data.get("server") or {}), "start_lines": ["max_total_num_tokens=241770, chunked_prefill_size=8192"]}
    path.write_text(json.dumps(data))
    whole = load_result(path)
    ledger = host_ledger(sweep, HOST)
    ledger.refresh()
    held = ledger.results[whole.run_id]
    assert (held.status, held.failure, held.started_at, held.ended_at, held.server_id, held.label) == (whole.status, whole.failure, whole.started_at, whole.ended_at, whole.server_id, whole.label)
    assert held.figures["errors"] == whole.figures["errors"]
    assert classify_result(held) == classify_result(whole) and classify_result(whole)[0] == "context_length_exceeded"
    assert start_lines_of(held) == start_lines_of(whole) == ("max_total_num_tokens=241770, chunked_prefill_size=8192",)
    assert held.requests == () and held.host_facts is None and whole.requests


def test_two_writers_at_once_leave_one_whole_cache(state: Path, sweep: Path) -> None:
    """Two processes saving one folder's cache (threads here; the same renames): every load sees
    one writer's whole file (or the one before), never a torn one."""
    runs = sweep / HOST / "runs"
    read_sweep_results(sweep, digests=True)
    cache = ResultCache.of(runs, sweep.name, HOST)
    assert cache is not None
    full = cache.load()
    names = sorted(full)
    halves = [{n: full[n] for n in names[: len(names) // 2]}, {n: full[n] for n in names[len(names) // 2 :]}]
    seen: list[set[str]] = []

    def write(entries: dict[str, Any]) -> None:
        for _ in range(20):
            cache.save(entries)

    writers = [threading.Thread(target=write, args=(half,)) for half in halves]
    for writer in writers:
        writer.start()
    while any(writer.is_alive() for writer in writers):
        seen.append(set(cache.load()))
    for writer in writers:
        writer.join()
    seen.append(set(cache.load()))
    assert all(names in ({*full}, {*halves[0]}, {*halves[1]}) for names in seen), {len(s) for s in seen}  # the first: before either wrote
    assert seen[-1] in ({*halves[0]}, {*halves[1]})
    assert not [p for p in cache.path.parent.iterdir() if p.name.startswith(".")]  # no temp file left


def test_a_cache_of_many_chunks_reads_whole_and_each_chunk_is_signed_for_its_place(state: Path, sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resultcache, "_CHUNK", 5)  # 24 results: 5 chunks
    truth = throughputs(sweep)
    got, parses = parsed(lambda: throughputs(sweep))
    assert got == truth and parses == 0
    data = cache_file(sweep).read_bytes()
    at, chunks = len(resultcache._MAGIC), []
    while at < len(data):
        length, _ = resultcache._RECORD.unpack_from(data, at)
        chunks.append(data[at : at + resultcache._RECORD.size + length])
        at += resultcache._RECORD.size + length
    assert len(chunks) == 5
    cache_file(sweep).write_bytes(data[: len(resultcache._MAGIC)] + chunks[1] + chunks[0] + b"".join(chunks[2:]))  # two swapped
    got, parses = parsed(lambda: throughputs(sweep))
    assert got == truth and parses == results_count(sweep)


def test_a_digest_is_made_as_pickle_makes_one() -> None:
    """`reported` makes its RunResult without __init__ (the fields are the checked result's), as
    unpickling the cache does: a RunResult that derived a field in __post_init__ would lack it in
    both, so it must derive none."""
    assert not hasattr(RunResult, "__post_init__") and not hasattr(RunResult, "__slots__")
