"""A flag-table tool (tools/sglang_flag_table.py, tools/vllm_flag_table.py) run by its own `main`
inside a differential's child interpreter, the one that has the engine's wheel to import anyway:
what `python tools/<tool> ... --stdout` prints, without a second interpreter importing the wheel
again (5 s for sglang, 9 s for vllm on the project's 2-core machine). The child runs it before it
parses anything, so the tool sees the wheel as freshly imported as in a process of its own."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def tool_output(tool: str, argv: list[str]) -> dict[str, Any]:
    """{"code": main's exit code, "stdout": what it printed} of tools/`tool` run as `tool argv`;
    {"error": the traceback} where it raised (the table's test fails on it, not the whole child)."""
    path = ROOT / "tools" / tool
    name = "_flag_table_tool_" + path.stem
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = module.main(argv)
        return {"code": code, "stdout": printed.getvalue()}
    except BaseException:  # noqa: BLE001 - SystemExit from its argparse too: reported to the test
        return {"error": traceback.format_exc()}
