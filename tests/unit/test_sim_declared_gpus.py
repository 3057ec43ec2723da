"""A sim host plays the GPUs its host file declares, whatever the machine has (issue 14 item 16):
`hosts/local.yaml` (2 RTX PRO 6000s) on a machine whose nvidia-smi -- here the test hosts' fake,
in the real formats, playing the real H200 capture's GPU -- reports an H200. The launch carries the
declaration, the simulator plays it, planning sizes for it; a machine of the declared model stays
the stage it is (the test hosts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.facts.models import Gpu, HostFacts
from fleet.host.engines.sim.gpu import GpuOverrides, detect_gpu_host
from fleet.host.nvidia_smi import DECLARED_GPU_ENV, KNOWN_GPUS, plays_declared
from fleet.inventory import load_inventory
from fleet.plan import hardware_of, launch_on
from fleet.playbook import expand_runs, load_playbook
from tests.testfleet.gpu_tools import local_gpu_env

REPO = Path(__file__).resolve().parents[2]
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
# The real capture's GPU (/work/shared/real-tool-output/h200-driver580-cuda13.0/nvidia-smi.txt).
H200 = {"name": "NVIDIA H200", "count": 1, "compute_cap": "9.0", "memory_total_mib": 143771, "driver": "580.159.04",
        "cuda_driver_version": "13.0", "toolkit": "13.0", "power_limit_w": 700}  # fmt: skip


@pytest.fixture
def h200_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = local_gpu_env(tmp_path / "gpu", {"PATH": "/usr/bin:/bin"}, H200)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("FLEET_FAKE_GPU_DIR", env["FLEET_FAKE_GPU_DIR"])
    return env


def local_host():
    return next(h for h in load_inventory(REPO / "hosts") if h.name == "local")


def test_the_sim_plays_the_declared_gpus_on_a_machine_of_others(h200_machine: dict[str, str]) -> None:
    declared = GpuOverrides(name=RTX, count=2, compute_cap="12.0", memory_mib=97887)
    played = detect_gpu_host(declared, {DECLARED_GPU_ENV: RTX, "CUDA_VISIBLE_DEVICES": "1"})
    assert played.played and [(g.index, g.name, g.memory_total_mib, g.compute_cap) for g in played.gpus] == [(1, RTX, 97887, (12, 0))]
    # Declared H200 on an H200 machine, or nothing declared: the machine's own, as nvidia-smi says.
    for env in ({DECLARED_GPU_ENV: "NVIDIA H200"}, {}):
        machine = detect_gpu_host(declared, env)
        assert not machine.played and [(g.name, g.memory_total_mib, g.compute_cap) for g in machine.gpus] == [("NVIDIA H200", 143771, (9, 0))]


def test_plays_declared_is_the_model_not_the_count() -> None:
    assert plays_declared(RTX, []) and plays_declared(RTX, ["NVIDIA H200"])
    assert not plays_declared(RTX, [RTX.upper()]) and not plays_declared(None, ["NVIDIA H200"])


def test_the_local_hosts_servers_carry_its_declaration_and_planning_sizes_for_it() -> None:
    host = local_host()
    assert (host.gpus.count, host.gpus.model) == (2, RTX)
    config = expand_runs(load_playbook(REPO / "playbooks" / "demo.yaml"))[0].server
    env = launch_on(host, config, 30000).env
    assert env[DECLARED_GPU_ENV] == RTX and env["FLEET_SIM_GPU_COUNT"] == "2"
    assert (int(env["FLEET_SIM_GPU_MEMORY_MIB"]), env["FLEET_SIM_GPU_COMPUTE_CAP"]) == KNOWN_GPUS[RTX]
    h200 = Gpu(index=0, name="NVIDIA H200", uuid="GPU-0", memory_total_mib=143771, compute_capability="9.0", driver_version="580.159.04")
    facts = HostFacts.model_construct(gpus=[h200])  # only its GPUs matter here
    assert hardware_of(host, facts).gpu_memory_mib == KNOWN_GPUS[RTX][0]  # what the sim will play, not the machine's
