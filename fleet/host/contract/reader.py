"""Typed reading of the contract's JSON documents: every complaint is a `ContractError` naming the
file, the field's path and what was expected. One reader for the shard, results, progress and the
host quarantine."""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from fleet.host.errors import ContractError

E = TypeVar("E", bound=Enum)
_MISSING: Any = object()
_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object", list: "a list"}


def parse_json(text_or_data: str | bytes | Mapping[str, Any], source: str) -> object:
    """A document given as text, or already parsed."""
    if isinstance(text_or_data, Mapping):
        return dict(text_or_data)
    try:
        return json.loads(text_or_data)
    except ValueError as exc:
        raise ContractError(source, "", "a whole JSON document (truncated or not JSON)", str(exc)) from None


def read_text(path: Path | str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ContractError(str(path), "", "a readable file", exc.strerror or str(exc)) from None


class Reader:
    """Typed access to one JSON object."""

    def __init__(self, data: object, source: str, where: str = "") -> None:
        if not isinstance(data, dict):
            raise ContractError(source, where, "a JSON object", type(data).__name__)
        self.data: dict[str, Any] = data
        self.source, self.where = source, where

    @classmethod
    def of(cls, text_or_data: str | bytes | Mapping[str, Any], source: str) -> Reader:
        return cls(parse_json(text_or_data, source), source)

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, expected: str, got: object = None) -> ContractError:
        return ContractError(self.source, self.path(key), expected, got)

    def get(self, key: str, kinds: type | tuple[type, ...], expected: str | None = None, default: Any = _MISSING) -> Any:
        """The value at `key`, of one of `kinds`; `default` where the key is absent (else an error)."""
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        wanted = expected or " or ".join(_KIND_NAMES.get(k, "null" if k is type(None) else k.__name__) for k in kinds)
        if key not in self.data:
            if default is _MISSING:
                raise self.fail(key, f"{wanted} (the field is missing)")
            return default
        value = self.data[key]
        # JSON has one number type: an int is a fine float. A bool is never a number: a port or a
        # count given as `true` is a mistake worth naming.
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.fail(key, wanted, value)
        return value

    def optional(self, key: str, kinds: type | tuple[type, ...], expected: str | None = None) -> Any:
        """The value at `key`, or None where it is absent or null."""
        if self.data.get(key) is None:
            return None
        return self.get(key, kinds, expected)

    def text(self, key: str, default: Any = _MISSING) -> str:
        value = self.get(key, str, "a non-empty string", default)
        if value == "":
            raise self.fail(key, "a non-empty string", value)
        return str(value)

    def number(self, key: str, default: Any = _MISSING, positive: bool = True) -> float:
        value = self.get(key, (int, float), "a number", default)
        if positive and value <= 0:
            raise self.fail(key, "a number > 0", value)
        return float(value)

    def choice(self, key: str, choices: tuple[str, ...], default: Any = _MISSING) -> str:
        value = self.get(key, str, f"one of {', '.join(choices)}", default)
        if value not in choices:
            raise self.fail(key, f"one of {', '.join(choices)}", value)
        return str(value)

    def enum(self, key: str, kind: type[E]) -> E:
        value = self.choice(key, tuple(str(member.value) for member in kind))
        return kind(value)

    def strings(self, key: str, default: Any = _MISSING) -> list[str]:
        value = self.get(key, list, "a list of strings", default)
        if not all(isinstance(item, str) for item in value):
            raise self.fail(key, "a list of strings", value)
        return list(value)

    def child(self, key: str) -> Reader:
        return Reader(self.get(key, dict, "an object"), self.source, self.path(key))

    def children(self, key: str, default: Any = _MISSING) -> list[Reader]:
        items = self.get(key, list, "a list of objects", default)
        return [Reader(item, self.source, f"{self.path(key)}[{i}]") for i, item in enumerate(items)]

    def schema(self, expected: str) -> None:
        found = self.data.get("schema")
        if found != expected:
            raise self.fail("schema", f"{expected} (this fleet reads only that version)", found)
