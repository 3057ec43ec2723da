"""fleet's host-side agent: runs a sweep's shard on one host, detached from SSH. Standard library
only, so that a host needs nothing but Python >= 3.10 and the engine.

Entry point: `python -m fleet.agent` (see __main__.py). The controller writes `shipped_files()`
under `<work_dir>/agent/` and runs the agent with PYTHONPATH pointing there.
"""

from __future__ import annotations

from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]
_SHIPPED_MODULES = ("fleet/engines/sglang/logparse.py",)
# Packages on the way to the shipped modules get a bare marker, not their real __init__: those
# import controller-side code (pydantic models, planners) that a host neither has nor needs.
_PACKAGE_MARKERS = ("fleet/__init__.py", "fleet/engines/__init__.py", "fleet/engines/sglang/__init__.py")
_MARKER_TEXT = '"""Shipped by fleet with its host agent: only what the agent imports."""\n'


def shipped_files() -> dict[str, str]:
    """Every file the agent needs on a host: {path relative to the agent directory: text}."""
    files = {
        str(path.relative_to(_REPO_ROOT)): path.read_text()
        for path in sorted(Path(__file__).resolve().parent.glob("*.py"))
    }
    files.update({module: (_REPO_ROOT / module).read_text() for module in _SHIPPED_MODULES})
    files.update({marker: _MARKER_TEXT for marker in _PACKAGE_MARKERS})
    return files
