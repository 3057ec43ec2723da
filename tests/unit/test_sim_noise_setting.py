"""A sim host's noise is a host-file setting (`engine.sim_noise`), so an SSH sweep of sim hosts can
measure intervals that mean something without reaching into the hosts' environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.host.engines.sim.noise import NOISE_ENV
from fleet.inventory import load_host
from fleet.launch import SIM_NOISE_ENV
from fleet.plan import launch_on
from fleet.playbook import load_playbook, server_configs

DEMO = Path(__file__).resolve().parents[2] / "playbooks" / "demo.yaml"


def host_file(tmp_path: Path, **engine: object) -> Path:
    path = tmp_path / "ct200.yaml"
    path.write_text(yaml.safe_dump({"name": "ct200", "address": "10.0.0.2", "gpus": {"count": 2, "model": "NVIDIA H200"}, "engine": engine}))
    return path


@pytest.mark.parametrize("value", [True, "on"], ids=["yaml-on", "quoted-on"])  # YAML reads a bare `on` as true
def test_sim_noise_on_reaches_the_simulator(tmp_path: Path, value: object) -> None:
    host = load_host(host_file(tmp_path, kind="sim", sim_noise=value))
    launch = launch_on(host, server_configs(load_playbook(DEMO))[0], 30000)
    assert SIM_NOISE_ENV == NOISE_ENV and launch.env[NOISE_ENV] == "on"


def test_no_noise_unless_asked(tmp_path: Path) -> None:
    config = server_configs(load_playbook(DEMO))[0]
    assert NOISE_ENV not in launch_on(load_host(host_file(tmp_path, kind="sim")), config, 30000).env
    assert NOISE_ENV not in launch_on(load_host(host_file(tmp_path, kind="sglang", sim_noise=True)), config, 30000).env


def test_a_bad_noise_setting_names_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"engine\.sim_noise"):
        load_host(host_file(tmp_path, kind="sim", sim_noise="loud"))
