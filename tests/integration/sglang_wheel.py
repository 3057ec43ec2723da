"""Running parts of the installed SGLang wheel on a CPU-only machine, for the differentials against it
(tests/integration/test_memory_differential.py, test_sglang_spec_resolution.py).

Many of the wheel's modules cannot be imported here (`sglang.srt.configs/__init__.py` imports every HF
config class through transformers; CUDA-side packages such as tvm_ffi are missing), while the functions
the differentials need are plain Python. `compile_from_wheel` runs such functions from the wheel's own
source text, with their file names and line numbers, so a traceback points into the wheel.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "0.5.23"  # the release the differentials run, as CI installs it
INSTALL = f"pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang=={RELEASE}"


def compile_from_wheel(srt: Path, relpath: str, names: set[str], given: dict[str, Any], *, as_module: str | None = None, members: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """Run the top-level definitions `names` of srt/`relpath` (for a class in `members`, only those
    methods, on a base-less class) in a module whose globals start as `given`, keeping the wheel's
    file and line numbers. The module is registered as `as_module` (an sglang name whose real
    import fails here) or under a private name (dataclasses look their module up)."""
    path = srt / relpath
    tree = ast.parse(path.read_text(), filename=str(path))
    picked, found = [], set()
    for node in tree.body:
        name = getattr(node, "name", None)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name not in names:
            continue
        found.add(name)
        if members and name in members and isinstance(node, ast.ClassDef):
            node.body = [item for item in node.body if getattr(item, "name", None) in members[name]]
            missing_members = members[name] - {getattr(item, "name", None) for item in node.body}
            assert not missing_members, f"{relpath}: {name} has no {sorted(missing_members)}"
            node.bases, node.keywords = [], []
        picked.append(node)
    assert found == names, f"{relpath}: not found in the wheel: {sorted(names - found)}"
    mod = types.ModuleType(as_module or "_wheel." + relpath.removesuffix(".py").replace("/", "."))
    mod.__dict__.update(given)
    mod.__file__ = str(path)
    sys.modules[mod.__name__] = mod
    exec(compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec"), mod.__dict__)
    return mod.__dict__


def empty_package(name: str, directory: Path) -> None:
    """Register package `name` without running its `__init__.py`, so that its plain submodules load as
    they are (`sglang.srt.configs`, whose `__init__` imports transformers)."""
    package = types.ModuleType(name)
    package.__path__ = [str(directory)]
    sys.modules[name] = package


def run_child(script: str, request: object, what: str) -> Any:
    """Run a differential's own file as a child interpreter on `request` (JSON in, JSON out), as
    `python -m sglang.launch_server` would run: importing sglang loads torch and sets environment
    variables, which must not leak into the test session. Skips where the wheel is not installed."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip(f"sglang is not installed; CI installs it with: {INSTALL}")
    done = subprocess.run(
        [sys.executable, "-W", "ignore", script],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # the child imports this checkout's tests package
    )
    assert done.returncode == 0, f"the {what} child failed:\n{done.stderr[-6000:]}"
    return json.loads(done.stdout)


_memory_hook_gpu: dict[str, int] = {}


def memory_settings(argv: list[str], gpu_memory_mib: int) -> dict[str, Any]:
    """0.5.23's memory settings for a dense text model's launch on a GPU of `gpu_memory_mib`: the real
    cuda_graph_hook.parse_cuda_graph_config and memory_hook.handle_gpu_memory_settings, in the
    pipeline's order (arg_groups/pipeline.py:172, :199). Stood in for, as a GPU host gives them: the
    device (cuda) and utils.is_cuda (cuda_graph_config.py:119-123: prefill graphs default to breakable
    on CUDA), get_device_memory_capacity, a text-only non-MLA model config, and qwen3_vl's multimodal
    graph expansion (a no-op for a text model). In a child interpreter only: it imports sglang."""
    import logging

    import sglang.srt.utils  # type: ignore[import-untyped]

    if not _memory_hook_gpu:
        sglang.srt.utils.is_cuda = lambda: True
        qwen3_vl = types.ModuleType("sglang.srt.arg_groups.model_overrides.qwen3_vl")
        qwen3_vl.expand_multimodal_decode_graph_to_running_limit = lambda *args: None  # type: ignore[attr-defined]
        sys.modules[qwen3_vl.__name__] = qwen3_vl
    from sglang.srt.arg_groups import cuda_graph_hook, memory_hook, overrides  # type: ignore[import-untyped]
    from sglang.srt.arg_groups.model_override_base import resolved_view  # type: ignore[import-untyped]
    from sglang.srt.server_args import prepare_server_args  # type: ignore[import-untyped]

    if not _memory_hook_gpu:
        text_model = types.SimpleNamespace(is_multimodal=False)
        memory_hook.get_device_memory_capacity = lambda device=None: _memory_hook_gpu["mib"]
        memory_hook.model_config_of = lambda server_args: text_model
        memory_hook.use_mla_backend = overrides.use_mla_backend = lambda server_args: False
    _memory_hook_gpu["mib"] = gpu_memory_mib
    server_args = prepare_server_args(argv)
    logging.disable(logging.CRITICAL)  # prepare_server_args configures logging; the hooks' warnings are not results
    overrides.declare_resolution(server_args, "differential.platform", device="cuda")
    cuda_graph_hook.parse_cuda_graph_config(server_args)
    memory_hook.handle_gpu_memory_settings(server_args)
    view = resolved_view(server_args)
    return {"mem_fraction_static": view.mem_fraction_static, "chunked_prefill_size": view.chunked_prefill_size, "cuda_graph_max_bs": view.cuda_graph_config.decode.max_bs}
