"""`fleet provision` on the fake transport (no root): what it finds, clears, fetches and stages, a
re-run that changes nothing, preflight failures, dry runs, and the one provisioning-options factory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleet.errors import AuthenticationFailed, ConnectionLost
from fleet.host.agent.services import FLEET_SERVICE_PIDS_SH, SERVICE_ENV_MARKER, started_by_fleet
from fleet.layout import model_cache_dir, model_serve_dir
from fleet.playbook import load_playbook
from fleet.provision.models import MARKER
from fleet.provision.provision import SECRET_NAMES, ProvisionOptions, models_of, provision, provision_host, provision_options
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import GPU_ENGINE_PROBE, FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
TOKEN = "hf_unit_secret_0123456789"


@pytest.fixture(autouse=True)
def facts_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def actions(report) -> list[str]:
    return [c.action for c in report.changes]


def test_a_sim_host_gets_weightless_models_cached_and_staged_then_a_rerun_changes_nothing() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    first = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert first.status == "changed", first.reason
    assert first.preflight is not None and first.preflight.ok
    assert first.facts is not None and first.facts.boot_id == t.boot_id
    assert actions(first) == ["mkdir", "fetch", "stage", "fetch", "stage"]  # target, then the draft
    for model in models_of(playbook):
        cached, staged = model_cache_dir(model, host), model_serve_dir(model, host)
        assert t.is_file(f"{cached}/{MARKER}") and t.tree(staged) == t.tree(cached)
        assert json.loads(t.read_text(f"{cached}/config.json"))  # made from the model card
        assert first.models[model.label]["dir"] == staged
    assert shell.jobs == ["fleet-stage", "fleet-stage"]

    calls_before = len(t.calls)
    second = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert second.status == "ok" and second.changes == []
    assert not [c for c in t.calls[calls_before:] if c.kind in ("put", "put_bytes", "rsync_push")]
    assert shell.jobs == ["fleet-stage", "fleet-stage"]  # nothing staged again


def test_after_a_reboot_provisioning_restages_from_the_cache_only() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    FakeHostShell(t, host)
    provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    t.reboot()
    again = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert again.status == "changed" and actions(again) == ["mkdir", "stage", "stage"]  # /dev/shm/fleet itself is gone too


def _cut_by_a_reboot(t: FakeTransport, matches, *, reboot: bool = True) -> list[str]:
    """The first `run` call that `matches` dies with the host's session: the host reboots under it
    (its tmpfs wiped, a new boot id) and the call ends in ConnectionLost, as over SSH. Returns the
    commands it cut (one)."""
    cut: list[str] = []

    def handler(transport: FakeTransport, call) -> None:
        if cut or not matches(call.command):
            return None  # the host's usual answer
        cut.append(call.command)
        if reboot:
            transport.reboot()
        raise ConnectionLost(transport.host, f"{call.command}: the channel closed before the command's exit status arrived")

    t.on(lambda call: True, handler, name="reboot under a call")
    return cut


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(lambda command: "setsid" in command and "fleet-stage" in command, id="the-stage-start"),
        pytest.param(lambda command: "find . -type f" in command and "/dev/shm/" in command, id="the-staged-copy-verify"),
    ],
)  # fmt: skip
def test_a_reboot_that_cuts_a_staging_call_short_stages_again_on_the_new_boot(moment) -> None:
    """The flake of test_reboot_during_staging_and_during_a_pull: a reboot that landed while the
    stage's own SSH call ran (not one of its polls) failed the host ("the channel closed before
    the command's exit status arrived"), and the sweep went on without it."""
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    first_boot = t.boot_id
    cut = _cut_by_a_reboot(t, moment)
    report = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert cut and t.reboots == 1 and t.boot_id != first_boot
    assert report.status == "changed", report.reason
    for model in models_of(playbook):
        assert t.tree(model_serve_dir(model, host)) == t.tree(model_cache_dir(model, host))  # staged on the new boot
    assert "fleet-stage" in shell.jobs


def test_a_cut_staging_call_without_a_reboot_still_fails_the_host() -> None:
    """Only a new boot makes the failure the reboot's: a dropped call on the same boot is said as before."""
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    FakeHostShell(t, host)
    _cut_by_a_reboot(t, lambda command: "setsid" in command and "fleet-stage" in command, reboot=False)
    report = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert report.status == "failed" and "exit status arrived" in report.reason, report.reason


def test_stale_servers_are_cleared_unless_a_fleet_agent_runs() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host, stale_pids=["4242", "4250"])
    report = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert actions(report)[0] == "clear" and "4242, 4250" in report.changes[0].detail
    assert shell.killed == ["4242", "4250"]
    facts_calls = [c for c in t.calls if c.argv and c.argv[:2] == ("sh", "-c")]
    assert len(facts_calls) >= 2  # facts read again once the GPUs and ports were freed

    t2 = FakeTransport(host.name)
    shell2 = FakeHostShell(t2, host, stale_pids=["4242"], agent_running=True)
    report2 = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t2)
    assert "clear" not in actions(report2) and shell2.killed == []


def test_provisions_stale_rule_is_the_agents_marked_processes_only() -> None:
    """The shell form provision runs on a host and the agent's `started_by_fleet` are one rule: real
    processes here, one marked as fleet's own, one with a server's very command line but unmarked."""
    env = {k: v for k, v in os.environ.items() if k != SERVICE_ENV_MARKER}
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)", "-m", "sglang.launch_server", "--port", "30000"]
    marked = subprocess.Popen(sleeper, env={**env, SERVICE_ENV_MARKER: "fleet-server-x"})
    colleague = subprocess.Popen(sleeper, env=env)
    try:
        listed = {int(p) for p in subprocess.run(["sh", "-c", FLEET_SERVICE_PIDS_SH], env=env, capture_output=True, text=True, check=True).stdout.split()}
        assert marked.pid in listed and colleague.pid not in listed
        assert started_by_fleet(marked.pid) and not started_by_fleet(colleague.pid)
    finally:
        marked.kill()
        colleague.kill()
        marked.wait()
        colleague.wait()


def test_a_failed_preflight_is_reported_and_nothing_is_changed_on_the_host() -> None:
    host, playbook = make_host(kind="sglang", gpus=8), load_playbook(DEMO)
    t = FakeTransport(host.name)
    cpu_torch = GPU_ENGINE_PROBE.replace('"torch_cuda": "13.0"', '"torch_cuda": null')
    shell = FakeHostShell(t, host, gpu=True, engine_probe=cpu_torch)
    report = provision_host(host, playbook, provision_options(DEMO.parent, {"HF_TOKEN": TOKEN}), transport=t)
    assert report.status == "failed" and "CPU-only build" in report.reason
    assert shell.jobs == [] and not [c for c in t.calls if c.kind in ("put", "put_bytes", "rsync_push")]
    assert not [c for c in t.calls if c.argv and c.argv[0] == "mkdir"]


def test_a_gpu_host_fetches_from_the_hub_with_the_token_only_in_the_fetch_environment() -> None:
    host, playbook = make_host(kind="sglang", gpus=8), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host, gpu=True)
    report = provision_host(host, playbook, provision_options(DEMO.parent, {"HF_TOKEN": TOKEN, "PATH": "/bin"}), transport=t)
    assert report.status == "changed", report.reason
    assert actions(report) == ["mkdir", "fetch", "stage", "fetch", "stage"]
    assert shell.jobs == ["fleet-fetch", "fleet-stage", "fleet-fetch", "fleet-stage"]
    assert shell.fetch_envs == [{"HF_TOKEN": TOKEN}] * 2  # and nothing else of the controller's environment
    assert [c.kind for c in t.calls if TOKEN in c.env.values()] == ["run", "run"]
    assert t.secret_leaks(TOKEN) == []
    assert all(m["revision"] and m["source"].startswith("hf:") for m in report.models.values())

    again = provision_host(host, playbook, provision_options(DEMO.parent, {"HF_TOKEN": TOKEN}), transport=t)
    assert again.status == "ok" and shell.jobs == ["fleet-fetch", "fleet-stage", "fleet-fetch", "fleet-stage"]


def test_a_dry_run_reports_the_changes_and_makes_none() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host, stale_pids=["77"])
    report = provision_host(host, playbook, provision_options(DEMO.parent, {}, dry_run=True), transport=t)
    assert report.status == "changed" and actions(report) == ["clear", "mkdir", "fetch", "stage", "fetch", "stage"]
    assert shell.killed == [] and shell.jobs == []
    assert not [c for c in t.calls if c.kind in ("put", "put_bytes", "rsync_push") or (c.argv and c.argv[0] in ("mkdir", "rm"))]


def mirror_playbook(tmp_path: Path) -> Path:
    """A playbook whose model is a relative `mirror:` beside it."""
    book = tmp_path / "books"
    mirror = book / "mirrors" / "qwen"
    mirror.mkdir(parents=True)
    (mirror / "config.json").write_text("{}")
    (mirror / "model.safetensors").write_bytes(b"m" * 1000)
    data = yaml.safe_load(DEMO.read_text())
    data["model"]["mirror"] = "mirrors/qwen"
    data["methods"] = {"autoregressive": {}}
    del data["drafts"]
    (book / "mirrored.yaml").write_text(yaml.safe_dump(data))
    return book / "mirrored.yaml"


def test_a_relative_mirror_resolves_against_the_playbooks_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = mirror_playbook(tmp_path)
    monkeypatch.chdir(tmp_path)  # not where the playbook is
    host, playbook = make_host(), load_playbook(path)
    t = FakeTransport(host.name)
    FakeHostShell(t, host)
    report = provision_host(host, playbook, provision_options(path.parent, {}), transport=t)
    assert report.status == "changed", report.reason
    assert [c.command for c in t.calls if c.kind == "rsync_push"] == [f"rsync {path.parent / 'mirrors' / 'qwen'} {model_cache_dir(playbook.model, host)}/"]
    assert t.tree(model_cache_dir(playbook.model, host))["model.safetensors"] == b"m" * 1000


def test_the_options_factory_takes_named_secrets_from_the_environment_and_never_prints_them(tmp_path: Path) -> None:
    options = provision_options(tmp_path / "books" / "..", {"HF_TOKEN": TOKEN, "AWS_SECRET": "x", "HOME": "/root"})
    assert options.secrets == {"HF_TOKEN": TOKEN} and SECRET_NAMES == ("HF_TOKEN", "HF_ENDPOINT")
    assert options.mirror_root == tmp_path.resolve() and options.mirror_root.is_absolute()
    assert TOKEN not in repr(options) and TOKEN not in str(options)
    assert provision_options(tmp_path, {"HF_TOKEN": ""}).secrets == {}  # empty is unset
    assert provision_options(tmp_path, {}, dry_run=True) == ProvisionOptions(dry_run=True, mirror_root=tmp_path.resolve())


def test_provision_fans_out_over_the_transports_it_is_given() -> None:
    hosts, playbook = [make_host("ct200"), make_host("ct201")], load_playbook(DEMO)
    fakes = {h.name: FakeTransport(h.name) for h in hosts}
    shells = {name: FakeHostShell(t, next(h for h in hosts if h.name == name)) for name, t in fakes.items()}

    def refuse(_t: FakeTransport, _c: object) -> None:
        raise AuthenticationFailed("ct201", "Permission denied (publickey)")

    fakes["ct201"].on(lambda c: True, refuse)  # ct201 refuses our key; ct200 must not suffer for it
    reports = {r.host: r for r in provision(hosts, playbook, provision_options(DEMO.parent, {}), connect=lambda h: fakes[h.name])}
    assert reports["ct200"].status == "changed" and shells["ct200"].jobs
    assert reports["ct201"].status == "failed" and reports["ct201"].reason
    assert all(t.closed == 1 for t in fakes.values())


def test_the_fetch_takes_the_hub_token_and_a_mirrors_address_from_the_environment_and_nothing_else(tmp_path: Path) -> None:
    environ = {"HF_TOKEN": "hf_secret", "HF_ENDPOINT": "http://hub.mirror.internal:8080", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x"}
    options = provision_options(tmp_path, environ)
    assert options.secrets == {"HF_TOKEN": "hf_secret", "HF_ENDPOINT": "http://hub.mirror.internal:8080"}
    assert provision_options(tmp_path, {}).secrets == {}
