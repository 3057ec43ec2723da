"""`vllm serve` launches rendered from the playbook's fields (fleet/host/engines/vllm/launch.py), the
engine behind the seam, and the stdlib parser rebuilt from flagdata/0.33.0.json (no vLLM installed
here: tests/integration/test_vllm_parser.py holds it against the real parser)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fleet.host.engines.vllm.engine import ENGINE, parse_kv_cache_line
from fleet.host.engines.vllm.flags import ArgvError, ServeArgsError, load_table, parse_serve  # ArgvError: where flags.py has it from
from fleet.host.engines.vllm.launch import VLLM_MODULE, build_launch
from fleet.host.errors import EngineConfigError
from fleet.playbook import ModelRef, ServerConfig, ServerSettings, load_playbook, server_configs

ROOT = Path(__file__).resolve().parents[2]


def server(algorithm: str | None = None, *, draft: bool = False, settings: dict[str, Any] | None = None, **fields: Any) -> ServerConfig:
    base = {"context_length": 32768, "mem_fraction_static": 0.8, "max_running_requests": 8, "trust_remote_code": True}
    return ServerConfig(
        model=ModelRef(repo="Qwen/Qwen3-8B"),
        draft=ModelRef(repo="example/draft") if draft else None,
        tp=fields.pop("tp", 2),
        method=(algorithm or "autoregressive").lower(),
        variant=(algorithm or "autoregressive").lower(),
        algorithm=algorithm,
        num_draft_tokens=fields.pop("num_draft_tokens", None),
        num_steps=fields.pop("num_steps", None),
        eagle_topk=fields.pop("eagle_topk", None),
        ddtree_budget=fields.pop("ddtree_budget", None),
        settings=ServerSettings(**{**base, **(settings or {})}),
        **fields,
    )


def launch(config: ServerConfig, **kwargs: Any) -> list[str]:
    spec = build_launch(config, python="/venv/bin/python", model_path="/models/m", draft_path="/models/d" if config.draft else None, port=30000, **kwargs)
    assert spec.argv[:5] == ["/venv/bin/python", "-m", VLLM_MODULE, "serve", "/models/m"]
    assert spec.upstream
    return spec.argv[5:]


def test_the_playbook_fields_become_vllm_flags() -> None:
    assert launch(server()) == [
        "--served-model-name",
        "Qwen/Qwen3-8B",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "32768",
        "--gpu-memory-utilization",
        "0.8",
        "--max-num-seqs",
        "8",
        "--trust-remote-code",
    ]


def test_every_mapped_setting_is_rendered_and_parses_back() -> None:
    config = server(settings={"page_size": 32, "cuda_graph_max_bs": 16, "attention_backend": "fa3", "kv_cache_dtype": "bf16", "disable_radix_cache": True, "flags": {"enforce-eager": True, "seed": 3}})
    args = launch(config, bind_host="0.0.0.0", served_model_name="m8")
    values = parse_serve("0.33.0", ["/models/m", *args]).values
    assert values["block_size"] == 32 and values["max_cudagraph_capture_size"] == 16
    assert values["attention_backend"] == "FLASH_ATTN" and values["kv_cache_dtype"] == "bfloat16"
    assert values["enable_prefix_caching"] is False and "--disable-prefix-caching" in args
    assert values["enforce_eager"] is True and values["seed"] == 3
    assert values["host"] == "0.0.0.0" and values["served_model_name"] == ["m8"] and values["tensor_parallel_size"] == 2


@pytest.mark.parametrize(
    ("algorithm", "fields", "draft", "expected"),
    [
        ("DFLASH", {"num_draft_tokens": 16}, True, {"method": "dflash", "model": "/models/d", "num_speculative_tokens": 15}),
        ("EAGLE3", {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}, True, {"method": "eagle3", "model": "/models/d", "num_speculative_tokens": 3}),
        ("EAGLE", {"num_draft_tokens": 5}, True, {"method": "eagle", "model": "/models/d", "num_speculative_tokens": 4}),
        ("NEXTN", {"num_steps": 1}, False, {"method": "mtp", "num_speculative_tokens": 1}),
        ("NGRAM", {"num_draft_tokens": 8}, False, {"method": "ngram", "num_speculative_tokens": 7}),
        ("STANDALONE", {"num_steps": 4}, True, {"method": "draft_model", "model": "/models/d", "num_speculative_tokens": 4}),
    ],
)
def test_the_speculative_method_becomes_speculative_config_json(algorithm: str, fields: dict[str, Any], draft: bool, expected: dict[str, Any]) -> None:
    args = launch(server(algorithm, draft=draft, **fields))
    given = json.loads(args[args.index("--speculative-config") + 1])
    assert given == expected
    assert parse_serve("0.33.0", ["/models/m", *args]).values["speculative_config"] == expected


def test_the_draft_attention_backend_goes_into_the_speculative_config() -> None:
    args = launch(server("EAGLE3", draft=True, num_steps=2, settings={"draft_attention_backend": "flashinfer"}))
    assert json.loads(args[args.index("--speculative-config") + 1])["attention_backend"] == "FLASHINFER"


def test_ddtree_is_refused_naming_the_method_and_vllms_algorithms() -> None:
    with pytest.raises(EngineConfigError, match=r"tp2-ddtree \(Qwen/Qwen3-8B\): method 'ddtree': vLLM has no speculative algorithm DDTREE \(vLLM's: DFLASH, EAGLE"):
        launch(server("DDTREE", draft=True, ddtree_budget=15))
    assert "DDTREE" not in ENGINE.algorithms(None)


@pytest.mark.parametrize(("setting", "value"), [("max_total_tokens", 100000), ("chunked_prefill_size", 8192), ("mamba_scheduler_strategy", "extra_buffer")])
def test_a_setting_vllm_has_no_flag_for_is_refused_by_name(setting: str, value: Any) -> None:
    with pytest.raises(EngineConfigError, match=f"server.{setting} has no vLLM equivalent"):
        launch(server(settings={setting: value}))


@pytest.mark.parametrize("key", ["tensor-parallel-size", "tensor-parallel", "max_num_seqs", "max-model", "speculative-config", "speculative-config.method", "device-memory-utilization", "spec-method"])
def test_free_form_flags_may_not_set_what_fleet_renders(key: str) -> None:
    with pytest.raises(EngineConfigError, match="fleet renders these itself"):
        launch(server(settings={"flags": {key: "2"}}))


def test_speculative_settings_without_an_algorithm_and_eagle_topk_above_one_are_refused() -> None:
    with pytest.raises(EngineConfigError, match="without an `algorithm`"):
        launch(server(None, num_steps=3))
    with pytest.raises(EngineConfigError, match="eagle_topk 4: vLLM 0.33 drafts one chain"):
        launch(server("EAGLE3", draft=True, num_steps=3, eagle_topk=4))


def test_an_unknown_host_version_renders_with_the_nearest_release_and_a_bad_one_is_refused() -> None:
    assert launch(server(), vllm_version="0.35.2") == launch(server())
    with pytest.raises(EngineConfigError, match="expected a release number"):
        launch(server(), vllm_version="nightly")


def test_every_upstream_server_of_the_shipped_playbooks_renders_and_parses() -> None:
    rendered = 0
    for path in sorted((ROOT / "playbooks").glob("*.yaml")):
        for config in server_configs(load_playbook(path)):
            if config.algorithm == "DDTREE":
                continue
            args = launch(config)
            ENGINE.check_argv("0.33.0", ["/models/m", *args], fork=None)
            rendered += 1
    assert rendered >= 8


def test_check_argv_raises_argv_error_for_what_vllm_refuses() -> None:
    with pytest.raises(ArgvError) as caught:
        ENGINE.check_argv("0.33.0", ["--max-num", "4"], fork=None)
    assert caught.value.message.startswith("ambiguous option: --max-num could match")
    with pytest.raises(ArgvError, match="unrecognized arguments: --tp-size 2"):
        ENGINE.check_argv("0.33.0", ["--tp-size", "2"], fork=None)
    with pytest.raises(ArgvError, match="requires --tool-call-parser"):  # vLLM raises TypeError there
        ENGINE.check_argv("0.33.0", ["--enable-auto-tool-choice"], fork=None)
    ENGINE.check_argv("0.33.0", ["--max-num-se", "4", "-tp", "2", "--max_model_len=32k"], fork=None)


def test_flexible_spellings_parse_as_vllm_does() -> None:
    values = parse_serve("0.33.0", ["--model", "/m", "--max_num_seqs=4", "-O3", "--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "1"]).values
    assert values["model_tag"] == "/m" and values["max_num_seqs"] == 4 and values["optimization_level"] == "3"
    assert values["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    with pytest.raises(ServeArgsError, match="`model` should be provided as the first positional argument"):
        parse_serve("0.33.0", ["--served-model-name", "x"])


def test_predict_start_checks_the_command_line_and_says_what_of_a_hybrid_model_it_cannot_plan() -> None:
    from fleet.host.modelcard import load_model_card

    card = load_model_card("qwen3.6-27b")
    ok = ENGINE.predict_start(["serve", "/m", "-tp", "1"], {}, card, None, algorithm=None, gpu_memory_mib=97887, release="0.33.0", fork=None)
    # qwen3.6-27b has mamba layers: vLLM's hybrid KV cache is not modelled (fleet/host/engines/vllm/memory.py),
    # so the launch is not judged (never skipped for the planner's sake) and the reason says why.
    assert ok.ok and ok.plan is None and ok.reason.startswith("not checked:") and "hybrid" in ok.reason
    bad = ENGINE.predict_start(["/m", "--max-num-seqs", "many"], {}, card, None, algorithm=None, gpu_memory_mib=97887, release="0.33.0", fork=None)
    assert not bad.ok and bad.reason == "vLLM 0.33.0 refuses the command line: argument --max-num-seqs: invalid int value: 'many'"


def test_the_kv_cache_line_gives_the_serving_limits_it_states_and_no_cap() -> None:
    line = "(EngineCore pid=4242) INFO 11-02 10:00:01 [kv_cache_utils.py:1147] GPU KV cache size: 1,234,567 tokens, Maximum concurrency for 32,768 tokens per request: 37.68x"
    parsed = parse_kv_cache_line(line)
    assert parsed is not None and (parsed.pools, parsed.tokens, parsed.max_model_len, parsed.max_concurrency) == ("GPU", 1234567, 32768, 37.68)
    assert parse_kv_cache_line("INFO Loading weights took 3.2 seconds") is None
    limits = ENGINE.serving_limits(line)
    # max_num_seqs is not on the line: the cap stays unknown rather than guessed.
    assert limits is not None and (limits.max_total_num_tokens, limits.context_len, limits.max_running_requests) == (1234567, 32768, None)
    # The agent's log watch of a vLLM server reads it; an SGLang server's watch does not.
    from fleet.host.agent.logwatch import LogScan

    for engine, expected in (("vllm", limits), ("sglang", None)):
        scan = LogScan(engine)
        scan.feed(line)
        assert scan.scheduler == expected, engine


def test_flag_names_come_from_the_table() -> None:
    assert ENGINE.flag_for("0.33.0", "max_running_requests") == "--max-num-seqs"
    assert ENGINE.flag_for("0.33.0", "context_length") == "--max-model-len"
    assert ENGINE.disable_cuda_graph("0.33.0") == ("enforce-eager", True)
    table = load_table("0.33.0")
    assert table.prog == "vllm serve" and table.allow_abbrev and len(table.option_strings) == 485


def test_a_server_with_a_port_fix_keeps_its_launch_shape() -> None:
    fixed = replace(server(), port=31000)
    assert launch(fixed)[:6] == ["--served-model-name", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "30000"]
