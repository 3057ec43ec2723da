"""The agent's halt when it cannot write (a full or read-only disk): the pre-allocated halt file
(fixed size, overwritten in place), the poll that shows a halted agent whose progress.json could
not say so, progress writes that report instead of raising, and a service whose pid file cannot
be written is not left running. (The whole story on a real host: tests/integration/test_host_disk.py.)"""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import pytest

from fleet.host.agent import progress as progress_module
from fleet.host.agent import services as services_module
from fleet.host.agent.progress import ProgressFile
from fleet.host.agent.services import ProcessServices, ServiceSpec, group_members
from fleet.host.contract import AgentState, Progress, SweepDir
from fleet.host.contract.progress import HALT_BYTES, Halt
from fleet.sweep.channel import SEPARATOR, parse_poll


def test_the_halt_file_keeps_its_size_whatever_it_says() -> None:
    assert len(Halt(None).to_bytes()) == HALT_BYTES
    long = Halt("cannot write /x: " + "é" * 5000, 12.5)
    data = long.to_bytes()
    assert len(data) == HALT_BYTES
    back = Halt.from_text(data)
    assert back.at == 12.5 and back.reason is not None and back.reason.startswith("cannot write /x: é") and back.reason.endswith("...")
    assert Halt.from_text(Halt("full", 1.0).to_bytes()) == Halt("full", 1.0)


def _poll_text(progress: Progress, halt: Halt | None) -> str:
    parts = [json.dumps({"state": "exited"}), "boot-1", json.dumps(progress.to_json()), "1\n"]
    if halt is not None:
        parts.append(halt.to_bytes().decode())
    return f"\n{SEPARATOR}\n".join(parts)


def test_a_poll_shows_an_agent_halted_where_only_the_halt_file_could_say_it() -> None:
    running = Progress("s", 42, "boot-1", 1.0, 2.0, AgentState.running, 6, {"ok": 1})
    halted = parse_poll(_poll_text(running, Halt("cannot write /w/runs/x.json: No space left on device (ENOSPC)", 3.0)))
    assert halted.progress is not None and halted.progress.state is AgentState.halted
    assert halted.progress.last_error is not None and halted.progress.last_error.error_class == "results_unwritable"
    assert "ENOSPC" in halted.progress.last_error.message and halted.halted is not None
    # Not halted (the file as the agent prepares it), or no halt file at all (an older agent): as written.
    for halt in (Halt(None), None):
        plain = parse_poll(_poll_text(running, halt))
        assert plain.progress == running and plain.halted is None and plain.result_files == 1


def test_progress_writes_that_fail_for_want_of_space_report_instead_of_raising(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[OSError] = []
    progress = ProgressFile(tmp_path / SweepDir.PROGRESS, sweep_id="s", boot_id="b", total_runs=2, counts={}, on_unwritable=seen.append)

    def full(path: Path, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(progress_module, "write_json_atomic", full)
    progress.run_done(progress_module.RunStatus.ok)  # a server's stop must not die of it
    assert [(e.errno, e.filename) for e in seen] == [(errno.ENOSPC, str(tmp_path / SweepDir.PROGRESS))]
    with pytest.raises(OSError):
        progress.halt("results_unwritable", "cannot write")  # the halt itself says when it failed: halt.json is next


def test_a_service_whose_pid_file_cannot_be_written_is_not_left_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    services = ProcessServices(tmp_path / "services")
    started: list[int] = []
    real_popen = services_module.subprocess.Popen

    def recording_popen(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        child = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(child.pid)
        return child

    def read_only(path: Path, data: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(services_module.subprocess, "Popen", recording_popen)
    monkeypatch.setattr(services_module, "write_json_atomic", read_only)
    with pytest.raises(OSError, match="Read-only"):
        services.start(ServiceSpec("srv", ["sleep", "60"], {}, str(tmp_path / "srv.log")))
    assert started
    deadline = time.monotonic() + 10
    while group_members(started[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(started[0]) == set()
