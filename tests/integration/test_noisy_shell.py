"""A host whose shell talks: an `echo` in the test user's ~/.bashrc (as on many shared machines)
prints a banner on stdout, and a quota notice on stderr, around every command sshd runs.

Before the framing of fleet.transport.framing, such a host failed `fleet provision` with an
empty reason (a marker file read back with the banner in front of it), kept a lease that refused
the next `fleet provision`, and the staging of a command's environment failed and left
`/dev/shm/.fleet-env.*` holding `export HF_TOKEN=...` on the host.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.transport import SSHTarget, SSHTransport
from tests.integration.test_sweep_secrets import host_files_holding
from tests.testfleet import TestFleet, start_test_fleet, unavailable_reason

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
BANNER = "Welcome to the shared GPU box -- please be nice"
# Made afresh each run, so that no file holds it unless fleet wrote it there.
TOKEN = "hf_noisy_" + secrets.token_hex(12)
BASHRC = f"echo '{BANNER}'\necho 'quota: 91% of /root used' >&2\n"


@pytest.fixture(scope="module")
def noisy() -> Iterator[TestFleet]:
    """ct200, its shell talking on both streams before every command."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with start_test_fleet(["ct200"]) as fleet:
        fleet["ct200"].persistent_path("/root/.bashrc").write_text(BASHRC)
        # The control: the host's shell does talk, as ssh shows it.
        seen = subprocess.run(fleet["ct200"].ssh_argv("echo own output"), capture_output=True, text=True, timeout=30)
        assert seen.stdout == f"{BANNER}\nown output\n" and "quota" in seen.stderr, seen
        yield fleet


def transport_of(fleet: TestFleet) -> SSHTransport:
    host = fleet["ct200"]
    target = SSHTarget(address=host.address, port=host.port, user=host.user, identity_file=host.identity_file, known_hosts=host.known_hosts, connect_timeout=5)
    return SSHTransport("ct200", target)


def test_commands_files_and_secrets_pass_through_a_talking_shell(noisy: TestFleet, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    t = transport_of(noisy)
    try:
        with caplog.at_level(logging.WARNING, logger="fleet.transport"):
            result = t.run("echo out; echo err >&2; exit 3", timeout=30)
            assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
            assert t.run(["cat"], stdin=b"piped\x00bytes", timeout=30).stdout == "piped\x00bytes"
            # A query (the sweep's poll): its long-lived shell's banner is skipped too, every time.
            for _ in range(2):
                asked = t.query("echo out; echo err >&2; exit 3", timeout=30)
                assert (asked.stdout, asked.stderr, asked.exit_code) == ("out\n", "", 3)

            # A file there and back, byte for byte (a `get` is a `cat` of the file on stdout).
            data = os.urandom(300_000) + b"\n@@fleet:\n"
            t.put_bytes(data, "/root/blob", timeout=30)
            assert noisy.exec("ct200", ["sha256sum", "/root/blob"]).stdout.split()[0] == hashlib.sha256(data).hexdigest()
            t.get("/root/blob", tmp_path / "blob", timeout=30)
            assert (tmp_path / "blob").read_bytes() == data

            # The environment of a command: it arrives, and is left in no file.
            secret = t.run('printf %s "$HF_TOKEN"', env={"HF_TOKEN": TOKEN}, timeout=30)
            assert (secret.stdout, secret.exit_code) == (TOKEN, 0), secret
            with_stdin = t.run('printf "%s|" "$HF_TOKEN"; cat', env={"HF_TOKEN": TOKEN}, stdin=b"own stdin", timeout=30)
            assert with_stdin.stdout == f"{TOKEN}|own stdin"
    finally:
        t.close()
    # Where a command's environment could be staged: the host's own writable places (a `find /`
    # walks the machine's root, shown inside the host, and outlived 30 s beside a CPU hog).
    leftovers = noisy.exec("ct200", ["sh", "-c", "find /var/lib/fleet /root /dev/shm /tmp -xdev -name '.fleet-env.*' 2>/dev/null; ls -A /dev/shm /tmp"], timeout=120).stdout
    assert "fleet-env" not in leftovers
    assert host_files_holding(noisy, "ct200", TOKEN) == []
    assert TOKEN not in caplog.text

    # Said once for the host, naming where the banner comes from.
    warnings = [r.getMessage() for r in caplog.records if "shell startup file" in r.getMessage()]
    assert len(warnings) == 1 and BANNER in warnings[0] and "~/.bashrc" in warnings[0], caplog.text


def test_rsync_goes_through_a_talking_shell_by_the_relay(noisy: TestFleet, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """rsync speaks its protocol on the shell's stdout: a banner there made it fail ("protocol
    version mismatch"). fleet retries it once through its relay (fleet/transport/rshrelay.py),
    which drops what comes before the remote side's marker, and keeps using it for the host."""
    (tmp_path / "tree").mkdir()
    # Megabytes: the first relay (0f5f0bf) died on a full, non-blocking stdout once rsync read
    # slower than ssh delivered, about 1 pull in 3 of 300 kB (rsync exit 12).
    files = {"big": os.urandom(8 << 20), "mid": os.urandom(300_000), "empty": b"", "one": b"\n"}
    for name, data in files.items():
        (tmp_path / "tree" / name).write_bytes(data)
    t = transport_of(noisy)
    try:
        with caplog.at_level(logging.WARNING, logger="fleet.transport"):
            t.rsync_push(tmp_path / "tree", "/root/tree", timeout=60).check()
            for attempt in range(3):
                t.rsync_pull("/root/tree/", tmp_path / f"back{attempt}", timeout=60).check()
    finally:
        t.close()
    sums = noisy.exec("ct200", ["sh", "-c", "cd /root/tree && sha256sum big mid empty one"]).stdout.split()
    assert dict(zip(sums[1::2], sums[0::2])) == {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    for attempt in range(3):
        assert {name: (tmp_path / f"back{attempt}" / name).read_bytes() for name in files} == files, attempt
    relayed = [r.getMessage() for r in caplog.records if "goes through fleet's relay from now on" in r.getMessage()]
    assert len(relayed) == 1 and "~/.bashrc" in relayed[0], caplog.text  # found once, then used


def fleet_cli(args: list[str], hosts_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(tmp_path / "results"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "HF_TOKEN": TOKEN, "COLUMNS": "400"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "fleet", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_facts_and_provision_succeed_and_leave_no_lease(noisy: TestFleet, tmp_path: Path) -> None:
    hosts_dir = noisy.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.01})
    facts = fleet_cli(["facts", "ct200", "--json"], hosts_dir, tmp_path)
    assert facts.returncode == 0, facts.stdout + facts.stderr
    gathered = json.loads(facts.stdout)["facts"]["ct200"]
    assert gathered["problems"] == {} and len(gathered["gpus"]) == 8 and gathered["boot_id"] == noisy["ct200"].boot_id()

    for attempt in ("first", "again"):  # the second is not refused by a lease the first left behind
        done = fleet_cli(["provision", "ct200", "-p", str(DEMO), "--json"], hosts_dir, tmp_path)
        output = done.stdout + done.stderr
        assert done.returncode == 0, (attempt, output)
        [report] = json.loads(done.stdout)["hosts"]
        assert report["status"] == ("changed" if attempt == "first" else "ok"), (attempt, report)
        assert noisy.exec("ct200", ["ls", "-A", "/var/lib/fleet"]).stdout.split().count("lease.json") == 0, attempt
        assert "~/.bashrc" in done.stderr and BANNER in done.stderr  # the warning, on the controller's stderr
        assert TOKEN not in output
    assert "fleet-env" not in noisy.exec("ct200", ["ls", "-A", "/dev/shm", "/tmp"]).stdout


def test_a_sweep_on_a_talking_host_finishes_and_leaves_no_lease(noisy: TestFleet, tmp_path: Path) -> None:
    """Every call fleet makes survives the banner: commands framed, rsync through the relay (the
    sweep stopped at shipping the agent before). Each run has its result; the lease is released."""
    hosts_dir = noisy.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.01})
    done = fleet_cli(["sweep", "-p", str(DEMO), "--hosts", "ct200", "--json"], hosts_dir, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["type"] == "summary" and summary["state"] == "finished" and summary["by_status"] == {"ok": 6}, summary
    assert "lease.json" not in noisy.exec("ct200", ["ls", "-A", "/var/lib/fleet"]).stdout.split()
    assert TOKEN not in done.stdout + done.stderr
