"""Pure parts of model fetch and staging: listings, markers, and the detached jobs' shell text."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from fleet.playbook import ModelRef
from fleet.provision.models import (
    DetachedJob,
    JobPoll,
    Marker,
    compare_listing,
    hub_fetch_job,
    parse_listing,
)


def test_listing_parses_find_output_and_ignores_fleet_and_rsync_bookkeeping() -> None:
    text = "config.json\t1990\nmodel-00001-of-00002.safetensors\t3145728\n.fleet-complete.json\t130\n.rsync-partial/model-00002-of-00002.safetensors\t1000\nsub dir/with\ttab.bin\t7\n"
    assert parse_listing(text) == {"config.json": 1990, "model-00001-of-00002.safetensors": 3145728, "sub dir/with\ttab.bin": 7}
    with pytest.raises(ValueError, match="path<TAB>size"):
        parse_listing("no size here\n")


def test_compare_names_missing_and_wrong_sized_files() -> None:
    expected = {"a": 1, "b": 2, "c": 3}
    diff = compare_listing(expected, {"a": 1, "b": 5})
    assert not diff.ok and diff.missing == ("c",) and diff.wrong_size == (("b", 2, 5),)
    assert "1 missing (c)" in diff.describe() and "b: 5 bytes, expected 2" in diff.describe()
    assert compare_listing(expected, {**expected, "extra": 9}).ok


def test_marker_round_trip_and_garbage() -> None:
    marker = Marker("mirror:/srv/mirror/qwen", "main", {"a": 1, "b": 2})
    assert Marker.parse(marker.to_bytes().decode()) == marker and marker.total_bytes == 3
    assert Marker.parse("") is None and Marker.parse("{not json") is None and Marker.parse('{"source": 1}') is None


def test_detached_job_runs_under_flock_and_reports_its_exit() -> None:
    job = DetachedJob("fleet-stage", 'cp -a "$1" "$2"', ("/srv/models/x y", "/dev/shm/fleet/x y"), "/dev/shm/fleet/x.lock", "/dev/shm/fleet/x.log")
    start = job.start_command()
    assert start.startswith("mkdir -p /dev/shm/fleet && setsid -f sh -c ")
    assert shlex.quote("/srv/models/x y") in start and "flock" in start and "fleet-exit=$?" in start
    assert JobPoll.parse("busy gone\n") == JobPoll(free=False, alive=False, exit_code=None, log="")
    done = JobPoll.parse("free gone\nfleet-queued 41\nfleet-started\ncopying\nfleet-exit=0\n")
    assert done.free and done.exit_code == 0 and "copying" in done.log
    assert JobPoll.parse("free gone\nfleet-queued 41\nfleet-started\ncp: No space left on device\nfleet-exit=1\n").exit_code == 1


def test_a_detached_job_that_vanished_is_told_from_one_not_yet_started() -> None:
    job = DetachedJob("fleet-stage", "true", (), "/dev/shm/fleet/x.lock", "/dev/shm/fleet/x.log")
    assert "echo fleet-queued $$; exec flock" in job.start_command() and "|| a=fleet-no-log" in job.poll_command()
    assert JobPoll.parse("free gone\nfleet-no-log\n").vanished  # a reboot wiped lock and log
    assert JobPoll.parse("busy gone\nfleet-no-log\n").vanished  # ... and the lock's directory: flock cannot open it
    assert JobPoll.parse("free gone\nfleet-queued 41\nfleet-started\ncopying\n").vanished  # killed under its lock
    assert JobPoll.parse("free gone\nfleet-queued 41\n").vanished  # killed while it waited for the lock
    assert JobPoll.parse("free gone\nfleet-started\ncopying\n").vanished  # an older fleet's job, killed
    assert not JobPoll.parse("free gone\n").vanished  # the log is there, the job not yet queued
    assert not JobPoll.parse("free alive\nfleet-queued 41\n").vanished  # about to take the lock
    assert not JobPoll.parse("busy gone\nfleet-queued 41\nfleet-started\n").vanished  # its children hold the lock
    assert not JobPoll.parse("busy alive\nfleet-queued 41\nfleet-started\n").vanished
    assert not JobPoll.parse("free gone\nfleet-queued 41\nfleet-started\nfleet-exit=0\n").vanished


def test_a_job_killed_while_queued_for_its_lock_is_seen_gone_on_a_real_shell(tmp_path: Path) -> None:
    """The job's own shell text, run: one queued behind a held lock is alive; killed there, before
    it wrote anything but its pid, the next poll sees it vanished (fleet starts it again) instead of
    a job still waiting, which it would have waited on until the timeout."""
    job = DetachedJob("fleet-test", 'echo "$1"', ("ran",), str(tmp_path / "x.lock"), str(tmp_path / "x.log"))

    def poll() -> JobPoll:
        return JobPoll.parse(subprocess.run(["sh", "-c", job.poll_command()], capture_output=True, text=True, check=True).stdout)

    def poll_until(done: Callable[[JobPoll], bool]) -> JobPoll:
        deadline = time.monotonic() + 60  # only a hang reaches it
        while not done(state := poll()):
            assert time.monotonic() < deadline, state
            time.sleep(0.01)
        return state

    with subprocess.Popen(["flock", job.lock, "sh", "-c", "read line"], stdin=subprocess.PIPE) as holder:
        subprocess.run(["sh", "-c", job.start_command()], check=True)
        state = poll_until(lambda state: state.alive)  # the job writes its pid as it starts
        pid = int(state.log.split()[1])
        assert not state.free and state.alive and not state.vanished
        os.kill(pid, signal.SIGKILL)
        poll_until(lambda state: not state.alive)
        assert not poll().vanished  # the lock is still held (by another): not told yet
        holder.communicate(b"go\n")
    assert poll().vanished
    subprocess.run(["sh", "-c", job.start_command()], check=True)  # started again: it runs
    state = poll_until(lambda state: state.exit_code is not None)
    assert state.exit_code == 0 and "ran" in state.log and not state.vanished


def test_hub_fetch_never_puts_a_token_on_the_command_line() -> None:
    model = ModelRef(repo="Qwen/Qwen3.6-27B", revision="0123abcd")
    job = hub_fetch_job("/opt/sglang/bin/python", model, "/srv/models/Qwen--Qwen3.6-27B/0123abcd")
    text = job.start_command()
    assert "HF_TOKEN" not in text and "hf_" not in text
    assert job.args == ("Qwen/Qwen3.6-27B", "0123abcd", "/srv/models/Qwen--Qwen3.6-27B/0123abcd")
    assert "revision=info.sha" in text  # pinned to the commit the hub's metadata came from


def test_a_job_that_ends_and_starts_again_while_a_poll_looks_is_not_seen_vanished(tmp_path: Path) -> None:
    """The poll reads the log, the lock and the process at different moments. Between them the job
    may end (its lock freed, its process gone) and another start of it empty the log and write its
    own pid (8 servers staging one model at once, bench_sweep_scale): read as one state, that is a
    job gone without an exit status, started again for nothing. A log that changed while the poll
    looked reads as busy. The lock's check is where the world moves here: a `flock` on PATH that
    restarts the job as it is asked."""
    job = DetachedJob("fleet-test", "true", (), str(tmp_path / "x.lock"), str(tmp_path / "x.log"))
    ended = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()  # a pid now gone
    Path(job.log).write_text(f"fleet-queued {ended}\nfleet-started\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    flock = bin_dir / "flock"
    flock.write_text(f"#!/bin/sh\necho 'fleet-queued {os.getpid()}' > {shlex.quote(job.log)}\nexit 0\n")
    flock.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    state = JobPoll.parse(subprocess.run(["sh", "-c", job.poll_command()], capture_output=True, text=True, check=True, env=env).stdout)
    assert state.log == f"fleet-queued {os.getpid()}\n" and not state.alive  # the first read's pid, gone
    assert not state.free and not state.vanished
