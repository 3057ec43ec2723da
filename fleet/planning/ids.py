"""Ids of runs and server configurations, each computed once per object.

`Run.id` and `ServerConfig.id` are stable hashes of their JSON (tens of microseconds each); planning
asked for each run's id eight times and each server's once per run, a fifth of `fleet plan` at 10k
runs. An IdCache remembers them by object identity (holding the object, so that an id is never
reused for another one) for as long as the plan that owns it.
"""

from __future__ import annotations

from typing import Protocol


class HasId(Protocol):
    @property
    def id(self) -> str: ...


class IdCache:
    def __init__(self) -> None:
        self._known: dict[int, tuple[HasId, str]] = {}

    def __call__(self, item: HasId) -> str:
        known = self._known.get(id(item))
        if known is not None and known[0] is item:
            return known[1]
        value = item.id
        self._known[id(item)] = (item, value)
        return value

    def __len__(self) -> int:
        return len(self._known)
