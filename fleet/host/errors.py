"""The base of fleet's errors and the ones that code on hosts raises (model cards, the simulator's
settings, an engine's launch rendering). They live here because this package ships to hosts;
`fleet.errors` re-exports them, and the rest of the hierarchy (transport, selection) lives there."""

from __future__ import annotations

from pathlib import Path


class FleetError(Exception):
    """Base of every error fleet raises on purpose."""


class ConfigError(FleetError):
    """A host or playbook file is malformed. Names the file, the field and what was expected."""

    def __init__(
        self, path: Path | str, field: str, expected: str, got: object = None, *, more: tuple[str, ...] = ()
    ) -> None:
        self.path = str(path)
        self.field = field
        self.expected = expected
        self.got = got
        self.more = more
        where = f"{self.path}: {field}" if field else self.path
        detail = f"{where}: expected {expected}"
        if got is not None:
            detail += f", got {got!r}"
        # Every other problem of the same file, so one run of the command shows them all.
        detail += "".join(f"\n{self.path}: {line}" for line in more)
        super().__init__(detail)


class ContractError(FleetError):
    """A sweep-directory document (shard, result, progress, quarantine) that is not what the
    contract says. Names the file, the field and what was expected."""

    def __init__(self, source: str, field: str, expected: str, got: object = None) -> None:
        self.source, self.field, self.expected, self.got = source, field, expected, got
        where = f"{source}: {field}" if field else source
        detail = f"{where}: expected {expected}"
        if got is not None:
            text = repr(got)
            detail += f", got {text if len(text) <= 120 else text[:117] + '...'}"
        super().__init__(detail)


class EngineConfigError(FleetError):
    """A server configuration that the engine would refuse, or whose explicit settings contradict
    each other. The message names the server, the setting and what would work instead."""
