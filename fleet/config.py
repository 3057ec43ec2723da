"""Loading YAML files into pydantic models, with errors that name the file, the field and what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from fleet.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every file-backed model: unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, "", "a readable file", exc.strerror) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(path, where, "valid YAML", problem) from exc


def _field_name(loc: tuple[Any, ...]) -> str:
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "(top level)"


def _expectation(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "missing":
        return "this field (it is required)"
    if kind == "extra_forbidden":
        return "no such field (unknown key; check its spelling)"
    message: str = error["msg"]
    for prefix in ("Input should be ", "Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message


def validate_model(path: Path, data: Any, model: type[M], context: dict[str, Any] | None = None) -> M:
    """Validate parsed YAML against `model`; every problem of the file is reported in one ConfigError."""
    if data is None:
        raise ConfigError(path, "", f"a mapping describing a {model.__name__}", "an empty file")
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            got = None if error["type"] in ("missing", "extra_forbidden") else error.get("input")
            if isinstance(got, (dict, list)):
                got = None  # the whole sub-tree is noise; the field name says where
            problems.append((_field_name(error["loc"]), _expectation(error), got))
        field, expected, got = problems[0]
        more = tuple(
            f"{f}: expected {e}" + (f", got {g!r}" if g is not None else "") for f, e, g in problems[1:]
        )
        raise ConfigError(path, field, expected, got, more=more) from None


def load_model_file(path: Path, model: type[M], context: dict[str, Any] | None = None) -> M:
    return validate_model(path, read_yaml(path), model, context)
