"""The controller's results folder when it cannot take a file (full, read-only, over quota): not a
host's fault, so a host's loop (fleet.sweep.driver) that meets it stops the whole sweep, the agents
working on, and the controller (fleet.sweep.controller) says how to resume once there is room."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from fleet.errors import ResultsFolderError

# A controller folder that cannot take a file: full, read-only, over quota.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})


def unwritable(directory: Path) -> OSError | None:
    """Why `directory` (or the nearest folder of it that exists) cannot take a small file, or None."""
    folder = directory
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    probe = folder / f".fleet-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(probe, "wb") as handle:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
        return None
    except OSError as exc:
        return exc if exc.errno in DISK_ERRNOS else None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass


def folder_error(directory: Path, problem: OSError) -> ResultsFolderError:
    return ResultsFolderError(
        f"{directory}: the results folder cannot be written ({problem.strerror or problem}): the sweep stopped here; "
        "the agents work on and keep their results on the hosts; make room, then `fleet sweep --resume`"
    )
