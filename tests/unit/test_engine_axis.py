"""The engine as an axis of a playbook's matrix (issue 23): `engine: [sglang, vllm]` plans every
method under each engine that has it, on hosts that serve both, with each engine's own command
line, release and verdict; mistakes are refused before any host is contacted, naming the file and
the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.inventory import Host
from fleet.plan import make_plan
from fleet.playbook import expand_runs, load_playbook
from tests.unit.fake_hosts import RTX_MODEL, make_host

ROOT = Path(__file__).resolve().parents[2]


def demo(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "playbooks" / "demo.yaml").read_text())
    data.update(changes)
    return data


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def both_engines(**changes: Any) -> dict[str, Any]:
    data = demo(engine=["sglang", "vllm"], **changes)
    data["methods"]["ddtree"]["engines"] = ["sglang"]  # the DDTree fork's method: vLLM has none
    return data


def host_with_vllm(name: str = "ct200", **vllm: str) -> Host:
    return Host.model_validate(
        {
            "name": name,
            "address": "10.201.0.2",
            "gpus": {"count": 2, "model": RTX_MODEL},
            "paths": {"work_dir": "/var/lib/fleet", "model_cache": "/srv/models", "staging": "/dev/shm/fleet"},
            "engine": {"kind": "sglang", "python": "/opt/sglang/bin/python", "vllm": {"python": "/opt/vllm/bin/python", **vllm}},
        }
    )


def test_a_playbook_that_names_no_engine_keeps_its_ids_and_labels(tmp_path: Path) -> None:
    """Every sweep before engines were an axis ran SGLang: naming it changes no run id (results and
    resumes of earlier sweeps still match), and naming none changes no label either."""
    plain = expand_runs(load_playbook(write(tmp_path, demo())))
    named = expand_runs(load_playbook(write(tmp_path, demo(engine=["sglang"]))))
    assert [r.id for r in plain] == [r.id for r in named]
    assert [r.server.id for r in plain] == [r.server.id for r in named]
    assert plain[0].label == "tp1-autoregressive/short" and named[0].label == "sglang-tp1-autoregressive/short"


def test_two_engines_make_each_method_once_under_each_engine_that_has_it(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, both_engines()))
    configs = {run.server.label: run.server for run in expand_runs(book)}
    assert sorted(configs) == sorted(["sglang-tp1-autoregressive", "sglang-tp1-dflash", "sglang-tp1-ddtree-b15", "vllm-tp1-autoregressive", "vllm-tp1-dflash"])
    assert configs["vllm-tp1-dflash"].engine_name == "vllm" and configs["sglang-tp1-dflash"].engine_name == "sglang"
    assert configs["vllm-tp1-dflash"].id != configs["sglang-tp1-dflash"].id  # one server, one result, per engine


def test_a_method_the_engine_lacks_is_refused_naming_the_field_and_the_way_out(tmp_path: Path) -> None:
    data = demo(engine=["sglang", "vllm"])  # DDTREE under vLLM too
    with pytest.raises(ConfigError) as caught:
        load_playbook(write(tmp_path, data))
    text = str(caught.value)
    assert "book.yaml" in text and "methods.ddtree.algorithm DDTREE" in text and "vLLM" in text and "methods.ddtree.engines" in text


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(engine=["sglang", "tgi"]), "engine"),
        (lambda d: d.update(engine=["vllm", "vllm"]), "engine"),
        (lambda d: d["methods"]["dflash"].update(engines=["vllm"]), "methods.dflash.engines"),
        (lambda d: d.update(overrides=[{"engine": "vllm", "server": {"max_running_requests": 2}}]), "overrides[0].engine"),
    ],
)
def test_an_engine_the_playbook_cannot_name_is_refused(tmp_path: Path, change: Any, field: str) -> None:
    data = demo()
    change(data)
    with pytest.raises(ConfigError) as caught:
        load_playbook(write(tmp_path, data))
    assert field in str(caught.value) and "book.yaml" in str(caught.value)


def test_each_engine_gets_its_own_command_line_release_and_verdict(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, both_engines()))
    plan = make_plan(book, [host_with_vllm()])
    by_label = {server.config.label: server for server in plan.servers if not server.skip_reason}
    vllm = by_label["vllm-tp1-dflash"]
    assert vllm.launch.argv[:4] == ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.cli.main", "serve"]  # the host file's vLLM interpreter
    assert "--speculative-config" in vllm.launch.argv and "--max-num-seqs" in vllm.launch.argv
    sglang = by_label["sglang-tp1-dflash"]
    assert sglang.launch.argv[:3] == ["/opt/sglang/bin/python", "-m", "sglang.launch_server"]
    assert vllm.engine_release == "0.33.0" and sglang.engine_release == "0.5.23"
    # Each verdict is its own engine's (vLLM's planner says what of this hybrid model it cannot size).
    assert "vLLM" in (vllm.prediction or "") and (sglang.prediction or "").startswith("sglang 0.5.23")


def test_an_override_under_one_engine_reaches_that_engines_command_line_only(tmp_path: Path) -> None:
    data = both_engines(overrides=[{"engine": "vllm", "server": {"flags": {"enforce-eager": True}}}])
    plan = make_plan(load_playbook(write(tmp_path, data)), [host_with_vllm()])
    for server in plan.servers:
        assert ("--enforce-eager" in server.launch.argv) == (server.config.engine_name == "vllm"), server.config.label


def test_a_flag_of_the_other_engine_is_refused_naming_the_field(tmp_path: Path) -> None:
    data = both_engines()
    data["server"]["flags"] = {"enable-torch-compile": True}  # SGLang's; `vllm serve` has no such flag
    with pytest.raises(ConfigError) as caught:
        make_plan(load_playbook(write(tmp_path, data)), [host_with_vllm()])
    text = str(caught.value)
    assert "server.flags.enable-torch-compile" in text and "vLLM" in text and "`overrides` with its `engine`" in text


def test_a_host_without_the_engine_is_refused_naming_its_file_and_what_to_set(tmp_path: Path) -> None:
    book = load_playbook(write(tmp_path, both_engines()))
    with pytest.raises(ConfigError) as caught:
        make_plan(book, [make_host("ct200", kind="sglang")])
    assert "engine.vllm.python" in str(caught.value) and "ct200" in str(caught.value)


def test_a_sim_host_plays_both_engines_each_launch_telling_the_simulator_which(tmp_path: Path) -> None:
    plan = make_plan(load_playbook(write(tmp_path, both_engines())), [make_host("ct201", kind="sim")])
    engines = {server.config.engine_name for server in plan.servers}
    assert engines == {"sglang", "vllm"}
    for server in plan.servers:
        env = server.launch.env
        assert server.launch.argv[2] == "fleet.host.engines.sim"
        if server.config.engine_name == "vllm":
            assert server.launch.argv[3] == "serve" and env["FLEET_SIM_ENGINE"] == "vllm" and env["FLEET_SIM_VLLM_VERSION"] == "0.33.0"
            assert "FLEET_SIM_SGLANG_VERSION" not in env
        else:
            assert "FLEET_SIM_ENGINE" not in env and env["FLEET_SIM_SGLANG_VERSION"] == server.engine_release


def test_a_vllm_release_the_host_file_pins_must_be_one_fleet_knows() -> None:
    with pytest.raises(ValueError, match="0.33.0"):
        host_with_vllm(release="0.1.0")
    assert host_with_vllm(release="0.33.0").engine.release_for("vllm") == "0.33.0"


def test_a_result_says_which_engine_served_it_and_older_results_read_as_sglangs() -> None:
    from fleet.host.contract import RunResult, RunStatus
    from fleet.host.errors import ContractError

    result = RunResult("r1", "vllm-tp1-x/short", "s1", "vllm-tp1-x", "sw", "ct200", RunStatus.ok, None, {}, {}, 0.0, 1.0, engine="vllm", engine_release="0.33.0")
    data = result.to_json()
    assert RunResult.from_json(data).engine == "vllm"
    older = {k: v for k, v in data.items() if k != "engine"}  # written before engines were an axis
    assert RunResult.from_json(older).engine == "sglang"
    with pytest.raises(ContractError, match="engine"):
        RunResult.from_json({**data, "engine": "tgi"})
