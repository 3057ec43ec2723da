"""Pure parts of model fetch and staging: listings, markers, and the detached jobs' shell text."""

from __future__ import annotations

import shlex

import pytest

from fleet.playbook import ModelRef
from fleet.provision.models import (
    DetachedJob,
    Marker,
    compare_listing,
    hub_fetch_job,
    job_vanished,
    parse_job_poll,
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
    assert parse_job_poll("busy\n") == (False, None, "")
    free, code, log = parse_job_poll("free\ncopying\nfleet-exit=0\n")
    assert free and code == 0 and "copying" in log
    assert parse_job_poll("free\ncp: No space left on device\nfleet-exit=1\n")[1] == 1
    assert parse_job_poll("free\n")[:2] == (True, None)  # not started yet, or killed before it could say


def test_a_detached_job_that_vanished_is_told_from_one_not_yet_started() -> None:
    job = DetachedJob("fleet-stage", "true", (), "/dev/shm/fleet/x.lock", "/dev/shm/fleet/x.log")
    assert "echo fleet-started;" in job.start_command() and "|| echo fleet-no-log" in job.poll_command()
    assert job_vanished(*parse_job_poll("free\nfleet-no-log\n"))  # a reboot wiped lock and log
    assert job_vanished(*parse_job_poll("busy\nfleet-no-log\n"))  # ... and the lock's directory: flock cannot open it
    assert job_vanished(*parse_job_poll("free\nfleet-started\ncopying\n"))  # killed under its lock
    assert not job_vanished(*parse_job_poll("free\n"))  # the log is there, the job not yet under its lock
    assert not job_vanished(*parse_job_poll("busy\nfleet-started\n"))
    assert not job_vanished(*parse_job_poll("free\nfleet-started\nfleet-exit=0\n"))


def test_hub_fetch_never_puts_a_token_on_the_command_line() -> None:
    model = ModelRef(repo="Qwen/Qwen3.6-27B", revision="0123abcd")
    job = hub_fetch_job("/opt/sglang/bin/python", model, "/srv/models/Qwen--Qwen3.6-27B/0123abcd")
    text = job.start_command()
    assert "HF_TOKEN" not in text and "hf_" not in text
    assert job.args == ("Qwen/Qwen3.6-27B", "0123abcd", "/srv/models/Qwen--Qwen3.6-27B/0123abcd")
    assert "revision=info.sha" in text  # pinned to the commit the hub's metadata came from
