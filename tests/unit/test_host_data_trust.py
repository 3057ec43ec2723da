"""Host data trusted too much (issue 29, item 9), the pure parts: preflight sizes the copy that
will be fetched and staged, not a stale cached one; a stage that fails leaves nothing in the fast
dir (the stage script run in a real sh); a work_dir on tmpfs is refused with the consequence; a
pull never replaces a result the controller has, only one it rejected."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path


from fleet.facts.models import DiskSpace, FactsRequest, HostFacts, Memory
from fleet.host.contract import RunResult, RunStatus
from fleet.playbook import ModelRef
from fleet.provision.models import MARKER, STAGE_SCRIPT, Marker, ModelState, current_cache, stage_cleanup_command, staging_job
from fleet.provision.preflight import PreflightRequirements, Verdict, check_staging_space, check_work_dir_persistent
from fleet.provision.provision import CopySizes, copy_sizes
from fleet.sweep.channel import AgentChannel
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import make_host

MIB = 1 << 20
SWEEP = "demo-20261202-000000-abcd"


def sparse_mirror(directory: Path, sizes: dict[str, int]) -> Path:
    """A mirror whose files have the given sizes and use no disk (sizes are all a listing reads)."""
    directory.mkdir(parents=True)
    for name, size in sizes.items():
        with open(directory / name, "wb") as handle:
            handle.truncate(size)
    return directory


def model(mirror: Path) -> ModelRef:
    return ModelRef(repo="Qwen/Qwen3.6-27B", revision="main", mirror=str(mirror))


def state(cached: Marker | None, staged: Marker | None = None) -> ModelState:
    return ModelState("/srv/models/Qwen--Qwen3.6-27B/main", "/dev/shm/fleet/Qwen--Qwen3.6-27B--main", cached, staged)


def disk(path: str, fstype: str, available: int, mount: str) -> DiskSpace:
    return DiskSpace(path=path, measured_path=path, filesystem=fstype, fstype=fstype, mount_point=mount,
                     total_bytes=available, used_bytes=0, available_bytes=available)  # fmt: skip


def facts(**disks: DiskSpace) -> HostFacts:
    return HostFacts(
        request=FactsRequest(paths={key: d.path for key, d in disks.items()}, engine_python="python3"),
        gathered_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        disks=disks,
        memory=Memory(total_bytes=64 << 30, available_bytes=60 << 30),
    )


# ------------------------------------------------------------------------------ sizing


def test_a_300_mib_model_whose_cached_copy_is_an_older_150_mib_fetch_is_sized_300_and_refused_by_a_256_mib_tmpfs(tmp_path: Path) -> None:
    mirror = sparse_mirror(tmp_path / "mirror", {"config.json": 1024, "model-00001.safetensors": 300 * MIB - 1024})
    ref = model(mirror)
    old = Marker(f"mirror:{mirror}", "main", {"config.json": 1024, "model-00001.safetensors": 150 * MIB - 1024})
    assert current_cache(ref, state(old), {"config.json": 1024, "model-00001.safetensors": 300 * MIB - 1024}) is None
    sizes = copy_sizes(ref, state(cached=old, staged=None), tmp_path)
    assert sizes == CopySizes(fetch=300 * MIB, stage=300 * MIB, cache_freed=150 * MIB)  # not the 150 MiB cached
    shm = facts(staging=disk("/dev/shm/fleet", "tmpfs", 256 * MIB, "/dev/shm"))
    found = check_staging_space(shm, PreflightRequirements(expected_gpu_count=0, bytes_to_stage=sizes.stage))
    assert found.verdict is Verdict.fail
    assert found.message == "stage 300.0 MiB into /dev/shm/fleet (on /dev/shm): only 256.0 MiB free of 256.0 MiB", found.message


def test_a_cached_copy_from_another_source_is_not_the_model_and_a_current_one_is() -> None:
    ref = ModelRef(repo="Qwen/Qwen3.6-27B", revision="main")
    other = Marker("mirror:/old/mirror", "main", {"w": 10})
    assert current_cache(ref, state(other), None) is None
    hub = Marker("hf:Qwen/Qwen3.6-27B@main", "0123abcd", {"w": 10})
    assert current_cache(ref, state(hub), None) == hub


def test_a_current_copy_that_is_staged_adds_nothing_and_a_stale_staged_copy_counts_as_room(tmp_path: Path) -> None:
    files = {"config.json": 1024, "w.safetensors": 40 * MIB}
    ref = model(sparse_mirror(tmp_path / "mirror", files))
    current = Marker(f"mirror:{ref.mirror}", "main", files)
    assert copy_sizes(ref, state(current, current), tmp_path) == CopySizes()
    stale_staged = Marker(f"mirror:{ref.mirror}", "main", {"config.json": 1024, "w.safetensors": 10 * MIB})
    sizes = copy_sizes(ref, state(current, stale_staged), tmp_path)
    assert sizes == CopySizes(stage=40 * MIB + 1024, stage_freed=10 * MIB + 1024)
    assert copy_sizes(ref, state(None), tmp_path) == CopySizes(40 * MIB + 1024, 40 * MIB + 1024)
    shm = facts(staging=disk("/dev/shm/fleet", "tmpfs", 35 * MIB, "/dev/shm"))
    needs = PreflightRequirements(expected_gpu_count=0, bytes_to_stage=sizes.stage, staging_bytes_freed=sizes.stage_freed)
    found = check_staging_space(shm, needs)  # 35 MiB free and the stale 10 MiB copy it removes first
    assert found.verdict is Verdict.ok and "10.0 MiB more once the stale copy is removed" in found.message, found.message


# ------------------------------------------------------------------------------ the stage script


def run_stage(tmp_path: Path, need: int, cp: str | None = None) -> subprocess.Popen[str]:
    src = tmp_path / "cache"
    src.mkdir()
    (src / "w1").write_bytes(b"x" * 4096)
    (src / "w2").write_bytes(b"y" * 4096)
    (src / MARKER).write_text(json.dumps({"source": "s", "revision": "r", "files": {"w1": 4096, "w2": 4096}}))
    fast = tmp_path / "shm"
    fast.mkdir()
    env = dict(os.environ)
    if cp is not None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "cp").write_text("#!/bin/sh\n" + cp)
        (bin_dir / "cp").chmod(0o755)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    argv = ["sh", "-c", STAGE_SCRIPT, "fleet-stage", str(src), str(fast / "model"), str(need)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


# A copy that writes one file and then finds the disk full, as cp -a does on a full tmpfs.
FULL_CP = 'mkdir -p "$3"; /bin/cp "$2/w1" "$3/w1"; echo "cp: error writing \'$3/w2\': No space left on device" >&2; exit 1\n'


def test_a_stage_that_fails_mid_copy_leaves_nothing_in_the_fast_dir(tmp_path: Path) -> None:
    stage = run_stage(tmp_path, 8192, cp=FULL_CP)
    out, _ = stage.communicate(timeout=30)
    assert stage.returncode == 1 and "No space left" in out
    assert os.listdir(tmp_path / "shm") == []  # no model.partial, no model


def test_a_stage_killed_mid_copy_leaves_nothing_in_the_fast_dir(tmp_path: Path) -> None:
    stage = run_stage(tmp_path, 8192, cp='mkdir -p "$3"; /bin/cp "$2/w1" "$3/w1"; exec sleep 30\n')
    deadline = time.monotonic() + 20
    while not (tmp_path / "shm" / "model.partial" / "w1").exists():
        assert time.monotonic() < deadline, "the copy never started"
        time.sleep(0.02)
    os.killpg(stage.pid, signal.SIGTERM)  # a stop, a hang-up: the group of the detached job
    stage.communicate(timeout=30)
    assert stage.returncode != 0
    assert os.listdir(tmp_path / "shm") == []


def test_a_stage_without_room_for_the_copy_writes_nothing_and_says_why(tmp_path: Path) -> None:
    stage = run_stage(tmp_path, 1 << 62)
    out, _ = stage.communicate(timeout=30)
    assert stage.returncode == 28 and "not staged" in out and str(1 << 62) in out, out
    assert os.listdir(tmp_path / "shm") == []


def test_a_good_stage_still_ends_complete(tmp_path: Path) -> None:
    stage = run_stage(tmp_path, 8192)
    out, _ = stage.communicate(timeout=30)
    assert stage.returncode == 0, out
    assert sorted(os.listdir(tmp_path / "shm" / "model")) == sorted(["w1", "w2", MARKER])
    assert os.listdir(tmp_path / "shm") == ["model"]


def test_the_cleanup_after_a_failed_stage_waits_for_no_lock_and_spares_a_verified_copy() -> None:
    cached = Marker("s", "r", {"w": 1})
    job = staging_job(state(cached), 1)
    plain = stage_cleanup_command(job, "/dev/shm/fleet/m", unverified=False)
    assert plain.startswith(f"flock -n {job.lock} rm -rf /dev/shm/fleet/m.partial") and MARKER not in plain
    assert f"/dev/shm/fleet/m/{MARKER}" in stage_cleanup_command(job, "/dev/shm/fleet/m", unverified=True)


# ------------------------------------------------------------------------------ work_dir on tmpfs


def test_a_work_dir_on_tmpfs_is_refused_with_the_consequence_and_the_fix() -> None:
    on_tmpfs = facts(work_dir=disk("/var/lib/fleet", "tmpfs", 1 << 30, "/var/lib/fleet"))
    needs = PreflightRequirements(expected_gpu_count=0, host_file="hosts/ct200.yaml")
    found = check_work_dir_persistent(on_tmpfs, needs)
    assert found.verdict is Verdict.fail
    assert "reboot erases the results of finished runs" in found.message and "runs them again" in found.message
    assert found.hint is not None and "paths.work_dir in hosts/ct200.yaml" in found.hint and "allow_volatile_work_dir" in found.hint
    allowed = check_work_dir_persistent(on_tmpfs, PreflightRequirements(expected_gpu_count=0, allow_volatile_work_dir=True))
    assert allowed.verdict is Verdict.warn and "reboot erases" in allowed.message
    on_disk = facts(work_dir=disk("/var/lib/fleet", "ext4", 1 << 30, "/"))
    assert check_work_dir_persistent(on_disk, needs).verdict is Verdict.ok


def test_the_host_file_allows_a_volatile_work_dir_only_when_it_says_so() -> None:
    assert PreflightRequirements.for_host(make_host()).allow_volatile_work_dir is False
    allowing = make_host().model_copy(update={"paths": make_host().paths.model_copy(update={"allow_volatile_work_dir": True})})
    assert PreflightRequirements.for_host(allowing).allow_volatile_work_dir is True


# ------------------------------------------------------------------------------ the pull


def result_bytes(run_id: str, output_tok_s: float) -> bytes:
    return json.dumps(
        RunResult(
            run_id=run_id, label="tp1/short", server_id="s1", server_label="tp1", sweep_id=SWEEP, host="ct200",
            status=RunStatus.ok, failure=None, figures={"output_tok_s": output_tok_s}, workload={"name": "short"},
            started_at=1.8e9, ended_at=1.8e9 + 12.5,
        ).to_json()
    ).encode()  # fmt: skip


def test_a_pull_keeps_the_result_the_controller_has_and_replaces_only_one_it_rejected(tmp_path: Path) -> None:
    host = make_host()
    transport = FakeTransport(host.name)
    channel = AgentChannel(host, SWEEP, transport)
    runs = f"/var/lib/fleet/sweeps/{SWEEP}/runs"
    transport.write(f"{runs}/r1.json", result_bytes("r1", 350.0))
    transport.write(f"{runs}/r2.json", result_bytes("r2", 351.0)[:40])  # truncated on the host
    transport.write(f"/var/lib/fleet/sweeps/{SWEEP}/progress.json", "{}")
    local = tmp_path / "ct200"
    assert channel.pull(local) == 2
    first = (local / "runs" / "r1.json").read_bytes()

    # The host lost its work dir (a reboot of a tmpfs) and ran everything again: other figures.
    transport.write(f"{runs}/r1.json", result_bytes("r1", 999.0))
    transport.write(f"{runs}/r2.json", result_bytes("r2", 352.0))  # the re-run of the bad answer
    transport.write(f"/var/lib/fleet/sweeps/{SWEEP}/progress.json", '{"new": 1}')
    channel.pull(local)
    assert (local / "runs" / "r1.json").read_bytes() == first  # the first result is kept
    assert json.loads((local / "runs" / "r2.json").read_text())["figures"]["output_tok_s"] == 352.0
    assert (local / "progress.json").read_text() == '{"new": 1}'  # the rest comes over as before
