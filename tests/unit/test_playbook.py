"""Playbooks: validation with clear errors, expansion into runs, and ids that stay stable."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.playbook import expand_runs, load_playbook, server_configs

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "playbooks" / "qwen36-specdec.yaml"


def dump(tmp_path: Path, data: dict, name: str = "pb.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def seed_data() -> dict:
    return yaml.safe_load(SEED.read_text())


def test_seed_matrix_expands_to_every_cell() -> None:
    playbook = load_playbook(SEED)
    configs = server_configs(playbook)
    # TP1/TP4/TP8 x (autoregressive, DFlash, DDTree b8 b12 b15 b16 b32 b64)
    assert len(configs) == 3 * 8
    assert {c.variant for c in configs} == {"autoregressive", "dflash", "ddtree-b8", "ddtree-b12", "ddtree-b15", "ddtree-b16", "ddtree-b32", "ddtree-b64"}
    runs = expand_runs(playbook)
    assert len(runs) == 24 * 4
    assert len({r.id for r in runs}) == len(runs)
    assert len({c.id for c in configs}) == len(configs)
    # Runs come grouped by server configuration, so one launch serves all its workloads.
    assert [r.server.id for r in runs[:4]] == [configs[0].id] * 4


def test_ids_ignore_key_order_and_unrelated_edits(tmp_path: Path) -> None:
    base = {r.label: r.id for r in expand_runs(load_playbook(SEED))}

    reordered = seed_data()
    reordered = dict(reversed(list(reordered.items())))
    reordered["server"] = dict(reversed(list(reordered["server"].items())))
    assert {r.label: r.id for r in expand_runs(load_playbook(dump(tmp_path, reordered)))} == base

    edited = seed_data()
    edited["description"] = "another text"
    edited["limits"] = {"request_timeout_s": 30}
    edited["methods"]["eagle"] = {"algorithm": "EAGLE", "draft": "dflash"}
    edited["auto_fix"] = "off"
    runs = {r.label: r.id for r in expand_runs(load_playbook(dump(tmp_path, edited)))}
    assert {k: v for k, v in runs.items() if "eagle" not in k} == base


def test_ids_change_with_what_defines_the_run(tmp_path: Path) -> None:
    base = {r.label: r.id for r in expand_runs(load_playbook(SEED))}
    changed = seed_data()
    changed["workloads"]["short"]["max_new_tokens"] = 512
    runs = {r.label: r.id for r in expand_runs(load_playbook(dump(tmp_path, changed)))}
    assert runs["tp1-dflash/short"] != base["tp1-dflash/short"]
    assert runs["tp1-dflash/long_context"] == base["tp1-dflash/long_context"]

    changed = seed_data()
    changed["model"]["revision"] = "0123abcd"
    runs = {r.label: r.id for r in expand_runs(load_playbook(dump(tmp_path, changed)))}
    assert not set(runs.values()) & set(base.values())


def test_overrides_apply_where_they_match(tmp_path: Path) -> None:
    data = seed_data()
    data["overrides"] = [
        {"tp": 1, "server": {"context_length": 25000, "env": {"A": "1"}}},
        {"tp": 1, "method": "dflash", "server": {"max_running_requests": 2}},
    ]
    configs = {c.label: c for c in server_configs(load_playbook(dump(tmp_path, data)))}
    assert configs["tp1-dflash"].settings.context_length == 25000
    assert configs["tp1-dflash"].settings.max_running_requests == 2
    assert configs["tp1-autoregressive"].settings.max_running_requests == 4
    assert configs["tp1-autoregressive"].settings.env == {"A": "1"}
    assert configs["tp4-dflash"].settings.context_length == 32768


def _bad(patch):
    data = seed_data()
    patch(data)
    return data


BAD_PLAYBOOKS = [
    (lambda d: d.pop("model"), "model", "required"),
    (lambda d: d["model"].update(path="/srv/x"), "model", "exactly one of `repo`"),
    (lambda d: d.update(tp=[1, "four"]), "tp[1]", "valid integer"),
    (lambda d: d["server"].update(mem_fraction_static=1.5), "server.mem_fraction_static", "less than 0.99"),
    (lambda d: d["methods"]["ddtree"].update(budgets=[]), "methods.ddtree", "non-empty `budgets`"),
    (lambda d: d["methods"]["dflash"].update(draft="eagle"), "methods", "to name a key of `drafts`"),
    (lambda d: d.update(overrides=[{"tp": 2, "server": {}}]), "overrides", "to be one of `tp` [1, 4, 8]"),
    (lambda d: d["workloads"]["short"].update(kind="shrot"), "workloads.short", "'short', 'long_context', 'concurrency', 'agentic'"),
    (lambda d: d["workloads"]["long_context"].pop("prompt_tokens"), "workloads.long_context.long_context.prompt_tokens", "required"),
    (lambda d: d.update(isolation="alone"), "isolation", "'shared' or 'exclusive'"),
    (lambda d: d.update(auto_fix="yes"), "auto_fix", "'apply', 'suggest' or 'off'"),
    (lambda d: d["server"].update(max_runing_requests=4), "server.max_runing_requests", "no such field"),
    (lambda d: d["methods"].update(autoregressive={"budgets": [8]}), "methods.autoregressive", "`budgets` only with algorithm DDTREE"),
]


@pytest.mark.parametrize("patch, field, expected", BAD_PLAYBOOKS)
def test_malformed_playbook_names_file_field_and_expectation(tmp_path: Path, patch, field: str, expected: str) -> None:
    path = dump(tmp_path, _bad(patch))
    with pytest.raises(ConfigError) as info:
        load_playbook(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert info.value.field == field, message
    assert expected in message, message


def test_playbook_that_is_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "pb.yaml"
    path.write_text("name: x\nmethods: [unclosed\n")
    with pytest.raises(ConfigError, match=r"pb.yaml: line \d+, column \d+: expected valid YAML"):
        load_playbook(path)


def test_every_shipped_playbook_loads() -> None:
    for path in sorted((REPO / "playbooks").glob("*.yaml")):
        assert expand_runs(load_playbook(path)), path
