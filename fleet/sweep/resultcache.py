"""The controller's cache of results already checked: a result file is parsed and checked once
(fleet.sweep.ledger, through the contract's bounded reader), and what a report reads of it (its
`Digest`) is kept in the user's state folder under the file's stamp, so that the next `fleet
report` of the folder reads 50,000 results in one load instead of 50,000 parses (issue 28).

Trust. A result is a host's word and the cache stands in for the checks, so nothing but fleet
itself may have written it: every cache file is signed (HMAC-SHA256) with a key of the user's,
made on first use in the state folder (`$FLEET_STATE_DIR`, else `$XDG_STATE_HOME/fleet`, else
`~/.local/state/fleet`; the key 0600 in a 0700 folder) and never under a sweep folder, where a
host's rsync writes (`<host>/`) and which a report never writes into. The signature also covers
the folder's real path, the sweep and host the ledger reads for, and a fingerprint of the code
that checks and cuts a result: a cache of another folder, another user (another key), another
fleet (other checks) or one torn or edited does not verify and is not unpickled; every result is
then checked again, as with no cache. A verified entry is used only while the file's stamp
(fleet.sweep.ledger: mtime, inode, size, type, ctime, which no writer can set back) is the one it
was checked at.

Two processes writing one folder's cache (a sweep's summary, a report beside it) each rename a
whole file into place (fleet.host.atomic): the last one wins, neither tears the other's.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import itertools
import json
import os
import pickle
import secrets
import stat
import struct
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from fleet.host.atomic import atomic_file
from fleet.host.agent.lossless import left_to_the_controller
from fleet.host.contract import RunResult
from fleet.host.contract import reader as contract_reader
from fleet.host.contract import results as contract_results

# ------------------------------------------------------------------------------ what is kept

# What the report reads of a result (fleet.report.model: rows_of, _with_figures, the lossless
# checks), and what a sweep's bookkeeping reads of one to its end (its ledgers hold digests too:
# fleet.sweep.ledger.host_ledger); `reported` keeps only these. tests/unit/test_report_scale.py
# checks that every fixture's report is the same from whole results. `errors`: a failed run's
# request errors, which the sweep's repair diagnoses (fleet.sweep.fixing.classify_result).
FIGURE_FIELDS = ("requests", "output_tok_s", "output_tok_s_per_request", "request_throughput", "acceptance_length", "ttft_s", "itl_s", "energy", "level", "repeat", "errors")
# A repeat of a run is one pass of the run's row (fleet.report.model._with_figures): of its
# figures the report reads these, not its requests, request rate, energy or TTFT summary (the
# row's are the run's; the pass's TTFTs are its requests'): 1.9 of a benchmark result's 8.6 KiB kept.
PASS_FIELDS = ("output_tok_s", "output_tok_s_per_request", "acceptance_length", "itl_s", "repeat")
# Extras of figures, one per level (a row each: FIGURE_FIELDS) or repeat (a pass each); other extras kept whole.
SECTIONS = {"levels": FIGURE_FIELDS, "repeats": PASS_FIELDS}
# `start_lines`: the memory lines the server's start logged, which a sweep adds to the start
# history at its end (fleet.planning.starts.start_lines_of).
SERVER_FIELDS = ("max_running_requests", "start_lines")
WORKLOAD_FIELDS = ("name", "kind")

# The TTFTs of a result's successful requests by their tags (level, repeat): None where absent.
TTFTs = dict[tuple[Any, Any], tuple[float, ...]]


class Digest(NamedTuple):
    """What a report holds of one result: its `reported` part and its requests' `ttfts`."""

    result: RunResult
    ttft_s: TTFTs


def digest(result: RunResult) -> Digest:
    return Digest(reported(result), ttfts(result.requests))


def reported(result: RunResult) -> RunResult:
    """The part of a result the report reads, as a RunResult: no requests (the report reads their
    `ttfts`), its figures and their levels with `FIGURE_FIELDS`, its repeats with `PASS_FIELDS`, server and workload with theirs,
    no host facts (the report takes a host's from the sweep's hosts/ files); other extras whole. A
    result of the scale benchmark (19 KB of JSON) is 49 KiB loaded whole, 9 KiB so with its TTFTs
    (issue 28: 50,000 results within 1 GiB)."""
    extras = {key: value for key, value in result.extras.items() if key not in SECTIONS}
    # The report reads the outputs the controller compares (a few KiB of token ids and texts,
    # most of a sim result's digest), not those of a candidate the agent judged.
    if isinstance(lossless := extras.get("lossless"), dict) and left_to_the_controller(lossless) is None:
        extras["lossless"] = {key: value for key, value in lossless.items() if key != "outputs"}
    for key, kept_fields in SECTIONS.items():
        if isinstance(sections := result.extras.get(key), list):
            extras[key] = [_figures(section, kept_fields) for section in sections]  # every item kept: a repeat's number defaults to its index
    server = _only(result.server, SERVER_FIELDS) if result.server is not None else None
    # Made as pickle makes one, its fields set without __init__ (they are the checked result's):
    # dataclasses.replace is ~70 % of this function, ~1 s of a first 50,000-result report.
    kept = object.__new__(RunResult)
    kept.__dict__.update(result.__dict__, host_facts=None, requests=(), figures=_figures(result.figures, FIGURE_FIELDS), extras=extras, server=server,
                         workload=_only(result.workload, WORKLOAD_FIELDS))  # fmt: skip
    return kept


def ttfts(requests: Iterable[Mapping[str, Any]]) -> TTFTs:
    """The TTFTs of the requests that succeeded and have one, by (level, repeat), each in the
    requests' order: what a pass of the report takes of its requests (fleet.report.model)."""
    grouped: dict[tuple[Any, Any], list[float]] = {}
    for request in requests:
        ttft = request.get("ttft_s")
        if request.get("ok") and isinstance(ttft, (int, float)):
            grouped.setdefault((request.get("level"), request.get("repeat")), []).append(float(ttft))
    return {tags: tuple(values) for tags, values in grouped.items()}


def _figures(section: Any, kept_fields: tuple[str, ...]) -> Any:
    return _only(section, kept_fields) if isinstance(section, dict) else section


def _only(mapping: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: mapping[key] for key in keys if key in mapping}


# ------------------------------------------------------------------------------ where, and the key

STATE_DIR_ENV = "FLEET_STATE_DIR"
KEY_FILE = "results-cache.key"
CACHE_FOLDER = "results-cache"
_KEY_BYTES = 32

# A file's identity as the ledger stamps it (fleet.sweep.ledger._stamp), and a cache's entry.
Stamp = tuple[int, ...]
Entry = tuple[Stamp, Digest]

# The file: _MAGIC, then chunks of up to _CHUNK entries, each its length, its signature (over the
# scope and its place in the file) and its pickle.
_MAGIC = b"fleet.result-cache/2\n"
_RECORD = struct.Struct(">Q32s")
_CHUNK = 2048  # ~7 MB of pickle a chunk


def state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The controller's per-user state folder (an empty setting counts as unset: it would be the
    current folder)."""
    if override := environ.get(STATE_DIR_ENV, "").strip():
        return Path(override)
    return Path(environ.get("XDG_STATE_HOME", "").strip() or os.path.expanduser("~/.local/state")) / "fleet"


def user_key(directory: Path) -> bytes | None:
    """The user's key in `directory`, made there on first use; None where there is none to be had
    (a read-only home, a key file others could read or that is not ours): no cache then, every
    result is checked, as before the cache."""
    path = directory / KEY_FILE
    if (key := _read_key(path)) is not None or os.path.lexists(path):
        return key
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".key-", dir=directory)  # mkstemp: 0600
        try:
            os.write(descriptor, secrets.token_bytes(_KEY_BYTES))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.link(temporary, path)  # never over another process's key: the first one made is everyone's
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
    except OSError:
        return None
    return _read_key(path)


def _read_key(path: Path) -> bytes | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077 or info.st_size != _KEY_BYTES:
            return None
        key = os.read(descriptor, _KEY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return key if len(key) == _KEY_BYTES else None


@functools.cache
def _code_fingerprint() -> bytes:
    """The code a cached digest stands for: the contract's checks (results.py, reader.py) and the
    cut (this module). Another fleet's cache, whose checks or cut may differ, never verifies."""
    hashed = hashlib.sha256(_MAGIC)
    hashed.update(json.dumps([f.name for f in fields(RunResult)]).encode())
    for module in (contract_results, contract_reader):
        hashed.update(Path(module.__file__ or "").read_bytes())
    hashed.update(Path(__file__).read_bytes())
    return hashed.digest()


# ------------------------------------------------------------------------------ one folder's cache


class ResultCache:
    """The signed cache of one `runs/` folder's checked results, as one ledger reads them."""

    def __init__(self, path: Path, key: bytes, scope: bytes) -> None:
        self.path = path
        self._key = key
        self._scope = scope  # signed with every file, never stored: what the file must be of

    @classmethod
    def of(cls, runs_dir: Path, sweep_id: str, host: str, environ: Mapping[str, str] = os.environ) -> ResultCache | None:
        """The cache of `runs_dir`'s results read for `sweep_id` and `host`; None without a key."""
        directory = state_dir(environ)
        key = user_key(directory)
        if key is None:
            return None
        try:
            fingerprint = _code_fingerprint()
        except OSError:  # fleet's source not readable as files (a zip): nothing to tell its checks by
            return None
        scope = json.dumps([os.path.realpath(runs_dir), sweep_id, host]).encode() + fingerprint
        return cls(directory / CACHE_FOLDER / f"{hashlib.sha256(scope).hexdigest()[:40]}.bin", key, scope)

    def _signer(self, index: int) -> hmac.HMAC:
        """The signature of the file's `index`th chunk: over the scope and its place, then its bytes."""
        return hmac.new(self._key, _MAGIC + self._scope + index.to_bytes(8, "big"), hashlib.sha256)

    def load(self) -> dict[str, Entry]:
        """File name -> (its stamp, its digest) as signed; {} where there is no cache, or one that
        does not verify (edited, torn, another key, folder or fleet) or does not load. Chunk by
        chunk, each verified before it is unpickled: the file's bytes are never all in memory
        beside what they hold (at 50,000 results, 175 MB of them)."""
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return {}
        entries: dict[str, Entry] = {}
        try:
            with os.fdopen(descriptor, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode) or handle.read(len(_MAGIC)) != _MAGIC:
                    return {}
                for index in itertools.count():
                    head = handle.read(_RECORD.size)
                    if not head:
                        return entries
                    if len(head) != _RECORD.size:
                        return {}
                    length, mac = _RECORD.unpack(head)
                    if length > info.st_size:
                        return {}
                    payload = handle.read(length)
                    signer = self._signer(index)
                    signer.update(payload)
                    if not hmac.compare_digest(mac, signer.digest()):
                        return {}
                    # Signed by this user's fleet with these checks, for this folder: unpickling
                    # it runs nothing but what that fleet pickled (a dict of stamps and digests).
                    chunk = pickle.loads(payload)
                    if not isinstance(chunk, dict):
                        return {}
                    entries.update(chunk)
        except Exception:  # unreadable, or signed yet unloadable (a class moved by an upgrade): no cache
            return {}
        return entries

    def save(self, entries: Mapping[str, Entry]) -> None:
        """`entries` as the folder's whole cache, signed chunk by chunk, renamed into place. A
        cache that cannot be written (full, read-only) costs the next reader the checks, nothing
        else."""
        names = list(entries)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with atomic_file(self.path, 0o600) as handle:
                handle.write(_MAGIC)
                for index, start in enumerate(range(0, len(names), _CHUNK)):
                    # Pickled straight into the file through the signer, its record's head written
                    # after: no chunk's bytes held whole (7 MB pieces left the first 50k report
                    # 60 MiB fuller at its peak than one pickle of them all).
                    head = handle.tell()
                    handle.write(_RECORD.pack(0, b""))
                    signed = _Signed(handle, self._signer(index))
                    pickle.dump({name: entries[name] for name in names[start : start + _CHUNK]}, signed, protocol=pickle.HIGHEST_PROTOCOL)
                    handle.seek(head)
                    handle.write(_RECORD.pack(signed.length, signed.signer.digest()))
                    handle.seek(0, os.SEEK_END)
        except OSError:
            pass


class _Signed:
    """A file that signs what is written to it, and counts it."""

    def __init__(self, handle: BinaryIO, signer: hmac.HMAC) -> None:
        self.handle = handle
        self.signer = signer
        self.length = 0

    def write(self, data: bytes) -> int:
        self.signer.update(data)
        self.length += len(data)
        return self.handle.write(data)
