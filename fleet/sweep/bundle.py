"""The code a host needs, shipped by the controller: the `fleet.host` package, whole.

Shipped as plain files under `<work_dir>/agent/`, importable with PYTHONPATH set there. The
top-level `fleet/__init__.py` is written empty, so importing a shipped module never runs the
controller's package (whose dependencies -- pydantic, typer, ... -- the host does not have).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import fleet.host

HOST_PACKAGE = Path(fleet.host.__file__).resolve().parent
SHIPPED_SUFFIXES = (".py", ".json", ".txt")


def bundle_files() -> dict[str, bytes]:
    """Relative path (under the bundle root, e.g. `fleet/host/agent/runner.py`) -> content."""
    files: dict[str, bytes] = {"fleet/__init__.py": b""}
    for path in sorted(HOST_PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in SHIPPED_SUFFIXES:
            files[f"fleet/host/{path.relative_to(HOST_PACKAGE).as_posix()}"] = path.read_bytes()
    return dict(sorted(files.items()))


def bundle_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name, content in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:16]


def write_bundle(directory: Path) -> str:
    """Materialise the bundle in `directory` (replaced), for rsync; returns its digest."""
    files = bundle_files()
    if directory.exists():
        shutil.rmtree(directory)
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    digest = bundle_digest(files)
    (directory / "BUNDLE").write_text(digest + "\n")
    return digest
