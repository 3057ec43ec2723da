"""The inventory: hosts/*.yaml -> Host models, `--hosts` selection, and clear errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import ConfigError, HostSelectionError
from fleet.inventory import HostKeyPolicy, load_host, load_inventory

REPO = Path(__file__).resolve().parents[2]


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_shipped_hosts_load() -> None:
    inventory = load_inventory(REPO / "hosts")
    assert [h.name for h in inventory] == ["local"]  # the .example. file documents, it is not a host
    local = inventory.select("local")[0]
    assert local.engine.kind.value == "sim" and local.transport.value == "local"


def test_example_host_is_a_valid_host_file(tmp_path: Path) -> None:
    example = (REPO / "hosts" / "ct200.example.yaml").read_text()
    host = load_host(write(tmp_path, "ct200.yaml", example))
    assert host.gpus.count == 8 and host.paths.staging == "/dev/shm/fleet"
    assert host.host_key_policy is HostKeyPolicy.verify  # verification is the default, never off


def test_selection_by_names_groups_and_all(tmp_path: Path) -> None:
    for name, groups in (("ct200", "[blackwell, lab]"), ("ct201", "[blackwell]"), ("h200a", "[hopper]")):
        write(tmp_path, f"{name}.yaml", f"name: {name}\naddress: 10.0.0.1\ngroups: {groups}\n")
    inventory = load_inventory(tmp_path)
    assert [h.name for h in inventory.select("ct201,ct200")] == ["ct201", "ct200"]
    assert [h.name for h in inventory.select("blackwell")] == ["ct200", "ct201"]
    assert [h.name for h in inventory.select("hopper,ct200,lab")] == ["h200a", "ct200"]
    assert len(inventory.select("all")) == 3
    with pytest.raises(HostSelectionError, match="unknown host or group 'ct999'.*hosts: ct200, ct201, h200a"):
        inventory.select("ct999")


BAD_HOSTS = [
    # (file text, field named in the error, words of the expectation)
    ("name: ct200\naddress: 10.0.0.1\nport: 70000\n", "port", "less than or equal to 65535"),
    ("name: ct200\naddress: 10.0.0.1\nhost_key_policy: off\n", "host_key_policy", "'verify' or 'accept-new'"),
    ("name: ct200\n", "(top level)", "`address` or `ssh_alias`"),
    ("name: ct200\naddress: 10.0.0.1\ngpus: {count: eight}\n", "gpus.count", "valid integer"),
    ("name: ct200\naddress: 10.0.0.1\npaths: {work_dir: var/lib/fleet}\n", "paths.work_dir", "absolute path"),
    ("name: ct200\naddress: 10.0.0.1\nengine: {kind: vllm}\n", "engine.kind", "'sglang' or 'sim'"),
    ("name: ct200\naddress: 10.0.0.1\nservice_manger: systemd\n", "service_manger", "no such field"),
    ("name: ct200\naddress: 10.0.0.1\n  port: 22\n", "line 3", "valid YAML"),
    ("name: CT 200\naddress: 10.0.0.1\n", "name", "match pattern"),
    ("name: ct201\naddress: 10.0.0.1\n", "name", "file name"),
    ("", "", "a mapping describing a Host"),
]


@pytest.mark.parametrize("text, field, expected", BAD_HOSTS)
def test_malformed_host_names_file_field_and_expectation(tmp_path: Path, text: str, field: str, expected: str) -> None:
    path = write(tmp_path, "ct200.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_host(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert info.value.field.startswith(field) if field else True, message
    assert expected in message, message


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "ct200.yaml", "name: ct200\naddress: 10.0.0.1\nport: 0\ngpus: {count: -1}\n")
    with pytest.raises(ConfigError) as info:
        load_host(path)
    assert "port" in str(info.value) and "gpus.count" in str(info.value)


def test_group_may_not_shadow_a_host(tmp_path: Path) -> None:
    write(tmp_path, "ct200.yaml", "name: ct200\naddress: 10.0.0.1\ngroups: [ct201]\n")
    write(tmp_path, "ct201.yaml", "name: ct201\naddress: 10.0.0.2\n")
    with pytest.raises(ConfigError, match="groups: expected group names distinct from host names"):
        load_inventory(tmp_path)
