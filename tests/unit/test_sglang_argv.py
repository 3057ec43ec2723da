"""The SGLang launch argv: what fleet adds for hybrid models and DFLASH, what it refuses, how flags render."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.errors import EngineConfigError
from fleet.host.modelcard import load_model_card
from fleet.inventory import EngineKind
from fleet.launch import SIM_MODULE, launch_spec
from fleet.host.engines.base import LaunchSpec, render_flag
from fleet.host.engines.sglang.launch import ALLOW_LONGER_CONTEXT_ENV, SPEC_V2_ENV, build_launch, parse_sglang_version
from fleet.playbook import Playbook, ServerConfig, expand_runs, load_playbook, server_configs

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
QWEN36 = load_playbook(PLAYBOOKS / "qwen36-specdec.yaml")
QWEN36_CARD = load_model_card("qwen3.6-27b")


def playbook_data() -> dict[str, Any]:
    return yaml.safe_load((PLAYBOOKS / "demo.yaml").read_text())


def config(data: dict[str, Any], tp: int = 1, variant: str = "dflash") -> ServerConfig:
    playbook = Playbook.model_validate(data)
    return next(c for c in server_configs(playbook) if c.tp == tp and c.variant == variant)


def with_settings(variant: str = "dflash", **settings: Any) -> ServerConfig:
    data = playbook_data()
    data["server"].update(settings)
    return config(data, variant=variant)


def launch(server: ServerConfig, **kwargs: Any) -> LaunchSpec:
    kwargs.setdefault("hybrid", True)
    return build_launch(
        server,
        python="/opt/sglang/bin/python",
        model_path="/dev/shm/fleet/Qwen--Qwen3.6-27B",
        draft_path="/dev/shm/fleet/z-lab--Qwen3.6-27B-DFlash" if server.draft else None,
        port=30001,
        **kwargs,
    )


def flag_value(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, f"{flag} appears {argv.count(flag)} times in {argv}"
    return argv[argv.index(flag) + 1]


def test_autoregressive_argv_renders_every_setting_and_nothing_speculative() -> None:
    spec = launch(with_settings(variant="autoregressive"))
    assert spec.argv[:3] == ["/opt/sglang/bin/python", "-m", "sglang.launch_server"]
    assert flag_value(spec.argv, "--model-path") == "/dev/shm/fleet/Qwen--Qwen3.6-27B"
    assert flag_value(spec.argv, "--served-model-name") == "Qwen/Qwen3.6-27B"
    assert flag_value(spec.argv, "--host") == "127.0.0.1"
    assert flag_value(spec.argv, "--port") == "30001"
    assert flag_value(spec.argv, "--tp-size") == "1"
    assert flag_value(spec.argv, "--context-length") == "32768"
    assert flag_value(spec.argv, "--mem-fraction-static") == "0.75"
    assert flag_value(spec.argv, "--max-running-requests") == "4"
    assert flag_value(spec.argv, "--attention-backend") == "flashinfer"
    assert "--trust-remote-code" in spec.argv and "--enable-metrics" in spec.argv
    assert not [a for a in spec.argv if a.startswith("--speculative") or a == "--disable-radix-cache"]
    assert spec.env == {} and spec.notes == [] and spec.upstream


def test_hybrid_model_with_speculation_gets_disable_radix_cache_up_to_0513_and_says_why() -> None:
    spec = launch(with_settings(), sglang_version="0.5.12")
    assert "--disable-radix-cache" in spec.argv
    assert flag_value(spec.argv, "--speculative-algorithm") == "DFLASH"
    assert flag_value(spec.argv, "--speculative-draft-model-path") == "/dev/shm/fleet/z-lab--Qwen3.6-27B-DFlash"
    assert flag_value(spec.argv, "--speculative-num-draft-tokens") == "16"
    [note] = [n for n in spec.notes if n.startswith("--disable-radix-cache")]
    assert "hybrid" in note and "DFLASH" in note


def test_0523_keeps_the_radix_cache_for_hybrid_speculation_and_adds_nothing() -> None:
    # 0.5.23 resolves mamba auto to extra_buffer with overlap on: the radix cache stays, no spec-v2 switch.
    spec = launch(with_settings())
    assert "--disable-radix-cache" not in spec.argv
    assert "--mamba-radix-cache-strategy" not in spec.argv
    assert SPEC_V2_ENV not in spec.env and not any("radix" in n for n in spec.notes)
    explicit = launch(with_settings(mamba_scheduler_strategy="extra_buffer", disable_radix_cache=True), sglang_version="0.5.23")
    assert "--disable-radix-cache" in explicit.argv  # 0.5.23 ignores the strategy without a radix cache
    with pytest.raises(EngineConfigError, match="mamba_track_interval >="):
        launch(with_settings(flags={"mamba-track-interval": 8}))


def test_hybrid_is_taken_from_the_model_card_when_not_given() -> None:
    dflash = with_settings()
    assert "--disable-radix-cache" in launch(dflash, hybrid=None, card=QWEN36_CARD, sglang_version="0.5.12").argv
    assert "--disable-radix-cache" not in launch(dflash, hybrid=None, card=load_model_card("qwen3.6-27b-dflash"), sglang_version="0.5.12").argv
    # The engine seam loads the card the playbook names.
    seam = launch_spec(EngineKind.sglang, dflash, python="python3", model_path="/m", draft_path="/d", port=30001, engine_version="0.5.12")
    assert "--disable-radix-cache" in seam.argv


def test_unknown_hybridness_leaves_the_radix_cache_alone_but_says_so() -> None:
    spec = launch(with_settings(), hybrid=None)
    assert "--disable-radix-cache" not in spec.argv
    assert any(n.startswith("radix cache left on") for n in spec.notes)


def test_dense_model_with_speculation_keeps_the_radix_cache() -> None:
    spec = launch(with_settings(), hybrid=False)
    assert "--disable-radix-cache" not in spec.argv
    assert not any("radix" in n for n in spec.notes)


def test_dflash_and_ddtree_get_the_longer_context_env_var_and_autoregressive_does_not() -> None:
    for variant in ("dflash", "ddtree-b15"):
        spec = launch(with_settings(variant=variant))
        assert spec.env[ALLOW_LONGER_CONTEXT_ENV] == "1"
        assert any(n.startswith(f"{ALLOW_LONGER_CONTEXT_ENV}=1") for n in spec.notes)
    assert ALLOW_LONGER_CONTEXT_ENV not in launch(with_settings(variant="autoregressive")).env


def test_ddtree_uses_the_fork_flag_and_is_not_upstream() -> None:
    spec = launch(with_settings(variant="ddtree-b15"))
    assert flag_value(spec.argv, "--speculative-algorithm") == "DDTREE"
    assert flag_value(spec.argv, "--speculative-ddtree-budget") == "15"
    assert not spec.upstream
    data = playbook_data()
    data["methods"]["dflash"]["flags"] = {"speculative-dflash-enable-ddtree": True}
    assert not launch(config(data)).upstream


def test_playbook_radix_choice_wins_over_fleets_addition() -> None:
    kept = launch(with_settings(disable_radix_cache=False), sglang_version="0.5.13")
    assert "--disable-radix-cache" not in kept.argv
    assert flag_value(kept.argv, "--mamba-scheduler-strategy") == "extra_buffer"
    assert kept.env[SPEC_V2_ENV] == "1"
    assert any("extra_buffer" in n for n in kept.notes)

    extra_buffer = launch(with_settings(mamba_scheduler_strategy="extra_buffer"), sglang_version="0.5.12")
    assert "--disable-radix-cache" not in extra_buffer.argv
    assert flag_value(extra_buffer.argv, "--mamba-scheduler-strategy") == "extra_buffer"
    assert extra_buffer.env[SPEC_V2_ENV] == "1"
    on_0523 = launch(with_settings(mamba_scheduler_strategy="extra_buffer"))
    assert flag_value(on_0523.argv, "--mamba-radix-cache-strategy") == "extra_buffer" and SPEC_V2_ENV not in on_0523.env

    disabled = launch(with_settings(disable_radix_cache=True))
    assert "--disable-radix-cache" in disabled.argv
    assert not any("radix" in n for n in disabled.notes)


def test_playbook_env_wins_over_fleets_env_and_the_override_is_noted() -> None:
    spec = launch(with_settings(env={ALLOW_LONGER_CONTEXT_ENV: "0", "NCCL_DEBUG": "WARN"}))
    assert spec.env == {ALLOW_LONGER_CONTEXT_ENV: "0", "NCCL_DEBUG": "WARN"}
    assert any(n.startswith(f"{ALLOW_LONGER_CONTEXT_ENV}=0 kept from the playbook") for n in spec.notes)
    data = playbook_data()
    data["methods"]["dflash"]["env"] = {"NCCL_DEBUG": "INFO"}
    data["server"]["env"] = {"NCCL_DEBUG": "WARN"}
    assert launch(config(data)).env["NCCL_DEBUG"] == "INFO"


@pytest.mark.parametrize(
    ("settings", "variant", "words"),
    [
        ({"disable_radix_cache": False, "mamba_scheduler_strategy": "no_buffer"}, "dflash", "SGLang refuses this"),
        ({"mamba_scheduler_strategy": "extra_buffer_lazy"}, "dflash", "extra_buffer_lazy is not supported"),
        ({"disable_radix_cache": True, "mamba_scheduler_strategy": "extra_buffer"}, "autoregressive", "drop one"),
        ({"mamba_scheduler_strategy": "extra_buffer", "flags": {"mamba-track-interval": 8}}, "dflash", "mamba_track_interval >="),
        ({"mamba_scheduler_strategy": "lazy"}, "autoregressive", "expected one of auto, no_buffer"),
        ({"flags": {"context-length": 8192}}, "autoregressive", "flags context-length: fleet renders"),
        ({"flags": {"tensor-parallel-size": 2}}, "autoregressive", "flags tensor-parallel-size"),
        ({"flags": {"mamba-scheduler-strategy": "no_buffer"}}, "autoregressive", "flags mamba-scheduler-strategy"),
        # A key with the leading -- never gets this far: the playbook model refuses it (tests/unit/test_bad_input.py).
    ],
)
def test_contradictory_explicit_settings_are_errors_that_name_the_server(settings: dict[str, Any], variant: str, words: str) -> None:
    with pytest.raises(EngineConfigError) as caught:
        launch(with_settings(variant=variant, **settings), sglang_version="0.5.12")
    assert words in str(caught.value)
    assert f"tp1-{variant}" in str(caught.value)


def test_method_fields_without_an_algorithm_or_a_missing_draft_path_are_errors() -> None:
    data = playbook_data()
    data["methods"]["autoregressive"] = {"num_draft_tokens": 4}
    with pytest.raises(EngineConfigError, match="num_draft_tokens without an `algorithm`"):
        launch(config(data, variant="autoregressive"))
    with pytest.raises(EngineConfigError, match="no draft path"):
        build_launch(with_settings(), python="python3", model_path="/m", draft_path=None, port=1, hybrid=True)
    with pytest.raises(EngineConfigError, match="has no `draft`"):
        build_launch(with_settings(variant="autoregressive"), python="python3", model_path="/m", draft_path="/d", port=1)


def test_flag_values_render_by_type() -> None:
    assert render_flag("--enable-mixed-chunk", True) == ["--enable-mixed-chunk"]
    assert render_flag("--disable-cuda-graph", False) == []
    assert render_flag("--watchdog-timeout", None) == []
    assert render_flag("--cuda-graph-bs", [1, 2, 4]) == ["--cuda-graph-bs", "1", "2", "4"]
    assert render_flag("--cuda-graph-bs", []) == []
    assert render_flag("--schedule-conservativeness", 0.3) == ["--schedule-conservativeness", "0.3"]
    assert render_flag("--decode-log-interval", 40) == ["--decode-log-interval", "40"]

    flags = {"log-level": "debug", "enable-mixed-chunk": True, "disable-cuda-graph": False, "cuda-graph-bs": [1, 2, 4], "watchdog-timeout": None}
    spec = launch(with_settings(variant="autoregressive", flags=flags))
    # Extra flags come last, sorted by name, whatever their order in the playbook.
    assert spec.argv[-7:] == ["--cuda-graph-bs", "1", "2", "4", "--enable-mixed-chunk", "--log-level", "debug"]
    assert "--disable-cuda-graph" not in spec.argv and "--watchdog-timeout" not in spec.argv


def test_renamed_flags_follow_the_hosts_sglang_version() -> None:
    server = with_settings(variant="autoregressive", mamba_scheduler_strategy="no_buffer", cuda_graph_max_bs=8)
    new = launch(server)
    assert flag_value(new.argv, "--mamba-radix-cache-strategy") == "no_buffer"
    assert flag_value(new.argv, "--cuda-graph-max-bs-decode") == "8"
    old = launch(server, sglang_version="0.5.13")
    assert flag_value(old.argv, "--mamba-scheduler-strategy") == "no_buffer"
    assert flag_value(old.argv, "--cuda-graph-max-bs") == "8"
    assert parse_sglang_version("v0.5.14.post2") == (0, 5, 14)
    with pytest.raises(EngineConfigError, match="expected a release number"):
        launch(server, sglang_version="main")
    with pytest.raises(EngineConfigError, match="DFLASH needs SGLang >= 0.5.11"):
        launch(with_settings(), sglang_version="0.5.10")


def test_the_sim_launch_differs_from_sglang_only_in_the_module() -> None:
    for playbook in (QWEN36, load_playbook(PLAYBOOKS / "demo.yaml")):
        for server in server_configs(playbook):
            common = dict(python="python3", model_path="/m", draft_path="/d" if server.draft else None, port=30007)
            for release in ("0.5.12", "0.5.23"):
                real = launch_spec(EngineKind.sglang, server, **common, engine_version=release)
                sim = launch_spec(EngineKind.sim, server, **common, engine_version=release, fork="ddtree")
                assert real.argv[:3] == ["python3", "-m", "sglang.launch_server"]
                assert sim.argv[:3] == ["python3", "-m", SIM_MODULE]
                assert (sim.argv[3:], sim.notes, sim.upstream) == (real.argv[3:], real.notes, real.upstream)
                # ... and the environment tells the simulator which release (and fork) to play.
                assert sim.env == {**real.env, "FLEET_SIM_SGLANG_VERSION": release, "FLEET_SIM_SGLANG_FORK": "ddtree"}
    strategy = with_settings(variant="autoregressive", mamba_scheduler_strategy="no_buffer")
    sim = launch_spec(EngineKind.sim, strategy, python="python3", model_path="/m", draft_path=None, port=1)
    assert flag_value(sim.argv, "--mamba-radix-cache-strategy") == "no_buffer"  # a sim host plays 0.5.23 by default
    assert sim.env["FLEET_SIM_SGLANG_VERSION"] == "0.5.23" and sim.env["FLEET_SIM_SGLANG_FORK"] == "upstream"


def test_every_qwen36_run_has_a_deterministic_argv_independent_of_key_order() -> None:
    data = yaml.safe_load((PLAYBOOKS / "qwen36-specdec.yaml").read_text())
    data["server"]["flags"] = {"log-level": "info", "enable-mixed-chunk": True}
    shuffled = copy.deepcopy(data)
    shuffled["server"] = dict(reversed(list(shuffled["server"].items())))
    shuffled["server"]["flags"] = dict(reversed(list(shuffled["server"]["flags"].items())))

    def argvs(playbook_dict: dict[str, Any]) -> dict[str, tuple[list[str], dict[str, str]]]:
        out = {}
        for run in expand_runs(Playbook.model_validate(playbook_dict)):
            spec = launch_spec(
                EngineKind.sglang,
                run.server,
                python="python3",
                model_path="/m",
                draft_path="/d" if run.server.draft else None,
                port=30001,
            )
            out[run.id] = (spec.argv, spec.env)
        return out

    first = argvs(data)
    assert len(first) == 3 * (1 + 1 + 6) * 4
    assert argvs(data) == first
    assert argvs(shuffled) == first
    tps = {flag_value(argv, "--tp-size") for argv, _ in first.values()}
    assert tps == {"1", "4", "8"}
