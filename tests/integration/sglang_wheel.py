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
import pickle
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Optional

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


# The child imports sglang and torch and works through its grid: about 45 s of CPU on this
# project's 2-core machine, which the suite's loaded runs (a CPU hog at 4x the cores beside two
# test workers) stretch five- to tenfold. The bounds are hang guards, not speed checks.
CHILD_TIMEOUT_S = 1200
CHILD_TEST_TIMEOUT_S = CHILD_TIMEOUT_S + 300  # for the test whose setup runs the child (pytest-timeout)


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
        timeout=CHILD_TIMEOUT_S,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # the child imports this checkout's tests package
    )
    assert done.returncode == 0, f"the {what} child failed:\n{done.stderr[-6000:]}"
    return json.loads(done.stdout)


# A dense text-only model: what memory_settings assumes when the caller names no card.
TEXT_MODEL: dict[str, Any] = {"architecture": "LlamaForCausalLM", "is_multimodal": False, "linear_attention_layer_ids": []}
# configs/model_config.py, compiled from the wheel: the architecture tables and checks the CUDA-graph rules
# and the memory hook read (model_config.py:174-190 _hf_arch/_hf_attr, :230-252 uses_kda_attention,
# :395-400 is_deepseek_v4, :78 and :2391-2530 the multimodal table and is_multimodal_model, :2501-2516 and
# :2584-2589 the breakable-prefill-graph allowlist and its check).
_MODEL_CONFIG_NAMES = {
    "_hf_arch",
    "_hf_attr",
    "uses_kda_attention",
    "is_deepseek_v4",
    "MIMO_V2_MULTIMODAL_ARCHS",
    "multimodal_model_archs",
    "is_multimodal_model",
    "multimodal_breakable_cuda_graph_supported_model_archs",
    "is_multimodal_breakable_cuda_graph_supported",
}
_memory_hook_state: dict[str, Any] = {}
_parsed_records: dict[tuple[str, ...], bytes] = {}


def _parsed(prepare_server_args: Any, argv: list[str]) -> Any:
    """prepare_server_args(argv) as a record of the case's own: parsed once per argv, each call
    given a fresh copy through the record's pickling (ServerArgs.__reduce__: its fields through the
    constructor, its bookkeeping after, as the wheel hands a record to its child processes), for
    the hooks write on it. prepare_server_args builds its parser of every option at each call (about
    0.1 s) and does not resolve (ServerArgs.__post_init__ leaves that to resolve_once, which nothing
    here runs), so its record depends on the argv alone, while a grid repeats each argv once per GPU
    (test_sglang_memory_defaults: 1,728 cases, 216 argvs). The copies give every case of that grid
    and of test_memory_differential the settings a fresh parse gives (checked over both grids when
    this was written)."""
    key = tuple(argv)
    if key not in _parsed_records:
        _parsed_records[key] = pickle.dumps(prepare_server_args(argv))
    return pickle.loads(_parsed_records[key])


def _model_config(card: dict[str, Any], language_model_only: bool) -> types.SimpleNamespace:
    """The parts of ModelConfig (configs/model_config.py:566-1010, built through transformers) that the
    CUDA-graph rules and the memory hook read, derived from a model card's fields as transformers would
    load its config.json, with the wheel's own architecture checks:
    - hf_config.architectures; a multimodal card's config.json nests the language model's fields in
      text_config beside vision_config (hidden_size and, only where config.json has it, num_hidden_layers:
      Qwen3.5's vision config names its depth `depth`, so adjust_mem_fraction_for_vlm, memory_hook.py:433,
      falls back to 24); a hybrid model's layer_types and linear-attention head counts, which
      uses_kda_attention (model_config.py:230-252) reads, sit in that text config (or at the top level of
      a text-only config);
    - is_multimodal (model_config.py:806-827): enable_multimodal is True for the cards' architectures
      (model_config.py:690-717 turns it off for Gemma3/Llama4/Step3VL/Inkling and text-only MiMoV2 only),
      has_multimodal_subconfig is "hf_config is not hf_text_config" (a text_config, get_hf_text_config)
      without --model-impl transformers, and no DeepSeek-V4.1 vision: so is_multimodal_model(architectures)
      or a text_config, unless --language-model-only;
    - is_multimodal_breakable_cuda_graph_supported (model_config.py:1006-1008)."""
    rules = _memory_hook_state["model_config"]
    architectures = [card["architecture"]]
    hf_config = text_config = types.SimpleNamespace(architectures=architectures)
    if card["is_multimodal"]:
        text_config = types.SimpleNamespace(architectures=architectures)
        vision = {"hidden_size": card["vision_hidden_size"], "num_hidden_layers": card["vision_num_hidden_layers"]}
        hf_config.text_config = text_config
        hf_config.vision_config = types.SimpleNamespace(**{key: value for key, value in vision.items() if value is not None})
    if card["linear_attention_layer_ids"]:
        linear = set(card["linear_attention_layer_ids"])
        text_config.layer_types = ["linear_attention" if layer in linear else "full_attention" for layer in range(card["num_hidden_layers"])]
        for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim"):
            setattr(text_config, key, card[key])
    has_multimodal_subconfig = hf_config is not text_config
    return types.SimpleNamespace(
        hf_config=hf_config,
        is_multimodal=not language_model_only and (rules["is_multimodal_model"](architectures) or has_multimodal_subconfig),
        is_multimodal_breakable_cuda_graph_supported=rules["is_multimodal_breakable_cuda_graph_supported"](architectures),
    )


def memory_settings(argv: list[str], gpu_memory_mib: int, card: dict[str, Any] | None = None) -> dict[str, Any]:
    """0.5.23's memory settings for a launch of `card` (a model card's fields; a dense text model when
    None) on a GPU of `gpu_memory_mib`: the real cuda_graph_hook (apply_inkling_prefill_cuda_graph_default,
    apply_muse_glimmer_prefill_cuda_graph_max_bs_default, handle_cuda_graph_config with its compatibility
    rules) and memory_hook.handle_gpu_memory_settings, in the pipeline's order (arg_groups/pipeline.py:
    184-189, :199). Stood in for, as a GPU host gives them: the device (cuda) and utils.is_cuda
    (cuda_graph_config.py:119-123: prefill graphs default to breakable on CUDA),
    get_device_memory_capacity, the model config (`_model_config`: transformers builds the real one),
    use_mla_backend (neither card is MLA), and qwen3_vl's multimodal decode-graph expansion (a no-op
    unless the model type is qwen3_vl / qwen3_vl_moe, model_overrides/qwen3_vl.py:17, :53, :28-30; the
    cards are llama and qwen3_5). `sglang.srt.configs` and `sglang.srt.layers.cp` are registered as
    empty packages (their `__init__`s import transformers / CUDA-side modules) so that
    configs/model_config.py's checks (compiled) and layers/cp/bcg (imported as is) load.
    In a child interpreter only: it imports sglang."""
    import logging

    import sglang.srt.utils  # type: ignore[import-untyped]

    srt = Path(sglang.srt.utils.__file__).resolve().parents[1]
    if not _memory_hook_state:
        sglang.srt.utils.is_cuda = lambda: True
        qwen3_vl = types.ModuleType("sglang.srt.arg_groups.model_overrides.qwen3_vl")
        qwen3_vl.expand_multimodal_decode_graph_to_running_limit = lambda *args: None  # type: ignore[attr-defined]
        sys.modules[qwen3_vl.__name__] = qwen3_vl
        if "sglang.srt.configs" not in sys.modules:  # the memory differential may have registered it already
            empty_package("sglang.srt.configs", srt / "configs")
        empty_package("sglang.srt.layers.cp", srt / "layers" / "cp")
        _memory_hook_state["model_config"] = compile_from_wheel(srt, "configs/model_config.py", _MODEL_CONFIG_NAMES, {"List": list, "Optional": Optional}, as_module="sglang.srt.configs.model_config")
    from sglang.srt.arg_groups import cuda_graph_hook, memory_hook, overrides  # type: ignore[import-untyped]
    from sglang.srt.arg_groups.model_override_base import resolved_view  # type: ignore[import-untyped]
    from sglang.srt.server_args import prepare_server_args  # type: ignore[import-untyped]

    if "gpu" not in _memory_hook_state:
        memory_hook.get_device_memory_capacity = lambda device=None: _memory_hook_state["gpu"]
        memory_hook.model_config_of = cuda_graph_hook.model_config_of = lambda server_args: _memory_hook_state["model"]
        memory_hook.use_mla_backend = overrides.use_mla_backend = lambda server_args: False
    _memory_hook_state["gpu"] = gpu_memory_mib
    server_args = _parsed(prepare_server_args, argv)
    _memory_hook_state["model"] = _model_config(card or TEXT_MODEL, bool(server_args.language_model_only))
    logging.disable(logging.CRITICAL)  # prepare_server_args configures logging; the hooks' warnings are not results
    overrides.declare_resolution(server_args, "differential.platform", device="cuda")
    cuda_graph_hook.apply_inkling_prefill_cuda_graph_default(server_args)
    cuda_graph_hook.apply_muse_glimmer_prefill_cuda_graph_max_bs_default(server_args)
    cuda_graph_hook.handle_cuda_graph_config(server_args)
    memory_hook.handle_gpu_memory_settings(server_args)
    view = resolved_view(server_args)
    return {
        "mem_fraction_static": view.mem_fraction_static,
        "chunked_prefill_size": view.chunked_prefill_size,
        "cuda_graph_max_bs": view.cuda_graph_config.decode.max_bs,
        "prefill_cuda_graph": view.cuda_graph_config.prefill.backend != "disabled",
    }
