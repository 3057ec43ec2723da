"""Which SGLang release fleet speaks for a host: the releases fleet knows, and the nearest known one
for any other version string.

Every piece of SGLang knowledge in this package (flags and argument resolution, memory sizing, log
lines, failure texts) is a table keyed by one of `KNOWN_RELEASES`. Adding a release is adding its
entry here and one entry in each of those tables; a version fleet does not know is planned with the
nearest known release, and `ReleaseChoice.note` says so.
"""

from __future__ import annotations

from fleet.host.engines import base
from fleet.host.engines.base import ReleaseChoice, Version

TITLE = "SGLang"

# Oldest first. 0.5.12: the seed campaign's release (its story must stay exact). 0.5.23: what hosts run now.
KNOWN_RELEASES: tuple[str, ...] = ("0.5.12", "0.5.23")
# The release a `sim` host plays when its host file does not pin one (`engine.release`).
DEFAULT_SIM_RELEASE = "0.5.23"
# Forks fleet knows by name; the first is what a sim host plays. ddtree: the DDTree fork (PR #29907).
FORKS: tuple[str, ...] = ("ddtree",)


def parse_version(text: str) -> Version:
    """`0.5.23`, `v0.5.13.post1`, `0.5.14rc0` -> (0, 5, 23), (0, 5, 13), (0, 5, 14)."""
    return base.parse_version(text, title=TITLE, example=KNOWN_RELEASES[-1])


def choose_release(version: str) -> ReleaseChoice:
    """The known release nearest to `version` (`fleet.host.engines.base.choose_release`)."""
    return base.choose_release(version, KNOWN_RELEASES, TITLE)
