"""The agent ships to hosts that have nothing but Python: it must import with site-packages off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_agent_imports_with_the_standard_library_only() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); "
        "import fleet.agent.__main__, fleet.agent.runner; "
        "third_party = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'typer', 'yaml', 'jinja2', 'rich', 'fabric', 'paramiko'));"
        "assert not third_party, third_party"
    )
    # -S: no site-packages; -I: no user site, no PYTHON* variables.
    result = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
