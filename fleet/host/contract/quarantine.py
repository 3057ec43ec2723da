"""`quarantine.json`: the servers of one host that the controller quarantined while the sweep runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.host.contract.layout import SweepDir
from fleet.host.contract.reader import Reader, read_text

QUARANTINE_SCHEMA = "fleet.host_quarantine/1"


@dataclass(frozen=True)
class HostQuarantine:
    """`quarantine.json`: servers of this host that the controller quarantined while the sweep
    runs (server id -> reason); the agent reads it afresh before each launch and skips them."""

    reasons: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"schema": QUARANTINE_SCHEMA, "servers": dict(sorted(self.reasons.items()))}

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = SweepDir.QUARANTINE) -> HostQuarantine:
        r = Reader.of(text_or_data, source)
        r.schema(QUARANTINE_SCHEMA)
        servers = r.child("servers")
        return cls({sid: servers.get(sid, str) for sid in servers.data})

    @classmethod
    def load(cls, path: Path | str) -> HostQuarantine:
        """The pushed file; none yet is an empty quarantine."""
        if not Path(path).exists():
            return cls()
        return cls.from_json(read_text(path), str(path))
