"""A command's start costs what it uses, and no more (issue 28): the one-shot commands on an SSH host
(`facts`, `status`, `fetch-logs`) reach it through the `ssh` client with neither paramiko nor the
local host's copier, the lease's code or the agent's log parser loaded, and `--help`,
`fetch-logs` and the commands that print JSON load no rich. Checked in a fresh interpreter per command, by the modules
loaded when it exits (tests/unit/test_cli_imports.py's probe); no timing here: the figures are in
benchmarks/results/peers.md (benchmarks/bench_peers.py).

The host's identity file does not exist, so its transport fails at once and for good, before any
connection (fleet.transport.openssh checks it first): the command has chosen its transport and
called it, and no network is touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from fleet.host.contract import AgentLimits, Shard, SweepDir
from fleet.inventory import Host
from fleet.layout import SweepFolder
from fleet.sweep.record import SweepRecord
from tests.shipped import REPO, shipped_hosts
from tests.unit.test_cli_imports import PROBE, SSH

SWEEP = "demo-20261203-000000-c0de"
# Loaded only by what a one-shot command on an SSH host does not do: run on the local host (its
# copier), take a host's lease (a sweep's start), parse a server's log or ask a server over HTTP
# (the agent), or build the result, progress and shard types where it reads no result (facts).
NOT_NEEDED = {
    "http.client",
    "fleet.transport.local",
    "fleet.transport.localcopy",
    "fleet.provision.lease",
    "fleet.provision.models",
    "fleet.host.engines.sglang.logparse",
}
CONTRACT_TYPES = {"fleet.host.contract.results", "fleet.host.contract.progress", "fleet.host.contract.shard"}
# The control: loaded only once the command called the host through `ssh`.
OPENSSH = "fleet.transport.openssh"


def far_host(tmp_path: Path) -> dict[str, object]:
    return {
        "name": "far",
        "address": "127.0.0.1",
        "identity_file": str(tmp_path / "no-such-key"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "gpus": {"count": 1, "model": "NVIDIA RTX PRO 6000 Blackwell Server Edition"},
        "paths": {"work_dir": "/var/lib/fleet", "model_cache": "/srv/models"},
        "engine": {"kind": "sim", "python": "python3"},
        "service_manager": "systemd",  # fetch-logs runs a command (the journal's dump) before its pull
    }


def run_probed(args: list[str], watched: set[str], tmp_path: Path) -> tuple[set[str], str]:
    """The watched modules (and top-level packages) the command loaded, and what it printed."""
    hosts = shipped_hosts(tmp_path)  # `local` among them
    (hosts / "far.yaml").write_text(yaml.safe_dump(far_host(tmp_path)))
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts), "FLEET_RESULTS_DIR": str(tmp_path / "results"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", PROBE, ",".join(sorted(watched)), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.startswith("LOADED=")]
    assert lines, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return set(yaml.safe_load(lines[-1].removeprefix("LOADED="))), done.stdout + done.stderr


def ssh_sweep(tmp_path: Path) -> None:
    """A sweep of the one SSH host, as the controller records it (sweep.json, the host's entry, its shard)."""
    directory = tmp_path / "results" / SWEEP
    (directory / "far").mkdir(parents=True)
    SweepFolder(directory).write_host(Host.model_validate(far_host(tmp_path)))
    SweepRecord(SWEEP, "demo", "0" * 64, ["far"]).save(directory)
    (directory / "far" / SweepDir.SHARD).write_text(Shard(SWEEP, "far", "boot", "systemd", AgentLimits(), []).to_json())


def test_help_and_facts_as_json_load_no_rich(tmp_path: Path) -> None:
    assert run_probed(["--help"], SSH | {"rich"}, tmp_path)[0] == set()
    found, said = run_probed(["facts", "local", "--json"], {"rich", "fleet.facts.models"}, tmp_path)
    assert found == {"fleet.facts.models"}, (found, said)  # the control: the facts were read


def test_facts_of_an_ssh_host_load_no_paramiko_nor_what_facts_do_not_use(tmp_path: Path) -> None:
    found, said = run_probed(["facts", "far", "--json"], SSH | NOT_NEEDED | CONTRACT_TYPES | {OPENSSH}, tmp_path)
    assert "no-such-key does not exist" in said, said  # the host was called, and failed before any connection
    assert found == {OPENSSH}, found


def test_status_and_fetch_logs_of_ssh_hosts_load_no_paramiko(tmp_path: Path) -> None:
    ssh_sweep(tmp_path)
    for command in (["status", SWEEP, "--json"], ["fetch-logs", "--sweep", SWEEP, "--json"], ["fetch-logs", "--sweep", SWEEP]):
        found, said = run_probed(command, SSH | NOT_NEEDED | {"rich", OPENSSH}, tmp_path)
        assert "no-such-key does not exist" in said, (command, said)
        assert found == {OPENSSH}, (command, found)
    # The control for rich: a table is printed with it.
    assert "rich" in run_probed(["status", SWEEP], {"rich"}, tmp_path)[0]
