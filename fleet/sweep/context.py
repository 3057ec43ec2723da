"""What the loops of every host of one sweep share (`SweepContext`): the sweep's folder, playbook
and bundle, its stop event, fixer, progress display and balancer, and its limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.playbook import Playbook
from fleet.provision.provision import ProvisionOptions
from fleet.sweep.balancer import Balancer
from fleet.sweep.fixing import SweepFixer

if TYPE_CHECKING:  # the display's, drawn from the loops' statuses: the loops only hand it on
    from fleet.sweep.events import SweepProgress

# Default of `limits.host_lost_after_s`: longer than a GPU host's reboot (BIOS, driver, sshd),
# short enough that a host gone for good holds the sweep minutes, not forever.
HOST_LOST_AFTER_S = 600.0
# While results keep coming, a poll that sees new ones pulls `runs/` alone (one rsync), and the
# whole folder (server and agent logs too: a second rsync) at most this often: half a pull's cost
# in a fast sweep, and the controller's copy of a log at most this much older than a result. Every
# other pull (a host's end, a hand-over, after a reboot, `fetch-logs`) brings the whole folder.
FOLDER_PULL_EVERY_S = 10.0


@dataclass(frozen=True)
class SweepContext:
    """What the loops of every host of one sweep share (one per `fleet sweep` or resume)."""

    directory: Path  # results/<sweep-id>/ on the controller
    playbook: Playbook
    provision_options: ProvisionOptions  # for re-provisioning after a reboot
    bundle_dir: Path  # the agent bundle shipped to every host
    poll_interval_s: float = 2.0
    stop: threading.Event = field(default_factory=threading.Event)
    fixer: SweepFixer | None = None
    sleep: Callable[[float], None] = time.sleep  # retry back-off; tests pass a no-op
    progress: SweepProgress | None = None  # events with elapsed time and ETA, for the display
    host_lost_after_s: float = HOST_LOST_AFTER_S  # unreachable this long (since the last answer): lost
    folder_pull_every_s: float = FOLDER_PULL_EVERY_S
    balancer: Balancer | None = None  # moves work between the hosts (None: each host keeps its share)
    folder_errors: list[str] = field(default_factory=list)  # a host's loop could not write results here

    @property
    def sweep_id(self) -> str:
        return self.directory.name
