"""Issue 21's lossless check and energy figures on a real SSH test host, through `start_sweep`:
the host's sim carries a fault that silently corrupts DDTree b15's tokens from output position 2
(the sim's `corrupt_outputs`: same speed, same acceptance, no log line). The check catches it --
the run fails `not_lossless` with the first diverging position per greedy prompt, in the result
and in the report, and the configuration is quarantined like an illegal instruction -- while the
healthy DFlash passes and is measured. Every measured run carries its energy from the test host's
fake nvidia-smi (455 W busy), the report shows tokens per joule and, from the host file's price,
$ per million tokens; a price that is not a positive number is refused naming file and field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.fixes.quarantine import QuarantineStore
from fleet.inventory import load_inventory
from fleet.report import load_sweep, render
from fleet.report.model import build_report
from fleet.sweep.controller import start_sweep

pytestmark = pytest.mark.testfleet

REPO = Path(__file__).resolve().parents[2]
PRICE = 2.5  # $ per GPU-hour


def test_a_corrupting_configuration_is_caught_quarantined_and_reported_with_energy(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    faults = fleet["ct200"].persistent_path("/var/lib/fleet/sim-faults.json")
    faults.parent.mkdir(parents=True, exist_ok=True)
    faults.write_text(json.dumps({"corrupt_outputs": [{"algorithm": "DDTREE", "budget": 15, "from_token": 2}]}))
    hosts = list(load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"sim_speed": 0.02}, usd_per_gpu_hour=PRICE)))
    data = yaml.safe_load((REPO / "playbooks" / "demo.yaml").read_text())
    data.update(name="lossless", workloads={"short": {"kind": "short", "prompts": ["fib", "json"], "max_new_tokens": 64}}, repeats=2)
    playbook = tmp_path / "lossless.yaml"
    playbook.write_text(yaml.safe_dump(data))
    store = QuarantineStore(tmp_path / "quarantine.json")

    outcome = start_sweep(playbook, hosts, tmp_path / "results", poll_interval_s=0.5, quarantine=store)
    found = {json.loads(p.read_text())["label"]: json.loads(p.read_text()) for p in outcome.directory.glob("*/runs/*.json")}
    assert sorted(found) == ["tp1-autoregressive/short", "tp1-ddtree-b15/short", "tp1-dflash/short"], sorted(found)

    bad = found["tp1-ddtree-b15/short"]
    assert bad["status"] == "failed" and bad["failure"]["class"] == "not_lossless", bad["failure"]
    assert bad["lossless"]["check"]["first_divergence"] == [2, 2, 2, 2] and bad["figures"]["output_tok_s"] is None
    assert "first diverging token per greedy prompt: prose 2, code 2, arithmetic 2, json 2" in bad["failure"]["evidence"][0]
    (entry,) = store.list()
    assert str(entry.key).endswith("/DDTREE/b15") and entry.reason.startswith("not_lossless: ")
    assert [f.action for f in outcome.fixes] == ["quarantined"]

    dflash = found["tp1-dflash/short"]
    assert dflash["status"] == "ok" and dflash["lossless"]["check"]["verdict"] == "pass"
    assert dflash["lossless"]["check"]["first_divergence"] == [None] * 4
    reference = found["tp1-autoregressive/short"]
    assert reference["status"] == "ok" and reference["lossless"]["role"] == "reference"
    for result in (reference, dflash):
        energy = result["figures"]["energy"]
        assert energy["unmeasured"] is None and energy["mean_power_w"] == pytest.approx(455.0, rel=0.02)
        assert energy["tokens_per_joule"] == pytest.approx(result["figures"]["output_tokens"] / energy["joules"])

    report = build_report([load_sweep(outcome.directory)])
    markdown = render(report, "md")
    assert "tok/J [95 %]" in markdown and "$/M tok" in markdown
    dflash_cell = next(c for c in report.cells if c.key.variant == "dflash")
    assert dflash_cell.tokens_per_joule is not None and dflash_cell.lossless == "pass"
    tok_s = dflash_cell.tok_s
    assert tok_s is not None and dflash_cell.usd_per_million_tokens == pytest.approx(PRICE / 3600 / tok_s.mean * 1e6)
    failures = markdown.split("## Failures")[1].split("## Skipped")[0]
    assert "tp1-ddtree-b15/short" in failures and "not_lossless" in failures and "prose 2" in failures
    assert not any(c.key.variant == "ddtree-b15" and c.tok_s is not None for c in report.cells)  # never a speed-up
    csv = render(report, "csv")
    assert "tokens_per_joule" in csv.splitlines()[0] and "usd_per_million_tokens" in csv.splitlines()[0]


def test_a_price_that_is_not_a_positive_number_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    for bad in ("0", "-2", "cheap", "'3.5'", ".inf", "true"):
        (tmp_path / "ct9.yaml").write_text(f"name: ct9\ntransport: local\nusd_per_gpu_hour: {bad}\n")
        with pytest.raises(ConfigError) as caught:
            load_inventory(tmp_path)
        assert "ct9.yaml" in str(caught.value) and "usd_per_gpu_hour" in str(caught.value), (bad, str(caught.value))
        done = subprocess.run([sys.executable, "-m", "fleet", "hosts"], cwd=REPO, env={**os.environ, "FLEET_HOSTS_DIR": str(tmp_path)}, capture_output=True, text=True)
        assert done.returncode == 2 and "ct9.yaml: usd_per_gpu_hour: expected" in done.stderr, (bad, done.stderr)
    (tmp_path / "ct9.yaml").write_text("name: ct9\ntransport: local\nusd_per_gpu_hour: 3.25\n")
    (host,) = load_inventory(tmp_path)
    assert host.usd_per_gpu_hour == 3.25
