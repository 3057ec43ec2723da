"""`fleet.host` is what ships to hosts that have nothing but Python: the bundle is that package
whole, its modules import the standard library and each other only, and the bundle alone (no
site-packages) runs the agent and imports every module."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from fleet.sweep.bundle import HOST_PACKAGE, bundle_files

# Python's own modules, plus `__future__`; everything else a host module names must be fleet.host.
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def _host_modules() -> list[Path]:
    return sorted(p for p in HOST_PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _imported_names(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports, TYPE_CHECKING blocks and function bodies included."""
    names: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}:{node.lineno}: relative import; host modules import by full name")
    return names


def test_host_modules_import_only_the_standard_library_and_each_other() -> None:
    offenders = [
        f"{path.relative_to(HOST_PACKAGE.parent.parent)}:{line}: imports {name}"
        for path in _host_modules()
        for line, name in _imported_names(path)
        if not (name == "fleet.host" or name.startswith("fleet.host.") or name.split(".")[0] in STDLIB)
    ]
    assert offenders == []


def test_the_bundle_is_the_host_package_whole() -> None:
    files = bundle_files()
    shipped = {name for name in files if name != "fleet/__init__.py"}
    expected = {f"fleet/host/{p.relative_to(HOST_PACKAGE).as_posix()}" for p in _host_modules()}
    expected |= {f"fleet/host/{p.relative_to(HOST_PACKAGE).as_posix()}" for p in HOST_PACKAGE.rglob("*.json")}
    assert shipped == expected
    assert files["fleet/__init__.py"] == b""  # the controller's package init never runs on a host


def _materialise(tmp_path: Path) -> Path:
    host_dir = tmp_path / "agent"
    for relative, content in bundle_files().items():
        (host_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        (host_dir / relative).write_bytes(content)
    return host_dir


# -S: no site-packages (no pydantic, typer, ...); -I: no user site, no PYTHON* variables.
BARE_PYTHON = [sys.executable, "-I", "-S"]


def test_every_shipped_module_imports_with_the_standard_library_only(tmp_path: Path) -> None:
    host_dir = _materialise(tmp_path)
    modules = [".".join(p.relative_to(host_dir).with_suffix("").parts).removesuffix(".__init__") for p in sorted((host_dir / "fleet" / "host").rglob("*.py")) if p.name != "__main__.py"]
    code = "import importlib, sys; sys.path.insert(0, '.')\nfor m in sys.argv[1:]: importlib.import_module(m)"
    result = subprocess.run([*BARE_PYTHON, "-c", code, *modules], cwd=host_dir, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(modules) > 30


def test_the_shipped_files_run_the_agent_with_the_standard_library_only(tmp_path: Path) -> None:
    host_dir = _materialise(tmp_path)
    code = (
        "import sys; sys.path.insert(0, '.'); import runpy; sys.argv = ['fleet.host.agent', 'service', 'status', 'nothing', "
        "'--manager', 'process', '--state-dir', 'state']; runpy.run_module('fleet.host.agent', run_name='__main__')"
    )
    result = subprocess.run([*BARE_PYTHON, "-c", code], cwd=host_dir, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"name": "nothing", "state": "absent", "pid": None, "exit_code": None}
