"""The installed vLLM wheel's own texts, for tests that hold fleet's copies of them to it: the string
literal at a file and line (`from_wheel`) and the logger's format (`wheel_format`). Tests that use
it skip where vLLM is not installed (`pip install --no-deps vllm==0.33.0`)."""

from __future__ import annotations

import ast
import importlib.util
import re
import string
from functools import cache
from pathlib import Path

import pytest

_SPEC = importlib.util.find_spec("vllm")
WHEEL = Path(next(iter(_SPEC.submodule_search_locations))) if _SPEC and _SPEC.submodule_search_locations else None
needs_wheel = pytest.mark.skipif(WHEEL is None, reason="vLLM is not installed (pip install --no-deps vllm==0.33.0)")
_HOLE = "\x00"  # where a source literal has a formatted value


@cache
def _literals(relative: str) -> list[tuple[int, int, str]]:
    """The wheel file's string literals (adjacent ones are one node after parsing), each with its
    first and last line and its text with every formatted value as a hole."""
    assert WHEEL is not None
    tree = ast.parse((WHEEL / relative).read_text(encoding="utf-8"))
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else _HOLE for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = re.sub(r"%[-\d.,]*[sdfr]", _HOLE, node.value)  # a logger call's %-format
        else:
            continue
        found.append((node.lineno, node.end_lineno or node.lineno, text))
    return found


def from_wheel(where: str, template: str, *values: object) -> str:
    """`template` ("{}" for each value) filled with `values`, after checking that it is the literal at
    `where` ("v1/core/kv_cache_planning.py:76"): the literal spanning that line contains every fixed
    part of the template, in order."""
    relative, line = where.rsplit(":", 1)
    parts = [literal for literal, *_ in string.Formatter().parse(template)]
    pattern = ".*?".join(re.escape(part) for part in parts if part)
    spanning = [text for first, last, text in _literals(relative) if first <= int(line) <= last]
    assert any(re.search(pattern, text, re.DOTALL) for text in spanning), f"{where}: no literal there reads {template!r}; spanning: {spanning!r}"
    return template.format(*values)


@cache
def wheel_format() -> tuple[str, str]:
    """vllm/logger.py's `_FORMAT` (its VLLM_LOGGING_PREFIX part left empty, the default) and `_DATE_FORMAT`."""
    assert WHEEL is not None
    tree = ast.parse((WHEEL / "logger.py").read_text(encoding="utf-8"))
    values: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in ("_FORMAT", "_DATE_FORMAT"):
            value = node.value
            if isinstance(value, ast.JoinedStr):
                values[node.targets[0].id] = "".join(part.value for part in value.values if isinstance(part, ast.Constant) and isinstance(part.value, str))
            elif isinstance(value, ast.Constant) and isinstance(value.value, str):
                values[node.targets[0].id] = value.value
    assert "%(vllm_process_name)s" in values["_FORMAT"] and "[%(fileinfo)s:%(lineno)d]" in values["_FORMAT"], values
    return values["_FORMAT"], values["_DATE_FORMAT"]
