"""The controller's lock on a sweep folder (fleet.sweep.lock), between real processes: a second
controller is refused with the first one's pid and start; a lock whose controller died (kill -9)
or whose pid now names another process is taken over and said; the lock is not inherited by the
controller's children (an ssh ControlMaster outliving it would keep it)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fleet.sweep.lock import HOLDER_FILE, Holder, lock_sweep, process_start_ticks
from fleet.errors import SweepBusy

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fleet.sweep.lock import lock_sweep
    lock = lock_sweep(Path(sys.argv[1]), "--resume")
    print("locked", flush=True)
    if len(sys.argv) > 2:  # a child of the controller (as ssh would be), still there after the controller ends
        import subprocess
        # close_fds=False: the child gets every descriptor the controller lets it inherit, as a
        # fork and exec that closes nothing would (Popen's default closes them all in the child,
        # whatever the lock's descriptor is, and the test could not tell).
        child = subprocess.Popen(["sleep", "60"], close_fds=False)
        print(child.pid, flush=True)
    time.sleep(60)
    """
)


def holder_process(directory: Path, *extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), *extra], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(1 + len(extra))]
    assert lines[0] == "locked", lines
    return proc, lines


def open_files(pid: int) -> list[str]:
    """The paths of a process's open descriptors. One closed between the listing and its read is
    left out: the holder names its child as soon as Popen returns (after the exec), while sleep's
    start-up (the loader, then the locale's files) still opens and closes fd 3 a dozen times, and a
    read of one already closed raises FileNotFoundError. A descriptor inherited through the exec
    stays open for the child's life, so it is never one of those."""
    paths = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return paths


def test_a_second_controller_is_refused_with_the_first_ones_pid_and_start(tmp_path: Path) -> None:
    proc, _ = holder_process(tmp_path)
    try:
        with pytest.raises(SweepBusy) as refused:
            lock_sweep(tmp_path, "--resume")
        message = str(refused.value)
        assert f"pid {proc.pid} on " in message and "--resume, since " in message and "\n" not in message
        assert json.loads((tmp_path / HOLDER_FILE).read_text())["pid"] == proc.pid  # the refused one wrote nothing
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_of_a_killed_controller_is_taken_over_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    proc, _ = holder_process(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with caplog.at_level(logging.WARNING, "fleet.sweep"), lock_sweep(tmp_path, "--resume") as lock:
        assert lock.took_over is not None and lock.took_over.pid == proc.pid
        assert f"took over the lock of controller pid {proc.pid}" in caplog.text and "its process is gone" in caplog.text
        assert Holder.from_file(tmp_path / HOLDER_FILE) == lock.holder
    assert not (tmp_path / HOLDER_FILE).exists()  # released clean: the next one has nothing to take over
    with lock_sweep(tmp_path, "--resume") as lock:
        assert lock.took_over is None


def test_a_pid_reused_by_another_process_is_no_holder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A controller that died, whose pid a later process got: the same pid, another start time.
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        ticks = process_start_ticks(sleeper.pid)
        assert ticks is not None
        me = Holder.me("--resume")
        (tmp_path / HOLDER_FILE).write_text(json.dumps({**me.to_json(), "pid": sleeper.pid, "start_ticks": ticks - 1}))
        assert Holder.from_file(tmp_path / HOLDER_FILE).alive() is False  # type: ignore[union-attr]
        with caplog.at_level(logging.WARNING, "fleet.sweep"), lock_sweep(tmp_path, "--resume"):
            assert f"pid {sleeper.pid} is another process now" in caplog.text
    finally:
        sleeper.kill()
        sleeper.wait()


def test_two_controllers_racing_for_one_folder_one_wins(tmp_path: Path) -> None:
    # Forked, as two `fleet sweep --resume` started together: exactly one holds it.
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                lock = lock_sweep(tmp_path, "--resume")
                time.sleep(1.0)
                lock.release()
            except SweepBusy:
                code = 3
            os._exit(code)
        pids.append(pid)
    codes = sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids)
    assert codes == [0, 3, 3, 3]


def test_the_lock_is_not_inherited_by_the_controllers_children(tmp_path: Path) -> None:
    proc, lines = holder_process(tmp_path, "with-child")
    child = int(lines[1])
    try:
        assert [path for path in open_files(child) if path.endswith("controller.lock")] == []
        proc.kill()
        proc.wait()
        assert process_start_ticks(child) is not None  # the child lives on, as an ssh master would
        with lock_sweep(tmp_path, "--resume") as lock:
            assert lock.held
    finally:
        os.kill(child, signal.SIGKILL)
