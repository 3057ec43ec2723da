"""A fleet of real SSH test hosts on this machine, one set of Linux namespaces per host.

Each host has its own network namespace (veth pair, 10.201.<slot>.2/24, the machine is .1), UTS
namespace (hostname), mount namespace (tmpfs /dev/shm and /tmp, its own boot id, its own
/var/lib/fleet and /srv/models) and PID namespace (killing its first process is a power cut).
A real OpenSSH sshd is that first process. README.md has the whole picture.
"""

from __future__ import annotations

import atexit
import copy
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

import yaml

from tests.testfleet import fake_gpu
from tests.testfleet.gpu_tools import install_gpu_tools
from tests.testfleet.registry import (
    HostRecord,
    InstanceRecord,
    claim_slots,
    host_veth_name,
    kill_host_processes,
    netns_name,
    process_start_time,
    run_ip,
    slot_address,
    teardown_instance,
    write_atomic,
)

SSHD = "/usr/sbin/sshd"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SSH_PORT = 22
HOST_VETH_PEER = "eth0"
# Directories that survive a reboot, as the host sees them -> name of the per-host backing dir.
# A home of its own keeps hosts from sharing (and tests from littering) the machine's /root, and
# keeps the machine's ~/.bashrc (PATH changes, slow shell init) out of every SSH command.
PERSISTENT_DIRS = {"/var/lib/fleet": "var-lib-fleet", "/srv/models": "srv-models", "/root": "root"}
HOST_PRIVATE_DIRS = ("/root/", "/tmp/", "/dev/shm/")
NEEDED_TOOLS = ("ip", "unshare", "nsenter", "ssh", "ssh-keygen", "rsync", "sh", "awk")
HOSTNAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass
class TestHost:
    """One test host, as the controller (the test) reaches it."""

    __test__ = False  # not a pytest test class

    name: str
    address: str
    port: int
    user: str
    identity_file: Path
    known_hosts: Path  # holds this host's key
    base: Path  # controller-side directory of this host
    fake_gpu_dir: Path  # controller-side path of the host's $FLEET_FAKE_GPU_DIR
    gateway: str = ""  # the machine's address on this host's link
    netns: str = ""

    @property
    def bin_dir(self) -> Path:
        return self.base / "bin"

    def persistent_path(self, host_path: str) -> Path:
        """Where a path under /var/lib/fleet, /srv/models or /root of the host is on the machine."""
        for mount_point, backing in PERSISTENT_DIRS.items():
            if host_path == mount_point or host_path.startswith(mount_point + "/"):
                return self.base / "persist" / backing / host_path[len(mount_point) :].lstrip("/")
        raise ValueError(f"{host_path!r} is not under a persistent dir of the host ({', '.join(PERSISTENT_DIRS)})")

    def boot_id(self) -> str:
        """The boot id the host reports in /proc/sys/kernel/random/boot_id."""
        return (self.base / "boot_id").read_text().strip()

    def gpu_profile(self) -> dict:
        return fake_gpu.load_profile(self.fake_gpu_dir)

    def set_gpu_profile(self, **changes: object) -> None:
        """Change what the fake GPU tools report, e.g. `toolkit="12.8"`; takes effect at once."""
        self._write_gpu_profile({**self.gpu_profile(), **changes})

    def _write_gpu_profile(self, profile: Mapping[str, object]) -> None:
        write_atomic(self.fake_gpu_dir / "profile.json", json.dumps(profile, indent=1) + "\n")
        write_atomic(self.base / "proc-driver" / "nvidia" / "version", fake_gpu.driver_version_file(dict(profile)))

    def ssh_options(self, connect_timeout: float = 5) -> list[str]:
        """Options for the OpenSSH client (also usable in `rsync -e`): key, known_hosts, strict."""
        return [
            "-F",
            "none",  # the machine user's ~/.ssh/config must not change what tests see
            "-i",
            str(self.identity_file),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={connect_timeout:g}",
            "-p",
            str(self.port),
        ]

    def ssh_argv(self, remote_command: str, connect_timeout: float = 5) -> list[str]:
        return ["ssh", *self.ssh_options(connect_timeout), f"{self.user}@{self.address}", remote_command]


@cache
def unavailable_reason() -> str | None:
    """Why test hosts cannot be built here (None: they can). Probes once per process."""
    if os.geteuid() != 0:
        return "test fleet needs root (network, mount and PID namespaces)"
    missing = [tool for tool in NEEDED_TOOLS if shutil.which(tool) is None]
    if not Path(SSHD).exists():
        missing.append(SSHD)
    if missing:
        return f"test fleet needs these tools: {', '.join(missing)}"
    probe = f"fleet-tf-probe-{os.getpid()}"
    added = run_ip("netns", "add", probe, check=False)
    run_ip("netns", "del", probe, check=False)
    if added.returncode != 0:
        return f"`ip netns add` is not permitted here: {added.stderr.strip()}"
    return None


class TestFleet:
    """The hosts of one `start_test_fleet` call, and what a test can do to them."""

    __test__ = False  # not a pytest test class

    def __init__(self, record: InstanceRecord, shm_size: str) -> None:
        self._record = record
        self.shm_size = shm_size
        self.base = record.base
        self.identity_file = self.base / "client_ed25519"
        self.known_hosts = self.base / "known_hosts"  # every host of this fleet
        self.hosts: list[TestHost] = [self._describe(h) for h in record.hosts]
        self._boots: dict[str, subprocess.Popen] = {}
        self._links_down: set[str] = set()
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._closed = False
        _OPEN_FLEETS.append(self)

    def _describe(self, record: HostRecord) -> TestHost:
        base = self.base / record.name
        return TestHost(
            name=record.name,
            address=slot_address(record.slot, 2),
            port=SSH_PORT,
            user="root",
            identity_file=self.identity_file,
            known_hosts=base / "known_hosts",
            base=base,
            fake_gpu_dir=base / "gpu",
            gateway=slot_address(record.slot, 1),
            netns=netns_name(record.slot),
        )

    def __getitem__(self, name: str) -> TestHost:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no test host {name!r}; hosts: {', '.join(h.name for h in self.hosts)}")

    def _host(self, host: TestHost | str) -> TestHost:
        return self[host] if isinstance(host, str) else self[host.name]

    def _record_of(self, host: TestHost) -> HostRecord:
        return next(r for r in self._record.hosts if r.name == host.name)

    # ---------------------------------------------------------------------------------------
    # building

    def _build(self, profiles: Mapping[str, Mapping[str, object]], boot_timeout: float) -> None:
        for path in (*PERSISTENT_DIRS, "/run/sshd"):
            Path(path).mkdir(parents=True, exist_ok=True)
        keygens = [self._keygen(self.identity_file, "fleet-testfleet-client")]
        keygens += [self._keygen(h.base / "etc" / "ssh_host_ed25519_key", h.name) for h in self._make_dirs()]
        for keygen in keygens:
            _, error = keygen.communicate()
            if keygen.returncode != 0:
                raise RuntimeError(f"ssh-keygen failed: {error.decode().strip()}")
        client_key = (self.identity_file.with_suffix(".pub")).read_text()
        every_key = []
        for host in self.hosts:
            host_key = " ".join((host.base / "etc" / "ssh_host_ed25519_key.pub").read_text().split()[:2])
            every_key.append(f"{host.address} {host_key}\n")
            write_atomic(host.known_hosts, every_key[-1])
            write_atomic(host.base / "etc" / "authorized_keys", client_key)
            write_atomic(host.base / "etc" / "sshd_config", self._sshd_config(host))
            self._install_gpu_tools(host, profiles.get(host.name, {}))
        write_atomic(self.known_hosts, "".join(every_key))
        self._make_networks()
        for host in self.hosts:
            self._start(host)
        deadline = time.monotonic() + boot_timeout
        for host in self.hosts:
            self._wait_until_serving(host, deadline)

    def _make_dirs(self) -> list[TestHost]:
        for host in self.hosts:
            for sub in ("etc", "bin", "gpu/procs", "log", "run", "proc-driver/nvidia"):
                (host.base / sub).mkdir(parents=True, exist_ok=True)
            for backing in PERSISTENT_DIRS.values():
                (host.base / "persist" / backing).mkdir(parents=True, exist_ok=True)
            for index, _ in enumerate(_python_dirs_hidden_on_hosts()):
                (host.base / "mnt" / f"python-{index}").mkdir(parents=True, exist_ok=True)
        return self.hosts

    @staticmethod
    def _keygen(path: Path, comment: str) -> subprocess.Popen:
        return subprocess.Popen(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    @staticmethod
    def _sshd_config(host: TestHost) -> str:
        etc = host.base / "etc"
        return "\n".join(
            [
                f"ListenAddress {host.address}:{host.port}",
                f"HostKey {etc / 'ssh_host_ed25519_key'}",
                f"AuthorizedKeysFile {etc / 'authorized_keys'}",
                f"PidFile {host.base / 'run' / 'sshd.pid'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "UseDNS no",
                "PrintMotd no",
                "PrintLastLog no",
                # The post-quantum default (sntrup761) costs ~0.2 s of CPU per connection, which
                # adds up over a test suite; every client fleet uses (OpenSSH, paramiko) has these.
                "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,diffie-hellman-group14-sha256",
                # Tests open many sessions at once (parallel hosts, rsync, polling).
                "MaxStartups 100:30:200",
                "MaxSessions 100",
                "Subsystem sftp internal-sftp",
                f"SetEnv PATH={host.bin_dir}:{SYSTEM_PATH} FLEET_FAKE_GPU_DIR={host.fake_gpu_dir}",
                "",
            ]
        )

    def _install_gpu_tools(self, host: TestHost, profile: Mapping[str, object]) -> None:
        install_gpu_tools(host.bin_dir, host.base / "lib")
        host._write_gpu_profile({**fake_gpu.DEFAULT_PROFILE, **profile})

    def _make_networks(self) -> None:
        """Namespaces and veth pairs of all hosts, in two `ip -batch` runs (one `ip` per command
        would cost more than booting the hosts)."""
        machine, inside = [], []
        for host in self.hosts:
            slot = self._record_of(host).slot
            veth, mac = host_veth_name(slot), f"02:66:74:66:{slot:02x}"
            machine += [
                f"netns add {host.netns}",
                f"link add {veth} address {mac}:01 type veth peer name {HOST_VETH_PEER} address {mac}:02 netns {host.netns}",
                f"addr add {host.gateway}/24 dev {veth}",
                f"link set {veth} up",
                # A permanent neighbour entry: while the link is cut, packets vanish silently (no
                # ARP failure turning into a quick "no route to host"), as in a real outage.
                f"neigh replace {host.address} lladdr {mac}:02 dev {veth} nud permanent",
            ]
            inside.append([f"addr add {host.address}/24 dev {HOST_VETH_PEER}", f"link set {HOST_VETH_PEER} up", "link set lo up"])
        self._ip_batch([], machine)
        for host, commands in zip(self.hosts, inside):
            self._ip_batch(["-n", host.netns], commands)

    @staticmethod
    def _ip_batch(options: list[str], commands: list[str]) -> None:
        done = subprocess.run(["ip", *options, "-batch", "-"], input="".join(c + "\n" for c in commands), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`ip {' '.join(options)} -batch` failed: {done.stderr.strip()}")

    def _boot_script(self, host: TestHost) -> str:
        q = shlex.quote
        init_pid = host.base / "run" / "init.pid"
        python_mounts = [(d, host.base / "mnt" / f"python-{i}") for i, d in enumerate(_python_dirs_hidden_on_hosts())]
        lines = [
            # The shell is the PID namespace's first process; /proc still shows the machine's
            # view, so /proc/self/stat tells the machine pid the fleet must kill for a power cut.
            "read -r pid rest < /proc/self/stat",
            f'echo "$pid" > {q(str(init_pid))}',
            "mount -t proc proc /proc",
            *(f"mount --bind -o ro {q(d)} {q(str(staged))}" for d, staged in python_mounts),
            f"hostname {q(host.name)}",
            f"mount -t tmpfs -o size={q(self.shm_size)},mode=1777 tmpfs /dev/shm",
            "mount -t tmpfs -o mode=1777 tmpfs /tmp",
            f"mount --bind -o ro {q(str(host.base / 'boot_id'))} /proc/sys/kernel/random/boot_id",
            f"mount --bind {q(str(host.base / 'proc-driver'))} /proc/driver",
            *(f"mount --rbind {q(str(host.base / 'persist' / backing))} {q(path)}" for path, backing in PERSISTENT_DIRS.items()),
            # The interpreter of the tests (sys.executable: the sim engine, the fake GPU tools)
            # may live under /root or /tmp, which the host has of its own: show it read-only.
            *(f"mkdir -p {q(d)} && mount --move {q(str(staged))} {q(d)}" for d, staged in python_mounts),
            # Our copy of the machine's mount table pins every namespace under /run/netns; drop
            # them so that `ip netns del` of other fleets (and other tools) really frees theirs.
            # Another fleet may delete its namespace meanwhile: a mount gone by then is fine.
            "awk '$5 ~ \"^/run/netns\" {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l || true",
            f"exec {SSHD} -D -f {q(str(host.base / 'etc' / 'sshd_config'))} -E {q(str(host.base / 'log' / 'sshd.log'))}",
        ]
        return "\n".join(lines) + "\n"

    def _start(self, host: TestHost) -> None:
        write_atomic(host.base / "boot_id", f"{uuid.uuid4()}\n")
        for stale in ("sshd.pid", "init.pid"):
            (host.base / "run" / stale).unlink(missing_ok=True)
        script = host.base / "boot.sh"
        write_atomic(script, self._boot_script(host))
        with open(host.base / "log" / "console.log", "ab") as console:
            boot = subprocess.Popen(
                ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount", "--pid", "--fork", "--propagation", "private", "sh", "-e", str(script)],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test run must not hit the hosts
            )
        self._boots[host.name] = boot
        record = self._record_of(host)
        init_pid = host.base / "run" / "init.pid"
        deadline = time.monotonic() + 5
        while not (init_pid.exists() and (written := init_pid.read_text()).endswith("\n")):
            if boot.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"test host {host.name} did not start: {self._logs(host)}")
            time.sleep(0.001)
        record.init_pid = int(written)
        record.init_start = process_start_time(record.init_pid)
        self._record.save()

    def _wait_until_serving(self, host: TestHost, deadline: float) -> None:
        """Poll for the SSH banner (or, while the link is cut, for sshd's pid file)."""
        boot = self._boots[host.name]
        while True:
            if host.name in self._links_down:
                if (host.base / "run" / "sshd.pid").exists():
                    return
            else:
                try:
                    with socket.create_connection((host.address, host.port), timeout=0.5) as conn:
                        conn.settimeout(1.0)
                        if conn.recv(64).startswith(b"SSH-"):
                            return
                except OSError:
                    pass
            if boot.poll() is not None:
                raise RuntimeError(f"test host {host.name} died while booting (exit {boot.returncode}): {self._logs(host)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"test host {host.name}: no SSH banner in time: {self._logs(host)}")
            time.sleep(0.003)

    @staticmethod
    def _logs(host: TestHost) -> str:
        tails = []
        for name in ("console.log", "sshd.log"):
            path = host.base / "log" / name
            if path.exists():
                tails.append(f"{name}: " + path.read_text(errors="replace")[-1500:].strip())
        return " | ".join(tails) or "(no logs)"

    # ---------------------------------------------------------------------------------------
    # power

    def is_up(self, host: TestHost | str) -> bool:
        boot = self._boots.get(self._host(host).name)
        return boot is not None and boot.poll() is None

    def power_off(self, host: TestHost | str) -> None:
        """Kill every process of the host at once; its tmpfs dies with its mount namespace."""
        host = self._host(host)
        with self._lock:
            record = self._record_of(host)
            kill_host_processes(record)
            boot = self._boots.pop(host.name, None)
            if boot is not None:
                boot.wait(timeout=10)
            record.init_pid = record.init_start = None
            self._record.save()
            # GPU processes do not outlive a power cut, and pids restart at 1 after it.
            for entry in (host.fake_gpu_dir / "procs").glob("*"):
                entry.unlink()

    def power_on(self, host: TestHost | str, timeout: float = 15.0) -> None:
        """Boot the host with a new boot id and wait until sshd serves."""
        host = self._host(host)
        with self._lock:
            if self.is_up(host):
                raise RuntimeError(f"test host {host.name} is already up")
            self._start(host)
            self._wait_until_serving(host, time.monotonic() + timeout)

    def reboot(self, host: TestHost | str, down_seconds: float = 0.0) -> None:
        """Power cut and boot: every process dies, /dev/shm and /tmp empty, new boot id, SSH
        refuses connections while down; /var/lib/fleet, /srv/models and /root keep their content."""
        self.power_off(host)
        if down_seconds > 0:
            self._closing.wait(down_seconds)
        if not self._closing.is_set():
            self.power_on(host)

    # ---------------------------------------------------------------------------------------
    # network

    def link_down(self, host: TestHost | str) -> None:
        """Cut the host's link: packets both ways vanish, connects time out, sessions hang."""
        host = self._host(host)
        with self._lock:
            run_ip("-n", host.netns, "link", "set", HOST_VETH_PEER, "down")
            self._links_down.add(host.name)
            # Never let test traffic leave the machine: the host's subnet must still route here.
            route = run_ip("route", "get", host.address).stdout
            if f"dev {host_veth_name(self._record_of(host).slot)} " not in route:
                raise RuntimeError(f"test host {host.name}: with the link down, {host.address} routes via {route!r}")

    def link_up(self, host: TestHost | str) -> None:
        host = self._host(host)
        with self._lock:
            run_ip("-n", host.netns, "link", "set", HOST_VETH_PEER, "up")
            self._links_down.discard(host.name)

    def drop_link(self, host: TestHost | str, seconds: float) -> threading.Thread:
        """Cut the link now and restore it after `seconds`, in the background."""
        self.link_down(host)

        def restore() -> None:
            if not self._closing.wait(seconds):
                with self._lock:
                    if not self._closing.is_set():
                        self.link_up(host)

        thread = threading.Thread(target=restore, name=f"testfleet-link-up-{self._host(host).name}", daemon=True)
        thread.start()
        return thread

    # ---------------------------------------------------------------------------------------
    # looking inside

    def exec(self, host: TestHost | str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        """Run argv inside the host's namespaces (no SSH), with the environment an SSH session gets."""
        host = self._host(host)
        record = self._record_of(host)
        if not self.is_up(host):
            raise RuntimeError(f"test host {host.name} is down")
        env = {"PATH": f"{host.bin_dir}:{SYSTEM_PATH}", "FLEET_FAKE_GPU_DIR": str(host.fake_gpu_dir), "HOME": "/root", "USER": "root", "LANG": "C.UTF-8"}
        return subprocess.run(
            ["nsenter", f"--target={record.init_pid}", "--net", "--uts", "--mount", "--pid", "--wd=/", "--", *argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )

    def processes(self, host: TestHost | str) -> dict[int, str]:
        """Processes running on the host: machine pid -> command line."""
        record = self._record_of(self._host(host))
        if record.init_pid is None:
            return {}
        try:
            namespace = os.readlink(f"/proc/{record.init_pid}/ns/pid")
        except OSError:
            return {}
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                    found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
        return found

    # ---------------------------------------------------------------------------------------
    # faults (tests/integration/test_faults.py)

    def kill_in_host(self, host: TestHost | str, pattern: str, sig: int = signal.SIGKILL) -> list[int]:
        """Send `sig` to every process of the host whose command line contains `pattern` (never
        its sshd, nor a process of another host); returns their machine pids."""
        host = self._host(host)
        init_pid = self._record_of(host).init_pid
        hit = []
        for pid, command in self.processes(host).items():
            if pid != init_pid and pattern in command:
                try:
                    os.kill(pid, sig)
                    hit.append(pid)
                except ProcessLookupError:
                    pass  # exited meanwhile
        return hit

    def _reload_sshd(self, host: TestHost) -> None:
        """SIGHUP to the host's sshd (its first process): it re-executes itself with its config and
        host keys read again, keeping its pid (so the host lives on) and the open sessions."""
        init_pid = self._record_of(host).init_pid
        if init_pid is None:
            raise RuntimeError(f"test host {host.name} is down")
        before = host.base / "run" / "sshd.pid"
        before.unlink(missing_ok=True)  # rewritten once the new sshd listens
        os.kill(init_pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not before.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"test host {host.name}: sshd did not come back after SIGHUP: {self._logs(host)}")
            time.sleep(0.01)

    def refuse_ssh(self, host: TestHost | str) -> None:
        """sshd stops serving the host's SSH port (it listens on another one): connects are
        refused with a TCP reset, while everything else on the host works on."""
        host = self._host(host)
        with self._lock:
            config = self._sshd_config(host).replace(f"ListenAddress {host.address}:{host.port}", f"ListenAddress 127.0.0.1:{host.port + 1}")
            write_atomic(host.base / "etc" / "sshd_config", config)
            self._reload_sshd(host)

    def serve_ssh(self, host: TestHost | str) -> None:
        """Undo `refuse_ssh` (or pick up a new host key): sshd serves its port again."""
        host = self._host(host)
        with self._lock:
            write_atomic(host.base / "etc" / "sshd_config", self._sshd_config(host))
            self._reload_sshd(host)
            self._wait_until_serving(host, time.monotonic() + 10)

    def regenerate_host_key(self, host: TestHost | str) -> str:
        """A new host key, served at once (the host is not rebooted; its processes work on); the
        known_hosts files keep the old one, as a controller's would. Returns the new public key."""
        host = self._host(host)
        key = host.base / "etc" / "ssh_host_ed25519_key"
        fresh = key.with_name(key.name + ".new")
        for path in (fresh, fresh.with_name(fresh.name + ".pub")):
            path.unlink(missing_ok=True)
        keygen = self._keygen(fresh, f"fleet-testfleet-{host.name}-regenerated")
        if keygen.wait(timeout=30) != 0:
            raise RuntimeError(f"ssh-keygen failed: {keygen.stderr.read().decode() if keygen.stderr else ''}")
        os.replace(fresh.with_name(fresh.name + ".pub"), key.with_name(key.name + ".pub"))
        os.replace(fresh, key)
        self.serve_ssh(host)
        return " ".join(key.with_name(key.name + ".pub").read_text().split()[:2])

    def mount_tmpfs(self, host: TestHost | str, path: str, size: str) -> None:
        """A tmpfs of `size` (e.g. "64k") over `path` inside the host (created if missing); the
        host's processes see it at once, the machine does not. Gone at the next reboot."""
        done = self.exec(host, ["sh", "-c", f"mkdir -p {shlex.quote(path)} && mount -t tmpfs -o size={shlex.quote(size)} tmpfs {shlex.quote(path)}"])
        if done.returncode != 0:
            raise RuntimeError(f"test host {self._host(host).name}: mount tmpfs on {path}: {done.stderr.strip()}")

    def umount(self, host: TestHost | str, path: str) -> None:
        done = self.exec(host, ["umount", "-l", path])
        if done.returncode != 0:
            raise RuntimeError(f"test host {self._host(host).name}: umount {path}: {done.stderr.strip()}")

    # ---------------------------------------------------------------------------------------
    # for the controller under test

    def write_inventory(self, directory: Path, **overrides: object) -> Path:
        """Write `<directory>/<host>.yaml` per host in fleet's inventory schema. `overrides` are
        merged into every host (dicts deep-merged; a None value removes the key)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for host in self.hosts:
            profile = host.gpu_profile()
            entry = {
                "name": host.name,
                "transport": "ssh",
                "address": host.address,
                "port": host.port,
                "user": host.user,
                "identity_file": str(host.identity_file),
                "host_key_policy": "verify",
                "known_hosts": str(host.known_hosts),
                "gpus": {"count": profile["count"], "model": profile["name"]},
                "paths": {"work_dir": "/var/lib/fleet", "model_cache": "/srv/models", "staging": "/dev/shm/fleet"},
                "engine": {"kind": "sim", "python": sys.executable},
                "service_manager": "process",
                "groups": ["testfleet"],
            }
            write_atomic(directory / f"{host.name}.yaml", yaml.safe_dump(deep_merged(entry, overrides), sort_keys=False))
        return directory

    def write_ssh_config(self, path: Path) -> Path:
        """An ssh_config with one `Host <name>` entry per host (for ssh_alias inventories)."""
        blocks = [
            f"Host {h.name}\n  HostName {h.address}\n  Port {h.port}\n  User {h.user}\n"
            f"  IdentityFile {h.identity_file}\n  UserKnownHostsFile {self.known_hosts}\n"
            "  StrictHostKeyChecking yes\n  IdentitiesOnly yes\n"
            for h in self.hosts
        ]
        write_atomic(Path(path), "\n".join(blocks))
        return Path(path)

    # ---------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every host, remove namespaces, veths and files. Safe to call again, also after
        a close that was interrupted (every step of the teardown may be repeated)."""
        self._closing.set()  # ends pending drop_link restores and reboot down windows
        with self._lock:
            if self._closed:
                return
            teardown_instance(self._record)
            for boot in self._boots.values():
                boot.wait(timeout=10)  # `unshare` exits once its child, the host, is gone
            self._closed = True
            _OPEN_FLEETS.remove(self)

    def __enter__(self) -> TestFleet:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@cache
def _python_dirs_hidden_on_hosts() -> tuple[str, ...]:
    """Directories of this interpreter, and of the code under test (an editable install of fleet in
    a checkout under /tmp, as CI makes), that the hosts' own /root, /tmp or /dev/shm would hide."""
    import fleet

    checkout = os.path.dirname(os.path.dirname(os.path.realpath(fleet.__file__)))
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)} | {checkout}
    hidden = sorted(p for p in prefixes if p.startswith(HOST_PRIVATE_DIRS))
    return tuple(p for p in hidden if not any(p.startswith(other + "/") for other in hidden))


def deep_merged(base: dict, overrides: Mapping[str, object]) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merged(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


_OPEN_FLEETS: list[TestFleet] = []


def close_all_fleets() -> None:
    for fleet in list(_OPEN_FLEETS):
        fleet.close()


def _close_on_sigterm(signum: int, frame: object) -> None:
    # A second SIGTERM (`timeout` signals the child and then its whole process group) must not
    # run this again in the middle of the first cleanup and end the process half-way.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    close_all_fleets()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


@cache
def _install_safety_nets() -> None:
    atexit.register(close_all_fleets)
    # SIGTERM (e.g. a CI job cancelled) skips atexit by default; close the hosts first.
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _close_on_sigterm)


def start_test_fleet(
    names: list[str],
    shm_size: str = "256m",
    *,
    gpu_profiles: Mapping[str, Mapping[str, object]] | None = None,
    boot_timeout: float = 15.0,
) -> TestFleet:
    """Build and boot one test host per name; returns when every host's sshd serves."""
    return boot_test_fleet(TestFleet, names, shm_size, gpu_profiles, boot_timeout)


FleetKind = TypeVar("FleetKind", bound=TestFleet)


def boot_test_fleet(kind: type[FleetKind], names: list[str], shm_size: str, gpu_profiles: Mapping[str, Mapping[str, object]] | None, boot_timeout: float) -> FleetKind:
    """Build and boot a fleet of `kind` (plain test hosts, or systemd ones); closed again if any host fails."""
    if not names or len(set(names)) != len(names) or not all(HOSTNAME_PATTERN.match(n) for n in names):
        raise ValueError(f"test fleet: expected distinct hostnames like 'ct200', got {names!r}")
    unknown = set(gpu_profiles or {}) - set(names)
    if unknown:
        raise ValueError(f"test fleet: gpu_profiles names hosts not asked for: {sorted(unknown)}")
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    _install_safety_nets()
    record = claim_slots(f"{os.getpid()}-{secrets.token_hex(3)}", list(names))
    fleet = kind(record, shm_size)
    try:
        fleet._build(gpu_profiles or {}, boot_timeout)
    except BaseException:
        fleet.close()
        raise
    return fleet
