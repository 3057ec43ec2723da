"""The inventory: hosts/*.yaml -> Host models, `--hosts` selection, and clear errors for bad files."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fleet.errors import ConfigError, HostSelectionError
from fleet.facts import HostFacts
from fleet.facts.models import EnginePython, FactsRequest
from fleet.inventory import HostKeyPolicy, load_host, load_inventory
from fleet.plan import Hardware, PlanOptions, hardware_of, make_plan
from fleet.playbook import load_playbook
from tests.shipped import shipped_host_files, shipped_hosts

REPO = Path(__file__).resolve().parents[2]


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_shipped_hosts_load(tmp_path: Path) -> None:
    inventory = load_inventory(shipped_hosts(tmp_path))
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
    ("name: ct200\naddress: 10.0.0.1\nengine: {release: '0.5.13'}\n", "engine.release", "one of the SGLang releases fleet knows (0.5.12, 0.5.23), not '0.5.13'"),
    ("name: ct200\naddress: 10.0.0.1\nengine: {fork: eagle}\n", "engine.fork", "one of upstream, ddtree"),
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


# --- engine.release: which SGLang release a host is planned for ---------------------------------------


def facts_with_sglang(version: str | None) -> HostFacts:
    return HostFacts(
        request=FactsRequest(paths={}, engine_python="python3"),
        gathered_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        engine=EnginePython(executable="/opt/sglang/bin/python", python_version="3.12.3", sglang_version=version),
    )


def test_a_hosts_release_comes_from_its_facts_and_a_pin_that_agrees(tmp_path: Path) -> None:
    plain = load_host(write(tmp_path, "ct200.yaml", "name: ct200\naddress: 10.0.0.1\n"))
    assert hardware_of(plain, facts_with_sglang("0.5.23")).engine_release == "0.5.23"
    assert hardware_of(plain).engine_version is None and hardware_of(plain).engine_release == "0.5.23"  # unknown: what hosts run now
    pinned = load_host(write(tmp_path, "ct201.yaml", "name: ct201\naddress: 10.0.0.1\nengine: {release: '0.5.12'}\n"))
    assert hardware_of(pinned).engine_version == "0.5.12"  # no facts yet: the pin
    assert hardware_of(pinned, facts_with_sglang("0.5.12.post1")).engine_release == "0.5.12"


def test_an_unknown_version_is_planned_with_the_nearest_known_release_and_says_so(tmp_path: Path) -> None:
    host = load_host(write(tmp_path, "ct200.yaml", "name: ct200\naddress: 10.0.0.1\n"))
    hardware = hardware_of(host, facts_with_sglang("0.5.19"))
    assert hardware.engine_release == "0.5.12"
    assert hardware.release_note == ("SGLang 0.5.19 is not a release fleet knows (0.5.12, 0.5.23); planned with the nearest known release, 0.5.12")
    assert hardware_of(host, facts_with_sglang("0.5.23")).release_note is None


def test_facts_that_disagree_with_the_pin_name_the_host_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "ct200.yaml", "name: ct200\naddress: 10.0.0.1\nengine: {release: '0.5.12'}\n")
    with pytest.raises(ConfigError) as info:
        hardware_of(load_host(path), facts_with_sglang("0.5.23"))
    assert info.value.field == "engine.release"
    assert str(info.value).startswith(str(path))
    assert "facts report sglang 0.5.23" in str(info.value) and "0.5.12" in str(info.value)


def test_a_sim_host_plays_its_pinned_release_else_the_default(tmp_path: Path) -> None:
    sim = "name: {name}\ntransport: local\ngpus: {{count: 2, model: NVIDIA RTX PRO 6000 Blackwell Server Edition}}\nengine: {{kind: sim{extra}}}\n"
    default = load_host(write(tmp_path, "a.yaml", sim.format(name="a", extra="")))
    seed = load_host(write(tmp_path, "b.yaml", sim.format(name="b", extra=", release: '0.5.12'")))
    assert hardware_of(default).engine_version == "0.5.23" and hardware_of(seed).engine_version == "0.5.12"
    assert default.engine.engine_fork == "ddtree"  # the sim plays the DDTree fork unless told upstream
    upstream = load_host(write(tmp_path, "c.yaml", sim.format(name="c", extra=", fork: upstream")))
    assert upstream.engine.engine_fork is None
    real = load_host(write(tmp_path, "d.yaml", "name: d\naddress: 10.0.0.1\n"))
    assert real.engine.engine_fork is None


def test_plans_name_the_release_of_every_server(tmp_path: Path) -> None:
    sim = "name: {name}\ntransport: local\ngpus: {{count: 2, model: NVIDIA RTX PRO 6000 Blackwell Server Edition}}\nengine: {{kind: sim{extra}}}\n"
    hosts = [load_host(write(tmp_path, "a.yaml", sim.format(name="a", extra=""))), load_host(write(tmp_path, "b.yaml", sim.format(name="b", extra=", release: '0.5.12'")))]
    playbook = load_playbook(REPO / "playbooks" / "demo.yaml")
    for host, release in zip(hosts, ("0.5.23", "0.5.12")):
        runs = make_plan(playbook, [host]).to_json()["runs"]
        assert runs and {r["engine_release"] for r in runs} == {release}
        assert all(r["env"]["FLEET_SIM_SGLANG_VERSION"] == release for r in runs)
        assert all(r["prediction"] is None or r["prediction"].startswith(f"sglang {release} ") for r in runs)
    options = PlanOptions(hardware={hosts[0].name: Hardware(97887, "sm_120", "0.5.30")})
    noted = make_plan(playbook, [hosts[0]], options).to_json()["runs"]
    assert {r["engine_release"] for r in noted} == {"0.5.23"}
    assert {r["engine_release_note"] for r in noted} == {"SGLang 0.5.30 is not a release fleet knows (0.5.12, 0.5.23); planned with the nearest known release, 0.5.23"}


def test_users_host_files_stay_out_of_commits_and_the_shipped_ones_in() -> None:
    """The README has users create hosts/ct200.yaml: git must not pick it up, nor drop a shipped file."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    names = ["hosts/ct200.yaml", "hosts/mine.yml", *(str(p.relative_to(REPO)) for p in shipped_host_files())]
    done = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.split() == ["hosts/ct200.yaml", "hosts/mine.yml"]
    tracked = subprocess.run(["git", "ls-files", "hosts"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert sorted(tracked) == sorted(str(p.relative_to(REPO)) for p in shipped_host_files())


def test_a_users_host_files_leave_the_shipped_inventory_of_the_tests_alone(tmp_path: Path) -> None:
    """shipped_hosts copies only what fleet ships, whatever a user added beside it."""
    assert [p.name for p in shipped_host_files()] == ["ct200.example.yaml", "local.yaml"]
    assert sorted(p.name for p in shipped_hosts(tmp_path).iterdir()) == ["ct200.example.yaml", "local.yaml"]
