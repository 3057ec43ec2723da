"""Bad input never reaches a host, counted where it would show: the test host's own sshd log.

A handful of the bad-input suite's cases (tests/unit/test_bad_input.py) run as `python -m fleet
sweep` against a real SSH test host; the host's sshd logs nothing new for any of them. The control
(`fleet hosts --check` on the same inventory) shows that a connection does appear in that log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.unit.test_bad_input import PLAYBOOK, mutated

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]

# (case, file, key path, value, field named in the message)
CASES = [
    ("host-user-option", "host", "user", "-oProxyCommand=touch /tmp/p", "user"),
    ("host-work-dir-substitution", "host", "paths.work_dir", "/var/lib/fleet/$(touch /tmp/p)", "paths.work_dir"),
    ("playbook-repo-dotdot", "playbook", "model.repo", "..", "model.repo"),
    ("playbook-unknown-flag", "playbook", "server.flags", {"no-such-flag": 1}, "server.flags.no-such-flag"),
    ("playbook-unknown-prompt", "playbook", "workloads.short.prompts", ["haiku"], "prompts[0]"),
    # Issue 29, item 11's classes: lengths bounded, with the field named.
    ("playbook-name-300-characters", "playbook", "name", "n" * 300, "name"),
    ("host-address-10000-characters", "host", "address", "a" * 10_000, "address"),
]
# Issue 29, item 11's classes that are not a field of a good file: (case, extra arguments, what
# the message names). The alias bomb is the playbook itself (72 aliases, 9**9 leaves).
ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"] + [f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]" for prev, name in zip("abcdefgh", "bcdefghi")]) + "\n"
CLI_CASES = [
    ("poll-nan", ["--poll", "nan"], "--poll"),
    ("poll-zero", ["--poll", "0"], "--poll"),
    ("empty-hosts", ["--hosts", ""], "--hosts"),
    ("alias-bomb", ["--playbook-is-the-bomb"], "alias"),
]


def sshd_log_lines(fleet, name: str) -> int:
    log = fleet[name].base / "log" / "sshd.log"
    return len(log.read_text(errors="replace").splitlines()) if log.exists() else 0


def settled_sshd_log_lines(fleet, name: str, quiet_s: float = 1.5, timeout: float = 20.0) -> int:
    """The log's length once nothing has been added to it for `quiet_s`: the test fleet's own
    readiness probe (a TCP connect) is logged by sshd a moment after the host counts as up, and
    under load that came after a case's first look (1 line, then 3)."""
    deadline = time.monotonic() + timeout
    lines, since = sshd_log_lines(fleet, name), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.1)
        now = sshd_log_lines(fleet, name)
        if now != lines:
            lines, since = now, time.monotonic()
    return lines


def fleet_cli(args: list[str], hosts_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(tmp_path / "results"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "400"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "fleet", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_bad_input_makes_no_ssh_login_on_the_host(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    good = tmp_path / "good"
    hosts_dir = fleet.write_inventory(good / "hosts")
    host_data = yaml.safe_load((hosts_dir / "ct200.yaml").read_text())
    settled_sshd_log_lines(fleet, "ct200")
    for case, which, path, value, field in CASES:
        work = tmp_path / case
        (work / "hosts").mkdir(parents=True)
        host_file, book = work / "hosts" / "ct200.yaml", work / "book.yaml"
        host_file.write_text(yaml.safe_dump(mutated(host_data, path, value) if which == "host" else host_data))
        book.write_text(yaml.safe_dump(mutated(PLAYBOOK, path, value) if which == "playbook" else PLAYBOOK))
        before = sshd_log_lines(fleet, "ct200")
        done = fleet_cli(["sweep", "-p", str(book), "--hosts", "ct200"], work / "hosts", work)
        output = done.stdout + done.stderr
        assert done.returncode == 2, (case, output)
        assert str(host_file if which == "host" else book) in output and field in output and "expected" in output, (case, output)
        assert sshd_log_lines(fleet, "ct200") == before, (case, "the host's sshd saw a connection")
        assert not (work / "results").exists() or not any((work / "results").iterdir()), case

    for case, extra, named in CLI_CASES:
        work = tmp_path / case
        work.mkdir()
        book = work / "book.yaml"
        book.write_text(ALIAS_BOMB if case == "alias-bomb" else yaml.safe_dump(PLAYBOOK))
        args = ["sweep", "-p", str(book)] + (["--hosts", "ct200"] if "--hosts" not in extra else []) + [a for a in extra if a != "--playbook-is-the-bomb"]
        before = sshd_log_lines(fleet, "ct200")
        done = fleet_cli(args, hosts_dir, work)
        output = done.stdout + done.stderr
        assert done.returncode == 2 and "Traceback" not in output and named in output and "expected" in output, (case, output)
        assert sshd_log_lines(fleet, "ct200") == before, (case, "the host's sshd saw a connection")

    # The control: a command that does connect shows in the same log.
    before = sshd_log_lines(fleet, "ct200")
    assert fleet_cli(["hosts", "--check"], hosts_dir, good).returncode == 0
    assert sshd_log_lines(fleet, "ct200") > before, "the sshd log does not show connections: this test could not see one"
