"""Memory feasibility of a launch before it runs: the seed's 8-vs-4 failure, from the exact argv."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.fixes.feasibility import apply_adjustments, check_config, check_server
from fleet.host.engines.base import Adjustment, LaunchSpec
from fleet.host.engines.sglang.release import DEFAULT_SIM_RELEASE
from fleet.host.engines.sim import server as sim_server
from fleet.launch import launch_spec
from fleet.playbook import Playbook, ServerConfig, server_configs

PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "qwen36-specdec.yaml"
RTX_PRO_6000_MIB = 97887  # nvidia-smi's memory.total on the seed host


def seed_playbook(**server: Any) -> dict[str, Any]:
    """The seed campaign's playbook at TP1 with the seed's launch: 8 requests, mamba extra_buffer, mamba ratio 0.5."""
    data = yaml.safe_load(PLAYBOOK.read_text())
    data["tp"] = [1]
    data["server"].update(
        max_running_requests=8,
        mamba_scheduler_strategy="extra_buffer",
        flags={"mamba-full-memory-ratio": 0.5},
    )
    data["server"].update(server)
    return data


def seed_config(variant: str = "dflash", **server: Any) -> ServerConfig:
    configs = server_configs(Playbook.model_validate(seed_playbook(**server)))
    return next(c for c in configs if c.variant == variant)


def sim_launch(config: ServerConfig, release: str | None = None) -> LaunchSpec:
    # Shipped card names as model paths: the sim resolves them like a staged model directory.
    return launch_spec(
        "sim",  # type: ignore[arg-type]
        config,
        python=sys.executable,
        model_path="qwen3.6-27b",
        draft_path="qwen3.6-27b-dflash" if config.draft else None,
        port=30001,
        engine_version=release,
    )


def sglang_launch(config: ServerConfig, version: str) -> LaunchSpec:
    return launch_spec(
        "sglang",  # type: ignore[arg-type]
        config,
        python="/opt/sglang/bin/python",
        model_path="/dev/shm/fleet/Qwen--Qwen3.6-27B",
        draft_path="/dev/shm/fleet/z-lab--Qwen3.6-27B-DFlash" if config.draft else None,
        port=30001,
        engine_version=version,
    )


def test_the_seed_launch_is_predicted_to_fail_with_sglangs_assertion() -> None:
    config = seed_config()
    result = check_server(config, sglang_launch(config, "0.5.12"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12")

    assert not result.ok
    assert result.failure is not None and result.failure.message == "max_running_request is zero"
    assert "max_running_request is zero" in result.reason
    assert result.plan is not None and result.plan.kv_tokens == 11893 and result.plan.max_mamba_cache_size == 2
    assert result.suggestion is not None
    assert [(a.field, a.old, a.new) for a in result.suggestion] == [("max_running_requests", 8, 4)]


def test_the_suggested_variant_is_feasible_and_has_its_own_id() -> None:
    config = seed_config()
    result = check_config(config, engine="sglang", gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12")
    assert result.suggestion
    fixed = apply_adjustments(config, result.suggestion)

    assert fixed.settings.max_running_requests == 4
    assert config.settings.max_running_requests == 8  # the original is not touched
    assert fixed.id != config.id
    assert fixed.id == apply_adjustments(config, result.suggestion).id  # stable
    after = check_server(fixed, sglang_launch(fixed, "0.5.12"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12")
    assert after.ok and after.failure is None and after.suggestion == []
    assert after.plan is not None and after.plan.max_running_requests == 4 and after.plan.max_mamba_cache_size == 24


@pytest.mark.parametrize("release", ["0.5.12", "0.5.23"])
@pytest.mark.parametrize("requests", [8, 4])
def test_inputs_from_the_argv_are_what_the_sim_sees(requests: int, release: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: the sim's default GPUs (8x RTX PRO 6000)
    config = seed_config(max_running_requests=requests)
    launch = sim_launch(config, release)
    assert launch.env["FLEET_SIM_SGLANG_VERSION"] == release

    predicted = check_server(config, launch, gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)
    started = sim_server.prepare(launch.argv[3:], launch.env, io.StringIO(), io.StringIO())

    assert isinstance(started, sim_server.SimServer)
    assert started.launch.release == release
    assert predicted.inputs == sim_server.memory_inputs(started.resolved, started.host, started.launch)
    assert predicted.plan == started.plan
    assert predicted.ok == (started.plan.failure is None)
    if release == "0.5.12":  # the seed story: 8 requests fail, 4 start
        assert predicted.ok == (requests == 4)


def test_a_sim_launch_follows_the_release_the_sim_plays() -> None:
    config = seed_config()
    default = check_server(config, sim_launch(config), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)
    seed = check_server(config, sim_launch(config, "0.5.12"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)

    assert default.inputs is not None and default.inputs.release == DEFAULT_SIM_RELEASE == "0.5.23"
    assert default.reason.startswith("sglang 0.5.23 ")
    assert seed.inputs is not None and seed.inputs.release == "0.5.12" and seed.reason.startswith("sglang 0.5.12 ")


def test_a_version_fleet_does_not_know_is_planned_with_the_nearest_known_release() -> None:
    config = seed_config()
    result = check_server(config, sglang_launch(config, "0.5.13"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.13")
    exact = check_server(config, sglang_launch(config, "0.5.12"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.12")

    assert result.inputs is not None and result.inputs.release == "0.5.12"
    assert (result.ok, result.plan, result.reason) == (exact.ok, exact.plan, exact.reason)


def test_renamed_flags_of_newer_sglang_are_read() -> None:
    config = seed_config()
    launch = sglang_launch(config, "0.5.23")
    assert "--mamba-radix-cache-strategy" in launch.argv  # the 0.5.14+ spelling

    result = check_server(config, launch, gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.23")

    assert result.inputs is not None and result.inputs.mamba_scheduler_strategy == "extra_buffer"
    assert result.inputs.mamba_full_memory_ratio == 0.5 and result.inputs.max_running_requests == 8


def test_without_a_model_card_nothing_is_checked() -> None:
    data = seed_playbook()
    del data["model"]["card"]
    config = next(c for c in server_configs(Playbook.model_validate(data)) if c.variant == "dflash")

    result = check_server(config, sim_launch(config), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)

    assert (result.ok, result.plan, result.failure, result.suggestion) == (True, None, None, None)
    assert result.reason == "no model card: not checked"


def test_a_dflash_draft_without_a_card_is_not_checked() -> None:
    data = seed_playbook()
    del data["drafts"]["dflash"]["card"]
    config = next(c for c in server_configs(Playbook.model_validate(data)) if c.variant == "dflash")

    result = check_server(config, sim_launch(config), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)
    assert result.ok and result.plan is None and "draft" in result.reason


def test_a_flag_the_release_does_not_know_is_its_parsers_refusal_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    config = seed_config(flags={"mamba-full-memory-ratio": 0.5, "enable-hierarchical-cachee": True})

    result = check_server(config, sim_launch(config), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)

    assert not result.ok and result.plan is None
    assert result.reason == "SGLang 0.5.23 refuses the command line: unrecognized arguments: --enable-hierarchical-cachee"
    assert capsys.readouterr().err == ""  # argparse's usage text does not leak onto the terminal


def test_fork_flags_are_read_only_where_the_engine_is_the_fork() -> None:
    config = seed_config("ddtree-b15", max_running_requests=4)
    upstream = check_server(config, sglang_launch(config, "0.5.23"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.23")
    fork = check_server(config, sglang_launch(config, "0.5.23"), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version="0.5.23", fork="ddtree")

    assert not upstream.ok and "unrecognized arguments: --speculative-ddtree-budget 15" in upstream.reason
    assert fork.plan is not None and fork.inputs is not None and fork.inputs.ddtree_budget == 15


def test_flags_sglang_refuses_are_infeasible_with_its_message() -> None:
    # Autoregressive: no DFLASH env, so a context above the model's 262144 is refused at ServerArgs.
    config = seed_config("autoregressive", context_length=300_000)

    result = check_server(config, sim_launch(config), gpu_memory_mib=RTX_PRO_6000_MIB, engine_version=None)

    assert not result.ok and result.plan is None
    assert "User-specified context_length (300000) is greater than the derived context_length (262144)" in result.reason


def test_weights_that_do_not_fit_a_small_gpu_are_a_predicted_oom() -> None:
    config = seed_config("autoregressive")
    result = check_server(config, sim_launch(config), gpu_memory_mib=48 * 1024, engine_version=None)

    assert not result.ok
    assert result.failure is not None and result.failure.failure_class == "cuda_oom"
    assert result.suggestion is None and "no single change" in result.reason


def test_adjustments_only_touch_server_settings() -> None:
    config = seed_config()
    with pytest.raises(ValueError, match="server settings"):
        apply_adjustments(config, [Adjustment("tp", 1, 2, "more GPUs")])
    assert apply_adjustments(config, []) is config
    several = apply_adjustments(
        config,
        [Adjustment("mem_fraction_static", 0.75, 0.8, "room"), Adjustment("context_length", 32768, 16384, "shorter")],
    )
    assert (several.settings.mem_fraction_static, several.settings.context_length) == (0.8, 16384)
    assert several.settings.flags == config.settings.flags and several.settings.env == config.settings.env
