"""Which vLLM release fleet speaks for a host: the releases fleet knows, and the nearest known one
for any other version string.

Every piece of vLLM knowledge in this package (the `vllm serve` flag table and its parser, launch
rendering, the log lines) is keyed by one of `KNOWN_RELEASES`. Adding a release is adding its entry
here, its flag table (`python tools/vllm_flag_table.py` with that wheel installed) and an entry in
each table keyed by release; a version fleet does not know is planned with the nearest known
release, and `ReleaseChoice.note` says so.
"""

from __future__ import annotations

from fleet.host.engines import base
from fleet.host.engines.base import ReleaseChoice, Version

TITLE = "vLLM"

# Oldest first. 0.33.0: the newest release in the registry when vLLM was added (issue 23).
KNOWN_RELEASES: tuple[str, ...] = ("0.33.0",)
# The release a `sim` host plays when its host file does not pin one.
DEFAULT_SIM_RELEASE = "0.33.0"
# vLLM has no forks fleet knows.
FORKS: tuple[str, ...] = ()


def parse_version(text: str) -> Version:
    """`0.33.0`, `v0.33.0`, `0.33.1rc1`, `0.33.0+cu130` -> (0, 33, 0) ..."""
    return base.parse_version(text, title=TITLE, example=KNOWN_RELEASES[-1])


def choose_release(version: str) -> ReleaseChoice:
    """The known release nearest to `version` (`fleet.host.engines.base.choose_release`)."""
    return base.choose_release(version, KNOWN_RELEASES, TITLE)
