"""The test fleet itself: real sshd, real ssh client and rsync, real namespaces (needs root)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet.inventory import load_inventory
from tests.testfleet import TestFleet, TestHost
from tests.testfleet.registry import INSTANCE_PREFIX, process_start_time, reap_dead_locked, registry_lock

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]


def ssh(host: TestHost, command: str, connect_timeout: float = 5, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(host.ssh_argv(command, connect_timeout), capture_output=True, text=True, timeout=timeout)


def ssh_ok(host: TestHost, command: str) -> str:
    done = ssh(host, command)
    assert done.returncode == 0, f"{host.name}: {command!r} exited {done.returncode}: {done.stderr}"
    return done.stdout


def machine_names() -> set[str]:
    """Network namespaces and interfaces of the machine, by exact name."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in namespaces.splitlines() if line.strip()} | {line.split(":")[1].strip().split("@")[0] for line in links.splitlines()}


def tcp_connect_error(host: TestHost, timeout: float) -> str | None:
    try:
        socket.create_connection((host.address, host.port), timeout=timeout).close()
    except OSError as exc:
        return type(exc).__name__
    return None


def test_hosts_have_own_hostname_boot_id_and_strict_host_keys(two_hosts: TestFleet):
    ct200, ct201 = two_hosts["ct200"], two_hosts["ct201"]
    out200 = ssh_ok(ct200, "hostname; cat /proc/sys/kernel/random/boot_id; command -v nvidia-smi").split()
    out201 = ssh_ok(ct201, "hostname; cat /proc/sys/kernel/random/boot_id; command -v nvidia-smi").split()
    assert out200[0] == "ct200" and out201[0] == "ct201"
    assert out200[1] == ct200.boot_id() and out201[1] == ct201.boot_id()
    assert out200[1] != out201[1] != open("/proc/sys/kernel/random/boot_id").read().strip()
    assert out200[2] == str(ct200.bin_dir / "nvidia-smi")
    # Each known_hosts file holds its own host's key only: a mix-up is refused, not accepted.
    swapped = subprocess.run(
        [
            "ssh",
            "-F",
            "none",
            "-i",
            str(ct201.identity_file),
            "-o",
            f"UserKnownHostsFile={ct200.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"root@{ct201.address}",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert swapped.returncode == 255 and "Host key verification failed" in swapped.stderr


def test_reboot_wipes_volatile_state_keeps_persistent_dirs_and_kills_detached_processes(two_hosts: TestFleet):
    ct200, ct201 = two_hosts["ct200"], two_hosts["ct201"]
    marker = f"marker-{os.getpid()}-{time.monotonic_ns()}"
    for host in (ct200, ct201):
        ssh_ok(
            host,
            f"mkdir -p /dev/shm/fleet && echo {marker} > /dev/shm/fleet/m && echo {marker} > /tmp/m"
            f" && echo {marker} > /var/lib/fleet/m && echo {marker} > /srv/models/m && echo {marker} > ~/m"
            f" && (setsid nohup sh -c 'sleep 3600; :' {marker} >/dev/null 2>&1 < /dev/null &)",
        )
    detached = {pid: process_start_time(pid) for pid, cmd in two_hosts.processes(ct200).items() if marker in cmd}
    assert detached, two_hosts.processes(ct200)
    before200, before201 = ct200.boot_id(), ct201.boot_id()

    two_hosts.reboot(ct200)

    after = ssh_ok(
        ct200,
        "cat /proc/sys/kernel/random/boot_id; find /dev/shm -mindepth 1 | wc -l; test -e /tmp/m && echo kept || echo gone; cat /var/lib/fleet/m /srv/models/m ~/m",
    ).split()
    # New boot id, nothing left in /dev/shm, /tmp is new (it may hold read-only mounts of the test
    # interpreter and checkout when they live under /tmp, as in CI), the persistent dirs kept theirs.
    assert after == [ct200.boot_id(), "0", "gone", marker, marker, marker] and after[0] != before200
    assert ct200.persistent_path("/var/lib/fleet/m").read_text() == f"{marker}\n"
    assert not [pid for pid, start in detached.items() if process_start_time(pid) == start]
    assert not [cmd for cmd in two_hosts.processes(ct200).values() if marker in cmd]
    # The other host saw nothing of it. ("[m]arker" keeps pgrep from matching its own shell.)
    pattern = f"[{marker[0]}]{marker[1:]}"
    assert ct201.boot_id() == before201
    assert ssh_ok(ct201, f"cat /dev/shm/fleet/m; pgrep -f '{pattern}' >/dev/null && echo alive").split() == [marker, "alive"]
    ssh_ok(ct201, f"pkill -f '{pattern}'")


def test_ssh_is_refused_during_the_down_window_of_a_reboot(two_hosts: TestFleet):
    ct201 = two_hosts["ct201"]
    before = ct201.boot_id()
    rebooting = threading.Thread(target=two_hosts.reboot, args=(ct201,), kwargs={"down_seconds": 2.0})
    rebooting.start()
    deadline = time.monotonic() + 5
    while tcp_connect_error(ct201, 0.5) != "ConnectionRefusedError":
        assert time.monotonic() < deadline, "the host never went down"
        time.sleep(0.01)
    refused = ssh(ct201, "true")
    assert refused.returncode == 255 and "Connection refused" in refused.stderr
    rebooting.join(timeout=20)
    assert not rebooting.is_alive()
    assert ssh_ok(ct201, "cat /proc/sys/kernel/random/boot_id").strip() == ct201.boot_id() != before


def test_link_down_makes_connects_time_out_and_link_up_restores(two_hosts: TestFleet):
    ct200 = two_hosts["ct200"]
    two_hosts.link_down(ct200)
    try:
        started = time.monotonic()
        cut = ssh(ct200, "true", connect_timeout=1)
        assert cut.returncode == 255 and "timed out" in cut.stderr, cut.stderr
        assert time.monotonic() - started >= 1
    finally:
        two_hosts.link_up(ct200)
    assert ssh_ok(ct200, "hostname").strip() == "ct200"


def read_for(fd: int, seconds: float, stop_at_first: bool = False) -> bytes:
    """What arrives on fd within `seconds` (or the first chunk, with stop_at_first)."""
    data, end = b"", time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        if stop_at_first:
            break
    return data


def test_drop_link_hangs_an_open_session_silently_then_it_resumes(two_hosts: TestFleet):
    ct201 = two_hosts["ct201"]
    session = subprocess.Popen(ct201.ssh_argv("while sleep 0.05; do echo tick; done"), stdout=subprocess.PIPE)
    assert session.stdout is not None
    fd = session.stdout.fileno()
    try:
        assert b"tick" in read_for(fd, 10, stop_at_first=True)
        restorer = two_hosts.drop_link(ct201, 2.0)
        read_for(fd, 0.5)  # ticks already on their way to this process
        assert read_for(fd, 0.8) == b"", "nothing may arrive while the link is cut"
        assert session.poll() is None, "a silent drop must not end the session"
        restorer.join(timeout=5)
        assert b"tick" in read_for(fd, 10, stop_at_first=True), "the session must resume once the link is back"
    finally:
        session.kill()
        session.wait()


def test_fake_nvidia_smi_lists_live_gpu_processes_and_ignores_dead_ones(two_hosts: TestFleet):
    ct200 = two_hosts["ct200"]
    live_pid = int(ssh_ok(ct200, "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo $!"))
    dead_pid = int(ssh_ok(ct200, "sh -c 'echo $$'"))
    # Registered from the host, the way the sim engine does it: write a temp file, then rename.
    for pid, gpus, used in ((live_pid, [0, 1], 81234), (dead_pid, [2], 5000)):
        entry = json.dumps({"pid": pid, "process_name": "sglang::scheduler", "gpus": gpus, "used_mib": used})
        target = f"$FLEET_FAKE_GPU_DIR/procs/{pid}.json"
        ssh_ok(ct200, f'printf "%s\\n" {shlex.quote(entry)} > "{target}.tmp" && mv "{target}.tmp" "{target}"')
    try:
        apps = ssh_ok(ct200, "nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv")
        per_gpu = ssh_ok(ct200, "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits")
        table = ssh_ok(ct200, "nvidia-smi")
    finally:
        ssh_ok(ct200, f"kill {live_pid}")
    app_rows = list(csv.DictReader(io.StringIO(apps), skipinitialspace=True))
    gpu_rows = list(csv.reader(io.StringIO(per_gpu), skipinitialspace=True))
    uuid_of = {int(index): uuid for index, uuid, _, _ in gpu_rows}
    assert [(int(r["pid"]), r["used_gpu_memory [MiB]"], r["gpu_uuid"]) for r in app_rows] == [(live_pid, "81234 MiB", uuid_of[0]), (live_pid, "81234 MiB", uuid_of[1])]
    assert [int(used) for _, _, used, _ in gpu_rows] == [81234, 81234] + [0] * 6
    assert {int(total) for _, _, _, total in gpu_rows} == {97887}
    process_rows = [line.split() for line in table.splitlines() if line.endswith("MiB |") and "   C   " in line]
    assert [(row[1], int(row[4]), row[6], row[7]) for row in process_rows] == [("0", live_pid, "sglang::scheduler", "81234MiB"), ("1", live_pid, "sglang::scheduler", "81234MiB")]
    assert ssh_ok(ct200, "nvidia-smi --query-compute-apps=pid --format=csv,noheader") == ""


def test_gpu_profile_changes_apply_to_a_running_host(two_hosts: TestFleet):
    ct201 = two_hosts["ct201"]
    ct201.set_gpu_profile(toolkit="12.8", driver="570.172.08", cuda_driver_version="12.8", count=4)
    try:
        out = ssh_ok(ct201, "nvcc --version; nvidia-smi -L; cat /proc/driver/nvidia/version")
        assert "Cuda compilation tools, release 12.8, V12.8.93" in out
        assert out.count("GPU ") == 4 and "580." not in out and "Kernel Module for x86_64  570.172.08" in out
    finally:
        ct201.set_gpu_profile(toolkit="13.1", driver="580.95.05", cuda_driver_version="13.0", count=8)


def test_rsync_over_ssh_both_ways(two_hosts: TestFleet, tmp_path: Path):
    ct200 = two_hosts["ct200"]
    source = tmp_path / "push"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "big.bin").write_bytes(os.urandom(3 << 20))
    (source / "small.txt").write_text("hello\n")
    rsh = " ".join(["ssh", *ct200.ssh_options()])
    target = f"root@{ct200.address}:/var/lib/fleet/rsync-test/"
    subprocess.run(["rsync", "-a", "--delete", "-e", rsh, f"{source}/", target], check=True, timeout=60)
    remote = two_hosts.exec(ct200, ["sha256sum", "/var/lib/fleet/rsync-test/sub/big.bin"]).stdout.split()[0]
    assert remote == hashlib.sha256((source / "sub" / "big.bin").read_bytes()).hexdigest()
    back = tmp_path / "pull"
    subprocess.run(["rsync", "-a", "-e", rsh, target, f"{back}/"], check=True, timeout=60)
    assert (back / "small.txt").read_text() == "hello\n"
    assert (back / "sub" / "big.bin").read_bytes() == (source / "sub" / "big.bin").read_bytes()


def test_write_inventory_loads_with_fleets_own_loader(two_hosts: TestFleet, tmp_path: Path):
    directory = two_hosts.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.01}, groups=["lab"])
    inventory = load_inventory(directory)
    host = inventory.hosts["ct201"]
    assert (host.address, host.port, host.user) == (two_hosts["ct201"].address, 22, "root")
    assert host.engine.kind.value == "sim" and host.engine.python == sys.executable and host.engine.sim_speed == 0.01
    assert host.service_manager.value == "process" and host.gpus.count == 8 and host.groups == ("lab",)
    assert host.paths.staging == "/dev/shm/fleet" and host.known_hosts == str(two_hosts["ct201"].known_hosts)


def test_close_leaves_no_namespace_veth_process_or_directory(test_fleet_factory):
    fleet = test_fleet_factory(["ct210", "ct211"], shm_size="64m", gpu_profiles={"ct210": {"toolkit": "12.8"}})
    host = fleet["ct211"]
    assert "64M" in fleet.exec(host, ["df", "-h", "/dev/shm"]).stdout
    assert "release 12.8," in fleet.exec("ct210", ["nvcc", "--version"]).stdout
    assert "release 13.1," in fleet.exec(host, ["nvcc", "--version"]).stdout
    fleet.exec(host, ["sh", "-c", "setsid nohup sleep 3600 >/dev/null 2>&1 < /dev/null &"])
    processes = {pid: process_start_time(pid) for h in fleet.hosts for pid in fleet.processes(h)}
    assert len(processes) >= 3
    names = {h.netns for h in fleet.hosts} | {f"ftf{h.address.split('.')[2]}h" for h in fleet.hosts}
    assert names <= machine_names()

    fleet.close()
    fleet.close()

    assert not names & machine_names()
    assert not [pid for pid, start in processes.items() if process_start_time(pid) == start]
    assert not fleet.base.exists()


def test_atexit_and_cleanup_remove_fleets_of_dead_processes():
    starter = (
        "import sys; from tests.testfleet import start_test_fleet; "
        "fleet = start_test_fleet([sys.argv[1]]); print(fleet.hosts[0].netns, fleet.base, flush=True); "
        "sys.stdin.read() if sys.argv[2] == 'hang' else None"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def start(name: str, mode: str) -> tuple[subprocess.Popen, str, Path]:
        child = subprocess.Popen([sys.executable, "-c", starter, name, mode], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        netns, base = child.stdout.readline().split()
        return child, netns, Path(base)

    # Exiting without close(): the atexit safety net tears the host down.
    child, netns, base = start("ct220", "exit")
    assert child.wait(timeout=30) == 0
    assert netns not in machine_names() and not base.exists()

    # Killed outright: nothing runs in the process any more, cleanup finds the leftovers. The
    # registry lock keeps concurrent fleet starts (they reap dead fleets too) from doing it first.
    child, netns, base = start("ct221", "hang")
    with registry_lock():
        child.kill()
        child.wait()
        assert netns in machine_names() and base.exists()
        removed = reap_dead_locked()
    assert [line for line in removed if base.name.removeprefix(INSTANCE_PREFIX) in line], removed
    assert netns not in machine_names() and not base.exists()
    done = subprocess.run([sys.executable, "-m", "tests.testfleet", "cleanup"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip(), done
