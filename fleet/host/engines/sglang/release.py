"""Which SGLang release fleet speaks for a host: the releases fleet knows, and the nearest known one
for any other version string.

Every piece of SGLang knowledge in this package (flags and argument resolution, memory sizing, log
lines, failure texts) is a table keyed by one of `KNOWN_RELEASES`. Adding a release is adding its
entry here and one entry in each of those tables; a version fleet does not know is planned with the
nearest known release, and `ReleaseChoice.note` says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int, int]

# Oldest first. 0.5.12: the seed campaign's release (its story must stay exact). 0.5.23: what hosts run now.
KNOWN_RELEASES: tuple[str, ...] = ("0.5.12", "0.5.23")
# The release a `sim` host plays when its host file does not pin one (`engine.release`).
DEFAULT_SIM_RELEASE = "0.5.23"


class ReleaseError(ValueError):
    """A version string that is not a release number."""


def parse_version(text: str) -> Version:
    """`0.5.23`, `v0.5.13.post1`, `0.5.14rc0` -> (0, 5, 23), (0, 5, 13), (0, 5, 14)."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if not match:
        raise ReleaseError(f"SGLang version {text!r}: expected a release number such as {KNOWN_RELEASES[-1]}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


@dataclass(frozen=True)
class ReleaseChoice:
    """The version a host reports (or pins) and the known release fleet speaks for it."""

    requested: str
    release: str  # one of KNOWN_RELEASES

    @property
    def exact(self) -> bool:
        return parse_version(self.requested) == parse_version(self.release)

    @property
    def note(self) -> str | None:
        """A warning for the user when fleet speaks a release other than the one asked for."""
        if self.exact:
            return None
        return (
            f"SGLang {self.requested} is not a release fleet knows ({', '.join(KNOWN_RELEASES)}); "
            f"planned with the nearest known release, {self.release}"
        )


def choose_release(version: str) -> ReleaseChoice:
    """The known release nearest to `version`: the newest known release not newer than it, else the
    oldest known one (a release's behaviour holds until the next known release changes it)."""
    wanted = parse_version(version)
    candidates = [r for r in KNOWN_RELEASES if parse_version(r) <= wanted]
    return ReleaseChoice(requested=version, release=candidates[-1] if candidates else KNOWN_RELEASES[0])
