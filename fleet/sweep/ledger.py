"""The ledger of pulled results: the one reader of `results/<sweep>/<host>/runs/`.

What a host sends back is untrusted input: a corrupt disk, a broken agent or a compromised host
can put anything there. Every result goes through `ResultLedger`, which reads each file once
(again only when rsync puts a new file in its place), through the contract's bounded reader
(fleet.host.contract.reader: regular files only, no symlink followed, size, depth, UTF-8, finite
numbers, control characters out of every string), and then checks it against the sweep: named
after its run id, written for this sweep and by this host, for a run the sweep planned for it.
A file that fails is rejected with its reason, kept aside from the results and named (by the
caller, once), never a crash: the loops of a sweep, its summary, `fleet report` and `fleet
diagnose` all read results here, so none of them counts a forged result or falls over a bad one.

The ledger is also the index the sweep's bookkeeping works from (which runs have a result, which
came in since the last look): incremental, so a poll costs one directory listing, not a parse of
every result so far; and where the pull names what it wrote, not even that (`refresh(written)`).

And it keeps the user's cache of checked results (fleet.sweep.resultcache): a folder's ledger
(`host_ledger`, `read_sweep_results`) writes what a report reads of each result it accepted, signed,
when the sweep or the report reads the whole folder; a ledger that holds only that part (a
sweep's, `fleet report`'s) takes it from there for every file whose stamp is the one it was checked
at, and checks every other file as ever.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fleet.host.contract import ContractError, RunResult, Shard, SweepDir, load_result
from fleet.host.contract.reader import read_text
from fleet.sweep.resultcache import Digest, Entry, ResultCache, TTFTs, digest

# The file's identity as rsync leaves it (mtime first: files sort as they came): a pulled file is
# renamed into place, so a new copy is a new inode (and a rewrite a new size or time); its ctime,
# last, is one no writer can set back (rsync and a host can set the mtime), which the cache's
# entries, kept across processes, rest on.
_Stamp = tuple[int, int, int, int, int]

# The checked reader's parser here (fleet.host.contract.reader.Decoder): orjson, ~3.5x json's C
# parser on a result of 19 KB (0.055 against 0.20 ms), most of a first `fleet report` (issue 28).
# Where it differs from json (NaN and Infinity, 1e999, lone surrogate escapes, nesting past 1,024:
# refused; an integer past 64 bits: a float of 2**63 or more, past the results' MAX_MAGNITUDE) the
# one pass does not accept the file and the exact path, json's, decides: a file is accepted or
# refused here as on a host, with the same values and the same words (tests/unit/test_ledger_one_pass.py).
DECODE = orjson.loads

# How many distinct host facts a ledger keeps to share among its results (ResultLedger._shared_facts).
_DISTINCT_FACTS = 4


class ResultLedger:
    """The results pulled into one host's `runs/` folder, each file read once. Thread-safe."""

    def __init__(self, runs_dir: Path, sweep_id: str, host: str, expected: Iterable[str] | None = None, *, digests: bool = False, cache: ResultCache | None = None) -> None:
        """`expected`: the runs this host may have results for (more with `expect`); None: any
        run (a folder read without its shard), checked by name, sweep and host only. `digests`:
        hold of each accepted result only what a report reads (fleet.sweep.resultcache.Digest:
        not thousands of whole results), taken from `cache` where it has the file's as stamped;
        else whole results. `cache`: this folder's, written by `save`."""
        self._digests = digests
        self._cache = cache
        self._cached: dict[str, Entry] | None = None  # the cache's entries, read at the first refresh (digests only)
        self._entries: dict[str, Entry] = {}  # file name -> what the cache gets of it (digests only)
        self._unsaved = False  # accepted or forgotten since the cache was read or written
        self.runs_dir = runs_dir
        self._dir = os.fspath(runs_dir)  # its files' paths joined as text: a Path join is ~5 us, 50,000 of them
        self.sweep_id = sweep_id
        self.host = host
        self._lock = threading.Lock()
        self._expected: set[str] | None = set(expected) if expected is not None else None
        self._stamps: dict[str, _Stamp] = {}  # file name -> the stamp it was read at
        self._results: dict[str, RunResult] = {}  # run id -> its result
        self._rejected: dict[str, str] = {}  # file name -> why it is not a result
        # In the order they were first accepted (rejected): what `accepted(since)` hands out, so
        # that each reader (the host's loop, the progress display) sees each one once.
        self._accepted: list[RunResult] = []
        self._rejections: list[tuple[str, str]] = []
        self._announced: set[str] = set()
        self._looked = False  # the whole folder listed once: what a pull names is then all that is new
        self._host_facts: list[dict[str, Any]] = []  # the distinct facts its results carried, each held once (_shared_facts)

    # ------------------------------------------------------------------------------ reading

    def expect(self, run_ids: Iterable[str]) -> None:
        """Runs given to this host since (a repair round's, another host's handed over): their
        results belong here too. A file rejected before as unexpected is read again."""
        with self._lock:
            if self._expected is None:
                self._expected = set()
            new = set(run_ids) - self._expected
            self._expected |= new
            for run_id in new:
                if f"{run_id}.json" in self._rejected:
                    self._stamps.pop(f"{run_id}.json", None)

    def refresh(self, written: Iterable[str] | None = None) -> None:
        """Read what is new or changed since the last look. A listing of names, then a look at
        new names and rejected ones only: an accepted result is the agent's, written once (a
        host that rewrites one later changes nothing here), so a poll of a folder of thousands
        costs one directory read, not thousands of stats.

        `written`: the names a pull just wrote into the folder (Transport.rsync_pull's
        `list_written`), from a pull that ran whole: then only those and the rejected files are
        looked at, not the folder (a sweep's pulls cost what came, not what is there: a listing
        per pull made the tracker's work grow with the square of the runs). A file gone is noticed
        by the next whole look; the first look is always whole (what an earlier controller pulled)."""
        with self._lock:
            if self._digests and self._cached is None:
                self._cached = self._cache.load() if self._cache is not None else {}
            if written is not None and self._looked:
                # A pull's list is the host's names as rsync printed them: only a plain result name
                # of this folder is looked up.
                named = {name for name in written if _plain_result_name(name)}
                self._take_new(named - self._stamps.keys() | (self._rejected.keys() - {"."}))
                return
            self._looked = True
            try:
                names = {name for name in os.listdir(self.runs_dir) if _plain_result_name(name)}
            except FileNotFoundError:
                names = set()
            except NotADirectoryError:
                # A host cannot make one (rsync pulls into a folder), a person can: said, not a crash.
                self._reject(".", f"{self.runs_dir}: expected a folder of results, got a file")
                return
            self._rejected.pop(".", None)
            # Dot files are rsync's and the atomic writer's temporaries (never results); a run's bad
            # copy the agent keeps aside is `<run>.unreadable`.
            for name in self._stamps.keys() - names:  # gone (a resume that cleared a bad copy)
                self._forget(name)
            self._take_new((names - self._stamps.keys()) | (self._rejected.keys() & names))

    def _take_new(self, candidates: Iterable[str]) -> None:
        """Read the candidates that are new or changed, in the order they came (the lock held)."""
        stamped = [(stamp, name) for name in candidates if (stamp := self._stamp(name)) is not None]  # else gone since
        for stamp, name in sorted(stamped):  # as they came
            if self._stamps.get(name) == stamp:
                continue  # a rejected file unchanged
            self._stamps[name] = stamp
            self._take(name, stamp)

    def _stamp(self, name: str) -> _Stamp | None:
        try:
            info = os.lstat(os.path.join(self._dir, name))
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_ino, info.st_size, stat.S_IFMT(info.st_mode), info.st_ctime_ns)

    def _take(self, name: str, stamp: _Stamp) -> None:
        run_id = name.removesuffix(".json")
        held, why = self._held(name, stamp)
        if held is None:
            self._results.pop(run_id, None)
            self._entries.pop(name, None)
            self._reject(name, why)
            return
        self._rejected.pop(name, None)
        if isinstance(held, Digest):
            self._entries[name] = (stamp, held)
            held = held.result
        else:
            self._shared_facts(held)
        if run_id not in self._announced:  # a run is news once, whatever its file does later
            self._announced.add(run_id)
            self._accepted.append(held)
        self._results[run_id] = held

    def _held(self, name: str, stamp: _Stamp) -> tuple[RunResult | Digest | None, str]:
        """What this ledger holds of a file (or None, and why not): its digest from the cache
        where the cache has it as stamped now (its content was checked at that stamp; where it
        lies is checked again: this ledger's sweep, host and runs), else the file read and checked,
        whole or its digest."""
        cached = self._cached.get(name) if self._cached else None
        if cached is not None and cached[0] == stamp:
            problem = self.misplaced(cached[1].result)
            return (None, f"{os.path.join(self._dir, name)}: {problem}") if problem else (cached[1], "")
        self._unsaved = True
        result, why = self._read(name)
        return (digest(result), "") if result is not None and self._digests else (result, why)

    def _shared_facts(self, result: RunResult) -> None:
        """Every result of a host carries the host's facts (GPUs, driver, disks: 18 of a result's
        49 KiB in memory, the largest part), the same from one result to the next until the host
        changes (a reboot, a new driver): where this ledger holds whole results (a Slurm task's, a
        folder read without digests), a result whose facts equal ones held before holds that copy,
        not its own (issue 28: controller memory per result)."""
        facts = result.host_facts
        if facts is None:
            return
        for held in self._host_facts:
            if facts == held:
                # The result is this ledger's own, read a moment ago and not yet handed out: set as
                # its checked fields were (frozen against its readers, not against its reader).
                result.__dict__["host_facts"] = held
                return
        # A few distinct ones at most in a sweep; bounded all the same (a host that sends new
        # facts with every result costs a comparison per kept one, not a growing list).
        self._host_facts = [facts, *self._host_facts[: _DISTINCT_FACTS - 1]]

    def _reject(self, name: str, why: str) -> None:
        if self._rejected.get(name) != why:
            self._rejections.append((name, why))
        self._rejected[name] = why

    def accepted(self, since: int = 0) -> tuple[list[RunResult], int]:
        """Results accepted after the first `since` (in the order they were), and the count to
        pass next time."""
        with self._lock:
            return self._accepted[since:], len(self._accepted)

    def rejections(self, since: int = 0) -> tuple[list[tuple[str, str]], int]:
        """Files rejected (file name, why) after the first `since`, and the count to pass next time."""
        with self._lock:
            return self._rejections[since:], len(self._rejections)

    def _read(self, name: str) -> tuple[RunResult | None, str]:
        path = os.path.join(self._dir, name)
        try:
            result = load_result(path, DECODE)  # bounded, regular file only, never through a symlink
        except ContractError as exc:
            return None, str(exc)
        problem = self.misplaced(result)
        return (None, f"{path}: {problem}") if problem else (result, "")

    def misplaced(self, result: RunResult) -> str:
        """Why a well-formed result does not belong in this folder, or ''."""
        if result.sweep_id != self.sweep_id:
            return f"sweep_id: expected {self.sweep_id} (the sweep it was pulled into), got {result.sweep_id!r}"
        if result.host != self.host:
            return f"host: expected {self.host} (the host it was pulled from), got {result.host!r}"
        if self._expected is not None and result.run_id not in self._expected:
            return f"run_id: expected a run this sweep gave {self.host}, got {result.run_id!r}"
        return ""

    def _forget(self, name: str) -> None:
        self._stamps.pop(name, None)
        self._rejected.pop(name, None)
        self._results.pop(name.removesuffix(".json"), None)
        self._entries.pop(name, None)
        self._unsaved = True

    def save(self) -> None:
        """This folder's cache made what this ledger accepted, where it read a file or lost one
        since the cache was read or last written: the digests it holds, or of the whole results
        it holds (a sweep's, at its summary). Each digest under the stamp its file was read at (an
        accepted file is not read again: one that changed since is checked by the next reader)."""
        with self._lock:
            if self._cache is None or not self._unsaved:
                return
            self._unsaved = False
            if self._digests:  # written as held (no copy of 50,000 entries): a report's ledger has no other reader
                self._cache.save(self._entries)
                return
            whole = [(f"{run_id}.json", result) for run_id, result in self._results.items()]
            stamps = {name: self._stamps[name] for name, _ in whole}
        # A sweep's whole results' digests are made outside the lock: the hosts' loops may still poll.
        self._cache.save({name: (stamps[name], digest(result)) for name, result in whole})

    # ------------------------------------------------------------------------------ the index

    @property
    def results(self) -> dict[str, RunResult]:
        """Run id -> its result, for every result that passed (as of the last refresh)."""
        with self._lock:
            return dict(self._results)

    @property
    def ttft_s(self) -> dict[str, TTFTs]:
        """Run id -> its requests' TTFTs (fleet.sweep.resultcache.ttfts), for every result that
        passed, where this ledger holds digests; else {}."""
        with self._lock:
            return {name.removesuffix(".json"): held.ttft_s for name, (_, held) in self._entries.items()}

    @property
    def rejected(self) -> dict[str, str]:
        """File name -> why it is not a result (as of the last refresh)."""
        with self._lock:
            return dict(self._rejected)

    @property
    def present_count(self) -> int:
        """How many run ids `present` has, without making the set."""
        with self._lock:
            return len(self._stamps)

    @property
    def present(self) -> set[str]:
        """Every run id with a file here, read or rejected: a run the agent has answered (a bad
        answer is redone by the agent, not moved to another host)."""
        with self._lock:
            return {name.removesuffix(".json") for name in self._stamps}


@dataclass(frozen=True)
class SweepResults:
    """Every result of a sweep folder that passed, and every file that did not (path relative to
    the folder -> why); with `digests`, each result's TTFTs by (host, run id)."""

    results: list[RunResult]
    rejected: dict[str, str]
    ttft_s: dict[tuple[str, str], TTFTs] = field(default_factory=dict)


def host_ledger(directory: Path, host: str, expected: Iterable[str] | None = None) -> ResultLedger:
    """The ledger of one host's folder of the sweep folder `directory` (named after its sweep id),
    which keeps the folder's cache of checked results (written by `read_sweep_results`). It holds
    each result's digest (fleet.sweep.resultcache: what a report and the sweep's own bookkeeping
    read of it, the requests' TTFTs included), not the whole result: a sweep keeps its results to
    its summary, and whole ones grew its memory by their requests, host facts and extras (issue 28:
    33 KiB a run at 8k runs of the scale benchmark's short results; a real result's requests are
    more)."""
    runs = directory / host / SweepDir.RUNS
    return ResultLedger(runs, directory.name, host, expected, digests=True, cache=ResultCache.of(runs, directory.name, host))


def read_sweep_results(directory: Path, ledgers: Mapping[str, ResultLedger] | None = None, sweep_id: str | None = None, *, digests: bool = False) -> SweepResults:
    """Every host folder's results (`<host>/runs/*.json`), through the given ledgers where a live
    sweep has them (refreshed, not read again) and otherwise a ledger per folder that checks a
    result's run against the host's saved shard where there is one. `sweep_id`: sweep.json's,
    where the folder may have been renamed (default: the folder's name). `digests`: the folders'
    own ledgers hold only what a report reads, from the user's cache where it has it
    (ResultLedger's). Each ledger then writes its folder's cache (`ResultLedger.save`)."""
    results: list[RunResult] = []
    rejected: dict[str, str] = {}
    ttft_s: dict[tuple[str, str], TTFTs] = {}
    try:
        folders = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir(follow_symlinks=False))
    except OSError:
        folders = []
    names = sorted(set(folders) | set(ledgers or {}))
    for name in names:
        ledger = (ledgers or {}).get(name)
        if ledger is None:
            runs = directory / name / SweepDir.RUNS
            if not os.path.lexists(runs):
                continue
            cache = ResultCache.of(runs, sweep_id or directory.name, name)
            ledger = ResultLedger(runs, sweep_id or directory.name, name, _saved_shard_runs(directory / name), digests=digests, cache=cache)
        ledger.refresh()
        ledger.save()
        results.extend(ledger.results.values())
        ttft_s.update(((ledger.host, run_id), ttfts) for run_id, ttfts in ledger.ttft_s.items())
        rejected.update({f"{name}/{SweepDir.RUNS}/{file}": why for file, why in ledger.rejected.items()})
    return SweepResults(sorted(results, key=lambda r: (r.host, r.run_id)), rejected, ttft_s)


def _plain_result_name(name: str) -> bool:
    """A result's file name as this folder holds one: `<run>.json`, no folder, no dot file (rsync's
    and the atomic writer's temporaries)."""
    return name.endswith(".json") and not name.startswith(".") and "/" not in name


def _saved_shard_runs(host_dir: Path) -> set[str] | None:
    """The runs of the controller's copy of a host's shard, if it has a readable one (a folder
    without one, such as a report's fixture or a Slurm cluster's, is checked by name and host)."""
    path = host_dir / SweepDir.SHARD
    if not os.path.lexists(path):
        return None
    try:
        shard = Shard.from_json(read_text(path), str(path))  # bounded, never through a symlink
    except ContractError:
        return None
    return {run.run_id for _, run in shard.runs}
