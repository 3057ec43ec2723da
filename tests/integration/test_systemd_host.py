"""The systemd flavour of the test hosts: systemd really is PID 1 on a root of its own, sshd is its
unit, a reboot boots it again, and the machine keeps nothing of it (tests/testfleet/systemd_host.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.provision.units import render_server_unit
from tests.testfleet.registry import netns_name, reap_dead_locked, registry_lock
from tests.testfleet.systemd_host import SystemdTestFleet, instance_cgroup, start_systemd_test_fleet, systemd_unavailable_reason

pytestmark = pytest.mark.testfleet


def ssh(fleet: SystemdTestFleet, command: str) -> str:
    done = subprocess.run(fleet["sd200"].ssh_argv(command), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_systemd_is_pid_1_and_starts_sshd(systemd_host: SystemdTestFleet) -> None:
    out = ssh(
        systemd_host,
        "cat /proc/1/comm; systemd-detect-virt; systemctl is-system-running; systemctl show -p MainPID --value fleet-testhost-sshd.service; awk '/^PPid:/ {print $2}' /proc/$PPID/status; hostname",
    )
    comm, virt, state, sshd_pid, listener, hostname = out.split()
    assert (comm, virt, hostname) == ("systemd", "container-other", "sd200")
    assert state in ("running", "degraded")
    # This session's sshd is a child of the unit's main process: systemd started the server we talk to.
    assert listener == sshd_pid and int(sshd_pid) > 1
    listing = systemd_host.systemctl("sd200", "list-units", "--all", "--plain", "--no-legend", "--no-pager").stdout
    units = {line.split()[0]: tuple(line.split()[1:3]) for line in listing.splitlines() if line.strip()}
    for wanted in ("systemd-journald.service", "dbus.service", "systemd-logind.service", "fleet-testhost-sshd.service"):
        assert units.get(wanted) == ("loaded", "active"), listing
    # None of the machine's own units runs on the host; what would touch the machine is masked.
    for machines in ("slurmd.service", "postgresql.service", "ssh.service", "apt-daily.timer", "munge.service"):
        assert units.get(machines, ("absent", "inactive"))[1] == "inactive", listing
    assert units.get("systemd-udevd.service", ("masked",))[0] == "masked"


def test_own_shm_boot_id_and_journal(systemd_host: SystemdTestFleet) -> None:
    host = systemd_host["sd200"]
    machine_boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    out = ssh(systemd_host, "cat /proc/sys/kernel/random/boot_id; journalctl --list-boots --no-pager | tail -1; touch /dev/shm/from-sd200; findmnt -n -o FSTYPE /dev/shm")
    boot_id, *rest = out.split("\n")
    assert boot_id == host.boot_id() != machine_boot_id
    assert boot_id.replace("-", "") in rest[0]  # journald files this boot under the host's boot id
    assert rest[1] == "tmpfs"
    assert not Path("/dev/shm/from-sd200").exists()


def test_reboot_brings_back_enabled_units_with_empty_shm(systemd_host: SystemdTestFleet) -> None:
    host = systemd_host["sd200"]
    before = host.boot_id()
    ssh(
        systemd_host,
        "touch /dev/shm/marker /var/lib/fleet/kept && printf '[Service]\\nExecStart=/bin/sleep infinity\\n"
        "[Install]\\nWantedBy=multi-user.target\\n' > /etc/systemd/system/fleet-probe.service && "
        "systemctl enable --now fleet-probe.service",
    )
    systemd_host.reboot(host)
    systemd_host.wait_until_running(host)
    out = ssh(
        systemd_host, "cat /proc/sys/kernel/random/boot_id; ls -A /dev/shm | wc -l; ls /var/lib/fleet; systemctl is-active fleet-probe.service; journalctl --list-boots --no-pager | tail -n +2 | wc -l"
    )
    boot_id, shm_entries, kept, active, boots = out.split()
    assert boot_id != before and boot_id == host.boot_id()
    assert (shm_entries, kept, active) == ("0", "kept", "active")
    assert int(boots) >= 2  # the persistent journal keeps the boot before


def test_teardown_leaves_nothing_and_the_machine_tmp_is_untouched(tmp_path: Path) -> None:
    reason = systemd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    sentinel = Path("/tmp") / f"fleet-systemd-sentinel-{os.getpid()}"
    sentinel.write_text("the machine's /tmp must survive a systemd host's boot\n")
    try:
        fleet = start_systemd_test_fleet(["sd201"])
        try:
            fleet.wait_until_running("sd201")
            host = fleet["sd201"]
            pids = set(fleet.processes(host))
            netns, cgroup, base = host.netns, instance_cgroup(fleet._record.instance_id), fleet.base
            assert pids and cgroup.is_dir()
            assert sentinel.exists()  # systemd-tmpfiles ran on the host's own /tmp
        finally:
            fleet.close()
        assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
        assert netns_name(int(netns.rsplit("-", 1)[1])) not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        assert not cgroup.exists() and not base.exists()
        assert str(base) not in Path("/proc/self/mountinfo").read_text()
    finally:
        sentinel.unlink(missing_ok=True)


def test_systemd_services_read_real_units(systemd_host: SystemdTestFleet) -> None:
    """SystemdServices (through the agent's own command line, as the controller calls it) on units
    rendered by fleet's template: an exit code, a signal death, a clean end systemd has unloaded
    (read from the journal), a stop, and a unit that is not installed."""
    repo = Path(__file__).resolve().parents[2]
    programs = {
        "exit3": [sys.executable, "-c", "import sys; sys.exit(3)"],
        "killed": [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        "clean": [sys.executable, "-c", "print('done')"],
        "sleeper": ["/bin/sleep", "600"],
    }
    names = {}
    for key, argv in programs.items():
        unit = render_server_unit(sweep_id="svc", server_id=key, label=key, argv=argv, env={"FLEET_SERVICE": key}, gpus=[0],
                                  working_dir="/", log_file=f"/var/lib/fleet/svc-{key}.log", start_timeout_s=30)  # fmt: skip
        systemd_host["sd200"].persistent_path(f"/var/lib/fleet/{unit.name}").write_text(unit.text)
        ssh(systemd_host, f"mv /var/lib/fleet/{unit.name} {unit.path}")
        names[key] = unit.name.removesuffix(".service")
    ssh(systemd_host, "systemctl daemon-reload")

    # One interpreter on the host runs SystemdServices through every step (an agent CLI call per
    # step would cost a Python start each); the CLI path itself runs in the systemd sweep tests.
    script = """
import json, sys, time
from fleet.host.agent.services import ServiceSpec, SystemdServices
names = json.loads(sys.argv[1]); s = SystemdServices(); out = {}
for key, name in names.items():
    out["start-" + key] = s.start(ServiceSpec(name, [], {}, "")).state
deadline = time.monotonic() + 20
while time.monotonic() < deadline and any(s.status(names[k]).running for k in ("exit3", "killed", "clean")):
    time.sleep(0.1)
for key, name in names.items():
    out[key] = s.status(name).to_json()
out["stopped"] = s.stop(names["sleeper"], 10).to_json()
out["absent"] = s.status("fleet-srv-svc-none").to_json()
print(json.dumps(out))
"""
    done = systemd_host.exec("sd200", ["env", f"PYTHONPATH={repo}", sys.executable, "-c", script, json.dumps(names)], timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {out[f"start-{k}"] for k in programs} <= {"running", "exited"}
    assert out["exit3"] == {"name": names["exit3"], "state": "exited", "pid": None, "exit_code": 3}
    assert out["killed"]["exit_code"] == -9
    assert out["clean"]["exit_code"] == 0  # from the journal: systemd unloaded the unit
    assert out["sleeper"]["state"] == "running" and out["sleeper"]["pid"] > 1
    assert out["stopped"] == {"name": names["sleeper"], "state": "exited", "pid": None, "exit_code": 0}
    assert out["absent"]["state"] == "absent"


def test_a_fleet_whose_owner_was_killed_is_reaped_with_its_cgroups() -> None:
    reason = systemd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    repo = Path(__file__).resolve().parents[2]
    starter = (
        "import sys; from tests.testfleet.systemd_host import start_systemd_test_fleet, instance_cgroup; "
        "f = start_systemd_test_fleet(['sd202']); f.wait_until_running('sd202'); "
        "print(f.hosts[0].netns, f.base, instance_cgroup(f._record.instance_id), ' '.join(map(str, f.processes('sd202'))), flush=True); "
        "sys.stdin.read()"
    )
    child = subprocess.Popen([sys.executable, "-c", starter], cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    netns, base, cgroup, *pids = child.stdout.readline().split()
    with registry_lock():  # no other fleet start reaps it before we look
        child.kill()
        child.wait()
        assert Path(cgroup).is_dir() and Path(base).is_dir() and all(Path(f"/proc/{pid}").exists() for pid in pids)
        reap_dead_locked()
    assert not Path(cgroup).exists() and not Path(base).exists()
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
