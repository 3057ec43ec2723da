"""Interpreters for tests of what fleet reads from an engine's Python."""

from __future__ import annotations

import sys
from pathlib import Path


def bare_python(directory: Path) -> str:
    """This interpreter without its site-packages: an engine Python with nothing installed, whatever
    this machine happens to have (CI installs CPU torch and sglang for the argument-parser test)."""
    bare = directory / "python-bare"
    if not bare.exists():
        bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
        bare.chmod(0o755)
    return str(bare)
