"""One scanner for the import boundaries the tests hold (the engine seam, the simulator): every
import of a set of modules in a file, however it is spelt."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import fleet

FLEET_DIR = Path(fleet.__file__).resolve().parent
_DYNAMIC_IMPORTS = {"import_module", "__import__", "run_module", "find_spec"}


def imports_of(path: Path, named: Callable[[str], bool]) -> list[str]:
    """`line: what` for every import in `path` of a module `named` accepts: import statements
    (TYPE_CHECKING blocks and function bodies included), `from <package> import <module>`, and
    importlib / runpy calls with the module's name as a literal."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if named(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if named(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
            else:
                found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if named(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            literal = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if name in _DYNAMIC_IMPORTS and isinstance(literal, str) and named(literal):
                found.append(f"{node.lineno}: {name}({literal!r})")
    return found


def modules_outside(directory: Path) -> list[Path]:
    """Every module of the `fleet` package that is not under `directory`."""
    return sorted(p for p in FLEET_DIR.rglob("*.py") if "__pycache__" not in p.parts and directory not in p.parents)
