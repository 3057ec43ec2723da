"""rsync's copy, in Python, for the `local` transport: a local copy needs no rsync installed.

The semantics are those of `fleet.transport.rsync.rsync_argv` as the transports use it:

- `source` with a trailing slash copies a directory's contents into `dest`; without, the
  directory itself (`dest/<name>`); a file goes to `dest` (into it where `dest` is a directory or
  is given with a trailing slash). Missing parents of `dest` are made.
- permission bits and modification times are kept; a file whose size and mtime match is left as
  it is (rsync's quick check); with `ignore_existing`, any file `dest` already has is.
- `regular_only` (a pull of what a host sent back, untrusted): regular files and folders only;
  a symlink, device, FIFO or socket is skipped. Otherwise symlinks are copied as symlinks;
  devices and specials never are (`--no-devices --no-specials`).
- `excludes`: rsync's patterns as fleet writes them: `/x` anchored at the transfer's root, `x/`
  folders only, a pattern without a slash matches a name at any depth, `*`, `?` and `[...]`
  within a name, `**` across folders. An excluded folder is skipped whole; an excluded file
  on the receiving side is never deleted.
- `delete`: what `dest` holds that the source does not is removed (excluded names are kept).
- `CopyOutcome.written` names each file copied by its path below the transfer's root, as
  rsync's `--out-format=%n` does (rsync also names the folders it makes, with a trailing `/`).
- each file lands atomically: written to a temp name beside it (`.<name>.<random>.tmp`, which a
  pull leaves out), then renamed over the target, so a reader sees the old file or the new one.

Returns rsync's exit codes: 0; 23 when something could not be copied (a missing source, an
unreadable file), with rsync-like lines on stderr; 24 when source files vanished meanwhile.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleet.errors import CommandTimeout
from fleet.host.atomic import TEMP_PREFIX, TEMP_SUFFIX

RSYNC_PARTIAL = 23
RSYNC_VANISHED = 24
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Exclude:
    regex: re.Pattern[str]
    anchored: bool
    directory_only: bool
    whole_path: bool  # a slash inside: matched against the path, not the name

    @classmethod
    def parse(cls, pattern: str) -> Exclude:
        anchored = pattern.startswith("/")
        directory_only = pattern.endswith("/")
        body = pattern.strip("/")
        return cls(re.compile(_translate(body)), anchored, directory_only, anchored or "/" in body)

    def matches(self, relative: str, is_dir: bool) -> bool:
        """`relative`: the path below the transfer's root, `/`-separated."""
        if self.directory_only and not is_dir:
            return False
        if not self.whole_path:
            return bool(self.regex.fullmatch(relative.rsplit("/", 1)[-1]))
        if self.anchored:
            return bool(self.regex.fullmatch(relative))
        parts = relative.split("/")  # unanchored with a slash: matches the path's tail
        return any(self.regex.fullmatch("/".join(parts[i:])) for i in range(len(parts)))


def _translate(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                inner = glob[i + 1 : end]
                out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner) + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@dataclass
class CopyOutcome:
    exit_code: int = 0
    errors: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # each file copied, as rsync's `--out-format=%n` names it

    def fail(self, code: int, message: str) -> None:
        self.errors.append(message)
        if self.exit_code not in (RSYNC_PARTIAL,):  # 23 outranks 24, as rsync's does
            self.exit_code = code

    @property
    def stderr(self) -> str:
        return "".join(f"{line}\n" for line in self.errors)


def copy_tree(
    source: str,
    dest: str,
    *,
    deadline: float,
    what: str,
    host: str,
    delete: bool = False,
    excludes: Sequence[str] = (),
    regular_only: bool = False,
    ignore_existing: bool = False,
) -> CopyOutcome:
    """Copy `source` to `dest` as `rsync -r --perms --times` would (see the module's text);
    raises CommandTimeout past `deadline` (time.monotonic), between two files."""
    outcome = CopyOutcome()
    rules = [Exclude.parse(p) for p in excludes]
    contents = source.endswith("/")
    source_path = Path(source.rstrip("/") or "/")
    try:
        info = os.lstat(source_path)
    except OSError as exc:
        outcome.fail(RSYNC_PARTIAL, f"rsync: change_dir {source} failed: {exc.strerror}")
        return outcome
    target = Path(dest.rstrip("/") or "/")
    if stat.S_ISDIR(info.st_mode):
        relative = ""  # paths as the excludes see them: below the transfer's root
        if not contents:  # the folder itself is sent: its name is the first part of every path
            target, relative = target / source_path.name, source_path.name
            if _excluded(rules, relative, True):
                return outcome
        target.parent.mkdir(parents=True, exist_ok=True)
        _ensure_dir(target, info.st_mode)
        _copy_dir(source_path, target, relative, rules, outcome, deadline, what, host, delete, regular_only, ignore_existing)
        return outcome
    if dest.endswith("/") or target.is_dir():
        target = target / source_path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not _skipped_kind(info.st_mode, regular_only):
        _copy_entry(source_path, target, info, outcome, ignore_existing, source_path.name)
    return outcome


def _skipped_kind(mode: int, regular_only: bool) -> bool:
    if stat.S_ISLNK(mode):
        return regular_only
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _excluded(rules: Sequence[Exclude], relative: str, is_dir: bool) -> bool:
    return any(rule.matches(relative, is_dir) for rule in rules)


def _copy_dir(
    source: Path, target: Path, relative: str, rules: Sequence[Exclude], outcome: CopyOutcome, deadline: float, what: str,
    host: str, delete: bool, regular_only: bool, ignore_existing: bool,
) -> None:  # fmt: skip
    try:
        names = sorted(os.listdir(source))
    except FileNotFoundError:
        outcome.fail(RSYNC_VANISHED, f"file has vanished: {source}")
        return
    except OSError as exc:
        outcome.fail(RSYNC_PARTIAL, f"rsync: opendir {source} failed: {exc.strerror}")
        return
    wanted: set[str] = set()
    for name in names:
        if time.monotonic() > deadline:
            raise CommandTimeout(host, f"{what} did not finish in time; the files copied so far stay")
        path = source / name
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            outcome.fail(RSYNC_VANISHED, f"file has vanished: {path}")
            continue
        rel = f"{relative}/{name}" if relative else name
        is_dir = stat.S_ISDIR(info.st_mode)
        if _excluded(rules, rel, is_dir) or _skipped_kind(info.st_mode, regular_only):
            continue
        wanted.add(name)
        if is_dir:
            _ensure_dir(target / name, info.st_mode)
            _copy_dir(path, target / name, rel, rules, outcome, deadline, what, host, delete, regular_only, ignore_existing)
        else:
            _copy_entry(path, target / name, info, outcome, ignore_existing, rel)
    if delete:
        for name in sorted(set(os.listdir(target)) - wanted):
            there = target / name
            rel = f"{relative}/{name}" if relative else name
            if _excluded(rules, rel, there.is_dir() and not there.is_symlink()):
                continue
            _remove(there)


def _ensure_dir(path: Path, mode: int) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(exist_ok=True)
    os.chmod(path, stat.S_IMODE(mode) | 0o700)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _copy_entry(source: Path, target: Path, info: os.stat_result, outcome: CopyOutcome, ignore_existing: bool, shown: str) -> None:
    try:
        there = os.lstat(target)
    except FileNotFoundError:
        there = None
    if there is not None:
        if ignore_existing:
            return
        if (stat.S_ISREG(there.st_mode) and stat.S_ISREG(info.st_mode) and there.st_size == info.st_size
                and int(there.st_mtime) == int(info.st_mtime)):  # fmt: skip
            if stat.S_IMODE(there.st_mode) != stat.S_IMODE(info.st_mode):
                os.chmod(target, stat.S_IMODE(info.st_mode))
            return
        if stat.S_ISDIR(there.st_mode):
            shutil.rmtree(target)
    fd, temporary = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    os.close(fd)
    try:
        if stat.S_ISLNK(info.st_mode):
            os.unlink(temporary)
            os.symlink(os.readlink(source), temporary)
        else:
            # O_NOFOLLOW: a file swapped for a link after the listing is not followed.
            with open(os.open(source, os.O_RDONLY | os.O_NOFOLLOW), "rb") as reader, open(temporary, "wb") as writer:
                shutil.copyfileobj(reader, writer, _CHUNK)
            os.chmod(temporary, stat.S_IMODE(info.st_mode))
            os.utime(temporary, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.replace(temporary, target)
        outcome.written.append(shown)
    except FileNotFoundError:
        outcome.fail(RSYNC_VANISHED, f"file has vanished: {source}")
    except OSError as exc:
        outcome.fail(RSYNC_PARTIAL, f"rsync: send_files failed to open {source}: {exc.strerror}")
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)
