"""The agent ships to hosts that have nothing but Python: the controller's bundle alone, with the
standard library only (site-packages off), must run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fleet.sweep.bundle import bundle_files



def test_the_shipped_files_run_the_agent_with_the_standard_library_only(tmp_path: Path) -> None:
    host_dir = tmp_path / "agent"
    files = bundle_files(with_sim=False)  # what the controller ships to a host
    assert "fleet/agent/runner.py" in files and "fleet/engines/sglang/logparse.py" in files
    for relative, content in files.items():
        (host_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        (host_dir / relative).write_bytes(content)
    # -S: no site-packages (no pydantic, typer, ...); -I: no user site, no PYTHON* variables.
    python = [sys.executable, "-I", "-S"]
    code = (
        "import sys; sys.path.insert(0, '.'); import runpy; sys.argv = ['fleet.agent', 'service', 'status', 'nothing', "
        "'--manager', 'process', '--state-dir', 'state']; runpy.run_module('fleet.agent', run_name='__main__')"
    )
    result = subprocess.run([*python, "-c", code], cwd=host_dir, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"name": "nothing", "state": "absent", "pid": None, "exit_code": None}
    imports = "import sys; sys.path.insert(0, '.'); import fleet.agent.runner, fleet.agent.__main__"
    assert subprocess.run([*python, "-c", imports], cwd=host_dir, capture_output=True, text=True, timeout=60).returncode == 0
