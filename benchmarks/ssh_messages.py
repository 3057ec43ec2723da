"""How many lines fleet prints when it cannot reach a host, per case (issue 25, item 2).

Builds one real SSH test host (tests/testfleet: needs root) and runs `python -m fleet` from the
checkout given (default: this one) against host files that are wrong in one way each: an
unreachable address (the host's link down: connects time out), a wrong port (refused), a wrong
key, a wrong user; `fleet provision` on the unreachable host; a sweep with one host whose key is
wrong. Prints one line per case: its exit code, its line count (stdout + stderr) and its last
line; `--show CASE` prints that case's whole output.

    sudo python benchmarks/ssh_messages.py [--checkout DIR] [--only CASE,...] [--show CASE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.testfleet.hosts import start_test_fleet  # noqa: E402

PLAYBOOK = REPO / "playbooks" / "demo.yaml"


def write_host(directory: Path, base: dict, **changes: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    entry = {**base, **changes}
    (directory / f"{entry['name']}.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    return directory


def fleet(checkout: Path, args: list[str], hosts_dir: Path, work: Path, timeout: float = 600) -> tuple[int, str, float]:
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(work / "results"),
           "XDG_CACHE_HOME": str(work / "cache"), "COLUMNS": "120", "PYTHONPATH": str(checkout)}  # fmt: skip
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fleet", *args], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkout", type=Path, default=REPO)
    parser.add_argument("--only", default="")
    parser.add_argument("--show", default="")
    args = parser.parse_args()
    only = {c for c in args.only.split(",") if c}
    with start_test_fleet(["ct200", "ct201"]) as test_fleet, tempfile.TemporaryDirectory(prefix="fleet-sshmsg-") as tmp:
        root = Path(tmp)
        good = test_fleet.write_inventory(root / "good", engine={"sim_speed": 0.02})
        base = yaml.safe_load((good / "ct200.yaml").read_text())
        other = yaml.safe_load((good / "ct201.yaml").read_text())
        wrong_key = root / "wrong_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
        cases = {
            "facts-unreachable": (["facts", "ct200"], {}, "link_down"),
            "facts-wrong-port": (["facts", "ct200"], {"port": 2222}, None),
            "facts-wrong-key": (["facts", "ct200"], {"identity_file": str(wrong_key)}, None),
            "facts-wrong-user": (["facts", "ct200"], {"user": "no-such-user"}, None),
            "provision-unreachable": (["provision", "ct200", "-p", str(PLAYBOOK)], {}, "link_down"),
            "sweep-one-wrong-key": (["sweep", "-p", str(PLAYBOOK), "--hosts", "ct200,ct201"], {"identity_file": str(wrong_key)}, None),
        }
        for name, (argv, changes, fault) in cases.items():
            if only and name not in only:
                continue
            hosts_dir = write_host(root / name / "hosts", base, **changes)
            write_host(hosts_dir, other)
            if fault == "link_down":
                test_fleet.link_down("ct200")
            try:
                code, output, seconds = fleet(args.checkout, argv, hosts_dir, root / name)
            finally:
                if fault == "link_down":
                    test_fleet.link_up("ct200")
            lines = output.splitlines()
            last = lines[-1] if lines else ""
            print(f"{name}: exit {code}, {len(lines)} lines, {seconds:.0f}s; last: {last[:160]}", flush=True)
            if name == args.show or args.show == "all":
                print("\n".join("    | " + line for line in lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
