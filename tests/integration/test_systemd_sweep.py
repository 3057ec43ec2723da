"""fleet's systemd paths on a test host that runs systemd (tests/testfleet/systemd_host.py):
`fleet provision` installs the agent's unit, a sweep under `service_manager: systemd` runs its
servers as units, a server that dies is read from `systemctl show`, a reboot mid-sweep is resumed
by the agent's unit with every result exactly once, and `fleet fetch-logs` brings back the whole
`journalctl -u` output, from which fleet's classifier names the seed's failure.

One host per module (one boot); the tests run in file order and each starts from what the one
before left (provisioned host, then sweeps)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.fixes.quarantine import QuarantineStore
from fleet.host.diagnose.classify import diagnose_file, render_diagnoses
from fleet.inventory import Host, load_inventory
from fleet.layout import agent_dir
from fleet.plan import make_plan
from fleet.playbook import load_playbook
from fleet.provision.provision import ProvisionOptions, provision
from fleet.provision.units import render_agent_unit, server_unit_name
from fleet.sweep.controller import start_sweep
from tests.testfleet.systemd_host import SystemdTestFleet

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((REPO / "playbooks" / "qwen36-specdec.yaml").read_text())
DEMO = REPO / "playbooks" / "demo.yaml"
HOST = "sd200"
JOURNAL_PREFIX = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} \S+ [^\s\[]+\[\d+\]: ")


@pytest.fixture(scope="module")
def inventory(systemd_host: SystemdTestFleet, tmp_path_factory: pytest.TempPathFactory) -> list[Host]:
    # The seed campaign ran SGLang 0.5.12 (its failures are that release's); systemd runs the services.
    directory = tmp_path_factory.mktemp("systemd-hosts")
    written = systemd_host.write_inventory(directory, service_manager="systemd", engine={"sim_speed": 0.02, "release": "0.5.12"})
    return list(load_inventory(written))


def sh(fleet: SystemdTestFleet, command: str) -> str:
    done = fleet.exec(HOST, ["sh", "-c", command], timeout=60)
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout


def show(fleet: SystemdTestFleet, unit: str, *properties: str) -> dict[str, str]:
    out = sh(fleet, f"systemctl show -p {','.join(properties)} {unit}")
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def results(directory: Path) -> dict[str, list[dict[str, Any]]]:
    by_run: dict[str, list[dict[str, Any]]] = {}
    for path in directory.glob("*/runs/*.json"):
        result = json.loads(path.read_text())
        by_run.setdefault(result["run_id"], []).append(result)
    return by_run


def seed_000(tmp_path: Path) -> Path:
    """The seed's first failure: DFlash TP1 on a 96 GB GPU, mem 0.75, the seed's mamba settings and
    8 running requests -- SGLang 0.5.12 dies sizing its KV cache ("max_running_request is zero")."""
    server = {**SEED["server"], "max_running_requests": 8, "mamba_scheduler_strategy": "extra_buffer", "flags": {"mamba-full-memory-ratio": 0.5}}
    data = {
        **SEED, "name": "seed-000", "tp": [1], "methods": {"dflash": SEED["methods"]["dflash"]}, "server": server,
        "workloads": {"short": {"kind": "short", "prompts": ["fib"], "max_new_tokens": 64}},
        "limits": {"server_start_timeout_s": 120, "request_timeout_s": 60, "no_token_timeout_s": 20},
    }  # fmt: skip
    path = tmp_path / "seed-000.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_provision_installs_the_agent_unit_once(systemd_host: SystemdTestFleet, inventory: list[Host]) -> None:
    playbook = load_playbook(DEMO)
    (first,) = provision(inventory, playbook, ProvisionOptions())
    assert first.status == "changed", first
    assert "unit" in [c.action for c in first.changes]
    (second,) = provision(inventory, playbook, ProvisionOptions())
    assert second.status == "ok" and "unit" not in [c.action for c in second.changes], second.changes

    host = inventory[0]
    expected = render_agent_unit(work_dir=host.paths.work_dir, agent_dir=agent_dir(host), python=host.engine.python)
    installed = sh(systemd_host, "systemctl cat fleet-agent@.service")
    print(installed)  # the unit as installed, for the record
    assert installed == f"# {expected.path}\n{expected.text}"
    # systemd loads an instance of it (the template is what provision installs), and does not
    # start it at boot: a reboot wipes the staged models, so the controller re-stages, then starts it.
    instance = show(systemd_host, "fleet-agent@probe.service", "LoadState", "UnitFileState", "FragmentPath")
    assert instance == {"LoadState": "loaded", "UnitFileState": "static", "FragmentPath": expected.path}


def test_seed_failure_on_systemd_is_read_from_systemctl_and_diagnosed_from_the_fetched_journal(systemd_host: SystemdTestFleet, inventory: list[Host], tmp_path: Path) -> None:
    root = tmp_path / "results"
    outcome = start_sweep(seed_000(tmp_path), inventory, root, poll_interval_s=0.5, memory_check=False, quarantine=QuarantineStore(tmp_path / "q.json"))
    sweep_id = outcome.directory.name
    found = [r for rs in results(outcome.directory).values() for r in rs]
    failed = [r for r in found if r["status"] == "failed"]
    fixed = [r for r in found if r["status"] == "ok"]
    assert len(failed) == 1 and len(fixed) == 1, sorted(r["status"] for r in found)
    failure = failed[0]["failure"]
    assert failure["diagnosis"]["failure_class"] == "max_running_requests_zero"

    # The failed server's unit, as real systemd records it: SGLang's scheduler death takes the
    # launcher down with SIGKILL, and the unit says so (not "exit 137" of a shell wrapper).
    unit = server_unit_name(sweep_id, failed[0]["server_id"])
    state = show(systemd_host, unit, "LoadState", "ActiveState", "SubState", "Result", "ExecMainCode", "ExecMainStatus", "UnitFileState")
    assert state == {"LoadState": "loaded", "ActiveState": "failed", "SubState": "failed", "Result": "signal",
                     "ExecMainCode": "2", "ExecMainStatus": "9", "UnitFileState": "static"}  # fmt: skip
    assert failure["exit_code"] == -9
    print(sh(systemd_host, f"systemctl cat {unit}"))  # the server's unit as installed, for the record
    status = sh(systemd_host, f"PYTHONPATH=/var/lib/fleet/agent {inventory[0].engine.python} -m fleet.host.agent service status "
                              f"{unit[: -len('.service')]} --manager systemd")  # fmt: skip
    assert json.loads(status) == {"name": unit[: -len(".service")], "state": "exited", "pid": None, "exit_code": -9}

    env = {**os.environ, "FLEET_RESULTS_DIR": str(root), "COLUMNS": "200"}
    fetch = subprocess.run([sys.executable, "-m", "fleet", "fetch-logs", "--sweep", sweep_id, "--json"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr
    assert json.loads(fetch.stdout)[HOST]["journal_units"] == 3, fetch.stdout  # both servers and the agent
    journal = outcome.directory / HOST / "logs" / "journal"
    dump = journal / f"{unit}.log"
    text = dump.read_text()
    # Complete: every line the server wrote to its log file is in the journal, in order, whole. (The
    # fixed variant shares the label and so the log file; the failed server wrote first.)
    # journald keeps a line's text but not its trailing blanks (SGLang's mamba line ends in one).
    written = [line.rstrip() for line in (outcome.directory / HOST / "logs" / Path(failure["log_path"]).name).read_text().splitlines()]
    journaled = [JOURNAL_PREFIX.sub("", line) for line in text.splitlines() if JOURNAL_PREFIX.match(line) and " fleet-server[" in line]
    assert journaled == written[: len(journaled)] and len(journaled) > 20
    # The seed's dump kept 600 characters: the cause lies far beyond them.
    assert text.index("AssertionError: max_running_request is zero") > 600
    assert f"{unit}: Main process exited, code=killed, status=9/KILL" in text
    print(f"{dump.name}: {len(text.splitlines())} lines")

    diagnosis = diagnose_file(dump)
    # The seed's failure as `fleet diagnose` prints it, read from the journal fetch-logs brought back.
    print(render_diagnoses([diagnosis]))
    assert diagnosis.failure_class == "max_running_requests_zero"
    assert any("max_running_request is zero" in e.text for e in diagnosis.evidence)

    # After the sweep: nothing of it runs, nothing starts at boot, the units stay for their journal.
    active = sh(systemd_host, "systemctl list-units --state=active --plain --no-legend 'fleet-*'")
    assert "fleet-srv-" not in active and "fleet-agent@" not in active, active
    left = sh(systemd_host, f"ls /etc/systemd/system | grep -c '^fleet-srv-{sweep_id}-' || true")
    assert int(left) == 2


def test_reboot_mid_sweep_is_resumed_by_the_agent_unit_with_every_result_once(systemd_host: SystemdTestFleet, inventory: list[Host], tmp_path: Path) -> None:
    root = tmp_path / "results"
    done: dict[str, Any] = {}
    # The demo less DDTree: two servers, four runs -- enough for results before and after the reboot.
    demo = yaml.safe_load(DEMO.read_text())
    playbook = tmp_path / "demo-systemd.yaml"
    playbook.write_text(yaml.safe_dump({**demo, "name": "demo-systemd", "methods": {k: demo["methods"][k] for k in ("autoregressive", "dflash")}}))

    def sweep() -> None:
        try:
            done["outcome"] = start_sweep(playbook, inventory, root, poll_interval_s=0.5)
        except BaseException as exc:  # surfaced by the assertions below
            done["error"] = exc

    runner = threading.Thread(target=sweep, daemon=True)
    runner.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not done:
        listing = systemd_host.exec(HOST, ["sh", "-c", "ls /var/lib/fleet/sweeps/demo-systemd-*/runs/ 2>/dev/null | grep -c json || true"])
        if int(listing.stdout.strip() or 0) >= 1:
            break
        time.sleep(0.2)
    assert not done, f"the sweep ended before the reboot: {done}"
    boot_before = systemd_host[HOST].boot_id()
    systemd_host.reboot(HOST)
    runner.join(timeout=240)
    assert "outcome" in done, done
    outcome = done["outcome"]

    by_run = results(outcome.directory)
    expected = {r.id for _, r in make_plan(load_playbook(playbook), inventory).runs}
    assert set(by_run) == expected
    assert all(len(rs) == 1 for rs in by_run.values()), {k: len(v) for k, v in by_run.items() if len(v) > 1}
    status = outcome.statuses[HOST]
    print(f"reboot run: {len(by_run)} runs, {sum(len(v) for v in by_run.values())} results, statuses {status.counts}, reboots {status.reboots}")
    assert status.reboots == 1 and status.phase.value == "finished"
    assert systemd_host[HOST].boot_id() != boot_before
    assert len(by_run) == 4
    # The agent's unit ran in both boots: its journal has the boot before and this one.
    agent = f"fleet-agent@{outcome.directory.name}.service"
    boots = sh(systemd_host, f"journalctl -u {agent} -o export --output-fields=_BOOT_ID | grep -a '^_BOOT_ID=' | sort -u")
    assert len(boots.split()) == 2, boots
