"""The fake `nvidia-smi` and `nvcc`, installed into a directory: for the test hosts and for tests
that run the sim engine or the agent on this machine without SSH."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.testfleet import fake_gpu


def install_gpu_tools(bin_dir: Path, lib_dir: Path) -> None:
    """`bin_dir/nvidia-smi` and `bin_dir/nvcc`: tiny launchers of a private copy of fake_gpu.py in
    `lib_dir` (a test editing the repo does not change running hosts; the bytecode is cached)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    lib_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fake_gpu.__file__, lib_dir / "fake_gpu.py")
    launcher = f"#!{sys.executable} -IS\nimport sys\nsys.path.insert(0, {str(lib_dir)!r})\nfrom fake_gpu import main\nsys.exit(main())\n"
    for tool in ("nvidia-smi", "nvcc"):
        (bin_dir / tool).write_text(launcher)
        (bin_dir / tool).chmod(0o755)


def local_gpu_env(base: Path, env: Mapping[str, str], profile: Mapping[str, object] | None = None) -> dict[str, str]:
    """`env` with the fake tools first on PATH and FLEET_FAKE_GPU_DIR holding `profile` (default:
    8x RTX PRO 6000 Blackwell). Variables of earlier fleet/SGLang runs are dropped."""
    bin_dir, state = base / "bin", base / "gpu"
    install_gpu_tools(bin_dir, base / "lib")
    (state / "procs").mkdir(parents=True, exist_ok=True)
    (state / "profile.json").write_text(json.dumps({**fake_gpu.DEFAULT_PROFILE, **(profile or {})}))
    clean = {k: v for k, v in env.items() if not k.startswith(("FLEET_", "SGLANG_", "CUDA_VISIBLE"))}
    return {**clean, "PATH": f"{bin_dir}:{clean.get('PATH', '/usr/bin:/bin')}", "FLEET_FAKE_GPU_DIR": str(state)}
