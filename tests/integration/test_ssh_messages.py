"""On a real SSH test host: a wrong port, key or user makes `fleet facts` print one line, with
the cause in words and the host file field to check; the facts script only under --verbose
(issue 25: it printed 253 lines, the cause on the last one)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.test_bad_input_logins import fleet_cli

pytestmark = pytest.mark.testfleet


def test_connect_failures_are_one_line_each(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    good = yaml.safe_load((fleet.write_inventory(tmp_path / "good") / "ct200.yaml").read_text())
    wrong_key = tmp_path / "wrong_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
    cases = {
        "port": ({"port": 2222}, "connection refused", "`port`"),
        "key": ({"identity_file": str(wrong_key)}, "authentication failed", "`identity_file`"),
        "user": ({"user": "no-such-user"}, "authentication failed for user no-such-user", "`user`"),
    }
    for case, (changes, cause, field) in cases.items():
        hosts = tmp_path / case / "hosts"
        hosts.mkdir(parents=True)
        (hosts / "ct200.yaml").write_text(yaml.safe_dump({**good, **changes}))
        done = fleet_cli(["facts", "--hosts", "ct200"], hosts, tmp_path / case)
        lines = (done.stdout + done.stderr).splitlines()
        assert done.returncode == 1, (case, lines)
        assert len(lines) == 1, (case, lines)
        assert cause in lines[0] and field in lines[0] and str(hosts / "ct200.yaml") in lines[0], (case, lines)
    verbose = fleet_cli(["--verbose", "facts", "ct200"], tmp_path / "port" / "hosts", tmp_path / "port")
    assert "fleet_end" in verbose.stderr  # the facts script, in the debug log
