"""ServerArgs post-processing as SGLang 0.5.13 does it: defaults, hooks, and the refusals."""

from __future__ import annotations

import pytest

from fleet.host.engines.sim.cli import parse_command_line, render_server_args
from fleet.host.engines.sim.serverargs import resolve_server_args
from fleet.host.modelcard import load_model_card

TARGET = load_model_card("qwen3.6-27b")
DRAFT = load_model_card("qwen3.6-27b-dflash")


def resolve(*flags: str, env: dict | None = None):
    raw, _ = parse_command_line(["--model-path", "qwen3.6-27b", *flags], {})
    return resolve_server_args(raw, TARGET, DRAFT, env or {}, sim_seed=0)


def test_plain_hybrid_model_disables_overlap_with_sglang_warning() -> None:
    resolved = resolve()
    assert resolved.failure is None
    assert resolved.values["mamba_scheduler_strategy"] == "no_buffer"
    assert resolved.values["disable_overlap_schedule"] is True
    assert [w.message for w in resolved.warnings] == [
        "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
        "try to use --disable-radix-cache if overlap schedule is necessary"
    ]
    assert resolved.values["served_model_name"] == "qwen3.6-27b"


def test_dflash_defaults_block_size_from_draft_and_48_requests() -> None:
    resolved = resolve("--speculative-algorithm", "dflash", "--speculative-draft-model-path", "qwen3.6-27b-dflash",
                       "--disable-radix-cache")
    assert resolved.failure is None
    assert resolved.algorithm == "DFLASH"
    assert resolved.values["speculative_num_draft_tokens"] == 16
    assert resolved.values["max_running_requests"] == 48
    assert (resolved.values["speculative_num_steps"], resolved.values["speculative_eagle_topk"]) == (1, 1)
    messages = [w.message for w in resolved.warnings]
    assert "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests." in messages
    assert "Overlap scheduler is disabled when using DFLASH speculative decoding (spec v2 is not supported yet)." in messages


def test_hybrid_spec_radix_no_buffer_is_refused_with_sglang_text() -> None:
    resolved = resolve("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "qwen3.6-27b-dflash")
    assert resolved.failure.exception == "ValueError"
    assert resolved.failure.message == (
        "Speculative decoding for Qwen3_5ForConditionalGeneration is not compatible with radix cache when using "
        "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
        "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--speculative-algorithm", "DFLASH"), "DFLASH speculative decoding requires setting --speculative-draft-model-path."),
        (("--mamba-scheduler-strategy", "extra_buffer", "--disable-radix-cache"), "mamba extra_buffer is not compatible with --disable-radix-cache"),
        (("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--mamba-scheduler-strategy", "extra_buffer",
          "--mamba-track-interval", "8"), "mamba_track_interval 8 must be greater than or equal to speculative_num_draft_tokens 16"),
        (("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--disable-radix-cache",
          "--speculative-num-draft-tokens", "8", "--speculative-dflash-block-size", "16"), "they differ"),
        (("--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "d", "--disable-radix-cache"), "--speculative-ddtree-budget"),
        (("--speculative-algorithm", "MEDUSA",), "Unknown speculative algorithm name: MEDUSA"),
    ],
)
def test_refusals(flags: tuple[str, ...], message: str) -> None:
    resolved = resolve(*flags)
    assert resolved.failure is not None and message in resolved.failure.message


def test_context_length_above_the_model_needs_the_env_override() -> None:
    refused = resolve("--context-length", "300k")
    assert refused.failure.message.startswith(
        "Warning: User-specified context_length (300000) is greater than the derived context_length (262144).")
    assert refused.failure.message.endswith("set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    allowed = resolve("--context-length", "300k", env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    assert allowed.failure is None and allowed.context_length == 300000
    assert any(w.logger == "sglang.srt.configs.model_config" for w in allowed.warnings)


def test_sim_settings_from_flags_and_env() -> None:
    _, settings = parse_command_line(["--model-path", "m"], {"FLEET_SIM_SPEED": "0.01", "FLEET_SIM_SEED": "7",
                                                            "FLEET_SIM_WORK_DIR": "/w", "FLEET_SIM_GPU_COUNT": "4"})
    assert (settings.speed, settings.seed, settings.faults_path, settings.gpu.count) == (0.01, 7, "/w/sim-faults.json", 4)
    _, settings = parse_command_line(["--model-path", "m", "--sim-speed", "0.5"], {"FLEET_SIM_SPEED": "0.01"})
    assert settings.speed == 0.5


def test_unknown_flag_and_bad_values_exit_2(capsys: pytest.CaptureFixture) -> None:
    for argv in (["--model-path", "m", "--frobnicate"], ["--tp-size", "2"], ["--model-path", "m", "--port", "x"],
                 ["--model-path", "m", "--mamba-scheduler-strategy", "lazy"]):
        with pytest.raises(SystemExit) as caught:
            parse_command_line(argv, {})
        assert caught.value.code == 2
    assert "launch_server.py: error:" in capsys.readouterr().err


def test_server_args_repr_is_parseable_and_ordered() -> None:
    raw, _ = parse_command_line(["--model", "/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--cuda-graph-bs", "1", "2"], {})
    text = render_server_args(raw)
    assert text.startswith("ServerArgs(model_path='/models/Qwen3.6-27B', tokenizer_path=None,")
    assert "tp_size=2" in text and "cuda_graph_bs=[1, 2]" in text
