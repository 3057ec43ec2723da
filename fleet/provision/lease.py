"""The controller's side of the host lease (`fleet.host.contract.lease`): take it before anything
touches a host's servers, re-take it for each start of its agent, release it at the end.

One round trip each: `python - acquire|release ...` on the host, the program on stdin (no fleet
code needs to be on the host yet, and nothing lands on its command line but names and a pid).
"""

from __future__ import annotations

import getpass
import logging
import os
import posixpath
import shlex
import socket
from functools import lru_cache

from fleet.errors import CommandFailed, FleetError
from fleet.host.contract.lease import EXIT_HELD, EXIT_TAKEN, LEASE_FILE, Claim, Taken, command_args, parse_held, parse_taken, remote_program
from fleet.inventory import Host
from fleet.provision.models import Change
from fleet.transport.base import Transport

log = logging.getLogger("fleet.lease")

LEASE_CALL_S = 30.0


def controller_owner() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def sweep_claim(sweep_id: str) -> Claim:
    """This controller process, for a sweep (a resume makes the same claim: same sweep id)."""
    return Claim(sweep_id, controller_owner(), os.getpid())


def provision_claim() -> Claim:
    """`fleet provision` outside a sweep: a lease of its own, for as long as it runs."""
    return Claim("", controller_owner(), os.getpid())


@lru_cache(maxsize=1)
def _program() -> bytes:
    return remote_program()


def lease_command(host: Host, action: str, claim: Claim) -> str:
    """The engine's Python, else the host's python3: provisioning takes the lease before its
    preflight says whether the engine's interpreter is there, and a missing one is preflight's to report."""
    args = shlex.join(["-", *command_args(action, host.paths.work_dir, claim)])
    return f'p={shlex.quote(host.engine.python)}; command -v "$p" >/dev/null || p=python3; exec "$p" {args}'


def _call(t: Transport, host: Host, action: str, claim: Claim) -> tuple[int, str, str]:
    result = t.run(lease_command(host, action, claim), timeout=LEASE_CALL_S, stdin=_program())
    return result.exit_code, result.stdout, result.stderr


def take_lease(t: Transport, host: Host, claim: Claim) -> Taken:
    """Take (or re-take) the host's lease; `LeaseHeld` names the live holder. A dead lease taken
    over is logged with its holder and why it was dead."""
    code, stdout, stderr = _call(t, host, "acquire", claim)
    source = f"{host.name}:{posixpath.join(host.paths.work_dir, LEASE_FILE)}"
    if code == EXIT_HELD:
        raise parse_held(stdout, source, host.name)
    if code != EXIT_TAKEN:
        raise CommandFailed(host.name, "python - acquire (the host lease)", code, stdout, stderr)
    taken = parse_taken(stdout, source)
    if taken.reason:
        previous = taken.took_over.describe(taken.lease.heartbeat_at) if taken.took_over else "an unreadable lease file"
        log.warning("%s: took over the lease of %s: %s", host.name, previous, taken.reason)
    return taken


def release_lease(t: Transport, host: Host, claim: Claim) -> bool:
    """Release the host's lease if it is `claim`'s; never another's."""
    code, stdout, stderr = _call(t, host, "release", claim)
    if code != EXIT_TAKEN:
        raise CommandFailed(host.name, "python - release (the host lease)", code, stdout, stderr)
    return '"released": true' in stdout


def hold_for_provision(t: Transport, host: Host, claim: Claim | None, dry_run: bool) -> list[Change]:
    """Before provisioning touches a host's servers: the sweep's lease (`claim`), or one of this
    `fleet provision`'s own (None). `LeaseHeld` where another live sweep holds the host. A dry run
    takes nothing (it clears nothing)."""
    if dry_run:
        return []
    taken = take_lease(t, host, claim or provision_claim())
    if taken.reason is None:
        return []
    previous = taken.took_over.describe(taken.lease.heartbeat_at) if taken.took_over else "an unreadable lease file"
    return [Change("lease", f"took over the lease of {previous}: {taken.reason}")]


def end_of_provision(t: Transport, host: Host, claim: Claim | None, dry_run: bool, failed: bool) -> None:
    """`fleet provision` gives its own lease back; a sweep keeps its lease for its agent unless
    the host failed (it takes no part). Best effort: a lease left behind dies by its TTL."""
    if dry_run or (claim is not None and not failed):
        return
    try:
        release_lease(t, host, claim or provision_claim())
    except FleetError as exc:
        log.warning("%s: the lease was not released (it expires by itself): %s", host.name, exc)
