"""Starting, watching and stopping long-lived processes (servers, the agent itself) on a host.
Standard library only.

Two implementations of one interface:
- `SystemdServices`: units the controller installed as `<name>.service` (argv, env and the log
  file -- the unit's output goes to journald and, through `tee`, to the log the agent tails -- are
  baked into the unit, with `Environment=FLEET_SERVICE=<name>`); `systemctl start/stop/show`, and
  the journal for how a unit ended once systemd has unloaded it.
- `ProcessServices`: for hosts without systemd. The process runs in a session of its own
  (`setsid`), under a tiny `sh` that records its exit code in `<state_dir>/<name>.exit`; a pid
  file `<state_dir>/<name>.pid` (JSON: pid, start time, boot id) finds it again after the agent
  itself restarted. Stopping sends SIGTERM to the whole process group, then SIGKILL after a grace
  period.

A restarted agent that finds one of its servers still running KILLS it rather than adopting it:
the run it was serving was interrupted and will be redone, and a server that already served part
of that run holds its prompts in the prefix cache and its counters -- a fresh start is what makes
the redone run comparable with the others. (The agent's own service is never stopped by itself.)

Also here: making sure a port and GPUs are free after a stop, and clearing stale servers of an
earlier run that still hold them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from fleet.host import nvidia_smi
from fleet.host.atomic import write_json_atomic
from fleet.host.procfs import boot_id, cmdline, group_members, pid_alive, start_ticks
from fleet.host.errors import ServiceError
from fleet.host.errors import NvidiaSmiError

RUNNING, EXITED, ABSENT = "running", "exited", "absent"
# Set in the environment of every service fleet starts (systemd units must set it too): a process
# that holds a port or GPU the agent needs is killed only if it carries it -- a stale server of an
# earlier run or sweep. Anything else (someone's own server) is reported, never killed.
SERVICE_ENV_MARKER = "FLEET_SERVICE"
# Runs the service, then records its exit code atomically: `sh -c SCRIPT fleet-service EXITFILE
# MAINFILE argv...`. The service itself runs as the wrapper's child, which writes its own pid to
# MAINFILE and execs the service: its pid is the service's, so its death is seen at once (the
# wrapper, and children the service left behind, may outlive it by a while).
_MAIN = 'echo "$$" > "$0"; exec "$@"'
_WRAPPER = f'f=$1; m=$2; shift 2; /bin/sh -c {shlex.quote(_MAIN)} "$m" "$@"; c=$?; printf "%s\\n" "$c" > "$f.tmp" && mv -f "$f.tmp" "$f"; exit "$c"'


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: str
    cwd: str | None = None


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    state: str  # running | exited | absent
    pid: int | None = None
    exit_code: int | None = None  # negative: killed by that signal; None: unknown

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "state": self.state, "pid": self.pid, "exit_code": self.exit_code}


def exit_description(code: int | None) -> str:
    """How a service's process ended, for a person: both managers report a death by signal N as
    exit code -N (ProcessServices from its wrapper's 128 + N, SystemdServices from ExecMainCode)."""
    if code is None:
        return "exited (its exit code is unknown)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {-code} ({name}; exit status {128 - code})"
    return f"exited with code {code}"


# A server killed by SIGKILL leaves no line in its log: the kernel's OOM killer, or a person.
SIGKILL_HINT = "nothing in its log explains a SIGKILL: the kernel's OOM killer (`dmesg -T | grep -i oom`) or a `kill -9`"


class Services(Protocol):
    def start(self, spec: ServiceSpec) -> ServiceStatus: ...

    def status(self, name: str) -> ServiceStatus: ...

    def stop(self, name: str, grace_s: float) -> ServiceStatus: ...


def started_by_fleet(pid: int) -> bool:
    """The process carries fleet's service marker in its environment (readable by root or its owner)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return any(item.startswith(SERVICE_ENV_MARKER.encode() + b"=") for item in environ.split(b"\0"))


# The same rule as `started_by_fleet`, as one shell command printing one pid a line: for `fleet
# provision`, which clears stale servers before any fleet code is on the host. Both read the
# marker from /proc/<pid>/environ and nothing else -- never a command-line pattern, which would
# also match a colleague's hand-started `python -m sglang.launch_server`. An environ the caller
# may not read (another user's process, without root) counts as not fleet's: left alone.
# One grep for every process (-z: an environ's entries are NUL-separated, so ^ anchors each one;
# -s: processes that exit meanwhile or cannot be read are skipped silently).
FLEET_SERVICE_PIDS_SH = f"grep -lzsa -e '^{SERVICE_ENV_MARKER}=' /proc/[0-9]*/environ | sed -n 's#^/proc/\\([0-9]*\\)/environ$#\\1#p'; true"


def _wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def kill_group(pgid: int, grace_s: float, reap: Callable[[], None] = lambda: None) -> None:
    """SIGTERM the group, SIGKILL what is left after `grace_s`. `reap` collects our own children
    (an unreaped child is a zombie, which would look alive to a signal-0 probe)."""

    def gone() -> bool:
        reap()
        return not group_members(pgid)

    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
            if sig == signal.SIGTERM:
                # A stopped process (SIGSTOP, a debugger) holds a TERM pending until it runs again:
                # wake it, as systemd does, or a hung server that was stopped costs the whole grace.
                os.killpg(pgid, signal.SIGCONT)
        except ProcessLookupError:
            return
        if _wait_until(gone, wait):
            return


# ---------------------------------------------------------------------------------------------
# ProcessServices


class ProcessServices:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def _pid_file(self, name: str) -> Path:
        return self.state_dir / f"{name}.pid"

    def _exit_file(self, name: str) -> Path:
        return self.state_dir / f"{name}.exit"

    def _main_file(self, name: str) -> Path:
        return self.state_dir / f"{name}.main"

    def _main_pid(self, name: str) -> int | None:
        """The pid the service's own process wrote before exec; None before it wrote it, or where
        it could not (a full disk): then the group says whether it runs."""
        try:
            return int(self._main_file(name).read_text().strip())
        except (OSError, ValueError):
            return None

    def _record(self, name: str) -> dict[str, Any] | None:
        try:
            record = json.loads(self._pid_file(name).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if record.get("boot_id") != boot_id():
            # From before a reboot: that process is gone, whatever now holds its pid.
            self._pid_file(name).unlink(missing_ok=True)
            return None
        return record

    def _reap(self) -> None:
        # Server threads start and stop services side by side: iterate over a copy, since another
        # thread may add or drop a child meanwhile (dict iteration would raise).
        for child in list(self._children.values()):
            child.poll()

    def _members(self, record: dict[str, Any]) -> set[int]:
        pid = int(record["pid"])
        leader_ticks = start_ticks(pid)
        if leader_ticks is not None and leader_ticks != record.get("start_ticks"):
            return set()  # the pid (and so the group id) now belongs to another process
        return group_members(pid)

    def start(self, spec: ServiceSpec) -> ServiceStatus:
        current = self.status(spec.name)
        if current.running:
            raise ServiceError(f"{spec.name}: already running as pid {current.pid}; stop it first")
        if not spec.argv:
            raise ServiceError(f"{spec.name}: empty argv")
        exit_file, main_file = self._exit_file(spec.name), self._main_file(spec.name)
        exit_file.unlink(missing_ok=True)
        main_file.unlink(missing_ok=True)
        Path(spec.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(spec.log_path, "ab") as log:
            try:
                child = subprocess.Popen(
                    ["/bin/sh", "-c", _WRAPPER, "fleet-service", str(exit_file), str(main_file), *spec.argv],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **spec.env, SERVICE_ENV_MARKER: spec.name},
                    cwd=spec.cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServiceError(f"{spec.name}: cannot start {spec.argv[0]}: {exc}") from exc
        self._children[spec.name] = child
        record = {
            "pid": child.pid,
            "start_ticks": start_ticks(child.pid),
            "boot_id": boot_id(),
            "argv": spec.argv,
            "log_path": spec.log_path,
            "started_at": time.time(),
        }
        try:
            write_json_atomic(self._pid_file(spec.name), record)
        except OSError:
            # Without its pid file nothing could find it again (a full or read-only disk): never
            # leave a process running that fleet cannot stop.
            kill_group(child.pid, 0.0, self._reap)
            self._children.pop(spec.name, None)
            raise
        return ServiceStatus(spec.name, RUNNING, child.pid)

    def status(self, name: str) -> ServiceStatus:
        self._reap()
        record = self._record(name)
        if record is None:
            return ServiceStatus(name, ABSENT)
        pid = int(record["pid"])
        # Read before the group is listed: a main process that forks and writes its pid after the
        # listing began is missing from it, and would look dead.
        main = self._main_pid(name)
        members = self._members(record)
        if members and not self._exit_file(name).exists():
            # Running until the service's own process is gone: a server killed with SIGKILL is
            # dead at once, whatever its wrapper and its orphaned children still do. (A main pid
            # outside the group's live members is dead, or a recycled number.)
            if main is None or main in members:
                return ServiceStatus(name, RUNNING, pid)
        return ServiceStatus(name, EXITED, pid, self._exit_code(name))

    def _exit_code(self, name: str) -> int | None:
        """Negative: killed by that signal. The wrapper's shell reports a death by signal N as
        128 + N (137 for SIGKILL), read back as -N -- as systemd's ExecMainCode says it."""
        try:
            code = int(self._exit_file(name).read_text().strip())
        except (OSError, ValueError):
            child = self._children.get(name)
            # The wrapper itself was killed by a signal: Popen knows it (as -signal) if we are its parent.
            return child.returncode if child is not None else None
        return -(code - 128) if 128 < code < 128 + 65 else code

    def stop(self, name: str, grace_s: float) -> ServiceStatus:
        record = self._record(name)
        if record is not None and self._members(record):
            kill_group(int(record["pid"]), grace_s, self._reap)
        final = self.status(name)
        if final.running:
            raise ServiceError(f"{name}: process group {final.pid} survived SIGKILL")
        self._pid_file(name).unlink(missing_ok=True)
        self._main_file(name).unlink(missing_ok=True)
        self._children.pop(name, None)
        return final


# ---------------------------------------------------------------------------------------------
# SystemdServices


def parse_systemctl_show(text: str) -> dict[str, str]:
    """`systemctl show -p A,B unit` prints `A=value` lines."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


# The unit's ActiveState values in which a service counts as running. `activating` includes
# `auto-restart` (the agent's Restart=on-failure between two runs): no process then, but the unit
# is on its way back. (The sweep's poll asks systemd for this without the agent: fleet.sweep.channel.)
RUNNING_ACTIVE_STATES = ("active", "activating", "reloading", "deactivating")


def systemd_status(name: str, show: dict[str, str]) -> ServiceStatus:
    """A unit's status from its `systemctl show` properties."""
    if show.get("LoadState") == "not-found":
        return ServiceStatus(name, ABSENT)
    pid = int(show.get("MainPID") or 0) or None
    if show.get("ActiveState") in RUNNING_ACTIVE_STATES:
        return ServiceStatus(name, RUNNING, pid)
    code: int | None = None
    status = show.get("ExecMainStatus", "")
    if status.isdigit() and show.get("ExecMainPID", "0") != "0":
        # ExecMainCode 1 = CLD_EXITED (status is the exit code); 2/3 = killed/dumped (status is the signal).
        code = int(status) if show.get("ExecMainCode") == "1" else -int(status)
    return ServiceStatus(name, EXITED, pid, code)


# systemd's catalogue ids (sd-messages.h) of "<unit>: Deactivated successfully." and of
# "<unit>: Main process exited, code=..., status=..." (fields EXIT_CODE, EXIT_STATUS).
UNIT_SUCCESS_MESSAGE_ID = "7ad2d189f7e94e70a38c781354912448"
UNIT_PROCESS_EXIT_MESSAGE_ID = "98e322203f7a4ed290d09fe03c09fe15"


def journal_exit_code(entry: dict[str, Any]) -> int | None:
    """How a unit's last run ended, from its last journal entry of those two kinds (`journalctl -o json`)."""
    if entry.get("MESSAGE_ID") == UNIT_SUCCESS_MESSAGE_ID:
        return 0
    status = str(entry.get("EXIT_STATUS", ""))
    if entry.get("MESSAGE_ID") == UNIT_PROCESS_EXIT_MESSAGE_ID and status.isdigit():
        return int(status) if entry.get("EXIT_CODE") == "exited" else -int(status)
    return None


class SystemdServices:
    PROPERTIES = "LoadState,ActiveState,SubState,MainPID,ExecMainPID,ExecMainCode,ExecMainStatus"

    def _systemctl(self, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServiceError(f"systemctl {' '.join(args)}: {exc}") from exc

    def _show(self, name: str) -> dict[str, str]:
        result = self._systemctl("show", f"--property={self.PROPERTIES}", f"{name}.service")
        if result.returncode != 0:
            raise ServiceError(f"systemctl show {name}.service: {result.stderr.strip()}")
        return parse_systemctl_show(result.stdout)

    def _journal_exit_code(self, name: str) -> int | None:
        matches = [f"MESSAGE_ID={UNIT_SUCCESS_MESSAGE_ID}", f"MESSAGE_ID={UNIT_PROCESS_EXIT_MESSAGE_ID}"]
        try:
            result = subprocess.run(
                ["journalctl", "-u", f"{name}.service", "-o", "json", "-n", "1", "--no-pager", *matches],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            return journal_exit_code(json.loads(result.stdout)) if result.returncode == 0 and result.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
            return None  # no journal to read: the code stays unknown, as systemd left it

    def start(self, spec: ServiceSpec) -> ServiceStatus:
        self._systemctl("reset-failed", f"{spec.name}.service")
        result = self._systemctl("start", f"{spec.name}.service")
        if result.returncode != 0:
            raise ServiceError(f"systemctl start {spec.name}.service: {result.stderr.strip()}")
        return self.status(spec.name)

    def status(self, name: str) -> ServiceStatus:
        show = self._show(name)
        status = systemd_status(name, show)
        if status.state == EXITED and status.exit_code is None and show.get("LoadState") == "loaded":
            # systemd unloads a unit that ended without failing (garbage collection), and a unit
            # loaded afresh shows ExecMainPID=0: how it ended is then only in the journal.
            return ServiceStatus(name, EXITED, status.pid, self._journal_exit_code(name))
        return status

    def stop(self, name: str, grace_s: float) -> ServiceStatus:
        result = self._systemctl("stop", f"{name}.service", timeout_s=grace_s + 60)
        if result.returncode != 0 and "not loaded" not in result.stderr:
            raise ServiceError(f"systemctl stop {name}.service: {result.stderr.strip()}")
        return self.status(name)


def make_services(manager: str, state_dir: Path) -> Services:
    if manager == "systemd":
        return SystemdServices()
    if manager == "process":
        return ProcessServices(state_dir)
    raise ServiceError(f"unknown service manager {manager!r}; expected systemd or process")


# ---------------------------------------------------------------------------------------------
# Ports and GPUs


def port_open(port: int, host: str = "127.0.0.1", timeout_s: float = 1.0) -> bool:
    """Something accepts connections on the port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(inode)
    return inodes


def port_listeners(port: int) -> set[int]:
    """Pids with a listening socket on the port (from /proc; needs root to see other users')."""
    inodes = _listening_inodes(port)
    if not inodes:
        return set()
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue
        if links & wanted:
            pids.add(int(entry.name))
    return pids


def gpu_names() -> list[str]:
    """The machine's GPU names, as nvidia-smi lists them; [] where there is none or it fails."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        run = subprocess.run(nvidia_smi.query_command("query-gpu", ("index", "name")), capture_output=True, text=True, timeout=30)
        return [row["name"] for row in nvidia_smi.parse_csv(run.stdout, ("index", "name"))] if run.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []


def gpu_pids(gpus: Iterable[int]) -> dict[int, set[int]] | None:
    """{pid: {GPU indexes}} of compute processes on these GPUs; None when there is no nvidia-smi
    (nothing can be checked), it fails, or it prints what cannot be read."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        index_run = subprocess.run(nvidia_smi.query_command("query-gpu", ("index", "uuid")), capture_output=True, text=True, timeout=30)
        apps_run = subprocess.run(nvidia_smi.query_command("query-compute-apps", nvidia_smi.COMPUTE_APPS_FIELDS), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if index_run.returncode != 0 or apps_run.returncode != 0:
        return None
    try:
        uuids = {row["uuid"]: int(row["index"]) for row in nvidia_smi.parse_csv(index_run.stdout, ("index", "uuid"))}
        apps = nvidia_smi.parse_compute_apps(apps_run.stdout)
    except (NvidiaSmiError, ValueError, KeyError):
        return None
    wanted = set(gpus)
    holders: dict[int, set[int]] = {}
    for app in apps:
        index = uuids.get(app.gpu_uuid)
        if index in wanted:
            holders.setdefault(app.pid, set()).add(index)
    return holders


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    holds: str  # "port 30000" or "GPU 0,1"


def find_holders(port: int, gpus: Iterable[int]) -> list[Holder]:
    """Processes that hold the port or any of the GPUs."""
    holders = [Holder(pid, cmdline(pid), f"port {port}") for pid in sorted(port_listeners(port))]
    for pid, indexes in sorted((gpu_pids(gpus) or {}).items()):
        holders.append(Holder(pid, cmdline(pid), "GPU " + ",".join(map(str, sorted(indexes)))))
    return holders


def clear_stale(port: int, gpus: Iterable[int], grace_s: float) -> tuple[list[Holder], list[Holder]]:
    """Kill (by process group) the services fleet started earlier that hold the port or GPUs.
    Returns (killed, blockers): blockers are holders fleet did not start, left alone -- or that
    survived."""
    killed: list[Holder] = []
    blockers: list[Holder] = []
    for holder in find_holders(port, gpus):
        if any(holder.pid == done.pid for done in killed) or not pid_alive(holder.pid):
            # Listed twice (it held the port and a GPU) and killed by the first, or gone meanwhile:
            # a dead process's environ is unreadable, so it must not be read as someone else's.
            continue
        if not started_by_fleet(holder.pid):
            blockers.append(holder)
            continue
        try:
            pgid = os.getpgid(holder.pid)
        except ProcessLookupError:
            continue
        kill_group(pgid, grace_s)
        (blockers if pid_alive(holder.pid) else killed).append(holder)
    return killed, blockers


def wait_free(port: int, gpus: Iterable[int], timeout_s: float) -> list[Holder]:
    """Wait until nothing listens on the port and no process uses the GPUs; what still holds them."""
    gpus = list(gpus)
    holders: list[Holder] = []

    def free() -> bool:
        nonlocal holders
        holders = find_holders(port, gpus)
        if not holders and port_open(port):
            # Something answers but /proc does not say what (another user's process, another namespace).
            holders = [Holder(0, "(unknown)", f"port {port}")]
        return not holders

    _wait_until(free, timeout_s, interval_s=0.25)
    return holders
