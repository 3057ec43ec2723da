"""Test hosts that run systemd as PID 1: the systemd flavour of `tests.testfleet.hosts`.

The same network, UTS, PID and mount namespaces as the plain hosts, plus a cgroup namespace, and a
root filesystem of the host's own: an overlay of the machine's root (lower = `/`, upper and work =
the host's directory under /var/tmp, so every write of the host -- units it installs, its journal
-- lands there and survives its reboots). systemd must never boot on the machine's own root: its
boot empties the real /tmp and starts the machine's units (`/work/shared/notes/test-fleet.md`).

What keeps the machine out of it:
- `/etc/systemd/system` and the generator dirs are opaque in the upper layer: none of the
  machine's enabled units (slurmd, postgresql, apt timers, its own sshd) exist for the host, and
  no generator turns the machine's fstab or init.d scripts into units. Vendor units that act on
  the kernel or the machine (udev, sysctl, modules, binfmt, repart, kernel mounts) are masked.
- `container=fleet-testfleet` in PID 1's environment: systemd knows it is a container (no kmsg,
  no kernel tuning; units with ConditionVirtualization=!container stay down). `/proc/sys` and
  `/sys` are read-only; `/dev` is a tmpfs with the few device nodes a host needs.
- cgroups: the host gets `/sys/fs/cgroup/unified/fleet-testfleet-<instance>/<host>` of the
  machine's cgroup2 hierarchy as the root of its cgroup namespace; systemd runs in unified mode
  there. Teardown removes that tree.
- After `pivot_root` the machine's other mounts are gone from the host's view; nothing is ever
  mounted in the machine's own mount namespace.

sshd is a unit of the host (`fleet-testhost-sshd.service`, enabled in multi-user.target) with the
same configuration as a plain host's; the host's `/var/lib/fleet`, `/srv/models` and `/root` are
the same per-host directories as there, and its journal is persistent (`/var/log/journal`).
"""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from tests.testfleet.hosts import (
    PERSISTENT_DIRS,
    SSHD,
    TestFleet,
    TestHost,
    _python_dirs_hidden_on_hosts,
    boot_test_fleet,
    unavailable_reason,
)
from tests.testfleet.registry import InstanceRecord, process_start_time, write_atomic

SYSTEMD = "/usr/lib/systemd/systemd"
CGROUP2_ROOT = Path("/sys/fs/cgroup/unified")
CONTAINER = "fleet-testfleet"
SSHD_UNIT = "fleet-testhost-sshd.service"
VENDOR_UNIT_DIRS = ("/usr/lib/systemd/system", "/lib/systemd/system")
GENERATOR_DIRS = ("/usr/lib/systemd/system-generators", "/lib/systemd/system-generators")
# Vendor units that would act on the machine (kernel, devices, disks) or have no business in a
# test host; masked in the host's /etc/systemd/system. Everything else of the vendor's default
# boot (journald, dbus, logind, tmpfiles, user sessions) runs as on a real host.
MASKED_UNITS = (
    "systemd-udevd.service",
    "systemd-udev-trigger.service",
    "systemd-udev-settle.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-sysctl.service",
    "systemd-modules-load.service",
    "kmod-static-nodes.service",
    "systemd-binfmt.service",
    "proc-sys-fs-binfmt_misc.automount",
    "proc-sys-fs-binfmt_misc.mount",
    "systemd-repart.service",
    "systemd-firstboot.service",
    "systemd-machine-id-commit.service",
    "systemd-pcrphase.service",
    "systemd-pcrphase-sysinit.service",
    "systemd-random-seed.service",
    "systemd-tmpfiles-setup-dev.service",
    "systemd-sysusers.service",
    "systemd-journald-audit.socket",
    "systemd-update-utmp.service",
    "systemd-update-utmp-runlevel.service",
    "systemd-initctl.socket",
    "systemd-ask-password-console.path",
    "systemd-ask-password-wall.path",
    "dev-hugepages.mount",
    "dev-mqueue.mount",
    "sys-fs-fuse-connections.mount",
    "sys-kernel-config.mount",
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
    "getty.target",
    "console-getty.service",
    "systemd-remount-fs.service",
    "systemd-hwdb-update.service",
    "ldconfig.service",
    "systemd-pstore.service",
    "systemd-timesyncd.service",
    "cryptsetup.target",
    "integritysetup.target",
    "veritysetup.target",
    "remote-fs.target",
    "swap.target",
    "modprobe@.service",
)
# What a test host runs of the vendor's boot: the journal, D-Bus, logind and user sessions, the
# tmpfiles of its own root. Every other unit the vendor's targets pull in statically (the
# `*.wants/` dirs under /usr/lib/systemd/system; on another distribution that may be more than
# MASKED_UNITS names) is masked too.
KEPT_VENDOR_UNITS = frozenset(
    {
        "systemd-journald.service",
        "systemd-journald.socket",
        "systemd-journald-dev-log.socket",
        "systemd-journal-flush.service",
        "dbus.service",
        "dbus.socket",
        "systemd-logind.service",
        "systemd-user-sessions.service",
        "systemd-tmpfiles-setup.service",
        "systemd-tmpfiles-clean.timer",
    }
)
DEVICE_NODES = ("null", "zero", "full", "random", "urandom", "tty")
NEEDED = (SYSTEMD, "/usr/lib/systemd/systemd-journald", "/usr/bin/systemctl", "/usr/bin/journalctl", "/usr/sbin/pivot_root")


@cache
def systemd_unavailable_reason() -> str | None:
    """Why systemd test hosts cannot be built here (None: they can); the plain hosts' reasons first."""
    reason = unavailable_reason()
    if reason:
        return reason
    missing = [path for path in NEEDED if not Path(path).exists()]
    if missing:
        return f"systemd test hosts need systemd (Debian: apt-get install systemd dbus): missing {', '.join(missing)}"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "systemd test hosts need overlayfs (not in /proc/filesystems)"
    if not (CGROUP2_ROOT / "cgroup.procs").exists() and not Path("/sys/fs/cgroup/cgroup.procs").exists():
        return "systemd test hosts need a cgroup2 hierarchy (/sys/fs/cgroup/unified or /sys/fs/cgroup)"
    probe = cgroup2_root() / f"fleet-testfleet-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"systemd test hosts need a cgroup of their own under {cgroup2_root()}: {exc}"
    # An overlay whose lower layer is the machine's root, in a mount namespace of its own (so
    # nothing is ever mounted on the machine, even for the probe).
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="fleet-testfleet-overlay-probe-") as scratch:
        for sub in ("upper", "work", "root"):
            os.mkdir(os.path.join(scratch, sub))
        try:
            _set_opaque(Path(scratch) / "upper" / "etc")
        except OSError as exc:
            return f"systemd test hosts need trusted.* xattrs (opaque overlay dirs) on /var/tmp: {exc}"
        mount = f"mount -t overlay overlay -o lowerdir=/,upperdir={scratch}/upper,workdir={scratch}/work {scratch}/root"
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", mount], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return f"systemd test hosts need an overlay of the machine's root, and `{mount}` failed: {done.stderr.strip()}"
    return None


def cgroup2_root() -> Path:
    """The machine's cgroup2 hierarchy: /sys/fs/cgroup itself (unified) or /sys/fs/cgroup/unified (hybrid)."""
    return Path("/sys/fs/cgroup") if Path("/sys/fs/cgroup/cgroup.procs").exists() else CGROUP2_ROOT


def instance_cgroup(instance_id: str) -> Path:
    return cgroup2_root() / f"fleet-testfleet-{instance_id}"


def remove_cgroup_tree(top: Path) -> None:
    """rmdir a cgroup and everything below it, deepest first (a cgroup dir goes only when empty)."""
    if not top.is_dir():
        return
    for directory, subdirs, _ in sorted(os.walk(top), key=lambda entry: -entry[0].count("/")):
        del subdirs
        for attempt in range(200):
            try:
                os.rmdir(directory)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                # EBUSY: the last process of the cgroup is still exiting; it goes within moments.
                if exc.errno != errno.EBUSY or attempt == 199:
                    raise
                time.sleep(0.01)


@cache
def masked_units() -> tuple[str, ...]:
    """MASKED_UNITS and every unit the vendor's targets want statically, but those a host keeps."""
    wanted = {entry.name for directory in VENDOR_UNIT_DIRS for entry in Path(directory).glob("*.wants/*")}
    return tuple(sorted((set(MASKED_UNITS) | wanted) - KEPT_VENDOR_UNITS))


def remove_instance_cgroups(instance_id: str) -> None:
    """Called by every teardown of a fleet (also of a dead one, by `registry`): its hosts are gone by then."""
    remove_cgroup_tree(instance_cgroup(instance_id))


def _set_opaque(directory: Path) -> None:
    """An overlay upper dir that hides what the lower layer (the machine) has at that path."""
    directory.mkdir(parents=True, exist_ok=True)
    os.setxattr(directory, "trusted.overlay.opaque", b"y")


class SystemdTestFleet(TestFleet):
    """Test hosts whose first process is systemd on an overlay root; see the module docstring.
    Everything of `TestFleet` applies (power, links, exec, inventory); `reboot` is a power cut,
    after which systemd boots again and starts what is enabled."""

    __test__ = False

    def __init__(self, record: InstanceRecord, shm_size: str) -> None:
        super().__init__(record, shm_size)
        self.cgroup = instance_cgroup(record.instance_id)

    # -- building -----------------------------------------------------------------------

    def _make_dirs(self) -> list[TestHost]:
        hosts = super()._make_dirs()
        for host in hosts:
            self._prepare_root(host)
        return hosts

    def _prepare_root(self, host: TestHost) -> None:
        """The host's upper layer before its first boot: its own units, machine id, hostname, journal."""
        for sub in ("upper", "work", "rootfs"):
            (host.base / sub).mkdir(parents=True, exist_ok=True)
        upper = host.base / "upper"
        units = upper / "etc" / "systemd" / "system"
        _set_opaque(units)
        generators = upper / "etc" / "systemd" / "system-generators"
        _set_opaque(generators)
        for directory in GENERATOR_DIRS:
            for generator in Path(directory).glob("*") if Path(directory).is_dir() else ():
                _symlink("/dev/null", generators / generator.name)
        for unit in masked_units():
            _symlink("/dev/null", units / unit)
        _symlink("/usr/lib/systemd/system/multi-user.target", units / "default.target")
        write_atomic(units / SSHD_UNIT, self._sshd_unit(host))
        (units / "multi-user.target.wants").mkdir(exist_ok=True)
        _symlink(f"/etc/systemd/system/{SSHD_UNIT}", units / "multi-user.target.wants" / SSHD_UNIT)
        write_atomic(upper / "etc" / "machine-id", uuid.uuid4().hex + "\n", 0o444)
        write_atomic(upper / "etc" / "hostname", host.name + "\n")
        _set_opaque(upper / "var" / "log" / "journal")  # the host's own persistent journal

    def _sshd_unit(self, host: TestHost) -> str:
        q = shlex.quote
        return "\n".join(
            [
                "[Unit]",
                "Description=sshd of the test host (the fleet test fixture's configuration)",
                "After=network.target",
                "",
                "[Service]",
                f"ExecStart={SSHD} -D -f {q(str(host.base / 'etc' / 'sshd_config'))} -E {q(str(host.base / 'log' / 'sshd.log'))}",
                "RuntimeDirectory=sshd",
                "RuntimeDirectoryMode=0755",
                "KillMode=process",
                "Restart=on-failure",
                "",
                "[Install]",
                "WantedBy=multi-user.target",
                "",
            ]
        )

    def _boot_script(self, host: TestHost) -> str:
        q = shlex.quote
        root = str(host.base / "rootfs")

        def inside(path: str) -> str:
            return q(root + path)

        python_dirs = _python_dirs_hidden_on_hosts()
        lines = [
            # As for a plain host: the machine pid of the namespace's first process, for the power cut.
            "read -r pid rest < /proc/self/stat",
            f'echo "$pid" > {q(str(host.base / "run" / "init.pid"))}',
            f"hostname {q(host.name)}",
            f"mount -t overlay overlay -o lowerdir=/,upperdir={q(str(host.base / 'upper'))},workdir={q(str(host.base / 'work'))},index=off,xino=off,redirect_dir=off,metacopy=off {q(root)}",
            f"mount -t proc proc {inside('/proc')}",
            f"mount --bind {inside('/proc/sys')} {inside('/proc/sys')}",
            f"mount -o remount,bind,ro {inside('/proc/sys')}",
            f"mount --bind -o ro {q(str(host.base / 'boot_id'))} {inside('/proc/sys/kernel/random/boot_id')}",
            f"mount --bind {q(str(host.base / 'proc-driver'))} {inside('/proc/driver')}",
            f"mount -t sysfs -o ro sysfs {inside('/sys')}",
            # Rooted at the host's own cgroup: the cgroup namespace was made there.
            f"mount -t cgroup2 cgroup2 {inside('/sys/fs/cgroup')}",
            f"mount -t tmpfs -o mode=755,size=16m tmpfs {inside('/dev')}",
            *(f"touch {inside('/dev/' + n)} && mount --bind /dev/{n} {inside('/dev/' + n)}" for n in DEVICE_NODES),
            f"mkdir {inside('/dev/pts')} {inside('/dev/shm')}",
            f"mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts {inside('/dev/pts')}",
            f"ln -s pts/ptmx {inside('/dev/ptmx')} && ln -s /proc/self/fd {inside('/dev/fd')}",
            *(f"ln -s /proc/self/fd/{i} {inside('/dev/' + n)}" for i, n in enumerate(("stdin", "stdout", "stderr"))),
            f"mount -t tmpfs -o size={q(self.shm_size)},mode=1777 tmpfs {inside('/dev/shm')}",
            f"mount -t tmpfs -o mode=755 tmpfs {inside('/run')}",
            f"mount -t tmpfs -o mode=1777 tmpfs {inside('/tmp')}",
            *(f"mkdir -p {inside(path)} && mount --bind {q(str(host.base / 'persist' / backing))} {inside(path)}" for path, backing in PERSISTENT_DIRS.items()),
            # The fixture's files of this host (sshd config, fake GPU tools and their state) are
            # the machine's own, not copies in the overlay: the test reads and writes them too.
            f"mkdir -p {inside(str(host.base))} && mount --bind {q(str(host.base))} {inside(str(host.base))}",
            # The test interpreter (engine.python of the inventory) where the host's own /root or
            # /tmp would hide it.
            *(f"mkdir -p {inside(d)} && mount --bind -o ro {q(d)} {inside(d)}" for d in python_dirs),
            f"cd {q(root)}",
            # The old root stacked under the new one, then detached: the machine's mounts are gone.
            "pivot_root . .",
            "umount -l .",
            "cd /",
            f"exec env -i container={CONTAINER} LANG=C.UTF-8 {SYSTEMD} --show-status=no",
        ]
        return "\n".join(lines) + "\n"

    def _start(self, host: TestHost) -> None:
        write_atomic(host.base / "boot_id", f"{uuid.uuid4()}\n")
        for stale in ("sshd.pid", "init.pid"):
            (host.base / "run" / stale).unlink(missing_ok=True)
        script = host.base / "boot.sh"
        write_atomic(script, self._boot_script(host))
        cgroup = self.cgroup / host.name
        cgroup.mkdir(parents=True, exist_ok=True)
        # Into the host's cgroup first, so that the cgroup namespace made next is rooted there.
        # (`ip netns exec` mounts a /sys of its own, without the cgroup hierarchies: enter before it.)
        enter = (
            f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))} && exec ip netns exec {shlex.quote(host.netns)} "
            f"unshare --uts --mount --pid --cgroup --fork --propagation private sh -e {shlex.quote(str(script))}"
        )
        with open(host.base / "log" / "console.log", "ab") as console:
            boot = subprocess.Popen(
                ["sh", "-c", enter],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._boots[host.name] = boot
        record = self._record_of(host)
        init_pid = host.base / "run" / "init.pid"
        deadline = time.monotonic() + 5
        while not (init_pid.exists() and (written := init_pid.read_text()).endswith("\n")):
            if boot.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"systemd test host {host.name} did not start: {self._logs(host)}")
            time.sleep(0.001)
        record.init_pid = int(written)
        record.init_start = process_start_time(record.init_pid)
        self._record.save()

    # -- looking inside -----------------------------------------------------------------

    def systemctl(self, host: TestHost | str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """`systemctl ARGS` on the host (through nsenter, no SSH)."""
        return self.exec(host, ["systemctl", *args], timeout=timeout)

    def wait_until_running(self, host: TestHost | str, timeout: float = 30) -> str:
        """Wait until `systemctl is-system-running` says running (or degraded); returns the state."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.systemctl(host, "is-system-running").stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.05)
        raise TimeoutError(f"systemd test host {self._host(host).name}: system state {state!r} after {timeout}s")


def _symlink(target: str, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def start_systemd_test_fleet(
    names: list[str],
    shm_size: str = "256m",
    *,
    gpu_profiles: Mapping[str, Mapping[str, object]] | None = None,
    boot_timeout: float = 60.0,
) -> SystemdTestFleet:
    """Build and boot one systemd test host per name; returns when every host's sshd serves."""
    reason = systemd_unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    return boot_test_fleet(SystemdTestFleet, names, shm_size, gpu_profiles, boot_timeout)


if __name__ == "__main__":  # python -m tests.testfleet.systemd_host: boot one, show its state, close
    with start_systemd_test_fleet(["ct300"]) as demo:
        print(demo.wait_until_running("ct300"))
        print(demo.systemctl("ct300", "list-units", "--no-pager").stdout)
    sys.exit(0)
