"""What /proc says about processes on this host. Standard library only.

One reading of "alive" for every part of fleet that runs on a host: a zombie is dead. It has
released its memory, its GPU contexts and its ports, and only waits for its parent to collect its
exit status -- which may never come: where PID 1 does not reap orphans (some container and VM
inits do not), an orphaned server stays a zombie for good, and a signal-0 probe
(`os.kill(pid, 0)`) would call it alive.
"""

from __future__ import annotations

from pathlib import Path


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: [state, ppid, pgrp, ...]."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot: with the pid, a name that is never reused."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def group_members(pgid: int) -> set[int]:
    """Live processes of a process group."""
    members = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] != "Z" and int(fields[2]) == pgid:
                members.add(int(entry.name))
    return members


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
