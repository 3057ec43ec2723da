"""Typed reading of the contract's JSON documents: every complaint is a `ContractError` naming the
file, the field's path and what was expected. One reader for the shard, results, progress and the
host quarantine.

What a host sends back is untrusted input (a corrupt disk, a compromised agent): a document is
read from a regular file only (never through a symlink, never a FIFO or a device), up to a size
bound, as strict UTF-8, and parsed to a bounded depth with finite numbers only, so that no file
can exhaust the controller's memory or stack, or put `inf`/`NaN` into a mean."""

from __future__ import annotations

import errno
import gc
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from fleet.host.errors import ContractError

E = TypeVar("E", bound=Enum)
_MISSING: Any = object()
_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object", list: "a list"}

# The largest contract document read: a shard with long-context prompts is a few MiB; a result
# with every request's record well under that. A bound keeps a 1 GiB file from costing GiBs.
MAX_DOCUMENT_BYTES = 64 << 20
# Deeper than any document fleet writes (a result's figures are 4 levels deep) and far below
# where the parser or a reader walking the tree would exhaust Python's stack.
MAX_DEPTH = 32


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off while many documents, or one large one, are read and turned
    into records (as it was, after). Tens of thousands of results or runs are millions of
    containers that the collector would walk again at every full collection their growth sets off
    (a fifth of a 10,000-result report's CPU; a third of `fleet status` of a 50,000-run shard,
    issue 28); parsed JSON and the records made of it hold no cycles, and reference counting frees
    what the work drops, as ever. Process-wide: another thread's garbage waits for the end too."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# C0 controls but tab and newline, DEL and C1 (CSI): what makes a terminal act on text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with the characters that make a terminal act (escape sequences, bells, carriage
    returns) replaced by U+FFFD: what a host wrote may be printed, logged and exported."""
    return _CONTROL.sub("\ufffd", text)


def untrusted(value: object) -> Any:
    """A parsed document a host sent back, with every string (keys too) `printable`. Recursion is
    bounded: parse_json refuses anything nested deeper than MAX_DEPTH."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [untrusted(item) for item in value]
    if isinstance(value, dict):
        return {printable(str(k)): untrusted(v) for k, v in value.items()}
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a measurement can have")


def _out_of_bounds(data: object, limit: int, magnitude: float = math.inf) -> bool:
    """Whether `data` nests deeper than `limit` or holds a number beyond `magnitude` (inf and -inf
    included unless `magnitude` is inf): one level of containers at a time, no recursion, each
    value looked at once (the one walk of `parse_untrusted`)."""
    level, depth = ([data] if type(data) is dict or type(data) is list else []), 0
    low = -magnitude
    while level:
        if depth >= limit:
            return True
        below: list[Any] = []
        for item in level:
            for value in item.values() if type(item) is dict else item:
                kind = type(value)  # exact types: json makes no subclasses, and a bool is no number here
                if kind is float or kind is int:
                    if not low <= value <= magnitude:
                        return True
                elif kind is dict or kind is list:
                    below.append(value)
        level, depth = below, depth + 1
    return False


def parse_json(text_or_data: str | bytes | Mapping[str, Any], source: str, max_depth: int = MAX_DEPTH) -> object:
    """A document given as text, or already parsed: whole JSON, finite numbers, at most
    `max_depth` levels of nesting."""
    if isinstance(text_or_data, Mapping):
        return dict(text_or_data)
    try:
        data = json.loads(text_or_data, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise ContractError(source, "", f"JSON nested at most {max_depth} levels deep", "nested deeper than the parser's stack") from None
    except UnicodeDecodeError as exc:
        raise ContractError(source, "", "UTF-8 text", f"invalid byte at offset {exc.start}") from None
    except ValueError as exc:
        raise ContractError(source, "", "a whole JSON document (truncated or not JSON)", str(exc)[:200]) from None
    if _out_of_bounds(data, max_depth):
        raise ContractError(source, "", f"JSON nested at most {max_depth} levels deep", "deeper")
    return data


def bounded(value: object, source: str, where: str, magnitude: float) -> None:
    """Every number of `value` within `magnitude` (a forged 1e308 printed as a mean), else a
    `ContractError` naming the first field that is not."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        if abs(value) > magnitude:
            raise ContractError(source, where, f"a number of magnitude at most {magnitude:g}", f"{value:.3g}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            bounded(item, source, f"{where}[{i}]", magnitude)
    elif isinstance(value, dict):
        for key, item in value.items():
            bounded(item, source, f"{where}.{key}" if where else str(key), magnitude)


# What `parse_untrusted`'s one pass cannot see past: a string of the parsed document can hold a
# control character only if the text has one raw (JSON refuses C0 controls raw inside a string, so
# only DEL and C1) or escaped (\b, \f, \r, or \u00XX in 00-1f, 7x, 8x, 9x: a superset of the
# controls, so that tab, newline and a few letters escaped take the exact path too, harmlessly).
_ESCAPED_CONTROL = re.compile(r"\\[bfr]|\\u00[01789]")
_RAW_CONTROL = re.compile("[\x7f-\x9f]")


def _may_hold_controls(text: str) -> bool:
    """Whether a string parsed from `text` can hold a character `printable` replaces."""
    if "\\" in text and _ESCAPED_CONTROL.search(text) is not None:
        return True
    if text.isascii():  # str.isascii is one C pass; DEL is the one control it lets through
        return "\x7f" in text
    return _RAW_CONTROL.search(text) is not None


# The one pass's parser: text -> document, ValueError for what it refuses. json's by default
# (the host side's, and every caller's that names none); the controller's ledger passes a faster
# one (fleet.sweep.ledger). Whichever it is, the exact path (json's) decides every file the one
# pass does not accept, so a decoder may refuse more than json, never decide differently: for a
# text it accepts, it must return json's document, or one out of the bounds (which the exact path
# then reads again).
Decoder = Callable[[str], Any]


def json_decode(text: str) -> Any:
    """json's C parser, with no NaN or Infinity: the default `Decoder`."""
    return json.loads(text, parse_constant=_no_constant)


def parse_untrusted(text_or_data: str | bytes | Mapping[str, Any], source: str, magnitude: float | None = None, max_depth: int = MAX_DEPTH,
                    decode: Decoder = json_decode) -> Any:  # fmt: skip
    """What a host sent back, parsed and checked: `untrusted(parse_json(...))`, and every number
    within `magnitude` where one is given (`bounded`). In one pass where it can: the strings'
    controls ruled out on the text at once (`_may_hold_controls`), then `decode` (json's C parser
    unless a caller passes another `Decoder`), then one walk for depth and numbers
    (`_out_of_bounds`). Whatever that pass does not accept (a suspect text, a parse error, too
    deep, a number out of bounds, bytes or parsed data) takes the exact path, which returns the
    same document or raises the error naming file and field: the one pass accepts only what the
    exact path accepts, as the same values."""
    if isinstance(text_or_data, str) and not _may_hold_controls(text_or_data):
        try:
            data = decode(text_or_data)
        except (ValueError, RecursionError):
            pass  # said by the exact path
        else:
            # The largest finite float where no bound is given: inf (1e999 parses as inf) is out.
            if not _out_of_bounds(data, max_depth, sys.float_info.max if magnitude is None else magnitude):
                return data
    data = untrusted(parse_json(text_or_data, source, max_depth))
    if magnitude is not None:
        bounded(data, source, "", magnitude)
    return data


def read_bytes(path: Path | str, limit: int = MAX_DOCUMENT_BYTES, *, follow_links: bool = False) -> bytes:
    """A regular file's bytes, at most `limit`: the one bounded reader of fleet's files. A FIFO, a
    device or a socket is refused before a byte is read (opened non-blocking, so a FIFO without a
    writer cannot hang the open; judged on the opened file, so nothing is swapped in between). A
    symlink is followed only with `follow_links` (a file a user names): what a host sent back
    could point anywhere on the reader's machine."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ContractError(str(path), "", "a regular file", "a symbolic link (not followed)") from None
        raise ContractError(str(path), "", "a readable file", exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ContractError(str(path), "", "a regular file", file_kind(info.st_mode))
        if info.st_size > limit:
            raise ContractError(str(path), "", f"a file of at most {limit} bytes", f"{info.st_size} bytes")
        chunks, size = [], 0
        while True:  # bounded even if the file grows while it is read
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ContractError(str(path), "", f"a file of at most {limit} bytes", "larger (it grew while read)")
        return b"".join(chunks)
    except OSError as exc:
        raise ContractError(str(path), "", "a readable file", exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def file_kind(mode: int) -> str:
    """What a file of this mode is, for a message ("a FIFO (named pipe)")."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_text(path: Path | str, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """A regular file of at most `limit` bytes as strict UTF-8 (see `read_bytes`)."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(str(path), "", "UTF-8 text", f"invalid byte at offset {exc.start}") from None


class Reader:
    """Typed access to one JSON object."""

    def __init__(self, data: object, source: str, where: str = "") -> None:
        if not isinstance(data, dict):
            raise ContractError(source, where, "a JSON object", type(data).__name__)
        self.data: dict[str, Any] = data
        self.source, self.where = source, where

    @classmethod
    def of(cls, text_or_data: str | bytes | Mapping[str, Any], source: str) -> Reader:
        return cls(parse_json(text_or_data, source), source)

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, expected: str, got: object = None) -> ContractError:
        return ContractError(self.source, self.path(key), expected, got)

    def get(self, key: str, kinds: type | tuple[type, ...], expected: str | None = None, default: Any = _MISSING) -> Any:
        """The value at `key`, of one of `kinds`; `default` where the key is absent (else an error)."""
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if key not in self.data:
            if default is _MISSING:
                raise self.fail(key, f"{self._wanted(kinds, expected)} (the field is missing)")
            return default
        value = self.data[key]
        # JSON has one number type: an int is a fine float. A bool is never a number: a port or a
        # count given as `true` is a mistake worth naming.
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.fail(key, self._wanted(kinds, expected), value)
        return value

    @staticmethod
    def _wanted(kinds: tuple[type, ...], expected: str | None) -> str:
        """What a field should have been, for its error (made only then: a result has dozens of fields)."""
        return expected or " or ".join(_KIND_NAMES.get(k, "null" if k is type(None) else k.__name__) for k in kinds)

    def optional(self, key: str, kinds: type | tuple[type, ...], expected: str | None = None) -> Any:
        """The value at `key`, or None where it is absent or null."""
        if self.data.get(key) is None:
            return None
        return self.get(key, kinds, expected)

    def text(self, key: str, default: Any = _MISSING) -> str:
        value = self.get(key, str, "a non-empty string", default)
        if value == "":
            raise self.fail(key, "a non-empty string", value)
        return str(value)

    def number(self, key: str, default: Any = _MISSING, positive: bool = True) -> float:
        value = self.get(key, (int, float), "a number", default)
        if positive and value <= 0:
            raise self.fail(key, "a number > 0", value)
        return float(value)

    def choice(self, key: str, choices: tuple[str, ...], default: Any = _MISSING) -> str:
        value = self.get(key, str, f"one of {', '.join(choices)}", default)
        if value not in choices:
            raise self.fail(key, f"one of {', '.join(choices)}", value)
        return str(value)

    def enum(self, key: str, kind: type[E]) -> E:
        value = self.choice(key, tuple(str(member.value) for member in kind))
        return kind(value)

    def strings(self, key: str, default: Any = _MISSING) -> list[str]:
        value = self.get(key, list, "a list of strings", default)
        if not all(isinstance(item, str) for item in value):
            raise self.fail(key, "a list of strings", value)
        return list(value)

    def child(self, key: str) -> Reader:
        return Reader(self.get(key, dict, "an object"), self.source, self.path(key))

    def children(self, key: str, default: Any = _MISSING) -> list[Reader]:
        items = self.get(key, list, "a list of objects", default)
        return [Reader(item, self.source, f"{self.path(key)}[{i}]") for i, item in enumerate(items)]

    def schema(self, expected: str) -> None:
        found = self.data.get("schema")
        if found != expected:
            raise self.fail("schema", f"{expected} (this fleet reads only that version)", found)
