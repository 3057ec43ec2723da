"""A misspelt speculative algorithm is refused at plan time, exit 2, naming the ones it knows (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.plan import check_engine_flags, make_plan
from fleet.playbook import load_playbook
from tests.unit.fake_hosts import make_host

ROOT = Path(__file__).resolve().parents[2]


def misspelt(tmp_path: Path, algorithm: str = "DFLAHS") -> Path:
    data = yaml.safe_load((ROOT / "playbooks" / "demo.yaml").read_text())
    data["methods"]["dflash"]["algorithm"] = algorithm
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_plan_refuses_an_unknown_algorithm_naming_the_known_ones(tmp_path: Path) -> None:
    book = load_playbook(misspelt(tmp_path))
    with pytest.raises(ConfigError) as caught:
        make_plan(book, [make_host("ct200")])
    text = str(caught.value)
    assert "methods.dflash.algorithm" in text and "DFLAHS" in text and "DFLASH" in text and "EAGLE3" in text


def test_a_misspelling_is_refused_for_an_upstream_host_too() -> None:
    host = make_host("ct200", kind="sglang")  # a real host's engine: upstream SGLang
    with pytest.raises(ConfigError, match="EAGLE3"):
        check_engine_flags(load_playbook(ROOT / "playbooks" / "demo.yaml").model_copy(update={"methods": {
            **load_playbook(ROOT / "playbooks" / "demo.yaml").methods,
            "typo": load_playbook(ROOT / "playbooks" / "demo.yaml").methods["dflash"].model_copy(update={"algorithm": "EAGEL3"}),
        }}), [host])  # fmt: skip
    check_engine_flags(load_playbook(ROOT / "playbooks" / "demo.yaml"), [host])  # DFLASH and DDTREE: known names


def test_fleet_plan_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "FLEET_RESULTS_DIR": str(tmp_path / "results"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "fleet", "plan", "-p", str(misspelt(tmp_path)), "--hosts", "local"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "DFLAHS" in done.stderr and "methods.dflash.algorithm" in done.stderr
