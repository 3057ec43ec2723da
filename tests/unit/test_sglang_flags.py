"""The per-release flag tables and the parser built from them (no sglang needed: the differential
against the real 0.5.23 parser is tests/integration/test_sglang_parser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.host.engines.sglang.flags import RELEASE_FLAGS, ArgvError, ConfigFileError, build_parser, every_spelling, flag_for, human_readable_int, load_table, parse_argv, read_flat_yaml
from fleet.host.errors import FlagTableError
from fleet.host.engines.sglang.release import KNOWN_RELEASES


def refusal(release: str, *args: str, fork: str | None = None) -> str:
    with pytest.raises(ArgvError) as caught:
        parse_argv(release, ["--model-path", "m", *args], fork=fork)
    assert caught.value.text.startswith("usage: sglang serve ")  # argparse prints the usage first
    return caught.value.message


@pytest.mark.parametrize("release", KNOWN_RELEASES)
def test_every_release_has_a_table_from_its_own_source_and_a_parser_fleet_can_build(release: str) -> None:
    table = load_table(release)
    assert table.release == release and f"sglang {release}: sglang/srt/server_args.py" in table.source
    assert table.prog == "sglang serve" and table.allow_abbrev is True
    assert len(table.option_strings) == {"0.5.12": 404, "0.5.23": 561}[release]
    for fork in (None, "ddtree"):
        build_parser(release, fork)  # every action kind and type function of the table is implemented


def test_an_unknown_release_or_fork_is_refused() -> None:
    with pytest.raises(FlagTableError, match="fleet has flag tables for 0.5.12, 0.5.23"):
        load_table("0.5.13")
    with pytest.raises(FlagTableError, match="fork 'eagle'"):
        build_parser("0.5.23", "eagle")


def test_fleets_settings_have_each_releases_spelling() -> None:
    assert flag_for("0.5.12", "mamba_scheduler_strategy") == "--mamba-scheduler-strategy"
    assert flag_for("0.5.23", "mamba_scheduler_strategy") == "--mamba-radix-cache-strategy"
    assert flag_for("0.5.12", "cuda_graph_max_bs") == "--cuda-graph-max-bs"
    assert flag_for("0.5.23", "cuda_graph_max_bs") == "--cuda-graph-max-bs-decode"
    assert flag_for("0.5.23", "tp_size") == "--tp-size"
    assert every_spelling("tp_size") == {"--tp-size", "--tensor-parallel-size"}
    assert {"--model", "--model-path"} <= every_spelling("model_path")


@pytest.mark.parametrize("release", KNOWN_RELEASES)
def test_each_release_turns_cuda_graphs_off_with_a_flag_it_takes_without_a_deprecation(release: str) -> None:
    name, value = RELEASE_FLAGS[release].disable_cuda_graph
    spelled = f"--{name}" if value is True else f"--{name}={value}"
    parsed = parse_argv(release, ["--model-path", "m", spelled])
    assert parsed.warnings == ()  # 0.5.23 warns on --disable-cuda-graph: the fix must not use it
    assert parsed.values[load_table(release).dest_of(f"--{name}") or ""] == value


def test_what_one_release_takes_exactly_the_other_refuses_or_reads_as_a_prefix() -> None:
    assert parse_argv("0.5.12", ["--model-path", "m", "--cuda-graph-max-bs", "8"]).values["cuda_graph_max_bs"] == 8
    assert refusal("0.5.23", "--cuda-graph-max-bs", "8") == ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill")
    assert parse_argv("0.5.12", ["--model-path", "m", "--mamba-sched", "extra_buffer"]).values["mamba_scheduler_strategy"] == "extra_buffer"
    assert refusal("0.5.23", "--mamba-scheduler-strategy", "no_buffer") == "unrecognized arguments: --mamba-scheduler-strategy no_buffer"
    assert refusal("0.5.12", "--config-file", "x") == "unrecognized arguments: --config-file x"


def test_0512_from_cli_args_copies_the_parallel_sizes() -> None:
    # 0.5.12 server_args.py:7133: argparse's dest is tensor_parallel_size, the field tp_size.
    parsed = parse_argv("0.5.12", ["--model", "m", "--tensor-parallel-size", "2", "--dp", "2"])
    assert (parsed.values["tp_size"], parsed.values["dp_size"], parsed.fleet_value("tp_size")) == (2, 2, 2)


def test_types_choices_and_deprecations_as_the_release_has_them() -> None:
    assert parse_argv("0.5.23", ["--model-path", "m", "--context-length", "32k"]).values["context_length"] == 32000
    assert human_readable_int("1Ki") == 1024
    assert refusal("0.5.23", "--context-length", "1.5Ki").startswith("argument --context-length: Decimals are not allowed with IEC suffixes")
    assert refusal("0.5.23", "--port", "x") == "argument --port: invalid int value: 'x'"
    assert refusal("0.5.23", "--preferred-sampling-params", "{") == "argument --preferred-sampling-params: invalid loads value: '{'"
    assert refusal("0.5.23", "--cuda-graph-backend-decode", "tc_piecewise") == ("argument --cuda-graph-backend-decode: tc_piecewise was removed; select breakable, full, or disabled")
    deprecated = parse_argv("0.5.23", ["--model-path", "m", "--disable-cuda-graph"])
    assert deprecated.values["disable_cuda_graph"] is True
    assert deprecated.warnings == ("'--disable-cuda-graph' is deprecated and will be removed in a future release. Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.",)


def test_fork_flags_exist_only_on_the_fork() -> None:
    assert refusal("0.5.23", "--speculative-ddtree-budget", "15") == "unrecognized arguments: --speculative-ddtree-budget 15"
    assert parse_argv("0.5.23", ["--model-path", "m", "--speculative-ddtree-budget", "15"], fork="ddtree").values["speculative_ddtree_budget"] == 15


def test_config_files_merge_before_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text(
        "# a server\ntp-size: 2\ntrust-remote-code: true\nenable-metrics: false\ncuda-graph-bs-decode: [1, 2]\nmem-fraction-static: 0.8\nallowed-media-domains:\n  - a.example\n  - b.example\n"
    )
    parsed = parse_argv("0.5.23", ["--config", str(config), "--model-path", "m", "--tp-size", "4"])
    values = parsed.values
    assert (values["tp_size"], values["trust_remote_code"], values["enable_metrics"]) == (4, True, False)  # the command line wins
    assert values["cuda_graph_bs_decode"] == [1, 2] and values["mem_fraction_static"] == 0.8
    assert values["allowed_media_domains"] == ["a.example", "b.example"]


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["--config", "{d}/absent.yaml"], "Config file not found: {d}/absent.yaml"),
        ({"c.json": "{}"}, ["--config", "{d}/c.json"], "Config file must be YAML format, got: .json"),
        ({"c.yaml": "tp-size: 2\n"}, ["--config", "{d}/c.yaml", "--config", "{d}/c.yaml"], "Multiple config files specified! Only one allowed."),
        ({}, ["--config"], "No config file specified after --config flag!"),
        # Keys become flags as written (`--mem_fraction_static`): argparse does not know that spelling.
        ({"c.yaml": "mem_fraction_static: 0.8\n"}, ["--config", "{d}/c.yaml"], None),
        ({"c.yaml": "enable-tf32-matmul: true\n"}, ["--config", "{d}/c.yaml"], "Unsupported config option 'enable_tf32_matmul' with action 'BooleanOptionalAction'"),
    ],
)
def test_config_file_errors_are_the_mergers(tmp_path: Path, files: dict[str, str], args: list[str], message: str | None) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    argv = ["--model-path", "m", *(a.replace("{d}", str(tmp_path)) for a in args)]
    if message is None:
        with pytest.raises(ArgvError, match="unrecognized arguments: --mem_fraction_static 0.8"):
            parse_argv("0.5.23", argv)
        return
    with pytest.raises(ConfigFileError) as caught:
        parse_argv("0.5.23", argv)
    assert str(caught.value) == message.replace("{d}", str(tmp_path))


def test_nested_yaml_reads_as_pyyaml_reads_it_and_what_fleet_cannot_read_is_refused_with_its_line(tmp_path: Path) -> None:
    # SGLang 0.5.23 reads --config with yaml.safe_load (utils/server_args_config_parser.py:141): a
    # nested mapping is one value (it becomes a JSON flag value); the corpus test checks the rest.
    path = tmp_path / "nested.yaml"
    path.write_text("tp-size: 2\nspeculative:\n  algorithm: DFLASH\n")
    assert read_flat_yaml(path) == {"tp-size": 2, "speculative": {"algorithm": "DFLASH"}}
    path.write_text("tp-size: 2\nchat-template: |\n  hello\n")
    with pytest.raises(ConfigFileError, match=r"nested.yaml:2: fleet cannot read this YAML \(a block scalar\)"):
        read_flat_yaml(path)
