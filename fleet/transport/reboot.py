"""Reboot detection by boot id: a random UUID the kernel draws at every boot.

Record `read_boot_id` before anything that may reboot the host, then `wait_for_reboot` returns
the new boot id once the host answers with a different, non-empty one (an empty one is seen on
some systems just before they go down). Uptime and `who -b` are not used: they are unreliable
without an RTC, which is why Ansible moved to the boot id.

Caveat: a container shares its host kernel's boot id, and a systemd soft-reboot keeps it; both
look like "no reboot" here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from fleet.errors import TransientTransportError
from fleet.retry import WAIT_FOR_REBOOT, RetryPolicy, retrying
from fleet.transport.base import BOOT_ID_PATH, Transport
from fleet.errors import RebootTimeout

# Each probe is short: a host that is booting either answers quickly or not at all.
PROBE_TIMEOUT_S = 10.0


class _SameBoot(TransientTransportError):
    """The host answered with the old (or an empty) boot id: it has not rebooted yet."""


def read_boot_id(transport: Transport, *, timeout: float = PROBE_TIMEOUT_S) -> str:
    """The host's current boot id; '' if the file is empty or unreadable."""
    result = transport.run(["cat", BOOT_ID_PATH], timeout=timeout)
    return result.stdout.strip() if result.ok else ""


def wait_for_reboot(
    transport: Transport,
    old_boot_id: str,
    policy: RetryPolicy = WAIT_FOR_REBOOT,
    *,
    probe_timeout: float = PROBE_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> str:
    """Poll until the host answers with a boot id other than `old_boot_id`; return the new one.

    Connection failures while it is down are expected and retried (the transport reconnects on
    its own). Raises `RebootTimeout` when `policy` gives up, or a permanent `TransportError`
    (say, a changed host key after a reinstall) at once.
    """

    def probe() -> str:
        boot_id = read_boot_id(transport, timeout=probe_timeout)
        if not boot_id or boot_id == old_boot_id:
            raise _SameBoot(transport.host, f"boot id still {boot_id or 'empty'!s}")
        return boot_id

    started = clock()
    try:
        return retrying(policy, transport.host, probe, idempotent=True, sleep=sleep, clock=clock, rng=rng)
    except TransientTransportError as exc:
        raise RebootTimeout(
            transport.host,
            f"no new boot id after {clock() - started:.0f}s (policy {policy.name}, old boot id {old_boot_id}); last: {exc}",
        ) from exc
