"""The files fleet ships in `hosts/`, apart from any a user added there (the README has users
create `hosts/ct200.yaml`; `.gitignore` keeps such files out of commits). Tests that want the
shipped inventory read a copy of only these, so the suite passes in a checkout that is in use."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shipped_host_files() -> list[Path]:
    """The same rule as .gitignore's: `local.yaml` and the `*.example.yaml` documentation."""
    hosts = REPO / "hosts"
    return sorted([hosts / "local.yaml", *hosts.glob("*.example.yaml")])


def shipped_hosts(directory: Path) -> Path:
    """`directory/hosts` holding a copy of only the shipped host files; returns it."""
    target = directory / "hosts"
    target.mkdir(parents=True, exist_ok=True)
    for path in shipped_host_files():
        shutil.copy2(path, target / path.name)
    return target
