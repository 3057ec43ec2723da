"""Each command imports only what it uses (issue 12): checked in a fresh interpreter per command,
by the modules loaded when it exits. No timing here: the figures are in benchmarks/bench_peers.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleet import config
from tests.shipped import REPO, shipped_hosts

# Prints, as the process exits, which of the watched top-level packages it loaded.
PROBE = """
import atexit, json, sys
watched = set(sys.argv[1].split(","))
atexit.register(lambda: print("LOADED=" + json.dumps(sorted({m.split(".")[0] for m in sys.modules} & watched)
                 + sorted(m for m in sys.modules if m in watched)), file=sys.stderr))
sys.argv = ["fleet", *sys.argv[2:]]
from fleet.cli import run
run()
"""

SSH = {"paramiko", "fabric", "invoke"}
HEAVY_HELP = {"markdown_it", "pygments", "pydantic", "yaml", "tenacity", "jinja2"}
PLANNING = {"fleet.plan", "fleet.playbook", "fleet.planning.schedule", "fleet.provision.provision", "fleet.host.engines.sim"}
# An engine's flag tables, argument resolution and memory planner: a host file's release and fork
# are checked against the engine's release table alone (fleet.host.engines.release_table).
ENGINES = {"fleet.host.engines.sglang.engine", "fleet.host.engines.vllm.engine", "fleet.host.engines.sglang.args"}


def loaded(args: list[str], watched: set[str], tmp_path: Path) -> set[str]:
    env = {**os.environ, "FLEET_HOSTS_DIR": str(shipped_hosts(tmp_path)), "FLEET_RESULTS_DIR": str(tmp_path / "results"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", PROBE, ",".join(sorted(watched)), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.startswith("LOADED=")]
    assert lines, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return set(json.loads(lines[-1].removeprefix("LOADED=")))


def test_help_loads_neither_ssh_nor_rich_markdown_nor_the_models(tmp_path: Path) -> None:
    assert loaded(["--help"], SSH | HEAVY_HELP | PLANNING, tmp_path) == set()


def test_facts_of_the_local_host_loads_no_ssh_library_nor_the_planner_nor_an_engine(tmp_path: Path) -> None:
    found = loaded(["facts", "local", "--json"], SSH | PLANNING | ENGINES | {"pydantic"}, tmp_path)
    assert found == {"pydantic"}, found  # the control: the probe does see what the command loads


def test_report_and_diagnose_load_no_ssh_library(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("nothing happened\n")
    assert loaded(["diagnose", str(tmp_path / "empty.log")], SSH, tmp_path) == set()


@pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False), reason="PyYAML built without libyaml")
def test_host_files_are_read_with_libyaml_and_keep_their_checks(tmp_path: Path) -> None:
    assert issubclass(config._StrictLoader, yaml.CSafeLoader)
    twice = tmp_path / "twice.yaml"
    twice.write_text("a: 1\nb: 2\na: 3\n")
    with pytest.raises(Exception, match=r"key 'a' given twice \(first on line 1\)"):
        config.read_yaml(twice)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x]\n" + "".join(f"k{i}: *a\n" for i in range(config.MAX_ALIASES + 1)))
    with pytest.raises(Exception, match="aliases"):
        config.read_yaml(bomb)
    fine = tmp_path / "fine.yaml"
    fine.write_text("a: &a [x]\n" + "".join(f"k{i}: *a\n" for i in range(config.MAX_ALIASES)))
    assert config.read_yaml(fine)["k0"] == ["x"]


def test_fetch_logs_and_status_read_the_sweep_without_the_controller(tmp_path: Path) -> None:
    """They only read a sweep's record (fleet.sweep.record): the planner, provisioning, the fixes
    and the simulator cost a nothing-changed fetch most of its time (issue 12's profile); the
    playbook model is read only by a resume (LoadedSweep.playbook)."""
    watched = PLANNING | {"fleet.sweep.controller", "fleet.fixes.autofix", "fleet.sweep.record", "jinja2"}
    # A sweep named but never run: each fails after choosing its backend (`fleet.backend`, which
    # imports every backend's module to ask it) and reading the sweep's record, so after its imports.
    for command in (["fetch-logs", "--sweep", "never-ran"], ["status", "never-ran"]):
        found = loaded(command, watched, tmp_path)
        assert found == {"fleet.sweep.record"}, (command, found)  # no jinja2 either: units are named, not rendered


# The agent's `service status` runs on the GPU host in every poll of a sweep (a Python start each
# time): it loads the service code, not the runner that works through a shard nor the log classifier.
AGENT_PROBE = """
import atexit, json, sys
atexit.register(lambda: print("LOADED=" + json.dumps(sorted(m for m in sys.modules if m.startswith("fleet."))), file=sys.stderr))
sys.argv = ["fleet.host.agent", *sys.argv[1:]]
from fleet.host.agent.__main__ import main
sys.exit(main())
"""


def test_the_agents_service_status_asked_in_every_poll_loads_neither_the_runner_nor_the_classifier(tmp_path: Path) -> None:
    argv = ["service", "status", "fleet-agent-x", "--manager", "process", "--state-dir", str(tmp_path)]
    done = subprocess.run([sys.executable, "-c", AGENT_PROBE, *argv], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["state"] == "absent"
    modules = set(json.loads(next(line for line in done.stderr.splitlines() if line.startswith("LOADED=")).removeprefix("LOADED=")))
    assert "fleet.host.agent.services" in modules  # the control: the probe sees what the command loads
    heavy = {m for m in modules if m.startswith(("fleet.host.agent.runner", "fleet.host.agent.drive", "fleet.host.diagnose", "fleet.host.engines"))}
    assert heavy == set(), heavy
