"""fleet.host.grant: the shard bound to the GPUs Slurm granted; standard library only (it ships)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.host import grant


def template() -> dict:
    return {"sweep_id": "s", "servers": [{"label": "tp2-a", "gpus": [0, 1], "env": {"X": "1"}}, {"label": "tp1-b", "gpus": [1]}]}


def test_bind_maps_relative_indexes_to_the_grant() -> None:
    bound = grant.bind(template(), [4, 6])
    assert [(s["gpus"], s["env"]["CUDA_VISIBLE_DEVICES"]) for s in bound["servers"]] == [([4, 6], "4,6"), ([6], "6")]
    assert bound["servers"][0]["env"]["X"] == "1"
    with pytest.raises(grant.GrantError, match=r"wants GPUs \[0, 1\] of an allocation of 1"):
        grant.bind(template(), [3])


def test_granted_gpus_from_the_environment() -> None:
    assert grant.granted_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    for bad in ({}, {"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, {"CUDA_VISIBLE_DEVICES": "GPU-ab"}):
        with pytest.raises(grant.GrantError):
            grant.granted_gpus(bad)


def test_main_rewrites_the_shard_at_every_start(tmp_path: Path) -> None:
    (tmp_path / grant.TEMPLATE).write_text(json.dumps(template()))
    for visible, expected in (("0,1", [0, 1]), ("5,7", [5, 7])):  # a requeued job may get other GPUs
        done = subprocess.run([sys.executable, grant.__file__, str(tmp_path)], env={"CUDA_VISIBLE_DEVICES": visible}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / grant.SHARD).read_text())["servers"][0]["gpus"] == expected
    missing = subprocess.run([sys.executable, grant.__file__, str(tmp_path / "none")], env={"CUDA_VISIBLE_DEVICES": "0"}, capture_output=True, text=True)
    assert missing.returncode == 2 and "shard.slurm.json" in missing.stderr


def test_grant_imports_the_standard_library_only() -> None:
    tree = ast.parse(Path(grant.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
