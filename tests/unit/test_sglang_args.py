"""ServerArgs resolution per release (fleet.host.engines.sglang.args), and the simulator's command
line playing each release: defaults, hooks, refusals, and where 0.5.12 and 0.5.23 differ."""

from __future__ import annotations

import pytest

from fleet.host.engines.sglang.args import resolve_server_args
from fleet.host.engines.sim.cli import parse_command_line, read_command_line, render_server_args
from fleet.host.modelcard import load_model_card

TARGET = load_model_card("qwen3.6-27b")
DRAFT = load_model_card("qwen3.6-27b-dflash")


def resolve(*flags: str, release: str = "0.5.12", env: dict | None = None):
    """As the sim resolves its command line: the release it plays, with the DDTree fork (its default)."""
    line = read_command_line(["--model-path", "qwen3.6-27b", *flags], {"FLEET_SIM_SGLANG_VERSION": release})
    assert line.fork == "ddtree"
    return resolve_server_args(line.values, TARGET, DRAFT, env or {}, sim_seed=0, release=line.release, fork=line.fork)


def test_0512_plain_hybrid_model_disables_overlap_with_sglang_warning() -> None:
    resolved = resolve()
    assert resolved.failure is None
    assert resolved.values["mamba_scheduler_strategy"] == "no_buffer"
    assert resolved.values["disable_overlap_schedule"] is True
    assert [w.message for w in resolved.warnings] == [
        "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, try to use --disable-radix-cache if overlap schedule is necessary"
    ]
    assert resolved.values["served_model_name"] == "qwen3.6-27b"


def test_0523_plain_hybrid_model_keeps_overlap_with_mamba_extra_buffer() -> None:
    # arg_groups/overrides.py:477: auto -> extra_buffer when overlap is wanted and the arch supports it.
    resolved = resolve(release="0.5.23")
    assert resolved.failure is None
    assert resolved.values["mamba_scheduler_strategy"] == "extra_buffer"
    assert resolved.values["disable_overlap_schedule"] is False
    assert resolved.warnings == ()


def test_0523_auto_falls_back_to_no_buffer_without_overlap_and_then_disables_it() -> None:
    resolved = resolve("--disable-overlap-schedule", release="0.5.23")
    assert resolved.values["mamba_scheduler_strategy"] == "no_buffer" and resolved.values["disable_overlap_schedule"] is True
    refused = resolve("--mamba-radix-cache-strategy", "no_buffer", release="0.5.23")
    assert refused.failure is not None and refused.failure.exception == "AssertionError"
    assert refused.failure.message == "no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True."


def test_dflash_defaults_block_size_from_draft_and_48_requests_in_both_releases() -> None:
    for release in ("0.5.12", "0.5.23"):
        resolved = resolve("--speculative-algorithm", "dflash", "--speculative-draft-model-path", "qwen3.6-27b-dflash", "--disable-radix-cache", release=release)
        assert resolved.failure is None
        assert resolved.algorithm == "DFLASH" and resolved.release == release
        assert resolved.values["speculative_num_draft_tokens"] == 16
        assert resolved.values["max_running_requests"] == 48
        assert (resolved.values["speculative_num_steps"], resolved.values["speculative_eagle_topk"]) == (1, 1)
        messages = [w.message for w in resolved.warnings]
        assert "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests." in messages
        overlap = "Overlap scheduler is disabled when using DFLASH speculative decoding (spec v2 is not supported yet)."
        # 0.5.12 server_args.py:3705 turns overlap off for DFLASH; 0.5.23's _handle_dflash no longer does.
        assert (overlap in messages) is (release == "0.5.12")
        assert resolved.values["disable_overlap_schedule"] is (release == "0.5.12")


def test_hybrid_dflash_with_radix_cache_is_refused_by_0512_and_runs_extra_buffer_on_0523() -> None:
    flags = ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "qwen3.6-27b-dflash")
    refused = resolve(*flags)
    assert refused.failure is not None and refused.failure.exception == "ValueError"
    assert refused.failure.message == (
        "Speculative decoding for Qwen3_5ForConditionalGeneration is not compatible with radix cache when using "
        "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
        "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
    )
    kept = resolve(*flags, release="0.5.23")
    assert kept.failure is None
    assert kept.values["mamba_scheduler_strategy"] == "extra_buffer" and kept.values["disable_overlap_schedule"] is False
    assert kept.values["disable_radix_cache"] is False


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--speculative-algorithm", "DFLASH"), "DFLASH speculative decoding requires setting --speculative-draft-model-path."),
        (("--mamba-scheduler-strategy", "extra_buffer", "--disable-radix-cache"), "mamba extra_buffer is not compatible with --disable-radix-cache"),
        (
            ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--mamba-scheduler-strategy", "extra_buffer", "--mamba-track-interval", "8"),
            "mamba_track_interval 8 must be greater than or equal to speculative_num_draft_tokens 16",
        ),
        (
            ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--disable-radix-cache", "--speculative-num-draft-tokens", "8", "--speculative-dflash-block-size", "16"),
            "they differ",
        ),
        (("--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "d", "--disable-radix-cache"), "--speculative-ddtree-budget"),
        (
            (
                "--speculative-algorithm",
                "MEDUSA",
            ),
            "Unknown speculative algorithm name: MEDUSA",
        ),
    ],
)
def test_0512_refusals(flags: tuple[str, ...], message: str) -> None:
    resolved = resolve(*flags)
    assert resolved.failure is not None and message in resolved.failure.message


def test_0523_accepts_extra_buffer_without_radix_cache_and_refuses_a_short_track_interval() -> None:
    # 0.5.23 model_override_base.py:262: with the radix cache off the strategy is never read.
    assert resolve("--mamba-radix-cache-strategy", "extra_buffer", "--disable-radix-cache", release="0.5.23").failure is None
    short = resolve("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--mamba-track-interval", "8", release="0.5.23")
    assert short.failure is not None and short.failure.exception == "AssertionError"  # mamba_hook.py:128, a bare assert


def test_ddtree_is_a_fork_algorithm_unknown_to_upstream_resolution() -> None:
    raw, _ = parse_command_line(["--model-path", "m", "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "d", "--disable-radix-cache"], {})
    upstream = resolve_server_args(raw, TARGET, DRAFT, {}, sim_seed=0, release="0.5.23", fork=None)
    assert upstream.failure is not None and upstream.failure.message == "Unknown speculative algorithm name: DDTREE"
    fork = resolve_server_args(raw, TARGET, DRAFT, {}, sim_seed=0, release="0.5.23", fork="ddtree")
    assert fork.failure is not None and "--speculative-ddtree-budget" in fork.failure.message


def test_context_length_above_the_model_needs_the_env_override() -> None:
    refused = resolve("--context-length", "300k")
    assert refused.failure.message.startswith("Warning: User-specified context_length (300000) is greater than the derived context_length (262144).")
    assert refused.failure.message.endswith("set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    allowed = resolve("--context-length", "300k", env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    assert allowed.failure is None and allowed.context_length == 300000
    assert any(w.logger == "sglang.srt.configs.model_config" for w in allowed.warnings)


def test_sim_settings_from_flags_and_env() -> None:
    _, settings = parse_command_line(["--model-path", "m"], {"FLEET_SIM_SPEED": "0.01", "FLEET_SIM_SEED": "7", "FLEET_SIM_WORK_DIR": "/w", "FLEET_SIM_GPU_COUNT": "4"})
    assert (settings.speed, settings.seed, settings.faults_path, settings.gpu.count) == (0.01, 7, "/w/sim-faults.json", 4)
    _, settings = parse_command_line(["--model-path", "m", "--sim-speed", "0.5"], {"FLEET_SIM_SPEED": "0.01"})
    assert settings.speed == 0.5
    _, settings = parse_command_line(["--model-path", "m", "--sim-speed=0.25"], {})
    assert settings.speed == 0.25


def test_the_release_played_comes_from_the_environment_and_an_unknown_one_says_so() -> None:
    assert read_command_line(["--model-path", "m"], {}).release == "0.5.23"
    line = read_command_line(["--model-path", "m"], {"FLEET_SIM_SGLANG_VERSION": "0.5.19"})
    assert (line.release, line.requested_release) == ("0.5.12", "0.5.19")
    assert line.release_note is not None and "nearest known release, 0.5.12" in line.release_note


@pytest.mark.parametrize(
    ("release", "argv", "error"),
    [
        ("0.5.23", ["--model-path", "m", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        ("0.5.23", ["--tp-size", "2"], "the following arguments are required: --model-path/--model"),
        ("0.5.23", ["--model-path", "m", "--port", "x"], "argument --port: invalid int value: 'x'"),
        ("0.5.23", ["--model-path", "m", "--mamba-scheduler-strategy", "extra_buffer"], "unrecognized arguments: --mamba-scheduler-strategy extra_buffer"),
        ("0.5.23", ["--model-path", "m", "--cuda-graph-max-bs", "8"], "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
        ("0.5.23", ["--model-path", "m", "--disable-cuda", "8"], "ambiguous option: --disable-cuda could match --disable-cuda-graph-padding, --disable-cuda-graph"),
        ("0.5.12", ["--model-path", "m", "--mamba-radix-cache-strategy", "extra_buffer"], "unrecognized arguments: --mamba-radix-cache-strategy extra_buffer"),
        ("0.5.12", ["--model-path", "m", "--mamba-scheduler-strategy", "lazy"], "argument --mamba-scheduler-strategy: invalid choice: 'lazy'"),
    ],
)
def test_bad_command_lines_exit_2_with_the_release_parsers_text(release: str, argv: list[str], error: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_command_line(argv, {"FLEET_SIM_SGLANG_VERSION": release})
    assert caught.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("sglang serve: error: " + error), last


def test_0523_spellings_are_read_as_fleets_settings() -> None:
    raw, _ = parse_command_line(
        ["--model-path", "m", "--mamba-radix-cache-strategy", "extra_buffer", "--cuda-graph-max-bs-decode", "8", "--cuda-graph-bs-decode", "1", "2", "--cuda-graph-backend-decode", "disabled"], {}
    )
    assert (raw["mamba_scheduler_strategy"], raw["cuda_graph_max_bs"], raw["cuda_graph_bs"], raw["disable_cuda_graph"]) == ("extra_buffer", 8, [1, 2], True)


def test_server_args_repr_is_parseable_and_ordered() -> None:
    raw, _ = parse_command_line(["--model", "/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--cuda-graph-bs", "1", "2"], {"FLEET_SIM_SGLANG_VERSION": "0.5.12"})
    text = render_server_args(raw)
    assert text.startswith("ServerArgs(model_path='/models/Qwen3.6-27B', tokenizer_path=None,")
    assert "tp_size=2" in text and "cuda_graph_bs=[1, 2]" in text
