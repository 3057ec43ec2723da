"""rsync, with its `ssh` command built from the same `SSHTarget` paramiko uses.

The argv is built by pure functions (tested on their own); `rsync_transfer` runs it as a local
subprocess under a wall-clock deadline and turns exits that mean "the link or the login failed"
into `TransportError`s, so that the transfer retry policy can tell a flaky link from a bad key.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import shlex
import sys
import threading
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

from fleet.errors import (
    AuthenticationFailed,
    ConnectionLost,
    ConnectTimeout,
    HostKeyError,
    PermanentTransportError,
    TransportError,
)
from fleet.transport.base import CommandResult
from fleet.transport.framing import STARTUP_FILES, STARTUP_FIX
from fleet.transport.process import run_process
from fleet.transport.rshrelay import marker_rsync_path
from fleet.transport.sharing import MASTERS, control_options, is_one_shot
from fleet.transport.target import SSHTarget

# Interrupted files wait here (inside the destination directory) for the next attempt to resume
# them, instead of lying half-written under their real name; rsync removes it when done and
# protects it from --delete.
PARTIAL_DIR = ".rsync-partial"

# Same liveness rule as the brief's SkyPilot/Ray anchors: give up on a silent peer after ~15 s
# instead of waiting for TCP to time out.
SERVER_ALIVE_INTERVAL_S = 5
SERVER_ALIVE_COUNT_MAX = 3

# rsync exits that mean the connection failed rather than a file (23, 24 and others are returned).
_LINK_EXITS = {10, 12, 30, 35, 255}
log = logging.getLogger("fleet.transport")
# rsync through a login shell that prints on stdout (fleet/transport/rshrelay.py): its path, what
# rsync says when a shell talks, and the hosts found talking (their rsync goes through the relay).
RELAY = Path(__file__).with_name("rshrelay.py")
_SHELL_TALKS = re.compile(r"protocol version mismatch|is your shell clean")
_TALKING: set[str] = set()
_TALKING_LOCK = threading.Lock()

_PERMANENT_STDERR: tuple[tuple[re.Pattern[str], type[TransportError], str], ...] = (
    (re.compile(r"Host key verification failed"), HostKeyError, "host key refused"),
    # ssh lists the methods it tried; a file error reads "Permission denied (13)" and is not this.
    (re.compile(r"Permission denied \([a-z][a-z,-]*\)"), AuthenticationFailed, "authentication failed"),
    (re.compile(r"Bad configuration option|bad configuration options|Can't open user config file"), PermanentTransportError, "bad ssh config"),
    (
        re.compile(r"protocol version mismatch"),
        PermanentTransportError,
        "the host's shell prints text of its own around every command (or the user has no shell), and rsync "
        "cannot talk through it, not even through fleet's relay (fleet/transport/rshrelay.py); the text comes from a "
        f"shell startup file on the host ({STARTUP_FILES}): {STARTUP_FIX}",
    ),
)
_REMOTE_COMMAND_NOT_FOUND = 127


def ssh_argv(target: SSHTarget, control_path: str | None = None, *, start_master: bool = True) -> list[str]:
    """The `ssh` command rsync runs (`-e`): same key, port, known_hosts policy and timeouts;
    with `control_path`, through the host's shared master (fleet.transport.sharing), which this
    ssh becomes if none serves yet, unless not `start_master` (then a direct connection)."""
    argv = ["ssh"]
    if target.ssh_config is not None:
        argv += ["-F", str(target.ssh_config)]
    if target.port is not None:
        argv += ["-p", str(target.port)]
    if target.identity_file is not None:
        argv += ["-i", str(target.identity_file), "-o", "IdentitiesOnly=yes"]
    # ssh splits UserKnownHostsFile on whitespace (it takes a list); double quotes keep one path.
    known_hosts = str(target.known_hosts)
    if any(char.isspace() for char in known_hosts):
        known_hosts = f'"{known_hosts}"'
    argv += [
        "-o", "BatchMode=yes",  # never prompt for a password or passphrase: fail instead
        "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "StrictHostKeyChecking=" + ("yes" if target.host_key_policy == "verify" else "accept-new"),
        "-o", f"ConnectTimeout={math.ceil(target.connect_timeout)}",
        "-o", f"ServerAliveInterval={SERVER_ALIVE_INTERVAL_S}",
        "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT_MAX}",
    ]  # fmt: skip
    if control_path is not None:
        argv += control_options(control_path) if start_master else ["-o", "ControlMaster=no", "-o", f"ControlPath={control_path}"]
    return argv


def remote_spec(target: SSHTarget, path: str) -> str:
    """`[user@]host:path` as rsync wants it; with an alias, the ssh config resolves the host."""
    user = f"{target.user}@" if target.user else ""
    return f"{user}{target.destination}:{path}"


def rsync_argv(
    source: str,
    dest: str,
    *,
    ssh: SSHTarget | None,
    io_timeout_s: int,
    delete: bool = False,
    excludes: Sequence[str] = (),
    control_path: str | None = None,
    start_master: bool = True,
    regular_only: bool = False,
    ignore_existing: bool = False,
    relay_token: str | None = None,
    list_written: bool = False,
) -> list[str]:
    """The full rsync argv. `ssh=None` copies between local paths. `regular_only`: copy regular
    files and folders only, for what comes back from a host (untrusted): a symlink it planted
    would make the controller's readers open whatever it points at, a FIFO would block them.
    `ignore_existing`: a file the destination has is never replaced (a pulled result is kept).
    `list_written`: rsync prints the path of each item it writes on stdout (`--out-format=%n`).
    `relay_token`: for a host whose login shell prints on stdout, the remote shell is
    `fleet/transport/rshrelay.py`, which drops what comes before the marker the remote side
    prints first (rsync cannot read its protocol through a banner).

    `io_timeout_s` is rsync's own stall timeout (`--timeout`, also applied by the remote rsync,
    so a stalled remote side exits by itself); the caller adds a wall-clock deadline on top.
    """
    if io_timeout_s <= 0:
        raise ValueError(f"io_timeout_s must be positive, not {io_timeout_s}")
    argv = [
        "rsync",
        "--recursive", "--no-links" if regular_only else "--links", "--no-devices", "--no-specials", "--perms", "--times",
        f"--partial-dir={PARTIAL_DIR}",
        f"--timeout={io_timeout_s}",
    ]  # fmt: skip
    if delete:
        argv.append("--delete")
    if ignore_existing:
        argv.append("--ignore-existing")
    if list_written:
        argv.append("--out-format=%n")
    argv += [f"--exclude={pattern}" for pattern in excludes]
    if ssh is not None:
        # Remote paths go to the remote rsync over its protocol, never through the remote shell:
        # an rsync older than 3.2.4 (or one with RSYNC_OLD_ARGS set) would otherwise hand a
        # `$(...)`, `;` or space in a path to the host's shell. (`--secluded-args` is its 3.3 name.)
        argv.append("--protect-args")
        # rsync splits this string itself, honouring quotes.
        shell = ssh_argv(ssh, control_path, start_master=start_master)
        if relay_token is not None:
            shell = [sys.executable, str(RELAY), relay_token, *shell]
            argv.append(f"--rsync-path={marker_rsync_path(relay_token)}")
        argv += ["-e", shlex.join(shell)]
    argv += ["--", source, dest]
    return argv


def classify_rsync_failure(exit_code: int, stderr: str) -> tuple[type[TransportError], str] | None:
    """The transport error an rsync exit means, with a short reason; None if it is not one.

    None covers success and file-level failures (23 "some files were not transferred", 24
    "vanished source files", ...): the transfer ran, the caller reads the result.
    """
    if exit_code == 0:
        return None
    for pattern, error_class, reason in _PERMANENT_STDERR:
        if pattern.search(stderr):
            return error_class, reason
    if exit_code == _REMOTE_COMMAND_NOT_FOUND:
        return PermanentTransportError, "rsync is not installed on the host (remote command not found)"
    if exit_code in _LINK_EXITS:
        return ssh_failure(stderr)
    return None


def ssh_failure(stderr: str) -> tuple[type[TransportError], str]:
    """The transport error of an `ssh` that exited 255 before its remote command ran (or of an
    rsync whose ssh did), with a short reason, from what ssh printed."""
    for pattern, error_class, reason in _PERMANENT_STDERR:
        if pattern.search(stderr):
            return error_class, reason
    if re.search(r"Connection timed out|timed out during banner exchange", stderr):
        return ConnectTimeout, "connect timed out"
    return ConnectionLost, "connection failed or dropped"


def rsync_io_timeout(timeout: float) -> int:
    """rsync's stall timeout for a call with this wall-clock budget: short enough to matter."""
    return max(5, min(60, int(timeout)))


def push_source(local: Path) -> str:
    """A directory is pushed as its contents (trailing slash), so `remote` mirrors `local`."""
    return f"{local}/" if local.is_dir() else str(local)


def rsync_transfer(
    host: str,
    source: str | Path,
    dest: str | Path,
    *,
    ssh: SSHTarget | None,
    timeout: float,
    delete: bool = False,
    excludes: Sequence[str] = (),
    regular_only: bool = False,
    ignore_existing: bool = False,
    list_written: bool = False,
) -> CommandResult:
    """Run rsync under a wall-clock deadline (process group killed on expiry).

    A local `dest` (a Path) gets its parent directories; rsync creates only the last level.
    `regular_only` for a pull of what a host sends back (`rsync_argv`).
    Exits that mean the link or the login failed raise the matching `TransportError`.
    """
    if isinstance(dest, Path):
        dest.parent.mkdir(parents=True, exist_ok=True)
    control_path = MASTERS.control_path(ssh) if ssh is not None else None
    start_master = not is_one_shot()

    def attempt(relay: bool) -> CommandResult:
        argv = rsync_argv(
            str(source),
            str(dest),
            ssh=ssh,
            io_timeout_s=rsync_io_timeout(timeout),
            delete=delete,
            excludes=excludes,
            control_path=control_path,
            start_master=start_master,
            regular_only=regular_only,
            ignore_existing=ignore_existing,
            relay_token=secrets.token_hex(8) if relay else None,
            list_written=list_written,
        )
        with MASTERS.starting(control_path) if control_path is not None and start_master else nullcontext():
            existed = control_path is not None and MASTERS.before_use(control_path)
            try:
                outcome = run_process(host, argv, timeout=timeout, what=f"rsync {source} {dest}")
            finally:
                if control_path is not None and start_master:  # a master this process may have started
                    MASTERS.after_use(control_path, ssh.destination, existed)  # type: ignore[union-attr]
        return CommandResult.from_output(host, shlex.join(argv), outcome.exit_code, outcome.stdout, outcome.stderr, outcome.duration_s)

    relayed = ssh is not None and host in _TALKING
    result = attempt(relay=relayed)
    if ssh is not None and not relayed and _SHELL_TALKS.search(result.stderr):
        # The host's shell talks (from the start, or a banner added mid-sweep): through the relay
        # from now on, said once per host (pulls and pushes of one host may run at once).
        with _TALKING_LOCK:
            first = host not in _TALKING
            _TALKING.add(host)
        if first:
            log.warning("%s: its login shell prints on stdout; rsync goes through fleet's relay from now on (%s)", host, STARTUP_FILES)
        result = attempt(relay=True)
    failure = classify_rsync_failure(result.exit_code, result.stderr)
    if failure is not None:
        error_class, reason = failure
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise error_class(host, f"rsync {source} -> {dest}: {reason} (exit {result.exit_code}): {tail}")
    return result
