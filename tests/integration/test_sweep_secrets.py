"""`fleet sweep` hands HF_TOKEN from the controller's environment to a real SSH host's hub fetch,
in the fetch's environment only: not in any argv, file or log, on the host or the controller.

The host is a test host (root only, tests/testfleet) whose engine is `sglang`, so its models come
from the hub. Its engine interpreter is a wrapper around this machine's Python, with a fake
`torch` (CUDA 13.0 with sm_120 kernels, what the fake RTX PRO 6000 GPUs need) and a fake
`huggingface_hub` first on its path: the hub fetch serves the files the test put on the host,
and records what it saw -- whether HF_TOKEN was set, a digest of it (never the token), and
whether the token was on its own or its parent's command line. `sglang.launch_server` is played
by fleet's simulator, which speaks the 0.5.23 command line.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleet.host.modelcard import hf_files_from_card, load_model_card
from fleet.playbook import load_playbook
from fleet.provision.provision import models_of
from tests.testfleet.hosts import _python_dirs_hidden_on_hosts

pytestmark = pytest.mark.testfleet


def host_files_holding(fleet, host: str, text: str) -> list[str]:
    """Files on the host that hold `text`, among all it could have written: the machine's
    interpreter and this checkout, shown read-only inside the host's /root or /tmp, are left out
    (grepping a whole Python install outlived a 30 s call on a loaded machine; nothing writes there)."""
    read_only = [arg for d in _python_dirs_hidden_on_hosts() for arg in ("-path", d, "-prune", "-o")]
    files = ["find", "/var/lib/fleet", "/srv/models", "/root", "/dev/shm", "/tmp", *read_only, "-type", "f", "-print0"]
    found = fleet.exec(host, ["sh", "-c", '"$@" | xargs -0 -r grep -lF -- "$0"', text, *files], timeout=120)
    assert found.returncode in (0, 123), found.stderr  # 123: some grep found nothing
    return sorted(found.stdout.split())


REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
# Made afresh each run, so that no file (this one included: CI's checkout lives under the test
# host's /tmp) holds it unless fleet wrote it there.
TOKEN = "hf_integration_" + secrets.token_hex(12)
FAKE = "/root/fake-engine"
SEEN = f"{FAKE}/seen.jsonl"

WRAPPER = """#!/bin/sh
# The engine's interpreter on this test host: the test machine's Python with fake torch and hub.
export PYTHONPATH="{fake}/site${{PYTHONPATH:+:$PYTHONPATH}}"
if [ "$1" = "-m" ] && [ "$2" = "sglang.launch_server" ]; then
  shift 2
  export PYTHONPATH="/var/lib/fleet/agent:$PYTHONPATH" FLEET_SIM_SPEED=0.02 FLEET_SIM_SGLANG_VERSION=0.5.23
  exec {python} -m fleet.host.engines.sim "$@"
fi
exec {python} "$@"
"""

FAKE_TORCH = """import types
__version__ = "2.11.0+cu130"
version = types.SimpleNamespace(cuda="13.0")
_C = types.SimpleNamespace(_cuda_getArchFlags=lambda: "sm_90 sm_100 sm_120")
"""

FAKE_HUB = '''"""A stand-in for huggingface_hub on a test host: files from {fake}/hub/<repo>/, and a record
of what each call saw. The token itself is never written: only whether it was set, its digest,
and whether it showed on a command line."""
import hashlib, json, os, shutil, sys, types

HUB = "{fake}/hub"


def _record(what, repo):
    token = os.environ.get("HF_TOKEN", "")
    def cmdline(pid):
        with open("/proc/%s/cmdline" % pid, "rb") as handle:
            return handle.read().decode(errors="replace")
    entry = {{
        "what": what, "repo": repo, "token_set": bool(token),
        "token_sha256": hashlib.sha256(token.encode()).hexdigest() if token else None,
        "token_on_command_line": bool(token) and (token in cmdline("self") or token in cmdline(os.getppid())),
    }}
    with open("{seen}", "a") as handle:
        handle.write(json.dumps(entry) + "\\n")


def _source(repo):
    return os.path.join(HUB, repo.replace("/", "--"))


class HfApi:
    def repo_info(self, repo, repo_type="model", revision=None, files_metadata=False):
        _record("repo_info", repo)
        source = _source(repo)
        names = sorted(os.listdir(source))
        siblings = [types.SimpleNamespace(rfilename=n, size=os.path.getsize(os.path.join(source, n))) for n in names]
        return types.SimpleNamespace(sha=hashlib.sha1(repo.encode()).hexdigest(), siblings=siblings)


def snapshot_download(repo_id, repo_type="model", revision=None, local_dir=None):
    _record("snapshot_download", repo_id)
    os.makedirs(local_dir, exist_ok=True)
    for name in os.listdir(_source(repo_id)):
        shutil.copyfile(os.path.join(_source(repo_id), name), os.path.join(local_dir, name))
    return local_dir
'''


# The errors fleet's fetch names (huggingface_hub.utils), as the stand-in's own.
FAKE_HUB_ERRORS = """class HfHubHTTPError(Exception):
    response = None


class RepositoryNotFoundError(HfHubHTTPError):
    pass


class GatedRepoError(RepositoryNotFoundError):
    pass


class RevisionNotFoundError(HfHubHTTPError):
    pass
"""


def hub_playbook(tmp_path: Path) -> Path:
    """The demo without model cards: a card's checkpoint size (55 GiB) would not pass the test
    host's small tmpfs, and nothing else needs it here (the hub serves the card's config)."""
    data = yaml.safe_load(DEMO.read_text())
    for model in [data["model"], *data["drafts"].values()]:
        del model["card"]
    path = tmp_path / "hub-demo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def install_fake_engine(host) -> str:
    """The wrapper, fake torch and fake hub on the host's own /root; the hub's files per repo."""
    base = host.persistent_path(FAKE)
    (base / "site" / "torch").mkdir(parents=True)
    (base / "site" / "torch" / "__init__.py").write_text(FAKE_TORCH)
    (base / "site" / "huggingface_hub").mkdir()
    (base / "site" / "huggingface_hub" / "__init__.py").write_text(FAKE_HUB.format(fake=FAKE, seen=SEEN))
    (base / "site" / "huggingface_hub" / "utils.py").write_text(FAKE_HUB_ERRORS)
    for model in models_of(load_playbook(DEMO)):  # the files come from the demo's cards
        assert model.repo and model.card
        repo = base / "hub" / model.repo.replace("/", "--")
        repo.mkdir(parents=True)
        for name, content in hf_files_from_card(load_model_card(model.card)).items():
            (repo / name).write_text(json.dumps(content, indent=1))
        (repo / "model.safetensors").write_bytes(os.urandom(1 << 16))
    wrapper = base / "python"
    wrapper.write_text(WRAPPER.format(fake=FAKE, python=sys.executable))
    wrapper.chmod(0o755)
    return f"{FAKE}/python"


def files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_fleet_sweep_gives_hf_token_to_the_hub_fetch_in_its_environment_only(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    python = install_fake_engine(host)
    playbook = hub_playbook(tmp_path)
    hosts_dir = fleet.write_inventory(tmp_path / "hosts", engine={"kind": "sglang", "python": python, "sim_speed": None})
    results = tmp_path / "results"
    env = {
        **os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(results),
        "XDG_CACHE_HOME": str(tmp_path / "cache"), "HF_TOKEN": TOKEN, "COLUMNS": "200",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "fleet", "sweep", "-p", str(playbook), "--hosts", "ct200", "--poll", "0.5"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=540,
    )
    output = done.stdout + done.stderr
    assert TOKEN.encode() not in output  # the controller's own output (its log)

    # The fetch saw the token in its environment, twice (target and draft), never on a command line.
    seen = [json.loads(line) for line in fleet.exec("ct200", ["cat", SEEN]).stdout.splitlines()]
    fetched = {entry["repo"] for entry in seen if entry["what"] == "snapshot_download"}
    assert fetched == {m.repo for m in models_of(load_playbook(DEMO))}, output.decode(errors="replace")[-3000:]
    assert all(entry["token_set"] for entry in seen)
    assert {entry["token_sha256"] for entry in seen} == {hashlib.sha256(TOKEN.encode()).hexdigest()}
    assert not any(entry["token_on_command_line"] for entry in seen)

    # The sweep itself went through: every run has its result back on the controller.
    sweep_dir = next(p for p in results.iterdir() if p.is_dir())
    summary = json.loads((sweep_dir / "summary.json").read_text())
    assert summary["hosts"]["ct200"]["phase"] == "finished", output.decode(errors="replace")[-3000:]
    assert summary["results"] == summary["by_status"].get("ok"), summary
    assert (sweep_dir / "ct200" / "agent.log").is_file()

    # Nowhere else: not in the results (records, shards, agent and server logs), the controller's
    # facts cache, nor any file on the host (persistent dirs, tmpfs, the staged env files).
    assert files_holding(tmp_path, TOKEN.encode()) == []
    assert host_files_holding(fleet, "ct200", TOKEN) == []
    fleet.exec("ct200", ["sh", "-c", f"echo {TOKEN} > /root/planted"])  # the search itself finds what is there
    assert host_files_holding(fleet, "ct200", TOKEN) == ["/root/planted"]
    leftovers = fleet.exec("ct200", ["sh", "-c", "ls -a /dev/shm /tmp | grep fleet-env || true"]).stdout
    assert leftovers == ""  # the transport's env files are gone
