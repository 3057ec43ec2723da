"""Atomic files: readers see the old file or the new one, never a torn one, even across a power
cut (temp file in the same directory, fsync, rename, fsync the directory). The one way fleet
writes a file that something else may read meanwhile, on hosts and on the controller alike."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

# The temp files' names: `.<name>.<random>.tmp` beside the target (a pull leaves them out).
TEMP_PREFIX, TEMP_SUFFIX = ".", ".tmp"


@contextmanager
def atomic_file(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """Yield a temp file next to `path`; on success fsync it and rename it over `path`.
    On error the temp file is removed and `path` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_json_atomic(path: Path, data: Any) -> None:
    """`data` as indented, key-sorted JSON, atomically."""
    with atomic_file(Path(path)) as handle:
        handle.write(json.dumps(data, indent=1, sort_keys=True).encode() + b"\n")


def write_output(path: Path, pieces: Iterable[str]) -> None:
    """A command's output file (`fleet report -o`): `path` resolved first (a link's target is the
    file written, the link stays); a node that is not a regular file (a device, a pipe, a
    terminal: `-o /dev/stdout`) is written where it is, since a rename over it would replace the
    node itself (as root, `-o /dev/full` once made /dev/full a regular file); a regular or new
    file is replaced atomically, so output that fails half-way leaves the earlier file as it was."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        with open(target, "w", encoding="utf-8") as device:
            device.writelines(pieces)
        return
    with atomic_file(target) as handle:
        for piece in pieces:
            handle.write(piece.encode())
