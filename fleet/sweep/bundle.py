"""The code a host needs, shipped by the controller: the agent (standard library only) and, for
hosts that run the `sim` engine, the simulator with its model cards.

Shipped as plain files under `<work_dir>/agent/`, importable with PYTHONPATH set there. Package
`__init__` files are written empty, so importing a shipped module never pulls in the controller's
own dependencies (pydantic, typer, ...) that the host does not have.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import fleet

ROOT = Path(fleet.__file__).resolve().parent

AGENT_MODULES = ("agent", "engines/sglang/logparse.py", "diagnose/catalogue.py", "diagnose/classify.py")
SIM_MODULES = ("engines/sim", "planning/memory.py", "planning/modelcard.py", "modelcards", "errors.py")


def bundle_files(with_sim: bool) -> dict[str, bytes]:
    """Relative path (under the bundle root, e.g. `fleet/agent/runner.py`) -> content."""
    files: dict[str, bytes] = {}
    for entry in AGENT_MODULES + (SIM_MODULES if with_sim else ()):
        source = ROOT / entry
        paths = sorted(source.rglob("*")) if source.is_dir() else [source]
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".json", ".txt"):
                files[f"fleet/{path.relative_to(ROOT).as_posix()}"] = path.read_bytes()
    packages = {str(Path(name).parent) for name in files}
    for package in list(packages):
        parts = Path(package).parts
        for depth in range(1, len(parts) + 1):
            init = Path(*parts[:depth]) / "__init__.py"
            files.setdefault(init.as_posix(), b"")
    # Modules shipped whole keep their own __init__; the others get an empty one (above).
    return dict(sorted(files.items()))


def bundle_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name, content in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:16]


def write_bundle(directory: Path, with_sim: bool) -> str:
    """Materialise the bundle in `directory` (replaced), for rsync; returns its digest."""
    files = bundle_files(with_sim)
    if directory.exists():
        shutil.rmtree(directory)
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    digest = bundle_digest(files)
    (directory / "BUNDLE").write_text(digest + "\n")
    return digest
